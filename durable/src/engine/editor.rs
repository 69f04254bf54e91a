//! The sandbox's services people open in their browser, from the session's side: its
//! editor (code-server) and its desktop (noVNC, to watch or to control). Where the provider
//! exposes each, and the links people get to them. A link is the person's own: it opens
//! once, only for the person it was made for, only what it was made for (a link to watch
//! the desktop never opens its control), only while the sandbox runs, and not after it
//! expires. Its token is kept hashed. Asking for one starts the service in the sandbox and
//! is on the timeline.

use super::{ids, internal, timeline, EngineResult, Session};
use crate::engine::Effects;
use crate::store::Store;
use inspect_protocol::client::ServerMessage;
use inspect_protocol::desktop::{DesktopEndpoints, DESKTOP_LINK_TTL_SECS};
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

/// What a person's link opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Editor,
    /// The desktop: to watch it, or with control of its mouse and keys.
    Desktop {
        control: bool,
    },
}

impl Service {
    /// As the link's row names it.
    fn name(self) -> &'static str {
        match self {
            Service::Editor => "editor",
            Service::Desktop { control: false } => "desktop",
            Service::Desktop { control: true } => "desktop-control",
        }
    }

    /// The column of `sandbox` that says where it is, and the timeline's kind for it.
    fn column(self) -> &'static str {
        match self {
            Service::Editor => "editor",
            Service::Desktop { .. } => "desktop",
        }
    }

    fn ttl_secs(self) -> i64 {
        match self {
            Service::Editor => EDITOR_LINK_TTL_SECS,
            Service::Desktop { .. } => DESKTOP_LINK_TTL_SECS,
        }
    }

    fn start(self) -> SandboxCommand {
        match self {
            Service::Editor => SandboxCommand::EditorStart,
            Service::Desktop { .. } => SandboxCommand::DesktopStart,
        }
    }

    /// Why a running sandbox has none.
    fn missing(self) -> &'static str {
        match self {
            Service::Editor => "this session's sandbox has no editor: its provider exposes none, or code-server is not installed where it runs",
            Service::Desktop { .. } => "this session's sandbox has no desktop: its provider exposes none, or the desktop's programs (Xvfb, x11vnc, noVNC) are not installed where it runs",
        }
    }
}

impl<S: Store> Session<'_, S> {
    /// The provider's word on where the sandbox's editor is (kept for the current sandbox
    /// only).
    pub fn set_editor(
        &self,
        sandbox_id: &str,
        editor: Option<&EditorEndpoint>,
    ) -> EngineResult<()> {
        self.set_service(sandbox_id, "editor", editor)
    }

    /// The provider's word on where the sandbox's desktop is (kept for the current sandbox
    /// only).
    pub fn set_desktop(
        &self,
        sandbox_id: &str,
        desktop: Option<&DesktopEndpoints>,
    ) -> EngineResult<()> {
        self.set_service(sandbox_id, "desktop", desktop)
    }

    fn set_service(
        &self,
        sandbox_id: &str,
        column: &str,
        endpoint: Option<&impl serde::Serialize>,
    ) -> EngineResult<()> {
        let Some(endpoint) = endpoint else {
            return Ok(());
        };
        if self
            .sandbox_row()?
            .is_none_or(|r| r.sandbox_id != sandbox_id)
        {
            return Ok(());
        }
        let json =
            serde_json::to_string(endpoint).map_err(|e| ApiError::internal(e.to_string()))?;
        self.store
            .execute(
                &format!("UPDATE sandbox SET {column} = ? WHERE id = 1"),
                &[json.into()],
            )
            .map_err(internal)
    }

    /// Where the running sandbox's `service` is reached, or why it is not.
    fn live_service(&self, service: Service) -> EngineResult<EditorEndpoint> {
        let live = self.sandbox_row()?.is_some_and(|r| r.is_live());
        if !live || !self.sandbox_connected()? {
            return Err(ApiError::conflict(format!(
                "the session's sandbox is not running; send a prompt to start it, then open the {}",
                service.column()
            )));
        }
        let json = self
            .store
            .scalar(
                &format!("SELECT {} FROM sandbox WHERE id = 1", service.column()),
                &[],
            )
            .map_err(internal)?
            .and_then(|v| v.into_string());
        let endpoint = match service {
            Service::Editor => json.and_then(|s| serde_json::from_str(&s).ok()),
            Service::Desktop { control } => json
                .and_then(|s| serde_json::from_str::<DesktopEndpoints>(&s).ok())
                .map(|d| d.of(control).clone()),
        };
        endpoint.ok_or_else(|| ApiError::conflict(service.missing()))
    }

    /// A link to the sandbox's `service` for `by`: the sandbox starts it if it is not
    /// running, and the timeline says who opened it.
    pub fn service_link(
        &self,
        service: Service,
        by: &Participant,
        now_ms: i64,
    ) -> EngineResult<(EditorGrant, Effects)> {
        self.live_service(service)?;
        let token = ids::new_secret();
        let expires_at = now_ms / 1000 + service.ttl_secs();
        let event = self
            .store
            .atomically(|| {
                // Links nobody opened in time are of no use: drop them as we go.
                self.store.execute(
                    "DELETE FROM editor_links WHERE expires_at <= ?",
                    &[(now_ms / 1000).into()],
                )?;
                self.store.execute(
                    "INSERT INTO editor_links (token_hash, user_id, expires_at, service) VALUES (?, ?, ?, ?)",
                    &[
                        ids::hash_secret(&token).into(),
                        by.user_id.as_str().into(),
                        expires_at.into(),
                        service.name().into(),
                    ],
                )?;
                let mut data = Map::new();
                data.insert("action".into(), Value::String("opened".into()));
                data.insert("by".into(), Value::String(by.name.clone()));
                if let Service::Desktop { control } = service {
                    data.insert("control".into(), Value::Bool(control));
                }
                timeline::append(self.store, service.column(), None, data, now_ms)
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.to_sandbox.push(service.start());
        fx.broadcast(ServerMessage::SandboxEvent { event });
        Ok((EditorGrant { token, expires_at }, fx))
    }

    /// A link to the editor for `by`.
    pub fn editor_link(
        &self,
        by: &Participant,
        now_ms: i64,
    ) -> EngineResult<(EditorGrant, Effects)> {
        self.service_link(Service::Editor, by, now_ms)
    }

    /// Opens a link made for the editor or the desktop (`desktop`, as the route it came
    /// to says): where it leads and what it was made for, when `user_id` is the person it
    /// was made for, it has not expired, and the sandbox runs. A link opens once.
    pub fn open_service_link(
        &self,
        token: &str,
        desktop: bool,
        user_id: &str,
        now_ms: i64,
    ) -> EngineResult<(EditorEndpoint, Service)> {
        let what = match desktop {
            true => "desktop",
            false => "editor",
        };
        let hash = ids::hash_secret(token);
        let row = self
            .store
            .query(
                "SELECT user_id, expires_at, service FROM editor_links WHERE token_hash = ?",
                &[hash.as_str().into()],
            )
            .map_err(internal)?
            .into_iter()
            .next();
        let mut c = row.map(crate::store::Cols::new);
        let found = match c.as_mut() {
            Some(c) => Some((
                c.string().map_err(internal)?,
                c.i64().map_err(internal)?,
                c.string().map_err(internal)?,
            )),
            None => None,
        };
        let service = found.as_ref().and_then(|(_, _, name)| {
            [
                Service::Editor,
                Service::Desktop { control: false },
                Service::Desktop { control: true },
            ]
            .into_iter()
            .find(|s| s.name() == name)
        });
        let (Some((owner, expires_at, _)), Some(service)) = (found, service) else {
            return Err(ApiError::not_found(format!(
                "this {what} link is unknown or was used; open the {what} again from the session page"
            )));
        };
        if matches!(service, Service::Desktop { .. }) != desktop {
            return Err(ApiError::not_found(format!(
                "this link is not the {what}'s; open the {what} from the session page"
            )));
        }
        if owner != user_id {
            return Err(ApiError::new(
                inspect_protocol::ErrorCode::Forbidden,
                format!("this {what} link was made for someone else; open the {what} from the session page"),
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
                format!(
                    "this {what} link has expired; open the {what} again from the session page"
                ),
            ));
        }
        Ok((self.live_service(service)?, service))
    }

    /// Opens an editor link (see [`Self::open_service_link`]).
    pub fn open_editor_link(
        &self,
        token: &str,
        user_id: &str,
        now_ms: i64,
    ) -> EngineResult<EditorEndpoint> {
        Ok(self.open_service_link(token, false, user_id, now_ms)?.0)
    }
}
