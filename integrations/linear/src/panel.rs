//! What the SessionDO posts to a Linear-started prompt's agent session: each tool as an
//! ephemeral `action` (when the settings show tools; the object throttles them), and when
//! the prompt ends, the answer — a `response` with the pull request, the files and the
//! summary, or an `error` — with the plan finished and the pull request linked.

use crate::activity;
use crate::api;
use inspect_protocol::linear::LinearAgentSession;
use inspect_protocol::scm::Completion;
use inspect_protocol::ApiError;
use serde_json::{json, Value};
use worker::Env;

/// A tool started: an ephemeral `action` naming it and what it runs on.
pub async fn progress(
    env: &Env,
    s: &LinearAgentSession,
    tool: &str,
    args: &Value,
) -> Result<(), ApiError> {
    let input = activity::action(&s.agent_session_id, tool, &activity::parameter(args));
    api::graphql(
        env,
        &s.organization_id,
        activity::ACTIVITY_MUTATION,
        json!({"input": input}),
    )
    .await
    .map(drop)
}

/// The prompt ended: its answer, then the plan and the links.
pub async fn report(
    env: &Env,
    c: &Completion,
    s: &LinearAgentSession,
    session_url: &str,
) -> Result<(), ApiError> {
    let (kind, body) = activity::answer(c, session_url);
    let input = activity::text(&s.agent_session_id, kind, &body, false);
    api::graphql(
        env,
        &s.organization_id,
        activity::ACTIVITY_MUTATION,
        json!({"input": input}),
    )
    .await?;
    let stage = activity::final_stage(kind, !c.pull_requests.is_empty());
    let mut links = vec![activity::session_link(session_url)];
    if let Some((url, _)) = c.pull_requests.first() {
        links.push(json!({"label": "Pull request", "url": url}));
    }
    let update = json!({"plan": activity::plan(stage), "externalUrls": links});
    api::graphql(
        env,
        &s.organization_id,
        activity::SESSION_UPDATE_MUTATION,
        json!({"id": s.agent_session_id, "input": update}),
    )
    .await
    .map(drop)
}
