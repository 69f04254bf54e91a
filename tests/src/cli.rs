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
        std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join("target"))
            .join("debug/inspect")
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

/// Runs `inspect ARGS` on a pseudo-terminal (80×40), as a person's shell would, with
/// `envs` set (and `INSPECT_TOKEN` unset); blocking: call it from `spawn_blocking`.
pub fn on_terminal(args: &[&str], dir: &std::path::Path, envs: &[(&str, &str)]) -> OnTerminal {
    use portable_pty::{native_pty_system, CommandBuilder, PtySize};
    use std::io::Read;
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 40,
            cols: 80,
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
    let mut child = pty.slave.spawn_command(cmd).expect("inspect starts");
    // Only the child holds the terminal's other end: reading ends when it exits.
    drop(pty.slave);
    let mut reader = pty
        .master
        .try_clone_reader()
        .expect("the terminal's output");
    let drawn = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        all
    });
    let status = child.wait().expect("inspect ends");
    drop(pty.master);
    let raw = drawn.join().unwrap_or_default();
    OnTerminal {
        code: status.exit_code(),
        text: String::from_utf8_lossy(&strip_ansi_escapes::strip(&raw)).into_owned(),
        raw: String::from_utf8_lossy(&raw).into_owned(),
    }
}
