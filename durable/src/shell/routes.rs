//! The session's REST surface, as the Worker forwards it.

use super::*;
use crate::engine::editor::Service;

pub(super) fn reply<T: Serialize>(r: std::result::Result<T, ApiError>) -> Result<Response> {
    match r {
        Ok(v) => json_ok(&v),
        Err(e) => json_error(&e),
    }
}

pub(super) async fn body_json<T: serde::de::DeserializeOwned>(
    req: &mut Request,
) -> std::result::Result<T, ApiError> {
    let text = body_text(req).await?;
    serde_json::from_str(&text)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
}

/// The body as text. Not generic: the read is in the wasm once, not once per body type.
async fn body_text(req: &mut Request) -> std::result::Result<String, ApiError> {
    req.text()
        .await
        .map_err(|e| ApiError::bad_request(format!("unreadable body: {e}")))
}

pub(super) fn actor_of(req: &Request) -> std::result::Result<Actor, ApiError> {
    let raw = req
        .headers()
        .get(ACTOR_HEADER)
        .ok()
        .flatten()
        .ok_or_else(|| ApiError::unauthorized("no caller"))?;
    serde_json::from_str(&raw).map_err(|_| ApiError::unauthorized("malformed caller"))
}

pub(super) fn query_param(req: &Request, name: &str) -> Option<String> {
    let url = req.url().ok()?;
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

impl SessionDO {
    pub(super) async fn route(&self, mut req: Request) -> Result<Response> {
        let path = req.path();
        let action = path.trim_matches('/').to_owned();
        let method = req.method();
        let now = now_ms();
        let engine = self.engine();
        if self.schema.get() == SchemaState::Ready {
            self.remember_origin(&req);
        } else if !matches!(action.as_str(), "init" | "internal/health") {
            return json_error(&ApiError::not_found("session not found"));
        }
        match (method, action.as_str()) {
            (Method::Get, "internal/health") => match self.probe() {
                Ok(p) => json_ok(&p),
                Err(e) => json_error(&ApiError::internal(e.to_string())),
            },
            (Method::Get, "ws") => {
                let upgrade = req
                    .headers()
                    .get("Upgrade")
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                if !upgrade.eq_ignore_ascii_case("websocket") {
                    return json_error(&ApiError::new(
                        inspect_protocol::ErrorCode::BadRequest,
                        "expected a WebSocket upgrade",
                    ));
                }
                if query_param(&req, "type").as_deref() == Some("sandbox") {
                    return self.accept_sandbox_socket(&req).await;
                }
                let r = self.accept_client_socket();
                self.schedule().await;
                r
            }
            // The Worker asks before brokering git credentials: is this the session's
            // live sandbox, and which of its repositories are on GitHub (the token is
            // narrowed to them; local repositories need none)?
            (Method::Post, "scm-credentials") => match self.refuse_sandbox(&req) {
                Some(refusal) => refusal,
                None => reply(engine.scm_scope()),
            },
            // The sandbox asks for its ports' URLs (providers that write no `.tunnels.env`).
            (Method::Post, "sandbox-tunnel-urls") => match self.refuse_sandbox(&req) {
                Some(refusal) => refusal,
                None => reply(
                    engine
                        .tunnel_urls()
                        .map(|tunnel_urls| inspect_protocol::session::TunnelUrls { tunnel_urls }),
                ),
            },
            // The sandbox fetches the skill revisions its session pinned.
            (Method::Post, "sandbox-skills") => {
                if let Some(refusal) = self.refuse_sandbox(&req) {
                    return refusal;
                }
                let result = async {
                    let pinned = engine.state()?.skills;
                    let skills = inspect_skills::store::bundles(&self.env, &pinned).await?;
                    Ok::<_, ApiError>(inspect_protocol::skills::SkillBundles { skills })
                }
                .await;
                reply(result)
            }
            // A brokered grant's short-lived token, for this session's sandbox only, and
            // only a grant the session was given at its creation.
            (Method::Post, "sandbox-model-token") => {
                if let Some(refusal) = self.refuse_sandbox(&req) {
                    return refusal;
                }
                let result = async {
                    let ask: inspect_protocol::models::ModelTokenRequest =
                        body_json(&mut req).await?;
                    let given = engine.sandbox_settings()?.managed_grants;
                    if !given.iter().any(|g| g.id == ask.grant_id) {
                        return Err(ApiError::new(
                            inspect_protocol::ErrorCode::Forbidden,
                            "this session was not given that grant",
                        ));
                    }
                    inspect_models::grant_store::access_token(&self.env, &ask.grant_id, now).await
                }
                .await;
                reply(result)
            }
            // The sandbox's capture of the workspace's change, after a turn.
            (Method::Post, "changes") => {
                if let Some(refusal) = self.refuse_sandbox(&req) {
                    return refusal;
                }
                let result = async {
                    let body: inspect_protocol::changes::ChangesReport =
                        body_json(&mut req).await?;
                    engine.record_changes(&body, now)
                }
                .await;
                match result {
                    Ok(fx) => {
                        self.apply(fx);
                        json_ok(&serde_json::json!({ "ok": true }))
                    }
                    Err(e) => json_error(&e),
                }
            }
            // The agent asks for a pull request through its sandbox.
            (Method::Post, "pull-requests") => {
                if let Some(refusal) = self.refuse_sandbox(&req) {
                    return refusal;
                }
                let result = async {
                    let body: inspect_protocol::scm::PullRequestRequest =
                        body_json(&mut req).await?;
                    self.open_pull_requests(body).await
                }
                .await;
                reply(result)
            }
            // The agent submits its review of the pull request its prompt came from.
            (Method::Post, "reviews") => {
                if let Some(refusal) = self.refuse_sandbox(&req) {
                    return refusal;
                }
                let result = async {
                    let body: inspect_protocol::scm::ReviewRequest = body_json(&mut req).await?;
                    self.submit_review(body).await
                }
                .await;
                reply(result)
            }
            // Child sessions: the Worker asks the parent before and after making one.
            (Method::Post, "children/plan") => {
                if let Some(refusal) = self.refuse_sandbox(&req) {
                    return refusal;
                }
                let result = async {
                    let body: inspect_protocol::session::SpawnChildRequest =
                        body_json(&mut req).await?;
                    engine.reserve_child(&body, now)
                }
                .await;
                reply(result)
            }
            (Method::Post, "children/record") => {
                #[derive(Deserialize)]
                #[serde(rename_all = "camelCase")]
                struct Record {
                    session_id: String,
                    title: String,
                    #[serde(default)]
                    reservation: Option<String>,
                }
                let result = async {
                    let body: Record = body_json(&mut req).await?;
                    engine.record_child(
                        &body.session_id,
                        &body.title,
                        body.reservation.as_deref(),
                        now,
                    )?;
                    Ok::<_, ApiError>(serde_json::json!({ "recorded": true }))
                }
                .await;
                reply(result)
            }
            (Method::Post, "children/release") => {
                let slot = query_param(&req, "reservation").unwrap_or_default();
                reply(
                    engine
                        .release_child(&slot)
                        .map(|_| serde_json::json!({ "released": true })),
                )
            }
            // The parent's sandbox asks about one of its children: whose is it, and as whom
            // to act on it.
            (Method::Post, "children/check") => {
                if let Some(refusal) = self.refuse_sandbox(&req) {
                    return refusal;
                }
                let child = query_param(&req, "child").unwrap_or_default();
                let result = engine.children().and_then(|children| {
                    if !children.contains(&child) {
                        return Err(ApiError::not_found(format!(
                            "{child} is not a child of this session"
                        )));
                    }
                    engine
                        .child_plan(&inspect_protocol::session::SpawnChildRequest {
                            prompt: "check".into(),
                            ..Default::default()
                        })
                        .or_else(|_| {
                            // Past the limits a child may still be asked about.
                            let user = engine.pr_user()?;
                            Ok(inspect_protocol::session::ChildPlan {
                                actor: Actor {
                                    user_id: user.clone(),
                                    name: user,
                                    email: None,
                                    avatar: None,
                                },
                                repositories: vec![],
                                depth: 0,
                                title: String::new(),
                                model: None,
                                children: children.clone(),
                                reservation: None,
                                agent: None,
                            })
                        })
                });
                reply(result)
            }
            (Method::Get, "children") => reply(engine.children()),
            // "Try N ways" (people, through the Worker): a slot for each attempt, then,
            // once they are made, the groups for the page and the one chosen.
            (Method::Post, "attempts/plan") => {
                let result = async {
                    let actor = actor_of(&req)?;
                    let body: inspect_protocol::session::AttemptsRequest =
                        body_json(&mut req).await?;
                    engine.reserve_attempts(&body, &actor, now)
                }
                .await;
                reply(result)
            }
            (Method::Get, "attempts") => reply(engine.attempt_groups()),
            (Method::Post, "attempts/choose") => {
                let result = async {
                    let body: inspect_protocol::session::ChooseAttempt =
                        body_json(&mut req).await?;
                    engine.choose_attempt(&body.session_id)
                }
                .await;
                reply(result)
            }
            // The chosen attempt opens its pull request (asked by the Worker for the
            // person who chose it; the agent's own asks come through `pull-requests`).
            (Method::Post, "attempt-pull-request") => {
                let result = async {
                    actor_of(&req)?;
                    let body: inspect_protocol::scm::PullRequestRequest =
                        body_json(&mut req).await?;
                    self.open_pull_requests(body).await
                }
                .await;
                reply(result)
            }
            // A file for the session's prompts; the body is the file.
            (Method::Post, "attachments") => {
                let result = async {
                    actor_of(&req)?;
                    let name = query_param(&req, "name").unwrap_or_else(|| "attachment".into());
                    let mime = req
                        .headers()
                        .get("Content-Type")
                        .ok()
                        .flatten()
                        .unwrap_or_default();
                    let bytes = req
                        .bytes()
                        .await
                        .map_err(|e| ApiError::bad_request(format!("unreadable body: {e}")))?;
                    engine.store_attachment(&name, &mime, &bytes, now)
                }
                .await;
                match result {
                    Ok(a) => json_ok(&a).map(|r| r.with_status(201)),
                    Err(e) => json_error(&e),
                }
            }
            // The sandbox sends a picture the agent took.
            (Method::Post, "media") => {
                if let Some(refusal) = self.refuse_sandbox(&req) {
                    return refusal;
                }
                let result = async {
                    let mime = query_param(&req, "type").unwrap_or_default();
                    let caption = query_param(&req, "caption").unwrap_or_default();
                    let bytes = req
                        .bytes()
                        .await
                        .map_err(|e| ApiError::bad_request(format!("unreadable body: {e}")))?;
                    engine.record_media(&mime, &caption, &bytes, now)
                }
                .await;
                match result {
                    Ok((artifact, fx)) => {
                        self.apply(fx);
                        self.share_media(&artifact);
                        json_ok(&artifact).map(|r| r.with_status(201))
                    }
                    Err(e) => json_error(&e),
                }
            }
            // The session's people see a picture the agent took.
            (Method::Get, m) if m.starts_with("media/") => {
                let id = &m["media/".len()..];
                match engine.media(id) {
                    Ok(Some((mime, bytes))) => {
                        let resp = Response::from_bytes(bytes)?;
                        let h = resp.headers();
                        let _ = h.set("Content-Type", &mime);
                        let _ = h.set("X-Content-Type-Options", "nosniff");
                        let _ = h.set("Content-Security-Policy", "default-src 'none'; sandbox");
                        let _ = h.set("Cache-Control", "private, max-age=3600");
                        Ok(resp)
                    }
                    Ok(None) => json_error(&ApiError::not_found(format!("no picture {id}"))),
                    Err(e) => json_error(&e),
                }
            }
            // The sandbox fetches a prompt's file.
            (Method::Get, a) if a.starts_with("attachments/") => {
                if let Some(refusal) = self.refuse_sandbox(&req) {
                    return refusal;
                }
                let id = a.trim_start_matches("attachments/");
                match engine.attachment(id) {
                    Ok(Some((_, mime, bytes))) => {
                        let resp = Response::from_bytes(bytes)?;
                        let _ = resp.headers().set("Content-Type", &mime);
                        Ok(resp)
                    }
                    Ok(None) => json_error(&ApiError::not_found(format!("no attachment {id}"))),
                    Err(e) => json_error(&e),
                }
            }
            (Method::Post, "init") => {
                let result = async {
                    let actor = actor_of(&req)?;
                    let sid = req
                        .headers()
                        .get(SESSION_HEADER)
                        .ok()
                        .flatten()
                        .ok_or_else(|| ApiError::bad_request("no session id"))?;
                    let SessionInit {
                        session: mut body,
                        prompt,
                    } = body_json(&mut req).await?;
                    self.ensure_schema()
                        .map_err(|e| ApiError::internal(e.to_string()))?;
                    let state = engine.create(&sid, &body, &actor, now)?;
                    // The catalog the control plane just read is the one the first
                    // prompt and spawn are checked against.
                    if let Some(catalog) = body.catalog.take() {
                        self.keep_models(now, catalog);
                    }
                    Ok::<_, ApiError>((state, actor, prompt))
                }
                .await;
                match result {
                    Ok((state, actor, prompt)) => {
                        *self.known_id.borrow_mut() = Some(state.id.clone());
                        // The row exists now: keep the origin the creator used, and the
                        // deployment's idle timeout.
                        self.remember_origin(&req);
                        let idle = self
                            .env
                            .var("SANDBOX_IDLE_TIMEOUT_SECONDS")
                            .ok()
                            .and_then(|v| v.to_string().parse::<i64>().ok())
                            .filter(|s| *s > 0)
                            .map(|s| s * 1000);
                        let ready = self
                            .provider()
                            .map_or(ProviderKind::Local, |p| p.kind())
                            .ready_timeout_seconds(
                                inspect_runtime::setting(
                                    &self.env,
                                    "SANDBOX_READY_TIMEOUT_SECONDS",
                                )
                                .as_deref(),
                            );
                        let rate = self
                            .env
                            .var("RATE_LIMIT_PROMPTS_PER_MINUTE")
                            .ok()
                            .and_then(|v| v.to_string().parse::<u32>().ok());
                        let _ = engine.set_limits(&SessionLimits {
                            idle_timeout_ms: idle,
                            ready_timeout_ms: Some(ready * 1000),
                            prompts_per_minute: rate,
                        });
                        // The first prompt, in the same turn: the control plane wrote it
                        // (vouched) and checked its author's budgets before asking.
                        let prompt_refused = match prompt {
                            Some(prompt) => self.take_prompt(&req, &actor, prompt, now).await.err(),
                            None => None,
                        };
                        // The whole state: the Worker indexes the session from it.
                        let answer = SessionInitAnswer {
                            state,
                            prompt_refused,
                        };
                        Ok(json_ok(&answer)?.with_status(201))
                    }
                    Err(e) => json_error(&e),
                }
            }
            (Method::Get, "") => reply(engine.state()),
            (Method::Delete, "") => {
                if let Err(e) = self.session_id() {
                    return json_error(&e);
                }
                // Its sandboxes, their directories and its snapshots go first: a provider
                // that cannot say so keeps the session (try again) rather than orphan them.
                if let Some(provider) = self.provider() {
                    let sid = self.session_id().unwrap_or_default();
                    let known = engine.vendor_sandboxes().unwrap_or_default();
                    if let Err(e) = provider.delete_session(&sid, &known).await {
                        return json_error(&ApiError::new(
                            inspect_protocol::ErrorCode::Unavailable,
                            format!("the sandbox provider could not remove this session's sandboxes: {e}"),
                        ));
                    }
                }
                self.with_registry(|r| {
                    for ws in r.sockets.values() {
                        let _ = ws.close(Some(1000), Some("session deleted"));
                    }
                    r.sockets.clear();
                    r.subscribed.clear();
                });
                let storage = self.state.storage();
                let _ = storage.delete_alarm().await;
                storage.delete_all().await?;
                self.known_id.borrow_mut().take();
                self.origin_kept.set(false);
                // Only a new `/init` makes a schema here (it checks what is left first).
                self.schema.set(SchemaState::Unknown);
                json_ok(&serde_json::json!({ "deleted": true }))
            }
            // The Worker tells of a change on the host (a webhook, the periodic check).
            (Method::Post, "pull-request") => {
                if !req.headers().has(VOUCHED_HEADER).unwrap_or(false) {
                    return json_error(&ApiError::new(
                        inspect_protocol::ErrorCode::Forbidden,
                        "only the control plane says how a pull request changed",
                    ));
                }
                let result = async {
                    let change: inspect_protocol::scm::PullRequestChange =
                        body_json(&mut req).await?;
                    engine.update_pull_request(&change, now)
                }
                .await;
                match result {
                    Ok(fx) => {
                        let changed = !fx.outbound.is_empty();
                        self.carry_out(fx).await;
                        json_ok(&serde_json::json!({ "changed": changed }))
                    }
                    Err(e) => json_error(&e),
                }
            }
            (Method::Post, "prompt") => {
                let result = async {
                    let actor = actor_of(&req)?;
                    // New work is refused once a budget of the person's is spent.
                    inspect_runtime::budgets::check_over_binding(&self.env, &actor.user_id, now)
                        .await?;
                    let body: PromptRequest = body_json(&mut req).await?;
                    self.take_prompt(&req, &actor, body, now).await
                }
                .await;
                match result {
                    Ok(accepted) => json_ok(&accepted),
                    Err(e) => json_error(&e),
                }
            }
            // A person's link to the editor, or to the desktop (to watch, or with control).
            (Method::Post, "editor" | "desktop") => {
                let origin = req
                    .headers()
                    .get(super::ORIGIN_HEADER)
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                let desktop = action == "desktop";
                let ask: inspect_protocol::desktop::DesktopRequest = match desktop {
                    true => match body_json(&mut req).await {
                        Ok(ask) => ask,
                        Err(e) => return json_error(&e),
                    },
                    false => Default::default(),
                };
                let service = match desktop {
                    true => Service::Desktop {
                        control: ask.control(),
                    },
                    false => Service::Editor,
                };
                let result = actor_of(&req).and_then(|actor| {
                    let me = self.author(&actor, now)?;
                    let sid = self.session_id()?;
                    let (grant, fx) = engine.service_link(service, &me, now)?;
                    let url = format!(
                        "{origin}/sessions/{sid}/{action}/open?{}={}",
                        inspect_protocol::editor::EDITOR_LINK_PARAM,
                        grant.token
                    );
                    let link = match desktop {
                        true => serde_json::to_value(inspect_protocol::desktop::DesktopLink {
                            url,
                            expires_at: grant.expires_at,
                            control: ask.control(),
                        }),
                        false => serde_json::to_value(inspect_protocol::editor::EditorLink {
                            url,
                            expires_at: grant.expires_at,
                        }),
                    }
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                    Ok((link, fx))
                });
                match result {
                    Ok((link, fx)) => {
                        self.apply(fx);
                        json_ok(&link)
                    }
                    Err(e) => json_error(&e),
                }
            }
            // The person's browser opens their link: where the editor's or the desktop's
            // gate is, once (the desktop's with noVNC's page to open).
            (Method::Get, "editor/open" | "desktop/open") => {
                let token = query_param(&req, inspect_protocol::editor::EDITOR_LINK_PARAM)
                    .unwrap_or_default();
                let desktop = action == "desktop/open";
                let result = actor_of(&req).and_then(|actor| {
                    let (endpoint, service) =
                        engine.open_service_link(&token, desktop, &actor.user_id, now)?;
                    let sandbox = engine
                        .sandbox_row()?
                        .ok_or_else(|| ApiError::conflict("the session has no sandbox"))?;
                    let mut link =
                        self.gated_link(&sandbox.sandbox_id, endpoint.port, endpoint.url, now);
                    if let Service::Desktop { control } = service {
                        link.url = inspect_protocol::desktop::page_link(&link.url, control);
                    }
                    Ok(link)
                });
                // The Worker sends the browser on (a redirect from here would be followed
                // by the Worker's own fetch).
                reply(result)
            }
            // A person asks for one more port of the running sandbox.
            (Method::Post, "ports") => {
                let result = async {
                    let actor = actor_of(&req)?;
                    let ask: inspect_protocol::session::OpenPortRequest =
                        body_json(&mut req).await?;
                    let me = self.author(&actor, now)?;
                    let (sandbox_id, exposed) = engine.check_new_port(ask.port)?;
                    if !exposed {
                        let provider = self.provider().ok_or_else(|| {
                            ApiError::new(
                                inspect_protocol::ErrorCode::Unavailable,
                                "no sandbox provider is configured",
                            )
                        })?;
                        // A gated sandbox (a cloud vendor's) gets one more gate in front of
                        // the port, and the vendor exposes the gate's.
                        let gate_port = match self.sandbox_gate_key(&sandbox_id) {
                            Some(_) => {
                                let spawned = engine.sandbox_settings()?.tunnel_ports.len();
                                let next = engine.tunnel_urls()?.len().max(spawned);
                                inspect_protocol::provider::GatePorts::of(&sandbox_id).app(next)
                            }
                            None => None,
                        };
                        let url = provider
                            .expose_port(
                                &self.sandbox_at(&sandbox_id),
                                gate_port.unwrap_or(ask.port),
                            )
                            .await
                            .map_err(|e| match e {
                                inspect_provider::ProviderError::Permanent(m) => {
                                    ApiError::conflict(m)
                                }
                                other => ApiError::new(
                                    inspect_protocol::ErrorCode::Unavailable,
                                    other.to_string(),
                                ),
                            })?;
                        let mut fx =
                            self.engine()
                                .add_tunnel_url(&sandbox_id, ask.port, &url, &me, now)?;
                        if let Some(gate_port) = gate_port {
                            fx.to_sandbox.push(
                                inspect_protocol::sandbox::SandboxCommand::OpenGate {
                                    port: ask.port,
                                    gate_port,
                                },
                            );
                        }
                        self.apply(fx);
                    }
                    self.port_link(&ask.port.to_string(), now)
                }
                .await;
                reply(result)
            }
            (Method::Post, p) if p.starts_with("ports/") && p.ends_with("/link") => {
                let port = &p["ports/".len()..p.len() - "/link".len()];
                let result = actor_of(&req).and_then(|actor| {
                    self.author(&actor, now)?;
                    self.port_link(port, now)
                });
                reply(result)
            }
            (Method::Post, "terminals") => {
                let result = async {
                    let actor = actor_of(&req)?;
                    let body: inspect_protocol::terminal::OpenTerminalRequest =
                        body_json(&mut req).await?;
                    let me = self.author(&actor, now)?;
                    engine.open_terminal(&me, &body, now)
                }
                .await;
                match result {
                    Ok((info, fx)) => {
                        self.apply(fx);
                        json_ok(&info)
                    }
                    Err(e) => json_error(&e),
                }
            }
            (Method::Get, "terminals") => reply(
                engine
                    .terminals()
                    .map(|terminals| inspect_protocol::terminal::TerminalList { terminals }),
            ),
            (Method::Delete, t) if t.starts_with("terminals/") => {
                let id = &t["terminals/".len()..];
                let result = actor_of(&req).and_then(|actor| {
                    let me = self.author(&actor, now)?;
                    engine.close_terminal(id, Some(&me), None, now)
                });
                match result {
                    Ok(fx) => {
                        self.apply(fx);
                        json_ok(&serde_json::json!({ "closed": true }))
                    }
                    Err(e) => json_error(&e),
                }
            }
            // Another session's sandbox stopped and this one waited longest for room: it
            // asks the provider again at once (only objects reach this path).
            (Method::Post, super::capacity::CAPACITY_FREED) => match engine.capacity_freed() {
                Ok((waiting, fx)) => {
                    self.carry_out(fx).await;
                    json_ok(&serde_json::json!({ "waiting": waiting }))
                }
                Err(e) => json_error(&e),
            },
            (Method::Post, "stop") => {
                let result = actor_of(&req).and_then(|actor| {
                    let me = self.author(&actor, now)?;
                    let connected = engine.sandbox_connected()?;
                    engine.stop(&me, connected, now)
                });
                match result {
                    Ok((stopped, fx)) => {
                        self.carry_out(fx).await;
                        self.stop_children(&req, "stop");
                        json_ok(&serde_json::json!({ "stopped": stopped }))
                    }
                    Err(e) => json_error(&e),
                }
            }
            (Method::Post, "archive" | "unarchive") => {
                let target = if action == "archive" {
                    SessionStatus::Archived
                } else {
                    SessionStatus::Active
                };
                let result = actor_of(&req).and_then(|actor| {
                    let mut fx = engine.set_status(target, &actor, now)?;
                    if target == SessionStatus::Archived {
                        fx.merge(engine.stop_for_archive(now)?);
                    }
                    Ok(fx)
                });
                match result {
                    Ok(fx) => {
                        self.carry_out(fx).await;
                        if target == SessionStatus::Archived {
                            self.stop_children(&req, "stop");
                            self.release_workspace().await;
                        }
                        reply(engine.state())
                    }
                    Err(e) => json_error(&e),
                }
            }
            (Method::Patch, "title") => {
                let result = async {
                    let actor = actor_of(&req)?;
                    let body: TitleRequest = body_json(&mut req).await?;
                    engine.set_title(&body.title, &actor, now)
                }
                .await;
                match result {
                    Ok(fx) => {
                        self.apply(fx);
                        reply(engine.state())
                    }
                    Err(e) => json_error(&e),
                }
            }
            (Method::Post, "ws-token") => {
                let result = actor_of(&req).and_then(|actor| engine.mint_ws_token(&actor, now));
                match result {
                    Ok((token, joined)) => {
                        if joined {
                            self.sync_index();
                        }
                        json_ok(&token)
                    }
                    Err(e) => json_error(&e),
                }
            }
            (Method::Get, "events") => reply(self.events_page(&req)),
            // The workspace's change: the listing, or one file's diff.
            (Method::Get, "changes") => {
                let result = self.session_id().and_then(|_| {
                    match (query_param(&req, "repo"), query_param(&req, "file")) {
                        (Some(repo), Some(file)) => engine
                            .changed_file(&repo, &file)?
                            .map(|f| serde_json::to_value(f).unwrap_or_default())
                            .ok_or_else(|| {
                                ApiError::not_found(format!(
                                    "{file} is not among {repo}'s changed files"
                                ))
                            }),
                        (None, None) => engine
                            .changes_summary()
                            .map(|s| serde_json::to_value(s).unwrap_or_default()),
                        _ => Err(ApiError::bad_request(
                            "ask for one file with both repo and file, or for the listing with neither",
                        )),
                    }
                });
                reply(result)
            }
            (Method::Get, "tunnel-urls") => reply(
                self.session_id()
                    .and_then(|_| engine.tunnel_urls())
                    .map(|tunnel_urls| inspect_protocol::session::TunnelUrls { tunnel_urls }),
            ),
            (Method::Get, "messages") => reply(
                self.session_id()
                    .and_then(|_| engine.messages())
                    .map(|messages| MessageList { messages }),
            ),
            (Method::Get, "artifacts") => reply(
                self.session_id()
                    .and_then(|_| engine.artifacts())
                    .map(|artifacts| ArtifactList { artifacts }),
            ),
            (Method::Get, "participants") => reply(
                self.session_id()
                    .and_then(|_| engine.participants())
                    .map(|participants| ParticipantList { participants }),
            ),
            _ => json_error(&ApiError::not_found(format!("no session route {path}"))),
        }
    }

    /// Stopping or archiving a parent stops its children's running prompts (after the
    /// response; a child's own children follow the same way).
    pub(super) fn stop_children(&self, req: &Request, action: &str) {
        let Ok(children) = self.engine().children() else {
            return;
        };
        if children.is_empty() {
            return;
        }
        let actor = req.headers().get(ACTOR_HEADER).ok().flatten();
        let env = self.env.clone();
        let path = format!("https://session/{action}");
        self.state.wait_until(async move {
            for child in children {
                let headers = worker::Headers::new();
                if let Some(a) = &actor {
                    let _ = headers.set(ACTOR_HEADER, a);
                }
                let _ = headers.set(SESSION_HEADER, &child);
                let mut init = worker::RequestInit::new();
                init.with_method(Method::Post).with_headers(headers);
                let Ok(inner) = Request::new_with_init(&path, &init) else {
                    continue;
                };
                let stub = env
                    .durable_object("SESSION")
                    .and_then(|ns| ns.get_by_name(&child));
                if let Ok(stub) = stub {
                    let _ = stub.fetch_with_request(inner).await;
                }
            }
        });
    }

    /// The participant acting for `actor`, joining them on first contact.
    pub(super) fn author(
        &self,
        actor: &Actor,
        now: i64,
    ) -> std::result::Result<inspect_protocol::session::Participant, ApiError> {
        let engine = self.engine();
        self.session_id()?;
        if let Some(p) = engine.participant_by_user(&actor.user_id)? {
            return Ok(p);
        }
        let (_, joined) = engine.mint_ws_token(actor, now)?;
        if joined {
            self.sync_index();
        }
        engine
            .participant_by_user(&actor.user_id)?
            .ok_or_else(|| ApiError::internal("participant vanished"))
    }

    /// Queues `prompt` from `actor`, sent by `req`, and carries out what it sets off.
    async fn take_prompt(
        &self,
        req: &Request,
        actor: &Actor,
        mut prompt: PromptRequest,
        now: i64,
    ) -> std::result::Result<inspect_protocol::session::PromptAccepted, ApiError> {
        // Where the outcome goes is never a person's to say.
        if !req.headers().has(VOUCHED_HEADER).unwrap_or(false) {
            prompt.callback_context = None;
        }
        let author = self.author(actor, now)?;
        // The catalog (a D1 read when not cached) only checks a model or an effort the
        // prompt names: a plain prompt is echoed without it.
        let names_a_model = prompt.model.is_some() || prompt.reasoning_effort.is_some();
        let models = match names_a_model {
            true => self.models().await,
            false => None,
        };
        let (accepted, fx) = self
            .engine()
            .with_models(models.as_ref())
            .enqueue(&author, &prompt, now)?;
        self.carry_out(fx).await;
        Ok(accepted)
    }

    pub(super) fn events_page(
        &self,
        req: &Request,
    ) -> std::result::Result<inspect_protocol::session::EventPage, ApiError> {
        let sid = self.session_id()?;
        let codec = timeline::CursorCodec { session_id: &sid };
        let after = match query_param(req, "cursor") {
            Some(c) => codec.decode(&c)?,
            None => 0,
        };
        let limit = match query_param(req, "limit") {
            Some(l) => Some(
                l.parse::<usize>()
                    .map_err(|_| ApiError::bad_request("limit must be a number"))?,
            ),
            None => None,
        };
        let types: Vec<String> = req
            .url()
            .map(|u| {
                u.query_pairs()
                    .filter(|(k, _)| k == "type")
                    .map(|(_, v)| v.into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let filter = timeline::EventFilter::parse(&types, query_param(req, "message_id"))?;
        timeline::newer_than_filtered(
            &self.store,
            &codec,
            after,
            timeline::clamp_limit(limit),
            &filter,
        )
        .map_err(|e| ApiError::internal(e.to_string()))
    }
}
