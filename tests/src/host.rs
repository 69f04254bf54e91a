//! The real local sandbox host (`inspect-supervisor host`) for end-to-end tests.

use anyhow::{bail, Context, Result};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct SandboxHost {
    pub url: String,
    pub secret: String,
    pub data_dir: tempfile::TempDir,
    child: Option<Child>,
}

/// The supervisor binary: `INSPECT_SUPERVISOR_BIN`, or built once per test process.
pub fn supervisor_bin() -> Result<PathBuf> {
    static BIN: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("INSPECT_SUPERVISOR_BIN") {
            return Ok(PathBuf::from(p));
        }
        let root = crate::root();
        let status = Command::new("cargo")
            .args(["build", "--quiet", "-p", "inspect-supervisor"])
            .current_dir(&root)
            .status()
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err("building the supervisor failed".into());
        }
        Ok(crate::stack::target_dir().join("debug/inspect-supervisor"))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

/// The sandbox image's root the test command built (`INSPECT_TEST_SANDBOX_IMAGE`), if any.
pub fn test_image() -> Option<String> {
    std::env::var("INSPECT_TEST_SANDBOX_IMAGE")
        .ok()
        .filter(|v| !v.is_empty())
}

/// The OpenCode binary installed by the project's npm packages.
pub fn opencode_bin() -> PathBuf {
    crate::root().join("node_modules/opencode-linux-x64/bin/opencode")
}

impl SandboxHost {
    /// Starts a host whose sandboxes use the model at `model_base_url` (`provider/model`).
    pub async fn start(model_base_url: &str, model: &str) -> Result<SandboxHost> {
        Self::start_with(model_base_url, model, &[]).await
    }

    /// [`SandboxHost::start`] with more variables for the host (its settings).
    pub async fn start_with(
        model_base_url: &str,
        model: &str,
        env: &[(&str, &str)],
    ) -> Result<SandboxHost> {
        let port = crate::stack::free_port()?;
        let data_dir = tempfile::Builder::new().prefix("inspect-host-").tempdir()?;
        let secret = "test-host-secret-0123456789".to_owned();
        let log = std::fs::File::create(data_dir.path().join("host.log"))?;
        let child = Command::new(supervisor_bin()?)
            .args([
                "host",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
            ])
            .arg(data_dir.path().join("sandboxes"))
            .env("SANDBOX_HOST_SECRET", &secret)
            .env("INSPECT_MODEL_BASE_URL", model_base_url)
            .env("INSPECT_MODEL", model)
            .env("INSPECT_OPENCODE_BIN", opencode_bin())
            .env(
                "INSPECT_ANTHROPIC_BASE_URL",
                model_base_url.trim_end_matches("/v1"),
            )
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .context("starting the sandbox host")?;
        let host = SandboxHost {
            url: format!("http://127.0.0.1:{port}"),
            secret,
            data_dir,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if reqwest::get(format!("{}/health", host.url))
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(host);
            }
            if Instant::now() > deadline {
                bail!("the sandbox host did not come up:\n{}", host.log());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The Worker variables that point it at this host.
    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("SANDBOX_HOST_URL".into(), self.url.clone()),
            ("SANDBOX_HOST_SECRET".into(), self.secret.clone()),
        ]
    }

    /// The host's data directory (sandboxes live under `sandboxes/`).
    pub fn data_dir(&self) -> &std::path::Path {
        self.data_dir.path()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.path().join("host.log")).unwrap_or_default()
    }

    /// Every sandbox's supervisor log, for failure messages.
    pub fn sandbox_logs(&self) -> String {
        let mut out = String::new();
        if let Ok(dirs) = std::fs::read_dir(self.data_dir.path().join("sandboxes")) {
            for d in dirs.flatten() {
                for f in ["supervisor.log", "agent/opencode.log"] {
                    let text = std::fs::read_to_string(d.path().join(f)).unwrap_or_default();
                    let lines: Vec<&str> = text.lines().collect();
                    out.push_str(&format!(
                        "--- {} {f}\n{}\n",
                        d.file_name().to_string_lossy(),
                        lines[lines.len().saturating_sub(60)..].join("\n")
                    ));
                }
            }
        }
        out
    }
}

impl Drop for SandboxHost {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            // The host stops its sandboxes on TERM; give it the time to.
            crate::stack::stop_group(child, Duration::from_secs(8));
        }
    }
}

/// Process groups of the supervisors (`inspect-supervisor run`) of `session`.
pub fn sandbox_groups_of(session: &str) -> Vec<i32> {
    let mut groups = vec![];
    let Ok(proc) = std::fs::read_dir("/proc") else {
        return groups;
    };
    for entry in proc.flatten() {
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        let is_supervisor = args
            .first()
            .is_some_and(|a| a.ends_with(b"inspect-supervisor"))
            && args.get(1) == Some(&&b"run"[..]);
        let env = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if is_supervisor
            && String::from_utf8_lossy(&env).contains(&format!("INSPECT_SESSION_ID={session}"))
        {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
            if let Some(pgrp) = after
                .split_whitespace()
                .nth(2)
                .and_then(|g| g.parse::<i32>().ok())
            {
                groups.push(pgrp);
            }
        }
    }
    groups
}
