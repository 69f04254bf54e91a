//! The workspace's change, end to end through `wrangler dev`, the local sandbox host, the
//! real supervisor, git and OpenCode with the scripted model: a turn that edits files in two
//! repositories lists both (committed by the turn, with line counts), each file's diff is
//! read on its own, clients are told when a capture lands, and the next turn's capture
//! replaces it; the browser's changes panel shows the same and follows the next turn
//! without a reload. Only the session's sandbox may report one.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{create_session, send, WsClient};
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::source_repo;
use reqwest::Method;
use serde_json::{json, Value};

async fn until_complete(ws: &mut WsClient) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let m = ws.recv_within(120).await.unwrap();
        let done = m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete";
        seen.push(m);
        if done {
            return seen;
        }
    }
}

#[tokio::test]
async fn a_turn_in_two_repositories_lists_both_and_the_next_turn_replaces_it() {
    let agent = AgentStack::start(
        vec![
            Reply::tool(
                "bash",
                json!({"command": "printf 'one\\ntwo\\n' > notes.md && echo more >> README.md && printf 'x\\n' > '../other/new file.txt'", "description": "edit both"}),
            ),
            Reply::text("Edited both."),
            Reply::tool(
                "bash",
                json!({"command": "git rm -q notes.md", "description": "drop the notes"}),
            ),
            Reply::text("Dropped the notes."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let (demo, other) = (source_repo(), source_repo());
    agent.register_repo("demo", demo.path()).await.unwrap();
    agent.register_repo("other", other.path()).await.unwrap();
    let base = &agent.stack.base_url;
    let id = create_session(
        base,
        "ann",
        json!({"repositories": [{"owner": "local", "name": "demo"}, {"owner": "local", "name": "other"}]}),
    )
    .await
    .unwrap();
    let url = |path: &str| agent.stack.url(&format!("/sessions/{id}/changes{path}"));
    // Nothing captured yet.
    let none = send(Method::GET, &url(""), None).await.unwrap();
    assert_eq!(none.status, 200, "{}", none.body);
    assert_eq!(none.body["repos"], json!([]));

    let (mut ws, _) = WsClient::join(base, &agent.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "edit both"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws).await;
    let notice = seen
        .iter()
        .find(|m| m["type"] == "diff_updated")
        .unwrap_or_else(|| {
            panic!(
                "no diff_updated before the end: {seen:#?}\n{}",
                agent.host.sandbox_logs()
            )
        });
    assert_eq!(notice["files"], 3, "{notice}");
    assert_eq!(notice["additions"], 4, "{notice}");

    let listed = send(Method::GET, &url(""), None).await.unwrap();
    let repos = listed.body["repos"].as_array().unwrap();
    assert_eq!(repos.len(), 2, "{}", listed.body);
    let files = |repo: &str| -> Vec<(String, String, u64)> {
        repos.iter().find(|r| r["repo"] == repo).unwrap()["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                assert!(f.get("patch").is_none(), "the listing carries no diff: {f}");
                (
                    f["path"].as_str().unwrap().to_owned(),
                    f["kind"].as_str().unwrap().to_owned(),
                    f["additions"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        files("demo"),
        vec![
            ("README.md".into(), "modified".into(), 1),
            ("notes.md".into(), "added".into(), 2)
        ]
    );
    assert_eq!(
        files("other"),
        vec![("new file.txt".into(), "added".into(), 1)]
    );
    let one = send(Method::GET, &url("?repo=other&file=new%20file.txt"), None)
        .await
        .unwrap();
    assert_eq!(one.status, 200, "{}", one.body);
    assert!(
        one.body["patch"].as_str().unwrap().contains("+x"),
        "{}",
        one.body
    );
    for (query, status) in [("?repo=demo&file=nope", 404), ("?repo=demo", 400)] {
        let r = send(Method::GET, &url(query), None).await.unwrap();
        assert_eq!(r.status, status, "{query}: {}", r.body);
    }
    // The turn's report names the files from the capture.
    let messages = send(
        Method::GET,
        &agent.stack.url(&format!("/sessions/{id}/messages")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(messages.status, 200);

    // In the browser: both repositories, a diff opened; then the next turn's capture
    // replaces it (the notes are gone from the change) while the page is open.
    let out = inspect_tests::browser::artifacts("changes");
    let _ = std::fs::remove_file(out.join("waiting-for-next-turn"));
    let browser = {
        let (base, out, id) = (base.clone(), out.clone(), id.clone());
        tokio::task::spawn_blocking(move || {
            inspect_tests::browser::run_script("changes.mjs", &base, &out, &[("SESSION_ID", id)])
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !out.join("waiting-for-next-turn").exists() {
        assert!(!browser.is_finished(), "the browser script ended early");
        assert!(
            std::time::Instant::now() < deadline,
            "the browser never got to the diff"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    ws.send(json!({"type": "prompt", "content": "drop the notes"}))
        .await
        .unwrap();
    until_complete(&mut ws).await;
    browser.await.unwrap();
    let listed = send(Method::GET, &url(""), None).await.unwrap();
    let demo_files: Vec<&str> = listed.body["repos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["repo"] == "demo")
        .unwrap()["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(demo_files, vec!["README.md"], "{}", listed.body);

    // Only the session's sandbox reports a change.
    let forged = reqwest::Client::new()
        .put(url(""))
        .header("Authorization", "Bearer not-the-sandbox")
        .header("X-Sandbox-ID", "sb_other")
        .json(&json!({"repos": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let person = send(Method::PUT, &url(""), Some(json!({"repos": []})))
        .await
        .unwrap();
    assert!(
        person.status == 401 || person.status == 403,
        "{}: {}",
        person.status,
        person.body
    );
}
