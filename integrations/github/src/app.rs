//! Brokered git credentials: the Worker signs a GitHub App JWT (RS256, through the
//! runtime's WebCrypto), trades it for an installation token, keeps that token (in
//! `tokens`) until ten minutes before it expires, and hands it to a session's live
//! sandbox on request.
//! Sandboxes never hold a long-lived credential.

use crate::client as github;
use crate::tokens::{self, Scope};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use inspect_protocol::auth::ScmCredentials;
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::setting;
use serde::Deserialize;
use worker::js_sys;
use worker::{Env, Method};

fn unconfigured(what: &str) -> ApiError {
    ApiError::new(
        ErrorCode::Unavailable,
        format!("the GitHub App is not configured: set {what}"),
    )
}

pub use crate::pem::pkcs8_der;

/// RSASSA-PKCS1-v1_5 with SHA-256, by the runtime's WebCrypto.
async fn rs256(der: &[u8], data: &[u8]) -> Result<Vec<u8>, ApiError> {
    inspect_runtime::webcrypto::rs256_sign(der, data)
        .await?
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unavailable,
                "GITHUB_APP_PRIVATE_KEY is not an RSA PKCS#8 key WebCrypto accepts",
            )
        })
}

/// The App's JWT: issued a minute ago (clock drift), valid nine minutes.
pub async fn app_jwt(app_id: &str, pem: &str, now_s: i64) -> Result<String, ApiError> {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = serde_json::json!({ "iat": now_s - 60, "exp": now_s + 540, "iss": app_id });
    let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signing_input = format!("{header}.{claims}");
    let signature = rs256(&pkcs8_der(pem)?, signing_input.as_bytes()).await?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature)
    ))
}

#[derive(Deserialize)]
struct InstallationToken {
    token: String,
    expires_at: String,
}

/// An installation token for the App's own calls (pull requests, comments, the
/// repository list), from the cache while it has more than ten minutes left.
pub async fn installation_token(env: &Env, now_ms: i64) -> Result<ScmCredentials, ApiError> {
    mint(env, now_ms, &[]).await
}

/// An installation token for git in a session's sandbox: narrowed to `repositories` (the
/// session's repositories' names in the installation's account) and to what git needs
/// (`contents: write`, `metadata: read`). Never an unnarrowed token: with no repository
/// there is nothing to give. `refused`: the password git was just refused with; when it
/// is the one held for these repositories, a new one is minted in its place.
pub async fn git_token(
    env: &Env,
    repositories: &[String],
    refused: Option<&str>,
    now_ms: i64,
) -> Result<ScmCredentials, ApiError> {
    if repositories.is_empty() {
        return Err(ApiError::not_found(
            "this session has no GitHub repository to give git credentials for",
        ));
    }
    let mut names: Vec<String> = repositories
        .iter()
        .map(|r| r.to_ascii_lowercase())
        .collect();
    names.sort();
    names.dedup();
    let Some(old) = refused.filter(|old| tokens::refused_for(&names, old)) else {
        return mint(env, now_ms, &names).await;
    };
    let fresh = mint(env, now_ms, &names).await?;
    tokens::succeeded(old, &fresh.password);
    Ok(fresh)
}

/// A token for `repositories` (empty: the App's own), from the cache while it has more
/// than ten minutes left, else minted.
pub(crate) async fn mint(
    env: &Env,
    now_ms: i64,
    repositories: &[String],
) -> Result<ScmCredentials, ApiError> {
    let app_id = setting(env, "GITHUB_APP_ID").ok_or_else(|| unconfigured("GITHUB_APP_ID"))?;
    let installation = setting(env, "GITHUB_APP_INSTALLATION_ID")
        .ok_or_else(|| unconfigured("GITHUB_APP_INSTALLATION_ID"))?;
    let pem = setting(env, "GITHUB_APP_PRIVATE_KEY")
        .ok_or_else(|| unconfigured("GITHUB_APP_PRIVATE_KEY"))?;
    let scope = Scope {
        app_id: app_id.clone(),
        installation: installation.clone(),
        repositories: repositories.to_vec(),
    };
    if let Some((password, expires)) = tokens::fresh(&scope, now_ms) {
        return Ok(credentials(password, expires));
    }
    let jwt = app_jwt(&app_id, &pem, now_ms / 1000).await?;
    let body = if repositories.is_empty() {
        None
    } else {
        Some(
            serde_json::json!({
                "repositories": repositories,
                "permissions": { "contents": "write", "metadata": "read" },
            })
            .to_string(),
        )
    };
    let reply: github::Reply<InstallationToken> = github::send(
        Method::Post,
        &format!(
            "{}/app/installations/{installation}/access_tokens",
            github::api_base(env)
        ),
        Some(&format!("Bearer {jwt}")),
        body.as_ref().map(|_| "application/json"),
        body,
    )
    .await?;
    let minted = reply.body.ok_or_else(|| {
        ApiError::new(
            ErrorCode::Unavailable,
            format!(
                "GitHub refused an installation token ({}{}); check the App id, key and installation{}",
                reply.status,
                reply.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default(),
                if repositories.is_empty() { "" } else { ", and that the App is installed on the session's repositories" }
            ),
        )
    })?;
    let expires = js_sys::Date::parse(&minted.expires_at);
    if expires.is_nan() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "GitHub sent an unreadable expires_at",
        ));
    }
    let expires = expires as i64;
    tokens::keep(scope, minted.token.clone(), expires, now_ms);
    Ok(credentials(minted.token, expires))
}

fn credentials(password: String, expires_at_epoch_ms: i64) -> ScmCredentials {
    ScmCredentials {
        username: "x-access-token".into(),
        password,
        expires_at_epoch_ms,
    }
}
