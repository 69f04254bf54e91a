//! Linear as a trigger: an issue created, or moved into a named state, in a team (any when
//! none is named) and carrying a label (any when none is named). The issue events arrive
//! through the Linear bot's webhook (signed, from the installed workspace); this decides
//! which automation takes one, what makes a redelivery the same event, and what the agent
//! is shown of the issue.

use crate::bad;
use inspect_protocol::automations::{LinearIssueChange, LinearIssueEvent, LinearTrigger};
use inspect_protocol::ApiError;
use serde_json::{json, Value};

/// A team key, a label or a state's name, at most.
const MAX_NAME_CHARS: usize = 100;
/// The issue's description shown to the agent, at most.
const MAX_DESCRIPTION_CHARS: usize = 8000;

fn name(what: &str, v: Option<String>) -> Result<Option<String>, ApiError> {
    let v = v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    if v.as_deref()
        .is_some_and(|s| s.chars().count() > MAX_NAME_CHARS || s.chars().any(char::is_control))
    {
        return Err(bad(format!(
            "a Linear {what} is at most {MAX_NAME_CHARS} characters on one line"
        )));
    }
    Ok(v)
}

/// Trims and checks a trigger: names bounded; a state named exactly when the event is a
/// move into one.
pub fn validate(t: LinearTrigger) -> Result<LinearTrigger, ApiError> {
    let t = LinearTrigger {
        event: t.event,
        team: name("team key", t.team)?,
        label: name("label", t.label)?,
        state: name("state", t.state)?,
    };
    match (t.event, &t.state) {
        (LinearIssueEvent::MovedToState, None) => {
            Err(bad("a Linear trigger on a move names the state"))
        }
        (LinearIssueEvent::Created, Some(_)) => Err(bad("only a move into a state names a state")),
        _ => Ok(t),
    }
}

fn same(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Whether the trigger takes the change.
pub fn takes(t: &LinearTrigger, c: &LinearIssueChange) -> bool {
    t.event == c.event
        && t.team.as_deref().is_none_or(|team| same(team, &c.team))
        && t.label
            .as_deref()
            .is_none_or(|l| c.labels.iter().any(|have| same(have, l)))
        && t.state.as_deref().is_none_or(|s| same(s, &c.state))
}

/// What makes a redelivered event the same one: the issue, and the state it moved into.
pub fn key(c: &LinearIssueChange) -> String {
    match c.event {
        LinearIssueEvent::Created => format!("linear:{}:created", c.issue_id),
        LinearIssueEvent::MovedToState => {
            format!("linear:{}:moved:{}", c.issue_id, c.state.to_lowercase())
        }
    }
}

/// The issue as conditions see it and the agent is shown it.
pub fn shown(c: &LinearIssueChange) -> Value {
    json!({
        "event": match c.event {
            LinearIssueEvent::Created => "created",
            LinearIssueEvent::MovedToState => "moved_to_state",
        },
        "identifier": c.identifier,
        "title": c.title,
        "description": c.description.chars().take(MAX_DESCRIPTION_CHARS).collect::<String>(),
        "url": c.url,
        "team": c.team,
        "labels": c.labels,
        "state": c.state,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn change(event: LinearIssueEvent, labels: &[&str], state: &str) -> LinearIssueChange {
        LinearIssueChange {
            event,
            issue_id: "i1".into(),
            identifier: "ENG-9".into(),
            title: "Flaky test".into(),
            description: "It fails on Mondays".into(),
            url: "https://linear.app/acme/issue/ENG-9".into(),
            team: "ENG".into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            state: state.into(),
        }
    }

    #[test]
    fn created_with_a_label_and_moved_into_a_state() {
        let created = validate(LinearTrigger {
            event: LinearIssueEvent::Created,
            team: Some(" eng ".into()),
            label: Some("agent".into()),
            state: None,
        })
        .unwrap();
        assert_eq!(created.team.as_deref(), Some("eng"));
        assert!(takes(
            &created,
            &change(LinearIssueEvent::Created, &["Agent"], "Todo")
        ));
        assert!(!takes(
            &created,
            &change(LinearIssueEvent::Created, &["bug"], "Todo")
        ));
        assert!(!takes(
            &created,
            &change(LinearIssueEvent::MovedToState, &["agent"], "Todo")
        ));
        let moved = validate(LinearTrigger {
            event: LinearIssueEvent::MovedToState,
            team: None,
            label: None,
            state: Some("Ready for agent".into()),
        })
        .unwrap();
        assert!(takes(
            &moved,
            &change(LinearIssueEvent::MovedToState, &[], "ready for agent")
        ));
        assert!(!takes(
            &moved,
            &change(LinearIssueEvent::MovedToState, &[], "Todo")
        ));
        assert_ne!(
            key(&change(LinearIssueEvent::MovedToState, &[], "A")),
            key(&change(LinearIssueEvent::MovedToState, &[], "B"))
        );
        assert_eq!(
            shown(&change(LinearIssueEvent::Created, &["x"], "Todo"))["identifier"],
            "ENG-9"
        );
    }

    #[test]
    fn a_move_names_its_state_and_only_a_move_does() {
        let t = |event, state: Option<&str>| LinearTrigger {
            event,
            team: None,
            label: None,
            state: state.map(str::to_owned),
        };
        assert!(validate(t(LinearIssueEvent::MovedToState, None)).is_err());
        assert!(validate(t(LinearIssueEvent::MovedToState, Some("  "))).is_err());
        assert!(validate(t(LinearIssueEvent::Created, Some("Todo"))).is_err());
        let long = "x".repeat(101);
        assert!(validate(t(LinearIssueEvent::MovedToState, Some(&long))).is_err());
    }
}
