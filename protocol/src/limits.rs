//! Limits, timeouts and close codes shared by both ends of every connection.

/// Largest prompt accepted, in bytes of UTF-8.
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;
/// Largest client WebSocket frame accepted, in bytes.
pub const MAX_CLIENT_FRAME_BYTES: usize = 256 * 1024;
/// Unfinished (pending + processing) prompts allowed in one session.
pub const MAX_UNFINISHED_PROMPTS: usize = 10;
/// Events sent on subscribe (heartbeats excluded).
pub const SUBSCRIBE_EVENT_WINDOW: usize = 500;
/// Default and maximum page sizes for event history.
pub const HISTORY_PAGE_DEFAULT: usize = 200;
pub const HISTORY_PAGE_MAX: usize = 500;
/// Repositories one session may hold.
pub const MAX_SESSION_REPOSITORIES: usize = 10;
/// Longest session title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// A client WS token lives this long.
pub const WS_TOKEN_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// A socket that has not subscribed by then is closed with [`CLOSE_SUBSCRIBE_TIMEOUT`].
pub const SUBSCRIBE_DEADLINE_MS: i64 = 30_000;

/// Close code: authentication required, invalid or expired.
pub const CLOSE_AUTH: u16 = 4001;
/// Close code: this socket already subscribed.
pub const CLOSE_ALREADY_SUBSCRIBED: u16 = 4003;
/// Close code: no subscribe within [`SUBSCRIBE_DEADLINE_MS`].
pub const CLOSE_SUBSCRIBE_TIMEOUT: u16 = 4008;
/// Ports one session may expose.
pub const MAX_TUNNEL_PORTS: usize = 10;
