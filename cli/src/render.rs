//! The session's timeline as terminal lines (pure): boot steps and tool calls one line each
//! once they end (with how long they took), the agent's text when its part is done, the
//! prompts, the outcome. Events seen twice (a reconnect's catch-up, a streamed part told
//! again) print once.

use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

#[derive(Default)]
pub struct Printer {
    /// Events printed, by id, with the state they were printed in.
    printed: HashSet<String>,
    /// The agent's streamed parts not yet printed: id → (seq, text).
    pending: BTreeMap<String, (i64, String)>,
    /// Where each tool call started (ms), for its duration.
    started: BTreeMap<String, i64>,
    /// The newest event seen (a reconnect catches up from here).
    pub last_seq: i64,
}

/// How a prompt ended, once its `execution_complete` is seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub message_id: String,
    pub success: bool,
}

impl Printer {
    /// The lines an event adds, and the prompt it ended, if it ended one.
    pub fn event(&mut self, e: &Value) -> (Vec<String>, Option<Ended>) {
        let kind = e["type"].as_str().unwrap_or_default();
        let id = e["id"].as_str().unwrap_or_default().to_owned();
        let seq = e["seq"].as_i64().unwrap_or(0);
        self.last_seq = self.last_seq.max(seq);
        let mut out = Vec::new();
        if kind == "token" {
            let text = e["content"].as_str().unwrap_or_default().to_owned();
            if !self.printed.contains(&id) {
                self.pending.insert(id, (seq, text));
            }
            return (out, None);
        }
        if kind == "heartbeat" {
            return (out, None);
        }
        // Anything else closes the agent's text streamed before it.
        out.extend(self.flush());
        let mut ended = None;
        match kind {
            "user_message" if self.printed.insert(id.clone()) => {
                let who = e["author"]["name"].as_str().unwrap_or("someone");
                out.push(format!(
                    "› {who}: {}",
                    one_line(e["content"].as_str().unwrap_or_default())
                ));
            }
            "tool_call" => {
                let status = e["status"].as_str().unwrap_or_default();
                let call = e["callId"].as_str().unwrap_or(&id).to_owned();
                let at = e["timestamp"].as_i64().unwrap_or(0);
                if status == "running" || status == "pending" {
                    self.started.entry(call).or_insert(at);
                } else if self.printed.insert(format!("tool:{call}")) {
                    let mark = if status == "error" || status == "failed" {
                        "✗"
                    } else {
                        "✓"
                    };
                    let took = self
                        .started
                        .get(&call)
                        .map(|s| format!(" ({})", duration(at - s)))
                        .unwrap_or_default();
                    let tool = e["tool"].as_str().unwrap_or("tool");
                    out.push(format!("  {mark} {tool} {}{took}", what(&e["args"])));
                }
            }
            "boot_step" => {
                let status = e["status"].as_str().unwrap_or_default();
                let step = e["step"].as_str().unwrap_or_default();
                if matches!(status, "succeeded" | "completed" | "failed" | "skipped")
                    && self.printed.insert(format!("boot:{step}:{status}"))
                {
                    let mark = if status == "failed" { "✗" } else { "·" };
                    out.push(format!("  {mark} boot: {step} {status}"));
                }
            }
            "execution_complete" if self.printed.insert(id.clone()) => {
                let success = e["success"].as_bool().unwrap_or(false);
                out.push(if success {
                    "✔ done".to_owned()
                } else {
                    format!(
                        "✖ failed: {}",
                        e["error"].as_str().unwrap_or("the prompt failed")
                    )
                });
                ended = Some(Ended {
                    message_id: e["messageId"].as_str().unwrap_or_default().to_owned(),
                    success,
                });
            }
            "error" | "warning" if self.printed.insert(id.clone()) => {
                let text = e["error"]
                    .as_str()
                    .or_else(|| e["message"].as_str())
                    .unwrap_or_default();
                out.push(format!("  ! {kind}: {}", one_line(text)));
            }
            _ => {}
        }
        (out, ended)
    }

    /// The agent's text streamed so far, printed (in order).
    pub fn flush(&mut self) -> Vec<String> {
        let mut parts: Vec<(String, (i64, String))> =
            std::mem::take(&mut self.pending).into_iter().collect();
        parts.sort_by_key(|(_, (seq, _))| *seq);
        let mut out = Vec::new();
        for (id, (_, text)) in parts {
            if self.printed.insert(id) && !text.trim().is_empty() {
                out.push(text.trim_end().to_owned());
            }
        }
        out
    }
}

fn one_line(s: &str) -> String {
    let line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 120 {
        format!("{}…", line.chars().take(119).collect::<String>())
    } else {
        line
    }
}

/// What a tool call was about, from its arguments.
fn what(args: &Value) -> String {
    for k in [
        "description",
        "command",
        "filePath",
        "path",
        "pattern",
        "url",
    ] {
        if let Some(s) = args[k].as_str() {
            return one_line(s);
        }
    }
    String::new()
}

fn duration(ms: i64) -> String {
    if ms < 1000 {
        format!("{} ms", ms.max(0))
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_thing_prints_once_in_order() {
        let mut p = Printer::default();
        let events = [
            json!({"id": "e1", "seq": 1, "type": "user_message", "content": "fix\nit", "author": {"name": "ann"}}),
            json!({"id": "e2", "seq": 2, "type": "boot_step", "step": "git_sync", "status": "started"}),
            json!({"id": "e2", "seq": 2, "type": "boot_step", "step": "git_sync", "status": "succeeded"}),
            json!({"id": "e3", "seq": 3, "type": "tool_call", "callId": "c1", "tool": "bash", "status": "running", "timestamp": 1000, "args": {"command": "ls"}}),
            json!({"id": "e4", "seq": 4, "type": "token", "content": "Look"}),
            json!({"id": "e4", "seq": 4, "type": "token", "content": "Looking."}),
            json!({"id": "e3", "seq": 5, "type": "tool_call", "callId": "c1", "tool": "bash", "status": "completed", "timestamp": 2500, "args": {"command": "ls"}}),
            json!({"id": "e6", "seq": 6, "type": "execution_complete", "messageId": "m1", "success": true}),
        ];
        let mut lines = Vec::new();
        let mut ended = None;
        for e in &events {
            let (l, end) = p.event(e);
            lines.extend(l);
            ended = ended.or(end);
        }
        assert_eq!(
            lines,
            vec![
                "› ann: fix it",
                "  · boot: git_sync succeeded",
                "Looking.",
                "  ✓ bash ls (1.5 s)",
                "✔ done"
            ]
        );
        assert_eq!(
            ended,
            Some(Ended {
                message_id: "m1".into(),
                success: true
            })
        );
        // A reconnect's catch-up sends them again: nothing twice.
        let again: Vec<String> = events.iter().flat_map(|e| p.event(e).0).collect();
        assert!(again.is_empty(), "{again:?}");
        assert_eq!(p.last_seq, 6);
    }

    #[test]
    fn a_failure_says_why() {
        let mut p = Printer::default();
        let (lines, ended) = p.event(&json!({"id": "x", "seq": 1, "type": "execution_complete", "messageId": "m", "success": false, "error": "boom"}));
        assert_eq!(lines, vec!["✖ failed: boom"]);
        assert!(!ended.unwrap().success);
    }
}
