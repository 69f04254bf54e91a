//! The shell's half of staged streamed parts (see [`crate::engine::staged`]): what is
//! staged lives in the object's memory with the sandbox socket that sent it, is written by
//! a timer a few milliseconds later, and is always written before any other statement runs
//! ([`DoStore`] does that), so every other path sees the whole timeline.
//!
//! The tells themselves wait too, for no time at all: a frame's tells are held and sent by
//! a zero-delay timer, so frames that arrived together while the object was busy reach
//! each client as one `sandbox_events` message instead of one message each (ten clients
//! and a sandbox sending token by token: a tenth of the socket sends). Anything else sent
//! to clients sends the held tells first ([`SessionDO::apply`]), so no client ever sees
//! events out of order, and an idle object tells at once.
//!
//! A frame after a quiet stretch (nothing held, no frame for [`TELL_TOGETHER_MS`]) has
//! nothing to share a message with: it is told in its own turn. What is staged is written
//! in the turn of the first frame that finds it due ([`Staged::due`]: older than its write
//! age, drawn afresh for each staging so sessions streaming at one pace do not all write in
//! the same second), after the tells; a timer
//! ([`STAGED_BACKSTOP_MS`]) writes it when no such frame comes.

use super::*;
use crate::engine::staged::{Staged, STAGED_BACKSTOP_MS, TELL_TOGETHER_MS};
use inspect_protocol::session::TimelineEvent;

/// Staged parts, the socket to acknowledge them on, and whether a write is scheduled;
/// tells not yet sent, and whether their sending is scheduled.
#[derive(Default)]
pub(super) struct Staging {
    staged: Staged,
    sandbox: Option<WebSocket>,
    scheduled: bool,
    told: Vec<TimelineEvent>,
    telling: bool,
    /// When the last staged frame came (the object's clock).
    last_frame_at: Option<i64>,
}

/// Sends the held tells, in order, as one message to every subscribed client.
pub(super) fn send_tells(staging: &RefCell<Staging>, registry: &RefCell<Option<Registry>>) {
    let mut events = match staging.try_borrow_mut() {
        Ok(mut s) => std::mem::take(&mut s.told),
        Err(_) => return,
    };
    let message = match events.len() {
        0 => return,
        1 => ServerMessage::SandboxEvent {
            event: events.remove(0),
        },
        _ => ServerMessage::SandboxEvents { events },
    };
    let Ok(text) = serde_json::to_string(&message) else {
        return;
    };
    if let Ok(slot) = registry.try_borrow() {
        if let Some(r) = slot.as_ref() {
            fanout::send_to_all(
                r.subscribed.iter().filter_map(|id| r.sockets.get(id)),
                &text,
            );
        }
    }
}

/// Writes what is staged and acknowledges it to the sandbox; the acknowledgement leaves
/// once the write is durable (it is sent after the write). A failed write closes the
/// sandbox's socket: the supervisor reconnects and resends what was not acknowledged.
/// `store` is the raw store (writing staged parts before its statements would recurse).
/// The next staging starts where this one ended, without a read, until any other
/// statement runs ([`write_staged_and_forget_start`]).
pub(super) fn write_staged(store: &DoStore, staging: &RefCell<Staging>) {
    let (staged, sandbox) = {
        let Ok(mut s) = staging.try_borrow_mut() else {
            return;
        };
        if s.staged.is_empty() {
            return;
        }
        (std::mem::take(&mut s.staged), s.sandbox.clone())
    };
    let next = staged.successor();
    let engine = Session::new(store);
    let written = engine.write_staged(staged);
    if written.is_ok() {
        if let Ok(mut s) = staging.try_borrow_mut() {
            s.staged = next;
        }
    }
    match written {
        Ok(acks) if acks.is_empty() => {}
        Ok(ack_ids) => {
            if let (Some(ws), Ok(text)) = (
                sandbox,
                serde_json::to_string(&SandboxCommand::Acks { ack_ids }),
            ) {
                let _ = ws.send_with_str(&text);
            }
        }
        Err(e) => {
            inspect_runtime::log::emit(
                LogLine::error("session", "staged_write_failed")
                    .session(&engine.session_id().unwrap_or_default())
                    .detail(e.message),
            );
            if let Some(ws) = sandbox {
                let _ = ws.close(Some(1011), Some("events not stored; send them again"));
            }
        }
    }
}

/// Before any statement but the staging's own: what is staged is written, and where the
/// next staging starts is read again afterwards (the statement may add events or change the
/// sandbox).
pub(super) fn write_staged_and_forget_start(store: &DoStore, staging: &RefCell<Staging>) {
    write_staged(store, staging);
    if let Ok(mut s) = staging.try_borrow_mut() {
        s.staged.forget_start();
    }
}

impl SessionDO {
    /// A sandbox frame made only of streamed parts, staged and told to the clients; `false`
    /// when it is anything else (then it goes the usual way).
    pub(super) fn stage_sandbox_frame(&self, ws: &WebSocket, text: &str) -> bool {
        let now = now_ms();
        let (mut fx, due, quiet) = {
            let mut s = self.staging.borrow_mut();
            // A frame after a quiet stretch, with nothing held, is told at once: no frame
            // came with it to share a message.
            let quiet = s.told.is_empty()
                && !s.telling
                && s.last_frame_at
                    .is_none_or(|at| now - at > TELL_TOGETHER_MS as i64);
            let raw = self.store.raw();
            let Some(fx) = Session::new(&raw).stage_sandbox_frame(text, now, &mut s.staged) else {
                return false;
            };
            s.sandbox = Some(ws.clone());
            s.last_frame_at = Some(now);
            let due = s.staged.due(now, || {
                let mut random = [0u8; 4];
                // Without randomness every staging waits the shortest age.
                let _ = getrandom::fill(&mut random);
                u32::from_le_bytes(random)
            });
            (fx, due, quiet)
        };
        match fx.take_tells() {
            Some(events) => {
                events.iter().for_each(|e| self.tool_progress(e));
                self.staging.borrow_mut().told.extend(events);
                if quiet {
                    self.send_tells();
                } else {
                    self.schedule_tells();
                }
            }
            None => self.apply(fx),
        }
        // Told first, then written: the tells leave before the write's commit is pending.
        if due {
            write_staged(&self.store.raw(), &self.staging);
        } else {
            self.schedule_staged_write();
        }
        true
    }

    /// Sends the held tells now (before anything else goes to clients).
    pub(super) fn send_tells(&self) {
        send_tells(&self.staging, &self.registry);
    }

    fn schedule_tells(&self) {
        let (staging, registry) = (self.staging.clone(), self.registry.clone());
        self.after(
            0,
            |s| &mut s.telling,
            move || send_tells(&staging, &registry),
        );
    }

    fn schedule_staged_write(&self) {
        let (store, staging) = (self.store.raw(), self.staging.clone());
        self.after(
            STAGED_BACKSTOP_MS,
            |s| &mut s.scheduled,
            move || write_staged(&store, &staging),
        );
    }

    /// Runs `then` after `delay_ms`, unless a run is already waiting on the same `flag`.
    fn after(
        &self,
        delay_ms: u64,
        flag: fn(&mut Staging) -> &mut bool,
        then: impl FnOnce() + 'static,
    ) {
        {
            let mut s = self.staging.borrow_mut();
            if std::mem::replace(flag(&mut s), true) {
                return;
            }
        }
        let staging = self.staging.clone();
        self.state.wait_until(async move {
            worker::Delay::from(std::time::Duration::from_millis(delay_ms)).await;
            if let Ok(mut s) = staging.try_borrow_mut() {
                *flag(&mut s) = false;
            }
            then();
        });
    }
}
