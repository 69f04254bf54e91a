//! The sandbox's editor from the session's side: where the provider exposes it, and the
//! links people get to it. A link is the person's own: it opens once, only for the person
//! it was made for, only while the sandbox runs, and not after it expires. Its token is
//! kept hashed. Opening the editor starts it in the sandbox and is on the timeline.

use super::{ids, internal, timeline, EngineResult, Session};
use crate::engine::sandbox::LIVE_STATES;
use crate::engine::Effects;
use crate::store::Store;
use inspect_protocol::client::ServerMessage;
use inspect_protocol::editor::{EditorEndpoint, EDITOR_LINK_TTL_SECS};
use inspect_protocol::sandbox::SandboxCommand;
use inspect_protocol::session::Participant;
use inspect_protocol::ApiError;
use serde_json::{Map, Value};

/// A link made for a person: its token (given once, never kept) and when it expires (unix
/// seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditorGrant {
    pub token: String,
    pub expires_at: i64,
}

impl<S: Store> Session<'_, S> {
    /// The provider's word on where the sandbox's editor is (kept for the current sandbox
    /// only).
    pub fn set_editor(
        &self,
        sandbox_id: &str,
        editor: Option<&EditorEndpoint>,
    ) -> EngineResult<()> {
        let Some(editor) = editor else {
            return Ok(());
        };
        if self
            .sandbox_row()?
            .is_none_or(|r| r.sandbox_id != sandbox_id)
        {
            return Ok(());
        }
        let json = serde_json::to_string(editor).map_err(|e| ApiError::internal(e.to_string()))?;
        self.store
            .execute("UPDATE sandbox SET editor = ? WHERE id = 1", &[json.into()])
            .map_err(internal)
    }

    /// The running sandbox's editor, or why there is none.
    fn live_editor(&self) -> EngineResult<EditorEndpoint> {
        let live = self
            .sandbox_row()?
            .is_some_and(|r| LIVE_STATES.contains(&r.status.as_str()));
        if !live || !self.sandbox_connected()? {
            return Err(ApiError::conflict(
                "the session's sandbox is not running; send a prompt to start it, then open the editor",
            ));
        }
        self.store
            .scalar("SELECT editor FROM sandbox WHERE id = 1", &[])
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .and_then(|s| serde_json::from_str(&s).ok())
            .ok_or_else(|| {
                ApiError::conflict(
                    "this session's sandbox has no editor: its provider exposes none, or code-server is not installed where it runs",
                )
            })
    }

    /// A link to the editor for `by` (whose account is `user_id`): the sandbox starts
    /// code-server if it is not running, and the timeline says who opened it.
    pub fn editor_link(
        &self,
        by: &Participant,
        now_ms: i64,
    ) -> EngineResult<(EditorGrant, Effects)> {
        self.live_editor()?;
        let token = ids::new_secret();
        let expires_at = now_ms / 1000 + EDITOR_LINK_TTL_SECS;
        let event = self
            .store
            .atomically(|| {
                // Links nobody opened in time are of no use: drop them as we go.
                self.store.execute(
                    "DELETE FROM editor_links WHERE expires_at <= ?",
                    &[(now_ms / 1000).into()],
                )?;
                self.store.execute(
                    "INSERT INTO editor_links (token_hash, user_id, expires_at) VALUES (?, ?, ?)",
                    &[
                        ids::hash_secret(&token).into(),
                        by.user_id.as_str().into(),
                        expires_at.into(),
                    ],
                )?;
                let mut data = Map::new();
                data.insert("action".into(), Value::String("opened".into()));
                data.insert("by".into(), Value::String(by.name.clone()));
                timeline::append(self.store, "editor", None, data, now_ms)
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.to_sandbox.push(SandboxCommand::EditorStart);
        fx.broadcast(ServerMessage::SandboxEvent { event });
        Ok((EditorGrant { token, expires_at }, fx))
    }

    /// Opens a link: the editor it leads to, when `user_id` is the person it was made for,
    /// it has not expired, and the sandbox runs. A link opens once.
    pub fn open_editor_link(
        &self,
        token: &str,
        user_id: &str,
        now_ms: i64,
    ) -> EngineResult<EditorEndpoint> {
        let hash = ids::hash_secret(token);
        let row = self
            .store
            .query(
                "SELECT user_id, expires_at FROM editor_links WHERE token_hash = ?",
                &[hash.as_str().into()],
            )
            .map_err(internal)?
            .into_iter()
            .next();
        let Some(row) = row else {
            return Err(ApiError::not_found(
                "this editor link is unknown or was used; open the editor again from the session page",
            ));
        };
        let mut c = crate::store::Cols::new(row);
        let (owner, expires_at) = (c.string().map_err(internal)?, c.i64().map_err(internal)?);
        if owner != user_id {
            return Err(ApiError::new(
                inspect_protocol::ErrorCode::Forbidden,
                "this editor link was made for someone else; open the editor from the session page",
            ));
        }
        self.store
            .execute(
                "DELETE FROM editor_links WHERE token_hash = ?",
                &[hash.as_str().into()],
            )
            .map_err(internal)?;
        if expires_at <= now_ms / 1000 {
            return Err(ApiError::new(
                inspect_protocol::ErrorCode::Gone,
                "this editor link has expired; open the editor again from the session page",
            ));
        }
        self.live_editor()
    }
}
