//! Creating a session, reading its state, and its status and title.

use super::{internal, timeline, EngineResult, Session};
use crate::store::{Cols, SqlValue, Store};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::limits::{MAX_SESSION_REPOSITORIES, MAX_TITLE_CHARS};
use inspect_protocol::session::{
    event_kind, Actor, CreateSessionRequest, IndexUpdate, RepositoryRef, SessionState,
    SessionStatus,
};
use inspect_protocol::{ApiError, ErrorCode};
use serde_json::{json, Map, Value};

use super::Effects;

/// Validates a create request and returns its repositories, primary first.
pub fn repositories_of(req: &CreateSessionRequest) -> EngineResult<Vec<RepositoryRef>> {
    let repos = match (&req.repositories, &req.repo_owner, &req.repo_name) {
        (Some(list), None, None) => list.clone(),
        (None, Some(owner), Some(name)) => vec![RepositoryRef {
            owner: owner.clone(),
            name: name.clone(),
            branch: req.branch.clone(),
            source: None,
        }],
        (None, None, None) => Vec::new(),
        (Some(_), _, _) => {
            return Err(ApiError::bad_request(
                "give either `repositories` or `repoOwner` + `repoName`, not both",
            ))
        }
        _ => {
            return Err(ApiError::bad_request(
                "`repoOwner` and `repoName` go together",
            ))
        }
    };
    if repos.len() > MAX_SESSION_REPOSITORIES {
        return Err(ApiError::bad_request(format!(
            "a session holds at most {MAX_SESSION_REPOSITORIES} repositories"
        )));
    }
    for (i, r) in repos.iter().enumerate() {
        for (what, value) in [("owner", &r.owner), ("name", &r.name)] {
            if !inspect_protocol::limits::valid_repo_part(value) {
                return Err(ApiError::bad_request(format!(
                    "repository {} has an invalid {what}: {value:?}",
                    i + 1
                )));
            }
        }
        if let Some(b) = &r.branch {
            inspect_protocol::limits::check_branch(b).map_err(ApiError::bad_request)?;
        }
        if repos[..i]
            .iter()
            .any(|o| o.owner.eq_ignore_ascii_case(&r.owner) && o.name.eq_ignore_ascii_case(&r.name))
        {
            return Err(ApiError::bad_request(format!(
                "repository {}/{} is listed twice",
                r.owner, r.name
            )));
        }
    }
    Ok(repos)
}

fn validate_tunnel_ports(ports: &[u16]) -> EngineResult<()> {
    use inspect_protocol::limits::MAX_TUNNEL_PORTS;
    if ports.len() > MAX_TUNNEL_PORTS {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_TUNNEL_PORTS} tunnel ports"
        )));
    }
    for (i, p) in ports.iter().enumerate() {
        if *p == 0 || ports[..i].contains(p) {
            return Err(ApiError::bad_request(format!(
                "invalid or repeated tunnel port {p}"
            )));
        }
    }
    Ok(())
}

pub fn validate_title(title: &str) -> EngineResult<String> {
    let t = title.trim();
    if t.chars().count() > MAX_TITLE_CHARS {
        return Err(ApiError::bad_request(format!(
            "a title has at most {MAX_TITLE_CHARS} characters"
        )));
    }
    if t.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "a title may not hold control characters",
        ));
    }
    Ok(t.to_owned())
}

fn validate_short(name: &str, v: &Option<String>) -> EngineResult<()> {
    if let Some(v) = v {
        if v.is_empty() || v.len() > 100 || v.chars().any(char::is_control) {
            return Err(ApiError::bad_request(format!("invalid {name}")));
        }
    }
    Ok(())
}

/// A new session as `create` stores it, checked: the state it answers with (and the Worker
/// indexes) and the sandbox settings it keeps. Pure, so the Worker can index the session
/// while the object stores it, from the same answer.
pub fn new_session(
    session_id: &str,
    req: &CreateSessionRequest,
    actor: &Actor,
    now: i64,
) -> EngineResult<(SessionState, inspect_protocol::session::SandboxSettings)> {
    let repositories = repositories_of(req)?;
    let title = match &req.title {
        Some(t) => Some(validate_title(t)?).filter(|t| !t.is_empty()),
        None => None,
    };
    let mut settings = req.sandbox.clone().unwrap_or_default();
    if let Some(agent) = req.agent {
        settings.agent = agent;
    }
    // Which brokered grants a session may use is the control plane's to say alone.
    settings.managed_grants = req.managed_grants.clone().unwrap_or_default();
    settings.egress = req.egress.clone();
    validate_tunnel_ports(&settings.tunnel_ports)?;
    validate_short("model", &req.model)?;
    validate_short("reasoningEffort", &req.reasoning_effort)?;
    let primary = repositories.first();
    let state = SessionState {
        id: session_id.to_owned(),
        title,
        status: SessionStatus::Created,
        repo_owner: primary.map(|r| r.owner.clone()),
        repo_name: primary.map(|r| r.name.clone()),
        branch_name: Some(format!("open-inspect/{session_id}")),
        model: req.model.clone(),
        reasoning_effort: req.reasoning_effort.clone(),
        created_by: actor.user_id.clone(),
        sandbox_status: "none".into(),
        message_count: 0,
        is_processing: false,
        created_at: now,
        updated_at: now,
        environment_id: req.environment_id.clone(),
        environment_name: req.environment_name.clone(),
        parent_session_id: req.parent_session_id.clone(),
        depth: req.depth.unwrap_or(0),
        automation: req.automation.clone(),
        skills: req.pinned_skills.clone().unwrap_or_default(),
        mcp_servers: req
            .mcp_servers
            .iter()
            .flatten()
            .map(|s| s.name.clone())
            .collect(),
        agent: settings.agent,
        repositories,
    };
    Ok((state, settings))
}

impl<S: Store> Session<'_, S> {
    pub fn exists(&self) -> EngineResult<bool> {
        Ok(self
            .store
            .scalar("SELECT COUNT(*) FROM session", &[])
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0)
            > 0)
    }

    /// Creates the session. Creating again with the same id is a conflict.
    pub fn create(
        &self,
        session_id: &str,
        req: &CreateSessionRequest,
        actor: &Actor,
        now: i64,
    ) -> EngineResult<SessionState> {
        let (state, settings) = new_session(session_id, req, actor, now)?;
        let settings_json =
            serde_json::to_string(&settings).map_err(|e| ApiError::internal(e.to_string()))?;
        if self.exists()? {
            return Err(ApiError::conflict("session already exists"));
        }
        let repos_json = serde_json::to_string(&state.repositories)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        self.store
            .atomically(|| {
                self.store.execute(
                    "INSERT INTO session (id, session_id, title, status, repositories, branch_name, model, reasoning_effort, created_by, created_at, updated_at, sandbox_settings, environment_id, environment_name, parent_session_id, depth, automation, skills, mcp)
                     VALUES (1, ?, ?, 'created', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    &[
                        session_id.into(),
                        state.title.clone().into(),
                        repos_json.into(),
                        state.branch_name.clone().into(),
                        state.model.clone().into(),
                        state.reasoning_effort.clone().into(),
                        actor.user_id.as_str().into(),
                        now.into(),
                        now.into(),
                        settings_json.clone().into(),
                        state.environment_id.clone().into(),
                        state.environment_name.clone().into(),
                        state.parent_session_id.clone().into(),
                        state.depth.into(),
                        state
                            .automation
                            .as_ref()
                            .and_then(|a| serde_json::to_string(a).ok())
                            .into(),
                        (!state.skills.is_empty())
                            .then(|| serde_json::to_string(&state.skills).ok())
                            .flatten()
                            .into(),
                        req.mcp_servers
                            .as_ref()
                            .filter(|m| !m.is_empty())
                            .and_then(|m| serde_json::to_string(m).ok())
                            .into(),
                    ],
                )?;
                self.upsert_participant(actor, "owner", now)?;
                Ok(())
            })
            .map_err(internal)?;
        Ok(state)
    }

    /// The one row `sql` reads from the session (`FROM session WHERE id = 1`, with whatever
    /// it joins), or 404 when this object holds no session.
    pub(crate) fn session_row(&self, sql: &str, params: &[SqlValue]) -> EngineResult<Cols> {
        self.store
            .query(sql, params)
            .map_err(internal)?
            .into_iter()
            .next()
            .map(Cols::new)
            .ok_or_else(|| ApiError::not_found("session not found"))
    }

    /// The session's id, or 404 when this object holds no session.
    pub fn session_id(&self) -> EngineResult<String> {
        self.store
            .scalar("SELECT session_id FROM session WHERE id = 1", &[])
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .ok_or_else(|| ApiError::not_found("session not found"))
    }

    pub fn status(&self) -> EngineResult<SessionStatus> {
        let s = self
            .store
            .scalar("SELECT status FROM session WHERE id = 1", &[])
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .ok_or_else(|| ApiError::not_found("session not found"))?;
        SessionStatus::parse(&s).ok_or_else(|| ApiError::internal(format!("unknown status {s}")))
    }

    /// What git credentials for this session's sandbox may reach: its repositories that
    /// are not on this machine (names in the GitHub App installation's account).
    pub fn scm_scope(&self) -> EngineResult<inspect_protocol::auth::ScmScope> {
        Ok(inspect_protocol::auth::ScmScope {
            repositories: self
                .state()?
                .repositories
                .iter()
                .filter(|r| !r.is_local())
                .map(|r| r.name.clone())
                .collect(),
        })
    }

    pub fn state(&self) -> EngineResult<SessionState> {
        let mut c = self.session_row(
            "SELECT session_id, title, status, repositories, branch_name, model, reasoning_effort, created_by, sandbox_status, created_at, updated_at, environment_id, environment_name, parent_session_id, depth, automation, skills, mcp, sandbox_settings,
                (SELECT COUNT(*) FROM messages),
                (SELECT COUNT(*) FROM messages WHERE status = 'processing')
             FROM session WHERE id = 1",
            &[],
        )?;
        let mut read = || -> crate::store::StoreResult<SessionState> {
            let id = c.string()?;
            let title = c.opt_string()?;
            let status = c.string()?;
            let repositories: Vec<RepositoryRef> =
                serde_json::from_str(&c.string()?).unwrap_or_default();
            let branch_name = c.opt_string()?;
            let model = c.opt_string()?;
            let reasoning_effort = c.opt_string()?;
            let created_by = c.string()?;
            let sandbox_status = c.string()?;
            let created_at = c.i64()?;
            let updated_at = c.i64()?;
            let environment_id = c.opt_string()?;
            let environment_name = c.opt_string()?;
            let parent_session_id = c.opt_string()?;
            let depth = c.i64()?;
            let automation = c.opt_string()?.and_then(|a| serde_json::from_str(&a).ok());
            let skills = c
                .opt_string()?
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or_default();
            let mcp_servers: Vec<String> = c
                .opt_string()?
                .and_then(|s| {
                    serde_json::from_str::<Vec<inspect_protocol::mcp::SessionMcpServer>>(&s).ok()
                })
                .unwrap_or_default()
                .into_iter()
                .map(|s| s.name)
                .collect();
            let agent = c
                .opt_string()?
                .and_then(|s| {
                    serde_json::from_str::<inspect_protocol::session::SandboxSettings>(&s).ok()
                })
                .unwrap_or_default()
                .agent;
            let message_count = c.i64()?;
            let is_processing = c.i64()? > 0;
            let primary = repositories.first().cloned();
            Ok(SessionState {
                id,
                title,
                status: SessionStatus::parse(&status).unwrap_or(SessionStatus::Created),
                repo_owner: primary.as_ref().map(|r| r.owner.clone()),
                repo_name: primary.map(|r| r.name),
                repositories,
                branch_name,
                model,
                reasoning_effort,
                created_by,
                sandbox_status,
                message_count,
                is_processing,
                created_at,
                updated_at,
                environment_id,
                environment_name,
                parent_session_id,
                depth,
                automation,
                skills,
                mcp_servers,
                agent,
            })
        };
        read().map_err(internal)
    }

    /// The MCP servers the session's agent is given, as the sandbox receives them.
    pub fn mcp_servers(&self) -> EngineResult<Vec<inspect_protocol::mcp::SessionMcpServer>> {
        Ok(self
            .store
            .scalar("SELECT mcp FROM session WHERE id = 1", &[])
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default())
    }

    /// What the D1 index needs to follow this session.
    pub fn index_update(&self, now: i64) -> EngineResult<IndexUpdate> {
        let s = self.state()?;
        let participants = self
            .store
            .query("SELECT user_id FROM participants ORDER BY joined_at", &[])
            .map_err(internal)?
            .into_iter()
            .filter_map(|r| r.into_iter().next().and_then(|v| v.into_string()))
            .collect();
        let pr = self.newest_pull_request()?;
        Ok(IndexUpdate {
            id: s.id,
            title: s.title,
            status: s.status,
            message_count: s.message_count,
            updated_at: s.updated_at,
            participants,
            pr_url: pr.as_ref().map(|p| p.0.clone()),
            pr_state: pr.map(|p| p.1),
            usage: self.usage(now)?,
            prompt_text: self.prompt_text()?,
        })
    }

    pub(crate) fn touch(&self, now: i64) -> crate::store::StoreResult<()> {
        self.store.execute(
            "UPDATE session SET updated_at = MAX(updated_at, ?) WHERE id = 1",
            &[now.into()],
        )
    }

    /// Moves the session to `status` (archive / unarchive / activation).
    pub fn set_status(
        &self,
        status: SessionStatus,
        actor: &Actor,
        now: i64,
    ) -> EngineResult<Effects> {
        let current = self.status()?;
        if current == status {
            return Ok(Effects::none());
        }
        match (current, status) {
            (_, SessionStatus::Archived) => {}
            (SessionStatus::Archived, SessionStatus::Active | SessionStatus::Created) => {}
            (SessionStatus::Created, SessionStatus::Active) => {}
            _ => {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!(
                        "cannot move a {} session to {}",
                        current.as_str(),
                        status.as_str()
                    ),
                ))
            }
        }
        let mut data = Map::new();
        data.insert("status".into(), json!(status.as_str()));
        self.record_change(
            "UPDATE session SET status = ? WHERE id = 1",
            status.as_str().into(),
            event_kind::SESSION_STATUS,
            data,
            actor,
            ServerMessage::SessionStatus { status },
            now,
        )
    }

    /// What a spawn request carries beyond [`Self::state`], in one read: the control
    /// plane's origin (none until a request brought it), the sandbox settings and the MCP
    /// servers as the sandbox receives them.
    pub fn spawn_inputs(
        &self,
    ) -> EngineResult<(
        Option<String>,
        inspect_protocol::session::SandboxSettings,
        Vec<inspect_protocol::mcp::SessionMcpServer>,
    )> {
        let mut c = self.session_row(
            "SELECT origin, sandbox_settings, mcp FROM session WHERE id = 1",
            &[],
        )?;
        let mut read = || -> crate::store::StoreResult<_> {
            let origin = c.opt_string()?;
            let settings = c
                .opt_string()?
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or_default();
            let mcp = c
                .opt_string()?
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or_default();
            Ok((origin, settings, mcp))
        };
        read().map_err(internal)
    }

    /// What the session asks of its sandbox.
    pub fn sandbox_settings(&self) -> EngineResult<inspect_protocol::session::SandboxSettings> {
        Ok(self
            .store
            .scalar("SELECT sandbox_settings FROM session WHERE id = 1", &[])
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default())
    }

    pub fn set_title(&self, title: &str, actor: &Actor, now: i64) -> EngineResult<Effects> {
        let title = validate_title(title)?;
        let title = Some(title).filter(|t| !t.is_empty());
        self.status()?;
        let mut data = Map::new();
        data.insert(
            "title".into(),
            title.clone().map_or(Value::Null, Value::String),
        );
        self.record_change(
            "UPDATE session SET title = ? WHERE id = 1",
            title.clone().into(),
            event_kind::SESSION_TITLE,
            data,
            actor,
            ServerMessage::SessionTitle { title },
            now,
        )
    }

    /// Changes one column of the session, puts the change on the timeline attributed to
    /// `actor`, and tells every client.
    #[allow(clippy::too_many_arguments)]
    fn record_change(
        &self,
        sql: &str,
        value: crate::store::SqlValue,
        kind: &str,
        mut data: Map<String, Value>,
        actor: &Actor,
        message: ServerMessage,
        now: i64,
    ) -> EngineResult<Effects> {
        data.insert(
            "actor".into(),
            json!({"userId": actor.user_id, "name": actor.name}),
        );
        let event = self
            .store
            .atomically(|| {
                self.store.execute(sql, std::slice::from_ref(&value))?;
                self.touch(now)?;
                timeline::append(self.store, kind, None, data, now)
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxEvent { event });
        fx.broadcast(message);
        fx.index_changed = true;
        Ok(fx)
    }
}
