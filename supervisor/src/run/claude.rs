//! Claude Code as the sandbox's agent: one `claude -p` process per prompt in the
//! workspace (`--output-format stream-json`, the conversation carried on with `--resume`),
//! its own state under the agent's HOME, its lines read into the same channel OpenCode's
//! events use, and a stop that ends the process group. [`ClaudeMapper`] turns those lines
//! into the session's events (pure, tested without the binary): text as tokens, each
//! `tool_use` and its `tool_result` as one tool call with its status and duration (names
//! and arguments as OpenCode's, so the timeline, the changed files and the bots read them
//! the same), the `result` as the turn's outcome.

use super::agent::AgentConfig;
use super::mapping::TurnSignal;
use anyhow::{bail, Context, Result};
use inspect_protocol::sandbox::SandboxEvent;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use tokio::process::Command;
use tokio::sync::mpsc;

/// The event a turn's process sends when it ends (with its exit code).
pub const EXIT_EVENT: &str = "inspect.claude_exit";

/// Claude Code's thinking budget for a reasoning effort a person picked.
pub fn thinking_tokens(effort: &str) -> Option<u32> {
    Some(match effort {
        "none" => return None,
        "minimal" | "low" => 4_000,
        "medium" => 10_000,
        "high" => 32_000,
        "xhigh" | "max" => 63_999,
        _ => return None,
    })
}

/// Claude Code's `--effort` level for a reasoning effort a person picked (its levels are
/// `low`, `medium`, `high`, `xhigh` and `max`); `None` leaves Claude Code's own choice.
pub fn effort_level(effort: &str) -> Option<&'static str> {
    Some(match effort {
        "minimal" | "low" => "low",
        "medium" => "medium",
        "high" => "high",
        "xhigh" => "xhigh",
        "max" => "max",
        _ => return None,
    })
}

/// One turn's `claude` invocation.
pub struct Turn<'a> {
    pub text: &'a str,
    pub model: Option<&'a str>,
    pub effort: Option<&'a str>,
    pub resume: Option<&'a str>,
    pub instructions: Option<&'a str>,
    pub mcp_config: Option<&'a str>,
}

/// The arguments of one turn. The prompt comes last, after `--`: a prompt that starts with
/// `-` ("- fix the footer") is text, not an option.
pub fn prompt_args(t: &Turn<'_>) -> Vec<String> {
    let mut a: Vec<String> = ["-p", "--output-format", "stream-json", "--verbose"]
        .into_iter()
        .chain(["--dangerously-skip-permissions"])
        .map(str::to_owned)
        .collect();
    let mut pair = |k: &str, v: &str| {
        a.push(k.to_owned());
        a.push(v.to_owned());
    };
    if let Some(m) = t.model {
        pair("--model", model_name(m));
    }
    if let Some(level) = t.effort.and_then(effort_level) {
        pair("--effort", level);
    }
    if let Some(id) = t.resume {
        pair("--resume", id);
    }
    if let Some(i) = t.instructions {
        pair("--append-system-prompt", i);
    }
    if let Some(path) = t.mcp_config {
        pair("--mcp-config", path);
    }
    a.push("--".into());
    a.push(t.text.to_owned());
    a
}

/// Claude Code's name for a model the session names (`anthropic/claude-sonnet-4-5` →
/// `claude-sonnet-4-5`).
pub fn model_name(model: &str) -> &str {
    model.split_once('/').map_or(model, |(_, m)| m)
}

/// A Claude Code tool, named as OpenCode names its own (`Bash` → `bash`, `MultiEdit` →
/// `multiedit`), its arguments with OpenCode's keys (`file_path` → `filePath`).
pub fn tool_as_opencode(name: &str, input: &Value) -> (String, Value) {
    let name = name.to_ascii_lowercase();
    let args = match input {
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, v) in o {
                let key = match k.as_str() {
                    "file_path" => "filePath",
                    "notebook_path" => "filePath",
                    "old_string" => "oldString",
                    "new_string" => "newString",
                    other => other,
                };
                out.insert(key.to_owned(), v.clone());
            }
            Value::Object(out)
        }
        other => other.clone(),
    };
    (name, args)
}

/// A tool result's text: a string, or the text blocks of a list.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// One turn's state: the tools running (name, arguments, start), what was said, the
/// outcome once the `result` line came.
pub struct ClaudeMapper {
    pub message_id: String,
    running: HashMap<String, (String, Value, Instant)>,
    texts: HashSet<String>,
    /// Text blocks seen per message.
    blocks: std::collections::HashMap<String, usize>,
    pub produced_output: bool,
    pub error: Option<String>,
    pub session_id: Option<String>,
    finished: bool,
}

impl ClaudeMapper {
    pub fn new(message_id: &str) -> Self {
        ClaudeMapper {
            message_id: message_id.into(),
            running: HashMap::new(),
            texts: HashSet::new(),
            blocks: Default::default(),
            produced_output: false,
            error: None,
            session_id: None,
            finished: false,
        }
    }

    pub fn on_event(&mut self, ev: &Value) -> (Vec<SandboxEvent>, TurnSignal) {
        let mut out = Vec::new();
        match ev["type"].as_str().unwrap_or_default() {
            "system" => {
                if let Some(id) = ev["session_id"].as_str() {
                    self.session_id = Some(id.to_owned());
                }
            }
            "assistant" => {
                let message = &ev["message"];
                let mid = message["id"].as_str().unwrap_or("m");
                for (i, block) in message["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    match block["type"].as_str() {
                        Some("text") => {
                            let text = block["text"].as_str().unwrap_or_default();
                            // Claude Code sends each block of a message on a line of its
                            // own (each at position 0): a block is known by its message,
                            // position and text, and numbered within its message.
                            if text.is_empty() || !self.texts.insert(format!("{mid}:{i}:{text}")) {
                                continue;
                            }
                            let n = self.blocks.entry(mid.to_owned()).or_insert(0);
                            let part = format!("{mid}:{n}");
                            *n += 1;
                            self.produced_output = true;
                            out.push(SandboxEvent::Token {
                                message_id: self.message_id.clone(),
                                part_id: Some(part),
                                content: text.to_owned(),
                            });
                        }
                        Some("tool_use") => {
                            let call = block["id"].as_str().unwrap_or_default().to_owned();
                            let (tool, args) = tool_as_opencode(
                                block["name"].as_str().unwrap_or("tool"),
                                &block["input"],
                            );
                            self.produced_output = true;
                            self.running
                                .insert(call.clone(), (tool.clone(), args.clone(), Instant::now()));
                            out.push(SandboxEvent::ToolCall {
                                message_id: self.message_id.clone(),
                                tool,
                                call_id: call,
                                status: "running".into(),
                                args,
                                output: None,
                                duration_ms: None,
                            });
                        }
                        _ => {}
                    }
                }
            }
            "user" => {
                for block in ev["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"] != "tool_result" {
                        continue;
                    }
                    let call = block["tool_use_id"].as_str().unwrap_or_default().to_owned();
                    let Some((tool, args, started)) = self.running.remove(&call) else {
                        continue;
                    };
                    let failed = block["is_error"].as_bool().unwrap_or(false);
                    out.push(SandboxEvent::ToolCall {
                        message_id: self.message_id.clone(),
                        tool,
                        call_id: call,
                        status: if failed { "error" } else { "completed" }.into(),
                        args,
                        output: Some(result_text(&block["content"])),
                        duration_ms: Some(started.elapsed().as_millis() as i64),
                    });
                }
            }
            "result" => {
                self.finished = true;
                if ev["is_error"].as_bool().unwrap_or(false)
                    || ev["subtype"].as_str().is_some_and(|s| s != "success")
                {
                    let why = ev["result"]
                        .as_str()
                        .filter(|r| !r.is_empty())
                        .or(ev["subtype"].as_str())
                        .unwrap_or("error");
                    self.error.get_or_insert(format!("Claude Code: {why}"));
                }
                out.push(SandboxEvent::StepFinish {
                    message_id: self.message_id.clone(),
                    cost: ev["total_cost_usd"].as_f64().unwrap_or(0.0),
                    tokens: ev.get("usage").cloned().unwrap_or(Value::Null),
                });
            }
            EXIT_EVENT => {
                if !self.finished {
                    let code = ev["code"]
                        .as_i64()
                        .map_or("a signal".to_owned(), |c| format!("code {c}"));
                    self.error
                        .get_or_insert(format!("Claude Code ended without an answer ({code})"));
                }
                return (out, TurnSignal::Idle);
            }
            _ => {}
        }
        (out, TurnSignal::Continue)
    }

    /// How the turn ended: a turn that produced nothing is a failure.
    pub fn outcome(&self) -> (bool, Option<String>) {
        super::mapping::outcome(self.error.as_deref(), self.produced_output)
    }
}

/// Claude Code's MCP configuration (`--mcp-config`) from OpenCode's (`remote` → `http`,
/// `local` → a command with its arguments and environment).
pub fn mcp_config(opencode: &Map<String, Value>) -> Value {
    let mut servers = Map::new();
    for (name, s) in opencode {
        let server = match s["type"].as_str() {
            Some("remote") => {
                json!({"type": "http", "url": s["url"], "headers": s.get("headers").cloned().unwrap_or(json!({}))})
            }
            Some("local") => {
                let command: Vec<Value> = s["command"].as_array().cloned().unwrap_or_default();
                json!({
                    "type": "stdio",
                    "command": command.first().cloned().unwrap_or(Value::Null),
                    "args": command.get(1..).map(|a| a.to_vec()).unwrap_or_default(),
                    "env": s.get("environment").cloned().unwrap_or(json!({})),
                })
            }
            _ => continue,
        };
        servers.insert(name.clone(), server);
    }
    json!({"mcpServers": servers})
}

/// The agent: how to start a turn, the conversation to resume, the turn's process.
pub struct ClaudeAgent {
    binary: PathBuf,
    directory: PathBuf,
    state_dir: PathBuf,
    default_model: Option<String>,
    base_url: Option<String>,
    /// The key for `base_url` when the sandbox has no `ANTHROPIC_API_KEY` of its own.
    api_key: Option<String>,
    extra_env: Vec<(String, String)>,
    bin_dir: Option<PathBuf>,
    instructions: Option<String>,
    mcp: bool,
    conversation: Arc<Mutex<Option<String>>>,
    /// The running turn's process group.
    running: Arc<Mutex<Option<i32>>>,
    tx: Mutex<Option<mpsc::UnboundedSender<Value>>>,
}

impl ClaudeAgent {
    /// Prepares the agent's state (its HOME, the skills where Claude Code reads them, the
    /// MCP servers); nothing runs until a prompt.
    pub fn spawn(
        cfg: &AgentConfig,
        binary: PathBuf,
        base_url: Option<String>,
    ) -> Result<ClaudeAgent> {
        let st = &cfg.state_dir;
        for d in ["home/.claude", "tmp"] {
            std::fs::create_dir_all(st.join(d))?;
        }
        let skills = super::agent::skills_dir(st);
        let link = st.join("home/.claude/skills");
        if skills.is_dir() && !link.exists() {
            std::os::unix::fs::symlink(&skills, &link).context("linking the skills")?;
        }
        let mcp = !cfg.mcp.is_empty();
        if mcp {
            std::fs::write(st.join("mcp.json"), mcp_config(&cfg.mcp).to_string())?;
        }
        let instructions = cfg
            .instructions
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok());
        Ok(ClaudeAgent {
            binary,
            directory: cfg.directory.clone(),
            state_dir: st.clone(),
            default_model: cfg.default_model.clone(),
            api_key: cfg.api_key.clone(),
            base_url,
            extra_env: cfg.extra_env.clone(),
            bin_dir: cfg.bin_dir.clone(),
            instructions,
            mcp,
            conversation: Arc::default(),
            running: Arc::default(),
            tx: Mutex::new(None),
        })
    }

    /// The binary answers (`claude --version`).
    pub async fn ready(&mut self) -> Result<()> {
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            Command::new(&self.binary).arg("--version").output(),
        )
        .await
        .context("claude --version did not answer in 60 s")?
        .with_context(|| format!("starting {}", self.binary.display()))?;
        if !out.status.success() {
            bail!(
                "claude --version failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        tracing::info!(version = %String::from_utf8_lossy(&out.stdout).trim(), "Claude Code is ready");
        Ok(())
    }

    /// Where a turn's lines go.
    pub fn stream_events(&self, tx: mpsc::UnboundedSender<Value>) -> tokio::task::JoinHandle<()> {
        if let Ok(mut held) = self.tx.lock() {
            *held = Some(tx);
        }
        tokio::spawn(async {})
    }

    /// Starts a turn: `claude -p` in the workspace, its lines read into the channel, its
    /// end said with [`EXIT_EVENT`].
    pub async fn prompt(
        &self,
        text: &str,
        model: Option<&str>,
        effort: Option<&str>,
    ) -> Result<()> {
        let tx = self
            .tx
            .lock()
            .ok()
            .and_then(|t| t.clone())
            .context("the agent's events are not being read")?;
        let st = &self.state_dir;
        let mut cmd = Command::new(&self.binary);
        let conversation = self.conversation.lock().ok().and_then(|c| c.clone());
        let mcp = self.mcp.then(|| st.join("mcp.json").display().to_string());
        cmd.args(prompt_args(&Turn {
            text,
            model: model.or(self.default_model.as_deref()),
            effort,
            resume: conversation.as_deref(),
            instructions: self.instructions.as_deref(),
            mcp_config: mcp.as_deref(),
        }));
        cmd.current_dir(if self.directory.is_dir() {
            &self.directory
        } else {
            st
        })
        .env("HOME", st.join("home"))
        .env("TMPDIR", st.join("tmp"))
        .env_remove("INSPECT_SANDBOX_TOKEN")
        // Claude Code runs as root only when told it is in a sandbox.
        .env("IS_SANDBOX", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .envs(self.extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(st.join("claude.log"))?)
        .process_group(0)
        .kill_on_drop(true);
        if let Some(url) = &self.base_url {
            cmd.env("ANTHROPIC_BASE_URL", url);
            let given = self.extra_env.iter().any(|(k, _)| k == "ANTHROPIC_API_KEY");
            if !given && std::env::var_os("ANTHROPIC_API_KEY").is_none() {
                cmd.env(
                    "ANTHROPIC_API_KEY",
                    self.api_key.as_deref().unwrap_or("none"),
                );
            }
        }
        // Older models take the effort as a thinking budget; current ones as `--effort`.
        match effort.and_then(thinking_tokens) {
            Some(n) => cmd.env("MAX_THINKING_TOKENS", n.to_string()),
            None => cmd.env_remove("MAX_THINKING_TOKENS"),
        };
        if let Some(bin) = &self.bin_dir {
            let path = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{path}", bin.display()));
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        let stdout = child.stdout.take().context("no stdout from claude")?;
        if let (Some(pid), Ok(mut running)) = (child.id(), self.running.lock()) {
            *running = Some(pid as i32);
        }
        let (conversation, running) = (Arc::clone(&self.conversation), Arc::clone(&self.running));
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if v["type"] == "system" {
                    if let (Some(id), Ok(mut c)) = (v["session_id"].as_str(), conversation.lock()) {
                        *c = Some(id.to_owned());
                    }
                }
                if tx.send(v).is_err() {
                    break;
                }
            }
            let status = child.wait().await.ok();
            if let Ok(mut r) = running.lock() {
                *r = None;
            }
            let _ = tx.send(json!({"type": EXIT_EVENT, "code": status.and_then(|s| s.code())}));
        });
        Ok(())
    }

    /// Ends the running turn's process group (the tools it started with it).
    pub async fn abort(&self) -> Result<()> {
        let Some(pgid) = self.running.lock().ok().and_then(|r| *r) else {
            return Ok(());
        };
        let group = nix::unistd::Pid::from_raw(pgid);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn events(m: &mut ClaudeMapper, lines: &[Value]) -> Vec<(SandboxEvent, TurnSignal)> {
        lines
            .iter()
            .flat_map(|l| {
                let (out, signal) = m.on_event(l);
                let n = out.len();
                out.into_iter()
                    .enumerate()
                    .map(move |(i, e)| {
                        (
                            e,
                            if i + 1 == n {
                                signal_copy(&signal)
                            } else {
                                TurnSignal::Continue
                            },
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn signal_copy(s: &TurnSignal) -> TurnSignal {
        match s {
            TurnSignal::Idle => TurnSignal::Idle,
            _ => TurnSignal::Continue,
        }
    }

    #[test]
    fn a_turn_of_stream_json_becomes_tokens_tool_calls_and_an_outcome() {
        let mut m = ClaudeMapper::new("msg1");
        let lines = [
            json!({"type": "system", "subtype": "init", "session_id": "c-1"}),
            json!({"type": "assistant", "message": {"id": "a1", "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "t1", "name": "Write", "input": {"file_path": "src/a.rs", "content": "x"}}]}}),
            json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "written"}]}]}}),
            json!({"type": "assistant", "message": {"id": "a2", "content": [{"type": "text", "text": "Done."}]}}),
            json!({"type": "result", "subtype": "success", "is_error": false, "result": "Done.", "total_cost_usd": 0.01, "usage": {"output_tokens": 5}}),
        ];
        let out = events(&mut m, &lines);
        assert_eq!(m.session_id.as_deref(), Some("c-1"));
        let kinds: Vec<&str> = out.iter().map(|(e, _)| e.kind()).collect();
        assert_eq!(
            kinds,
            ["token", "tool_call", "tool_call", "token", "step_finish"]
        );
        match &out[2].0 {
            SandboxEvent::ToolCall {
                tool,
                status,
                args,
                output,
                duration_ms,
                ..
            } => {
                assert_eq!(tool, "write");
                assert_eq!(status, "completed");
                assert_eq!(args["filePath"], "src/a.rs");
                assert_eq!(output.as_deref(), Some("written"));
                assert!(duration_ms.is_some());
            }
            other => panic!("{other:?}"),
        }
        let (_, signal) = m.on_event(&json!({"type": EXIT_EVENT, "code": 0}));
        assert_eq!(signal, TurnSignal::Idle);
        assert_eq!(m.outcome(), (true, None));
    }

    #[test]
    fn failures_and_silent_exits_are_said() {
        let mut m = ClaudeMapper::new("msg1");
        m.on_event(&json!({"type": "result", "subtype": "error_max_turns", "is_error": true}));
        m.on_event(&json!({"type": EXIT_EVENT, "code": 1}));
        assert_eq!(
            m.outcome(),
            (false, Some("Claude Code: error_max_turns".into()))
        );
        let mut m = ClaudeMapper::new("msg2");
        m.on_event(&json!({"type": EXIT_EVENT, "code": null}));
        assert!(m
            .outcome()
            .1
            .unwrap()
            .contains("without an answer (a signal)"));
        let failed = json!({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x", "is_error": true}]}});
        let mut m = ClaudeMapper::new("msg3");
        m.on_event(&json!({"type": "assistant", "message": {"id": "a", "content": [{"type": "tool_use", "id": "t9", "name": "Bash", "input": {"command": "false"}}]}}));
        let (out, _) = m.on_event(&failed);
        assert!(
            matches!(&out[0], SandboxEvent::ToolCall { status, tool, .. } if status == "error" && tool == "bash")
        );
    }

    #[test]
    fn a_prompt_that_starts_with_a_dash_is_text() {
        let a = prompt_args(&Turn {
            text: "- fix the footer",
            model: Some("anthropic/claude-opus-4-7"),
            effort: Some("low"),
            resume: Some("c1"),
            instructions: None,
            mcp_config: None,
        });
        let n = a.len();
        assert_eq!(
            (a[n - 2].as_str(), a[n - 1].as_str()),
            ("--", "- fix the footer")
        );
        let at = a.iter().position(|x| x == "--effort").unwrap();
        assert_eq!(a[at + 1], "low", "the chosen effort, not Claude Code's own");
        assert!(a.windows(2).any(|w| w == ["--model", "claude-opus-4-7"]));
        let none = prompt_args(&Turn {
            text: "x",
            model: None,
            effort: Some("none"),
            resume: None,
            instructions: None,
            mcp_config: None,
        });
        assert!(!none.contains(&"--effort".to_string()));
    }

    #[test]
    fn every_text_block_of_a_message_is_kept() {
        // Claude Code's stream-json: one line per content block, the same message id.
        let mut m = ClaudeMapper::new("msg");
        let (a, _) = m.on_event(&json!({"type": "assistant", "message": {"id": "m1", "content": [{"type": "text", "text": "First."}]}}));
        let (b, _) = m.on_event(&json!({"type": "assistant", "message": {"id": "m1", "content": [{"type": "text", "text": "Second."}]}}));
        let (again, _) = m.on_event(&json!({"type": "assistant", "message": {"id": "m1", "content": [{"type": "text", "text": "Second."}]}}));
        let parts: Vec<(Option<String>, String)> = a
            .into_iter()
            .chain(b)
            .chain(again)
            .filter_map(|e| match e {
                SandboxEvent::Token {
                    part_id, content, ..
                } => Some((part_id, content)),
                _ => None,
            })
            .collect();
        assert_eq!(
            parts,
            vec![
                (Some("m1:0".into()), "First.".into()),
                (Some("m1:1".into()), "Second.".into())
            ]
        );
    }

    #[test]
    fn models_efforts_and_mcp_servers_in_claude_code_terms() {
        assert_eq!(
            model_name("anthropic/claude-sonnet-4-5"),
            "claude-sonnet-4-5"
        );
        assert_eq!(model_name("fake-model"), "fake-model");
        assert_eq!(thinking_tokens("high"), Some(32_000));
        assert_eq!(thinking_tokens("none"), None);
        let mut oc = Map::new();
        oc.insert("docs".into(), json!({"type": "remote", "url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer x"}}));
        oc.insert("files".into(), json!({"type": "local", "command": ["npx", "server", "--root", "."], "environment": {"A": "b"}}));
        let c = mcp_config(&oc);
        assert_eq!(c["mcpServers"]["docs"]["type"], "http");
        assert_eq!(c["mcpServers"]["files"]["command"], "npx");
        assert_eq!(c["mcpServers"]["files"]["args"][2], ".");
    }
}
