//! Daytona as a sandbox provider, the pure part. A sandbox is a Daytona sandbox made from a
//! Daytona snapshot of the project's sandbox image, whose entrypoint is the supervisor; its
//! environment is given at creation and kept. Persistent resume in place: stopping stops
//! the machine with its disk, starting it again boots the same supervisor with the same
//! identity, which finds the workspace it booted before and resumes it.
//!
//! Daytona names sandboxes by its own ids; ours travel as labels, and the client finds a
//! sandbox by them. This crate builds the bodies and reads the answers; the SessionDO's
//! shell sends them.

use inspect_protocol::provider::{SpawnRequest, SANDBOX_ROOT};
use serde_json::{json, Value};

pub const DEFAULT_API_URL: &str = "https://app.daytona.io/api";
/// Daytona stops an idle sandbox after this many minutes: a backstop behind our own idle
/// stop (10 minutes).
pub const AUTO_STOP_MINUTES: u64 = 120;
/// A stopped sandbox is archived (cold storage, slower to start) after a week.
pub const AUTO_ARCHIVE_MINUTES: u64 = 10080;
/// How long a port's signed preview URL lives (Daytona's sandboxes have no lifetime cap).
pub const PREVIEW_SECONDS: u64 = 3900;
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
    /// The Daytona snapshot built from `sandbox-image/Dockerfile`.
    pub snapshot: String,
    pub target: Option<String>,
}

impl DaytonaConfig {
    pub fn from_settings(get: impl Fn(&str) -> Option<String>) -> Result<DaytonaConfig, String> {
        let get = |n: &str| {
            get(n)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let missing: Vec<&str> = ["DAYTONA_API_KEY", "DAYTONA_SNAPSHOT"]
            .into_iter()
            .filter(|n| get(n).is_none())
            .collect();
        if !missing.is_empty() {
            return Err(format!("missing {}", missing.join(", ")));
        }
        let api_url = get("DAYTONA_API_URL")
            .unwrap_or_else(|| DEFAULT_API_URL.into())
            .trim_end_matches('/')
            .to_owned();
        if !(api_url.starts_with("https://") || api_url.starts_with("http://")) {
            return Err(format!("DAYTONA_API_URL is not an http(s) URL: {api_url}"));
        }
        Ok(DaytonaConfig {
            api_url,
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
        self.url(&format!("/sandbox?labels={}", encode(&labels)))
    }
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
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

/// Daytona's sandbox states, as our status words: `running`, `stopped` or `exited`.
pub fn status_of(sandbox: &Value) -> (&'static str, Option<String>) {
    let state = sandbox["state"].as_str().unwrap_or("unknown");
    match state {
        "started" | "starting" | "creating" | "restoring" | "pending_build"
        | "building_snapshot" | "pulling_snapshot" => ("running", None),
        "stopped" | "stopping" | "archived" | "archiving" => ("stopped", Some(state.to_owned())),
        _ => (
            "exited",
            Some(match sandbox["errorReason"].as_str() {
                Some(why) => format!("{state}: {why}"),
                None => state.to_owned(),
            }),
        ),
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

/// What an error answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    NotFound,
    Transient(String),
    /// A quota is used up (CPU, memory, disk, sandboxes): wait until sandboxes stop.
    Quota(String),
    Permanent(String),
}

pub fn classify(status: u16, body: &str) -> Failure {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = match &v["message"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("; "),
        _ => body.chars().take(300).collect(),
    };
    let said = format!("daytona answered {status}: {message}");
    match status {
        404 => Failure::NotFound,
        408 | 429 | 500..=599 => Failure::Transient(said),
        403 if message.to_ascii_lowercase().contains("quota") => Failure::Quota(said),
        _ => Failure::Permanent(said),
    }
}

#[cfg(test)]
mod tests;
