//! `inspect-supervisor browser-mcp`: the agent's browser as an MCP server on standard
//! input and output (rmcp), which the supervisor puts in both agents' configuration as the
//! server `browser`. Each tool is one action on the one page the agent drives
//! (`browser.rs`); each call is a tool call on the session's timeline like any other, and
//! a screenshot goes to the session's people as a picture.

use super::browser::{self, Browser, Target};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::Mutex;

/// The server's name in the agents' configurations (OpenCode names its tools
/// `browser_open`, `browser_click`, …; Claude Code `mcp__browser__open`, …).
pub const SERVER_NAME: &str = "browser";

#[derive(Clone)]
pub struct BrowserTools {
    page: Arc<Mutex<Option<Browser>>>,
    scratch: PathBuf,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct OpenArgs {
    /// The page's address: http:// or https:// (the app you started: http://127.0.0.1:PORT/).
    pub url: String,
    /// Seconds the page has to load (default 30, at most 50).
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ClickArgs {
    /// A CSS selector for the element to click, like `button[type=submit]` or `#save`.
    pub selector: String,
    /// Seconds to wait for the element to appear (default 10, at most 50).
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TypeArgs {
    /// A CSS selector for the field, like `#email` or `input[name=q]`.
    pub selector: String,
    /// The text to type; it replaces what the field held unless `append` is true.
    pub text: String,
    /// Keep what the field held and add the text at its end.
    pub append: Option<bool>,
    /// Press Enter afterwards (submits most forms).
    pub submit: Option<bool>,
    /// Seconds to wait for the field to appear (default 10, at most 50).
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct PressArgs {
    /// The key: Enter, Tab, Escape, Backspace, Delete, Space, ArrowLeft, ArrowUp,
    /// ArrowRight, ArrowDown, Home, End, PageUp, PageDown, or one character.
    pub key: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WaitArgs {
    /// Wait until this text is on the page…
    pub text: Option<String>,
    /// …or until an element this CSS selector names is visible.
    pub selector: Option<String>,
    /// Seconds to wait (default 10, at most 50).
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ReadArgs {
    /// Only this element's text (a CSS selector); the whole page's accessibility tree
    /// when left out.
    pub selector: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ScreenshotArgs {
    /// What the picture shows, for the people who see it.
    pub caption: Option<String>,
}

type Answer = Result<String, String>;

fn words(e: anyhow::Error) -> String {
    format!("{e:#}")
}

#[tool_router]
impl BrowserTools {
    pub fn new(scratch: PathBuf) -> Self {
        BrowserTools {
            page: Arc::default(),
            scratch,
        }
    }

    /// The page, the browser started (again, after a crash) when there is none. While the
    /// sandbox's desktop is open the browser runs on its display, where people watch it: a
    /// desktop opened (or closed) since the last action moves it there, on the same page.
    async fn page(&self) -> Result<tokio::sync::MappedMutexGuard<'_, Browser>, String> {
        let display = crate::agent_tool::desktop_display().await;
        let mut held = self.page.lock().await;
        if held.as_mut().is_some_and(|b| !b.alive()) {
            *held = None;
        }
        let mut reopen = None;
        if let Some(moving) = held.as_ref().filter(|b| b.display != display) {
            let at = moving.eval("location.href").await.ok();
            reopen = at.and_then(|v| v.as_str().map(str::to_owned));
            *held = None;
        }
        if held.is_none() {
            let browser = Browser::launch(&self.scratch, display.as_deref())
                .await
                .map_err(words)?;
            if let Some(url) = reopen.filter(|u| browser::checked_url(u).is_ok()) {
                browser
                    .open(&url, browser::DEFAULT_LOAD_SECS)
                    .await
                    .map_err(words)?;
            }
            *held = Some(browser);
        }
        tokio::sync::MutexGuard::try_map(held, Option::as_mut)
            .map_err(|_| "the browser did not start".to_string())
    }

    #[tool(
        description = "Open a web page in the sandbox's browser (the app you started, say) and wait until it has loaded; answers with what the page shows (its accessibility tree) and its console errors."
    )]
    async fn open(&self, Parameters(a): Parameters<OpenArgs>) -> Answer {
        let url = browser::checked_url(&a.url).map_err(words)?;
        let secs = browser::wait_secs(a.timeout_secs, browser::DEFAULT_LOAD_SECS).map_err(words)?;
        let page = self.page().await?;
        page.open(url, secs).await.map_err(words)?;
        let seen = page.read(None).await.map_err(words)?;
        Ok(format!("Opened {url}.\n\n{seen}"))
    }

    #[tool(
        description = "Click an element of the open page (a CSS selector), as a mouse would, once it is visible; waits for a page the click opens."
    )]
    async fn click(&self, Parameters(a): Parameters<ClickArgs>) -> Answer {
        let selector = browser::checked_selector(&a.selector).map_err(words)?;
        let secs = browser::wait_secs(a.timeout_secs, browser::DEFAULT_WAIT_SECS).map_err(words)?;
        let page = self.page().await?;
        page.click(selector, secs).await.map_err(words)?;
        let at = page.eval("location.href").await.unwrap_or_default();
        Ok(format!(
            "Clicked {selector}; the page is at {}.",
            at.as_str().unwrap_or("?")
        ))
    }

    #[tool(
        name = "type",
        description = "Type text into a field of the open page (a CSS selector): it replaces what the field held unless append is true; submit presses Enter afterwards."
    )]
    async fn type_text(&self, Parameters(a): Parameters<TypeArgs>) -> Answer {
        let selector = browser::checked_selector(&a.selector).map_err(words)?;
        let secs = browser::wait_secs(a.timeout_secs, browser::DEFAULT_WAIT_SECS).map_err(words)?;
        let page = self.page().await?;
        page.type_text(selector, &a.text, a.append.unwrap_or(false), secs)
            .await
            .map_err(words)?;
        if a.submit.unwrap_or(false) {
            let enter = browser::key("Enter").map_err(words)?;
            page.press(&enter, secs).await.map_err(words)?;
            return Ok(format!(
                "Typed {} characters into {selector} and pressed Enter.",
                a.text.chars().count()
            ));
        }
        Ok(format!(
            "Typed {} characters into {selector}.",
            a.text.chars().count()
        ))
    }

    #[tool(description = "Press a key on the open page (on whatever has the focus).")]
    async fn press(&self, Parameters(a): Parameters<PressArgs>) -> Answer {
        let key = browser::key(a.key.trim()).map_err(words)?;
        let page = self.page().await?;
        page.press(&key, browser::DEFAULT_WAIT_SECS)
            .await
            .map_err(words)?;
        Ok(format!("Pressed {}.", key.key))
    }

    #[tool(
        description = "Wait until a text is on the open page, or an element (a CSS selector) is visible; says what the page shows when it does not come in time."
    )]
    async fn wait_for(&self, Parameters(a): Parameters<WaitArgs>) -> Answer {
        let target = match (a.text, a.selector) {
            (Some(t), None) if !t.is_empty() => Target::Text(t),
            (None, Some(s)) => {
                Target::Selector(browser::checked_selector(&s).map_err(words)?.to_owned())
            }
            _ => return Err("give either text or selector, not both".into()),
        };
        let secs = browser::wait_secs(a.timeout_secs, browser::DEFAULT_WAIT_SECS).map_err(words)?;
        let page = self.page().await?;
        page.wait_for(&target, secs).await.map_err(words)?;
        Ok(match target {
            Target::Text(t) => format!("The text {t:?} is on the page."),
            Target::Selector(s) => format!("{s} is on the page."),
        })
    }

    #[tool(
        description = "Read the open page: its title, address, accessibility tree (roles, names, values: what a screen reader would say) or one element's text, and the console errors since the last read."
    )]
    async fn read(&self, Parameters(a): Parameters<ReadArgs>) -> Answer {
        let selector = match a.selector.as_deref() {
            Some(s) => Some(browser::checked_selector(s).map_err(words)?),
            None => None,
        };
        let page = self.page().await?;
        page.read(selector).await.map_err(words)
    }

    #[tool(
        description = "Photograph the open page as it is now; the picture is shown to the session's people on the timeline."
    )]
    async fn screenshot(&self, Parameters(a): Parameters<ScreenshotArgs>) -> Answer {
        let png = {
            let page = self.page().await?;
            page.screenshot().await.map_err(words)?
        };
        let caption = a.caption.unwrap_or_else(|| "The agent's browser".into());
        let url = crate::agent_tool::send_picture(png, "image/png", &caption)
            .await
            .map_err(words)?;
        Ok(format!(
            "Took the screenshot; the session's people see it ({url})."
        ))
    }
}

#[tool_handler]
impl ServerHandler for BrowserTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("open-inspect-browser", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "A web browser in the sandbox, one page kept between calls: open your app's URL, then click, type, press keys, wait for text and read what the page shows, as a person would check it.".to_string(),
            )
    }
}

/// Serves the tools on standard input and output until the agent closes them.
pub async fn serve() -> anyhow::Result<()> {
    let scratch = std::env::temp_dir().join("open-inspect-browser");
    std::fs::create_dir_all(&scratch)?;
    let running = BrowserTools::new(scratch)
        .serve(rmcp::transport::stdio())
        .await?;
    running.waiting().await?;
    Ok(())
}
