//! Every message that crosses a process boundary is defined here, once: REST bodies, the
//! client WebSocket, the sandbox WebSocket, limits, timeouts and close codes.
//!
//! No I/O. Compiles for wasm32 and native, so the Worker, the Durable Object, the
//! supervisor and the test clients all speak through the same types. Field names are
//! camelCase and message `type` strings keep the original system's names, so its clients
//! can talk to this control plane.

pub mod agent;
pub mod auth;
pub mod automations;
pub mod budgets;
pub mod changes;
pub mod client;
pub mod desktop;
pub mod editor;
pub mod egress;
pub mod error;
pub mod health;
pub mod images;
pub mod inbox;
pub mod json;
pub mod limits;
pub mod linear;
pub mod log;
pub mod mcp;
pub mod media;
pub mod models;
pub mod people;
pub mod plane;
pub mod provider;
pub mod providers;
pub mod repository;
pub mod sandbox;
pub mod scm;
pub mod session;
pub mod skills;
pub mod slack;
pub mod terminal;
pub mod usage;
pub mod vendor;

pub use error::{ApiError, ErrorBody, ErrorCode};
