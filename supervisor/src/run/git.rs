//! The supervisor's own git: our credential helper the only one, a short-lived token for
//! the session's repositories brokered from the control plane when a command reaches a
//! remote, and one retry with a new token when GitHub refused the one given.

use anyhow::{bail, Context, Result};
use std::path::Path;
use tokio::process::Command;

use crate::credential::{GIT_REFUSED_VAR, GIT_TOKEN_VAR};

/// Brokers git credentials for the supervisor's own git in a session's sandbox: asks the
/// control plane (`POST /sessions/:id/scm-credentials`) with the sandbox's token, which
/// stays in this process, and keeps the short-lived installation token while it is good.
pub struct ScmBroker {
    url: String,
    token: String,
    sandbox_id: String,
    /// Some repository is cloned over HTTP(S): only then are credentials asked for.
    needed: bool,
    cached: tokio::sync::Mutex<Option<inspect_protocol::auth::ScmCredentials>>,
}

static SCM_BROKER: std::sync::OnceLock<ScmBroker> = std::sync::OnceLock::new();

pub fn set_scm_broker(broker: ScmBroker) {
    let _ = SCM_BROKER.set(broker);
}

impl ScmBroker {
    pub fn new(
        control_plane_url: &str,
        session_id: &str,
        sandbox_id: &str,
        token: &str,
        needed: bool,
    ) -> ScmBroker {
        ScmBroker {
            url: format!(
                "{}/sessions/{session_id}/scm-credentials",
                control_plane_url.trim_end_matches('/')
            ),
            token: token.to_owned(),
            sandbox_id: sandbox_id.to_owned(),
            needed,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// A token for the session's remotes, or `None` (none needed, or the control plane
    /// has none to give: git then fails with its own words). `refused`: the token git was
    /// just refused with (revoked before it expired): never given again.
    async fn git_token(&self, refused: Option<&str>) -> Option<String> {
        if !self.needed {
            return None;
        }
        let mut cached = self.cached.lock().await;
        if let Some(old) = refused {
            if cached.as_ref().is_some_and(|c| c.password == old) {
                *cached = None;
            }
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        if let Some(c) = cached
            .as_ref()
            .filter(|c| c.expires_at_epoch_ms - now_ms > 5 * 60_000)
        {
            return Some(c.password.clone());
        }
        match crate::credential::ask_control_plane(
            &self.url,
            &self.token,
            &self.sandbox_id,
            refused,
        )
        .await
        {
            Ok(creds) => {
                let password = creds.password.clone();
                *cached = Some(creds);
                Some(password)
            }
            Err(e) => {
                tracing::warn!("no git credentials: {e:#}");
                None
            }
        }
    }
}

/// Whether a git command talks to a remote (and so may need credentials).
fn reaches_remote(args: &[&str]) -> bool {
    matches!(
        args.first().copied(),
        Some("clone" | "fetch" | "push" | "pull" | "ls-remote")
    )
}

/// Git, with our credential helper the only one: a command that reaches a remote gets a
/// short-lived token for the session's repositories from the control plane, handed to the
/// helper through this one git's environment (see `credential-helper`).
///
/// A token GitHub refused (revoked before it expired: the App suspended or reinstalled)
/// makes git `erase` it; the helper notes that, and the command is tried once more with a
/// new token, the refused one named so the control plane does not hand it out again.
pub async fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let broker = SCM_BROKER.get().filter(|_| reaches_remote(args));
    let token = match broker {
        Some(b) => b.git_token(None).await,
        None => None,
    };
    let mut out = run_git(dir, args, token.as_deref()).await?;
    if let (true, Some(broker), Some(refused)) = (out.refused, broker, token) {
        tracing::warn!("git was refused its token: asking for a new one");
        if let Some(renewed) = broker.git_token(Some(&refused)).await {
            out = run_git(dir, args, Some(&renewed)).await?;
        }
    }
    let out = out.output;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// One git command's outcome, and whether git was refused the token it was given.
struct GitRun {
    output: std::process::Output,
    refused: bool,
}

/// Runs git once, with our credential helper the only one and `token` for it to give.
async fn run_git(dir: &Path, args: &[&str], token: Option<&str>) -> Result<GitRun> {
    let helper = std::env::current_exe()
        .map(|exe| format!("credential.helper=!'{}' credential-helper", exe.display()))
        .unwrap_or_else(|_| "credential.helper=".into());
    let mut cmd = Command::new("git");
    cmd.args(["-c", "credential.helper=", "-c", &helper])
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null());
    // Where the helper notes a refusal: a file of this one command's, in a directory
    // only this process can write.
    let notes = match token {
        Some(token) => {
            let notes = tempfile::tempdir().context("a directory for git's refusals")?;
            cmd.env(GIT_TOKEN_VAR, token)
                .env(GIT_REFUSED_VAR, notes.path().join("refused"));
            Some(notes)
        }
        None => None,
    };
    let output = cmd
        .output()
        .await
        .with_context(|| format!("running git {}", args.join(" ")))?;
    let refused = !output.status.success()
        && notes
            .as_ref()
            .is_some_and(|n| n.path().join("refused").exists());
    Ok(GitRun { output, refused })
}
