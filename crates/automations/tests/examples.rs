//! Sentry's published webhook examples (`tests/examples/sentry/`, source and licence in
//! its README) through the automation's reader: each is read as Sentry means it, and still
//! read when every field the reader takes as optional comes as `null`.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_automations::sentry::incident;
use inspect_protocol::automations::SentryResource;
use serde_json::Value;

fn example(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/examples/sentry")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `body` with the value at each of `paths` (JSON pointers) replaced by `null`.
fn nulled(mut body: Value, paths: &[&str]) -> Value {
    for p in paths {
        if let Some(v) = body.pointer_mut(p) {
            *v = Value::Null;
        }
    }
    body
}

#[test]
fn an_issue_created_as_sentry_publishes_it() {
    let body = example("issue-created.json");
    let i = incident(SentryResource::Issue, "issue", &body).unwrap();
    assert_eq!(i.key, "issue:1170820242");
    assert_eq!(i.facts["action"], "created");
    assert_eq!(i.facts["project"], "front-end");
    assert_eq!(i.facts["level"], "error");
    assert_eq!(i.facts["title"], "ReferenceError: blooopy is not defined");
    assert_eq!(i.facts["culprit"], "?(runner)");
    assert_eq!(i.facts["shortId"], "FRONT-END-9");
    // The example has no web_url and a null permalink: no link, no failure.
    assert!(i.facts["url"].is_null());
    // Another resource's header, or another action, starts nothing.
    assert!(incident(SentryResource::EventAlert, "issue", &body).is_none());
    let mut resolved = body.clone();
    resolved["action"] = "resolved".into();
    assert!(incident(SentryResource::Issue, "issue", &resolved).is_none());
    // Every optional field null: still the same issue.
    let body = nulled(
        body,
        &[
            "/data/issue/project",
            "/data/issue/level",
            "/data/issue/title",
            "/data/issue/culprit",
            "/data/issue/shortId",
            "/data/issue/permalink",
        ],
    );
    let i = incident(SentryResource::Issue, "issue", &body).unwrap();
    assert_eq!(i.key, "issue:1170820242");
    assert!(i.facts["project"].is_null() && i.facts["title"].is_null());
}

#[test]
fn an_event_alert_as_sentry_publishes_it() {
    let body = example("event-alert-triggered.json");
    let i = incident(SentryResource::EventAlert, "event_alert", &body).unwrap();
    assert_eq!(i.key, "event:e4874d664c3540c1a32eab185f12c5ab");
    assert_eq!(i.facts["action"], "triggered");
    // The event names its project by id (a number) and carries no project tag.
    assert_eq!(i.facts["project"], "1");
    assert_eq!(i.facts["level"], "error");
    assert_eq!(i.facts["title"], "ReferenceError: heck is not defined");
    assert_eq!(i.facts["rule"], "Very Important Alert Rule!");
    assert_eq!(
        i.facts["url"],
        "https://sentry.io/organizations/test-org/issues/1117540176/events/e4874d664c3540c1a32eab185f12c5ab/"
    );
    assert!(i.facts["environment"].is_null());
    // Innermost frame first; the frames name no function.
    assert_eq!(
        i.frames,
        [
            "? (<anonymous>:3)",
            "? (/js/prod/runner-4.1.7.min.js:1)",
            "? (/js/prod/runner-4.1.7.min.js:1)"
        ]
    );
    let body = nulled(
        body,
        &[
            "/data/event/project",
            "/data/event/level",
            "/data/event/title",
            "/data/event/culprit",
            "/data/event/tags",
            "/data/event/web_url",
            "/data/event/exception",
            "/data/triggered_rule",
        ],
    );
    let i = incident(SentryResource::EventAlert, "event_alert", &body).unwrap();
    assert_eq!(i.key, "event:e4874d664c3540c1a32eab185f12c5ab");
    assert!(i.frames.is_empty());
    assert_eq!(i.facts["url"], "https://sentry.io/api/0/issues/1117540176/");
}
