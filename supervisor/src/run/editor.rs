//! The sandbox's editor: code-server, started when a person first asks for it, on the port
//! the provider put behind its gate (`INSPECT_EDITOR_PORT`), opened on the primary
//! repository, with the agent's tools on its PATH but none of the sandbox's credentials.
//! It listens on loopback only: the gate is the one way in. It ends with the sandbox (it is
//! in the supervisor's process group, which the provider stops whole).
//!
//! code-server listens a moment before it has its pages (it answers 404 meanwhile), so it
//! listens on a port of its own and the editor's port relays to it: a connection made
//! while it starts waits until its `/healthz` answers (or is told, in a 502, that it did
//! not start).

use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// How long code-server has to answer once started.
const READY_WAIT: Duration = Duration::from_secs(90);

/// Where code-server is, as the editor's port sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upstream {
    Starting,
    /// Answering on its own port.
    Ready(u16),
    /// Ended, or silent for [`READY_WAIT`], before it answered.
    Failed,
}

pub struct Editor {
    bin: Option<PathBuf>,
    port: Option<u16>,
    folder: PathBuf,
    state: PathBuf,
    path_prefix: Option<PathBuf>,
    child: Option<Child>,
    /// Where code-server is now.
    upstream: watch::Sender<Upstream>,
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
            upstream: watch::Sender::new(Upstream::Starting),
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
        let own = super::agent::free_port()
            .map_err(|e| format!("finding a port for code-server: {e}"))?;
        if !self.relaying {
            let listener = std::net::TcpListener::bind(("127.0.0.1", port))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .and_then(TcpListener::from_std)
                .map_err(|e| format!("listening on the editor's port {port}: {e}"))?;
            tokio::spawn(relay(listener, self.upstream.subscribe()));
            self.relaying = true;
        }
        self.upstream.send_replace(Upstream::Starting);
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
        let pid = child.id().unwrap_or_default();
        self.child = Some(child);
        tokio::spawn(announce_when_ready(own, pid, self.upstream.clone()));
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

/// Whether process `pid` has ended (gone, or a zombie not yet reaped).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        // The state follows the command's closing parenthesis.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Tells the relay code-server's port once its `/healthz` answers 200 (its pages are
/// registered by then), or that it will not: process `pid` ended first, or it was silent
/// for [`READY_WAIT`].
async fn announce_when_ready(own: u16, pid: u32, upstream: watch::Sender<Upstream>) {
    let client = match reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!("no client to ask code-server with: {e}");
            upstream.send_replace(Upstream::Failed);
            return;
        }
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
            upstream.send_replace(Upstream::Ready(own));
            return;
        }
        if ended(pid) {
            tracing::warn!(own, "code-server ended before it answered");
            upstream.send_replace(Upstream::Failed);
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::warn!(own, "code-server did not answer in {READY_WAIT:?}");
    upstream.send_replace(Upstream::Failed);
}

/// The editor's port: each connection waits while code-server starts, then is spliced to
/// it, or answered 502 when it did not start.
async fn relay(listener: TcpListener, upstream: watch::Receiver<Upstream>) {
    while let Ok((mut inbound, _)) = listener.accept().await {
        let mut upstream = upstream.clone();
        tokio::spawn(async move {
            let now = upstream
                .wait_for(|u| *u != Upstream::Starting)
                .await
                .map_or(Upstream::Failed, |u| *u);
            let outbound = match now {
                Upstream::Ready(own) => TcpStream::connect(("127.0.0.1", own)).await.ok(),
                _ => None,
            };
            match outbound {
                Some(mut outbound) => {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
                None => {
                    // The request is read first: one closed on unread bytes is reset, and
                    // the browser would see no answer at all.
                    let _ = crate::host::head::read_head(&mut inbound).await;
                    let _ = crate::host::head::answer(
                        &mut inbound,
                        "502 Bad Gateway",
                        &[],
                        "The editor did not start: code-server.log in the editor's folder says why.\n",
                    )
                    .await;
                }
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

    fn editor(bin: PathBuf, dir: &Path) -> (Editor, u16) {
        let folder = dir.join("repo");
        std::fs::create_dir_all(&folder).unwrap();
        let port = super::super::agent::free_port().unwrap();
        let editor = Editor {
            bin: Some(bin),
            port: Some(port),
            folder,
            state: dir.join("editor"),
            path_prefix: None,
            child: None,
            upstream: watch::Sender::new(Upstream::Starting),
            relaying: false,
        };
        (editor, port)
    }

    #[tokio::test]
    async fn a_code_server_that_ends_at_once_is_answered_502_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let (mut editor, port) = editor("/bin/false".into(), dir.path());
        editor.start().unwrap();
        let asked = std::time::Instant::now();
        assert_eq!(first_answer(port).await, 502);
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "{:?}",
            asked.elapsed()
        );
    }

    #[tokio::test]
    async fn a_request_made_while_code_server_starts_gets_its_pages_not_a_404() {
        let Some(bin) = std::env::var_os("INSPECT_CODE_SERVER_BIN") else {
            eprintln!("skipped: INSPECT_CODE_SERVER_BIN is not set (scripts/test.sh sets it)");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let (mut editor, port) = editor(bin.into(), dir.path());
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
