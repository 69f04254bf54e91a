//! MCP servers in D1 (`migrations/0015_mcp_servers.sql`).

use crate::check;
use inspect_protocol::mcp::{McpServer, McpServerList, McpServerRequest, SessionMcpServer};
use inspect_protocol::session::RepositoryRef;
use inspect_protocol::ApiError;
use inspect_runtime::d1::{all, first, num, run};
use serde::Deserialize;
use worker::Env;

#[derive(Deserialize)]
struct Row {
    name: String,
    server: String,
    scope: String,
    enabled: f64,
    updated_by: String,
    updated_at: f64,
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(e.to_string())
}

impl Row {
    fn into_server(self) -> Result<McpServer, ApiError> {
        Ok(McpServer {
            name: self.name,
            server: serde_json::from_str(&self.server).map_err(internal)?,
            scope: serde_json::from_str(&self.scope).map_err(internal)?,
            enabled: self.enabled > 0.0,
            updated_by: self.updated_by,
            updated_at: self.updated_at as i64,
        })
    }
}

const SELECT: &str = "SELECT name, server, scope, enabled, updated_by, updated_at FROM mcp_servers";

pub async fn list(env: &Env) -> Result<McpServerList, ApiError> {
    let rows: Vec<Row> = all(env, &format!("{SELECT} ORDER BY name"), &[]).await?;
    Ok(McpServerList {
        servers: rows
            .into_iter()
            .map(Row::into_server)
            .collect::<Result<_, _>>()?,
    })
}

pub async fn get(env: &Env, name: &str) -> Result<McpServer, ApiError> {
    let row: Option<Row> = first(env, &format!("{SELECT} WHERE name = ?1"), &[name.into()]).await?;
    row.ok_or_else(|| ApiError::not_found(format!("no MCP server {name}")))?
        .into_server()
}

/// `POST /mcp-servers` (`name` in the body; a taken name is a 409) and
/// `PUT /mcp-servers/:name` (`existing`: it must exist).
pub async fn save(
    env: &Env,
    name: Option<&str>,
    req: &McpServerRequest,
    by: &str,
    now: i64,
) -> Result<McpServer, ApiError> {
    check(req).map_err(ApiError::bad_request)?;
    let (name, creating) = match (name, &req.name) {
        (Some(path), Some(body)) if path != body => {
            return Err(ApiError::bad_request("an MCP server's name never changes"))
        }
        (Some(path), _) => (path.to_owned(), false),
        (None, Some(body)) => (body.clone(), true),
        (None, None) => return Err(ApiError::bad_request("a new MCP server needs a name")),
    };
    let server = serde_json::to_string(&req.server).map_err(internal)?;
    let scope = serde_json::to_string(&req.scope).map_err(internal)?;
    let args = [
        name.as_str().into(),
        server.into(),
        scope.into(),
        num(i64::from(req.enabled)),
        by.into(),
        num(now),
    ];
    let changed = if creating {
        run(
            env,
            "INSERT INTO mcp_servers (name, server, scope, enabled, updated_by, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (name) DO NOTHING",
            &args,
        )
        .await?
    } else {
        run(
            env,
            "UPDATE mcp_servers SET server = ?2, scope = ?3, enabled = ?4, updated_by = ?5, updated_at = ?6 WHERE name = ?1",
            &args,
        )
        .await?
    };
    match (changed, creating) {
        (0, true) => Err(ApiError::conflict(format!(
            "an MCP server named {name} exists"
        ))),
        (0, false) => Err(ApiError::not_found(format!("no MCP server {name}"))),
        _ => get(env, &name).await,
    }
}

pub async fn delete(env: &Env, name: &str) -> Result<(), ApiError> {
    match run(
        env,
        "DELETE FROM mcp_servers WHERE name = ?1",
        &[name.into()],
    )
    .await?
    {
        0 => Err(ApiError::not_found(format!("no MCP server {name}"))),
        _ => Ok(()),
    }
}

/// The servers a new session on these repositories (or environment) takes.
pub async fn for_session(
    env: &Env,
    repositories: &[RepositoryRef],
    environment: Option<&str>,
) -> Result<Vec<SessionMcpServer>, ApiError> {
    let servers = list(env).await?.servers;
    Ok(crate::for_session(&servers, repositories, environment))
}
