//! The Worker's request and response helpers: bodies read once with one set of limits
//! (and said to be JSON where a route takes JSON), JSON answers and errors, the origin a
//! caller reached us at. Every handler uses these; none of them knows a route.

use inspect_protocol::{ApiError, ErrorCode};
use worker::Request;

pub(crate) type ApiResult<T> = std::result::Result<T, ApiError>;

/// Largest REST body accepted (a 64 KiB prompt plus attachments fits).
pub(crate) const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// An attachment's body: the file (at most 10 MiB) and room to spare.
pub(crate) const MAX_ATTACHMENT_UPLOAD_BYTES: usize =
    inspect_protocol::limits::MAX_ATTACHMENT_FILE_BYTES + 64 * 1024;

pub(crate) use inspect_runtime::answer::{json, json_error as error_response};

pub(crate) use inspect_runtime::answer::internal;

/// A request body read as `T`; a 400 that says why when it is not.
pub(crate) fn body_as<T: serde::de::DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    inspect_protocol::json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
}

/// An object's answer read as `T`.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(text: &str) -> ApiResult<T> {
    serde_json::from_str(text).map_err(|e| ApiError::internal(e.to_string()))
}

/// A JSON request body: at most [`MAX_BODY_BYTES`], and said to be JSON (415 otherwise; a
/// page on another site can send `text/plain` without asking first, never JSON).
pub(crate) async fn read_body(req: &mut Request) -> ApiResult<Vec<u8>> {
    let body = read_body_up_to(req, MAX_BODY_BYTES).await?;
    if !body.is_empty() {
        said_json(req)?;
    }
    Ok(body)
}

/// 415 unless the request says its body is JSON.
pub(crate) fn said_json(req: &Request) -> ApiResult<()> {
    let kind = req
        .headers()
        .get("Content-Type")
        .ok()
        .flatten()
        .unwrap_or_default();
    if crate::auth::origin::is_json_content_type(&kind) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::UnsupportedMediaType,
        format!("this route takes JSON: send Content-Type: application/json (got {kind:?})"),
    ))
}

/// The request's query, as pairs.
pub(crate) fn query_pairs(req: &Request) -> ApiResult<Vec<(String, String)>> {
    let url = req
        .url()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect())
}

/// A body of at most `limit` bytes (declared and read).
pub(crate) async fn read_body_up_to(req: &mut Request, limit: usize) -> ApiResult<Vec<u8>> {
    let too_large = || {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("a body is at most {limit} bytes"),
        )
    };
    let declared = req
        .headers()
        .get("Content-Length")
        .ok()
        .flatten()
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(0);
    if declared > limit {
        return Err(too_large());
    }
    let body = req
        .bytes()
        .await
        .map_err(|e| ApiError::bad_request(format!("unreadable body: {e}")))?;
    if body.len() > limit {
        return Err(too_large());
    }
    Ok(body)
}

pub(crate) use inspect_runtime::origin_of;

/// The runtime's clock (ms since the epoch).
pub(crate) fn now_ms() -> f64 {
    worker::Date::now().as_millis() as f64
}
