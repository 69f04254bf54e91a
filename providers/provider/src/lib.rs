//! The sandbox provider interface: one trait with capability flags, errors classified as
//! transient (try again later) or permanent (do not retry unchanged). Each vendor's crate
//! under `providers/` implements it; the SessionDO sees only this.

use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{
    Capabilities, SandboxInfo, SandboxRef, SnapshotInfo, SpawnRequest,
};
use std::collections::BTreeMap;

/// A provider's refusals and a resume's outcome are wire types: the session's object hears
/// them from the control plane, which holds the vendors' clients.
pub use inspect_protocol::provider::{ProviderError, ProviderKind, Resumed};

#[cfg(target_arch = "wasm32")]
pub mod http;

/// How often a running turn's sandbox is extended ([`SandboxProvider::extend`]): well
/// inside every vendor's shortest lifetime (Vercel's 45 minutes on Hobby).
pub const EXTEND_EVERY_MS: i64 = 10 * 60_000;

/// How often a running sandbox's links are signed anew ([`SandboxProvider::refresh_links`]):
/// an hour inside the shortest signed link's life (Daytona's 24 hours).
pub const LINKS_REFRESH_MS: i64 = 23 * 3_600_000;

/// A sandbox provider. Async methods run in the Durable Object (wasm, single-threaded).
#[allow(async_fn_in_trait)]
pub trait SandboxProvider {
    /// Which provider this is: its name and what it can do come with it.
    fn kind(&self) -> ProviderKind;
    fn name(&self) -> &'static str {
        self.kind().name()
    }
    fn capabilities(&self) -> Capabilities {
        self.kind().capabilities()
    }
    async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError>;
    async fn status(&self, sandbox: &SandboxRef) -> Result<SandboxInfo, ProviderError>;
    async fn stop(&self, sandbox: &SandboxRef) -> Result<(), ProviderError>;
    /// Ends a sandbox that never became ready: nothing will resume it, so a provider whose
    /// stop keeps a sandbox (paused, hibernated, stopped) deletes it instead.
    async fn discard(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        self.stop(sandbox).await
    }
    /// Starts the stopped sandbox `previous` again as `req`'s sandbox (providers with
    /// `persistent_resume`; the others answer `Permanent`).
    async fn resume(
        &self,
        previous: &SandboxRef,
        req: &SpawnRequest,
    ) -> Result<Resumed, ProviderError>;
    /// Saves the sandbox's filesystem (providers with `snapshots`).
    async fn snapshot(&self, sandbox: &SandboxRef) -> Result<SnapshotInfo, ProviderError>;
    /// The runtime new sandboxes get; snapshots restore only into the one that made them.
    async fn runtime_version(&self) -> Result<String, ProviderError>;
    /// Removes everything kept for a session: its sandboxes, their files, its snapshots.
    /// `known` are the session's sandboxes as it recorded them (a vendor that cannot find
    /// a session's sandboxes by a search addresses these).
    async fn delete_session(
        &self,
        session_id: &str,
        known: &[SandboxRef],
    ) -> Result<(), ProviderError>;
    /// Starts building a prebuilt image; the provider reports how it ended to the request's
    /// callback URL. Providers without image builds answer `Permanent`.
    async fn build_image(&self, req: &BuildImageRequest) -> Result<BuildStarted, ProviderError>;
    /// Deletes an image (a newer one replaced it). An unknown image is not an error.
    async fn delete_image(&self, image_id: &str) -> Result<(), ProviderError>;
    /// Exposes one more port of a running sandbox (a person asked from the session page):
    /// its URL. Vendors that expose ports only when a sandbox is made refuse.
    /// Keeps a sandbox whose turn still runs past the lifetime the vendor gave it at its
    /// start (called every [`EXTEND_EVERY_MS`] of a running turn). A vendor that ends
    /// sandboxes only when told to needs nothing.
    async fn extend(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let _ = sandbox;
        Ok(())
    }
    /// Signs a long-lived sandbox's port links anew (`ports` are those it exposes), for a
    /// vendor whose links expire while the sandbox runs: the new links, or none where the
    /// links last as long as the sandbox. Asked every [`LINKS_REFRESH_MS`] of a sandbox.
    async fn refresh_links(
        &self,
        sandbox: &SandboxRef,
        ports: &[u16],
    ) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
        let _ = (sandbox, ports);
        Ok(None)
    }
    async fn expose_port(&self, sandbox: &SandboxRef, port: u16) -> Result<String, ProviderError> {
        let _ = (sandbox, port);
        Err(ProviderError::Permanent(format!(
            "{} exposes a sandbox's ports only when it starts: add the port to the repository's tunnel ports",
            self.name()
        )))
    }
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
}
