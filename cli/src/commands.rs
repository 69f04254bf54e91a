//! What each command does, against the API.

use crate::api::{exit, Api, Failure, Result};
use crate::config;
use crate::follow::{follow, Until};
use crate::render::{Out, Printer};
use crate::screen::Screen;
use crate::{AutomationsOp, NewArgs, SecretsOp};
use inspect_protocol::changes::ChangesSummary;
use inspect_protocol::session::{SessionList, SessionSummary};
use serde_json::{json, Value};
use std::io::{IsTerminal, Read, Write};
use std::process::Command;

/// The API client for the kept server and token.
pub fn api() -> Result<Api> {
    let c = config::load()?;
    Ok(Api::new(&config::server(&c), c.token))
}

pub async fn login(
    url: Option<String>,
    token: Option<String>,
    token_stdin: bool,
    open_browser: bool,
) -> Result<i32> {
    let mut c = config::load()?;
    let url = match url {
        Some(u) => config::check_url(&u)?,
        None => config::server(&c),
    };
    let token = if token_stdin {
        let mut t = String::new();
        std::io::stdin()
            .read_to_string(&mut t)
            .map_err(|e| Failure::failed(e.to_string()))?;
        Some(t.trim().to_owned())
    } else {
        token
    };
    // A server in local mode answers without a token.
    let me: Result<Value> = Api::new(&url, token.clone()).get("/auth/me").await;
    let token = match (me, token) {
        (Ok(_), t) => t,
        (Err(e), Some(_)) => return Err(e),
        (Err(e), None) if e.code == exit::AUTH => {
            let t = crate::signin::token(&url, open_browser).await?;
            Api::new(&url, Some(t.clone()))
                .get::<Value>("/auth/me")
                .await?;
            Some(t)
        }
        (Err(e), None) => return Err(e),
    };
    let me: Value = Api::new(&url, token.clone()).get("/auth/me").await?;
    c.url = Some(url.clone());
    c.token = token.filter(|t| !t.is_empty());
    let path = config::save(&c)?;
    eprintln!(
        "Signed in to {url} as {} (kept in {}).",
        me["user"]["name"].as_str().unwrap_or("you"),
        path.display()
    );
    Ok(0)
}

pub fn logout() -> Result<i32> {
    let mut c = config::load()?;
    c.token = None;
    config::save(&c)?;
    eprintln!("The token is forgotten (revoke it in Settings › Account).");
    Ok(0)
}

/// An environment's id, by its name.
async fn environment_id(api: &Api, name: &str) -> Result<String> {
    let envs: Value = api.get("/environments").await?;
    envs["environments"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"].as_str() == Some(name))
        .and_then(|e| e["id"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| Failure::new(exit::NOT_FOUND, format!("no environment named {name}")))
}

/// `owner/name[@branch]`.
fn repository(spec: &str) -> Result<Value> {
    let (name, branch) = match spec.split_once('@') {
        Some((n, b)) if !b.is_empty() => (n, Some(b)),
        _ => (spec, None),
    };
    let Some((owner, repo)) = name
        .split_once('/')
        .filter(|(o, r)| !o.is_empty() && !r.is_empty())
    else {
        return Err(Failure::new(
            exit::USAGE,
            format!("--repo {spec}: say owner/name[@branch]"),
        ));
    };
    let mut r = json!({"owner": owner, "name": repo});
    if let Some(b) = branch {
        r["branch"] = json!(b);
    }
    Ok(r)
}

pub async fn new(api: &Api, args: NewArgs) -> Result<i32> {
    let mut create = json!({});
    if !args.repos.is_empty() {
        let repos: Result<Vec<Value>> = args.repos.iter().map(|r| repository(r)).collect();
        create["repositories"] = Value::Array(repos?);
    }
    if let Some(name) = &args.env {
        create["environmentId"] = json!(environment_id(api, name).await?);
    }
    for (k, v) in [
        ("model", &args.model),
        ("reasoningEffort", &args.effort),
        ("agent", &args.agent),
        ("title", &args.title),
    ] {
        if let Some(v) = v {
            create[k] = json!(v);
        }
    }
    let prompt = match args.prompt.as_deref() {
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| Failure::failed(e.to_string()))?;
            Some(text)
        }
        Some(p) => Some(p.to_owned()),
        None => None,
    }
    .filter(|p| !p.trim().is_empty());
    let made: Value = api.post("/sessions", &create).await?;
    let id = made["sessionId"].as_str().unwrap_or_default().to_owned();
    eprintln!("Session {id}: {}", api.url(&format!("/sessions/{id}")));
    let Some(prompt) = prompt else {
        println!("{id}");
        return Ok(0);
    };
    let mut body = json!({"content": prompt});
    if let Some(m) = &args.model {
        body["model"] = json!(m);
    }
    if let Some(e) = &args.effort {
        body["reasoningEffort"] = json!(e);
    }
    let accepted: Value = api.post(&format!("/sessions/{id}/prompt"), &body).await?;
    let message = accepted["messageId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if args.wait {
        let ended = follow(api, &id, Until::PromptEnds(message), false).await?;
        return Ok(match ended {
            Some(e) if e.success => 0,
            _ => exit::FAILED,
        });
    }
    follow(api, &id, Until::Detached, true).await?;
    Ok(0)
}

pub async fn attach(api: &Api, session: &str) -> Result<i32> {
    // The session is there (404 otherwise) before the socket is tried.
    let _: Value = api.get(&format!("/sessions/{session}")).await?;
    follow(api, session, Until::Detached, true).await?;
    Ok(0)
}

pub async fn ls(
    api: &Api,
    mine: bool,
    status: Option<String>,
    repo: Option<String>,
    as_json: bool,
) -> Result<i32> {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    q.append_pair("limit", "50");
    if mine {
        q.append_pair("mine", "true");
    }
    if let Some(s) = &status {
        q.append_pair("status", s);
    }
    if let Some(r) = &repo {
        q.append_pair("repo", r);
    }
    let list: SessionList = api.get(&format!("/sessions?{}", q.finish())).await?;
    if as_json {
        print_json(&list.sessions)?;
        return Ok(0);
    }
    for s in &list.sessions {
        println!("{}", line(s));
    }
    Ok(0)
}

fn line(s: &SessionSummary) -> String {
    let repos: Vec<String> = s
        .repositories
        .iter()
        .map(|r| format!("{}/{}", r.owner, r.name))
        .collect();
    let pr = s
        .pr_state
        .as_deref()
        .map(|p| format!("  PR {p}"))
        .unwrap_or_default();
    format!(
        "{}  {:<8}  {}  {}  by {}{pr}",
        s.id,
        s.status.as_str(),
        s.title.as_deref().unwrap_or("(untitled)"),
        repos.join(", "),
        s.created_by_name
    )
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(v).map_err(|e| Failure::failed(e.to_string()))?;
    println!("{text}");
    Ok(())
}

pub async fn show(api: &Api, session: &str, as_json: bool) -> Result<i32> {
    let s: Value = api.get(&format!("/sessions/{session}")).await?;
    if as_json {
        print_json(&s)?;
        return Ok(0);
    }
    let repos: Vec<String> = s["repositories"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{}/{}",
                r["owner"].as_str().unwrap_or(""),
                r["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    println!(
        "{}  {}",
        s["id"].as_str().unwrap_or(session),
        s["title"].as_str().unwrap_or("(untitled)")
    );
    println!("status      {}", s["status"].as_str().unwrap_or(""));
    println!("sandbox     {}", s["sandboxStatus"].as_str().unwrap_or(""));
    println!("repositories {}", repos.join(", "));
    if let Some(b) = s["branchName"].as_str() {
        println!("branch      {b}");
    }
    println!("prompts     {}", s["messageCount"].as_i64().unwrap_or(0));
    println!("link        {}", api.url(&format!("/sessions/{session}")));
    Ok(0)
}

pub async fn log(api: &Api, session: &str, as_json: bool) -> Result<i32> {
    let mut printer = Printer::default();
    let mut screen = Screen::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/sessions/{session}/events?limit=200&cursor={c}"),
            None => format!("/sessions/{session}/events?limit=200"),
        };
        let page: Value = api.get(&path).await?;
        for e in page["events"].as_array().into_iter().flatten() {
            if as_json {
                println!("{e}");
            } else {
                // A finished timeline: nothing is under way to show.
                let (outs, _) = printer.event(e);
                screen.show(
                    outs.into_iter()
                        .filter(|o| matches!(o, Out::Line(_) | Out::Text(_)))
                        .collect(),
                );
            }
        }
        if !page["hasMore"].as_bool().unwrap_or(false) {
            break;
        }
        cursor = page["cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    if !as_json {
        screen.show(printer.flush());
    }
    Ok(0)
}

pub async fn act(api: &Api, session: &str, what: &str) -> Result<i32> {
    let _: Value = api
        .post(&format!("/sessions/{session}/{what}"), &json!({}))
        .await?;
    eprintln!("{session}: {what} done");
    Ok(0)
}

/// The session's change in one repository (the one named, or its only one).
async fn change(api: &Api, session: &str, repo: Option<&str>) -> Result<(String, String)> {
    let summary: ChangesSummary = api.get(&format!("/sessions/{session}/changes")).await?;
    let chosen: Vec<_> = summary
        .repos
        .iter()
        .filter(|r| repo.is_none_or(|want| r.repo.eq_ignore_ascii_case(want)))
        .collect();
    let r = match chosen.as_slice() {
        [one] => *one,
        [] => {
            return Err(Failure::new(
                exit::NOT_FOUND,
                match repo {
                    Some(want) => format!("the session has no change in {want}"),
                    None => "the session has no change yet".to_owned(),
                },
            ))
        }
        many => {
            let names: Vec<&str> = many.iter().map(|r| r.repo.as_str()).collect();
            return Err(Failure::new(
                exit::USAGE,
                format!(
                    "the session changed several repositories; say which with --repo ({})",
                    names.join(", ")
                ),
            ));
        }
    };
    // The listing carries no diffs: each file's is asked for.
    let mut patch = String::new();
    for f in &r.files {
        let q = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("repo", &r.repo)
            .append_pair("file", &f.path)
            .finish();
        let one: inspect_protocol::changes::ChangedFile =
            api.get(&format!("/sessions/{session}/changes?{q}")).await?;
        match one.patch {
            Some(p) => patch.push_str(&p),
            None => {
                return Err(Failure::failed(format!(
                    "{}'s diff is too large to carry here; use `inspect handoff {session}`",
                    f.path
                )))
            }
        }
    }
    Ok((r.repo.clone(), patch))
}

pub async fn diff(api: &Api, session: &str, repo: Option<String>) -> Result<i32> {
    let (_, patch) = change(api, session, repo.as_deref()).await?;
    let color = std::io::stdout().is_terminal();
    let mut out = String::new();
    for l in patch.lines() {
        let painted = match (color, l.chars().next()) {
            (true, Some('+')) if !l.starts_with("+++") => format!("\x1b[32m{l}\x1b[0m"),
            (true, Some('-')) if !l.starts_with("---") => format!("\x1b[31m{l}\x1b[0m"),
            (true, Some('@')) => format!("\x1b[36m{l}\x1b[0m"),
            _ => l.to_owned(),
        };
        out.push_str(&painted);
        out.push('\n');
    }
    page(&out);
    Ok(0)
}

/// Through the person's pager when the output is a terminal.
fn page(text: &str) {
    if std::io::stdout().is_terminal() {
        let pager = std::env::var("PAGER").unwrap_or_else(|_| "less -R".into());
        let mut parts = pager.split_whitespace();
        if let Some(cmd) = parts.next() {
            if let Ok(mut child) = Command::new(cmd)
                .args(parts)
                .stdin(std::process::Stdio::piped())
                .spawn()
            {
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = stdin.write_all(text.as_bytes());
                }
                let _ = child.wait();
                return;
            }
        }
    }
    print!("{text}");
}

fn git(args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .output()
        .map_err(|e| Failure::failed(format!("git: {e}")))?;
    if !out.status.success() {
        return Err(Failure::failed(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub async fn apply(api: &Api, session: &str, repo: Option<String>, force: bool) -> Result<i32> {
    git(&["rev-parse", "--show-toplevel"])
        .map_err(|_| Failure::failed("not in a git clone: run apply inside the repository"))?;
    if !force && !git(&["status", "--porcelain"])?.trim().is_empty() {
        return Err(Failure::failed(
            "the working tree has changes of its own; commit or stash them, or pass --force",
        ));
    }
    let (name, patch) = change(api, session, repo.as_deref()).await?;
    let file = std::env::temp_dir().join(format!("inspect-{session}-{}.patch", std::process::id()));
    std::fs::write(&file, &patch).map_err(|e| Failure::failed(e.to_string()))?;
    let path = file.to_string_lossy().into_owned();
    let applied = git(&["apply", "--whitespace=nowarn", &path]);
    let _ = std::fs::remove_file(&file);
    applied?;
    eprintln!("Applied the session's change to {name} in the working tree.");
    Ok(0)
}

pub async fn handoff(api: &Api, session: &str, remote: &str) -> Result<i32> {
    let s: Value = api.get(&format!("/sessions/{session}")).await?;
    let branch = s["branchName"]
        .as_str()
        .ok_or_else(|| Failure::failed("the session has no branch yet"))?
        .to_owned();
    git(&[
        "fetch",
        remote,
        &format!("+refs/heads/{branch}:refs/remotes/{remote}/{branch}"),
    ])
    .map_err(|e| Failure::failed(format!("{e} (was it pushed? a pull request pushes it)")))?;
    git(&["checkout", "-B", &branch, &format!("{remote}/{branch}")])?;
    eprintln!("On {branch}, from {remote}.");
    Ok(0)
}

/// Where a scope's secrets live.
async fn secrets_path(api: &Api, repo: Option<String>, env: Option<String>) -> Result<String> {
    match (repo, env) {
        (Some(r), _) => {
            let (owner, name) = r
                .split_once('/')
                .filter(|(o, n)| !o.is_empty() && !n.is_empty())
                .ok_or_else(|| Failure::new(exit::USAGE, format!("--repo {r}: say owner/name")))?;
            Ok(format!("/repos/{owner}/{name}/secrets"))
        }
        (None, Some(name)) => {
            let envs: Value = api.get("/environments").await?;
            let id = envs["environments"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["name"].as_str() == Some(name.as_str()))
                .and_then(|e| e["id"].as_str())
                .ok_or_else(|| {
                    Failure::new(exit::NOT_FOUND, format!("no environment named {name}"))
                })?;
            Ok(format!("/environments/{id}/secrets"))
        }
        (None, None) => Ok("/secrets".to_owned()),
    }
}

pub async fn secrets(
    api: &Api,
    op: SecretsOp,
    repo: Option<String>,
    env: Option<String>,
) -> Result<i32> {
    let path = secrets_path(api, repo, env).await?;
    match op {
        SecretsOp::Ls { json: as_json } => {
            let list: inspect_protocol::auth::SecretList = api.get(&path).await?;
            if as_json {
                print_json(&list.secrets)?;
            } else {
                for s in &list.secrets {
                    println!("{}", s.key);
                }
            }
        }
        SecretsOp::Set { name } => {
            if std::io::stdin().is_terminal() {
                eprint!("{name}'s value (then Ctrl-D): ");
                let _ = std::io::stderr().flush();
            }
            let mut value = String::new();
            std::io::stdin()
                .read_to_string(&mut value)
                .map_err(|e| Failure::failed(e.to_string()))?;
            let value = value.strip_suffix('\n').unwrap_or(&value).to_owned();
            let body = json!({"secrets": {name.clone(): value}});
            let _: Value = api.call(reqwest::Method::PUT, &path, Some(&body)).await?;
            eprintln!("{name} is set.");
        }
        SecretsOp::Rm { name } => {
            let _: Value = api
                .call(reqwest::Method::DELETE, &format!("{path}/{name}"), None)
                .await?;
            eprintln!("{name} is removed.");
        }
    }
    Ok(0)
}

pub async fn automations(api: &Api, op: AutomationsOp) -> Result<i32> {
    match op {
        AutomationsOp::Ls { json: as_json } => {
            let list: Value = api.get("/automations").await?;
            let all = list["automations"].as_array().cloned().unwrap_or_default();
            if as_json {
                print_json(&all)?;
            } else {
                for a in &all {
                    println!(
                        "{}  {:<8}  {}  ({})",
                        a["id"].as_str().unwrap_or_default(),
                        a["status"].as_str().unwrap_or_default(),
                        a["settings"]["name"].as_str().unwrap_or_default(),
                        a["settings"]["triggerType"].as_str().unwrap_or_default()
                    );
                }
            }
        }
        AutomationsOp::Run { id } => {
            let run: Value = api
                .post(&format!("/automations/{id}/trigger"), &json!({}))
                .await?;
            println!("{}", serde_json::to_string(&run).unwrap_or_default());
        }
        AutomationsOp::Pause { id } => {
            let _: Value = api
                .post(&format!("/automations/{id}/pause"), &json!({}))
                .await?;
            eprintln!("{id} is paused.");
        }
        AutomationsOp::Resume { id } => {
            let _: Value = api
                .post(&format!("/automations/{id}/resume"), &json!({}))
                .await?;
            eprintln!("{id} is resumed.");
        }
    }
    Ok(0)
}

pub async fn artifacts(api: &Api, session: &str, as_json: bool) -> Result<i32> {
    let list: Value = api.get(&format!("/sessions/{session}/artifacts")).await?;
    let all = list["artifacts"].as_array().cloned().unwrap_or_default();
    if as_json {
        print_json(&all)?;
        return Ok(0);
    }
    for a in &all {
        println!(
            "{:<14} {}  {}",
            a["type"].as_str().unwrap_or_default(),
            a["url"].as_str().unwrap_or_default(),
            a["metadata"]["title"]
                .as_str()
                .or_else(|| a["metadata"]["caption"].as_str())
                .unwrap_or_default()
        );
    }
    Ok(0)
}
