//! The headers the Worker sets on what it forwards to a session's object. Nothing outside
//! the Worker can reach a Durable Object, so the object trusts them.

/// The caller (an `Actor`, JSON).
pub const ACTOR_HEADER: &str = "X-Inspect-Actor";
/// The session's id.
pub const SESSION_HEADER: &str = "X-Inspect-Session-Id";
/// Set by the Worker on bodies it wrote itself or a signed service sent: only then is a
/// prompt's `callbackContext` (where its outcome is posted) honoured.
pub const VOUCHED_HEADER: &str = "X-Inspect-Vouched";
/// The control plane's public origin, as the caller reached it (for sandboxes to connect).
pub const ORIGIN_HEADER: &str = "X-Inspect-Origin";
