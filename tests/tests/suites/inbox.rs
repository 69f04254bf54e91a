//! The inbox through the real runtime: a web-started prompt that ends reaches its author's
//! inbox and their open tab's socket at once; a prompt naming `@bob` reaches bob, who has
//! no tab open, as a Web Push the fake push service checks (VAPID JWT, RFC 8291 payload)
//! and decrypts; a burst folds into one more notification; a subscription the push service
//! dropped (410) is removed; marking read is the person's own; bad subscriptions and a
//! socket opened from another site are refused.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{as_person, WsClient};
use inspect_tests::fakes::github::{Account, FakeGitHub};
use inspect_tests::fakes::model::Reply;
use inspect_tests::fakes::push::{vapid_keys, FakePush};
use inspect_tests::repo::source_repo;
use reqwest::Method;
use serde_json::json;
use std::time::{Duration, Instant};

fn accounts() -> Vec<Account> {
    ["alice", "bob"]
        .into_iter()
        .enumerate()
        .map(|(i, login)| Account {
            id: 1001 + i as i64,
            login: login.into(),
            emails: vec![(format!("{login}@example.com"), true)],
            orgs: vec![],
        })
        .collect()
}

async fn eventually<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_inbox_tells_people_live_and_by_web_push() {
    let gh = FakeGitHub::start(accounts()).await.unwrap();
    let push = FakePush::start().await.unwrap();
    let (public, private) = vapid_keys();
    let mut vars = gh.worker_vars();
    vars.push(("ALLOWED_USERS".into(), "alice,bob".into()));
    vars.push(("VAPID_PUBLIC_KEY".into(), public.clone()));
    vars.push(("VAPID_PRIVATE_KEY".into(), private));
    vars.push(("VAPID_SUBJECT".into(), "mailto:ops@example.com".into()));
    let agent = AgentStack::start(
        vec![
            Reply::text("Tidied. Shall I also update the changelog?"),
            Reply::text("Second."),
            Reply::text("Third."),
            Reply::text("Fourth."),
            Reply::text("Fifth."),
        ],
        vars,
    )
    .await
    .unwrap();
    let stack = &agent.stack;
    let repo = source_repo();
    agent.register_repo("demo", repo.path()).await.unwrap();
    let alice = gh.browser_sign_in(&stack.base_url, "alice").await.unwrap();
    let bob = gh.browser_sign_in(&stack.base_url, "bob").await.unwrap();
    let cookie = |c: &str| format!("inspect_session={c}");

    // Alice's tab listens; a page of another site may not open her socket.
    let refused = WsClient::connect_with(
        &stack.ws_url("/inbox/socket"),
        &[
            ("cookie", &cookie(&alice)),
            ("origin", "https://evil.example"),
        ],
    )
    .await;
    assert!(refused.is_err(), "a cross-site inbox socket was opened");
    let mut tab = WsClient::connect_with(
        &stack.ws_url("/inbox/socket"),
        &[("cookie", &cookie(&alice)), ("origin", &stack.base_url)],
    )
    .await
    .unwrap();
    let hello = tab.recv().await.unwrap();
    assert_eq!(hello, json!({"type": "unread", "unread": 0}));

    // Bob's browser subscribes to Web Push (and closes its tab).
    let (status, key) = as_person(stack, &bob, Method::GET, "/notifications/push-key", None).await;
    assert_eq!(status, 200, "{key}");
    assert_eq!(key["publicKey"], public.as_str());
    let subscription = push.subscribe(&public);
    let path = "/notifications/push-subscriptions";
    let (status, body) =
        as_person(stack, &bob, Method::POST, path, Some(subscription.clone())).await;
    assert_eq!(status, 201, "{body}");
    // Bad subscriptions: another scheme, keys that are no keys, a field only the control
    // plane sets.
    for (bad, why) in [
        (
            json!({"endpoint": "ftp://push.example/x", "keys": subscription["keys"]}),
            "https",
        ),
        (
            json!({"endpoint": subscription["endpoint"], "keys": {"p256dh": "AAAA", "auth": subscription["keys"]["auth"]}}),
            "p256dh",
        ),
        (
            json!({"endpoint": subscription["endpoint"], "keys": {"p256dh": subscription["keys"]["p256dh"], "auth": "AA"}}),
            "auth",
        ),
        (
            json!({"endpoint": subscription["endpoint"], "keys": subscription["keys"], "userId": "github:1001"}),
            "userId",
        ),
    ] {
        let (status, body) = as_person(stack, &bob, Method::POST, path, Some(bad)).await;
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(why),
            "{body}"
        );
    }

    // Alice starts a session from the web and names bob in her prompt.
    let (status, made) = as_person(
        stack,
        &alice,
        Method::POST,
        "/sessions",
        Some(json!({"repoOwner": "local", "repoName": "demo", "title": "Tidy the demo"})),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let id = made["sessionId"].as_str().unwrap().to_owned();
    let prompt = format!("/sessions/{id}/prompt");
    let (status, body) = as_person(
        stack,
        &alice,
        Method::POST,
        &prompt,
        Some(json!({"content": "tidy up, then ask @bob to review"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // Bob: a push, checked and decrypted by the push service.
    let first = eventually(60, "bob's push", || push.delivered().into_iter().next()).await;
    assert_eq!(
        first.payload["title"], "You were mentioned: Tidy the demo",
        "{:?}",
        first
    );
    assert!(first.payload["body"].as_str().unwrap().contains("@bob"));
    assert!(first.payload["url"]
        .as_str()
        .unwrap()
        .ends_with(&format!("/sessions/{id}")));
    assert_eq!(first.claims["sub"], "mailto:ops@example.com");
    assert_eq!(first.claims["aud"], push.base_url.as_str());
    assert!(push.refused().is_empty(), "{:?}", push.refused());
    let (_, bobs) = as_person(stack, &bob, Method::GET, "/inbox", None).await;
    assert_eq!(bobs["unread"], 1, "{bobs}");
    assert_eq!(bobs["items"][0]["kind"], "mention");

    // Alice: her tab hears the prompt's end (a question back to her) at once.
    let told = tab.recv_within(120).await.unwrap();
    assert_eq!(told["type"], "item", "{told}");
    assert_eq!(told["item"]["kind"], "question", "{told}");
    assert_eq!(told["item"]["sessionId"], id.as_str());
    assert_eq!(
        told["item"]["detail"],
        "Tidied. Shall I also update the changelog?"
    );
    assert_eq!(told["unread"], 1);
    assert_eq!(told["notify"], true);
    let item_id = told["item"]["id"].as_str().unwrap().to_owned();
    let (_, page) = as_person(stack, &alice, Method::GET, "/inbox?unread=1", None).await;
    assert_eq!(page["unread"], 1, "{page}");
    assert_eq!(page["items"][0]["id"], item_id.as_str());
    assert!(
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["kind"] != "mention"),
        "her own mention is not hers to hear: {page}"
    );

    // Marking read is the person's own: bob cannot mark alice's, nor name a stranger.
    let read = "/inbox/read";
    let (status, body) = as_person(
        stack,
        &bob,
        Method::POST,
        read,
        Some(json!({"ids": [item_id]})),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = as_person(stack, &alice, Method::POST, read, Some(json!({}))).await;
    assert_eq!(status, 400, "{body}");
    let (_, page) = as_person(stack, &alice, Method::GET, "/inbox?unread=1", None).await;
    assert_eq!(page["unread"], 1, "nothing was marked: {page}");
    // Opening the session marks its items read; her tab hears the count.
    let (status, body) = as_person(
        stack,
        &alice,
        Method::POST,
        read,
        Some(json!({"sessionId": id})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"marked": 1, "unread": 0}));
    let count = tab.recv_within(10).await.unwrap();
    assert_eq!(count, json!({"type": "unread", "unread": 0}));

    // A burst of mentions is one more notification, not one each.
    for n in 0..3 {
        let (status, body) = as_person(
            stack,
            &alice,
            Method::POST,
            &prompt,
            Some(json!({"content": format!("@bob, note {n}")})),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    // The fold's window starts at a push and lasts 10 s: on a loaded machine the burst may
    // straddle a window's edge, so its three mentions come as one notice ("3 updates") or
    // as a single and a notice, or two notices. Whatever the split, every mention is told
    // and fewer pushes go out than there were mentions.
    let told = |title: &str| -> usize {
        title
            .strip_suffix(" updates in 1 sessions")
            .and_then(|n| n.parse().ok())
            .unwrap_or(1)
    };
    let burst = eventually(40, "every mention of the burst told", || {
        let titles: Vec<String> = push
            .delivered()
            .into_iter()
            .skip(1)
            .map(|d| d.payload["title"].as_str().unwrap_or_default().to_owned())
            .collect();
        (titles.iter().map(|t| told(t)).sum::<usize>() >= 3).then_some(titles)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        push.delivered().len(),
        1 + burst.len(),
        "nothing more: {burst:?}"
    );
    assert!(burst.len() < 3, "not one push each: {burst:?}");
    assert!(
        burst.iter().any(|t| t.ends_with("updates in 1 sessions")),
        "{burst:?}"
    );
    let folded = push
        .delivered()
        .into_iter()
        .find(|d| {
            d.payload["title"]
                .as_str()
                .unwrap_or_default()
                .contains("updates in")
        })
        .unwrap();
    assert!(folded.payload["url"].as_str().unwrap().ends_with("/inbox"));
    let (_, bobs) = as_person(stack, &bob, Method::GET, "/inbox", None).await;
    assert_eq!(bobs["unread"], 4, "every mention is an item: {bobs}");

    // The push service drops bob's subscription: the next push removes it.
    push.drop_subscription(subscription["endpoint"].as_str().unwrap());
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (status, body) = as_person(
        stack,
        &alice,
        Method::POST,
        &prompt,
        Some(json!({"content": "one more for @bob"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    eventually(30, "the push to the dropped subscription", || {
        (push.gone_hits() > 0).then_some(())
    })
    .await;
    let endpoint = subscription["endpoint"].as_str().unwrap().to_owned();
    let gone = format!("{path}?endpoint={}", urlencode(&endpoint));
    // The object removes the row right after the 410.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (status, body) = as_person(stack, &bob, Method::DELETE, &gone, None).await;
    assert_eq!(status, 404, "the 410 removed it: {body}");
    assert_eq!(push.gone_hits(), 1, "never tried again");
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
