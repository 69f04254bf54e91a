//! The local sandbox provider: an HTTP API on loopback, authenticated by a shared secret.

use anyhow::Context;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use inspect_protocol::health::HostHealth;
use inspect_protocol::ApiError;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use subtle::ConstantTimeEq;

pub struct HostConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub secret: String,
}

struct HostState {
    secret: String,
}

pub async fn serve(config: HostConfig) -> anyhow::Result<()> {
    anyhow::ensure!(
        config.listen.ip().is_loopback(),
        "the local sandbox host listens on loopback only, not {}",
        config.listen
    );
    anyhow::ensure!(
        !config.secret.is_empty(),
        "SANDBOX_HOST_SECRET must not be empty"
    );
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating data directory {}", config.data_dir.display()))?;
    let state = Arc::new(HostState {
        secret: config.secret,
    });
    let app = router(state);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(addr = %listener.local_addr()?, data_dir = %config.data_dir.display(), "sandbox host listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving")?;
    tracing::info!("sandbox host stopped");
    Ok(())
}

fn router(state: Arc<HostState>) -> Router {
    let authed = Router::new()
        .route("/sandboxes", get(list_sandboxes))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            require_secret,
        ))
        .with_state(state);
    Router::new()
        .route("/health", get(health))
        .merge(authed)
        .fallback(|| async { error(ApiError::not_found("no such route")) })
}

async fn health() -> Json<HostHealth> {
    Json(HostHealth {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        sandboxes: 0,
    })
}

async fn list_sandboxes() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "sandboxes": [] }))
}

fn error(e: ApiError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(e.body())).into_response()
}

async fn require_secret(State(state): State<Arc<HostState>>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if bool::from(presented.as_bytes().ct_eq(state.secret.as_bytes())) {
        next.run(req).await
    } else {
        error(ApiError::unauthorized(
            "missing or wrong sandbox host secret",
        ))
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
}
