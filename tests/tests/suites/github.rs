//! GitHub end to end, through the real Worker (wrangler dev), the local sandbox host, the
//! real supervisor, git and OpenCode, against a fake GitHub that follows GitHub's REST API
//! (and serves git through the real `git http-backend`): the bot answering a signed
//! webhook delivery, pull requests authored as the person or the App, reuse, and local
//! repositories that have no PR host.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::send;
use inspect_tests::fakes::github::{Account, FakeGitHub};
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::{commit_all, git, init_repo};
use inspect_tests::signing::github_webhook;
use inspect_tests::Stack;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const WEBHOOK_SECRET: &str = "webhook-secret-for-tests";

fn alice() -> Account {
    Account {
        id: 1001,
        login: "alice".into(),
        emails: vec![("alice@example.com".into(), true)],
        orgs: vec![],
    }
}

/// A repository on the fake GitHub: `main`, and `feat/login` one commit ahead.
fn github_repo(gh: &FakeGitHub, owner: &str, name: &str) {
    let work = tempfile::tempdir().unwrap();
    init_repo(work.path());
    git(work.path(), &["checkout", "--quiet", "-b", "feat/login"]);
    std::fs::write(work.path().join("login.txt"), "a login page\n").unwrap();
    commit_all(work.path(), "login page");
    git(work.path(), &["checkout", "--quiet", "main"]);
    let bare = gh.repos_root.join(owner).join(format!("{name}.git"));
    std::fs::create_dir_all(bare.parent().unwrap()).unwrap();
    git(
        work.path(),
        &["clone", "--quiet", "--bare", ".", bare.to_str().unwrap()],
    );
}

/// Polls until `f` answers, for at most `secs`.
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

/// Signs `login` in through the fake GitHub's OAuth flow (so the control plane keeps
/// their token).
async fn sign_in(base: &str, gh: &FakeGitHub, login: &str) {
    gh.sign_in_as(login);
    let b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let start = b.get(format!("{base}/auth/github")).send().await.unwrap();
    let state = start
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .find_map(|c| {
            c.to_str()
                .ok()?
                .split(';')
                .next()?
                .strip_prefix("inspect_oauth_state=")
                .map(str::to_owned)
        })
        .unwrap();
    let to_github = start.headers()[LOCATION].to_str().unwrap().to_owned();
    let back = b.get(&to_github).send().await.unwrap();
    let callback = back.headers()[LOCATION].to_str().unwrap().to_owned();
    let done = b
        .get(&callback)
        .header(COOKIE, format!("inspect_oauth_state={state}"))
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), StatusCode::FOUND, "{:?}", done.text().await);
}

/// The session's pull request artifacts, in the order recorded.
async fn pr_artifacts(stack: &Stack, id: &str) -> Vec<Value> {
    let artifacts = send(
        Method::GET,
        &stack.url(&format!("/sessions/{id}/artifacts")),
        None,
    )
    .await
    .unwrap();
    artifacts.body["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == "pr")
        .cloned()
        .collect()
}

/// Sends a delivery signed as GitHub signs it.
async fn deliver(base: &str, event: &str, delivery: &str, body: &Value) -> (u16, Value) {
    let raw = serde_json::to_vec(body).unwrap();
    let r = reqwest::Client::new()
        .post(format!("{base}/webhooks/github"))
        .header("X-GitHub-Event", event)
        .header("X-GitHub-Delivery", delivery)
        .header("X-Hub-Signature-256", github_webhook(WEBHOOK_SECRET, &raw))
        .header("Content-Type", "application/json")
        .body(raw)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn comment_delivery(
    gh: &FakeGitHub,
    number: i64,
    comment_id: i64,
    who: &Account,
    text: &str,
) -> Value {
    json!({
        "action": "created",
        "issue": {"number": number, "title": "Login page", "pull_request": {"url": format!("{}/repos/acme/web/pulls/{number}", gh.base_url)}},
        "comment": {"id": comment_id, "body": text, "user": {"id": who.id, "login": who.login, "type": "User"}},
        "repository": {"name": "web", "full_name": "acme/web", "private": true, "owner": {"login": "acme"}},
        "sender": {"id": who.id, "login": who.login, "type": "User"},
        "installation": {"id": 777}
    })
}

async fn sessions(base: &str) -> Vec<Value> {
    let r = send(Method::GET, &format!("{base}/sessions"), None)
        .await
        .unwrap();
    r.body["sessions"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn the_bot_answers_a_mention_with_a_pull_request_and_a_comment() {
    let gh = FakeGitHub::start(vec![alice()]).await.unwrap();
    github_repo(&gh, "acme", "web");
    let pr1 = gh.open_pull("acme", "web", "feat/login", "main", "Login page", "alice");
    gh.set_permission("acme", "web", "alice", "write");
    let mut vars = gh.worker_vars();
    vars.push(("GITHUB_WEBHOOK_SECRET".into(), WEBHOOK_SECRET.into()));
    vars.push(("ALLOWED_USERS".into(), "alice".into()));
    let AgentStack { model, host, stack } = AgentStack::start(
        vec![
            Reply::tool(
                "write",
                json!({"filePath": "login-test.txt", "content": "the flaky test, fixed\n"}),
            ),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'Fix the flaky login test' --body 'Retries the login test once.'", "description": "open a PR"}),
            ),
            Reply::text("I fixed the flaky login test and opened a pull request for it."),
        ],
        vars,
    )
    .await
    .unwrap();
    let base = stack.base_url.clone();
    // Alice signs in once: her GitHub token is kept (sealed) to author her PRs. It is an
    // expiring one (30 s), so it must be refreshed by the time the PR is made.
    gh.expire_user_tokens_after(30);
    sign_in(&base, &gh, "alice").await;
    // acme/web works with acme/api: its default environment holds both, so the bot's
    // session gets both (acme/web on the PR's branch).
    github_repo(&gh, "acme", "api");
    gh.set_permission("acme", "api", "alice", "write");
    let e = send(
        Method::POST,
        &stack.url("/environments"),
        Some(json!({"name": "web-stack", "repositories": [{"owner": "acme", "name": "web"}, {"owner": "acme", "name": "api"}]})),
    )
    .await
    .unwrap();
    assert_eq!(e.status, 201, "{}", e.body);
    let r = send(
        Method::PUT,
        &stack.url("/repos/acme/web/settings"),
        Some(json!({"botEnabled": true, "prLabel": "open-inspect", "defaultEnvironmentId": e.body["id"]})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);

    // Bad input at the door: nothing created by any of it.
    let raw = br#"{"action":"created"}"#.to_vec();
    let c = reqwest::Client::new();
    let unsigned = c
        .post(stack.url("/webhooks/github"))
        .header("X-GitHub-Event", "issue_comment")
        .body(raw.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), StatusCode::UNAUTHORIZED);
    let forged = c
        .post(stack.url("/webhooks/github"))
        .header("X-GitHub-Event", "issue_comment")
        .header(
            "X-Hub-Signature-256",
            github_webhook("not-the-secret", &raw),
        )
        .body(raw.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    let huge = vec![b' '; 2 * 1024 * 1024];
    let too_big = c
        .post(stack.url("/webhooks/github"))
        .header("X-GitHub-Event", "issue_comment")
        .header("X-Hub-Signature-256", github_webhook(WEBHOOK_SECRET, &huge))
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(too_big.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let (status, body) = deliver(&base, "star", "d-star", &json!({"action": "created"})).await;
    assert_eq!((status, body["skipped"].is_string()), (200, true), "{body}");
    let garbage = c
        .post(stack.url("/webhooks/github"))
        .header("X-GitHub-Event", "issue_comment")
        .header("X-GitHub-Delivery", "d-garbage")
        .header(
            "X-Hub-Signature-256",
            github_webhook(WEBHOOK_SECRET, b"{not json"),
        )
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), StatusCode::OK);
    // A comment that does not mention the bot is skipped.
    let who = alice();
    let quiet = comment_delivery(&gh, pr1, 1, &who, "looks good");
    let (status, body) = deliver(&base, "issue_comment", "d-quiet", &quiet).await;
    assert_eq!((status, body["skipped"].is_string()), (200, true), "{body}");
    assert!(sessions(&base).await.is_empty());

    // With a budget of the person's spent, a mention starts nothing: the bot says why on
    // the pull request, and no session is made.
    let pr0 = gh.open_pull("acme", "web", "feat/budget", "main", "Budget", "alice");
    let spent = send(
        Method::PUT,
        &stack.url("/budgets"),
        Some(json!({"scope": "person", "subject": "*", "metric": "tokens", "monthlyLimit": 0})),
    )
    .await
    .unwrap();
    assert_eq!(spent.status, 200, "{}", spent.body);
    let ask = "@inspect-bot please fix the flaky login test";
    let asked = gh.add_comment("acme", "web", pr0, "alice", ask);
    let refused = comment_delivery(&gh, pr0, asked, &who, ask);
    let (status, body) = deliver(&base, "issue_comment", "d-spent", &refused).await;
    assert_eq!(status, 202, "{body}");
    let said = eventually(30, "the bot's refusal", || {
        gh.comments()
            .into_iter()
            .find(|c| c.number == pr0 && c.author == FakeGitHub::BOT_LOGIN)
    })
    .await;
    assert!(
        said.body.starts_with("I could not start on this:") && said.body.contains("budget"),
        "{}",
        said.body
    );
    assert!(sessions(&base).await.is_empty());
    let lifted = send(
        Method::DELETE,
        &stack.url("/budgets?scope=person&subject=*&metric=tokens"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(lifted.status, 200, "{}", lifted.body);

    // The mention: accepted at once; its redelivery is a duplicate.
    let comment_id = gh.add_comment(
        "acme",
        "web",
        pr1,
        "alice",
        "@inspect-bot please fix the flaky login test",
    );
    let delivery = comment_delivery(
        &gh,
        pr1,
        comment_id,
        &who,
        "@inspect-bot please fix the flaky login test",
    );
    let (status, body) = deliver(
        &base,
        "issue_comment",
        "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        &delivery,
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = deliver(
        &base,
        "issue_comment",
        "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        &delivery,
    )
    .await;
    assert_eq!(
        (status, body["duplicate"].clone()),
        (200, json!(true)),
        "{body}"
    );

    // 👀 on the comment, by the App.
    eventually(30, "the 👀 reaction", || {
        gh.reactions()
            .into_iter()
            .find(|r| r.path == format!("/repos/acme/web/issues/comments/{comment_id}/reactions"))
    })
    .await;
    // One session, as alice, on the PR's branch.
    let deadline = Instant::now() + Duration::from_secs(30);
    let listed = loop {
        let list = sessions(&base).await;
        if !list.is_empty() || Instant::now() > deadline {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(listed.len(), 1, "{listed:?}");
    let session = &listed[0];
    let id = session["id"].as_str().unwrap().to_owned();
    assert_eq!(session["createdBy"], "github:1001");
    assert_eq!(session["repositories"][0]["branch"], "feat/login");
    assert_eq!(session["repositories"][1]["name"], "api", "{session}");
    let state = send(
        Method::GET,
        &stack.url(&format!("/sessions/{}", session["id"].as_str().unwrap())),
        None,
    )
    .await
    .unwrap();
    assert_eq!(state.body["environmentName"], "web-stack", "{}", state.body);

    // The agent's PR, authored with alice's own token, onto the PR's branch.
    let head = format!("open-inspect/{id}");
    let pr = eventually(180, "the agent's pull request", || {
        gh.pulls().into_iter().find(|p| p.head == head)
    })
    .await;
    assert_eq!(pr.author, "alice", "{pr:?}\n{}", host.sandbox_logs());
    assert!(gh.refreshes() >= 1, "the expiring token was not refreshed");
    assert_eq!(pr.base, "feat/login");
    assert_eq!(pr.title, "Fix the flaky login test");
    assert!(pr.body.contains(&format!("/sessions/{id})")), "{}", pr.body);
    // The branch carries the agent's file, committed with alice as author.
    let bare = gh.repos_root.join("acme/web.git");
    let log = git(&bare, &["log", "-1", "--format=%an|%s", &head]);
    assert!(log.starts_with("alice|"), "{log}");
    let file = git(&bare, &["show", &format!("{head}:login-test.txt")]);
    assert_eq!(file, "the flaky test, fixed");

    // The answer lands on the original PR as a comment by the App.
    let answer = eventually(120, "the result comment", || {
        gh.comments()
            .into_iter()
            .find(|c| c.number == pr1 && c.author == FakeGitHub::BOT_LOGIN)
    })
    .await;
    assert!(
        answer.body.contains("opened a pull request"),
        "{}",
        answer.body
    );
    assert!(
        answer.body.contains(&format!("/sessions/{id}")),
        "{}",
        answer.body
    );
    assert!(
        answer.body.contains(&format!("/pull/{}", pr.number)),
        "{}",
        answer.body
    );
    // The repository's label went on the agent's PR.
    let labelled = gh.pulls().into_iter().find(|p| p.head == head).unwrap();
    assert_eq!(labelled.labels, vec!["open-inspect".to_owned()]);

    // The session's artifact, and the list marks the session.
    let artifacts = send(
        Method::GET,
        &stack.url(&format!("/sessions/{id}/artifacts")),
        None,
    )
    .await
    .unwrap();
    let prs: Vec<&Value> = artifacts.body["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == "pr")
        .collect();
    assert_eq!(prs.len(), 1, "{}", artifacts.body);
    assert_eq!(prs[0]["metadata"]["number"], pr.number);
    assert_eq!(prs[0]["metadata"]["authoredAs"], "user");
    assert_eq!(prs[0]["metadata"]["base"], "feat/login");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = sessions(&base).await;
        if list[0]["prUrl"].is_string() {
            assert_eq!(list[0]["prState"], "open");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the list never showed the PR: {list:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let listed = send(Method::GET, &stack.url("/repos"), None).await.unwrap();
    assert!(
        listed.body.to_string().contains("\"web\""),
        "{}\n{}",
        listed.body,
        stack.log()
    );
    // What a person sees in the browser: the artifact with its state, the list's mark;
    // then the PR is merged on GitHub while the page is open, and GitHub says so.
    let out = inspect_tests::browser::artifacts("github");
    let _ = std::fs::remove_file(out.join("waiting-for-merge"));
    let browser = {
        let (base, out, id, number) = (base.clone(), out.clone(), id.clone(), pr.number);
        tokio::task::spawn_blocking(move || {
            inspect_tests::browser::run_script(
                "pull-request.mjs",
                &base,
                &out,
                &[("SESSION_ID", id), ("PR_NUMBER", number.to_string())],
            )
        })
    };
    eventually(120, "the browser waiting for the merge", || {
        out.join("waiting-for-merge").exists().then_some(())
    })
    .await;
    gh.close_pull("acme", "web", pr.number, true);
    let merged = json!({
        "action": "closed",
        "number": pr.number,
        "pull_request": gh.pull_json("acme", "web", pr.number).unwrap(),
        "repository": {"name": "web", "owner": {"login": "acme"}, "private": false},
        "sender": {"id": 1001, "login": "alice", "type": "User"},
    });
    let (status, said) = deliver(&base, "pull_request", "d-merged-1", &merged).await;
    assert_eq!(status, 202, "{said}");
    browser.await.unwrap();
    // The list follows, and a review is kept beside the state.
    let deadline = Instant::now() + Duration::from_secs(20);
    while sessions(&base).await[0]["prState"] != "merged" {
        assert!(Instant::now() < deadline, "the list never showed merged");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let reviewed = json!({
        "action": "submitted",
        "pull_request": gh.pull_json("acme", "web", pr.number).unwrap(),
        "review": {"state": "approved", "user": {"id": 7, "login": "bob", "type": "User"}},
        "repository": {"name": "web", "owner": {"login": "acme"}, "private": false},
        "sender": {"id": 7, "login": "bob", "type": "User"},
    });
    assert_eq!(
        deliver(&base, "pull_request_review", "d-review-1", &reviewed)
            .await
            .0,
        202
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pr_artifact = pr_artifacts(&stack, &id).await.remove(0);
        if pr_artifact["metadata"]["review"] == "approved" {
            assert_eq!(pr_artifact["metadata"]["reviewer"], "bob");
            assert_eq!(pr_artifact["metadata"]["state"], "merged");
            break;
        }
        assert!(Instant::now() < deadline, "no review: {pr_artifact}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The session's owner (alice, who asked on GitHub) heard of both in her inbox: the
    // merge and bob's review.
    let alice_cookie = gh.browser_sign_in(&base, "alice").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, inbox) =
            inspect_tests::client::as_person(&stack, &alice_cookie, Method::GET, "/inbox", None)
                .await;
        let details: Vec<String> = inbox["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["kind"] == "pull_request" && i["sessionId"] == id.as_str())
            .map(|i| i["detail"].as_str().unwrap_or_default().to_owned())
            .collect();
        if details.len() == 2 {
            assert!(
                details.iter().any(|d| d.ends_with("was merged")),
                "{details:?}"
            );
            assert!(
                details
                    .iter()
                    .any(|d| d.contains("bob reviewed (approved)")),
                "{details:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the inbox: {inbox}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Still one session, one agent PR; every reply consumed.
    assert_eq!(sessions(&base).await.len(), 1);
    assert_eq!(
        gh.pulls().len(),
        3,
        "the two people's PRs and one agent PR, on the changed repository only"
    );
    assert_eq!(model.remaining(), 0);
    // No token in anything the Worker wrote.
    let log = stack.log();
    assert!(
        !log.contains("gho_") && !log.contains("ghs_"),
        "a token reached the log"
    );
}

#[tokio::test]
async fn a_session_on_a_github_repository_opens_one_pull_request_and_reuses_it() {
    let gh = FakeGitHub::start(vec![alice()]).await.unwrap();
    github_repo(&gh, "acme", "web");
    let AgentStack {
        model: _model,
        host,
        stack,
    } = AgentStack::start(
        vec![
            Reply::tool("write", json!({"filePath": "notes.md", "content": "one\n"})),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'Add notes' --body 'Notes.'", "description": "open a PR"}),
            ),
            Reply::text("Opened."),
            Reply::tool("write", json!({"filePath": "notes.md", "content": "one\ntwo\n"})),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'Add notes' --body 'Notes.'", "description": "update the PR"}),
            ),
            Reply::text("Updated."),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'Bad' --head 'a..b' || echo REFUSED-AS-EXPECTED", "description": "bad head"}),
            ),
            Reply::text("Checked."),
            Reply::tool("write", json!({"filePath": "more.md", "content": "more\n"})),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'More notes'", "description": "open a PR"}),
            ),
            Reply::text("Opened another."),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'Twice' & sleep 0.05; open-inspect pr --title 'Twice'; wait", "description": "two at once"}),
            ),
            Reply::text("Tried twice."),
        ],
        gh.worker_vars(),
    )
    .await
    .unwrap();
    // The repository's default model goes to sessions that name none.
    let r = send(
        Method::PUT,
        &stack.url("/repos/acme/web/settings"),
        Some(json!({"defaultModel": "inspect/fake-model"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let bad = send(
        Method::PUT,
        &stack.url("/repos/acme/web/settings"),
        Some(json!({"botEnabled": "yes", "unknown": 1})),
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400, "{}", bad.body);
    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "acme", "repoName": "web"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["sessionId"].as_str().unwrap().to_owned();
    let state = send(Method::GET, &stack.url(&format!("/sessions/{id}")), None)
        .await
        .unwrap();
    assert_eq!(state.body["model"], "inspect/fake-model", "{}", state.body);
    let prompt = |text: &str| {
        let url = stack.url(&format!("/sessions/{id}/prompt"));
        let body = json!({"content": text});
        async move { send(Method::POST, &url, Some(body)).await.unwrap() }
    };
    let wait_done = |n: usize| {
        let url = stack.url(&format!("/sessions/{id}/events?limit=500"));
        async move {
            let deadline = Instant::now() + Duration::from_secs(180);
            loop {
                let r = send(Method::GET, &url, None).await.unwrap();
                let done: Vec<Value> = r.body["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|e| e["type"] == "execution_complete")
                    .cloned()
                    .collect();
                if done.len() >= n {
                    return (done, r.body["events"].clone());
                }
                assert!(Instant::now() < deadline, "prompt {n} never completed");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
    };
    assert_eq!(prompt("add notes and open a PR").await.status, 200);
    let (done, events) = wait_done(1).await;
    assert_eq!(
        done[0]["success"],
        true,
        "{events}\n{}",
        host.sandbox_logs()
    );
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}\n{events}");
    // Nobody signed in with GitHub here: the App authored it, and said so.
    assert_eq!(pulls[0].author, FakeGitHub::BOT_LOGIN);
    assert_eq!(pulls[0].base, "main");
    assert_eq!(pulls[0].head, format!("open-inspect/{id}"));
    let tool_output = events.to_string();
    assert!(
        tool_output.contains("opened the pull request"),
        "{tool_output}"
    );
    assert!(
        tool_output.contains("authored by the GitHub App"),
        "{tool_output}"
    );

    // GitHub revokes every installation token (the App reinstalled): the sandbox's git is
    // refused the one it holds, says so (`erase`), and pushes with a new one.
    let mints = gh.mints();
    gh.revoke_installation_tokens();
    assert_eq!(prompt("add a line and update the PR").await.status, 200);
    let (done, events) = wait_done(2).await;
    assert_eq!(done[1]["success"], true, "{events}");
    assert_eq!(gh.pulls().len(), 1, "asking twice made a second PR");
    assert!(
        events.to_string().contains("updated the open pull request"),
        "{events}"
    );
    let bare = gh.repos_root.join("acme/web.git");
    let notes = git(&bare, &["show", &format!("open-inspect/{id}:notes.md")]);
    assert_eq!(notes, "one\ntwo");
    // One new token for git, one for the App's REST calls: no more.
    assert!(gh.mints() - mints <= 2, "{} mints", gh.mints() - mints);

    assert_eq!(prompt("try a bad head").await.status, 200);
    let (_, events) = wait_done(3).await;
    assert!(
        events.to_string().contains("invalid branch name"),
        "{events}"
    );
    assert!(
        events.to_string().contains("REFUSED-AS-EXPECTED"),
        "{events}"
    );

    let artifacts = send(
        Method::GET,
        &stack.url(&format!("/sessions/{id}/artifacts")),
        None,
    )
    .await
    .unwrap();
    let prs = artifacts.body["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == "pr")
        .count();
    assert_eq!(prs, 1, "{}", artifacts.body);

    // Another session's sandbox (or none) cannot ask for a PR here.
    let c = reqwest::Client::new();
    let r = c
        .post(stack.url(&format!("/sessions/{id}/pull-requests")))
        .header("Authorization", "Bearer not-this-sandbox")
        .header("X-Sandbox-ID", "sb_other")
        .json(&json!({"title": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // Merged on GitHub: the next request opens a new one, and the old one is recorded
    // as merged.
    gh.close_pull("acme", "web", pulls[0].number, true);
    assert_eq!(prompt("one more change, new PR").await.status, 200);
    let (done, events) = wait_done(4).await;
    assert_eq!(done[3]["success"], true, "{events}");
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 2, "{pulls:?}");
    assert_eq!(pulls[1].state, "open");
    let artifacts = send(
        Method::GET,
        &stack.url(&format!("/sessions/{id}/artifacts")),
        None,
    )
    .await
    .unwrap();
    let states: Vec<String> = artifacts.body["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["type"] == "pr")
        .map(|a| {
            a["metadata"]["state"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        states,
        vec!["merged".to_owned(), "open".to_owned()],
        "{}",
        artifacts.body
    );

    // Closed on GitHub with no delivery (a missed webhook): the cron step 31 minutes on
    // asks GitHub about the PRs still open and the artifact follows.
    gh.close_pull("acme", "web", pulls[1].number, false);
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 31 * 60 * 1000;
    let r = reqwest::get(stack.url(&format!(
        "/cdn-cgi/local/scheduled?cron=*%2F30+*+*+*+*&time={later}"
    )))
    .await
    .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let states: Vec<Value> = pr_artifacts(&stack, &id)
            .await
            .iter()
            .map(|a| a["metadata"]["state"].clone())
            .collect();
        if states == vec![json!("merged"), json!("closed")] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{states:?}\n{}",
            stack.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn a_local_repository_has_no_pull_request_host() {
    let source = inspect_tests::repo::source_repo();
    let AgentStack {
        model: _model,
        host,
        stack,
    } = AgentStack::start(
        vec![
            Reply::tool("write", json!({"filePath": "local.txt", "content": "x\n"})),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'Local change'", "description": "open a PR"}),
            ),
            Reply::text("Done."),
        ],
        vec![],
    )
    .await
    .unwrap();
    stack_register(&stack, source.path()).await;
    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "local", "repoName": "demo"})),
    )
    .await
    .unwrap();
    let id = r.body["sessionId"].as_str().unwrap().to_owned();
    send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "change it and open a PR"})),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(180);
    let events = loop {
        let r = send(
            Method::GET,
            &stack.url(&format!("/sessions/{id}/events?limit=500")),
            None,
        )
        .await
        .unwrap();
        if r.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "execution_complete")
        {
            break r.body["events"].clone();
        }
        assert!(Instant::now() < deadline, "{}", host.sandbox_logs());
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let text = events.to_string();
    assert!(text.contains("no pull-request host"), "{text}");
    // The events route filters by type.
    let only = send(
        Method::GET,
        &stack.url(&format!(
            "/sessions/{id}/events?type=execution_complete,user_message"
        )),
        None,
    )
    .await
    .unwrap();
    let kinds: Vec<&str> = only.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec!["user_message", "execution_complete"],
        "{}",
        only.body
    );
    let bad = send(
        Method::GET,
        &stack.url(&format!("/sessions/{id}/events?type=Robert');DROP")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400, "{}", bad.body);
    // The branch was pushed to the repository on this machine.
    let file = git(
        source.path(),
        &["show", &format!("open-inspect/{id}:local.txt")],
    );
    assert_eq!(file, "x");
}

async fn stack_register(stack: &inspect_tests::Stack, path: &std::path::Path) {
    let r = send(
        Method::POST,
        &stack.url("/repos"),
        Some(json!({"name": "demo", "path": path.to_string_lossy()})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn the_installations_repositories_are_listed_synced_and_branched() {
    let gh = FakeGitHub::start(vec![alice()]).await.unwrap();
    github_repo(&gh, "acme", "web");
    github_repo(&gh, "acme", "public-docs");
    github_repo(&gh, "acme", "old");
    gh.archive("acme", "old");
    // Local repositories are checked by the real supervisor (through a provider that
    // starts no sandbox).
    let provider = inspect_tests::capture_provider::CaptureProvider::start()
        .await
        .unwrap();
    let mut options = inspect_tests::StackOptions::local();
    options.vars = gh.worker_vars();
    options.vars.extend(provider.worker_vars());
    let stack = inspect_tests::Stack::start_with(options).await.unwrap();
    let source = inspect_tests::repo::source_repo();
    stack_register(&stack, source.path()).await;
    let names = |body: &Value| -> Vec<String> {
        body["repositories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{}/{}",
                    r["owner"].as_str().unwrap(),
                    r["name"].as_str().unwrap()
                )
            })
            .collect()
    };
    let r = send(Method::GET, &stack.url("/repos"), None).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        names(&r.body),
        vec!["acme/public-docs", "acme/web", "local/demo"],
        "archived ones are dropped: {}",
        r.body
    );
    let web = &r.body["repositories"][1];
    assert_eq!(web["kind"], "github");
    assert_eq!(web["private"], true);
    assert_eq!(web["defaultBranch"], "main");
    assert_eq!(web["description"], "The web repository");
    assert_eq!(r.body["repositories"][0]["private"], false);

    let b = send(Method::GET, &stack.url("/repos/acme/web/branches"), None)
        .await
        .unwrap();
    assert_eq!(b.status, 200, "{}", b.body);
    assert_eq!(b.body["branches"], json!(["feat/login", "main"]));
    let b = send(Method::GET, &stack.url("/repos/local/demo/branches"), None)
        .await
        .unwrap();
    assert_eq!(b.status, 200, "{}", b.body);
    let b = send(Method::GET, &stack.url("/repos/acme/nope/branches"), None)
        .await
        .unwrap();
    assert_eq!(b.status, 404, "{}", b.body);

    // A repository added on GitHub appears after the cron trigger runs (the copy is fresh,
    // so a plain list does not ask GitHub again).
    github_repo(&gh, "acme", "api");
    let r = send(Method::GET, &stack.url("/repos"), None).await.unwrap();
    assert!(!names(&r.body).contains(&"acme/api".to_owned()));
    let cron = reqwest::get(stack.url("/cdn-cgi/local/scheduled?cron=*%2F30+*+*+*+*"))
        .await
        .unwrap();
    assert!(cron.status().is_success(), "{:?}", cron.text().await);
    let r = send(Method::GET, &stack.url("/repos"), None).await.unwrap();
    assert!(
        names(&r.body).contains(&"acme/api".to_owned()),
        "{}",
        r.body
    );
    // One removed from the installation goes on the next refresh asked for.
    std::fs::remove_dir_all(gh.repos_root.join("acme/api.git")).unwrap();
    let r = send(Method::GET, &stack.url("/repos?refresh=1"), None)
        .await
        .unwrap();
    assert!(
        !names(&r.body).contains(&"acme/api".to_owned()),
        "{}",
        r.body
    );
    assert!(names(&r.body).contains(&"local/demo".to_owned()));
    // Syncing read every page with the App's token only.
    assert!(gh.calls().iter().any(
        |(_, path, who)| path.starts_with("/installation/repositories")
            && who == FakeGitHub::BOT_LOGIN
    ));

    // GitHub revokes the App's tokens before they expire (the App was reinstalled): the
    // refused call is made again with a new token, and the calls after it use that one.
    let mints = gh.mints();
    gh.revoke_installation_tokens();
    github_repo(&gh, "acme", "mobile");
    let r = send(Method::GET, &stack.url("/repos?refresh=1"), None)
        .await
        .unwrap();
    assert!(
        names(&r.body).contains(&"acme/mobile".to_owned()),
        "the sync after the revocation: {}",
        r.body
    );
    let b = send(Method::GET, &stack.url("/repos/acme/mobile/branches"), None)
        .await
        .unwrap();
    assert_eq!(b.status, 200, "{}", b.body);
    assert_eq!(gh.mints(), mints + 1, "one new token, not one per call");
}

/// A mention in a reply inside a review thread: the answer goes into that thread, as a
/// reply to the thread's top comment (GitHub takes no reply to a reply), and the 👀 on the
/// mention itself.
#[tokio::test]
async fn a_mention_in_a_review_thread_reply_is_answered_in_the_thread() {
    let gh = FakeGitHub::start(vec![alice()]).await.unwrap();
    github_repo(&gh, "acme", "web");
    let pr = gh.open_pull("acme", "web", "feat/login", "main", "Login page", "alice");
    gh.set_permission("acme", "web", "alice", "write");
    let mut vars = gh.worker_vars();
    vars.push(("GITHUB_WEBHOOK_SECRET".into(), WEBHOOK_SECRET.into()));
    let AgentStack { model, host, stack } = AgentStack::start(
        vec![Reply::text(
            "The helper keeps the login retries in one place.",
        )],
        vars,
    )
    .await
    .unwrap();
    let base = stack.base_url.clone();
    let r = send(
        Method::PUT,
        &stack.url("/repos/acme/web/settings"),
        Some(json!({"botEnabled": true})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);

    let top = gh.add_review_comment(("acme", "web", pr), "alice", "Why a new helper here?", None);
    let text = "@inspect-bot can you explain this helper?";
    let reply = gh.add_review_comment(("acme", "web", pr), "alice", text, Some(top));
    let who = alice();
    let delivery = json!({
        "action": "created",
        "pull_request": gh.pull_json("acme", "web", pr).unwrap(),
        "comment": {"id": reply, "in_reply_to_id": top, "body": text, "path": "login.txt",
            "diff_hunk": "@@ -0,0 +1 @@\n+a login page", "user": {"id": who.id, "login": who.login, "type": "User"}},
        "repository": {"name": "web", "full_name": "acme/web", "private": true, "owner": {"login": "acme"}},
        "sender": {"id": who.id, "login": who.login, "type": "User"},
        "installation": {"id": 777}
    });
    let (status, body) = deliver(
        &base,
        "pull_request_review_comment",
        "d-thread-reply",
        &delivery,
    )
    .await;
    assert_eq!(status, 202, "{body}");

    eventually(30, "the 👀 on the mention", || {
        gh.reactions()
            .into_iter()
            .find(|r| r.path == format!("/repos/acme/web/pulls/comments/{reply}/reactions"))
    })
    .await;
    let answer = eventually(120, "the answer in the thread", || {
        gh.comments()
            .into_iter()
            .find(|c| c.author == FakeGitHub::BOT_LOGIN)
    })
    .await;
    assert_eq!(
        (answer.review, answer.in_reply_to),
        (true, Some(top)),
        "{answer:?}\n{}",
        host.sandbox_logs()
    );
    assert!(answer.body.contains("one place"), "{}", answer.body);
    assert_eq!(model.remaining(), 0);
}

/// A mention on a pull request from a fork: the session works on the fork's code (GitHub's
/// `pull/N/head`, fetched from the base repository; the base's branch of the same name is
/// other code), pushes nothing anywhere, and the change comes back as a patch in the
/// answer on the pull request.
#[tokio::test]
async fn a_mention_on_a_pull_request_from_a_fork_works_on_its_code_and_pushes_nothing() {
    let gh = FakeGitHub::start(vec![alice()]).await.unwrap();
    github_repo(&gh, "acme", "web");
    // Bob's fork: his `feat/login` adds a file the base's `feat/login` does not have.
    let work = tempfile::tempdir().unwrap();
    init_repo(work.path());
    git(work.path(), &["checkout", "--quiet", "-b", "feat/login"]);
    std::fs::write(work.path().join("from-fork.txt"), "the fork's change\n").unwrap();
    commit_all(work.path(), "the fork's change");
    let fork = gh.repos_root.join("bob/web.git");
    std::fs::create_dir_all(fork.parent().unwrap()).unwrap();
    git(
        work.path(),
        &["clone", "--quiet", "--bare", ".", fork.to_str().unwrap()],
    );
    let pr = gh.open_fork_pull(
        "acme",
        "web",
        "bob",
        "feat/login",
        "main",
        "Fork fix",
        "bob",
    );
    gh.set_permission("acme", "web", "alice", "write");
    let mut vars = gh.worker_vars();
    vars.push(("GITHUB_WEBHOOK_SECRET".into(), WEBHOOK_SECRET.into()));
    let patch = "Here is the change as a patch:\n```diff\n+fixed\n```";
    let AgentStack { model, host, stack } = AgentStack::start(
        vec![
            Reply::tool(
                "bash",
                json!({"command": "cat from-fork.txt", "description": "read the fork's file"}),
            ),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'Fix' --body 'Fix'", "description": "try a PR"}),
            ),
            Reply::text(patch),
        ],
        vars,
    )
    .await
    .unwrap();
    let base = stack.base_url.clone();
    let r = send(
        Method::PUT,
        &stack.url("/repos/acme/web/settings"),
        Some(json!({"botEnabled": true})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let pull = gh.pull_json("acme", "web", pr).unwrap();
    assert_eq!(pull["head"]["repo"]["full_name"], "bob/web", "{pull}");

    let text = "@inspect-bot please fix the typo";
    let comment_id = gh.add_comment("acme", "web", pr, "alice", text);
    let delivery = comment_delivery(&gh, pr, comment_id, &alice(), text);
    let (status, body) = deliver(&base, "issue_comment", "d-fork", &delivery).await;
    assert_eq!(status, 202, "{body}");

    let answer = eventually(180, "the answer on the pull request", || {
        gh.comments()
            .into_iter()
            .find(|c| c.number == pr && c.author == FakeGitHub::BOT_LOGIN)
    })
    .await;
    assert!(
        answer.body.contains("```diff"),
        "{}\n{}",
        answer.body,
        host.sandbox_logs()
    );
    let listed = sessions(&base).await;
    assert_eq!(
        listed[0]["repositories"][0]["branch"],
        format!("pull/{pr}/head")
    );
    let id = listed[0]["id"].as_str().unwrap();
    let tools = send(
        Method::GET,
        &stack.url(&format!("/sessions/{id}/events?type=tool_call")),
        None,
    )
    .await
    .unwrap();
    let outputs: Vec<String> = tools.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["output"].as_str().map(str::to_owned))
        .collect();
    assert!(
        outputs.iter().any(|o| o.contains("the fork's change")),
        "the fork's code: {outputs:?}"
    );
    assert!(
        outputs.iter().any(|o| o.contains("from a fork")),
        "open-inspect pr refused: {outputs:?}"
    );
    // Nothing pushed, no pull request made.
    assert!(
        !gh.git_requests()
            .iter()
            .any(|(path, _)| path.contains("receive-pack")),
        "{:?}",
        gh.git_requests()
    );
    assert_eq!(gh.pulls().len(), 1);
    assert!(
        model
            .requests()
            .iter()
            .any(|r| r.to_string().contains("is in a fork (bob/web)")),
        "the prompt says the branch is a fork's"
    );
}

/// The bot as a reviewer: a review request starts a session on the pull request's branch
/// whose agent submits one review through `open-inspect review` — its verdict as the
/// repository allows, a comment on a changed line inline, one off the diff moved into the
/// body (the fake refuses such a line with 422, as GitHub does) — and nothing more is
/// posted. A reply in the review's thread, with no mention, continues the same session
/// and is answered in that thread; a reply in someone else's thread is not the bot's.
#[tokio::test]
async fn a_review_request_gets_one_review_and_a_reply_in_its_thread_continues_the_session() {
    let gh = FakeGitHub::start(vec![alice()]).await.unwrap();
    github_repo(&gh, "acme", "web");
    let pr = gh.open_pull("acme", "web", "feat/login", "main", "Login page", "alice");
    gh.set_permission("acme", "web", "alice", "write");
    let mut vars = gh.worker_vars();
    vars.push(("GITHUB_WEBHOOK_SECRET".into(), WEBHOOK_SECRET.into()));
    let AgentStack { model, host, stack } = AgentStack::start(
        vec![
            // A review the repository does not allow (approve), then one it does.
            Reply::tool(
                "bash",
                json!({"command": "open-inspect review --event request-changes --body 'The page needs a title.' --comment 'login.txt:1=Say what the page is for' --comment 'login.txt:40=This line is not in the diff'", "description": "submit the review"}),
            ),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect review --body 'again' || echo SECOND-REFUSED", "description": "a second review"}),
            ),
            Reply::text("Submitted: changes requested."),
            Reply::text("A title tells people where they are."),
        ],
        vars,
    )
    .await
    .unwrap();
    let base = stack.base_url.clone();
    let r = send(
        Method::PUT,
        &stack.url("/repos/acme/web/settings"),
        Some(
            json!({"botEnabled": true, "reviewVerdicts": ["REQUEST_CHANGES"],
                    "reviewInstructions": "Look hard at the login copy."}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let bad = send(
        Method::PUT,
        &stack.url("/repos/acme/web/settings"),
        Some(json!({"reviewVerdicts": ["MERGE"]})),
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400, "{}", bad.body);

    let who = alice();
    let requested = json!({
        "action": "review_requested",
        "pull_request": gh.pull_json("acme", "web", pr).unwrap(),
        "requested_reviewer": {"id": 99, "login": FakeGitHub::BOT_LOGIN, "type": "Bot"},
        "repository": {"name": "web", "full_name": "acme/web", "private": true, "owner": {"login": "acme"}},
        "sender": {"id": who.id, "login": who.login, "type": "User"},
        "installation": {"id": 777}
    });
    let (status, body) = deliver(&base, "pull_request", "d-review-asked", &requested).await;
    assert_eq!(status, 202, "{body}");

    let review = eventually(180, "the bot's review", || gh.reviews().into_iter().next()).await;
    assert_eq!(review.state, "CHANGES_REQUESTED", "{review:?}");
    assert_eq!(review.author, FakeGitHub::BOT_LOGIN);
    assert!(
        review.body.starts_with("The page needs a title."),
        "{}",
        review.body
    );
    assert!(
        review
            .body
            .contains("`login.txt` line 40: This line is not in the diff"),
        "{}",
        review.body
    );
    let listed = sessions(&base).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    assert!(
        review.body.contains(&format!("/sessions/{id})")),
        "{}",
        review.body
    );
    assert_eq!(review.comments.len(), 1, "{review:?}");
    let inline = gh
        .comments()
        .into_iter()
        .find(|c| c.id == review.comments[0])
        .unwrap();
    assert_eq!(
        (inline.path.as_deref(), inline.line, inline.body.as_str()),
        (Some("login.txt"), Some(1), "Say what the page is for")
    );
    // Only the session's own sandbox submits; a body is bounded and typed.
    let c = reqwest::Client::new();
    let forged = c
        .post(stack.url(&format!("/sessions/{id}/reviews")))
        .header("Authorization", "Bearer not-this-sandbox")
        .header("X-Sandbox-ID", "sb_other")
        .json(&json!({"event": "APPROVE", "body": "lgtm"}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    let person = send(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/reviews")),
        Some(json!({"event": "APPROVE", "body": "lgtm"})),
    )
    .await
    .unwrap();
    assert_eq!(person.status, 401, "{}", person.body);
    let huge = c
        .post(stack.url(&format!("/sessions/{id}/reviews")))
        .header("Authorization", "Bearer not-this-sandbox")
        .header("X-Sandbox-ID", "sb_other")
        .header("content-type", "application/json")
        .body(format!("{{\"body\": \"{}\"}}", "x".repeat(2 << 20)))
        .send()
        .await
        .unwrap();
    assert_eq!(huge.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let unknown = c
        .post(stack.url(&format!("/sessions/{id}/reviews")))
        .header("Authorization", "Bearer not-this-sandbox")
        .header("X-Sandbox-ID", "sb_other")
        .json(&json!({"event": "APPROVE", "commitId": "abc"}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::BAD_REQUEST);
    assert_eq!(gh.reviews().len(), 1);
    // The prompt carried the repository's instructions and the way to submit.
    let asked = model.requests().first().cloned().unwrap().to_string();
    assert!(asked.contains("Look hard at the login copy."), "{asked}");
    assert!(asked.contains("open-inspect review"), "{asked}");

    // The review is the answer: the session records it, and no comment follows it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let artifacts = loop {
        let out = send(
            Method::GET,
            &stack.url(&format!("/sessions/{id}/artifacts")),
            None,
        )
        .await
        .unwrap();
        let found = out.body["artifacts"]
            .as_array()
            .and_then(|list| list.iter().find(|a| a["type"] == "review").cloned());
        if let Some(a) = found {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "no review artifact: {}",
            out.body
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(artifacts["metadata"]["event"], "REQUEST_CHANGES");
    assert_eq!(artifacts["metadata"]["inline"], 1);
    assert_eq!(artifacts["metadata"]["folded"], 1);
    eventually(120, "the turn's end", || {
        (model.remaining() == 1).then_some(())
    })
    .await;
    let second_refused = model.requests().iter().any(|r| {
        r.to_string().contains("SECOND-REFUSED") && r.to_string().contains("already submitted")
    });
    assert!(
        second_refused,
        "a second review in the same prompt is refused"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(gh.reviews().len(), 1);
    assert!(
        !gh.comments()
            .iter()
            .any(|c| c.author == FakeGitHub::BOT_LOGIN && !c.review),
        "{:?}",
        gh.comments()
    );

    // Alice answers in the review's thread, without mentioning the bot.
    let text = "Why does it need one?";
    let reply = gh.add_review_comment(("acme", "web", pr), "alice", text, Some(inline.id));
    let thread_reply = |comment: i64, in_reply_to: i64| {
        json!({
            "action": "created",
            "pull_request": gh.pull_json("acme", "web", pr).unwrap(),
            "comment": {"id": comment, "in_reply_to_id": in_reply_to, "body": text, "path": "login.txt",
                "diff_hunk": "@@ -0,0 +1 @@\n+a login page", "user": {"id": who.id, "login": who.login, "type": "User"}},
            "repository": {"name": "web", "full_name": "acme/web", "private": true, "owner": {"login": "acme"}},
            "sender": {"id": who.id, "login": who.login, "type": "User"},
            "installation": {"id": 777}
        })
    };
    // In a thread someone else started: not the bot's business.
    let other_top = gh.add_review_comment(("acme", "web", pr), "alice", "A note to self", None);
    let other = gh.add_review_comment(("acme", "web", pr), "alice", text, Some(other_top));
    let (status, body) = deliver(
        &base,
        "pull_request_review_comment",
        "d-other-thread",
        &thread_reply(other, other_top),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = deliver(
        &base,
        "pull_request_review_comment",
        "d-thread-answer",
        &thread_reply(reply, inline.id),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let answer = eventually(180, "the answer in the review's thread", || {
        gh.comments()
            .into_iter()
            .find(|c| c.author == FakeGitHub::BOT_LOGIN && c.in_reply_to == Some(inline.id))
    })
    .await;
    assert!(
        answer.body.contains("where they are"),
        "{}\n{}",
        answer.body,
        host.sandbox_logs()
    );
    let listed = sessions(&base).await;
    assert_eq!(
        listed.len(),
        1,
        "the reply continued the session: {listed:?}"
    );
    assert!(
        !gh.comments()
            .iter()
            .any(|c| c.author == FakeGitHub::BOT_LOGIN && c.in_reply_to == Some(other_top)),
        "the other thread is left alone"
    );
    assert_eq!(model.remaining(), 0);
}

/// The fake refuses reviews as GitHub does, so the control plane's own checks are tested
/// against a service that would catch what they miss: a line outside the diff's hunks (on
/// the side named), a file the pull request does not change, approving one's own pull
/// request, requesting changes without a body. The files list pages as GitHub's does.
#[tokio::test]
async fn the_fake_github_refuses_the_reviews_github_refuses() {
    let gh = FakeGitHub::start(vec![alice()]).await.unwrap();
    github_repo(&gh, "acme", "web");
    let pr = gh.open_pull("acme", "web", "feat/login", "main", "Login page", "alice");
    let c = reqwest::Client::new();
    let post = |login: &str, body: Value| {
        c.post(format!("{}/repos/acme/web/pulls/{pr}/reviews", gh.base_url))
            .bearer_auth(gh.user_token(login))
            .header("user-agent", "test")
            .json(&body)
            .send()
    };
    let files: Value = c
        .get(format!(
            "{}/repos/acme/web/pulls/{pr}/files?per_page=1&page=1",
            gh.base_url
        ))
        .bearer_auth(gh.user_token("bob"))
        .header("user-agent", "test")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(files[0]["filename"], "login.txt", "{files}");
    assert_eq!(files[0]["status"], "added");
    assert_eq!(files[0]["patch"], "@@ -0,0 +1 @@\n+a login page");
    let comment = |path: &str, line: u64, side: &str| json!({"event": "COMMENT", "body": "b", "comments": [{"path": path, "line": line, "side": side, "body": "c"}]});
    for (body, why) in [
        (
            comment("login.txt", 2, "RIGHT"),
            "line must be part of the diff",
        ),
        (
            comment("login.txt", 1, "LEFT"),
            "line must be part of the diff",
        ),
        (
            comment("README.md", 1, "RIGHT"),
            "Path could not be resolved",
        ),
        (json!({"event": "REQUEST_CHANGES"}), "Body is required"),
    ] {
        let r = post("bob", body).await.unwrap();
        assert_eq!(r.status(), 422);
        let text = r.text().await.unwrap();
        assert!(text.contains(why), "{text}");
    }
    let own = post("alice", json!({"event": "APPROVE"})).await.unwrap();
    assert_eq!(own.status(), 422);
    assert!(own
        .text()
        .await
        .unwrap()
        .contains("Can not approve your own pull request"));
    let ok = post("bob", comment("login.txt", 1, "RIGHT")).await.unwrap();
    assert_eq!(ok.status(), 200);
    let review: Value = ok.json().await.unwrap();
    assert_eq!(review["state"], "COMMENTED");
    assert_eq!(gh.reviews().len(), 1);
}

#[tokio::test]
async fn a_repository_that_requires_signed_commits_gets_them_through_the_git_data_api() {
    let gh = FakeGitHub::start(vec![alice()]).await.unwrap();
    github_repo(&gh, "acme", "web");
    let AgentStack {
        model: _model,
        host,
        stack,
    } = AgentStack::start(
        vec![
            Reply::tool("write", json!({"filePath": "notes.md", "content": "one\n"})),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'Add notes' --body 'Notes.'", "description": "open a PR"}),
            ),
            Reply::text("Opened."),
            Reply::tool("write", json!({"filePath": "more.md", "content": "two\n"})),
            Reply::tool(
                "bash",
                json!({"command": "open-inspect pr --title 'Add notes' --body 'Notes.'", "description": "update the PR"}),
            ),
            Reply::text("Updated."),
        ],
        gh.worker_vars(),
    )
    .await
    .unwrap();
    let r = send(
        Method::PUT,
        &stack.url("/repos/acme/web/settings"),
        Some(json!({"defaultModel": "inspect/fake-model", "signCommits": true})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "acme", "repoName": "web"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["sessionId"].as_str().unwrap().to_owned();
    let branch = format!("open-inspect/{id}");
    let bare = gh.repos_root.join("acme/web.git");
    let events_url = stack.url(&format!("/sessions/{id}/events?limit=500"));
    let run = |text: &'static str, n: usize| {
        let prompt_url = stack.url(&format!("/sessions/{id}/prompt"));
        let events_url = events_url.clone();
        async move {
            let r = send(Method::POST, &prompt_url, Some(json!({"content": text})))
                .await
                .unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
            let deadline = Instant::now() + Duration::from_secs(180);
            loop {
                let r = send(Method::GET, &events_url, None).await.unwrap();
                let done = r.body["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|e| e["type"] == "execution_complete")
                    .count();
                if done >= n {
                    return r.body["events"].clone();
                }
                assert!(Instant::now() < deadline, "prompt {n} never completed");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
    };
    let unsigned_on_branch = || {
        let signed = gh.signed_commits();
        git(&bare, &["rev-list", &format!("main..{branch}")])
            .lines()
            .filter(|sha| !signed.iter().any(|s| s == sha))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };

    let events = run("add notes and open a PR", 1).await;
    assert_eq!(gh.pulls().len(), 1, "{events}\n{}", host.sandbox_logs());
    assert!(events.to_string().contains("signed"), "{events}");
    let first = git(&bare, &["rev-parse", &branch]);
    assert!(gh.signed_commits().contains(&first), "{first}");
    assert!(
        unsigned_on_branch().is_empty(),
        "{:?}",
        unsigned_on_branch()
    );
    // GitHub's signature is in the commit, GitHub is its committer, the author kept.
    let raw = git(&bare, &["cat-file", "commit", &first]);
    assert!(
        raw.contains("gpgsig -----BEGIN PGP SIGNATURE-----"),
        "{raw}"
    );
    assert!(
        raw.contains("committer GitHub <noreply@github.com>"),
        "{raw}"
    );
    assert_eq!(git(&bare, &["show", &format!("{branch}:notes.md")]), "one");

    // More work and the pull request updated: the sandbox moved its new commit onto the
    // signed one (not over it), and that commit is signed too.
    let events = run("add more and update the PR", 2).await;
    let second = git(&bare, &["rev-parse", &branch]);
    assert_ne!(second, first, "{events}");
    git(&bare, &["merge-base", "--is-ancestor", &first, &second]);
    assert!(
        unsigned_on_branch().is_empty(),
        "{:?}",
        unsigned_on_branch()
    );
    assert_eq!(
        git(&bare, &["rev-list", "--count", &format!("main..{branch}")]),
        "2"
    );
    assert_eq!(git(&bare, &["show", &format!("{branch}:more.md")]), "two");
    assert_eq!(gh.pulls().len(), 1);
}

#[tokio::test]
async fn a_failing_check_on_a_pull_request_starts_one_run_on_its_branch_and_the_answer_lands() {
    let gh = FakeGitHub::start(vec![alice()]).await.unwrap();
    github_repo(&gh, "acme", "web");
    let pr = gh.open_pull("acme", "web", "feat/login", "main", "Login page", "alice");
    let mut vars = gh.worker_vars();
    vars.push(("GITHUB_WEBHOOK_SECRET".into(), WEBHOOK_SECRET.into()));
    // The model and the sandbox host live as long as the test.
    let AgentStack {
        model: _model,
        host: _host,
        stack,
    } = AgentStack::start(
        vec![
            Reply::text(
                "The login test timed out waiting for the page; I raised its wait and the suite passes.",
            ),
            Reply::text("Fixed as the comment asked, on this pull request's branch."),
        ],
        vars,
    )
    .await
    .unwrap();
    let base = stack.base_url.clone();
    // The installation's repositories, synced.
    let r = send(Method::GET, &stack.url("/repos"), None).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.body);

    let make = |body: Value| {
        let url = stack.url("/automations");
        async move { send(Method::POST, &url, Some(body)).await.unwrap() }
    };
    let automation = |name: &str, github: Value| {
        json!({"name": name, "triggerType": "github_event",
               "repositories": [{"owner": "acme", "name": "web"}],
               "instructions": "Find why CI failed on this pull request and fix it.",
               "github": github})
    };
    // Refused on save, with the reason.
    let mut unseen = automation("Unseen", json!({"event": "check_suite"}));
    unseen["repositories"] = json!([{"owner": "acme", "name": "nope"}]);
    let r = make(unseen).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot see acme/nope"),
        "{}",
        r.body
    );
    let r = make(automation(
        "Bad glob",
        json!({"event": "push", "branches": ["[main"]}),
    ))
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not read"),
        "{}",
        r.body
    );
    let r = make(automation(
        "Bad regex",
        json!({"event": "issue_comment", "textMatch": "regex", "pattern": "(unclosed"}),
    ))
    .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = make(automation(
        "Bad action",
        json!({"event": "pull_request", "actions": ["closed"]}),
    ))
    .await;
    assert_eq!(r.status, 400, "{}", r.body);

    let r = make(automation(
        "Fix failing CI",
        json!({"event": "check_suite"}),
    ))
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let fix_ci = r.body["automation"]["id"].as_str().unwrap().to_owned();
    let r = make(automation(
        "Pushes to main",
        json!({"event": "push", "branches": ["main"], "actorsDenied": ["bob"]}),
    ))
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let pushes = r.body["automation"]["id"].as_str().unwrap().to_owned();

    // GitHub's documented check_suite delivery: a failing suite on the pull request.
    let repository = json!({"name": "web", "full_name": "acme/web", "private": true,
        "owner": {"login": "acme"}, "html_url": format!("{}/acme/web", gh.base_url)});
    let failing = json!({
        "action": "completed",
        "check_suite": {"id": 5, "head_branch": "feat/login", "head_sha": "d6fde92930d4715a2b49857d24b940956b26d2d3",
            "status": "completed", "conclusion": "failure", "before": null, "after": null,
            "pull_requests": [{"url": "u", "id": 9, "number": pr,
                "head": {"ref": "feat/login", "sha": "d6f", "repo": {"id": 1, "url": "u", "name": "web"}},
                "base": {"ref": "main", "sha": "a1b", "repo": {"id": 1, "url": "u", "name": "web"}}}],
            "app": {"id": 3, "slug": "ci", "name": "CI"}},
        "repository": repository.clone(),
        "sender": {"login": "alice", "id": 1001, "type": "User"},
        "installation": {"id": 777}
    });
    let delivery = "0b1c2d3e-cc78-11e3-81ab-4c9367dc0958";
    let (status, body) = deliver(&base, "check_suite", delivery, &failing).await;
    assert!(status < 300, "{status} {body}");
    // One run, one session, on the pull request's branch.
    let deadline = Instant::now() + Duration::from_secs(60);
    let session = loop {
        let found = sessions(&base).await.into_iter().find(|s| {
            s["title"]
                .as_str()
                .is_some_and(|t| t.contains("Fix failing CI"))
        });
        if let Some(s) = found {
            break s;
        }
        assert!(Instant::now() < deadline, "no session for the run");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(
        session["repositories"][0]["branch"], "feat/login",
        "{session}"
    );
    // The answer, as a comment on the pull request.
    let deadline = Instant::now() + Duration::from_secs(120);
    let comment = loop {
        let found = gh
            .comments()
            .into_iter()
            .find(|c| c.number == pr && c.author == FakeGitHub::BOT_LOGIN);
        if let Some(c) = found {
            break c;
        }
        if Instant::now() > deadline {
            let id = session["id"].as_str().unwrap();
            let events = send(
                Method::GET,
                &stack.url(&format!("/sessions/{id}/events")),
                None,
            )
            .await
            .unwrap();
            panic!(
                "no answer on the pull request\n{}\n{}",
                events.body,
                stack.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(comment.body.contains("raised its wait"), "{}", comment.body);

    // A comment trigger: "/fix" on the pull request starts a run on its branch (which the
    // comment's delivery does not carry: GitHub is asked), answered on the pull request.
    let r = make(automation(
        "Fix on request",
        json!({"event": "issue_comment", "textMatch": "regex", "pattern": "^/fix\\b"}),
    ))
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let fix_comment = json!({
        "action": "created",
        "issue": {"number": pr, "title": "Login page", "body": null, "labels": [],
            "pull_request": {"url": format!("{}/repos/acme/web/pulls/{pr}", gh.base_url)}},
        "comment": {"id": 77, "body": "/fix the flaky wait please", "user": {"login": "alice", "id": 1001, "type": "User"}},
        "repository": repository.clone(),
        "sender": {"login": "alice", "id": 1001, "type": "User"},
        "installation": {"id": 777}
    });
    deliver(
        &base,
        "issue_comment",
        "4b1c2d3e-cc78-11e3-81ab-4c9367dc0958",
        &fix_comment,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let asked = loop {
        let found = sessions(&base).await.into_iter().find(|s| {
            s["title"]
                .as_str()
                .is_some_and(|t| t.contains("Fix on request"))
        });
        if let Some(s) = found {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "no session for the comment's run"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(asked["repositories"][0]["branch"], "feat/login", "{asked}");
    eventually(120, "the comment run's answer", || {
        gh.comments()
            .into_iter()
            .find(|c| c.number == pr && c.body.contains("as the comment asked"))
    })
    .await;

    // A redelivery starts nothing; the App's own push and a denied actor's neither.
    let (status, _) = deliver(&base, "check_suite", delivery, &failing).await;
    assert!(status < 300);
    let push = |sender: &str, branch: &str| {
        json!({"ref": format!("refs/heads/{branch}"), "before": "a", "after": "b", "deleted": false,
            "created": false, "compare": "c", "commits": [{"added": ["x.txt"], "removed": [], "modified": []}],
            "head_commit": {"message": "m"}, "pusher": {"name": sender},
            "repository": repository.clone(), "sender": {"login": sender, "type": "User"}})
    };
    deliver(
        &base,
        "push",
        "1b1c2d3e-cc78-11e3-81ab-4c9367dc0958",
        &push(FakeGitHub::BOT_LOGIN, "main"),
    )
    .await;
    deliver(
        &base,
        "push",
        "2b1c2d3e-cc78-11e3-81ab-4c9367dc0958",
        &push("bob", "main"),
    )
    .await;
    deliver(
        &base,
        "push",
        "3b1c2d3e-cc78-11e3-81ab-4c9367dc0958",
        &push("alice", "open-inspect/abc"),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        inspect_tests::client::automation_runs(&stack, &fix_ci)
            .await
            .len(),
        1
    );
    assert!(inspect_tests::client::automation_runs(&stack, &pushes)
        .await
        .is_empty());
    let titled = sessions(&base)
        .await
        .into_iter()
        .filter(|s| s["title"].as_str().is_some_and(|t| t.starts_with("[Auto]")))
        .count();
    assert_eq!(titled, 2);
}

/// "Try N ways": three attempts at one prompt run side by side as child sessions on the
/// repository, each with its own change; "Use this one" opens exactly one pull request,
/// from the chosen attempt's branch, and stops the others; a decided group stays decided;
/// bad asks are refused with the limit in words.
#[tokio::test]
async fn three_attempts_run_side_by_side_and_the_chosen_one_opens_the_only_pull_request() {
    let gh = FakeGitHub::start(vec![alice()]).await.unwrap();
    github_repo(&gh, "acme", "web");
    let AgentStack { model, host, stack } =
        AgentStack::start(vec![], gh.worker_vars()).await.unwrap();
    // Every attempt, at its own pace: one change of its own, then its last words.
    model.per_conversation(vec![
        Reply::tool(
            "bash",
            json!({"command": "printf 'way %s\\n' \"$RANDOM$RANDOM$RANDOM\" > way.txt && echo wrote", "description": "try a way"}),
        ),
        Reply::text("Tried my way."),
    ]);
    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "acme", "repoName": "web", "title": "Header"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let parent = r.body["sessionId"].as_str().unwrap().to_owned();
    let attempts_url = stack.url(&format!("/sessions/{parent}/attempts"));
    // Bad asks: the limits in words, unknown fields refused.
    for (bad, words) in [
        (json!({"content": "x", "count": 5}), "2 to 4"),
        (json!({"content": "x", "count": 1}), "2 to 4"),
        (json!({"content": "", "count": 2}), "need a prompt"),
        (
            json!({"content": "x", "count": 2, "depth": 0}),
            "unknown field",
        ),
    ] {
        let r = send(Method::POST, &attempts_url, Some(bad.clone()))
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert!(r.body.to_string().contains(words), "{bad}: {}", r.body);
    }
    // In the browser: three ways at the prompt, side by side, and the second one used.
    let out = inspect_tests::browser::artifacts("attempts");
    let (b, o, i) = (stack.base_url.clone(), out.clone(), parent.clone());
    let browser = tokio::task::spawn_blocking(move || {
        inspect_tests::browser::run_script("attempts.mjs", &b, &o, &[("SESSION_ID", i)])
    })
    .await;
    let children_url = stack.url(&format!("/sessions/{parent}/children"));
    let listed = send(Method::GET, &children_url, None).await.unwrap().body;
    assert!(
        browser.is_ok(),
        "the browser script failed: {listed}\n{}",
        host.sandbox_logs()
    );
    let made: Vec<String> = listed["attempts"][0]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(made.len(), 3, "{listed}");
    assert_eq!(listed["attempts"][0]["prompt"], "Add a line to way.txt");
    assert_eq!(listed["attempts"][0]["chosen"], made[1].as_str());
    let titles: Vec<&str> = listed["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap())
        .collect();
    assert!(
        titles.contains(&"Attempt 2 of 3: Add a line to way.txt"),
        "{titles:?}"
    );
    // Each had its own change: way.txt, with its own line.
    let mut diffs = Vec::new();
    for child in &made {
        let r = send(
            Method::GET,
            &stack.url(&format!("/sessions/{child}/changes?repo=web&file=way.txt")),
            None,
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let text = r.body.to_string();
        assert!(text.contains("way.txt") && text.contains("+way "), "{text}");
        diffs.push(text);
    }
    diffs.dedup();
    assert_eq!(diffs.len(), 3, "three different changes");
    // One PR, from the chosen attempt's branch.
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!(pulls[0].head, format!("open-inspect/{}", made[1]));
    assert_eq!(pulls[0].base, "main");
    assert_eq!(pulls[0].title, "Add a line to way.txt");
    assert!(
        pulls[0].body.contains("Chosen from 3 attempts"),
        "{}",
        pulls[0].body
    );
    let choose_url = stack.url(&format!("/sessions/{parent}/attempts/choose"));
    // Decided once: another attempt is refused; the same again opens nothing new.
    let r = send(
        Method::POST,
        &choose_url,
        Some(json!({"sessionId": made[0]})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 409, "{}", r.body);
    let r = send(
        Method::POST,
        &choose_url,
        Some(json!({"sessionId": made[1]})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(gh.pulls().len(), 1);
    assert_eq!(r.body["pullRequests"][0]["updated"], true, "{}", r.body);
    let mut stopped: Vec<String> = r.body["stopped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    stopped.sort();
    let mut others = vec![made[0].clone(), made[2].clone()];
    others.sort();
    assert_eq!(stopped, others, "the others are stopped");
    let r = send(
        Method::POST,
        &choose_url,
        Some(json!({"sessionId": parent})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 404, "not an attempt: {}", r.body);
    let listed = send(Method::GET, &children_url, None).await.unwrap().body;
    assert_eq!(listed["attempts"][0]["chosen"], made[1].as_str());

    // Over the children's limits: a 400 that names them (at most 5 run at once: three
    // running leave room for two).
    let r = send(
        Method::POST,
        &attempts_url,
        Some(json!({"content": "Once more", "count": 3, "agents": ["claude-code"]})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    // One agent an attempt where named (the session's for the rest).
    let mut agents = Vec::new();
    for s in r.body["sessions"].as_array().unwrap() {
        let state = send(
            Method::GET,
            &stack.url(&format!("/sessions/{}", s.as_str().unwrap())),
            None,
        )
        .await
        .unwrap();
        agents.push(state.body["agent"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(agents, ["claude-code", "opencode", "opencode"]);
    let r = send(
        Method::POST,
        &attempts_url,
        Some(json!({"content": "And again", "count": 3})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.to_string().contains("at most 5 run at once"),
        "{}",
        r.body
    );
    let listed = send(Method::GET, &children_url, None).await.unwrap().body;
    assert_eq!(
        listed["attempts"].as_array().unwrap().len(),
        2,
        "a refused group is not listed: {listed}"
    );
    // More models than attempts.
    let r = send(
        Method::POST,
        &attempts_url,
        Some(json!({"content": "again", "count": 4, "models": ["a", "b", "c", "d", "e"]})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body
            .to_string()
            .contains("at most one of each per attempt"),
        "{}",
        r.body
    );
}
