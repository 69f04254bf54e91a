//! A burst of prompts (a benchmark, not a test): N sessions under `wrangler dev`, each with
//! one subscribed client, and a provider that takes its time to make each sandbox. Every
//! client sends one prompt at the same moment; measured for each, from its send to its own
//! `user_message` reaching it (the echo), p50/p99/max, and how long until every echo
//! arrived. The echo must not wait on the provider, whatever it is doing. Also workerd's
//! memory for the N sessions idle, each with its client, before the burst.
//!
//! Run: `cargo run --release -p inspect-bench -- echo` (after `./scripts/bench.sh`
//! built the Workers, or with `INSPECT_WORKER_PREBUILT=1`). `INSPECT_ECHO=2000` picks N,
//! `INSPECT_ECHO_PROVIDER_MS=2000` how long the provider takes to answer a spawn.

use anyhow::Result;
use inspect_tests::capture_provider::CaptureProvider;
use inspect_tests::percentile;
use serde_json::json;
use std::time::{Duration, Instant};

pub async fn benchmark() -> Result<()> {
    let n: usize = inspect_tests::setting("INSPECT_ECHO").unwrap_or(2000);
    let provider_ms: u64 = inspect_tests::setting("INSPECT_ECHO_PROVIDER_MS").unwrap_or(2000);
    let provider = CaptureProvider::start_with(None, Duration::from_millis(provider_ms)).await?;
    let (stack, _source) = provider.stack_with_repo("echo").await?;

    // Sessions and their clients, 16 at a time; workerd's memory before and after (the
    // sessions idle, each with its client).
    let rss_before = inspect_tests::stack::workerd().map_or(0, |w| w.1);
    let setup = Instant::now();
    let clients = inspect_tests::client::watched_sessions(&stack, "echo", n).await?;
    eprintln!(
        "  {n} sessions: created and watched in {:.1} s",
        setup.elapsed().as_secs_f64()
    );

    let rss_idle = inspect_tests::stack::workerd().map_or(0, |w| w.1);
    eprintln!(
        "  workerd RSS {:.0} MiB before, {:.0} MiB with {n} idle sessions and their clients: {:.2} MiB a session",
        rss_before as f64 / 1024.0,
        rss_idle as f64 / 1024.0,
        rss_idle.saturating_sub(rss_before) as f64 / 1024.0 / n as f64
    );
    // The burst: every client sends its prompt at once.
    let (go, ready) = tokio::sync::watch::channel(false);
    let burst: Vec<_> = clients
        .into_iter()
        .map(|(_, mut ws)| {
            let mut ready = ready.clone();
            tokio::spawn(async move {
                let _ = ready.wait_for(|go| *go).await;
                ws.clear();
                let sent = Instant::now();
                ws.send(json!({"type": "prompt", "content": "echo"}))
                    .await?;
                let written = sent.elapsed().as_secs_f64() * 1000.0;
                loop {
                    let m = ws.recv_within(120).await?;
                    if m["type"] == "sandbox_event" && m["event"]["type"] == "user_message" {
                        let echoed = sent.elapsed().as_secs_f64() * 1000.0;
                        return Ok::<_, anyhow::Error>((written, echoed));
                    }
                }
            })
        })
        .collect();
    let cpu_before = inspect_tests::stack::workerd().map(|w| w.2).unwrap_or(0.0);
    let start = Instant::now();
    go.send(true)?;
    let mut echoes = Vec::with_capacity(n);
    let mut writes = Vec::with_capacity(n);
    let mut lost = 0;
    for b in burst {
        match b.await {
            Ok(Ok((written, echoed))) => {
                writes.push(written);
                echoes.push(echoed);
            }
            _ => lost += 1,
        }
    }
    writes.sort_by(|a, b| a.total_cmp(b));
    eprintln!(
        "  the prompts were written to their sockets within p50 {:.0} ms, max {:.0} ms",
        percentile(&writes, 0.5),
        writes.last().copied().unwrap_or(f64::NAN)
    );
    let all_s = start.elapsed().as_secs_f64();
    // Every sandbox wanted is asked for meanwhile: the provider's answers are on their way.
    let cpu = inspect_tests::stack::workerd()
        .map(|w| w.2)
        .unwrap_or(cpu_before)
        - cpu_before;
    eprintln!(
        "  workerd's CPU while the echoes came: {:.2} s ({:.2} ms a prompt)",
        cpu,
        cpu * 1000.0 / n as f64
    );
    echoes.sort_by(|a, b| a.total_cmp(b));
    println!(
        "echo-bench: {n} prompts at once, provider answering after {provider_ms} ms: echo min {:.0} ms, p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; every echo in {all_s:.1} s; {lost} lost",
        echoes.first().copied().unwrap_or(f64::NAN),
        percentile(&echoes, 0.5),
        percentile(&echoes, 0.99),
        echoes.last().copied().unwrap_or(f64::NAN),
    );
    Ok(())
}
