//! Personal API tokens: made and revoked by a person (browser or local user), shown once,
//! stored as SHA-256.

use crate::auth::tokens;
use crate::caller::Caller;
use crate::db::{self, num};
use inspect_protocol::auth::{ApiTokenList, ApiTokenSummary, CreateApiToken, CreatedApiToken};
use inspect_protocol::{ApiError, ErrorCode};
use serde::Deserialize;

/// At most this many live tokens per person.
const MAX_TOKENS: usize = 50;

fn person(caller: &Caller) -> Result<(), ApiError> {
    if caller.is_person() {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Forbidden,
            "API tokens are managed by a signed-in person, not with another token",
        ))
    }
}

#[derive(Deserialize)]
struct Row {
    id: String,
    name: String,
    created_at: f64,
    last_used_at: Option<f64>,
}

pub async fn list(env: &worker::Env, caller: &Caller) -> Result<ApiTokenList, ApiError> {
    person(caller)?;
    let rows: Vec<Row> = db::all(
        env,
        "SELECT id, name, created_at, last_used_at FROM api_tokens
         WHERE user_id = ?1 AND revoked_at IS NULL ORDER BY created_at DESC",
        &[caller.actor.user_id.as_str().into()],
    )
    .await?;
    Ok(ApiTokenList {
        tokens: rows
            .into_iter()
            .map(|r| ApiTokenSummary {
                id: r.id,
                name: r.name,
                created_at: r.created_at as i64,
                last_used_at: r.last_used_at.map(|t| t as i64),
            })
            .collect(),
    })
}

pub async fn create(
    env: &worker::Env,
    caller: &Caller,
    body: &[u8],
    now: i64,
) -> Result<CreatedApiToken, ApiError> {
    person(caller)?;
    let req: CreateApiToken = crate::http::body_as(body)?;
    if !tokens::valid_token_name(&req.name) {
        return Err(ApiError::bad_request(
            "a token's name is 1-100 characters without control characters",
        ));
    }
    if list(env, caller).await?.tokens.len() >= MAX_TOKENS {
        // A count, not a rate: waiting does not help, so no 429.
        return Err(ApiError::conflict(format!(
            "at most {MAX_TOKENS} tokens; revoke one first"
        )));
    }
    let token = tokens::encode(tokens::API_TOKEN_PREFIX, &db::random::<32>()?);
    let id = format!("tok_{}", hex::encode(db::random::<8>()?));
    let name = req.name.trim().to_owned();
    db::run(
        env,
        "INSERT INTO api_tokens (id, user_id, name, token_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        &[
            id.as_str().into(),
            caller.actor.user_id.as_str().into(),
            name.as_str().into(),
            tokens::hash(&token).into(),
            num(now),
        ],
    )
    .await?;
    Ok(CreatedApiToken {
        id,
        name,
        token,
        created_at: now,
    })
}

pub async fn revoke(
    env: &worker::Env,
    caller: &Caller,
    id: &str,
    now: i64,
) -> Result<(), ApiError> {
    person(caller)?;
    let changed = db::run(
        env,
        "UPDATE api_tokens SET revoked_at = ?1 WHERE id = ?2 AND user_id = ?3 AND revoked_at IS NULL",
        &[num(now), id.into(), caller.actor.user_id.as_str().into()],
    )
    .await?;
    if changed == 0 {
        return Err(ApiError::not_found(format!("no token {id}")));
    }
    Ok(())
}
