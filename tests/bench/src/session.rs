//! Session benchmarks against the local stack (`wrangler dev` on workerd, release wasm).
//!
//! Run: `./scripts/bench.sh` (builds the Worker, then runs this in release mode).
//! Reports medians and percentiles; these machines are shared and noisy, so compare
//! ratios between runs on one machine rather than absolute numbers across machines.

use anyhow::{Context, Result};
use futures::future::join_all;
use futures::SinkExt;
use inspect_tests::capture_provider::{
    connect_sandbox, next_command, CaptureProvider, SandboxSocket,
};
use inspect_tests::client::{create_session, WsClient};
use inspect_tests::percentile;
use inspect_tests::Stack;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

async fn clients(stack: &Stack, session: &str, n: usize) -> Result<Vec<WsClient>> {
    let mut out = Vec::with_capacity(n);
    // Join in small batches: each join is a token request plus a subscribe.
    for chunk in (0..n).collect::<Vec<_>>().chunks(25) {
        let joins = chunk.iter().map(|i| {
            let actor = format!("watcher{i}");
            let (base, wsb) = (stack.base_url.clone(), stack.ws_url(""));
            let session = session.to_owned();
            async move {
                WsClient::join(&base, &wsb, &session, &actor)
                    .await
                    .map(|(ws, _)| ws)
            }
        });
        for r in join_all(joins).await {
            out.push(r?);
        }
    }
    for c in &mut out {
        c.clear();
    }
    Ok(out)
}

/// Counts `sandbox_event`s until `expected` have arrived or the time runs out.
async fn drain(mut ws: WsClient, expected: usize, limit: Duration) -> (usize, WsClient) {
    let deadline = Instant::now() + limit;
    let mut n = 0;
    while n < expected && Instant::now() < deadline {
        match ws.recv_within(5).await {
            Ok(m) if m["type"] == "sandbox_event" => n += 1,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    (n, ws)
}

/// Like [`drain`] for the flood's events alone (of timeline type `kind`), and when the
/// first and the last of them arrived.
async fn drain_timed(
    mut ws: WsClient,
    kind: &'static str,
    expected: usize,
    limit: Duration,
) -> (usize, Option<Instant>, Option<Instant>) {
    let deadline = Instant::now() + limit;
    let (mut n, mut first, mut last) = (0, None, None);
    while n < expected && Instant::now() < deadline {
        match ws.recv_within(5).await {
            // Only the flood's own: the prompt's events before it wait unread in the socket.
            Ok(m) if m["type"] == "sandbox_event" && m["event"]["type"] == kind => {
                let now = Instant::now();
                first.get_or_insert(now);
                last = Some(now);
                n += 1;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    (n, first, last)
}

/// How many clients watch in (a): 10, or `BENCH_WATCHERS` (to see what the fan-out costs).
fn watcher_count() -> usize {
    std::env::var("BENCH_WATCHERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

/// (a) Events persisted and broadcast per second into one session with 10 clients.
/// Path: client prompts over the socket, each cancelled as soon as it is queued, so the
/// queue never fills: every round writes two timeline events (`user_message`,
/// `prompt_cancelled`) and broadcasts them plus queue updates to every client.
async fn throughput(stack: &Stack) -> Result<(f64, usize, usize)> {
    let session = create_session(&stack.base_url, "bench", json!({})).await?;
    let watchers = clients(stack, &session, watcher_count()).await?;
    let (mut sender, _) =
        WsClient::join(&stack.base_url, &stack.ws_url(""), &session, "sender").await?;
    let rounds = 1500usize;
    let window = 8usize;
    let start = Instant::now();
    let mut sent = 0usize;
    let mut done = 0usize;
    while sent < window.min(rounds) {
        sender
            .send(json!({"type": "prompt", "content": format!("p{sent}")}))
            .await?;
        sent += 1;
    }
    while done < rounds {
        let m = sender.recv_within(30).await?;
        if m["type"] == "prompt_queued" {
            sender
                .send(json!({"type": "cancel_prompt", "messageId": m["messageId"]}))
                .await?;
            done += 1;
            if sent < rounds {
                sender
                    .send(json!({"type": "prompt", "content": format!("p{sent}")}))
                    .await?;
                sent += 1;
            }
        } else if m["type"] == "error" {
            anyhow::bail!("refused during the run: {m}");
        }
    }
    // The last cancels are in flight; the watchers see every event when they land.
    let expected = rounds * 2;
    let results = join_all(
        watchers
            .into_iter()
            .map(|w| drain(w, expected, Duration::from_secs(120))),
    )
    .await;
    let elapsed = start.elapsed().as_secs_f64();
    let min_seen = results.iter().map(|r| r.0).min().unwrap_or(0);
    Ok((expected as f64 / elapsed, expected, min_seen))
}

/// The floor: pings that reach the object (not the runtime's auto-response) and come
/// back, pipelined. No storage is touched, so this is the runtime's cost per frame.
async fn frame_floor(stack: &Stack) -> Result<f64> {
    let session = create_session(&stack.base_url, "bench", json!({})).await?;
    let (mut ws, _) =
        WsClient::join(&stack.base_url, &stack.ws_url(""), &session, "pinger").await?;
    ws.clear();
    let n = 3000usize;
    let window = 16usize;
    let start = Instant::now();
    let (mut sent, mut got) = (0, 0);
    while sent < window {
        ws.send_text(r#"{ "type": "ping" }"#.into()).await?;
        sent += 1;
    }
    while got < n {
        let m = ws.recv_within(30).await?;
        if m["type"] == "pong" {
            got += 1;
            if sent < n {
                ws.send_text(r#"{ "type": "ping" }"#.into()).await?;
                sent += 1;
            }
        }
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// What the sandbox streams in (a).
#[derive(Clone, Copy, PartialEq)]
enum Streamed {
    /// Finished tool calls, each its own part.
    ToolCalls,
    /// Text, token by token: parts of 100 tokens, each frame the part's text so far.
    Tokens,
}

impl Streamed {
    fn event(self, message_id: &str, k: usize) -> serde_json::Value {
        match self {
            Streamed::ToolCalls => {
                json!({"type": "tool_call", "messageId": message_id, "tool": "bash", "callId": format!("c{k}"), "status": "completed", "args": {"command": "true"}, "output": "ok"})
            }
            Streamed::Tokens => {
                json!({"type": "token", "messageId": message_id, "partId": format!("p{}", k / 100), "content": "word ".repeat(k % 100 + 1)})
            }
        }
    }

    /// The timeline event type the flood's events have.
    fn event_type(self) -> &'static str {
        match self {
            Streamed::ToolCalls => "tool_call",
            Streamed::Tokens => "token",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Streamed::ToolCalls => "tool-call",
            Streamed::Tokens => "token",
        }
    }
}

/// (a) Sandbox events persisted and broadcast per second into one session with 10
/// clients, sent the way the supervisor sends them: tool calls, one per frame or in
/// batches. Also (e): a queued prompt reaching a warm (ready, idle) sandbox.
/// What the sandbox path measured: events a second, the floor on the same stack, the
/// fewest events a client saw, a queued prompt's way to the warm sandbox (median ms), and
/// under the flood the first delivery after the first frame left and the last after the
/// last frame left (medians over the clients, ms).
struct PathRun {
    rate: f64,
    floor: f64,
    min_seen: usize,
    warm: f64,
    first: f64,
    last: f64,
}

/// A sandbox event as the supervisor frames it.
fn framed(sandbox_id: &str, mut v: serde_json::Value) -> serde_json::Value {
    v["sandboxId"] = json!(sandbox_id);
    v["timestamp"] = json!(0);
    v
}

/// A session with `watching` subscribed clients, a prompter, and its sandbox connected,
/// ready and running the prompter's first prompt: what (a) and (g) stream into. Also the
/// frame floor on the same stack, measured before the session was made.
struct Streaming {
    _provider: CaptureProvider,
    stack: Stack,
    floor: f64,
    watchers: Vec<WsClient>,
    prompter: WsClient,
    sb: SandboxSocket,
    sandbox_id: String,
    message_id: String,
}

impl Streaming {
    async fn start(watching: usize) -> Result<Self> {
        let mut provider = CaptureProvider::start().await?;
        let mut options = inspect_tests::StackOptions::unthrottled();
        options.vars.extend(provider.worker_vars());
        let stack = Stack::start_with(options).await?;
        // The floor on this stack, just before: the ratio is paired, not across runtimes.
        let floor = frame_floor(&stack).await?;
        let http = reqwest::Client::new();
        // A real repository (registration checks it); no sandbox ever clones it here.
        let source = inspect_tests::repo::source_repo();
        http.post(stack.url("/repos"))
            .json(&json!({"name": "bench", "path": source.path().to_string_lossy()}))
            .send()
            .await?
            .error_for_status()?;
        let session = create_session(
            &stack.base_url,
            "bench",
            json!({"repoOwner": "local", "repoName": "bench"}),
        )
        .await?;
        let watchers = clients(&stack, &session, watching).await?;
        let (mut prompter, _) =
            WsClient::join(&stack.base_url, &stack.ws_url(""), &session, "prompter").await?;
        prompter
            .send(json!({"type": "prompt", "content": "go"}))
            .await?;
        let spawn = provider.next_spawn().await?;
        let mut sb = connect_sandbox(&stack, &spawn).await?;
        let ready = framed(&spawn.sandbox_id, json!({"type": "ready"}));
        sb.send(Message::text(ready.to_string())).await?;
        let prompt = next_command(&mut sb, "prompt").await?;
        Ok(Streaming {
            _provider: provider,
            stack,
            floor,
            watchers,
            prompter,
            sb,
            sandbox_id: spawn.sandbox_id,
            message_id: prompt["messageId"].as_str().unwrap_or_default().to_owned(),
        })
    }
}

async fn sandbox_path(kind: Streamed, batch: usize, watching: usize) -> Result<PathRun> {
    let Streaming {
        _provider,
        stack: _stack,
        floor,
        watchers,
        mut prompter,
        mut sb,
        sandbox_id,
        message_id,
    } = Streaming::start(watching).await?;
    let frame = |v: serde_json::Value| framed(&sandbox_id, v);
    let n = 3000usize;
    // The agent's first event comes a moment after its prompt (as the original system's run
    // of this benchmark waits): what the prompt set off is done by then.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    // The clients read while the flood is sent, so each delivery is timed as it lands.
    let flood = async {
        let mut i = 0;
        while i < n {
            let take = batch.min(n - i);
            let events: Vec<_> = (i..i + take)
                .map(|k| frame(kind.event(&message_id, k)))
                .collect();
            let text = if take == 1 {
                events[0].to_string()
            } else {
                json!({"type": "batch", "events": events}).to_string()
            };
            sb.send(Message::text(text)).await?;
            i += take;
        }
        Ok::<Instant, anyhow::Error>(Instant::now())
    };
    // Each client reads on its own task: sharing the sender's, a delivery would be stamped
    // only when the sending loop let it run.
    let reads = join_all(watchers.into_iter().map(|w| {
        tokio::spawn(drain_timed(
            w,
            kind.event_type(),
            n,
            Duration::from_secs(120),
        ))
    }));
    let (sent, results) = futures::join!(flood, reads);
    let last_sent = sent?;
    let results = results
        .into_iter()
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let min_seen = results.iter().map(|r| r.0).min().unwrap_or(0);
    let ms = |a: Instant, b: Instant| a.saturating_duration_since(b).as_secs_f64() * 1000.0;
    let first = percentile(
        &sorted(
            results
                .iter()
                .filter_map(|r| r.1)
                .map(|t| ms(t, start))
                .collect(),
        ),
        0.5,
    );
    let last = percentile(
        &sorted(
            results
                .iter()
                .filter_map(|r| r.2)
                .map(|t| ms(t, last_sent))
                .collect(),
        ),
        0.5,
    );
    // (e) The first prompt completes; the next queued prompt reaches the warm sandbox.
    sb.send(Message::text(
        frame(json!({"type": "execution_complete", "messageId": message_id, "success": true, "ackId": "a1"})).to_string(),
    ))
    .await?;
    next_command(&mut sb, "ack").await?;
    let mut lat = Vec::new();
    for k in 0..20 {
        let t0 = Instant::now();
        prompter
            .send(json!({"type": "prompt", "content": format!("next {k}")}))
            .await?;
        let p = next_command(&mut sb, "prompt").await?;
        lat.push(t0.elapsed().as_secs_f64() * 1000.0);
        sb.send(Message::text(
            frame(json!({"type": "execution_complete", "messageId": p["messageId"], "success": true, "ackId": format!("b{k}")})).to_string(),
        ))
        .await?;
        next_command(&mut sb, "ack").await?;
        prompter.clear();
    }
    Ok(PathRun {
        rate,
        floor,
        min_seen,
        warm: percentile(&sorted(lat), 0.5),
        first,
        last,
    })
}

/// Every client's deliveries of `samples` numbered events of one kind, as they land.
struct Deliveries {
    clients: usize,
    samples: usize,
    landed: tokio::sync::mpsc::UnboundedReceiver<(usize, Instant)>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Deliveries {
    /// Each client reads until it has seen `samples` `sandbox_event`s of `kind`, numbered by
    /// `number` (from the event).
    fn watch(
        watchers: Vec<WsClient>,
        samples: usize,
        kind: &'static str,
        number: fn(&serde_json::Value) -> Option<usize>,
    ) -> Self {
        let clients = watchers.len();
        let (tx, landed) = tokio::sync::mpsc::unbounded_channel();
        let tasks = watchers
            .into_iter()
            .map(|mut w| {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut got = 0;
                    while got < samples {
                        let Ok(m) = w.recv_within(30).await else {
                            break;
                        };
                        if m["type"] == "sandbox_event" && m["event"]["type"] == kind {
                            let k = number(&m["event"]).unwrap_or(usize::MAX);
                            let _ = tx.send((k, Instant::now()));
                            got += 1;
                        }
                    }
                })
            })
            .collect();
        Deliveries {
            clients,
            samples,
            landed,
            tasks,
        }
    }

    /// Once every client is done: each delivery's latency from its event's `sent_at`, and
    /// each event's slowest delivery (both sorted, ms). Every delivery must have landed.
    async fn latencies(mut self, sent_at: &[Instant]) -> Result<(Vec<f64>, Vec<f64>)> {
        join_all(self.tasks).await;
        let (mut all, mut last) = (Vec::new(), vec![0f64; self.samples]);
        while let Ok((k, at)) = self.landed.try_recv() {
            if let Some(s) = sent_at.get(k) {
                let ms = at.duration_since(*s).as_secs_f64() * 1000.0;
                all.push(ms);
                last[k] = last[k].max(ms);
            }
        }
        let wanted = self.samples * self.clients;
        anyhow::ensure!(
            all.len() == wanted,
            "only {} of {wanted} deliveries",
            all.len()
        );
        Ok((sorted(all), sorted(last)))
    }
}

/// (g) The sandbox's events fanned out: `n_clients` watch while the sandbox sends one tool
/// call every 20 ms; each delivery's latency from its frame leaving the sandbox. Returns
/// p50 and p99 over every delivery, and p99 over each event's last client.
async fn sandbox_fanout(n_clients: usize, samples: usize) -> Result<(f64, f64, f64)> {
    let Streaming {
        _provider,
        stack: _stack,
        watchers,
        mut sb,
        sandbox_id,
        message_id,
        ..
    } = Streaming::start(n_clients).await?;
    let deliveries = Deliveries::watch(watchers, samples, "tool_call", |event| {
        event["callId"]
            .as_str()
            .and_then(|c| c.strip_prefix('c'))
            .and_then(|k| k.parse().ok())
    });
    let mut sent_at = vec![Instant::now(); samples];
    for (k, at) in sent_at.iter_mut().enumerate() {
        let event = framed(&sandbox_id, Streamed::ToolCalls.event(&message_id, k));
        *at = Instant::now();
        sb.send(Message::text(event.to_string())).await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (all, last) = deliveries.latencies(&sent_at).await?;
    Ok((
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        percentile(&last, 0.99),
    ))
}

/// (b) Latency from a prompt being sent to each client seeing its `user_message`.
async fn broadcast_latency(stack: &Stack, n_clients: usize, samples: usize) -> Result<(f64, f64)> {
    let session = create_session(&stack.base_url, "bench", json!({})).await?;
    let watchers = clients(stack, &session, n_clients).await?;
    let (mut sender, _) =
        WsClient::join(&stack.base_url, &stack.ws_url(""), &session, "sender").await?;
    let deliveries = Deliveries::watch(watchers, samples, "user_message", |event| {
        event["content"].as_str()?.parse().ok()
    });
    let mut sent_at = vec![Instant::now(); samples];
    for (i, at) in sent_at.iter_mut().enumerate() {
        *at = Instant::now();
        sender
            .send(json!({"type": "prompt", "content": i.to_string()}))
            .await?;
        let q = sender.recv_type("prompt_queued").await?;
        sender
            .send(json!({"type": "cancel_prompt", "messageId": q["messageId"]}))
            .await?;
        sender.recv_type("prompt_cancelled").await?;
        sender.clear();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (lat, _) = deliveries.latencies(&sent_at).await?;
    Ok((percentile(&lat, 0.5), percentile(&lat, 0.99)))
}

/// (c) Connect → `subscribed` (token fetched beforehand, not timed): the medians of the
/// whole (socket open + subscribe) and of the `subscribe` frame → `subscribed` step alone.
async fn subscribe_time(stack: &Stack, events: usize, samples: usize) -> Result<(f64, f64)> {
    let session = create_session(&stack.base_url, "bench", json!({})).await?;
    if events > 0 {
        let (mut w, _) =
            WsClient::join(&stack.base_url, &stack.ws_url(""), &session, "writer").await?;
        let mut made = 0;
        while made < events {
            w.send(json!({"type": "prompt", "content": format!("e{made}")}))
                .await?;
            let q = w.recv_type("prompt_queued").await?;
            w.send(json!({"type": "cancel_prompt", "messageId": q["messageId"]}))
                .await?;
            w.recv_type("prompt_cancelled").await?;
            w.clear();
            made += 2;
        }
    }
    let http = reqwest::Client::new();
    let mut times = Vec::new();
    let mut steps = Vec::new();
    for i in 0..samples {
        let token: serde_json::Value = http
            .post(stack.url(&format!("/sessions/{session}/ws-token")))
            .header("X-OpenInspect-Actor", format!("reader{i}"))
            .send()
            .await?
            .json()
            .await?;
        let t0 = Instant::now();
        let mut ws = WsClient::connect(&stack.ws_url(&format!("/sessions/{session}/ws"))).await?;
        let t1 = Instant::now();
        ws.send(json!({"type": "subscribe", "token": token["token"], "clientId": format!("r{i}")}))
            .await?;
        let sub = ws.recv_type("subscribed").await?;
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
        steps.push(t1.elapsed().as_secs_f64() * 1000.0);
        let n = sub["timeline"]["events"].as_array().map_or(0, Vec::len);
        if i == 0 {
            // Compact JSON of the message as received: what the replay costs on the wire.
            println!(
                "    `subscribed` with {n} events: {} bytes",
                sub.to_string().len()
            );
        }
        anyhow::ensure!(
            n == events.min(500),
            "subscribed carried {n} events, expected {}",
            events.min(500)
        );
        ws.close().await;
    }
    Ok((
        percentile(&sorted(times), 0.5),
        percentile(&sorted(steps), 0.5),
    ))
}

/// (f) A connect storm: `n` clients join one session at once (each a token request, a
/// socket and its `subscribed`). Returns the time until all have joined and each join's
/// p50 and p99, in ms.
async fn connect_storm(stack: &Stack, n: usize) -> Result<(f64, f64, f64)> {
    let session = create_session(&stack.base_url, "bench", json!({})).await?;
    let start = Instant::now();
    let joins = (0..n).map(|i| {
        let (base, wsb) = (stack.base_url.clone(), stack.ws_url(""));
        let session = session.clone();
        async move {
            let t0 = Instant::now();
            let (ws, _) = WsClient::join(&base, &wsb, &session, &format!("storm{i}")).await?;
            anyhow::Ok((ws, t0.elapsed().as_secs_f64() * 1000.0))
        }
    });
    let mut each = Vec::with_capacity(n);
    let mut sockets = Vec::with_capacity(n);
    for r in join_all(joins).await {
        let (ws, ms) = r?;
        sockets.push(ws);
        each.push(ms);
    }
    let all = start.elapsed().as_secs_f64() * 1000.0;
    for ws in sockets {
        ws.close().await;
    }
    let each = sorted(each);
    Ok((all, percentile(&each, 0.5), percentile(&each, 0.99)))
}

/// (d) Sequential session creates per second.
async fn creates(stack: &Stack, n: usize) -> Result<f64> {
    let start = Instant::now();
    for i in 0..n {
        create_session(
            &stack.base_url,
            "bench",
            json!({"title": format!("bench {i}")}),
        )
        .await?;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

pub async fn benchmark() -> Result<()> {
    let stack = Stack::start_with(inspect_tests::StackOptions::unthrottled())
        .await
        .context("starting the local stack")?;
    println!("# session benchmarks (wrangler dev, release wasm, client on the same machine)");
    let floor = frame_floor(&stack).await?;
    println!("(0) frames through the object and back (no storage): {floor:.0}/s");
    // `INSPECT_SESSION_BENCH=subscribe`: only the floor and (c), for a change to subscribing.
    if std::env::var("INSPECT_SESSION_BENCH").as_deref() == Ok("subscribe") {
        for events in [0, 500] {
            let (whole, step) = subscribe_time(&stack, events, 40).await?;
            println!("(c) connect -> subscribed with {events} events: median {whole:.2} ms (the subscribe step alone {step:.2} ms)");
        }
        print_storm(&stack).await?;
        return Ok(());
    }
    // `INSPECT_SESSION_BENCH=fanout`: only the floor and (g).
    if std::env::var("INSPECT_SESSION_BENCH").as_deref() == Ok("fanout") {
        return print_fanout().await;
    }
    // `INSPECT_SESSION_BENCH=creates`: only the floor and (d), for a change to creation.
    if std::env::var("INSPECT_SESSION_BENCH").as_deref() == Ok("creates") {
        let rate = creates(&stack, 100).await?;
        println!("(d) sequential session creates: {rate:.0}/s");
        return Ok(());
    }
    // The floor crosses one socket each way; the last row does the same (one client), so
    // its ratio to the floor is the hot path's own, the first row's adds the fan-out.
    let watching = watcher_count();
    // `INSPECT_SESSION_BENCH=batches`: only the floor and the batches of 50, for a change
    // to a frame's cost per event.
    let only_batches = std::env::var("INSPECT_SESSION_BENCH").as_deref() == Ok("batches");
    let rows = [
        (Streamed::ToolCalls, 1, watching),
        (Streamed::ToolCalls, 50, watching),
        (Streamed::ToolCalls, 1, 1),
        (Streamed::Tokens, 1, watching),
        (Streamed::Tokens, 1, 1),
    ];
    for (kind, batch, watchers) in rows
        .into_iter()
        .filter(|(_, batch, _)| !only_batches || *batch == 50)
    {
        let PathRun {
            rate,
            floor,
            min_seen,
            warm,
            first,
            last,
        } = sandbox_path(kind, batch, watchers).await?;
        let of_floor = if batch == 1 {
            format!(
                ", {:.0} % of its floor ({floor:.0}/s on the same stack)",
                100.0 * rate / floor
            )
        } else {
            String::new()
        };
        println!(
            "(a) sandbox {} events persisted + broadcast, {watchers} clients, {batch} per frame: {rate:.0} events/s{of_floor} (every client saw at least {min_seen} of 3000)",
            kind.name()
        );
        if kind == Streamed::ToolCalls && batch == 1 && watchers == watching {
            println!("(e) queued prompt -> warm sandbox receives it: median {warm:.1} ms");
            println!("(f) under that flood, {watchers} clients: the first event reached a client {first:.1} ms after the first frame left, the last {last:.1} ms after the last frame left (medians over the clients)");
        }
    }
    // `INSPECT_SESSION_BENCH=sandbox`: only the floor and the sandbox path (a), for
    // alternating before/after runs of a change to the hot path.
    if only_batches || std::env::var("INSPECT_SESSION_BENCH").as_deref() == Ok("sandbox") {
        return Ok(());
    }
    let (rate, expected, min_seen) = throughput(&stack).await?;
    println!("(a') client prompt+cancel rounds, 10 clients: {rate:.0} events/s ({expected} events; every client saw at least {min_seen})");
    for n in [50, 200] {
        let (p50, p99) = broadcast_latency(&stack, n, 60).await?;
        println!("(b) broadcast latency, {n} clients: p50 {p50:.1} ms, p99 {p99:.1} ms");
    }
    print_fanout().await?;
    for events in [0, 500] {
        let (whole, step) = subscribe_time(&stack, events, 20).await?;
        println!("(c) connect -> subscribed with {events} events: median {whole:.2} ms (the subscribe step alone {step:.2} ms)");
    }
    let rate = creates(&stack, 100).await?;
    println!("(d) sequential session creates: {rate:.0}/s");
    print_storm(&stack).await?;
    Ok(())
}

async fn print_fanout() -> Result<()> {
    for n in [50, 200] {
        let (p50, p99, last) = sandbox_fanout(n, 100).await?;
        println!("(g) sandbox events fanned out, {n} clients, a tool call every 20 ms: p50 {p50:.1} ms, p99 {p99:.1} ms, each event's last client p99 {last:.1} ms");
    }
    Ok(())
}

async fn print_storm(stack: &Stack) -> Result<()> {
    let before = runtime_complaints(stack);
    let (all, p50, p99) = connect_storm(stack, 200).await?;
    println!("(f) connect storm, 200 clients join one session at once: all joined in {all:.0} ms (each join p50 {p50:.0} ms, p99 {p99:.0} ms)");
    // Give background work (the index write) time to end, then count what the runtime said.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let after = runtime_complaints(stack);
    println!(
        "    the runtime during the storm: {} 'IoContext dropped queued cross-context actions', {} 'tail session was canceled'",
        after.0 - before.0,
        after.1 - before.1
    );
    println!(
        "    the runtime during the whole run: {} and {}",
        after.0, after.1
    );
    Ok(())
}

/// How often wrangler's log has the runtime's complaints about work outliving its request.
fn runtime_complaints(stack: &Stack) -> (usize, usize) {
    let log = stack.log();
    (
        log.matches("IoContext dropped queued cross-context actions")
            .count(),
        log.matches("tail session was canceled").count(),
    )
}
