//! `inspect-supervisor run`: inside a sandbox. Connects to the session, boots the
//! workspace step by step, starts the agent, runs prompts one at a time, commits each
//! prompt's work with its author and pushes the session branch back to its source.

pub mod agent;
pub mod agent_api;
pub mod attachments;
pub mod backend;
pub mod boot;
pub mod browser;
pub mod browser_mcp;
pub mod build;
pub mod changes;
pub mod claude;
pub mod desktop;
pub mod editor;
pub mod egress;
pub mod gates;
pub mod git;
pub mod link;
pub mod mapping;
pub mod mcp;
pub mod model_proxy;
pub mod proxy;
pub mod recording;
pub mod restore;
pub mod screenshot;
pub mod skills;
pub mod terminals;

use anyhow::{Context, Result};
use backend::{Backend, Binaries, Mapper};
use boot::Step;
use inspect_protocol::provider::{BootMode, SpawnRequest};
use inspect_protocol::sandbox::{PromptAuthor, SandboxCommand, SandboxEvent, StepStatus};
use link::Events;
use mapping::TurnSignal;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// A turn with no agent event for this long is checked against the agent's own record.
const STALL_CHECK: Duration = Duration::from_secs(60);
/// A turn silent for this long is aborted and failed.
const STALL_LIMIT: Duration = Duration::from_secs(600);
/// How many prompt ids a sandbox remembers to recognise a prompt sent to it again.
const TAKEN_PROMPTS: usize = 64;

struct RunConfig {
    spawn: SpawnRequest,
    workspace: PathBuf,
    root: PathBuf,
    opencode: PathBuf,
    agents: Binaries,
    base_url: Option<String>,
    api_key: Option<String>,
    tunnel_wait: Duration,
    /// The set-up-only secrets, for the hooks alone (filled by the link).
    setup_secrets: link::SetupSecrets,
}

fn var(name: &str) -> Result<String> {
    std::env::var(name).with_context(|| format!("{name} is not set"))
}

/// The sandbox's token, taken out of the environment as the process starts.
static SANDBOX_TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
/// The key this sandbox's gates check with (a cloud vendor's sandbox), taken out likewise.
static GATE_KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Moves `INSPECT_SANDBOX_TOKEN` from the environment into this process's memory, which
/// (non-dumpable) no other process of the sandbox can read: nothing the supervisor starts
/// — git, the hooks, the agent — inherits it. Call before any other thread starts.
pub fn take_sandbox_token() {
    if let Ok(token) = std::env::var("INSPECT_SANDBOX_TOKEN") {
        let _ = SANDBOX_TOKEN.set(token);
    } else if let Ok(root) = std::env::var("INSPECT_SANDBOX_ROOT") {
        // The local host hands it over in a file (no bubblewrap parent then holds it).
        let file = std::path::Path::new(&root).join(inspect_protocol::provider::SANDBOX_TOKEN_FILE);
        if let Ok(token) = std::fs::read_to_string(&file) {
            let _ = SANDBOX_TOKEN.set(token.trim().to_owned());
        }
        let _ = std::fs::remove_file(&file);
    }
    std::env::remove_var("INSPECT_SANDBOX_TOKEN");
    if let Ok(key) = std::env::var(inspect_protocol::provider::GATE_KEY_VAR) {
        let _ = GATE_KEY.set(key);
    }
    std::env::remove_var(inspect_protocol::provider::GATE_KEY_VAR);
}

/// Holds the sandbox root's supervisor lock for the life of the process, or `None` when
/// another supervisor holds it (a second start after a resume: nothing to do).
pub fn hold_supervisor_lock() -> Result<Option<nix::fcntl::Flock<std::fs::File>>> {
    let root = var("INSPECT_SANDBOX_ROOT")?;
    std::fs::create_dir_all(&root).context("creating the sandbox root")?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::path::Path::new(&root).join(inspect_protocol::provider::SUPERVISOR_LOCK_FILE))
        .context("opening the supervisor lock")?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(anyhow::anyhow!("locking the sandbox root: {e}")),
    }
}

fn sandbox_token() -> Result<String> {
    SANDBOX_TOKEN
        .get()
        .cloned()
        .context("INSPECT_SANDBOX_TOKEN is not set")
}

impl RunConfig {
    fn from_env() -> Result<(RunConfig, link::LinkConfig)> {
        // A provider may hand over an empty volume: home lives there (git, the agent).
        if let Some(home) = std::env::var_os("HOME") {
            std::fs::create_dir_all(&home).context("creating HOME")?;
        }
        let mut spawn: SpawnRequest =
            serde_json::from_str(&var("INSPECT_SPAWN")?).context("INSPECT_SPAWN")?;
        spawn.sandbox_token = sandbox_token()?;
        let setup_secrets = link::setup_secrets();
        let link = link::LinkConfig {
            control_plane_url: var("INSPECT_CONTROL_PLANE_URL")?,
            session_id: var("INSPECT_SESSION_ID")?,
            sandbox_id: var("INSPECT_SANDBOX_ID")?,
            token: spawn.sandbox_token.clone(),
            setup_secrets: setup_secrets.clone(),
        };
        let model = std::env::var("INSPECT_MODEL")
            .ok()
            .filter(|m| !m.is_empty());
        if spawn.default_model.is_none() {
            spawn.default_model = model;
        }
        let cfg = RunConfig {
            workspace: PathBuf::from(var("INSPECT_WORKSPACE")?),
            root: PathBuf::from(var("INSPECT_SANDBOX_ROOT")?),
            opencode: PathBuf::from(
                std::env::var("INSPECT_OPENCODE_BIN").unwrap_or_else(|_| "opencode".into()),
            ),
            agents: Binaries {
                claude: PathBuf::from(
                    std::env::var("INSPECT_CLAUDE_BIN").unwrap_or_else(|_| "claude".into()),
                ),
                anthropic_base_url: std::env::var("INSPECT_ANTHROPIC_BASE_URL")
                    .ok()
                    .filter(|v| !v.is_empty()),
            },
            base_url: std::env::var("INSPECT_MODEL_BASE_URL")
                .ok()
                .filter(|v| !v.is_empty()),
            api_key: std::env::var("INSPECT_MODEL_API_KEY")
                .ok()
                .filter(|v| !v.is_empty()),
            tunnel_wait: Duration::from_secs(
                std::env::var("TUNNEL_WAIT_TIMEOUT_SECONDS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(30),
            ),
            spawn,
            setup_secrets,
        };
        let mut cfg = cfg;
        changes::set_reporter(
            &link.control_plane_url,
            &link.session_id,
            &link.sandbox_id,
            &link.token,
        );
        // The supervisor's own git asks the control plane for credentials through this.
        boot::set_scm_broker(boot::ScmBroker::new(
            &link.control_plane_url,
            &link.session_id,
            &link.sandbox_id,
            &link.token,
            cfg.spawn
                .repositories
                .iter()
                .any(|r| r.source.starts_with("https://") || r.source.starts_with("http://")),
        ));
        // Started again on a workspace this very sandbox booted (a provider that resumes
        // the same machine): resume it rather than boot it afresh.
        if boot::booted_here(&cfg.root, &cfg.spawn.sandbox_id) {
            cfg.spawn.boot_mode = BootMode::Resume;
        }
        Ok((cfg, link))
    }
}

/// How long a supervisor started while another holds the lock waits for it to end: the
/// holder may be the last one still ending after a shutdown, frozen mid-way by a pause and
/// continued by the resume that started this one.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

pub async fn run() -> Result<()> {
    let waited = std::time::Instant::now();
    let mut said = false;
    let _lock = loop {
        if let Some(lock) = hold_supervisor_lock()? {
            break lock;
        }
        if waited.elapsed() >= LOCK_WAIT {
            tracing::info!("another supervisor runs in this sandbox; nothing to do");
            return Ok(());
        }
        if !std::mem::replace(&mut said, true) {
            tracing::info!("another supervisor holds the sandbox; waiting for it to end");
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    let (cfg, link_cfg) = RunConfig::from_env()?;
    // A confined sandbox's ways out are relayed before anything here reaches out.
    let mut relays = egress::start()
        .await
        .context("relaying the confined sandbox's ways out")?;
    let unpacking =
        restore::Restore::from_env()?.map(|r| restore::Unpacking::start(r, cfg.root.clone()));
    // The desktop starts when a person asks; the agent's browser asks the API for it.
    let desktop = desktop::Desktop::from_env(&cfg.root, GATE_KEY.get().is_some());
    let api = agent_api::start(
        &link_cfg.control_plane_url,
        &link_cfg.session_id,
        &link_cfg.sandbox_id,
        &link_cfg.token,
        &cfg.root.join("tmp"),
        desktop.display(),
    )
    .await
    .context("starting the agent API")?;
    let bin_dir = cfg.root.join("bin");
    let instructions = cfg.root.join("agent").join("open-inspect.md");
    let (events, mut commands, link_task) = link::start(link_cfg.clone());
    if let Some(relays) = &mut relays {
        relays.report_to(&events);
    }
    if let Some(policy) = &cfg.spawn.egress {
        let step = Step::begin(&events, "egress");
        let vendor = std::env::var(inspect_protocol::egress::ENFORCED_BY_VAR).ok();
        let (status, detail) = match (relays.is_some() || !policy.confines(), vendor) {
            (true, _) => (
                StepStatus::Succeeded,
                format!("network: {}", policy.describe()),
            ),
            (false, Some(by)) => (
                StepStatus::Succeeded,
                format!("network: {}, enforced by {by}", policy.describe()),
            ),
            (false, None) => (
                StepStatus::Failed,
                format!(
                    "network: {} asked, but this sandbox's provider does not confine it",
                    policy.describe()
                ),
            ),
        };
        step.end(status, Some(detail), None);
    }
    // A local sandbox started from a snapshot or an image unpacks it here: the agent
    // starts once its own state is in place, while the workspace is still being written.
    let mut unpacking = unpacking.map(|u| (Step::begin(&events, "restore"), u));
    if let Some((_, u)) = &mut unpacking {
        u.agent_state_in_place().await;
    }
    agent_api::install_command(&bin_dir, &instructions).context("installing open-inspect")?;
    // A cloud vendor's sandbox: its ports' gates open first, so a link works as soon as the
    // app behind it answers.
    let gates = GATE_KEY
        .get()
        .map(|key| gates::Gates::new(key, &cfg.spawn.sandbox_id));
    if let Some(gates) = &gates {
        gates.open_all(&cfg.spawn.tunnel_ports).await;
    }
    let booted = Instant::now();
    // The agent starts while the workspace is prepared: it takes about 2 s to answer, the
    // clone and the hooks take what they take; the sandbox is ready when both are.
    let directory = cfg
        .spawn
        .repositories
        .first()
        .map(|r| cfg.workspace.join(&r.name))
        .unwrap_or_else(|| cfg.workspace.clone());
    // The session's MCP servers, their secrets resolved from this sandbox's environment.
    let (mut mcp_config, mut mcp_left_out) =
        mcp::configuration(&cfg.spawn.mcp_servers, &|name| std::env::var(name).ok());
    // The agent's own browser, offered as the MCP server `browser` where there is one.
    if screenshot::chromium().is_some() {
        if let Some(note) = mcp::offer_browser(&mut mcp_config, &std::env::current_exe()?, &api) {
            mcp_left_out.push(note);
        }
    }
    // Brokered model access: a proxy per grant; the agent holds only its marker.
    let anthropic_upstream = cfg.agents.anthropic_base_url.clone();
    let (revoked_tx, mut revoked_rx) = mpsc::unbounded_channel::<String>();
    let proxies = model_proxy::start(
        &cfg.spawn.managed_grants,
        &|provider| match (provider, &anthropic_upstream) {
            ("anthropic", Some(url)) => url.clone(),
            (p, _) => model_proxy::default_upstream(p).to_owned(),
        },
        &link_cfg.control_plane_url,
        &link_cfg.session_id,
        &link_cfg.sandbox_id,
        &link_cfg.token,
        &events,
        revoked_tx,
    )
    .await
    .context("starting the model proxies")?;
    let mut agent_env = vec![
        (agent_api::URL_VAR.into(), api.url.clone()),
        (agent_api::KEY_VAR.into(), api.key.clone()),
    ];
    let mut agents = cfg.agents.clone();
    for p in &proxies {
        let var = match p.provider.as_str() {
            "anthropic" => "ANTHROPIC_API_KEY",
            _ => "OPENAI_API_KEY",
        };
        agent_env.push((var.into(), p.marker.clone()));
        if p.provider == "anthropic" {
            agents.anthropic_base_url = Some(p.url.clone());
        }
    }
    let agent_cfg = agent::AgentConfig {
        binary: cfg.opencode.clone(),
        directory: directory.clone(),
        state_dir: cfg.root.join("agent"),
        default_model: cfg.spawn.default_model.clone(),
        base_url: cfg.base_url.clone(),
        api_key: cfg.api_key.clone(),
        extra_env: agent_env,
        bin_dir: Some(bin_dir),
        instructions: Some(instructions),
        models: cfg.spawn.models.clone(),
        mcp: mcp_config.clone(),
        provider_urls: proxies
            .iter()
            .map(|p| (p.provider.clone(), p.url.clone()))
            .collect(),
    };
    std::fs::create_dir_all(&cfg.workspace)?;
    // The session's managed skills are in place before the agent reads its skills.
    if !cfg.spawn.skills.is_empty() {
        let step = Step::begin(&events, "skills");
        let dir = agent::skills_dir(&agent_cfg.state_dir);
        let installed = match skills::fetch(&cfg.spawn).await {
            Ok(bundles) => skills::install(&dir, &bundles).map(|_| bundles),
            Err(e) => Err(e),
        };
        match installed {
            Ok(bundles) => step.end(
                StepStatus::Succeeded,
                Some(skills::described(&bundles)),
                None,
            ),
            Err(e) => {
                step.end(StepStatus::Failed, Some(format!("{e:#}")), None);
                events.send(SandboxEvent::Warning {
                    scope: "skills".into(),
                    message: format!("the session's skills were not installed: {e:#}"),
                });
            }
        }
    }
    let step = Step::begin(&events, "agent");
    let kind = cfg.spawn.agent;
    let spawned = Backend::spawn(kind, &agent_cfg, &agents);
    let fail = |step: Step<'_>, e: anyhow::Error| {
        step.end(StepStatus::Failed, Some(format!("{e:#}")), None);
        events.send(SandboxEvent::Error {
            message_id: None,
            error: format!("the agent did not start: {e:#}"),
        });
        e
    };
    let mut agent = match spawned {
        Ok(a) => a,
        Err(e) => {
            let e = fail(step, e);
            tokio::time::sleep(Duration::from_secs(3)).await;
            return Err(e);
        }
    };
    // The agent's session opens in the primary repository once it is in place (after the
    // git sync), and the agent warms up while the hooks still run.
    let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
    let workspace = async {
        finish_restore(unpacking).await?;
        boot(&cfg, &events, Some(synced_tx)).await
    };
    let agent_ready = async {
        synced_rx.await.ok()?;
        let mut ready = agent.ready().await;
        // A sandbox resumed or restarted on the same disk may meet its last life's agent
        // still letting go of the state: one more start, a moment later.
        if let Err(e) = &ready {
            if e.to_string().contains(agent::EXITED_DURING_START_UP) {
                tracing::warn!("{e:#}; starting the agent once more");
                tokio::time::sleep(Duration::from_secs(1)).await;
                ready = match Backend::spawn(kind, &agent_cfg, &agents) {
                    Ok(again) => {
                        agent = again;
                        agent.ready().await
                    }
                    Err(e) => Err(e),
                };
            }
        }
        if ready.is_ok() {
            agent.warm_up();
        }
        Some(ready)
    };
    let (booted_workspace, agent_ready) = tokio::join!(workspace, agent_ready);
    let repos = match booted_workspace {
        Ok(r) => {
            if let Err(e) = boot::mark_booted(&cfg.root, &cfg.spawn.sandbox_id) {
                tracing::warn!("could not mark the workspace booted: {e}");
            }
            r
        }
        Err(e) => {
            step.end(StepStatus::Skipped, Some("the boot failed".into()), None);
            let msg = format!("the sandbox failed to boot: {e:#}");
            tracing::error!("{msg}");
            events.send(SandboxEvent::Error {
                message_id: None,
                error: msg,
            });
            // Give the link a moment to deliver the error before the sandbox goes.
            tokio::time::sleep(Duration::from_secs(3)).await;
            return Err(e);
        }
    };
    match agent_ready.unwrap_or_else(|| Err(anyhow::anyhow!("the workspace was never synced"))) {
        Ok(()) => step.end(StepStatus::Succeeded, None, None),
        Err(e) => {
            let e = fail(step, e);
            tokio::time::sleep(Duration::from_secs(3)).await;
            return Err(e);
        }
    }
    // Only the built-in browser: said at once (the agent connects it in the background,
    // warmed up with the rest), so the sandbox is not held up for it.
    if cfg.spawn.mcp_servers.is_empty() && !mcp_config.is_empty() {
        let step = Step::begin(&events, "mcp");
        step.end(
            StepStatus::Succeeded,
            Some(format!(
                "{}: the agent's browser, offered",
                browser_mcp::SERVER_NAME
            )),
            None,
        );
    } else if !mcp_config.is_empty() || !mcp_left_out.is_empty() {
        let step = Step::begin(&events, "mcp");
        let mut said = mcp_left_out.clone();
        let mut up = mcp_left_out.is_empty();
        match agent.mcp_status().await.unwrap_or_else(|| {
            // Claude Code connects them as each prompt starts: all it can be told is theirs.
            Ok(mcp_config
                .keys()
                .map(|name| {
                    (
                        name.clone(),
                        json!({"status": "configured (connected by Claude Code at each prompt)"}),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into())
        }) {
            Ok(status) => {
                let (line, all_up) = mcp::described(&status);
                up &= all_up;
                if !line.is_empty() {
                    said.insert(0, line);
                }
            }
            Err(e) => {
                up = false;
                said.push(format!(
                    "the agent did not say how its MCP servers are: {e:#}"
                ));
            }
        }
        let said = said.join("; ");
        if !up {
            events.send(SandboxEvent::Warning {
                scope: "mcp".into(),
                message: said.clone(),
            });
        }
        step.end(
            if up {
                StepStatus::Succeeded
            } else {
                StepStatus::Failed
            },
            Some(said),
            None,
        );
    }
    tracing::info!(ms = booted.elapsed().as_millis() as u64, "sandbox ready");
    let (agent_tx, mut agent_rx) = mpsc::unbounded_channel();
    let mut stream = agent.stream_events(agent_tx.clone());
    events.send(SandboxEvent::Ready {
        opencode_session_id: agent.session_id(),
    });

    let terminals = terminals::Terminals::new(
        events.clone(),
        directory.clone(),
        Some(cfg.root.join("bin")),
    );
    let desktop = std::sync::Arc::new(tokio::sync::Mutex::new(desktop));
    let mut editor = editor::Editor::from_env(
        directory.clone(),
        &cfg.root,
        Some(cfg.root.join("bin")),
        gates.is_some(),
    );
    let mut turn: Option<Turn> = None;
    // Every agent message a turn has seen: the next turn ignores what still comes of them.
    let mut known_messages: std::collections::HashSet<String> = Default::default();
    let mut taken: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut pushed = Pushed::default();
    let mut watchdog = tokio::time::interval(Duration::from_secs(5));
    let mut link_task = link_task;
    loop {
        tokio::select! {
            end = &mut link_task => {
                match end {
                    Ok(link::LinkEnd::Refused(status)) => tracing::warn!(status, "the session refused this sandbox; shutting down"),
                    other => tracing::warn!(?other, "the session link ended; shutting down"),
                }
                return Ok(());
            }
            cmd = commands.recv() => match cmd {
                None => return Ok(()),
                Some(SandboxCommand::Prompt { message_id, content, model, reasoning_effort, author, attachments }) => {
                    // The session sends the running prompt again after a reconnect: a copy
                    // of one this sandbox already took changes nothing.
                    if taken.contains(&message_id) {
                        tracing::debug!(%message_id, "prompt already taken");
                        continue;
                    }
                    if taken.len() == TAKEN_PROMPTS {
                        taken.pop_front();
                    }
                    taken.push_back(message_id.clone());
                    if turn.is_some() {
                        events.send(SandboxEvent::Warning { scope: "sandbox".into(), message: format!("prompt {message_id} arrived during another turn; ignored") });
                        continue;
                    }
                    tracing::info!(%message_id, attachments = attachments.len(), "prompt");
                    let saved = match attachments::fetch(&directory, &cfg.spawn.control_plane_url, &cfg.spawn.session_id, &cfg.spawn.sandbox_id, &cfg.spawn.sandbox_token, &attachments).await {
                        Ok(saved) => saved,
                        Err(e) => {
                            events.send(SandboxEvent::Warning { scope: "attachments".into(), message: format!("{e:#}") });
                            Vec::new()
                        }
                    };
                    let content = attachments::with_paths(&content, &saved);
                    match agent.prompt(&content, model.as_deref(), reasoning_effort.as_deref()).await {
                        Ok(()) => turn = Some(Turn::new(agent.mapper(&message_id, known_messages.clone()), author, &content)),
                        Err(e) => events.send(SandboxEvent::ExecutionComplete { message_id, success: false, error: Some(format!("the agent refused the prompt: {e:#}")) }),
                    }
                }
                Some(SandboxCommand::Stop { .. }) => {
                    if let Some(t) = turn.as_mut() {
                        t.stopped = true;
                        if let Err(e) = agent.abort().await {
                            tracing::warn!("abort failed: {e:#}");
                        }
                    }
                }
                Some(SandboxCommand::Push { push_spec }) => {
                    let author = turn.as_ref().map(|t| (t.author.clone(), t.content.clone()));
                    push_on_request(&cfg, &events, &repos, &mut pushed, push_spec, author).await;
                }
                Some(SandboxCommand::Shutdown) => {
                    tracing::info!("shutdown requested");
                    return Ok(());
                }
                Some(SandboxCommand::TerminalOpen { terminal_id, cols, rows }) => terminals.open(&terminal_id, cols, rows),
                Some(SandboxCommand::TerminalInput { terminal_id, data }) => terminals.input(&terminal_id, data),
                Some(SandboxCommand::TerminalResize { terminal_id, cols, rows }) => terminals.resize(&terminal_id, cols, rows),
                Some(SandboxCommand::TerminalReplay { terminal_id, client }) => terminals.replay(&terminal_id, &client),
                Some(SandboxCommand::TerminalClose { terminal_id }) => terminals.close(&terminal_id),
                Some(SandboxCommand::OpenGate { port, gate_port }) => match &gates {
                    Some(gates) => gates.open(port, gate_port).await,
                    None => events.send(SandboxEvent::Warning { scope: "tunnel".into(), message: "this sandbox has no gates to open".into() }),
                },
                Some(SandboxCommand::EditorStart) => {
                    if let Err(message) = editor.start() {
                        events.send(SandboxEvent::Warning { scope: "editor".into(), message });
                    }
                }
                Some(SandboxCommand::DesktopStart) => {
                    // The display takes a moment: the loop goes on meanwhile.
                    let (desktop, events) = (desktop.clone(), events.clone());
                    tokio::spawn(async move {
                        if let Err(message) = desktop.lock().await.start().await {
                            events.send(SandboxEvent::Warning { scope: "desktop".into(), message });
                        }
                    });
                }
                Some(other) => {
                    events.send(SandboxEvent::Warning { scope: "sandbox".into(), message: format!("command not supported here: {}", serde_json::to_value(&other).ok().and_then(|v| v["type"].as_str().map(str::to_owned)).unwrap_or_default()) });
                }
            },
            ev = agent_rx.recv() => {
                let Some(ev) = ev else { continue };
                let Some(t) = turn.as_mut() else { continue };
                t.last_event = Instant::now();
                if ev["type"] == "inspect.stream_lost" {
                    if let Some(done) = agent.recover(t.mapper.produced_output()).await { finish(&cfg, &events, &repos, &mut pushed, turn.take(), Some(done)).await; }
                    continue;
                }
                let (out, signal) = t.mapper.on_event(&ev);
                known_messages.extend(t.mapper.messages());
                for e in out { events.send(e); }
                match signal {
                    TurnSignal::Idle => finish(&cfg, &events, &repos, &mut pushed, turn.take(), None).await,
                    TurnSignal::Permission(id) => { let _ = agent.answer_permission(&id).await; }
                    TurnSignal::Continue => {}
                }
            }
            Some(why) = revoked_rx.recv() => {
                // The agent would only retry a call that cannot succeed: the turn ends.
                if turn.is_some() {
                    let _ = agent.abort().await;
                    let t = turn.take();
                    finish(&cfg, &events, &repos, &mut pushed, t, Some((false, Some(why)))).await;
                }
            }
            _ = watchdog.tick() => {
                if agent.exited() {
                    events.send(SandboxEvent::Warning { scope: "agent".into(), message: "the agent exited; restarting it".into() });
                    if let Some(t) = turn.take() {
                        events.send(SandboxEvent::ExecutionComplete { message_id: t.mapper.message_id().to_owned(), success: false, error: Some("the agent crashed during the prompt".into()) });
                    }
                    stream.abort();
                    agent = Backend::start(kind, &agent_cfg, &agents).await.context("restarting the agent")?;
                    agent.warm_up();
                    stream = agent.stream_events(agent_tx.clone());
                    continue;
                }
                let Some(t) = turn.as_mut() else { continue };
                let silent = t.last_event.elapsed();
                if silent > STALL_LIMIT {
                    let _ = agent.abort().await;
                    let t = turn.take();
                    finish(&cfg, &events, &repos, &mut pushed, t, Some((false, Some("the agent went silent and the turn was aborted".into())))).await;
                } else if silent > STALL_CHECK {
                    t.last_event = Instant::now() - STALL_CHECK / 2;
                    if let Some(done) = agent.recover(t.mapper.produced_output()).await { finish(&cfg, &events, &repos, &mut pushed, turn.take(), Some(done)).await; }
                }
            }
        }
    }
}

/// What this sandbox pushed: each repository's last pushed head, and which branches were
/// announced as artifacts.
#[derive(Default)]
struct Pushed {
    heads: std::collections::HashMap<PathBuf, String>,
    announced: std::collections::HashSet<PathBuf>,
}

struct Turn {
    mapper: Mapper,
    author: PromptAuthor,
    content: String,
    last_event: Instant,
    stopped: bool,
}

impl Turn {
    fn new(mapper: Mapper, author: PromptAuthor, content: &str) -> Self {
        Turn {
            mapper,
            author,
            content: content.into(),
            last_event: Instant::now(),
            stopped: false,
        }
    }
}

/// The bot's identity, for work committed outside any prompt.
fn bot_author() -> PromptAuthor {
    PromptAuthor {
        participant_id: String::new(),
        name: "Open-Inspect".into(),
        git_identity: inspect_protocol::sandbox::GitIdentity {
            name: "Open-Inspect".into(),
            email: "agent@open-inspect.local".into(),
        },
    }
}

/// The session asked for a push (a pull request is being made): commit what is pending
/// with the running prompt's author, force-push `HEAD` to the branch asked for, and say
/// whether the branch has commits beyond its base.
async fn push_on_request(
    cfg: &RunConfig,
    events: &Events,
    repos: &[(PathBuf, String)],
    pushed: &mut Pushed,
    spec: inspect_protocol::scm::PushSpec,
    author: Option<(PromptAuthor, String)>,
) {
    let Some((dir, name)) = repos.iter().find(|(_, n)| *n == spec.repo) else {
        events.send(SandboxEvent::PushError {
            error: format!("no repository {} in this workspace", spec.repo),
            repo: Some(spec.repo.clone()),
            request_id: Some(spec.request_id.clone()),
        });
        return;
    };
    let (author, subject) = author.unwrap_or_else(|| (bot_author(), "Work in progress".into()));
    let last = (spec.branch == cfg.spawn.work_branch)
        .then(|| pushed.heads.get(dir).cloned())
        .flatten();
    let outcome = async {
        commit_pending(dir, &author, &subject).await?;
        if let Some(last) = &last {
            realign(dir, &spec.branch, last).await;
        }
        boot::git(
            dir,
            &[
                "push",
                "--quiet",
                "--force",
                "origin",
                &format!("HEAD:refs/heads/{}", spec.branch),
            ],
        )
        .await?;
        let head = boot::git(dir, &["rev-parse", "HEAD"]).await?;
        let changed = match &spec.base_branch {
            Some(base) => boot::git(
                dir,
                &[
                    "rev-list",
                    "--count",
                    &format!("refs/remotes/origin/{base}..HEAD"),
                ],
            )
            .await
            .ok()
            .and_then(|n| n.parse::<u64>().ok())
            .map(|n| n > 0),
            None => None,
        };
        anyhow::Ok((head, changed))
    }
    .await;
    match outcome {
        Ok((head, changed)) => {
            if spec.branch == cfg.spawn.work_branch {
                pushed.heads.insert(dir.clone(), head.clone());
            }
            events.send(SandboxEvent::PushComplete {
                branch: Some(spec.branch),
                repo: Some(name.clone()),
                request_id: Some(spec.request_id),
                sha: Some(head),
                changed,
            });
        }
        Err(e) => events.send(SandboxEvent::PushError {
            error: format!("{e:#}"),
            repo: Some(name.clone()),
            request_id: Some(spec.request_id),
        }),
    }
}

/// Ends a turn: commit its work with the prompt's author, push, report completion.
async fn finish(
    cfg: &RunConfig,
    events: &Events,
    repos: &[(PathBuf, String)],
    pushed: &mut Pushed,
    turn: Option<Turn>,
    outcome: Option<(bool, Option<String>)>,
) {
    let Some(t) = turn else { return };
    let (mut success, mut error) = outcome.unwrap_or_else(|| t.mapper.outcome());
    if t.stopped {
        success = false;
        error = Some("stopped".into());
    }
    for (dir, name) in repos {
        match commit_and_push(dir, &cfg.spawn.work_branch, &t.author, &t.content, pushed).await {
            Ok(Some(sha)) => {
                events.send(SandboxEvent::PushComplete {
                    branch: Some(cfg.spawn.work_branch.clone()),
                    repo: Some(name.clone()),
                    request_id: None,
                    sha: Some(sha.clone()),
                    changed: None,
                });
                // The branch is an artifact of the session once, on its first push.
                if pushed.announced.insert(dir.clone()) {
                    events.send(SandboxEvent::Artifact {
                        artifact_type: "branch".into(),
                        url: None,
                        metadata: json!({"repo": name, "branch": cfg.spawn.work_branch, "sha": sha}),
                    });
                }
            }
            Ok(None) => {}
            Err(e) => events.send(SandboxEvent::PushError {
                error: format!("{e:#}"),
                repo: Some(name.clone()),
                request_id: None,
            }),
        }
    }
    // The turn's change reaches the session before the turn is said to be over (its
    // report lists the files from it).
    changes::report(repos).await;
    events.send(SandboxEvent::ExecutionComplete {
        message_id: t.mapper.message_id().to_owned(),
        success,
        error,
    });
}

/// Commits whatever changed with the prompt's author (the bot is the committer) and
/// pushes the work branch when its head moved. Returns the pushed head.
async fn commit_and_push(
    dir: &std::path::Path,
    branch: &str,
    author: &PromptAuthor,
    prompt: &str,
    pushed: &mut Pushed,
) -> Result<Option<String>> {
    commit_pending(dir, author, prompt).await?;
    if let Some(last) = pushed.heads.get(dir).cloned() {
        if let Some(remote) = realign(dir, branch, &last).await {
            pushed.heads.insert(dir.to_path_buf(), remote);
        }
    }
    let head = boot::git(dir, &["rev-parse", "HEAD"]).await?;
    let base = boot::git(dir, &["rev-parse", "@{upstream}"]).await.ok();
    let last = pushed.heads.get(dir);
    if last == Some(&head) || (last.is_none() && base.as_deref() == Some(head.as_str())) {
        return Ok(None);
    }
    boot::git(
        dir,
        &[
            "push",
            "--quiet",
            "--force-with-lease",
            "origin",
            &format!("HEAD:refs/heads/{branch}"),
        ],
    )
    .await?;
    pushed.heads.insert(dir.to_path_buf(), head.clone());
    Ok(Some(head))
}

/// When the branch on the remote is no longer what this sandbox last pushed (`last`) but
/// holds the same tree — GitHub made the commits again, signed, for a repository that
/// requires signed commits — the commits made here since go on top of the remote's, so the
/// next push moves the branch forward instead of throwing the signed ones away. The
/// remote's head when that was done; `None` when there was nothing to do (the branch is as
/// pushed, absent, or changed by someone else: the push's lease decides then).
async fn realign(dir: &std::path::Path, branch: &str, last: &str) -> Option<String> {
    let listed = boot::git(
        dir,
        &["ls-remote", "origin", &format!("refs/heads/{branch}")],
    )
    .await
    .ok()?;
    let remote = listed.split_whitespace().next()?.to_owned();
    if remote == last {
        return None;
    }
    let tracking = format!("+refs/heads/{branch}:refs/remotes/origin/{branch}");
    boot::git(dir, &["fetch", "--quiet", "origin", &tracking])
        .await
        .ok()?;
    let tree = |sha: String| async move {
        boot::git(dir, &["rev-parse", &format!("{sha}^{{tree}}")])
            .await
            .ok()
    };
    let (theirs, ours) = (tree(remote.clone()).await?, tree(last.to_owned()).await?);
    if theirs != ours {
        return None;
    }
    match boot::git(dir, &["rebase", "--quiet", "--onto", &remote, last]).await {
        Ok(_) => {
            tracing::info!(%branch, "the branch was signed on GitHub: local work moved onto it");
            Some(remote)
        }
        Err(e) => {
            tracing::warn!("moving onto the signed branch failed: {e:#}");
            let _ = boot::git(dir, &["rebase", "--abort"]).await;
            None
        }
    }
}

/// Commits whatever changed, with `author` (the bot is the committer).
async fn commit_pending(dir: &std::path::Path, author: &PromptAuthor, prompt: &str) -> Result<()> {
    let status = boot::git(dir, &["status", "--porcelain"]).await?;
    if status.is_empty() {
        return Ok(());
    }
    boot::git(dir, &["add", "-A"]).await?;
    let subject: String = prompt
        .lines()
        .next()
        .unwrap_or("agent changes")
        .chars()
        .take(72)
        .collect();
    let message = format!("{subject}\n\nMade by the agent for {}.", author.name);
    let who = format!(
        "{} <{}>",
        author.git_identity.name, author.git_identity.email
    );
    boot::git(
        dir,
        &["commit", "--quiet", "--author", &who, "-m", &message],
    )
    .await?;
    Ok(())
}

/// The boot sequence; returns each repository's directory and name, in order.
/// Waits for the snapshot's unpack, if there is one, and ends its `restore` step.
async fn finish_restore(unpacking: Option<(Step<'_>, restore::Unpacking)>) -> Result<()> {
    let Some((step, unpacking)) = unpacking else {
        return Ok(());
    };
    match unpacking.finish().await {
        Ok(done) => {
            let detail = format!("{} entries, {} bytes", done.entries, done.bytes);
            step.end(StepStatus::Succeeded, Some(detail), None);
            Ok(())
        }
        Err(e) => {
            step.end(StepStatus::Failed, Some(format!("{e:#}")), None);
            Err(e.context("unpacking the snapshot"))
        }
    }
}

/// How long the hooks wait for the set-up-only secrets (the session sends them as the
/// sandbox connects).
const SETUP_SECRETS_WAIT: Duration = Duration::from_secs(60);

/// The set-up-only secrets the spawn names, as the session sent them; waited for, and
/// without them (said on the timeline) after [`SETUP_SECRETS_WAIT`].
async fn setup_env(cfg: &RunConfig, events: &Events) -> std::collections::BTreeMap<String, String> {
    if cfg.spawn.setup_secrets.is_empty() {
        return Default::default();
    }
    let mut arrived = cfg.setup_secrets.subscribe();
    let got = tokio::time::timeout(SETUP_SECRETS_WAIT, async {
        arrived
            .wait_for(Option::is_some)
            .await
            .map(|env| env.clone().unwrap_or_default())
    })
    .await;
    match got {
        Ok(Ok(env)) => env,
        _ => {
            events.send(SandboxEvent::Warning {
                scope: "setup".into(),
                message: format!(
                    "the set-up secrets ({}) did not arrive within {} s: the hooks run without them",
                    cfg.spawn.setup_secrets.join(", "),
                    SETUP_SECRETS_WAIT.as_secs()
                ),
            });
            Default::default()
        }
    }
}

/// Prepares the workspace; `synced` is told once every repository is in place (before the
/// hooks run).
async fn boot(
    cfg: &RunConfig,
    events: &Events,
    synced: Option<tokio::sync::oneshot::Sender<()>>,
) -> Result<Vec<(PathBuf, String)>> {
    let ws = &cfg.workspace;
    std::fs::create_dir_all(ws)?;
    let mode = cfg.spawn.boot_mode;
    let step = Step::begin(events, "tunnels_file");
    let cleared = boot::clear_stale_tunnels(ws, &cfg.spawn.sandbox_id)?;
    step.end(
        StepStatus::Succeeded,
        cleared.then(|| "removed a stale .tunnels.env".into()),
        None,
    );

    let mut repos = Vec::new();
    for repo in &cfg.spawn.repositories {
        let step = Step::begin(events, format!("git_sync:{}", repo.name));
        let from_image = if mode == BootMode::Prebuilt {
            boot::git(&ws.join(&repo.name), &["rev-parse", "HEAD"])
                .await
                .ok()
        } else {
            None
        };
        match boot::sync_repository(ws, repo, &cfg.spawn.work_branch, mode).await {
            Ok((dir, sha)) => {
                events.send(SandboxEvent::GitSync {
                    status: "completed".into(),
                    repo: Some(repo.name.clone()),
                    sha: Some(sha.clone()),
                });
                let detail = match from_image {
                    Some(old) if old == sha => format!("{sha} (as in the prebuilt image)"),
                    Some(old) => format!("{sha} (synced from the prebuilt image's {old})"),
                    None => sha,
                };
                step.end(StepStatus::Succeeded, Some(detail), None);
                repos.push((dir, repo.name.clone()));
            }
            Err(e) => {
                events.send(SandboxEvent::GitSync {
                    status: "failed".into(),
                    repo: Some(repo.name.clone()),
                    sha: None,
                });
                step.end(StepStatus::Failed, Some(format!("{e:#}")), None);
                return Err(e.context(format!("syncing {}/{}", repo.owner, repo.name)));
            }
        }
    }
    if let Some(synced) = synced {
        let _ = synced.send(());
    }
    let primary = repos
        .first()
        .map(|r| r.0.clone())
        .unwrap_or_else(|| ws.clone());
    let hooks = primary.join(".openinspect");
    // The set-up-only secrets: the hooks' alone (the agent, the terminals and every file
    // never see them).
    let hook_env = setup_env(cfg, events).await;

    let step = Step::begin(events, "setup");
    if matches!(mode, BootMode::Fresh | BootMode::Build) {
        let outcome = boot::run_hook(
            &hooks.join("setup.sh"),
            &primary,
            boot::SETUP_TIMEOUT,
            &hook_env,
        )
        .await?;
        if let Err(detail) = boot::end_hook_step(step, "setup.sh", boot::SETUP_TIMEOUT, outcome) {
            // Setup failing is fatal only when building an image.
            if mode == BootMode::Build {
                anyhow::bail!(detail);
            }
            events.send(SandboxEvent::Warning {
                scope: "setup".into(),
                message: detail,
            });
        }
    } else if mode == BootMode::Prebuilt {
        step.end(
            StepStatus::Skipped,
            Some(format!(
                "done when the prebuilt image {} was built",
                cfg.spawn.restore_from.as_deref().unwrap_or("")
            )),
            None,
        );
    } else {
        let detail = match (&cfg.spawn.restore_from, mode) {
            (_, BootMode::Resume) => "resumed on the stopped sandbox's own workspace".into(),
            (Some(snapshot), _) => format!("restored from the snapshot {snapshot}"),
            (None, _) => "not a fresh boot".into(),
        };
        step.end(StepStatus::Skipped, Some(detail), None);
    }
    // An image holds the workspace as setup left it: no tunnels, no start hook.
    if mode == BootMode::Build {
        return Ok(repos);
    }

    if !cfg.spawn.tunnel_ports.is_empty() {
        let step = Step::begin(events, "tunnels");
        let source = boot::TunnelSource {
            control_plane_url: &cfg.spawn.control_plane_url,
            session_id: &cfg.spawn.session_id,
            token: &cfg.spawn.sandbox_token,
        };
        match boot::wait_for_tunnels(
            ws,
            &cfg.spawn.sandbox_id,
            &cfg.spawn.tunnel_ports,
            cfg.tunnel_wait,
            Some(&source),
        )
        .await
        {
            Ok(()) => step.end(StepStatus::Succeeded, None, None),
            Err(missing) => {
                tracing::warn!(?missing, "tunnel.env_file_wait_timeout");
                events.send(SandboxEvent::Warning {
                    scope: "tunnel.env_file_wait_timeout".into(),
                    message: format!("no tunnel URL for ports {missing:?}"),
                });
                step.end(
                    StepStatus::Failed,
                    Some(format!("tunnel.env_file_wait_timeout: {missing:?}")),
                    None,
                );
            }
        }
    }

    let step = Step::begin(events, "start");
    let outcome = boot::run_hook(
        &hooks.join("start.sh"),
        &primary,
        boot::START_TIMEOUT,
        &hook_env,
    )
    .await?;
    // start.sh failing is always fatal.
    if let Err(detail) = boot::end_hook_step(step, "start.sh", boot::START_TIMEOUT, outcome) {
        anyhow::bail!(detail);
    }
    Ok(repos)
}
