//! Child sessions through the whole stack: a scripted parent agent spawns two children with
//! `open-inspect child`, waits for both, and reports their results; each child is a full
//! session with its own sandbox, acting for the parent's prompter; the parent's page lists
//! them; stopping the parent reaches them.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{get, send};
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::source_repo;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_parent_spawns_two_children_waits_for_them_and_reports() {
    let spawn_and_wait = "a=$(open-inspect child spawn --title 'Child A' --prompt 'Do part A') && \
        b=$(open-inspect child spawn --title 'Child B' --prompt 'Do part B') && \
        open-inspect child wait --timeout 240 $a $b";
    let AgentStack { model, host, stack } = AgentStack::start(
        vec![
            // The parent: spawn both and wait (its bash runs while the children work).
            Reply::tool(
                "bash",
                json!({"command": spawn_and_wait, "description": "fan out"}),
            ),
            // The two children, whichever asks first.
            Reply::text("Child part done."),
            Reply::text("Child part done."),
            // The parent again, after the wait.
            Reply::text("Both children finished."),
            // The second prompt: a child that works long, stopped with its parent.
            Reply::tool(
                "bash",
                json!({"command": "c=$(open-inspect child spawn --title 'Child C' --prompt 'Work long') && open-inspect child wait --timeout 240 $c", "description": "fan out again"}),
            ),
            Reply::tool("bash", json!({"command": "sleep 120", "description": "work long"})),
        ],
        vec![],
    )
    .await
    .unwrap();
    let source = source_repo();
    inspect_tests::client::register_repo(&stack.base_url, "demo", source.path())
        .await
        .unwrap();
    let r = inspect_tests::client::send_as(
        "ann",
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "local", "repoName": "demo", "title": "Parent"})),
    )
    .await
    .unwrap();
    let parent = r.body["sessionId"].as_str().unwrap().to_owned();
    inspect_tests::client::send_as(
        "ann",
        Method::POST,
        &stack.url(&format!("/sessions/{parent}/prompt")),
        Some(json!({"content": "split the work in two"})),
    )
    .await
    .unwrap();
    let events = inspect_tests::client::events_until(
        &stack.base_url,
        &parent,
        "execution_complete,tool_call",
        "execution_complete",
        300,
    )
    .await
    .unwrap_or_else(|e| panic!("the parent never finished: {e}\n{}", host.sandbox_logs()));
    let done = events
        .iter()
        .find(|e| e["type"] == "execution_complete")
        .unwrap();
    assert_eq!(done["success"], true, "{events:?}\n{}", host.sandbox_logs());
    let output = events
        .iter()
        .filter(|e| e["type"] == "tool_call")
        .filter_map(|e| e["output"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(output.matches(": completed").count(), 2, "{output}");
    assert_eq!(
        output.matches("last output: Child part done.").count(),
        2,
        "{output}"
    );

    // The parent's page lists both, done; each child is its own session, for ann, one
    // level deep, linked to its parent.
    let children = get(&stack.url(&format!("/sessions/{parent}/children")))
        .await
        .unwrap();
    assert_eq!(children.status, 200, "{}", children.body);
    let list: Vec<Value> = children.body["children"].as_array().cloned().unwrap();
    assert_eq!(list.len(), 2, "{}", children.body);
    let titles: Vec<&str> = list.iter().map(|c| c["title"].as_str().unwrap()).collect();
    assert_eq!(titles, vec!["Child A", "Child B"]);
    for c in &list {
        assert_eq!(c["state"], "completed", "{c}");
        let id = c["sessionId"].as_str().unwrap();
        let s = get(&stack.url(&format!("/sessions/{id}"))).await.unwrap();
        assert_eq!(s.body["parentSessionId"], parent.as_str(), "{}", s.body);
        assert_eq!(s.body["depth"], 1);
        assert_eq!(
            s.body["createdBy"], "local:ann",
            "a child acts for the parent's prompter"
        );
        assert_eq!(s.body["repositories"][0]["name"], "demo");
    }
    // What a person sees: the parent's page lists them, a child's page links its parent.
    inspect_tests::browser::run_script(
        "children.mjs",
        &stack.base_url,
        &inspect_tests::browser::artifacts("children"),
        &[("PARENT_ID", parent.clone())],
    );

    // Stopping the parent stops its running children.
    inspect_tests::client::send_as(
        "ann",
        Method::POST,
        &stack.url(&format!("/sessions/{parent}/prompt")),
        Some(json!({"content": "one more, long"})),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    let child_c = loop {
        let list = get(&stack.url(&format!("/sessions/{parent}/children")))
            .await
            .unwrap();
        let c = list.body["children"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["title"] == "Child C").cloned());
        if let Some(c) = c {
            let id = c["sessionId"].as_str().unwrap().to_owned();
            let tools = get(&stack.url(&format!("/sessions/{id}/events?type=tool_call")))
                .await
                .unwrap();
            if tools.body["events"]
                .as_array()
                .is_some_and(|e| !e.is_empty())
            {
                break id;
            }
        }
        assert!(
            Instant::now() < deadline,
            "child C never started working\n{}",
            host.sandbox_logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    inspect_tests::client::send_as(
        "ann",
        Method::POST,
        &stack.url(&format!("/sessions/{parent}/stop")),
        None,
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = get(&stack.url(&format!("/sessions/{parent}/children")))
            .await
            .unwrap();
        let c = list.body["children"]
            .as_array()
            .and_then(|l| {
                l.iter()
                    .find(|c| c["sessionId"] == child_c.as_str())
                    .cloned()
            })
            .unwrap();
        if c["state"] == "failed" {
            assert_eq!(c["error"], "stopped", "{c}");
            break;
        }
        assert!(Instant::now() < deadline, "the child kept running: {c}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A person cannot make a child session through the public route.
    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"parentSessionId": parent, "depth": 5})),
    )
    .await
    .unwrap();
    let s = get(&stack.url(&format!(
        "/sessions/{}",
        r.body["sessionId"].as_str().unwrap()
    )))
    .await
    .unwrap();
    assert!(
        s.body["parentSessionId"].is_null() && s.body["depth"] == 0,
        "{}",
        s.body
    );
    // Without the parent sandbox's credentials nothing is made.
    let r = reqwest::Client::new()
        .post(stack.url(&format!("/sessions/{parent}/children")))
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(model.remaining(), 0);
}
