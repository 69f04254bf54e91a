//! A prompt runs in a sandbox, end to end: `wrangler dev`, the local sandbox host, the
//! real supervisor, real git and the real OpenCode binary. The model is the only fake.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{create_session, send, send_as, WsClient};
use inspect_tests::fakes::model::{FakeModel, Reply};
use inspect_tests::host::{sandbox_groups_of, SandboxHost};
use inspect_tests::repo::{commit_all, git, source_repo};
use inspect_tests::Stack;
use reqwest::Method;
use serde_json::{json, Value};

/// A session on the world's `local/demo` repository, joined by `ann`.
async fn demo_session(w: &World) -> (String, WsClient) {
    let base = &w.stack.base_url;
    let id = create_session(
        base,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo"}),
    )
    .await
    .unwrap();
    let (ws, _) = WsClient::join(base, &w.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    (id, ws)
}

struct World {
    model: FakeModel,
    host: SandboxHost,
    stack: Stack,
    repo: tempfile::TempDir,
}

async fn world(script: Vec<Reply>) -> World {
    world_with(script, vec![]).await
}

async fn world_with(script: Vec<Reply>, vars: Vec<(&str, &str)>) -> World {
    let vars = vars
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let agent = AgentStack::start(script, vars).await.unwrap();
    let repo = source_repo();
    agent.register_repo("demo", repo.path()).await.unwrap();
    let AgentStack { model, host, stack } = agent;
    World {
        model,
        host,
        stack,
        repo,
    }
}

/// Reads the socket until `n` prompts completed; returns every message in order.
async fn until_complete(ws: &mut WsClient, n: usize, w: &World) -> Vec<Value> {
    let mut seen = vec![];
    let mut done = 0;
    while done < n {
        let m = match ws.recv_within(120).await {
            Ok(m) => m,
            Err(e) => panic!(
                "{e}\nseen: {:#?}\n{}",
                seen.iter()
                    .map(|m: &Value| m["type"].as_str().unwrap_or("").to_owned()
                        + " "
                        + m["event"]["type"].as_str().unwrap_or(""))
                    .collect::<Vec<_>>(),
                w.host.sandbox_logs()
            ),
        };
        if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
            done += 1;
        }
        if m["type"] == "sandbox_error" {
            panic!("sandbox error: {m}\n{}", w.host.sandbox_logs());
        }
        seen.push(m);
    }
    seen
}

/// Reads the socket until a tool call is running.
async fn until_tool_runs(ws: &mut WsClient, w: &World) {
    loop {
        let m = ws
            .recv_within(120)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", w.host.sandbox_logs()));
        if m["type"] == "sandbox_event"
            && m["event"]["type"] == "tool_call"
            && m["event"]["status"] == "running"
        {
            return;
        }
    }
}

fn events<'a>(seen: &'a [Value], kind: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|m| m["type"] == "sandbox_event" && m["event"]["type"] == kind)
        .map(|m| &m["event"])
        .collect()
}

fn position(seen: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    seen.iter().position(pred).unwrap_or(usize::MAX)
}

#[tokio::test]
async fn a_prompt_runs_in_a_sandbox_and_commits_on_the_session_branch() {
    let w = world(vec![
        Reply::tool(
            "write",
            json!({"filePath": "hello.txt", "content": "hello from the agent\n"}),
        ),
        Reply::tool(
            "bash",
            json!({"command": "cat hello.txt && echo ran-bash", "description": "show the file"}),
        ),
        Reply::text("All done here."),
        Reply::text("Second prompt done."),
    ])
    .await;
    let (id, mut ws) = demo_session(&w).await;
    ws.send(json!({"type": "prompt", "content": "Write hello.txt and show it", "clientRequestId": "p1"})).await.unwrap();
    ws.send(json!({"type": "prompt", "content": "Say you are done", "clientRequestId": "p2"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 2, &w).await;

    // The order a client sees: spawning, boot steps, ready, the work, completion.
    let spawning = position(&seen, |m| m["type"] == "sandbox_spawning");
    let git_sync = position(&seen, |m| {
        m["event"]["type"] == "boot_step"
            && m["event"]["step"] == "git_sync:demo"
            && m["event"]["status"] == "succeeded"
    });
    let agent = position(&seen, |m| {
        m["event"]["type"] == "boot_step"
            && m["event"]["step"] == "agent"
            && m["event"]["status"] == "succeeded"
    });
    let ready = position(&seen, |m| m["type"] == "sandbox_ready");
    let write = position(&seen, |m| {
        m["event"]["type"] == "tool_call"
            && m["event"]["tool"] == "write"
            && m["event"]["status"] == "completed"
    });
    let bash = position(&seen, |m| {
        m["event"]["type"] == "tool_call"
            && m["event"]["tool"] == "bash"
            && m["event"]["status"] == "completed"
    });
    let first_done = position(&seen, |m| m["event"]["type"] == "execution_complete");
    let order = [spawning, git_sync, agent, ready, write, bash, first_done];
    assert!(
        order.windows(2).all(|p| p[0] < p[1]),
        "order {order:?}\n{:#?}",
        seen.iter()
            .map(|m| m.to_string().chars().take(160).collect::<String>())
            .collect::<Vec<_>>()
    );

    // The lifecycle, as clients show it.
    let statuses: Vec<&str> = seen
        .iter()
        .filter(|m| m["type"] == "sandbox_status")
        .map(|m| m["status"].as_str().unwrap())
        .collect();
    let mut want = ["spawning", "connecting", "syncing", "ready", "running"]
        .into_iter()
        .peekable();
    for s in &statuses {
        if want.peek() == Some(s) {
            want.next();
        }
    }
    assert!(want.peek().is_none(), "statuses {statuses:?}");
    let bash_call = &seen[bash]["event"];
    assert!(
        bash_call["output"].as_str().unwrap().contains("ran-bash"),
        "{bash_call}"
    );
    let tokens = events(&seen, "token");
    assert!(
        tokens.iter().any(|t| t["content"] == "All done here."),
        "{tokens:?}"
    );
    let completes = events(&seen, "execution_complete");
    assert_eq!(completes.len(), 2);
    assert!(
        completes.iter().all(|c| c["success"] == true),
        "{completes:?}"
    );
    assert_ne!(completes[0]["messageId"], completes[1]["messageId"]);
    assert!(events(&seen, "step_finish")
        .iter()
        .all(|s| s["tokens"].is_object()));
    // OpenCode installed nothing into its config folder (no registry, no 95 MB a start).
    for sandbox in std::fs::read_dir(w.host.data_dir().join("sandboxes"))
        .unwrap()
        .flatten()
    {
        let modules = sandbox.path().join("agent/config/opencode/node_modules");
        let installed: Vec<_> = std::fs::read_dir(&modules)
            .unwrap_or_else(|e| panic!("{}: {e}", modules.display()))
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(installed.is_empty(), "{installed:?}");
    }

    // The work is on the session branch of the source repository, with the right author.
    let branch = format!("open-inspect/{id}");
    let log = git(w.repo.path(), &["log", "--format=%an|%ae|%cn|%s", &branch]);
    let first = log.lines().next().unwrap();
    assert!(
        first.starts_with("ann|") && first.contains("|open-inspect[bot]|Write hello.txt"),
        "{log}"
    );
    let file = git(w.repo.path(), &["show", &format!("{branch}:hello.txt")]);
    assert_eq!(file, "hello from the agent");
    assert_eq!(
        git(w.repo.path(), &["rev-parse", "--abbrev-ref", "HEAD"]),
        "main",
        "the user's checkout is untouched"
    );
    // Both prompts reached the model, in order.
    let reqs = w.model.requests();
    let texts: Vec<String> = reqs.iter().map(|r| r["messages"].to_string()).collect();
    let p1 = texts
        .iter()
        .position(|t| t.contains("Write hello.txt"))
        .unwrap();
    let p2 = texts
        .iter()
        .position(|t| t.contains("Say you are done"))
        .unwrap();
    assert!(p1 < p2);
    assert_eq!(w.model.remaining(), 0);
}

#[tokio::test]
async fn stop_aborts_a_running_tool_and_the_next_prompt_still_runs() {
    let w = world(vec![Reply::tool(
        "bash",
        json!({"command": "sleep 60", "description": "wait"}),
    )])
    .await;
    let (_, mut ws) = demo_session(&w).await;
    ws.send(json!({"type": "prompt", "content": "Wait a minute"}))
        .await
        .unwrap();
    until_tool_runs(&mut ws, &w).await;
    let t = std::time::Instant::now();
    ws.send(json!({"type": "stop"})).await.unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    assert!(
        t.elapsed().as_secs() < 30,
        "the stop took {:?}",
        t.elapsed()
    );
    let done = events(&seen, "execution_complete");
    assert_eq!(done[0]["success"], false);

    w.model.push(vec![Reply::text("Back to work.")]);
    ws.send(json!({"type": "prompt", "content": "Carry on"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    let done = events(&seen, "execution_complete");
    assert_eq!(done[0]["success"], true, "{seen:?}");
}

#[tokio::test]
async fn a_repository_that_fails_to_clone_is_reported_and_prompts_still_queue() {
    let w = world(vec![]).await;
    let base = w.stack.base_url.clone();
    // A repository that was fine when registered and is gone by the time a sandbox
    // clones it.
    let doomed = source_repo();
    let r = send(
        Method::POST,
        &w.stack.url("/repos"),
        Some(json!({"name": "broken", "path": doomed.path().to_string_lossy()})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    std::fs::remove_dir_all(doomed.path()).unwrap();
    let id = create_session(
        &base,
        "ann",
        json!({"repoOwner": "local", "repoName": "broken"}),
    )
    .await
    .unwrap();
    let (mut ws, _) = WsClient::join(&base, &w.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "anything"}))
        .await
        .unwrap();
    let err = ws
        .recv_type("sandbox_error")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.host.sandbox_logs()));
    assert!(err["error"].as_str().unwrap().contains("broken"), "{err}");
    // The session still takes prompts; they wait for the next sandbox.
    ws.send(json!({"type": "prompt", "content": "and another", "clientRequestId": "after"}))
        .await
        .unwrap();
    loop {
        let q = ws.recv_type("prompt_queued").await.unwrap();
        if q["clientRequestId"] == "after" {
            break;
        }
    }
    let s = inspect_tests::client::get(&w.stack.url(&format!("/sessions/{id}")))
        .await
        .unwrap();
    assert_eq!(s.body["sandboxStatus"], "failed");
}

#[tokio::test]
async fn sandboxes_need_their_own_token_and_session() {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let stack = Stack::start().await.unwrap();
    let id = create_session(&stack.base_url, "ann", json!({}))
        .await
        .unwrap();
    let attempt = |session: String, token: &'static str, sandbox: &'static str| {
        let url = stack.ws_url(&format!("/sessions/{session}/ws?type=sandbox"));
        async move {
            let mut req = url.into_client_request().unwrap();
            req.headers_mut()
                .insert("Authorization", format!("Bearer {token}").parse().unwrap());
            req.headers_mut()
                .insert("X-Sandbox-ID", sandbox.parse().unwrap());
            match tokio_tungstenite::connect_async(req).await {
                Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => resp.status().as_u16(),
                Ok(_) => 101,
                Err(e) => panic!("{e}"),
            }
        }
    };
    assert_eq!(attempt(id.clone(), "guess", "sb_x").await, 401);
    assert_eq!(
        attempt("0123456789abcdef0123456789abcdef".into(), "guess", "sb_x").await,
        404
    );
}

#[tokio::test]
async fn tunnel_ports_reach_the_sandbox_and_the_clients() {
    let w = world(vec![Reply::text("Serving.")]).await;
    let port = inspect_tests::stack::free_port().unwrap();
    // The repository's start hook runs a web server on the session's port.
    let hooks = w.repo.path().join(".openinspect");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(
        hooks.join("start.sh"),
        format!("cd \"$(dirname \"$0\")/..\"\nnohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &\necho \"serving on {port}\"\ngrep TUNNEL_{port} ../.tunnels.env\n"),
    )
    .unwrap();
    commit_all(w.repo.path(), "start hook");
    let base = w.stack.base_url.clone();
    let id = create_session(
        &base,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo", "sandbox": {"tunnelPorts": [port]}}),
    )
    .await
    .unwrap();
    let (mut ws, _) = WsClient::join(&base, &w.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "serve"}))
        .await
        .unwrap();
    let urls = ws
        .recv_type("tunnel_urls")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.host.sandbox_logs()));
    let url = urls["tunnelUrls"][port.to_string()]
        .as_str()
        .unwrap()
        .to_owned();
    let seen = until_complete(&mut ws, 1, &w).await;
    // The start hook saw its URL in .tunnels.env, and its output reached the clients.
    let start = seen
        .iter()
        .find(|m| {
            m["event"]["type"] == "boot_step"
                && m["event"]["step"] == "start"
                && m["event"]["status"] != "started"
        })
        .unwrap();
    assert_eq!(start["event"]["status"], "succeeded", "{start}");
    let output = start["event"]["output"].as_str().unwrap();
    assert!(
        output.contains(&format!("serving on {port}")) && output.contains(&url),
        "{output}"
    );
    // The port is for the session's people: without a link from the control plane, 401.
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let bare = plain.get(&url).send().await.unwrap();
    assert_eq!(bare.status(), 401);
    let forged = plain
        .get(format!(
            "{url}/?inspect_port_token=9999999999.{}",
            "ab".repeat(32)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let no_such = send_as(
        "ann",
        Method::POST,
        &w.stack.url(&format!("/sessions/{id}/ports/1/link")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(no_such.status, 404, "{}", no_such.body);
    // A person's link: swapped for a cookie, then through the tunnel to the server.
    let link = send_as(
        "ann",
        Method::POST,
        &w.stack.url(&format!("/sessions/{id}/ports/{port}/link")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(link.status, 200, "{}", link.body);
    assert_eq!(link.body["gated"], true);
    let swapped = plain
        .get(link.body["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(swapped.status(), 302);
    let cookie = inspect_tests::client::gate_cookie(&swapped);
    assert_eq!(swapped.headers()["location"], "/");
    let mut body = String::new();
    for _ in 0..50 {
        if let Ok(r) = plain.get(&url).header("Cookie", &cookie).send().await {
            body = r.text().await.unwrap_or_default();
            if body.contains("README.md") {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(body.contains("README.md"), "{body}");
    // The link's token is not a cookie.
    let token = link.body["url"]
        .as_str()
        .unwrap()
        .split('=')
        .nth(1)
        .unwrap();
    let name = cookie.split('=').next().unwrap();
    let misused = plain
        .get(&url)
        .header("Cookie", format!("{name}={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(misused.status(), 401);
    let r = inspect_tests::client::get(&w.stack.url(&format!("/sessions/{id}/tunnel-urls")))
        .await
        .unwrap();
    assert_eq!(r.body["tunnelUrls"][port.to_string()], url.as_str());
}

/// The process groups of the sandboxes serving `session`: the group of each
/// `inspect-supervisor run` process (under bubblewrap, bwrap leads it).

#[tokio::test]
async fn a_confined_sandbox_cannot_write_outside_its_directory() {
    let confined = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("bwrap").is_file());
    let outside = tempfile::Builder::new()
        .prefix("inspect-outside-")
        .tempdir()
        .unwrap();
    let target = outside.path().join("escaped.txt");
    let w = world(vec![
        Reply::tool("bash", json!({"command": format!("touch {} && echo WROTE || echo REFUSED", target.display()), "description": "try"})),
        Reply::text("Tried."),
    ])
    .await;
    let (_, mut ws) = demo_session(&w).await;
    ws.send(json!({"type": "prompt", "content": "try to escape"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    let call = events(&seen, "tool_call")
        .into_iter()
        .find(|c| c["status"] == "completed")
        .unwrap()
        .clone();
    let output = call["output"].as_str().unwrap_or_default();
    if confined {
        assert!(output.contains("REFUSED") && !target.exists(), "{call}");
    } else {
        eprintln!("bubblewrap is not installed: the local provider runs sandboxes unconfined");
        assert!(output.contains("WROTE") && target.exists(), "{call}");
    }
}

#[tokio::test]
async fn typing_warms_a_sandbox_before_the_prompt() {
    let w = world(vec![Reply::text("Warm already.")]).await;
    let (_, mut ws) = demo_session(&w).await;
    ws.send(json!({"type": "typing"})).await.unwrap();
    ws.recv_type("sandbox_warming").await.unwrap();
    ws.recv_within(60).await.unwrap();
    let ready = ws
        .recv_type("sandbox_ready")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.host.sandbox_logs()));
    assert!(ready["sandboxId"].as_str().unwrap().starts_with("sb_"));
    // The prompt then runs at once on the warm sandbox, with no new spawn.
    ws.clear();
    ws.send(json!({"type": "prompt", "content": "now"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    assert!(
        !seen.iter().any(|m| m["type"] == "sandbox_spawning"),
        "no second spawn"
    );
    assert_eq!(events(&seen, "execution_complete")[0]["success"], true);
}

#[tokio::test]
async fn a_lost_sandbox_comes_back_from_its_snapshot_with_uncommitted_files() {
    let w = world(vec![
        Reply::tool(
            "write",
            json!({"filePath": "scratch.txt", "content": "keep me\n"}),
        ),
        Reply::text("Wrote a scratch file."),
    ])
    .await;
    // scratch.txt is ignored by git: only a snapshot can carry it to the next sandbox.
    std::fs::write(w.repo.path().join(".gitignore"), "scratch.txt\n").unwrap();
    commit_all(w.repo.path(), "ignore scratch");
    let (id, mut ws) = demo_session(&w).await;
    ws.send(json!({"type": "prompt", "content": "write scratch"}))
        .await
        .unwrap();
    until_complete(&mut ws, 1, &w).await;
    let saved = ws
        .recv_type("snapshot_saved")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.host.log()));
    let snapshot_id = saved["snapshotId"].as_str().unwrap().to_owned();

    // The sandbox dies; the session notices.
    let groups = sandbox_groups_of(&id);
    assert_eq!(groups.len(), 1, "{groups:?}");
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(groups[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    loop {
        let m = ws.recv_within(60).await.unwrap();
        if m["type"] == "sandbox_status" && m["status"] == "stale" {
            break;
        }
    }
    ws.recv_type("sandbox_error").await.unwrap();

    // The next prompt runs in a sandbox restored from the snapshot.
    w.model.push(vec![
        Reply::tool(
            "bash",
            json!({"command": "cat scratch.txt", "description": "read it"}),
        ),
        Reply::text("Still there."),
    ]);
    ws.send(json!({"type": "prompt", "content": "read scratch"}))
        .await
        .unwrap();
    let restored = ws
        .recv_type("sandbox_restored")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.host.log()));
    // Restored from a snapshot of this session: the one after the prompt, or the one taken
    // of the dead sandbox's files when it was given up on.
    assert!(restored["snapshotId"]
        .as_str()
        .unwrap()
        .starts_with("snap_"));
    let _ = &snapshot_id;
    let seen = until_complete(&mut ws, 1, &w).await;
    let call = events(&seen, "tool_call")
        .into_iter()
        .find(|c| c["status"] == "completed")
        .unwrap()
        .clone();
    assert!(
        call["output"].as_str().unwrap().contains("keep me"),
        "{call}"
    );
    // Setup is not run again on a restore.
    let setup = seen
        .iter()
        .find(|m| {
            m["event"]["type"] == "boot_step"
                && m["event"]["step"] == "setup"
                && m["event"]["status"] != "started"
        })
        .unwrap();
    assert_eq!(setup["event"]["status"], "skipped");
}

#[tokio::test]
async fn a_sandbox_socket_outlives_an_idle_object() {
    let w = world(vec![Reply::text("Awake.")]).await;
    let (_, mut ws) = demo_session(&w).await;
    ws.send(json!({"type": "typing"})).await.unwrap();
    ws.recv_type("sandbox_ready")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.host.sandbox_logs()));
    // Long enough for the runtime to evict the idle object; both sockets hibernate.
    tokio::time::sleep(std::time::Duration::from_secs(15)).await;
    ws.clear();
    ws.send(json!({"type": "prompt", "content": "still there?"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    assert!(
        !seen.iter().any(|m| m["type"] == "sandbox_spawning"),
        "the same sandbox took it"
    );
    assert_eq!(events(&seen, "execution_complete")[0]["success"], true);
}

#[tokio::test]
async fn a_sandbox_socket_that_keeps_dropping_loses_and_doubles_nothing() {
    let mut script: Vec<Reply> = (0..6)
        .map(|i| {
            Reply::tool(
                "bash",
                json!({"command": format!("echo burst-{i}"), "description": "burst"}),
            )
        })
        .collect();
    script.push(Reply::text("All six ran through a flaky link."));
    let w = world(script).await;
    // The session is created through a proxy that cuts every connection every 700 ms; its
    // sandbox connects back the same way. The client talks to the Worker directly.
    let proxy = inspect_tests::flaky::FlakyProxy::start(
        w.stack.port,
        std::time::Duration::from_millis(700),
    )
    .await
    .unwrap();
    let id = inspect_tests::client::create_session(
        &proxy.url,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo"}),
    )
    .await
    .unwrap();
    let base = w.stack.base_url.clone();
    let (mut ws, _) = WsClient::join(&base, &w.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "burst"}))
        .await
        .unwrap();
    until_complete(&mut ws, 1, &w).await;
    assert!(proxy.cuts() >= 3, "the link was cut {} times", proxy.cuts());

    let events =
        inspect_tests::client::get(&w.stack.url(&format!("/sessions/{id}/events?limit=500")))
            .await
            .unwrap();
    let list = events.body["events"].as_array().unwrap();
    let tools: Vec<&Value> = list.iter().filter(|e| e["type"] == "tool_call").collect();
    assert_eq!(tools.len(), 6, "one event per tool call: {tools:#?}");
    for i in 0..6 {
        let t = tools
            .iter()
            .find(|t| {
                t["output"]
                    .as_str()
                    .is_some_and(|o| o.contains(&format!("burst-{i}")))
            })
            .unwrap_or_else(|| panic!("burst-{i} missing: {tools:#?}"));
        assert_eq!(t["status"], "completed");
    }
    assert_eq!(
        list.iter()
            .filter(|e| e["type"] == "execution_complete")
            .count(),
        1
    );
    assert_eq!(
        list.iter().filter(|e| e["type"] == "user_message").count(),
        1
    );
    let text: Vec<&Value> = list.iter().filter(|e| e["type"] == "token").collect();
    assert!(
        text.iter()
            .any(|t| t["content"] == "All six ran through a flaky link."),
        "{text:#?}"
    );
    let seqs: Vec<i64> = list.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|p| p[0] < p[1]));
    let done = list
        .iter()
        .find(|e| e["type"] == "execution_complete")
        .unwrap();
    assert_eq!(done["success"], true, "{done}");
}

/// The supervisor ends at once and cleanly on SIGTERM (as a container's PID 1 it gets no
/// default action for it: a Pod's deletion waited out its grace period, its volume still
/// attached). Here it is waiting for the sandbox's lock, which another process holds.
/// Before, the signal killed it.
#[tokio::test]
async fn the_supervisor_ends_cleanly_on_sigterm() {
    let root = tempfile::tempdir().unwrap();
    let lock = std::fs::File::create(root.path().join(".supervisor.lock")).unwrap();
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive).unwrap();
    let child = tokio::process::Command::new(inspect_tests::host::supervisor_bin().unwrap())
        .arg("run")
        .env("INSPECT_SANDBOX_ROOT", root.path())
        .env("INSPECT_LOG_FORMAT", "text")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("it ends at once")
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{:?}: {said}", out.status);
    assert!(said.contains("terminated: shutting down"), "{said}");
}

/// The reasoning effort a person picks for a prompt reaches the model: OpenCode sends it as
/// `reasoning_effort` (the model's variant of that name); a prompt without one sends none.
#[tokio::test]
async fn the_reasoning_effort_picked_reaches_the_model() {
    let w = world(vec![
        Reply::text("Thought hard."),
        Reply::text("Thought less."),
    ])
    .await;
    let (_, mut ws) = demo_session(&w).await;
    ws.send(json!({"type": "prompt", "content": "think hard", "reasoningEffort": "high"}))
        .await
        .unwrap();
    until_complete(&mut ws, 1, &w).await;
    ws.send(json!({"type": "prompt", "content": "think less"}))
        .await
        .unwrap();
    until_complete(&mut ws, 1, &w).await;
    let asked: Vec<Value> = w
        .model
        .requests()
        .into_iter()
        .filter(|r| r.to_string().contains("think "))
        .collect();
    let hard = asked
        .iter()
        .find(|r| r.to_string().contains("think hard") && !r.to_string().contains("think less"))
        .unwrap();
    assert_eq!(hard["reasoning_effort"], "high", "{}", hard);
    let less = asked
        .iter()
        .find(|r| r.to_string().contains("think less"))
        .unwrap();
    assert!(less.get("reasoning_effort").is_none(), "{less}");
}

/// The catalog is honoured: `GET /models` lists what the deployment offers (an opt-in
/// provider once its key is a secret); Settings › Models chooses what is enabled and the
/// default; a disabled model or an effort the model does not accept is a 400 (or a socket
/// error) naming the choices, never a failed turn; a prompt's model and effort reach the
/// model server, which sees both.
#[tokio::test]
async fn the_model_catalog_is_honoured_and_a_prompts_choice_reaches_the_model() {
    let w = world(vec![
        Reply::text("As the second model."),
        Reply::text("Default."),
    ])
    .await;
    let url = |p: &str| w.stack.url(p);
    let catalog = send(Method::GET, &url("/models"), None).await.unwrap();
    assert_eq!(catalog.status, 200, "{}", catalog.body);
    let ids = |c: &Value| -> Vec<(String, bool)> {
        c["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["id"].as_str().unwrap().to_owned(), m["enabled"] == true))
            .collect()
    };
    let listed = ids(&catalog.body);
    assert!(
        listed.contains(&("inspect/fake-model-2".into(), true)),
        "{listed:?}"
    );
    // No vendor key and no grant: no vendor's model is offered, and naming one says why.
    assert!(
        listed.iter().all(|(m, _)| m.starts_with("inspect/")),
        "{listed:?}"
    );
    let base = &w.stack.base_url;
    // A session naming an Anthropic model is refused with the words `says`; then, for the
    // second round, a key is stored for another repository: the vendor is offered, but
    // not to this session.
    for (key_elsewhere, says) in [
        (false, "ANTHROPIC_API_KEY"),
        (true, "cannot reach Anthropic"),
    ] {
        if key_elsewhere {
            let r = send(
                Method::PUT,
                &url("/repos/local/elsewhere/secrets"),
                Some(json!({"secrets": {"ANTHROPIC_API_KEY": "sk-ant-elsewhere"}})),
            )
            .await
            .unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
        }
        let r = send_as(
            "ann",
            Method::POST,
            &format!("{base}/sessions"),
            Some(json!({"repoOwner": "local", "repoName": "demo", "model": "anthropic/claude-sonnet-4-5"})),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body.to_string().contains(says), "{}", r.body);
    }
    // As a global secret it reaches every session.
    let r = send(
        Method::PUT,
        &url("/secrets"),
        Some(json!({"secrets": {"ANTHROPIC_API_KEY": "sk-ant-test"}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let catalog = send(Method::GET, &url("/models"), None).await.unwrap();
    let listed = ids(&catalog.body);
    assert!(listed.contains(&("anthropic/claude-sonnet-4-5".into(), true)));
    assert!(!listed.iter().any(|(m, _)| m.starts_with("openai/")));
    assert!(!listed.iter().any(|(m, _)| m.starts_with("xai/")), "opt-in");
    let sonnet = catalog.body["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "anthropic/claude-sonnet-4-5")
        .unwrap();
    assert_eq!(sonnet["efforts"], json!(["high", "max"]));
    assert_eq!(sonnet["context"], 200_000);
    // An opt-in provider's models appear once its key is a global secret, not enabled.
    let r = send(
        Method::PUT,
        &url("/secrets"),
        Some(json!({"secrets": {"XAI_API_KEY": "xai-test-key"}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let catalog = send(Method::GET, &url("/models"), None).await.unwrap();
    assert!(ids(&catalog.body).contains(&("xai/grok-4.6".into(), false)));
    assert!(!catalog.body.to_string().contains("xai-test-key"));

    // Settings: unknown models and a default outside the enabled are refused in words.
    for (bad, says) in [
        (json!({"enabled": ["nobody/nothing"]}), "nobody/nothing"),
        (
            json!({"enabled": ["inspect/fake-model"], "defaultModel": "inspect/fake-model-2"}),
            "default model",
        ),
        (json!({"enabled": [], "extra": 1}), "unknown field"),
    ] {
        let r = send(Method::PUT, &url("/settings/models"), Some(bad))
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body.to_string().contains(says), "{}", r.body);
    }
    let r = send(
        Method::PUT,
        &url("/settings/models"),
        Some(json!({"enabled": ["inspect/fake-model", "anthropic/claude-sonnet-4-5"], "defaultModel": "inspect/fake-model"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["defaultModel"], "inspect/fake-model");
    // A session asking for a disabled model, or an effort its model does not take: 400.
    for (body, says) in [
        (
            json!({"repoOwner": "local", "repoName": "demo", "model": "inspect/fake-model-2"}),
            "disabled",
        ),
        (
            json!({"repoOwner": "local", "repoName": "demo", "model": "made/up"}),
            "unknown model",
        ),
        (
            json!({"repoOwner": "local", "repoName": "demo", "model": "anthropic/claude-sonnet-4-5", "reasoningEffort": "low"}),
            "high, max",
        ),
    ] {
        let r = send_as("ann", Method::POST, &format!("{base}/sessions"), Some(body))
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{}", r.body);
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    // A session naming none runs with the deployment's default; a prompt naming a disabled
    // model is refused on the socket, naming the enabled ones.
    let (id, mut ws) = demo_session(&w).await;
    let state = send(Method::GET, &url(&format!("/sessions/{id}")), None)
        .await
        .unwrap();
    assert_eq!(state.body["model"], "inspect/fake-model", "{}", state.body);
    ws.send(json!({"type": "prompt", "content": "x", "model": "inspect/fake-model-2", "clientRequestId": "r1"}))
        .await
        .unwrap();
    let refused = ws.recv_type("error").await.unwrap();
    assert_eq!(refused["code"], "bad_request", "{refused}");
    assert_eq!(refused["clientRequestId"], "r1");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("disabled")
            && message.contains("anthropic/claude-sonnet-4-5, inspect/fake-model"),
        "{message}"
    );
    let r = send_as(
        "ann",
        Method::POST,
        &url(&format!("/sessions/{id}/prompt")),
        Some(json!({"content": "x", "reasoningEffort": "max"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.to_string().contains("low, medium, high"),
        "{}",
        r.body
    );

    // Enabled again, the second model: a new session's prompt switches to it, with an effort.
    let r = send(
        Method::PUT,
        &url("/settings/models"),
        Some(json!({"enabled": ["inspect/fake-model", "inspect/fake-model-2"]})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let (_, mut ws) = demo_session(&w).await;
    ws.send(json!({"type": "prompt", "content": "use the second", "model": "inspect/fake-model-2", "reasoningEffort": "low"}))
        .await
        .unwrap();
    until_complete(&mut ws, 1, &w).await;
    ws.send(json!({"type": "prompt", "content": "back to the default"}))
        .await
        .unwrap();
    until_complete(&mut ws, 1, &w).await;
    let asked = w.model.requests();
    let second = asked
        .iter()
        .find(|r| {
            r.to_string().contains("use the second")
                && !r.to_string().contains("back to the default")
        })
        .unwrap();
    assert_eq!(second["model"], "fake-model-2", "{second}");
    assert_eq!(second["reasoning_effort"], "low", "{second}");
    let default = asked
        .iter()
        .find(|r| r.to_string().contains("back to the default"))
        .unwrap();
    assert_eq!(default["model"], "fake-model", "{default}");
    // An environment's default model: one of the enabled, and its sessions take it.
    let env_body = |model: &str| json!({"name": "staging", "repositories": [{"owner": "local", "name": "demo"}], "defaultModel": model});
    let bad = send(
        Method::POST,
        &url("/environments"),
        Some(env_body("made/up")),
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400, "{}", bad.body);
    let made = send(
        Method::POST,
        &url("/environments"),
        Some(env_body("inspect/fake-model-2")),
    )
    .await
    .unwrap();
    assert_eq!(made.status, 201, "{}", made.body);
    let sid = create_session(base, "ann", json!({"environmentId": made.body["id"]}))
        .await
        .unwrap();
    let state = send(Method::GET, &url(&format!("/sessions/{sid}")), None)
        .await
        .unwrap();
    assert_eq!(
        state.body["model"], "inspect/fake-model-2",
        "{}",
        state.body
    );
}

/// Managed skills: a skill assigned to the repository is installed before the agent starts
/// (the boot step names its revision) and is in the agent's context (the model sees its
/// description); an edit is a new revision that new sessions take while the running one
/// keeps its own; one assigned elsewhere, a disabled one, or a session choosing none gets
/// nothing; bad skills are refused in words.
#[tokio::test]
async fn managed_skills_reach_the_agent_at_the_revision_the_session_pinned() {
    let w = world(vec![
        Reply::text("First."),
        Reply::text("Second."),
        Reply::text("Third."),
    ])
    .await;
    let url = |p: &str| w.stack.url(p);
    let skill = |name: &str, description: &str, assignments: Value| {
        json!({"name": name, "description": description, "instructions": "1. Run the checks.\n2. Report.",
               "files": [{"path": "scripts/check.sh", "content": "echo checked", "executable": true}],
               "assignments": assignments})
    };
    let r = send(
        Method::POST,
        &url("/skills"),
        Some(skill(
            "deploy-notes",
            "Use when deploying the storefront: the ZEBRA-7 checklist",
            json!([{"kind": "repository", "owner": "local", "name": "demo"}]),
        )),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["revision"], 1);
    assert_eq!(r.body["digest"].as_str().unwrap().len(), 64, "{}", r.body);
    for (body, status, says) in [
        (skill("Bad_Name", "x", json!(null)), 400, "lowercase"),
        (skill("deploy-notes", "again", json!(null)), 409, "exists"),
        (
            json!({"name": "escape", "description": "x", "files": [{"path": "../../etc/x", "content": ""}]}),
            400,
            "relative",
        ),
        (
            json!({"name": "nothing", "description": ""}),
            400,
            "description",
        ),
    ] {
        let r = send(Method::POST, &url("/skills"), Some(body))
            .await
            .unwrap();
        assert_eq!(r.status, status, "{}", r.body);
        assert!(r.body.to_string().contains(says), "{}", r.body);
    }
    for (name, description, assignments, enabled) in [
        (
            "elsewhere",
            "Only for acme/web: the YAK-3 rules",
            json!([{"kind": "repository", "owner": "acme", "name": "web"}]),
            true,
        ),
        (
            "switched-off",
            "Disabled: the EMU-5 rules",
            json!(null),
            false,
        ),
    ] {
        let mut body = skill(name, description, assignments);
        body["enabled"] = json!(enabled);
        let r = send(Method::POST, &url("/skills"), Some(body))
            .await
            .unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let (id, mut ws) = demo_session(&w).await;
    let state = send(Method::GET, &url(&format!("/sessions/{id}")), None)
        .await
        .unwrap();
    assert_eq!(
        state.body["skills"],
        json!([{"name": "deploy-notes", "revision": 1}]),
        "{}",
        state.body
    );
    // A person's skill profile: of the skills that apply, only those it names; it is theirs
    // alone.
    let r = send_as(
        "ann",
        Method::PUT,
        &url("/skill-profiles/just-deploy"),
        Some(json!({"skills": ["switched-off", "deploy-notes", "deploy-notes"]})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["skills"], json!(["deploy-notes", "switched-off"]));
    let bad = send_as(
        "ann",
        Method::PUT,
        &url("/skill-profiles/Bad_Name"),
        Some(json!({"skills": []})),
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400, "{}", bad.body);
    let profiled = create_session(
        &w.stack.base_url,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo", "skills": {"profile": "just-deploy"}}),
    )
    .await
    .unwrap();
    let state = send(Method::GET, &url(&format!("/sessions/{profiled}")), None)
        .await
        .unwrap();
    assert_eq!(
        state.body["skills"],
        json!([{"name": "deploy-notes", "revision": 1}]),
        "{}",
        state.body
    );
    let theirs = send_as(
        "bob",
        Method::POST,
        &url("/sessions"),
        Some(
            json!({"repoOwner": "local", "repoName": "demo", "skills": {"profile": "just-deploy"}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(theirs.status, 400, "{}", theirs.body);
    assert!(
        theirs.body.to_string().contains("no skill profile"),
        "{}",
        theirs.body
    );
    let bobs = send_as("bob", Method::GET, &url("/skill-profiles"), None)
        .await
        .unwrap();
    assert_eq!(bobs.body["profiles"], json!([]));
    // Only the session's sandbox reads the skills' content there.
    let r = send(Method::GET, &url(&format!("/sessions/{id}/skills")), None)
        .await
        .unwrap();
    assert_eq!(r.status, 401, "{}", r.body);
    ws.send(json!({"type": "prompt", "content": "first prompt"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    let step = seen
        .iter()
        .find(|m| {
            m["event"]["type"] == "boot_step"
                && m["event"]["step"] == "skills"
                && m["event"]["status"] == "succeeded"
        })
        .unwrap_or_else(|| panic!("no skills step: {seen:#?}"));
    assert_eq!(step["event"]["detail"], "deploy-notes@1", "{step}");
    let installed: Vec<std::path::PathBuf> = std::fs::read_dir(w.host.data_dir().join("sandboxes"))
        .unwrap()
        .flatten()
        .map(|d| d.path())
        .collect();
    assert!(
        installed.iter().any(|root| root
            .join("agent/skills/deploy-notes/scripts/check.sh")
            .is_file()),
        "{installed:?}"
    );
    let first = w
        .model
        .requests()
        .into_iter()
        .find(|r| r.to_string().contains("first prompt"))
        .unwrap()
        .to_string();
    assert!(
        first.contains("ZEBRA-7"),
        "the skill is in the agent's context: {first}"
    );
    assert!(
        !first.contains("YAK-3") && !first.contains("EMU-5"),
        "{first}"
    );

    // An edit is a new revision: the running session keeps the one it started with.
    let mut edited = skill(
        "deploy-notes",
        "Use when deploying the storefront: the OKAPI-9 checklist",
        json!([{"kind": "repository", "owner": "local", "name": "demo"}]),
    );
    edited["expectedRevision"] = json!(1);
    let r = send(
        Method::PUT,
        &url("/skills/deploy-notes"),
        Some(edited.clone()),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["revision"], 2);
    let stale = send(Method::PUT, &url("/skills/deploy-notes"), Some(edited))
        .await
        .unwrap();
    assert_eq!(
        stale.status, 409,
        "saved from an old revision: {}",
        stale.body
    );
    ws.send(json!({"type": "prompt", "content": "second prompt"}))
        .await
        .unwrap();
    until_complete(&mut ws, 1, &w).await;
    let second = w
        .model
        .requests()
        .into_iter()
        .find(|r| r.to_string().contains("second prompt"))
        .unwrap()
        .to_string();
    assert!(
        second.contains("ZEBRA-7") && !second.contains("OKAPI-9"),
        "{second}"
    );
    // New sessions take the new revision, unless they choose none.
    let base = &w.stack.base_url;
    let newer = create_session(
        base,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo"}),
    )
    .await
    .unwrap();
    // What only the control plane sets is never taken from the person's body.
    let none = create_session(
        base,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo", "skills": "none",
               "pinnedSkills": [{"name": "switched-off", "revision": 1}],
               "mcpServers": [{"name": "planted", "server": {"type": "local", "command": ["sh", "-c", "echo planted"]}}]}),
    )
    .await
    .unwrap();
    for (sid, expected) in [
        (newer, json!([{"name": "deploy-notes", "revision": 2}])),
        (none, json!([])),
    ] {
        let state = send(Method::GET, &url(&format!("/sessions/{sid}")), None)
            .await
            .unwrap();
        assert_eq!(state.body["skills"], expected, "{}", state.body);
        assert_eq!(state.body["mcpServers"], json!([]), "{}", state.body);
    }
    let listed = send(Method::GET, &url("/skills"), None).await.unwrap();
    assert_eq!(listed.body["skills"].as_array().unwrap().len(), 3);
    let r = send(Method::DELETE, &url("/skills/deploy-notes"), None)
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let gone = send(Method::GET, &url("/skills/deploy-notes"), None)
        .await
        .unwrap();
    assert_eq!(gone.status, 404);
}

/// MCP servers: one configured for the repository reaches the agent with its secret
/// resolved from the session's secrets (the configuration holds only the reference), its
/// tool is listed to the model, and a dead one is named in the boot step in words; a
/// literal credential in the configuration is refused.
#[tokio::test]
async fn mcp_servers_reach_the_agent_with_their_secrets_and_a_dead_one_is_named() {
    let w = world(vec![Reply::text("Looked it up.")]).await;
    let url = |p: &str| w.stack.url(p);
    let orders = inspect_tests::fakes::mcp::FakeMcp::start(
        "lookup_order",
        "Looks up an order in the WOMBAT-2 system",
        Some("mcp-s3cret-42"),
    )
    .await
    .unwrap();
    let r = send(
        Method::PUT,
        &url("/secrets"),
        Some(json!({"secrets": {"ORDERS_TOKEN": "mcp-s3cret-42"}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let literal = send(
        Method::POST,
        &url("/mcp-servers"),
        Some(json!({"name": "orders", "server": {"type": "remote", "url": orders.url, "headers": {"Authorization": "Bearer mcp-s3cret-42"}}})),
    )
    .await
    .unwrap();
    assert_eq!(literal.status, 400, "{}", literal.body);
    assert!(
        literal.body.to_string().contains("secret"),
        "{}",
        literal.body
    );
    let r = send(
        Method::POST,
        &url("/mcp-servers"),
        Some(json!({"name": "orders",
                    "server": {"type": "remote", "url": orders.url, "headers": {"Authorization": "Bearer {secret:ORDERS_TOKEN}"}},
                    "scope": {"kind": "repository", "owner": "local", "name": "demo"}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let dead = inspect_tests::stack::free_port().unwrap();
    let r = send(
        Method::POST,
        &url("/mcp-servers"),
        Some(json!({"name": "dead-end", "server": {"type": "remote", "url": format!("http://127.0.0.1:{dead}/mcp")}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let listed = send(Method::GET, &url("/mcp-servers"), None).await.unwrap();
    assert_eq!(listed.body["servers"].as_array().unwrap().len(), 2);
    assert!(!listed.body.to_string().contains("mcp-s3cret-42"));

    let (id, mut ws) = demo_session(&w).await;
    let state = send(Method::GET, &url(&format!("/sessions/{id}")), None)
        .await
        .unwrap();
    assert_eq!(
        state.body["mcpServers"],
        json!(["dead-end", "orders"]),
        "{}",
        state.body
    );
    ws.send(json!({"type": "prompt", "content": "where is my order"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    let step = seen
        .iter()
        .find(|m| {
            m["event"]["type"] == "boot_step"
                && m["event"]["step"] == "mcp"
                && m["event"]["status"] != "started"
        })
        .unwrap_or_else(|| panic!("no mcp step: {seen:#?}"));
    let detail = step["event"]["detail"].as_str().unwrap_or_default();
    assert_eq!(step["event"]["status"], "failed", "{step}");
    assert!(
        detail.contains("orders: connected") && detail.contains("dead-end: failed"),
        "{detail}"
    );
    let asked = w
        .model
        .requests()
        .into_iter()
        .find(|r| r.to_string().contains("where is my order"))
        .unwrap()
        .to_string();
    assert!(
        asked.contains("WOMBAT-2") && asked.contains("lookup_order"),
        "the tool is listed: {asked}"
    );
    let methods = orders.methods();
    assert!(
        methods.contains(&"initialize".to_string()) && methods.contains(&"tools/list".to_string()),
        "{methods:?}"
    );
    assert!(
        orders
            .authorizations()
            .iter()
            .all(|a| a == "Bearer mcp-s3cret-42"),
        "{:?}",
        orders.authorizations()
    );
    // The secret's value is in no file of the sandbox.
    let mut stack = vec![w.host.data_dir().join("sandboxes")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                assert!(
                    !String::from_utf8_lossy(&bytes).contains("mcp-s3cret-42"),
                    "the secret is in {}",
                    p.display()
                );
            }
        }
    }
}

/// A repository's default ports: a session on it that names none exposes them (behind the
/// gate, as any tunnelled port); bad ports are refused in the settings.
#[tokio::test]
async fn a_repositorys_default_ports_are_tunnelled() {
    let w = world(vec![Reply::text("Up.")]).await;
    let port = inspect_tests::stack::free_port().unwrap();
    let settings = w.stack.url("/repos/local/demo/settings");
    for bad in [json!({"tunnelPorts": [0]}), json!({"tunnelPorts": [70000]})] {
        let r = send(Method::PUT, &settings, Some(bad.clone()))
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    let r = send(Method::PUT, &settings, Some(json!({"tunnelPorts": [port]})))
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let (id, mut ws) = demo_session(&w).await;
    ws.send(json!({"type": "prompt", "content": "up"}))
        .await
        .unwrap();
    let urls = ws
        .recv_type("tunnel_urls")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.host.sandbox_logs()));
    let url = urls["tunnelUrls"][port.to_string()]
        .as_str()
        .unwrap()
        .to_owned();
    until_complete(&mut ws, 1, &w).await;
    assert_eq!(
        reqwest::get(&url).await.unwrap().status(),
        401,
        "behind the gate"
    );
    let link = send_as(
        "ann",
        Method::POST,
        &w.stack.url(&format!("/sessions/{id}/ports/{port}/link")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(link.status, 200, "{}", link.body);
}

/// The second agent: Claude Code (the pinned binary, `INSPECT_CLAUDE_BIN`) against the
/// scripted server speaking Anthropic's Messages API. The same kinds of timeline events
/// as OpenCode's, the work committed on the session branch as the prompter, a stop that
/// ends a running tool, and the next prompt carrying the conversation on.
#[tokio::test]
async fn claude_code_works_a_prompt_commits_stops_and_carries_on() {
    assert!(
        std::env::var_os("INSPECT_CLAUDE_BIN").is_some(),
        "INSPECT_CLAUDE_BIN names Claude Code (scripts/toolchain.sh: ensure_claude_code)"
    );
    let w = world(vec![
        Reply::tool(
            "Bash",
            json!({"command": "printf 'hello from claude\\n' > hello.txt && cat hello.txt", "description": "write hello.txt"}),
        ),
        Reply::text("Wrote hello.txt."),
        Reply::tool(
            "Bash",
            json!({"command": "sleep 120", "description": "a long wait"}),
        ),
        Reply::text("Back to work."),
    ])
    .await;
    let base = &w.stack.base_url;
    // A managed skill reaches Claude Code too (installed where it reads skills).
    let r = send(
        Method::POST,
        &w.stack.url("/skills"),
        Some(json!({"name": "release-notes", "description": "Use when writing release notes: the OKAPI-9 format",
                    "instructions": "Write them as OKAPI-9 says."})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.body);
    let id = create_session(
        base,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo", "agent": "claude-code"}),
    )
    .await
    .unwrap();
    let state = inspect_tests::client::get(&format!("{base}/sessions/{id}"))
        .await
        .unwrap();
    assert_eq!(state.body["agent"], "claude-code", "{}", state.body);
    let (mut ws, _) = WsClient::join(base, &w.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "Write hello.txt"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    let calls = events(&seen, "tool_call");
    assert!(
        calls
            .iter()
            .any(|c| c["tool"] == "bash" && c["status"] == "running"),
        "{calls:?}"
    );
    let done = calls
        .iter()
        .find(|c| c["tool"] == "bash" && c["status"] == "completed")
        .unwrap_or_else(|| panic!("{calls:?}\n{}", w.host.sandbox_logs()));
    assert!(
        done["output"]
            .as_str()
            .unwrap()
            .contains("hello from claude"),
        "{done}"
    );
    assert!(done["durationMs"].is_number(), "{done}");
    let tokens = events(&seen, "token");
    assert!(
        tokens.iter().any(|t| t["content"] == "Wrote hello.txt."),
        "{tokens:?}"
    );
    let complete = events(&seen, "execution_complete");
    assert_eq!(complete[0]["success"], true, "{complete:?}");
    // The work is on the session branch, as the prompter.
    let branch = format!("open-inspect/{id}");
    let log = git(w.repo.path(), &["log", "--format=%an|%cn|%s", &branch]);
    assert!(
        log.lines()
            .next()
            .unwrap()
            .starts_with("ann|open-inspect[bot]|Write hello.txt"),
        "{log}"
    );
    assert_eq!(
        git(w.repo.path(), &["show", &format!("{branch}:hello.txt")]),
        "hello from claude"
    );
    // Claude Code spoke the Messages API, with the tools it offers.
    let first = &w.model.requests()[0];
    assert!(
        first["max_tokens"].is_number() && first["tools"].is_array(),
        "{first}"
    );
    assert!(
        first.to_string().contains("OKAPI-9"),
        "the skill is offered to the model: {first}"
    );

    // A stop ends the running tool; the next prompt carries the conversation on.
    ws.send(json!({"type": "prompt", "content": "Wait a while"}))
        .await
        .unwrap();
    until_tool_runs(&mut ws, &w).await;
    let t = std::time::Instant::now();
    ws.send(json!({"type": "stop"})).await.unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    assert!(
        t.elapsed().as_secs() < 30,
        "the stop took {:?}",
        t.elapsed()
    );
    assert_eq!(events(&seen, "execution_complete")[0]["success"], false);
    ws.send(json!({"type": "prompt", "content": "- carry on (a prompt that starts with a dash is text, not an option)"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    assert_eq!(
        events(&seen, "execution_complete")[0]["success"],
        true,
        "{seen:?}"
    );
    let last = w.model.requests().last().unwrap().to_string();
    assert!(
        last.contains("Wrote hello.txt."),
        "the conversation went on: {last}"
    );
    assert!(
        last.contains("- carry on (a prompt that starts with a dash"),
        "the dash prompt reached the model as text: {last}"
    );
}

/// Every file under `dir` (recursively) that holds one of `needles`.
fn files_holding(dir: &std::path::Path, needles: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() && meta.len() < 8 * 1024 * 1024 {
                let bytes = std::fs::read(&path).unwrap_or_default();
                let text = String::from_utf8_lossy(&bytes);
                if needles.iter().any(|n| text.contains(n.as_str())) {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    found
}

/// Brokered model access: an OAuth grant kept by the control plane. The sandbox's agent
/// holds a marker; its calls reach the model with short-lived tokens the supervisor gets
/// with the sandbox's own credentials (each refresh rotating the refresh token, written
/// back); no token is in any file of the sandbox or in the agent's environment; a revoked
/// grant is said on the timeline and the grant shows revoked.
#[tokio::test]
async fn a_brokered_grant_stays_out_of_the_sandbox_while_the_agent_calls_the_model() {
    use inspect_tests::fakes::oauth::FakeOAuth;
    // Tokens of 30 s: every call (renewed a minute ahead) refreshes and rotates.
    let oauth = FakeOAuth::start("inspect-client", "rt-original-0123456789", 30)
        .await
        .unwrap();
    let parts = AgentStack::prepare(vec![
        Reply::tool(
            "Bash",
            json!({"command": "env | grep -e ANTHROPIC -e API_KEY; echo checked", "description": "look at the environment"}),
        ),
        Reply::text("The key is only a marker."),
        Reply::text("never said: the grant is revoked"),
    ])
    .await
    .unwrap();
    parts.model.require_bearer(oauth.access_tokens.clone());
    let agent = AgentStack::launch(parts).await.unwrap();
    let repo = source_repo();
    agent.register_repo("demo", repo.path()).await.unwrap();
    let url = |p: &str| agent.stack.url(p);
    for (body, says) in [
        (
            json!({"provider": "xai", "tokenUrl": oauth.token_url, "clientId": "c", "refreshToken": "r"}),
            "provider",
        ),
        (
            json!({"provider": "anthropic", "tokenUrl": "http://example.com/token", "clientId": "c", "refreshToken": "r"}),
            "https",
        ),
    ] {
        let r = send(Method::PUT, &url("/model-grants"), Some(body))
            .await
            .unwrap();
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body.to_string().contains(says), "{}", r.body);
    }
    let r = send(
        Method::PUT,
        &url("/model-grants"),
        Some(json!({"provider": "anthropic", "tokenUrl": oauth.token_url, "clientId": "inspect-client",
                    "refreshToken": "rt-original-0123456789"})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.to_string().contains("rt-original"), "{}", r.body);
    let listed = send(Method::GET, &url("/model-grants"), None)
        .await
        .unwrap();
    assert_eq!(
        listed.body["grants"][0]["status"], "active",
        "{}",
        listed.body
    );

    let base = &agent.stack.base_url;
    let id = create_session(
        base,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo", "agent": "claude-code",
               "managedGrants": [{"id": "grant_forged", "provider": "anthropic"}]}),
    )
    .await
    .unwrap();
    let (mut ws, _) = WsClient::join(base, &agent.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "What key do you have?"}))
        .await
        .unwrap();
    let w = World {
        model: agent.model,
        host: agent.host,
        stack: agent.stack,
        repo,
    };
    let first = tokio::time::timeout(
        std::time::Duration::from_secs(100),
        until_complete(&mut ws, 1, &w),
    )
    .await;
    let seen = match first {
        Ok(seen) => seen,
        Err(_) => {
            let mut logs = String::new();
            for f in files_holding(w.host.data_dir(), &["".to_string()]) {
                if f.ends_with("claude.log") || f.ends_with("supervisor.log") {
                    logs.push_str(&format!(
                        "--- {f}\n{}\n",
                        std::fs::read_to_string(&f).unwrap_or_default()
                    ));
                }
            }
            panic!(
                "the first turn did not end: refreshed {} refused {:?} model refused {} calls {}\n{logs}\n{}",
                oauth.refreshed(),
                oauth.refused(),
                w.model.refused(),
                w.model.requests().len(),
                w.host.sandbox_logs()
            );
        }
    };
    assert_eq!(
        events(&seen, "execution_complete")[0]["success"],
        true,
        "{seen:?}"
    );
    let env_out = events(&seen, "tool_call")
        .iter()
        .find_map(|c| c["output"].as_str().map(str::to_owned))
        .unwrap();
    assert!(
        env_out.contains("ANTHROPIC_API_KEY=inspect-managed:grant_"),
        "{env_out}"
    );
    let tokens = oauth.all_tokens();
    assert!(
        !tokens.iter().any(|t| env_out.contains(t.as_str())),
        "{env_out}"
    );
    // Each call refreshed the token, each refresh with the rotated refresh token of the last.
    assert!(oauth.refreshed() >= 2, "refreshed {}", oauth.refreshed());
    assert!(oauth.refused().is_empty(), "{:?}", oauth.refused());
    assert_eq!(w.model.refused(), 0);
    // No token in any file of the host's sandboxes (the agent's state, logs, workspace).
    let leaked = files_holding(w.host.data_dir(), &tokens);
    assert!(leaked.is_empty(), "tokens in {leaked:?}");

    // The grant is revoked at the provider: the next turn fails, in words.
    oauth.revoke();
    ws.send(json!({"type": "prompt", "content": "Once more"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    assert_eq!(events(&seen, "execution_complete")[0]["success"], false);
    let warnings = events(&seen, "warning");
    assert!(
        warnings.iter().any(|e| e["scope"] == "model-grant"
            && e["message"]
                .as_str()
                .unwrap_or_default()
                .contains("revoked")),
        "{warnings:?}"
    );
    let listed = send(Method::GET, &w.stack.url("/model-grants"), None)
        .await
        .unwrap();
    assert_eq!(
        listed.body["grants"][0]["status"], "revoked",
        "{}",
        listed.body
    );
}

#[tokio::test]
async fn a_setup_secret_reaches_the_hooks_and_never_the_agent() {
    // The agent looks for the value everywhere it can: its environment, every process's
    // environment under /proc, and the files of the sandbox (the value is spelled in two
    // parts, so the command itself does not hold it).
    let look = "V=setup-value; V=\"$V-7d1\"; \
        echo \"env:$(env | grep -c \"$V\")\"; \
        echo \"proc:$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c \"$V\")\"; \
        echo \"files:$(grep -rl \"$V\" \"$INSPECT_SANDBOX_ROOT\" \"$HOME\" 2>/dev/null | wc -l)\"; \
        echo \"normal:$(env | grep -c '^NORMAL_TOKEN=normal-value$')\"; \
        echo \"proc-normal:$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c '^NORMAL_TOKEN=normal-value$' | sed 's/^[1-9][0-9]*$/some/')\"; \
        echo \"files-hook:$(grep -rl 'secret of' \"$INSPECT_SANDBOX_ROOT\" 2>/dev/null | wc -l | sed 's/^ *[1-9][0-9]*$/some/')\"";
    let w = world(vec![
        Reply::tool(
            "bash",
            json!({"command": look, "description": "look for the set-up secret"}),
        ),
        Reply::text("Looked everywhere."),
    ])
    .await;
    // The set-up hook says only how long the secret it was given is.
    let hooks = w.repo.path().join(".openinspect");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(
        hooks.join("setup.sh"),
        "echo \"setup saw a secret of ${#SETUP_TOKEN} characters\"\n",
    )
    .unwrap();
    commit_all(w.repo.path(), "setup hook");
    let url = |p: &str| w.stack.url(p);
    // A set-up mark on a name not sent is refused; then both are stored, one for set-up.
    let r = send(
        Method::PUT,
        &url("/repos/local/demo/secrets"),
        Some(json!({"secrets": {"NORMAL_TOKEN": "normal-value"}, "setup": ["SETUP_TOKEN"]})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.to_string().contains("not among the secrets sent"),
        "{}",
        r.body
    );
    let r = send(
        Method::PUT,
        &url("/repos/local/demo/secrets"),
        Some(json!({"secrets": {"NORMAL_TOKEN": "normal-value", "SETUP_TOKEN": "setup-value-7d1"}, "setup": ["setup_token"]})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let listed = r.body["secrets"].as_array().unwrap().clone();
    let setup_of = |name: &str| {
        listed
            .iter()
            .find(|s| s["key"] == name)
            .map(|s| s["setup"].clone())
    };
    assert_eq!(setup_of("SETUP_TOKEN"), Some(json!(true)), "{listed:?}");
    assert_eq!(setup_of("NORMAL_TOKEN"), Some(json!(false)), "{listed:?}");
    assert!(!r.body.to_string().contains("setup-value-7d1"));

    let (_, mut ws) = demo_session(&w).await;
    ws.send(json!({"type": "prompt", "content": "look for the secret"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    let all = serde_json::to_string(&seen).unwrap();
    let setup = events(&seen, "boot_step")
        .into_iter()
        .find(|e| e["step"] == "setup" && e["status"] == "succeeded")
        .unwrap_or_else(|| panic!("no setup step: {all}"));
    assert!(
        setup
            .to_string()
            .contains("setup saw a secret of 15 characters"),
        "{setup}\n{}",
        w.host.sandbox_logs()
    );
    // The looks can see: the ordinary secret in /proc, the hook's own file on disk.
    for line in [
        "env:0",
        "proc:0",
        "files:0",
        "normal:1",
        "proc-normal:some",
        "files-hook:some",
    ] {
        assert!(
            all.contains(line),
            "{line} not in what the agent saw: {all}"
        );
    }
    assert!(
        !all.contains("setup-value-7d1"),
        "the value reached a client: {all}"
    );
    assert!(!w.host.sandbox_logs().contains("setup-value-7d1"), "logged");
}

/// A plain HTTP server on this machine's loopback answering every request with `body`.
async fn answering_server(body: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

#[tokio::test]
async fn an_environment_that_lets_out_one_host_refuses_the_rest_and_says_so() {
    let confined = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("bwrap").is_file());
    let allowed = answering_server("hello-from-allowed").await;
    let other = answering_server("hello-from-other").await;
    // Through the proxy: the allowed host, a host not on the list (plain and HTTPS), the
    // allowed server by its address, another port of the same name (`--noproxy ''`: inside
    // the sandbox `localhost` is its own, so this machine's is asked for through the
    // proxy); then around the proxy, to this machine and to an outside address, and a name
    // looked up directly.
    let served = inspect_tests::stack::free_port().unwrap();
    let look = format!(
        "echo \"allowed:$(curl -s --noproxy '' --max-time 10 http://localhost:{allowed}/)\"; \
         echo \"other:$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 http://registry.example/)\"; \
         echo \"tls:$(curl -s -o /dev/null -w '%{{http_connect}}' --max-time 10 https://registry.example/)\"; \
         echo \"raw:$(curl -s --noproxy '' -o /dev/null -w '%{{http_code}}' --max-time 10 http://127.0.0.1:{allowed}/)\"; \
         echo \"port:$(curl -s --noproxy '' -o /dev/null -w '%{{http_code}}' --max-time 10 http://localhost:{other}/)\"; \
         echo \"direct:$(curl -s --noproxy '*' --max-time 5 http://127.0.0.1:{other}/ || echo none)\"; \
         echo \"outside:$(curl -s --noproxy '*' --max-time 5 http://1.1.1.1/ >/dev/null && echo reached || echo none)\"; \
         echo \"dns:$(getent hosts example.com >/dev/null && echo resolved || echo none)\""
    );
    let w = world(vec![
        Reply::tool("bash", json!({"command": look, "description": "reach out"})),
        Reply::text("Reached out."),
    ])
    .await;
    // The repository's start hook serves the session's port inside the sandbox.
    let hooks = w.repo.path().join(".openinspect");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(
        hooks.join("start.sh"),
        format!("cd \"$(dirname \"$0\")/..\"\nnohup python3 -m http.server {served} --bind 127.0.0.1 >/dev/null 2>&1 &\n"),
    )
    .unwrap();
    commit_all(w.repo.path(), "start hook");
    let url = |p: &str| w.stack.url(p);
    // Entries that are not host names are refused with the reason, before anything is saved.
    for (entry, says) in [
        ("*", "open"),
        ("10.0.0.0/8", "address range"),
        ("127.0.0.1", "IP address"),
    ] {
        let r = send(
            Method::POST,
            &url("/environments"),
            Some(
                json!({"name": "bad", "repositories": [{"owner": "local", "name": "demo"}],
                "egress": {"mode": "off", "allow": [{"host": entry}]}}),
            ),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 400, "{entry}: {}", r.body);
        assert!(r.body.to_string().contains(says), "{entry}: {}", r.body);
    }
    let e = send(
        Method::POST,
        &url("/environments"),
        Some(
            json!({"name": "walled", "repositories": [{"owner": "local", "name": "demo"}],
            "egress": {"mode": "off", "allow": [{"host": format!("localhost:{allowed}")}]}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(e.status, 201, "{}", e.body);
    assert_eq!(e.body["egress"]["mode"], "off", "{}", e.body);
    // A session's request cannot set its own policy: the environment's is what it gets.
    let base = &w.stack.base_url;
    let id = create_session(
        base,
        "ann",
        json!({"environmentId": e.body["id"], "egress": {"mode": "open"},
            "sandbox": {"egress": {"mode": "open"}, "tunnelPorts": [served]}}),
    )
    .await
    .unwrap();
    let (mut ws, _) = WsClient::join(base, &w.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "reach out"}))
        .await
        .unwrap();
    if !confined {
        // Without bubblewrap the host cannot confine it, and says so rather than run open.
        loop {
            let m = ws.recv_within(120).await.unwrap();
            if m["type"] == "sandbox_error"
                || m["type"] == "sandbox_status" && m["status"] == "failed"
            {
                assert!(m.to_string().contains("cannot confine"), "{m}");
                return;
            }
        }
    }
    let seen = until_complete(&mut ws, 1, &w).await;
    let all = serde_json::to_string(&seen).unwrap();
    let call = events(&seen, "tool_call")
        .into_iter()
        .find(|c| c["status"] == "completed")
        .unwrap_or_else(|| panic!("no tool call: {all}"))
        .clone();
    let output = call["output"].as_str().unwrap_or_default();
    for line in [
        "allowed:hello-from-allowed",
        "other:403",
        "tls:403",
        "raw:403",
        "port:403",
        "direct:none",
        "outside:none",
        "dns:none",
    ] {
        assert!(
            output.contains(line),
            "{line} not in what the agent saw: {output}\n{}",
            w.host.sandbox_logs()
        );
    }
    // The refusals come as the host writes them (read a few times a second): wait for
    // them past the prompt's end.
    let mut seen = seen;
    while events(&seen, "egress_blocked").len() < 4 {
        match ws.recv_within(30).await {
            Ok(m) => seen.push(m),
            Err(e) => panic!("{e}: {:?}", events(&seen, "egress_blocked")),
        }
    }
    let blocked: Vec<String> = events(&seen, "egress_blocked")
        .iter()
        .map(|e| {
            format!(
                "{} {}:{}",
                e["method"].as_str().unwrap(),
                e["host"].as_str().unwrap(),
                e["port"]
            )
        })
        .collect();
    // Each refusal is on the timeline once (the HTTPS one as its tunnel).
    for want in [
        "GET registry.example:80".to_owned(),
        "CONNECT registry.example:443".to_owned(),
        format!("GET 127.0.0.1:{allowed}"),
        format!("GET localhost:{other}"),
    ] {
        assert_eq!(
            blocked.iter().filter(|b| **b == want).count(),
            1,
            "{want} in {blocked:?}"
        );
    }
    let step = events(&seen, "boot_step")
        .into_iter()
        .find(|e| e["step"] == "egress" && e["status"] == "succeeded")
        .unwrap_or_else(|| panic!("no egress step: {all}"));
    assert!(
        step["detail"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("off but localhost:{allowed}")),
        "{step}"
    );
    // The refusals stay on the session's timeline for anyone who opens it later.
    let r = send_as(
        "ann",
        Method::GET,
        &url(&format!("/sessions/{id}/events?type=egress_blocked")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.to_string().contains("registry.example"),
        "{}",
        r.body
    );
    // The session's people still reach its ports: the gate reaches the server in the
    // sandbox's own network through its supervisor.
    let link = send_as(
        "ann",
        Method::POST,
        &url(&format!("/sessions/{id}/ports/{served}/link")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(link.status, 200, "{}", link.body);
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let swapped = plain
        .get(link.body["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(swapped.status(), 302);
    let cookie = inspect_tests::client::gate_cookie(&swapped);
    let gate = link.body["url"]
        .as_str()
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .to_owned();
    let mut body = String::new();
    for _ in 0..50 {
        if let Ok(r) = plain.get(&gate).header("Cookie", &cookie).send().await {
            body = r.text().await.unwrap_or_default();
            if body.contains("README.md") {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        body.contains("README.md"),
        "{body}\n{}",
        w.host.sandbox_logs()
    );
}

/// Claude Code is given the agent's browser too (the MCP server `browser` in its
/// `--mcp-config`): a scripted call opens a page and reads it.
#[tokio::test]
async fn claude_code_drives_the_agents_browser_too() {
    let w = world(vec![
        Reply::tool("mcp__browser__open", json!({"url": "about:blank"})),
        Reply::tool("mcp__browser__read", json!({})),
        Reply::text("Read it."),
    ])
    .await;
    let base = &w.stack.base_url;
    let id = create_session(
        base,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo", "agent": "claude-code"}),
    )
    .await
    .unwrap();
    let (mut ws, _) = WsClient::join(base, &w.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "Look at a blank page"}))
        .await
        .unwrap();
    let seen = until_complete(&mut ws, 1, &w).await;
    let calls = events(&seen, "tool_call");
    let ended: Vec<&&Value> = calls
        .iter()
        .filter(|c| c["status"] == "completed" || c["status"] == "error")
        .collect();
    let opened = ended
        .iter()
        .find(|c| c.to_string().contains("Opened about:blank"))
        .unwrap_or_else(|| panic!("{ended:#?}\n{}", w.host.sandbox_logs()));
    assert_eq!(opened["status"], "completed", "{opened}");
    assert!(
        ended
            .iter()
            .any(|c| c.to_string().contains("URL: about:blank") && c["status"] == "completed"),
        "{ended:#?}"
    );
}
