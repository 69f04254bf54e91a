//! The repository registry (D1): which repositories sessions may use and where sandboxes
//! clone them from. Clone sources come from here only, never from a client's request.

use crate::db;
use inspect_protocol::session::{
    Actor, RegisterRepository, Repository, RepositoryList, RepositoryRef,
};
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::plane::Freshness;
use serde::Deserialize;
use worker::Env;

pub use inspect_protocol::limits::valid_repo_part as valid_part;

pub fn validate(req: &RegisterRepository) -> Result<(String, String), ApiError> {
    let owner = req.owner.clone().unwrap_or_else(|| "local".into());
    if !valid_part(&owner) || !valid_part(&req.name) {
        return Err(ApiError::bad_request(
            "owner and name are 1-100 letters, digits, '-', '_' or '.'",
        ));
    }
    if !req.path.starts_with('/')
        || req.path.len() > 4096
        || req.path.contains('\0')
        || req.path.split('/').any(|p| p == "..")
    {
        return Err(ApiError::bad_request(
            "path must be an absolute path on the host, without '..'",
        ));
    }
    if let Some(b) = &req.default_branch {
        if b.is_empty() || b.len() > 250 || b.starts_with('-') || b.contains("..") {
            return Err(ApiError::bad_request("invalid default branch"));
        }
    }
    Ok((owner, req.name.clone()))
}

#[derive(Deserialize)]
struct Row {
    owner: String,
    name: String,
    kind: String,
    source: String,
    default_branch: Option<String>,
    created_at: f64,
    #[serde(default)]
    private: Option<f64>,
    description: Option<String>,
    remote_updated_at: Option<String>,
}

impl From<Row> for Repository {
    fn from(r: Row) -> Self {
        Repository {
            owner: r.owner,
            name: r.name,
            kind: r.kind,
            source: r.source,
            default_branch: r.default_branch,
            created_at: r.created_at as i64,
            private: r.private.unwrap_or(0.0) != 0.0,
            description: r.description,
            updated_at: r.remote_updated_at,
        }
    }
}

const COLUMNS: &str =
    "owner, name, kind, source, default_branch, created_at, private, description, remote_updated_at";

/// Local repositories and, with a GitHub App, the installation's, synced with GitHub as
/// `freshness` says. GitHub being unreachable leaves the last copy in place.
pub async fn list(env: &Env, freshness: Freshness, now: i64) -> Result<RepositoryList, ApiError> {
    let sync = match freshness {
        Freshness::Kept => None,
        Freshness::SyncIfStale => Some(false),
        Freshness::SyncNow => Some(true),
    };
    if let (Some(force), Some(_)) = (sync, db::setting(env, "GITHUB_APP_ID")) {
        if let Err(e) = inspect_github::installation::sync_if_stale(env, now, force).await {
            inspect_runtime::log::emit(
                inspect_runtime::log::LogLine::warn("repositories", "sync_failed")
                    .detail(e.message),
            );
        }
    }
    let rows: Vec<Row> = db::all(
        env,
        &format!("SELECT {COLUMNS} FROM repositories ORDER BY owner, name"),
        &[],
    )
    .await?;
    Ok(RepositoryList {
        repositories: rows.into_iter().map(Into::into).collect(),
    })
}

pub async fn register(
    env: &Env,
    req: &RegisterRepository,
    actor: &Actor,
    now: i64,
) -> Result<Repository, ApiError> {
    let (owner, name) = validate(req)?;
    // The host that will clone it says whether it is a git repository with commits.
    let host = match inspect_local::LocalProvider::from_env(env) {
        Some(host) => host,
        None => {
            return Err(ApiError::new(
                ErrorCode::Unavailable,
                "local repositories need the local sandbox host (SANDBOX_HOST_URL)",
            ))
        }
    };
    let checked = host.check_repository(&req.path).await?;
    let default_branch = req.default_branch.clone().or(checked.branch);
    db::run(
        env,
        "INSERT INTO repositories (owner, name, source, kind, default_branch, created_by, created_at) VALUES (?1, ?2, ?3, 'local', ?4, ?5, ?6)
         ON CONFLICT(owner, name) DO UPDATE SET source = excluded.source, default_branch = excluded.default_branch, kind = 'local'",
        &[
            owner.as_str().into(),
            name.as_str().into(),
            req.path.as_str().into(),
            db::opt(default_branch.as_deref()),
            actor.user_id.as_str().into(),
            db::num(now),
        ],
    )
    .await?;
    Ok(Repository {
        owner,
        name,
        kind: "local".into(),
        source: req.path.clone(),
        default_branch,
        created_at: now,
        private: false,
        description: None,
        updated_at: None,
    })
}

pub async fn remove(env: &Env, owner: &str, name: &str) -> Result<bool, ApiError> {
    let changed = db::run(
        env,
        "DELETE FROM repositories WHERE owner = ?1 AND name = ?2",
        &[owner.into(), name.into()],
    )
    .await?;
    Ok(changed > 0)
}

/// Fills each repository's clone source (and default branch) from the registry, dropping
/// whatever the client sent; an unknown repository is refused.
pub async fn resolve(env: &Env, repos: &mut [RepositoryRef]) -> Result<(), ApiError> {
    if repos.is_empty() {
        return Ok(());
    }
    let sql = format!("SELECT {COLUMNS} FROM repositories WHERE owner = ?1 AND name = ?2");
    for r in repos.iter_mut() {
        r.source = None;
        let row: Option<Row> = db::first(
            env,
            &sql,
            &[r.owner.as_str().into(), r.name.as_str().into()],
        )
        .await?;
        let Some(row) = row else {
            if db::setting(env, "GITHUB_APP_ID").is_some() {
                let (source, default_branch) = github_source(env, &r.owner, &r.name).await?;
                r.source = Some(source);
                if r.branch.is_none() {
                    r.branch = default_branch;
                }
                continue;
            }
            return Err(ApiError::bad_request(format!(
                "unknown repository {}/{}; register it first (POST /repos)",
                r.owner, r.name
            )));
        };
        r.owner = row.owner;
        r.name = row.name;
        r.source = Some(row.source);
        if r.branch.is_none() {
            r.branch = row.default_branch;
        }
    }
    Ok(())
}

/// A GitHub repository the App can reach: its HTTPS clone URL (cloned through the
/// credential helper) and default branch. 403/404 mean the App has no access.
async fn github_source(
    env: &Env,
    owner: &str,
    name: &str,
) -> Result<(String, Option<String>), ApiError> {
    if !valid_part(owner) || !valid_part(name) {
        return Err(ApiError::bad_request("invalid repository name"));
    }
    #[derive(Deserialize)]
    struct GitHubRepo {
        clone_url: String,
        default_branch: Option<String>,
    }
    let token =
        inspect_github::app::installation_token(env, worker::Date::now().as_millis() as i64)
            .await?;
    let reply: inspect_github::client::Reply<GitHubRepo> =
        inspect_github::rest::get(env, &token.password, &format!("/repos/{owner}/{name}")).await?;
    match reply.body {
        Some(repo) => Ok((repo.clone_url, repo.default_branch)),
        None if matches!(reply.status, 403 | 404) => Err(ApiError::bad_request(format!(
            "the GitHub App cannot reach {owner}/{name}; install it on that repository"
        ))),
        None => Err(ApiError::new(
            ErrorCode::Unavailable,
            format!("GitHub answered {} for {owner}/{name}", reply.status),
        )),
    }
}

/// The fields of [`inspect_protocol::scm::RepoSettings`] as they travel.
const SETTINGS_FIELDS: &[&str] = &[
    "defaultModel",
    "alwaysDraft",
    "prLabel",
    "botEnabled",
    "autoReviewOnOpen",
    "allowedTriggerUsers",
    "defaultEnvironmentId",
    "reviewVerdicts",
    "reviewInstructions",
    "tunnelPorts",
    "signCommits",
];

/// `PUT /repos/:owner/:name/settings`: changes the fields the body names and keeps the
/// others (`null` clears one). An unknown field is a 400, not silently dropped.
pub async fn put_settings(
    env: &Env,
    owner: &str,
    name: &str,
    body: &[u8],
    actor: &Actor,
    now: i64,
) -> Result<inspect_protocol::scm::RepoSettings, ApiError> {
    if !valid_part(owner) || !valid_part(name) {
        return Err(ApiError::bad_request("invalid repository name"));
    }
    let changes: serde_json::Map<String, serde_json::Value> =
        inspect_protocol::json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("malformed settings: {e}")))?;
    if let Some(unknown) = changes
        .keys()
        .find(|k| !SETTINGS_FIELDS.contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "unknown setting {unknown:?}; the settings are {}",
            SETTINGS_FIELDS.join(", ")
        )));
    }
    let current = inspect_github::api::repo_settings(env, owner, name).await?;
    let mut merged = match serde_json::to_value(&current) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    for (k, v) in changes {
        if v.is_null() {
            merged.remove(&k);
        } else {
            merged.insert(k, v);
        }
    }
    let settings: inspect_protocol::scm::RepoSettings =
        serde_json::from_value(serde_json::Value::Object(merged))
            .map_err(|e| ApiError::bad_request(format!("malformed settings: {e}")))?;
    if let Some(label) = &settings.pr_label {
        if label.trim().is_empty() || label.len() > 50 {
            return Err(ApiError::bad_request("prLabel is 1 to 50 characters"));
        }
    }
    if let Some(model) = &settings.default_model {
        if model.is_empty() || model.len() > 100 || model.chars().any(char::is_control) {
            return Err(ApiError::bad_request("invalid defaultModel"));
        }
        let models = inspect_models::store::catalog(env).await?;
        inspect_models::check_model(&models, model)
            .map_err(|e| ApiError::bad_request(format!("defaultModel: {e}")))?;
    }
    if settings.allowed_trigger_users.len() > 100
        || settings
            .allowed_trigger_users
            .iter()
            .any(|u| !valid_part(u.trim_end_matches("[bot]")))
    {
        return Err(ApiError::bad_request(
            "allowedTriggerUsers holds up to 100 GitHub logins",
        ));
    }
    if settings
        .review_instructions
        .as_ref()
        .is_some_and(|t| t.chars().count() > inspect_protocol::scm::MAX_REVIEW_INSTRUCTIONS_CHARS)
    {
        return Err(ApiError::bad_request(format!(
            "reviewInstructions is at most {} characters",
            inspect_protocol::scm::MAX_REVIEW_INSTRUCTIONS_CHARS
        )));
    }
    if settings.tunnel_ports.len() > inspect_protocol::limits::MAX_TUNNEL_PORTS
        || settings.tunnel_ports.contains(&0)
    {
        return Err(ApiError::bad_request(format!(
            "tunnelPorts holds up to {} ports (1 to 65535)",
            inspect_protocol::limits::MAX_TUNNEL_PORTS
        )));
    }
    let json = serde_json::to_string(&settings).map_err(|e| ApiError::internal(e.to_string()))?;
    crate::db::run(
        env,
        "INSERT INTO repo_settings (owner, name, settings, updated_by, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(owner, name) DO UPDATE SET settings = excluded.settings, updated_by = excluded.updated_by, updated_at = excluded.updated_at",
        &[
            owner.into(),
            name.into(),
            json.as_str().into(),
            actor.user_id.as_str().into(),
            crate::db::num(now),
        ],
    )
    .await?;
    Ok(settings)
}
