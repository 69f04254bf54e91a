//! Slack as a front door: the settings people edit (routing rules, channel associations),
//! and what a Slack-started prompt carries for its progress and completion messages.

use serde::{Deserialize, Serialize};

/// A keyword (matched as a whole word, case-insensitively) that sends a request to a
/// target: a repository `owner/name` or an environment `env:<id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutingRule {
    pub keyword: String,
    pub target: String,
}

/// Requests from a channel (its id, `C…`) go to a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChannelAssociation {
    pub channel: String,
    pub target: String,
}

/// `GET|PUT /integrations/slack/settings`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlackSettings {
    #[serde(default)]
    pub routing_rules: Vec<RoutingRule>,
    #[serde(default)]
    pub channel_associations: Vec<ChannelAssociation>,
}

pub const MAX_RULES: usize = 100;

impl SlackSettings {
    /// Keywords 1-50 characters, targets `owner/name` or `env:<id>`, channels `C…`/`G…`.
    pub fn validate(&self) -> Result<(), String> {
        if self.routing_rules.len() > MAX_RULES || self.channel_associations.len() > MAX_RULES {
            return Err(format!(
                "at most {MAX_RULES} rules and {MAX_RULES} channels"
            ));
        }
        let target_ok = |t: &str| match t.strip_prefix("env:") {
            Some(id) => !id.is_empty() && id.len() <= 80,
            None => t
                .split_once('/')
                .is_some_and(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/')),
        };
        for r in &self.routing_rules {
            let k = r.keyword.trim();
            if k.is_empty() || k.chars().count() > 50 {
                return Err("a routing keyword is 1-50 characters".into());
            }
            if !target_ok(&r.target) {
                return Err(format!("{:?} is not owner/name or env:<id>", r.target));
            }
        }
        for a in &self.channel_associations {
            let ok = a.channel.len() <= 30
                && a.channel.len() >= 2
                && a.channel.chars().all(|c| c.is_ascii_alphanumeric());
            if !ok {
                return Err(format!("{:?} is not a Slack channel id", a.channel));
            }
            if !target_ok(&a.target) {
                return Err(format!("{:?} is not owner/name or env:<id>", a.target));
            }
        }
        Ok(())
    }
}

/// A top-level channel message that did not mention the bot, as the Slack bot hands it to
/// the control plane's channel triggers (not on the wire: between the bot and the Worker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelMessage {
    pub channel: String,
    /// `#name` when Slack said it, else the id.
    pub channel_name: String,
    pub user: String,
    /// The author's name as Slack says it.
    pub author: String,
    pub text: String,
    pub ts: String,
}

/// What a channel trigger started for a [`ChannelMessage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelRun {
    pub automation_id: String,
    pub session_id: String,
    /// What the session works on: `owner/name`, or the automation's name.
    pub target: String,
}

/// Where a Slack-started prompt reports: its thread, the message updated with its progress,
/// the message that got the 👀.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SlackThread {
    pub channel: String,
    pub thread_ts: String,
    /// The bot's message in the thread that shows this prompt's progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_ts: Option<String>,
    /// The person's message the bot reacted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaction_ts: Option<String>,
    /// What the session works on, as shown (`owner/name` or an environment's name).
    pub target: String,
    /// When the prompt was taken (ms), for the elapsed time shown.
    pub started_at: i64,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        let ok: SlackSettings = serde_json::from_str(
            r#"{"routingRules":[{"keyword":"billing","target":"acme/billing"}],"channelAssociations":[{"channel":"C123","target":"env:env_1"}]}"#,
        )
        .unwrap();
        assert!(ok.validate().is_ok());
        let bad_target = SlackSettings {
            routing_rules: vec![RoutingRule {
                keyword: "x".into(),
                target: "nope".into(),
            }],
            ..Default::default()
        };
        assert!(bad_target.validate().is_err());
        let bad_channel = SlackSettings {
            channel_associations: vec![ChannelAssociation {
                channel: "#general".into(),
                target: "a/b".into(),
            }],
            ..Default::default()
        };
        assert!(bad_channel.validate().is_err());
        assert!(serde_json::from_str::<SlackSettings>(r#"{"rules":[]}"#).is_err());
    }
}
