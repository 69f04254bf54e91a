//! What the Worker, the SessionDO and the integrations share of the Workers runtime: a
//! setting by name, D1 statements, log lines, JSON answers, the call to the control plane
//! Worker over the binding; and [`plane::ControlPlane`],
//! what an integration may ask of the control plane.

pub mod plane;

#[cfg(target_arch = "wasm32")]
pub mod answer;
#[cfg(target_arch = "wasm32")]
pub mod binding;
#[cfg(target_arch = "wasm32")]
pub mod budgets;
#[cfg(target_arch = "wasm32")]
pub mod d1;
#[cfg(target_arch = "wasm32")]
pub mod form;
#[cfg(target_arch = "wasm32")]
pub mod log;
#[cfg(target_arch = "wasm32")]
pub mod webcrypto;

/// A Worker secret or, failing that, a plain variable; empty counts as unset.
#[cfg(target_arch = "wasm32")]
pub fn setting(env: &worker::Env, name: &str) -> Option<String> {
    env.secret(name)
        .map(|s| s.to_string())
        .or_else(|_| env.var(name).map(|v| v.to_string()))
        .ok()
        .filter(|v| !v.is_empty())
}

/// The origin the caller reached us at (`http://127.0.0.1:8787`), for sandboxes and links.
#[cfg(target_arch = "wasm32")]
pub fn origin_of(req: &worker::Request) -> String {
    req.url()
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default()
}
