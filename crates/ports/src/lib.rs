//! A sandbox's tunnelled port is for the session's people only. The control plane signs a
//! short-lived link token for a person who may see the session; the port's gate (the local
//! host's forwarder) checks it, swaps it for a longer-lived cookie it signs itself, and lets
//! through only requests that carry one. Each token names its kind, the sandbox and the
//! port, and when it expires, so one for another sandbox, port or purpose, or a stale one,
//! opens nothing. Pure: no clock, no I/O.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How long a link from the session page may be opened.
pub const LINK_TTL_SECS: u64 = 300;
/// How long the cookie a link is swapped for lasts.
pub const COOKIE_TTL_SECS: u64 = 12 * 3600;
/// The query parameter a link carries its token in.
pub const LINK_PARAM: &str = "inspect_port_token";

/// What a token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Link,
    Cookie,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Link => "link",
            Kind::Cookie => "cookie",
        }
    }
}

fn mac(key: &[u8], kind: Kind, sandbox: &str, port: u16, expires: u64) -> Hmac<Sha256> {
    // HMAC takes a key of any length; this cannot fail.
    let mut m = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts every key length"),
    };
    m.update(format!("inspect-port|{}|{sandbox}|{port}|{expires}", kind.as_str()).as_bytes());
    m
}

/// A token: `<expires>.<hex HMAC>`.
pub fn sign(key: &[u8], kind: Kind, sandbox: &str, port: u16, expires: u64) -> String {
    let tag = mac(key, kind, sandbox, port, expires)
        .finalize()
        .into_bytes();
    format!("{expires}.{}", hex::encode(tag))
}

/// Whether `token` is a `kind` token for this sandbox's `port`, unexpired at `now` (unix
/// seconds). The tag is compared in constant time.
pub fn check(key: &[u8], kind: Kind, sandbox: &str, port: u16, token: &str, now: u64) -> bool {
    let Some((expires, tag)) = token.split_once('.') else {
        return false;
    };
    let Ok(expires) = expires.parse::<u64>() else {
        return false;
    };
    if expires <= now || tag.len() != 64 {
        return false;
    }
    let Ok(tag) = hex::decode(tag) else {
        return false;
    };
    mac(key, kind, sandbox, port, expires)
        .verify_slice(&tag)
        .is_ok()
}

/// The key a cloud sandbox's own gates check tokens with: derived from the deployment's
/// secret for that one sandbox, so a sandbox that learns its key opens nothing of another.
pub fn sandbox_key(secret: &[u8], sandbox: &str) -> String {
    let mut m = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts every key length"),
    };
    m.update(format!("inspect-gate-key|{sandbox}").as_bytes());
    hex::encode(m.finalize().into_bytes())
}

fn grant_mac(key: &[u8], sandbox: &str, payload: &str) -> Hmac<Sha256> {
    let mut m = match Hmac::<Sha256>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC accepts every key length"),
    };
    m.update(format!("inspect-egress|{sandbox}|{payload}").as_bytes());
    m
}

/// A sandbox's grant for a shared egress proxy: `payload` (its policy, as the control plane
/// wrote it) readable by the proxy and signed for this sandbox, as `<hex payload>.<hex
/// HMAC>` (URL-safe: it is the password of the proxy's address).
pub fn seal_grant(key: &[u8], sandbox: &str, payload: &str) -> String {
    let tag = grant_mac(key, sandbox, payload).finalize().into_bytes();
    format!("{}.{}", hex::encode(payload), hex::encode(tag))
}

/// The payload of `sandbox`'s grant, if `token` is one signed with `key` (the tag compared
/// in constant time).
pub fn open_grant(key: &[u8], sandbox: &str, token: &str) -> Option<String> {
    let (payload, tag) = token.split_once('.')?;
    let payload = String::from_utf8(hex::decode(payload).ok()?).ok()?;
    let tag = hex::decode(tag).ok()?;
    grant_mac(key, sandbox, &payload)
        .verify_slice(&tag)
        .ok()
        .map(|_| payload)
}

/// The cookie a port's gate sets, named for the address it serves (cookies do not keep
/// ports apart).
pub fn cookie_name(public_port: u16) -> String {
    format!("inspect_port_{public_port}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_opens_for_its_sandbox_and_key_alone() {
        let g = seal_grant(b"k", "sb_1", r#"{"mode":"off"}"#);
        assert_eq!(
            open_grant(b"k", "sb_1", &g).as_deref(),
            Some(r#"{"mode":"off"}"#)
        );
        assert_eq!(open_grant(b"k", "sb_2", &g), None, "another sandbox");
        assert_eq!(open_grant(b"x", "sb_1", &g), None, "another key");
        let (_, tag) = g.split_once('.').unwrap_or_default();
        let widened = format!("{}.{tag}", hex::encode(r#"{"mode":"open"}"#));
        assert_eq!(open_grant(b"k", "sb_1", &widened), None, "a changed policy");
        for junk in ["", ".", "zz.zz", "00"] {
            assert_eq!(open_grant(b"k", "sb_1", junk), None, "{junk}");
        }
    }

    #[test]
    fn a_token_opens_only_its_sandbox_port_and_purpose_until_it_expires() {
        let key = b"host secret";
        let t = sign(key, Kind::Link, "sb_1", 3000, 1_000);
        assert!(check(key, Kind::Link, "sb_1", 3000, &t, 999));
        assert!(!check(key, Kind::Link, "sb_1", 3000, &t, 1_000), "expired");
        assert!(
            !check(key, Kind::Cookie, "sb_1", 3000, &t, 999),
            "another purpose"
        );
        assert!(
            !check(key, Kind::Link, "sb_2", 3000, &t, 999),
            "another sandbox"
        );
        assert!(
            !check(key, Kind::Link, "sb_1", 3001, &t, 999),
            "another port"
        );
        assert!(
            !check(b"other", Kind::Link, "sb_1", 3000, &t, 999),
            "another key"
        );
        let (exp, tag) = t.split_once('.').unwrap_or_default();
        let later = format!("{}.{tag}", exp.parse::<u64>().unwrap_or(0) + 100);
        assert!(
            !check(key, Kind::Link, "sb_1", 3000, &later, 999),
            "a moved expiry"
        );
        let (a, b) = (sandbox_key(b"s", "sb_1"), sandbox_key(b"s", "sb_2"));
        assert_ne!(a, b, "each sandbox its own key");
        assert_eq!(a, sandbox_key(b"s", "sb_1"));
        assert_ne!(a, sandbox_key(b"t", "sb_1"));
        for junk in [
            "",
            ".",
            "1000",
            "x.y",
            "1000.zz",
            &format!("1000.{}", "0".repeat(64)),
        ] {
            assert!(!check(key, Kind::Link, "sb_1", 3000, junk, 1), "{junk}");
        }
    }
}
