//! A session live over its client WebSocket: a token from `POST /sessions/:id/ws-token`,
//! `subscribe`, then every event printed by the [`Printer`]; a dropped socket is opened
//! again (backoff 0.5 s → 10 s) and the catch-up it brings prints nothing twice. Who is
//! there and what is queued are shown as they change. Lines typed on stdin (when asked) are
//! sent as prompts.

use crate::api::{Api, Failure, Result};
use crate::render::{Ended, Printer};
use crate::screen::Screen;
use futures::{SinkExt, StreamExt};
use inspect_protocol::client::ServerMessage;
use serde_json::{json, Value};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// What ends the follow.
pub enum Until {
    /// The prompt with this id ends (its outcome is returned).
    PromptEnds(String),
    /// Never (Ctrl-C detaches; the session keeps running).
    Detached,
}

pub async fn follow(api: &Api, session: &str, until: Until, typed: bool) -> Result<Option<Ended>> {
    let mut printer = Printer::default();
    let mut screen = Screen::new();
    let mut backoff = Duration::from_millis(500);
    let (lines_tx, mut lines_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    if typed {
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if !line.trim().is_empty() && lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
    } else {
        drop(lines_tx);
    }
    loop {
        match once(
            api,
            session,
            &until,
            &mut printer,
            &mut screen,
            &mut lines_rx,
        )
        .await
        {
            Ok(Some(ended)) => return Ok(Some(ended)),
            // It was connected: the next try starts from the shortest wait.
            Ok(None) => backoff = Duration::from_millis(500),
            // The server refused who we are, or the session: no point in trying again.
            Err(e)
                if e.code != crate::api::exit::UNREACHABLE
                    && e.code != crate::api::exit::FAILED =>
            {
                return Err(e)
            }
            Err(e) => screen.note(&format!("  (reconnecting: {e})")),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(10));
    }
}

/// One socket's life: `Some` when the awaited prompt ended, `None` when the socket closed.
async fn once(
    api: &Api,
    session: &str,
    until: &Until,
    printer: &mut Printer,
    screen: &mut Screen,
    typed: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
) -> Result<Option<Ended>> {
    let token: Value = api
        .post(&format!("/sessions/{session}/ws-token"), &json!({}))
        .await?;
    let token = token["token"].as_str().unwrap_or_default().to_owned();
    let url = api.ws_url(&format!("/sessions/{session}/ws"));
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .map_err(|e| Failure::new(crate::api::exit::UNREACHABLE, format!("{url}: {e}")))?;
    let subscribe = json!({"type": "subscribe", "token": token, "clientId": format!("cli-{}", std::process::id())});
    ws.send(Message::text(subscribe.to_string()))
        .await
        .map_err(|e| Failure::failed(e.to_string()))?;
    let mut ping = tokio::time::interval(Duration::from_secs(25));
    loop {
        tokio::select! {
            msg = ws.next() => {
                let Some(Ok(msg)) = msg else { return Ok(None) };
                let Message::Text(text) = msg else { continue };
                // A message this CLI does not know (a newer server's) is passed over.
                let Ok(message) = serde_json::from_str::<ServerMessage>(&text) else { continue };
                let events = match message {
                    ServerMessage::Subscribed { timeline, prompt_queue, .. } => {
                        screen.show(printer.queue(&prompt_queue).into_iter().collect());
                        timeline.events.parse().unwrap_or_default()
                    }
                    ServerMessage::SandboxEvent { event } => vec![event],
                    ServerMessage::SandboxEvents { events } => events,
                    ServerMessage::PresenceSync { participants }
                    | ServerMessage::PresenceUpdate { participants } => {
                        screen.show(printer.here(&participants).into_iter().collect());
                        continue;
                    }
                    ServerMessage::PromptQueueUpdated { prompt_queue } => {
                        screen.show(printer.queue(&prompt_queue).into_iter().collect());
                        continue;
                    }
                    ServerMessage::Error { message, .. } => {
                        screen.note(&format!("  ! {message}"));
                        continue;
                    }
                    _ => continue,
                };
                for e in &events {
                    let Ok(e) = serde_json::to_value(e) else { continue };
                    let (outs, ended) = printer.event(&e);
                    screen.show(outs);
                    if let (Until::PromptEnds(id), Some(ended)) = (until, ended) {
                        if &ended.message_id == id {
                            return Ok(Some(ended));
                        }
                    }
                }
            }
            Some(line) = typed.recv() => {
                let prompt = json!({"type": "prompt", "content": line});
                ws.send(Message::text(prompt.to_string())).await.map_err(|e| Failure::failed(e.to_string()))?;
            }
            _ = ping.tick() => {
                let _ = ws.send(Message::text(r#"{"type":"ping"}"#)).await;
            }
        }
    }
}
