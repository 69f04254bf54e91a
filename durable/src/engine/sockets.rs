//! Client sockets: who is on which socket, what they send, and the subscribe deadline.

use super::{internal, timeline, Effects, EngineResult, Session};
use crate::store::{Cols, Store};
use inspect_protocol::client::{ClientMessage, PresenceStatus, ServerMessage};
use inspect_protocol::limits::{
    CLOSE_ALREADY_SUBSCRIBED, CLOSE_AUTH, CLOSE_SUBSCRIBE_TIMEOUT, MAX_CLIENT_FRAME_BYTES,
    SUBSCRIBE_DEADLINE_MS, SUBSCRIBE_EVENT_WINDOW,
};
use inspect_protocol::session::{Participant, PromptRequest};
use inspect_protocol::{ApiError, ErrorCode};

/// What kind of peer a socket belongs to.
pub const KIND_CLIENT: &str = "client";
pub const KIND_SANDBOX: &str = "sandbox";

impl<S: Store> Session<'_, S> {
    /// Records a newly accepted socket. A client must subscribe within the deadline.
    pub fn socket_opened(&self, ws_id: &str, kind: &str, now: i64) -> EngineResult<()> {
        self.store
            .execute(
                "INSERT OR REPLACE INTO ws_client_mapping (ws_id, kind, connected_at) VALUES (?, ?, ?)",
                &[ws_id.into(), kind.into(), now.into()],
            )
            .map_err(internal)
    }

    /// Forgets a socket; when it was someone's last, the others see them leave.
    pub fn socket_closed(&self, ws_id: &str) -> EngineResult<Effects> {
        let row = self
            .store
            .query(
                "SELECT participant_id, subscribed_at FROM ws_client_mapping WHERE ws_id = ?",
                &[ws_id.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next();
        self.store
            .execute(
                "DELETE FROM ws_client_mapping WHERE ws_id = ?",
                &[ws_id.into()],
            )
            .map_err(internal)?;
        let mut fx = Effects::none();
        let Some(row) = row else { return Ok(fx) };
        let mut c = Cols::new(row);
        let participant_id = c.opt_string().map_err(internal)?;
        let subscribed = c.opt_i64().map_err(internal)?.is_some();
        if let (Some(pid), true) = (participant_id, subscribed) {
            if !self.has_subscribed_socket(&pid)? {
                let p = self.participant(&pid)?;
                fx.broadcast(ServerMessage::PresenceLeave {
                    participant_id: pid,
                    user_id: p.user_id,
                });
            }
        }
        Ok(fx)
    }

    /// Drops records of sockets the runtime no longer holds (e.g. lost in a restart).
    pub fn prune_sockets(&self, live: &[String]) -> EngineResult<Effects> {
        let known = self.socket_ids(None)?;
        let mut fx = Effects::none();
        for ws_id in known.iter().filter(|id| !live.contains(id)) {
            fx.merge(self.socket_closed(ws_id)?);
        }
        Ok(fx)
    }

    pub(crate) fn has_subscribed_socket(&self, participant_id: &str) -> EngineResult<bool> {
        Ok(self
            .store
            .scalar(
                "SELECT COUNT(*) FROM ws_client_mapping WHERE participant_id = ? AND subscribed_at IS NOT NULL",
                &[participant_id.into()],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0)
            > 0)
    }

    /// The user id of the person a subscribed client socket speaks for.
    pub fn socket_user(&self, ws_id: &str) -> EngineResult<Option<String>> {
        Ok(self
            .store
            .query(
                "SELECT p.user_id FROM ws_client_mapping w JOIN participants p ON p.id = w.participant_id
                 WHERE w.ws_id = ? AND w.subscribed_at IS NOT NULL",
                &[ws_id.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .and_then(|v| v.into_string()))
    }

    /// Socket ids: all of them, or those of one kind that have subscribed.
    pub fn socket_ids(&self, subscribed_kind: Option<&str>) -> EngineResult<Vec<String>> {
        let rows = match subscribed_kind {
            None => self.store.query("SELECT ws_id FROM ws_client_mapping", &[]),
            Some(kind) => self.store.query(
                "SELECT ws_id FROM ws_client_mapping WHERE kind = ? AND subscribed_at IS NOT NULL",
                &[kind.into()],
            ),
        }
        .map_err(internal)?;
        Ok(rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().and_then(|v| v.into_string()))
            .collect())
    }

    pub fn sandbox_connected(&self) -> EngineResult<bool> {
        Ok(!self.socket_ids(Some(KIND_SANDBOX))?.is_empty())
    }

    /// When the next socket misses its subscribe deadline, if any is waiting.
    pub fn next_subscribe_deadline(&self) -> EngineResult<Option<i64>> {
        Ok(self
            .store
            .scalar(
                "SELECT MIN(connected_at) FROM ws_client_mapping WHERE kind = ? AND subscribed_at IS NULL",
                &[KIND_CLIENT.into()],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .map(|t| t + SUBSCRIBE_DEADLINE_MS))
    }

    /// Closes client sockets that did not subscribe in time.
    pub fn expire_unsubscribed(&self, now: i64) -> EngineResult<Effects> {
        let rows = self
            .store
            .query(
                "SELECT ws_id FROM ws_client_mapping WHERE kind = ? AND subscribed_at IS NULL AND connected_at + ? <= ?",
                &[KIND_CLIENT.into(), SUBSCRIBE_DEADLINE_MS.into(), now.into()],
            )
            .map_err(internal)?;
        let mut fx = Effects::none();
        for ws_id in rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().and_then(|v| v.into_string()))
        {
            fx.close(&ws_id, CLOSE_SUBSCRIBE_TIMEOUT, "no subscribe within 30 s");
            fx.merge(self.socket_closed(&ws_id)?);
        }
        Ok(fx)
    }

    /// The participant on a subscribed socket (one query: this runs for every frame).
    fn subscriber(&self, ws_id: &str) -> EngineResult<Option<Participant>> {
        self.store
            .query(
                "SELECT p.id, p.user_id, p.name, p.avatar, p.role, p.joined_at FROM ws_client_mapping w
                 JOIN participants p ON p.id = w.participant_id
                 WHERE w.ws_id = ? AND w.subscribed_at IS NOT NULL",
                &[ws_id.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next()
            .map(super::people::read_participant)
            .transpose()
            .map_err(internal)
    }

    /// Handles one text frame from a client socket. Never fails: a bad frame becomes an
    /// `error` message to its sender, and the socket stays open unless the protocol says
    /// to close it.
    pub fn on_client_frame(&self, ws_id: &str, text: &str, now: i64) -> Effects {
        let mut fx = self.on_client_frame_staged(ws_id, text, now);
        if let Some(sub) = fx.subscription.take() {
            if let Err(e) = self.record_subscription(&sub) {
                let mut failed = Effects::none();
                failed.to(ws_id, ServerMessage::error(&e));
                return failed;
            }
        }
        fx
    }

    /// [`Self::on_client_frame`] leaving a subscription for the caller to record with
    /// [`Self::record_subscription`] after sending the messages.
    pub fn on_client_frame_staged(&self, ws_id: &str, text: &str, now: i64) -> Effects {
        let mut request_id = None;
        let result = if text.len() > MAX_CLIENT_FRAME_BYTES {
            Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("a frame is at most {MAX_CLIENT_FRAME_BYTES} bytes"),
            ))
        } else {
            match serde_json::from_str::<ClientMessage>(text) {
                Err(e) => Err(ApiError::bad_request(format!("malformed message: {e}"))),
                Ok(msg) => {
                    request_id = match &msg {
                        ClientMessage::Prompt {
                            client_request_id, ..
                        }
                        | ClientMessage::CancelPrompt {
                            client_request_id, ..
                        } => client_request_id.clone(),
                        _ => None,
                    };
                    self.client_message(ws_id, msg, now)
                }
            }
        };
        match result {
            Ok(fx) => fx,
            Err(e) => {
                let mut fx = Effects::none();
                fx.to(
                    ws_id,
                    ServerMessage::Error {
                        code: e.code.as_str().to_owned(),
                        message: e.message,
                        client_request_id: request_id,
                    },
                );
                fx
            }
        }
    }

    fn client_message(&self, ws_id: &str, msg: ClientMessage, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        if let ClientMessage::Ping = msg {
            fx.to(
                ws_id,
                ServerMessage::Pong {
                    timestamp: Some(now),
                },
            );
            return Ok(fx);
        }
        if let ClientMessage::Subscribe { token, client_id } = msg {
            return self.subscribe(ws_id, &token, &client_id, now);
        }
        let Some(me) = self.subscriber(ws_id)? else {
            return Err(ApiError::unauthorized("subscribe first"));
        };
        match msg {
            ClientMessage::Ping | ClientMessage::Subscribe { .. } => {}
            ClientMessage::Prompt {
                content,
                model,
                reasoning_effort,
                attachments,
                client_request_id,
            } => {
                let req = PromptRequest {
                    content,
                    model,
                    reasoning_effort,
                    attachments,
                    client_request_id,
                    callback_context: None,
                };
                let (accepted, more) = self.enqueue(&me, &req, now)?;
                fx.to(
                    ws_id,
                    ServerMessage::PromptQueued {
                        message_id: accepted.message_id,
                        position: accepted.position,
                        client_request_id: req.client_request_id,
                    },
                );
                fx.merge(more);
            }
            ClientMessage::CancelPrompt {
                message_id,
                client_request_id,
            } => {
                fx.merge(self.cancel(&me, &message_id, client_request_id, now)?);
            }
            ClientMessage::Stop => {
                let connected = self.sandbox_connected()?;
                fx.merge(self.stop(&me, connected, now)?.1);
            }
            ClientMessage::Typing => {
                // Someone is about to prompt: warm a sandbox so it is ready by then.
                self.set_presence(&me.participant_id, PresenceStatus::Active, now)?;
                fx.merge(self.warm(now)?);
            }
            ClientMessage::Presence { status, .. } => {
                self.set_presence(&me.participant_id, status, now)?;
                let presence = self.presence_of_participant(&me.participant_id)?;
                fx.broadcast(ServerMessage::PresenceUpdate {
                    participants: vec![presence],
                });
            }
            ClientMessage::TerminalInput { terminal_id, data } => {
                fx.merge(self.terminal_input(&terminal_id, data, now)?);
            }
            ClientMessage::TerminalResize {
                terminal_id,
                cols,
                rows,
            } => {
                fx.merge(self.terminal_resize(&terminal_id, cols, rows)?);
            }
            ClientMessage::TerminalAttach { terminal_id } => {
                fx.merge(self.terminal_attach(ws_id, &terminal_id)?);
            }
            ClientMessage::FetchHistory { cursor, limit } => {
                let sid = self.session_id()?;
                let codec = timeline::CursorCodec { session_id: &sid };
                let before = match cursor {
                    Some(c) => codec.decode(&c)?,
                    None => timeline::NEWEST,
                };
                let page = timeline::window_older_than(
                    self.store,
                    &codec,
                    before,
                    timeline::clamp_limit(limit),
                )
                .map_err(internal)?;
                fx.to(
                    ws_id,
                    ServerMessage::HistoryPage {
                        events: page.events,
                        cursor: page.cursor,
                        has_more: page.has_more,
                    },
                );
            }
        }
        Ok(fx)
    }

    fn subscribe(
        &self,
        ws_id: &str,
        token: &str,
        client_id: &str,
        now: i64,
    ) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        let row = self
            .store
            .query(
                "SELECT subscribed_at FROM ws_client_mapping WHERE ws_id = ?",
                &[ws_id.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next();
        let already = match row {
            Some(r) => Cols::new(r).opt_i64().map_err(internal)?.is_some(),
            None => false,
        };
        if already {
            fx.close(ws_id, CLOSE_ALREADY_SUBSCRIBED, "already subscribed");
            fx.merge(self.socket_closed(ws_id)?);
            return Ok(fx);
        }
        if client_id.len() > 128 {
            return Err(ApiError::bad_request("clientId is at most 128 characters"));
        }
        let Some(pid) = self.participant_for_token(token, now)? else {
            fx.close(ws_id, CLOSE_AUTH, "invalid or expired token");
            fx.merge(self.socket_closed(ws_id)?);
            return Ok(fx);
        };
        // Nine reads decide and answer; two writes record it, after the answer is sent
        // (`Effects::subscription`, [`Self::record_subscription`]).
        let participant = self.participant(&pid)?;
        // Those present, the one joining among them, active as of now.
        let mut participants = self.present()?;
        let me = match participants.iter_mut().find(|p| p.participant_id == pid) {
            Some(me) => me,
            None => {
                // Not present before this socket: present from now.
                participants.push(inspect_protocol::client::Presence {
                    participant_id: participant.participant_id.clone(),
                    user_id: participant.user_id.clone(),
                    name: participant.name.clone(),
                    avatar: participant.avatar.clone(),
                    status: PresenceStatus::Active,
                    last_seen: now,
                });
                participants.last_mut().expect("just pushed")
            }
        };
        me.status = PresenceStatus::Active;
        me.last_seen = now;
        let me = me.clone();
        let session = self.state()?;
        let codec = timeline::CursorCodec {
            session_id: &session.id,
        };
        let timeline = timeline::window_older_than(
            self.store,
            &codec,
            timeline::NEWEST,
            SUBSCRIBE_EVENT_WINDOW,
        )
        .map_err(internal)?;
        fx.to(
            ws_id,
            ServerMessage::Subscribed {
                session,
                artifacts: self.artifacts()?,
                timeline,
                prompt_queue: self.queue()?,
                participant_id: pid.clone(),
                participant,
            },
        );
        fx.to(ws_id, ServerMessage::PresenceSync { participants });
        let tunnel_urls = self.tunnel_urls()?;
        if !tunnel_urls.is_empty() {
            fx.to(ws_id, ServerMessage::TunnelUrls { tunnel_urls });
        }
        fx.broadcast_except(
            ws_id,
            ServerMessage::PresenceUpdate {
                participants: vec![me],
            },
        );
        fx.subscription = Some(super::effects::Subscription {
            ws_id: ws_id.to_owned(),
            participant_id: pid,
            client_id: client_id.to_owned(),
            at: now,
        });
        Ok(fx)
    }

    /// Writes a subscription decided by `subscribe`: the socket's row and its
    /// participant's presence.
    pub fn record_subscription(&self, sub: &super::effects::Subscription) -> EngineResult<()> {
        self.store
            .atomically(|| {
                self.store.execute(
                    "INSERT INTO ws_client_mapping (ws_id, kind, participant_id, client_id, connected_at, subscribed_at)
                     VALUES (?, 'client', ?, ?, ?, ?)
                     ON CONFLICT(ws_id) DO UPDATE SET participant_id = excluded.participant_id, client_id = excluded.client_id, subscribed_at = excluded.subscribed_at",
                    &[
                        sub.ws_id.as_str().into(),
                        sub.participant_id.as_str().into(),
                        sub.client_id.as_str().into(),
                        sub.at.into(),
                        sub.at.into(),
                    ],
                )?;
                self.store.execute(
                    "UPDATE participants SET presence_status = 'active', last_seen = ? WHERE id = ?",
                    &[sub.at.into(), sub.participant_id.as_str().into()],
                )
            })
            .map_err(internal)
    }

    pub fn artifacts(&self) -> EngineResult<Vec<inspect_protocol::session::Artifact>> {
        self.store
            .query(
                "SELECT id, kind, url, metadata, created_at FROM artifacts ORDER BY created_at, id",
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .map(|row| {
                let mut c = Cols::new(row);
                Ok(inspect_protocol::session::Artifact {
                    id: c.string()?,
                    kind: c.string()?,
                    url: c.opt_string()?,
                    metadata: c.opt_string()?.and_then(|m| serde_json::from_str(&m).ok()),
                    created_at: c.i64()?,
                })
            })
            .collect::<crate::store::StoreResult<_>>()
            .map_err(internal)
    }
}
