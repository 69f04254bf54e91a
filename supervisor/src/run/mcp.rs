//! The session's MCP servers in the agent's configuration: each server's secret references
//! resolved from the sandbox's environment (the session's secrets), then, once the agent
//! is up, which connected and which failed, said in the boot step `mcp`.

use inspect_protocol::mcp::{McpTransport, SessionMcpServer};
use serde_json::{json, Map, Value};

/// OpenCode's `mcp` configuration for the servers whose secrets are all set, and a sentence
/// for each one left out.
pub fn configuration(
    servers: &[SessionMcpServer],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> (Map<String, Value>, Vec<String>) {
    let mut config = Map::new();
    let mut left_out = Vec::new();
    for s in servers {
        match inspect_mcp::resolve_server(&s.server, lookup) {
            Ok(McpTransport::Remote { url, headers }) => {
                config.insert(
                    s.name.clone(),
                    json!({"type": "remote", "url": url, "headers": headers, "enabled": true}),
                );
            }
            Ok(McpTransport::Local {
                command,
                environment,
            }) => {
                config.insert(
                    s.name.clone(),
                    json!({"type": "local", "command": command, "environment": environment, "enabled": true}),
                );
            }
            Err(missing) => left_out.push(format!(
                "{}: not started, the secret{} {} {} not set",
                s.name,
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", "),
                if missing.len() == 1 { "is" } else { "are" },
            )),
        }
    }
    (config, left_out)
}

/// Adds the agent's browser (`inspect-supervisor browser-mcp`, this binary) to the
/// configuration as the server `browser`, unless the session brings a server of that name:
/// then the session's stays, and the sentence saying so.
pub fn offer_browser(
    config: &mut Map<String, Value>,
    exe: &std::path::Path,
    api: &super::agent_api::AgentApi,
) -> Option<String> {
    let name = super::browser_mcp::SERVER_NAME;
    if config.contains_key(name) {
        return Some(format!(
            "{name}: the session's own server of that name is used, not the built-in browser"
        ));
    }
    config.insert(
        name.into(),
        json!({
            "type": "local",
            "command": [exe.display().to_string(), "browser-mcp"],
            "environment": {
                super::agent_api::URL_VAR: api.url,
                super::agent_api::KEY_VAR: api.key,
            },
            "enabled": true,
        }),
    );
    None
}

/// OpenCode's `GET /mcp` answer as one line per server: connected, or failed and why.
pub fn described(status: &Value) -> (String, bool) {
    let mut parts = Vec::new();
    let mut all_up = true;
    if let Some(map) = status.as_object() {
        for (name, s) in map {
            let state = s["status"].as_str().unwrap_or("unknown");
            if state == "connected" {
                parts.push(format!("{name}: connected"));
            } else {
                all_up = false;
                let why = s["error"].as_str().unwrap_or_default();
                let why: String = why.chars().take(300).collect();
                parts.push(match why.is_empty() {
                    true => format!("{name}: {state}"),
                    false => format!("{name}: {state} ({why})"),
                });
            }
        }
    }
    (parts.join("; "), all_up)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn servers_get_their_secrets_or_are_left_out_in_words() {
        let remote = |name: &str, header: &str| SessionMcpServer {
            name: name.into(),
            server: McpTransport::Remote {
                url: "https://mcp.example/mcp".into(),
                headers: [("Authorization".to_string(), header.to_string())].into(),
            },
        };
        let lookup = |n: &str| (n == "DOCS_TOKEN").then(|| "t0k".to_string());
        let (config, left_out) = configuration(
            &[
                remote("docs", "Bearer {secret:DOCS_TOKEN}"),
                remote("other", "Bearer {secret:MISSING}"),
            ],
            &lookup,
        );
        assert_eq!(config["docs"]["headers"]["Authorization"], "Bearer t0k");
        assert!(!config.contains_key("other"));
        assert_eq!(
            left_out,
            ["other: not started, the secret MISSING is not set"]
        );
        let (line, up) = described(
            &json!({"docs": {"status": "connected"}, "dead": {"status": "failed", "error": "connection refused"}}),
        );
        assert_eq!(line, "dead: failed (connection refused); docs: connected");
        assert!(!up);
    }

    #[test]
    fn the_browser_is_offered_unless_the_session_brings_its_own() {
        let api = crate::run::agent_api::AgentApi {
            url: "http://127.0.0.1:9/".into(),
            key: "k".into(),
        };
        let exe = std::path::Path::new("/usr/local/bin/inspect-supervisor");
        let mut config = Map::new();
        assert_eq!(offer_browser(&mut config, exe, &api), None);
        assert_eq!(config["browser"]["command"][1], "browser-mcp");
        assert_eq!(
            config["browser"]["environment"]["OPEN_INSPECT_AGENT_KEY"],
            "k"
        );
        let mut theirs = Map::new();
        theirs.insert(
            "browser".into(),
            json!({"type": "remote", "url": "https://b.example/mcp"}),
        );
        let note = offer_browser(&mut theirs, exe, &api).unwrap();
        assert!(note.contains("session's own server"), "{note}");
        assert_eq!(theirs["browser"]["type"], "remote");
    }
}
