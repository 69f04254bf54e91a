//! A scripted model server speaking the OpenAI-compatible chat API (streamed, or one object
//! when a request says `"stream": false`) and Anthropic's Messages API (`POST
//! /v1/messages`, its server-sent events as Anthropic documents them: `message_start`,
//! `content_block_start`/`_delta`/`_stop` with `text_delta` or `input_json_delta`,
//! `message_delta` with the stop reason, `message_stop`; a request without
//! `anthropic-version`, a key, `model` or `max_tokens` is refused as Anthropic refuses it).
//! Each request that offers tools takes the next scripted reply; requests without tools
//! (OpenCode's title and summary calls) get fixed text and consume nothing.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use futures::stream;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub enum Reply {
    /// Call one tool with these arguments.
    Tool { name: String, args: Value },
    /// Answer with text and stop.
    Text(String),
}

impl Reply {
    pub fn tool(name: &str, args: Value) -> Reply {
        Reply::Tool {
            name: name.into(),
            args,
        }
    }
    pub fn text(t: &str) -> Reply {
        Reply::Text(t.into())
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    /// Every request that consumed a reply, for assertions.
    requests: Vec<Value>,
    calls: usize,
    /// When set, the Messages API takes only these bearer tokens (an OAuth provider's).
    bearer_only: Option<Arc<Mutex<std::collections::HashSet<String>>>>,
    /// Calls refused for their credentials.
    refused: usize,
    /// When set, each conversation gets these replies in turn (the n-th for a request
    /// that already holds n answers of the model), whatever other conversations ask
    /// meanwhile: for sessions that run side by side.
    turns: Option<Vec<Reply>>,
}

pub struct FakeModel {
    pub base_url: String,
    script: Arc<Mutex<Script>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeModel {
    pub async fn start(replies: Vec<Reply>) -> anyhow::Result<FakeModel> {
        let script = Arc::new(Mutex::new(Script {
            replies: replies.into(),
            ..Default::default()
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/messages", post(messages))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeModel {
            base_url: format!("http://{addr}/v1"),
            script,
            task,
        })
    }

    /// Where Claude Code finds the Anthropic API here (`ANTHROPIC_BASE_URL`: without `/v1`).
    pub fn anthropic_base_url(&self) -> String {
        self.base_url.trim_end_matches("/v1").to_owned()
    }

    /// From now on the Messages API takes only a bearer token of these (as Anthropic takes
    /// an OAuth access token: `Authorization: Bearer`, with the `oauth-2025-04-20` beta).
    pub fn require_bearer(&self, tokens: Arc<Mutex<std::collections::HashSet<String>>>) {
        if let Ok(mut s) = self.script.lock() {
            s.bearer_only = Some(tokens);
        }
    }

    /// Calls refused for their credentials.
    pub fn refused(&self) -> usize {
        self.script.lock().map(|s| s.refused).unwrap_or(0)
    }

    /// Adds replies at the end of the script.
    pub fn push(&self, replies: Vec<Reply>) {
        if let Ok(mut s) = self.script.lock() {
            s.replies.extend(replies);
        }
    }

    /// Answers every conversation with `turns`, each at its own pace (the queue is left
    /// aside): the first reply to a conversation's first request, the second once it
    /// holds one answer, and so on.
    pub fn per_conversation(&self, turns: Vec<Reply>) {
        if let Ok(mut s) = self.script.lock() {
            s.turns = Some(turns);
        }
    }

    /// The scripted requests seen so far.
    pub fn requests(&self) -> Vec<Value> {
        self.script
            .lock()
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }

    pub fn remaining(&self) -> usize {
        self.script.lock().map(|s| s.replies.len()).unwrap_or(0)
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The next scripted reply for a request that offers tools; fixed text otherwise.
fn take(script: &Arc<Mutex<Script>>, req: &Value, offers_tools: bool) -> Option<(Reply, usize)> {
    let mut s = script.lock().ok()?;
    s.calls += 1;
    let n = s.calls;
    if let (true, Some(turns)) = (offers_tools, &s.turns) {
        let answered = req["messages"]
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
            .unwrap_or(0);
        let reply = turns
            .get(answered)
            .cloned()
            .unwrap_or_else(|| Reply::text("Nothing more to do."));
        s.requests.push(req.clone());
        return Some((reply, n));
    }
    if offers_tools {
        s.requests.push(req.clone());
        Some((
            s.replies
                .pop_front()
                .unwrap_or_else(|| Reply::text("Nothing more to do.")),
            n,
        ))
    } else {
        Some((Reply::text("Scripted session"), n))
    }
}

fn anthropic_error(status: StatusCode, kind: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
    )
        .into_response()
}

/// `POST /v1/messages`: Anthropic's Messages API, streamed or not.
async fn messages(
    State(script): State<Arc<Mutex<Script>>>,
    headers: HeaderMap,
    Json(req): Json<Value>,
) -> Response {
    if headers.get("anthropic-version").is_none() {
        return anthropic_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "anthropic-version: header is required",
        );
    }
    if headers.get("x-api-key").is_none() && headers.get("authorization").is_none() {
        return anthropic_error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "x-api-key header is required",
        );
    }
    let bearer_only = script.lock().ok().and_then(|s| s.bearer_only.clone());
    if let Some(tokens) = bearer_only {
        let bearer = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        let beta = headers
            .get("anthropic-beta")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let known = tokens.lock().map(|t| t.contains(bearer)).unwrap_or(false);
        if !known || !beta.contains("oauth-2025-04-20") || headers.get("x-api-key").is_some() {
            if let Ok(mut s) = script.lock() {
                s.refused += 1;
            }
            return anthropic_error(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "invalid bearer token",
            );
        }
    }
    for field in ["model", "max_tokens", "messages"] {
        if req.get(field).is_none() {
            return anthropic_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("{field}: Field required"),
            );
        }
    }
    let offers_tools = req
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let Some((reply, n)) = take(&script, &req, offers_tools) else {
        return "poisoned".into_response();
    };
    let model = req["model"].clone();
    let usage = json!({"input_tokens": 12, "output_tokens": 7});
    let (content, stop) = match &reply {
        Reply::Text(text) => (json!([{"type": "text", "text": text}]), "end_turn"),
        Reply::Tool { name, args } => (
            json!([{"type": "tool_use", "id": format!("toolu_{n:04}"), "name": name, "input": args}]),
            "tool_use",
        ),
    };
    if req.get("stream").and_then(Value::as_bool) != Some(true) {
        return Json(json!({
            "id": format!("msg_{n:04}"), "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage,
        }))
        .into_response();
    }
    let event = |kind: &str, data: Value| Event::default().event(kind).data(data.to_string());
    let mut events = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{n:04}"), "type": "message", "role": "assistant",
               "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
               "usage": {"input_tokens": 12, "output_tokens": 1}}}),
    )];
    match reply {
        Reply::Text(text) => {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ));
            for w in text.split_inclusive(' ') {
                events.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}),
                ));
            }
        }
        Reply::Tool { name, args } => {
            events.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "tool_use", "id": format!("toolu_{n:04}"), "name": name, "input": {}}}),
            ));
            let args = args.to_string();
            let (a, b) = args.split_at(args.len() / 2);
            for part in [a, b] {
                events.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": part}}),
                ));
            }
        }
    }
    events.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 7}}),
    ));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    Sse::new(stream::iter(events.into_iter().map(Ok::<_, Infallible>))).into_response()
}

fn chunk(n: usize, delta: Value, finish: Option<&str>) -> Event {
    let body = json!({
        "id": format!("chatcmpl-{n}"),
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    Event::default().data(body.to_string())
}

async fn chat(State(script): State<Arc<Mutex<Script>>>, Json(req): Json<Value>) -> Response {
    let offers_tools = req
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let Some((reply, n)) = take(&script, &req, offers_tools) else {
        return "poisoned".into_response();
    };
    // `"stream": false` (the Slack classifier): one `chat.completion` object.
    if req.get("stream").and_then(Value::as_bool) == Some(false) {
        let message = match &reply {
            Reply::Text(text) => json!({"role": "assistant", "content": text}),
            Reply::Tool { name, args } => {
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": format!("call_{n}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}
                ]})
            }
        };
        let finish = match reply {
            Reply::Text(_) => "stop",
            Reply::Tool { .. } => "tool_calls",
        };
        return Json(json!({
            "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 0, "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
        }))
        .into_response();
    }
    let mut events = vec![chunk(n, json!({"role": "assistant"}), None)];
    match reply {
        Reply::Text(text) => {
            // Stream it in a few pieces, as a model does.
            let words: Vec<&str> = text.split_inclusive(' ').collect();
            for w in words {
                events.push(chunk(n, json!({"content": w}), None));
            }
            events.push(chunk(n, json!({}), Some("stop")));
        }
        Reply::Tool { name, args } => {
            let id = format!("call_{n}");
            events.push(chunk(
                n,
                json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
            let args = args.to_string();
            let (a, b) = args.split_at(args.len() / 2);
            for part in [a, b] {
                events.push(chunk(
                    n,
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                    None,
                ));
            }
            events.push(chunk(n, json!({}), Some("tool_calls")));
        }
    }
    events.push(
        Event::default().data(
            json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "created": 0, "model": "fake-model", "choices": [],
                   "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}})
            .to_string(),
        ),
    );
    events.push(Event::default().data("[DONE]"));
    Sse::new(stream::iter(events.into_iter().map(Ok::<_, Infallible>))).into_response()
}
