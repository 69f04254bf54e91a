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

/// Where this control plane is reached, for sandboxes and links: `PUBLIC_URL` when it is
/// set (a Worker behind a proxy that ends TLS sees its requests as `http://`), else the
/// origin the caller reached us at (`http://127.0.0.1:8787`).
#[cfg(target_arch = "wasm32")]
pub fn origin_of(env: &worker::Env, req: &worker::Request) -> String {
    if let Some(public) = setting(env, "PUBLIC_URL") {
        if let Ok(u) = worker::Url::parse(&public) {
            return u.origin().ascii_serialization();
        }
    }
    req.url()
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default()
}
