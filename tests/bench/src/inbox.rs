//! The inbox's latency (a benchmark, not a test): a person's prompt ends in a session (its
//! sandbox, played here, says `execution_complete`) and the item reaches the person's open
//! inbox socket; measured from the frame's send, against the same end reaching the
//! session's own client (what the object's fan-out costs alone). Then the analytics query
//! (`GET /usage`) over N sessions in the index.
//!
//! Run: `cargo run --release -p inspect-bench -- inbox` (after `./scripts/bench.sh`
//! built the Workers, or with `INSPECT_WORKER_PREBUILT=1`). `INSPECT_INBOX_RUNS=40` picks the
//! prompts, `INSPECT_USAGE_SESSIONS=10000` the sessions the query sums.

use anyhow::Result;
use futures::SinkExt;
use inspect_tests::capture_provider::{connect_sandbox, next_command, CaptureProvider};
use inspect_tests::client::{send_as, WsClient};
use inspect_tests::percentile;
use serde_json::json;
use std::time::{Duration, Instant};

pub async fn benchmark() -> Result<()> {
    let runs: usize = inspect_tests::setting("INSPECT_INBOX_RUNS").unwrap_or(40);
    let sessions: usize = inspect_tests::setting("INSPECT_USAGE_SESSIONS").unwrap_or(10_000);
    let mut provider = CaptureProvider::start().await?;
    let (stack, _source) = provider.stack_with_repo("inbox").await?;

    let made = send_as(
        "ann",
        reqwest::Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "local", "repoName": "inbox", "title": "inbox bench"})),
    )
    .await?;
    anyhow::ensure!(made.status == 201, "create: {}", made.body);
    let session = made.body["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // Ann prompts over HTTP (a person watching the session live is not told in the inbox);
    // a colleague watches it.
    let (mut client, _) =
        WsClient::join(&stack.base_url, &stack.ws_url(""), &session, "watcher").await?;
    let prompt_url = stack.url(&format!("/sessions/{session}/prompt"));
    let send_prompt = |k: usize| {
        let url = prompt_url.clone();
        async move {
            send_as(
                "ann",
                reqwest::Method::POST,
                &url,
                Some(json!({"content": format!("go {k}")})),
            )
            .await
        }
    };
    let mut inbox = WsClient::connect_with(
        &stack.ws_url("/inbox/socket"),
        &[("X-OpenInspect-Actor", "ann"), ("Origin", &stack.base_url)],
    )
    .await?;
    let hello = inbox.recv().await?;
    anyhow::ensure!(hello["type"] == "unread", "the inbox greeted: {hello}");

    send_prompt(0).await?;
    let spawn = provider.next_spawn().await?;
    let mut sb = connect_sandbox(&stack, &spawn).await?;
    let frame = |v: serde_json::Value| {
        let mut v = v;
        v["sandboxId"] = json!(spawn.sandbox_id);
        v["timestamp"] = json!(0);
        tokio_tungstenite::tungstenite::Message::text(v.to_string())
    };
    sb.send(frame(json!({"type": "ready"}))).await?;

    let mut to_inbox = Vec::with_capacity(runs);
    let mut to_client = Vec::with_capacity(runs);
    for k in 0..runs {
        if k > 0 {
            send_prompt(k).await?;
        }
        let prompt = next_command(&mut sb, "prompt").await?;
        client.clear();
        let sent = Instant::now();
        sb.send(frame(json!({"type": "execution_complete", "messageId": prompt["messageId"], "success": true, "ackId": format!("a{k}")})))
            .await?;
        let mut seen_client = None;
        let mut seen_inbox = None;
        while seen_client.is_none() || seen_inbox.is_none() {
            tokio::select! {
                m = client.recv_within(30), if seen_client.is_none() => {
                    let m = m.map_err(|e| anyhow::anyhow!("the watching client: {e}"))?;
                    if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
                        seen_client = Some(sent.elapsed().as_secs_f64() * 1000.0);
                    }
                }
                m = inbox.recv_within(30), if seen_inbox.is_none() => {
                    let m = m.map_err(|e| anyhow::anyhow!("the inbox socket: {e}"))?;
                    if m["type"] == "item" {
                        seen_inbox = Some(sent.elapsed().as_secs_f64() * 1000.0);
                    }
                }
            }
        }
        to_client.extend(seen_client);
        to_inbox.extend(seen_inbox);
        next_command(&mut sb, "ack").await?;
    }
    to_inbox.sort_by(|a, b| a.total_cmp(b));
    to_client.sort_by(|a, b| a.total_cmp(b));
    println!(
        "inbox: a prompt's end → the author's open inbox socket, {runs} runs: p50 {:.1} ms, p99 {:.1} ms (a client watching the session: p50 {:.1} ms, p99 {:.1} ms)",
        percentile(&to_inbox, 0.5),
        percentile(&to_inbox, 0.99),
        percentile(&to_client, 0.5),
        percentile(&to_client, 0.99),
    );

    // The analytics query over many sessions: made 16 at a time.
    let setup = Instant::now();
    let mut made = 0usize;
    while made < sessions {
        let batch: Vec<_> = (made..(made + 16).min(sessions))
            .map(|i| {
                let url = stack.url("/sessions");
                let who = format!("person{}", i % 250);
                async move {
                    send_as(
                        &who,
                        reqwest::Method::POST,
                        &url,
                        Some(json!({"repoOwner": "local", "repoName": "inbox"})),
                    )
                    .await
                }
            })
            .collect();
        for r in futures::future::join_all(batch).await {
            let r = r?;
            anyhow::ensure!(r.status == 201, "create: {}", r.body);
        }
        made = (made + 16).min(sessions);
    }
    eprintln!(
        "  {sessions} sessions made in {:.1} s",
        setup.elapsed().as_secs_f64()
    );
    for by in ["person", "repository", "week"] {
        let mut times = Vec::new();
        for _ in 0..9 {
            let t = Instant::now();
            let r = send_as(
                "local",
                reqwest::Method::GET,
                &stack.url(&format!("/usage?by={by}")),
                None,
            )
            .await?;
            anyhow::ensure!(r.status == 200, "usage: {}", r.body);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(|a, b| a.total_cmp(b));
        println!(
            "usage: GET /usage?by={by} over {} sessions: median {:.1} ms, max {:.1} ms (9 runs)",
            sessions + 1,
            percentile(&times, 0.5),
            times[times.len() - 1],
        );
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(())
}
