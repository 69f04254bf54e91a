//! The sandbox's desktop people watch: a virtual display with a window manager, where the
//! agent's browser runs while a desktop is open, shown in the person's browser by noVNC.
//! Two VNC servers share the display: one that only shows it (what a link opens unless the
//! person asks for control) and one that takes the person's mouse and keys. Each is
//! reached through the provider's gate for its own port, with a link of the person's own
//! that the control plane checks first, as the editor's: it opens once, only for them,
//! only while the sandbox runs, and not after it expires.

use serde::{Deserialize, Serialize};

/// How long the link `POST /sessions/:id/desktop` answers may be opened.
pub const DESKTOP_LINK_TTL_SECS: i64 = 300;
/// The ports noVNC is served on in a sandbox of its own (a cloud vendor's): the view-only
/// desktop's and the one with control. The local host, whose sandboxes share its network,
/// picks a pair per sandbox.
pub const DESKTOP_VIEW_PORT: u16 = 6080;
pub const DESKTOP_CONTROL_PORT: u16 = 6081;
/// The display's size.
pub const DESKTOP_WIDTH: u32 = 1280;
pub const DESKTOP_HEIGHT: u32 = 800;

/// noVNC's page and how it opens: at once, scaled to the window, reconnecting, view-only
/// where the server is (the server enforces it; the page only hides what it cannot do).
pub fn page(control: bool) -> String {
    format!(
        "vnc.html?autoconnect=1&resize=scale&reconnect=1&path=websockify&view_only={}",
        u8::from(!control)
    )
}

/// The link to a desktop's gate (`…/?inspect_port_token=…`, or the vendor's URL as it
/// is) leading to noVNC's page: the page's path and query before the gate's token, which
/// the gate takes off and keeps the rest.
pub fn page_link(gate_link: &str, control: bool) -> String {
    let page = page(control);
    match gate_link.split_once("/?") {
        Some((gate, query)) => format!("{gate}/{page}&{query}"),
        None => format!("{}/{page}", gate_link.trim_end_matches('/')),
    }
}

/// `POST /sessions/:id/desktop`'s body: whether the person asks for control (their mouse
/// and keys reach the desktop) rather than to watch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DesktopRequest {
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub control: Option<bool>,
}

impl DesktopRequest {
    pub fn control(&self) -> bool {
        self.control.unwrap_or(false)
    }
}

/// The person's link to the desktop. `url` is the control plane's path
/// (`/sessions/:id/desktop/open?token=…`, the token in the editor's link's parameter,
/// [`crate::editor::EDITOR_LINK_PARAM`]), opened in the person's browser, where their
/// sign-in goes with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DesktopLink {
    pub url: String,
    /// Unix seconds.
    pub expires_at: i64,
    pub control: bool,
}

/// Where a provider exposes a sandbox's desktop: for each of the two servers, the port
/// noVNC listens on in the sandbox and the URL (the gate) that reaches it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DesktopEndpoints {
    pub view: crate::editor::EditorEndpoint,
    pub control: crate::editor::EditorEndpoint,
}

impl DesktopEndpoints {
    pub fn of(&self, control: bool) -> &crate::editor::EditorEndpoint {
        match control {
            true => &self.control,
            false => &self.view,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_view_only_unless_control_was_asked() {
        assert!(page(false).ends_with("view_only=1"));
        assert!(page(true).ends_with("view_only=0"));
        let ask: DesktopRequest = serde_json::from_str("{}").unwrap();
        assert!(!ask.control());
        let ask: DesktopRequest = serde_json::from_str(r#"{"control":true}"#).unwrap();
        assert!(ask.control());
        assert!(serde_json::from_str::<DesktopRequest>(r#"{"control":1}"#).is_err());
        assert!(serde_json::from_str::<DesktopRequest>(r#"{"view":true}"#).is_err());
    }

    #[test]
    fn the_gate_s_link_leads_to_the_page_with_its_token_last() {
        assert_eq!(
            page_link("http://127.0.0.1:4100/?inspect_port_token=abc", false),
            "http://127.0.0.1:4100/vnc.html?autoconnect=1&resize=scale&reconnect=1&path=websockify&view_only=1&inspect_port_token=abc"
        );
        assert_eq!(
            page_link("https://6081-sb.vendor.example/", true),
            "https://6081-sb.vendor.example/vnc.html?autoconnect=1&resize=scale&reconnect=1&path=websockify&view_only=0"
        );
    }
}
