//! What the providers Worker is asked: the one script that holds the sandbox vendors'
//! clients and keys answers the session Worker's objects (a sandbox made, stopped,
//! resumed, snapshotted…) and the control plane (image builds, the health check) over a
//! service binding, one [`ProviderCall`] a request.

use crate::images::BuildImageRequest;
use crate::provider::{SandboxRef, SpawnRequest};
use serde::{Deserialize, Serialize};

/// The providers Worker's service binding, in the scripts that call it (the session
/// Worker's objects, the control plane's images and health check).
pub const PROVIDERS_BINDING: &str = "PROVIDERS";
/// The host of every call over that binding; the providers Worker answers
/// [`PROVIDERS_CALL_PATH`] on it and nothing else (it has no public address).
pub const PROVIDERS_HOST: &str = "providers.internal";
pub const PROVIDERS_CALL_PATH: &str = "/call";
pub const PROVIDERS_CALL_URL: &str = "https://providers.internal/call";
/// A call's body at most (a spawn request carries the session's repositories, settings and
/// secrets).
pub const MAX_PROVIDER_CALL_BYTES: usize = 1024 * 1024;

/// One call to the sandbox provider the settings choose, made over the binding to the
/// providers Worker, which alone holds the vendors' clients and keys. Each is answered with
/// `Result<T, ProviderError>` as JSON (`{"Ok": …}` or `{"Err": {"kind", "message"}}`),
/// `T` as the variant says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderCall {
    /// A new sandbox: a `SandboxInfo`.
    Create { request: Box<SpawnRequest> },
    /// Where a sandbox is: a `SandboxInfo`.
    Status { sandbox: SandboxRef },
    /// `()`.
    Stop { sandbox: SandboxRef },
    /// A sandbox that never became ready, ended for good: `()`.
    Discard { sandbox: SandboxRef },
    /// The stopped sandbox `previous` started again as the request's: a `Resumed`.
    Resume {
        previous: SandboxRef,
        request: Box<SpawnRequest>,
    },
    /// A `SnapshotInfo`.
    Snapshot { sandbox: SandboxRef },
    /// The runtime new sandboxes get: a string.
    RuntimeVersion,
    /// Everything kept for a session removed: `()`.
    DeleteSession {
        session_id: String,
        known: Vec<SandboxRef>,
    },
    /// A running turn's sandbox kept past its lifetime: `()`.
    Extend { sandbox: SandboxRef },
    /// A sandbox's port links signed anew: the new links, or `null`.
    RefreshLinks {
        sandbox: SandboxRef,
        ports: Vec<u16>,
    },
    /// One more port exposed: its URL.
    ExposePort { sandbox: SandboxRef, port: u16 },
    /// A prebuilt image's build started: a `BuildStarted`.
    BuildImage { request: Box<BuildImageRequest> },
    /// An image deleted: `()`.
    DeleteImage { image_id: String },
    /// Whether the provider answers, for the health check: a [`ProviderProbe`].
    Probe,
}

/// What the provider said when asked whether it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderProbe {
    /// Whether the settings name a provider and all it needs; when not, `detail` says
    /// what is missing.
    pub configured: bool,
    pub detail: String,
    /// The local host's disk use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<crate::health::DiskUse>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_call_crosses_the_binding_as_it_was() {
        let call = ProviderCall::Extend {
            sandbox: SandboxRef::ours("sb"),
        };
        let text = serde_json::to_string(&call).unwrap();
        assert_eq!(text, r#"{"extend":{"sandbox":{"sandboxId":"sb"}}}"#);
        assert_eq!(serde_json::from_str::<ProviderCall>(&text).unwrap(), call);
        let text = serde_json::to_string(&ProviderCall::RuntimeVersion).unwrap();
        assert_eq!(
            serde_json::from_str::<ProviderCall>(&text).unwrap(),
            ProviderCall::RuntimeVersion
        );
        assert!(PROVIDERS_CALL_URL.ends_with(PROVIDERS_CALL_PATH));
        assert!(PROVIDERS_CALL_URL.contains(PROVIDERS_HOST));
    }
}
