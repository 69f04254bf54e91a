//! A fake Kubernetes API server for the kubernetes provider: the core `v1` pods, secrets,
//! persistentvolumeclaims and services and `networking.k8s.io/v1` ingresses of one
//! namespace, with the API's documented shapes: bearer-token auth (401 `Unauthorized`),
//! `Status` errors (404 `NotFound`, 409 `AlreadyExists`, 422 `Invalid`), `labelSelector`
//! on lists, `stringData` folded into base64 `data`, `metadata.uid`/`creationTimestamp`.
//! Any call can be made to fail once with a chosen status (429, 5xx, a quota's 403).
//!
//! It is also the kubelet: a Pod whose image is [`IMAGE`] runs its container's command on
//! this machine (`inspect-supervisor` is the real supervisor binary) with the environment a
//! kubelet gives it (the image's, then `envFrom` Secrets, then `env`), the claim's directory
//! where the claim is mounted, its own process group, and `activeDeadlineSeconds` enforced.
//! Phases follow the process: `Running`, then `Succeeded`/`Failed` with the container's
//! `terminated` state; a missing Secret is `CreateContainerConfigError`; another image is
//! not found, and a pull while the registry is out fails: both wait in `ErrImagePull` and
//! `ImagePullBackOff` and are pulled again, as a kubelet does.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const TOKEN: &str = "fake-kubernetes-serviceaccount-token";
pub const NAMESPACE: &str = "inspect-sandboxes";
pub const IMAGE: &str = "registry.example.com/open-inspect/sandbox:test";
pub const MODEL_SECRET: &str = "model-keys";

#[derive(Default)]
struct World {
    /// (resource, name) → object.
    objects: BTreeMap<(String, String), Value>,
    /// A running Pod's kill switch.
    running: HashMap<String, crate::fakes::machine::Running>,
    /// (method, resource) → the Status the next such call answers.
    fail_next: Vec<(String, String, u16, String, String)>,
    calls: Vec<String>,
    clock: u64,
    /// No node has room: new Pods stay Pending, unscheduled, with the scheduler's message.
    unschedulable: Option<String>,
    /// Image pulls the registry still fails (it is out, then back).
    registry_out: u32,
    /// The namespace's ResourceQuota: resource → how many objects may exist.
    quota: HashMap<String, usize>,
}

type Shared = Arc<Mutex<World>>;

struct Kubelet {
    world: Shared,
    root: PathBuf,
    supervisor: PathBuf,
    image_env: Vec<(String, String)>,
}

pub struct FakeKubernetes {
    pub base_url: String,
    kubelet: Arc<Kubelet>,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

const RESOURCES: [(&str, &str); 6] = [
    ("pods", "Pod"),
    ("secrets", "Secret"),
    ("persistentvolumeclaims", "PersistentVolumeClaim"),
    ("services", "Service"),
    ("ingresses", "Ingress"),
    ("resourcequotas", "ResourceQuota"),
];

impl FakeKubernetes {
    /// Starts the API server. `image_env` is the sandbox image's own environment (where
    /// OpenCode is, `PATH`); `model_env` goes into the namespace's [`MODEL_SECRET`].
    pub async fn start(
        image_env: Vec<(String, String)>,
        model_env: Vec<(String, String)>,
    ) -> anyhow::Result<FakeKubernetes> {
        let dir = tempfile::Builder::new().prefix("inspect-k8s-").tempdir()?;
        let kubelet = Arc::new(Kubelet {
            world: Arc::default(),
            root: dir.path().to_owned(),
            supervisor: crate::host::supervisor_bin()?,
            image_env,
        });
        let data: BTreeMap<String, String> = model_env
            .into_iter()
            .map(|(k, v)| (k, base64::engine::general_purpose::STANDARD.encode(v)))
            .collect();
        kubelet.with(|w| {
            w.objects.insert(
                ("secrets".into(), MODEL_SECRET.into()),
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": MODEL_SECRET, "namespace": NAMESPACE}, "data": data}),
            )
        });
        let app = Router::new()
            .route(
                "/api/v1/namespaces/{ns}/{resource}",
                get(collection).post(collection),
            )
            .route(
                "/api/v1/namespaces/{ns}/{resource}/{name}",
                get(object).delete(object).put(object),
            )
            .route(
                "/apis/networking.k8s.io/v1/namespaces/{ns}/{resource}",
                get(collection).post(collection),
            )
            .route(
                "/apis/networking.k8s.io/v1/namespaces/{ns}/{resource}/{name}",
                get(object).delete(object).put(object),
            )
            .with_state(kubelet.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeKubernetes {
            base_url: format!("http://{addr}"),
            kubelet,
            _dir: dir,
            task,
        })
    }

    /// The Worker's settings for this cluster.
    pub fn worker_vars(&self) -> Vec<(String, String)> {
        [
            ("SANDBOX_PROVIDER", "kubernetes"),
            ("K8S_API_URL", self.base_url.as_str()),
            ("K8S_TOKEN", TOKEN),
            ("K8S_NAMESPACE", NAMESPACE),
            ("K8S_SANDBOX_IMAGE", IMAGE),
            ("K8S_MODEL_SECRET", MODEL_SECRET),
            ("K8S_INGRESS_DOMAIN", "sandboxes.example.test"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The namespace's ResourceQuota (`deploy/kubernetes/namespace.yaml`'s `sandboxes`)
    /// allows `limit` objects of `resource`: one more is refused as the quota admission
    /// refuses it (403 Forbidden, "exceeded quota").
    pub fn set_quota(&self, resource: &str, limit: usize) {
        self.kubelet
            .with(|w| w.quota.insert(resource.into(), limit));
    }

    /// The next `method` call on `resource` answers `code` with a `Status` of `reason`.
    pub fn fail_next(&self, method: &str, resource: &str, code: u16, reason: &str, message: &str) {
        self.kubelet.with(|w| {
            w.fail_next.push((
                method.into(),
                resource.into(),
                code,
                reason.into(),
                message.into(),
            ))
        });
    }

    /// From now on no node has room for a new Pod: it stays Pending, its `PodScheduled`
    /// condition `False` with reason `Unschedulable` and `message`, as the scheduler says.
    pub fn unschedulable(&self, message: &str) {
        self.kubelet
            .with(|w| w.unschedulable = Some(message.to_owned()));
    }

    /// The registry is out for the next `pulls` image pulls: each fails with the runtime's
    /// `Unavailable` (`ErrImagePull`), the kubelet backs off (`ImagePullBackOff`, whose
    /// message carries the pull's error, as since Kubernetes 1.32) and pulls again.
    pub fn registry_unavailable(&self, pulls: u32) {
        self.kubelet.with(|w| w.registry_out = pulls);
    }

    /// A node with room came: the Pods waiting for one start, and new Pods run again.
    pub fn schedulable(&self) {
        let waiting: Vec<String> = self.kubelet.with(|w| {
            w.unschedulable = None;
            w.objects
                .iter()
                .filter(|((r, _), o)| {
                    r == "pods" && o["status"]["conditions"][0]["reason"] == "Unschedulable"
                })
                .map(|((_, name), _)| name.clone())
                .collect()
        });
        for name in waiting {
            start_pod(&self.kubelet, &name);
        }
    }

    /// The objects of `resource`, as stored.
    pub fn objects(&self, resource: &str) -> Vec<Value> {
        self.kubelet.with(|w| {
            w.objects
                .iter()
                .filter(|((r, _), _)| r == resource)
                .map(|(_, v)| v.clone())
                .collect()
        })
    }

    /// Every call, as `METHOD resource[/name]`.
    pub fn calls(&self) -> Vec<String> {
        self.kubelet.with(|w| w.calls.clone())
    }

    /// Every Pod's output (the supervisor's log), for failure messages.
    pub fn logs(&self) -> String {
        crate::fakes::machine::tail_logs(&self.kubelet.root.join("logs"))
    }
}

impl Drop for FakeKubernetes {
    fn drop(&mut self) {
        self.task.abort();
        // Every Pod goes with the cluster.
        self.kubelet.with(|w| w.running.clear());
    }
}

impl Kubelet {
    fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let mut w = self.world.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut w)
    }
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response()
}

fn kind_of(resource: &str) -> Option<&'static str> {
    RESOURCES
        .iter()
        .find(|(r, _)| *r == resource)
        .map(|(_, k)| *k)
}

/// The Role in `deploy/kubernetes/rbac.yaml`: each rule's resources and verbs (its flow
/// lists, `resources: [a, b]` then `verbs: [c, d]`).
fn role_rules() -> &'static [(Vec<String>, Vec<String>)] {
    static RULES: std::sync::OnceLock<Vec<(Vec<String>, Vec<String>)>> = std::sync::OnceLock::new();
    RULES.get_or_init(|| {
        let text = std::fs::read_to_string(crate::root().join("deploy/kubernetes/rbac.yaml"))
            .unwrap_or_default();
        let list = |line: &str, key: &str| -> Option<Vec<String>> {
            let rest = line.trim().strip_prefix(key)?.trim();
            let inner = rest.strip_prefix('[')?.strip_suffix(']')?;
            Some(inner.split(',').map(|x| x.trim().to_owned()).collect())
        };
        let mut rules = Vec::new();
        let mut resources: Option<Vec<String>> = None;
        for line in text.lines() {
            if let Some(r) = list(line, "resources:") {
                resources = Some(r);
            } else if let Some(v) = list(line, "verbs:") {
                if let Some(r) = resources.take() {
                    rules.push((r, v));
                }
            }
        }
        rules
    })
}

fn role_allows(resource: &str, verb: &str) -> bool {
    role_rules().iter().any(|(resources, verbs)| {
        resources.iter().any(|r| r == resource) && verbs.iter().any(|v| v == verb)
    })
}

/// Auth, the namespace, the resource, the Role, and a failure the test asked for.
fn admit(
    k: &Kubelet,
    headers: &HeaderMap,
    method: &Method,
    ns: &str,
    resource: &str,
    name: Option<&str>,
) -> Result<(), Box<Response>> {
    k.with(|w| {
        w.calls.push(match name {
            Some(n) => format!("{method} {resource}/{n}"),
            None => format!("{method} {resource}"),
        })
    });
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if auth != format!("Bearer {TOKEN}") {
        return Err(Box::new(status(401, "Unauthorized", "Unauthorized")));
    }
    if kind_of(resource).is_none() {
        return Err(Box::new(status(
            404,
            "NotFound",
            &format!("the server could not find the requested resource ({resource})"),
        )));
    }
    // The token is the ServiceAccount of `deploy/kubernetes/rbac.yaml`: its Role decides.
    let verb = match (method.as_str(), name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        ("PATCH", _) => "patch",
        ("PUT", _) => "update",
        _ => "unknown",
    };
    // The Role is bound in its own namespace only: elsewhere (a wrong K8S_NAMESPACE, one
    // that does not exist) authorization refuses before anything is looked up.
    if ns != NAMESPACE || !role_allows(resource, verb) {
        return Err(Box::new(status(
            403,
            "Forbidden",
            &format!(
                "{resource}{} is forbidden: User \"system:serviceaccount:{NAMESPACE}:open-inspect-control-plane\" cannot {verb} resource \"{resource}\" in API group \"\" in the namespace \"{ns}\"",
                name.map(|n| format!(" \"{n}\"")).unwrap_or_default()
            ),
        )));
    }
    let forced = k.with(|w| {
        let at = w
            .fail_next
            .iter()
            .position(|(m, r, ..)| m == method.as_str() && r == resource)?;
        Some(w.fail_next.remove(at))
    });
    if let Some((_, _, code, reason, message)) = forced {
        return Err(Box::new(status(code, &reason, &message)));
    }
    Ok(())
}

fn selected(object: &Value, selector: Option<&String>) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let (k, v) = term.split_once('=').unwrap_or((term, ""));
        object["metadata"]["labels"][k].as_str() == Some(v)
    })
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

async fn collection(
    State(k): State<Arc<Kubelet>>,
    method: Method,
    Path((ns, resource)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = admit(&k, &headers, &method, &ns, &resource, None) {
        return *r;
    }
    if method == Method::GET && resource == "resourcequotas" {
        // The namespace's one quota (`deploy/kubernetes/namespace.yaml`), as set: its hard
        // limits and what is used of them.
        let items: Vec<Value> = k.with(|w| {
            if w.quota.is_empty() {
                return vec![];
            }
            let mut hard = serde_json::Map::new();
            let mut used = serde_json::Map::new();
            for (r, limit) in &w.quota {
                hard.insert(r.clone(), json!(limit.to_string()));
                let n = w.objects.keys().filter(|(o, _)| o == r).count();
                used.insert(r.clone(), json!(n.to_string()));
            }
            vec![json!({
                "apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": {"name": "sandboxes", "namespace": NAMESPACE},
                "spec": {"hard": hard.clone()},
                "status": {"hard": hard, "used": used},
            })]
        });
        return Json(json!({"kind": "ResourceQuotaList", "apiVersion": "v1", "metadata": {}, "items": items}))
            .into_response();
    }
    if method == Method::GET {
        let items: Vec<Value> = k.with(|w| {
            w.objects
                .iter()
                .filter(|((r, _), o)| *r == resource && selected(o, q.get("labelSelector")))
                .map(|(_, o)| o.clone())
                .collect()
        });
        let kind = kind_of(&resource).unwrap_or_default();
        return Json(json!({"kind": format!("{kind}List"), "apiVersion": "v1", "metadata": {}, "items": items}))
            .into_response();
    }
    let Ok(mut object) = serde_json::from_slice::<Value>(&body) else {
        return status(400, "BadRequest", "the body is not a JSON object");
    };
    let kind = kind_of(&resource).unwrap_or_default();
    if object["kind"] != kind {
        return status(
            400,
            "BadRequest",
            &format!("the object's kind is not {kind}"),
        );
    }
    let name = object["metadata"]["name"].as_str().unwrap_or("").to_owned();
    if !is_dns_subdomain(&name) {
        return status(
            422,
            "Invalid",
            &format!("{kind} \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"),
        );
    }
    if let Err(why) = validate(kind, &object) {
        return status(
            422,
            "Invalid",
            &format!("{kind} \"{name}\" is invalid: {why}"),
        );
    }
    let over = k.with(|w| {
        let limit = *w.quota.get(&resource)?;
        let used = w.objects.keys().filter(|(r, _)| *r == resource).count();
        (used >= limit).then_some((used, limit))
    });
    if let Some((used, limit)) = over {
        return status(
            403,
            "Forbidden",
            &format!("{resource} \"{name}\" is forbidden: exceeded quota: sandboxes, requested: {resource}=1, used: {resource}={used}, limited: {resource}={limit}"),
        );
    }
    let exists = k.with(|w| w.objects.contains_key(&(resource.clone(), name.clone())));
    if exists {
        return status(
            409,
            "AlreadyExists",
            &format!("{resource} \"{name}\" already exists"),
        );
    }
    let stamp = k.with(|w| {
        w.clock += 1;
        w.clock
    });
    object["metadata"]["namespace"] = json!(NAMESPACE);
    object["metadata"]["uid"] = json!(format!("uid-{stamp}"));
    object["metadata"]["resourceVersion"] = json!(stamp.to_string());
    // Seconds apart so the newest sorts last, as real timestamps do.
    object["metadata"]["creationTimestamp"] = json!(format!(
        "2026-12-01T{:02}:{:02}:{:02}Z",
        stamp / 3600 % 24,
        stamp / 60 % 60,
        stamp % 60
    ));
    if kind == "Secret" {
        let mut data = object["data"].as_object().cloned().unwrap_or_default();
        if let Some(plain) = object["stringData"].as_object() {
            for (key, v) in plain {
                let text = v.as_str().unwrap_or_default();
                data.insert(
                    key.clone(),
                    json!(base64::engine::general_purpose::STANDARD.encode(text)),
                );
            }
        }
        object["data"] = Value::Object(data);
        if let Some(o) = object.as_object_mut() {
            o.remove("stringData");
        }
    }
    if kind == "PersistentVolumeClaim" {
        let _ = std::fs::create_dir_all(k.root.join("volumes").join(&name));
        object["status"] = json!({"phase": "Bound"});
    }
    k.with(|w| {
        w.objects
            .insert((resource.clone(), name.clone()), object.clone())
    });
    if kind == "Pod" {
        start_pod(&k, &name);
        object = k
            .with(|w| w.objects.get(&(resource, name)).cloned())
            .unwrap_or(object);
    }
    (StatusCode::CREATED, Json(object)).into_response()
}

/// What the API server's validation refuses (the parts the provider relies on).
fn validate(kind: &str, o: &Value) -> Result<(), String> {
    match kind {
        "Pod" => {
            let containers = o["spec"]["containers"]
                .as_array()
                .ok_or("spec.containers: Required value")?;
            if containers.is_empty() {
                return Err("spec.containers: Required value".into());
            }
            for c in containers {
                if c["image"].as_str().is_none_or(str::is_empty) {
                    return Err("spec.containers[0].image: Required value".into());
                }
            }
            if o["spec"]["restartPolicy"] != "Never"
                && o["spec"]["restartPolicy"] != "Always"
                && o["spec"]["restartPolicy"] != "OnFailure"
            {
                return Err("spec.restartPolicy: Unsupported value".into());
            }
            Ok(())
        }
        "PersistentVolumeClaim" => {
            if o["spec"]["resources"]["requests"]["storage"].is_string() {
                Ok(())
            } else {
                Err("spec.resources[storage]: Required value".into())
            }
        }
        "Ingress" => {
            let rules = o["spec"]["rules"].as_array().cloned().unwrap_or_default();
            if rules.iter().all(|r| r["host"].is_string()) {
                Ok(())
            } else {
                Err("spec.rules[0].host: Required value".into())
            }
        }
        _ => Ok(()),
    }
}

async fn object(
    State(k): State<Arc<Kubelet>>,
    method: Method,
    Path((ns, resource, name)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = admit(&k, &headers, &method, &ns, &resource, Some(&name)) {
        return *r;
    }
    let key = (resource.clone(), name.clone());
    let not_found = || status(404, "NotFound", &format!("{resource} \"{name}\" not found"));
    match method {
        Method::GET => match k.with(|w| w.objects.get(&key).cloned()) {
            Some(o) => Json(o).into_response(),
            None => not_found(),
        },
        Method::DELETE => {
            let Some(o) = k.with(|w| w.objects.remove(&key)) else {
                return not_found();
            };
            if resource == "pods" {
                // Dropping the switch kills the process group.
                k.with(|w| w.running.remove(&name));
            }
            if resource == "persistentvolumeclaims" {
                let _ = std::fs::remove_dir_all(k.root.join("volumes").join(&name));
            }
            Json(o).into_response()
        }
        _ => status(405, "MethodNotAllowed", "the fake does not update objects"),
    }
}

fn set_pod_status(k: &Kubelet, pod: &str, status: Value) {
    k.with(|w| {
        if let Some(o) = w.objects.get_mut(&("pods".into(), pod.to_owned())) {
            o["status"] = status;
        }
    });
}

fn waiting(reason: &str, message: &str) -> Value {
    json!({"phase": "Pending", "containerStatuses": [
        {"name": "sandbox", "ready": false, "state": {"waiting": {"reason": reason, "message": message}}}
    ]})
}

/// How long the kubelet waits before pulling again (its own starts at 10 s and doubles).
const PULL_BACK_OFF: Duration = Duration::from_secs(4);

/// The kubelet's pull, when it fails: an image other than [`IMAGE`] is not found; while
/// the registry is out a pull fails as unavailable. The Pod then waits in `ErrImagePull`,
/// backs off in `ImagePullBackOff` and is pulled again, for as long as it exists.
fn pull_failed(k: &Arc<Kubelet>, name: &str, pod: &Value) -> bool {
    let image = pod["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let error = if image != IMAGE {
        format!("rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": failed to resolve reference \"{image}\": {image}: not found")
    } else if k
        .with(|w| {
            w.registry_out
                .checked_sub(1)
                .map(|left| w.registry_out = left)
        })
        .is_some()
    {
        format!("rpc error: code = Unavailable desc = failed to pull and unpack image \"{image}\": dial tcp 10.0.0.9:443: i/o timeout")
    } else {
        return false;
    };
    set_pod_status(k, name, waiting("ErrImagePull", &error));
    let uid = pod["metadata"]["uid"].clone();
    let (k, name) = (k.clone(), name.to_owned());
    tokio::spawn(async move {
        let same_pod = || {
            k.with(|w| {
                w.objects
                    .get(&("pods".into(), name.clone()))
                    .is_some_and(|p| p["metadata"]["uid"] == uid)
            })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !same_pod() {
            return;
        }
        let backing_off = format!("Back-off pulling image \"{image}\": ErrImagePull: {error}");
        set_pod_status(&k, &name, waiting("ImagePullBackOff", &backing_off));
        tokio::time::sleep(PULL_BACK_OFF).await;
        if same_pod() {
            start_pod(&k, &name);
        }
    });
    true
}

/// The kubelet's part: resolve the environment and the mount, run the command.
fn start_pod(k: &Arc<Kubelet>, name: &str) {
    let Some(pod) = k.with(|w| w.objects.get(&("pods".into(), name.to_owned())).cloned()) else {
        return;
    };
    if let Some(message) = k.with(|w| w.unschedulable.clone()) {
        set_pod_status(
            k,
            name,
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}),
        );
        return;
    }
    if pull_failed(k, name, &pod) {
        return;
    }
    let c = &pod["spec"]["containers"][0];
    let mut env: Vec<(String, String)> = k.image_env.clone();
    for from in c["envFrom"].as_array().cloned().unwrap_or_default() {
        let secret = from["secretRef"]["name"].as_str().unwrap_or_default();
        let Some(s) = k.with(|w| {
            w.objects
                .get(&("secrets".into(), secret.to_owned()))
                .cloned()
        }) else {
            set_pod_status(
                k,
                name,
                waiting(
                    "CreateContainerConfigError",
                    &format!("secret \"{secret}\" not found"),
                ),
            );
            return;
        };
        for (key, v) in s["data"].as_object().cloned().unwrap_or_default() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap_or_default())
                .unwrap_or_default();
            env.push((key, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    for e in c["env"].as_array().cloned().unwrap_or_default() {
        env.push((
            e["name"].as_str().unwrap_or_default().to_owned(),
            e["value"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    // The claim's directory where the container mounts it.
    let claims: HashMap<String, String> = pod["spec"]["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|v| {
            Some((
                v["name"].as_str()?.to_owned(),
                v["persistentVolumeClaim"]["claimName"].as_str()?.to_owned(),
            ))
        })
        .collect();
    let mut mounts: Vec<(String, PathBuf)> = Vec::new();
    for m in c["volumeMounts"].as_array().cloned().unwrap_or_default() {
        let (Some(vol), Some(path)) = (m["name"].as_str(), m["mountPath"].as_str()) else {
            continue;
        };
        let Some(claim) = claims.get(vol) else {
            continue;
        };
        let dir = k.root.join("volumes").join(claim);
        if !dir.is_dir() {
            set_pod_status(
                k,
                name,
                json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": format!("persistentvolumeclaim \"{claim}\" not found")}]}),
            );
            return;
        }
        mounts.push((path.to_owned(), dir));
    }
    let host_path = |p: &str| -> String {
        for (mount, dir) in &mounts {
            if let Some(rest) = p.strip_prefix(mount.as_str()) {
                return format!("{}{rest}", dir.display());
            }
        }
        p.to_owned()
    };
    let command: Vec<String> = c["command"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let Some(program) = command.first() else {
        set_pod_status(k, name, waiting("CreateContainerError", "no command"));
        return;
    };
    let program = if program == "inspect-supervisor" {
        k.supervisor.clone()
    } else {
        PathBuf::from(program)
    };
    let workdir = host_path(c["workingDir"].as_str().unwrap_or("/"));
    let deadline = pod["spec"]["activeDeadlineSeconds"].as_u64();
    let launch = crate::fakes::machine::Launch {
        program,
        args: command[1..].to_vec(),
        env: env
            .iter()
            .map(|(key, v)| (key.clone(), host_path(v)))
            .collect(),
        workdir: PathBuf::from(workdir),
        log: k.root.join("logs").join(format!("{name}.log")),
        deadline: deadline.map(Duration::from_secs),
    };
    // Running from here; the watcher records the end (even one that comes at once).
    set_pod_status(
        k,
        name,
        json!({"phase": "Running", "containerStatuses": [{"name": "sandbox", "ready": true, "state": {"running": {}}}]}),
    );
    let watcher = k.clone();
    let pod_name = name.to_owned();
    let started = crate::fakes::machine::launch(launch, move |ended| {
        let status = match ended {
            crate::fakes::machine::Ended::Exited(code) => {
                let (phase, reason) = if code == 0 {
                    ("Succeeded", "Completed")
                } else {
                    ("Failed", "Error")
                };
                json!({"phase": phase, "containerStatuses": [{"name": "sandbox", "ready": false, "state": {"terminated": {"exitCode": code, "reason": reason}}}]})
            }
            crate::fakes::machine::Ended::Deadline => {
                json!({"phase": "Failed", "reason": "DeadlineExceeded", "message": "Pod was active on the node longer than the specified deadline"})
            }
        };
        set_pod_status(&watcher, &pod_name, status);
        watcher.with(|w| w.running.remove(&pod_name));
    });
    match started {
        Ok(kill) => {
            k.with(|w| w.running.insert(name.to_owned(), kill));
        }
        Err(e) => set_pod_status(k, name, waiting("CreateContainerError", &e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_role_is_read_from_the_committed_manifest() {
        assert!(super::role_allows("pods", "get"));
        assert!(super::role_allows("ingresses", "create"));
        // Least privilege: what the provider never does is refused.
        assert!(!super::role_allows("secrets", "get"));
        assert!(!super::role_allows("pods", "patch"));
        assert!(!super::role_allows("configmaps", "list"));
    }
}
