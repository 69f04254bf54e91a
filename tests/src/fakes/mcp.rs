//! An MCP server on the Streamable HTTP transport, as the Model Context Protocol's
//! specification (2025-06-18, "Transports" and "Lifecycle") describes it: one endpoint
//! taking JSON-RPC messages by `POST` (the client must accept both `application/json` and
//! `text/event-stream`; a request is answered with one JSON object, a notification with
//! 202 and no body), `GET` answered 405 (no server-initiated stream), the session id the
//! server gives at `initialize` (`Mcp-Session-Id`) required on every later request (400
//! without it, 404 for an unknown one), `initialize` first, then `tools/list` and
//! `tools/call`. It serves one tool and, when a bearer token is set, refuses requests
//! without it (401) as an authorization-protected server does.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];

#[derive(Default)]
struct Inner {
    token: Option<String>,
    tool: (String, String),
    sessions: Vec<String>,
    /// Each JSON-RPC method received, in order.
    methods: Vec<String>,
    /// Each `Authorization` header received.
    authorizations: Vec<String>,
}

pub struct FakeMcp {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeMcp {
    /// A server at `<url>` offering the tool `tool` (described as `description`), which
    /// wants `Authorization: Bearer <token>` when a token is given.
    pub async fn start(
        tool: &str,
        description: &str,
        token: Option<&str>,
    ) -> anyhow::Result<FakeMcp> {
        let inner = Arc::new(Mutex::new(Inner {
            token: token.map(str::to_owned),
            tool: (tool.to_owned(), description.to_owned()),
            ..Default::default()
        }));
        let app = Router::new()
            .route("/mcp", post(message).get(no_stream).delete(end_session))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeMcp {
            url: format!("http://{addr}/mcp"),
            inner,
            task,
        })
    }

    pub fn methods(&self) -> Vec<String> {
        self.inner
            .lock()
            .map(|i| i.methods.clone())
            .unwrap_or_default()
    }

    pub fn authorizations(&self) -> Vec<String> {
        self.inner
            .lock()
            .map(|i| i.authorizations.clone())
            .unwrap_or_default()
    }
}

impl Drop for FakeMcp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Response {
    (
        StatusCode::OK,
        Json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})),
    )
        .into_response()
}

async fn no_stream() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        "this server offers no SSE stream",
    )
        .into_response()
}

async fn end_session(State(inner): State<Arc<Mutex<Inner>>>, headers: HeaderMap) -> Response {
    let id = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if let Ok(mut i) = inner.lock() {
        i.sessions.retain(|s| s != &id);
    }
    StatusCode::OK.into_response()
}

async fn message(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let accept = header("accept");
    if !(accept.contains("application/json") && accept.contains("text/event-stream")) {
        return (
            StatusCode::NOT_ACCEPTABLE,
            "the client must accept application/json and text/event-stream",
        )
            .into_response();
    }
    let authorization = header("authorization");
    let (expected, tool) = {
        let Ok(mut i) = inner.lock() else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        i.authorizations.push(authorization.clone());
        (i.token.clone(), i.tool.clone())
    };
    if let Some(token) = expected {
        if authorization != format!("Bearer {token}") {
            return (
                StatusCode::UNAUTHORIZED,
                [("WWW-Authenticate", "Bearer")],
                "invalid_token",
            )
                .into_response();
        }
    }
    let Ok(msg) = serde_json::from_str::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error"}})),
        )
            .into_response();
    };
    let method = msg["method"].as_str().unwrap_or_default().to_owned();
    let id = msg.get("id").cloned();
    if let Ok(mut i) = inner.lock() {
        i.methods.push(method.clone());
    }
    if method == "initialize" {
        let asked = msg["params"]["protocolVersion"]
            .as_str()
            .unwrap_or_default();
        let version = if VERSIONS.contains(&asked) {
            asked
        } else {
            VERSIONS[0]
        };
        let session = format!("mcp-{}", uuid_like());
        if let Ok(mut i) = inner.lock() {
            i.sessions.push(session.clone());
        }
        return (
            StatusCode::OK,
            [(SESSION_HEADER, session.as_str())],
            Json(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "fake-mcp", "version": "1.0.0"}
            }})),
        )
            .into_response();
    }
    let session = header(SESSION_HEADER);
    if session.is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            "Mcp-Session-Id is required after initialize",
        )
            .into_response();
    }
    if !inner
        .lock()
        .map(|i| i.sessions.contains(&session))
        .unwrap_or(false)
    {
        return (StatusCode::NOT_FOUND, "unknown session").into_response();
    }
    let Some(id) = id else {
        // A notification (or a response from the client): accepted, no body.
        return StatusCode::ACCEPTED.into_response();
    };
    match method.as_str() {
        "ping" => Json(json!({"jsonrpc": "2.0", "id": id, "result": {}})).into_response(),
        "tools/list" => Json(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{
            "name": tool.0,
            "description": tool.1,
            "inputSchema": {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}
        }]}}))
        .into_response(),
        "tools/call" if msg["params"]["name"] == tool.0 => Json(json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": format!("order {} shipped", msg["params"]["arguments"]["order"].as_str().unwrap_or("?"))}],
            "isError": false
        }}))
        .into_response(),
        "tools/call" => rpc_error(&id, -32602, "unknown tool"),
        "prompts/list" | "resources/list" => rpc_error(&id, -32601, "method not found"),
        _ => rpc_error(&id, -32601, "method not found"),
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    format!(
        "{:016x}",
        N.fetch_add(1, Ordering::Relaxed) ^ 0x5eed_0000_0000_0000
    )
}
