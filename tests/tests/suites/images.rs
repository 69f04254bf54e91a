//! Prebuilt images through the whole stack: the cron trigger builds a repository's image on
//! its schedule (the real supervisor clones and runs `setup.sh` in build mode, the host
//! saves it, the report comes back once with its token), a build by hand replaces it (keep
//! N deletes the old one), and the next session starts from the newest image with setup
//! skipped and only newer commits synced. An environment's image holds every repository and
//! gets the environment's secrets. Failing, concurrent and stuck builds say why.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{get, send};
use inspect_tests::fakes::model::Reply;
use inspect_tests::repo::{commit_all, git, source_repo};
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

const SCOPE: &str = "/images?repository=local/demo";

fn scope() -> Value {
    json!({"kind": "repository", "owner": "local", "name": "demo"})
}

/// A setup hook that leaves a mark outside git and says so.
fn add_setup(repo: &Path, script: &str) {
    std::fs::create_dir_all(repo.join(".openinspect")).unwrap();
    std::fs::write(repo.join(".openinspect/setup.sh"), script).unwrap();
    std::fs::write(repo.join(".gitignore"), ".setup-mark\n").unwrap();
    commit_all(repo, "setup hook");
}

async fn cron(stack: &inspect_tests::Stack) {
    let r = reqwest::get(stack.url("/cdn-cgi/local/scheduled?cron=*%2F30+*+*+*+*"))
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
}

/// Waits until the newest build `query` lists is no longer building; returns the list.
async fn settled(stack: &inspect_tests::Stack, query: &str, logs: impl Fn() -> String) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let list = get(&stack.url(query)).await.unwrap();
        assert_eq!(list.status, 200, "{}", list.body);
        let newest = &list.body["builds"][0];
        if newest.is_object() && newest["status"] != "building" {
            return list.body;
        }
        assert!(
            Instant::now() < deadline,
            "the build never ended: {}\n{}",
            list.body,
            logs()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn a_scheduled_image_is_built_and_the_next_session_starts_from_it() {
    let AgentStack { model, host, stack } = AgentStack::start(
        vec![
            Reply::tool(
                "bash",
                json!({"command": "cat .setup-mark; ls; git log --format=%s", "description": "look"}),
            ),
            Reply::text("Looked."),
        ],
        vec![],
    )
    .await
    .unwrap();
    let source = source_repo();
    add_setup(
        source.path(),
        "echo \"setup ran in $(basename \"$PWD\")\" > .setup-mark\necho preparing dependencies\n",
    );
    inspect_tests::client::register_repo(&stack.base_url, "demo", source.path())
        .await
        .unwrap();

    // Bad schedules are refused; a good one is kept.
    for bad in [
        json!({"intervalMinutes": 5}),
        json!({"keep": 0}),
        json!({"every": 1}),
    ] {
        let r = send(
            Method::PUT,
            &stack.url("/images/schedule"),
            Some(json!({"scope": scope(), "schedule": bad})),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    let r = send(
        Method::PUT,
        &stack.url("/images/schedule"),
        Some(json!({"scope": scope(), "schedule": {"intervalMinutes": 60, "keep": 1}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["schedule"]["intervalMinutes"], 60);
    assert_eq!(r.body["builds"], json!([]));

    // The cron trigger finds the schedule due and builds.
    cron(&stack).await;
    let list = settled(&stack, SCOPE, || host.log()).await;
    let first = list["builds"][0].clone();
    assert_eq!(first["status"], "ready", "{list}\n{}", host.log());
    assert_eq!(first["trigger"], "schedule");
    assert!(first["imageId"].as_str().unwrap().starts_with("img_"));
    let head = git(source.path(), &["rev-parse", "HEAD"]);
    assert_eq!(first["repositories"][0]["commit"], head.as_str());
    assert_eq!(first["repositories"][0]["name"], "demo");
    assert!(first["output"]
        .as_str()
        .unwrap()
        .contains("preparing dependencies"));
    assert!(!first["runtimeVersion"].as_str().unwrap().is_empty());
    // Not due again within the hour.
    cron(&stack).await;
    let again = get(&stack.url(SCOPE)).await.unwrap();
    assert_eq!(again.body["builds"].as_array().unwrap().len(), 1);

    // A build by hand replaces it; with keep 1 the first image is deleted.
    let r = send(
        Method::POST,
        &stack.url("/images/builds"),
        Some(json!({"scope": scope()})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["status"], "building");
    assert_eq!(r.body["trigger"], "manual");
    let list = settled(&stack, SCOPE, || host.log()).await;
    let second = list["builds"][0].clone();
    assert_eq!(second["status"], "ready", "{list}");
    assert_eq!(list["builds"][1]["status"], "deleted", "{list}");
    let images = host.data_dir().join("sandboxes/images");
    let first_image = first["imageId"].as_str().unwrap();
    assert!(!images.join(format!("{first_image}.tar")).exists());
    let second_image = second["imageId"].as_str().unwrap().to_owned();
    assert!(images.join(format!("{second_image}.tar")).exists());

    // A commit after the image: the session syncs it without running setup again.
    std::fs::write(source.path().join("newer.txt"), "after the image\n").unwrap();
    commit_all(source.path(), "a commit after the image");
    let newest = git(source.path(), &["rev-parse", "HEAD"]);
    let session = inspect_tests::client::create_session(
        &stack.base_url,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo"}),
    )
    .await
    .unwrap();
    let r = send(
        Method::POST,
        &stack.url(&format!("/sessions/{session}/prompt")),
        Some(json!({"content": "look around"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let events = inspect_tests::client::events_until(
        &stack.base_url,
        &session,
        "boot_step,tool_call,execution_complete",
        "execution_complete",
        180,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", host.sandbox_logs()));
    let step = |name: &str| {
        events
            .iter()
            .rev()
            .find(|e| e["type"] == "boot_step" && e["step"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} step in {events:?}"))
    };
    let setup = step("setup");
    assert_eq!(setup["status"], "skipped", "{setup}");
    assert!(
        setup["detail"].as_str().unwrap().contains(&second_image),
        "{setup}"
    );
    let sync = step("git_sync:demo");
    let detail = sync["detail"].as_str().unwrap();
    assert!(detail.starts_with(&newest), "{detail}");
    assert!(
        detail.contains(&format!("synced from the prebuilt image's {head}")),
        "{detail}"
    );
    let output: String = events
        .iter()
        .filter(|e| e["type"] == "tool_call")
        .filter_map(|e| e["output"].as_str())
        .collect();
    assert!(output.contains("setup ran in demo"), "{output}");
    assert!(output.contains("newer.txt"), "{output}");
    assert!(output.contains("a commit after the image"), "{output}");
    let done = events
        .iter()
        .find(|e| e["type"] == "execution_complete")
        .unwrap();
    assert_eq!(done["success"], true, "{done}");

    // The image's files are gone from the host (a wiped disk): the next session says so
    // and starts fresh instead of failing.
    std::fs::remove_file(images.join(format!("{second_image}.tar"))).unwrap();
    std::fs::remove_file(images.join(format!("{second_image}.json"))).unwrap();
    model.push(vec![Reply::text("Fresh start.")]);
    let again = inspect_tests::client::create_session(
        &stack.base_url,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo"}),
    )
    .await
    .unwrap();
    send(
        Method::POST,
        &stack.url(&format!("/sessions/{again}/prompt")),
        Some(json!({"content": "again"})),
    )
    .await
    .unwrap();
    let events = inspect_tests::client::events_until(
        &stack.base_url,
        &again,
        "boot_step,warning,execution_complete",
        "execution_complete",
        180,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", host.sandbox_logs()));
    assert!(
        events.iter().any(|e| e["type"] == "warning"
            && e["message"]
                .as_str()
                .unwrap_or("")
                .contains("could not be used")),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "boot_step"
            && e["step"] == "setup"
            && e["status"] == "succeeded"),
        "setup ran: {events:?}"
    );

    // What a person sees in Settings.
    inspect_tests::browser::run_script(
        "images.mjs",
        &stack.base_url,
        &inspect_tests::browser::artifacts("images"),
        &[("HEAD_SHORT", head[..8].to_owned())],
    );
    drop(model);
}

#[tokio::test]
async fn failing_concurrent_and_stuck_builds_say_why() {
    let AgentStack { model, host, stack } = AgentStack::start(
        vec![],
        vec![("IMAGE_BUILD_TIMEOUT_SECONDS".into(), "5".into())],
    )
    .await
    .unwrap();
    let source = source_repo();
    add_setup(
        source.path(),
        "echo missing-dependency >&2\nsleep 1\nexit 3\n",
    );
    inspect_tests::client::register_repo(&stack.base_url, "demo", source.path())
        .await
        .unwrap();
    // Scopes that do not exist, and bodies that are not requests.
    let r = send(
        Method::POST,
        &stack.url("/images/builds"),
        Some(json!({"scope": {"kind": "repository", "owner": "local", "name": "nope"}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    let r = send(
        Method::POST,
        &stack.url("/images/builds"),
        Some(json!({"x": 1})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    let r = get(&stack.url("/images")).await.unwrap();
    assert_eq!(r.status, 400, "{}", r.body);

    // One build per scope at a time.
    let builds_url = stack.url("/images/builds");
    let build = |_: ()| send(Method::POST, &builds_url, Some(json!({"scope": scope()})));
    let r = build(()).await.unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.body["id"].as_str().unwrap().to_owned();
    let twice = build(()).await.unwrap();
    assert_eq!(twice.status, 409, "{}", twice.body);
    // A report without the build's token is refused while it builds.
    let forged = reqwest::Client::new()
        .post(stack.url(&format!("/images/builds/{id}/complete")))
        .bearer_auth("not-the-token")
        .json(&json!({"success": true, "imageId": "img_x", "runtimeVersion": "0", "durationMs": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);

    // The hook's failure is the build's, with its output.
    let list = settled(&stack, SCOPE, || host.log()).await;
    let failed = &list["builds"][0];
    assert_eq!(failed["status"], "failed", "{list}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("setup.sh exited"),
        "{failed}"
    );
    assert!(
        failed["output"]
            .as_str()
            .unwrap()
            .contains("missing-dependency"),
        "{failed}"
    );
    assert!(failed.get("imageId").is_none());
    // The report was taken once: nothing more is accepted for it.
    let late = reqwest::Client::new()
        .post(stack.url(&format!("/images/builds/{id}/complete")))
        .bearer_auth("not-the-token")
        .json(&json!({"success": true, "imageId": "img_x", "runtimeVersion": "0", "durationMs": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), 409);

    // An environment's image: every repository, the primary's setup, and the secrets an
    // environment session gets (global + the environment's, not its repositories').
    let other = source_repo();
    add_setup(
        other.path(),
        "echo \"E=${ENV_ONLY:-none} R=${REPO_ONLY:-none} G=${GLOBAL_ONE:-none}\"\nls ..\n",
    );
    inspect_tests::client::register_repo(&stack.base_url, "other", other.path())
        .await
        .unwrap();
    for (path, name, value) in [
        ("/secrets", "GLOBAL_ONE", "g1"),
        ("/repos/local/other/secrets", "REPO_ONLY", "r1"),
    ] {
        let r = send(
            Method::PUT,
            &stack.url(path),
            Some(json!({"secrets": {name: value}})),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = send(
        Method::POST,
        &stack.url("/environments"),
        Some(json!({"name": "pair", "repositories": [
            {"owner": "local", "name": "other"},
            {"owner": "local", "name": "demo"}
        ]})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let env_id = r.body["id"].as_str().unwrap().to_owned();
    let r = send(
        Method::PUT,
        &stack.url(&format!("/environments/{env_id}/secrets")),
        Some(json!({"secrets": {"ENV_ONLY": "e1"}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let r = send(
        Method::POST,
        &stack.url("/images/builds"),
        Some(json!({"scope": {"kind": "environment", "environmentId": env_id}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    let built = settled(&stack, &format!("/images?environmentId={env_id}"), || {
        host.log()
    })
    .await["builds"][0]
        .clone();
    assert_eq!(built["status"], "ready", "{built}");
    let names: Vec<&str> = built["repositories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["other", "demo"]);
    let output = built["output"].as_str().unwrap();
    assert!(output.contains("E=e1 R=none G=g1"), "{output}");
    assert!(
        output.contains("demo") && output.contains("other"),
        "{output}"
    );

    // A build whose provider goes away never reports: the cron trigger times it out.
    add_setup(source.path(), "sleep 60\n");
    let r = build(()).await.unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(host);
    tokio::time::sleep(Duration::from_secs(5)).await;
    cron(&stack).await;
    let list = get(&stack.url(SCOPE)).await.unwrap();
    let stuck = &list.body["builds"][0];
    assert_eq!(stuck["status"], "failed", "{}", list.body);
    assert!(
        stuck["error"]
            .as_str()
            .unwrap()
            .contains("ran past 5 s without reporting"),
        "{stuck}"
    );
    drop(model);
}
