//! A person's inbox and how they are told: the sessions that need them (a prompt of theirs
//! ended, a pull request of theirs changed, an automation of theirs failed, someone named
//! them), unread until opened; the kinds they want told in the browser, by Web Push or in
//! Slack; and the push subscriptions of their browsers. The rules here are pure: which
//! kind an event is, who an `@name` in a prompt is, whether a push endpoint may be used,
//! and when a burst of notifications folds into one.

use crate::ApiError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a session is in someone's inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum InboxKind {
    /// A prompt the person sent ended well.
    PromptFinished,
    /// A prompt the person sent failed.
    PromptFailed,
    /// The agent ended a prompt of theirs with a question for them.
    Question,
    /// A pull request of a session they own was merged, closed or reviewed.
    PullRequest,
    /// An automation they own had a run fail.
    AutomationFailed,
    /// Someone named them (`@login`) in a session's prompt.
    Mention,
    /// A monthly budget that applies to them is 80 % used.
    Budget,
}

impl InboxKind {
    pub const ALL: [InboxKind; 7] = [
        InboxKind::PromptFinished,
        InboxKind::PromptFailed,
        InboxKind::Question,
        InboxKind::PullRequest,
        InboxKind::AutomationFailed,
        InboxKind::Mention,
        InboxKind::Budget,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InboxKind::PromptFinished => "prompt_finished",
            InboxKind::PromptFailed => "prompt_failed",
            InboxKind::Question => "question",
            InboxKind::PullRequest => "pull_request",
            InboxKind::AutomationFailed => "automation_failed",
            InboxKind::Mention => "mention",
            InboxKind::Budget => "budget",
        }
    }

    pub fn parse(s: &str) -> Option<InboxKind> {
        InboxKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One session that needs a person, as their inbox lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct InboxItem {
    pub id: String,
    pub kind: InboxKind,
    pub session_id: String,
    /// The session's title (or what it works on).
    pub title: String,
    /// What happened, in a line: the agent's last words, the error, the PR's new state.
    pub detail: String,
    /// Where to open it (the session's page; the PR for a PR's change).
    pub url: String,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub read_at: Option<i64>,
}

/// `GET /inbox`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct InboxPage {
    pub items: Vec<InboxItem>,
    /// Every unread item of the person's, not only those on this page.
    pub unread: i64,
}

/// `POST /inbox/read`: the items marked read, by id, or every item of a session (what
/// opening it does), or all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MarkRead {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "ts", ts(as = "Option<Vec<String>>", optional))]
    pub ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "ts", ts(as = "Option<bool>", optional))]
    pub all: bool,
}

/// The most ids one mark-read names.
pub const MAX_MARK_READ_IDS: usize = 200;

impl MarkRead {
    /// Exactly one of the three, within bounds.
    pub fn check(&self) -> Result<(), ApiError> {
        let chosen = usize::from(!self.ids.is_empty())
            + usize::from(self.session_id.is_some())
            + usize::from(self.all);
        if chosen != 1 {
            return Err(ApiError::bad_request(
                "say which items are read: `ids`, `sessionId` or `all` (one of them)",
            ));
        }
        if self.ids.len() > MAX_MARK_READ_IDS {
            return Err(ApiError::bad_request(format!(
                "at most {MAX_MARK_READ_IDS} ids at once"
            )));
        }
        if self.ids.iter().any(|id| id.is_empty() || id.len() > 64) {
            return Err(ApiError::bad_request("an item id is 1 to 64 characters"));
        }
        Ok(())
    }
}

/// The answer to a mark-read: how many items changed, and the person's unread count now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct MarkedRead {
    pub marked: i64,
    pub unread: i64,
}

/// What the person's inbox socket says (`GET /inbox/socket`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InboxMessage {
    /// A new item, with the unread count after it.
    Item {
        item: InboxItem,
        unread: i64,
        /// Whether this tab should show a browser notification (the person asked for them
        /// for this kind).
        notify: bool,
    },
    /// Items were marked read (in this or another tab): the count now.
    Unread { unread: i64 },
    /// The answer to a client's `{"type": "ping"}`: the socket is alive.
    Pong,
}

/// Where a person wants a kind told, besides the inbox (which always lists it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Channels {
    /// A notification from an open tab.
    #[serde(default)]
    pub browser: bool,
    /// Web Push to the person's subscribed browsers (tabs closed).
    #[serde(default)]
    pub push: bool,
    /// A Slack direct message (a linked Slack identity).
    #[serde(default)]
    pub slack: bool,
}

/// A person's notification settings: per kind, the channels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct NotificationPrefs {
    pub kinds: BTreeMap<InboxKind, Channels>,
}

impl Default for NotificationPrefs {
    /// What a person gets before choosing: their own prompts' endings, questions and
    /// mentions in the browser and by push; the rest in the inbox only.
    fn default() -> Self {
        let loud = Channels {
            browser: true,
            push: true,
            slack: false,
        };
        let kinds = InboxKind::ALL
            .into_iter()
            .map(|k| {
                let c = match k {
                    InboxKind::PromptFinished
                    | InboxKind::PromptFailed
                    | InboxKind::Question
                    | InboxKind::Mention
                    | InboxKind::Budget => loud,
                    InboxKind::PullRequest | InboxKind::AutomationFailed => Channels {
                        browser: true,
                        ..Channels::default()
                    },
                };
                (k, c)
            })
            .collect();
        NotificationPrefs { kinds }
    }
}

impl NotificationPrefs {
    /// The channels for a kind (a kind never chosen gets the default's).
    pub fn channels(&self, kind: InboxKind) -> Channels {
        self.kinds
            .get(&kind)
            .copied()
            .unwrap_or_else(|| NotificationPrefs::default().kinds[&kind])
    }
}

/// A browser's push subscription, as `PushSubscription.toJSON()` gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushSubscription {
    pub endpoint: String,
    /// When the push service will drop it (ms since the epoch), if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub expiration_time: Option<i64>,
    pub keys: PushKeys,
}

/// The browser's keys: its P-256 public key (65 bytes, uncompressed) and the 16-byte
/// authentication secret, both base64url without padding (RFC 8291).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct PushKeys {
    pub p256dh: String,
    pub auth: String,
}

/// `GET /notifications/push-key`: the deployment's VAPID public key (base64url, 65 bytes
/// uncompressed), the `applicationServerKey` a browser subscribes with; absent when push
/// is not set up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PushKey {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub public_key: Option<String>,
}

/// The longest push endpoint kept.
pub const MAX_PUSH_ENDPOINT: usize = 1024;
/// The most push subscriptions one person keeps (a new one beyond drops the oldest).
pub const MAX_PUSH_SUBSCRIPTIONS: usize = 10;

/// The decoded keys of a subscription that may be used: an `https` endpoint (`http` only on
/// loopback in local mode), a 65-byte uncompressed point and a 16-byte secret.
pub fn check_subscription(
    sub: &PushSubscription,
    local_mode: bool,
) -> Result<(Vec<u8>, Vec<u8>), ApiError> {
    use base64::Engine;
    let endpoint = sub.endpoint.as_str();
    if endpoint.len() > MAX_PUSH_ENDPOINT {
        return Err(ApiError::bad_request(format!(
            "a push endpoint is at most {MAX_PUSH_ENDPOINT} characters"
        )));
    }
    let secure = endpoint.starts_with("https://") && endpoint.len() > "https://".len();
    let loopback_plain = local_mode && endpoint.starts_with("http://");
    if !(secure || loopback_plain) {
        return Err(ApiError::bad_request(
            "a push endpoint must be an https URL (a push service's)",
        ));
    }
    if endpoint
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(ApiError::bad_request("a push endpoint is one URL"));
    }
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let decode = |s: &str| b64.decode(s.trim_end_matches('='));
    let p256dh = decode(&sub.keys.p256dh)
        .ok()
        .filter(|k| k.len() == 65 && k[0] == 4)
        .ok_or_else(|| {
            ApiError::bad_request("keys.p256dh must be a P-256 public key (65 bytes, base64url)")
        })?;
    let auth = decode(&sub.keys.auth)
        .ok()
        .filter(|k| k.len() == 16)
        .ok_or_else(|| ApiError::bad_request("keys.auth must be 16 bytes, base64url"))?;
    Ok((p256dh, auth))
}

/// What a session's object tells the control plane of an event that may need people: the
/// control plane finds who (the author, the names) and fills their inboxes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attention {
    pub kind: InboxKind,
    pub session_id: String,
    /// Who it is for, as the session knows them (`github:…`, or a linked identity).
    #[serde(default)]
    pub people: Vec<String>,
    /// Logins named with `@` (a mention): found among the people who signed in.
    #[serde(default)]
    pub mentions: Vec<String>,
    /// Who caused it (a mention does not reach its own author).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    pub title: String,
    pub detail: String,
    /// The same event told twice makes one item per person.
    pub key: String,
}

/// The longest detail an item keeps.
pub const MAX_DETAIL_CHARS: usize = 280;

/// A line of at most [`MAX_DETAIL_CHARS`] characters: whitespace folded, cut with `…`.
pub fn detail_line(text: &str) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.chars().count() <= MAX_DETAIL_CHARS {
        return folded;
    }
    let mut cut: String = folded.chars().take(MAX_DETAIL_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// The logins a prompt names with `@` (GitHub's rules: letters, digits and single
/// hyphens, at most 39), lowercased, each once, at most ten; an address (`a@b.c`) names no
/// one.
pub fn mentions(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let bytes = text.as_bytes();
    for (i, _) in text.match_indices('@') {
        let before = i.checked_sub(1).map(|j| bytes[j]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.') {
            continue;
        }
        let rest = &text[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        let login = &rest[..end];
        let valid = !login.is_empty()
            && login.len() <= 39
            && !login.starts_with('-')
            && !login.ends_with('-')
            && !login.contains("--");
        // `@name/repo` or `@name.domain` is not a person.
        let next = rest[end..].chars().next();
        if !valid || matches!(next, Some('/') | Some('@')) {
            continue;
        }
        if next == Some('.') && rest[end + 1..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
            continue;
        }
        let login = login.to_ascii_lowercase();
        if !found.contains(&login) {
            found.push(login);
        }
        if found.len() == 10 {
            break;
        }
    }
    found
}

/// Whether the agent's last words end the turn with a question for the person: the last
/// sentence ends with `?`.
pub fn asks_question(summary: &str) -> bool {
    let trimmed = summary.trim_end_matches(|c: char| c.is_whitespace() || c == '*' || c == '_');
    trimmed.ends_with('?')
}

/// Notifications to one person within this long of the last are folded into one.
pub const COALESCE_MS: i64 = 10_000;

/// What to do with a notification for a person whose last one went out at `last_sent` and
/// who has `pending` folded ones waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// Send it now.
    Send,
    /// Hold it: one notification for all held goes out at this time.
    HoldUntil(i64),
}

pub fn fold(now: i64, last_sent: Option<i64>) -> Fold {
    match last_sent {
        Some(last) if now - last < COALESCE_MS => Fold::HoldUntil(last + COALESCE_MS),
        _ => Fold::Send,
    }
}

/// What a notification says (a push's payload, a DM's text, a tab's notification).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Notice {
    pub title: String,
    pub body: String,
    pub url: String,
    /// Folded notices share a tag, so a browser shows the newest in place of the older.
    pub tag: String,
}

/// An item on its way to a person's notifications, with the absolute link it opens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub item: InboxItem,
    /// The person's unread count with it.
    pub unread: i64,
    pub channels: Channels,
    /// Where a notification takes the person (the session's page, absolute).
    pub link: String,
    /// The person's linked Slack user id, for a direct message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack_user: Option<String>,
}

/// The notice for one delivery, or for several folded into one (linking the inbox, at
/// `inbox_link`).
pub fn notice(held: &[Delivery], inbox_link: &str) -> Option<Notice> {
    let last = held.last()?;
    let first = &last.item;
    if held.len() == 1 {
        let what = match first.kind {
            InboxKind::PromptFinished => "Finished",
            InboxKind::PromptFailed => "Failed",
            InboxKind::Question => "Asks you",
            InboxKind::PullRequest => "Pull request",
            InboxKind::AutomationFailed => "Automation failed",
            InboxKind::Mention => "You were mentioned",
            InboxKind::Budget => "Budget",
        };
        return Some(Notice {
            title: format!("{what}: {}", first.title),
            body: first.detail.clone(),
            url: last.link.clone(),
            tag: format!("session-{}", first.session_id),
        });
    }
    let sessions: std::collections::BTreeSet<&str> =
        held.iter().map(|d| d.item.session_id.as_str()).collect();
    Some(Notice {
        title: format!("{} updates in {} sessions", held.len(), sessions.len()),
        body: held
            .iter()
            .rev()
            .take(3)
            .map(|d| d.item.title.as_str())
            .collect::<Vec<_>>()
            .join(" · "),
        url: inbox_link.to_owned(),
        tag: "inbox".into(),
    })
}

/// Where the inbox page is, beside a session's link (`…/sessions/:id` → `…/inbox`).
pub fn inbox_link(session_link: &str) -> String {
    match session_link.rfind("/sessions/") {
        Some(i) => format!("{}/inbox", &session_link[..i]),
        None => "/inbox".into(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_logins_not_addresses_or_paths() {
        assert_eq!(
            mentions("ask @Bob and @carol-x, cc @bob; mail a@b.com, see @org/repo, @-no, @a--b"),
            vec!["bob", "carol-x"]
        );
        assert_eq!(mentions("@dave."), vec!["dave"]);
        assert!(mentions("@example.com").is_empty());
        assert!(mentions("").is_empty());
        let many: String = (0..20).map(|i| format!("@p{i} ")).collect();
        assert_eq!(mentions(&many).len(), 10);
    }

    #[test]
    fn a_question_ends_with_a_question_mark() {
        assert!(asks_question("Which branch should I use?\n"));
        assert!(asks_question("Shall I go on? **"));
        assert!(!asks_question("Done. Tests pass."));
    }

    #[test]
    fn detail_is_one_bounded_line() {
        assert_eq!(detail_line("a\n\n b\tc"), "a b c");
        let long = "x".repeat(1000);
        let d = detail_line(&long);
        assert_eq!(d.chars().count(), MAX_DETAIL_CHARS);
        assert!(d.ends_with('…'));
    }

    #[test]
    fn mark_read_says_exactly_one_thing() {
        assert!(MarkRead::default().check().is_err());
        assert!(MarkRead {
            all: true,
            session_id: Some("s".into()),
            ..MarkRead::default()
        }
        .check()
        .is_err());
        assert!(MarkRead {
            ids: vec!["a".into()],
            ..MarkRead::default()
        }
        .check()
        .is_ok());
        assert!(MarkRead {
            ids: vec!["a".into(); MAX_MARK_READ_IDS + 1],
            ..MarkRead::default()
        }
        .check()
        .is_err());
        let unknown: Result<MarkRead, _> = serde_json::from_str(r#"{"all":true,"userId":"x"}"#);
        assert!(unknown.is_err());
    }

    fn sub(endpoint: &str, p256dh: &str, auth: &str) -> PushSubscription {
        PushSubscription {
            endpoint: endpoint.into(),
            expiration_time: None,
            keys: PushKeys {
                p256dh: p256dh.into(),
                auth: auth.into(),
            },
        }
    }

    #[test]
    fn a_subscription_is_https_with_real_keys() {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let mut point = vec![4u8];
        point.extend([7u8; 64]);
        let key = b64.encode(&point);
        let auth = b64.encode([1u8; 16]);
        assert!(check_subscription(&sub("https://push.example/x", &key, &auth), false).is_ok());
        assert!(check_subscription(&sub("http://push.example/x", &key, &auth), false).is_err());
        assert!(check_subscription(&sub("http://127.0.0.1:9/x", &key, &auth), true).is_ok());
        assert!(check_subscription(&sub("ftp://x", &key, &auth), true).is_err());
        assert!(check_subscription(&sub("https://", &key, &auth), false).is_err());
        assert!(check_subscription(
            &sub("https://p.example/x", &b64.encode([4u8; 33]), &auth),
            false
        )
        .is_err());
        assert!(check_subscription(&sub("https://p.example/x", &key, "AAAA"), false).is_err());
        let long = format!("https://p.example/{}", "a".repeat(MAX_PUSH_ENDPOINT));
        assert!(check_subscription(&sub(&long, &key, &auth), false).is_err());
    }

    #[test]
    fn a_burst_folds_into_one_notice() {
        assert_eq!(fold(1_000, None), Fold::Send);
        assert_eq!(fold(50_000, Some(1_000)), Fold::Send);
        assert_eq!(fold(5_000, Some(1_000)), Fold::HoldUntil(11_000));
        let item = |s: &str, t: &str| Delivery {
            item: InboxItem {
                id: t.into(),
                kind: InboxKind::PromptFinished,
                session_id: s.into(),
                title: t.into(),
                detail: "d".into(),
                url: format!("/sessions/{s}"),
                created_at: 0,
                read_at: None,
            },
            unread: 1,
            channels: Channels::default(),
            link: format!("https://x.dev/sessions/{s}"),
            slack_user: None,
        };
        let one = notice(&[item("s1", "Fix")], "https://x.dev/inbox").unwrap();
        assert_eq!(one.title, "Finished: Fix");
        assert_eq!(one.url, "https://x.dev/sessions/s1");
        let many = notice(
            &[item("s1", "A"), item("s2", "B"), item("s1", "C")],
            &inbox_link("https://x.dev/sessions/s1"),
        )
        .unwrap();
        assert_eq!(many.title, "3 updates in 2 sessions");
        assert_eq!(many.url, "https://x.dev/inbox");
        assert!(notice(&[], "x").is_none());
        assert_eq!(inbox_link("nowhere"), "/inbox");
    }

    #[test]
    fn prefs_default_and_read_back() {
        let prefs = NotificationPrefs::default();
        assert!(prefs.channels(InboxKind::PromptFinished).push);
        assert!(!prefs.channels(InboxKind::PullRequest).push);
        let text = serde_json::to_string(&prefs).unwrap();
        assert!(text.contains("\"prompt_finished\""), "{text}");
        let partial: NotificationPrefs =
            serde_json::from_str(r#"{"kinds":{"mention":{"slack":true}}}"#).unwrap();
        assert!(partial.channels(InboxKind::Mention).slack);
        assert!(!partial.channels(InboxKind::Mention).push);
        assert!(partial.channels(InboxKind::PromptFailed).push);
    }
}
