//! Automations through the Worker: their routes (any caller, as sessions), the inbound
//! webhook (the automation's own key), and the cron step that fires due schedules. The
//! rules are `inspect_automations`'; runs are kept in D1 by its `store`, and a session's
//! outcome reaches its run through the prompt's callback (`CallbackContext::Automation`).

use crate::auth::tokens;
use crate::db;
use crate::http::{body_as, read_body_up_to, said_json, ApiResult};
use crate::lookups::Lookups;
use futures::StreamExt;
use inspect_automations::rules::{self, Firing};
use inspect_automations::schedule;
use inspect_automations::store::{self, Claim, Overlap, Stored};
use inspect_protocol::automations::{
    Automation, AutomationCreated, AutomationList, AutomationOrigin, AutomationRequest, Run,
    RunList, RunStatus, RunTrigger, SchedulePreview, TriggerType, WebhookAccepted,
    MAX_WEBHOOK_BYTES,
};
use inspect_protocol::scm::CallbackContext;
use inspect_protocol::session::{Actor, CreateSessionRequest, PromptRequest, RepositoryRef};
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::log::{emit, LogLine};
use serde_json::Value;
use worker::{Env, Request};

/// A webhook key starts with this, so a leaked one is recognisable.
const KEY_PREFIX: &str = "oia_";
/// Runs shown in a history.
const RUNS_SHOWN: usize = 50;
/// Schedules fired by one cron step (each takes about ten of the invocation's 10,000
/// subrequests; more wait for the next minute), and how many at once.
const DUE_PER_TICK: usize = 1_000;
const FIRING_AT_ONCE: usize = 32;
/// Due schedules whose slots one D1 batch takes (two statements each).
const SLOTS_A_BATCH: usize = 32;
/// The longest idempotency key.
const MAX_IDEMPOTENCY_KEY_CHARS: usize = 200;

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("no automation {id}"))
}

async fn stored(env: &Env, id: &str) -> ApiResult<Stored> {
    store::get(env, id).await?.ok_or_else(|| not_found(id))
}

fn new_key() -> ApiResult<(String, String)> {
    let key = tokens::encode(KEY_PREFIX, &db::random::<32>()?);
    let hash = tokens::hash(&key);
    Ok((key, hash))
}

/// A saved schedule's next firing after `now` (none for other triggers).
fn next_run(settings: &AutomationRequest, now: i64) -> ApiResult<Option<i64>> {
    match &settings.schedule {
        Some(s) if settings.trigger_type == TriggerType::Schedule => {
            Ok(schedule::read(s)?.next_after(now))
        }
        _ => Ok(None),
    }
}

/// Where the automation's sessions link to: `PUBLIC_URL`, else where it was saved from.
fn origin_for(env: &Env, saved_from: &str) -> String {
    db::setting(env, "PUBLIC_URL").unwrap_or_else(|| saved_from.to_owned())
}

pub async fn list(env: &Env) -> ApiResult<AutomationList> {
    Ok(AutomationList {
        automations: store::list(env).await?,
    })
}

pub async fn get(env: &Env, id: &str) -> ApiResult<Automation> {
    Ok(stored(env, id).await?.automation)
}

/// Changing an automation is its owner's, or an admin's.
pub async fn require_owner(env: &Env, caller: &crate::caller::Caller, id: &str) -> ApiResult<()> {
    let automation = get(env, id).await?;
    if automation.created_by == caller.actor.user_id {
        return Ok(());
    }
    crate::people::require_admin(env, caller, "another person's automation").await
}

pub async fn create(
    env: &Env,
    actor: &Actor,
    body: &[u8],
    origin: &str,
    now: i64,
) -> ApiResult<AutomationCreated> {
    let (mut settings, parsed) = rules::validate(body_as(body)?, now)?;
    slack_triggers_allowed(env, &settings)?;
    github_repository_seen(env, &settings).await?;
    let sealed = seal_sentry_secret(env, &mut settings)?;
    if settings.trigger_type == TriggerType::Sentry && sealed.is_none() {
        return Err(ApiError::bad_request(
            "a Sentry trigger needs the internal integration's client secret",
        ));
    }
    let id = format!("auto_{}", hex::encode(db::random::<12>()?));
    let key = match settings.trigger_type {
        TriggerType::Webhook => Some(new_key()?),
        TriggerType::Schedule
        | TriggerType::Sentry
        | TriggerType::SlackChannel
        | TriggerType::LinearIssue
        | TriggerType::GithubEvent => None,
    };
    let next = parsed.and_then(|p| p.next_after(now));
    let new = store::NewAutomation {
        id: &id,
        settings: &settings,
        actor,
        key_hash: key.as_ref().map(|(_, hash)| hash.as_str()),
        secret_sealed: sealed.as_deref(),
        next_run_at: next,
        origin,
    };
    store::insert(env, new, now).await?;
    emit(
        LogLine::info("automations", "created")
            .with("automation", id.as_str())
            .with("trigger", settings.trigger_type.as_str()),
    );
    Ok(AutomationCreated {
        automation: get(env, &id).await?,
        webhook_key: key.map(|(key, _)| key),
    })
}

pub async fn update(
    env: &Env,
    id: &str,
    body: &[u8],
    origin: &str,
    now: i64,
) -> ApiResult<Automation> {
    let old = stored(env, id).await?;
    let (mut settings, parsed) = rules::validate(body_as(body)?, now)?;
    slack_triggers_allowed(env, &settings)?;
    github_repository_seen(env, &settings).await?;
    if settings.trigger_type != old.automation.settings.trigger_type {
        return Err(ApiError::bad_request(
            "an automation's trigger type stays as it was made: make a new automation",
        ));
    }
    // A Sentry secret left out is kept as it was.
    let sealed = seal_sentry_secret(env, &mut settings)?;
    let next = parsed.and_then(|p| p.next_after(now));
    if !store::update(env, id, &settings, next, sealed.as_deref(), origin, now).await? {
        return Err(not_found(id));
    }
    get(env, id).await
}

/// A Slack channel trigger is saved only where the deployment enables them.
fn slack_triggers_allowed(env: &Env, settings: &AutomationRequest) -> ApiResult<()> {
    if settings.trigger_type == TriggerType::SlackChannel
        && !inspect_slack::bot::triggers_enabled(env)
    {
        return Err(ApiError::bad_request(
            "Slack channel triggers are off in this deployment (SLACK_TRIGGERS_ENABLED=true turns them on)",
        ));
    }
    Ok(())
}

/// A GitHub trigger watches a repository the GitHub App's installation can see (the
/// installation's repositories, as last synced): the App's webhook brings no other's events.
async fn github_repository_seen(env: &Env, settings: &AutomationRequest) -> ApiResult<()> {
    let Some(repo) = settings
        .repositories
        .first()
        .filter(|_| settings.trigger_type == TriggerType::GithubEvent)
    else {
        return Ok(());
    };
    #[derive(serde::Deserialize)]
    struct Seen {
        #[allow(dead_code)]
        owner: String,
    }
    let seen: Option<Seen> = db::first(
        env,
        "SELECT owner FROM repositories WHERE owner = ?1 AND name = ?2 AND kind = 'github'",
        &[repo.owner.as_str().into(), repo.name.as_str().into()],
    )
    .await?;
    match seen {
        Some(_) => Ok(()),
        None => Err(ApiError::bad_request(format!(
            "the GitHub App cannot see {}/{}: install it on that repository (or sync the repositories) first",
            repo.owner, repo.name
        ))),
    }
}

/// Takes a Sentry client secret out of the settings (they are answered as saved) and
/// seals it for the store.
fn seal_sentry_secret(env: &Env, settings: &mut AutomationRequest) -> ApiResult<Option<String>> {
    let Some(secret) = settings
        .sentry
        .as_mut()
        .and_then(|s| s.client_secret.take())
    else {
        return Ok(None);
    };
    let key = crate::settings::sealing_key(env)?;
    Ok(Some(key.seal(db::random::<12>()?, &secret)?))
}

pub async fn delete(env: &Env, id: &str, now: i64) -> ApiResult<()> {
    if store::delete(env, id, now).await? {
        Ok(())
    } else {
        Err(not_found(id))
    }
}

/// Pauses (by hand) or resumes (the failure count reset, a schedule's next firing from now).
pub async fn set_enabled(env: &Env, id: &str, enabled: bool, now: i64) -> ApiResult<Automation> {
    let old = stored(env, id).await?;
    let next = if enabled {
        next_run(&old.automation.settings, now)?
    } else {
        None
    };
    let reason = (!enabled).then_some("paused by hand");
    if !store::set_enabled(env, id, enabled, reason, next, now).await? {
        return Err(not_found(id));
    }
    get(env, id).await
}

/// A new webhook key (the old one stops working at once), shown this once.
pub async fn rotate_key(env: &Env, id: &str, now: i64) -> ApiResult<AutomationCreated> {
    let (key, hash) = new_key()?;
    if !store::set_key(env, id, &hash, now).await? {
        return Err(ApiError::not_found(format!("no webhook automation {id}")));
    }
    Ok(AutomationCreated {
        automation: get(env, id).await?,
        webhook_key: Some(key),
    })
}

/// `GET /automations/:id/runs`: also of a deleted automation (its history is kept).
pub async fn runs(env: &Env, id: &str) -> ApiResult<RunList> {
    if !store::ever_made(env, id).await? {
        return Err(not_found(id));
    }
    Ok(RunList {
        runs: store::runs(env, id, RUNS_SHOWN).await?,
    })
}

/// The next five firings of a schedule being written.
pub fn preview(pairs: &[(String, String)], now: i64) -> ApiResult<SchedulePreview> {
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| ApiError::bad_request(format!("{name} is missing")))
    };
    let s = inspect_protocol::automations::Schedule {
        cron: field("cron")?,
        timezone: field("timezone")?,
    };
    Ok(SchedulePreview {
        next_runs: schedule::parse(&s, now)?.upcoming(now, 5),
    })
}

/// `POST /automations/:id/trigger`: one run now (also while paused), unless one is active.
pub async fn trigger(env: &Env, id: &str, now: i64) -> ApiResult<Run> {
    let automation = stored(env, id).await?;
    let run_id = new_run_id()?;
    let claim = store::claim(
        env,
        &run_id,
        id,
        RunTrigger::Manual,
        &format!("manual:{run_id}"),
        Overlap::Refused,
        now,
    )
    .await?;
    if claim != Claim::Started {
        return Err(ApiError::conflict(store::CONCURRENT_RUN));
    }
    let lookups = Lookups::default();
    start_run(env, &automation, &run_id, &Firing::Manual, now, &lookups).await;
    store::runs(env, id, RUNS_SHOWN)
        .await?
        .into_iter()
        .find(|r| r.id == run_id)
        .ok_or_else(|| ApiError::internal("the run was not recorded"))
}

fn new_run_id() -> ApiResult<String> {
    Ok(format!("run_{}", hex::encode(db::random::<12>()?)))
}

/// Starts a claimed run: one session per repository (or one without), each created as the
/// automation's owner, titled `[Auto] <name>`, carrying the automation and run, and sent the
/// prompt with a callback to the run. What cannot start is recorded as failed.
async fn start_run(
    env: &Env,
    automation: &Stored,
    run_id: &str,
    firing: &Firing<'_>,
    now: i64,
    lookups: &Lookups,
) -> Vec<String> {
    let settings = &automation.automation.settings;
    // A GitHub event on a pull request: its branch is worked on, and its comments hear
    // the answer.
    let (work_branch, github) = match firing {
        Firing::Github {
            work_branch,
            thread,
            ..
        } => (work_branch.map(str::to_owned), thread.cloned()),
        _ => (None, None),
    };
    let targets: Vec<Option<RepositoryRef>> = if settings.repositories.is_empty() {
        vec![None]
    } else {
        settings
            .repositories
            .iter()
            .map(|r| {
                Some(RepositoryRef {
                    branch: work_branch.clone().or_else(|| settings.branch.clone()),
                    ..r.clone()
                })
            })
            .collect()
    };
    let content = rules::prompt(&settings.instructions, firing);
    let origin = origin_for(env, &automation.origin);
    let slack_thread = match firing {
        Firing::Slack { thread, .. } => Some((*thread).clone()),
        _ => None,
    };
    let sole = targets.len() == 1;
    let starts = targets.into_iter().map(|repo| {
        let content = content.clone();
        let origin = origin.clone();
        let slack_thread = slack_thread.clone();
        let github = github.clone();
        let on_branch = work_branch.is_some();
        async move {
            let key = repo.as_ref().map(rules::repository_key).unwrap_or_default();
            let from = AutomationOrigin {
                automation_id: automation.automation.id.clone(),
                run_id: run_id.to_owned(),
                repository: key.clone(),
                slack_thread,
                github,
            };
            let outcome = start_session(
                env,
                automation,
                (repo, on_branch),
                (from, sole),
                content,
                &origin,
                lookups,
            )
            .await;
            let started = outcome.as_ref().ok().cloned();
            if let Err(e) = outcome {
                let _ = store::add_session(
                    env,
                    run_id,
                    &key,
                    e.0.as_deref(),
                    RunStatus::Failed,
                    Some(&e.1.message),
                )
                .await;
                emit(
                    LogLine::warn("automations", "session_not_started")
                        .with("automation", automation.automation.id.as_str())
                        .with("run", run_id)
                        .detail(e.1.message),
                );
            }
            started
        }
    });
    let started = futures::future::join_all(starts).await;
    // A run of one session was marked running with it.
    if !sole {
        let _ = store::mark_running(env, run_id).await;
    }
    // A session that could not start ended already: the run may be over.
    if started.contains(&None) {
        if let Err(e) = store::finish_run(env, run_id, now).await {
            emit(LogLine::error("automations", "run_not_finished").detail(e.message));
        }
    }
    started.into_iter().flatten().collect()
}

/// Creates and prompts one session; on failure, the session made (if any) and why.
async fn start_session(
    env: &Env,
    automation: &Stored,
    // The repository, and whether its branch is a pull request's (not one the repository
    // lists).
    (repo, on_branch): (Option<RepositoryRef>, bool),
    // Where it comes from, and whether it is its run's only session.
    (from, sole): (AutomationOrigin, bool),
    content: String,
    origin: &str,
    lookups: &Lookups,
) -> Result<String, (Option<String>, ApiError)> {
    // A run is new work: refused, with the reason kept on the run, once a budget of the
    // owner's is spent.
    inspect_runtime::budgets::check(env, &automation.actor.user_id, crate::http::now_ms() as i64)
        .await
        .map_err(|e| (None, e))?;
    let settings = &automation.automation.settings;
    let overrides: Vec<RepositoryRef> = repo.iter().filter(|_| on_branch).cloned().collect();
    let create = CreateSessionRequest {
        repositories: repo.map(|r| vec![r]),
        title: Some(rules::session_title(&settings.name)),
        model: settings.model.clone(),
        reasoning_effort: settings.reasoning_effort.clone(),
        automation: Some(from.clone()),
        ..Default::default()
    };
    // Its prompt goes with its making, in the object's first request; the prompt's outcome,
    // which the run waits for, finds the session recorded (and a run of one session marked
    // running) by its index row's batch.
    let prompt = PromptRequest {
        content,
        model: settings.model.clone(),
        reasoning_effort: settings.reasoning_effort.clone(),
        callback_context: Some(CallbackContext::Automation(from.clone())),
        ..Default::default()
    };
    let (run_id, repository) = (from.run_id, from.repository);
    let recorded = move |id: &str| store::session_statements(&run_id, &repository, id, sole);
    let (created, prompt_refused) = crate::objects::create_session_among(
        env,
        origin,
        &automation.actor,
        (create, Some(prompt)),
        &overrides,
        (
            inspect_protocol::usage::SessionSource::Automation,
            Some(&recorded),
        ),
        lookups,
    )
    .await
    .map_err(|e| (None, e))?;
    let session = created.session_id;
    if let Some(e) = prompt_refused {
        return Err((Some(session), e));
    }
    Ok(session)
}

/// `POST /webhooks/automation/:id`: JSON only, at most 64 KiB, the automation's key as a
/// bearer token. Matching deliveries start a run (one per `idempotencyKey`).
pub async fn webhook(
    env: &Env,
    id: &str,
    mut req: Request,
    now: i64,
) -> ApiResult<WebhookAccepted> {
    said_json(&req)?;
    let body = read_body_up_to(&mut req, MAX_WEBHOOK_BYTES).await?;
    let automation = match store::get(env, id).await? {
        Some(a) if a.automation.settings.trigger_type == TriggerType::Webhook => a,
        _ => return Err(ApiError::not_found(format!("no webhook automation {id}"))),
    };
    let presented = req
        .headers()
        .get("Authorization")
        .ok()
        .flatten()
        .and_then(|h| h.strip_prefix("Bearer ").map(|k| tokens::hash(k.trim())));
    let known = automation.webhook_key_hash.as_deref().unwrap_or_default();
    if !presented.is_some_and(|p| !known.is_empty() && tokens::same(&p, known)) {
        return Err(ApiError::new(
            ErrorCode::Unauthorized,
            "a webhook delivery carries the automation's key: Authorization: Bearer <key>",
        ));
    }
    let payload: Value = body_as(&body)?;
    let idempotency = match payload.get("idempotencyKey") {
        None | Some(Value::Null) => None,
        Some(Value::String(k))
            if !k.is_empty() && k.chars().count() <= MAX_IDEMPOTENCY_KEY_CHARS =>
        {
            Some(k.clone())
        }
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "idempotencyKey is a string of 1 to {MAX_IDEMPOTENCY_KEY_CHARS} characters"
            )))
        }
    };
    let key = idempotency.map(|k| format!("webhook:{k}"));
    let firing = Firing::Webhook {
        received_ms: now,
        payload: &payload,
    };
    fire_event(
        env,
        &automation,
        RunTrigger::Webhook,
        key,
        &payload,
        &firing,
        now,
    )
    .await
    .map(|(accepted, _)| accepted)
}

/// An event (a webhook delivery, a Sentry alert, a Slack message) for an automation:
/// skipped unless its conditions match `facts`, recorded as skipped while paused, and
/// otherwise one run per concurrency key — deliveries with their own keys may overlap,
/// others wait their turn. The sessions a run started come with the answer.
async fn fire_event(
    env: &Env,
    automation: &Stored,
    trigger: RunTrigger,
    key: Option<String>,
    facts: &Value,
    firing: &Firing<'_>,
    now: i64,
) -> ApiResult<(WebhookAccepted, Vec<String>)> {
    let id = automation.automation.id.as_str();
    let accepted = |triggered: i64, skipped: i64| {
        (
            WebhookAccepted {
                ok: true,
                triggered,
                skipped,
            },
            Vec::new(),
        )
    };
    let log = |event: &str| {
        emit(
            LogLine::info("automations", event)
                .with("automation", id)
                .with("trigger", trigger.as_str()),
        )
    };
    if !inspect_automations::conditions::all_match(
        &automation.automation.settings.conditions,
        facts,
    ) {
        log("event_not_matching");
        return Ok(accepted(0, 1));
    }
    let run_id = new_run_id()?;
    let exclusive = key.is_none();
    let key = key.unwrap_or_else(|| format!("{}:{run_id}", trigger.as_str()));
    if automation.automation.status == inspect_protocol::automations::AutomationStatus::Paused {
        store::skip(
            env,
            &run_id,
            id,
            trigger,
            &key,
            "the automation is paused",
            now,
        )
        .await?;
        log("event_while_paused");
        return Ok(accepted(0, 1));
    }
    // An event is charged to the owner's sessions rate limit (refunded if not started).
    let charge = crate::ratelimit::charge_session(env, &automation.actor.user_id, now).await?;
    let overlap = if exclusive {
        Overlap::Skipped
    } else {
        Overlap::Allowed
    };
    let claim = store::claim(env, &run_id, id, trigger, &key, overlap, now).await;
    if !matches!(claim, Ok(Claim::Started)) {
        crate::ratelimit::refund(env, charge).await;
        claim?;
        log("event_skipped");
        return Ok(accepted(0, 1));
    }
    let sessions = start_run(env, automation, &run_id, firing, now, &Lookups::default()).await;
    log("event_run_started");
    let (answer, _) = accepted(1, 0);
    Ok((answer, sessions))
}

/// A top-level message in a Slack channel that did not mention the bot: the oldest Slack
/// channel trigger that takes it starts a run (once per message, whatever Slack retries),
/// its answer going to the message's thread. Nothing while the deployment has them off.
pub async fn slack_message(
    env: &Env,
    message: &inspect_protocol::slack::ChannelMessage,
    now: i64,
) -> ApiResult<Option<inspect_protocol::slack::ChannelRun>> {
    if !inspect_slack::bot::triggers_enabled(env) {
        return Ok(None);
    }
    let watching = store::of_trigger(env, TriggerType::SlackChannel).await?;
    let Some(automation) = watching.into_iter().find(|a| {
        a.automation.settings.slack.as_ref().is_some_and(|t| {
            inspect_automations::slack::takes(t, &message.channel, &message.user, &message.text)
        })
    }) else {
        return Ok(None);
    };
    let settings = &automation.automation.settings;
    let target = match settings.repositories.first() {
        Some(r) => rules::repository_key(r),
        None => settings.name.clone(),
    };
    let thread = inspect_protocol::slack::SlackThread {
        channel: message.channel.clone(),
        thread_ts: message.ts.clone(),
        progress_ts: None,
        reaction_ts: Some(message.ts.clone()),
        target: target.clone(),
        started_at: now,
    };
    let firing = Firing::Slack {
        received_ms: now,
        channel: &message.channel_name,
        author: &message.author,
        text: &message.text,
        thread: &thread,
    };
    let key = format!("slack:{}:{}", message.channel, message.ts);
    let (_, sessions) = fire_event(
        env,
        &automation,
        RunTrigger::Slack,
        Some(key),
        &Value::Null,
        &firing,
        now,
    )
    .await?;
    Ok(sessions
        .into_iter()
        .next()
        .map(|session_id| inspect_protocol::slack::ChannelRun {
            automation_id: automation.automation.id.clone(),
            session_id,
            target,
        }))
}

/// A Linear issue created or moved (from the Linear bot's signed webhook): each Linear
/// trigger that takes it starts a run, once per issue and event whatever Linear
/// redelivers. How many runs started.
pub async fn linear_issue(
    env: &Env,
    change: &inspect_protocol::automations::LinearIssueChange,
    now: i64,
) -> ApiResult<usize> {
    let watching = store::of_trigger(env, TriggerType::LinearIssue).await?;
    let shown = inspect_automations::linear::shown(change);
    let key = inspect_automations::linear::key(change);
    let mut started = 0;
    for automation in watching.into_iter().filter(|a| {
        a.automation
            .settings
            .linear
            .as_ref()
            .is_some_and(|t| inspect_automations::linear::takes(t, change))
    }) {
        let firing = Firing::Linear {
            received_ms: now,
            shown: &shown,
        };
        let (accepted, _) = fire_event(
            env,
            &automation,
            RunTrigger::Linear,
            Some(key.clone()),
            &shown,
            &firing,
            now,
        )
        .await?;
        started += accepted.triggered as usize;
    }
    Ok(started)
}

/// A GitHub App delivery (from the bot's signed webhook): each GitHub trigger on its
/// repository that takes it starts a run, once per delivery whatever GitHub redelivers.
/// The deployment's own events (the App's bot, the sessions' branches) start none. How
/// many runs started.
pub async fn github_event(
    env: &Env,
    change: &inspect_protocol::automations::GithubEventChange,
    now: i64,
) -> ApiResult<usize> {
    use inspect_automations::github;
    if github::caused_by_us(change, &inspect_github::api::bot_login(env)) {
        emit(
            LogLine::info("automations", "github_event_ours")
                .with("event", change.event.as_str())
                .with("delivery", change.delivery.as_str()),
        );
        return Ok(0);
    }
    let watching: Vec<Stored> = store::of_trigger(env, TriggerType::GithubEvent)
        .await?
        .into_iter()
        .filter(|a| {
            a.automation.settings.repositories.first().is_some_and(|r| {
                r.owner.eq_ignore_ascii_case(&change.owner)
                    && r.name.eq_ignore_ascii_case(&change.repo)
            })
        })
        .collect();
    let shown = github::shown(change);
    let key = github::key(change);
    let thread = github::thread(change);
    // A pull request's changed files, asked of GitHub once, when a trigger needs them; and
    // the branch of a pull request a comment is on (the delivery does not say it).
    let mut files: Option<Vec<String>> = None;
    let mut work_branch = change.work_branch.clone();
    let mut asked_branch = false;
    let mut started = 0;
    for automation in watching {
        let Some(t) = automation.automation.settings.github.as_ref() else {
            continue;
        };
        if github::needs_paths(t, change) && files.is_none() {
            files = Some(pull_request_paths(env, change, now).await?);
        }
        if !github::takes(t, change, files.as_deref()) {
            continue;
        }
        if work_branch.is_none() && change.pull_request && !asked_branch {
            asked_branch = true;
            work_branch = pull_request_branch(env, change, now).await?;
        }
        let firing = Firing::Github {
            received_ms: now,
            shown: &shown,
            work_branch: work_branch.as_deref(),
            thread: thread.as_ref(),
        };
        let (accepted, _) = fire_event(
            env,
            &automation,
            RunTrigger::Github,
            Some(key.clone()),
            &shown,
            &firing,
            now,
        )
        .await?;
        started += accepted.triggered as usize;
    }
    Ok(started)
}

/// The branch a session on the delivery's pull request works on (its head, or `pull/N/head`
/// for a fork's), as GitHub says; none when it is gone.
async fn pull_request_branch(
    env: &Env,
    change: &inspect_protocol::automations::GithubEventChange,
    now: i64,
) -> ApiResult<Option<String>> {
    let Some(number) = change.number else {
        return Ok(None);
    };
    let token = inspect_github::api::app_token(env, now).await?;
    let pull =
        inspect_github::api::get_pull(env, &token, &change.owner, &change.repo, number).await?;
    Ok(pull.map(|p| p.as_webhook_pr().work_branch()))
}

/// The files a delivery's pull request changes, as GitHub lists them.
async fn pull_request_paths(
    env: &Env,
    change: &inspect_protocol::automations::GithubEventChange,
    now: i64,
) -> ApiResult<Vec<String>> {
    let Some(number) = change.number else {
        return Ok(Vec::new());
    };
    let token = inspect_github::api::app_token(env, now).await?;
    let files =
        inspect_github::api::pull_files(env, &token, &change.owner, &change.repo, number).await?;
    Ok(files.into_iter().map(|(name, _)| name).collect())
}

/// Whether a Slack channel automation (not deleted) admits `user` to its threads.
pub async fn slack_user_admitted(env: &Env, id: &str, user: &str) -> ApiResult<bool> {
    Ok(store::get(env, id)
        .await?
        .and_then(|a| a.automation.settings.slack)
        .is_some_and(|t| inspect_automations::slack::admits(&t, user)))
}

/// `POST /webhooks/sentry/:id`: a Sentry internal integration's delivery, signed with its
/// client secret (`Sentry-Hook-Signature`). A new issue or a fired alert, as the automation
/// asks, starts a run once per issue or event; anything else is answered and ignored.
pub async fn sentry_webhook(
    env: &Env,
    id: &str,
    mut req: Request,
    now: i64,
) -> ApiResult<WebhookAccepted> {
    let body = read_body_up_to(&mut req, inspect_automations::sentry::MAX_BODY_BYTES).await?;
    let header = |name: &str| req.headers().get(name).ok().flatten().unwrap_or_default();
    let automation = match store::get(env, id).await? {
        Some(a) if a.automation.settings.trigger_type == TriggerType::Sentry => a,
        _ => return Err(ApiError::not_found(format!("no Sentry automation {id}"))),
    };
    let (Some(settings), Some(sealed)) = (
        &automation.automation.settings.sentry,
        &automation.secret_sealed,
    ) else {
        return Err(ApiError::not_found(format!("no Sentry automation {id}")));
    };
    let secret = crate::settings::sealing_key(env)?.open(sealed)?;
    if !inspect_automations::sentry::signed(&secret, &body, &header("Sentry-Hook-Signature")) {
        return Err(ApiError::new(
            ErrorCode::Unauthorized,
            "a Sentry delivery is signed with the integration's client secret (Sentry-Hook-Signature)",
        ));
    }
    let payload: Value = body_as(&body)?;
    let resource = header("Sentry-Hook-Resource");
    let Some(incident) =
        inspect_automations::sentry::incident(settings.resource, &resource, &payload)
    else {
        // Installations, other actions and resources: answered, never run.
        return Ok(WebhookAccepted {
            ok: true,
            triggered: 0,
            skipped: 0,
        });
    };
    let shown = inspect_automations::sentry::shown(&incident);
    let firing = Firing::Sentry {
        received_ms: now,
        shown: &shown,
    };
    let key = Some(format!("sentry:{}", incident.key));
    fire_event(
        env,
        &automation,
        RunTrigger::Sentry,
        key,
        &incident.facts,
        &firing,
        now,
    )
    .await
    .map(|(accepted, _)| accepted)
}

/// The cron step: runs past their time fail, and every due schedule fires once — the
/// slot is taken by moving `next_run_at` on from it, in one batch with its run's claim (so
/// two Workers, or a restart, never fire it twice), and a missed stretch fires once, not
/// per slot. The slots are taken [`SLOTS_A_BATCH`] schedules a D1 batch, each batch as the
/// sessions of the last have started far enough to need more.
pub async fn tick(env: &Env, now: i64) -> ApiResult<usize> {
    store::time_out(env, now).await?;
    let due = store::due(env, now, DUE_PER_TICK).await?;
    // The tick's sessions read the deployment's settings once between them.
    let lookups = Lookups::default();
    let lookups = &lookups;
    let fired = futures::stream::iter(due.chunks(SLOTS_A_BATCH))
        .then(|chunk| take_slots(env, chunk, now))
        .flat_map(futures::stream::iter)
        .map(|(automation, run_id, slot)| async move {
            start_run(
                env,
                automation,
                &run_id,
                &Firing::Schedule { slot_ms: slot },
                now,
                lookups,
            )
            .await;
        })
        .buffer_unordered(FIRING_AT_ONCE)
        .count()
        .await;
    Ok(fired)
}

/// Takes the slots of `due` schedules in one batch: the ones whose runs are now ours to
/// start, each with its run's id and slot. What could not be taken is logged.
async fn take_slots<'a>(env: &Env, due: &'a [Stored], now: i64) -> Vec<(&'a Stored, String, i64)> {
    let not_fired = |automation: &Stored, e: &ApiError| {
        emit(
            LogLine::error("automations", "schedule_not_fired")
                .with("automation", automation.automation.id.as_str())
                .detail(e.message.clone()),
        )
    };
    let mut taking = Vec::with_capacity(due.len());
    for automation in due {
        let Some(slot) = automation.automation.next_run_at else {
            continue;
        };
        match new_run_id() {
            Ok(run_id) => taking.push((automation, run_id, slot)),
            Err(e) => not_fired(automation, &e),
        }
    }
    let takes: Vec<store::SlotTake> = taking
        .iter()
        .map(|(automation, run_id, slot)| store::SlotTake {
            automation_id: &automation.automation.id,
            from: *slot,
            to: next_run(&automation.automation.settings, now)
                .ok()
                .flatten(),
            run_id,
        })
        .collect();
    let outcomes = match store::take_slots(env, &takes, now).await {
        Ok(outcomes) => outcomes,
        Err(e) => {
            taking.iter().for_each(|(a, ..)| not_fired(a, &e));
            return Vec::new();
        }
    };
    taking
        .into_iter()
        .zip(outcomes)
        .filter_map(|(taken, outcome)| match outcome {
            Ok(Some(Claim::Started)) => Some(taken),
            Ok(_) => None,
            Err(e) => {
                not_fired(taken.0, &e);
                None
            }
        })
        .collect()
}
