//! What the agent says in Linear's agent panel: activities (thought, action, elicitation,
//! response, error; only thoughts and actions may be ephemeral), the plan's steps with
//! their statuses, and the final answer made of a prompt's outcome. The GraphQL mutations
//! that carry them are here too, so every caller sends the same ones.

use inspect_protocol::scm::Completion;
use serde_json::{json, Value};

pub const ACTIVITY_MUTATION: &str = "mutation Activity($input: AgentActivityCreateInput!) {
  agentActivityCreate(input: $input) { success }
}";

pub const SESSION_UPDATE_MUTATION: &str =
    "mutation SessionUpdate($id: String!, $input: AgentSessionUpdateInput!) {
  agentSessionUpdate(id: $id, input: $input) { success }
}";

/// Changed files listed in the answer, at most.
pub const ANSWER_FILES: usize = 10;
/// Characters of the agent's summary in the answer, at most.
pub const ANSWER_SUMMARY: usize = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Thought,
    Elicitation,
    Response,
    Error,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Thought => "thought",
            Kind::Elicitation => "elicitation",
            Kind::Response => "response",
            Kind::Error => "error",
        }
    }
}

/// The `input` of `agentActivityCreate` for a text activity. Only a thought may be
/// ephemeral (Linear's rule; an action is [`action`]).
pub fn text(agent_session: &str, kind: Kind, body: &str, ephemeral: bool) -> Value {
    json!({
        "agentSessionId": agent_session,
        "content": {"type": kind.name(), "body": body},
        "ephemeral": ephemeral && kind == Kind::Thought,
    })
}

/// A tool the agent runs, as an ephemeral `action`.
pub fn action(agent_session: &str, tool: &str, parameter: &str) -> Value {
    json!({
        "agentSessionId": agent_session,
        "content": {"type": "action", "action": tool, "parameter": parameter},
        "ephemeral": true,
    })
}

/// How far the work is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Start,
    Resolved,
    SessionCreated,
    /// The work ended with a pull request opened (or updated).
    Completed,
    /// The work ended well, but no pull request was opened: the last step says so.
    CompletedWithoutPr,
    Failed,
    /// Waiting for the person to pick where to work.
    Asking,
}

pub const PLAN_STEPS: [&str; 5] = [
    "Analyze issue",
    "Resolve repository",
    "Create coding session",
    "Code changes",
    "Open PR",
];

/// The plan (`agentSessionUpdate`'s `plan`): the steps with their statuses at `stage`.
pub fn plan(stage: Stage) -> Value {
    use Stage::*;
    let statuses: [&str; 5] = match stage {
        Start => ["inProgress", "pending", "pending", "pending", "pending"],
        Asking => ["completed", "inProgress", "pending", "pending", "pending"],
        Resolved => ["completed", "completed", "inProgress", "pending", "pending"],
        SessionCreated => [
            "completed",
            "completed",
            "completed",
            "inProgress",
            "pending",
        ],
        Completed => ["completed"; 5],
        CompletedWithoutPr => [
            "completed",
            "completed",
            "completed",
            "completed",
            "canceled",
        ],
        Failed => [
            "completed",
            "completed",
            "completed",
            "canceled",
            "canceled",
        ],
    };
    Value::Array(
        PLAN_STEPS
            .iter()
            .zip(statuses)
            .map(|(content, status)| json!({"content": content, "status": status}))
            .collect(),
    )
}

/// Where the plan ends for an answer of `kind`: "Open PR" is completed only when a pull
/// request was opened; a good answer without one leaves that step canceled.
pub fn final_stage(kind: Kind, opened_pr: bool) -> Stage {
    match (kind, opened_pr) {
        (Kind::Response, true) => Stage::Completed,
        (Kind::Response, false) => Stage::CompletedWithoutPr,
        _ => Stage::Failed,
    }
}

/// The session's page as the agent session's external link.
pub fn session_link(session_url: &str) -> Value {
    json!({"label": "View session", "url": session_url})
}

/// What the tool was run on, as one short line (`bash` shows its command).
pub fn parameter(args: &Value) -> String {
    let pick = [
        "description",
        "command",
        "filePath",
        "path",
        "pattern",
        "url",
    ]
    .iter()
    .find_map(|k| args.get(*k).and_then(|v| v.as_str()));
    let line = pick.unwrap_or("").lines().next().unwrap_or("").trim();
    let mut s: String = line.chars().take(200).collect();
    if line.chars().count() > 200 {
        s.push('…');
    }
    s
}

/// The answer to a prompt: the pull request (or that there is none), the files changed,
/// the agent's summary; an `error` when the prompt failed. `(kind, body)`.
pub fn answer(c: &Completion, session_url: &str) -> (Kind, String) {
    if !c.success && c.error.as_deref() == Some("stopped") {
        return (
            Kind::Response,
            format!("Stopped before finishing, as asked.\n\n[View session]({session_url})"),
        );
    }
    if !c.success {
        let why = c
            .error
            .as_deref()
            .unwrap_or("the agent stopped before finishing");
        return (
            Kind::Error,
            format!("The work did not finish: {why}\n\n[View session]({session_url})"),
        );
    }
    let mut out = String::new();
    match c.pull_requests.first() {
        Some((url, _)) => out.push_str(&format!("**Pull request opened:** {url}\n\n")),
        None => out.push_str("No pull request was opened.\n\n"),
    }
    if let Some(s) = c
        .summary
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let mut s: String = s.chars().take(ANSWER_SUMMARY).collect();
        if c.summary
            .as_deref()
            .map(str::trim)
            .map(|t| t.chars().count())
            > Some(ANSWER_SUMMARY)
        {
            s.push('…');
        }
        out.push_str(&s);
        out.push_str("\n\n");
    }
    if !c.changed_files.is_empty() {
        out.push_str("**Files changed:**\n");
        for f in c.changed_files.iter().take(ANSWER_FILES) {
            out.push_str(&format!("- `{f}`\n"));
        }
        if c.changed_files.len() > ANSWER_FILES {
            out.push_str(&format!(
                "- and {} more\n",
                c.changed_files.len() - ANSWER_FILES
            ));
        }
        out.push('\n');
    }
    out.push_str(&format!("[View session]({session_url})"));
    (Kind::Response, out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use inspect_protocol::linear::LinearAgentSession;
    use inspect_protocol::scm::CallbackContext;

    fn completion(success: bool) -> Completion {
        Completion {
            session_id: "s1".into(),
            message_id: "m1".into(),
            success,
            error: (!success).then(|| "the sandbox stopped".into()),
            summary: Some("Fixed the login.".into()),
            pull_requests: vec![("https://github.com/acme/api/pull/3".into(), "open".into())],
            changed_files: (0..12).map(|n| format!("src/f{n}.rs")).collect(),
            review_url: None,
            pictures: vec![],
            context: CallbackContext::Linear(LinearAgentSession {
                agent_session_id: "as1".into(),
                organization_id: "o".into(),
                issue_id: "i".into(),
                issue_identifier: "ENG-1".into(),
                issue_url: "u".into(),
                target: "acme/api".into(),
                tool_progress: true,
            }),
        }
    }

    #[test]
    fn the_answer_names_the_pull_request_files_and_summary() {
        let (kind, body) = answer(&completion(true), "https://x/sessions/s1");
        assert_eq!(kind, Kind::Response);
        assert!(body.starts_with("**Pull request opened:** https://github.com/acme/api/pull/3"));
        assert!(body.contains("Fixed the login."));
        assert!(body.contains("`src/f9.rs`") && !body.contains("`src/f10.rs`"));
        assert!(body.contains("and 2 more"));
        let (kind, body) = answer(&completion(false), "https://x/sessions/s1");
        assert_eq!(kind, Kind::Error);
        assert!(body.contains("the sandbox stopped"));
    }

    #[test]
    fn plans_activities_and_parameters() {
        let p = plan(Stage::SessionCreated);
        assert_eq!(p[3]["status"], "inProgress");
        assert_eq!(p[0]["content"], "Analyze issue");
        assert_eq!(plan(Stage::Failed)[4]["status"], "canceled");
        // "Open PR" is completed only when a pull request was opened.
        let done = plan(final_stage(Kind::Response, true));
        assert!(done
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] == "completed"));
        let no_pr = plan(final_stage(Kind::Response, false));
        assert_eq!(
            (no_pr[3]["status"].as_str(), no_pr[4]["status"].as_str()),
            (Some("completed"), Some("canceled"))
        );
        assert_eq!(
            plan(final_stage(Kind::Error, false))[3]["status"],
            "canceled"
        );
        assert_eq!(text("as", Kind::Response, "done", true)["ephemeral"], false);
        assert_eq!(text("as", Kind::Thought, "hm", true)["ephemeral"], true);
        assert_eq!(action("as", "bash", "ls")["content"]["action"], "bash");
        assert_eq!(
            parameter(&json!({"command": "cargo test\nmore"})),
            "cargo test"
        );
        assert_eq!(parameter(&json!({"filePath": "src/a.rs"})), "src/a.rs");
        assert_eq!(parameter(&json!({})), "");
    }
}
