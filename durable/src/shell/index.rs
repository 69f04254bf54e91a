//! Keeping the D1 sessions index in step with the session, without making anyone wait.

use super::*;
use wasm_bindgen::JsValue;

/// The statements that write the session's index row and participants to D1, never moving
/// `updated_at` back.
pub(super) fn index_statements(update: &IndexUpdate) -> Vec<(&'static str, Vec<JsValue>)> {
    let opt = |v: &Option<String>| v.clone().map_or(JsValue::NULL, Into::into);
    let mut statements = vec![(
        "UPDATE sessions SET title = ?1, status = ?2, message_count = ?3, updated_at = ?4, pr_url = ?6, pr_state = ?7,
            prompts = ?8, tool_calls = ?9, tokens_in = ?10, tokens_out = ?11, cost_micros = ?12, sandbox_ms = ?13, first_pr_at = ?14,
            prompt_text = ?15
         WHERE id = ?5 AND updated_at <= ?4",
        vec![
            opt(&update.title),
            update.status.as_str().into(),
            (update.message_count as f64).into(),
            (update.updated_at as f64).into(),
            update.id.as_str().into(),
            opt(&update.pr_url),
            opt(&update.pr_state),
            (update.usage.prompts as f64).into(),
            (update.usage.tool_calls as f64).into(),
            (update.usage.tokens_in as f64).into(),
            (update.usage.tokens_out as f64).into(),
            (update.usage.cost_micros as f64).into(),
            (update.usage.sandbox_ms as f64).into(),
            update
                .usage
                .first_pr_at
                .map_or(JsValue::NULL, |t| (t as f64).into()),
            update.prompt_text.as_str().into(),
        ],
    )];
    for user in &update.participants {
        statements.push((
            "INSERT OR IGNORE INTO session_participants (session_id, user_id) VALUES (?1, ?2)",
            vec![update.id.as_str().into(), user.as_str().into()],
        ));
    }
    statements
}

/// Writes the session's index row and participants to D1 ([`index_statements`]).
pub(super) async fn write_index(
    env: &Env,
    update: &IndexUpdate,
) -> std::result::Result<(), ApiError> {
    let statements = index_statements(update);
    let statements: Vec<(&str, &[JsValue])> = statements
        .iter()
        .map(|(sql, args)| (*sql, &args[..]))
        .collect();
    inspect_runtime::d1::run_batch(env, &statements).await?;
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
            // A spawn about to make its D1 batch carries the write ([`Self::hold_index`]).
            if sync.held {
                sync.pending = true;
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
                                .detail(e.message),
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

    /// Holds the index write a spawn is about to carry in its own D1 batch (a fresh spawn's
    /// images and secrets): the prompt that wants the sandbox and its index write then cost
    /// one D1 round trip, not two. Released by [`Self::take_held_index`] or
    /// [`Self::release_index`], whichever comes first.
    pub(super) fn hold_index(&self) {
        self.index_sync.borrow_mut().held = true;
    }

    /// The held index write's statements, for the spawn's batch (none waiting: nothing). The
    /// write counts as in flight until [`Self::index_carried`].
    pub(super) fn take_held_index(&self) -> Vec<(&'static str, Vec<JsValue>)> {
        {
            let mut sync = self.index_sync.borrow_mut();
            let waiting = std::mem::take(&mut sync.pending);
            sync.held = false;
            if !waiting || sync.in_flight {
                sync.pending = waiting;
                drop(sync);
                self.release_index();
                return Vec::new();
            }
            sync.in_flight = true;
        }
        match Session::new(&self.store).index_update(now_ms()) {
            Ok(update) => index_statements(&update),
            Err(_) => {
                self.index_carried(false);
                Vec::new()
            }
        }
    }

    /// The carried index write is over: written, or not (then it is written the usual way).
    pub(super) fn index_carried(&self, written: bool) {
        let again = {
            let mut sync = self.index_sync.borrow_mut();
            sync.in_flight = false;
            !written || std::mem::take(&mut sync.dirty)
        };
        if again {
            self.sync_index();
        }
    }

    /// No spawn carries the index write: a held one is written the usual way now.
    pub(super) fn release_index(&self) {
        let waiting = {
            let mut sync = self.index_sync.borrow_mut();
            sync.held = false;
            std::mem::take(&mut sync.pending)
        };
        if waiting {
            self.sync_index();
        }
    }
}
