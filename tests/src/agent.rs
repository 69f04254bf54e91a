//! The whole local stack an agent runs on: the scripted model, the local sandbox host (the
//! real supervisor and OpenCode) and `wrangler dev` in local mode pointed at that host.

use crate::fakes::model::{FakeModel, Reply};
use crate::host::SandboxHost;
use crate::{Stack, StackOptions};
use anyhow::Result;
use std::path::Path;

pub struct AgentStack {
    pub model: FakeModel,
    pub host: SandboxHost,
    pub stack: Stack,
}

/// The model and the local host, before the Worker starts: what a suite adds to the
/// Worker's settings (a vendor's fake and its variables) goes into `options`.
pub struct AgentParts {
    pub model: FakeModel,
    pub host: SandboxHost,
    pub options: StackOptions,
}

impl AgentStack {
    /// Starts the three with the model's script and extra Worker variables.
    pub async fn start(script: Vec<Reply>, vars: Vec<(String, String)>) -> Result<AgentStack> {
        let mut parts = AgentStack::prepare(script).await?;
        parts.options.vars.extend(vars);
        AgentStack::launch(parts).await
    }

    /// [`AgentStack::start`] with the host running its sandboxes in the sandbox image
    /// (`INSPECT_TEST_SANDBOX_IMAGE`, which the test command builds with
    /// `scripts/build-image.sh`); on the host's own filesystem when no image was built.
    pub async fn start_in_image(script: Vec<Reply>) -> Result<AgentStack> {
        let Some(image) = crate::host::test_image() else {
            eprintln!("no INSPECT_TEST_SANDBOX_IMAGE: the sandboxes run on the host's filesystem");
            return AgentStack::start(script, Vec::new()).await;
        };
        let model = FakeModel::start(script).await?;
        let host = SandboxHost::start_with(
            &model.base_url,
            "inspect/fake-model",
            &[("INSPECT_SANDBOX_IMAGE", &image)],
        )
        .await?;
        let mut options = StackOptions::local();
        options.vars = host.worker_vars();
        AgentStack::launch(AgentParts {
            model,
            host,
            options,
        })
        .await
    }

    /// The model and the host, and the Worker's settings that point at them.
    pub async fn prepare(script: Vec<Reply>) -> Result<AgentParts> {
        let model = FakeModel::start(script).await?;
        let host = SandboxHost::start(&model.base_url, "inspect/fake-model").await?;
        let mut options = StackOptions::local();
        options.vars = host.worker_vars();
        Ok(AgentParts {
            model,
            host,
            options,
        })
    }

    /// Starts `wrangler dev` with the parts' settings.
    pub async fn launch(parts: AgentParts) -> Result<AgentStack> {
        let stack = Stack::start_with(parts.options).await?;
        Ok(AgentStack {
            model: parts.model,
            host: parts.host,
            stack,
        })
    }

    /// Registers a local repository as `local/<name>`.
    pub async fn register_repo(&self, name: &str, path: &Path) -> Result<()> {
        crate::client::register_repo(&self.stack.base_url, name, path).await
    }

    /// A new repository registered as `local/demo` and a session on it made by `who`: the
    /// repository (kept as long as the test needs it) and the session's id.
    pub async fn demo_session(&self, who: &str) -> Result<(tempfile::TempDir, String)> {
        let demo = crate::repo::source_repo();
        self.register_repo("demo", demo.path()).await?;
        let id = crate::client::create_session(
            &self.stack.base_url,
            who,
            serde_json::json!({"repositories": [{"owner": "local", "name": "demo"}]}),
        )
        .await?;
        Ok((demo, id))
    }
}
