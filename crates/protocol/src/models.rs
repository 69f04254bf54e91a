//! The models a deployment offers its sessions: the catalog `GET /models` answers (each
//! model's provider, context size, the reasoning efforts it accepts, whether it is enabled)
//! and the settings `PUT /settings/models` stores (which are enabled, the default).

use serde::{Deserialize, Serialize};

/// One model of the catalog. `id` is what a session or a prompt names: `provider/model`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub id: String,
    pub provider: String,
    pub label: String,
    /// The context window, in tokens.
    pub context: u32,
    /// Whether the model reasons (it then accepts `efforts`).
    pub reasoning: bool,
    /// The reasoning efforts a prompt may ask of it (the agent's variants of the model).
    pub efforts: Vec<String>,
    /// The effort it runs at when a prompt names none, where the vendor has one.
    pub default_effort: Option<String>,
    /// Whether sessions may use it.
    pub enabled: bool,
}

/// A vendor of models, and whether the deployment can use it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ModelProvider {
    pub id: String,
    pub label: String,
    /// The secret that holds its key (`ANTHROPIC_API_KEY`…); none for the deployment's
    /// OpenAI-compatible server, which its sandboxes are told about.
    pub key_secret: Option<String>,
    /// An opt-in provider's models start disabled when they are listed.
    pub opt_in: bool,
    /// Whether the deployment can reach it: its key is a secret at some scope or carried by
    /// the sandboxes, or a model grant for it is active (always true for the compatible
    /// server). Only a reachable provider's models are listed.
    pub configured: bool,
}

/// `GET /models`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ModelCatalog {
    pub providers: Vec<ModelProvider>,
    pub models: Vec<ModelInfo>,
    /// The deployment's default: what a session that names no model (and whose repository
    /// names none) runs with.
    pub default_model: Option<String>,
}

/// `PUT /settings/models`: the whole choice, replaced at once. `enabled` lists every model
/// sessions may use; `defaultModel` must be one of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelSettings {
    pub enabled: Vec<String>,
    #[serde(default)]
    pub default_model: Option<String>,
}

/// A model credential kept by the control plane and never given to a sandbox (brokered
/// access): an OAuth grant (a refresh token with its token endpoint and client), for one
/// provider, for every session or those of a repository or an environment. The sandbox
/// holds [`managed_marker`] in place of a key; its supervisor asks the control plane for a
/// short-lived access token when the agent calls the model, and puts that in the call.
/// `PUT /model-grants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelGrantRequest {
    /// `anthropic` or `openai`.
    pub provider: String,
    #[serde(default = "all_sessions")]
    pub scope: crate::skills::SkillAssignment,
    /// The OAuth token endpoint (RFC 6749 §6: a form-encoded `refresh_token` grant).
    pub token_url: String,
    pub client_id: String,
    /// Written once, sealed, never answered.
    pub refresh_token: String,
}

fn all_sessions() -> crate::skills::SkillAssignment {
    crate::skills::SkillAssignment::All
}

/// A grant as the API answers it (never a token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ModelGrant {
    pub id: String,
    pub provider: String,
    pub scope: crate::skills::SkillAssignment,
    pub token_url: String,
    pub client_id: String,
    /// `active`, or `revoked` once the provider refused the refresh token.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub status_reason: Option<String>,
    pub updated_at: i64,
    pub updated_by: String,
}

/// `GET /model-grants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ModelGrantList {
    pub grants: Vec<ModelGrant>,
}

/// A grant a session may use, as its sandbox knows it: which, and for which provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ManagedGrant {
    pub id: String,
    pub provider: String,
}

/// `POST /sessions/:id/model-token` (the session's sandbox): a short-lived access token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelTokenRequest {
    pub grant_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelToken {
    pub access_token: String,
    /// When it expires (ms since the epoch).
    pub expires_at: i64,
}

/// What the agent's environment holds in place of a brokered provider's key.
pub fn managed_marker(grant_id: &str) -> String {
    format!("inspect-managed:{grant_id}")
}
