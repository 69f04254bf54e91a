//! Sandbox providers: one interface with capability flags, errors classified as transient
//! (try again later) or permanent (do not retry unchanged). The local provider talks to
//! `inspect-supervisor host` over HTTP on loopback.

use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{Capabilities, SandboxInfo, SnapshotInfo, SpawnRequest};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderError {
    /// The provider could not be reached or was busy: retrying later may work.
    Transient(String),
    /// The provider refused: retrying the same request will not work.
    Permanent(String),
    /// The provider runs as many sandboxes as it may (or rate-limits): wait, then ask
    /// again. Not a failure of the session's sandbox.
    AtCapacity(String),
}

impl ProviderError {
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ProviderError::Transient(_) | ProviderError::AtCapacity(_)
        )
    }

    /// Classifies an HTTP answer the way every provider's API does.
    pub fn from_status(status: u16, body: &str) -> Self {
        let detail = format!(
            "provider answered {status}: {}",
            body.chars().take(300).collect::<String>()
        );
        if status == 429 {
            ProviderError::AtCapacity(detail)
        } else if status == 408 || status >= 500 {
            ProviderError::Transient(detail)
        } else {
            ProviderError::Permanent(detail)
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderError::Transient(m) => write!(f, "{m} (transient)"),
            ProviderError::Permanent(m) => write!(f, "{m}"),
            ProviderError::AtCapacity(m) => write!(f, "{m} (at capacity)"),
        }
    }
}

impl ProviderError {
    /// A vendor API's refusal as the lifecycle takes it (a 404 in the vendor's words too).
    pub fn from_vendor(vendor: &str, failure: inspect_protocol::vendor::Failure) -> Self {
        use inspect_protocol::vendor::Failure;
        match failure {
            Failure::NotFound => ProviderError::Permanent(format!("{vendor}: not found")),
            Failure::Transient(m) => ProviderError::Transient(m),
            Failure::Quota(m) => ProviderError::AtCapacity(m),
            Failure::Permanent(m) => ProviderError::Permanent(m),
        }
    }
}

/// What resuming a stopped sandbox came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Resumed {
    /// The stopped sandbox's workspace runs again, as the request's sandbox.
    Started(SandboxInfo),
    /// Nothing is left to resume (deleted, expired): spawn a fresh one.
    Gone,
}

/// Every provider `SANDBOX_PROVIDER` may name.
pub const PROVIDER_NAMES: [&str; 7] = [
    "local",
    "modal",
    "daytona",
    "e2b",
    "vercel",
    "opencomputer",
    "kubernetes",
];

/// The provider the settings choose, with its own settings read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderSetup {
    /// `inspect-supervisor host` (`SANDBOX_HOST_URL`, `SANDBOX_HOST_SECRET`).
    Local {
        base_url: String,
        secret: String,
    },
    Kubernetes(Box<inspect_kubernetes::KubeConfig>),
    Modal(inspect_modal::ModalConfig),
    Daytona(inspect_daytona::DaytonaConfig),
    E2b(inspect_e2b::E2bConfig),
    Vercel(inspect_vercel::VercelConfig),
    OpenComputer(inspect_opencomputer::OpenComputerConfig),
}

/// Reads `SANDBOX_PROVIDER` (default `local`) and that provider's settings through `get`.
/// The error says, in words, what to set.
pub fn provider_setup(get: impl Fn(&str) -> Option<String>) -> Result<ProviderSetup, String> {
    let get = |n: &str| get(n).filter(|v| !v.trim().is_empty());
    let name = get("SANDBOX_PROVIDER").unwrap_or_else(|| "local".into());
    let name = name.trim().to_ascii_lowercase();
    match name.as_str() {
        "local" => match (get("SANDBOX_HOST_URL"), get("SANDBOX_HOST_SECRET")) {
            (Some(base_url), Some(secret)) => Ok(ProviderSetup::Local { base_url, secret }),
            (url, _) => Err(format!(
                "no sandbox provider is configured: the local provider needs {} (or set SANDBOX_PROVIDER, see docs/providers.md)",
                if url.is_none() { "SANDBOX_HOST_URL and SANDBOX_HOST_SECRET" } else { "SANDBOX_HOST_SECRET" }
            )),
        },
        "kubernetes" => inspect_kubernetes::KubeConfig::from_settings(get)
            .map(|c| ProviderSetup::Kubernetes(Box::new(c)))
            .map_err(|e| format!("SANDBOX_PROVIDER=kubernetes: {e} (see docs/providers.md)")),
        "modal" => inspect_modal::ModalConfig::from_settings(get)
            .map(ProviderSetup::Modal)
            .map_err(|e| format!("SANDBOX_PROVIDER=modal: {e} (see docs/providers.md)")),
        "daytona" => inspect_daytona::DaytonaConfig::from_settings(get)
            .map(ProviderSetup::Daytona)
            .map_err(|e| format!("SANDBOX_PROVIDER=daytona: {e} (see docs/providers.md)")),
        "e2b" => inspect_e2b::E2bConfig::from_settings(get)
            .map(ProviderSetup::E2b)
            .map_err(|e| format!("SANDBOX_PROVIDER=e2b: {e} (see docs/providers.md)")),
        "vercel" => inspect_vercel::VercelConfig::from_settings(get)
            .map(ProviderSetup::Vercel)
            .map_err(|e| format!("SANDBOX_PROVIDER=vercel: {e} (see docs/providers.md)")),
        "opencomputer" => inspect_opencomputer::OpenComputerConfig::from_settings(get)
            .map(ProviderSetup::OpenComputer)
            .map_err(|e| format!("SANDBOX_PROVIDER=opencomputer: {e} (see docs/providers.md)")),
        other => Err(format!(
            "SANDBOX_PROVIDER={other} is not a provider; one of: {}",
            PROVIDER_NAMES.join(", ")
        )),
    }
}

/// A sandbox provider. Async methods run in the Durable Object (wasm, single-threaded).
#[allow(async_fn_in_trait)]
pub trait SandboxProvider {
    fn name(&self) -> &'static str;
    fn capabilities(&self) -> Capabilities;
    async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError>;
    async fn status(&self, sandbox_id: &str) -> Result<SandboxInfo, ProviderError>;
    async fn stop(&self, sandbox_id: &str) -> Result<(), ProviderError>;
    /// Starts the stopped sandbox `previous` again as `req`'s sandbox (providers with
    /// `persistent_resume`; the others answer `Permanent`).
    async fn resume(&self, previous: &str, req: &SpawnRequest) -> Result<Resumed, ProviderError>;
    /// Saves the sandbox's filesystem (providers with `snapshots`).
    async fn snapshot(&self, sandbox_id: &str) -> Result<SnapshotInfo, ProviderError>;
    /// The runtime new sandboxes get; snapshots restore only into the one that made them.
    async fn runtime_version(&self) -> Result<String, ProviderError>;
    /// Removes everything kept for a session: its sandboxes, their files, its snapshots.
    async fn delete_session(&self, session_id: &str) -> Result<(), ProviderError>;
    /// Starts building a prebuilt image; the provider reports how it ended to the request's
    /// callback URL. Providers without image builds answer `Permanent`.
    async fn build_image(&self, req: &BuildImageRequest) -> Result<BuildStarted, ProviderError>;
    /// Deletes an image (a newer one replaced it). An unknown image is not an error.
    async fn delete_image(&self, image_id: &str) -> Result<(), ProviderError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_classify() {
        assert!(ProviderError::from_status(503, "").is_transient());
        assert!(matches!(
            ProviderError::from_status(429, ""),
            ProviderError::AtCapacity(_)
        ));
        assert!(!ProviderError::from_status(400, "bad").is_transient());
        assert!(!ProviderError::from_status(401, "").is_transient());
    }

    fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |n: &str| pairs.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_provider_is_chosen_by_settings_and_says_what_is_missing() {
        let local = provider_setup(settings(&[
            ("SANDBOX_HOST_URL", "http://127.0.0.1:8788"),
            ("SANDBOX_HOST_SECRET", "s"),
        ]));
        assert!(matches!(local, Ok(ProviderSetup::Local { .. })));
        let e = provider_setup(settings(&[])).unwrap_err();
        assert!(
            e.contains("SANDBOX_HOST_URL and SANDBOX_HOST_SECRET"),
            "{e}"
        );
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "kubernetes")])).unwrap_err();
        assert!(e.contains("missing K8S_API_URL, K8S_TOKEN"), "{e}");
        let k = provider_setup(settings(&[
            ("SANDBOX_PROVIDER", "Kubernetes"),
            ("K8S_API_URL", "https://k8s.example.com"),
            ("K8S_TOKEN", "t"),
            ("K8S_NAMESPACE", "sandboxes"),
            ("K8S_SANDBOX_IMAGE", "img"),
        ]));
        assert!(matches!(k, Ok(ProviderSetup::Kubernetes(_))));
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "modal")])).unwrap_err();
        assert!(
            e.contains("missing MODAL_WORKSPACE, MODAL_API_SECRET"),
            "{e}"
        );
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "daytona")])).unwrap_err();
        assert!(
            e.contains("missing DAYTONA_API_KEY, DAYTONA_SNAPSHOT"),
            "{e}"
        );
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "e2b")])).unwrap_err();
        assert!(e.contains("missing E2B_API_KEY, E2B_TEMPLATE_ID"), "{e}");
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "vercel")])).unwrap_err();
        assert!(
            e.starts_with("SANDBOX_PROVIDER=vercel: missing VERCEL_TOKEN"),
            "{e}"
        );
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "opencomputer")])).unwrap_err();
        assert!(
            e.contains("missing OPENCOMPUTER_API_KEY, OPENCOMPUTER_TEMPLATE"),
            "{e}"
        );
        let o = provider_setup(settings(&[
            ("SANDBOX_PROVIDER", "opencomputer"),
            ("OPENCOMPUTER_API_KEY", "k"),
            ("OPENCOMPUTER_TEMPLATE", "t"),
        ]));
        assert!(matches!(o, Ok(ProviderSetup::OpenComputer(_))));
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "lambda")])).unwrap_err();
        assert!(
            e.contains("not a provider") && e.contains("kubernetes"),
            "{e}"
        );
    }
}
