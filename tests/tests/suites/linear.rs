//! Linear end to end, through the real Worker (wrangler dev), the local sandbox host, the
//! real supervisor and OpenCode, against a fake Linear that checks every GraphQL document
//! against Linear's schema and signs deliveries as Linear does: the app is installed
//! (OAuth with a one-time state); a signed `created` event starts one session (its
//! redeliveries none) with the first thought and the plan within Linear's deadlines, the
//! issue moves to In Progress, tools show as actions, and the answer lands as a
//! `response`; `prompted` continues the same session (after the app's token was revoked:
//! it is renewed); an issue nobody mapped gets a question and the reply starts it there;
//! the stop signal stops a running turn with a final word. Bad deliveries are refused.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::client::{get, send};
use inspect_tests::fakes::linear::{signed, FakeLinear, ORGANIZATION, WEBHOOK_SECRET};
use inspect_tests::fakes::model::{FakeModel, Reply};
use inspect_tests::host::SandboxHost;
use inspect_tests::repo::source_repo;
use inspect_tests::{Stack, StackOptions};
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn deliver_as(
    stack: &Stack,
    body: &Value,
    delivery: Option<&str>,
    secret: &str,
) -> reqwest::Response {
    let (sig, bytes) = signed(body, secret);
    let mut req = reqwest::Client::new()
        .post(stack.url("/webhooks/linear"))
        .header("Content-Type", "application/json; charset=utf-8")
        .header("Linear-Event", body["type"].as_str().unwrap_or(""))
        .header("Linear-Signature", sig)
        .header("User-Agent", "Linear-Webhook")
        .body(bytes);
    if let Some(d) = delivery {
        req = req.header("Linear-Delivery", d);
    }
    req.send().await.unwrap()
}

async fn deliver(stack: &Stack, body: &Value, delivery: &str) -> Value {
    let r = deliver_as(stack, body, Some(delivery), WEBHOOK_SECRET).await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

async fn eventually<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The session an agent session's external link points at.
fn session_of(linear: &FakeLinear, agent_session: &str) -> Option<String> {
    linear.session_updates(agent_session).iter().find_map(|u| {
        let url = u["externalUrls"][0]["url"].as_str()?;
        Some(url.rsplit('/').next()?.to_owned())
    })
}

fn responses(linear: &FakeLinear, agent_session: &str) -> Vec<String> {
    linear
        .activities(agent_session)
        .iter()
        .filter(|a| a.kind() == "response" || a.kind() == "error")
        .map(|a| format!("{}: {}", a.kind(), a.body()))
        .collect()
}

#[tokio::test]
async fn an_issue_is_worked_followed_asked_about_and_stopped_from_linear() {
    let model = FakeModel::start(vec![
        // ENG-1's first turn.
        Reply::tool(
            "bash",
            json!({"command": "echo fixed > login.txt", "description": "fix the login"}),
        ),
        Reply::text("Fixed the login."),
        // ENG-1's follow-up.
        Reply::text("Also checked the footer."),
        // OPS-2, once the person picked where.
        Reply::text("Worked in the other repository."),
        // The automation's run for ENG-5.
        Reply::text("Triaged ENG-5."),
        // ENG-1's long turn, stopped while its tool runs.
        Reply::tool(
            "bash",
            json!({"command": "sleep 120", "description": "a long check"}),
        ),
        Reply::text("never said: the turn was stopped"),
    ])
    .await
    .unwrap();
    let host = SandboxHost::start(&model.base_url, "inspect/fake-model")
        .await
        .unwrap();
    let linear = FakeLinear::start().await.unwrap();
    linear.add_user("user-ann", "Ann", "ann@acme.test");
    let states = [
        ("st-todo", "Todo", "unstarted", 0.0),
        ("st-review", "In Review", "started", 2.0),
        ("st-progress", "In Progress", "started", 1.0),
        ("st-done", "Done", "completed", 3.0),
    ];
    linear.add_team("team-eng", "ENG", "Engineering", &states);
    linear.add_team("team-ops", "OPS", "Operations", &states);
    linear.add_issue(
        "issue-1",
        "ENG-1",
        "Login fails",
        "Signing in with a long password fails.",
        "team-eng",
        "st-todo",
        &["bug"],
        &[
            ("Bob", "Seen on staging too."),
            ("Ann", "Probably the hash length."),
        ],
    );
    linear.add_issue(
        "issue-2",
        "OPS-2",
        "Rotate the logs",
        "",
        "team-ops",
        "st-todo",
        &[],
        &[],
    );
    linear.add_issue(
        "issue-5",
        "ENG-5",
        "Flaky checkout test",
        "Fails one run in ten.",
        "team-eng",
        "st-todo",
        &["agent-triage"],
        &[],
    );
    let mut options = StackOptions::local();
    options.vars = host.worker_vars();
    options.vars.extend(linear.worker_vars());
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

    // Before the app is installed, a signed event is ignored: no workspace to act for.
    linear.open_agent_session("as-early", "issue-1");
    let early = linear.event("created", "as-early", "issue-1", "user-ann", None, None);
    assert!(deliver(&stack, &early, "d-early").await["ignored"]
        .as_str()
        .unwrap()
        .contains("not installed"));

    // Installing: a one-time state through Linear's authorize page and back.
    let start = send(
        Method::POST,
        &stack.url("/integrations/linear/install"),
        Some(json!({})),
    )
    .await
    .unwrap();
    assert_eq!(start.status, 200, "{}", start.body);
    let authorize = start.body["url"].as_str().unwrap().to_owned();
    assert!(
        authorize.contains("actor=app") && authorize.contains("state="),
        "{authorize}"
    );
    let approved = no_redirects().get(&authorize).send().await.unwrap();
    assert_eq!(approved.status(), 302);
    let back = approved.headers()["location"].to_str().unwrap().to_owned();
    assert!(
        back.starts_with(&stack.url("/integrations/linear/callback")),
        "{back}"
    );
    let done = no_redirects().get(&back).send().await.unwrap();
    assert_eq!(
        done.status(),
        302,
        "{}",
        done.text().await.unwrap_or_default()
    );
    let replayed = no_redirects().get(&back).send().await.unwrap();
    assert_eq!(replayed.status(), 403, "a state is good once");
    let forged_state = no_redirects()
        .get(stack.url("/integrations/linear/callback?code=x&state=0123456789abcdef0123"))
        .send()
        .await
        .unwrap();
    assert_eq!(forged_state.status(), 403);
    let status = get(&stack.url("/integrations/linear")).await.unwrap();
    assert_eq!(status.status, 200);
    assert_eq!(status.body["configured"], true);
    assert_eq!(
        status.body["installations"][0]["organizationId"],
        ORGANIZATION
    );
    assert!(
        !status.body.to_string().contains("lin_oauth_"),
        "no token in an answer"
    );

    // From Settings › Linear: ENG's issues go to the demo repository, and issues move when
    // work starts.
    inspect_tests::browser::run_script(
        "linear-settings.mjs",
        &stack.base_url,
        &inspect_tests::browser::artifacts("linear"),
        &[],
    );
    let saved = get(&stack.url("/integrations/linear")).await.unwrap();
    assert_eq!(
        saved.body["settings"]["teamMappings"][0]["target"], "local/demo",
        "{}",
        saved.body
    );
    assert_eq!(saved.body["settings"]["moveIssueOnStart"], true);
    let bad = send(
        Method::PUT,
        &stack.url("/integrations/linear/settings"),
        Some(json!({"teamMappings": [{"team": "ENG", "target": "nowhere"}]})),
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400);

    // Deliveries that are not Linear's, or not for us.
    linear.open_agent_session("as-1", "issue-1");
    let created = linear.event(
        "created",
        "as-1",
        "issue-1",
        "user-ann",
        Some("@inspect please take this"),
        None,
    );
    let forged = deliver_as(&stack, &created, Some("d-forged"), "not-the-secret").await;
    assert_eq!(forged.status(), 401);
    let mut stale = created.clone();
    stale["webhookTimestamp"] = json!(created["webhookTimestamp"].as_i64().unwrap() - 120_000);
    assert_eq!(
        deliver_as(&stack, &stale, Some("d-stale"), WEBHOOK_SECRET)
            .await
            .status(),
        401
    );
    assert_eq!(
        deliver_as(&stack, &created, None, WEBHOOK_SECRET)
            .await
            .status(),
        400
    );
    let malformed = json!({"type": "AgentSessionEvent", "action": "created", "webhookTimestamp": created["webhookTimestamp"]});
    assert_eq!(
        deliver_as(&stack, &malformed, Some("d-bad"), WEBHOOK_SECRET)
            .await
            .status(),
        400
    );
    let mut elsewhere = created.clone();
    elsewhere["organizationId"] = json!("org-other");
    assert!(deliver(&stack, &elsewhere, "d-elsewhere").await["ignored"].is_string());
    let comment = json!({"type": "Comment", "action": "create", "data": {"id": "x"}, "organizationId": ORGANIZATION, "webhookTimestamp": created["webhookTimestamp"]});
    assert!(deliver(&stack, &comment, "d-comment").await["ignored"].is_string());
    let foreign_issue = json!({"type": "Issue", "action": "create", "data": {"id": "x"}, "organizationId": "org-other", "webhookTimestamp": created["webhookTimestamp"]});
    assert!(deliver(&stack, &foreign_issue, "d-foreign-issue").await["ignored"].is_string());

    // The assignment: answered at once, one session whatever Linear redelivers.
    let sent_at = linear.elapsed_ms();
    let t0 = Instant::now();
    let first = deliver(&stack, &created, "d-1").await;
    assert_eq!(first["ok"], true);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "answered within Linear's 5 s"
    );
    assert_eq!(deliver(&stack, &created, "d-1").await["duplicate"], true);
    let again = deliver(&stack, &created, "d-1-again").await;
    assert_eq!(again["ok"], true);
    let thought = eventually(10, "the first thought", || {
        linear
            .activities("as-1")
            .into_iter()
            .find(|a| a.kind() == "thought")
    })
    .await;
    assert!(
        thought.at_ms - sent_at < 10_000,
        "the first activity within 10 s"
    );
    let session = eventually(60, "the session's link", || session_of(&linear, "as-1")).await;
    let answer = eventually(180, "the answer", || {
        responses(&linear, "as-1")
            .into_iter()
            .find(|r| r.contains("Fixed the login."))
    })
    .await;
    assert!(
        answer.starts_with("response: No pull request was opened."),
        "{answer}"
    );
    assert!(
        answer.contains("login.txt"),
        "the changed file is named: {answer}"
    );
    assert!(answer.contains(&format!("/sessions/{session}")), "{answer}");
    // One session: the redelivery under another id made none.
    let listed = get(&stack.url("/sessions")).await.unwrap();
    let titled: Vec<&Value> = listed.body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["title"] == "ENG-1: Login fails")
        .collect();
    assert_eq!(titled.len(), 1, "{}", listed.body);
    // The plan went through to completion; the tool showed as an ephemeral action.
    let plans: Vec<Value> = linear
        .session_updates("as-1")
        .into_iter()
        .filter_map(|u| u.get("plan").cloned())
        .collect();
    assert_eq!(plans.first().unwrap()[0]["status"], "inProgress");
    // No pull request was opened: the plan says so ("Open PR" canceled, the rest done).
    let last: Vec<&str> = plans
        .last()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        last,
        [
            "completed",
            "completed",
            "completed",
            "completed",
            "canceled"
        ],
        "{plans:?}"
    );
    // The redelivery under another id said nothing: one "On it" thought.
    let on_it = linear
        .activities("as-1")
        .into_iter()
        .filter(|a| a.kind() == "thought" && a.body().starts_with("On it"))
        .count();
    assert_eq!(on_it, 1, "{:?}", linear.activities("as-1"));
    let actions: Vec<_> = linear
        .activities("as-1")
        .into_iter()
        .filter(|a| a.kind() == "action")
        .collect();
    assert!(
        actions
            .iter()
            .any(|a| a.content["action"] == "bash" && a.ephemeral),
        "{actions:?}"
    );
    // The issue moved to the team's first started state.
    assert_eq!(
        linear.issue_updates(),
        vec![("issue-1".to_string(), json!({"stateId": "st-progress"}))]
    );
    // The agent was given the issue, its comments and the comment, as untrusted content.
    let first_prompt = model.requests()[0].to_string();
    assert!(
        first_prompt.contains("ENG-1: Login fails"),
        "{first_prompt}"
    );
    assert!(first_prompt.contains("Probably the hash length."));
    assert!(first_prompt.contains("linear_comment"));
    let state = get(&stack.url(&format!("/sessions/{session}")))
        .await
        .unwrap();
    assert_eq!(state.body["createdBy"], "linear:user-ann", "{}", state.body);

    // A follow-up in the agent session continues the same session, even after the app's
    // token was revoked (it is renewed and the call retried).
    let issued = linear.tokens_issued();
    linear.revoke_tokens();
    let follow = linear.event(
        "prompted",
        "as-1",
        "issue-1",
        "user-ann",
        None,
        Some(json!({"userId": "user-ann", "content": {"type": "prompt", "body": "also check the footer"}})),
    );
    deliver(&stack, &follow, "d-2").await;
    eventually(120, "the follow-up's answer", || {
        responses(&linear, "as-1")
            .into_iter()
            .find(|r| r.contains("Also checked the footer."))
    })
    .await;
    assert!(
        linear.tokens_issued() > issued,
        "a new token after the refusal"
    );
    assert!(linear
        .calls()
        .iter()
        .any(|c| c == "refused: authentication"));
    assert_eq!(session_of(&linear, "as-1").unwrap(), session);

    // A token Linear mints for another workspace (the app is installed in two) is checked
    // against the delivering one and not used: nothing is done there with it.
    linear.mint_for(Some("org-elsewhere"));
    linear.revoke_tokens();
    linear.open_agent_session("as-9", "issue-1");
    let wrong = linear.event("created", "as-9", "issue-1", "user-ann", None, None);
    deliver(&stack, &wrong, "d-2-wrong-workspace").await;
    eventually(30, "the minted token's workspace checked", || {
        linear
            .foreign_calls()
            .contains(&"viewer".to_string())
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        linear.foreign_calls().iter().all(|c| c == "viewer"),
        "only the check was made with the other workspace's token: {:?}",
        linear.foreign_calls()
    );
    assert!(session_of(&linear, "as-9").is_none());
    linear.mint_for(None);

    // An issue nobody mapped: the person is asked, and their answer starts it there.
    linear.open_agent_session("as-2", "issue-2");
    let ops = linear.event("created", "as-2", "issue-2", "user-ann", None, None);
    deliver(&stack, &ops, "d-3").await;
    let question = eventually(30, "the question", || {
        linear
            .activities("as-2")
            .into_iter()
            .find(|a| a.kind() == "elicitation")
    })
    .await;
    assert!(
        question.body().contains("local/other"),
        "{}",
        question.body()
    );
    let reply = linear.event(
        "prompted",
        "as-2",
        "issue-2",
        "user-ann",
        None,
        Some(json!({"userId": "user-ann", "content": {"type": "prompt", "body": "local/other"}})),
    );
    deliver(&stack, &reply, "d-4").await;
    let other_session = eventually(60, "the picked session", || session_of(&linear, "as-2")).await;
    eventually(120, "the picked session's answer", || {
        responses(&linear, "as-2")
            .into_iter()
            .find(|r| r.contains("Worked in the other repository."))
    })
    .await;
    let picked = get(&stack.url(&format!("/sessions/{other_session}")))
        .await
        .unwrap();
    assert_eq!(picked.body["repoName"], "other", "{}", picked.body);
    // Linear redelivering the answer (the same delivery id) starts nothing more.
    assert_eq!(deliver(&stack, &reply, "d-4").await["duplicate"], true);

    // An automation on Linear issues: one labelled for it, created, starts one run (its
    // redelivery none); a move into a state no trigger watches starts nothing.
    let made = send(
        Method::POST,
        &stack.url("/automations"),
        Some(
            json!({"name": "Triage labelled issues", "triggerType": "linear_issue",
                    "repositories": [{"owner": "local", "name": "demo"}],
                    "instructions": "Triage the issue: find the cause and say it.",
                    "linear": {"event": "created", "team": "ENG", "label": "agent-triage"}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(made.status, 201, "{}", made.body);
    let automation = made.body["automation"]["id"].as_str().unwrap().to_owned();
    let refused = send(
        Method::POST,
        &stack.url("/automations"),
        Some(
            json!({"name": "No state", "triggerType": "linear_issue", "instructions": "x",
                    "linear": {"event": "moved_to_state"}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(refused.status, 400, "{}", refused.body);
    let created_issue = linear.issue_event("create", "issue-5", None);
    assert_eq!(
        deliver(&stack, &created_issue, "d-issue-5").await["ok"],
        true
    );
    assert_eq!(
        deliver(&stack, &created_issue, "d-issue-5-again").await["ok"],
        true
    );
    linear.set_state("issue-5", "st-review");
    let moved = linear.issue_event("update", "issue-5", Some(json!({"stateId": "st-todo"})));
    deliver(&stack, &moved, "d-issue-5-moved").await;
    let deadline = Instant::now() + Duration::from_secs(120);
    let runs = loop {
        let runs = get(&stack.url(&format!("/automations/{automation}/runs")))
            .await
            .unwrap();
        let list = runs.body["runs"].as_array().cloned().unwrap_or_default();
        if list.iter().any(|r| r["status"] == "completed") {
            break list;
        }
        assert!(
            Instant::now() < deadline,
            "the automation's run: {} (model replies left {}, asked {} times; the last: {}; sandboxes: {})",
            runs.body,
            model.remaining(),
            model.requests().len(),
            model
                .requests()
                .last()
                .map(|r| r.to_string().chars().take(2000).collect::<String>())
                .unwrap_or_default(),
            host.sandbox_logs().chars().rev().take(4000).collect::<String>().chars().rev().collect::<String>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let started: Vec<&Value> = runs.iter().filter(|r| r["status"] != "skipped").collect();
    assert_eq!(started.len(), 1, "one run for the issue: {runs:?}");
    assert_eq!(started[0]["trigger"], "linear", "{}", started[0]);
    let automation_prompt = model
        .requests()
        .iter()
        .map(|r| r.to_string())
        .find(|r| r.contains("LINEAR ISSUE"))
        .expect("the run's prompt shows the issue");
    assert!(automation_prompt.contains("Flaky checkout test"));

    // The stop signal stops a running turn, and the agent session hears so.
    let long = linear.event(
        "prompted",
        "as-1",
        "issue-1",
        "user-ann",
        None,
        Some(json!({"userId": "user-ann", "content": {"type": "prompt", "body": "run the long check"}})),
    );
    deliver(&stack, &long, "d-5").await;
    eventually(120, "the long tool to run", || {
        linear
            .activities("as-1")
            .into_iter()
            .find(|a| a.kind() == "action" && a.content["parameter"] == "a long check")
    })
    .await;
    let stop = linear.event(
        "prompted",
        "as-1",
        "issue-1",
        "user-ann",
        None,
        Some(json!({"userId": "user-ann", "signal": "stop", "content": {"type": "prompt", "body": "Stop"}})),
    );
    deliver(&stack, &stop, "d-6").await;
    let stopped = eventually(60, "the stop's word", || {
        responses(&linear, "as-1")
            .into_iter()
            .find(|r| r.contains("Stopped"))
    })
    .await;
    assert!(stopped.starts_with("response:"), "{stopped}");
    // After the stop, a prompt starts nothing.
    let after = linear.event(
        "prompted",
        "as-1",
        "issue-1",
        "user-ann",
        None,
        Some(json!({"userId": "user-ann", "content": {"type": "prompt", "body": "and more"}})),
    );
    deliver(&stack, &after, "d-7").await;
    eventually(30, "the word that it was stopped", || {
        linear
            .activities("as-1")
            .into_iter()
            .find(|a| a.body().contains("was stopped"))
    })
    .await;

    // Nothing the fake refused, and no token of the app's in the Worker's log.
    let refused: Vec<String> = linear
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("refused") && c != "refused: authentication")
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    let log = stack.log();
    for token in linear.issued_tokens() {
        assert!(!log.contains(&token), "a Linear token in the log");
    }
}
