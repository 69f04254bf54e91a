//! What the fakes of sandbox vendors whose machines are started by running a command in
//! them (E2B, Vercel, OpenComputer) share: machines on this machine. A machine is a
//! process group led by an idle init process, with an environment (what the vendor was
//! given when it was made, `/sandbox` mapped to the machine's disk, a directory) and the
//! image's own environment; a command runs with `sh` in that group, so a supervisor it
//! starts in the background lives until the machine ends. Pausing a machine stops the
//! whole group (memory kept), resuming continues it; killing it ends the group. Saving a
//! machine's disk copies the directory, and a machine can be made from such a copy.
//!
//! Also the API's bookkeeping: calls recorded, a call made to fail once.

use crate::fakes::machine::{launch, Ended, Launch, Running};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Inside a machine, the sandbox root.
pub const ROOT: &str = "/sandbox";

/// One vendor sandbox.
pub struct Machine {
    /// What the vendor's API shows of it.
    pub object: Value,
    /// The environment it was made with (as given, not mapped).
    pub env: Vec<(String, String)>,
    pub disk: PathBuf,
    init: Option<Running>,
    paused: bool,
    /// How many times a command started its supervisor... or anything: commands run.
    pub commands: u32,
}

impl Machine {
    pub fn running(&self) -> bool {
        self.init.is_some() && !self.paused
    }
    pub fn alive(&self) -> bool {
        self.init.is_some()
    }
}

#[derive(Default)]
struct State {
    machines: HashMap<String, Machine>,
    fail_next: Vec<(String, u16, String)>,
    calls: Vec<String>,
    clock: u64,
    /// Saved disks by id.
    saved: HashMap<String, PathBuf>,
    /// What the next command starting a supervisor runs instead (a test's way to have a
    /// supervisor end at once, or hang without connecting).
    next_start: Option<String>,
    /// A vendor's account limits a test set (a plan's longest lifetime…), by name.
    limits: HashMap<String, u64>,
}

pub struct Cloud {
    root: PathBuf,
    image_env: Vec<(String, String)>,
    state: Mutex<State>,
    _dir: tempfile::TempDir,
}

/// What a command came to.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Cloud {
    /// `image_env` is the image's own environment (PATH, OpenCode, the model's settings);
    /// the supervisor's directory is put first on its PATH, as the image installs it.
    pub fn new(prefix: &str, image_env: Vec<(String, String)>) -> anyhow::Result<Arc<Cloud>> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
        let supervisor = crate::host::supervisor_bin()?;
        let bin = supervisor
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut image_env: Vec<(String, String)> = image_env
            .into_iter()
            .map(|(k, v)| {
                if k == "PATH" {
                    (k, format!("{bin}:{v}"))
                } else {
                    (k, v)
                }
            })
            .collect();
        if !image_env.iter().any(|(k, _)| k == "PATH") {
            image_env.push(("PATH".into(), format!("{bin}:/usr/local/bin:/usr/bin:/bin")));
        }
        Ok(Arc::new(Cloud {
            root: dir.path().to_owned(),
            image_env,
            state: Mutex::default(),
            _dir: dir,
        }))
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut s)
    }

    /// Records `call` (`METHOD path`); a failure the test asked for, if one matches.
    pub fn admit(&self, call: &str) -> Option<(u16, String)> {
        self.with(|s| {
            s.calls.push(call.to_owned());
            let at = s
                .fail_next
                .iter()
                .position(|(c, ..)| call.starts_with(c.as_str()))?;
            let (_, status, message) = s.fail_next.remove(at);
            Some((status, message))
        })
    }

    pub fn fail_next(&self, call: &str, status: u16, message: &str) {
        self.with(|s| s.fail_next.push((call.into(), status, message.into())));
    }

    pub fn calls(&self) -> Vec<String> {
        self.with(|s| s.calls.clone())
    }

    /// Sets one of the account's limits (what the vendor's fake reads by name).
    pub fn set_limit(&self, name: &str, value: u64) {
        self.with(|s| s.limits.insert(name.into(), value));
    }

    pub fn limit(&self, name: &str) -> Option<u64> {
        self.with(|s| s.limits.get(name).copied())
    }

    /// A new id: `prefix` and a number.
    pub fn next_id(&self, prefix: &str) -> String {
        self.with(|s| {
            s.clock += 1;
            format!("{prefix}{:08}", s.clock)
        })
    }

    /// Reads or changes one machine.
    pub fn machine<T>(&self, id: &str, f: impl FnOnce(&mut Machine) -> T) -> Option<T> {
        self.with(|s| s.machines.get_mut(id).map(f))
    }

    /// Every machine's object, with its id.
    pub fn objects(&self) -> Vec<(String, Value)> {
        self.with(|s| {
            s.machines
                .iter()
                .map(|(id, m)| (id.clone(), m.object.clone()))
                .collect()
        })
    }

    /// Makes a machine with a disk of its own (a copy of a saved disk when `from` is
    /// given) and boots it. `on_end` updates its object when it ends by itself.
    pub fn make(
        self: &Arc<Self>,
        id: &str,
        object: Value,
        env: Vec<(String, String)>,
        from: Option<&str>,
        on_end: fn(&mut Machine, String),
    ) -> Result<(), String> {
        let disk = self.root.join("disks").join(id);
        match from {
            Some(saved) => {
                let Some(src) = self.with(|s| s.saved.get(saved).cloned()) else {
                    return Err(format!("no saved disk {saved}"));
                };
                copy_dir(&src, &disk).map_err(|e| e.to_string())?;
            }
            None => std::fs::create_dir_all(&disk).map_err(|e| e.to_string())?,
        }
        self.with(|s| {
            s.machines.insert(
                id.to_owned(),
                Machine {
                    object,
                    env,
                    disk,
                    init: None,
                    paused: false,
                    commands: 0,
                },
            )
        });
        self.boot(id, on_end)
    }

    /// The machine's environment as its processes see it.
    fn process_env(&self, m: &Machine) -> Vec<(String, String)> {
        let disk = m.disk.display().to_string();
        let mut all = self.image_env.clone();
        all.extend(m.env.iter().map(|(k, v)| {
            let v = match v.strip_prefix(ROOT) {
                Some(rest) => format!("{disk}{rest}"),
                None => v.clone(),
            };
            (k.clone(), v)
        }));
        all
    }

    /// Starts the machine's init (again, after it was stopped: the disk is kept).
    pub fn boot(
        self: &Arc<Self>,
        id: &str,
        on_end: fn(&mut Machine, String),
    ) -> Result<(), String> {
        let Some((env, disk)) = self.with(|s| {
            s.machines
                .get(id)
                .map(|m| (self.process_env(m), m.disk.clone()))
        }) else {
            return Err(format!("no machine {id}"));
        };
        let watcher = self.clone();
        let mid = id.to_owned();
        let init = launch(
            Launch {
                program: PathBuf::from("sleep"),
                args: vec!["infinity".into()],
                env,
                workdir: disk,
                log: self.root.join("logs").join(format!("{id}.init.log")),
                deadline: None,
            },
            move |ended| {
                let why = match ended {
                    Ended::Exited(code) => format!("the machine ended ({code})"),
                    Ended::Deadline => "the machine timed out".into(),
                };
                watcher.machine(&mid, |m| {
                    m.init = None;
                    m.paused = false;
                    on_end(m, why);
                });
            },
        )
        .map_err(|e| e.to_string())?;
        self.machine(id, |m| {
            m.init = Some(init);
            m.paused = false;
        });
        Ok(())
    }

    /// The next command that starts a supervisor (`inspect-supervisor run`) runs `script`
    /// with `sh -c` instead, in the same machine and environment.
    pub fn replace_next_start(&self, script: &str) {
        self.with(|s| s.next_start = Some(script.to_owned()));
    }

    /// Runs `argv` in the machine (its group, its environment, its disk as the working
    /// directory), waiting at most `wait` for it to end.
    pub async fn exec(&self, id: &str, argv: &[String], wait: Duration) -> Result<Ran, String> {
        let mut argv = argv.to_vec();
        if argv.iter().any(|a| a.contains("inspect-supervisor run")) {
            if let Some(script) = self.with(|s| s.next_start.take()) {
                argv = vec!["sh".into(), "-c".into(), script];
            }
        }
        let Some((group, env, disk)) = self.with(|s| {
            s.machines.get_mut(id).map(|m| {
                m.commands += 1;
                (
                    m.init
                        .as_ref()
                        .and_then(Running::group)
                        .filter(|_| !m.paused),
                    self.process_env(m),
                    m.disk.clone(),
                )
            })
        }) else {
            return Err(format!("no machine {id}"));
        };
        let Some(group) = group else {
            return Err(format!("machine {id} is not running"));
        };
        let Some((program, args)) = argv.split_first() else {
            return Err("no command".into());
        };
        let child = tokio::process::Command::new(program)
            .args(args)
            .current_dir(&disk)
            .env_clear()
            .envs(env)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(group)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| e.to_string())?;
        match tokio::time::timeout(wait, child.wait_with_output()).await {
            Ok(Ok(out)) => Ok(Ran {
                code: out.status.code().unwrap_or(137),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("the command timed out".into()),
        }
    }

    fn signal(&self, id: &str, sig: nix::sys::signal::Signal) -> bool {
        self.machine(id, |m| {
            if let Some(g) = m.init.as_ref().and_then(Running::group) {
                let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(g), sig);
                m.paused = sig == nix::sys::signal::Signal::SIGSTOP;
                true
            } else {
                false
            }
        })
        .unwrap_or(false)
    }

    /// Stops every process of the machine where it is (memory kept).
    pub fn pause(&self, id: &str) -> bool {
        self.signal(id, nix::sys::signal::Signal::SIGSTOP)
    }

    /// Continues a paused machine.
    pub fn resume(&self, id: &str) -> bool {
        self.signal(id, nix::sys::signal::Signal::SIGCONT)
    }

    /// Ends the machine's processes; its disk stays.
    pub fn halt(&self, id: &str) {
        let init = self.machine(id, |m| {
            m.paused = false;
            m.init.take()
        });
        drop(init);
    }

    /// Removes the machine and its disk.
    pub fn remove(&self, id: &str) -> Option<Value> {
        let m = self.with(|s| s.machines.remove(id))?;
        let object = m.object.clone();
        let disk = m.disk.clone();
        drop(m);
        let _ = std::fs::remove_dir_all(disk);
        Some(object)
    }

    /// Copies the machine's disk as saved disk `saved_id`.
    pub fn save_disk(&self, id: &str, saved_id: &str) -> Result<u64, String> {
        let Some(disk) = self.with(|s| s.machines.get(id).map(|m| m.disk.clone())) else {
            return Err(format!("no machine {id}"));
        };
        let to = self.root.join("saved").join(saved_id);
        copy_dir(&disk, &to).map_err(|e| e.to_string())?;
        let bytes = dir_bytes(&to);
        self.with(|s| s.saved.insert(saved_id.to_owned(), to));
        Ok(bytes)
    }

    pub fn saved(&self) -> Vec<String> {
        self.with(|s| s.saved.keys().cloned().collect())
    }

    pub fn forget_saved(&self, saved_id: &str) -> bool {
        match self.with(|s| s.saved.remove(saved_id)) {
            Some(dir) => {
                let _ = std::fs::remove_dir_all(dir);
                true
            }
            None => false,
        }
    }

    pub fn logs(&self) -> String {
        let mut out = crate::fakes::machine::tail_logs(&self.root.join("logs"));
        // The supervisors log on their disks.
        let disks: Vec<PathBuf> =
            self.with(|s| s.machines.values().map(|m| m.disk.clone()).collect());
        for d in disks {
            if let Ok(text) = std::fs::read_to_string(d.join("supervisor.log")) {
                let lines: Vec<&str> = text.lines().collect();
                out.push_str(&format!(
                    "--- {}/supervisor.log\n{}\n",
                    d.display(),
                    lines[lines.len().saturating_sub(40)..].join("\n")
                ));
            }
        }
        out
    }

    /// Ends every machine (the fake is going away).
    pub fn end_all(&self) {
        let all: Vec<Machine> = self.with(|s| s.machines.drain().map(|(_, m)| m).collect());
        drop(all);
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!("cp -a ended with {status}")))
    }
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}
