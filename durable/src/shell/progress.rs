//! A prompt's progress where it came from, from the object's side: a Slack thread's
//! progress message updated as tools run, a Linear agent session's ephemeral `action` for
//! each tool (when its settings show tools); at most one update every 3 s, sent with
//! `waitUntil`, never holding the session up. The answer replaces or follows them only
//! after every update still in flight has been answered, and no update starts after it:
//! Slack applies each `chat.update` as it arrives, so a late progress update would
//! overwrite the outcome (and a late Linear action would follow the answer). What is said
//! is the control plane's (`inspect_slack::thread`, `inspect_linear::panel`), asked over
//! the service binding.

use super::*;
use inspect_protocol::plane::PlaneCall;
use inspect_protocol::scm::CallbackContext;
use inspect_protocol::session::TimelineEvent;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;

/// Progress updates are at most this frequent.
const PROGRESS_EVERY_MS: i64 = 3000;

/// How long a final message waits for progress updates in flight, at most.
const SETTLE_MS: u64 = 10_000;

/// The progress updates in flight, the prompts whose final message is on its way, and the
/// throttle: when the last update went, and the latest tool of a period that had said one
/// already (said when the period ends, so the tool still running is never lost to it).
#[derive(Default)]
pub(super) struct ProgressUpdates {
    in_flight: Cell<u32>,
    ended: RefCell<HashSet<String>>,
    at: Cell<i64>,
    /// The period (its start) whose prompt was looked up for a trailing update.
    looked: Cell<i64>,
    trailing: RefCell<Option<Trailing>>,
    /// The last prompt looked up and where its outcome goes: a prompt's callback is set
    /// when it is queued and never changes, so its tool calls look it up once.
    callback: RefCell<Option<(String, Option<CallbackContext>)>>,
}

/// A tool waiting for the period's end, and where it is shown.
struct Trailing {
    message_id: String,
    tool: String,
    args: serde_json::Value,
    shown: Shown,
    session: String,
    url: String,
}

impl ProgressUpdates {
    /// No progress update for `message_id` starts from now on.
    pub(super) fn end(&self, message_id: &str) {
        self.ended.borrow_mut().insert(message_id.to_owned());
    }

    /// Waits until no progress update is in flight (at most [`SETTLE_MS`]).
    pub(super) async fn settled(&self) {
        let mut waited = 0;
        while self.in_flight.get() > 0 && waited < SETTLE_MS {
            worker::Delay::from(std::time::Duration::from_millis(50)).await;
            waited += 50;
        }
    }
}

/// Where a tool is shown.
enum Shown {
    Slack(inspect_protocol::slack::SlackThread, String),
    Linear(inspect_protocol::linear::LinearAgentSession),
}

/// One progress update, said over the binding (unless the prompt's answer is on its way).
async fn say(
    env: Env,
    updates: Rc<ProgressUpdates>,
    message_id: String,
    shown: Shown,
    (tool, args): (String, serde_json::Value),
    (session, url): (String, String),
) {
    // The final message may have been scheduled meanwhile.
    if updates.ended.borrow().contains(&message_id) {
        return;
    }
    updates.in_flight.set(updates.in_flight.get() + 1);
    let asked = match shown {
        Shown::Slack(thread, ts) => PlaneCall::SlackProgress {
            elapsed_secs: (now_ms() - thread.started_at) / 1000,
            thread,
            ts,
            tool: Some(tool),
            session_url: url,
        },
        Shown::Linear(session) => PlaneCall::LinearProgress {
            session,
            tool,
            args,
        },
    };
    let said = inspect_runtime::binding::call_plane(&env, &asked).await;
    updates.in_flight.set(updates.in_flight.get() - 1);
    if let Err(e) = said {
        inspect_runtime::log::emit(
            LogLine::warn("callback", "progress_failed")
                .session(&session)
                .detail(e.message),
        );
    }
}

impl SessionDO {
    /// A tool started: the prompt's Slack progress message or Linear agent session says so
    /// (throttled: the first tool of a period at once, the period's latest at its end).
    pub(super) fn tool_progress(&self, event: &TimelineEvent) {
        if event.kind != "tool_call" {
            return;
        }
        let Some(message_id) = event.message_id.as_deref() else {
            return;
        };
        let now = now_ms();
        let updates = &self.progress_updates;
        let period = updates.at.get();
        let tool = event
            .data
            .get("tool")
            .and_then(|t| t.as_str())
            .unwrap_or("tool")
            .to_owned();
        let args = event
            .data
            .get("args")
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        if now - period < PROGRESS_EVERY_MS {
            // Within the period: the latest tool waits for its end. The prompt is looked up
            // once a period, and one timer runs at a time.
            let mut trailing = updates.trailing.borrow_mut();
            match trailing.as_mut() {
                Some(t) if t.message_id == message_id => {
                    t.tool = tool;
                    t.args = args;
                    return;
                }
                Some(_) => return,
                None if updates.looked.get() == period => return,
                None => {}
            }
            updates.looked.set(period);
            let Some(shown) = self.shown(message_id) else {
                return;
            };
            let session = self.session_id().unwrap_or_default();
            *trailing = Some(Trailing {
                message_id: message_id.to_owned(),
                tool,
                args,
                shown,
                url: self.session_url(&session),
                session,
            });
            drop(trailing);
            let wait = (period + PROGRESS_EVERY_MS - now).max(0) as u64;
            let env = self.env.clone();
            let updates = Rc::clone(&self.progress_updates);
            self.state.wait_until(async move {
                worker::Delay::from(std::time::Duration::from_millis(wait)).await;
                let Some(t) = updates.trailing.borrow_mut().take() else {
                    return;
                };
                updates.at.set(now_ms());
                let ids = (t.session, t.url);
                say(
                    env,
                    Rc::clone(&updates),
                    t.message_id,
                    t.shown,
                    (t.tool, t.args),
                    ids,
                )
                .await;
            });
            return;
        }
        // Looked at once per period whatever the prompt: a session started elsewhere must
        // not pay a statement per tool call for it (it was the hot path's fourth statement).
        updates.at.set(now);
        // A tool said now replaces one waiting for the period's end.
        updates.trailing.borrow_mut().take();
        let Some(shown) = self.shown(message_id) else {
            return;
        };
        let session = self.session_id().unwrap_or_default();
        let url = self.session_url(&session);
        let env = self.env.clone();
        let updates = Rc::clone(&self.progress_updates);
        let message_id = message_id.to_owned();
        self.state.wait_until(say(
            env,
            updates,
            message_id,
            shown,
            (tool, args),
            (session, url),
        ));
    }

    /// Where the prompt's progress is shown, if anywhere.
    fn shown(&self, message_id: &str) -> Option<Shown> {
        if self.progress_updates.ended.borrow().contains(message_id) {
            return None;
        }
        match self.callback_of(message_id) {
            Some(CallbackContext::Slack(thread)) => thread
                .progress_ts
                .clone()
                .map(|ts| Shown::Slack(thread, ts)),
            Some(CallbackContext::Linear(s)) if s.tool_progress => Some(Shown::Linear(s)),
            _ => None,
        }
    }

    /// The prompt's callback, from memory when it was the last one looked up. The lookup
    /// reads the prompt alone, so it does not write the staged parts first (the tells of
    /// the frame being staged still leave before its write).
    fn callback_of(&self, message_id: &str) -> Option<CallbackContext> {
        let remembered = self.progress_updates.callback.borrow();
        if let Some((_, callback)) = remembered.as_ref().filter(|(id, _)| id == message_id) {
            return callback.clone();
        }
        drop(remembered);
        let row = self
            .store
            .raw()
            .scalar(
                "SELECT callback FROM messages WHERE id = ?",
                &[message_id.into()],
            )
            .ok()
            .flatten()?;
        let callback = row
            .into_string()
            .and_then(|c| serde_json::from_str(&c).ok());
        *self.progress_updates.callback.borrow_mut() =
            Some((message_id.to_owned(), callback.clone()));
        callback
    }
}

impl SessionDO {
    /// A picture the agent took during a prompt from a Slack thread goes to that thread
    /// too (with `waitUntil`; a failure is logged, the picture stays in the session).
    pub(super) fn share_media(&self, artifact: &inspect_protocol::session::Artifact) {
        let Ok(Some(CallbackContext::Slack(thread))) = self.engine().running_callback() else {
            return;
        };
        let meta = artifact.metadata.clone().unwrap_or_default();
        let Some(attachment) = meta["attachmentId"].as_str().map(str::to_owned) else {
            return;
        };
        let Ok(Some((mime, bytes))) = self.engine().media(&attachment) else {
            return;
        };
        let caption = meta["caption"]
            .as_str()
            .unwrap_or("A screenshot")
            .to_owned();
        let name = format!("screenshot.{}", mime.rsplit('/').next().unwrap_or("png"));
        let env = self.env.clone();
        let session = self.session_id().unwrap_or_default();
        self.state.wait_until(async move {
            use base64::Engine as _;
            let asked = PlaneCall::SlackMedia {
                channel: thread.channel,
                thread_ts: thread.thread_ts,
                name,
                caption,
                bytes: base64::engine::general_purpose::STANDARD.encode(&bytes),
            };
            let shared = inspect_runtime::binding::call_plane(&env, &asked).await;
            if let Err(e) = shared {
                inspect_runtime::log::emit(
                    LogLine::warn("slack", "media_not_shared")
                        .session(&session)
                        .detail(e.message),
                );
            }
        });
    }
}
