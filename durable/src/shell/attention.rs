//! Events that may need people outside the session, handed to the control plane (which
//! fills inboxes and notifies) after the response, never holding the session up.

use super::*;
use inspect_protocol::inbox::Attention;
use inspect_protocol::plane::PlaneCall;

impl SessionDO {
    pub(super) fn tell_attention(&self, items: Vec<Attention>) {
        let Some(first) = items.first() else {
            return;
        };
        let session_url = self.session_url(&first.session_id);
        let env = self.env.clone();
        self.state.wait_until(async move {
            let asked = PlaneCall::Attention { items, session_url };
            let mut last = String::new();
            for attempt in 0..3u64 {
                if attempt > 0 {
                    worker::Delay::from(std::time::Duration::from_millis(500 * attempt)).await;
                }
                match inspect_runtime::binding::call_plane(&env, &asked).await {
                    Ok(()) => return,
                    Err(e) => last = e.message,
                }
            }
            inspect_runtime::log::emit(LogLine::error("inbox", "attention_not_told").detail(last));
        });
    }
}
