//! D1 from the Workers runtime, one way for the Worker and the SessionDO alike: a
//! statement with its arguments, rows as `T`, failures as "unavailable" errors.

use inspect_protocol::{ApiError, ErrorCode};
use serde::de::DeserializeOwned;
use wasm_bindgen::JsValue;
use worker::Env;

pub fn unavailable(e: worker::Error) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("database: {e}"))
}

/// Every row of a query.
pub async fn all<T: DeserializeOwned>(
    env: &Env,
    sql: &str,
    args: &[JsValue],
) -> Result<Vec<T>, ApiError> {
    run(env, sql, args).await?.results().map_err(unavailable)
}

/// The first row of a query, if any.
pub async fn first<T: DeserializeOwned>(
    env: &Env,
    sql: &str,
    args: &[JsValue],
) -> Result<Option<T>, ApiError> {
    Ok(all(env, sql, args).await?.into_iter().next())
}

/// Runs a statement. Not generic: the round trip is in the wasm once, and only the rows'
/// conversion is made per row type.
async fn run(env: &Env, sql: &str, args: &[JsValue]) -> Result<worker::D1Result, ApiError> {
    env.d1("DB")
        .map_err(unavailable)?
        .prepare(sql)
        .bind(args)
        .map_err(unavailable)?
        .all()
        .await
        .map_err(unavailable)
}
