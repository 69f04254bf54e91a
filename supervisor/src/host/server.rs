//! The host's HTTP server: its routes, the shared-secret check, and a graceful stop that
//! stops every sandbox.

use super::images;
use super::*;
use axum::middleware::{self, Next};

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
    let data_dir = std::fs::canonicalize(&config.data_dir)?;
    let bwrap = find_bwrap();
    match &bwrap {
        Some(b) => tracing::info!(bwrap = %b.display(), "sandboxes are confined with bubblewrap"),
        None => tracing::warn!("bubblewrap not found: sandboxes run unconfined as this user"),
    }
    // The sandbox image's root, when sandboxes are to run in it (bubblewrap makes it their
    // `/`): the files the clouds run, here.
    let image = match std::env::var_os("INSPECT_SANDBOX_IMAGE").filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = std::fs::canonicalize(&dir).with_context(|| {
                format!("INSPECT_SANDBOX_IMAGE {}", PathBuf::from(&dir).display())
            })?;
            anyhow::ensure!(
                dir.join(IMAGE_SUPERVISOR.trim_start_matches('/')).exists(),
                "INSPECT_SANDBOX_IMAGE {} is not a sandbox image's root (scripts/build-image.sh makes one)",
                dir.display()
            );
            anyhow::ensure!(
                bwrap.is_some(),
                "INSPECT_SANDBOX_IMAGE needs bubblewrap to run sandboxes in the image"
            );
            tracing::info!(image = %dir.display(), "sandboxes run in the sandbox image");
            Some(dir)
        }
        None => None,
    };
    let state = Arc::new(HostState {
        secret: config.secret,
        data_dir,
        snapshot_budget: std::env::var("INSPECT_SNAPSHOT_BUDGET_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_SNAPSHOT_BUDGET),
        max_sandboxes: std::env::var("INSPECT_MAX_SANDBOXES")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n| *n > 0),
        bwrap,
        image,
        sandboxes: Mutex::new(HashMap::new()),
    });
    let app = router(state.clone());
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    tracing::info!(addr = %listener.local_addr()?, data_dir = %state.data_dir.display(), "sandbox host listening");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving")?;
    let mut sandboxes = state.sandboxes.lock().await;
    for (id, sandbox) in sandboxes.iter_mut() {
        tracing::info!(sandbox = %id, "stopping sandbox");
        stop_child(&mut sandbox.child).await;
    }
    tracing::info!("sandbox host stopped");
    Ok(())
}

fn router(state: Arc<HostState>) -> Router {
    let authed = Router::new()
        .route("/sandboxes", get(list_sandboxes).post(create_sandbox))
        .route("/sandboxes/{id}", get(sandbox_status).delete(stop_sandbox))
        .route(
            "/sandboxes/{id}/snapshot",
            axum::routing::post(snapshot_sandbox),
        )
        .route("/sandboxes/{id}/ports", axum::routing::post(expose_port))
        .route("/repositories/check", axum::routing::post(check_repository))
        .route("/sessions/{id}", axum::routing::delete(delete_session))
        .route("/images", axum::routing::post(images::start_build))
        .route("/images/{id}", axum::routing::delete(images::delete_image))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            require_secret,
        ))
        .with_state(state.clone());
    Router::new()
        .route("/health", get(health))
        .with_state(state)
        .merge(authed)
        .fallback(|| async { error(ApiError::not_found("no such route")) })
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
