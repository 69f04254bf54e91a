//! Bearer secrets we hand out (browser sessions, personal API tokens, OAuth `state`) and
//! the cookies that carry them. Only a token's SHA-256 is ever stored.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The browser session cookie.
pub const SESSION_COOKIE: &str = "inspect_session";
/// The OAuth `state`, bound to the browser that started the sign-in.
pub const STATE_COOKIE: &str = "inspect_oauth_state";
/// Browser sessions last 7 days.
pub const SESSION_TTL_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// A sign-in must come back within 10 minutes.
pub const STATE_TTL_MS: i64 = 10 * 60 * 1000;
/// Personal API tokens start with this, so a leaked one is recognisable.
pub const API_TOKEN_PREFIX: &str = "oit_";

pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A token from 32 random bytes.
pub fn encode(prefix: &str, random: &[u8; 32]) -> String {
    format!("{prefix}{}", hex::encode(random))
}

/// Equal, in time that does not depend on where they differ.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The value of one cookie in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, Secure unless served on loopback.
pub fn set_cookie(name: &str, value: &str, path: &str, max_age_s: i64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path={path}; Max-Age={max_age_s}; HttpOnly; SameSite=Lax{secure}")
}

/// A `Set-Cookie` value that removes the cookie.
pub fn clear_cookie(name: &str, path: &str, secure: bool) -> String {
    set_cookie(name, "", path, 0, secure)
}

/// Where to send a browser after sign-in: only a path on this site (no `//host`, no
/// scheme), else `/`.
pub fn safe_return_to(value: Option<&str>) -> String {
    match value {
        Some(v)
            if v.starts_with('/')
                && !v.starts_with("//")
                && !v.starts_with("/\\")
                && v.len() <= 1024
                && !v.chars().any(|c| c.is_control()) =>
        {
            v.to_owned()
        }
        _ => "/".to_owned(),
    }
}

/// A personal API token's display name.
pub fn valid_token_name(name: &str) -> bool {
    let name = name.trim();
    !name.is_empty() && name.chars().count() <= 100 && !name.chars().any(|c| c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_hash_and_compare() {
        let t = encode(API_TOKEN_PREFIX, &[0xab; 32]);
        assert!(t.starts_with("oit_abab"));
        assert_eq!(t.len(), 4 + 64);
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
    }

    #[test]
    fn cookies_parse_and_build() {
        let h = "a=1; inspect_session=xyz; other=2";
        assert_eq!(cookie(h, SESSION_COOKIE), Some("xyz"));
        assert_eq!(cookie(h, "missing"), None);
        assert_eq!(cookie("inspect_sessionx=1", SESSION_COOKIE), None);
        let c = set_cookie(SESSION_COOKIE, "v", "/", 60, true);
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Lax") && c.contains("Secure"));
        assert!(!set_cookie(SESSION_COOKIE, "v", "/", 60, false).contains("Secure"));
        assert!(clear_cookie(SESSION_COOKIE, "/", false).contains("Max-Age=0"));
    }

    #[test]
    fn return_paths_stay_on_this_site() {
        assert_eq!(
            safe_return_to(Some("/sessions/abc?x=1")),
            "/sessions/abc?x=1"
        );
        for bad in [
            "https://evil.example",
            "//evil.example",
            "/\\evil.example",
            "evil",
            "/a\nb",
        ] {
            assert_eq!(safe_return_to(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_return_to(None), "/");
    }
}
