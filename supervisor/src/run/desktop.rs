//! The desktop people watch: a virtual display (Xvfb) with a window manager (Openbox),
//! started when a person first asks for it, and two VNC servers on it (x11vnc): one that
//! only shows the display, one that takes the person's mouse and keys. Each listens on a
//! socket of its own that only this sandbox's processes reach; websockify serves noVNC's
//! page and carries its WebSocket to that socket, on the port the provider put behind its
//! gate (`INSPECT_DESKTOP_VIEW_PORT`, `INSPECT_DESKTOP_CONTROL_PORT`; a gated sandbox's
//! fixed pair). It listens on loopback only: the gate is the one way in. The agent's
//! browser asks the agent API for the display and runs on it while the desktop is open.
//! Everything ends with the sandbox (the supervisor's process group).

use inspect_protocol::desktop::{
    DESKTOP_CONTROL_PORT, DESKTOP_HEIGHT, DESKTOP_VIEW_PORT, DESKTOP_WIDTH,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::process::{Child, Command};

/// Where the host tells the supervisor the ports noVNC is to listen on.
pub const VIEW_PORT_VAR: &str = "INSPECT_DESKTOP_VIEW_PORT";
pub const CONTROL_PORT_VAR: &str = "INSPECT_DESKTOP_CONTROL_PORT";
/// noVNC's page and scripts, as Debian's `novnc` installs them.
const NOVNC_DIR: &str = "usr/share/novnc";
/// The programs the desktop needs, as the image (Debian's packages) puts them.
const PROGRAMS: [&str; 3] = ["usr/bin/Xvfb", "usr/bin/x11vnc", "usr/bin/websockify"];
/// The displays tried, from the first one free.
const DISPLAYS: std::ops::Range<u32> = 90..190;

/// Whether the desktop's programs are installed under `root` (`/`, or an image's root).
pub fn installed(root: &Path) -> bool {
    PROGRAMS.iter().all(|p| root.join(p).exists()) && root.join(NOVNC_DIR).join("vnc.html").exists()
}

/// The display the desktop is on while it runs, shared with the agent API (which the
/// agent's browser asks).
pub type Display = Arc<Mutex<Option<String>>>;

struct Running {
    display: String,
    server: Child,
    /// The window manager, the two VNC servers and their two websockify.
    others: Vec<Child>,
    _sockets: tempfile::TempDir,
}

pub struct Desktop {
    ports: Option<(u16, u16)>,
    logs: PathBuf,
    running: Option<Running>,
    shown: Display,
}

impl Desktop {
    /// The desktop as this sandbox's environment describes it; in a gated sandbox (a
    /// cloud vendor's) noVNC takes the desktop's usual ports, behind its gates.
    pub fn from_env(root: &Path, gated: bool) -> Desktop {
        let port = |var: &str| std::env::var(var).ok().and_then(|p| p.parse().ok());
        let ports = match (port(VIEW_PORT_VAR), port(CONTROL_PORT_VAR)) {
            (Some(v), Some(c)) => Some((v, c)),
            _ => gated.then_some((DESKTOP_VIEW_PORT, DESKTOP_CONTROL_PORT)),
        };
        Desktop {
            ports,
            logs: root.join("desktop"),
            running: None,
            shown: Display::default(),
        }
    }

    /// The display, as the agent API shows it.
    pub fn display(&self) -> Display {
        self.shown.clone()
    }

    /// Starts the display and its servers unless they run; the display, or what went
    /// wrong in words.
    pub async fn start(&mut self) -> Result<String, String> {
        if let Some(running) = self.running.as_mut() {
            let all_up = std::iter::once(&mut running.server)
                .chain(running.others.iter_mut())
                .all(|c| matches!(c.try_wait(), Ok(None)));
            if all_up {
                return Ok(running.display.clone());
            }
            tracing::warn!("the desktop had ended in part; starting it again");
        }
        // Whatever is left of an earlier one goes first (dropping kills it).
        self.running = None;
        *lock(&self.shown) = None;
        let Some((view_port, control_port)) = self.ports else {
            return Err("this sandbox's provider exposes no port for the desktop".into());
        };
        if !installed(Path::new("/")) {
            return Err(
                "the desktop is not installed in this sandbox (Debian's xvfb, x11vnc, websockify and novnc)"
                    .into(),
            );
        }
        std::fs::create_dir_all(&self.logs)
            .map_err(|e| format!("making the desktop's folder: {e}"))?;
        let (display, server) = self.display_server().await?;
        // Short paths: a socket's path has at most 107 bytes.
        let sockets = tempfile::Builder::new()
            .prefix("desktop-")
            .tempdir()
            .map_err(|e| format!("making the desktop's sockets' folder: {e}"))?;
        let mut others = Vec::new();
        if Path::new("/usr/bin/openbox").exists() {
            others.push(self.spawn("openbox", &["--sm-disable"], &display, "openbox")?);
        }
        for (name, port, view_only) in [("view", view_port, true), ("control", control_port, false)]
        {
            let socket = sockets.path().join(format!("{name}.sock"));
            let socket_arg = socket.display().to_string();
            let mut vnc = vec![
                "-display",
                display.as_str(),
                "-unixsock",
                socket_arg.as_str(),
                "-rfbport",
                "0",
                "-nopw",
                "-forever",
                "-shared",
                "-quiet",
            ];
            if view_only {
                vnc.push("-viewonly");
            }
            others.push(self.spawn("x11vnc", &vnc, &display, &format!("x11vnc-{name}"))?);
            let web = Path::new("/").join(NOVNC_DIR).display().to_string();
            let target = format!("--unix-target={socket_arg}");
            let listen = format!("127.0.0.1:{port}");
            others.push(self.spawn(
                "websockify",
                &["--web", web.as_str(), listen.as_str(), target.as_str()],
                &display,
                &format!("websockify-{name}"),
            )?);
        }
        let on = display.as_str();
        tracing::info!(on, view_port, control_port, "desktop started");
        *lock(&self.shown) = Some(display.clone());
        self.running = Some(Running {
            display: display.clone(),
            server,
            others,
            _sockets: sockets,
        });
        Ok(display)
    }

    /// Xvfb on the first display free (a sandbox without a /tmp of its own shares the
    /// host's):
    /// the display once its socket is there, and the server.
    async fn display_server(&self) -> Result<(String, Child), String> {
        let screen = format!("{DESKTOP_WIDTH}x{DESKTOP_HEIGHT}x24");
        for n in DISPLAYS {
            let display = format!(":{n}");
            let mut server = self.spawn(
                "Xvfb",
                // Its socket in the sandbox's own /tmp alone: no TCP, and no abstract
                // socket (which anything sharing the host's network could reach).
                &[
                    display.as_str(),
                    "-screen",
                    "0",
                    screen.as_str(),
                    "-nolisten",
                    "tcp",
                    "-nolisten",
                    "local",
                ],
                "",
                "xvfb",
            )?;
            let socket = PathBuf::from(format!("/tmp/.X11-unix/X{n}"));
            let mut waited = 0;
            loop {
                if let Ok(Some(_)) = server.try_wait() {
                    break; // taken: the next one
                }
                if socket.exists() {
                    return Ok((display, server));
                }
                if waited >= 100 {
                    let _ = server.kill().await;
                    return Err(format!(
                        "the display server did not start within 5 s; see {}",
                        self.logs.join("xvfb.log").display()
                    ));
                }
                waited += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Err(format!(
            "no display could be started (tried :{}–:{}); see {}",
            DISPLAYS.start,
            DISPLAYS.end - 1,
            self.logs.join("xvfb.log").display()
        ))
    }

    /// One of the desktop's programs, on `display`, its output in its own log, without the
    /// sandbox's token.
    fn spawn(
        &self,
        program: &str,
        args: &[&str],
        display: &str,
        log: &str,
    ) -> Result<Child, String> {
        let out = std::fs::File::create(self.logs.join(format!("{log}.log")))
            .map_err(|e| format!("making the desktop's log: {e}"))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("making the desktop's log: {e}"))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_remove("INSPECT_SANDBOX_TOKEN")
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        match display.is_empty() {
            true => cmd.env_remove("DISPLAY"),
            false => cmd.env("DISPLAY", display),
        };
        cmd.spawn().map_err(|e| format!("starting {program}: {e}"))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installed_means_every_program_and_novnc() {
        let root = tempfile::tempdir().unwrap();
        assert!(!installed(root.path()));
        for p in PROGRAMS {
            let at = root.path().join(p);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(at, "").unwrap();
        }
        assert!(!installed(root.path()), "noVNC's page is needed too");
        std::fs::create_dir_all(root.path().join(NOVNC_DIR)).unwrap();
        std::fs::write(root.path().join(NOVNC_DIR).join("vnc.html"), "").unwrap();
        assert!(installed(root.path()));
    }

    #[test]
    fn a_gated_sandbox_takes_the_usual_ports() {
        let root = tempfile::tempdir().unwrap();
        if std::env::var_os(VIEW_PORT_VAR).is_none() {
            let d = Desktop::from_env(root.path(), true);
            assert_eq!(d.ports, Some((DESKTOP_VIEW_PORT, DESKTOP_CONTROL_PORT)));
            assert_eq!(Desktop::from_env(root.path(), false).ports, None);
        }
    }
}
