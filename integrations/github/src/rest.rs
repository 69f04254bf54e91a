//! REST calls with a token (an installation's or a person's). An installation token that
//! GitHub refuses with 401 before its time (the App suspended or reinstalled, the token
//! deleted) is dropped, a new one minted for the same scope, and the call made once more;
//! a caller still holding the refused token is given the new one on its next call.

use crate::client::{self, api_base, Host, Reply};
use crate::{app, tokens};
use inspect_protocol::ApiError;
use serde::de::DeserializeOwned;
use worker::{Env, Method};

/// GET an API path as a person or an installation.
pub async fn get<T: DeserializeOwned>(
    env: &Env,
    token: &str,
    path: &str,
) -> Result<Reply<T>, ApiError> {
    client::reply(exchange(env, Method::Get, token, path, None).await?)
}

/// Sends a JSON body to an API path with a token.
pub async fn send_json<T: DeserializeOwned>(
    env: &Env,
    method: Method,
    token: &str,
    path: &str,
    body: &serde_json::Value,
) -> Result<Reply<T>, ApiError> {
    client::reply(exchange(env, method, token, path, Some(body.to_string())).await?)
}

/// The call and, when GitHub refused an installation token held here, the call again
/// with a new one. Not generic: only the parsing is per answer type.
async fn exchange(
    env: &Env,
    method: Method,
    token: &str,
    path: &str,
    body: Option<String>,
) -> Result<(u16, String), ApiError> {
    let url = format!("{}{path}", api_base(env));
    let token = tokens::current(token).unwrap_or_else(|| token.to_owned());
    let first = once(method.clone(), &url, &token, body.clone()).await?;
    if first.0 != 401 {
        return Ok(first);
    }
    let Some(scope) = tokens::refused(&token) else {
        return Ok(first);
    };
    inspect_runtime::log::emit(
        inspect_runtime::log::LogLine::warn("github", "installation_token_refused")
            .with("path", path)
            .detail(
                "GitHub answered 401 to an installation token before it expired; minting a new one",
            ),
    );
    let now = worker::Date::now().as_millis() as i64;
    let fresh = app::mint(env, now, &scope.repositories).await?;
    tokens::succeeded(&token, &fresh.password);
    once(method, &url, &fresh.password, body).await
}

async fn once(
    method: Method,
    url: &str,
    token: &str,
    body: Option<String>,
) -> Result<(u16, String), ApiError> {
    let content_type = body.as_ref().map(|_| "application/json");
    let authorization = format!("Bearer {token}");
    client::exchange(
        Host::Api,
        method,
        url,
        Some(&authorization),
        content_type,
        body,
    )
    .await
}
