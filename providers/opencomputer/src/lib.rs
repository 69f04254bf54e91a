//! OpenComputer as a sandbox provider. A sandbox is an OpenComputer
//! sandbox made from the snapshot built from the project's sandbox image; the supervisor's
//! environment is given when it is made, and the supervisor is started by one command
//! (after every create, fork and wake). Both ways back: stopping hibernates the sandbox
//! and resuming wakes it (the same machine and identity; the start is safe to repeat), and
//! after every turn a disk checkpoint is taken, from which a new sandbox is forked when the
//! hibernated one is gone.
//!
//! OpenComputer names sandboxes by its own ids: the session keeps the id a sandbox was
//! made with and the client asks for it by that (the hosted list shows only running
//! sandboxes, and no metadata). Ours travel as metadata and as tags (which the list does
//! show: the health count, and sandboxes from before ids were kept). This crate builds the
//! bodies and reads the answers; the client (`client.rs`, wasm only) sends them from the
//! SessionDO.

#[cfg(target_arch = "wasm32")]
mod client;
#[cfg(target_arch = "wasm32")]
pub use client::OpenComputerProvider;

use inspect_protocol::provider::{
    SpawnRequest, SANDBOX_ROOT, SUPERVISOR_START, SUPERVISOR_UP_CHECK,
};
use inspect_protocol::vendor;
use serde_json::{json, Value};

pub const DEFAULT_API_URL: &str = "https://app.opencomputer.dev/api";
/// OpenComputer hibernates a sandbox idle this long: a backstop behind our own idle stop.
pub const DEFAULT_IDLE_TIMEOUT_SECONDS: u64 = 1800;
/// Checkpoints kept per sandbox (OpenComputer allows 10).
pub const CHECKPOINTS_KEPT: u64 = 10;
pub const ROOT: &str = SANDBOX_ROOT;
pub const META_FRAMEWORK: &str = "openinspect_framework";
pub const META_SESSION: &str = "openinspect_session_id";
pub const META_SANDBOX: &str = "openinspect_expected_sandbox_id";

/// The settings (`OPENCOMPUTER_*`) the provider needs; see `docs/providers.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenComputerConfig {
    pub api_url: String,
    pub api_key: String,
    /// The snapshot built from `providers/image/Dockerfile`.
    pub template: String,
    pub idle_timeout_seconds: u64,
}

impl OpenComputerConfig {
    pub fn from_settings(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<OpenComputerConfig, String> {
        let get = vendor::trimmed(get);
        vendor::require(&get, &["OPENCOMPUTER_API_KEY", "OPENCOMPUTER_TEMPLATE"])?;
        let idle_timeout_seconds = match get("OPENCOMPUTER_IDLE_TIMEOUT_SECONDS") {
            None => DEFAULT_IDLE_TIMEOUT_SECONDS,
            Some(t) => match t.parse::<u64>() {
                Ok(s) if (60..=86_400).contains(&s) => s,
                _ => {
                    return Err(format!(
                        "OPENCOMPUTER_IDLE_TIMEOUT_SECONDS must be seconds between 60 and 86400, not {t}"
                    ))
                }
            },
        };
        let api_url = vendor::base_url(&get, "OPENCOMPUTER_API_URL", DEFAULT_API_URL)?;
        Ok(OpenComputerConfig {
            api_url,
            api_key: get("OPENCOMPUTER_API_KEY").unwrap_or_default(),
            template: get("OPENCOMPUTER_TEMPLATE").unwrap_or_default(),
            idle_timeout_seconds,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api_url)
    }
}

fn metadata(req: &SpawnRequest) -> Value {
    json!({
        META_FRAMEWORK: "open-inspect",
        META_SESSION: req.session_id,
        META_SANDBOX: req.sandbox_id,
    })
}

/// `PUT /sandboxes/{id}/tags`: our ids, a flat map of strings (OpenComputer's tag keys are
/// `[A-Za-z0-9_.:-]`, at most 128 bytes; `oc:` is its own).
pub fn tags(req: &SpawnRequest) -> Value {
    metadata(req)
}

/// One of our ids on a sandbox answer: its tags (hosted answers), else its metadata.
pub fn our_id(sandbox: &Value, key: &str) -> Option<String> {
    sandbox["tags"][key]
        .as_str()
        .or_else(|| sandbox["metadata"][key].as_str())
        .map(str::to_owned)
}

/// `POST /sandboxes`: from the template snapshot, with the supervisor's environment, our ids
/// as metadata, the idle timeout.
pub fn create_body(cfg: &OpenComputerConfig, req: &SpawnRequest) -> Value {
    json!({
        "templateID": "base",
        "snapshot": cfg.template,
        "envs": req.supervisor_env(ROOT),
        "metadata": metadata(req),
        "timeout": cfg.idle_timeout_seconds,
    })
}

/// `POST /sandboxes/from-checkpoint/{id}`: a new sandbox on a checkpoint's disk, with the
/// new sandbox's own environment (a fork would inherit the old one's otherwise).
pub fn fork_body(cfg: &OpenComputerConfig, req: &SpawnRequest) -> Value {
    json!({
        "envs": req.supervisor_env(ROOT),
        "metadata": metadata(req),
        "timeout": cfg.idle_timeout_seconds,
    })
}

/// `POST /sandboxes/{id}/exec/run` starting the supervisor. OpenComputer's agent runs a
/// command as uid 1000 (the image's `sandbox`, owner of the sandbox root) with its own
/// PATH (`/usr/local/bin` first), HOME `/home/sandbox` and the sandbox's `envs` over them
/// (so the supervisor's HOME is ours); the directory is the sandbox root.
pub fn start_body() -> Value {
    json!({ "cmd": "sh", "args": ["-c", SUPERVISOR_START], "cwd": ROOT, "timeout": 10 })
}

/// `POST /sandboxes/{id}/exec/run` checking the supervisor is up (the start backgrounds it
/// and succeeds whatever becomes of it): exit 0, else the end of its log on stdout.
pub fn up_check_body() -> Value {
    json!({ "cmd": "sh", "args": ["-c", SUPERVISOR_UP_CHECK], "cwd": ROOT, "timeout": 30 })
}

/// `POST /sandboxes/{id}/checkpoints`: the disk only, the oldest deleted past the limit.
pub fn checkpoint_body(name: &str) -> Value {
    json!({
        "name": name,
        "kind": "disk_only",
        "retentionPolicy": {"mode": "delete_oldest", "maxCount": CHECKPOINTS_KEPT},
    })
}

/// A sandbox answer's id (`id` or `sandboxID`).
pub fn id_of(sandbox: &Value) -> Option<String> {
    sandbox["id"]
        .as_str()
        .or_else(|| sandbox["sandboxID"].as_str())
        .map(str::to_owned)
}

fn state_of(sandbox: &Value) -> &str {
    sandbox["state"]
        .as_str()
        .or_else(|| sandbox["status"].as_str())
        .unwrap_or("unknown")
}

/// Whether the sandbox runs (else it must be woken).
pub fn is_running(sandbox: &Value) -> bool {
    matches!(state_of(sandbox), "running" | "started" | "ready")
}

/// A sandbox's state as our status words.
pub fn status_of(sandbox: &Value) -> (&'static str, Option<String>) {
    match state_of(sandbox) {
        "running" | "started" | "ready" | "creating" | "starting" | "waking" => ("running", None),
        s @ ("hibernated" | "hibernating" | "paused") => ("stopped", Some(s.to_owned())),
        // OpenComputer's word for a sandbox it deleted (its record stays).
        "stopped" => (
            "exited",
            Some("stopped: deleted by OpenComputer".to_owned()),
        ),
        other => (
            "exited",
            Some(match sandbox["error"].as_str() {
                Some(why) => format!("{other}: {why}"),
                None => other.to_owned(),
            }),
        ),
    }
}

/// A port's URL: the answer's `tunnelUrls`, else the sandbox domain's pattern, else its
/// routes; `None` when the preview endpoint must be asked.
pub fn port_url(sandbox: &Value, port: u16) -> Option<String> {
    let key = port.to_string();
    if let Some(u) = sandbox["tunnelUrls"][&key].as_str() {
        return Some(u.to_owned());
    }
    if let (Some(id), Some(domain)) = (id_of(sandbox), sandbox["sandboxDomain"].as_str()) {
        return Some(format!("https://{id}-p{port}.{domain}"));
    }
    sandbox["routes"].as_array().and_then(|routes| {
        routes
            .iter()
            .find(|r| r["port"].as_u64() == Some(u64::from(port)))
            .and_then(|r| r["url"].as_str().map(str::to_owned))
    })
}

/// A preview answer's URL (`url`, or `hostname` under https).
pub fn preview_url(answer: &Value) -> Option<String> {
    answer["url"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| answer["hostname"].as_str().map(|h| format!("https://{h}")))
}

/// The sandboxes of a list answer (an array, or `{sandboxes: […]}`) whose tags (or
/// metadata) have `key` = `value`.
pub fn matching(list: &Value, key: &str, value: &str) -> Vec<Value> {
    list.as_array()
        .or_else(|| list["sandboxes"].as_array())
        .map(|all| {
            all.iter()
                .filter(|s| our_id(s, key).as_deref() == Some(value))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// The checkpoint ids in a list answer (an array, or `{checkpoints: […]}`).
pub fn checkpoint_ids(list: &Value) -> Vec<String> {
    list.as_array()
        .or_else(|| list["checkpoints"].as_array())
        .map(|all| {
            all.iter()
                .filter_map(|c| c["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub use inspect_protocol::vendor::Failure;

/// OpenComputer's error bodies are `{error}` (a string, or `{message}`).
pub fn classify(status: u16, body: &str) -> Failure {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = v["error"]
        .as_str()
        .or_else(|| v["message"].as_str())
        .or_else(|| v["error"]["message"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| vendor::excerpt(body));
    vendor::classify("opencomputer", status, &message)
}

#[cfg(test)]
mod tests;
