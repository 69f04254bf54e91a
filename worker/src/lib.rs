//! The Cloudflare Workers: routes every request, checks who is calling, keeps the D1 index
//! and hands each session's traffic to its SessionDO.
//!
//! One crate, two scripts, chosen by a feature when the wasm is built: `session` (the front
//! door: the SessionDO, re-exported here so the runtime finds the class, a session's own
//! routes and sockets, and the web app; [`front`]) and `plane` (the control plane: bots,
//! automations, sign-in, settings, catalogs, crons; `entry`), bound by a service binding.
//! Each build links only what its entry reaches. [`routes`] is pure and tested natively;
//! the runtime shell is wasm-only.

// A build of one script leaves the other's handlers unreached; the lint runs with both
// features on, where every one is reached.
#![cfg_attr(
    all(
        target_arch = "wasm32",
        not(all(feature = "session", feature = "plane"))
    ),
    allow(dead_code, unused_imports)
)]

pub mod auth;
pub mod listing;
pub mod lookups;
pub mod routes;
pub mod usage_query;
pub mod webpush;

#[cfg(target_arch = "wasm32")]
mod api_tokens;
#[cfg(target_arch = "wasm32")]
mod automations;
#[cfg(target_arch = "wasm32")]
mod budgets;
#[cfg(target_arch = "wasm32")]
mod caller;
#[cfg(target_arch = "wasm32")]
mod children;
#[cfg(all(target_arch = "wasm32", feature = "plane"))]
mod crons;
#[cfg(target_arch = "wasm32")]
mod db;
#[cfg(all(target_arch = "wasm32", feature = "plane"))]
mod entry;
#[cfg(all(target_arch = "wasm32", feature = "session"))]
mod front;
#[cfg(target_arch = "wasm32")]
mod google;
#[cfg(target_arch = "wasm32")]
mod health;
#[cfg(target_arch = "wasm32")]
mod http;
#[cfg(target_arch = "wasm32")]
mod images;
#[cfg(target_arch = "wasm32")]
mod inbox;
#[cfg(all(target_arch = "wasm32", feature = "plane"))]
mod inbox_object;
#[cfg(target_arch = "wasm32")]
mod index;
#[cfg(all(target_arch = "wasm32", feature = "plane"))]
mod internal;
#[cfg(target_arch = "wasm32")]
mod linked;
#[cfg(target_arch = "wasm32")]
mod objects;
#[cfg(target_arch = "wasm32")]
mod people;
#[cfg(target_arch = "wasm32")]
mod plane;
#[cfg(target_arch = "wasm32")]
mod pull_requests;
#[cfg(target_arch = "wasm32")]
mod push;
#[cfg(target_arch = "wasm32")]
mod ratelimit;
#[cfg(target_arch = "wasm32")]
mod repos;
#[cfg(target_arch = "wasm32")]
mod settings;
#[cfg(target_arch = "wasm32")]
mod signin;
#[cfg(target_arch = "wasm32")]
mod usage;
#[cfg(all(target_arch = "wasm32", feature = "session"))]
pub use inspect_durable::SessionDO;

/// Both scripts set the panic hook when their isolate starts.
#[cfg(target_arch = "wasm32")]
#[worker::event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// The version reported by `/health`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
