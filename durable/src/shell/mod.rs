//! The workers-rs shell of the SessionDO: it binds the engine to the object's SQLite, its
//! hibernating WebSockets, its alarm and the D1 index. Decisions live in the engine; this
//! only moves bytes.
//!
//! The Worker forwards `/sessions/:id/<action>` here with the caller in `X-Inspect-Actor`
//! (JSON) and the session id in `X-Inspect-Session-Id`; nothing outside the Worker can
//! reach a Durable Object, so these headers are trusted.

use crate::engine::deadlines::SessionLimits;
use crate::engine::plan::SpawnPlan;
use crate::engine::sockets::{KIND_CLIENT, KIND_SANDBOX};
use crate::engine::{ids, timeline, Effects, Session, Target};
use crate::schema;
use crate::store::{Row, SqlValue, Store, StoreError, StoreResult};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::health::DurableProbe;
use inspect_protocol::provider::{ProviderKind, Resumed, SandboxRef};
use inspect_protocol::sandbox::SandboxCommand;
use inspect_protocol::session::{
    Actor, ArtifactList, IndexUpdate, MessageList, ParticipantList, PromptRequest, SessionInit,
    SessionInitAnswer, SessionStatus, TitleRequest,
};
use inspect_protocol::ApiError;
use inspect_runtime::log::LogLine;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use worker::{
    durable_object, DurableObject, Env, Method, Request, Response, Result, SqlStorage,
    SqlStorageValue, State, WebSocket, WebSocketIncomingMessage, WebSocketPair,
};

mod attention;
mod capacity;
mod fanout;
mod index;
mod lifecycle;
mod progress;
mod pulls;
mod reviews;
mod routes;
mod sandboxes;
mod staging;
mod store;

use sandboxes::ViaBinding;

pub use store::DoStore;

pub use crate::headers::{ACTOR_HEADER, ORIGIN_HEADER, SESSION_HEADER, VOUCHED_HEADER};

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
    /// A spawn will carry the next write in its own batch ([`SessionDO::hold_index`]).
    held: bool,
    /// A write asked for while held.
    pending: bool,
}

#[durable_object]
pub struct SessionDO {
    state: State,
    env: Env,
    store: DoStore,
    registry: Rc<RefCell<Option<Registry>>>,
    index_sync: Rc<RefCell<IndexSync>>,
    /// Requests waiting for the sandbox to answer a `push`, by request id.
    pushes: RefCell<HashMap<String, futures::channel::oneshot::Sender<pulls::PushAnswer>>>,
    /// Repositories a pull request is being made for right now.
    pr_claims: RefCell<HashSet<String>>,
    /// Progress updates in flight, so the final answer lands after them.
    progress_updates: Rc<progress::ProgressUpdates>,
    /// The provider is stopping a sandbox right now: a spawn waits until it has (a resume
    /// would otherwise find the machine half-stopped).
    stopping: std::cell::Cell<bool>,
    /// A spawn was asked for while stopping: it runs when the stop has ended.
    spawn_deferred: std::cell::Cell<bool>,
    /// Whether the last spawn named set-up-only secrets (unknown after a restart: then
    /// D1 says), so a booting sandbox without any connects without a read.
    setup_secrets_named: std::cell::Cell<Option<bool>>,
    /// Streamed parts told to clients and not yet written.
    staging: Rc<RefCell<staging::Staging>>,
    /// Whether the database holds the schema (`/init` made a session here). Until it does
    /// every route but `/init` answers 404 and writes nothing.
    schema: std::cell::Cell<SchemaState>,
    /// The deployment's models as last read from D1 (when, in ms): prompts are checked
    /// against them; read again after [`MODELS_TTL_MS`].
    models: RefCell<Option<(i64, inspect_protocol::models::ModelCatalog)>>,
    /// The session's origin is stored (the first one a request carried is kept): later
    /// requests need not write it again.
    origin_kept: std::cell::Cell<bool>,
    /// The session's id once read (it never changes; forgotten when the session is deleted).
    known_id: RefCell<Option<String>>,
}

/// What the object knows of its database's schema.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SchemaState {
    /// Made, and brought to the newest version.
    Ready,
    /// None: the object found its database empty when it started.
    Absent,
    /// Not known to be either (the check or a migration failed, or the session was just
    /// deleted): made or brought forward when `/init` asks.
    Unknown,
}

/// A change to the deployment's models reaches a running session's prompts within this.
const MODELS_TTL_MS: i64 = 30_000;

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

pub use inspect_runtime::answer::{json_error, json_ok, json_text};

impl SessionDO {
    fn engine(&self) -> Session<'_, DoStore> {
        Session::new(&self.store)
    }

    /// The refusal of a prompt sent on a client socket when a budget of its person's is
    /// spent.
    async fn budget_refusal_for_socket(&self, ws_id: &str) -> Option<ApiError> {
        let user = self.engine().socket_user(ws_id).ok().flatten()?;
        inspect_runtime::budgets::check_over_binding(&self.env, &user, now_ms())
            .await
            .err()
    }

    /// The deployment's models (read from D1 at most every 30 s). When D1 cannot answer,
    /// none: prompts are then checked against the efforts any model accepts only.
    async fn models(&self) -> Option<inspect_protocol::models::ModelCatalog> {
        let now = now_ms();
        if let Some((at, catalog)) = self.models.borrow().as_ref() {
            if now - at < MODELS_TTL_MS {
                return Some(catalog.clone());
            }
        }
        match inspect_models::store::catalog(&self.env).await {
            Ok(catalog) => {
                self.keep_models(now, catalog.clone());
                Some(catalog)
            }
            Err(e) => {
                self.log(LogLine::warn("session", "models_unreadable").detail(&e.message));
                None
            }
        }
    }

    /// Keeps `catalog` as the models read at `at` (the control plane's, at creation).
    pub(super) fn keep_models(&self, at: i64, catalog: inspect_protocol::models::ModelCatalog) {
        *self.models.borrow_mut() = Some((at, catalog));
    }

    /// The session's id, read from SQLite once (a session not made here: not found).
    pub(super) fn session_id(&self) -> std::result::Result<String, ApiError> {
        if let Some(id) = self.known_id.borrow().as_ref() {
            return Ok(id.clone());
        }
        let id = self.engine().session_id()?;
        *self.known_id.borrow_mut() = Some(id.clone());
        Ok(id)
    }

    /// Writes a log line about this session (its id added).
    pub(super) fn log(&self, line: inspect_runtime::log::LogLine) {
        let sid = self.session_id().unwrap_or_default();
        inspect_runtime::log::emit(line.session(&sid));
    }

    /// Creates (or brings forward) the schema: `/init` and the health probe's object.
    fn ensure_schema(&self) -> StoreResult<()> {
        match self.schema.get() {
            SchemaState::Ready => return Ok(()),
            // A new session's object: the whole schema in one script.
            SchemaState::Absent => schema::create(&self.store)?,
            SchemaState::Unknown => schema::migrate(&self.store)?,
        };
        self.schema.set(SchemaState::Ready);
        Ok(())
    }

    fn probe(&self) -> StoreResult<DurableProbe> {
        self.ensure_schema()?;
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

    /// A socket closed or failed: forget it, let the others know, complete the close.
    async fn socket_gone(&self, ws: WebSocket, code: usize) {
        let tag = ws.deserialize_attachment::<SocketTag>().ok().flatten();
        if let Some(tag) = tag.filter(|t| t.kind == KIND_SANDBOX) {
            self.with_registry(|r| r.sockets.remove(&tag.id));
            // A push asked of this sandbox will not be answered now: say so at once.
            for (_, waiter) in self.pushes.borrow_mut().drain() {
                let _ = waiter.send(Err("the sandbox disconnected during the push".into()));
            }
            let engine = self.engine();
            match engine.socket_closed(&tag.id) {
                Ok(fx) => self.apply(fx),
                Err(e) => self.log(LogLine::error("sandbox", "close_failed").detail(e)),
            }
            self.log(LogLine::info("sandbox", "disconnected").with("code", code as i64));
            let _ = engine.sandbox_disconnected(now_ms());
            self.schedule().await;
        } else if let Some(id) = Self::socket_id(&ws) {
            self.with_registry(|r| {
                r.sockets.remove(&id);
                r.subscribed.remove(&id);
            });
            match self.engine().socket_closed(&id) {
                Ok(fx) => self.apply(fx),
                Err(e) => self.log(LogLine::error("client", "close_failed").detail(e)),
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

impl DurableObject for SessionDO {
    fn new(state: State, env: Env) -> Self {
        let staging: Rc<RefCell<staging::Staging>> = Rc::default();
        let store = DoStore {
            sql: state.storage().sql(),
            staging: Some(staging.clone()),
        };
        // Only an object a session was made in has a schema to bring forward; anything
        // else stays empty (strangers' ids never reach here, but nothing is written if
        // one does).
        let schema_state = match schema::exists(&store) {
            Ok(true) => match schema::bring_forward(&store) {
                Ok(_) => SchemaState::Ready,
                Err(e) => {
                    inspect_runtime::log::emit(
                        LogLine::error("session", "schema_migration_failed").detail(e),
                    );
                    SchemaState::Unknown
                }
            },
            Ok(false) => SchemaState::Absent,
            Err(e) => {
                inspect_runtime::log::emit(
                    LogLine::error("session", "schema_check_failed").detail(e),
                );
                SchemaState::Unknown
            }
        };
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
            registry: Rc::new(RefCell::new(None)),
            index_sync: Rc::default(),
            pushes: RefCell::default(),
            pr_claims: RefCell::default(),
            stopping: Default::default(),
            spawn_deferred: Default::default(),
            setup_secrets_named: Default::default(),
            progress_updates: Rc::default(),
            staging,
            schema: std::cell::Cell::new(schema_state),
            models: RefCell::new(None),
            origin_kept: Default::default(),
            known_id: RefCell::new(None),
        };
        if schema_state != SchemaState::Ready {
            return this;
        }
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
                if let Some(sandbox_id) = out.extend_sandbox {
                    if let Some(p) = self.provider() {
                        // A refusal (the plan's longest lifetime reached) is said, not fatal:
                        // the vendor ends the sandbox and the session resumes it.
                        if let Err(e) = p.extend(&self.sandbox_at(&sandbox_id)).await {
                            self.log(
                                LogLine::warn("sandbox", "extend_failed").detail(e.to_string()),
                            );
                        }
                    }
                }
                if let Some(sandbox_id) = out.refresh_links {
                    self.refresh_links(&sandbox_id).await;
                }
                if let Some(sandbox_id) = out.check_provider {
                    let gone = match self.provider() {
                        Some(p) => match p.status(&self.sandbox_at(&sandbox_id)).await {
                            Ok(info) if info.status == "running" => {
                                // On its way: how far, in the provider's words.
                                if let Some(progress) = &info.detail {
                                    if let Ok(fx) =
                                        engine.sandbox_progress(&sandbox_id, progress, now_ms())
                                    {
                                        self.apply(fx);
                                    }
                                }
                                None
                            }
                            Ok(info) => Some(info.detail),
                            // A provider that cannot say is asked again at the heartbeat deadline.
                            Err(e) if e.is_transient() => None,
                            Err(e) => Some(Some(e.to_string())),
                        },
                        None => Some(None),
                    };
                    if let Some(detail) = gone {
                        let why = match detail {
                            Some(d) => format!("the sandbox's process is gone ({d})"),
                            None => "the sandbox's process is gone".to_owned(),
                        };
                        if let Ok(fx) = engine.sandbox_lost(&sandbox_id, &why, now_ms()) {
                            self.carry_out(fx).await;
                        }
                    }
                }
            }
            Err(e) => self.log(LogLine::error("session", "alarm_failed").detail(e)),
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
                Some(text) => {
                    if self.stage_sandbox_frame(&ws, &text) {
                        return Ok(());
                    }
                    self.resolve_pushes(&text);
                    self.engine().on_sandbox_frame(&text, now_ms())
                }
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
        // New work is refused once a budget of the person's is spent.
        if text
            .as_deref()
            .is_some_and(crate::engine::queue::frame_is_prompt)
        {
            if let Some(refused) = self.budget_refusal_for_socket(&id).await {
                let mut fx = Effects::none();
                fx.to(&id, ServerMessage::error(&refused));
                self.carry_out(fx).await;
                return Ok(());
            }
        }
        let fx = match text {
            Some(text) => {
                // Subscribes, pings and plain prompts never wait on the catalog.
                let models = match crate::engine::queue::frame_names_a_model(&text) {
                    true => self.models().await,
                    false => None,
                };
                self.engine()
                    .with_models(models.as_ref())
                    .on_client_frame_staged(&id, &text, now_ms())
            }
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
