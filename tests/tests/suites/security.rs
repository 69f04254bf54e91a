//! The holes a security review found, each tried as the attacker tried it, through the real
//! Worker on `wrangler dev` (and, for the agent, the real supervisor and OpenCode). Each
//! test failed on the code before its fix.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use futures::SinkExt;
use inspect_tests::agent::AgentStack;
use inspect_tests::capture_provider::{connect_sandbox, next_command, CaptureProvider};
use inspect_tests::client::{create_session, events_until, get, send, send_as};
use inspect_tests::fakes::model::Reply;
use inspect_tests::fakes::slack::FakeSlack;
use inspect_tests::repo::source_repo;
use inspect_tests::{Stack, StackOptions};
use reqwest::Method;
use serde_json::{json, Value};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn relayed_requests_never_act_as_the_local_user() {
    let stack = Stack::start().await.unwrap();
    let client = reqwest::Client::new();
    // What a tunnel or proxy in front of the laptop adds to the Internet's requests.
    for (name, value) in [
        ("X-Forwarded-For", "203.0.113.9"),
        ("Forwarded", "for=203.0.113.9;proto=https"),
        ("X-Real-IP", "203.0.113.9"),
        ("X-Forwarded-Host", "laptop.example.trycloudflare.com"),
        ("CF-Connecting-IP", "203.0.113.9"),
        ("CDN-Loop", "cloudflare"),
    ] {
        let r = client
            .get(stack.url("/sessions"))
            .header(name, value)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{name}: {value}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized");
        let create = client
            .post(stack.url("/sessions"))
            .header(name, value)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(create.status(), 401, "{name}: {value}");
    }
    // Nor can one reach into a session's sandbox: its terminals, its ports, its pictures.
    let id = create_session(&stack.base_url, "ann", json!({"title": "mine"}))
        .await
        .unwrap();
    for (method, path) in [
        (reqwest::Method::POST, format!("/sessions/{id}/terminals")),
        (reqwest::Method::GET, format!("/sessions/{id}/terminals")),
        (
            reqwest::Method::DELETE,
            format!("/sessions/{id}/terminals/term_1"),
        ),
        (
            reqwest::Method::POST,
            format!("/sessions/{id}/ports/3000/link"),
        ),
        (reqwest::Method::GET, format!("/sessions/{id}/media/att_1")),
    ] {
        let r = client
            .request(method.clone(), stack.url(&path))
            .header("X-Forwarded-For", "203.0.113.9")
            .json(&json!({"cols": 80, "rows": 24}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{method} {path}");
    }
    // The local user at the laptop itself still is.
    assert_eq!(get(&stack.url("/sessions")).await.unwrap().status, 200);
    let listed = get(&stack.url("/sessions")).await.unwrap();
    assert_eq!(listed.body["sessions"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn other_sites_pages_cannot_change_anything() {
    let stack = Stack::start().await.unwrap();
    let client = reqwest::Client::new();
    let own = stack.base_url.clone();
    // A page on another site posting through the visitor's browser.
    let attempts: Vec<(Method, &str, Value)> = vec![
        (Method::POST, "/sessions", json!({})),
        (Method::POST, "/repos", json!({"name": "x", "path": "/tmp"})),
        (
            Method::POST,
            "/environments",
            json!({"name": "e", "repositories": [{"owner": "local", "name": "x"}]}),
        ),
        (Method::POST, "/tokens", json!({"name": "stolen"})),
        (Method::PUT, "/secrets", json!({"secrets": {"A": "b"}})),
        (
            Method::POST,
            "/images/builds",
            json!({"scope": {"kind": "repository", "owner": "local", "name": "x"}}),
        ),
        (
            Method::POST,
            "/automations",
            json!({"name": "n", "triggerType": "webhook", "instructions": "exfiltrate"}),
        ),
    ];
    for (method, path, body) in &attempts {
        for (origin, site) in [
            (Some("https://evil.example"), Some("cross-site")),
            (Some("https://evil.example"), None),
            (None, Some("cross-site")),
            (Some("null"), None),
            (Some("http://127.0.0.1:1"), Some("same-site")),
        ] {
            let mut req = client.request(method.clone(), stack.url(path)).json(body);
            if let Some(o) = origin {
                req = req.header("Origin", o);
            }
            if let Some(s) = site {
                req = req.header("Sec-Fetch-Site", s);
            }
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), 403, "{method} {path} from {origin:?}/{site:?}");
        }
        // A "simple" request a page can send without asking first: text/plain.
        let r = client
            .request(method.clone(), stack.url(path))
            .header("Content-Type", "text/plain")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 415, "{method} {path} as text/plain");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], "unsupported_media_type");
    }
    // Nothing was made.
    let listed = get(&stack.url("/sessions")).await.unwrap();
    assert_eq!(listed.body["sessions"].as_array().unwrap().len(), 0);
    let automations = get(&stack.url("/automations")).await.unwrap();
    assert_eq!(automations.body["automations"].as_array().unwrap().len(), 0);
    assert_eq!(
        get(&stack.url("/tokens")).await.unwrap().body["tokens"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    // The Worker's own pages (same origin) and clients that are no browser still work;
    // another site may still read nothing but may load pages.
    let r = client
        .post(stack.url("/sessions"))
        .header("Origin", &own)
        .header("Sec-Fetch-Site", "same-origin")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = client
        .get(stack.url("/sessions"))
        .header("Origin", "https://evil.example")
        .header("Sec-Fetch-Site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("access-control-allow-origin").is_none());
}

/// Plays the sandbox of a session until each of its `n` prompts has ended successfully.
async fn complete_prompts(
    stack: &Stack,
    provider: &mut CaptureProvider,
    n: usize,
) -> inspect_protocol::provider::SpawnRequest {
    let spawn = provider.next_spawn().await.unwrap();
    let mut sb = connect_sandbox(stack, &spawn).await.unwrap();
    let frame = |mut v: Value| {
        v["sandboxId"] = json!(spawn.sandbox_id);
        v["timestamp"] = json!(0);
        v
    };
    sb.send(Message::text(frame(json!({"type": "ready"})).to_string()))
        .await
        .unwrap();
    for i in 0..n {
        let prompt = next_command(&mut sb, "prompt").await.unwrap();
        let mid = prompt["messageId"].as_str().unwrap().to_owned();
        for e in [
            json!({"type": "token", "messageId": mid, "partId": "p", "content": "done"}),
            json!({"type": "execution_complete", "messageId": mid, "success": true, "ackId": format!("done-{i}")}),
        ] {
            sb.send(Message::text(frame(e).to_string())).await.unwrap();
        }
    }
    spawn
}

#[tokio::test]
async fn a_person_cannot_choose_where_a_prompts_outcome_is_posted() {
    let slack = FakeSlack::start().await.unwrap();
    let mut provider = CaptureProvider::start().await.unwrap();
    let mut options = StackOptions::local();
    options.vars = provider.worker_vars();
    options.vars.extend(slack.worker_vars());
    let stack = Stack::start_with(options).await.unwrap();
    let id = create_session(&stack.base_url, "mallory", json!({"title": "t"}))
        .await
        .unwrap();
    let url = stack.url(&format!("/sessions/{id}/prompt"));
    let evil = json!({"source": "slack", "channel": "C0VICTIM", "threadTs": "1700000000.000100", "target": "acme/web", "startedAt": 0});
    let client = reqwest::Client::new();
    let post = |body: Vec<u8>| {
        client
            .post(&url)
            .header("Content-Type", "application/json")
            .header("X-OpenInspect-Actor", "mallory")
            .body(body)
            .send()
    };
    // A byte that is not UTF-8 inside the content: refused, not decoded lossily.
    let mut lossy = br#"{"content": "hi "#.to_vec();
    lossy.push(0xff);
    lossy.extend_from_slice(
        format!(r#"", "callbackContext": {evil}, "clientRequestId": "a"}}"#).as_bytes(),
    );
    let r = post(lossy).await.unwrap();
    assert_eq!(r.status(), 400, "{}", r.text().await.unwrap());
    // An unknown field nested deeper than the Worker's JSON reader goes: whatever the
    // answer, the callback does not get through.
    let deep = format!(
        r#"{{"content": "deep", "callbackContext": {evil}, "clientRequestId": "b", "junk": {}1{}}}"#,
        "[".repeat(300),
        "]".repeat(300)
    );
    let deep_status = post(deep.into_bytes()).await.unwrap().status().as_u16();
    assert!(deep_status == 200 || deep_status == 400, "{deep_status}");
    // A well-formed prompt naming a callback: taken, the callback dropped.
    let plain = json!({"content": "plain", "callbackContext": evil, "clientRequestId": "c"});
    let r = post(serde_json::to_vec(&plain).unwrap()).await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let queued = get(&stack.url(&format!("/sessions/{id}/messages")))
        .await
        .unwrap()
        .body["messages"]
        .as_array()
        .unwrap()
        .len();
    complete_prompts(&stack, &mut provider, queued).await;
    // Every prompt ended; the bot posted nowhere.
    events_until(
        &stack.base_url,
        &id,
        "execution_complete",
        "execution_complete",
        30,
    )
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let msgs = get(&stack.url(&format!("/sessions/{id}/messages")))
            .await
            .unwrap();
        let all = msgs.body["messages"].as_array().unwrap().clone();
        if all.iter().all(|m| m["status"] == "completed") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{all:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let posted: Vec<String> = slack
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("chat.") || c.starts_with("reactions."))
        .collect();
    assert!(posted.is_empty(), "the bot posted: {posted:?}");
    assert!(slack
        .bot_messages("C0VICTIM", "1700000000.000100")
        .is_empty());
}

#[tokio::test]
async fn the_control_planes_internal_call_is_not_reachable_from_outside() {
    let slack = FakeSlack::start().await.unwrap();
    let mut options = StackOptions::local();
    options.vars = slack.worker_vars();
    let stack = Stack::start_with(options).await.unwrap();
    let id = create_session(&stack.base_url, "mallory", json!({"title": "t"}))
        .await
        .unwrap();
    // What a session's object would ask: the bot posting into someone else's thread.
    let thread = json!({"channel": "C0VICTIM", "threadTs": "1700000000.000100", "target": "acme/web", "startedAt": 0});
    let call = json!({"type": "slack_progress", "thread": thread, "ts": "1700000000.000200", "tool": "bash", "elapsedSecs": 1, "sessionUrl": "http://x"});
    let client = reqwest::Client::new();
    for host in [None, Some("plane.internal"), Some("plane.internal:443")] {
        for path in ["/internal/call", "/internal/call/", "//internal/call"] {
            let mut req = client
                .post(stack.url(path))
                .header("Content-Type", "application/json")
                .body(call.to_string());
            if let Some(host) = host {
                req = req.header("Host", host);
            }
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            assert!(
                status == 404 || status == 405,
                "{host:?} {path}: {status} {}",
                r.text().await.unwrap()
            );
        }
    }
    // Another session's wake-up is an object's path, never a client's.
    for path in [
        format!("/sessions/{id}/capacity-freed"),
        "/capacity-freed".to_owned(),
    ] {
        let r = send(Method::POST, &stack.url(&path), None).await.unwrap();
        assert!(r.status == 404 || r.status == 405, "{path}: {}", r.status);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let posted: Vec<String> = slack
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("chat."))
        .collect();
    assert!(posted.is_empty(), "the bot posted: {posted:?}");
}

#[tokio::test]
async fn the_agent_cannot_read_its_sandbox_token() {
    // The agent looks through every process's environment it can read.
    let script = vec![
        Reply::tool(
            "bash",
            json!({
                "command": "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done | grep -c '^INSPECT_SANDBOX_TOKEN=' ; echo scanned-$(ls -d /proc/[0-9]* | wc -l)-processes",
                "description": "look for the sandbox token"
            }),
        ),
        Reply::text("looked"),
    ];
    let agent = AgentStack::start(script, vec![]).await.unwrap();
    let repo = source_repo();
    agent.register_repo("demo", repo.path()).await.unwrap();
    let base = agent.stack.base_url.clone();
    let id = create_session(
        &base,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo"}),
    )
    .await
    .unwrap();
    let r = send_as(
        "ann",
        Method::POST,
        &agent.stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "find the token"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let seen = events_until(
        &base,
        &id,
        "tool_call,execution_complete",
        "execution_complete",
        180,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", agent.host.sandbox_logs()));
    let output = seen
        .iter()
        .filter(|e| e["type"] == "tool_call" && e["tool"] == "bash" && e["status"] == "completed")
        .filter_map(|e| e["output"].as_str())
        .next_back()
        .unwrap_or_else(|| panic!("no finished bash call: {seen:#?}"))
        .to_owned();
    assert!(output.contains("scanned-"), "{output}");
    // grep -c prints how many environments held the token: none (the supervisor's own
    // cannot even be opened).
    let counts: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    assert_eq!(
        counts,
        vec!["0"],
        "the agent read the sandbox token from a process environment: {output}"
    );
}

/// Files under the state directory's Durable Object storage.
fn object_files(stack: &Stack) -> Vec<String> {
    fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(&stack.state_dir().join("wrangler/v3/do"), &mut out);
    out.sort();
    out
}

#[tokio::test]
async fn strangers_cannot_make_session_objects() {
    let stack = Stack::start().await.unwrap();
    // One real session, so the object storage exists.
    let id = create_session(&stack.base_url, "ann", json!({"title": "real"}))
        .await
        .unwrap();
    assert_eq!(
        get(&stack.url(&format!("/sessions/{id}")))
            .await
            .unwrap()
            .status,
        200
    );
    let before = object_files(&stack);
    assert!(!before.is_empty());
    let client = reqwest::Client::new();
    for i in 0..15 {
        // Made-up ids, including ones shaped like ours.
        let made_up = match i % 3 {
            0 => format!("made-up-{i}"),
            1 => format!("{:032x}", i),
            _ => format!("{:048x}", i),
        };
        let r = match i % 5 {
            0 => client
                .post(stack.url(&format!("/sessions/{made_up}/scm-credentials")))
                .header("Authorization", "Bearer nope")
                .header("X-Sandbox-ID", "sb")
                .send()
                .await
                .unwrap(),
            1 => client
                .get(stack.url(&format!("/sessions/{made_up}/ws?type=sandbox")))
                .header("Authorization", "Bearer nope")
                .header("X-Sandbox-ID", "sb")
                .header("Upgrade", "websocket")
                .header("Connection", "Upgrade")
                .header("Sec-WebSocket-Version", "13")
                .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
                .send()
                .await
                .unwrap(),
            2 => client
                .get(stack.url(&format!("/sessions/{made_up}/attachments/att_x")))
                .header("Authorization", "Bearer nope")
                .header("X-Sandbox-ID", "sb")
                .send()
                .await
                .unwrap(),
            3 => client
                .post(stack.url(&format!("/sessions/{made_up}/pull-requests")))
                .header("Authorization", "Bearer nope")
                .header("X-Sandbox-ID", "sb")
                .json(&json!({"title": "x"}))
                .send()
                .await
                .unwrap(),
            _ => client
                .get(stack.url(&format!("/sessions/{made_up}/events")))
                .send()
                .await
                .unwrap(),
        };
        assert_eq!(r.status(), 404, "request {i} for {made_up}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        object_files(&stack),
        before,
        "a stranger's request made an object"
    );
}

#[tokio::test]
async fn concurrent_creates_cannot_overshoot_the_rate_limit() {
    let mut options = StackOptions::local();
    options.vars = vec![("RATE_LIMIT_SESSIONS_PER_HOUR".into(), "3".into())];
    let stack = Stack::start_with(options).await.unwrap();
    let client = reqwest::Client::new();
    let creates = (0..12).map(|_| {
        client
            .post(stack.url("/sessions"))
            .header("X-OpenInspect-Actor", "racer")
            .json(&json!({}))
            .send()
    });
    let statuses: Vec<u16> = futures::future::join_all(creates)
        .await
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        3,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        9,
        "{statuses:?}"
    );
    let listed = send_as("racer", Method::GET, &stack.url("/sessions"), None)
        .await
        .unwrap();
    assert_eq!(listed.body["sessions"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn smaller_holes_are_closed() {
    let provider = CaptureProvider::start().await.unwrap();
    let (stack, _repo) = provider
        .stack_with_repo_in(StackOptions::local(), "demo")
        .await
        .unwrap();
    // A person cannot make a session pass as an automation's (whose outcome would then
    // count on that automation's runs): only the control plane sets it.
    let made = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"automation": {"automationId": "auto_victim", "runId": "run_x", "repository": ""}})),
    )
    .await
    .unwrap();
    assert_eq!(made.status, 201, "{}", made.body);
    let sid = made.body["sessionId"].as_str().unwrap();
    let state = get(&stack.url(&format!("/sessions/{sid}"))).await.unwrap();
    assert!(state.body.get("automation").is_none(), "{}", state.body);
    // An automation's branch goes through the same validator.
    let auto = send(
        Method::POST,
        &stack.url("/automations"),
        Some(
            json!({"name": "n", "triggerType": "webhook", "instructions": "i",
                    "repositories": [{"owner": "local", "name": "demo"}], "branch": "a$(id)"}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(auto.status, 400, "{}", auto.body);
    // One validator for every branch name: an environment's as strict as a session's.
    for branch in ["main;touch${IFS}/tmp/x", "a$(id)", "x`id`", "a b"] {
        let env = send(
            Method::POST,
            &stack.url("/environments"),
            Some(json!({"name": "e", "repositories": [{"owner": "local", "name": "demo", "branch": branch}]})),
        )
        .await
        .unwrap();
        assert_eq!(
            env.status, 400,
            "environment branch {branch:?}: {}",
            env.body
        );
        let session = send(
            Method::POST,
            &stack.url("/sessions"),
            Some(json!({"repositories": [{"owner": "local", "name": "demo", "branch": branch}]})),
        )
        .await
        .unwrap();
        assert_eq!(session.status, 400, "session branch {branch:?}");
    }
    // Names that change how shells and the agent start are no secrets.
    for name in [
        "BASH_ENV",
        "ENV",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PATH",
        "OPENCODE_CONFIG",
        "INSPECT_SANDBOX_TOKEN",
        "GIT_SSH_COMMAND",
    ] {
        let r = send(
            Method::PUT,
            &stack.url("/secrets"),
            Some(json!({"secrets": {name: "x"}})),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 400, "{name}: {}", r.body);
    }
    // "Too many unfinished prompts" says when to try again, like every 429.
    let id = create_session(&stack.base_url, "ann", json!({"title": "queue"}))
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let mut last = None;
    for n in 0..11 {
        let r = client
            .post(stack.url(&format!("/sessions/{id}/prompt")))
            .header("X-OpenInspect-Actor", "ann")
            .json(&json!({"content": format!("prompt {n}")}))
            .send()
            .await
            .unwrap();
        last = Some(r);
    }
    let r = last.unwrap();
    assert_eq!(r.status(), 429);
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(wait >= 1);
}

#[tokio::test]
async fn the_slack_bot_sends_its_token_only_to_slacks_own_hosts() {
    use inspect_tests::fakes::slack::{envelope, signed, BOT_USER, SIGNING_SECRET};
    let provider = CaptureProvider::start().await.unwrap();
    let slack = FakeSlack::start().await.unwrap();
    slack.add_user("U1", "Ann", "ann@example.com");
    slack.add_channel("CENG", "eng", "shipping");
    let mut options = StackOptions::local();
    options.vars = provider.worker_vars();
    options.vars.extend(slack.worker_vars());
    let stack = Stack::start_with(options).await.unwrap();
    let repo = source_repo();
    inspect_tests::client::register_repo(&stack.base_url, "demo", repo.path())
        .await
        .unwrap();
    // The text says slack.com; the URL parser (and so the fetch) says evil.example.
    let text = format!("<@{BOT_USER}> look at this screenshot");
    let files = json!([
        {"id": "F1", "name": "shot.png", "mimetype": "image/png", "size": 10,
         "url_private_download": "https://evil.example\\.slack.com/shot.png", "mode": "hosted"},
        {"id": "F2", "name": "other.png", "mimetype": "image/png", "size": 10,
         "url_private_download": "https://files.slack.com.evil.example/other.png", "mode": "hosted"}
    ]);
    let ts = slack.human_message_with_files("CENG", "U1", &text, None, files);
    let body = envelope(
        "EvFiles",
        json!({"type": "app_mention", "user": "U1", "text": text, "ts": ts, "channel": "CENG"}),
    );
    let (at, sig, bytes) = signed(&body, SIGNING_SECRET);
    let r = reqwest::Client::new()
        .post(stack.url("/webhooks/slack/events"))
        .header("X-Slack-Request-Timestamp", at.to_string())
        .header("X-Slack-Signature", sig)
        .header("Content-Type", "application/json")
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Both files are left out, and the thread says why.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let note = loop {
        let said: Vec<String> = slack
            .bot_messages("CENG", &ts)
            .into_iter()
            .map(|m| m.text)
            .collect();
        if let Some(n) = said.iter().find(|t| t.contains("Left out")) {
            break n.clone();
        }
        assert!(std::time::Instant::now() < deadline, "{said:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(note.contains("shot.png: not on Slack's hosts"), "{note}");
    assert!(note.contains("other.png: not on Slack's hosts"), "{note}");
}
