//! What the sandbox vendors' clients share: reading a provider's settings, URL pieces, and
//! what an error answer from a vendor's REST API means.

/// The settings as a provider reads them: trimmed, an empty value the same as none.
pub fn trimmed(get: impl Fn(&str) -> Option<String>) -> impl Fn(&str) -> Option<String> {
    move |n: &str| {
        get(n)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }
}

/// `Err("missing A, B")` naming every setting in `required` that has no value.
pub fn require(get: &impl Fn(&str) -> Option<String>, required: &[&str]) -> Result<(), String> {
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|n| get(n).is_none())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("missing {}", missing.join(", ")))
    }
}

/// The setting `name`'s URL without a trailing slash, or `default`; only http(s).
pub fn base_url(
    get: &impl Fn(&str) -> Option<String>,
    name: &str,
    default: &str,
) -> Result<String, String> {
    let url = get(name).unwrap_or_else(|| default.to_owned());
    let url = url.trim_end_matches('/').to_owned();
    if url.starts_with("https://") || url.starts_with("http://") {
        Ok(url)
    } else {
        Err(format!("{name} is not an http(s) URL: {url}"))
    }
}

/// Percent-encodes a path segment or a query value (everything but RFC 3986's unreserved
/// characters).
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// What an error answer from a vendor's API means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    NotFound,
    /// Worth trying again later: the vendor was down or slow.
    Transient(String),
    /// A quota or rate limit: wait until sandboxes end, then ask again.
    Quota(String),
    /// Asking again unchanged will not help.
    Permanent(String),
}

/// Classifies `status` with the vendor's `message`: 404 not found; 429, and a 403 that
/// speaks of a quota, wait; 408 and 5xx are transient; the rest permanent. The words say
/// who answered (`"{vendor} answered {status}: {message}"`).
pub fn classify(vendor: &str, status: u16, message: &str) -> Failure {
    let said = format!("{vendor} answered {status}: {message}");
    match status {
        404 => Failure::NotFound,
        429 => Failure::Quota(said),
        403 if message.to_ascii_lowercase().contains("quota") => Failure::Quota(said),
        408 | 500..=599 => Failure::Transient(said),
        _ => Failure::Permanent(said),
    }
}

/// A body's first 300 characters, for an answer that is not the vendor's error shape.
pub fn excerpt(body: &str) -> String {
    body.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_urls_and_failures() {
        let get = trimmed(|n: &str| match n {
            "A" => Some(" a ".into()),
            "EMPTY" => Some("  ".into()),
            "URL" => Some("ftp://x".into()),
            _ => None,
        });
        assert_eq!(get("A").as_deref(), Some("a"));
        assert_eq!(
            require(&get, &["A", "EMPTY", "B"]),
            Err("missing EMPTY, B".into())
        );
        assert_eq!(
            base_url(&get, "NONE", "https://d/").as_deref(),
            Ok("https://d")
        );
        assert!(base_url(&get, "URL", "https://d").is_err());
        assert_eq!(encode("a=b c"), "a%3Db%20c");
        assert_eq!(classify("x", 404, ""), Failure::NotFound);
        assert!(matches!(
            classify("x", 403, "CPU quota exceeded"),
            Failure::Quota(_)
        ));
        assert!(matches!(
            classify("x", 403, "forbidden"),
            Failure::Permanent(_)
        ));
        assert!(matches!(classify("x", 503, ""), Failure::Transient(m) if m == "x answered 503: "));
    }
}
