//! What the SessionDO posts to a Slack-started prompt's thread: the progress message
//! updated as tools run, and the final message with the outcome in its place when the
//! prompt ends, the 👀 taken off. An answer that is `NO_REPLY` posts nothing.

use crate::{api, blocks};
use inspect_protocol::scm::Completion;
use inspect_protocol::slack::SlackThread;
use inspect_protocol::ApiError;
use serde_json::json;

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

/// The progress message (`ts`) says the prompt is working, on `tool` if one runs.
pub async fn progress(
    env: &worker::Env,
    thread: &SlackThread,
    ts: &str,
    tool: Option<&str>,
    elapsed_secs: i64,
    session_url: &str,
) -> Result<(), ApiError> {
    let mut message = blocks::progress(&thread.target, "working", tool, elapsed_secs, session_url);
    message["channel"] = json!(thread.channel);
    message["ts"] = json!(ts);
    api::post(env, "chat.update", &message).await.map(drop)
}

/// The final message in the thread (in place of the progress message, or a new one when
/// that is gone), and the 👀 off.
pub async fn report(
    env: &worker::Env,
    c: &Completion,
    thread: &SlackThread,
    session_url: &str,
) -> Result<(), ApiError> {
    if c.success && inspect_protocol::automations::is_no_reply(c.summary.as_deref()) {
        // The agent has nothing to say: the thread gets nothing (its progress message goes).
        if let Some(ts) = &thread.progress_ts {
            match api::post(
                env,
                "chat.delete",
                &json!({"channel": thread.channel, "ts": ts}),
            )
            .await
            {
                Ok(_) => {}
                Err(e) if api::refused_with(&e, "message_not_found") => {}
                Err(e) => return Err(e),
            }
        }
        unreact(env, thread).await;
        return Ok(());
    }
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
    let replaced = match &thread.progress_ts {
        Some(ts) => {
            let mut update = message.clone();
            update["ts"] = json!(ts);
            match api::post(env, "chat.update", &update).await {
                Ok(_) => true,
                // Someone deleted the progress message: the outcome is posted anew.
                Err(e) if api::refused_with(&e, "message_not_found") => false,
                Err(e) => return Err(e),
            }
        }
        None => false,
    };
    if !replaced {
        message["thread_ts"] = json!(thread.thread_ts);
        api::post(env, "chat.postMessage", &message).await?;
    }
    unreact(env, thread).await;
    Ok(())
}

/// The 👀 off the message that was taken (already gone is fine).
async fn unreact(env: &worker::Env, thread: &SlackThread) {
    if let Some(ts) = &thread.reaction_ts {
        let _ = api::post(
            env,
            "reactions.remove",
            &json!({"channel": thread.channel, "timestamp": ts, "name": "eyes"}),
        )
        .await;
    }
}
