-- MCP servers for the agent: a remote URL or a local command (JSON), where it applies
-- (JSON), whether it is enabled. Secret values never appear here: only references.
CREATE TABLE IF NOT EXISTS mcp_servers (
  name TEXT PRIMARY KEY,
  server TEXT NOT NULL,
  scope TEXT NOT NULL,
  enabled INTEGER NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
