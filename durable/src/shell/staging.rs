//! The shell's half of staged streamed parts (see [`crate::engine::staged`]): what is
//! staged lives in the object's memory with the sandbox socket that sent it, is written by
//! a timer a few milliseconds later, and is always written before any other statement runs
//! ([`DoStore`] does that), so every other path sees the whole timeline.

use super::*;
use crate::engine::staged::{Staged, STAGED_MAX_PARTS, STAGED_WRITE_MS};

/// Staged parts, the socket to acknowledge them on, and whether a write is scheduled.
#[derive(Default)]
pub(super) struct Staging {
    staged: Staged,
    sandbox: Option<WebSocket>,
    scheduled: bool,
}

/// Writes what is staged and acknowledges it to the sandbox; the acknowledgement leaves
/// once the write is durable (it is sent after the write). A failed write closes the
/// sandbox's socket: the supervisor reconnects and resends what was not acknowledged.
/// `store` is the raw store (writing staged parts before its statements would recurse).
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
    let engine = Session::new(store);
    match engine.write_staged(staged) {
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
            crate::log::emit(
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

impl SessionDO {
    /// A sandbox frame made only of streamed parts, staged and told to the clients; `false`
    /// when it is anything else (then it goes the usual way).
    pub(super) fn stage_sandbox_frame(&self, ws: &WebSocket, text: &str) -> bool {
        let (fx, full) = {
            let mut s = self.staging.borrow_mut();
            let raw = self.store.raw();
            let Some(fx) = Session::new(&raw).stage_sandbox_frame(text, now_ms(), &mut s.staged)
            else {
                return false;
            };
            s.sandbox = Some(ws.clone());
            (fx, s.staged.len() >= STAGED_MAX_PARTS)
        };
        self.apply(fx);
        if full {
            write_staged(&self.store.raw(), &self.staging);
        } else {
            self.schedule_staged_write();
        }
        true
    }

    fn schedule_staged_write(&self) {
        {
            let mut s = self.staging.borrow_mut();
            if s.scheduled {
                return;
            }
            s.scheduled = true;
        }
        let store = self.store.raw();
        let staging = self.staging.clone();
        self.state.wait_until(async move {
            worker::Delay::from(std::time::Duration::from_millis(STAGED_WRITE_MS)).await;
            if let Ok(mut s) = staging.try_borrow_mut() {
                s.scheduled = false;
            }
            write_staged(&store, &staging);
        });
    }
}
