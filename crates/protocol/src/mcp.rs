//! MCP servers the agent is given: remote (streamable HTTP or SSE, by URL) or local (a
//! command run in the sandbox), configured for every session, a repository or an
//! environment. Header and environment values name secrets by reference
//! (`{secret:NAME}`), resolved in the sandbox from the session's secrets, never stored in
//! the configuration.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const MAX_MCP_SERVERS: usize = 20;
/// What an MCP server is (OpenCode's `type`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum McpTransport {
    Remote {
        url: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
    Local {
        command: Vec<String>,
        #[serde(default)]
        environment: BTreeMap<String, String>,
    },
}

/// Where a server is given to the agent: as a skill is assigned (every session, a
/// repository, an environment).
pub use crate::skills::SkillAssignment as McpScope;

/// `POST /mcp-servers` (with `name`), `PUT /mcp-servers/:name`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServerRequest {
    #[serde(default)]
    pub name: Option<String>,
    pub server: McpTransport,
    #[serde(default = "all")]
    pub scope: McpScope,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn all() -> McpScope {
    McpScope::All
}

fn yes() -> bool {
    true
}

/// An MCP server as kept (and as a session's sandbox receives it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct McpServer {
    pub name: String,
    pub server: McpTransport,
    pub scope: McpScope,
    pub enabled: bool,
    pub updated_by: String,
    pub updated_at: i64,
}

/// `GET /mcp-servers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct McpServerList {
    pub servers: Vec<McpServer>,
}

/// A server as a session's sandbox gets it: its name and transport, references unresolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionMcpServer {
    pub name: String,
    pub server: McpTransport,
}
