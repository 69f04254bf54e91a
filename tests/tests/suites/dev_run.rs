//! The README's run command (`./scripts/dev.sh`) as a new user runs it: settings come from
//! the `.dev.vars` file and the environment, it says which (by name only), and a
//! service signed with the secret set that way is accepted.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::host::supervisor_bin;
use inspect_tests::signing::{now_ms, sig1};
use inspect_tests::stack::{apply_tool_env, ensure_worker_built, free_port, stop_group};
use reqwest::StatusCode;
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "dev-vars-slack-secret-4b1d";
const ORG_FROM_ENV: &str = "acme-from-the-environment";

#[tokio::test]
async fn the_run_command_takes_dev_vars_and_the_environment() {
    ensure_worker_built().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let vars = dir.path().join("dev.vars");
    // As a user writes it: copied from the example, a value filled in, others left empty
    // (empty must not blank the run command's own values, e.g. the secrets key).
    std::fs::write(
        &vars,
        format!(
            "# my settings\nLOCAL_MODE=true\nREPO_SECRETS_ENCRYPTION_KEY=\nSERVICE_AUTH_SECRET_SLACK_BOT=\"{SECRET}\"  # the bot's\nexport ALLOWED_USERS=alice\n"
        ),
    )
    .unwrap();
    // Ports free a moment ago can be taken by another test before the run command binds
    // them: it then stops and says so, and is started again on others.
    let log_path = dir.path().join("dev.log");
    let printed = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut tries = 0;
    let (child, base) = loop {
        let (child, base, up) = start_run_command(dir.path(), &vars, &log_path).await;
        if up {
            break (child, base);
        }
        stop_group(child, Duration::from_secs(5));
        tries += 1;
        if tries < 3 && printed().contains("Address already in use") {
            continue;
        }
        panic!("dev.sh did not come up:\n{}", printed());
    };

    let client = reqwest::Client::new();
    let body = br#"{"title":"signed from slack"}"#.to_vec();
    let post = |signature: String| {
        client
            .post(format!("{base}/sessions"))
            .header("Content-Type", "application/json")
            .header("X-OpenInspect-Service", "slack-bot")
            .header("X-OpenInspect-Service-Signature", signature)
            .header("X-OpenInspect-Actor", "slack:U42")
            .body(body.clone())
            .send()
    };
    let good = sig1(
        SECRET,
        "slack-bot",
        now_ms(),
        "POST",
        "/sessions",
        "",
        &body,
        "slack:U42",
    );
    let r = post(good).await.unwrap();
    let status = r.status();
    let created: Value = r.json().await.unwrap();
    // A wrong secret is refused: the request was judged by its signature, not local mode.
    let bad = sig1(
        "not-the-secret",
        "slack-bot",
        now_ms(),
        "POST",
        "/sessions",
        "",
        &body,
        "slack:U42",
    );
    let refused = post(bad).await.unwrap().status();
    // The run command's own secrets key is still there (the empty line did not blank it).
    let secrets = client
        .put(format!("{base}/secrets"))
        .json(&serde_json::json!({"secrets": {"DEV_RUN_CHECK": "v"}}))
        .send()
        .await
        .unwrap()
        .status();
    let session = match created["sessionId"].as_str() {
        Some(id) => client
            .get(format!("{base}/sessions/{id}"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap(),
        None => Value::Null,
    };
    stop_group(child, Duration::from_secs(10));
    let out = printed();
    assert_eq!(status, StatusCode::CREATED, "{created}\n{out}");
    assert_eq!(refused, StatusCode::UNAUTHORIZED, "{out}");
    assert_eq!(secrets, StatusCode::OK, "{out}");
    assert_eq!(session["createdBy"], "slack:U42", "{session}");
    assert!(
        out.contains(&format!("read settings from {}", vars.display())),
        "{out}"
    );
    let line = |source: &str| {
        out.lines()
            .find(|l| l.contains(&format!("settings from {source}:")))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        line("dev.vars").contains("SERVICE_AUTH_SECRET_SLACK_BOT"),
        "{out}"
    );
    assert!(line("dev.vars").contains("ALLOWED_USERS"), "{out}");
    assert!(
        !line("dev.vars").contains("REPO_SECRETS_ENCRYPTION_KEY"),
        "{out}"
    );
    assert!(
        line("run command").contains("REPO_SECRETS_ENCRYPTION_KEY"),
        "{out}"
    );
    assert!(line("environment").contains("ALLOWED_GITHUB_ORGS"), "{out}");
    // Names only: no value reaches the output.
    assert!(!out.contains(SECRET), "the secret was printed:\n{out}");
    assert!(!out.contains(ORG_FROM_ENV), "a value was printed:\n{out}");
}

/// Starts the run command on fresh ports with its output in `log_path`; whether it came up
/// (its health answered) before it ended or four minutes passed: a fresh state folder's
/// D1 migrations, which wrangler applies one at a time (1–4 s each while the whole test
/// command starts its slowest suites), come first.
async fn start_run_command(
    dir: &std::path::Path,
    vars: &std::path::Path,
    log_path: &std::path::Path,
) -> (std::process::Child, String, bool) {
    let port = free_port().unwrap();
    let log = std::fs::File::create(log_path).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(inspect_tests::root().join("scripts/dev.sh"))
        .env("INSPECT_PORT", port.to_string())
        .env("INSPECT_HOST_PORT", free_port().unwrap().to_string())
        .env("INSPECT_STATE_DIR", dir.join("state"))
        .env("INSPECT_DEV_VARS", vars)
        .env("INSPECT_WORKER_PREBUILT", "1")
        .env("INSPECT_SUPERVISOR_BIN", supervisor_bin().unwrap())
        .env("ALLOWED_GITHUB_ORGS", ORG_FROM_ENV)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0);
    apply_tool_env(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(240);
    // Up once it says so itself: a port taken meanwhile by another test's stack answers
    // `/health` too (without this run's settings).
    let running = format!("is running at {base} ");
    let up = loop {
        let says_so = std::fs::read_to_string(log_path).is_ok_and(|l| l.contains(&running));
        if says_so
            && reqwest::get(format!("{base}/health"))
                .await
                .is_ok_and(|r| r.status().is_success())
        {
            break true;
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    (child, base, up)
}
