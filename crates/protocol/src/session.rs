//! Session REST bodies and the session data both REST and the client socket carry.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `created → active → archived` (archived sessions can be restored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    Created,
    Active,
    Archived,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Created => "created",
            SessionStatus::Active => "active",
            SessionStatus::Archived => "archived",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "created" => Some(SessionStatus::Created),
            "active" => Some(SessionStatus::Active),
            "archived" => Some(SessionStatus::Archived),
            _ => None,
        }
    }
}

pub use crate::agent::AgentKind;
pub use crate::repository::RepositoryRef;

/// `POST /sessions`. Either `repositories` (0–10, first is primary) or the single-repository
/// shorthand `repoOwner` + `repoName` (+ `branch`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct CreateSessionRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repositories: Option<Vec<RepositoryRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Which managed skills the session takes: every applicable one (the default) or none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<crate::skills::SkillChoice>,
    /// The skill revisions the control plane pinned for the session (never a client's to
    /// say: the Worker sets it from `skills` on every creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_skills: Option<Vec<crate::skills::PinnedSkill>>,
    /// The MCP servers the control plane gave the session (never a client's to say: the
    /// Worker sets it on every creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<Vec<crate::mcp::SessionMcpServer>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxSettings>,
    /// The brokered model grants that apply (the control plane sets this; never a person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub managed_grants: Option<Vec<crate::models::ManagedGrant>>,
    /// The models the deployment offered as the session was created (the control plane
    /// sets this; never a person): its object checks and spawns against them for as long
    /// as it would keep a catalog it read itself, instead of reading them again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub catalog: Option<crate::models::ModelCatalog>,
    /// The coding agent (OpenCode unless the repository's settings or this say otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub agent: Option<AgentKind>,
    /// Target an environment (its repositories, and its secrets over theirs) instead of
    /// naming repositories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<String>,
    /// Set by the control plane from the environment (a client's value is replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_name: Option<String>,
    /// Set by the control plane for a child session: its parent and how deep it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<i64>,
    /// Set by the control plane for an automation's session: which automation and run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automation: Option<crate::automations::AutomationOrigin>,
    /// The environment's egress policy (the control plane sets this; never a person).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub egress: Option<crate::egress::EgressPolicy>,
}

/// What a session asks of its sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SandboxSettings {
    /// Ports inside the sandbox to expose; their URLs reach the sandbox (`.tunnels.env`)
    /// and the clients (`tunnel_urls`).
    #[serde(default)]
    pub tunnel_ports: Vec<u16>,
    /// The coding agent the sandbox runs.
    #[serde(default)]
    pub agent: AgentKind,
    /// The brokered model grants the session may use (set by the control plane only: the
    /// session's creation replaces whatever a request said).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_grants: Vec<crate::models::ManagedGrant>,
    /// Where the sandbox's traffic may go (set by the control plane only, from the
    /// session's environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub egress: Option<crate::egress::EgressPolicy>,
}

/// `GET /sessions/:id/tunnel-urls` and the `tunnel_urls` message: port → URL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct TunnelUrls {
    pub tunnel_urls: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct CreateSessionResponse {
    pub session_id: String,
    pub status: SessionStatus,
}

/// What the control plane asks of a new session's object (`POST /init` on the object, never
/// a person's request): the session to make and, when it comes with its first prompt (an
/// automation's run), that prompt, taken in the same request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInit {
    pub session: CreateSessionRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PromptRequest>,
}

/// The object's answer to [`SessionInit`]: the session as it stored it and, when the prompt
/// it was given was refused, why (the session stands without it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInitAnswer {
    pub state: SessionState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_refused: Option<crate::ApiError>,
}

/// Who is acting: a signed-in user, the local user, or a service acting for a user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Actor {
    pub user_id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
}

/// The state of one session, as `GET /sessions/:id` and `subscribed` carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    pub id: String,
    pub title: Option<String>,
    pub status: SessionStatus,
    pub repositories: Vec<RepositoryRef>,
    /// The primary repository's owner and name (empty for a session without repositories).
    pub repo_owner: Option<String>,
    pub repo_name: Option<String>,
    pub branch_name: Option<String>,
    pub model: Option<String>,
    pub reasoning_effort: Option<String>,
    pub created_by: String,
    pub sandbox_status: String,
    pub message_count: i64,
    pub is_processing: bool,
    pub created_at: i64,
    pub updated_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<String>,
    /// The environment's name when the session was made (it keeps its own copy: editing
    /// or deleting the environment later changes nothing here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_name: Option<String>,
    /// The session that spawned this one, for a child session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session_id: Option<String>,
    /// 0 for a session people started; a child is one deeper than its parent.
    #[serde(default)]
    pub depth: i64,
    /// The automation and run that started this session, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automation: Option<crate::automations::AutomationOrigin>,
    /// The managed skill revisions the session's agent has (pinned when it was made).
    #[serde(default)]
    pub skills: Vec<crate::skills::PinnedSkill>,
    /// The names of the MCP servers the session's agent is given.
    #[serde(default)]
    pub mcp_servers: Vec<String>,
    /// The coding agent the session's sandbox runs.
    #[serde(default)]
    pub agent: AgentKind,
}

/// One row of `GET /sessions` (from the D1 index).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub id: String,
    pub title: Option<String>,
    pub status: SessionStatus,
    pub repo_owner: Option<String>,
    pub repo_name: Option<String>,
    pub repositories: Vec<RepositoryRef>,
    pub created_by: String,
    pub created_by_name: String,
    pub message_count: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// The session's newest pull request, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_state: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
    pub cursor: Option<String>,
    pub has_more: bool,
}

/// What the Durable Object tells the Worker so the D1 index follows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct IndexUpdate {
    pub id: String,
    pub title: Option<String>,
    pub status: SessionStatus,
    pub message_count: i64,
    pub updated_at: i64,
    /// Participants' user ids, for "sessions I took part in".
    pub participants: Vec<String>,
    /// The newest pull request's URL and state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_state: Option<String>,
    /// What the session has used so far.
    #[serde(default)]
    pub usage: SessionUsage,
    /// The prompts' text (the first [`crate::limits::MAX_INDEXED_PROMPT_TEXT`] bytes), for
    /// finding the session by what was asked.
    #[serde(default)]
    pub prompt_text: String,
}

/// What a session has used: counted by its object from what it keeps, written to the D1
/// index with the rest of its row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionUsage {
    pub prompts: i64,
    pub tool_calls: i64,
    /// The model's tokens, as the agent reported them per step.
    pub tokens_in: i64,
    pub tokens_out: i64,
    /// The model's cost as the agent reported it, in millionths of a dollar.
    pub cost_micros: i64,
    /// How long a sandbox was live for the session.
    pub sandbox_ms: i64,
    /// When its first pull request was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_pr_at: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    Pending,
    Processing,
    Completed,
    Failed,
    Cancelled,
}

impl MessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Pending => "pending",
            MessageStatus::Processing => "processing",
            MessageStatus::Completed => "completed",
            MessageStatus::Failed => "failed",
            MessageStatus::Cancelled => "cancelled",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(MessageStatus::Pending),
            "processing" => Some(MessageStatus::Processing),
            "completed" => Some(MessageStatus::Completed),
            "failed" => Some(MessageStatus::Failed),
            "cancelled" => Some(MessageStatus::Cancelled),
            _ => None,
        }
    }
}

/// An attachment to a prompt (images, files, URLs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// A file kept by the session (`POST /sessions/:id/attachments`); the sandbox fetches
    /// it and the agent gets its path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment_id: Option<String>,
}

/// A file name safe to write anywhere: its last path part, letters, digits and `._-`
/// (others become `_`), no leading dots, at most 100 characters.
pub fn safe_file_name(name: &str) -> String {
    let cleaned: String = name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    let cleaned = cleaned.trim_start_matches('.');
    if cleaned.is_empty() {
        "attachment".into()
    } else {
        cleaned.to_owned()
    }
}

/// A prompt, from the REST route or the `prompt` socket message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<Attachment>>,
    /// Makes the prompt idempotent: the same id with the same content is the same prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_request_id: Option<String>,
    /// Where the outcome is reported (honoured only from the control plane itself and
    /// signed services).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_context: Option<crate::scm::CallbackContext>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PromptAccepted {
    pub message_id: String,
    /// 1-based place among unfinished prompts (1 = processing or next).
    pub position: i64,
    pub status: MessageStatus,
}

/// One prompt, as `GET /sessions/:id/messages` and the queue carry it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: String,
    pub author_id: String,
    pub author_name: String,
    pub content: String,
    pub model: Option<String>,
    pub reasoning_effort: Option<String>,
    pub status: MessageStatus,
    pub client_request_id: Option<String>,
    pub error: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub completed_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct MessageList {
    pub messages: Vec<Message>,
}

/// A prompt waiting or running, as the queue shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct QueuedPrompt {
    pub message_id: String,
    pub author_id: String,
    pub author_name: String,
    pub content: String,
    pub status: MessageStatus,
    pub position: i64,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Participant {
    pub participant_id: String,
    pub user_id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avatar: Option<String>,
    pub role: String,
    pub joined_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ParticipantList {
    pub participants: Vec<Participant>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub url: Option<String>,
    pub metadata: Option<Value>,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ArtifactList {
    pub artifacts: Vec<Artifact>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct TitleRequest {
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct WsTokenResponse {
    pub token: String,
    pub participant_id: String,
    pub expires_at: i64,
}

/// One entry of the session's timeline. `seq` strictly increases within a session.
/// The payload's fields sit beside `type`, as the original system's events do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct TimelineEvent {
    pub id: String,
    pub seq: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub timestamp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(flatten)]
    pub data: Map<String, Value>,
}

/// A page of the timeline, oldest first. `cursor` is opaque; pass it back for the next page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct EventPage {
    pub events: Vec<TimelineEvent>,
    pub cursor: Option<String>,
    pub has_more: bool,
}

/// Timeline events, oldest first, as one JSON array (`TimelineEvent[]` on the wire) that
/// the session's SQLite wrote: the object sends the text on without parsing it into
/// [`TimelineEvent`]s and writing them out again. Rust readers get them with
/// [`EventsJson::parse`].
#[derive(Debug, Clone)]
pub struct EventsJson(Box<serde_json::value::RawValue>);

impl EventsJson {
    /// Checks that `text` is JSON (not that it holds events: its writer's job).
    pub fn from_text(text: String) -> serde_json::Result<Self> {
        serde_json::value::RawValue::from_string(text).map(EventsJson)
    }

    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    pub fn parse(&self) -> serde_json::Result<Vec<TimelineEvent>> {
        serde_json::from_str(self.0.get())
    }
}

impl Default for EventsJson {
    fn default() -> Self {
        EventsJson(serde_json::value::to_raw_value(&[(); 0]).expect("an empty array"))
    }
}

impl PartialEq for EventsJson {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Serialize for EventsJson {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for EventsJson {
    // Through `Value`: a raw value cannot be read inside an internally tagged message.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let events = Vec::<TimelineEvent>::deserialize(d)?;
        serde_json::value::to_raw_value(&events)
            .map(EventsJson)
            .map_err(serde::de::Error::custom)
    }
}

/// The newest part of the timeline, as a client's `subscribed` carries it: like
/// [`EventPage`], with the events as stored JSON text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct EventWindow {
    #[cfg_attr(feature = "ts", ts(as = "Vec<TimelineEvent>"))]
    pub events: EventsJson,
    pub cursor: Option<String>,
    pub has_more: bool,
}

/// Kinds of timeline events the control plane itself writes.
pub mod event_kind {
    pub const USER_MESSAGE: &str = "user_message";
    pub const HEARTBEAT: &str = "heartbeat";
    pub const PROMPT_CANCELLED: &str = "prompt_cancelled";
    pub const EXECUTION_COMPLETE: &str = "execution_complete";
    pub const SESSION_STATUS: &str = "session_status";
    pub const SESSION_TITLE: &str = "session_title";
    pub const STOP_REQUESTED: &str = "stop_requested";
}

/// `POST /repos`: registers a repository on the host (local mode).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RegisterRepository {
    /// Defaults to `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub name: String,
    /// An absolute path to a git repository on the host.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_branch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Repository {
    pub owner: String,
    pub name: String,
    /// `local` (a path on the host) or `github`.
    pub kind: String,
    pub source: String,
    pub default_branch: Option<String>,
    pub created_at: i64,
    #[serde(default)]
    pub private: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When GitHub last saw a change (ISO 8601), for GitHub repositories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// `GET /repos/:owner/:name/branches`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct BranchList {
    pub branches: Vec<String>,
    pub default_branch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RepositoryList {
    pub repositories: Vec<Repository>,
}

/// Child sessions: how deep they may nest and how many one parent may have.
pub const MAX_CHILD_DEPTH: i64 = 2;
pub const MAX_RUNNING_CHILDREN: usize = 5;
pub const MAX_CHILDREN: usize = 15;

/// `POST /sessions/:id/children`, from the parent's sandbox (the agent's
/// `open-inspect child spawn`). Without a repository the child works on the parent's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SpawnChildRequest {
    pub prompt: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `POST /sessions/:id/children/:child/prompt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ChildPrompt {
    pub prompt: String,
}

/// What the parent's object decides before a child is made: who it acts for (the
/// parent's prompter), where it works, how deep it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ChildPlan {
    pub actor: Actor,
    pub repositories: Vec<RepositoryRef>,
    pub depth: i64,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The children it already has (and slots others are being made in, `reserved:…`).
    pub children: Vec<String>,
    /// The slot this child is made in: recorded with its session id, or released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
    /// The coding agent the child runs (an attempt's; else as a new session's would).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentKind>,
}

/// A slot reserved for a child being made; it counts against the limits until recorded
/// or released, and lapses after [`CHILD_RESERVATION_MS`].
pub const CHILD_RESERVATION_PREFIX: &str = "reserved:";
pub const CHILD_RESERVATION_MS: i64 = 120_000;

/// A child session as its parent (and the parent's page) sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ChildSummary {
    pub session_id: String,
    pub title: Option<String>,
    pub status: SessionStatus,
    pub sandbox_status: String,
    /// `running` while a prompt waits or runs, else the last prompt's `completed` or
    /// `failed` (`idle` before any).
    pub state: String,
    /// The child's last words (its newest text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its pull requests as `(url, state)`.
    #[serde(default)]
    pub pull_requests: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ChildList {
    pub children: Vec<ChildSummary>,
    /// The groups of attempts made from this session ("Try N ways"), newest last.
    #[serde(default)]
    pub attempts: Vec<AttemptGroup>,
}

/// "Try N ways": how many attempts one prompt may start.
pub const MIN_ATTEMPTS: usize = 2;
pub const MAX_ATTEMPTS: usize = 4;

/// `POST /sessions/:id/attempts` (people): the same prompt, in `count` child sessions on
/// the session's repositories, each with its own sandbox; `models` (optional, one a child,
/// in order) tries different models.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttemptsRequest {
    pub content: String,
    pub count: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// One coding agent an attempt, in order (the session's agent for the rest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentKind>,
}

/// What the parent's object decides before the attempts are made: the group, and one
/// plan (a reserved slot) for each attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AttemptsPlan {
    pub group: String,
    pub plans: Vec<ChildPlan>,
}

/// One group of attempts: the prompt, its children in order, and the one chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AttemptGroup {
    pub group: String,
    pub prompt: String,
    pub sessions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen: Option<String>,
}

/// `POST /sessions/:id/attempts/choose` (people): "Use this one": the chosen attempt
/// opens its pull request, the others are stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChooseAttempt {
    pub session_id: String,
}

/// The answer to [`ChooseAttempt`]: the pull requests the chosen attempt opened and the
/// attempts stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AttemptChosen {
    pub session_id: String,
    pub pull_requests: Vec<crate::scm::PullRequestResult>,
    pub stopped: Vec<String>,
}

/// Checks an attempts request; the problem in words (a 400) otherwise.
pub fn check_attempts(req: &AttemptsRequest) -> Result<(), String> {
    if req.content.trim().is_empty() || req.content.len() > crate::limits::MAX_PROMPT_BYTES {
        return Err("attempts need a prompt (at most 64 KiB)".into());
    }
    if !(MIN_ATTEMPTS..=MAX_ATTEMPTS).contains(&req.count) {
        return Err(format!(
            "try {MIN_ATTEMPTS} to {MAX_ATTEMPTS} ways at once, not {}",
            req.count
        ));
    }
    if req.models.len() > req.count || req.agents.len() > req.count {
        return Err(format!(
            "{} models and {} agents for {} attempts: name at most one of each per attempt",
            req.models.len(),
            req.agents.len(),
            req.count
        ));
    }
    Ok(())
}

/// `POST /sessions/:id/ports/:port/link`: where a person opens a tunnelled port. On the
/// local host the URL carries a token the port's gate swaps for a cookie (`gated`); it
/// may be opened until `expiresAt` (unix seconds).
/// `POST /sessions/:id/ports`: a person asks for one more port of the running sandbox to
/// be reachable (the local host's `POST /sandboxes/:id/ports` takes the same body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenPortRequest {
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PortLink {
    pub port: u16,
    pub url: String,
    pub gated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}
