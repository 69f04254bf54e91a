//! What a delivery to `POST /webhooks/slack/events` asks for: the URL check, a request to
//! the agent (a mention in a channel or thread, a direct message), the App Home opening,
//! or nothing (said why).

use serde::Deserialize;
use serde_json::Value;

/// A file Slack attached to a message.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SlackFile {
    #[serde(default, deserialize_with = "inspect_protocol::json::null_as_default")]
    pub id: String,
    #[serde(default, deserialize_with = "inspect_protocol::json::null_as_default")]
    pub name: String,
    #[serde(default, deserialize_with = "inspect_protocol::json::null_as_default")]
    pub mimetype: String,
    #[serde(default, deserialize_with = "inspect_protocol::json::null_as_default")]
    pub size: u64,
    #[serde(default)]
    pub url_private_download: Option<String>,
    #[serde(default)]
    pub url_private: Option<String>,
    /// `hosted`, `external`, `snippet`, …
    #[serde(default)]
    pub mode: Option<String>,
}

/// A person asking the agent something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub event_id: String,
    pub channel: String,
    pub user: String,
    /// The message without the bot's own mention.
    pub text: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    pub files: Vec<SlackFile>,
    /// A direct message (the App's Messages tab), not a channel.
    pub direct: bool,
}

impl Request {
    /// The thread the conversation lives in: the message's thread, or the message itself.
    pub fn thread(&self) -> &str {
        self.thread_ts.as_deref().unwrap_or(&self.ts)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// `url_verification`: answer with the challenge.
    Challenge(String),
    Request(Request),
    /// A message in a channel that does not mention the bot: for the channel triggers
    /// (automations), or a reply in a thread one of them started.
    ChannelMessage(Request),
    /// `app_home_opened` on the Home tab.
    HomeOpened {
        user: String,
    },
    Ignore(String),
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    challenge: Option<String>,
    #[serde(default)]
    event_id: Option<String>,
    #[serde(default)]
    event: Option<Value>,
}

#[derive(Deserialize)]
struct Inner {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    bot_id: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    ts: Option<String>,
    #[serde(default)]
    thread_ts: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    channel_type: Option<String>,
    #[serde(default)]
    tab: Option<String>,
    #[serde(default, deserialize_with = "inspect_protocol::json::null_as_default")]
    files: Vec<SlackFile>,
}

/// Removes `<@BOT>` mentions of the bot and tidies the space left.
pub fn without_mention(text: &str, bot_user: Option<&str>) -> String {
    let mut out = text.to_owned();
    if let Some(bot) = bot_user {
        out = out.replace(&format!("<@{bot}>"), " ");
        // The labelled form, `<@U123|name>`.
        let labelled = format!("<@{bot}|");
        while let Some(at) = out.find(&labelled) {
            match out[at..].find('>') {
                Some(end) => out.replace_range(at..at + end + 1, " "),
                None => break,
            }
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Reads a delivery's body; `bot_user` is the bot's own user id (`auth.test`), when known.
pub fn decide(body: &[u8], bot_user: Option<&str>) -> Result<Decision, String> {
    let env: Envelope = inspect_protocol::json::from_slice(body)
        .map_err(|e| format!("not an Events API delivery: {e}"))?;
    match env.kind.as_str() {
        "url_verification" => {
            return env
                .challenge
                .map(Decision::Challenge)
                .ok_or_else(|| "url_verification without a challenge".into())
        }
        "event_callback" => {}
        other => return Ok(Decision::Ignore(format!("envelope type {other}"))),
    }
    let event_id = env.event_id.unwrap_or_default();
    let inner: Inner = inspect_protocol::json::from_value(&env.event.unwrap_or(Value::Null))
        .map_err(|e| format!("unreadable event: {e}"))?;
    if inner.bot_id.is_some() || (bot_user.is_some() && inner.user.as_deref() == bot_user) {
        return Ok(Decision::Ignore("a bot's own message".into()));
    }
    let direct = match inner.kind.as_str() {
        "app_home_opened" => {
            return Ok(match (inner.tab.as_deref(), inner.user) {
                (Some("home"), Some(user)) => Decision::HomeOpened { user },
                _ => Decision::Ignore("app_home_opened off the Home tab".into()),
            })
        }
        "app_mention" => false,
        "message" if inner.channel_type.as_deref() == Some("im") => true,
        "message" if matches!(inner.channel_type.as_deref(), Some("channel" | "group")) => {
            let mentioned = bot_user.is_some_and(|b| {
                inner.text.as_deref().is_some_and(|t| {
                    t.contains(&format!("<@{b}>")) || t.contains(&format!("<@{b}|"))
                })
            });
            if mentioned {
                // Its `app_mention` event is the one acted on.
                return Ok(Decision::Ignore(
                    "a channel message that mentions the bot".into(),
                ));
            }
            false
        }
        "message" => {
            return Ok(Decision::Ignore(format!(
                "a message in a {} conversation",
                inner.channel_type.unwrap_or_default()
            )))
        }
        other => return Ok(Decision::Ignore(format!("event type {other}"))),
    };
    let channel_message = inner.kind == "message" && !direct;
    if !matches!(inner.subtype.as_deref(), None | Some("file_share")) {
        return Ok(Decision::Ignore(format!(
            "message subtype {}",
            inner.subtype.unwrap_or_default()
        )));
    }
    let (Some(user), Some(channel), Some(ts)) = (inner.user, inner.channel, inner.ts) else {
        return Ok(Decision::Ignore("no user, channel or timestamp".into()));
    };
    let text = without_mention(inner.text.as_deref().unwrap_or(""), bot_user);
    if text.is_empty() && inner.files.is_empty() {
        return Ok(Decision::Ignore("an empty message".into()));
    }
    let request = Request {
        event_id,
        channel,
        user,
        text,
        ts,
        thread_ts: inner.thread_ts,
        files: inner.files,
        direct,
    };
    Ok(match channel_message {
        true => Decision::ChannelMessage(request),
        false => Decision::Request(request),
    })
}

/// Whether Slack timestamp `ts` is later than `than` (`"1700000000.000100"`: seconds and
/// microseconds, compared as numbers; text that is not a timestamp is never later).
pub fn ts_after(ts: &str, than: &str) -> bool {
    fn parse(t: &str) -> Option<(u64, u64)> {
        let (secs, micros) = t.split_once('.').unwrap_or((t, "0"));
        Some((
            secs.parse().ok()?,
            format!("{micros:0<6}").get(..6)?.parse().ok()?,
        ))
    }
    match (parse(ts), parse(than)) {
        (Some(a), Some(b)) => a > b,
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn delivery(event: Value) -> Vec<u8> {
        json!({"type": "event_callback", "event_id": "Ev1", "team_id": "T1", "event": event})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn mentions_dms_and_threads() {
        let d = decide(
            &delivery(json!({"type": "app_mention", "user": "U1", "text": "<@UBOT> fix the   flaky test", "ts": "1.1", "channel": "C1"})),
            Some("UBOT"),
        )
        .unwrap();
        let Decision::Request(r) = d else {
            panic!("{d:?}")
        };
        assert_eq!(r.text, "fix the flaky test");
        assert_eq!(r.thread(), "1.1");
        assert!(!r.direct);
        let d = decide(
            &delivery(json!({"type": "app_mention", "user": "U1", "text": "<@UBOT> and this", "ts": "1.5", "thread_ts": "1.1", "channel": "C1"})),
            Some("UBOT"),
        )
        .unwrap();
        let Decision::Request(r) = d else { panic!() };
        assert_eq!(r.thread(), "1.1");
        let d = decide(
            &delivery(json!({"type": "message", "channel_type": "im", "user": "U1", "text": "hi", "ts": "2.1", "channel": "D1", "subtype": "file_share", "files": [{"id": "F1", "name": "a.png", "mimetype": "image/png", "size": 10}]})),
            None,
        )
        .unwrap();
        let Decision::Request(r) = d else { panic!() };
        assert!(r.direct);
        assert_eq!(r.files[0].id, "F1");
    }

    #[test]
    fn what_is_ignored_and_why() {
        let ignored = |event: Value| match decide(&delivery(event), Some("UBOT")).unwrap() {
            Decision::Ignore(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(ignored(json!({"type": "app_mention", "bot_id": "B1", "user": "U1", "text": "x", "ts": "1", "channel": "C"})).contains("bot"));
        assert!(ignored(
            json!({"type": "app_mention", "user": "UBOT", "text": "x", "ts": "1", "channel": "C"})
        )
        .contains("bot"));
        assert!(ignored(json!({"type": "message", "channel_type": "channel", "user": "U1", "text": "<@UBOT> x", "ts": "1", "channel": "C"})).contains("mentions the bot"));
        assert!(ignored(json!({"type": "message", "channel_type": "mpim", "user": "U1", "text": "x", "ts": "1", "channel": "G"})).contains("mpim"));
        assert!(ignored(json!({"type": "message", "channel_type": "channel", "subtype": "channel_join", "user": "U1", "text": "x", "ts": "1", "channel": "C"})).contains("subtype"));
        match decide(&delivery(json!({"type": "message", "channel_type": "channel", "user": "U1", "text": "the deploy failed", "ts": "1.2", "thread_ts": "1.1", "channel": "C"})), Some("UBOT")).unwrap() {
            Decision::ChannelMessage(r) => {
                assert_eq!(r.text, "the deploy failed");
                assert_eq!(r.thread(), "1.1");
            }
            other => panic!("{other:?}"),
        }
        assert!(ignored(json!({"type": "message", "channel_type": "im", "subtype": "message_changed", "user": "U1", "ts": "1", "channel": "D"})).contains("subtype"));
        assert!(ignored(json!({"type": "app_mention", "user": "U1", "text": "<@UBOT>", "ts": "1", "channel": "C"})).contains("empty"));
        assert!(ignored(json!({"type": "reaction_added", "user": "U1"})).contains("reaction_added"));
        assert_eq!(
            decide(
                b"{\"type\":\"url_verification\",\"challenge\":\"abc\"}",
                None
            )
            .unwrap(),
            Decision::Challenge("abc".into())
        );
        assert_eq!(
            decide(
                &delivery(json!({"type": "app_home_opened", "user": "U1", "tab": "home"})),
                None
            )
            .unwrap(),
            Decision::HomeOpened { user: "U1".into() }
        );
        assert!(decide(b"not json", None).is_err());
    }

    #[test]
    fn slack_timestamps_compare_as_numbers() {
        assert!(ts_after("1700000000.000200", "1700000000.000100"));
        assert!(!ts_after("1700000000.000100", "1700000000.000100"));
        assert!(ts_after("1700000001.000000", "1700000000.999999"));
        assert!(ts_after("1700000000.1", "1700000000.000100"));
        assert!(!ts_after("not a ts", "1700000000.000100"));
    }

    #[test]
    fn a_labelled_mention_is_stripped_too() {
        assert_eq!(
            without_mention("<@UBOT|inspect> please fix it <@UBOT>", Some("UBOT")),
            "please fix it"
        );
        assert_eq!(
            without_mention("<@UOTHER|ann> hi", Some("UBOT")),
            "<@UOTHER|ann> hi"
        );
    }
}
