//! Participants, their WS tokens, and presence.

use super::{ids, internal, EngineResult, Session};
use crate::store::{Cols, Store, StoreResult};
use inspect_protocol::client::{Presence, PresenceStatus};
use inspect_protocol::limits::WS_TOKEN_TTL_MS;
use inspect_protocol::session::{Actor, Participant, WsTokenResponse};
use inspect_protocol::ApiError;

pub(crate) const PARTICIPANT_COLUMNS: &str = "id, user_id, name, avatar, role, joined_at";

pub(crate) fn read_participant(row: crate::store::Row) -> StoreResult<Participant> {
    let mut c = Cols::new(row);
    Ok(Participant {
        participant_id: c.string()?,
        user_id: c.string()?,
        name: c.string()?,
        avatar: c.opt_string()?,
        role: c.string()?,
        joined_at: c.i64()?,
    })
}

impl<S: Store> Session<'_, S> {
    /// The participant for a user, created on first contact. Name and avatar follow the
    /// latest sign-in.
    pub(crate) fn upsert_participant(
        &self,
        actor: &Actor,
        role: &str,
        now: i64,
    ) -> StoreResult<String> {
        let existing = self
            .store
            .scalar(
                "SELECT id FROM participants WHERE user_id = ?",
                &[actor.user_id.as_str().into()],
            )?
            .and_then(|v| v.into_string());
        if let Some(id) = existing {
            self.store.execute(
                "UPDATE participants SET name = ?, email = ?, avatar = ?, last_seen = ? WHERE id = ?",
                &[
                    actor.name.as_str().into(),
                    actor.email.clone().into(),
                    actor.avatar.clone().into(),
                    now.into(),
                    id.as_str().into(),
                ],
            )?;
            return Ok(id);
        }
        let id = ids::new_id("part");
        self.store.execute(
            "INSERT INTO participants (id, user_id, name, email, avatar, role, joined_at, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            &[
                id.as_str().into(),
                actor.user_id.as_str().into(),
                actor.name.as_str().into(),
                actor.email.clone().into(),
                actor.avatar.clone().into(),
                role.into(),
                now.into(),
                now.into(),
            ],
        )?;
        Ok(id)
    }

    /// Mints a WS token for `actor` (joining them as a participant if they are new).
    /// Only the token's hash is kept.
    pub fn mint_ws_token(&self, actor: &Actor, now: i64) -> EngineResult<(WsTokenResponse, bool)> {
        self.session_id()?;
        let token = ids::new_secret();
        let expires_at = now + WS_TOKEN_TTL_MS;
        let (participant_id, joined) = self
            .store
            .atomically(|| {
                let before = self.participant_count()?;
                let pid = self.upsert_participant(actor, "member", now)?;
                let joined = self.participant_count()? > before;
                // Expired tokens are of no use to anyone; drop them as we go.
                self.store.execute("DELETE FROM ws_tokens WHERE expires_at <= ?", &[now.into()])?;
                self.store.execute(
                    "INSERT INTO ws_tokens (token_hash, participant_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
                    &[ids::hash_secret(&token).into(), pid.as_str().into(), now.into(), expires_at.into()],
                )?;
                if joined {
                    self.touch(now)?;
                }
                Ok((pid, joined))
            })
            .map_err(internal)?;
        Ok((
            WsTokenResponse {
                token,
                participant_id,
                expires_at,
            },
            joined,
        ))
    }

    fn participant_count(&self) -> StoreResult<i64> {
        Ok(self
            .store
            .scalar("SELECT COUNT(*) FROM participants", &[])?
            .and_then(|v| v.as_i64())
            .unwrap_or(0))
    }

    /// The participant a token belongs to, if it is valid and unexpired. The token's
    /// SHA-256 is looked up by its key (one row, however many tokens the session has
    /// minted in a day), and the stored hash is compared with it in constant time. The
    /// lookup's timing can tell a guesser only about the hash of their own guess, never
    /// about a token that exists.
    pub fn participant_for_token(&self, token: &str, now: i64) -> EngineResult<Option<String>> {
        let presented = ids::hash_secret(token);
        let row = self
            .store
            .query(
                "SELECT token_hash, participant_id FROM ws_tokens WHERE token_hash = ? AND expires_at > ?",
                &[presented.as_str().into(), now.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next();
        let Some(row) = row else {
            return Ok(None);
        };
        let mut c = Cols::new(row);
        let hash = c.string().map_err(internal)?;
        let pid = c.string().map_err(internal)?;
        Ok(ids::hashes_equal(&hash, &presented).then_some(pid))
    }

    pub fn participant(&self, participant_id: &str) -> EngineResult<Participant> {
        self.store
            .query(
                &format!("SELECT {PARTICIPANT_COLUMNS} FROM participants WHERE id = ?"),
                &[participant_id.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next()
            .map(read_participant)
            .transpose()
            .map_err(internal)?
            .ok_or_else(|| ApiError::not_found("participant not found"))
    }

    pub fn participant_by_user(&self, user_id: &str) -> EngineResult<Option<Participant>> {
        self.store
            .query(
                &format!("SELECT {PARTICIPANT_COLUMNS} FROM participants WHERE user_id = ?"),
                &[user_id.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next()
            .map(read_participant)
            .transpose()
            .map_err(internal)
    }

    pub fn participants(&self) -> EngineResult<Vec<Participant>> {
        self.store
            .query(
                &format!("SELECT {PARTICIPANT_COLUMNS} FROM participants ORDER BY joined_at, id"),
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .map(read_participant)
            .collect::<StoreResult<_>>()
            .map_err(internal)
    }

    /// Everyone with at least one subscribed socket, with their presence.
    pub fn present(&self) -> EngineResult<Vec<Presence>> {
        self.store
            .query(
                "SELECT p.id, p.user_id, p.name, p.avatar, p.presence_status, p.last_seen FROM participants p
                 WHERE EXISTS (SELECT 1 FROM ws_client_mapping w WHERE w.participant_id = p.id AND w.subscribed_at IS NOT NULL)
                 ORDER BY p.joined_at, p.id",
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .map(|row| self::presence_of(row).map_err(internal))
            .collect()
    }

    pub(crate) fn presence_of_participant(&self, participant_id: &str) -> EngineResult<Presence> {
        self.store
            .query(
                "SELECT id, user_id, name, avatar, presence_status, last_seen FROM participants WHERE id = ?",
                &[participant_id.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next()
            .map(presence_of)
            .transpose()
            .map_err(internal)?
            .ok_or_else(|| ApiError::not_found("participant not found"))
    }

    pub(crate) fn set_presence(
        &self,
        participant_id: &str,
        status: PresenceStatus,
        now: i64,
    ) -> EngineResult<()> {
        self.store
            .execute(
                "UPDATE participants SET presence_status = ?, last_seen = ? WHERE id = ?",
                &[status.as_str().into(), now.into(), participant_id.into()],
            )
            .map_err(internal)
    }
}

fn presence_of(row: crate::store::Row) -> StoreResult<Presence> {
    let mut c = Cols::new(row);
    Ok(Presence {
        participant_id: c.string()?,
        user_id: c.string()?,
        name: c.string()?,
        avatar: c.opt_string()?,
        status: if c.string()? == "idle" {
            PresenceStatus::Idle
        } else {
            PresenceStatus::Active
        },
        last_seen: c.i64()?,
    })
}
