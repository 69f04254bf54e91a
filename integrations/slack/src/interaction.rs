//! What an interaction delivery asks (`POST /webhooks/slack/interactions`, a form with one
//! `payload` field of JSON): a picker's options as the person types (`block_suggestion`), or
//! an action on one of the bot's messages or its App Home (`block_actions`). Pure, and run
//! against Slack's published example payloads (`tests/examples/`).

use serde_json::Value;

/// One interaction, as the bot acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interaction {
    /// A picker asks for its options: what the person typed so far.
    Suggestion { query: String },
    /// A person used one of the bot's controls.
    Action(Action),
    /// Any other kind (a view submitted, a shortcut): acknowledged, nothing done.
    Other(Option<String>),
}

/// An action on a message or the App Home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    pub action_id: String,
    /// Who acted.
    pub user: String,
    /// A select's chosen option (`selected_option.value`).
    pub selected: Option<String>,
    /// A button's or an input's own value.
    pub value: Option<String>,
    /// Where the message is: its channel, its thread (the thread it is in, else itself) and
    /// its own `ts` — empty, and none, on the App Home.
    pub channel: String,
    pub thread: String,
    pub message_ts: Option<String>,
}

impl Action {
    /// What was picked: a select's option, else the control's value.
    pub fn picked(&self) -> &str {
        self.selected
            .as_deref()
            .or(self.value.as_deref())
            .unwrap_or("")
    }
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

/// Reads a delivery's form body; an error says what is missing.
pub fn read(form: &[u8]) -> Result<Interaction, String> {
    let payload = url::form_urlencoded::parse(form)
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .ok_or("an interaction needs its payload")?;
    let payload: Value =
        serde_json::from_str(&payload).map_err(|e| format!("the payload is not JSON: {e}"))?;
    Ok(of(&payload))
}

/// What a parsed payload asks.
pub fn of(payload: &Value) -> Interaction {
    match payload["type"].as_str() {
        Some("block_suggestion") => Interaction::Suggestion {
            query: text(&payload["value"]).unwrap_or_default(),
        },
        Some("block_actions") => {
            let action = &payload["actions"][0];
            let message = &payload["message"];
            let container = &payload["container"];
            Interaction::Action(Action {
                action_id: text(&action["action_id"]).unwrap_or_default(),
                user: text(&payload["user"]["id"]).unwrap_or_default(),
                selected: text(&action["selected_option"]["value"]),
                value: text(&action["value"]),
                channel: text(&payload["channel"]["id"])
                    .or_else(|| text(&container["channel_id"]))
                    .unwrap_or_default(),
                thread: text(&message["thread_ts"])
                    .or_else(|| text(&container["thread_ts"]))
                    .or_else(|| text(&message["ts"]))
                    .unwrap_or_default(),
                message_ts: text(&message["ts"]),
            })
        }
        other => Interaction::Other(other.map(str::to_owned)),
    }
}
