//! `InboxDO`: one small Durable Object per person (named by their user id), in the control
//! plane Worker. It holds the person's open tabs' inbox sockets (hibernating), tells them
//! each new item and unread count at once, and sends the notifications the person chose:
//! Web Push when no tab of theirs is open, a Slack direct message. A burst folds into one
//! notification ([`inbox::fold`]): what arrives within [`inbox::COALESCE_MS`] of the last
//! one sent is held, and one notice for all of it goes out at the alarm. D1 keeps the
//! items and the unread truth; this keeps only the sockets and what is held.

use crate::db;
use inspect_protocol::inbox::{self, Delivery, Fold, InboxMessage, Notice};
use inspect_runtime::log::{emit, LogLine};
use serde::Deserialize;
use worker::{
    durable_object, DurableObject, Env, Request, Response, Result, State, WebSocket,
    WebSocketIncomingMessage, WebSocketPair,
};

use crate::inbox::{UNREAD_HEADER, USER_HEADER};

const LAST_SENT: &str = "last_sent";
const HELD: &str = "held";
const USER: &str = "user";

#[durable_object]
pub struct InboxDO {
    state: State,
    env: Env,
}

impl DurableObject for InboxDO {
    fn new(state: State, env: Env) -> Self {
        InboxDO { state, env }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        if let Some(user) = req.headers().get(USER_HEADER)? {
            // Kept for the alarm, which has no request to read it from.
            let storage = self.state.storage();
            if storage.get::<String>(USER).await.ok().flatten().as_deref() != Some(&user) {
                storage.put(USER, &user).await?;
            }
        }
        match req.path().as_str() {
            "/socket" => {
                let pair = WebSocketPair::new()?;
                self.state.accept_web_socket(&pair.server);
                let unread = req
                    .headers()
                    .get(UNREAD_HEADER)?
                    .and_then(|u| u.parse().ok())
                    .unwrap_or(0);
                let _ = pair.server.send(&InboxMessage::Unread { unread });
                Response::from_websocket(pair.client)
            }
            "/unread" => {
                let message: InboxMessage = req.json().await?;
                self.broadcast(&message);
                Response::ok("ok")
            }
            "/notify" => {
                let delivery: Delivery = req.json().await?;
                self.notify(delivery).await?;
                Response::ok("ok")
            }
            _ => Response::error("not found", 404),
        }
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        // The socket only listens; a ping is answered so a client can tell it is alive.
        if let WebSocketIncomingMessage::String(text) = message {
            let asked: Result<inspect_protocol::client::ClientMessage, _> =
                serde_json::from_str(&text);
            if matches!(asked, Ok(inspect_protocol::client::ClientMessage::Ping)) {
                let _ = ws.send(&InboxMessage::Pong);
            }
        }
        Ok(())
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        _reason: String,
        _was_clean: bool,
    ) -> Result<()> {
        let code = if code == 1005 || code == 1006 {
            1000
        } else {
            code
        };
        let _ = ws.close(Some(code as u16), Some("closed"));
        Ok(())
    }

    async fn websocket_error(&self, ws: WebSocket, _error: worker::Error) -> Result<()> {
        let _ = ws.close(Some(1011), Some("error"));
        Ok(())
    }

    async fn alarm(&self) -> Result<Response> {
        let storage = self.state.storage();
        let held: Vec<Delivery> = storage.get(HELD).await.ok().flatten().unwrap_or_default();
        storage.delete(HELD).await?;
        if !held.is_empty() {
            storage.put(LAST_SENT, db_now()).await?;
            self.send(&held).await;
        }
        Response::ok("ok")
    }
}

fn db_now() -> i64 {
    worker::Date::now().as_millis() as i64
}

impl InboxDO {
    fn broadcast(&self, message: &InboxMessage) {
        let Ok(text) = serde_json::to_string(message) else {
            return;
        };
        for ws in self.state.get_websockets() {
            let _ = ws.send_with_str(&text);
        }
    }

    /// Tells the open tabs, then notifies where the person asked (folding bursts).
    async fn notify(&self, delivery: Delivery) -> Result<()> {
        let tabs = self.state.get_websockets().len();
        self.broadcast(&InboxMessage::Item {
            item: delivery.item.clone(),
            unread: delivery.unread,
            notify: delivery.channels.browser,
        });
        let mut out = delivery;
        // An open tab shows it (as the person chose): no push besides.
        out.channels.push &= tabs == 0;
        if !out.channels.push && !out.channels.slack {
            return Ok(());
        }
        let storage = self.state.storage();
        let now = db_now();
        let last: Option<i64> = storage.get(LAST_SENT).await.ok().flatten();
        match inbox::fold(now, last) {
            Fold::Send => {
                storage.put(LAST_SENT, now).await?;
                self.send(std::slice::from_ref(&out)).await;
            }
            Fold::HoldUntil(at) => {
                let mut held: Vec<Delivery> =
                    storage.get(HELD).await.ok().flatten().unwrap_or_default();
                held.push(out);
                storage.put(HELD, &held).await?;
                if storage.get_alarm().await.ok().flatten().is_none() {
                    let when = worker::js_sys::Date::new(&(at as f64).into());
                    storage.set_alarm(worker::ScheduledTime::new(when)).await?;
                }
            }
        }
        Ok(())
    }

    /// One notice for what is held: pushed to every browser of the person's when any
    /// delivery asked for push, and a direct message in Slack when any asked for that.
    async fn send(&self, held: &[Delivery]) {
        let Some(last) = held.last() else {
            return;
        };
        let pushed: Vec<Delivery> = held.iter().filter(|d| d.channels.push).cloned().collect();
        if let Some(notice) = inbox::notice(&pushed, &inbox::inbox_link(&last.link)) {
            if let Err(e) = self.push(&notice).await {
                emit(LogLine::warn("inbox", "push_failed").detail(e.message));
            }
        }
        let slacked: Vec<Delivery> = held.iter().filter(|d| d.channels.slack).cloned().collect();
        let to = slacked.iter().rev().find_map(|d| d.slack_user.clone());
        if let (Some(notice), Some(to)) =
            (inbox::notice(&slacked, &inbox::inbox_link(&last.link)), to)
        {
            let text = format!("*{}*\n{}\n<{}|Open>", notice.title, notice.body, notice.url);
            let body = serde_json::json!({ "channel": to, "text": text, "unfurl_links": false });
            if let Err(e) = inspect_slack::api::post(&self.env, "chat.postMessage", &body).await {
                emit(LogLine::warn("inbox", "slack_dm_failed").detail(e.message));
            }
        }
    }

    async fn push(&self, notice: &Notice) -> std::result::Result<(), inspect_protocol::ApiError> {
        let Some(vapid) = crate::push::vapid(&self.env)? else {
            return Ok(());
        };
        let Some(user) = self
            .state
            .storage()
            .get::<String>(USER)
            .await
            .ok()
            .flatten()
        else {
            return Ok(());
        };
        #[derive(Deserialize)]
        struct Row {
            endpoint: String,
            p256dh: String,
            auth: String,
        }
        let subs: Vec<Row> = db::all(
            &self.env,
            "SELECT endpoint, p256dh, auth FROM push_subscriptions WHERE user_id = ?1",
            &[user.as_str().into()],
        )
        .await?;
        let payload = serde_json::to_vec(notice)
            .map_err(|e| inspect_protocol::ApiError::internal(e.to_string()))?;
        let now = db_now();
        for s in subs {
            let to = crate::push::Target {
                endpoint: &s.endpoint,
                p256dh: &s.p256dh,
                auth: &s.auth,
            };
            let status = match crate::push::send(&vapid, &to, &payload, now).await {
                Ok(status) => status,
                Err(e) => {
                    emit(LogLine::warn("inbox", "push_not_sent").detail(e.message));
                    continue;
                }
            };
            if crate::webpush::subscription_gone(status) {
                // Gone for good: removed, never tried again.
                db::run(
                    &self.env,
                    "DELETE FROM push_subscriptions WHERE endpoint = ?1",
                    &[s.endpoint.as_str().into()],
                )
                .await?;
            } else if (200..300).contains(&status) {
                db::run(
                    &self.env,
                    "UPDATE push_subscriptions SET last_sent_at = ?2 WHERE endpoint = ?1",
                    &[s.endpoint.as_str().into(), db::num(now)],
                )
                .await?;
            } else {
                emit(LogLine::warn("inbox", "push_refused").with("status", status));
            }
        }
        Ok(())
    }
}
