//! The local provider: `inspect-supervisor host` on loopback, the embedded default. Its
//! calls run in the Durable Object, so the crate is empty outside wasm.
#![cfg(target_arch = "wasm32")]

use inspect_protocol::health::HostHealth;
use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{SandboxInfo, SandboxRef, SnapshotInfo, SpawnRequest};
use inspect_provider::{ProviderError, ProviderKind, Resumed, SandboxProvider};
use worker::{Fetch, Headers, Method, Request, RequestInit};

pub struct LocalProvider {
    pub base_url: String,
    pub secret: String,
}

impl LocalProvider {
    /// The provider the Worker's settings configure (`SANDBOX_HOST_URL` and
    /// `SANDBOX_HOST_SECRET`), if they do.
    pub fn from_env(env: &worker::Env) -> Option<LocalProvider> {
        Some(LocalProvider {
            base_url: inspect_runtime::setting(env, "SANDBOX_HOST_URL")?,
            secret: inspect_runtime::setting(env, "SANDBOX_HOST_SECRET")?,
        })
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> Result<(u16, String), ProviderError> {
        let headers = Headers::new();
        let transient =
            |e: worker::Error| ProviderError::Transient(format!("sandbox host unreachable: {e}"));
        headers
            .set("Authorization", &format!("Bearer {}", self.secret))
            .map_err(transient)?;
        headers
            .set("Content-Type", "application/json")
            .map_err(transient)?;
        let mut init = RequestInit::new();
        init.with_method(method).with_headers(headers);
        if let Some(b) = body {
            init.with_body(Some(worker::wasm_bindgen::JsValue::from_str(&b)));
        }
        let url = format!("{}{}", self.base_url.trim_end_matches('/'), path);
        let req = Request::new_with_init(&url, &init).map_err(transient)?;
        let mut resp = Fetch::Request(req).send().await.map_err(transient)?;
        let text = resp.text().await.unwrap_or_default();
        Ok((resp.status_code(), text))
    }
}

impl LocalProvider {
    /// Asks the host whether `path` is a git repository with commits. `Err` carries the
    /// refusal to show (400) or that the host could not be asked.
    pub async fn check_repository(
        &self,
        path: &str,
    ) -> Result<inspect_protocol::provider::RepositoryChecked, inspect_protocol::ApiError> {
        use inspect_protocol::{ApiError, ErrorCode};
        let body = serde_json::to_string(&inspect_protocol::provider::RepositoryCheck {
            path: path.to_owned(),
        })
        .map_err(|e| ApiError::internal(e.to_string()))?;
        let (status, text) = self
            .call(Method::Post, "/repositories/check", Some(body))
            .await
            .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))?;
        if status == 200 {
            return serde_json::from_str(&text).map_err(|e| {
                ApiError::new(
                    ErrorCode::Unavailable,
                    format!("the sandbox host answered oddly: {e}"),
                )
            });
        }
        match serde_json::from_str::<inspect_protocol::ErrorBody>(&text) {
            Ok(body) if status == 400 => Err(body.error),
            _ => Err(ApiError::new(
                ErrorCode::Unavailable,
                format!("the sandbox host could not check the path ({status})"),
            )),
        }
    }
}

fn parse_info(status: u16, text: &str) -> Result<SandboxInfo, ProviderError> {
    if !(200..300).contains(&status) {
        return Err(ProviderError::from_status(status, text));
    }
    serde_json::from_str(text).map_err(|e| {
        ProviderError::Permanent(format!("unreadable answer from the sandbox host: {e}"))
    })
}

impl SandboxProvider for LocalProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Local
    }

    async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError> {
        let body =
            serde_json::to_string(req).map_err(|e| ProviderError::Permanent(e.to_string()))?;
        let (status, text) = self.call(Method::Post, "/sandboxes", Some(body)).await?;
        parse_info(status, &text)
    }

    async fn resume(
        &self,
        _previous: &SandboxRef,
        _req: &SpawnRequest,
    ) -> Result<Resumed, ProviderError> {
        Err(ProviderError::Permanent(
            "the local host restores from snapshots; it does not resume".into(),
        ))
    }

    async fn status(&self, sandbox: &SandboxRef) -> Result<SandboxInfo, ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let (status, text) = self
            .call(Method::Get, &format!("/sandboxes/{sandbox_id}"), None)
            .await?;
        parse_info(status, &text)
    }

    async fn stop(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let (status, text) = self
            .call(Method::Delete, &format!("/sandboxes/{sandbox_id}"), None)
            .await?;
        if (200..300).contains(&status) || status == 404 {
            Ok(())
        } else {
            Err(ProviderError::from_status(status, &text))
        }
    }

    async fn snapshot(&self, sandbox: &SandboxRef) -> Result<SnapshotInfo, ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let (status, text) = self
            .call(
                Method::Post,
                &format!("/sandboxes/{sandbox_id}/snapshot"),
                None,
            )
            .await?;
        if !(200..300).contains(&status) {
            return Err(ProviderError::from_status(status, &text));
        }
        serde_json::from_str(&text)
            .map_err(|e| ProviderError::Permanent(format!("unreadable snapshot answer: {e}")))
    }

    async fn runtime_version(&self) -> Result<String, ProviderError> {
        Ok(self.health().await?.version)
    }

    async fn delete_session(
        &self,
        session_id: &str,
        _known: &[SandboxRef],
    ) -> Result<(), ProviderError> {
        let (status, text) = self
            .call(Method::Delete, &format!("/sessions/{session_id}"), None)
            .await?;
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(ProviderError::from_status(status, &text))
        }
    }

    async fn build_image(&self, req: &BuildImageRequest) -> Result<BuildStarted, ProviderError> {
        let body =
            serde_json::to_string(req).map_err(|e| ProviderError::Permanent(e.to_string()))?;
        let (status, text) = self.call(Method::Post, "/images", Some(body)).await?;
        if !(200..300).contains(&status) {
            return Err(ProviderError::from_status(status, &text));
        }
        serde_json::from_str(&text)
            .map_err(|e| ProviderError::Permanent(format!("unreadable build answer: {e}")))
    }

    async fn delete_image(&self, image_id: &str) -> Result<(), ProviderError> {
        let (status, text) = self
            .call(Method::Delete, &format!("/images/{image_id}"), None)
            .await?;
        if (200..300).contains(&status) || status == 404 {
            Ok(())
        } else {
            Err(ProviderError::from_status(status, &text))
        }
    }

    async fn expose_port(&self, sandbox: &SandboxRef, port: u16) -> Result<String, ProviderError> {
        let body = serde_json::json!({ "port": port }).to_string();
        let (status, text) = self
            .call(
                Method::Post,
                &format!("/sandboxes/{}/ports", sandbox.sandbox_id),
                Some(body),
            )
            .await?;
        if !(200..300).contains(&status) {
            return Err(ProviderError::from_status(status, &text));
        }
        let info: SandboxInfo = serde_json::from_str(&text)
            .map_err(|e| ProviderError::Permanent(format!("unreadable answer: {e}")))?;
        info.tunnel_urls
            .get(&port.to_string())
            .cloned()
            .ok_or_else(|| ProviderError::Permanent(format!("the host did not expose port {port}")))
    }
}

impl LocalProvider {
    /// The host's own health: version, sandboxes, disk use.
    pub async fn health(&self) -> Result<HostHealth, ProviderError> {
        let (status, text) = self.call(Method::Get, "/health", None).await?;
        if !(200..300).contains(&status) {
            return Err(ProviderError::from_status(status, &text));
        }
        serde_json::from_str::<HostHealth>(&text)
            .map_err(|e| ProviderError::Permanent(format!("unreadable health answer: {e}")))
    }
}
