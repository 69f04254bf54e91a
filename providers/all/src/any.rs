//! [`AnyProvider`]: the configured provider, whichever vendor it is.

use crate::setup::{provider_setup, ProviderSetup};
use inspect_daytona::DaytonaProvider;
use inspect_e2b::E2bProvider;
use inspect_kubernetes::KubernetesProvider;
use inspect_local::LocalProvider;
use inspect_modal::ModalProvider;
use inspect_opencomputer::OpenComputerProvider;
use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{SandboxInfo, SandboxRef, SnapshotInfo, SpawnRequest};
use inspect_protocol::providers::{ProviderCall, ProviderProbe};
use inspect_provider::{ProviderError, ProviderKind, Resumed, SandboxProvider};
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

impl AnyProvider {
    /// Asks the provider whether it answers, for `GET /health`.
    pub async fn probe(&self) -> Result<ProviderProbe, ProviderError> {
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
        Ok(ProviderProbe {
            configured: true,
            detail,
            disk,
        })
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
    fn kind(&self) -> ProviderKind {
        each!(self, p => p.kind())
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

/// Answers one call ([`ProviderCall`]) with the provider the settings choose:
/// `Result<T, ProviderError>` as JSON. Where no provider is configured, a call that needs
/// one is refused in the settings' words, one that only ends or releases a sandbox has
/// nothing to do, and the probe says what is missing.
pub async fn answer(env: &worker::Env, call: ProviderCall) -> serde_json::Value {
    let provider = match AnyProvider::from_env(env) {
        Ok(p) => p,
        Err(why) => {
            return match call {
                ProviderCall::Stop { .. }
                | ProviderCall::Discard { .. }
                | ProviderCall::DeleteSession { .. }
                | ProviderCall::Extend { .. }
                | ProviderCall::RefreshLinks { .. }
                | ProviderCall::DeleteImage { .. } => to_json(Ok::<(), _>(())),
                ProviderCall::Probe => to_json(Ok::<_, ProviderError>(ProviderProbe {
                    configured: false,
                    detail: why,
                    disk: None,
                })),
                _ => to_json(Err::<(), _>(ProviderError::Permanent(why))),
            }
        }
    };
    let p = &provider;
    // A sandbox its environment holds to an `off` egress policy is never made where the
    // policy would only be declared.
    let unconfinable = |request: &inspect_protocol::provider::SpawnRequest| {
        let kind = p.kind();
        (request.egress.as_ref().is_some_and(|e| e.confines())
            && !kind.capabilities().confines_egress)
            .then(|| {
                ProviderError::Permanent(format!(
                    "the session's environment lets its traffic out only to some hosts, and {} cannot hold a sandbox to that (docs/providers.md, \"Egress\"): use another provider or set the environment's network to open",
                    kind.name()
                ))
            })
    };
    match call {
        ProviderCall::Create { request } => match unconfinable(&request) {
            Some(refused) => to_json(Err::<(), _>(refused)),
            None => to_json(p.create(&request).await),
        },
        ProviderCall::Status { sandbox } => to_json(p.status(&sandbox).await),
        ProviderCall::Stop { sandbox } => to_json(p.stop(&sandbox).await),
        ProviderCall::Discard { sandbox } => to_json(p.discard(&sandbox).await),
        ProviderCall::Resume { previous, request } => match unconfinable(&request) {
            Some(refused) => to_json(Err::<(), _>(refused)),
            None => to_json(p.resume(&previous, &request).await),
        },
        ProviderCall::Snapshot { sandbox } => to_json(p.snapshot(&sandbox).await),
        ProviderCall::RuntimeVersion => to_json(p.runtime_version().await),
        ProviderCall::DeleteSession { session_id, known } => {
            to_json(p.delete_session(&session_id, &known).await)
        }
        ProviderCall::Extend { sandbox } => to_json(p.extend(&sandbox).await),
        ProviderCall::RefreshLinks { sandbox, ports } => {
            to_json(p.refresh_links(&sandbox, &ports).await)
        }
        ProviderCall::ExposePort { sandbox, port } => to_json(p.expose_port(&sandbox, port).await),
        ProviderCall::BuildImage { request } => to_json(p.build_image(&request).await),
        ProviderCall::DeleteImage { image_id } => to_json(p.delete_image(&image_id).await),
        ProviderCall::Probe => to_json(p.probe().await),
    }
}

fn to_json<T: serde::Serialize>(answer: Result<T, ProviderError>) -> serde_json::Value {
    serde_json::to_value(answer).unwrap_or_else(|e| {
        serde_json::json!({ "Err": { "kind": "transient", "message": format!("the answer: {e}") } })
    })
}
