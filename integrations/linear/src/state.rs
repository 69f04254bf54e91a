//! Moving an issue when the agent starts on it (Linear's guidance for agents): to the
//! first `started` state of its team, unless it is already started, completed or canceled.

use serde_json::Value;

/// The team's `started` states.
pub const STARTED_STATES_QUERY: &str = "query StartedStates($team: String!) {
  team(id: $team) { states(filter: { type: { eq: \"started\" } }) { nodes { id name position } } }
}";

pub const ISSUE_UPDATE_MUTATION: &str =
    "mutation MoveIssue($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) { success }
}";

/// Whether an issue in a state of this type is moved at all.
pub fn movable(state_type: Option<&str>) -> bool {
    !matches!(state_type, Some("started" | "completed" | "canceled"))
}

/// The state to move to: the lowest position among the team's `started` states, from the
/// query's `data`. `(id, name)`.
pub fn first_started(data: &Value) -> Option<(String, String)> {
    data["team"]["states"]["nodes"]
        .as_array()?
        .iter()
        .filter_map(|s| {
            Some((
                s["position"].as_f64()?,
                s["id"].as_str()?.to_owned(),
                s["name"].as_str().unwrap_or_default().to_owned(),
            ))
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, id, name)| (id, name))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_lowest_started_state_and_only_from_before_started() {
        let data = json!({"team": {"states": {"nodes": [
            {"id": "review", "name": "In Review", "position": 3.0},
            {"id": "prog", "name": "In Progress", "position": 2.0}
        ]}}});
        assert_eq!(
            first_started(&data),
            Some(("prog".into(), "In Progress".into()))
        );
        assert_eq!(
            first_started(&json!({"team": {"states": {"nodes": []}}})),
            None
        );
        assert!(movable(Some("unstarted")) && movable(Some("backlog")) && movable(None));
        assert!(
            !movable(Some("started")) && !movable(Some("completed")) && !movable(Some("canceled"))
        );
    }
}
