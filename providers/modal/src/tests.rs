use super::*;
use inspect_protocol::provider::{BootMode, WorkspaceRepository};

fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |n: &str| pairs.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone())
}

#[test]
fn settings_name_what_is_missing_and_build_the_urls() {
    assert_eq!(
        ModalConfig::from_settings(settings(&[])).unwrap_err(),
        "missing MODAL_WORKSPACE, MODAL_API_SECRET"
    );
    let c = ModalConfig::from_settings(settings(&[
        ("MODAL_WORKSPACE", "acme"),
        ("MODAL_ENVIRONMENT_WEB_SUFFIX", "dev"),
        ("MODAL_API_SECRET", "s"),
    ]))
    .unwrap();
    assert_eq!(
        c.endpoint(endpoints::CREATE),
        "https://acme-dev--open-inspect-api-create-sandbox.modal.run"
    );
    assert_eq!(c.timeout_seconds, DEFAULT_TIMEOUT_SECONDS);
    let e = ModalConfig::from_settings(settings(&[
        ("MODAL_API_URL", "http://127.0.0.1:9/x"),
        ("MODAL_API_SECRET", "s"),
    ]))
    .unwrap_err();
    assert!(e.contains("{endpoint}"), "{e}");
    let e = ModalConfig::from_settings(settings(&[
        ("MODAL_WORKSPACE", "acme"),
        ("MODAL_API_SECRET", "s"),
        ("SANDBOX_TIMEOUT_SECONDS", "999999"),
    ]))
    .unwrap_err();
    assert!(e.contains("SANDBOX_TIMEOUT_SECONDS"), "{e}");
}

#[test]
fn the_token_is_the_time_and_its_hmac() {
    // HMAC-SHA256("key", "1700000000000"), computed with Python's hmac module.
    let t = token("key", 1_700_000_000_000);
    assert_eq!(
        t,
        "1700000000000.bc219f90295265e57b56e30d1325850a6965bfe4e087c07f1bf5701ecc56bbf6"
    );
    assert_ne!(token("other", 1_700_000_000_000), t);
}

fn request(restore: Option<&str>) -> SpawnRequest {
    SpawnRequest {
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
        boot_mode: if restore.is_some() {
            BootMode::SnapshotRestore
        } else {
            BootMode::Fresh
        },
        env: [("NPM_TOKEN".to_owned(), "npm".to_owned())].into(),
        tunnel_ports: vec![3000],
        default_model: None,
        models: Vec::new(),
        skills: Vec::new(),
        mcp_servers: Vec::new(),
        agent: Default::default(),
        managed_grants: Vec::new(),
        restore_from: restore.map(str::to_owned),
        egress: None,
    }
}

#[test]
fn bodies_carry_the_token_and_secrets_in_their_own_fields() {
    let c = ModalConfig::from_settings(settings(&[
        ("MODAL_WORKSPACE", "acme"),
        ("MODAL_API_SECRET", "s"),
    ]))
    .unwrap();
    let fresh = create_body(&c, &request(None));
    assert_eq!(create_endpoint(&request(None)), endpoints::CREATE);
    assert_eq!(fresh["sandbox_auth_token"], "tok");
    assert_eq!(fresh["user_env_vars"]["NPM_TOKEN"], "npm");
    let spawn = fresh["spawn"].as_str().unwrap();
    assert!(
        !spawn.contains("tok\"") && !spawn.contains("npm"),
        "{spawn}"
    );
    assert!(fresh.get("snapshot_image_id").is_none());
    let restore = create_body(&c, &request(Some("im-1")));
    assert_eq!(create_endpoint(&request(Some("im-1"))), endpoints::RESTORE);
    assert_eq!(restore["snapshot_image_id"], "im-1");
}

#[test]
fn answers_read_the_envelope_and_classify() {
    assert_eq!(
        read_answer(200, r#"{"success":true,"data":{"image_id":"im-1"}}"#),
        Answer::Data(json!({"image_id": "im-1"}))
    );
    assert!(matches!(
        read_answer(200, r#"{"success":false,"error":"no such image"}"#),
        Answer::Permanent(m) if m.contains("no such image")
    ));
    assert!(matches!(read_answer(200, "<html>"), Answer::Transient(_)));
    assert!(matches!(read_answer(503, ""), Answer::Transient(_)));
    assert!(matches!(read_answer(429, ""), Answer::Transient(_)));
    assert!(matches!(
        read_answer(400, r#"{"detail":"control_plane_url host not allowed"}"#),
        Answer::Permanent(m) if m.contains("not allowed")
    ));
    assert!(matches!(read_answer(401, ""), Answer::Permanent(_)));
}

#[test]
fn a_build_body_asks_for_a_build_and_keeps_the_token_apart() {
    let req = inspect_protocol::images::BuildImageRequest {
        build_id: "bld_1".into(),
        repositories: request(None).repositories,
        env: [("NPM_TOKEN".to_owned(), "npm".to_owned())].into(),
        callback_url: "https://inspect.example.com/images/builds/bld_1/complete".into(),
        callback_token: "cb".into(),
        git_token: Some("ghs_x".into()),
        timeout_seconds: 600,
    };
    let b = build_body(&req);
    let spawn: SpawnRequest = serde_json::from_str(b["spawn"].as_str().unwrap()).unwrap();
    assert_eq!(spawn.boot_mode, BootMode::Build);
    assert!(spawn.env.is_empty());
    assert_eq!(b["user_env_vars"]["NPM_TOKEN"], "npm");
    assert_eq!(b["callback_token"], "cb");
    assert_eq!(b["git_token"], "ghs_x");
}
