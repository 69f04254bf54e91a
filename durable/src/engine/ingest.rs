//! What the sandbox reports, taken in: events on the timeline (streamed text coalesced
//! per part, tool calls upserted by call id), acknowledged events stored once, and the
//! queue fed to it one prompt at a time.

use super::*;
use crate::store::Store;
use inspect_protocol::client::ServerMessage;
use inspect_protocol::sandbox::{
    frame_events, FrameEvents, GitIdentity, PromptAuthor, SandboxCommand, SandboxEvent,
    SandboxFrame, MAX_SANDBOX_FRAME_BYTES,
};
use inspect_protocol::session::{Actor, Artifact, Message};
use serde_json::{Map, Value};

impl<S: Store> Session<'_, S> {
    /// A warning of the control plane's own about the sandbox (an image it could not use),
    /// on the timeline like a sandbox's warning.
    pub fn sandbox_warning(&self, scope: &str, message: &str, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        let event = SandboxEvent::Warning {
            scope: scope.to_owned(),
            message: message.to_owned(),
        };
        let mut data = match serde_json::to_value(&event) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        data.remove("type");
        let ev = timeline::append(self.store, event.kind(), None, data, now).map_err(internal)?;
        fx.broadcast(ServerMessage::SandboxEvent { event: ev });
        Ok(fx)
    }

    /// Handles one frame from the sandbox. Never fails: bad frames are answered with an
    /// `error` command and change nothing.
    pub fn on_sandbox_frame(&self, text: &str, now: i64) -> Effects {
        let mut fx = Effects::none();
        let refuse = |fx: &mut Effects, code: &str, message: String| {
            fx.to_sandbox.push(SandboxCommand::Error {
                code: code.into(),
                message,
            });
        };
        if text.len() > MAX_SANDBOX_FRAME_BYTES {
            refuse(
                &mut fx,
                "payload_too_large",
                format!("a frame is at most {MAX_SANDBOX_FRAME_BYTES} bytes"),
            );
            return fx;
        }
        let FrameEvents { batch, events } = match frame_events(text) {
            Ok(split) => split,
            Err(message) => {
                refuse(&mut fx, "bad_request", message);
                return fx;
            }
        };
        let current = match self.sandbox_row() {
            Ok(Some(r)) => r.sandbox_id,
            _ => String::new(),
        };
        // The sandbox was active: written once for the whole frame or batch.
        let mut active = false;
        // A batch's streamed parts, stored together (the latest version of each) before the
        // next event that is not one, and at the end.
        let mut parts: Vec<timeline::Part> = vec![];
        // Their ack ids, sent once they are stored.
        let mut part_acks: Vec<String> = vec![];
        for raw in events {
            let frame: SandboxFrame = match serde_json::from_str(raw) {
                Ok(f) => f,
                Err(e) => {
                    refuse(&mut fx, "bad_request", format!("malformed event: {e}"));
                    continue;
                }
            };
            if frame.sandbox_id != current {
                refuse(
                    &mut fx,
                    "forbidden",
                    format!(
                        "event for sandbox {} on the socket of {current}",
                        frame.sandbox_id
                    ),
                );
                continue;
            }
            // A terminal's output is not the sandbox at work (typing into one is, counted
            // when it is typed); writing for each would hold every echo for a write.
            if !active
                && !matches!(
                    frame.event,
                    SandboxEvent::Heartbeat | SandboxEvent::TerminalOutput { .. }
                )
            {
                active = true;
                if let Err(e) = self.sandbox_active(now) {
                    refuse(&mut fx, e.code.as_str(), e.message);
                }
            }
            if batch {
                if let Some(part) = streamed_part(&frame) {
                    parts.retain(|p| p.part_key != part.part_key);
                    parts.push(part);
                    part_acks.extend(frame.ack_id);
                    continue;
                }
                self.store_parts(std::mem::take(&mut parts), &mut part_acks, now, &mut fx);
            }
            match self.ingest(&frame, now) {
                Ok(more) => fx.merge(more),
                Err(e) => refuse(&mut fx, e.code.as_str(), e.message),
            }
        }
        if batch {
            self.store_parts(parts, &mut part_acks, now, &mut fx);
            fx.batch_events();
        }
        fx
    }

    /// Stores a batch's streamed parts in one statement, broadcasts them in order and
    /// acknowledges them.
    fn store_parts(
        &self,
        parts: Vec<timeline::Part>,
        acks: &mut Vec<String>,
        now: i64,
        fx: &mut Effects,
    ) {
        match timeline::upsert_many(self.store, parts, now) {
            Ok(events) => {
                for event in events {
                    fx.broadcast(ServerMessage::SandboxEvent { event });
                }
                if !acks.is_empty() {
                    fx.to_sandbox.push(SandboxCommand::Acks {
                        ack_ids: std::mem::take(acks),
                    });
                }
            }
            Err(e) => fx.to_sandbox.push(SandboxCommand::Error {
                code: "internal".into(),
                message: format!("events not stored: {e}"),
            }),
        }
    }

    fn ingest(&self, frame: &SandboxFrame, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        let ack = frame.ack_id.as_ref().filter(|_| frame.event.must_ack());
        if let Some(ack_id) = ack {
            let seen = self
                .store
                .scalar(
                    "SELECT COUNT(*) FROM sandbox_acks WHERE ack_id = ?",
                    &[ack_id.as_str().into()],
                )
                .map_err(internal)?
                .and_then(|v| v.as_i64())
                .unwrap_or(0)
                > 0;
            if seen {
                // A resend after a reconnect: acknowledge again, store nothing twice.
                fx.to_sandbox.push(SandboxCommand::Ack {
                    ack_id: ack_id.clone(),
                });
                return Ok(fx);
            }
        }
        let event = &frame.event;
        match event {
            // A terminal's bytes pass through; they are not the timeline's.
            SandboxEvent::TerminalOutput {
                terminal_id,
                data,
                client,
            } => return self.terminal_output(terminal_id, data, client.as_deref()),
            SandboxEvent::TerminalExit {
                terminal_id,
                exit_code,
                error,
            } => {
                if let Some(e) = error {
                    let mut warn = Effects::none();
                    warn.merge(self.close_terminal(terminal_id, None, *exit_code, now)?);
                    let mut data = serde_json::Map::new();
                    data.insert("scope".into(), "terminal".into());
                    data.insert("message".into(), e.as_str().into());
                    let ev = timeline::append(self.store, "warning", None, data, now)
                        .map_err(internal)?;
                    warn.broadcast(ServerMessage::SandboxEvent { event: ev });
                    return Ok(warn);
                }
                return self.close_terminal(terminal_id, None, *exit_code, now);
            }
            _ => {}
        }
        if let Some(part) = streamed_part(frame) {
            let ev = timeline::upsert(
                self.store,
                &part.part_key,
                &part.kind,
                part.message_id.as_deref(),
                part.data,
                now,
            )
            .map_err(internal)?;
            fx.broadcast(ServerMessage::SandboxEvent { event: ev });
            if let Some(ack_id) = &frame.ack_id {
                fx.to_sandbox.push(SandboxCommand::Ack {
                    ack_id: ack_id.clone(),
                });
            }
            return Ok(fx);
        }
        let data = event_data(frame);
        let message_id = event.message_id();
        match event {
            SandboxEvent::Heartbeat => {
                self.store
                    .execute(
                        "UPDATE sandbox SET last_heartbeat = ? WHERE id = 1",
                        &[now.into()],
                    )
                    .map_err(internal)?;
                return Ok(fx);
            }
            SandboxEvent::Ready { .. } => {
                self.set_sandbox_status("ready", None, now)
                    .map_err(internal)?;
                let ev = timeline::append(self.store, event.kind(), None, data, now)
                    .map_err(internal)?;
                fx.broadcast(ServerMessage::SandboxEvent { event: ev });
                fx.broadcast(ServerMessage::SandboxReady {
                    sandbox_id: frame.sandbox_id.clone(),
                });
                fx.broadcast(ServerMessage::SandboxStatus {
                    status: "ready".into(),
                    error: None,
                });
                fx.merge(self.dispatch_next(now)?);
            }
            SandboxEvent::ExecutionComplete {
                message_id,
                success,
                error,
            } => {
                let running = self.processing()?.map(|m| m.id);
                if running.as_deref() != Some(message_id.as_str()) {
                    // Late or foreign: it ends nothing, but the record stays on the timeline.
                    let ev = timeline::append(
                        self.store,
                        "warning",
                        Some(message_id),
                        warning("execution_complete for a prompt that is not running"),
                        now,
                    )
                    .map_err(internal)?;
                    fx.broadcast(ServerMessage::SandboxEvent { event: ev });
                } else {
                    fx.merge(self.complete(message_id, *success, error.clone(), now)?);
                    self.set_sandbox_status("ready", None, now)
                        .map_err(internal)?;
                    fx.broadcast(ServerMessage::SandboxStatus {
                        status: "ready".into(),
                        error: None,
                    });
                    let next = self.dispatch_next(now)?;
                    // With nothing more to run the agent is idle: a consistent moment to
                    // snapshot the sandbox's filesystem.
                    if next.to_sandbox.is_empty() {
                        fx.snapshot_sandbox = Some(frame.sandbox_id.clone());
                    }
                    fx.merge(next);
                }
            }
            SandboxEvent::BootStep { step, status, .. } => {
                let key = format!("boot:{}:{step}", frame.sandbox_id);
                let ev = timeline::upsert(self.store, &key, event.kind(), None, data, now)
                    .map_err(internal)?;
                fx.broadcast(ServerMessage::SandboxEvent { event: ev });
                // The lifecycle clients show: syncing → setup → start (then ready).
                let phase = match step.split(':').next().unwrap_or_default() {
                    "git_sync" => Some("syncing"),
                    "setup" => Some("setup"),
                    "start" => Some("start"),
                    _ => None,
                };
                let booting = matches!(
                    self.sandbox_status()?.as_str(),
                    "connecting" | "syncing" | "setup" | "start"
                );
                if let (Some(phase), true) = (phase, booting) {
                    if *status == inspect_protocol::sandbox::StepStatus::Started
                        && self.sandbox_status()? != phase
                    {
                        self.set_sandbox_status(phase, None, now)
                            .map_err(internal)?;
                        fx.broadcast(ServerMessage::SandboxStatus {
                            status: phase.into(),
                            error: None,
                        });
                    }
                }
            }
            SandboxEvent::Error {
                message_id: None,
                error,
            } => {
                // An error outside any prompt while booting is fatal to this sandbox: say so,
                // and let a later prompt spawn a new one (after the cooldown).
                let ev = timeline::append(self.store, event.kind(), None, data, now)
                    .map_err(internal)?;
                fx.broadcast(ServerMessage::SandboxEvent { event: ev });
                let status = self.sandbox_status()?;
                if matches!(
                    status.as_str(),
                    "spawning" | "connecting" | "syncing" | "setup" | "start"
                ) {
                    self.set_sandbox_status("failed", Some(error), now)
                        .map_err(internal)?;
                    // The next sandbox is a new one (from the last snapshot), not this again.
                    self.forget_workspace().map_err(internal)?;
                    fx.merge(self.status_effects("failed", Some(error), now)?);
                    fx.broadcast(ServerMessage::SandboxError {
                        error: error.clone(),
                    });
                }
            }
            SandboxEvent::SessionTitle { title } => {
                let bot = Actor {
                    user_id: "agent".into(),
                    name: "agent".into(),
                    email: None,
                    avatar: None,
                };
                fx.merge(self.set_title(title, &bot, now)?);
            }
            SandboxEvent::Artifact {
                artifact_type,
                url,
                metadata,
            } => {
                let artifact = Artifact {
                    id: ids::new_id("art"),
                    kind: artifact_type.clone(),
                    url: url.clone(),
                    metadata: Some(metadata.clone()),
                    created_at: now,
                };
                self.store
                    .execute(
                        "INSERT INTO artifacts (id, kind, url, metadata, created_at) VALUES (?, ?, ?, ?, ?)",
                        &[
                            artifact.id.as_str().into(),
                            artifact.kind.as_str().into(),
                            artifact.url.clone().into(),
                            metadata.to_string().into(),
                            now.into(),
                        ],
                    )
                    .map_err(internal)?;
                let ev = timeline::append(self.store, event.kind(), None, data, now)
                    .map_err(internal)?;
                fx.broadcast(ServerMessage::SandboxEvent { event: ev });
                fx.broadcast(ServerMessage::ArtifactCreated { artifact });
            }
            _ => {
                let ev = timeline::append(self.store, event.kind(), message_id, data, now)
                    .map_err(internal)?;
                fx.broadcast(ServerMessage::SandboxEvent { event: ev });
            }
        }
        if let Some(ack_id) = ack {
            self.store
                .execute(
                    "INSERT OR IGNORE INTO sandbox_acks (ack_id, seen_at) VALUES (?, ?)",
                    &[ack_id.as_str().into(), now.into()],
                )
                .map_err(internal)?;
            fx.to_sandbox.push(SandboxCommand::Ack {
                ack_id: ack_id.clone(),
            });
        }
        Ok(fx)
    }

    /// Sends the next prompt to a ready sandbox, if one waits.
    pub(crate) fn dispatch_next(&self, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        if self.sandbox_status()? != "ready" || !self.sandbox_connected()? {
            return Ok(fx);
        }
        let Some((message, more)) = self.start_next(now)? else {
            return Ok(fx);
        };
        fx.merge(more);
        self.set_sandbox_status("running", None, now)
            .map_err(internal)?;
        fx.broadcast(ServerMessage::SandboxStatus {
            status: "running".into(),
            error: None,
        });
        self.sandbox_active(now)?;
        fx.to_sandbox.push(self.prompt_command(&message)?);
        Ok(fx)
    }

    /// Sends the running prompt again to a sandbox that reconnected: the command may have
    /// been lost with the old socket. The supervisor knows the message and ignores a copy.
    pub(crate) fn redeliver_processing(&self) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        if let Some(message) = self.processing()? {
            fx.to_sandbox.push(self.prompt_command(&message)?);
        }
        Ok(fx)
    }

    /// The command that hands `message` to the sandbox, with its author's git identity.
    fn prompt_command(&self, message: &Message) -> EngineResult<SandboxCommand> {
        let author = self.participant(&message.author_id)?;
        let email = self
            .store
            .scalar(
                "SELECT email FROM participants WHERE id = ?",
                &[author.participant_id.as_str().into()],
            )
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .unwrap_or_else(|| {
                format!(
                    "{}@users.open-inspect.local",
                    author.user_id.replace(':', "-")
                )
            });
        let model = match &message.model {
            Some(m) => Some(m.clone()),
            None => self.state()?.model,
        };
        let attachments = self
            .store
            .scalar(
                "SELECT attachments FROM messages WHERE id = ?",
                &[message.id.as_str().into()],
            )
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .and_then(|a| serde_json::from_str(&a).ok())
            .unwrap_or_default();
        Ok(SandboxCommand::Prompt {
            message_id: message.id.clone(),
            content: message.content.clone(),
            model,
            reasoning_effort: message.reasoning_effort.clone(),
            attachments,
            author: PromptAuthor {
                participant_id: author.participant_id.clone(),
                name: author.name.clone(),
                git_identity: GitIdentity {
                    name: author.name,
                    email,
                },
            },
        })
    }
}

fn warning(message: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("scope".into(), Value::String("sandbox".into()));
    m.insert("message".into(), Value::String(message.into()));
    m
}

/// An event as the timeline keeps it: its fields without `type` and `messageId` (columns of
/// their own), with the sandbox that sent it.
fn event_data(frame: &SandboxFrame) -> Map<String, Value> {
    let mut data = match serde_json::to_value(&frame.event) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    data.remove("type");
    data.remove("messageId");
    data.insert("sandboxId".into(), Value::String(frame.sandbox_id.clone()));
    data
}

/// A streamed part (a text part's latest text, a tool call's latest state): stored in place
/// of its earlier versions, with nothing else to do.
pub(super) fn streamed_part(frame: &SandboxFrame) -> Option<timeline::Part> {
    let part_key = frame.event.part_key()?;
    Some(timeline::Part {
        part_key,
        kind: frame.event.kind().to_owned(),
        message_id: frame.event.message_id().map(str::to_owned),
        data: event_data(frame),
    })
}
