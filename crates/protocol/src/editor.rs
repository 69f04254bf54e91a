//! The sandbox's editor: code-server (VS Code in the browser) in the sandbox, started when a
//! person first asks for it and reached through the provider's gate for the port it listens
//! on. A person gets a link of their own that the control plane checks before it hands out
//! the gate's link: it opens once, only for them, only while the sandbox runs, and not after
//! it expires.

use serde::{Deserialize, Serialize};

/// How long the link `POST /sessions/:id/editor` answers may be opened.
pub const EDITOR_LINK_TTL_SECS: i64 = 300;
/// The port code-server listens on in a sandbox of its own (a cloud vendor's); the local
/// host, whose sandboxes share its network, picks one per sandbox.
pub const EDITOR_PORT: u16 = 13337;
/// The query parameter the link carries its token in.
pub const EDITOR_LINK_PARAM: &str = "token";

/// `POST /sessions/:id/editor`: the person's link to the editor. `url` is the control
/// plane's path (`/sessions/:id/editor/open?token=…`), opened in the person's browser, where
/// their sign-in goes with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct EditorLink {
    pub url: String,
    /// Unix seconds.
    pub expires_at: i64,
}

/// Where a provider exposes a sandbox's editor: the port code-server is to listen on in the
/// sandbox, and the URL (the gate) that reaches it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct EditorEndpoint {
    pub port: u16,
    pub url: String,
}
