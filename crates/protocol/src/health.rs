//! `GET /health`: proves the Worker's bindings answer.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct HealthReport {
    /// `"ok"` when every check passed, `"degraded"` otherwise.
    pub status: String,
    /// The crate version of the Worker build.
    pub version: String,
    pub d1: CheckResult,
    pub durable_object: CheckResult,
    /// Where sandboxes come from (the local host in the embedded default).
    pub sandbox_provider: PartCheck,
    /// The GitHub App (repositories, credentials, pull requests, the bot).
    pub github_app: PartCheck,
    /// Parts that are only set up or not: sign-in, the bot's webhook, the secrets key.
    pub sign_in: PartCheck,
    pub github_bot: PartCheck,
    pub secrets_key: PartCheck,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    pub ok: bool,
    pub latency_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What the Durable Object answers to a health probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DurableProbe {
    /// How many probes this object has stored in its SQLite, this one included.
    pub probes: i64,
}

/// The local sandbox host's `GET /health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct HostHealth {
    pub status: String,
    pub version: String,
    pub sandboxes: usize,
    /// What the host keeps on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskUse>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DiskUse {
    /// Sandbox directories (workspaces, agent state, logs).
    pub sandbox_bytes: u64,
    pub snapshot_bytes: u64,
    pub snapshots: usize,
    /// Snapshots past this are pruned, oldest first (never a live session's newest).
    pub snapshot_budget_bytes: u64,
}

/// A part of the deployment that may or may not be set up: whether it is, and whether it
/// answered when asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PartCheck {
    pub configured: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The local sandbox host's disk use, for the sandbox provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskUse>,
}
