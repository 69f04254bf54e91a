//! Calls into a session's Durable Object: forwarding a route with the resolved caller (and
//! a body the Worker parsed and wrote anew), a sandbox's own requests, creating a session
//! (its object and its index row), and the session-id check that keeps made-up ids from
//! ever addressing an object.

use crate::auth::session_ids;
use crate::http::{body_as, internal, json, now_ms, origin_of, parse, read_body, ApiResult};
use crate::lookups::Lookups;
use crate::routes::SessionAction;
use crate::{index, repos, settings};
use inspect_durable::headers::{ACTOR_HEADER, ORIGIN_HEADER, SESSION_HEADER, VOUCHED_HEADER};
use inspect_github::app as github_app;
use inspect_protocol::auth::ScmCredentialsRequest;
use inspect_protocol::session::{
    Actor, CreateSessionRequest, PromptRequest, SessionInit, SessionInitAnswer,
};
use inspect_protocol::usage::SessionSource;
use inspect_protocol::{ApiError, ErrorCode};
use worker::{Env, Headers, Method, Request, RequestInit, Response};

/// The sandbox's own credentials from its request (bearer token and `X-Sandbox-ID`), for
/// the object to check.
fn sandbox_credentials(req: &Request) -> ApiResult<Headers> {
    let headers = Headers::new();
    for name in ["Authorization", inspect_protocol::auth::SANDBOX_ID_HEADER] {
        if let Some(v) = req.headers().get(name).ok().flatten() {
            headers.set(name, &v).map_err(internal)?;
        }
    }
    Ok(headers)
}

/// Sends a sandbox's request on to its session's object at `path`, with the sandbox's own
/// credentials for the object to check.
pub(crate) async fn forward_as_sandbox(
    env: &Env,
    id: &str,
    path: &str,
    req: &Request,
    body: Option<&[u8]>,
) -> ApiResult<Response> {
    forward_as_sandbox_typed(env, id, path, req, body, "application/json").await
}

/// [`forward_as_sandbox`] with a body of another type (a picture).
pub(crate) async fn forward_as_sandbox_typed(
    env: &Env,
    id: &str,
    path: &str,
    req: &Request,
    body: Option<&[u8]>,
    content_type: &str,
) -> ApiResult<Response> {
    let headers = sandbox_credentials(req)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post);
    if let Some(body) = body {
        headers
            .set("Content-Type", content_type)
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

/// `POST /sessions/:id/scm-credentials`: the session's object vouches for the sandbox's
/// token and names its GitHub repositories, then the Worker hands out an installation
/// token narrowed to them.
pub(crate) async fn scm_credentials(env: &Env, id: &str, mut req: Request) -> ApiResult<Response> {
    let body = read_body(&mut req).await?;
    let ask: ScmCredentialsRequest = if body.is_empty() {
        ScmCredentialsRequest::default()
    } else {
        body_as(&body)?
    };
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
    let creds = github_app::git_token(
        env,
        &scope.repositories,
        ask.refused.as_deref(),
        now_ms() as i64,
    )
    .await?;
    let resp = json(&creds, 200)?;
    let _ = resp.headers().set("Cache-Control", "no-store");
    Ok(resp)
}

/// `POST /sessions/:id/pull-requests`: from the session's sandbox (its token and id); the
/// object checks them and does the rest.
pub(crate) async fn pull_requests(env: &Env, id: &str, mut req: Request) -> ApiResult<Response> {
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

/// A sandbox's body for `action`, parsed here once as `T` (at most `limit` bytes) and sent
/// on written anew from its type; the object checks the sandbox's token and id.
async fn forward_typed<T: serde::de::DeserializeOwned + serde::Serialize>(
    env: &Env,
    id: &str,
    action: SessionAction,
    mut req: Request,
    limit: usize,
) -> ApiResult<Response> {
    let body = crate::http::read_body_up_to(&mut req, limit).await?;
    let typed: T = body_as(&body)?;
    let body = serde_json::to_vec(&typed).map_err(|e| ApiError::internal(e.to_string()))?;
    forward_as_sandbox(env, id, action.object_path(), &req, Some(&body)).await
}

/// `PUT /sessions/:id/changes`: the sandbox's capture of the workspace (at most 12 MiB).
pub(crate) async fn report_changes(env: &Env, id: &str, req: Request) -> ApiResult<Response> {
    use inspect_protocol::changes::{ChangesReport, MAX_REPORT_BYTES};
    forward_typed::<ChangesReport>(env, id, SessionAction::ReportChanges, req, MAX_REPORT_BYTES)
        .await
}

/// `POST /sessions/:id/reviews`: the agent's review from the session's sandbox (at most
/// 1 MiB); the object also checks which pull request the running prompt may review.
pub(crate) async fn reviews(env: &Env, id: &str, req: Request) -> ApiResult<Response> {
    use inspect_protocol::scm::ReviewRequest;
    forward_typed::<ReviewRequest>(env, id, SessionAction::Reviews, req, 1 << 20).await
}

/// `POST /sessions/:id/media?type=…&caption=…`: a picture from the session's sandbox (the
/// agent's screenshot), at most 5 MiB of one of the kept types, checked here and in the
/// object, which checks the sandbox's token and id.
pub(crate) async fn report_media(env: &Env, id: &str, mut req: Request) -> ApiResult<Response> {
    use inspect_protocol::media::{check, MAX_MEDIA_BYTES};
    let pairs = crate::http::query_pairs(&req)?;
    let param = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let (mime, caption) = (param("type"), param("caption"));
    let body = crate::http::read_body_up_to(&mut req, MAX_MEDIA_BYTES).await?;
    check(&mime, &caption, body.len()).map_err(ApiError::bad_request)?;
    let query: String = worker::url::form_urlencoded::Serializer::new(String::new())
        .append_pair("type", &mime)
        .append_pair("caption", &caption)
        .finish();
    forward_as_sandbox_typed(
        env,
        id,
        &format!("/media?{query}"),
        &req,
        Some(&body),
        &mime,
    )
    .await
}

/// `GET /sessions/:id/editor/open?token=…` (and `…/desktop/open`): a person's browser
/// opens their link to the editor or the desktop; the object checks it (theirs, made for
/// this, unused, unexpired, the sandbox running) and names the gate, where the browser is
/// sent. The object answers with the link rather than a redirect, which this fetch would
/// follow itself.
pub(crate) async fn open_service(
    env: &Env,
    id: &str,
    action: SessionAction,
    req: Request,
    actor: &Actor,
) -> ApiResult<Response> {
    let resp = forward(env, id, action, req, Some(actor), Vec::new(), false).await?;
    let text = object_answer(resp, 200).await?;
    let link: inspect_protocol::session::PortLink = parse(&text)?;
    let headers = Headers::new();
    headers.set("Location", &link.url).map_err(internal)?;
    headers.set("Cache-Control", "no-store").map_err(internal)?;
    headers
        .set("Referrer-Policy", "no-referrer")
        .map_err(internal)?;
    Ok(Response::empty()
        .map_err(internal)?
        .with_status(302)
        .with_headers(headers))
}

/// The body a session's object gets for `action`: parsed here, once, with the Worker's
/// limits, and written anew from its type, so the object never reads what the Worker did
/// not. Where a prompt's outcome is reported (`callbackContext`) is the control plane's or
/// a signed service's to say (`vouched`), never a person's. Actions that take no body get
/// none.
pub(crate) fn typed_session_body(
    action: SessionAction,
    body: &[u8],
    vouched: bool,
) -> ApiResult<Vec<u8>> {
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
        SessionAction::OpenTerminal => {
            let open: inspect_protocol::terminal::OpenTerminalRequest = body_as(body)?;
            write(serde_json::to_vec(&open))
        }
        SessionAction::OpenPort => {
            let open: inspect_protocol::session::OpenPortRequest = body_as(body)?;
            write(serde_json::to_vec(&open))
        }
        SessionAction::Desktop => {
            // No body: to watch.
            let ask: inspect_protocol::desktop::DesktopRequest = match body.is_empty() {
                true => Default::default(),
                false => body_as(body)?,
            };
            write(serde_json::to_vec(&ask))
        }
        _ => Ok(Vec::new()),
    }
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

/// The key session ids are tagged with, from the deployment's secrets key.
pub(crate) fn session_id_key(env: &Env) -> Option<[u8; 32]> {
    crate::db::setting(env, inspect_secrets::KEY_VAR).map(|k| session_ids::id_key(&k))
}

pub(crate) fn new_session_id(env: &Env) -> ApiResult<String> {
    let mut bytes = [0u8; session_ids::RANDOM_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(session_ids::mint(session_id_key(env).as_ref(), &bytes))
}

/// Whether `route` is a sandbox's own call (its credentials are checked by its object);
/// for such a call the session is checked to exist here, before anything else: a made-up
/// id never reaches the runtime (it would make an object).
pub(crate) async fn sandbox_call(
    route: &crate::routes::Route,
    req: &Request,
    env: &Env,
) -> ApiResult<bool> {
    let names_a_sandbox = req
        .headers()
        .has(inspect_protocol::auth::SANDBOX_ID_HEADER)
        .unwrap_or(false);
    let sandbox_route = route.is_sandbox_call(names_a_sandbox);
    if sandbox_route {
        if let Some(id) = route.session_id() {
            known_session(env, id).await?;
        }
    }
    Ok(sandbox_route)
}

/// Who is calling a person's route, and then whether the session it names exists (so a
/// stranger learns nothing about which sessions do).
pub(crate) async fn person_call(
    route: &crate::routes::Route,
    sandbox_route: bool,
    req: &Request,
    body: &[u8],
    env: &Env,
) -> ApiResult<crate::caller::Caller> {
    let caller = crate::caller::resolve(req, body, env).await?;
    if !sandbox_route {
        if let Some(id) = route.session_id() {
            known_session(env, id).await?;
        }
    }
    Ok(caller)
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
pub(crate) async fn attachment_for_sandbox(
    env: &Env,
    id: &str,
    attachment: &str,
    req: &Request,
) -> ApiResult<Response> {
    let headers = sandbox_credentials(req)?;
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
pub(crate) async fn forward(
    env: &Env,
    id: &str,
    action: SessionAction,
    req: Request,
    actor: Option<&Actor>,
    body: Vec<u8>,
    vouched: bool,
) -> ApiResult<Response> {
    if action == SessionAction::Socket {
        let stub = session_stub(env, id)?;
        let origin = origin_of(env, &req);
        let query = req
            .url()
            .ok()
            .and_then(|u| u.query().map(|q| format!("?{q}")))
            .unwrap_or_default();
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
    forward_at(env, id, action.object_path(), req, actor, body, vouched).await
}

/// [`forward`] to a path of the object that names something (`/terminals/<id>`).
pub(crate) async fn forward_at(
    env: &Env,
    id: &str,
    path: &str,
    req: Request,
    actor: Option<&Actor>,
    body: Vec<u8>,
    vouched: bool,
) -> ApiResult<Response> {
    let stub = session_stub(env, id)?;
    let origin = origin_of(env, &req);
    let query = req
        .url()
        .ok()
        .and_then(|u| u.query().map(|q| format!("?{q}")))
        .unwrap_or_default();
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
    let url = format!("https://session{path}{query}");
    let inner = Request::new_with_init(&url, &init).map_err(internal)?;
    stub.fetch_with_request(inner)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))
}

/// The stub of a session's Durable Object (named by the session id).
pub(crate) fn session_stub(env: &Env, id: &str) -> ApiResult<worker::Stub> {
    env.durable_object("SESSION")
        .and_then(|ns| ns.get_by_name(id))
        .map_err(internal)
}

pub(crate) fn js_sys_bytes(bytes: &[u8]) -> wasm_bindgen::JsValue {
    worker::js_sys::Uint8Array::from(bytes).into()
}

/// Creates a session for `actor` (the REST route and the bots): resolves its
/// repositories from the registry or the GitHub App, makes the object, indexes it.
pub(crate) async fn create_session(
    env: &Env,
    origin: &str,
    actor: &Actor,
    create: CreateSessionRequest,
    source: SessionSource,
) -> ApiResult<inspect_protocol::session::CreateSessionResponse> {
    create_session_with(env, origin, actor, create, &[], source).await
}

/// [`create_session`], with branches that replace an environment's for some of its
/// repositories (the GitHub bot works on a pull request's branch inside the repository's
/// default environment).
pub(crate) async fn create_session_with(
    env: &Env,
    origin: &str,
    actor: &Actor,
    create: CreateSessionRequest,
    branch_overrides: &[inspect_protocol::session::RepositoryRef],
    source: SessionSource,
) -> ApiResult<inspect_protocol::session::CreateSessionResponse> {
    let lookups = Lookups::default();
    let (created, _) = create_session_among(
        env,
        origin,
        actor,
        (create, None),
        branch_overrides,
        (source, None),
        &lookups,
    )
    .await?;
    Ok(created)
}

/// [`create_session_with`], reading the deployment through `lookups` (shared by sessions
/// created together), and giving the new object its first prompt in the same request when
/// there is one (its author's budgets checked already). With the session made, why that
/// prompt was refused, if it was.
pub(crate) async fn create_session_among(
    env: &Env,
    origin: &str,
    actor: &Actor,
    (mut create, prompt): (CreateSessionRequest, Option<PromptRequest>),
    branch_overrides: &[inspect_protocol::session::RepositoryRef],
    // How it came to be, and what else is written with its index row.
    (source, also): (SessionSource, Option<index::AlsoIndexed<'_>>),
    lookups: &Lookups,
) -> ApiResult<(
    inspect_protocol::session::CreateSessionResponse,
    Option<ApiError>,
)> {
    create.environment_name = None;
    create.catalog = None;
    // Where the sandbox may send traffic is the environment's to say, never a request's.
    create.egress = None;
    let repositories = match &create.environment_id {
        Some(environment) => {
            if create.repositories.is_some() || create.repo_owner.is_some() {
                return Err(ApiError::bad_request(
                    "name an environment or repositories, not both",
                ));
            }
            // The session keeps its own copy of the environment as it is now.
            let found = settings::get_environment(env, environment).await?;
            create.environment_name = Some(found.name);
            create.egress = found.egress;
            if create.model.is_none() {
                create.model = found.default_model;
            }
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
    let asked = format!("repositories {repositories:?}");
    let repositories = lookups
        .get(asked, || async move {
            let mut repositories = repositories;
            repos::resolve(env, &mut repositories).await?;
            Ok(repositories)
        })
        .await?;
    // A session that names no model, no ports or no agent gets its primary repository's
    // defaults.
    let asks_ports = create
        .sandbox
        .as_ref()
        .is_some_and(|s| !s.tunnel_ports.is_empty());
    if create.model.is_none() || !asks_ports || create.agent.is_none() {
        if let Some(primary) = repositories.first() {
            let key = format!("repo settings {}/{}", primary.owner, primary.name);
            let settings = lookups
                .get(key, || {
                    inspect_github::api::repo_settings(env, &primary.owner, &primary.name)
                })
                .await?;
            if create.model.is_none() {
                create.model = settings.default_model;
            }
            if create.agent.is_none() {
                create.agent = settings.default_agent;
            }
            if !asks_ports && !settings.tunnel_ports.is_empty() {
                create
                    .sandbox
                    .get_or_insert_with(Default::default)
                    .tunnel_ports = settings.tunnel_ports;
            }
        }
    }
    // The brokered model grants that apply: the control plane's to say, never a request's.
    let repository_names: Vec<(String, String)> = repositories
        .iter()
        .map(|r| (r.owner.clone(), r.name.clone()))
        .collect();
    let (environment, agent) = (
        create.environment_id.as_deref(),
        create.agent.unwrap_or_default(),
    );
    let key = format!("grants {repository_names:?} {environment:?} {agent:?}");
    create.managed_grants = Some(
        lookups
            .get(key, || {
                inspect_models::grant_store::for_session(env, &repository_names, environment, agent)
            })
            .await?,
    );
    // What the deployment offers now, read at once: its models, the managed skills and the
    // MCP servers that apply.
    let environment = create.environment_id.clone();
    let skill_choice = create.skills.clone().unwrap_or_default();
    // A profile is the creator's own: its skills, of those that apply.
    let profile = match &skill_choice {
        inspect_protocol::skills::SkillChoice::Profile(name) => {
            Some(inspect_skills::profiles::get(env, &actor.user_id, name).await?)
        }
        _ => None,
    };
    let applies = format!("{repositories:?} {environment:?}");
    let applicable_skills = || {
        lookups.get(format!("skills {applies}"), || {
            inspect_skills::store::applicable(env, &repositories, environment.as_deref())
        })
    };
    let (models, skills, mcp_servers) = futures::join!(
        lookups.get("models".to_owned(), || inspect_models::store::catalog(env)),
        async {
            match skill_choice {
                inspect_protocol::skills::SkillChoice::All => applicable_skills().await,
                inspect_protocol::skills::SkillChoice::None => Ok(Vec::new()),
                inspect_protocol::skills::SkillChoice::Profile(_) => {
                    let wanted = profile.map(|p| p.skills).unwrap_or_default();
                    applicable_skills().await.map(|all| {
                        all.into_iter()
                            .filter(|s| wanted.contains(&s.name))
                            .collect()
                    })
                }
            }
        },
        lookups.get(format!("mcp {applies}"), || {
            inspect_mcp::store::for_session(env, &repositories, environment.as_deref())
        }),
    );
    // The model and effort must be ones the deployment offers; none named: its default.
    let models = models?;
    create.catalog = Some(models.clone());
    match &create.model {
        Some(model) => {
            inspect_models::check_model(&models, model).map_err(ApiError::bad_request)?
        }
        None => create.model = models.default_model.clone(),
    }
    if let Some(effort) = &create.reasoning_effort {
        inspect_models::check_effort(&models, create.model.as_deref(), effort)
            .map_err(ApiError::bad_request)?;
    }
    // Its model's vendor must be reachable from this session's sandbox: a key that flows
    // into it, or a grant it is given (the secrets are read only for a vendor's model).
    if let Some(model) = create
        .model
        .as_deref()
        .filter(|m| inspect_models::needs_reach(m))
    {
        let environment = create.environment_id.as_deref();
        let key = format!("secret names {environment:?} {repository_names:?}");
        let mut names = lookups
            .get(key, || {
                inspect_durable::sealed::secret_names(env, environment, &repository_names)
            })
            .await?;
        names.extend(inspect_models::store::sandbox_keys(env));
        let granted: Vec<&str> = create
            .managed_grants
            .iter()
            .flatten()
            .map(|g| g.provider.as_str())
            .collect();
        let reach = inspect_models::Reach {
            secret_names: &names,
            grant_providers: &granted,
        };
        inspect_models::check_reach(model, &reach).map_err(ApiError::bad_request)?;
    }
    // The managed skills it takes are pinned now, at their current revisions, and the MCP
    // servers are given as configured now.
    create.pinned_skills = Some(skills?);
    create.mcp_servers = Some(mcp_servers?);
    create.repositories = Some(repositories);
    create.repo_owner = None;
    create.repo_name = None;
    create.branch = None;
    let id = new_session_id(env)?;
    // The request is checked here as the object will check it, and the session indexed
    // from the state it will store while the object stores it (one round trip less than
    // one after the other). It is indexed before answering, so the creator's next list
    // shows it; if the object fails, the index forgets it again.
    let (state, _) =
        inspect_durable::engine::state::new_session(&id, &create, actor, now_ms() as i64)?;
    let init = SessionInit {
        session: create,
        prompt,
    };
    let body = serde_json::to_vec(&init).map_err(|e| ApiError::internal(e.to_string()))?;
    let (stored, indexed) = futures::join!(
        async {
            let resp =
                call_object(env, &id, Method::Post, "/init", origin, Some(actor), &body).await?;
            let answer: SessionInitAnswer = parse(&object_answer(resp, 201).await?)?;
            Ok::<_, ApiError>(answer.prompt_refused)
        },
        index::insert(env, &state, actor, (source, also, &lookups.index_rows)),
    );
    let prompt_refused = match stored {
        Ok(refused) => refused,
        Err(e) => {
            if indexed.is_ok() {
                let _ = index::remove(env, &id).await;
            }
            return Err(e);
        }
    };
    if let Err(first) = indexed {
        // The object stands (with its prompt, it is starting): its row is written once
        // more on its own (the batch is idempotent) before the session is given up, and a
        // session given up is deleted, never left running where no list shows it.
        let alone = crate::lookups::Grouped::default();
        if index::insert(env, &state, actor, (source, also, &alone))
            .await
            .is_err()
        {
            let _ = call_object(env, &id, Method::Delete, "/", origin, Some(actor), &[]).await;
            // A row written by a batch whose answer was lost goes with it.
            let _ = index::remove(env, &id).await;
            return Err(first);
        }
    }
    let created = inspect_protocol::session::CreateSessionResponse {
        session_id: state.id,
        status: state.status,
    };
    Ok((created, prompt_refused))
}

/// Sends a prompt to a session as `actor` (what a bot, a tracker or an automation asks).
pub(crate) async fn prompt(
    env: &Env,
    session: &str,
    origin: &str,
    actor: &Actor,
    prompt: &inspect_protocol::session::PromptRequest,
) -> Result<(), ApiError> {
    let body = serde_json::to_vec(prompt).map_err(|e| ApiError::internal(e.to_string()))?;
    let resp = call_object(
        env,
        session,
        Method::Post,
        "/prompt",
        origin,
        Some(actor),
        &body,
    )
    .await?;
    object_answer(resp, 200).await.map(drop)
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
