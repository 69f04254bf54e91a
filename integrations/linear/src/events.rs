//! What a Linear delivery asks for. Only `AgentSessionEvent`s are acted on: `created` (the
//! agent was assigned or mentioned: a new session), `prompted` (a person wrote in the
//! agent session: a follow-up, an answer to the agent's question, or the stop signal),
//! and the session's end from Linear's side. Everything else is ignored with its reason.

use inspect_protocol::automations::{LinearIssueChange, LinearIssueEvent};
use serde::Deserialize;
use serde_json::Value;

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
    /// Linear sends `null` on an issue without comments.
    #[serde(default, deserialize_with = "inspect_protocol::json::null_as_default")]
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
    /// An issue was created or moved into another state (for the automations).
    Issue {
        organization_id: String,
        change: Box<LinearIssueChange>,
    },
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
        Some("Issue") => return issue_change(&value),
        Some(_) => return Ok(Decision::Ignore("not an agent session or issue event")),
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

/// An `Issue` data-change event: `create`, or an `update` whose `updatedFrom` has another
/// `stateId` (a move); other updates and removals are ignored.
fn issue_change(v: &Value) -> Result<Decision, String> {
    let organization_id = v["organizationId"]
        .as_str()
        .filter(|o| !o.is_empty())
        .ok_or("the issue event has no organizationId")?
        .to_owned();
    let data = &v["data"];
    let text = |x: &Value| x.as_str().unwrap_or_default().to_owned();
    let issue_id = text(&data["id"]);
    if issue_id.is_empty() {
        return Err("the issue event has no issue id".into());
    }
    let event = match v["action"].as_str() {
        Some("create") => LinearIssueEvent::Created,
        Some("update") => {
            let before = v["updatedFrom"]["stateId"].as_str();
            let now = data["stateId"].as_str().or(data["state"]["id"].as_str());
            match before {
                Some(b) if Some(b) != now => LinearIssueEvent::MovedToState,
                _ => return Ok(Decision::Ignore("an issue update that is not a move")),
            }
        }
        _ => {
            return Ok(Decision::Ignore(
                "an issue action the automations do not take",
            ))
        }
    };
    let labels = data["labels"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|x| x["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(Decision::Issue {
        organization_id,
        change: Box::new(LinearIssueChange {
            event,
            issue_id,
            identifier: text(&data["identifier"]),
            title: text(&data["title"]),
            description: text(&data["description"]),
            url: v["url"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| text(&data["url"])),
            team: text(&data["team"]["key"]),
            labels,
            state: text(&data["state"]["name"]),
        }),
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
    fn an_issue_without_comments_comes_with_nulls() {
        // As Linear sends a `created` event on an issue nobody commented on.
        let mut v: serde_json::Value =
            serde_json::from_slice(&event("created", json!(null))).unwrap();
        v["previousComments"] = json!(null);
        v["guidance"] = json!(null);
        v["promptContext"] = json!(null);
        v["agentSession"]["comment"] = json!(null);
        v["agentSession"]["creator"] = json!(null);
        match decide(v.to_string().as_bytes()).unwrap() {
            Decision::Created(e) => assert!(e.previous_comments.is_empty()),
            other => panic!("{other:?}"),
        }
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
    fn issues_created_and_moved_are_for_the_automations() {
        let issue = |action: &str, from: Option<&str>| {
            let mut v = json!({"type": "Issue", "action": action, "organizationId": "org1",
                "url": "https://linear.app/acme/issue/ENG-3",
                "data": {"id": "i3", "identifier": "ENG-3", "title": "T", "stateId": "s2",
                         "state": {"id": "s2", "name": "Ready", "type": "unstarted"},
                         "team": {"id": "t", "key": "ENG"}, "labels": [{"id": "l", "name": "agent"}]}});
            if let Some(f) = from {
                v["updatedFrom"] = json!({"stateId": f});
            }
            v.to_string()
        };
        match decide(issue("create", None).as_bytes()).unwrap() {
            Decision::Issue {
                organization_id,
                change,
            } => {
                assert_eq!(organization_id, "org1");
                assert_eq!(change.event, LinearIssueEvent::Created);
                assert_eq!(change.labels, vec!["agent".to_string()]);
                assert_eq!(
                    (change.team.as_str(), change.state.as_str()),
                    ("ENG", "Ready")
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(decide(issue("update", Some("s1")).as_bytes()).unwrap(),
            Decision::Issue { change, .. } if change.event == LinearIssueEvent::MovedToState)
        );
        assert!(matches!(
            decide(issue("update", Some("s2")).as_bytes()).unwrap(),
            Decision::Ignore(_)
        ));
        assert!(matches!(
            decide(issue("update", None).as_bytes()).unwrap(),
            Decision::Ignore(_)
        ));
        assert!(matches!(
            decide(issue("remove", None).as_bytes()).unwrap(),
            Decision::Ignore(_)
        ));
    }

    #[test]
    fn other_types_are_ignored_and_malformed_events_refused() {
        let issue = json!({"type": "Issue", "action": "create", "data": {}}).to_string();
        assert!(decide(issue.as_bytes()).is_err());
        let comment = json!({"type": "Comment", "action": "create", "data": {}}).to_string();
        assert!(matches!(
            decide(comment.as_bytes()).unwrap(),
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
