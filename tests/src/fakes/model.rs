//! A scripted model server speaking the OpenAI-compatible chat API (streamed, or one object
//! when a request says `"stream": false`), the only
//! fake in the end-to-end tests. Each chat request that offers tools takes the next
//! scripted reply; requests without tools (OpenCode's title and summary calls) get fixed
//! text and consume nothing.

use axum::extract::State;
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

    /// Adds replies at the end of the script.
    pub fn push(&self, replies: Vec<Reply>) {
        if let Ok(mut s) = self.script.lock() {
            s.replies.extend(replies);
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
    let (reply, n) = {
        let Ok(mut s) = script.lock() else {
            return "poisoned".into_response();
        };
        s.calls += 1;
        let n = s.calls;
        if offers_tools {
            s.requests.push(req.clone());
            (
                s.replies
                    .pop_front()
                    .unwrap_or_else(|| Reply::text("Nothing more to do.")),
                n,
            )
        } else {
            (Reply::text("Scripted session"), n)
        }
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
