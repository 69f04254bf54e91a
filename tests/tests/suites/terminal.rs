//! Terminals end to end: the Worker on `wrangler dev`, the session's object, the local
//! sandbox host and the real supervisor with a real shell on a PTY. A person opens one on a
//! running session and types; the output comes back over the session's socket; a second
//! participant sees it listed and redraws it from the scroll-back; resizes reach the PTY;
//! pasted input in pieces arrives whole; bad sizes, oversized input and closed terminals
//! get clear errors; a shell's exit and a person's close end it.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use base64::Engine;
use inspect_tests::agent::AgentStack;
use inspect_tests::client::{create_session, send, send_as, WsClient};
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::source_repo;
use reqwest::Method;
use serde_json::{json, Value};

fn decode(m: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(m["data"].as_str().unwrap_or_default())
        .unwrap()
}

/// Reads the terminal's output until it holds `needle`; what came.
async fn output_until(ws: &mut WsClient, terminal: &str, needle: &str) -> String {
    let mut seen = Vec::new();
    loop {
        let m = ws.recv_within(30).await.unwrap_or_else(|e| {
            panic!("{e}: no {needle:?} in {:?}", String::from_utf8_lossy(&seen))
        });
        if m["type"] == "terminal_output" && m["terminalId"] == terminal {
            seen.extend(decode(&m));
            let text = String::from_utf8_lossy(&seen).into_owned();
            if text.contains(needle) {
                return text;
            }
        }
    }
}

#[tokio::test]
async fn a_person_opens_a_terminal_types_and_everyone_in_the_session_can_see_it() {
    let agent =
        AgentStack::start_in_image(vec![Reply::text("Ready."), Reply::text("A single pixel.")])
            .await
            .unwrap();
    let demo = source_repo();
    agent.register_repo("demo", demo.path()).await.unwrap();
    let base = &agent.stack.base_url;
    let ws_base = agent.stack.ws_url("");
    let id = create_session(
        base,
        "ann",
        json!({"repositories": [{"owner": "local", "name": "demo"}]}),
    )
    .await
    .unwrap();
    let url = |path: &str| agent.stack.url(&format!("/sessions/{id}/terminals{path}"));
    // No sandbox yet: nothing to open a terminal in.
    let early = send_as(
        "ann",
        Method::POST,
        &url(""),
        Some(json!({"cols": 80, "rows": 24})),
    )
    .await
    .unwrap();
    assert_eq!(early.status, 409, "{}", early.body);

    let (mut ann, _) = WsClient::join(base, &ws_base, &id, "ann").await.unwrap();
    ann.send(json!({"type": "prompt", "content": "get ready"}))
        .await
        .unwrap();
    loop {
        let m = ann.recv_within(120).await.unwrap();
        if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
            break;
        }
    }
    for bad in [
        json!({"cols": 0, "rows": 0}),
        json!({"cols": 100000, "rows": 24}),
        json!({"cols": 80}),
        json!({"cols": 80, "rows": 24, "shell": "/bin/evil"}),
    ] {
        let r = send_as("ann", Method::POST, &url(""), Some(bad.clone()))
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    let opened = send_as(
        "ann",
        Method::POST,
        &url(""),
        Some(json!({"cols": 80, "rows": 24})),
    )
    .await
    .unwrap();
    assert_eq!(opened.status, 200, "{}", opened.body);
    let term = opened.body["id"].as_str().unwrap().to_owned();
    assert_eq!(opened.body["openedBy"], "ann");
    let announced = ann.recv_type("terminal_opened").await.unwrap();
    assert_eq!(announced["terminal"]["id"], term.as_str());

    // Typed, run, answered.
    ann.send(json!({"type": "terminal_input", "terminalId": term, "data": "echo $((6*7))\r"}))
        .await
        .unwrap();
    output_until(&mut ann, &term, "42").await;
    // The shell (and the agent, and the whole sandbox) runs in the sandbox image when the
    // test command built one: its marker file is there, and its own git and node.
    if inspect_tests::host::test_image().is_some() {
        ann.send(json!({"type": "terminal_input", "terminalId": term, "data": "cat /etc/inspect-sandbox-image; command -v git node opencode code-server\r"}))
            .await
            .unwrap();
        let seen = output_until(&mut ann, &term, "/usr/local/bin/code-server").await;
        assert!(
            seen.contains("inspect-sandbox debian-")
                && seen.contains("/usr/bin/git")
                && seen.contains("/usr/local/bin/node"),
            "{seen}"
        );
    }
    // Resized: the shell sees the new size.
    ann.send(json!({"type": "terminal_resize", "terminalId": term, "cols": 120, "rows": 40}))
        .await
        .unwrap();
    ann.send(json!({"type": "terminal_input", "terminalId": term, "data": "stty size\r"}))
        .await
        .unwrap();
    output_until(&mut ann, &term, "40 120").await;
    // Bytes that are not text come through as they are.
    ann.send(json!({"type": "terminal_input", "terminalId": term, "data": "printf 'bin:\\377\\376:end\\n'\r"}))
        .await
        .unwrap();
    let mut raw = Vec::new();
    while !raw.windows(3).any(|w| w == [0xff, 0xfe, b':']) {
        let m = ann.recv_within(30).await.unwrap();
        if m["type"] == "terminal_output" {
            raw.extend(decode(&m));
        }
    }
    // A paste of 1 MiB goes in pieces and arrives whole; one piece too big is refused.
    ann.send(json!({"type": "terminal_input", "terminalId": term, "data": "stty -echo; cat > pasted.txt\r"}))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let line = format!("{}\n", "a".repeat(1023));
    let piece = line.repeat(64);
    for _ in 0..16 {
        ann.send(json!({"type": "terminal_input", "terminalId": term, "data": piece}))
            .await
            .unwrap();
    }
    ann.send(json!({"type": "terminal_input", "terminalId": term, "data": "\u{4}"}))
        .await
        .unwrap();
    ann.send(json!({"type": "terminal_input", "terminalId": term, "data": "stty echo; wc -c < pasted.txt\r"}))
        .await
        .unwrap();
    output_until(&mut ann, &term, "1048576").await;
    ann.send(json!({"type": "terminal_input", "terminalId": term, "data": "x".repeat(70 * 1024)}))
        .await
        .unwrap();
    let refused = ann.recv_type("error").await.unwrap();
    assert_eq!(refused["code"], "payload_too_large", "{refused}");

    // Bob joins: he sees the terminal listed (who opened it) and redraws it.
    let (mut bob, _) = WsClient::join(base, &ws_base, &id, "bob").await.unwrap();
    let listed = send_as("bob", Method::GET, &url(""), None).await.unwrap();
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.body["terminals"][0]["id"], term.as_str());
    assert_eq!(listed.body["terminals"][0]["openedBy"], "ann");
    assert_eq!(listed.body["terminals"][0]["cols"], 120);
    bob.send(json!({"type": "terminal_attach", "terminalId": term}))
        .await
        .unwrap();
    loop {
        let m = bob.recv_within(30).await.unwrap();
        if m["type"] == "terminal_output" && m["replay"] == true {
            assert!(String::from_utf8_lossy(&decode(&m)).contains("42"));
            break;
        }
    }
    // Who opened it and when is on the timeline.
    let events = send(
        Method::GET,
        &agent
            .stack
            .url(&format!("/sessions/{id}/events?type=terminal")),
        None,
    )
    .await
    .unwrap();
    let said: Vec<&Value> = events.body["events"].as_array().unwrap().iter().collect();
    assert!(
        said.iter()
            .any(|e| e["action"] == "opened" && e["by"] == "ann"),
        "{}",
        events.body
    );

    // A shell that exits ends its terminal, with its code.
    let second = send_as(
        "bob",
        Method::POST,
        &url(""),
        Some(json!({"cols": 80, "rows": 24})),
    )
    .await
    .unwrap();
    let second = second.body["id"].as_str().unwrap().to_owned();
    bob.send(json!({"type": "terminal_input", "terminalId": second, "data": "exit 7\r"}))
        .await
        .unwrap();
    loop {
        let m = bob.recv_within(30).await.unwrap();
        if m["type"] == "terminal_closed" && m["terminalId"] == second.as_str() {
            assert_eq!(m["exitCode"], 7);
            break;
        }
    }
    // Closed by a person: no more input.
    let closed = send_as("ann", Method::DELETE, &url(&format!("/{term}")), None)
        .await
        .unwrap();
    assert_eq!(closed.status, 200, "{}", closed.body);
    let again = send_as("ann", Method::DELETE, &url(&format!("/{term}")), None)
        .await
        .unwrap();
    assert_eq!(again.status, 404, "{}", again.body);
    ann.send(json!({"type": "terminal_input", "terminalId": term, "data": "ls\r"}))
        .await
        .unwrap();
    let refused = ann.recv_type("error").await.unwrap();
    assert_eq!(refused["code"], "not_found", "{refused}");
    // In a browser: open, type, resize, reload, a second participant.
    let out = inspect_tests::browser::artifacts("terminal");
    let (b, o, i) = (base.clone(), out.clone(), id.clone());
    let browser = tokio::task::spawn_blocking(move || {
        inspect_tests::browser::run_script("terminal.mjs", &b, &o, &[("SESSION_ID", i)])
    })
    .await;
    if let Err(e) = browser {
        panic!("{e}\n{}", agent.host.sandbox_logs());
    }
    // The picture pasted in the browser went with the prompt: the agent was given its path.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !agent
        .model
        .requests()
        .iter()
        .any(|r| r.to_string().contains("pasted.png"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the model never saw the picture's path: {:?}",
            agent.model.requests().last()
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    // ... with the reasoning effort picked beside the prompt box.
    let asked = agent
        .model
        .requests()
        .into_iter()
        .find(|r| r.to_string().contains("pasted.png"))
        .unwrap();
    assert_eq!(asked["reasoning_effort"], "high", "{asked}");
    // A session nobody made has no terminals.
    let stranger = send(
        Method::GET,
        &agent.stack.url("/sessions/made-up-id/terminals"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(stranger.status, 404, "{}", stranger.body);
}

#[tokio::test]
async fn the_editor_and_ports_open_for_the_session_s_people_and_end_with_the_sandbox() {
    assert!(
        std::env::var_os("INSPECT_CODE_SERVER_BIN").is_some(),
        "code-server is needed: run the tests with scripts/test.sh, which installs it"
    );
    let agent = AgentStack::start_in_image(vec![Reply::text("Ready.")])
        .await
        .unwrap();
    let (_demo, id) = agent.demo_session("ann").await.unwrap();
    let base = &agent.stack.base_url;
    let editor = agent.stack.url(&format!("/sessions/{id}/editor"));
    let early = send_as("ann", Method::POST, &editor, None).await.unwrap();
    assert_eq!(early.status, 409, "no sandbox yet: {}", early.body);

    let (mut ann, _) = WsClient::join(base, &agent.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ann.send(json!({"type": "prompt", "content": "get ready"}))
        .await
        .unwrap();
    loop {
        let m = ann.recv_within(120).await.unwrap();
        if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
            break;
        }
    }
    let link = send_as("ann", Method::POST, &editor, None).await.unwrap();
    assert_eq!(link.status, 200, "{}", link.body);
    let url = link.body["url"].as_str().unwrap().to_owned();
    assert!(
        url.starts_with(&format!("{base}/sessions/{id}/editor/open?token=")),
        "{url}"
    );
    assert!(link.body["expiresAt"].as_i64().unwrap() > 0);

    // Someone else with the link is refused; its person is sent on to the editor's gate.
    let bob = inspect_tests::client::navigate_as("bob", &url).await;
    assert_eq!(bob.status(), 403);
    let ann_open = inspect_tests::client::navigate_as("ann", &url).await;
    assert_eq!(ann_open.status(), 302);
    let gate_link = ann_open.headers()["location"].to_str().unwrap().to_owned();
    assert!(gate_link.contains("inspect_port_token="), "{gate_link}");
    assert_eq!(
        inspect_tests::client::navigate_as("ann", &url)
            .await
            .status(),
        404,
        "a link opens once"
    );
    let forged = format!("{base}/sessions/{id}/editor/open?token=made-up");
    assert_eq!(
        inspect_tests::client::navigate_as("ann", &forged)
            .await
            .status(),
        404
    );

    // The gate: a cookie for the link, then code-server's page (it starts on first ask).
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let gate = gate_link.split("/?").next().unwrap().to_owned();
    assert_eq!(plain.get(&gate).send().await.unwrap().status(), 401);
    let swapped = plain.get(&gate_link).send().await.unwrap();
    assert_eq!(swapped.status(), 302);
    let cookie = inspect_tests::client::gate_cookie(&swapped);
    let first = plain
        .get(format!("{gate}/"))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 302, "code-server opens the repository");
    let folder = first.headers()["location"].to_str().unwrap().to_owned();
    assert!(folder.contains("folder="), "{folder}");
    let page = plain
        .get(format!("{gate}/{}", folder.trim_start_matches("./")))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("codeServerVersion") && html.contains("workbench"),
        "{}",
        &html[..html.len().min(400)]
    );
    let said = inspect_tests::client::events_until(base, &id, "editor", "editor", 10)
        .await
        .unwrap();
    assert_eq!(said[0]["by"], "ann", "{said:?}");

    // A port asked for from the session page: an app started in a terminal, then exposed
    // behind a gate of its own and opened through the person's link.
    let app_port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let term = send_as(
        "ann",
        Method::POST,
        &agent.stack.url(&format!("/sessions/{id}/terminals")),
        Some(json!({"cols": 80, "rows": 24})),
    )
    .await
    .unwrap();
    let term = term.body["id"].as_str().unwrap().to_owned();
    ann.send(json!({"type": "terminal_input", "terminalId": term, "data": format!("python3 -m http.server {app_port} --bind 127.0.0.1\r")}))
        .await
        .unwrap();
    let ports = agent.stack.url(&format!("/sessions/{id}/ports"));
    for bad in [
        json!({"port": 0}),
        json!({"port": 3000, "host": "evil"}),
        json!({"port": 70000}),
        json!({}),
    ] {
        let r = send_as("ann", Method::POST, &ports, Some(bad.clone()))
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    let opened = send_as("ann", Method::POST, &ports, Some(json!({"port": app_port})))
        .await
        .unwrap();
    assert_eq!(opened.status, 200, "{}", opened.body);
    assert_eq!(opened.body["gated"], true);
    let again = send_as("bob", Method::POST, &ports, Some(json!({"port": app_port})))
        .await
        .unwrap();
    assert_eq!(
        again.status, 200,
        "a port already open is linked again: {}",
        again.body
    );
    let app_link = opened.body["url"].as_str().unwrap().to_owned();
    let app = app_link.split("/?").next().unwrap().to_owned();
    assert_eq!(plain.get(&app).send().await.unwrap().status(), 401);
    let swapped = plain.get(&app_link).send().await.unwrap();
    assert_eq!(swapped.status(), 302);
    let app_cookie = inspect_tests::client::gate_cookie(&swapped);
    let listing = plain
        .get(format!("{app}/"))
        .header("Cookie", &app_cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(listing.contains("README.md"), "{listing}");
    let urls = inspect_tests::client::get(&agent.stack.url(&format!("/sessions/{id}/tunnel-urls")))
        .await
        .unwrap();
    assert_eq!(
        urls.body["tunnelUrls"][app_port.to_string()],
        app.as_str(),
        "{}",
        urls.body
    );
    let said = inspect_tests::client::events_until(base, &id, "port", "port", 10)
        .await
        .unwrap();
    assert_eq!(said[0]["port"], app_port, "{said:?}");

    // Once the sandbox stops, the editor and its links are gone.
    let unused = send_as("ann", Method::POST, &editor, None).await.unwrap();
    assert_eq!(unused.status, 200);
    let archived = send_as(
        "ann",
        Method::POST,
        &agent.stack.url(&format!("/sessions/{id}/archive")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(archived.status, 200, "{}", archived.body);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let gone = plain
            .get(format!("{gate}/"))
            .header("Cookie", &cookie)
            .send()
            .await
            .is_err();
        if gone {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the editor outlived its sandbox"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let after =
        inspect_tests::client::navigate_as("ann", unused.body["url"].as_str().unwrap()).await;
    assert_eq!(after.status(), 409);
    let refused = send_as("ann", Method::POST, &editor, None).await.unwrap();
    assert_eq!(refused.status, 409, "{}", refused.body);
    let no_port = send_as("ann", Method::POST, &ports, Some(json!({"port": app_port})))
        .await
        .unwrap();
    assert_eq!(no_port.status, 409, "{}", no_port.body);
}
