//! `scripts/provider-smoke.sh` — the first calls to make on a real vendor account — run
//! against each vendor's fake, which answers as the vendor documents: every read-only call
//! answers as the provider's code expects, and so does `--create` where it makes and
//! deletes one sandbox. A wrong key fails the script, naming the call.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::fakes::{
    daytona::FakeDaytona, e2b::FakeE2b, kubernetes::FakeKubernetes, modal::FakeModal,
    opencomputer::FakeOpenComputer, vercel::FakeVercel,
};

/// Runs the script for `vendor` with `vars` (the settings the Worker would read) and
/// `args`; its success and what it printed.
async fn smoke(vendor: &str, vars: &[(String, String)], args: &[&str]) -> (bool, String) {
    let mut cmd =
        tokio::process::Command::new(inspect_tests::root().join("scripts/provider-smoke.sh"));
    cmd.arg(vendor).args(args).env_clear();
    cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().await.unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn with(vars: &[(String, String)], name: &str, value: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = vars.iter().filter(|(k, _)| k != name).cloned().collect();
    v.push((name.into(), value.into()));
    v
}

async fn passes(vendor: &str, vars: Vec<(String, String)>, key: &str, create: bool) {
    let (ok, said) = smoke(vendor, &vars, &[]).await;
    assert!(ok, "{vendor}:\n{said}");
    assert!(!said.contains("FAIL"), "{vendor}:\n{said}");
    if create {
        let (ok, said) = smoke(vendor, &vars, &["--create"]).await;
        assert!(ok, "{vendor} --create:\n{said}");
    }
    let (ok, said) = smoke(vendor, &with(&vars, key, "not-the-key"), &[]).await;
    assert!(!ok, "{vendor} with a wrong {key} passed:\n{said}");
    assert!(said.contains("FAIL"), "{said}");
}

#[tokio::test]
async fn the_smoke_calls_answer_as_the_providers_expect_on_every_fake() {
    let e2b = FakeE2b::start(vec![]).await.unwrap();
    passes("e2b", e2b.worker_vars(), "E2B_API_KEY", true).await;
    let daytona = FakeDaytona::start(vec![]).await.unwrap();
    passes("daytona", daytona.worker_vars(), "DAYTONA_API_KEY", true).await;
    let vercel = FakeVercel::start(vec![]).await.unwrap();
    passes("vercel", vercel.worker_vars(), "VERCEL_TOKEN", false).await;
    let oc = FakeOpenComputer::start(vec![]).await.unwrap();
    passes(
        "opencomputer",
        oc.worker_vars(),
        "OPENCOMPUTER_API_KEY",
        true,
    )
    .await;
    let modal = FakeModal::start(vec![], vec![]).await.unwrap();
    let (ok, said) = smoke("modal", &modal.worker_vars(), &[]).await;
    assert!(ok, "modal:\n{said}");
    let k8s = FakeKubernetes::start(vec![], vec![]).await.unwrap();
    passes("kubernetes", k8s.worker_vars(), "K8S_TOKEN", false).await;
}
