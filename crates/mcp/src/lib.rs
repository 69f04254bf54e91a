//! MCP servers for the agent, decided here and kept in D1 (`store`, wasm). A server's name
//! is canonical (it prefixes its tools' names); a remote one has an `http(s)` URL, a local
//! one a command; values that could carry a credential (a header or environment variable
//! named like one, and any URL's query) may only hold secret references (`{secret:NAME}`),
//! which the sandbox resolves from the session's secrets when it writes the agent's
//! configuration. A session takes the enabled servers that apply to it when it is made.

use inspect_protocol::mcp::{
    McpScope, McpServer, McpServerRequest, McpTransport, SessionMcpServer,
};
use inspect_protocol::session::RepositoryRef;
use std::collections::BTreeMap;

#[cfg(target_arch = "wasm32")]
pub mod store;

const MAX_VALUE: usize = 2_000;
const MAX_ENTRIES: usize = 30;

/// The secret references in a value (`{secret:NAME}`), in order; an error for a malformed
/// one.
pub fn references(value: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(i) = rest.find("{secret:") {
        let after = &rest[i + "{secret:".len()..];
        let Some(end) = after.find('}') else {
            return Err(format!("an unclosed secret reference in {value:?}"));
        };
        let name = &after[..end];
        let ok = !name.is_empty()
            && name.len() <= 100
            && name.starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
            && name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if !ok {
            return Err(format!(
                "a secret reference names a secret: {{secret:NAME}} with NAME in A-Z, 0-9 and _, not {name:?}"
            ));
        }
        out.push(name.to_owned());
        rest = &after[end + 1..];
    }
    Ok(out)
}

/// Whether a header or variable name is one that carries credentials.
fn credential_like(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "authorization",
        "token",
        "key",
        "secret",
        "password",
        "cookie",
        "credential",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// A value as configured: bounded, printable, its references well formed; a credential's
/// value must be made of references (and fixed words like `Bearer`), never a literal
/// secret.
fn check_value(what: &str, name: &str, value: &str) -> Result<(), String> {
    if value.len() > MAX_VALUE || value.chars().any(char::is_control) {
        return Err(format!(
            "{what} {name}: at most {MAX_VALUE} printable characters"
        ));
    }
    let refs = references(value)?;
    if credential_like(name) {
        let mut literal = value.to_owned();
        for r in &refs {
            literal = literal.replace(&format!("{{secret:{r}}}"), "");
        }
        let literal = literal.trim();
        if refs.is_empty()
            || !(literal.is_empty()
                || literal == "Bearer"
                || literal == "Basic"
                || literal == "token")
        {
            return Err(format!(
                "{what} {name} carries a credential: name the secret that holds it ({{secret:NAME}}), never its value"
            ));
        }
    }
    Ok(())
}

/// Checks a server as it is to be saved.
pub fn check(req: &McpServerRequest) -> Result<(), String> {
    if let Some(name) = &req.name {
        inspect_skills::check_name(name).map_err(|e| e.replace("skill", "MCP server"))?;
    }
    match &req.server {
        McpTransport::Remote { url, headers } => {
            let parsed = url::Url::parse(url).map_err(|e| format!("the URL {url:?}: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                return Err(format!(
                    "a remote MCP server's URL is http(s)://host/…, not {url:?}"
                ));
            }
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(
                    "a URL carries no credentials; put them in a header as a secret reference"
                        .into(),
                );
            }
            let query = parsed.query().unwrap_or_default();
            check_value("the URL", "query", query)?;
            if references(query)?.is_empty() && credential_like(query) {
                return Err("the URL's query carries a credential: use a secret reference".into());
            }
            if headers.len() > MAX_ENTRIES {
                return Err(format!("at most {MAX_ENTRIES} headers"));
            }
            for (k, v) in headers {
                if k.is_empty()
                    || k.len() > 100
                    || !k
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                {
                    return Err(format!(
                        "a header's name is letters, digits, '-' and '_': {k:?}"
                    ));
                }
                check_value("the header", k, v)?;
            }
        }
        McpTransport::Local {
            command,
            environment,
        } => {
            if command.is_empty() || command.len() > 50 || command[0].trim().is_empty() {
                return Err(
                    "a local MCP server's command is a program and its arguments (at most 50)"
                        .into(),
                );
            }
            for part in command {
                check_value("the command", "argument", part)?;
                if !references(part)?.is_empty() {
                    return Err("secrets go to a local server through its environment, not its command line".into());
                }
            }
            if environment.len() > MAX_ENTRIES {
                return Err(format!("at most {MAX_ENTRIES} environment variables"));
            }
            for (k, v) in environment {
                if k.is_empty()
                    || k.len() > 100
                    || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return Err(format!(
                        "an environment variable's name is letters, digits and '_': {k:?}"
                    ));
                }
                check_value("the variable", k, v)?;
            }
        }
    }
    if let McpScope::Repository { owner, name } = &req.scope {
        if owner.is_empty() || name.is_empty() || owner.len() > 100 || name.len() > 100 {
            return Err("a repository scope names owner and name".into());
        }
    }
    if let McpScope::Environment { id } = &req.scope {
        if id.is_empty() || id.len() > 100 {
            return Err("an environment scope names its id".into());
        }
    }
    Ok(())
}

/// The servers a new session takes: the enabled ones that apply, by name.
pub fn for_session(
    servers: &[McpServer],
    repositories: &[RepositoryRef],
    environment: Option<&str>,
) -> Vec<SessionMcpServer> {
    let mut out: Vec<SessionMcpServer> = servers
        .iter()
        .filter(|s| {
            s.enabled
                && inspect_skills::applies(
                    std::slice::from_ref(&s.scope),
                    repositories,
                    environment,
                )
        })
        .map(|s| SessionMcpServer {
            name: s.name.clone(),
            server: s.server.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.truncate(inspect_protocol::mcp::MAX_MCP_SERVERS);
    out
}

/// A value with its references replaced by the secrets' values (`lookup`); the names of the
/// secrets that are missing.
pub fn resolve(
    value: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, Vec<String>> {
    let refs = references(value).unwrap_or_default();
    let missing: Vec<String> = refs
        .iter()
        .filter(|r| lookup(r).is_none())
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(missing);
    }
    let mut out = value.to_owned();
    for r in refs {
        out = out.replace(&format!("{{secret:{r}}}"), &lookup(&r).unwrap_or_default());
    }
    Ok(out)
}

/// Every value of a server resolved; the missing secrets' names when one is not set.
pub fn resolve_server(
    server: &McpTransport,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<McpTransport, Vec<String>> {
    let map = |m: &BTreeMap<String, String>| -> Result<BTreeMap<String, String>, Vec<String>> {
        let mut out = BTreeMap::new();
        let mut missing = Vec::new();
        for (k, v) in m {
            match resolve(v, lookup) {
                Ok(v) => {
                    out.insert(k.clone(), v);
                }
                Err(m) => missing.extend(m),
            }
        }
        match missing.is_empty() {
            true => Ok(out),
            false => Err(missing),
        }
    };
    Ok(match server {
        McpTransport::Remote { url, headers } => McpTransport::Remote {
            url: resolve(url, lookup)?,
            headers: map(headers)?,
        },
        McpTransport::Local {
            command,
            environment,
        } => McpTransport::Local {
            command: command.clone(),
            environment: map(environment)?,
        },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn remote(url: &str, headers: &[(&str, &str)]) -> McpServerRequest {
        McpServerRequest {
            name: Some("docs".into()),
            server: McpTransport::Remote {
                url: url.into(),
                headers: headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            },
            scope: McpScope::All,
            enabled: true,
        }
    }

    #[test]
    fn credentials_are_secret_references_never_values() {
        assert!(check(&remote(
            "https://mcp.example.com/mcp",
            &[("Authorization", "Bearer {secret:DOCS_TOKEN}")]
        ))
        .is_ok());
        assert!(check(&remote(
            "https://mcp.example.com/mcp",
            &[("X-Team", "platform")]
        ))
        .is_ok());
        for bad in [
            remote(
                "https://mcp.example.com/mcp",
                &[("Authorization", "Bearer sk-live-123")],
            ),
            remote("https://mcp.example.com/mcp", &[("X-Api-Key", "abc")]),
            remote("https://user:pw@mcp.example.com/mcp", &[]),
            remote("ftp://mcp.example.com", &[]),
            remote("https://mcp.example.com/mcp?apiKey=abc", &[]),
            remote(
                "https://mcp.example.com/mcp",
                &[("Authorization", "Bearer {secret:lower}")],
            ),
            remote(
                "https://mcp.example.com/mcp",
                &[("Authorization", "Bearer {secret:OPEN")],
            ),
        ] {
            assert!(check(&bad).is_err(), "{bad:?}");
        }
        assert!(check(&remote(
            "https://mcp.example.com/mcp?apiKey={secret:K}",
            &[]
        ))
        .is_ok());
        let local = McpServerRequest {
            name: Some("files".into()),
            server: McpTransport::Local {
                command: vec!["npx".into(), "--token={secret:T}".into()],
                environment: BTreeMap::new(),
            },
            scope: McpScope::All,
            enabled: true,
        };
        assert!(check(&local).unwrap_err().contains("environment"));
        let mut named = remote("https://x.example/mcp", &[]);
        named.name = Some("Bad Name".into());
        assert!(check(&named).is_err());
    }

    #[test]
    fn references_resolve_from_the_sessions_secrets() {
        let lookup = |n: &str| (n == "DOCS_TOKEN").then(|| "t0k".to_string());
        assert_eq!(
            resolve("Bearer {secret:DOCS_TOKEN}", &lookup).unwrap(),
            "Bearer t0k"
        );
        assert_eq!(
            resolve("{secret:NOPE}", &lookup).unwrap_err(),
            vec!["NOPE".to_string()]
        );
        let s = McpTransport::Remote {
            url: "https://x/mcp".into(),
            headers: [(
                "Authorization".to_string(),
                "Bearer {secret:DOCS_TOKEN}".to_string(),
            )]
            .into(),
        };
        match resolve_server(&s, &lookup).unwrap() {
            McpTransport::Remote { headers, .. } => {
                assert_eq!(headers["Authorization"], "Bearer t0k")
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn sessions_take_the_enabled_servers_that_apply() {
        let server = |name: &str, scope: McpScope, enabled: bool| McpServer {
            name: name.into(),
            server: McpTransport::Remote {
                url: "https://x/mcp".into(),
                headers: BTreeMap::new(),
            },
            scope,
            enabled,
            updated_by: "u".into(),
            updated_at: 0,
        };
        let servers = [
            server("everyone", McpScope::All, true),
            server("off", McpScope::All, false),
            server(
                "web",
                McpScope::Repository {
                    owner: "acme".into(),
                    name: "web".into(),
                },
                true,
            ),
            server(
                "staging",
                McpScope::Environment { id: "env_1".into() },
                true,
            ),
        ];
        let repo = RepositoryRef {
            owner: "Acme".into(),
            name: "Web".into(),
            branch: None,
            source: None,
        };
        let names = |v: Vec<SessionMcpServer>| v.into_iter().map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(
            names(for_session(&servers, &[repo], None)),
            ["everyone", "web"]
        );
        assert_eq!(
            names(for_session(&servers, &[], Some("env_1"))),
            ["everyone", "staging"]
        );
    }
}
