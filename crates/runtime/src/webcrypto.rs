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
