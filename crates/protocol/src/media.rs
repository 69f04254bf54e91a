//! Pictures the agent takes (a screenshot of the app it runs): kept by the session as a
//! `media` artifact, shown on the timeline and the session page, read by the session's
//! people at `GET /sessions/:id/media/:attachment`.

use serde::{Deserialize, Serialize};

/// A picture's bytes at most.
pub const MAX_MEDIA_BYTES: usize = 5 * 1024 * 1024;
/// Pictures one session keeps at most.
pub const MAX_SESSION_MEDIA: usize = 50;
/// A caption's characters at most.
pub const MAX_CAPTION_CHARS: usize = 500;
/// The kinds of picture kept (served as they are, so nothing a browser would run).
pub const MEDIA_TYPES: &[&str] = &["image/png", "image/jpeg", "image/webp", "image/gif"];
/// A recording's seconds at most (`open-inspect record`).
pub const MAX_RECORDING_SECS: u32 = 15;

/// The artifact type.
pub const MEDIA_ARTIFACT: &str = "media";

/// `open-inspect screenshot`: what the agent asks its sandbox to photograph.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScreenshotRequest {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// How long the page has to load, in seconds (default 30, at most 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// Record the page for this many seconds (an animated GIF) instead of photographing
    /// it (1 to [`MAX_RECORDING_SECS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u32>,
}

/// Whether a caption and media type may be kept; the problem in words otherwise.
pub fn check(mime: &str, caption: &str, bytes: usize) -> Result<(), String> {
    if !MEDIA_TYPES.contains(&mime) {
        return Err(format!(
            "a picture is one of {}, not {mime:?}",
            MEDIA_TYPES.join(", ")
        ));
    }
    if bytes == 0 || bytes > MAX_MEDIA_BYTES {
        return Err(format!(
            "a picture is 1 byte to {} MiB",
            MAX_MEDIA_BYTES / 1024 / 1024
        ));
    }
    if caption.chars().count() > MAX_CAPTION_CHARS
        || caption.chars().any(|c| c.is_control() && c != '\n')
    {
        return Err(format!(
            "a caption is at most {MAX_CAPTION_CHARS} characters of text"
        ));
    }
    Ok(())
}
