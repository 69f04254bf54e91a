//! A fake Slack following the Web API's documented methods and errors, for the bot's
//! end-to-end tests: `auth.test`, `chat.postMessage`, `chat.update`, `chat.postEphemeral`,
//! `reactions.add`/`remove` (`already_reacted`, `no_reaction`), `conversations.replies`
//! (`oldest` exclusive unless `inclusive`), `conversations.history`, `conversations.info`, `users.info`, `views.publish`; every method
//! wants the bot token (`not_authed`, `invalid_auth`); one method can be made to answer
//! `ratelimited` with `Retry-After`. Private files are served with bearer auth; files go out
//! through `files.getUploadURLExternal`, the upload URL and `files.completeUploadExternal`. The test
//! side signs and sends deliveries exactly as Slack does.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub const BOT_TOKEN: &str = "xoxb-fake-bot-token";
pub const BOT_USER: &str = "UBOT";
pub const SIGNING_SECRET: &str = "fake-slack-signing-secret";

/// A message in a channel, as the fake keeps it.
#[derive(Debug, Clone)]
pub struct Posted {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    pub user: String,
    pub text: String,
    pub blocks: Value,
    /// Every version `chat.update` gave it, oldest first.
    pub updates: Vec<Value>,
    /// Files shared with it (what `conversations.history`/`replies` show).
    pub files: Value,
}

#[derive(Default)]
struct World {
    messages: Vec<Posted>,
    reactions: Vec<(String, String, String)>,
    removed_reactions: Vec<(String, String, String)>,
    ephemeral: Vec<Value>,
    views: Vec<Value>,
    files: HashMap<String, Vec<u8>>,
    users: HashMap<String, (String, String)>,
    /// Users whose address Slack has not confirmed.
    unconfirmed: Vec<String>,
    channels: HashMap<String, (String, String)>,
    /// The next call of this method answers `ratelimited`.
    limit_next: Option<String>,
    /// `chat.update` calls whose text starts with this are applied only after this many
    /// milliseconds (a slow network: Slack applies each update as it arrives).
    hold_updates: Option<(String, u64)>,
    calls: Vec<String>,
    clock: u64,
    /// Where the fake serves (upload URLs point back at it).
    base_url: String,
    /// Uploads begun with `files.getUploadURLExternal`: id → (name, declared length,
    /// the bytes once sent to the upload URL).
    uploads: HashMap<String, (String, usize, Option<Vec<u8>>)>,
}

pub struct FakeSlack {
    pub base_url: String,
    world: Arc<Mutex<World>>,
    task: tokio::task::JoinHandle<()>,
}

type Shared = Arc<Mutex<World>>;

impl FakeSlack {
    pub async fn start() -> anyhow::Result<FakeSlack> {
        let world: Shared = Arc::default();
        let app = Router::new()
            .route("/api/{method}", get(method).post(method))
            .route("/files/{name}", get(file))
            .route("/upload/{id}", axum::routing::post(upload))
            .with_state(world.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        world.lock().unwrap_or_else(|e| e.into_inner()).base_url = format!("http://{addr}");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeSlack {
            base_url: format!("http://{addr}"),
            world,
            task,
        })
    }

    /// The Worker's settings that point the bot here.
    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("SLACK_SIGNING_SECRET".into(), SIGNING_SECRET.into()),
            ("SLACK_BOT_TOKEN".into(), BOT_TOKEN.into()),
            (
                "SLACK_API_BASE_URL".into(),
                format!("{}/api", self.base_url),
            ),
            ("SLACK_FILES_ORIGIN".into(), self.base_url.clone()),
        ]
    }

    fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let mut w = self.world.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut w)
    }

    pub fn add_user(&self, id: &str, name: &str, email: &str) {
        self.with(|w| w.users.insert(id.into(), (name.into(), email.into())));
    }

    /// Slack has not confirmed this user's address (`is_email_confirmed: false`).
    pub fn unconfirm_email(&self, id: &str) {
        self.with(|w| w.unconfirmed.push(id.into()));
    }

    pub fn add_channel(&self, id: &str, name: &str, topic: &str) {
        self.with(|w| w.channels.insert(id.into(), (name.into(), topic.into())));
    }

    pub fn add_file(&self, name: &str, bytes: Vec<u8>) -> String {
        self.with(|w| w.files.insert(name.into(), bytes));
        format!("{}/files/{name}", self.base_url)
    }

    /// A person's message, as Slack would store it (the test sends its event too).
    pub fn human_message(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
    ) -> String {
        self.human_message_with_files(channel, user, text, thread_ts, Value::Null)
    }

    /// [`Self::human_message`] with files shared in it.
    pub fn human_message_with_files(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
        files: Value,
    ) -> String {
        self.with(|w| {
            let ts = next_ts(w);
            w.messages.push(Posted {
                channel: channel.into(),
                ts: ts.clone(),
                thread_ts: thread_ts.map(str::to_owned),
                user: user.into(),
                text: text.into(),
                blocks: Value::Null,
                updates: Vec::new(),
                files,
            });
            ts
        })
    }

    pub fn limit_next(&self, method: &str) {
        self.with(|w| w.limit_next = Some(method.into()));
    }

    /// The bot's messages in a thread, oldest first.
    /// Holds each `chat.update` whose text starts with `prefix` for `ms` before it is
    /// applied, so a later update can arrive first.
    pub fn hold_updates(&self, prefix: &str, ms: u64) {
        self.with(|w| w.hold_updates = Some((prefix.to_owned(), ms)));
    }

    /// Deletes a message, as a person with the right can (`chat.update` on it then
    /// answers `message_not_found`).
    pub fn delete_message(&self, channel: &str, ts: &str) {
        self.with(|w| w.messages.retain(|m| !(m.channel == channel && m.ts == ts)));
    }

    /// What the app said to a person in its direct message with them.
    pub fn direct_messages(&self, user: &str) -> Vec<Posted> {
        let dm = format!("D{user}");
        self.with(|w| {
            w.messages
                .iter()
                .filter(|m| m.user == BOT_USER && m.channel == dm)
                .cloned()
                .collect()
        })
    }

    pub fn bot_messages(&self, channel: &str, thread_ts: &str) -> Vec<Posted> {
        self.with(|w| {
            w.messages
                .iter()
                .filter(|m| m.user == BOT_USER && m.channel == channel)
                .filter(|m| m.thread_ts.as_deref() == Some(thread_ts) || m.ts == thread_ts)
                .cloned()
                .collect()
        })
    }

    pub fn reactions(&self) -> Vec<(String, String, String)> {
        self.with(|w| w.reactions.clone())
    }

    pub fn removed_reactions(&self) -> Vec<(String, String, String)> {
        self.with(|w| w.removed_reactions.clone())
    }

    pub fn ephemeral(&self) -> Vec<Value> {
        self.with(|w| w.ephemeral.clone())
    }

    pub fn views(&self) -> Vec<Value> {
        self.with(|w| w.views.clone())
    }

    pub fn calls(&self) -> Vec<String> {
        self.with(|w| w.calls.clone())
    }
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn next_ts(w: &mut World) -> String {
    w.clock += 1;
    format!("1700000000.{:06}", w.clock)
}

fn ok(v: Value) -> Response {
    let mut body = json!({"ok": true});
    if let (Some(b), Some(extra)) = (body.as_object_mut(), v.as_object()) {
        for (k, x) in extra {
            b.insert(k.clone(), x.clone());
        }
    }
    Json(body).into_response()
}

fn fail(error: &str) -> Response {
    Json(json!({"ok": false, "error": error})).into_response()
}

/// Arguments from the query string, a form body or a JSON body.
fn arguments(query: &HashMap<String, String>, headers: &HeaderMap, body: &Bytes) -> Value {
    let mut args = json!({});
    for (k, v) in query {
        args[k] = json!(v);
    }
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if ct.starts_with("application/json") {
        if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(body) {
            for (k, v) in m {
                args[k] = v;
            }
        }
    } else if ct.starts_with("application/x-www-form-urlencoded") {
        for (k, v) in url::form_urlencoded::parse(body) {
            args[k.as_ref()] = json!(v);
        }
    }
    args
}

async fn method(
    State(world): State<Shared>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match headers.get("authorization").and_then(|v| v.to_str().ok()) {
        None => return fail("not_authed"),
        Some(a) if a != format!("Bearer {BOT_TOKEN}") => return fail("invalid_auth"),
        _ => {}
    }
    let args = arguments(&query, &headers, &body);
    let hold = world
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .hold_updates
        .as_ref()
        .filter(|(prefix, _)| {
            name == "chat.update" && args["text"].as_str().is_some_and(|t| t.starts_with(prefix))
        })
        .map(|(_, ms)| *ms);
    if let Some(ms) = hold {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    let mut w = world.lock().unwrap_or_else(|e| e.into_inner());
    w.calls.push(name.clone());
    if w.limit_next.as_deref() == Some(name.as_str()) {
        w.limit_next = None;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("Retry-After", "1")],
            Json(json!({"ok": false, "error": "ratelimited"})),
        )
            .into_response();
    }
    let s = |k: &str| args[k].as_str().unwrap_or_default().to_owned();
    match name.as_str() {
        "auth.test" => ok(json!({"user_id": BOT_USER, "bot_id": "BBOT", "team_id": "T1"})),
        "chat.postMessage" => {
            if s("channel").is_empty() {
                return fail("channel_not_found");
            }
            if !blocks_valid(&args["blocks"]) {
                return fail("invalid_blocks");
            }
            if s("text").is_empty() && !args["blocks"].is_array() {
                return fail("no_text");
            }
            let ts = next_ts(&mut w);
            let thread = s("thread_ts");
            // A user's id as the channel posts in the app's direct message with them
            // (its `D…` channel, which the answer names).
            let channel = match s("channel") {
                c if c.starts_with('U') || c.starts_with('W') => format!("D{c}"),
                c => c,
            };
            w.messages.push(Posted {
                channel: channel.clone(),
                ts: ts.clone(),
                thread_ts: (!thread.is_empty()).then_some(thread),
                user: BOT_USER.into(),
                text: s("text"),
                blocks: args["blocks"].clone(),
                updates: Vec::new(),
                files: Value::Null,
            });
            ok(json!({"channel": channel, "ts": ts}))
        }
        // Outbound files, as Slack takes them: an upload URL for a named, sized file; the
        // bytes posted there; then the upload completed into a channel (or a thread).
        "files.getUploadURLExternal" => {
            let length = args["length"]
                .as_u64()
                .or_else(|| s("length").parse().ok())
                .unwrap_or(0);
            if s("filename").is_empty() || length == 0 {
                return fail("invalid_arguments");
            }
            w.clock += 1;
            let id = format!("F{:08}", w.clock);
            let url = format!("{}/upload/{id}", w.base_url);
            w.uploads
                .insert(id.clone(), (s("filename"), length as usize, None));
            ok(json!({"upload_url": url, "file_id": id}))
        }
        "files.completeUploadExternal" => {
            let files: Vec<Value> = match &args["files"] {
                Value::Array(a) => a.clone(),
                Value::String(t) => serde_json::from_str(t).unwrap_or_default(),
                _ => Vec::new(),
            };
            if files.is_empty() {
                return fail("invalid_arguments");
            }
            let mut shared = Vec::new();
            for f in &files {
                let id = f["id"].as_str().unwrap_or_default();
                match w.uploads.get(id) {
                    Some((name, length, Some(bytes))) if bytes.len() == *length => {
                        shared.push(json!({"id": id, "name": name, "title": f["title"].as_str().unwrap_or(name), "size": length}))
                    }
                    _ => return fail("file_not_found"),
                }
            }
            if !s("channel_id").is_empty() {
                let ts = next_ts(&mut w);
                let thread = s("thread_ts");
                w.messages.push(Posted {
                    channel: s("channel_id"),
                    ts,
                    thread_ts: (!thread.is_empty()).then_some(thread),
                    user: BOT_USER.into(),
                    text: s("initial_comment"),
                    blocks: Value::Null,
                    updates: Vec::new(),
                    files: Value::Array(shared.clone()),
                });
            }
            ok(json!({"files": shared}))
        }
        "chat.update" => {
            let (channel, ts) = (s("channel"), s("ts"));
            if !blocks_valid(&args["blocks"]) {
                return fail("invalid_blocks");
            }
            let Some(m) = w
                .messages
                .iter_mut()
                .find(|m| m.channel == channel && m.ts == ts)
            else {
                return fail("message_not_found");
            };
            if m.user != BOT_USER {
                return fail("cant_update_message");
            }
            m.text = s("text");
            m.blocks = args["blocks"].clone();
            m.updates.push(args.clone());
            ok(json!({"channel": channel, "ts": ts}))
        }
        // chat.delete: a bot token deletes only the bot's own messages.
        "chat.delete" => {
            let (channel, ts) = (s("channel"), s("ts"));
            let Some(at) = w
                .messages
                .iter()
                .position(|m| m.channel == channel && m.ts == ts)
            else {
                return fail("message_not_found");
            };
            if w.messages[at].user != BOT_USER {
                return fail("cant_delete_message");
            }
            w.messages.remove(at);
            ok(json!({"channel": channel, "ts": ts}))
        }
        "chat.postEphemeral" => {
            w.ephemeral.push(args.clone());
            ok(json!({"message_ts": "1700000000.999999"}))
        }
        "reactions.add" | "reactions.remove" => {
            let key = (s("channel"), s("timestamp"), s("name"));
            let exists = w.reactions.contains(&key);
            if name == "reactions.add" {
                if exists {
                    return fail("already_reacted");
                }
                w.reactions.push(key);
            } else {
                if !exists {
                    return fail("no_reaction");
                }
                w.reactions.retain(|r| *r != key);
                w.removed_reactions.push(key);
            }
            ok(json!({}))
        }
        "conversations.history" => {
            let channel = s("channel");
            if !w.channels.contains_key(&channel) {
                return fail("channel_not_found");
            }
            let (latest, inclusive) = (s("latest"), s("inclusive") == "true");
            let limit: usize = s("limit").parse().unwrap_or(100);
            let mut top: Vec<&Posted> = w
                .messages
                .iter()
                .filter(|m| m.channel == channel && m.thread_ts.is_none())
                .filter(|m| {
                    latest.is_empty()
                        || m.ts.as_str() < latest.as_str()
                        || (inclusive && m.ts == latest)
                })
                .collect();
            top.reverse();
            let messages: Vec<Value> = top.into_iter().take(limit).map(as_json).collect();
            ok(json!({"messages": messages, "has_more": false}))
        }
        "conversations.replies" => {
            // As Slack answers it: the thread's parent first on every page whatever
            // `oldest` says, then the replies after `oldest` (exclusive unless
            // `inclusive`), `limit` a page (1,000 at most) with a cursor to the next.
            let (channel, ts) = (s("channel"), s("ts"));
            let oldest = s("oldest");
            let inclusive = s("inclusive") == "true";
            if !w.channels.contains_key(&channel) {
                return fail("channel_not_found");
            }
            let limit: usize = s("limit").parse().unwrap_or(1000).clamp(1, 1000);
            let start: usize = match s("cursor").as_str() {
                "" => 0,
                c => match c.strip_prefix("next:").and_then(|n| n.parse().ok()) {
                    Some(n) => n,
                    None => return fail("invalid_cursor"),
                },
            };
            let Some(parent) = w
                .messages
                .iter()
                .find(|m| m.channel == channel && m.ts == ts)
                .map(as_json)
            else {
                return fail("thread_not_found");
            };
            let replies: Vec<Value> = w
                .messages
                .iter()
                .filter(|m| m.channel == channel && m.ts != ts)
                .filter(|m| m.thread_ts.as_deref() == Some(ts.as_str()))
                .filter(|m| {
                    oldest.is_empty()
                        || m.ts.as_str() > oldest.as_str()
                        || (inclusive && m.ts == oldest)
                })
                .map(as_json)
                .collect();
            let page: Vec<Value> = std::iter::once(parent)
                .chain(replies.iter().skip(start).take(limit).cloned())
                .collect();
            let more = start + limit < replies.len();
            let next = if more {
                format!("next:{}", start + limit)
            } else {
                String::new()
            };
            ok(
                json!({"messages": page, "has_more": more, "response_metadata": {"next_cursor": next}}),
            )
        }
        "conversations.info" => match w.channels.get(&s("channel")) {
            Some((n, topic)) => ok(
                json!({"channel": {"id": s("channel"), "name": n, "is_im": false, "topic": {"value": topic}}}),
            ),
            None => fail("channel_not_found"),
        },
        "users.info" => match w.users.get(&s("user")) {
            Some((n, email)) => ok(
                json!({"user": {"id": s("user"), "name": n.to_lowercase(), "real_name": n, "is_email_confirmed": !w.unconfirmed.contains(&s("user")), "profile": {"display_name": n, "email": email, "image_72": "https://avatars.slack-edge.com/x.png"}}}),
            ),
            None => fail("user_not_found"),
        },
        "views.publish" => {
            if s("user_id").is_empty() {
                return fail("invalid_arguments");
            }
            if !blocks_valid(&args["view"]["blocks"]) {
                return fail("invalid_arguments");
            }
            w.views.push(args.clone());
            ok(json!({"view": {"id": "V1"}}))
        }
        _ => fail("unknown_method"),
    }
}

/// What Block Kit refuses, as Slack checks it: more than 100 blocks (a view's limit), a
/// section's text over 3,000 characters, a select with no options or more than 100 (in
/// groups too).
fn blocks_valid(blocks: &Value) -> bool {
    let Some(list) = blocks.as_array() else {
        return true;
    };
    if list.len() > 100 {
        return false;
    }
    fn select_ok(e: &Value) -> bool {
        if e["type"] != "static_select" {
            return true;
        }
        let count = match (e["options"].as_array(), e["option_groups"].as_array()) {
            (Some(o), _) => o.len(),
            (None, Some(g)) => g
                .iter()
                .map(|g| g["options"].as_array().map_or(0, Vec::len))
                .sum(),
            (None, None) => 0,
        };
        (1..=100).contains(&count)
    }
    list.iter().all(|b| {
        let text_ok = b["text"]["text"]
            .as_str()
            .is_none_or(|t| t.chars().count() <= 3000);
        let accessory_ok = select_ok(&b["accessory"]);
        let elements_ok = b["elements"]
            .as_array()
            .is_none_or(|els| els.iter().all(select_ok));
        let element_ok = select_ok(&b["element"]);
        text_ok && accessory_ok && elements_ok && element_ok
    })
}

/// A message as the conversations methods return it.
fn as_json(m: &Posted) -> Value {
    let mut v = json!({"type": "message", "user": m.user, "text": m.text, "ts": m.ts});
    if m.user == BOT_USER {
        v["bot_id"] = json!("BBOT");
    }
    if let Some(t) = &m.thread_ts {
        v["thread_ts"] = json!(t);
    }
    if m.files.is_array() {
        v["files"] = m.files.clone();
    }
    v
}

async fn file(
    State(world): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {BOT_TOKEN}"))
    {
        return (StatusCode::FORBIDDEN, "no access").into_response();
    }
    let w = world.lock().unwrap_or_else(|e| e.into_inner());
    match w.files.get(&name) {
        Some(b) => ([("Content-Type", "image/png")], b.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The upload URL `files.getUploadURLExternal` gave: the file's bytes, raw.
async fn upload(State(world): State<Shared>, Path(id): Path<String>, body: Bytes) -> Response {
    let mut w = world.lock().unwrap_or_else(|e| e.into_inner());
    match w.uploads.get_mut(&id) {
        Some(entry) => {
            entry.2 = Some(body.to_vec());
            (StatusCode::OK, format!("OK - {}", body.len())).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Slack's delivery of an event, signed as Slack signs it: `(timestamp, signature, body)`.
pub fn signed(body: &Value, secret: &str) -> (u64, String, Vec<u8>) {
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let bytes = body.to_string().into_bytes();
    let sig = crate::signing::slack(secret, ts, &bytes);
    (ts, sig, bytes)
}

/// An Events API envelope around `event`.
pub fn envelope(event_id: &str, event: Value) -> Value {
    json!({"token": "x", "team_id": "T1", "api_app_id": "A1", "type": "event_callback", "event_id": event_id, "event_time": 1, "authorizations": [{"user_id": BOT_USER, "is_bot": true}], "event": event})
}
