//! Secrets (global, repository and environment scope) and environments, in D1.

use crate::db::{self, num};
use crate::routes::SecretScope;
use inspect_protocol::auth::{
    CreateEnvironment, Environment, EnvironmentList, SecretList, SecretSummary, SetSecrets,
};
use inspect_protocol::session::{Actor, RepositoryRef};
use inspect_protocol::ApiError;
use inspect_secrets::{normalize_name, plan_update, Scope, SealingKey};
use serde::Deserialize;
use std::collections::BTreeMap;
use worker::Env;

/// The sealing key from the Worker secret; a missing or malformed key is a clear error.
pub fn sealing_key(env: &Env) -> Result<SealingKey, ApiError> {
    SealingKey::from_config(db::setting(env, inspect_secrets::KEY_VAR).as_deref())
}

/// The scope a route names, checked to exist.
async fn scope_of(env: &Env, scope: &SecretScope) -> Result<Scope, ApiError> {
    Ok(match scope {
        SecretScope::Global => Scope::Global,
        SecretScope::Repository { owner, name } => {
            if !crate::repos::valid_part(owner) || !crate::repos::valid_part(name) {
                return Err(ApiError::bad_request("invalid repository name"));
            }
            Scope::Repository {
                owner: owner.clone(),
                name: name.clone(),
            }
        }
        SecretScope::Environment { id } => {
            get_environment(env, id).await?;
            Scope::Environment { id: id.clone() }
        }
    })
}

#[derive(Deserialize)]
struct SummaryRow {
    name: String,
    value_bytes: f64,
    created_at: f64,
    updated_at: f64,
    setup_only: f64,
}

async fn rows(env: &Env, scope: &Scope) -> Result<Vec<SummaryRow>, ApiError> {
    let (kind, id) = scope.key();
    db::all(
        env,
        "SELECT name, value_bytes, created_at, updated_at, setup_only FROM secrets WHERE scope = ?1 AND scope_id = ?2 ORDER BY name",
        &[kind.into(), id.into()],
    )
    .await
}

pub async fn list_secrets(env: &Env, scope: &SecretScope) -> Result<SecretList, ApiError> {
    list_secrets_of(env, &scope_of(env, scope).await?).await
}

/// Sets or replaces secrets; all or nothing. Answers with the names only.
pub async fn set_secrets(
    env: &Env,
    scope: &SecretScope,
    body: &[u8],
    now: i64,
) -> Result<SecretList, ApiError> {
    let update: SetSecrets = inspect_protocol::json::from_slice(body).map_err(|e| {
        // serde's message may quote the input; keep values out of the answer.
        ApiError::bad_request(format!(
            "the body must be {{\"secrets\": {{\"NAME\": \"value\", …}}, \"setup\": [\"NAME\", …]}} (error at line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    let key = sealing_key(env)?;
    let scope = scope_of(env, scope).await?;
    let existing: BTreeMap<String, usize> = rows(env, &scope)
        .await?
        .into_iter()
        .map(|r| (r.name, r.value_bytes as usize))
        .collect();
    let planned = plan_update(&existing, &update)?;
    let (kind, id) = scope.key();
    let database = db::database(env)?;
    let mut statements = Vec::with_capacity(planned.len());
    for (name, value, setup) in &planned {
        let sealed = key.seal(db::random::<12>()?, value)?;
        statements.push(
            database
                .prepare(
                    "INSERT INTO secrets (scope, scope_id, name, sealed, value_bytes, created_at, updated_at, setup_only) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)
                     ON CONFLICT(scope, scope_id, name) DO UPDATE SET sealed = excluded.sealed, value_bytes = excluded.value_bytes, updated_at = excluded.updated_at, setup_only = excluded.setup_only",
                )
                .bind(&[
                    kind.into(),
                    id.as_str().into(),
                    name.as_str().into(),
                    sealed.into(),
                    num(value.len() as i64),
                    num(now),
                    num(i64::from(*setup)),
                ])
                .map_err(db::unavailable)?,
        );
    }
    database.batch(statements).await.map_err(db::unavailable)?;
    list_secrets_of(env, &scope).await
}

async fn list_secrets_of(env: &Env, scope: &Scope) -> Result<SecretList, ApiError> {
    Ok(SecretList {
        secrets: rows(env, scope)
            .await?
            .into_iter()
            .map(|r| SecretSummary {
                key: r.name,
                created_at: r.created_at as i64,
                updated_at: r.updated_at as i64,
                setup: r.setup_only > 0.0,
            })
            .collect(),
    })
}

pub async fn delete_secret(env: &Env, scope: &SecretScope, key: &str) -> Result<String, ApiError> {
    let name = normalize_name(key)?;
    let scope = scope_of(env, scope).await?;
    let (kind, id) = scope.key();
    let changed = db::run(
        env,
        "DELETE FROM secrets WHERE scope = ?1 AND scope_id = ?2 AND name = ?3",
        &[kind.into(), id.into(), name.as_str().into()],
    )
    .await?;
    if changed == 0 {
        return Err(ApiError::not_found(format!("no secret {name} here")));
    }
    Ok(name)
}

#[derive(Deserialize)]
struct EnvironmentRow {
    id: String,
    name: String,
    repositories: String,
    created_by: String,
    created_at: f64,
    description: Option<String>,
    updated_at: f64,
    default_model: Option<String>,
    egress: Option<String>,
}

impl From<EnvironmentRow> for Environment {
    fn from(r: EnvironmentRow) -> Self {
        Environment {
            id: r.id,
            name: r.name,
            repositories: serde_json::from_str(&r.repositories).unwrap_or_default(),
            created_by: r.created_by,
            created_at: r.created_at as i64,
            description: r.description,
            updated_at: r.updated_at as i64,
            default_model: r.default_model,
            egress: r.egress.and_then(|e| serde_json::from_str(&e).ok()),
        }
    }
}

const ENVIRONMENT_COLUMNS: &str =
    "id, name, repositories, created_by, created_at, description, updated_at, default_model, egress";

pub async fn list_environments(env: &Env) -> Result<EnvironmentList, ApiError> {
    let rows: Vec<EnvironmentRow> = db::all(
        env,
        &format!("SELECT {ENVIRONMENT_COLUMNS} FROM environments ORDER BY name"),
        &[],
    )
    .await?;
    Ok(EnvironmentList {
        environments: rows.into_iter().map(Into::into).collect(),
    })
}

pub async fn get_environment(env: &Env, id: &str) -> Result<Environment, ApiError> {
    let row: Option<EnvironmentRow> = db::first(
        env,
        &format!("SELECT {ENVIRONMENT_COLUMNS} FROM environments WHERE id = ?1"),
        &[id.into()],
    )
    .await?;
    row.map(Into::into)
        .ok_or_else(|| ApiError::not_found(format!("no environment {id}")))
}

/// An environment as it is saved: its fields checked and the repositories as JSON.
struct CheckedEnvironment {
    name: String,
    description: Option<String>,
    repositories: String,
    default_model: Option<String>,
    /// The egress policy as JSON (`None`: open).
    egress: Option<String>,
}

/// An environment's name, description, repositories and egress policy, checked; the
/// repositories must be ones sessions can use (their clone sources are looked up again at
/// each session).
async fn checked_environment(env: &Env, body: &[u8]) -> Result<CheckedEnvironment, ApiError> {
    let req: CreateEnvironment = crate::http::body_as(body)?;
    // `open` with an allow-list is refused, not silently dropped; `open` is kept as none.
    if let Some(policy) = &req.egress {
        policy
            .check()
            .map_err(|e| ApiError::bad_request(format!("egress: {e}")))?;
    }
    let egress = match req.egress.filter(|p| p.confines()) {
        Some(policy) => {
            Some(serde_json::to_string(&policy).map_err(|e| ApiError::internal(e.to_string()))?)
        }
        None => None,
    };
    let default_model = req.default_model.filter(|m| !m.trim().is_empty());
    if let Some(model) = &default_model {
        let models = inspect_models::store::catalog(env).await?;
        inspect_models::check_model(&models, model)
            .map_err(|e| ApiError::bad_request(format!("defaultModel: {e}")))?;
    }
    let name = req.name.trim().to_owned();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "an environment's name is 1-100 characters",
        ));
    }
    let description = req
        .description
        .map(|d| d.trim().to_owned())
        .filter(|d| !d.is_empty());
    if description
        .as_ref()
        .is_some_and(|d| d.chars().count() > 1000)
    {
        return Err(ApiError::bad_request(
            "an environment's description is at most 1000 characters",
        ));
    }
    let mut repositories: Vec<RepositoryRef> = req.repositories;
    if repositories.is_empty()
        || repositories.len() > inspect_protocol::limits::MAX_SESSION_REPOSITORIES
    {
        return Err(ApiError::bad_request(format!(
            "an environment holds 1-{} repositories",
            inspect_protocol::limits::MAX_SESSION_REPOSITORIES
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for r in &repositories {
        if !seen.insert(format!("{}/{}", r.owner, r.name).to_ascii_lowercase()) {
            return Err(ApiError::bad_request(format!(
                "{}/{} is in the environment twice",
                r.owner, r.name
            )));
        }
        if let Some(b) = &r.branch {
            inspect_protocol::limits::check_branch(b).map_err(ApiError::bad_request)?;
        }
    }
    crate::repos::resolve(env, &mut repositories).await?;
    // Sources are looked up again when a session starts; keep only the names.
    for r in repositories.iter_mut() {
        r.source = None;
    }
    let json =
        serde_json::to_string(&repositories).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(CheckedEnvironment {
        name,
        description,
        repositories: json,
        default_model,
        egress,
    })
}

pub async fn create_environment(
    env: &Env,
    actor: &Actor,
    body: &[u8],
    now: i64,
) -> Result<Environment, ApiError> {
    let c = checked_environment(env, body).await?;
    let id = format!("env_{}", hex::encode(db::random::<8>()?));
    db::run(
        env,
        "INSERT INTO environments (id, name, repositories, created_by, created_at, updated_at, description, default_model, egress) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8)",
        &[
            id.as_str().into(),
            c.name.as_str().into(),
            c.repositories.into(),
            actor.user_id.as_str().into(),
            num(now),
            db::opt(c.description.as_deref()),
            db::opt(c.default_model.as_deref()),
            db::opt(c.egress.as_deref()),
        ],
    )
    .await?;
    get_environment(env, &id).await
}

/// `PUT /environments/:id`: a new name, description and repositories. Sessions made from
/// it before keep what they had.
pub async fn update_environment(
    env: &Env,
    id: &str,
    body: &[u8],
    now: i64,
) -> Result<Environment, ApiError> {
    get_environment(env, id).await?;
    let c = checked_environment(env, body).await?;
    db::run(
        env,
        "UPDATE environments SET name = ?2, description = ?3, repositories = ?4, updated_at = ?5, default_model = ?6, egress = ?7 WHERE id = ?1",
        &[
            id.into(),
            c.name.as_str().into(),
            db::opt(c.description.as_deref()),
            c.repositories.into(),
            num(now),
            db::opt(c.default_model.as_deref()),
            db::opt(c.egress.as_deref()),
        ],
    )
    .await?;
    get_environment(env, id).await
}

pub async fn delete_environment(env: &Env, id: &str) -> Result<(), ApiError> {
    get_environment(env, id).await?;
    let database = db::database(env)?;
    let a = database
        .prepare("DELETE FROM secrets WHERE scope = 'environment' AND scope_id = ?1")
        .bind(&[id.into()])
        .map_err(db::unavailable)?;
    let b = database
        .prepare("DELETE FROM environments WHERE id = ?1")
        .bind(&[id.into()])
        .map_err(db::unavailable)?;
    database.batch(vec![a, b]).await.map_err(db::unavailable)?;
    Ok(())
}
