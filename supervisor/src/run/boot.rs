//! The boot sequence, each step reported to the session as it starts and ends:
//! stale `.tunnels.env` cleared → git sync of every repository in order → `setup.sh`
//! (fresh and build boots; 300 s; fatal only in build mode) → wait for tunnel URLs
//! (≤ `TUNNEL_WAIT_TIMEOUT_SECONDS`, polled every 0.2 s) → `start.sh` (120 s, fatal).

pub use super::git::{git, set_scm_broker, ScmBroker};
use super::link::Events;
use anyhow::{Context, Result};
use inspect_protocol::provider::{BootMode, WorkspaceRepository};
use inspect_protocol::sandbox::{SandboxEvent, StepStatus};
use inspect_protocol::scm::pull_head_ref;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::Command;

pub const SETUP_TIMEOUT: Duration = Duration::from_secs(300);
pub const START_TIMEOUT: Duration = Duration::from_secs(120);
/// What clients are shown of a hook's output: its last this many bytes.
pub const HOOK_OUTPUT_TAIL: usize = 8 * 1024;
pub const TUNNEL_POLL: Duration = Duration::from_millis(200);
pub const TUNNELS_FILE: &str = ".tunnels.env";
use crate::credential::GIT_TOKEN_VAR;

/// The bot that commits; prompts' authors are set per commit.
pub const BOT_NAME: &str = "open-inspect[bot]";
pub const BOT_EMAIL: &str = "bot@open-inspect.local";

pub struct Step<'a> {
    events: &'a Events,
    name: String,
    started: Instant,
}

impl<'a> Step<'a> {
    pub fn begin(events: &'a Events, name: impl Into<String>) -> Self {
        let name = name.into();
        tracing::info!(step = %name, "boot step started");
        events.send(SandboxEvent::BootStep {
            step: name.clone(),
            status: StepStatus::Started,
            duration_ms: None,
            detail: None,
            output: None,
        });
        Step {
            events,
            name,
            started: Instant::now(),
        }
    }

    pub fn end(self, status: StepStatus, detail: Option<String>, output: Option<String>) {
        let ms = self.started.elapsed().as_millis() as i64;
        tracing::info!(step = %self.name, ?status, ms, "boot step ended");
        self.events.send(SandboxEvent::BootStep {
            step: self.name,
            status,
            duration_ms: Some(ms),
            detail,
            output,
        });
    }
}

/// The file in a sandbox's root that says which sandbox booted its workspace.
pub const BOOT_MARKER: &str = ".inspect-booted";

/// Whether sandbox `sandbox_id` booted the workspace under `root` before.
pub fn booted_here(root: &Path, sandbox_id: &str) -> bool {
    std::fs::read_to_string(root.join(BOOT_MARKER)).is_ok_and(|id| id.trim() == sandbox_id)
}

/// Records that sandbox `sandbox_id` booted the workspace under `root`.
pub fn mark_booted(root: &Path, sandbox_id: &str) -> std::io::Result<()> {
    std::fs::write(root.join(BOOT_MARKER), sandbox_id)
}

/// Removes a `.tunnels.env` left by another sandbox (its `TUNNEL_SANDBOX_ID` is not ours).
/// Returns whether a file was removed.
pub fn clear_stale_tunnels(workspace: &Path, sandbox_id: &str) -> std::io::Result<bool> {
    let path = workspace.join(TUNNELS_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(false);
    };
    let owner = parse_env(&text)
        .into_iter()
        .find(|(k, _)| k == "TUNNEL_SANDBOX_ID")
        .map(|(_, v)| v);
    if owner.as_deref() == Some(sandbox_id) {
        return Ok(false);
    }
    std::fs::remove_file(&path)?;
    Ok(true)
}

/// `KEY=VALUE` lines; blank lines and `#` comments skipped; quotes around values removed.
pub fn parse_env(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            (
                k.trim().to_owned(),
                v.trim().trim_matches('"').trim_matches('\'').to_owned(),
            )
        })
        .collect()
}

/// Which of the expected `TUNNEL_<port>` entries the file does not hold yet.
pub fn missing_tunnels(text: &str, sandbox_id: &str, ports: &[u16]) -> Vec<u16> {
    let vars = parse_env(text);
    let ours = vars
        .iter()
        .any(|(k, v)| k == "TUNNEL_SANDBOX_ID" && v == sandbox_id);
    ports
        .iter()
        .copied()
        .filter(|p| {
            !ours
                || !vars
                    .iter()
                    .any(|(k, v)| k == &format!("TUNNEL_{p}") && !v.is_empty())
        })
        .collect()
}

/// The `.tunnels.env` a provider would write: our id first, then one line per port.
pub fn tunnels_file_text(
    sandbox_id: &str,
    urls: &std::collections::BTreeMap<String, String>,
) -> String {
    let mut ports: Vec<(u16, &String)> = urls
        .iter()
        .filter_map(|(p, u)| p.parse::<u16>().ok().map(|p| (p, u)))
        .collect();
    ports.sort();
    let mut text = format!("TUNNEL_SANDBOX_ID={sandbox_id}\n");
    for (p, u) in ports {
        text.push_str(&format!("TUNNEL_{p}={u}\n"));
    }
    text
}

/// Where the tunnel URLs may come from besides the file: the control plane's
/// `GET /sessions/:id/tunnel-urls`, asked with the sandbox's own credentials.
pub struct TunnelSource<'a> {
    pub control_plane_url: &'a str,
    pub session_id: &'a str,
    pub token: &'a str,
}

impl TunnelSource<'_> {
    async fn ask(&self, sandbox_id: &str) -> Option<std::collections::BTreeMap<String, String>> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .ok()?;
        let url = format!(
            "{}/sessions/{}/tunnel-urls",
            self.control_plane_url.trim_end_matches('/'),
            self.session_id
        );
        let resp = client
            .get(url)
            .bearer_auth(self.token)
            .header(inspect_protocol::auth::SANDBOX_ID_HEADER, sandbox_id)
            .send()
            .await
            .ok()?;
        if !resp.status().is_success() {
            return None;
        }
        resp.json::<inspect_protocol::session::TunnelUrls>()
            .await
            .ok()
            .map(|t| t.tunnel_urls)
    }
}

/// Waits until every expected tunnel URL is known, or the time runs out: written to the
/// file by the provider, or (asked every second) held by the control plane, which this
/// then writes to the file for the hooks and the code that read it.
pub async fn wait_for_tunnels(
    workspace: &Path,
    sandbox_id: &str,
    ports: &[u16],
    timeout: Duration,
    source: Option<&TunnelSource<'_>>,
) -> Result<(), Vec<u16>> {
    let deadline = Instant::now() + timeout;
    let mut asked: Option<Instant> = None;
    loop {
        let text = std::fs::read_to_string(workspace.join(TUNNELS_FILE)).unwrap_or_default();
        let missing = missing_tunnels(&text, sandbox_id, ports);
        if missing.is_empty() {
            return Ok(());
        }
        if let Some(source) =
            source.filter(|_| asked.is_none_or(|t| t.elapsed() >= CONTROL_PLANE_POLL))
        {
            asked = Some(Instant::now());
            if let Some(urls) = source.ask(sandbox_id).await {
                if ports.iter().all(|p| urls.contains_key(&p.to_string())) {
                    let _ = std::fs::write(
                        workspace.join(TUNNELS_FILE),
                        tunnels_file_text(sandbox_id, &urls),
                    );
                    return Ok(());
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(missing);
        }
        tokio::time::sleep(TUNNEL_POLL).await;
    }
}

/// How often the control plane is asked for tunnel URLs while the file is missing.
const CONTROL_PLANE_POLL: Duration = Duration::from_secs(1);

/// How a hook ended.
#[derive(Debug, PartialEq)]
pub enum HookOutcome {
    Absent,
    Succeeded { output: String },
    Failed { code: Option<i32>, output: String },
    TimedOut { output: String },
}

fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(HOOK_OUTPUT_TAIL);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// Runs `script` with bash in `dir`, bounded by `timeout`. Hooks stay in the sandbox's
/// process group, so what they leave running (a dev server from `start.sh`) stops with the
/// sandbox; a hook that runs out of time has its own process tree killed.
pub async fn run_hook(
    script: &Path,
    dir: &Path,
    timeout: Duration,
    extra_env: &std::collections::BTreeMap<String, String>,
) -> Result<HookOutcome> {
    if !script.exists() {
        return Ok(HookOutcome::Absent);
    }
    let out_path = std::env::temp_dir().join(format!("hook-{}.log", std::process::id()));
    let out = std::fs::File::create(&out_path)?;
    let mut child = Command::new("bash")
        .arg(script)
        .current_dir(dir)
        .env_remove("INSPECT_SANDBOX_TOKEN")
        .env_remove(GIT_TOKEN_VAR)
        .envs(extra_env)
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", script.display()))?;
    let result = tokio::time::timeout(timeout, child.wait()).await;
    let outcome = match result {
        Ok(status) => {
            let status = status?;
            let output = tail(&std::fs::read(&out_path).unwrap_or_default());
            if status.success() {
                HookOutcome::Succeeded { output }
            } else {
                HookOutcome::Failed {
                    code: status.code(),
                    output,
                }
            }
        }
        Err(_) => {
            if let Some(pid) = child.id() {
                kill_tree(pid);
            }
            let _ = child.wait().await;
            HookOutcome::TimedOut {
                output: tail(&std::fs::read(&out_path).unwrap_or_default()),
            }
        }
    };
    let _ = std::fs::remove_file(&out_path);
    Ok(outcome)
}

/// Kills a process and all its descendants (children first found through `/proc`).
pub(crate) fn kill_tree(pid: u32) {
    let mut stack = vec![pid];
    let mut all = Vec::new();
    while let Some(p) = stack.pop() {
        all.push(p);
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for t in tasks.flatten() {
                let children =
                    std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
                stack.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    for p in all {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Ends a hook's boot step from how the hook ended. `Err` carries what went wrong when the
/// hook failed or ran out of time; the caller decides whether that is fatal.
pub fn end_hook_step(
    step: Step<'_>,
    script: &str,
    timeout: Duration,
    outcome: HookOutcome,
) -> std::result::Result<(), String> {
    match outcome {
        HookOutcome::Absent => {
            step.end(
                StepStatus::Skipped,
                Some(format!("no .openinspect/{script}")),
                None,
            );
            Ok(())
        }
        HookOutcome::Succeeded { output } => {
            step.end(StepStatus::Succeeded, None, Some(output));
            Ok(())
        }
        HookOutcome::Failed { code, output } => {
            let detail = format!("{script} exited with {code:?}");
            step.end(StepStatus::Failed, Some(detail.clone()), Some(output));
            Err(detail)
        }
        HookOutcome::TimedOut { output } => {
            let detail = format!("{script} ran past {} s", timeout.as_secs());
            step.end(StepStatus::Failed, Some(detail.clone()), Some(output));
            Err(detail)
        }
    }
}

/// A clone unpacked from a snapshot or an image has its files' sizes and modification
/// times, but new inodes and change times: git's default stat check would read and hash
/// every file again at the first `git status` (0.6 s for 20,000 files, 200 MB, on the
/// first turn after a restore). Comparing what the archive kept (whole-second mtime, size,
/// mode) is enough; git still checks content where the index is racily clean.
async fn trust_unpacked_files(dir: &Path) -> Result<()> {
    git(dir, &["config", "core.checkStat", "minimal"]).await?;
    git(dir, &["config", "core.trustctime", "false"]).await?;
    Ok(())
}

/// Fetches a pull request's head ref (`pull/7/head`, which GitHub keeps in the base
/// repository even when the branch is a fork's) as `refs/remotes/origin/pull/7/head`.
async fn fetch_pull_ref(dir: &Path, pull_ref: &str) -> Result<()> {
    let spec = format!("+refs/{pull_ref}:refs/remotes/origin/{pull_ref}");
    git(dir, &["fetch", "--quiet", "origin", &spec]).await?;
    Ok(())
}

/// Clones (fresh) or fetches and resets (otherwise) one repository onto the work branch.
/// Returns its directory and head commit.
pub async fn sync_repository(
    workspace: &Path,
    repo: &WorkspaceRepository,
    work_branch: &str,
    mode: BootMode,
) -> Result<(PathBuf, String)> {
    let dir = workspace.join(&repo.name);
    let exists = dir.join(".git").exists();
    if !exists || mode == BootMode::Fresh || mode == BootMode::Build {
        if exists {
            std::fs::remove_dir_all(&dir)?;
        }
        let mut args = vec!["clone", "--quiet"];
        // A pull request's head ref is not a branch: cloned without it, fetched after.
        let pull_ref = repo
            .base_branch
            .as_deref()
            .filter(|b| pull_head_ref(b).is_some());
        if let Some(b) = repo.base_branch.as_ref().filter(|_| pull_ref.is_none()) {
            args.extend(["--branch", b.as_str()]);
        }
        let d = dir.to_string_lossy().into_owned();
        args.extend(["--", repo.source.as_str(), d.as_str()]);
        git(workspace, &args).await?;
        if let Some(r) = pull_ref {
            fetch_pull_ref(&dir, r).await?;
        }
        // The work branch continues where an earlier sandbox of this session left it.
        let remote_work = format!("refs/remotes/origin/{work_branch}");
        if git(&dir, &["rev-parse", "--verify", "--quiet", &remote_work])
            .await
            .is_ok()
        {
            git(
                &dir,
                &["checkout", "--quiet", "-B", work_branch, &remote_work],
            )
            .await?;
        } else if let Some(r) = pull_ref {
            let start = format!("refs/remotes/origin/{r}");
            git(&dir, &["checkout", "--quiet", "-B", work_branch, &start]).await?;
        } else {
            git(&dir, &["checkout", "--quiet", "-B", work_branch]).await?;
        }
    } else if mode == BootMode::Prebuilt {
        trust_unpacked_files(&dir).await?;
        // From an image: the clone is there, set up at the image's commit. Fetch what is
        // newer and put the work branch where it belongs: where an earlier sandbox of this
        // session pushed it, else at the base branch's newest commit.
        git(&dir, &["remote", "set-url", "origin", repo.source.as_str()]).await?;
        git(&dir, &["fetch", "--quiet", "origin"]).await?;
        if let Some(r) = repo
            .base_branch
            .as_deref()
            .filter(|b| pull_head_ref(b).is_some())
        {
            fetch_pull_ref(&dir, r).await?;
        }
        let remote_work = format!("refs/remotes/origin/{work_branch}");
        let target = if git(&dir, &["rev-parse", "--verify", "--quiet", &remote_work])
            .await
            .is_ok()
        {
            remote_work
        } else if let Some(b) = &repo.base_branch {
            format!("refs/remotes/origin/{b}")
        } else {
            git(
                &dir,
                &["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"],
            )
            .await
            .unwrap_or_else(|_| "HEAD".into())
        };
        git(
            &dir,
            &["checkout", "--quiet", "--force", "-B", work_branch, &target],
        )
        .await?;
    } else {
        trust_unpacked_files(&dir).await?;
        // Restored: bring the branch up to what was pushed, keeping uncommitted work the
        // snapshot carried (a fast-forward never touches it).
        git(&dir, &["fetch", "--quiet", "origin"]).await?;
        let remote_work = format!("origin/{work_branch}");
        if git(&dir, &["rev-parse", "--verify", "--quiet", &remote_work])
            .await
            .is_ok()
        {
            if let Err(e) = git(&dir, &["merge", "--quiet", "--ff-only", &remote_work]).await {
                tracing::warn!("the restored branch could not fast-forward: {e:#}");
            }
        }
    }
    git(&dir, &["config", "user.name", BOT_NAME]).await?;
    git(&dir, &["config", "user.email", BOT_EMAIL]).await?;
    // An image's repository is not a session's; a new session's workspace (fresh, or from
    // an image) starts its change anew; a restored one keeps the base it had.
    if mode != BootMode::Build {
        let anew = matches!(mode, BootMode::Fresh | BootMode::Prebuilt);
        if let Err(e) = super::changes::mark_base(&dir, repo.base_branch.as_deref(), anew).await {
            tracing::warn!("the session's base commit was not recorded: {e:#}");
        }
    }
    let sha = git(&dir, &["rev-parse", "HEAD"]).await?;
    Ok((dir, sha))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_tunnel_files_are_cleared_and_ours_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(TUNNELS_FILE),
            "TUNNEL_SANDBOX_ID=old\nTUNNEL_3000=http://x\n",
        )
        .unwrap();
        assert!(clear_stale_tunnels(dir.path(), "new").unwrap());
        assert!(!dir.path().join(TUNNELS_FILE).exists());
        std::fs::write(dir.path().join(TUNNELS_FILE), "TUNNEL_SANDBOX_ID=new\n").unwrap();
        assert!(!clear_stale_tunnels(dir.path(), "new").unwrap());
        assert!(dir.path().join(TUNNELS_FILE).exists());
        assert!(!clear_stale_tunnels(&dir.path().join("none"), "new").unwrap());
    }

    #[test]
    fn a_workspace_remembers_which_sandbox_booted_it() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!booted_here(dir.path(), "sb_1"));
        mark_booted(dir.path(), "sb_1").unwrap();
        assert!(booted_here(dir.path(), "sb_1"));
        assert!(
            !booted_here(dir.path(), "sb_2"),
            "a restored copy is another sandbox"
        );
    }

    #[test]
    fn missing_tunnels_needs_our_id_and_every_port() {
        let text = "# comment\nTUNNEL_SANDBOX_ID=sb\nTUNNEL_3000=\"http://127.0.0.1:4000\"\n";
        assert_eq!(missing_tunnels(text, "sb", &[3000, 5173]), vec![5173]);
        assert_eq!(missing_tunnels(text, "other", &[3000]), vec![3000]);
        assert!(missing_tunnels(text, "sb", &[3000]).is_empty());
    }

    #[tokio::test]
    async fn tunnel_wait_times_out_then_succeeds_when_written() {
        let dir = tempfile::tempdir().unwrap();
        let r = wait_for_tunnels(dir.path(), "sb", &[3000], Duration::from_millis(300), None).await;
        assert_eq!(r, Err(vec![3000]));
        let path = dir.path().join(TUNNELS_FILE);
        let writer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(250)).await;
            std::fs::write(path, "TUNNEL_SANDBOX_ID=sb\nTUNNEL_3000=http://x\n").unwrap();
        });
        assert_eq!(
            wait_for_tunnels(dir.path(), "sb", &[3000], Duration::from_secs(5), None).await,
            Ok(())
        );
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn hooks_succeed_fail_and_time_out() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("hook.sh");
        let none = Default::default();
        let run = |limit: Duration| run_hook(&script, dir.path(), limit, &none);
        let five = Duration::from_secs(5);
        assert_eq!(run(five).await.unwrap(), HookOutcome::Absent);
        std::fs::write(&script, "echo hello; echo oops >&2").unwrap();
        match run(five).await.unwrap() {
            HookOutcome::Succeeded { output } => {
                assert!(output.contains("hello") && output.contains("oops"))
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(&script, "echo failing; exit 3").unwrap();
        assert!(matches!(
            run(five).await.unwrap(),
            HookOutcome::Failed { code: Some(3), .. }
        ));
        std::fs::write(&script, "echo before; sleep 30").unwrap();
        let t = Instant::now();
        match run(Duration::from_millis(500)).await.unwrap() {
            HookOutcome::TimedOut { output } => assert!(output.contains("before")),
            other => panic!("{other:?}"),
        }
        assert!(t.elapsed() < Duration::from_secs(5));
        // The set-up-only secrets reach the hook (and only through its own environment).
        std::fs::write(&script, "echo \"token is ${SETUP_ONLY_TOKEN:-absent}\"").unwrap();
        let extra = [("SETUP_ONLY_TOKEN".to_owned(), "t0k".to_owned())].into();
        match run_hook(&script, dir.path(), five, &extra).await.unwrap() {
            HookOutcome::Succeeded { output } => {
                assert!(output.contains("token is t0k"), "{output}")
            }
            other => panic!("{other:?}"),
        }
        assert!(std::env::var("SETUP_ONLY_TOKEN").is_err());
        // Output is bounded.
        std::fs::write(&script, "head -c 100000 /dev/zero | tr '\\0' x").unwrap();
        match run(five).await.unwrap() {
            HookOutcome::Succeeded { output } => assert_eq!(output.len(), HOOK_OUTPUT_TAIL),
            other => panic!("{other:?}"),
        }
    }

    /// A committed repository `src` holding `files`, and an empty workspace `ws`, in `dir`.
    async fn source_and_workspace(
        dir: &Path,
        files: &[(String, String)],
    ) -> (PathBuf, WorkspaceRepository) {
        let src = dir.join("src");
        std::fs::create_dir(&src).unwrap();
        git(&src, &["init", "--quiet", "-b", "main"]).await.unwrap();
        for (name, text) in files {
            std::fs::write(src.join(name), text).unwrap();
        }
        git(&src, &["add", "."]).await.unwrap();
        let commit = [
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--quiet",
            "-m",
            "init",
        ];
        git(&src, &commit).await.unwrap();
        let ws = dir.join("ws");
        std::fs::create_dir(&ws).unwrap();
        let repo = WorkspaceRepository {
            owner: "local".into(),
            name: "src".into(),
            source: src.to_string_lossy().into(),
            base_branch: None,
        };
        (ws, repo)
    }

    #[tokio::test]
    async fn a_repository_is_cloned_onto_the_work_branch() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, repo) = source_and_workspace(dir.path(), &[("a.txt".into(), "a".into())]).await;
        let (path, sha) = sync_repository(&ws, &repo, "open-inspect/s1", BootMode::Fresh)
            .await
            .unwrap();
        assert_eq!(sha.len(), 40);
        assert_eq!(
            git(&path, &["rev-parse", "--abbrev-ref", "HEAD"])
                .await
                .unwrap(),
            "open-inspect/s1"
        );
        let bad = WorkspaceRepository {
            source: "/nope/nope".into(),
            ..repo
        };
        assert!(sync_repository(&ws, &bad, "b", BootMode::Fresh)
            .await
            .is_err());
    }

    #[tokio::test]
    async fn a_restored_clone_trusts_what_the_archive_kept() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<(String, String)> = (0..20)
            .map(|i| (format!("f{i}.txt"), format!("file {i}")))
            .collect();
        let (ws, repo) = source_and_workspace(dir.path(), &files).await;
        let (path, _) = sync_repository(&ws, &repo, "open-inspect/s1", BootMode::Fresh)
            .await
            .unwrap();
        // Through an archive and back, as a snapshot's restore does: the same sizes and
        // modification times, new inodes and change times.
        let archive = dir.path().join("ws.tar");
        let tar = |args: &[&str]| {
            let ok = std::process::Command::new("tar")
                .args(args)
                .status()
                .unwrap();
            assert!(ok.success());
        };
        let (a, w) = (archive.to_str().unwrap(), ws.to_str().unwrap());
        tar(&["-cf", a, "-C", w, "src"]);
        std::fs::remove_dir_all(&path).unwrap();
        tar(&["-xf", a, "-C", w]);
        // Git's default check calls every file changed (so its first status reads them all)...
        let stat_dirty = git(&path, &["diff-files", "--quiet"]).await;
        assert!(
            stat_dirty.is_err(),
            "the extracted files should differ in stat"
        );
        // ...the restored clone compares what the archive kept, and still sees real edits.
        sync_repository(&ws, &repo, "open-inspect/s1", BootMode::SnapshotRestore)
            .await
            .unwrap();
        git(&path, &["diff-files", "--quiet"]).await.unwrap();
        std::fs::write(path.join("f3.txt"), "changed").unwrap();
        assert_eq!(
            git(&path, &["status", "--porcelain"]).await.unwrap(),
            "M f3.txt"
        );
    }
}
