//! The Worker's entry: the runtime's events (fetch, scheduled) and the dispatch of each
//! route to its handler. It only dispatches: request and response helpers live in
//! [`crate::http`], calls into session objects in [`crate::objects`], and no module
//! imports this one.

use crate::http::{
    body_as, error_response, json, now_ms, origin_of, query_pairs, read_body, read_body_up_to,
    ApiResult, MAX_ATTACHMENT_UPLOAD_BYTES,
};
use crate::index;
use crate::listing;
use crate::objects::{
    attachment_for_sandbox, create_session_with, forward, forward_as_sandbox, known_session,
    pull_requests, scm_credentials, store_attachment, typed_session_body,
};
use crate::plane::Plane;
use crate::repos;
use crate::routes::SecretOp;
use crate::routes::{match_route, not_found, AutomationOp, Route, SessionAction};
use crate::{api_tokens, caller, settings, signin};
use inspect_protocol::session::{CreateSessionRequest, RegisterRepository};
use inspect_protocol::ApiError;
use inspect_runtime::plane::Freshness;
use worker::{event, Context, Env, Method, Request, Response, Result};

/// The cron trigger that only fires due automations (`wrangler.toml`).
const EVERY_MINUTE: &str = "* * * * *";

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// The cron triggers: due automations fire (every minute); every 30 minutes also stuck
/// image builds time out, scheduled ones start, Slack's old threads and picks are
/// forgotten, the installation's repositories are synced from GitHub, and pull requests
/// still open that no delivery mentioned for 30 minutes are asked about.
#[event(scheduled)]
async fn scheduled(event: worker::ScheduledEvent, env: Env, _ctx: worker::ScheduleContext) {
    let now = event.schedule() as i64;
    let cron = event.cron();
    let fired = crate::automations::tick(&env, now).await;
    cron_step(
        &cron,
        ("automations_fired", "automations_fire_failed"),
        "runs",
        fired,
    );
    // The minute's trigger is the automations' alone; the rest every 30 minutes.
    if cron == EVERY_MINUTE {
        return;
    }
    let images = crate::images::tick(&env, now).await;
    cron_step(
        &cron,
        ("images_checked", "images_check_failed"),
        "started",
        images,
    );
    let pruned = inspect_slack::bot::prune(&env, now).await;
    cron_step(
        &cron,
        ("slack_pruned", "slack_prune_failed"),
        "rows",
        pruned,
    );
    let pruned = inspect_linear::bot::prune(&env, now).await;
    cron_step(
        &cron,
        ("linear_pruned", "linear_prune_failed"),
        "rows",
        pruned,
    );
    if crate::db::setting(&env, "GITHUB_APP_ID").is_some() {
        let synced = inspect_github::installation::sync(&env, now).await;
        let names = ("repositories_synced", "repositories_sync_failed");
        cron_step(&cron, names, "repositories", synced);
        let checked = crate::pull_requests::refresh(&env, now).await;
        let names = ("pull_requests_checked", "pull_requests_check_failed");
        cron_step(&cron, names, "changed", checked);
    }
}

/// One line for a step of the cron trigger (its event when it worked, when it failed): how
/// many things it did, or why it failed.
fn cron_step(cron: &str, (done, failed): (&str, &str), counted: &str, outcome: ApiResult<usize>) {
    use inspect_runtime::log::{emit, LogLine};
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
    if is_page_navigation(&req) && !crate::routes::is_page_route(&path) {
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

async fn serve(route: Route, mut req: Request, env: &Env, ctx: Context) -> ApiResult<Response> {
    // A made-up session id never reaches the runtime: it would make an object. Routes
    // that carry their own credentials (a sandbox's) are checked here; the others once the
    // caller is known, so a stranger learns nothing about which sessions exist.
    let sandbox_route = route.is_sandbox_call(
        req.headers()
            .has(inspect_protocol::auth::SANDBOX_ID_HEADER)
            .unwrap_or(false),
    );
    if sandbox_route {
        if let Some(id) = route.session_id() {
            known_session(env, id).await?;
        }
    }
    // Routes that carry their own credentials (or none).
    match &route {
        Route::Health => return crate::health::health(env).await,
        Route::GitHubWebhook => {
            return inspect_github::bot::webhook(req, env, ctx, Plane::new(env)).await
        }
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
        } if sandbox_route => {
            return forward_as_sandbox(env, id, "/sandbox-tunnel-urls", &req, None).await;
        }
        Route::AttachmentDownload { id, attachment } => {
            return attachment_for_sandbox(env, id, attachment, &req).await
        }
        // The sandbox fetches its session's pinned skills with its own credentials.
        Route::Session {
            id,
            action: SessionAction::Skills,
        } => {
            return forward_as_sandbox(env, id, SessionAction::Skills.object_path(), &req, None)
                .await;
        }
        // A brokered grant's short-lived token, for the sandbox that may use it.
        Route::Session {
            id,
            action: SessionAction::ModelToken,
        } => {
            let body = read_body(&mut req).await?;
            let ask: inspect_protocol::models::ModelTokenRequest = body_as(&body)?;
            let typed = serde_json::to_vec(&ask).map_err(|e| ApiError::internal(e.to_string()))?;
            let path = SessionAction::ModelToken.object_path();
            return forward_as_sandbox(env, id, path, &req, Some(&typed)).await;
        }
        Route::ReportMedia { id } => return crate::objects::report_media(env, id, req).await,
        Route::SlackEvents => {
            return inspect_slack::bot::events(req, env, ctx, Plane::new(env)).await
        }
        Route::AutomationWebhook { id } => {
            let accepted = crate::automations::webhook(env, id, req, now_ms() as i64).await?;
            return json(&accepted, 200);
        }
        Route::SentryWebhook { id } => {
            let accepted =
                crate::automations::sentry_webhook(env, id, req, now_ms() as i64).await?;
            return json(&accepted, 200);
        }
        Route::SlackInteractions => {
            return inspect_slack::bot::interactions(req, env, ctx, Plane::new(env)).await
        }
        Route::LinearWebhook => {
            return inspect_linear::bot::webhook(req, env, ctx, Plane::new(env)).await
        }
        Route::LinearCallback => return inspect_linear::bot::callback(&req, env).await,
        Route::Session {
            id,
            action: SessionAction::PullRequests,
        } => return pull_requests(env, id, req).await,
        Route::Session {
            id,
            action: SessionAction::ReportChanges,
        } => return crate::objects::report_changes(env, id, req).await,
        Route::Session {
            id,
            action: SessionAction::Reviews,
        } => return crate::objects::reviews(env, id, req).await,
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
            // Only the control plane makes child sessions and automations' sessions.
            create.parent_session_id = None;
            create.depth = None;
            create.automation = None;
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
            let pairs = query_pairs(&req)?;
            let query = listing::parse(&pairs, &actor.user_id)?;
            json(&index::list(env, &query).await?, 200)
        }
        Route::ListRepos => {
            let refresh = req
                .url()
                .ok()
                .is_some_and(|u| u.query_pairs().any(|(k, v)| k == "refresh" && v != "0"));
            let freshness = if refresh {
                Freshness::SyncNow
            } else {
                Freshness::SyncIfStale
            };
            json(&repos::list(env, freshness, now).await?, 200)
        }
        Route::RepoBranches { owner, name } => json(
            &inspect_github::installation::branches(env, &owner, &name, now).await?,
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
        Route::Models => json(&inspect_models::store::catalog(env).await?, 200),
        Route::SkillProfiles { name } => {
            use inspect_skills::profiles;
            let me = actor.user_id.as_str();
            match (req.method(), name) {
                (Method::Get, None) => json(&profiles::list(env, me).await?, 200),
                (Method::Put, Some(name)) => {
                    let ask: inspect_protocol::skills::SkillProfileRequest = body_as(&body)?;
                    json(&profiles::put(env, me, &name, ask.skills, now).await?, 200)
                }
                (_, Some(name)) => {
                    profiles::delete(env, me, &name).await?;
                    json(&serde_json::json!({ "deleted": true, "name": name }), 200)
                }
                (_, None) => Err(ApiError::bad_request("GET /skill-profiles")),
            }
        }
        Route::ModelGrants { id } => {
            use inspect_models::grant_store;
            match (req.method(), id) {
                (Method::Get, None) => json(
                    &inspect_protocol::models::ModelGrantList {
                        grants: grant_store::list(env).await?,
                    },
                    200,
                ),
                (Method::Put, None) => {
                    let ask: inspect_protocol::models::ModelGrantRequest = body_as(&body)?;
                    json(&grant_store::put(env, ask, &actor.user_id, now).await?, 200)
                }
                (_, Some(id)) => {
                    grant_store::delete(env, &id).await?;
                    json(&serde_json::json!({ "deleted": true, "id": id }), 200)
                }
                (_, None) => Err(ApiError::bad_request("GET or PUT /model-grants")),
            }
        }
        Route::McpServers { name } => {
            use inspect_mcp::store;
            match (req.method(), name.as_deref()) {
                (Method::Get, None) => json(&store::list(env).await?, 200),
                (Method::Get, Some(name)) => json(&store::get(env, name).await?, 200),
                (Method::Post, None) | (Method::Put, Some(_)) => {
                    let ask: inspect_protocol::mcp::McpServerRequest = body_as(&body)?;
                    let saved =
                        store::save(env, name.as_deref(), &ask, &actor.user_id, now).await?;
                    json(&saved, if name.is_none() { 201 } else { 200 })
                }
                (_, Some(name)) => {
                    store::delete(env, name).await?;
                    json(&serde_json::json!({ "deleted": true, "name": name }), 200)
                }
                (_, None) => Err(ApiError::bad_request("GET or POST /mcp-servers")),
            }
        }
        Route::Skills { name } => {
            use inspect_skills::store;
            match (req.method(), name) {
                (Method::Get, None) => json(&store::list(env).await?, 200),
                (Method::Post, None) => {
                    let ask: inspect_protocol::skills::SkillRequest = body_as(&body)?;
                    json(&store::create(env, &ask, &actor.user_id, now).await?, 201)
                }
                (Method::Get, Some(name)) => json(&store::get(env, &name).await?, 200),
                (Method::Put, Some(name)) => {
                    let ask: inspect_protocol::skills::SkillRequest = body_as(&body)?;
                    json(
                        &store::update(env, &name, &ask, &actor.user_id, now).await?,
                        200,
                    )
                }
                (_, Some(name)) => {
                    store::delete(env, &name, now).await?;
                    json(&serde_json::json!({ "deleted": true, "name": name }), 200)
                }
                (_, None) => Err(ApiError::bad_request("GET or POST /skills")),
            }
        }
        Route::SaveModelSettings => {
            let settings: inspect_protocol::models::ModelSettings = body_as(&body)?;
            json(
                &inspect_models::store::save(env, &settings, &actor.user_id, now).await?,
                200,
            )
        }
        Route::Children { id, .. } => crate::children::list(env, &id).await,
        Route::Automations { op } => automation_route(env, op, &req, actor, &body, now).await,
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
        Route::LinearStatus => json(&inspect_linear::bot::status(env).await?, 200),
        Route::LinearSettings => json(
            &inspect_linear::bot::put_settings(env, &body, now).await?,
            200,
        ),
        Route::LinearInstall => json(
            &inspect_linear::bot::install(env, &origin_of(&req), &actor.user_id).await?,
            200,
        ),
        Route::SlackSettings { write } => {
            if write {
                json(
                    &inspect_slack::bot::put_settings(env, &body, now).await?,
                    200,
                )
            } else {
                json(&inspect_slack::bot::settings(env).await?, 200)
            }
        }
        Route::ListImages => {
            let pairs = query_pairs(&req)?;
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
                    &inspect_github::api::repo_settings(env, &owner, &name).await?,
                    200,
                )
            }
        }
        Route::Media { id, attachment } => {
            let path = format!("/media/{attachment}");
            crate::objects::forward_at(env, &id, &path, req, Some(actor), Vec::new(), false).await
        }
        Route::PortLink { id, port } => {
            let path = format!("/ports/{port}/link");
            crate::objects::forward_at(env, &id, &path, req, Some(actor), Vec::new(), false).await
        }
        Route::CloseTerminal { id, terminal } => {
            let path = format!("/terminals/{terminal}");
            crate::objects::forward_at(env, &id, &path, req, Some(actor), Vec::new(), false).await
        }
        Route::Session {
            id,
            action: SessionAction::OpenEditor,
        } => crate::objects::open_editor(env, &id, req, actor).await,
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
        | Route::ReportMedia { .. }
        | Route::SlackEvents
        | Route::AutomationWebhook { .. }
        | Route::SentryWebhook { .. }
        | Route::SlackInteractions
        | Route::LinearWebhook
        | Route::LinearCallback => Err(ApiError::internal("route served above")),
    }
}

/// `/automations…`: any caller, as for sessions.
async fn automation_route(
    env: &Env,
    op: AutomationOp,
    req: &Request,
    actor: &inspect_protocol::session::Actor,
    body: &[u8],
    now: i64,
) -> ApiResult<Response> {
    use crate::automations as a;
    match op {
        AutomationOp::List => json(&a::list(env).await?, 200),
        AutomationOp::Create => json(
            &a::create(env, actor, body, &origin_of(req), now).await?,
            201,
        ),
        AutomationOp::Preview => {
            let pairs = query_pairs(req)?;
            json(&a::preview(&pairs, now)?, 200)
        }
        AutomationOp::Get { id } => json(&a::get(env, &id).await?, 200),
        AutomationOp::Update { id } => {
            json(&a::update(env, &id, body, &origin_of(req), now).await?, 200)
        }
        AutomationOp::Delete { id } => {
            a::delete(env, &id, now).await?;
            json(&serde_json::json!({ "deleted": true, "id": id }), 200)
        }
        AutomationOp::Trigger { id } => json(&a::trigger(env, &id, now).await?, 201),
        AutomationOp::Pause { id } => json(&a::set_enabled(env, &id, false, now).await?, 200),
        AutomationOp::Resume { id } => json(&a::set_enabled(env, &id, true, now).await?, 200),
        AutomationOp::RotateKey { id } => json(&a::rotate_key(env, &id, now).await?, 200),
        AutomationOp::Runs { id } => json(&a::runs(env, &id).await?, 200),
    }
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
