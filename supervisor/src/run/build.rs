//! `inspect-supervisor build`: inside an image build's sandbox. Clones every repository,
//! runs `.openinspect/setup.sh` in build mode (a failure fails the build; no start hook,
//! no tunnels file) and writes what happened to `INSPECT_BUILD_REPORT` as a
//! [`BuildReport`] without an image: the host snapshots the workspace and reports on.

use super::link::Events;
use super::{var, RunConfig};
use anyhow::{Context, Result};
use inspect_protocol::images::{BuildReport, ImageRepository, OUTPUT_LIMIT};
use inspect_protocol::provider::{BootMode, SpawnRequest};
use inspect_protocol::sandbox::SandboxEvent;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub async fn build() -> Result<()> {
    let started = Instant::now();
    let mut spawn: SpawnRequest =
        serde_json::from_str(&var("INSPECT_SPAWN")?).context("INSPECT_SPAWN")?;
    spawn.boot_mode = BootMode::Build;
    spawn.tunnel_ports.clear();
    let report_path = PathBuf::from(var("INSPECT_BUILD_REPORT")?);
    let cfg = RunConfig {
        workspace: PathBuf::from(var("INSPECT_WORKSPACE")?),
        root: PathBuf::from(var("INSPECT_SANDBOX_ROOT")?),
        opencode: PathBuf::new(),
        agents: super::backend::Binaries {
            claude: PathBuf::new(),
            anthropic_base_url: None,
        },
        base_url: None,
        api_key: None,
        tunnel_wait: Duration::ZERO,
        // A build's secrets (set-up-only ones included) are in its environment.
        setup_secrets: super::link::setup_secrets(),
        spawn,
    };
    let (events, mut seen) = Events::local();
    let outcome = super::boot(&cfg, &events, None).await;
    drop(events);
    // What the steps said: the setup hook's output, each repository's commit.
    let mut output = None;
    let mut commits = Vec::new();
    while let Ok(event) = seen.try_recv() {
        match event {
            SandboxEvent::BootStep {
                step,
                output: Some(o),
                ..
            } if step == "setup" => output = Some(o),
            SandboxEvent::GitSync {
                repo: Some(repo),
                sha: Some(sha),
                ..
            } => commits.push((repo, sha)),
            _ => {}
        }
    }
    let repositories = cfg
        .spawn
        .repositories
        .iter()
        .filter_map(|r| {
            commits
                .iter()
                .find(|(name, _)| *name == r.name)
                .map(|(_, sha)| ImageRepository {
                    owner: r.owner.clone(),
                    name: r.name.clone(),
                    commit: sha.clone(),
                })
        })
        .collect();
    let report = BuildReport {
        success: outcome.is_ok(),
        image_id: None,
        runtime_version: String::new(),
        repositories,
        error: outcome.as_ref().err().map(|e| format!("{e:#}")),
        output: output.map(|o| tail(&o)),
        bytes: None,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    std::fs::write(&report_path, serde_json::to_vec(&report)?)
        .with_context(|| format!("writing {}", report_path.display()))?;
    match outcome {
        Ok(_) => {
            tracing::info!(ms = report.duration_ms, "image workspace built");
            Ok(())
        }
        Err(e) => Err(e.context("building the image")),
    }
}

fn tail(s: &str) -> String {
    if s.len() <= OUTPUT_LIMIT {
        return s.to_owned();
    }
    let mut start = s.len() - OUTPUT_LIMIT;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_owned()
}
