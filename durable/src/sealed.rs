//! Secrets as they flow into a sandbox (a session's, or an image build's): read from D1
//! and opened with the secrets key, by [`inspect_secrets::flowing_scopes`]'s rule (an
//! environment: global + the environment's; otherwise global + each repository's, the
//! primary winning).

use inspect_protocol::ApiError;
use serde::Deserialize;
use worker::Env;

/// The condition and arguments that select the secrets of `scopes` (global always).
fn scopes_where(scopes: &[inspect_secrets::Scope]) -> (String, Vec<wasm_bindgen::JsValue>) {
    let mut sql = String::from("scope = 'global'");
    let mut args: Vec<wasm_bindgen::JsValue> = Vec::new();
    for scope in scopes {
        let (kind, id) = scope.key();
        if kind == "global" {
            continue;
        }
        sql.push_str(&format!(
            " OR (scope = ?{} AND scope_id = ?{})",
            args.len() + 1,
            args.len() + 2
        ));
        args.push(kind.into());
        args.push(id.as_str().into());
    }
    (sql, args)
}

/// The names (never the values) of the secrets that would flow into such a sandbox.
pub async fn secret_names(
    env: &Env,
    environment_id: Option<&str>,
    repositories: &[(String, String)],
) -> Result<Vec<String>, ApiError> {
    let scopes = inspect_secrets::flowing_scopes(environment_id, repositories);
    let (condition, args) = scopes_where(&scopes);
    #[derive(Deserialize)]
    struct Row {
        name: String,
    }
    let sql = format!("SELECT DISTINCT name FROM secrets WHERE {condition}");
    let rows: Vec<Row> = inspect_runtime::d1::all(env, &sql, &args)
        .await
        .map_err(|e| ApiError::new(e.code, format!("reading secrets: {}", e.message)))?;
    Ok(rows.into_iter().map(|r| r.name).collect())
}

/// The secrets such a sandbox gets, opened: the environment's, and the set-up-only ones.
pub async fn open_secrets(
    env: &Env,
    environment_id: Option<&str>,
    repositories: &[(String, String)],
) -> Result<inspect_secrets::Layered, ApiError> {
    let Some(read) = SecretsRead::new(env, environment_id, repositories)? else {
        return Ok(Default::default());
    };
    let rows = inspect_runtime::d1::all(env, &read.sql, &read.args).await;
    read.open(rows)
}

/// The read of the secrets a sandbox gets, made ready (for [`open_secrets`] or a batch),
/// and the opening of the rows it returns.
pub struct SecretsRead {
    key: inspect_secrets::SealingKey,
    repo_ids: Vec<String>,
    pub sql: String,
    pub args: Vec<wasm_bindgen::JsValue>,
}

/// A row of [`SecretsRead`]'s statement.
#[derive(Deserialize)]
pub struct SecretRow {
    scope: String,
    scope_id: String,
    name: String,
    sealed: String,
    setup_only: f64,
}

impl SecretsRead {
    /// The read for a session's environment and repositories; `None` without a sealing key
    /// (nothing can have been stored).
    pub fn new(
        env: &Env,
        environment_id: Option<&str>,
        repositories: &[(String, String)],
    ) -> Result<Option<Self>, ApiError> {
        let Some(key) = inspect_runtime::setting(env, inspect_secrets::KEY_VAR) else {
            return Ok(None);
        };
        let key = inspect_secrets::SealingKey::from_config(Some(&key))?;
        let scopes = inspect_secrets::flowing_scopes(environment_id, repositories);
        let repo_ids: Vec<String> = scopes
            .iter()
            .filter(|s| matches!(s, inspect_secrets::Scope::Repository { .. }))
            .map(|s| s.key().1)
            .collect();
        let (condition, args) = scopes_where(&scopes);
        let sql = format!(
            "SELECT scope, scope_id, name, sealed, setup_only FROM secrets WHERE {condition}"
        );
        Ok(Some(SecretsRead {
            key,
            repo_ids,
            sql,
            args,
        }))
    }

    /// The rows read, layered and opened.
    pub fn open(
        &self,
        rows: Result<Vec<SecretRow>, ApiError>,
    ) -> Result<inspect_secrets::Layered, ApiError> {
        let rows =
            rows.map_err(|e| ApiError::new(e.code, format!("reading secrets: {}", e.message)))?;
        let stored: Vec<inspect_secrets::StoredSecret> = rows
            .into_iter()
            .map(|r| inspect_secrets::StoredSecret {
                order: self
                    .repo_ids
                    .iter()
                    .position(|id| *id == r.scope_id)
                    .unwrap_or(0),
                scope: r.scope,
                name: r.name,
                sealed: r.sealed,
                setup: r.setup_only > 0.0,
            })
            .collect();
        inspect_secrets::layer(&self.key, &stored)
    }
}
