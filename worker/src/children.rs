//! Child sessions, made by a parent's agent (`open-inspect child …`) through its sandbox:
//! the parent's object says whether and as whom, the Worker makes the child like any
//! session (its own object, sandbox and token), prompts it, and the parent records it.
//! The parent never sees a child's token; a child acts for the parent's prompter.

use crate::http::{json, origin_of, parse, read_body};
use crate::objects::{call_object, create_session, object_answer};
use inspect_protocol::session::{
    Actor, ArtifactList, ChildList, ChildPlan, ChildPrompt, ChildSummary, CreateSessionRequest,
    EventPage, MessageList, MessageStatus, PromptRequest, SessionState, SpawnChildRequest,
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
    let mut running = 0;
    for child in &plan.children {
        // Another child being made at this moment counts as running.
        if child.starts_with(CHILD_RESERVATION_PREFIX)
            || summary(env, child)
                .await
                .is_ok_and(|s| s.state == "running")
        {
            running += 1;
        }
    }
    if running >= MAX_RUNNING_CHILDREN {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("{running} children are running; at most {MAX_RUNNING_CHILDREN} at once (wait for one, or cancel one)"),
        ));
    }
    let create = CreateSessionRequest {
        repositories: Some(plan.repositories.clone()),
        title: Some(plan.title.clone()),
        model: plan.model.clone(),
        parent_session_id: Some(parent.to_owned()),
        depth: Some(plan.depth),
        ..Default::default()
    };
    let origin = origin_of(env, req);
    let created = create_session(
        env,
        &origin,
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
    prompt_child(env, &created.session_id, &plan.actor, &spawn.prompt).await?;
    json(
        &serde_json::json!({"sessionId": created.session_id, "title": plan.title, "depth": plan.depth}),
        201,
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
    json(&ChildList { children }, 200)
}
