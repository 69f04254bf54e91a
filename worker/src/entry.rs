//! The control plane Worker's entry: the runtime's events (fetch, scheduled) and the
//! dispatch of each route the session Worker hands over (bots, automations, sign-in,
//! settings, catalogs, sessions made and listed) to its handler, and the objects' calls
//! over the binding ([`crate::internal`]). It only dispatches: request and response
//! helpers live in [`crate::http`], calls into session objects in [`crate::objects`], and
//! no module imports this one.

use crate::http::{
    body_as, error_response, json, now_ms, origin_of, query_pairs, read_body, ApiResult,
};
use crate::index;
use crate::listing;
use crate::objects::create_session_with;
use crate::plane::Plane;
use crate::repos;
use crate::routes::SecretOp;
use crate::routes::{match_route, not_found, AutomationOp, Route, Served, SessionAction};
use crate::{api_tokens, settings, signin};
use inspect_protocol::session::{CreateSessionRequest, RegisterRepository};
use inspect_protocol::ApiError;
use inspect_runtime::plane::Freshness;
use worker::{event, Context, Env, Method, Request, Response, Result};

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> Result<Response> {
    let method = req.method().to_string();
    let path = req.path();
    // The session objects' calls come over the binding, on a host no request from the
    // Internet carries.
    if crate::internal::is_internal_call(&req) {
        return match crate::internal::call(req, &env).await {
            Ok(resp) => Ok(resp),
            Err(e) => error_response(&e),
        };
    }
    let outcome = match match_route(&method, &path) {
        Some(Ok(route)) => serve(route, req, &env, ctx).await,
        Some(Err(e)) => Err(e),
        None => Err(not_found(&method, &path)),
    };
    match outcome {
        Ok(resp) => Ok(resp),
        Err(e) => error_response(&e),
    }
}

async fn serve(route: Route, mut req: Request, env: &Env, ctx: Context) -> ApiResult<Response> {
    // A session's own traffic is the session Worker's (it never hands it over).
    if route.served_by() == Served::Session {
        return Err(ApiError::not_found("served by the session Worker"));
    }
    // A sandbox's own call is checked here; a person's once the caller is known.
    let sandbox_route = crate::objects::sandbox_call(&route, &req, env).await?;
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
        Route::SignInGoogle => return crate::google::start(&req, env).await,
        Route::SignInGoogleCallback => return crate::google::finish(&req, env).await,
        Route::SignInProviders => {
            return json(
                &inspect_protocol::people::SignInProviders {
                    github: crate::db::setting(env, "GITHUB_CLIENT_ID").is_some(),
                    google: crate::google::configured(env),
                },
                200,
            )
        }
        // A sandbox's git credentials (its own bearer token, checked by its object).
        Route::Session {
            id,
            action: SessionAction::ScmCredentials,
        } => return crate::objects::scm_credentials(env, id, req).await,
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
        Route::SlackCommands => {
            return inspect_slack::bot::command(req, env, Plane::new(env)).await
        }
        Route::LinearWebhook => {
            return inspect_linear::bot::webhook(req, env, ctx, Plane::new(env)).await
        }
        Route::LinearCallback => return inspect_linear::bot::callback(&req, env).await,
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
    let body = if matches!(req.method(), Method::Post | Method::Put | Method::Patch) {
        read_body(&mut req).await?
    } else {
        Vec::new()
    };
    let caller = crate::objects::person_call(&route, sandbox_route, &req, &body, env).await?;
    // What the whole deployment shares is changed by admins only.
    if let Some(what) = route.admin_only(&method_name(&req)) {
        crate::people::require_admin(env, &caller, what).await?;
    }
    let actor = &caller.actor;
    let now = now_ms() as i64;
    match route {
        Route::Me => signin::me(env, &caller).await,
        Route::Identities => json(&crate::people::identities(env, &caller).await?, 200),
        Route::LinkIdentity => {
            let ask: inspect_protocol::people::LinkRequest = body_as(&body)?;
            json(
                &crate::people::link(env, &caller, &ask.code, now).await?,
                200,
            )
        }
        Route::UnlinkIdentity { identity } => {
            crate::people::unlink(env, &caller, &identity).await?;
            json(
                &serde_json::json!({ "unlinked": true, "identity": identity }),
                200,
            )
        }
        Route::People => json(&crate::people::list(env).await?, 200),
        Route::Budgets => match req.method() {
            Method::Get => {
                let pairs = query_pairs(&req)?;
                let person = pairs
                    .iter()
                    .find(|(k, _)| k == "person")
                    .map(|(_, v)| v.as_str());
                json(&crate::budgets::list(env, &caller, person, now).await?, 200)
            }
            Method::Put => json(&crate::budgets::put(env, &caller, &body, now).await?, 200),
            _ => {
                crate::budgets::delete(env, &query_pairs(&req)?).await?;
                json(&serde_json::json!({ "deleted": true }), 200)
            }
        },
        Route::Inbox => json(
            &crate::inbox::page(env, &caller, &query_pairs(&req)?).await?,
            200,
        ),
        Route::InboxRead => json(
            &crate::inbox::mark_read(env, &caller, &body, now).await?,
            200,
        ),
        Route::InboxSocket => crate::inbox::socket(env, &caller, req).await,
        Route::NotificationPrefs => match req.method() {
            Method::Put => json(
                &crate::inbox::put_prefs(env, &caller, &body, now).await?,
                200,
            ),
            _ => json(&crate::inbox::prefs_of(env, &actor.user_id).await?, 200),
        },
        Route::PushKey => json(&crate::inbox::push_key(env)?, 200),
        Route::PushSubscriptions => match req.method() {
            Method::Delete => {
                crate::inbox::unsubscribe(env, &caller, &query_pairs(&req)?).await?;
                json(&serde_json::json!({ "removed": true }), 200)
            }
            _ => {
                crate::inbox::subscribe(env, &caller, &body, now).await?;
                json(&serde_json::json!({ "subscribed": true }), 201)
            }
        },
        Route::Usage => {
            let q = crate::usage_query::parse(&query_pairs(&req)?, now)?;
            let report = crate::usage::report(env, &caller, &q).await?;
            if q.csv {
                csv(&report.csv())
            } else {
                json(&report, 200)
            }
        }
        Route::SetRole { user_id } => {
            let ask: inspect_protocol::people::SetRole = body_as(&body)?;
            json(
                &crate::people::set_role(env, &caller, &user_id, ask.role, now).await?,
                200,
            )
        }
        Route::SignOut => signin::sign_out(&req, env, &caller).await,
        Route::CreateSession => {
            let mut create: CreateSessionRequest =
                body_as(if body.is_empty() { b"{}" } else { &body })?;
            // Only the control plane makes child sessions and automations' sessions.
            create.parent_session_id = None;
            create.depth = None;
            create.automation = None;
            let charge = crate::ratelimit::charge_session(env, &actor.user_id, now).await?;
            use inspect_protocol::usage::SessionSource;
            let source = match &caller.via {
                crate::caller::Via::Local | crate::caller::Via::Browser { .. } => {
                    SessionSource::Web
                }
                crate::caller::Via::ApiToken => SessionSource::Api,
                crate::caller::Via::Service { name } => {
                    SessionSource::of_bot_identity(&format!("{name}:"))
                }
            };
            match create_session_with(env, &origin_of(env, &req), actor, create, &[], source).await
            {
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
        Route::Attempts { id, choose: false } => {
            crate::children::attempts(env, &id, actor, &req, &body).await
        }
        Route::Attempts { id, choose: true } => {
            crate::children::choose(env, &id, actor, &req, &body).await
        }
        Route::Automations { op } => {
            if let Some(id) = op.changes() {
                crate::automations::require_owner(env, &caller, id).await?;
            }
            automation_route(env, op, &req, actor, &body, now).await
        }
        Route::LinearStatus => json(&inspect_linear::bot::status(env).await?, 200),
        Route::LinearSettings => json(
            &inspect_linear::bot::put_settings(env, &body, now).await?,
            200,
        ),
        Route::LinearInstall => json(
            &inspect_linear::bot::install(env, &origin_of(env, &req), &actor.user_id).await?,
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
            &crate::images::start_by_hand(env, &body, &origin_of(env, &req), now).await?,
            202,
        ),
        Route::ImageSchedule => json(
            &crate::images::set_schedule(env, &body, &origin_of(env, &req), now).await?,
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
        Route::Health
        | Route::SignIn
        | Route::SignInCallback
        | Route::SignInGoogle
        | Route::SignInGoogleCallback
        | Route::SignInProviders
        | Route::GitHubWebhook
        | Route::ImageBuildReport { .. }
        | Route::AttachmentDownload { .. }
        | Route::ReportMedia { .. }
        | Route::SlackEvents
        | Route::AutomationWebhook { .. }
        | Route::SentryWebhook { .. }
        | Route::SlackInteractions
        | Route::SlackCommands
        | Route::LinearWebhook
        | Route::LinearCallback => Err(ApiError::internal("route served above")),
        Route::Session { .. }
        | Route::AttachmentUpload { .. }
        | Route::Media { .. }
        | Route::PortLink { .. }
        | Route::CloseTerminal { .. } => Err(ApiError::internal("the session Worker's route")),
    }
}

/// A CSV download.
fn csv(text: &str) -> ApiResult<Response> {
    let headers = worker::Headers::new();
    let internal = |e: worker::Error| ApiError::internal(e.to_string());
    headers
        .set("Content-Type", "text/csv; charset=utf-8")
        .map_err(internal)?;
    headers
        .set("Content-Disposition", "attachment; filename=\"usage.csv\"")
        .map_err(internal)?;
    Ok(Response::ok(text).map_err(internal)?.with_headers(headers))
}

fn method_name(req: &Request) -> String {
    req.method().to_string()
}

/// `/automations…`: any caller, as for sessions; changing another person's is an admin's.
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
            &a::create(env, actor, body, &origin_of(env, req), now).await?,
            201,
        ),
        AutomationOp::Preview => {
            let pairs = query_pairs(req)?;
            json(&a::preview(&pairs, now)?, 200)
        }
        AutomationOp::Get { id } => json(&a::get(env, &id).await?, 200),
        AutomationOp::Update { id } => json(
            &a::update(env, &id, body, &origin_of(env, req), now).await?,
            200,
        ),
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
