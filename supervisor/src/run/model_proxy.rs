//! Brokered model access inside the sandbox: for each grant the session was given, a
//! proxy on loopback that the agent calls in place of the provider. The agent holds only a
//! marker (`inspect-managed:<grant>`) as its key; the proxy checks it, asks the control
//! plane for a short-lived access token with the sandbox's own credentials (kept until a
//! minute before it expires), and forwards the call with that token as the bearer. The
//! refresh token never leaves the control plane; the access token stays in this process.
//! A grant the provider revoked is said on the timeline in words, once, and the agent's
//! call is refused as the provider would refuse a bad key.

use super::link::Events;
use anyhow::Result;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use inspect_protocol::models::{managed_marker, ManagedGrant, ModelToken};
use inspect_protocol::sandbox::SandboxEvent;
use std::sync::Arc;
use tokio::sync::Mutex;

/// A held token is asked for again this long before it expires.
const RENEW_BEFORE_MS: i64 = 60_000;

/// Where a provider's API is when the sandbox is told nothing else.
pub fn default_upstream(provider: &str) -> &'static str {
    match provider {
        "anthropic" => "https://api.anthropic.com",
        _ => "https://api.openai.com",
    }
}

/// A running proxy: the provider, the URL the agent calls, the marker it holds.
pub struct Proxy {
    pub provider: String,
    pub url: String,
    pub marker: String,
}

struct Broker {
    grant: ManagedGrant,
    marker: String,
    upstream: String,
    control_plane_url: String,
    session_id: String,
    sandbox_id: String,
    sandbox_token: String,
    held: Mutex<Option<ModelToken>>,
    said_revoked: std::sync::atomic::AtomicBool,
    events: Events,
    /// Told when the grant is revoked (the running turn then ends, in words).
    revoked: tokio::sync::mpsc::UnboundedSender<String>,
    http: reqwest::Client,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The key a call carries: `x-api-key`, or the bearer of `Authorization`.
fn key_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        })
}

/// Starts one proxy per grant (`upstream` names where each provider's API is).
#[allow(clippy::too_many_arguments)]
pub async fn start(
    grants: &[ManagedGrant],
    upstream: &dyn Fn(&str) -> String,
    control_plane_url: &str,
    session_id: &str,
    sandbox_id: &str,
    sandbox_token: &str,
    events: &Events,
    revoked: tokio::sync::mpsc::UnboundedSender<String>,
) -> Result<Vec<Proxy>> {
    let mut out = Vec::new();
    for grant in grants {
        let marker = managed_marker(&grant.id);
        let broker = Arc::new(Broker {
            grant: grant.clone(),
            marker: marker.clone(),
            upstream: upstream(&grant.provider).trim_end_matches('/').to_owned(),
            control_plane_url: control_plane_url.trim_end_matches('/').to_owned(),
            session_id: session_id.to_owned(),
            sandbox_id: sandbox_id.to_owned(),
            sandbox_token: sandbox_token.to_owned(),
            held: Mutex::new(None),
            said_revoked: Default::default(),
            events: events.clone(),
            revoked: revoked.clone(),
            http: reqwest::Client::builder()
                .connect_timeout(std::time::Duration::from_secs(30))
                .build()?,
        });
        let app = axum::Router::new().fallback(forward).with_state(broker);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        tracing::info!(provider = %grant.provider, "brokered model access");
        out.push(Proxy {
            provider: grant.provider.clone(),
            url,
            marker,
        });
    }
    Ok(out)
}

/// A provider-shaped refusal (what the agent would get for a bad key).
fn refused(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({"type": "error", "error": {"type": "authentication_error", "message": message}});
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

impl Broker {
    /// The held token, or a new one from the control plane.
    async fn token(&self) -> Result<String, (StatusCode, String)> {
        let mut held = self.held.lock().await;
        if let Some(t) = held
            .as_ref()
            .filter(|t| t.expires_at - now_ms() > RENEW_BEFORE_MS)
        {
            return Ok(t.access_token.clone());
        }
        let url = format!(
            "{}/sessions/{}/model-token",
            self.control_plane_url, self.session_id
        );
        let resp = self
            .http
            .post(&url)
            .bearer_auth(&self.sandbox_token)
            .header("X-Sandbox-ID", &self.sandbox_id)
            .json(&serde_json::json!({"grantId": self.grant.id}))
            .timeout(std::time::Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| (StatusCode::BAD_GATEWAY, format!("the control plane: {e}")))?;
        let status = resp.status();
        let body: serde_json::Value = resp.json().await.unwrap_or_default();
        if status == reqwest::StatusCode::GONE {
            let why = body["error"]["message"]
                .as_str()
                .unwrap_or("the grant was revoked")
                .to_owned();
            if !self
                .said_revoked
                .swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                self.events.send(SandboxEvent::Warning {
                    scope: "model-grant".into(),
                    message: format!(
                        "the {} access this session was given stopped working: {why}",
                        self.grant.provider
                    ),
                });
            }
            let _ = self.revoked.send(format!(
                "the {} grant was revoked: {why}",
                self.grant.provider
            ));
            return Err((StatusCode::UNAUTHORIZED, why));
        }
        if !status.is_success() {
            let why = body["error"]["message"]
                .as_str()
                .unwrap_or("no token")
                .to_owned();
            return Err((
                StatusCode::BAD_GATEWAY,
                format!("the control plane answered {status}: {why}"),
            ));
        }
        let token: ModelToken = serde_json::from_value(body).map_err(|e| {
            (
                StatusCode::BAD_GATEWAY,
                format!("the control plane's token: {e}"),
            )
        })?;
        let access = token.access_token.clone();
        *held = Some(token);
        Ok(access)
    }
}

async fn forward(
    State(b): State<Arc<Broker>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    use subtle::ConstantTimeEq;
    let given = key_of(&headers).unwrap_or_default();
    if !(given.len() == b.marker.len() && bool::from(given.as_bytes().ct_eq(b.marker.as_bytes()))) {
        return refused(
            StatusCode::UNAUTHORIZED,
            "this proxy takes the sandbox's managed marker only",
        );
    }
    let access = match b.token().await {
        Ok(t) => t,
        Err((status, why)) => return refused(status, &why),
    };
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let Ok(method) = reqwest::Method::from_bytes(method.as_str().as_bytes()) else {
        return refused(StatusCode::BAD_REQUEST, "unknown method");
    };
    let mut req = b.http.request(method, format!("{}{path}", b.upstream));
    for (name, value) in &headers {
        let n = name.as_str();
        if matches!(
            n,
            "host" | "content-length" | "x-api-key" | "authorization" | "connection"
        ) || (n == "anthropic-beta" && b.grant.provider == "anthropic")
        {
            continue;
        }
        req = req.header(n, value.as_bytes());
    }
    req = req.bearer_auth(&access);
    if b.grant.provider == "anthropic" {
        // Anthropic takes an OAuth access token as a bearer with this beta named.
        let beta = headers
            .get("anthropic-beta")
            .and_then(|v| v.to_str().ok())
            .map(|v| format!("{v},oauth-2025-04-20"))
            .unwrap_or_else(|| "oauth-2025-04-20".into());
        req = req.header("anthropic-beta", beta);
    }
    let resp = match req.body(body).send().await {
        Ok(r) => r,
        Err(e) => return refused(StatusCode::BAD_GATEWAY, &format!("the provider: {e}")),
    };
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    if status == StatusCode::UNAUTHORIZED {
        // The token went bad before its time: the next call asks for a new one.
        *b.held.lock().await = None;
    }
    let mut out = Response::builder().status(status);
    for (name, value) in resp.headers() {
        if matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            continue;
        }
        out = out.header(name.as_str(), value.as_bytes());
    }
    let stream = resp
        .bytes_stream()
        .map(|r| r.map_err(std::io::Error::other));
    out.body(Body::from_stream(stream))
        .unwrap_or_else(|_| refused(StatusCode::BAD_GATEWAY, "could not relay the answer"))
}
