//! What changed in a workspace repository since the session's base commit, as git says it:
//! each file added, modified, deleted, renamed or copied with its line counts, and its
//! unified diff, bounded per file and in total ([`inspect_protocol::changes`]).
//!
//! Uncommitted work counts, untracked files too: the worktree is staged into a copy of the
//! repository's index (`GIT_INDEX_FILE`), never into the index the agent's git uses. The
//! copy keeps git's stat cache, so only files that changed are read again. The diff is
//! streamed: a 50 MB generated file costs a pipe's worth of reading, not its size in memory.

use anyhow::{bail, Context, Result};
use inspect_protocol::changes::{
    ChangeKind, ChangedFile, PatchOmitted, RepoChanges, MAX_FILES_LISTED, MAX_PATCH_BYTES_PER_FILE,
    MAX_PATCH_BYTES_TOTAL,
};
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// How much of the diffs to keep: the protocol's limits, smaller in tests.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub per_file: usize,
    pub total: usize,
    pub files: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            per_file: MAX_PATCH_BYTES_PER_FILE,
            total: MAX_PATCH_BYTES_TOTAL,
            files: MAX_FILES_LISTED,
        }
    }
}

/// One git command in `dir` with the staging index, its stdout (an error with its stderr).
async fn git(dir: &Path, index: &Path, args: &[&str]) -> Result<Vec<u8>> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_INDEX_FILE", index)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("running git {}", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `-z --name-status` listing: kind, path, old path.
fn parse_name_status(out: &[u8]) -> Vec<(ChangeKind, String, Option<String>)> {
    let mut fields = out.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut files = Vec::new();
    while let Some(status) = fields.next() {
        let kind = match status.first() {
            Some(b'A') => ChangeKind::Added,
            Some(b'D') => ChangeKind::Deleted,
            Some(b'R') => ChangeKind::Renamed,
            Some(b'C') => ChangeKind::Copied,
            Some(b'T') => ChangeKind::TypeChanged,
            _ => ChangeKind::Modified,
        };
        let Some(first) = fields.next() else { break };
        if matches!(kind, ChangeKind::Renamed | ChangeKind::Copied) {
            let Some(second) = fields.next() else { break };
            files.push((kind, text(second), Some(text(first))));
        } else {
            files.push((kind, text(first), None));
        }
    }
    files
}

/// The `-z --numstat` listing, in the same order: added and deleted lines (`None` for a
/// binary file).
fn parse_numstat(out: &[u8]) -> Vec<Option<(u64, u64)>> {
    let mut counts = Vec::new();
    let mut fields = out.split(|b| *b == 0).peekable();
    while let Some(field) = fields.next() {
        if field.is_empty() {
            continue;
        }
        // `added\tdeleted\tpath`, or `added\tdeleted\t` then old and new paths (a rename).
        let mut parts = field.splitn(3, |b| *b == b'\t');
        let (added, deleted, path) = (parts.next(), parts.next(), parts.next());
        let number = |p: Option<&[u8]>| p.and_then(|p| std::str::from_utf8(p).ok()?.parse().ok());
        counts.push(match (number(added), number(deleted)) {
            (Some(a), Some(d)) => Some((a, d)),
            _ => None,
        });
        if path.is_none_or(|p| p.is_empty()) {
            fields.next();
            fields.next();
        }
    }
    counts
}

/// Reads the unified diff as it streams: each file's part (split at `diff --git`), kept
/// while under the limits, in the listing's order.
async fn patches(
    dir: &Path,
    index: &Path,
    base: &str,
    limits: Limits,
) -> Result<Vec<Result<String, PatchOmitted>>> {
    let mut child = Command::new("git")
        .args([
            "diff",
            "--cached",
            "-M",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            base,
        ])
        .current_dir(dir)
        .env("GIT_INDEX_FILE", index)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("running git diff")?;
    let stdout = child.stdout.take().context("git diff's output")?;
    let mut reader = BufReader::with_capacity(256 * 1024, stdout);
    let mut out: Vec<Result<String, PatchOmitted>> = Vec::new();
    // The file being read: what is kept of it, its whole size, and whether the capture's
    // total was reached before it fit.
    let mut current: Option<(Vec<u8>, usize, bool)> = None;
    let mut kept = 0usize;
    let mut line = Vec::new();
    let finish = |current: Option<(Vec<u8>, usize, bool)>,
                  out: &mut Vec<Result<String, PatchOmitted>>,
                  kept: &mut usize| {
        if let Some((bytes, size, over_total)) = current {
            out.push(if size > limits.per_file {
                Err(PatchOmitted::TooLarge)
            } else if over_total {
                Err(PatchOmitted::OverTotal)
            } else {
                *kept += bytes.len();
                Ok(text(&bytes))
            });
        }
    };
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).await? == 0 {
            break;
        }
        if line.starts_with(b"diff --git ") {
            finish(current.take(), &mut out, &mut kept);
            let over = out.len() >= limits.files || kept >= limits.total;
            current = Some((Vec::new(), 0, over));
        }
        let Some((bytes, size, over_total)) = current.as_mut() else {
            continue;
        };
        *size += line.len();
        if *over_total || *size > limits.per_file {
            bytes.clear();
        } else if kept + *size > limits.total {
            *over_total = true;
            bytes.clear();
        } else {
            bytes.extend_from_slice(&line);
        }
    }
    finish(current.take(), &mut out, &mut kept);
    let status = child.wait().await?;
    if !status.success() {
        bail!("git diff failed ({status})");
    }
    Ok(out)
}

/// The change of the repository at `dir` (named `repo`, `owner/name`) against `base`.
pub async fn capture(dir: &Path, repo: &str, base: &str, limits: Limits) -> Result<RepoChanges> {
    if !dir.join(".git").exists() {
        bail!("{repo} is not in the workspace any more");
    }
    // A copy of the repository's index, beside it, with the whole worktree staged.
    let real_index = dir.join(".git").join("index");
    let staged = tempfile::Builder::new()
        .prefix("inspect-changes-index")
        .tempfile_in(dir.join(".git"))
        .context("a scratch index")?;
    if real_index.exists() {
        std::fs::copy(&real_index, staged.path()).context("copying the index")?;
    }
    let index = staged.path();
    git(dir, index, &["add", "-A", "--ignore-errors"]).await?;
    let names = git(
        dir,
        index,
        &["diff", "--cached", "-z", "-M", "--name-status", base],
    )
    .await?;
    let counts = git(
        dir,
        index,
        &["diff", "--cached", "-z", "-M", "--numstat", base],
    )
    .await?;
    let listed = parse_name_status(&names);
    let counts = parse_numstat(&counts);
    let patches = patches(dir, index, base, limits).await?;
    let mut out = RepoChanges {
        repo: repo.to_owned(),
        base: base.to_owned(),
        files: Vec::new(),
        more_files: 0,
        additions: 0,
        deletions: 0,
        error: None,
    };
    for (i, (kind, path, old_path)) in listed.into_iter().enumerate() {
        let count = counts.get(i).copied().flatten();
        let (additions, deletions) = count.unwrap_or((0, 0));
        out.additions += additions;
        out.deletions += deletions;
        if out.files.len() >= limits.files {
            out.more_files += 1;
            continue;
        }
        let binary = count.is_none();
        let (patch, omitted) = match patches.get(i) {
            _ if binary => (None, Some(PatchOmitted::Binary)),
            Some(Ok(p)) => (Some(p.clone()), None),
            Some(Err(why)) => (None, Some(*why)),
            None => (None, Some(PatchOmitted::OverTotal)),
        };
        out.files.push(ChangedFile {
            path,
            old_path,
            kind,
            additions,
            deletions,
            binary,
            patch,
            omitted,
        });
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::process::Command as Std;

    fn run(dir: &Path, args: &[&str]) -> String {
        let out = Std::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn repo() -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        run(p, &["init", "-q", "-b", "main"]);
        std::fs::write(p.join("keep.txt"), "a\nb\nc\n").unwrap();
        std::fs::write(p.join("gone.txt"), "bye\n").unwrap();
        std::fs::write(p.join("moved.txt"), "one\ntwo\nthree\nfour\nfive\n").unwrap();
        run(p, &["add", "-A"]);
        run(p, &["commit", "-qm", "base"]);
        let base = run(p, &["rev-parse", "HEAD"]);
        (dir, base)
    }

    #[tokio::test]
    async fn committed_staged_uncommitted_and_untracked_work_all_count() {
        let (dir, base) = repo();
        let p = dir.path();
        // Committed: a modification.
        std::fs::write(p.join("keep.txt"), "a\nB\nc\nd\n").unwrap();
        run(p, &["commit", "-qam", "edit"]);
        // Uncommitted: a deletion and a rename; untracked: a new file with an odd name.
        std::fs::remove_file(p.join("gone.txt")).unwrap();
        std::fs::rename(p.join("moved.txt"), p.join("renamed.txt")).unwrap();
        std::fs::write(p.join("new file\nwith newline.md"), "hello\n").unwrap();
        std::fs::write(p.join("image.bin"), [0u8, 159, 146, 150, 0, 1]).unwrap();
        let index_before = std::fs::read(p.join(".git/index")).unwrap();
        let c = capture(p, "acme/web", &base, Limits::default())
            .await
            .unwrap();
        let by = |path: &str| c.files.iter().find(|f| f.path == path).unwrap().clone();
        let keep = by("keep.txt");
        assert_eq!(
            (keep.kind, keep.additions, keep.deletions),
            (ChangeKind::Modified, 2, 1)
        );
        assert!(keep.patch.as_deref().unwrap().contains("+B\n"));
        assert_eq!(by("gone.txt").kind, ChangeKind::Deleted);
        let renamed = by("renamed.txt");
        assert_eq!(renamed.kind, ChangeKind::Renamed);
        assert_eq!(renamed.old_path.as_deref(), Some("moved.txt"));
        let odd = by("new file\nwith newline.md");
        assert_eq!((odd.kind, odd.additions), (ChangeKind::Added, 1));
        assert!(odd.patch.as_deref().unwrap().contains("+hello"));
        let bin = by("image.bin");
        assert!(bin.binary && bin.patch.is_none());
        assert_eq!(bin.omitted, Some(PatchOmitted::Binary));
        assert_eq!(c.files.len(), 5);
        assert_eq!(c.additions, 2 + 1);
        // The agent's own index was not touched, and nothing was left behind.
        assert_eq!(std::fs::read(p.join(".git/index")).unwrap(), index_before);
        assert_eq!(run(p, &["status", "--porcelain"]).lines().count(), 5);
        let scratch = std::fs::read_dir(p.join(".git"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("inspect-changes")
            })
            .count();
        assert_eq!(scratch, 0);
    }

    #[tokio::test]
    async fn big_changes_stay_bounded() {
        let (dir, base) = repo();
        let p = dir.path();
        // A generated file far past the per-file limit, then many small ones.
        let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(p.join("a-generated.txt"), big).unwrap();
        for i in 0..40 {
            std::fs::write(p.join(format!("f{i:02}.txt")), "x\n".repeat(100)).unwrap();
        }
        let limits = Limits {
            per_file: 64 * 1024,
            total: 4 * 1024,
            files: 30,
        };
        let c = capture(p, "acme/web", &base, limits).await.unwrap();
        let generated = &c.files[0];
        assert_eq!(generated.path, "a-generated.txt");
        assert_eq!(generated.omitted, Some(PatchOmitted::TooLarge));
        assert_eq!(generated.additions, 20_000);
        assert!(c.files[1].patch.is_some(), "the first small ones fit");
        assert!(c
            .files
            .iter()
            .any(|f| f.omitted == Some(PatchOmitted::OverTotal)));
        let kept: usize = c
            .files
            .iter()
            .filter_map(|f| f.patch.as_ref())
            .map(String::len)
            .sum();
        assert!(kept <= 4 * 1024, "{kept}");
        assert_eq!(c.files.len(), 30);
        assert_eq!(c.more_files, 11);
        assert_eq!(c.additions, 20_000 + 40 * 100);
    }

    /// The worst case with the real limits: 5,000 changed files, a 50 MB generated
    /// file, a binary one, names with spaces and a newline. What is kept stays within the
    /// protocol's bounds, and a report of it fits what the Worker takes.
    #[tokio::test]
    async fn five_thousand_files_and_a_fifty_megabyte_one_stay_within_the_real_limits() {
        use inspect_protocol::changes::{ChangesReport, MAX_REPORT_BYTES};
        let (dir, base) = repo();
        let p = dir.path();
        let line = "generated line, long enough to make fifty megabytes quickly\n";
        let big = line.repeat(50 * 1024 * 1024 / line.len());
        std::fs::write(p.join("aa generated.txt"), big).unwrap();
        std::fs::write(p.join("ab logo.png"), [0u8, 159, 146, 150, 0, 1, 2]).unwrap();
        std::fs::write(p.join("ac new\nline.txt"), "x\n").unwrap();
        std::fs::create_dir(p.join("many")).unwrap();
        for i in 0..5_000 {
            std::fs::write(
                p.join("many").join(format!("file {i:04}.txt")),
                format!("{}\n", "y".repeat(2_000)),
            )
            .unwrap();
        }
        let started = std::time::Instant::now();
        let c = capture(p, "acme/web", &base, Limits::default())
            .await
            .unwrap();
        eprintln!("5,003 files and 50 MB captured in {:?}", started.elapsed());
        assert_eq!(c.files.len(), MAX_FILES_LISTED);
        assert_eq!(c.more_files, 5_003 - MAX_FILES_LISTED as u64);
        let generated = c
            .files
            .iter()
            .find(|f| f.path == "aa generated.txt")
            .unwrap();
        assert_eq!(generated.omitted, Some(PatchOmitted::TooLarge));
        let binary = c.files.iter().find(|f| f.path == "ab logo.png").unwrap();
        assert_eq!(binary.omitted, Some(PatchOmitted::Binary));
        assert!(c.files.iter().any(|f| f.path == "ac new\nline.txt"));
        let kept: usize = c
            .files
            .iter()
            .filter_map(|f| f.patch.as_ref())
            .map(String::len)
            .sum();
        assert!(kept <= MAX_PATCH_BYTES_TOTAL, "{kept}");
        assert!(c
            .files
            .iter()
            .any(|f| f.omitted == Some(PatchOmitted::OverTotal)));
        let report = serde_json::to_vec(&ChangesReport { repos: vec![c] }).unwrap();
        assert!(report.len() <= MAX_REPORT_BYTES, "{}", report.len());
    }

    #[tokio::test]
    async fn a_file_name_that_is_not_utf8_is_listed_readably() {
        use std::os::unix::ffi::OsStrExt;
        let (dir, base) = repo();
        let p = dir.path();
        let name = std::ffi::OsStr::from_bytes(b"caf\xe9 \xff.txt");
        std::fs::write(p.join(name), "x\n").unwrap();
        let c = capture(p, "acme/web", &base, Limits::default())
            .await
            .unwrap();
        assert_eq!(c.files.len(), 1);
        let f = &c.files[0];
        assert_eq!(f.path, "caf\u{fffd} \u{fffd}.txt");
        assert_eq!((f.kind, f.additions), (ChangeKind::Added, 1));
        assert!(f.patch.as_deref().unwrap().contains("+x"));
    }

    #[tokio::test]
    async fn a_repository_gone_from_the_workspace_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = capture(
            &dir.path().join("nope"),
            "acme/web",
            "HEAD",
            Limits::default(),
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("not in the workspace"), "{e}");
    }
}
