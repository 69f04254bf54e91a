//! Kubernetes as a sandbox provider. A sandbox is a Pod running
//! `inspect-supervisor run` from the sandbox image, its environment in a Secret of its own,
//! its workspace on a PersistentVolumeClaim that outlives the Pod: stopping deletes the Pod
//! and keeps the claim, resuming starts a new Pod on the same claim. Ports go through a
//! Service and an Ingress whose hosts are `{port}-{pod}.{domain}`.
//!
//! This crate builds the objects, reads Pod state and classifies the API server's `Status`
//! errors; the client
//! (`client.rs`, wasm only) sends them from the SessionDO.

#[cfg(target_arch = "wasm32")]
mod client;
#[cfg(target_arch = "wasm32")]
pub use client::KubernetesProvider;

use inspect_protocol::provider::{SpawnRequest, SANDBOX_SYSTEM_VARS};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Where the claim is mounted; the sandbox's root (workspace, home, agent state).
pub const MOUNT: &str = "/sandbox";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGER: &str = "open-inspect";
pub const LABEL_SESSION: &str = "open-inspect.dev/session";
pub const LABEL_SANDBOX: &str = "open-inspect.dev/sandbox";
/// A Pod's lifetime cap when none is configured (`activeDeadlineSeconds`): a backstop
/// against a Pod the control plane lost track of, not a working limit. It counts wall time
/// from the start (Kubernetes only lets it shrink), so it would end a busy sandbox
/// mid-turn; our idle stop ends idle ones, and one ended anyway resumes on its claim.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 86_400;
pub const DEFAULT_WORKSPACE_SIZE: &str = "10Gi";
/// A sandbox's CPU and memory (requests = limits: the Pod is `Guaranteed`, never the
/// `BestEffort` a node evicts first) when `K8S_CPU`/`K8S_MEMORY` are not set.
pub const DEFAULT_CPU: &str = "1";
pub const DEFAULT_MEMORY: &str = "4Gi";
/// The user the sandbox runs as (the image's `sandbox` user).
pub const SANDBOX_UID: u64 = 1000;

/// The settings (`K8S_*`) the provider needs; see `docs/providers.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeConfig {
    /// The API server, e.g. `https://k8s.example.com:6443` (a public certificate: a Worker
    /// trusts no private CA).
    pub api_url: String,
    /// A ServiceAccount token allowed the namespace's pods, secrets, claims, services and
    /// ingresses (see `deploy/kubernetes/rbac.yaml`).
    pub token: String,
    pub namespace: String,
    /// The sandbox image (`providers/image/Dockerfile`).
    pub image: String,
    pub storage_class: Option<String>,
    pub workspace_size: String,
    /// A Secret in the namespace with the model's keys, given to every sandbox.
    pub model_secret: Option<String>,
    /// With it, ports get a Service and an Ingress with hosts `{port}-{pod}.{domain}`.
    pub ingress_domain: Option<String>,
    pub ingress_class: Option<String>,
    pub image_pull_secret: Option<String>,
    pub timeout_seconds: u64,
    pub cpu: Option<String>,
    pub memory: Option<String>,
    /// The cluster's egress proxy (`deploy/kubernetes/egress.yaml`) as `address:port`, and
    /// the key its grants are signed with: with both, a sandbox whose environment's egress
    /// policy is `off` goes only through it.
    pub egress_proxy: Option<String>,
    pub egress_key: Option<String>,
}

/// The label that puts a sandbox's Pod under the confined NetworkPolicy.
pub const LABEL_EGRESS: &str = "open-inspect/egress";

/// The settings that must be present.
pub const REQUIRED: [&str; 4] = [
    "K8S_API_URL",
    "K8S_TOKEN",
    "K8S_NAMESPACE",
    "K8S_SANDBOX_IMAGE",
];

impl KubeConfig {
    /// Reads the settings through `get`; the error names every missing or bad one.
    pub fn from_settings(get: impl Fn(&str) -> Option<String>) -> Result<KubeConfig, String> {
        let missing: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|n| get(n).is_none_or(|v| v.trim().is_empty()))
            .collect();
        if !missing.is_empty() {
            return Err(format!("missing {}", missing.join(", ")));
        }
        let need = |n: &str| get(n).unwrap_or_default().trim().to_owned();
        let api_url = need("K8S_API_URL").trim_end_matches('/').to_owned();
        let mut bad = Vec::new();
        // The token travels with every call: `http://` only to this machine (a local
        // proxy, a test), never across a network.
        let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
            .iter()
            .any(|l| {
                api_url
                    .strip_prefix(l)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', '/']))
            });
        if !(api_url.starts_with("https://") || loopback) {
            bad.push(format!(
                "K8S_API_URL must be an https:// URL (the token goes with every call): {api_url}"
            ));
        }
        let namespace = need("K8S_NAMESPACE");
        if !is_dns_label(&namespace) {
            bad.push(format!("K8S_NAMESPACE is not a DNS label: {namespace}"));
        }
        let workspace_size =
            get("K8S_WORKSPACE_SIZE").unwrap_or_else(|| DEFAULT_WORKSPACE_SIZE.into());
        if !is_quantity(&workspace_size) {
            bad.push(format!(
                "K8S_WORKSPACE_SIZE is not a quantity like 10Gi: {workspace_size}"
            ));
        }
        let timeout_seconds = match get("SANDBOX_TIMEOUT_SECONDS") {
            None => DEFAULT_TIMEOUT_SECONDS,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => n,
                _ => {
                    bad.push(format!(
                        "SANDBOX_TIMEOUT_SECONDS is not a positive number: {v}"
                    ));
                    0
                }
            },
        };
        let optional = |n: &str| {
            get(n)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        for n in ["K8S_CPU", "K8S_MEMORY"] {
            if let Some(v) = optional(n) {
                if !is_quantity(&v) {
                    bad.push(format!("{n} is not a quantity: {v}"));
                }
            }
        }
        if !bad.is_empty() {
            return Err(bad.join("; "));
        }
        Ok(KubeConfig {
            api_url,
            token: need("K8S_TOKEN"),
            namespace,
            image: need("K8S_SANDBOX_IMAGE"),
            storage_class: optional("K8S_STORAGE_CLASS"),
            workspace_size,
            model_secret: optional("K8S_MODEL_SECRET"),
            ingress_domain: optional("K8S_INGRESS_DOMAIN"),
            ingress_class: optional("K8S_INGRESS_CLASS"),
            image_pull_secret: optional("K8S_IMAGE_PULL_SECRET"),
            timeout_seconds,
            cpu: optional("K8S_CPU").or_else(|| Some(DEFAULT_CPU.into())),
            memory: optional("K8S_MEMORY").or_else(|| Some(DEFAULT_MEMORY.into())),
            egress_proxy: optional("K8S_EGRESS_PROXY"),
            egress_key: optional("K8S_EGRESS_KEY"),
        })
    }

    /// Whether this cluster can confine `req`'s sandbox as its policy asks: an `off`
    /// policy needs the egress proxy, or the sandbox is refused rather than run open.
    pub fn check_egress(&self, req: &SpawnRequest) -> Result<(), String> {
        let confines = req.egress.as_ref().is_some_and(|p| p.confines());
        if confines && (self.egress_proxy.is_none() || self.egress_key.is_none()) {
            return Err("the session's environment lets its traffic out only to some hosts, and this cluster has no egress proxy (K8S_EGRESS_PROXY and K8S_EGRESS_KEY: deploy/kubernetes/egress.yaml)".into());
        }
        Ok(())
    }

    /// The proxy settings a confined sandbox's Pod gets: every program's proxy is the
    /// cluster's, with this sandbox's grant (its policy and what it needs, signed) as the
    /// password.
    fn egress_env(&self, req: &SpawnRequest) -> Option<Vec<Value>> {
        let policy = req.egress.clone().filter(|p| p.confines())?;
        let (proxy, key) = (self.egress_proxy.as_ref()?, self.egress_key.as_ref()?);
        let grant = inspect_protocol::egress::EgressGrant {
            policy,
            reach: req.reach().origins,
        };
        let payload = serde_json::to_string(&grant).ok()?;
        let token = inspect_ports::seal_grant(key.as_bytes(), &req.sandbox_id, &payload);
        let url = format!("http://{}:{token}@{proxy}", req.sandbox_id);
        let mut env: Vec<Value> = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"]
            .iter()
            .flat_map(|n| [n.to_string(), n.to_ascii_lowercase()])
            .map(|n| json!({"name": n, "value": url}))
            .collect();
        for n in ["NO_PROXY", "no_proxy"] {
            env.push(json!({"name": n, "value": "localhost,127.0.0.1,::1"}));
        }
        env.push(json!({
            "name": inspect_protocol::egress::ENFORCED_BY_VAR,
            "value": "the cluster's egress proxy and its NetworkPolicy (refusals are in the proxy's log)",
        }));
        Some(env)
    }

    /// `…/api/v1/namespaces/{ns}/{resource}` (core) or the networking group for ingresses.
    pub fn collection(&self, resource: Resource) -> String {
        let group = match resource {
            Resource::Ingresses => "apis/networking.k8s.io/v1",
            _ => "api/v1",
        };
        format!(
            "{}/{group}/namespaces/{}/{}",
            self.api_url,
            self.namespace,
            resource.plural()
        )
    }

    pub fn object(&self, resource: Resource, name: &str) -> String {
        format!("{}/{name}", self.collection(resource))
    }

    /// The objects of `resource` labelled with this session.
    pub fn of_session(&self, resource: Resource, session_id: &str) -> String {
        format!(
            "{}?labelSelector={LABEL_SESSION}%3D{}",
            self.collection(resource),
            label_value(session_id)
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Pods,
    Secrets,
    Claims,
    Services,
    Ingresses,
}

impl Resource {
    pub fn plural(self) -> &'static str {
        match self {
            Resource::Pods => "pods",
            Resource::Secrets => "secrets",
            Resource::Claims => "persistentvolumeclaims",
            Resource::Services => "services",
            Resource::Ingresses => "ingresses",
        }
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_quantity(s: &str) -> bool {
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &s[digits.len()..];
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && ["", "m", "k", "K", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"].contains(&suffix)
}

/// A DNS label made of `id` (lowercase, `_` to `-`, at most 63 characters).
fn label_value(id: &str) -> String {
    let mut s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.truncate(63);
    s.trim_matches('-').to_owned()
}

/// The names of one sandbox's objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The Pod, its Service and its Ingress.
    pub pod: String,
    pub secret: String,
    /// The claim a fresh sandbox makes; a resumed one mounts its predecessor's.
    pub claim: String,
}

pub fn names(sandbox_id: &str) -> Names {
    let id = label_value(sandbox_id);
    Names {
        pod: format!("inspect-{id}"),
        secret: format!("inspect-env-{id}"),
        claim: format!("inspect-ws-{id}"),
    }
}

fn labels(req: &SpawnRequest) -> Value {
    json!({
        LABEL_MANAGED_BY: MANAGER,
        LABEL_SESSION: label_value(&req.session_id),
        LABEL_SANDBOX: label_value(&req.sandbox_id),
    })
}

/// The sandbox's environment: the session's secrets, then the system variables on top.
pub fn env_secret(req: &SpawnRequest) -> Value {
    let mut data: BTreeMap<String, String> = req
        .env
        .iter()
        .filter(|(k, _)| !SANDBOX_SYSTEM_VARS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let spawn = req.description();
    for (k, v) in [
        ("INSPECT_SPAWN", spawn),
        ("INSPECT_SANDBOX_TOKEN", req.sandbox_token.clone()),
        ("INSPECT_SESSION_ID", req.session_id.clone()),
        ("INSPECT_SANDBOX_ID", req.sandbox_id.clone()),
        ("INSPECT_CONTROL_PLANE_URL", req.control_plane_url.clone()),
    ] {
        data.insert(k.into(), v);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": names(&req.sandbox_id).secret, "labels": labels(req)},
        "type": "Opaque",
        "stringData": data,
    })
}

/// The workspace claim of a fresh sandbox.
pub fn claim(cfg: &KubeConfig, req: &SpawnRequest) -> Value {
    let mut spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": cfg.workspace_size}},
    });
    if let Some(class) = &cfg.storage_class {
        spec["storageClassName"] = json!(class);
    }
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": names(&req.sandbox_id).claim, "labels": labels(req)},
        "spec": spec,
    })
}

/// The sandbox's Pod on the workspace claim `claim`: the supervisor as a non-root user with
/// every capability dropped, no service-account token, and a deadline.
pub fn pod(cfg: &KubeConfig, req: &SpawnRequest, claim: &str) -> Value {
    let n = names(&req.sandbox_id);
    let mut env_from = vec![json!({"secretRef": {"name": n.secret}})];
    if let Some(model) = &cfg.model_secret {
        env_from.push(json!({"secretRef": {"name": model}}));
    }
    let mut resources = Map::new();
    let mut amounts = Map::new();
    if let Some(cpu) = &cfg.cpu {
        amounts.insert("cpu".into(), json!(cpu));
    }
    if let Some(memory) = &cfg.memory {
        amounts.insert("memory".into(), json!(memory));
    }
    if !amounts.is_empty() {
        resources.insert("requests".into(), Value::Object(amounts.clone()));
        resources.insert("limits".into(), Value::Object(amounts));
    }
    let ports: Vec<Value> = req
        .vendor_ports()
        .iter()
        .map(|p| json!({"name": format!("p{p}"), "containerPort": p}))
        .collect();
    let mut spec = json!({
        "restartPolicy": "Never",
        "activeDeadlineSeconds": cfg.timeout_seconds,
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": SANDBOX_UID,
            "runAsGroup": SANDBOX_UID,
            "fsGroup": SANDBOX_UID,
            // The claim's files are chowned only when its root is not the sandbox's already
            // (a resume on a large workspace would otherwise walk every file).
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [{
            "name": "sandbox",
            "image": cfg.image,
            "command": ["inspect-supervisor", "run"],
            "workingDir": MOUNT,
            "envFrom": env_from,
            "env": [
                {"name": "INSPECT_SANDBOX_ROOT", "value": MOUNT},
                {"name": "INSPECT_WORKSPACE", "value": format!("{MOUNT}/workspace")},
                {"name": "HOME", "value": format!("{MOUNT}/home")},
            ],
            "ports": ports,
            "resources": resources,
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "privileged": false,
                "capabilities": {"drop": ["ALL"]},
            },
            "volumeMounts": [{"name": "workspace", "mountPath": MOUNT}],
        }],
        "volumes": [{"name": "workspace", "persistentVolumeClaim": {"claimName": claim}}],
    });
    if let Some(pull) = &cfg.image_pull_secret {
        spec["imagePullSecrets"] = json!([{"name": pull}]);
    }
    let mut labels = labels(req);
    if let Some(env) = cfg.egress_env(req) {
        if let Some(list) = spec["containers"][0]["env"].as_array_mut() {
            list.extend(env);
        }
        labels[LABEL_EGRESS] = json!("off");
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": n.pod, "labels": labels},
        "spec": spec,
    })
}

/// The Service and Ingress that expose the sandbox's ports, when it has ports and an
/// ingress domain is configured.
pub fn exposure(cfg: &KubeConfig, req: &SpawnRequest) -> Option<(Value, Value)> {
    let domain = cfg.ingress_domain.as_ref()?;
    if req.vendor_ports().is_empty() {
        return None;
    }
    let n = names(&req.sandbox_id);
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": n.pod, "labels": labels(req)},
        "spec": {
            "type": "ClusterIP",
            "selector": {LABEL_SANDBOX: label_value(&req.sandbox_id)},
            "ports": req.vendor_ports().iter().map(|p| json!({"name": format!("p{p}"), "port": p, "targetPort": p})).collect::<Vec<_>>(),
        },
    });
    let rules: Vec<Value> = req
        .vendor_ports()
        .iter()
        .map(|p| {
            json!({
                "host": format!("{p}-{}.{domain}", n.pod),
                "http": {"paths": [{
                    "path": "/",
                    "pathType": "Prefix",
                    "backend": {"service": {"name": n.pod, "port": {"number": p}}},
                }]},
            })
        })
        .collect();
    // The URLs are `https://`: the hosts get TLS from the controller (its default
    // certificate, a wildcard for the domain).
    let hosts: Vec<String> = req
        .vendor_ports()
        .iter()
        .map(|p| format!("{p}-{}.{domain}", n.pod))
        .collect();
    let mut spec = json!({"rules": rules, "tls": [{"hosts": hosts}]});
    if let Some(class) = &cfg.ingress_class {
        spec["ingressClassName"] = json!(class);
    }
    let ingress = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": n.pod, "labels": labels(req)},
        "spec": spec,
    });
    Some((service, ingress))
}

/// Each port's public URL (computed, as the Ingress hosts are).
pub fn tunnel_urls(cfg: &KubeConfig, req: &SpawnRequest) -> BTreeMap<String, String> {
    let Some(domain) = &cfg.ingress_domain else {
        return BTreeMap::new();
    };
    let pod = names(&req.sandbox_id).pod;
    req.vendor_ports()
        .iter()
        .map(|p| (p.to_string(), format!("https://{p}-{pod}.{domain}")))
        .collect()
}

/// Where a Pod is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodState {
    /// On its way (being scheduled, its claim attached, its image pulled); how far, in
    /// Kubernetes' words, when it says.
    Starting {
        progress: Option<String>,
    },
    Running,
    /// It ended (its process exited, its deadline passed, it was evicted).
    Ended {
        reason: String,
    },
    /// It cannot start without someone changing something (bad image, missing secret).
    Stuck {
        reason: String,
    },
}

impl PodState {
    /// The status word of [`inspect_protocol::provider::SandboxInfo`].
    pub fn status(&self) -> &'static str {
        match self {
            PodState::Starting { .. } | PodState::Running => "running",
            PodState::Ended { .. } | PodState::Stuck { .. } => "exited",
        }
    }
}

/// Waiting reasons that need someone to change something.
const STUCK: [&str; 6] = [
    "InvalidImageName",
    "ErrImageNeverPull",
    "SignatureValidationFailed",
    "CreateContainerConfigError",
    "CreateContainerError",
    "CrashLoopBackOff",
];

/// Waiting reasons of a failed image pull, which the kubelet tries again with a growing
/// back-off: a registry that was briefly out heals, a missing image or refused credentials
/// do not. Since Kubernetes 1.32 the back-off's message carries the last pull's error.
const PULLING: [&str; 3] = ["ErrImagePull", "ImagePullBackOff", "RegistryUnavailable"];

/// Whether a failed pull's words (the runtime's gRPC error) say it cannot heal by itself.
fn pull_cannot_heal(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "code = notfound",
        "not found",
        "manifest unknown",
        "name unknown",
        "no such image",
        "does not exist",
        "unauthorized",
        "authorization failed",
        "denied",
        "forbidden",
        "invalid reference format",
    ]
    .iter()
    .any(|w| m.contains(w))
}

pub fn pod_state(pod: &Value) -> PodState {
    let status = &pod["status"];
    let phase = status["phase"].as_str().unwrap_or("Pending");
    let says = |what: &str| {
        let reason = status["reason"].as_str().unwrap_or(what);
        match status["message"].as_str() {
            Some(m) => format!("{reason}: {m}"),
            None => reason.to_owned(),
        }
    };
    if phase == "Succeeded" {
        return PodState::Ended {
            reason: says("the sandbox exited"),
        };
    }
    let containers = status["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if phase == "Failed" {
        // The Pod's own reason (Evicted, DeadlineExceeded), else its container's (OOMKilled).
        let reason = match status["reason"].as_str() {
            Some(_) => says("the sandbox failed"),
            None => containers
                .iter()
                .find_map(|c| c["state"]["terminated"]["reason"].as_str())
                .map(terminated_words)
                .unwrap_or_else(|| says("the sandbox failed")),
        };
        return PodState::Ended { reason };
    }
    for c in &containers {
        let waiting = &c["state"]["waiting"];
        if let Some(reason) = waiting["reason"].as_str() {
            let message = waiting["message"].as_str().unwrap_or("");
            let stuck =
                STUCK.contains(&reason) || (PULLING.contains(&reason) && pull_cannot_heal(message));
            if stuck {
                return PodState::Stuck {
                    reason: format!("{reason}: {message}")
                        .trim_end_matches(": ")
                        .to_owned(),
                };
            }
        }
        if let Some(t) = c["state"]["terminated"].as_object() {
            let reason = t
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("Terminated");
            return PodState::Ended {
                reason: terminated_words(reason),
            };
        }
    }
    if phase == "Running" {
        return PodState::Running;
    }
    // Not scheduled (no node with room, a claim not bound), else its container's wait
    // (ContainerCreating while the claim attaches and the image is pulled).
    let unscheduled = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodScheduled" && c["status"] == "False");
    let waiting = containers
        .iter()
        .map(|c| &c["state"]["waiting"])
        .find(|w| w["reason"].is_string());
    let progress = unscheduled.or(waiting).map(|c| {
        let reason = c["reason"].as_str().unwrap_or("Pending");
        let mut said = match c["message"].as_str().filter(|m| !m.is_empty()) {
            Some(m) => format!("{reason}: {m}"),
            None => reason.to_owned(),
        };
        if PULLING.contains(&reason) {
            said.push_str(" (the kubelet tries again)");
        } else if reason == "Unschedulable"
            && ["PersistentVolumeClaim", "persistent volume", "VolumeBinding"]
                .iter()
                .any(|w| said.contains(w))
        {
            // The scheduler waits for the workspace claim: its storage is not provisioned
            // (an `Immediate` class: "unbound immediate PersistentVolumeClaims"; a
            // `WaitForFirstConsumer` one: "did not find available persistent volumes to
            // bind", or its `VolumeBinding` step timing out).
            said.push_str(
                " (the workspace claim is Pending: can K8S_STORAGE_CLASS, or the cluster's default class, provision it?)",
            );
        }
        said
    });
    PodState::Starting { progress }
}

/// A container's end in words: OOMKilled says what to change.
fn terminated_words(reason: &str) -> String {
    match reason {
        "OOMKilled" => "OOMKilled: the sandbox went over its memory limit (K8S_MEMORY)".into(),
        other => other.to_owned(),
    }
}

/// What an API server's refusal means for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    NotFound,
    /// `AlreadyExists`: a retried create found its object.
    AlreadyExists,
    /// Try again later (429, 5xx, timeouts).
    Transient(String),
    /// A quota is used up: wait until sandboxes end.
    Quota(String),
    /// Will not work unchanged (bad object, no permission, bad token).
    Permanent(String),
}

/// Classifies an answer by its code and its `Status` body (`{reason, message, code}`).
pub fn classify(code: u16, body: &str) -> Failure {
    let status: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let reason = status["reason"].as_str().unwrap_or("");
    let message = status["message"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| body.chars().take(300).collect());
    let said = format!("kubernetes answered {code} {reason}: {message}");
    match code {
        404 => Failure::NotFound,
        // Only `AlreadyExists` means the object is there; a 409 `Conflict` is a write that
        // lost a race (quota admission answers a burst of creates with it): try again.
        409 if reason == "AlreadyExists" => Failure::AlreadyExists,
        409 => Failure::Transient(said),
        403 if message.contains("exceeded quota") => Failure::Quota(said),
        429 | 500..=599 => Failure::Transient(said),
        _ if reason == "Timeout" || reason == "ServerTimeout" => Failure::Transient(said),
        _ => Failure::Permanent(said),
    }
}

/// The newest object in a list answer (by `creationTimestamp`, RFC 3339 sorts as text).
pub fn newest_name(list: &Value) -> Option<String> {
    list["items"]
        .as_array()?
        .iter()
        .filter(|i| i["metadata"]["deletionTimestamp"].is_null())
        .max_by_key(|i| {
            i["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .and_then(|i| i["metadata"]["name"].as_str().map(str::to_owned))
}

/// `…/{resource}` of every sandbox this deployment made (the managed-by label).
pub fn managed(cfg: &KubeConfig, resource: Resource) -> String {
    format!(
        "{}?labelSelector={}%3D{}",
        cfg.collection(resource),
        LABEL_MANAGED_BY.replace('/', "%2F"),
        MANAGER
    )
}

/// The workspace claim to give back when the namespace's claim quota is full: the oldest
/// one no Pod mounts (a stopped session's), of another session than `session_id`. `None`
/// when every claim is in use: then the session waits for room.
pub fn claim_to_evict(claims: &Value, pods: &Value, session_id: &str) -> Option<String> {
    let mounted: Vec<&str> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["spec"]["volumes"].as_array().into_iter().flatten())
        .filter_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())
        .collect();
    claims["items"]
        .as_array()?
        .iter()
        .filter(|c| c["metadata"]["deletionTimestamp"].is_null())
        .filter(|c| {
            c["metadata"]["labels"][LABEL_SESSION].as_str() != Some(&label_value(session_id))
        })
        .filter(|c| {
            c["metadata"]["name"]
                .as_str()
                .is_some_and(|n| !mounted.contains(&n))
        })
        .min_by_key(|c| {
            c["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .and_then(|c| c["metadata"]["name"].as_str().map(str::to_owned))
}

/// Every name in a list answer.
pub fn item_names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
