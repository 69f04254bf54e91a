//! Automations: sessions that start themselves, on a schedule or from an inbound webhook.
//!
//! The rules are pure and tested natively: when a schedule fires ([`schedule`], a 5-field
//! cron read in an IANA time zone by `croner`; the zone from the platform, [`zone`]), which events a webhook's
//! conditions admit ([`conditions`]), which Slack messages a channel trigger takes
//! ([`slack`], patterns read by `regex-lite`), which GitHub deliveries a GitHub trigger takes
//! ([`github`], globs read by `glob`), what may be saved, how a run ends and what its
//! sessions are asked ([`rules`]). [`store`] (wasm) keeps automations and their runs in D1
//! and records a session's outcome on its run; the Worker's routes and cron step are in
//! `worker/src/automations.rs`.

pub mod conditions;
pub mod github;
pub mod linear;
pub mod rules;
pub mod schedule;
pub mod sentry;
pub mod slack;
pub mod zone;

#[cfg(target_arch = "wasm32")]
pub mod store;

/// A refusal of what was asked to be saved, in words (a 400).
pub(crate) fn bad(message: impl Into<String>) -> inspect_protocol::ApiError {
    inspect_protocol::ApiError::bad_request(message)
}
