//! `inspect-supervisor agent-tool …` (the agent runs it as `open-inspect …`): asks the
//! sandbox's supervisor, through the agent API, for what the agent cannot do itself.

use crate::run::agent_api::{KEY_VAR, URL_VAR};
use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use inspect_protocol::scm::{PullRequestRequest, PullRequestResponse};

#[derive(Parser)]
#[command(
    name = "open-inspect",
    about = "Ask the Open-Inspect session for things the agent cannot do alone"
)]
pub struct AgentTool {
    #[command(subcommand)]
    command: ToolCommand,
}

#[derive(Subcommand)]
enum ToolCommand {
    /// Push the work and open (or update) a pull request.
    Pr {
        #[arg(long)]
        title: String,
        #[arg(long, default_value = "")]
        body: String,
        /// Read the body from a file instead.
        #[arg(long)]
        body_file: Option<std::path::PathBuf>,
        #[arg(long)]
        base: Option<String>,
        #[arg(long)]
        head: Option<String>,
        /// OWNER/NAME, in a session with several repositories.
        #[arg(long)]
        repo: Option<String>,
        #[arg(long)]
        draft: bool,
    },
}

pub async fn run(args: Vec<String>) -> Result<()> {
    let tool = AgentTool::parse_from(std::iter::once("open-inspect".to_owned()).chain(args));
    let ToolCommand::Pr {
        title,
        body,
        body_file,
        base,
        head,
        repo,
        draft,
    } = tool.command;
    let body = match body_file {
        Some(f) => {
            std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?
        }
        None => body,
    };
    let (repo_owner, repo_name) = match repo.as_deref().map(|r| r.split_once('/')) {
        None => (None, None),
        Some(Some((o, n))) => (Some(o.to_owned()), Some(n.to_owned())),
        Some(None) => bail!("--repo is OWNER/NAME"),
    };
    let request = PullRequestRequest {
        title,
        body,
        base_branch: base,
        head_branch: head,
        repo_owner,
        repo_name,
        draft: draft.then_some(true),
    };
    let url =
        std::env::var(URL_VAR).context("not inside an Open-Inspect sandbox (no agent API)")?;
    let key =
        std::env::var(KEY_VAR).context("not inside an Open-Inspect sandbox (no agent key)")?;
    let resp = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(200))
        .build()?
        .post(format!("{url}/pull-requests"))
        .bearer_auth(key)
        .json(&request)
        .send()
        .await
        .context("reaching the sandbox's supervisor")?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or(text);
        bail!("no pull request ({status}): {message}");
    }
    let done: PullRequestResponse = serde_json::from_str(&text).context("reading the answer")?;
    for pr in done.pull_requests {
        let what = match (&pr.pr_url, pr.updated) {
            (Some(url), true) => format!("updated the open pull request {url}"),
            (Some(url), false) => format!("opened the pull request {url}"),
            (None, _) => format!("pushed {}", pr.head_branch),
        };
        println!(
            "{}/{}: {what} ({}){}",
            pr.repo_owner,
            pr.repo_name,
            pr.state,
            pr.message.map(|m| format!(" — {m}")).unwrap_or_default()
        );
    }
    Ok(())
}
