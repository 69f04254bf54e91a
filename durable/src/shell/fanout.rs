//! Carrying out what the engine decided: messages to sockets, closes, commands to the
//! sandbox; and which sockets are live and subscribed.

use super::*;

/// Whether effects changed something a deadline depends on (sandbox state, a prompt
/// starting or ending), so the alarm must be recomputed.
pub(super) fn moves_deadlines(fx: &Effects) -> bool {
    fx.spawn_wanted
        || !fx.closes.is_empty()
        || fx
            .to_sandbox
            .iter()
            .any(|c| matches!(c, SandboxCommand::Prompt { .. }))
        || fx.outbound.iter().any(|o| {
            matches!(
                o.message,
                ServerMessage::SandboxReady { .. }
                    | ServerMessage::SandboxStatus { .. }
                    | ServerMessage::ProcessingStatus { .. }
                    | ServerMessage::Subscribed { .. }
            )
        })
}

/// Sends one text to many sockets, crossing into JS once for the text rather than once
/// per socket.
pub(super) fn send_to_all<'a>(sockets: impl Iterator<Item = &'a WebSocket>, text: &str) {
    use wasm_bindgen::JsCast;
    let js_text = wasm_bindgen::JsValue::from_str(text);
    let mut send: Option<worker::js_sys::Function> = None;
    for ws in sockets {
        let raw: &wasm_bindgen::JsValue = ws.as_ref();
        if send.is_none() {
            send = worker::js_sys::Reflect::get(raw, &wasm_bindgen::JsValue::from_str("send"))
                .ok()
                .and_then(|f| f.dyn_into().ok());
        }
        match &send {
            Some(f) => {
                let _ = f.call1(raw, &js_text);
            }
            None => {
                let _ = ws.send_with_str(text);
            }
        }
    }
}

impl SessionDO {
    pub(super) fn with_registry<T>(&self, f: impl FnOnce(&mut Registry) -> T) -> T {
        let mut slot = self.registry.borrow_mut();
        f(slot.get_or_insert_with(|| self.rebuilt_registry()))
    }

    /// The sockets and subscriptions after a wake-up (not inlined into each
    /// [`Self::with_registry`] caller: it was, ten times).
    #[inline(never)]
    fn rebuilt_registry(&self) -> Registry {
        let mut r = Registry::default();
        for ws in self.state.get_websockets() {
            if let Ok(Some(tag)) = ws.deserialize_attachment::<SocketTag>() {
                r.sockets.insert(tag.id, ws);
            }
        }
        // No socket held, none subscribed (a new session's object asks nothing).
        if r.sockets.is_empty() {
            return r;
        }
        r.subscribed = self
            .engine()
            .socket_ids(Some(KIND_CLIENT))
            .unwrap_or_default()
            .into_iter()
            .collect();
        r
    }

    /// Prompts handed to the sandbox and prompts that ended are logged (rare events; the
    /// per-frame path only scans its effects).
    fn log_prompts(&self, fx: &Effects) {
        for c in &fx.to_sandbox {
            if let SandboxCommand::Prompt {
                message_id, author, ..
            } = c
            {
                self.log(
                    LogLine::info("prompt", "dispatched")
                        .message(message_id)
                        .with("participant", author.participant_id.as_str()),
                );
            }
        }
        for o in &fx.outbound {
            if let ServerMessage::SandboxEvent { event } = &o.message {
                if event.kind == inspect_protocol::session::event_kind::EXECUTION_COMPLETE
                    && matches!(o.target, Target::AllClients)
                {
                    let success = event.data.get("success").and_then(|v| v.as_bool());
                    let line = if success == Some(true) {
                        LogLine::info("prompt", "completed")
                    } else {
                        LogLine::warn("prompt", "failed")
                    };
                    self.log(
                        line.message(event.message_id.as_deref().unwrap_or_default())
                            .with("error", event.data.get("error").cloned()),
                    );
                }
            }
        }
    }

    pub(super) fn refresh_subscribed(&self) {
        let ids: HashSet<String> = self
            .engine()
            .socket_ids(Some(KIND_CLIENT))
            .unwrap_or_default()
            .into_iter()
            .collect();
        self.with_registry(|r| r.subscribed = ids);
    }

    /// Carries out what the engine decided: sends, closes, index refresh.
    pub(super) fn apply(&self, mut fx: Effects) {
        // Tells held for the next zero-delay timer go first: nothing overtakes them.
        self.send_tells();
        let completions = std::mem::take(&mut fx.completions);
        let attention = std::mem::take(&mut fx.attention);
        for out in &fx.outbound {
            match &out.message {
                ServerMessage::SandboxEvent { event } => self.tool_progress(event),
                ServerMessage::SandboxEvents { events } => {
                    events.iter().for_each(|e| self.tool_progress(e))
                }
                _ => {}
            }
        }
        self.log_prompts(&fx);
        // (A subscription still to be recorded refreshes the membership once it is.)
        let membership_changed = !fx.closes.is_empty()
            || (fx.subscription.is_none()
                && fx.outbound.iter().any(|o| {
                    matches!(
                        o.message,
                        ServerMessage::Subscribed { .. } | ServerMessage::PresenceLeave { .. }
                    )
                }));
        if membership_changed {
            self.refresh_subscribed();
        }
        self.with_registry(|r| {
            for out in &fx.outbound {
                let Ok(text) = serde_json::to_string(&out.message) else {
                    continue;
                };
                match &out.target {
                    Target::Socket(id) => {
                        if let Some(ws) = r.sockets.get(id) {
                            let _ = ws.send_with_str(&text);
                        }
                    }
                    Target::AllClients | Target::AllClientsExcept(_) => {
                        let skip = match &out.target {
                            Target::AllClientsExcept(id) => Some(id.as_str()),
                            _ => None,
                        };
                        let targets = r
                            .subscribed
                            .iter()
                            .filter(|id| Some(id.as_str()) != skip)
                            .filter_map(|id| r.sockets.get(id));
                        send_to_all(targets, &text);
                    }
                }
            }
            for close in &fx.closes {
                if let Some(ws) = r.sockets.remove(&close.ws_id) {
                    let _ = ws.close(Some(close.code), Some(close.reason.as_str()));
                }
                r.subscribed.remove(&close.ws_id);
            }
        });
        // The subscription is written only now: its `subscribed` left above without
        // waiting for the write to be durable. The socket joins the broadcasts after.
        if let Some(sub) = fx.subscription.take() {
            match self.engine().record_subscription(&sub) {
                Ok(()) => self.refresh_subscribed(),
                Err(e) => {
                    self.log(
                        LogLine::warn("socket", "subscription_not_recorded").detail(e.message),
                    );
                    self.with_registry(|r| {
                        if let Some(ws) = r.sockets.remove(&sub.ws_id) {
                            let _ = ws.close(Some(1011), Some("could not record the subscription"));
                        }
                    });
                }
            }
        }
        if !fx.to_sandbox.is_empty() {
            let ids = self
                .engine()
                .socket_ids(Some(KIND_SANDBOX))
                .unwrap_or_default();
            self.with_registry(|r| {
                for command in &fx.to_sandbox {
                    let Ok(text) = serde_json::to_string(command) else {
                        continue;
                    };
                    for ws in ids.iter().filter_map(|id| r.sockets.get(id)) {
                        let _ = ws.send_with_str(&text);
                    }
                }
            });
        }
        if fx.index_changed {
            self.sync_index();
        }
        if !completions.is_empty() {
            self.deliver_completions(completions);
        }
        if !attention.is_empty() {
            self.tell_attention(attention);
        }
    }
}
