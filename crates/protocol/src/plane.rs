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
use crate::scm::Completion;
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
    /// A cron trigger fired (on the session Worker, whose configuration holds the
    /// triggers): its work is the control plane's.
    Scheduled {
        cron: String,
        /// When it was scheduled (ms since the epoch).
        at: i64,
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
