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

fn config() -> E2bConfig {
    E2bConfig::from_settings(settings(&[
        ("E2B_API_KEY", "e2b_key"),
        ("E2B_TEMPLATE_ID", "open-inspect"),
    ]))
    .unwrap()
}

fn request() -> SpawnRequest {
    serde_json::from_value(json!({
        "sessionId": "s1", "sandboxId": "sb1", "sandboxToken": "tok-secret",
        "controlPlaneUrl": "https://cp.example.com", "repositories": [], "workBranch": "inspect/s1",
        "env": {"OPENAI_API_KEY": "sk-secret", "INSPECT_SANDBOX_ID": "forged"},
    }))
    .unwrap()
}

#[test]
fn settings_are_checked_and_defaulted() {
    let e = E2bConfig::from_settings(settings(&[])).unwrap_err();
    assert_eq!(e, "missing E2B_API_KEY, E2B_TEMPLATE_ID");
    let c = config();
    assert_eq!(c.api_url, DEFAULT_API_URL);
    assert_eq!(c.timeout_seconds, DEFAULT_TIMEOUT_SECONDS);
    assert_eq!(
        c.process_start_url("abc"),
        "https://49983-abc.e2b.app/process.Process/Start"
    );
    assert_eq!(c.port_url("abc", 3000), "https://3000-abc.e2b.app");
    let e = E2bConfig::from_settings(settings(&[
        ("E2B_API_KEY", "k"),
        ("E2B_TEMPLATE_ID", "t"),
        ("E2B_SANDBOX_TIMEOUT_SECONDS", "5"),
    ]))
    .unwrap_err();
    assert!(e.contains("between 300 and 86400"), "{e}");
    let e = E2bConfig::from_settings(settings(&[
        ("E2B_API_KEY", "k"),
        ("E2B_TEMPLATE_ID", "t"),
        ("E2B_SANDBOX_URL", "envd.internal"),
    ]))
    .unwrap_err();
    assert!(e.contains("E2B_SANDBOX_URL is not an http(s) URL"), "{e}");
}

#[test]
fn the_create_body_keeps_secrets_in_the_environment_only() {
    let body = create_body(&config(), &request());
    assert_eq!(body["templateID"], "open-inspect");
    assert_eq!(body["secure"], true);
    assert_eq!(body["autoPause"], true);
    assert_eq!(body["autoResume"]["enabled"], false);
    assert_eq!(body["envVars"]["OPENAI_API_KEY"], "sk-secret");
    assert_eq!(
        body["envVars"]["INSPECT_SANDBOX_ID"], "sb1",
        "never a secret's"
    );
    assert_eq!(body["envVars"]["INSPECT_SANDBOX_TOKEN"], "tok-secret");
    assert_eq!(body["metadata"][META_SANDBOX], "sb1");
    let outside = json!({"m": body["metadata"], "t": body["templateID"]}).to_string();
    assert!(!outside.contains("secret"));
    // The start command holds no secret: E2B logs command lines.
    let start = String::from_utf8_lossy(&start_supervisor_body()).into_owned();
    assert!(start.contains("inspect-supervisor run") && !start.contains("secret"));
}

#[test]
fn listing_by_metadata_is_encoded() {
    assert_eq!(
        config().listed(META_SESSION, "s 1"),
        "https://api.e2b.app/v2/sandboxes?metadata=openinspect_session_id%3Ds%25201&state=running,paused"
    );
}

#[test]
fn a_process_stream_is_read_to_its_end() {
    let ok = [
        envelope(0, br#"{"event":{"start":{"pid":7}}}"#),
        envelope(
            0,
            br#"{"event":{"end":{"exitCode":0,"exited":true,"status":"exit status 0"}}}"#,
        ),
        envelope(2, b"{}"),
    ]
    .concat();
    assert_eq!(read_process_stream(&ok), Ok(()));
    let failed = [
        envelope(0, br#"{"event":{"start":{"pid":7}}}"#),
        envelope(
            0,
            br#"{"event":{"end":{"exitCode":127,"status":"exit status 127"}}}"#,
        ),
        envelope(2, b"{}"),
    ]
    .concat();
    assert!(read_process_stream(&failed)
        .unwrap_err()
        .contains("exit status 127"));
    // What the command printed comes with its failure (the supervisor check's log tail).
    let said = [
        envelope(0, br#"{"event":{"start":{"pid":7}}}"#),
        envelope(0, br#"{"event":{"data":{"stdout":"bm90IHJ1bm5pbmc="}}}"#),
        envelope(
            0,
            br#"{"event":{"end":{"exitCode":1,"status":"exit status 1"}}}"#,
        ),
        envelope(2, b"{}"),
    ]
    .concat();
    assert_eq!(
        read_process_stream(&said).unwrap_err(),
        "envd: the command ended with exit status 1: not running"
    );
    let refused = envelope(
        2,
        br#"{"error":{"code":"unauthenticated","message":"invalid access token"}}"#,
    );
    assert_eq!(
        read_process_stream(&refused).unwrap_err(),
        "envd: unauthenticated invalid access token"
    );
    let cut = &ok[..ok.len() - 3];
    assert!(read_process_stream(cut).unwrap_err().contains("cut short"));
    assert!(read_process_stream(b"<html>").is_err());
    let body = start_process_body("echo hi");
    let parsed = envelopes(&body).unwrap();
    assert_eq!(parsed[0].1["process"]["args"][1], "echo hi");
}

#[test]
fn errors_are_classified_and_secrets_kept_out() {
    assert_eq!(classify(404, "", &[]), Some(Failure::NotFound));
    assert_eq!(classify(409, "", &[]), None);
    assert!(matches!(
        classify(429, r#"{"code":429,"message":"concurrency limit"}"#, &[]),
        Some(Failure::Quota(m)) if m.contains("concurrency limit")
    ));
    assert!(matches!(
        classify(502, "", &[]),
        Some(Failure::Transient(_))
    ));
    let Some(Failure::Permanent(m)) = classify(
        400,
        r#"{"code":400,"message":"bad env OPENAI_API_KEY=sk-secret"}"#,
        &["sk-secret"],
    ) else {
        panic!()
    };
    assert!(!m.contains("sk-secret") && m.contains("[redacted]"), "{m}");
    assert_eq!(
        status_of(&json!({"state": "paused"})),
        ("stopped", Some("paused".into()))
    );
}

#[test]
fn a_lifetime_stays_within_the_plan_e2b_names() {
    let cfg = config();
    assert_eq!(cfg.timeout_seconds, DEFAULT_TIMEOUT_SECONDS);
    // E2B's words for a Hobby team (sandbox_create.go / sandbox_connect.go).
    let said = "e2b answered 400: Timeout cannot be greater than 1 hours";
    assert_eq!(plan_limit(said), Some(3600));
    assert_eq!(
        plan_limit("Timeout cannot be greater than 24 hours"),
        Some(86_400)
    );
    assert_eq!(plan_limit("invalid timeout for this plan"), None);
    assert_eq!(plan_limit("Timeout cannot be greater than 0 hours"), None);
    let within = cfg.within_plan(plan_limit(said));
    assert_eq!(within.timeout_seconds, 3600);
    assert_eq!(extend_body(&within), json!({"timeout": 3600}));
    assert_eq!(connect_body(&within), json!({"timeout": 3600}));
    // A plan longer than the setting leaves the setting.
    assert_eq!(cfg.within_plan(Some(86_400)).timeout_seconds, 7200);
}

#[test]
fn a_confining_policy_becomes_e2bs_firewall() {
    assert!(create_body(&config(), &request()).get("network").is_none());
    let mut req = request();
    req.default_model = Some("anthropic/claude-sonnet-4-5".into());
    req.egress = Some(
        serde_json::from_value(json!({"mode": "off", "allow": [{"host": "*.example.org"}]}))
            .unwrap(),
    );
    let body = create_body(&config(), &req);
    assert_eq!(body["network"]["denyOut"], json!(["0.0.0.0/0"]));
    assert_eq!(
        body["network"]["allowOut"],
        json!(["cp.example.com", "api.anthropic.com", "*.example.org"])
    );
    assert!(body["envVars"][inspect_protocol::egress::ENFORCED_BY_VAR]
        .as_str()
        .unwrap()
        .contains("E2B"));
}
