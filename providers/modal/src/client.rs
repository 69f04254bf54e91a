//! Modal as a sandbox provider: calls to our Modal app (`app/`), built by
//! this crate's pure part. Snapshot and restore: an idle sandbox's filesystem becomes an image and
//! the sandbox is terminated; the next one is restored from that image.

use crate::{endpoints, Answer, ModalConfig};
use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{SandboxInfo, SandboxRef, SnapshotInfo, SpawnRequest};
use inspect_provider::{ProviderError, ProviderKind, Resumed, SandboxProvider};
use serde_json::{json, Value};
use std::time::Duration;
use worker::Method;

/// Creates and restores wait for Modal to start the sandbox; snapshots for the image.
const CALL_DEADLINE: Duration = Duration::from_secs(90);
const SNAPSHOT_DEADLINE: Duration = Duration::from_secs(310);

/// An answer's data, or its failure classified.
fn answer(status: u16, text: &str) -> Result<Value, ProviderError> {
    match crate::read_answer(status, text) {
        Answer::Data(v) => Ok(v),
        Answer::Transient(m) => Err(ProviderError::Transient(m)),
        Answer::Permanent(m) => Err(ProviderError::Permanent(m)),
    }
}

pub struct ModalProvider {
    pub cfg: ModalConfig,
}

impl ModalProvider {
    async fn post(
        &self,
        endpoint: &str,
        body: &Value,
        deadline: Duration,
    ) -> Result<Value, ProviderError> {
        let auth = format!(
            "Bearer {}",
            self.cfg.token(worker::Date::now().as_millis() as i64)
        );
        let (status, text) = inspect_provider::http::call(
            Method::Post,
            &self.cfg.endpoint(endpoint),
            &[("Authorization", auth.as_str())],
            Some(body.to_string()),
            deadline,
        )
        .await
        .map_err(|e| ProviderError::Transient(format!("the Modal app ({endpoint}): {e}")))?;
        answer(status, &text)
    }

    fn info(&self, sandbox_id: &str, session_id: &str, data: &Value) -> SandboxInfo {
        SandboxInfo {
            editor: None,
            desktop: None,
            sandbox_id: sandbox_id.to_owned(),
            session_id: session_id.to_owned(),
            status: data["status"].as_str().unwrap_or("running").to_owned(),
            runtime_version: data["runtime_version"].as_str().unwrap_or("").to_owned(),
            tunnel_urls: inspect_protocol::json::from_value(&data["tunnel_urls"])
                .unwrap_or_default(),
            detail: data["detail"].as_str().map(str::to_owned),
            vendor_id: None,
        }
    }
}

impl SandboxProvider for ModalProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Modal
    }

    async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError> {
        let body = crate::create_body(&self.cfg, req);
        let data = self
            .post(crate::create_endpoint(req), &body, CALL_DEADLINE)
            .await?;
        Ok(self.info(&req.sandbox_id, &req.session_id, &data))
    }

    async fn status(&self, sandbox: &SandboxRef) -> Result<SandboxInfo, ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let data = self
            .post(
                endpoints::STATUS,
                &json!({ "sandbox_id": sandbox_id }),
                CALL_DEADLINE,
            )
            .await?;
        Ok(self.info(sandbox_id, "", &data))
    }

    async fn stop(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        self.post(
            endpoints::TERMINATE,
            &json!({ "sandbox_id": sandbox_id, "reason": "stopped" }),
            CALL_DEADLINE,
        )
        .await
        .map(|_| ())
    }

    async fn resume(
        &self,
        _previous: &SandboxRef,
        _req: &SpawnRequest,
    ) -> Result<Resumed, ProviderError> {
        Err(ProviderError::Permanent(
            "Modal sandboxes come back from snapshots; they do not resume".into(),
        ))
    }

    async fn snapshot(&self, sandbox: &SandboxRef) -> Result<SnapshotInfo, ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let data = self
            .post(
                endpoints::SNAPSHOT,
                &json!({ "sandbox_id": sandbox_id, "reason": "idle" }),
                SNAPSHOT_DEADLINE,
            )
            .await?;
        let image = data["image_id"].as_str().unwrap_or_default();
        if image.is_empty() {
            return Err(ProviderError::Transient(
                "the Modal app answered a snapshot without an image".into(),
            ));
        }
        Ok(SnapshotInfo {
            snapshot_id: image.to_owned(),
            sandbox_id: sandbox_id.to_owned(),
            runtime_version: data["runtime_version"].as_str().unwrap_or("").to_owned(),
            bytes: 0,
            duration_ms: data["duration_ms"].as_u64().unwrap_or(0),
            session_id: None,
        })
    }

    async fn runtime_version(&self) -> Result<String, ProviderError> {
        let (status, text) = inspect_provider::http::call(
            Method::Get,
            &self.cfg.endpoint(endpoints::HEALTH),
            &[],
            None,
            Duration::from_secs(20),
        )
        .await
        .map_err(|e| ProviderError::Transient(format!("the Modal app (health): {e}")))?;
        let data = answer(status, &text)?;
        Ok(data["runtime_version"].as_str().unwrap_or("").to_owned())
    }

    async fn delete_session(
        &self,
        session_id: &str,
        _known: &[SandboxRef],
    ) -> Result<(), ProviderError> {
        self.post(
            endpoints::DELETE_SESSION,
            &json!({ "session_id": session_id }),
            CALL_DEADLINE,
        )
        .await
        .map(|_| ())
    }

    async fn build_image(&self, req: &BuildImageRequest) -> Result<BuildStarted, ProviderError> {
        self.post(
            endpoints::BUILD_IMAGE,
            &crate::build_body(req),
            CALL_DEADLINE,
        )
        .await?;
        Ok(BuildStarted {
            build_id: req.build_id.clone(),
        })
    }

    async fn delete_image(&self, _image_id: &str) -> Result<(), ProviderError> {
        // Modal cannot delete images.
        Ok(())
    }
}
