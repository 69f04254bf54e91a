//! A Slack-started prompt's thread from the object's side: its progress message updated
//! as tools run (at most once every 3 s), and the final message with the outcome when the
//! prompt ends; the 👀 taken off. Sent with `waitUntil`, never holding the session up.

use super::*;
use inspect_protocol::scm::{CallbackContext, Completion};
use inspect_protocol::session::TimelineEvent;
use inspect_protocol::slack::SlackThread;
use inspect_slack::{api, blocks};
use serde_json::json;

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
            let mut message = blocks::progress(
                &thread.target,
                "working",
                tool.as_deref(),
                (now - thread.started_at) / 1000,
                &url,
            );
            message["channel"] = json!(thread.channel);
            message["ts"] = json!(ts);
            if let Err(e) = api::post(&env, "chat.update", &message).await {
                crate::log::emit(
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

/// The final message in the thread (in place of the progress message), and the 👀 off.
pub(super) async fn report(
    env: &Env,
    c: &Completion,
    thread: &SlackThread,
    session_url: &str,
) -> std::result::Result<(), ApiError> {
    let secs = (now_ms() - thread.started_at) / 1000;
    let outcome = blocks::Outcome {
        success: c.success,
        error: c.error.as_deref(),
        summary: c.summary.as_deref(),
        pull_requests: &c.pull_requests,
        changed_files: &c.changed_files,
        target: &thread.target,
        secs,
    };
    let mut message = blocks::finished(&outcome, session_url);
    message["channel"] = json!(thread.channel);
    match &thread.progress_ts {
        Some(ts) => {
            message["ts"] = json!(ts);
            api::post(env, "chat.update", &message).await?;
        }
        None => {
            message["thread_ts"] = json!(thread.thread_ts);
            api::post(env, "chat.postMessage", &message).await?;
        }
    }
    if let Some(ts) = &thread.reaction_ts {
        // Already gone is fine.
        let _ = api::post(
            env,
            "reactions.remove",
            &json!({"channel": thread.channel, "timestamp": ts, "name": "eyes"}),
        )
        .await;
    }
    Ok(())
}
