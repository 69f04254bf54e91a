//! Makes a session's branch signed (see `signing`): the commits from where it left `base`
//! made again with the App's installation token, then the branch moved onto them.

use crate::signing::{self, Comparison};
use crate::{api, rest};
use inspect_protocol::{ApiError, ErrorCode};
use serde::Deserialize;
use worker::{Env, Method};

#[derive(Deserialize)]
struct Made {
    sha: String,
}

fn refused(what: &str, status: u16, error: Option<String>) -> ApiError {
    ApiError::new(
        ErrorCode::Unavailable,
        format!(
            "signing the branch: {what} answered {status}{}",
            error.map(|e| format!(": {e}")).unwrap_or_default()
        ),
    )
}

/// Signs `branch` of `owner/name` from where it left `base`: the new head, and how many
/// commits were made again (0 when every one was signed already).
pub async fn sign_branch(
    env: &Env,
    owner: &str,
    name: &str,
    base: &str,
    branch: &str,
    now: i64,
) -> Result<(String, usize), ApiError> {
    let token = api::app_token(env, now).await?;
    let path = format!("/repos/{owner}/{name}/compare/{base}...{branch}");
    let reply = rest::get::<Comparison>(env, &token, &path).await?;
    let status = reply.status;
    let cmp = reply
        .body
        .ok_or_else(|| refused("the comparison", status, reply.error))?;
    if cmp.total_commits > signing::MAX_COMMITS {
        return Err(ApiError::bad_request(format!(
            "the branch has {} commits beyond {base}; at most {} are signed",
            cmp.total_commits,
            signing::MAX_COMMITS
        )));
    }
    let mut parent = cmp.merge_base_commit.sha.clone();
    let mut remade = 0;
    for c in &cmp.commits {
        if remade == 0 && signing::keeps(c, &parent) {
            parent = c.sha.clone();
            continue;
        }
        let made = rest::send_json::<Made>(
            env,
            Method::Post,
            &token,
            &format!("/repos/{owner}/{name}/git/commits"),
            &signing::remake(c, &parent),
        )
        .await?;
        let status = made.status;
        parent = made
            .body
            .ok_or_else(|| refused("a commit", status, made.error))?
            .sha;
        remade += 1;
    }
    if remade > 0 {
        let moved = rest::send_json::<serde_json::Value>(
            env,
            Method::Patch,
            &token,
            &format!("/repos/{owner}/{name}/git/refs/heads/{branch}"),
            &serde_json::json!({ "sha": parent, "force": true }),
        )
        .await?;
        if moved.body.is_none() {
            return Err(refused("moving the branch", moved.status, moved.error));
        }
    }
    Ok((parent, remade))
}
