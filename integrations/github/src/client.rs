//! Talking to GitHub from the Worker: one request to the OAuth endpoints or the REST API
//! with the headers each wants (`rest` sends token-bearing API calls through it). Base URLs are settings so tests can point them
//! at a fake that follows GitHub's documented API.

use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::setting;
use serde::de::DeserializeOwned;
use worker::{Env, Fetch, Headers, Method, Request, RequestInit};

pub const USER_AGENT: &str = "open-inspect-rs";

/// `https://github.com`, or `GITHUB_OAUTH_BASE_URL`.
pub fn oauth_base(env: &Env) -> String {
    setting(env, "GITHUB_OAUTH_BASE_URL")
        .unwrap_or_else(|| "https://github.com".into())
        .trim_end_matches('/')
        .to_owned()
}

/// `https://api.github.com`, or `GITHUB_API_BASE_URL`.
pub fn api_base(env: &Env) -> String {
    setting(env, "GITHUB_API_BASE_URL")
        .unwrap_or_else(|| "https://api.github.com".into())
        .trim_end_matches('/')
        .to_owned()
}

fn upstream(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("GitHub: {e}"))
}

/// What came back: the status and the body, parsed when it was a success; GitHub's
/// `message` when it was not.
pub struct Reply<T> {
    pub status: u16,
    pub body: Option<T>,
    pub error: Option<String>,
}

/// Which of GitHub's hosts a request goes to: they want different headers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Host {
    /// The REST API: its vendor media type and version header.
    Api,
    /// The OAuth web flow's endpoints (`github.com/login/oauth/…`): not the REST API. They
    /// answer in the format `Accept` asks for (form-encoded by default; the REST vendor
    /// type has been answered with 406), so they are asked for JSON and sent no API version.
    OAuth,
}

/// Sends a request to GitHub's REST API with the headers it asks for.
pub async fn send<T: DeserializeOwned>(
    method: Method,
    url: &str,
    authorization: Option<&str>,
    content_type: Option<&str>,
    body: Option<String>,
) -> Result<Reply<T>, ApiError> {
    let exchanged = exchange(Host::Api, method, url, authorization, content_type, body).await?;
    reply(exchanged)
}

/// `POST /login/oauth/access_token` on the OAuth host with a form (a code exchange or a
/// refresh): GitHub's answer, in JSON. Errors come back as 200 with an `error` field.
pub async fn oauth_token<T: DeserializeOwned>(
    env: &Env,
    form: String,
) -> Result<Reply<T>, ApiError> {
    let url = format!("{}/login/oauth/access_token", oauth_base(env));
    let exchanged = exchange(
        Host::OAuth,
        Method::Post,
        &url,
        None,
        Some("application/x-www-form-urlencoded"),
        Some(form),
    )
    .await?;
    reply(exchanged)
}

pub(crate) fn reply<T: DeserializeOwned>(exchanged: (u16, String)) -> Result<Reply<T>, ApiError> {
    let (status, answer) = answer_of(exchanged);
    Ok(match answer {
        Ok(text) => Reply {
            status,
            body: Some(serde_json::from_str::<T>(&text).map_err(upstream)?),
            error: None,
        },
        Err(message) => Reply {
            status,
            body: None,
            error: Some(message),
        },
    })
}

/// [`reply`]'s part that is not per type: a success's JSON text (`null` for an empty
/// body), or a failure's message.
#[inline(never)]
fn answer_of((status, text): (u16, String)) -> (u16, Result<String, String>) {
    if !(200..300).contains(&status) {
        return (status, Err(failure_message(&text)));
    }
    if text.trim().is_empty() {
        return (status, Ok("null".into()));
    }
    (status, Ok(text))
}

/// The request and its answer's status and text. Not generic: only the parsing in [`send`]
/// is made once per answer type (the whole exchange was, eleven times in the wasm).
pub(crate) async fn exchange(
    host: Host,
    method: Method,
    url: &str,
    authorization: Option<&str>,
    content_type: Option<&str>,
    body: Option<String>,
) -> Result<(u16, String), ApiError> {
    let headers = Headers::new();
    let set = |k: &str, v: &str| headers.set(k, v).map_err(upstream);
    match host {
        Host::Api => {
            set("Accept", "application/vnd.github+json")?;
            set("X-GitHub-Api-Version", "2022-11-28")?;
        }
        Host::OAuth => set("Accept", "application/json")?,
    }
    set("User-Agent", USER_AGENT)?;
    if let Some(a) = authorization {
        set("Authorization", a)?;
    }
    if let Some(ct) = content_type {
        set("Content-Type", ct)?;
    }
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers.clone());
    if let Some(b) = body {
        init.with_body(Some(b.into()));
    }
    let req = Request::new_with_init(url, &init).map_err(upstream)?;
    let mut resp = Fetch::Request(req).send().await.map_err(upstream)?;
    let status = resp.status_code();
    let text = resp.text().await.map_err(upstream)?;
    Ok((status, text))
}

/// GitHub's `message` from a failure's body, else the body's start.
fn failure_message(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(200).collect())
}
