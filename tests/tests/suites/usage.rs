//! Usage through the real runtime: a session's object counts what it used (prompts, tool
//! calls, the model's tokens and cost as OpenCode reported them, sandbox time) into its D1
//! index row, and `GET /usage` sums it by person, repository and week, as JSON or CSV; a
//! spent monthly budget refuses new prompts (HTTP and socket) and automation runs until an
//! admin raises it.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{prompted_repo_session, send, WsClient};
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
    let id = prompted_repo_session(&stack.base_url, ("local", "demo"), "look around")
        .await
        .unwrap();

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
    let by_source = send(Method::GET, &stack.url("/usage?by=source"), None)
        .await
        .unwrap();
    assert_eq!(
        by_source.body["rows"][0]["key"], "web",
        "{}",
        by_source.body
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

    // The session is found by what was asked, by its repository and by its new title.
    let found = |q: &'static str| {
        let url = stack.url(&format!("/sessions?q={q}"));
        async move {
            let r = send(Method::GET, &url, None).await.unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
            r.body["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(found("around").await, vec![id.clone()]);
    assert_eq!(found("DEMO").await, vec![id.clone()]);
    assert!(found("nothing%20like%20this").await.is_empty());
    assert!(
        found("100%25").await.is_empty(),
        "a % is looked for, not a wildcard"
    );
    let r = send(
        Method::PATCH,
        &stack.url(&format!("/sessions/{id}/title")),
        Some(json!({"title": "Quarterly cleanup"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let deadline = Instant::now() + Duration::from_secs(30);
    while found("quarterly").await.is_empty() {
        assert!(Instant::now() < deadline, "the new title was never indexed");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

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

#[tokio::test]
async fn a_spent_budget_refuses_new_work_until_an_admin_raises_it() {
    let agent = AgentStack::start(
        vec![
            Reply::tool(
                "bash",
                json!({"command": "ls", "description": "look around"}),
            ),
            Reply::text("Looked."),
            Reply::text("Looked again."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let stack = &agent.stack;
    let repo = source_repo();
    agent.register_repo("demo", repo.path()).await.unwrap();

    // Bad budgets are refused.
    for bad in [
        json!({"scope": "person", "subject": "*", "metric": "tokens", "monthlyLimit": -1}),
        json!({"scope": "person", "subject": "*", "metric": "tokens", "monthlyLimit": 1e20}),
        json!({"scope": "person", "subject": "", "metric": "tokens", "monthlyLimit": 5}),
        json!({"scope": "team", "metric": "tokens", "monthlyLimit": 5}),
        json!({"scope": "person", "subject": "*", "metric": "dollars", "monthlyLimit": 5}),
    ] {
        let r = send(Method::PUT, &stack.url("/budgets"), Some(bad.clone()))
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    // Each person may use 1 token a month: the first prompt runs (nothing used yet).
    let r = send(
        Method::PUT,
        &stack.url("/budgets"),
        Some(json!({"scope": "person", "subject": "*", "metric": "tokens", "monthlyLimit": 1})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "local", "repoName": "demo"})),
    )
    .await
    .unwrap();
    let id = r.body["sessionId"].as_str().unwrap().to_owned();
    let prompt = |text: &'static str| {
        let url = stack.url(&format!("/sessions/{id}/prompt"));
        async move {
            send(Method::POST, &url, Some(json!({ "content": text })))
                .await
                .unwrap()
        }
    };
    assert_eq!(prompt("look around").await.status, 200);
    let deadline = Instant::now() + Duration::from_secs(120);
    let spent = loop {
        let r = send(Method::GET, &stack.url("/budgets"), None)
            .await
            .unwrap();
        let used = r.body["budgets"][0]["used"].as_f64().unwrap_or(0.0);
        if used >= 1.0 {
            break r.body;
        }
        assert!(Instant::now() < deadline, "never used: {}", r.body);
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        spent["budgets"][0]["resetsAt"].as_i64().unwrap() > 0,
        "{spent}"
    );

    // Spent: the next prompt is refused with which budget and when it resets, whichever
    // way it comes; nothing of the session is lost.
    let refused = prompt("look again").await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    let why = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("model tokens") && why.contains("resets"),
        "{why}"
    );
    let (mut ws, _) = WsClient::join(&stack.base_url, &stack.ws_url(""), &id, "local")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "over the socket"}))
        .await
        .unwrap();
    let err = ws.recv_type("error").await.unwrap();
    assert!(err.to_string().contains("model tokens"), "{err}");
    // Prompts that come together are each refused: while one check is asked the others
    // wait for it, and, budgets being set, then ask for their own.
    let mut together = Vec::new();
    for _ in 0..4 {
        let (ws, _) = WsClient::join(&stack.base_url, &stack.ws_url(""), &id, "local")
            .await
            .unwrap();
        together.push(ws);
    }
    for ws in together.iter_mut() {
        ws.send(json!({"type": "prompt", "content": "together"}))
            .await
            .unwrap();
    }
    for ws in together.iter_mut() {
        let err = ws.recv_type("error").await.unwrap();
        assert!(err.to_string().contains("model tokens"), "{err}");
    }
    // An automation's run is refused too, and says why.
    let made = send(
        Method::POST,
        &stack.url("/automations"),
        Some(
            json!({"name": "nightly", "triggerType": "webhook", "instructions": "look",
                    "repositories": [{"owner": "local", "name": "demo"}]}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(made.status, 201, "{}", made.body);
    let auto = made.body["automation"]["id"].as_str().unwrap().to_owned();
    let run = send(
        Method::POST,
        &stack.url(&format!("/automations/{auto}/trigger")),
        None,
    )
    .await
    .unwrap();
    assert!(
        run.body.to_string().contains("model tokens"),
        "{}",
        run.body
    );
    let events = send(
        Method::GET,
        &stack.url(&format!("/sessions/{id}/events")),
        None,
    )
    .await
    .unwrap();
    let prompts = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "user_message")
        .count();
    assert_eq!(prompts, 1, "the refused prompts were never queued");

    // An admin raises it: at once, the next prompt runs; with 90 % of the new limit used,
    // the person is told so in their inbox, once.
    let used = spent["budgets"][0]["used"].as_f64().unwrap();
    let r = send(
        Method::PUT,
        &stack.url("/budgets"),
        Some(json!({"scope": "person", "subject": "*", "metric": "tokens", "monthlyLimit": used / 0.9})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(prompt("look again").await.status, 200);
    let deadline = Instant::now() + Duration::from_secs(30);
    let told = loop {
        let r = send(Method::GET, &stack.url("/inbox"), None).await.unwrap();
        let budget: Vec<Value> = r.body["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["kind"] == "budget")
            .cloned()
            .collect();
        if !budget.is_empty() {
            break budget;
        }
        assert!(Instant::now() < deadline, "never told of 80 %: {}", r.body);
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(told.len(), 1, "{told:?}");
    let detail = told[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("model tokens") && detail.contains("your monthly"),
        "{detail}"
    );
    let r = send(
        Method::DELETE,
        &stack.url("/budgets?scope=person&subject=*&metric=tokens"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}
