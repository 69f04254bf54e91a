//! Sending one Web Push: the payload encrypted to the browser's keys (RFC 8291, by the
//! runtime's WebCrypto and the `aes-gcm` crate) and posted to its push service with a
//! VAPID token (RFC 8292, ES256 by WebCrypto). The framing is `webpush`'s.

use crate::db;
use crate::webpush::{self, VapidKeys};
use aes_gcm::aead::{Aead, KeyInit};
use base64::Engine as _;
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::webcrypto;
use worker::Env;

/// The deployment's VAPID keys and subject, when Web Push is set up.
pub fn vapid(env: &Env) -> Result<Option<(VapidKeys, String)>, ApiError> {
    let (Some(public), Some(private)) = (
        db::setting(env, "VAPID_PUBLIC_KEY"),
        db::setting(env, "VAPID_PRIVATE_KEY"),
    ) else {
        return Ok(None);
    };
    let keys = VapidKeys::parse(&public, &private)?;
    let subject = db::setting(env, "VAPID_SUBJECT")
        .or_else(|| db::setting(env, "PUBLIC_URL"))
        .unwrap_or_else(|| "mailto:admin@localhost".into());
    Ok(Some((keys, subject)))
}

/// A browser's subscription as kept.
pub struct Target<'a> {
    pub endpoint: &'a str,
    pub p256dh: &'a str,
    pub auth: &'a str,
}

/// Encrypts `payload` for the subscription and posts it; the push service's status.
pub async fn send(
    vapid: &(VapidKeys, String),
    to: &Target<'_>,
    payload: &[u8],
    now_ms: i64,
) -> Result<u16, ApiError> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let bad = |what: &str| ApiError::bad_request(format!("the subscription's {what}"));
    let ua_public = b64
        .decode(to.p256dh.trim_end_matches('='))
        .map_err(|_| bad("p256dh"))?;
    let auth = b64
        .decode(to.auth.trim_end_matches('='))
        .map_err(|_| bad("auth"))?;
    let (shared, as_public) = webcrypto::ecdh_p256_ephemeral(&ua_public).await?;
    let info = webpush::key_info(&ua_public, &as_public);
    let ikm = webcrypto::hkdf_sha256(&shared, &auth, &info, 32).await?;
    let salt: [u8; 16] = db::random()?;
    let cek = webcrypto::hkdf_sha256(&ikm, &salt, webpush::CEK_INFO, 16).await?;
    let nonce = webcrypto::hkdf_sha256(&ikm, &salt, webpush::NONCE_INFO, 12).await?;
    let cipher =
        aes_gcm::Aes128Gcm::new_from_slice(&cek).map_err(|e| ApiError::internal(e.to_string()))?;
    let sealed = cipher
        .encrypt(
            aes_gcm::Nonce::from_slice(&nonce),
            webpush::record(payload)?.as_slice(),
        )
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let body = webpush::message(&salt, &as_public, &sealed);

    let (keys, subject) = vapid;
    let aud = webpush::audience(to.endpoint).ok_or_else(|| bad("endpoint"))?;
    let input = webpush::vapid_signing_input(&aud, subject, now_ms / 1000);
    let signature = webcrypto::es256_sign(&keys.d, keys.x(), keys.y(), input.as_bytes()).await?;

    let fail =
        |e: worker::Error| ApiError::new(ErrorCode::Unavailable, format!("the push service: {e}"));
    let headers = worker::Headers::new();
    for (k, v) in [
        ("Content-Type", "application/octet-stream".to_owned()),
        ("Content-Encoding", "aes128gcm".to_owned()),
        ("TTL", webpush::TTL_SECS.to_string()),
        ("Urgency", "normal".to_owned()),
        (
            "Authorization",
            webpush::vapid_authorization(&input, &signature, keys),
        ),
    ] {
        headers.set(k, &v).map_err(fail)?;
    }
    let mut init = worker::RequestInit::new();
    init.with_method(worker::Method::Post)
        .with_headers(headers)
        .with_body(Some(
            worker::js_sys::Uint8Array::from(body.as_slice()).into(),
        ));
    let req = worker::Request::new_with_init(to.endpoint, &init).map_err(fail)?;
    let resp = worker::Fetch::Request(req).send().await.map_err(fail)?;
    Ok(resp.status_code())
}
