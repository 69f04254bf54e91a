//! Where the CLI keeps the server's URL and the person's token: `$INSPECT_CONFIG`, else
//! `$XDG_CONFIG_HOME/inspect/config.json`, else `~/.config/inspect/config.json`; written
//! with mode 0600 (the token is a credential). `INSPECT_URL` and `INSPECT_TOKEN` override
//! what is kept.

use crate::api::{exit, Failure, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The server a local `./scripts/dev.sh` serves.
pub const LOCAL_URL: &str = "http://127.0.0.1:8787";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Config {
    pub url: Option<String>,
    pub token: Option<String>,
}

pub fn path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("INSPECT_CONFIG") {
        return Ok(PathBuf::from(p));
    }
    let dir = match std::env::var_os("XDG_CONFIG_HOME") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(
            std::env::var_os("HOME")
                .ok_or_else(|| Failure::failed("no home folder (HOME) to keep the config in"))?,
        )
        .join(".config"),
    };
    Ok(dir.join("inspect").join("config.json"))
}

pub fn load() -> Result<Config> {
    let p = path()?;
    let mut config: Config = match std::fs::read_to_string(&p) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| Failure::failed(format!("{}: {e}", p.display())))?,
        Err(_) => Config::default(),
    };
    if let Ok(url) = std::env::var("INSPECT_URL") {
        if !url.is_empty() {
            config.url = Some(url);
        }
    }
    if let Ok(token) = std::env::var("INSPECT_TOKEN") {
        if !token.is_empty() {
            config.token = Some(token);
        }
    }
    Ok(config)
}

pub fn save(config: &Config) -> Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let p = path()?;
    if let Some(dir) = p.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::failed(format!("{}: {e}", dir.display())))?;
    }
    let text = serde_json::to_string_pretty(config).map_err(|e| Failure::failed(e.to_string()))?;
    let tmp = p.with_extension("json.tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| Failure::failed(format!("{}: {e}", tmp.display())))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| Failure::failed(format!("{}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, &p).map_err(|e| Failure::failed(format!("{}: {e}", p.display())))?;
    Ok(p)
}

/// The server to talk to: the config's, else the local one.
pub fn server(config: &Config) -> String {
    config.url.clone().unwrap_or_else(|| LOCAL_URL.to_owned())
}

/// A URL the person typed: an http(s) origin.
pub fn check_url(url: &str) -> Result<String> {
    let parsed = url::Url::parse(url)
        .map_err(|e| Failure::new(exit::USAGE, format!("{url} is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(Failure::new(
            exit::USAGE,
            format!("{url} is not an http(s) URL"),
        ));
    }
    Ok(url.trim_end_matches('/').to_owned())
}
