//! The lifecycle reliability suite, run unchanged against each provider: the local host
//! (snapshot and restore), Modal through a fake of our Modal app (snapshot and restore
//! through the app's endpoints) and Kubernetes through a fake API server (persistent
//! resume: stop deletes the Pod and keeps the workspace claim). In each, the real
//! supervisor and OpenCode do the work on this machine; the model is scripted. Then each
//! cloud provider's own contract: what it asks for, refusals in words, deletion.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::agent::AgentStack;
use inspect_tests::client::{create_session, get, send, WsClient};
use inspect_tests::fakes::daytona::FakeDaytona;
use inspect_tests::fakes::e2b::FakeE2b;
use inspect_tests::fakes::kubernetes::{self, FakeKubernetes};
use inspect_tests::fakes::modal::{self, FakeModal};
use inspect_tests::fakes::model::Reply;
use inspect_tests::fakes::opencomputer::FakeOpenComputer;
use inspect_tests::fakes::vercel::FakeVercel;
use inspect_tests::host::{opencode_bin, sandbox_groups_of};
use inspect_tests::repo::{commit_all, source_repo};
use reqwest::Method;
use serde_json::{json, Value};
use std::time::Instant;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Provider {
    Local,
    Modal,
    Kubernetes,
    Daytona,
    E2b,
    Vercel,
    OpenComputer,
}

struct World {
    agent: AgentStack,
    cluster: Option<FakeKubernetes>,
    modal: Option<FakeModal>,
    daytona: Option<FakeDaytona>,
    e2b: Option<FakeE2b>,
    vercel: Option<FakeVercel>,
    opencomputer: Option<FakeOpenComputer>,
    repo: tempfile::TempDir,
}

impl World {
    async fn start(provider: Provider, script: Vec<Reply>, vars: &[(&str, &str)]) -> World {
        // The local host also checks local repositories when they are registered.
        let mut parts = AgentStack::prepare(script).await.unwrap();
        let (model, options) = (&parts.model, &mut parts.options);
        // What the sandbox image holds (PATH, OpenCode) and the model's keys.
        let image_env: Vec<(String, String)> = ["PATH", "LANG", "INSPECT_CODE_SERVER_BIN"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .chain([
                (
                    "INSPECT_OPENCODE_BIN".to_owned(),
                    opencode_bin().display().to_string(),
                ),
                ("RUST_LOG".to_owned(), "info".to_owned()),
            ])
            .collect();
        let model_env = vec![
            ("INSPECT_MODEL_BASE_URL".to_owned(), model.base_url.clone()),
            ("INSPECT_MODEL".to_owned(), "inspect/fake-model".to_owned()),
        ];
        let (mut cluster, mut modal, mut daytona) = (None, None, None);
        let (mut e2b, mut vercel, mut opencomputer) = (None, None, None);
        let all_env = || {
            image_env
                .clone()
                .into_iter()
                .chain(model_env.clone())
                .collect()
        };
        match provider {
            Provider::Local => {}
            Provider::Kubernetes => {
                let c = FakeKubernetes::start(image_env, model_env).await.unwrap();
                options.vars.extend(c.worker_vars());
                cluster = Some(c);
            }
            Provider::Modal => {
                let m = FakeModal::start(image_env, model_env).await.unwrap();
                options.vars.extend(m.worker_vars());
                modal = Some(m);
            }
            Provider::Daytona => {
                let d = FakeDaytona::start(image_env.into_iter().chain(model_env).collect())
                    .await
                    .unwrap();
                options.vars.extend(d.worker_vars());
                daytona = Some(d);
            }
            Provider::E2b => {
                let e = FakeE2b::start(all_env()).await.unwrap();
                options.vars.extend(e.worker_vars());
                e2b = Some(e);
            }
            Provider::Vercel => {
                let v = FakeVercel::start(all_env()).await.unwrap();
                options.vars.extend(v.worker_vars());
                vercel = Some(v);
            }
            Provider::OpenComputer => {
                let o = FakeOpenComputer::start(all_env()).await.unwrap();
                options.vars.extend(o.worker_vars());
                opencomputer = Some(o);
            }
        }
        options
            .vars
            .extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let agent = AgentStack::launch(parts).await.unwrap();
        let repo = source_repo();
        inspect_tests::client::register_repo(&agent.stack.base_url, "demo", repo.path())
            .await
            .unwrap();
        World {
            agent,
            cluster,
            modal,
            daytona,
            e2b,
            vercel,
            opencomputer,
            repo,
        }
    }

    fn logs(&self) -> String {
        if let Some(c) = &self.cluster {
            return format!("{}\n{:?}", c.logs(), c.calls());
        }
        if let Some(m) = &self.modal {
            return format!("{}\n{:?}", m.logs(), m.calls());
        }
        if let Some(d) = &self.daytona {
            return format!("{}\n{:?}", d.logs(), d.calls());
        }
        if let Some(e) = &self.e2b {
            return format!("{}\n{:?}", e.logs(), e.calls());
        }
        if let Some(v) = &self.vercel {
            return format!("{}\n{:?}", v.logs(), v.calls());
        }
        if let Some(o) = &self.opencomputer {
            return format!("{}\n{:?}", o.logs(), o.calls());
        }
        self.agent.host.sandbox_logs()
    }

    /// A session whose first prompt, `content`, is on its way: its id and socket.
    async fn prompted(&self, content: &str) -> (String, WsClient) {
        let (id, mut ws) = self.session().await;
        ws.send(json!({"type": "prompt", "content": content}))
            .await
            .unwrap();
        (id, ws)
    }

    async fn session(&self) -> (String, WsClient) {
        let base = &self.agent.stack.base_url;
        let id = create_session(
            base,
            "ann",
            json!({"repoOwner": "local", "repoName": "demo"}),
        )
        .await
        .unwrap();
        let (ws, _) = WsClient::join(base, &self.agent.stack.ws_url(""), &id, "ann")
            .await
            .unwrap();
        (id, ws)
    }

    /// Reads until `n` prompts completed; every message in order.
    async fn until_complete(&self, ws: &mut WsClient, n: usize) -> Vec<Value> {
        let mut seen = vec![];
        let mut done = 0;
        while done < n {
            let m = ws
                .recv_within(120)
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()));
            if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
                done += 1;
            }
            seen.push(m);
        }
        seen
    }
}

impl World {
    /// A world whose first prompt writes `scratch.txt` (ignored by git, so only the
    /// sandbox's disk keeps it) and whose sandboxes stop after 4 idle seconds.
    async fn with_scratch(provider: Provider) -> World {
        World::scratch(provider, &[("SANDBOX_IDLE_TIMEOUT_SECONDS", "4")]).await
    }

    /// A world whose first prompt writes `scratch.txt`, with `vars` for the Worker.
    async fn scratch(provider: Provider, vars: &[(&str, &str)]) -> World {
        let w = World::start(
            provider,
            vec![
                Reply::tool(
                    "write",
                    json!({"filePath": "scratch.txt", "content": "keep me\n"}),
                ),
                Reply::text("Wrote it."),
            ],
            vars,
        )
        .await;
        std::fs::write(w.repo.path().join(".gitignore"), "scratch.txt\n").unwrap();
        commit_all(w.repo.path(), "ignore scratch");
        w
    }

    /// Waits for the clients to hear that the sandbox stopped.
    async fn until_stopped(&self, ws: &mut WsClient) {
        loop {
            let m = ws
                .recv_within(60)
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()));
            if m["type"] == "sandbox_status" && m["status"] == "stopped" {
                break;
            }
        }
    }

    /// A prompt that reads `scratch.txt` back, run to the end: every message.
    async fn read_scratch(&self, ws: &mut WsClient) -> Vec<Value> {
        self.ask_to_read_scratch(ws).await;
        self.until_complete(ws, 1).await
    }

    /// Sends the prompt that reads the scratch file back (the model scripted for it).
    async fn ask_to_read_scratch(&self, ws: &mut WsClient) {
        self.agent.model.push(vec![
            Reply::tool(
                "bash",
                json!({"command": "cat scratch.txt", "description": "read it"}),
            ),
            Reply::text("Still there."),
        ]);
        ws.send(json!({"type": "prompt", "content": "read scratch"}))
            .await
            .unwrap();
    }

    /// A session whose sandbox exposes port 3000, its first prompt run to the end: its id,
    /// its socket and every message.
    async fn run_with_port(&self) -> (String, WsClient, Vec<Value>) {
        let id = create_session(
            &self.agent.stack.base_url,
            "ann",
            json!({"repoOwner": "local", "repoName": "demo", "sandbox": {"tunnelPorts": [3000]}}),
        )
        .await
        .unwrap();
        let (mut ws, _) = WsClient::join(
            &self.agent.stack.base_url,
            &self.agent.stack.ws_url(""),
            &id,
            "ann",
        )
        .await
        .unwrap();
        ws.send(json!({"type": "prompt", "content": "go"}))
            .await
            .unwrap();
        let seen = self.until_complete(&mut ws, 1).await;
        (id, ws, seen)
    }

    /// Deletes the session; the provider must have let it go.
    async fn delete_session(&self, id: &str) {
        let gone = inspect_tests::client::send(
            reqwest::Method::DELETE,
            &self.agent.stack.url(&format!("/sessions/{id}")),
            None,
        )
        .await
        .unwrap();
        assert!(gone.status < 300, "{}", gone.body);
    }

    /// Reads until the session says a sandbox error; its words.
    async fn first_sandbox_error(&self, ws: &mut WsClient) -> String {
        loop {
            let m = ws
                .recv_within(120)
                .await
                .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()));
            if m["type"] == "sandbox_error" {
                return m["error"].as_str().unwrap_or_default().to_owned();
            }
        }
    }

    /// Reads until the prompt completes successfully; the sandbox errors said on the way.
    async fn errors_until_success(&self, ws: &mut WsClient) -> Vec<String> {
        let mut errors = vec![];
        loop {
            let m = ws
                .recv_within(120)
                .await
                .unwrap_or_else(|e| panic!("{e}\n{errors:#?}\n{}", self.logs()));
            if m["type"] == "sandbox_error" {
                errors.push(m["error"].as_str().unwrap_or_default().to_owned());
            }
            if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
                assert_eq!(m["event"]["success"], true, "{m}\n{errors:#?}");
                return errors;
            }
        }
    }
}

fn events<'a>(seen: &'a [Value], kind: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|m| m["type"] == "sandbox_event" && m["event"]["type"] == kind)
        .map(|m| &m["event"])
        .collect()
}

// ---------------------------------------------------------------------------------------
// The scenarios: the same code for every provider.

/// Left alone, the sandbox stops; the next prompt finds the uncommitted file it left,
/// whether the provider restores a snapshot or resumes the stopped sandbox.
async fn idle_stop_and_back(w: &World, provider: Provider) {
    let (id, mut ws) = w.prompted("write scratch").await;
    w.until_complete(&mut ws, 1).await;
    w.until_stopped(&mut ws).await;
    // A provider that snapshots may still be saving the last one: wait for it to end.
    let t = Instant::now();
    loop {
        let s = get(&w.agent.stack.url(&format!("/sessions/{id}")))
            .await
            .unwrap();
        if s.body["sandboxStatus"] == "stopped" {
            break;
        }
        assert!(t.elapsed().as_secs() < 60, "{}", s.body);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    let seen = w.read_scratch(&mut ws).await;
    // The clients were told which way it came back.
    let coming = match provider {
        Provider::Local | Provider::Modal | Provider::Vercel => "restoring",
        Provider::Kubernetes | Provider::Daytona | Provider::E2b | Provider::OpenComputer => {
            "resuming"
        }
    };
    assert!(
        seen.iter()
            .any(|m| m["type"] == "sandbox_status" && m["status"] == coming),
        "no {coming}: {seen:#?}"
    );
    let call = events(&seen, "tool_call")
        .into_iter()
        .find(|c| c["status"] == "completed")
        .cloned()
        .unwrap_or_else(|| panic!("no tool call: {seen:#?}\n{}", w.logs()));
    assert!(
        call["output"].as_str().unwrap().contains("keep me"),
        "{call}\n{}",
        w.logs()
    );
    assert_eq!(events(&seen, "execution_complete")[0]["success"], true);
    // The boot steps say where the workspace came from.
    let setup = events(&seen, "boot_step")
        .into_iter()
        .find(|e| e["step"] == "setup" && e["status"] != "started")
        .cloned()
        .unwrap_or_default();
    assert_eq!(setup["status"], "skipped", "{setup}");
    let detail = setup["detail"].as_str().unwrap_or_default();
    match provider {
        Provider::Local | Provider::Modal | Provider::Vercel => {
            assert!(detail.starts_with("restored from the snapshot"), "{detail}");
            let restored = seen
                .iter()
                .find(|m| m["type"] == "sandbox_restored")
                .unwrap_or_else(|| panic!("no sandbox_restored: {seen:#?}"));
            assert!(detail.ends_with(restored["snapshotId"].as_str().unwrap()));
            if let Some(v) = &w.vercel {
                // A snapshot ends a Vercel sandbox: one was taken, when it stopped, not
                // after the first turn.
                assert_eq!(v.snapshots().len(), 1, "{:?}", v.calls());
            }
        }
        Provider::Daytona => {
            assert_eq!(detail, "resumed on the stopped sandbox's own workspace");
            // The same Daytona sandbox, started twice: its machine kept its identity.
            let d = w.daytona.as_ref().unwrap();
            assert_eq!(d.sandboxes().len(), 1, "{:#?}", d.sandboxes());
            assert_eq!(d.boots().values().copied().collect::<Vec<_>>(), vec![2]);
        }
        Provider::OpenComputer => {
            assert_eq!(detail, "resumed on the stopped sandbox's own workspace");
            // The same sandbox, hibernated and woken; a checkpoint after each turn.
            let o = w.opencomputer.as_ref().unwrap();
            assert_eq!(o.sandboxes().len(), 1, "{:#?}", o.sandboxes());
            assert_eq!(o.checkpoints().len(), 2, "{:?}", o.calls());
            let calls = o.calls();
            assert!(calls.iter().any(|c| c.ends_with("/hibernate")), "{calls:?}");
            assert!(calls.iter().any(|c| c.ends_with("/wake")), "{calls:?}");
        }
        Provider::E2b => {
            assert_eq!(detail, "resumed on the stopped sandbox's own workspace");
            // The same E2B sandbox, paused and connected to again; the supervisor started
            // in it twice (the first one ended with the idle shutdown), each start checked
            // by a second command (a loaded machine may need the resumed start tried again).
            let e = w.e2b.as_ref().unwrap();
            assert_eq!(e.sandboxes().len(), 1, "{:#?}", e.sandboxes());
            let commands = e.commands()[0];
            assert!(commands >= 4 && commands & 1 == 0, "{:?}", e.calls());
            let calls = e.calls();
            assert!(calls.iter().any(|c| c.ends_with("/pause")), "{calls:?}");
            assert!(calls.iter().any(|c| c.ends_with("/connect")), "{calls:?}");
        }
        Provider::Kubernetes => {
            assert_eq!(detail, "resumed on the stopped sandbox's own workspace");
            let c = w.cluster.as_ref().unwrap();
            // One claim all along; the stopped sandbox's Pod and Secret are gone.
            assert_eq!(c.objects("persistentvolumeclaims").len(), 1);
            assert_eq!(c.objects("pods").len(), 1, "{:#?}", c.objects("pods"));
            assert_eq!(
                c.objects("secrets").len(),
                2,
                "the model's and the live sandbox's"
            );
        }
    }
}

/// A sandbox that dies mid-turn fails that prompt in words, soon; the next prompt gets a
/// sandbox: where the provider keeps sandboxes, the dead one is resumed (its machine started
/// again, or its workspace given a new machine; one with nothing left is replaced), else a
/// new one.
async fn killed_mid_turn(w: &World, provider: Provider) {
    w.agent.model.push(vec![Reply::tool(
        "bash",
        json!({"command": "sleep 120", "description": "long"}),
    )]);
    let (id, mut ws) = w.prompted("run long").await;
    let mut first = String::new();
    loop {
        let m = ws
            .recv_within(120)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
        if m["type"] == "sandbox_spawning" {
            first = m["sandboxId"].as_str().unwrap().to_owned();
        }
        if m["event"]["type"] == "tool_call" && m["event"]["status"] == "running" {
            break;
        }
    }
    let groups = sandbox_groups_of(&id);
    assert_eq!(groups.len(), 1, "{groups:?}");
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(groups[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let t = Instant::now();
    let seen = w.until_complete(&mut ws, 1).await;
    let done = events(&seen, "execution_complete");
    assert_eq!(done[0]["success"], false);
    assert!(
        done[0]["error"].as_str().unwrap().contains("gone"),
        "{}",
        done[0]
    );
    assert!(
        t.elapsed().as_secs() < 60,
        "noticed after {:?}",
        t.elapsed()
    );

    w.agent.model.push(vec![Reply::text("Recovered.")]);
    ws.send(json!({"type": "prompt", "content": "again"}))
        .await
        .unwrap();
    let (second, seen) = loop {
        let m = ws
            .recv_within(120)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
        if m["type"] == "sandbox_spawning" {
            let sb = m["sandboxId"].as_str().unwrap().to_owned();
            break (sb, w.until_complete(&mut ws, 1).await);
        }
    };
    let resumed = seen
        .iter()
        .any(|m| m["type"] == "sandbox_status" && m["status"] == "resuming");
    match provider {
        Provider::Local | Provider::Modal | Provider::Vercel => {
            assert_ne!(first, second);
            assert!(!resumed, "{seen:#?}");
        }
        // A new Pod on the claim: a new sandbox on the old workspace.
        Provider::Kubernetes => {
            assert_ne!(first, second);
            assert!(resumed, "{seen:#?}");
        }
        // In place: the same identity, unless the machine is gone and replaced.
        Provider::Daytona | Provider::E2b | Provider::OpenComputer => {
            assert!(resumed, "{seen:#?}");
        }
    }
    assert_eq!(events(&seen, "execution_complete")[0]["success"], true);
}

/// The control plane restarts mid-turn: the turn finishes on the reconnected sandbox, and
/// nothing is lost or doubled.
async fn control_plane_restart(w: &mut World) {
    w.agent.model.push(vec![
        Reply::tool(
            "bash",
            json!({"command": "sleep 8 && echo slept-through", "description": "wait"}),
        ),
        Reply::text("Done after the restart."),
    ]);
    let (id, mut ws) = w.prompted("wait through a restart").await;
    loop {
        let m = ws
            .recv_within(120)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
        if m["event"]["type"] == "tool_call" && m["event"]["status"] == "running" {
            break;
        }
    }
    drop(ws);
    w.agent.stack.restart().await.unwrap();
    let (mut ws, sub) = WsClient::join(
        &w.agent.stack.base_url,
        &w.agent.stack.ws_url(""),
        &id,
        "ann",
    )
    .await
    .unwrap();
    let already = sub["timeline"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "execution_complete");
    if !already {
        w.until_complete(&mut ws, 1).await;
    }
    let events = get(&w
        .agent
        .stack
        .url(&format!("/sessions/{id}/events?limit=500")))
    .await
    .unwrap();
    let list = events.body["events"].as_array().unwrap();
    let kinds = |k: &str| list.iter().filter(|e| e["type"] == k).count();
    assert_eq!(kinds("execution_complete"), 1, "{list:#?}");
    assert_eq!(kinds("user_message"), 1);
    assert_eq!(kinds("tool_call"), 1, "tool calls are upserted by call id");
    let done = list
        .iter()
        .find(|e| e["type"] == "execution_complete")
        .unwrap();
    assert_eq!(done["success"], true, "{done}");
    let tool = list.iter().find(|e| e["type"] == "tool_call").unwrap();
    assert!(tool["output"].as_str().unwrap().contains("slept-through"));
    let seqs: Vec<i64> = list.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|p| p[0] < p[1]));
}

/// The three scenarios on one stack, one after another, each in its own session (a stack's
/// start is ~7 CPU-s; three a provider were a seventh of the test command's stacks): the
/// first's sandboxes stop after 4 idle seconds, which the others, busy mid-turn, never are.
/// The restart goes last: it would reconnect the others' sandboxes under them.
async fn lifecycle(provider: Provider) {
    let mut w = World::with_scratch(provider).await;
    idle_stop_and_back(&w, provider).await;
    killed_mid_turn(&w, provider).await;
    control_plane_restart(&mut w).await;
}

#[tokio::test]
async fn local_lifecycle() {
    lifecycle(Provider::Local).await;
}

#[tokio::test]
async fn modal_lifecycle() {
    lifecycle(Provider::Modal).await;
}

#[tokio::test]
async fn daytona_lifecycle() {
    lifecycle(Provider::Daytona).await;
}

#[tokio::test]
async fn e2b_lifecycle() {
    lifecycle(Provider::E2b).await;
}

#[tokio::test]
async fn vercel_lifecycle() {
    lifecycle(Provider::Vercel).await;
}

#[tokio::test]
async fn opencomputer_lifecycle() {
    lifecycle(Provider::OpenComputer).await;
}

#[tokio::test]
async fn kubernetes_lifecycle() {
    lifecycle(Provider::Kubernetes).await;
}

// ---------------------------------------------------------------------------------------
// The Kubernetes provider's contract.

#[tokio::test]
async fn kubernetes_objects_refusals_and_deletion() {
    let w = World::start(
        Provider::Kubernetes,
        vec![Reply::text("First."), Reply::text("Second.")],
        &[],
    )
    .await;
    let c = w.cluster.as_ref().unwrap();

    // Health asks the cluster.
    let h = get(&w.agent.stack.url("/health")).await.unwrap();
    let part = &h.body["sandboxProvider"];
    assert_eq!(part["ok"], true, "{}", h.body);
    assert!(
        part["detail"]
            .as_str()
            .unwrap()
            .contains("kubernetes namespace inspect-sandboxes"),
        "{part}"
    );

    // A quota that is used up: the session waits and says why, then runs.
    c.fail_next(
        "POST",
        "pods",
        403,
        "Forbidden",
        "pods \"x\" is forbidden: exceeded quota: sandboxes, requested: pods=1, used: pods=10, limited: pods=10",
    );
    let (id, mut ws) = w.prompted("first").await;
    let mut said = None;
    let mut seen = vec![];
    loop {
        let m = ws
            .recv_within(120)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{seen:#?}\n{}", w.logs()));
        if m["type"] == "sandbox_status" && m["status"] == "waiting" {
            said = m["error"].as_str().map(str::to_owned);
        }
        let end = m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete";
        seen.push(m);
        if end {
            break;
        }
    }
    let said = said.unwrap_or_else(|| panic!("no waiting status: {seen:#?}"));
    assert!(said.contains("exceeded quota"), "{said}");
    assert_eq!(events(&seen, "execution_complete")[0]["success"], true);

    // The objects: the token only in the Secret; the Pod least-privileged on the claim.
    let pods = c.objects("pods");
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    let spec = &pod["spec"];
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        spec["containers"][0]["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    assert_eq!(spec["containers"][0]["image"], kubernetes::IMAGE);
    assert_eq!(
        pod["metadata"]["labels"]["open-inspect.dev/session"],
        id.as_str()
    );
    assert!(spec["activeDeadlineSeconds"].as_u64().unwrap() > 0);
    let secrets = c.objects("secrets");
    let env = secrets
        .iter()
        .find(|s| s["metadata"]["name"] != kubernetes::MODEL_SECRET)
        .unwrap();
    assert!(env["data"]["INSPECT_SANDBOX_TOKEN"].is_string());
    assert!(!pod.to_string().contains("INSPECT_SANDBOX_TOKEN\",\"value"));

    let s = get(&w.agent.stack.url(&format!("/sessions/{id}")))
        .await
        .unwrap();
    assert_eq!(s.body["sandboxStatus"], "ready");

    // The namespace holds one workspace claim. A second session finds it full while the
    // first one's Pod mounts it: it waits. Archiving the first gives its claim back.
    c.set_quota("persistentvolumeclaims", 1);
    let (second, mut ws2) = w.prompted("second").await;
    loop {
        let m = ws2.recv_within(60).await.unwrap();
        if m["type"] == "sandbox_status" && m["status"] == "waiting" {
            assert!(
                m["error"]
                    .as_str()
                    .unwrap()
                    .contains("persistentvolumeclaims"),
                "{m}"
            );
            break;
        }
    }
    let r = send(
        Method::POST,
        &w.agent.stack.url(&format!("/sessions/{id}/archive")),
        None,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let claims = c.objects("persistentvolumeclaims");
    assert!(
        claims
            .iter()
            .all(|cl| cl["metadata"]["labels"]["open-inspect.dev/session"] != id.as_str()),
        "the archived session's claim is given back: {claims:#?}"
    );
    let mut seen2 = vec![];
    loop {
        let m = ws2
            .recv_within(120)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{seen2:#?}\n{}", w.logs()));
        let end = m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete";
        seen2.push(m);
        if end {
            break;
        }
    }
    assert_eq!(events(&seen2, "execution_complete")[0]["success"], true);

    // Deleting the session removes every object it had in the cluster.
    w.delete_session(&second).await;
    w.delete_session(&id).await;
    for kind in ["pods", "persistentvolumeclaims", "services", "ingresses"] {
        assert!(c.objects(kind).is_empty(), "{kind}: {:#?}", c.objects(kind));
    }
    let left: Vec<Value> = c.objects("secrets");
    assert_eq!(left.len(), 1, "only the model's: {left:#?}");
}

#[tokio::test]
async fn kubernetes_failures_say_why_and_retry_only_what_is_transient() {
    let w = World::start(
        Provider::Kubernetes,
        vec![Reply::text("Ran after the outage.")],
        &[],
    )
    .await;
    let c = w.cluster.as_ref().unwrap();
    // The API server is briefly down: the spawn fails, says so, and is retried.
    c.fail_next(
        "POST",
        "pods",
        503,
        "ServiceUnavailable",
        "etcdserver: leader changed",
    );
    let (_id, mut ws) = w.prompted("go").await;
    let errors = w.errors_until_success(&mut ws).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("leader changed") && e.contains("transient")),
        "{errors:#?}"
    );
    // The refused attempt left nothing behind: one Secret, one claim, the running ones'.
    let names = |kind: &str| -> Vec<String> {
        c.objects(kind)
            .iter()
            .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
            .filter(|n| n.starts_with("inspect-"))
            .collect()
    };
    assert_eq!(names("secrets").len(), 1, "{:?}", names("secrets"));
    assert_eq!(
        names("persistentvolumeclaims").len(),
        1,
        "{:?}",
        names("persistentvolumeclaims")
    );

    // An object the API server refuses (422) fails the spawn with its words.
    c.fail_next(
        "POST",
        "persistentvolumeclaims",
        422,
        "Invalid",
        "PersistentVolumeClaim \"x\" is invalid: spec.storageClassName: not found",
    );
    w.agent.model.push(vec![Reply::text("never")]);
    let (_id2, mut ws2) = w.prompted("go").await;
    let error = w.first_sandbox_error(&mut ws2).await;
    assert!(
        error.contains("422") && error.contains("storageClassName"),
        "{error}"
    );
    assert!(!error.contains("transient"), "{error}");
}

#[tokio::test]
async fn kubernetes_a_pod_that_cannot_start_is_reported_in_its_words() {
    let w = World::start(
        Provider::Kubernetes,
        vec![Reply::text("never")],
        &[(
            "K8S_SANDBOX_IMAGE",
            "registry.example.com/open-inspect/no-such-image:0",
        )],
    )
    .await;
    let (_id, mut ws) = w.prompted("go").await;
    let t = Instant::now();
    let error = w.first_sandbox_error(&mut ws).await;
    assert!(
        error.contains("ErrImagePull") && error.contains("no-such-image:0: not found"),
        "{error}"
    );
    assert!(
        t.elapsed().as_secs() < 60,
        "said after {:?}, not at the 120 s connect deadline",
        t.elapsed()
    );
}

/// A namespace the token's Role is not bound in (a typo, one never made) is refused by
/// RBAC before anything is looked up: health says which setting to check. The fake
/// answered 404 before, which no real cluster does for a namespaced Role.
#[tokio::test]
async fn kubernetes_health_names_a_namespace_the_token_may_not_use() {
    let w = World::start(
        Provider::Kubernetes,
        vec![],
        &[("K8S_NAMESPACE", "inspect-sandbox")],
    )
    .await;
    let h = get(&w.agent.stack.url("/health")).await.unwrap();
    let part = &h.body["sandboxProvider"];
    assert_eq!(part["ok"], false, "{}", h.body);
    let detail = part["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("may not list pods in namespace inspect-sandbox")
            && detail.contains("K8S_NAMESPACE"),
        "{part}"
    );
}

#[tokio::test]
async fn a_provider_missing_its_settings_says_which() {
    let vars = vec![
        ("SANDBOX_PROVIDER".to_owned(), "kubernetes".to_owned()),
        (
            "K8S_API_URL".to_owned(),
            "https://k8s.example.com".to_owned(),
        ),
    ];
    let agent = AgentStack::start(vec![], vars).await.unwrap();
    let stack = &agent.stack;
    let h = get(&stack.url("/health")).await.unwrap();
    let part = &h.body["sandboxProvider"];
    assert_eq!(part["configured"], false, "{part}");
    let detail = part["detail"].as_str().unwrap();
    assert!(
        detail.contains("missing K8S_TOKEN, K8S_NAMESPACE, K8S_SANDBOX_IMAGE"),
        "{detail}"
    );
}

#[tokio::test]
async fn kubernetes_ports_get_an_ingress_and_their_urls_reach_the_sandbox() {
    let w = World::start(Provider::Kubernetes, vec![Reply::text("Serving.")], &[]).await;
    let hooks = w.repo.path().join(".openinspect");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(hooks.join("start.sh"), "grep TUNNEL_3000 ../.tunnels.env\n").unwrap();
    commit_all(w.repo.path(), "start hook");
    let base = w.agent.stack.base_url.clone();
    let id = create_session(
        &base,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo", "sandbox": {"tunnelPorts": [3000]}}),
    )
    .await
    .unwrap();
    let (mut ws, _) = WsClient::join(&base, &w.agent.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "serve"}))
        .await
        .unwrap();
    let seen = w.until_complete(&mut ws, 1).await;
    let urls = seen
        .iter()
        .find(|m| m["type"] == "tunnel_urls")
        .unwrap_or_else(|| panic!("no tunnel_urls: {seen:#?}"));
    let url = urls["tunnelUrls"]["3000"].as_str().unwrap();
    // The Ingress exposes the gate in front of port 3000, not the port itself.
    let gate = gate_port_of(url.trim_start_matches("https://"));
    assert!(
        url.starts_with(&format!("https://{gate}-inspect-sb-"))
            && url.ends_with(".sandboxes.example.test"),
        "{url}"
    );
    // The supervisor asked the control plane (there is no provider-written file here) and
    // wrote .tunnels.env for the start hook.
    let start = seen
        .iter()
        .find(|m| {
            m["event"]["type"] == "boot_step"
                && m["event"]["step"] == "start"
                && m["event"]["status"] != "started"
        })
        .unwrap();
    assert_eq!(
        start["event"]["status"],
        "succeeded",
        "{start}\n{}",
        w.logs()
    );
    assert!(
        start["event"]["output"].as_str().unwrap().contains(url),
        "{start}"
    );
    let c = w.cluster.as_ref().unwrap();
    let ingress = &c.objects("ingresses")[0];
    assert_eq!(
        ingress["spec"]["rules"][0]["host"],
        url.trim_start_matches("https://")
    );
    let service = &c.objects("services")[0];
    assert_eq!(service["spec"]["ports"][0]["port"], gate);
    assert_eq!(
        service["spec"]["ports"].as_array().unwrap().len(),
        4,
        "the port's gate, the editor's and the desktop's two"
    );
    // Without the sandbox's credentials nobody else reads them that way.
    let forged = reqwest::Client::new()
        .get(w.agent.stack.url(&format!("/sessions/{id}/tunnel-urls")))
        .bearer_auth("not-the-token")
        .header("X-Sandbox-ID", "sb_other")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status().as_u16(), 401);
}

// ---------------------------------------------------------------------------------------
// The Modal provider's contract.

#[tokio::test]
async fn modal_health_refusals_retries_and_deletion() {
    let w = World::start(
        Provider::Modal,
        vec![Reply::text("Ran after the outage.")],
        &[],
    )
    .await;
    let m = w.modal.as_ref().unwrap();
    let h = get(&w.agent.stack.url("/health")).await.unwrap();
    let part = &h.body["sandboxProvider"];
    assert_eq!(part["ok"], true, "{}", h.body);
    assert_eq!(
        part["detail"],
        format!("modal app with runtime {}", modal::RUNTIME)
    );

    // Modal is briefly unavailable: said, retried, then the prompt runs.
    m.fail_next(
        "api-create-sandbox",
        503,
        json!({"detail": "modal is restarting"}),
    );
    let (id, mut ws) = w.prompted("go").await;
    let errors = w.errors_until_success(&mut ws).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("modal is restarting") && e.contains("transient")),
        "{errors:#?}"
    );
    // Every call was signed and the sandbox ran; a snapshot followed the turn.
    assert_eq!(m.running().len(), 1);
    let t = Instant::now();
    while m.images().is_empty() {
        assert!(t.elapsed().as_secs() < 30, "no snapshot after the turn");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // Deleting the session terminates its sandbox.
    w.delete_session(&id).await;
    assert!(m.running().is_empty());
    assert!(m.calls().contains(&"api-delete-session".to_owned()));
}

#[tokio::test]
async fn modal_builds_a_prebuilt_image_and_a_session_starts_from_it() {
    let w = World::start(Provider::Modal, vec![Reply::text("From the image.")], &[]).await;
    let m = w.modal.as_ref().unwrap();
    std::fs::create_dir_all(w.repo.path().join(".openinspect")).unwrap();
    std::fs::write(
        w.repo.path().join(".openinspect/setup.sh"),
        "echo set up > ../.setup-mark\necho setup ran\n",
    )
    .unwrap();
    commit_all(w.repo.path(), "setup hook");
    let r = inspect_tests::client::send(
        reqwest::Method::POST,
        &w.agent.stack.url("/images/builds"),
        Some(json!({"scope": {"kind": "repository", "owner": "local", "name": "demo"}})),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    let t = Instant::now();
    let build = loop {
        let list = get(&w.agent.stack.url("/images?repository=local/demo"))
            .await
            .unwrap();
        let newest = list.body["builds"][0].clone();
        if newest["status"] != "building" {
            break newest;
        }
        assert!(t.elapsed().as_secs() < 120, "{}\n{}", list.body, w.logs());
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    };
    assert_eq!(build["status"], "ready", "{build}\n{}", w.logs());
    let image = build["imageId"].as_str().unwrap().to_owned();
    assert!(m.images().contains(&image));
    assert_eq!(build["runtimeVersion"], modal::RUNTIME);

    let (_id, mut ws) = w.prompted("go").await;
    let seen = w.until_complete(&mut ws, 1).await;
    assert_eq!(events(&seen, "execution_complete")[0]["success"], true);
    let setup = events(&seen, "boot_step")
        .into_iter()
        .find(|e| e["step"] == "setup" && e["status"] != "started")
        .cloned()
        .unwrap();
    assert_eq!(
        setup["detail"],
        format!("done when the prebuilt image {image} was built"),
        "{setup}"
    );
    assert!(
        m.calls().iter().any(|c| c == "api-restore-sandbox"),
        "{:?}",
        m.calls()
    );
}

#[tokio::test]
async fn modal_with_the_wrong_secret_is_refused_in_words() {
    let m = FakeModal::start(vec![], vec![]).await.unwrap();
    let mut vars = m.worker_vars();
    vars.push(("MODAL_API_SECRET".to_owned(), "not-the-secret".to_owned()));
    let agent = AgentStack::start(vec![Reply::text("never")], vars)
        .await
        .unwrap();
    let stack = &agent.stack;
    let repo = source_repo();
    inspect_tests::client::register_repo(&stack.base_url, "demo", repo.path())
        .await
        .unwrap();
    let id = create_session(
        &stack.base_url,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo"}),
    )
    .await
    .unwrap();
    let (mut ws, _) = WsClient::join(&stack.base_url, &stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "go"}))
        .await
        .unwrap();
    let error = loop {
        let msg = ws.recv_within(120).await.unwrap();
        if msg["type"] == "sandbox_error" {
            break msg["error"].as_str().unwrap_or_default().to_owned();
        }
    };
    assert!(
        error.contains("401") && error.contains("bad token"),
        "{error}"
    );
    assert!(!error.contains("transient"), "{error}");
    assert!(m.running().is_empty());
}

// ---------------------------------------------------------------------------------------
// The Daytona provider's contract.

#[tokio::test]
async fn daytona_quota_ports_and_deletion() {
    let w = World::start(Provider::Daytona, vec![Reply::text("Ran.")], &[]).await;
    let d = w.daytona.as_ref().unwrap();
    let h = get(&w.agent.stack.url("/health")).await.unwrap();
    assert_eq!(h.body["sandboxProvider"]["ok"], true, "{}", h.body);

    // A used-up quota waits and says so; then the sandbox is made, with its port's URL.
    // In Daytona's words, as its API answers an organization over its usage quota: a 400.
    d.fail_next(
        "POST /sandbox",
        400,
        "Total CPU limit exceeded. Maximum allowed: 4.\nTo increase concurrency limits, upgrade your organization's Tier",
    );
    let (id, _ws, seen) = w.run_with_port().await;
    let waiting = seen
        .iter()
        .find(|m| m["type"] == "sandbox_status" && m["status"] == "waiting")
        .unwrap_or_else(|| panic!("no waiting: {seen:#?}"));
    assert!(
        waiting["error"]
            .as_str()
            .unwrap()
            .contains("Total CPU limit exceeded"),
        "{waiting}"
    );
    let urls = seen.iter().find(|m| m["type"] == "tunnel_urls").unwrap();
    assert!(
        urls["tunnelUrls"]["3000"]
            .as_str()
            .unwrap()
            .ends_with(".proxy.daytona.fake"),
        "{urls}"
    );
    // The URL lives as long as Daytona signs one (24 h; its own default is a minute), not
    // 65 minutes from the start.
    let lifetimes = d.preview_lifetimes();
    assert!(
        !lifetimes.is_empty() && lifetimes.iter().all(|s| *s == 86_400),
        "preview URLs live {lifetimes:?} s"
    );
    assert_eq!(events(&seen, "execution_complete")[0]["success"], true);
    let made = &d.sandboxes()[0];
    assert_eq!(made["public"], false);
    assert_eq!(made["labels"]["openinspect_session_id"], id.as_str());

    // Deleting the session deletes its Daytona sandbox.
    w.delete_session(&id).await;
    assert!(d.sandboxes().is_empty());
}

// ---------------------------------------------------------------------------------------
// The E2B provider's contract.

#[tokio::test]
async fn e2b_quota_envd_failures_ports_and_deletion() {
    let w = World::start(Provider::E2b, vec![Reply::text("Ran.")], &[]).await;
    let e = w.e2b.as_ref().unwrap();
    let h = get(&w.agent.stack.url("/health")).await.unwrap();
    assert_eq!(h.body["sandboxProvider"]["ok"], true, "{}", h.body);
    assert!(
        h.body["sandboxProvider"]["detail"]
            .as_str()
            .unwrap()
            .starts_with("e2b with 0 sandboxes"),
        "{}",
        h.body
    );

    // Too many sandboxes for the plan (429): the session waits and says so; then the
    // sandbox is made, its port's URL built the way E2B routes them.
    e.fail_next(
        "POST /sandboxes",
        429,
        "You have reached the maximum number of concurrent sandboxes (20)",
    );
    let (id, _ws, seen) = w.run_with_port().await;
    let waiting = seen
        .iter()
        .find(|m| m["type"] == "sandbox_status" && m["status"] == "waiting")
        .unwrap_or_else(|| panic!("no waiting: {seen:#?}"));
    assert!(
        waiting["error"]
            .as_str()
            .unwrap()
            .contains("maximum number of concurrent sandboxes"),
        "{waiting}"
    );
    let made = e.sandboxes()[0].clone();
    let e2b_id = made["sandboxID"].as_str().unwrap();
    let urls = seen.iter().find(|m| m["type"] == "tunnel_urls").unwrap();
    let url = urls["tunnelUrls"]["3000"].as_str().unwrap();
    let gate = gate_port_of(url.trim_start_matches("https://"));
    assert_eq!(url, format!("https://{gate}-{e2b_id}.e2b.fake"), "{urls}");
    assert_eq!(events(&seen, "execution_complete")[0]["success"], true);
    assert_eq!(made["secure"], true);
    assert_eq!(made["autoPause"], true);
    assert_eq!(made["metadata"]["openinspect_session_id"], id.as_str());
    // The supervisor was started by a process call, with the access token E2B gave.
    assert!(
        e.calls()
            .contains(&format!("envd {e2b_id} POST /process.Process/Start")),
        "{:?}",
        e.calls()
    );

    // envd cannot start the supervisor: the sandbox is killed, the failure said in words
    // and retried as transient; the retry runs.
    e.fail_next("envd ", 502, "The sandbox is not ready");
    w.agent
        .model
        .push(vec![Reply::text("Ran on the second try.")]);
    let (id2, mut ws2) = w.prompted("go").await;
    let errors = w.errors_until_success(&mut ws2).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("the supervisor did not start")
                && e.contains("not ready")
                && e.contains("transient")),
        "{errors:#?}"
    );
    let of_session2 = |e: &FakeE2b| {
        e.sandboxes()
            .into_iter()
            .filter(|s| s["metadata"]["openinspect_session_id"] == id2.as_str())
            .map(|s| s["state"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        of_session2(e),
        vec!["running".to_owned()],
        "the failed one was killed"
    );

    // A refusal (400) fails the spawn in E2B's words, not as transient.
    e.fail_next("POST /sandboxes", 400, "invalid timeout for this plan");
    w.agent.model.push(vec![Reply::text("never")]);
    let (id3, mut ws3) = w.prompted("go").await;
    let error = w.first_sandbox_error(&mut ws3).await;
    assert!(
        error.contains("e2b answered 400: invalid timeout for this plan"),
        "{error}"
    );
    assert!(!error.contains("transient"), "{error}");

    // A Hobby plan allows one hour: the two hours asked for are refused in E2B's words
    // (a 400), and the sandbox is made for the plan's longest lifetime instead.
    e.set_plan_hours(1);
    w.agent
        .model
        .push(vec![Reply::text("Ran within the plan.")]);
    let (id4, mut ws4) = w.prompted("go").await;
    let seen = w.until_complete(&mut ws4, 1).await;
    assert_eq!(events(&seen, "execution_complete")[0]["success"], true);
    let made: Vec<Value> = e
        .sandboxes()
        .into_iter()
        .filter(|s| s["metadata"]["openinspect_session_id"] == id4.as_str())
        .collect();
    assert_eq!(made.len(), 1, "{made:#?}");
    assert_eq!(made[0]["timeout"], 3600, "{}", made[0]);

    // Deleting a session kills its E2B sandboxes.
    w.delete_session(&id).await;
    w.delete_session(&id2).await;
    w.delete_session(&id3).await;
    w.delete_session(&id4).await;
    assert!(e.sandboxes().is_empty(), "{:#?}", e.sandboxes());
}

// ---------------------------------------------------------------------------------------
// The Vercel provider's contract.

#[tokio::test]
async fn vercel_routes_refusals_snapshots_and_deletion() {
    let w = World::start(
        Provider::Vercel,
        vec![Reply::text("Ran.")],
        &[("SANDBOX_IDLE_TIMEOUT_SECONDS", "4")],
    )
    .await;
    let v = w.vercel.as_ref().unwrap();
    let h = get(&w.agent.stack.url("/health")).await.unwrap();
    assert_eq!(h.body["sandboxProvider"]["ok"], true, "{}", h.body);

    // Rate-limited (429): waits and says so; then runs, with Vercel's route as the URL.
    v.fail_next("POST /v2/sandboxes", 429, "Too many sandboxes are running");
    let (id, mut ws, seen) = w.run_with_port().await;
    assert!(
        seen.iter().any(|m| m["type"] == "sandbox_status"
            && m["status"] == "waiting"
            && m["error"].as_str().unwrap_or("").contains("rate_limited")),
        "{seen:#?}"
    );
    let urls = seen.iter().find(|m| m["type"] == "tunnel_urls").unwrap();
    let url = urls["tunnelUrls"]["3000"].as_str().unwrap();
    let gate: u16 = url
        .trim_end_matches(".vercel.run")
        .rsplit('-')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    assert!(
        url.starts_with("https://sb_") && (40_000..64_000).contains(&gate),
        "the gate in front of 3000: {url}"
    );
    // No snapshot after the turn: it would have ended the sandbox.
    assert!(v.snapshots().is_empty(), "{:?}", v.calls());
    assert_eq!(v.sessions()[0]["session"]["status"], "running");

    // Idle: one snapshot, and the sandbox is no longer running.
    w.until_stopped(&mut ws).await;
    let t = Instant::now();
    while v.snapshots().is_empty() {
        assert!(t.elapsed().as_secs() < 60, "{:?}", v.calls());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(v.snapshots().len(), 1);
    assert!(v
        .sessions()
        .iter()
        .all(|s| s["session"]["status"] == "stopped"));

    // Deleting the session deletes its snapshots.
    w.delete_session(&id).await;
    assert!(v.snapshots().is_empty(), "{:#?}", v.calls());

    // A refusal (400) fails the next spawn in Vercel's words, not as transient.
    v.fail_next("POST /v2/sandboxes", 400, "ports: at most 4 ports");
    w.agent.model.push(vec![Reply::text("never")]);
    let (_id2, mut ws2) = w.prompted("go").await;
    let error = w.first_sandbox_error(&mut ws2).await;
    assert!(
        error.contains("vercel answered 400") && error.contains("ports: at most 4 ports"),
        "{error}"
    );
    assert!(!error.contains("transient"), "{error}");
}

// ---------------------------------------------------------------------------------------
// The OpenComputer provider's contract.

#[tokio::test]
async fn opencomputer_a_sandbox_gone_while_hibernated_comes_back_from_its_checkpoint() {
    let w = World::with_scratch(Provider::OpenComputer).await;
    let o = w.opencomputer.as_ref().unwrap();
    let (id, mut ws) = w.prompted("write scratch").await;
    let seen = w.until_complete(&mut ws, 1).await;
    let first = seen
        .iter()
        .find(|m| m["type"] == "sandbox_spawning")
        .map(|m| m["sandboxId"].as_str().unwrap().to_owned())
        .unwrap();
    w.until_stopped(&mut ws).await;
    // A checkpoint after the turn, and one more when the stop comes before the turn's was
    // recorded (seen once under a loaded machine): either way there is one to come back to.
    assert!((1..=2).contains(&o.checkpoints().len()), "{:?}", o.calls());
    // OpenComputer lets the hibernated sandbox go; its checkpoint stays.
    o.vanish(&first);

    let seen = w.read_scratch(&mut ws).await;
    let warning = seen
        .iter()
        .find(|m| m["type"] == "sandbox_event" && m["event"]["type"] == "warning")
        .unwrap_or_else(|| panic!("no warning: {seen:#?}"));
    assert!(
        warning["event"]["message"]
            .as_str()
            .unwrap()
            .contains("is gone: restoring its last snapshot"),
        "{warning}"
    );
    let call = events(&seen, "tool_call")
        .into_iter()
        .find(|c| c["status"] == "completed")
        .cloned()
        .unwrap();
    assert!(
        call["output"].as_str().unwrap().contains("keep me"),
        "{call}\n{}",
        w.logs()
    );
    assert!(
        o.calls()
            .iter()
            .any(|c| c.starts_with("POST /sandboxes/from-checkpoint/")),
        "{:?}",
        o.calls()
    );

    // Deleting the session deletes its sandboxes and every checkpoint, the one of the
    // sandbox OpenComputer let go too (the session kept its id: OpenComputer still lists
    // a deleted sandbox's checkpoints, though its list of sandboxes no longer shows it).
    w.delete_session(&id).await;
    assert!(o.sandboxes().is_empty());
    assert!(o.checkpoints().is_empty(), "{:#?}", o.checkpoints());
}

/// A supervisor that ends as soon as it is started (its start command backgrounds it, so
/// the command succeeds) is found not up: the new sandbox is deleted, the failure said with
/// the end of the supervisor's log and retried; the retry runs. Before, the spawn counted
/// as done and the session waited for a sandbox that would never connect.
#[tokio::test]
async fn opencomputer_a_supervisor_that_does_not_come_up_is_said_and_retried() {
    let w = World::start(
        Provider::OpenComputer,
        vec![Reply::text("Ran on the second try.")],
        &[],
    )
    .await;
    let o = w.opencomputer.as_ref().unwrap();
    o.crash_next_start();
    let (_id, mut ws) = w.prompted("go").await;
    let errors = w.errors_until_success(&mut ws).await;
    assert!(
        errors.iter().any(|e| e.contains("the supervisor is not up")
            && e.contains("the workspace disk is read-only")
            && e.contains("transient")),
        "{errors:#?}"
    );
    // The sandbox it did not come up in is gone; the retry's runs.
    assert_eq!(o.sandboxes().len(), 1, "{:#?}", o.sandboxes());
}

/// A hibernated sandbox woken for the next prompt whose supervisor does not come up (a
/// loaded machine) is resumed again after the cooldown: the same sandbox, not a second one
/// made from its checkpoint while the woken one keeps running. Before, the failed resume
/// made the sandbox "failed", which is not resumable, and the retry made a new sandbox.
#[tokio::test]
async fn opencomputer_a_resume_that_does_not_come_up_resumes_the_same_sandbox() {
    let w = World::with_scratch(Provider::OpenComputer).await;
    let o = w.opencomputer.as_ref().unwrap();
    let (_id, mut ws) = w.prompted("write scratch").await;
    w.until_complete(&mut ws, 1).await;
    w.until_stopped(&mut ws).await;
    o.crash_next_start();
    w.ask_to_read_scratch(&mut ws).await;
    let errors = w.errors_until_success(&mut ws).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("the supervisor is not up") && e.contains("transient")),
        "{errors:#?}"
    );
    assert_eq!(o.sandboxes().len(), 1, "{:#?}", o.sandboxes());
    let calls = o.calls();
    assert!(
        !calls.iter().any(|c| c.contains("/from-checkpoint/")),
        "{calls:?}"
    );
    assert_eq!(
        calls.iter().filter(|c| c.ends_with("/wake")).count(),
        1,
        "{calls:?}"
    );
}

/// A sandbox that never became ready is deleted, not paused: nothing will resume it (the
/// next sandbox is a new one), and a paused sandbox is kept, and billed, until the session
/// is deleted. Before, it was paused like an idle one.
#[tokio::test]
async fn e2b_a_sandbox_that_never_became_ready_is_deleted_not_paused() {
    let w = World::start(
        Provider::E2b,
        vec![Reply::text("Ran on the next one.")],
        &[],
    )
    .await;
    let e = w.e2b.as_ref().unwrap();
    e.hang_next_start();
    let (_id, mut ws) = w.prompted("go").await;
    let mut first = String::new();
    loop {
        let m = ws.recv_within(60).await.unwrap();
        if m["type"] == "sandbox_spawning" {
            first = m["sandboxId"].as_str().unwrap().to_owned();
        }
        // Made and started: the session waits for it to connect.
        if m["type"] == "sandbox_status" && m["status"] == "connecting" {
            break;
        }
    }
    // Its supervisor holds the lock and never connects; E2B pauses it (its timeout).
    e.pause_as_vendor(&first);
    let errors = w.errors_until_success(&mut ws).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("the sandbox's process is gone")),
        "{errors:#?}\n{}",
        w.logs()
    );
    let left: Vec<Value> = e
        .sandboxes()
        .into_iter()
        .filter(|s| s["metadata"]["openinspect_expected_sandbox_id"] == first.as_str())
        .collect();
    assert!(left.is_empty(), "kept: {left:#?}\n{:?}", e.calls());
}

/// A Pod that dies after its sandbox was ready (evicted, OOM-killed, its node gone) comes
/// back on its claim: the next prompt finds the uncommitted file. Before, only a sandbox we
/// had stopped was resumed: a fresh one was made and the session's other claims deleted.
#[tokio::test]
async fn kubernetes_a_pod_that_dies_comes_back_on_its_workspace() {
    let w = World::scratch(Provider::Kubernetes, &[]).await;
    let (id, mut ws) = w.prompted("write scratch").await;
    w.until_complete(&mut ws, 1).await;
    let groups = sandbox_groups_of(&id);
    assert_eq!(groups.len(), 1, "{groups:?}");
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(groups[0]),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    loop {
        let m = ws
            .recv_within(90)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
        if m["type"] == "sandbox_status" && m["status"] == "stale" {
            break;
        }
    }
    let seen = w.read_scratch(&mut ws).await;
    assert!(
        seen.iter()
            .any(|m| m["type"] == "sandbox_status" && m["status"] == "resuming"),
        "{seen:#?}"
    );
    let call = events(&seen, "tool_call")
        .into_iter()
        .find(|c| c["status"] == "completed")
        .cloned()
        .unwrap_or_else(|| panic!("no tool call: {seen:#?}"));
    assert!(
        call["output"].as_str().unwrap().contains("keep me"),
        "{call}\n{}",
        w.logs()
    );
    let c = w.cluster.as_ref().unwrap();
    assert_eq!(c.objects("persistentvolumeclaims").len(), 1);
}

/// A registry briefly out fails four pulls (20 s, two of the Worker's checks); the kubelet
/// backs off and pulls again each time, and the
/// session waits for it instead of failing at the first `ErrImagePull` (it did before: a
/// pull error was taken as a Pod that cannot start).
#[tokio::test]
async fn kubernetes_a_registry_briefly_out_is_waited_for() {
    let w = World::start(
        Provider::Kubernetes,
        vec![Reply::text("Pulled at last.")],
        &[],
    )
    .await;
    w.cluster.as_ref().unwrap().registry_unavailable(4);
    let (_id, mut ws) = w.prompted("go").await;
    loop {
        let m = ws
            .recv_within(90)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
        assert_ne!(m["type"], "sandbox_error", "{m}");
        if m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete" {
            assert_eq!(m["event"]["success"], true, "{m}");
            break;
        }
    }
}

/// A Pod no node has room for is said in the scheduler's words while the session waits, and
/// the failure at the end of the ready budget says why. Before, nothing was said for 120 s,
/// then only "the sandbox did not become ready within 120 s".
#[tokio::test]
async fn kubernetes_an_unschedulable_pod_is_said_in_its_words() {
    let w = World::start(
        Provider::Kubernetes,
        vec![Reply::text("Scheduled at last.")],
        &[("SANDBOX_READY_TIMEOUT_SECONDS", "30")],
    )
    .await;
    let c = w.cluster.as_ref().unwrap();
    let why = "0/3 nodes are available: 3 Insufficient memory.";
    c.unschedulable(why);
    let (_id, mut ws) = w.prompted("go").await;
    let mut warned = false;
    let error = loop {
        let m = ws
            .recv_within(90)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
        if m["type"] == "sandbox_event"
            && m["event"]["type"] == "warning"
            && m["event"]["message"] == format!("not ready yet: Unschedulable: {why}").as_str()
        {
            warned = true;
        }
        if m["type"] == "sandbox_error" {
            break m["error"].as_str().unwrap_or_default().to_owned();
        }
    };
    assert!(warned, "no warning before: {error}");
    assert!(
        error.contains(&format!(
            "did not become ready within 30 s (Unschedulable: {why})"
        )),
        "{error}"
    );
    // A node with room comes: the retry runs.
    c.schedulable();
    w.errors_until_success(&mut ws).await;
}

/// A prompt sent while the provider is still stopping the idle sandbox waits for the stop
/// to end, then resumes the same machine (it once raced the stop: the resume found the
/// machine half-stopped, failed, and a fresh sandbox without the workspace ran the prompt).
#[tokio::test]
async fn daytona_a_prompt_during_a_slow_stop_resumes_the_stopped_sandbox() {
    let w = World::with_scratch(Provider::Daytona).await;
    let d = w.daytona.as_ref().unwrap();
    let (_id, mut ws) = w.prompted("write scratch").await;
    w.until_complete(&mut ws, 1).await;
    // Daytona is slow to stop it, and slower still to recover it: a resume started before
    // the stop landed would find the machine errored (its supervisor ended at the shutdown),
    // ask to recover it, and be refused once the stop had landed.
    let daytona_id = d.sandboxes()[0]["id"].as_str().unwrap().to_owned();
    d.delay_next(
        &format!("POST /sandbox/{daytona_id}/stop"),
        std::time::Duration::from_millis(1500),
    );
    d.delay_next(
        &format!("POST /sandbox/{daytona_id}/recover"),
        std::time::Duration::from_secs(3),
    );
    w.until_stopped(&mut ws).await;
    // The stop is still on its way to Daytona.
    let seen = w.read_scratch(&mut ws).await;
    let call = events(&seen, "tool_call")
        .into_iter()
        .find(|c| c["status"] == "completed")
        .cloned()
        .unwrap();
    assert!(
        call["output"].as_str().unwrap().contains("keep me"),
        "{call}\n{:?}",
        d.calls()
    );
    assert_eq!(d.sandboxes().len(), 1, "{:?}", d.calls());
    assert_eq!(d.boots().values().copied().collect::<Vec<_>>(), vec![2]);
}

/// The port a vendor's URL names first (`<port>-…`): in a gated sandbox, a gate's (in
/// 40000–63999), never the app's.
fn gate_port_of(host: &str) -> u16 {
    let port: u16 = host
        .split('-')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    assert!(
        (40_000..64_000).contains(&port),
        "not a gate's port: {host}"
    );
    port
}

/// A cloud vendor's tunnel URL reaches only the session's people: the vendor exposes the
/// gate the supervisor runs in front of the port (never the port itself), the gate lets
/// through a link the control plane signed with the key derived for that sandbox, and the
/// editor is reached the same way. (The fake Modal's tunnels really forward here.)
#[tokio::test]
async fn a_cloud_sandbox_s_ports_and_editor_are_behind_its_own_gates() {
    let w = World::start(Provider::Modal, vec![Reply::text("Serving.")], &[]).await;
    let port = inspect_tests::stack::free_port().unwrap();
    let hooks = w.repo.path().join(".openinspect");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(
        hooks.join("start.sh"),
        format!("cd \"$(dirname \"$0\")/..\"\nnohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &\n"),
    )
    .unwrap();
    commit_all(w.repo.path(), "start hook");
    let base = w.agent.stack.base_url.clone();
    let id = create_session(
        &base,
        "ann",
        json!({"repoOwner": "local", "repoName": "demo", "sandbox": {"tunnelPorts": [port]}}),
    )
    .await
    .unwrap();
    let (mut ws, _) = WsClient::join(&base, &w.agent.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "serve"}))
        .await
        .unwrap();
    let seen = w.until_complete(&mut ws, 1).await;
    let urls = seen
        .iter()
        .find(|m| m["type"] == "tunnel_urls")
        .unwrap_or_else(|| panic!("no tunnel_urls: {seen:#?}"));
    let url = urls["tunnelUrls"][port.to_string()]
        .as_str()
        .unwrap_or_else(|| panic!("{urls}"))
        .to_owned();
    assert_eq!(
        urls["tunnelUrls"].as_object().unwrap().len(),
        1,
        "only the app's port, not the editor's gate: {urls}"
    );
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // The vendor's URL without a link: the gate answers, the app is never reached.
    let bare = plain.get(&url).send().await.unwrap();
    assert_eq!(bare.status(), 401, "{}", w.logs());
    let link = inspect_tests::client::send_as(
        "ann",
        reqwest::Method::POST,
        &w.agent
            .stack
            .url(&format!("/sessions/{id}/ports/{port}/link")),
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
    let listing = plain
        .get(format!("{url}/"))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(listing.contains("README.md"), "{listing}");
    // A link signed for another sandbox (or with the local host's secret) opens nothing.
    let forged = format!(
        "{url}/?inspect_port_token={}",
        inspect_ports::sign(
            b"test-host-secret-0123456789",
            inspect_ports::Kind::Link,
            "sb_other",
            port,
            9_999_999_999
        )
    );
    assert_eq!(plain.get(&forged).send().await.unwrap().status(), 401);

    // The editor, through its own gate.
    if std::env::var_os("INSPECT_CODE_SERVER_BIN").is_some() {
        let editor = inspect_tests::client::send_as(
            "ann",
            reqwest::Method::POST,
            &w.agent.stack.url(&format!("/sessions/{id}/editor")),
            None,
        )
        .await
        .unwrap();
        assert_eq!(editor.status, 200, "{}", editor.body);
        let open =
            inspect_tests::client::navigate_as("ann", editor.body["url"].as_str().unwrap()).await;
        assert_eq!(open.status(), 302);
        let gate_link = open.headers()["location"].to_str().unwrap().to_owned();
        let gate = gate_link.split("/?").next().unwrap().to_owned();
        assert_ne!(gate, url, "the editor has a gate of its own");
        assert_eq!(plain.get(&gate).send().await.unwrap().status(), 401);
        let swapped = plain.get(&gate_link).send().await.unwrap();
        assert_eq!(swapped.status(), 302);
        let cookie = inspect_tests::client::gate_cookie(&swapped);
        let first = plain
            .get(format!("{gate}/"))
            .header("Cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(first.status(), 302, "code-server: {}", w.logs());
    }

    // The desktop with control, through its own gate (the view-only one has another).
    let desktop = inspect_tests::client::send_as(
        "ann",
        reqwest::Method::POST,
        &w.agent.stack.url(&format!("/sessions/{id}/desktop")),
        Some(json!({"control": true})),
    )
    .await
    .unwrap();
    assert_eq!(desktop.status, 200, "{}", desktop.body);
    let open =
        inspect_tests::client::navigate_as("ann", desktop.body["url"].as_str().unwrap()).await;
    assert_eq!(open.status(), 302);
    let gate_link = open.headers()["location"].to_str().unwrap().to_owned();
    let (gate, page) = gate_link.split_once("/vnc.html?").unwrap();
    assert!(page.contains("view_only=0"), "{gate_link}");
    assert_ne!(gate, url, "the desktop has a gate of its own");
    assert_eq!(plain.get(gate).send().await.unwrap().status(), 401);
    let swapped = plain.get(&gate_link).send().await.unwrap();
    assert_eq!(swapped.status(), 302);
    let to = swapped.headers()["location"].to_str().unwrap().to_owned();
    assert!(
        to.starts_with("/vnc.html?") && !to.contains("inspect_port_token"),
        "the gate keeps noVNC's page and drops its token: {to}"
    );
    let cookie = inspect_tests::client::gate_cookie(&swapped);
    // noVNC's page, served by websockify behind the gate, where the machine has it (the
    // test command installs it; the sandbox here runs on the machine's own files).
    if std::path::Path::new("/usr/share/novnc/vnc.html").exists() {
        let served = plain
            .get(format!("{gate}{to}"))
            .header("Cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(served.status(), 200, "{}", w.logs());
        assert!(served.text().await.unwrap().contains("noVNC"));
    }
}

/// A session in an environment whose egress policy is `off`, on `provider`: its prompt's
/// messages until it completes or the sandbox fails.
async fn walled_session(provider: Provider) -> (World, Vec<Value>) {
    let w = World::start(provider, vec![Reply::text("Walled in.")], &[]).await;
    let base = &w.agent.stack.base_url;
    let e = inspect_tests::client::send(
        reqwest::Method::POST,
        &w.agent.stack.url("/environments"),
        Some(
            json!({"name": "walled", "repositories": [{"owner": "local", "name": "demo"}],
            "egress": {"mode": "off", "allow": [{"host": "api.example.org"}]}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(e.status, 201, "{}", e.body);
    let id = create_session(base, "ann", json!({"environmentId": e.body["id"]}))
        .await
        .unwrap();
    let (mut ws, _) = WsClient::join(base, &w.agent.stack.ws_url(""), &id, "ann")
        .await
        .unwrap();
    ws.send(json!({"type": "prompt", "content": "stay in"}))
        .await
        .unwrap();
    let mut seen = vec![];
    loop {
        let m = ws
            .recv_within(120)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
        let done = m["type"] == "sandbox_error"
            || (m["type"] == "sandbox_event" && m["event"]["type"] == "execution_complete");
        seen.push(m);
        if done {
            return (w, seen);
        }
    }
}

#[tokio::test]
async fn an_off_policy_is_refused_where_the_provider_cannot_hold_it() {
    let (w, seen) = walled_session(Provider::Modal).await;
    let all = serde_json::to_string(&seen).unwrap();
    assert!(
        all.contains("cannot hold a sandbox to that"),
        "{all}\n{}",
        w.logs()
    );
    assert!(
        !w.modal
            .as_ref()
            .unwrap()
            .calls()
            .iter()
            .any(|c| c.contains("create")),
        "a sandbox was made: {:?}",
        w.modal.as_ref().unwrap().calls()
    );
}

#[tokio::test]
async fn an_off_policy_goes_to_e2bs_firewall_and_the_boot_says_so() {
    let (w, seen) = walled_session(Provider::E2b).await;
    let step = events(&seen, "boot_step")
        .into_iter()
        .find(|e| e["step"] == "egress" && e["status"] != "started")
        .cloned()
        .unwrap_or_else(|| panic!("no egress step: {seen:#?}\n{}", w.logs()));
    assert_eq!(step["status"], "succeeded", "{step}");
    assert!(
        step["detail"]
            .as_str()
            .unwrap()
            .contains("enforced by E2B's firewall"),
        "{step}"
    );
    assert_eq!(events(&seen, "execution_complete")[0]["success"], true);
}
