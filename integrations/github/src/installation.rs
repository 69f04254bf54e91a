//! The repositories the GitHub App's installation can reach, kept in D1 (kind `github`):
//! synced from `GET /installation/repositories` (every page, archived ones dropped) on
//! demand, when the copy is stale, and by the cron trigger; branches asked of GitHub.

use crate::client::Reply;
use crate::rest;
use inspect_protocol::session::BranchList;
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::d1::{self as db, num};
use serde::Deserialize;
use worker::wasm_bindgen::JsValue;
use worker::Env;

/// A copy older than this is refreshed when the list is asked for.
const STALE_MS: i64 = 10 * 60 * 1000;
/// Pages of 100 read at most (10,000 repositories).
const MAX_PAGES: usize = 100;

#[derive(Deserialize)]
struct Owner {
    login: String,
}

#[derive(Deserialize)]
struct InstallationRepo {
    name: String,
    owner: Owner,
    #[serde(default)]
    private: bool,
    #[serde(default)]
    archived: bool,
    description: Option<String>,
    default_branch: Option<String>,
    clone_url: String,
    updated_at: Option<String>,
}

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    total_count: usize,
    repositories: Vec<InstallationRepo>,
}

fn upstream(what: &str, r: &Reply<impl Sized>) -> ApiError {
    ApiError::new(
        ErrorCode::Unavailable,
        format!(
            "GitHub answered {} to {what}{}",
            r.status,
            r.error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ),
    )
}

/// Syncs when the last sync is older than [`STALE_MS`] (or `force`).
pub async fn sync_if_stale(env: &Env, now: i64, force: bool) -> Result<(), ApiError> {
    #[derive(Deserialize)]
    struct Last {
        synced_at: f64,
    }
    if !force {
        let last: Option<Last> =
            db::first(env, "SELECT synced_at FROM github_sync WHERE id = 1", &[]).await?;
        if last.is_some_and(|l| now - (l.synced_at as i64) < STALE_MS) {
            return Ok(());
        }
    }
    sync(env, now).await.map(|_| ())
}

/// Reads every page of the installation's repositories and makes D1's copy match;
/// returns how many there are.
pub async fn sync(env: &Env, now: i64) -> Result<usize, ApiError> {
    let token = crate::api::app_token(env, now).await?;
    let mut repos = Vec::new();
    for page in 1..=MAX_PAGES {
        let r: Reply<Page> = rest::get(
            env,
            &token,
            &format!("/installation/repositories?per_page=100&page={page}"),
        )
        .await?;
        let Some(body) = r.body.as_ref() else {
            let err = upstream("the installation's repositories", &r);
            // Kept for /health; the last good sync's time stays, so the next list tries again.
            let _ = db::run(
                env,
                "INSERT INTO github_sync (id, synced_at, repositories, error) VALUES (1, 0, 0, ?1)
                 ON CONFLICT(id) DO UPDATE SET error = excluded.error",
                &[err.message.as_str().into()],
            )
            .await;
            return Err(err);
        };
        let got = body.repositories.len();
        let total = body.total_count;
        repos.extend(r.body.into_iter().flat_map(|b| b.repositories));
        if got < 100 || repos.len() >= total {
            break;
        }
    }
    repos.retain(|r| {
        !r.archived
            && inspect_protocol::limits::valid_repo_part(&r.owner.login)
            && inspect_protocol::limits::valid_repo_part(&r.name)
    });
    let database = db::database(env)?;
    let mut statements = Vec::new();
    for r in &repos {
        statements.push(
            database
                .prepare(
                    "INSERT INTO repositories (owner, name, source, kind, default_branch, created_by, created_at, private, description, remote_updated_at, synced_at)
                     VALUES (?1, ?2, ?3, 'github', ?4, 'github-app', ?5, ?6, ?7, ?8, ?5)
                     ON CONFLICT(owner, name) DO UPDATE SET source = excluded.source, default_branch = excluded.default_branch, private = excluded.private,
                       description = excluded.description, remote_updated_at = excluded.remote_updated_at, synced_at = excluded.synced_at
                     WHERE repositories.kind = 'github'",
                )
                .bind(&[
                    r.owner.login.as_str().into(),
                    r.name.as_str().into(),
                    r.clone_url.as_str().into(),
                    db::opt(r.default_branch.as_deref()),
                    num(now),
                    JsValue::from_f64(if r.private { 1.0 } else { 0.0 }),
                    db::opt(r.description.as_deref()),
                    db::opt(r.updated_at.as_deref()),
                ])
                .map_err(db::unavailable)?,
        );
    }
    // What the installation no longer reaches (removed, archived) goes.
    statements.push(
        database
            .prepare("DELETE FROM repositories WHERE kind = 'github' AND (synced_at IS NULL OR synced_at < ?1)")
            .bind(&[num(now)])
            .map_err(db::unavailable)?,
    );
    statements.push(
        database
            .prepare(
                "INSERT INTO github_sync (id, synced_at, repositories, error) VALUES (1, ?1, ?2, NULL)
                 ON CONFLICT(id) DO UPDATE SET synced_at = excluded.synced_at, repositories = excluded.repositories, error = NULL",
            )
            .bind(&[num(now), num(repos.len() as i64)])
            .map_err(db::unavailable)?,
    );
    for chunk in statements.chunks(50) {
        database
            .batch(chunk.to_vec())
            .await
            .map_err(db::unavailable)?;
    }
    Ok(repos.len())
}

/// A repository's branches, asked of GitHub for GitHub repositories (up to 500); a local
/// repository answers its default branch only.
pub async fn branches(
    env: &Env,
    owner: &str,
    name: &str,
    now: i64,
) -> Result<BranchList, ApiError> {
    #[derive(Deserialize)]
    struct Known {
        kind: String,
        default_branch: Option<String>,
    }
    let known: Option<Known> = db::first(
        env,
        "SELECT kind, default_branch FROM repositories WHERE owner = ?1 AND name = ?2",
        &[owner.into(), name.into()],
    )
    .await?;
    let Some(known) = known else {
        return Err(ApiError::not_found(format!("no repository {owner}/{name}")));
    };
    if known.kind != "github" {
        return Ok(BranchList {
            branches: known.default_branch.iter().cloned().collect(),
            default_branch: known.default_branch,
        });
    }
    #[derive(Deserialize)]
    struct Branch {
        name: String,
    }
    let token = crate::api::app_token(env, now).await?;
    let mut branches = Vec::new();
    for page in 1..=5 {
        let r: Reply<Vec<Branch>> = rest::get(
            env,
            &token,
            &format!("/repos/{owner}/{name}/branches?per_page=100&page={page}"),
        )
        .await?;
        let Some(list) = r.body.as_ref() else {
            return Err(upstream("a branch listing", &r));
        };
        let got = list.len();
        branches.extend(r.body.into_iter().flatten().map(|b| b.name));
        if got < 100 {
            break;
        }
    }
    Ok(BranchList {
        branches,
        default_branch: known.default_branch,
    })
}
