//! The session's timeline as terminal output (pure): boot steps and tool calls one line each
//! once they end (with how long they took) and, while they run, as what is under way; the
//! agent's text (Markdown) when its part is done; the prompts, the outcome; who is there
//! and what is queued when that changes. Events seen twice (a reconnect's catch-up, a
//! streamed part told again) print once.

use inspect_protocol::client::Presence;
use inspect_protocol::session::{MessageStatus, QueuedPrompt};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// One thing to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// A line, as it is.
    Line(String),
    /// The agent's words, Markdown.
    Text(String),
    /// What is under way now (a boot step, a running tool): a progress display's message.
    Doing(String),
    /// Nothing is under way any more (the prompt ended).
    Idle,
}

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
    /// The last "who is there" and "queued" lines shown (each shown again only when changed).
    here: String,
    queued: String,
}

/// How a prompt ended, once its `execution_complete` is seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub message_id: String,
    pub success: bool,
}

impl Printer {
    /// What an event adds, and the prompt it ended, if it ended one.
    pub fn event(&mut self, e: &Value) -> (Vec<Out>, Option<Ended>) {
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
                out.push(Out::Line(format!(
                    "› {who}: {}",
                    one_line(e["content"].as_str().unwrap_or_default())
                )));
            }
            "tool_call" => {
                let status = e["status"].as_str().unwrap_or_default();
                let call = e["callId"].as_str().unwrap_or(&id).to_owned();
                let at = e["timestamp"].as_i64().unwrap_or(0);
                let tool = e["tool"].as_str().unwrap_or("tool");
                if status == "running" || status == "pending" {
                    if !self.printed.contains(&format!("tool:{call}")) {
                        out.push(Out::Doing(format!("{tool} {}", what(&e["args"]))));
                    }
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
                    out.push(Out::Line(format!(
                        "  {mark} {tool} {}{took}",
                        what(&e["args"])
                    )));
                }
            }
            "boot_step" => {
                let status = e["status"].as_str().unwrap_or_default();
                let step = e["step"].as_str().unwrap_or_default();
                if matches!(status, "succeeded" | "completed" | "failed" | "skipped") {
                    if self.printed.insert(format!("boot:{step}:{status}")) {
                        let mark = if status == "failed" { "✗" } else { "·" };
                        out.push(Out::Line(format!("  {mark} boot: {step} {status}")));
                    }
                } else if !self
                    .printed
                    .iter()
                    .any(|p| p.starts_with(&format!("boot:{step}:")))
                {
                    out.push(Out::Doing(format!("boot: {step}…")));
                }
            }
            "execution_complete" if self.printed.insert(id.clone()) => {
                let success = e["success"].as_bool().unwrap_or(false);
                out.push(Out::Idle);
                out.push(Out::Line(if success {
                    "✔ done".to_owned()
                } else {
                    format!(
                        "✖ failed: {}",
                        e["error"].as_str().unwrap_or("the prompt failed")
                    )
                }));
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
                out.push(Out::Line(format!("  ! {kind}: {}", one_line(text))));
            }
            _ => {}
        }
        (out, ended)
    }

    /// The agent's text streamed so far, printed (in order).
    pub fn flush(&mut self) -> Vec<Out> {
        let mut parts: Vec<(String, (i64, String))> =
            std::mem::take(&mut self.pending).into_iter().collect();
        parts.sort_by_key(|(_, (seq, _))| *seq);
        let mut out = Vec::new();
        for (id, (_, text)) in parts {
            if self.printed.insert(id) && !text.trim().is_empty() {
                out.push(Out::Text(text.trim_end().to_owned()));
            }
        }
        out
    }

    /// Who is connected, when that changed: each person once, with how many tabs.
    pub fn here(&mut self, participants: &[Presence]) -> Option<Out> {
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        for p in participants {
            *names.entry(p.name.as_str()).or_default() += 1;
        }
        let list: Vec<String> = names
            .into_iter()
            .map(|(n, c)| {
                if c > 1 {
                    format!("{n} ×{c}")
                } else {
                    n.to_owned()
                }
            })
            .collect();
        let line = format!("  ◦ here: {}", list.join(", "));
        (line != self.here).then(|| {
            self.here = line.clone();
            Out::Line(line)
        })
    }

    /// The prompts waiting their turn, when that changed.
    pub fn queue(&mut self, queue: &[QueuedPrompt]) -> Option<Out> {
        let waiting: Vec<String> = queue
            .iter()
            .filter(|q| q.status == MessageStatus::Pending)
            .map(|q| format!("{} ({})", one_line(&q.content), q.author_name))
            .collect();
        let line = if waiting.is_empty() {
            String::new()
        } else {
            format!("  ◦ queued: {}", waiting.join("; "))
        };
        if line == self.queued {
            return None;
        }
        self.queued = line.clone();
        (!line.is_empty()).then_some(Out::Line(line))
    }
}

/// Plain text for an output (what a pipe or a log gets).
pub fn plain(out: &Out) -> Option<&str> {
    match out {
        Out::Line(s) | Out::Text(s) => Some(s),
        Out::Doing(_) | Out::Idle => None,
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
        let mut shown = Vec::new();
        let mut ended = None;
        for e in &events {
            let (l, end) = p.event(e);
            shown.extend(l);
            ended = ended.or(end);
        }
        assert_eq!(
            shown,
            vec![
                Out::Line("› ann: fix it".into()),
                Out::Doing("boot: git_sync…".into()),
                Out::Line("  · boot: git_sync succeeded".into()),
                Out::Doing("bash ls".into()),
                Out::Text("Looking.".into()),
                Out::Line("  ✓ bash ls (1.5 s)".into()),
                Out::Idle,
                Out::Line("✔ done".into()),
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
        let again: Vec<Out> = events.iter().flat_map(|e| p.event(e).0).collect();
        assert!(again.is_empty(), "{again:?}");
        assert_eq!(p.last_seq, 6);
    }

    #[test]
    fn a_failure_says_why() {
        let mut p = Printer::default();
        let (lines, ended) = p.event(&json!({"id": "x", "seq": 1, "type": "execution_complete", "messageId": "m", "success": false, "error": "boom"}));
        assert_eq!(lines, vec![Out::Idle, Out::Line("✖ failed: boom".into())]);
        assert!(!ended.unwrap().success);
    }

    #[test]
    fn who_is_there_and_the_queue_show_when_they_change() {
        let mut p = Printer::default();
        let person = |id: &str, name: &str| -> Presence {
            serde_json::from_value(json!({"participantId": id, "userId": name, "name": name, "status": "active", "lastSeen": 0})).unwrap()
        };
        let two = [
            person("p1", "ann"),
            person("p2", "bob"),
            person("p3", "ann"),
        ];
        assert_eq!(
            p.here(&two),
            Some(Out::Line("  ◦ here: ann ×2, bob".into()))
        );
        assert_eq!(p.here(&two), None);
        let queued = |id: &str, status: &str, text: &str| -> QueuedPrompt {
            serde_json::from_value(json!({"messageId": id, "authorId": "u", "authorName": "ann", "content": text, "status": status, "position": 1, "createdAt": 0})).unwrap()
        };
        let q = [
            queued("m1", "processing", "first"),
            queued("m2", "pending", "second\nline"),
        ];
        assert_eq!(
            p.queue(&q),
            Some(Out::Line("  ◦ queued: second line (ann)".into()))
        );
        assert_eq!(p.queue(&q), None);
        // Emptied: nothing to say, and the next queue is said again.
        assert_eq!(p.queue(&q[..1]), None);
        assert!(p.queue(&q).is_some());
    }
}
