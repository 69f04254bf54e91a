//! Who may do what, through the real Worker: GitHub sign-in (against a fake GitHub that
//! follows its documented API), service signatures, personal API tokens, secrets and
//! brokered git credentials.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{send, WsClient};
use inspect_tests::fakes::github::{Account, FakeGitHub};
use inspect_tests::fakes::model::Reply;
use inspect_tests::host::SandboxHost;
use inspect_tests::repo::{git, init_repo};
use inspect_tests::signing::{now_ms, sig1};
use inspect_tests::{Stack, StackOptions};
use reqwest::header::{HeaderMap, COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::Command;

fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn cookies(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

fn cookie_value(set_cookies: &[String], name: &str) -> Option<String> {
    set_cookies.iter().find_map(|c| {
        let first = c.split(';').next()?;
        let (k, v) = first.split_once('=')?;
        (k == name && !v.is_empty()).then(|| v.to_owned())
    })
}

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
            emails: vec![("carol@elsewhere.org".into(), true)],
            orgs: vec!["acme".into()],
        },
        Account {
            id: 1003,
            login: "mallory".into(),
            // Unverified addresses do not count.
            emails: vec![("mallory@example.com".into(), false)],
            orgs: vec!["evil".into()],
        },
    ]
}

/// Walks the OAuth flow as `login`; the callback's response.
async fn oauth(stack: &Stack, gh: &FakeGitHub, login: &str) -> reqwest::Response {
    gh.sign_in_as(login);
    let b = browser();
    let start = b
        .get(stack.url("/auth/github?returnTo=/sessions/abc"))
        .send()
        .await
        .unwrap();
    assert_eq!(start.status(), StatusCode::FOUND);
    let state_cookie = cookie_value(&cookies(start.headers()), "inspect_oauth_state").unwrap();
    let to_github = start.headers()[LOCATION].to_str().unwrap().to_owned();
    assert!(to_github.starts_with(&format!("{}/login/oauth/authorize?", gh.base_url)));
    assert!(to_github.contains("client_id=Iv1.fakeclient"));
    let back = b.get(&to_github).send().await.unwrap();
    assert_eq!(back.status(), StatusCode::FOUND);
    let callback = back.headers()[LOCATION].to_str().unwrap().to_owned();
    assert!(callback.starts_with(&stack.url("/auth/github/callback?")));
    b.get(&callback)
        .header(COOKIE, format!("inspect_oauth_state={state_cookie}"))
        .send()
        .await
        .unwrap()
}

async fn with_cookie(method: Method, url: &str, cookie: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = browser()
        .request(method, url)
        .header(COOKIE, format!("inspect_session={cookie}"));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn signed_in_stack(gh: &FakeGitHub, extra: &[(&str, &str)]) -> StackOptions {
    let mut vars = gh.worker_vars();
    vars.push(("ALLOWED_USERS".into(), "alice".into()));
    vars.push(("ALLOWED_GITHUB_ORGS".into(), "acme".into()));
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    StackOptions {
        vars,
        local_mode: false,
        ..Default::default()
    }
}

#[tokio::test]
async fn a_user_signs_in_with_github_and_joins_a_session() {
    let gh = FakeGitHub::start(accounts()).await.unwrap();
    let stack = Stack::start_with(signed_in_stack(&gh, &[])).await.unwrap();

    // Not signed in: refused.
    let r = send(Method::POST, &stack.url("/sessions"), Some(json!({})))
        .await
        .unwrap();
    assert_eq!(r.status, 401, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "unauthorized");

    let done = oauth(&stack, &gh, "alice").await;
    assert_eq!(done.status(), StatusCode::FOUND, "{:?}", done.text().await);
    assert_eq!(done.headers()[LOCATION], "/sessions/abc");
    let set = cookies(done.headers());
    let session_cookie = set
        .iter()
        .find(|c| c.starts_with("inspect_session="))
        .unwrap();
    assert!(session_cookie.contains("HttpOnly") && session_cookie.contains("SameSite=Lax"));
    assert!(!session_cookie.contains("Secure"), "loopback: no Secure");
    assert!(session_cookie.contains(&format!("Max-Age={}", 7 * 24 * 3600)));
    let cookie = cookie_value(&set, "inspect_session").unwrap();

    let (status, me) = with_cookie(Method::GET, &stack.url("/auth/me"), &cookie, None).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["user"]["userId"], "github:1001");
    assert_eq!(me["user"]["name"], "alice");
    assert_eq!(me["user"]["email"], "alice@example.com");
    assert_eq!(me["via"], "browser");

    // Creates a session, gets a WS token, subscribes.
    let (status, created) = with_cookie(
        Method::POST,
        &stack.url("/sessions"),
        &cookie,
        Some(json!({"title": "mine"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["sessionId"].as_str().unwrap().to_owned();
    let (status, token) = with_cookie(
        Method::POST,
        &stack.url(&format!("/sessions/{id}/ws-token")),
        &cookie,
        None,
    )
    .await;
    assert_eq!(status, 200, "{token}");
    let mut ws = WsClient::connect(&stack.ws_url(&format!("/sessions/{id}/ws")))
        .await
        .unwrap();
    ws.send(json!({"type": "subscribe", "token": token["token"], "clientId": "alice-1"}))
        .await
        .unwrap();
    let subscribed = ws.recv_type("subscribed").await.unwrap();
    assert_eq!(subscribed["participant"]["userId"], "github:1001");
    assert_eq!(subscribed["participant"]["name"], "alice");

    // The token is bound to its session: another session's socket refuses it.
    let (_, other) = with_cookie(
        Method::POST,
        &stack.url("/sessions"),
        &cookie,
        Some(json!({})),
    )
    .await;
    let other = other["sessionId"].as_str().unwrap();
    let mut ws2 = WsClient::connect(&stack.ws_url(&format!("/sessions/{other}/ws")))
        .await
        .unwrap();
    ws2.send(json!({"type": "subscribe", "token": token["token"], "clientId": "x"}))
        .await
        .unwrap();
    assert_eq!(
        ws2.closed_within(10).await.unwrap(),
        inspect_tests::client::Closed::Code(4001)
    );

    // A cookie-authenticated write from another site is refused.
    let r = browser()
        .post(stack.url("/sessions"))
        .header(COOKIE, format!("inspect_session={cookie}"))
        .header("Origin", "https://evil.example")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // An org member is admitted too; the org needs `read:org`.
    let carol = oauth(&stack, &gh, "carol").await;
    assert_eq!(carol.status(), StatusCode::FOUND);

    // Sign-out revokes the session server-side.
    let (status, _) = with_cookie(Method::POST, &stack.url("/auth/logout"), &cookie, None).await;
    assert_eq!(status, 200);
    let (status, _) = with_cookie(Method::GET, &stack.url("/auth/me"), &cookie, None).await;
    assert_eq!(status, 401);
    let (status, _) = with_cookie(Method::GET, &stack.url("/auth/me"), "forged", None).await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn strangers_and_forged_states_are_refused() {
    let gh = FakeGitHub::start(accounts()).await.unwrap();
    let stack = Stack::start_with(signed_in_stack(&gh, &[])).await.unwrap();

    // Not on any list (and an unverified address on an allowed domain does not count).
    let r = oauth(&stack, &gh, "mallory").await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(cookie_value(&cookies(r.headers()), "inspect_session").is_none());
    let body: Value = r.json().await.unwrap();
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("allow-list"));

    // A callback whose state does not match the browser's cookie.
    gh.sign_in_as("alice");
    let b = browser();
    let start = b.get(stack.url("/auth/github")).send().await.unwrap();
    let to_github = start.headers()[LOCATION].to_str().unwrap().to_owned();
    let callback = b.get(&to_github).send().await.unwrap().headers()[LOCATION]
        .to_str()
        .unwrap()
        .to_owned();
    let r = b
        .get(&callback)
        .header(COOKIE, "inspect_oauth_state=forged")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // A state made up on both sides (never issued).
    let r = b
        .get(stack.url("/auth/github/callback?code=x&state=made-up"))
        .header(COOKIE, "inspect_oauth_state=made-up")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // The real one works once, and only once.
    let state = callback.split("state=").nth(1).unwrap().to_owned();
    let first = b
        .get(&callback)
        .header(COOKIE, format!("inspect_oauth_state={state}"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::FOUND);
    let replay = b
        .get(&callback)
        .header(COOKIE, format!("inspect_oauth_state={state}"))
        .send()
        .await
        .unwrap();
    assert_eq!(replay.status(), StatusCode::BAD_REQUEST);

    // Nobody is admitted when no allow-list is set.
    drop(stack);
    let mut open = signed_in_stack(&gh, &[]);
    open.vars.retain(|(k, _)| !k.starts_with("ALLOWED_"));
    let stack = Stack::start_with(open).await.unwrap();
    let r = oauth(&stack, &gh, "alice").await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn an_allowed_address_past_the_first_page_of_emails_admits() {
    // GitHub pages `/user/emails`; the one address that admits is on the second page.
    let mut emails: Vec<(String, bool)> = (0..130)
        .map(|i| (format!("dana{i}@elsewhere.org"), true))
        .collect();
    emails[115] = ("dana@corp.example".into(), true);
    let gh = FakeGitHub::start(vec![Account {
        id: 1004,
        login: "dana".into(),
        emails,
        orgs: vec![],
    }])
    .await
    .unwrap();
    let stack = Stack::start_with(signed_in_stack(
        &gh,
        &[("ALLOWED_EMAIL_DOMAINS", "corp.example")],
    ))
    .await
    .unwrap();
    let r = oauth(&stack, &gh, "dana").await;
    assert_eq!(r.status(), StatusCode::FOUND, "{:?}", r.text().await);
}

#[tokio::test]
async fn service_clients_sign_their_requests() {
    let secret = "slack-bot-shared-secret";
    let stack = Stack::start_with(StackOptions {
        vars: vec![("SERVICE_AUTH_SECRET_SLACK_BOT".into(), secret.into())],
        ..Default::default()
    })
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let body = br#"{"title":"from slack"}"#.to_vec();
    let post = |signature: String, service: &str, actor: &str, body: Vec<u8>| {
        client
            .post(stack.url("/sessions"))
            .header("Content-Type", "application/json")
            .header("X-OpenInspect-Service", service)
            .header("X-OpenInspect-Service-Signature", signature)
            .header("X-OpenInspect-Actor", actor)
            .body(body)
            .send()
    };
    let good = sig1(
        secret,
        "slack-bot",
        now_ms(),
        "POST",
        "/sessions",
        "",
        &body,
        "slack:U123",
    );
    let r = post(good.clone(), "slack-bot", "slack:U123", body.clone())
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    // A signed GET with a query, its pairs signed in canonical order.
    let at = now_ms();
    let path = format!("/sessions/{id}");
    let r = client
        .get(stack.url(&format!("{path}?z=2&a=b+c")))
        .header("X-OpenInspect-Service", "slack-bot")
        .header(
            "X-OpenInspect-Service-Signature",
            sig1(
                secret,
                "slack-bot",
                at,
                "GET",
                &path,
                "a=b%20c&z=2",
                b"",
                "slack:U123",
            ),
        )
        .header("X-OpenInspect-Actor", "slack:U123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let state: Value = r.json().await.unwrap();
    assert_eq!(state["createdBy"], "slack:U123");

    let refused = [
        // The very same signed request again, inside its window.
        post(good.clone(), "slack-bot", "slack:U123", body.clone()),
        // Tampered body.
        post(
            good.clone(),
            "slack-bot",
            "slack:U123",
            br#"{"title":"evil"}"#.to_vec(),
        ),
        // Another actor than the one signed.
        post(good.clone(), "slack-bot", "slack:U999", body.clone()),
        // Signed for another service.
        post(good.clone(), "github-bot", "slack:U123", body.clone()),
        // Unknown service.
        post(good.clone(), "evil-bot", "slack:U123", body.clone()),
        // Wrong secret.
        post(
            sig1(
                "guess",
                "slack-bot",
                now_ms(),
                "POST",
                "/sessions",
                "",
                &body,
                "slack:U123",
            ),
            "slack-bot",
            "slack:U123",
            body.clone(),
        ),
        // Replayed six minutes later.
        post(
            sig1(
                secret,
                "slack-bot",
                now_ms() - 6 * 60 * 1000,
                "POST",
                "/sessions",
                "",
                &body,
                "slack:U123",
            ),
            "slack-bot",
            "slack:U123",
            body.clone(),
        ),
        // Malformed.
        post("sig1.x.y.z".into(), "slack-bot", "slack:U123", body.clone()),
    ];
    for (i, r) in futures::future::join_all(refused)
        .await
        .into_iter()
        .enumerate()
    {
        let r = r.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "case {i}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], "unauthorized", "case {i}");
    }
    // Nothing was created by the refused requests.
    let list = client
        .get(stack.url("/sessions"))
        .header("X-OpenInspect-Service", "slack-bot")
        .header(
            "X-OpenInspect-Service-Signature",
            sig1(
                secret,
                "slack-bot",
                now_ms(),
                "GET",
                "/sessions",
                "",
                b"",
                "",
            ),
        )
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "{list}");
}

#[tokio::test]
async fn personal_api_tokens_are_shown_once_and_revocable() {
    let stack = Stack::start().await.unwrap();
    let r = send(
        Method::POST,
        &stack.url("/tokens"),
        Some(json!({"name": "ci script"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let token = r.body["token"].as_str().unwrap().to_owned();
    let id = r.body["id"].as_str().unwrap().to_owned();
    assert!(token.starts_with("oit_") && token.len() == 68);
    let list = send(Method::GET, &stack.url("/tokens"), None)
        .await
        .unwrap();
    assert_eq!(list.body["tokens"][0]["name"], "ci script");
    assert!(
        !list.body.to_string().contains(&token[4..]),
        "listed once only"
    );

    let c = reqwest::Client::new();
    // From a non-loopback address (so local mode cannot apply), the token alone lets in.
    let me: Value = c
        .get(stack.url("/auth/me"))
        .bearer_auth(&token)
        .header("CF-Connecting-IP", "203.0.113.7")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["via"], "api_token");
    assert_eq!(me["user"]["userId"], "local:local");
    // A token cannot mint more tokens.
    let r = c
        .post(stack.url("/tokens"))
        .bearer_auth(&token)
        .json(&json!({"name": "more"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    for bad in [
        json!({"name": ""}),
        json!({"name": "x".repeat(101)}),
        json!({"nom": "x"}),
    ] {
        let r = send(Method::POST, &stack.url("/tokens"), Some(bad))
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{}", r.body);
    }
    let r = send(Method::DELETE, &stack.url(&format!("/tokens/{id}")), None)
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let r = c
        .get(stack.url("/auth/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = c
        .get(stack.url("/auth/me"))
        .bearer_auth("oit_0000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

const PLAINTEXTS: &[&str] = &[
    "global-value-7f3a",
    "repo-value-91cc",
    "env-value-c0de",
    "replaced-value-55aa",
];

/// Every body a test read, to scan for secret values.
#[derive(Default)]
struct Transcript(Vec<String>);

impl Transcript {
    async fn send(
        &mut self,
        method: Method,
        url: &str,
        body: Option<Value>,
    ) -> inspect_tests::client::Reply {
        let r = send(method, url, body).await.unwrap();
        self.0.push(r.body.to_string());
        r
    }

    fn assert_clean(&self, extra: &[String]) {
        for text in self.0.iter().chain(extra) {
            for p in PLAINTEXTS {
                assert!(!text.contains(p), "secret {p} leaked in: {text}");
            }
        }
    }
}

#[tokio::test]
async fn secrets_are_sealed_listed_by_name_and_checked() {
    let stack = Stack::start().await.unwrap();
    let mut t = Transcript::default();
    let r = t
        .send(
            Method::PUT,
            &stack.url("/secrets"),
            Some(json!({"secrets": {"shared_a": PLAINTEXTS[0], "SHARED_B": PLAINTEXTS[0]}})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let names: Vec<&str> = r.body["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["SHARED_A", "SHARED_B"]);
    let r = t
        .send(
            Method::PUT,
            &stack.url("/secrets"),
            Some(json!({"secrets": {"SHARED_A": PLAINTEXTS[3]}})),
        )
        .await;
    assert_eq!(r.status, 200);
    let list = t.send(Method::GET, &stack.url("/secrets"), None).await;
    assert_eq!(list.body["secrets"].as_array().unwrap().len(), 2);
    assert!(
        list.body["secrets"][0]["updatedAt"].as_i64().unwrap()
            >= list.body["secrets"][0]["createdAt"].as_i64().unwrap()
    );

    // Bad input changes nothing.
    let bad = [
        json!({"secrets": {"1BAD": "x"}}),
        json!({"secrets": {"A;rm -rf /": "x"}}),
        json!({"secrets": {"A=B": "x"}}),
        json!({"secrets": {"PATH": "x"}}),
        json!({"secrets": {"inspect_sandbox_token": "x"}}),
        json!({"secrets": {"OK_NAME": "x", "ok_name": "y"}}),
        json!({"secrets": {}}),
        json!({"secrets": {"A": 5}}),
        json!({"values": {"A": "x"}}),
        json!(["A"]),
    ];
    for b in bad {
        let r = t
            .send(Method::PUT, &stack.url("/secrets"), Some(b.clone()))
            .await;
        assert_eq!(r.status, 400, "{b}: {}", r.body);
    }
    let r = t
        .send(
            Method::PUT,
            &stack.url("/secrets"),
            Some(json!({"secrets": {"HUGE": "x".repeat(16 * 1024 + 1)}})),
        )
        .await;
    assert_eq!(r.status, 413);
    let many: serde_json::Map<String, Value> =
        (0..49).map(|i| (format!("S{i}"), json!("v"))).collect();
    let r = t
        .send(
            Method::PUT,
            &stack.url("/secrets"),
            Some(json!({"secrets": many})),
        )
        .await;
    assert_eq!(r.status, 413, "2 + 49 > 50: {}", r.body);
    let list = t.send(Method::GET, &stack.url("/secrets"), None).await;
    assert_eq!(list.body["secrets"].as_array().unwrap().len(), 2);

    // Scopes: an unknown environment is 404; a repository scope by name.
    let r = t
        .send(
            Method::GET,
            &stack.url("/environments/env_nope/secrets"),
            None,
        )
        .await;
    assert_eq!(r.status, 404);
    let r = t
        .send(
            Method::PUT,
            &stack.url("/repos/acme/web/secrets"),
            Some(json!({"secrets": {"R": PLAINTEXTS[1]}})),
        )
        .await;
    assert_eq!(r.status, 200);
    let r = t
        .send(
            Method::DELETE,
            &stack.url("/repos/acme/web/secrets/r"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["key"], "R");
    let r = t
        .send(
            Method::DELETE,
            &stack.url("/repos/acme/web/secrets/R"),
            None,
        )
        .await;
    assert_eq!(r.status, 404);

    // What D1 holds is sealed.
    let d1 = dump_d1(stack.state_dir());
    assert!(d1.contains("SHARED_A"), "the table was found");
    t.assert_clean(&[d1, stack.log()]);

    // Without the key, a clear error.
    drop(stack);
    let stack = Stack::start_with(StackOptions {
        without_secrets_key: true,
        ..StackOptions::local()
    })
    .await
    .unwrap();
    let r = send(
        Method::PUT,
        &stack.url("/secrets"),
        Some(json!({"secrets": {"A": "b"}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 503);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("REPO_SECRETS_ENCRYPTION_KEY"));
}

/// Every text column of every D1 database in a stack's state directory.
fn dump_d1(state: &Path) -> String {
    let mut out = String::new();
    let mut stack = vec![state.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "sqlite") {
                let o = Command::new("sqlite3").arg(&p).arg(".dump").output();
                match o {
                    Ok(o) => out.push_str(&String::from_utf8_lossy(&o.stdout)),
                    Err(_) => out.push_str(&String::from_utf8_lossy(
                        &std::fs::read(&p).unwrap_or_default(),
                    )),
                }
            }
        }
    }
    out
}

async fn until_complete(ws: &mut WsClient, host: &SandboxHost) -> Vec<Value> {
    let mut seen = vec![];
    loop {
        let m = ws
            .recv_within(120)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{seen:#?}\n{}", host.sandbox_logs()));
        if m["type"] == "sandbox_error" {
            panic!("sandbox error: {m}\n{}", host.sandbox_logs());
        }
        let done = m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete";
        seen.push(m);
        if done {
            return seen;
        }
    }
}

fn tool_outputs(seen: &[Value]) -> String {
    seen.iter()
        .filter(|m| m["event"]["type"] == "tool_call" && m["event"]["status"] == "completed")
        .map(|m| m["event"]["output"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn secrets_reach_the_sandbox_as_the_seeds_say() {
    // The agent prints a digest of what it sees, never the values themselves.
    let command = "printf '%s|%s|%s|%s' \"$SHARED_A\" \"$SHARED_B\" \"$SHARED_C\" \"$ONLY_GLOBAL\" | sha256sum | cut -c1-64; echo token-vars=$(env | grep -c '^INSPECT_SANDBOX_TOKEN=')";
    let AgentStack {
        model: _model,
        host,
        stack,
    } = AgentStack::start(
        vec![
            Reply::tool(
                "bash",
                json!({"command": command, "description": "inspect env"}),
            ),
            Reply::text("Seen."),
            Reply::tool(
                "bash",
                json!({"command": command, "description": "inspect env again"}),
            ),
            Reply::text("Seen again."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let repo = tempfile::tempdir().unwrap();
    init_repo(repo.path());
    let other = tempfile::tempdir().unwrap();
    init_repo(other.path());
    let mut t = Transcript::default();
    let r = t
        .send(
            Method::POST,
            &stack.url("/repos"),
            Some(json!({"name": "demo", "path": repo.path().to_string_lossy()})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = t
        .send(
            Method::POST,
            &stack.url("/repos"),
            Some(json!({"name": "other", "path": other.path().to_string_lossy()})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = t
        .send(
            Method::POST,
            &stack.url("/environments"),
            Some(json!({"name": "staging", "repositories": [{"owner": "local", "name": "demo"}]})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let env_id = r.body["id"].as_str().unwrap().to_owned();
    let put = |url: String, secrets: Value| (url, json!({ "secrets": secrets }));
    for (url, body) in [
        put(
            stack.url("/secrets"),
            json!({"SHARED_A": PLAINTEXTS[0], "SHARED_B": PLAINTEXTS[0], "SHARED_C": PLAINTEXTS[0], "ONLY_GLOBAL": PLAINTEXTS[0]}),
        ),
        put(
            stack.url("/repos/local/demo/secrets"),
            json!({"SHARED_B": PLAINTEXTS[1], "SHARED_C": PLAINTEXTS[1]}),
        ),
        put(
            stack.url("/repos/local/other/secrets"),
            json!({"SHARED_B": PLAINTEXTS[3], "ONLY_GLOBAL": PLAINTEXTS[3]}),
        ),
        put(
            stack.url(&format!("/environments/{env_id}/secrets")),
            json!({"SHARED_C": PLAINTEXTS[2]}),
        ),
    ] {
        let r = t.send(Method::PUT, &url, Some(body)).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = t
        .send(
            Method::POST,
            &stack.url("/sessions"),
            Some(json!({"environmentId": env_id})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["sessionId"].as_str().unwrap().to_owned();
    let (mut ws, _) = WsClient::join(&stack.base_url, &stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "show me the environment"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, &host).await;
    // An environment session: global and the environment's secrets; its repository's own
    // secrets do not flow in. A, B: global; C: the environment's over global.
    let expected = hex::encode(Sha256::digest(
        format!(
            "{}|{}|{}|{}",
            PLAINTEXTS[0], PLAINTEXTS[0], PLAINTEXTS[2], PLAINTEXTS[0]
        )
        .as_bytes(),
    ));
    let output = tool_outputs(&seen);
    assert!(output.contains(&expected), "environment session: {output}");

    // An ad-hoc session on two repositories: global and each repository's, the primary
    // winning collisions; no environment's.
    let r = t
        .send(
            Method::POST,
            &stack.url("/sessions"),
            Some(json!({"repositories": [{"owner": "local", "name": "demo"}, {"owner": "local", "name": "other"}]})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let adhoc = r.body["sessionId"].as_str().unwrap().to_owned();
    let (mut ws2, _) = WsClient::join(&stack.base_url, &stack.ws_url(""), &adhoc, "ann")
        .await
        .unwrap();
    ws2.send(json!({"type": "prompt", "content": "show me the environment"}))
        .await
        .unwrap();
    let seen2 = until_complete(&mut ws2, &host).await;
    // A: global; B: the primary's (demo) over other's and global; C: demo's;
    // ONLY_GLOBAL: other's over global.
    let expected = hex::encode(Sha256::digest(
        format!(
            "{}|{}|{}|{}",
            PLAINTEXTS[0], PLAINTEXTS[1], PLAINTEXTS[1], PLAINTEXTS[3]
        )
        .as_bytes(),
    ));
    let output2 = tool_outputs(&seen2);
    assert!(output2.contains(&expected), "ad-hoc session: {output2}");
    assert!(
        output.contains("token-vars=0"),
        "the agent never sees the sandbox token: {output}"
    );

    // No secret value in any response, socket message or log line.
    let messages: Vec<String> = seen.iter().chain(&seen2).map(|m| m.to_string()).collect();
    let mut logs = vec![stack.log(), host.log(), host.sandbox_logs()];
    logs.extend(messages);
    let events = t
        .send(
            Method::GET,
            &stack.url(&format!("/sessions/{id}/events")),
            None,
        )
        .await;
    assert_eq!(events.status, 200);
    t.assert_clean(&logs);
}

#[tokio::test]
async fn a_sandbox_clones_a_private_repository_through_the_credential_helper() {
    let gh = FakeGitHub::start(vec![]).await.unwrap();
    let bare = gh.repos_root.join("acme/private.git");
    let work = tempfile::tempdir().unwrap();
    init_repo(work.path());
    git(
        work.path(),
        &["clone", "--quiet", "--bare", ".", bare.to_str().unwrap()],
    );
    let AgentStack {
        model: _model,
        host,
        stack,
    } = AgentStack::start(
        vec![
            Reply::tool(
                "write",
                json!({"filePath": "from-agent.txt", "content": "hi\n"}),
            ),
            Reply::text("Done."),
        ],
        gh.worker_vars(),
    )
    .await
    .unwrap();

    // Unknown to the App: refused before any sandbox.
    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "acme", "repoName": "nope"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);

    let r = send(
        Method::POST,
        &stack.url("/sessions"),
        Some(json!({"repoOwner": "acme", "repoName": "private"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["sessionId"].as_str().unwrap().to_owned();

    // Only the session's live sandbox gets credentials.
    let c = reqwest::Client::new();
    for (auth, sandbox) in [(None, None), (Some("Bearer nope"), Some("sb_x"))] {
        let mut req = c.post(stack.url(&format!("/sessions/{id}/scm-credentials")));
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        if let Some(s) = sandbox {
            req = req.header("X-Sandbox-ID", s);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert!(!r.text().await.unwrap().contains("ghs_"));
    }

    let (mut ws, _) = WsClient::join(&stack.base_url, &stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "add a file"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, &host).await;
    let done = seen
        .iter()
        .rev()
        .find(|m| m["event"]["type"] == "execution_complete")
        .unwrap();
    assert_eq!(done["event"]["success"], true, "{done}");

    // Git first asked without credentials (401), then with the brokered token.
    let requests = gh.git_requests();
    assert!(requests.iter().any(|(_, s)| *s == 401), "{requests:?}");
    assert!(
        requests
            .iter()
            .any(|(p, s)| p.ends_with("git-upload-pack") && *s == 200),
        "{requests:?}"
    );
    // The clone and the push were served by one token narrowed to the session's
    // repository and to what git needs (the Worker and the supervisor keep it until shortly
    // before it expires); the App's own token served the repository lookup.
    let asked = requests.iter().filter(|(_, s)| *s == 401).count();
    assert!(
        asked >= 2,
        "clone and push each asked for credentials: {requests:?}"
    );
    assert_eq!(gh.mints(), 2, "{requests:?}");
    let grants = gh.grants();
    let narrowed: Vec<_> = grants.iter().filter(|g| g.repositories.is_some()).collect();
    assert_eq!(narrowed.len(), 1, "{grants:?}");
    assert_eq!(
        narrowed[0].repositories.as_deref(),
        Some(&["private".to_owned()][..])
    );
    assert_eq!(
        narrowed[0].permissions,
        json!({"contents": "write", "metadata": "read"})
    );
    // The session branch was pushed back through the helper too.
    let branch = format!("open-inspect/{id}");
    let pushed = Command::new("git")
        .args([
            "--git-dir",
            bare.to_str().unwrap(),
            "rev-parse",
            "--verify",
            &branch,
        ])
        .output()
        .unwrap();
    assert!(
        pushed.status.success(),
        "{requests:?}\n{}",
        host.sandbox_logs()
    );
    // Nothing of the token was written to the workspace's git config.
    let configs = find_files(&host_dir(&host), "config");
    assert!(!configs.is_empty());
    for c in configs {
        let text = std::fs::read_to_string(&c).unwrap_or_default();
        assert!(
            !text.contains("ghs_") && !text.contains("x-access-token"),
            "{}: {text}",
            c.display()
        );
    }
}

fn host_dir(host: &SandboxHost) -> std::path::PathBuf {
    host.data_dir().join("sandboxes")
}

fn find_files(root: &Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == name)
                && p.parent().is_some_and(|d| d.ends_with(".git"))
            {
                out.push(p);
            }
        }
    }
    out
}

#[tokio::test]
async fn a_sandbox_token_works_only_for_its_own_session_and_sandbox() {
    use inspect_tests::capture_provider::{connect_sandbox, CaptureProvider};
    let gh = FakeGitHub::start(vec![]).await.unwrap();
    let mut provider = CaptureProvider::start().await.unwrap();
    let mut options = StackOptions::local();
    options.vars = provider.worker_vars();
    options.vars.extend(gh.worker_vars());
    let stack = Stack::start_with(options).await.unwrap();
    // Tokens are minted only narrowed to a session's GitHub repositories: one to work on.
    let work = tempfile::tempdir().unwrap();
    init_repo(work.path());
    git(
        work.path(),
        &[
            "clone",
            "--quiet",
            "--bare",
            ".",
            gh.repos_root.join("acme/web.git").to_str().unwrap(),
        ],
    );
    let mut spawns = vec![];
    for _ in 0..2 {
        let r = send(
            Method::POST,
            &stack.url("/sessions"),
            Some(json!({"repoOwner": "acme", "repoName": "web"})),
        )
        .await
        .unwrap();
        let id = r.body["sessionId"].as_str().unwrap().to_owned();
        let r = send(
            Method::POST,
            &stack.url(&format!("/sessions/{id}/prompt")),
            Some(json!({"content": "hi"})),
        )
        .await
        .unwrap();
        assert!(r.status < 300, "{}", r.body);
        spawns.push(provider.next_spawn().await.unwrap());
    }
    let (a, b) = (&spawns[0], &spawns[1]);
    let c = reqwest::Client::new();
    let creds = |session: &str, token: &str, sandbox: &str| {
        c.post(stack.url(&format!("/sessions/{session}/scm-credentials")))
            .bearer_auth(token)
            .header("X-Sandbox-ID", sandbox)
            .send()
    };
    // Its own session and sandbox: a short-lived installation token.
    let r = creds(&a.session_id, &a.sandbox_token, &a.sandbox_id)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["cache-control"], "no-store");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["username"], "x-access-token");
    assert!(body["password"].as_str().unwrap().starts_with("ghs_"));
    assert!(body["expiresAtEpochMs"].as_i64().unwrap() > now_ms() as i64 + 50 * 60 * 1000);
    // Narrowed to the session's repository and to what git needs (the other token is the
    // App's own, which looked the repository up when the session was made).
    let grants = gh.grants();
    let narrowed: Vec<_> = grants.iter().filter(|g| g.repositories.is_some()).collect();
    assert_eq!(narrowed.len(), 1, "{grants:?}");
    assert_eq!(
        narrowed[0].repositories.as_deref(),
        Some(&["web".to_owned()][..])
    );
    assert_eq!(
        narrowed[0].permissions,
        json!({"contents": "write", "metadata": "read"})
    );
    // Another session's token, or its own with another sandbox's id: refused.
    let r = creds(&b.session_id, &a.sandbox_token, &a.sandbox_id)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = creds(&b.session_id, &a.sandbox_token, &b.sandbox_id)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = creds(&a.session_id, &a.sandbox_token, &b.sandbox_id)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // The same on the sandbox socket.
    let mut wrong = a.clone();
    wrong.session_id = b.session_id.clone();
    assert!(connect_sandbox(&stack, &wrong).await.is_err());
    assert!(connect_sandbox(&stack, a).await.is_ok());
    // A sandbox token is no API credential.
    let r = c
        .get(stack.url("/sessions"))
        .bearer_auth(&a.sandbox_token)
        .header("CF-Connecting-IP", "203.0.113.7")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}
