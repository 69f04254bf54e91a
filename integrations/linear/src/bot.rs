//! The Linear bot, inside the Worker: `POST /webhooks/linear` (Linear's agent session
//! events), the app's installation (`POST /integrations/linear/install`, then Linear's
//! redirect to `GET /integrations/linear/callback`), and the settings. A delivery is
//! checked (signature, a minute's freshness, its delivery id once, an installed workspace
//! and its app user) and answered at once; the work — the plan, the issue read, where to
//! work, the session, the prompt, the state move — continues with `waitUntil`. What to do
//! is decided by this crate's pure modules; this moves bytes, keeps the agent session ↔
//! session map in D1 and asks the control plane ([`ControlPlane`]) for sessions. Wasm only.

use crate::activity::{self, Kind, Stage};
use crate::events::{self, AgentSessionEvent, Decision};
use crate::issue::{self, Issue};
use crate::routing::{self, Routed};
use crate::{api, oauth, state, verify};
use inspect_protocol::linear::{
    LinearAgentSession, LinearInstallStart, LinearInstallation, LinearSettings, LinearStatus,
};
use inspect_protocol::scm::CallbackContext;
use inspect_protocol::session::{Actor, CreateSessionRequest, PromptRequest, RepositoryRef};
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::answer::json as json_answer;
use inspect_runtime::d1::{self as db, num, opt};
use inspect_runtime::log::{emit, LogLine};
use inspect_runtime::plane::{ControlPlane, Freshness};
use inspect_runtime::{origin_of, setting};
use inspect_slack::classifier::Confidence;
use inspect_slack::routing::Target;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use worker::{Context, Env, Request, Response};

/// Deliveries larger than this are refused.
const MAX_DELIVERY_BYTES: usize = 1024 * 1024;
/// Deliveries are remembered this long (Linear retries within hours).
const DELIVERY_TTL_MS: i64 = 24 * 3600 * 1000;
/// A question to the person waits this long for its answer.
const PENDING_TTL_MS: i64 = 24 * 3600 * 1000;

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

fn log(outcome: &str, detail: &str) -> LogLine {
    let line = match outcome {
        "failed" => LogLine::error("linear_bot", outcome),
        "refused" | "ignored" => LogLine::warn("linear_bot", outcome),
        _ => LogLine::info("linear_bot", outcome),
    };
    line.detail(detail)
}

fn answer(status: u16, body: Value) -> Result<Response, ApiError> {
    json_answer(&body, status)
}

fn json_err(e: serde_json::Error) -> ApiError {
    ApiError::internal(e.to_string())
}

/// `POST /webhooks/linear`.
pub async fn webhook(
    mut req: Request,
    env: &Env,
    ctx: Context,
    plane: impl ControlPlane + 'static,
) -> Result<Response, ApiError> {
    let Some(secret) = setting(env, "LINEAR_WEBHOOK_SECRET") else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "the Linear bot is not configured: set LINEAR_WEBHOOK_SECRET",
        ));
    };
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let signature = header("Linear-Signature");
    let delivery = header("Linear-Delivery");
    let body = inspect_runtime::answer::delivery_body(&mut req, MAX_DELIVERY_BYTES).await?;
    if let Err(refusal) = verify::check(&secret, signature.as_deref(), &body, now_ms()) {
        emit(log("refused", refusal.reason()));
        return Err(ApiError::unauthorized(refusal.reason()));
    }
    let Some(delivery) = delivery.filter(|d| !d.trim().is_empty() && d.len() <= 200) else {
        emit(log("refused", "no Linear-Delivery header"));
        return Err(ApiError::bad_request("no Linear-Delivery header"));
    };
    let decision = events::decide(&body).map_err(|e| {
        emit(log("refused", &e).with("linearDelivery", delivery.as_str()));
        ApiError::bad_request(e)
    })?;
    let (organization, app_user) = match &decision {
        Decision::Ignore(why) => {
            emit(log("ignored", why).with("linearDelivery", delivery.as_str()));
            return answer(200, json!({"ok": true, "ignored": why}));
        }
        Decision::Created(e) | Decision::Stop(e) | Decision::Prompted { event: e, .. } => {
            (e.organization_id.clone(), Some(e.app_user_id.clone()))
        }
        Decision::Issue {
            organization_id, ..
        } => (organization_id.clone(), None),
    };
    // Only a workspace the app was installed in, and only for its own app user.
    let why_not = match api::app_user(env, &organization).await? {
        None => Some("a workspace the app is not installed in"),
        Some(app) if app_user.as_deref().is_some_and(|a| a != app) => {
            Some("another app user than the installed one")
        }
        Some(_) => None,
    };
    if let Some(why) = why_not {
        emit(
            log("ignored", why)
                .with("linearDelivery", delivery.as_str())
                .with("organization", organization.as_str()),
        );
        return answer(200, json!({"ok": true, "ignored": why}));
    }
    let now = now_ms();
    let claimed = db::sweep_then_run(
        env,
        (
            "DELETE FROM linear_deliveries WHERE received_at < ?1",
            &[num(now - DELIVERY_TTL_MS)],
        ),
        (
            "INSERT INTO linear_deliveries (delivery_id, received_at) VALUES (?1, ?2) ON CONFLICT(delivery_id) DO NOTHING",
            &[delivery.as_str().into(), num(now)],
        ),
    )
    .await?;
    if claimed == 0 {
        emit(log("duplicate", "delivery already taken").with("linearDelivery", delivery.as_str()));
        return answer(200, json!({"ok": true, "duplicate": true}));
    }
    let origin = public_origin(&req, env);
    let env2 = env.clone();
    ctx.wait_until(async move {
        let outcome = match decision {
            Decision::Created(e) => created(&plane, &env2, &origin, &e, None).await,
            Decision::Prompted { event, text } => {
                prompted(&plane, &env2, &origin, &event, &text).await
            }
            Decision::Stop(e) => stop(&plane, &env2, &origin, &e).await,
            Decision::Issue { change, .. } => plane
                .linear_issue_changed(&change)
                .await
                .map(|n| format!("{n} automation run(s) started")),
            Decision::Ignore(_) => Ok("nothing".into()),
        };
        let (line, detail) = match &outcome {
            Ok(what) => (log("handled", what), what.clone()),
            Err(e) => (log("failed", &e.message), e.message.clone()),
        };
        emit(line.with("linearDelivery", delivery.as_str()));
        let _ = db::run(
            &env2,
            "UPDATE linear_deliveries SET outcome = ?2 WHERE delivery_id = ?1",
            &[
                delivery.as_str().into(),
                detail.chars().take(300).collect::<String>().into(),
            ],
        )
        .await;
    });
    answer(200, json!({"ok": true}))
}

/// Where links point: `PUBLIC_URL`, else the origin Linear reached us at.
fn public_origin(req: &Request, env: &Env) -> String {
    setting(env, "PUBLIC_URL")
        .map(|u| u.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| origin_of(env, req))
}

/// An activity in the agent session; a failure is logged, never the end of the work.
async fn say(env: &Env, e: &AgentSessionEvent, kind: Kind, body: &str, ephemeral: bool) {
    let input = activity::text(&e.agent_session.id, kind, body, ephemeral);
    if let Err(err) = api::graphql(
        env,
        &e.organization_id,
        activity::ACTIVITY_MUTATION,
        json!({"input": input}),
    )
    .await
    {
        emit(log("failed", &format!("an activity: {}", err.message)));
    }
}

/// The agent session's plan and links.
async fn update(env: &Env, e: &AgentSessionEvent, input: Value) {
    if let Err(err) = api::graphql(
        env,
        &e.organization_id,
        activity::SESSION_UPDATE_MUTATION,
        json!({"id": e.agent_session.id, "input": input}),
    )
    .await
    {
        emit(log(
            "failed",
            &format!("the agent session: {}", err.message),
        ));
    }
}

/// Who asked, as the session's actor (`linear:<user id>`, named as Linear names them),
/// linked by the email rule to the person their Linear address belongs to (Linear signs a
/// user in only through that address, so it is verified; the control plane then resolves
/// the identity to its person wherever the actor is used).
async fn person(plane: &impl ControlPlane, env: &Env, e: &AgentSessionEvent) -> Actor {
    let id = e.asker().unwrap_or("unknown").to_owned();
    let from_payload = e
        .agent_session
        .creator
        .as_ref()
        .filter(|c| c.id.as_deref() == Some(id.as_str()));
    let (mut name, mut email) = (
        from_payload.and_then(|c| c.name.clone()),
        from_payload.and_then(|c| c.email.clone()),
    );
    if name.is_none() {
        if let Ok(data) = api::graphql(
            env,
            &e.organization_id,
            "query Person($id: String!) { user(id: $id) { name email } }",
            json!({"id": id}),
        )
        .await
        {
            name = data["user"]["name"].as_str().map(str::to_owned);
            email = data["user"]["email"].as_str().map(str::to_owned);
        }
    }
    let actor = Actor {
        user_id: format!("linear:{id}"),
        name: name.unwrap_or_else(|| format!("Linear user {id}")),
        email,
        avatar: None,
    };
    if let Some(email) = actor.email.as_deref() {
        if let Err(err) = plane
            .link_by_email(&actor.user_id, &actor.name, email)
            .await
        {
            emit(log("link_failed", &err.message));
        }
    }
    actor
}

/// What is kept while the person is asked where to work.
#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    candidates: Vec<(String, String)>,
    comment: Option<String>,
    prompt_context: Option<String>,
    asked_at: i64,
}

#[derive(Debug, Deserialize)]
struct Row {
    session_id: Option<String>,
    pending: Option<String>,
    stopped_at: Option<f64>,
    issue_identifier: String,
    target: Option<String>,
}

async fn row(env: &Env, agent_session: &str) -> Result<Option<Row>, ApiError> {
    db::first(
        env,
        "SELECT session_id, pending, stopped_at, issue_identifier, target FROM linear_agent_sessions WHERE agent_session_id = ?1",
        &[agent_session.into()],
    )
    .await
}

/// A new agent session: acknowledge at once, read the issue, decide where to work, and
/// start (or ask). `answer` is the person's reply when they were asked where to work.
async fn created(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    e: &AgentSessionEvent,
    reply: Option<(&str, Pending)>,
) -> Result<String, ApiError> {
    let Some(issue_id) = e.issue_id().map(str::to_owned) else {
        say(
            env,
            e,
            Kind::Error,
            "I can only work on issues: this agent session has none.",
            false,
        )
        .await;
        return Ok("an agent session without an issue".into());
    };
    let identifier = e
        .agent_session
        .issue
        .as_ref()
        .and_then(|i| i.identifier.clone())
        .unwrap_or_else(|| issue_id.clone());
    let now = now_ms();
    if reply.is_none() {
        // One agent session, one session: a second `created` for it (a redelivery under
        // another id) starts nothing and says nothing. The claim is one D1 write, so the
        // first activity still comes well within Linear's 10 s.
        let claimed = db::run(
            env,
            "INSERT INTO linear_agent_sessions (agent_session_id, organization_id, issue_id, issue_identifier, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT(agent_session_id) DO NOTHING",
            &[
                e.agent_session.id.as_str().into(),
                e.organization_id.as_str().into(),
                issue_id.as_str().into(),
                identifier.as_str().into(),
                num(now),
            ],
        )
        .await?;
        if claimed == 0 {
            return Ok("the agent session already has its session".into());
        }
        say(
            env,
            e,
            Kind::Thought,
            &format!("On it: reading {identifier}…"),
            false,
        )
        .await;
        update(env, e, json!({"plan": activity::plan(Stage::Start)})).await;
    }
    let issue = api::graphql(
        env,
        &e.organization_id,
        issue::ISSUE_QUERY,
        json!({"id": issue_id}),
    )
    .await
    .and_then(|data| issue::parse(&data).map_err(ApiError::bad_request));
    let issue = match issue {
        Ok(i) => i,
        Err(err) => {
            say(
                env,
                e,
                Kind::Error,
                &format!("I could not read the issue: {}", err.message),
                false,
            )
            .await;
            return Err(err);
        }
    };
    let catalog = inspect_slack::bot::catalog(plane, Freshness::SyncIfStale).await?;
    let (comment, context) = match &reply {
        Some((_, p)) => (p.comment.clone(), p.prompt_context.clone()),
        None => (
            e.agent_session
                .comment
                .as_ref()
                .and_then(|c| c.body.clone()),
            e.prompt_context.clone(),
        ),
    };
    let chosen = match reply {
        Some((text, pending)) => {
            let candidates: Vec<Target> = pending
                .candidates
                .iter()
                .map(|(id, label)| Target {
                    id: id.clone(),
                    label: label.clone(),
                    description: None,
                })
                .collect();
            match routing::pick_reply(text, &candidates) {
                Some(t) => Some((t, "you picked it".to_string())),
                None => {
                    return ask(
                        env,
                        e,
                        &candidates,
                        comment,
                        context,
                        "I did not recognise that choice. ",
                    )
                    .await;
                }
            }
        }
        None => match resolve(env, e, &issue, comment.as_deref(), &catalog).await {
            Resolved::Chosen(t, why) => Some((t, why)),
            Resolved::Nothing => {
                say(env, e, Kind::Error, "No repository or environment is registered to work in: add one in the app first.", false).await;
                update(env, e, json!({"plan": activity::plan(Stage::Failed)})).await;
                return Ok("nothing to work in".into());
            }
            Resolved::Ask(first) => {
                let candidates = routing::candidates(&first, &catalog);
                return ask(env, e, &candidates, comment, context, "").await;
            }
        },
    };
    let Some((target, why)) = chosen else {
        return Ok("nothing".into());
    };
    start(
        plane,
        env,
        origin,
        e,
        &issue,
        &target,
        &why,
        comment.as_deref(),
        context.as_deref(),
    )
    .await
}

enum Resolved {
    Nothing,
    Chosen(Target, String),
    /// Ask the person, these candidates first.
    Ask(Vec<String>),
}

/// The mappings and the comment; then Linear's suggestions; then the classifier.
async fn resolve(
    env: &Env,
    e: &AgentSessionEvent,
    issue: &Issue,
    comment: Option<&str>,
    catalog: &[Target],
) -> Resolved {
    let settings = api::settings(env).await.unwrap_or_default();
    let find = |id: &str| {
        catalog
            .iter()
            .find(|t| t.id.eq_ignore_ascii_case(id))
            .cloned()
    };
    match routing::route(issue, comment, catalog, &settings) {
        Routed::Nothing => return Resolved::Nothing,
        Routed::Chosen { target, reason } => {
            if let Some(t) = find(&target) {
                return Resolved::Chosen(t, reason);
            }
        }
        Routed::Undecided => {}
    }
    let repositories: Vec<Value> = catalog
        .iter()
        .filter(|t| !t.is_environment())
        .map(|t| json!({"hostname": "github.com", "repositoryFullName": t.label}))
        .collect();
    if !repositories.is_empty() {
        let asked = api::graphql(
            env,
            &e.organization_id,
            "query Suggestions($issueId: String!, $agentSessionId: String, $candidates: [CandidateRepository!]!) {
  issueRepositorySuggestions(issueId: $issueId, agentSessionId: $agentSessionId, candidateRepositories: $candidates) {
    suggestions { repositoryFullName confidence }
  }
}",
            json!({"issueId": issue.id, "agentSessionId": e.agent_session.id, "candidates": repositories}),
        )
        .await;
        match asked {
            Ok(data) => {
                let suggestions: Vec<(String, f64)> = data["issueRepositorySuggestions"]
                    ["suggestions"]
                    .as_array()
                    .map(|s| {
                        s.iter()
                            .filter_map(|x| {
                                Some((
                                    x["repositoryFullName"].as_str()?.to_owned(),
                                    x["confidence"].as_f64()?,
                                ))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some((id, confidence)) = routing::pick_suggestion(&suggestions, catalog) {
                    if let Some(t) = find(&id) {
                        return Resolved::Chosen(
                            t,
                            format!("Linear suggests it ({:.0}% sure)", confidence * 100.0),
                        );
                    }
                }
            }
            Err(err) => emit(log(
                "failed",
                &format!("repository suggestions: {}", err.message),
            )),
        }
    }
    let mut text = format!("{}: {}", issue.identifier, issue.title);
    if let Some(d) = &issue.description {
        text.push_str("\n\n");
        text.push_str(&d.chars().take(4000).collect::<String>());
    }
    if let Some(c) = comment {
        text.push_str("\n\n");
        text.push_str(c);
    }
    let place = issue
        .team
        .as_ref()
        .map(|t| format!("A Linear issue of the team {} ({}).", t.name, t.key));
    let question =
        inspect_slack::classifier::prompt_about(catalog, place.as_deref(), "linear_issue", &text);
    match inspect_slack::bot::ask_classifier(env, &question).await {
        Ok(c) if !c.needs_clarification(catalog) && c.confidence == Confidence::High => {
            match c.target_id.as_deref().and_then(find) {
                Some(t) => Resolved::Chosen(t, format!("it fits the issue best: {}", c.reasoning)),
                None => Resolved::Ask(Vec::new()),
            }
        }
        Ok(c) => {
            let mut first: Vec<String> = c.target_id.into_iter().collect();
            first.extend(c.alternatives);
            Resolved::Ask(first)
        }
        Err(err) => {
            emit(log("ignored", &format!("classifier: {}", err.message)));
            Resolved::Ask(Vec::new())
        }
    }
}

/// Asks the person where to work; their reply (a `prompted` event) continues.
async fn ask(
    env: &Env,
    e: &AgentSessionEvent,
    candidates: &[Target],
    comment: Option<String>,
    prompt_context: Option<String>,
    preface: &str,
) -> Result<String, ApiError> {
    let pending = Pending {
        candidates: candidates
            .iter()
            .map(|t| (t.id.clone(), t.label.clone()))
            .collect(),
        comment,
        prompt_context,
        asked_at: now_ms(),
    };
    db::run(
        env,
        "UPDATE linear_agent_sessions SET pending = ?2, updated_at = ?3 WHERE agent_session_id = ?1",
        &[
            e.agent_session.id.as_str().into(),
            serde_json::to_string(&pending).map_err(json_err)?.into(),
            num(now_ms()),
        ],
    )
    .await?;
    let body = format!("{preface}{}", routing::elicitation(candidates));
    say(env, e, Kind::Elicitation, &body, false).await;
    update(env, e, json!({"plan": activity::plan(Stage::Asking)})).await;
    Ok("asked where to work".into())
}

/// Makes the session on `target`, links it, prompts it, and moves the issue.
#[allow(clippy::too_many_arguments)]
async fn start(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    e: &AgentSessionEvent,
    issue: &Issue,
    target: &Target,
    why: &str,
    comment: Option<&str>,
    prompt_context: Option<&str>,
) -> Result<String, ApiError> {
    let settings = api::settings(env).await.unwrap_or_default();
    update(env, e, json!({"plan": activity::plan(Stage::Resolved)})).await;
    say(
        env,
        e,
        Kind::Thought,
        &format!("Working in **{}**: {why}.", target.label),
        true,
    )
    .await;
    let actor = person(plane, env, e).await;
    let mut create = CreateSessionRequest {
        title: Some(
            format!("{}: {}", issue.identifier, issue.title)
                .chars()
                .take(200)
                .collect(),
        ),
        ..Default::default()
    };
    match target.id.strip_prefix("env:") {
        Some(id) => create.environment_id = Some(id.to_owned()),
        None => {
            let (owner, name) = target.label.split_once('/').unwrap_or(("", ""));
            create.repositories = Some(vec![RepositoryRef {
                owner: owner.to_owned(),
                name: name.to_owned(),
                branch: None,
                source: None,
            }]);
        }
    }
    let prompt = PromptRequest {
        content: issue::prompt(issue, comment, prompt_context, &target.label),
        callback_context: Some(CallbackContext::Linear(LinearAgentSession {
            agent_session_id: e.agent_session.id.clone(),
            organization_id: e.organization_id.clone(),
            issue_id: issue.id.clone(),
            issue_identifier: issue.identifier.clone(),
            issue_url: issue.url.clone(),
            target: target.label.clone(),
            tool_progress: settings.tool_progress,
        })),
        client_request_id: Some(format!("linear-{}", e.agent_session.id)),
        ..Default::default()
    };
    // The session and its first prompt in one request to its object.
    let (created, refused) = match plane
        .create_prompted_session(origin, &actor, create, &[], prompt)
        .await
    {
        Ok(c) => c,
        Err(err) => {
            say(
                env,
                e,
                Kind::Error,
                &format!("The session could not start: {}", err.message),
                false,
            )
            .await;
            update(env, e, json!({"plan": activity::plan(Stage::Failed)})).await;
            return Err(err);
        }
    };
    let session = created.session_id;
    let url = inspect_github::api::session_url(env, Some(origin), &session);
    db::run(
        env,
        "UPDATE linear_agent_sessions SET session_id = ?2, target = ?3, pending = NULL, updated_at = ?4 WHERE agent_session_id = ?1",
        &[
            e.agent_session.id.as_str().into(),
            session.as_str().into(),
            target.label.as_str().into(),
            num(now_ms()),
        ],
    )
    .await?;
    update(
        env,
        e,
        json!({"plan": activity::plan(Stage::SessionCreated), "externalUrls": [activity::session_link(&url)]}),
    )
    .await;
    if let Some(err) = refused {
        say(
            env,
            e,
            Kind::Error,
            &format!("The session started but took no prompt: {}", err.message),
            false,
        )
        .await;
        return Err(err);
    }
    say(
        env,
        e,
        Kind::Thought,
        &format!(
            "Working on {} in **{}**. [View session]({url})",
            issue.identifier, target.label
        ),
        false,
    )
    .await;
    if settings.move_issue_on_start && state::movable(issue.state_type.as_deref()) {
        if let Err(err) = move_issue(env, e, issue).await {
            emit(log("failed", &format!("moving the issue: {}", err.message)));
        }
    }
    Ok(format!("session {session} on {}", target.label))
}

/// The issue to its team's first `started` state.
async fn move_issue(env: &Env, e: &AgentSessionEvent, issue: &Issue) -> Result<(), ApiError> {
    let Some(team) = &issue.team else {
        return Ok(());
    };
    let data = api::graphql(
        env,
        &e.organization_id,
        state::STARTED_STATES_QUERY,
        json!({"team": team.id}),
    )
    .await?;
    let Some((state_id, _)) = state::first_started(&data) else {
        return Ok(());
    };
    api::graphql(
        env,
        &e.organization_id,
        state::ISSUE_UPDATE_MUTATION,
        json!({"id": issue.id, "input": {"stateId": state_id}}),
    )
    .await
    .map(drop)
}

/// A person wrote in the agent session: the answer to the question, or a follow-up.
async fn prompted(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    e: &AgentSessionEvent,
    text: &str,
) -> Result<String, ApiError> {
    let Some(r) = row(env, &e.agent_session.id).await? else {
        // Linear's `created` never reached us: this starts the work.
        return created(plane, env, origin, e, None).await;
    };
    if r.stopped_at.is_some() {
        say(
            env,
            e,
            Kind::Thought,
            "This session was stopped; assign or mention me again to start anew.",
            false,
        )
        .await;
        return Ok("a prompt for a stopped agent session".into());
    }
    match (&r.session_id, &r.pending) {
        (Some(session), _) => {
            let actor = person(plane, env, e).await;
            let settings = api::settings(env).await.unwrap_or_default();
            say(env, e, Kind::Thought, "Got it, passing that on.", true).await;
            let issue_id = e.issue_id().unwrap_or_default().to_owned();
            let prompt = PromptRequest {
                content: issue::follow_up(&r.issue_identifier, text),
                callback_context: Some(CallbackContext::Linear(LinearAgentSession {
                    agent_session_id: e.agent_session.id.clone(),
                    organization_id: e.organization_id.clone(),
                    issue_id,
                    issue_identifier: r.issue_identifier.clone(),
                    issue_url: e
                        .agent_session
                        .issue
                        .as_ref()
                        .and_then(|i| i.url.clone())
                        .unwrap_or_default(),
                    target: r.target.clone().unwrap_or_default(),
                    tool_progress: settings.tool_progress,
                })),
                ..Default::default()
            };
            plane.prompt(session, origin, &actor, &prompt).await?;
            update(
                env,
                e,
                json!({"plan": activity::plan(Stage::SessionCreated)}),
            )
            .await;
            Ok(format!("a follow-up for {session}"))
        }
        (None, Some(pending)) => {
            let pending: Pending = serde_json::from_str(pending).map_err(json_err)?;
            if now_ms() - pending.asked_at > PENDING_TTL_MS {
                say(
                    env,
                    e,
                    Kind::Error,
                    "The question expired: assign or mention me again.",
                    false,
                )
                .await;
                return Ok("an answer to an expired question".into());
            }
            // The answer is taken once: a second reply racing it starts nothing.
            let taken = db::run(
                env,
                "UPDATE linear_agent_sessions SET pending = NULL WHERE agent_session_id = ?1 AND pending IS NOT NULL AND session_id IS NULL",
                &[e.agent_session.id.as_str().into()],
            )
            .await?;
            if taken == 0 {
                return Ok("the question was already answered".into());
            }
            created(plane, env, origin, e, Some((text, pending))).await
        }
        (None, None) => Ok("a prompt while the work is being set up".into()),
    }
}

/// The stop signal, or Linear ended the agent session: the session stops and the agent
/// session hears so.
async fn stop(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    e: &AgentSessionEvent,
) -> Result<String, ApiError> {
    let r = row(env, &e.agent_session.id).await?;
    db::run(
        env,
        "UPDATE linear_agent_sessions SET stopped_at = ?2, pending = NULL WHERE agent_session_id = ?1",
        &[e.agent_session.id.as_str().into(), num(now_ms())],
    )
    .await?;
    let Some(session) = r.and_then(|r| r.session_id) else {
        say(
            env,
            e,
            Kind::Response,
            "Stopped: no work had started.",
            false,
        )
        .await;
        return Ok("stopped before a session".into());
    };
    let actor = person(plane, env, e).await;
    let running = plane.stop(&session, origin, &actor).await?;
    if !running {
        // Nothing was running, so no prompt's answer will say it: this does.
        let url = inspect_github::api::session_url(env, Some(origin), &session);
        say(
            env,
            e,
            Kind::Response,
            &format!("Stopped; nothing was running. [View session]({url})"),
            false,
        )
        .await;
    }
    Ok(format!("stopped {session}"))
}

/// `GET /integrations/linear`: configured or not, the installations, the settings.
pub async fn status(env: &Env) -> Result<LinearStatus, ApiError> {
    #[derive(Deserialize)]
    struct Row {
        organization_id: String,
        organization_name: String,
        app_user_id: String,
        installed_at: f64,
        installed_by: Option<String>,
    }
    let rows: Vec<Row> = db::all(
        env,
        "SELECT organization_id, organization_name, app_user_id, installed_at, installed_by FROM linear_installations ORDER BY installed_at",
        &[],
    )
    .await?;
    let configured = api::client(env).is_ok() && setting(env, "LINEAR_WEBHOOK_SECRET").is_some();
    Ok(LinearStatus {
        configured,
        installations: rows
            .into_iter()
            .map(|r| LinearInstallation {
                organization_id: r.organization_id,
                organization_name: r.organization_name,
                app_user_id: r.app_user_id,
                installed_at: r.installed_at as i64,
                installed_by: r.installed_by,
            })
            .collect(),
        settings: api::settings(env).await?,
    })
}

/// `PUT /integrations/linear/settings`.
pub async fn put_settings(env: &Env, body: &[u8], now: i64) -> Result<LinearSettings, ApiError> {
    let s: LinearSettings = inspect_protocol::json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid settings: {e}")))?;
    s.validate().map_err(ApiError::bad_request)?;
    db::run(
        env,
        "INSERT INTO linear_settings (id, settings, updated_at) VALUES (1, ?1, ?2)
         ON CONFLICT(id) DO UPDATE SET settings = ?1, updated_at = ?2",
        &[
            serde_json::to_string(&s).map_err(json_err)?.into(),
            num(now),
        ],
    )
    .await?;
    Ok(s)
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn callback_url(env: &Env, origin: &str) -> String {
    let base = setting(env, "PUBLIC_URL")
        .map(|u| u.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| origin.to_owned());
    format!("{base}/integrations/linear/callback")
}

/// `POST /integrations/linear/install`: a one-time state, and where to send the browser.
pub async fn install(env: &Env, origin: &str, by: &str) -> Result<LinearInstallStart, ApiError> {
    let (client_id, _) = api::client(env)?;
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::internal(e.to_string()))?;
    let state = hex::encode(bytes);
    let now = now_ms();
    db::sweep_then_run(
        env,
        (
            "DELETE FROM linear_oauth_states WHERE created_at < ?1",
            &[num(now - oauth::STATE_TTL_MS)],
        ),
        (
            "INSERT INTO linear_oauth_states (state_hash, created_at, created_by) VALUES (?1, ?2, ?3)",
            &[sha256_hex(&state).into(), num(now), by.into()],
        ),
    )
    .await?;
    let url = oauth::authorize_url(
        &api::authorize_base(env),
        &client_id,
        &callback_url(env, origin),
        &state,
    );
    Ok(LinearInstallStart { url })
}

/// `GET /integrations/linear/callback?code&state`: the state taken once, the code traded
/// for a token, the workspace and app user read with it and kept. Answers a page redirect.
pub async fn callback(req: &Request, env: &Env) -> Result<Response, ApiError> {
    let url = req
        .url()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let q = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    if let Some(err) = q("error") {
        return Err(ApiError::bad_request(format!(
            "Linear refused the installation: {}",
            err.chars().take(100).collect::<String>()
        )));
    }
    let (Some(code), Some(state)) = (q("code"), q("state")) else {
        return Err(ApiError::bad_request(
            "the callback needs a code and a state",
        ));
    };
    if !oauth::state_ok(&state) || code.is_empty() || code.len() > 500 {
        return Err(ApiError::bad_request("a malformed code or state"));
    }
    let now = now_ms();
    #[derive(Deserialize)]
    struct Taken {
        created_by: Option<String>,
    }
    let taken: Option<Taken> = db::first(
        env,
        "DELETE FROM linear_oauth_states WHERE state_hash = ?1 AND created_at >= ?2 RETURNING created_by",
        &[sha256_hex(&state).into(), num(now - oauth::STATE_TTL_MS)],
    )
    .await?;
    let Some(taken) = taken else {
        emit(log(
            "refused",
            "an install callback with an unknown, used or expired state",
        ));
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "this installation link is unknown, used or expired: start again from Settings",
        ));
    };
    let (client_id, secret) = api::client(env)?;
    let origin = origin_of(env, req);
    let answer = api::token_request(
        env,
        oauth::code_form(&client_id, &secret, &code, &callback_url(env, &origin)),
    )
    .await?;
    let viewer = api::graphql_with(env, &answer.access_token, oauth::VIEWER_QUERY, json!({}))
        .await
        .map_err(|(_, e)| e)?;
    let (Some(app_user), Some(org), org_name) = (
        viewer["viewer"]["id"].as_str(),
        viewer["viewer"]["organization"]["id"].as_str(),
        viewer["viewer"]["organization"]["name"]
            .as_str()
            .unwrap_or(""),
    ) else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "Linear did not say who the app is",
        ));
    };
    db::run(
        env,
        "INSERT INTO linear_installations (organization_id, organization_name, app_user_id, installed_at, installed_by)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(organization_id) DO UPDATE SET organization_name = ?2, app_user_id = ?3, installed_at = ?4, installed_by = ?5, token_sealed = NULL, token_expires_at = NULL",
        &[org.into(), org_name.into(), app_user.into(), num(now), opt(taken.created_by.as_deref())],
    )
    .await?;
    emit(log("installed", org_name).with("organization", org));
    let headers = worker::Headers::new();
    let _ = headers.set("Location", "/settings?linear=installed");
    let _ = headers.set("Cache-Control", "no-store");
    Ok(Response::empty()
        .map_err(|e| ApiError::internal(e.to_string()))?
        .with_status(302)
        .with_headers(headers))
}

/// Forgets deliveries older than a day and installs never finished (the cron step).
pub async fn prune(env: &Env, now: i64) -> Result<usize, ApiError> {
    let a = db::run(
        env,
        "DELETE FROM linear_deliveries WHERE received_at < ?1",
        &[num(now - DELIVERY_TTL_MS)],
    )
    .await?;
    let b = db::run(
        env,
        "DELETE FROM linear_oauth_states WHERE created_at < ?1",
        &[num(now - oauth::STATE_TTL_MS)],
    )
    .await?;
    Ok(a + b)
}
