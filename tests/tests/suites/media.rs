//! The agent's pictures, end to end: the agent runs `open-inspect screenshot` in its sandbox
//! (the real supervisor driving the machine's headless Chromium) against a page it serves;
//! the picture reaches the session as a `media` artifact and a timeline event, and the
//! session's people read it back; a page that never answers is given up on in words; only
//! the session's sandbox may send one, and only pictures are served. The agent's browser,
//! driven through its MCP tools, and watched on the sandbox's desktop through noVNC.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{send, send_as, WsClient};
use inspect_tests::fakes::model::Reply;
use reqwest::Method;
use serde_json::{json, Value};

#[tokio::test]
async fn the_agent_photographs_the_page_it_serves_and_the_people_see_it() {
    let port = inspect_tests::stack::free_port().unwrap();
    // A server that takes connections and never answers.
    let hang = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hang_port = hang.local_addr().unwrap().port();
    let serve = format!(
        "printf '<h1 style=\"font-size:80px\">Hello from the sandbox</h1>' > page.html && (nohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &) && sleep 1 && open-inspect screenshot http://127.0.0.1:{port}/page.html --caption 'The hello page' --width 800 --height 600"
    );
    let agent = AgentStack::start(
        vec![
            Reply::tool("bash", json!({"command": serve, "description": "serve and photograph"})),
            Reply::tool(
                "bash",
                json!({"command": format!("open-inspect screenshot http://127.0.0.1:{hang_port}/ --timeout 2 || echo SHOT-REFUSED"), "description": "a page that never answers"}),
            ),
            Reply::text("Took the picture."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let (_demo, id) = agent.demo_session("ann").await.unwrap();
    let base = &agent.stack.base_url;
    let (mut ws, _) = WsClient::join(base, &agent.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "show me the page"}))
        .await
        .unwrap();
    let mut media_event = None;
    let mut artifact = None;
    loop {
        let m = ws
            .recv_within(180)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", agent.host.sandbox_logs()));
        if m["type"] == "sandbox_event" && m["event"]["type"] == "media" {
            media_event = Some(m["event"].clone());
        }
        if m["type"] == "artifact_created" && m["artifact"]["type"] == "media" {
            artifact = Some(m["artifact"].clone());
        }
        if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
            break;
        }
    }
    let artifact = artifact.unwrap_or_else(|| {
        let asked: Vec<String> = agent
            .model
            .requests()
            .iter()
            .map(|r| {
                r["messages"]
                    .as_array()
                    .map(|m| {
                        m.iter()
                            .filter(|m| m["role"] == "tool")
                            .map(|m| m["content"].to_string())
                            .collect::<Vec<_>>()
                            .join(" | ")
                    })
                    .unwrap_or_default()
            })
            .collect();
        panic!(
            "no media artifact: {asked:?}\n{}",
            agent.host.sandbox_logs()
        )
    });
    let event = media_event.unwrap();
    assert_eq!(artifact["metadata"]["caption"], "The hello page");
    assert_eq!(event["caption"], "The hello page");
    let url = artifact["url"].as_str().unwrap().to_owned();
    assert_eq!(event["url"], url.as_str());
    // The people read it: a PNG, served so that a browser runs nothing in it.
    let r = reqwest::get(agent.stack.url(&url)).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    let png = r.bytes().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{} bytes", png.len());
    assert!(png.len() > 1000, "a real picture: {} bytes", png.len());
    // In a browser: on the timeline, among the artifacts, in a lightbox.
    let out = inspect_tests::browser::artifacts("media");
    let (b, o, i) = (base.clone(), out.clone(), id.clone());
    let browser = tokio::task::spawn_blocking(move || {
        inspect_tests::browser::run_script("media.mjs", &b, &o, &[("SESSION_ID", i)])
    })
    .await;
    assert!(browser.is_ok(), "the browser script failed");
    // The page that never answered: given up on, in words, to the agent.
    let requests: Vec<String> = agent
        .model
        .requests()
        .iter()
        .map(Value::to_string)
        .collect();
    assert!(
        requests
            .iter()
            .any(|r| r.contains("SHOT-REFUSED") && r.contains("did not load within 2 s")),
        "{:?}",
        requests.last()
    );
    drop(hang);

    // Only the session's sandbox sends pictures; only pictures are served.
    let c = reqwest::Client::new();
    let forged = c
        .post(
            agent
                .stack
                .url(&format!("/sessions/{id}/media?type=image/png")),
        )
        .header("Authorization", "Bearer not-the-sandbox")
        .header("X-Sandbox-ID", "sb_other")
        .body(png.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let html = c
        .post(
            agent
                .stack
                .url(&format!("/sessions/{id}/media?type=text/html")),
        )
        .header("Authorization", "Bearer not-the-sandbox")
        .header("X-Sandbox-ID", "sb_other")
        .body("<script>alert(1)</script>")
        .send()
        .await
        .unwrap();
    assert_eq!(html.status(), 400);
    let kept = c
        .post(
            agent
                .stack
                .url(&format!("/sessions/{id}/attachments?name=notes.txt")),
        )
        .header("content-type", "text/plain")
        .body("a person's file")
        .send()
        .await
        .unwrap();
    assert_eq!(kept.status(), 201);
    let kept: Value = kept.json().await.unwrap();
    let not_media = send(
        Method::GET,
        &agent.stack.url(&format!(
            "/sessions/{id}/media/{}",
            kept["attachmentId"].as_str().unwrap()
        )),
        None,
    )
    .await
    .unwrap();
    assert_eq!(not_media.status, 404, "{}", not_media.body);
}

#[tokio::test]
async fn the_agent_records_a_moving_page_and_the_people_see_it_move() {
    let port = inspect_tests::stack::free_port().unwrap();
    // A page that changes five times a second.
    let page = "<h1 id=n style=\"font-size:120px\">0</h1><script>let i=0;setInterval(()=>{n.textContent=++i;document.body.style.background=i%2?\"#fc0\":\"#0cf\"},200)</script>";
    let serve = format!(
        "printf '%s' '{page}' > anim.html && (nohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &) && sleep 1 && open-inspect record http://127.0.0.1:{port}/anim.html --seconds 2 --caption 'The counter' --width 640 --height 400 && open-inspect record http://127.0.0.1:{port}/anim.html --seconds 99 || echo TOO-LONG-REFUSED"
    );
    let agent = AgentStack::start(
        vec![
            Reply::tool(
                "bash",
                json!({"command": serve, "description": "serve and record"}),
            ),
            Reply::text("Recorded it."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let (_demo, id) = agent.demo_session("ann").await.unwrap();
    let base = &agent.stack.base_url;
    let (mut ws, _) = WsClient::join(base, &agent.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "record the page"}))
        .await
        .unwrap();
    let mut artifact = None;
    loop {
        let m = ws
            .recv_within(180)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", agent.host.sandbox_logs()));
        if m["type"] == "artifact_created" && m["artifact"]["type"] == "media" {
            artifact = Some(m["artifact"].clone());
        }
        if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
            break;
        }
    }
    let requests: Vec<String> = agent
        .model
        .requests()
        .iter()
        .map(Value::to_string)
        .collect();
    let artifact = artifact.unwrap_or_else(|| {
        panic!(
            "no recording: {:?}\n{}",
            requests.last(),
            agent.host.sandbox_logs()
        )
    });
    assert_eq!(artifact["metadata"]["caption"], "The counter");
    let r = reqwest::get(agent.stack.url(artifact["url"].as_str().unwrap()))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/gif");
    let gif = r.bytes().await.unwrap();
    use image::AnimationDecoder;
    let frames: Vec<image::Frame> =
        image::codecs::gif::GifDecoder::new(std::io::Cursor::new(gif.as_ref()))
            .unwrap()
            .into_frames()
            .collect::<Result<_, _>>()
            .unwrap();
    assert!(frames.len() >= 4, "the page moved: {} frames", frames.len());
    assert_eq!(frames[0].buffer().width(), 640);
    let total_ms: u32 = frames
        .iter()
        .map(|f| {
            let (n, d) = f.delay().numer_denom_ms();
            n / d.max(1)
        })
        .sum();
    assert!(
        (1_500..=3_000).contains(&total_ms),
        "about the 2 seconds recorded: {total_ms} ms"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.contains("TOO-LONG-REFUSED") && r.contains("a recording is 1 to 15 seconds")),
        "{:?}",
        requests.last()
    );
}

/// The agent's hands: in the sandbox image, the agent (scripted) starts the repository's
/// app, opens it in its browser (the built-in MCP server `browser`), fills the form,
/// clicks submit, waits for and reads the result, is told in words when an element never
/// comes, and photographs the page for the people; each step is a tool call on the
/// timeline.
#[tokio::test]
async fn the_agent_drives_its_browser_through_the_app_it_started() {
    let port = inspect_tests::stack::free_port().unwrap();
    let page = r#"<!doctype html><title>Sign up</title><h1>Join us</h1><form id="f"><label for="name">Name</label> <input id="name" name="name"> <button type="submit">Send</button></form><p id="result"></p><script>document.getElementById('f').addEventListener('submit', e => { e.preventDefault(); console.error('analytics is down'); setTimeout(() => { document.getElementById('result').textContent = 'Thanks, ' + document.getElementById('name').value + '!'; }, 300); });</script>"#;
    let serve = format!(
        "mkdir -p app && cat > app/index.html <<'HTML'\n{page}\nHTML\ncd app && (nohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &) && sleep 1 && echo serving"
    );
    let url = format!("http://127.0.0.1:{port}/");
    // A server that takes connections and never answers.
    let hang = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hang_port = hang.local_addr().unwrap().port();
    let agent = AgentStack::start_in_image(vec![
        Reply::tool(
            "bash",
            json!({"command": serve, "description": "start the app"}),
        ),
        Reply::tool("browser_open", json!({"url": url})),
        Reply::tool("browser_type", json!({"selector": "#name", "text": "Ann"})),
        Reply::tool("browser_click", json!({"selector": "button[type=submit]"})),
        Reply::tool("browser_wait_for", json!({"text": "Thanks, Ann!"})),
        Reply::tool("browser_read", json!({})),
        Reply::tool(
            "browser_wait_for",
            json!({"selector": "#never-there", "timeout_secs": 1}),
        ),
        Reply::tool(
            "browser_screenshot",
            json!({"caption": "After sending the form"}),
        ),
        Reply::tool(
            "browser_click",
            json!({"selector": "button[", "timeout_secs": 1}),
        ),
        Reply::tool("browser_press", json!({"key": "Hyper"})),
        Reply::tool(
            "browser_open",
            json!({"url": format!("http://127.0.0.1:{hang_port}/"), "timeout_secs": 2}),
        ),
        Reply::text("The form works."),
    ])
    .await
    .unwrap();
    let (_demo, id) = agent.demo_session("ann").await.unwrap();
    let base = &agent.stack.base_url;
    let (mut ws, _) = WsClient::join(base, &agent.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "check the sign-up form"}))
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let m = ws
            .recv_within(240)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", agent.host.sandbox_logs()));
        let done = m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete";
        seen.push(m);
        if done {
            break;
        }
    }
    let logs = || agent.host.sandbox_logs();
    // The built-in server is up and said so in the boot steps.
    let mcp = seen
        .iter()
        .find(|m| {
            m["event"]["type"] == "boot_step"
                && m["event"]["step"] == "mcp"
                && m["event"]["status"] != "started"
        })
        .unwrap_or_else(|| panic!("no mcp step\n{}", logs()));
    assert!(
        mcp["event"]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("browser: the agent's browser, offered"),
        "{mcp}"
    );
    // Each browser step ended on the timeline, in order, with what it found.
    let ended: Vec<&Value> = seen
        .iter()
        .map(|m| &m["event"])
        .filter(|e| {
            e["type"] == "tool_call"
                && e["tool"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("browser_")
                && (e["status"] == "completed" || e["status"] == "error")
        })
        .collect();
    let names: Vec<&str> = ended
        .iter()
        .map(|e| e["tool"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            "browser_open",
            "browser_type",
            "browser_click",
            "browser_wait_for",
            "browser_read",
            "browser_wait_for",
            "browser_screenshot",
            "browser_click",
            "browser_press",
            "browser_open"
        ],
        "{ended:#?}\n{}",
        logs()
    );
    let said = |i: usize| ended[i].to_string();
    assert!(
        said(0).contains("Join us") && said(0).contains("textbox"),
        "{}",
        said(0)
    );
    assert!(
        said(2).contains("Clicked button[type=submit]"),
        "{}",
        said(2)
    );
    assert!(
        said(4).contains("Thanks, Ann!") && said(4).contains("analytics is down"),
        "the result and the console's error: {}",
        said(4)
    );
    assert!(
        said(5).contains("did not appear within 1 s") && said(5).contains("Thanks, Ann!"),
        "a wait that never ends is said in words, with what the page shows: {}",
        said(5)
    );
    // Bad input is answered in words: a selector the page cannot read, a key that is not
    // one, a page that never loads (given up on at its timeout).
    for (i, words) in [
        (7, "not a selector the page understands"),
        (8, "is not a key"),
        (9, "did not load within 2 s"),
    ] {
        assert!(
            said(i).contains(words) && ended[i]["status"] == "error",
            "{words}: {}",
            said(i)
        );
    }
    drop(hang);
    // The screenshot reached the people.
    let artifact = seen
        .iter()
        .find(|m| m["type"] == "artifact_created" && m["artifact"]["type"] == "media")
        .unwrap_or_else(|| panic!("no picture: {}", said(6)));
    assert_eq!(
        artifact["artifact"]["metadata"]["caption"],
        "After sending the form"
    );
    let png = reqwest::get(
        agent
            .stack
            .url(artifact["artifact"]["url"].as_str().unwrap()),
    )
    .await
    .unwrap()
    .bytes()
    .await
    .unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 1000,
        "{} bytes",
        png.len()
    );
}

#[tokio::test]
async fn people_watch_the_agents_browser_on_the_desktop() {
    let port = inspect_tests::stack::free_port().unwrap();
    // A page that keeps changing for 25 s, then says so.
    let page = r#"<!doctype html><title>Live</title><h1 id="n">0</h1><script>let i = 0; const t = setInterval(() => { i++; document.getElementById('n').textContent = i; document.body.style.background = 'hsl(' + (i * 37 % 360) + ',70%,55%)'; }, 150); setTimeout(() => { clearInterval(t); document.body.append('Finished'); }, 25000);</script>"#;
    let serve = format!(
        "mkdir -p live && cat > live/index.html <<'HTML'\n{page}\nHTML\ncd live && (nohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &) && sleep 1 && echo serving"
    );
    let agent = AgentStack::start_in_image(vec![
        Reply::text("Ready."),
        Reply::tool(
            "bash",
            json!({"command": serve, "description": "start the app"}),
        ),
        Reply::tool(
            "browser_open",
            json!({"url": format!("http://127.0.0.1:{port}/")}),
        ),
        Reply::tool(
            "browser_wait_for",
            json!({"text": "Finished", "timeout_secs": 45}),
        ),
        Reply::text("Watched it run."),
    ])
    .await
    .unwrap();
    let (_demo, id) = agent.demo_session("ann").await.unwrap();
    let base = &agent.stack.base_url;
    let desktop = agent.stack.url(&format!("/sessions/{id}/desktop"));
    let early = send_as("ann", Method::POST, &desktop, None).await.unwrap();
    assert_eq!(early.status, 409, "no sandbox yet: {}", early.body);
    let (mut ws, _) = WsClient::join(base, &agent.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "get ready"}))
        .await
        .unwrap();
    let logs = || agent.host.sandbox_logs();
    loop {
        let m = ws
            .recv_within(120)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
        if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
            break;
        }
    }
    // Bad asks, in words.
    for bad in [json!({"control": "yes"}), json!({"view": true})] {
        let r = send_as("ann", Method::POST, &desktop, Some(bad.clone()))
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    // Links: the person's own, once; control is a link of its own, to another server.
    let control = send_as(
        "ann",
        Method::POST,
        &desktop,
        Some(json!({"control": true})),
    )
    .await
    .unwrap();
    assert_eq!(control.status, 200, "{}", control.body);
    assert_eq!(control.body["control"], true);
    let control_url = control.body["url"].as_str().unwrap().to_owned();
    assert!(
        control_url.starts_with(&format!("{base}/sessions/{id}/desktop/open?token=")),
        "{control_url}"
    );
    assert_eq!(
        inspect_tests::client::navigate_as("bob", &control_url)
            .await
            .status(),
        403
    );
    let editor_door = control_url.replace("/desktop/open", "/editor/open");
    assert_eq!(
        inspect_tests::client::navigate_as("ann", &editor_door)
            .await
            .status(),
        404,
        "a desktop link is not the editor's"
    );
    let opened = inspect_tests::client::navigate_as("ann", &control_url).await;
    assert_eq!(opened.status(), 302);
    let control_gate = opened.headers()["location"].to_str().unwrap().to_owned();
    assert!(
        control_gate.contains("/vnc.html?") && control_gate.contains("view_only=0"),
        "{control_gate}"
    );
    assert!(
        control_gate.contains("inspect_port_token="),
        "{control_gate}"
    );
    assert_eq!(
        inspect_tests::client::navigate_as("ann", &control_url)
            .await
            .status(),
        404,
        "a link opens once"
    );
    // The gate lets nothing through without the link or its cookie.
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let control_base = control_gate.split("/vnc.html").next().unwrap().to_owned();
    assert_eq!(
        plain
            .get(format!("{control_base}/vnc.html"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );

    // In the browser: "Desktop" on the session page opens the view-only desktop, and the
    // agent's browser appears on it.
    let out = inspect_tests::browser::artifacts("desktop");
    let (b, o, i) = (base.clone(), out.clone(), id.clone());
    let script = tokio::task::spawn_blocking(move || {
        inspect_tests::browser::run_script(
            "desktop.mjs",
            &b,
            &o,
            &[("SESSION_ID", i), ("PERSON", "ann".into())],
        )
    })
    .await;
    let said = match script {
        Ok(text) => text,
        Err(e) => panic!("the browser script failed: {e}\n{}", logs()),
    };
    println!("{said}");
    assert!(said.contains("[desktop] ok"), "{said}");
    let mut seen = Vec::new();
    loop {
        let m = ws
            .recv_within(120)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
        let done = m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete";
        seen.push(m);
        if done {
            break;
        }
    }
    let waited = seen
        .iter()
        .map(|m| &m["event"])
        .find(|e| {
            e["type"] == "tool_call"
                && e["tool"] == "browser_wait_for"
                && e["status"] == "completed"
        })
        .unwrap_or_else(|| {
            panic!(
                "the agent did not see its page finish: {seen:#?}\n{}",
                logs()
            )
        });
    assert!(waited.to_string().contains("Finished"), "{waited}");
    let said = inspect_tests::client::events_until(base, &id, "desktop", "desktop", 10)
        .await
        .unwrap();
    assert_eq!(said.len(), 2, "{said:?}");
    assert_eq!(said[0]["by"], "ann");
    assert_eq!(said[0]["control"], true);
    assert_eq!(said[1]["control"], false);

    // Once the sandbox stops, the desktop goes with it: its gate answers no more, and a
    // link asked for then is refused.
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
    while plain
        .get(format!("{control_base}/vnc.html"))
        .send()
        .await
        .is_ok()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the desktop outlived its sandbox"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let refused = send_as("ann", Method::POST, &desktop, None).await.unwrap();
    assert_eq!(refused.status, 409, "{}", refused.body);
}
