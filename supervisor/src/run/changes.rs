//! The changes panel's side in the sandbox: each repository remembers the commit its
//! session started from (`refs/inspect/base`, kept in the workspace, so a restored or
//! resumed one still knows it), and after every turn the workspace's change against it is
//! captured (`inspect_changes`) and sent to the session (`PUT /sessions/:id/changes`,
//! with the sandbox's token) before the turn is said to be over.

use super::git::git;
use anyhow::Result;
use inspect_protocol::changes::{ChangesReport, RepoChanges, MAX_PATCH_BYTES_TOTAL};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// Where a repository keeps its session's base commit.
pub const BASE_REF: &str = "refs/inspect/base";

/// Records the commit the session's change is read against: where the work branch left
/// its base branch (the remote's default when none was asked). Kept when it is there,
/// unless `anew` (a new session's workspace).
pub async fn mark_base(dir: &Path, base_branch: Option<&str>, anew: bool) -> Result<()> {
    if !anew
        && git(dir, &["rev-parse", "--verify", "--quiet", BASE_REF])
            .await
            .is_ok()
    {
        return Ok(());
    }
    let upstream = match base_branch {
        Some(b) => format!("refs/remotes/origin/{b}"),
        None => "refs/remotes/origin/HEAD".to_owned(),
    };
    let base = match git(dir, &["merge-base", "HEAD", &upstream]).await {
        Ok(b) => b,
        Err(_) => git(dir, &["rev-parse", "HEAD"]).await?,
    };
    git(dir, &["update-ref", BASE_REF, &base]).await?;
    Ok(())
}

struct Reporter {
    url: String,
    token: String,
    sandbox_id: String,
}

static REPORTER: OnceLock<Reporter> = OnceLock::new();

/// Where captures go: set once when the supervisor knows its session.
pub fn set_reporter(control_plane_url: &str, session_id: &str, sandbox_id: &str, token: &str) {
    let _ = REPORTER.set(Reporter {
        url: format!(
            "{}/sessions/{session_id}/changes",
            control_plane_url.trim_end_matches('/')
        ),
        token: token.to_owned(),
        sandbox_id: sandbox_id.to_owned(),
    });
}

/// Captures every repository's change and sends it; a failure is logged, never the turn's.
pub async fn report(repos: &[(PathBuf, String)]) {
    let Some(reporter) = REPORTER.get() else {
        return;
    };
    let limits = inspect_changes::Limits {
        total: MAX_PATCH_BYTES_TOTAL / repos.len().max(1),
        ..Default::default()
    };
    let mut captured = Vec::new();
    for (dir, name) in repos {
        let base = git(dir, &["rev-parse", "--verify", "--quiet", BASE_REF])
            .await
            .unwrap_or_default();
        let repo = match inspect_changes::capture(dir, name, &base, limits).await {
            Ok(r) if !base.is_empty() => r,
            outcome => RepoChanges {
                repo: name.clone(),
                base: base.clone(),
                files: Vec::new(),
                more_files: 0,
                additions: 0,
                deletions: 0,
                error: Some(match outcome {
                    Err(e) => format!("{e:#}"),
                    Ok(_) => "the session's base commit is not known here".into(),
                }),
            },
        };
        captured.push(repo);
    }
    let sent = async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let resp = client
            .put(&reporter.url)
            .bearer_auth(&reporter.token)
            .header(
                inspect_protocol::auth::SANDBOX_ID_HEADER,
                &reporter.sandbox_id,
            )
            .json(&ChangesReport { repos: captured })
            .send()
            .await?;
        if !resp.status().is_success() {
            anyhow::bail!(
                "{}: {}",
                resp.status(),
                resp.text().await.unwrap_or_default()
            );
        }
        anyhow::Ok(())
    }
    .await;
    if let Err(e) = sent {
        tracing::warn!("the workspace's change was not sent: {e:#}");
    }
}
