//! The coding agents a session's sandbox can run.

use serde::{Deserialize, Serialize};

/// Which coding agent works in a session's sandbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "kebab-case")]
pub enum AgentKind {
    /// OpenCode (`opencode serve`, driven over HTTP).
    #[default]
    Opencode,
    /// Claude Code (`claude -p` per prompt, its stream-json read).
    ClaudeCode,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Opencode => "opencode",
            AgentKind::ClaudeCode => "claude-code",
        }
    }
}
