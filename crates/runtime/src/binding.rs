//! Calls across the service bindings between the Workers: the session Worker's calls to
//! the control plane (the objects' reports, progress, pull requests and reviews, the cron's
//! tick: what reaches GitHub, Slack, Linear and the automations is done there), and both
//! scripts' calls to the providers Worker (the sandbox vendors' clients and keys live only
//! there). A refused call comes back as the plane's `ApiError`, or the provider's
//! `ProviderError`, for the caller's retries to judge.

use inspect_protocol::plane::{PlaneCall, PLANE_BINDING, PLANE_CALL_URL};
use inspect_protocol::provider::ProviderError;
use inspect_protocol::providers::{ProviderCall, PROVIDERS_BINDING, PROVIDERS_CALL_URL};
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
    let body = serde_json::to_string(call).map_err(|e| ApiError::internal(e.to_string()))?;
    let (status, text) = post(env, PLANE_BINDING, PLANE_CALL_URL, body)
        .await
        .map_err(|e| ApiError::internal(format!("the control plane: {e}")))?;
    if status < 400 {
        return serde_json::from_str(&text)
            .map_err(|e| ApiError::internal(format!("the control plane's answer: {e}")));
    }
    Err(refusal(status, &text, "the control plane"))
}

/// One call to the sandbox provider the settings choose, through the providers Worker, and
/// its answer read as `T`. The binding failing, or an answer that is not the provider's, is
/// transient (the call is asked again as a provider outage would be); a call the providers
/// Worker refused as malformed is permanent.
pub async fn ask_providers<T: serde::de::DeserializeOwned>(
    env: &Env,
    call: &ProviderCall,
) -> Result<T, ProviderError> {
    let body = serde_json::to_string(call).map_err(|e| ProviderError::Permanent(e.to_string()))?;
    let (status, text) = post(env, PROVIDERS_BINDING, PROVIDERS_CALL_URL, body)
        .await
        .map_err(|e| ProviderError::Transient(format!("the providers Worker: {e}")))?;
    if status < 400 {
        return serde_json::from_str::<Result<T, ProviderError>>(&text).unwrap_or_else(|e| {
            Err(ProviderError::Transient(format!(
                "the providers Worker's answer: {e}"
            )))
        });
    }
    let refused = refusal(status, &text, "the providers Worker");
    Err(match status {
        400..=499 => ProviderError::Permanent(refused.message),
        _ => ProviderError::Transient(refused.message),
    })
}

/// A refusal's `ApiError`, or the status and the start of the text when it is not one.
fn refusal(status: u16, text: &str, who: &str) -> ApiError {
    match serde_json::from_str::<ErrorBody>(text) {
        Ok(answer) => answer.error,
        Err(_) => ApiError::internal(format!(
            "{who} answered {status}: {}",
            text.chars().take(200).collect::<String>()
        )),
    }
}

/// POSTs a JSON body to `url` over the service binding `binding`: the status and the text.
async fn post(
    env: &Env,
    binding: &str,
    url: &str,
    body: String,
) -> Result<(u16, String), worker::Error> {
    let service = env.service(binding)?;
    let headers = Headers::new();
    headers.set("Content-Type", "application/json")?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(body.into()));
    let mut resp = service.fetch(url, Some(init)).await?;
    let text = resp.text().await.unwrap_or_default();
    Ok((resp.status_code(), text))
}
