//! The Cloudflare Worker: routes every request, checks who is calling, keeps the D1 index
//! and hands each session's traffic to its SessionDO (re-exported here so the runtime finds
//! the class).
//!
//! [`routes`] is pure and tested natively; the runtime shell is wasm-only.

pub mod auth;
pub mod listing;
pub mod routes;

#[cfg(target_arch = "wasm32")]
mod api_tokens;
#[cfg(target_arch = "wasm32")]
mod automations;
#[cfg(target_arch = "wasm32")]
mod caller;
#[cfg(target_arch = "wasm32")]
mod children;
#[cfg(target_arch = "wasm32")]
mod db;
#[cfg(target_arch = "wasm32")]
mod entry;
#[cfg(target_arch = "wasm32")]
mod health;
#[cfg(target_arch = "wasm32")]
mod http;
#[cfg(target_arch = "wasm32")]
mod images;
#[cfg(target_arch = "wasm32")]
mod index;
#[cfg(target_arch = "wasm32")]
mod objects;
#[cfg(target_arch = "wasm32")]
mod plane;
#[cfg(target_arch = "wasm32")]
mod pull_requests;
#[cfg(target_arch = "wasm32")]
mod ratelimit;
#[cfg(target_arch = "wasm32")]
mod repos;
#[cfg(target_arch = "wasm32")]
mod settings;
#[cfg(target_arch = "wasm32")]
mod signin;
#[cfg(target_arch = "wasm32")]
pub use inspect_durable::SessionDO;

/// The version reported by `/health`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
