//! The agent's browser: one Chromium the agent drives for as long as it works (opened on
//! its first use, kept between actions so a form filled stays filled), through the
//! DevTools protocol: open a page, click, type, press keys, wait for text or an element,
//! read what the page shows (its accessibility tree, as a person with a screen reader
//! would hear it) and what went wrong in it (console errors, uncaught exceptions), and
//! photograph it. `browser_mcp.rs` offers these to the agent as MCP tools.
//!
//! Headless, unless the sandbox's desktop is open: then the window is on its display and
//! the people watching the desktop see the agent work.

use super::screenshot::{browser_and_folder, QUIET};
use anyhow::{anyhow, bail, Context, Result};
use futures::stream::SplitSink;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The window's size.
pub const WIDTH: u32 = 1280;
pub const HEIGHT: u32 = 800;
/// How long an action waits by default (an element, a text), and at most (an MCP
/// client gives up on a call after 60 s).
pub const DEFAULT_WAIT_SECS: u64 = 10;
pub const MAX_WAIT_SECS: u64 = 50;
/// How long a page has to load by default.
pub const DEFAULT_LOAD_SECS: u64 = 30;
/// What a read gives back at most (characters); the rest is cut, and said so.
pub const MAX_READ_CHARS: usize = 20_000;
/// Console errors kept between two reads at most (the oldest go first).
const MAX_CONSOLE: usize = 50;
/// One DevTools call's answer is waited for this long.
const CALL_SECS: u64 = 30;

type Sink = SplitSink<WebSocketStream<MaybeTlsStream<TcpStream>>, Message>;
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value>>>>>;
/// Where the page's events go besides the console, once someone listens.
type Tap = Arc<Mutex<Option<tokio::sync::mpsc::UnboundedSender<Value>>>>;

/// One page of one Chromium, driven.
pub struct Browser {
    sink: tokio::sync::Mutex<Sink>,
    pending: Pending,
    next: AtomicU64,
    console: Arc<Mutex<Vec<String>>>,
    tap: Tap,
    reader: tokio::task::JoinHandle<()>,
    child: tokio::process::Child,
    _dir: tempfile::TempDir,
    /// The desktop's display the window is on; none: headless.
    pub display: Option<String>,
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.reader.abort();
        let _ = self.child.start_kill();
    }
}

impl Browser {
    /// Starts Chromium (its files under `scratch` when no shorter place is writable), on
    /// the desktop's `display` or headless, and attaches to its page.
    pub async fn launch(scratch: &std::path::Path, display: Option<&str>) -> Result<Browser> {
        Self::launch_sized(scratch, display, WIDTH, HEIGHT).await
    }

    /// [`Browser::launch`] with a window of `width` × `height`.
    pub async fn launch_sized(
        scratch: &std::path::Path,
        display: Option<&str>,
        width: u32,
        height: u32,
    ) -> Result<Browser> {
        let (mut child, dir, profile) = start_devtools(scratch, width, height, display)?;
        let socket =
            match tokio::time::timeout(Duration::from_secs(30), page_socket(&profile)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    let _ = child.kill().await;
                    return Err(e);
                }
                Err(_) => {
                    let _ = child.kill().await;
                    bail!("Chromium did not start within 30 s");
                }
            };
        let (ws, _) = tokio_tungstenite::connect_async(&socket)
            .await
            .context("attaching to Chromium's page")?;
        let (sink, mut stream) = ws.split();
        let pending: Pending = Arc::default();
        let console: Arc<Mutex<Vec<String>>> = Arc::default();
        let tap: Tap = Arc::default();
        let reader = {
            let (pending, console, tap) = (pending.clone(), console.clone(), tap.clone());
            tokio::spawn(async move {
                while let Some(Ok(msg)) = stream.next().await {
                    let Message::Text(text) = msg else { continue };
                    let Ok(v) = serde_json::from_str::<Value>(&text) else {
                        continue;
                    };
                    if let Some(id) = v["id"].as_u64() {
                        let answer = match v.get("error") {
                            Some(e) => Err(anyhow!(
                                "{}",
                                e["message"].as_str().unwrap_or("the browser refused")
                            )),
                            None => Ok(v["result"].clone()),
                        };
                        if let Some(tx) = lock(&pending).remove(&id) {
                            let _ = tx.send(answer);
                        }
                    } else {
                        if let Some(line) = console_error(&v) {
                            let mut kept = lock(&console);
                            if kept.len() >= MAX_CONSOLE {
                                kept.remove(0);
                            }
                            kept.push(line);
                        }
                        if let Some(tx) = lock(&tap).as_ref() {
                            let _ = tx.send(v);
                        }
                    }
                }
                // The page is gone: every caller still waiting hears it.
                for (_, tx) in lock(&pending).drain() {
                    let _ = tx.send(Err(anyhow!("the browser closed")));
                }
            })
        };
        let browser = Browser {
            sink: tokio::sync::Mutex::new(sink),
            pending,
            next: AtomicU64::new(1),
            console,
            tap,
            reader,
            child,
            _dir: dir,
            display: display.map(str::to_owned),
        };
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            browser.call(domain, json!({})).await?;
        }
        browser
            .call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
            )
            .await?;
        Ok(browser)
    }

    /// The page's events (DevTools messages without an id) from now on; a second call
    /// takes them from the first.
    pub fn events(&self) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        *lock(&self.tap) = Some(tx);
        rx
    }

    /// Whether the browser still runs (a crash is met by a new one on the next action).
    pub fn alive(&mut self) -> bool {
        !self.reader.is_finished() && matches!(self.child.try_wait(), Ok(None))
    }

    /// One DevTools call and its result.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        if let Err(e) = self.sink.lock().await.send(Message::text(msg)).await {
            lock(&self.pending).remove(&id);
            bail!("the browser closed: {e}");
        }
        match tokio::time::timeout(Duration::from_secs(CALL_SECS), rx).await {
            Ok(Ok(answer)) => answer.with_context(|| method.to_string()),
            Ok(Err(_)) => bail!("the browser closed"),
            Err(_) => {
                lock(&self.pending).remove(&id);
                bail!("the browser did not answer {method} within {CALL_SECS} s")
            }
        }
    }

    /// Runs `expression` in the page; its value (JSON), or the exception it threw.
    pub async fn eval(&self, expression: &str) -> Result<Value> {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        if let Some(ex) = r.get("exceptionDetails") {
            let what = ex["exception"]["description"]
                .as_str()
                .or(ex["text"].as_str())
                .unwrap_or("an exception");
            bail!("the page threw: {}", first_line(what));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Opens `url` and waits until it has loaded.
    pub async fn open(&self, url: &str, wait_secs: u64) -> Result<()> {
        let by = Instant::now() + Duration::from_secs(wait_secs);
        let late = || anyhow!("{url} did not load within {wait_secs} s");
        // A server that takes the connection and never answers holds the navigation itself.
        let navigated =
            tokio::time::timeout_at(by.into(), self.call("Page.navigate", json!({"url": url})))
                .await;
        let r = match navigated {
            Ok(r) => r?,
            Err(_) => {
                let _ = self.call("Page.stopLoading", json!({})).await;
                return Err(late());
            }
        };
        if let Some(err) = r["errorText"].as_str().filter(|e| !e.is_empty()) {
            bail!("{url} could not be opened: {err}");
        }
        let left = by
            .saturating_duration_since(Instant::now())
            .as_secs()
            .max(1);
        match self.settle(left).await {
            Ok(()) => Ok(()),
            Err(_) => {
                let _ = self.call("Page.stopLoading", json!({})).await;
                Err(late())
            }
        }
    }

    /// Waits until the document has loaded (after a navigation a click may have started).
    async fn settle(&self, wait_secs: u64) -> Result<()> {
        let by = Instant::now() + Duration::from_secs(wait_secs);
        loop {
            if self.eval("document.readyState").await.ok() == Some(json!("complete")) {
                return Ok(());
            }
            if Instant::now() >= by {
                bail!("not loaded");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `what` is on the page (visible), up to `wait_secs`.
    pub async fn wait_for(&self, what: &Target, wait_secs: u64) -> Result<()> {
        let by = Instant::now() + Duration::from_secs(wait_secs);
        let probe = what.probe();
        loop {
            match self.eval(&probe).await {
                Ok(Value::Bool(true)) => return Ok(()),
                Err(e) if e.to_string().contains("the page threw") => {
                    bail!(
                        "{} is not a selector the page understands ({e:#})",
                        what.said()
                    )
                }
                Err(e) if e.to_string().contains("closed") => return Err(e),
                _ => {}
            }
            if Instant::now() >= by {
                let shows = self
                    .eval("document.body ? document.body.innerText : ''")
                    .await
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                bail!(
                    "{} did not appear within {wait_secs} s; the page shows: {}",
                    what.said(),
                    shortened(shows.trim(), 600)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the middle of the element `selector` names, as a mouse would, once it is
    /// there; then waits for a page the click opened.
    pub async fn click(&self, selector: &str, wait_secs: u64) -> Result<()> {
        let target = Target::Selector(selector.to_owned());
        self.wait_for(&target, wait_secs).await?;
        let at = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({s}); e.scrollIntoView({{block: 'center', inline: 'center'}}); const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()",
                s = js_string(selector)
            ))
            .await?;
        let (x, y) = (at[0].as_f64().unwrap_or(0.0), at[1].as_f64().unwrap_or(0.0));
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "buttons": if kind == "mousePressed" { 1 } else { 0 }, "clickCount": 1}),
            )
            .await?;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
        let _ = self.settle(wait_secs).await;
        Ok(())
    }

    /// Puts the text into the field `selector` names (what it held before is replaced
    /// unless `append`), as typing would: the page hears its input events.
    pub async fn type_text(
        &self,
        selector: &str,
        text: &str,
        append: bool,
        wait_secs: u64,
    ) -> Result<()> {
        let target = Target::Selector(selector.to_owned());
        self.wait_for(&target, wait_secs).await?;
        let focused = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({s}); e.scrollIntoView({{block: 'center'}}); e.focus(); if ({append}) {{ if (typeof e.setSelectionRange === 'function' && typeof e.value === 'string') {{ try {{ e.setSelectionRange(e.value.length, e.value.length); }} catch (_) {{}} }} }} else if (typeof e.select === 'function') {{ e.select(); }} else {{ document.execCommand('selectAll'); }} return document.activeElement === e || e.contains(document.activeElement); }})()",
                s = js_string(selector)
            ))
            .await?;
        if focused != Value::Bool(true) {
            bail!("{selector} cannot take text (it did not take the focus)");
        }
        self.call("Input.insertText", json!({"text": text})).await?;
        Ok(())
    }

    /// Presses a key (on whatever has the focus).
    pub async fn press(&self, key: &Key, wait_secs: u64) -> Result<()> {
        let mut down = json!({"type": if key.text.is_empty() { "rawKeyDown" } else { "keyDown" }, "key": key.key, "code": key.code, "windowsVirtualKeyCode": key.key_code, "nativeVirtualKeyCode": key.key_code});
        if !key.text.is_empty() {
            down["text"] = json!(key.text);
            down["unmodifiedText"] = json!(key.text);
        }
        self.call("Input.dispatchKeyEvent", down).await?;
        self.call(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key.key, "code": key.code, "windowsVirtualKeyCode": key.key_code, "nativeVirtualKeyCode": key.key_code}),
        )
        .await?;
        tokio::time::sleep(Duration::from_millis(150)).await;
        let _ = self.settle(wait_secs).await;
        Ok(())
    }

    /// What the page shows: its title, address and accessibility tree (or one element's
    /// text), and the console errors since the last read.
    pub async fn read(&self, selector: Option<&str>) -> Result<String> {
        let title = self.eval("document.title").await.unwrap_or_default();
        let url = self.eval("location.href").await.unwrap_or_default();
        let body = match selector {
            Some(s) => {
                let v = self
                    .eval(&format!(
                        "(() => {{ const e = document.querySelector({}); return e ? e.innerText : null; }})()",
                        js_string(s)
                    ))
                    .await?;
                match v.as_str() {
                    Some(t) => t.to_owned(),
                    None => bail!("nothing on the page matches {s}"),
                }
            }
            None => {
                let tree = self.call("Accessibility.getFullAXTree", json!({})).await?;
                outline(tree["nodes"].as_array().map(Vec::as_slice).unwrap_or(&[]))
            }
        };
        let errors: Vec<String> = std::mem::take(&mut *lock(&self.console));
        Ok(report(
            title.as_str().unwrap_or_default(),
            url.as_str().unwrap_or_default(),
            &body,
            &errors,
        ))
    }

    /// The page as a PNG.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        self.capture(json!({"format": "png"})).await
    }

    /// The page as `Page.captureScreenshot` draws it with `params` (its format, quality).
    pub async fn capture(&self, params: Value) -> Result<Vec<u8>> {
        use base64::Engine;
        let r = self.call("Page.captureScreenshot", params).await?;
        base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap_or_default())
            .context("the screenshot's bytes")
    }
}

/// Starts Chromium on `about:blank` with its DevTools on a port it chooses (written into
/// the profile, see [`page_socket`]), headless or on a desktop's `display`; the process,
/// its folder (kept as long as it runs) and its profile.
fn start_devtools(
    scratch: &std::path::Path,
    width: u32,
    height: u32,
    display: Option<&str>,
) -> Result<(tokio::process::Child, tempfile::TempDir, std::path::PathBuf)> {
    let (binary, dir) = browser_and_folder(scratch)?;
    let profile = dir.path().join("profile");
    let mut cmd = tokio::process::Command::new(binary);
    match display {
        Some(display) => cmd.env("DISPLAY", display),
        None => cmd.env_remove("DISPLAY"),
    };
    let child = cmd
        .args(
            QUIET
                .iter()
                .filter(|a| display.is_none() || **a != "--headless"),
        )
        .arg("--remote-debugging-port=0")
        .arg("--remote-allow-origins=*")
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg("--window-position=0,0")
        .arg("about:blank")
        .env("HOME", dir.path())
        .env("TMPDIR", dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting Chromium")?;
    Ok((child, dir, profile))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The page's DevTools socket, once Chromium has written the port it chose into the
/// profile and opened its first page.
async fn page_socket(profile: &std::path::Path) -> Result<String> {
    let port_file = profile.join("DevToolsActivePort");
    let port = loop {
        if let Some(port) = std::fs::read_to_string(&port_file)
            .ok()
            .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<u16>().ok()))
        {
            break port;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    loop {
        let targets: Value = reqwest::get(format!("http://127.0.0.1:{port}/json/list"))
            .await?
            .json()
            .await?;
        if let Some(socket) = targets
            .as_array()
            .and_then(|list| list.iter().find(|t| t["type"] == "page"))
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
        {
            return Ok(socket.to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a wait is for: an element (a CSS selector) or a text on the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Selector(String),
    Text(String),
}

impl Target {
    /// The page-side test: true once it is there and visible.
    fn probe(&self) -> String {
        match self {
            Target::Selector(s) => format!(
                "(() => {{ const e = document.querySelector({}); if (!e) return false; const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; }})()",
                js_string(s)
            ),
            Target::Text(t) => format!(
                "!!document.body && document.body.innerText.includes({})",
                js_string(t)
            ),
        }
    }

    fn said(&self) -> String {
        match self {
            Target::Selector(s) => format!("the element {s}"),
            Target::Text(t) => format!("the text {t:?}"),
        }
    }
}

/// A string as a JavaScript literal (JSON's quoting is JavaScript's).
fn js_string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

/// At most `most` characters of `s`, with an ellipsis when cut.
fn shortened(s: &str, most: usize) -> String {
    match s.char_indices().nth(most) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// A console error or an uncaught exception from a DevTools event, as a line.
fn console_error(event: &Value) -> Option<String> {
    let p = &event["params"];
    match event["method"].as_str()? {
        "Runtime.consoleAPICalled" if p["type"] == "error" => {
            let parts: Vec<String> = p["args"]
                .as_array()?
                .iter()
                .map(|a| match &a["value"] {
                    Value::String(s) => s.clone(),
                    Value::Null => a["description"].as_str().unwrap_or("").to_owned(),
                    v => v.to_string(),
                })
                .collect();
            Some(format!("console.error: {}", parts.join(" ")))
        }
        "Runtime.exceptionThrown" => {
            let d = &p["exceptionDetails"];
            let what = d["exception"]["description"]
                .as_str()
                .or(d["text"].as_str())
                .unwrap_or("an exception");
            Some(format!("uncaught: {}", first_line(what)))
        }
        // The favicon a page never asked for is the browser's own request.
        "Log.entryAdded"
            if p["entry"]["level"] == "error"
                && !p["entry"]["url"]
                    .as_str()
                    .is_some_and(|u| u.ends_with("/favicon.ico")) =>
        {
            let e = &p["entry"];
            let url = e["url"].as_str().unwrap_or_default();
            Some(match url.is_empty() {
                true => format!(
                    "{}: {}",
                    e["source"].as_str().unwrap_or("log"),
                    e["text"].as_str().unwrap_or_default()
                ),
                false => format!(
                    "{}: {} ({url})",
                    e["source"].as_str().unwrap_or("log"),
                    e["text"].as_str().unwrap_or_default()
                ),
            })
        }
        _ => None,
    }
}

/// Roles that only group others: left out of the outline when they have no name.
const QUIET_ROLES: &[&str] = &[
    "generic",
    "none",
    "presentation",
    "InlineTextBox",
    "LineBreak",
    "RootWebArea",
    "WebArea",
    "paragraph",
    "group",
    "section",
    "div",
    "LayoutTable",
    "LayoutTableRow",
    "LayoutTableCell",
    "LabelText",
];

/// The accessibility tree (`Accessibility.getFullAXTree`'s nodes) as an indented outline:
/// one line a named or meaningful node, `role "name"` and its value or state.
pub fn outline(nodes: &[Value]) -> String {
    let by_id: HashMap<&str, &Value> = nodes
        .iter()
        .filter_map(|n| Some((n["nodeId"].as_str()?, n)))
        .collect();
    let root = nodes
        .iter()
        .find(|n| n.get("parentId").is_none_or(Value::is_null))
        .or(nodes.first());
    let mut out = Vec::new();
    let mut stack: Vec<(&Value, usize, [&str; 2])> =
        root.map(|r| (r, 0, ["", ""])).into_iter().collect();
    let mut seen = 0usize;
    while let Some((node, depth, parent_said)) = stack.pop() {
        seen += 1;
        if seen > 20_000 {
            break;
        }
        let role = node["role"]["value"].as_str().unwrap_or_default();
        let name = node["name"]["value"].as_str().unwrap_or_default().trim();
        let value = node["value"]["value"].as_str().unwrap_or_default();
        let ignored = node["ignored"].as_bool().unwrap_or(false);
        let says_nothing = name.is_empty() && (QUIET_ROLES.contains(&role) || role == "StaticText");
        // A static text that only repeats its parent's name or value says nothing new.
        let repeats = role == "StaticText" && parent_said.contains(&name);
        let shown = !(ignored || says_nothing || repeats || role == "InlineTextBox");
        let child_depth = if shown { depth + 1 } else { depth };
        if shown {
            let mut line = format!("{}{role}", "  ".repeat(depth));
            if !name.is_empty() {
                line.push_str(&format!(" {:?}", shortened(name, 300)));
            }
            if !value.is_empty() {
                line.push_str(&format!(" value={:?}", shortened(value, 300)));
            }
            for p in node["properties"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                let (pname, pv) = (p["name"].as_str().unwrap_or_default(), &p["value"]["value"]);
                match (pname, pv) {
                    ("checked" | "pressed" | "selected" | "expanded", Value::String(s))
                        if s != "false" =>
                    {
                        line.push_str(&format!(" {pname}={s}"))
                    }
                    (
                        "checked" | "pressed" | "selected" | "expanded" | "disabled" | "required"
                        | "invalid",
                        Value::Bool(true),
                    ) => line.push_str(&format!(" {pname}")),
                    ("invalid", Value::String(s)) if s != "false" => line.push_str(" invalid"),
                    ("level", Value::Number(n)) => line.push_str(&format!(" level={n}")),
                    _ => {}
                }
            }
            out.push(line);
        }
        if let Some(children) = node["childIds"].as_array() {
            for id in children.iter().rev() {
                if let Some(child) = id.as_str().and_then(|id| by_id.get(id)) {
                    stack.push((child, child_depth, [name, value]));
                }
            }
        }
    }
    out.join("\n")
}

/// What a read gives the agent, cut to [`MAX_READ_CHARS`].
pub fn report(title: &str, url: &str, body: &str, errors: &[String]) -> String {
    let mut out = format!("Page: {title}\nURL: {url}\n\n{}", body.trim());
    if errors.is_empty() {
        out.push_str("\n\nConsole errors: none");
    } else {
        out.push_str("\n\nConsole errors:\n");
        out.push_str(&errors.join("\n"));
    }
    if out.chars().count() > MAX_READ_CHARS {
        out = format!(
            "{}\n… (cut at {MAX_READ_CHARS} characters: read one part with a selector)",
            shortened(&out, MAX_READ_CHARS)
        );
    }
    out
}

/// A key as the DevTools protocol's key events name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub key: String,
    pub code: String,
    pub key_code: u32,
    /// What the key types ("" for one that types nothing).
    pub text: String,
}

/// A key by its name (`Enter`, `Tab`, `Escape`, `ArrowDown`, …) or a single character.
pub fn key(name: &str) -> Result<Key> {
    let named = |key: &str, code: &str, key_code: u32, text: &str| Key {
        key: key.into(),
        code: code.into(),
        key_code,
        text: text.into(),
    };
    Ok(match name {
        "Enter" | "Return" => named("Enter", "Enter", 13, "\r"),
        "Tab" => named("Tab", "Tab", 9, ""),
        "Escape" | "Esc" => named("Escape", "Escape", 27, ""),
        "Backspace" => named("Backspace", "Backspace", 8, ""),
        "Delete" => named("Delete", "Delete", 46, ""),
        "Space" | " " => named(" ", "Space", 32, " "),
        "ArrowLeft" => named("ArrowLeft", "ArrowLeft", 37, ""),
        "ArrowUp" => named("ArrowUp", "ArrowUp", 38, ""),
        "ArrowRight" => named("ArrowRight", "ArrowRight", 39, ""),
        "ArrowDown" => named("ArrowDown", "ArrowDown", 40, ""),
        "Home" => named("Home", "Home", 36, ""),
        "End" => named("End", "End", 35, ""),
        "PageUp" => named("PageUp", "PageUp", 33, ""),
        "PageDown" => named("PageDown", "PageDown", 34, ""),
        other => {
            let mut chars = other.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) if !c.is_control() => {
                    let upper = c.to_ascii_uppercase();
                    let code = match c {
                        'a'..='z' | 'A'..='Z' => format!("Key{upper}"),
                        '0'..='9' => format!("Digit{c}"),
                        _ => String::new(),
                    };
                    let key_code = if upper.is_ascii_alphanumeric() { upper as u32 } else { 0 };
                    named(other, &code, key_code, other)
                }
                _ => bail!(
                    "{other:?} is not a key: name one of Enter, Tab, Escape, Backspace, Delete, Space, ArrowLeft, ArrowUp, ArrowRight, ArrowDown, Home, End, PageUp, PageDown, or give one character"
                ),
            }
        }
    })
}

/// A URL the browser may open: http(s), or `about:blank`.
pub fn checked_url(url: &str) -> Result<&str> {
    let url = url.trim();
    if url == "about:blank" {
        return Ok(url);
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() > 2048 {
        bail!("the browser opens http:// and https:// URLs");
    }
    if url.chars().any(char::is_whitespace) {
        bail!("the URL has spaces in it");
    }
    Ok(url)
}

/// A wait's seconds: the default when none is given, and refused past the most.
pub fn wait_secs(asked: Option<u64>, default: u64) -> Result<u64> {
    match asked.unwrap_or(default) {
        0 => bail!("a wait is at least 1 second"),
        s if s > MAX_WAIT_SECS => bail!("a wait is at most {MAX_WAIT_SECS} seconds"),
        s => Ok(s),
    }
}

/// A CSS selector as the agent gave it: not empty, of a sensible length.
pub fn checked_selector(s: &str) -> Result<&str> {
    let s = s.trim();
    if s.is_empty() || s.len() > 1000 {
        bail!("a selector is 1 to 1000 characters of CSS, like #email or button[type=submit]");
    }
    Ok(s)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_accessibility_tree_reads_as_an_outline() {
        // The shape `Accessibility.getFullAXTree` answers with (a form, a heading, a
        // result paragraph), trimmed to the fields it reads.
        let nodes = json!([
            {"nodeId": "1", "ignored": false, "role": {"type": "role", "value": "RootWebArea"}, "name": {"type": "computedString", "value": "Sign up"}, "childIds": ["2"]},
            {"nodeId": "2", "parentId": "1", "ignored": true, "role": {"type": "role", "value": "none"}, "childIds": ["3", "5", "7", "9"]},
            {"nodeId": "3", "parentId": "2", "ignored": false, "role": {"type": "role", "value": "heading"}, "name": {"type": "computedString", "value": "Join us"}, "properties": [{"name": "level", "value": {"type": "integer", "value": 1}}], "childIds": ["4"]},
            {"nodeId": "4", "parentId": "3", "ignored": false, "role": {"type": "internalRole", "value": "StaticText"}, "name": {"type": "computedString", "value": "Join us"}, "childIds": []},
            {"nodeId": "5", "parentId": "2", "ignored": false, "role": {"type": "role", "value": "textbox"}, "name": {"type": "computedString", "value": "Name"}, "value": {"type": "string", "value": "Ann"}, "properties": [{"name": "required", "value": {"type": "boolean", "value": true}}], "childIds": ["6", "11"]},
            {"nodeId": "6", "parentId": "5", "ignored": false, "role": {"type": "role", "value": "generic"}, "childIds": []},
            {"nodeId": "11", "parentId": "5", "ignored": false, "role": {"type": "internalRole", "value": "StaticText"}, "name": {"type": "computedString", "value": "Ann"}, "childIds": []},
            {"nodeId": "7", "parentId": "2", "ignored": false, "role": {"type": "role", "value": "button"}, "name": {"type": "computedString", "value": "Send"}, "childIds": ["8"]},
            {"nodeId": "8", "parentId": "7", "ignored": false, "role": {"type": "internalRole", "value": "StaticText"}, "name": {"type": "computedString", "value": "Send"}, "childIds": []},
            {"nodeId": "9", "parentId": "2", "ignored": false, "role": {"type": "role", "value": "paragraph"}, "childIds": ["10"]},
            {"nodeId": "10", "parentId": "9", "ignored": false, "role": {"type": "internalRole", "value": "StaticText"}, "name": {"type": "computedString", "value": "Thanks, Ann!"}, "childIds": []}
        ]);
        let text = outline(nodes.as_array().unwrap());
        assert_eq!(
            text,
            "RootWebArea \"Sign up\"\n  heading \"Join us\" level=1\n  textbox \"Name\" value=\"Ann\" required\n  button \"Send\"\n  StaticText \"Thanks, Ann!\""
        );
    }

    #[test]
    fn console_errors_and_exceptions_become_lines() {
        let logged = json!({"method": "Runtime.consoleAPICalled", "params": {"type": "error", "args": [{"type": "string", "value": "bad"}, {"type": "number", "value": 3}, {"type": "object", "description": "Error: boom"}]}});
        assert_eq!(
            console_error(&logged).unwrap(),
            "console.error: bad 3 Error: boom"
        );
        let info =
            json!({"method": "Runtime.consoleAPICalled", "params": {"type": "log", "args": []}});
        assert_eq!(console_error(&info), None);
        let thrown = json!({"method": "Runtime.exceptionThrown", "params": {"exceptionDetails": {"text": "Uncaught", "exception": {"description": "TypeError: x is undefined\n    at f (app.js:1)"}}}});
        assert_eq!(
            console_error(&thrown).unwrap(),
            "uncaught: TypeError: x is undefined"
        );
        let favicon = json!({"method": "Log.entryAdded", "params": {"entry": {"source": "network", "level": "error", "text": "404", "url": "http://127.0.0.1:1/favicon.ico"}}});
        assert_eq!(console_error(&favicon), None);
        let missing = json!({"method": "Log.entryAdded", "params": {"entry": {"source": "network", "level": "error", "text": "Failed to load resource: 404", "url": "http://127.0.0.1:1/app.css"}}});
        assert_eq!(
            console_error(&missing).unwrap(),
            "network: Failed to load resource: 404 (http://127.0.0.1:1/app.css)"
        );
    }

    #[test]
    fn keys_by_name_or_character_and_a_clear_refusal() {
        assert_eq!(key("Enter").unwrap().key_code, 13);
        assert_eq!(key("Enter").unwrap().text, "\r");
        assert_eq!(key("a").unwrap().code, "KeyA");
        assert_eq!(key("a").unwrap().key_code, 65);
        assert_eq!(key("7").unwrap().code, "Digit7");
        let err = key("Hyper").unwrap_err().to_string();
        assert!(err.contains("not a key") && err.contains("Enter"), "{err}");
    }

    #[test]
    fn urls_waits_and_selectors_are_checked_in_words() {
        assert!(checked_url("http://127.0.0.1:3000/").is_ok());
        assert!(checked_url("about:blank").is_ok());
        assert!(checked_url("file:///etc/passwd").is_err());
        assert!(checked_url("javascript:alert(1)").is_err());
        assert_eq!(wait_secs(None, 10).unwrap(), 10);
        assert!(wait_secs(Some(0), 10).is_err());
        assert!(wait_secs(Some(500), 10)
            .unwrap_err()
            .to_string()
            .contains("at most 50"));
        assert!(checked_selector("  ").is_err());
        assert_eq!(checked_selector(" #email ").unwrap(), "#email");
    }

    #[test]
    fn a_long_read_is_cut_and_says_so() {
        let body = "x".repeat(MAX_READ_CHARS + 10);
        let r = report("T", "http://a/", &body, &["uncaught: E".into()]);
        assert!(r.contains("cut at 20000 characters"));
        let short = report("T", "http://a/", "hello", &[]);
        assert!(short.contains("Console errors: none") && short.contains("URL: http://a/"));
    }
}
