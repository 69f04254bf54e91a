//! Brokered model grants in D1 (`migrations/0018_model_grants.sql`): stored sealed, listed
//! without their tokens, chosen for a session, and turned into a short-lived access token
//! for a session's sandbox — the held one while it is good, else a refresh at the grant's
//! token endpoint, its rotated refresh token written back in place (only over the one it
//! replaced: a refresh racing another keeps the other's), a refused one marking the grant
//! revoked.

use crate::grants::{self, Outcome};
use inspect_protocol::models::{ManagedGrant, ModelGrant, ModelGrantRequest, ModelToken};
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::d1::{all, first, num, run};
use inspect_runtime::setting;
use serde::Deserialize;
use worker::Env;

fn key(env: &Env) -> Result<inspect_secrets::SealingKey, ApiError> {
    inspect_secrets::SealingKey::from_config(setting(env, inspect_secrets::KEY_VAR).as_deref())
}

fn seal(key: &inspect_secrets::SealingKey, value: &str) -> Result<String, ApiError> {
    let mut iv = [0u8; 12];
    getrandom::fill(&mut iv).map_err(|e| ApiError::internal(e.to_string()))?;
    key.seal(iv, value)
}

#[derive(Deserialize)]
struct Row {
    id: String,
    provider: String,
    scope_kind: String,
    scope_id: String,
    token_url: String,
    client_id: String,
    status: String,
    status_reason: Option<String>,
    updated_at: f64,
    updated_by: String,
}

impl Row {
    fn shown(self) -> ModelGrant {
        ModelGrant {
            id: self.id,
            provider: self.provider,
            scope: grants::scope_of(&self.scope_kind, &self.scope_id),
            token_url: self.token_url,
            client_id: self.client_id,
            status: self.status,
            status_reason: self.status_reason,
            updated_at: self.updated_at as i64,
            updated_by: self.updated_by,
        }
    }
}

const COLUMNS: &str = "id, provider, scope_kind, scope_id, token_url, client_id, status, status_reason, updated_at, updated_by";

pub async fn list(env: &Env) -> Result<Vec<ModelGrant>, ApiError> {
    let rows: Vec<Row> = all(
        env,
        &format!("SELECT {COLUMNS} FROM model_grants ORDER BY provider, scope_kind, scope_id"),
        &[],
    )
    .await?;
    Ok(rows.into_iter().map(Row::shown).collect())
}

/// Stores a grant (replacing the one of the same provider and scope), sealed.
pub async fn put(
    env: &Env,
    req: ModelGrantRequest,
    by: &str,
    now: i64,
) -> Result<ModelGrant, ApiError> {
    let req = grants::check(req).map_err(ApiError::bad_request)?;
    let key = key(env)?;
    let (kind, scope_id) = grants::scope_key(&req.scope);
    let mut id = [0u8; 12];
    getrandom::fill(&mut id).map_err(|e| ApiError::internal(e.to_string()))?;
    let id = format!("grant_{}", hex_of(&id));
    run(
        env,
        "INSERT INTO model_grants (id, provider, scope_kind, scope_id, token_url, client_id, refresh_sealed, status, updated_at, updated_by)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'active', ?8, ?9)
         ON CONFLICT(provider, scope_kind, scope_id) DO UPDATE SET token_url = ?5, client_id = ?6, refresh_sealed = ?7,
           access_sealed = NULL, access_expires_at = NULL, status = 'active', status_reason = NULL, updated_at = ?8, updated_by = ?9",
        &[
            id.as_str().into(),
            req.provider.as_str().into(),
            kind.into(),
            scope_id.as_str().into(),
            req.token_url.as_str().into(),
            req.client_id.as_str().into(),
            seal(&key, &req.refresh_token)?.into(),
            num(now),
            by.into(),
        ],
    )
    .await?;
    let row: Option<Row> = first(
        env,
        &format!("SELECT {COLUMNS} FROM model_grants WHERE provider = ?1 AND scope_kind = ?2 AND scope_id = ?3"),
        &[req.provider.as_str().into(), kind.into(), scope_id.as_str().into()],
    )
    .await?;
    row.map(Row::shown)
        .ok_or_else(|| ApiError::internal("the grant was not kept"))
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub async fn delete(env: &Env, id: &str) -> Result<(), ApiError> {
    let n = run(env, "DELETE FROM model_grants WHERE id = ?1", &[id.into()]).await?;
    if n == 0 {
        return Err(ApiError::not_found(format!("no grant {id}")));
    }
    Ok(())
}

/// The active grants a session uses, one per provider (the narrowest scope).
pub async fn for_session(
    env: &Env,
    repositories: &[(String, String)],
    environment: Option<&str>,
) -> Result<Vec<ManagedGrant>, ApiError> {
    let rows: Vec<Row> = all(
        env,
        &format!("SELECT {COLUMNS} FROM model_grants WHERE status = 'active'"),
        &[],
    )
    .await?;
    let grants: Vec<(String, String, inspect_protocol::skills::SkillAssignment)> = rows
        .into_iter()
        .map(|r| {
            (
                r.id,
                r.provider,
                grants::scope_of(&r.scope_kind, &r.scope_id),
            )
        })
        .collect();
    Ok(grants::applicable(&grants, repositories, environment)
        .into_iter()
        .map(|(id, provider)| ManagedGrant {
            id: id.to_owned(),
            provider: provider.to_owned(),
        })
        .collect())
}

#[derive(Deserialize)]
struct Held {
    token_url: String,
    client_id: String,
    refresh_sealed: String,
    access_sealed: Option<String>,
    access_expires_at: Option<f64>,
    status: String,
}

/// A short-lived access token of grant `id`: 410 once the grant is revoked (with why).
pub async fn access_token(env: &Env, id: &str, now: i64) -> Result<ModelToken, ApiError> {
    let key = key(env)?;
    for _ in 0..2 {
        let held: Option<Held> = first(
            env,
            "SELECT token_url, client_id, refresh_sealed, access_sealed, access_expires_at, status FROM model_grants WHERE id = ?1",
            &[id.into()],
        )
        .await?;
        let Some(held) = held else {
            return Err(ApiError::not_found("the grant is gone"));
        };
        if held.status != "active" {
            return Err(ApiError::new(
                ErrorCode::Gone,
                "the grant was revoked: reconnect it in Settings",
            ));
        }
        if let (Some(sealed), Some(at)) = (&held.access_sealed, held.access_expires_at) {
            if !grants::must_renew(at as i64, now) {
                return Ok(ModelToken {
                    access_token: key.open(sealed)?,
                    expires_at: at as i64,
                });
            }
        }
        let refresh = key.open(&held.refresh_sealed)?;
        let (status, body) = post_form(
            &held.token_url,
            &grants::refresh_form(&held.client_id, &refresh),
        )
        .await?;
        match grants::read_refresh(status, &body, now) {
            Outcome::Fresh {
                access,
                rotated,
                expires_at,
            } => {
                let new_refresh = match &rotated {
                    Some(r) => seal(&key, r)?,
                    None => held.refresh_sealed.clone(),
                };
                // Only over the refresh token this used: a racing refresh that rotated it
                // first keeps its own.
                run(
                    env,
                    "UPDATE model_grants SET refresh_sealed = ?2, access_sealed = ?3, access_expires_at = ?4 WHERE id = ?1 AND refresh_sealed = ?5",
                    &[
                        id.into(),
                        new_refresh.into(),
                        seal(&key, &access)?.into(),
                        num(expires_at),
                        held.refresh_sealed.as_str().into(),
                    ],
                )
                .await?;
                return Ok(ModelToken {
                    access_token: access,
                    expires_at,
                });
            }
            Outcome::Revoked(why) => {
                // Another refresh may have rotated the token meanwhile: then this one was
                // only late, and the next round reads the other's.
                let changed = run(
                    env,
                    "UPDATE model_grants SET status = 'revoked', status_reason = ?2, access_sealed = NULL, access_expires_at = NULL WHERE id = ?1 AND refresh_sealed = ?3",
                    &[id.into(), why.as_str().into(), held.refresh_sealed.as_str().into()],
                )
                .await?;
                if changed > 0 {
                    return Err(ApiError::new(
                        ErrorCode::Gone,
                        format!("the grant was revoked: {why}; reconnect it in Settings"),
                    ));
                }
            }
            Outcome::Failed(why) => return Err(ApiError::new(ErrorCode::Unavailable, why)),
        }
    }
    Err(ApiError::new(
        ErrorCode::Unavailable,
        "the grant changed twice while it was refreshed",
    ))
}

async fn post_form(url: &str, form: &str) -> Result<(u16, String), ApiError> {
    let headers = worker::Headers::new();
    let fail = |e: worker::Error| {
        ApiError::new(ErrorCode::Unavailable, format!("the token endpoint: {e}"))
    };
    headers
        .set("Content-Type", "application/x-www-form-urlencoded")
        .map_err(fail)?;
    headers.set("Accept", "application/json").map_err(fail)?;
    let mut init = worker::RequestInit::new();
    init.with_method(worker::Method::Post)
        .with_headers(headers)
        .with_body(Some(wasm_bindgen::JsValue::from_str(form)));
    let req = worker::Request::new_with_init(url, &init).map_err(fail)?;
    let mut resp = worker::Fetch::Request(req).send().await.map_err(fail)?;
    Ok((resp.status_code(), resp.text().await.unwrap_or_default()))
}
