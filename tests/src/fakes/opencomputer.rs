//! A fake OpenComputer following its hosted REST API, from its server's handlers
//! (`diggerhq/opencomputer`, `internal/api/sandbox.go`, `sandbox_tags.go`; `X-API-Key`;
//! errors as `{error}`): `POST /sandboxes` (from a template snapshot, `envs`, `metadata`,
//! `timeout`; answered with `sandboxID`, `status`, `region`, `workerID`, `sandboxDomain`
//! only), `POST /sandboxes/from-checkpoint/{id}` (a fork: the checkpoint's disk, the old
//! environment overlaid with the new), `GET /sandboxes` (running sandboxes only, without
//! metadata: `sandboxID`, `status`, `region`, `workerID`, `template`, `startedAt`, `tags`),
//! `GET|DELETE /sandboxes/{id}` (a deleted sandbox's record stays: `GET` answers it as
//! `stopped`), `GET|PUT /sandboxes/{id}/tags` (a flat map of strings, OpenComputer's key
//! rules), `POST /sandboxes/{id}/hibernate|wake|timeout|preview` (only a hibernated
//! sandbox wakes: else 404 "no active hibernation found"), `POST /sandboxes/{id}/exec/run`
//! (`{exitCode, stdout, stderr}`), `POST|GET /sandboxes/{id}/checkpoints` (disk only, the
//! oldest deleted past `maxCount`; UUID ids; a deleted sandbox's are still listed),
//! `DELETE /sandboxes/{id}/checkpoints/{cp}` (400 for an id that is no UUID or a checkpoint
//! of another sandbox). Any call can be made to fail once.
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

/// What OpenComputer keeps beside its machines: a sandbox's record (it outlives the
/// machine: a deleted sandbox reads as `stopped`) and its tags.
#[derive(Default)]
struct Records {
    /// Every sandbox ever made: its tags, and whether it was deleted.
    sandboxes: std::collections::BTreeMap<String, (serde_json::Map<String, Value>, bool)>,
    checkpoints: u64,
}

struct Fake {
    cloud: Arc<Cloud>,
    /// Every checkpoint kept (they outlive their sandbox, and a fork inherits the
    /// environment it was taken with).
    checkpoints: std::sync::Mutex<Vec<Checkpoint>>,
    records: std::sync::Mutex<Records>,
}

impl Fake {
    fn checkpoints<T>(&self, f: impl FnOnce(&mut Vec<Checkpoint>) -> T) -> T {
        f(&mut self.checkpoints.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn records<T>(&self, f: impl FnOnce(&mut Records) -> T) -> T {
        f(&mut self.records.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether OpenComputer has a record of sandbox `id` (made, maybe deleted since).
    fn known(&self, id: &str) -> bool {
        self.records(|r| r.sandboxes.contains_key(id))
    }

    /// The machine goes; its record stays, as deleted.
    fn delete(&self, id: &str) -> bool {
        let had = self.cloud.remove(id).is_some();
        self.records(|r| {
            if let Some(rec) = r.sandboxes.get_mut(id) {
                rec.1 = true;
            }
        });
        had
    }

    /// A sandbox as the hosted API shows it (no metadata: that stays with the machine).
    fn view(&self, id: &str) -> Option<Value> {
        let (tags, deleted) = self.records(|r| r.sandboxes.get(id).cloned())?;
        let status = match deleted {
            true => json!("stopped"),
            false => self.cloud.machine(id, |m| m.object["status"].clone())?,
        };
        let mut v = json!({
            "sandboxID": id,
            "status": status,
            "region": "fake-1",
            "template": "base",
            "startedAt": "2026-01-01T00:00:00Z",
            "sandboxDomain": DOMAIN,
            "tags": tags,
            "tagsLastUpdatedAt": Value::Null,
        });
        if v["status"] == "running" {
            v["workerID"] = json!("w-fake-1");
            v["token"] = json!("jwt-fake");
        }
        Some(v)
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
            records: Default::default(),
        });
        let app = Router::new()
            .route("/sandboxes", get(list).post(create))
            .route("/sandboxes/from-checkpoint/{cp}", post(fork))
            .route("/sandboxes/{id}", get(one).delete(one))
            .route("/sandboxes/{id}/tags", get(tags).put(tags))
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

    /// The next supervisor started ends at once, saying why in its log.
    pub fn crash_next_start(&self) {
        self.fake.cloud.replace_next_start(
            "echo 'fatal: the workspace disk is read-only' >> \"$INSPECT_SANDBOX_ROOT/supervisor.log\"",
        );
    }

    pub fn fail_next(&self, call: &str, status: u16, message: &str) {
        self.fake.cloud.fail_next(call, status, message);
    }

    pub fn calls(&self) -> Vec<String> {
        self.fake.cloud.calls()
    }

    /// The machines OpenComputer runs or keeps hibernated, as it holds them (with the
    /// metadata they were made with).
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
                self.fake.delete(&id);
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

fn new_sandbox(f: &Fake, env: Vec<(String, String)>, body: &Value, from: Option<&str>) -> Response {
    let c = &f.cloud;
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
    match c.make(&id, object, env, from, ended) {
        Ok(()) => {
            f.records(|r| r.sandboxes.insert(id.clone(), Default::default()));
            let answer = json!({
                "sandboxID": id,
                "token": "jwt-fake",
                "status": "running",
                "region": "fake-1",
                "workerID": "w-fake-1",
                "sandboxDomain": DOMAIN,
            });
            (StatusCode::CREATED, Json(answer)).into_response()
        }
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
    new_sandbox(&f, env_of(&body["envs"]), &body, None)
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
    new_sandbox(&f, env, &body, Some(&cp))
}

async fn list(State(f): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    let c = &f.cloud;
    if let Err(r) = admit(c, &headers, "GET /sandboxes") {
        return *r;
    }
    // The org's running sandboxes, at most 100, as the hosted list shows them.
    let running: Vec<Value> = c
        .objects()
        .into_iter()
        .filter_map(|(id, _)| f.view(&id))
        .filter(|v| v["status"] == "running")
        .take(100)
        .collect();
    Json(running).into_response()
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
    if !f.known(&id) {
        return error(404, "sandbox not found");
    }
    if method == Method::DELETE {
        // Its checkpoints stay (forks can be made of them) until deleted themselves; its
        // record stays, as `stopped`.
        f.delete(&id);
        return StatusCode::NO_CONTENT.into_response();
    }
    match f.view(&id) {
        Some(v) => Json(v).into_response(),
        None => error(404, "sandbox not found"),
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
        "wake" if object["status"] != "hibernated" => error(404, "no active hibernation found"),
        "wake" => {
            let alive = c.machine(&id, |m| m.alive()).unwrap_or(false);
            if alive {
                c.resume(&id);
            } else if let Err(e) = c.boot(&id, ended) {
                return error(500, &e);
            }
            c.machine(&id, |m| {
                m.object["status"] = json!("running");
                m.object["error"] = Value::Null;
            });
            Json(f.view(&id).unwrap_or_default()).into_response()
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
    let cp = f.records(|r| {
        r.checkpoints += 1;
        format!(
            "{:08x}-0000-4000-8000-{:012x}",
            r.checkpoints, r.checkpoints
        )
    });
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
    if !f.known(&id) {
        return error(404, "sandbox not found");
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
    if !is_uuid(&cp) {
        return error(400, "invalid checkpoint ID");
    }
    let Some(owner) = f.checkpoints(|all| {
        all.iter()
            .find(|(x, _)| x["id"] == cp.as_str())
            .map(|(x, _)| x["sandboxId"].as_str().unwrap_or_default().to_owned())
    }) else {
        return error(404, "checkpoint not found");
    };
    if owner != id {
        return error(400, "checkpoint does not belong to this sandbox");
    }
    f.checkpoints(|all| all.retain(|(x, _)| x["id"] != cp.as_str()));
    c.forget_saved(&cp);
    StatusCode::NO_CONTENT.into_response()
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// `GET|PUT /sandboxes/{id}/tags`: a PUT replaces them all (a flat map of strings; at most
/// 50; keys of 1–128 of `[A-Za-z0-9_.:-]`, not `oc:`; values at most 256 bytes).
async fn tags(
    State(f): State<Arc<Fake>>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(r) = admit(
        &f.cloud,
        &headers,
        &format!("{method} /sandboxes/{id}/tags"),
    ) {
        return *r;
    }
    if !f.known(&id) {
        return error(404, "sandbox not found");
    }
    if method == Method::PUT {
        let Ok(raw) = serde_json::from_slice::<serde_json::Map<String, Value>>(&body) else {
            return error(400, "request body must be a flat { key: string } map");
        };
        if raw.len() > 50 {
            return error(400, &format!("max 50 tags per sandbox, got {}", raw.len()));
        }
        for (k, v) in &raw {
            let Some(v) = v.as_str() else {
                return error(400, &format!("tag {k:?}: value must be a string"));
            };
            let key_ok = !k.is_empty()
                && k.len() <= 128
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-:".contains(c));
            if !key_ok || k.starts_with("oc:") || v.len() > 256 {
                return error(400, &format!("tag key {k:?} is not allowed"));
            }
        }
        f.records(|r| {
            if let Some(rec) = r.sandboxes.get_mut(&id) {
                rec.0 = raw;
            }
        });
    }
    let tags = f
        .records(|r| r.sandboxes.get(&id).map(|rec| rec.0.clone()))
        .unwrap_or_default();
    Json(json!({"tags": tags, "tagsLastUpdatedAt": Value::Null})).into_response()
}
