//! The local host's prebuilt images. `POST /images` starts a build: a sandbox directory
//! of its own where `inspect-supervisor build` clones and sets up the workspace; when it
//! succeeds the host saves the workspace and home as an image (`<data>/images/img_….tar`,
//! kept apart from session snapshots and their disk budget) and reports the outcome to
//! the request's callback URL with its single-use token. `DELETE /images/:id` removes one.
//! A new sandbox restores an image like a snapshot (`restoreFrom: img_…`).

use super::{error, image_paths, is_image, runtime_version, sandbox_command, valid_id, HostState};
use anyhow::Context;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use inspect_protocol::images::{BuildImageRequest, BuildReport, BuildStarted};
use inspect_protocol::provider::{BootMode, SnapshotInfo, SpawnRequest};
use inspect_protocol::ApiError;
use std::path::Path as FsPath;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::process::Command;

/// Report deliveries tried before the host gives up (the control plane times the build
/// out then).
const REPORT_TRIES: u32 = 5;

/// `POST /images`: starts the build and answers at once (202).
pub async fn start_build(State(state): State<Arc<HostState>>, body: axum::body::Bytes) -> Response {
    let req: BuildImageRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(ApiError::bad_request(format!(
                "malformed build request: {e}"
            )))
        }
    };
    if !valid_id(&req.build_id) {
        return error(ApiError::bad_request("invalid build id"));
    }
    if req.repositories.is_empty() {
        return error(ApiError::bad_request(
            "an image holds at least one repository",
        ));
    }
    if !req.callback_url.starts_with("http://") && !req.callback_url.starts_with("https://") {
        return error(ApiError::bad_request("the callback URL must be http(s)"));
    }
    let root = state.data_dir.join(&req.build_id);
    if root.exists() {
        return error(ApiError::new(
            inspect_protocol::ErrorCode::Conflict,
            format!("build {} is already running", req.build_id),
        ));
    }
    let build_id = req.build_id.clone();
    tracing::info!(build = %build_id, repositories = req.repositories.len(), "image build started");
    tokio::spawn(async move {
        let report = build(&state, &req, &root).await;
        let _ = std::fs::remove_dir_all(&root);
        deliver(&req, &report).await;
    });
    (StatusCode::ACCEPTED, Json(BuildStarted { build_id })).into_response()
}

/// Runs the build to its end (or its time limit) and saves the image when it succeeded.
async fn build(state: &HostState, req: &BuildImageRequest, root: &FsPath) -> BuildReport {
    let started = Instant::now();
    let failed = |e: anyhow::Error, output: Option<String>| BuildReport {
        success: false,
        image_id: None,
        runtime_version: runtime_version(),
        repositories: Vec::new(),
        error: Some(format!("{e:#}")),
        output,
        bytes: None,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    let report_path = root.join("build-report.json");
    let ran = async {
        std::fs::create_dir_all(root.join("workspace"))?;
        let spawn = SpawnRequest {
            setup_secrets: Vec::new(),
            session_id: req.build_id.clone(),
            sandbox_id: req.build_id.clone(),
            sandbox_token: String::new(),
            control_plane_url: String::new(),
            repositories: req.repositories.clone(),
            work_branch: "open-inspect/image".into(),
            boot_mode: BootMode::Build,
            env: req.env.clone(),
            tunnel_ports: Vec::new(),
            default_model: None,
            models: Vec::new(),
            skills: Vec::new(),
            mcp_servers: Vec::new(),
            agent: Default::default(),
            managed_grants: Vec::new(),
            restore_from: None,
            egress: None,
        };
        let log = std::fs::File::create(root.join("supervisor.log"))?;
        let mut cmd = sandbox_command(state, root, &spawn, "build")?;
        cmd.env("INSPECT_BUILD_REPORT", &report_path)
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some(token) = &req.git_token {
            cmd.env("INSPECT_GIT_TOKEN", token);
        }
        let mut child = cmd.spawn().context("starting the build")?;
        let limit = Duration::from_secs(req.timeout_seconds.max(1));
        match tokio::time::timeout(limit, child.wait()).await {
            Ok(status) => Ok::<_, anyhow::Error>(Some(status?)),
            Err(_) => {
                if let Some(pid) = child.id() {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                let _ = child.wait().await;
                Ok(None)
            }
        }
    }
    .await;
    let written: Option<BuildReport> = std::fs::read(&report_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let status = match ran {
        Ok(Some(status)) => status,
        Ok(None) => {
            return failed(
                anyhow::anyhow!("the build ran past {} s", req.timeout_seconds),
                written.and_then(|r| r.output),
            )
        }
        Err(e) => return failed(e, None),
    };
    let Some(mut report) = written else {
        return failed(
            anyhow::anyhow!("the build exited with {status} and no report"),
            None,
        );
    };
    report.runtime_version = runtime_version();
    if !report.success || !status.success() {
        report.success = false;
        report
            .error
            .get_or_insert_with(|| format!("the build exited with {status}"));
        report.duration_ms = started.elapsed().as_millis() as u64;
        return report;
    }
    match save(&state.data_dir, &req.build_id, root).await {
        Ok(info) => {
            tracing::info!(build = %req.build_id, image = %info.snapshot_id, bytes = info.bytes, "image saved");
            report.image_id = Some(info.snapshot_id);
            report.bytes = Some(info.bytes);
        }
        Err(e) => {
            report.success = false;
            report.error = Some(format!("saving the image: {e:#}"));
        }
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    report
}

/// The build's workspace and home as one tar, with its runtime alongside.
async fn save(data_dir: &FsPath, build_id: &str, root: &FsPath) -> anyhow::Result<SnapshotInfo> {
    let started = Instant::now();
    let mut b = [0u8; 12];
    let _ = getrandom::fill(&mut b);
    let image_id = format!("img_{}", hex::encode(b));
    let (tar, meta) = image_paths(data_dir, &image_id);
    std::fs::create_dir_all(tar.parent().context("images dir")?)?;
    let status = Command::new("tar")
        .arg("-cf")
        .arg(&tar)
        .arg("-C")
        .arg(root)
        .args(["workspace", "home"])
        .stdin(std::process::Stdio::null())
        .status()
        .await?;
    anyhow::ensure!(
        status.success() || status.code() == Some(1),
        "tar exited with {status}"
    );
    let info = SnapshotInfo {
        snapshot_id: image_id,
        sandbox_id: build_id.to_owned(),
        runtime_version: runtime_version(),
        bytes: std::fs::metadata(&tar)?.len(),
        duration_ms: started.elapsed().as_millis() as u64,
        session_id: None,
    };
    std::fs::write(&meta, serde_json::to_vec(&info)?)?;
    Ok(info)
}

/// Reports to the control plane, a few times with growing pauses while it is unreachable
/// or answers 5xx. A 4xx (a used or unknown token, a timed-out build) is final.
async fn deliver(req: &BuildImageRequest, report: &BuildReport) {
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(build = %req.build_id, "no HTTP client: {e}");
            return;
        }
    };
    for attempt in 0..REPORT_TRIES {
        let sent = client
            .post(&req.callback_url)
            .bearer_auth(&req.callback_token)
            .json(report)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => {
                tracing::info!(build = %req.build_id, success = report.success, "build reported");
                return;
            }
            Ok(r) if r.status().is_client_error() => {
                tracing::warn!(build = %req.build_id, status = %r.status(), "the control plane refused the build's report");
                return;
            }
            Ok(r) => {
                tracing::warn!(build = %req.build_id, status = %r.status(), attempt, "reporting the build failed")
            }
            Err(e) => {
                tracing::warn!(build = %req.build_id, attempt, "reporting the build failed: {e}")
            }
        }
        tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
    }
}

/// `DELETE /images/:id`.
pub async fn delete_image(State(state): State<Arc<HostState>>, Path(id): Path<String>) -> Response {
    if !valid_id(&id) || !is_image(&id) {
        return error(ApiError::bad_request("invalid image id"));
    }
    let (tar, meta) = image_paths(&state.data_dir, &id);
    if !meta.exists() {
        return error(ApiError::not_found(format!("no image {id}")));
    }
    let _ = std::fs::remove_file(tar);
    let _ = std::fs::remove_file(meta);
    tracing::info!(image = %id, "image deleted");
    Json(serde_json::json!({ "deleted": true })).into_response()
}
