//! Per-person rate limits kept in D1 (a sliding window of recent events per key): session
//! creation here; prompts are limited by each session's object.

use crate::db::{self, num};
use inspect_protocol::limits::{sliding_window, DEFAULT_SESSIONS_PER_HOUR};
use inspect_protocol::ApiError;
use serde::Deserialize;
use worker::Env;

const HOUR_MS: i64 = 60 * 60 * 1000;

/// Whether `user_id` may start one more session now (429 with when to try again). What
/// counts it is [`session_charge`], written with the new session's index row.
pub async fn check_sessions(env: &Env, user_id: &str, now: i64) -> Result<(), ApiError> {
    let limit = db::setting(env, "RATE_LIMIT_SESSIONS_PER_HOUR")
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(DEFAULT_SESSIONS_PER_HOUR);
    #[derive(Deserialize)]
    struct At {
        at: f64,
    }
    let recent: Vec<At> = db::all(
        env,
        "SELECT at FROM rate_events WHERE key = ?1 AND at > ?2 ORDER BY at",
        &[session_key(user_id).as_str().into(), num(now - HOUR_MS)],
    )
    .await?;
    let recent: Vec<i64> = recent.into_iter().map(|a| a.at as i64).collect();
    sliding_window(&recent, limit, HOUR_MS, now).map_err(|secs| {
        ApiError::too_many(
            format!("at most {limit} new sessions an hour per person; try again in {secs} s"),
            secs,
        )
    })
}

/// The statements that count a session `user_id` started now (and forget the ones out of
/// the window): run in the same D1 batch as the session's index row.
pub fn session_charge(
    database: &worker::D1Database,
    user_id: &str,
    now: i64,
) -> Result<Vec<worker::D1PreparedStatement>, ApiError> {
    let key = session_key(user_id);
    Ok(vec![
        database
            .prepare("INSERT INTO rate_events (key, at) VALUES (?1, ?2)")
            .bind(&[key.as_str().into(), num(now)])
            .map_err(db::unavailable)?,
        database
            .prepare("DELETE FROM rate_events WHERE key = ?1 AND at <= ?2")
            .bind(&[key.as_str().into(), num(now - HOUR_MS)])
            .map_err(db::unavailable)?,
    ])
}

fn session_key(user_id: &str) -> String {
    format!("sessions:{user_id}")
}
