//! RSASSA-PKCS1-v1_5 with SHA-256 by the runtime's WebCrypto (`crypto.subtle`): signing a
//! GitHub App's JWT, checking an OpenID provider's `id_token`. No RSA code in the wasm.

use inspect_protocol::ApiError;
use worker::js_sys::{self, Array, Function, Object, Promise, Reflect, Uint8Array};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;

fn js(e: JsValue) -> ApiError {
    ApiError::internal(format!("WebCrypto: {e:?}"))
}

async fn call(target: &JsValue, method: &str, args: &Array) -> Result<JsValue, ApiError> {
    let f: Function = Reflect::get(target, &method.into())
        .map_err(js)?
        .dyn_into()
        .map_err(js)?;
    let promise: Promise = f.apply(target, args).map_err(js)?.dyn_into().map_err(js)?;
    JsFuture::from(promise).await.map_err(js)
}

fn subtle() -> Result<JsValue, ApiError> {
    let crypto = Reflect::get(&js_sys::global(), &"crypto".into()).map_err(js)?;
    Reflect::get(&crypto, &"subtle".into()).map_err(js)
}

fn rs256() -> Result<JsValue, ApiError> {
    let algorithm = Object::new();
    Reflect::set(&algorithm, &"name".into(), &"RSASSA-PKCS1-v1_5".into()).map_err(js)?;
    Reflect::set(&algorithm, &"hash".into(), &"SHA-256".into()).map_err(js)?;
    Ok(algorithm.into())
}

/// Imports a key (`format`: `pkcs8` bytes, or a `jwk` object) for `usage` (`sign` or
/// `verify`); `None` when WebCrypto will not take it.
async fn import(format: &str, data: &JsValue, usage: &str) -> Result<Option<JsValue>, ApiError> {
    let args = Array::of5(
        &format.into(),
        data,
        &rs256()?,
        &false.into(),
        &Array::of1(&usage.into()),
    );
    Ok(call(&subtle()?, "importKey", &args).await.ok())
}

/// Signs `data` with an RSA private key in PKCS#8 DER; `None` when the key is not one.
pub async fn rs256_sign(pkcs8_der: &[u8], data: &[u8]) -> Result<Option<Vec<u8>>, ApiError> {
    let Some(key) = import("pkcs8", &Uint8Array::from(pkcs8_der).into(), "sign").await? else {
        return Ok(None);
    };
    let signature = call(
        &subtle()?,
        "sign",
        &Array::of3(&rs256()?, &key, &Uint8Array::from(data)),
    )
    .await?;
    Ok(Some(Uint8Array::new(&signature).to_vec()))
}

/// Whether `signature` over `data` holds for the RSA public key (`n`, `e`, base64url as a
/// JWK has them); `None` when the key is not one.
pub async fn rs256_verify(
    n: &str,
    e: &str,
    data: &[u8],
    signature: &[u8],
) -> Result<Option<bool>, ApiError> {
    let jwk = Object::new();
    for (k, v) in [("kty", "RSA"), ("n", n), ("e", e), ("alg", "RS256")] {
        Reflect::set(&jwk, &k.into(), &v.into()).map_err(js)?;
    }
    let Some(key) = import("jwk", &jwk.into(), "verify").await? else {
        return Ok(None);
    };
    let holds = call(
        &subtle()?,
        "verify",
        &Array::of4(
            &rs256()?,
            &key,
            &Uint8Array::from(signature),
            &Uint8Array::from(data),
        ),
    )
    .await?;
    Ok(Some(holds.as_bool().unwrap_or(false)))
}

fn named(name: &str, extra: &[(&str, &JsValue)]) -> Result<JsValue, ApiError> {
    let algorithm = Object::new();
    Reflect::set(&algorithm, &"name".into(), &name.into()).map_err(js)?;
    for (k, v) in extra {
        Reflect::set(&algorithm, &(*k).into(), v).map_err(js)?;
    }
    Ok(algorithm.into())
}

fn bytes(data: &[u8]) -> JsValue {
    Uint8Array::from(data).into()
}

/// Signs `data` with ECDSA on P-256 and SHA-256 (ES256): the private scalar `d` and the
/// public point's `x`, `y` (32 bytes each). The signature is `r ‖ s`, as JWS wants it.
pub async fn es256_sign(d: &[u8], x: &[u8], y: &[u8], data: &[u8]) -> Result<Vec<u8>, ApiError> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let jwk = Object::new();
    for (k, v) in [
        ("kty", "EC".to_owned()),
        ("crv", "P-256".to_owned()),
        ("d", b64.encode(d)),
        ("x", b64.encode(x)),
        ("y", b64.encode(y)),
    ] {
        Reflect::set(&jwk, &k.into(), &v.into()).map_err(js)?;
    }
    let ecdsa = named("ECDSA", &[("namedCurve", &"P-256".into())])?;
    let key = call(
        &subtle()?,
        "importKey",
        &Array::of5(
            &"jwk".into(),
            &jwk,
            &ecdsa,
            &false.into(),
            &Array::of1(&"sign".into()),
        ),
    )
    .await?;
    let with = named("ECDSA", &[("hash", &"SHA-256".into())])?;
    let signature = call(&subtle()?, "sign", &Array::of3(&with, &key, &bytes(data))).await?;
    Ok(Uint8Array::new(&signature).to_vec())
}

/// A fresh P-256 key pair's agreement with `peer` (an uncompressed point, 65 bytes): the
/// shared secret (32 bytes) and the fresh public key (65 bytes), the private half dropped.
pub async fn ecdh_p256_ephemeral(peer: &[u8]) -> Result<(Vec<u8>, Vec<u8>), ApiError> {
    let ecdh = named("ECDH", &[("namedCurve", &"P-256".into())])?;
    let pair = call(
        &subtle()?,
        "generateKey",
        &Array::of3(&ecdh, &true.into(), &Array::of1(&"deriveBits".into())),
    )
    .await?;
    let private = Reflect::get(&pair, &"privateKey".into()).map_err(js)?;
    let public = Reflect::get(&pair, &"publicKey".into()).map_err(js)?;
    let own = call(&subtle()?, "exportKey", &Array::of2(&"raw".into(), &public)).await?;
    let theirs = call(
        &subtle()?,
        "importKey",
        &Array::of5(
            &"raw".into(),
            &bytes(peer),
            &ecdh,
            &true.into(),
            &Array::new(),
        ),
    )
    .await?;
    let with = named("ECDH", &[("public", &theirs)])?;
    let shared = call(
        &subtle()?,
        "deriveBits",
        &Array::of3(&with, &private, &256.into()),
    )
    .await?;
    Ok((
        Uint8Array::new(&shared).to_vec(),
        Uint8Array::new(&own).to_vec(),
    ))
}

/// HKDF with SHA-256 (RFC 5869), extract and expand: `len` bytes.
pub async fn hkdf_sha256(
    ikm: &[u8],
    salt: &[u8],
    info: &[u8],
    len: usize,
) -> Result<Vec<u8>, ApiError> {
    let key = call(
        &subtle()?,
        "importKey",
        &Array::of5(
            &"raw".into(),
            &bytes(ikm),
            &"HKDF".into(),
            &false.into(),
            &Array::of1(&"deriveBits".into()),
        ),
    )
    .await?;
    let with = named(
        "HKDF",
        &[
            ("hash", &"SHA-256".into()),
            ("salt", &bytes(salt)),
            ("info", &bytes(info)),
        ],
    )?;
    let out = call(
        &subtle()?,
        "deriveBits",
        &Array::of3(&with, &key, &((len * 8) as u32).into()),
    )
    .await?;
    Ok(Uint8Array::new(&out).to_vec())
}
