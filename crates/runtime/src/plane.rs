//! What an integration (a bot, a tracker) may ask of the control plane. The Worker
//! implements it over its sessions' objects and its D1 index; an integration's handlers
//! take it, so they never reach into the Worker and the Worker never into them but to
//! dispatch.

use inspect_protocol::auth::{Environment, EnvironmentList};
use inspect_protocol::session::{
    Actor, Attachment, CreateSessionRequest, CreateSessionResponse, PromptRequest, RepositoryList,
    RepositoryRef, SessionState,
};
use inspect_protocol::ApiError;

/// How fresh a list of repositories must be: the source (GitHub) is slow to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// The copy kept in D1, whatever its age: for answers with a deadline (Slack gives an
    /// options request 3 s).
    Kept,
    /// Synced first when the copy is older than its shelf life.
    SyncIfStale,
    /// Synced first, whatever the copy's age.
    SyncNow,
}

#[allow(async_fn_in_trait)]
pub trait ControlPlane {
    /// Creates a session for `actor` as the API would (its repositories resolved, the
    /// session indexed), with `branch_overrides` replacing an environment's branch for the
    /// repositories they name.
    async fn create_session(
        &self,
        origin: &str,
        actor: &Actor,
        create: CreateSessionRequest,
        branch_overrides: &[RepositoryRef],
    ) -> Result<CreateSessionResponse, ApiError>;

    /// [`ControlPlane::create_session`] with its first prompt given in the same request
    /// (the control plane vouches for it), refused before anything is made when a budget of
    /// the person's is spent. With the session made, why the object refused the prompt, if
    /// it did.
    async fn create_prompted_session(
        &self,
        origin: &str,
        actor: &Actor,
        create: CreateSessionRequest,
        branch_overrides: &[RepositoryRef],
        prompt: PromptRequest,
    ) -> Result<(CreateSessionResponse, Option<ApiError>), ApiError>;

    /// Sends a prompt to a session as `actor`. The control plane vouches for the body: it
    /// may carry what only the control plane sets (where to report the outcome).
    async fn prompt(
        &self,
        session: &str,
        origin: &str,
        actor: &Actor,
        prompt: &PromptRequest,
    ) -> Result<(), ApiError>;

    /// Stops a session's running prompt as `actor`: whether one was running.
    async fn stop(&self, session: &str, origin: &str, actor: &Actor) -> Result<bool, ApiError>;

    /// A session's state; `None` when there is no such session.
    async fn session_state(&self, session: &str) -> Result<Option<SessionState>, ApiError>;

    /// Keeps a file in a session for its prompts.
    async fn store_attachment(
        &self,
        session: &str,
        name: &str,
        mime_type: &str,
        bytes: &[u8],
    ) -> Result<Attachment, ApiError>;

    /// The repositories sessions may use, as fresh as `freshness` asks.
    async fn repositories(
        &self,
        freshness: Freshness,
        now_ms: i64,
    ) -> Result<RepositoryList, ApiError>;

    /// Every environment.
    async fn environments(&self) -> Result<EnvironmentList, ApiError>;

    /// One environment.
    async fn environment(&self, id: &str) -> Result<Environment, ApiError>;

    /// A top-level message in a channel, not to the bot: the Slack channel trigger that takes
    /// it (the oldest, when several would) starts its run, if any.
    async fn channel_message(
        &self,
        message: &inspect_protocol::slack::ChannelMessage,
    ) -> Result<Option<inspect_protocol::slack::ChannelRun>, ApiError>;

    /// A pull request changed on its host: every session that recorded it hears of it. How
    /// many sessions did.
    async fn pull_request_changed(
        &self,
        change: &inspect_protocol::scm::PullRequestChange,
    ) -> Result<usize, ApiError>;

    /// A Linear issue was created or moved: every Linear trigger that takes it starts a run
    /// (once per issue and event). How many runs started.
    async fn linear_issue_changed(
        &self,
        change: &inspect_protocol::automations::LinearIssueChange,
    ) -> Result<usize, ApiError>;

    /// A GitHub App delivery an automation may watch (a check, a pull request, an issue, a
    /// comment, a push): every GitHub trigger on its repository that takes it starts a run,
    /// once per delivery. How many runs started.
    async fn github_event(
        &self,
        change: &inspect_protocol::automations::GithubEventChange,
    ) -> Result<usize, ApiError>;

    /// Whether the Slack channel trigger of `automation` admits `user` (its allow and deny
    /// lists) to go on in a thread it started; no longer when it is deleted.
    async fn channel_user_admitted(&self, automation: &str, user: &str) -> Result<bool, ApiError>;

    /// A one-time code that links `identity` (`slack:U123`) to whichever signed-in person
    /// opens it within 10 minutes: the path of that page on this deployment. Send it to
    /// the identity privately.
    async fn link_code(&self, identity: &str, display_name: &str) -> Result<String, ApiError>;

    /// Links `identity` by the email rule when `email` (which the service says is
    /// verified) is one person's verified address and the identity is not linked yet:
    /// whom it was linked to.
    async fn link_by_email(
        &self,
        identity: &str,
        display_name: &str,
        email: &str,
    ) -> Result<Option<String>, ApiError>;
}
