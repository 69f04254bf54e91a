//! `web/src/wire.ts` is generated from the wire types here, never written by hand. This
//! test regenerates it and fails when the committed file differs; to update it:
//!
//!     INSPECT_WRITE_WIRE_TS=1 cargo test -p inspect-protocol --features ts --test typescript

#![cfg(feature = "ts")]
#![allow(clippy::unwrap_used)] // a test fails loudly by design

use ts_rs::{Config, TS};

fn decl<T: TS>(cfg: &Config) -> String {
    format!("export {}", T::decl(cfg))
}

#[test]
fn wire_ts_is_generated_from_the_protocol() {
    // Integers travel as JSON numbers (ids and times stay below 2^53).
    let cfg = Config::default().with_large_int("number");
    let mut out = String::from(
        "// Generated from crates/protocol/ by `cargo test -p inspect-protocol --features ts --test typescript`\n\
         // (INSPECT_WRITE_WIRE_TS=1 writes it). Do not edit: change the Rust types instead.\n\n",
    );
    let decls = [
        decl::<serde_json::Value>(&cfg),
        decl::<inspect_protocol::auth::Me>(&cfg),
        decl::<inspect_protocol::people::Role>(&cfg),
        decl::<inspect_protocol::people::RoleSource>(&cfg),
        decl::<inspect_protocol::people::LinkRule>(&cfg),
        decl::<inspect_protocol::people::LinkedIdentity>(&cfg),
        decl::<inspect_protocol::people::Identities>(&cfg),
        decl::<inspect_protocol::people::LinkRequest>(&cfg),
        decl::<inspect_protocol::people::Person>(&cfg),
        decl::<inspect_protocol::people::People>(&cfg),
        decl::<inspect_protocol::people::SetRole>(&cfg),
        decl::<inspect_protocol::people::SignInProviders>(&cfg),
        decl::<inspect_protocol::budgets::BudgetMetric>(&cfg),
        decl::<inspect_protocol::budgets::BudgetScope>(&cfg),
        decl::<inspect_protocol::budgets::Budget>(&cfg),
        decl::<inspect_protocol::budgets::BudgetStatus>(&cfg),
        decl::<inspect_protocol::budgets::BudgetList>(&cfg),
        decl::<inspect_protocol::usage::UsageGroup>(&cfg),
        decl::<inspect_protocol::usage::UsageRow>(&cfg),
        decl::<inspect_protocol::usage::UsageReport>(&cfg),
        decl::<inspect_protocol::usage::SessionSource>(&cfg),
        decl::<inspect_protocol::inbox::InboxKind>(&cfg),
        decl::<inspect_protocol::inbox::InboxItem>(&cfg),
        decl::<inspect_protocol::inbox::InboxPage>(&cfg),
        decl::<inspect_protocol::inbox::MarkRead>(&cfg),
        decl::<inspect_protocol::inbox::MarkedRead>(&cfg),
        decl::<inspect_protocol::inbox::InboxMessage>(&cfg),
        decl::<inspect_protocol::inbox::Channels>(&cfg),
        decl::<inspect_protocol::inbox::NotificationPrefs>(&cfg),
        decl::<inspect_protocol::inbox::PushSubscription>(&cfg),
        decl::<inspect_protocol::inbox::PushKeys>(&cfg),
        decl::<inspect_protocol::inbox::PushKey>(&cfg),
        decl::<inspect_protocol::inbox::Notice>(&cfg),
        decl::<inspect_protocol::session::SessionUsage>(&cfg),
        decl::<inspect_protocol::auth::CreateApiToken>(&cfg),
        decl::<inspect_protocol::auth::CreatedApiToken>(&cfg),
        decl::<inspect_protocol::auth::ApiTokenSummary>(&cfg),
        decl::<inspect_protocol::auth::ApiTokenList>(&cfg),
        decl::<inspect_protocol::auth::SecretSummary>(&cfg),
        decl::<inspect_protocol::auth::SecretList>(&cfg),
        decl::<inspect_protocol::auth::SetSecrets>(&cfg),
        decl::<inspect_protocol::egress::EgressMode>(&cfg),
        decl::<inspect_protocol::egress::EgressPreset>(&cfg),
        decl::<inspect_protocol::egress::EgressRule>(&cfg),
        decl::<inspect_protocol::egress::EgressPolicy>(&cfg),
        decl::<inspect_protocol::auth::CreateEnvironment>(&cfg),
        decl::<inspect_protocol::auth::Environment>(&cfg),
        decl::<inspect_protocol::auth::EnvironmentList>(&cfg),
        decl::<inspect_protocol::auth::ScmCredentials>(&cfg),
        decl::<inspect_protocol::automations::TriggerType>(&cfg),
        decl::<inspect_protocol::automations::Schedule>(&cfg),
        decl::<inspect_protocol::automations::SentryResource>(&cfg),
        decl::<inspect_protocol::automations::SentrySettings>(&cfg),
        decl::<inspect_protocol::automations::TextMatch>(&cfg),
        decl::<inspect_protocol::changes::ChangeKind>(&cfg),
        decl::<inspect_protocol::skills::SkillFile>(&cfg),
        decl::<inspect_protocol::skills::SkillAssignment>(&cfg),
        decl::<inspect_protocol::skills::SkillRequest>(&cfg),
        decl::<inspect_protocol::skills::Skill>(&cfg),
        decl::<inspect_protocol::skills::SkillList>(&cfg),
        decl::<inspect_protocol::skills::SkillChoice>(&cfg),
        decl::<inspect_protocol::skills::SkillProfile>(&cfg),
        decl::<inspect_protocol::skills::SkillProfileRequest>(&cfg),
        decl::<inspect_protocol::skills::SkillProfiles>(&cfg),
        decl::<inspect_protocol::skills::PinnedSkill>(&cfg),
        decl::<inspect_protocol::skills::SkillBundle>(&cfg),
        decl::<inspect_protocol::skills::SkillBundles>(&cfg),
        decl::<inspect_protocol::mcp::McpTransport>(&cfg),
        decl::<inspect_protocol::mcp::McpServerRequest>(&cfg),
        decl::<inspect_protocol::mcp::McpServer>(&cfg),
        decl::<inspect_protocol::mcp::McpServerList>(&cfg),
        decl::<inspect_protocol::mcp::SessionMcpServer>(&cfg),
        decl::<inspect_protocol::models::ModelInfo>(&cfg),
        decl::<inspect_protocol::models::ModelProvider>(&cfg),
        decl::<inspect_protocol::models::ModelCatalog>(&cfg),
        decl::<inspect_protocol::models::ModelSettings>(&cfg),
        decl::<inspect_protocol::changes::PatchOmitted>(&cfg),
        decl::<inspect_protocol::changes::ChangedFile>(&cfg),
        decl::<inspect_protocol::changes::RepoChanges>(&cfg),
        decl::<inspect_protocol::changes::ChangesSummary>(&cfg),
        decl::<inspect_protocol::automations::SlackTrigger>(&cfg),
        decl::<inspect_protocol::automations::Comparison>(&cfg),
        decl::<inspect_protocol::automations::Filter>(&cfg),
        decl::<inspect_protocol::automations::AutomationRequest>(&cfg),
        decl::<inspect_protocol::automations::AutomationStatus>(&cfg),
        decl::<inspect_protocol::automations::Automation>(&cfg),
        decl::<inspect_protocol::automations::AutomationCreated>(&cfg),
        decl::<inspect_protocol::automations::AutomationList>(&cfg),
        decl::<inspect_protocol::automations::RunTrigger>(&cfg),
        decl::<inspect_protocol::automations::RunStatus>(&cfg),
        decl::<inspect_protocol::automations::RunSession>(&cfg),
        decl::<inspect_protocol::automations::Run>(&cfg),
        decl::<inspect_protocol::automations::RunList>(&cfg),
        decl::<inspect_protocol::automations::SchedulePreview>(&cfg),
        decl::<inspect_protocol::automations::WebhookAccepted>(&cfg),
        decl::<inspect_protocol::automations::AutomationOrigin>(&cfg),
        decl::<inspect_protocol::client::ClientMessage>(&cfg),
        decl::<inspect_protocol::client::ServerMessage>(&cfg),
        decl::<inspect_protocol::client::PresenceStatus>(&cfg),
        decl::<inspect_protocol::client::Presence>(&cfg),
        decl::<inspect_protocol::error::ErrorCode>(&cfg),
        decl::<inspect_protocol::error::ApiError>(&cfg),
        decl::<inspect_protocol::error::ErrorBody>(&cfg),
        decl::<inspect_protocol::health::HealthReport>(&cfg),
        decl::<inspect_protocol::health::CheckResult>(&cfg),
        decl::<inspect_protocol::health::DurableProbe>(&cfg),
        decl::<inspect_protocol::health::HostHealth>(&cfg),
        decl::<inspect_protocol::health::DiskUse>(&cfg),
        decl::<inspect_protocol::health::PartCheck>(&cfg),
        decl::<inspect_protocol::images::ImageScope>(&cfg),
        decl::<inspect_protocol::images::BuildStatus>(&cfg),
        decl::<inspect_protocol::images::ImageRepository>(&cfg),
        decl::<inspect_protocol::images::ImageBuild>(&cfg),
        decl::<inspect_protocol::images::ImageSchedule>(&cfg),
        decl::<inspect_protocol::images::ImageList>(&cfg),
        decl::<inspect_protocol::images::ImageRequest>(&cfg),
        decl::<inspect_protocol::images::BuildImageRequest>(&cfg),
        decl::<inspect_protocol::images::BuildStarted>(&cfg),
        decl::<inspect_protocol::images::BuildReport>(&cfg),
        decl::<inspect_protocol::slack::RoutingRule>(&cfg),
        decl::<inspect_protocol::slack::ChannelAssociation>(&cfg),
        decl::<inspect_protocol::slack::SlackSettings>(&cfg),
        decl::<inspect_protocol::slack::SlackThread>(&cfg),
        decl::<inspect_protocol::automations::LinearIssueEvent>(&cfg),
        decl::<inspect_protocol::automations::LinearTrigger>(&cfg),
        decl::<inspect_protocol::automations::GithubEventKind>(&cfg),
        decl::<inspect_protocol::automations::GithubTrigger>(&cfg),
        decl::<inspect_protocol::automations::GithubThread>(&cfg),
        decl::<inspect_protocol::session::AgentKind>(&cfg),
        decl::<inspect_protocol::models::ModelGrantRequest>(&cfg),
        decl::<inspect_protocol::models::ModelGrant>(&cfg),
        decl::<inspect_protocol::models::ModelGrantList>(&cfg),
        decl::<inspect_protocol::models::ManagedGrant>(&cfg),
        decl::<inspect_protocol::linear::TeamMapping>(&cfg),
        decl::<inspect_protocol::linear::ProjectMapping>(&cfg),
        decl::<inspect_protocol::linear::LinearSettings>(&cfg),
        decl::<inspect_protocol::linear::LinearInstallation>(&cfg),
        decl::<inspect_protocol::linear::LinearStatus>(&cfg),
        decl::<inspect_protocol::linear::LinearInstallStart>(&cfg),
        decl::<inspect_protocol::linear::LinearAgentSession>(&cfg),
        decl::<inspect_protocol::provider::BootMode>(&cfg),
        decl::<inspect_protocol::provider::WorkspaceRepository>(&cfg),
        decl::<inspect_protocol::provider::SpawnRequest>(&cfg),
        decl::<inspect_protocol::provider::SnapshotInfo>(&cfg),
        decl::<inspect_protocol::provider::SessionRemoved>(&cfg),
        decl::<inspect_protocol::provider::SandboxInfo>(&cfg),
        decl::<inspect_protocol::provider::SandboxList>(&cfg),
        decl::<inspect_protocol::provider::Capabilities>(&cfg),
        decl::<inspect_protocol::provider::RepositoryCheck>(&cfg),
        decl::<inspect_protocol::provider::RepositoryChecked>(&cfg),
        decl::<inspect_protocol::sandbox::SandboxFrame>(&cfg),
        decl::<inspect_protocol::sandbox::SandboxEvent>(&cfg),
        decl::<inspect_protocol::sandbox::SandboxCommand>(&cfg),
        decl::<inspect_protocol::sandbox::StepStatus>(&cfg),
        decl::<inspect_protocol::sandbox::SandboxBatch>(&cfg),
        decl::<inspect_protocol::sandbox::BatchTag>(&cfg),
        decl::<inspect_protocol::sandbox::GitIdentity>(&cfg),
        decl::<inspect_protocol::sandbox::PromptAuthor>(&cfg),
        decl::<inspect_protocol::scm::PullRequestRequest>(&cfg),
        decl::<inspect_protocol::scm::AuthoredAs>(&cfg),
        decl::<inspect_protocol::scm::CallbackContext>(&cfg),
        decl::<inspect_protocol::scm::PullRequestResult>(&cfg),
        decl::<inspect_protocol::scm::PullRequestResponse>(&cfg),
        decl::<inspect_protocol::scm::PushSpec>(&cfg),
        decl::<inspect_protocol::scm::RepoSettings>(&cfg),
        decl::<inspect_protocol::scm::Completion>(&cfg),
        decl::<inspect_protocol::scm::ReviewVerdict>(&cfg),
        decl::<inspect_protocol::scm::DiffSide>(&cfg),
        decl::<inspect_protocol::scm::ReviewComment>(&cfg),
        decl::<inspect_protocol::scm::ReviewRequest>(&cfg),
        decl::<inspect_protocol::scm::ReviewResult>(&cfg),
        decl::<inspect_protocol::terminal::OpenTerminalRequest>(&cfg),
        decl::<inspect_protocol::terminal::TerminalInfo>(&cfg),
        decl::<inspect_protocol::terminal::TerminalList>(&cfg),
        decl::<inspect_protocol::editor::EditorLink>(&cfg),
        decl::<inspect_protocol::editor::EditorEndpoint>(&cfg),
        decl::<inspect_protocol::desktop::DesktopRequest>(&cfg),
        decl::<inspect_protocol::desktop::DesktopLink>(&cfg),
        decl::<inspect_protocol::desktop::DesktopEndpoints>(&cfg),
        decl::<inspect_protocol::session::PortLink>(&cfg),
        decl::<inspect_protocol::session::OpenPortRequest>(&cfg),
        decl::<inspect_protocol::media::ScreenshotRequest>(&cfg),
        decl::<inspect_protocol::session::SessionStatus>(&cfg),
        decl::<inspect_protocol::session::RepositoryRef>(&cfg),
        decl::<inspect_protocol::session::CreateSessionRequest>(&cfg),
        decl::<inspect_protocol::session::SandboxSettings>(&cfg),
        decl::<inspect_protocol::session::TunnelUrls>(&cfg),
        decl::<inspect_protocol::session::CreateSessionResponse>(&cfg),
        decl::<inspect_protocol::session::Actor>(&cfg),
        decl::<inspect_protocol::session::SessionState>(&cfg),
        decl::<inspect_protocol::session::SessionSummary>(&cfg),
        decl::<inspect_protocol::session::SessionList>(&cfg),
        decl::<inspect_protocol::session::IndexUpdate>(&cfg),
        decl::<inspect_protocol::session::MessageStatus>(&cfg),
        decl::<inspect_protocol::session::Attachment>(&cfg),
        decl::<inspect_protocol::session::PromptRequest>(&cfg),
        decl::<inspect_protocol::session::PromptAccepted>(&cfg),
        decl::<inspect_protocol::session::Message>(&cfg),
        decl::<inspect_protocol::session::MessageList>(&cfg),
        decl::<inspect_protocol::session::QueuedPrompt>(&cfg),
        decl::<inspect_protocol::session::Participant>(&cfg),
        decl::<inspect_protocol::session::ParticipantList>(&cfg),
        decl::<inspect_protocol::session::Artifact>(&cfg),
        decl::<inspect_protocol::session::ArtifactList>(&cfg),
        decl::<inspect_protocol::session::TitleRequest>(&cfg),
        decl::<inspect_protocol::session::WsTokenResponse>(&cfg),
        decl::<inspect_protocol::session::TimelineEvent>(&cfg),
        decl::<inspect_protocol::session::EventPage>(&cfg),
        decl::<inspect_protocol::session::EventWindow>(&cfg),
        decl::<inspect_protocol::session::RegisterRepository>(&cfg),
        decl::<inspect_protocol::session::Repository>(&cfg),
        decl::<inspect_protocol::session::BranchList>(&cfg),
        decl::<inspect_protocol::session::RepositoryList>(&cfg),
        decl::<inspect_protocol::session::SpawnChildRequest>(&cfg),
        decl::<inspect_protocol::session::ChildPrompt>(&cfg),
        decl::<inspect_protocol::session::ChildPlan>(&cfg),
        decl::<inspect_protocol::session::ChildSummary>(&cfg),
        decl::<inspect_protocol::session::ChildList>(&cfg),
        decl::<inspect_protocol::session::AttemptsRequest>(&cfg),
        decl::<inspect_protocol::session::AttemptsPlan>(&cfg),
        decl::<inspect_protocol::session::AttemptGroup>(&cfg),
        decl::<inspect_protocol::session::ChooseAttempt>(&cfg),
        decl::<inspect_protocol::session::AttemptChosen>(&cfg),
    ];
    for d in decls {
        out.push_str(&d);
        out.push_str("\n\n");
    }
    // Every wire type is in the file: a new one cannot be forgotten in the list above.
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(src).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let mut wanted = false;
        for line in text.lines().map(str::trim) {
            if line.contains("derive(ts_rs::TS)") {
                wanted = true;
            } else if wanted && (line.starts_with("pub struct ") || line.starts_with("pub enum ")) {
                let name: String = line
                    .split_whitespace()
                    .nth(2)
                    .unwrap()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    out.contains(&format!("export type {name} ")),
                    "{name} is a wire type missing from the list in this test"
                );
                wanted = false;
            }
        }
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web/src/wire.ts");
    if std::env::var_os("INSPECT_WRITE_WIRE_TS").is_some() {
        std::fs::write(&path, &out).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == out,
        "web/src/wire.ts is out of date with crates/protocol/: run\n  INSPECT_WRITE_WIRE_TS=1 cargo test -p inspect-protocol --features ts --test typescript"
    );
}
