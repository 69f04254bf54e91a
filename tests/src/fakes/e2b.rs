//! A fake E2B following its REST API as the provider uses it (`X-API-Key`; errors as
//! `{code, message}`): `POST /sandboxes` (from a template, `envVars`, `metadata`,
//! `timeout`, `secure`, `autoPause`; an unknown template is 404), `GET /v2/sandboxes`
//! (`metadata=k%3Dv`, `state=`), `GET|DELETE /sandboxes/{id}`,
//! `GET /templates/{id}` (the template and its builds; 404 for another),
//! `POST /sandboxes/{id}/pause` (409 when paused), `POST /sandboxes/{id}/connect`
//! (resumes a paused sandbox, a new envd access token), `POST /sandboxes/{id}/timeout`;
//! a team's plan bounds a lifetime as E2B's API does (`sandbox_create.go`,
//! `sandbox_connect.go` in e2b-dev/infra: a create or a connect asking for more than the
//! plan's `MaxLengthHours` is a 400 "Timeout cannot be greater than N hours");
//! and each sandbox's `envd`: `POST /process.Process/Start` (Connect protocol, JSON codec:
//! enveloped request and stream; 415 for bare JSON; the access token checked; the sandbox
//! chosen by `E2b-Sandbox-Id`, as E2B's proxy routes; run as basic auth's user, where
//! E2B's default `user` cannot write the sandbox root). Any call can be made to fail once.
//!
//! It is also the machine (`fake_cloud`): a sandbox is a process group on this machine,
//! and a process started through envd runs in it; pausing stops the group where it is,
//! connecting continues it. A sandbox whose processes all end is killed (gone from lists).

use crate::fakes::cloud::{Cloud, Machine};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub const API_KEY: &str = "e2b_fake_api_key";
pub const TEMPLATE: &str = "open-inspect-sandbox";

pub struct FakeE2b {
    pub base_url: String,
    cloud: Arc<Cloud>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeE2b {
    pub async fn start(image_env: Vec<(String, String)>) -> anyhow::Result<FakeE2b> {
        let cloud = Cloud::new("inspect-e2b-", image_env)?;
        let app = Router::new()
            .route("/sandboxes", post(create))
            .route("/v2/sandboxes", get(list))
            .route("/sandboxes/{id}", get(one).delete(one))
            .route("/sandboxes/{id}/{action}", post(act))
            .route("/templates/{id}", get(template))
            .route("/process.Process/Start", post(process_start))
            .with_state(cloud.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeE2b {
            base_url: format!("http://{addr}"),
            cloud,
            task,
        })
    }

    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("SANDBOX_PROVIDER".into(), "e2b".into()),
            ("E2B_API_URL".into(), self.base_url.clone()),
            ("E2B_API_KEY".into(), API_KEY.into()),
            ("E2B_TEMPLATE_ID".into(), TEMPLATE.into()),
            ("E2B_DOMAIN".into(), "e2b.fake".into()),
            // Every sandbox's envd behind one address, routed by header.
            ("E2B_SANDBOX_URL".into(), self.base_url.clone()),
        ]
    }

    pub fn fail_next(&self, call: &str, status: u16, message: &str) {
        self.cloud.fail_next(call, status, message);
    }

    /// The team's plan allows sandboxes of at most `hours` (Hobby: 1; Pro: 24).
    pub fn set_plan_hours(&self, hours: u64) {
        self.cloud.set_limit("max_length_hours", hours);
    }

    pub fn calls(&self) -> Vec<String> {
        self.cloud.calls()
    }

    /// The next supervisor started holds its lock but never connects (a sandbox that
    /// passes the start's check and never becomes ready).
    pub fn hang_next_start(&self) {
        self.cloud.replace_next_start(
            "cd \"$INSPECT_SANDBOX_ROOT\" && { nohup flock .supervisor.lock sleep 600 >/dev/null 2>&1 & }",
        );
    }

    /// E2B pauses our sandbox `sandbox_id` by itself (its timeout ran out, with auto-pause).
    pub fn pause_as_vendor(&self, sandbox_id: &str) {
        for (id, o) in self.cloud.objects() {
            if o["metadata"]["openinspect_expected_sandbox_id"] == sandbox_id
                && o["state"] == "running"
            {
                self.cloud.pause(&id);
                self.cloud
                    .machine(&id, |m| m.object["state"] = json!("paused"));
            }
        }
    }

    /// Every sandbox as the API shows it (killed ones too).
    pub fn sandboxes(&self) -> Vec<Value> {
        self.cloud.objects().into_iter().map(|(_, o)| o).collect()
    }

    /// The environment each sandbox was made with, by E2B id.
    pub fn envs(&self) -> HashMap<String, Vec<(String, String)>> {
        self.cloud
            .objects()
            .into_iter()
            .filter_map(|(id, _)| {
                let env = self.cloud.machine(&id, |m| m.env.clone())?;
                Some((id, env))
            })
            .collect()
    }

    /// How many processes were started in each sandbox.
    pub fn commands(&self) -> Vec<u32> {
        self.cloud
            .objects()
            .into_iter()
            .filter_map(|(id, _)| self.cloud.machine(&id, |m| m.commands))
            .collect()
    }

    pub fn logs(&self) -> String {
        self.cloud.logs()
    }
}

impl Drop for FakeE2b {
    fn drop(&mut self) {
        self.task.abort();
        self.cloud.end_all();
    }
}

fn error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, Json(json!({"code": status, "message": message}))).into_response()
}

/// Auth, the call's record, and a failure the test asked for.
fn admit(c: &Cloud, headers: &HeaderMap, call: &str) -> Result<(), Box<Response>> {
    let forced = c.admit(call);
    if headers.get("x-api-key").and_then(|v| v.to_str().ok()) != Some(API_KEY) {
        return Err(Box::new(error(401, "Invalid API key")));
    }
    if let Some((status, message)) = forced {
        return Err(Box::new(error(status, &message)));
    }
    Ok(())
}

/// A sandbox whose processes all ended is killed, as E2B does.
fn ended(m: &mut Machine, _why: String) {
    m.object["state"] = json!("killed");
}

fn token(c: &Cloud) -> String {
    c.next_id("envd-token-")
}

async fn create(State(c): State<Arc<Cloud>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(r) = admit(&c, &headers, "POST /sandboxes") {
        return *r;
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "request body is not JSON");
    };
    if body["templateID"] != TEMPLATE {
        return error(
            404,
            &format!(
                "template '{}' not found",
                body["templateID"].as_str().unwrap_or("")
            ),
        );
    }
    let Some(timeout) = body["timeout"].as_u64() else {
        return error(400, "timeout must be a number of seconds");
    };
    if let Some(refused) = beyond_plan(&c, timeout) {
        return refused;
    }
    let env: Vec<(String, String)> = body["envVars"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let id = c.next_id("i").to_ascii_lowercase();
    let access = token(&c);
    let object = json!({
        "sandboxID": id,
        "templateID": TEMPLATE,
        "clientID": "6532622b",
        "envdVersion": "0.2.4",
        "envdAccessToken": access,
        "metadata": body["metadata"],
        "state": "running",
        "secure": body["secure"],
        "autoPause": body["autoPause"],
        "timeout": timeout,
    });
    if let Err(e) = c.make(&id, object.clone(), env, None, ended) {
        return error(500, &e);
    }
    (StatusCode::CREATED, Json(object)).into_response()
}

/// E2B's refusal of a lifetime longer than the team's plan allows, in its words.
fn beyond_plan(c: &Cloud, timeout: u64) -> Option<Response> {
    let hours = c.limit("max_length_hours")?;
    (timeout > hours * 3600).then(|| {
        error(
            400,
            &format!("Timeout cannot be greater than {hours} hours"),
        )
    })
}

fn listed(object: &Value) -> Value {
    let mut o = object.clone();
    if let Some(map) = o.as_object_mut() {
        map.remove("envdAccessToken");
    }
    o
}

/// `GET /templates/{templateID}`: the template with its builds (`TemplateWithBuilds` in
/// E2B's OpenAPI document); the one template this fake serves.
async fn template(
    State(c): State<Arc<Cloud>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(r) = admit(&c, &headers, &format!("GET /templates/{id}")) {
        return *r;
    }
    if id != TEMPLATE {
        return error(404, &format!("Template '{id}' not found"));
    }
    Json(json!({
        "templateID": TEMPLATE,
        "public": false,
        "aliases": [TEMPLATE],
        "names": [TEMPLATE],
        "createdAt": "2026-11-01T00:00:00Z",
        "updatedAt": "2026-11-01T00:00:00Z",
        "lastSpawnedAt": null,
        "spawnCount": 0,
        "builds": [{
            "buildID": "8f3e0b6c-3c43-4b8a-9d53-2b1f1f0c1a7e",
            "status": "ready",
            "createdAt": "2026-11-01T00:00:00Z",
            "updatedAt": "2026-11-01T00:00:00Z",
            "cpuCount": 2,
            "memoryMB": 2048,
            "diskSizeMB": null,
            "envdVersion": "0.2.4"
        }]
    }))
    .into_response()
}

async fn list(
    State(c): State<Arc<Cloud>>,
    headers: HeaderMap,
    Query(q): Query<Vec<(String, String)>>,
) -> Response {
    if let Err(r) = admit(&c, &headers, "GET /v2/sandboxes") {
        return *r;
    }
    // E2B's OpenAPI document declares `state` (and `metadata`) as non-exploded form
    // parameters: a repeated key is refused before anything is read.
    for name in ["state", "metadata"] {
        if q.iter().filter(|(k, _)| k == name).count() > 1 {
            return error(
                400,
                &format!("parameter '{name}' is not exploded, but is specified multiple times"),
            );
        }
    }
    let mut wanted: Vec<(String, String)> = vec![];
    let mut states: Vec<String> = vec![];
    for (k, v) in &q {
        match k.as_str() {
            // `metadata` is itself a query string: k=v&k2=v2, URL-encoded once more.
            "metadata" => {
                for pair in v.split('&') {
                    let Some((mk, mv)) = pair.split_once('=') else {
                        return error(400, "metadata must be key=value pairs");
                    };
                    wanted.push((decode(mk), decode(mv)));
                }
            }
            "state" => {
                for state in v.split(',') {
                    if !["running", "paused"].contains(&state) {
                        return error(400, &format!("invalid state {state:?}"));
                    }
                    states.push(state.to_owned());
                }
            }
            _ => {}
        }
    }
    if states.is_empty() {
        states.push("running".into());
    }
    let found: Vec<Value> = c
        .objects()
        .into_iter()
        .map(|(_, o)| o)
        .filter(|o| states.iter().any(|s| o["state"] == s.as_str()))
        .filter(|o| wanted.iter().all(|(k, v)| o["metadata"][k] == v.as_str()))
        .map(|o| listed(&o))
        .collect();
    Json(found).into_response()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = vec![];
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn alive(c: &Cloud, id: &str) -> Option<Value> {
    c.machine(id, |m| m.object.clone())
        .filter(|o| o["state"] != "killed")
}

async fn one(
    State(c): State<Arc<Cloud>>,
    method: Method,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(r) = admit(&c, &headers, &format!("{method} /sandboxes/{id}")) {
        return *r;
    }
    let Some(object) = alive(&c, &id) else {
        return error(
            404,
            &format!("sandbox \"{id}\" doesn't exist or you don't have access to it"),
        );
    };
    if method == Method::DELETE {
        c.remove(&id);
        return StatusCode::NO_CONTENT.into_response();
    }
    Json(object).into_response()
}

async fn act(
    State(c): State<Arc<Cloud>>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    if let Err(r) = admit(&c, &headers, &format!("POST /sandboxes/{id}/{action}")) {
        return *r;
    }
    let Some(object) = alive(&c, &id) else {
        return error(
            404,
            &format!("sandbox \"{id}\" doesn't exist or you don't have access to it"),
        );
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match action.as_str() {
        "pause" => {
            if object["state"] == "paused" {
                return error(409, &format!("sandbox \"{id}\" is already paused"));
            }
            c.pause(&id);
            c.machine(&id, |m| m.object["state"] = json!("paused"));
            StatusCode::NO_CONTENT.into_response()
        }
        "connect" => {
            let Some(timeout) = body["timeout"].as_u64() else {
                return error(400, "timeout must be a number of seconds");
            };
            if let Some(refused) = beyond_plan(&c, timeout) {
                return refused;
            }
            let was_paused = object["state"] == "paused";
            if was_paused {
                c.resume(&id);
            }
            let access = token(&c);
            let object = c
                .machine(&id, |m| {
                    m.object["state"] = json!("running");
                    m.object["timeout"] = json!(timeout);
                    m.object["envdAccessToken"] = json!(access);
                    m.object.clone()
                })
                .unwrap_or_default();
            let status = if was_paused {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            (status, Json(object)).into_response()
        }
        "timeout" => {
            let Some(timeout) = body["timeout"].as_u64() else {
                return error(400, "timeout must be a number of seconds");
            };
            c.machine(&id, |m| m.object["timeout"] = json!(timeout));
            StatusCode::NO_CONTENT.into_response()
        }
        _ => error(404, &format!("no route POST /sandboxes/{id}/{action}")),
    }
}

fn envelope(flags: u8, message: &Value) -> Vec<u8> {
    inspect_e2b::envelope(flags, message.to_string().as_bytes())
}

fn stream(parts: Vec<Vec<u8>>) -> Response {
    (
        StatusCode::OK,
        [("content-type", inspect_e2b::CONNECT_JSON)],
        parts.concat(),
    )
        .into_response()
}

async fn process_start(State(c): State<Arc<Cloud>>, headers: HeaderMap, body: Bytes) -> Response {
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("");
    let id = header("e2b-sandbox-id").to_owned();
    if let Some((status, message)) = c.admit(&format!("envd {id} POST /process.Process/Start")) {
        return error(status, &message);
    }
    if header("e2b-sandbox-port") != inspect_e2b::ENVD_PORT.to_string() {
        return error(502, "the sandbox port is not envd's");
    }
    if header("content-type") != inspect_e2b::CONNECT_JSON {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported content type: want application/connect+json",
        )
            .into_response();
    }
    let Some(object) = alive(&c, &id) else {
        return error(502, &format!("sandbox {id} not found"));
    };
    if object["state"] != "running" {
        return error(502, &format!("sandbox {id} is paused"));
    }
    if header("x-access-token") != object["envdAccessToken"].as_str().unwrap_or("-") {
        return stream(vec![envelope(
            2,
            &json!({"error": {"code": "unauthenticated", "message": "invalid access token"}}),
        )]);
    }
    let request = match inspect_e2b::envelopes(&body) {
        Ok(e) if e.len() == 1 && e[0].0 == 0 => e[0].1.clone(),
        _ => {
            return stream(vec![envelope(
                2,
                &json!({"error": {"code": "invalid_argument", "message": "one request envelope expected"}}),
            )])
        }
    };
    // Who the process runs as: basic auth's user name (no password), as envd reads it.
    // The image's users are `root` and `sandbox` (uid 1000, who owns the sandbox root);
    // E2B's template build adds `user` (uid 1001 here), its default.
    let user = header("authorization")
        .strip_prefix("Basic ")
        .and_then(|b| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(b).ok()
        })
        .map(|b| {
            String::from_utf8_lossy(&b)
                .split(':')
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .unwrap_or_default();
    match user.as_str() {
        "root" | "sandbox" => {}
        // `user` cannot write the sandbox root: the start command's backgrounded
        // supervisor dies at its first write, and the command itself exits 0.
        "user" => {
            return stream(vec![
                envelope(0, &json!({"event": {"start": {"pid": 4242}}})),
                envelope(
                    0,
                    &json!({"event": {"end": {"exitCode": 0, "exited": true, "status": "exit status 0"}}}),
                ),
                envelope(2, &json!({})),
            ])
        }
        other => {
            return stream(vec![envelope(
                2,
                &json!({"error": {"code": "unauthenticated", "message": format!("error looking up user '{other}'")}}),
            )])
        }
    }
    let process = &request["process"];
    let mut argv = vec![process["cmd"].as_str().unwrap_or_default().to_owned()];
    argv.extend(
        process["args"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default(),
    );
    match c.exec(&id, &argv, Duration::from_secs(30)).await {
        Ok(ran) => {
            let mut parts = vec![envelope(0, &json!({"event": {"start": {"pid": 4242}}}))];
            if !ran.stdout.is_empty() {
                use base64::Engine;
                let data = base64::engine::general_purpose::STANDARD.encode(ran.stdout);
                parts.push(envelope(0, &json!({"event": {"data": {"stdout": data}}})));
            }
            parts.push(envelope(
                0,
                &json!({"event": {"end": {"exitCode": ran.code, "exited": true, "status": format!("exit status {}", ran.code)}}}),
            ));
            parts.push(envelope(2, &json!({})));
            stream(parts)
        }
        Err(e) => stream(vec![envelope(
            2,
            &json!({"error": {"code": "internal", "message": e}}),
        )]),
    }
}
