//! The Worker's fetch entry: the thin runtime shell around [`crate::routes`],
//! [`crate::auth`] and [`crate::listing`].

use crate::auth::session_ids;
use crate::index;
use crate::listing;
use crate::repos;
use crate::routes::SecretOp;
use crate::routes::{match_route, not_found, Route, SessionAction};
use crate::{api_tokens, caller, settings, signin};
use inspect_durable::shell::{ACTOR_HEADER, ORIGIN_HEADER, SESSION_HEADER, VOUCHED_HEADER};
use inspect_protocol::health::{CheckResult, DurableProbe, HealthReport};
use inspect_protocol::session::{Actor, CreateSessionRequest, RegisterRepository};
use inspect_protocol::{ApiError, ErrorCode};
use inspect_scm::app as github_app;
use worker::{event, Context, Env, Headers, Method, Request, RequestInit, Response, Result};

/// Largest REST body accepted (a 64 KiB prompt plus attachments fits).
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
/// An attachment's body: the file (at most 10 MiB) and room to spare.
const MAX_ATTACHMENT_UPLOAD_BYTES: usize =
    inspect_protocol::limits::MAX_ATTACHMENT_FILE_BYTES + 64 * 1024;

type ApiResult<T> = std::result::Result<T, ApiError>;

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// The cron trigger: stuck image builds time out, scheduled ones start, Slack's old
/// threads and picks are forgotten, and the installation's repositories are synced from
/// GitHub.
#[event(scheduled)]
async fn scheduled(event: worker::ScheduledEvent, env: Env, _ctx: worker::ScheduleContext) {
    let now = event.schedule() as i64;
    let cron = event.cron();
    let images = crate::images::tick(&env, now).await;
    cron_step(
        &cron,
        ("images_checked", "images_check_failed"),
        "started",
        images,
    );
    let pruned = crate::slack_bot::prune(&env, now).await;
    cron_step(
        &cron,
        ("slack_pruned", "slack_prune_failed"),
        "rows",
        pruned,
    );
    if crate::db::setting(&env, "GITHUB_APP_ID").is_some() {
        let synced = crate::installation::sync(&env, now).await;
        let names = ("repositories_synced", "repositories_sync_failed");
        cron_step(&cron, names, "repositories", synced);
    }
}

/// One line for a step of the cron trigger (its event when it worked, when it failed): how
/// many things it did, or why it failed.
fn cron_step(cron: &str, (done, failed): (&str, &str), counted: &str, outcome: ApiResult<usize>) {
    use inspect_durable::log::{emit, LogLine};
    match outcome {
        Ok(n) => emit(
            LogLine::info("cron", done)
                .with("cron", cron)
                .with(counted, n),
        ),
        Err(e) => emit(
            LogLine::error("cron", failed)
                .with("cron", cron)
                .detail(e.message),
        ),
    }
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> Result<Response> {
    let method = req.method().to_string();
    let path = req.path();
    // A browser navigating to a page (`/sessions/abc`) gets the web app, even where the
    // same path is also an API route; the app then calls the API with fetch.
    if is_page_navigation(&req) && !path.starts_with("/auth/") {
        return serve_asset_or_404(req, &env, &method, &path).await;
    }
    let outcome = match match_route(&method, &path) {
        Some(Ok(route)) => serve(route, req, &env, ctx).await,
        Some(Err(e)) => Err(e),
        None => return serve_asset_or_404(req, &env, &method, &path).await,
    };
    match outcome {
        Ok(resp) => Ok(resp),
        Err(e) => error_response(&e),
    }
}

/// A top-level page load by a browser: a GET that asks for HTML (fetch() and API
/// clients do not), or says so with `Sec-Fetch-Mode: navigate`.
fn is_page_navigation(req: &Request) -> bool {
    if req.method() != Method::Get {
        return false;
    }
    let header = |name: &str| req.headers().get(name).ok().flatten().unwrap_or_default();
    header("Sec-Fetch-Mode") == "navigate"
        || (header("Accept").contains("text/html") && header("Upgrade").is_empty())
}

pub(crate) fn error_response(err: &ApiError) -> Result<Response> {
    inspect_durable::shell::json_error(err)
}

pub(crate) fn json<T: serde::Serialize>(value: &T, status: u16) -> ApiResult<Response> {
    Ok(inspect_durable::shell::json_ok(value)
        .map_err(internal)?
        .with_status(status))
}

async fn serve(route: Route, mut req: Request, env: &Env, ctx: Context) -> ApiResult<Response> {
    // A made-up session id never reaches the runtime: it would make an object. Routes
    // that carry their own credentials (a sandbox's) are checked here; the others once the
    // caller is known, so a stranger learns nothing about which sessions exist.
    let sandbox_route = match &route {
        Route::Session { action, .. } => {
            matches!(
                action,
                SessionAction::Socket | SessionAction::ScmCredentials | SessionAction::PullRequests
            ) || (*action == SessionAction::TunnelUrls
                && req
                    .headers()
                    .has(inspect_protocol::auth::SANDBOX_ID_HEADER)
                    .unwrap_or(false))
        }
        Route::AttachmentDownload { .. } => true,
        Route::Children { op, .. } => !matches!(op, crate::routes::ChildOp::List),
        _ => false,
    };
    if sandbox_route {
        if let Some(id) = route.session_id() {
            known_session(env, id).await?;
        }
    }
    // Routes that carry their own credentials (or none).
    match &route {
        Route::Health => return health(env).await,
        Route::GitHubWebhook => return crate::github_bot::webhook(req, env, ctx).await,
        Route::ImageBuildReport { id } => {
            let bearer = req
                .headers()
                .get("Authorization")
                .ok()
                .flatten()
                .and_then(|a| a.strip_prefix("Bearer ").map(str::to_owned));
            let body = read_body(&mut req).await?;
            let build =
                crate::images::complete(env, id, bearer.as_deref(), &body, now_ms() as i64).await?;
            return json(&build, 200);
        }
        Route::SignIn => return signin::start(&req, env).await,
        Route::SignInCallback => return signin::finish(&req, env).await,
        Route::Session {
            id,
            action: SessionAction::Socket,
        } => {
            // The socket's `subscribe` token (or a sandbox's bearer token) says who it is.
            return forward(env, id, SessionAction::Socket, req, None, Vec::new(), false).await;
        }
        Route::Session {
            id,
            action: SessionAction::ScmCredentials,
        } => return scm_credentials(env, id, req).await,
        // A sandbox reads its own ports' URLs with its own credentials.
        Route::Session {
            id,
            action: SessionAction::TunnelUrls,
        } if req
            .headers()
            .has(inspect_protocol::auth::SANDBOX_ID_HEADER)
            .unwrap_or(false) =>
        {
            return forward_as_sandbox(env, id, "/sandbox-tunnel-urls", &req, None).await;
        }
        Route::AttachmentDownload { id, attachment } => {
            return attachment_for_sandbox(env, id, attachment, &req).await
        }
        Route::SlackEvents => return crate::slack_bot::events(req, env, ctx).await,
        Route::SlackInteractions => return crate::slack_bot::interactions(req, env, ctx).await,
        Route::Session {
            id,
            action: SessionAction::PullRequests,
        } => return pull_requests(env, id, req).await,
        // The parent's sandbox makes and acts on its children with its own credentials.
        Route::Children { id, op } => {
            use crate::routes::ChildOp;
            match op {
                ChildOp::Spawn => return crate::children::spawn(env, id, req).await,
                ChildOp::Status { child } => {
                    return crate::children::act(env, id, child, "status", req).await
                }
                ChildOp::Prompt { child } => {
                    return crate::children::act(env, id, child, "prompt", req).await
                }
                ChildOp::Cancel { child } => {
                    return crate::children::act(env, id, child, "cancel", req).await
                }
                ChildOp::List => {}
            }
        }
        _ => {}
    }
    let body = if matches!(route, Route::AttachmentUpload { .. }) {
        read_body_up_to(&mut req, MAX_ATTACHMENT_UPLOAD_BYTES).await?
    } else if matches!(req.method(), Method::Post | Method::Put | Method::Patch) {
        read_body(&mut req).await?
    } else {
        Vec::new()
    };
    let caller = caller::resolve(&req, &body, env).await?;
    if !sandbox_route {
        if let Some(id) = route.session_id() {
            known_session(env, id).await?;
        }
    }
    let actor = &caller.actor;
    let now = now_ms() as i64;
    match route {
        Route::Me => signin::me(&caller),
        Route::SignOut => signin::sign_out(&req, env, &caller).await,
        Route::CreateSession => {
            let mut create: CreateSessionRequest =
                body_as(if body.is_empty() { b"{}" } else { &body })?;
            // Only the control plane makes child sessions.
            create.parent_session_id = None;
            create.depth = None;
            let charge = crate::ratelimit::charge_session(env, &actor.user_id, now).await?;
            match create_session_with(env, &origin_of(&req), actor, create, &[]).await {
                Ok(created) => json(&created, 201),
                Err(e) => {
                    crate::ratelimit::refund(env, charge).await;
                    Err(e)
                }
            }
        }
        Route::ListSessions => {
            let url = req
                .url()
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            let pairs: Vec<(String, String)> = url
                .query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            let query = listing::parse(&pairs, &actor.user_id)?;
            json(&index::list(env, &query).await?, 200)
        }
        Route::ListRepos => {
            let refresh = req
                .url()
                .ok()
                .is_some_and(|u| u.query_pairs().any(|(k, v)| k == "refresh" && v != "0"));
            json(&repos::list(env, refresh, now).await?, 200)
        }
        Route::RepoBranches { owner, name } => json(
            &crate::installation::branches(env, &owner, &name, now).await?,
            200,
        ),
        Route::RegisterRepo => {
            let reg: RegisterRepository = body_as(&body)?;
            json(&repos::register(env, &reg, actor, now).await?, 201)
        }
        Route::RemoveRepo { owner, name } => {
            if repos::remove(env, &owner, &name).await? {
                json(&serde_json::json!({ "deleted": true }), 200)
            } else {
                Err(ApiError::not_found(format!("no repository {owner}/{name}")))
            }
        }
        Route::ListTokens => json(&api_tokens::list(env, &caller).await?, 200),
        Route::CreateToken => json(&api_tokens::create(env, &caller, &body, now).await?, 201),
        Route::RevokeToken { id } => {
            api_tokens::revoke(env, &caller, &id, now).await?;
            json(&serde_json::json!({ "revoked": true, "id": id }), 200)
        }
        Route::ListEnvironments => json(&settings::list_environments(env).await?, 200),
        Route::CreateEnvironment => json(
            &settings::create_environment(env, actor, &body, now).await?,
            201,
        ),
        Route::GetEnvironment { id } => json(&settings::get_environment(env, &id).await?, 200),
        Route::UpdateEnvironment { id } => json(
            &settings::update_environment(env, &id, &body, now).await?,
            200,
        ),
        Route::DeleteEnvironment { id } => {
            settings::delete_environment(env, &id).await?;
            json(&serde_json::json!({ "deleted": true, "id": id }), 200)
        }
        Route::Secrets { scope, op } => match op {
            SecretOp::List => json(&settings::list_secrets(env, &scope).await?, 200),
            SecretOp::Set => json(&settings::set_secrets(env, &scope, &body, now).await?, 200),
            SecretOp::Delete { key } => {
                let key = settings::delete_secret(env, &scope, &key).await?;
                json(&serde_json::json!({ "status": "deleted", "key": key }), 200)
            }
        },
        Route::Children { id, .. } => crate::children::list(env, &id).await,
        Route::AttachmentUpload { id } => {
            let url = req
                .url()
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            let name = url
                .query_pairs()
                .find(|(k, _)| k == "name")
                .map(|(_, v)| v.into_owned())
                .unwrap_or_else(|| "attachment".into());
            let mime = req
                .headers()
                .get("Content-Type")
                .ok()
                .flatten()
                .unwrap_or_default();
            json(&store_attachment(env, &id, &name, &mime, &body).await?, 201)
        }
        Route::SlackSettings { write } => {
            if write {
                json(&crate::slack_bot::put_settings(env, &body, now).await?, 200)
            } else {
                json(&crate::slack_bot::settings(env).await?, 200)
            }
        }
        Route::ListImages => {
            let url = req
                .url()
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            let pairs: Vec<(String, String)> = url
                .query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            let scope = crate::images::scope_from_query(&pairs)?;
            json(&crate::images::list(env, scope).await?, 200)
        }
        Route::BuildImage => json(
            &crate::images::start_by_hand(env, &body, &origin_of(&req), now).await?,
            202,
        ),
        Route::ImageSchedule => json(
            &crate::images::set_schedule(env, &body, &origin_of(&req), now).await?,
            200,
        ),
        Route::RepoSettings { owner, name, write } => {
            if write {
                json(
                    &crate::repos::put_settings(env, &owner, &name, &body, actor, now).await?,
                    200,
                )
            } else {
                json(
                    &inspect_scm::api::repo_settings(env, &owner, &name).await?,
                    200,
                )
            }
        }
        Route::Session { id, action } => {
            let vouched = matches!(caller.via, caller::Via::Service { .. });
            let body = typed_session_body(action, &body, vouched)?;
            let resp = forward(env, &id, action, req, Some(actor), body, vouched).await?;
            if action == SessionAction::Delete && resp.status_code() == 200 {
                index::remove(env, &id).await?;
            }
            Ok(resp)
        }
        Route::Health
        | Route::SignIn
        | Route::SignInCallback
        | Route::GitHubWebhook
        | Route::ImageBuildReport { .. }
        | Route::AttachmentDownload { .. }
        | Route::SlackEvents
        | Route::SlackInteractions => Err(ApiError::internal("route served above")),
    }
}

/// `POST /sessions/:id/scm-credentials`: the session's object vouches for the sandbox's
/// token, then the Worker hands out an installation token.
/// Sends a sandbox's request on to its session's object at `path`, with the sandbox's own
/// credentials (bearer token and `X-Sandbox-ID`) for the object to check.
pub(crate) async fn forward_as_sandbox(
    env: &Env,
    id: &str,
    path: &str,
    req: &Request,
    body: Option<&[u8]>,
) -> ApiResult<Response> {
    let headers = Headers::new();
    for name in ["Authorization", inspect_protocol::auth::SANDBOX_ID_HEADER] {
        if let Some(v) = req.headers().get(name).ok().flatten() {
            headers.set(name, &v).map_err(internal)?;
        }
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post);
    if let Some(body) = body {
        headers
            .set("Content-Type", "application/json")
            .map_err(internal)?;
        init.with_body(Some(js_sys_bytes(body)));
    }
    init.with_headers(headers);
    let inner =
        Request::new_with_init(&format!("https://session{path}"), &init).map_err(internal)?;
    session_stub(env, id)?
        .fetch_with_request(inner)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))
}

async fn scm_credentials(env: &Env, id: &str, req: Request) -> ApiResult<Response> {
    let resp = forward_as_sandbox(
        env,
        id,
        SessionAction::ScmCredentials.object_path(),
        &req,
        None,
    )
    .await?;
    if resp.status_code() != 200 {
        return Ok(resp);
    }
    let scope: inspect_protocol::auth::ScmScope = parse(&object_answer(resp, 200).await?)?;
    let creds = github_app::git_token(env, &scope.repositories, now_ms() as i64).await?;
    let resp = json(&creds, 200)?;
    let _ = resp.headers().set("Cache-Control", "no-store");
    Ok(resp)
}

/// `POST /sessions/:id/pull-requests`: from the session's sandbox (its token and id); the
/// object checks them and does the rest.
async fn pull_requests(env: &Env, id: &str, mut req: Request) -> ApiResult<Response> {
    let body = read_body(&mut req).await?;
    forward_as_sandbox(
        env,
        id,
        SessionAction::PullRequests.object_path(),
        &req,
        Some(&body),
    )
    .await
}

/// The body a session's object gets for `action`: parsed here, once, with the Worker's
/// limits, and written anew from its type, so the object never reads what the Worker did
/// not. Where a prompt's outcome is reported (`callbackContext`) is the control plane's or
/// a signed service's to say (`vouched`), never a person's. Actions that take no body get
/// none.
fn typed_session_body(action: SessionAction, body: &[u8], vouched: bool) -> ApiResult<Vec<u8>> {
    let write = |r: serde_json::Result<Vec<u8>>| r.map_err(|e| ApiError::internal(e.to_string()));
    match action {
        SessionAction::Prompt => {
            let mut prompt: inspect_protocol::session::PromptRequest = body_as(body)?;
            if !vouched {
                prompt.callback_context = None;
            }
            write(serde_json::to_vec(&prompt))
        }
        SessionAction::Title => {
            let title: inspect_protocol::session::TitleRequest = body_as(body)?;
            write(serde_json::to_vec(&title))
        }
        _ => Ok(Vec::new()),
    }
}

pub(crate) fn internal(e: worker::Error) -> ApiError {
    ApiError::internal(e.to_string())
}

/// A session object's answer: its text when the status is `ok`, its error otherwise. Not
/// generic, so the reading is in the wasm once and only [`parse`] is made per answer type
/// (`Response::json` made the whole read once per type).
pub(crate) async fn object_answer(mut resp: Response, ok: u16) -> ApiResult<String> {
    let text = resp.text().await.map_err(internal)?;
    if resp.status_code() != ok {
        return Err(parse::<inspect_protocol::ErrorBody>(&text)?.error);
    }
    Ok(text)
}

/// A request body read as `T`; a 400 that says why when it is not.
pub(crate) fn body_as<T: serde::de::DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    inspect_protocol::json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
}

/// An object's answer read as `T`.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(text: &str) -> ApiResult<T> {
    serde_json::from_str(text).map_err(|e| ApiError::internal(e.to_string()))
}

/// The key session ids are tagged with, from the deployment's secrets key.
fn session_id_key(env: &Env) -> Option<[u8; 32]> {
    crate::db::setting(env, inspect_secrets::KEY_VAR).map(|k| session_ids::id_key(&k))
}

fn new_session_id(env: &Env) -> ApiResult<String> {
    let mut bytes = [0u8; session_ids::RANDOM_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(session_ids::mint(session_id_key(env).as_ref(), &bytes))
}

/// Refuses (404) a session id this control plane did not make: its tag says so, or, for
/// an id without one, the index does.
pub(crate) async fn known_session(env: &Env, id: &str) -> ApiResult<()> {
    if session_id_key(env).is_some_and(|key| session_ids::vouched(&key, id)) {
        return Ok(());
    }
    let row: Option<serde_json::Value> = crate::db::first(
        env,
        "SELECT 1 AS found FROM sessions WHERE id = ?1",
        &[id.into()],
    )
    .await?;
    match row {
        Some(_) => Ok(()),
        None => Err(ApiError::not_found(format!("no session {id}"))),
    }
}

/// A JSON request body: at most [`MAX_BODY_BYTES`], and said to be JSON (415 otherwise; a
/// page on another site can send `text/plain` without asking first, never JSON).
pub(crate) async fn read_body(req: &mut Request) -> ApiResult<Vec<u8>> {
    let body = read_body_up_to(req, MAX_BODY_BYTES).await?;
    if !body.is_empty() {
        let kind = req
            .headers()
            .get("Content-Type")
            .ok()
            .flatten()
            .unwrap_or_default();
        if !crate::auth::origin::is_json_content_type(&kind) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                format!(
                    "this route takes JSON: send Content-Type: application/json (got {:?})",
                    kind
                ),
            ));
        }
    }
    Ok(body)
}

/// A body of at most `limit` bytes (declared and read).
pub(crate) async fn read_body_up_to(req: &mut Request, limit: usize) -> ApiResult<Vec<u8>> {
    let too_large = || {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("a body is at most {limit} bytes"),
        )
    };
    let declared = req
        .headers()
        .get("Content-Length")
        .ok()
        .flatten()
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(0);
    if declared > limit {
        return Err(too_large());
    }
    let body = req
        .bytes()
        .await
        .map_err(|e| ApiError::bad_request(format!("unreadable body: {e}")))?;
    if body.len() > limit {
        return Err(too_large());
    }
    Ok(body)
}

/// Keeps a file in a session for its prompts (`POST /sessions/:id/attachments`, and the
/// Slack bot's images): what a prompt lists to carry it.
pub(crate) async fn store_attachment(
    env: &Env,
    id: &str,
    name: &str,
    mime_type: &str,
    bytes: &[u8],
) -> ApiResult<inspect_protocol::session::Attachment> {
    let headers = Headers::new();
    headers.set("Content-Type", mime_type).map_err(internal)?;
    headers.set(SESSION_HEADER, id).map_err(internal)?;
    let service = Actor {
        user_id: "system:attachments".into(),
        name: "attachments".into(),
        email: None,
        avatar: None,
    };
    headers
        .set(
            ACTOR_HEADER,
            &serde_json::to_string(&service).map_err(|e| ApiError::internal(e.to_string()))?,
        )
        .map_err(internal)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(js_sys_bytes(bytes)));
    let url = worker::Url::parse_with_params("https://session/attachments", &[("name", name)])
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let inner = Request::new_with_init(url.as_str(), &init).map_err(internal)?;
    let resp = session_stub(env, id)?
        .fetch_with_request(inner)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))?;
    parse(&object_answer(resp, 201).await?)
}

/// `GET /sessions/:id/attachments/:attachment`: the session's sandbox fetches a file.
async fn attachment_for_sandbox(
    env: &Env,
    id: &str,
    attachment: &str,
    req: &Request,
) -> ApiResult<Response> {
    let headers = Headers::new();
    for name in ["Authorization", inspect_protocol::auth::SANDBOX_ID_HEADER] {
        if let Some(v) = req.headers().get(name).ok().flatten() {
            headers.set(name, &v).map_err(internal)?;
        }
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Get).with_headers(headers);
    let inner = Request::new_with_init(&format!("https://session/attachments/{attachment}"), &init)
        .map_err(internal)?;
    session_stub(env, id)?
        .fetch_with_request(inner)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))
}

/// Sends a request to the session's Durable Object, with the caller attached.
async fn forward(
    env: &Env,
    id: &str,
    action: SessionAction,
    req: Request,
    actor: Option<&Actor>,
    body: Vec<u8>,
    vouched: bool,
) -> ApiResult<Response> {
    let stub = session_stub(env, id)?;
    let origin = origin_of(&req);
    let query = req
        .url()
        .ok()
        .and_then(|u| u.query().map(|q| format!("?{q}")))
        .unwrap_or_default();
    if action == SessionAction::Socket {
        // Upgrades go through with their own headers (a sandbox's credentials among them);
        // the runtime carries the socket across.
        let headers = req.headers().clone();
        headers.set(ORIGIN_HEADER, &origin).map_err(internal)?;
        let mut init = RequestInit::new();
        init.with_method(Method::Get).with_headers(headers);
        let url = format!("https://session{}{}", action.object_path(), query);
        let inner = Request::new_with_init(&url, &init).map_err(internal)?;
        return stub
            .fetch_with_request(inner)
            .await
            .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()));
    }
    let method = req.method();
    let headers = Headers::new();
    headers
        .set("Content-Type", "application/json")
        .map_err(internal)?;
    headers.set(SESSION_HEADER, id).map_err(internal)?;
    headers.set(ORIGIN_HEADER, &origin).map_err(internal)?;
    if let Some(actor) = actor {
        let json = serde_json::to_string(actor).map_err(|e| ApiError::internal(e.to_string()))?;
        headers.set(ACTOR_HEADER, &json).map_err(internal)?;
    }
    if vouched {
        headers.set(VOUCHED_HEADER, "1").map_err(internal)?;
    }
    let mut init = RequestInit::new();
    init.with_method(method.clone()).with_headers(headers);
    if matches!(method, Method::Post | Method::Patch | Method::Put) {
        init.with_body(Some(js_sys_bytes(&body)));
    }
    let url = format!("https://session{}{}", action.object_path(), query);
    let inner = Request::new_with_init(&url, &init).map_err(internal)?;
    stub.fetch_with_request(inner)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))
}

/// The origin the caller reached us at (`http://127.0.0.1:8787`), for sandboxes.
pub(crate) fn origin_of(req: &Request) -> String {
    req.url()
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default()
}

/// The stub of a session's Durable Object (named by the session id).
fn session_stub(env: &Env, id: &str) -> ApiResult<worker::Stub> {
    env.durable_object("SESSION")
        .and_then(|ns| ns.get_by_name(id))
        .map_err(internal)
}

fn js_sys_bytes(bytes: &[u8]) -> wasm_bindgen::JsValue {
    worker::js_sys::Uint8Array::from(bytes).into()
}

/// Creates a session for `actor` (the REST route and the bots): resolves its
/// repositories from the registry or the GitHub App, makes the object, indexes it.
pub(crate) async fn create_session(
    env: &Env,
    origin: &str,
    actor: &Actor,
    create: CreateSessionRequest,
) -> ApiResult<inspect_protocol::session::CreateSessionResponse> {
    create_session_with(env, origin, actor, create, &[]).await
}

/// [`create_session`], with branches that replace an environment's for some of its
/// repositories (the GitHub bot works on a pull request's branch inside the repository's
/// default environment).
pub(crate) async fn create_session_with(
    env: &Env,
    origin: &str,
    actor: &Actor,
    mut create: CreateSessionRequest,
    branch_overrides: &[inspect_protocol::session::RepositoryRef],
) -> ApiResult<inspect_protocol::session::CreateSessionResponse> {
    create.environment_name = None;
    let mut repositories = match &create.environment_id {
        Some(environment) => {
            if create.repositories.is_some() || create.repo_owner.is_some() {
                return Err(ApiError::bad_request(
                    "name an environment or repositories, not both",
                ));
            }
            // The session keeps its own copy of the environment as it is now.
            let found = settings::get_environment(env, environment).await?;
            create.environment_name = Some(found.name);
            let mut repositories = found.repositories;
            for r in repositories.iter_mut() {
                if let Some(o) = branch_overrides.iter().find(|o| {
                    o.owner.eq_ignore_ascii_case(&r.owner) && o.name.eq_ignore_ascii_case(&r.name)
                }) {
                    r.branch = o.branch.clone();
                }
            }
            repositories
        }
        None => inspect_durable::engine::state::repositories_of(&create)?,
    };
    repos::resolve(env, &mut repositories).await?;
    // A session that names no model gets its primary repository's default, if it has one.
    if create.model.is_none() {
        if let Some(primary) = repositories.first() {
            create.model = inspect_scm::api::repo_settings(env, &primary.owner, &primary.name)
                .await?
                .default_model;
        }
    }
    create.repositories = Some(repositories);
    create.repo_owner = None;
    create.repo_name = None;
    create.branch = None;
    let body = serde_json::to_vec(&create).map_err(|e| ApiError::internal(e.to_string()))?;
    let id = new_session_id(env)?;
    // The request is checked here as the object will check it, and the session indexed
    // from the state it will store while the object stores it (one round trip less than
    // one after the other). It is indexed before answering, so the creator's next list
    // shows it; if the object fails, the index forgets it again.
    let (state, _) =
        inspect_durable::engine::state::new_session(&id, &create, actor, now_ms() as i64)?;
    let (stored, indexed) = futures::join!(
        async {
            let resp =
                call_object(env, &id, Method::Post, "/init", origin, Some(actor), &body).await?;
            object_answer(resp, 201).await.map(drop)
        },
        index::insert(env, &state, actor),
    );
    if let Err(e) = stored {
        if indexed.is_ok() {
            let _ = index::remove(env, &id).await;
        }
        return Err(e);
    }
    indexed?;
    Ok(inspect_protocol::session::CreateSessionResponse {
        session_id: state.id,
        status: state.status,
    })
}

/// One request to a session's object, as the Worker makes them.
pub(crate) async fn call_object(
    env: &Env,
    id: &str,
    method: Method,
    path: &str,
    origin: &str,
    actor: Option<&Actor>,
    body: &[u8],
) -> ApiResult<Response> {
    let headers = Headers::new();
    headers
        .set("Content-Type", "application/json")
        .map_err(internal)?;
    headers.set(SESSION_HEADER, id).map_err(internal)?;
    if !origin.is_empty() {
        headers.set(ORIGIN_HEADER, origin).map_err(internal)?;
    }
    if let Some(actor) = actor {
        let json = serde_json::to_string(actor).map_err(|e| ApiError::internal(e.to_string()))?;
        headers.set(ACTOR_HEADER, &json).map_err(internal)?;
    }
    // The Worker wrote this body itself (a bot's prompt with where to answer).
    headers.set(VOUCHED_HEADER, "1").map_err(internal)?;
    let mut init = RequestInit::new();
    let has_body = matches!(method, Method::Post | Method::Put | Method::Patch);
    init.with_method(method).with_headers(headers);
    if has_body {
        init.with_body(Some(js_sys_bytes(body)));
    }
    let inner =
        Request::new_with_init(&format!("https://session{path}"), &init).map_err(internal)?;
    session_stub(env, id)?
        .fetch_with_request(inner)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))
}

fn now_ms() -> f64 {
    worker::Date::now().as_millis() as f64
}

fn check<T>(started: f64, r: std::result::Result<T, String>) -> CheckResult {
    CheckResult {
        ok: r.is_ok(),
        latency_ms: now_ms() - started,
        detail: r.err(),
    }
}

async fn health(env: &Env) -> ApiResult<Response> {
    use inspect_protocol::health::PartCheck;
    let t0 = now_ms();
    let d1 = check(t0, d1_round_trip(env).await);
    let t1 = now_ms();
    let durable_object = check(t1, durable_round_trip(env).await);
    let setting = |n: &str| crate::db::setting(env, n);
    let configured = |names: &[&str]| names.iter().all(|n| setting(n).is_some());
    let part = |configured: bool| PartCheck {
        configured,
        ok: None,
        latency_ms: None,
        detail: None,
        disk: None,
    };
    // The sandbox provider, asked whether it answers (the local host adds its disk use).
    let mut sandbox_provider = part(false);
    match inspect_durable::providers::AnyProvider::from_env(env) {
        Ok(provider) => {
            sandbox_provider.configured = true;
            let t = now_ms();
            let answer = provider.probe().await;
            sandbox_provider.latency_ms = Some(now_ms() - t);
            sandbox_provider.ok = Some(answer.is_ok());
            match answer {
                Ok(probe) => {
                    sandbox_provider.detail = Some(probe.detail);
                    sandbox_provider.disk = probe.disk;
                }
                Err(e) => sandbox_provider.detail = Some(e.to_string()),
            }
        }
        Err(why) => sandbox_provider.detail = Some(why),
    }
    // The GitHub App: configured, and able to mint an installation token.
    let mut github_app = part(configured(&[
        "GITHUB_APP_ID",
        "GITHUB_APP_INSTALLATION_ID",
        "GITHUB_APP_PRIVATE_KEY",
    ]));
    if github_app.configured {
        let t = now_ms();
        let minted = github_app::installation_token(env, t as i64).await;
        github_app.latency_ms = Some(now_ms() - t);
        github_app.ok = Some(minted.is_ok());
        github_app.detail = minted.err().map(|e| e.message);
    }
    let sign_in = part(configured(&["GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET"]));
    let github_bot = part(configured(&["GITHUB_WEBHOOK_SECRET"]) && github_app.configured);
    let secrets_key = part(configured(&[inspect_secrets::KEY_VAR]));
    // Only what is set up counts against the status.
    let ok = d1.ok
        && durable_object.ok
        && sandbox_provider.ok != Some(false)
        && github_app.ok != Some(false);
    let report = HealthReport {
        status: if ok { "ok" } else { "degraded" }.into(),
        version: crate::VERSION.into(),
        d1,
        durable_object,
        sandbox_provider,
        github_app,
        sign_in,
        github_bot,
        secrets_key,
    };
    let resp = inspect_durable::shell::json_ok(&report).map_err(internal)?;
    Ok(if ok { resp } else { resp.with_status(503) })
}

async fn d1_round_trip(env: &Env) -> std::result::Result<(), String> {
    // A migrated table, so the check also proves the migrations were applied.
    crate::db::first::<serde_json::Value>(env, "SELECT COUNT(*) AS n FROM sessions", &[])
        .await
        .map_err(|e| e.message)?;
    Ok(())
}

async fn durable_round_trip(env: &Env) -> std::result::Result<(), String> {
    let ns = env.durable_object("SESSION").map_err(|e| e.to_string())?;
    let stub = ns
        .id_from_name("health-probe")
        .and_then(|id| id.get_stub())
        .map_err(|e| e.to_string())?;
    let mut resp = stub
        .fetch_with_str("https://session/internal/health")
        .await
        .map_err(|e| e.to_string())?;
    if resp.status_code() != 200 {
        return Err(format!("object answered {}", resp.status_code()));
    }
    let probe: DurableProbe = resp.json().await.map_err(|e| e.to_string())?;
    if probe.probes < 1 {
        return Err("object did not record the probe".into());
    }
    Ok(())
}

/// Paths that are no API route go to the static assets of `web/`; a browser navigation to
/// an unknown path gets the app's `index.html` so client-side routes work; anything else
/// answers the JSON 404.
async fn serve_asset_or_404(req: Request, env: &Env, method: &str, path: &str) -> Result<Response> {
    let is_read = matches!(req.method(), Method::Get | Method::Head);
    if is_read {
        if let Ok(assets) = env.assets("ASSETS") {
            let wants_html = req
                .headers()
                .get("Accept")
                .ok()
                .flatten()
                .is_some_and(|a| a.contains("text/html"));
            let resp = assets.fetch_request(req).await?;
            if resp.status_code() != 404 {
                return Ok(resp);
            }
            if wants_html {
                return assets.fetch("https://assets/index.html", None).await;
            }
        }
    }
    error_response(&not_found(method, path))
}
