//! JSON answers and errors, one way for the Worker, the SessionDO and the integrations'
//! handlers.

use inspect_protocol::ApiError;
use serde::Serialize;
use worker::{Response, Result};

/// An error as its JSON body (`{"error": {"code", "message"}}`) with its status, and
/// `Retry-After` when it says when to try again.
pub fn json_error(err: &ApiError) -> Result<Response> {
    let resp = json_ok(&err.body())?.with_status(err.status());
    if let Some(secs) = err.retry_after {
        let _ = resp.headers().set("Retry-After", &secs.to_string());
    }
    Ok(resp)
}

/// A JSON response. Only the serialisation is per type: the response around it is built by
/// [`json_text`], once in the wasm (`Response::from_json` put a copy of it in every caller's
/// type, 34 of them).
pub fn json_ok<T: Serialize>(value: &T) -> Result<Response> {
    written(serde_json::to_string(value))
}

/// [`json_ok`]'s part that is not per type.
#[inline(never)]
fn written(text: serde_json::Result<String>) -> Result<Response> {
    json_text(text.map_err(|e| worker::Error::RustError(e.to_string()))?)
}

/// A response whose body is JSON text already written.
#[inline(never)]
pub fn json_text(text: String) -> Result<Response> {
    let resp = Response::from_bytes(text.into_bytes())?;
    resp.headers().set("Content-Type", "application/json")?;
    Ok(resp)
}

/// A JSON answer with `status`, its failure as an [`ApiError`].
pub fn json<T: Serialize>(value: &T, status: u16) -> std::result::Result<Response, ApiError> {
    written_with(serde_json::to_string(value), status)
}

/// [`json`]'s part that is not per type.
#[inline(never)]
fn written_with(
    text: serde_json::Result<String>,
    status: u16,
) -> std::result::Result<Response, ApiError> {
    Ok(written(text)
        .map_err(|e| ApiError::internal(e.to_string()))?
        .with_status(status))
}

/// A runtime failure as an internal error.
pub fn internal(e: worker::Error) -> ApiError {
    ApiError::internal(e.to_string())
}

/// A webhook delivery's raw body, at most `max` bytes (413 when its `Content-Length` says
/// more, or when what arrives is more): the one read every bot's check starts from.
pub async fn delivery_body(
    req: &mut worker::Request,
    max: usize,
) -> std::result::Result<Vec<u8>, ApiError> {
    let too_large = || {
        ApiError::new(
            inspect_protocol::ErrorCode::PayloadTooLarge,
            format!("deliveries are at most {max} bytes"),
        )
    };
    let declared = req
        .headers()
        .get("Content-Length")
        .ok()
        .flatten()
        .and_then(|l| l.parse::<usize>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(too_large());
    }
    let body = req
        .bytes()
        .await
        .map_err(|e| ApiError::bad_request(format!("unreadable body: {e}")))?;
    if body.len() > max {
        return Err(too_large());
    }
    Ok(body)
}
