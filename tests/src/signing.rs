//! Request signatures as the services that send them compute them, written here from each
//! scheme's description (not from the control plane's code): `sig1` for service clients,
//! `X-Hub-Signature-256` for GitHub's webhook deliveries, `X-Slack-Signature` for Slack's,
//! `Sentry-Hook-Signature` for Sentry's.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

fn hmac_hex(secret: &str, data: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(data);
    hex::encode(mac.finalize().into_bytes())
}

/// The `X-OpenInspect-Service-Signature` value for one request.
#[allow(clippy::too_many_arguments)] // the scheme's own fields, in its order
pub fn sig1(
    secret: &str,
    service: &str,
    at_ms: u128,
    method: &str,
    path: &str,
    canonical_query: &str,
    body: &[u8],
    actor: &str,
) -> String {
    let nonce = "5eed";
    let body_hash = hex::encode(Sha256::digest(body));
    let text = format!(
        "sig1\n{service}\n{at_ms}\n{nonce}\n{method}\n{path}\n{canonical_query}\n{body_hash}\n{actor}"
    );
    format!("sig1.{at_ms}.{nonce}.{}", hmac_hex(secret, text.as_bytes()))
}

/// Slack's `X-Slack-Signature` for a body sent at `timestamp` (seconds): `v0=` and the hex
/// HMAC of `v0:<timestamp>:<body>`.
pub fn slack(secret: &str, timestamp: u64, body: &[u8]) -> String {
    let mut data = format!("v0:{timestamp}:").into_bytes();
    data.extend_from_slice(body);
    format!("v0={}", hmac_hex(secret, &data))
}

/// GitHub's `X-Hub-Signature-256`: `sha256=` and the hex HMAC of the raw body.
pub fn github_webhook(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hmac_hex(secret, body))
}

/// Sentry's `Sentry-Hook-Signature`: the hex HMAC-SHA256 of the raw body with the
/// integration's client secret.
pub fn sentry(client_secret: &str, body: &[u8]) -> String {
    hmac_hex(client_secret, body)
}

pub fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}
