//! The Slack bot, inside the Worker: `POST /webhooks/slack/events` and
//! `POST /webhooks/slack/interactions` (also the options-load URL). Deliveries are checked
//! (v0 signature, 5-minute window, event id seen once) and answered at once; the work — the
//! thread's session or a new one, the picker, 👀, the prompt with the thread's context and
//! images — continues with `waitUntil`. What to do is decided by this crate's pure
//! modules; this moves bytes, keeps the thread ↔ session map in D1 and asks the control
//! plane ([`ControlPlane`]) for sessions. Wasm only.

use crate::blocks::{self, Preferences};
use crate::events::{self, Decision, SlackFile};
use crate::interaction::{self, Interaction};
use crate::routing::{self, Routed, Target};
use crate::{api, classifier, files, verify};
use inspect_protocol::scm::CallbackContext;
use inspect_protocol::session::{
    Actor, Attachment, CreateSessionRequest, PromptRequest, RepositoryRef, SessionStatus,
};
use inspect_protocol::slack::{ChannelMessage, SlackSettings, SlackThread};
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::answer::json as json_answer;
use inspect_runtime::d1::{self as db, num};
use inspect_runtime::log::{emit, LogLine};
use inspect_runtime::plane::{ControlPlane, Freshness};
use inspect_runtime::{origin_of, setting};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use worker::{Context, Env, Method, Request, Response};

/// Deliveries larger than this are refused.
const MAX_DELIVERY_BYTES: usize = 1024 * 1024;
/// A thread's session is remembered this long after its last prompt.
const THREAD_TTL_MS: i64 = inspect_protocol::automations::SLACK_THREAD_DAYS * 24 * 3600 * 1000;
/// A request waiting for a pick expires after an hour.
const PENDING_TTL_MS: i64 = 3600 * 1000;
/// Messages of the thread given as context to a new session.
const CONTEXT_MESSAGES: usize = 10;
/// Pages of a thread read at most (200 messages each).
const THREAD_PAGES: usize = 25;

fn json_err(e: serde_json::Error) -> ApiError {
    ApiError::internal(e.to_string())
}

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

fn log(outcome: &str, detail: &str) -> LogLine {
    let line = match outcome {
        "failed" => LogLine::error("slack_bot", outcome),
        "refused" => LogLine::warn("slack_bot", outcome),
        _ => LogLine::info("slack_bot", outcome),
    };
    line.detail(detail)
}

fn answer(status: u16, body: Value) -> Result<Response, ApiError> {
    json_answer(&body, status)
}

/// The body, after the signature and the window were checked.
async fn signed_body(req: &mut Request, env: &Env) -> Result<Vec<u8>, ApiError> {
    let Some(secret) = setting(env, "SLACK_SIGNING_SECRET") else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "the Slack bot is not configured: set SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN",
        ));
    };
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let timestamp = header("X-Slack-Request-Timestamp");
    let signature = header("X-Slack-Signature");
    let body = inspect_runtime::answer::delivery_body(req, MAX_DELIVERY_BYTES).await?;
    if let Err(refusal) = verify::check(
        &secret,
        timestamp.as_deref(),
        signature.as_deref(),
        &body,
        now_ms() / 1000,
    ) {
        emit(log("refused", refusal.reason()));
        return Err(ApiError::unauthorized(refusal.reason()));
    }
    Ok(body)
}

/// `POST /webhooks/slack/events`.
pub async fn events(
    mut req: Request,
    env: &Env,
    ctx: Context,
    plane: impl ControlPlane + 'static,
) -> Result<Response, ApiError> {
    let body = signed_body(&mut req, env).await?;
    let retry = req
        .headers()
        .get("X-Slack-Retry-Num")
        .ok()
        .flatten()
        .unwrap_or_default();
    let bot = bot_user(env).await;
    let decision = events::decide(&body, bot.as_deref()).map_err(ApiError::bad_request)?;
    let event_id = match &decision {
        Decision::Challenge(c) => return answer(200, json!({ "challenge": c })),
        Decision::Ignore(why) => {
            emit(log("ignored", why));
            return answer(200, json!({ "ok": true, "ignored": why }));
        }
        Decision::Request(r) => r.event_id.clone(),
        Decision::ChannelMessage(_) if !triggers_enabled(env) => {
            let why = "a channel message without a mention (channel triggers are off)";
            emit(log("ignored", why));
            return answer(200, json!({ "ok": true, "ignored": why }));
        }
        Decision::ChannelMessage(r) => r.event_id.clone(),
        Decision::HomeOpened { .. } => inspect_protocol::json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["event_id"].as_str().map(str::to_owned))
            .unwrap_or_default(),
    };
    // Each event is acted on once, whatever Slack retries.
    if !event_id.is_empty() {
        let claimed = db::run(
            env,
            "INSERT INTO slack_events (event_id, received_at) VALUES (?1, ?2) ON CONFLICT(event_id) DO NOTHING",
            &[event_id.as_str().into(), num(now_ms())],
        )
        .await?;
        if claimed == 0 {
            emit(
                log("duplicate", "event already taken")
                    .with("slackEventId", event_id.as_str())
                    .with("retry", retry),
            );
            return answer(200, json!({ "ok": true, "duplicate": true }));
        }
    }
    let origin = origin_of(env, &req);
    let env2 = env.clone();
    ctx.wait_until(async move {
        let outcome = match decision {
            Decision::Request(r) => take_request(&plane, &env2, &origin, r).await,
            Decision::ChannelMessage(r) => take_channel_message(&plane, &env2, r).await,
            Decision::HomeOpened { user } => publish_home(&env2, &user).await,
            _ => Ok("nothing".into()),
        };
        let (line, detail) = match &outcome {
            Ok(what) => (log("handled", what), what.clone()),
            Err(e) => (log("failed", &e.message), e.message.clone()),
        };
        emit(line.with("slackEventId", event_id.as_str()));
        let _ = db::run(
            &env2,
            "UPDATE slack_events SET outcome = ?2 WHERE event_id = ?1",
            &[
                event_id.as_str().into(),
                detail.chars().take(300).collect::<String>().into(),
            ],
        )
        .await;
    });
    answer(200, json!({ "ok": true }))
}

/// Whether watched channels may start automations (`SLACK_TRIGGERS_ENABLED=true`; off by
/// default: the App then needs the `channels:history`/`groups:history` scopes and the
/// `message.channels`/`message.groups` events).
pub fn triggers_enabled(env: &Env) -> bool {
    setting(env, "SLACK_TRIGGERS_ENABLED").is_some_and(|v| v == "true" || v == "1")
}

/// A channel message that does not mention the bot: a reply in a thread a channel trigger
/// started continues its session; a top-level message goes to the channel triggers.
async fn take_channel_message(
    plane: &impl ControlPlane,
    env: &Env,
    r: events::Request,
) -> Result<String, ApiError> {
    let now = now_ms();
    let pending = Pending::from_request(&r);
    if r.thread_ts.is_some() {
        let thread = thread_row(env, &pending.channel, &pending.thread_ts, now, true).await?;
        let Some(t) = thread else {
            return Ok("a thread reply without a mention".into());
        };
        if !admitted(plane, &t, &pending.user).await? {
            return Ok("a reply the thread's channel trigger does not admit".into());
        }
        let bot = bot_user(env).await;
        return follow_up(plane, env, &pending, &t, bot.as_deref()).await;
    }
    if r.text.is_empty() {
        return Ok("an empty channel message".into());
    }
    let author = person(env, &r.user).await;
    let channel_name = api::get(
        env,
        "conversations.info",
        &[("channel", r.channel.as_str())],
    )
    .await
    .ok()
    .and_then(|v| v["channel"]["name"].as_str().map(|n| format!("#{n}")))
    .unwrap_or_else(|| r.channel.clone());
    let message = ChannelMessage {
        channel: r.channel.clone(),
        channel_name,
        user: r.user.clone(),
        author: author.name,
        text: r.text.clone(),
        ts: r.ts.clone(),
    };
    let Some(run) = plane.channel_message(&message).await? else {
        return Ok("no channel trigger takes it".into());
    };
    react(env, &pending).await;
    // Replies in the message's thread continue the session (for the thread's lifetime).
    db::run(
        env,
        "INSERT INTO slack_threads (channel, thread_ts, session_id, target, target_label, last_prompt_ts, created_at, expires_at, kind, automation_id) VALUES (?1, ?2, ?3, ?4, ?4, ?2, ?5, ?6, 'automation', ?7)
         ON CONFLICT(channel, thread_ts) DO NOTHING",
        &[
            r.channel.as_str().into(),
            r.ts.as_str().into(),
            run.session_id.as_str().into(),
            run.target.as_str().into(),
            num(now),
            num(now + THREAD_TTL_MS),
            run.automation_id.as_str().into(),
        ],
    )
    .await?;
    Ok(format!(
        "channel trigger {}: session {} on {}",
        run.automation_id, run.session_id, run.target
    ))
}

/// Whether `user` may go on in the thread: anyone in a mention's thread; in a channel
/// trigger's, whom its automation admits.
async fn admitted(plane: &impl ControlPlane, t: &ThreadRow, user: &str) -> Result<bool, ApiError> {
    match &t.automation_id {
        Some(automation) => plane.channel_user_admitted(automation, user).await,
        None => Ok(true),
    }
}

thread_local! {
    /// The bot's user id, once `auth.test` said it (per isolate).
    static BOT_USER: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// The bot's own user id: `SLACK_BOT_USER_ID`, else `auth.test` (asked once).
async fn bot_user(env: &Env) -> Option<String> {
    if let Some(id) = setting(env, "SLACK_BOT_USER_ID") {
        return Some(id);
    }
    if let Some(id) = BOT_USER.with(|b| b.borrow().clone()) {
        return Some(id);
    }
    let id = api::get(env, "auth.test", &[])
        .await
        .ok()
        .and_then(|v| v["user_id"].as_str().map(str::to_owned))?;
    BOT_USER.with(|b| *b.borrow_mut() = Some(id.clone()));
    Some(id)
}

/// A request the bot keeps while the person picks (and re-reads after).
#[derive(Serialize, Deserialize, Clone)]
struct Pending {
    channel: String,
    user: String,
    text: String,
    ts: String,
    thread_ts: String,
    #[serde(default)]
    files: Vec<PendingFile>,
}

#[derive(Serialize, Deserialize, Clone)]
struct PendingFile {
    id: String,
    name: String,
    mimetype: String,
    size: u64,
    url: Option<String>,
    mode: Option<String>,
}

impl Pending {
    fn from_request(r: &events::Request) -> Pending {
        Pending {
            channel: r.channel.clone(),
            user: r.user.clone(),
            text: r.text.clone(),
            ts: r.ts.clone(),
            thread_ts: r.thread().to_owned(),
            files: r
                .files
                .iter()
                .map(|f| PendingFile {
                    id: f.id.clone(),
                    name: f.name.clone(),
                    mimetype: f.mimetype.clone(),
                    size: f.size,
                    url: f.url_private_download.clone().or(f.url_private.clone()),
                    mode: f.mode.clone(),
                })
                .collect(),
        }
    }

    fn files(&self) -> Vec<SlackFile> {
        self.files
            .iter()
            .map(|f| SlackFile {
                id: f.id.clone(),
                name: f.name.clone(),
                mimetype: f.mimetype.clone(),
                size: f.size,
                url_private_download: f.url.clone(),
                url_private: None,
                mode: f.mode.clone(),
            })
            .collect()
    }
}

#[derive(Deserialize)]
struct ThreadRow {
    session_id: String,
    target: String,
    target_label: String,
    last_prompt_ts: Option<String>,
    /// Set when a channel trigger started the thread: only people it admits go on.
    automation_id: Option<String>,
}

/// A mention or DM: the thread's session gets a follow-up, or a new one starts (after a
/// pick when the request is ambiguous).
async fn take_request(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    r: events::Request,
) -> Result<String, ApiError> {
    let bot = bot_user(env).await;
    let text = events::without_mention(&r.text, bot.as_deref());
    let mut request = events::Request { text, ..r };
    if crate::command::asks_to_link(&request.text) {
        return offer_link(plane, env, origin, &request).await;
    }
    // Linked by the email rule before anything is made for them.
    link_by_email(plane, env, &request.user).await;
    // `app_mention` events leave the message's files out: read the message itself.
    if request.files.is_empty() && !request.direct {
        request.files = message_files(env, &request).await;
    }
    let pending = Pending::from_request(&request);
    let now = now_ms();
    let thread = thread_row(env, &pending.channel, &pending.thread_ts, now, false).await?;
    if let Some(t) = thread {
        if !admitted(plane, &t, &pending.user).await? {
            return Ok("a mention the thread's channel trigger does not admit".into());
        }
        match follow_up(plane, env, &pending, &t, bot.as_deref()).await {
            Ok(done) => return Ok(done),
            // The session is gone: forget the thread and start anew.
            Err(e) if e.code == ErrorCode::NotFound => {
                db::run(
                    env,
                    "DELETE FROM slack_threads WHERE channel = ?1 AND thread_ts = ?2",
                    &[
                        pending.channel.as_str().into(),
                        pending.thread_ts.as_str().into(),
                    ],
                )
                .await?;
            }
            Err(e) => return Err(e),
        }
    }
    let catalog = catalog(plane, Freshness::SyncIfStale).await?;
    let settings = settings(env).await?;
    let routed = routing::route(&pending.text, &pending.channel, &catalog, &settings);
    let (target, why) = match routed {
        Routed::Chosen { target, reason } => (target, reason),
        Routed::Nothing => {
            say(
                env,
                &pending,
                "There is nothing to work on yet: no repository is registered.",
            )
            .await?;
            return Ok("nothing registered".into());
        }
        Routed::Ask { candidates, reason } => {
            ask(env, &pending, &catalog, &candidates, &reason).await?;
            return Ok(format!("asked to pick: {reason}"));
        }
        Routed::Classify => match classify(env, &pending, &catalog).await {
            Ok(c) if !c.needs_clarification(&catalog) => (
                c.target_id.unwrap_or_default(),
                format!("the classifier: {}", c.reasoning),
            ),
            Ok(c) => {
                let mut likely: Vec<String> = c.target_id.into_iter().collect();
                likely.extend(c.alternatives);
                ask(
                    env,
                    &pending,
                    &catalog,
                    &likely,
                    "the request could fit several",
                )
                .await?;
                return Ok("asked to pick after classifying".into());
            }
            Err(e) => {
                emit(log("classifier_failed", &e.message));
                ask(
                    env,
                    &pending,
                    &catalog,
                    &[],
                    "the classifier could not decide",
                )
                .await?;
                return Ok("asked to pick: classifier failed".into());
            }
        },
    };
    let Some(target) = catalog
        .iter()
        .find(|t| t.id.eq_ignore_ascii_case(&target))
        .cloned()
    else {
        ask(env, &pending, &catalog, &[], "the chosen target is unknown").await?;
        return Ok("asked to pick: unknown target".into());
    };
    let session = start(plane, env, origin, &pending, &target, bot.as_deref()).await?;
    Ok(format!("session {session} on {} ({why})", target.id))
}

/// The files of the message a mention came from (`conversations.history` for a channel
/// message, `conversations.replies` for one in a thread); none when Slack will not say.
async fn message_files(env: &Env, r: &events::Request) -> Vec<SlackFile> {
    let found = match &r.thread_ts {
        Some(thread) => {
            api::get(
                env,
                "conversations.replies",
                &[
                    ("channel", r.channel.as_str()),
                    ("ts", thread.as_str()),
                    ("oldest", r.ts.as_str()),
                    ("inclusive", "true"),
                    ("limit", "2"),
                ],
            )
            .await
        }
        None => {
            api::get(
                env,
                "conversations.history",
                &[
                    ("channel", r.channel.as_str()),
                    ("latest", r.ts.as_str()),
                    ("inclusive", "true"),
                    ("limit", "1"),
                ],
            )
            .await
        }
    };
    found
        .ok()
        .and_then(|v| {
            v["messages"]
                .as_array()?
                .iter()
                .find(|m| m["ts"].as_str() == Some(r.ts.as_str()))
                .map(|m| m["files"].clone())
        })
        .and_then(|f| inspect_protocol::json::from_value(&f).ok())
        .unwrap_or_default()
}

/// Every repository and environment a session can be started on.
/// Every repository and environment (Linear's bot routes over the same catalog).
pub async fn catalog(
    plane: &impl ControlPlane,
    freshness: Freshness,
) -> Result<Vec<Target>, ApiError> {
    let repos = plane.repositories(freshness, now_ms()).await?;
    let environments = plane.environments().await?;
    let mut out: Vec<Target> = environments
        .environments
        .into_iter()
        .map(|e| Target::environment(&e.id, &e.name, e.description))
        .collect();
    out.extend(
        repos
            .repositories
            .into_iter()
            .map(|r| Target::repository(&r.owner, &r.name, r.description)),
    );
    Ok(out)
}

pub async fn settings(env: &Env) -> Result<SlackSettings, ApiError> {
    #[derive(Deserialize)]
    struct Row {
        settings: String,
    }
    let row: Option<Row> =
        db::first(env, "SELECT settings FROM slack_settings WHERE id = 1", &[]).await?;
    Ok(row
        .and_then(|r| serde_json::from_str(&r.settings).ok())
        .unwrap_or_default())
}

/// `PUT /integrations/slack/settings`.
pub async fn put_settings(env: &Env, body: &[u8], now: i64) -> Result<SlackSettings, ApiError> {
    let s: SlackSettings = inspect_protocol::json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("malformed settings: {e}")))?;
    s.validate().map_err(ApiError::bad_request)?;
    db::run(
        env,
        "INSERT INTO slack_settings (id, settings, updated_at) VALUES (1, ?1, ?2)
         ON CONFLICT(id) DO UPDATE SET settings = ?1, updated_at = ?2",
        &[
            serde_json::to_string(&s).map_err(json_err)?.into(),
            num(now),
        ],
    )
    .await?;
    Ok(s)
}

/// Asks the configured model (`SLACK_CLASSIFIER_BASE_URL`, OpenAI-compatible unless
/// `SLACK_CLASSIFIER_API=anthropic`).
async fn classify(
    env: &Env,
    p: &Pending,
    catalog: &[Target],
) -> Result<classifier::Classification, ApiError> {
    if setting(env, "SLACK_CLASSIFIER_BASE_URL").is_none() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "no classifier is configured",
        ));
    }
    let channel = api::get(
        env,
        "conversations.info",
        &[("channel", p.channel.as_str())],
    )
    .await
    .ok()
    .and_then(|v| v["channel"]["name"].as_str().map(str::to_owned));
    let prompt = classifier::prompt(catalog, channel.as_deref(), p.thread_ts != p.ts, &p.text);
    ask_classifier(env, &prompt).await
}

/// Asks the configured classifier (`SLACK_CLASSIFIER_*`, shared by the Linear bot) the
/// question `prompt` puts.
pub async fn ask_classifier(
    env: &Env,
    prompt: &str,
) -> Result<classifier::Classification, ApiError> {
    let Some(base) = setting(env, "SLACK_CLASSIFIER_BASE_URL") else {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "no classifier is configured",
        ));
    };
    let model = setting(env, "SLACK_CLASSIFIER_MODEL").unwrap_or_else(|| "claude-haiku-4-5".into());
    let anthropic = setting(env, "SLACK_CLASSIFIER_API").as_deref() == Some("anthropic");
    let (url, body) = if anthropic {
        (
            format!("{}/messages", base.trim_end_matches('/')),
            classifier::anthropic_request(&model, prompt),
        )
    } else {
        (
            format!("{}/chat/completions", base.trim_end_matches('/')),
            classifier::openai_request(&model, prompt),
        )
    };
    let headers = worker::Headers::new();
    let _ = headers.set("Content-Type", "application/json");
    if let Some(key) = setting(env, "SLACK_CLASSIFIER_API_KEY") {
        if anthropic {
            let _ = headers.set("x-api-key", &key);
            let _ = headers.set("anthropic-version", "2023-06-01");
        } else {
            let _ = headers.set("Authorization", &format!("Bearer {key}"));
        }
    }
    let mut init = worker::RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(wasm_bindgen::JsValue::from_str(&body.to_string())));
    let unavailable =
        |e: worker::Error| ApiError::new(ErrorCode::Unavailable, format!("classifier: {e}"));
    let req = Request::new_with_init(&url, &init).map_err(unavailable)?;
    let mut resp = worker::Fetch::Request(req)
        .send()
        .await
        .map_err(unavailable)?;
    let status = resp.status_code();
    let answer: Value = resp.json().await.unwrap_or(Value::Null);
    if status != 200 {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            format!("classifier answered {status}"),
        ));
    }
    let parsed = if anthropic {
        classifier::parse_anthropic(&answer)
    } else {
        classifier::parse_openai(&answer)
    };
    parsed.map_err(|e| ApiError::new(ErrorCode::Unavailable, e))
}

/// A plain reply in the request's thread.
async fn say(env: &Env, p: &Pending, text: &str) -> Result<Value, ApiError> {
    api::post(
        env,
        "chat.postMessage",
        &json!({"channel": p.channel, "thread_ts": p.thread_ts, "text": text}),
    )
    .await
}

/// The picker, with the request kept for an hour.
async fn ask(
    env: &Env,
    p: &Pending,
    catalog: &[Target],
    likely: &[String],
    reason: &str,
) -> Result<(), ApiError> {
    let now = now_ms();
    db::run(
        env,
        "INSERT INTO slack_pending (channel, thread_ts, request, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(channel, thread_ts) DO UPDATE SET request = ?3, created_at = ?4, expires_at = ?5",
        &[
            p.channel.as_str().into(),
            p.thread_ts.as_str().into(),
            serde_json::to_string(p).map_err(json_err)?.into(),
            num(now),
            num(now + PENDING_TTL_MS),
        ],
    )
    .await?;
    let likeliest: Vec<&Target> = likely
        .iter()
        .filter_map(|id| catalog.iter().find(|t| t.id.eq_ignore_ascii_case(id)))
        .collect();
    let mut message = blocks::picker(
        &format!("Which repository or environment should I work in? ({reason})"),
        &likeliest,
        catalog,
    );
    message["channel"] = json!(p.channel);
    message["thread_ts"] = json!(p.thread_ts);
    api::post(env, "chat.postMessage", &message).await?;
    Ok(())
}

/// A person's display name and email (`users.info`); their id when Slack says nothing.
async fn person(env: &Env, user: &str) -> Actor {
    profile(env, user).await.0
}

/// Links the person who asked to the person they are on this deployment by the email rule,
/// when Slack says their address is confirmed (the plane resolves a linked identity to its
/// person wherever the actor is used).
async fn link_by_email(plane: &impl ControlPlane, env: &Env, user: &str) {
    let (actor, confirmed) = profile(env, user).await;
    if let (true, Some(email)) = (confirmed, actor.email.as_deref()) {
        if let Err(e) = plane
            .link_by_email(&actor.user_id, &actor.name, email)
            .await
        {
            emit(log("link_failed", &e.message));
        }
    }
}

/// [`person`], and whether Slack says the address is confirmed (`is_email_confirmed`).
async fn profile(env: &Env, user: &str) -> (Actor, bool) {
    let info = api::get(env, "users.info", &[("user", user)]).await.ok();
    let confirmed = info
        .as_ref()
        .is_some_and(|v| v["user"]["is_email_confirmed"] == true);
    let profile = info.as_ref().map(|v| &v["user"]);
    let name = profile
        .and_then(|u| {
            u["profile"]["display_name"]
                .as_str()
                .filter(|s| !s.is_empty())
                .or(u["real_name"].as_str())
                .or(u["name"].as_str())
        })
        .unwrap_or(user)
        .to_owned();
    let actor = Actor {
        user_id: format!("slack:{user}"),
        name,
        email: profile.and_then(|u| u["profile"]["email"].as_str().map(str::to_owned)),
        avatar: profile.and_then(|u| u["profile"]["image_72"].as_str().map(str::to_owned)),
    };
    (actor, confirmed)
}

/// The thread's messages (after `after`, when given), without the bot's and without the
/// request itself, as untrusted content with each author's name.
async fn thread_context(
    env: &Env,
    p: &Pending,
    after: Option<&str>,
    bot: Option<&str>,
    limit: usize,
) -> String {
    // Every page (Slack sends the thread's parent first on each, whatever `oldest` says),
    // each message once, and only what came after `after`.
    let mut seen: Vec<Value> = Vec::new();
    let mut cursor = String::new();
    for _ in 0..THREAD_PAGES {
        let mut params = vec![
            ("channel", p.channel.as_str()),
            ("ts", p.thread_ts.as_str()),
            ("limit", "200"),
        ];
        if let Some(a) = after {
            params.push(("oldest", a));
        }
        if !cursor.is_empty() {
            params.push(("cursor", cursor.as_str()));
        }
        let Ok(page) = api::get(env, "conversations.replies", &params).await else {
            break;
        };
        for m in page["messages"].as_array().into_iter().flatten() {
            if !seen.iter().any(|s| s["ts"] == m["ts"]) {
                seen.push(m.clone());
            }
        }
        cursor = page["response_metadata"]["next_cursor"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        if cursor.is_empty() {
            break;
        }
    }
    let messages: Vec<&Value> = seen
        .iter()
        .filter(|m| m["bot_id"].is_null() && m["user"].as_str() != bot)
        .filter(|m| m["ts"].as_str() != Some(p.ts.as_str()))
        .filter(|m| after.is_none_or(|a| events::ts_after(m["ts"].as_str().unwrap_or(""), a)))
        .collect();
    let skip = messages.len().saturating_sub(limit);
    let mut names: Vec<(String, String)> = Vec::new();
    let mut out = String::new();
    for m in &messages[skip..] {
        let user = m["user"].as_str().unwrap_or("someone").to_owned();
        let name = match names.iter().find(|(u, _)| *u == user) {
            Some((_, n)) => n.clone(),
            None => {
                let n = person(env, &user).await.name;
                names.push((user.clone(), n.clone()));
                n
            }
        };
        let text = events::without_mention(m["text"].as_str().unwrap_or(""), bot);
        out.push_str(&inspect_github::untrusted::wrap(
            "slack_thread",
            &name,
            &text,
        ));
        out.push('\n');
    }
    out
}

/// The channel's name and topic, as untrusted content.
async fn channel_context(env: &Env, channel: &str) -> String {
    let Ok(info) = api::get(env, "conversations.info", &[("channel", channel)]).await else {
        return String::new();
    };
    let c = &info["channel"];
    if c["is_im"] == true {
        return String::new();
    }
    let name = c["name"].as_str().unwrap_or(channel);
    let topic = c["topic"]["value"].as_str().unwrap_or("");
    inspect_github::untrusted::wrap(
        "slack_channel",
        "channel",
        &format!(
            "#{name}{}",
            if topic.is_empty() {
                String::new()
            } else {
                format!(" — topic: {topic}")
            }
        ),
    )
}

/// The prompt's text: the request, and what was said around it.
fn prompt_text(
    request: &str,
    sender: &str,
    context: &str,
    channel: &str,
    images_only: bool,
) -> String {
    let request = if images_only {
        "Look at the attached image(s) and do what they show is needed.".to_owned()
    } else {
        request.to_owned()
    };
    if context.is_empty() && channel.is_empty() {
        return request;
    }
    format!(
        "{request}\n\n(Asked in Slack by {sender}.) {}\n\n{channel}\n{context}",
        inspect_github::untrusted::PREAMBLE
    )
}

/// Downloads the message's images and stores each as an attachment of the session.
async fn attach_images(
    plane: &impl ControlPlane,
    env: &Env,
    session: &str,
    p: &Pending,
) -> (Vec<Attachment>, Vec<String>) {
    let files_origin = setting(env, "SLACK_FILES_ORIGIN");
    let (wanted, mut left) = files::images(&p.files(), files_origin.as_deref());
    let mut attached = Vec::new();
    for w in wanted {
        let stored = async {
            let bytes = api::download(env, &w.url, files::MAX_IMAGE_BYTES).await?;
            plane
                .store_attachment(session, &w.name, &w.mime_type, &bytes)
                .await
        }
        .await;
        match stored {
            Ok(a) => attached.push(a),
            Err(e) => left.push(format!("{}: {}", w.name, e.message)),
        }
    }
    (attached, left)
}

/// Starts a session on `target` for the request, with its progress message and 👀.
async fn start(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    p: &Pending,
    target: &Target,
    bot: Option<&str>,
) -> Result<String, ApiError> {
    let now = now_ms();
    let actor = person(env, &p.user).await;
    let prefs = preferences(env, &p.user).await;
    react(env, p).await;
    let files_origin = setting(env, "SLACK_FILES_ORIGIN");
    let (wanted, left) = files::images(&p.files(), files_origin.as_deref());
    // With files to store, what is left out is said once they are stored.
    if wanted.is_empty() && !left.is_empty() {
        let _ = say(env, p, &format!("Left out: {}", left.join("; "))).await;
    }
    if p.text.is_empty() && wanted.is_empty() {
        let _ = say(env, p, "No text and no image I could take: nothing to do.").await;
        return Err(ApiError::bad_request("an empty request"));
    }
    let posted = api::post(
        env,
        "chat.postMessage",
        &json!({"channel": p.channel, "thread_ts": p.thread_ts, "text": format!("Working on *{}*…", blocks::escape(&target.label))}),
    )
    .await?;
    let progress_ts = posted["ts"].as_str().map(str::to_owned);
    let mut create = CreateSessionRequest {
        title: Some(p.text.chars().take(60).collect::<String>()).filter(|t| !t.is_empty()),
        model: prefs.model.clone(),
        reasoning_effort: prefs.reasoning_effort.clone(),
        ..Default::default()
    };
    match target.id.strip_prefix("env:") {
        Some(id) => create.environment_id = Some(id.to_owned()),
        None => {
            let (owner, name) = target.label.split_once('/').unwrap_or(("", ""));
            create.repositories = Some(vec![RepositoryRef {
                owner: owner.to_owned(),
                name: name.to_owned(),
                branch: prefs.branch.clone(),
                source: None,
            }]);
        }
    }
    let context = || async {
        let thread = if p.thread_ts != p.ts {
            thread_context(env, p, None, bot, CONTEXT_MESSAGES).await
        } else {
            String::new()
        };
        (thread, channel_context(env, &p.channel).await)
    };
    // A message with no files to store gives its prompt with the session's making (one
    // request to the object); files are stored in the session first, then prompted with.
    let made = if wanted.is_empty() {
        let (thread, channel) = context().await;
        let prompt = slack_prompt(
            (p, &actor, target),
            progress_ts.clone(),
            (&thread, &channel),
            now,
            Vec::new(),
        );
        plane
            .create_prompted_session(origin, &actor, create, &[], prompt)
            .await
            .map(|(created, refused)| (created, Some(refused)))
    } else {
        plane
            .create_session(origin, &actor, create, &[])
            .await
            .map(|created| (created, None))
    };
    let (created, prompted) = match made {
        Ok(c) => c,
        Err(e) => {
            if let Some(ts) = &progress_ts {
                let _ = api::post(env, "chat.update", &json!({"channel": p.channel, "ts": ts, "text": format!(":warning: The session could not start: {}", blocks::escape(&e.message))})).await;
            }
            return Err(e);
        }
    };
    let session = created.session_id;
    // The thread is the session's from now on: a reply that comes while the first prompt
    // is still being written joins it instead of starting another.
    db::run(
        env,
        "INSERT INTO slack_threads (channel, thread_ts, session_id, target, target_label, last_prompt_ts, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT(channel, thread_ts) DO UPDATE SET session_id = ?3, target = ?4, target_label = ?5, last_prompt_ts = ?6, expires_at = ?8",
        &[
            p.channel.as_str().into(),
            p.thread_ts.as_str().into(),
            session.as_str().into(),
            target.id.as_str().into(),
            target.label.as_str().into(),
            p.ts.as_str().into(),
            num(now),
            num(now + THREAD_TTL_MS),
        ],
    )
    .await?;
    // The first message links the session at once (the progress updates keep the link).
    if let Some(ts) = &progress_ts {
        let url = inspect_github::api::session_url(env, Some(origin), &session);
        let mut message = blocks::progress(&target.label, "starting", None, 0, &url);
        message["channel"] = json!(p.channel);
        message["ts"] = json!(ts);
        if let Err(e) = api::post(env, "chat.update", &message).await {
            emit(log(
                "failed",
                &format!("linking the session: {}", e.message),
            ));
        }
    }
    match prompted {
        Some(Some(refused)) => return Err(refused),
        Some(None) => {}
        None => {
            let (thread, channel) = context().await;
            prompt_session(
                plane,
                env,
                &session,
                &actor,
                p,
                target,
                progress_ts,
                &thread,
                &channel,
                now,
            )
            .await?;
        }
    }
    Ok(session)
}

/// 👀 on the message that was taken (already there is fine).
async fn react(env: &Env, p: &Pending) {
    if let Err(e) = api::post(
        env,
        "reactions.add",
        &json!({"channel": p.channel, "timestamp": p.ts, "name": "eyes"}),
    )
    .await
    {
        if !e.message.contains("already_reacted") {
            emit(log("reaction_failed", &e.message));
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn prompt_session(
    plane: &impl ControlPlane,
    env: &Env,
    session: &str,
    actor: &Actor,
    p: &Pending,
    target: &Target,
    progress_ts: Option<String>,
    context: &str,
    channel: &str,
    now: i64,
) -> Result<(), ApiError> {
    let (attachments, left) = attach_images(plane, env, session, p).await;
    if !left.is_empty() {
        let _ = say(env, p, &format!("Left out: {}", left.join("; "))).await;
    }
    if p.text.is_empty() && attachments.is_empty() {
        let _ = say(env, p, "No text and no image I could take: nothing to do.").await;
        return Err(ApiError::bad_request("an empty request"));
    }
    let prompt = slack_prompt(
        (p, actor, target),
        progress_ts,
        (context, channel),
        now,
        attachments,
    );
    plane.prompt(session, "", actor, &prompt).await
}

/// The prompt `p` makes, its files stored (`attachments`), answered in its thread.
fn slack_prompt(
    (p, actor, target): (&Pending, &Actor, &Target),
    progress_ts: Option<String>,
    (context, channel): (&str, &str),
    now: i64,
    attachments: Vec<Attachment>,
) -> PromptRequest {
    PromptRequest {
        content: prompt_text(&p.text, &actor.name, context, channel, p.text.is_empty()),
        attachments: (!attachments.is_empty()).then_some(attachments),
        callback_context: Some(CallbackContext::Slack(SlackThread {
            channel: p.channel.clone(),
            thread_ts: p.thread_ts.clone(),
            progress_ts,
            reaction_ts: Some(p.ts.clone()),
            target: target.label.clone(),
            started_at: now,
        })),
        client_request_id: Some(format!("slack-{}-{}", p.channel, p.ts)),
        ..Default::default()
    }
}

/// A message in a thread that has a session: the next prompt to it, with the messages
/// posted since the last one as context.
async fn follow_up(
    plane: &impl ControlPlane,
    env: &Env,
    p: &Pending,
    t: &ThreadRow,
    bot: Option<&str>,
) -> Result<String, ApiError> {
    let now = now_ms();
    let Some(state) = plane.session_state(&t.session_id).await? else {
        return Err(ApiError::not_found("the thread's session is gone"));
    };
    if state.status == SessionStatus::Archived {
        return Err(ApiError::not_found("the thread's session is archived"));
    }
    let actor = person(env, &p.user).await;
    react(env, p).await;
    let posted = api::post(
        env,
        "chat.postMessage",
        &json!({"channel": p.channel, "thread_ts": p.thread_ts, "text": format!("On it (*{}*)…", blocks::escape(&t.target_label))}),
    )
    .await?;
    let target = Target {
        id: t.target.clone(),
        label: t.target_label.clone(),
        description: None,
    };
    let context = thread_context(env, p, t.last_prompt_ts.as_deref(), bot, 50).await;
    prompt_session(
        plane,
        env,
        &t.session_id,
        &actor,
        p,
        &target,
        posted["ts"].as_str().map(str::to_owned),
        &context,
        "",
        now,
    )
    .await?;
    db::run(
        env,
        "UPDATE slack_threads SET last_prompt_ts = ?3, expires_at = ?4 WHERE channel = ?1 AND thread_ts = ?2",
        &[
            p.channel.as_str().into(),
            p.thread_ts.as_str().into(),
            p.ts.as_str().into(),
            num(now + THREAD_TTL_MS),
        ],
    )
    .await?;
    Ok(format!("follow-up to {}", t.session_id))
}

async fn preferences(env: &Env, user: &str) -> Preferences {
    #[derive(Deserialize)]
    struct Row {
        preferences: String,
    }
    db::first::<Row>(
        env,
        "SELECT preferences FROM slack_preferences WHERE user_id = ?1",
        &[user.into()],
    )
    .await
    .ok()
    .flatten()
    .and_then(|r| serde_json::from_str(&r.preferences).ok())
    .unwrap_or_default()
}

async fn save_preferences(env: &Env, user: &str, prefs: &Preferences) -> Result<(), ApiError> {
    db::run(
        env,
        "INSERT INTO slack_preferences (user_id, preferences, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(user_id) DO UPDATE SET preferences = ?2, updated_at = ?3",
        &[
            user.into(),
            serde_json::to_string(prefs).map_err(json_err)?.into(),
            num(now_ms()),
        ],
    )
    .await?;
    Ok(())
}

/// The models offered in App Home: `SLACK_MODELS` (comma-separated), else the default.
fn models(env: &Env) -> Vec<String> {
    setting(env, "SLACK_MODELS")
        .or_else(|| setting(env, "DEFAULT_MODEL"))
        .map(|m| {
            m.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

async fn publish_home(env: &Env, user: &str) -> Result<String, ApiError> {
    let prefs = preferences(env, user).await;
    api::post(
        env,
        "views.publish",
        &json!({"user_id": user, "view": blocks::home(&prefs, &models(env))}),
    )
    .await?;
    Ok("home published".into())
}

/// The link page's address on this deployment: `PUBLIC_URL`, else where Slack reached us.
async fn link_url(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    user: &str,
    name: &str,
) -> Result<String, ApiError> {
    let path = plane.link_code(&format!("slack:{user}"), name).await?;
    let base = setting(env, "PUBLIC_URL").unwrap_or_else(|| origin.to_owned());
    Ok(format!("{}{path}", base.trim_end_matches('/')))
}

/// "link" in a DM or a mention: the one-time link, to that person only (the DM is theirs;
/// in a channel, a message only they see).
async fn offer_link(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    r: &events::Request,
) -> Result<String, ApiError> {
    let name = person(env, &r.user).await.name;
    let url = link_url(plane, env, origin, &r.user, &name).await?;
    let text = crate::command::link_text(&url);
    if r.direct {
        api::post(
            env,
            "chat.postMessage",
            &json!({"channel": r.channel, "text": text}),
        )
        .await?;
    } else {
        api::post(
            env,
            "chat.postEphemeral",
            &json!({"channel": r.channel, "user": r.user, "thread_ts": r.thread(), "text": text}),
        )
        .await?;
    }
    Ok("a link code sent".into())
}

/// `POST /webhooks/slack/commands`: the `/inspect` slash command, answered at once and only
/// to the person who typed it.
pub async fn command(
    mut req: Request,
    env: &Env,
    plane: impl ControlPlane,
) -> Result<Response, ApiError> {
    let body = signed_body(&mut req, env).await?;
    let command = crate::command::read(&body).map_err(ApiError::bad_request)?;
    let text = match crate::command::ask(&command) {
        crate::command::Ask::Link => {
            let name = if command.user_name.is_empty() {
                command.user_id.clone()
            } else {
                command.user_name.clone()
            };
            let url = link_url(&plane, env, &origin_of(env, &req), &command.user_id, &name).await?;
            emit(log("handled", "a link code sent").with("command", command.command.as_str()));
            crate::command::link_text(&url)
        }
        crate::command::Ask::Help => crate::command::help_text(&command.command),
    };
    answer(200, json!({"response_type": "ephemeral", "text": text}))
}

/// `POST /webhooks/slack/interactions`: picks, App Home settings, and the options a picker
/// loads as the person types.
pub async fn interactions(
    mut req: Request,
    env: &Env,
    ctx: Context,
    plane: impl ControlPlane + 'static,
) -> Result<Response, ApiError> {
    let body = signed_body(&mut req, env).await?;
    let action = match interaction::read(&body).map_err(ApiError::bad_request)? {
        Interaction::Suggestion { query } => {
            let catalog = catalog(&plane, Freshness::Kept).await?;
            return answer(
                200,
                json!({ "option_groups": blocks::option_groups(&catalog, &query) }),
            );
        }
        Interaction::Action(action) => action,
        Interaction::Other(other) => {
            emit(log(
                "ignored",
                &format!(
                    "interaction {}",
                    other.as_deref().unwrap_or("without a type")
                ),
            ));
            return answer(200, json!({}));
        }
    };
    let origin = origin_of(env, &req);
    let env2 = env.clone();
    ctx.wait_until(async move {
        let outcome = act(&plane, &env2, &origin, &action).await;
        match outcome {
            Ok(what) => emit(log("handled", &what).with("action", action.action_id.as_str())),
            Err(e) => emit(log("failed", &e.message).with("action", action.action_id.as_str())),
        }
    });
    answer(200, json!({}))
}

async fn act(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    action: &interaction::Action,
) -> Result<String, ApiError> {
    let action_id = action.action_id.as_str();
    let user = action.user.as_str();
    if action_id == "select_repo" || action_id.starts_with("select_repo_quick_pick:") {
        let picker = Picker {
            channel: &action.channel,
            thread: &action.thread,
            ts: action.message_ts.as_deref(),
        };
        return pick(plane, env, origin, picker, action.picked(), user).await;
    }
    let mut prefs = preferences(env, user).await;
    match action_id {
        "select_model" => prefs.model = action.selected.clone(),
        "select_reasoning_effort" => prefs.reasoning_effort = action.selected.clone(),
        "set_branch" => {
            let b = action.value.as_deref().unwrap_or("").trim();
            if b.len() > 250 || b.starts_with('-') || b.contains("..") {
                return Err(ApiError::bad_request("not a branch name"));
            }
            prefs.branch = (!b.is_empty()).then(|| b.to_owned());
        }
        "clear_branch_preference" => prefs.branch = None,
        "view_session" => return Ok("link opened".into()),
        other => return Ok(format!("action {other} ignored")),
    }
    save_preferences(env, user, &prefs).await?;
    publish_home(env, user).await
}

/// The message a pick was made in: its channel, its thread and its own `ts`.
struct Picker<'a> {
    channel: &'a str,
    thread: &'a str,
    ts: Option<&'a str>,
}

/// The person picked a target for a waiting request: it starts there.
async fn pick(
    plane: &impl ControlPlane,
    env: &Env,
    origin: &str,
    picker: Picker<'_>,
    picked: &str,
    user: &str,
) -> Result<String, ApiError> {
    let Picker {
        channel,
        thread,
        ts: picker_ts,
    } = picker;
    #[derive(Deserialize)]
    struct Row {
        request: String,
    }
    // Taken once: the row goes as it is read.
    let row: Option<Row> = db::first(
        env,
        "DELETE FROM slack_pending WHERE channel = ?1 AND thread_ts = ?2 AND expires_at > ?3 RETURNING request",
        &[channel.into(), thread.into(), num(now_ms())],
    )
    .await?;
    let Some(row) = row else {
        let _ = api::post(
            env,
            "chat.postEphemeral",
            &json!({"channel": channel, "user": user, "thread_ts": thread, "text": "That request has expired or was already answered; ask again."}),
        )
        .await;
        return Ok("pick for an expired request".into());
    };
    let pending: Pending = serde_json::from_str(&row.request).map_err(json_err)?;
    let catalog = catalog(plane, Freshness::SyncIfStale).await?;
    let Some(target) = catalog
        .iter()
        .find(|t| t.id.eq_ignore_ascii_case(picked))
        .cloned()
    else {
        return Err(ApiError::bad_request(format!(
            "{picked} is not something to work on"
        )));
    };
    if let Some(ts) = picker_ts {
        let _ = api::post(
            env,
            "chat.update",
            &json!({"channel": channel, "ts": ts, "text": format!("<@{user}> picked *{}*.", blocks::escape(&target.label)), "blocks": []}),
        )
        .await;
    }
    let bot = bot_user(env).await;
    let session = start(plane, env, origin, &pending, &target, bot.as_deref()).await?;
    Ok(format!("session {session} on {} (picked)", target.id))
}

/// The cron trigger's part: threads past their 7 days, picks past their hour, and event ids
/// older than a day (Slack retries for minutes) are forgotten. How many rows went.
/// The session a thread continues, unexpired (`automation_only`: only a channel trigger's).
async fn thread_row(
    env: &Env,
    channel: &str,
    thread_ts: &str,
    now: i64,
    automation_only: bool,
) -> Result<Option<ThreadRow>, ApiError> {
    let sql = if automation_only {
        "SELECT session_id, target, target_label, last_prompt_ts, automation_id FROM slack_threads WHERE channel = ?1 AND thread_ts = ?2 AND expires_at > ?3 AND kind = 'automation'"
    } else {
        "SELECT session_id, target, target_label, last_prompt_ts, automation_id FROM slack_threads WHERE channel = ?1 AND thread_ts = ?2 AND expires_at > ?3"
    };
    db::first(env, sql, &[channel.into(), thread_ts.into(), num(now)]).await
}

pub async fn prune(env: &Env, now: i64) -> Result<usize, ApiError> {
    let mut gone = 0;
    for (sql, at) in [
        ("DELETE FROM slack_threads WHERE expires_at <= ?1", now),
        ("DELETE FROM slack_pending WHERE expires_at <= ?1", now),
        (
            "DELETE FROM slack_events WHERE received_at <= ?1",
            now - 24 * 3600 * 1000,
        ),
    ] {
        gone += db::run(env, sql, &[num(at)]).await?;
    }
    Ok(gone)
}
