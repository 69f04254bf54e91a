//! The Worker's first checks through the real runtime: `wrangler dev` on workerd.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::client::{get, send};
use inspect_tests::Stack;

#[tokio::test]
async fn health_reports_version_d1_and_durable_object() {
    let stack = Stack::start().await.unwrap();
    let reply = get(&stack.url("/health")).await.unwrap();
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["status"], "ok");
    assert_eq!(reply.body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(reply.body["d1"]["ok"], true, "{:?}", reply.body);
    assert_eq!(reply.body["durableObject"]["ok"], true, "{:?}", reply.body);
}

#[tokio::test]
async fn unknown_route_is_a_json_404_and_wrong_method_a_405() {
    let stack = Stack::start().await.unwrap();
    let reply = get(&stack.url("/no/such/route")).await.unwrap();
    assert_eq!(reply.status, 404);
    assert_eq!(reply.body["error"]["code"], "not_found");
    assert!(reply.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/no/such/route"));

    let reply = send(reqwest::Method::DELETE, &stack.url("/health"), None)
        .await
        .unwrap();
    assert_eq!(reply.status, 405);
    assert_eq!(reply.body["error"]["code"], "method_not_allowed");
}

#[tokio::test]
async fn state_survives_a_restart_on_the_same_directory() {
    let mut stack = Stack::start().await.unwrap();
    let before = get(&stack.url("/health")).await.unwrap();
    assert_eq!(before.status, 200);
    stack.restart().await.unwrap();
    let after = get(&stack.url("/health")).await.unwrap();
    assert_eq!(after.status, 200, "{:?}", after.body);
}

#[tokio::test]
async fn browser_navigation_gets_the_web_app() {
    let stack = Stack::start().await.unwrap();
    let resp = reqwest::Client::new()
        .get(stack.url("/some/client/route"))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.contains("<title>Open-Inspect</title>"), "{text}");
}
