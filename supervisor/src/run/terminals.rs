//! Terminals people open in the sandbox: a login shell on a PTY each, in the workspace,
//! with the agent's tools on its PATH but none of the sandbox's credentials. Output goes to
//! the session as it comes (a burst is held to a steady rate, and what is skipped said),
//! and the newest [`SCROLLBACK_BYTES`] are kept to redraw a browser that (re)attaches.

use super::link::Events;
use base64::Engine;
use inspect_protocol::sandbox::SandboxEvent;
use inspect_protocol::terminal::{MAX_OUTPUT_CHUNK_BYTES, SCROLLBACK_BYTES};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// Output a terminal may send each second, and at once after a quiet spell.
const RATE_BYTES_PER_SEC: f64 = 512.0 * 1024.0;
const BURST_BYTES: f64 = 256.0 * 1024.0;

/// What goes to a terminal's PTY, in order.
enum ToPty {
    Bytes(Vec<u8>),
    Resize(u16, u16),
}

struct Shell {
    to_pty: mpsc::UnboundedSender<ToPty>,
    scrollback: Arc<Mutex<Scrollback>>,
    reader: tokio::task::JoinHandle<()>,
}

/// The newest bytes a terminal printed, at most [`SCROLLBACK_BYTES`].
#[derive(Default)]
pub struct Scrollback(VecDeque<u8>);

impl Scrollback {
    pub fn push(&mut self, bytes: &[u8]) {
        let keep = bytes.len().min(SCROLLBACK_BYTES);
        let over = (self.0.len() + keep).saturating_sub(SCROLLBACK_BYTES);
        self.0.drain(..over);
        self.0.extend(&bytes[bytes.len() - keep..]);
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.0.iter().copied().collect()
    }
}

/// A token bucket: how much output may go now.
pub struct Rate {
    tokens: f64,
    at: Instant,
}

impl Rate {
    pub fn new(now: Instant) -> Rate {
        Rate {
            tokens: BURST_BYTES,
            at: now,
        }
    }

    /// Whether `n` bytes may go at `now` (taking them if so).
    pub fn take(&mut self, n: usize, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * RATE_BYTES_PER_SEC).min(BURST_BYTES);
        self.at = now;
        if self.tokens >= n as f64 {
            self.tokens -= n as f64;
            true
        } else {
            false
        }
    }
}

pub struct Terminals {
    shells: Arc<Mutex<HashMap<String, Shell>>>,
    events: Events,
    /// Where shells start, and what they are given beyond the sandbox's environment.
    directory: PathBuf,
    path_prefix: Option<PathBuf>,
}

fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl Terminals {
    pub fn new(events: Events, directory: PathBuf, path_prefix: Option<PathBuf>) -> Terminals {
        Terminals {
            shells: Arc::default(),
            events,
            directory,
            path_prefix,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Shell>> {
        self.shells.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a login shell on a new PTY; a failure is reported as the terminal's exit.
    pub fn open(&self, id: &str, cols: u16, rows: u16) {
        if self.lock().contains_key(id) {
            return;
        }
        if let Err(e) = self.start(id, cols, rows) {
            tracing::warn!(terminal = id, "no terminal: {e:#}");
            self.events.send(SandboxEvent::TerminalExit {
                terminal_id: id.to_owned(),
                exit_code: None,
                error: Some(format!("the terminal could not start: {e:#}")),
            });
        }
    }

    fn start(&self, id: &str, cols: u16, rows: u16) -> anyhow::Result<()> {
        let (pty, pts) = pty_process::open()?;
        pty.resize(pty_process::Size::new(rows, cols))?;
        let shell = ["/bin/bash", "/usr/bin/bash", "/bin/sh"]
            .into_iter()
            .find(|s| std::path::Path::new(s).exists())
            .unwrap_or("sh");
        let dir = if self.directory.is_dir() {
            self.directory.clone()
        } else {
            std::env::temp_dir()
        };
        let mut cmd = pty_process::Command::new(shell)
            .arg("-l")
            .current_dir(dir)
            .env("TERM", "xterm-256color")
            .env_remove("INSPECT_SANDBOX_TOKEN")
            .kill_on_drop(true);
        if let Some(bin) = &self.path_prefix {
            let path = std::env::var("PATH").unwrap_or_default();
            cmd = cmd.env("PATH", format!("{}:{path}", bin.display()));
        }
        let mut child = cmd.spawn(pts)?;
        let (mut read, mut write) = pty.into_split();
        let (to_pty, mut from_owner) = mpsc::unbounded_channel::<ToPty>();
        tokio::spawn(async move {
            while let Some(next) = from_owner.recv().await {
                let done = match next {
                    ToPty::Bytes(b) => write.write_all(&b).await.is_err(),
                    ToPty::Resize(cols, rows) => {
                        write.resize(pty_process::Size::new(rows, cols)).is_err()
                    }
                };
                if done {
                    break;
                }
            }
        });
        let scrollback = Arc::new(Mutex::new(Scrollback::default()));
        let (events, kept, shells, tid) = (
            self.events.clone(),
            Arc::clone(&scrollback),
            Arc::clone(&self.shells),
            id.to_owned(),
        );
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            let mut rate = Rate::new(Instant::now());
            let mut skipped = 0usize;
            loop {
                let n = match read.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                kept.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(&buf[..n]);
                if !rate.take(n, Instant::now()) {
                    skipped += n;
                    continue;
                }
                let mut out = Vec::with_capacity(n + 64);
                if skipped > 0 {
                    out.extend(format!("\r\n[{skipped} bytes of output skipped]\r\n").bytes());
                    skipped = 0;
                }
                out.extend_from_slice(&buf[..n]);
                events.send(SandboxEvent::TerminalOutput {
                    terminal_id: tid.clone(),
                    data: encode(&out),
                    client: None,
                });
            }
            let code = child.wait().await.ok().and_then(|s| s.code());
            events.send(SandboxEvent::TerminalExit {
                terminal_id: tid.clone(),
                exit_code: code,
                error: None,
            });
            shells
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&tid);
        });
        self.lock().insert(
            id.to_owned(),
            Shell {
                to_pty,
                scrollback,
                reader,
            },
        );
        Ok(())
    }

    pub fn input(&self, id: &str, data: String) {
        if let Some(s) = self.lock().get(id) {
            let _ = s.to_pty.send(ToPty::Bytes(data.into_bytes()));
        }
    }

    pub fn resize(&self, id: &str, cols: u16, rows: u16) {
        if let Some(s) = self.lock().get(id) {
            let _ = s.to_pty.send(ToPty::Resize(cols, rows));
        }
    }

    /// The scroll-back, for one client, in pieces the session takes; at least one (empty
    /// when nothing was printed yet), so the client knows where the replay begins.
    pub fn replay(&self, id: &str, client: &str) {
        let bytes = match self.lock().get(id) {
            Some(s) => s
                .scrollback
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .bytes(),
            None => return,
        };
        let pieces: Vec<&[u8]> = if bytes.is_empty() {
            vec![&[]]
        } else {
            bytes.chunks(MAX_OUTPUT_CHUNK_BYTES).collect()
        };
        for piece in pieces {
            self.events.send(SandboxEvent::TerminalOutput {
                terminal_id: id.to_owned(),
                data: encode(piece),
                client: Some(client.to_owned()),
            });
        }
    }

    /// Ends a terminal: its shell is killed (with the reader that holds it).
    pub fn close(&self, id: &str) {
        if let Some(s) = self.lock().remove(id) {
            s.reader.abort();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_scrollback_keeps_the_newest_bytes() {
        let mut s = Scrollback::default();
        s.push(b"hello ");
        s.push(&vec![b'x'; SCROLLBACK_BYTES]);
        s.push(b"end");
        let kept = s.bytes();
        assert_eq!(kept.len(), SCROLLBACK_BYTES);
        assert!(kept.ends_with(b"xend"));
        assert!(!kept.starts_with(b"hello"));
    }

    #[test]
    fn a_burst_goes_then_the_rate_holds() {
        let t0 = Instant::now();
        let mut r = Rate::new(t0);
        assert!(r.take(200 * 1024, t0));
        assert!(!r.take(100 * 1024, t0), "the burst is spent");
        assert!(r.take(100 * 1024, t0 + Duration::from_millis(300)));
    }

    #[tokio::test]
    async fn a_shell_echoes_what_is_typed_and_its_exit_is_reported() {
        let (events, mut rx) = Events::local();
        let dir = tempfile::tempdir().unwrap();
        let t = Terminals::new(events, dir.path().to_owned(), None);
        t.open("term_1", 80, 24);
        t.input("term_1", "echo $((6*7)); exit 3\r".into());
        let mut seen = Vec::new();
        let code = loop {
            let e = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .unwrap()
                .unwrap();
            match e {
                SandboxEvent::TerminalOutput { data, .. } => seen.extend(
                    base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .unwrap(),
                ),
                SandboxEvent::TerminalExit { exit_code, .. } => break exit_code,
                _ => {}
            }
        };
        let text = String::from_utf8_lossy(&seen);
        assert!(text.contains("42"), "{text}");
        assert_eq!(code, Some(3));
    }
}
