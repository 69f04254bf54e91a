//! The sandbox WebSocket (`/sessions/:id/ws?type=sandbox`, `Authorization: Bearer <sandbox
//! token>`, `X-Sandbox-ID`): what the supervisor reports and what the session commands.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Events that matter are acknowledged once stored; the supervisor resends them after a
/// reconnect until they are. Streamed parts (a text part so far, a tool call's state) are
/// acknowledged too, a moment later and several ids at once (`acks`); of those the
/// supervisor keeps only the newest version of each part.
pub const MAX_UNACKED_EVENTS: usize = 1000;
/// Seconds between heartbeats.
pub const HEARTBEAT_INTERVAL_SECS: u64 = 30;
/// Reconnect backoff: 2^n seconds, capped.
pub const RECONNECT_BACKOFF_CAP_SECS: u64 = 60;
/// Largest sandbox frame accepted, in bytes.
pub const MAX_SANDBOX_FRAME_BYTES: usize = 1024 * 1024;
/// Events one `batch` frame may carry.
pub const MAX_BATCH_EVENTS: usize = 500;
/// HTTP statuses on connect after which the supervisor stops trying.
pub const FINAL_CONNECT_STATUSES: [u16; 4] = [401, 403, 404, 410];

/// One frame from the sandbox: an event with its envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SandboxFrame {
    pub sandbox_id: String,
    pub timestamp: i64,
    /// Present on events that must be acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_id: Option<String>,
    #[serde(flatten)]
    pub event: SandboxEvent,
}

/// The events a sandbox frame carries, each still as its JSON text: the frame itself, or
/// the `events` of a `batch`. Each event is parsed on its own (a bad one spoils no other),
/// straight from its text: no `Value` tree is built on the way.
#[derive(Debug, PartialEq)]
pub struct FrameEvents<'a> {
    pub batch: bool,
    pub events: Vec<&'a str>,
}

/// Splits a sandbox frame into its events (see [`FrameEvents`]). The error is the message
/// to answer the sandbox with (`bad_request`): the frame is not JSON, or is a batch without
/// an `events` array or with more than [`MAX_BATCH_EVENTS`].
pub fn frame_events(text: &str) -> Result<FrameEvents<'_>, String> {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(rename = "type", default)]
        kind: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        events: Option<&'a serde_json::value::RawValue>,
    }
    let envelope: Envelope<'_> =
        serde_json::from_str(text).map_err(|e| format!("malformed frame: {e}"))?;
    if envelope.kind.as_deref() != Some("batch") {
        return Ok(FrameEvents {
            batch: false,
            events: vec![text],
        });
    }
    let events: Vec<&serde_json::value::RawValue> = envelope
        .events
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .ok_or("a batch needs an `events` array")?;
    if events.len() > MAX_BATCH_EVENTS {
        return Err(format!("a batch holds at most {MAX_BATCH_EVENTS} events"));
    }
    Ok(FrameEvents {
        batch: true,
        events: events.into_iter().map(|e| e.get()).collect(),
    })
}

/// An event's `type`, read from its text without the rest (`None` if it has none).
pub fn event_type(text: &str) -> Option<std::borrow::Cow<'_, str>> {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
    }
    serde_json::from_str::<Kind<'_>>(text).ok().map(|k| k.kind)
}

/// A boot step's state, as clients show progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Started,
    Succeeded,
    Failed,
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum SandboxEvent {
    /// The agent is up and the sandbox takes prompts.
    Ready {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        opencode_session_id: Option<String>,
    },
    Heartbeat,
    /// A boot step started or ended (`step` names it: `git_sync:<repo>`, `setup`, `start`,
    /// `tunnels`, `agent`, …); `output` is the bounded tail of what a hook printed.
    BootStep {
        step: String,
        status: StepStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
    },
    /// Streamed assistant text; `content` is the whole text of the part so far.
    Token {
        message_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_id: Option<String>,
        content: String,
    },
    ToolCall {
        message_id: String,
        tool: String,
        call_id: String,
        status: String,
        #[serde(default)]
        args: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        /// How long the tool ran, once it ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<i64>,
    },
    ToolResult {
        message_id: String,
        call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    StepStart {
        message_id: String,
    },
    StepFinish {
        message_id: String,
        #[serde(default)]
        cost: f64,
        #[serde(default)]
        tokens: Value,
    },
    GitSync {
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repo: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha: Option<String>,
    },
    Error {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        error: String,
    },
    ExecutionComplete {
        message_id: String,
        success: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    Artifact {
        artifact_type: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default)]
        metadata: Value,
    },
    PushComplete {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repo: Option<String>,
        /// The `push` command this answers, when one asked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha: Option<String>,
        /// Whether the pushed head differs from the base branch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        changed: Option<bool>,
    },
    PushError {
        error: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repo: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_id: Option<String>,
    },
    Warning {
        scope: String,
        message: String,
    },
    SessionTitle {
        title: String,
    },
    SnapshotReady {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snapshot_id: Option<String>,
    },
    /// A terminal's output (base64), never stored; `client` when it is a replay for one.
    TerminalOutput {
        terminal_id: String,
        data: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client: Option<String>,
    },
    /// A request the sandbox's egress policy refused (`method` is `CONNECT` for a tunnel);
    /// `reason` says why in words.
    EgressBlocked {
        host: String,
        port: u16,
        method: String,
        reason: String,
    },
    /// A terminal's shell ended (or could not start: `error`).
    TerminalExit {
        terminal_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

impl SandboxEvent {
    /// The `type` string, as stored on the timeline.
    pub fn kind(&self) -> &'static str {
        match self {
            SandboxEvent::Ready { .. } => "ready",
            SandboxEvent::Heartbeat => "heartbeat",
            SandboxEvent::BootStep { .. } => "boot_step",
            SandboxEvent::Token { .. } => "token",
            SandboxEvent::ToolCall { .. } => "tool_call",
            SandboxEvent::ToolResult { .. } => "tool_result",
            SandboxEvent::StepStart { .. } => "step_start",
            SandboxEvent::StepFinish { .. } => "step_finish",
            SandboxEvent::GitSync { .. } => "git_sync",
            SandboxEvent::Error { .. } => "error",
            SandboxEvent::ExecutionComplete { .. } => "execution_complete",
            SandboxEvent::Artifact { .. } => "artifact",
            SandboxEvent::PushComplete { .. } => "push_complete",
            SandboxEvent::PushError { .. } => "push_error",
            SandboxEvent::Warning { .. } => "warning",
            SandboxEvent::SessionTitle { .. } => "session_title",
            SandboxEvent::SnapshotReady { .. } => "snapshot_ready",
            SandboxEvent::TerminalOutput { .. } => "terminal_output",
            SandboxEvent::TerminalExit { .. } => "terminal_exit",
            SandboxEvent::EgressBlocked { .. } => "egress_blocked",
        }
    }

    /// A streamed part's key: its later versions replace it on the timeline (the text of a
    /// part so far, a tool call by its id). The supervisor keeps the newest version of each
    /// until the session acknowledges it as stored.
    pub fn part_key(&self) -> Option<String> {
        if !self.is_streamed_part() {
            return None;
        }
        match self {
            SandboxEvent::Token {
                message_id,
                part_id,
                ..
            } => Some(format!(
                "token:{message_id}:{}",
                part_id.as_deref().unwrap_or("")
            )),
            SandboxEvent::ToolCall { call_id, .. } => Some(format!("tool:{call_id}")),
            _ => None,
        }
    }

    /// A streamed part (see [`SandboxEvent::part_key`]).
    pub fn is_streamed_part(&self) -> bool {
        matches!(
            self,
            SandboxEvent::Token { .. } | SandboxEvent::ToolCall { .. }
        )
    }

    /// Events stored once however often they are sent, and acknowledged; the supervisor
    /// resends them until they are. (Streamed parts are acknowledged too, when they carry
    /// an ack id, but a resend of one simply stores its version again.)
    pub fn must_ack(&self) -> bool {
        matches!(
            self,
            SandboxEvent::ExecutionComplete { .. }
                | SandboxEvent::Error { .. }
                | SandboxEvent::SnapshotReady { .. }
                | SandboxEvent::EgressBlocked { .. }
                | SandboxEvent::PushComplete { .. }
                | SandboxEvent::PushError { .. }
        )
    }

    pub fn message_id(&self) -> Option<&str> {
        match self {
            SandboxEvent::Token { message_id, .. }
            | SandboxEvent::ToolCall { message_id, .. }
            | SandboxEvent::ToolResult { message_id, .. }
            | SandboxEvent::StepStart { message_id }
            | SandboxEvent::StepFinish { message_id, .. }
            | SandboxEvent::ExecutionComplete { message_id, .. } => Some(message_id),
            SandboxEvent::Error { message_id, .. } => message_id.as_deref(),
            _ => None,
        }
    }
}

/// Several frames in one, so a busy agent costs one frame per flush rather than per event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SandboxBatch {
    #[serde(rename = "type")]
    pub kind: BatchTag,
    pub events: Vec<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum BatchTag {
    Batch,
}

/// The git identity commits for a prompt carry as author.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct GitIdentity {
    pub name: String,
    pub email: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PromptAuthor {
    pub participant_id: String,
    pub name: String,
    pub git_identity: GitIdentity,
}

/// Session → sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum SandboxCommand {
    /// The set-up-only secrets' values (their names are the spawn's `setupSecrets`), sent
    /// when a booting sandbox connects: the supervisor gives them to the set-up and start
    /// hooks only. Never logged.
    SetupSecrets {
        #[cfg_attr(feature = "ts", ts(type = "Record<string, string>"))]
        env: std::collections::BTreeMap<String, String>,
    },
    Prompt {
        message_id: String,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_effort: Option<String>,
        author: PromptAuthor,
        /// Files sent with the prompt; kept ones (`attachmentId`) are fetched from
        /// `GET /sessions/:id/attachments/:attachmentId` with the sandbox's token.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<crate::session::Attachment>,
    },
    Stop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    Snapshot,
    Shutdown,
    Push {
        push_spec: crate::scm::PushSpec,
    },
    Ack {
        ack_id: String,
    },
    /// Several events made durable together (streamed parts written in one commit, a few
    /// seconds after they were told). A streamed part's newest version is acknowledged,
    /// not the versions before it: the sandbox keeps only the newest one waiting.
    Acks {
        ack_ids: Vec<String>,
    },
    Error {
        code: String,
        message: String,
    },
    /// A person opened a terminal: start a shell on a PTY of this size.
    TerminalOpen {
        terminal_id: String,
        cols: u16,
        rows: u16,
    },
    TerminalInput {
        terminal_id: String,
        data: String,
    },
    TerminalResize {
        terminal_id: String,
        cols: u16,
        rows: u16,
    },
    /// Send the terminal's scroll-back, for the client socket `client`.
    TerminalReplay {
        terminal_id: String,
        client: String,
    },
    TerminalClose {
        terminal_id: String,
    },
    /// A person asked for the editor: start code-server if it is not running.
    EditorStart,
    /// A person asked for the desktop: start the display and its two servers (view-only,
    /// and with control) unless they run.
    DesktopStart,
    /// A person asked for one more port of a gated sandbox: put a gate on `gate_port` (which
    /// the vendor exposes) in front of `port`.
    OpenGate {
        port: u16,
        gate_port: u16,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_split_into_their_events_as_text() {
        let one = r#"{"type":"heartbeat","sandboxId":"s","timestamp":1}"#;
        assert_eq!(
            frame_events(one).unwrap(),
            FrameEvents {
                batch: false,
                events: vec![one]
            }
        );
        let batch = r#"{"type":"batch","events":[{"type":"token","n":1}, {"type":"x"} ,7]}"#;
        assert_eq!(
            frame_events(batch).unwrap(),
            FrameEvents {
                batch: true,
                events: vec![r#"{"type":"token","n":1}"#, r#"{"type":"x"}"#, "7"]
            }
        );
        assert_eq!(
            event_type(r#"{"sandboxId":"s","type":"push\u005ferror"}"#).as_deref(),
            Some("push_error")
        );
        assert_eq!(event_type("7"), None);
        assert!(frame_events("{")
            .unwrap_err()
            .starts_with("malformed frame: "));
        assert_eq!(
            frame_events(r#"{"type":"batch","events":5}"#).unwrap_err(),
            "a batch needs an `events` array"
        );
        assert_eq!(
            frame_events(r#"{"type":"batch"}"#).unwrap_err(),
            "a batch needs an `events` array"
        );
        let many = format!(
            r#"{{"type":"batch","events":[{}]}}"#,
            vec!["{}"; MAX_BATCH_EVENTS + 1].join(",")
        );
        assert!(frame_events(&many).unwrap_err().contains("at most"));
    }

    #[test]
    fn frames_carry_the_envelope_beside_the_event() {
        let v = json!({"type": "execution_complete", "sandboxId": "sb1", "timestamp": 5, "ackId": "a1", "messageId": "m", "success": true});
        let f: SandboxFrame = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(f.ack_id.as_deref(), Some("a1"));
        assert!(f.event.must_ack());
        assert_eq!(f.event.kind(), "execution_complete");
        assert_eq!(serde_json::to_value(&f).unwrap(), v);
        let hb: SandboxFrame =
            serde_json::from_value(json!({"type": "heartbeat", "sandboxId": "s", "timestamp": 1}))
                .unwrap();
        assert_eq!(hb.event, SandboxEvent::Heartbeat);
        assert!(serde_json::from_value::<SandboxFrame>(
            json!({"type": "token", "sandboxId": "s", "timestamp": 1})
        )
        .is_err());
    }

    #[test]
    fn commands_use_the_original_names() {
        let c = SandboxCommand::Ack { ack_id: "x".into() };
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"type": "ack", "ackId": "x"})
        );
        let p: SandboxCommand = serde_json::from_value(json!({"type": "prompt", "messageId": "m", "content": "hi", "model": "fake/fake-model", "author": {"participantId": "p", "name": "Ann", "gitIdentity": {"name": "Ann", "email": "ann@example.com"}}})).unwrap();
        assert!(matches!(p, SandboxCommand::Prompt { .. }));
    }
}
