//! Who is calling. Pure parts (tested natively): local mode, `sig1` service signatures,
//! tokens and cookies, the sign-in allow-lists. The runtime side lives in `caller`
//! (wasm-only), which tries, in order: a service signature, a personal API token, the
//! browser session cookie, local mode.

pub mod admission;
pub mod links;
pub mod local;
pub mod oidc;
pub mod origin;
pub mod roles;
pub mod session_ids;
pub mod sig1;
pub mod tokens;

pub use local::{is_loopback_host, CallerFacts, FORWARDING_HEADERS};
