//! `POST /webhooks/github`: the GitHub bot, which the Worker dispatches to. The request is
//! checked (signature, size, delivery id) and answered at once; the work — gating, 👀, a
//! session on the pull request's branch, the prompt — continues with `waitUntil`. What to
//! do is decided by [`crate::webhook`]; this moves bytes and asks the control plane
//! ([`ControlPlane`]) for the session. Wasm only.

use crate::api;
use crate::webhook::{self, Ask, Trigger, MAX_PAYLOAD_BYTES};
use inspect_protocol::scm::CallbackContext;
use inspect_protocol::session::{Actor, CreateSessionRequest, PromptRequest, RepositoryRef};
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::d1::{self as db, num};
use inspect_runtime::plane::ControlPlane;
use inspect_runtime::{origin_of, setting};
use serde_json::json;
use worker::{Context, Env, Request, Response};

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

/// One line per decision, JSON, never a token or a payload.
fn log(delivery: &str, event: &str, outcome: &str, detail: &str) {
    use inspect_runtime::log::{emit, LogLine};
    let line = match outcome {
        "failed" | "bookkeeping_failed" => LogLine::error("github_bot", outcome),
        "refused" => LogLine::warn("github_bot", outcome),
        _ => LogLine::info("github_bot", outcome),
    };
    emit(
        line.with("delivery", delivery)
            .with("githubEvent", event)
            .detail(detail),
    );
}

fn answer(status: u16, body: serde_json::Value) -> Result<Response, ApiError> {
    inspect_runtime::answer::json(&body, status)
}

pub async fn webhook(
    mut req: Request,
    env: &Env,
    ctx: Context,
    plane: impl ControlPlane + Clone + 'static,
) -> Result<Response, ApiError> {
    let Some(secret) = setting(env, "GITHUB_WEBHOOK_SECRET") else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "the GitHub bot is not configured: set GITHUB_WEBHOOK_SECRET",
        ));
    };
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let event = header("X-GitHub-Event").unwrap_or_default();
    let delivery = header("X-GitHub-Delivery").unwrap_or_default();
    let signature = header("X-Hub-Signature-256");
    let body = match inspect_runtime::answer::delivery_body(&mut req, MAX_PAYLOAD_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            log(&delivery, &event, "refused", &e.message);
            return Err(e);
        }
    };
    if !webhook::signature_ok(&secret, &body, signature.as_deref()) {
        log(
            &delivery,
            &event,
            "refused",
            "bad or missing X-Hub-Signature-256",
        );
        return Err(ApiError::unauthorized("bad or missing X-Hub-Signature-256"));
    }
    if event.is_empty() || event.len() > 64 {
        return Err(ApiError::bad_request("X-GitHub-Event is missing"));
    }
    if !delivery.is_empty() && !webhook::valid_delivery_id(&delivery) {
        return Err(ApiError::bad_request(
            "X-GitHub-Delivery is not a delivery id",
        ));
    }
    // An event a GitHub trigger may watch goes to the automations too, whatever the bot
    // does with it (each automation runs once per delivery; the deployment's own events
    // are dropped there).
    if let Some(change) = crate::events::automation_event(&event, &delivery, &body) {
        let automations = plane.clone();
        let (delivery2, event2) = (delivery.clone(), event.clone());
        ctx.wait_until(async move {
            match automations.github_event(&change).await {
                Ok(0) => {}
                Ok(n) => log(
                    &delivery2,
                    &event2,
                    "processed",
                    &format!("{n} automation run(s) started"),
                ),
                Err(e) => log(&delivery2, &event2, "failed", &e.message),
            }
        });
    }
    // A pull request that changed on GitHub (whoever changed it): its sessions' artifacts
    // follow. Not a request to the bot; repeating one changes nothing.
    if let Some(change) = webhook::pr_change(&event, &body, now_ms()) {
        let (delivery2, event2) = (delivery.clone(), event.clone());
        ctx.wait_until(async move {
            match plane.pull_request_changed(&change).await {
                Ok(n) => log(
                    &delivery2,
                    &event2,
                    "processed",
                    &format!(
                        "pull request {}/{}#{} changed: {n} session(s) told",
                        change.owner, change.repo, change.number
                    ),
                ),
                Err(e) => log(&delivery2, &event2, "failed", &e.message),
            }
        });
        return answer(202, json!({"accepted": true, "event": event}));
    }
    let bot = api::bot_login(env);
    let trigger = match webhook::decide(&event, &body, &bot) {
        Ok(t) => t,
        Err(skip) => {
            log(&delivery, &event, "skipped", &skip);
            return answer(200, json!({"skipped": skip}));
        }
    };
    // Each delivery is acted on once: a redelivery of one that is being handled or was
    // handled is a duplicate; one that failed was forgotten and runs again.
    if !delivery.is_empty() {
        let now = now_ms();
        let claimed = db::run(
            env,
            "INSERT INTO github_deliveries (delivery_id, event, state, received_at, updated_at) VALUES (?1, ?2, 'processing', ?3, ?3)
             ON CONFLICT(delivery_id) DO NOTHING",
            &[delivery.as_str().into(), event.as_str().into(), num(now)],
        )
        .await?;
        if claimed == 0 {
            log(&delivery, &event, "duplicate", "already handled");
            return answer(200, json!({"duplicate": true}));
        }
    }
    let origin = origin_of(env, &req);
    let env2 = env.clone();
    let delivery2 = delivery.clone();
    let event2 = event.clone();
    ctx.wait_until(async move {
        let outcome = act(&plane, &env2, &origin, &trigger).await;
        let (state, detail, session) = match &outcome {
            Ok(Acted::Session(id)) => ("processed", format!("session {id}"), Some(id.clone())),
            Ok(Acted::Skipped(why)) => ("processed", why.clone(), None),
            Err(e) => ("failed", e.message.clone(), None),
        };
        log(&delivery2, &event2, state, &detail);
        if delivery2.is_empty() {
            return;
        }
        let sql = if state == "failed" {
            // Forgotten, so GitHub's redelivery can try again.
            "DELETE FROM github_deliveries WHERE delivery_id = ?1"
        } else {
            "UPDATE github_deliveries SET state = 'processed', outcome = ?2, session_id = ?3, updated_at = ?4 WHERE delivery_id = ?1"
        };
        let args = if state == "failed" {
            vec![delivery2.as_str().into()]
        } else {
            vec![
                delivery2.as_str().into(),
                detail.as_str().into(),
                db::opt(session.as_deref()),
                num(now_ms()),
            ]
        };
        if let Err(e) = db::run(&env2, sql, &args).await {
            log(&delivery2, &event2, "bookkeeping_failed", &e.message);
        }
    });
    answer(202, json!({"accepted": true, "event": event}))
}

enum Acted {
    Session(String),
    Skipped(String),
}

/// Gates the trigger, acknowledges it with 👀, starts a session on the pull request's
/// branch as the sender, and sends the prompt whose outcome comes back as a comment.
async fn act(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    t: &Trigger,
) -> Result<Acted, ApiError> {
    // A reply in a thread the bot's review started continues that review's session; a
    // reply elsewhere is for the bot only when it mentions it.
    let thread_session = match &t.ask {
        Ask::ReviewComment {
            thread_id,
            mentioned,
            ..
        } => {
            let found = review_thread_session(env, t, *thread_id).await?;
            if found.is_none() && !mentioned {
                return Ok(Acted::Skipped(
                    "a reply in a thread the bot did not start, without a mention".into(),
                ));
            }
            found
        }
        _ => None,
    };
    let settings = api::repo_settings(env, &t.owner, &t.repo).await?;
    if !settings.bot_enabled {
        return Ok(Acted::Skipped(format!(
            "the bot is not enabled for {}/{}",
            t.owner, t.repo
        )));
    }
    if matches!(
        t.ask,
        Ask::Review {
            requested: false,
            ..
        }
    ) && !settings.auto_review_on_open
    {
        return Ok(Acted::Skipped("auto-review on open is off".into()));
    }
    let token = api::app_token(env, now_ms()).await?;
    let permission = if settings.allowed_trigger_users.is_empty() {
        api::permission(env, &token, &t.owner, &t.repo, &t.sender_login).await?
    } else {
        None
    };
    if !webhook::may_trigger(
        &settings.allowed_trigger_users,
        &t.sender_login,
        permission.as_deref(),
    ) {
        return Ok(Acted::Skipped(format!(
            "{} may not trigger the bot here (permission {})",
            t.sender_login,
            permission.as_deref().unwrap_or("unknown")
        )));
    }
    // Best effort: a failed reaction does not stop the work.
    if let Err(e) = api::react(env, &token, &t.reaction_path(), "eyes").await {
        inspect_runtime::log::emit(
            inspect_runtime::log::LogLine::warn("github_bot", "reaction_failed").detail(e.message),
        );
    }
    let pull = match &t.pull_request {
        Some(p) => p.clone(),
        None => api::get_pull(env, &token, &t.owner, &t.repo, t.number)
            .await?
            .ok_or_else(|| {
                ApiError::not_found(format!("{}/{}#{} is gone", t.owner, t.repo, t.number))
            })?
            .as_webhook_pr(),
    };
    let actor = Actor {
        user_id: format!("github:{}", t.sender_id),
        name: t.sender_login.clone(),
        email: None,
        avatar: None,
    };
    let reviewing = matches!(t.ask, Ask::Review { .. });
    let guide = webhook::ReviewGuide {
        verdicts: crate::review::allowed_verdicts(
            &settings,
            &pull.user.login,
            &api::bot_login(env),
        ),
        instructions: settings.review_instructions.clone(),
    };
    let mut content = webhook::prompt(t, &pull, &guide);
    if pull.fork().is_none() && !reviewing {
        content.push_str(&format!(
            "\n\nTo update this pull request, run `open-inspect pr --head {} --base {} --title \"…\"` after committing.",
            pull.head.branch, pull.base.branch
        ));
    }
    let prompt = PromptRequest {
        content,
        callback_context: Some(CallbackContext::Github {
            owner: t.owner.clone(),
            repo: t.repo.clone(),
            number: t.number,
            review_comment_id: match &t.ask {
                Ask::ReviewComment { thread_id, .. } => Some(*thread_id),
                _ => None,
            },
            review: reviewing,
        }),
        ..Default::default()
    };
    if let Some(session_id) = thread_session {
        if let Err(e) = plane.prompt(&session_id, origin, &actor, &prompt).await {
            return Err(refused(env, &token, t, e).await);
        }
        return Ok(Acted::Session(session_id));
    }
    let on_branch = RepositoryRef {
        owner: t.owner.clone(),
        name: t.repo.clone(),
        branch: Some(pull.work_branch()),
        source: None,
    };
    // The repository's default environment, when it holds the repository and the sender
    // may write to every repository in it; else the repository alone.
    let environment = match &settings.default_environment_id {
        Some(id) => usable_environment(plane, env, &token, id, t, &settings).await?,
        None => None,
    };
    let create = CreateSessionRequest {
        repositories: environment.is_none().then(|| vec![on_branch.clone()]),
        environment_id: environment,
        title: Some(t.title()),
        model: settings.default_model.clone(),
        ..Default::default()
    };
    // The session and its first prompt in one request to its object.
    let created = match plane
        .create_prompted_session(origin, &actor, create, &[on_branch], prompt)
        .await
    {
        Ok((created, None)) => created,
        Ok((_, Some(e))) | Err(e) => return Err(refused(env, &token, t, e).await),
    };
    Ok(Acted::Session(created.session_id))
}

/// Says on the pull request why the work it asked for did not start (a budget spent, a
/// prompt refused, a session that could not be made: the 👀 promised an answer), and
/// gives the error back to be logged.
async fn refused(env: &Env, token: &str, t: &Trigger, e: ApiError) -> ApiError {
    let body = format!("I could not start on this: {}", e.message);
    // In the review thread it was asked in, as the answer would be; else the conversation.
    let (o, r, n) = (t.owner.as_str(), t.repo.as_str(), t.number);
    let in_thread = match &t.ask {
        Ask::ReviewComment { thread_id, .. } => {
            api::reply_to_review_comment(env, token, o, r, n, *thread_id, &body)
                .await
                .is_ok()
        }
        _ => false,
    };
    let said = match in_thread {
        true => Ok(()),
        false => api::comment(env, token, o, r, n, &body).await,
    };
    if let Err(said) = said {
        inspect_runtime::log::emit(
            inspect_runtime::log::LogLine::warn("github_bot", "refusal_not_said")
                .detail(said.message),
        );
    }
    ApiError::internal(format!("the work was refused: {}", e.message))
}

/// The session whose review started the thread `thread_id` on the trigger's pull request.
async fn review_thread_session(
    env: &Env,
    t: &Trigger,
    thread_id: i64,
) -> Result<Option<String>, ApiError> {
    #[derive(serde::Deserialize)]
    struct Row {
        session_id: String,
    }
    let row: Option<Row> = db::first(
        env,
        "SELECT session_id FROM github_review_threads WHERE owner = ?1 AND repo = ?2 AND comment_id = ?3 AND number = ?4",
        &[
            t.owner.to_ascii_lowercase().as_str().into(),
            t.repo.to_ascii_lowercase().as_str().into(),
            num(thread_id),
            num(t.number),
        ],
    )
    .await?;
    Ok(row.map(|r| r.session_id))
}

/// The environment a bot session uses: the repository's default, if it still exists, holds
/// the repository, and the sender may trigger the bot on every repository in it.
async fn usable_environment(
    plane: &impl ControlPlane,
    env: &Env,
    token: &str,
    id: &str,
    t: &Trigger,
    settings: &inspect_protocol::scm::RepoSettings,
) -> Result<Option<String>, ApiError> {
    let Ok(found) = plane.environment(id).await else {
        return Ok(None);
    };
    let holds = found
        .repositories
        .iter()
        .any(|r| r.owner.eq_ignore_ascii_case(&t.owner) && r.name.eq_ignore_ascii_case(&t.repo));
    if !holds {
        return Ok(None);
    }
    for r in &found.repositories {
        let permission = if settings.allowed_trigger_users.is_empty() {
            api::permission(env, token, &r.owner, &r.name, &t.sender_login).await?
        } else {
            None
        };
        if !webhook::may_trigger(
            &settings.allowed_trigger_users,
            &t.sender_login,
            permission.as_deref(),
        ) {
            return Ok(None);
        }
    }
    Ok(Some(found.id))
}
