//! `open-inspect screenshot URL`: the sandbox's headless Chromium opens a page (the app the
//! start hook runs, say) and photographs it; the picture goes to the session, which keeps
//! it as a `media` artifact for the session's people. A page that never loads is given up
//! on after its timeout, with the browser killed.

use anyhow::{bail, Context, Result};
use inspect_protocol::media::ScreenshotRequest;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The browser: `INSPECT_CHROMIUM`, else the first Chromium on the PATH.
pub fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("INSPECT_CHROMIUM").map(PathBuf::from) {
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "headless_shell",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
    .find(|p| p.is_file())
}

/// The request, checked: an http(s) URL, a sensible size and timeout.
pub fn checked(req: &ScreenshotRequest) -> Result<(u32, u32, u64)> {
    let url = req.url.trim();
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() > 2048 {
        bail!("a screenshot is of an http:// or https:// URL");
    }
    if url.chars().any(char::is_whitespace) {
        bail!("the URL has spaces in it");
    }
    let (w, h) = (req.width.unwrap_or(1280), req.height.unwrap_or(800));
    if !(100..=4000).contains(&w) || !(100..=4000).contains(&h) {
        bail!("a screenshot is 100 to 4000 pixels wide and high");
    }
    let timeout = req.timeout_secs.unwrap_or(30);
    if !(1..=120).contains(&timeout) {
        bail!("the timeout is 1 to 120 seconds");
    }
    let most = inspect_protocol::media::MAX_RECORDING_SECS;
    if req.seconds.is_some_and(|s| !(1..=most).contains(&s)) {
        bail!("a recording is 1 to {most} seconds");
    }
    Ok((w, h, timeout))
}

/// The browser and a fresh folder for its files. Chromium puts a socket under its
/// temporary folder, and a socket's path is at most 108 bytes: the shortest writable place
/// goes first (a sandbox's own folder can be deep).
pub fn browser_and_folder(scratch: &Path) -> Result<(PathBuf, tempfile::TempDir)> {
    let browser = chromium()
        .context("no Chromium in this sandbox (set INSPECT_CHROMIUM or install chromium)")?;
    let dir = ["/dev/shm".into(), std::env::temp_dir(), scratch.to_owned()]
        .iter()
        .find_map(|d: &PathBuf| tempfile::Builder::new().prefix("s").tempdir_in(d).ok())
        .context("no writable folder for the browser")?;
    Ok((browser, dir))
}

/// Chromium's switches for a quiet headless run in a sandbox.
pub const QUIET: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    // No bar about the flags above on a window people watch (the desktop's).
    "--test-type",
];

/// Photographs the page into a PNG; its bytes.
pub async fn take(req: &ScreenshotRequest, scratch: &Path) -> Result<Vec<u8>> {
    let (w, h, timeout) = checked(req)?;
    let (browser, dir) = browser_and_folder(scratch)?;
    let out = dir.path().join("shot.png");
    let mut child = tokio::process::Command::new(browser)
        .args(QUIET)
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("profile").display()
        ))
        .arg(format!("--window-size={w},{h}"))
        .arg(format!("--screenshot={}", out.display()))
        .arg(req.url.trim())
        .env("HOME", dir.path())
        .env("TMPDIR", dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting Chromium")?;
    let status = match tokio::time::timeout(Duration::from_secs(timeout), child.wait()).await {
        Ok(s) => s?,
        Err(_) => {
            let _ = child.kill().await;
            bail!("{} did not load within {timeout} s", req.url.trim());
        }
    };
    let bytes = std::fs::read(&out).unwrap_or_default();
    if !status.success() || bytes.is_empty() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use tokio::io::AsyncReadExt;
            let _ = e.read_to_string(&mut err).await;
        }
        let tail: String = err.lines().rev().take(3).collect::<Vec<_>>().join(" / ");
        bail!("Chromium took no picture ({status}): {tail}");
    }
    Ok(bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_web_pages_of_a_sensible_size() {
        let ok = ScreenshotRequest {
            url: "http://127.0.0.1:3000/".into(),
            ..Default::default()
        };
        assert_eq!(checked(&ok).unwrap(), (1280, 800, 30));
        for bad in [
            ScreenshotRequest {
                url: "file:///etc/passwd".into(),
                ..Default::default()
            },
            ScreenshotRequest {
                url: "http://x/ y".into(),
                ..Default::default()
            },
            ScreenshotRequest {
                url: "http://x/".into(),
                width: Some(10),
                ..Default::default()
            },
            ScreenshotRequest {
                url: "http://x/".into(),
                timeout_secs: Some(0),
                ..Default::default()
            },
            ScreenshotRequest {
                url: "http://x/".into(),
                seconds: Some(0),
                ..Default::default()
            },
            ScreenshotRequest {
                url: "http://x/".into(),
                seconds: Some(60),
                ..Default::default()
            },
        ] {
            assert!(checked(&bad).is_err(), "{bad:?}");
        }
    }
}
