//! Usage through the real runtime: a session's object counts what it used (prompts, tool
//! calls, the model's tokens and cost as OpenCode reported them, sandbox time) into its D1
//! index row, and `GET /usage` sums it by person, repository and week, as JSON or CSV.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::send;
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::source_repo;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_sessions_usage_is_counted_and_summed() {
    let agent = AgentStack::start(
        vec![
            Reply::tool(
                "bash",
                json!({"command": "ls", "description": "look around"}),
            ),
            Reply::text("Looked."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let stack = &agent.stack;
    let repo = source_repo();
    agent.register_repo("demo", repo.path()).await.unwrap();
    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "local", "repoName": "demo"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["sessionId"].as_str().unwrap().to_owned();
    let r = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "look around"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);

    // The row is written when the prompt ends (at most a second later).
    let deadline = Instant::now() + Duration::from_secs(120);
    let report = loop {
        let r = send(Method::GET, &stack.url("/usage?by=person"), None)
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        if r.body["rows"][0]["toolCalls"].as_i64() == Some(1) {
            break r.body;
        }
        assert!(Instant::now() < deadline, "never counted: {}", r.body);
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(report["everyone"], true, "the local user is an admin");
    let row: &Value = &report["rows"][0];
    assert_eq!(row["key"], "local:local", "{report}");
    assert_eq!(row["sessions"], 1);
    assert_eq!(row["prompts"], 1);
    assert!(row["tokensIn"].as_i64().unwrap() > 0, "{row}");
    assert!(row["tokensOut"].as_i64().unwrap() > 0, "{row}");
    assert!(row["sandboxMs"].as_i64().unwrap() > 0, "{row}");
    assert_eq!(row["pullRequests"], 0);

    let by_repo = send(Method::GET, &stack.url("/usage?by=repository"), None)
        .await
        .unwrap();
    assert_eq!(
        by_repo.body["rows"][0]["key"], "local/demo",
        "{}",
        by_repo.body
    );
    let by_week = send(Method::GET, &stack.url("/usage?by=week"), None)
        .await
        .unwrap();
    let week = by_week.body["rows"][0]["key"].as_str().unwrap().to_owned();
    assert_eq!(week.len(), 10, "a Monday's date: {week}");

    let csv = reqwest::get(stack.url("/usage?by=repository&format=csv"))
        .await
        .unwrap();
    assert_eq!(csv.status(), 200);
    assert!(csv.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    let text = csv.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("key,label,sessions,prompts"), "{text}");
    assert!(
        lines[1].starts_with("local/demo,local/demo,1,1,1,"),
        "{text}"
    );

    // Bad queries are refused, with what is allowed.
    for bad in [
        "by=team",
        "since=x",
        "since=10&until=5",
        "format=xml",
        "limit=3",
    ] {
        let r = send(Method::GET, &stack.url(&format!("/usage?{bad}")), None)
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
}
