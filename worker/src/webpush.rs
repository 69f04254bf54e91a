//! Web Push's framing, pure: the VAPID keys read from settings and the JWT's signing input
//! (RFC 8292), and the `aes128gcm` message of RFC 8291 (the key info, the HKDF labels, the
//! header). The crypto itself (ECDH, HKDF, ECDSA) is the runtime's WebCrypto and AES-GCM
//! the `aes-gcm` crate, put together by `push` on the Worker.

use base64::Engine as _;
use inspect_protocol::ApiError;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The record size said in the header: one record holds the whole message.
pub const RECORD_SIZE: u32 = 4096;
/// The most plaintext one push carries (a record less the padding delimiter and the tag,
/// well under what push services take).
pub const MAX_PLAINTEXT: usize = 3000;
/// How long a VAPID token is good for (RFC 8292 allows at most 24 hours).
pub const VAPID_LIFETIME_SECS: i64 = 12 * 3600;
/// How long a push service keeps a message for an offline browser.
pub const TTL_SECS: u32 = 24 * 3600;

pub const CEK_INFO: &[u8] = b"Content-Encoding: aes128gcm\0";
pub const NONCE_INFO: &[u8] = b"Content-Encoding: nonce\0";

/// The deployment's application server keys: a P-256 pair, as `web-push
/// generate-vapid-keys` prints them (base64url: the public point, 65 bytes; the private
/// scalar, 32 bytes).
#[derive(Debug, Clone)]
pub struct VapidKeys {
    pub public: Vec<u8>,
    pub d: Vec<u8>,
}

impl VapidKeys {
    pub fn parse(public: &str, private: &str) -> Result<VapidKeys, ApiError> {
        let public = B64
            .decode(public.trim().trim_end_matches('='))
            .ok()
            .filter(|p| p.len() == 65 && p[0] == 4)
            .ok_or_else(|| {
                ApiError::internal(
                    "VAPID_PUBLIC_KEY is not a P-256 public key (65 bytes, base64url)",
                )
            })?;
        let d = B64
            .decode(private.trim().trim_end_matches('='))
            .ok()
            .filter(|d| d.len() == 32)
            .ok_or_else(|| {
                ApiError::internal(
                    "VAPID_PRIVATE_KEY is not a P-256 private key (32 bytes, base64url)",
                )
            })?;
        Ok(VapidKeys { public, d })
    }

    pub fn x(&self) -> &[u8] {
        &self.public[1..33]
    }

    pub fn y(&self) -> &[u8] {
        &self.public[33..65]
    }

    pub fn public_b64(&self) -> String {
        B64.encode(&self.public)
    }
}

/// The audience of a VAPID token: the push endpoint's origin.
pub fn audience(endpoint: &str) -> Option<String> {
    let (scheme, rest) = endpoint.split_once("://")?;
    let host = rest.split(['/', '?', '#']).next()?;
    if host.is_empty() || !matches!(scheme, "https" | "http") {
        return None;
    }
    Some(format!("{scheme}://{host}"))
}

/// The JWT's `header.claims`, to be signed with ES256.
pub fn vapid_signing_input(aud: &str, subject: &str, now_secs: i64) -> String {
    let header = B64.encode(br#"{"typ":"JWT","alg":"ES256"}"#);
    let claims = serde_json::json!({
        "aud": aud,
        "exp": now_secs + VAPID_LIFETIME_SECS,
        "sub": subject,
    });
    format!("{header}.{}", B64.encode(claims.to_string()))
}

/// The `Authorization` header: the signed token and the public key it is checked with.
pub fn vapid_authorization(signing_input: &str, signature: &[u8], keys: &VapidKeys) -> String {
    format!(
        "vapid t={signing_input}.{}, k={}",
        B64.encode(signature),
        keys.public_b64()
    )
}

/// `"WebPush: info" ‖ 0x00 ‖ ua_public ‖ as_public`: the info that mixes the browser's
/// authentication secret into the key.
pub fn key_info(ua_public: &[u8], as_public: &[u8]) -> Vec<u8> {
    let mut info = b"WebPush: info\0".to_vec();
    info.extend_from_slice(ua_public);
    info.extend_from_slice(as_public);
    info
}

/// The plaintext of the one record: the payload then the last record's delimiter (2).
pub fn record(payload: &[u8]) -> Result<Vec<u8>, ApiError> {
    if payload.len() > MAX_PLAINTEXT {
        return Err(ApiError::bad_request(format!(
            "a push message is at most {MAX_PLAINTEXT} bytes"
        )));
    }
    let mut out = payload.to_vec();
    out.push(2);
    Ok(out)
}

/// The message's body: `salt ‖ rs ‖ idlen ‖ keyid (the sender's public key) ‖ ciphertext`.
pub fn message(salt: &[u8; 16], as_public: &[u8], ciphertext: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + 4 + 1 + as_public.len() + ciphertext.len());
    out.extend_from_slice(salt);
    out.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    out.push(as_public.len() as u8);
    out.extend_from_slice(as_public);
    out.extend_from_slice(ciphertext);
    out
}

/// A push service's answer: whether the subscription is gone for good (removed, never
/// retried), per RFC 8030 (404, 410).
pub fn subscription_gone(status: u16) -> bool {
    matches!(status, 404 | 410)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn b(s: &str) -> Vec<u8> {
        B64.decode(s).unwrap()
    }

    // RFC 8291, Appendix A.
    const AS_PUBLIC: &str =
        "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8";
    const UA_PUBLIC: &str =
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";

    #[test]
    fn the_key_info_is_rfc_8291s() {
        let info = key_info(&b(UA_PUBLIC), &b(AS_PUBLIC));
        assert_eq!(
            B64.encode(info),
            "V2ViUHVzaDogaW5mbwAEJXGyvs3942BVGq8e0PTNNmwRzr5VX4m8t7GGpTM5FzFo7OLr4BhZe9MEebhuPI-OztV3ylkYfpJGmQ22ggCLDgT-M_SrDepxkU21WCP3O1SUj0EwbZIHMtu5pZpTKGSCIA5Zent7wmC6HCJ5mFgJkuk5cwAvMBKiiujwa7t45ewP"
        );
    }

    #[test]
    fn the_header_is_rfc_8291s() {
        let salt: [u8; 16] = b("DGv6ra1nlYgDCS1FRnbzlw").try_into().unwrap();
        let body = message(&salt, &b(AS_PUBLIC), b"");
        assert!(B64
            .encode(&body)
            .starts_with("DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A"));
        assert_eq!(body.len(), 86);
    }

    #[test]
    fn vapid_parts() {
        assert_eq!(
            audience("https://push.example.net:8443/wpush/abc?x").as_deref(),
            Some("https://push.example.net:8443")
        );
        assert!(audience("push.example/x").is_none());
        assert!(audience("https:///x").is_none());
        let input = vapid_signing_input("https://p.example", "mailto:ops@example.com", 100);
        let (h, c) = input.split_once('.').unwrap();
        assert_eq!(b(h), br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims: serde_json::Value = serde_json::from_slice(&b(c)).unwrap();
        assert_eq!(claims["exp"], 100 + VAPID_LIFETIME_SECS);
        assert_eq!(claims["aud"], "https://p.example");
        let keys = VapidKeys::parse(AS_PUBLIC, &B64.encode([7u8; 32])).unwrap();
        assert_eq!(keys.x().len(), 32);
        assert_eq!(keys.y().len(), 32);
        let auth = vapid_authorization(&input, &[1u8; 64], &keys);
        assert!(auth.starts_with("vapid t="));
        assert!(auth.ends_with(&format!(", k={AS_PUBLIC}")));
        assert!(VapidKeys::parse("nope", "x").is_err());
        assert!(VapidKeys::parse(AS_PUBLIC, "AAAA").is_err());
    }

    #[test]
    fn one_record_ends_with_its_delimiter() {
        assert_eq!(record(b"hi").unwrap(), b"hi\x02");
        assert!(record(&[0u8; MAX_PLAINTEXT + 1]).is_err());
        assert!(subscription_gone(410) && subscription_gone(404) && !subscription_gone(429));
    }
}
