//! A person's inbox in D1 (`inbox_items`): items made from what sessions' objects tell
//! the control plane (a prompt's end, a mention) and from pull requests' changes; read
//! and marked read by their person only; each new one handed to the person's `InboxDO`,
//! which tells their open tabs and sends the notifications they chose. Also their
//! notification settings and their browsers' push subscriptions.

use crate::caller::Caller;
use crate::db::{self, num};
use crate::http::{body_as, ApiResult};
use inspect_protocol::inbox::{
    self, Attention, Delivery, InboxItem, InboxKind, InboxPage, MarkRead, MarkedRead,
    NotificationPrefs, PushKey, PushSubscription,
};
use inspect_protocol::session::Actor;
use inspect_protocol::ApiError;
use serde::Deserialize;
use worker::{Env, Method, Request, RequestInit, Response};

/// The person objects' binding (the control plane's own class).
pub const INBOX_BINDING: &str = "INBOX";
/// Whose object it is (set by the control plane, which alone reaches it).
pub const USER_HEADER: &str = "X-Inspect-Inbox-User";
/// The unread count a new socket is greeted with.
pub const UNREAD_HEADER: &str = "X-Inspect-Inbox-Unread";
/// The most items one page lists.
const PAGE_LIMIT: i64 = 100;

/// What a session's object told: each person it is for gets one item per event.
pub async fn attention(
    env: &Env,
    items: &[Attention],
    session_url: &str,
    now: i64,
) -> ApiResult<()> {
    for a in items {
        let url = format!("/sessions/{}", a.session_id);
        for person in people_for(env, a).await? {
            let item = NewItem {
                kind: a.kind,
                session_id: &a.session_id,
                title: &a.title,
                detail: &a.detail,
                url: &url,
                key: &a.key,
            };
            add(env, &person, &item, session_url, now).await?;
        }
    }
    Ok(())
}

/// Who an event is for: its people as the persons they are linked to (an unlinked bot
/// identity has no inbox), and the logins it names among the people who signed in, less
/// whoever caused it.
async fn people_for(env: &Env, a: &Attention) -> ApiResult<Vec<String>> {
    let mut people: Vec<String> = Vec::new();
    let as_person = |id: &str| Actor {
        user_id: id.to_owned(),
        name: String::new(),
        email: None,
        avatar: None,
    };
    for id in &a.people {
        let person = crate::linked::resolve(env, &as_person(id)).await?.user_id;
        if crate::auth::links::provider(&person).is_none()
            && !person.starts_with("system:")
            && !people.contains(&person)
        {
            people.push(person);
        }
    }
    if !a.mentions.is_empty() {
        #[derive(Deserialize)]
        struct Row {
            id: String,
        }
        let marks = vec!["?"; a.mentions.len()].join(", ");
        let logins: Vec<worker::wasm_bindgen::JsValue> =
            a.mentions.iter().map(|m| m.as_str().into()).collect();
        let rows: Vec<Row> = db::all(
            env,
            &format!("SELECT id FROM users WHERE lower(login) IN ({marks})"),
            &logins,
        )
        .await?;
        let by = match &a.by {
            Some(by) => Some(crate::linked::resolve(env, &as_person(by)).await?.user_id),
            None => None,
        };
        for r in rows {
            if Some(&r.id) != by.as_ref() && !people.contains(&r.id) {
                people.push(r.id);
            }
        }
    }
    Ok(people)
}

/// An item to put in one person's inbox.
pub struct NewItem<'a> {
    pub kind: InboxKind,
    pub session_id: &'a str,
    pub title: &'a str,
    pub detail: &'a str,
    /// The page it opens (the session's).
    pub url: &'a str,
    /// One item per person and key.
    pub key: &'a str,
}

/// Puts the item in the person's inbox (once per key) and, when it is new, hands it to
/// their object to tell their tabs and notify them; `link` is what a notification opens.
pub async fn add(
    env: &Env,
    user_id: &str,
    new: &NewItem<'_>,
    link: &str,
    now: i64,
) -> ApiResult<()> {
    let id = format!("inb_{}", hex(&db::random::<12>()?));
    let title = inbox::detail_line(new.title);
    let detail = inbox::detail_line(new.detail);
    // One round trip: the item (once per key), then what its delivery needs.
    let database = db::database(env)?;
    let prepare = |sql: &str, args: &[worker::wasm_bindgen::JsValue]| {
        database
            .prepare(sql)
            .bind(args)
            .map_err(inspect_runtime::d1::unavailable)
    };
    let statements = vec![
        prepare(
            "INSERT OR IGNORE INTO inbox_items (id, user_id, session_id, kind, title, detail, url, event_key, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            &[
                id.as_str().into(),
                user_id.into(),
                new.session_id.into(),
                new.kind.as_str().into(),
                title.as_str().into(),
                detail.as_str().into(),
                new.url.into(),
                new.key.into(),
                num(now),
            ],
        )?,
        prepare(
            "SELECT COUNT(*) AS n FROM inbox_items WHERE user_id = ?1 AND read_at IS NULL",
            &[user_id.into()],
        )?,
        prepare(
            "SELECT prefs FROM notification_prefs WHERE user_id = ?1",
            &[user_id.into()],
        )?,
        prepare(
            "SELECT identity FROM identity_links WHERE user_id = ?1 AND identity LIKE 'slack:%' ORDER BY linked_at DESC LIMIT 1",
            &[user_id.into()],
        )?,
    ];
    let results = database
        .batch(statements)
        .await
        .map_err(inspect_runtime::d1::unavailable)?;
    let added = results
        .first()
        .and_then(|r| r.meta().ok().flatten())
        .and_then(|m| m.changes)
        .unwrap_or(0);
    if added == 0 {
        return Ok(());
    }
    #[derive(Deserialize)]
    struct Count {
        n: i64,
    }
    #[derive(Deserialize)]
    struct Prefs {
        prefs: String,
    }
    #[derive(Deserialize)]
    struct Identity {
        identity: String,
    }
    let first_row = |i: usize| results.get(i);
    let unread = first_row(1)
        .and_then(|r| r.results::<Count>().ok())
        .and_then(|rows| rows.into_iter().next())
        .map_or(1, |c| c.n);
    let prefs: NotificationPrefs = first_row(2)
        .and_then(|r| r.results::<Prefs>().ok())
        .and_then(|rows| rows.into_iter().next())
        .and_then(|p| serde_json::from_str(&p.prefs).ok())
        .unwrap_or_default();
    let channels = prefs.channels(new.kind);
    let slack_user = if channels.slack {
        first_row(3)
            .and_then(|r| r.results::<Identity>().ok())
            .and_then(|rows| rows.into_iter().next())
            .and_then(|r| r.identity.strip_prefix("slack:").map(str::to_owned))
    } else {
        None
    };
    let item = InboxItem {
        id,
        kind: new.kind,
        session_id: new.session_id.to_owned(),
        title,
        detail,
        url: new.url.to_owned(),
        created_at: now,
        read_at: None,
    };
    let delivery = Delivery {
        item,
        unread,
        channels,
        link: link.to_owned(),
        slack_user,
    };
    tell_object(env, user_id, "/notify", &delivery).await
}

/// What a notification links to for a page of the app: absolute at `PUBLIC_URL`, else the
/// path (the service worker opens it on its own origin).
pub fn link_to(env: &Env, path: &str) -> String {
    match db::setting(env, "PUBLIC_URL") {
        Some(base) => format!("{}{path}", base.trim_end_matches('/')),
        None => path.to_owned(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The person's object: where their tabs' sockets are held and their notifications sent.
fn object(env: &Env, user_id: &str) -> ApiResult<worker::Stub> {
    let ns = env
        .durable_object(INBOX_BINDING)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    ns.id_from_name(user_id)
        .and_then(|id| id.get_stub())
        .map_err(|e| ApiError::internal(e.to_string()))
}

async fn tell_object<T: serde::Serialize>(
    env: &Env,
    user_id: &str,
    path: &str,
    body: &T,
) -> ApiResult<()> {
    let text = serde_json::to_string(body).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post)
        .with_body(Some(worker::wasm_bindgen::JsValue::from_str(&text)));
    let req = Request::new_with_init(&format!("https://inbox{path}"), &init)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    req.headers()
        .set(USER_HEADER, user_id)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let resp = object(env, user_id)?
        .fetch_with_request(req)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    if resp.status_code() >= 300 {
        return Err(ApiError::internal(format!(
            "the inbox object answered {}",
            resp.status_code()
        )));
    }
    Ok(())
}

/// `GET /inbox/socket`: the caller's live inbox (a WebSocket held by their object).
pub async fn socket(env: &Env, caller: &Caller, req: Request) -> ApiResult<Response> {
    let upgrade = req.headers().get("Upgrade").ok().flatten();
    if !upgrade.is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
        return Err(ApiError::new(
            inspect_protocol::ErrorCode::BadRequest,
            "GET /inbox/socket is a WebSocket (Upgrade: websocket)",
        ));
    }
    // A page of another site may not open it with the person's cookie.
    let url = req
        .url()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    crate::auth::origin::check_same_origin(
        "POST",
        req.headers().get("Origin").ok().flatten().as_deref(),
        req.headers()
            .get("Sec-Fetch-Site")
            .ok()
            .flatten()
            .as_deref(),
        &url.origin().ascii_serialization(),
    )?;
    let user_id = &caller.actor.user_id;
    let forwarded = Request::new("https://inbox/socket", Method::Get)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let headers = forwarded.headers();
    for (k, v) in [("Upgrade", "websocket"), (USER_HEADER, user_id.as_str())] {
        headers
            .set(k, v)
            .map_err(|e| ApiError::internal(e.to_string()))?;
    }
    let unread = unread(env, user_id).await?;
    headers
        .set(UNREAD_HEADER, &unread.to_string())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    object(env, user_id)?
        .fetch_with_request(forwarded)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// The person's unread count.
pub async fn unread(env: &Env, user_id: &str) -> ApiResult<i64> {
    #[derive(Deserialize)]
    struct Row {
        n: i64,
    }
    let row: Option<Row> = db::first(
        env,
        "SELECT COUNT(*) AS n FROM inbox_items WHERE user_id = ?1 AND read_at IS NULL",
        &[user_id.into()],
    )
    .await?;
    Ok(row.map_or(0, |r| r.n))
}

#[derive(Deserialize)]
struct ItemRow {
    id: String,
    kind: String,
    session_id: String,
    title: String,
    detail: String,
    url: String,
    created_at: i64,
    read_at: Option<i64>,
}

/// `GET /inbox?unread=1&before=<ms>`: the caller's items, newest first.
pub async fn page(env: &Env, caller: &Caller, pairs: &[(String, String)]) -> ApiResult<InboxPage> {
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let only_unread = matches!(get("unread"), Some("1") | Some("true"));
    let before = match get("before") {
        Some(b) => b
            .parse::<i64>()
            .map_err(|_| ApiError::bad_request("before is a time in ms"))?,
        None => i64::MAX,
    };
    let user_id = caller.actor.user_id.as_str();
    let rows: Vec<ItemRow> =
        db::all(
            env,
            &format!(
            "SELECT id, kind, session_id, title, detail, url, created_at, read_at FROM inbox_items
             WHERE user_id = ?1 AND created_at < ?2 {} ORDER BY created_at DESC, id DESC LIMIT ?3",
            if only_unread { "AND read_at IS NULL" } else { "" }
        ),
            &[user_id.into(), num(before), num(PAGE_LIMIT)],
        )
        .await?;
    let items = rows
        .into_iter()
        .filter_map(|r| {
            Some(InboxItem {
                kind: InboxKind::parse(&r.kind)?,
                id: r.id,
                session_id: r.session_id,
                title: r.title,
                detail: r.detail,
                url: r.url,
                created_at: r.created_at,
                read_at: r.read_at,
            })
        })
        .collect();
    Ok(InboxPage {
        items,
        unread: unread(env, user_id).await?,
    })
}

/// `POST /inbox/read`: marks the caller's items read. Naming an item that is not the
/// caller's is refused (404) and marks nothing.
pub async fn mark_read(env: &Env, caller: &Caller, body: &[u8], now: i64) -> ApiResult<MarkedRead> {
    let ask: MarkRead = body_as(body)?;
    ask.check()?;
    let user_id = caller.actor.user_id.as_str();
    let marked = if !ask.ids.is_empty() {
        let marks: Vec<String> = (0..ask.ids.len()).map(|i| format!("?{}", i + 3)).collect();
        let mut args: Vec<worker::wasm_bindgen::JsValue> = vec![user_id.into(), num(now)];
        args.extend(ask.ids.iter().map(|id| id.as_str().into()));
        #[derive(Deserialize)]
        struct Row {
            n: i64,
        }
        let mut owned_args: Vec<worker::wasm_bindgen::JsValue> = vec![user_id.into()];
        owned_args.extend(ask.ids.iter().map(|id| id.as_str().into()));
        let owned_marks: Vec<String> = (0..ask.ids.len()).map(|i| format!("?{}", i + 2)).collect();
        let owned: Option<Row> = db::first(
            env,
            &format!(
                "SELECT COUNT(*) AS n FROM inbox_items WHERE user_id = ?1 AND id IN ({})",
                owned_marks.join(", ")
            ),
            &owned_args,
        )
        .await?;
        let mut distinct = ask.ids.clone();
        distinct.sort();
        distinct.dedup();
        if owned.map_or(0, |r| r.n) != distinct.len() as i64 {
            return Err(ApiError::not_found("no such inbox item of yours"));
        }
        db::run(
            env,
            &format!(
                "UPDATE inbox_items SET read_at = ?2 WHERE user_id = ?1 AND read_at IS NULL AND id IN ({})",
                marks.join(", ")
            ),
            &args,
        )
        .await?
    } else if let Some(session_id) = &ask.session_id {
        db::run(
            env,
            "UPDATE inbox_items SET read_at = ?2 WHERE user_id = ?1 AND session_id = ?3 AND read_at IS NULL",
            &[user_id.into(), num(now), session_id.as_str().into()],
        )
        .await?
    } else {
        db::run(
            env,
            "UPDATE inbox_items SET read_at = ?2 WHERE user_id = ?1 AND read_at IS NULL",
            &[user_id.into(), num(now)],
        )
        .await?
    };
    let unread = unread(env, user_id).await?;
    if marked > 0 {
        // The person's other tabs hear the count.
        tell_object(
            env,
            user_id,
            "/unread",
            &inspect_protocol::inbox::InboxMessage::Unread { unread },
        )
        .await?;
    }
    Ok(MarkedRead {
        marked: marked as i64,
        unread,
    })
}

/// A person's notification settings (the defaults until they choose).
pub async fn prefs_of(env: &Env, user_id: &str) -> ApiResult<NotificationPrefs> {
    #[derive(Deserialize)]
    struct Row {
        prefs: String,
    }
    let row: Option<Row> = db::first(
        env,
        "SELECT prefs FROM notification_prefs WHERE user_id = ?1",
        &[user_id.into()],
    )
    .await?;
    Ok(row
        .and_then(|r| serde_json::from_str(&r.prefs).ok())
        .unwrap_or_default())
}

/// `PUT /notifications/preferences`.
pub async fn put_prefs(
    env: &Env,
    caller: &Caller,
    body: &[u8],
    now: i64,
) -> ApiResult<NotificationPrefs> {
    let prefs: NotificationPrefs = body_as(body)?;
    let text = serde_json::to_string(&prefs).map_err(|e| ApiError::internal(e.to_string()))?;
    db::run(
        env,
        "INSERT INTO notification_prefs (user_id, prefs, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(user_id) DO UPDATE SET prefs = excluded.prefs, updated_at = excluded.updated_at",
        &[caller.actor.user_id.as_str().into(), text.into(), num(now)],
    )
    .await?;
    Ok(prefs)
}

/// `GET /notifications/push-key`.
pub fn push_key(env: &Env) -> ApiResult<PushKey> {
    Ok(PushKey {
        public_key: crate::push::vapid(env)?.map(|(keys, _)| keys.public_b64()),
    })
}

/// `POST /notifications/push-subscriptions`: the caller's browser subscribed; kept for
/// them (an endpoint another person had moves to the caller: it is one browser).
pub async fn subscribe(env: &Env, caller: &Caller, body: &[u8], now: i64) -> ApiResult<()> {
    if crate::push::vapid(env)?.is_none() {
        return Err(ApiError::new(
            inspect_protocol::ErrorCode::Unavailable,
            "Web Push is not set up here (VAPID_PUBLIC_KEY, VAPID_PRIVATE_KEY)",
        ));
    }
    let sub: PushSubscription = body_as(body)?;
    let local_mode = db::setting(env, "LOCAL_MODE").as_deref() == Some("true");
    inbox::check_subscription(&sub, local_mode)?;
    let user_id = caller.actor.user_id.as_str();
    db::run(
        env,
        "INSERT INTO push_subscriptions (endpoint, user_id, p256dh, auth, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(endpoint) DO UPDATE SET user_id = excluded.user_id, p256dh = excluded.p256dh, auth = excluded.auth, created_at = excluded.created_at",
        &[
            sub.endpoint.as_str().into(),
            user_id.into(),
            sub.keys.p256dh.as_str().into(),
            sub.keys.auth.as_str().into(),
            num(now),
        ],
    )
    .await?;
    // The oldest beyond the most a person keeps are let go.
    db::run(
        env,
        "DELETE FROM push_subscriptions WHERE user_id = ?1 AND endpoint NOT IN
           (SELECT endpoint FROM push_subscriptions WHERE user_id = ?1 ORDER BY created_at DESC LIMIT ?2)",
        &[user_id.into(), num(inbox::MAX_PUSH_SUBSCRIPTIONS as i64)],
    )
    .await?;
    Ok(())
}

/// `DELETE /notifications/push-subscriptions?endpoint=…`: one of the caller's own.
pub async fn unsubscribe(env: &Env, caller: &Caller, pairs: &[(String, String)]) -> ApiResult<()> {
    let endpoint = pairs
        .iter()
        .find(|(k, _)| k == "endpoint")
        .map(|(_, v)| v.as_str())
        .ok_or_else(|| ApiError::bad_request("say which subscription: ?endpoint="))?;
    let gone = db::run(
        env,
        "DELETE FROM push_subscriptions WHERE endpoint = ?1 AND user_id = ?2",
        &[endpoint.into(), caller.actor.user_id.as_str().into()],
    )
    .await?;
    if gone == 0 {
        return Err(ApiError::not_found("no such push subscription of yours"));
    }
    Ok(())
}

/// Budgets of the person's 80 % used: each told once a month, in their inbox and where
/// they chose.
pub async fn budget_nearly_spent(
    env: &Env,
    user_id: &str,
    nearly: &[inspect_protocol::budgets::BudgetStatus],
    now: i64,
) -> ApiResult<()> {
    for status in nearly {
        let b = &status.budget;
        let (month, _) = inspect_protocol::budgets::month(now);
        let whose = match b.scope {
            inspect_protocol::budgets::BudgetScope::Deployment => "the deployment's",
            inspect_protocol::budgets::BudgetScope::Person => "your",
        };
        let detail = format!(
            "{} of {whose} monthly {} used; new work stops at the limit (it resets at the start of next month).",
            b.metric.words(status.used),
            b.metric.words(b.monthly_limit),
        );
        let key = format!(
            "budget:{}:{}:{}:{month}",
            b.scope.as_str(),
            b.subject,
            b.metric.as_str()
        );
        let item = NewItem {
            kind: InboxKind::Budget,
            session_id: "",
            title: "80 % of a monthly budget used",
            detail: &detail,
            url: "/analytics",
            key: &key,
        };
        add(env, user_id, &item, &link_to(env, "/analytics"), now).await?;
    }
    Ok(())
}
