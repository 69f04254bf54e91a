//! OpenComputer as a sandbox provider: calls to OpenComputer's REST API, built by
//! this crate's pure part. Stop hibernates, resume wakes the same machine (its identity
//! kept) and starts the supervisor again if it is not running; after every turn a disk
//! checkpoint is taken, and a sandbox that cannot be woken is replaced by a fork of the
//! newest one.

use crate as oc;
use crate::OpenComputerConfig;
use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{Capabilities, SandboxInfo, SnapshotInfo, SpawnRequest};
use inspect_provider::{ProviderError, Resumed, SandboxProvider};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use worker::Method;

const CALL_DEADLINE: Duration = Duration::from_secs(90);
const CHECKPOINT_DEADLINE: Duration = Duration::from_secs(300);

pub struct OpenComputerProvider {
    pub cfg: OpenComputerConfig,
}

fn failure(status: u16, body: &str) -> ProviderError {
    ProviderError::from_vendor("opencomputer", oc::classify(status, body))
}

impl OpenComputerProvider {
    /// One call; `Ok(None)` for a 404.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        deadline: Duration,
    ) -> Result<Option<Value>, ProviderError> {
        inspect_provider::http::vendor_call(
            "opencomputer",
            method,
            &self.cfg.url(path),
            &[("X-API-Key", self.cfg.api_key.as_str())],
            body,
            deadline,
            failure,
        )
        .await
    }

    async fn matching(&self, key: &str, value: &str) -> Result<Vec<Value>, ProviderError> {
        let list = self
            .call(Method::Get, "/sandboxes", None, CALL_DEADLINE)
            .await?
            .unwrap_or(Value::Null);
        Ok(oc::matching(&list, key, value))
    }

    /// OpenComputer's sandbox for our sandbox `sandbox_id`, found by its metadata.
    async fn find(&self, sandbox_id: &str) -> Result<Option<Value>, ProviderError> {
        Ok(self
            .matching(oc::META_SANDBOX, sandbox_id)
            .await?
            .into_iter()
            .next())
    }

    /// How many sandboxes of ours OpenComputer holds (the health check's question).
    pub async fn count(&self) -> Result<usize, ProviderError> {
        Ok(self
            .matching(oc::META_FRAMEWORK, "open-inspect")
            .await?
            .len())
    }

    /// Starts the supervisor in the sandbox (nothing happens if it runs already).
    async fn start_supervisor(&self, id: &str) -> Result<(), ProviderError> {
        let ran = self
            .call(
                Method::Post,
                &format!("/sandboxes/{id}/exec/run"),
                Some(&oc::start_body()),
                CALL_DEADLINE,
            )
            .await?
            .ok_or_else(|| {
                ProviderError::Transient(format!("opencomputer: sandbox {id} is gone"))
            })?;
        match ran["exitCode"].as_i64() {
            Some(0) => Ok(()),
            code => Err(ProviderError::Transient(format!(
                "opencomputer: the supervisor did not start in sandbox {id} (exit {}): {}",
                code.map(|c| c.to_string())
                    .unwrap_or_else(|| "unknown".into()),
                ran["stderr"]
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .take(300)
                    .collect::<String>()
            ))),
        }
    }

    /// Each port's URL, from the sandbox answer or the preview endpoint.
    async fn urls(
        &self,
        sandbox: &Value,
        ports: &[u16],
    ) -> Result<BTreeMap<String, String>, ProviderError> {
        let id = oc::id_of(sandbox).unwrap_or_default();
        let mut urls = BTreeMap::new();
        for port in ports {
            let url = match oc::port_url(sandbox, *port) {
                Some(u) => Some(u),
                None => self
                    .call(
                        Method::Post,
                        &format!("/sandboxes/{id}/preview"),
                        Some(&json!({ "port": port })),
                        CALL_DEADLINE,
                    )
                    .await?
                    .and_then(|a| oc::preview_url(&a)),
            };
            if let Some(url) = url {
                urls.insert(port.to_string(), url);
            }
        }
        Ok(urls)
    }

    /// Starts the supervisor in a sandbox made, forked or woken; one that cannot be started
    /// is deleted when it was new.
    async fn started(
        &self,
        sandbox: &Value,
        req: &SpawnRequest,
        new: bool,
    ) -> Result<SandboxInfo, ProviderError> {
        let id = oc::id_of(sandbox).unwrap_or_default();
        if let Err(e) = self.start_supervisor(&id).await {
            if new {
                let _ = self
                    .call(
                        Method::Delete,
                        &format!("/sandboxes/{id}"),
                        None,
                        CALL_DEADLINE,
                    )
                    .await;
            }
            return Err(e);
        }
        Ok(SandboxInfo {
            sandbox_id: req.sandbox_id.clone(),
            session_id: req.session_id.clone(),
            status: "running".into(),
            runtime_version: self.cfg.template.clone(),
            tunnel_urls: self.urls(sandbox, &req.tunnel_ports).await?,
            detail: None,
        })
    }
}

impl SandboxProvider for OpenComputerProvider {
    fn name(&self) -> &'static str {
        "opencomputer"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            snapshots: true,
            restore: true,
            persistent_resume: true,
            explicit_stop: true,
            timeouts: true,
            resume_in_place: true,
            snapshot_ends_sandbox: false,
        }
    }

    async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError> {
        let made = match &req.restore_from {
            Some(checkpoint) => self
                .call(
                    Method::Post,
                    &format!("/sandboxes/from-checkpoint/{checkpoint}"),
                    Some(&oc::fork_body(&self.cfg, req)),
                    CALL_DEADLINE,
                )
                .await?
                .ok_or_else(|| {
                    ProviderError::Permanent(format!("opencomputer: no checkpoint {checkpoint}"))
                })?,
            None => self
                .call(
                    Method::Post,
                    "/sandboxes",
                    Some(&oc::create_body(&self.cfg, req)),
                    CALL_DEADLINE,
                )
                .await?
                .ok_or_else(|| {
                    ProviderError::Permanent("opencomputer: the sandbox API is missing".into())
                })?,
        };
        self.started(&made, req, true).await
    }

    async fn status(&self, sandbox_id: &str) -> Result<SandboxInfo, ProviderError> {
        let found = self.find(sandbox_id).await?;
        let (status, detail) = match &found {
            Some(s) => oc::status_of(s),
            None => ("exited", Some("no such sandbox".to_owned())),
        };
        Ok(SandboxInfo {
            sandbox_id: sandbox_id.to_owned(),
            session_id: found
                .as_ref()
                .and_then(|s| s["metadata"][oc::META_SESSION].as_str())
                .unwrap_or_default()
                .to_owned(),
            status: status.into(),
            runtime_version: self.cfg.template.clone(),
            tunnel_urls: Default::default(),
            detail,
        })
    }

    /// Hibernates the sandbox: its disk (and, when it can, its memory) is kept.
    async fn stop(&self, sandbox_id: &str) -> Result<(), ProviderError> {
        let Some(s) = self.find(sandbox_id).await? else {
            return Ok(());
        };
        if !oc::is_running(&s) {
            return Ok(());
        }
        let id = oc::id_of(&s).unwrap_or_default();
        self.call(
            Method::Post,
            &format!("/sandboxes/{id}/hibernate"),
            None,
            CALL_DEADLINE,
        )
        .await
        .map(|_| ())
    }

    async fn resume(&self, previous: &str, req: &SpawnRequest) -> Result<Resumed, ProviderError> {
        let Some(mut s) = self.find(previous).await? else {
            return Ok(Resumed::Gone);
        };
        let id = oc::id_of(&s).unwrap_or_default();
        if !oc::is_running(&s) {
            match self
                .call(
                    Method::Post,
                    &format!("/sandboxes/{id}/wake"),
                    None,
                    CALL_DEADLINE,
                )
                .await?
            {
                None => return Ok(Resumed::Gone),
                Some(woken) if oc::id_of(&woken).is_some() => s = woken,
                Some(_) => {}
            }
        }
        self.call(
            Method::Post,
            &format!("/sandboxes/{id}/timeout"),
            Some(&json!({ "timeout": self.cfg.idle_timeout_seconds })),
            CALL_DEADLINE,
        )
        .await?;
        self.started(&s, req, false).await.map(Resumed::Started)
    }

    /// A disk checkpoint of the running sandbox.
    async fn snapshot(&self, sandbox_id: &str) -> Result<SnapshotInfo, ProviderError> {
        let began = worker::Date::now().as_millis();
        let s = self.find(sandbox_id).await?.ok_or_else(|| {
            ProviderError::Permanent(format!("opencomputer: no sandbox {sandbox_id}"))
        })?;
        let id = oc::id_of(&s).unwrap_or_default();
        let name = format!("{sandbox_id}-{began}");
        let made = self
            .call(
                Method::Post,
                &format!("/sandboxes/{id}/checkpoints"),
                Some(&oc::checkpoint_body(&name)),
                CHECKPOINT_DEADLINE,
            )
            .await?
            .ok_or_else(|| {
                ProviderError::Permanent(format!("opencomputer: sandbox {sandbox_id} is gone"))
            })?;
        let status = made["status"].as_str().unwrap_or("ready");
        if !matches!(status, "ready" | "created" | "processing") {
            return Err(ProviderError::Permanent(format!(
                "opencomputer: the checkpoint of {sandbox_id} is {status}"
            )));
        }
        Ok(SnapshotInfo {
            snapshot_id: made["id"].as_str().unwrap_or_default().to_owned(),
            sandbox_id: sandbox_id.to_owned(),
            runtime_version: self.cfg.template.clone(),
            bytes: made["sizeBytes"].as_u64().unwrap_or(0),
            duration_ms: worker::Date::now().as_millis().saturating_sub(began),
            session_id: s["metadata"][oc::META_SESSION].as_str().map(str::to_owned),
        })
    }

    async fn runtime_version(&self) -> Result<String, ProviderError> {
        Ok(self.cfg.template.clone())
    }

    /// Deletes the session's sandboxes, then their checkpoints (in that order: a checkpoint
    /// being taken meanwhile either ends before the sandbox goes, and is listed, or fails).
    async fn delete_session(&self, session_id: &str) -> Result<(), ProviderError> {
        for s in self.matching(oc::META_SESSION, session_id).await? {
            let id = oc::id_of(&s).unwrap_or_default();
            self.call(
                Method::Delete,
                &format!("/sandboxes/{id}"),
                None,
                CALL_DEADLINE,
            )
            .await?;
            let checkpoints = self
                .call(
                    Method::Get,
                    &format!("/sandboxes/{id}/checkpoints"),
                    None,
                    CALL_DEADLINE,
                )
                .await?
                .unwrap_or(Value::Null);
            for cp in oc::checkpoint_ids(&checkpoints) {
                self.call(
                    Method::Delete,
                    &format!("/sandboxes/{id}/checkpoints/{cp}"),
                    None,
                    CHECKPOINT_DEADLINE,
                )
                .await?;
            }
        }
        Ok(())
    }

    async fn build_image(&self, _req: &BuildImageRequest) -> Result<BuildStarted, ProviderError> {
        Err(ProviderError::Permanent(
            "prebuilt images are not built on opencomputer by this build (the template snapshot is the image)"
                .into(),
        ))
    }

    async fn delete_image(&self, _image_id: &str) -> Result<(), ProviderError> {
        Ok(())
    }
}
