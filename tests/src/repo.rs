//! Real git repositories for the suites: a source repository on the host, and git run the
//! way a test wants it (fails loudly, answers stdout).

use std::path::Path;
use std::process::Command;

/// Runs git in `dir`; panics with git's stderr when it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("running git {args:?}: {e}"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Commits everything in a repository as its owner.
pub fn commit_all(repo: &Path, message: &str) {
    git(repo, &["add", "."]);
    git(
        repo,
        &[
            "-c",
            "user.name=Owner",
            "-c",
            "user.email=owner@example.com",
            "commit",
            "--quiet",
            "-m",
            message,
        ],
    );
}

/// Makes `dir` a repository with one commit (a README) on `main`.
pub fn init_repo(dir: &Path) {
    git(dir, &["init", "--quiet", "-b", "main"]);
    std::fs::write(dir.join("README.md"), "# demo\n").unwrap_or_else(|e| panic!("{e}"));
    commit_all(dir, "initial");
}

/// A fresh repository on the host with one commit on `main`.
pub fn source_repo() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("inspect-src-")
        .tempdir()
        .unwrap_or_else(|e| panic!("{e}"));
    init_repo(dir.path());
    dir
}
