//! D1 from the Workers runtime, one way for the Worker and the SessionDO alike: a
//! statement with its arguments, rows as `T`, failures as "unavailable" errors.

use inspect_protocol::{ApiError, ErrorCode};
use serde::de::DeserializeOwned;
use worker::wasm_bindgen::JsValue;
use worker::{D1Database, Env};

pub fn unavailable(e: worker::Error) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("database: {e}"))
}

/// Every row of a query.
pub async fn all<T: DeserializeOwned>(
    env: &Env,
    sql: &str,
    args: &[JsValue],
) -> Result<Vec<T>, ApiError> {
    query(env, sql, args).await?.results().map_err(unavailable)
}

/// The first row of a query, if any.
pub async fn first<T: DeserializeOwned>(
    env: &Env,
    sql: &str,
    args: &[JsValue],
) -> Result<Option<T>, ApiError> {
    Ok(all(env, sql, args).await?.into_iter().next())
}

/// Runs a query. Not generic: the round trip is in the wasm once, and only the rows'
/// conversion is made per row type.
async fn query(env: &Env, sql: &str, args: &[JsValue]) -> Result<worker::D1Result, ApiError> {
    database(env)?
        .prepare(sql)
        .bind(args)
        .map_err(unavailable)?
        .all()
        .await
        .map_err(unavailable)
}

pub fn database(env: &Env) -> Result<D1Database, ApiError> {
    env.d1("DB").map_err(unavailable)
}

/// An optional text argument (`NULL` when absent).
pub fn opt(v: Option<&str>) -> JsValue {
    v.map_or(JsValue::NULL, JsValue::from)
}

/// A number argument.
pub fn num(v: i64) -> JsValue {
    JsValue::from_f64(v as f64)
}

/// Runs a statement; the number of rows it changed.
pub async fn run(env: &Env, sql: &str, args: &[JsValue]) -> Result<usize, ApiError> {
    let r = database(env)?
        .prepare(sql)
        .bind(args)
        .map_err(unavailable)?
        .run()
        .await
        .map_err(unavailable)?;
    Ok(r.meta().ok().flatten().and_then(|m| m.changes).unwrap_or(0))
}

/// Runs a sweep and then a statement in one batch: how many rows the statement changed.
/// (A sweep of what expired, then a claim that counts only if it wrote.)
pub async fn sweep_then_run(
    env: &Env,
    sweep: (&str, &[JsValue]),
    statement: (&str, &[JsValue]),
) -> Result<usize, ApiError> {
    let changed = run_batch(env, &[sweep, statement]).await?;
    Ok(changed.get(1).copied().unwrap_or(0))
}

/// Runs statements in one batch (one round trip, one transaction, in order): how many rows
/// each changed.
pub async fn run_batch(
    env: &Env,
    statements: &[(&str, &[JsValue])],
) -> Result<Vec<usize>, ApiError> {
    Ok(query_batch(env, statements)
        .await?
        .iter()
        .map(|r| r.meta().ok().flatten().and_then(|m| m.changes).unwrap_or(0))
        .collect())
}

/// The rows of a batch's `i`th statement as `T` (a batch that answered short is an
/// internal error).
pub fn batch_rows<T: DeserializeOwned>(
    results: &[worker::D1Result],
    i: usize,
) -> Result<Vec<T>, ApiError> {
    results
        .get(i)
        .ok_or_else(|| ApiError::internal("a batch answered short"))?
        .results()
        .map_err(unavailable)
}

/// Runs statements in one batch (one round trip, one transaction, in order): each one's
/// result (its rows: `results::<T>()`).
pub async fn query_batch(
    env: &Env,
    statements: &[(&str, &[JsValue])],
) -> Result<Vec<worker::D1Result>, ApiError> {
    let database = database(env)?;
    let prepared = statements
        .iter()
        .map(|(sql, args)| database.prepare(*sql).bind(args).map_err(unavailable))
        .collect::<Result<Vec<_>, _>>()?;
    database.batch(prepared).await.map_err(unavailable)
}
