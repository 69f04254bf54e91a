//! Linear's API from the Workers runtime: GraphQL at `<LINEAR_API_URL>/graphql` with the
//! app's token as a bearer, GraphQL errors turned into errors that name Linear's message,
//! and after a refused token (HTTP 401 or an `AUTHENTICATION_ERROR`) one renewal and one
//! retry. The token is the app's client-credentials token for the workspace, kept sealed in
//! D1 and renewed five minutes before it expires. The bot's settings row lives here too.

use crate::oauth;
use inspect_protocol::linear::LinearSettings;
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::d1::{self as db, num};
use inspect_runtime::setting;
use serde::Deserialize;
use serde_json::{json, Value};
use worker::{Env, Fetch, Headers, Method, Request, RequestInit};

/// Linear's API origin (`https://api.linear.app`); tests point it at a fake.
pub fn api_base(env: &Env) -> String {
    setting(env, "LINEAR_API_URL")
        .unwrap_or_else(|| "https://api.linear.app".into())
        .trim_end_matches('/')
        .to_owned()
}

/// Where people authorize the app (`https://linear.app/oauth/authorize`).
pub fn authorize_base(env: &Env) -> String {
    setting(env, "LINEAR_AUTHORIZE_URL")
        .unwrap_or_else(|| "https://linear.app/oauth/authorize".into())
}

pub fn unavailable(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("Linear: {e}"))
}

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

/// The app's credentials: `(client id, client secret)`.
pub fn client(env: &Env) -> Result<(String, String), ApiError> {
    match (
        setting(env, "LINEAR_CLIENT_ID"),
        setting(env, "LINEAR_CLIENT_SECRET"),
    ) {
        (Some(id), Some(secret)) => Ok((id, secret)),
        _ => Err(ApiError::new(
            ErrorCode::Unavailable,
            "the Linear app is not configured: set LINEAR_CLIENT_ID and LINEAR_CLIENT_SECRET",
        )),
    }
}

fn sealing_key(env: &Env) -> Result<inspect_secrets::SealingKey, ApiError> {
    inspect_secrets::SealingKey::from_config(setting(env, inspect_secrets::KEY_VAR).as_deref())
}

/// A POST to Linear; `(status, body)`.
async fn post(
    url: &str,
    content_type: &str,
    bearer: Option<&str>,
    body: String,
) -> Result<(u16, String), ApiError> {
    let headers = Headers::new();
    headers
        .set("Content-Type", content_type)
        .map_err(unavailable)?;
    headers
        .set("Accept", "application/json")
        .map_err(unavailable)?;
    if let Some(t) = bearer {
        headers
            .set("Authorization", &format!("Bearer {t}"))
            .map_err(unavailable)?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(wasm_bindgen::JsValue::from_str(&body)));
    let req = Request::new_with_init(url, &init).map_err(unavailable)?;
    let mut resp = Fetch::Request(req).send().await.map_err(unavailable)?;
    let text = resp.text().await.unwrap_or_default();
    Ok((resp.status_code(), text))
}

/// Posts a form to the token endpoint.
pub async fn token_request(env: &Env, form: String) -> Result<oauth::TokenAnswer, ApiError> {
    let url = format!("{}/oauth/token", api_base(env));
    let (status, text) = post(&url, "application/x-www-form-urlencoded", None, form).await?;
    if status != 200 {
        let why: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let said = why["error_description"]
            .as_str()
            .or(why["error"].as_str())
            .unwrap_or("refused");
        return Err(unavailable(format!(
            "the token endpoint answered {status}: {said}"
        )));
    }
    serde_json::from_str(&text).map_err(|e| unavailable(format!("token answer: {e}")))
}

/// One GraphQL request with a given token: `Ok(data)`, or `Err((refused_token, error))`.
pub async fn graphql_with(
    env: &Env,
    token: &str,
    query: &str,
    variables: Value,
) -> Result<Value, (bool, ApiError)> {
    let url = format!("{}/graphql", api_base(env));
    let body = json!({"query": query, "variables": variables}).to_string();
    let (status, text) = post(&url, "application/json", Some(token), body)
        .await
        .map_err(|e| (false, e))?;
    let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let errors = parsed["errors"].as_array().cloned().unwrap_or_default();
    let refused = status == 401
        || errors
            .iter()
            .any(|e| e["extensions"]["code"].as_str() == Some("AUTHENTICATION_ERROR"));
    if refused {
        return Err((true, unavailable("the token was refused")));
    }
    if !errors.is_empty() {
        let said: Vec<&str> = errors
            .iter()
            .filter_map(|e| e["message"].as_str())
            .collect();
        return Err((false, unavailable(said.join("; "))));
    }
    if status != 200 {
        return Err((false, unavailable(format!("GraphQL answered {status}"))));
    }
    Ok(parsed["data"].clone())
}

#[derive(Deserialize)]
struct HeldToken {
    token_sealed: Option<String>,
    token_expires_at: Option<f64>,
}

/// The app's token for `organization`: the held one while it is good, else a new one
/// (client credentials), sealed and kept.
pub async fn token(env: &Env, organization: &str, renew: bool) -> Result<String, ApiError> {
    let key = sealing_key(env)?;
    let now = now_ms();
    if !renew {
        let held: Option<HeldToken> = db::first(
            env,
            "SELECT token_sealed, token_expires_at FROM linear_installations WHERE organization_id = ?1",
            &[organization.into()],
        )
        .await?;
        if let Some(HeldToken {
            token_sealed: Some(sealed),
            token_expires_at: Some(at),
        }) = held
        {
            if !oauth::must_renew(at as i64, now) {
                return key.open(&sealed);
            }
        }
    }
    let (id, secret) = client(env)?;
    let answer = token_request(env, oauth::client_credentials_form(&id, &secret)).await?;
    // An app installed in several workspaces may be given a token for another one: it is
    // used (and kept) only when it acts in the workspace the delivery came from.
    let viewer = graphql_with(env, &answer.access_token, oauth::VIEWER_QUERY, json!({}))
        .await
        .map_err(|(_, e)| e)?;
    let acts_in = viewer["viewer"]["organization"]["id"]
        .as_str()
        .unwrap_or("");
    if let Err(why) = oauth::token_fits(acts_in, organization) {
        return Err(unavailable(why));
    }
    let mut iv = [0u8; 12];
    getrandom::fill(&mut iv).map_err(|e| ApiError::internal(e.to_string()))?;
    let sealed = key.seal(iv, &answer.access_token)?;
    db::run(
        env,
        "UPDATE linear_installations SET token_sealed = ?2, token_expires_at = ?3 WHERE organization_id = ?1",
        &[organization.into(), sealed.into(), num(answer.expires_at(now))],
    )
    .await?;
    Ok(answer.access_token)
}

/// A GraphQL request as the app in `organization`; a refused token is renewed once.
pub async fn graphql(
    env: &Env,
    organization: &str,
    query: &str,
    variables: Value,
) -> Result<Value, ApiError> {
    let held = token(env, organization, false).await?;
    match graphql_with(env, &held, query, variables.clone()).await {
        Ok(data) => Ok(data),
        Err((true, _)) => {
            let fresh = token(env, organization, true).await?;
            graphql_with(env, &fresh, query, variables)
                .await
                .map_err(|(_, e)| e)
        }
        Err((false, e)) => Err(e),
    }
}

/// The installation of `organization`: its app user, when the app is installed there.
pub async fn app_user(env: &Env, organization: &str) -> Result<Option<String>, ApiError> {
    #[derive(Deserialize)]
    struct Row {
        app_user_id: String,
    }
    let row: Option<Row> = db::first(
        env,
        "SELECT app_user_id FROM linear_installations WHERE organization_id = ?1",
        &[organization.into()],
    )
    .await?;
    Ok(row.map(|r| r.app_user_id))
}

/// The bot's settings (the defaults until someone saves them).
pub async fn settings(env: &Env) -> Result<LinearSettings, ApiError> {
    #[derive(Deserialize)]
    struct Row {
        settings: String,
    }
    let row: Option<Row> = db::first(
        env,
        "SELECT settings FROM linear_settings WHERE id = 1",
        &[],
    )
    .await?;
    Ok(row
        .and_then(|r| serde_json::from_str(&r.settings).ok())
        .unwrap_or_default())
}
