use super::*;
use inspect_protocol::provider::{BootMode, WorkspaceRepository};

fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |n: &str| map.get(n).cloned()
}

const BASE: [(&str, &str); 4] = [
    ("K8S_API_URL", "https://k8s.example.com:6443/"),
    ("K8S_TOKEN", "tok"),
    ("K8S_NAMESPACE", "sandboxes"),
    ("K8S_SANDBOX_IMAGE", "ghcr.io/acme/inspect-sandbox:0.1.0"),
];

fn config(extra: &[(&str, &str)]) -> KubeConfig {
    let mut all = BASE.to_vec();
    all.extend_from_slice(extra);
    KubeConfig::from_settings(settings(&all)).unwrap()
}

fn request() -> SpawnRequest {
    SpawnRequest {
        setup_secrets: Vec::new(),
        session_id: "abc123".into(),
        sandbox_id: "sb_F00D".into(),
        sandbox_token: "secret-token".into(),
        control_plane_url: "https://inspect.example.com".into(),
        repositories: vec![WorkspaceRepository {
            owner: "acme".into(),
            name: "web".into(),
            source: "https://github.com/acme/web.git".into(),
            base_branch: None,
        }],
        work_branch: "open-inspect/abc123".into(),
        boot_mode: BootMode::Fresh,
        env: [
            ("NPM_TOKEN".to_owned(), "npm".to_owned()),
            ("INSPECT_SANDBOX_TOKEN".to_owned(), "forged".to_owned()),
        ]
        .into(),
        tunnel_ports: vec![3000],
        default_model: None,
        models: Vec::new(),
        skills: Vec::new(),
        mcp_servers: Vec::new(),
        agent: Default::default(),
        managed_grants: Vec::new(),
        restore_from: None,
        egress: None,
    }
}

#[test]
fn settings_name_what_is_missing_or_wrong() {
    let e = KubeConfig::from_settings(settings(&[("K8S_TOKEN", "t")])).unwrap_err();
    assert_eq!(e, "missing K8S_API_URL, K8S_NAMESPACE, K8S_SANDBOX_IMAGE");
    let mut bad = BASE.to_vec();
    bad[2] = ("K8S_NAMESPACE", "Not_A_Label");
    bad.push(("K8S_WORKSPACE_SIZE", "lots"));
    bad.push(("SANDBOX_TIMEOUT_SECONDS", "-5"));
    let e = KubeConfig::from_settings(settings(&bad)).unwrap_err();
    assert!(e.contains("K8S_NAMESPACE"), "{e}");
    assert!(e.contains("K8S_WORKSPACE_SIZE"), "{e}");
    assert!(e.contains("SANDBOX_TIMEOUT_SECONDS"), "{e}");
    // The token goes with every call: plain http only to this machine.
    let mut plain = BASE.to_vec();
    plain[0] = ("K8S_API_URL", "http://k8s.example.com:6443");
    let e = KubeConfig::from_settings(settings(&plain)).unwrap_err();
    assert!(e.contains("must be an https:// URL"), "{e}");
    plain[0] = ("K8S_API_URL", "http://127.0.0.1:8001");
    assert!(KubeConfig::from_settings(settings(&plain)).is_ok());
    plain[0] = ("K8S_API_URL", "http://127.0.0.1.evil.example");
    assert!(KubeConfig::from_settings(settings(&plain)).is_err());
    let c = config(&[]);
    assert_eq!(c.api_url, "https://k8s.example.com:6443");
    assert_eq!(c.timeout_seconds, DEFAULT_TIMEOUT_SECONDS);
    assert_eq!(c.workspace_size, "10Gi");
    assert_eq!(
        c.of_session(Resource::Claims, "abc123"),
        "https://k8s.example.com:6443/api/v1/namespaces/sandboxes/persistentvolumeclaims?labelSelector=open-inspect.dev/session%3Dabc123"
    );
    assert_eq!(
        c.object(Resource::Ingresses, "x"),
        "https://k8s.example.com:6443/apis/networking.k8s.io/v1/namespaces/sandboxes/ingresses/x"
    );
}

#[test]
fn names_are_dns_labels() {
    let n = names("sb_F00D");
    assert_eq!(n.pod, "inspect-sb-f00d");
    assert_eq!(n.secret, "inspect-env-sb-f00d");
    assert_eq!(n.claim, "inspect-ws-sb-f00d");
    assert!(names(&"x".repeat(200)).claim.len() <= 75);
}

#[test]
fn the_secret_holds_the_session_env_and_the_system_vars_win() {
    let s = env_secret(&request());
    let data = &s["stringData"];
    assert_eq!(data["NPM_TOKEN"], "npm");
    assert_eq!(
        data["INSPECT_SANDBOX_TOKEN"], "secret-token",
        "not the forged one"
    );
    let spawn: SpawnRequest =
        serde_json::from_str(data["INSPECT_SPAWN"].as_str().unwrap()).unwrap();
    assert!(spawn.sandbox_token.is_empty() && spawn.env.is_empty());
    assert_eq!(spawn.repositories.len(), 1);
    assert_eq!(s["metadata"]["labels"][LABEL_SESSION], "abc123");
}

#[test]
fn the_pod_is_least_privileged_and_mounts_the_claim() {
    let c = config(&[
        ("K8S_MODEL_SECRET", "model-keys"),
        ("K8S_CPU", "2"),
        ("K8S_MEMORY", "4Gi"),
        ("SANDBOX_TIMEOUT_SECONDS", "3600"),
    ]);
    let p = pod(&c, &request(), "inspect-ws-older");
    let spec = &p["spec"];
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(spec["activeDeadlineSeconds"], 3600);
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let box_ = &spec["containers"][0];
    assert_eq!(
        box_["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    assert_eq!(box_["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(box_["command"], json!(["inspect-supervisor", "run"]));
    assert_eq!(box_["envFrom"][1]["secretRef"]["name"], "model-keys");
    assert_eq!(box_["resources"]["limits"]["memory"], "4Gi");
    // Requests = limits: Guaranteed, not the BestEffort a node evicts first.
    assert_eq!(box_["resources"]["requests"], box_["resources"]["limits"]);
    assert_eq!(
        spec["securityContext"]["fsGroupChangePolicy"],
        "OnRootMismatch"
    );
    assert_eq!(
        spec["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "inspect-ws-older"
    );
    assert!(
        !p.to_string().contains("secret-token"),
        "the token is in the Secret only"
    );
}

#[test]
fn ports_get_a_service_an_ingress_and_computed_urls() {
    let plain = config(&[]);
    assert!(exposure(&plain, &request()).is_none());
    assert!(tunnel_urls(&plain, &request()).is_empty());
    let c = config(&[
        ("K8S_INGRESS_DOMAIN", "sb.example.com"),
        ("K8S_INGRESS_CLASS", "nginx"),
    ]);
    let (svc, ing) = exposure(&c, &request()).unwrap();
    assert_eq!(svc["spec"]["selector"][LABEL_SANDBOX], "sb-f00d");
    assert_eq!(
        ing["spec"]["rules"][0]["host"],
        "3000-inspect-sb-f00d.sb.example.com"
    );
    assert_eq!(ing["spec"]["ingressClassName"], "nginx");
    // The URLs are https: the Ingress serves its hosts with TLS.
    assert_eq!(
        ing["spec"]["tls"][0]["hosts"][0],
        "3000-inspect-sb-f00d.sb.example.com"
    );
    assert_eq!(
        tunnel_urls(&c, &request())["3000"],
        "https://3000-inspect-sb-f00d.sb.example.com"
    );
    let claim = claim(&config(&[("K8S_STORAGE_CLASS", "fast")]), &request());
    assert_eq!(claim["spec"]["storageClassName"], "fast");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "10Gi");
}

#[test]
fn pod_states_read_phase_and_waiting_reasons() {
    assert_eq!(pod_state(&json!({})), PodState::Starting { progress: None });
    // Not scheduled: in Kubernetes' words (the session says them while it waits).
    let unschedulable = json!({"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient memory."}
    ]}});
    assert_eq!(
        pod_state(&unschedulable),
        PodState::Starting {
            progress: Some("Unschedulable: 0/3 nodes are available: 3 Insufficient memory.".into())
        }
    );
    assert_eq!(pod_state(&unschedulable).status(), "running");
    let creating = json!({"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"}
    ], "containerStatuses": [{"state": {"waiting": {"reason": "ContainerCreating"}}}]}});
    assert_eq!(
        pod_state(&creating),
        PodState::Starting {
            progress: Some("ContainerCreating".into())
        }
    );
    // Killed for its memory: the Pod fails with no reason of its own.
    let oom = json!({"status": {"phase": "Failed", "containerStatuses": [
        {"state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}
    ]}});
    assert!(
        matches!(pod_state(&oom), PodState::Ended { reason } if reason.starts_with("OOMKilled: ") && reason.contains("K8S_MEMORY"))
    );
    assert_eq!(
        pod_state(&json!({"status": {"phase": "Running"}})),
        PodState::Running
    );
    let waiting = |reason: &str, message: &str| {
        pod_state(
            &json!({"status": {"phase": "Pending", "containerStatuses": [
                {"state": {"waiting": {"reason": reason, "message": message}}}
            ]}}),
        )
    };
    // A missing image, in containerd's words and in the back-off's (1.32+), which carries
    // the last pull's error: it will not heal.
    let missing = "rpc error: code = NotFound desc = failed to pull and unpack image \"r.example/x:0\": failed to resolve reference \"r.example/x:0\": r.example/x:0: not found";
    assert_eq!(
        waiting("ErrImagePull", missing),
        PodState::Stuck {
            reason: format!("ErrImagePull: {missing}")
        }
    );
    assert!(matches!(
        waiting(
            "ImagePullBackOff",
            &format!("Back-off pulling image \"r.example/x:0\": ErrImagePull: {missing}")
        ),
        PodState::Stuck { .. }
    ));
    assert!(matches!(
        waiting(
            "ErrImagePull",
            "pull access denied, repository does not exist or may require authorization"
        ),
        PodState::Stuck { .. }
    ));
    // A registry briefly out: the kubelet tries again, and the session waits, saying so.
    let unavailable = "rpc error: code = Unavailable desc = failed to pull and unpack image \"r.example/x:0\": dial tcp 10.0.0.9:443: i/o timeout";
    assert_eq!(
        waiting("ErrImagePull", unavailable),
        PodState::Starting {
            progress: Some(format!(
                "ErrImagePull: {unavailable} (the kubelet tries again)"
            ))
        }
    );
    assert!(matches!(
        waiting(
            "ImagePullBackOff",
            "Back-off pulling image \"r.example/x:0\""
        ),
        PodState::Starting { .. }
    ));
    assert!(matches!(
        waiting("InvalidImageName", "couldn't parse image name"),
        PodState::Stuck { .. }
    ));
    // The workspace claim not provisioned: said as the claim's, not only the scheduler's.
    let unbound = json!({"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."}
    ]}});
    assert!(matches!(
        pod_state(&unbound),
        PodState::Starting { progress: Some(p) } if p.contains("the workspace claim is Pending") && p.contains("K8S_STORAGE_CLASS")
    ));
    let late_binding = json!({"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 node(s) did not find available persistent volumes to bind."}
    ]}});
    assert!(matches!(
        pod_state(&late_binding),
        PodState::Starting { progress: Some(p) } if p.contains("the workspace claim is Pending")
    ));
    assert!(matches!(
        pod_state(&unschedulable),
        PodState::Starting { progress: Some(p) } if !p.contains("claim")
    ));
    let deadline = json!({"status": {"phase": "Failed", "reason": "DeadlineExceeded"}});
    assert_eq!(
        pod_state(&deadline),
        PodState::Ended {
            reason: "DeadlineExceeded".into()
        }
    );
    assert_eq!(pod_state(&deadline).status(), "exited");
}

#[test]
fn status_errors_classify() {
    let status = |code: u16, reason: &str, message: &str| {
        json!({"kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": message}).to_string()
    };
    assert_eq!(
        classify(404, &status(404, "NotFound", "pods \"x\" not found")),
        Failure::NotFound
    );
    assert_eq!(
        classify(409, &status(409, "AlreadyExists", "exists")),
        Failure::AlreadyExists
    );
    // Quota admission answers a burst of creates with `Conflict`: nothing was made.
    assert!(matches!(
        classify(
            409,
            &status(
                409,
                "Conflict",
                "Operation cannot be fulfilled on resourcequotas \"sandboxes\": the object has been modified; please apply your changes to the latest version and try again"
            )
        ),
        Failure::Transient(m) if m.contains("Conflict")
    ));
    assert!(
        matches!(classify(422, &status(422, "Invalid", "bad name")), Failure::Permanent(m) if m.contains("bad name"))
    );
    assert!(matches!(
        classify(429, &status(429, "TooManyRequests", "")),
        Failure::Transient(_)
    ));
    assert!(matches!(classify(503, "garbage"), Failure::Transient(m) if m.contains("garbage")));
    assert!(matches!(
        classify(
            403,
            &status(
                403,
                "Forbidden",
                "pods \"x\" is forbidden: exceeded quota: sandboxes"
            )
        ),
        Failure::Quota(_)
    ));
    assert!(matches!(
        classify(403, &status(403, "Forbidden", "no rbac")),
        Failure::Permanent(_)
    ));
    assert!(matches!(
        classify(504, &status(504, "Timeout", "")),
        Failure::Transient(_)
    ));
}

#[test]
fn the_newest_claim_is_the_one_to_resume() {
    let list = json!({"items": [
        {"metadata": {"name": "a", "creationTimestamp": "2026-11-30T10:00:00Z"}},
        {"metadata": {"name": "b", "creationTimestamp": "2026-11-30T11:00:00Z"}},
        {"metadata": {"name": "c", "creationTimestamp": "2026-11-30T12:00:00Z", "deletionTimestamp": "2026-11-30T12:01:00Z"}},
    ]});
    assert_eq!(newest_name(&list).as_deref(), Some("b"));
    assert_eq!(item_names(&list), vec!["a", "b", "c"]);
    assert_eq!(newest_name(&json!({"items": []})), None);
}

#[test]
fn a_full_claim_quota_gives_back_the_oldest_stopped_workspace() {
    let claim = |name: &str, session: &str, at: &str| {
        json!({"metadata": {"name": name, "creationTimestamp": at,
            "labels": {LABEL_SESSION: session, LABEL_MANAGED_BY: MANAGER}}})
    };
    let claims = json!({"items": [
        claim("inspect-ws-a", "sess-a", "2026-12-01T00:00:00Z"),
        claim("inspect-ws-b", "sess-b", "2026-11-01T00:00:00Z"),
        claim("inspect-ws-c", "sess-c", "2026-10-01T00:00:00Z"),
        claim("inspect-ws-d", "sess-new", "2026-09-01T00:00:00Z"),
    ]});
    // c is mounted by a running Pod; d is the asking session's own.
    let pods = json!({"items": [{"spec": {"volumes": [
        {"name": "workspace", "persistentVolumeClaim": {"claimName": "inspect-ws-c"}}]}}]});
    assert_eq!(
        claim_to_evict(&claims, &pods, "sess_new").as_deref(),
        Some("inspect-ws-b")
    );
    let busy = json!({"items": [claim("inspect-ws-c", "sess-c", "2026-10-01T00:00:00Z")]});
    assert_eq!(claim_to_evict(&busy, &pods, "sess_new"), None);
    assert!(managed(&config(&[]), Resource::Claims).ends_with(
        "persistentvolumeclaims?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dopen-inspect"
    ));
}

#[test]
fn an_off_policy_goes_through_the_clusters_proxy_or_is_refused() {
    let mut req = request();
    req.egress = Some(
        serde_json::from_value(json!({"mode": "off", "allow": [{"host": "api.example.org"}]}))
            .unwrap(),
    );
    // No proxy configured: refused, never run open.
    let plain = config(&[]);
    assert!(plain
        .check_egress(&req)
        .unwrap_err()
        .contains("K8S_EGRESS_PROXY"));
    assert!(plain.check_egress(&request()).is_ok());
    let c = config(&[
        ("K8S_EGRESS_PROXY", "10.96.0.50:3128"),
        ("K8S_EGRESS_KEY", "egress-key"),
    ]);
    c.check_egress(&req).unwrap();
    let p = pod(&c, &req, "claim");
    assert_eq!(p["metadata"]["labels"][LABEL_EGRESS], "off");
    let env = p["spec"]["containers"][0]["env"].as_array().unwrap();
    let var = |n: &str| {
        env.iter()
            .find(|e| e["name"] == n)
            .and_then(|e| e["value"].as_str())
            .unwrap()
            .to_owned()
    };
    let proxy = var("HTTPS_PROXY");
    assert_eq!(proxy, var("http_proxy"));
    let rest = proxy
        .strip_prefix(&format!("http://{}:", req.sandbox_id))
        .unwrap();
    let (token, host) = rest.rsplit_once('@').unwrap();
    assert_eq!(host, "10.96.0.50:3128");
    let payload = inspect_ports::open_grant(b"egress-key", &req.sandbox_id, token).unwrap();
    let grant: inspect_protocol::egress::EgressGrant = serde_json::from_str(&payload).unwrap();
    assert_eq!(grant.policy, req.egress.clone().unwrap());
    assert!(
        grant.reach.iter().any(|(h, _)| h == "inspect.example.com"),
        "{grant:?}"
    );
    assert_eq!(var("NO_PROXY"), "localhost,127.0.0.1,::1");
    // An open sandbox's Pod is as before.
    let open = pod(&c, &request(), "claim");
    assert!(open["metadata"]["labels"].get(LABEL_EGRESS).is_none());
}
