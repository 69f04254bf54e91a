//! The prompt queue: FIFO, one `processing` at a time, at most ten unfinished, idempotent
//! by `clientRequestId`.

use super::{ids, internal, timeline, Effects, EngineResult, Session};
use crate::store::{Cols, Row, Store, StoreResult};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::limits::{MAX_PROMPT_BYTES, MAX_UNFINISHED_PROMPTS};
use inspect_protocol::session::{
    event_kind, Message, MessageStatus, Participant, PromptAccepted, PromptRequest, QueuedPrompt,
    SessionStatus,
};
use inspect_protocol::{ApiError, ErrorCode};
use serde_json::{json, Map, Value};

const MAX_ATTACHMENTS: usize = 10;
const MAX_ATTACHMENT_BYTES: usize = 1024 * 1024;
const MAX_CLIENT_REQUEST_ID: usize = 128;
/// When to try again after "too many unfinished prompts": a turn takes seconds at least.
const UNFINISHED_RETRY_SECS: u64 = 10;

const MESSAGE_COLUMNS: &str = "m.id, m.author_id, COALESCE(p.name, ''), m.content, m.model, m.reasoning_effort, m.status, m.client_request_id, m.error, m.created_at, m.started_at, m.completed_at";

fn read_message(row: Row) -> StoreResult<Message> {
    let mut c = Cols::new(row);
    Ok(Message {
        id: c.string()?,
        author_id: c.string()?,
        author_name: c.string()?,
        content: c.string()?,
        model: c.opt_string()?,
        reasoning_effort: c.opt_string()?,
        status: MessageStatus::parse(&c.string()?).unwrap_or(MessageStatus::Failed),
        client_request_id: c.opt_string()?,
        error: c.opt_string()?,
        created_at: c.i64()?,
        started_at: c.opt_i64()?,
        completed_at: c.opt_i64()?,
    })
}

/// Checks a prompt before anything is stored.
/// Whether a client's frame is a prompt that names a model or an effort: only then does
/// the catalog (a D1 read when the object has none cached) need to be at hand. Read with
/// the same type the frame is handled with, so a frame cannot name one unseen.
/// Whether a client's frame is a prompt (new work, which a spent budget refuses).
pub fn frame_is_prompt(text: &str) -> bool {
    text.contains("prompt")
        && matches!(
            serde_json::from_str::<inspect_protocol::client::ClientMessage>(text),
            Ok(inspect_protocol::client::ClientMessage::Prompt { .. })
        )
}

pub fn frame_names_a_model(text: &str) -> bool {
    matches!(
        serde_json::from_str::<inspect_protocol::client::ClientMessage>(text),
        Ok(inspect_protocol::client::ClientMessage::Prompt { model, reasoning_effort, .. })
            if model.is_some() || reasoning_effort.is_some()
    )
}

pub fn validate_prompt(req: &PromptRequest) -> EngineResult<()> {
    if req.content.trim().is_empty() {
        return Err(ApiError::bad_request("a prompt needs some content"));
    }
    if req.content.len() > MAX_PROMPT_BYTES {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "a prompt is at most {MAX_PROMPT_BYTES} bytes; this one is {}",
                req.content.len()
            ),
        ));
    }
    for (name, v) in [
        ("model", &req.model),
        ("reasoningEffort", &req.reasoning_effort),
    ] {
        if let Some(v) = v {
            if v.is_empty() || v.len() > 100 || v.chars().any(char::is_control) {
                return Err(ApiError::bad_request(format!("invalid {name}")));
            }
        }
    }
    if let Some(effort) = &req.reasoning_effort {
        use inspect_protocol::limits::REASONING_EFFORTS;
        if !REASONING_EFFORTS.contains(&effort.as_str()) {
            return Err(ApiError::bad_request(format!(
                "reasoningEffort is one of {}, not {effort:?}",
                REASONING_EFFORTS.join(", ")
            )));
        }
    }
    if let Some(id) = &req.client_request_id {
        if id.is_empty() || id.len() > MAX_CLIENT_REQUEST_ID {
            return Err(ApiError::bad_request(format!(
                "clientRequestId must be 1 to {MAX_CLIENT_REQUEST_ID} characters"
            )));
        }
    }
    if let Some(a) = &req.attachments {
        if a.len() > MAX_ATTACHMENTS {
            return Err(ApiError::bad_request(format!(
                "at most {MAX_ATTACHMENTS} attachments"
            )));
        }
        let size: usize = a
            .iter()
            .map(|x| {
                x.content.as_deref().map_or(0, str::len) + x.url.as_deref().map_or(0, str::len)
            })
            .sum();
        if size > MAX_ATTACHMENT_BYTES {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                "attachments are too large",
            ));
        }
    }
    Ok(())
}

/// The session's status, its unfinished prompts and its prompt rate: what a new prompt is
/// checked against.
struct QueueGate {
    status: SessionStatus,
    unfinished: i64,
    prompts_per_minute: Option<i64>,
}

impl<S: Store> Session<'_, S> {
    /// A prompt's model must be one the deployment enables, and its effort one that model
    /// (or the session's) accepts; the error names the choices.
    fn check_model_choice(&self, req: &PromptRequest) -> EngineResult<()> {
        let Some(models) = self.models else {
            return Ok(());
        };
        if let Some(model) = &req.model {
            inspect_models::check_model(models, model).map_err(ApiError::bad_request)?;
        }
        if let Some(effort) = &req.reasoning_effort {
            let model = match &req.model {
                Some(m) => Some(m.clone()),
                None => self.state()?.model,
            };
            inspect_models::check_effort(models, model.as_deref(), effort)
                .map_err(ApiError::bad_request)?;
        }
        Ok(())
    }

    /// Stores a prompt, puts it on the timeline as a `user_message` and queues it.
    /// Returns what the sender is told and what everyone else sees.
    pub fn enqueue(
        &self,
        author: &Participant,
        req: &PromptRequest,
        now: i64,
    ) -> EngineResult<(PromptAccepted, Effects)> {
        validate_prompt(req)?;
        self.check_model_choice(req)?;
        let QueueGate {
            status,
            unfinished,
            prompts_per_minute,
        } = self.queue_gate()?;
        if status == SessionStatus::Archived {
            return Err(ApiError::conflict(
                "the session is archived; unarchive it to send prompts",
            ));
        }
        if let Some(crid) = &req.client_request_id {
            if let Some(existing) = self.message_by_request_id(crid)? {
                if existing.content != req.content || existing.author_id != author.participant_id {
                    return Err(ApiError::conflict(
                        "clientRequestId was already used for a different prompt",
                    ));
                }
                let position = self.position(&existing.id)?;
                let accepted = PromptAccepted {
                    message_id: existing.id,
                    position,
                    status: existing.status,
                };
                return Ok((accepted, Effects::none()));
            }
        }
        self.check_prompt_rate(&author.participant_id, prompts_per_minute, now)?;
        if unfinished >= MAX_UNFINISHED_PROMPTS as i64 {
            return Err(ApiError::too_many(
                format!(
                    "at most {MAX_UNFINISHED_PROMPTS} prompts may wait at once; wait or cancel one"
                ),
                UNFINISHED_RETRY_SECS,
            ));
        }
        let id = ids::new_id("msg");
        let attachments = req
            .attachments
            .as_ref()
            .map(|a| serde_json::to_string(a).unwrap_or_else(|_| "[]".into()));
        let mut data = Map::new();
        data.insert("content".into(), Value::String(req.content.clone()));
        data.insert(
            "author".into(),
            json!({
                "participantId": author.participant_id,
                "userId": author.user_id,
                "name": author.name,
                "avatar": author.avatar,
            }),
        );
        for (k, v) in [
            ("model", &req.model),
            ("reasoningEffort", &req.reasoning_effort),
            ("clientRequestId", &req.client_request_id),
        ] {
            if let Some(v) = v {
                data.insert(k.into(), Value::String(v.clone()));
            }
        }
        if let Some(a) = &req.attachments {
            data.insert(
                "attachments".into(),
                serde_json::to_value(a).unwrap_or(Value::Null),
            );
        }
        let callback = req
            .callback_context
            .as_ref()
            .and_then(|c| serde_json::to_string(c).ok());
        let mut fx = Effects::none();
        let event = self
            .store
            .atomically(|| {
                self.store.execute(
                    "INSERT INTO messages (id, author_id, content, model, reasoning_effort, attachments, status, client_request_id, created_at, callback)
                     VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
                    &[
                        id.as_str().into(),
                        author.participant_id.as_str().into(),
                        req.content.as_str().into(),
                        req.model.clone().into(),
                        req.reasoning_effort.clone().into(),
                        attachments.into(),
                        req.client_request_id.clone().into(),
                        now.into(),
                        callback.clone().into(),
                    ],
                )?;
                // The first prompt activates the session; every prompt touches it.
                self.store.execute(
                    "UPDATE session SET status = CASE WHEN status = 'created' THEN 'active' ELSE status END,
                        updated_at = MAX(updated_at, ?) WHERE id = 1",
                    &[now.into()],
                )?;
                timeline::append(self.store, event_kind::USER_MESSAGE, Some(&id), data, now)
            })
            .map_err(internal)?;
        fx.broadcast(ServerMessage::SandboxEvent { event });
        if status == SessionStatus::Created {
            fx.broadcast(ServerMessage::SessionStatus {
                status: SessionStatus::Active,
            });
        }
        let prompt_queue = self.queue()?;
        let position = prompt_queue
            .iter()
            .find(|q| q.message_id == id)
            .map_or(0, |q| q.position);
        fx.broadcast(ServerMessage::PromptQueueUpdated { prompt_queue });
        fx.index_changed = true;
        // A ready sandbox takes it at once; with none alive, one should be spawned.
        fx.attention
            .extend(self.prompt_mentions(&author.user_id, &id, &req.content)?);
        // Only a ready sandbox takes it now (dispatch_next does nothing otherwise), and then
        // one is live. Else the prompt waits, and a sandbox is wanted exactly when none is
        // live (needs_sandbox without its queue read): one read of the sandbox for both.
        let sandbox = self.sandbox_row()?;
        if sandbox.as_ref().is_some_and(|r| r.status == "ready") {
            fx.merge(self.dispatch_next(now)?);
        }
        fx.spawn_wanted = !sandbox.is_some_and(|r| r.is_live());
        Ok((
            PromptAccepted {
                message_id: id,
                position,
                status: MessageStatus::Pending,
            },
            fx,
        ))
    }

    /// One person's prompts to this session within the last minute, against the rate
    /// (`limit`, the session's own; the default when it has none).
    fn check_prompt_rate(&self, author_id: &str, limit: Option<i64>, now: i64) -> EngineResult<()> {
        let limit = limit.map_or(inspect_protocol::limits::DEFAULT_PROMPTS_PER_MINUTE, |l| {
            l as u32
        });
        let recent: Vec<i64> = self
            .store
            .query(
                "SELECT created_at FROM messages WHERE author_id = ? AND created_at > ? ORDER BY created_at",
                &[author_id.into(), (now - 60_000).into()],
            )
            .map_err(internal)?
            .into_iter()
            .filter_map(|r| r.into_iter().next().and_then(|v| v.as_i64()))
            .collect();
        inspect_protocol::limits::sliding_window(&recent, limit, 60_000, now).map_err(|secs| {
            ApiError::too_many(
                format!("at most {limit} prompts a minute from one person; try again in {secs} s"),
                secs,
            )
        })
    }

    /// Cancels a prompt that has not started.
    pub fn cancel(
        &self,
        actor: &Participant,
        message_id: &str,
        client_request_id: Option<String>,
        now: i64,
    ) -> EngineResult<Effects> {
        let message = self.message(message_id)?.ok_or_else(|| {
            ApiError::not_found(format!("no prompt {message_id} in this session"))
        })?;
        match message.status {
            MessageStatus::Pending => {}
            MessageStatus::Cancelled => return Ok(Effects::none()),
            MessageStatus::Processing => {
                return Err(ApiError::conflict(
                    "the prompt is already running; use stop",
                ))
            }
            MessageStatus::Completed | MessageStatus::Failed => {
                return Err(ApiError::conflict("the prompt has already finished"))
            }
        }
        let mut data = Map::new();
        data.insert(
            "by".into(),
            json!({"participantId": actor.participant_id, "name": actor.name}),
        );
        let event = self
            .store
            .atomically(|| {
                self.store.execute(
                    "UPDATE messages SET status = 'cancelled', completed_at = ? WHERE id = ? AND status = 'pending'",
                    &[now.into(), message_id.into()],
                )?;
                self.touch(now)?;
                timeline::append(self.store, event_kind::PROMPT_CANCELLED, Some(message_id), data, now)
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxEvent { event });
        fx.broadcast(ServerMessage::PromptCancelled {
            message_id: message_id.to_owned(),
            client_request_id,
        });
        fx.broadcast(ServerMessage::PromptQueueUpdated {
            prompt_queue: self.queue()?,
        });
        Ok(fx)
    }

    /// Stops the running prompt. With no sandbox to tell, it ends here and now; with one,
    /// the shell forwards the stop and the sandbox's `execution_complete` ends it.
    pub fn stop(
        &self,
        actor: &Participant,
        sandbox_connected: bool,
        now: i64,
    ) -> EngineResult<(Option<String>, Effects)> {
        self.status()?;
        let Some(running) = self.processing()? else {
            return Ok((None, Effects::none()));
        };
        let mut data = Map::new();
        data.insert(
            "by".into(),
            json!({"participantId": actor.participant_id, "name": actor.name}),
        );
        let mut fx = Effects::none();
        let event = self
            .store
            .atomically(|| {
                timeline::append(
                    self.store,
                    event_kind::STOP_REQUESTED,
                    Some(&running.id),
                    data,
                    now,
                )
            })
            .map_err(internal)?;
        fx.broadcast(ServerMessage::SandboxEvent { event });
        if sandbox_connected {
            fx.to_sandbox
                .push(inspect_protocol::sandbox::SandboxCommand::Stop {
                    message_id: Some(running.id.clone()),
                });
        } else {
            fx.merge(self.complete(&running.id, false, Some("stopped".into()), now)?);
        }
        Ok((Some(running.id), fx))
    }

    /// Starts the oldest pending prompt if none is running; returns it.
    pub fn start_next(&self, now: i64) -> EngineResult<Option<(Message, Effects)>> {
        if self.processing()?.is_some() {
            return Ok(None);
        }
        let Some(next) = self.first_with_status(MessageStatus::Pending)? else {
            return Ok(None);
        };
        self.store
            .atomically(|| {
                self.store.execute(
                    "UPDATE messages SET status = 'processing', started_at = ? WHERE id = ?",
                    &[now.into(), next.id.as_str().into()],
                )?;
                self.touch(now)
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::ProcessingStatus {
            is_processing: true,
            message_id: Some(next.id.clone()),
        });
        fx.broadcast(ServerMessage::PromptQueueUpdated {
            prompt_queue: self.queue()?,
        });
        let started = self.message(&next.id)?.unwrap_or(next);
        Ok(Some((started, fx)))
    }

    /// Ends the running prompt `message_id`. Ending one that is not running changes nothing.
    pub fn complete(
        &self,
        message_id: &str,
        success: bool,
        error: Option<String>,
        now: i64,
    ) -> EngineResult<Effects> {
        let Some(m) = self.message(message_id)? else {
            return Ok(Effects::none());
        };
        if m.status != MessageStatus::Processing {
            return Ok(Effects::none());
        }
        let status = if success {
            MessageStatus::Completed
        } else {
            MessageStatus::Failed
        };
        let mut data = Map::new();
        data.insert("success".into(), Value::Bool(success));
        if let Some(e) = &error {
            data.insert("error".into(), Value::String(e.clone()));
        }
        let event = self
            .store
            .atomically(|| {
                self.store.execute(
                    "UPDATE messages SET status = ?, error = ?, completed_at = ? WHERE id = ?",
                    &[
                        status.as_str().into(),
                        error.clone().into(),
                        now.into(),
                        message_id.into(),
                    ],
                )?;
                self.touch(now)?;
                timeline::append(
                    self.store,
                    event_kind::EXECUTION_COMPLETE,
                    Some(message_id),
                    data,
                    now,
                )
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxEvent { event });
        fx.broadcast(ServerMessage::ProcessingStatus {
            is_processing: false,
            message_id: None,
        });
        fx.broadcast(ServerMessage::PromptQueueUpdated {
            prompt_queue: self.queue()?,
        });
        fx.index_changed = true;
        fx.attention
            .extend(self.prompt_ended(message_id, success, error.as_deref())?);
        if let Some(completion) = self.completion(message_id, success, error)? {
            fx.completions.push(completion);
        }
        Ok(fx)
    }

    pub fn message(&self, id: &str) -> EngineResult<Option<Message>> {
        self.one_message("m.id = ?", &[id.into()])
    }

    fn message_by_request_id(&self, crid: &str) -> EngineResult<Option<Message>> {
        self.one_message("m.client_request_id = ?", &[crid.into()])
    }

    pub fn processing(&self) -> EngineResult<Option<Message>> {
        self.first_with_status(MessageStatus::Processing)
    }

    fn first_with_status(&self, status: MessageStatus) -> EngineResult<Option<Message>> {
        self.one_message("m.status = ? ORDER BY m.seq", &[status.as_str().into()])
    }

    fn one_message(
        &self,
        filter: &str,
        params: &[crate::store::SqlValue],
    ) -> EngineResult<Option<Message>> {
        self.store
            .query(
                &format!("SELECT {MESSAGE_COLUMNS} FROM messages m LEFT JOIN participants p ON p.id = m.author_id WHERE {filter} LIMIT 1"),
                params,
            )
            .map_err(internal)?
            .into_iter()
            .next()
            .map(read_message)
            .transpose()
            .map_err(internal)
    }

    pub fn messages(&self) -> EngineResult<Vec<Message>> {
        self.store
            .query(
                &format!("SELECT {MESSAGE_COLUMNS} FROM messages m LEFT JOIN participants p ON p.id = m.author_id ORDER BY m.seq"),
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .map(read_message)
            .collect::<StoreResult<_>>()
            .map_err(internal)
    }

    /// What decides whether a prompt may be queued, in one query.
    fn queue_gate(&self) -> EngineResult<QueueGate> {
        let mut c = self.session_row(
            "SELECT status, (SELECT COUNT(*) FROM messages WHERE status IN ('pending', 'processing')), prompts_per_minute FROM session WHERE id = 1",
            &[],
        )?;
        let status = c.string().map_err(internal)?;
        let unfinished = c.i64().map_err(internal)?;
        let prompts_per_minute = c.opt_i64().map_err(internal)?;
        let status = SessionStatus::parse(&status)
            .ok_or_else(|| ApiError::internal(format!("unknown status {status}")))?;
        Ok(QueueGate {
            status,
            unfinished,
            prompts_per_minute,
        })
    }

    /// 1-based place among unfinished prompts; 0 once finished.
    fn position(&self, message_id: &str) -> EngineResult<i64> {
        Ok(self
            .store
            .scalar(
                "SELECT CASE WHEN m.status IN ('pending', 'processing')
                    THEN (SELECT COUNT(*) FROM messages o WHERE o.status IN ('pending', 'processing') AND o.seq <= m.seq)
                    ELSE 0 END
                 FROM messages m WHERE m.id = ?",
                &[message_id.into()],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0))
    }

    /// The unfinished prompts in the order they run.
    pub fn queue(&self) -> EngineResult<Vec<QueuedPrompt>> {
        let rows = self
            .store
            .query(
                "SELECT m.id, m.author_id, COALESCE(p.name, ''), m.content, m.status, m.created_at FROM messages m
                 LEFT JOIN participants p ON p.id = m.author_id
                 WHERE m.status IN ('pending', 'processing') ORDER BY m.seq",
                &[],
            )
            .map_err(internal)?;
        rows.into_iter()
            .enumerate()
            .map(|(i, row)| {
                let mut c = Cols::new(row);
                Ok(QueuedPrompt {
                    message_id: c.string()?,
                    author_id: c.string()?,
                    author_name: c.string()?,
                    content: c.string()?,
                    status: MessageStatus::parse(&c.string()?).unwrap_or(MessageStatus::Pending),
                    position: i as i64 + 1,
                    created_at: c.i64()?,
                })
            })
            .collect::<StoreResult<_>>()
            .map_err(internal)
    }
}
