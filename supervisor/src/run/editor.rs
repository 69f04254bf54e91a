//! The sandbox's editor: code-server, started when a person first asks for it, on the port
//! the provider put behind its gate (`INSPECT_EDITOR_PORT`), opened on the primary
//! repository, with the agent's tools on its PATH but none of the sandbox's credentials.
//! It listens on loopback only: the gate is the one way in. It ends with the sandbox (it is
//! in the supervisor's process group, which the provider stops whole).

use std::path::{Path, PathBuf};
use tokio::process::{Child, Command};

pub struct Editor {
    bin: Option<PathBuf>,
    port: Option<u16>,
    folder: PathBuf,
    state: PathBuf,
    path_prefix: Option<PathBuf>,
    child: Option<Child>,
}

impl Editor {
    /// The editor as this sandbox's environment describes it (`INSPECT_CODE_SERVER_BIN`,
    /// `INSPECT_EDITOR_PORT`).
    /// In a gated sandbox (a cloud vendor's) code-server takes the editor's usual port,
    /// behind its gate.
    pub fn from_env(
        folder: PathBuf,
        root: &Path,
        path_prefix: Option<PathBuf>,
        gated: bool,
    ) -> Editor {
        Editor {
            bin: std::env::var_os("INSPECT_CODE_SERVER_BIN").map(PathBuf::from),
            port: std::env::var("INSPECT_EDITOR_PORT")
                .ok()
                .and_then(|p| p.parse().ok())
                .or(gated.then_some(inspect_protocol::editor::EDITOR_PORT)),
            folder,
            state: root.join("editor"),
            path_prefix,
            child: None,
        }
    }

    /// Starts code-server unless it runs; what went wrong, in words, when it cannot.
    pub fn start(&mut self) -> Result<(), String> {
        if let Some(child) = self.child.as_mut() {
            match child.try_wait() {
                Ok(None) => return Ok(()),
                Ok(Some(status)) => {
                    tracing::warn!(%status, "code-server had ended; starting it again")
                }
                Err(e) => tracing::warn!("code-server's state is unknown ({e}); starting it again"),
            }
        }
        let Some(port) = self.port else {
            return Err("this sandbox's provider exposes no port for the editor".into());
        };
        let Some(bin) = &self.bin else {
            return Err("code-server is not installed in this sandbox".into());
        };
        std::fs::create_dir_all(&self.state)
            .map_err(|e| format!("making the editor's folder: {e}"))?;
        let log = std::fs::File::create(self.state.join("code-server.log"))
            .map_err(|e| format!("making the editor's log: {e}"))?;
        let err_log = log
            .try_clone()
            .map_err(|e| format!("making the editor's log: {e}"))?;
        let mut cmd = Command::new(bin);
        cmd.arg("--auth")
            .arg("none")
            .arg("--bind-addr")
            .arg(format!("127.0.0.1:{port}"))
            .args([
                "--disable-telemetry",
                "--disable-update-check",
                "--disable-workspace-trust",
                "--ignore-last-opened",
            ])
            .arg("--config")
            .arg(self.state.join("config.yaml"))
            .arg("--user-data-dir")
            .arg(self.state.join("data"))
            .arg("--extensions-dir")
            .arg(self.state.join("extensions"))
            .arg(&self.folder)
            .current_dir(&self.folder)
            .env_remove("INSPECT_SANDBOX_TOKEN")
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err_log)
            .kill_on_drop(true);
        if let Some(prefix) = &self.path_prefix {
            let path = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{path}", prefix.display()));
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("starting code-server ({}): {e}", bin.display()))?;
        tracing::info!(port, pid = ?child.id(), "editor started");
        self.child = Some(child);
        Ok(())
    }
}
