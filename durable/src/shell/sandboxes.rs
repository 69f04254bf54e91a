//! The session's sandbox provider, asked through the providers Worker: the vendors'
//! clients and their keys live there (`providers/worker`), so the session Worker carries
//! none of them. What a kind of provider can do is known here without asking
//! ([`ProviderKind::capabilities`]).

use inspect_protocol::provider::{
    Capabilities, ProviderError, ProviderKind, Resumed, SandboxInfo, SandboxRef, SnapshotInfo,
    SpawnRequest,
};
use inspect_protocol::providers::ProviderCall as Call;
use std::collections::BTreeMap;
use worker::Env;

/// The provider the settings choose, each call one request over the `PROVIDERS` binding.
pub(super) struct ViaBinding<'a> {
    env: &'a Env,
    kind: ProviderKind,
}

impl<'a> ViaBinding<'a> {
    /// The kind `SANDBOX_PROVIDER` names, or in words why it is none.
    pub(super) fn chosen(env: &'a Env) -> Result<ViaBinding<'a>, String> {
        let setting = inspect_runtime::setting(env, "SANDBOX_PROVIDER");
        ProviderKind::chosen(setting.as_deref()).map(|kind| ViaBinding { env, kind })
    }

    pub(super) fn kind(&self) -> ProviderKind {
        self.kind
    }

    pub(super) fn capabilities(&self) -> Capabilities {
        self.kind.capabilities()
    }

    async fn ask<T: serde::de::DeserializeOwned>(&self, call: Call) -> Result<T, ProviderError> {
        inspect_runtime::binding::ask_providers(self.env, &call).await
    }

    pub(super) async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError> {
        let request = Box::new(req.clone());
        self.ask(Call::Create { request }).await
    }

    pub(super) async fn status(&self, sandbox: &SandboxRef) -> Result<SandboxInfo, ProviderError> {
        let sandbox = sandbox.clone();
        self.ask(Call::Status { sandbox }).await
    }

    pub(super) async fn stop(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let sandbox = sandbox.clone();
        self.ask(Call::Stop { sandbox }).await
    }

    pub(super) async fn discard(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let sandbox = sandbox.clone();
        self.ask(Call::Discard { sandbox }).await
    }

    pub(super) async fn resume(
        &self,
        previous: &SandboxRef,
        req: &SpawnRequest,
    ) -> Result<Resumed, ProviderError> {
        let (previous, request) = (previous.clone(), Box::new(req.clone()));
        self.ask(Call::Resume { previous, request }).await
    }

    pub(super) async fn snapshot(
        &self,
        sandbox: &SandboxRef,
    ) -> Result<SnapshotInfo, ProviderError> {
        let sandbox = sandbox.clone();
        self.ask(Call::Snapshot { sandbox }).await
    }

    pub(super) async fn runtime_version(&self) -> Result<String, ProviderError> {
        self.ask(Call::RuntimeVersion).await
    }

    pub(super) async fn delete_session(
        &self,
        session_id: &str,
        known: &[SandboxRef],
    ) -> Result<(), ProviderError> {
        let (session_id, known) = (session_id.to_owned(), known.to_vec());
        self.ask(Call::DeleteSession { session_id, known }).await
    }

    pub(super) async fn extend(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let sandbox = sandbox.clone();
        self.ask(Call::Extend { sandbox }).await
    }

    pub(super) async fn refresh_links(
        &self,
        sandbox: &SandboxRef,
        ports: &[u16],
    ) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
        let (sandbox, ports) = (sandbox.clone(), ports.to_vec());
        self.ask(Call::RefreshLinks { sandbox, ports }).await
    }

    pub(super) async fn expose_port(
        &self,
        sandbox: &SandboxRef,
        port: u16,
    ) -> Result<String, ProviderError> {
        let sandbox = sandbox.clone();
        self.ask(Call::ExposePort { sandbox, port }).await
    }
}
