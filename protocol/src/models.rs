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
    /// An opt-in provider's models are listed only once its key is a global secret.
    pub opt_in: bool,
    /// Whether its key is set as a global secret (always true for the compatible server).
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
