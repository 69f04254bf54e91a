//! The `inspect` CLI, the real binary, against the local stack: `new --repo local/demo
//! --wait "…"` on a pseudo-terminal shows what is under way, the tool lines and the answer
//! (Markdown rendered) and exits 0; `attach` on a pseudo-terminal takes typed prompts, shows
//! who is there and the queue, and follows across a restart of the control plane with no
//! gap and no double; `ls`, `show`, `log` read the session; completions come from the
//! server; `diff` prints its change and `apply` leaves it in a clone's working tree
//! (refusing a dirty tree unless `--force`); `handoff` checks out the pushed branch;
//! `login` keeps the token with mode 0600; a revoked token exits 2 and says how to sign in
//! again; an unknown session exits 3 and a server that is not there 4. (`login` through
//! the browser is in `web.rs`.)

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::cli::{cli_bin, on_terminal, Terminal};
use inspect_tests::client::send;
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::{git, source_repo};
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Stdio;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `inspect ARGS` in `dir` with its own config file, against `url` (without holding
/// the test's runtime, where the fakes answer).
async fn inspect(dir: &Path, config: &Path, url: &str, args: &[&str], stdin: Option<&str>) -> Run {
    let mut cmd = tokio::process::Command::new(cli_bin());
    cmd.args(args)
        .current_dir(dir)
        .env("INSPECT_CONFIG", config)
        .env("INSPECT_URL", url)
        .env_remove("INSPECT_TOKEN")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        use tokio::io::AsyncWriteExt;
        let mut input = child.stdin.take().unwrap();
        input.write_all(text.as_bytes()).await.unwrap();
        drop(input);
    }
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(300),
        child.wait_with_output(),
    )
    .await
    .expect("inspect ran past 5 minutes")
    .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `inspect ARGS` until it exits 0 (what it reads may come a moment after the prompt
/// ends: the change's capture, the branch's push), within a minute.
async fn until_ok(dir: &Path, config: &Path, url: &str, args: &[&str]) -> Run {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let run = inspect(dir, config, url, args, None).await;
        if run.code == 0 {
            return run;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "inspect {args:?} never succeeded: {}",
            run.stderr
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn a_session_from_the_terminal_is_followed_read_and_applied() {
    let agent = AgentStack::start(
        vec![
            Reply::tool(
                "write",
                json!({"filePath": "notes.md", "content": "notes from the agent\n"}),
            ),
            Reply::text("Wrote the **notes**."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let demo = source_repo();
    agent.register_repo("demo", demo.path()).await.unwrap();
    let stack = &agent.stack;
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.json");
    let url = stack.base_url.as_str();
    let here = home.path();

    // On a terminal, as a person runs it: what is under way drawn as it goes, the lines,
    // the agent's Markdown rendered.
    let (dir, cfg, base) = (
        here.to_owned(),
        config.display().to_string(),
        url.to_owned(),
    );
    let started = tokio::task::spawn_blocking(move || {
        on_terminal(
            &[
                "new",
                "--repo",
                "local/demo",
                "--title",
                "Notes",
                "--wait",
                "write the notes",
            ],
            &dir,
            &[
                ("INSPECT_CONFIG", cfg.as_str()),
                ("INSPECT_URL", base.as_str()),
            ],
        )
    })
    .await
    .unwrap();
    let out = &started.text;
    assert_eq!(started.code, 0, "{out}\n{}", agent.host.sandbox_logs());
    assert!(out.contains("› local: write the notes"), "{out}");
    assert!(out.contains("· boot: "), "{out}");
    assert!(out.contains("✓ write notes.md"), "{out}");
    // Markdown: the bold is drawn bold, not as asterisks.
    assert!(out.contains("Wrote the notes."), "{out}");
    assert!(started.raw.contains("\u{1b}[1mnotes"), "{:?}", started.raw);
    assert!(out.trim_end().ends_with("✔ done"), "{out}");
    // The progress display: a spinner saying what is under way, cleared at the end.
    assert!(
        ["⠁", "⠂", "⠄", "⡀", "⢀", "⠠", "⠐", "⠈"]
            .iter()
            .any(|s| started.raw.contains(s)),
        "{:?}",
        started.raw
    );
    assert!(out.contains("/sessions/"), "{out}");
    let id = out
        .split("Session ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .unwrap()
        .trim()
        .to_owned();

    // Read back: listed (as JSON too), shown, its log.
    let ls = inspect(here, &config, url, &["ls", "--json"], None).await;
    assert_eq!(ls.code, 0, "{}", ls.stderr);
    let listed: Value = serde_json::from_str(&ls.stdout).unwrap();
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");
    let ls = inspect(here, &config, url, &["ls"], None).await;
    assert!(
        ls.stdout.contains(&id) && ls.stdout.contains("Notes"),
        "{}",
        ls.stdout
    );
    // Completions from the server, as fish asks for them (`value<TAB>help` a line): the
    // repository's name after `--repo`, the session (its title as help) after `attach`.
    let fish = |words: &'static [&'static str]| {
        let mut args = vec!["--", "inspect"];
        args.extend_from_slice(words);
        let mut cmd = tokio::process::Command::new(cli_bin());
        cmd.args(args)
            .env("COMPLETE", "fish")
            .env("INSPECT_CONFIG", &config)
            .env("INSPECT_URL", url)
            .env_remove("INSPECT_TOKEN");
        async move {
            let out = cmd.output().await.unwrap();
            assert!(out.status.success());
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    let repos = fish(&["new", "--repo", "local/d"]).await;
    assert!(
        repos.lines().any(|l| l.starts_with("local/demo")),
        "{repos}"
    );
    let sessions = fish(&["attach", ""]).await;
    assert!(
        sessions.lines().any(|l| l == format!("{id}\tNotes")),
        "{sessions}"
    );
    let show = inspect(here, &config, url, &["show", &id], None).await;
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("local/demo"), "{}", show.stdout);
    let log = inspect(here, &config, url, &["log", &id], None).await;
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(log.stdout.contains("✓ write notes.md"), "{}", log.stdout);
    assert!(log.stdout.contains("✔ done"), "{}", log.stdout);
    let log_json = inspect(here, &config, url, &["log", "--json", &id], None).await;
    let first: Value = serde_json::from_str(log_json.stdout.lines().next().unwrap()).unwrap();
    assert!(first["seq"].is_number(), "{first}");

    // Its change, as a diff and applied to a clone (once the sandbox reported it).
    let diff = until_ok(here, &config, url, &["diff", &id]).await;
    assert!(
        diff.stdout.contains("+notes from the agent"),
        "{}",
        diff.stdout
    );
    let clone = tempfile::tempdir().unwrap();
    git(
        clone.path(),
        &["clone", "-q", &demo.path().to_string_lossy(), "."],
    );
    std::fs::write(clone.path().join("mine.txt"), "mine\n").unwrap();
    let refused = inspect(clone.path(), &config, url, &["apply", &id], None).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("--force"), "{}", refused.stderr);
    std::fs::remove_file(clone.path().join("mine.txt")).unwrap();
    let applied = inspect(clone.path(), &config, url, &["apply", &id], None).await;
    assert_eq!(applied.code, 0, "{}", applied.stderr);
    assert_eq!(
        std::fs::read_to_string(clone.path().join("notes.md")).unwrap(),
        "notes from the agent\n"
    );

    // Handed off: its branch, fetched from where it was pushed, checked out.
    let other = tempfile::tempdir().unwrap();
    git(
        other.path(),
        &["clone", "-q", &demo.path().to_string_lossy(), "."],
    );
    let handed = until_ok(other.path(), &config, url, &["handoff", &id]).await;
    assert!(handed.stderr.contains("open-inspect/"), "{}", handed.stderr);
    assert_eq!(
        git(other.path(), &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        format!("open-inspect/{id}")
    );
    assert_eq!(
        std::fs::read_to_string(other.path().join("notes.md")).unwrap(),
        "notes from the agent\n"
    );
    let artifacts = inspect(here, &config, url, &["artifacts", &id, "--json"], None).await;
    assert_eq!(artifacts.code, 0, "{}", artifacts.stderr);
    assert!(serde_json::from_str::<Value>(&artifacts.stdout)
        .unwrap()
        .is_array());

    // Secrets: the value from stdin, never shown; listed by name; removed.
    let set = inspect(
        here,
        &config,
        url,
        &["secrets", "set", "DEPLOY_TOKEN", "--repo", "local/demo"],
        Some("s3cret-value\n"),
    )
    .await;
    assert_eq!(set.code, 0, "{}", set.stderr);
    assert!(!set.stdout.contains("s3cret") && !set.stderr.contains("s3cret"));
    let listed = inspect(
        here,
        &config,
        url,
        &["secrets", "ls", "--repo", "local/demo"],
        None,
    )
    .await;
    assert_eq!(listed.stdout.trim(), "DEPLOY_TOKEN", "{}", listed.stderr);
    let removed = inspect(
        here,
        &config,
        url,
        &["secrets", "rm", "DEPLOY_TOKEN", "--repo", "local/demo"],
        None,
    )
    .await;
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    let listed = inspect(
        here,
        &config,
        url,
        &["secrets", "ls", "--repo", "local/demo"],
        None,
    )
    .await;
    assert_eq!(listed.stdout.trim(), "", "{}", listed.stderr);
    let automations = inspect(here, &config, url, &["automations", "ls", "--json"], None).await;
    assert_eq!(automations.code, 0, "{}", automations.stderr);
    assert_eq!(automations.stdout.trim(), "[]");

    // An unknown session, a server that is not there.
    let unknown = inspect(here, &config, url, &["show", "0123456789abcdef"], None).await;
    assert_eq!(unknown.code, 3, "{}", unknown.stderr);
    let gone = inspect(here, &config, "http://127.0.0.1:9", &["ls"], None).await;
    assert_eq!(gone.code, 4, "{}", gone.stderr);
    assert!(
        gone.stderr.contains("could not be reached"),
        "{}",
        gone.stderr
    );
    // A wrong command line says so.
    let wrong = inspect(here, &config, url, &["new", "--nope"], None).await;
    assert_eq!(wrong.code, 64, "{}", wrong.stderr);
    let help = inspect(here, &config, url, &["--help"], None).await;
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Exit codes:"), "{}", help.stdout);
    let completions = inspect(here, &config, url, &["completions", "bash"], None).await;
    assert!(
        completions.stdout.contains("inspect"),
        "{}",
        completions.stdout
    );
}

#[tokio::test]
async fn a_kept_token_is_private_and_a_revoked_one_exits_2() {
    use std::os::unix::fs::PermissionsExt;
    let stack = inspect_tests::Stack::start().await.unwrap();
    let r = send(
        Method::POST,
        &stack.url("/tokens"),
        Some(json!({"name": "my terminal"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let token = r.body["token"].as_str().unwrap().to_owned();
    let token_id = r.body["id"].as_str().unwrap().to_owned();
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("inspect/config.json");
    let url = stack.base_url.as_str();
    let login = inspect(
        home.path(),
        &config,
        url,
        &["login", url, "--token-stdin"],
        Some(&format!("{token}\n")),
    )
    .await;
    assert_eq!(login.code, 0, "{}", login.stderr);
    assert!(login.stderr.contains("Signed in"), "{}", login.stderr);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(kept["token"], token.as_str());
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the token's file is the person's alone");
    let ls = inspect(home.path(), &config, url, &["ls"], None).await;
    assert_eq!(ls.code, 0, "{}", ls.stderr);

    // Revoked: exit 2, and the way back.
    let r = send(
        Method::DELETE,
        &stack.url(&format!("/tokens/{token_id}")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let refused = inspect(home.path(), &config, url, &["ls"], None).await;
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("inspect login"),
        "{}",
        refused.stderr
    );
    // A wrong token is not kept.
    let bad = inspect(
        home.path(),
        &config,
        url,
        &["login", url, "--token-stdin"],
        Some("oit_not-a-token\n"),
    )
    .await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(kept["token"], token.as_str(), "the file is untouched");
}

#[tokio::test]
async fn attach_follows_across_a_restart_with_no_gap_and_no_double() {
    let mut agent = AgentStack::start(
        vec![
            Reply::tool(
                "bash",
                json!({"command": "sleep 6 && echo slept", "description": "take a while"}),
            ),
            Reply::text("Slept well."),
            Reply::text("Second answer."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let demo = source_repo();
    agent.register_repo("demo", demo.path()).await.unwrap();
    let r = send(
        Method::POST,
        &agent.stack.url("/sessions"),
        Some(json!({"repoOwner": "local", "repoName": "demo"})),
    )
    .await
    .unwrap();
    let id = r.body["sessionId"].as_str().unwrap().to_owned();
    let home = tempfile::tempdir().unwrap();
    // On a pseudo-terminal, as a person attaches.
    let config = home.path().join("config.json").display().to_string();
    let mut term = Terminal::start(
        &["attach", &id],
        home.path(),
        &[
            ("INSPECT_CONFIG", config.as_str()),
            ("INSPECT_URL", agent.stack.base_url.as_str()),
        ],
    );
    // A typed line is a prompt.
    term.type_line("take your time");
    wait_for(&term, "› local: take your time", 1).await;
    // Who is there (the CLI itself), and a second prompt waiting its turn.
    wait_for(&term, "◦ here: local", 1).await;
    term.type_line("and again");
    wait_for(&term, "◦ queued: and again (local)", 1).await;
    // The control plane restarts while the tool runs; the CLI reconnects and catches up.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    agent.stack.restart().await.unwrap();
    wait_for(&term, "✔ done", 1).await;
    wait_for(&term, "Second answer.", 1).await;
    wait_for(&term, "✔ done", 2).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let all = term.text();
    let count = |what: &str| all.matches(what).count();
    assert_eq!(count("› local: take your time"), 1, "{all}");
    assert_eq!(count("✓ bash"), 1, "{all}");
    assert_eq!(count("Slept well."), 1, "{all}");
    assert_eq!(count("› local: and again"), 1, "{all}");
    assert_eq!(count("✔ done"), 2, "{all}");
    // Ctrl-C detaches (exit 0): the session goes on.
    term.interrupt();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while term.exited().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "Ctrl-C did not end attach: {all}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let state = send(
        Method::GET,
        &agent.stack.url(&format!("/sessions/{id}")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(state.body["status"], "active", "{}", state.body);
}

/// Until the terminal shows `what` at least `n` times (two minutes at most).
async fn wait_for(term: &Terminal, what: &str, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let text = term.text();
        if text.matches(what).count() >= n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never saw {what} ×{n}: {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A deployed control plane is reached over HTTPS: the CLI's requests and its live follow,
/// and the sandbox's supervisor (its socket and its calls), trusting the control plane's
/// certificate through `SSL_CERT_FILE` as a private authority's would be.
#[tokio::test]
async fn the_cli_and_the_sandbox_reach_a_control_plane_over_https() {
    let ca = inspect_tests::tls::TestCa::new().unwrap();
    ca.trust();
    let mut parts = AgentStack::prepare(vec![
        Reply::tool(
            "write",
            json!({"filePath": "tls.md", "content": "over TLS\n"}),
        ),
        Reply::text("Wrote it over TLS."),
    ])
    .await
    .unwrap();
    parts.options.tls = Some((ca.cert.clone(), ca.key.clone()));
    let agent = AgentStack::launch(parts).await.unwrap();
    assert!(agent.stack.base_url.starts_with("https://"));
    let demo = source_repo();
    agent.register_repo("demo", demo.path()).await.unwrap();
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.json");
    let url = agent.stack.base_url.as_str();
    let run = match tokio::time::timeout(
        std::time::Duration::from_secs(180),
        inspect(
            home.path(),
            &config,
            url,
            &["new", "--repo", "local/demo", "--wait", "write over TLS"],
            None,
        ),
    )
    .await
    {
        Ok(run) => run,
        Err(_) => panic!("no answer in 3 minutes\n{}", agent.host.sandbox_logs()),
    };
    assert_eq!(
        run.code,
        0,
        "{}\n{}\n{}",
        run.stdout,
        run.stderr,
        agent.host.sandbox_logs()
    );
    assert!(
        run.stdout.contains("Wrote it over TLS."),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    // The sandbox's supervisor was given the HTTPS origin and connected over it.
    let logs = agent.host.sandbox_logs();
    assert!(logs.contains("connected to the session"), "{logs}");
    assert!(!logs.contains("ws://127.0.0.1"), "{logs}");
}
