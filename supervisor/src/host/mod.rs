//! The local sandbox provider: an HTTP API on loopback, authenticated by a shared secret.
//! Each sandbox is `inspect-supervisor run` in its own process group with its own
//! directory under the data directory (`<data>/<sandbox id>/workspace`).
//!
//! Isolation: where bubblewrap (`bwrap`) is installed, each sandbox runs in its own PID
//! namespace with the whole filesystem read-only except its own directory (and the local
//! repositories it pushes its branch back to); it shares the host's network, unless its
//! environment's egress policy confines it: then it has a network of its own whose only
//! ways out are this host's ([`egress`]). Without
//! bubblewrap a sandbox is a process tree of the host's user with its own working
//! directory and environment, and can read and write what that user can.

use anyhow::Context;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use inspect_protocol::desktop::DesktopEndpoints;
use inspect_protocol::editor::EditorEndpoint;
use inspect_protocol::health::{DiskUse, HostHealth};
use inspect_protocol::provider::{
    RepositoryCheck, RepositoryChecked, SandboxInfo, SandboxList, SessionRemoved, SnapshotInfo,
    SpawnRequest,
};
use inspect_protocol::ApiError;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

pub mod egress;
pub mod gate;
pub mod head;
pub mod images;
pub mod server;

pub struct HostConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub secret: String,
}

/// Variables of the host's own environment that reach every sandbox: model credentials
/// and agent settings a self-hoster puts in their shell.
const PASSED_THROUGH: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "INSPECT_MODEL_BASE_URL",
    "INSPECT_MODEL_API_KEY",
    "INSPECT_MODEL",
    "INSPECT_OPENCODE_BIN",
    "INSPECT_CLAUDE_BIN",
    "INSPECT_ANTHROPIC_BASE_URL",
    "INSPECT_CHROMIUM",
    "INSPECT_CODE_SERVER_BIN",
    "PATH",
    "LANG",
    // A private certificate authority the control plane's or a model server's certificate
    // comes from (read by the supervisor's TLS, as by OpenSSL's tools).
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

struct Sandbox {
    session_id: String,
    child: Child,
    tunnel_urls: BTreeMap<String, String>,
    editor: Option<EditorEndpoint>,
    desktop: Option<DesktopEndpoints>,
    /// One task per exposed port (and its way out, when confined); aborted when the
    /// sandbox goes.
    forwarders: Vec<tokio::task::JoinHandle<()>>,
    /// Its supervisor's inbound socket, when it has a network of its own.
    inbound: Option<Arc<PathBuf>>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for f in &self.forwarders {
            f.abort();
        }
    }
}

pub(crate) struct HostState {
    secret: String,
    pub(crate) data_dir: PathBuf,
    /// Snapshots past this many bytes are pruned (`INSPECT_SNAPSHOT_BUDGET_BYTES`).
    snapshot_budget: u64,
    /// At most this many sandboxes run at once (`INSPECT_MAX_SANDBOXES`); more wait.
    max_sandboxes: Option<usize>,
    /// bubblewrap, when installed (and not turned off with `INSPECT_SANDBOX_CONFINE=0`).
    bwrap: Option<PathBuf>,
    /// The sandbox image's root that sandboxes run in (`INSPECT_SANDBOX_IMAGE`), if any.
    image: Option<PathBuf>,
    sandboxes: Mutex<HashMap<String, Sandbox>>,
}

/// Where the image keeps the supervisor, its tools and its PATH (as the Dockerfile does).
const IMAGE_SUPERVISOR: &str = "/usr/local/bin/inspect-supervisor";
const IMAGE_ENV: &[(&str, &str)] = &[
    (
        "PATH",
        "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
    ),
    ("INSPECT_OPENCODE_BIN", "/usr/local/bin/opencode"),
    ("INSPECT_CLAUDE_BIN", "/usr/local/bin/claude"),
    ("INSPECT_CODE_SERVER_BIN", "/usr/local/bin/code-server"),
    ("INSPECT_CHROMIUM", "/usr/bin/chromium"),
];

impl HostState {
    /// Whether this host's sandboxes can run the editor.
    fn has_editor(&self) -> bool {
        match &self.image {
            Some(image) => image.join("usr/local/bin/code-server").exists(),
            None => std::env::var_os("INSPECT_CODE_SERVER_BIN").is_some(),
        }
    }

    /// Whether this host's sandboxes can run the desktop (its programs are in the image,
    /// or on this host).
    fn has_desktop(&self) -> bool {
        let root = self.image.as_deref().unwrap_or(std::path::Path::new("/"));
        crate::run::desktop::installed(root)
    }
}

async fn health(State(state): State<Arc<HostState>>) -> Json<HostHealth> {
    let sandboxes = state.sandboxes.lock().await.len();
    let data_dir = state.data_dir.clone();
    let budget = state.snapshot_budget;
    let disk = tokio::task::spawn_blocking(move || disk_use(&data_dir, budget))
        .await
        .ok();
    Json(HostHealth {
        status: "ok".into(),
        version: runtime_version(),
        sandboxes,
        disk,
    })
}

/// Bytes under a directory (files only, links not followed).
fn tree_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

fn disk_use(data_dir: &std::path::Path, budget: u64) -> DiskUse {
    let snapshots = stored_snapshots(data_dir);
    let sandbox_bytes = std::fs::read_dir(data_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name() != "snapshots")
        .map(|e| tree_bytes(&e.path()))
        .sum();
    DiskUse {
        sandbox_bytes,
        snapshot_bytes: snapshots.iter().map(|s| s.info.bytes).sum(),
        snapshots: snapshots.len(),
        snapshot_budget_bytes: budget,
    }
}

/// A snapshot on disk, with when it was made.
struct Stored {
    info: SnapshotInfo,
    made: std::time::SystemTime,
}

fn stored_snapshots(data_dir: &std::path::Path) -> Vec<Stored> {
    let dir = data_dir.join("snapshots");
    let mut out: Vec<Stored> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| {
            let info: SnapshotInfo = serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
            let made = e.metadata().and_then(|m| m.modified()).ok()?;
            Some(Stored { info, made })
        })
        .collect();
    out.sort_by_key(|s| s.made);
    out
}

fn remove_snapshot(data_dir: &std::path::Path, snapshot_id: &str) {
    let (tar, meta) = snapshot_paths(data_dir, snapshot_id);
    let _ = std::fs::remove_file(tar);
    let _ = std::fs::remove_file(meta);
}

/// Which snapshots to delete to get under `budget`, oldest first, never the newest of a
/// session in `live` (a sandbox of it runs here: it is what its next restore needs).
fn prune_plan(
    snapshots: &[(String, Option<String>, u64)],
    live: &std::collections::HashSet<String>,
    budget: u64,
) -> Vec<String> {
    let mut total: u64 = snapshots.iter().map(|s| s.2).sum();
    let mut newest: HashMap<&str, &str> = HashMap::new();
    for (id, session, _) in snapshots {
        if let Some(session) = session {
            newest.insert(session.as_str(), id.as_str());
        }
    }
    let mut out = Vec::new();
    for (id, session, bytes) in snapshots {
        if total <= budget {
            break;
        }
        let protected = session
            .as_deref()
            .is_some_and(|s| live.contains(s) && newest.get(s) == Some(&id.as_str()));
        if protected {
            continue;
        }
        out.push(id.clone());
        total -= bytes;
    }
    out
}

/// Prunes snapshots past the budget.
async fn prune_snapshots(state: &HostState) {
    let live: std::collections::HashSet<String> = state
        .sandboxes
        .lock()
        .await
        .values()
        .map(|s| s.session_id.clone())
        .collect();
    let stored = stored_snapshots(&state.data_dir);
    let list: Vec<(String, Option<String>, u64)> = stored
        .iter()
        .map(|s| {
            (
                s.info.snapshot_id.clone(),
                s.info.session_id.clone(),
                s.info.bytes,
            )
        })
        .collect();
    for id in prune_plan(&list, &live, state.snapshot_budget) {
        tracing::info!(snapshot = %id, budget = state.snapshot_budget, "snapshot pruned past the disk budget");
        remove_snapshot(&state.data_dir, &id);
    }
}

/// `DELETE /sessions/:id`: everything the host keeps for a session goes — its sandboxes
/// (stopped), their directories and its snapshots.
async fn delete_session(
    State(state): State<Arc<HostState>>,
    Path(session): Path<String>,
) -> Response {
    if !valid_id(&session) {
        return error(ApiError::bad_request("invalid session id"));
    }
    let mut removed = SessionRemoved {
        sandboxes: 0,
        snapshots: 0,
        bytes: 0,
    };
    {
        let mut map = state.sandboxes.lock().await;
        let ids: Vec<String> = map
            .iter()
            .filter(|(_, s)| s.session_id == session)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            if let Some(mut s) = map.remove(&id) {
                stop_child(&mut s.child).await;
            }
        }
    }
    for entry in std::fs::read_dir(&state.data_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        let owner = std::fs::read_to_string(entry.path().join(SESSION_MARKER)).unwrap_or_default();
        if owner.trim() == session {
            removed.bytes += tree_bytes(&entry.path());
            removed.sandboxes += 1;
            if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                tracing::warn!(dir = %entry.path().display(), "removing a sandbox directory: {e}");
            }
        }
    }
    for s in stored_snapshots(&state.data_dir) {
        if s.info.session_id.as_deref() == Some(session.as_str()) {
            removed.bytes += s.info.bytes;
            removed.snapshots += 1;
            remove_snapshot(&state.data_dir, &s.info.snapshot_id);
        }
    }
    tracing::info!(session = %session, sandboxes = removed.sandboxes, snapshots = removed.snapshots, bytes = removed.bytes, "session removed");
    Json(removed).into_response()
}

/// 20 GiB of snapshots unless told otherwise.
const DEFAULT_SNAPSHOT_BUDGET: u64 = 20 * 1024 * 1024 * 1024;

/// The file in a sandbox's directory naming its session.
const SESSION_MARKER: &str = "session-id";

/// The socket in a confined sandbox's directory its gates reach its ports through.
const INBOUND_SOCKET: &str = "inbound.sock";

fn info(id: &str, sandbox: &mut Sandbox) -> SandboxInfo {
    let status = match sandbox.child.try_wait() {
        Ok(None) => "running",
        _ => "exited",
    };
    SandboxInfo {
        sandbox_id: id.to_owned(),
        session_id: sandbox.session_id.clone(),
        status: status.into(),
        runtime_version: runtime_version(),
        tunnel_urls: sandbox.tunnel_urls.clone(),
        detail: None,
        vendor_id: None,
        editor: sandbox.editor.clone(),
        desktop: sandbox.desktop.clone(),
    }
}

async fn list_sandboxes(State(state): State<Arc<HostState>>) -> Json<SandboxList> {
    let mut map = state.sandboxes.lock().await;
    let sandboxes = map.iter_mut().map(|(id, s)| info(id, s)).collect();
    Json(SandboxList { sandboxes })
}

async fn sandbox_status(State(state): State<Arc<HostState>>, Path(id): Path<String>) -> Response {
    let mut map = state.sandboxes.lock().await;
    match map.get_mut(&id) {
        Some(s) => Json(info(&id, s)).into_response(),
        None => error(ApiError::not_found(format!("no sandbox {id}"))),
    }
}

async fn stop_sandbox(State(state): State<Arc<HostState>>, Path(id): Path<String>) -> Response {
    let removed = state.sandboxes.lock().await.remove(&id);
    match removed {
        Some(mut s) => {
            stop_child(&mut s.child).await;
            Json(serde_json::json!({ "stopped": true })).into_response()
        }
        None => error(ApiError::not_found(format!("no sandbox {id}"))),
    }
}

pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 80
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

async fn create_sandbox(State(state): State<Arc<HostState>>, body: axum::body::Bytes) -> Response {
    let req: SpawnRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(ApiError::bad_request(format!(
                "malformed spawn request: {e}"
            )))
        }
    };
    if !valid_id(&req.sandbox_id) || !valid_id(&req.session_id) {
        return error(ApiError::bad_request("invalid sandbox or session id"));
    }
    match spawn(&state, &req).await {
        Ok(Spawned::Started(info)) => (StatusCode::CREATED, Json(info)).into_response(),
        Ok(Spawned::Full { running, cap }) => {
            tracing::info!(sandbox = %req.sandbox_id, running, cap, "spawn refused: at capacity");
            error(ApiError::new(
                inspect_protocol::ErrorCode::TooManyRequests,
                format!("{running} of {cap} sandboxes are running on this host"),
            ))
        }
        Err(e) => {
            tracing::error!(sandbox = %req.sandbox_id, "spawn failed: {e:#}");
            error(ApiError::new(
                inspect_protocol::ErrorCode::Unavailable,
                format!("spawn failed: {e:#}"),
            ))
        }
    }
}

enum Spawned {
    Started(Box<SandboxInfo>),
    /// No room: `running` of at most `cap` sandboxes run.
    Full {
        running: usize,
        cap: usize,
    },
}

async fn spawn(state: &HostState, req: &SpawnRequest) -> anyhow::Result<Spawned> {
    let mut map = state.sandboxes.lock().await;
    if let Some(existing) = map.get_mut(&req.sandbox_id) {
        return Ok(Spawned::Started(Box::new(info(&req.sandbox_id, existing))));
    }
    if let Some(cap) = state.max_sandboxes {
        let running = map
            .values_mut()
            .map(|s| matches!(s.child.try_wait(), Ok(None)))
            .filter(|alive| *alive)
            .count();
        if running >= cap {
            return Ok(Spawned::Full { running, cap });
        }
    }
    let root = state.data_dir.join(&req.sandbox_id);
    let workspace = root.join("workspace");
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(root.join(SESSION_MARKER), &req.session_id)?;
    let log = std::fs::File::create(root.join("supervisor.log"))?;
    let restore = match &req.restore_from {
        Some(snapshot_id) => Some(restorable(&state.data_dir, snapshot_id)?),
        None => None,
    };
    // A policy that confines is enforced, never only declared: a host that cannot give the
    // sandbox a network of its own refuses it.
    let policy = req.egress.clone().filter(|p| p.confines());
    if policy.is_some() && state.bwrap.is_none() {
        anyhow::bail!("this host cannot confine a sandbox's network (bubblewrap is not installed, or INSPECT_SANDBOX_CONFINE=0), and the session's environment lets its traffic out only to some hosts");
    }
    let way_out = match policy {
        Some(policy) => Some(egress::start(&root, policy, egress::reach_of(req))?),
        None => None,
    };
    let inbound = way_out
        .as_ref()
        .map(|_| Arc::new(root.join(INBOUND_SOCKET)));
    let (tunnel_urls, mut forwarders) = expose_ports(
        &req.tunnel_ports,
        &req.sandbox_id,
        state.secret.as_bytes(),
        inbound.clone(),
    )
    .await?;
    write_tunnels_file(&workspace, &req.sandbox_id, &tunnel_urls)?;
    let mut cmd = sandbox_command(state, &root, req, "run")?;
    if let Some(way_out) = way_out {
        cmd.envs(egress::proxy_env(way_out.proxy_port))
            .env("INSPECT_EGRESS_DIR", egress::net_dir(&root))
            .env("INSPECT_EGRESS_PROXY_PORT", way_out.proxy_port.to_string())
            .env("INSPECT_INBOUND_SOCKET", root.join(INBOUND_SOCKET));
        forwarders.extend(way_out.tasks);
    }
    // The editor, where this host has code-server, and the desktop, where it has a
    // display server and noVNC: ports of their own (sandboxes here share the network),
    // each behind a gate like any tunnelled port's. They start when a person first asks.
    let mut service = async |var: &str| -> anyhow::Result<EditorEndpoint> {
        let port = free_port().await?;
        let (mut urls, tasks) = expose_ports(
            &[port],
            &req.sandbox_id,
            state.secret.as_bytes(),
            inbound.clone(),
        )
        .await?;
        forwarders.extend(tasks);
        cmd.env(var, port.to_string());
        let url = urls
            .remove(&port.to_string())
            .context("the gate's URL for a service")?;
        Ok(EditorEndpoint { port, url })
    };
    let editor = match state.has_editor() {
        true => Some(service("INSPECT_EDITOR_PORT").await?),
        false => None,
    };
    let desktop = match state.has_desktop() {
        true => Some(DesktopEndpoints {
            view: service(crate::run::desktop::VIEW_PORT_VAR).await?,
            control: service(crate::run::desktop::CONTROL_PORT_VAR).await?,
        }),
        false => None,
    };
    if let Some(restore) = &restore {
        cmd.envs(restore.env());
    }
    cmd.stdout(log.try_clone()?).stderr(log);
    std::fs::create_dir_all(root.join("home"))?;
    let child = cmd.spawn().context("starting the sandbox supervisor")?;
    tracing::info!(sandbox = %req.sandbox_id, session = %req.session_id, pid = ?child.id(), "sandbox started");
    let mut sandbox = Sandbox {
        session_id: req.session_id.clone(),
        child,
        tunnel_urls,
        editor,
        desktop,
        forwarders,
        inbound,
    };
    let out = info(&req.sandbox_id, &mut sandbox);
    map.insert(req.sandbox_id.clone(), sandbox);
    Ok(Spawned::Started(Box::new(out)))
}

/// The supervisor as a sandbox runs it (`run`, or `build` for an image): confined where
/// bubblewrap is, in its own process group, with a cleared environment holding what the
/// request gives it. Output goes where the caller points it.
pub(crate) fn sandbox_command(
    state: &HostState,
    root: &std::path::Path,
    req: &SpawnRequest,
    subcommand: &str,
) -> anyhow::Result<Command> {
    let workspace = root.join("workspace");
    let exe = std::env::current_exe().context("finding the supervisor binary")?;
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    std::fs::create_dir_all(root.join("home"))?;
    // The token travels in a file the supervisor removes as it starts, not in the
    // environment, which bubblewrap's own process would keep for the agent to read.
    write_private(
        &root.join(inspect_protocol::provider::SANDBOX_TOKEN_FILE),
        &req.sandbox_token,
    )?;
    let mut cmd = match &state.bwrap {
        Some(bwrap) => {
            let mut c = Command::new(bwrap);
            c.args(image_root(state.image.as_deref(), &exe)?)
                .args(confinement(root, req))
                .arg("--")
                .arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.arg(subcommand)
        .current_dir(&workspace)
        .env_clear()
        .envs(
            PASSED_THROUGH
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (*k, v))),
        )
        .envs(&req.env)
        .env("HOME", root.join("home"))
        .env("TMPDIR", &tmp)
        .env("INSPECT_SANDBOX_ROOT", root)
        .env("INSPECT_WORKSPACE", &workspace)
        .env("INSPECT_SESSION_ID", &req.session_id)
        .env("INSPECT_SANDBOX_ID", &req.sandbox_id)
        .env("INSPECT_CONTROL_PLANE_URL", &req.control_plane_url)
        .env("INSPECT_SPAWN", req.description())
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        )
        .envs(state.image.iter().flat_map(|_| IMAGE_ENV.iter().copied()))
        .stdin(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    Ok(cmd)
}

/// Writes `text` to a new file only its owner may read.
fn write_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(text.as_bytes())?;
    Ok(())
}

/// The runtime sandboxes get from this host: its version, or `INSPECT_RUNTIME_VERSION`.
/// A snapshot restores only into the runtime that made it.
pub(crate) fn runtime_version() -> String {
    std::env::var("INSPECT_RUNTIME_VERSION")
        .unwrap_or_else(|_| env!("CARGO_PKG_VERSION").to_owned())
}

fn snapshot_paths(data_dir: &std::path::Path, snapshot_id: &str) -> (PathBuf, PathBuf) {
    let dir = data_dir.join("snapshots");
    (
        dir.join(format!("{snapshot_id}.tar")),
        dir.join(format!("{snapshot_id}.json")),
    )
}

/// Saves a sandbox's workspace and agent state as one uncompressed tar: on a local disk
/// it is the fastest to write and read back for trees of many small files (measured in
/// docs/benchmarks.md).
async fn snapshot_sandbox(State(state): State<Arc<HostState>>, Path(id): Path<String>) -> Response {
    if !valid_id(&id) || !state.data_dir.join(&id).join("workspace").exists() {
        return error(ApiError::not_found(format!("no sandbox {id}")));
    }
    let started = std::time::Instant::now();
    let mut b = [0u8; 12];
    let _ = getrandom::fill(&mut b);
    let snapshot_id = format!("snap_{}", hex::encode(b));
    let (tar, meta) = snapshot_paths(&state.data_dir, &snapshot_id);
    let result = async {
        std::fs::create_dir_all(tar.parent().context("snapshot dir")?)?;
        let status = Command::new("tar")
            .arg("-cf")
            .arg(&tar)
            .arg("--exclude=agent/tmp")
            .arg("-C")
            .arg(state.data_dir.join(&id))
            // The agent's state first: a restore starts the agent once it is unpacked.
            .args(["agent", "workspace"])
            .stdin(std::process::Stdio::null())
            .status()
            .await?;
        anyhow::ensure!(
            status.success() || status.code() == Some(1),
            "tar exited with {status}"
        );
        let info = SnapshotInfo {
            snapshot_id: snapshot_id.clone(),
            sandbox_id: id.clone(),
            runtime_version: runtime_version(),
            bytes: std::fs::metadata(&tar)?.len(),
            duration_ms: started.elapsed().as_millis() as u64,
            session_id: std::fs::read_to_string(state.data_dir.join(&id).join(SESSION_MARKER))
                .ok()
                .map(|s| s.trim().to_owned()),
        };
        std::fs::write(&meta, serde_json::to_vec(&info)?)?;
        Ok::<_, anyhow::Error>(info)
    }
    .await;
    match result {
        Ok(info) => {
            tracing::info!(sandbox = %id, snapshot = %info.snapshot_id, bytes = info.bytes, ms = info.duration_ms, "snapshot saved");
            prune_snapshots(&state).await;
            (StatusCode::CREATED, Json(info)).into_response()
        }
        Err(e) => error(ApiError::new(
            inspect_protocol::ErrorCode::Unavailable,
            format!("snapshot failed: {e:#}"),
        )),
    }
}

/// What a sandbox starting from snapshot (or image) `snapshot_id` unpacks (a snapshot holds
/// the agent's state, an image does not), if the runtime that made it is ours. The
/// supervisor unpacks it while it starts ([`crate::run::restore`]).
fn restorable(
    data_dir: &std::path::Path,
    snapshot_id: &str,
) -> anyhow::Result<crate::run::restore::Restore> {
    anyhow::ensure!(valid_id(snapshot_id), "invalid snapshot id");
    let image = is_image(snapshot_id);
    let (tar, meta) = if image {
        image_paths(data_dir, snapshot_id)
    } else {
        snapshot_paths(data_dir, snapshot_id)
    };
    let info: SnapshotInfo = serde_json::from_slice(
        &std::fs::read(&meta).with_context(|| format!("no snapshot {snapshot_id}"))?,
    )?;
    anyhow::ensure!(
        info.runtime_version == runtime_version(),
        "snapshot {snapshot_id} was made by runtime {} and this host runs {}",
        info.runtime_version,
        runtime_version()
    );
    anyhow::ensure!(tar.is_file(), "snapshot {snapshot_id} has no archive");
    Ok(crate::run::restore::Restore {
        archive: tar,
        holds_agent_state: !image,
    })
}

fn find_bwrap() -> Option<PathBuf> {
    if std::env::var("INSPECT_SANDBOX_CONFINE").as_deref() == Ok("0") {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())
}

/// bubblewrap's arguments: everything read-only but the sandbox's own directory and the
/// local repositories it pushes to; its own PID and IPC namespaces; it dies with the host.
/// The new root's first mounts. Without an image, the host's whole filesystem, read-only.
/// With one, the image's top-level folders read-only (and its links as they are) on a
/// root of bubblewrap's own, where the mounts that follow can make their mount points;
/// fresh /tmp and /run; and this supervisor where it is on the host, so the sandbox runs
/// the one that was built (the image's own is the clouds').
fn image_root(
    image: Option<&std::path::Path>,
    exe: &std::path::Path,
) -> anyhow::Result<Vec<std::ffi::OsString>> {
    let Some(image) = image else {
        return Ok(vec!["--ro-bind".into(), "/".into(), "/".into()]);
    };
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(image)
        .with_context(|| format!("reading the image {}", image.display()))?
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if ["dev", "proc", "sys", "tmp", "run"]
            .iter()
            .any(|n| name == *n)
        {
            continue;
        }
        let inside = PathBuf::from("/").join(&name);
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            args.push("--symlink".into());
            args.push(std::fs::read_link(entry.path())?.into());
            args.push(inside.into());
        } else if kind.is_dir() {
            args.push("--ro-bind".into());
            args.push(entry.path().into());
            args.push(inside.into());
        }
    }
    for a in ["--tmpfs", "/tmp", "--tmpfs", "/run", "--ro-bind"] {
        args.push(a.into());
    }
    args.push(exe.into());
    args.push(exe.into());
    Ok(args)
}

fn confinement(root: &std::path::Path, req: &SpawnRequest) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = ["--dev", "/dev", "--proc", "/proc"]
        .iter()
        .map(Into::into)
        .collect();
    let mut writable = vec![root.to_path_buf()];
    writable.extend(
        req.repositories
            .iter()
            .map(|r| PathBuf::from(&r.source))
            .filter(|p| p.is_absolute() && p.exists()),
    );
    for dir in writable {
        args.push("--bind".into());
        args.push(dir.clone().into());
        args.push(dir.into());
    }
    // A policy that confines: a network of the sandbox's own (its loopback alone), and its
    // way out read-only over its writable directory.
    if req.egress.as_ref().is_some_and(|p| p.confines()) {
        let net = egress::net_dir(root);
        args.push("--unshare-net".into());
        args.push("--ro-bind".into());
        args.push(net.clone().into());
        args.push(net.into());
    }
    // Run as root (CI, containers), the sandbox would keep every capability, and with them
    // the right to read any process's memory and environment: drop them all.
    for a in [
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
    ] {
        args.push(a.into());
    }
    args
}

/// Exposes each requested port on a loopback port of its own, forwarded to the port the
/// sandbox listens on. (Local sandboxes share the host's network: two of them listening on
/// the same port clash; each still gets its own public port.)
/// Each tunnelled port behind its gate on a loopback port of its own: only requests with a
/// link or cookie signed with the host's secret for this sandbox and port reach the server.
async fn expose_ports(
    ports: &[u16],
    sandbox_id: &str,
    key: &[u8],
    inbound: Option<Arc<PathBuf>>,
) -> anyhow::Result<(BTreeMap<String, String>, Vec<tokio::task::JoinHandle<()>>)> {
    let mut urls = BTreeMap::new();
    let mut tasks = Vec::new();
    let key = std::sync::Arc::new(key.to_vec());
    for &port in ports {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let public = listener.local_addr()?.port();
        urls.insert(port.to_string(), format!("http://127.0.0.1:{public}"));
        let gate = gate::Gate {
            key: std::sync::Arc::clone(&key),
            sandbox_id: sandbox_id.to_owned(),
            port,
            public_port: public,
            inbound: inbound.clone(),
        };
        tasks.push(tokio::spawn(gate.serve(listener)));
    }
    Ok((urls, tasks))
}

/// `POST /sandboxes/{id}/ports {"port": N}`: one more port of a running sandbox, behind a
/// gate like the others (a port already exposed keeps its URL); `.tunnels.env` is written
/// again with it.
async fn expose_port(
    State(state): State<Arc<HostState>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    use inspect_protocol::limits::MAX_TUNNEL_PORTS;
    let ask: inspect_protocol::session::OpenPortRequest = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            return error(ApiError::bad_request(format!(
                "the body must be {{\"port\": N}}: {e}"
            )))
        }
    };
    if ask.port == 0 {
        return error(ApiError::bad_request("0 is not a port"));
    }
    let mut map = state.sandboxes.lock().await;
    let Some(sandbox) = map.get_mut(&id) else {
        return error(ApiError::not_found(format!("no sandbox {id}")));
    };
    if !matches!(sandbox.child.try_wait(), Ok(None)) {
        return error(ApiError::conflict(format!("sandbox {id} is not running")));
    }
    if !sandbox.tunnel_urls.contains_key(&ask.port.to_string()) {
        if sandbox.tunnel_urls.len() >= MAX_TUNNEL_PORTS {
            return error(ApiError::conflict(format!(
                "sandbox {id} already exposes {MAX_TUNNEL_PORTS} ports"
            )));
        }
        match expose_ports(
            &[ask.port],
            &id,
            state.secret.as_bytes(),
            sandbox.inbound.clone(),
        )
        .await
        {
            Ok((urls, tasks)) => {
                sandbox.tunnel_urls.extend(urls);
                sandbox.forwarders.extend(tasks);
            }
            Err(e) => {
                return error(ApiError::internal(format!(
                    "exposing port {}: {e:#}",
                    ask.port
                )))
            }
        }
        let workspace = state.data_dir.join(&id).join("workspace");
        if let Err(e) = write_tunnels_file(&workspace, &id, &sandbox.tunnel_urls) {
            tracing::warn!(sandbox = %id, "rewriting .tunnels.env: {e:#}");
        }
        tracing::info!(sandbox = %id, port = ask.port, "port exposed");
    }
    Json(info(&id, sandbox)).into_response()
}

/// A loopback port nothing listens on now.
async fn free_port() -> anyhow::Result<u16> {
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    Ok(probe.local_addr()?.port())
}

/// `.tunnels.env`: `TUNNEL_SANDBOX_ID` first, then `TUNNEL_<port>=<url>` for each port.
fn write_tunnels_file(
    workspace: &std::path::Path,
    sandbox_id: &str,
    urls: &BTreeMap<String, String>,
) -> anyhow::Result<()> {
    if urls.is_empty() {
        return Ok(());
    }
    let mut text = format!("TUNNEL_SANDBOX_ID={sandbox_id}\n");
    for (port, url) in urls {
        text.push_str(&format!("TUNNEL_{port}={url}\n"));
    }
    std::fs::write(workspace.join(".tunnels.env"), text)?;
    Ok(())
}

/// Stops a sandbox's whole process group: TERM, a grace period, then KILL.
async fn stop_child(child: &mut Child) {
    if let Some(pid) = child.id() {
        let pgid = nix::unistd::Pid::from_raw(pid as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGTERM);
        if tokio::time::timeout(std::time::Duration::from_secs(5), child.wait())
            .await
            .is_err()
        {
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        }
        // Whatever the supervisor left in its group.
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.wait().await;
}

/// `POST /repositories/check`: whether a path on this machine is a git repository with
/// commits, before it is registered (a mistake shows here, not later as a failed clone).
async fn check_repository(body: axum::body::Bytes) -> Response {
    let Ok(req) = serde_json::from_slice::<RepositoryCheck>(&body) else {
        return error(ApiError::bad_request(
            "the body must be {\"path\": \"/absolute/path\"}",
        ));
    };
    match check_path(&req.path).await {
        Ok(checked) => Json(checked).into_response(),
        Err(e) => error(e),
    }
}

/// The check itself (also `inspect-supervisor check-repository PATH`).
pub async fn check_path(raw: &str) -> Result<RepositoryChecked, ApiError> {
    let path = std::path::Path::new(raw);
    if !path.is_absolute() {
        return Err(ApiError::bad_request(format!(
            "{raw} is not an absolute path"
        )));
    }
    if !path.is_dir() {
        return Err(ApiError::bad_request(format!(
            "{raw} is not a directory on the host"
        )));
    }
    let git = |args: &[&str]| {
        let mut cmd = Command::new("git");
        cmd.arg("-C")
            .arg(path)
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0");
        cmd
    };
    let top = git(&["rev-parse", "--show-toplevel"]).output().await;
    let is_repo = top.as_ref().is_ok_and(|o| o.status.success());
    let bare = git(&["rev-parse", "--is-bare-repository"]).output().await;
    let is_bare = bare
        .as_ref()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "true");
    if !is_repo && !is_bare {
        return Err(ApiError::bad_request(format!(
            "{raw} is not a git repository"
        )));
    }
    if is_repo && !is_bare {
        let toplevel = top
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        let same = std::fs::canonicalize(&toplevel).ok() == std::fs::canonicalize(path).ok();
        if !same {
            return Err(ApiError::bad_request(format!(
                "{raw} is inside the git repository {toplevel}; register that directory"
            )));
        }
    }
    let head = git(&["rev-parse", "--verify", "-q", "HEAD^{commit}"])
        .output()
        .await;
    let head = match head {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        _ => {
            return Err(ApiError::bad_request(format!(
                "{raw} is a git repository without commits; commit something first"
            )))
        }
    };
    let branch = git(&["symbolic-ref", "--quiet", "--short", "HEAD"])
        .output()
        .await
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    Ok(RepositoryChecked {
        path: raw.to_owned(),
        branch,
        head,
    })
}

pub(crate) fn error(e: ApiError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(e.body())).into_response()
}

/// Where an image's archive and its report live.
pub fn image_paths(data_dir: &std::path::Path, image_id: &str) -> (PathBuf, PathBuf) {
    let dir = data_dir.join("images");
    (
        dir.join(format!("{image_id}.tar")),
        dir.join(format!("{image_id}.json")),
    )
}

/// A restore source that is a prebuilt image, not a session's snapshot.
pub fn is_image(id: &str) -> bool {
    id.starts_with("img_")
}

#[cfg(test)]
mod prune_tests {
    use super::prune_plan;
    use std::collections::HashSet;

    fn snap(id: &str, session: &str, bytes: u64) -> (String, Option<String>, u64) {
        (id.into(), Some(session.into()), bytes)
    }

    #[test]
    fn oldest_first_never_a_live_sessions_newest() {
        // Oldest first: a1, b1, a2, b2 (a is live).
        let list = vec![
            snap("a1", "a", 40),
            snap("b1", "b", 40),
            snap("a2", "a", 40),
            snap("b2", "b", 40),
        ];
        let live: HashSet<String> = ["a".to_owned()].into();
        assert!(prune_plan(&list, &live, 1000).is_empty());
        assert_eq!(
            prune_plan(&list, &live, 100),
            vec!["a1".to_owned(), "b1".to_owned()]
        );
        // Even at a budget of 0, a2 (the live session's newest) stays.
        assert_eq!(
            prune_plan(&list, &live, 0),
            vec!["a1".to_owned(), "b1".to_owned(), "b2".to_owned()]
        );
        // Untagged snapshots (older runtimes) are pruned like any other.
        let old = vec![("x".to_owned(), None, 10), snap("a1", "a", 10)];
        assert_eq!(prune_plan(&old, &live, 10), vec!["x".to_owned()]);
    }
}
