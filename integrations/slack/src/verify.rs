//! Slack's request signing (v0): `X-Slack-Signature` is `v0=` + hex HMAC-SHA256 of
//! `v0:<X-Slack-Request-Timestamp>:<raw body>` under the app's signing secret.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Deliveries older or newer than this (seconds) are refused: a replayed one is stale.
pub const WINDOW_SECONDS: i64 = 300;

#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Missing,
    Stale,
    Mismatch,
}

impl Refusal {
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Missing => "no Slack signature or timestamp",
            Refusal::Stale => "the delivery's timestamp is outside the 5-minute window",
            Refusal::Mismatch => "the signature does not match",
        }
    }
}

/// The signature Slack sends for `body` at `timestamp`.
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks a delivery: the timestamp within the window of `now_secs`, then the signature in
/// constant time.
pub fn check(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_secs: i64,
) -> Result<(), Refusal> {
    let (Some(ts), Some(sig)) = (timestamp, signature) else {
        return Err(Refusal::Missing);
    };
    let when: i64 = ts.trim().parse().map_err(|_| Refusal::Stale)?;
    if (now_secs - when).abs() > WINDOW_SECONDS {
        return Err(Refusal::Stale);
    }
    let expected = sign(secret, ts.trim(), body);
    let given = sig.trim().as_bytes();
    if expected.len() == given.len() && bool::from(expected.as_bytes().ct_eq(given)) {
        Ok(())
    } else {
        Err(Refusal::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slack's documented example (api.slack.com/authentication/verifying-requests-from-slack).
    #[test]
    fn slacks_documented_example() {
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        let ts = "1531420618";
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign(secret, ts, body), sig);
        assert_eq!(
            check(secret, Some(ts), Some(sig), body, 1531420618 + 10),
            Ok(())
        );
        assert_eq!(
            check(secret, Some(ts), Some(sig), body, 1531420618 + 301),
            Err(Refusal::Stale)
        );
        assert_eq!(
            check(secret, Some(ts), Some(sig), b"changed", 1531420618),
            Err(Refusal::Mismatch)
        );
        assert_eq!(
            check("other", Some(ts), Some(sig), body, 1531420618),
            Err(Refusal::Mismatch)
        );
        assert_eq!(
            check(secret, None, Some(sig), body, 1531420618),
            Err(Refusal::Missing)
        );
        assert_eq!(
            check(secret, Some("soon"), Some(sig), body, 1531420618),
            Err(Refusal::Stale)
        );
    }
}
