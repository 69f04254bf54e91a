//! A fake Vercel Sandbox following its REST API as the provider uses it (bearer token,
//! `teamId` on every call; errors as `{error: {code, message}}`): `POST /v2/sandboxes`
//! (named, from a snapshot, with `ports`, `env`, `tags`, `timeout` in ms; an unknown
//! snapshot is 404), `GET /v2/sandboxes?projectId=`, `GET /v2/sandboxes/{name}`,
//! `POST /v2/sandboxes/sessions/{id}/cmd` (`wait: false` answers at once),
//! `POST /v2/sandboxes/sessions/{id}/snapshot` (saves the disk and ends the session, as
//! Vercel does), `POST /v2/sandboxes/sessions/{id}/stop`,
//! `GET /v2/sandboxes/snapshots?project=&name=`, `GET|DELETE /v2/sandboxes/snapshots/{id}`.
//! Any call can be made to fail once.
//!
//! It is also the machine (`fake_cloud`): a session is a process group on this machine; a
//! command runs in it (`sudo -E` is dropped: the fake runs as this user).

use crate::fakes::cloud::{Cloud, Machine};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub const TOKEN: &str = "vercel_fake_token";
pub const PROJECT: &str = "prj_openinspect";
pub const TEAM: &str = "team_openinspect";
pub const BASE_SNAPSHOT: &str = "snap_open_inspect_base";

struct Fake {
    cloud: Arc<Cloud>,
    /// Snapshot id → the sandbox name it was taken of, and its status.
    snapshots: std::sync::Mutex<Vec<Value>>,
}

pub struct FakeVercel {
    pub base_url: String,
    fake: Arc<Fake>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeVercel {
    pub async fn start(image_env: Vec<(String, String)>) -> anyhow::Result<FakeVercel> {
        let fake = Arc::new(Fake {
            cloud: Cloud::new("inspect-vercel-", image_env)?,
            snapshots: Default::default(),
        });
        let app = Router::new()
            .route("/v2/sandboxes", get(list).post(create))
            .route("/v2/sandboxes/snapshots", get(snapshots))
            .route("/v2/sandboxes/snapshots/{id}", get(snapshot).delete(forget))
            .route("/v2/sandboxes/{name}", get(one))
            .route("/v2/sandboxes/sessions/{sid}/{action}", post(act))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeVercel {
            base_url: format!("http://{addr}"),
            fake,
            task,
        })
    }

    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("SANDBOX_PROVIDER".into(), "vercel".into()),
            ("VERCEL_SANDBOX_API_BASE_URL".into(), self.base_url.clone()),
            ("VERCEL_TOKEN".into(), TOKEN.into()),
            ("VERCEL_PROJECT_ID".into(), PROJECT.into()),
            ("VERCEL_TEAM_ID".into(), TEAM.into()),
            ("VERCEL_BASE_SNAPSHOT_ID".into(), BASE_SNAPSHOT.into()),
        ]
    }

    pub fn fail_next(&self, call: &str, status: u16, message: &str) {
        self.fake.cloud.fail_next(call, status, message);
    }

    pub fn calls(&self) -> Vec<String> {
        self.fake.cloud.calls()
    }

    /// Every session (running machine) as the API shows its sandbox.
    pub fn sessions(&self) -> Vec<Value> {
        self.fake
            .cloud
            .objects()
            .into_iter()
            .map(|(_, o)| o)
            .collect()
    }

    /// The snapshots not deleted.
    pub fn snapshots(&self) -> Vec<Value> {
        self.fake
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|s| s["status"] != "deleted")
            .cloned()
            .collect()
    }

    pub fn logs(&self) -> String {
        self.fake.cloud.logs()
    }
}

impl Drop for FakeVercel {
    fn drop(&mut self) {
        self.task.abort();
        self.fake.cloud.end_all();
    }
}

fn error(status: u16, code: &str, message: &str) -> Response {
    let s = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        s,
        Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

fn admit(
    f: &Fake,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    call: &str,
) -> Result<(), Box<Response>> {
    let forced = f.cloud.admit(call);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if auth != format!("Bearer {TOKEN}") {
        return Err(Box::new(error(403, "forbidden", "Not authorized")));
    }
    if query.get("teamId").map(String::as_str) != Some(TEAM) {
        return Err(Box::new(error(
            403,
            "forbidden",
            "You don't have access to this scope (teamId)",
        )));
    }
    if let Some((status, message)) = forced {
        let code = match status {
            429 => "rate_limited",
            400..=499 => "bad_request",
            _ => "internal_error",
        };
        return Err(Box::new(error(status, code, &message)));
    }
    Ok(())
}

fn ended(m: &mut Machine, why: String) {
    m.object["session"]["status"] = json!("failed");
    m.object["sandbox"]["status"] = json!("failed");
    m.object["session"]["error"] = json!(why);
}

async fn create(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    if let Err(r) = admit(&f, &headers, &q, "POST /v2/sandboxes") {
        return *r;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "bad_request", "Invalid JSON");
    };
    if body["projectId"] != PROJECT {
        return error(404, "not_found", "Project not found");
    }
    let Some(timeout) = body["timeout"].as_u64() else {
        return error(400, "bad_request", "timeout must be milliseconds");
    };
    if timeout > 5 * 3600 * 1000 {
        return error(400, "bad_request", "timeout exceeds the plan's maximum");
    }
    let source = body["source"]["snapshotId"].as_str().unwrap_or_default();
    let from = if source == BASE_SNAPSHOT {
        None
    } else {
        let known = f
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|s| s["id"] == source && s["status"] == "created");
        if !known {
            return error(404, "not_found", &format!("Snapshot {source} not found"));
        }
        Some(source.to_owned())
    };
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    let taken =
        f.cloud.objects().iter().any(|(_, o)| {
            o["sandbox"]["name"] == name.as_str() && o["session"]["status"] == "running"
        });
    if taken {
        return error(
            409,
            "conflict",
            &format!("Sandbox {name} is already running"),
        );
    }
    let sid = f.cloud.next_id("sbx_sess_");
    let routes: Vec<Value> = body["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .map(|p| json!({"port": p, "subdomain": format!("{name}-{p}")}))
        .collect();
    let object = json!({
        "sandbox": {"name": name, "projectId": PROJECT, "currentSessionId": sid, "status": "running", "tags": body["tags"]},
        "session": {"id": sid, "status": "running", "timeout": timeout},
        "routes": routes,
    });
    let env: Vec<(String, String)> = body["env"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    match f
        .cloud
        .make(&sid, object.clone(), env, from.as_deref(), ended)
    {
        Ok(()) => Json(object).into_response(),
        Err(e) => error(500, "internal_error", &e),
    }
}

/// The newest session of the sandbox named `name`.
fn by_name(f: &Fake, name: &str) -> Option<(String, Value)> {
    let mut all: Vec<(String, Value)> = f
        .cloud
        .objects()
        .into_iter()
        .filter(|(_, o)| o["sandbox"]["name"] == name)
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.pop()
}

async fn one(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    Path(name): Path<String>,
) -> Response {
    if let Err(r) = admit(&f, &headers, &q, &format!("GET /v2/sandboxes/{name}")) {
        return *r;
    }
    match by_name(&f, &name) {
        Some((_, o)) => {
            Json(json!({"sandbox": o["sandbox"], "session": o["session"], "routes": o["routes"]}))
                .into_response()
        }
        None => error(404, "not_found", &format!("Sandbox {name} not found")),
    }
}

async fn list(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = admit(&f, &headers, &q, "GET /v2/sandboxes") {
        return *r;
    }
    // As Vercel documents the list: `project` names the project (`projectId` is the get's
    // name for it, not the list's), `limit` is 1–50 (20 unless asked), one tag filter as
    // `key:value`, and `cursor` from the previous page's `pagination.next`.
    let Some(project) = q.get("project") else {
        return error(
            400,
            "bad_request",
            "project is required when not using an OIDC token",
        );
    };
    if project != PROJECT {
        return error(404, "not_found", "Project not found");
    }
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => 20,
        Some(Ok(n)) if (1..=50).contains(&n) => n,
        Some(_) => return error(400, "bad_request", "limit must be between 1 and 50"),
    };
    let tag = match q.get("tags").map(|t| t.split_once(':')) {
        None => None,
        Some(Some((k, v))) => Some((k.to_owned(), v.to_owned())),
        Some(None) => return error(400, "bad_request", "tags must be key:value"),
    };
    let start: usize = match q.get("cursor").map(|c| c.parse()) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => return error(400, "bad_request", "invalid cursor"),
    };
    let mut seen = std::collections::BTreeMap::new();
    for (_, o) in f.cloud.objects() {
        let name = o["sandbox"]["name"].as_str().unwrap_or_default().to_owned();
        seen.insert(name, o["sandbox"].clone());
    }
    let all: Vec<Value> = seen
        .into_values()
        .filter(|s| match &tag {
            Some((k, v)) => s["tags"][k.as_str()] == v.as_str(),
            None => true,
        })
        .collect();
    let page: Vec<Value> = all.iter().skip(start).take(limit).cloned().collect();
    let next = (start + limit < all.len()).then(|| (start + limit).to_string());
    Json(json!({"sandboxes": page, "pagination": {"count": all.len(), "next": next}}))
        .into_response()
}

async fn act(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    Path((sid, action)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let call = format!("POST /v2/sandboxes/sessions/{sid}/{action}");
    if let Err(r) = admit(&f, &headers, &q, &call) {
        return *r;
    }
    let Some(object) = f.cloud.machine(&sid, |m| m.object.clone()) else {
        return error(404, "not_found", &format!("Session {sid} not found"));
    };
    let running = object["session"]["status"] == "running";
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let stop = |status: &str| {
        f.cloud.halt(&sid);
        f.cloud.machine(&sid, |m| {
            m.object["session"]["status"] = json!(status);
            m.object["sandbox"]["status"] = json!(status);
        });
    };
    match action.as_str() {
        "cmd" => {
            if !running {
                return error(410, "gone", &format!("Session {sid} is not running"));
            }
            let mut argv = vec![body["command"].as_str().unwrap_or_default().to_owned()];
            argv.extend(
                body["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_owned)),
            );
            // As this user: sudo's -E already kept the environment.
            if argv.first().map(String::as_str) == Some("sudo") {
                argv.remove(0);
                if argv.first().map(String::as_str) == Some("-E") {
                    argv.remove(0);
                }
            }
            let cid = f.cloud.next_id("cmd_");
            if body["wait"] == true {
                return match f.cloud.exec(&sid, &argv, Duration::from_secs(60)).await {
                    Ok(ran) => {
                        Json(json!({"command": {"id": cid, "exitCode": ran.code}})).into_response()
                    }
                    Err(e) => error(500, "internal_error", &e),
                };
            }
            let cloud = f.cloud.clone();
            let id = sid.clone();
            tokio::spawn(async move {
                let _ = cloud.exec(&id, &argv, Duration::from_secs(60)).await;
            });
            Json(json!({"command": {"id": cid, "exitCode": null}})).into_response()
        }
        "snapshot" => {
            if !running {
                return error(410, "gone", &format!("Session {sid} is not running"));
            }
            let id = f.cloud.next_id("snap_");
            // Vercel shuts the sandbox down to take the snapshot.
            f.cloud.halt(&sid);
            let bytes = match f.cloud.save_disk(&sid, &id) {
                Ok(b) => b,
                Err(e) => return error(500, "internal_error", &e),
            };
            stop("stopped");
            let snap = json!({
                "id": id, "status": "created", "sizeBytes": bytes,
                "sourceSandboxName": object["sandbox"]["name"],
                "expiration": body["expiration"],
            });
            f.snapshots
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(snap.clone());
            Json(json!({"snapshot": snap})).into_response()
        }
        "stop" => {
            stop("stopped");
            Json(json!({"session": {"id": sid, "status": "stopped"}})).into_response()
        }
        // The SDK's `extendTimeout`: `{duration}` in ms added to the session's timeout.
        "extend-timeout" => {
            if !running {
                return error(410, "gone", &format!("Session {sid} is not running"));
            }
            let Some(duration) = body["duration"].as_u64() else {
                return error(400, "bad_request", "duration must be a number of ms");
            };
            let session = f
                .cloud
                .machine(&sid, |m| {
                    let now = m.object["session"]["timeout"].as_u64().unwrap_or(0);
                    m.object["session"]["timeout"] = json!(now + duration);
                    m.object["session"].clone()
                })
                .unwrap_or_default();
            Json(json!({"session": session})).into_response()
        }
        _ => error(404, "not_found", &format!("No route {call}")),
    }
}

async fn snapshots(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = admit(&f, &headers, &q, "GET /v2/sandboxes/snapshots") {
        return *r;
    }
    let name = q.get("name").cloned().unwrap_or_default();
    let list: Vec<Value> = f
        .snapshots
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|s| name.is_empty() || s["sourceSandboxName"] == name.as_str())
        .cloned()
        .collect();
    Json(json!({ "snapshots": list })).into_response()
}

/// `GET /v2/sandboxes/snapshots/{id}` (the SDK's `getSnapshot`): `{snapshot}`, the base
/// snapshot always there; 404 for one never taken.
async fn snapshot(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    Path(id): Path<String>,
) -> Response {
    if let Err(r) = admit(
        &f,
        &headers,
        &q,
        &format!("GET /v2/sandboxes/snapshots/{id}"),
    ) {
        return *r;
    }
    if id == BASE_SNAPSHOT {
        return Json(json!({"snapshot": {
            "id": BASE_SNAPSHOT, "sourceSessionId": "sbx_base", "region": "iad1",
            "status": "created", "sizeBytes": 734_003_200u64, "expiresAt": null,
            "createdAt": 1_761_955_200_000u64, "updatedAt": 1_761_955_200_000u64
        }}))
        .into_response();
    }
    let found = f
        .snapshots
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|s| s["id"] == id.as_str())
        .cloned();
    match found {
        Some(snap) => Json(json!({ "snapshot": snap })).into_response(),
        None => error(404, "not_found", &format!("Snapshot {id} not found")),
    }
}

async fn forget(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
    Path(id): Path<String>,
) -> Response {
    if let Err(r) = admit(
        &f,
        &headers,
        &q,
        &format!("DELETE /v2/sandboxes/snapshots/{id}"),
    ) {
        return *r;
    }
    let found = {
        let mut all = f.snapshots.lock().unwrap_or_else(|e| e.into_inner());
        all.iter_mut()
            .find(|s| s["id"] == id.as_str() && s["status"] != "deleted")
            .map(|s| s["status"] = json!("deleted"))
            .is_some()
    };
    if !found {
        return error(404, "not_found", &format!("Snapshot {id} not found"));
    }
    f.cloud.forget_saved(&id);
    Json(json!({"snapshot": {"id": id, "status": "deleted"}})).into_response()
}
