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

impl AgentStack {
    /// Starts the three with the model's script and extra Worker variables.
    pub async fn start(script: Vec<Reply>, vars: Vec<(String, String)>) -> Result<AgentStack> {
        let model = FakeModel::start(script).await?;
        let host = SandboxHost::start(&model.base_url, "inspect/fake-model").await?;
        let mut options = StackOptions::local();
        options.vars = host.worker_vars();
        options.vars.extend(vars);
        let stack = Stack::start_with(options).await?;
        Ok(AgentStack { model, host, stack })
    }

    /// Registers a local repository as `local/<name>`.
    pub async fn register_repo(&self, name: &str, path: &Path) -> Result<()> {
        crate::client::register_repo(&self.stack.base_url, name, path).await
    }
}
