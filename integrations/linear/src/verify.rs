//! Linear's webhook signing: `Linear-Signature` is the hex HMAC-SHA256 of the raw body
//! under the webhook's signing secret, and the body's `webhookTimestamp` (ms) says when it
//! was sent. A delivery is taken only when both hold: the signature in constant time, the
//! timestamp within a minute (Linear's advice; a replay is stale).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Deliveries sent longer ago (or further ahead) than this are refused.
pub const WINDOW_MS: i64 = 60_000;

#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Missing,
    Mismatch,
    NoTimestamp,
    Stale,
}

impl Refusal {
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Missing => "no Linear-Signature header",
            Refusal::Mismatch => "the signature does not match",
            Refusal::NoTimestamp => "the delivery has no webhookTimestamp",
            Refusal::Stale => "the delivery's webhookTimestamp is more than a minute away",
        }
    }
}

/// The signature Linear sends for `body`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// Checks a delivery: the signature first (nothing of an unsigned body is read), then its
/// `webhookTimestamp` against `now_ms`.
pub fn check(
    secret: &str,
    signature: Option<&str>,
    body: &[u8],
    now_ms: i64,
) -> Result<(), Refusal> {
    let given = signature.map(str::trim).filter(|s| !s.is_empty());
    let Some(given) = given else {
        return Err(Refusal::Missing);
    };
    let expected = sign(secret, body);
    let given = given.to_ascii_lowercase();
    if expected.len() != given.len() || !bool::from(expected.as_bytes().ct_eq(given.as_bytes())) {
        return Err(Refusal::Mismatch);
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Stamp {
        webhook_timestamp: Option<serde_json::Value>,
    }
    let stamp: Stamp =
        inspect_protocol::json::from_slice(body).map_err(|_| Refusal::NoTimestamp)?;
    let when = match stamp.webhook_timestamp {
        Some(serde_json::Value::Number(n)) => n.as_i64(),
        Some(serde_json::Value::String(s)) => s.parse().ok(),
        _ => None,
    }
    .ok_or(Refusal::NoTimestamp)?;
    if (now_ms - when).abs() > WINDOW_MS {
        return Err(Refusal::Stale);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_000_000_000;

    #[test]
    fn a_signed_fresh_delivery_passes_and_nothing_else_does() {
        let body = format!(r#"{{"type":"AgentSessionEvent","webhookTimestamp":{NOW}}}"#);
        let sig = sign("s3cret", body.as_bytes());
        assert_eq!(
            check("s3cret", Some(&sig), body.as_bytes(), NOW + 5_000),
            Ok(())
        );
        assert_eq!(
            check("s3cret", Some(&sig.to_uppercase()), body.as_bytes(), NOW),
            Ok(())
        );
        assert_eq!(
            check("s3cret", None, body.as_bytes(), NOW),
            Err(Refusal::Missing)
        );
        assert_eq!(
            check("other", Some(&sig), body.as_bytes(), NOW),
            Err(Refusal::Mismatch)
        );
        assert_eq!(
            check("s3cret", Some("00"), body.as_bytes(), NOW),
            Err(Refusal::Mismatch)
        );
        assert_eq!(
            check("s3cret", Some(&sig), body.as_bytes(), NOW + 61_000),
            Err(Refusal::Stale)
        );
        let bare = br#"{"type":"AgentSessionEvent"}"#;
        assert_eq!(
            check("s3cret", Some(&sign("s3cret", bare)), bare, NOW),
            Err(Refusal::NoTimestamp)
        );
    }
}
