//! The workers-rs shell of the SessionDO: it binds the engine to the object's SQLite, its
//! WebSockets and its alarm. Decisions live in the engine; this only moves bytes.

use crate::schema;
use crate::store::{Row, SqlValue, Store, StoreError, StoreResult};
use inspect_protocol::health::DurableProbe;
use inspect_protocol::ApiError;
use worker::{
    durable_object, DurableObject, Env, Request, Response, Result, SqlStorage, SqlStorageValue,
    State, WebSocket, WebSocketIncomingMessage,
};

/// The Durable Object's own SQLite, behind the engine's [`Store`] trait.
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

#[durable_object]
pub struct SessionDO {
    state: State,
    #[allow(dead_code)]
    env: Env,
    store: DoStore,
}

fn json_error(err: &ApiError) -> Result<Response> {
    Ok(Response::from_json(&err.body())?.with_status(err.status()))
}

impl SessionDO {
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
}

impl DurableObject for SessionDO {
    fn new(state: State, env: Env) -> Self {
        let store = DoStore {
            sql: state.storage().sql(),
        };
        if let Err(e) = schema::migrate(&store) {
            worker::console_error!("schema migration failed: {e}");
        }
        SessionDO { state, env, store }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let path = req.path();
        match path.as_str() {
            "/internal/health" => match self.probe() {
                Ok(p) => Response::from_json(&p),
                Err(e) => json_error(&ApiError::internal(e.to_string())),
            },
            _ => json_error(&ApiError::not_found(format!("no object route {path}"))),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        Response::ok("no deadlines")
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        _message: WebSocketIncomingMessage,
    ) -> Result<()> {
        let _ = &self.state;
        ws.close(Some(1011), Some("not served yet"))
    }

    async fn websocket_close(
        &self,
        _ws: WebSocket,
        _code: usize,
        _reason: String,
        _was_clean: bool,
    ) -> Result<()> {
        Ok(())
    }

    async fn websocket_error(&self, _ws: WebSocket, _error: worker::Error) -> Result<()> {
        Ok(())
    }
}
