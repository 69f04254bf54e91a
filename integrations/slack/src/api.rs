//! Slack's Web API from the Workers runtime: `POST https://slack.com/api/<method>` with the
//! bot token as a bearer (JSON for methods that write, the query string for those that
//! read), `ok: false` answers turned into errors that name Slack's error code, one wait and
//! retry when Slack says `ratelimited` (`Retry-After`), and file downloads with the token.
//! The base URL is a setting (`SLACK_API_BASE_URL`) so tests point it at a fake.

use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::setting;
use serde_json::Value;
use worker::{Env, Fetch, Headers, Method, Request, RequestInit, Url};

/// Waits on `ratelimited` longer than this are not waited out.
const MAX_WAIT_SECS: u64 = 5;

pub fn api_base(env: &Env) -> String {
    setting(env, "SLACK_API_BASE_URL")
        .unwrap_or_else(|| "https://slack.com/api".into())
        .trim_end_matches('/')
        .to_owned()
}

fn unavailable(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("Slack: {e}"))
}

fn token(env: &Env) -> Result<String, ApiError> {
    setting(env, "SLACK_BOT_TOKEN")
        .ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "SLACK_BOT_TOKEN is not set"))
}

async fn send(
    env: &Env,
    method: Method,
    url: &str,
    body: Option<String>,
) -> Result<(u16, Option<u64>, String), ApiError> {
    let headers = Headers::new();
    headers
        .set("Authorization", &format!("Bearer {}", token(env)?))
        .map_err(unavailable)?;
    if body.is_some() {
        headers
            .set("Content-Type", "application/json; charset=utf-8")
            .map_err(unavailable)?;
    }
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers);
    if let Some(b) = body {
        init.with_body(Some(wasm_bindgen::JsValue::from_str(&b)));
    }
    let req = Request::new_with_init(url, &init).map_err(unavailable)?;
    let mut resp = Fetch::Request(req).send().await.map_err(unavailable)?;
    let retry_after = resp
        .headers()
        .get("Retry-After")
        .ok()
        .flatten()
        .and_then(|v| v.trim().parse().ok());
    let text = resp.text().await.unwrap_or_default();
    Ok((resp.status_code(), retry_after, text))
}

/// Calls a method; the parsed answer when Slack said `ok: true`.
async fn call_with(
    env: &Env,
    name: &str,
    method: Method,
    url: &str,
    body: Option<String>,
) -> Result<Value, ApiError> {
    for attempt in 0..2 {
        let (status, retry_after, text) = send(env, method.clone(), url, body.clone()).await?;
        let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let limited = status == 429 || parsed["error"] == "ratelimited";
        if limited && attempt == 0 {
            let wait = retry_after.unwrap_or(1);
            if wait <= MAX_WAIT_SECS {
                worker::Delay::from(std::time::Duration::from_secs(wait)).await;
                continue;
            }
        }
        if parsed["ok"] == true {
            return Ok(parsed);
        }
        let code = parsed["error"].as_str().unwrap_or("no answer");
        return Err(ApiError::new(
            if limited {
                ErrorCode::TooManyRequests
            } else {
                ErrorCode::Unavailable
            },
            format!("Slack {name}: {code} ({status})"),
        ));
    }
    Err(unavailable(format!("{name}: rate limited")))
}

/// Whether Slack refused a call with this error code (`message_not_found`, …).
pub fn refused_with(e: &ApiError, code: &str) -> bool {
    e.message.contains(&format!(": {code} ("))
}

/// A method that takes JSON (`chat.postMessage`, `chat.update`, `reactions.add`,
/// `views.publish`, …).
pub async fn post(env: &Env, name: &str, body: &Value) -> Result<Value, ApiError> {
    let url = format!("{}/{name}", api_base(env));
    call_with(env, name, Method::Post, &url, Some(body.to_string())).await
}

/// A method that reads its arguments from the query string (`conversations.replies`,
/// `conversations.info`, `users.info`, `auth.test`).
pub async fn get(env: &Env, name: &str, params: &[(&str, &str)]) -> Result<Value, ApiError> {
    let url = Url::parse_with_params(&format!("{}/{name}", api_base(env)), params)
        .map_err(unavailable)?;
    call_with(env, name, Method::Get, url.as_str(), None).await
}

/// Downloads a private file with the bot token (no redirects followed), at most `limit`
/// bytes.
pub async fn download(env: &Env, url: &str, limit: u64) -> Result<Vec<u8>, ApiError> {
    let headers = Headers::new();
    headers
        .set("Authorization", &format!("Bearer {}", token(env)?))
        .map_err(unavailable)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Get)
        .with_headers(headers)
        .with_redirect(worker::RequestRedirect::Manual);
    let req = Request::new_with_init(url, &init).map_err(unavailable)?;
    let mut resp = Fetch::Request(req).send().await.map_err(unavailable)?;
    if resp.status_code() != 200 {
        return Err(unavailable(format!(
            "file download answered {}",
            resp.status_code()
        )));
    }
    let declared: Option<u64> = resp
        .headers()
        .get("Content-Length")
        .ok()
        .flatten()
        .and_then(|v| v.parse().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::bad_request("the file is larger than 10 MiB"));
    }
    let bytes = resp.bytes().await.map_err(unavailable)?;
    if bytes.len() as u64 > limit {
        return Err(ApiError::bad_request("the file is larger than 10 MiB"));
    }
    Ok(bytes)
}

/// Shares a file in a thread as Slack takes files: an upload URL for its name and size, the
/// bytes posted there, then the upload completed into the channel's thread with a comment.
pub async fn upload_to_thread(
    env: &Env,
    (channel, thread_ts): (&str, &str),
    filename: &str,
    bytes: &[u8],
    comment: &str,
) -> Result<(), ApiError> {
    let length = bytes.len().to_string();
    let got = get(
        env,
        "files.getUploadURLExternal",
        &[("filename", filename), ("length", &length)],
    )
    .await?;
    let (Some(url), Some(id)) = (got["upload_url"].as_str(), got["file_id"].as_str()) else {
        return Err(unavailable("files.getUploadURLExternal gave no upload URL"));
    };
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(worker::js_sys::Uint8Array::from(bytes).into()));
    let req = Request::new_with_init(url, &init).map_err(unavailable)?;
    let resp = Fetch::Request(req).send().await.map_err(unavailable)?;
    if resp.status_code() != 200 {
        return Err(unavailable(format!(
            "the file upload answered {}",
            resp.status_code()
        )));
    }
    post(
        env,
        "files.completeUploadExternal",
        &serde_json::json!({
            "files": [{"id": id, "title": comment.chars().take(250).collect::<String>()}],
            "channel_id": channel,
            "thread_ts": thread_ts,
            "initial_comment": comment,
        }),
    )
    .await?;
    Ok(())
}
