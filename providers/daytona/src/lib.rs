//! Daytona as a sandbox provider. A sandbox is a Daytona sandbox made from a
//! Daytona snapshot of the project's sandbox image, whose entrypoint is the supervisor; its
//! environment is given at creation and kept. Persistent resume in place: stopping stops
//! the machine with its disk, starting it again boots the same supervisor with the same
//! identity, which finds the workspace it booted before and resumes it.
//!
//! Daytona names sandboxes by its own ids; ours travel as labels, and the client finds a
//! sandbox by them. This crate builds the bodies and reads the answers; the client
//! (`client.rs`, wasm only) sends them from the SessionDO.

#[cfg(target_arch = "wasm32")]
mod client;
#[cfg(target_arch = "wasm32")]
pub use client::DaytonaProvider;

use inspect_protocol::provider::{SpawnRequest, SANDBOX_ROOT};
use inspect_protocol::vendor;
use serde_json::{json, Value};

pub const DEFAULT_API_URL: &str = "https://app.daytona.io/api";
/// Daytona stops an idle sandbox after this many minutes: a backstop behind our own idle
/// stop (10 minutes).
pub const AUTO_STOP_MINUTES: u64 = 120;
/// A stopped sandbox is archived (cold storage, slower to start) after a day: until then
/// its disk counts against the organization's disk quota (Daytona's own default keeps it a
/// week).
pub const AUTO_ARCHIVE_MINUTES: u64 = 1440;
/// How long a port's signed preview URL lives: the longest Daytona signs (24 h). Links are
/// signed again at each start and resume, and every 23 hours a sandbox keeps running
/// (`refresh_links`, asked by the session's alarm).
pub const PREVIEW_SECONDS: u64 = 86_400;
/// Where the supervisor keeps the workspace, its home and the agent's state.
pub const ROOT: &str = SANDBOX_ROOT;
pub const LABEL_FRAMEWORK: &str = "openinspect_framework";
pub const LABEL_SESSION: &str = "openinspect_session_id";
pub const LABEL_SANDBOX: &str = "openinspect_expected_sandbox_id";

/// The settings (`DAYTONA_*`) the provider needs; see `docs/providers.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaytonaConfig {
    pub api_url: String,
    pub api_key: String,
    /// The Daytona snapshot built from `providers/image/Dockerfile`.
    pub snapshot: String,
    pub target: Option<String>,
}

impl DaytonaConfig {
    pub fn from_settings(get: impl Fn(&str) -> Option<String>) -> Result<DaytonaConfig, String> {
        let get = vendor::trimmed(get);
        vendor::require(&get, &["DAYTONA_API_KEY", "DAYTONA_SNAPSHOT"])?;
        Ok(DaytonaConfig {
            api_url: vendor::base_url(&get, "DAYTONA_API_URL", DEFAULT_API_URL)?,
            api_key: get("DAYTONA_API_KEY").unwrap_or_default(),
            snapshot: get("DAYTONA_SNAPSHOT").unwrap_or_default(),
            target: get("DAYTONA_TARGET"),
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api_url)
    }

    /// The list of sandboxes carrying one label (`GET /sandbox?labels={…}`).
    pub fn labelled(&self, label: &str, value: &str) -> String {
        let labels = json!({ label: value }).to_string();
        self.url(&format!("/sandbox?labels={}", vendor::encode(&labels)))
    }
}

/// `POST /sandbox`: the supervisor's environment (the session's secrets, then the system
/// variables), our ids as labels, Daytona's own stops as a backstop.
pub fn create_body(cfg: &DaytonaConfig, req: &SpawnRequest) -> Value {
    let env = req.supervisor_env(ROOT);
    let mut body = json!({
        "name": req.sandbox_id,
        "snapshot": cfg.snapshot,
        "env": env,
        "labels": {
            LABEL_FRAMEWORK: "open-inspect",
            LABEL_SESSION: req.session_id,
            LABEL_SANDBOX: req.sandbox_id,
        },
        "autoStopInterval": AUTO_STOP_MINUTES,
        "autoArchiveInterval": AUTO_ARCHIVE_MINUTES,
        "public": false,
    });
    if let Some(target) = &cfg.target {
        body["target"] = json!(target);
    }
    body
}

/// Daytona's sandbox states, as our status words: `running`, `stopped` or `exited`. Only
/// the states that end a sandbox are `exited`; a passing state (`resizing`,
/// `snapshotting`, `unknown`, one added later) reads as still running — the connect
/// deadline catches one that never comes.
pub fn status_of(sandbox: &Value) -> (&'static str, Option<String>) {
    let state = sandbox["state"].as_str().unwrap_or("unknown");
    match state {
        "stopped" | "stopping" | "archived" | "archiving" => ("stopped", Some(state.to_owned())),
        "error" | "build_failed" | "destroyed" | "destroying" => (
            "exited",
            Some(match sandbox["errorReason"].as_str() {
                Some(why) => format!("{state}: {why}"),
                None => state.to_owned(),
            }),
        ),
        _ => ("running", None),
    }
}

/// What bringing a stopped sandbox back takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revival {
    /// It runs already.
    Nothing,
    Start,
    /// It failed but Daytona can recover it.
    Recover,
    /// It cannot come back: spawn a fresh one.
    Gone,
}

pub fn revival(sandbox: &Value) -> Revival {
    match sandbox["state"].as_str().unwrap_or("") {
        "started" | "starting" => Revival::Nothing,
        "error" | "build_failed" if sandbox["recoverable"] == true => Revival::Recover,
        "error" | "build_failed" | "destroyed" | "destroying" => Revival::Gone,
        _ => Revival::Start,
    }
}

/// The first sandbox in a list answer (an array, or `{items: […]}`), if any.
pub fn first_listed(list: &Value) -> Option<Value> {
    let items = list.as_array().or_else(|| list["items"].as_array())?;
    items.first().cloned()
}

/// Every id in a list answer.
pub fn listed_ids(list: &Value) -> Vec<String> {
    list.as_array()
        .or_else(|| list["items"].as_array())
        .map(|items| {
            items
                .iter()
                .filter_map(|s| s["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub use inspect_protocol::vendor::Failure;

/// Daytona's error bodies are `{statusCode, message, error}`, the message a string or a
/// list of them.
pub fn classify(status: u16, body: &str) -> Failure {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = match &v["message"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("; "),
        _ => vendor::excerpt(body),
    };
    // The organization's usage quotas ("Total CPU limit exceeded. Maximum allowed: 10",
    // "Total disk quota exceeded"), answered as 403s and, from the paths that raise a
    // BadRequestError, 400s: room frees when sandboxes stop or are archived. A single
    // sandbox asking more than the per-sandbox maximum stays a refusal.
    let lower = message.to_ascii_lowercase();
    let usage = lower.starts_with("total ")
        && (lower.contains("limit exceeded") || lower.contains("quota exceeded"));
    if matches!(status, 400 | 403) && usage {
        return vendor::Failure::Quota(format!("daytona answered {status}: {message}"));
    }
    vendor::classify("daytona", status, &message)
}

#[cfg(test)]
mod tests;
