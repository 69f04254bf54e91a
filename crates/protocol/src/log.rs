//! Log lines: one JSON object per line, the same shape from the Worker, the SessionDO, the
//! local host and the supervisor, so one filter (`jq 'select(.session == "…")'`) follows a
//! session through every part. Never put a token, a secret's value or a prompt's text in
//! a field; ids, names, counts, durations and error messages only.

use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// One event: `{"level","component","event", …fields}`.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub level: Level,
    fields: Map<String, Value>,
}

impl LogLine {
    pub fn new(level: Level, component: &str, event: &str) -> Self {
        let mut fields = Map::new();
        fields.insert("level".into(), level.as_str().into());
        fields.insert("component".into(), component.into());
        fields.insert("event".into(), event.into());
        LogLine { level, fields }
    }
    pub fn info(component: &str, event: &str) -> Self {
        Self::new(Level::Info, component, event)
    }
    pub fn warn(component: &str, event: &str) -> Self {
        Self::new(Level::Warn, component, event)
    }
    pub fn error(component: &str, event: &str) -> Self {
        Self::new(Level::Error, component, event)
    }
    /// Adds a field (a `None` adds nothing). The line's own `level`, `component` and
    /// `event` are never replaced: a field of one of those names is kept as `<name>Field`.
    pub fn with(self, key: &str, value: impl Into<Value>) -> Self {
        self.with_value(key, value.into())
    }
    /// [`Self::with`] once converted (not made again for each kind of value).
    #[inline(never)]
    fn with_value(mut self, key: &str, value: Value) -> Self {
        if !value.is_null() {
            let key = if matches!(key, "level" | "component" | "event") {
                format!("{key}Field")
            } else {
                key.to_owned()
            };
            self.fields.insert(key, value);
        }
        self
    }
    pub fn session(self, id: &str) -> Self {
        self.with("session", id)
    }
    pub fn sandbox(self, id: &str) -> Self {
        self.with("sandbox", id)
    }
    pub fn message(self, id: &str) -> Self {
        self.with("message", id)
    }
    pub fn actor(self, user_id: &str) -> Self {
        self.with("actor", user_id)
    }
    pub fn duration_ms(self, ms: i64) -> Self {
        self.with("durationMs", ms)
    }
    pub fn detail(self, text: impl std::fmt::Display) -> Self {
        self.with("detail", text.to_string())
    }
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }
    /// The line as written.
    pub fn to_json(&self) -> String {
        Value::Object(self.fields.clone()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_json_object_per_event() {
        let line = LogLine::warn("session", "spawn_failed")
            .session("s1")
            .sandbox("sb1")
            .duration_ms(12)
            .with("missing", Option::<String>::None)
            .detail("host unreachable");
        let v: Value = serde_json::from_str(&line.to_json()).unwrap();
        assert_eq!(v["level"], "warn");
        assert_eq!(v["component"], "session");
        assert_eq!(v["event"], "spawn_failed");
        assert_eq!(v["session"], "s1");
        assert_eq!(v["durationMs"], 12);
        assert!(v.get("missing").is_none());
        assert!(!line.to_json().contains('\n'));
    }

    #[test]
    fn a_field_never_replaces_the_lines_event() {
        let v: Value = serde_json::from_str(
            &LogLine::info("slack_bot", "handled")
                .with("event", "Ev123")
                .to_json(),
        )
        .unwrap();
        assert_eq!(v["event"], "handled");
        assert_eq!(v["eventField"], "Ev123");
    }
}
