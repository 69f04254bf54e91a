//! The scale curve (a benchmark, not a test): N sessions at once under `wrangler dev`,
//! each with one subscribed client and a sandbox socket (the test plays the sandbox) that
//! sends one batch of 10 tool calls a second. For each N: delivery latency p50/p99 (the
//! sandbox's send → the client's receipt; also the p99 of the batches sent from the load's
//! third second on; every client stays connected until all have their events, so none
//! leaving weighs on the others' last deliveries), workerd's RSS and its CPU per session; its CPU a
//! batch over the whole load and over the steady part alone (from its third second to its
//! last, without the ramp and the drain: the finer measure for alternated runs).
//!
//! Run: `cargo run --release -p inspect-bench -- scale` (after
//! `./scripts/bench.sh` built the Worker, or with `INSPECT_WORKER_PREBUILT=1`).
//! `INSPECT_SCALE=100,300,1000` picks the sizes, `INSPECT_SCALE_SECONDS=20` the load time.

use anyhow::{Context, Result};
use futures::{SinkExt, StreamExt};
use inspect_tests::capture_provider::{connect_sandbox, next_command, CaptureProvider};
use inspect_tests::percentile;
use serde_json::json;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

const PER_BATCH: usize = 10;

struct Run {
    sessions: usize,
    p50: f64,
    p99: f64,
    /// The p99 of the batches sent from the load's third second on.
    steady_p99: Option<f64>,
    delivered: usize,
    expected: usize,
    rss_mib: f64,
    cpu_per_session_pct: f64,
    /// workerd's CPU time per batch the sandboxes sent (finer than the percentage).
    cpu_per_batch_ms: f64,
    /// The same over the steady part of the load (`None` for a load under 5 s).
    steady_cpu_per_batch_ms: Option<f64>,
}

async fn run(n: usize, secs: u64) -> Result<Run> {
    let mut provider = CaptureProvider::start().await?;
    let (stack, _source) = provider.stack_with_repo("scale").await?;

    // Sessions, their clients and their first prompts, 16 at a time.
    let setup = Instant::now();
    let mut clients = inspect_tests::client::watched_sessions(&stack, "scale", n).await?;
    for (_, ws) in &mut clients {
        ws.send(json!({"type": "prompt", "content": "go"})).await?;
    }
    let created_s = setup.elapsed().as_secs_f64();
    eprintln!("  {n} sessions: created and watched in {created_s:.1} s");
    let mut spawns = HashMap::new();
    while spawns.len() < n {
        let s = provider.next_spawn().await?;
        spawns.insert(s.session_id.clone(), s);
    }
    // Each session's sandbox connects, says ready and gets its prompt.
    let mut sandboxes = Vec::with_capacity(n);
    for chunk in clients.chunks(16) {
        let joined = futures::future::join_all(chunk.iter().map(|(id, _)| {
            let spawn = spawns[id].clone();
            let stack = &stack;
            async move {
                let mut sb = connect_sandbox(stack, &spawn)
                    .await
                    .with_context(|| format!("the sandbox socket of {}", spawn.session_id))?;
                sb.send(Message::text(
                    json!({"type": "ready", "sandboxId": spawn.sandbox_id, "timestamp": 0})
                        .to_string(),
                ))
                .await?;
                let prompt = next_command(&mut sb, "prompt").await?;
                let message = prompt["messageId"].as_str().unwrap_or_default().to_owned();
                Ok::<_, anyhow::Error>((sb, spawn.sandbox_id.clone(), message))
            }
        }))
        .await;
        for j in joined {
            sandboxes.push(j?);
        }
    }
    for (_, c) in &mut clients {
        c.clear();
    }
    eprintln!(
        "  {n} sessions: sandboxes connected by {:.1} s",
        setup.elapsed().as_secs_f64()
    );

    // The load: every sandbox sends a batch a second, stamped with the send time.
    let origin = Instant::now();
    let cpu_before = inspect_tests::stack::workerd().map(|w| w.2).unwrap_or(0.0);
    let senders: Vec<_> = sandboxes
        .into_iter()
        .enumerate()
        .map(|(k, (mut sb, sandbox, message))| {
            tokio::spawn(async move {
                // Spread the sessions evenly over the second.
                tokio::time::sleep(Duration::from_micros(k as u64 * 1_000_000 / n as u64)).await;
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                for round in 0..secs {
                    tick.tick().await;
                    let sent = origin.elapsed().as_micros() as u64;
                    let events: Vec<_> = (0..PER_BATCH)
                        .map(|e| json!({"type": "tool_call", "messageId": message, "tool": "bash", "callId": format!("c{round}-{e}"), "status": "completed", "args": {"sent": sent}, "output": "ok", "sandboxId": sandbox, "timestamp": 0}))
                        .collect();
                    if sb
                        .send(Message::text(json!({"type": "batch", "events": events}).to_string()))
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
                // Keep reading so the control plane's frames do not back up.
                let _ = tokio::time::timeout(Duration::from_secs(3), async {
                    while sb.next().await.is_some() {}
                })
                .await;
            })
        })
        .collect();
    // The steady part: from the load's third second to its last, every session sending.
    let steady = tokio::spawn(async move {
        if secs < 5 {
            return None;
        }
        let window = secs - 3;
        tokio::time::sleep_until((origin + Duration::from_secs(2)).into()).await;
        let before = inspect_tests::stack::workerd()?.2;
        tokio::time::sleep_until((origin + Duration::from_secs(2 + window)).into()).await;
        let after = inspect_tests::stack::workerd()?.2;
        Some((after - before) * 1000.0 / (n as u64 * window) as f64)
    });
    let expected = n * secs as usize * PER_BATCH;
    let readers: Vec<_> = clients
        .into_iter()
        .map(|(_, mut ws)| {
            let per_client = secs as usize * PER_BATCH;
            tokio::spawn(async move {
                let mut lat = Vec::new();
                while lat.len() < per_client {
                    match ws.recv_within(10).await {
                        Ok(m) if m["type"] == "sandbox_event" => {
                            if let Some(sent) = m["event"]["args"]["sent"].as_u64() {
                                let now = origin.elapsed().as_micros() as u64;
                                lat.push((sent, now.saturating_sub(sent) as f64 / 1000.0));
                            }
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                // The socket stays open until every client has its events: a client leaving
                // is work for the object, and would delay the others' last deliveries.
                (lat, ws)
            })
        })
        .collect();
    let mut stamped = Vec::with_capacity(expected);
    let mut finished = Vec::with_capacity(n);
    for r in readers {
        if let Ok((lat, ws)) = r.await {
            stamped.extend(lat);
            finished.push(ws);
        }
    }
    // The steady part's deliveries: those sent from the load's third second on.
    let mut steady_lat: Vec<f64> = stamped
        .iter()
        .filter(|(sent, _)| *sent >= 2_000_000)
        .map(|(_, l)| *l)
        .collect();
    steady_lat.sort_by(|a, b| a.total_cmp(b));
    let mut all: Vec<f64> = stamped.into_iter().map(|(_, l)| l).collect();
    let window = origin.elapsed().as_secs_f64();
    for s in senders {
        let _ = s.await;
    }
    let (_, rss, cpu_after) = inspect_tests::stack::workerd().unwrap_or((0, 0, cpu_before));
    drop(finished);
    let steady_cpu_per_batch_ms = steady.await.ok().flatten();
    all.sort_by(|a, b| a.total_cmp(b));
    Ok(Run {
        sessions: n,
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
        steady_p99: (secs >= 5).then(|| percentile(&steady_lat, 0.99)),
        delivered: all.len(),
        expected,
        rss_mib: rss as f64 / 1024.0,
        cpu_per_session_pct: (cpu_after - cpu_before) / window / n as f64 * 100.0,
        cpu_per_batch_ms: (cpu_after - cpu_before) * 1000.0
            / (expected as f64 / PER_BATCH as f64).max(1.0),
        steady_cpu_per_batch_ms,
    })
}

pub async fn benchmark() -> Result<()> {
    let sizes: Vec<usize> = std::env::var("INSPECT_SCALE")
        .unwrap_or_else(|_| "100,300,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let secs: u64 = std::env::var("INSPECT_SCALE_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    println!("# scale curve: sessions at once, one client and one batch of {PER_BATCH} a second each, {secs} s");
    for n in sizes {
        let t = Instant::now();
        match run(n, secs).await {
            Ok(r) => println!(
                "{} sessions: delivery p50 {:.1} ms, p99 {:.1} ms{} ({} of {} events), workerd RSS {:.0} MiB ({:.2} MiB/session), CPU {:.2} % of a core per session, {:.3} ms per batch{} (run took {:.0} s)",
                r.sessions, r.p50, r.p99,
                r.steady_p99.map(|ms| format!(" (steady p99 {ms:.1} ms)")).unwrap_or_default(),
                r.delivered, r.expected, r.rss_mib, r.rss_mib / r.sessions as f64, r.cpu_per_session_pct, r.cpu_per_batch_ms,
                r.steady_cpu_per_batch_ms.map(|ms| format!(", {ms:.3} ms steady")).unwrap_or_default(),
                t.elapsed().as_secs_f64()
            ),
            Err(e) => println!("{n} sessions: failed: {e:#}"),
        }
    }
    Ok(())
}
