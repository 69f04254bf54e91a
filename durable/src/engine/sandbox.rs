//! The sandbox seen from the session: spawn tickets, who may connect, what it reports,
//! and feeding it the queue one prompt at a time.

use super::sockets::KIND_SANDBOX;
use super::{ids, internal, timeline, Effects, EngineResult, Session};
use crate::store::{Cols, Store};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::sandbox::{
    GitIdentity, PromptAuthor, SandboxCommand, SandboxEvent, SandboxFrame, MAX_BATCH_EVENTS,
    MAX_SANDBOX_FRAME_BYTES,
};
use inspect_protocol::session::{Actor, Artifact, MessageStatus};
use serde_json::{Map, Value};

/// After a failed spawn, no new attempt for this long.
pub const SPAWN_COOLDOWN_MS: i64 = 30_000;

/// Sandbox states a spawn must not repeat while in one of them.
const LIVE_STATES: &[&str] = &[
    "spawning",
    "connecting",
    "syncing",
    "setup",
    "start",
    "ready",
    "running",
    "snapshotting",
];

/// What a spawn needs: the sandbox's id and its one-time bearer token.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnTicket {
    pub sandbox_id: String,
    pub token: String,
}

/// Why a sandbox may not connect, as the HTTP status the supervisor sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxRefusal {
    /// 401: no token, or not this session's.
    BadToken,
    /// 403: the token is for another sandbox id.
    WrongSandbox,
    /// 404: no session here.
    NoSession,
    /// 410: this sandbox was replaced or stopped.
    Gone,
}

impl SandboxRefusal {
    pub fn status(self) -> u16 {
        match self {
            SandboxRefusal::BadToken => 401,
            SandboxRefusal::WrongSandbox => 403,
            SandboxRefusal::NoSession => 404,
            SandboxRefusal::Gone => 410,
        }
    }
}

struct SandboxRow {
    sandbox_id: String,
    status: String,
    token_hash: Option<String>,
}

impl<S: Store> Session<'_, S> {
    fn sandbox_row(&self) -> EngineResult<Option<SandboxRow>> {
        self.store
            .query(
                "SELECT sandbox_id, status, token_hash FROM sandbox WHERE id = 1",
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .next()
            .map(|row| {
                let mut c = Cols::new(row);
                Ok(SandboxRow {
                    sandbox_id: c.opt_string()?.unwrap_or_default(),
                    status: c.string()?,
                    token_hash: c.opt_string()?,
                })
            })
            .transpose()
            .map_err(internal)
    }

    /// The current sandbox's status (`none` when there never was one).
    pub fn sandbox_status(&self) -> EngineResult<String> {
        Ok(self
            .sandbox_row()?
            .map_or_else(|| "none".into(), |r| r.status))
    }

    fn set_sandbox_status(
        &self,
        status: &str,
        error: Option<&str>,
        now: i64,
    ) -> crate::store::StoreResult<()> {
        self.store.execute(
            "UPDATE sandbox SET status = ?, error = ?, updated_at = ? WHERE id = 1",
            &[status.into(), error.into(), now.into()],
        )?;
        self.store.execute(
            "UPDATE session SET sandbox_status = ? WHERE id = 1",
            &[status.into()],
        )
    }

    pub(crate) fn status_effects(
        &self,
        status: &str,
        error: Option<&str>,
        now: i64,
    ) -> EngineResult<Effects> {
        let mut data = Map::new();
        data.insert("status".into(), Value::String(status.into()));
        if let Some(e) = error {
            data.insert("error".into(), Value::String(e.into()));
        }
        let event =
            timeline::append(self.store, "sandbox_status", None, data, now).map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxEvent { event });
        fx.broadcast(ServerMessage::SandboxStatus {
            status: status.into(),
            error: error.map(str::to_owned),
        });
        Ok(fx)
    }

    /// Whether a prompt waits with no live sandbox to run it.
    pub fn needs_sandbox(&self) -> EngineResult<bool> {
        let live = self
            .sandbox_row()?
            .is_some_and(|r| LIVE_STATES.contains(&r.status.as_str()));
        let waiting = self
            .queue()?
            .iter()
            .any(|q| q.status == MessageStatus::Pending);
        Ok(waiting && !live)
    }

    /// A person is typing: start a sandbox if none is alive (and the session takes prompts),
    /// or keep the live one from counting as idle.
    pub fn warm(&self, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        let live = self
            .sandbox_row()?
            .is_some_and(|r| LIVE_STATES.contains(&r.status.as_str()));
        if live {
            self.sandbox_active(now)?;
            return Ok(fx);
        }
        let archived = self.status()? == inspect_protocol::session::SessionStatus::Archived;
        if archived || self.spawn_cooling_down(now)? {
            return Ok(fx);
        }
        fx.broadcast(ServerMessage::SandboxWarming);
        fx.spawn_wanted = true;
        Ok(fx)
    }

    /// Starts a spawn: a new sandbox id and token (only the hash is kept). `None` when a
    /// sandbox is already alive or on its way, so there are never two.
    pub fn begin_spawn(&self, now: i64) -> EngineResult<Option<(SpawnTicket, Effects)>> {
        self.session_id()?;
        if self.spawn_cooling_down(now)? {
            return Ok(None);
        }
        if self
            .sandbox_row()?
            .is_some_and(|r| LIVE_STATES.contains(&r.status.as_str()))
        {
            return Ok(None);
        }
        let ticket = SpawnTicket {
            sandbox_id: ids::new_id("sb"),
            token: ids::new_secret(),
        };
        self.store
            .atomically(|| {
                self.store.execute(
                    "INSERT INTO sandbox (id, sandbox_id, status, token_hash, spawned_at, updated_at) VALUES (1, ?, 'spawning', ?, ?, ?)
                     ON CONFLICT(id) DO UPDATE SET sandbox_id = excluded.sandbox_id, status = 'spawning', token_hash = excluded.token_hash,
                        spawned_at = excluded.spawned_at, connected_at = NULL, last_heartbeat = NULL, error = NULL, tunnel_urls = NULL, updated_at = excluded.updated_at",
                    &[ticket.sandbox_id.as_str().into(), ids::hash_secret(&ticket.token).into(), now.into(), now.into()],
                )?;
                self.store.execute("UPDATE session SET sandbox_status = 'spawning' WHERE id = 1", &[])
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxSpawning {
            sandbox_id: ticket.sandbox_id.clone(),
        });
        fx.merge(self.status_effects("spawning", None, now)?);
        Ok(Some((ticket, fx)))
    }

    /// Whether the last spawn failed less than [`SPAWN_COOLDOWN_MS`] ago.
    pub fn spawn_cooling_down(&self, now: i64) -> EngineResult<bool> {
        let failed_at = self
            .store
            .scalar(
                "SELECT updated_at FROM sandbox WHERE id = 1 AND status = 'failed'",
                &[],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64());
        Ok(failed_at.is_some_and(|t| now - t < SPAWN_COOLDOWN_MS))
    }

    /// The provider took the spawn: wait for the sandbox to connect.
    pub fn spawn_accepted(&self, sandbox_id: &str, now: i64) -> EngineResult<Effects> {
        if !self
            .sandbox_row()?
            .is_some_and(|r| r.sandbox_id == sandbox_id && r.status == "spawning")
        {
            return Ok(Effects::none());
        }
        self.set_sandbox_status("connecting", None, now)
            .map_err(internal)?;
        self.status_effects("connecting", None, now)
    }

    /// A snapshot of a live sandbox begins: clients see `snapshotting` until it ends.
    pub fn snapshot_started(
        &self,
        sandbox_id: &str,
        now: i64,
    ) -> EngineResult<(Option<String>, Effects)> {
        let Some(row) = self.sandbox_row()?.filter(|r| r.sandbox_id == sandbox_id) else {
            return Ok((None, Effects::none()));
        };
        let mut fx = Effects::none();
        if !matches!(row.status.as_str(), "ready" | "stopped") {
            return Ok((None, fx));
        }
        self.set_sandbox_status("snapshotting", None, now)
            .map_err(internal)?;
        fx.broadcast(ServerMessage::SandboxStatus {
            status: "snapshotting".into(),
            error: None,
        });
        Ok((Some(row.status), fx))
    }

    /// The snapshot ended: back to where the sandbox was.
    pub fn snapshot_ended(
        &self,
        sandbox_id: &str,
        previous: &str,
        now: i64,
    ) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        if self
            .sandbox_row()?
            .is_some_and(|r| r.sandbox_id == sandbox_id && r.status == "snapshotting")
        {
            self.set_sandbox_status(previous, None, now)
                .map_err(internal)?;
            fx.broadcast(ServerMessage::SandboxStatus {
                status: previous.into(),
                error: None,
            });
            // A prompt that arrived meanwhile runs now.
            fx.merge(self.dispatch_next(now)?);
        }
        Ok(fx)
    }

    /// The provider exposed the sandbox's ports: keep the URLs and tell the clients.
    pub fn set_tunnel_urls(
        &self,
        sandbox_id: &str,
        urls: &std::collections::BTreeMap<String, String>,
    ) -> EngineResult<Effects> {
        if urls.is_empty()
            || self
                .sandbox_row()?
                .is_none_or(|r| r.sandbox_id != sandbox_id)
        {
            return Ok(Effects::none());
        }
        let json = serde_json::to_string(urls)
            .map_err(|e| inspect_protocol::ApiError::internal(e.to_string()))?;
        self.store
            .execute(
                "UPDATE sandbox SET tunnel_urls = ? WHERE id = 1",
                &[json.into()],
            )
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::TunnelUrls {
            tunnel_urls: urls.clone(),
        });
        Ok(fx)
    }

    /// The current sandbox's tunnel URLs, port → URL.
    pub fn tunnel_urls(&self) -> EngineResult<std::collections::BTreeMap<String, String>> {
        Ok(self
            .store
            .scalar("SELECT tunnel_urls FROM sandbox WHERE id = 1", &[])
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default())
    }

    /// The provider refused or failed the spawn.
    pub fn spawn_failed(&self, sandbox_id: &str, error: &str, now: i64) -> EngineResult<Effects> {
        if self
            .sandbox_row()?
            .is_none_or(|r| r.sandbox_id != sandbox_id)
        {
            return Ok(Effects::none());
        }
        self.set_sandbox_status("failed", Some(error), now)
            .map_err(internal)?;
        self.store
            .execute("INSERT INTO spawn_failures (at) VALUES (?)", &[now.into()])
            .map_err(internal)?;
        let mut fx = self.status_effects("failed", Some(error), now)?;
        if self.given_up(now)? {
            fx.broadcast(ServerMessage::SandboxError {
                error: format!(
                    "{} spawns failed in 5 minutes; not retrying until someone sends a prompt",
                    super::deadlines::MAX_SPAWN_FAILURES
                ),
            });
        }
        fx.broadcast(ServerMessage::SandboxError {
            error: error.into(),
        });
        Ok(fx)
    }

    /// Checks a connecting sandbox's credentials. Tokens are compared in constant time.
    pub fn authenticate_sandbox(
        &self,
        token: &str,
        sandbox_id: &str,
    ) -> EngineResult<Result<(), SandboxRefusal>> {
        if !self.exists()? {
            return Ok(Err(SandboxRefusal::NoSession));
        }
        let Some(row) = self.sandbox_row()? else {
            return Ok(Err(SandboxRefusal::BadToken));
        };
        let presented = ids::hash_secret(token);
        let token_ok = row
            .token_hash
            .as_deref()
            .is_some_and(|h| ids::hashes_equal(h, &presented));
        if !token_ok {
            return Ok(Err(SandboxRefusal::BadToken));
        }
        if row.sandbox_id != sandbox_id {
            return Ok(Err(SandboxRefusal::WrongSandbox));
        }
        if !LIVE_STATES.contains(&row.status.as_str()) {
            return Ok(Err(SandboxRefusal::Gone));
        }
        Ok(Ok(()))
    }

    /// A sandbox socket was accepted. Older sandbox sockets are closed: one sandbox speaks.
    pub fn sandbox_opened(&self, ws_id: &str, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        for old in self.socket_ids(Some(KIND_SANDBOX))? {
            fx.close(&old, 1000, "replaced by a newer connection");
            fx.merge(self.socket_closed(&old)?);
        }
        self.store
            .atomically(|| {
                self.store.execute(
                    "INSERT OR REPLACE INTO ws_client_mapping (ws_id, kind, connected_at, subscribed_at) VALUES (?, ?, ?, ?)",
                    &[ws_id.into(), KIND_SANDBOX.into(), now.into(), now.into()],
                )?;
                self.store.execute(
                    "UPDATE sandbox SET connected_at = ?, last_heartbeat = ?, disconnected_at = NULL WHERE id = 1",
                    &[now.into(), now.into()],
                )
            })
            .map_err(internal)?;
        // A sandbox that reconnects while ready gets the queue again (nothing is lost if it
        // was mid-prompt: the processing prompt stays processing until it completes).
        if self.sandbox_status()? == "ready" {
            fx.merge(self.dispatch_next(now)?);
        }
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
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                refuse(&mut fx, "bad_request", format!("malformed frame: {e}"));
                return fx;
            }
        };
        let frames: Vec<Value> = if value.get("type").and_then(Value::as_str) == Some("batch") {
            match value.get("events").and_then(Value::as_array) {
                Some(events) if events.len() <= MAX_BATCH_EVENTS => events.clone(),
                Some(_) => {
                    refuse(
                        &mut fx,
                        "bad_request",
                        format!("a batch holds at most {MAX_BATCH_EVENTS} events"),
                    );
                    return fx;
                }
                None => {
                    refuse(
                        &mut fx,
                        "bad_request",
                        "a batch needs an `events` array".into(),
                    );
                    return fx;
                }
            }
        } else {
            vec![value]
        };
        let current = match self.sandbox_row() {
            Ok(Some(r)) => r.sandbox_id,
            _ => String::new(),
        };
        for raw in frames {
            let frame: SandboxFrame = match serde_json::from_value(raw) {
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
            match self.ingest(&frame, now) {
                Ok(more) => fx.merge(more),
                Err(e) => refuse(&mut fx, e.code.as_str(), e.message),
            }
        }
        fx
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
        let mut data = match serde_json::to_value(event) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        data.remove("type");
        data.remove("messageId");
        data.insert("sandboxId".into(), Value::String(frame.sandbox_id.clone()));
        let message_id = event.message_id();
        if !matches!(event, SandboxEvent::Heartbeat) {
            self.sandbox_active(now)?;
        }
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
            SandboxEvent::Token {
                message_id,
                part_id,
                ..
            } => {
                let key = format!("token:{message_id}:{}", part_id.as_deref().unwrap_or(""));
                let ev =
                    timeline::upsert(self.store, &key, event.kind(), Some(message_id), data, now)
                        .map_err(internal)?;
                fx.broadcast(ServerMessage::SandboxEvent { event: ev });
            }
            SandboxEvent::ToolCall { call_id, .. } => {
                let key = format!("tool:{call_id}");
                let ev = timeline::upsert(self.store, &key, event.kind(), message_id, data, now)
                    .map_err(internal)?;
                fx.broadcast(ServerMessage::SandboxEvent { event: ev });
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
        fx.to_sandbox.push(SandboxCommand::Prompt {
            message_id: message.id.clone(),
            content: message.content.clone(),
            model,
            reasoning_effort: message.reasoning_effort.clone(),
            author: PromptAuthor {
                participant_id: author.participant_id.clone(),
                name: author.name.clone(),
                git_identity: GitIdentity {
                    name: author.name,
                    email,
                },
            },
        });
        Ok(fx)
    }
}

fn warning(message: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("scope".into(), Value::String("sandbox".into()));
    m.insert("message".into(), Value::String(message.into()));
    m
}
