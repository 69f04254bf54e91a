//! The control plane's REST API as the CLI calls it: one client with the server's URL and
//! the person's token (none in local mode), errors read from `{ "error": { code, message } }`
//! and turned into the CLI's exit codes.

use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt;

/// Why a command failed, and the exit code it ends with.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

/// The documented exit codes (README's CLI section, `inspect --help`).
pub mod exit {
    /// The prompt failed (`--wait`), or the server refused what was asked.
    pub const FAILED: i32 = 1;
    /// Not signed in, or the token was refused (revoked, expired): `inspect login`.
    pub const AUTH: i32 = 2;
    /// No such session (or other thing named).
    pub const NOT_FOUND: i32 = 3;
    /// The server could not be reached.
    pub const UNREACHABLE: i32 = 4;
    /// The command line was wrong.
    pub const USAGE: i32 = 64;
}

impl Failure {
    pub fn new(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Failure {
        Failure::new(exit::FAILED, message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        Failure::failed(format!("{e:#}"))
    }
}

pub type Result<T> = std::result::Result<T, Failure>;

#[derive(Clone)]
pub struct Api {
    pub base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Api {
    pub fn new(base: &str, token: Option<String>) -> Api {
        Api {
            base: base.trim_end_matches('/').to_owned(),
            token,
            http: reqwest::Client::builder()
                .user_agent(concat!("inspect-cli/", env!("CARGO_PKG_VERSION")))
                .build()
                .unwrap_or_default(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The WebSocket URL of a path on the same server.
    pub fn ws_url(&self, path: &str) -> String {
        let base = if let Some(rest) = self.base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = self.base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            self.base.clone()
        };
        format!("{base}{path}")
    }

    pub async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T> {
        let mut req = self.http.request(method, self.url(path));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            Failure::new(
                exit::UNREACHABLE,
                format!("the server at {} could not be reached: {e}", self.base),
            )
        })?;
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        if !(200..300).contains(&status) {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let message = v["error"]["message"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| format!("the server answered {status}"));
            return Err(match status {
                401 => Failure::new(
                    exit::AUTH,
                    format!("{message}. Sign in again: inspect login {}", self.base),
                ),
                404 => Failure::new(exit::NOT_FOUND, message),
                _ => Failure::failed(message),
            });
        }
        let text = if text.is_empty() { "null" } else { &text };
        serde_json::from_str(text)
            .map_err(|e| Failure::failed(format!("the server's answer was not understood: {e}")))
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.call(reqwest::Method::GET, path, None).await
    }

    pub async fn post<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }
}
