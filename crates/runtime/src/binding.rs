//! The session Worker's calls to the control plane Worker over its service binding (the
//! objects' reports, progress, pull requests and reviews, the cron's tick): what reaches
//! GitHub, Slack, Linear and the automations is done there, so the session script carries
//! none of their clients. A refused call comes back as the plane's `ApiError`, for the
//! caller's retries to judge.

use inspect_protocol::plane::{PlaneCall, PLANE_BINDING, PLANE_CALL_URL};
use inspect_protocol::{ApiError, ErrorBody};
use worker::{Env, Headers, Method, RequestInit};

/// One call to the control plane, answered when it is done.
pub async fn call_plane(env: &Env, call: &PlaneCall) -> Result<(), ApiError> {
    ask_plane::<serde::de::IgnoredAny>(env, call)
        .await
        .map(drop)
}

/// One call to the control plane, and its answer read as `T`.
pub async fn ask_plane<T: serde::de::DeserializeOwned>(
    env: &Env,
    call: &PlaneCall,
) -> Result<T, ApiError> {
    let unreachable = |e: worker::Error| ApiError::internal(format!("the control plane: {e}"));
    let plane = env.service(PLANE_BINDING).map_err(unreachable)?;
    let body = serde_json::to_string(call).map_err(|e| ApiError::internal(e.to_string()))?;
    let headers = Headers::new();
    headers
        .set("Content-Type", "application/json")
        .map_err(unreachable)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.into()));
    let mut resp = plane
        .fetch(PLANE_CALL_URL, Some(init))
        .await
        .map_err(unreachable)?;
    let text = resp.text().await.unwrap_or_default();
    if resp.status_code() < 400 {
        return serde_json::from_str(&text)
            .map_err(|e| ApiError::internal(format!("the control plane's answer: {e}")));
    }
    Err(match serde_json::from_str::<ErrorBody>(&text) {
        Ok(answer) => answer.error,
        Err(_) => ApiError::internal(format!(
            "the control plane answered {}: {}",
            resp.status_code(),
            text.chars().take(200).collect::<String>()
        )),
    })
}
