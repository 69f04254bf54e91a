//! The provider the settings choose (`SANDBOX_PROVIDER`), for the SessionDO and the Worker
//! alike: the settings reader ([`setup`], pure) and, in wasm, [`AnyProvider`]. One enum
//! rather than a trait object: the trait's methods are async.

pub mod setup;

pub use setup::{provider_setup, ProviderSetup};

#[cfg(target_arch = "wasm32")]
mod any;
#[cfg(target_arch = "wasm32")]
pub use any::{answer, AnyProvider};
