//! Small helpers over the D1 binding: one error shape, one way to run a statement.

use inspect_protocol::ApiError;
use wasm_bindgen::JsValue;
use worker::{D1Database, Env};

pub use inspect_durable::d1::{all, first, unavailable};

pub fn database(env: &Env) -> Result<D1Database, ApiError> {
    env.d1("DB").map_err(unavailable)
}

pub fn opt(v: Option<&str>) -> JsValue {
    v.map_or(JsValue::NULL, JsValue::from)
}

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
    let database = database(env)?;
    let first = database
        .prepare(sweep.0)
        .bind(sweep.1)
        .map_err(unavailable)?;
    let second = database
        .prepare(statement.0)
        .bind(statement.1)
        .map_err(unavailable)?;
    let results = database
        .batch(vec![first, second])
        .await
        .map_err(unavailable)?;
    Ok(results
        .get(1)
        .and_then(|r| r.meta().ok().flatten())
        .and_then(|m| m.changes)
        .unwrap_or(0))
}

pub use inspect_github::setting;

/// Random bytes from the runtime.
pub fn random<const N: usize>() -> Result<[u8; N], ApiError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(bytes)
}
