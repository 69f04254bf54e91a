//! `GET /health`: proves the Worker's bindings answer.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthReport {
    /// `"ok"` when every check passed, `"degraded"` otherwise.
    pub status: String,
    /// The crate version of the Worker build.
    pub version: String,
    pub d1: CheckResult,
    pub durable_object: CheckResult,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    pub ok: bool,
    pub latency_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What the Durable Object answers to a health probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DurableProbe {
    /// How many probes this object has stored in its SQLite, this one included.
    pub probes: i64,
}

/// The local sandbox host's `GET /health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostHealth {
    pub status: String,
    pub version: String,
    pub sandboxes: usize,
}
