//! Installing the Linear app (OAuth with `actor=app`, so the agent acts as itself) and the
//! app's tokens: the authorize URL with a one-time `state`, the token endpoint's forms
//! (the installing code, then client credentials for the running app), and when a held
//! token must be renewed.

use serde::Deserialize;

/// What the app asks for: to read and write, and to be assigned and mentioned as an agent.
pub const SCOPE: &str = "read,write,app:assignable,app:mentionable";

/// A held token is renewed this long before it expires.
pub const RENEW_BEFORE_MS: i64 = 5 * 60 * 1000;

/// An install's `state` is good this long.
pub const STATE_TTL_MS: i64 = 10 * 60 * 1000;

/// `viewer`: the app's own user and its workspace, checked against the webhook's.
pub const VIEWER_QUERY: &str = "query Viewer { viewer { id organization { id name } } }";

/// Whether a newly minted token, acting in workspace `acts_in` (its `viewer`'s
/// organization), may serve a delivery from `organization`.
pub fn token_fits(acts_in: &str, organization: &str) -> Result<(), String> {
    if !acts_in.is_empty() && acts_in == organization {
        return Ok(());
    }
    Err(format!(
        "the token Linear issued acts in workspace {:?}, not {organization:?} where the delivery came from: not used",
        if acts_in.is_empty() { "(unknown)" } else { acts_in }
    ))
}

/// Where the person's browser is sent to install the app.
pub fn authorize_url(authorize: &str, client_id: &str, redirect_uri: &str, state: &str) -> String {
    let mut url = match url::Url::parse(authorize) {
        Ok(u) => u,
        Err(_) => return String::new(),
    };
    url.query_pairs_mut()
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("response_type", "code")
        .append_pair("scope", SCOPE)
        .append_pair("actor", "app")
        .append_pair("state", state)
        .append_pair("prompt", "consent");
    url.into()
}

/// The form that trades the installing code for a token.
pub fn code_form(client_id: &str, secret: &str, code: &str, redirect_uri: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "authorization_code")
        .append_pair("client_id", client_id)
        .append_pair("client_secret", secret)
        .append_pair("code", code)
        .append_pair("redirect_uri", redirect_uri)
        .finish()
}

/// The form for the running app's token (Linear's client credentials grant).
pub fn client_credentials_form(client_id: &str, secret: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .append_pair("client_id", client_id)
        .append_pair("client_secret", secret)
        .append_pair("scope", SCOPE)
        .finish()
}

#[derive(Debug, Clone, Deserialize)]
pub struct TokenAnswer {
    pub access_token: String,
    #[serde(default)]
    pub token_type: Option<String>,
    /// Seconds.
    #[serde(default)]
    pub expires_in: Option<i64>,
    #[serde(default)]
    pub scope: Option<serde_json::Value>,
}

impl TokenAnswer {
    /// When the token expires (ms), from `now_ms`; a day when Linear does not say.
    pub fn expires_at(&self, now_ms: i64) -> i64 {
        now_ms + self.expires_in.unwrap_or(24 * 3600).max(60) * 1000
    }
}

/// Whether a token expiring at `expires_at` must be renewed at `now_ms`.
pub fn must_renew(expires_at: i64, now_ms: i64) -> bool {
    expires_at - now_ms <= RENEW_BEFORE_MS
}

/// A `state` as given back: URL-safe, 16-128 characters.
pub fn state_ok(state: &str) -> bool {
    (16..=128).contains(&state.len())
        && state
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_token_serves_only_its_own_workspace() {
        assert!(token_fits("org1", "org1").is_ok());
        assert!(token_fits("org2", "org1").unwrap_err().contains("org2"));
        assert!(token_fits("", "org1").is_err());
    }

    #[test]
    fn the_authorize_url_asks_for_the_app_actor_with_a_state() {
        let u = authorize_url(
            "https://linear.app/oauth/authorize",
            "cid",
            "https://inspect.example/integrations/linear/callback",
            "st4te-0123456789abcdef",
        );
        let parsed = url::Url::parse(&u).unwrap();
        let q: std::collections::HashMap<_, _> = parsed.query_pairs().into_owned().collect();
        assert_eq!(q["actor"], "app");
        assert_eq!(q["state"], "st4te-0123456789abcdef");
        assert_eq!(q["scope"], SCOPE);
        assert_eq!(
            q["redirect_uri"],
            "https://inspect.example/integrations/linear/callback"
        );
        assert!(code_form("c", "s&x", "k", "r").contains("client_secret=s%26x"));
        assert!(client_credentials_form("c", "s").starts_with("grant_type=client_credentials"));
    }

    #[test]
    fn tokens_are_renewed_before_they_expire() {
        let t: TokenAnswer = serde_json::from_str(
            r#"{"access_token":"a","token_type":"Bearer","expires_in":2592000,"scope":"read"}"#,
        )
        .unwrap();
        assert_eq!(t.expires_at(1000), 1000 + 2_592_000_000);
        assert!(!must_renew(t.expires_at(0), 0));
        assert!(must_renew(t.expires_at(0), 2_592_000_000 - 60_000));
        assert!(state_ok("abcdefghijklmnop_-12"));
        assert!(!state_ok("short"));
        assert!(!state_ok("abcdefghijklmnop<script>"));
    }
}
