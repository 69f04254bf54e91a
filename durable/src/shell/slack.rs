//! A Slack-started prompt's thread from the object's side: its progress message updated
//! as tools run (at most once every 3 s), sent with `waitUntil`, never holding the session
//! up. The messages themselves (and the final one) are `inspect_slack::thread`'s.

use super::*;
use inspect_protocol::scm::CallbackContext;
use inspect_protocol::session::TimelineEvent;
use inspect_slack::thread as slack_thread;

/// Progress updates are at most this frequent.
const PROGRESS_EVERY_MS: i64 = 3000;

impl SessionDO {
    /// A tool started: the prompt's Slack progress message says so (throttled).
    pub(super) fn slack_progress(&self, event: &TimelineEvent) {
        let now = now_ms();
        if event.kind != "tool_call" || now - self.slack_progress_at.get() < PROGRESS_EVERY_MS {
            return;
        }
        // Looked at once per period whatever the prompt: a session without Slack must not
        // pay a statement per tool call for it (it was the hot path's fourth statement).
        self.slack_progress_at.set(now);
        let Some(message_id) = event.message_id.as_deref() else {
            return;
        };
        let Some(CallbackContext::Slack(thread)) = self.callback_of(message_id) else {
            return;
        };
        let Some(ts) = thread.progress_ts.clone() else {
            return;
        };
        let tool = event
            .data
            .get("tool")
            .and_then(|t| t.as_str())
            .map(str::to_owned);
        let session = self.engine().session_id().unwrap_or_default();
        let url = self.session_url(&session);
        let env = self.env.clone();
        self.state.wait_until(async move {
            let elapsed = (now - thread.started_at) / 1000;
            let said =
                slack_thread::progress(&env, &thread, &ts, tool.as_deref(), elapsed, &url).await;
            if let Err(e) = said {
                inspect_runtime::log::emit(
                    LogLine::warn("callback", "slack_progress_failed")
                        .session(&session)
                        .detail(e.message),
                );
            }
        });
    }

    fn callback_of(&self, message_id: &str) -> Option<CallbackContext> {
        self.store
            .scalar(
                "SELECT callback FROM messages WHERE id = ?",
                &[message_id.into()],
            )
            .ok()
            .flatten()
            .and_then(|v| v.into_string())
            .and_then(|c| serde_json::from_str(&c).ok())
    }
}
