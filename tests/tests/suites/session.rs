//! The session through the real runtime: REST, the client WebSocket, multiplayer,
//! reconnect catch-up, restarts, and bad input.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::capture_provider::CaptureProvider;
use inspect_tests::client::{
    create_session, get, prompted_repo_session, send, send_as, Closed, WsClient,
};
use inspect_tests::repo::source_repo;
use inspect_tests::{Stack, StackOptions};
use reqwest::Method;
use serde_json::{json, Value};

fn seqs(events: &Value) -> Vec<i64> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn rest_lifecycle_of_a_session() {
    // Sandboxes are asked of a provider that only takes note (no sandbox ever connects);
    // registration is checked by the real supervisor.
    let provider = CaptureProvider::start().await.unwrap();
    let mut options = StackOptions::local();
    options.vars = provider.worker_vars();
    let stack = Stack::start_with(options).await.unwrap();
    let base = &stack.base_url;
    let sources = [source_repo(), source_repo()];
    for (name, dir) in ["api", "web"].iter().zip(&sources) {
        let r = send(
            Method::POST,
            &stack.url("/repos"),
            Some(json!({"owner": "acme", "name": name, "path": dir.path().to_string_lossy()})),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(r.body["defaultBranch"], "main", "{}", r.body);
    }
    // Registration refuses what no sandbox could clone, and says why.
    let empty = tempfile::tempdir().unwrap();
    let uninit = tempfile::tempdir().unwrap();
    std::process::Command::new("git")
        .args(["init", "--quiet"])
        .current_dir(uninit.path())
        .status()
        .unwrap();
    let inside = sources[0].path().join("sub");
    std::fs::create_dir_all(&inside).unwrap();
    for (path, why) in [
        ("/etc".to_owned(), "is not a git repository"),
        (
            empty.path().to_string_lossy().into_owned(),
            "is not a git repository",
        ),
        (
            uninit.path().to_string_lossy().into_owned(),
            "without commits",
        ),
        ("/nonexistent/repo".to_owned(), "is not a directory"),
        (
            inside.to_string_lossy().into_owned(),
            "is inside the git repository",
        ),
    ] {
        let r = send(
            Method::POST,
            &stack.url("/repos"),
            Some(json!({"name": "bad", "path": path})),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(
            r.body["error"]["message"].as_str().unwrap().contains(why),
            "{path}: {}",
            r.body
        );
    }
    let listed = get(&stack.url("/repos")).await.unwrap();
    assert_eq!(listed.body["repositories"].as_array().unwrap().len(), 2);
    // Unknown repositories, and clone sources from a client, are not taken.
    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "acme", "repoName": "nope"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400);
    let id = create_session(
        base,
        "ann",
        json!({"repositories": [{"owner": "acme", "name": "api", "branch": "main", "source": "/etc/not-this"}, {"owner": "acme", "name": "web"}], "title": "Fix login"}),
    )
    .await
    .unwrap();

    let s = get(&stack.url(&format!("/sessions/{id}"))).await.unwrap();
    assert_eq!(s.status, 200, "{}", s.body);
    assert_eq!(s.body["status"], "created");
    assert_eq!(s.body["repoName"], "api");
    assert_eq!(s.body["repositories"].as_array().unwrap().len(), 2);
    assert_eq!(s.body["title"], "Fix login");
    assert_eq!(
        s.body["repositories"][0]["source"],
        sources[0].path().to_string_lossy().as_ref()
    );

    // A prompt makes it active and lands on the timeline, attributed to its author.
    let p = send_as(
        "ann",
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "hello", "clientRequestId": "r1"})),
    )
    .await
    .unwrap();
    assert_eq!(p.status, 200, "{}", p.body);
    assert_eq!(p.body["position"], 1);
    let again = send_as(
        "ann",
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "hello", "clientRequestId": "r1"})),
    )
    .await
    .unwrap();
    assert_eq!(
        again.body["messageId"], p.body["messageId"],
        "same clientRequestId, same prompt"
    );
    let clash = send_as(
        "ann",
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "other", "clientRequestId": "r1"})),
    )
    .await
    .unwrap();
    assert_eq!(clash.status, 409);

    let events = get(&stack.url(&format!("/sessions/{id}/events")))
        .await
        .unwrap();
    // The timeline also records the sandbox being asked for (this stack has no provider);
    // the prompt itself is there once.
    let list: Vec<&Value> = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "user_message")
        .collect();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["content"], "hello");
    assert_eq!(list[0]["author"]["name"], "ann");
    assert_eq!(list[0]["messageId"], p.body["messageId"]);

    let msgs = get(&stack.url(&format!("/sessions/{id}/messages")))
        .await
        .unwrap();
    assert_eq!(msgs.body["messages"][0]["status"], "pending");
    let s = get(&stack.url(&format!("/sessions/{id}"))).await.unwrap();
    assert_eq!(s.body["status"], "active");

    // Title, archive (refuses prompts), list filters, unarchive.
    let t = send(
        Method::PATCH,
        &stack.url(&format!("/sessions/{id}/title")),
        Some(json!({"title": "Renamed"})),
    )
    .await
    .unwrap();
    assert_eq!(t.body["title"], "Renamed");
    let a = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/archive")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(a.body["status"], "archived");
    let refused = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "x"})),
    )
    .await
    .unwrap();
    assert_eq!(refused.status, 409);
    assert_eq!(refused.body["error"]["code"], "conflict");

    let other = create_session(base, "bob", json!({"repoOwner": "acme", "repoName": "web"}))
        .await
        .unwrap();
    let default_list = get(&stack.url("/sessions")).await.unwrap();
    let ids: Vec<&str> = default_list.body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![other.as_str()],
        "archived sessions are hidden by default"
    );
    let archived = get(&stack.url("/sessions?status=archived")).await.unwrap();
    assert_eq!(archived.body["sessions"][0]["id"], id.as_str());
    assert_eq!(archived.body["sessions"][0]["title"], "Renamed");
    let by_repo = get(&stack.url("/sessions?status=all&repo=acme/web"))
        .await
        .unwrap();
    assert_eq!(
        by_repo.body["sessions"].as_array().unwrap().len(),
        2,
        "{}",
        by_repo.body
    );
    let mine = send_as(
        "bob",
        Method::GET,
        &stack.url("/sessions?status=all&mine=true"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(mine.body["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(mine.body["sessions"][0]["createdByName"], "bob");

    let u = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/unarchive")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(u.body["status"], "active");
    let parts = get(&stack.url(&format!("/sessions/{id}/participants")))
        .await
        .unwrap();
    assert_eq!(parts.body["participants"][0]["name"], "ann");
    let arts = get(&stack.url(&format!("/sessions/{id}/artifacts")))
        .await
        .unwrap();
    assert_eq!(arts.body["artifacts"], json!([]));

    // Delete: gone from the object and the index.
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
    let all = get(&stack.url("/sessions?status=all")).await.unwrap();
    assert_eq!(all.body["sessions"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn list_pages_newest_first() {
    let stack = Stack::start().await.unwrap();
    let mut made = vec![];
    for i in 0..7 {
        made.push(
            create_session(&stack.base_url, "ann", json!({"title": format!("s{i}")}))
                .await
                .unwrap(),
        );
    }
    let mut seen = vec![];
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => stack.url(&format!("/sessions?limit=3&cursor={c}")),
            None => stack.url("/sessions?limit=3"),
        };
        let page = get(&url).await.unwrap();
        for s in page.body["sessions"].as_array().unwrap() {
            seen.push(s["id"].as_str().unwrap().to_owned());
        }
        if page.body["hasMore"] != true {
            break;
        }
        cursor = Some(page.body["cursor"].as_str().unwrap().to_owned());
    }
    made.reverse();
    assert_eq!(seen, made);
}

#[tokio::test]
async fn bad_rest_input_gets_clear_errors() {
    let stack = Stack::start().await.unwrap();
    let c = reqwest::Client::new();
    let r = c
        .post(stack.url("/sessions"))
        .header("Content-Type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_request");
    let r = send(Method::POST, &stack.url("/sessions"), Some(json!({"repositories": (0..11).map(|i| json!({"owner": "o", "name": format!("r{i}")})).collect::<Vec<_>>()}))).await.unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(
        get(&stack.url("/sessions/0123456789abcdef0123456789abcdef"))
            .await
            .unwrap()
            .status,
        404
    );
    assert_eq!(
        get(&stack.url("/sessions?limit=0")).await.unwrap().status,
        400
    );

    let id = create_session(&stack.base_url, "ann", json!({}))
        .await
        .unwrap();
    let other = create_session(&stack.base_url, "ann", json!({}))
        .await
        .unwrap();
    let big = "x".repeat(64 * 1024 + 1);
    let r = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": big})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 413);
    let r = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": ""})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400);
    // A cursor from another session is refused.
    send(
        Method::POST,
        &stack.url(&format!("/sessions/{other}/prompt")),
        Some(json!({"content": "hi"})),
    )
    .await
    .unwrap();
    let page = get(&stack.url(&format!("/sessions/{other}/events")))
        .await
        .unwrap();
    let foreign = page.body["cursor"].as_str().unwrap();
    let r = get(&stack.url(&format!("/sessions/{id}/events?cursor={foreign}")))
        .await
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    // Nothing was stored by any of that.
    let msgs = get(&stack.url(&format!("/sessions/{id}/messages")))
        .await
        .unwrap();
    assert_eq!(msgs.body["messages"], json!([]));
}

#[tokio::test]
async fn outside_local_mode_every_session_route_refuses() {
    let stack = Stack::start_with(Default::default()).await.unwrap();
    for (m, p) in [
        (Method::GET, "/sessions"),
        (Method::POST, "/sessions"),
        (Method::GET, "/sessions/abc"),
        (Method::POST, "/sessions/abc/ws-token"),
    ] {
        let r = send(m.clone(), &stack.url(p), None).await.unwrap();
        assert_eq!(r.status, 401, "{m} {p}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "unauthorized");
    }
    assert_eq!(get(&stack.url("/health")).await.unwrap().status, 200);
}

#[tokio::test]
async fn multiplayer_presence_prompts_in_order_and_catch_up() {
    let stack = Stack::start().await.unwrap();
    let (base, wsb) = (stack.base_url.clone(), stack.ws_url(""));
    let id = create_session(&base, "ann", json!({})).await.unwrap();
    let (mut ann, sub) = WsClient::join(&base, &wsb, &id, "ann").await.unwrap();
    assert_eq!(sub["session"]["id"], id.as_str());
    assert_eq!(sub["participant"]["name"], "ann");
    let (mut bob, _) = WsClient::join(&base, &wsb, &id, "bob").await.unwrap();
    let seen = ann.recv_type("presence_update").await.unwrap();
    assert_eq!(seen["participants"][0]["name"], "bob");
    let sync = bob.recv_type("presence_sync").await.unwrap();
    assert_eq!(sync["participants"].as_array().unwrap().len(), 2);

    // Both send prompts; both see every user_message in one order.
    for i in 0..4 {
        let (who, ws) = if i % 2 == 0 {
            ("ann", &mut ann)
        } else {
            ("bob", &mut bob)
        };
        ws.send(json!({"type": "prompt", "content": format!("{who} {i}"), "clientRequestId": format!("c{i}")})).await.unwrap();
        let queued = ws.recv_type("prompt_queued").await.unwrap();
        assert_eq!(queued["clientRequestId"], format!("c{i}"));
    }
    let mut orders = vec![];
    for ws in [&mut ann, &mut bob] {
        let mut order = vec![];
        while order.len() < 4 {
            let m = ws.recv_type("sandbox_event").await.unwrap();
            if m["event"]["type"] == "user_message" {
                order.push((
                    m["event"]["seq"].as_i64().unwrap(),
                    m["event"]["content"].as_str().unwrap().to_owned(),
                ));
            }
        }
        orders.push(order);
    }
    assert_eq!(orders[0], orders[1]);
    assert_eq!(
        orders[0].iter().map(|o| o.1.as_str()).collect::<Vec<_>>(),
        vec!["ann 0", "bob 1", "ann 2", "bob 3"]
    );

    // Bob drops; ann sees him leave. While he is away ann sends more.
    bob.close().await;
    let left = ann.recv_type("presence_leave").await.unwrap();
    assert_eq!(left["userId"], "local:bob");
    ann.send(json!({"type": "prompt", "content": "while bob was away"}))
        .await
        .unwrap();
    ann.recv_type("prompt_queued").await.unwrap();

    // Bob reconnects and catches up: everything once, in order.
    let (mut bob, sub) = WsClient::join(&base, &wsb, &id, "bob").await.unwrap();
    let timeline = &sub["timeline"]["events"];
    let contents: Vec<&str> = timeline
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "user_message")
        .map(|e| e["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        vec!["ann 0", "bob 1", "ann 2", "bob 3", "while bob was away"]
    );
    let s = seqs(timeline);
    assert!(s.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(sub["promptQueue"].as_array().unwrap().len(), 5);

    // Presence status changes reach the others.
    bob.send(json!({"type": "presence", "status": "idle"}))
        .await
        .unwrap();
    loop {
        let upd = ann.recv_type("presence_update").await.unwrap();
        if upd["participants"][0]["name"] == "bob" && upd["participants"][0]["status"] == "idle" {
            break;
        }
    }
    // Cancel a queued prompt: everyone sees it.
    let first = sub["promptQueue"][4]["messageId"]
        .as_str()
        .unwrap()
        .to_owned();
    bob.send(json!({"type": "cancel_prompt", "messageId": first}))
        .await
        .unwrap();
    let c = ann.recv_type("prompt_cancelled").await.unwrap();
    assert_eq!(c["messageId"], first.as_str());
    // Ping works with and without the runtime's auto-response.
    ann.send(json!({"type": "ping"})).await.unwrap();
    ann.recv_type("pong").await.unwrap();
}

#[tokio::test]
async fn history_pages_back_over_the_socket_without_gaps() {
    // 300 prompts from one person in seconds: past any sane rate, so unthrottled.
    let stack = Stack::start_with(StackOptions::unthrottled())
        .await
        .unwrap();
    let (base, wsb) = (stack.base_url.clone(), stack.ws_url(""));
    let id = create_session(&base, "ann", json!({})).await.unwrap();
    // 10 unfinished prompts at most, so cancel as we go to build a long timeline:
    // each round adds a user_message and a prompt_cancelled.
    let (mut ann, _) = WsClient::join(&base, &wsb, &id, "ann").await.unwrap();
    for i in 0..300 {
        ann.send(json!({"type": "prompt", "content": format!("p{i}")}))
            .await
            .unwrap();
        let q = ann.recv_type("prompt_queued").await.unwrap();
        ann.send(json!({"type": "cancel_prompt", "messageId": q["messageId"]}))
            .await
            .unwrap();
        ann.recv_type("prompt_cancelled").await.unwrap();
        ann.clear();
    }
    let (mut bob, sub) = WsClient::join(&base, &wsb, &id, "bob").await.unwrap();
    let mut all = seqs(&sub["timeline"]["events"]);
    assert_eq!(all.len(), 500);
    let mut cursor = sub["timeline"]["cursor"].clone();
    while sub["timeline"]["hasMore"] == true && !cursor.is_null() {
        bob.send(json!({"type": "fetch_history", "cursor": cursor, "limit": 200}))
            .await
            .unwrap();
        let page = bob.recv_type("history_page").await.unwrap();
        let mut older = seqs(&page["events"]);
        older.extend(all);
        all = older;
        cursor = if page["hasMore"] == true {
            page["cursor"].clone()
        } else {
            Value::Null
        };
    }
    // 300 prompts and 300 cancellations, plus the record of the one spawn attempted
    // (this stack has no provider; failed spawns cool down rather than repeat).
    assert!((600..=604).contains(&all.len()), "{}", all.len());
    assert!(all.windows(2).all(|w| w[0] < w[1]));
    // And REST readers walk forward through the same timeline.
    let mut forward = vec![];
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => stack.url(&format!("/sessions/{id}/events?limit=500&cursor={c}")),
            None => stack.url(&format!("/sessions/{id}/events?limit=500")),
        };
        let page = get(&url).await.unwrap();
        forward.extend(seqs(&page.body["events"]));
        cursor = page.body["cursor"].as_str().map(str::to_owned);
        if page.body["hasMore"] != true {
            break;
        }
    }
    assert_eq!(forward, all);
}

#[tokio::test]
async fn subscribe_rules_close_with_the_documented_codes() {
    let stack = Stack::start().await.unwrap();
    let (base, wsb) = (stack.base_url.clone(), stack.ws_url(""));
    let id = create_session(&base, "ann", json!({})).await.unwrap();
    let other = create_session(&base, "ann", json!({})).await.unwrap();

    let mut ws = WsClient::connect(&format!("{wsb}/sessions/{id}/ws"))
        .await
        .unwrap();
    ws.send(json!({"type": "subscribe", "token": "not-a-token", "clientId": "x"}))
        .await
        .unwrap();
    assert_eq!(ws.closed_within(10).await.unwrap(), Closed::Code(4001));

    // A token of another session is refused.
    let t = send(
        Method::POST,
        &stack.url(&format!("/sessions/{other}/ws-token")),
        None,
    )
    .await
    .unwrap();
    let mut ws = WsClient::connect(&format!("{wsb}/sessions/{id}/ws"))
        .await
        .unwrap();
    ws.send(json!({"type": "subscribe", "token": t.body["token"], "clientId": "x"}))
        .await
        .unwrap();
    assert_eq!(ws.closed_within(10).await.unwrap(), Closed::Code(4001));

    let (mut ws, _) = WsClient::join(&base, &wsb, &id, "ann").await.unwrap();
    let t = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/ws-token")),
        None,
    )
    .await
    .unwrap();
    ws.send(json!({"type": "subscribe", "token": t.body["token"], "clientId": "x"}))
        .await
        .unwrap();
    assert_eq!(ws.closed_within(10).await.unwrap(), Closed::Code(4003));

    // Unsubscribed sockets may not prompt, and are closed after 30 s.
    let mut idle = WsClient::connect(&format!("{wsb}/sessions/{id}/ws"))
        .await
        .unwrap();
    idle.send(json!({"type": "prompt", "content": "sneaky"}))
        .await
        .unwrap();
    let e = idle.recv().await.unwrap();
    assert_eq!(e["type"], "error");
    assert_eq!(e["code"], "unauthorized");
    assert_eq!(idle.closed_within(45).await.unwrap(), Closed::Code(4008));
    let msgs = get(&stack.url(&format!("/sessions/{id}/messages")))
        .await
        .unwrap();
    assert_eq!(msgs.body["messages"], json!([]));
}

#[tokio::test]
async fn session_and_queue_survive_a_restart() {
    let mut stack = Stack::start().await.unwrap();
    let id = create_session(&stack.base_url, "ann", json!({"title": "durable"}))
        .await
        .unwrap();
    for i in 0..3 {
        let r = send(
            Method::POST,
            &stack.url(&format!("/sessions/{id}/prompt")),
            Some(json!({"content": format!("q{i}")})),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200);
    }
    let before = get(&stack.url(&format!("/sessions/{id}/events")))
        .await
        .unwrap();
    stack.restart().await.unwrap();
    let after = get(&stack.url(&format!("/sessions/{id}/events")))
        .await
        .unwrap();
    assert_eq!(before.body["events"], after.body["events"]);
    let (base, wsb) = (stack.base_url.clone(), stack.ws_url(""));
    let (_ws, sub) = WsClient::join(&base, &wsb, &id, "ann").await.unwrap();
    let queue: Vec<&str> = sub["promptQueue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["content"].as_str().unwrap())
        .collect();
    assert_eq!(queue, vec!["q0", "q1", "q2"]);
    assert_eq!(sub["session"]["title"], "durable");
    let list = get(&stack.url("/sessions")).await.unwrap();
    assert_eq!(list.body["sessions"][0]["messageCount"], 3, "{}", list.body);
}

#[tokio::test]
async fn sockets_outlive_an_idle_object() {
    // Long enough for the runtime to evict an idle object whose sockets hibernate; the
    // sockets stay open and the rebuilt object still knows who is subscribed.
    let stack = Stack::start().await.unwrap();
    let (base, wsb) = (stack.base_url.clone(), stack.ws_url(""));
    let id = create_session(&base, "ann", json!({})).await.unwrap();
    let (mut ann, _) = WsClient::join(&base, &wsb, &id, "ann").await.unwrap();
    let (mut bob, _) = WsClient::join(&base, &wsb, &id, "bob").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(15)).await;
    ann.clear();
    bob.send(json!({"type": "prompt", "content": "after a nap"}))
        .await
        .unwrap();
    let e = ann.recv_type("sandbox_event").await.unwrap();
    assert_eq!(e["event"]["content"], "after a nap");
}

#[tokio::test]
async fn streamed_parts_are_told_at_once_acknowledged_once_stored_and_kept_as_told() {
    // A played sandbox streams text and a tool call's states, one part per frame, each
    // with an ackId. Watchers see every version at once; the sandbox is acknowledged for
    // each part's newest version once the parts are stored; the timeline holds each part once, in its last
    // told version with the sequence and id it was told with, also after a restart.
    use futures::SinkExt;
    use inspect_tests::capture_provider::{connect_sandbox, next_command};
    use std::collections::{BTreeSet, HashMap};
    use tokio_tungstenite::tungstenite::Message;
    let mut provider = CaptureProvider::start().await.unwrap();
    let mut options = StackOptions::local();
    options.vars = provider.worker_vars();
    let mut stack = Stack::start_with(options).await.unwrap();
    let (base, wsb) = (stack.base_url.clone(), stack.ws_url(""));
    let id = create_session(&base, "ann", json!({"title": "streaming"}))
        .await
        .unwrap();
    let (mut watcher, _) = WsClient::join(&base, &wsb, &id, "ann").await.unwrap();
    let r = send_as(
        "ann",
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "stream something"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let spawn = provider.next_spawn().await.unwrap();
    let mut sb = connect_sandbox(&stack, &spawn).await.unwrap();
    let frame = |mut v: Value| {
        v["sandboxId"] = json!(spawn.sandbox_id);
        v["timestamp"] = json!(0);
        v
    };
    sb.send(Message::text(frame(json!({"type": "ready"})).to_string()))
        .await
        .unwrap();
    let prompt = next_command(&mut sb, "prompt").await.unwrap();
    let mid = prompt["messageId"].as_str().unwrap().to_owned();
    let sent = [
        json!({"type": "token", "messageId": mid, "partId": "p1", "content": "Look", "ackId": "a1"}),
        json!({"type": "token", "messageId": mid, "partId": "p1", "content": "Looking at", "ackId": "a2"}),
        json!({"type": "tool_call", "messageId": mid, "tool": "read", "callId": "c1", "status": "running", "args": {"filePath": "a.rs"}, "ackId": "a3"}),
        json!({"type": "token", "messageId": mid, "partId": "p1", "content": "Looking at the code", "ackId": "a4"}),
        json!({"type": "tool_call", "messageId": mid, "tool": "read", "callId": "c1", "status": "completed", "args": {"filePath": "a.rs"}, "output": "fn main() {}", "ackId": "a5"}),
        json!({"type": "token", "messageId": mid, "partId": "p2", "content": "Done.", "ackId": "a6"}),
    ];
    for e in &sent {
        sb.send(Message::text(frame(e.clone()).to_string()))
            .await
            .unwrap();
    }
    // Every version is told, in order, with rising sequences.
    let mut told = Vec::new();
    while told.len() < sent.len() {
        let e = watcher.recv_type("sandbox_event").await.unwrap()["event"].clone();
        if e["type"] == "token" || e["type"] == "tool_call" {
            told.push(e);
        }
    }
    for (t, s) in told.iter().zip(&sent) {
        assert_eq!(t["type"], s["type"], "{t}");
        assert_eq!(t["content"], s["content"], "{t}");
        assert_eq!(t["status"], s["status"], "{t}");
    }
    let told_seqs: Vec<i64> = told.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(told_seqs.windows(2).all(|w| w[0] < w[1]), "{told_seqs:?}");
    // Each part's newest version is acknowledged once the parts are stored (the supervisor
    // keeps only that one waiting): a4, a5, a6, and no older one.
    let want: BTreeSet<String> = ["a4", "a5", "a6"].map(String::from).into();
    let mut acked = BTreeSet::new();
    while !want.is_subset(&acked) {
        let c = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            loop {
                let msg = futures::StreamExt::next(&mut sb).await.unwrap().unwrap();
                if let Message::Text(t) = msg {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if v["type"] == "ack" || v["type"] == "acks" {
                        return v;
                    }
                }
            }
        })
        .await
        .expect("acknowledgements within 30 s");
        match c["type"].as_str() {
            Some("acks") => acked.extend(
                c["ackIds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_owned()),
            ),
            _ => {
                acked.insert(c["ackId"].as_str().unwrap().to_owned());
            }
        }
    }
    assert_eq!(acked, want);
    // The newest told version of each part, with the sequence and id it was told with.
    let mut last: HashMap<String, &Value> = HashMap::new();
    for t in &told {
        let key = if t["type"] == "token" {
            format!("token:{}", t["partId"])
        } else {
            format!("tool:{}", t["callId"])
        };
        last.insert(key, t);
    }
    let stored = |body: &Value| -> Vec<Value> {
        body["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "token" || e["type"] == "tool_call")
            .cloned()
            .collect()
    };
    let events = get(&stack.url(&format!("/sessions/{id}/events")))
        .await
        .unwrap();
    let parts = stored(&events.body);
    assert_eq!(parts.len(), 3, "{parts:?}");
    for p in &parts {
        let key = if p["type"] == "token" {
            format!("token:{}", p["partId"])
        } else {
            format!("tool:{}", p["callId"])
        };
        let t = last[&key];
        assert!(t["id"].is_string() && t["seq"].is_i64(), "{t}");
        assert_eq!(p["seq"], t["seq"], "{key}: {p} vs {t}");
        assert_eq!(p["id"], t["id"], "{key}: {p} vs {t}");
        assert_eq!(p["content"], t["content"], "{key}");
        assert_eq!(p["status"], t["status"], "{key}");
    }
    stack.restart().await.unwrap();
    let after = get(&stack.url(&format!("/sessions/{id}/events")))
        .await
        .unwrap();
    assert_eq!(stored(&after.body), parts);
}

/// Many sessions ask for one brokered grant's token at once (each sandbox's proxy does at
/// its first model call): the grant is refreshed once, every sandbox gets that token, and
/// the grant stays active — against a token endpoint that rotates refresh tokens and
/// revokes the chain when a rotated one is presented again (RFC 9700 §4.14.2).
#[tokio::test]
async fn sessions_refreshing_one_grant_at_once_share_one_refresh() {
    use inspect_tests::fakes::oauth::FakeOAuth;
    let oauth = FakeOAuth::start("inspect-client", "rt-original-0123456789", 3600)
        .await
        .unwrap();
    let mut provider = CaptureProvider::start().await.unwrap();
    let mut options = StackOptions::local();
    options.vars = provider.worker_vars();
    let stack = Stack::start_with(options).await.unwrap();
    let r = send(
        Method::PUT,
        &stack.url("/model-grants"),
        Some(json!({"provider": "anthropic", "tokenUrl": oauth.token_url, "clientId": "inspect-client",
                    "refreshToken": "rt-original-0123456789"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let mut spawned = Vec::new();
    for i in 0..6 {
        let id = create_session(
            &stack.base_url,
            "ann",
            json!({"title": format!("grant {i}"), "agent": "claude-code"}),
        )
        .await
        .unwrap();
        let r = send_as(
            "ann",
            Method::POST,
            &stack.url(&format!("/sessions/{id}/prompt")),
            Some(json!({"content": "hello"})),
        )
        .await
        .unwrap();
        assert!(r.status < 300, "{}", r.body);
        let spawn = provider.next_spawn().await.unwrap();
        assert_eq!(spawn.managed_grants.len(), 1, "{:?}", spawn.managed_grants);
        spawned.push(spawn);
    }
    let http = reqwest::Client::new();
    let asks = spawned.iter().map(|s| {
        let http = http.clone();
        let url = stack.url(&format!("/sessions/{}/model-token", s.session_id));
        let body = json!({"grantId": s.managed_grants[0].id});
        async move {
            let resp = http
                .post(&url)
                .bearer_auth(&s.sandbox_token)
                .header("X-Sandbox-ID", &s.sandbox_id)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or_default())
        }
    });
    let answers = futures::future::join_all(asks).await;
    let tokens: std::collections::HashSet<String> = answers
        .iter()
        .map(|(status, body)| {
            assert_eq!(*status, 200, "{body}");
            body["accessToken"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(tokens.len(), 1, "one token for all: {answers:?}");
    assert_eq!(oauth.refreshed(), 1, "refused: {:?}", oauth.refused());
    assert!(oauth.refused().is_empty(), "{:?}", oauth.refused());
    let listed = send(Method::GET, &stack.url("/model-grants"), None)
        .await
        .unwrap();
    assert_eq!(
        listed.body["grants"][0]["status"], "active",
        "{}",
        listed.body
    );
}

/// A prompt that wants a sandbox has its index row written while the sandbox is on its way
/// (the spawn's own D1 batch carries it, before the provider is asked): the list shows the
/// prompt though the provider has not answered (it answers after 15 s).
#[tokio::test]
async fn a_prompt_is_listed_while_its_sandbox_is_on_its_way() {
    let provider = CaptureProvider::start_with(None, std::time::Duration::from_secs(15))
        .await
        .unwrap();
    let (stack, _repo) = provider.stack_with_repo("demo").await.unwrap();
    let id = prompted_repo_session(&stack.base_url, ("local", "demo"), "look around")
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let list = get(&stack.url("/sessions")).await.unwrap();
        let row = &list.body["sessions"][0];
        if row["messageCount"] == 1 {
            assert_eq!(row["id"], id.as_str(), "{row}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not listed with its prompt: {row}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
