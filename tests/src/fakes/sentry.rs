//! Sentry's side of an internal integration's webhooks, as Sentry's integration-platform
//! documentation describes them: the `issue` resource (`created`, `resolved`, …) and the
//! `event_alert` resource (`triggered`, with the whole event), each delivered as JSON with
//! `Sentry-Hook-Resource`, `Sentry-Hook-Timestamp`, `Request-ID` and `Sentry-Hook-Signature`
//! (the hex HMAC-SHA256 of the body with the client secret). Sentry sends the integration's
//! `installation` resource too; those start nothing.

use serde_json::{json, Value};

/// One delivery: the resource header and the body.
pub struct Delivery {
    pub resource: &'static str,
    pub body: Value,
}

/// A new issue (`issue`, action `created`), shaped as Sentry's documented example.
pub fn issue_created(id: &str, title: &str, project: &str, level: &str) -> Delivery {
    Delivery {
        resource: "issue",
        body: json!({
            "action": "created",
            "installation": {"uuid": "7a485448-a9e2-4c85-8a3c-4f44175783c9"},
            "data": {"issue": {
                "id": id, "shortId": format!("{}-{id}", project.to_uppercase()), "title": title,
                "culprit": "app/checkout.js in total", "level": level, "status": "unresolved",
                "platform": "javascript", "count": "1", "userCount": 1,
                "firstSeen": "2026-12-04T03:00:00.000000Z", "lastSeen": "2026-12-04T03:00:00.000000Z",
                "project": {"id": "2", "name": project, "slug": project, "platform": "javascript"},
                "metadata": {"type": "TypeError", "value": title},
                "web_url": format!("https://sentry.io/organizations/acme/issues/{id}/"),
                "permalink": null,
                "url": format!("https://sentry.io/api/0/organizations/acme/issues/{id}/")
            }},
            "actor": {"type": "application", "id": "sentry", "name": "Sentry"}
        }),
    }
}

/// An issue alert rule fired for an event (`event_alert`, action `triggered`), with the
/// event's tags as `[key, value]` pairs and its exception's frames outermost first.
pub fn event_alert(event_id: &str, title: &str, project: &str, environment: &str) -> Delivery {
    Delivery {
        resource: "event_alert",
        body: json!({
            "action": "triggered",
            "installation": {"uuid": "7a485448-a9e2-4c85-8a3c-4f44175783c9"},
            "data": {
                "triggered_rule": "Checkout errors",
                "event": {
                    "event_id": event_id, "issue_id": "1170820242", "title": title,
                    "culprit": "?(app/checkout.js)", "level": "error", "environment": environment,
                    "platform": "javascript", "project": 2, "type": "error",
                    "message": "", "datetime": "2026-12-04T03:00:00.000000Z",
                    "tags": [["environment", environment], ["level", "error"], ["project", project]],
                    "exception": {"values": [{"type": "ReferenceError", "value": title, "stacktrace": {"frames": [
                        {"function": "main", "filename": "app/main.js", "abs_path": "https://acme.example/app/main.js", "lineno": 12},
                        {"function": "total", "filename": "app/checkout.js", "abs_path": "https://acme.example/app/checkout.js", "lineno": 41}
                    ]}}]},
                    "web_url": format!("https://sentry.io/organizations/acme/issues/1170820242/events/{event_id}/"),
                    "issue_url": "https://sentry.io/api/0/issues/1170820242/",
                    "url": format!("https://sentry.io/api/0/projects/acme/{project}/events/{event_id}/")
                }
            },
            "actor": {"type": "application", "id": "sentry", "name": "Sentry"}
        }),
    }
}

/// The integration being installed (Sentry sends it to the same URL): no run.
pub fn installation_created() -> Delivery {
    Delivery {
        resource: "installation",
        body: json!({"action": "created", "installation": {"uuid": "7a485448-a9e2-4c85-8a3c-4f44175783c9"}, "data": {"installation": {"status": "installed"}}}),
    }
}

/// Sends a delivery as Sentry does, signed with `client_secret` (or as given in
/// `signature`): the status and the JSON answer.
pub async fn deliver(
    url: &str,
    client_secret: &str,
    delivery: &Delivery,
    signature: Option<&str>,
) -> (u16, Value) {
    let body = delivery.body.to_string();
    let sig = signature
        .map(str::to_owned)
        .unwrap_or_else(|| crate::signing::sentry(client_secret, body.as_bytes()));
    let resp = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .header("Request-ID", "c3a7b1e0-1f5b-4c1e-9a1e-2f1f5d2e9b7c")
        .header("Sentry-Hook-Resource", delivery.resource)
        .header(
            "Sentry-Hook-Timestamp",
            (crate::signing::now_ms() / 1000).to_string(),
        )
        .header("Sentry-Hook-Signature", sig)
        .body(body)
        .send()
        .await
        .expect("the Worker answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}
