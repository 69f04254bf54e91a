//! Which identities may be linked to a person, and the shape of what a link carries. Pure.

/// Addresses kept per person for the email rule, at most.
pub const MAX_EMAILS: usize = 50;

/// The service an identity another service asserts belongs to (`slack:U123` → `slack`),
/// or `None` for anything that is not linkable (a sign-in identity, a service, a guest of
/// an unknown kind).
pub fn provider(identity: &str) -> Option<&'static str> {
    let (kind, id) = identity.split_once(':')?;
    let plain = !id.is_empty()
        && id.len() <= 100
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    match kind {
        "slack" if plain => Some("slack"),
        "linear" if plain => Some("linear"),
        // A Google sign-in linked to a person who signs in with GitHub too.
        "google" if plain => Some("google"),
        _ => None,
    }
}

/// A display name as kept: one line, at most 100 characters.
pub fn display_name(name: &str) -> String {
    let line: String = name
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(100)
        .collect();
    line.trim().to_owned()
}

/// Codes are 32 lower-case hex characters; anything else is refused before a lookup.
pub fn plausible_code(code: &str) -> bool {
    code.len() == 32 && code.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_identities_other_services_assert_are_linkable() {
        assert_eq!(provider("slack:U123"), Some("slack"));
        assert_eq!(provider("slack:T1.U123"), Some("slack"));
        assert_eq!(
            provider("linear:2f1c6c0e-6b51-4c1b-9a5e-0c2d3f4a5b6c"),
            Some("linear")
        );
        for not in [
            "github:1001",
            "local",
            "service:slack-bot",
            "slack:",
            "slack:U 1",
            "slack:U1/../x",
            "linear:",
        ] {
            assert_eq!(provider(not), None, "{not}");
        }
        assert_eq!(
            provider("google:10769150350006150715113082367"),
            Some("google")
        );
        assert_eq!(display_name("  Ann\nO'Neil "), "Ann O'Neil");
        assert!(plausible_code("0123456789abcdef0123456789abcdef"));
        assert!(!plausible_code("0123456789abcdef0123456789abcde"));
        assert!(!plausible_code("0123456789abcdef0123456789abcdeg"));
    }
}
