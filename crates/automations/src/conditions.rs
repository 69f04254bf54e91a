//! Filters on an event's JSON: a dot path from the root (`$.deploy.env`; no indexes, no
//! recursion) and a comparison. Every filter must match.

use inspect_protocol::automations::{Comparison, Filter, MAX_FILTERS};
use inspect_protocol::ApiError;
use serde_json::Value;

/// The longest path, and the most segments in one.
const MAX_PATH_CHARS: usize = 200;
const MAX_SEGMENTS: usize = 16;

/// A path's keys: `$.a.b` → `["a", "b"]`; `$` alone is the root.
fn segments(path: &str) -> Result<Vec<&str>, String> {
    let rest = path
        .strip_prefix('$')
        .ok_or_else(|| format!("a condition's path starts with $ (got {path:?})"))?;
    if rest.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<&str> = rest
        .strip_prefix('.')
        .ok_or_else(|| format!("a condition's path is dot notation like $.a.b (got {path:?})"))?
        .split('.')
        .collect();
    if keys.len() > MAX_SEGMENTS {
        return Err(format!(
            "a condition's path has at most {MAX_SEGMENTS} keys"
        ));
    }
    for k in &keys {
        if k.is_empty() || k.contains(['[', ']', '*']) {
            return Err(format!(
                "a condition's path is plain keys separated by dots, without indexes or wildcards (got {path:?})"
            ));
        }
    }
    Ok(keys)
}

/// Checks filters when an automation is saved.
pub fn validate(filters: &[Filter]) -> Result<(), ApiError> {
    if filters.len() > MAX_FILTERS {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_FILTERS} conditions"
        )));
    }
    for f in filters {
        if f.path.chars().count() > MAX_PATH_CHARS {
            return Err(ApiError::bad_request(format!(
                "a condition's path is at most {MAX_PATH_CHARS} characters"
            )));
        }
        segments(&f.path).map_err(ApiError::bad_request)?;
        match (f.op, &f.value) {
            (Comparison::Exists, _) => {}
            (_, None) => {
                return Err(ApiError::bad_request(format!(
                    "the condition on {} needs a value to compare with",
                    f.path
                )))
            }
            (Comparison::Gt | Comparison::Gte | Comparison::Lt | Comparison::Lte, Some(v))
                if !v.is_number() && !v.is_string() =>
            {
                return Err(ApiError::bad_request(format!(
                    "the condition on {} orders numbers or strings only",
                    f.path
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The value at `path` in `event`, if there is one.
fn at<'a>(event: &'a Value, path: &str) -> Option<&'a Value> {
    segments(path)
        .ok()?
        .into_iter()
        .try_fold(event, |v, key| v.as_object()?.get(key))
}

fn ordered(found: &Value, wanted: &Value) -> Option<std::cmp::Ordering> {
    match (found, wanted) {
        (Value::Number(a), Value::Number(b)) => a.as_f64()?.partial_cmp(&b.as_f64()?),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        // A number sent as text ("42") compares as the number.
        (Value::String(a), Value::Number(b)) => {
            a.trim().parse::<f64>().ok()?.partial_cmp(&b.as_f64()?)
        }
        _ => None,
    }
}

/// Whether one filter matches: a path the event lacks matches only `neq`.
fn matches(f: &Filter, event: &Value) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let found = at(event, &f.path);
    let Some(wanted) = f.value.as_ref() else {
        return f.op == Comparison::Exists && found.is_some();
    };
    let Some(found) = found else {
        return f.op == Comparison::Neq;
    };
    match f.op {
        Comparison::Exists => true,
        Comparison::Eq => found == wanted,
        Comparison::Neq => found != wanted,
        Comparison::Gt => ordered(found, wanted) == Some(Greater),
        Comparison::Gte => matches!(ordered(found, wanted), Some(Greater | Equal)),
        Comparison::Lt => ordered(found, wanted) == Some(Less),
        Comparison::Lte => matches!(ordered(found, wanted), Some(Less | Equal)),
        Comparison::Contains => match (found, wanted) {
            (Value::String(s), Value::String(w)) => s.contains(w.as_str()),
            (Value::Array(items), w) => items.contains(w),
            _ => false,
        },
    }
}

/// Whether every filter matches `event` (no filters: every event).
pub fn all_match(filters: &[Filter], event: &Value) -> bool {
    filters.iter().all(|f| matches(f, event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(path: &str, op: Comparison, value: Option<Value>) -> Filter {
        Filter {
            path: path.into(),
            op,
            value,
        }
    }

    #[test]
    fn every_comparison() {
        let event = json!({"deploy": {"env": "production", "attempt": 3, "tags": ["api", "eu"]}, "status": "failed", "count": "12"});
        let yes = |path: &str, op, v: Option<Value>| all_match(&[filter(path, op, v)], &event);
        assert!(yes(
            "$.deploy.env",
            Comparison::Eq,
            Some(json!("production"))
        ));
        assert!(!yes("$.deploy.env", Comparison::Eq, Some(json!("staging"))));
        assert!(yes("$.deploy.env", Comparison::Neq, Some(json!("staging"))));
        assert!(yes("$.deploy.attempt", Comparison::Gt, Some(json!(2))));
        assert!(yes("$.deploy.attempt", Comparison::Gte, Some(json!(3))));
        assert!(!yes("$.deploy.attempt", Comparison::Lt, Some(json!(3))));
        assert!(yes("$.deploy.attempt", Comparison::Lte, Some(json!(3))));
        assert!(yes("$.count", Comparison::Gt, Some(json!(10))));
        assert!(yes(
            "$.deploy.env",
            Comparison::Contains,
            Some(json!("duct"))
        ));
        assert!(yes(
            "$.deploy.tags",
            Comparison::Contains,
            Some(json!("eu"))
        ));
        assert!(yes("$.status", Comparison::Exists, None));
        assert!(!yes("$.deploy.region", Comparison::Exists, None));
        // An absent path matches nothing but `neq`.
        assert!(!yes("$.deploy.region", Comparison::Eq, Some(json!("eu"))));
        assert!(yes("$.deploy.region", Comparison::Neq, Some(json!("eu"))));
        assert!(!yes("$.status.code", Comparison::Gt, Some(json!(1))));
        // All must match.
        assert!(!all_match(
            &[
                filter("$.status", Comparison::Eq, Some(json!("failed"))),
                filter("$.deploy.env", Comparison::Eq, Some(json!("staging"))),
            ],
            &event
        ));
        assert!(all_match(&[], &event));
    }

    #[test]
    fn paths_and_values_are_checked_on_save() {
        let no = |f: Filter| validate(&[f]).unwrap_err().message;
        assert!(no(filter("deploy.env", Comparison::Exists, None)).contains("starts with $"));
        assert!(no(filter("$.items[0]", Comparison::Exists, None)).contains("without indexes"));
        assert!(no(filter("$..a", Comparison::Exists, None)).contains("plain keys"));
        assert!(no(filter("$.a", Comparison::Eq, None)).contains("needs a value"));
        assert!(no(filter("$.a", Comparison::Gt, Some(json!(true)))).contains("orders"));
        let many = vec![filter("$.a", Comparison::Exists, None); MAX_FILTERS + 1];
        assert!(validate(&many).is_err());
        assert!(validate(&[filter("$.a.b", Comparison::Eq, Some(json!(1)))]).is_ok());
    }
}
