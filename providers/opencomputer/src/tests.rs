#![allow(clippy::unwrap_used)]

use super::*;
use std::collections::BTreeMap;

fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let pairs: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |n: &str| pairs.get(n).cloned()
}

fn request() -> SpawnRequest {
    serde_json::from_value(json!({
        "sessionId": "s1", "sandboxId": "sb1", "sandboxToken": "tok",
        "controlPlaneUrl": "https://cp.example.com", "repositories": [], "workBranch": "inspect/s1",
        "env": {"HOME": "/forged"},
    }))
    .unwrap()
}

#[test]
fn settings_are_checked() {
    let e = OpenComputerConfig::from_settings(settings(&[])).unwrap_err();
    assert_eq!(e, "missing OPENCOMPUTER_API_KEY, OPENCOMPUTER_TEMPLATE");
    let e = OpenComputerConfig::from_settings(settings(&[
        ("OPENCOMPUTER_API_KEY", "k"),
        ("OPENCOMPUTER_TEMPLATE", "t"),
        ("OPENCOMPUTER_IDLE_TIMEOUT_SECONDS", "ten"),
    ]))
    .unwrap_err();
    assert!(e.contains("between 60 and 86400"), "{e}");
}

#[test]
fn bodies_carry_the_supervisor_environment() {
    let cfg = OpenComputerConfig::from_settings(settings(&[
        ("OPENCOMPUTER_API_KEY", "k"),
        ("OPENCOMPUTER_TEMPLATE", "oi-sandbox"),
    ]))
    .unwrap();
    let create = create_body(&cfg, &request());
    assert_eq!(create["snapshot"], "oi-sandbox");
    assert_eq!(create["envs"]["HOME"], "/sandbox/home", "never a secret's");
    assert_eq!(create["metadata"][META_SANDBOX], "sb1");
    // Tags as OpenComputer takes them: a flat map of strings, keys of its charset.
    let tags = tags(&request());
    assert_eq!(tags[META_SANDBOX], "sb1");
    for (k, v) in tags.as_object().unwrap() {
        assert!(v.is_string(), "{k}");
        assert!(k.len() <= 128 && !k.starts_with("oc:"), "{k}");
        assert!(
            k.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-:".contains(c)),
            "{k}"
        );
    }
    let fork = fork_body(&cfg, &request());
    assert_eq!(fork["envs"]["INSPECT_SANDBOX_ID"], "sb1");
    assert_eq!(checkpoint_body("c")["kind"], "disk_only");
    assert!(start_body()["args"][1]
        .as_str()
        .unwrap()
        .contains("inspect-supervisor run"));
}

#[test]
fn answers_are_read() {
    let with_tunnels = json!({"id": "oc1", "tunnelUrls": {"3000": "https://t.example"}});
    assert_eq!(
        port_url(&with_tunnels, 3000).as_deref(),
        Some("https://t.example")
    );
    let with_domain = json!({"sandboxID": "oc1", "sandboxDomain": "oc.example"});
    assert_eq!(
        port_url(&with_domain, 3000).as_deref(),
        Some("https://oc1-p3000.oc.example")
    );
    let bare = json!({"id": "oc1", "routes": [{"port": 8080, "url": "https://r"}]});
    assert_eq!(port_url(&bare, 8080).as_deref(), Some("https://r"));
    assert_eq!(port_url(&bare, 3000), None);
    assert_eq!(
        preview_url(&json!({"hostname": "p.example"})).as_deref(),
        Some("https://p.example")
    );
    assert!(is_running(&json!({"status": "running"})));
    assert_eq!(
        status_of(&json!({"state": "hibernated"})),
        ("stopped", Some("hibernated".into()))
    );
    // A deleted sandbox's record stays, as `stopped`: it is not coming back.
    assert_eq!(status_of(&json!({"status": "stopped"})).0, "exited");
    let list = json!([{"id": "a", "metadata": {"openinspect_session_id": "s1"}}, {"id": "b"}]);
    assert_eq!(matching(&list, META_SESSION, "s1").len(), 1);
    // The hosted list carries tags, not metadata.
    let hosted = json!([{"sandboxID": "c", "tags": {"openinspect_session_id": "s1"}}]);
    assert_eq!(matching(&hosted, META_SESSION, "s1").len(), 1);
}

#[test]
fn errors_are_classified() {
    assert_eq!(classify(404, ""), Failure::NotFound);
    assert!(matches!(classify(429, ""), Failure::Quota(_)));
    assert!(matches!(
        classify(403, r#"{"error":"sandbox quota reached"}"#),
        Failure::Quota(m) if m.contains("sandbox quota reached")
    ));
    assert!(matches!(classify(504, ""), Failure::Transient(_)));
    assert!(matches!(classify(422, "{}"), Failure::Permanent(_)));
}
