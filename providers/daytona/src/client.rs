//! Daytona as a sandbox provider: calls to Daytona's REST API, built by this crate's pure part.
//! Persistent resume in place: a stopped sandbox is started again with its disk and its
//! identity (the control plane keeps the sandbox's id and token for it).

use crate as daytona;
use crate::{DaytonaConfig, Revival};
use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{SandboxInfo, SandboxRef, SnapshotInfo, SpawnRequest};
use inspect_provider::{ProviderError, ProviderKind, Resumed, SandboxProvider};
use serde_json::Value;
use std::time::Duration;
use worker::Method;

const CALL_DEADLINE: Duration = Duration::from_secs(90);

pub struct DaytonaProvider {
    pub cfg: DaytonaConfig,
}

fn failure(status: u16, body: &str) -> ProviderError {
    ProviderError::from_vendor("daytona", daytona::classify(status, body))
}

impl DaytonaProvider {
    /// One call; `Ok(None)` for a 404.
    async fn call(
        &self,
        method: Method,
        path_or_url: &str,
        body: Option<&Value>,
    ) -> Result<Option<Value>, ProviderError> {
        let url = if path_or_url.starts_with("http") {
            path_or_url.to_owned()
        } else {
            self.cfg.url(path_or_url)
        };
        let auth = format!("Bearer {}", self.cfg.api_key);
        inspect_provider::http::vendor_call(
            "daytona",
            method,
            &url,
            &[("Authorization", auth.as_str())],
            body,
            CALL_DEADLINE,
            failure,
        )
        .await
    }

    /// Daytona's sandbox behind `sandbox`: asked for by the id kept when it was made (the
    /// label list is eventually consistent: a sandbox just made may not be listed yet); one
    /// from before ids were kept is found by its label.
    async fn find(&self, sandbox: &SandboxRef) -> Result<Option<Value>, ProviderError> {
        if let Some(id) = &sandbox.vendor_id {
            return self
                .call(Method::Get, &format!("/sandbox/{id}"), None)
                .await;
        }
        let list = self
            .call(
                Method::Get,
                &self
                    .cfg
                    .labelled(daytona::LABEL_SANDBOX, &sandbox.sandbox_id),
                None,
            )
            .await?
            .unwrap_or(Value::Null);
        Ok(daytona::first_listed(&list))
    }

    /// How many sandboxes of ours Daytona holds (the health check's question).
    pub async fn count(&self) -> Result<usize, ProviderError> {
        let list = self
            .call(
                Method::Get,
                &self.cfg.labelled(daytona::LABEL_FRAMEWORK, "open-inspect"),
                None,
            )
            .await?
            .unwrap_or(Value::Null);
        Ok(daytona::listed_ids(&list).len())
    }

    /// Each port's signed preview URL.
    async fn preview_urls(
        &self,
        id: &str,
        ports: &[u16],
    ) -> Result<std::collections::BTreeMap<String, String>, ProviderError> {
        let mut urls = std::collections::BTreeMap::new();
        for port in ports {
            let answer = self
                .call(
                    Method::Get,
                    &format!(
                        "/sandbox/{id}/ports/{port}/signed-preview-url?expiresInSeconds={}",
                        daytona::PREVIEW_SECONDS
                    ),
                    None,
                )
                .await?
                .unwrap_or(Value::Null);
            if let Some(url) = answer["url"].as_str() {
                urls.insert(port.to_string(), url.to_owned());
            }
        }
        Ok(urls)
    }

    fn info(
        &self,
        req: &SpawnRequest,
        id: &str,
        urls: std::collections::BTreeMap<String, String>,
    ) -> SandboxInfo {
        SandboxInfo {
            editor: None,
            desktop: None,
            sandbox_id: req.sandbox_id.clone(),
            session_id: req.session_id.clone(),
            status: "running".into(),
            runtime_version: self.cfg.snapshot.clone(),
            tunnel_urls: urls,
            detail: None,
            vendor_id: Some(id.to_owned()),
        }
    }
}

impl SandboxProvider for DaytonaProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Daytona
    }

    async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError> {
        let made = self
            .call(
                Method::Post,
                "/sandbox",
                Some(&daytona::create_body(&self.cfg, req)),
            )
            .await?
            .ok_or_else(|| {
                ProviderError::Permanent("daytona: the sandbox API is missing".into())
            })?;
        let id = made["id"].as_str().unwrap_or_default().to_owned();
        let urls = self.preview_urls(&id, &req.vendor_ports()).await?;
        Ok(self.info(req, &id, urls))
    }

    async fn status(&self, sandbox: &SandboxRef) -> Result<SandboxInfo, ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let found = self.find(sandbox).await?;
        let (status, detail) = match &found {
            Some(s) => {
                let (status, detail) = daytona::status_of(s);
                (status, detail)
            }
            None => ("stopped", Some("no such sandbox".to_owned())),
        };
        Ok(SandboxInfo {
            editor: None,
            desktop: None,
            sandbox_id: sandbox_id.to_owned(),
            session_id: found
                .as_ref()
                .and_then(|s| s["labels"][daytona::LABEL_SESSION].as_str())
                .unwrap_or_default()
                .to_owned(),
            status: status.into(),
            runtime_version: self.cfg.snapshot.clone(),
            tunnel_urls: Default::default(),
            detail,
            vendor_id: None,
        })
    }

    /// Deletes a sandbox that never became ready (a stopped one would be kept until the
    /// session is deleted).
    async fn discard(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let Some(s) = self.find(sandbox).await? else {
            return Ok(());
        };
        let id = s["id"].as_str().unwrap_or_default();
        self.call(Method::Delete, &format!("/sandbox/{id}"), None)
            .await
            .map(|_| ())
    }

    async fn stop(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let Some(s) = self.find(sandbox).await? else {
            return Ok(());
        };
        let id = s["id"].as_str().unwrap_or_default();
        self.call(Method::Post, &format!("/sandbox/{id}/stop"), None)
            .await
            .map(|_| ())
    }

    /// Daytona's links are signed for 24 hours: a sandbox running longer gets them anew.
    async fn refresh_links(
        &self,
        sandbox: &SandboxRef,
        ports: &[u16],
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, ProviderError> {
        let Some(s) = self.find(sandbox).await? else {
            return Ok(None);
        };
        let id = s["id"].as_str().unwrap_or_default().to_owned();
        self.preview_urls(&id, ports).await.map(Some)
    }

    async fn resume(
        &self,
        previous: &SandboxRef,
        req: &SpawnRequest,
    ) -> Result<Resumed, ProviderError> {
        let Some(s) = self.find(previous).await? else {
            return Ok(Resumed::Gone);
        };
        let id = s["id"].as_str().unwrap_or_default().to_owned();
        let action = match daytona::revival(&s) {
            Revival::Gone => return Ok(Resumed::Gone),
            Revival::Nothing => None,
            Revival::Start => Some("start"),
            Revival::Recover => Some("recover"),
        };
        if let Some(action) = action {
            if self
                .call(Method::Post, &format!("/sandbox/{id}/{action}"), None)
                .await?
                .is_none()
            {
                return Ok(Resumed::Gone);
            }
        }
        let urls = self.preview_urls(&id, &req.vendor_ports()).await?;
        Ok(Resumed::Started(Box::new(self.info(req, &id, urls))))
    }

    async fn snapshot(&self, _sandbox: &SandboxRef) -> Result<SnapshotInfo, ProviderError> {
        Err(ProviderError::Permanent(
            "daytona sandboxes resume with their disk; they take no snapshots".into(),
        ))
    }

    async fn runtime_version(&self) -> Result<String, ProviderError> {
        Ok(self.cfg.snapshot.clone())
    }

    async fn delete_session(
        &self,
        session_id: &str,
        known: &[SandboxRef],
    ) -> Result<(), ProviderError> {
        let list = self
            .call(
                Method::Get,
                &self.cfg.labelled(daytona::LABEL_SESSION, session_id),
                None,
            )
            .await?
            .unwrap_or(Value::Null);
        // Those the session kept ids of too: the label list may lag behind a new one.
        let mut ids = daytona::listed_ids(&list);
        for id in known.iter().filter_map(|k| k.vendor_id.clone()) {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        for id in ids {
            self.call(Method::Delete, &format!("/sandbox/{id}"), None)
                .await?;
        }
        Ok(())
    }

    async fn build_image(&self, _req: &BuildImageRequest) -> Result<BuildStarted, ProviderError> {
        Err(ProviderError::Permanent(
            "prebuilt images are not built on daytona".into(),
        ))
    }

    async fn delete_image(&self, _image_id: &str) -> Result<(), ProviderError> {
        Ok(())
    }

    /// Daytona signs a preview URL for any port of a sandbox.
    async fn expose_port(&self, sandbox: &SandboxRef, port: u16) -> Result<String, ProviderError> {
        let found = self.find(sandbox).await?;
        let Some(id) = found.as_ref().and_then(|s| s["id"].as_str()) else {
            return Err(ProviderError::Permanent("daytona: no such sandbox".into()));
        };
        self.preview_urls(id, &[port])
            .await?
            .remove(&port.to_string())
            .ok_or_else(|| {
                ProviderError::Permanent(format!("daytona gave no preview URL for port {port}"))
            })
    }
}
