//! OpenComputer as a sandbox provider: calls to OpenComputer's REST API, built by
//! this crate's pure part. Stop hibernates, resume wakes the same machine (its identity
//! kept) and starts the supervisor again if it is not running; after every turn a disk
//! checkpoint is taken, and a sandbox that cannot be woken is replaced by a fork of the
//! newest one.

use crate as oc;
use crate::OpenComputerConfig;
use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{SandboxInfo, SandboxRef, SnapshotInfo, SpawnRequest};
use inspect_provider::{ProviderError, ProviderKind, Resumed, SandboxProvider};
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

    /// The running sandboxes (all the hosted list shows) whose tags have `key` = `value`.
    async fn matching(&self, key: &str, value: &str) -> Result<Vec<Value>, ProviderError> {
        let list = self
            .call(Method::Get, "/sandboxes", None, CALL_DEADLINE)
            .await?
            .unwrap_or(Value::Null);
        Ok(oc::matching(&list, key, value))
    }

    /// OpenComputer's sandbox behind `sandbox` and its id: asked for by the id kept when
    /// it was made; a sandbox from before ids were kept is looked for among the running
    /// ones by its tags. `None` when OpenComputer knows no such sandbox.
    /// `POST /sandboxes/{id}/{action}` on the sandbox while it runs; nothing once it is
    /// gone or hibernated.
    async fn on_running(
        &self,
        sandbox: &SandboxRef,
        action: &str,
        body: Option<&Value>,
    ) -> Result<(), ProviderError> {
        let Some((id, s)) = self.find(sandbox).await? else {
            return Ok(());
        };
        if !oc::is_running(&s) {
            return Ok(());
        }
        self.call(
            Method::Post,
            &format!("/sandboxes/{id}/{action}"),
            body,
            CALL_DEADLINE,
        )
        .await
        .map(|_| ())
    }

    async fn find(&self, sandbox: &SandboxRef) -> Result<Option<(String, Value)>, ProviderError> {
        match &sandbox.vendor_id {
            Some(id) => Ok(self
                .call(
                    Method::Get,
                    &format!("/sandboxes/{id}"),
                    None,
                    CALL_DEADLINE,
                )
                .await?
                .map(|s| (id.clone(), s))),
            None => Ok(self
                .matching(oc::META_SANDBOX, &sandbox.sandbox_id)
                .await?
                .into_iter()
                .find_map(|s| oc::id_of(&s).map(|id| (id, s)))),
        }
    }

    /// How many sandboxes of ours OpenComputer runs (the health check's question).
    pub async fn count(&self) -> Result<usize, ProviderError> {
        Ok(self
            .matching(oc::META_FRAMEWORK, "open-inspect")
            .await?
            .len())
    }

    /// Starts the supervisor in the sandbox (nothing happens if it runs already), then checks
    /// it is up.
    async fn start_supervisor(&self, id: &str) -> Result<(), ProviderError> {
        self.run(id, &oc::start_body(), "did not start").await?;
        self.run(id, &oc::up_check_body(), "is not up").await
    }

    /// One command in the sandbox; anything but exit 0 is a transient failure in words.
    async fn run(&self, id: &str, body: &Value, what: &str) -> Result<(), ProviderError> {
        let ran = self
            .call(
                Method::Post,
                &format!("/sandboxes/{id}/exec/run"),
                Some(body),
                CALL_DEADLINE,
            )
            .await?
            .ok_or_else(|| {
                ProviderError::Transient(format!("opencomputer: sandbox {id} is gone"))
            })?;
        match ran["exitCode"].as_i64() {
            Some(0) => Ok(()),
            code => {
                let said = format!(
                    "{} {}",
                    ran["stdout"].as_str().unwrap_or_default(),
                    ran["stderr"].as_str().unwrap_or_default()
                );
                Err(ProviderError::Transient(format!(
                    "opencomputer: the supervisor {what} in sandbox {id} (exit {}): {}",
                    code.map(|c| c.to_string())
                        .unwrap_or_else(|| "unknown".into()),
                    said.trim().chars().take(1500).collect::<String>()
                )))
            }
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
        let begun = match new {
            // Our ids as tags: what the hosted list shows of a sandbox (no metadata).
            true => self
                .call(
                    Method::Put,
                    &format!("/sandboxes/{id}/tags"),
                    Some(&oc::tags(req)),
                    CALL_DEADLINE,
                )
                .await
                .map(|_| ()),
            false => Ok(()),
        };
        if let Err(e) = match begun {
            Ok(()) => self.start_supervisor(&id).await,
            Err(e) => Err(e),
        } {
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
            editor: None,
            desktop: None,
            sandbox_id: req.sandbox_id.clone(),
            session_id: req.session_id.clone(),
            status: "running".into(),
            runtime_version: self.cfg.template.clone(),
            tunnel_urls: self.urls(sandbox, &req.vendor_ports()).await?,
            detail: None,
            vendor_id: Some(id),
        })
    }
}

impl SandboxProvider for OpenComputerProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::OpenComputer
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

    async fn status(&self, sandbox: &SandboxRef) -> Result<SandboxInfo, ProviderError> {
        let found = self.find(sandbox).await?;
        let (status, detail) = match &found {
            Some((_, s)) => oc::status_of(s),
            None => ("exited", Some("no such sandbox".to_owned())),
        };
        Ok(SandboxInfo {
            editor: None,
            desktop: None,
            sandbox_id: sandbox.sandbox_id.clone(),
            session_id: found
                .as_ref()
                .and_then(|(_, s)| oc::our_id(s, oc::META_SESSION))
                .unwrap_or_default(),
            status: status.into(),
            runtime_version: self.cfg.template.clone(),
            tunnel_urls: Default::default(),
            detail,
            vendor_id: found.map(|(id, _)| id),
        })
    }

    /// Hibernates the sandbox: its disk (and, when it can, its memory) is kept.
    async fn stop(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        self.on_running(sandbox, "hibernate", None).await
    }

    /// Deletes a sandbox that never became ready (a hibernated one would be kept).
    async fn discard(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let Some((id, _)) = self.find(sandbox).await? else {
            return Ok(());
        };
        self.call(
            Method::Delete,
            &format!("/sandboxes/{id}"),
            None,
            CALL_DEADLINE,
        )
        .await
        .map(|_| ())
    }

    async fn resume(
        &self,
        previous: &SandboxRef,
        req: &SpawnRequest,
    ) -> Result<Resumed, ProviderError> {
        let Some((id, mut s)) = self.find(previous).await? else {
            return Ok(Resumed::Gone);
        };
        if !oc::is_running(&s) {
            // Only a hibernated sandbox wakes; a deleted one (`stopped`) answers 404.
            match self
                .call(
                    Method::Post,
                    &format!("/sandboxes/{id}/wake"),
                    Some(&json!({ "timeout": self.cfg.idle_timeout_seconds })),
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
        if oc::id_of(&s).is_none() {
            s["sandboxID"] = json!(id);
        }
        self.started(&s, req, false)
            .await
            .map(|info| Resumed::Started(Box::new(info)))
    }

    /// A running turn keeps its sandbox: OpenComputer's timeout is an idle one, and a
    /// turn's own traffic goes out through the sandbox's socket, not in through its API;
    /// setting it again starts it anew.
    async fn extend(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let body = json!({ "timeout": self.cfg.idle_timeout_seconds });
        self.on_running(sandbox, "timeout", Some(&body)).await
    }

    /// A disk checkpoint of the running sandbox.
    async fn snapshot(&self, sandbox: &SandboxRef) -> Result<SnapshotInfo, ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let began = worker::Date::now().as_millis();
        let (id, s) = self.find(sandbox).await?.ok_or_else(|| {
            ProviderError::Permanent(format!("opencomputer: no sandbox {sandbox_id}"))
        })?;
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
            session_id: oc::our_id(&s, oc::META_SESSION),
        })
    }

    async fn runtime_version(&self) -> Result<String, ProviderError> {
        Ok(self.cfg.template.clone())
    }

    /// Deletes the session's sandboxes, then their checkpoints (in that order: a checkpoint
    /// being taken meanwhile either ends before the sandbox goes, and is listed, or fails).
    /// The sandboxes are those the session kept ids of and any running one tagged with the
    /// session; OpenComputer still lists the checkpoints of a sandbox it deleted.
    async fn delete_session(
        &self,
        session_id: &str,
        known: &[SandboxRef],
    ) -> Result<(), ProviderError> {
        let mut ids: Vec<String> = known.iter().filter_map(|k| k.vendor_id.clone()).collect();
        for s in self.matching(oc::META_SESSION, session_id).await? {
            if let Some(id) = oc::id_of(&s) {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        for id in ids {
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
