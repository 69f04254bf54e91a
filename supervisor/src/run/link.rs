//! The sandbox's connection to its session: one WebSocket, kept up across drops.
//!
//! Events go out in order, batched when several are waiting. Events that matter carry an
//! ack id and stay buffered (up to [`MAX_UNACKED_EVENTS`]) until the session acknowledges
//! them; after a reconnect they are sent again. Reconnects back off 2^n seconds, capped at
//! 60; a 401/403/404/410 answer ends the sandbox: it was replaced or its session is gone.

use futures::{SinkExt, StreamExt};
use inspect_protocol::sandbox::{
    SandboxCommand, SandboxEvent, SandboxFrame, FINAL_CONNECT_STATUSES, HEARTBEAT_INTERVAL_SECS,
    MAX_BATCH_EVENTS, MAX_SANDBOX_FRAME_BYTES, MAX_UNACKED_EVENTS, RECONNECT_BACKOFF_CAP_SECS,
};
use std::collections::VecDeque;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// Events not needing an ack that are kept while disconnected; beyond this the oldest go.
const MAX_PENDING_EVENTS: usize = 10_000;

/// The set-up-only secrets, once the session sent them (it does as a booting sandbox
/// connects). Held in this process's memory for the hooks; never logged nor written.
pub type SetupSecrets =
    std::sync::Arc<tokio::sync::watch::Sender<Option<std::collections::BTreeMap<String, String>>>>;

/// A place for the set-up-only secrets, empty until the session sends them.
pub fn setup_secrets() -> SetupSecrets {
    std::sync::Arc::new(tokio::sync::watch::channel(None).0)
}

#[derive(Clone)]
pub struct LinkConfig {
    pub control_plane_url: String,
    pub session_id: String,
    pub sandbox_id: String,
    pub token: String,
    pub setup_secrets: SetupSecrets,
}

/// The supervisor's handle: send events, receive commands.
#[derive(Clone)]
pub struct Events {
    tx: mpsc::UnboundedSender<SandboxEvent>,
}

impl Events {
    /// Events that go to the returned receiver instead of a session (an image build).
    pub fn local() -> (Events, mpsc::UnboundedReceiver<SandboxEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Events { tx }, rx)
    }

    pub fn send(&self, event: SandboxEvent) {
        let _ = self.tx.send(event);
    }
}

/// Why the link ended for good.
#[derive(Debug)]
pub enum LinkEnd {
    /// The session refused this sandbox (status); it should shut down.
    Refused(u16),
    /// The supervisor dropped every sender.
    Closed,
}

pub fn start(
    config: LinkConfig,
) -> (
    Events,
    mpsc::UnboundedReceiver<SandboxCommand>,
    tokio::task::JoinHandle<LinkEnd>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    // The link's lines carry the sandbox's span (session and sandbox ids) too.
    let handle = tokio::spawn(tracing::Instrument::instrument(
        run(config, rx, cmd_tx),
        tracing::Span::current(),
    ));
    (Events { tx }, cmd_rx, handle)
}

fn ws_url(config: &LinkConfig) -> String {
    let base = config.control_plane_url.trim_end_matches('/');
    let base = base
        .strip_prefix("https://")
        .map(|r| format!("wss://{r}"))
        .or_else(|| base.strip_prefix("http://").map(|r| format!("ws://{r}")))
        .unwrap_or_else(|| base.to_owned());
    format!("{base}/sessions/{}/ws?type=sandbox", config.session_id)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn new_ack_id() -> String {
    let mut b = [0u8; 12];
    let _ = getrandom::fill(&mut b);
    hex::encode(b)
}

/// Outgoing state that survives reconnects.
#[derive(Default)]
struct Outbox {
    /// Sent (or not yet) and waiting for an ack, in order: (ack id, frame). Events that
    /// are stored once wait here, and the newest version of each streamed part (the session
    /// writes those a moment after it has shown them, and acknowledges them when written).
    /// (ack id, part key of a streamed part, frame).
    unacked: VecDeque<(String, Option<String>, serde_json::Value)>,
    /// Not yet sent, in order.
    pending: VecDeque<serde_json::Value>,
}

impl Outbox {
    fn push(&mut self, config: &LinkConfig, event: SandboxEvent) {
        let part_key = event.part_key();
        let ack_id = (event.must_ack() || part_key.is_some()).then(new_ack_id);
        if let Some(key) = &part_key {
            // A newer version replaces the one still waiting: only the newest is resent.
            self.unacked
                .retain(|(_, waiting, _)| waiting.as_ref() != Some(key));
        }
        let frame = SandboxFrame {
            sandbox_id: config.sandbox_id.clone(),
            timestamp: now_ms(),
            ack_id: ack_id.clone(),
            event,
        };
        let Ok(value) = serde_json::to_value(&frame) else {
            return;
        };
        if let Some(id) = ack_id {
            if self.unacked.len() >= MAX_UNACKED_EVENTS {
                tracing::warn!(
                    "more than {MAX_UNACKED_EVENTS} unacknowledged events; dropping the oldest"
                );
                self.unacked.pop_front();
            }
            self.unacked.push_back((id, part_key, value.clone()));
        }
        if self.pending.len() >= MAX_PENDING_EVENTS {
            self.pending.pop_front();
        }
        self.pending.push_back(value);
    }

    fn ack(&mut self, ack_id: &str) {
        self.unacked.retain(|(id, _, _)| id != ack_id);
    }

    fn ack_many(&mut self, ack_ids: &[String]) {
        let done: std::collections::HashSet<&str> = ack_ids.iter().map(String::as_str).collect();
        self.unacked
            .retain(|(id, _, _)| !done.contains(id.as_str()));
    }

    /// After a reconnect: everything unacked goes again, then what was never sent.
    fn requeue_unacked(&mut self) {
        let unsent: std::collections::HashSet<String> = self
            .pending
            .iter()
            .filter_map(|v| v.get("ackId").and_then(|a| a.as_str()).map(str::to_owned))
            .collect();
        for (id, _, frame) in self.unacked.iter().rev() {
            if !unsent.contains(id) {
                self.pending.push_front(frame.clone());
            }
        }
    }

    /// The next frame to send: one event, or a batch of those waiting, at most
    /// [`MAX_BATCH_EVENTS`] and half the session's frame limit (a terminal's output can
    /// make many big events at once).
    fn next_frame(&mut self) -> Option<String> {
        let first = self.pending.pop_front()?.to_string();
        if self.pending.is_empty() {
            return Some(first);
        }
        let budget = MAX_SANDBOX_FRAME_BYTES / 2;
        let mut batch = String::with_capacity(first.len() * 2);
        batch.push_str(r#"{"type":"batch","events":["#);
        batch.push_str(&first);
        let mut count = 1;
        while count < MAX_BATCH_EVENTS {
            let Some(next) = self.pending.front().map(|v| v.to_string()) else {
                break;
            };
            if batch.len() + next.len() + 3 > budget {
                break;
            }
            self.pending.pop_front();
            batch.push(',');
            batch.push_str(&next);
            count += 1;
        }
        batch.push_str("]}");
        Some(batch)
    }
}

/// The session's socket: straight, or through the sandbox's proxy when the environment
/// names one for the control plane ([`super::proxy`]).
async fn open(
    request: tokio_tungstenite::tungstenite::handshake::client::Request,
) -> Result<
    (
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
        tokio_tungstenite::tungstenite::handshake::client::Response,
    ),
    tokio_tungstenite::tungstenite::Error,
> {
    let uri = request.uri().clone();
    let host = uri.host().unwrap_or_default().to_owned();
    let scheme = uri.scheme_str().unwrap_or("ws").to_owned();
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "wss" { 443 } else { 80 });
    match super::proxy::proxy_for(&scheme, &host, &|k| std::env::var(k).ok()) {
        Some(proxy) => {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let stream = super::proxy::tunnel(&proxy, host, port).await?;
            tokio_tungstenite::client_async_tls(request, stream).await
        }
        None => tokio_tungstenite::connect_async(request).await,
    }
}

async fn run(
    config: LinkConfig,
    mut events: mpsc::UnboundedReceiver<SandboxEvent>,
    commands: mpsc::UnboundedSender<SandboxCommand>,
) -> LinkEnd {
    let mut outbox = Outbox::default();
    let mut attempt: u32 = 0;
    loop {
        let mut request = match ws_url(&config).into_client_request() {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("bad control plane URL: {e}");
                return LinkEnd::Refused(0);
            }
        };
        let headers = request.headers_mut();
        if let Ok(v) = format!("Bearer {}", config.token).parse() {
            headers.insert("Authorization", v);
        }
        if let Ok(v) = config.sandbox_id.parse() {
            headers.insert(inspect_protocol::auth::SANDBOX_ID_HEADER, v);
        }
        match open(request).await {
            Ok((stream, _)) => {
                tracing::info!("connected to the session");
                attempt = 0;
                outbox.requeue_unacked();
                match connected(&config, stream, &mut outbox, &mut events, &commands).await {
                    Some(end) => return end,
                    None => tracing::warn!("lost the session socket; reconnecting"),
                }
            }
            Err(tokio_tungstenite::tungstenite::Error::Http(resp))
                if FINAL_CONNECT_STATUSES.contains(&resp.status().as_u16()) =>
            {
                let status = resp.status().as_u16();
                tracing::error!(status, "the session refused this sandbox; giving up");
                return LinkEnd::Refused(status);
            }
            Err(e) => {
                tracing::warn!(url = %ws_url(&config), "connecting to the session failed: {e}")
            }
        }
        let wait = 2u64.saturating_pow(attempt).min(RECONNECT_BACKOFF_CAP_SECS);
        attempt = attempt.saturating_add(1);
        // Keep collecting events while waiting, so nothing is lost and memory is bounded.
        let sleep = tokio::time::sleep(Duration::from_secs(wait));
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                e = events.recv() => match e {
                    Some(e) => outbox.push(&config, e),
                    None => return LinkEnd::Closed,
                },
            }
        }
    }
}

/// Serves one connection; `None` when it dropped and should be retried.
async fn connected<S>(
    config: &LinkConfig,
    stream: tokio_tungstenite::WebSocketStream<S>,
    outbox: &mut Outbox,
    events: &mut mpsc::UnboundedReceiver<SandboxEvent>,
    commands: &mpsc::UnboundedSender<SandboxCommand>,
) -> Option<LinkEnd>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut source) = stream.split();
    let mut heartbeat = tokio::time::interval(Duration::from_secs(HEARTBEAT_INTERVAL_SECS));
    loop {
        while let Some(frame) = outbox.next_frame() {
            if sink.send(Message::text(frame)).await.is_err() {
                return None;
            }
        }
        tokio::select! {
            e = events.recv() => match e {
                Some(e) => {
                    outbox.push(config, e);
                    // Gather whatever else is ready, so a burst leaves as one batch.
                    while let Ok(more) = events.try_recv() {
                        outbox.push(config, more);
                    }
                }
                None => {
                    let _ = sink.close().await;
                    return Some(LinkEnd::Closed);
                }
            },
            _ = heartbeat.tick() => outbox.push(config, SandboxEvent::Heartbeat),
            msg = source.next() => match msg {
                Some(Ok(Message::Text(text))) => match serde_json::from_str::<SandboxCommand>(&text) {
                    Ok(SandboxCommand::Ack { ack_id }) => outbox.ack(&ack_id),
                    Ok(SandboxCommand::Acks { ack_ids }) => outbox.ack_many(&ack_ids),
                    Ok(SandboxCommand::Error { code, message }) => tracing::warn!(%code, "the session refused an event: {message}"),
                    Ok(SandboxCommand::SetupSecrets { env }) => {
                        config.setup_secrets.send_replace(Some(env));
                    }
                    Ok(cmd) => {
                        let _ = commands.send(cmd);
                    }
                    Err(e) => tracing::warn!("unreadable command: {e}"),
                },
                Some(Ok(Message::Close(frame))) => {
                    tracing::warn!(?frame, "the session closed the socket");
                    return None;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::warn!("socket error: {e}");
                    return None;
                }
                None => return None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LinkConfig {
        LinkConfig {
            control_plane_url: "http://127.0.0.1:1".into(),
            session_id: "s".into(),
            sandbox_id: "sb".into(),
            token: "t".into(),
            setup_secrets: setup_secrets(),
        }
    }

    #[test]
    fn unacked_events_are_resent_after_a_reconnect_once() {
        let c = config();
        let mut o = Outbox::default();
        o.push(
            &c,
            SandboxEvent::ExecutionComplete {
                message_id: "m".into(),
                success: true,
                error: None,
            },
        );
        o.push(
            &c,
            SandboxEvent::StepStart {
                message_id: "m".into(),
            },
        );
        let sent = o.next_frame().unwrap();
        assert!(sent.contains("batch"));
        assert!(o.next_frame().is_none());
        // The socket drops before the ack: the acked-kind event goes again, the other not.
        o.requeue_unacked();
        let again = o.next_frame().unwrap();
        assert!(again.contains("execution_complete") && !again.contains("step_start"));
        let ack = o.unacked[0].0.clone();
        o.ack(&ack);
        o.requeue_unacked();
        assert!(o.next_frame().is_none());
    }

    #[test]
    fn streamed_parts_wait_for_their_ack_newest_version_only() {
        let c = config();
        let mut o = Outbox::default();
        let token = |content: &str| SandboxEvent::Token {
            message_id: "m".into(),
            part_id: Some("p".into()),
            content: content.into(),
        };
        o.push(&c, token("He"));
        assert!(o.next_frame().unwrap().contains("\"He\""));
        o.push(&c, token("Hello"));
        o.push(
            &c,
            SandboxEvent::ToolCall {
                message_id: "m".into(),
                tool: "bash".into(),
                call_id: "c1".into(),
                status: "running".into(),
                args: serde_json::Value::Null,
                output: None,
                duration_ms: None,
            },
        );
        let sent = o.next_frame().unwrap();
        assert!(sent.contains("batch") && sent.contains("Hello"), "{sent}");
        // Only the newest text waits, with the call; each carries an ack id.
        assert_eq!(o.unacked.len(), 2);
        assert!(o
            .unacked
            .iter()
            .all(|(id, key, frame)| key.is_some() && frame["ackId"] == id.as_str()));
        // The session wrote the text: only the call goes again after a reconnect.
        let text_ack = o.unacked[0].0.clone();
        o.ack_many(&[text_ack]);
        o.requeue_unacked();
        let again = o.next_frame().unwrap();
        assert!(
            again.contains("tool_call") && !again.contains("Hello"),
            "{again}"
        );
        let call_ack = o.unacked[0].0.clone();
        o.ack_many(&[call_ack]);
        o.requeue_unacked();
        assert!(o.next_frame().is_none());
    }

    #[test]
    fn batches_stay_under_the_frame_limit() {
        let cfg = config();
        let mut outbox = Outbox::default();
        for i in 0..40 {
            outbox.push(
                &cfg,
                SandboxEvent::TerminalOutput {
                    terminal_id: format!("t{i}"),
                    data: "x".repeat(60 * 1024),
                    client: None,
                },
            );
        }
        let mut frames = 0;
        let mut events = 0;
        while let Some(f) = outbox.next_frame() {
            assert!(f.len() <= MAX_SANDBOX_FRAME_BYTES / 2, "{}", f.len());
            let v: serde_json::Value = serde_json::from_str(&f).unwrap();
            events += v["events"].as_array().map_or(1, Vec::len);
            frames += 1;
        }
        assert_eq!(events, 40);
        assert!(frames >= 5, "{frames}");
    }

    #[test]
    fn urls_follow_the_scheme() {
        assert_eq!(
            ws_url(&config()),
            "ws://127.0.0.1:1/sessions/s/ws?type=sandbox"
        );
        let mut c = config();
        c.control_plane_url = "https://cp.example/".into();
        assert_eq!(ws_url(&c), "wss://cp.example/sessions/s/ws?type=sandbox");
    }
}
