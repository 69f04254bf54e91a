//! Automations end to end, through the real Worker (its cron trigger driven by wrangler's
//! scheduled-event route at chosen times), the real supervisor and OpenCode on the
//! scripted model: a schedule fires one session per repository once per slot, even across
//! a restart; a webhook with its key starts a run for a matching payload, once per
//! idempotency key; runs that fail three times in a row pause the automation; a slot due
//! while the last run goes on is recorded as skipped.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::send;
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::source_repo;
use inspect_tests::Stack;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Runs the cron trigger as if it fired at `ms` (the minute's trigger: automations only),
/// through the runtime's own trigger route (`/cdn-cgi/local/scheduled`, which takes a time).
async fn tick(stack: &Stack, ms: i64) {
    let r = reqwest::get(stack.url(&format!(
        "/cdn-cgi/local/scheduled?cron=*+*+*+*+*&time={ms}"
    )))
    .await
    .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}

async fn runs(stack: &Stack, id: &str) -> Vec<Value> {
    inspect_tests::client::automation_runs(stack, id).await
}

/// Waits until the automation's newest run is no longer starting or running.
async fn finished_run(stack: &Stack, id: &str, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let all = runs(stack, id).await;
        if let Some(run) = all.first() {
            if run["status"] != "starting" && run["status"] != "running" {
                return run.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "the run did not end: {all:?}\n{}",
            stack.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
}

/// A session's prompts (`GET /sessions/:id/messages`).
async fn messages(stack: &Stack, sid: &str) -> Value {
    let r = send(
        Method::GET,
        &stack.url(&format!("/sessions/{sid}/messages")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["messages"].clone()
}

async fn create(stack: &Stack, body: Value) -> Value {
    let r = send(Method::POST, &stack.url("/automations"), Some(body))
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

#[tokio::test]
async fn a_schedule_fires_one_session_per_repository_once_per_slot() {
    let mut agent = AgentStack::start(
        vec![
            Reply::text("Dependencies are current."),
            Reply::text("Dependencies are current."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let (web, api) = (source_repo(), source_repo());
    agent.register_repo("web", web.path()).await.unwrap();
    agent.register_repo("api", api.path()).await.unwrap();
    let made = create(
        &agent.stack,
        json!({
            "name": "Nightly deps",
            "triggerType": "schedule",
            "repositories": [{"owner": "local", "name": "web"}, {"owner": "local", "name": "api"}],
            "instructions": "Check the dependencies.",
            "schedule": {"cron": "0 * * * *", "timezone": "UTC"}
        }),
    )
    .await;
    let automation = &made["automation"];
    let id = automation["id"].as_str().unwrap().to_owned();
    assert_eq!(automation["status"], "enabled");
    assert!(made.get("webhookKey").is_none(), "{made}");
    let due = automation["nextRunAt"].as_i64().unwrap();
    assert_eq!(due % 3_600_000, 0, "the top of an hour: {automation}");

    // Before its time, nothing.
    tick(&agent.stack, due - 60_000).await;
    assert!(runs(&agent.stack, &id).await.is_empty());

    // Due: one run, one session per repository.
    tick(&agent.stack, due + 1_000).await;
    let all = runs(&agent.stack, &id).await;
    assert_eq!(all.len(), 1, "{all:?}\n{}", agent.stack.log_tail());
    assert_eq!(all[0]["trigger"], "schedule");
    let sessions = all[0]["sessions"].as_array().unwrap();
    let mut repos: Vec<&str> = sessions
        .iter()
        .map(|s| s["repository"].as_str().unwrap())
        .collect();
    repos.sort();
    assert_eq!(repos, ["local/api", "local/web"]);

    // The same slot again, and after a restart: nothing more.
    tick(&agent.stack, due + 2_000).await;
    agent.stack.restart().await.unwrap();
    tick(&agent.stack, due + 3_000).await;
    assert_eq!(runs(&agent.stack, &id).await.len(), 1);
    let next = send(
        Method::GET,
        &agent.stack.url(&format!("/automations/{id}")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(next.body["nextRunAt"].as_i64(), Some(due + 3_600_000));

    // Each session is the automation's: titled, carrying its ids, and both complete.
    let run = finished_run(&agent.stack, &id, 180).await;
    assert_eq!(run["status"], "completed", "{run}");
    for s in run["sessions"].as_array().unwrap() {
        let sid = s["sessionId"].as_str().unwrap();
        let state = send(
            Method::GET,
            &agent.stack.url(&format!("/sessions/{sid}")),
            None,
        )
        .await
        .unwrap();
        assert_eq!(state.body["title"], "[Auto] Nightly deps", "{}", state.body);
        assert_eq!(state.body["automation"]["automationId"], id.as_str());
        assert_eq!(state.body["automation"]["runId"], run["id"]);
        let prompts = messages(&agent.stack, sid).await;
        let content = prompts[0]["content"].as_str().unwrap();
        assert!(
            content.contains("scheduled run") && content.ends_with("Check the dependencies."),
            "{content}"
        );
    }
    let automation = send(
        Method::GET,
        &agent.stack.url(&format!("/automations/{id}")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(automation.body["consecutiveFailures"], 0);
}

#[tokio::test]
async fn a_webhook_runs_matching_deliveries_once_per_idempotency_key() {
    let agent = AgentStack::start(vec![Reply::text("Looked at the deploy.")], vec![])
        .await
        .unwrap();
    let stack = &agent.stack;
    let made = create(
        stack,
        json!({
            "name": "Deploy failures",
            "triggerType": "webhook",
            "instructions": "Find out why the deploy failed.",
            "conditions": [
                {"path": "$.status", "op": "eq", "value": "failed"},
                {"path": "$.deploy.env", "op": "eq", "value": "production"}
            ]
        }),
    )
    .await;
    let id = made["automation"]["id"].as_str().unwrap().to_owned();
    let key = made["webhookKey"].as_str().unwrap().to_owned();
    assert_eq!(
        made["automation"]["webhookPath"],
        format!("/webhooks/automation/{id}")
    );
    // The key is never shown again.
    let again = send(Method::GET, &stack.url(&format!("/automations/{id}")), None)
        .await
        .unwrap();
    assert!(!again.body.to_string().contains(&key));

    let c = reqwest::Client::new();
    let url = stack.url(&format!("/webhooks/automation/{id}"));
    let deliver = |body: String, key: Option<&str>, kind: &str| {
        let mut r = c.post(&url).header("Content-Type", kind).body(body);
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        async move {
            let resp = r.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let failed = json!({"status": "failed", "deploy": {"env": "production", "sha": "abc123"}, "idempotencyKey": "deploy-41"});
    // Refused: no key, a wrong key, not JSON, too large, bad JSON, no such automation.
    assert_eq!(
        deliver(failed.to_string(), None, "application/json")
            .await
            .0,
        401
    );
    assert_eq!(
        deliver(failed.to_string(), Some("oia_wrong"), "application/json")
            .await
            .0,
        401
    );
    assert_eq!(
        deliver(failed.to_string(), Some(&key), "text/plain")
            .await
            .0,
        415
    );
    let huge = json!({"blob": "x".repeat(70_000)}).to_string();
    assert_eq!(deliver(huge, Some(&key), "application/json").await.0, 413);
    let (status, body) = deliver("{\"status\":".into(), Some(&key), "application/json").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_request", "{body}");
    let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
    assert_eq!(deliver(deep, Some(&key), "application/json").await.0, 400);
    let other = stack.url("/webhooks/automation/auto_000000000000000000000000");
    let r = c
        .post(other)
        .bearer_auth(&key)
        .json(&failed)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert!(runs(stack, &id).await.is_empty());

    // A matching delivery starts one run; its retry starts none; a non-matching one none.
    let (status, body) = deliver(failed.to_string(), Some(&key), "application/json").await;
    assert_eq!(
        (status, body.clone()),
        (200, json!({"ok": true, "triggered": 1, "skipped": 0}))
    );
    let (_, body) = deliver(failed.to_string(), Some(&key), "application/json").await;
    assert_eq!(body, json!({"ok": true, "triggered": 0, "skipped": 1}));
    let staging = json!({"status": "failed", "deploy": {"env": "staging"}});
    let (_, body) = deliver(staging.to_string(), Some(&key), "application/json").await;
    assert_eq!(body, json!({"ok": true, "triggered": 0, "skipped": 1}));
    assert_eq!(runs(stack, &id).await.len(), 1);

    // The payload reached the agent as untrusted data, with when it arrived.
    let run = finished_run(stack, &id, 180).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["trigger"], "webhook");
    let sid = run["sessions"][0]["sessionId"].as_str().unwrap();
    let prompts = messages(stack, sid).await;
    let content = prompts[0]["content"].as_str().unwrap();
    assert!(
        content.contains("untrusted") && content.contains("abc123"),
        "{content}"
    );
    assert!(content.contains("received at 20"), "{content}");
    assert!(
        !content.contains("deploy-41"),
        "the idempotency key is not shown: {content}"
    );

    // A new key: the old one stops working.
    let rotated = send(
        Method::POST,
        &stack.url(&format!("/automations/{id}/rotate-key")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new_key = rotated.body["webhookKey"].as_str().unwrap();
    assert_ne!(new_key, key);
    assert_eq!(
        deliver(staging.to_string(), Some(&key), "application/json")
            .await
            .0,
        401
    );
    assert_eq!(
        deliver(staging.to_string(), Some(new_key), "application/json")
            .await
            .0,
        200
    );

    // Paused: a delivery is recorded as skipped; deleted: 404.
    let paused = send(
        Method::POST,
        &stack.url(&format!("/automations/{id}/pause")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(paused.body["status"], "paused", "{}", paused.body);
    let fresh =
        json!({"status": "failed", "deploy": {"env": "production"}, "idempotencyKey": "deploy-42"});
    let (_, body) = deliver(fresh.to_string(), Some(new_key), "application/json").await;
    assert_eq!(body, json!({"ok": true, "triggered": 0, "skipped": 1}));
    let newest = runs(stack, &id).await;
    assert_eq!(newest[0]["status"], "skipped", "{newest:?}");
    assert!(newest[0]["reason"].as_str().unwrap().contains("paused"));
    let gone = send(
        Method::DELETE,
        &stack.url(&format!("/automations/{id}")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(gone.status, 200);
    assert_eq!(
        deliver(fresh.to_string(), Some(new_key), "application/json")
            .await
            .0,
        404
    );
    // Deleted, it is gone from the list; its history is kept and still read.
    let list = send(Method::GET, &stack.url("/automations"), None)
        .await
        .unwrap();
    assert!(list.body["automations"].as_array().unwrap().is_empty());
    assert_eq!(runs(stack, &id).await.len(), newest.len());

    // Instructions and a payload each within their limits (characters) whose prompt is over
    // a prompt's (64 KiB): the run's session is made with the prompt refused, and the run
    // fails with why.
    let long = create(
        stack,
        json!({"name": "Long", "triggerType": "webhook", "instructions": "部".repeat(15_000)}),
    )
    .await;
    let long_id = long["automation"]["id"].as_str().unwrap().to_owned();
    let r = c
        .post(stack.url(&format!("/webhooks/automation/{long_id}")))
        .bearer_auth(long["webhookKey"].as_str().unwrap())
        .json(&json!({"log": "署".repeat(7_000)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let run = finished_run(stack, &long_id, 60).await;
    assert_eq!(run["status"], "failed", "{run}");
    let session = &run["sessions"][0];
    assert_eq!(session["status"], "failed", "{run}");
    let error = session["error"].as_str().unwrap_or_default();
    assert!(error.contains("at most 65536 bytes"), "{run}");
    let sid = session["sessionId"].as_str().unwrap();
    assert_eq!(messages(stack, sid).await, json!([]));
}

#[tokio::test]
async fn a_sentry_alert_starts_one_run_for_its_event() {
    use inspect_tests::fakes::sentry;
    let agent = AgentStack::start(vec![Reply::text("The cart total is fixed.")], vec![])
        .await
        .unwrap();
    let stack = &agent.stack;
    let made = create(
        stack,
        json!({
            "name": "Checkout errors",
            "triggerType": "sentry",
            "sentry": {"resource": "event_alert", "clientSecret": "sentry-client-secret-1"},
            "conditions": [{"path": "$.environment", "op": "eq", "value": "production"}],
            "instructions": "Find the cause and propose a fix."
        }),
    )
    .await;
    let id = made["automation"]["id"].as_str().unwrap().to_owned();
    // The client secret is sealed and never answered.
    assert!(
        !made.to_string().contains("sentry-client-secret-1"),
        "{made}"
    );
    assert_eq!(
        made["automation"]["settings"]["sentry"]["resource"],
        "event_alert"
    );
    let url = stack.url(made["automation"]["webhookPath"].as_str().unwrap());
    assert!(url.ends_with(&format!("/webhooks/sentry/{id}")));
    let secret = "sentry-client-secret-1";

    let alert = sentry::event_alert(
        "e1f2a3",
        "ReferenceError: cartTotal is not defined",
        "web",
        "production",
    );
    // Forged or unsigned: refused.
    assert_eq!(
        sentry::deliver(&url, "another-secret", &alert, None)
            .await
            .0,
        401
    );
    assert_eq!(sentry::deliver(&url, secret, &alert, Some("")).await.0, 401);
    // What starts nothing: the integration's installation, another resource, another
    // environment.
    let (s, b) = sentry::deliver(&url, secret, &sentry::installation_created(), None).await;
    assert_eq!(
        (s, b),
        (200, json!({"ok": true, "triggered": 0, "skipped": 0}))
    );
    let issue = sentry::issue_created("1170820242", "TypeError", "web", "error");
    assert_eq!(
        sentry::deliver(&url, secret, &issue, None).await.1["triggered"],
        0
    );
    let staging = sentry::event_alert("e9", "ReferenceError", "web", "staging");
    assert_eq!(
        sentry::deliver(&url, secret, &staging, None).await.1,
        json!({"ok": true, "triggered": 0, "skipped": 1})
    );
    assert!(runs(stack, &id).await.is_empty());
    // The alert: one run; Sentry's retry of it: none.
    let (s, b) = sentry::deliver(&url, secret, &alert, None).await;
    assert_eq!(
        (s, b),
        (200, json!({"ok": true, "triggered": 1, "skipped": 0}))
    );
    let (_, b) = sentry::deliver(&url, secret, &alert, None).await;
    assert_eq!(b, json!({"ok": true, "triggered": 0, "skipped": 1}));

    let run = finished_run(stack, &id, 180).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["trigger"], "sentry");
    let sid = run["sessions"][0]["sessionId"].as_str().unwrap();
    let prompts = messages(stack, sid).await;
    let content = prompts[0]["content"].as_str().unwrap();
    for want in [
        "untrusted",
        "ReferenceError: cartTotal is not defined",
        "?(app/checkout.js)",
        "total (app/checkout.js:41)",
        "https://sentry.io/organizations/acme/issues/1170820242/events/e1f2a3/",
        "Find the cause and propose a fix.",
    ] {
        assert!(content.contains(want), "{want:?} missing from {content}");
    }
    // A new secret replaces the old one; leaving it out keeps it.
    let mut settings = made["automation"]["settings"].clone();
    settings["sentry"] = json!({"resource": "event_alert"});
    let kept = send(
        Method::PUT,
        &stack.url(&format!("/automations/{id}")),
        Some(settings.clone()),
    )
    .await
    .unwrap();
    assert_eq!(kept.status, 200, "{}", kept.body);
    let again = sentry::event_alert("e5", "ReferenceError", "web", "production");
    let paused = send(
        Method::POST,
        &stack.url(&format!("/automations/{id}/pause")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(paused.status, 200);
    assert_eq!(sentry::deliver(&url, secret, &again, None).await.0, 200);
    settings["sentry"] = json!({"resource": "event_alert", "clientSecret": "rotated-secret-2"});
    let changed = send(
        Method::PUT,
        &stack.url(&format!("/automations/{id}")),
        Some(settings),
    )
    .await
    .unwrap();
    assert_eq!(changed.status, 200, "{}", changed.body);
    assert_eq!(sentry::deliver(&url, secret, &again, None).await.0, 401);
    assert_eq!(
        sentry::deliver(&url, "rotated-secret-2", &again, None)
            .await
            .0,
        200
    );
}

#[tokio::test]
async fn three_failed_runs_in_a_row_pause_the_automation() {
    let stack = Stack::start().await.unwrap();
    // A repository that is not registered: every session fails to start.
    let made = create(
        &stack,
        json!({
            "name": "Broken",
            "triggerType": "schedule",
            "repositories": [{"owner": "local", "name": "missing"}],
            "instructions": "Do the thing.",
            "schedule": {"cron": "30 2 * * 1", "timezone": "Europe/Paris"}
        }),
    )
    .await;
    let id = made["automation"]["id"].as_str().unwrap().to_owned();
    let trigger = stack.url(&format!("/automations/{id}/trigger"));
    for n in 1..=3 {
        let r = send(Method::POST, &trigger, None).await.unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(r.body["status"], "failed", "{}", r.body);
        assert!(
            r.body["sessions"][0]["error"]
                .as_str()
                .unwrap()
                .contains("missing"),
            "{}",
            r.body
        );
        let a = send(Method::GET, &stack.url(&format!("/automations/{id}")), None)
            .await
            .unwrap();
        assert_eq!(a.body["consecutiveFailures"], n);
        let want = if n < 3 { "degraded" } else { "paused" };
        assert_eq!(a.body["status"], want, "{}", a.body);
    }
    let a = send(Method::GET, &stack.url(&format!("/automations/{id}")), None)
        .await
        .unwrap();
    assert!(a.body["pausedReason"]
        .as_str()
        .unwrap()
        .contains("3 failed runs"));
    assert!(a.body.get("nextRunAt").is_none(), "{}", a.body);
    // Trigger now still works while paused; resuming resets the count and the schedule.
    let resumed = send(
        Method::POST,
        &stack.url(&format!("/automations/{id}/resume")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(resumed.body["status"], "enabled", "{}", resumed.body);
    assert_eq!(resumed.body["consecutiveFailures"], 0);
    assert!(resumed.body["nextRunAt"].as_i64().is_some());
}

#[tokio::test]
async fn a_run_still_going_after_ninety_minutes_fails() {
    use inspect_tests::capture_provider::CaptureProvider;
    // A provider whose sandboxes never connect: the run's session never ends by itself.
    let mut provider = CaptureProvider::start().await.unwrap();
    // Its schedule is 12 hours away, so the later tick below does not fire it again.
    let hour = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 3600
        + 12)
        % 24;
    let far_from_now = format!("0 {hour} * * *");
    let (stack, _repo) = provider
        .stack_with_repo_in(inspect_tests::StackOptions::local(), "demo")
        .await
        .unwrap();
    let made = create(
        &stack,
        json!({
            "name": "Slow",
            "triggerType": "schedule",
            "repositories": [{"owner": "local", "name": "demo"}],
            "instructions": "Take your time.",
            "schedule": {"cron": far_from_now, "timezone": "UTC"}
        }),
    )
    .await;
    let id = made["automation"]["id"].as_str().unwrap().to_owned();
    let r = send(
        Method::POST,
        &stack.url(&format!("/automations/{id}/trigger")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["status"], "running", "{}", r.body);
    provider.next_spawn().await.unwrap();
    // Another run while it goes: refused.
    let busy = send(
        Method::POST,
        &stack.url(&format!("/automations/{id}/trigger")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(busy.status, 409, "{}", busy.body);
    // The cron step 91 minutes later ends it as failed.
    let later = r.body["createdAt"].as_i64().unwrap() + 91 * 60_000;
    tick(&stack, later).await;
    let all = runs(&stack, &id).await;
    let run = all.iter().find(|run| run["id"] == r.body["id"]).unwrap();
    assert_eq!(run["status"], "failed", "{run}");
    assert!(
        run["sessions"][0]["error"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{run}"
    );
    let a = send(Method::GET, &stack.url(&format!("/automations/{id}")), None)
        .await
        .unwrap();
    assert_eq!(a.body["consecutiveFailures"], 1, "{}", a.body);
    assert_eq!(a.body["status"], "degraded");
}

#[tokio::test]
async fn a_due_slot_is_skipped_while_the_last_run_goes_on() {
    use inspect_tests::capture_provider::CaptureProvider;
    // A provider whose sandboxes never connect: the first run never ends by itself.
    let mut provider = CaptureProvider::start().await.unwrap();
    let (stack, _repo) = provider
        .stack_with_repo_in(inspect_tests::StackOptions::local(), "demo")
        .await
        .unwrap();
    let made = create(
        &stack,
        json!({
            "name": "Hourly",
            "triggerType": "schedule",
            "repositories": [{"owner": "local", "name": "demo"}],
            "instructions": "Look again.",
            "schedule": {"cron": "0 * * * *", "timezone": "UTC"}
        }),
    )
    .await;
    let id = made["automation"]["id"].as_str().unwrap().to_owned();
    let due = made["automation"]["nextRunAt"].as_i64().unwrap();

    // The slot fires: one run of one session, running as soon as its session was made.
    tick(&stack, due + 1_000).await;
    let all = runs(&stack, &id).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["status"], "running", "{all:?}");
    assert_eq!(all[0]["sessions"][0]["status"], "running", "{all:?}");
    provider.next_spawn().await.unwrap();
    // Another schedule, made now: due with the next tick's, its slots taken in one batch.
    let other = create(
        &stack,
        json!({
            "name": "Hourly too",
            "triggerType": "schedule",
            "repositories": [{"owner": "local", "name": "demo"}],
            "instructions": "Look elsewhere.",
            "schedule": {"cron": "0 * * * *", "timezone": "UTC"}
        }),
    )
    .await;
    let other = other["automation"]["id"].as_str().unwrap().to_owned();

    // The next slot while it goes: recorded as skipped, with why, and the schedule moves on;
    // the other schedule, taken in the same batch, starts its run.
    let hour = 3_600_000;
    tick(&stack, due + hour + 1_000).await;
    let all = runs(&stack, &id).await;
    assert_eq!(all.len(), 2, "{all:?}");
    let others = runs(&stack, &other).await;
    assert_eq!(others.len(), 1, "{others:?}");
    assert_eq!(others[0]["status"], "running", "{others:?}");
    let skipped = all.iter().find(|r| r["status"] == "skipped").unwrap();
    assert!(
        skipped["reason"].as_str().unwrap().contains("still active"),
        "{skipped}"
    );
    assert!(all.iter().any(|r| r["status"] == "running"), "{all:?}");
    // The same slot again: nothing more.
    tick(&stack, due + hour + 2_000).await;
    assert_eq!(runs(&stack, &id).await.len(), 2);
    assert_eq!(runs(&stack, &other).await.len(), 1);
    let a = send(Method::GET, &stack.url(&format!("/automations/{id}")), None)
        .await
        .unwrap();
    assert_eq!(
        a.body["nextRunAt"].as_i64(),
        Some(due + 2 * hour),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn bad_automations_are_refused_with_reasons() {
    let stack = Stack::start().await.unwrap();
    let base = json!({
        "name": "Nightly",
        "triggerType": "schedule",
        "instructions": "Go.",
        "schedule": {"cron": "0 3 * * *", "timezone": "UTC"}
    });
    let refused = |change: Value| {
        let mut body = base.clone();
        for (k, v) in change.as_object().unwrap() {
            body[k] = v.clone();
        }
        let url = stack.url("/automations");
        async move { send(Method::POST, &url, Some(body)).await.unwrap() }
    };
    for (change, words) in [
        (
            json!({"schedule": {"cron": "*/5 * * * *", "timezone": "UTC"}}),
            "15 minutes",
        ),
        (
            json!({"schedule": {"cron": "0 0 3 * * *", "timezone": "UTC"}}),
            "five fields",
        ),
        (
            json!({"schedule": {"cron": "0 3 * * *", "timezone": "Nowhere/City"}}),
            "time zone",
        ),
        (json!({"name": "x".repeat(201)}), "name"),
        (json!({"instructions": "x".repeat(15_001)}), "instructions"),
        (json!({"triggerType": "carrier_pigeon"}), "carrier_pigeon"),
        (json!({"unknown": 1}), "unknown"),
        (
            json!({"conditions": [{"path": "$.a", "op": "exists"}]}),
            "no event",
        ),
        // This deployment has not turned Slack channel triggers on.
        (
            json!({"triggerType": "slack_channel", "schedule": null,
                   "slack": {"channels": ["C0SUPPORT"]}}),
            "SLACK_TRIGGERS_ENABLED",
        ),
        (
            json!({"slack": {"channels": ["C0SUPPORT"]}}),
            "only a Slack trigger",
        ),
    ] {
        let r = refused(change.clone()).await;
        assert_eq!(r.status, 400, "{change}: {}", r.body);
        assert!(
            r.body["error"]["message"].as_str().unwrap().contains(words),
            "{change}: {}",
            r.body
        );
    }
    let preview = send(
        Method::GET,
        &stack.url("/automations/schedule-preview?cron=0+9+*+*+1-5&timezone=America/New_York"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(preview.status, 200, "{}", preview.body);
    let runs = preview.body["nextRuns"].as_array().unwrap();
    assert_eq!(runs.len(), 5);
    // The zone is the runtime's (Intl), not a database in the wasm: 09:00 in New York is
    // 14:00 UTC in winter and 13:00 in summer, never 09:00, and only on weekdays.
    for run in runs {
        let ms = run.as_i64().unwrap();
        let hour = (ms / 3_600_000).rem_euclid(24);
        let weekday = (ms / 86_400_000 + 4).rem_euclid(7); // 0 = Sunday
        assert!(hour == 13 || hour == 14, "{run} is {hour}:00 UTC");
        assert!((1..=5).contains(&weekday), "{run} is on day {weekday}");
    }
    let bad = send(
        Method::GET,
        &stack.url("/automations/schedule-preview?cron=nope&timezone=UTC"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400);
    let made = send(Method::POST, &stack.url("/automations"), Some(base.clone()))
        .await
        .unwrap();
    let id = made.body["automation"]["id"].as_str().unwrap().to_owned();
    let mut webhook = base.clone();
    webhook["triggerType"] = json!("webhook");
    webhook.as_object_mut().unwrap().remove("schedule");
    let r = send(
        Method::PUT,
        &stack.url(&format!("/automations/{id}")),
        Some(webhook),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    let mut renamed = base.clone();
    renamed["name"] = json!("Nightly, renamed");
    let r = send(
        Method::PUT,
        &stack.url(&format!("/automations/{id}")),
        Some(renamed),
    )
    .await
    .unwrap();
    assert_eq!(r.body["settings"]["name"], "Nightly, renamed", "{}", r.body);
    let list = send(Method::GET, &stack.url("/automations"), None)
        .await
        .unwrap();
    assert_eq!(list.body["automations"].as_array().unwrap().len(), 1);
    for path in [
        "/automations/auto_nope",
        "/automations/auto_nope/runs",
        "/automations/..%2f/runs",
    ] {
        let r = send(Method::GET, &stack.url(path), None).await.unwrap();
        assert_eq!(r.status, 404, "{path}: {}", r.body);
    }
}
