//! A sandbox of the local host that starts from a snapshot or a prebuilt image unpacks the
//! archive itself, while it starts: the host names the archive and the supervisor streams
//! it into the sandbox's root. A snapshot holds the agent's state ahead of the workspace,
//! so the agent can start as soon as its part is in place and load while the (much larger)
//! workspace is written; an image holds no agent state, so the agent starts at once.

use anyhow::{Context, Result};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use tokio::sync::oneshot;

/// The archive to unpack into the sandbox's root (set by the local host).
const ARCHIVE_VAR: &str = "INSPECT_RESTORE_ARCHIVE";
/// `snapshot` (holds the agent's state under `agent/`) or `image` (holds none).
const KIND_VAR: &str = "INSPECT_RESTORE_KIND";

/// The top-level folder of a snapshot that holds the agent's state.
const AGENT_PART: &str = "agent";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    pub archive: PathBuf,
    /// Whether the agent must wait for its state from the archive.
    pub holds_agent_state: bool,
}

impl Restore {
    /// The variables the host gives the sandbox's supervisor; [`Restore::from_env`] reads them.
    pub fn env(&self) -> [(&'static str, std::ffi::OsString); 2] {
        let kind = if self.holds_agent_state {
            "snapshot"
        } else {
            "image"
        };
        [
            (ARCHIVE_VAR, self.archive.clone().into_os_string()),
            (KIND_VAR, kind.into()),
        ]
    }

    pub fn from_env() -> Result<Option<Restore>> {
        let Some(archive) = std::env::var_os(ARCHIVE_VAR).filter(|a| !a.is_empty()) else {
            return Ok(None);
        };
        let holds_agent_state = match std::env::var(KIND_VAR).as_deref() {
            Ok("snapshot") => true,
            Ok("image") => false,
            other => anyhow::bail!("{KIND_VAR} must be snapshot or image, not {other:?}"),
        };
        Ok(Some(Restore {
            archive: archive.into(),
            holds_agent_state,
        }))
    }
}

/// What an unpack wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Unpacked {
    pub entries: u64,
    pub bytes: u64,
}

/// An unpack under way on a blocking thread.
pub struct Unpacking {
    agent_state: Option<oneshot::Receiver<()>>,
    task: tokio::task::JoinHandle<Result<Unpacked>>,
}

impl Unpacking {
    pub fn start(restore: Restore, root: PathBuf) -> Unpacking {
        let (tx, rx) = oneshot::channel();
        let task = tokio::task::spawn_blocking(move || unpack(&restore, &root, Some(tx)));
        Unpacking {
            agent_state: Some(rx),
            task,
        }
    }

    /// Returns once the agent's state is in place (or the unpack has ended, well or not:
    /// [`Unpacking::finish`] tells which).
    pub async fn agent_state_in_place(&mut self) {
        if let Some(rx) = self.agent_state.take() {
            let _ = rx.await;
        }
    }

    pub async fn finish(self) -> Result<Unpacked> {
        self.task.await.context("the unpack stopped")?
    }
}

/// Unpacks `restore.archive` into `root`, telling `agent_ready` once the agent's state is
/// in place: at once for an archive without it, else when the entries under `agent/` are
/// followed by others or the archive ends (snapshots made before the agent's part came
/// first hold it last, and are then unpacked whole before the agent starts). A file the
/// host has already written fresh into the root (`workspace/.tunnels.env`) is kept.
/// Directories get their recorded times last, once their contents are written.
pub fn unpack(
    restore: &Restore,
    root: &Path,
    mut agent_ready: Option<oneshot::Sender<()>>,
) -> Result<Unpacked> {
    let tell = |slot: &mut Option<oneshot::Sender<()>>| {
        if let Some(tx) = slot.take() {
            let _ = tx.send(());
        }
    };
    if !restore.holds_agent_state {
        tell(&mut agent_ready);
    }
    let file = std::fs::File::open(&restore.archive)
        .with_context(|| format!("opening {}", restore.archive.display()))?;
    let mut archive = tar::Archive::new(BufReader::with_capacity(1 << 20, file));
    archive.set_preserve_mtime(true);
    archive.set_overwrite(true);
    let mut done = Unpacked::default();
    let mut in_agent_part = false;
    let mut directories = Vec::new();
    for entry in archive.entries().context("reading the archive")? {
        let mut entry = entry.context("reading the archive")?;
        let path = entry.path().context("an entry's path")?.into_owned();
        let agent = path.starts_with(AGENT_PART);
        if agent {
            in_agent_part = true;
        } else if in_agent_part {
            tell(&mut agent_ready);
            in_agent_part = false;
        }
        if path == Path::new("workspace/.tunnels.env") && root.join(&path).exists() {
            continue;
        }
        let written = entry
            .unpack_in(root)
            .with_context(|| format!("unpacking {}", path.display()))?;
        if !written {
            tracing::warn!(path = %path.display(), "an archive entry outside the sandbox was skipped");
            continue;
        }
        done.entries += 1;
        done.bytes += entry.size();
        if entry.header().entry_type().is_dir() {
            directories.push(entry);
        }
    }
    tell(&mut agent_ready);
    // Deepest first, so setting a folder's time does not disturb its parent's.
    directories.sort_by(|a, b| b.path_bytes().cmp(&a.path_bytes()));
    for mut dir in directories {
        dir.unpack_in(root).context("setting a folder's times")?;
        // The tar crate makes folders without their recorded time; set it (every entry
        // here was unpacked inside the root above).
        if let (Ok(path), Ok(mtime)) = (dir.path(), dir.header().mtime()) {
            let when = filetime::FileTime::from_unix_time(mtime as i64, 0);
            if let Err(e) = filetime::set_file_mtime(root.join(path), when) {
                tracing::debug!("a folder's time: {e}");
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A root as a sandbox leaves it: an agent part and a workspace.
    fn sandbox_tree(dir: &Path) {
        std::fs::create_dir_all(dir.join("agent/data/opencode")).unwrap();
        std::fs::write(dir.join("agent/data/opencode/opencode.db"), b"state").unwrap();
        std::fs::create_dir_all(dir.join("workspace/repo/src")).unwrap();
        for i in 0..50 {
            std::fs::write(
                dir.join(format!("workspace/repo/src/f{i}.txt")),
                vec![b'x'; i],
            )
            .unwrap();
        }
        std::fs::write(
            dir.join("workspace/.tunnels.env"),
            "TUNNEL_SANDBOX_ID=old\n",
        )
        .unwrap();
        std::os::unix::fs::symlink("src/f1.txt", dir.join("workspace/repo/link")).unwrap();
        std::fs::create_dir_all(dir.join("workspace/repo/empty")).unwrap();
    }

    fn tar(dir: &Path, out: &Path, parts: &[&str]) {
        let ok = Command::new("tar")
            .arg("-cf")
            .arg(out)
            .arg("-C")
            .arg(dir)
            .args(parts)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    /// Which entries were on disk when the agent was told its state is in place.
    fn unpack_watching(restore: &Restore, root: &Path) -> (Unpacked, bool, bool) {
        let (tx, rx) = oneshot::channel();
        let root2 = root.to_path_buf();
        let watcher = std::thread::spawn(move || {
            let told = rx.blocking_recv().is_ok();
            (
                told && root2.join("agent/data/opencode/opencode.db").exists(),
                root2.join("workspace/repo/src/f49.txt").exists(),
            )
        });
        let done = unpack(restore, root, Some(tx)).unwrap();
        let (agent_there, workspace_whole) = watcher.join().unwrap();
        (done, agent_there, workspace_whole)
    }

    #[test]
    fn a_snapshot_with_the_agent_first_tells_before_the_workspace() {
        let src = tempfile::tempdir().unwrap();
        sandbox_tree(src.path());
        let archive = src.path().join("snap.tar");
        tar(src.path(), &archive, &["agent", "workspace"]);
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("workspace")).unwrap();
        std::fs::write(
            root.path().join("workspace/.tunnels.env"),
            "TUNNEL_SANDBOX_ID=new\n",
        )
        .unwrap();
        let restore = Restore {
            archive,
            holds_agent_state: true,
        };
        let (done, agent_there, _) = unpack_watching(&restore, root.path());
        assert!(agent_there, "told before the agent's state was written");
        assert!(done.entries >= 55);
        let r = root.path();
        assert_eq!(
            std::fs::read(r.join("workspace/repo/src/f7.txt")).unwrap(),
            vec![b'x'; 7]
        );
        assert_eq!(
            std::fs::read_link(r.join("workspace/repo/link")).unwrap(),
            Path::new("src/f1.txt")
        );
        assert!(r.join("workspace/repo/empty").is_dir());
        // The host's fresh tunnels file wins over the snapshot's.
        assert_eq!(
            std::fs::read_to_string(r.join("workspace/.tunnels.env")).unwrap(),
            "TUNNEL_SANDBOX_ID=new\n"
        );
        // Times come back as recorded, to the second the archive keeps (git's index relies
        // on the files').
        let time = |p: &Path| {
            let t = std::fs::metadata(p).unwrap().modified().unwrap();
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
        };
        assert_eq!(
            time(&r.join("workspace/repo/src/f3.txt")),
            time(&src.path().join("workspace/repo/src/f3.txt"))
        );
        assert_eq!(
            time(&r.join("workspace/repo/src")),
            time(&src.path().join("workspace/repo/src"))
        );
    }

    #[test]
    fn a_snapshot_with_the_agent_last_tells_only_at_the_end() {
        let src = tempfile::tempdir().unwrap();
        sandbox_tree(src.path());
        let archive = src.path().join("snap.tar");
        tar(src.path(), &archive, &["workspace", "agent"]);
        let root = tempfile::tempdir().unwrap();
        let restore = Restore {
            archive,
            holds_agent_state: true,
        };
        let (_, agent_there, workspace_whole) = unpack_watching(&restore, root.path());
        assert!(agent_there && workspace_whole);
        // No fresh tunnels file: the snapshot's comes back (boot clears a stale one).
        assert!(root.path().join("workspace/.tunnels.env").exists());
    }

    #[test]
    fn an_image_tells_at_once_and_a_broken_archive_is_an_error() {
        let src = tempfile::tempdir().unwrap();
        sandbox_tree(src.path());
        let archive = src.path().join("img.tar");
        tar(src.path(), &archive, &["workspace"]);
        let root = tempfile::tempdir().unwrap();
        let (tx, rx) = oneshot::channel();
        let restore = Restore {
            archive: archive.clone(),
            holds_agent_state: false,
        };
        let done = unpack(&restore, root.path(), Some(tx)).unwrap();
        assert!(rx.blocking_recv().is_ok());
        assert!(done.bytes > 0);

        let bytes = std::fs::read(&archive).unwrap();
        let cut = src.path().join("cut.tar");
        std::fs::write(&cut, &bytes[..bytes.len() / 3 + 100]).unwrap();
        let other = tempfile::tempdir().unwrap();
        let broken = Restore {
            archive: cut,
            holds_agent_state: false,
        };
        assert!(unpack(&broken, other.path(), None).is_err());
        let missing = Restore {
            archive: src.path().join("nope.tar"),
            holds_agent_state: true,
        };
        assert!(unpack(&missing, other.path(), None).is_err());
    }
}
