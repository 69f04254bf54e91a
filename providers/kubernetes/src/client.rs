//! Kubernetes as a sandbox provider: the objects this crate builds, sent to the API
//! server with the configured ServiceAccount token. Persistent resume: stop deletes the
//! Pod (and its Secret, Service, Ingress) and keeps the workspace claim; resume starts a
//! new Pod on the session's newest claim.

use crate as kube;
use crate::{Failure, KubeConfig, Resource};
use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{SandboxInfo, SandboxRef, SnapshotInfo, SpawnRequest};
use inspect_provider::{ProviderError, ProviderKind, Resumed, SandboxProvider};
use serde_json::Value;
use std::time::Duration;
use worker::Method;

/// How long one API call may take before it counts as a transient failure.
const CALL_DEADLINE: Duration = Duration::from_secs(20);

pub struct KubernetesProvider {
    pub cfg: KubeConfig,
}

fn failure(code: u16, body: &str) -> ProviderError {
    match kube::classify(code, body) {
        Failure::NotFound => ProviderError::Permanent("kubernetes: not found".into()),
        Failure::AlreadyExists => ProviderError::Permanent("kubernetes: already exists".into()),
        Failure::Transient(m) => ProviderError::Transient(m),
        Failure::Quota(m) => ProviderError::AtCapacity(m),
        Failure::Permanent(m) => ProviderError::Permanent(m),
    }
}

impl KubernetesProvider {
    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<(u16, String), ProviderError> {
        let auth = format!("Bearer {}", self.cfg.token);
        inspect_provider::http::call(
            method,
            url,
            &[("Authorization", auth.as_str())],
            body.map(Value::to_string),
            CALL_DEADLINE,
        )
        .await
        .map_err(|e| ProviderError::Transient(format!("kubernetes API: {e}")))
    }

    /// Creates an object; one that already exists (a retried create) is fine.
    async fn create(&self, resource: Resource, object: &Value) -> Result<(), ProviderError> {
        let (code, text) = self
            .send(Method::Post, &self.cfg.collection(resource), Some(object))
            .await?;
        match code {
            200..=299 => Ok(()),
            _ => match kube::classify(code, &text) {
                Failure::AlreadyExists => Ok(()),
                _ => Err(failure(code, &text)),
            },
        }
    }

    /// Deletes an object; one that is already gone is fine.
    async fn delete(&self, resource: Resource, name: &str) -> Result<(), ProviderError> {
        let (code, text) = self
            .send(Method::Delete, &self.cfg.object(resource, name), None)
            .await?;
        match code {
            200..=299 | 404 => Ok(()),
            _ => Err(failure(code, &text)),
        }
    }

    async fn list(&self, url: &str) -> Result<Value, ProviderError> {
        let (code, text) = self.send(Method::Get, url, None).await?;
        if !(200..300).contains(&code) {
            return Err(failure(code, &text));
        }
        serde_json::from_str(&text).map_err(|e| {
            ProviderError::Transient(format!("kubernetes answered an unreadable list: {e}"))
        })
    }

    /// Whether the API server answers this token for the namespace: the sandbox Pods there.
    pub async fn probe(&self) -> Result<usize, ProviderError> {
        let url = format!(
            "{}?labelSelector={}%3D{}",
            self.cfg.collection(Resource::Pods),
            kube::LABEL_MANAGED_BY,
            kube::MANAGER
        );
        match self.list(&url).await {
            Ok(list) => Ok(kube::item_names(&list).len()),
            // RBAC refuses before it looks: a namespace without the Role's binding (a wrong
            // or missing one) answers 403, not 404.
            Err(ProviderError::Permanent(m)) if m.contains("forbidden") => {
                Err(ProviderError::Permanent(format!(
                    "the token may not list pods in namespace {}: is K8S_NAMESPACE the namespace deploy/kubernetes/rbac.yaml was applied to? ({m})",
                    self.cfg.namespace
                )))
            }
            Err(e) => Err(e),
        }
    }

    /// The Secret, the Pod on `claim`, and the ports' Service and Ingress. A refusal on the
    /// way (a quota, an outage) takes back what this attempt made: the retry comes with a
    /// new sandbox id, and what is left would only count against the namespace's quota.
    async fn start(&self, req: &SpawnRequest, claim: &str) -> Result<SandboxInfo, ProviderError> {
        let secret = kube::env_secret(req);
        self.create(Resource::Secrets, &secret).await?;
        let made = async {
            self.create(Resource::Pods, &kube::pod(&self.cfg, req, claim))
                .await?;
            if let Some((service, ingress)) = kube::exposure(&self.cfg, req) {
                self.create(Resource::Services, &service).await?;
                self.create(Resource::Ingresses, &ingress).await?;
            }
            Ok::<(), ProviderError>(())
        }
        .await;
        if let Err(e) = made {
            let _ = self.remove_pod(&req.sandbox_id).await;
            return Err(e);
        }
        Ok(SandboxInfo {
            editor: None,
            desktop: None,
            sandbox_id: req.sandbox_id.clone(),
            session_id: req.session_id.clone(),
            status: "running".into(),
            runtime_version: self.cfg.image.clone(),
            tunnel_urls: kube::tunnel_urls(&self.cfg, req),
            detail: None,
            vendor_id: None,
        })
    }

    /// The Pod and what belongs to it alone; the claim stays.
    async fn remove_pod(&self, sandbox_id: &str) -> Result<(), ProviderError> {
        let n = kube::names(sandbox_id);
        self.delete(Resource::Pods, &n.pod).await?;
        self.delete(Resource::Secrets, &n.secret).await?;
        if self.cfg.ingress_domain.is_some() {
            self.delete(Resource::Ingresses, &n.pod).await?;
            self.delete(Resource::Services, &n.pod).await?;
        }
        Ok(())
    }
}

impl SandboxProvider for KubernetesProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Kubernetes
    }

    async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError> {
        self.cfg
            .check_egress(req)
            .map_err(ProviderError::Permanent)?;
        let claim = kube::names(&req.sandbox_id).claim;
        match self
            .create(Resource::Claims, &kube::claim(&self.cfg, req))
            .await
        {
            // The namespace's claim quota is full: a stopped session's workspace (the
            // oldest no Pod mounts) is given back, and the claim asked for once more.
            Err(ProviderError::AtCapacity(m)) if m.contains("persistentvolumeclaims") => {
                let claims = self
                    .list(&kube::managed(&self.cfg, Resource::Claims))
                    .await?;
                let pods = self.list(&kube::managed(&self.cfg, Resource::Pods)).await?;
                let Some(old) = kube::claim_to_evict(&claims, &pods, &req.session_id) else {
                    return Err(ProviderError::AtCapacity(m));
                };
                self.delete(Resource::Claims, &old).await?;
                self.create(Resource::Claims, &kube::claim(&self.cfg, req))
                    .await?;
            }
            other => other?,
        }
        let info = match self.start(req, &claim).await {
            Ok(info) => info,
            Err(e) => {
                // This attempt's claim is empty: it goes too.
                let _ = self.delete(Resource::Claims, &claim).await;
                return Err(e);
            }
        };
        // A fresh sandbox starts clean: the session's older workspaces go.
        if let Ok(list) = self
            .list(&self.cfg.of_session(Resource::Claims, &req.session_id))
            .await
        {
            for old in kube::item_names(&list).into_iter().filter(|n| *n != claim) {
                let _ = self.delete(Resource::Claims, &old).await;
            }
        }
        Ok(info)
    }

    async fn status(&self, sandbox: &SandboxRef) -> Result<SandboxInfo, ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let pod = kube::names(sandbox_id).pod;
        let (code, text) = self
            .send(Method::Get, &self.cfg.object(Resource::Pods, &pod), None)
            .await?;
        let (status, detail, labels) = match code {
            200..=299 => {
                let v: Value = serde_json::from_str(&text).map_err(|e| {
                    ProviderError::Transient(format!("kubernetes answered an unreadable pod: {e}"))
                })?;
                let state = kube::pod_state(&v);
                let detail = match &state {
                    kube::PodState::Ended { reason } | kube::PodState::Stuck { reason } => {
                        Some(reason.clone())
                    }
                    kube::PodState::Starting { progress } => progress.clone(),
                    kube::PodState::Running => None,
                };
                (state.status(), detail, v["metadata"]["labels"].clone())
            }
            404 => ("stopped", Some("the pod is gone".into()), Value::Null),
            _ => return Err(failure(code, &text)),
        };
        Ok(SandboxInfo {
            editor: None,
            desktop: None,
            sandbox_id: sandbox_id.to_owned(),
            session_id: labels[kube::LABEL_SESSION]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            status: status.into(),
            runtime_version: self.cfg.image.clone(),
            tunnel_urls: Default::default(),
            detail,
            vendor_id: None,
        })
    }

    async fn stop(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        self.remove_pod(sandbox_id).await
    }

    async fn resume(
        &self,
        previous: &SandboxRef,
        req: &SpawnRequest,
    ) -> Result<Resumed, ProviderError> {
        let previous = previous.sandbox_id.as_str();
        // The old Pod may linger (a stop that failed): it must not hold the claim.
        self.remove_pod(previous).await?;
        let list = self
            .list(&self.cfg.of_session(Resource::Claims, &req.session_id))
            .await?;
        let Some(claim) = kube::newest_name(&list) else {
            return Ok(Resumed::Gone);
        };
        self.start(req, &claim)
            .await
            .map(|info| Resumed::Started(Box::new(info)))
    }

    async fn snapshot(&self, _sandbox: &SandboxRef) -> Result<SnapshotInfo, ProviderError> {
        Err(ProviderError::Permanent(
            "kubernetes sandboxes resume on their workspace claim; they take no snapshots".into(),
        ))
    }

    async fn runtime_version(&self) -> Result<String, ProviderError> {
        Ok(self.cfg.image.clone())
    }

    async fn delete_session(
        &self,
        session_id: &str,
        _known: &[SandboxRef],
    ) -> Result<(), ProviderError> {
        let mut kinds = vec![Resource::Pods, Resource::Secrets];
        if self.cfg.ingress_domain.is_some() {
            kinds.extend([Resource::Ingresses, Resource::Services]);
        }
        kinds.push(Resource::Claims);
        for kind in kinds {
            let list = self.list(&self.cfg.of_session(kind, session_id)).await?;
            for name in kube::item_names(&list) {
                self.delete(kind, &name).await?;
            }
        }
        Ok(())
    }

    async fn build_image(&self, _req: &BuildImageRequest) -> Result<BuildStarted, ProviderError> {
        Err(ProviderError::Permanent(
            "prebuilt images are not built on kubernetes yet".into(),
        ))
    }

    async fn delete_image(&self, _image_id: &str) -> Result<(), ProviderError> {
        Ok(())
    }
}
