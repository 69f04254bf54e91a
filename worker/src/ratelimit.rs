//! Per-person rate limits kept in D1 (a sliding window of recent events per key): session
//! creation here; prompts are limited by each session's object.

use crate::db::{self, num};
use inspect_protocol::limits::{sliding_window, DEFAULT_SESSIONS_PER_HOUR};
use inspect_protocol::ApiError;
use serde::Deserialize;
use worker::Env;

const HOUR_MS: i64 = 60 * 60 * 1000;

/// One more session for `user_id` now, or 429 with when to try again.
pub async fn sessions(env: &Env, user_id: &str, now: i64) -> Result<(), ApiError> {
    let limit = db::setting(env, "RATE_LIMIT_SESSIONS_PER_HOUR")
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(DEFAULT_SESSIONS_PER_HOUR);
    let key = format!("sessions:{user_id}");
    #[derive(Deserialize)]
    struct At {
        at: f64,
    }
    let recent: Vec<At> = db::all(
        env,
        "SELECT at FROM rate_events WHERE key = ?1 AND at > ?2 ORDER BY at",
        &[key.as_str().into(), num(now - HOUR_MS)],
    )
    .await?;
    let recent: Vec<i64> = recent.into_iter().map(|a| a.at as i64).collect();
    if let Err(secs) = sliding_window(&recent, limit, HOUR_MS, now) {
        return Err(ApiError::too_many(
            format!("at most {limit} new sessions an hour per person; try again in {secs} s"),
            secs,
        ));
    }
    let database = db::database(env)?;
    database
        .batch(vec![
            database
                .prepare("INSERT INTO rate_events (key, at) VALUES (?1, ?2)")
                .bind(&[key.as_str().into(), num(now)])
                .map_err(db::unavailable)?,
            database
                .prepare("DELETE FROM rate_events WHERE key = ?1 AND at <= ?2")
                .bind(&[key.as_str().into(), num(now - HOUR_MS)])
                .map_err(db::unavailable)?,
        ])
        .await
        .map_err(db::unavailable)?;
    Ok(())
}
