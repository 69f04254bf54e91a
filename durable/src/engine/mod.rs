//! The session engine: every decision of the SessionDO as plain functions over a [`Store`].
//!
//! Each public operation is one synchronous unit of storage work (atomic in both the DO
//! and the native store) that returns [`Effects`] for the shell to carry out.

pub mod attachments;
pub mod attention;
pub mod changes;
pub mod children;
pub mod deadlines;
pub mod editor;
pub mod effects;
pub mod ids;
pub mod ingest;
pub mod media;
pub mod people;
pub mod plan;
pub mod pulls;
pub mod queue;
pub mod reviews;
pub mod sandbox;
pub mod sockets;
pub mod staged;
pub mod state;
pub mod terminals;
pub mod timeline;
pub mod usage;

pub use effects::{Effects, Outbound, Target};

use crate::store::Store;
use inspect_protocol::ApiError;

/// One session's engine over its storage.
pub struct Session<'a, S: Store> {
    pub store: &'a S,
    /// The deployment's models, when the shell has them: a prompt's model and effort are
    /// then checked against them.
    pub models: Option<&'a inspect_protocol::models::ModelCatalog>,
}

impl<'a, S: Store> Session<'a, S> {
    pub fn new(store: &'a S) -> Self {
        Session {
            store,
            models: None,
        }
    }

    /// The same session, checking prompts against the deployment's models.
    pub fn with_models(self, models: Option<&'a inspect_protocol::models::ModelCatalog>) -> Self {
        Session { models, ..self }
    }
}

/// A storage fault seen from a caller: an internal error.
pub(crate) fn internal(e: crate::store::StoreError) -> ApiError {
    ApiError::internal(e.to_string())
}

pub type EngineResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests;
