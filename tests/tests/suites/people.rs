//! One person across every door, through the real Worker (wrangler dev), the local sandbox
//! host, the real supervisor, git and OpenCode, against the fake GitHub and the fake Slack:
//! a Slack user linked by a one-time code starts a session in a thread and the pull request
//! is opened with *their* GitHub token; link codes refuse replays, expiry and a second
//! person; the email rule links only on an address Slack confirmed; members are refused
//! what the deployment shares, admins give roles; Google sign-in (against a fake OpenID
//! provider that signs with rotating keys) admits an allowed Workspace domain, links to the
//! GitHub person with the same verified address, and refuses every bad token.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{as_person, send};
use inspect_tests::fakes::github::{Account, FakeGitHub};
use inspect_tests::fakes::google::{FakeGoogle, Flaw, GoogleAccount};
use inspect_tests::fakes::model::Reply;
use inspect_tests::fakes::slack::{envelope, signed, FakeSlack, BOT_USER, SIGNING_SECRET};
use inspect_tests::repo::{git, init_repo};
use inspect_tests::{Stack, StackOptions};
use reqwest::header::COOKIE;
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

const CHANNEL: &str = "CENG";

fn accounts() -> Vec<Account> {
    vec![
        Account {
            id: 1001,
            login: "alice".into(),
            emails: vec![("alice@example.com".into(), true)],
            orgs: vec![],
        },
        Account {
            id: 1002,
            login: "carol".into(),
            emails: vec![
                ("carol@home.example".into(), true),
                ("carol@corp.example".into(), true),
            ],
            orgs: vec![],
        },
    ]
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

/// A mention of the bot, stored in the fake Slack and delivered as Slack sends it.
async fn mention(
    stack: &Stack,
    slack: &FakeSlack,
    event_id: &str,
    user: &str,
    text: &str,
) -> String {
    let text = format!("<@{BOT_USER}> {text}");
    let ts = slack.human_message(CHANNEL, user, &text, None);
    let event =
        json!({"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": CHANNEL});
    let (stamp, sig, bytes) = signed(&envelope(event_id, event), SIGNING_SECRET);
    let r = reqwest::Client::new()
        .post(stack.url("/webhooks/slack/events"))
        .header("X-Slack-Request-Timestamp", stamp.to_string())
        .header("X-Slack-Signature", sig)
        .header("Content-Type", "application/json")
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    ts
}

/// The `/inspect` slash command, form-encoded and signed as Slack sends it.
async fn slash(stack: &Stack, user: &str, text: &str, secret: &str) -> (u16, Value) {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("token", "deprecated-verification-token")
        .append_pair("team_id", "T1")
        .append_pair("channel_id", CHANNEL)
        .append_pair("user_id", user)
        .append_pair("user_name", "ann")
        .append_pair("command", "/inspect")
        .append_pair("text", text)
        .append_pair("response_url", "https://hooks.slack.com/commands/T1/1/x")
        .finish();
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let r = reqwest::Client::new()
        .post(stack.url("/webhooks/slack/commands"))
        .header("X-Slack-Request-Timestamp", ts.to_string())
        .header(
            "X-Slack-Signature",
            inspect_tests::signing::slack(secret, ts, body.as_bytes()),
        )
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// The link code in a bot's private answer.
fn code_in(text: &str) -> String {
    let at = text.find("link=").expect("a link in the answer") + 5;
    text[at..at + 32].to_owned()
}

fn slack_team(slack: &FakeSlack) {
    slack.add_user("U1", "Ann", "ann@slack-only.example");
    // Bob's confirmed address is one of carol's verified ones.
    slack.add_user("U2", "Bob", "Carol@Corp.Example");
    // Eve claims alice's address, but Slack never confirmed it.
    slack.add_user("U3", "Eve", "alice@example.com");
    slack.unconfirm_email("U3");
    slack.add_channel(CHANNEL, "eng", "shipping the storefront");
}

/// A repository on the fake GitHub with one commit on `main`.
fn github_repo(gh: &FakeGitHub, owner: &str, name: &str) {
    let work = tempfile::tempdir().unwrap();
    init_repo(work.path());
    let bare = gh.repos_root.join(owner).join(format!("{name}.git"));
    std::fs::create_dir_all(bare.parent().unwrap()).unwrap();
    git(
        work.path(),
        &["clone", "--quiet", "--bare", ".", bare.to_str().unwrap()],
    );
}

/// Runs one SQL statement on the stack's local D1 (the file wrangler keeps).
fn d1_exec(state: &Path, sql: &str) {
    let mut dirs = vec![state.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "sqlite") {
                let has = std::process::Command::new("sqlite3")
                    .arg(&p)
                    .arg("SELECT name FROM sqlite_master WHERE name = 'link_codes'")
                    .output()
                    .unwrap();
                if !has.stdout.is_empty() {
                    let o = std::process::Command::new("sqlite3")
                        .arg(&p)
                        .arg(sql)
                        .output()
                        .unwrap();
                    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                    return;
                }
            }
        }
    }
    panic!("no D1 database with link_codes under {}", state.display());
}

#[tokio::test]
async fn a_person_linked_from_slack_gets_their_own_pull_request() {
    let gh = FakeGitHub::start(accounts()).await.unwrap();
    github_repo(&gh, "acme", "web");
    let slack = FakeSlack::start().await.unwrap();
    slack_team(&slack);
    let mut vars = gh.worker_vars();
    vars.extend(slack.worker_vars());
    vars.push(("SLACK_MODELS".into(), "inspect/fake-model".into()));
    vars.push(("ALLOWED_USERS".into(), "alice,carol".into()));
    // Two sessions an hour a person: the one from Slack counts against alice's too.
    vars.push(("RATE_LIMIT_SESSIONS_PER_HOUR".into(), "2".into()));
    let AgentStack {
        model: _model,
        host,
        stack,
    } = AgentStack::start(
        vec![
            Reply::tool("write", json!({"filePath": "notes.md", "content": "notes\n"})),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'Add notes' --body 'Notes.'", "description": "open a PR"}),
            ),
            Reply::text("Opened the pull request."),
        ],
        vars,
    )
    .await
    .unwrap();
    let alice = gh.browser_sign_in(&stack.base_url, "alice").await.unwrap();

    // Ann asks the bot to link her in the channel: the link comes only to her.
    let asked = mention(&stack, &slack, "EvL1", "U1", "link").await;
    let private = eventually(30, "the private link", || {
        slack
            .ephemeral()
            .into_iter()
            .find(|m| m["user"] == "U1" && m["text"].as_str().unwrap_or("").contains("link="))
    })
    .await;
    assert_eq!(private["channel"], CHANNEL);
    let text = private["text"].as_str().unwrap();
    assert!(
        text.contains(&stack.url("/settings/account?link=")),
        "{text}"
    );
    let code = code_in(text);
    assert!(
        !slack
            .bot_messages(CHANNEL, &asked)
            .iter()
            .any(|m| m.text.contains(&code) || m.blocks.to_string().contains(&code)),
        "the code was never posted where others see it"
    );
    // Alice, signed in, opens it: Ann's Slack user is now alice.
    let (status, linked) = as_person(
        &stack,
        &alice,
        Method::POST,
        "/auth/identities/link",
        Some(json!({"code": code})),
    )
    .await;
    assert_eq!(status, 200, "{linked}");
    assert_eq!(linked["identity"], "slack:U1");
    assert_eq!(linked["rule"], "code");
    assert_eq!(linked["name"], "Ann");
    // Single use.
    let (status, again) = as_person(
        &stack,
        &alice,
        Method::POST,
        "/auth/identities/link",
        Some(json!({"code": code})),
    )
    .await;
    assert_eq!(status, 400, "{again}");
    assert!(again["error"]["message"]
        .as_str()
        .unwrap()
        .contains("already used"));

    // Alice wants to hear in Slack when a prompt of hers finishes.
    let (status, prefs) = as_person(
        &stack,
        &alice,
        Method::PUT,
        "/notifications/preferences",
        Some(json!({"kinds": {"prompt_finished": {"slack": true}}})),
    )
    .await;
    assert_eq!(status, 200, "{prefs}");

    // Ann asks for work in the channel: the session is alice's, and so is the PR.
    let asked = mention(&stack, &slack, "EvW1", "U1", "add notes and open a PR").await;
    let deadline = Instant::now() + Duration::from_secs(180);
    let pr = loop {
        if let Some(pr) = gh.pulls().into_iter().next() {
            break pr;
        }
        assert!(
            Instant::now() < deadline,
            "no pull request; the thread: {:?}\n{}",
            slack.bot_messages(CHANNEL, &asked),
            host.sandbox_logs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(pr.author, "alice", "{pr:?}\n{}", host.sandbox_logs());
    let id = pr.head.trim_start_matches("open-inspect/").to_owned();
    let state = send(Method::GET, &stack.url(&format!("/sessions/{id}")), None)
        .await
        .unwrap();
    assert_eq!(state.body["createdBy"], "github:1001", "{}", state.body);
    // Its door is Slack's, for the analytics page.
    let sources = send(Method::GET, &stack.url("/usage?by=source"), None)
        .await
        .unwrap();
    assert!(
        sources.body["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["key"] == "slack"),
        "{}",
        sources.body
    );
    // The prompt's end reaches her as a direct message, with the session's link.
    let dm = eventually(60, "the direct message", || {
        slack.direct_messages("U1").into_iter().next()
    })
    .await;
    assert!(dm.text.contains("Finished"), "{dm:?}");
    assert!(dm.text.contains(&format!("/sessions/{id}")), "{dm:?}");
    // The commit carries her name.
    let bare = gh.repos_root.join("acme/web.git");
    let log = git(&bare, &["log", "-1", "--format=%an", &pr.head]);
    assert_eq!(log, "alice");
    // Alice joins from the web too: presence shows one person, not a Slack stranger.
    let (status, token) = as_person(
        &stack,
        &alice,
        Method::POST,
        &format!("/sessions/{id}/ws-token"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{token}");
    let (_, people) = as_person(
        &stack,
        &alice,
        Method::GET,
        &format!("/sessions/{id}/participants"),
        None,
    )
    .await;
    let who: Vec<&str> = people["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["userId"].as_str().unwrap())
        .collect();
    assert_eq!(who, ["github:1001"], "{people}");
    // Her sessions list has it, once, as hers.
    let (_, mine) = as_person(&stack, &alice, Method::GET, "/sessions?mine=true", None).await;
    let listed: Vec<&Value> = mine["sessions"]
        .as_array()
        .map(|a| a.iter().filter(|s| s["id"] == id.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(listed.len(), 1, "{mine}");

    // The rate limit counts her once, whichever door she came through.
    let create = json!({"repoOwner": "acme", "repoName": "web"});
    let (status, body) = as_person(
        &stack,
        &alice,
        Method::POST,
        "/sessions",
        Some(create.clone()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = as_person(&stack, &alice, Method::POST, "/sessions", Some(create)).await;
    assert_eq!(status, 429, "the Slack session counted as alice's: {body}");

    // Unlinking leaves the session with alice.
    let (status, ids) = as_person(&stack, &alice, Method::GET, "/auth/identities", None).await;
    assert_eq!(status, 200);
    assert_eq!(ids["signIn"], "github:1001");
    assert_eq!(ids["linked"][0]["identity"], "slack:U1");
    let (status, body) = as_person(
        &stack,
        &alice,
        Method::DELETE,
        "/auth/identities/slack:U1",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let state = send(Method::GET, &stack.url(&format!("/sessions/{id}")), None)
        .await
        .unwrap();
    assert_eq!(state.body["createdBy"], "github:1001");
    let (_, ids) = as_person(&stack, &alice, Method::GET, "/auth/identities", None).await;
    assert_eq!(ids["linked"], json!([]));
}

#[tokio::test]
async fn link_codes_and_the_email_rule_refuse_what_they_must() {
    let gh = FakeGitHub::start(accounts()).await.unwrap();
    let slack = FakeSlack::start().await.unwrap();
    slack_team(&slack);
    let mut vars = gh.worker_vars();
    vars.extend(slack.worker_vars());
    vars.push(("ALLOWED_USERS".into(), "alice,carol".into()));
    let stack = Stack::start_with(StackOptions {
        vars,
        local_mode: false,
        ..Default::default()
    })
    .await
    .unwrap();
    let alice = gh.browser_sign_in(&stack.base_url, "alice").await.unwrap();
    let carol = gh.browser_sign_in(&stack.base_url, "carol").await.unwrap();
    let link = |cookie: String, code: String| {
        let stack = &stack;
        async move {
            as_person(
                stack,
                &cookie,
                Method::POST,
                "/auth/identities/link",
                Some(json!({ "code": code })),
            )
            .await
        }
    };

    // The slash command answers only Ann, at once; help for anything else; a forged one
    // is refused.
    let (status, answer) = slash(&stack, "U1", "link", SIGNING_SECRET).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response_type"], "ephemeral");
    let expired = code_in(answer["text"].as_str().unwrap());
    let (_, help) = slash(&stack, "U1", "", SIGNING_SECRET).await;
    assert!(
        help["text"].as_str().unwrap().contains("/inspect link"),
        "{help}"
    );
    let (status, _) = slash(&stack, "U1", "link", "not-the-secret").await;
    assert_eq!(status, 401);

    // An expired code links nobody.
    d1_exec(stack.state_dir(), "UPDATE link_codes SET expires_at = 1");
    let (status, body) = link(alice.clone(), expired.clone()).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{body}"
    );
    // Not a code at all; a made-up one.
    let (status, _) = link(alice.clone(), "nope".into()).await;
    assert_eq!(status, 400);
    let (status, _) = link(alice.clone(), "0123456789abcdef0123456789abcdef".into()).await;
    assert_eq!(status, 400);

    // Alice links Ann; a new code for Ann opened by carol is refused: nothing is carol's.
    let (_, answer) = slash(&stack, "U1", "link", SIGNING_SECRET).await;
    let (status, body) = link(alice.clone(), code_in(answer["text"].as_str().unwrap())).await;
    assert_eq!(status, 200, "{body}");
    let (_, answer) = slash(&stack, "U1", "link", SIGNING_SECRET).await;
    let (status, body) = link(carol.clone(), code_in(answer["text"].as_str().unwrap())).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("another person"));
    let (_, ids) = as_person(&stack, &carol, Method::GET, "/auth/identities", None).await;
    assert_eq!(ids["linked"], json!([]), "{ids}");
    // Nor may carol unlink what is alice's.
    let (status, _) = as_person(
        &stack,
        &carol,
        Method::DELETE,
        "/auth/identities/slack:U1",
        None,
    )
    .await;
    assert_eq!(status, 404);
    // A personal API token does not link: a person at a browser does.
    let (status, token) = as_person(
        &stack,
        &alice,
        Method::POST,
        "/tokens",
        Some(json!({"name": "ci"})),
    )
    .await;
    assert_eq!(status, 201, "{token}");
    let (_, answer) = slash(&stack, "U4", "link", SIGNING_SECRET).await;
    let by_token = reqwest::Client::new()
        .post(stack.url("/auth/identities/link"))
        .bearer_auth(token["token"].as_str().unwrap())
        .json(&json!({"code": code_in(answer["text"].as_str().unwrap())}))
        .send()
        .await
        .unwrap();
    assert_eq!(by_token.status(), 403);

    // The email rule: Bob's address, which Slack confirmed, is one of carol's verified
    // ones: he is carol as soon as he asks. Eve's unconfirmed claim on alice's address
    // links nobody.
    let bobs = mention(&stack, &slack, "EvB1", "U2", "hello there").await;
    let eves = mention(&stack, &slack, "EvE1", "U3", "hello there").await;
    let linked = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, ids) = as_person(&stack, &carol, Method::GET, "/auth/identities", None).await;
            if ids["linked"].as_array().is_some_and(|l| !l.is_empty()) {
                break ids;
            }
            assert!(Instant::now() < deadline, "Bob was never linked: {ids}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    assert_eq!(linked["linked"][0]["identity"], "slack:U2", "{linked}");
    assert_eq!(linked["linked"][0]["rule"], "email");
    // Both mentions were handled (the bot answered each) before this is read.
    eventually(30, "both mentions answered", || {
        (!slack.bot_messages(CHANNEL, &bobs).is_empty()
            && !slack.bot_messages(CHANNEL, &eves).is_empty())
        .then_some(())
    })
    .await;
    let (_, ids) = as_person(&stack, &alice, Method::GET, "/auth/identities", None).await;
    let mine: Vec<&str> = ids["linked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["identity"].as_str().unwrap())
        .collect();
    assert_eq!(
        mine,
        ["slack:U1"],
        "Eve's unconfirmed address linked nobody"
    );
}

#[tokio::test]
async fn members_are_refused_what_the_deployment_shares() {
    let gh = FakeGitHub::start(accounts()).await.unwrap();
    let mut vars = gh.worker_vars();
    vars.push(("ALLOWED_USERS".into(), "alice,carol".into()));
    vars.push(("ADMIN_USERS".into(), "alice".into()));
    let stack = Stack::start_with(StackOptions {
        vars,
        local_mode: false,
        ..Default::default()
    })
    .await
    .unwrap();
    let alice = gh.browser_sign_in(&stack.base_url, "alice").await.unwrap();
    let carol = gh.browser_sign_in(&stack.base_url, "carol").await.unwrap();
    let (_, me) = as_person(&stack, &alice, Method::GET, "/auth/me", None).await;
    assert_eq!(me["role"], "admin", "{me}");
    let (_, me) = as_person(&stack, &carol, Method::GET, "/auth/me", None).await;
    assert_eq!(me["role"], "member", "{me}");

    // What the deployment shares: a member is refused, with the reason.
    let shared = [
        (
            Method::PUT,
            "/settings/models",
            json!({"enabled": [], "defaultModel": null}),
        ),
        (
            Method::POST,
            "/environments",
            json!({"name": "e", "repositories": [{"owner": "acme", "name": "web"}]}),
        ),
        (Method::PUT, "/secrets", json!({"secrets": {"A": "b"}})),
        (
            Method::POST,
            "/skills",
            json!({"name": "s", "description": "d", "body": "b"}),
        ),
        (Method::POST, "/mcp-servers", json!({"name": "m"})),
        (Method::PUT, "/integrations/slack/settings", json!({})),
        (Method::GET, "/people", Value::Null),
    ];
    for (method, path, body) in &shared {
        let body = (!body.is_null()).then(|| body.clone());
        let (status, answer) = as_person(&stack, &carol, method.clone(), path, body).await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("for admins"),
            "{answer}"
        );
    }
    // What is her own stays hers.
    let (status, _) = as_person(
        &stack,
        &carol,
        Method::POST,
        "/tokens",
        Some(json!({"name": "mine"})),
    )
    .await;
    assert_eq!(status, 201);
    let (status, _) = as_person(&stack, &carol, Method::GET, "/secrets", None).await;
    assert_eq!(status, 200);
    let automation = json!({"name": "n", "triggerType": "webhook", "instructions": "look",
                            "repositories": [{"owner": "acme", "name": "web"}]});
    let (status, alices) = as_person(
        &stack,
        &alice,
        Method::POST,
        "/automations",
        Some(automation.clone()),
    )
    .await;
    assert_eq!(status, 201, "{alices}");
    let alices = alices["automation"]["id"].as_str().unwrap().to_owned();
    let (status, carols) = as_person(
        &stack,
        &carol,
        Method::POST,
        "/automations",
        Some(automation),
    )
    .await;
    assert_eq!(status, 201, "{carols}");
    let carols = carols["automation"]["id"].as_str().unwrap().to_owned();
    let (status, _) = as_person(
        &stack,
        &carol,
        Method::POST,
        &format!("/automations/{carols}/pause"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, answer) = as_person(
        &stack,
        &carol,
        Method::POST,
        &format!("/automations/{alices}/pause"),
        None,
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    let (status, _) = as_person(
        &stack,
        &carol,
        Method::DELETE,
        &format!("/automations/{alices}"),
        None,
    )
    .await;
    assert_eq!(status, 403);
    // An admin may change another's.
    let (status, _) = as_person(
        &stack,
        &alice,
        Method::POST,
        &format!("/automations/{carols}/resume"),
        None,
    )
    .await;
    assert_eq!(status, 200);

    // Admins give roles in the app; the setting's admin is changed only there, and the
    // last admin stays one.
    let (status, people) = as_person(&stack, &alice, Method::GET, "/people", None).await;
    assert_eq!(status, 200, "{people}");
    let roles: Vec<(String, String, String)> = people["people"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["userId"].as_str().unwrap().to_owned(),
                p["role"].as_str().unwrap().to_owned(),
                p["roleSource"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        roles.contains(&("github:1001".into(), "admin".into(), "setting".into())),
        "{roles:?}"
    );
    assert!(
        roles.contains(&("github:1002".into(), "member".into(), "default".into())),
        "{roles:?}"
    );
    let set_role = |cookie: &str, user: &str, role: &str| {
        let (stack, cookie) = (&stack, cookie.to_owned());
        let (path, body) = (format!("/people/{user}/role"), json!({ "role": role }));
        async move { as_person(stack, &cookie, Method::PUT, &path, Some(body)).await }
    };
    let (status, body) = set_role(&alice, "github:1001", "member").await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = set_role(&alice, "github:1002", "boss").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = set_role(&alice, "github:9999", "admin").await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = set_role(&alice, "github:1002", "admin").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["roleSource"], "app");
    let (_, me) = as_person(&stack, &carol, Method::GET, "/auth/me", None).await;
    assert_eq!(me["role"], "admin", "{me}");
    let (status, answer) = as_person(&stack, &carol, Method::GET, "/people", None).await;
    assert_eq!(status, 200, "{answer}");
    // A member may not make herself an admin.
    let (status, _) = set_role(&alice, "github:1002", "member").await;
    assert_eq!(status, 200);
    let (status, _) = set_role(&carol, "github:1002", "admin").await;
    assert_eq!(status, 403);
}

/// Walks a browser through the Worker's Google sign-in as `account`: the session cookie, or
/// the callback's refusal.
async fn google_sign_in(
    stack: &Stack,
    google: &FakeGoogle,
    account: &GoogleAccount,
) -> Result<String, (u16, Value)> {
    google.sign_in_as(account.clone());
    let b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let start = b
        .get(stack.url("/auth/google?returnTo=/settings"))
        .send()
        .await
        .unwrap();
    assert_eq!(start.status(), 302, "{:?}", start.text().await);
    let cookie_of = inspect_tests::client::set_cookie;
    let state = cookie_of(&start, "inspect_oauth_state").unwrap();
    let to_google = start.headers()[reqwest::header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(to_google.starts_with(&format!("{}/o/oauth2/v2/auth?", google.base_url)));
    assert!(
        to_google.contains("code_challenge_method=S256"),
        "{to_google}"
    );
    let back = b.get(&to_google).send().await.unwrap();
    assert_eq!(back.status(), 302, "{:?}", back.text().await);
    let callback = back.headers()[reqwest::header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned();
    let done = b
        .get(&callback)
        .header(COOKIE, format!("inspect_oauth_state={state}"))
        .send()
        .await
        .unwrap();
    if done.status() == 302 {
        assert_eq!(done.headers()[reqwest::header::LOCATION], "/settings");
        // The same callback again: its state was used.
        let again = b
            .get(&callback)
            .header(COOKIE, format!("inspect_oauth_state={state}"))
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 400);
        return Ok(cookie_of(&done, "inspect_session").unwrap());
    }
    let status = done.status().as_u16();
    Err((status, done.json().await.unwrap_or(Value::Null)))
}

fn workspace(sub: &str, email: &str, hd: Option<&str>, verified: bool) -> GoogleAccount {
    GoogleAccount {
        sub: sub.into(),
        email: email.into(),
        email_verified: verified,
        hd: hd.map(str::to_owned),
        name: email.split('@').next().unwrap().into(),
    }
}

#[tokio::test]
async fn google_sign_in_admits_an_allowed_domain_and_refuses_the_rest() {
    let gh = FakeGitHub::start(accounts()).await.unwrap();
    let google = FakeGoogle::start().await.unwrap();
    let mut vars = gh.worker_vars();
    vars.extend(google.worker_vars());
    vars.push(("ALLOWED_USERS".into(), "carol".into()));
    vars.push(("ALLOWED_EMAIL_DOMAINS".into(), "corp.example".into()));
    vars.push(("GOOGLE_WORKSPACE_DOMAINS".into(), "corp.example".into()));
    let stack = Stack::start_with(StackOptions {
        vars,
        local_mode: false,
        ..Default::default()
    })
    .await
    .unwrap();
    let offered = send(Method::GET, &stack.url("/auth/providers"), None)
        .await
        .unwrap();
    assert_eq!(offered.body, json!({"github": true, "google": true}));

    // A Workspace account of the allowed domain is admitted, as a person of its own.
    let dana = workspace("1001001", "dana@corp.example", Some("corp.example"), true);
    let cookie = google_sign_in(&stack, &google, &dana).await.unwrap();
    let (_, me) = as_person(&stack, &cookie, Method::GET, "/auth/me", None).await;
    assert_eq!(me["user"]["userId"], "google:1001001", "{me}");
    assert_eq!(me["user"]["email"], "dana@corp.example");
    assert_eq!(me["via"], "browser");
    assert_eq!(google.key_fetches(), 1);
    // Again: the same person, the keys kept.
    let again = google_sign_in(&stack, &google, &dana).await.unwrap();
    let (_, me) = as_person(&stack, &again, Method::GET, "/auth/me", None).await;
    assert_eq!(me["user"]["userId"], "google:1001001", "{me}");
    assert_eq!(google.key_fetches(), 1, "the keys were kept");

    // Carol signed in with GitHub, where corp.example is a verified address of hers: her
    // Google account is her, linked by the email rule.
    let carol_gh = gh.browser_sign_in(&stack.base_url, "carol").await.unwrap();
    let carol = workspace("2002002", "carol@corp.example", Some("corp.example"), true);
    let cookie = google_sign_in(&stack, &google, &carol).await.unwrap();
    let (_, me) = as_person(&stack, &cookie, Method::GET, "/auth/me", None).await;
    assert_eq!(me["user"]["userId"], "github:1002", "{me}");
    let (_, ids) = as_person(&stack, &carol_gh, Method::GET, "/auth/identities", None).await;
    assert_eq!(ids["linked"][0]["identity"], "google:2002002", "{ids}");
    assert_eq!(ids["linked"][0]["rule"], "email");

    // Refused, each with its reason, and nobody signed in.
    let refused = [
        (
            workspace("3", "eve@gmail.com", None, true),
            None,
            "Workspace",
        ),
        (
            workspace("4", "mallory@other.example", Some("other.example"), true),
            None,
            "Workspace",
        ),
        (
            workspace("5", "frank@corp.example", Some("corp.example"), false),
            None,
            "not verified",
        ),
        (dana.clone(), Some(Flaw::Audience), "audience"),
        (dana.clone(), Some(Flaw::Expired), "expired"),
        (dana.clone(), Some(Flaw::Unsigned), "RS256"),
        (dana.clone(), Some(Flaw::ForeignKey), "signature"),
    ];
    for (account, flaw, says) in refused {
        if let Some(f) = flaw {
            google.flaw_next(f);
        }
        let (status, body) = google_sign_in(&stack, &google, &account).await.unwrap_err();
        assert_eq!(status, 403, "{account:?} {flaw:?}: {body}");
        let why = body["error"]["message"].as_str().unwrap_or_default();
        assert!(why.contains(says), "{flaw:?}: {why} (wanted {says})");
    }

    // Google rotates its keys: a token signed with the new one is checked against the new
    // key, fetched once.
    google.rotate().unwrap();
    let cookie = google_sign_in(&stack, &google, &dana).await.unwrap();
    let (_, me) = as_person(&stack, &cookie, Method::GET, "/auth/me", None).await;
    assert_eq!(me["user"]["userId"], "google:1001001");
    assert!(google.key_fetches() >= 2, "the new key was fetched");
}
