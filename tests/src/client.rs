//! Small helpers for talking to the Worker from tests.

use anyhow::Result;
use serde_json::Value;

/// A JSON response: status and body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

pub async fn get(url: &str) -> Result<Reply> {
    let resp = reqwest::Client::new().get(url).send().await?;
    reply(resp).await
}

pub async fn send(method: reqwest::Method, url: &str, body: Option<Value>) -> Result<Reply> {
    let mut req = reqwest::Client::new().request(method, url);
    if let Some(body) = body {
        req = req.json(&body);
    }
    reply(req.send().await?).await
}

async fn reply(resp: reqwest::Response) -> Result<Reply> {
    let status = resp.status().as_u16();
    let text = resp.text().await?;
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Ok(Reply { status, body })
}

/// Sends with an `X-OpenInspect-Actor` (a named local user).
pub async fn send_as(
    actor: &str,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Result<Reply> {
    let mut req = reqwest::Client::new()
        .request(method, url)
        .header("X-OpenInspect-Actor", actor);
    if let Some(body) = body {
        req = req.json(&body);
    }
    reply(req.send().await?).await
}

/// Polls `GET /sessions/:id/events?type=<types>` until one event of type `until` is there
/// (at most `secs`); the events of those types. `Err` says what was seen.
pub async fn events_until(
    base: &str,
    session: &str,
    types: &str,
    until: &str,
    secs: u64,
) -> Result<Vec<Value>> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let page = get(&format!("{base}/sessions/{session}/events?type={types}")).await?;
        let list = page.body["events"].as_array().cloned().unwrap_or_default();
        if list.iter().any(|e| e["type"] == until) {
            return Ok(list);
        }
        if std::time::Instant::now() > deadline {
            anyhow::bail!(
                "no {until} within {secs} s; saw {} events: {}",
                list.len(),
                page.body
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    }
}

/// Registers the local repository at `path` as `local/<name>` (201 expected).
pub async fn register_repo(base: &str, name: &str, path: &std::path::Path) -> Result<()> {
    let r = send(
        reqwest::Method::POST,
        &format!("{base}/repos"),
        Some(serde_json::json!({"name": name, "path": path.to_string_lossy()})),
    )
    .await?;
    anyhow::ensure!(
        r.status == 201,
        "registering {name}: {} {}",
        r.status,
        r.body
    );
    Ok(())
}

/// Creates a session as `actor` and returns its id.
pub async fn create_session(base: &str, actor: &str, body: Value) -> Result<String> {
    let r = send_as(
        actor,
        reqwest::Method::POST,
        &format!("{base}/sessions"),
        Some(body),
    )
    .await?;
    anyhow::ensure!(r.status == 201, "create answered {}: {}", r.status, r.body);
    Ok(r.body["sessionId"].as_str().unwrap_or_default().to_owned())
}

/// A session on the repository `owner/name` made by the local person (no actor named) and
/// sent `content` as its first prompt, both accepted: its id.
pub async fn prompted_repo_session(
    base: &str,
    (owner, name): (&str, &str),
    content: &str,
) -> Result<String> {
    let r = send(
        reqwest::Method::POST,
        &format!("{base}/sessions"),
        Some(serde_json::json!({"repoOwner": owner, "repoName": name})),
    )
    .await?;
    anyhow::ensure!(r.status == 201, "create answered {}: {}", r.status, r.body);
    let id = r.body["sessionId"].as_str().unwrap_or_default().to_owned();
    let r = send(
        reqwest::Method::POST,
        &format!("{base}/sessions/{id}/prompt"),
        Some(serde_json::json!({"content": content})),
    )
    .await?;
    anyhow::ensure!(
        r.status == 200,
        "the prompt answered {}: {}",
        r.status,
        r.body
    );
    Ok(id)
}

/// A client WebSocket speaking the session protocol.
pub struct WsClient {
    stream: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    /// Messages read while waiting for another kind, kept in order.
    pending: std::collections::VecDeque<Value>,
    /// `sandbox_events` messages received (each read as its events).
    pub batches: usize,
    /// The rest of the last batch's events, read before the socket again.
    unbatched: std::collections::VecDeque<Value>,
}

/// What a socket ended with.
#[derive(Debug, PartialEq)]
pub enum Closed {
    Code(u16),
    NoFrame,
}

impl WsClient {
    pub async fn connect(ws_url: &str) -> Result<WsClient> {
        let (stream, _) = tokio_tungstenite::connect_async(ws_url).await?;
        Ok(WsClient {
            stream,
            pending: Default::default(),
            batches: 0,
            unbatched: Default::default(),
        })
    }

    /// Connects with these headers on the upgrade (a cookie, an `Origin`).
    pub async fn connect_with(ws_url: &str, headers: &[(&str, &str)]) -> Result<WsClient> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req = ws_url.into_client_request()?;
        for (k, v) in headers {
            req.headers_mut().insert(
                tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(k.as_bytes())?,
                v.parse()?,
            );
        }
        let (stream, _) = tokio_tungstenite::connect_async(req).await?;
        Ok(WsClient {
            stream,
            pending: Default::default(),
            batches: 0,
            unbatched: Default::default(),
        })
    }

    /// Gets a token for `actor`, connects and subscribes; returns the client and the
    /// `subscribed` message.
    pub async fn join(
        base: &str,
        ws_base: &str,
        session: &str,
        actor: &str,
    ) -> Result<(WsClient, Value)> {
        let token = send_as(
            actor,
            reqwest::Method::POST,
            &format!("{base}/sessions/{session}/ws-token"),
            None,
        )
        .await?;
        anyhow::ensure!(
            token.status == 200,
            "ws-token answered {}: {}",
            token.status,
            token.body
        );
        let mut ws = WsClient::connect(&format!("{ws_base}/sessions/{session}/ws")).await?;
        ws.send(serde_json::json!({"type": "subscribe", "token": token.body["token"], "clientId": format!("{actor}-client")}))
            .await?;
        let subscribed = ws.recv_type("subscribed").await?;
        Ok((ws, subscribed))
    }

    pub async fn send(&mut self, v: Value) -> Result<()> {
        self.send_text(v.to_string()).await
    }

    pub async fn send_text(&mut self, text: String) -> Result<()> {
        use futures::SinkExt;
        self.stream
            .send(tokio_tungstenite::tungstenite::Message::text(text))
            .await?;
        Ok(())
    }

    pub async fn send_binary(&mut self, bytes: Vec<u8>) -> Result<()> {
        use futures::SinkExt;
        self.stream
            .send(tokio_tungstenite::tungstenite::Message::binary(bytes))
            .await?;
        Ok(())
    }

    /// The next JSON message, waiting at most `secs`.
    pub async fn recv_within(&mut self, secs: u64) -> Result<Value> {
        if let Some(v) = self.pending.pop_front() {
            return Ok(v);
        }
        self.read(secs).await
    }

    async fn read(&mut self, secs: u64) -> Result<Value> {
        use futures::StreamExt;
        if let Some(v) = self.unbatched.pop_front() {
            return Ok(v);
        }
        use tokio_tungstenite::tungstenite::Message;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let next = tokio::time::timeout_at(deadline, self.stream.next())
                .await
                .map_err(|_| anyhow::anyhow!("no message within {secs} s"))?;
            match next {
                Some(Ok(Message::Text(t))) => {
                    let mut v: Value = serde_json::from_str(&t)?;
                    // A batch of events reads as its events, one by one, in order.
                    if v["type"] == "sandbox_events" {
                        self.batches += 1;
                        if let Some(Value::Array(events)) = v.get_mut("events").map(Value::take) {
                            self.unbatched.extend(
                                events.into_iter().map(
                                    |e| serde_json::json!({"type": "sandbox_event", "event": e}),
                                ),
                            );
                        }
                        match self.unbatched.pop_front() {
                            Some(first) => return Ok(first),
                            None => continue,
                        }
                    }
                    return Ok(v);
                }
                Some(Ok(Message::Close(frame))) => {
                    anyhow::bail!("closed: {:?}", frame.map(|f| u16::from(f.code)))
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e.into()),
                None => anyhow::bail!("stream ended"),
            }
        }
    }

    pub async fn recv(&mut self) -> Result<Value> {
        self.recv_within(10).await
    }

    /// The next message of `kind`; others are kept for later `recv`s.
    pub async fn recv_type(&mut self, kind: &str) -> Result<Value> {
        if let Some(i) = self.pending.iter().position(|v| v["type"] == kind) {
            return Ok(self.pending.remove(i).unwrap_or_default());
        }
        loop {
            let v = self.read(10).await?;
            if v["type"] == kind {
                return Ok(v);
            }
            self.pending.push_back(v);
        }
    }

    /// Waits for the server to close the socket and returns the close code.
    pub async fn closed_within(&mut self, secs: u64) -> Result<Closed> {
        use futures::StreamExt;
        use tokio_tungstenite::tungstenite::Message;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let next = tokio::time::timeout_at(deadline, self.stream.next())
                .await
                .map_err(|_| anyhow::anyhow!("still open after {secs} s"))?;
            match next {
                Some(Ok(Message::Close(frame))) => {
                    return Ok(frame.map_or(Closed::NoFrame, |f| Closed::Code(u16::from(f.code))))
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Ok(Closed::NoFrame),
            }
        }
    }

    pub async fn close(mut self) {
        let _ = self.stream.close(None).await;
    }

    /// Discards buffered messages.
    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

/// `n` sessions on the registered repository `local/<repo>`, each with one subscribed
/// client (`watcher<i>`), made 16 at a time: what the benchmarks hold open.
pub async fn watched_sessions(
    stack: &crate::Stack,
    repo: &str,
    n: usize,
) -> Result<Vec<(String, WsClient)>> {
    let mut clients = Vec::with_capacity(n);
    let ids: Vec<usize> = (0..n).collect();
    for chunk in ids.chunks(16) {
        let made = futures::future::join_all(chunk.iter().map(|i| {
            let (base, wsb) = (stack.base_url.clone(), stack.ws_url(""));
            async move {
                let body = serde_json::json!({"repoOwner": "local", "repoName": repo});
                let id = create_session(&base, repo, body).await?;
                let (ws, _) = WsClient::join(&base, &wsb, &id, &format!("watcher{i}")).await?;
                Ok::<_, anyhow::Error>((id, ws))
            }
        }))
        .await;
        for m in made {
            clients.push(m?);
        }
    }
    Ok(clients)
}

/// The value of the cookie `name` a response sets (`Set-Cookie`), if it sets one that is
/// not empty.
pub fn set_cookie(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .find_map(|c| {
            let first = c.to_str().ok()?.split(';').next()?;
            let (k, v) = first.split_once('=')?;
            (k == name && !v.is_empty()).then(|| v.to_owned())
        })
}

/// A request as a signed-in browser (its session cookie): the status and the JSON (or the
/// text as a JSON string).
pub async fn as_person(
    stack: &crate::Stack,
    cookie: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .request(method, stack.url(path))
        .header(reqwest::header::COOKIE, format!("inspect_session={cookie}"));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let Ok(r) = req.send().await else {
        return (0, Value::Null);
    };
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The runs an automation has had (`GET /automations/:id/runs`), newest first.
pub async fn automation_runs(stack: &crate::Stack, id: &str) -> Vec<Value> {
    let url = stack.url(&format!("/automations/{id}/runs"));
    match send(reqwest::Method::GET, &url, None).await {
        Ok(r) if r.status == 200 => r.body["runs"].as_array().cloned().unwrap_or_default(),
        Ok(r) => panic!("the runs of {id}: {} {}", r.status, r.body),
        Err(e) => panic!("the runs of {id}: {e}"),
    }
}

/// A browser's page load of `url` as `who` (local mode names the person), not followed.
pub async fn navigate_as(who: &str, url: &str) -> reqwest::Response {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client")
        .get(url)
        .header("X-OpenInspect-Actor", who)
        .header("Accept", "text/html")
        .header("Sec-Fetch-Mode", "navigate")
        .send()
        .await
        .expect("the page load")
}

/// The cookie a gate set for its link (`name=value`).
pub fn gate_cookie(swapped: &reqwest::Response) -> String {
    swapped.headers()["set-cookie"]
        .to_str()
        .expect("a cookie")
        .split(';')
        .next()
        .unwrap_or_default()
        .to_owned()
}
