//! What the egress proxy costs (a benchmark, not a test): `git clone` of a 50 MB repository
//! (incompressible files, one pack, served over HTTP on this machine) run by the agent in a
//! real local sandbox, once in an environment that is `open` (the host's network, straight
//! to the server) and once in one that is `off` but for the server (the sandbox's own
//! network: its relay, the host's proxy deciding, the server). Rounds alternate the two;
//! each round clones `INSPECT_BENCH_CLONES` times (default 5). Medians and their ratio.
//!
//! Run: `cargo run --release -p inspect-bench -- egress` (`INSPECT_BENCH_MB=50`,
//! `INSPECT_BENCH_ROUNDS=2`). Needs bubblewrap (the confinement), `python3` (the server).

use anyhow::{ensure, Context, Result};
use inspect_tests::agent::AgentStack;
use inspect_tests::client::{create_session, send, WsClient};
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::source_repo;
use reqwest::Method;
use serde_json::{json, Value};
use std::io::Read;
use std::path::Path;
use std::process::Command;

fn number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()?;
    ensure!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// A bare repository of `mb` one-MiB random files in one pack, ready for git's HTTP
/// transport (`update-server-info`), under `root/big.git`.
fn big_repository(root: &Path, mb: usize) -> Result<()> {
    let work = root.join("work");
    std::fs::create_dir_all(&work)?;
    git(&work, &["init", "-q", "-b", "main"])?;
    let mut random = std::fs::File::open("/dev/urandom")?;
    let mut buf = vec![0u8; 1 << 20];
    for i in 0..mb {
        random.read_exact(&mut buf)?;
        std::fs::write(work.join(format!("blob{i:03}.bin")), &buf)?;
    }
    git(&work, &["add", "-A"])?;
    git(&work, &["commit", "-qm", "big"])?;
    git(root, &["clone", "-q", "--bare", "work", "big.git"])?;
    let bare = root.join("big.git");
    git(&bare, &["repack", "-a", "-d", "-q"])?;
    git(&bare, &["update-server-info"])?;
    Ok(())
}

/// Runs `command` as the agent's one tool call in a new session of `environment`; returns
/// the milliseconds each clone printed (`ms:N`).
async fn clones_in(agent: &AgentStack, environment: &str, label: &str) -> Result<Vec<f64>> {
    let base = &agent.stack.base_url;
    let id = create_session(base, "ann", json!({"environmentId": environment})).await?;
    let (mut ws, _) = WsClient::join(base, &agent.stack.ws_url(""), &id, "ann").await?;
    ws.send(json!({"type": "prompt", "content": format!("clone ({label})")}))
        .await?;
    let mut output = String::new();
    loop {
        let m: Value = ws.recv_within(600).await?;
        if m["type"] == "sandbox_error" {
            anyhow::bail!("{m}\n{}", agent.host.sandbox_logs());
        }
        if m["type"] == "sandbox_event" && m["event"]["type"] == "tool_call" {
            if let Some(o) = m["event"]["output"].as_str() {
                output = o.to_owned();
            }
        }
        if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
            break;
        }
    }
    let ms: Vec<f64> = output
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ms:"))
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    ensure!(!ms.is_empty(), "no clone timed ({label}): {output}");
    ensure!(
        !output.contains("fatal"),
        "a clone failed ({label}): {output}"
    );
    Ok(ms)
}

pub async fn benchmark() -> Result<()> {
    let (mb, rounds, clones) = (
        number("INSPECT_BENCH_MB", 50),
        number("INSPECT_BENCH_ROUNDS", 2),
        number("INSPECT_BENCH_CLONES", 5),
    );
    let served = tempfile::tempdir()?;
    big_repository(served.path(), mb)?;
    let port = inspect_tests::stack::free_port()?;
    let mut server = tokio::process::Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .arg("--directory")
        .arg(served.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting python3's HTTP server")?;
    // Each clone from scratch, timed inside the sandbox; the proxy variables' exclusion of
    // `localhost` is lifted so that, confined, git goes through the proxy (open: there is
    // none, and git goes straight to the server).
    let command = format!(
        "cd \"$TMPDIR\"; for i in $(seq {clones}); do rm -rf c; s=$(date +%s%N); \
         env -u NO_PROXY -u no_proxy git clone -q http://localhost:{port}/big.git c || echo fatal; \
         e=$(date +%s%N); echo \"ms:$(( (e - s) / 1000000 ))\"; done"
    );
    let mut script = Vec::new();
    for _ in 0..rounds * 2 {
        script.push(Reply::tool(
            "bash",
            json!({"command": command, "description": "clone", "timeout": 600000}),
        ));
        script.push(Reply::text("Cloned."));
    }
    let agent = AgentStack::start(script, Vec::new()).await?;
    let repo = source_repo();
    agent.register_repo("demo", repo.path()).await?;
    let mut ids = Vec::new();
    for (name, egress) in [
        ("open", json!({"mode": "open"})),
        (
            "walled",
            json!({"mode": "off", "allow": [{"host": format!("localhost:{port}")}]}),
        ),
    ] {
        let r = send(
            Method::POST,
            &agent.stack.url("/environments"),
            Some(json!({"name": name, "repositories": [{"owner": "local", "name": "demo"}], "egress": egress})),
        )
        .await?;
        ensure!(r.status == 201, "{}", r.body);
        ids.push(r.body["id"].as_str().unwrap_or_default().to_owned());
    }
    let (mut open, mut walled) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        open.extend(clones_in(&agent, &ids[0], &format!("open {round}")).await?);
        walled.extend(clones_in(&agent, &ids[1], &format!("off {round}")).await?);
    }
    let _ = server.kill().await;
    let (o, w) = (median(open.clone()), median(walled.clone()));
    println!(
        "egress-bench: git clone of a {mb} MB repository, {} clones each",
        open.len()
    );
    println!("  open (the host's network)      median {o:.0} ms  {open:?}");
    println!("  off but the server (the proxy) median {w:.0} ms  {walled:?}");
    println!("  ratio (proxy / direct)         {:.2}x", w / o);
    Ok(())
}
