//! The SessionDO: one Durable Object per session.
//!
//! The engine (everything but [`shell`]) is plain Rust over the [`store::Store`] trait and
//! knows nothing of workers-rs: it decides, the shell moves bytes. Natively it is tested on
//! rusqlite with the same SQL the object runs.

pub mod engine;
pub mod schema;
pub mod store;

pub mod headers;
#[cfg(target_arch = "wasm32")]
pub mod images;
#[cfg(target_arch = "wasm32")]
pub mod sealed;
#[cfg(all(target_arch = "wasm32", feature = "object"))]
pub mod shell;
#[cfg(all(target_arch = "wasm32", feature = "object"))]
pub use shell::SessionDO;

#[cfg(test)]
pub(crate) mod testing;
