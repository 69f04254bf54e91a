//! What the session Worker asks of the control plane's other Worker, across the service
//! binding between the two scripts: the objects' calls that reach Slack, Linear and the
//! automations' runs, and the cron's tick, so the session Worker carries none of their
//! clients.
//!
//! The session Worker (the object, its routes, the sockets) and the control plane Worker
//! (bots, automations, sign-in, settings, catalogs) are two scripts; the object reaches the
//! second only through its `PLANE` binding, at [`PLANE_CALL_URL`], whose host no request
//! from the Internet carries.

use crate::linear::LinearAgentSession;
use crate::scm::{Completion, PullRequestResult, ReviewRequest};
use crate::slack::SlackThread;
use serde::{Deserialize, Serialize};

/// The service binding's name in the session Worker's settings.
pub const PLANE_BINDING: &str = "PLANE";
/// The host of every call the object makes over the binding; the control plane answers
/// [`PLANE_CALL_PATH`] only on it.
pub const PLANE_HOST: &str = "plane.internal";
pub const PLANE_CALL_PATH: &str = "/internal/call";
pub const PLANE_CALL_URL: &str = "https://plane.internal/internal/call";

/// One call from a session's object to the control plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PlaneCall {
    /// A prompt's outcome, told where the prompt came from (its `CallbackContext`).
    Report {
        completion: Box<Completion>,
        #[serde(rename = "sessionUrl")]
        session_url: String,
    },
    /// A Slack thread's progress message: the tool the agent is running.
    SlackProgress {
        thread: SlackThread,
        ts: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        #[serde(rename = "elapsedSecs")]
        elapsed_secs: i64,
        #[serde(rename = "sessionUrl")]
        session_url: String,
    },
    /// A Linear agent session's activity: the tool the agent is running.
    LinearProgress {
        session: LinearAgentSession,
        tool: String,
        #[serde(default)]
        args: serde_json::Value,
    },
    /// The base a pull request will target, asked before the sandbox pushes: the one
    /// named, or the repository's default branch on GitHub (also proves a token is there).
    /// Answered with [`PullRequestBase`].
    PullRequestBase {
        user: String,
        owner: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        base: Option<String>,
    },
    /// The pushed branch's pull request, opened or reused as the person (or the App).
    /// Answered with [`PublishedPullRequests`].
    PublishPullRequest { proposal: Box<PullRequestProposal> },
    /// The agent's review of the pull request its running prompt came from, checked
    /// against the diff and submitted once. Answered with a `ReviewResult`.
    SubmitReview {
        owner: String,
        repo: String,
        number: i64,
        #[serde(rename = "sessionId")]
        session_id: String,
        #[serde(rename = "sessionUrl")]
        session_url: String,
        request: Box<ReviewRequest>,
    },
    /// A cron trigger fired (on the session Worker, whose configuration holds the
    /// triggers): its work is the control plane's.
    Scheduled {
        cron: String,
        /// When it was scheduled (ms since the epoch).
        at: i64,
    },
    /// Whether new work for a person may start (a prompt sent to a session): a spent
    /// budget of theirs refuses it. Answered with [`BudgetVerdict`].
    BudgetCheck {
        #[serde(rename = "userId")]
        user_id: String,
    },
    /// Events that may need people outside the session: the control plane fills their
    /// inboxes and tells them where they asked to be told.
    Attention {
        items: Vec<crate::inbox::Attention>,
        #[serde(rename = "sessionUrl")]
        session_url: String,
    },
    /// A picture the agent took, shared into the Slack thread its prompt came from.
    SlackMedia {
        channel: String,
        #[serde(rename = "threadTs")]
        thread_ts: String,
        name: String,
        caption: String,
        /// The picture's bytes, base64 (standard alphabet, padded).
        bytes: String,
    },
}

/// The answer to [`PlaneCall::BudgetCheck`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetVerdict {
    /// Why the work is refused, when a budget is spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<crate::ApiError>,
    /// Whether any budget is set at all: with none, the asker need not ask again for a
    /// while.
    pub any: bool,
}

/// The answer to [`PlaneCall::PullRequestBase`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequestBase {
    pub base: String,
}

/// A session's pull request to open or reuse (its body already carries the session's link).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullRequestProposal {
    /// The person it is opened as, when they have a GitHub token on file.
    pub user: String,
    pub owner: String,
    pub name: String,
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
    /// Asked for as a draft (the repository's settings may make it one anyway).
    pub draft: bool,
    /// The numbers this session opened for the branch before.
    pub known: Vec<i64>,
}

/// The answer to [`PlaneCall::PublishPullRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedPullRequests {
    pub result: PullRequestResult,
    /// Pull requests this session made for the branch before, closed or merged since.
    #[serde(default)]
    pub ended: Vec<PullRequestResult>,
    /// Why the label could not be put on (the pull request stands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_failed: Option<String>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_call_keeps_its_shape_across_the_binding() {
        let call = PlaneCall::LinearProgress {
            session: serde_json::from_value(serde_json::json!({
                "agentSessionId": "a", "organizationId": "o", "issueId": "i",
                "issueIdentifier": "ENG-1", "issueUrl": "https://linear.app/x/issue/ENG-1",
                "target": "acme/web"
            }))
            .unwrap(),
            tool: "bash".into(),
            args: serde_json::json!({ "command": "ls" }),
        };
        let text = serde_json::to_string(&call).unwrap();
        assert!(text.starts_with(r#"{"type":"linear_progress""#), "{text}");
        let back: PlaneCall = serde_json::from_str(&text).unwrap();
        assert_eq!(back, call);
        assert!(PLANE_CALL_URL.ends_with(PLANE_CALL_PATH));
        assert!(PLANE_CALL_URL.contains(PLANE_HOST));
    }
}
