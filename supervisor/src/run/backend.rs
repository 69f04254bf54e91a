//! The agent a sandbox runs, whichever it is: OpenCode (the default) or Claude Code. The
//! supervisor's loop asks the same things of each — start, a prompt, a stop, its events,
//! how a turn ended — and each answers in its own way; a turn's events are mapped to the
//! session's by the agent's own mapper.

use super::agent::{self, AgentConfig};
use super::claude::{ClaudeAgent, ClaudeMapper};
use super::mapping::{TurnMapper, TurnSignal};
use anyhow::Result;
use inspect_protocol::sandbox::SandboxEvent;
use inspect_protocol::session::AgentKind;
use serde_json::Value;
use std::collections::HashSet;
use std::path::PathBuf;
use tokio::sync::mpsc;

/// Where Claude Code's binary is, and its model endpoint (OpenCode's binary is the
/// agent configuration's).
#[derive(Clone)]
pub struct Binaries {
    pub claude: PathBuf,
    /// An Anthropic-compatible endpoint for Claude Code (`ANTHROPIC_BASE_URL`).
    pub anthropic_base_url: Option<String>,
}

pub enum Backend {
    OpenCode(agent::Agent),
    Claude(ClaudeAgent),
}

impl Backend {
    /// Starts the agent's process (OpenCode) or prepares its state (Claude Code).
    pub fn spawn(kind: AgentKind, cfg: &AgentConfig, bins: &Binaries) -> Result<Backend> {
        Ok(match kind {
            AgentKind::Opencode => Backend::OpenCode(agent::Agent::spawn(cfg)?),
            AgentKind::ClaudeCode => Backend::Claude(ClaudeAgent::spawn(
                cfg,
                bins.claude.clone(),
                bins.anthropic_base_url.clone(),
            )?),
        })
    }

    /// Started and answering.
    pub async fn start(kind: AgentKind, cfg: &AgentConfig, bins: &Binaries) -> Result<Backend> {
        let mut b = Backend::spawn(kind, cfg, bins)?;
        b.ready().await?;
        Ok(b)
    }

    pub async fn ready(&mut self) -> Result<()> {
        match self {
            Backend::OpenCode(a) => a.ready().await,
            Backend::Claude(a) => a.ready().await,
        }
    }

    pub fn warm_up(&self) {
        if let Backend::OpenCode(a) = self {
            drop(a.warm_up());
        }
    }

    /// The agent's own session (OpenCode's; Claude Code's conversation starts with the
    /// first prompt).
    pub fn session_id(&self) -> Option<String> {
        match self {
            Backend::OpenCode(a) => Some(a.session_id.clone()),
            Backend::Claude(_) => None,
        }
    }

    pub async fn prompt(
        &self,
        text: &str,
        model: Option<&str>,
        effort: Option<&str>,
    ) -> Result<()> {
        match self {
            Backend::OpenCode(a) => a.prompt(text, model, effort).await,
            Backend::Claude(a) => a.prompt(text, model, effort).await,
        }
    }

    pub async fn abort(&self) -> Result<()> {
        match self {
            Backend::OpenCode(a) => a.abort().await,
            Backend::Claude(a) => a.abort().await,
        }
    }

    pub async fn answer_permission(&self, id: &str) -> Result<()> {
        match self {
            Backend::OpenCode(a) => a.answer_permission(id).await,
            // Claude Code runs with its permissions skipped: it never asks.
            Backend::Claude(_) => Ok(()),
        }
    }

    /// How the MCP servers are, as OpenCode says it; `None` when the agent connects them
    /// only as a prompt starts (Claude Code).
    pub async fn mcp_status(&self) -> Option<Result<Value>> {
        match self {
            Backend::OpenCode(a) => Some(a.mcp_status().await),
            Backend::Claude(_) => None,
        }
    }

    /// Whether a long-running agent process died (Claude Code runs one per prompt).
    pub fn exited(&mut self) -> bool {
        match self {
            Backend::OpenCode(a) => a.exited(),
            Backend::Claude(_) => false,
        }
    }

    pub fn stream_events(&self, tx: mpsc::UnboundedSender<Value>) -> tokio::task::JoinHandle<()> {
        match self {
            Backend::OpenCode(a) => a.stream_events(tx),
            Backend::Claude(a) => a.stream_events(tx),
        }
    }

    /// A turn's mapper for this agent.
    pub fn mapper(&self, message_id: &str, earlier: HashSet<String>) -> Mapper {
        match self {
            Backend::OpenCode(a) => {
                Mapper::OpenCode(TurnMapper::after(message_id, &a.session_id, earlier))
            }
            Backend::Claude(_) => Mapper::Claude(ClaudeMapper::new(message_id)),
        }
    }

    /// When the stream was lost or went quiet: whether the turn ended, from the agent's
    /// own record (OpenCode keeps one; a Claude Code turn ends with its process, which is
    /// always heard). `None` while it runs.
    pub async fn recover(&self, produced_output: bool) -> Option<(bool, Option<String>)> {
        let Backend::OpenCode(a) = self else {
            return None;
        };
        let messages = a.messages().await.ok()?;
        let (finished, error) = agent::last_turn_state(&messages)?;
        if !finished {
            return None;
        }
        Some(match error {
            Some(e) => (false, Some(e)),
            None if produced_output => (true, None),
            None => (
                false,
                Some("the agent finished without producing any output".into()),
            ),
        })
    }
}

/// A turn's mapping of its agent's events.
pub enum Mapper {
    OpenCode(TurnMapper),
    Claude(ClaudeMapper),
}

impl Mapper {
    pub fn on_event(&mut self, ev: &Value) -> (Vec<SandboxEvent>, TurnSignal) {
        match self {
            Mapper::OpenCode(m) => m.on_event(ev),
            Mapper::Claude(m) => m.on_event(ev),
        }
    }

    pub fn message_id(&self) -> &str {
        match self {
            Mapper::OpenCode(m) => &m.message_id,
            Mapper::Claude(m) => &m.message_id,
        }
    }

    pub fn produced_output(&self) -> bool {
        match self {
            Mapper::OpenCode(m) => m.produced_output,
            Mapper::Claude(m) => m.produced_output,
        }
    }

    /// The agent messages the turn has seen (OpenCode's: a later turn ignores them).
    pub fn messages(&self) -> Vec<String> {
        match self {
            Mapper::OpenCode(m) => m.messages().cloned().collect(),
            Mapper::Claude(_) => Vec::new(),
        }
    }

    pub fn outcome(&self) -> (bool, Option<String>) {
        match self {
            Mapper::OpenCode(m) => m.outcome(),
            Mapper::Claude(m) => m.outcome(),
        }
    }
}
