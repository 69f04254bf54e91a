//! The session Worker's entry: the front door every request reaches first. It serves a
//! session's own traffic (the object's routes, the client and sandbox sockets, the
//! sandbox's calls, attachments and pictures) and the web app; every other route goes to
//! the control plane Worker over the `PLANE` service binding, untouched. It only
//! dispatches, and no module imports it.

use crate::caller;
use crate::http::{
    body_as, error_response, json, read_body, read_body_up_to, ApiResult,
    MAX_ATTACHMENT_UPLOAD_BYTES,
};
use crate::index;
use crate::objects::{
    attachment_for_sandbox, forward, forward_as_sandbox, pull_requests, store_attachment,
    typed_session_body,
};
use crate::routes::{match_route, not_found, Route, Served, SessionAction};
use inspect_protocol::plane::PLANE_BINDING;
use inspect_protocol::ApiError;
use worker::{event, Context, Env, Method, Request, Response, Result};

/// The cron triggers (this script's configuration holds them): their work is the control
/// plane's, asked over the binding and waited for.
#[event(scheduled)]
async fn scheduled(event: worker::ScheduledEvent, env: Env, _ctx: worker::ScheduleContext) {
    let asked = inspect_protocol::plane::PlaneCall::Scheduled {
        cron: event.cron(),
        at: event.schedule() as i64,
    };
    if let Err(e) = inspect_runtime::binding::call_plane(&env, &asked).await {
        inspect_runtime::log::emit(
            inspect_runtime::log::LogLine::error("cron", "plane_unreachable")
                .with("cron", event.cron())
                .detail(e.message),
        );
    }
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let method = req.method().to_string();
    let path = req.path();
    // A browser navigating to a page (`/sessions/abc`) gets the web app, even where the
    // same path is also an API route; the app then calls the API with fetch.
    if is_page_navigation(&req) && !crate::routes::is_page_route(&path) {
        return serve_asset_or_404(req, &env, &method, &path).await;
    }
    let outcome = match match_route(&method, &path) {
        Some(Ok(route)) if route.served_by() == Served::Session => serve(route, req, &env).await,
        Some(Ok(_)) => return env.service(PLANE_BINDING)?.fetch_request(req).await,
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

async fn serve(route: Route, mut req: Request, env: &Env) -> ApiResult<Response> {
    // A sandbox's own call is checked here; a person's once the caller is known.
    let sandbox_route = crate::objects::sandbox_call(&route, &req, env).await?;
    // Routes that carry their own credentials.
    match &route {
        Route::Session {
            id,
            action: SessionAction::Socket,
        } => {
            // The socket's `subscribe` token (or a sandbox's bearer token) says who it is.
            return forward(env, id, SessionAction::Socket, req, None, Vec::new(), false).await;
        }
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
        _ => {}
    }
    let body = if matches!(route, Route::AttachmentUpload { .. }) {
        read_body_up_to(&mut req, MAX_ATTACHMENT_UPLOAD_BYTES).await?
    } else if matches!(req.method(), Method::Post | Method::Put | Method::Patch) {
        read_body(&mut req).await?
    } else {
        Vec::new()
    };
    let caller = crate::objects::person_call(&route, sandbox_route, &req, &body, env).await?;
    let actor = &caller.actor;
    match route {
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
            action: action @ (SessionAction::OpenEditor | SessionAction::OpenDesktop),
        } => crate::objects::open_service(env, &id, action, req, actor).await,
        Route::Session { id, action } => {
            let vouched = matches!(caller.via, caller::Via::Service { .. });
            let body = typed_session_body(action, &body, vouched)?;
            let resp = forward(env, &id, action, req, Some(actor), body, vouched).await?;
            if action == SessionAction::Delete && resp.status_code() == 200 {
                index::remove(env, &id).await?;
            }
            Ok(resp)
        }
        _ => Err(ApiError::internal(
            "a control plane route reached the session Worker",
        )),
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
