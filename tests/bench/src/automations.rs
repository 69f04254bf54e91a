//! Schedules at scale (a benchmark, not a test): N enabled schedules all due in one cron
//! tick under `wrangler dev`, each on a repository, with a provider the benchmark plays
//! (every spawn is answered at once and kept). Measures the tick's wall time (claiming each
//! slot, creating and prompting N sessions) and workerd's CPU through it (steadier on a
//! shared machine), and checks each automation ran exactly once:
//! one run, one session, one spawn — and none more on a second tick of the same slot.
//!
//! Run: `cargo run --release -p inspect-bench -- automations` (after
//! `./scripts/bench.sh` built the Worker, or with `INSPECT_WORKER_PREBUILT=1`).
//! `INSPECT_AUTOMATIONS=1000` picks N, `INSPECT_BENCH_RUNS=3` how many times it is done.
//! `INSPECT_BENCH_CAP=1` lets at most that many sandboxes run (the rest wait for room, as
//! on a capped host) and counts the spawns refused in the minute after the tick.

use anyhow::{ensure, Context, Result};
use inspect_tests::capture_provider::CaptureProvider;
use inspect_tests::client::send;
use inspect_tests::Stack;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

async fn tick(stack: &Stack, ms: i64) -> Result<f64> {
    let t = Instant::now();
    let r = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()?
        .get(stack.url(&format!(
            "/cdn-cgi/local/scheduled?cron=*+*+*+*+*&time={ms}"
        )))
        .send()
        .await?;
    ensure!(
        r.status().is_success(),
        "the tick failed: {}",
        r.text().await?
    );
    Ok(t.elapsed().as_secs_f64())
}

struct Outcome {
    create_s: f64,
    tick_s: f64,
    /// workerd's CPU seconds through the tick.
    tick_cpu_s: f64,
    second_tick_s: f64,
    /// With a cap: the spawns refused from the tick until a minute after it.
    refused: Option<usize>,
}

async fn once(n: usize, cap: Option<usize>) -> Result<Outcome> {
    let mut provider = CaptureProvider::start_capped(cap).await?;
    let (stack, _source) = provider.stack_with_repo("bench").await?;

    let made = Instant::now();
    let mut ids = Vec::with_capacity(n);
    let mut due = 0;
    let all: Vec<usize> = (0..n).collect();
    for chunk in all.chunks(16) {
        let created = futures::future::join_all(chunk.iter().map(|i| {
            let url = stack.url("/automations");
            async move {
                send(
                    Method::POST,
                    &url,
                    Some(json!({
                        "name": format!("Hourly {i}"),
                        "triggerType": "schedule",
                        "repositories": [{"owner": "local", "name": "bench"}],
                        "instructions": "Check the build.",
                        "schedule": {"cron": "0 * * * *", "timezone": "UTC"}
                    })),
                )
                .await
            }
        }))
        .await;
        for r in created {
            let r = r?;
            ensure!(r.status == 201, "creating: {} {}", r.status, r.body);
            due = r.body["automation"]["nextRunAt"].as_i64().unwrap_or(0);
            ids.push(
                r.body["automation"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    }
    let create_s = made.elapsed().as_secs_f64();
    eprintln!("  {n} schedules made in {create_s:.1} s; the due tick begins");

    // workerd's CPU through the tick: steadier than its wall time on a shared machine.
    let cpu = || inspect_tests::stack::workerd().map_or(0.0, |w| w.2);
    let cpu_before = cpu();
    let tick_s = tick(&stack, due + 1_000).await?;
    let tick_cpu_s = cpu() - cpu_before;
    let second_tick_s = tick(&stack, due + 2_000).await?;
    eprintln!("  the due tick: {tick_s:.1} s; checking each automation ran once");

    // Each automation: exactly one run with one session; every session spawned once.
    let mut sessions = HashSet::new();
    for chunk in ids.chunks(16) {
        let answers = futures::future::join_all(chunk.iter().map(|id| {
            let url = stack.url(&format!("/automations/{id}/runs"));
            async move { send(Method::GET, &url, None).await }
        }))
        .await;
        for (id, r) in chunk.iter().zip(answers) {
            let r = r?;
            let runs = r.body["runs"].as_array().cloned().unwrap_or_default();
            ensure!(runs.len() == 1, "{id} ran {} times: {}", runs.len(), r.body);
            let run: &Value = &runs[0];
            let s = run["sessions"].as_array().cloned().unwrap_or_default();
            ensure!(s.len() == 1, "{id}'s run has {} sessions: {run}", s.len());
            let sid = s[0]["sessionId"].as_str().context("no session")?.to_owned();
            ensure!(sessions.insert(sid), "a session shared by two runs");
        }
    }
    if let Some(cap) = cap {
        // The rest wait for room: count how often they ask in the minute after the tick.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let refused = provider.refused.load(std::sync::atomic::Ordering::Relaxed);
        let mut spawned = 0;
        while provider.spawns.try_recv().is_ok() {
            spawned += 1;
        }
        ensure!(
            spawned == cap,
            "{spawned} sandboxes started under a cap of {cap}"
        );
        return Ok(Outcome {
            create_s,
            tick_s,
            tick_cpu_s,
            second_tick_s,
            refused: Some(refused),
        });
    }
    let mut spawned = HashSet::new();
    while spawned.len() < n {
        let s = provider.next_spawn().await.context("waiting for spawns")?;
        ensure!(
            spawned.insert(s.session_id.clone()),
            "{} spawned twice",
            s.session_id
        );
    }
    ensure!(spawned == sessions, "the spawns are not the runs' sessions");
    Ok(Outcome {
        create_s,
        tick_s,
        tick_cpu_s,
        second_tick_s,
        refused: None,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub async fn benchmark() -> Result<()> {
    let n: usize = inspect_tests::setting("INSPECT_AUTOMATIONS").unwrap_or(1000);
    let runs: usize = inspect_tests::setting("INSPECT_BENCH_RUNS").unwrap_or(1);
    let cap: Option<usize> = inspect_tests::setting("INSPECT_BENCH_CAP");
    let mut ticks = Vec::new();
    let mut cpus = Vec::new();
    for r in 0..runs {
        let o = once(n, cap).await?;
        if let (Some(cap), Some(refused)) = (cap, o.refused) {
            eprintln!(
                "  under a cap of {cap}: {refused} spawns refused from the tick to a minute after it"
            );
        }
        eprintln!(
            "run {}: {n} schedules made in {:.1} s; the due tick fired them all in {:.1} s ({:.1} ms each; workerd's CPU {:.1} s, {:.1} ms a session); the same slot again took {:.2} s and fired none",
            r + 1,
            o.create_s,
            o.tick_s,
            o.tick_s * 1000.0 / n as f64,
            o.tick_cpu_s,
            o.tick_cpu_s * 1000.0 / n as f64,
            o.second_tick_s
        );
        ticks.push(o.tick_s);
        cpus.push(o.tick_cpu_s);
    }
    let capped = cap
        .map(|c| format!(" (at most {c} sandboxes)"))
        .unwrap_or_default();
    println!(
        "automations-bench: {n} schedules due in one tick{capped}, each run exactly once: median {:.1} s (workerd's CPU {:.1} s) over {runs} run(s)",
        median(ticks),
        median(cpus)
    );
    Ok(())
}
