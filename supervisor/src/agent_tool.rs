//! `inspect-supervisor agent-tool …` (the agent runs it as `open-inspect …`): asks the
//! sandbox's supervisor, through the agent API, for what the agent cannot do itself.

use crate::run::agent_api::{KEY_VAR, URL_VAR};
use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use inspect_protocol::scm::{
    DiffSide, PullRequestRequest, PullRequestResponse, ReviewComment, ReviewRequest, ReviewResult,
    ReviewVerdict,
};

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
enum ChildCommand {
    /// Start a child session; prints its id.
    Spawn {
        #[arg(long)]
        prompt: String,
        #[arg(long)]
        title: Option<String>,
        /// OWNER/NAME; the parent's repositories when absent.
        #[arg(long)]
        repo: Option<String>,
        #[arg(long)]
        branch: Option<String>,
        #[arg(long)]
        model: Option<String>,
    },
    /// A child's status, last words and pull requests.
    Status { id: String },
    /// Another prompt for a child.
    Prompt {
        id: String,
        #[arg(long)]
        prompt: String,
    },
    /// Stop a child's running prompt.
    Cancel { id: String },
    /// Wait until the children finish; prints each one's outcome.
    Wait {
        ids: Vec<String>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 1800)]
        timeout: u64,
    },
}

#[derive(Subcommand)]
enum ToolCommand {
    /// Child sessions: spawn, status, prompt, cancel, wait.
    Child {
        #[command(subcommand)]
        command: ChildCommand,
    },
    /// Photograph a web page with the sandbox's browser; the picture is shown to the session.
    Screenshot {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Record a web page for a few seconds (an animated GIF) with the sandbox's browser; the
    /// recording is shown to the session.
    Record {
        #[command(flatten)]
        page: PageArgs,
        /// How long to record (1 to 15 seconds).
        #[arg(long, default_value_t = 5)]
        seconds: u32,
    },
    /// Submit the review of the pull request this prompt came from (once).
    Review {
        /// comment, approve or request-changes.
        #[arg(long, default_value = "comment", value_parser = ["comment", "approve", "request-changes"])]
        event: String,
        #[arg(long, default_value = "")]
        body: String,
        /// Read the body from a file instead.
        #[arg(long)]
        body_file: Option<std::path::PathBuf>,
        /// PATH:LINE=TEXT on the new file's line, PATH:LINE:left=TEXT on a removed one.
        #[arg(long = "comment")]
        comments: Vec<String>,
        /// A JSON list of {path, line, side, body}.
        #[arg(long)]
        comments_file: Option<std::path::PathBuf>,
    },
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

/// A screenshot or a recording, taken by the supervisor and sent to the session.
async fn picture(req: &inspect_protocol::media::ScreenshotRequest, what: &str) -> Result<()> {
    let answer = call(
        reqwest::Method::POST,
        "/screenshot",
        Some(serde_json::to_value(req)?),
    )
    .await
    .with_context(|| format!("no {what}"))?;
    println!(
        "took the {what}; the session's people see it ({})",
        answer["url"].as_str().unwrap_or("kept")
    );
    Ok(())
}

/// The page a screenshot or a recording is of, and how.
#[derive(clap::Args)]
struct PageArgs {
    url: String,
    #[arg(long)]
    caption: Option<String>,
    #[arg(long)]
    width: Option<u32>,
    #[arg(long)]
    height: Option<u32>,
    /// Seconds the page has to load.
    #[arg(long)]
    timeout: Option<u64>,
}

impl PageArgs {
    fn request(self, seconds: Option<u32>) -> inspect_protocol::media::ScreenshotRequest {
        inspect_protocol::media::ScreenshotRequest {
            url: self.url,
            width: self.width,
            height: self.height,
            caption: self.caption,
            timeout_secs: self.timeout,
            seconds,
        }
    }
}

pub async fn run(args: Vec<String>) -> Result<()> {
    let tool = AgentTool::parse_from(std::iter::once("open-inspect".to_owned()).chain(args));
    let command = match tool.command {
        ToolCommand::Child { command } => return child(command).await,
        ToolCommand::Screenshot { page } => {
            return picture(&page.request(None), "screenshot").await;
        }
        ToolCommand::Record { page, seconds } => {
            return picture(&page.request(Some(seconds)), "recording").await;
        }
        ToolCommand::Review {
            event,
            body,
            body_file,
            comments,
            comments_file,
        } => return review(&event, body, body_file, &comments, comments_file).await,
        pr => pr,
    };
    let ToolCommand::Pr {
        title,
        body,
        body_file,
        base,
        head,
        repo,
        draft,
    } = command
    else {
        bail!("unknown command");
    };
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

/// `PATH:LINE=TEXT` or `PATH:LINE:left|right=TEXT`: the first `:LINE[:side]=` splits it,
/// so a path may hold colons and a text anything.
fn parse_comment(spec: &str) -> Result<ReviewComment> {
    for (i, _) in spec.match_indices(':') {
        let rest = &spec[i + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            continue;
        }
        let after = &rest[digits..];
        let (side, text) = if let Some(t) = after.strip_prefix('=') {
            (DiffSide::Right, t)
        } else if let Some(t) = after.strip_prefix(":left=") {
            (DiffSide::Left, t)
        } else if let Some(t) = after.strip_prefix(":right=") {
            (DiffSide::Right, t)
        } else {
            continue;
        };
        let line = rest[..digits].parse().context("a line number")?;
        return Ok(ReviewComment {
            path: spec[..i].to_owned(),
            line,
            side,
            body: text.to_owned(),
        });
    }
    bail!("--comment is PATH:LINE=TEXT (or PATH:LINE:left=TEXT), not {spec:?}")
}

async fn review(
    event: &str,
    body: String,
    body_file: Option<std::path::PathBuf>,
    specs: &[String],
    comments_file: Option<std::path::PathBuf>,
) -> Result<()> {
    let body = match body_file {
        Some(f) => {
            std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?
        }
        None => body,
    };
    let mut comments = specs
        .iter()
        .map(|s| parse_comment(s))
        .collect::<Result<Vec<_>>>()?;
    if let Some(f) = comments_file {
        let text =
            std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
        let more: Vec<ReviewComment> = serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is a JSON list of {{path, line, side, body}}",
                f.display()
            )
        })?;
        comments.extend(more);
    }
    let event = match event {
        "approve" => ReviewVerdict::Approve,
        "request-changes" => ReviewVerdict::RequestChanges,
        _ => ReviewVerdict::Comment,
    };
    let request = ReviewRequest {
        event,
        body,
        comments,
    };
    let answer = call(
        reqwest::Method::POST,
        "/reviews",
        Some(serde_json::to_value(&request)?),
    )
    .await
    .context("no review")?;
    let done: ReviewResult = serde_json::from_value(answer).context("reading the answer")?;
    let event = match done.event {
        ReviewVerdict::Approve => "approved",
        ReviewVerdict::RequestChanges => "requested changes",
        ReviewVerdict::Comment => "commented",
    };
    println!(
        "submitted the review ({event}, {} inline comment(s){}): {}",
        done.inline,
        if done.folded > 0 {
            format!(
                ", {} moved into the body as their lines are not in the diff",
                done.folded
            )
        } else {
            String::new()
        },
        done.url
    );
    Ok(())
}

/// The agent API's address and key, from the agent's environment.
fn api() -> Result<(String, String)> {
    let url =
        std::env::var(URL_VAR).context("not inside an Open-Inspect sandbox (no agent API)")?;
    let key =
        std::env::var(KEY_VAR).context("not inside an Open-Inspect sandbox (no agent key)")?;
    Ok((url, key))
}

/// Sends a picture the sandbox took (the agent's browser's screenshot) to the session
/// through the agent API; where the session's people see it.
pub async fn send_picture(bytes: Vec<u8>, mime: &str, caption: &str) -> Result<String> {
    let (url, key) = api()?;
    let resp = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()?
        .post(format!("{url}/media"))
        .query(&[("caption", caption)])
        .bearer_auth(key)
        .header("content-type", mime)
        .body(bytes)
        .send()
        .await
        .context("reaching the sandbox's supervisor")?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    let answer = serde_json::from_str::<serde_json::Value>(&text).unwrap_or_default();
    if !status.is_success() {
        let message = answer["error"]["message"].as_str().unwrap_or(&text);
        bail!("the picture was not kept: {status}: {message}");
    }
    Ok(answer["url"].as_str().unwrap_or("kept").to_owned())
}

/// The display of the sandbox's desktop while one is open (the agent's browser runs
/// there), asked of the agent API; none without one, or without the API.
pub async fn desktop_display() -> Option<String> {
    let answer = call(reqwest::Method::GET, "/desktop", None).await.ok()?;
    answer["display"].as_str().map(str::to_owned)
}

/// One call to the agent API: the JSON answer, or the error it gave in words.
async fn call(
    method: reqwest::Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> Result<serde_json::Value> {
    let (url, key) = api()?;
    let mut req = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(120))
        .build()?
        .request(method, format!("{url}{path}"))
        .bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req
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
        bail!("{status}: {message}");
    }
    Ok(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null))
}

fn describe(c: &inspect_protocol::session::ChildSummary) -> String {
    let mut out = format!(
        "{} ({}): {}",
        c.session_id,
        c.title.as_deref().unwrap_or("untitled"),
        c.state
    );
    if let Some(e) = &c.error {
        out.push_str(&format!(" — {e}"));
    }
    for (url, state) in &c.pull_requests {
        out.push_str(&format!("\n  pull request ({state}): {url}"));
    }
    if let Some(o) = &c.last_output {
        out.push_str(&format!("\n  last output: {}", o.trim()));
    }
    out
}

async fn child(command: ChildCommand) -> Result<()> {
    use inspect_protocol::session::ChildSummary;
    match command {
        ChildCommand::Spawn {
            prompt,
            title,
            repo,
            branch,
            model,
        } => {
            let (repo_owner, repo_name) = match repo.as_deref().map(|r| r.split_once('/')) {
                None => (None, None),
                Some(Some((o, n))) => (Some(o.to_owned()), Some(n.to_owned())),
                Some(None) => bail!("--repo is OWNER/NAME"),
            };
            let req = inspect_protocol::session::SpawnChildRequest {
                prompt,
                title,
                repo_owner,
                repo_name,
                branch,
                model,
            };
            let made = call(
                reqwest::Method::POST,
                "/children",
                Some(serde_json::to_value(&req)?),
            )
            .await
            .context("no child session")?;
            println!("{}", made["sessionId"].as_str().unwrap_or_default());
        }
        ChildCommand::Status { id } => {
            let s: ChildSummary = serde_json::from_value(
                call(reqwest::Method::GET, &format!("/children/{id}"), None).await?,
            )?;
            println!("{}", describe(&s));
        }
        ChildCommand::Prompt { id, prompt } => {
            let s: ChildSummary = serde_json::from_value(
                call(
                    reqwest::Method::POST,
                    &format!("/children/{id}/prompt"),
                    Some(serde_json::json!({"prompt": prompt})),
                )
                .await?,
            )?;
            println!("{}", describe(&s));
        }
        ChildCommand::Cancel { id } => {
            let s: ChildSummary = serde_json::from_value(
                call(
                    reqwest::Method::POST,
                    &format!("/children/{id}/cancel"),
                    Some(serde_json::json!({})),
                )
                .await?,
            )?;
            println!("{}", describe(&s));
        }
        ChildCommand::Wait { ids, timeout } => {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(timeout);
            let mut done: std::collections::BTreeMap<String, ChildSummary> = Default::default();
            while done.len() < ids.len() {
                for id in &ids {
                    if done.contains_key(id) {
                        continue;
                    }
                    let s: ChildSummary = serde_json::from_value(
                        call(reqwest::Method::GET, &format!("/children/{id}"), None).await?,
                    )?;
                    if s.state == "completed" || s.state == "failed" {
                        done.insert(id.clone(), s);
                    }
                }
                if done.len() < ids.len() {
                    if std::time::Instant::now() > deadline {
                        bail!("children still running after {timeout} s");
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                }
            }
            for id in &ids {
                if let Some(s) = done.get(id) {
                    println!("{}", describe(s));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod review_tests {
    use super::*;

    #[test]
    fn comments_name_a_path_a_line_and_a_side() {
        let c = parse_comment("src/a:b.rs:42=Why = here?").unwrap();
        assert_eq!(
            (c.path.as_str(), c.line, c.side, c.body.as_str()),
            ("src/a:b.rs", 42, DiffSide::Right, "Why = here?")
        );
        let c = parse_comment("old.rs:7:left=gone").unwrap();
        assert_eq!((c.line, c.side), (7, DiffSide::Left));
        for bad in ["no-line", "a.rs:=x", "a.rs:12", "a.rs:x=1"] {
            assert!(parse_comment(bad).is_err(), "{bad}");
        }
    }
}
