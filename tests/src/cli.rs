//! The `inspect` CLI's binary for the suites that drive it.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The CLI binary: `INSPECT_CLI_BIN`, or built once per test process.
pub fn cli_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("INSPECT_CLI_BIN") {
            return PathBuf::from(p);
        }
        let root = crate::root();
        let status = Command::new("cargo")
            .args(["build", "--quiet", "-p", "inspect-cli"])
            .current_dir(&root)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the CLI failed");
        crate::stack::target_dir().join("debug/inspect")
    })
    .clone()
}

/// What `inspect` did on a terminal: its exit code and everything it drew, escape
/// sequences and all (`text` has them taken out).
pub struct OnTerminal {
    pub code: u32,
    pub raw: String,
    pub text: String,
}

/// Runs `inspect ARGS` on a pseudo-terminal (100×40), as a person's shell would, with
/// `envs` set (and `INSPECT_TOKEN` unset), to its end; blocking: call it from
/// `spawn_blocking`.
pub fn on_terminal(args: &[&str], dir: &std::path::Path, envs: &[(&str, &str)]) -> OnTerminal {
    Terminal::start(args, dir, envs).finish()
}

/// `inspect` running on a pseudo-terminal that a test types into and reads as it goes.
pub struct Terminal {
    writer: Box<dyn std::io::Write + Send>,
    drawn: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    reading: Option<std::thread::JoinHandle<()>>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Terminal {
    /// Starts `inspect ARGS` and keeps reading what it draws.
    pub fn start(args: &[&str], dir: &std::path::Path, envs: &[(&str, &str)]) -> Terminal {
        use portable_pty::{native_pty_system, CommandBuilder, PtySize};
        use std::io::Read;
        let pty = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 100,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("a pseudo-terminal");
        let mut cmd = CommandBuilder::new(cli_bin());
        cmd.args(args);
        cmd.cwd(dir);
        cmd.env_remove("INSPECT_TOKEN");
        cmd.env("TERM", "xterm-256color");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = pty.slave.spawn_command(cmd).expect("inspect starts");
        drop(pty.slave);
        let mut reader = pty
            .master
            .try_clone_reader()
            .expect("the terminal's output");
        let drawn = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = drawn.clone();
        let reading = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut all) = sink.lock() {
                    all.extend_from_slice(&buf[..n]);
                }
            }
        });
        let writer = pty.master.take_writer().expect("the terminal's input");
        Terminal {
            writer,
            drawn,
            reading: Some(reading),
            child,
            _master: pty.master,
        }
    }

    /// Types a line (and Enter).
    pub fn type_line(&mut self, line: &str) {
        self.writer
            .write_all(format!("{line}\r").as_bytes())
            .and_then(|_| self.writer.flush())
            .expect("typing reaches the terminal");
    }

    /// Everything drawn so far, escape sequences taken out.
    pub fn text(&self) -> String {
        let raw = self.drawn.lock().map(|d| d.clone()).unwrap_or_default();
        String::from_utf8_lossy(&strip_ansi_escapes::strip(&raw)).into_owned()
    }

    /// Ctrl-C, as a person detaches.
    pub fn interrupt(&mut self) {
        let _ = self.writer.write_all(&[3]);
        let _ = self.writer.flush();
    }

    /// Waits for the process to end (blocking) and for the last of what it drew.
    pub fn finish(mut self) -> OnTerminal {
        let code = self.child.wait().map(|s| s.exit_code()).unwrap_or(u32::MAX);
        // Only the child held the terminal's other end: reading ends with it.
        if let Some(reading) = self.reading.take() {
            let _ = reading.join();
        }
        let raw = self.drawn.lock().map(|d| d.clone()).unwrap_or_default();
        OnTerminal {
            code,
            text: String::from_utf8_lossy(&strip_ansi_escapes::strip(&raw)).into_owned(),
            raw: String::from_utf8_lossy(&raw).into_owned(),
        }
    }

    /// Its exit code, once it has ended.
    pub fn exited(&mut self) -> Option<u32> {
        self.child.try_wait().ok().flatten().map(|s| s.exit_code())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}
