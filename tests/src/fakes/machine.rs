//! What the fake providers share: a sandbox's process started on this machine the way a
//! provider's host would start it (a cleared environment, its own process group, an
//! optional deadline), watched until it ends.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One process to start.
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub workdir: PathBuf,
    /// stdout and stderr go here.
    pub log: PathBuf,
    pub deadline: Option<Duration>,
}

/// How the process ended when nobody stopped it.
pub enum Ended {
    Exited(i32),
    Deadline,
}

/// A started process. Dropping it kills its whole process group at once (what it started
/// too, as a container's end would), also when the test's runtime is already gone.
pub struct Running {
    group: Option<nix::unistd::Pid>,
    stopped: Arc<AtomicBool>,
}

impl Running {
    /// The process group (what a signal to the whole machine reaches).
    pub fn group(&self) -> Option<i32> {
        self.group.map(|g| g.as_raw())
    }

    fn kill(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        if let Some(g) = self.group {
            let _ = nix::sys::signal::killpg(g, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts the process; `on_end` hears how it ended unless the returned [`Running`] was
/// dropped first.
pub fn launch(l: Launch, on_end: impl FnOnce(Ended) + Send + 'static) -> std::io::Result<Running> {
    if let Some(dir) = l.log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let log = std::fs::File::create(&l.log)?;
    let mut child = tokio::process::Command::new(&l.program)
        .args(&l.args)
        .current_dir(&l.workdir)
        .env_clear()
        .envs(l.env)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let group = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
    let stopped = Arc::new(AtomicBool::new(false));
    let watch = Running {
        group,
        stopped: stopped.clone(),
    };
    let deadline = l.deadline.unwrap_or(Duration::from_secs(365 * 24 * 3600));
    tokio::spawn(async move {
        let kill_group = || {
            if let Some(g) = group {
                let _ = nix::sys::signal::killpg(g, nix::sys::signal::Signal::SIGKILL);
            }
        };
        let ended = tokio::select! {
            status = child.wait() => Ended::Exited(status.ok().and_then(|s| s.code()).unwrap_or(137)),
            _ = tokio::time::sleep(deadline) => Ended::Deadline,
        };
        // What the process started goes with it, as with a container.
        kill_group();
        let _ = child.wait().await;
        if !stopped.load(Ordering::SeqCst) {
            on_end(ended);
        }
    });
    Ok(watch)
}

/// The last lines of every log in `dir`, each under its file's name, for failure messages.
pub fn tail_logs(dir: &std::path::Path) -> String {
    let mut out = String::new();
    if let Ok(files) = std::fs::read_dir(dir) {
        for f in files.flatten() {
            let text = std::fs::read_to_string(f.path()).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!(
                "--- {}\n{}\n",
                f.file_name().to_string_lossy(),
                lines[lines.len().saturating_sub(40)..].join("\n")
            ));
        }
    }
    out
}

/// How the sandbox image starts, as `providers/image/Dockerfile` declares it (exec form):
/// its `ENTRYPOINT` and its `CMD`. Each fake runs them the way its vendor's host does.
#[derive(Debug, Clone, Default)]
pub struct ImageStart {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
}

/// The image's start, read from the committed Dockerfile (the last `ENTRYPOINT` and `CMD`,
/// as Docker takes them).
pub fn image_start() -> ImageStart {
    let file = crate::root().join("providers/image/Dockerfile");
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut start = ImageStart::default();
    for line in text.lines() {
        let exec_form = |rest: &str| serde_json::from_str::<Vec<String>>(rest.trim()).ok();
        if let Some(rest) = line.strip_prefix("ENTRYPOINT ") {
            start.entrypoint = exec_form(rest).unwrap_or_default();
            // A new ENTRYPOINT resets the CMD an earlier stage or base gave.
            start.cmd.clear();
        } else if let Some(rest) = line.strip_prefix("CMD ") {
            start.cmd = exec_form(rest).unwrap_or_default();
        }
    }
    start
}

/// A command line as a vendor's host runs it inside the image: its first word, when it is
/// the image's supervisor, is this build's supervisor; anything else is run as named (and
/// fails the way a missing binary does in a container).
pub fn command_line(words: &[String], supervisor: &std::path::Path) -> (PathBuf, Vec<String>) {
    match words.split_first() {
        Some((program, args)) => {
            let program = if program.rsplit('/').next() == Some("inspect-supervisor") {
                supervisor.to_path_buf()
            } else {
                PathBuf::from(program)
            };
            (program, args.to_vec())
        }
        None => (PathBuf::from("/nonexistent/no-command"), vec![]),
    }
}
