//! What a Linear delivery asks for. Only `AgentSessionEvent`s are acted on: `created` (the
//! agent was assigned or mentioned: a new session), `prompted` (a person wrote in the
//! agent session: a follow-up, an answer to the agent's question, or the stop signal),
//! and the session's end from Linear's side. Everything else is ignored with its reason.

use serde::Deserialize;

/// The fields of an `AgentSessionEvent` the bot reads (Linear's
/// `AgentSessionEventWebhookPayload`; unknown fields are Linear's to add).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSessionEvent {
    #[serde(rename = "type")]
    pub kind: String,
    pub action: String,
    pub organization_id: String,
    pub app_user_id: String,
    #[serde(default)]
    pub webhook_id: Option<String>,
    pub agent_session: AgentSession,
    #[serde(default)]
    pub agent_activity: Option<AgentActivity>,
    /// Linear's formatted context for the agent (the issue, the comment thread, guidance).
    #[serde(default)]
    pub prompt_context: Option<String>,
    #[serde(default)]
    pub previous_comments: Vec<Comment>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSession {
    pub id: String,
    #[serde(default)]
    pub creator_id: Option<String>,
    #[serde(default)]
    pub creator: Option<Person>,
    #[serde(default)]
    pub issue_id: Option<String>,
    #[serde(default)]
    pub issue: Option<IssueRef>,
    #[serde(default)]
    pub comment: Option<Comment>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Person {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueRef {
    pub id: String,
    #[serde(default)]
    pub identifier: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub url: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Comment {
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub user_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentActivity {
    #[serde(default)]
    pub user_id: Option<String>,
    #[serde(default)]
    pub signal: Option<String>,
    #[serde(default)]
    pub content: Option<ActivityContent>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ActivityContent {
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub body: Option<String>,
}

/// What to do with a delivery.
#[derive(Debug)]
pub enum Decision {
    /// A new agent session: start work on its issue.
    Created(Box<AgentSessionEvent>),
    /// A person wrote in the agent session (a follow-up or an answer).
    Prompted {
        event: Box<AgentSessionEvent>,
        text: String,
    },
    /// The person asked the agent to stop (the stop signal), or Linear ended the session.
    Stop(Box<AgentSessionEvent>),
    Ignore(&'static str),
}

impl AgentSessionEvent {
    /// Who asked: the activity's author for a prompt, else the session's creator.
    pub fn asker(&self) -> Option<&str> {
        self.agent_activity
            .as_ref()
            .and_then(|a| a.user_id.as_deref())
            .or(self.agent_session.creator_id.as_deref())
            .or(self
                .agent_session
                .creator
                .as_ref()
                .and_then(|c| c.id.as_deref()))
    }

    /// The issue's id, wherever the payload put it.
    pub fn issue_id(&self) -> Option<&str> {
        self.agent_session
            .issue
            .as_ref()
            .map(|i| i.id.as_str())
            .or(self.agent_session.issue_id.as_deref())
    }
}

/// Reads a delivery's body (already signed and fresh). A body that is not JSON, or an
/// `AgentSessionEvent` without the fields every one has, is an error (a 400); other
/// types and actions are ignored.
pub fn decide(body: &[u8]) -> Result<Decision, String> {
    let value: serde_json::Value =
        inspect_protocol::json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    match value["type"].as_str() {
        Some("AgentSessionEvent") => {}
        Some(_) => return Ok(Decision::Ignore("not an agent session event")),
        None => return Err("the delivery has no type".into()),
    }
    let event: AgentSessionEvent =
        serde_json::from_value(value).map_err(|e| format!("not an agent session event: {e}"))?;
    if event.organization_id.is_empty()
        || event.app_user_id.is_empty()
        || event.agent_session.id.is_empty()
    {
        return Err("the event lacks its organization, app user or agent session".into());
    }
    let signal = event
        .agent_activity
        .as_ref()
        .and_then(|a| a.signal.as_deref());
    Ok(match event.action.as_str() {
        "created" => Decision::Created(Box::new(event)),
        "prompted" if signal == Some("stop") => Decision::Stop(Box::new(event)),
        "prompted" => {
            let text = event
                .agent_activity
                .as_ref()
                .and_then(|a| a.content.as_ref())
                .and_then(|c| c.body.clone())
                .unwrap_or_default();
            if text.trim().is_empty() {
                Decision::Ignore("a prompt without text")
            } else {
                Decision::Prompted {
                    event: Box::new(event),
                    text,
                }
            }
        }
        "stopped" | "cancelled" | "canceled" => Decision::Stop(Box::new(event)),
        _ => Decision::Ignore("an agent session action the bot does not act on"),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(action: &str, activity: serde_json::Value) -> Vec<u8> {
        json!({
            "type": "AgentSessionEvent", "action": action, "organizationId": "org1",
            "appUserId": "app1", "webhookId": "wh1", "webhookTimestamp": 1,
            "oauthClientId": "oc", "createdAt": "2026-12-04T00:00:00Z",
            "agentSession": {"id": "as1", "creatorId": "u1", "status": "pending", "type": "commentThread",
                "issue": {"id": "i1", "identifier": "ENG-1", "title": "Fix it"}},
            "agentActivity": activity,
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn actions_and_signals() {
        assert!(
            matches!(decide(&event("created", json!(null))).unwrap(), Decision::Created(e) if e.issue_id() == Some("i1") && e.asker() == Some("u1"))
        );
        let said =
            json!({"userId": "u2", "content": {"type": "prompt", "body": "also the footer"}});
        match decide(&event("prompted", said)).unwrap() {
            Decision::Prompted { event, text } => {
                assert_eq!(text, "also the footer");
                assert_eq!(event.asker(), Some("u2"));
            }
            other => panic!("{other:?}"),
        }
        let stop =
            json!({"userId": "u2", "signal": "stop", "content": {"type": "prompt", "body": ""}});
        assert!(matches!(
            decide(&event("prompted", stop)).unwrap(),
            Decision::Stop(_)
        ));
        assert!(matches!(
            decide(&event("stopped", json!(null))).unwrap(),
            Decision::Stop(_)
        ));
        let empty = json!({"content": {"type": "prompt", "body": "  "}});
        assert!(matches!(
            decide(&event("prompted", empty)).unwrap(),
            Decision::Ignore(_)
        ));
        assert!(matches!(
            decide(&event("archived", json!(null))).unwrap(),
            Decision::Ignore(_)
        ));
    }

    #[test]
    fn other_types_are_ignored_and_malformed_events_refused() {
        let issue = json!({"type": "Issue", "action": "create", "data": {}}).to_string();
        assert!(matches!(
            decide(issue.as_bytes()).unwrap(),
            Decision::Ignore(_)
        ));
        assert!(decide(b"not json").is_err());
        assert!(decide(br#"{"action":"created"}"#).is_err());
        let partial = json!({"type": "AgentSessionEvent", "action": "created"}).to_string();
        assert!(decide(partial.as_bytes()).is_err());
        let empty_ids =
            json!({"type": "AgentSessionEvent", "action": "created", "organizationId": "",
            "appUserId": "a", "agentSession": {"id": "s"}})
            .to_string();
        assert!(decide(empty_ids.as_bytes()).is_err());
    }
}
