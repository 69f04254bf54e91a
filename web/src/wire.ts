// Generated from crates/protocol/ by `cargo test -p inspect-protocol --features ts --test typescript`
// (INSPECT_WRITE_WIRE_TS=1 writes it). Do not edit: change the Rust types instead.

export type JsonValue = number | string | boolean | Array<JsonValue> | { [key in string]: JsonValue } | null;

export type Me = { user: Actor, 
/**
 * `local`, `browser`, `api_token` or `service`.
 */
via: string, 
/**
 * What they may change (`admin`: what the deployment shares too).
 */
role: Role, };

export type Role = "admin" | "member";

export type RoleSource = "setting" | "app" | "unset" | "default" | "local";

export type LinkRule = "code" | "email";

export type LinkedIdentity = { 
/**
 * `slack:U123`, `linear:<id>`.
 */
identity: string, 
/**
 * `slack`, `linear`.
 */
provider: string, 
/**
 * As that service names them.
 */
name: string, rule: LinkRule, linkedAt: number, };

export type Identities = { 
/**
 * The identity they sign in with (`github:<id>`, or `local`).
 */
signIn: string, linked: Array<LinkedIdentity>, };

export type LinkRequest = { code: string, };

export type Person = { userId: string, name: string, email: string | null, avatar: string | null, role: Role, roleSource: RoleSource, 
/**
 * Identities linked to them (`slack:U123`, …).
 */
linked: Array<string>, };

export type People = { people: Array<Person>, };

export type SetRole = { role: Role, };

export type SignInProviders = { github: boolean, google: boolean, };

export type BudgetMetric = "sandbox_hours" | "tokens" | "cost_usd";

export type BudgetScope = "deployment" | "person";

export type Budget = { scope: BudgetScope, 
/**
 * For a person's budget: their user id, or `*` for each person's own. Empty for the
 * deployment's.
 */
subject: string, metric: BudgetMetric, 
/**
 * How much a calendar month (UTC) may use.
 */
monthlyLimit: number, };

export type BudgetStatus = { budget: Budget, used: number, 
/**
 * When the month ends (epoch ms): the budget starts anew.
 */
resetsAt: number, };

export type BudgetList = { budgets: Array<BudgetStatus>, };

export type UsageGroup = "person" | "repository" | "week" | "source";

export type UsageRow = { 
/**
 * The person's user id, `owner/name`, or the week's Monday (`YYYY-MM-DD`).
 */
key: string, 
/**
 * What to show: the person's name, else the key.
 */
label: string, sessions: number, prompts: number, toolCalls: number, tokensIn: number, tokensOut: number, 
/**
 * Millionths of a dollar, as the agents reported cost.
 */
costMicros: number, sandboxMs: number, 
/**
 * Sessions with a pull request, and those whose newest one was merged.
 */
pullRequests: number, merged: number, };

export type UsageReport = { by: UsageGroup, 
/**
 * Sessions made from `since` (inclusive) to `until` (exclusive), epoch ms.
 */
since: number, until: number, 
/**
 * Everyone's (an admin), or only the caller's own sessions.
 */
everyone: boolean, rows: Array<UsageRow>, };

export type SessionSource = "web" | "api" | "slack" | "github" | "linear" | "automation" | "child";

export type InboxKind = "prompt_finished" | "prompt_failed" | "question" | "pull_request" | "automation_failed" | "mention" | "budget";

export type InboxItem = { id: string, kind: InboxKind, sessionId: string, 
/**
 * The session's title (or what it works on).
 */
title: string, 
/**
 * What happened, in a line: the agent's last words, the error, the PR's new state.
 */
detail: string, 
/**
 * Where to open it (the session's page; the PR for a PR's change).
 */
url: string, createdAt: number, readAt?: number, };

export type InboxPage = { items: Array<InboxItem>, 
/**
 * Every unread item of the person's, not only those on this page.
 */
unread: number, };

export type MarkRead = { ids?: Array<string>, sessionId?: string, all?: boolean, };

export type MarkedRead = { marked: number, unread: number, };

export type InboxMessage = { "type": "item", item: InboxItem, unread: number, 
/**
 * Whether this tab should show a browser notification (the person asked for them
 * for this kind).
 */
notify: boolean, } | { "type": "unread", unread: number, } | { "type": "pong" };

export type Channels = { 
/**
 * A notification from an open tab.
 */
browser: boolean, 
/**
 * Web Push to the person's subscribed browsers (tabs closed).
 */
push: boolean, 
/**
 * A Slack direct message (a linked Slack identity).
 */
slack: boolean, };

export type NotificationPrefs = { kinds: { [key in InboxKind]?: Channels }, };

export type PushSubscription = { endpoint: string, 
/**
 * When the push service will drop it (ms since the epoch), if it says.
 */
expirationTime?: number, keys: PushKeys, };

export type PushKeys = { p256dh: string, auth: string, };

export type PushKey = { publicKey?: string, };

export type Notice = { title: string, body: string, url: string, 
/**
 * Folded notices share a tag, so a browser shows the newest in place of the older.
 */
tag: string, };

export type SessionUsage = { prompts: number, toolCalls: number, 
/**
 * The model's tokens, as the agent reported them per step.
 */
tokensIn: number, tokensOut: number, 
/**
 * The model's cost as the agent reported it, in millionths of a dollar.
 */
costMicros: number, 
/**
 * How long a sandbox was live for the session.
 */
sandboxMs: number, 
/**
 * When its first pull request was recorded.
 */
firstPrAt?: number | null, };

export type CreateApiToken = { name: string, };

export type CreatedApiToken = { id: string, name: string, token: string, createdAt: number, };

export type ApiTokenSummary = { id: string, name: string, createdAt: number, lastUsedAt: number | null, };

export type ApiTokenList = { tokens: Array<ApiTokenSummary>, };

export type SecretSummary = { key: string, createdAt: number, updatedAt: number, 
/**
 * Given to the repository's set-up and start hooks only, never to the agent or the
 * terminals.
 */
setup: boolean, };

export type SecretList = { secrets: Array<SecretSummary>, };

export type SetSecrets = { secrets: { [key in string]: string }, 
/**
 * Which of `secrets` are for set-up only (the hooks); the others reach the agent too.
 */
setup: Array<string>, };

export type EgressMode = "open" | "off";

export type EgressPreset = "package_registries";

export type EgressRule = { host: string, methods?: Array<string>, };

export type EgressPolicy = { mode: EgressMode, allow?: Array<EgressRule>, presets?: Array<EgressPreset>, };

export type CreateEnvironment = { name: string, repositories: Array<RepositoryRef>, description?: string | null, 
/**
 * The model its sessions use when they name none (one of the catalog's enabled).
 */
defaultModel?: string | null, 
/**
 * Where its sessions' sandboxes may send traffic (none: open).
 */
egress?: EgressPolicy, };

export type Environment = { id: string, name: string, repositories: Array<RepositoryRef>, createdBy: string, createdAt: number, description?: string | null, updatedAt: number, defaultModel?: string | null, egress?: EgressPolicy, };

export type EnvironmentList = { environments: Array<Environment>, };

export type ScmCredentials = { username: string, password: string, expiresAtEpochMs: number, };

export type TriggerType = "schedule" | "webhook" | "sentry" | "slack_channel" | "linear_issue" | "github_event";

export type Schedule = { cron: string, timezone: string, };

export type SentryResource = "issue" | "event_alert";

export type SentrySettings = { resource: SentryResource, clientSecret?: string | null, };

export type TextMatch = "contains" | "exact" | "regex";

export type ChangeKind = "added" | "modified" | "deleted" | "renamed" | "copied" | "type_changed";

export type SkillFile = { path: string, content: string, 
/**
 * Installed executable (only under `scripts/`).
 */
executable: boolean, };

export type SkillAssignment = { "kind": "all" } | { "kind": "repository", owner: string, name: string, } | { "kind": "environment", id: string, };

export type SkillRequest = { name: string | null, description: string, instructions: string, files: Array<SkillFile>, enabled: boolean, 
/**
 * None: every session.
 */
assignments: Array<SkillAssignment> | null, expectedRevision: number | null, };

export type Skill = { name: string, revision: number, description: string, instructions: string, files: Array<SkillFile>, enabled: boolean, assignments: Array<SkillAssignment>, 
/**
 * SHA-256 of the generated `SKILL.md` and the files.
 */
digest: string, updatedBy: string, updatedAt: number, };

export type SkillList = { skills: Array<Skill>, };

export type SkillChoice = "all" | "none" | { "profile": string };

export type SkillProfile = { name: string, skills: Array<string>, updatedAt: number, };

export type SkillProfileRequest = { skills: Array<string>, };

export type SkillProfiles = { profiles: Array<SkillProfile>, };

export type PinnedSkill = { name: string, revision: number, };

export type SkillBundle = { name: string, revision: number, 
/**
 * The whole `SKILL.md`: front matter (name, description) and the instructions.
 */
skillMd: string, files: Array<SkillFile>, };

export type SkillBundles = { skills: Array<SkillBundle>, };

export type McpTransport = { "type": "remote", url: string, headers: { [key in string]: string }, } | { "type": "local", command: Array<string>, environment: { [key in string]: string }, };

export type McpServerRequest = { name: string | null, server: McpTransport, scope: SkillAssignment, enabled: boolean, };

export type McpServer = { name: string, server: McpTransport, scope: SkillAssignment, enabled: boolean, updatedBy: string, updatedAt: number, };

export type McpServerList = { servers: Array<McpServer>, };

export type SessionMcpServer = { name: string, server: McpTransport, };

export type ModelInfo = { id: string, provider: string, label: string, 
/**
 * The context window, in tokens.
 */
context: number, 
/**
 * Whether the model reasons (it then accepts `efforts`).
 */
reasoning: boolean, 
/**
 * The reasoning efforts a prompt may ask of it (the agent's variants of the model).
 */
efforts: Array<string>, 
/**
 * The effort it runs at when a prompt names none, where the vendor has one.
 */
defaultEffort: string | null, 
/**
 * Whether sessions may use it.
 */
enabled: boolean, };

export type ModelProvider = { id: string, label: string, 
/**
 * The secret that holds its key (`ANTHROPIC_API_KEY`…); none for the deployment's
 * OpenAI-compatible server, which its sandboxes are told about.
 */
keySecret: string | null, 
/**
 * An opt-in provider's models start disabled when they are listed.
 */
optIn: boolean, 
/**
 * Whether the deployment can reach it: its key is a secret at some scope or carried by
 * the sandboxes, or a model grant for it is active (always true for the compatible
 * server). Only a reachable provider's models are listed.
 */
configured: boolean, };

export type ModelCatalog = { providers: Array<ModelProvider>, models: Array<ModelInfo>, 
/**
 * The deployment's default: what a session that names no model (and whose repository
 * names none) runs with.
 */
defaultModel: string | null, };

export type ModelSettings = { enabled: Array<string>, defaultModel: string | null, };

export type PatchOmitted = "binary" | "too_large" | "over_total";

export type ChangedFile = { 
/**
 * The path now (for a deleted file, the path it had). Names that are not UTF-8 are
 * shown with replacement characters.
 */
path: string, oldPath?: string | null, kind: ChangeKind, additions: number, deletions: number, binary: boolean, 
/**
 * The file's unified diff.
 */
patch?: string | null, omitted?: PatchOmitted | null, };

export type RepoChanges = { 
/**
 * The repository's name: its directory in the workspace.
 */
repo: string, 
/**
 * The commit the change is against.
 */
base: string, files: Array<ChangedFile>, 
/**
 * Changed files past [`MAX_FILES_LISTED`], counted only.
 */
moreFiles: number, additions: number, deletions: number, 
/**
 * Why the change could not be read (the repository is gone from the workspace).
 */
error?: string | null, };

export type ChangesSummary = { 
/**
 * When the sandbox captured it (ms); none before the first turn ended.
 */
capturedAt?: number | null, repos: Array<RepoChanges>, };

export type SlackTrigger = { channels: Array<string>, textMatch: TextMatch, pattern: string, usersAllowed: Array<string>, usersDenied: Array<string>, };

export type Comparison = "eq" | "neq" | "gt" | "gte" | "lt" | "lte" | "contains" | "exists";

export type Filter = { path: string, op: Comparison, 
/**
 * What is compared (absent for `exists`).
 */
value?: unknown, };

export type AutomationRequest = { name: string, triggerType: TriggerType, 
/**
 * None, one, or (schedules only) up to [`MAX_REPOSITORIES`].
 */
repositories: Array<RepositoryRef>, 
/**
 * The base branch (one repository only); the repository's default otherwise.
 */
branch?: string | null, model?: string | null, reasoningEffort?: string | null, instructions: string, 
/**
 * Every filter must match an event for it to start a run (webhooks).
 */
conditions: Array<Filter>, 
/**
 * Schedules only.
 */
schedule?: Schedule | null, 
/**
 * Sentry triggers only.
 */
sentry?: SentrySettings | null, 
/**
 * Slack channel triggers only.
 */
slack?: SlackTrigger | null, 
/**
 * Linear issue triggers only.
 */
linear?: LinearTrigger, 
/**
 * GitHub event triggers only.
 */
github?: GithubTrigger, };

export type AutomationStatus = "enabled" | "degraded" | "paused";

export type Automation = { id: string, 
/**
 * What it does and when, as last saved.
 */
settings: AutomationRequest, status: AutomationStatus, 
/**
 * Why it is paused (by hand, or after failed runs).
 */
pausedReason?: string | null, consecutiveFailures: number, 
/**
 * The next firing of a schedule (ms since the epoch); none when paused.
 */
nextRunAt?: number | null, 
/**
 * The path webhooks (or Sentry's deliveries) are sent to.
 */
webhookPath?: string | null, createdBy: string, createdAt: number, updatedAt: number, };

export type AutomationCreated = { automation: Automation, webhookKey?: string | null, };

export type AutomationList = { automations: Array<Automation>, };

export type RunTrigger = "schedule" | "manual" | "webhook" | "sentry" | "slack" | "linear" | "github";

export type RunStatus = "starting" | "running" | "completed" | "failed" | "partial_failure" | "skipped";

export type RunSession = { repository: string, sessionId?: string | null, status: RunStatus, error?: string | null, };

export type Run = { id: string, automationId: string, trigger: RunTrigger, status: RunStatus, 
/**
 * Why it was skipped or failed.
 */
reason?: string | null, sessions: Array<RunSession>, createdAt: number, finishedAt?: number | null, };

export type RunList = { runs: Array<Run>, };

export type SchedulePreview = { nextRuns: Array<number>, };

export type WebhookAccepted = { ok: boolean, triggered: number, skipped: number, };

export type AutomationOrigin = { automationId: string, runId: string, 
/**
 * The run's repository this session is for (`owner/name`, or empty).
 */
repository: string, 
/**
 * A Slack channel trigger's thread: the answer is posted there (unless it is
 * [`NO_REPLY`]) and the 👀 taken off.
 */
slackThread?: SlackThread | null, 
/**
 * A GitHub trigger's pull request or issue: the answer is posted there as a comment.
 */
github?: GithubThread | null, };

export type ClientMessage = { "type": "ping" } | { "type": "subscribe", token: string, clientId: string, } | { "type": "prompt", content: string, model?: string | null, reasoningEffort?: string | null, attachments?: Array<Attachment> | null, clientRequestId?: string | null, } | { "type": "cancel_prompt", messageId: string, clientRequestId?: string | null, } | { "type": "stop" } | { "type": "typing" } | { "type": "presence", status: PresenceStatus, cursor?: JsonValue | null, } | { "type": "fetch_history", cursor?: string | null, limit?: number | null, } | { "type": "terminal_input", terminalId: string, data: string, } | { "type": "terminal_resize", terminalId: string, cols: number, rows: number, } | { "type": "terminal_attach", terminalId: string, };

export type ServerMessage = { "type": "pong", timestamp?: number | null, } | { "type": "subscribed", session: SessionState, artifacts: Array<Artifact>, timeline: EventWindow, promptQueue: Array<QueuedPrompt>, participantId: string, participant: Participant, } | { "type": "prompt_queued", messageId: string, position: number, clientRequestId?: string | null, } | { "type": "prompt_cancelled", messageId: string, clientRequestId?: string | null, } | { "type": "prompt_queue_updated", promptQueue: Array<QueuedPrompt>, } | { "type": "sandbox_event", event: TimelineEvent, } | { "type": "sandbox_events", events: Array<TimelineEvent>, } | { "type": "presence_sync", participants: Array<Presence>, } | { "type": "presence_update", participants: Array<Presence>, } | { "type": "presence_leave", participantId: string, userId: string, } | { "type": "sandbox_warming" } | { "type": "sandbox_spawning", sandboxId: string, } | { "type": "sandbox_status", status: string, error?: string | null, } | { "type": "sandbox_ready", sandboxId: string, } | { "type": "sandbox_error", error: string, } | { "type": "artifact_created", artifact: Artifact, } | { "type": "artifact_updated", artifact: Artifact, } | { "type": "diff_updated", capturedAt: number, files: number, additions: number, deletions: number, } | { "type": "snapshot_saved", snapshotId: string, } | { "type": "terminal_opened", terminal: TerminalInfo, } | { "type": "terminal_output", terminalId: string, data: string, replay?: boolean, } | { "type": "terminal_resized", terminalId: string, cols: number, rows: number, } | { "type": "terminal_closed", terminalId: string, exitCode?: number | null, } | { "type": "sandbox_restored", sandboxId: string, snapshotId: string, } | { "type": "tunnel_urls", tunnelUrls: { [key in string]: string }, } | { "type": "processing_status", isProcessing: boolean, messageId?: string | null, } | { "type": "history_page", events: Array<TimelineEvent>, cursor: string | null, hasMore: boolean, } | { "type": "session_status", status: SessionStatus, } | { "type": "session_title", title: string | null, } | { "type": "error", code: string, message: string, clientRequestId?: string | null, };

export type PresenceStatus = "active" | "idle";

export type Presence = { participantId: string, userId: string, name: string, avatar?: string | null, status: PresenceStatus, lastSeen: number, };

export type ErrorCode = "bad_request" | "unauthorized" | "forbidden" | "not_found" | "method_not_allowed" | "conflict" | "gone" | "payload_too_large" | "unsupported_media_type" | "too_many_requests" | "internal" | "unavailable";

export type ApiError = { code: ErrorCode, message: string, 
/**
 * For `too_many_requests`: seconds until trying again can work (also sent as the
 * `Retry-After` header).
 */
retryAfter?: number | null, };

export type ErrorBody = { error: ApiError, };

export type HealthReport = { 
/**
 * `"ok"` when every check passed, `"degraded"` otherwise.
 */
status: string, 
/**
 * The crate version of the Worker build.
 */
version: string, d1: CheckResult, durableObject: CheckResult, 
/**
 * Where sandboxes come from (the local host in the embedded default).
 */
sandboxProvider: PartCheck, 
/**
 * The GitHub App (repositories, credentials, pull requests, the bot).
 */
githubApp: PartCheck, 
/**
 * Parts that are only set up or not: sign-in, the bot's webhook, the secrets key.
 */
signIn: PartCheck, githubBot: PartCheck, secretsKey: PartCheck, };

export type CheckResult = { ok: boolean, latencyMs: number, detail?: string | null, };

export type DurableProbe = { 
/**
 * How many probes this object has stored in its SQLite, this one included.
 */
probes: number, };

export type HostHealth = { status: string, version: string, sandboxes: number, 
/**
 * What the host keeps on disk.
 */
disk?: DiskUse | null, };

export type DiskUse = { 
/**
 * Sandbox directories (workspaces, agent state, logs).
 */
sandboxBytes: number, snapshotBytes: number, snapshots: number, 
/**
 * Snapshots past this are pruned, oldest first (never a live session's newest).
 */
snapshotBudgetBytes: number, };

export type PartCheck = { configured: boolean, ok?: boolean | null, latencyMs?: number | null, detail?: string | null, 
/**
 * The local sandbox host's disk use, for the sandbox provider.
 */
disk?: DiskUse | null, };

export type ImageScope = { "kind": "repository", owner: string, name: string, } | { "kind": "environment", environmentId: string, };

export type BuildStatus = "building" | "ready" | "failed" | "deleted";

export type ImageRepository = { owner: string, name: string, commit: string, };

export type ImageBuild = { id: string, scope: ImageScope, status: BuildStatus, 
/**
 * `manual` or `schedule`.
 */
trigger: string, startedAt: number, finishedAt?: number | null, 
/**
 * The provider's image (on the local provider, a snapshot).
 */
imageId?: string | null, runtimeVersion?: string | null, repositories: Array<ImageRepository>, 
/**
 * Why it failed.
 */
error?: string | null, 
/**
 * The setup hook's output (its tail).
 */
output?: string | null, bytes?: number | null, };

export type ImageSchedule = { 
/**
 * Rebuild when the newest build is this old; `None`: by hand only.
 */
intervalMinutes: number | null, keep: number, };

export type ImageList = { scope: ImageScope, builds: Array<ImageBuild>, schedule: ImageSchedule, };

export type ImageRequest = { scope: ImageScope, 
/**
 * With `PUT /images/schedule`.
 */
schedule?: ImageSchedule | null, };

export type BuildImageRequest = { buildId: string, repositories: Array<WorkspaceRepository>, 
/**
 * Secrets the setup hook may use. Never logged.
 */
env: { [key in string]: string }, 
/**
 * Where the report goes: `POST <url>` with `Authorization: Bearer <callbackToken>`.
 */
callbackUrl: string, 
/**
 * Single use. Never logged.
 */
callbackToken: string, 
/**
 * A token git may use for the repositories' remotes (GitHub), when they need one.
 */
gitToken?: string | null, 
/**
 * The build is given up after this long.
 */
timeoutSeconds: number, };

export type BuildStarted = { buildId: string, };

export type BuildReport = { success: boolean, imageId?: string | null, runtimeVersion: string, repositories: Array<ImageRepository>, error?: string | null, output?: string | null, bytes?: number | null, durationMs: number, };

export type RoutingRule = { keyword: string, target: string, };

export type ChannelAssociation = { channel: string, target: string, };

export type SlackSettings = { routingRules: Array<RoutingRule>, channelAssociations: Array<ChannelAssociation>, };

export type SlackThread = { channel: string, threadTs: string, 
/**
 * The bot's message in the thread that shows this prompt's progress.
 */
progressTs?: string | null, 
/**
 * The person's message the bot reacted to.
 */
reactionTs?: string | null, 
/**
 * What the session works on, as shown (`owner/name` or an environment's name).
 */
target: string, 
/**
 * When the prompt was taken (ms), for the elapsed time shown.
 */
startedAt: number, };

export type LinearIssueEvent = "created" | "moved_to_state";

export type LinearTrigger = { event: LinearIssueEvent, team?: string, label?: string, 
/**
 * The state moved into (`moved_to_state` only).
 */
state?: string, };

export type GithubEventKind = "check_suite" | "check_run" | "pull_request" | "issues" | "issue_comment" | "push";

export type GithubTrigger = { event: GithubEventKind, actions: Array<string>, branches: Array<string>, 
/**
 * Any one of them on the pull request or issue.
 */
labels: Array<string>, 
/**
 * Any changed file matching any one of them.
 */
paths: Array<string>, 
/**
 * GitHub logins; everyone when empty.
 */
actorsAllowed: Array<string>, actorsDenied: Array<string>, conclusions: Array<string>, textMatch: TextMatch, pattern: string, };

export type GithubThread = { owner: string, repo: string, number: number, };

export type AgentKind = "opencode" | "claude-code";

export type ModelGrantRequest = { 
/**
 * `anthropic` or `openai`.
 */
provider: string, scope: SkillAssignment, 
/**
 * The OAuth token endpoint (RFC 6749 §6: a form-encoded `refresh_token` grant).
 */
tokenUrl: string, clientId: string, 
/**
 * Written once, sealed, never answered.
 */
refreshToken: string, };

export type ModelGrant = { id: string, provider: string, scope: SkillAssignment, tokenUrl: string, clientId: string, 
/**
 * `active`, or `revoked` once the provider refused the refresh token.
 */
status: string, statusReason?: string, updatedAt: number, updatedBy: string, };

export type ModelGrantList = { grants: Array<ModelGrant>, };

export type ManagedGrant = { id: string, provider: string, };

export type TeamMapping = { team: string, label?: string, 
/**
 * `owner/name` or `env:<id>`.
 */
target: string, };

export type ProjectMapping = { project: string, target: string, };

export type LinearSettings = { teamMappings: Array<TeamMapping>, projectMappings: Array<ProjectMapping>, 
/**
 * Move an issue to its team's first `started` state when the agent starts on it.
 */
moveIssueOnStart: boolean, 
/**
 * Show each tool the agent runs in the agent panel (ephemeral `action` activities).
 */
toolProgress: boolean, };

export type LinearInstallation = { organizationId: string, organizationName: string, 
/**
 * The app's own user in that workspace (the agent people assign and mention).
 */
appUserId: string, installedAt: number, installedBy?: string, };

export type LinearStatus = { 
/**
 * `LINEAR_CLIENT_ID`, `LINEAR_CLIENT_SECRET` and `LINEAR_WEBHOOK_SECRET` are set.
 */
configured: boolean, installations: Array<LinearInstallation>, settings: LinearSettings, };

export type LinearInstallStart = { url: string, };

export type LinearAgentSession = { agentSessionId: string, organizationId: string, issueId: string, 
/**
 * `ENG-123`.
 */
issueIdentifier: string, issueUrl: string, 
/**
 * What the session works on, as shown (`owner/name` or an environment's name).
 */
target: string, 
/**
 * Each tool the agent runs becomes an ephemeral `action` activity.
 */
toolProgress: boolean, };

export type BootMode = "fresh" | "snapshot_restore" | "prebuilt" | "build" | "resume";

export type WorkspaceRepository = { owner: string, name: string, 
/**
 * Where to clone from: a local path or a git URL, set by the control plane only.
 */
source: string, 
/**
 * The base branch (the source's default when absent).
 */
baseBranch?: string | null, };

export type SpawnRequest = { sessionId: string, sandboxId: string, 
/**
 * The sandbox's bearer token for the session socket. Never logged.
 */
sandboxToken: string, 
/**
 * Where the supervisor connects (`<url>/sessions/<id>/ws?type=sandbox`).
 */
controlPlaneUrl: string, repositories: Array<WorkspaceRepository>, 
/**
 * The branch the agent works on, in every repository.
 */
workBranch: string, bootMode: BootMode, 
/**
 * Secrets and settings for the sandbox's environment. Never logged.
 */
env: { [key in string]: string }, 
/**
 * The names of the set-up-only secrets: their values come over the session socket
 * (`SandboxCommand::SetupSecrets`), for the set-up and start hooks alone, never into
 * any process's environment from the start nor any file.
 */
setupSecrets?: Array<string>, 
/**
 * Ports to expose; their URLs reach the sandbox through `.tunnels.env`.
 */
tunnelPorts: Array<number>, 
/**
 * The model the agent uses unless a prompt says otherwise (`provider/model`).
 */
defaultModel?: string | null, 
/**
 * The deployment's OpenAI-compatible server's enabled models (`inspect/<model>`, each
 * with the efforts it accepts): the agent knows each, so a prompt may switch to any.
 */
models?: Array<ModelInfo>, 
/**
 * The managed skill revisions to install before the agent starts (fetched with the
 * sandbox's credentials from `GET /sessions/:id/skills`).
 */
skills?: Array<PinnedSkill>, 
/**
 * The MCP servers the agent is given (secret references unresolved: the supervisor
 * resolves them from its environment).
 */
mcpServers?: Array<SessionMcpServer>, 
/**
 * The coding agent to run.
 */
agent: AgentKind, 
/**
 * Brokered model grants: the agent gets a marker for each, the supervisor a
 * short-lived token when the agent calls the model.
 */
managedGrants?: Array<ManagedGrant>, 
/**
 * Start from this snapshot (with `bootMode: snapshot_restore`).
 */
restoreFrom?: string | null, 
/**
 * Where the sandbox's traffic may go (its environment's policy; none: open).
 */
egress?: EgressPolicy | null, };

export type SnapshotInfo = { snapshotId: string, sandboxId: string, 
/**
 * Snapshots restore only into the runtime version that made them.
 */
runtimeVersion: string, bytes: number, durationMs: number, 
/**
 * The session whose sandbox it is (what deleting the session removes).
 */
sessionId?: string | null, };

export type SessionRemoved = { sandboxes: number, snapshots: number, bytes: number, };

export type SandboxInfo = { sandboxId: string, sessionId: string, 
/**
 * `running`, `exited`, `stopped`.
 */
status: string, 
/**
 * The runtime the sandbox runs (what its snapshots will be tagged with).
 */
runtimeVersion: string, tunnelUrls: { [key in string]: string }, 
/**
 * What the provider says of a sandbox that is not running (why it ended, why it cannot
 * start), in its words.
 */
detail?: string | null, 
/**
 * The vendor's own id for the sandbox, where the vendor names sandboxes itself: the
 * session keeps it and addresses the sandbox by it (a vendor's list may not carry our
 * ids, nor list a stopped sandbox).
 */
vendorId?: string | null, 
/**
 * Where the sandbox's editor is reached, when the provider exposes one.
 */
editor?: EditorEndpoint | null, 
/**
 * Where the sandbox's desktop is reached, when the provider exposes one.
 */
desktop?: DesktopEndpoints | null, };

export type SandboxList = { sandboxes: Array<SandboxInfo>, };

export type Capabilities = { snapshots: boolean, restore: boolean, persistentResume: boolean, explicitStop: boolean, timeouts: boolean, 
/**
 * Resuming starts the same machine again, which keeps the identity (sandbox id and
 * token) it was created with; otherwise a resumed sandbox gets a new identity.
 */
resumeInPlace: boolean, 
/**
 * Taking a snapshot ends the sandbox (Vercel): snapshots only when it stops.
 */
snapshotEndsSandbox: boolean, 
/**
 * It can hold a sandbox to an environment's `off` egress policy (its own network
 * controls, or ours); a provider that cannot is refused such a sandbox.
 */
confinesEgress: boolean, };

export type RepositoryCheck = { path: string, };

export type RepositoryChecked = { path: string, branch?: string | null, head: string, };

export type SandboxFrame = { sandboxId: string, timestamp: number, 
/**
 * Present on events that must be acknowledged.
 */
ackId?: string | null, } & ({ "type": "ready", opencodeSessionId?: string | null, } | { "type": "heartbeat" } | { "type": "boot_step", step: string, status: StepStatus, durationMs?: number | null, detail?: string | null, output?: string | null, } | { "type": "token", messageId: string, partId?: string | null, content: string, } | { "type": "tool_call", messageId: string, tool: string, callId: string, status: string, args: JsonValue, output?: string | null, 
/**
 * How long the tool ran, once it ended.
 */
durationMs?: number | null, } | { "type": "tool_result", messageId: string, callId: string, output?: string | null, error?: string | null, } | { "type": "step_start", messageId: string, } | { "type": "step_finish", messageId: string, cost: number, tokens: JsonValue, } | { "type": "git_sync", status: string, repo?: string | null, sha?: string | null, } | { "type": "error", messageId?: string | null, error: string, } | { "type": "execution_complete", messageId: string, success: boolean, error?: string | null, } | { "type": "artifact", artifactType: string, url?: string | null, metadata: JsonValue, } | { "type": "push_complete", branch?: string | null, repo?: string | null, 
/**
 * The `push` command this answers, when one asked.
 */
requestId?: string | null, sha?: string | null, 
/**
 * Whether the pushed head differs from the base branch.
 */
changed?: boolean | null, } | { "type": "push_error", error: string, repo?: string | null, requestId?: string | null, } | { "type": "warning", scope: string, message: string, } | { "type": "session_title", title: string, } | { "type": "snapshot_ready", snapshotId?: string | null, } | { "type": "terminal_output", terminalId: string, data: string, client?: string | null, } | { "type": "egress_blocked", host: string, port: number, method: string, reason: string, } | { "type": "terminal_exit", terminalId: string, exitCode?: number | null, error?: string | null, });

export type SandboxEvent = { "type": "ready", opencodeSessionId?: string | null, } | { "type": "heartbeat" } | { "type": "boot_step", step: string, status: StepStatus, durationMs?: number | null, detail?: string | null, output?: string | null, } | { "type": "token", messageId: string, partId?: string | null, content: string, } | { "type": "tool_call", messageId: string, tool: string, callId: string, status: string, args: JsonValue, output?: string | null, 
/**
 * How long the tool ran, once it ended.
 */
durationMs?: number | null, } | { "type": "tool_result", messageId: string, callId: string, output?: string | null, error?: string | null, } | { "type": "step_start", messageId: string, } | { "type": "step_finish", messageId: string, cost: number, tokens: JsonValue, } | { "type": "git_sync", status: string, repo?: string | null, sha?: string | null, } | { "type": "error", messageId?: string | null, error: string, } | { "type": "execution_complete", messageId: string, success: boolean, error?: string | null, } | { "type": "artifact", artifactType: string, url?: string | null, metadata: JsonValue, } | { "type": "push_complete", branch?: string | null, repo?: string | null, 
/**
 * The `push` command this answers, when one asked.
 */
requestId?: string | null, sha?: string | null, 
/**
 * Whether the pushed head differs from the base branch.
 */
changed?: boolean | null, } | { "type": "push_error", error: string, repo?: string | null, requestId?: string | null, } | { "type": "warning", scope: string, message: string, } | { "type": "session_title", title: string, } | { "type": "snapshot_ready", snapshotId?: string | null, } | { "type": "terminal_output", terminalId: string, data: string, client?: string | null, } | { "type": "egress_blocked", host: string, port: number, method: string, reason: string, } | { "type": "terminal_exit", terminalId: string, exitCode?: number | null, error?: string | null, };

export type SandboxCommand = { "type": "setup_secrets", env: Record<string, string>, } | { "type": "prompt", messageId: string, content: string, model?: string | null, reasoningEffort?: string | null, author: PromptAuthor, 
/**
 * Files sent with the prompt; kept ones (`attachmentId`) are fetched from
 * `GET /sessions/:id/attachments/:attachmentId` with the sandbox's token.
 */
attachments?: Array<Attachment>, } | { "type": "stop", messageId?: string | null, } | { "type": "snapshot" } | { "type": "shutdown" } | { "type": "push", pushSpec: PushSpec, } | { "type": "ack", ackId: string, } | { "type": "acks", ackIds: Array<string>, } | { "type": "error", code: string, message: string, } | { "type": "terminal_open", terminalId: string, cols: number, rows: number, } | { "type": "terminal_input", terminalId: string, data: string, } | { "type": "terminal_resize", terminalId: string, cols: number, rows: number, } | { "type": "terminal_replay", terminalId: string, client: string, } | { "type": "terminal_close", terminalId: string, } | { "type": "editor_start" } | { "type": "desktop_start" } | { "type": "open_gate", port: number, gatePort: number, };

export type StepStatus = "started" | "succeeded" | "failed" | "skipped";

export type SandboxBatch = { type: BatchTag, events: Array<JsonValue>, };

export type BatchTag = "batch";

export type GitIdentity = { name: string, email: string, };

export type PromptAuthor = { participantId: string, name: string, gitIdentity: GitIdentity, };

export type PullRequestRequest = { title: string, body: string, baseBranch?: string | null, headBranch?: string | null, repoOwner?: string | null, repoName?: string | null, draft?: boolean | null, };

export type AuthoredAs = "user" | "app" | "none";

export type CallbackContext = { "source": "github", owner: string, repo: string, number: number, 
/**
 * The review comment answered, when the prompt came from one.
 */
reviewCommentId?: number | null, 
/**
 * The bot was asked to review: the outcome is a review, not a comment.
 */
review?: boolean, } | { "source": "slack" } & SlackThread | { "source": "automation" } & AutomationOrigin | { "source": "linear" } & LinearAgentSession;

export type PullRequestResult = { repoOwner: string, repoName: string, headBranch: string, baseBranch?: string | null, prNumber?: number | null, prUrl?: string | null, 
/**
 * `open`, `draft`, `closed`, `merged`, or `pushed` where there is no PR host.
 */
state: string, 
/**
 * An open PR for the head branch was reused (the push updated it).
 */
updated: boolean, authoredAs: AuthoredAs, 
/**
 * What a person should know, in words (no host, authored by the App, …).
 */
message?: string | null, };

export type PullRequestResponse = { pullRequests: Array<PullRequestResult>, };

export type PushSpec = { requestId: string, 
/**
 * The repository's name in the workspace.
 */
repo: string, branch: string, 
/**
 * Compare `HEAD` with this branch of the source to say whether anything changed.
 */
baseBranch?: string | null, };

export type RepoSettings = { 
/**
 * The model sessions on this repository use when none is named.
 */
defaultModel?: string | null, 
/**
 * The coding agent of sessions on this repository that name none.
 */
defaultAgent?: AgentKind | null, 
/**
 * Pull requests are always opened as drafts.
 */
alwaysDraft: boolean, 
/**
 * A label put on every pull request the agent opens.
 */
prLabel?: string | null, 
/**
 * The GitHub bot answers in this repository.
 */
botEnabled: boolean, 
/**
 * Review every non-draft pull request when it is opened.
 */
autoReviewOnOpen: boolean, 
/**
 * GitHub logins who may trigger the bot; empty = anyone with write permission.
 */
allowedTriggerUsers?: Array<string>, 
/**
 * The environment bot-started sessions use.
 */
defaultEnvironmentId?: string | null, 
/**
 * What the bot's review may be besides a comment (`APPROVE`, `REQUEST_CHANGES`);
 * empty: the bot only comments.
 */
reviewVerdicts?: Array<ReviewVerdict>, 
/**
 * Markdown the bot's review prompt carries: what this repository wants looked at.
 */
reviewInstructions?: string | null, 
/**
 * Ports a session on this repository exposes when it names none itself.
 */
tunnelPorts?: Array<number>, 
/**
 * The repository requires signed commits: a session's pull request carries commits
 * GitHub made again through its Git Data API with the App's token, and signed.
 */
signCommits: boolean, };

export type Completion = { sessionId: string, messageId: string, success: boolean, error?: string | null, 
/**
 * The agent's last text of the turn, if any.
 */
summary?: string | null, 
/**
 * Pull requests the session has, as `(url, state)`.
 */
pullRequests: Array<[string, string]>, 
/**
 * Files the turn's tools wrote, relative to the workspace.
 */
changedFiles: Array<string>, 
/**
 * The review the prompt submitted on its pull request (`open-inspect review`), if any.
 */
reviewUrl?: string | null, 
/**
 * The captions of the pictures the agent took during the prompt (seen in the session).
 */
pictures?: Array<string>, context: CallbackContext, };

export type ReviewVerdict = "COMMENT" | "APPROVE" | "REQUEST_CHANGES";

export type DiffSide = "LEFT" | "RIGHT";

export type ReviewComment = { path: string, line: number, side: DiffSide, body: string, };

export type ReviewRequest = { event: ReviewVerdict, body: string, comments: Array<ReviewComment>, };

export type ReviewResult = { url: string, 
/**
 * The verdict given (a comment when the one asked is not allowed here).
 */
event: ReviewVerdict, 
/**
 * Comments on lines of the diff, and those folded into the body because they were not.
 */
inline: number, folded: number, };

export type OpenTerminalRequest = { cols: number, rows: number, };

export type TerminalInfo = { id: string, 
/**
 * Who opened it (their name) and when.
 */
openedBy: string, openedAt: number, cols: number, rows: number, closedAt?: number | null, exitCode?: number | null, };

export type TerminalList = { terminals: Array<TerminalInfo>, };

export type EditorLink = { url: string, 
/**
 * Unix seconds.
 */
expiresAt: number, };

export type EditorEndpoint = { port: number, url: string, };

export type DesktopRequest = { control?: boolean, };

export type DesktopLink = { url: string, 
/**
 * Unix seconds.
 */
expiresAt: number, control: boolean, };

export type DesktopEndpoints = { view: EditorEndpoint, control: EditorEndpoint, };

export type PortLink = { port: number, url: string, gated: boolean, expiresAt?: number | null, };

export type OpenPortRequest = { port: number, };

export type ScreenshotRequest = { url: string, width?: number | null, height?: number | null, caption?: string | null, 
/**
 * How long the page has to load, in seconds (default 30, at most 120).
 */
timeoutSecs?: number | null, 
/**
 * Record the page for this many seconds (an animated GIF) instead of photographing
 * it (1 to [`MAX_RECORDING_SECS`]).
 */
seconds?: number | null, };

export type SessionStatus = "created" | "active" | "archived";

export type RepositoryRef = { owner: string, name: string, 
/**
 * The base branch; the repository's default when absent.
 */
branch?: string | null, 
/**
 * Where sandboxes clone it from. Set by the control plane from its registry, never
 * taken from a client.
 */
source?: string | null, };

export type CreateSessionRequest = { repositories?: Array<RepositoryRef> | null, repoOwner?: string | null, repoName?: string | null, branch?: string | null, title?: string | null, model?: string | null, reasoningEffort?: string | null, 
/**
 * Which managed skills the session takes: every applicable one (the default) or none.
 */
skills?: SkillChoice | null, 
/**
 * The skill revisions the control plane pinned for the session (never a client's to
 * say: the Worker sets it from `skills` on every creation).
 */
pinnedSkills?: Array<PinnedSkill> | null, 
/**
 * The MCP servers the control plane gave the session (never a client's to say: the
 * Worker sets it on every creation).
 */
mcpServers?: Array<SessionMcpServer> | null, sandbox?: SandboxSettings | null, 
/**
 * The coding agent (OpenCode unless the repository's settings or this say otherwise).
 */
agent?: AgentKind, 
/**
 * Target an environment (its repositories, and its secrets over theirs) instead of
 * naming repositories.
 */
environmentId?: string | null, 
/**
 * Set by the control plane from the environment (a client's value is replaced).
 */
environmentName?: string | null, 
/**
 * Set by the control plane for a child session: its parent and how deep it is.
 */
parentSessionId?: string | null, depth?: number | null, 
/**
 * Set by the control plane for an automation's session: which automation and run.
 */
automation?: AutomationOrigin | null, };

export type SandboxSettings = { 
/**
 * Ports inside the sandbox to expose; their URLs reach the sandbox (`.tunnels.env`)
 * and the clients (`tunnel_urls`).
 */
tunnelPorts: Array<number>, 
/**
 * The coding agent the sandbox runs.
 */
agent: AgentKind, 
/**
 * The brokered model grants the session may use (set by the control plane only: the
 * session's creation replaces whatever a request said).
 */
managedGrants?: Array<ManagedGrant>, 
/**
 * Where the sandbox's traffic may go (set by the control plane only, from the
 * session's environment).
 */
egress?: EgressPolicy, };

export type TunnelUrls = { tunnelUrls: { [key in string]: string }, };

export type CreateSessionResponse = { sessionId: string, status: SessionStatus, };

export type Actor = { userId: string, name: string, email?: string | null, avatar?: string | null, };

export type SessionState = { id: string, title: string | null, status: SessionStatus, repositories: Array<RepositoryRef>, 
/**
 * The primary repository's owner and name (empty for a session without repositories).
 */
repoOwner: string | null, repoName: string | null, branchName: string | null, model: string | null, reasoningEffort: string | null, createdBy: string, sandboxStatus: string, messageCount: number, isProcessing: boolean, createdAt: number, updatedAt: number, environmentId?: string | null, 
/**
 * The environment's name when the session was made (it keeps its own copy: editing
 * or deleting the environment later changes nothing here).
 */
environmentName?: string | null, 
/**
 * The session that spawned this one, for a child session.
 */
parentSessionId?: string | null, 
/**
 * 0 for a session people started; a child is one deeper than its parent.
 */
depth: number, 
/**
 * The automation and run that started this session, when one did.
 */
automation?: AutomationOrigin | null, 
/**
 * The managed skill revisions the session's agent has (pinned when it was made).
 */
skills: Array<PinnedSkill>, 
/**
 * The names of the MCP servers the session's agent is given.
 */
mcpServers: Array<string>, 
/**
 * The coding agent the session's sandbox runs.
 */
agent: AgentKind, };

export type SessionSummary = { id: string, title: string | null, status: SessionStatus, repoOwner: string | null, repoName: string | null, repositories: Array<RepositoryRef>, createdBy: string, createdByName: string, messageCount: number, createdAt: number, updatedAt: number, 
/**
 * The session's newest pull request, when it has one.
 */
prUrl?: string | null, prState?: string | null, };

export type SessionList = { sessions: Array<SessionSummary>, cursor: string | null, hasMore: boolean, };

export type IndexUpdate = { id: string, title: string | null, status: SessionStatus, messageCount: number, updatedAt: number, 
/**
 * Participants' user ids, for "sessions I took part in".
 */
participants: Array<string>, 
/**
 * The newest pull request's URL and state.
 */
prUrl?: string | null, prState?: string | null, 
/**
 * What the session has used so far.
 */
usage: SessionUsage, 
/**
 * The prompts' text (the first [`crate::limits::MAX_INDEXED_PROMPT_TEXT`] bytes), for
 * finding the session by what was asked.
 */
promptText: string, };

export type MessageStatus = "pending" | "processing" | "completed" | "failed" | "cancelled";

export type Attachment = { type: string, name: string, url?: string | null, content?: string | null, mimeType?: string | null, 
/**
 * A file kept by the session (`POST /sessions/:id/attachments`); the sandbox fetches
 * it and the agent gets its path.
 */
attachmentId?: string | null, };

export type PromptRequest = { content: string, model?: string | null, reasoningEffort?: string | null, attachments?: Array<Attachment> | null, 
/**
 * Makes the prompt idempotent: the same id with the same content is the same prompt.
 */
clientRequestId?: string | null, 
/**
 * Where the outcome is reported (honoured only from the control plane itself and
 * signed services).
 */
callbackContext?: CallbackContext | null, };

export type PromptAccepted = { messageId: string, 
/**
 * 1-based place among unfinished prompts (1 = processing or next).
 */
position: number, status: MessageStatus, };

export type Message = { id: string, authorId: string, authorName: string, content: string, model: string | null, reasoningEffort: string | null, status: MessageStatus, clientRequestId: string | null, error: string | null, createdAt: number, startedAt: number | null, completedAt: number | null, };

export type MessageList = { messages: Array<Message>, };

export type QueuedPrompt = { messageId: string, authorId: string, authorName: string, content: string, status: MessageStatus, position: number, createdAt: number, };

export type Participant = { participantId: string, userId: string, name: string, avatar?: string | null, role: string, joinedAt: number, };

export type ParticipantList = { participants: Array<Participant>, };

export type Artifact = { id: string, type: string, url: string | null, metadata: JsonValue | null, createdAt: number, };

export type ArtifactList = { artifacts: Array<Artifact>, };

export type TitleRequest = { title: string, };

export type WsTokenResponse = { token: string, participantId: string, expiresAt: number, };

export type TimelineEvent = { id: string, seq: number, type: string, timestamp: number, messageId?: string | null, } & ({ [key in string]: number | string | boolean | Array<JsonValue> | { [key in string]: JsonValue } | null });

export type EventPage = { events: Array<TimelineEvent>, cursor: string | null, hasMore: boolean, };

export type EventWindow = { events: Array<TimelineEvent>, cursor: string | null, hasMore: boolean, };

export type RegisterRepository = { 
/**
 * Defaults to `local`.
 */
owner?: string | null, name: string, 
/**
 * An absolute path to a git repository on the host.
 */
path: string, defaultBranch?: string | null, };

export type Repository = { owner: string, name: string, 
/**
 * `local` (a path on the host) or `github`.
 */
kind: string, source: string, defaultBranch: string | null, createdAt: number, private: boolean, description?: string | null, 
/**
 * When GitHub last saw a change (ISO 8601), for GitHub repositories.
 */
updatedAt?: string | null, };

export type BranchList = { branches: Array<string>, defaultBranch: string | null, };

export type RepositoryList = { repositories: Array<Repository>, };

export type SpawnChildRequest = { prompt: string, title?: string | null, repoOwner?: string | null, repoName?: string | null, branch?: string | null, model?: string | null, };

export type ChildPrompt = { prompt: string, };

export type ChildPlan = { actor: Actor, repositories: Array<RepositoryRef>, depth: number, title: string, model?: string | null, 
/**
 * The children it already has (and slots others are being made in, `reserved:…`).
 */
children: Array<string>, 
/**
 * The slot this child is made in: recorded with its session id, or released.
 */
reservation?: string | null, 
/**
 * The coding agent the child runs (an attempt's; else as a new session's would).
 */
agent?: AgentKind | null, };

export type ChildSummary = { sessionId: string, title: string | null, status: SessionStatus, sandboxStatus: string, 
/**
 * `running` while a prompt waits or runs, else the last prompt's `completed` or
 * `failed` (`idle` before any).
 */
state: string, 
/**
 * The child's last words (its newest text).
 */
lastOutput?: string | null, error?: string | null, 
/**
 * Its pull requests as `(url, state)`.
 */
pullRequests: Array<[string, string]>, };

export type ChildList = { children: Array<ChildSummary>, 
/**
 * The groups of attempts made from this session ("Try N ways"), newest last.
 */
attempts: Array<AttemptGroup>, };

export type AttemptsRequest = { content: string, count: number, models?: Array<string>, 
/**
 * One coding agent an attempt, in order (the session's agent for the rest).
 */
agents?: Array<AgentKind>, };

export type AttemptsPlan = { group: string, plans: Array<ChildPlan>, };

export type AttemptGroup = { group: string, prompt: string, sessions: Array<string>, chosen?: string | null, };

export type ChooseAttempt = { sessionId: string, };

export type AttemptChosen = { sessionId: string, pullRequests: Array<PullRequestResult>, stopped: Array<string>, };

