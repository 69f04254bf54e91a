//! [`AnyProvider`]: the configured provider, whichever vendor it is.

use crate::setup::{provider_setup, ProviderSetup};
use inspect_daytona::DaytonaProvider;
use inspect_e2b::E2bProvider;
use inspect_kubernetes::KubernetesProvider;
use inspect_local::LocalProvider;
use inspect_modal::ModalProvider;
use inspect_opencomputer::OpenComputerProvider;
use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{
    Capabilities, SandboxInfo, SandboxRef, SnapshotInfo, SpawnRequest,
};
use inspect_provider::{ProviderError, Resumed, SandboxProvider};
use inspect_vercel::VercelProvider;

pub enum AnyProvider {
    Local(LocalProvider),
    Kubernetes(KubernetesProvider),
    Modal(ModalProvider),
    Daytona(DaytonaProvider),
    E2b(E2bProvider),
    Vercel(VercelProvider),
    OpenComputer(OpenComputerProvider),
}

impl AnyProvider {
    /// The configured provider, or what is missing in words.
    pub fn from_env(env: &worker::Env) -> Result<AnyProvider, String> {
        Ok(
            match provider_setup(|n| inspect_runtime::setting(env, n))? {
                ProviderSetup::Local { base_url, secret } => {
                    AnyProvider::Local(LocalProvider { base_url, secret })
                }
                ProviderSetup::Kubernetes(cfg) => {
                    AnyProvider::Kubernetes(KubernetesProvider { cfg: *cfg })
                }
                ProviderSetup::Modal(cfg) => AnyProvider::Modal(ModalProvider { cfg }),
                ProviderSetup::Daytona(cfg) => AnyProvider::Daytona(DaytonaProvider { cfg }),
                ProviderSetup::E2b(cfg) => AnyProvider::E2b(E2bProvider { cfg }),
                ProviderSetup::Vercel(cfg) => AnyProvider::Vercel(VercelProvider { cfg }),
                ProviderSetup::OpenComputer(cfg) => {
                    AnyProvider::OpenComputer(OpenComputerProvider { cfg })
                }
            },
        )
    }
}

/// What a provider said when asked whether it answers.
pub struct Probe {
    pub detail: String,
    /// The local host's disk use.
    pub disk: Option<inspect_protocol::health::DiskUse>,
}

impl AnyProvider {
    /// Asks the provider whether it answers, for `GET /health`.
    pub async fn probe(&self) -> Result<Probe, ProviderError> {
        let (detail, disk) = match self {
            AnyProvider::Local(host) => {
                let h = host.health().await?;
                (
                    format!("local host {} with {} sandboxes", h.version, h.sandboxes),
                    h.disk,
                )
            }
            AnyProvider::Kubernetes(k) => {
                let pods = k.probe().await?;
                (
                    format!(
                        "kubernetes namespace {} with {pods} sandbox pods, image {}",
                        k.cfg.namespace, k.cfg.image
                    ),
                    None,
                )
            }
            AnyProvider::Modal(m) => (
                format!("modal app with runtime {}", m.runtime_version().await?),
                None,
            ),
            AnyProvider::Daytona(d) => (
                format!(
                    "daytona with {} sandboxes of ours, snapshot {}",
                    d.count().await?,
                    d.cfg.snapshot
                ),
                None,
            ),
            AnyProvider::E2b(e) => (
                format!(
                    "e2b with {} sandboxes of ours, template {}",
                    e.count().await?,
                    e.cfg.template_id
                ),
                None,
            ),
            AnyProvider::Vercel(v) => (
                format!(
                    "vercel project {} with {} sandboxes of ours, base snapshot {}",
                    v.cfg.project_id,
                    v.count().await?,
                    v.cfg.base_snapshot
                ),
                None,
            ),
            AnyProvider::OpenComputer(o) => (
                format!(
                    "opencomputer with {} sandboxes of ours, template {}",
                    o.count().await?,
                    o.cfg.template
                ),
                None,
            ),
        };
        Ok(Probe { detail, disk })
    }
}

macro_rules! each {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            AnyProvider::Local($p) => $e,
            AnyProvider::Kubernetes($p) => $e,
            AnyProvider::Modal($p) => $e,
            AnyProvider::Daytona($p) => $e,
            AnyProvider::E2b($p) => $e,
            AnyProvider::Vercel($p) => $e,
            AnyProvider::OpenComputer($p) => $e,
        }
    };
}

impl SandboxProvider for AnyProvider {
    fn name(&self) -> &'static str {
        each!(self, p => p.name())
    }
    fn capabilities(&self) -> Capabilities {
        each!(self, p => p.capabilities())
    }
    async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError> {
        each!(self, p => p.create(req).await)
    }
    async fn status(&self, sandbox: &SandboxRef) -> Result<SandboxInfo, ProviderError> {
        each!(self, p => p.status(sandbox).await)
    }
    async fn stop(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        each!(self, p => p.stop(sandbox).await)
    }
    async fn discard(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        each!(self, p => p.discard(sandbox).await)
    }
    async fn resume(
        &self,
        previous: &SandboxRef,
        req: &SpawnRequest,
    ) -> Result<Resumed, ProviderError> {
        each!(self, p => p.resume(previous, req).await)
    }
    async fn snapshot(&self, sandbox: &SandboxRef) -> Result<SnapshotInfo, ProviderError> {
        each!(self, p => p.snapshot(sandbox).await)
    }
    async fn runtime_version(&self) -> Result<String, ProviderError> {
        each!(self, p => p.runtime_version().await)
    }
    async fn delete_session(
        &self,
        session_id: &str,
        known: &[SandboxRef],
    ) -> Result<(), ProviderError> {
        each!(self, p => p.delete_session(session_id, known).await)
    }
    async fn build_image(&self, req: &BuildImageRequest) -> Result<BuildStarted, ProviderError> {
        each!(self, p => p.build_image(req).await)
    }
    async fn delete_image(&self, image_id: &str) -> Result<(), ProviderError> {
        each!(self, p => p.delete_image(image_id).await)
    }
    async fn extend(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        each!(self, p => p.extend(sandbox).await)
    }
    async fn refresh_links(
        &self,
        sandbox: &SandboxRef,
        ports: &[u16],
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, ProviderError> {
        each!(self, p => p.refresh_links(sandbox, ports).await)
    }
    async fn expose_port(&self, sandbox: &SandboxRef, port: u16) -> Result<String, ProviderError> {
        each!(self, p => p.expose_port(sandbox, port).await)
    }
}
