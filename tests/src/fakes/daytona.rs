//! A fake Daytona following its REST API as the provider uses it: `POST /sandbox` (from a
//! snapshot, with env and labels; an unknown snapshot is 400, a taken name 409),
//! `GET /sandbox?labels={…}`, `GET /sandbox/{id}`, `POST /sandbox/{id}/start|stop|recover`,
//! `DELETE /sandbox/{id}`, `GET /sandbox/{id}/ports/{port}/signed-preview-url`,
//! `GET /snapshots/{name}` (the snapshot, active); bearer
//! auth (401); errors as Daytona's API writes them (`{statusCode, message, error}`). Any
//! call can be made to fail once.
//!
//! It is also the machine: a started sandbox runs the snapshot's entrypoint (the real
//! supervisor, `inspect-supervisor run`) with the sandbox's env on this machine, its disk a
//! directory that outlives stops (what was `/sandbox` inside); stopping kills the process,
//! starting runs the entrypoint again on the same disk with the same env. A process that
//! dies on its own leaves the sandbox in `error`, recoverable.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub const API_KEY: &str = "fake-daytona-api-key";
pub const SNAPSHOT: &str = "open-inspect-sandbox-test";
const ROOT: &str = "/sandbox";

struct Sandbox {
    object: Value,
    env: Vec<(String, String)>,
    dir: PathBuf,
    kill: Option<crate::fakes::machine::Running>,
    /// How many times its entrypoint was started.
    boots: u32,
}

#[derive(Default)]
struct World {
    sandboxes: HashMap<String, Sandbox>,
    fail_next: Vec<(String, u16, String)>,
    delay_next: Vec<(String, std::time::Duration)>,
    calls: Vec<String>,
    clock: u64,
    /// The lifetime, in seconds, of every signed preview URL handed out.
    previews: Vec<u64>,
}

struct Machine {
    world: Mutex<World>,
    root: PathBuf,
    supervisor: PathBuf,
    image_env: Vec<(String, String)>,
}

impl Machine {
    fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let mut w = self.world.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut w)
    }
}

pub struct FakeDaytona {
    pub base_url: String,
    machine: Arc<Machine>,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl FakeDaytona {
    /// `image_env` is the snapshot's own environment (PATH, OpenCode, the model's keys as an
    /// organisation would bake or pass them).
    pub async fn start(image_env: Vec<(String, String)>) -> anyhow::Result<FakeDaytona> {
        let dir = tempfile::Builder::new()
            .prefix("inspect-daytona-")
            .tempdir()?;
        let machine = Arc::new(Machine {
            world: Mutex::default(),
            root: dir.path().to_owned(),
            supervisor: crate::host::supervisor_bin()?,
            image_env,
        });
        let app = Router::new()
            .route("/sandbox", get(list).post(create))
            .route("/sandbox/{id}", get(one).delete(one))
            .route("/sandbox/{id}/{action}", post(act))
            .route(
                "/sandbox/{id}/ports/{port}/signed-preview-url",
                get(preview),
            )
            .route("/snapshots/{name}", get(snapshot))
            .with_state(machine.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeDaytona {
            base_url: format!("http://{addr}"),
            machine,
            _dir: dir,
            task,
        })
    }

    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("SANDBOX_PROVIDER".into(), "daytona".into()),
            ("DAYTONA_API_URL".into(), self.base_url.clone()),
            ("DAYTONA_API_KEY".into(), API_KEY.into()),
            ("DAYTONA_SNAPSHOT".into(), SNAPSHOT.into()),
        ]
    }

    /// The next call whose `METHOD path` starts with `call` answers `status`.
    pub fn fail_next(&self, call: &str, status: u16, message: &str) {
        self.machine
            .with(|w| w.fail_next.push((call.into(), status, message.into())));
    }

    /// The next call whose `METHOD path` starts with `call` is answered only after `by` (a
    /// slow provider).
    pub fn delay_next(&self, call: &str, by: std::time::Duration) {
        self.machine.with(|w| w.delay_next.push((call.into(), by)));
    }

    pub fn calls(&self) -> Vec<String> {
        self.machine.with(|w| w.calls.clone())
    }

    /// Every sandbox as the API shows it.
    /// How long each signed preview URL handed out lives, in seconds.
    pub fn preview_lifetimes(&self) -> Vec<u64> {
        self.machine.with(|w| w.previews.clone())
    }

    pub fn sandboxes(&self) -> Vec<Value> {
        self.machine
            .with(|w| w.sandboxes.values().map(|s| s.object.clone()).collect())
    }

    /// How many times each sandbox's entrypoint started, by name.
    pub fn boots(&self) -> HashMap<String, u32> {
        self.machine.with(|w| {
            w.sandboxes
                .values()
                .map(|s| {
                    (
                        s.object["name"].as_str().unwrap_or_default().to_owned(),
                        s.boots,
                    )
                })
                .collect()
        })
    }

    pub fn logs(&self) -> String {
        crate::fakes::machine::tail_logs(&self.machine.root.join("logs"))
    }
}

impl Drop for FakeDaytona {
    fn drop(&mut self) {
        self.task.abort();
        self.machine.with(|w| w.sandboxes.clear());
    }
}

fn error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        Json(json!({
            "statusCode": status,
            "message": message,
            "error": code.canonical_reason().unwrap_or("Error"),
        })),
    )
        .into_response()
}

/// Auth, the call's record, and a failure the test asked for.
fn admit(
    m: &Machine,
    headers: &HeaderMap,
    method: &Method,
    path: &str,
) -> Result<(), Box<Response>> {
    let call = format!("{method} {path}");
    m.with(|w| w.calls.push(call.clone()));
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if auth != format!("Bearer {API_KEY}") {
        return Err(Box::new(error(401, "Unauthorized")));
    }
    let forced = m.with(|w| {
        let at = w
            .fail_next
            .iter()
            .position(|(c, ..)| call.starts_with(c.as_str()))?;
        Some(w.fail_next.remove(at))
    });
    if let Some((_, status, message)) = forced {
        return Err(Box::new(error(status, &message)));
    }
    Ok(())
}

/// Runs the entrypoint on the sandbox's disk with its env.
fn boot(m: &Arc<Machine>, id: &str) {
    let Some((env, dir)) = m.with(|w| w.sandboxes.get(id).map(|s| (s.env.clone(), s.dir.clone())))
    else {
        return;
    };
    let disk = dir.display().to_string();
    let mut all = m.image_env.clone();
    all.extend(env.into_iter().map(|(k, v)| {
        let v = match v.strip_prefix(ROOT) {
            Some(rest) => format!("{disk}{rest}"),
            None => v,
        };
        (k, v)
    }));
    // Daytona's runner keeps the image's ENTRYPOINT and never its CMD.
    let start = crate::fakes::machine::image_start();
    let (program, args) = crate::fakes::machine::command_line(&start.entrypoint, &m.supervisor);
    let launch = crate::fakes::machine::Launch {
        program,
        args,
        env: all,
        workdir: dir,
        log: m.root.join("logs").join(format!("{id}.log")),
        deadline: None,
    };
    let watcher = m.clone();
    let sid = id.to_owned();
    let started = crate::fakes::machine::launch(launch, move |ended| {
        let why = match ended {
            crate::fakes::machine::Ended::Exited(code) => {
                format!("the entrypoint exited with {code}")
            }
            crate::fakes::machine::Ended::Deadline => "timed out".into(),
        };
        watcher.with(|w| {
            if let Some(s) = w.sandboxes.get_mut(&sid) {
                s.kill = None;
                s.object["state"] = json!("error");
                s.object["errorReason"] = json!(why);
                s.object["recoverable"] = json!(true);
            }
        });
    });
    m.with(|w| {
        if let Some(s) = w.sandboxes.get_mut(id) {
            match started {
                Ok(kill) => {
                    s.kill = Some(kill);
                    s.boots += 1;
                    s.object["state"] = json!("started");
                    s.object["errorReason"] = Value::Null;
                    s.object["recoverable"] = json!(false);
                }
                Err(e) => {
                    s.object["state"] = json!("error");
                    s.object["errorReason"] = json!(e.to_string());
                }
            }
        }
    });
}

async fn create(
    State(m): State<Arc<Machine>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = admit(&m, &headers, &method, "/sandbox") {
        return *r;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "the body is not JSON");
    };
    if body["snapshot"] != SNAPSHOT {
        return error(
            400,
            &format!(
                "Snapshot {} not found",
                body["snapshot"].as_str().unwrap_or("")
            ),
        );
    }
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    let taken = m.with(|w| {
        w.sandboxes
            .values()
            .any(|s| s.object["name"] == name.as_str())
    });
    if taken {
        return error(409, &format!("Sandbox with name {name} already exists"));
    }
    let env: Vec<(String, String)> = body["env"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let id = m.with(|w| {
        w.clock += 1;
        format!("0d7a1c4e-0000-4000-8000-{:012}", w.clock)
    });
    let dir = m.root.join("disks").join(&id);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return error(500, &e.to_string());
    }
    let object = json!({
        "id": id,
        "name": name,
        "snapshot": SNAPSHOT,
        "labels": body["labels"],
        "public": body["public"],
        "autoStopInterval": body["autoStopInterval"],
        "autoArchiveInterval": body["autoArchiveInterval"],
        "state": "creating",
        "recoverable": false,
    });
    m.with(|w| {
        w.sandboxes.insert(
            id.clone(),
            Sandbox {
                object,
                env,
                dir,
                kill: None,
                boots: 0,
            },
        )
    });
    boot(&m, &id);
    let object = m.with(|w| w.sandboxes.get(&id).map(|s| s.object.clone()));
    Json(object).into_response()
}

/// `GET /snapshots/{id or name}`: Daytona's `SnapshotDto` for the one snapshot this fake
/// holds (active); 404 for any other.
async fn snapshot(
    State(m): State<Arc<Machine>>,
    method: Method,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    if let Err(r) = admit(&m, &headers, &method, &format!("/snapshots/{name}")) {
        return *r;
    }
    if name != SNAPSHOT {
        return error(404, &format!("Snapshot {name} not found"));
    }
    Json(json!({
        "id": "0b7c6a52-61f4-4e07-9d4a-8f5f1a3f2c11",
        "organizationId": "4f0d7a8e-2a0b-4f55-9e1c-0b2c9e6d7f10",
        "general": false,
        "name": SNAPSHOT,
        "imageName": "registry.example/inspect-sandbox:test",
        "state": "active",
        "size": 0.9,
        "entrypoint": ["/usr/local/bin/inspect-supervisor", "run"],
        "cpu": 2,
        "gpu": 0,
        "mem": 4,
        "disk": 10,
        "errorReason": null,
        "createdAt": "2026-11-01T00:00:00.000Z",
        "updatedAt": "2026-11-01T00:00:00.000Z",
        "lastUsedAt": null
    }))
    .into_response()
}

async fn list(
    State(m): State<Arc<Machine>>,
    method: Method,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = admit(&m, &headers, &method, "/sandbox") {
        return *r;
    }
    let wanted: serde_json::Map<String, Value> = match q.get("labels") {
        Some(l) => match serde_json::from_str(l) {
            Ok(v) => v,
            Err(_) => return error(400, "labels must be a JSON object"),
        },
        None => Default::default(),
    };
    let found: Vec<Value> = m.with(|w| {
        w.sandboxes
            .values()
            .filter(|s| wanted.iter().all(|(k, v)| s.object["labels"][k] == *v))
            .map(|s| s.object.clone())
            .collect()
    });
    Json(found).into_response()
}

async fn one(
    State(m): State<Arc<Machine>>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(r) = admit(&m, &headers, &method, &format!("/sandbox/{id}")) {
        return *r;
    }
    if method == Method::DELETE {
        return match m.with(|w| w.sandboxes.remove(&id)) {
            Some(s) => {
                drop(s.kill);
                let _ = std::fs::remove_dir_all(&s.dir);
                Json(json!({})).into_response()
            }
            None => error(404, &format!("Sandbox {id} not found")),
        };
    }
    match m.with(|w| w.sandboxes.get(&id).map(|s| s.object.clone())) {
        Some(o) => Json(o).into_response(),
        None => error(404, &format!("Sandbox {id} not found")),
    }
}

async fn act(
    State(m): State<Arc<Machine>>,
    method: Method,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    let call = format!("{method} /sandbox/{id}/{action}");
    let delay = m.with(|w| {
        let at = w
            .delay_next
            .iter()
            .position(|(c, _)| call.starts_with(c.as_str()))?;
        Some(w.delay_next.remove(at).1)
    });
    if let Some(by) = delay {
        tokio::time::sleep(by).await;
    }
    if let Err(r) = admit(&m, &headers, &method, &format!("/sandbox/{id}/{action}")) {
        return *r;
    }
    let Some(state) = m.with(|w| {
        w.sandboxes
            .get(&id)
            .map(|s| s.object["state"].as_str().unwrap_or("").to_owned())
    }) else {
        return error(404, &format!("Sandbox {id} not found"));
    };
    match action.as_str() {
        "stop" => {
            m.with(|w| {
                if let Some(s) = w.sandboxes.get_mut(&id) {
                    s.kill = None;
                    s.object["state"] = json!("stopped");
                }
            });
        }
        "start" => {
            if state == "error" {
                return error(400, "Sandbox is in an errored state; recover it first");
            }
            if state != "started" {
                boot(&m, &id);
            }
        }
        "recover" => {
            if state != "error" {
                return error(400, "Sandbox is not in an errored state");
            }
            boot(&m, &id);
        }
        _ => return error(404, &format!("Cannot POST /sandbox/{id}/{action}")),
    }
    let object = m.with(|w| w.sandboxes.get(&id).map(|s| s.object.clone()));
    Json(object).into_response()
}

async fn preview(
    State(m): State<Arc<Machine>>,
    method: Method,
    headers: HeaderMap,
    Path((id, port)): Path<(String, u16)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let path = format!("/sandbox/{id}/ports/{port}/signed-preview-url");
    if let Err(r) = admit(&m, &headers, &method, &path) {
        return *r;
    }
    if !m.with(|w| w.sandboxes.contains_key(&id)) {
        return error(404, &format!("Sandbox {id} not found"));
    }
    // Daytona's controller reads `expiresInSeconds` (other names are ignored): 60 s unless
    // asked, between 1 s and 24 h.
    let seconds: u64 = match q.get("expiresInSeconds").map(|s| s.parse::<u64>()) {
        None => 60,
        Some(Ok(n)) if (1..=86_400).contains(&n) => n,
        Some(_) => {
            return error(
                400,
                "expiresInSeconds must be between 1 second and 24 hours",
            )
        }
    };
    let token = m.with(|w| {
        w.clock += 1;
        w.previews.push(seconds);
        format!("tok{:06}", w.clock)
    });
    Json(json!({
        "sandboxId": id,
        "port": port,
        "token": token,
        "url": format!("https://{port}-{token}.proxy.daytona.fake"),
        "expiresInSeconds": seconds,
    }))
    .into_response()
}
