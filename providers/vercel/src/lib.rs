//! Vercel Sandbox as a sandbox provider. A sandbox is a named Vercel sandbox
//! (its name is our sandbox id) made from a Vercel snapshot that holds the project's
//! supervisor and OpenCode (the base snapshot), or from a snapshot of an earlier sandbox
//! of the session; the supervisor's environment is given when it is made, and the
//! supervisor is started by one command. Snapshot and restore: a snapshot ends the sandbox
//! (Vercel shuts it down to take it), so one is taken only when the sandbox stops; the
//! next sandbox is made from it. Each port is routed by Vercel to a URL of its own.
//!
//! This crate builds the bodies and reads the answers; the client
//! (`client.rs`, wasm only) sends them from the SessionDO.

#[cfg(target_arch = "wasm32")]
mod client;
#[cfg(target_arch = "wasm32")]
pub use client::VercelProvider;

use inspect_protocol::provider::{SpawnRequest, SANDBOX_ROOT, SUPERVISOR_START};
use inspect_protocol::vendor;
pub use inspect_protocol::vendor::encode;
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub const DEFAULT_API_URL: &str = "https://vercel.com/api";
/// Vercel's longest sandbox lifetime on every plan (Hobby): 45 minutes.
pub const DEFAULT_TIMEOUT_MINUTES: u64 = 45;
/// Snapshots are kept for 30 days unless the settings say otherwise (0 = for ever).
pub const DEFAULT_SNAPSHOT_EXPIRATION_MS: u64 = 30 * 24 * 3600 * 1000;
pub const ROOT: &str = SANDBOX_ROOT;
pub const TAG_FRAMEWORK: &str = "openinspect_framework";
pub const TAG_SESSION: &str = "openinspect_session_id";

/// The settings (`VERCEL_*`) the provider needs; see `docs/providers.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VercelConfig {
    pub api_url: String,
    pub token: String,
    pub project_id: String,
    pub team_id: Option<String>,
    /// The snapshot made from the sandbox image (supervisor, git, OpenCode).
    pub base_snapshot: String,
    pub timeout_minutes: u64,
    pub snapshot_expiration_ms: u64,
    /// 1, 2, 4 or 8.
    pub vcpus: Option<u64>,
}

impl VercelConfig {
    pub fn from_settings(get: impl Fn(&str) -> Option<String>) -> Result<VercelConfig, String> {
        let get = vendor::trimmed(get);
        vendor::require(
            &get,
            &[
                "VERCEL_TOKEN",
                "VERCEL_PROJECT_ID",
                "VERCEL_BASE_SNAPSHOT_ID",
            ],
        )?;
        let number =
            |name: &str, default: u64, ok: &dyn Fn(u64) -> bool, says: &str| match get(name) {
                None => Ok(default),
                Some(v) => match v.parse::<u64>() {
                    Ok(n) if ok(n) => Ok(n),
                    _ => Err(format!("{name} must be {says}, not {v}")),
                },
            };
        let timeout_minutes = number(
            "VERCEL_SANDBOX_TIMEOUT_MINUTES",
            DEFAULT_TIMEOUT_MINUTES,
            &|n| (5..=300).contains(&n),
            "minutes between 5 and 300",
        )?;
        let snapshot_expiration_ms = number(
            "VERCEL_SNAPSHOT_EXPIRATION_MS",
            DEFAULT_SNAPSHOT_EXPIRATION_MS,
            &|_| true,
            "milliseconds (0 keeps snapshots for ever)",
        )?;
        let vcpus = match get("VERCEL_VCPUS") {
            None => None,
            Some(_) => Some(number(
                "VERCEL_VCPUS",
                2,
                &|n| [1, 2, 4, 8].contains(&n),
                "1, 2, 4 or 8",
            )?),
        };
        let api_url = vendor::base_url(&get, "VERCEL_SANDBOX_API_BASE_URL", DEFAULT_API_URL)?;
        Ok(VercelConfig {
            api_url,
            token: get("VERCEL_TOKEN").unwrap_or_default(),
            project_id: get("VERCEL_PROJECT_ID").unwrap_or_default(),
            team_id: get("VERCEL_TEAM_ID"),
            base_snapshot: get("VERCEL_BASE_SNAPSHOT_ID").unwrap_or_default(),
            timeout_minutes,
            snapshot_expiration_ms,
            vcpus,
        })
    }

    /// `path` on the API, with the team (when set) as Vercel wants it on every call.
    pub fn url(&self, path: &str) -> String {
        match &self.team_id {
            Some(team) => {
                let join = if path.contains('?') { '&' } else { '?' };
                format!("{}{path}{join}teamId={}", self.api_url, encode(team))
            }
            None => format!("{}{path}", self.api_url),
        }
    }

    /// A sandbox by its name (our sandbox id).
    pub fn sandbox_path(&self, name: &str) -> String {
        format!(
            "/v2/sandboxes/{}?projectId={}",
            encode(name),
            encode(&self.project_id)
        )
    }

    /// One page of the project's sandboxes with the tag `key` = `value` (the list takes
    /// `project`, at most 50 a page, one tag filter as `key:value`, and the cursor the
    /// previous page gave).
    pub fn list_path(&self, (key, value): (&str, &str), cursor: Option<&str>) -> String {
        let mut path = format!(
            "/v2/sandboxes?project={}&limit={LIST_PAGE}&tags={}",
            encode(&self.project_id),
            encode(&format!("{key}:{value}"))
        );
        if let Some(c) = cursor {
            path.push_str(&format!("&cursor={}", encode(c)));
        }
        path
    }

    /// The snapshots a sandbox left.
    pub fn snapshots_path(&self, name: &str) -> String {
        format!(
            "/v2/sandboxes/snapshots?project={}&name={}&limit=20&sortOrder=desc",
            encode(&self.project_id),
            encode(name)
        )
    }
}

/// How much longer each extension of a running turn's sandbox asks for (every ten
/// minutes of a turn, so its end stays ahead): Vercel adds it to the session's timeout,
/// up to the plan's longest (45 minutes on Hobby, 5 hours on Pro).
pub const EXTEND_BY_MS: u64 = 15 * 60 * 1000;

/// `POST /v2/sandboxes/sessions/{id}/extend-timeout`.
pub fn extend_body() -> Value {
    json!({ "duration": EXTEND_BY_MS })
}

/// `POST /v2/sandboxes`: named by our sandbox id, made from `source` (the base snapshot,
/// a prebuilt image or the session's snapshot), with the ports, the supervisor's
/// environment and our tags.
pub fn create_body(cfg: &VercelConfig, req: &SpawnRequest) -> Value {
    let source = req.restore_from.as_deref().unwrap_or(&cfg.base_snapshot);
    let mut body = json!({
        "projectId": cfg.project_id,
        "name": req.sandbox_id,
        "runtime": "node24",
        "timeout": cfg.timeout_minutes * 60 * 1000,
        "ports": req.vendor_ports(),
        "env": req.supervisor_env(ROOT),
        "tags": {
            TAG_FRAMEWORK: "open-inspect",
            TAG_SESSION: req.session_id,
        },
        "source": {"type": "snapshot", "snapshotId": source},
    });
    if let Some(vcpus) = cfg.vcpus {
        body["resources"] = json!({ "vcpus": vcpus });
    }
    // An egress policy that confines: Vercel's firewall lets out only these names (by a
    // TLS handshake's SNI or a request's Host) and addresses.
    let reach = req.reach();
    if let Some(v) = req.egress.as_ref().and_then(|p| p.for_vendor(&reach)) {
        body["networkPolicy"] = json!({
            "mode": "custom",
            "allowedDomains": v.domains,
            "allowedCIDRs": v.cidrs,
        });
        body["env"][inspect_protocol::egress::ENFORCED_BY_VAR] =
            json!("Vercel's firewall (host names; refusals are not reported)");
    }
    body
}

/// The command that starts the supervisor (as root: the sandbox root is outside the
/// default user's home; `-E` keeps the sandbox's environment).
pub fn start_command_body() -> Value {
    json!({
        "command": "sudo",
        "args": ["-E", "sh", "-c", SUPERVISOR_START],
        "cwd": "/",
        "env": {},
        "wait": false,
    })
}

/// `snapshot` body: how long Vercel keeps it.
pub fn snapshot_body(cfg: &VercelConfig) -> Value {
    json!({ "expiration": cfg.snapshot_expiration_ms })
}

/// The answer's ports as URLs: a route's `url` (made `https://` when it has no scheme), or
/// its subdomain under `vercel.run`.
pub fn port_urls(answer: &Value) -> BTreeMap<String, String> {
    answer["routes"]
        .as_array()
        .map(|routes| {
            routes
                .iter()
                .filter_map(|r| {
                    let port = r["port"].as_u64()?;
                    let url = match (r["url"].as_str(), r["subdomain"].as_str()) {
                        (Some(u), _) if u.starts_with("http") => u.to_owned(),
                        (Some(u), _) => format!("https://{u}"),
                        (None, Some(sub)) => format!("https://{sub}.vercel.run"),
                        (None, None) => return None,
                    };
                    Some((port.to_string(), url))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The session (the running machine) a sandbox answer names.
pub fn session_id_of(answer: &Value) -> Option<String> {
    answer["session"]["id"]
        .as_str()
        .or_else(|| answer["sandbox"]["currentSessionId"].as_str())
        .map(str::to_owned)
}

/// A sandbox answer's state as our status words.
pub fn status_of(answer: &Value) -> (&'static str, Option<String>) {
    let state = answer["session"]["status"]
        .as_str()
        .or_else(|| answer["sandbox"]["status"].as_str())
        .unwrap_or("unknown");
    match state {
        "pending" | "running" => ("running", None),
        "stopping" | "stopped" | "snapshotting" => ("stopped", Some(state.to_owned())),
        other => ("exited", Some(other.to_owned())),
    }
}

/// The most sandboxes a list page holds (Vercel's maximum).
pub const LIST_PAGE: usize = 50;
/// Pages read at most when listing (2,500 sandboxes).
pub const MAX_LIST_PAGES: usize = 50;

/// The cursor of the next page in a list answer (`pagination.next`), if there is one.
pub fn next_cursor(list: &Value) -> Option<String> {
    match &list["pagination"]["next"] {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The names of the session's sandboxes in a list answer (`{sandboxes: […]}`).
pub fn sandboxes_of_session(list: &Value, session_id: &str) -> Vec<Value> {
    list["sandboxes"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|s| s["tags"][TAG_SESSION] == session_id)
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// The ids in a snapshot list answer (`{snapshots: […]}`) not deleted already.
pub fn snapshot_ids(list: &Value) -> Vec<String> {
    list["snapshots"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|s| s["status"] != "deleted")
                .filter_map(|s| s["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub use inspect_protocol::vendor::Failure;

/// Vercel's error bodies are `{error: {code, message}}`.
pub fn classify(status: u16, body: &str) -> Failure {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = match (v["error"]["code"].as_str(), v["error"]["message"].as_str()) {
        (Some(code), Some(m)) => format!("{code}: {m}"),
        (None, Some(m)) => m.to_owned(),
        _ => vendor::excerpt(body),
    };
    vendor::classify("vercel", status, &message)
}

#[cfg(test)]
mod tests;
