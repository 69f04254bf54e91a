//! Slack end to end, through the real Worker (wrangler dev), the local sandbox host, the
//! real supervisor and OpenCode, against a fake Slack that follows the Web API, with
//! deliveries signed as Slack signs them and the classifier on the scripted model server:
//! a mention starts one session (its retry none) with an image that reaches the sandbox as
//! a file; the thread gets the link, live progress and the outcome; a reply continues the
//! same session with the messages since as context; an ambiguous request gets the picker
//! and the pick starts the session there. Bad deliveries are refused.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::client::{get, send};
use inspect_tests::fakes::github::FakeGitHub;
use inspect_tests::fakes::model::{FakeModel, Reply};
use inspect_tests::fakes::slack::{envelope, signed, FakeSlack, BOT_USER, SIGNING_SECRET};
use inspect_tests::host::SandboxHost;
use inspect_tests::repo::source_repo;
use inspect_tests::{Stack, StackOptions};
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const CHANNEL: &str = "CENG";

async fn deliver(
    stack: &Stack,
    path: &str,
    body: &Value,
    retry: Option<&str>,
) -> reqwest::Response {
    let (ts, sig, bytes) = signed(body, SIGNING_SECRET);
    let mut req = reqwest::Client::new()
        .post(stack.url(path))
        .header("X-Slack-Request-Timestamp", ts.to_string())
        .header("X-Slack-Signature", sig)
        .header("Content-Type", "application/json")
        .body(bytes);
    if let Some(n) = retry {
        req = req
            .header("X-Slack-Retry-Num", n)
            .header("X-Slack-Retry-Reason", "http_timeout");
    }
    req.send().await.unwrap()
}

/// A person's mention of the bot: stored in the fake Slack and delivered as an
/// `app_mention` event; the message's ts.
async fn mention(
    stack: &Stack,
    slack: &FakeSlack,
    event_id: &str,
    user: &str,
    text: &str,
    thread: Option<&str>,
) -> String {
    let text = format!("<@{BOT_USER}> {text}");
    let ts = slack.human_message(CHANNEL, user, &text, thread);
    let mut event =
        json!({"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": CHANNEL});
    if let Some(t) = thread {
        event["thread_ts"] = json!(t);
    }
    let r = deliver(
        stack,
        "/webhooks/slack/events",
        &envelope(event_id, event),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    ts
}

/// An interaction, form-encoded and signed as Slack sends them.
async fn interact(stack: &Stack, payload: &Value) -> reqwest::Response {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish();
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let sig = inspect_tests::signing::slack(SIGNING_SECRET, ts, body.as_bytes());
    reqwest::Client::new()
        .post(stack.url("/webhooks/slack/interactions"))
        .header("X-Slack-Request-Timestamp", ts.to_string())
        .header("X-Slack-Signature", sig)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn eventually<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A fake Slack with Ann and Bob and the channel, and the Worker's variables for it on top
/// of `vars`.
async fn slack_team(vars: Vec<(String, String)>) -> (FakeSlack, StackOptions) {
    let slack = FakeSlack::start().await.unwrap();
    slack.add_user("U1", "Ann", "ann@example.com");
    slack.add_user("U2", "Bob", "bob@example.com");
    slack.add_channel(CHANNEL, "eng", "shipping the storefront");
    let mut options = StackOptions::local();
    options.vars = vars;
    options.vars.extend(slack.worker_vars());
    (slack, options)
}

/// The session a thread's bot messages link to.
fn session_of(slack: &FakeSlack, thread: &str) -> Option<String> {
    slack.bot_messages(CHANNEL, thread).iter().find_map(|m| {
        let all = m.blocks.to_string();
        let at = all.find("/sessions/")?;
        Some(
            all[at + 10..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect(),
        )
    })
}

fn final_text(slack: &FakeSlack, thread: &str) -> Option<String> {
    slack
        .bot_messages(CHANNEL, thread)
        .iter()
        .map(|m| m.blocks.to_string())
        .find(|b| b.contains("*Done*") || b.contains("Not finished"))
}

#[tokio::test]
async fn a_thread_starts_follows_and_finishes_a_session() {
    let model = FakeModel::start(vec![
        // The classifier, for the first request.
        Reply::tool(
            "classify_target",
            json!({"targetId": "local/demo", "confidence": "high", "reasoning": "it names the storefront", "alternatives": []}),
        ),
        // The agent's first turn: look at the image it was given.
        Reply::tool(
            "bash",
            json!({"command": "ls .inspect-attachments && wc -c .inspect-attachments/*", "description": "look at the attachment"}),
        ),
        Reply::text("The screenshot shows the login bug; fixed."),
        // The follow-up: long enough for its progress message to be deleted meanwhile.
        Reply::tool(
            "bash",
            json!({"command": "sleep 6", "description": "look at the footer"}),
        ),
        Reply::text("Also checked the footer."),
        // The classifier, unsure, for the second thread.
        Reply::tool(
            "classify_target",
            json!({"targetId": "local/demo", "confidence": "low", "reasoning": "could be either", "alternatives": ["local/other"]}),
        ),
        // The picked session's turn.
        Reply::text("Worked in the other repository."),
    ])
    .await
    .unwrap();
    let host = SandboxHost::start(&model.base_url, "inspect/fake-model")
        .await
        .unwrap();
    let (slack, mut options) = slack_team(host.worker_vars()).await;
    // Progress updates are slow to arrive: each is applied 4 s after it was sent.
    slack.hold_updates("Working on", 4000);
    options.vars.extend([
        (
            "SLACK_CLASSIFIER_BASE_URL".to_string(),
            model.base_url.clone(),
        ),
        (
            "SLACK_CLASSIFIER_MODEL".to_string(),
            "fake-model".to_string(),
        ),
        ("SLACK_MODELS".to_string(), "inspect/fake-model".to_string()),
    ]);
    let stack = Stack::start_with(options).await.unwrap();
    let (demo, other) = (source_repo(), source_repo());
    for (name, repo) in [("demo", &demo), ("other", &other)] {
        let r = send(
            Method::POST,
            &stack.url("/repos"),
            Some(json!({"name": name, "path": repo.path().to_string_lossy()})),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
    }

    // Slack's URL check, and deliveries that are not Slack's.
    let challenge = deliver(
        &stack,
        "/webhooks/slack/events",
        &json!({"type": "url_verification", "challenge": "ch-123", "token": "x"}),
        None,
    )
    .await;
    assert_eq!(challenge.status(), 200);
    assert_eq!(
        challenge.json::<Value>().await.unwrap()["challenge"],
        "ch-123"
    );
    let forged = reqwest::Client::new()
        .post(stack.url("/webhooks/slack/events"))
        .header("X-Slack-Request-Timestamp", "1700000000")
        .header("X-Slack-Signature", "v0=00")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let body = json!({"type": "url_verification", "challenge": "x"}).to_string();
    let stale_ts = 1_600_000_000u64;
    let stale = reqwest::Client::new()
        .post(stack.url("/webhooks/slack/events"))
        .header("X-Slack-Request-Timestamp", stale_ts.to_string())
        .header(
            "X-Slack-Signature",
            inspect_tests::signing::slack(SIGNING_SECRET, stale_ts, body.as_bytes()),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 401, "a replayed delivery is stale");
    // The bot's own message is no request.
    let own = deliver(
        &stack,
        "/webhooks/slack/events",
        &envelope("EvBot", json!({"type": "app_mention", "user": BOT_USER, "text": "hi", "ts": "1.0", "channel": CHANNEL})),
        None,
    )
    .await;
    assert_eq!(
        own.json::<Value>().await.unwrap()["ignored"],
        "a bot's own message"
    );

    // A mention with a screenshot starts one session; Slack's retry starts none.
    let png: Vec<u8> = b"\x89PNG\r\n\x1a\nfake-image-bytes-for-the-test".to_vec();
    let png_len = png.len();
    let url = slack.add_file("login-bug.png", png);
    slack.limit_next("chat.postMessage");
    let text = format!("<@{BOT_USER}> fix the login bug on the storefront");
    // Slack's `app_mention` leaves the files out: the bot reads them from the message.
    let files = json!([{"id": "F1", "name": "login-bug.png", "mimetype": "image/png", "size": png_len,
                        "url_private_download": url, "mode": "hosted"},
                       {"id": "F2", "name": "notes.pdf", "mimetype": "application/pdf", "size": 10,
                        "url_private_download": url, "mode": "hosted"}]);
    let ts = slack.human_message_with_files(CHANNEL, "U1", &text, None, files);
    let first_mention = envelope(
        "Ev1",
        json!({"type": "app_mention", "user": "U1", "text": text, "ts": ts, "channel": CHANNEL}),
    );
    let t0 = Instant::now();
    let first = deliver(&stack, "/webhooks/slack/events", &first_mention, None).await;
    assert_eq!(first.status(), 200);
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "acknowledged within Slack's 3 s"
    );
    let retry = deliver(&stack, "/webhooks/slack/events", &first_mention, Some("1")).await;
    assert_eq!(retry.json::<Value>().await.unwrap()["duplicate"], true);

    let session = eventually(60, "the session's link in the thread", || {
        session_of(&slack, &ts)
    })
    .await;
    let done = eventually(180, "the final message", || final_text(&slack, &ts)).await;
    assert!(done.contains("fixed."), "{done}");
    // A progress update still on its way (held 4 s by the network) did not land after the
    // outcome and overwrite it.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let done = final_text(&slack, &ts).expect("the outcome is still the thread's message");
    assert!(done.contains("fixed."), "{done}");
    assert!(done.contains(&format!("/sessions/{session}")), "{done}");
    // Live progress: the same message was updated with the running tool before the end.
    let updates: Vec<String> = slack
        .bot_messages(CHANNEL, &ts)
        .iter()
        .flat_map(|m| m.updates.iter().map(|u| u.to_string()))
        .collect();
    assert!(updates.iter().any(|u| u.contains("`bash`")), "{updates:?}");
    // 👀 on the request, taken off at the end; the PDF was left out, with a word.
    assert!(slack.reactions().is_empty() || !slack.reactions().iter().any(|r| r.1 == ts));
    assert!(slack
        .removed_reactions()
        .iter()
        .any(|r| r.1 == ts && r.2 == "eyes"));
    let said: Vec<String> = slack
        .bot_messages(CHANNEL, &ts)
        .iter()
        .map(|m| m.text.clone())
        .collect();
    assert!(said.iter().any(|t| t.contains("notes.pdf")), "{said:?}");
    // The session: one, for Ann (slack:U1), on the classified repository; the image was
    // a file in the sandbox.
    let state = get(&stack.url(&format!("/sessions/{session}")))
        .await
        .unwrap();
    assert_eq!(state.body["createdBy"], "slack:U1", "{}", state.body);
    assert_eq!(state.body["repositories"][0]["name"], "demo");
    let tools = get(&stack.url(&format!("/sessions/{session}/events?type=tool_call")))
        .await
        .unwrap();
    let output: String = tools.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["output"].as_str())
        .collect();
    assert!(output.contains("login-bug.png"), "{output}");
    assert!(output.contains(&png_len.to_string()), "{output}");
    let listed = get(&stack.url("/sessions?limit=50")).await.unwrap();
    let count = listed.body["sessions"].as_array().unwrap().len();

    // Bob says something in the thread without the bot, then Ann asks again: the same
    // session, with Bob's message as context.
    let aside = slack.human_message(CHANNEL, "U2", "the footer looks off too", Some(&ts));
    assert!(aside > ts);
    let acknowledged = |slack: &FakeSlack| {
        slack
            .bot_messages(CHANNEL, &ts)
            .into_iter()
            .find(|m| m.text.starts_with("On it"))
    };
    mention(
        &stack,
        &slack,
        "Ev2",
        "U1",
        "please check that as well",
        Some(&ts),
    )
    .await;
    // Someone deletes the follow-up's progress message while it works: the outcome is
    // posted anew.
    let on_it = eventually(60, "the follow-up's progress message", || {
        acknowledged(&slack)
    })
    .await;
    slack.delete_message(CHANNEL, &on_it.ts);
    let deadline = Instant::now() + Duration::from_secs(120);
    let follow = loop {
        let m = get(&stack.url(&format!("/sessions/{session}/messages")))
            .await
            .unwrap();
        let list = m.body["messages"].as_array().cloned().unwrap_or_default();
        if list.len() == 2 && list[1]["status"] == "completed" {
            break list;
        }
        assert!(Instant::now() < deadline, "{}", m.body);
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let content = follow[1]["content"].as_str().unwrap();
    assert!(
        content.starts_with("please check that as well"),
        "{content}"
    );
    assert!(
        content.contains("the footer looks off too") && content.contains("author=\"Bob\""),
        "{content}"
    );
    assert!(
        !content.contains("fix the login bug"),
        "only what came after the last prompt: {content}"
    );
    let listed = get(&stack.url("/sessions?limit=50")).await.unwrap();
    assert_eq!(
        listed.body["sessions"].as_array().unwrap().len(),
        count,
        "no second session"
    );
    eventually(60, "the follow-up's outcome in the thread", || {
        slack
            .bot_messages(CHANNEL, &ts)
            .iter()
            .any(|m| m.blocks.to_string().contains("footer"))
            .then_some(())
    })
    .await;

    // An ambiguous request: the classifier is unsure, the picker asks, the pick starts it.
    let q_ts = mention(&stack, &slack, "Ev3", "U2", "tidy up the docs", None).await;
    let picker = eventually(60, "the picker", || {
        slack
            .bot_messages(CHANNEL, &q_ts)
            .into_iter()
            .find(|m| m.blocks.to_string().contains("select_repo"))
    })
    .await;
    let blocks = picker.blocks.to_string();
    assert!(
        blocks.contains("select_repo_quick_pick:1") && blocks.contains("local/other"),
        "{blocks}"
    );
    // Options load as the person types.
    let options = interact(&stack, &json!({"type": "block_suggestion", "action_id": "select_repo", "value": "oth", "user": {"id": "U2"}})).await;
    let options: Value = options.json().await.unwrap();
    assert_eq!(
        options["option_groups"][0]["options"][0]["value"], "local/other",
        "{options}"
    );
    let pick = json!({"type": "block_actions", "user": {"id": "U2"}, "channel": {"id": CHANNEL},
        "container": {"channel_id": CHANNEL, "message_ts": picker.ts, "thread_ts": q_ts},
        "message": {"ts": picker.ts, "thread_ts": q_ts},
        "actions": [{"action_id": "select_repo_quick_pick:1", "value": "local/other", "type": "button"}]});
    assert_eq!(interact(&stack, &pick).await.status(), 200);
    let picked = eventually(60, "the picked session", || session_of(&slack, &q_ts)).await;
    eventually(180, "the picked session's outcome", || {
        final_text(&slack, &q_ts)
    })
    .await;
    let state = get(&stack.url(&format!("/sessions/{picked}")))
        .await
        .unwrap();
    assert_eq!(
        state.body["repositories"][0]["name"], "other",
        "{}",
        state.body
    );
    assert_eq!(state.body["createdBy"], "slack:U2");
    // Picking again: the request was taken; the person is told, nothing starts.
    interact(&stack, &pick).await;
    eventually(30, "the expired pick's answer", || {
        (!slack.ephemeral().is_empty()).then_some(())
    })
    .await;

    // Routing rules from Settings: a keyword sends a request straight to its repository,
    // without the classifier.
    inspect_tests::browser::run_script(
        "slack-settings.mjs",
        &stack.base_url,
        &inspect_tests::browser::artifacts("slack"),
        &[],
    );
    let rules = get(&stack.url("/integrations/slack/settings"))
        .await
        .unwrap();
    assert_eq!(
        rules.body["routingRules"][0]["target"], "local/other",
        "{}",
        rules.body
    );
    let bad = send(
        Method::PUT,
        &stack.url("/integrations/slack/settings"),
        Some(json!({"routingRules": [{"keyword": "", "target": "local/other"}]})),
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400);
    model.push(vec![Reply::text("Billing fixed.")]);
    let b_ts = mention(
        &stack,
        &slack,
        "Ev5",
        "U1",
        "the billing page is broken",
        None,
    )
    .await;
    let routed = eventually(60, "the routed session", || session_of(&slack, &b_ts)).await;
    eventually(180, "the routed session's outcome", || {
        final_text(&slack, &b_ts)
    })
    .await;
    let state = get(&stack.url(&format!("/sessions/{routed}")))
        .await
        .unwrap();
    assert_eq!(
        state.body["repositories"][0]["name"], "other",
        "{}",
        state.body
    );
    assert_eq!(
        model.remaining(),
        0,
        "no classifier call for a routed request"
    );

    // The first thread's session is deleted: a new mention there starts anew.
    let r = send(
        Method::DELETE,
        &stack.url(&format!("/sessions/{session}")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    model.push(vec![
        Reply::tool(
            "classify_target",
            json!({"targetId": "local/demo", "confidence": "high", "reasoning": "as before", "alternatives": []}),
        ),
        Reply::text("Started over."),
    ]);
    mention(&stack, &slack, "Ev6", "U1", "one more thing", Some(&ts)).await;
    let started_over = eventually(120, "a new session in the old thread", || {
        slack.bot_messages(CHANNEL, &ts).iter().find_map(|m| {
            let all = m.blocks.to_string();
            all.contains("Started over").then_some(all)
        })
    })
    .await;
    assert!(
        !started_over.contains(&format!("/sessions/{session}")),
        "{started_over}"
    );

    // App Home: opening it shows the preferences; choosing a model keeps it.
    deliver(
        &stack,
        "/webhooks/slack/events",
        &envelope(
            "Ev4",
            json!({"type": "app_home_opened", "user": "U1", "tab": "home"}),
        ),
        None,
    )
    .await;
    eventually(30, "the App Home", || {
        (!slack.views().is_empty()).then_some(())
    })
    .await;
    interact(&stack, &json!({"type": "block_actions", "user": {"id": "U1"}, "actions": [{"action_id": "select_model", "selected_option": {"value": "inspect/fake-model"}}]})).await;
    eventually(30, "the App Home with the model", || {
        slack
            .views()
            .iter()
            .any(|v| {
                v["view"]["blocks"][2]["accessory"]["initial_option"]["value"]
                    == "inspect/fake-model"
            })
            .then_some(())
    })
    .await;
}

/// Slack gives an options request 3 s to answer: the picker's options come from the kept
/// copy of the repositories, never from a sync with GitHub on that path (a sync reads every
/// page of the installation's repositories). A never-synced copy is as stale as it gets.
#[tokio::test]
async fn a_pickers_options_never_wait_for_github() {
    let gh = FakeGitHub::start(vec![]).await.unwrap();
    let slack = FakeSlack::start().await.unwrap();
    slack.add_user("U2", "Bob", "bob@example.com");
    let mut options = StackOptions::local();
    options.vars = gh.worker_vars();
    options.vars.extend(slack.worker_vars());
    let stack = Stack::start_with(options).await.unwrap();
    let asked = Instant::now();
    let r = interact(&stack, &json!({"type": "block_suggestion", "action_id": "select_repo", "value": "web", "user": {"id": "U2"}})).await;
    let took = asked.elapsed();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert!(body["option_groups"].is_array(), "{body}");
    let synced: Vec<_> = gh
        .calls()
        .into_iter()
        .filter(|(_, path, _)| path.starts_with("/installation/repositories"))
        .collect();
    assert!(
        synced.is_empty(),
        "the options waited for a sync with GitHub: {synced:?}"
    );
    assert!(took < Duration::from_secs(3), "answered in {took:?}");
}

/// A long thread: a new session gets the thread's *last* messages as context (the thread
/// is read page by page, as Slack pages it), and a follow-up gets only what came after the
/// last prompt — never the thread's parent again, which Slack sends first on every page.
#[tokio::test]
async fn a_long_thread_gives_its_newest_messages_and_never_its_parent_twice() {
    let provider = inspect_tests::capture_provider::CaptureProvider::start()
        .await
        .unwrap();
    let (slack, options) = slack_team(provider.worker_vars()).await;
    let stack = Stack::start_with(options).await.unwrap();
    let demo = source_repo();
    inspect_tests::client::register_repo(&stack.base_url, "demo", demo.path())
        .await
        .unwrap();

    // Ann's question opens the thread; Bob says a lot in it; then Ann asks the bot.
    let parent = slack.human_message(CHANNEL, "U1", "checkout breaks on big carts", None);
    for n in 0..240 {
        slack.human_message(CHANNEL, "U2", &format!("note {n:03}"), Some(&parent));
    }
    mention(
        &stack,
        &slack,
        "EvLong1",
        "U1",
        "please look into it",
        Some(&parent),
    )
    .await;
    let session = eventually(60, "the thread's session", || session_of(&slack, &parent)).await;
    let prompts = || async {
        get(&stack.url(&format!("/sessions/{session}/messages")))
            .await
            .unwrap()
            .body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let first = loop {
        if let Some(m) = prompts().await.first() {
            break m["content"].as_str().unwrap_or_default().to_owned();
        }
        assert!(Instant::now() < deadline, "no prompt");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(
        first.contains("note 239") && !first.contains("note 100"),
        "the context is the thread's last messages: {first}\n{}",
        stack.log_tail()
    );

    // Bob adds one thing; Ann asks again: only that, not the parent again.
    slack.human_message(CHANNEL, "U2", "also on mobile", Some(&parent));
    mention(
        &stack,
        &slack,
        "EvLong2",
        "U1",
        "and check mobile",
        Some(&parent),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let follow = loop {
        let list = prompts().await;
        if list.len() == 2 {
            break list[1]["content"].as_str().unwrap_or_default().to_owned();
        }
        assert!(Instant::now() < deadline, "no follow-up: {list:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(follow.contains("also on mobile"), "{follow}");
    assert!(
        !follow.contains("checkout breaks on big carts") && !follow.contains("note 239"),
        "only what came after the last prompt: {follow}"
    );
}

/// A channel message delivered as Slack sends it (`message`, `channel_type: channel`),
/// stored in the fake Slack first; the message's ts and the bot's answer to the delivery.
async fn channel_message(
    stack: &Stack,
    slack: &FakeSlack,
    event_id: &str,
    user: &str,
    text: &str,
    thread: Option<&str>,
) -> (String, Value) {
    let ts = slack.human_message(CHANNEL, user, text, thread);
    let mut event = json!({"type": "message", "channel_type": "channel", "user": user,
                           "text": text, "ts": ts, "channel": CHANNEL});
    if let Some(t) = thread {
        event["thread_ts"] = json!(t);
    }
    let r = deliver(
        stack,
        "/webhooks/slack/events",
        &envelope(event_id, event),
        None,
    )
    .await;
    assert_eq!(r.status(), 200);
    (ts, r.json().await.unwrap())
}

/// The automation's runs, newest first, once there are `n` and the newest completed.
async fn runs_until(stack: &Stack, id: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let r = get(&stack.url(&format!("/automations/{id}/runs")))
            .await
            .unwrap();
        let runs = r.body["runs"].as_array().cloned().unwrap_or_default();
        if runs.len() == n && runs[0]["status"] == "completed" {
            return runs;
        }
        assert!(Instant::now() < deadline, "runs: {runs:#?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A watched channel: a matching message starts the automation's run with 👀 on it, the
/// answer lands in its thread and a reply there (no mention) continues the same session;
/// an answer of NO_REPLY posts nothing; a message that does not match, one from a denied
/// person and one that mentions the bot start nothing; Slack's retry starts no second run.
#[tokio::test]
async fn a_watched_channel_starts_an_automation_and_its_thread_continues() {
    let model = FakeModel::start(vec![
        Reply::text("The checkout crash is a null cart; fixed on a branch."),
        Reply::text("The footer is fine as it is."),
        Reply::text("NO_REPLY"),
    ])
    .await
    .unwrap();
    let host = SandboxHost::start(&model.base_url, "inspect/fake-model")
        .await
        .unwrap();
    let (slack, mut options) = slack_team(host.worker_vars()).await;
    slack.add_user("U3", "Mallory", "mallory@example.com");
    options
        .vars
        .push(("SLACK_TRIGGERS_ENABLED".into(), "true".into()));
    let stack = Stack::start_with(options).await.unwrap();
    let demo = source_repo();
    let r = send(
        Method::POST,
        &stack.url("/repos"),
        Some(json!({"name": "demo", "path": demo.path().to_string_lossy()})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);

    // A pattern that does not read is refused on save.
    let mut automation = json!({"name": "Crash triage", "triggerType": "slack_channel",
        "repositories": [{"owner": "local", "name": "demo"}],
        "instructions": "Triage the crash reported in the message.",
        "slack": {"channels": [CHANNEL], "textMatch": "regex", "pattern": "(crash"}});
    let r = send(
        Method::POST,
        &stack.url("/automations"),
        Some(automation.clone()),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not read"),
        "{}",
        r.body
    );
    automation["slack"] = json!({"channels": [CHANNEL], "textMatch": "regex",
                                 "pattern": "(?i)\\bcrash", "usersDenied": ["U3"]});
    let r = send(Method::POST, &stack.url("/automations"), Some(automation))
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["automation"]["id"].as_str().unwrap().to_owned();

    // What starts nothing: another subject, a denied person, a mention (the interactive bot's).
    let (lunch, _) = channel_message(&stack, &slack, "EvC0", "U1", "lunch at noon?", None).await;
    let (denied, _) = channel_message(
        &stack,
        &slack,
        "EvC1",
        "U3",
        "crash everywhere, trust me",
        None,
    )
    .await;
    let (_, mentioned) = channel_message(
        &stack,
        &slack,
        "EvC2",
        "U1",
        &format!("<@{BOT_USER}> a crash"),
        None,
    )
    .await;
    assert_eq!(
        mentioned["ignored"],
        "a channel message that mentions the bot"
    );

    // A report starts one run; Slack's retry of it none.
    let (report, _) = channel_message(
        &stack,
        &slack,
        "EvC3",
        "U1",
        "Checkout CRASH after the last deploy",
        None,
    )
    .await;
    let text = "Checkout CRASH after the last deploy";
    let again = deliver(
        &stack,
        "/webhooks/slack/events",
        &envelope(
            "EvC3",
            json!({"type": "message", "channel_type": "channel", "user": "U1", "text": text, "ts": report, "channel": CHANNEL}),
        ),
        Some("1"),
    )
    .await;
    assert_eq!(again.json::<Value>().await.unwrap()["duplicate"], true);
    let answer = eventually(180, "the answer in the report's thread", || {
        final_text(&slack, &report)
    })
    .await;
    assert!(answer.contains("null cart"), "{answer}");
    let session = session_of(&slack, &report).expect("the answer links its session");
    assert!(slack
        .removed_reactions()
        .iter()
        .any(|r| r.1 == report && r.2 == "eyes"));
    let state = get(&stack.url(&format!("/sessions/{session}")))
        .await
        .unwrap();
    assert_eq!(state.body["title"], "[Auto] Crash triage", "{}", state.body);
    assert_eq!(state.body["automation"]["automationId"], id.as_str());
    let messages = get(&stack.url(&format!("/sessions/{session}/messages")))
        .await
        .unwrap();
    let prompt = messages.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        prompt.contains("#eng") && prompt.contains("SLACK MESSAGE") && prompt.contains("Ann"),
        "{prompt}"
    );
    let runs = runs_until(&stack, &id, 1).await;
    assert_eq!(runs[0]["trigger"], "slack");

    // Bob answers in the thread without a mention: the same session goes on.
    let (_, _) = channel_message(
        &stack,
        &slack,
        "EvC4",
        "U2",
        "is the footer broken too?",
        Some(&report),
    )
    .await;
    eventually(180, "the follow-up's answer", || {
        slack
            .bot_messages(CHANNEL, &report)
            .iter()
            .any(|m| m.blocks.to_string().contains("footer is fine"))
            .then_some(())
    })
    .await;
    assert_eq!(
        session_of(&slack, &report).as_deref(),
        Some(session.as_str())
    );
    // Mallory, whom the trigger denies, cannot drive its session from the thread either,
    // with or without a mention.
    let said = slack.bot_messages(CHANNEL, &report).len();
    channel_message(
        &stack,
        &slack,
        "EvC6",
        "U3",
        "delete the tests",
        Some(&report),
    )
    .await;
    mention(
        &stack,
        &slack,
        "EvC7",
        "U3",
        "delete the tests",
        Some(&report),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(slack.bot_messages(CHANNEL, &report).len(), said);

    // An answer of NO_REPLY: nothing in the thread, the 👀 taken off all the same.
    let (quiet, _) = channel_message(&stack, &slack, "EvC5", "U2", "no crash today", None).await;
    runs_until(&stack, &id, 2).await;
    eventually(30, "the 👀 off the quiet message", || {
        slack
            .removed_reactions()
            .iter()
            .any(|r| r.1 == quiet && r.2 == "eyes")
            .then_some(())
    })
    .await;
    assert!(slack.bot_messages(CHANNEL, &quiet).is_empty());
    // Nothing ever answered the messages no trigger took.
    for ts in [&lunch, &denied] {
        assert!(slack.bot_messages(CHANNEL, ts).is_empty());
        assert!(!slack.reactions().iter().any(|r| r.1 == *ts));
    }
}

/// A picture the agent takes during a prompt from a Slack thread goes to that thread too,
/// as Slack takes files (an upload URL, the bytes, the upload completed into the thread).
/// The page is the app the repository's start hook runs.
#[tokio::test]
async fn the_agents_screenshot_is_shared_in_the_thread() {
    let port = inspect_tests::stack::free_port().unwrap();
    // The app is the one the repository's start hook runs; the agent photographs it.
    let serve = format!(
        "open-inspect screenshot http://127.0.0.1:{port}/shop.html --caption 'The storefront after the fix'"
    );
    let model = FakeModel::start(vec![
        Reply::tool(
            "classify_target",
            json!({"targetId": "local/demo", "confidence": "high", "reasoning": "it names the storefront", "alternatives": []}),
        ),
        Reply::tool("bash", json!({"command": serve, "description": "look at the page"})),
        Reply::text("Here is the storefront."),
    ])
    .await
    .unwrap();
    let host = SandboxHost::start(&model.base_url, "inspect/fake-model")
        .await
        .unwrap();
    let (slack, mut options) = slack_team(host.worker_vars()).await;
    options.vars.extend([
        (
            "SLACK_CLASSIFIER_BASE_URL".to_string(),
            model.base_url.clone(),
        ),
        (
            "SLACK_CLASSIFIER_MODEL".to_string(),
            "fake-model".to_string(),
        ),
    ]);
    let stack = Stack::start_with(options).await.unwrap();
    let demo = source_repo();
    let hooks = demo.path().join(".openinspect");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(demo.path().join("shop.html"), "<h1>Storefront</h1>").unwrap();
    std::fs::write(
        hooks.join("start.sh"),
        format!("cd \"$(dirname \"$0\")/..\"\nnohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &\nfor i in $(seq 50); do curl -fs http://127.0.0.1:{port}/shop.html >/dev/null && break; sleep 0.1; done\n"),
    )
    .unwrap();
    inspect_tests::repo::commit_all(demo.path(), "the storefront and its start hook");
    let r = send(
        Method::POST,
        &stack.url("/repos"),
        Some(json!({"name": "demo", "path": demo.path().to_string_lossy()})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let thread = mention(
        &stack,
        &slack,
        "Ev-shot",
        "U1",
        "show me the storefront",
        None,
    )
    .await;
    let shared = eventually(180, "the picture in the thread", || {
        slack
            .bot_messages(CHANNEL, &thread)
            .into_iter()
            .find(|m| m.files.is_array())
    })
    .await;
    assert_eq!(shared.text, "The storefront after the fix");
    assert_eq!(
        shared.files[0]["name"], "screenshot.png",
        "{:?}",
        shared.files
    );
    assert!(shared.files[0]["size"].as_u64().unwrap() > 1000);
    eventually(120, "the answer", || final_text(&slack, &thread)).await;
}
