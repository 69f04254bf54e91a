//! A sandbox provider of the tests' own: it speaks the local host's API, keeps each spawn
//! request (with its sandbox token) and lets the test play the sandbox over the real
//! sandbox socket. For benchmarks and browser tests that need many events fast.

use crate::Stack;
use anyhow::{Context, Result};
use inspect_protocol::provider::{SandboxInfo, SpawnRequest};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct CaptureProvider {
    pub url: String,
    pub spawns: tokio::sync::mpsc::UnboundedReceiver<SpawnRequest>,
    /// Spawns refused for want of room (with a cap).
    pub refused: Arc<std::sync::atomic::AtomicUsize>,
}

impl CaptureProvider {
    pub async fn start() -> Result<CaptureProvider> {
        Self::start_capped(None).await
    }

    /// With `cap`, at most that many sandboxes run at once: a spawn past it is refused as
    /// the local host refuses one (429, "N of CAP sandboxes are running on this host").
    pub async fn start_capped(cap: Option<usize>) -> Result<CaptureProvider> {
        Self::start_with(cap, Duration::ZERO).await
    }

    /// With a cap (as [`Self::start_capped`]), answering each spawn only after `answer_after`
    /// (a provider that is slow to make sandboxes).
    pub async fn start_with(cap: Option<usize>, answer_after: Duration) -> Result<CaptureProvider> {
        use axum::extract::{Path, State};
        use axum::http::StatusCode;
        use axum::response::IntoResponse;
        use axum::routing::post;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let refusals = Arc::clone(&refused);
        // The sandboxes spawned and not stopped: the test plays them, so they run until they
        // are stopped (the session asks while one connects).
        type Running = Arc<Mutex<HashMap<String, SandboxInfo>>>;
        let running: Running = Default::default();
        let app = axum::Router::new()
            .route(
                "/sandboxes",
                post(
                    move |State(running): State<Running>,
                          axum::Json(req): axum::Json<SpawnRequest>| {
                        let tx = tx.clone();
                        let refusals = Arc::clone(&refusals);
                        async move {
                            tokio::time::sleep(answer_after).await;
                            let running_now = held(&running).len();
                            if cap.is_some_and(|cap| running_now >= cap)
                                && !held(&running).contains_key(&req.sandbox_id)
                            {
                                refusals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let message = format!(
                                    "{running_now} of {} sandboxes are running on this host",
                                    cap.unwrap_or_default()
                                );
                                let body = json!({"error": {"code": "too_many_requests", "message": message}});
                                return (StatusCode::TOO_MANY_REQUESTS, axum::Json(body))
                                    .into_response();
                            }
                            let info = SandboxInfo {
                                sandbox_id: req.sandbox_id.clone(),
                                session_id: req.session_id.clone(),
                                status: "running".into(),
                                runtime_version: String::new(),
                                tunnel_urls: Default::default(),
                                detail: None,
                                vendor_id: None,
                                editor: None,
                                desktop: None,
                            };
                            held(&running).insert(info.sandbox_id.clone(), info.clone());
                            let _ = tx.send(req);
                            (StatusCode::CREATED, axum::Json(info)).into_response()
                        }
                    },
                ),
            )
            .route(
                "/sandboxes/{id}",
                axum::routing::get(
                    |State(running): State<Running>, Path(id): Path<String>| async move {
                        match held(&running).get(&id) {
                            Some(info) => axum::Json(info.clone()).into_response(),
                            None => (
                                StatusCode::NOT_FOUND,
                                axum::Json(json!({"error": format!("no sandbox {id}")})),
                            )
                                .into_response(),
                        }
                    },
                )
                .delete(
                    |State(running): State<Running>, Path(id): Path<String>| async move {
                        held(&running).remove(&id);
                        StatusCode::NO_CONTENT
                    },
                ),
            )
            // Registration checks run the real supervisor's check.
            .route("/repositories/check", post(check_repository))
            // It keeps nothing of a session, so deleting one removes nothing.
            .route(
                "/sessions/{id}",
                axum::routing::delete(|| async {
                    axum::Json(json!({"sandboxes": 0, "snapshots": 0, "bytes": 0}))
                }),
            )
            .with_state(running);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(CaptureProvider {
            url,
            spawns: rx,
            refused,
        })
    }

    /// An unthrottled stack whose sandboxes this provider makes, with `local/<repo>`
    /// registered; the folder returned is the repository's source (keep it while the stack
    /// runs).
    pub async fn stack_with_repo(&self, repo: &str) -> Result<(Stack, tempfile::TempDir)> {
        self.stack_with_repo_in(crate::StackOptions::unthrottled(), repo)
            .await
    }

    /// [`Self::stack_with_repo`] on a stack started with `options` (this provider's
    /// variables added).
    pub async fn stack_with_repo_in(
        &self,
        mut options: crate::StackOptions,
        repo: &str,
    ) -> Result<(Stack, tempfile::TempDir)> {
        options.vars.extend(self.worker_vars());
        let stack = Stack::start_with(options)
            .await
            .context("starting the stack")?;
        let source = crate::repo::source_repo();
        crate::client::register_repo(&stack.base_url, repo, source.path()).await?;
        Ok((stack, source))
    }

    /// The Worker variables that point it at this provider.
    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("SANDBOX_HOST_URL".into(), self.url.clone()),
            ("SANDBOX_HOST_SECRET".into(), "capture".into()),
        ]
    }

    /// The next spawn request, within 30 s.
    pub async fn next_spawn(&mut self) -> Result<SpawnRequest> {
        tokio::time::timeout(Duration::from_secs(30), self.spawns.recv())
            .await?
            .context("no spawn")
    }
}

/// The map behind a mutex, even if a handler panicked while holding it.
fn held<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub type SandboxSocket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to a session as the sandbox a spawn request was for.
pub async fn connect_sandbox(stack: &Stack, spawn: &SpawnRequest) -> Result<SandboxSocket> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = stack
        .ws_url(&format!("/sessions/{}/ws?type=sandbox", spawn.session_id))
        .into_client_request()?;
    req.headers_mut().insert(
        "Authorization",
        format!("Bearer {}", spawn.sandbox_token).parse()?,
    );
    req.headers_mut()
        .insert("X-Sandbox-ID", spawn.sandbox_id.parse()?);
    Ok(tokio_tungstenite::connect_async(req).await?.0)
}

/// The next command of a kind the control plane sends the sandbox.
pub async fn next_command(ws: &mut SandboxSocket, kind: &str) -> Result<serde_json::Value> {
    use futures::StreamExt;
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await?
            .context("socket closed")??;
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
            let v: serde_json::Value = serde_json::from_str(&t)?;
            if v["type"] == kind {
                return Ok(v);
            }
        }
    }
}

async fn check_repository(
    axum::Json(req): axum::Json<inspect_protocol::provider::RepositoryCheck>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let out = match crate::host::supervisor_bin() {
        Ok(bin) => {
            tokio::process::Command::new(bin)
                .arg("check-repository")
                .arg(&req.path)
                .output()
                .await
        }
        Err(e) => {
            return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
        }
    };
    match out {
        Ok(o) => {
            let status = if o.status.success() {
                axum::http::StatusCode::OK
            } else {
                axum::http::StatusCode::BAD_REQUEST
            };
            (
                status,
                [("content-type", "application/json")],
                String::from_utf8_lossy(&o.stdout).into_owned(),
            )
                .into_response()
        }
        Err(e) => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
