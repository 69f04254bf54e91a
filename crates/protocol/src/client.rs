//! The client WebSocket (`/sessions/:id/ws`): what browsers and API clients send and get.

use crate::session::{
    Artifact, Attachment, EventWindow, EventsJson, Participant, QueuedPrompt, SessionState,
    SessionStatus, TimelineEvent,
};
use serde::{Deserialize, Serialize};

/// Client → session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ClientMessage {
    Ping,
    Subscribe {
        token: String,
        client_id: String,
    },
    Prompt {
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_effort: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attachments: Option<Vec<Attachment>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_request_id: Option<String>,
    },
    CancelPrompt {
        message_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_request_id: Option<String>,
    },
    Stop,
    /// The user is typing a prompt: a hint to warm a sandbox.
    Typing,
    Presence {
        status: PresenceStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cursor: Option<serde_json::Value>,
    },
    FetchHistory {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cursor: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
    },
    /// Keys typed (or pasted) into an open terminal.
    TerminalInput {
        terminal_id: String,
        data: String,
    },
    TerminalResize {
        terminal_id: String,
        cols: u16,
        rows: u16,
    },
    /// Send me what the terminal shows (its scroll-back): a browser that (re)opened it.
    TerminalAttach {
        terminal_id: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum PresenceStatus {
    Active,
    Idle,
}

impl PresenceStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PresenceStatus::Active => "active",
            PresenceStatus::Idle => "idle",
        }
    }
}

/// Someone connected to the session right now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Presence {
    pub participant_id: String,
    pub user_id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
    pub status: PresenceStatus,
    pub last_seen: i64,
}

/// Session → client.
// Messages are built and serialized at once, never stored in bulk: size is no concern.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ServerMessage {
    /// `timestamp` is absent when the runtime answered a ping without waking the session.
    Pong {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timestamp: Option<i64>,
    },
    Subscribed {
        session: SessionState,
        artifacts: Vec<Artifact>,
        timeline: EventWindow,
        prompt_queue: Vec<QueuedPrompt>,
        participant_id: String,
        participant: Participant,
    },
    PromptQueued {
        message_id: String,
        position: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_request_id: Option<String>,
    },
    PromptCancelled {
        message_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_request_id: Option<String>,
    },
    PromptQueueUpdated {
        prompt_queue: Vec<QueuedPrompt>,
    },
    SandboxEvent {
        event: TimelineEvent,
    },
    /// Several events the sandbox sent in one batch, in order: one message for them all
    /// (a message of this project's own; single events keep `sandbox_event`).
    SandboxEvents {
        events: Vec<TimelineEvent>,
    },
    PresenceSync {
        participants: Vec<Presence>,
    },
    PresenceUpdate {
        participants: Vec<Presence>,
    },
    PresenceLeave {
        participant_id: String,
        user_id: String,
    },
    /// A sandbox is being started ahead of a prompt (someone is typing).
    SandboxWarming,
    SandboxSpawning {
        sandbox_id: String,
    },
    SandboxStatus {
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    SandboxReady {
        sandbox_id: String,
    },
    SandboxError {
        error: String,
    },
    ArtifactCreated {
        artifact: Artifact,
    },
    /// An artifact changed (a pull request's state, say); same id as when it was created.
    ArtifactUpdated {
        artifact: Artifact,
    },
    /// The workspace's change was captured anew (after a turn): fetch it with
    /// `GET /sessions/:id/changes`. Its totals, for a badge.
    DiffUpdated {
        captured_at: i64,
        files: u64,
        additions: u64,
        deletions: u64,
    },
    SnapshotSaved {
        snapshot_id: String,
    },
    TerminalOpened {
        terminal: crate::terminal::TerminalInfo,
    },
    /// A terminal's bytes (base64); `replay` when they are its scroll-back, sent to the one
    /// client that attached.
    TerminalOutput {
        terminal_id: String,
        data: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replay: bool,
    },
    /// A terminal's PTY took a new size (views that only watch follow it).
    TerminalResized {
        terminal_id: String,
        cols: u16,
        rows: u16,
    },
    TerminalClosed {
        terminal_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
    },
    SandboxRestored {
        sandbox_id: String,
        snapshot_id: String,
    },
    TunnelUrls {
        tunnel_urls: std::collections::BTreeMap<String, String>,
    },
    ProcessingStatus {
        is_processing: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    HistoryPage {
        #[cfg_attr(feature = "ts", ts(as = "Vec<TimelineEvent>"))]
        events: EventsJson,
        cursor: Option<String>,
        has_more: bool,
    },
    SessionStatus {
        status: SessionStatus,
    },
    SessionTitle {
        title: Option<String>,
    },
    Error {
        code: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_request_id: Option<String>,
    },
}

impl ServerMessage {
    pub fn error(err: &crate::ApiError) -> Self {
        ServerMessage::Error {
            code: err.code.as_str().to_owned(),
            message: err.message.clone(),
            client_request_id: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn client_messages_use_the_original_names() {
        let m: ClientMessage =
            serde_json::from_value(json!({"type": "subscribe", "token": "t", "clientId": "c"}))
                .unwrap();
        assert_eq!(
            m,
            ClientMessage::Subscribe {
                token: "t".into(),
                client_id: "c".into()
            }
        );
        let m: ClientMessage = serde_json::from_value(
            json!({"type": "cancel_prompt", "messageId": "m", "clientRequestId": "r"}),
        )
        .unwrap();
        assert!(matches!(m, ClientMessage::CancelPrompt { .. }));
        let m: ClientMessage =
            serde_json::from_value(json!({"type": "fetch_history", "cursor": "x", "limit": 5}))
                .unwrap();
        assert_eq!(
            m,
            ClientMessage::FetchHistory {
                cursor: Some("x".into()),
                limit: Some(5)
            }
        );
        assert!(serde_json::from_value::<ClientMessage>(json!({"type": "nope"})).is_err());
    }

    #[test]
    fn server_messages_round_trip() {
        let m = ServerMessage::PromptQueued {
            message_id: "m1".into(),
            position: 2,
            client_request_id: Some("r".into()),
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            json!({"type": "prompt_queued", "messageId": "m1", "position": 2, "clientRequestId": "r"})
        );
        assert_eq!(serde_json::from_value::<ServerMessage>(v).unwrap(), m);
        let v = serde_json::to_value(ServerMessage::ProcessingStatus {
            is_processing: true,
            message_id: None,
        })
        .unwrap();
        assert_eq!(
            v,
            json!({"type": "processing_status", "isProcessing": true})
        );
    }

    #[test]
    fn stored_event_text_goes_out_as_events_and_reads_back() {
        let text =
            r#"[{"id":"e1","seq":3,"type":"token","timestamp":9,"messageId":"m","content":"hi"}]"#;
        let m = ServerMessage::HistoryPage {
            events: EventsJson::from_text(text.into()).unwrap(),
            cursor: None,
            has_more: false,
        };
        let wire = serde_json::to_string(&m).unwrap();
        assert_eq!(
            wire,
            format!(r#"{{"type":"history_page","events":{text},"cursor":null,"hasMore":false}}"#)
        );
        // Read back inside the tagged message (from text and from a `Value`).
        let back: ServerMessage = serde_json::from_str(&wire).unwrap();
        assert_eq!(back, m);
        let back: ServerMessage =
            serde_json::from_value(serde_json::from_str::<serde_json::Value>(&wire).unwrap())
                .unwrap();
        let ServerMessage::HistoryPage { events, .. } = back else {
            panic!("{back:?}")
        };
        assert_eq!(events.parse().unwrap()[0].data["content"], "hi");
        assert!(EventsJson::from_text("[1,".into()).is_err());
    }
}
