//! GitHub as a source and a destination.
//!
//! The pure parts — which branch a pull request uses, what state a PR is in, whether a
//! webhook delivery is genuine and what it asks for, how untrusted text is put into a
//! prompt, which lines a review's comment may sit on — are plain functions tested natively. The runtime parts (`client`, `app`,
//! `api`) send requests with the Workers runtime's `fetch` and are shared by the Worker and
//! the SessionDO; `bot` is the webhook's handler the Worker dispatches to, `installation`
//! the App's repositories kept in D1, `publish` a session's pull request and reports.

pub mod events;
pub mod pem;
pub mod pulls;
pub mod review;
pub mod signing;
pub mod tokens;
pub mod untrusted;
pub mod webhook;

#[cfg(target_arch = "wasm32")]
pub mod api;
#[cfg(target_arch = "wasm32")]
pub mod app;
#[cfg(target_arch = "wasm32")]
pub mod bot;
#[cfg(target_arch = "wasm32")]
pub mod client;
#[cfg(target_arch = "wasm32")]
pub mod installation;
#[cfg(target_arch = "wasm32")]
pub mod publish;
#[cfg(target_arch = "wasm32")]
pub mod rest;
#[cfg(target_arch = "wasm32")]
pub mod sign;
#[cfg(target_arch = "wasm32")]
pub mod submit;
