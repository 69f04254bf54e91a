//! A fake OpenComputer following its REST API as the provider uses it (`X-API-Key`;
//! errors as `{error}`): `POST /sandboxes` (from a template snapshot, `envs`, `metadata`,
//! `timeout`), `POST /sandboxes/from-checkpoint/{id}` (a fork: the checkpoint's disk, the
//! old environment overlaid with the new), `GET /sandboxes`, `GET|DELETE /sandboxes/{id}`,
//! `POST /sandboxes/{id}/hibernate|wake|timeout|preview`, `POST /sandboxes/{id}/exec/run`
//! (`{exitCode, stdout, stderr}`), `POST|GET /sandboxes/{id}/checkpoints` (disk only, the
//! oldest deleted past `maxCount`), `DELETE /sandboxes/{id}/checkpoints/{cp}`. Any call can
//! be made to fail once.
//!
//! It is also the machine (`fake_cloud`): hibernating stops the sandbox's processes where
//! they are, waking continues them, or boots the machine again on its disk when its
//! processes had ended (a cold boot). A sandbox whose processes all end is in `error`.

use crate::fakes::cloud::{Cloud, Machine};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub const API_KEY: &str = "oc_fake_api_key";
pub const TEMPLATE: &str = "open-inspect-sandbox";
pub const DOMAIN: &str = "sandboxes.opencomputer.fake";

/// A checkpoint as the API shows it, and the environment it was taken with.
type Checkpoint = (Value, Vec<(String, String)>);

struct Fake {
    cloud: Arc<Cloud>,
    /// Every checkpoint kept (they outlive their sandbox, and a fork inherits the
    /// environment it was taken with).
    checkpoints: std::sync::Mutex<Vec<Checkpoint>>,
}

impl Fake {
    fn checkpoints<T>(&self, f: impl FnOnce(&mut Vec<Checkpoint>) -> T) -> T {
        f(&mut self.checkpoints.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

pub struct FakeOpenComputer {
    pub base_url: String,
    fake: Arc<Fake>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeOpenComputer {
    pub async fn start(image_env: Vec<(String, String)>) -> anyhow::Result<FakeOpenComputer> {
        let fake = Arc::new(Fake {
            cloud: Cloud::new("inspect-opencomputer-", image_env)?,
            checkpoints: Default::default(),
        });
        let app = Router::new()
            .route("/sandboxes", get(list).post(create))
            .route("/sandboxes/from-checkpoint/{cp}", post(fork))
            .route("/sandboxes/{id}", get(one).delete(one))
            .route("/sandboxes/{id}/exec/run", post(exec))
            .route(
                "/sandboxes/{id}/checkpoints",
                get(checkpoints).post(checkpoint),
            )
            .route("/sandboxes/{id}/checkpoints/{cp}", delete(forget))
            .route("/sandboxes/{id}/{action}", post(act))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeOpenComputer {
            base_url: format!("http://{addr}"),
            fake,
            task,
        })
    }

    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("SANDBOX_PROVIDER".into(), "opencomputer".into()),
            ("OPENCOMPUTER_API_URL".into(), self.base_url.clone()),
            ("OPENCOMPUTER_API_KEY".into(), API_KEY.into()),
            ("OPENCOMPUTER_TEMPLATE".into(), TEMPLATE.into()),
        ]
    }

    pub fn fail_next(&self, call: &str, status: u16, message: &str) {
        self.fake.cloud.fail_next(call, status, message);
    }

    pub fn calls(&self) -> Vec<String> {
        self.fake.cloud.calls()
    }

    pub fn sandboxes(&self) -> Vec<Value> {
        self.fake
            .cloud
            .objects()
            .into_iter()
            .map(|(_, o)| o)
            .collect()
    }

    /// Every checkpoint kept.
    pub fn checkpoints(&self) -> Vec<Value> {
        self.fake
            .checkpoints(|all| all.iter().map(|(c, _)| c.clone()).collect())
    }

    /// OpenComputer lets our sandbox `sandbox_id` go (expired, deleted by an operator); its
    /// checkpoints stay.
    pub fn vanish(&self, sandbox_id: &str) {
        for (id, o) in self.fake.cloud.objects() {
            if o["metadata"]["openinspect_expected_sandbox_id"] == sandbox_id {
                self.fake.cloud.remove(&id);
            }
        }
    }

    pub fn logs(&self) -> String {
        self.fake.cloud.logs()
    }
}

impl Drop for FakeOpenComputer {
    fn drop(&mut self) {
        self.task.abort();
        self.fake.cloud.end_all();
    }
}

fn error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, Json(json!({ "error": message }))).into_response()
}

fn admit(c: &Cloud, headers: &HeaderMap, call: &str) -> Result<(), Box<Response>> {
    let forced = c.admit(call);
    if headers.get("x-api-key").and_then(|v| v.to_str().ok()) != Some(API_KEY) {
        return Err(Box::new(error(401, "invalid API key")));
    }
    if let Some((status, message)) = forced {
        return Err(Box::new(error(status, &message)));
    }
    Ok(())
}

fn ended(m: &mut Machine, why: String) {
    m.object["status"] = json!("error");
    m.object["error"] = json!(why);
}

fn env_of(v: &Value) -> Vec<(String, String)> {
    v.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn new_sandbox(
    c: &Arc<Cloud>,
    env: Vec<(String, String)>,
    body: &Value,
    from: Option<&str>,
) -> Response {
    let id = c.next_id("sb-oc-");
    let object = json!({
        "id": id,
        "sandboxID": id,
        "status": "running",
        "templateID": "base",
        "snapshot": TEMPLATE,
        "metadata": body["metadata"],
        "timeout": body["timeout"],
        "sandboxDomain": DOMAIN,
    });
    match c.make(&id, object.clone(), env, from, ended) {
        Ok(()) => (StatusCode::CREATED, Json(object)).into_response(),
        Err(e) => error(500, &e),
    }
}

async fn create(State(f): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let c = &f.cloud;
    if let Err(r) = admit(c, &headers, "POST /sandboxes") {
        return *r;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "invalid JSON body");
    };
    if body["snapshot"] != TEMPLATE {
        return error(
            404,
            &format!(
                "snapshot {} not found",
                body["snapshot"].as_str().unwrap_or("")
            ),
        );
    }
    new_sandbox(c, env_of(&body["envs"]), &body, None)
}

async fn fork(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Path(cp): Path<String>,
    body: Bytes,
) -> Response {
    let c = &f.cloud;
    if let Err(r) = admit(
        c,
        &headers,
        &format!("POST /sandboxes/from-checkpoint/{cp}"),
    ) {
        return *r;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "invalid JSON body");
    };
    let Some(old_env) = f.checkpoints(|all| {
        all.iter()
            .find(|(x, _)| x["id"] == cp.as_str())
            .map(|(_, env)| env.clone())
    }) else {
        return error(404, &format!("checkpoint {cp} not found"));
    };
    // A fork inherits the environment; what the request gives replaces it key by key.
    let mut env = old_env;
    for (k, v) in env_of(&body["envs"]) {
        env.retain(|(ek, _)| *ek != k);
        env.push((k, v));
    }
    new_sandbox(c, env, &body, Some(&cp))
}

async fn list(State(f): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    let c = &f.cloud;
    if let Err(r) = admit(c, &headers, "GET /sandboxes") {
        return *r;
    }
    let all: Vec<Value> = c.objects().into_iter().map(|(_, o)| o).collect();
    Json(all).into_response()
}

async fn one(
    State(f): State<Arc<Fake>>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let c = &f.cloud;
    if let Err(r) = admit(c, &headers, &format!("{method} /sandboxes/{id}")) {
        return *r;
    }
    if method == Method::DELETE {
        // Its checkpoints stay (forks can be made of them) until deleted themselves.
        return match c.remove(&id) {
            Some(_) => StatusCode::NO_CONTENT.into_response(),
            None => error(404, &format!("sandbox {id} not found")),
        };
    }
    match c.machine(&id, |m| m.object.clone()) {
        Some(o) => Json(o).into_response(),
        None => error(404, &format!("sandbox {id} not found")),
    }
}

async fn act(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let c = &f.cloud;
    if let Err(r) = admit(c, &headers, &format!("POST /sandboxes/{id}/{action}")) {
        return *r;
    }
    let Some(object) = c.machine(&id, |m| m.object.clone()) else {
        return error(404, &format!("sandbox {id} not found"));
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match action.as_str() {
        "hibernate" => {
            if object["status"] == "running" {
                c.pause(&id);
                c.machine(&id, |m| m.object["status"] = json!("hibernated"));
            }
            Json(json!({})).into_response()
        }
        "wake" => {
            let alive = c.machine(&id, |m| m.alive()).unwrap_or(false);
            if alive {
                c.resume(&id);
            } else if let Err(e) = c.boot(&id, ended) {
                return error(500, &e);
            }
            let o = c
                .machine(&id, |m| {
                    m.object["status"] = json!("running");
                    m.object["error"] = Value::Null;
                    m.object.clone()
                })
                .unwrap_or_default();
            Json(o).into_response()
        }
        "timeout" => {
            let Some(t) = body["timeout"].as_u64() else {
                return error(400, "timeout must be seconds");
            };
            c.machine(&id, |m| m.object["timeout"] = json!(t));
            StatusCode::NO_CONTENT.into_response()
        }
        "preview" => {
            let Some(port) = body["port"].as_u64() else {
                return error(400, "port is required");
            };
            Json(json!({"hostname": format!("{id}-p{port}.{DOMAIN}")})).into_response()
        }
        _ => error(404, &format!("no route POST /sandboxes/{id}/{action}")),
    }
}

async fn exec(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let c = &f.cloud;
    if let Err(r) = admit(c, &headers, &format!("POST /sandboxes/{id}/exec/run")) {
        return *r;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "invalid JSON body");
    };
    let mut argv = vec![body["cmd"].as_str().unwrap_or_default().to_owned()];
    argv.extend(
        body["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_owned)),
    );
    let wait = Duration::from_secs(body["timeout"].as_u64().unwrap_or(60));
    match c.exec(&id, &argv, wait).await {
        Ok(ran) => Json(json!({"exitCode": ran.code, "stdout": ran.stdout, "stderr": ran.stderr}))
            .into_response(),
        Err(e) if e.starts_with("no machine") => error(404, &e),
        Err(e) => error(409, &e),
    }
}

async fn checkpoint(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let c = &f.cloud;
    if let Err(r) = admit(c, &headers, &format!("POST /sandboxes/{id}/checkpoints")) {
        return *r;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "invalid JSON body");
    };
    if body["kind"] != "disk_only" {
        return error(400, "kind must be disk_only or full");
    }
    let keep = body["retentionPolicy"]["maxCount"].as_u64().unwrap_or(10) as usize;
    let cp = c.next_id("cp-");
    let bytes = match c.save_disk(&id, &cp) {
        Ok(b) => b,
        Err(e) if e.starts_with("no machine") => return error(404, &e),
        Err(e) => return error(500, &e),
    };
    let made = json!({"id": cp, "sandboxId": id, "name": body["name"], "status": "ready", "sizeBytes": bytes});
    let env = c.machine(&id, |m| m.env.clone()).unwrap_or_default();
    let dropped: Vec<String> = f.checkpoints(|all| {
        all.push((made.clone(), env));
        let mine: Vec<String> = all
            .iter()
            .filter(|(x, _)| x["sandboxId"] == id.as_str())
            .filter_map(|(x, _)| x["id"].as_str().map(str::to_owned))
            .collect();
        let over = mine.len().saturating_sub(keep);
        let dropped: Vec<String> = mine.into_iter().take(over).collect();
        all.retain(|(x, _)| !dropped.iter().any(|d| x["id"] == d.as_str()));
        dropped
    });
    for old in dropped {
        c.forget_saved(&old);
    }
    (StatusCode::CREATED, Json(made)).into_response()
}

async fn checkpoints(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let c = &f.cloud;
    if let Err(r) = admit(c, &headers, &format!("GET /sandboxes/{id}/checkpoints")) {
        return *r;
    }
    let list: Vec<Value> = f.checkpoints(|all| {
        all.iter()
            .filter(|(x, _)| x["sandboxId"] == id.as_str())
            .map(|(x, _)| x.clone())
            .collect()
    });
    Json(list).into_response()
}

async fn forget(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Path((id, cp)): Path<(String, String)>,
) -> Response {
    let c = &f.cloud;
    if let Err(r) = admit(
        c,
        &headers,
        &format!("DELETE /sandboxes/{id}/checkpoints/{cp}"),
    ) {
        return *r;
    }
    let had = f.checkpoints(|all| {
        let before = all.len();
        all.retain(|(x, _)| !(x["id"] == cp.as_str() && x["sandboxId"] == id.as_str()));
        before != all.len()
    });
    if had && c.forget_saved(&cp) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        error(404, &format!("checkpoint {cp} not found"))
    }
}
