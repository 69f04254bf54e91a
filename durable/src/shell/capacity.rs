//! Sessions waiting for room, woken in order. A session the provider had no room for keeps
//! its place in D1 (`capacity_waiters`, by when it began to wait) and asks again by
//! itself only rarely (the engine's back-off, up to a minute); a session whose sandbox
//! stops tells the oldest waiter at once, over the object's internal `capacity-freed`
//! route, so room goes to whoever waited longest instead of to whoever polls next.

use super::*;

/// Waiters told per stop at most, skipping those that no longer wait.
const WAKE_TRIES: usize = 3;

/// The object's path another object tells it on (reached only from objects).
pub(super) const CAPACITY_FREED: &str = "capacity-freed";

impl SessionDO {
    /// The session waits for room (refused at `now`): its place (its first wait) is kept
    /// in D1, and how many wait ahead of it decides how soon it asks again by itself.
    pub(super) async fn join_waiters(&self, now: i64) {
        let engine = self.engine();
        let (Ok(id), Ok(Some(since))) = (self.session_id(), engine.waiting_since()) else {
            return;
        };
        // Its place (kept on its first refusal) and how many wait ahead of it: one batch.
        let since_arg = inspect_runtime::d1::num(since);
        let place = [id.as_str().into(), since_arg.clone()];
        let ahead_args = [since_arg, id.as_str().into()];
        let keep = (
            "INSERT INTO capacity_waiters (session_id, since) VALUES (?1, ?2)
             ON CONFLICT(session_id) DO NOTHING",
            place.as_slice(),
        );
        let count = (
            "SELECT COUNT(*) AS ahead FROM capacity_waiters
             WHERE since < ?1 OR (since = ?1 AND session_id < ?2)",
            ahead_args.as_slice(),
        );
        let statements = match since == now {
            true => vec![keep, count],
            false => vec![count],
        };
        #[derive(serde::Deserialize)]
        struct Ahead {
            ahead: i64,
        }
        let kept = inspect_runtime::d1::query_batch(&self.env, &statements)
            .await
            .and_then(|results| {
                let rows =
                    inspect_runtime::d1::batch_rows::<Ahead>(&results, statements.len() - 1)?;
                Ok(rows.first().map_or(0, |a| a.ahead))
            });
        match kept {
            Ok(ahead) => {
                let _ = engine.waiters_ahead(ahead);
            }
            Err(e) => self.log(LogLine::warn("sandbox", "waiter_not_kept").detail(e.message)),
        }
    }

    /// The provider took this session's spawn: it leaves the waiters, if it waited.
    pub(super) async fn leave_waiters(&self) {
        if !self.engine().capacity_found().unwrap_or(false) {
            return;
        }
        let Ok(id) = self.session_id() else {
            return;
        };
        let _ = leave(&self.env, &id).await;
    }

    /// This session's sandbox stopped: the oldest other session waiting for room is told
    /// (after the response, without holding this session up).
    pub(super) fn wake_waiter(&self) {
        let env = self.env.clone();
        let me = self.session_id().unwrap_or_default();
        self.state.wait_until(async move {
            #[derive(serde::Deserialize)]
            struct Waiter {
                session_id: String,
            }
            for _ in 0..WAKE_TRIES {
                let next: Option<Waiter> = inspect_runtime::d1::first(
                    &env,
                    "SELECT session_id FROM capacity_waiters WHERE session_id != ?1
                     ORDER BY since, session_id LIMIT 1",
                    &[me.as_str().into()],
                )
                .await
                .ok()
                .flatten();
                let Some(next) = next else {
                    return;
                };
                if tell(&env, &next.session_id).await {
                    inspect_runtime::log::emit(
                        LogLine::info("sandbox", "waiter_woken")
                            .session(&next.session_id)
                            .with("by", me.as_str()),
                    );
                    return;
                }
                // It no longer waits (it started, stopped wanting one, or is gone).
                let _ = leave(&env, &next.session_id).await;
            }
        });
    }
}

async fn leave(env: &Env, session_id: &str) -> std::result::Result<usize, ApiError> {
    inspect_runtime::d1::run(
        env,
        "DELETE FROM capacity_waiters WHERE session_id = ?1",
        &[session_id.into()],
    )
    .await
}

/// Tells a waiting session that room was made; `true` when it still waited.
async fn tell(env: &Env, session_id: &str) -> bool {
    let asked = async {
        let headers = worker::Headers::new();
        headers.set(SESSION_HEADER, session_id)?;
        let mut init = worker::RequestInit::new();
        init.with_method(Method::Post).with_headers(headers);
        let req = Request::new_with_init(&format!("https://session/{CAPACITY_FREED}"), &init)?;
        let stub = env.durable_object("SESSION")?.get_by_name(session_id)?;
        let mut resp = stub.fetch_with_request(req).await?;
        let answer: serde_json::Value = resp.json().await?;
        Ok::<_, worker::Error>(answer["waiting"].as_bool().unwrap_or(false))
    };
    asked.await.unwrap_or(false)
}
