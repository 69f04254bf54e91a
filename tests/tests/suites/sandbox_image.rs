//! The sandbox image's definition is checked without a Docker engine
//! (`scripts/check-sandbox-image.sh`): the committed one passes, and one that drifted from
//! the project's pins or runs as root does not.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use std::process::Command;

fn check(dockerfile: &std::path::Path) -> (bool, String) {
    let root = inspect_tests::root();
    let out = Command::new(root.join("scripts/check-sandbox-image.sh"))
        .env("SANDBOX_DOCKERFILE", dockerfile)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn the_image_keeps_the_projects_pins_and_an_unprivileged_user() {
    let committed = inspect_tests::root().join("providers/image/Dockerfile");
    let (ok, said) = check(&committed);
    assert!(ok, "{said}");

    let text = std::fs::read_to_string(&committed).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let drifted = dir.path().join("Dockerfile");
    let bad: String = text
        .lines()
        .map(|l| {
            if l.starts_with("ARG OPENCODE_VERSION=") {
                "ARG OPENCODE_VERSION=1.0.0".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let bad = bad
        .replace("USER 1000:1000\n", "")
        .replace("COPY integrations integrations\n", "")
        .replace("RUN userdel --remove node \\\n && useradd", "RUN useradd")
        .replace(
            "ENTRYPOINT [\"/usr/local/bin/inspect-supervisor\", \"run\"]",
            "ENTRYPOINT [\"/usr/local/bin/inspect-supervisor\"]\nCMD [\"run\"]",
        )
        .replace(
            "FROM node:${NODE_VERSION}",
            "FROM node:latest AS x\nFROM node:${NODE_VERSION}",
        )
        .replace(
            "$(sed 's/#.*//' /tmp/packages | awk '{print $1}')",
            "ca-certificates git python3 bubblewrap",
        );
    std::fs::write(&drifted, bad).unwrap();
    let (ok, said) = check(&drifted);
    assert!(!ok, "{said}");
    for want in [
        "OPENCODE_VERSION 1.0.0 is not package.json's opencode-ai",
        "non-root numeric USER",
        "workspace member integrations/slack is not copied",
        "FROM node:latest is not pinned",
        "the ENTRYPOINT is not the whole start",
        "a CMD is ignored by Daytona",
        "whose user node is uid 1000",
        "does not install the list (providers/image/packages)",
    ] {
        assert!(said.contains(want), "missing {want:?} in:\n{said}");
    }
    // Where the steps can run (root, as in CI), the user step fails as Docker's build did.
    if said.contains("the user steps were not run") {
        eprintln!("the user steps need root here: only the static checks ran");
    } else {
        assert!(
            said.contains("useradd: UID 1000 is not unique")
                && said.contains("the final stage's user steps fail"),
            "{said}"
        );
    }
}
