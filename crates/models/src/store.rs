//! The catalog as a deployment has it: its settings row (`migrations/0013_models.sql`), the
//! names of its secrets at any scope (never their values), the keys its sandboxes carry
//! (`SANDBOX_MODEL_KEYS`), the providers of its active grants, and its settings.

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

#[derive(Deserialize)]
struct ProviderRow {
    provider: String,
}

/// The model keys every sandbox holds without a secret (`SANDBOX_MODEL_KEYS`: names,
/// comma-separated; the local run command names those in its own environment, which the
/// local sandbox host passes on).
pub fn sandbox_keys(env: &Env) -> Vec<String> {
    setting(env, "SANDBOX_MODEL_KEYS")
        .unwrap_or_default()
        .split(',')
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty())
        .collect()
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
    let (names, granted) = futures::join!(
        all::<NameRow>(env, "SELECT DISTINCT name FROM secrets", &[]),
        all::<ProviderRow>(
            env,
            "SELECT DISTINCT provider FROM model_grants WHERE status = 'active'",
            &[],
        ),
    );
    let mut names: Vec<String> = names?.into_iter().map(|n| n.name).collect();
    names.extend(sandbox_keys(env));
    let granted: Vec<String> = granted?.into_iter().map(|g| g.provider).collect();
    let (compatible, default_model) = (
        setting(env, "COMPATIBLE_MODELS"),
        setting(env, "DEFAULT_MODEL"),
    );
    Ok(crate::catalog(&Inputs {
        settings: stored.as_ref(),
        secret_names: &names,
        grant_providers: &granted,
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
