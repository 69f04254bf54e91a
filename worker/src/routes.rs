//! Which route a request is for. Pure: method and path in, a [`Route`] or an error out.

use inspect_protocol::{ApiError, ErrorCode};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
    CreateSession,
    ListSessions,
    ListRepos,
    RegisterRepo,
    RemoveRepo {
        owner: String,
        name: String,
    },
    /// `GET /auth/me`: who the caller is.
    Me,
    /// `GET /auth/github`: start the GitHub OAuth sign-in.
    SignIn,
    /// `GET /auth/github/callback`: GitHub sends the browser back here.
    SignInCallback,
    /// `GET /auth/google`: start the Google (OpenID Connect) sign-in.
    SignInGoogle,
    /// `GET /auth/google/callback`: Google sends the browser back here.
    SignInGoogleCallback,
    /// `GET /auth/providers`: which sign-ins this deployment offers (anyone).
    SignInProviders,
    /// `POST /auth/logout`.
    SignOut,
    ListTokens,
    CreateToken,
    RevokeToken {
        id: String,
    },
    ListEnvironments,
    CreateEnvironment,
    GetEnvironment {
        id: String,
    },
    DeleteEnvironment {
        id: String,
    },
    UpdateEnvironment {
        id: String,
    },
    Secrets {
        scope: SecretScope,
        op: SecretOp,
    },
    /// `GET /repos/:owner/:name/branches`.
    RepoBranches {
        owner: String,
        name: String,
    },
    /// `GET|PUT /repos/:owner/:name/settings`.
    RepoSettings {
        owner: String,
        name: String,
        write: bool,
    },
    /// `POST /webhooks/github`: GitHub's deliveries to the bot (signed, no caller).
    GitHubWebhook,
    /// `GET /images?repository=|environmentId=`: a scope's prebuilt images.
    ListImages,
    /// `POST /images/builds`: build one now.
    BuildImage,
    /// `PUT /images/schedule`.
    ImageSchedule,
    /// `POST /images/builds/:id/complete`: the provider's report (its own token).
    ImageBuildReport {
        id: String,
    },
    /// `POST /sessions/:id/attachments`: a file for the session's prompts.
    AttachmentUpload {
        id: String,
    },
    /// `POST /sessions/:id/media`: a picture from the session's sandbox.
    ReportMedia {
        id: String,
    },
    /// `GET /sessions/:id/media/:attachment`: a person sees a picture the agent took.
    Media {
        id: String,
        attachment: String,
    },
    /// `POST /sessions/:id/ports/:port/link`: where a person opens a tunnelled port.
    PortLink {
        id: String,
        port: u16,
    },
    /// `DELETE /sessions/:id/terminals/:terminal`: a person closes a terminal.
    CloseTerminal {
        id: String,
        terminal: String,
    },
    /// `GET /sessions/:id/attachments/:attachment`: the session's sandbox fetches one.
    AttachmentDownload {
        id: String,
        attachment: String,
    },
    /// `POST /webhooks/slack/events` (Slack-signed, no caller).
    SlackEvents,
    /// `POST /webhooks/slack/interactions` (and the options-load URL).
    SlackInteractions,
    /// `GET|POST /skills`, `GET|PUT|DELETE /skills/:name`: managed skills.
    Skills {
        name: Option<String>,
    },
    /// `GET|POST /mcp-servers`, `GET|PUT|DELETE /mcp-servers/:name`.
    McpServers {
        name: Option<String>,
    },
    /// `GET /models`: the deployment's catalog of models.
    Models,
    /// `PUT /settings/models`: which models are enabled, and the default.
    SaveModelSettings,
    /// `GET /skill-profiles`, `PUT|DELETE /skill-profiles/:name`: the caller's own.
    SkillProfiles {
        name: Option<String>,
    },
    /// `GET|PUT /model-grants`, `DELETE /model-grants/:id`: brokered model grants.
    ModelGrants {
        id: Option<String>,
    },
    /// `GET|PUT /integrations/slack/settings`.
    SlackSettings {
        write: bool,
    },
    /// `POST /webhooks/linear` (Linear-signed, no caller).
    LinearWebhook,
    /// `GET /integrations/linear`: set up or not, installations, settings.
    LinearStatus,
    /// `PUT /integrations/linear/settings`.
    LinearSettings,
    /// `POST /integrations/linear/install`: begins the app's installation.
    LinearInstall,
    /// `GET /integrations/linear/callback` (Linear's redirect; bound by its one-time state).
    LinearCallback,
    /// Child sessions: made and acted on by the parent's sandbox; listed for people.
    Children {
        id: String,
        op: ChildOp,
    },
    /// "Try N ways" (people): `POST /sessions/:id/attempts` starts them,
    /// `POST /sessions/:id/attempts/choose` uses one (its PR) and stops the others.
    Attempts {
        id: String,
        choose: bool,
    },
    /// `GET|POST /automations`, `GET|PUT|DELETE /automations/:id`, its actions and runs.
    Automations {
        op: AutomationOp,
    },
    /// `POST /webhooks/automation/:id`: an inbound webhook (the automation's own key).
    AutomationWebhook {
        id: String,
    },
    /// `POST /webhooks/sentry/:id`: a Sentry integration's delivery for an automation.
    SentryWebhook {
        id: String,
    },
    /// `GET /auth/identities`: the caller's sign-in identity and those linked to it.
    Identities,
    /// `POST /auth/identities/link`: links the identity a one-time code was sent to.
    LinkIdentity,
    /// `DELETE /auth/identities/:identity`: unlinks one of the caller's identities.
    UnlinkIdentity {
        identity: String,
    },
    /// `GET /people`: everyone who signed in, with their roles (admins).
    People,
    /// `PUT /people/:userId/role` (admins).
    SetRole {
        user_id: String,
    },
    /// `POST /webhooks/slack/commands`: the `/inspect` slash command (Slack-signed).
    SlackCommands,
    /// `GET /usage`: what sessions used, grouped (everyone's for an admin, else one's own).
    Usage,
    /// `GET|PUT|DELETE /budgets`: monthly budgets (set by admins).
    Budgets,
    /// `GET /inbox`: the caller's inbox.
    Inbox,
    /// `POST /inbox/read`: marks the caller's items read.
    InboxRead,
    /// `GET /inbox/socket`: the caller's live inbox (WebSocket).
    InboxSocket,
    /// `GET|PUT /notifications/preferences`: where the caller is told of each kind.
    NotificationPrefs,
    /// `GET /notifications/push-key`: the VAPID public key browsers subscribe with.
    PushKey,
    /// `POST|DELETE /notifications/push-subscriptions`: the caller's browsers for Web Push.
    PushSubscriptions,
    /// A route served by the session's Durable Object; `action` is the object's path.
    Session {
        id: String,
        action: SessionAction,
    },
}

/// Which of the two Workers serves a route. The session Worker is the front door: it
/// serves a session's own traffic (its object's routes, the sockets, the sandbox's calls,
/// attachments and pictures) and the web app, and hands every other route to the control
/// plane Worker over its service binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Session,
    Plane,
}

impl Route {
    /// Which Worker serves this route.
    pub fn served_by(&self) -> Served {
        match self {
            // A sandbox's git credentials are GitHub App tokens: the control plane mints them.
            Route::Session {
                action: SessionAction::ScmCredentials,
                ..
            } => Served::Plane,
            Route::Session { .. }
            | Route::AttachmentUpload { .. }
            | Route::AttachmentDownload { .. }
            | Route::ReportMedia { .. }
            | Route::Media { .. }
            | Route::PortLink { .. }
            | Route::CloseTerminal { .. } => Served::Session,
            _ => Served::Plane,
        }
    }

    /// What an admin-only route changes (for the member's 403), or `None` when any signed-in
    /// person may call it. Automations are a member's own: changing another person's is
    /// checked where the automation is read.
    pub fn admin_only(&self, method: &str) -> Option<&'static str> {
        let write = method != "GET";
        match self {
            Route::RegisterRepo | Route::RemoveRepo { .. } => Some("the repository registry"),
            Route::RepoSettings { write: true, .. } => Some("a repository's settings"),
            Route::CreateEnvironment
            | Route::UpdateEnvironment { .. }
            | Route::DeleteEnvironment { .. } => Some("environments"),
            Route::Secrets {
                op: SecretOp::Set | SecretOp::Delete { .. },
                ..
            } => Some("secrets"),
            Route::Skills { .. } if write => Some("managed skills"),
            Route::McpServers { .. } if write => Some("MCP servers"),
            Route::SaveModelSettings => Some("the models offered"),
            Route::ModelGrants { .. } if write => Some("model grants"),
            Route::SlackSettings { write: true } => Some("the Slack integration"),
            Route::LinearSettings | Route::LinearInstall => Some("the Linear integration"),
            Route::BuildImage | Route::ImageSchedule => Some("prebuilt images"),
            Route::People | Route::SetRole { .. } => Some("people's roles"),
            Route::Budgets if write => Some("budgets"),
            _ => None,
        }
    }

    /// Routes a session's sandbox calls with its own credentials (bearer token and
    /// `X-Sandbox-ID`, checked by the session's object), not a person's: the tunnel URLs
    /// are asked by either, and by the sandbox when it names itself.
    pub fn is_sandbox_call(&self, names_a_sandbox: bool) -> bool {
        match self {
            Route::Session { action, .. } => {
                matches!(
                    action,
                    SessionAction::Socket
                        | SessionAction::ScmCredentials
                        | SessionAction::PullRequests
                        | SessionAction::Reviews
                        | SessionAction::ReportChanges
                        | SessionAction::Skills
                        | SessionAction::ModelToken
                ) || (*action == SessionAction::TunnelUrls && names_a_sandbox)
            }
            Route::AttachmentDownload { .. } | Route::ReportMedia { .. } => true,
            Route::Children { op, .. } => !matches!(op, ChildOp::List),
            _ => false,
        }
    }

    /// The session a route addresses (its Durable Object), if any.
    pub fn session_id(&self) -> Option<&str> {
        match self {
            Route::AttachmentUpload { id }
            | Route::AttachmentDownload { id, .. }
            | Route::CloseTerminal { id, .. }
            | Route::PortLink { id, .. }
            | Route::ReportMedia { id }
            | Route::Media { id, .. }
            | Route::Children { id, .. }
            | Route::Attempts { id, .. }
            | Route::Session { id, .. } => Some(id),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AutomationOp {
    List,
    Create,
    /// `GET /automations/schedule-preview?cron=…&timezone=…`.
    Preview,
    Get {
        id: String,
    },
    Update {
        id: String,
    },
    Delete {
        id: String,
    },
    Trigger {
        id: String,
    },
    Pause {
        id: String,
    },
    Resume {
        id: String,
    },
    RotateKey {
        id: String,
    },
    Runs {
        id: String,
    },
}

impl AutomationOp {
    /// The automation this operation changes, if it changes one (its owner or an admin
    /// may).
    pub fn changes(&self) -> Option<&str> {
        match self {
            AutomationOp::Update { id }
            | AutomationOp::Delete { id }
            | AutomationOp::Trigger { id }
            | AutomationOp::Pause { id }
            | AutomationOp::Resume { id }
            | AutomationOp::RotateKey { id } => Some(id),
            AutomationOp::List
            | AutomationOp::Create
            | AutomationOp::Preview
            | AutomationOp::Get { .. }
            | AutomationOp::Runs { .. } => None,
        }
    }
}

/// Automation ids are ours (`auto_` + hex), but arrive from outside: short and plain.
fn valid_automation_id(id: &str) -> bool {
    valid_session_id(id)
}

fn automations(method: &str, rest: &[&str]) -> Result<Route, ApiError> {
    let op = |op: AutomationOp| Ok(Route::Automations { op });
    match rest {
        [] => match method {
            "GET" => op(AutomationOp::List),
            "POST" => op(AutomationOp::Create),
            _ => Err(not_allowed(method, &["GET", "POST"])),
        },
        ["schedule-preview"] => only(
            method,
            &["GET"],
            Route::Automations {
                op: AutomationOp::Preview,
            },
        ),
        [id, ..] if !valid_automation_id(id) => {
            Err(ApiError::not_found(format!("no automation {id}")))
        }
        [id] => {
            let id = (*id).to_owned();
            match method {
                "GET" => op(AutomationOp::Get { id }),
                "PUT" => op(AutomationOp::Update { id }),
                "DELETE" => op(AutomationOp::Delete { id }),
                _ => Err(not_allowed(method, &["GET", "PUT", "DELETE"])),
            }
        }
        [id, "runs"] => only(
            method,
            &["GET"],
            Route::Automations {
                op: AutomationOp::Runs {
                    id: (*id).to_owned(),
                },
            },
        ),
        [id, action] => {
            let id = (*id).to_owned();
            let op = match *action {
                "trigger" => AutomationOp::Trigger { id },
                "pause" => AutomationOp::Pause { id },
                "resume" => AutomationOp::Resume { id },
                "rotate-key" => AutomationOp::RotateKey { id },
                _ => {
                    return Err(ApiError::not_found(format!(
                        "no automation action {action}"
                    )))
                }
            };
            only(method, &["POST"], Route::Automations { op })
        }
        _ => Err(ApiError::not_found("no such automation route")),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildOp {
    Spawn,
    List,
    Status { child: String },
    Prompt { child: String },
    Cancel { child: String },
}

/// Which secrets a `…/secrets` route is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretScope {
    Global,
    Repository { owner: String, name: String },
    Environment { id: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretOp {
    List,
    Set,
    Delete { key: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAction {
    Get,
    Delete,
    Prompt,
    Stop,
    Archive,
    Unarchive,
    Title,
    WsToken,
    Events,
    Messages,
    Artifacts,
    Participants,
    TunnelUrls,
    ScmCredentials,
    PullRequests,
    /// The agent's review of the pull request its prompt came from.
    Reviews,
    /// A session's terminals: listed (`GET`), one opened (`POST`).
    Terminals,
    OpenTerminal,
    /// A person's link to the sandbox's editor (`POST`), and the link opened in their
    /// browser (`GET …/editor/open`), which leads on to the editor.
    Editor,
    OpenEditor,
    /// A person's link to the sandbox's desktop, to watch or with control (`POST`), and the
    /// link opened in their browser (`GET …/desktop/open`), which leads on to noVNC.
    Desktop,
    OpenDesktop,
    /// A person asks for one more port of the running sandbox.
    OpenPort,
    /// The sandbox fetches the skill revisions its session pinned (its own credentials).
    Skills,
    /// `POST /sessions/:id/model-token`: the sandbox's short-lived token of a brokered grant.
    ModelToken,
    /// The workspace's change: read by people (`GET`), reported by the sandbox (`PUT`).
    Changes,
    ReportChanges,
    Socket,
}

impl SessionAction {
    /// The path the Durable Object serves this action on.
    pub fn object_path(self) -> &'static str {
        match self {
            SessionAction::Get | SessionAction::Delete => "/",
            SessionAction::Prompt => "/prompt",
            SessionAction::Stop => "/stop",
            SessionAction::Archive => "/archive",
            SessionAction::Unarchive => "/unarchive",
            SessionAction::Title => "/title",
            SessionAction::WsToken => "/ws-token",
            SessionAction::Events => "/events",
            SessionAction::Messages => "/messages",
            SessionAction::Artifacts => "/artifacts",
            SessionAction::Participants => "/participants",
            SessionAction::TunnelUrls => "/tunnel-urls",
            SessionAction::ScmCredentials => "/scm-credentials",
            SessionAction::PullRequests => "/pull-requests",
            SessionAction::Reviews => "/reviews",
            SessionAction::Terminals | SessionAction::OpenTerminal => "/terminals",
            SessionAction::Editor => "/editor",
            SessionAction::OpenEditor => "/editor/open",
            SessionAction::Desktop => "/desktop",
            SessionAction::OpenDesktop => "/desktop/open",
            SessionAction::OpenPort => "/ports",
            SessionAction::Skills => "/sandbox-skills",
            SessionAction::ModelToken => "/sandbox-model-token",
            SessionAction::Changes | SessionAction::ReportChanges => "/changes",
            SessionAction::Socket => "/ws",
        }
    }
}

/// Routes a browser opens as a page (a link followed, a redirect from a provider), which
/// are answered by the API rather than by the web client's page.
pub fn is_page_route(path: &str) -> bool {
    if path.starts_with("/auth/") {
        return true;
    }
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    matches!(
        parts.as_slice(),
        ["sessions", _, "editor" | "desktop", "open"]
    )
}

/// Session ids are ours (hex), but any id arrives from outside: keep them short and plain.
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Matches a method and path against the Worker's routes. `None` means no API route:
/// the caller may still serve a static asset.
pub fn match_route(method: &str, path: &str) -> Option<Result<Route, ApiError>> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let route = match segments.as_slice() {
        ["health"] => only(method, &["GET"], Route::Health),
        ["repos"] => match method {
            "GET" => Ok(Route::ListRepos),
            "POST" => Ok(Route::RegisterRepo),
            _ => Err(not_allowed(method, &["GET", "POST"])),
        },
        ["auth", "me"] => only(method, &["GET"], Route::Me),
        ["auth", "identities"] => only(method, &["GET"], Route::Identities),
        ["auth", "identities", "link"] => only(method, &["POST"], Route::LinkIdentity),
        ["auth", "identities", identity] => only(
            method,
            &["DELETE"],
            Route::UnlinkIdentity {
                identity: (*identity).to_owned(),
            },
        ),
        ["people"] => only(method, &["GET"], Route::People),
        ["usage"] => only(method, &["GET"], Route::Usage),
        ["inbox"] => only(method, &["GET"], Route::Inbox),
        ["inbox", "read"] => only(method, &["POST"], Route::InboxRead),
        ["inbox", "socket"] => only(method, &["GET"], Route::InboxSocket),
        ["notifications", "preferences"] => only(method, &["GET", "PUT"], Route::NotificationPrefs),
        ["notifications", "push-key"] => only(method, &["GET"], Route::PushKey),
        ["notifications", "push-subscriptions"] => {
            only(method, &["POST", "DELETE"], Route::PushSubscriptions)
        }
        ["budgets"] => match method {
            "GET" | "PUT" | "DELETE" => Ok(Route::Budgets),
            _ => Err(not_allowed(method, &["GET", "PUT", "DELETE"])),
        },
        ["people", user_id, "role"] => only(
            method,
            &["PUT"],
            Route::SetRole {
                user_id: (*user_id).to_owned(),
            },
        ),
        ["webhooks", "github"] => only(method, &["POST"], Route::GitHubWebhook),
        ["webhooks", "automation", id] => only(
            method,
            &["POST"],
            Route::AutomationWebhook {
                id: (*id).to_owned(),
            },
        ),
        ["webhooks", "sentry", id] => only(
            method,
            &["POST"],
            Route::SentryWebhook {
                id: (*id).to_owned(),
            },
        ),
        ["automations", rest @ ..] => return Some(automations(method, rest)),
        ["models"] => only(method, &["GET"], Route::Models),
        ["skill-profiles"] => only(method, &["GET"], Route::SkillProfiles { name: None }),
        ["skill-profiles", name] => match method {
            "PUT" | "DELETE" => Ok(Route::SkillProfiles {
                name: Some((*name).to_owned()),
            }),
            _ => Err(not_allowed(method, &["PUT", "DELETE"])),
        },
        ["model-grants"] => match method {
            "GET" | "PUT" => Ok(Route::ModelGrants { id: None }),
            _ => Err(not_allowed(method, &["GET", "PUT"])),
        },
        ["model-grants", id] => only(
            method,
            &["DELETE"],
            Route::ModelGrants {
                id: Some((*id).to_owned()),
            },
        ),
        ["mcp-servers"] => match method {
            "GET" | "POST" => Ok(Route::McpServers { name: None }),
            _ => Err(not_allowed(method, &["GET", "POST"])),
        },
        ["mcp-servers", name] => match method {
            "GET" | "PUT" | "DELETE" => Ok(Route::McpServers {
                name: Some((*name).to_owned()),
            }),
            _ => Err(not_allowed(method, &["GET", "PUT", "DELETE"])),
        },
        ["skills"] => match method {
            "GET" | "POST" => Ok(Route::Skills { name: None }),
            _ => Err(not_allowed(method, &["GET", "POST"])),
        },
        ["skills", name] => match method {
            "GET" | "PUT" | "DELETE" => Ok(Route::Skills {
                name: Some((*name).to_owned()),
            }),
            _ => Err(not_allowed(method, &["GET", "PUT", "DELETE"])),
        },
        ["settings", "models"] => only(method, &["PUT"], Route::SaveModelSettings),
        ["images"] => only(method, &["GET"], Route::ListImages),
        ["images", "builds"] => only(method, &["POST"], Route::BuildImage),
        ["images", "schedule"] => only(method, &["PUT"], Route::ImageSchedule),
        ["images", "builds", id, "complete"] => only(
            method,
            &["POST"],
            Route::ImageBuildReport {
                id: (*id).to_owned(),
            },
        ),
        ["repos", owner, name, "branches"] => only(
            method,
            &["GET"],
            Route::RepoBranches {
                owner: (*owner).to_owned(),
                name: (*name).to_owned(),
            },
        ),
        ["repos", owner, name, "settings"] => match method {
            "GET" | "PUT" => Ok(Route::RepoSettings {
                owner: (*owner).to_owned(),
                name: (*name).to_owned(),
                write: method == "PUT",
            }),
            _ => Err(not_allowed(method, &["GET", "PUT"])),
        },
        ["auth", "github"] => only(method, &["GET"], Route::SignIn),
        ["auth", "github", "callback"] => only(method, &["GET"], Route::SignInCallback),
        ["auth", "google"] => only(method, &["GET"], Route::SignInGoogle),
        ["auth", "google", "callback"] => only(method, &["GET"], Route::SignInGoogleCallback),
        ["auth", "providers"] => only(method, &["GET"], Route::SignInProviders),
        ["auth", "logout"] => only(method, &["POST"], Route::SignOut),
        ["tokens"] => match method {
            "GET" => Ok(Route::ListTokens),
            "POST" => Ok(Route::CreateToken),
            _ => Err(not_allowed(method, &["GET", "POST"])),
        },
        ["tokens", id] => only(
            method,
            &["DELETE"],
            Route::RevokeToken {
                id: (*id).to_owned(),
            },
        ),
        ["environments"] => match method {
            "GET" => Ok(Route::ListEnvironments),
            "POST" => Ok(Route::CreateEnvironment),
            _ => Err(not_allowed(method, &["GET", "POST"])),
        },
        ["environments", id] => match method {
            "GET" => Ok(Route::GetEnvironment {
                id: (*id).to_owned(),
            }),
            "DELETE" => Ok(Route::DeleteEnvironment {
                id: (*id).to_owned(),
            }),
            "PUT" => Ok(Route::UpdateEnvironment {
                id: (*id).to_owned(),
            }),
            _ => Err(not_allowed(method, &["GET", "PUT", "DELETE"])),
        },
        ["secrets", rest @ ..] => return secrets(method, SecretScope::Global, rest),
        ["repos", owner, name, "secrets", rest @ ..] => {
            return secrets(
                method,
                SecretScope::Repository {
                    owner: (*owner).to_owned(),
                    name: (*name).to_owned(),
                },
                rest,
            )
        }
        ["environments", id, "secrets", rest @ ..] => {
            return secrets(
                method,
                SecretScope::Environment {
                    id: (*id).to_owned(),
                },
                rest,
            )
        }
        ["repos", owner, name] => only(
            method,
            &["DELETE"],
            Route::RemoveRepo {
                owner: (*owner).to_owned(),
                name: (*name).to_owned(),
            },
        ),
        ["sessions"] => match method {
            "POST" => Ok(Route::CreateSession),
            "GET" => Ok(Route::ListSessions),
            _ => Err(not_allowed(method, &["GET", "POST"])),
        },
        ["webhooks", "slack", "events"] => only(method, &["POST"], Route::SlackEvents),
        ["webhooks", "slack", "interactions"] => only(method, &["POST"], Route::SlackInteractions),
        ["webhooks", "slack", "commands"] => only(method, &["POST"], Route::SlackCommands),
        ["webhooks", "linear"] => only(method, &["POST"], Route::LinearWebhook),
        ["integrations", "linear"] => only(method, &["GET"], Route::LinearStatus),
        ["integrations", "linear", "settings"] => only(method, &["PUT"], Route::LinearSettings),
        ["integrations", "linear", "install"] => only(method, &["POST"], Route::LinearInstall),
        ["integrations", "linear", "callback"] => only(method, &["GET"], Route::LinearCallback),
        ["integrations", "slack", "settings"] => match method {
            "GET" | "PUT" => Ok(Route::SlackSettings {
                write: method == "PUT",
            }),
            _ => Err(not_allowed(method, &["GET", "PUT"])),
        },
        ["sessions", id, "attachments"] if valid_session_id(id) => only(
            method,
            &["POST"],
            Route::AttachmentUpload {
                id: (*id).to_owned(),
            },
        ),
        ["sessions", id, "attachments", attachment] if valid_session_id(id) => only(
            method,
            &["GET"],
            Route::AttachmentDownload {
                id: (*id).to_owned(),
                attachment: (*attachment).to_owned(),
            },
        ),
        ["sessions", id, "attempts", rest @ ..] => {
            if !valid_session_id(id) {
                return Some(Err(ApiError::not_found("session not found")));
            }
            let choose = match rest {
                [] => false,
                ["choose"] => true,
                _ => return None,
            };
            only(
                method,
                &["POST"],
                Route::Attempts {
                    id: (*id).to_owned(),
                    choose,
                },
            )
        }
        ["sessions", id, "children", rest @ ..] => {
            if !valid_session_id(id) {
                return Some(Err(ApiError::not_found("session not found")));
            }
            let op = match (rest, method) {
                ([], "POST") => Ok(ChildOp::Spawn),
                ([], "GET") => Ok(ChildOp::List),
                ([], _) => Err(not_allowed(method, &["GET", "POST"])),
                ([child], "GET") => Ok(ChildOp::Status {
                    child: (*child).to_owned(),
                }),
                ([_], _) => Err(not_allowed(method, &["GET"])),
                ([child, "prompt"], "POST") => Ok(ChildOp::Prompt {
                    child: (*child).to_owned(),
                }),
                ([child, "cancel"], "POST") => Ok(ChildOp::Cancel {
                    child: (*child).to_owned(),
                }),
                ([_, "prompt" | "cancel"], _) => Err(not_allowed(method, &["POST"])),
                _ => return None,
            };
            op.map(|op| Route::Children {
                id: (*id).to_owned(),
                op,
            })
        }
        ["sessions", id, rest @ ..] => {
            if !valid_session_id(id) {
                return Some(Err(ApiError::not_found("session not found")));
            }
            let action = match (rest, method) {
                ([], "GET") => Ok(SessionAction::Get),
                ([], "DELETE") => Ok(SessionAction::Delete),
                ([], _) => Err(not_allowed(method, &["GET", "DELETE"])),
                (["prompt"], "POST") => Ok(SessionAction::Prompt),
                (["stop"], "POST") => Ok(SessionAction::Stop),
                (["archive"], "POST") => Ok(SessionAction::Archive),
                (["unarchive"], "POST") => Ok(SessionAction::Unarchive),
                (["ws-token"], "POST") => Ok(SessionAction::WsToken),
                (["scm-credentials"], "POST") => Ok(SessionAction::ScmCredentials),
                (["pull-requests"], "POST") => Ok(SessionAction::PullRequests),
                (["reviews"], "POST") => Ok(SessionAction::Reviews),
                (
                    ["prompt" | "stop" | "archive" | "unarchive" | "ws-token" | "scm-credentials"
                    | "pull-requests" | "reviews"],
                    _,
                ) => Err(not_allowed(method, &["POST"])),
                (["changes"], "GET") => Ok(SessionAction::Changes),
                (["changes"], "PUT") => Ok(SessionAction::ReportChanges),
                (["changes"], _) => Err(not_allowed(method, &["GET", "PUT"])),
                (["ports"], "POST") => Ok(SessionAction::OpenPort),
                (["ports"], _) => Err(not_allowed(method, &["POST"])),
                (["editor"], "POST") => Ok(SessionAction::Editor),
                (["editor"], _) => Err(not_allowed(method, &["POST"])),
                (["editor", "open"], "GET") => Ok(SessionAction::OpenEditor),
                (["editor", "open"], _) => Err(not_allowed(method, &["GET"])),
                (["desktop"], "POST") => Ok(SessionAction::Desktop),
                (["desktop"], _) => Err(not_allowed(method, &["POST"])),
                (["desktop", "open"], "GET") => Ok(SessionAction::OpenDesktop),
                (["desktop", "open"], _) => Err(not_allowed(method, &["GET"])),
                (["terminals"], "GET") => Ok(SessionAction::Terminals),
                (["terminals"], "POST") => Ok(SessionAction::OpenTerminal),
                (["terminals"], _) => Err(not_allowed(method, &["GET", "POST"])),
                (["terminals", terminal], "DELETE") => {
                    if !valid_session_id(terminal) {
                        return Some(Err(ApiError::not_found("no such terminal")));
                    }
                    return Some(Ok(Route::CloseTerminal {
                        id: (*id).to_owned(),
                        terminal: (*terminal).to_owned(),
                    }));
                }
                (["terminals", _], _) => Err(not_allowed(method, &["DELETE"])),
                (["ports", port, "link"], "POST") => {
                    return Some(match port.parse::<u16>() {
                        Ok(port) if port > 0 => Ok(Route::PortLink {
                            id: (*id).to_owned(),
                            port,
                        }),
                        _ => Err(ApiError::bad_request(format!("{port:?} is not a port"))),
                    });
                }
                (["ports", _, "link"], _) => Err(not_allowed(method, &["POST"])),
                (["media"], "POST") => {
                    return Some(Ok(Route::ReportMedia {
                        id: (*id).to_owned(),
                    }))
                }
                (["media"], _) => Err(not_allowed(method, &["POST"])),
                (["media", attachment], "GET") => {
                    if !valid_session_id(attachment) {
                        return Some(Err(ApiError::not_found("no such picture")));
                    }
                    return Some(Ok(Route::Media {
                        id: (*id).to_owned(),
                        attachment: (*attachment).to_owned(),
                    }));
                }
                (["media", _], _) => Err(not_allowed(method, &["GET"])),
                (["title"], "PATCH") => Ok(SessionAction::Title),
                (["title"], _) => Err(not_allowed(method, &["PATCH"])),
                (["events"], "GET") => Ok(SessionAction::Events),
                (["messages"], "GET") => Ok(SessionAction::Messages),
                (["artifacts"], "GET") => Ok(SessionAction::Artifacts),
                (["participants"], "GET") => Ok(SessionAction::Participants),
                (["tunnel-urls"], "GET") => Ok(SessionAction::TunnelUrls),
                (["skills"], "GET") => Ok(SessionAction::Skills),
                (["model-token"], "POST") => Ok(SessionAction::ModelToken),
                (["model-token"], _) => Err(not_allowed(method, &["POST"])),
                (["ws"], "GET") => Ok(SessionAction::Socket),
                (
                    ["events" | "messages" | "artifacts" | "participants" | "tunnel-urls" | "skills"
                    | "ws"],
                    _,
                ) => Err(not_allowed(method, &["GET"])),
                _ => return None,
            };
            action.map(|action| Route::Session {
                id: (*id).to_owned(),
                action,
            })
        }
        _ => return None,
    };
    Some(route)
}

fn secrets(method: &str, scope: SecretScope, rest: &[&str]) -> Option<Result<Route, ApiError>> {
    let op = match (rest, method) {
        ([], "GET") => Ok(SecretOp::List),
        ([], "PUT") => Ok(SecretOp::Set),
        ([], _) => Err(not_allowed(method, &["GET", "PUT"])),
        ([key], "DELETE") => Ok(SecretOp::Delete {
            key: (*key).to_owned(),
        }),
        ([_], _) => Err(not_allowed(method, &["DELETE"])),
        _ => return None,
    };
    Some(op.map(|op| Route::Secrets { scope, op }))
}

fn not_allowed(method: &str, allowed: &[&str]) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("{method} is not served here; use {}", allowed.join(" or ")),
    )
}

fn only(method: &str, allowed: &[&str], route: Route) -> Result<Route, ApiError> {
    if allowed.contains(&method) {
        Ok(route)
    } else {
        Err(not_allowed(method, allowed))
    }
}

/// The error for a path that is neither a route nor an asset.
pub fn not_found(method: &str, path: &str) -> ApiError {
    ApiError::not_found(format!("no route for {method} {path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_is_get_only() {
        assert_eq!(match_route("GET", "/health"), Some(Ok(Route::Health)));
        assert_eq!(match_route("GET", "/health/"), Some(Ok(Route::Health)));
        let err = match_route("POST", "/health").unwrap().unwrap_err();
        assert_eq!(err.code, ErrorCode::MethodNotAllowed);
    }

    #[test]
    fn what_the_deployment_shares_is_changed_by_admins_only() {
        let admin = |m: &str, p: &str| match_route(m, p).unwrap().unwrap().admin_only(m);
        for (m, p) in [
            ("POST", "/repos"),
            ("DELETE", "/repos/acme/web"),
            ("PUT", "/repos/acme/web/settings"),
            ("POST", "/environments"),
            ("PUT", "/environments/env1"),
            ("DELETE", "/environments/env1"),
            ("PUT", "/secrets"),
            ("DELETE", "/repos/acme/web/secrets/TOKEN"),
            ("PUT", "/environments/env1/secrets"),
            ("POST", "/skills"),
            ("PUT", "/skills/review"),
            ("DELETE", "/skills/review"),
            ("POST", "/mcp-servers"),
            ("DELETE", "/mcp-servers/docs"),
            ("PUT", "/settings/models"),
            ("PUT", "/model-grants"),
            ("DELETE", "/model-grants/g1"),
            ("PUT", "/integrations/slack/settings"),
            ("PUT", "/integrations/linear/settings"),
            ("POST", "/integrations/linear/install"),
            ("POST", "/images/builds"),
            ("PUT", "/images/schedule"),
            ("GET", "/people"),
            ("PUT", "/people/github:1/role"),
            ("PUT", "/budgets"),
            ("DELETE", "/budgets"),
        ] {
            assert!(admin(m, p).is_some(), "{m} {p} is an admin's");
        }
        for (m, p) in [
            ("GET", "/repos"),
            ("GET", "/repos/acme/web/settings"),
            ("GET", "/environments"),
            ("GET", "/secrets"),
            ("GET", "/skills"),
            ("GET", "/mcp-servers"),
            ("GET", "/models"),
            ("GET", "/model-grants"),
            ("GET", "/integrations/slack/settings"),
            ("GET", "/integrations/linear"),
            ("POST", "/sessions"),
            ("GET", "/sessions"),
            ("POST", "/tokens"),
            ("DELETE", "/tokens/t1"),
            ("PUT", "/skill-profiles/mine"),
            ("POST", "/automations"),
            ("PUT", "/automations/auto_1"),
            ("GET", "/auth/identities"),
            ("POST", "/auth/identities/link"),
            ("DELETE", "/auth/identities/slack:U1"),
            ("GET", "/budgets"),
            ("GET", "/usage"),
        ] {
            assert_eq!(admin(m, p), None, "{m} {p} is any person's");
        }
    }

    #[test]
    fn a_session_s_own_traffic_stays_in_the_session_worker() {
        let served = |m: &str, p: &str| match_route(m, p).unwrap().unwrap().served_by();
        for (m, p) in [
            ("GET", "/sessions/abc/ws"),
            ("POST", "/sessions/abc/prompt"),
            ("GET", "/sessions/abc/events"),
            ("POST", "/sessions/abc/media"),
            ("POST", "/sessions/abc/attachments"),
            ("DELETE", "/sessions/abc"),
        ] {
            assert_eq!(served(m, p), Served::Session, "{m} {p}");
        }
        for (m, p) in [
            ("GET", "/health"),
            ("POST", "/sessions"),
            ("GET", "/sessions"),
            ("POST", "/sessions/abc/children"),
            ("POST", "/sessions/abc/scm-credentials"),
            ("POST", "/webhooks/slack/events"),
            ("GET", "/auth/me"),
            ("GET", "/automations"),
            ("GET", "/models"),
        ] {
            assert_eq!(served(m, p), Served::Plane, "{m} {p}");
        }
    }

    #[test]
    fn sandbox_calls_are_told_from_peoples() {
        let route = |m: &str, p: &str| match_route(m, p).unwrap().unwrap();
        assert!(route("POST", "/sessions/abc/scm-credentials").is_sandbox_call(false));
        assert!(route("GET", "/sessions/abc/ws").is_sandbox_call(false));
        assert!(route("POST", "/sessions/abc/children").is_sandbox_call(false));
        assert_eq!(
            route("POST", "/sessions/abc/attempts"),
            Route::Attempts {
                id: "abc".into(),
                choose: false
            }
        );
        assert!(!route("POST", "/sessions/abc/attempts/choose").is_sandbox_call(false));
        assert_eq!(
            route("POST", "/sessions/abc/attempts/choose").served_by(),
            Served::Plane
        );
        assert_eq!(
            match_route("GET", "/sessions/abc/attempts").map(|r| r.is_err()),
            Some(true)
        );
        assert_eq!(match_route("POST", "/sessions/abc/attempts/x"), None);
        assert!(!route("GET", "/sessions/abc/children").is_sandbox_call(false));
        assert!(route("GET", "/sessions/abc/tunnel-urls").is_sandbox_call(true));
        assert!(!route("GET", "/sessions/abc/tunnel-urls").is_sandbox_call(false));
        assert!(!route("POST", "/sessions/abc/prompt").is_sandbox_call(true));
        assert!(!route("GET", "/sessions").is_sandbox_call(true));
    }

    #[test]
    fn the_editor_link_is_a_person_s_and_opens_as_a_page() {
        let action = |m: &str, p: &str| match match_route(m, p) {
            Some(Ok(Route::Session { action, .. })) => Some(action),
            _ => None,
        };
        assert_eq!(
            action("POST", "/sessions/abc/editor"),
            Some(SessionAction::Editor)
        );
        assert_eq!(
            action("GET", "/sessions/abc/editor/open"),
            Some(SessionAction::OpenEditor)
        );
        let err = match_route("GET", "/sessions/abc/editor")
            .unwrap()
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::MethodNotAllowed);
        assert!(!match_route("POST", "/sessions/abc/editor")
            .unwrap()
            .unwrap()
            .is_sandbox_call(true));
        assert!(is_page_route("/sessions/abc/editor/open"));
        assert!(is_page_route("/auth/github/callback"));
        assert!(!is_page_route("/sessions/abc"));
        assert!(!is_page_route("/sessions/abc/editor"));
        assert_eq!(
            action("POST", "/sessions/abc/desktop"),
            Some(SessionAction::Desktop)
        );
        assert_eq!(
            action("GET", "/sessions/abc/desktop/open"),
            Some(SessionAction::OpenDesktop)
        );
        assert!(is_page_route("/sessions/abc/desktop/open"));
        assert!(!is_page_route("/sessions/abc/desktop"));
        assert!(!match_route("POST", "/sessions/abc/desktop")
            .unwrap()
            .unwrap()
            .is_sandbox_call(true));
        assert_eq!(
            action("POST", "/sessions/abc/ports"),
            Some(SessionAction::OpenPort)
        );
    }

    #[test]
    fn automation_routes() {
        let op = |m: &str, p: &str| match match_route(m, p) {
            Some(Ok(Route::Automations { op })) => Some(op),
            _ => None,
        };
        assert_eq!(op("GET", "/automations"), Some(AutomationOp::List));
        assert_eq!(op("POST", "/automations"), Some(AutomationOp::Create));
        assert_eq!(
            op("GET", "/automations/schedule-preview"),
            Some(AutomationOp::Preview)
        );
        assert_eq!(
            op("PUT", "/automations/auto_1"),
            Some(AutomationOp::Update {
                id: "auto_1".into()
            })
        );
        assert_eq!(
            op("POST", "/automations/auto_1/trigger"),
            Some(AutomationOp::Trigger {
                id: "auto_1".into()
            })
        );
        assert_eq!(
            op("GET", "/automations/auto_1/runs"),
            Some(AutomationOp::Runs {
                id: "auto_1".into()
            })
        );
        assert!(matches!(
            match_route("GET", "/automations/auto_1/trigger"),
            Some(Err(_))
        ));
        assert!(matches!(
            match_route("POST", "/automations/auto_1/explode"),
            Some(Err(_))
        ));
        assert!(matches!(
            match_route("GET", "/automations/a.b"),
            Some(Err(_))
        ));
        assert_eq!(
            match_route("POST", "/webhooks/automation/auto_1"),
            Some(Ok(Route::AutomationWebhook {
                id: "auto_1".into()
            }))
        );
        assert!(!route_is_sandbox("POST", "/automations/auto_1/trigger"));
    }

    fn route_is_sandbox(m: &str, p: &str) -> bool {
        match_route(m, p).unwrap().unwrap().is_sandbox_call(true)
    }

    #[test]
    fn settings_routes() {
        assert_eq!(
            match_route("PUT", "/repos/acme/web/secrets"),
            Some(Ok(Route::Secrets {
                scope: SecretScope::Repository {
                    owner: "acme".into(),
                    name: "web".into()
                },
                op: SecretOp::Set
            }))
        );
        assert_eq!(
            match_route("DELETE", "/secrets/API_KEY"),
            Some(Ok(Route::Secrets {
                scope: SecretScope::Global,
                op: SecretOp::Delete {
                    key: "API_KEY".into()
                }
            }))
        );
        assert_eq!(
            match_route("GET", "/environments/e1/secrets"),
            Some(Ok(Route::Secrets {
                scope: SecretScope::Environment { id: "e1".into() },
                op: SecretOp::List
            }))
        );
        assert!(match_route("POST", "/secrets").unwrap().is_err());
        assert_eq!(match_route("GET", "/models"), Some(Ok(Route::Models)));
        assert_eq!(
            match_route("PUT", "/settings/models"),
            Some(Ok(Route::SaveModelSettings))
        );
        assert!(match_route("POST", "/models").unwrap().is_err());
        assert_eq!(
            match_route("PUT", "/skills/deploy"),
            Some(Ok(Route::Skills {
                name: Some("deploy".into())
            }))
        );
        assert!(match_route("PATCH", "/skills").unwrap().is_err());
        assert!(match_route("GET", "/sessions/abc/skills")
            .unwrap()
            .unwrap()
            .is_sandbox_call(false));
        assert_eq!(match_route("GET", "/secrets/a/b"), None);
        assert_eq!(match_route("GET", "/auth/github"), Some(Ok(Route::SignIn)));
        assert_eq!(
            match_route("POST", "/webhooks/github"),
            Some(Ok(Route::GitHubWebhook))
        );
        assert!(match_route("GET", "/webhooks/github").unwrap().is_err());
        assert_eq!(
            match_route("PUT", "/repos/acme/web/settings"),
            Some(Ok(Route::RepoSettings {
                owner: "acme".into(),
                name: "web".into(),
                write: true
            }))
        );
        assert_eq!(
            match_route("POST", "/sessions/abc/pull-requests"),
            Some(Ok(Route::Session {
                id: "abc".into(),
                action: SessionAction::PullRequests
            }))
        );
        assert_eq!(
            match_route("DELETE", "/tokens/t1"),
            Some(Ok(Route::RevokeToken { id: "t1".into() }))
        );
        assert_eq!(
            match_route("POST", "/sessions/abc/scm-credentials"),
            Some(Ok(Route::Session {
                id: "abc".into(),
                action: SessionAction::ScmCredentials
            }))
        );
    }

    #[test]
    fn unknown_paths_are_not_routes() {
        assert_eq!(match_route("GET", "/nope"), None);
        assert_eq!(match_route("GET", "/"), None);
        assert_eq!(match_route("GET", "/sessions/abc/nope"), None);
        // The object's internal routes are never reached from outside.
        assert_eq!(match_route("POST", "/sessions/abc/pull-request"), None);
        assert_eq!(match_route("POST", "/sessions/abc/init"), None);
    }

    #[test]
    fn session_routes() {
        let s = |action| {
            Some(Ok(Route::Session {
                id: "abc".into(),
                action,
            }))
        };
        assert_eq!(match_route("GET", "/sessions/abc"), s(SessionAction::Get));
        assert_eq!(
            match_route("DELETE", "/sessions/abc"),
            s(SessionAction::Delete)
        );
        assert_eq!(
            match_route("POST", "/sessions/abc/prompt"),
            s(SessionAction::Prompt)
        );
        assert_eq!(
            match_route("PATCH", "/sessions/abc/title"),
            s(SessionAction::Title)
        );
        assert_eq!(
            match_route("POST", "/sessions/abc/ws-token"),
            s(SessionAction::WsToken)
        );
        assert_eq!(
            match_route("GET", "/sessions/abc/ws"),
            s(SessionAction::Socket)
        );
        assert_eq!(
            match_route("POST", "/sessions"),
            Some(Ok(Route::CreateSession))
        );
        assert_eq!(
            match_route("GET", "/sessions"),
            Some(Ok(Route::ListSessions))
        );
        let err = match_route("GET", "/sessions/abc/prompt")
            .unwrap()
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::MethodNotAllowed);
        let err = match_route("GET", "/sessions/a%2Fb").unwrap().unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound);
    }
}
