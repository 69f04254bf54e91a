//! GitHub as a source and a destination.
//!
//! The pure parts — which branch a pull request uses, what state a PR is in, whether a
//! webhook delivery is genuine and what it asks for, how untrusted text is put into a
//! prompt — are plain functions tested natively. The runtime parts (`client`, `app`) send
//! requests with the Workers runtime's `fetch` and are shared by the Worker and the
//! SessionDO.

pub mod pulls;
pub mod untrusted;
pub mod webhook;

#[cfg(target_arch = "wasm32")]
pub mod api;
#[cfg(target_arch = "wasm32")]
pub mod app;
#[cfg(target_arch = "wasm32")]
pub mod client;

/// A Worker secret or, failing that, a plain variable; empty counts as unset.
#[cfg(target_arch = "wasm32")]
pub fn setting(env: &worker::Env, name: &str) -> Option<String> {
    env.secret(name)
        .map(|s| s.to_string())
        .or_else(|_| env.var(name).map(|v| v.to_string()))
        .ok()
        .filter(|v| !v.is_empty())
}
