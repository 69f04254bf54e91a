//! The one error shape of every REST route: `{ "error": { "code", "message" } }`.

use serde::{Deserialize, Serialize};

/// Machine-readable error codes. Each has one HTTP status, declared here and nowhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The body or a parameter is malformed. Do not retry unchanged.
    BadRequest,
    /// No credentials, or credentials that are not valid.
    Unauthorized,
    /// Valid credentials that may not do this.
    Forbidden,
    /// The route or the resource does not exist.
    NotFound,
    /// The method is not served on this route.
    MethodNotAllowed,
    /// The request conflicts with the current state (e.g. a reused client request id).
    Conflict,
    /// The resource existed and is gone for good (e.g. a replaced sandbox).
    Gone,
    /// The body is larger than the route accepts.
    PayloadTooLarge,
    /// The body is not of a type the route takes (JSON routes take `application/json`).
    UnsupportedMediaType,
    /// A limit on unfinished work was reached; retry later.
    TooManyRequests,
    /// A bug or an unexpected failure on our side; may be retried.
    Internal,
    /// A dependency (D1, a Durable Object, a provider) did not answer; retry later.
    Unavailable,
}

impl ErrorCode {
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::Conflict => 409,
            ErrorCode::Gone => 410,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::TooManyRequests => 429,
            ErrorCode::Internal => 500,
            ErrorCode::Unavailable => 503,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Gone => "gone",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::TooManyRequests => "too_many_requests",
            ErrorCode::Internal => "internal",
            ErrorCode::Unavailable => "unavailable",
        }
    }
}

/// An error with its code and a message meant for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// For `too_many_requests`: seconds until trying again can work (also sent as the
    /// `Retry-After` header).
    #[serde(
        rename = "retryAfter",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after: None,
        }
    }
    /// 429: slow down, and when to try again.
    pub fn too_many(message: impl Into<String>, retry_after_secs: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after_secs.max(1)),
            ..Self::new(ErrorCode::TooManyRequests, message)
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }
    pub fn status(&self) -> u16 {
        self.code.status()
    }
    /// The REST body for this error.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.clone(),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for ApiError {}

/// `{ "error": { "code", "message" } }`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ErrorBody {
    pub error: ApiError,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_has_the_documented_shape() {
        let body = ApiError::not_found("no route GET /nope").body();
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"error": {"code": "not_found", "message": "no route GET /nope"}})
        );
        let back: ErrorBody = serde_json::from_value(json).unwrap();
        assert_eq!(back, body);
    }

    #[test]
    fn code_strings_match_serde_names() {
        for code in [
            ErrorCode::BadRequest,
            ErrorCode::Unauthorized,
            ErrorCode::Forbidden,
            ErrorCode::NotFound,
            ErrorCode::MethodNotAllowed,
            ErrorCode::Conflict,
            ErrorCode::Gone,
            ErrorCode::PayloadTooLarge,
            ErrorCode::UnsupportedMediaType,
            ErrorCode::TooManyRequests,
            ErrorCode::Internal,
            ErrorCode::Unavailable,
        ] {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::Value::String(code.as_str().into()));
        }
    }
}
