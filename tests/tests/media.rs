//! The agent's pictures, end to end: the agent runs `open-inspect screenshot` in its sandbox
//! (the real supervisor driving the machine's headless Chromium) against a page it serves;
//! the picture reaches the session as a `media` artifact and a timeline event, and the
//! session's people read it back; a page that never answers is given up on in words; only
//! the session's sandbox may send one, and only pictures are served.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{create_session, send, WsClient};
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::source_repo;
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
    let demo = source_repo();
    agent.register_repo("demo", demo.path()).await.unwrap();
    let base = &agent.stack.base_url;
    let id = create_session(
        base,
        "ann",
        json!({"repositories": [{"owner": "local", "name": "demo"}]}),
    )
    .await
    .unwrap();
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
    let demo = source_repo();
    agent.register_repo("demo", demo.path()).await.unwrap();
    let base = &agent.stack.base_url;
    let id = create_session(
        base,
        "ann",
        json!({"repositories": [{"owner": "local", "name": "demo"}]}),
    )
    .await
    .unwrap();
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
