//! A fake OAuth 2.0 token endpoint for brokered model access, written from RFC 6749 §6
//! (refreshing an access token) and §5.2 (its errors): `POST /token` with a form-encoded
//! `grant_type=refresh_token`, the `refresh_token` and the `client_id`; the answer
//! `{access_token, token_type, expires_in, refresh_token}` with the refresh token rotated
//! (the old one no longer works, as providers that rotate do), `invalid_grant` for an
//! unknown, used or revoked refresh token, `invalid_client` for another client. A refresh
//! token that was already rotated out and is presented again is a reuse: as the OAuth 2.0
//! Security BCP (RFC 9700 §4.14.2) asks of rotating providers, the whole chain is revoked
//! (no refresh token works any more). The access tokens it issued are shared with the
//! model fake, which takes only those.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Grants {
    client_id: String,
    /// The one refresh token that works now.
    current: Option<String>,
    /// Refresh tokens rotated out: presenting one again revokes the chain.
    rotated_out: HashSet<String>,
    /// Every refresh token ever issued, to look for them where they must not be.
    issued_refresh: Vec<String>,
    /// Refreshes answered, and those refused.
    refreshed: usize,
    refused: Vec<String>,
    expires_in: i64,
    counter: u64,
}

pub struct FakeOAuth {
    pub token_url: String,
    state: Arc<Mutex<Grants>>,
    /// The access tokens issued (the model fake takes these).
    pub access_tokens: Arc<Mutex<HashSet<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOAuth {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Shared = (Arc<Mutex<Grants>>, Arc<Mutex<HashSet<String>>>);

impl FakeOAuth {
    /// A provider with one grant: `refresh_token` for `client_id`; access tokens last
    /// `expires_in` seconds.
    pub async fn start(
        client_id: &str,
        refresh_token: &str,
        expires_in: i64,
    ) -> anyhow::Result<FakeOAuth> {
        let state = Arc::new(Mutex::new(Grants {
            client_id: client_id.into(),
            current: Some(refresh_token.into()),
            issued_refresh: vec![refresh_token.into()],
            expires_in,
            ..Default::default()
        }));
        let access_tokens: Arc<Mutex<HashSet<String>>> = Arc::default();
        let app = Router::new()
            .route("/token", post(token))
            .with_state((state.clone(), access_tokens.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeOAuth {
            token_url: format!("http://{addr}/token"),
            state,
            access_tokens,
            task,
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Grants) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The user revoked the grant: no refresh token works any more.
    pub fn revoke(&self) {
        self.with(|g| g.current = None);
    }

    pub fn refreshed(&self) -> usize {
        self.with(|g| g.refreshed)
    }

    pub fn refused(&self) -> Vec<String> {
        self.with(|g| g.refused.clone())
    }

    /// Every token it ever issued, refresh and access.
    pub fn all_tokens(&self) -> Vec<String> {
        let mut out = self.with(|g| g.issued_refresh.clone());
        out.extend(
            self.access_tokens
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
        out
    }
}

fn error(status: StatusCode, code: &str) -> Response {
    (status, Json(json!({"error": code}))).into_response()
}

async fn token(State((state, access)): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let form_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !form_type.starts_with("application/x-www-form-urlencoded") {
        return error(StatusCode::BAD_REQUEST, "invalid_request");
    }
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    let mut g = state.lock().unwrap_or_else(|e| e.into_inner());
    if form.get("grant_type").map(String::as_str) != Some("refresh_token") {
        return error(StatusCode::BAD_REQUEST, "unsupported_grant_type");
    }
    if form.get("client_id") != Some(&g.client_id) {
        g.refused.push("invalid_client".into());
        return error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let given = form.get("refresh_token").cloned().unwrap_or_default();
    if g.rotated_out.contains(&given) {
        g.refused
            .push("invalid_grant (reused: the chain is revoked)".into());
        g.current = None;
        return error(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    if g.current.as_deref() != Some(given.as_str()) {
        g.refused.push("invalid_grant".into());
        return error(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    g.counter += 1;
    g.refreshed += 1;
    let rotated = format!("rt-rotated-{}-{:016x}", g.counter, rand::random::<u64>());
    let issued = format!("at-{}-{:016x}", g.counter, rand::random::<u64>());
    g.rotated_out.insert(given);
    g.current = Some(rotated.clone());
    g.issued_refresh.push(rotated.clone());
    access
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(issued.clone());
    Json(json!({"access_token": issued, "token_type": "Bearer", "expires_in": g.expires_in, "refresh_token": rotated}))
        .into_response()
}
