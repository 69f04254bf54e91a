//! A repository as a session, an environment or an automation names it.

use serde::{Deserialize, Serialize};

/// A repository the session works on. The first of a session's list is the primary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RepositoryRef {
    pub owner: String,
    pub name: String,
    /// The base branch; the repository's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Where sandboxes clone it from. Set by the control plane from its registry, never
    /// taken from a client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl RepositoryRef {
    /// A repository on this machine (its source a path): no pull-request host, and no git
    /// credentials to broker.
    pub fn is_local(&self) -> bool {
        self.source.as_deref().is_some_and(|s| s.starts_with('/'))
    }
}
