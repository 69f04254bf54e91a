//! OpenCode as the sandbox's agent: `opencode serve` on loopback with a password, its
//! configuration and offline flags, driven over HTTP, its events read over SSE.

use anyhow::{bail, Context, Result};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

pub struct AgentConfig {
    pub binary: PathBuf,
    /// Where the agent works (the primary repository, or the workspace).
    pub directory: PathBuf,
    /// Its own state: HOME, XDG folders, TMPDIR.
    pub state_dir: PathBuf,
    /// `provider/model` used when a prompt names none.
    pub default_model: Option<String>,
    /// An OpenAI-compatible endpoint (a local model server, or a fake in tests).
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// Variables the agent's environment gets (the agent API's address and key).
    pub extra_env: Vec<(String, String)>,
    /// A folder put first on the agent's PATH (the `open-inspect` command).
    pub bin_dir: Option<PathBuf>,
    /// Instructions the agent reads with every prompt.
    pub instructions: Option<PathBuf>,
    /// The compatible server's other models a prompt may switch to (each with its efforts).
    pub models: Vec<inspect_protocol::models::ModelInfo>,
    /// OpenCode's `mcp` configuration (the session's MCP servers, resolved).
    pub mcp: serde_json::Map<String, Value>,
    /// Providers whose calls go through the sandbox's brokered-access proxy: `(provider,
    /// proxy URL)`.
    pub provider_urls: Vec<(String, String)>,
}

pub struct Agent {
    pub base: String,
    password: String,
    pub session_id: String,
    pub directory: PathBuf,
    http: reqwest::Client,
    child: Child,
    pub default_model: Option<String>,
    /// Where its output goes (`<state>/opencode.log`).
    log: PathBuf,
}

/// How a start-up that ended before the agent answered is said (the caller may try once
/// more: a process of the sandbox's last life may still be letting go of the state).
pub const EXITED_DURING_START_UP: &str = "the agent exited during start-up";

/// A loopback port nothing listens on now.
pub(crate) fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Where the session's managed skills are installed, in the agent's state.
pub fn skills_dir(state_dir: &std::path::Path) -> PathBuf {
    state_dir.join("skills")
}

/// The configuration OpenCode reads from `OPENCODE_CONFIG_CONTENT`.
pub fn opencode_config(cfg: &AgentConfig) -> Value {
    let mut config = json!({
        "autoupdate": false,
        "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "allow"},
        "lsp": false,
        "formatter": false,
        // OpenCode's own undo snapshots: a second git database of the workspace, written
        // before and after every model step (a whole `git add` of a large repository the
        // first time). The supervisor commits each prompt's work itself; nothing reads them.
        "snapshot": false,
    });
    if let Some(path) = &cfg.instructions {
        config["instructions"] = json!([path.display().to_string()]);
    }
    if !cfg.mcp.is_empty() {
        config["mcp"] = Value::Object(cfg.mcp.clone());
    }
    // The session's managed skills, installed in the agent's own state.
    let skills = skills_dir(&cfg.state_dir);
    if skills.is_dir() {
        config["skills"] = json!({"paths": [skills.display().to_string()]});
    }
    // A brokered provider's SDK calls the proxy (its key is the marker in the environment).
    for (provider, url) in &cfg.provider_urls {
        config["provider"][provider.as_str()]["options"]["baseURL"] = json!(format!("{url}/v1"));
    }
    if let Some(model) = &cfg.default_model {
        config["model"] = json!(model);
        config["small_model"] = json!(model);
    }
    if let Some(url) = &cfg.base_url {
        let (provider, model) = cfg
            .default_model
            .as_deref()
            .and_then(|m| m.split_once('/'))
            .unwrap_or(("inspect", "default"));
        config["enabled_providers"] = json!([provider]);
        config["provider"] = json!({
            provider: {
                "npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": url, "apiKey": cfg.api_key.clone().unwrap_or_else(|| "none".into())},
                "models": served_models(provider, model, &cfg.models),
            }
        });
    }
    config
}

/// The models the compatible server serves, as OpenCode's provider configuration: the
/// default one and the catalog's others of the same provider. The reasoning efforts a person
/// may pick are OpenCode's variants of each: each sends `reasoning_effort` to the server.
fn served_models(
    provider: &str,
    default: &str,
    catalog: &[inspect_protocol::models::ModelInfo],
) -> Value {
    let entry = |context: u32, efforts: &[String]| {
        let variants: serde_json::Map<String, Value> = efforts
            .iter()
            .map(|e| (e.clone(), json!({"reasoningEffort": e})))
            .collect();
        json!({
            "tool_call": true,
            "reasoning": !efforts.is_empty(),
            "limit": {"context": context, "output": 4096},
            "variants": variants,
        })
    };
    let mut models = serde_json::Map::new();
    let usual: Vec<String> = ["low", "medium", "high"].map(String::from).to_vec();
    models.insert(default.to_owned(), entry(128_000, &usual));
    for m in catalog {
        if let Some(name) =
            m.id.strip_prefix(provider)
                .and_then(|r| r.strip_prefix('/'))
        {
            models.insert(name.to_owned(), entry(m.context, &m.efforts));
        }
    }
    Value::Object(models)
}

/// OpenCode runs `npm install @opencode-ai/plugin` in the background in each config folder
/// that does not already list it (for plugins kept there: this project gives none). In a
/// fresh sandbox that is a download from the registry and ~95 MB written at every start,
/// and 3–5 s of CPU (measured: 1.7 s for the whole start with the folder settled, 5–6.7 s
/// without). A folder whose `package.json` and `package-lock.json` list the package, with
/// an empty `node_modules/`, is left alone (OPENCODE.md). What is there already is kept.
fn settle_plugin_folder(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("node_modules"))?;
    let wanted = json!({"@opencode-ai/plugin": "*"});
    let package = dir.join("package.json");
    if !package.exists() {
        std::fs::write(&package, json!({"dependencies": wanted}).to_string())?;
    }
    let lock = dir.join("package-lock.json");
    if !lock.exists() {
        let body = json!({
            "name": "opencode",
            "lockfileVersion": 3,
            "requires": true,
            "packages": {"": {"dependencies": wanted}},
        });
        std::fs::write(&lock, body.to_string())?;
    }
    Ok(())
}

impl Agent {
    /// Starts the agent's process only (it takes about 2 s to answer), so the workspace
    /// can be prepared meanwhile; [`Agent::ready`] waits for it. `cfg.directory` need not
    /// exist yet: the process then starts in its own state directory (never above the
    /// workspace, which it would watch whole), and every call names the directory.
    pub fn spawn(cfg: &AgentConfig) -> Result<Agent> {
        let port = free_port()?;
        let mut pw = [0u8; 24];
        let _ = getrandom::fill(&mut pw);
        let password = hex::encode(pw);
        let st = &cfg.state_dir;
        for d in ["home", "config", "data", "cache", "state", "tmp"] {
            std::fs::create_dir_all(st.join(d))?;
        }
        settle_plugin_folder(&st.join("config/opencode"))?;
        let log = std::fs::File::create(st.join("opencode.log"))?;
        let mut cmd = Command::new(&cfg.binary);
        cmd.args([
            "serve",
            "--port",
            &port.to_string(),
            "--hostname",
            "127.0.0.1",
        ])
        .current_dir(if cfg.directory.is_dir() {
            &cfg.directory
        } else {
            st
        })
        .env("HOME", st.join("home"))
        .env("XDG_CONFIG_HOME", st.join("config"))
        .env("XDG_DATA_HOME", st.join("data"))
        .env("XDG_CACHE_HOME", st.join("cache"))
        .env("XDG_STATE_HOME", st.join("state"))
        .env("TMPDIR", st.join("tmp"))
        .env_remove("INSPECT_SANDBOX_TOKEN")
        .env("OPENCODE_CONFIG_CONTENT", opencode_config(cfg).to_string())
        .env("OPENCODE_SERVER_PASSWORD", &password)
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
        .env("OPENCODE_DISABLE_EXTERNAL_SKILLS", "1")
        .env("OPENCODE_DISABLE_CLAUDE_CODE", "1")
        .envs(cfg.extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true);
        if let Some(bin) = &cfg.bin_dir {
            let path = std::env::var("PATH").unwrap_or_default();
            cmd.env("PATH", format!("{}:{path}", bin.display()));
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", cfg.binary.display()))?;
        // Calls are bounded; the event stream (its own client) is not.
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let base = format!("http://127.0.0.1:{port}");
        Ok(Agent {
            base,
            password,
            session_id: String::new(),
            directory: cfg.directory.clone(),
            http,
            child,
            default_model: cfg.default_model.clone(),
            log: st.join("opencode.log"),
        })
    }

    /// Waits until the spawned agent answers, then opens its session in the directory.
    pub async fn ready(&mut self) -> Result<()> {
        self.wait_healthy(Duration::from_secs(60)).await?;
        let session: Value = self
            .post("/session", json!({"title": "Open-Inspect session"}))
            .await?
            .json()
            .await?;
        self.session_id = session["id"]
            .as_str()
            .context("no session id from the agent")?
            .to_owned();
        Ok(())
    }

    /// Asks the agent for what its first prompt would otherwise load on the way: its
    /// providers and models, the project's file services (the watcher, the project's
    /// index) and its MCP servers' connections. That is about 1.3 s of a fresh process's work; done while the workspace's
    /// hooks still run, the first turn starts at once. Nothing waits for it: a prompt that
    /// arrives meanwhile waits inside the agent for the same loading, as it would anyway.
    pub fn warm_up(&self) -> tokio::task::JoinHandle<()> {
        let (http, base, password) = (self.http.clone(), self.base.clone(), self.password.clone());
        let directory = self.directory.to_string_lossy().into_owned();
        tokio::spawn(async move {
            let started = Instant::now();
            for (path, query) in [
                ("/provider", None),
                ("/file", Some(("path", "."))),
                // Its MCP servers connected (the agent's browser at least).
                ("/mcp", None),
            ] {
                let mut req = http
                    .get(format!("{base}{path}"))
                    .query(&[("directory", directory.as_str())])
                    .basic_auth("opencode", Some(&password));
                if let Some(q) = query {
                    req = req.query(&[q]);
                }
                if let Err(e) = req.send().await.and_then(|r| r.error_for_status()) {
                    tracing::debug!("warming the agent up ({path}): {e}");
                }
            }
            tracing::info!(ms = started.elapsed().as_millis() as u64, "agent warmed up");
        })
    }

    async fn wait_healthy(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                let said = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: String = {
                    let chars: Vec<char> = said.trim().chars().collect();
                    chars[chars.len().saturating_sub(600)..].iter().collect()
                };
                bail!("{EXITED_DURING_START_UP} ({status}): {tail}");
            }
            // A request that arrives while the server is still starting may never be answered:
            // poll with short timeouts.
            let ok = self
                .http
                .get(format!("{}/global/health", self.base))
                .timeout(Duration::from_millis(250))
                .basic_auth("opencode", Some(&self.password))
                .send()
                .await
                .map(|r| r.status().is_success())
                .unwrap_or(false);
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the agent did not become healthy in {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn post(&self, path: &str, body: Value) -> Result<reqwest::Response> {
        let r = self
            .http
            .post(format!("{}{}", self.base, path))
            .query(&[("directory", self.directory.to_string_lossy())])
            .basic_auth("opencode", Some(&self.password))
            .json(&body)
            .send()
            .await?;
        if !r.status().is_success() {
            bail!(
                "agent answered {} to {path}: {}",
                r.status(),
                r.text().await.unwrap_or_default()
            );
        }
        Ok(r)
    }

    /// Sends a prompt; results arrive on the event stream.
    /// Sends a prompt; `effort` (the reasoning effort a person picked) goes as the model's
    /// variant of that name.
    pub async fn prompt(
        &self,
        text: &str,
        model: Option<&str>,
        effort: Option<&str>,
    ) -> Result<()> {
        let mut body = json!({"parts": [{"type": "text", "text": text}]});
        if let Some(effort) = effort.filter(|e| !e.is_empty()) {
            body["variant"] = json!(effort);
        }
        if let Some((provider, model)) = model
            .or(self.default_model.as_deref())
            .and_then(|m| m.split_once('/'))
        {
            body["model"] = json!({"providerID": provider, "modelID": model});
        }
        self.post(&format!("/session/{}/prompt_async", self.session_id), body)
            .await?;
        Ok(())
    }

    pub async fn abort(&self) -> Result<()> {
        self.post(&format!("/session/{}/abort", self.session_id), json!({}))
            .await?;
        Ok(())
    }

    pub async fn answer_permission(&self, id: &str) -> Result<()> {
        self.post(&format!("/permission/{id}/reply"), json!({"reply": "once"}))
            .await?;
        Ok(())
    }

    /// How the agent's MCP servers are (`GET /mcp`: each connected, or failed and why).
    pub async fn mcp_status(&self) -> Result<Value> {
        let r = self
            .http
            .get(format!("{}/mcp", self.base))
            .query(&[("directory", self.directory.to_string_lossy())])
            .basic_auth("opencode", Some(&self.password))
            .timeout(Duration::from_secs(30))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("the agent answered {}", r.status());
        }
        Ok(r.json().await?)
    }

    /// The session's messages, to recover a turn's end when the stream was lost.
    pub async fn messages(&self) -> Result<Value> {
        let r = self
            .http
            .get(format!("{}/session/{}/message", self.base, self.session_id))
            .query(&[("directory", self.directory.to_string_lossy())])
            .basic_auth("opencode", Some(&self.password))
            .send()
            .await?;
        Ok(r.json().await?)
    }

    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Reads the event stream into `tx`, reconnecting while the agent lives.
    pub fn stream_events(&self, tx: mpsc::UnboundedSender<Value>) -> tokio::task::JoinHandle<()> {
        let url = format!("{}/event", self.base);
        let directory = self.directory.to_string_lossy().into_owned();
        let http = reqwest::Client::new();
        let password = self.password.clone();
        let span = tracing::Span::current();
        tokio::spawn(tracing::Instrument::instrument(
            async move {
                loop {
                    let resp = http
                        .get(&url)
                        .query(&[("directory", directory.as_str())])
                        .basic_auth("opencode", Some(&password))
                        .send()
                        .await;
                    match resp {
                        Ok(r) if r.status().is_success() => {
                            let mut stream = r.bytes_stream().eventsource();
                            while let Some(item) = stream.next().await {
                                match item {
                                    Ok(ev) => {
                                        if let Ok(v) = serde_json::from_str::<Value>(&ev.data) {
                                            if tx.send(v).is_err() {
                                                return;
                                            }
                                        }
                                    }
                                    Err(e) => {
                                        tracing::warn!("agent event stream broke: {e}");
                                        break;
                                    }
                                }
                            }
                            // Tell the turn logic the stream was lost, so it can recover.
                            if tx.send(json!({"type": "inspect.stream_lost"})).is_err() {
                                return;
                            }
                        }
                        Ok(r) => tracing::warn!("agent event stream answered {}", r.status()),
                        Err(e) => tracing::warn!("agent event stream: {e}"),
                    }
                    if tx.is_closed() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            },
            span,
        ))
    }
}

/// Whether the last assistant message in `messages` finished, and its error if any.
pub fn last_turn_state(messages: &Value) -> Option<(bool, Option<String>)> {
    let last = messages
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["info"]["role"] == "assistant")?;
    let info = &last["info"];
    let finished = info["time"].get("completed").is_some_and(|c| !c.is_null());
    let error = info
        .get("error")
        .filter(|e| !e.is_null())
        .map(|e| e["name"].as_str().unwrap_or("error").to_owned());
    Some((finished, error))
}
