//! The workers-rs shell of the SessionDO: it binds the engine to the object's SQLite, its
//! hibernating WebSockets, its alarm and the D1 index. Decisions live in the engine; this
//! only moves bytes.
//!
//! The Worker forwards `/sessions/:id/<action>` here with the caller in `X-Inspect-Actor`
//! (JSON) and the session id in `X-Inspect-Session-Id`; nothing outside the Worker can
//! reach a Durable Object, so these headers are trusted.

use crate::engine::plan::SpawnPlan;
use crate::engine::sockets::{KIND_CLIENT, KIND_SANDBOX};
use crate::engine::{ids, timeline, Effects, Session, Target};
use crate::local_provider::LocalProvider;
use crate::provider::SandboxProvider;
use crate::schema;
use crate::store::{Row, SqlValue, Store, StoreError, StoreResult};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::health::DurableProbe;
use inspect_protocol::sandbox::SandboxCommand;
use inspect_protocol::session::{
    Actor, ArtifactList, CreateSessionRequest, CreateSessionResponse, IndexUpdate, MessageList,
    ParticipantList, PromptRequest, SessionStatus, TitleRequest,
};
use inspect_protocol::ApiError;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use worker::{
    durable_object, DurableObject, Env, Method, Request, Response, Result, SqlStorage,
    SqlStorageValue, State, WebSocket, WebSocketIncomingMessage, WebSocketPair,
};

pub const ACTOR_HEADER: &str = "X-Inspect-Actor";
pub const SESSION_HEADER: &str = "X-Inspect-Session-Id";
/// The control plane's public origin, as the caller reached it (for sandboxes to connect).
pub const ORIGIN_HEADER: &str = "X-Inspect-Origin";

/// The Durable Object's own SQLite, behind the engine's [`Store`] trait.
#[derive(Clone)]
pub struct DoStore {
    sql: SqlStorage,
}

fn to_do(v: &SqlValue) -> SqlStorageValue {
    match v {
        SqlValue::Null => SqlStorageValue::Null,
        SqlValue::Integer(i) => SqlStorageValue::Integer(*i),
        SqlValue::Real(f) => SqlStorageValue::Float(*f),
        SqlValue::Text(s) => SqlStorageValue::String(s.clone()),
        SqlValue::Blob(b) => SqlStorageValue::Blob(b.clone()),
    }
}

fn from_do(v: SqlStorageValue) -> SqlValue {
    match v {
        SqlStorageValue::Null => SqlValue::Null,
        SqlStorageValue::Boolean(b) => SqlValue::Integer(i64::from(b)),
        SqlStorageValue::Integer(i) => SqlValue::Integer(i),
        SqlStorageValue::Float(f) => SqlValue::Real(f),
        SqlStorageValue::String(s) => SqlValue::Text(s),
        SqlStorageValue::Blob(b) => SqlValue::Blob(b),
    }
}

impl Store for DoStore {
    fn query(&self, sql: &str, params: &[SqlValue]) -> StoreResult<Vec<Row>> {
        let cursor = self
            .sql
            .exec(sql, params.iter().map(to_do).collect::<Vec<_>>())
            .map_err(|e| StoreError(e.to_string()))?;
        cursor
            .raw()
            .map(|row| {
                row.map(|values| values.into_iter().map(from_do).collect())
                    .map_err(|e| StoreError(e.to_string()))
            })
            .collect()
    }

    fn atomically<T>(&self, f: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        // A synchronous run of statements with no await in between is committed together.
        f()
    }
}

/// What each accepted socket carries through hibernation: its id and kind, nothing more.
#[derive(Serialize, Deserialize)]
struct SocketTag {
    id: String,
    kind: String,
}

/// Live sockets by id, and which client sockets have subscribed. Rebuilt from the runtime
/// and SQLite after the object wakes from hibernation.
#[derive(Default)]
struct Registry {
    sockets: HashMap<String, WebSocket>,
    subscribed: HashSet<String>,
}

/// The D1 index lags a busy session by at most this much.
const INDEX_SYNC_INTERVAL_MS: i64 = 1000;

/// D1 index writes: at most one in flight; changes made meanwhile collapse into one more.
#[derive(Default)]
struct IndexSync {
    in_flight: bool,
    dirty: bool,
}

#[durable_object]
pub struct SessionDO {
    state: State,
    env: Env,
    store: DoStore,
    registry: RefCell<Option<Registry>>,
    index_sync: Rc<RefCell<IndexSync>>,
}

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

fn json_error(err: &ApiError) -> Result<Response> {
    Ok(Response::from_json(&err.body())?.with_status(err.status()))
}

fn json_ok<T: Serialize>(value: &T) -> Result<Response> {
    Response::from_json(value)
}

fn reply<T: Serialize>(r: std::result::Result<T, ApiError>) -> Result<Response> {
    match r {
        Ok(v) => json_ok(&v),
        Err(e) => json_error(&e),
    }
}

async fn body_json<T: serde::de::DeserializeOwned>(
    req: &mut Request,
) -> std::result::Result<T, ApiError> {
    let text = req
        .text()
        .await
        .map_err(|e| ApiError::bad_request(format!("unreadable body: {e}")))?;
    serde_json::from_str(&text)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
}

fn actor_of(req: &Request) -> std::result::Result<Actor, ApiError> {
    let raw = req
        .headers()
        .get(ACTOR_HEADER)
        .ok()
        .flatten()
        .ok_or_else(|| ApiError::unauthorized("no caller"))?;
    serde_json::from_str(&raw).map_err(|_| ApiError::unauthorized("malformed caller"))
}

fn query_param(req: &Request, name: &str) -> Option<String> {
    let url = req.url().ok()?;
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

impl SessionDO {
    fn engine(&self) -> Session<'_, DoStore> {
        Session::new(&self.store)
    }

    fn with_registry<T>(&self, f: impl FnOnce(&mut Registry) -> T) -> T {
        let mut slot = self.registry.borrow_mut();
        let registry = slot.get_or_insert_with(|| {
            let mut r = Registry::default();
            for ws in self.state.get_websockets() {
                if let Ok(Some(tag)) = ws.deserialize_attachment::<SocketTag>() {
                    r.sockets.insert(tag.id, ws);
                }
            }
            r.subscribed = self
                .engine()
                .socket_ids(Some(KIND_CLIENT))
                .unwrap_or_default()
                .into_iter()
                .collect();
            r
        });
        f(registry)
    }

    fn refresh_subscribed(&self) {
        let ids: HashSet<String> = self
            .engine()
            .socket_ids(Some(KIND_CLIENT))
            .unwrap_or_default()
            .into_iter()
            .collect();
        self.with_registry(|r| r.subscribed = ids);
    }

    /// Carries out what the engine decided: sends, closes, index refresh.
    fn apply(&self, fx: Effects) {
        let membership_changed = !fx.closes.is_empty()
            || fx.outbound.iter().any(|o| {
                matches!(
                    o.message,
                    ServerMessage::Subscribed { .. } | ServerMessage::PresenceLeave { .. }
                )
            });
        if membership_changed {
            self.refresh_subscribed();
        }
        self.with_registry(|r| {
            for out in &fx.outbound {
                let Ok(text) = serde_json::to_string(&out.message) else {
                    continue;
                };
                match &out.target {
                    Target::Socket(id) => {
                        if let Some(ws) = r.sockets.get(id) {
                            let _ = ws.send_with_str(&text);
                        }
                    }
                    Target::AllClients | Target::AllClientsExcept(_) => {
                        let skip = match &out.target {
                            Target::AllClientsExcept(id) => Some(id.as_str()),
                            _ => None,
                        };
                        let targets = r
                            .subscribed
                            .iter()
                            .filter(|id| Some(id.as_str()) != skip)
                            .filter_map(|id| r.sockets.get(id));
                        send_to_all(targets, &text);
                    }
                }
            }
            for close in &fx.closes {
                if let Some(ws) = r.sockets.remove(&close.ws_id) {
                    let _ = ws.close(Some(close.code), Some(close.reason.as_str()));
                }
                r.subscribed.remove(&close.ws_id);
            }
        });
        if !fx.to_sandbox.is_empty() {
            let ids = self
                .engine()
                .socket_ids(Some(KIND_SANDBOX))
                .unwrap_or_default();
            self.with_registry(|r| {
                for command in &fx.to_sandbox {
                    let Ok(text) = serde_json::to_string(command) else {
                        continue;
                    };
                    for ws in ids.iter().filter_map(|id| r.sockets.get(id)) {
                        let _ = ws.send_with_str(&text);
                    }
                }
            });
        }
        if fx.index_changed {
            self.sync_index();
        }
    }

    /// Brings the D1 index up to date after the response, so no client waits on D1. Writes
    /// are throttled: at most one per [`INDEX_SYNC_INTERVAL_MS`] per session, each reading
    /// the latest state, so a burst of prompts costs one or two writes, not one each.
    fn sync_index(&self) {
        {
            let mut sync = self.index_sync.borrow_mut();
            if sync.in_flight {
                sync.dirty = true;
                return;
            }
            sync.in_flight = true;
        }
        let env = self.env.clone();
        let store = self.store.clone();
        let sync = self.index_sync.clone();
        self.state.wait_until(async move {
            loop {
                sync.borrow_mut().dirty = false;
                let started = now_ms();
                if let Ok(update) = Session::new(&store).index_update() {
                    if let Err(e) = write_index(&env, &update).await {
                        worker::console_error!("index update for {} failed: {e}", update.id);
                    }
                }
                if !sync.borrow().dirty {
                    sync.borrow_mut().in_flight = false;
                    break;
                }
                let wait = INDEX_SYNC_INTERVAL_MS - (now_ms() - started);
                if wait > 0 {
                    worker::Delay::from(std::time::Duration::from_millis(wait as u64)).await;
                }
            }
        });
    }

    /// Points the one alarm slot at the earliest deadline, or clears it.
    async fn schedule(&self) {
        let next = self.engine().next_deadline().ok().flatten();
        let storage = self.state.storage();
        let current = storage.get_alarm().await.ok().flatten();
        match next {
            Some(at) if current != Some(at) => {
                // An absolute time: a plain integer would be taken as an offset from now.
                let when = worker::js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(at as f64));
                let _ = storage.set_alarm(worker::ScheduledTime::new(when)).await;
            }
            None if current.is_some() => {
                let _ = storage.delete_alarm().await;
            }
            _ => {}
        }
    }

    fn probe(&self) -> StoreResult<DurableProbe> {
        self.store.atomically(|| {
            self.store.execute(
                "INSERT INTO health_probe (id, probes) VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET probes = probes + 1",
                &[],
            )?;
            let probes = self
                .store
                .scalar("SELECT probes FROM health_probe WHERE id = 1", &[])?
                .and_then(|v| v.as_i64())
                .unwrap_or(0);
            Ok(DurableProbe { probes })
        })
    }

    /// Keeps the origin the session was created at, for its sandboxes to connect back to.
    /// Later requests do not move it: a session's sandboxes keep one address.
    fn remember_origin(&self, req: &Request) {
        let Some(origin) = req.headers().get(ORIGIN_HEADER).ok().flatten() else {
            return;
        };
        let _ = self.store.execute(
            "UPDATE session SET origin = ? WHERE id = 1 AND origin IS NULL",
            &[origin.as_str().into()],
        );
    }

    fn accept_sandbox_socket(&self, req: &Request) -> Result<Response> {
        let header = |name: &str| req.headers().get(name).ok().flatten().unwrap_or_default();
        let auth = header("Authorization");
        let token = auth.strip_prefix("Bearer ").unwrap_or_default().to_owned();
        let sandbox_id = header("X-Sandbox-ID");
        match self.engine().authenticate_sandbox(&token, &sandbox_id) {
            Ok(Ok(())) => {}
            Ok(Err(refusal)) => {
                let code = match refusal.status() {
                    401 => inspect_protocol::ErrorCode::Unauthorized,
                    403 => inspect_protocol::ErrorCode::Forbidden,
                    404 => inspect_protocol::ErrorCode::NotFound,
                    _ => inspect_protocol::ErrorCode::Gone,
                };
                worker::console_warn!("sandbox {sandbox_id} refused: {refusal:?}");
                return json_error(&ApiError::new(
                    code,
                    format!("sandbox refused: {refusal:?}"),
                ));
            }
            Err(e) => return json_error(&e),
        }
        let pair = WebSocketPair::new()?;
        let id = ids::new_id("ws");
        self.state
            .accept_websocket_with_tags(&pair.server, &[KIND_SANDBOX, id.as_str()]);
        pair.server.serialize_attachment(SocketTag {
            id: id.clone(),
            kind: KIND_SANDBOX.into(),
        })?;
        self.with_registry(|r| r.sockets.insert(id.clone(), pair.server));
        match self.engine().sandbox_opened(&id, now_ms()) {
            Ok(fx) => self.apply(fx),
            Err(e) => worker::console_error!("sandbox open: {e}"),
        }
        Response::from_websocket(pair.client)
    }

    /// Carries out effects, including those that need the provider or the alarm: stop a
    /// sandbox given up on, spawn one for waiting prompts, move the alarm.
    async fn carry_out(&self, fx: Effects) {
        let wanted = fx.spawn_wanted;
        let stop = fx.stop_sandbox.clone();
        let snapshot = fx.snapshot_sandbox.clone();
        let reschedule = moves_deadlines(&fx);
        self.apply(fx);
        if let (Some(id), Some(provider)) = (snapshot, self.provider()) {
            let engine = self.engine();
            let previous = match engine.snapshot_started(&id, now_ms()) {
                Ok((previous, fx)) => {
                    self.apply(fx);
                    previous
                }
                Err(_) => None,
            };
            match provider.snapshot(&id).await {
                Ok(info) => {
                    if let Ok(fx) = engine.snapshot_saved(&info, now_ms()) {
                        self.apply(fx);
                    }
                }
                Err(e) => worker::console_warn!("snapshot of {id} failed: {e}"),
            }
            if let Some(previous) = previous {
                if let Ok(fx) = engine.snapshot_ended(&id, &previous, now_ms()) {
                    self.apply(fx);
                }
            }
        }
        if let (Some(id), Some(provider)) = (stop, self.provider()) {
            if let Err(e) = provider.stop(&id).await {
                worker::console_warn!("stopping sandbox {id}: {e}");
            }
        }
        self.spawn_if_wanted(wanted).await;
        if reschedule {
            self.schedule().await;
        }
    }

    /// Spawns a sandbox if the engine wants one and none is alive or on its way.
    async fn spawn_if_wanted(&self, wanted: bool) {
        if !wanted {
            return;
        }
        let engine = self.engine();
        let provider = self.provider();
        // Decide before begin_spawn replaces the record of the last sandbox.
        let plan = match &provider {
            Some(p) => {
                let runtime = p.runtime_version().await.unwrap_or_default();
                engine.spawn_plan(p.capabilities(), &runtime).ok()
            }
            None => None,
        };
        let Ok(Some((ticket, fx))) = engine.begin_spawn(now_ms()) else {
            return;
        };
        self.apply(fx);
        let restore = match &plan {
            Some(SpawnPlan::Restore { snapshot_id }) => Some(snapshot_id.clone()),
            _ => None,
        };
        if let Some(SpawnPlan::Fresh { warning: Some(w) }) = &plan {
            let mut fx = Effects::none();
            fx.broadcast(ServerMessage::SandboxStatus {
                status: "spawning".into(),
                error: Some(w.clone()),
            });
            self.apply(fx);
        }
        let result = match self.spawn_request(&ticket, restore.clone()) {
            Ok(req) => match self.provider() {
                Some(provider) => provider.create(&req).await.map_err(|e| e.to_string()),
                None => Err("no sandbox provider is configured (set SANDBOX_HOST_URL and SANDBOX_HOST_SECRET)".into()),
            },
            Err(e) => Err(e.message),
        };
        let fx = match result {
            Ok(info) => engine
                .spawn_accepted(&ticket.sandbox_id, now_ms())
                .and_then(|mut fx| {
                    fx.merge(engine.set_tunnel_urls(&ticket.sandbox_id, &info.tunnel_urls)?);
                    if let Some(snapshot_id) = &restore {
                        fx.broadcast(ServerMessage::SandboxRestored {
                            sandbox_id: ticket.sandbox_id.clone(),
                            snapshot_id: snapshot_id.clone(),
                        });
                    }
                    Ok(fx)
                }),
            Err(e) => {
                worker::console_warn!("spawn of {} failed: {e}", ticket.sandbox_id);
                engine.spawn_failed(&ticket.sandbox_id, &e, now_ms())
            }
        };
        if let Ok(fx) = fx {
            self.apply(fx);
        }
        self.schedule().await;
    }

    fn provider(&self) -> Option<LocalProvider> {
        let read = |name: &str| {
            self.env
                .secret(name)
                .map(|s| s.to_string())
                .or_else(|_| self.env.var(name).map(|v| v.to_string()))
                .ok()
                .filter(|v| !v.is_empty())
        };
        Some(LocalProvider {
            base_url: read("SANDBOX_HOST_URL")?,
            secret: read("SANDBOX_HOST_SECRET")?,
        })
    }

    fn spawn_request(
        &self,
        ticket: &crate::engine::sandbox::SpawnTicket,
        restore_from: Option<String>,
    ) -> std::result::Result<inspect_protocol::provider::SpawnRequest, ApiError> {
        let state = self.engine().state()?;
        let origin = self
            .store
            .scalar("SELECT origin FROM session WHERE id = 1", &[])
            .map_err(|e| ApiError::internal(e.to_string()))?
            .and_then(|v| v.into_string())
            .ok_or_else(|| ApiError::internal("the control plane's origin is unknown"))?;
        let repositories = state
            .repositories
            .iter()
            .map(|r| {
                let source = r.source.clone().ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "repository {}/{} has no clone source",
                        r.owner, r.name
                    ))
                })?;
                Ok(inspect_protocol::provider::WorkspaceRepository {
                    owner: r.owner.clone(),
                    name: r.name.clone(),
                    source,
                    base_branch: r.branch.clone(),
                })
            })
            .collect::<std::result::Result<Vec<_>, ApiError>>()?;
        let default_model = state
            .model
            .clone()
            .or_else(|| self.env.var("DEFAULT_MODEL").ok().map(|v| v.to_string()));
        Ok(inspect_protocol::provider::SpawnRequest {
            session_id: state.id.clone(),
            sandbox_id: ticket.sandbox_id.clone(),
            sandbox_token: ticket.token.clone(),
            control_plane_url: origin,
            repositories,
            work_branch: state
                .branch_name
                .clone()
                .unwrap_or_else(|| format!("open-inspect/{}", state.id)),
            boot_mode: if restore_from.is_some() {
                inspect_protocol::provider::BootMode::SnapshotRestore
            } else {
                Default::default()
            },
            restore_from,
            env: Default::default(),
            tunnel_ports: self.engine().sandbox_settings()?.tunnel_ports,
            default_model,
        })
    }

    fn accept_client_socket(&self) -> Result<Response> {
        if let Err(e) = self.engine().session_id() {
            return json_error(&e);
        }
        let pair = WebSocketPair::new()?;
        let id = ids::new_id("ws");
        self.state
            .accept_websocket_with_tags(&pair.server, &[KIND_CLIENT, id.as_str()]);
        pair.server.serialize_attachment(SocketTag {
            id: id.clone(),
            kind: KIND_CLIENT.into(),
        })?;
        if let Err(e) = self.engine().socket_opened(&id, KIND_CLIENT, now_ms()) {
            let _ = pair.server.close(Some(1011), Some(e.message.as_str()));
        }
        self.with_registry(|r| r.sockets.insert(id, pair.server));
        Response::from_websocket(pair.client)
    }

    async fn route(&self, mut req: Request) -> Result<Response> {
        self.remember_origin(&req);
        let path = req.path();
        let action = path.trim_matches('/').to_owned();
        let method = req.method();
        let now = now_ms();
        let engine = self.engine();
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
                    return self.accept_sandbox_socket(&req);
                }
                let r = self.accept_client_socket();
                self.schedule().await;
                r
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
                    let body: CreateSessionRequest = body_json(&mut req).await?;
                    let state = engine.create(&sid, &body, &actor, now)?;
                    Ok::<_, ApiError>(state)
                }
                .await;
                match result {
                    Ok(state) => {
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
                        let _ = engine.set_idle_timeout(idle);
                        let resp = CreateSessionResponse {
                            session_id: state.id.clone(),
                            status: state.status,
                        };
                        Ok(json_ok(&resp)?.with_status(201))
                    }
                    Err(e) => json_error(&e),
                }
            }
            (Method::Get, "") => reply(engine.state()),
            (Method::Delete, "") => {
                if let Err(e) = engine.session_id() {
                    return json_error(&e);
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
                if let Err(e) = schema::migrate(&self.store) {
                    worker::console_error!("schema after delete: {e}");
                }
                json_ok(&serde_json::json!({ "deleted": true }))
            }
            (Method::Post, "prompt") => {
                let result = async {
                    let actor = actor_of(&req)?;
                    let body: PromptRequest = body_json(&mut req).await?;
                    let author = self.author(&actor, now)?;
                    engine.enqueue(&author, &body, now)
                }
                .await;
                match result {
                    Ok((accepted, fx)) => {
                        self.carry_out(fx).await;
                        json_ok(&accepted)
                    }
                    Err(e) => json_error(&e),
                }
            }
            (Method::Post, "stop") => {
                let result = actor_of(&req).and_then(|actor| {
                    let me = self.author(&actor, now)?;
                    let connected = engine.sandbox_connected()?;
                    engine.stop(&me, connected, now)
                });
                match result {
                    Ok((stopped, fx)) => {
                        self.carry_out(fx).await;
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
                let result =
                    actor_of(&req).and_then(|actor| engine.set_status(target, &actor, now));
                match result {
                    Ok(fx) => {
                        self.apply(fx);
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
            (Method::Get, "tunnel-urls") => reply(
                engine
                    .session_id()
                    .and_then(|_| engine.tunnel_urls())
                    .map(|tunnel_urls| inspect_protocol::session::TunnelUrls { tunnel_urls }),
            ),
            (Method::Get, "messages") => reply(
                engine
                    .session_id()
                    .and_then(|_| engine.messages())
                    .map(|messages| MessageList { messages }),
            ),
            (Method::Get, "artifacts") => reply(
                engine
                    .session_id()
                    .and_then(|_| engine.artifacts())
                    .map(|artifacts| ArtifactList { artifacts }),
            ),
            (Method::Get, "participants") => reply(
                engine
                    .session_id()
                    .and_then(|_| engine.participants())
                    .map(|participants| ParticipantList { participants }),
            ),
            _ => json_error(&ApiError::not_found(format!("no session route {path}"))),
        }
    }

    /// The participant acting for `actor`, joining them on first contact.
    fn author(
        &self,
        actor: &Actor,
        now: i64,
    ) -> std::result::Result<inspect_protocol::session::Participant, ApiError> {
        let engine = self.engine();
        engine.session_id()?;
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

    fn events_page(
        &self,
        req: &Request,
    ) -> std::result::Result<inspect_protocol::session::EventPage, ApiError> {
        let engine = self.engine();
        let sid = engine.session_id()?;
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
        timeline::newer_than(&self.store, &codec, after, timeline::clamp_limit(limit))
            .map_err(|e| ApiError::internal(e.to_string()))
    }

    /// A socket closed or failed: forget it, let the others know, complete the close.
    async fn socket_gone(&self, ws: WebSocket, code: usize) {
        let tag = ws.deserialize_attachment::<SocketTag>().ok().flatten();
        if let Some(tag) = tag.filter(|t| t.kind == KIND_SANDBOX) {
            self.with_registry(|r| r.sockets.remove(&tag.id));
            let engine = self.engine();
            match engine.socket_closed(&tag.id) {
                Ok(fx) => self.apply(fx),
                Err(e) => worker::console_error!("close: {e}"),
            }
            let _ = engine.sandbox_disconnected(now_ms());
            self.schedule().await;
        } else if let Some(id) = Self::socket_id(&ws) {
            self.with_registry(|r| {
                r.sockets.remove(&id);
                r.subscribed.remove(&id);
            });
            match self.engine().socket_closed(&id) {
                Ok(fx) => self.apply(fx),
                Err(e) => worker::console_error!("close: {e}"),
            }
            self.schedule().await;
        }
        // The socket may already be gone; 1005/1006 may not be sent.
        let code = u16::try_from(code)
            .ok()
            .filter(|c| (1000..5000).contains(c) && *c != 1005 && *c != 1006)
            .unwrap_or(1000);
        let _ = ws.close(Some(code), Some("closed"));
    }

    fn socket_id(ws: &WebSocket) -> Option<String> {
        ws.deserialize_attachment::<SocketTag>()
            .ok()
            .flatten()
            .map(|t| t.id)
    }
}

/// Whether effects changed something a deadline depends on (sandbox state, a prompt
/// starting or ending), so the alarm must be recomputed.
fn moves_deadlines(fx: &Effects) -> bool {
    fx.spawn_wanted
        || !fx.closes.is_empty()
        || fx
            .to_sandbox
            .iter()
            .any(|c| matches!(c, SandboxCommand::Prompt { .. }))
        || fx.outbound.iter().any(|o| {
            matches!(
                o.message,
                ServerMessage::SandboxReady { .. }
                    | ServerMessage::SandboxStatus { .. }
                    | ServerMessage::ProcessingStatus { .. }
                    | ServerMessage::Subscribed { .. }
            )
        })
}

/// Sends one text to many sockets, crossing into JS once for the text rather than once
/// per socket.
fn send_to_all<'a>(sockets: impl Iterator<Item = &'a WebSocket>, text: &str) {
    use wasm_bindgen::JsCast;
    let js_text = wasm_bindgen::JsValue::from_str(text);
    let mut send: Option<worker::js_sys::Function> = None;
    for ws in sockets {
        let raw: &wasm_bindgen::JsValue = ws.as_ref();
        if send.is_none() {
            send = worker::js_sys::Reflect::get(raw, &wasm_bindgen::JsValue::from_str("send"))
                .ok()
                .and_then(|f| f.dyn_into().ok());
        }
        match &send {
            Some(f) => {
                let _ = f.call1(raw, &js_text);
            }
            None => {
                let _ = ws.send_with_str(text);
            }
        }
    }
}

/// Writes the session's index row and participants to D1, never moving `updated_at` back.
async fn write_index(env: &Env, update: &IndexUpdate) -> Result<()> {
    let db = env.d1("DB")?;
    let mut statements = vec![db
        .prepare(
            "UPDATE sessions SET title = ?1, status = ?2, message_count = ?3, updated_at = ?4 WHERE id = ?5 AND updated_at <= ?4",
        )
        .bind(&[
            update.title.clone().map_or(wasm_bindgen::JsValue::NULL, Into::into),
            update.status.as_str().into(),
            (update.message_count as f64).into(),
            (update.updated_at as f64).into(),
            update.id.as_str().into(),
        ])?];
    for user in &update.participants {
        statements.push(
            db.prepare(
                "INSERT OR IGNORE INTO session_participants (session_id, user_id) VALUES (?1, ?2)",
            )
            .bind(&[update.id.as_str().into(), user.as_str().into()])?,
        );
    }
    db.batch(statements).await?;
    Ok(())
}

impl DurableObject for SessionDO {
    fn new(state: State, env: Env) -> Self {
        let store = DoStore {
            sql: state.storage().sql(),
        };
        if let Err(e) = schema::migrate(&store) {
            worker::console_error!("schema migration failed: {e}");
        }
        // Pings are answered by the runtime without waking the object.
        if let Ok(pair) = worker::worker_sys::WebSocketRequestResponsePair::new(
            r#"{"type":"ping"}"#,
            r#"{"type":"pong"}"#,
        ) {
            state.set_websocket_auto_response(&pair);
        }
        let this = SessionDO {
            state,
            env,
            store,
            registry: RefCell::new(None),
            index_sync: Rc::default(),
        };
        // Sockets recorded in SQLite but no longer held by the runtime (lost in a restart)
        // are forgotten, and their owners leave.
        let live: Vec<String> = this
            .state
            .get_websockets()
            .iter()
            .filter_map(Self::socket_id)
            .collect();
        if let Ok(fx) = this.engine().prune_sockets(&live) {
            this.apply(fx);
        }
        this
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        self.route(req).await
    }

    async fn alarm(&self) -> Result<Response> {
        // Idempotent: every check looks at the clock and the stored state.
        let engine = self.engine();
        match engine.on_alarm(now_ms()) {
            Ok(out) => {
                self.carry_out(out.fx).await;
                if let Some(sandbox_id) = out.check_provider {
                    let gone = match self.provider() {
                        Some(p) => match p.status(&sandbox_id).await {
                            Ok(info) => info.status != "running",
                            // A provider that cannot say is asked again at the heartbeat deadline.
                            Err(e) => !e.is_transient(),
                        },
                        None => true,
                    };
                    if gone {
                        if let Ok(fx) = engine.sandbox_lost(
                            &sandbox_id,
                            "the sandbox's process is gone",
                            now_ms(),
                        ) {
                            self.carry_out(fx).await;
                        }
                    }
                }
            }
            Err(e) => worker::console_error!("alarm: {e}"),
        }
        self.schedule().await;
        Response::ok("ok")
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        let Some(tag) = ws.deserialize_attachment::<SocketTag>().ok().flatten() else {
            let _ = ws.close(Some(1011), Some("unknown socket"));
            return Ok(());
        };
        let id = tag.id;
        self.with_registry(|r| {
            r.sockets.entry(id.clone()).or_insert_with(|| ws.clone());
        });
        let text = match message {
            WebSocketIncomingMessage::String(text) => Some(text),
            WebSocketIncomingMessage::Binary(_) => None,
        };
        if tag.kind == KIND_SANDBOX {
            let fx = match text {
                Some(text) => self.engine().on_sandbox_frame(&text, now_ms()),
                None => {
                    let mut fx = Effects::none();
                    fx.to_sandbox.push(SandboxCommand::Error {
                        code: "bad_request".into(),
                        message: "binary frames are not accepted".into(),
                    });
                    fx
                }
            };
            self.carry_out(fx).await;
            return Ok(());
        }
        let fx = match text {
            Some(text) => self.engine().on_client_frame(&id, &text, now_ms()),
            None => {
                let mut fx = Effects::none();
                fx.to(
                    &id,
                    ServerMessage::error(&ApiError::bad_request(
                        "binary frames are not accepted; send JSON text",
                    )),
                );
                fx
            }
        };
        self.carry_out(fx).await;
        Ok(())
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        _reason: String,
        _was_clean: bool,
    ) -> Result<()> {
        self.socket_gone(ws, code).await;
        Ok(())
    }

    async fn websocket_error(&self, ws: WebSocket, _error: worker::Error) -> Result<()> {
        self.socket_gone(ws, 1011).await;
        Ok(())
    }
}
