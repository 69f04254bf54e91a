//! Wire types of sign-in, personal API tokens, secrets, environments and brokered git
//! credentials.

use crate::session::{Actor, RepositoryRef};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A service client's name (`sig1`).
pub const SERVICE_HEADER: &str = "X-OpenInspect-Service";
/// `sig1.<timestampMs>.<nonce hex>.<hmac hex>`.
pub const SIGNATURE_HEADER: &str = "X-OpenInspect-Service-Signature";
/// Whom a service acts for (`slack:U123`), or in local mode which local person.
pub const ACTOR_HEADER: &str = "X-OpenInspect-Actor";
/// Beside a sandbox's bearer token: which sandbox it claims to be.
pub const SANDBOX_ID_HEADER: &str = "X-Sandbox-ID";

/// `GET /auth/me`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Me {
    pub user: Actor,
    /// `local`, `browser`, `api_token` or `service`.
    pub via: String,
    /// What they may change (`admin`: what the deployment shares too).
    pub role: crate::people::Role,
}

/// `POST /tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateApiToken {
    pub name: String,
}

/// The answer to `POST /tokens`: the only time the token itself is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct CreatedApiToken {
    pub id: String,
    pub name: String,
    pub token: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ApiTokenSummary {
    pub id: String,
    pub name: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ApiTokenList {
    pub tokens: Vec<ApiTokenSummary>,
}

/// `GET …/secrets`: names and dates, never values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SecretSummary {
    pub key: String,
    pub created_at: i64,
    pub updated_at: i64,
    /// Given to the repository's set-up and start hooks only, never to the agent or the
    /// terminals.
    #[serde(default)]
    pub setup: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct SecretList {
    pub secrets: Vec<SecretSummary>,
}

/// `PUT …/secrets`: names to values, set or replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct SetSecrets {
    pub secrets: BTreeMap<String, String>,
    /// Which of `secrets` are for set-up only (the hooks); the others reach the agent too.
    #[serde(default)]
    pub setup: Vec<String>,
}

/// `POST /environments`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateEnvironment {
    pub name: String,
    pub repositories: Vec<RepositoryRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The model its sessions use when they name none (one of the catalog's enabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// Where its sessions' sandboxes may send traffic (none: open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub egress: Option<crate::egress::EgressPolicy>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    pub id: String,
    pub name: String,
    pub repositories: Vec<RepositoryRef>,
    pub created_by: String,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub egress: Option<crate::egress::EgressPolicy>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct EnvironmentList {
    pub environments: Vec<Environment>,
}

/// A session's object vouching for its sandbox before the Worker mints git credentials:
/// the repositories (names in the GitHub App installation's account) the token is narrowed
/// to. Between the Worker and the object only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScmScope {
    pub repositories: Vec<String>,
}

/// `POST /sessions/:id/scm-credentials`'s body (sandbox token only; an empty body is the
/// same as `{}`). `refused`: the password git was just refused with (git's credential
/// `erase`), so a token GitHub revoked before it expired is not handed out again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScmCredentialsRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// `POST /sessions/:id/scm-credentials` (sandbox token only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ScmCredentials {
    pub username: String,
    pub password: String,
    pub expires_at_epoch_ms: i64,
}

impl std::fmt::Display for ScmCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        write!(
            f,
            "credentials for {} (expire {})",
            self.username, self.expires_at_epoch_ms
        )
    }
}
