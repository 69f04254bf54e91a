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
    env.d1("DB")
        .map_err(unavailable)?
        .prepare(sql)
        .bind(args)
        .map_err(unavailable)?
        .all()
        .await
        .map_err(unavailable)?
        .results()
        .map_err(unavailable)
}

/// The first row of a query, if any.
pub async fn first<T: DeserializeOwned>(
    env: &Env,
    sql: &str,
    args: &[JsValue],
) -> Result<Option<T>, ApiError> {
    env.d1("DB")
        .map_err(unavailable)?
        .prepare(sql)
        .bind(args)
        .map_err(unavailable)?
        .first(None)
        .await
        .map_err(unavailable)
}
