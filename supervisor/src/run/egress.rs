//! A confined sandbox's side of its way out (the local host's [`crate::host::egress`]):
//! in a network of its own, this supervisor relays its loopback to the host's sockets and
//! the host's gates to its ports, and tells the session what the host's proxy refused.
//!
//! - `127.0.0.1:<proxy port>` → `net/proxy.sock` (the programs here find it through
//!   `HTTP_PROXY` and the like, which the host sets);
//! - `127.0.0.1:N` → `net/port-N.sock`, for each of the session's own services the host
//!   offers (the control plane, the model, a git server on its loopback);
//! - `inbound.sock` ← the host's gates: two bytes of port, answered with one byte (0: the
//!   server here answered), then the connection is the server's;
//! - `net/blocked.jsonl`, which only the host writes, read as it grows: each line an
//!   `egress_blocked` event sent on.
//!
//! Unconfined (no `INSPECT_EGRESS_DIR`), none of this runs.

use super::link::Events;
use crate::host::egress::RELAY_BUFFER;
use inspect_protocol::sandbox::SandboxEvent;
use std::path::{Path, PathBuf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::JoinHandle;

/// The relays of a confined sandbox, running until dropped.
pub struct Relays {
    dir: PathBuf,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Relays {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts the relays if this sandbox is confined. Runs before anything here reaches out.
pub async fn start() -> anyhow::Result<Option<Relays>> {
    let Some(dir) = std::env::var_os("INSPECT_EGRESS_DIR").map(PathBuf::from) else {
        return Ok(None);
    };
    let mut tasks = Vec::new();
    if let Some(port) = std::env::var("INSPECT_EGRESS_PROXY_PORT")
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
    {
        tasks.push(relay_out(port, dir.join("proxy.sock")).await?);
    }
    for entry in std::fs::read_dir(&dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let port = name
            .strip_prefix("port-")
            .and_then(|r| r.strip_suffix(".sock"))
            .and_then(|p| p.parse::<u16>().ok());
        if let Some(port) = port {
            tasks.push(relay_out(port, entry.path()).await?);
        }
    }
    if let Some(socket) = std::env::var_os("INSPECT_INBOUND_SOCKET").map(PathBuf::from) {
        tasks.push(relay_in(&socket)?);
    }
    tracing::info!(dir = %dir.display(), relays = tasks.len(), "confined: the host's ways out relayed");
    Ok(Some(Relays { dir, tasks }))
}

impl Relays {
    /// Sends each refusal the host writes on as an event, as long as the sandbox runs.
    pub fn report_to(&mut self, events: &Events) {
        let file = self.dir.join("blocked.jsonl");
        let events = events.clone();
        self.tasks.push(tokio::spawn(async move {
            let mut offset = 0usize;
            let mut partial = String::new();
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                let Ok(bytes) = tokio::fs::read(&file).await else {
                    continue;
                };
                if bytes.len() <= offset {
                    continue;
                }
                partial.push_str(&String::from_utf8_lossy(&bytes[offset..]));
                offset = bytes.len();
                while let Some(end) = partial.find('\n') {
                    let line: String = partial.drain(..=end).collect();
                    match serde_json::from_str::<SandboxEvent>(line.trim()) {
                        Ok(event @ SandboxEvent::EgressBlocked { .. }) => events.send(event),
                        _ => tracing::warn!("an unreadable refusal line from the host"),
                    }
                }
            }
        }));
    }
}

/// Listens on this sandbox's loopback `port` and carries each connection to `socket`.
async fn relay_out(port: u16, socket: PathBuf) -> anyhow::Result<JoinHandle<()>> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    Ok(tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let socket = socket.clone();
            tokio::spawn(async move {
                if let Ok(mut out) = UnixStream::connect(&socket).await {
                    let _ = tokio::io::copy_bidirectional_with_sizes(
                        &mut conn,
                        &mut out,
                        RELAY_BUFFER,
                        RELAY_BUFFER,
                    )
                    .await;
                }
            });
        }
    }))
}

/// Serves the host's gates: each connection names a port of this sandbox's loopback.
fn relay_in(socket: &Path) -> anyhow::Result<JoinHandle<()>> {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)?;
    Ok(tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut port = [0u8; 2];
                if conn.read_exact(&mut port).await.is_err() {
                    return;
                }
                match TcpStream::connect(("127.0.0.1", u16::from_be_bytes(port))).await {
                    Ok(mut server) => {
                        if conn.write_all(&[0]).await.is_ok() {
                            let _ = tokio::io::copy_bidirectional_with_sizes(
                                &mut conn,
                                &mut server,
                                RELAY_BUFFER,
                                RELAY_BUFFER,
                            )
                            .await;
                        }
                    }
                    Err(_) => {
                        let _ = conn.write_all(&[1]).await;
                    }
                }
            });
        }
    }))
}
