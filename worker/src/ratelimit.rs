//! Per-person rate limits kept in D1 (a sliding window of recent events per key): session
//! creation here; prompts are limited by each session's object.
//!
//! The check and the charge are one statement: an event is written only while fewer than
//! the limit are in the window, and D1 runs statements one at a time, so concurrent
//! creates cannot all pass a check made before any of them was counted.

use crate::db::{self, num};
use inspect_protocol::limits::{sliding_window, DEFAULT_SESSIONS_PER_HOUR};
use inspect_protocol::ApiError;
use serde::Deserialize;
use worker::Env;

const HOUR_MS: i64 = 60 * 60 * 1000;

/// A session counted against its creator: handed back with [`refund`] when it was not made.
pub struct Charge {
    key: String,
    at: i64,
}

/// Counts one more session for `user_id` now, or refuses with 429 and when to try again.
pub async fn charge_session(env: &Env, user_id: &str, now: i64) -> Result<Charge, ApiError> {
    let limit = db::setting(env, "RATE_LIMIT_SESSIONS_PER_HOUR")
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(DEFAULT_SESSIONS_PER_HOUR);
    let key = session_key(user_id);
    let taken = db::sweep_then_run(
        env,
        (
            "DELETE FROM rate_events WHERE key = ?1 AND at <= ?2",
            &[key.as_str().into(), num(now - HOUR_MS)],
        ),
        (
            "INSERT INTO rate_events (key, at)
             SELECT ?1, ?2 WHERE (SELECT COUNT(*) FROM rate_events WHERE key = ?1 AND at > ?3) < ?4",
            &[
                key.as_str().into(),
                num(now),
                num(now - HOUR_MS),
                num(i64::from(limit)),
            ],
        ),
    )
    .await?;
    if taken == 1 {
        return Ok(Charge { key, at: now });
    }
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
    let secs = sliding_window(&recent, limit, HOUR_MS, now)
        .err()
        .unwrap_or(1);
    Err(ApiError::too_many(
        format!("at most {limit} new sessions an hour per person; try again in {secs} s"),
        secs,
    ))
}

/// Gives back a charge whose session could not be made.
pub async fn refund(env: &Env, charge: Charge) {
    let _ = db::run(
        env,
        "DELETE FROM rate_events WHERE rowid = (SELECT rowid FROM rate_events WHERE key = ?1 AND at = ?2 LIMIT 1)",
        &[charge.key.as_str().into(), num(charge.at)],
    )
    .await;
}

fn session_key(user_id: &str) -> String {
    format!("sessions:{user_id}")
}
