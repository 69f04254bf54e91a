//! The control plane as the integrations see it ([`ControlPlane`]): sessions made and
//! prompted through their objects, the repository catalog and the environments.

use crate::{objects, repos, settings};
use inspect_protocol::auth::{Environment, EnvironmentList};
use inspect_protocol::session::{
    Actor, Attachment, CreateSessionRequest, CreateSessionResponse, PromptRequest, RepositoryList,
    RepositoryRef, SessionState,
};
use inspect_protocol::ApiError;
use inspect_runtime::plane::{ControlPlane, Freshness};
use worker::{Env, Method};

/// The Worker's control plane, for one request's environment.
#[derive(Clone)]
pub(crate) struct Plane {
    env: Env,
}

impl Plane {
    pub(crate) fn new(env: &Env) -> Plane {
        Plane { env: env.clone() }
    }
}

impl Plane {
    /// A session made for a bot's person, with its first prompt when there is one.
    async fn start(
        &self,
        origin: &str,
        actor: &Actor,
        create: CreateSessionRequest,
        branch_overrides: &[RepositoryRef],
        prompt: Option<PromptRequest>,
    ) -> Result<(CreateSessionResponse, Option<ApiError>), ApiError> {
        // A linked identity is its person: the session, the rate limit and the pull
        // request are theirs.
        let source = inspect_protocol::usage::SessionSource::of_bot_identity(&actor.user_id);
        let actor = crate::linked::resolve(&self.env, actor).await?;
        let now = crate::http::now_ms() as i64;
        // A prompt is new work: refused, before anything is made, once a budget of the
        // person's is spent (the object checks a prompt sent on its own the same way).
        if prompt.is_some() {
            if let Some(refused) = crate::budgets::refusal(&self.env, &actor.user_id, now).await {
                return Err(refused);
            }
        }
        let charge = crate::ratelimit::charge_session(&self.env, &actor.user_id, now).await?;
        let lookups = crate::lookups::Lookups::default();
        let made = objects::create_session_among(
            &self.env,
            origin,
            &actor,
            (create, prompt),
            branch_overrides,
            (source, None),
            &lookups,
        )
        .await;
        if made.is_err() {
            crate::ratelimit::refund(&self.env, charge).await;
        }
        made
    }
}

impl ControlPlane for Plane {
    async fn create_session(
        &self,
        origin: &str,
        actor: &Actor,
        create: CreateSessionRequest,
        branch_overrides: &[RepositoryRef],
    ) -> Result<CreateSessionResponse, ApiError> {
        self.start(origin, actor, create, branch_overrides, None)
            .await
            .map(|(created, _)| created)
    }

    async fn create_prompted_session(
        &self,
        origin: &str,
        actor: &Actor,
        create: CreateSessionRequest,
        branch_overrides: &[RepositoryRef],
        prompt: PromptRequest,
    ) -> Result<(CreateSessionResponse, Option<ApiError>), ApiError> {
        self.start(origin, actor, create, branch_overrides, Some(prompt))
            .await
    }

    async fn prompt(
        &self,
        session: &str,
        origin: &str,
        actor: &Actor,
        prompt: &PromptRequest,
    ) -> Result<(), ApiError> {
        let actor = crate::linked::resolve(&self.env, actor).await?;
        objects::prompt(&self.env, session, origin, &actor, prompt).await
    }

    async fn stop(&self, session: &str, origin: &str, actor: &Actor) -> Result<bool, ApiError> {
        let actor = &crate::linked::resolve(&self.env, actor).await?;
        let resp = objects::call_object(
            &self.env,
            session,
            Method::Post,
            "/stop",
            origin,
            Some(actor),
            b"{}",
        )
        .await?;
        let answer: serde_json::Value =
            crate::http::parse(&objects::object_answer(resp, 200).await?)?;
        Ok(answer["stopped"].as_bool().unwrap_or(false))
    }

    async fn session_state(&self, session: &str) -> Result<Option<SessionState>, ApiError> {
        let resp =
            objects::call_object(&self.env, session, Method::Get, "/", "", None, &[]).await?;
        if resp.status_code() == 404 {
            return Ok(None);
        }
        crate::http::parse(&objects::object_answer(resp, 200).await?).map(Some)
    }

    async fn store_attachment(
        &self,
        session: &str,
        name: &str,
        mime_type: &str,
        bytes: &[u8],
    ) -> Result<Attachment, ApiError> {
        objects::store_attachment(&self.env, session, name, mime_type, bytes).await
    }

    async fn repositories(
        &self,
        freshness: Freshness,
        now_ms: i64,
    ) -> Result<RepositoryList, ApiError> {
        repos::list(&self.env, freshness, now_ms).await
    }

    async fn environments(&self) -> Result<EnvironmentList, ApiError> {
        settings::list_environments(&self.env).await
    }

    async fn environment(&self, id: &str) -> Result<Environment, ApiError> {
        settings::get_environment(&self.env, id).await
    }

    async fn channel_message(
        &self,
        message: &inspect_protocol::slack::ChannelMessage,
    ) -> Result<Option<inspect_protocol::slack::ChannelRun>, ApiError> {
        let now = worker::Date::now().as_millis() as i64;
        crate::automations::slack_message(&self.env, message, now).await
    }

    async fn pull_request_changed(
        &self,
        change: &inspect_protocol::scm::PullRequestChange,
    ) -> Result<usize, ApiError> {
        crate::pull_requests::changed(&self.env, change).await
    }

    async fn linear_issue_changed(
        &self,
        change: &inspect_protocol::automations::LinearIssueChange,
    ) -> Result<usize, ApiError> {
        crate::automations::linear_issue(&self.env, change, crate::http::now_ms() as i64).await
    }

    async fn github_event(
        &self,
        change: &inspect_protocol::automations::GithubEventChange,
    ) -> Result<usize, ApiError> {
        crate::automations::github_event(&self.env, change, crate::http::now_ms() as i64).await
    }

    async fn channel_user_admitted(&self, automation: &str, user: &str) -> Result<bool, ApiError> {
        crate::automations::slack_user_admitted(&self.env, automation, user).await
    }

    async fn link_code(&self, identity: &str, display_name: &str) -> Result<String, ApiError> {
        let now = crate::http::now_ms() as i64;
        crate::people::link_code(&self.env, identity, display_name, now).await
    }

    async fn link_by_email(
        &self,
        identity: &str,
        display_name: &str,
        email: &str,
    ) -> Result<Option<String>, ApiError> {
        let now = crate::http::now_ms() as i64;
        crate::people::link_by_email(&self.env, identity, display_name, email, now).await
    }
}
