//! The changes panel's capture (a benchmark, not a test): a repository of 20,000 files with
//! 200 changed since the base commit (committed, uncommitted and untracked alike), read by
//! `inspect_changes::capture` as the supervisor does after each turn. Median of 9.
//!
//! Run: `cargo run --release -p inspect-bench -- changes`
//! (`INSPECT_FILES=20000`, `INSPECT_CHANGED=200` change the sizes).

use anyhow::{ensure, Result};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()?;
    ensure!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub async fn benchmark() -> Result<()> {
    let (files, changed) = (
        number("INSPECT_FILES", 20_000),
        number("INSPECT_CHANGED", 200),
    );
    let dir = tempfile::tempdir()?;
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"])?;
    for i in 0..files {
        let sub = p.join(format!("src/m{:03}", i % 500));
        std::fs::create_dir_all(&sub)?;
        let body: String = (0..40).map(|l| format!("// file {i} line {l}\n")).collect();
        std::fs::write(sub.join(format!("f{i:05}.rs")), body)?;
    }
    git(p, &["add", "-A"])?;
    git(p, &["commit", "-qm", "base"])?;
    let base = git(p, &["rev-parse", "HEAD"])?;
    // A third committed, a third modified and not committed, a third new and untracked.
    for i in 0..changed {
        let file = p.join(format!("src/m{:03}/f{i:05}.rs", i % 500));
        match i % 3 {
            0 | 1 => {
                let mut body = std::fs::read_to_string(&file)?;
                body.push_str(&format!("// changed {i}\n"));
                std::fs::write(&file, body.replace("line 3\n", "line three\n"))?;
            }
            _ => std::fs::write(p.join(format!("src/new{i:05}.rs")), "fn main() {}\n")?,
        }
        if i % 3 == 0 {
            git(p, &["commit", "-qam", &format!("change {i}")])?;
        }
    }
    let mut times = Vec::new();
    for _ in 0..9 {
        let t = Instant::now();
        let c = inspect_changes::capture(p, "bench/repo", &base, Default::default()).await?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        ensure!(
            c.files.len() == changed,
            "{} files changed, not {changed}",
            c.files.len()
        );
        ensure!(c.files.iter().all(|f| f.patch.is_some()));
    }
    times.sort_by(f64::total_cmp);
    println!(
        "changes-bench: {files} files, {changed} changed: capture median {:.1} ms (min {:.1}, max {:.1}) over {} runs",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        times.len()
    );
    Ok(())
}
