//! Brokered model grants in D1 (`migrations/0018_model_grants.sql`): stored sealed, listed
//! without their tokens, chosen for a session, and turned into a short-lived access token
//! for a session's sandbox — the held one while it is good, else a refresh at the grant's
//! token endpoint, its rotated refresh token written back in place, a refused one marking
//! the grant revoked. One refresh at a time per grant across all sessions
//! (`migrations/0020_model_grant_refresh.sql`): the others wait for its token.

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
    agent: inspect_protocol::session::AgentKind,
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
    Ok(
        grants::applicable(&grants, repositories, environment, agent)
            .into_iter()
            .map(|(id, provider)| ManagedGrant {
                id: id.to_owned(),
                provider: provider.to_owned(),
            })
            .collect(),
    )
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

/// How long one refresh may hold a grant before another session may try.
const REFRESH_LEASE_MS: i64 = 20_000;
/// How long a session waits for another's refresh, at most; and how often it looks.
const REFRESH_WAIT_MS: i64 = 25_000;
const REFRESH_POLL_MS: u64 = 200;

fn clock() -> i64 {
    worker::Date::now().as_millis() as i64
}

/// A short-lived access token of grant `id`: 410 once the grant is revoked (with why).
/// One refresh at a time per grant, across every session: the one that claims the grant
/// (a lease in D1) refreshes; the others wait for the token it writes. Many sessions
/// sending the same refresh token at once would make all but one look like a reuse — an
/// `invalid_grant` that could mark a good grant revoked, and that providers detecting
/// reuse answer by revoking the whole chain.
pub async fn access_token(env: &Env, id: &str, now: i64) -> Result<ModelToken, ApiError> {
    let key = key(env)?;
    let started = now;
    let mut first_seen: Option<Option<i64>> = None;
    loop {
        let now = clock();
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
        let expires = held.access_expires_at.map(|a| a as i64);
        let seen = *first_seen.get_or_insert(expires);
        if let (Some(sealed), Some(at)) = (&held.access_sealed, expires) {
            if grants::held_usable(at, seen, now) {
                return Ok(ModelToken {
                    access_token: key.open(sealed)?,
                    expires_at: at,
                });
            }
        }
        let claimed = run(
            env,
            "UPDATE model_grants SET refreshing_until = ?2 WHERE id = ?1 AND status = 'active' AND refresh_sealed = ?3 AND (refreshing_until IS NULL OR refreshing_until < ?4)",
            &[
                id.into(),
                num(now + REFRESH_LEASE_MS),
                held.refresh_sealed.as_str().into(),
                num(now),
            ],
        )
        .await?;
        if claimed == 0 {
            // Another session is refreshing (or just did): wait for its token.
            if clock() - started > REFRESH_WAIT_MS {
                return Err(ApiError::new(
                    ErrorCode::Unavailable,
                    "another refresh of the grant did not finish in time",
                ));
            }
            worker::Delay::from(std::time::Duration::from_millis(REFRESH_POLL_MS)).await;
            continue;
        }
        return refresh(env, &key, id, &held, now).await;
    }
}

/// Refreshes grant `id` under the lease this call holds, writes what came back, and lets
/// go of the lease.
async fn refresh(
    env: &Env,
    key: &inspect_secrets::SealingKey,
    id: &str,
    held: &Held,
    now: i64,
) -> Result<ModelToken, ApiError> {
    let refresh = key.open(&held.refresh_sealed)?;
    let answered = inspect_runtime::form::post_form(
        &held.token_url,
        &grants::refresh_form(&held.client_id, &refresh),
    )
    .await;
    let (status, body) = match answered {
        Ok(a) => a,
        Err(e) => {
            release(env, id).await;
            return Err(e);
        }
    };
    match grants::read_refresh(status, &body, now) {
        Outcome::Fresh {
            access,
            rotated,
            expires_at,
        } => {
            let new_refresh = match &rotated {
                Some(r) => seal(key, r)?,
                None => held.refresh_sealed.clone(),
            };
            run(
                env,
                "UPDATE model_grants SET refresh_sealed = ?2, access_sealed = ?3, access_expires_at = ?4, refreshing_until = NULL WHERE id = ?1 AND refresh_sealed = ?5",
                &[
                    id.into(),
                    new_refresh.into(),
                    seal(key, &access)?.into(),
                    num(expires_at),
                    held.refresh_sealed.as_str().into(),
                ],
            )
            .await?;
            Ok(ModelToken {
                access_token: access,
                expires_at,
            })
        }
        Outcome::Revoked(why) => {
            // Refused under the lease, with the grant's current refresh token: the
            // provider no longer honours it.
            run(
                env,
                "UPDATE model_grants SET status = 'revoked', status_reason = ?2, access_sealed = NULL, access_expires_at = NULL, refreshing_until = NULL WHERE id = ?1 AND refresh_sealed = ?3",
                &[id.into(), why.as_str().into(), held.refresh_sealed.as_str().into()],
            )
            .await?;
            Err(ApiError::new(
                ErrorCode::Gone,
                format!("the grant was revoked: {why}; reconnect it in Settings"),
            ))
        }
        Outcome::Failed(why) => {
            release(env, id).await;
            Err(ApiError::new(ErrorCode::Unavailable, why))
        }
    }
}

async fn release(env: &Env, id: &str) {
    let _ = run(
        env,
        "UPDATE model_grants SET refreshing_until = NULL WHERE id = ?1",
        &[id.into()],
    )
    .await;
}
