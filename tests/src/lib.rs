//! The harness the integration suites share.
//!
//! [`Stack::start`] runs the real Worker under `wrangler dev` (workerd, local Durable
//! Objects, SQLite and D1) on a free loopback port with a fresh state directory of its own,
//! waits for `/health`, and hands the test its base URL. Dropping the stack stops the whole
//! process group (wrangler, workerd and anything they started), also when the test panics.
//!
//! The Worker is built once per run: by the test command before `cargo test`, or, when a
//! test binary runs on its own, once per process here.

pub mod agent;
pub mod browser;
pub mod capture_provider;
pub mod cli;
pub mod client;
pub mod fakes;
pub mod flaky;
pub mod host;
pub mod repo;
pub mod signing;
pub mod stack;
pub mod tls;

pub use stack::{Stack, StackOptions};

use std::path::PathBuf;

/// A benchmark's setting from the environment (`INSPECT_…`), when it is set and reads as `T`.
pub fn setting<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The `p` quantile (0–1) of values sorted ascending (NaN when there are none).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
}
