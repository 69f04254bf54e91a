//! Vercel Sandbox as a sandbox provider: calls to Vercel's sandbox REST API, built by
//! this crate's pure part. Snapshot and restore: a sandbox is snapshotted when it stops (taking
//! a snapshot ends it), and the next one is made from that snapshot.

use crate as vercel;
use crate::VercelConfig;
use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{SandboxInfo, SandboxRef, SnapshotInfo, SpawnRequest};
use inspect_provider::{ProviderError, ProviderKind, Resumed, SandboxProvider};
use serde_json::Value;
use std::time::Duration;
use worker::Method;

const CALL_DEADLINE: Duration = Duration::from_secs(60);
/// Vercel takes a while to save a sandbox's disk.
const SNAPSHOT_DEADLINE: Duration = Duration::from_secs(310);

pub struct VercelProvider {
    pub cfg: VercelConfig,
}

fn failure(status: u16, body: &str) -> ProviderError {
    ProviderError::from_vendor("vercel", vercel::classify(status, body))
}

impl VercelProvider {
    /// One call; `Ok(None)` for a 404.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        deadline: Duration,
    ) -> Result<Option<Value>, ProviderError> {
        let auth = format!("Bearer {}", self.cfg.token);
        inspect_provider::http::vendor_call(
            "vercel",
            method,
            &self.cfg.url(path),
            &[("Authorization", auth.as_str())],
            body,
            deadline,
            failure,
        )
        .await
    }

    /// The sandbox named `name` (our sandbox id) and its current session, if any.
    async fn sandbox(&self, name: &str) -> Result<Option<Value>, ProviderError> {
        self.call(
            Method::Get,
            &self.cfg.sandbox_path(name),
            None,
            CALL_DEADLINE,
        )
        .await
    }

    /// Stops a sandbox's current session if it runs.
    async fn stop_answer(&self, answer: &Value) -> Result<(), ProviderError> {
        if vercel::status_of(answer).0 != "running" {
            return Ok(());
        }
        if let Some(sid) = vercel::session_id_of(answer) {
            self.call(
                Method::Post,
                &format!("/v2/sandboxes/sessions/{}/stop", vercel::encode(&sid)),
                None,
                CALL_DEADLINE,
            )
            .await?;
        }
        Ok(())
    }

    /// The project's sandboxes tagged `key` = `value`, every page of them.
    async fn tagged(&self, tag: (&str, &str)) -> Result<Vec<Value>, ProviderError> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..vercel::MAX_LIST_PAGES {
            let path = self.cfg.list_path(tag, cursor.as_deref());
            let page = self
                .call(Method::Get, &path, None, CALL_DEADLINE)
                .await?
                .unwrap_or(Value::Null);
            if let Some(found) = page["sandboxes"].as_array() {
                all.extend(found.iter().cloned());
            }
            cursor = vercel::next_cursor(&page);
            if cursor.is_none() {
                break;
            }
        }
        Ok(all)
    }

    /// How many sandboxes of ours the project holds (the health check's question).
    pub async fn count(&self) -> Result<usize, ProviderError> {
        Ok(self
            .tagged((vercel::TAG_FRAMEWORK, "open-inspect"))
            .await?
            .len())
    }
}

impl SandboxProvider for VercelProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Vercel
    }

    /// A running turn keeps its sandbox: its session's timeout moved on (within the plan).
    async fn extend(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let Some(answer) = self.sandbox(&sandbox.sandbox_id).await? else {
            return Ok(());
        };
        if vercel::status_of(&answer).0 != "running" {
            return Ok(());
        }
        if let Some(sid) = vercel::session_id_of(&answer) {
            self.call(
                Method::Post,
                &format!(
                    "/v2/sandboxes/sessions/{}/extend-timeout",
                    vercel::encode(&sid)
                ),
                Some(&vercel::extend_body()),
                CALL_DEADLINE,
            )
            .await?;
        }
        Ok(())
    }

    async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError> {
        let made = self
            .call(
                Method::Post,
                "/v2/sandboxes",
                Some(&vercel::create_body(&self.cfg, req)),
                CALL_DEADLINE,
            )
            .await?
            .ok_or_else(|| {
                ProviderError::Permanent(format!(
                    "vercel: no snapshot {} in project {}",
                    req.restore_from
                        .as_deref()
                        .unwrap_or(&self.cfg.base_snapshot),
                    self.cfg.project_id
                ))
            })?;
        let Some(sid) = vercel::session_id_of(&made) else {
            return Err(ProviderError::Transient(
                "vercel: the created sandbox has no session".into(),
            ));
        };
        let started = self
            .call(
                Method::Post,
                &format!("/v2/sandboxes/sessions/{}/cmd", vercel::encode(&sid)),
                Some(&vercel::start_command_body()),
                CALL_DEADLINE,
            )
            .await;
        if let Err(e) = started {
            let _ = self.stop_answer(&made).await;
            return Err(e);
        }
        Ok(SandboxInfo {
            editor: None,
            desktop: None,
            sandbox_id: req.sandbox_id.clone(),
            session_id: req.session_id.clone(),
            status: "running".into(),
            runtime_version: self.cfg.base_snapshot.clone(),
            tunnel_urls: vercel::port_urls(&made),
            detail: None,
            vendor_id: None,
        })
    }

    async fn status(&self, sandbox: &SandboxRef) -> Result<SandboxInfo, ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let found = self.sandbox(sandbox_id).await?;
        let (status, detail) = match &found {
            Some(s) => vercel::status_of(s),
            None => ("exited", Some("no such sandbox".to_owned())),
        };
        Ok(SandboxInfo {
            editor: None,
            desktop: None,
            sandbox_id: sandbox_id.to_owned(),
            session_id: found
                .as_ref()
                .and_then(|s| s["sandbox"]["tags"][vercel::TAG_SESSION].as_str())
                .unwrap_or_default()
                .to_owned(),
            status: status.into(),
            runtime_version: self.cfg.base_snapshot.clone(),
            tunnel_urls: Default::default(),
            detail,
            vendor_id: None,
        })
    }

    async fn stop(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        match self.sandbox(sandbox_id).await? {
            Some(s) => self.stop_answer(&s).await,
            None => Ok(()),
        }
    }

    async fn resume(
        &self,
        _previous: &SandboxRef,
        _req: &SpawnRequest,
    ) -> Result<Resumed, ProviderError> {
        Err(ProviderError::Permanent(
            "vercel sandboxes come back from snapshots, not by resuming".into(),
        ))
    }

    /// Snapshots the sandbox's running session (which ends it).
    async fn snapshot(&self, sandbox: &SandboxRef) -> Result<SnapshotInfo, ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let started = worker::Date::now().as_millis();
        let found = self
            .sandbox(sandbox_id)
            .await?
            .ok_or_else(|| ProviderError::Permanent(format!("vercel: no sandbox {sandbox_id}")))?;
        let sid = vercel::session_id_of(&found).ok_or_else(|| {
            ProviderError::Permanent(format!("vercel: sandbox {sandbox_id} has no session"))
        })?;
        let answer = self
            .call(
                Method::Post,
                &format!("/v2/sandboxes/sessions/{}/snapshot", vercel::encode(&sid)),
                Some(&vercel::snapshot_body(&self.cfg)),
                SNAPSHOT_DEADLINE,
            )
            .await?
            .ok_or_else(|| {
                ProviderError::Permanent(format!("vercel: the session of {sandbox_id} is gone"))
            })?;
        let snapshot = &answer["snapshot"];
        if snapshot["status"] == "failed" {
            return Err(ProviderError::Permanent(format!(
                "vercel: the snapshot of {sandbox_id} failed"
            )));
        }
        let id = snapshot["id"].as_str().unwrap_or_default();
        if id.is_empty() {
            return Err(ProviderError::Permanent(
                "vercel: the snapshot answer has no id".into(),
            ));
        }
        Ok(SnapshotInfo {
            snapshot_id: id.to_owned(),
            sandbox_id: sandbox_id.to_owned(),
            runtime_version: self.cfg.base_snapshot.clone(),
            bytes: snapshot["sizeBytes"].as_u64().unwrap_or(0),
            duration_ms: worker::Date::now().as_millis().saturating_sub(started),
            session_id: found["sandbox"]["tags"][vercel::TAG_SESSION]
                .as_str()
                .map(str::to_owned),
        })
    }

    async fn runtime_version(&self) -> Result<String, ProviderError> {
        Ok(self.cfg.base_snapshot.clone())
    }

    /// Stops the session's sandboxes and deletes the snapshots they left.
    async fn delete_session(
        &self,
        session_id: &str,
        _known: &[SandboxRef],
    ) -> Result<(), ProviderError> {
        let tagged = self.tagged((vercel::TAG_SESSION, session_id)).await?;
        let list = serde_json::json!({ "sandboxes": tagged });
        for s in vercel::sandboxes_of_session(&list, session_id) {
            let name = s["name"].as_str().unwrap_or_default();
            if let Some(found) = self.sandbox(name).await? {
                self.stop_answer(&found).await?;
            }
            let snapshots = self
                .call(
                    Method::Get,
                    &self.cfg.snapshots_path(name),
                    None,
                    CALL_DEADLINE,
                )
                .await?
                .unwrap_or(Value::Null);
            for id in vercel::snapshot_ids(&snapshots) {
                self.call(
                    Method::Delete,
                    &format!("/v2/sandboxes/snapshots/{}", vercel::encode(&id)),
                    None,
                    CALL_DEADLINE,
                )
                .await?;
            }
        }
        Ok(())
    }

    async fn build_image(&self, _req: &BuildImageRequest) -> Result<BuildStarted, ProviderError> {
        Err(ProviderError::Permanent(
            "prebuilt images are not built on vercel by this build (the base snapshot is the image)"
                .into(),
        ))
    }

    async fn delete_image(&self, _image_id: &str) -> Result<(), ProviderError> {
        Ok(())
    }
}
