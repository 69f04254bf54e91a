//! OpenCode's event stream, mapped to session events for one turn. Pure: JSON in, events
//! out, so the mapping is tested without a running agent.

use inspect_protocol::sandbox::SandboxEvent;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// What the event means for the turn as a whole.
#[derive(Debug, PartialEq)]
pub enum TurnSignal {
    Continue,
    /// The agent's session went idle: the turn is over.
    Idle,
    /// The agent asks permission (`id`); the supervisor answers it.
    Permission(String),
}

/// The state of one turn: which messages are the user's, streamed text so far, whether the
/// agent produced anything, and the first error it reported.
pub struct TurnMapper {
    pub message_id: String,
    pub agent_session: String,
    /// Messages of earlier turns: what still arrives about them (an aborted turn's last
    /// parts, its error, its idle) is not this turn's.
    earlier: HashSet<String>,
    /// This turn's own user message has been seen: from then on the session's idle and
    /// errors are this turn's.
    started: bool,
    user_messages: HashSet<String>,
    assistant_messages: HashSet<String>,
    texts: HashMap<String, String>,
    pub produced_output: bool,
    pub error: Option<String>,
}

/// An event's payload: OpenCode wraps it in `properties`.
fn props(ev: &Value) -> &Value {
    ev.get("properties").unwrap_or(ev)
}

fn s(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// An OpenCode error as one line: `Name: message`, or the name alone.
fn error_text(err: &Value) -> String {
    let name = s(err, "name");
    let msg = err.get("data").map(|d| s(d, "message")).unwrap_or_default();
    if msg.is_empty() {
        name
    } else {
        format!("{name}: {msg}")
    }
}

/// How a turn ended, whichever the agent: its first error, else a failure when it produced
/// nothing, else a success.
pub fn outcome(error: Option<&str>, produced_output: bool) -> (bool, Option<String>) {
    match (error, produced_output) {
        (Some(e), _) => (false, Some(e.to_owned())),
        (None, false) => (
            false,
            Some("the agent finished without producing any output".into()),
        ),
        (None, true) => (true, None),
    }
}

impl TurnMapper {
    #[cfg(test)]
    pub fn new(message_id: &str, agent_session: &str) -> Self {
        Self::after(message_id, agent_session, HashSet::new())
    }

    /// A turn that follows others, whose messages are `earlier`.
    pub fn after(message_id: &str, agent_session: &str, earlier: HashSet<String>) -> Self {
        TurnMapper {
            message_id: message_id.into(),
            agent_session: agent_session.into(),
            earlier,
            started: false,
            user_messages: HashSet::new(),
            assistant_messages: HashSet::new(),
            texts: HashMap::new(),
            produced_output: false,
            error: None,
        }
    }

    fn ours(&self, p: &Value) -> bool {
        let sid = p
            .get("sessionID")
            .or_else(|| p.get("part").and_then(|x| x.get("sessionID")))
            .or_else(|| p.get("info").and_then(|x| x.get("sessionID")))
            .and_then(Value::as_str);
        sid.is_none_or(|sid| sid == self.agent_session)
    }

    /// Every message this turn has seen (its user message and the agent's answers).
    pub fn messages(&self) -> impl Iterator<Item = &String> {
        self.user_messages.iter().chain(&self.assistant_messages)
    }

    pub fn on_event(&mut self, ev: &Value) -> (Vec<SandboxEvent>, TurnSignal) {
        let kind = ev.get("type").and_then(Value::as_str).unwrap_or_default();
        let p = props(ev);
        if !self.ours(p) {
            return (vec![], TurnSignal::Continue);
        }
        let about = p
            .get("info")
            .and_then(|i| i.get("id"))
            .or_else(|| p.get("part").and_then(|x| x.get("messageID")))
            .or_else(|| p.get("messageID"))
            .and_then(Value::as_str);
        if about.is_some_and(|m| self.earlier.contains(m)) {
            return (vec![], TurnSignal::Continue);
        }
        let mut out = vec![];
        match kind {
            "message.updated" => {
                let info = &p["info"];
                let id = s(info, "id");
                match info.get("role").and_then(Value::as_str) {
                    Some("user") => {
                        self.started = true;
                        self.user_messages.insert(id);
                    }
                    Some("assistant") => {
                        self.assistant_messages.insert(id);
                        if let Some(err) = info.get("error").filter(|e| !e.is_null()) {
                            self.error.get_or_insert(error_text(err));
                        }
                    }
                    _ => {}
                }
            }
            "message.part.delta" => {
                let mid = s(p, "messageID");
                if !self.user_messages.contains(&mid)
                    && p.get("field").and_then(Value::as_str).unwrap_or("text") == "text"
                {
                    let part = s(p, "partID");
                    let text = self.texts.entry(part.clone()).or_default();
                    text.push_str(p.get("delta").and_then(Value::as_str).unwrap_or_default());
                    self.produced_output = true;
                    out.push(SandboxEvent::Token {
                        message_id: self.message_id.clone(),
                        part_id: Some(part),
                        content: text.clone(),
                    });
                }
            }
            "message.part.updated" => {
                let part = &p["part"];
                let mid = s(part, "messageID");
                if self.user_messages.contains(&mid) {
                    return (out, TurnSignal::Continue);
                }
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = s(part, "text");
                        let id = s(part, "id");
                        if !text.is_empty()
                            && self.assistant_messages.contains(&mid)
                            && self.texts.get(&id) != Some(&text)
                        {
                            self.texts.insert(id.clone(), text.clone());
                            self.produced_output = true;
                            out.push(SandboxEvent::Token {
                                message_id: self.message_id.clone(),
                                part_id: Some(id),
                                content: text,
                            });
                        }
                    }
                    Some("tool") => {
                        let state = &part["state"];
                        let status = s(state, "status");
                        let output = state
                            .get("output")
                            .and_then(Value::as_str)
                            .or_else(|| state.get("error").and_then(Value::as_str))
                            .map(str::to_owned);
                        // OpenCode stamps `time.start` (running) and `time.end` (done).
                        let time = |k: &str| state["time"].get(k).and_then(Value::as_i64);
                        let duration_ms = time("start")
                            .zip(time("end"))
                            .map(|(start, end)| (end - start).max(0));
                        self.produced_output = true;
                        out.push(SandboxEvent::ToolCall {
                            message_id: self.message_id.clone(),
                            tool: s(part, "tool"),
                            call_id: s(part, "callID"),
                            status,
                            args: state.get("input").cloned().unwrap_or(Value::Null),
                            output,
                            duration_ms,
                        });
                    }
                    Some("step-start") => out.push(SandboxEvent::StepStart {
                        message_id: self.message_id.clone(),
                    }),
                    Some("step-finish") => out.push(SandboxEvent::StepFinish {
                        message_id: self.message_id.clone(),
                        cost: part.get("cost").and_then(Value::as_f64).unwrap_or(0.0),
                        tokens: part.get("tokens").cloned().unwrap_or(Value::Null),
                    }),
                    _ => {}
                }
            }
            // Before this turn's own message, the session's error and idle are what is left
            // of the turn before it (an abort's last word).
            "session.error" if self.started => {
                self.error.get_or_insert(error_text(&p["error"]));
            }
            "session.idle" if self.started => return (out, TurnSignal::Idle),
            "permission.asked" | "permission.updated" => {
                let id = s(p, "id");
                if !id.is_empty() {
                    return (out, TurnSignal::Permission(id));
                }
            }
            _ => {}
        }
        (out, TurnSignal::Continue)
    }

    /// How the turn ended: a turn that produced nothing is a failure, not a success.
    pub fn outcome(&self) -> (bool, Option<String>) {
        outcome(self.error.as_deref(), self.produced_output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: &str, props: Value) -> Value {
        json!({"type": kind, "properties": props})
    }

    #[test]
    fn a_tool_turn_maps_to_session_events() {
        let mut m = TurnMapper::new("msg_1", "ses_a");
        let user = ev(
            "message.updated",
            json!({"info": {"id": "u1", "role": "user", "sessionID": "ses_a"}}),
        );
        assert!(m.on_event(&user).0.is_empty());
        let prompt_text = ev(
            "message.part.updated",
            json!({"part": {"id": "p0", "messageID": "u1", "sessionID": "ses_a", "type": "text", "text": "do it"}}),
        );
        assert!(
            m.on_event(&prompt_text).0.is_empty(),
            "the user's own text is not echoed"
        );
        m.on_event(&ev(
            "message.updated",
            json!({"info": {"id": "a1", "role": "assistant", "sessionID": "ses_a"}}),
        ));
        let (e, _) = m.on_event(&ev("message.part.updated", json!({"part": {"id": "s1", "messageID": "a1", "sessionID": "ses_a", "type": "step-start"}})));
        assert_eq!(
            e,
            vec![SandboxEvent::StepStart {
                message_id: "msg_1".into()
            }]
        );
        let (e, _) = m.on_event(&ev("message.part.updated", json!({"part": {"id": "t1", "messageID": "a1", "sessionID": "ses_a", "type": "tool", "tool": "bash", "callID": "call_1", "state": {"status": "completed", "input": {"command": "ls"}, "output": "a.txt"}}})));
        assert!(
            matches!(&e[0], SandboxEvent::ToolCall { call_id, status, output: Some(o), .. } if call_id == "call_1" && status == "completed" && o == "a.txt")
        );
        for d in ["Do", "ne"] {
            m.on_event(&ev("message.part.delta", json!({"messageID": "a1", "partID": "x1", "sessionID": "ses_a", "field": "text", "delta": d})));
        }
        let (e, _) = m.on_event(&ev("message.part.delta", json!({"messageID": "a1", "partID": "x1", "sessionID": "ses_a", "field": "text", "delta": "!"})));
        assert_eq!(
            e,
            vec![SandboxEvent::Token {
                message_id: "msg_1".into(),
                part_id: Some("x1".into()),
                content: "Done!".into()
            }]
        );
        let (e, _) = m.on_event(&ev("message.part.updated", json!({"part": {"id": "f1", "messageID": "a1", "sessionID": "ses_a", "type": "step-finish", "cost": 0.5, "tokens": {"input": 10}}})));
        assert!(matches!(&e[0], SandboxEvent::StepFinish { cost, .. } if *cost == 0.5));
        // Another session's events are not ours.
        let (e, s) = m.on_event(&ev("session.idle", json!({"sessionID": "ses_other"})));
        assert!(e.is_empty() && s == TurnSignal::Continue);
        assert_eq!(
            m.on_event(&ev("session.idle", json!({"sessionID": "ses_a"})))
                .1,
            TurnSignal::Idle
        );
        assert_eq!(m.outcome(), (true, None));
    }

    #[test]
    fn silence_and_errors_are_failures() {
        let m = TurnMapper::new("m", "s");
        assert!(!m.outcome().0);
        let mut m = TurnMapper::new("m", "s");
        m.on_event(&ev("message.updated", json!({"info": {"id": "a", "role": "assistant", "sessionID": "s", "error": {"name": "MessageAbortedError", "data": {"message": "aborted"}}}})));
        assert_eq!(
            m.outcome(),
            (false, Some("MessageAbortedError: aborted".into()))
        );
        assert_eq!(
            m.on_event(&ev(
                "permission.asked",
                json!({"id": "perm_1", "sessionID": "s"})
            ))
            .1,
            TurnSignal::Permission("perm_1".into())
        );
    }

    #[test]
    fn what_an_aborted_turn_still_says_is_not_the_next_turns() {
        let ev = |t: &str, p: Value| json!({"type": t, "properties": p});
        // The stopped turn saw its messages u1 (the prompt) and a1 (the answer).
        let earlier: HashSet<String> = ["u1".to_owned(), "a1".to_owned()].into();
        let mut m = TurnMapper::after("msg_2", "ses_a", earlier);
        // The abort's last word arrives after the next prompt went out: the aborted tool,
        // the answer's error, the session's error and idle.
        let late = [
            ev(
                "message.part.updated",
                json!({"part": {"id": "t1", "messageID": "a1", "sessionID": "ses_a", "type": "tool", "tool": "bash", "callID": "call_1", "state": {"status": "completed", "output": "User aborted the command"}}}),
            ),
            ev(
                "message.updated",
                json!({"info": {"id": "a1", "role": "assistant", "sessionID": "ses_a", "error": {"name": "MessageAbortedError", "data": {"message": "Aborted"}}}}),
            ),
            ev(
                "session.error",
                json!({"sessionID": "ses_a", "error": {"name": "MessageAbortedError", "data": {"message": "Aborted"}}}),
            ),
            ev("session.idle", json!({"sessionID": "ses_a"})),
        ];
        for e in &late {
            let (out, signal) = m.on_event(e);
            assert!(out.is_empty() && signal == TurnSignal::Continue, "{e}");
        }
        // Then this turn's own prompt and answer.
        m.on_event(&ev(
            "message.updated",
            json!({"info": {"id": "u2", "role": "user", "sessionID": "ses_a"}}),
        ));
        m.on_event(&ev(
            "message.updated",
            json!({"info": {"id": "a2", "role": "assistant", "sessionID": "ses_a"}}),
        ));
        let (out, _) = m.on_event(&ev("message.part.updated", json!({"part": {"id": "x2", "messageID": "a2", "sessionID": "ses_a", "type": "text", "text": "Back to work."}})));
        assert_eq!(out.len(), 1);
        let (_, signal) = m.on_event(&ev("session.idle", json!({"sessionID": "ses_a"})));
        assert_eq!(signal, TurnSignal::Idle);
        assert_eq!(m.outcome(), (true, None));
    }
}
