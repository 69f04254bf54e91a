//! Sandbox benchmarks on the local provider: the real host, the real supervisor, real git
//! and the real OpenCode, with the scripted model server.
//!
//! Run: `./scripts/bench.sh` (after the session benchmarks) or
//! `cargo run --release -p inspect-bench -- sandbox`. `INSPECT_BENCH=fresh`,
//! `restore` or `prebuilt` runs one part (`setup`: the fresh sandboxes, their repository
//! with a 3-s setup hook); `INSPECT_BENCH_RUNS=N` sets the fresh runs;
//! `INSPECT_BENCH_STEPS=1` prints each boot step of a restore as it arrives;
//! `INSPECT_BENCH=equipped` compares fresh sessions without managed skills or MCP servers
//! with fresh sessions given 10 skills and 2 MCP servers.

use anyhow::{Context, Result};
use inspect_tests::client::{create_session, WsClient};
use inspect_tests::fakes::model::{FakeModel, Reply};
use inspect_tests::host::SandboxHost;
use inspect_tests::{Stack, StackOptions};
use serde_json::json;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn git(dir: &std::path::Path, args: &[&str]) -> Result<()> {
    let ok = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .status()?
        .success();
    anyhow::ensure!(ok, "git {args:?} failed");
    Ok(())
}

/// A repository on `main` with `files` committed.
fn committed_repo(files: &[(&str, String)]) -> Result<tempfile::TempDir> {
    let repo = tempfile::tempdir()?;
    git(repo.path(), &["init", "--quiet", "-b", "main"])?;
    for (path, content) in files {
        let path = repo.path().join(path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, content)?;
    }
    git(repo.path(), &["add", "."])?;
    git(
        repo.path(),
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "--quiet",
            "-m",
            "init",
        ],
    )?;
    Ok(repo)
}

/// The resident memory of the supervisor serving `sandbox_id`, in KiB.
fn supervisor_rss_kib(sandbox_id: &str) -> Option<u64> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let p = entry.path();
        let cmd = std::fs::read(p.join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        // The supervisor itself, not bubblewrap around it.
        let is_supervisor = args
            .first()
            .is_some_and(|a| a.ends_with(b"inspect-supervisor"))
            && args.get(1) == Some(&&b"run"[..]);
        if !is_supervisor {
            continue;
        }
        let env = std::fs::read(p.join("environ")).unwrap_or_default();
        if !String::from_utf8_lossy(&env).contains(&format!("INSPECT_SANDBOX_ID={sandbox_id}")) {
            continue;
        }
        let status = std::fs::read_to_string(p.join("status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        return line.split_whitespace().nth(1)?.parse().ok();
    }
    None
}

/// A workspace of ~20k files / 200 MB (made by the repository's setup hook, ignored by
/// git): how long its snapshot takes, and how long a restore takes to `sandbox_ready`.
async fn snapshot_restore(
    stack: &Stack,
    host: &SandboxHost,
    model: &FakeModel,
    runs: usize,
) -> Result<()> {
    let setup = "python3 -c \"import os\nos.makedirs('gen', exist_ok=True)\nfor i in range(20000):\n    d = f'gen/{i // 1000}'\n    os.makedirs(d, exist_ok=True)\n    open(f'{d}/{i}.bin', 'wb').write(os.urandom(10240))\"\n";
    let repo = committed_repo(&[
        (".openinspect/setup.sh", setup.to_owned()),
        (".gitignore", "gen/\n".to_owned()),
    ])?;
    reqwest::Client::new()
        .post(stack.url("/repos"))
        .json(&json!({"name": "big", "path": repo.path().to_string_lossy()}))
        .send()
        .await?;
    let (mut snap_ms, mut snap_bytes, mut restore_ms, mut restore_agent_ms) =
        (vec![], vec![], vec![], vec![]);
    let (mut unpack_ms, mut first_turn_ms) = (vec![], vec![]);
    for _ in 0..runs {
        model.push(vec![Reply::text("ok"), Reply::text("ok again")]);
        let id = create_session(
            &stack.base_url,
            "bench",
            json!({"repoOwner": "local", "repoName": "big"}),
        )
        .await?;
        let (mut ws, _) = WsClient::join(&stack.base_url, &stack.ws_url(""), &id, "bench").await?;
        ws.send(json!({"type": "prompt", "content": "first"}))
            .await?;
        let mut sandbox_id = String::new();
        loop {
            let m = ws.recv_within(300).await?;
            if m["type"] == "sandbox_spawning" {
                sandbox_id = m["sandboxId"].as_str().unwrap_or_default().to_owned();
            }
            if m["type"] == "sandbox_event" && m["event"]["type"] == "snapshot_saved" {
                snap_ms.push(m["event"]["durationMs"].as_f64().unwrap_or(f64::NAN));
                snap_bytes.push(m["event"]["bytes"].as_f64().unwrap_or(0.0) / 1_048_576.0);
                break;
            }
        }
        // The sandbox goes away; the session notices (reconnect grace + provider check).
        reqwest::Client::new()
            .delete(format!("{}/sandboxes/{sandbox_id}", host.url))
            .bearer_auth(&host.secret)
            .send()
            .await?;
        loop {
            let m = ws.recv_within(120).await?;
            if m["type"] == "sandbox_status" && m["status"] == "stale" {
                break;
            }
        }
        let t0 = Instant::now();
        ws.send(json!({"type": "prompt", "content": "second"}))
            .await?;
        let mut restored = false;
        let mut agent_ms = 0.0;
        loop {
            let m = ws.recv_within(300).await?;
            restored |= m["type"] == "sandbox_restored";
            if m["type"] == "sandbox_event"
                && m["event"]["type"] == "boot_step"
                && std::env::var("INSPECT_BENCH_STEPS").is_ok()
            {
                println!(
                    "  step {} {} {:?} at {} ms",
                    m["event"]["step"],
                    m["event"]["status"],
                    m["event"]["durationMs"],
                    t0.elapsed().as_millis()
                );
            }
            if m["type"] == "sandbox_event"
                && m["event"]["type"] == "boot_step"
                && m["event"]["step"] == "agent"
                && m["event"]["status"] != "started"
            {
                agent_ms = m["event"]["durationMs"].as_f64().unwrap_or(0.0);
            }
            // The supervisor unpacks the snapshot alongside the agent's start.
            if m["type"] == "sandbox_event"
                && m["event"]["type"] == "boot_step"
                && m["event"]["step"] == "restore"
                && m["event"]["status"] != "started"
            {
                unpack_ms.push(m["event"]["durationMs"].as_f64().unwrap_or(0.0));
            }
            if m["type"] == "sandbox_ready" {
                break;
            }
        }
        anyhow::ensure!(
            restored,
            "the second sandbox was not restored from the snapshot"
        );
        restore_ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        restore_agent_ms.push(agent_ms);
        let ready = Instant::now();
        loop {
            let m = ws.recv_within(120).await?;
            if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
                break;
            }
        }
        first_turn_ms.push(ready.elapsed().as_secs_f64() * 1000.0);
    }
    println!("# snapshot and restore (20,000 files, 200 MB of data, {runs} runs)");
    println!(
        "snapshot: median {:.0} ms ({:.0} MiB tar)",
        median(snap_ms),
        median(snap_bytes)
    );
    let (r, a) = (median(restore_ms), median(restore_agent_ms));
    let unpack = if unpack_ms.is_empty() {
        "unpacked before the sandbox starts".to_owned()
    } else {
        format!(
            "the snapshot unpacked in {:.0} ms alongside it",
            median(unpack_ms)
        )
    };
    println!(
        "restore -> ready: median {r:.0} ms (agent start {a:.0} ms, {unpack}; ready minus agent {:.0} ms)",
        r - a
    );
    println!(
        "first turn after the restore (ready -> execution_complete, one reply): median {:.0} ms",
        median(first_turn_ms)
    );
    Ok(())
}

/// A repository whose setup takes 20 s: fresh sessions without an image, then with one
/// (built once by hand): prompt -> `sandbox_ready`.
async fn prebuilt_image(stack: &Stack, model: &FakeModel, runs: usize) -> Result<()> {
    let repo = committed_repo(&[
        (
            ".openinspect/setup.sh",
            "echo installing; sleep 20; echo done > .deps\n".to_owned(),
        ),
        (".gitignore", ".deps\n".to_owned()),
    ])?;
    let client = reqwest::Client::new();
    client
        .post(stack.url("/repos"))
        .json(&json!({"name": "slow-setup", "path": repo.path().to_string_lossy()}))
        .send()
        .await?;
    let ready_ms = |stack: &Stack| {
        let base = stack.base_url.clone();
        let ws_url = stack.ws_url("");
        async move {
            model.push(vec![Reply::text("ok")]);
            let id = create_session(
                &base,
                "bench",
                json!({"repoOwner": "local", "repoName": "slow-setup"}),
            )
            .await?;
            let (mut ws, _) = WsClient::join(&base, &ws_url, &id, "bench").await?;
            let t0 = Instant::now();
            ws.send(json!({"type": "prompt", "content": "go"})).await?;
            let mut setup = String::new();
            loop {
                let m = ws.recv_within(300).await?;
                if m["type"] == "sandbox_event"
                    && m["event"]["type"] == "boot_step"
                    && m["event"]["step"] == "setup"
                    && m["event"]["status"] != "started"
                {
                    setup = m["event"]["status"].as_str().unwrap_or_default().to_owned();
                }
                if m["type"] == "sandbox_ready" {
                    break;
                }
            }
            let ms = t0.elapsed().as_secs_f64() * 1000.0;
            loop {
                let m = ws.recv_within(120).await?;
                if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
                    break;
                }
            }
            Ok::<_, anyhow::Error>((ms, setup))
        }
    };
    let mut without = vec![];
    for _ in 0..runs {
        let (ms, setup) = ready_ms(stack).await?;
        anyhow::ensure!(setup == "succeeded", "setup {setup} without an image");
        without.push(ms);
    }
    let t = Instant::now();
    let built: serde_json::Value = client
        .post(stack.url("/images/builds"))
        .json(&json!({"scope": {"kind": "repository", "owner": "local", "name": "slow-setup"}}))
        .send()
        .await?
        .json()
        .await?;
    anyhow::ensure!(built["status"] == "building", "{built}");
    loop {
        let list: serde_json::Value = client
            .get(stack.url("/images?repository=local/slow-setup"))
            .send()
            .await?
            .json()
            .await?;
        match list["builds"][0]["status"].as_str() {
            Some("ready") => break,
            Some("building") => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
            _ => anyhow::bail!("the image build failed: {list}"),
        }
    }
    let build_ms = t.elapsed().as_secs_f64() * 1000.0;
    let mut with = vec![];
    for _ in 0..runs {
        let (ms, setup) = ready_ms(stack).await?;
        anyhow::ensure!(setup == "skipped", "setup {setup} with an image");
        with.push(ms);
    }
    let (a, b) = (median(without), median(with));
    println!("# prebuilt images (setup.sh takes 20 s; {runs} fresh sessions each way)");
    println!("image build (by hand -> ready): {build_ms:.0} ms");
    println!("fresh -> ready without an image: median {a:.0} ms");
    println!(
        "fresh -> ready from the image:   median {b:.0} ms ({:.1}x faster)",
        a / b
    );
    Ok(())
}

/// Fresh sessions on a plain repository against fresh sessions on one given 10 managed
/// skills (each with two files) and 2 MCP servers: prompt -> ready and prompt -> the first
/// turn's end, medians and their ratio.
async fn equipped(stack: &Stack, host: &SandboxHost, model: &FakeModel, runs: usize) -> Result<()> {
    let files: Vec<(&str, String)> = (0..50)
        .map(|i| (["a.txt", "b.txt"][i % 2], format!("content {i}\n")))
        .collect();
    let plain = committed_repo(&files)?;
    let equipped = committed_repo(&files)?;
    let http = reqwest::Client::new();
    for (name, repo) in [("plain", &plain), ("equipped", &equipped)] {
        http.post(stack.url("/repos"))
            .json(&json!({"name": name, "path": repo.path().to_string_lossy()}))
            .send()
            .await?
            .error_for_status()?;
    }
    let scope = json!([{"kind": "repository", "owner": "local", "name": "equipped"}]);
    for i in 0..10 {
        http.post(stack.url("/skills"))
            .json(&json!({"name": format!("skill-{i}"), "description": format!("Use for task kind {i}"),
                          "instructions": "Step one.\n".repeat(200),
                          "files": [{"path": "references/notes.md", "content": "x".repeat(4000)},
                                    {"path": "scripts/run.sh", "content": "echo run", "executable": true}],
                          "assignments": scope}))
            .send()
            .await?
            .error_for_status()?;
    }
    let mut servers = vec![];
    for i in 0..2 {
        let server =
            inspect_tests::fakes::mcp::FakeMcp::start(&format!("tool_{i}"), "A tool", None).await?;
        http.post(stack.url("/mcp-servers"))
            .json(&json!({"name": format!("server-{i}"), "server": {"type": "remote", "url": server.url},
                          "scope": {"kind": "repository", "owner": "local", "name": "equipped"}}))
            .send()
            .await?
            .error_for_status()?;
        servers.push(server);
    }
    let mut results = vec![];
    for repo in ["plain", "equipped"] {
        let (mut ready, mut turn) = (vec![], vec![]);
        for run in 0..runs {
            model.push(vec![Reply::text("ok")]);
            let id = create_session(
                &stack.base_url,
                "bench",
                json!({"repoOwner": "local", "repoName": repo}),
            )
            .await?;
            let (mut ws, _) =
                WsClient::join(&stack.base_url, &stack.ws_url(""), &id, "bench").await?;
            let t0 = Instant::now();
            ws.send(json!({"type": "prompt", "content": format!("{repo} {run}")}))
                .await?;
            let mut sandbox_id = String::new();
            loop {
                let m = ws.recv_within(120).await?;
                if m["type"] == "sandbox_spawning" {
                    sandbox_id = m["sandboxId"].as_str().unwrap_or_default().to_owned();
                }
                if m["type"] == "sandbox_ready" {
                    ready.push(t0.elapsed().as_secs_f64() * 1000.0);
                }
                if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
                    turn.push(t0.elapsed().as_secs_f64() * 1000.0);
                    break;
                }
            }
            http.delete(format!("{}/sandboxes/{sandbox_id}", host.url))
                .bearer_auth(&host.secret)
                .send()
                .await?;
        }
        results.push((median(ready), median(turn)));
    }
    let ((r0, t0), (r1, t1)) = (results[0], results[1]);
    println!(
        "# boot with 10 managed skills and 2 MCP servers vs none ({runs} fresh sessions each)"
    );
    println!(
        "prompt -> ready: none {r0:.0} ms, equipped {r1:.0} ms ({:.2}x)",
        r1 / r0
    );
    println!(
        "prompt -> first turn's end: none {t0:.0} ms, equipped {t1:.0} ms ({:.2}x)",
        t1 / t0
    );
    Ok(())
}

pub async fn benchmark() -> Result<()> {
    let runs: usize = std::env::var("INSPECT_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let model = FakeModel::start(vec![]).await?;
    let host = SandboxHost::start(&model.base_url, "inspect/fake-model").await?;
    let mut options = StackOptions::unthrottled();
    options.vars.extend(host.worker_vars());
    let stack = Stack::start_with(options)
        .await
        .context("starting the stack")?;
    // `INSPECT_BENCH=prebuilt` runs only the prebuilt-image benchmark.
    if std::env::var("INSPECT_BENCH").as_deref() == Ok("prebuilt") {
        return prebuilt_image(&stack, &model, 3).await;
    }
    if std::env::var("INSPECT_BENCH").as_deref() == Ok("equipped") {
        return equipped(&stack, &host, &model, runs).await;
    }
    // `INSPECT_BENCH=restore` runs only the snapshot and restore benchmark.
    if std::env::var("INSPECT_BENCH").as_deref() == Ok("restore") {
        return snapshot_restore(&stack, &host, &model, 3).await;
    }
    // `INSPECT_BENCH=setup`: the same sandboxes, their repository with a 3-s setup hook.
    let with_setup = std::env::var("INSPECT_BENCH").as_deref() == Ok("setup");
    let mut files: Vec<(String, String)> = (0..50)
        .map(|i| (format!("file{i}.txt"), format!("content {i}\n")))
        .collect();
    if with_setup {
        files.push((".openinspect/setup.sh".into(), "sleep 3\n".into()));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let repo = committed_repo(&files)?;
    reqwest::Client::new()
        .post(stack.url("/repos"))
        .json(&json!({"name": "small", "path": repo.path().to_string_lossy()}))
        .send()
        .await?;

    let (mut total, mut supervisor_part, mut agent_part, mut rss, mut warm) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut first_turn, mut first_reply) = (vec![], vec![]);
    for run in 0..runs {
        model.push(vec![Reply::text("ok"), Reply::text("ok again")]);
        let id = create_session(
            &stack.base_url,
            "bench",
            json!({"repoOwner": "local", "repoName": "small"}),
        )
        .await?;
        let (mut ws, _) = WsClient::join(&stack.base_url, &stack.ws_url(""), &id, "bench").await?;
        let t0 = Instant::now();
        ws.send(json!({"type": "prompt", "content": format!("run {run}")}))
            .await?;
        let mut sandbox_id = String::new();
        let mut agent_ms = 0.0;
        let mut steps_ms = 0.0;
        loop {
            let m = ws.recv_within(120).await?;
            if m["type"] == "sandbox_spawning" {
                sandbox_id = m["sandboxId"].as_str().unwrap_or_default().to_owned();
            }
            if m["type"] == "sandbox_event"
                && m["event"]["type"] == "boot_step"
                && m["event"]["status"] != "started"
            {
                let ms = m["event"]["durationMs"].as_f64().unwrap_or(0.0);
                if m["event"]["step"] == "agent" {
                    agent_ms = ms;
                } else {
                    steps_ms += ms;
                }
            }
            if m["type"] == "sandbox_ready" {
                break;
            }
        }
        let ready_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let ready = Instant::now();
        loop {
            let m = ws.recv_within(60).await?;
            if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
                break;
            }
        }
        first_turn.push(ready.elapsed().as_secs_f64() * 1000.0);
        first_reply.push(t0.elapsed().as_secs_f64() * 1000.0);
        if let Some(kib) = supervisor_rss_kib(&sandbox_id) {
            rss.push(kib as f64 / 1024.0);
        }
        // A second prompt to the now warm sandbox: queued -> completed.
        let t1 = Instant::now();
        ws.send(json!({"type": "prompt", "content": "again"}))
            .await?;
        loop {
            let m = ws.recv_within(60).await?;
            if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
                break;
            }
        }
        warm.push(t1.elapsed().as_secs_f64() * 1000.0);
        total.push(ready_ms);
        agent_part.push(agent_ms);
        supervisor_part.push(ready_ms - agent_ms);
        println!("run {run}: ready in {ready_ms:.0} ms (agent start {agent_ms:.0} ms; boot steps {steps_ms:.0} ms)");
        // Stop it so the next run is a fresh spawn with its own memory.
        reqwest::Client::new()
            .delete(format!("{}/sandboxes/{sandbox_id}", host.url))
            .bearer_auth(&host.secret)
            .send()
            .await?;
    }
    let hooks = if with_setup {
        "a 3-s setup hook"
    } else {
        "no hooks"
    };
    println!("# sandbox benchmarks (local provider, {runs} fresh sandboxes, 50-file repository, {hooks})");
    println!("fresh sandbox -> ready: median {:.0} ms", median(total));
    println!(
        "  of which the agent's start: median {:.0} ms",
        median(agent_part)
    );
    println!(
        "  everything else (control plane, spawn, supervisor, git): median {:.0} ms",
        median(supervisor_part)
    );
    println!(
        "first turn (ready -> execution_complete): median {:.0} ms; prompt -> first execution_complete: median {:.0} ms",
        median(first_turn),
        median(first_reply)
    );
    println!(
        "warm sandbox, prompt -> execution_complete (one-step turn): median {:.0} ms",
        median(warm)
    );
    println!("supervisor RSS after a turn: median {:.1} MiB", median(rss));
    // `INSPECT_BENCH=fresh` stops after the fresh sandboxes.
    if with_setup || std::env::var("INSPECT_BENCH").as_deref() == Ok("fresh") {
        return Ok(());
    }
    snapshot_restore(&stack, &host, &model, 3).await?;
    prebuilt_image(&stack, &model, 3).await?;
    Ok(())
}
