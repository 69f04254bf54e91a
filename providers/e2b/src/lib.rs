//! E2B as a sandbox provider. A sandbox is an E2B sandbox made from the
//! template built from the project's sandbox image; the supervisor's environment is given
//! when it is created (E2B logs every process's command line and environment, so secrets go
//! nowhere else), and the supervisor is started by one process call to the sandbox's
//! `envd` (Connect protocol, JSON codec). Persistent resume in place: stopping pauses the
//! sandbox (memory and disk kept), resuming connects to it again and starts the supervisor
//! again if it is not running. E2B has no session snapshots (its snapshots are templates).
//!
//! E2B names sandboxes by its own ids; ours travel as metadata, and the client finds a
//! sandbox by it. This crate builds the bodies and reads the answers; the client
//! (`client.rs`, wasm only) sends them from the SessionDO.

#[cfg(target_arch = "wasm32")]
mod client;
#[cfg(target_arch = "wasm32")]
pub use client::E2bProvider;

use inspect_protocol::provider::{
    SpawnRequest, SANDBOX_ROOT, SUPERVISOR_START, SUPERVISOR_UP_CHECK,
};
use inspect_protocol::vendor;
use serde_json::{json, Value};

pub const DEFAULT_API_URL: &str = "https://api.e2b.app";
pub const DEFAULT_DOMAIN: &str = "e2b.app";
/// The port of the sandbox's own daemon (`envd`), which runs processes.
pub const ENVD_PORT: u16 = 49983;
/// The sandbox's lifetime when the settings do not say: two hours, as the original's.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 7200;
pub const ROOT: &str = SANDBOX_ROOT;
pub const META_FRAMEWORK: &str = "openinspect_framework";
pub const META_SESSION: &str = "openinspect_session_id";
pub const META_SANDBOX: &str = "openinspect_expected_sandbox_id";

/// The settings (`E2B_*`) the provider needs; see `docs/providers.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct E2bConfig {
    pub api_url: String,
    pub api_key: String,
    /// The template built from `providers/image/Dockerfile`.
    pub template_id: String,
    /// Where sandboxes answer (`{port}-{sandboxID}.{domain}`).
    pub domain: String,
    /// One address for every sandbox's `envd` (self-hosted E2B behind one proxy, which
    /// routes by the `E2b-Sandbox-Id` and `E2b-Sandbox-Port` headers).
    pub sandbox_url: Option<String>,
    pub timeout_seconds: u64,
}

impl E2bConfig {
    pub fn from_settings(get: impl Fn(&str) -> Option<String>) -> Result<E2bConfig, String> {
        let get = vendor::trimmed(get);
        vendor::require(&get, &["E2B_API_KEY", "E2B_TEMPLATE_ID"])?;
        let timeout_seconds = match get("E2B_SANDBOX_TIMEOUT_SECONDS") {
            None => DEFAULT_TIMEOUT_SECONDS,
            Some(t) => match t.parse::<u64>() {
                Ok(s) if (300..=86_400).contains(&s) => s,
                _ => {
                    return Err(format!(
                        "E2B_SANDBOX_TIMEOUT_SECONDS must be seconds between 300 and 86400, not {t}"
                    ))
                }
            },
        };
        Ok(E2bConfig {
            api_url: vendor::base_url(&get, "E2B_API_URL", DEFAULT_API_URL)?,
            api_key: get("E2B_API_KEY").unwrap_or_default(),
            template_id: get("E2B_TEMPLATE_ID").unwrap_or_default(),
            domain: get("E2B_DOMAIN").unwrap_or_else(|| DEFAULT_DOMAIN.into()),
            sandbox_url: match get("E2B_SANDBOX_URL") {
                Some(_) => Some(vendor::base_url(&get, "E2B_SANDBOX_URL", "")?),
                None => None,
            },
            timeout_seconds,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api_url)
    }

    /// The running and paused sandboxes whose metadata has `key` = `value`. Both query
    /// parameters are non-exploded form parameters in E2B's OpenAPI document: one key, its
    /// values joined by commas (a repeated key is a 400).
    pub fn listed(&self, key: &str, value: &str) -> String {
        self.url(&format!(
            "/v2/sandboxes?metadata={}&state=running,paused",
            vendor::encode(&format!(
                "{}={}",
                vendor::encode(key),
                vendor::encode(value)
            ))
        ))
    }

    /// Where a sandbox's `envd` starts processes.
    pub fn process_start_url(&self, e2b_id: &str) -> String {
        let base = match &self.sandbox_url {
            Some(u) => u.clone(),
            None => format!("https://{ENVD_PORT}-{e2b_id}.{}", self.domain),
        };
        format!("{base}/process.Process/Start")
    }

    /// A port's public URL (E2B routes `{port}-{id}.{domain}` to the sandbox's port).
    pub fn port_url(&self, e2b_id: &str, port: u16) -> String {
        format!("https://{port}-{e2b_id}.{}", self.domain)
    }
}

/// `POST /sandboxes`: the template, the supervisor's environment, our ids as metadata, the
/// lifetime; paused (not killed) when the lifetime ends, never resumed by traffic alone.
pub fn create_body(cfg: &E2bConfig, req: &SpawnRequest) -> Value {
    let mut body = json!({
        "templateID": cfg.template_id,
        "envVars": req.supervisor_env(ROOT),
        "metadata": {
            META_FRAMEWORK: "open-inspect",
            META_SESSION: req.session_id,
            META_SANDBOX: req.sandbox_id,
        },
        "timeout": cfg.timeout_seconds,
        "secure": true,
        "autoPause": true,
        "autoResume": {"enabled": false},
    });
    // An egress policy that confines: E2B's firewall denies everything but the names
    // (matched on ports 80 and 443) and addresses let out.
    let reach = req.reach();
    if let Some(v) = req.egress.as_ref().and_then(|p| p.for_vendor(&reach)) {
        let mut allow = v.domains;
        allow.extend(v.cidrs);
        body["network"] = json!({"denyOut": ["0.0.0.0/0"], "allowOut": allow});
        body["envVars"][inspect_protocol::egress::ENFORCED_BY_VAR] =
            json!("E2B's firewall (host names on ports 80 and 443; refusals are not reported)");
    }
    body
}

/// `POST /sandboxes/{id}/connect`: resumes a paused sandbox (or keeps a running one) for
/// another lifetime.
pub fn connect_body(cfg: &E2bConfig) -> Value {
    json!({ "timeout": cfg.timeout_seconds })
}

/// `POST /sandboxes/{id}/timeout`: the sandbox ends (pauses) a whole lifetime from now —
/// how a running turn keeps its sandbox. E2B ends it no later than its start plus the
/// plan's longest lifetime whatever is asked.
pub fn extend_body(cfg: &E2bConfig) -> Value {
    json!({ "timeout": cfg.timeout_seconds })
}

/// The longest lifetime a team's plan allows, in seconds, from E2B's refusal of a longer
/// one to a create or a connect (a 400: "Timeout cannot be greater than 1 hours" on
/// Hobby, 24 on Pro); none for any other answer.
pub fn plan_limit(message: &str) -> Option<u64> {
    let rest = message.split("Timeout cannot be greater than ").nth(1)?;
    let hours: u64 = rest.split_whitespace().next()?.parse().ok()?;
    (hours > 0).then_some(hours * 3600)
}

impl E2bConfig {
    /// These settings within a plan's limit (`plan_limit`), once E2B has said it.
    pub fn within_plan(&self, limit: Option<u64>) -> E2bConfig {
        let mut cfg = self.clone();
        if let Some(limit) = limit {
            cfg.timeout_seconds = cfg.timeout_seconds.min(limit);
        }
        cfg
    }
}

/// The headers of a call to a sandbox's `envd` (besides the content type).
pub fn envd_headers(e2b_id: &str, access_token: &str) -> Vec<(&'static str, String)> {
    vec![
        ("Connect-Protocol-Version", "1".into()),
        ("X-Access-Token", access_token.to_owned()),
        // The process runs as the user named in basic auth (no password): the image's
        // `sandbox`, who owns the sandbox root. E2B's default, `user`, is one its template
        // build adds (uid 1001 on our image), who cannot write there.
        ("Authorization", format!("Basic {SANDBOX_USER_AUTH}")),
        ("E2b-Sandbox-Id", e2b_id.to_owned()),
        ("E2b-Sandbox-Port", ENVD_PORT.to_string()),
    ]
}

pub const CONNECT_JSON: &str = "application/connect+json";

/// One Connect envelope: flags, the length (big-endian), the message.
pub fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(flags);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Every envelope in a stream: `(flags, message)`. An envelope cut short is an error.
pub fn envelopes(mut bytes: &[u8]) -> Result<Vec<(u8, Value)>, String> {
    let mut out = vec![];
    while !bytes.is_empty() {
        if bytes.len() < 5 {
            return Err("a Connect envelope was cut short".into());
        }
        let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        let Some(message) = bytes.get(5..5 + len) else {
            return Err("a Connect envelope was cut short".into());
        };
        let value = inspect_protocol::json::from_slice(message)
            .map_err(|e| format!("a Connect message is not JSON: {e}"))?;
        out.push((bytes[0], value));
        bytes = &bytes[5 + len..];
    }
    Ok(out)
}

/// The body of `process.Process/Start` running `command` with `/bin/sh -c`.
pub fn start_process_body(command: &str) -> Vec<u8> {
    let message = json!({"process": {"cmd": "/bin/sh", "args": ["-c", command]}});
    envelope(0, message.to_string().as_bytes())
}

/// The body that starts the supervisor.
pub fn start_supervisor_body() -> Vec<u8> {
    start_process_body(SUPERVISOR_START)
}

/// The body that checks the supervisor is up (its lock held).
pub fn check_supervisor_body() -> Vec<u8> {
    start_process_body(SUPERVISOR_UP_CHECK)
}

/// The image's user that owns the sandbox root (`providers/image/Dockerfile`), as basic
/// auth's `sandbox:`.
pub const SANDBOX_USER_AUTH: &str = "c2FuZGJveDo=";

/// Reads a `process.Process/Start` answer: the process started, ended with status 0, and
/// the stream ended without an error. The error says what happened in `envd`'s words.
pub fn read_process_stream(bytes: &[u8]) -> Result<(), String> {
    let mut started = false;
    let mut status = None;
    let mut ended_clean = false;
    let mut said = Vec::new();
    for (flags, message) in envelopes(bytes)? {
        if flags & 0x02 != 0 {
            if let Some(e) = message.get("error").filter(|e| !e.is_null()) {
                return Err(format!(
                    "envd: {} {}",
                    e["code"].as_str().unwrap_or("error"),
                    e["message"].as_str().unwrap_or_default()
                ));
            }
            ended_clean = true;
            continue;
        }
        let event = &message["event"];
        if event.get("start").is_some() {
            started = true;
        }
        if let Some(out) = event["data"]["stdout"].as_str() {
            use base64::Engine;
            if let Ok(b) = base64::engine::general_purpose::STANDARD.decode(out) {
                said.extend(b);
            }
        }
        if let Some(end) = event.get("end") {
            status = Some(end["status"].as_str().unwrap_or_default().to_owned());
        }
    }
    let said = String::from_utf8_lossy(&said);
    match (started, status, ended_clean) {
        (false, _, _) => Err("envd: the process did not start".into()),
        (true, Some(s), true) if s == "exit status 0" => Ok(()),
        (true, Some(s), _) => Err(format!(
            "envd: the command ended with {s}{}",
            if said.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", said.trim())
            }
        )),
        (true, None, _) => Err("envd: the stream ended before the process did".into()),
    }
}

/// E2B's sandbox states as our status words: `running` or `stopped`.
pub fn status_of(sandbox: &Value) -> (&'static str, Option<String>) {
    match sandbox["state"].as_str().unwrap_or("unknown") {
        "running" => ("running", None),
        "paused" | "pausing" => ("stopped", Some("paused".into())),
        other => ("exited", Some(other.to_owned())),
    }
}

/// The first sandbox in a list answer, if any.
pub fn first_listed(list: &Value) -> Option<Value> {
    list.as_array()?.first().cloned()
}

/// Every E2B id in a list answer.
pub fn listed_ids(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|s| s["sandboxID"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

pub use inspect_protocol::vendor::Failure;

/// E2B's error bodies are `{code, message}`; the message is kept short, and never the
/// request's environment (E2B may echo it in a create error). `None` for a 409: the sandbox
/// is already in the state asked for (paused twice).
pub fn classify(status: u16, body: &str, secrets: &[&str]) -> Option<Failure> {
    if status == 409 {
        return None;
    }
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let mut message = match v["message"].as_str() {
        Some(m) => m.to_owned(),
        None => vendor::excerpt(body),
    };
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        message = message.replace(s, "[redacted]");
    }
    Some(vendor::classify("e2b", status, &message))
}

#[cfg(test)]
mod tests;
