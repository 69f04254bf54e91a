//! Keeping the D1 sessions index in step with the session, without making anyone wait.

use super::*;

/// Writes the session's index row and participants to D1, never moving `updated_at` back.
pub(super) async fn write_index(env: &Env, update: &IndexUpdate) -> Result<()> {
    let db = env.d1("DB")?;
    let mut statements = vec![db
        .prepare(
            "UPDATE sessions SET title = ?1, status = ?2, message_count = ?3, updated_at = ?4, pr_url = ?6, pr_state = ?7,
                prompts = ?8, tool_calls = ?9, tokens_in = ?10, tokens_out = ?11, cost_micros = ?12, sandbox_ms = ?13, first_pr_at = ?14,
                prompt_text = ?15
             WHERE id = ?5 AND updated_at <= ?4",
        )
        .bind(&[
            update.title.clone().map_or(wasm_bindgen::JsValue::NULL, Into::into),
            update.status.as_str().into(),
            (update.message_count as f64).into(),
            (update.updated_at as f64).into(),
            update.id.as_str().into(),
            update.pr_url.clone().map_or(wasm_bindgen::JsValue::NULL, Into::into),
            update.pr_state.clone().map_or(wasm_bindgen::JsValue::NULL, Into::into),
            (update.usage.prompts as f64).into(),
            (update.usage.tool_calls as f64).into(),
            (update.usage.tokens_in as f64).into(),
            (update.usage.tokens_out as f64).into(),
            (update.usage.cost_micros as f64).into(),
            (update.usage.sandbox_ms as f64).into(),
            update
                .usage
                .first_pr_at
                .map_or(wasm_bindgen::JsValue::NULL, |t| (t as f64).into()),
            update.prompt_text.as_str().into(),
        ])?];
    for user in &update.participants {
        statements.push(
            db.prepare(
                "INSERT OR IGNORE INTO session_participants (session_id, user_id) VALUES (?1, ?2)",
            )
            .bind(&[update.id.as_str().into(), user.as_str().into()])?,
        );
    }
    db.batch(statements).await?;
    Ok(())
}

impl SessionDO {
    /// Brings the D1 index up to date after the response, so no client waits on D1. Writes
    /// are throttled: at most one per [`INDEX_SYNC_INTERVAL_MS`] per session, each reading
    /// the latest state, so a burst of prompts costs one or two writes, not one each.
    pub(super) fn sync_index(&self) {
        {
            let mut sync = self.index_sync.borrow_mut();
            if sync.in_flight {
                sync.dirty = true;
                return;
            }
            sync.in_flight = true;
        }
        let env = self.env.clone();
        let store = self.store.clone();
        let sync = self.index_sync.clone();
        let storage = self.state.storage();
        self.state.wait_until(async move {
            // After the object's own commit: the runtime commits on a later turn, and D1's
            // answers, coming first, would keep it (and what waits on it: the echo) waiting.
            let _ = storage.sync().await;
            loop {
                sync.borrow_mut().dirty = false;
                let started = now_ms();
                if let Ok(update) = Session::new(&store).index_update(started) {
                    if let Err(e) = write_index(&env, &update).await {
                        inspect_runtime::log::emit(
                            inspect_runtime::log::LogLine::error("session", "index_update_failed")
                                .session(&update.id)
                                .detail(e),
                        );
                    }
                }
                if !sync.borrow().dirty {
                    sync.borrow_mut().in_flight = false;
                    break;
                }
                let wait = INDEX_SYNC_INTERVAL_MS - (now_ms() - started);
                if wait > 0 {
                    worker::Delay::from(std::time::Duration::from_millis(wait as u64)).await;
                }
            }
        });
    }
}
