//! Child sessions, made by a parent's agent (`open-inspect child …`) through its sandbox:
//! the parent's object says whether and as whom, the Worker makes the child like any
//! session (its own object, sandbox and token), prompts it, and the parent records it.
//! The parent never sees a child's token; a child acts for the parent's prompter.

use crate::http::{json, origin_of, parse, read_body};
use crate::objects::{call_object, create_session, object_answer};
use inspect_protocol::session::{
    Actor, ArtifactList, AttemptChosen, AttemptGroup, AttemptsPlan, AttemptsRequest, ChildList,
    ChildPlan, ChildPrompt, ChildSummary, ChooseAttempt, CreateSessionRequest, EventPage,
    MessageList, MessageStatus, PromptRequest, SessionState, SpawnChildRequest,
    CHILD_RESERVATION_PREFIX, MAX_RUNNING_CHILDREN,
};
use inspect_protocol::{ApiError, ErrorCode};
use worker::{Env, Method, Request, Response};

type ApiResult<T> = std::result::Result<T, ApiError>;

/// Asks the parent's object, passing the sandbox's credentials along.
async fn ask_parent(
    env: &Env,
    parent: &str,
    path: &str,
    req: &Request,
    body: &[u8],
) -> ApiResult<ChildPlan> {
    let resp = crate::objects::forward_as_sandbox(env, parent, path, req, Some(body)).await?;
    parse(&object_answer(resp, 200).await?)
}

async fn get_json<T: serde::de::DeserializeOwned>(env: &Env, id: &str, path: &str) -> ApiResult<T> {
    let resp = call_object(env, id, Method::Get, path, "", None, &[]).await?;
    parse(&object_answer(resp, 200).await?)
}

/// A child as its parent sees it: status, its last prompt's outcome, last words, PRs.
pub async fn summary(env: &Env, child: &str) -> ApiResult<ChildSummary> {
    let state: SessionState = get_json(env, child, "/").await?;
    let messages: MessageList = get_json(env, child, "/messages").await?;
    let last = messages.messages.last();
    let running = messages
        .messages
        .iter()
        .any(|m| matches!(m.status, MessageStatus::Pending | MessageStatus::Processing));
    let outcome = match (running, last.map(|m| m.status)) {
        (true, _) => "running",
        (false, Some(MessageStatus::Completed)) => "completed",
        (false, Some(MessageStatus::Failed | MessageStatus::Cancelled)) => "failed",
        _ => "idle",
    };
    let last_output = match last {
        Some(m) => {
            let page: EventPage = get_json(
                env,
                child,
                &format!("/events?type=token&message_id={}&limit=500", m.id),
            )
            .await?;
            page.events
                .last()
                .and_then(|e| e.data.get("content"))
                .and_then(|c| c.as_str())
                .map(str::to_owned)
        }
        None => None,
    };
    let artifacts: ArtifactList = get_json(env, child, "/artifacts").await?;
    let pull_requests = artifacts
        .artifacts
        .iter()
        .filter(|a| a.kind == "pr")
        .filter_map(|a| {
            let state = a.metadata.as_ref()?.get("state")?.as_str()?.to_owned();
            Some((a.url.clone()?, state))
        })
        .collect();
    Ok(ChildSummary {
        session_id: state.id,
        title: state.title,
        status: state.status,
        sandbox_status: state.sandbox_status,
        state: outcome.into(),
        last_output,
        error: last.and_then(|m| m.error.clone()),
        pull_requests,
    })
}

/// `POST /sessions/:id/children` (the parent's sandbox): one more child, within the limits.
pub async fn spawn(env: &Env, parent: &str, mut req: Request) -> ApiResult<Response> {
    let body = read_body(&mut req).await?;
    let spawn: SpawnChildRequest = crate::http::body_as(&body)?;
    let plan = ask_parent(env, parent, "/children/plan", &req, &body).await?;
    let slot = plan.reservation.clone().unwrap_or_default();
    match make_child(env, parent, &req, &spawn, &plan).await {
        Ok(resp) => Ok(resp),
        Err(e) => {
            // The slot goes back: a refused or failed spawn holds no place.
            let path = format!("/children/release?reservation={slot}");
            let _ = call_object(env, parent, Method::Post, &path, "", None, b"{}").await;
            Err(e)
        }
    }
}

async fn make_child(
    env: &Env,
    parent: &str,
    req: &Request,
    spawn: &SpawnChildRequest,
    plan: &ChildPlan,
) -> ApiResult<Response> {
    let running = running_children(env, &plan.children).await;
    if running >= MAX_RUNNING_CHILDREN {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("{running} children are running; at most {MAX_RUNNING_CHILDREN} at once (wait for one, or cancel one)"),
        ));
    }
    let child = create_child(env, parent, &origin_of(env, req), plan).await?;
    prompt_child(env, &child, &plan.actor, &spawn.prompt).await?;
    json(
        &serde_json::json!({"sessionId": child, "title": plan.title, "depth": plan.depth}),
        201,
    )
}

/// How many of these children run (a slot being filled counts as running).
async fn running_children(env: &Env, children: &[String]) -> usize {
    let mut running = 0;
    for child in children {
        if child.starts_with(CHILD_RESERVATION_PREFIX)
            || summary(env, child)
                .await
                .is_ok_and(|s| s.state == "running")
        {
            running += 1;
        }
    }
    running
}

/// Makes the child the plan says and records it in the parent (in its slot); its id.
async fn create_child(
    env: &Env,
    parent: &str,
    origin: &str,
    plan: &ChildPlan,
) -> ApiResult<String> {
    let create = CreateSessionRequest {
        repositories: Some(plan.repositories.clone()),
        title: Some(plan.title.clone()),
        model: plan.model.clone(),
        parent_session_id: Some(parent.to_owned()),
        depth: Some(plan.depth),
        agent: plan.agent,
        ..Default::default()
    };
    let created = create_session(
        env,
        origin,
        &plan.actor,
        create,
        inspect_protocol::usage::SessionSource::Child,
    )
    .await?;
    let record = serde_json::json!({
        "sessionId": created.session_id,
        "title": plan.title,
        "reservation": plan.reservation,
    });
    call_object(
        env,
        parent,
        Method::Post,
        "/children/record",
        "",
        None,
        record.to_string().as_bytes(),
    )
    .await?;
    Ok(created.session_id)
}

/// `POST /sessions/:id/attempts` (people): "Try N ways". The parent holds a slot for each
/// attempt; with room for all of them to run, each is made like a child (on the parent's
/// repositories, for the person who asked) and given the prompt. A slot not filled is
/// given back; attempts already made stay (and are listed).
pub async fn attempts(
    env: &Env,
    parent: &str,
    actor: &Actor,
    req: &Request,
    body: &[u8],
) -> ApiResult<Response> {
    // Parsed once here, passed on typed; the parent's object checks it.
    let ask: AttemptsRequest = crate::http::body_as(body)?;
    let typed = serde_json::to_vec(&ask).map_err(|e| ApiError::internal(e.to_string()))?;
    let resp = call_object(
        env,
        parent,
        Method::Post,
        "/attempts/plan",
        "",
        Some(actor),
        &typed,
    )
    .await?;
    let plan: AttemptsPlan = parse(&object_answer(resp, 200).await?)?;
    let release = |slot: Option<String>| async move {
        let path = format!("/children/release?reservation={}", slot.unwrap_or_default());
        let _ = call_object(env, parent, Method::Post, &path, "", None, b"{}").await;
    };
    let existing = plan
        .plans
        .first()
        .map(|p| p.children.clone())
        .unwrap_or_default();
    let running = running_children(env, &existing).await;
    if running + ask.count > MAX_RUNNING_CHILDREN {
        for p in &plan.plans {
            release(p.reservation.clone()).await;
        }
        return Err(ApiError::bad_request(format!(
            "{running} children are running and at most {MAX_RUNNING_CHILDREN} run at once: room for {} attempts now",
            MAX_RUNNING_CHILDREN.saturating_sub(running)
        )));
    }
    let origin = origin_of(env, req);
    let mut made = Vec::new();
    let mut failed = None;
    for p in &plan.plans {
        if failed.is_some() {
            release(p.reservation.clone()).await;
            continue;
        }
        match create_child(env, parent, &origin, p).await {
            Ok(child) => {
                if let Err(e) = prompt_child(env, &child, &p.actor, &ask.content).await {
                    failed = Some(e);
                }
                made.push(child);
            }
            Err(e) => {
                release(p.reservation.clone()).await;
                failed = Some(e);
            }
        }
    }
    if let (Some(e), true) = (&failed, made.is_empty()) {
        return Err(e.clone());
    }
    let group = AttemptGroup {
        group: plan.group,
        prompt: ask.content,
        sessions: made,
        chosen: None,
    };
    json(&group, 201)
}

/// `POST /sessions/:id/attempts/choose` (people): "Use this one". The parent marks it
/// chosen (once: another attempt of a decided group is refused), the chosen attempt opens
/// its pull request (for the person who chose, as the agent's `open-inspect pr` would),
/// and the group's other attempts are stopped.
pub async fn choose(
    env: &Env,
    parent: &str,
    actor: &Actor,
    req: &Request,
    body: &[u8],
) -> ApiResult<Response> {
    let ask: ChooseAttempt = crate::http::body_as(body)?;
    let typed = serde_json::to_vec(&ask).map_err(|e| ApiError::internal(e.to_string()))?;
    let resp = call_object(
        env,
        parent,
        Method::Post,
        "/attempts/choose",
        "",
        Some(actor),
        &typed,
    )
    .await?;
    let group: AttemptGroup = parse(&object_answer(resp, 200).await?)?;
    let chosen = ask.session_id;
    // The pull request is named by the prompt's first line, as the attempts were.
    let title: String = group
        .prompt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("Attempt")
        .chars()
        .take(72)
        .collect();
    let pr = inspect_protocol::scm::PullRequestRequest {
        title,
        body: format!(
            "Chosen from {} attempts at this prompt:\n\n> {}",
            group.sessions.len(),
            group.prompt.lines().collect::<Vec<_>>().join("\n> ")
        ),
        ..Default::default()
    };
    let resp = call_object(
        env,
        &chosen,
        Method::Post,
        "/attempt-pull-request",
        &origin_of(env, req),
        Some(actor),
        &serde_json::to_vec(&pr).map_err(|e| ApiError::internal(e.to_string()))?,
    )
    .await?;
    let opened: inspect_protocol::scm::PullRequestResponse =
        parse(&object_answer(resp, 200).await?)?;
    let mut stopped = Vec::new();
    for other in group.sessions.iter().filter(|s| **s != chosen) {
        if call_object(env, other, Method::Post, "/stop", "", Some(actor), b"{}")
            .await
            .is_ok()
        {
            stopped.push(other.clone());
        }
    }
    json(
        &AttemptChosen {
            session_id: chosen,
            pull_requests: opened.pull_requests,
            stopped,
        },
        200,
    )
}

async fn prompt_child(env: &Env, child: &str, actor: &Actor, content: &str) -> ApiResult<()> {
    let prompt = PromptRequest {
        content: content.to_owned(),
        ..Default::default()
    };
    let body = serde_json::to_vec(&prompt).map_err(|e| ApiError::internal(e.to_string()))?;
    let resp = call_object(env, child, Method::Post, "/prompt", "", Some(actor), &body).await?;
    object_answer(resp, 200).await.map(drop)
}

/// The parent's sandbox acts on one of its children: status, another prompt, or cancel.
pub async fn act(
    env: &Env,
    parent: &str,
    child: &str,
    op: &str,
    mut req: Request,
) -> ApiResult<Response> {
    if !crate::routes::valid_session_id(child) {
        return Err(ApiError::not_found("no such child"));
    }
    let body = if op == "prompt" {
        read_body(&mut req).await?
    } else {
        Vec::new()
    };
    let plan = ask_parent(
        env,
        parent,
        &format!("/children/check?child={child}"),
        &req,
        b"{}",
    )
    .await?;
    match op {
        "status" => json(&summary(env, child).await?, 200),
        "prompt" => {
            let p: ChildPrompt = crate::http::body_as(&body)?;
            prompt_child(env, child, &plan.actor, &p.prompt).await?;
            json(&summary(env, child).await?, 200)
        }
        _ => {
            call_object(
                env,
                child,
                Method::Post,
                "/stop",
                "",
                Some(&plan.actor),
                b"{}",
            )
            .await?;
            json(&summary(env, child).await?, 200)
        }
    }
}

/// `GET /sessions/:id/children` (people): the children, for the parent's page.
pub async fn list(env: &Env, parent: &str) -> ApiResult<Response> {
    let ids: Vec<String> = get_json(env, parent, "/children").await?;
    let mut children = Vec::new();
    for id in ids {
        if let Ok(s) = summary(env, &id).await {
            children.push(s);
        }
    }
    let attempts: Vec<AttemptGroup> = get_json(env, parent, "/attempts").await?;
    json(&ChildList { children, attempts }, 200)
}
