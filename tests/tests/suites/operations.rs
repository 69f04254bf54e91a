//! What an operator relies on, through the real Worker, the local sandbox host, the
//! supervisor, git and OpenCode: `/health` saying which parts are set up and answering,
//! and a deleted session leaving nothing behind (object, D1 rows, sandbox directories,
//! snapshots); an archived one keeping no sandbox.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{get, send};
use inspect_tests::fakes::github::FakeGitHub;
use inspect_tests::fakes::model::Reply;
use inspect_tests::host::SandboxHost;
use inspect_tests::repo::source_repo;
use inspect_tests::stack::{apply_tool_env, free_port};
use inspect_tests::{Stack, StackOptions};
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

#[tokio::test]
async fn health_says_which_parts_are_set_up_and_answering() {
    let gh = FakeGitHub::start(vec![]).await.unwrap();
    let host = SandboxHost::start("http://127.0.0.1:9/v1", "inspect/fake-model")
        .await
        .unwrap();
    let mut options = StackOptions::local();
    options.vars = host.worker_vars();
    options.vars.extend(gh.worker_vars());
    let stack = Stack::start_with(options).await.unwrap();
    let h = get(&stack.url("/health")).await.unwrap();
    assert_eq!(h.status, 200, "{}", h.body);
    assert_eq!(h.body["status"], "ok");
    let provider = &h.body["sandboxProvider"];
    assert_eq!(
        (provider["configured"].clone(), provider["ok"].clone()),
        (json!(true), json!(true)),
        "{provider}"
    );
    assert!(
        provider["disk"]["snapshotBudgetBytes"].as_u64().unwrap() > 0,
        "{provider}"
    );
    assert_eq!(h.body["githubApp"]["ok"], true, "{}", h.body);
    assert_eq!(h.body["signIn"]["configured"], true);
    assert_eq!(
        h.body["githubBot"]["configured"], false,
        "no webhook secret"
    );
    assert_eq!(h.body["secretsKey"]["configured"], true);
    // No secret's value in the answer.
    let text = h.body.to_string();
    assert!(!text.contains(&host.secret) && !text.contains(&gh.client_secret));

    // A provider that does not answer degrades the deployment, and says so.
    let mut options = StackOptions::local();
    options.vars = vec![
        (
            "SANDBOX_HOST_URL".into(),
            format!("http://127.0.0.1:{}", free_port().unwrap()),
        ),
        ("SANDBOX_HOST_SECRET".into(), "x".into()),
    ];
    let stack = Stack::start_with(options).await.unwrap();
    let h = get(&stack.url("/health")).await.unwrap();
    assert_eq!(h.status, 503, "{}", h.body);
    assert_eq!(h.body["status"], "degraded");
    assert_eq!(h.body["sandboxProvider"]["ok"], false);
    assert!(
        h.body["sandboxProvider"]["detail"]
            .as_str()
            .unwrap()
            .contains("unreachable"),
        "{}",
        h.body
    );
    assert_eq!(h.body["githubApp"]["configured"], false);
}

/// Every file under `dir` whose path or text mentions `needle`.
fn mentions(dir: &Path, needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.to_string_lossy().contains(needle) {
            out.push(path.display().to_string());
        }
        if path.is_dir() {
            out.extend(mentions(&path, needle));
        } else if std::fs::read(&path)
            .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            out.push(path.display().to_string());
        }
    }
    out
}

/// A D1 query through wrangler against the stack's own state directory.
fn d1_count(stack: &Stack, sql: &str) -> i64 {
    let root = inspect_tests::root();
    let mut cmd = std::process::Command::new(root.join("node_modules/.bin/wrangler"));
    cmd.current_dir(&root)
        .args(["d1", "execute", "DB", "--local", "--json", "--persist-to"])
        .arg(stack.state_dir().join("wrangler"))
        .arg("--command")
        .arg(sql);
    apply_tool_env(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["results"][0]["n"].as_i64().unwrap()
}

async fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_deleted_session_leaves_nothing_and_an_archived_one_no_sandbox() {
    let AgentStack {
        model: _model,
        host,
        stack,
    } = AgentStack::start(
        vec![
            Reply::tool("write", json!({"filePath": "kept.txt", "content": "x\n"})),
            Reply::text("Written."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let source = source_repo();
    inspect_tests::client::register_repo(&stack.base_url, "demo", source.path())
        .await
        .unwrap();
    let create = |title: &str| {
        let url = stack.url("/sessions");
        let body = json!({"repoOwner": "local", "repoName": "demo", "title": title});
        async move {
            send(Method::POST, &url, Some(body)).await.unwrap().body["sessionId"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let id = create("to delete").await;
    let other = create("to keep").await;
    send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "write a file"})),
    )
    .await
    .unwrap();
    let sandboxes = host.data_dir().join("sandboxes");
    // The prompt runs, and the idle sandbox is snapshotted after it.
    let snapshots = sandboxes.join("snapshots");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = get(&stack.url(&format!(
            "/sessions/{id}/events?type=execution_complete,snapshot_saved"
        )))
        .await
        .unwrap();
        let has_snapshot = std::fs::read_dir(&snapshots)
            .map(|d| {
                d.flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "tar"))
            })
            .unwrap_or(false);
        if done.body["events"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
            && has_snapshot
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no completion and snapshot: {}\n{}",
            done.body,
            host.sandbox_logs()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        !mentions(&sandboxes, &id).is_empty(),
        "the session's files are there before"
    );

    // Archived: its sandbox stops (the host runs none for it), and it can come back.
    let a = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/archive")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(a.body["status"], "archived", "{}", a.body);
    let host_list = || {
        let url = format!("{}/sandboxes", host.url);
        let secret = host.secret.clone();
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(secret)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list = host_list().await;
        let running = list["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["sessionId"] == id.as_str() && s["status"] == "running");
        if !running {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "archiving left the sandbox running: {list}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let s = get(&stack.url(&format!("/sessions/{id}"))).await.unwrap();
    assert_eq!(s.body["sandboxStatus"], "stopped", "{}", s.body);

    // Deleted: gone from the object, D1 and the host's disk; the other session untouched.
    let d = send(Method::DELETE, &stack.url(&format!("/sessions/{id}")), None)
        .await
        .unwrap();
    assert_eq!(d.status, 200, "{}", d.body);
    assert_eq!(
        get(&stack.url(&format!("/sessions/{id}")))
            .await
            .unwrap()
            .status,
        404
    );
    wait_for(10, "the host's files to go", || {
        mentions(&sandboxes, &id).is_empty()
    })
    .await;
    assert_eq!(
        d1_count(
            &stack,
            &format!("SELECT COUNT(*) AS n FROM sessions WHERE id = '{id}'")
        ),
        0
    );
    assert_eq!(
        d1_count(
            &stack,
            &format!("SELECT COUNT(*) AS n FROM session_participants WHERE session_id = '{id}'")
        ),
        0
    );
    assert_eq!(
        d1_count(
            &stack,
            &format!("SELECT COUNT(*) AS n FROM sessions WHERE id = '{other}'")
        ),
        1
    );
    assert_eq!(
        get(&stack.url(&format!("/sessions/{other}")))
            .await
            .unwrap()
            .status,
        200
    );
    // The branch it pushed to the user's own repository stays: that is the user's.
    assert!(inspect_tests::repo::git(
        source.path(),
        &["branch", "--list", &format!("open-inspect/{id}")]
    )
    .contains(&id));
}

#[tokio::test]
async fn past_the_sandbox_cap_a_session_waits_asks_less_often_and_is_woken_when_room_is_made() {
    let model = inspect_tests::fakes::model::FakeModel::start(vec![
        Reply::text("First done."),
        Reply::text("Second done."),
    ])
    .await
    .unwrap();
    let host = SandboxHost::start_with(
        &model.base_url,
        "inspect/fake-model",
        &[("INSPECT_MAX_SANDBOXES", "1")],
    )
    .await
    .unwrap();
    let mut options = StackOptions::local();
    options.vars = host.worker_vars();
    options.log_level = Some("log".into());
    let stack = Stack::start_with(options).await.unwrap();
    let source = source_repo();
    inspect_tests::client::register_repo(&stack.base_url, "demo", source.path())
        .await
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = send(
            Method::POST,
            &stack.url("/sessions"),
            Some(json!({"repoOwner": "local", "repoName": "demo"})),
        )
        .await
        .unwrap();
        ids.push(r.body["sessionId"].as_str().unwrap().to_owned());
    }
    let done = |id: &str| {
        let url = stack.url(&format!("/sessions/{id}/events?type=execution_complete"));
        async move {
            get(&url).await.unwrap().body["events"]
                .as_array()
                .is_some_and(|e| !e.is_empty())
        }
    };
    send(
        Method::POST,
        &stack.url(&format!("/sessions/{}/prompt", ids[0])),
        Some(json!({"content": "one"})),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done(&ids[0]).await {
        assert!(Instant::now() < deadline, "{}", host.sandbox_logs());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The first session's sandbox still runs (idle): the second must wait, and says so.
    send(
        Method::POST,
        &stack.url(&format!("/sessions/{}/prompt", ids[1])),
        Some(json!({"content": "two"})),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = get(&stack.url(&format!("/sessions/{}/events?type=sandbox_status", ids[1])))
            .await
            .unwrap();
        let waiting = events.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["status"] == "waiting");
        if let Some(w) = waiting {
            assert!(
                w["error"]
                    .as_str()
                    .unwrap()
                    .contains("1 of 1 sandboxes are running"),
                "{w}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "never waited: {}", events.body);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(!done(&ids[1]).await);
    // The Worker's log says so too, as a JSON line naming the session, each time it asks
    // again: after 5 s, then 10 s more, then 20 s more (it asks less often as it waits).
    let lines = |event: &str| {
        stack
            .log()
            .lines()
            // wrangler colours warnings: the JSON sits between the first `{` and last `}`.
            .filter_map(|l| Some(l[l.find('{')?..=l.rfind('}')?].to_owned()))
            .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
            .filter(|v| v["event"] == event && v["session"] == ids[1].as_str())
            .count()
    };
    let began = Instant::now();
    let deadline = began + Duration::from_secs(45);
    while lines("spawn_waiting") < 3 {
        assert!(
            Instant::now() < deadline,
            "not three spawn_waiting lines:\n{}",
            stack.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        began.elapsed() >= Duration::from_secs(12),
        "asked again too soon: {:?}",
        began.elapsed()
    );
    // Room is made (the first session is archived, which stops its sandbox): the session
    // that waited is woken at once, long before its next ask (20 s away), and runs its
    // prompt.
    send(
        Method::POST,
        &stack.url(&format!("/sessions/{}/archive", ids[0])),
        None,
    )
    .await
    .unwrap();
    let archived = Instant::now();
    while lines("waiter_woken") == 0 {
        assert!(
            archived.elapsed() < Duration::from_secs(12),
            "the waiting session was not woken:\n{}",
            stack.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done(&ids[1]).await {
        assert!(
            Instant::now() < deadline,
            "the waiting session never ran\n{}",
            host.sandbox_logs()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn people_past_their_rate_get_429_with_retry_after() {
    let mut options = StackOptions::local();
    options.vars = vec![
        ("RATE_LIMIT_SESSIONS_PER_HOUR".into(), "2".into()),
        ("RATE_LIMIT_PROMPTS_PER_MINUTE".into(), "2".into()),
    ];
    let stack = Stack::start_with(options).await.unwrap();
    let client = reqwest::Client::new();
    let create = |who: &'static str| {
        client
            .post(stack.url("/sessions"))
            .header("X-OpenInspect-Actor", who)
            .json(&json!({}))
            .send()
    };
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = create("ann").await.unwrap();
        assert_eq!(r.status(), 201);
        ids.push(
            r.json::<Value>().await.unwrap()["sessionId"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let r = create("ann").await.unwrap();
    assert_eq!(r.status(), 429);
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((3590..=3600).contains(&wait), "{wait}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_requests");
    assert_eq!(body["error"]["retryAfter"], wait);
    // Someone else is not held up by ann.
    assert_eq!(create("bob").await.unwrap().status(), 201);

    let prompt = |n: usize| {
        client
            .post(stack.url(&format!("/sessions/{}/prompt", ids[0])))
            .header("X-OpenInspect-Actor", "ann")
            .json(&json!({"content": format!("prompt {n}")}))
            .send()
    };
    assert_eq!(prompt(1).await.unwrap().status(), 200);
    assert_eq!(prompt(2).await.unwrap().status(), 200);
    let r = prompt(3).await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
    // The socket says the same, in an error message; nothing was queued.
    let (mut ws, _) =
        inspect_tests::client::WsClient::join(&stack.base_url, &stack.ws_url(""), &ids[0], "ann")
            .await
            .unwrap();
    ws.send(json!({"type": "prompt", "content": "over the socket", "clientRequestId": "c3"}))
        .await
        .unwrap();
    let err = ws.recv_type("error").await.unwrap();
    assert_eq!(err["code"], "too_many_requests", "{err}");
    let msgs = get(&stack.url(&format!("/sessions/{}/messages", ids[0])))
        .await
        .unwrap();
    assert_eq!(msgs.body["messages"].as_array().unwrap().len(), 2);
}
