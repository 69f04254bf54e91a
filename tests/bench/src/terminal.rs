//! A terminal's keystroke round trip (a benchmark, not a test): a key sent on the session's
//! socket goes through the Worker and the session's object to the sandbox's supervisor,
//! into a real shell's PTY, and its echo comes back the same way. The real stack: `wrangler
//! dev`, the local sandbox host, the supervisor. Median and 90th percentile of 300 keys.
//!
//! Run: `cargo run --release -p inspect-bench -- terminal` (with
//! `INSPECT_WORKER_PREBUILT=1` after a release build, `INSPECT_SUPERVISOR_BIN` set, as
//! `scripts/bench.sh` does). `INSPECT_KEYS=300` changes the count.

use anyhow::{ensure, Context, Result};
use inspect_tests::agent::AgentStack;
use inspect_tests::client::{create_session, send_as, WsClient};
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::source_repo;
use reqwest::Method;
use serde_json::json;
use std::time::{Duration, Instant};

/// Reads whatever is still on its way, so the next key's echo is the next message.
async fn drain(ws: &mut WsClient) {
    ws.clear();
    while let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(20), ws.recv_within(5)).await {
    }
}

pub async fn benchmark() -> Result<()> {
    let keys: usize = std::env::var("INSPECT_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let agent = AgentStack::start(vec![Reply::text("Ready.")], vec![]).await?;
    let demo = source_repo();
    agent.register_repo("demo", demo.path()).await?;
    let base = &agent.stack.base_url;
    let id = create_session(
        base,
        "ann",
        json!({"repositories": [{"owner": "local", "name": "demo"}]}),
    )
    .await?;
    let (mut ws, _) = WsClient::join(base, &agent.stack.ws_url(""), &id, "ann").await?;
    ws.send(json!({"type": "prompt", "content": "get ready"}))
        .await?;
    loop {
        let m = ws.recv_within(180).await?;
        if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
            break;
        }
    }
    let opened = send_as(
        "ann",
        Method::POST,
        &agent.stack.url(&format!("/sessions/{id}/terminals")),
        Some(json!({"cols": 200, "rows": 50})),
    )
    .await?;
    ensure!(opened.status == 200, "no terminal: {}", opened.body);
    let term = opened.body["id"]
        .as_str()
        .context("a terminal id")?
        .to_owned();
    // The PTY's line discipline echoes each key while `sleep` reads nothing: one key,
    // one output.
    ws.send(json!({"type": "terminal_input", "terminalId": term, "data": "stty -icanon; sleep 100000\r"}))
        .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    drain(&mut ws).await;
    let mut took = Vec::with_capacity(keys);
    for i in 0..keys + 20 {
        let start = Instant::now();
        ws.send(json!({"type": "terminal_input", "terminalId": term, "data": "k"}))
            .await?;
        loop {
            let m = ws.recv_within(10).await?;
            if m["type"] == "terminal_output" && m["terminalId"] == term.as_str() {
                ensure!(m["data"] == "aw==", "not the key's echo: {m}");
                break;
            }
        }
        // The first keys warm the path; they are not counted.
        if i >= 20 {
            took.push(start.elapsed());
        }
        drain(&mut ws).await;
    }
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "[terminal] keystroke → echo over {keys} keys: median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        ms(took[took.len() / 2]),
        ms(took[took.len() * 9 / 10]),
        ms(took[took.len() - 1])
    );
    Ok(())
}
