//! What a decision asks the shell to do: messages to send, sockets to close, the D1 index
//! to refresh. The engine returns these; the shell carries them out.

use inspect_protocol::client::ServerMessage;
use inspect_protocol::sandbox::SandboxCommand;

#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// One socket, by its id.
    Socket(String),
    /// Every subscribed client socket.
    AllClients,
    /// Every subscribed client socket but one.
    AllClientsExcept(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outbound {
    pub target: Target,
    pub message: ServerMessage,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Close {
    pub ws_id: String,
    pub code: u16,
    pub reason: String,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Effects {
    pub outbound: Vec<Outbound>,
    pub closes: Vec<Close>,
    /// The D1 index should be brought up to date with the session.
    pub index_changed: bool,
    /// Commands for the connected sandbox, in order.
    pub to_sandbox: Vec<SandboxCommand>,
    /// A prompt waits and no sandbox is alive: the shell should spawn one.
    pub spawn_wanted: bool,
    /// A sandbox the provider should stop (it was given up on).
    pub stop_sandbox: Option<String>,
    /// The sandbox to stop never became ready: nothing in it is worth keeping, and nothing
    /// will resume it (the provider deletes it where a stop would keep it).
    pub discard_sandbox: bool,
    /// A sandbox whose filesystem the provider should snapshot (before any stop).
    pub snapshot_sandbox: Option<String>,
    /// Prompts with a callback that ended: report each where its context says.
    pub completions: Vec<inspect_protocol::scm::Completion>,
    /// Events people outside the session may need to hear of (their inbox).
    pub attention: Vec<inspect_protocol::inbox::Attention>,
    /// A client's subscription to record once the messages above are on their way: its
    /// `subscribed` then leaves without waiting for the write to be made durable.
    pub subscription: Option<Subscription>,
}

/// A socket's subscription, decided and answered but not yet written.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    pub ws_id: String,
    pub participant_id: String,
    pub client_id: String,
    pub at: i64,
}

impl Effects {
    pub fn none() -> Self {
        Effects::default()
    }

    /// Runs of events broadcast one after another become one `sandbox_events` message;
    /// everything else keeps its place.
    pub fn batch_events(&mut self) {
        let mut out: Vec<Outbound> = Vec::with_capacity(self.outbound.len());
        let mut run: Vec<inspect_protocol::session::TimelineEvent> = Vec::new();
        let flush = |out: &mut Vec<Outbound>,
                     run: &mut Vec<inspect_protocol::session::TimelineEvent>| {
            let message = match run.len() {
                0 => return,
                1 => ServerMessage::SandboxEvent {
                    event: run.remove(0),
                },
                _ => ServerMessage::SandboxEvents {
                    events: std::mem::take(run),
                },
            };
            out.push(Outbound {
                target: Target::AllClients,
                message,
            });
        };
        for o in std::mem::take(&mut self.outbound) {
            match o {
                Outbound {
                    target: Target::AllClients,
                    message: ServerMessage::SandboxEvent { event },
                } => run.push(event),
                other => {
                    flush(&mut out, &mut run);
                    out.push(other);
                }
            }
        }
        flush(&mut out, &mut run);
        self.outbound = out;
    }
    /// When these effects do nothing but tell every client about events, takes those
    /// events out, in order; `None` (and nothing taken) when they do anything else.
    pub fn take_tells(&mut self) -> Option<Vec<inspect_protocol::session::TimelineEvent>> {
        let tells_only = self.closes.is_empty()
            && self.to_sandbox.is_empty()
            && !self.spawn_wanted
            && !self.index_changed
            && self.stop_sandbox.is_none()
            && self.snapshot_sandbox.is_none()
            && self.completions.is_empty()
            && self.attention.is_empty()
            && self.subscription.is_none()
            && self.outbound.iter().all(|o| {
                matches!(o.target, Target::AllClients)
                    && matches!(
                        o.message,
                        ServerMessage::SandboxEvent { .. } | ServerMessage::SandboxEvents { .. }
                    )
            });
        if !tells_only {
            return None;
        }
        let mut events = vec![];
        for o in std::mem::take(&mut self.outbound) {
            match o.message {
                ServerMessage::SandboxEvent { event } => events.push(event),
                ServerMessage::SandboxEvents { events: more } => events.extend(more),
                _ => {}
            }
        }
        Some(events)
    }

    pub fn to(&mut self, ws_id: &str, message: ServerMessage) -> &mut Self {
        self.outbound.push(Outbound {
            target: Target::Socket(ws_id.to_owned()),
            message,
        });
        self
    }
    pub fn broadcast(&mut self, message: ServerMessage) -> &mut Self {
        self.outbound.push(Outbound {
            target: Target::AllClients,
            message,
        });
        self
    }
    pub fn broadcast_except(&mut self, ws_id: &str, message: ServerMessage) -> &mut Self {
        self.outbound.push(Outbound {
            target: Target::AllClientsExcept(ws_id.to_owned()),
            message,
        });
        self
    }
    pub fn close(&mut self, ws_id: &str, code: u16, reason: impl Into<String>) -> &mut Self {
        self.closes.push(Close {
            ws_id: ws_id.to_owned(),
            code,
            reason: reason.into(),
        });
        self
    }
    pub fn merge(&mut self, other: Effects) {
        self.outbound.extend(other.outbound);
        self.closes.extend(other.closes);
        self.index_changed |= other.index_changed;
        self.to_sandbox.extend(other.to_sandbox);
        self.spawn_wanted |= other.spawn_wanted;
        if other.stop_sandbox.is_some() {
            self.stop_sandbox = other.stop_sandbox;
            self.discard_sandbox = other.discard_sandbox;
        }
        if other.snapshot_sandbox.is_some() {
            self.snapshot_sandbox = other.snapshot_sandbox;
        }
        self.completions.extend(other.completions);
        self.attention.extend(other.attention);
        if other.subscription.is_some() {
            self.subscription = other.subscription;
        }
    }
}

#[cfg(test)]
mod take_tells_tests {
    use super::*;
    use inspect_protocol::session::TimelineEvent;

    fn event(seq: i64) -> TimelineEvent {
        TimelineEvent {
            id: format!("evt_{seq}"),
            seq,
            kind: "token".into(),
            timestamp: 0,
            message_id: None,
            data: Default::default(),
        }
    }

    #[test]
    fn only_broadcast_events_are_taken_in_order() {
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxEvent { event: event(1) });
        fx.broadcast(ServerMessage::SandboxEvents {
            events: vec![event(2), event(3)],
        });
        let seqs: Vec<i64> = fx.take_tells().unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
        assert!(fx.outbound.is_empty());
    }

    #[test]
    fn effects_that_do_more_keep_everything() {
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxEvent { event: event(1) });
        fx.to_sandbox
            .push(SandboxCommand::Ack { ack_id: "a".into() });
        assert!(fx.take_tells().is_none());
        assert_eq!(fx.outbound.len(), 1);

        let mut fx = Effects::none();
        fx.to("w1", ServerMessage::SandboxEvent { event: event(1) });
        assert!(fx.take_tells().is_none());
        assert_eq!(fx.outbound.len(), 1);
    }
}
