//! The catalog as a deployment has it: its settings row (`migrations/0013_models.sql`), the
//! names of its global secrets (never their values) and its settings.

use crate::Inputs;
use inspect_protocol::models::{ModelCatalog, ModelSettings};
use inspect_protocol::ApiError;
use inspect_runtime::d1::{all, first, num, run};
use inspect_runtime::setting;
use serde::Deserialize;
use worker::Env;

#[derive(Deserialize)]
struct SettingsRow {
    settings: String,
}

#[derive(Deserialize)]
struct NameRow {
    name: String,
}

/// The stored settings, if anyone saved some.
pub async fn settings(env: &Env) -> Result<Option<ModelSettings>, ApiError> {
    let row: Option<SettingsRow> = first(
        env,
        "SELECT settings FROM model_settings WHERE id = 'deployment'",
        &[],
    )
    .await?;
    row.map(|r| serde_json::from_str(&r.settings).map_err(|e| ApiError::internal(e.to_string())))
        .transpose()
}

/// The catalog now.
pub async fn catalog(env: &Env) -> Result<ModelCatalog, ApiError> {
    let stored = settings(env).await?;
    let names: Vec<NameRow> = all(
        env,
        "SELECT name FROM secrets WHERE scope = 'global' AND scope_id = ''",
        &[],
    )
    .await?;
    let names: Vec<String> = names.into_iter().map(|n| n.name).collect();
    let (compatible, default_model) = (
        setting(env, "COMPATIBLE_MODELS"),
        setting(env, "DEFAULT_MODEL"),
    );
    Ok(crate::catalog(&Inputs {
        settings: stored.as_ref(),
        secret_names: &names,
        compatible: compatible.as_deref(),
        default_model: default_model.as_deref(),
    }))
}

/// Checks and stores new settings; the catalog they make.
pub async fn save(
    env: &Env,
    new: &ModelSettings,
    by: &str,
    now_ms: i64,
) -> Result<ModelCatalog, ApiError> {
    let current = catalog(env).await?;
    crate::check_settings(&current, new).map_err(ApiError::bad_request)?;
    let json = serde_json::to_string(new).map_err(|e| ApiError::internal(e.to_string()))?;
    run(
        env,
        "INSERT INTO model_settings (id, settings, updated_by, updated_at) VALUES ('deployment', ?1, ?2, ?3) \
         ON CONFLICT (id) DO UPDATE SET settings = excluded.settings, updated_by = excluded.updated_by, updated_at = excluded.updated_at",
        &[json.into(), by.into(), num(now_ms)],
    )
    .await?;
    catalog(env).await
}
