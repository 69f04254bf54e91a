use super::*;
use inspect_protocol::provider::{BootMode, WorkspaceRepository};

fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |n: &str| pairs.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone())
}

fn config() -> DaytonaConfig {
    DaytonaConfig::from_settings(settings(&[
        ("DAYTONA_API_KEY", "k"),
        ("DAYTONA_SNAPSHOT", "inspect-sandbox-0.1.0"),
    ]))
    .unwrap()
}

#[test]
fn settings_name_what_is_missing() {
    assert_eq!(
        DaytonaConfig::from_settings(settings(&[])).unwrap_err(),
        "missing DAYTONA_API_KEY, DAYTONA_SNAPSHOT"
    );
    let c = config();
    assert_eq!(c.api_url, DEFAULT_API_URL);
    assert_eq!(
        c.labelled(LABEL_SANDBOX, "sb_1"),
        "https://app.daytona.io/api/sandbox?labels=%7B%22openinspect_expected_sandbox_id%22%3A%22sb_1%22%7D"
    );
}

#[test]
fn the_create_body_carries_the_identity_and_labels() {
    let req = SpawnRequest {
        setup_secrets: Vec::new(),
        session_id: "s1".into(),
        sandbox_id: "sb_1".into(),
        sandbox_token: "tok".into(),
        control_plane_url: "https://inspect.example.com".into(),
        repositories: vec![WorkspaceRepository {
            owner: "acme".into(),
            name: "web".into(),
            source: "https://github.com/acme/web.git".into(),
            base_branch: None,
        }],
        work_branch: "open-inspect/s1".into(),
        boot_mode: BootMode::Fresh,
        env: [
            ("NPM_TOKEN".to_owned(), "npm".to_owned()),
            ("HOME".to_owned(), "/root".to_owned()),
        ]
        .into(),
        tunnel_ports: vec![],
        default_model: None,
        models: Vec::new(),
        skills: Vec::new(),
        mcp_servers: Vec::new(),
        agent: Default::default(),
        managed_grants: Vec::new(),
        restore_from: None,
        egress: None,
    };
    let b = create_body(&config(), &req);
    assert_eq!(b["name"], "sb_1");
    assert_eq!(b["snapshot"], "inspect-sandbox-0.1.0");
    assert_eq!(b["env"]["NPM_TOKEN"], "npm");
    assert_eq!(
        b["env"]["HOME"], "/sandbox/home",
        "the system's, not the secret's"
    );
    assert_eq!(b["env"]["INSPECT_SANDBOX_TOKEN"], "tok");
    assert_eq!(b["labels"][LABEL_SESSION], "s1");
    assert_eq!(b["public"], false);
}

#[test]
fn states_and_revivals() {
    assert_eq!(status_of(&json!({"state": "started"})).0, "running");
    assert_eq!(status_of(&json!({"state": "archived"})).0, "stopped");
    // Passing states are not a lost sandbox.
    for passing in ["resizing", "snapshotting", "unknown", "pulling_snapshot"] {
        assert_eq!(
            status_of(&json!({ "state": passing })).0,
            "running",
            "{passing}"
        );
    }
    assert_eq!(status_of(&json!({"state": "destroyed"})).0, "exited");
    assert_eq!(
        status_of(&json!({"state": "error", "errorReason": "disk full"})),
        ("exited", Some("error: disk full".into()))
    );
    assert_eq!(revival(&json!({"state": "stopped"})), Revival::Start);
    assert_eq!(revival(&json!({"state": "archived"})), Revival::Start);
    assert_eq!(revival(&json!({"state": "started"})), Revival::Nothing);
    assert_eq!(
        revival(&json!({"state": "error", "recoverable": true})),
        Revival::Recover
    );
    assert_eq!(revival(&json!({"state": "error"})), Revival::Gone);
    assert_eq!(
        listed_ids(&json!([{"id": "a"}, {"id": "b"}])),
        vec!["a", "b"]
    );
    assert_eq!(listed_ids(&json!({"items": [{"id": "a"}]})), vec!["a"]);
    assert!(first_listed(&json!([])).is_none());
}

#[test]
fn errors_classify() {
    assert_eq!(classify(404, "{}"), Failure::NotFound);
    assert!(matches!(classify(503, ""), Failure::Transient(_)));
    assert!(matches!(classify(429, ""), Failure::Quota(_)));
    assert!(matches!(
        classify(400, r#"{"statusCode":400,"message":["snapshot not found"],"error":"Bad Request"}"#),
        Failure::Permanent(m) if m.contains("snapshot not found")
    ));
    assert!(matches!(
        classify(403, r#"{"statusCode":403,"message":"Total CPU quota exceeded"}"#),
        Failure::Quota(m) if m.contains("quota")
    ));
    // The organization's usage quotas as Daytona's API words them, as 400s and 403s: wait.
    for status in [400, 403] {
        let body = format!(
            r#"{{"statusCode":{status},"message":"Total CPU limit exceeded. Maximum allowed: 10.\nTo increase concurrency limits, upgrade your organization's Tier","error":"Bad Request"}}"#
        );
        assert!(
            matches!(classify(status, &body), Failure::Quota(_)),
            "{status}"
        );
    }
    assert!(matches!(
        classify(
            400,
            r#"{"statusCode":400,"message":"Total disk limit exceeded. Maximum allowed: 30GiB."}"#
        ),
        Failure::Quota(_)
    ));
    // One sandbox asking more than a sandbox may have: waiting will not help.
    assert!(matches!(
        classify(
            403,
            r#"{"statusCode":403,"message":"CPU request 8 exceeds maximum allowed per sandbox (4)."}"#
        ),
        Failure::Permanent(_)
    ));
}
