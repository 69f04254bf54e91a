#![allow(clippy::unwrap_used)]

use super::*;

fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let pairs: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |n: &str| pairs.get(n).cloned()
}

fn config() -> VercelConfig {
    VercelConfig::from_settings(settings(&[
        ("VERCEL_TOKEN", "vt"),
        ("VERCEL_PROJECT_ID", "prj_1"),
        ("VERCEL_TEAM_ID", "team_1"),
        ("VERCEL_BASE_SNAPSHOT_ID", "snap_base"),
    ]))
    .unwrap()
}

fn request(restore: Option<&str>) -> SpawnRequest {
    serde_json::from_value(json!({
        "sessionId": "s1", "sandboxId": "sb1", "sandboxToken": "tok",
        "controlPlaneUrl": "https://cp.example.com", "repositories": [], "workBranch": "inspect/s1",
        "tunnelPorts": [3000], "restoreFrom": restore,
    }))
    .unwrap()
}

#[test]
fn settings_are_checked() {
    let e = VercelConfig::from_settings(settings(&[])).unwrap_err();
    assert_eq!(
        e,
        "missing VERCEL_TOKEN, VERCEL_PROJECT_ID, VERCEL_BASE_SNAPSHOT_ID"
    );
    let e = VercelConfig::from_settings(settings(&[
        ("VERCEL_TOKEN", "vt"),
        ("VERCEL_PROJECT_ID", "p"),
        ("VERCEL_BASE_SNAPSHOT_ID", "s"),
        ("VERCEL_VCPUS", "3"),
    ]))
    .unwrap_err();
    assert!(e.contains("1, 2, 4 or 8"), "{e}");
    let c = config();
    assert_eq!(
        c.url(&c.sandbox_path("sb1")),
        "https://vercel.com/api/v2/sandboxes/sb1?projectId=prj_1&teamId=team_1"
    );
}

#[test]
fn bodies_name_the_source_and_the_lifetime() {
    let c = config();
    let fresh = create_body(&c, &request(None));
    assert_eq!(fresh["source"]["snapshotId"], "snap_base");
    assert_eq!(fresh["timeout"], 45 * 60 * 1000);
    assert_eq!(fresh["ports"], json!([3000]));
    assert_eq!(fresh["env"]["INSPECT_SANDBOX_ROOT"], "/sandbox");
    let restored = create_body(&c, &request(Some("snap_s1")));
    assert_eq!(restored["source"]["snapshotId"], "snap_s1");
    let start = start_command_body();
    assert_eq!(start["command"], "sudo");
    assert!(start["args"][3]
        .as_str()
        .unwrap()
        .contains("inspect-supervisor run"));
}

#[test]
fn answers_are_read() {
    let answer = json!({
        "sandbox": {"name": "sb1", "currentSessionId": "sess_1", "status": "running"},
        "session": {"id": "sess_1", "status": "running"},
        "routes": [{"port": 3000, "subdomain": "sb-3000"}, {"port": 8080, "url": "x.vercel.run"}],
    });
    let urls = port_urls(&answer);
    assert_eq!(urls["3000"], "https://sb-3000.vercel.run");
    assert_eq!(urls["8080"], "https://x.vercel.run");
    assert_eq!(session_id_of(&answer).as_deref(), Some("sess_1"));
    assert_eq!(status_of(&answer), ("running", None));
    let list = json!({"sandboxes": [{"name": "a", "tags": {"openinspect_session_id": "s1"}}, {"name": "b", "tags": {}}]});
    assert_eq!(sandboxes_of_session(&list, "s1").len(), 1);
    let snaps =
        json!({"snapshots": [{"id": "x", "status": "created"}, {"id": "y", "status": "deleted"}]});
    assert_eq!(snapshot_ids(&snaps), vec!["x".to_owned()]);
}

#[test]
fn errors_are_classified() {
    assert_eq!(classify(404, ""), Failure::NotFound);
    assert!(matches!(
        classify(429, r#"{"error":{"code":"too_many_sandboxes","message":"limit of 10 reached"}}"#),
        Failure::Quota(m) if m.contains("too_many_sandboxes: limit of 10 reached")
    ));
    assert!(matches!(classify(503, ""), Failure::Transient(_)));
    assert!(matches!(classify(400, "{}"), Failure::Permanent(_)));
}

#[test]
fn the_list_is_asked_as_vercel_documents_it() {
    let c = config();
    // `project` (not the get's `projectId`), 50 a page at most, one tag filter.
    assert_eq!(
        c.url(&c.list_path((TAG_SESSION, "s 1"), None)),
        "https://vercel.com/api/v2/sandboxes?project=prj_1&limit=50&tags=openinspect_session_id%3As%201&teamId=team_1"
    );
    assert!(c
        .list_path((TAG_FRAMEWORK, "open-inspect"), Some("50"))
        .ends_with("&cursor=50"));
    assert_eq!(
        next_cursor(&json!({"pagination": {"next": "abc"}})),
        Some("abc".into())
    );
    assert_eq!(
        next_cursor(&json!({"pagination": {"next": 100}})),
        Some("100".into())
    );
    assert_eq!(next_cursor(&json!({"pagination": {"next": null}})), None);
    assert_eq!(next_cursor(&json!({"sandboxes": []})), None);
}

#[test]
fn an_extension_moves_the_end_further_than_the_next_one_is_due() {
    let by = extend_body()["duration"].as_u64().unwrap();
    assert!(by as i64 > inspect_provider::EXTEND_EVERY_MS, "{by}");
}

#[test]
fn a_confining_policy_becomes_vercels_network_policy() {
    let c = config();
    assert!(create_body(&c, &request(None))
        .get("networkPolicy")
        .is_none());
    let mut req = request(None);
    req.egress = Some(
        serde_json::from_value(json!({"mode": "off", "allow": [{"host": "api.example.org"}]}))
            .unwrap(),
    );
    let body = create_body(&c, &req);
    assert_eq!(
        body["networkPolicy"],
        json!({"mode": "custom", "allowedDomains": ["cp.example.com", "api.example.org"], "allowedCIDRs": []})
    );
    assert!(body["env"][inspect_protocol::egress::ENFORCED_BY_VAR].is_string());
}
