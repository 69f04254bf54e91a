//! A fake Web Push service, and the browser end of its subscriptions, as the RFCs define
//! them: a message is a POST to the subscription's endpoint (RFC 8030) with `TTL`,
//! `Content-Encoding: aes128gcm` and a body encrypted to the browser's P-256 key and
//! authentication secret (RFC 8291); the sender proves itself with a VAPID token (RFC 8292:
//! `Authorization: vapid t=<ES256 JWT>, k=<public key>`, the JWT's `aud` the endpoint's
//! origin, `exp` within 24 hours, a `sub`). The fake checks each of those, decrypts the
//! body as the browser would, and answers 201; a message it cannot check is refused
//! (400/401/403) and kept among the refusals. An endpoint can be made gone (410), as a push
//! service answers for a subscription the browser dropped.

use aes_gcm::aead::{Aead, KeyInit};
use anyhow::{anyhow, bail, Context, Result};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use p256::ecdsa::signature::Verifier;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// A browser's subscription: its keys (the private half stays here) and endpoint.
struct Browser {
    secret: p256::SecretKey,
    auth: [u8; 16],
}

/// A message the service took: the subscription it was for and its decrypted payload.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub subscription: String,
    pub payload: Value,
    /// The VAPID token's claims.
    pub claims: Value,
    pub ttl: String,
}

#[derive(Default)]
struct World {
    browsers: HashMap<String, Browser>,
    gone: HashSet<String>,
    delivered: Vec<Delivered>,
    refused: Vec<String>,
    /// Messages sent to a subscription after it was gone.
    gone_hits: usize,
    /// The application server key a subscription was made with (its `k` must match).
    server_key: Option<String>,
}

fn locked(m: &Mutex<World>) -> std::sync::MutexGuard<'_, World> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Clone)]
struct Shared {
    base_url: String,
    world: Arc<Mutex<World>>,
}

pub struct FakePush {
    pub base_url: String,
    world: Arc<Mutex<World>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakePush {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakePush {
    pub async fn start() -> Result<FakePush> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let world = Arc::new(Mutex::new(World::default()));
        let shared = Shared {
            base_url: base_url.clone(),
            world: world.clone(),
        };
        let app = Router::new()
            .route("/push/{id}", post(push))
            .with_state(shared);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakePush {
            base_url,
            world,
            task,
        })
    }

    /// What a browser's `pushManager.subscribe({applicationServerKey})` gives: a new
    /// subscription (as `PushSubscription.toJSON()`), its keys made here.
    pub fn subscribe(&self, application_server_key: &str) -> Value {
        let secret = p256::SecretKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
        let public = secret.public_key().to_encoded_point(false);
        let auth: [u8; 16] = rand::random();
        let id = format!("{:016x}", rand::random::<u64>());
        let mut world = locked(&self.world);
        world.server_key = Some(application_server_key.to_owned());
        world.browsers.insert(id.clone(), Browser { secret, auth });
        json!({
            "endpoint": format!("{}/push/{id}", self.base_url),
            "expirationTime": null,
            "keys": {
                "p256dh": B64.encode(public.as_bytes()),
                "auth": B64.encode(auth),
            }
        })
    }

    /// The push service forgets a subscription: its endpoint answers 410 from now on.
    pub fn drop_subscription(&self, endpoint: &str) {
        let id = endpoint.rsplit('/').next().unwrap_or_default().to_owned();
        locked(&self.world).gone.insert(id);
    }

    pub fn delivered(&self) -> Vec<Delivered> {
        locked(&self.world).delivered.clone()
    }

    /// How many messages were sent to dropped subscriptions (and answered 410).
    pub fn gone_hits(&self) -> usize {
        locked(&self.world).gone_hits
    }

    pub fn refused(&self) -> Vec<String> {
        locked(&self.world).refused.clone()
    }
}

/// A new application server key pair, as `web-push generate-vapid-keys` prints it
/// (base64url: the public point, the private scalar): the deployment's VAPID settings.
pub fn vapid_keys() -> (String, String) {
    let secret = p256::SecretKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
    let public = secret.public_key().to_encoded_point(false);
    (B64.encode(public.as_bytes()), B64.encode(secret.to_bytes()))
}

async fn push(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    if locked(&shared.world).gone.contains(&id) {
        locked(&shared.world).gone_hits += 1;
        return (
            StatusCode::GONE,
            "push subscription has unsubscribed or expired".into(),
        );
    }
    match check(&shared, &id, &headers, &body) {
        Ok(delivered) => {
            locked(&shared.world).delivered.push(delivered);
            (StatusCode::CREATED, String::new())
        }
        Err((status, why)) => {
            locked(&shared.world).refused.push(why.clone());
            (status, why)
        }
    }
}

fn check(
    shared: &Shared,
    id: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> std::result::Result<Delivered, (StatusCode, String)> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let bad = |why: &str| (StatusCode::BAD_REQUEST, why.to_owned());
    let ttl = header("ttl").ok_or_else(|| bad("TTL is required (RFC 8030)"))?;
    if ttl.parse::<u32>().is_err() {
        return Err(bad("TTL is a number of seconds"));
    }
    if header("content-encoding").as_deref() != Some("aes128gcm") {
        return Err(bad("Content-Encoding must be aes128gcm (RFC 8291)"));
    }
    let authorization = header("authorization").ok_or_else(|| {
        (
            StatusCode::UNAUTHORIZED,
            "no VAPID authorization".to_owned(),
        )
    })?;
    let server_key = locked(&shared.world).server_key.clone();
    let claims = vapid(&authorization, &shared.base_url, server_key.as_deref())
        .map_err(|e| (StatusCode::FORBIDDEN, format!("VAPID: {e}")))?;
    let world = locked(&shared.world);
    let browser = world
        .browsers
        .get(id)
        .ok_or((StatusCode::NOT_FOUND, "no such subscription".to_owned()))?;
    let plaintext = decrypt(&browser.secret, &browser.auth, body)
        .map_err(|e| bad(&format!("the body does not decrypt: {e}")))?;
    let payload: Value = serde_json::from_slice(&plaintext)
        .map_err(|e| bad(&format!("the payload is not JSON: {e}")))?;
    Ok(Delivered {
        subscription: id.to_owned(),
        payload,
        claims,
        ttl,
    })
}

/// Checks `vapid t=…, k=…`: an ES256 JWT signed by `k`, for this origin, not expired and
/// not good for more than a day, with a subject; `k` the key subscriptions were made with.
fn vapid(authorization: &str, origin: &str, server_key: Option<&str>) -> Result<Value> {
    let rest = authorization
        .strip_prefix("vapid ")
        .context("the scheme is vapid")?;
    let mut t = None;
    let mut k = None;
    for part in rest.split(',') {
        let (name, value) = part.trim().split_once('=').context("t=…, k=…")?;
        match name {
            "t" => t = Some(value.to_owned()),
            "k" => k = Some(value.to_owned()),
            _ => {}
        }
    }
    let (t, k) = (t.context("no t")?, k.context("no k")?);
    if let Some(expected) = server_key {
        if expected != k {
            bail!("k is not the key the subscription was made with");
        }
    }
    let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(&B64.decode(&k)?)
        .map_err(|e| anyhow!("k is not a P-256 key: {e}"))?;
    let mut parts = t.split('.');
    let (h, c, s) = (
        parts.next().context("header")?,
        parts.next().context("claims")?,
        parts.next().context("signature")?,
    );
    let header: Value = serde_json::from_slice(&B64.decode(h)?)?;
    if header["alg"] != "ES256" {
        bail!("alg must be ES256, not {}", header["alg"]);
    }
    let signature = p256::ecdsa::Signature::from_slice(&B64.decode(s)?)
        .map_err(|e| anyhow!("the signature is not r‖s: {e}"))?;
    key.verify(format!("{h}.{c}").as_bytes(), &signature)
        .map_err(|_| anyhow!("the signature does not verify"))?;
    let claims: Value = serde_json::from_slice(&B64.decode(c)?)?;
    if claims["aud"] != origin {
        bail!("aud {} is not {origin}", claims["aud"]);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    let exp = claims["exp"].as_i64().context("exp")?;
    if exp <= now || exp > now + 24 * 3600 {
        bail!("exp must be within the next 24 hours");
    }
    if claims["sub"].as_str().is_none_or(str::is_empty) {
        bail!("a sub is required");
    }
    Ok(claims)
}

/// Decrypts an `aes128gcm` message as the browser does (RFC 8291, section 3.4).
pub fn decrypt(secret: &p256::SecretKey, auth: &[u8], body: &[u8]) -> Result<Vec<u8>> {
    if body.len() < 21 {
        bail!("shorter than a header");
    }
    let salt = &body[..16];
    let rs = u32::from_be_bytes(body[16..20].try_into()?);
    let idlen = body[20] as usize;
    if body.len() < 21 + idlen {
        bail!("shorter than its key id");
    }
    let as_public = &body[21..21 + idlen];
    let ciphertext = &body[21 + idlen..];
    if ciphertext.len() > rs as usize {
        bail!("more than one record");
    }
    let sender = p256::PublicKey::from_sec1_bytes(as_public)
        .map_err(|e| anyhow!("the key id is not a P-256 key: {e}"))?;
    let shared = p256::ecdh::diffie_hellman(secret.to_nonzero_scalar(), sender.as_affine());
    let ua_public = secret.public_key().to_encoded_point(false);
    let mut info = b"WebPush: info\0".to_vec();
    info.extend_from_slice(ua_public.as_bytes());
    info.extend_from_slice(as_public);
    let mut ikm = [0u8; 32];
    hkdf::Hkdf::<sha2::Sha256>::new(Some(auth), shared.raw_secret_bytes())
        .expand(&info, &mut ikm)
        .map_err(|e| anyhow!("{e}"))?;
    let prk = hkdf::Hkdf::<sha2::Sha256>::new(Some(salt), &ikm);
    let mut cek = [0u8; 16];
    let mut nonce = [0u8; 12];
    prk.expand(b"Content-Encoding: aes128gcm\0", &mut cek)
        .map_err(|e| anyhow!("{e}"))?;
    prk.expand(b"Content-Encoding: nonce\0", &mut nonce)
        .map_err(|e| anyhow!("{e}"))?;
    let cipher = aes_gcm::Aes128Gcm::new_from_slice(&cek)?;
    let mut plain = cipher
        .decrypt(aes_gcm::Nonce::from_slice(&nonce), ciphertext)
        .map_err(|_| anyhow!("the tag does not verify"))?;
    // The last record ends with the delimiter 2, then any zero padding.
    while plain.last() == Some(&0) {
        plain.pop();
    }
    if plain.pop() != Some(2) {
        bail!("the last record's delimiter is not 2");
    }
    Ok(plain)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// RFC 8291, Appendix A: the example message decrypts to its plaintext.
    #[test]
    fn decrypts_rfc_8291s_example() {
        let ua_private = B64
            .decode("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94")
            .unwrap();
        let secret = p256::SecretKey::from_slice(&ua_private).unwrap();
        let auth = B64.decode("BTBZMqHH6r4Tts7J_aSIgg").unwrap();
        let body = B64
            .decode("DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
            .unwrap();
        let plain = decrypt(&secret, &auth, &body).unwrap();
        assert_eq!(plain, b"When I grow up, I want to be a watermelon");
        let mut tampered = body.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(decrypt(&secret, &auth, &tampered).is_err());
    }
}
