//! The sandbox's editor: code-server, started when a person first asks for it, on the port
//! the provider put behind its gate (`INSPECT_EDITOR_PORT`), opened on the primary
//! repository, with the agent's tools on its PATH but none of the sandbox's credentials.
//! It listens on loopback only: the gate is the one way in. It ends with the sandbox (it is
//! in the supervisor's process group, which the provider stops whole).
//!
//! code-server listens a moment before it has its pages (it answers 404 meanwhile), so it
//! listens on a port of its own and the editor's port relays to it: a connection made
//! while it starts waits until its `/healthz` answers.

use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// How long a connection to the editor's port waits for code-server to be ready.
const READY_WAIT: Duration = Duration::from_secs(90);

pub struct Editor {
    bin: Option<PathBuf>,
    port: Option<u16>,
    folder: PathBuf,
    state: PathBuf,
    path_prefix: Option<PathBuf>,
    child: Option<Child>,
    /// code-server's own port once it answers (`None` while it starts).
    ready: watch::Sender<Option<u16>>,
    /// Whether the editor's port is listened on (from the first start on).
    relaying: bool,
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
            ready: watch::Sender::new(None),
            relaying: false,
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
        let own = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("finding a port for code-server: {e}"))?
            .port();
        if !self.relaying {
            let listener = std::net::TcpListener::bind(("127.0.0.1", port))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .and_then(TcpListener::from_std)
                .map_err(|e| format!("listening on the editor's port {port}: {e}"))?;
            tokio::spawn(relay(listener, self.ready.subscribe()));
            self.relaying = true;
        }
        self.ready.send_replace(None);
        let mut cmd = Command::new(bin);
        cmd.arg("--auth")
            .arg("none")
            .arg("--bind-addr")
            .arg(format!("127.0.0.1:{own}"))
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
        tracing::info!(port, own, pid = ?child.id(), "editor started");
        self.child = Some(child);
        tokio::spawn(announce_when_ready(own, self.ready.clone()));
        Ok(())
    }
}

/// code-server runs as a parent and a child: both end with the editor (a child left
/// behind by its parent spins).
impl Drop for Editor {
    fn drop(&mut self) {
        if let Some(pid) = self.child.as_ref().and_then(Child::id) {
            super::boot::kill_tree(pid);
        }
    }
}

/// Tells the relay code-server's port once its `/healthz` answers 200 (its pages are
/// registered by then).
async fn announce_when_ready(own: u16, ready: watch::Sender<Option<u16>>) {
    let client = match reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
    {
        Ok(client) => client,
        Err(e) => return tracing::warn!("no client to ask code-server with: {e}"),
    };
    let url = format!("http://127.0.0.1:{own}/healthz");
    let deadline = tokio::time::Instant::now() + READY_WAIT;
    while tokio::time::Instant::now() < deadline {
        if client
            .get(&url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            tracing::info!(own, "editor ready");
            ready.send_replace(Some(own));
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::warn!(own, "code-server did not answer in {READY_WAIT:?}");
}

/// The editor's port: each connection waits for code-server to be ready, then is spliced
/// to it.
async fn relay(listener: TcpListener, ready: watch::Receiver<Option<u16>>) {
    while let Ok((mut inbound, _)) = listener.accept().await {
        let mut ready = ready.clone();
        tokio::spawn(async move {
            let own = match tokio::time::timeout(READY_WAIT, ready.wait_for(Option::is_some)).await
            {
                Ok(Ok(own)) => own.unwrap_or_default(),
                _ => return,
            };
            if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", own)).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first answer a quick browser gets from the editor's port, however soon it asks:
    /// requests are retried only while nothing listens.
    async fn first_answer(port: u16) -> reqwest::StatusCode {
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            match client.get(format!("http://127.0.0.1:{port}/")).send().await {
                Ok(r) => return r.status(),
                Err(e) if tokio::time::Instant::now() < deadline => {
                    assert!(e.is_connect(), "{e}");
                    tokio::time::sleep(Duration::from_millis(5)).await
                }
                Err(e) => panic!("the editor's port never answered: {e}"),
            }
        }
    }

    #[tokio::test]
    async fn a_request_made_while_code_server_starts_gets_its_pages_not_a_404() {
        let Some(bin) = std::env::var_os("INSPECT_CODE_SERVER_BIN") else {
            eprintln!("skipped: INSPECT_CODE_SERVER_BIN is not set (scripts/test.sh sets it)");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("repo");
        std::fs::create_dir_all(&folder).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut editor = Editor {
            bin: Some(bin.into()),
            port: Some(port),
            folder,
            state: dir.path().join("editor"),
            path_prefix: None,
            child: None,
            ready: watch::Sender::new(None),
            relaying: false,
        };
        editor.start().unwrap();
        // code-server sends `/` on to the folder it opens.
        assert_eq!(first_answer(port).await, 302);
        editor.start().unwrap();
        assert_eq!(first_answer(port).await, 302, "started once");

        // Ended, it starts again on another port of its own, behind the same one.
        let child = editor.child.as_mut().unwrap();
        super::super::boot::kill_tree(child.id().unwrap());
        child.wait().await.unwrap();
        editor.start().unwrap();
        assert_eq!(first_answer(port).await, 302, "started again");
    }
}
