//! Terminals: a shell on a PTY in the session's sandbox, beside the agent's, opened by a
//! person. Opened and listed over REST; its bytes go over the sockets that already join
//! browsers, the session and the sandbox (input and resizes from a subscribed client,
//! output to every client), never onto the timeline. Output is base64: a PTY's bytes need
//! not be UTF-8, nor split where characters end.

use serde::{Deserialize, Serialize};

/// Terminals open at once in a session.
pub const MAX_OPEN_TERMINALS: usize = 8;
/// A terminal's size bounds (columns, rows).
pub const MAX_COLS: u16 = 1_000;
pub const MAX_ROWS: u16 = 500;
/// One input message's bytes (a bigger paste is sent in pieces).
pub const MAX_INPUT_BYTES: usize = 64 * 1024;
/// What the sandbox keeps of a terminal's output to redraw a reconnecting browser.
pub const SCROLLBACK_BYTES: usize = 256 * 1024;
/// One output event's bytes at most (before base64).
pub const MAX_OUTPUT_CHUNK_BYTES: usize = 64 * 1024;

/// `POST /sessions/:id/terminals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenTerminalRequest {
    pub cols: u16,
    pub rows: u16,
}

/// Whether a size is one a terminal can have.
pub fn size_ok(cols: u16, rows: u16) -> bool {
    (1..=MAX_COLS).contains(&cols) && (1..=MAX_ROWS).contains(&rows)
}

/// A terminal of the session, open or closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct TerminalInfo {
    pub id: String,
    /// Who opened it (their name) and when.
    pub opened_by: String,
    pub opened_at: i64,
    pub cols: u16,
    pub rows: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// `GET /sessions/:id/terminals`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct TerminalList {
    pub terminals: Vec<TerminalInfo>,
}
