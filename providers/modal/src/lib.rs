//! Modal as a sandbox provider. Modal has no REST API for sandboxes: our Modal app
//! (`app/`, Python) exposes web endpoints the control plane calls, each a `POST` of
//! JSON answered with `{success, data?, error?}`, authorised by a bearer token
//! `{ms}.{hex(HMAC-SHA256(secret, ms))}` valid for five minutes. The app runs the same
//! supervisor from the sandbox image; an idle sandbox is snapshotted (Modal's filesystem
//! snapshot is an image) and terminated, and comes back restored from that image.
//!
//! This crate builds the URLs, tokens and bodies and reads the answers; the client
//! (`client.rs`, wasm only) sends them from the SessionDO.

#[cfg(target_arch = "wasm32")]
mod client;
#[cfg(target_arch = "wasm32")]
pub use client::ModalProvider;

use hmac::{Hmac, Mac};
use inspect_protocol::provider::SpawnRequest;
use serde_json::{json, Value};
use sha2::Sha256;

/// Modal's own maximum sandbox lifetime.
pub const MAX_TIMEOUT_SECONDS: u64 = 24 * 3600;
/// A sandbox's lifetime cap when none is configured (Modal's `timeout`): Modal's longest,
/// because a running sandbox's timeout cannot be moved and a cap would cut a long run of
/// turns mid-turn; the session's idle stop ends an idle sandbox long before.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = MAX_TIMEOUT_SECONDS;
/// How long a token is accepted either side of its time.
pub const TOKEN_WINDOW_MS: i64 = 300_000;

/// The settings (`MODAL_*`) the provider needs; see `docs/providers.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModalConfig {
    /// `https://{workspace}--open-inspect-{endpoint}.modal.run`, or an explicit pattern
    /// with `{endpoint}` (`MODAL_API_URL`, for a proxy or a test).
    pub url_pattern: String,
    pub secret: String,
    pub timeout_seconds: u64,
}

impl ModalConfig {
    /// Reads the settings through `get`; the error names every missing or bad one.
    pub fn from_settings(get: impl Fn(&str) -> Option<String>) -> Result<ModalConfig, String> {
        let get = |n: &str| {
            get(n)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut missing = Vec::new();
        let url_pattern = match (get("MODAL_API_URL"), get("MODAL_WORKSPACE")) {
            (Some(url), _) => url,
            (None, Some(ws)) => {
                let ws = match get("MODAL_ENVIRONMENT_WEB_SUFFIX") {
                    Some(suffix) => format!("{ws}-{suffix}"),
                    None => ws,
                };
                format!("https://{ws}--open-inspect-{{endpoint}}.modal.run")
            }
            (None, None) => {
                missing.push("MODAL_WORKSPACE");
                String::new()
            }
        };
        let secret = get("MODAL_API_SECRET").unwrap_or_else(|| {
            missing.push("MODAL_API_SECRET");
            String::new()
        });
        if !missing.is_empty() {
            return Err(format!("missing {}", missing.join(", ")));
        }
        if !url_pattern.contains("{endpoint}")
            || !(url_pattern.starts_with("https://") || url_pattern.starts_with("http://"))
        {
            return Err(format!(
                "MODAL_API_URL must be an http(s) URL with {{endpoint}} in it: {url_pattern}"
            ));
        }
        let timeout_seconds = match get("SANDBOX_TIMEOUT_SECONDS") {
            None => DEFAULT_TIMEOUT_SECONDS,
            Some(v) => match v.parse::<u64>() {
                Ok(n) if (1..=MAX_TIMEOUT_SECONDS).contains(&n) => n,
                _ => {
                    return Err(format!(
                        "SANDBOX_TIMEOUT_SECONDS must be 1..={MAX_TIMEOUT_SECONDS} on Modal: {v}"
                    ))
                }
            },
        };
        Ok(ModalConfig {
            url_pattern,
            secret,
            timeout_seconds,
        })
    }

    /// The URL of one endpoint of the app (`api-create-sandbox`, …).
    pub fn endpoint(&self, name: &str) -> String {
        self.url_pattern.replace("{endpoint}", name)
    }

    /// The bearer token for a call made at `now_ms`.
    pub fn token(&self, now_ms: i64) -> String {
        token(&self.secret, now_ms)
    }
}

/// `{ms}.{hex(HMAC-SHA256(secret, ms))}`.
pub fn token(secret: &str, now_ms: i64) -> String {
    let ms = now_ms.to_string();
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(ms.as_bytes());
    format!("{ms}.{}", hex::encode(mac.finalize().into_bytes()))
}

/// The app's endpoints.
pub mod endpoints {
    pub const HEALTH: &str = "api-health";
    pub const CREATE: &str = "api-create-sandbox";
    pub const RESTORE: &str = "api-restore-sandbox";
    pub const SNAPSHOT: &str = "api-snapshot-sandbox";
    pub const TERMINATE: &str = "api-terminate-sandbox";
    pub const STATUS: &str = "api-sandbox-status";
    pub const DELETE_SESSION: &str = "api-delete-session";
    pub const BUILD_IMAGE: &str = "api-build-image";
}

/// The body of `api-create-sandbox` (fresh, or from a prebuilt image) and
/// `api-restore-sandbox` (from a snapshot): the spawn description without its token and
/// secrets, which travel in their own fields.
pub fn create_body(cfg: &ModalConfig, req: &SpawnRequest) -> Value {
    let spawn = req.description();
    let mut body = json!({
        "session_id": req.session_id,
        "sandbox_id": req.sandbox_id,
        "control_plane_url": req.control_plane_url,
        "sandbox_auth_token": req.sandbox_token,
        "spawn": spawn,
        "user_env_vars": req.env,
        "timeout_seconds": cfg.timeout_seconds,
        "tunnel_ports": req.vendor_ports(),
    });
    if let Some(image) = &req.restore_from {
        body["snapshot_image_id"] = json!(image);
    }
    body
}

/// The body of `api-build-image`: the app runs `inspect-supervisor build` in a sandbox of
/// its own, snapshots it when the build succeeded, and reports to the callback URL.
pub fn build_body(req: &inspect_protocol::images::BuildImageRequest) -> Value {
    let spawn = SpawnRequest {
        setup_secrets: Vec::new(),
        session_id: req.build_id.clone(),
        sandbox_id: req.build_id.clone(),
        sandbox_token: String::new(),
        control_plane_url: String::new(),
        repositories: req.repositories.clone(),
        work_branch: "open-inspect/image".into(),
        boot_mode: inspect_protocol::provider::BootMode::Build,
        env: Default::default(),
        tunnel_ports: Vec::new(),
        default_model: None,
        models: Vec::new(),
        skills: Vec::new(),
        mcp_servers: Vec::new(),
        agent: Default::default(),
        managed_grants: Vec::new(),
        restore_from: None,
        egress: None,
    };
    json!({
        "build_id": req.build_id,
        "spawn": spawn.description(),
        "user_env_vars": req.env,
        "git_token": req.git_token,
        "callback_url": req.callback_url,
        "callback_token": req.callback_token,
        "timeout_seconds": req.timeout_seconds,
    })
}

/// The endpoint a spawn goes to.
pub fn create_endpoint(req: &SpawnRequest) -> &'static str {
    if req.restore_from.is_some() {
        endpoints::RESTORE
    } else {
        endpoints::CREATE
    }
}

/// What an answer came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Data(Value),
    /// 502/503/504, 429: the app or Modal is busy or restarting.
    Transient(String),
    /// The app refused (`success: false`, 4xx): the same call will not work.
    Permanent(String),
}

/// Reads an answer: the status, then the `{success, data, error}` envelope.
pub fn read_answer(status: u16, body: &str) -> Answer {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let said = v["error"]
        .as_str()
        .or_else(|| v["detail"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| body.chars().take(300).collect());
    match status {
        200..=299 => {
            if v["success"] == true {
                Answer::Data(v.get("data").cloned().unwrap_or(Value::Null))
            } else if v.is_object() {
                Answer::Permanent(format!("the Modal app failed: {said}"))
            } else {
                Answer::Transient(format!("the Modal app answered unreadably: {said}"))
            }
        }
        429 | 502..=504 => Answer::Transient(format!("the Modal app answered {status}: {said}")),
        _ => Answer::Permanent(format!("the Modal app answered {status}: {said}")),
    }
}

#[cfg(test)]
mod tests;
