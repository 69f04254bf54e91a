//! A fake of our Modal app (`providers/modal/app/`): the same endpoints, bodies, envelope
//! and errors (`{success, data}`; 400/401/404 with `{detail}`; Modal's own failures as `success:
//! false`), the same bearer token check (HMAC-SHA256 of the time, five minutes either
//! side) and allowed control-plane hosts. Where the app asks Modal for a sandbox, the fake
//! runs the real supervisor on this machine in a directory of its own; a filesystem
//! snapshot is a tar of that directory (an "image"), a restore unpacks one. Any endpoint can
//! be made to answer a chosen status once.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SECRET: &str = "fake-modal-api-secret";
pub const RUNTIME: &str = "modal-runtime-1";
const ALLOWED_HOSTS: [&str; 2] = ["127.0.0.1", "localhost"];

struct Sandbox {
    session_id: String,
    dir: PathBuf,
    /// Dropping it kills the sandbox.
    kill: Option<crate::fakes::machine::Running>,
    exit: Option<String>,
}

#[derive(Default)]
struct World {
    sandboxes: HashMap<String, Sandbox>,
    images: Vec<String>,
    fail_next: Vec<(String, u16, Value)>,
    calls: Vec<String>,
    clock: u64,
}

struct App {
    world: Mutex<World>,
    root: PathBuf,
    supervisor: PathBuf,
    image_env: Vec<(String, String)>,
    llm_env: Vec<(String, String)>,
}

impl App {
    fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let mut w = self.world.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut w)
    }
}

pub struct FakeModal {
    pub base_url: String,
    app: Arc<App>,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl FakeModal {
    /// `image_env` is the sandbox image's environment; `llm_env` the `llm-api-keys` secret.
    pub async fn start(
        image_env: Vec<(String, String)>,
        llm_env: Vec<(String, String)>,
    ) -> anyhow::Result<FakeModal> {
        let dir = tempfile::Builder::new()
            .prefix("inspect-modal-")
            .tempdir()?;
        let app = Arc::new(App {
            world: Mutex::default(),
            root: dir.path().to_owned(),
            supervisor: crate::host::supervisor_bin()?,
            image_env,
            llm_env,
        });
        let router = Router::new()
            .route("/{endpoint}", get(endpoint).post(endpoint))
            .with_state(app.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(FakeModal {
            base_url: format!("http://{addr}"),
            app,
            _dir: dir,
            task,
        })
    }

    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("SANDBOX_PROVIDER".into(), "modal".into()),
            (
                "MODAL_API_URL".into(),
                format!("{}/{{endpoint}}", self.base_url),
            ),
            ("MODAL_API_SECRET".into(), SECRET.into()),
        ]
    }

    /// The next call of `endpoint` answers `status` with `body`.
    pub fn fail_next(&self, endpoint: &str, status: u16, body: Value) {
        self.app
            .with(|w| w.fail_next.push((endpoint.into(), status, body)));
    }

    pub fn calls(&self) -> Vec<String> {
        self.app.with(|w| w.calls.clone())
    }

    /// Sandboxes still running, by our sandbox id.
    pub fn running(&self) -> Vec<String> {
        self.app.with(|w| {
            w.sandboxes
                .iter()
                .filter(|(_, s)| s.kill.is_some() && s.exit.is_none())
                .map(|(id, _)| id.clone())
                .collect()
        })
    }

    pub fn images(&self) -> Vec<String> {
        self.app.with(|w| w.images.clone())
    }

    pub fn logs(&self) -> String {
        crate::fakes::machine::tail_logs(&self.app.root.join("logs"))
    }
}

impl Drop for FakeModal {
    fn drop(&mut self) {
        self.task.abort();
        self.app.with(|w| w.sandboxes.clear());
    }
}

fn refused(status: u16, detail: &str) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
        Json(json!({ "detail": detail })),
    )
        .into_response()
}

fn ok(data: Value) -> Response {
    Json(json!({"success": true, "data": data})).into_response()
}

/// Modal's own failures come back as 200 with `success: false`.
fn failed(error: &str) -> Response {
    Json(json!({"success": false, "error": error})).into_response()
}

fn authorised(headers: &HeaderMap) -> Result<(), &'static str> {
    let h = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .ok_or("missing bearer token")?;
    let token = h.strip_prefix("Bearer ").ok_or("missing bearer token")?;
    let (ms, mac) = token.split_once('.').ok_or("malformed token")?;
    let at: i64 = ms.parse().map_err(|_| "malformed token")?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    if (now - at).abs() > 300_000 {
        return Err("token outside its five minutes");
    }
    let mut m = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).map_err(|_| "bad token")?;
    m.update(ms.as_bytes());
    let want = hex::encode(m.finalize().into_bytes());
    if want != mac.to_ascii_lowercase() {
        return Err("bad token");
    }
    Ok(())
}

async fn endpoint(
    State(app): State<Arc<App>>,
    Path(endpoint): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    app.with(|w| w.calls.push(endpoint.clone()));
    let forced = app.with(|w| {
        let at = w.fail_next.iter().position(|(e, ..)| *e == endpoint)?;
        Some(w.fail_next.remove(at))
    });
    if let Some((_, status, body)) = forced {
        return (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Json(body),
        )
            .into_response();
    }
    let name = endpoint.strip_prefix("open-inspect-").unwrap_or(&endpoint);
    if name == "api-health" {
        return ok(json!({ "runtime_version": RUNTIME }));
    }
    if let Err(why) = authorised(&headers) {
        return refused(401, why);
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return refused(400, "the body is not JSON");
    };
    match name {
        "api-create-sandbox" => start(&app, &body, None),
        "api-restore-sandbox" => match body["snapshot_image_id"].as_str() {
            Some(image) if !image.is_empty() => start(&app, &body, Some(image)),
            _ => refused(400, "snapshot_image_id is required"),
        },
        "api-snapshot-sandbox" => snapshot(&app, &body),
        "api-build-image" => build(&app, &body),
        "api-terminate-sandbox" => {
            let id = body["sandbox_id"].as_str().unwrap_or_default();
            let had = app.with(|w| {
                w.sandboxes
                    .get_mut(id)
                    .map(|s| s.kill.take().is_some())
                    .unwrap_or(false)
            });
            ok(json!({ "terminated": had }))
        }
        "api-sandbox-status" => {
            let id = body["sandbox_id"].as_str().unwrap_or_default();
            app.with(|w| match w.sandboxes.get(id) {
                None => ok(json!({"status": "stopped", "detail": "no such sandbox"})),
                Some(s) if s.kill.is_none() => {
                    ok(json!({"status": "stopped", "detail": "terminated"}))
                }
                Some(Sandbox {
                    exit: Some(how), ..
                }) => ok(json!({"status": "exited", "detail": how})),
                Some(_) => ok(json!({"status": "running"})),
            })
        }
        "api-delete-session" => {
            let Some(session) = body["session_id"].as_str().filter(|s| !s.is_empty()) else {
                return refused(400, "session_id is required");
            };
            let gone: Vec<Sandbox> = app.with(|w| {
                let ids: Vec<String> = w
                    .sandboxes
                    .iter()
                    .filter(|(_, s)| s.session_id == session)
                    .map(|(id, _)| id.clone())
                    .collect();
                ids.iter().filter_map(|id| w.sandboxes.remove(id)).collect()
            });
            let n = gone.iter().filter(|s| s.kill.is_some()).count();
            for s in gone {
                let _ = std::fs::remove_dir_all(&s.dir);
            }
            ok(json!({ "terminated": n }))
        }
        _ => refused(404, "no such endpoint"),
    }
}

/// The app's checks: every field in `required` present, and the URL in `url_field` on a
/// host it was told of (400 with `{detail}` otherwise).
fn checked(body: &Value, required: &[&str], url_field: &str) -> Result<(), Box<Response>> {
    for field in required {
        if body[*field].as_str().unwrap_or_default().is_empty() {
            return Err(Box::new(refused(400, &format!("{field} is required"))));
        }
    }
    let host = url::Url::parse(body[url_field].as_str().unwrap_or_default())
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    if !ALLOWED_HOSTS.contains(&host.as_str()) {
        return Err(Box::new(refused(
            400,
            &format!("{url_field} host '{host}' is not in ALLOWED_CONTROL_PLANE_HOSTS"),
        )));
    }
    Ok(())
}

fn start(app: &Arc<App>, body: &Value, image: Option<&str>) -> Response {
    let text = |k: &str| body[k].as_str().unwrap_or_default().to_owned();
    if let Err(r) = checked(
        body,
        &[
            "session_id",
            "sandbox_id",
            "control_plane_url",
            "sandbox_auth_token",
            "spawn",
        ],
        "control_plane_url",
    ) {
        return *r;
    }
    let sandbox_id = text("sandbox_id");
    let n = app.with(|w| {
        w.clock += 1;
        w.clock
    });
    let object_id = format!("sb-fake{n:06}");
    let dir = app.root.join("sandboxes").join(&sandbox_id);
    if let Err(e) = std::fs::create_dir_all(dir.join("workspace")) {
        return failed(&format!("OSError: {e}"));
    }
    if let Some(image) = image {
        let tar = app.root.join("images").join(format!("{image}.tar"));
        if !tar.exists() {
            return failed(&format!("NotFoundError: Image {image} not found"));
        }
        let unpacked = std::process::Command::new("tar")
            .arg("-xf")
            .arg(&tar)
            .arg("-C")
            .arg(&dir)
            .status();
        if !unpacked.is_ok_and(|s| s.success()) {
            return failed(&format!("RemoteError: could not start from image {image}"));
        }
    }
    // The environment the app gives the sandbox: the image's, the model's keys, the
    // session's secrets, then the system variables (the root mapped to this directory).
    let root = dir.display().to_string();
    let mut env = app.image_env.clone();
    env.extend(app.llm_env.iter().cloned());
    if let Some(user) = body["user_env_vars"].as_object() {
        for (k, v) in user {
            if !inspect_protocol::provider::SANDBOX_SYSTEM_VARS.contains(&k.as_str()) {
                env.push((k.clone(), v.as_str().unwrap_or_default().to_owned()));
            }
        }
    }
    env.extend([
        ("INSPECT_SPAWN".to_owned(), text("spawn")),
        (
            "INSPECT_SANDBOX_TOKEN".to_owned(),
            text("sandbox_auth_token"),
        ),
        ("INSPECT_SESSION_ID".to_owned(), text("session_id")),
        ("INSPECT_SANDBOX_ID".to_owned(), sandbox_id.clone()),
        (
            "INSPECT_CONTROL_PLANE_URL".to_owned(),
            text("control_plane_url"),
        ),
        ("INSPECT_SANDBOX_ROOT".to_owned(), root.clone()),
        ("INSPECT_WORKSPACE".to_owned(), format!("{root}/workspace")),
        ("HOME".to_owned(), format!("{root}/home")),
    ]);
    let mut urls = serde_json::Map::new();
    let mut ports: Vec<u64> = body["tunnel_ports"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    ports.sort();
    if !ports.is_empty() {
        let mut file = format!("TUNNEL_SANDBOX_ID={sandbox_id}\n");
        for p in &ports {
            // A Modal tunnel reaches the container's port from outside; here the sandbox is
            // on this machine, and the tunnel is a forwarder on a loopback port of its own.
            let url = match tunnel(*p as u16) {
                Ok(url) => url,
                Err(e) => return failed(&format!("SandboxError: no tunnel: {e}")),
            };
            file.push_str(&format!("TUNNEL_{p}={url}\n"));
            urls.insert(p.to_string(), json!(url));
        }
        let _ = std::fs::write(dir.join("workspace").join(".tunnels.env"), file);
    }
    // Modal runs the image's ENTRYPOINT ahead of the sandbox's command, unless the app
    // cleared it on the image (`.entrypoint([])`).
    let mut words = if modal_app_clears_entrypoint() {
        vec![]
    } else {
        crate::fakes::machine::image_start().entrypoint
    };
    words.extend(SANDBOX_COMMAND.iter().map(|w| w.to_string()));
    let (program, args) = crate::fakes::machine::command_line(&words, &app.supervisor);
    let launch = crate::fakes::machine::Launch {
        program,
        args,
        env,
        workdir: dir.clone(),
        log: app.root.join("logs").join(format!("{sandbox_id}.log")),
        deadline: body["timeout_seconds"].as_u64().map(Duration::from_secs),
    };
    let watcher = app.clone();
    let id = sandbox_id.clone();
    let kill = crate::fakes::machine::launch(launch, move |ended| {
        let how = match ended {
            crate::fakes::machine::Ended::Exited(code) => format!("exited with {code}"),
            crate::fakes::machine::Ended::Deadline => "reached its timeout".to_owned(),
        };
        watcher.with(|w| {
            if let Some(s) = w.sandboxes.get_mut(&id) {
                s.exit = Some(how);
            }
        });
    });
    let kill = match kill {
        Ok(k) => k,
        Err(e) => return failed(&format!("SandboxError: {e}")),
    };
    app.with(|w| {
        w.sandboxes.insert(
            sandbox_id.clone(),
            Sandbox {
                session_id: text("session_id"),
                dir,
                kill: Some(kill),
                exit: None,
            },
        )
    });
    ok(json!({
        "sandbox_id": sandbox_id,
        "modal_object_id": object_id,
        "status": "running",
        "runtime_version": RUNTIME,
        "tunnel_urls": urls,
    }))
}

/// A forwarder from a fresh loopback port to `port` (a tunnel's far end), for the life of
/// the test; its URL.
fn tunnel(port: u16) -> std::io::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let public = listener.local_addr()?.port();
    let listener = tokio::net::TcpListener::from_std(listener)?;
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await
                {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    Ok(format!("http://127.0.0.1:{public}"))
}

fn snapshot(app: &Arc<App>, body: &Value) -> Response {
    let id = body["sandbox_id"].as_str().unwrap_or_default();
    let Some(dir) = app.with(|w| {
        w.sandboxes
            .get(id)
            .filter(|s| s.kill.is_some())
            .map(|s| s.dir.clone())
    }) else {
        return refused(404, "no such sandbox");
    };
    let started = Instant::now();
    let image = app.with(|w| {
        w.clock += 1;
        format!("im-fake{:06}", w.clock)
    });
    let images = app.root.join("images");
    let _ = std::fs::create_dir_all(&images);
    // A running sandbox's files may change while they are read (tar then exits 1).
    let status = std::process::Command::new("tar")
        .arg("-cf")
        .arg(images.join(format!("{image}.tar")))
        .arg("--exclude=agent/tmp")
        .arg("--warning=no-file-changed")
        .arg("-C")
        .arg(&dir)
        .arg(".")
        .status();
    if !status.is_ok_and(|s| s.code().is_some_and(|c| c <= 1)) {
        return failed("SandboxError: the filesystem snapshot failed");
    }
    app.with(|w| w.images.push(image.clone()));
    ok(json!({
        "image_id": image,
        "runtime_version": RUNTIME,
        "duration_ms": started.elapsed().as_millis() as u64,
    }))
}

/// `api-build-image`: answers at once; the build runs on, is saved as an image when it
/// succeeded, and is reported to the callback URL with its token (5 tries).
fn build(app: &Arc<App>, body: &Value) -> Response {
    if let Err(r) = checked(
        body,
        &["build_id", "spawn", "callback_url", "callback_token"],
        "callback_url",
    ) {
        return *r;
    }
    let build_id = body["build_id"].as_str().unwrap_or_default().to_owned();
    let app = app.clone();
    let body = body.clone();
    tokio::spawn(async move {
        let started = Instant::now();
        let report = run_build(&app, &body).await;
        let mut report = report.unwrap_or_else(|e| json!({"success": false, "error": e}));
        report["runtimeVersion"] = json!(RUNTIME);
        report["durationMs"] = json!(started.elapsed().as_millis() as u64);
        let client = reqwest::Client::new();
        for attempt in 0..5u32 {
            let sent = client
                .post(body["callback_url"].as_str().unwrap_or_default())
                .bearer_auth(body["callback_token"].as_str().unwrap_or_default())
                .json(&report)
                .send()
                .await;
            if sent.is_ok_and(|r| r.status().is_success() || r.status().as_u16() == 409) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
        }
    });
    ok(json!({ "build_id": build_id }))
}

/// `inspect-supervisor build` in a directory of its own; its report, with the image.
async fn run_build(app: &Arc<App>, body: &Value) -> Result<Value, String> {
    let text = |k: &str| body[k].as_str().unwrap_or_default().to_owned();
    let build_id = text("build_id");
    let dir = app.root.join("builds").join(&build_id);
    // The sandbox image has both (`/sandbox/workspace`, `/sandbox/home`).
    for d in ["workspace", "home"] {
        std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
    }
    let root = dir.display().to_string();
    let report_path = dir.join("build-report.json");
    let mut env = app.image_env.clone();
    if let Some(user) = body["user_env_vars"].as_object() {
        for (k, v) in user {
            if !inspect_protocol::provider::SANDBOX_SYSTEM_VARS.contains(&k.as_str()) {
                env.push((k.clone(), v.as_str().unwrap_or_default().to_owned()));
            }
        }
    }
    env.extend([
        ("INSPECT_SPAWN".to_owned(), text("spawn")),
        ("INSPECT_SESSION_ID".to_owned(), build_id.clone()),
        ("INSPECT_SANDBOX_ID".to_owned(), build_id.clone()),
        ("INSPECT_SANDBOX_ROOT".to_owned(), root.clone()),
        ("INSPECT_WORKSPACE".to_owned(), format!("{root}/workspace")),
        ("HOME".to_owned(), format!("{root}/home")),
        (
            "INSPECT_BUILD_REPORT".to_owned(),
            report_path.display().to_string(),
        ),
    ]);
    if let Some(token) = body["git_token"].as_str() {
        env.push(("INSPECT_GIT_TOKEN".to_owned(), token.to_owned()));
    }
    let logs = app.root.join("logs");
    let _ = std::fs::create_dir_all(&logs);
    let log =
        std::fs::File::create(logs.join(format!("{build_id}.log"))).map_err(|e| e.to_string())?;
    let mut child = tokio::process::Command::new(&app.supervisor)
        .arg("build")
        .current_dir(&dir)
        .env_clear()
        .envs(env)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| e.to_string())?;
    let limit = Duration::from_secs(body["timeout_seconds"].as_u64().unwrap_or(1800));
    if tokio::time::timeout(limit, child.wait()).await.is_err() {
        return Err(format!("the build ran past {} s", limit.as_secs()));
    }
    let mut report: Value = std::fs::read(&report_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("the build wrote no report")?;
    if report["success"] == true {
        let image = app.with(|w| {
            w.clock += 1;
            format!("im-fake{:06}", w.clock)
        });
        let images = app.root.join("images");
        let _ = std::fs::create_dir_all(&images);
        let saved = std::process::Command::new("tar")
            .arg("-cf")
            .arg(images.join(format!("{image}.tar")))
            .arg("-C")
            .arg(&dir)
            .args(["workspace", "home"])
            .status();
        if !saved.is_ok_and(|s| s.code().is_some_and(|c| c <= 1)) {
            return Err("the build's filesystem could not be saved".into());
        }
        app.with(|w| w.images.push(image.clone()));
        report["imageId"] = json!(image);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(report)
}

/// The command our Modal app creates sandboxes with (`modal.Sandbox.create(…)`).
const SANDBOX_COMMAND: [&str; 2] = ["inspect-supervisor", "run"];

/// Whether our Modal app clears the sandbox image's ENTRYPOINT, read from the app itself.
fn modal_app_clears_entrypoint() -> bool {
    let app = crate::root().join("providers/modal/app/open_inspect_app.py");
    std::fs::read_to_string(app)
        .map(|t| t.contains(".entrypoint([])"))
        .unwrap_or(false)
}
