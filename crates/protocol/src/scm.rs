//! Pull requests, the sandbox's push, per-repository settings and completion callbacks:
//! the wire shapes of GitHub as a source and destination.

use serde::{Deserialize, Serialize};

/// `POST /sessions/:id/pull-requests`, sent by the session's own sandbox (its bearer token)
/// when the agent asks for a pull request. Without `repoOwner`/`repoName` every changed
/// repository of the session gets one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PullRequestRequest {
    pub title: String,
    #[serde(default)]
    pub body: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<bool>,
}

/// Whose credentials made the pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum AuthoredAs {
    /// The prompting person's own GitHub token: the PR is theirs.
    User,
    /// The GitHub App (the person has no stored token).
    App,
    /// No PR host: a local repository, the branch was pushed only.
    None,
}

/// One repository's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PullRequestResult {
    pub repo_owner: String,
    pub repo_name: String,
    pub head_branch: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_number: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_url: Option<String>,
    /// `open`, `draft`, `closed`, `merged`, or `pushed` where there is no PR host.
    pub state: String,
    /// An open PR for the head branch was reused (the push updated it).
    pub updated: bool,
    pub authored_as: AuthoredAs,
    /// What a person should know, in words (no host, authored by the App, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A pull request changed on its host (closed, merged, reopened, made a draft or ready,
/// reviewed): what the Worker tells each session that recorded it (`POST /pull-request` on
/// the object, the Worker's own call). Not a person's to send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PullRequestChange {
    pub owner: String,
    pub repo: String,
    pub number: i64,
    /// `open`, `draft`, `closed` or `merged`, when the change is of state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// A review's verdict (`approved`, `changes_requested`, `commented`) and its author.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
    /// When it happened on the host (ms since the epoch).
    pub at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PullRequestResponse {
    pub pull_requests: Vec<PullRequestResult>,
}

/// What the session asks the sandbox to push (`push{pushSpec}`): the repository's
/// `HEAD`, after committing what is uncommitted, force-pushed to `branch`. The answer
/// (`push_complete` / `push_error`) carries the same `requestId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PushSpec {
    pub request_id: String,
    /// The repository's name in the workspace.
    pub repo: String,
    pub branch: String,
    /// Compare `HEAD` with this branch of the source to say whether anything changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
}

/// `GET|PUT /repos/:owner/:name/settings`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepoSettings {
    /// The model sessions on this repository use when none is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// The coding agent of sessions on this repository that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_agent: Option<crate::agent::AgentKind>,
    /// Pull requests are always opened as drafts.
    #[serde(default)]
    pub always_draft: bool,
    /// A label put on every pull request the agent opens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pr_label: Option<String>,
    /// The GitHub bot answers in this repository.
    #[serde(default)]
    pub bot_enabled: bool,
    /// Review every non-draft pull request when it is opened.
    #[serde(default)]
    pub auto_review_on_open: bool,
    /// GitHub logins who may trigger the bot; empty = anyone with write permission.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_trigger_users: Vec<String>,
    /// The environment bot-started sessions use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_environment_id: Option<String>,
    /// What the bot's review may be besides a comment (`APPROVE`, `REQUEST_CHANGES`);
    /// empty: the bot only comments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub review_verdicts: Vec<ReviewVerdict>,
    /// Markdown the bot's review prompt carries: what this repository wants looked at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_instructions: Option<String>,
    /// Ports a session on this repository exposes when it names none itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tunnel_ports: Vec<u16>,
    /// The repository requires signed commits: a session's pull request carries commits
    /// GitHub made again through its Git Data API with the App's token, and signed.
    #[serde(default)]
    pub sign_commits: bool,
}

/// At most this many characters of review instructions in a repository's settings.
pub const MAX_REVIEW_INSTRUCTIONS_CHARS: usize = 8_000;

/// A review's verdict, as GitHub's `event`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReviewVerdict {
    #[default]
    Comment,
    Approve,
    RequestChanges,
}

/// Which side of a diff a review comment is on: the old file's lines or the new file's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "UPPERCASE")]
pub enum DiffSide {
    Left,
    #[default]
    Right,
}

/// A comment the agent wants on one line of a pull request's diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewComment {
    pub path: String,
    pub line: u64,
    #[serde(default)]
    pub side: DiffSide,
    pub body: String,
}

/// `POST /sessions/:id/reviews`, from the session's sandbox (the agent's `open-inspect
/// review`): the review of the pull request the running prompt came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewRequest {
    #[serde(default)]
    pub event: ReviewVerdict,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub comments: Vec<ReviewComment>,
}

/// At most this many inline comments in one review, and characters in a body or comment
/// (GitHub's own limit for a body).
pub const MAX_REVIEW_COMMENTS: usize = 100;
pub const MAX_REVIEW_TEXT_CHARS: usize = 65_536;

/// The review as GitHub took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ReviewResult {
    pub url: String,
    /// The verdict given (a comment when the one asked is not allowed here).
    pub event: ReviewVerdict,
    /// Comments on lines of the diff, and those folded into the body because they were not.
    pub inline: u32,
    pub folded: u32,
}

/// Where a prompt's outcome is reported when it completes. Set only by the control plane
/// itself (the GitHub bot) or a signed service, never taken from a person's request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(
    tag = "source",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum CallbackContext {
    /// A comment on a pull request (or an answer in a review thread).
    Github {
        owner: String,
        repo: String,
        number: i64,
        /// The review comment answered, when the prompt came from one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        review_comment_id: Option<i64>,
        /// The bot was asked to review: the outcome is a review, not a comment.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        review: bool,
    },
    /// A Slack thread: progress and the outcome are posted there.
    Slack(crate::slack::SlackThread),
    /// An automation's run: the outcome is recorded on the run.
    Automation(crate::automations::AutomationOrigin),
    /// A Linear agent session: tools and the outcome are posted as its activities.
    Linear(crate::linear::LinearAgentSession),
}

/// A prompt with a callback ended: the shell reports it where the context says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub session_id: String,
    pub message_id: String,
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The agent's last text of the turn, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Pull requests the session has, as `(url, state)`.
    #[serde(default)]
    pub pull_requests: Vec<(String, String)>,
    /// Files the turn's tools wrote, relative to the workspace.
    #[serde(default)]
    pub changed_files: Vec<String>,
    /// The review the prompt submitted on its pull request (`open-inspect review`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_url: Option<String>,
    /// The captions of the pictures the agent took during the prompt (seen in the session).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pictures: Vec<String>,
    pub context: CallbackContext,
}

/// The number of a GitHub pull request when `branch` names its head ref (`pull/7/head`):
/// what a session on a pull request from a fork works on. GitHub keeps that ref in the
/// base repository, so it is fetched from there; nothing can be pushed back to it.
pub fn pull_head_ref(branch: &str) -> Option<u64> {
    let number = branch.strip_prefix("pull/")?.strip_suffix("/head")?;
    if number.is_empty() || number.len() > 12 || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    number.parse().ok()
}

#[cfg(test)]
mod pull_ref_tests {
    use super::pull_head_ref;

    #[test]
    fn only_a_pull_requests_head_ref_is_one() {
        assert_eq!(pull_head_ref("pull/7/head"), Some(7));
        for not in [
            "pull/7/merge",
            "pull//head",
            "pull/x/head",
            "feat/pull/7/head",
            "pull/7/head/x",
            "main",
        ] {
            assert_eq!(pull_head_ref(not), None, "{not}");
        }
    }
}
