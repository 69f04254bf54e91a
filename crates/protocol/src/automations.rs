//! Automations: sessions that start themselves, on a schedule or from an inbound webhook.
//! `GET/POST /automations`, `GET/PUT/DELETE /automations/:id`,
//! `POST /automations/:id/{trigger,pause,resume,rotate-key}`, `GET /automations/:id/runs`,
//! `GET /automations/schedule-preview`, `POST /webhooks/automation/:id` and
//! `POST /webhooks/sentry/:id`. Slack channel triggers come through the Slack bot's
//! `POST /webhooks/slack/events`.

use crate::repository::RepositoryRef;
use serde::{Deserialize, Serialize};

/// The longest name.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest instructions.
pub const MAX_INSTRUCTIONS_CHARS: usize = 15_000;
/// Repositories a schedule may fan out to (one session each per firing).
pub const MAX_REPOSITORIES: usize = 10;
/// The shortest time between two firings of a schedule.
pub const MIN_SCHEDULE_INTERVAL_MINUTES: i64 = 15;
/// The largest inbound webhook body.
pub const MAX_WEBHOOK_BYTES: usize = 64 * 1024;
/// Filters in one automation's conditions.
pub const MAX_FILTERS: usize = 20;
/// Consecutive failed runs that pause an automation.
pub const FAILURES_BEFORE_PAUSE: i64 = 3;
/// A run whose sessions have not all ended after this long has failed (timed out).
pub const RUN_TIMEOUT_MS: i64 = 90 * 60 * 1000;
/// The longest text pattern of a Slack channel trigger.
pub const MAX_PATTERN_CHARS: usize = 500;
/// Channels one Slack trigger watches.
pub const MAX_SLACK_CHANNELS: usize = 20;
/// People in a Slack trigger's allow or deny list.
pub const MAX_SLACK_USERS: usize = 100;
/// A channel trigger's thread keeps its session this long after its last message.
pub const SLACK_THREAD_DAYS: i64 = 7;
/// What the agent answers, alone, when nothing should be posted in the thread.
pub const NO_REPLY: &str = "NO_REPLY";

/// Whether the agent's answer is [`NO_REPLY`] (alone, around white space).
pub fn is_no_reply(answer: Option<&str>) -> bool {
    answer.is_some_and(|a| a.trim() == NO_REPLY)
}
/// The most of a webhook's payload the agent is shown.
pub const MAX_PAYLOAD_IN_PROMPT_CHARS: usize = 20_000;

/// What starts an automation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum TriggerType {
    /// A 5-field cron in a time zone.
    Schedule,
    /// `POST /webhooks/automation/:id` with the automation's key.
    Webhook,
    /// `POST /webhooks/sentry/:id` from a Sentry internal integration (signed with its
    /// client secret).
    Sentry,
    /// A message in a watched Slack channel (when the deployment enables them).
    SlackChannel,
    /// A Linear issue created, or moved to a state, in the workspace the Linear app is
    /// installed in (its agent session webhook also carries issue events).
    LinearIssue,
    /// A GitHub event on the automation's repository, from the GitHub App's signed webhook:
    /// a failing check, a pull request or issue opened or labelled, a comment, a push.
    GithubEvent,
}

impl TriggerType {
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerType::Schedule => "schedule",
            TriggerType::Webhook => "webhook",
            TriggerType::Sentry => "sentry",
            TriggerType::SlackChannel => "slack_channel",
            TriggerType::LinearIssue => "linear_issue",
            TriggerType::GithubEvent => "github_event",
        }
    }
}

/// Which Sentry deliveries start runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum SentryResource {
    /// A new issue (`issue`, action `created`).
    Issue,
    /// An issue alert rule fired for an event (`event_alert`, action `triggered`).
    EventAlert,
}

/// A Sentry trigger: what starts it, and the internal integration's client secret (sent
/// when made or changed, stored sealed, never answered).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SentrySettings {
    pub resource: SentryResource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
}

/// How a Slack trigger's pattern is matched against a message's text (case-insensitively
/// for `contains` and `exact`; a regex says so itself with `(?i)`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum TextMatch {
    /// The text holds the pattern (an empty pattern: any message).
    #[default]
    Contains,
    /// The text, trimmed, is the pattern.
    Exact,
    /// The pattern (at most [`MAX_PATTERN_CHARS`]) matches somewhere in the text.
    Regex,
}

/// A Slack channel trigger: top-level messages in `channels` (ids, `C…`/`G…`) whose text
/// matches, from people allowed (everyone when `usersAllowed` is empty) and not denied.
/// A message that mentions the bot is the interactive bot's, never a trigger's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlackTrigger {
    pub channels: Vec<String>,
    #[serde(default)]
    pub text_match: TextMatch,
    #[serde(default)]
    pub pattern: String,
    #[serde(default)]
    pub users_allowed: Vec<String>,
    #[serde(default)]
    pub users_denied: Vec<String>,
}

/// Which Linear issue events start runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum LinearIssueEvent {
    /// An issue is created (with the label, when one is named).
    Created,
    /// An issue moves into the state named (and carries the label, when one is named).
    MovedToState,
}

/// A Linear trigger: issues of `team` (its key; any team when absent) that carry `label`
/// (any when absent), created or moved into `state` (a workflow state's name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinearTrigger {
    pub event: LinearIssueEvent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub team: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub label: Option<String>,
    /// The state moved into (`moved_to_state` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub state: Option<String>,
}

/// A Linear issue event as the Linear bot hands it to the automations (not on the wire:
/// between the bot and the Worker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinearIssueChange {
    pub event: LinearIssueEvent,
    pub issue_id: String,
    pub identifier: String,
    pub title: String,
    pub description: String,
    pub url: String,
    pub team: String,
    pub labels: Vec<String>,
    /// The state's name now.
    pub state: String,
}

/// Which of the GitHub App's webhook events a trigger watches (GitHub's own names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum GithubEventKind {
    /// A check suite completed (with a conclusion the trigger names: failing by default).
    CheckSuite,
    /// One check run completed (likewise).
    CheckRun,
    PullRequest,
    Issues,
    IssueComment,
    Push,
}

impl GithubEventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            GithubEventKind::CheckSuite => "check_suite",
            GithubEventKind::CheckRun => "check_run",
            GithubEventKind::PullRequest => "pull_request",
            GithubEventKind::Issues => "issues",
            GithubEventKind::IssueComment => "issue_comment",
            GithubEventKind::Push => "push",
        }
    }

    /// The actions a trigger of this kind may name; one that names none takes them all.
    pub fn actions(self) -> &'static [&'static str] {
        match self {
            GithubEventKind::CheckSuite | GithubEventKind::CheckRun => &["completed"],
            GithubEventKind::PullRequest => {
                &["opened", "labeled", "ready_for_review", "synchronize"]
            }
            GithubEventKind::Issues => &["opened", "labeled"],
            GithubEventKind::IssueComment => &["created"],
            GithubEventKind::Push => &[],
        }
    }
}

/// A GitHub trigger: the App's deliveries of `event` on the automation's one repository
/// that pass every condition named (an empty list passes all). `branches` and `paths` are
/// globs (`*` within one path segment, `**` across them); `branches` look at the branch
/// pushed (push), checked (checks) or merged into (a pull request's base). A conclusion is
/// a check's (`failure`, `timed_out`…; failing ones when none are named). A comment's text
/// is matched by `textMatch` and `pattern`. Events on the sessions' own branches
/// (`open-inspect/…`) and events the App itself caused never start a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GithubTrigger {
    pub event: GithubEventKind,
    #[serde(default)]
    pub actions: Vec<String>,
    #[serde(default)]
    pub branches: Vec<String>,
    /// Any one of them on the pull request or issue.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Any changed file matching any one of them.
    #[serde(default)]
    pub paths: Vec<String>,
    /// GitHub logins; everyone when empty.
    #[serde(default)]
    pub actors_allowed: Vec<String>,
    #[serde(default)]
    pub actors_denied: Vec<String>,
    #[serde(default)]
    pub conclusions: Vec<String>,
    #[serde(default)]
    pub text_match: TextMatch,
    #[serde(default)]
    pub pattern: String,
}

/// Where a GitHub-started run's answer goes: the pull request's or issue's comments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct GithubThread {
    pub owner: String,
    pub repo: String,
    pub number: i64,
}

/// A GitHub delivery as the GitHub bot hands it to the automations (not on the wire:
/// between the bot and the control plane, in one Worker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GithubEventChange {
    /// `X-GitHub-Delivery`: a redelivery carries the same.
    pub delivery: String,
    pub event: GithubEventKind,
    pub action: String,
    pub owner: String,
    pub repo: String,
    /// The branch `branches` look at (none for issues and comments).
    pub branch: Option<String>,
    /// The pull request or issue it is about.
    pub number: Option<i64>,
    pub pull_request: bool,
    /// A pull request's branch to work on: its head in the repository, or GitHub's
    /// `pull/N/head` for a fork's.
    pub work_branch: Option<String>,
    pub labels: Vec<String>,
    /// The files changed, where the delivery lists them (a push); a pull request's are
    /// asked of GitHub when a trigger names paths.
    pub paths: Option<Vec<String>>,
    /// Who caused it (`sender.login`), and whether GitHub says that is a bot.
    pub actor: String,
    pub actor_is_bot: bool,
    pub conclusion: Option<String>,
    /// A check run's name, or the app whose check suite it is.
    pub check: Option<String>,
    pub title: String,
    pub body: String,
    pub comment: Option<String>,
    pub url: String,
    pub head_sha: Option<String>,
}

/// When a schedule fires: `cron` (minute hour day-of-month month day-of-week) read in
/// `timezone` (an IANA name: `Europe/Paris`, `UTC`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Schedule {
    pub cron: String,
    pub timezone: String,
}

/// How a filter compares the value at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Comparison {
    Eq,
    Neq,
    Gt,
    Gte,
    Lt,
    Lte,
    /// A string holding the value as a substring (or an array holding it).
    Contains,
    /// Present, whatever its value.
    Exists,
}

/// One filter on an event's JSON: `path` is dot notation from the root (`$.deploy.env`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Filter {
    pub path: String,
    pub op: Comparison,
    /// What is compared (absent for `exists`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(type = "unknown"))]
    pub value: Option<serde_json::Value>,
}

/// `POST /automations` and `PUT /automations/:id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutomationRequest {
    pub name: String,
    pub trigger_type: TriggerType,
    /// None, one, or (schedules only) up to [`MAX_REPOSITORIES`].
    #[serde(default)]
    pub repositories: Vec<RepositoryRef>,
    /// The base branch (one repository only); the repository's default otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    pub instructions: String,
    /// Every filter must match an event for it to start a run (webhooks).
    #[serde(default)]
    pub conditions: Vec<Filter>,
    /// Schedules only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// Sentry triggers only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentry: Option<SentrySettings>,
    /// Slack channel triggers only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<SlackTrigger>,
    /// Linear issue triggers only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub linear: Option<LinearTrigger>,
    /// GitHub event triggers only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub github: Option<GithubTrigger>,
}

/// An automation's state, as the list shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum AutomationStatus {
    Enabled,
    /// Enabled, with failed runs in a row (fewer than pause it).
    Degraded,
    Paused,
}

/// An automation, as the API answers it (never its webhook key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Automation {
    pub id: String,
    /// What it does and when, as last saved.
    pub settings: AutomationRequest,
    pub status: AutomationStatus,
    /// Why it is paused (by hand, or after failed runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_reason: Option<String>,
    pub consecutive_failures: i64,
    /// The next firing of a schedule (ms since the epoch); none when paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at: Option<i64>,
    /// The path webhooks (or Sentry's deliveries) are sent to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// `POST /automations` and `POST /automations/:id/rotate-key`: the automation, and for a
/// webhook its key, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AutomationCreated {
    pub automation: Automation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_key: Option<String>,
}

/// `GET /automations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AutomationList {
    pub automations: Vec<Automation>,
}

/// Where a run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum RunTrigger {
    Schedule,
    Manual,
    Webhook,
    Sentry,
    Slack,
    Linear,
    Github,
}

impl RunTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            RunTrigger::Schedule => "schedule",
            RunTrigger::Manual => "manual",
            RunTrigger::Webhook => "webhook",
            RunTrigger::Sentry => "sentry",
            RunTrigger::Slack => "slack",
            RunTrigger::Linear => "linear",
            RunTrigger::Github => "github",
        }
    }

    pub fn parse(s: &str) -> Option<RunTrigger> {
        match s {
            "schedule" => Some(RunTrigger::Schedule),
            "manual" => Some(RunTrigger::Manual),
            "webhook" => Some(RunTrigger::Webhook),
            "sentry" => Some(RunTrigger::Sentry),
            "slack" => Some(RunTrigger::Slack),
            "linear" => Some(RunTrigger::Linear),
            "github" => Some(RunTrigger::Github),
            _ => None,
        }
    }
}

/// A run's (or one of its sessions') state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Starting,
    Running,
    Completed,
    Failed,
    /// Some repositories' sessions completed, some failed.
    PartialFailure,
    /// Not started: another run was active, or the event was delivered before.
    Skipped,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Starting => "starting",
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::PartialFailure => "partial_failure",
            RunStatus::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "starting" => RunStatus::Starting,
            "running" => RunStatus::Running,
            "completed" => RunStatus::Completed,
            "failed" => RunStatus::Failed,
            "partial_failure" => RunStatus::PartialFailure,
            "skipped" => RunStatus::Skipped,
            _ => return None,
        })
    }

    /// Whether the run (or session) is still going.
    pub fn is_active(self) -> bool {
        matches!(self, RunStatus::Starting | RunStatus::Running)
    }
}

/// One repository's session of a run (`repository` is `owner/name`, or empty for none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RunSession {
    pub repository: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One firing of an automation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub id: String,
    pub automation_id: String,
    pub trigger: RunTrigger,
    pub status: RunStatus,
    /// Why it was skipped or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub sessions: Vec<RunSession>,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
}

/// `GET /automations/:id/runs` (newest first) and `POST /automations/:id/trigger`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RunList {
    pub runs: Vec<Run>,
}

/// `GET /automations/schedule-preview?cron=…&timezone=…`: the next firings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SchedulePreview {
    pub next_runs: Vec<i64>,
}

/// `POST /webhooks/automation/:id`'s answer: runs started, and matching deliveries not
/// started (a repeated `idempotencyKey`, another run active).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct WebhookAccepted {
    pub ok: bool,
    pub triggered: i64,
    pub skipped: i64,
}

/// Carried by an automation's session (set by the control plane only): which automation and
/// run started it, and where its outcome is reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AutomationOrigin {
    pub automation_id: String,
    pub run_id: String,
    /// The run's repository this session is for (`owner/name`, or empty).
    #[serde(default)]
    pub repository: String,
    /// A Slack channel trigger's thread: the answer is posted there (unless it is
    /// [`NO_REPLY`]) and the 👀 taken off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack_thread: Option<crate::slack::SlackThread>,
    /// A GitHub trigger's pull request or issue: the answer is posted there as a comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GithubThread>,
}
