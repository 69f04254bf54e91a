//! Sentry as a trigger: an internal integration's webhook (`Sentry-Hook-Resource`,
//! `Sentry-Hook-Signature` = hex HMAC-SHA256 of the raw body with the integration's client
//! secret), read into the few facts conditions look at and the agent is shown.
//!
//! Two resources start runs: `issue` with action `created` (a new issue), and
//! `event_alert` with action `triggered` (an issue alert rule fired for an event).

use hmac::{Hmac, Mac};
use inspect_protocol::automations::SentryResource;
use serde_json::{json, Value};
use sha2::Sha256;

/// The largest Sentry delivery (an event alert carries the whole event).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Stack frames shown to the agent (the innermost ones).
const FRAMES_SHOWN: usize = 12;

/// Whether `signature` (hex) is the HMAC-SHA256 of `body` under `secret`, compared in
/// constant time.
pub fn signed(secret: &str, body: &[u8], signature: &str) -> bool {
    let Ok(given) = hex::decode(signature.trim()) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

/// An issue or an event alert, as runs use it.
#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    /// What makes one delivery the same as a retried one: the issue, or the event.
    pub key: String,
    /// What conditions look at (`$.project`, `$.level`, `$.environment`, `$.title`,
    /// `$.culprit`, `$.action`).
    pub facts: Value,
    /// Innermost frames first, as `function (file:line)`.
    pub frames: Vec<String>,
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Reads a delivery of `resource` whose action starts a run; `None` for anything else
/// (other actions, other resources, shapes that are not Sentry's).
pub fn incident(resource: SentryResource, header_resource: &str, body: &Value) -> Option<Incident> {
    let action = body["action"].as_str()?;
    match (resource, header_resource, action) {
        (SentryResource::Issue, "issue", "created") => {
            let issue = &body["data"]["issue"];
            let id = text(&issue["id"])?;
            Some(Incident {
                key: format!("issue:{id}"),
                facts: json!({
                    "action": action,
                    "project": issue["project"]["slug"].as_str(),
                    "level": issue["level"].as_str(),
                    "environment": Value::Null,
                    "title": issue["title"].as_str(),
                    "culprit": issue["culprit"].as_str(),
                    "shortId": issue["shortId"].as_str(),
                    "url": issue["web_url"].as_str().or(issue["permalink"].as_str()),
                }),
                frames: Vec::new(),
            })
        }
        (SentryResource::EventAlert, "event_alert", "triggered") => {
            let event = &body["data"]["event"];
            let id = text(&event["event_id"])?;
            let tag = |name: &str| {
                event["tags"].as_array().and_then(|tags| {
                    tags.iter().find_map(|t| match t {
                        // Sentry sends tags as [key, value] pairs (or {key, value}).
                        Value::Array(kv) if kv.first().and_then(Value::as_str) == Some(name) => {
                            kv.get(1).and_then(Value::as_str).map(str::to_owned)
                        }
                        Value::Object(o) if o.get("key").and_then(Value::as_str) == Some(name) => {
                            o.get("value").and_then(Value::as_str).map(str::to_owned)
                        }
                        _ => None,
                    })
                })
            };
            let project = tag("project").or_else(|| text(&event["project"]));
            let environment = event["environment"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| tag("environment"));
            Some(Incident {
                key: format!("event:{id}"),
                facts: json!({
                    "action": action,
                    "project": project,
                    "level": event["level"].as_str(),
                    "environment": environment,
                    "title": event["title"].as_str(),
                    "culprit": event["culprit"].as_str(),
                    "rule": body["data"]["triggered_rule"].as_str(),
                    "url": event["web_url"].as_str().or(event["issue_url"].as_str()),
                }),
                frames: frames(event),
            })
        }
        _ => None,
    }
}

/// The event's stack, innermost frame first.
fn frames(event: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(values) = event["exception"]["values"].as_array() else {
        return out;
    };
    for v in values.iter().rev() {
        let Some(frames) = v["stacktrace"]["frames"].as_array() else {
            continue;
        };
        for f in frames.iter().rev() {
            if out.len() == FRAMES_SHOWN {
                return out;
            }
            let function = f["function"].as_str().unwrap_or("?");
            let file = f["filename"]
                .as_str()
                .or(f["abs_path"].as_str())
                .unwrap_or("?");
            match f["lineno"].as_i64() {
                Some(line) => out.push(format!("{function} ({file}:{line})")),
                None => out.push(format!("{function} ({file})")),
            }
        }
    }
    out
}

/// What the agent is shown of an incident: pretty JSON of its facts and frames, between
/// markers, so no line of it can be a marker.
pub fn shown(incident: &Incident) -> Value {
    json!({"sentry": incident.facts, "stack": incident.frames})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hmac_hex(secret: &str, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }

    #[test]
    fn the_signature_is_the_bodys_hmac_under_the_client_secret() {
        let body = br#"{"action":"created"}"#;
        let sig = hmac_hex("s3cret", body);
        assert!(signed("s3cret", body, &sig));
        assert!(!signed("other", body, &sig));
        assert!(!signed("s3cret", br#"{"action":"resolved"}"#, &sig));
        assert!(!signed("s3cret", body, "not hex"));
        assert!(!signed("s3cret", body, ""));
    }

    #[test]
    fn an_issue_created_and_an_event_alert_are_read_others_are_not() {
        let issue = json!({"action": "created", "data": {"issue": {
            "id": "1170820242", "shortId": "WEB-7", "title": "TypeError: x is undefined",
            "culprit": "app/cart.js in total", "level": "error",
            "project": {"slug": "web"}, "web_url": "https://sentry.io/organizations/acme/issues/1170820242/"
        }}});
        let i = incident(SentryResource::Issue, "issue", &issue).unwrap();
        assert_eq!(i.key, "issue:1170820242");
        assert_eq!(i.facts["project"], "web");
        assert_eq!(i.facts["level"], "error");
        assert!(incident(
            SentryResource::Issue,
            "issue",
            &json!({"action": "resolved", "data": issue["data"]})
        )
        .is_none());
        assert!(incident(SentryResource::EventAlert, "issue", &issue).is_none());

        let alert = json!({"action": "triggered", "data": {"triggered_rule": "Checkout errors", "event": {
            "event_id": "e1f2", "title": "ReferenceError: blooopy is not defined", "culprit": "?(runner)",
            "level": "error", "environment": "production", "project": 1,
            "tags": [["environment", "production"], ["project", "web"], ["level", "error"]],
            "web_url": "https://sentry.io/organizations/acme/issues/1170820242/events/e1f2/",
            "exception": {"values": [{"type": "ReferenceError", "stacktrace": {"frames": [
                {"function": "main", "filename": "app.js", "lineno": 3},
                {"function": "checkout", "filename": "cart.js", "lineno": 41}
            ]}}]}
        }}});
        let a = incident(SentryResource::EventAlert, "event_alert", &alert).unwrap();
        assert_eq!(a.key, "event:e1f2");
        assert_eq!(a.facts["environment"], "production");
        assert_eq!(a.facts["project"], "web");
        assert_eq!(a.frames, vec!["checkout (cart.js:41)", "main (app.js:3)"]);
        assert!(incident(
            SentryResource::EventAlert,
            "event_alert",
            &json!({"action": "triggered"})
        )
        .is_none());
    }
}
