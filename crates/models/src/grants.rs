//! Brokered model access, the pure part: which grants a request may store (a provider the
//! catalog knows, an `https` token endpoint — plain `http` only on loopback — bounded
//! values), a scope's key, which grants apply to a session, the refresh request (RFC 6749
//! §6, form-encoded) and its answer, and when a held access token must be renewed.

use inspect_protocol::models::ModelGrantRequest;
use inspect_protocol::session::AgentKind;
use inspect_protocol::skills::SkillAssignment;
use serde::Deserialize;

/// The providers a grant may be for.
pub const PROVIDERS: [&str; 2] = ["anthropic", "openai"];
/// A held access token is renewed this long before it expires.
pub const RENEW_BEFORE_MS: i64 = 60_000;
const MAX_VALUE: usize = 4096;

/// Checks a request (trimmed), or says what is wrong.
pub fn check(mut req: ModelGrantRequest) -> Result<ModelGrantRequest, String> {
    req.provider = req.provider.trim().to_ascii_lowercase();
    if !PROVIDERS.contains(&req.provider.as_str()) {
        return Err(format!(
            "a grant's provider is one of {}, not {:?}",
            PROVIDERS.join(", "),
            req.provider
        ));
    }
    req.token_url = req.token_url.trim().to_owned();
    let url = url::Url::parse(&req.token_url).map_err(|_| "tokenUrl is not a URL".to_string())?;
    let loopback = matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    if !(url.scheme() == "https" || (url.scheme() == "http" && loopback))
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err("tokenUrl is https (plain http only on this machine), without a user".into());
    }
    req.client_id = req.client_id.trim().to_owned();
    req.refresh_token = req.refresh_token.trim().to_owned();
    for (name, v) in [
        ("clientId", &req.client_id),
        ("refreshToken", &req.refresh_token),
    ] {
        if v.is_empty() || v.len() > MAX_VALUE || v.chars().any(char::is_control) {
            return Err(format!("{name} is 1 to {MAX_VALUE} characters on one line"));
        }
    }
    match &req.scope {
        SkillAssignment::All => {}
        SkillAssignment::Repository { owner, name } if !owner.is_empty() && !name.is_empty() => {}
        SkillAssignment::Environment { id } if !id.is_empty() => {}
        _ => return Err("a grant's scope names its repository or environment".into()),
    }
    Ok(req)
}

/// `(kind, id)` as stored.
pub fn scope_key(scope: &SkillAssignment) -> (&'static str, String) {
    match scope {
        SkillAssignment::All => ("all", String::new()),
        SkillAssignment::Repository { owner, name } => {
            ("repository", format!("{owner}/{name}").to_ascii_lowercase())
        }
        SkillAssignment::Environment { id } => ("environment", id.clone()),
    }
}

pub fn scope_of(kind: &str, id: &str) -> SkillAssignment {
    match kind {
        "repository" => {
            let (owner, name) = id.split_once('/').unwrap_or((id, ""));
            SkillAssignment::Repository {
                owner: owner.into(),
                name: name.into(),
            }
        }
        "environment" => SkillAssignment::Environment { id: id.into() },
        _ => SkillAssignment::All,
    }
}

/// Whether a grant for `provider` may be handed to a session running `agent`. An Anthropic
/// OAuth grant is a Claude subscription's credential, which Anthropic's terms allow only
/// in Claude Code: it is never given to another agent (that session uses an API key).
pub fn usable_by(provider: &str, agent: AgentKind) -> bool {
    match provider {
        "anthropic" => agent == AgentKind::ClaudeCode,
        _ => true,
    }
}

/// Of the grants `(id, provider, scope)`, the one per provider a session running `agent`
/// uses: its environment's, else its primary repository's, else the deployment's.
pub fn applicable<'a>(
    grants: &'a [(String, String, SkillAssignment)],
    repositories: &[(String, String)],
    environment: Option<&str>,
    agent: AgentKind,
) -> Vec<(&'a str, &'a str)> {
    let rank = |scope: &SkillAssignment| -> Option<u8> {
        match scope {
            SkillAssignment::Environment { id } => (Some(id.as_str()) == environment).then_some(3),
            SkillAssignment::Repository { owner, name } => repositories
                .first()
                .filter(|(o, n)| o.eq_ignore_ascii_case(owner) && n.eq_ignore_ascii_case(name))
                .map(|_| 2),
            SkillAssignment::All => Some(1),
        }
    };
    let mut out: Vec<(&str, &str, u8)> = Vec::new();
    for (id, provider, scope) in grants {
        let Some(r) = rank(scope) else { continue };
        if !usable_by(provider, agent) {
            continue;
        }
        match out.iter_mut().find(|(_, p, _)| p == provider) {
            Some(best) if best.2 < r => *best = (id, provider, r),
            Some(_) => {}
            None => out.push((id, provider, r)),
        }
    }
    out.into_iter().map(|(id, p, _)| (id, p)).collect()
}

/// The refresh request's form.
pub fn refresh_form(client_id: &str, refresh_token: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "refresh_token")
        .append_pair("refresh_token", refresh_token)
        .append_pair("client_id", client_id)
        .finish()
}

#[derive(Debug, Deserialize)]
pub struct Refreshed {
    pub access_token: String,
    /// A rotated refresh token, when the provider rotates them.
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub expires_in: Option<i64>,
}

/// How a refresh went, from the endpoint's status and body.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Fresh {
        access: String,
        rotated: Option<String>,
        expires_at: i64,
    },
    /// The grant is no longer good (`invalid_grant`, or the client refused): say so.
    Revoked(String),
    /// Try again later (the endpoint failed).
    Failed(String),
}

pub fn read_refresh(status: u16, body: &str, now_ms: i64) -> Outcome {
    if status == 200 {
        return match serde_json::from_str::<Refreshed>(body) {
            Ok(r) if !r.access_token.is_empty() => Outcome::Fresh {
                expires_at: now_ms + r.expires_in.unwrap_or(3600).max(1) * 1000,
                access: r.access_token,
                rotated: r.refresh_token.filter(|t| !t.is_empty()),
            },
            _ => Outcome::Failed("the token endpoint's answer has no access_token".into()),
        };
    }
    let error = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_default();
    match (status, error.as_str()) {
        (400 | 401, "invalid_grant" | "invalid_client" | "unauthorized_client") => {
            Outcome::Revoked(format!("the provider refused the grant ({error})"))
        }
        _ => Outcome::Failed(format!("the token endpoint answered {status} {error}")),
    }
}

/// Whether an access token expiring at `expires_at` must be renewed at `now_ms`.
pub fn must_renew(expires_at: i64, now_ms: i64) -> bool {
    expires_at - now_ms <= RENEW_BEFORE_MS
}

/// Whether the held access token (expiring at `expires_at`) serves a call that first saw
/// the grant's token expiring at `seen`: good for a while yet, or just written by the
/// refresh the call waited for (another session's) and not about to expire.
pub fn held_usable(expires_at: i64, seen: Option<i64>, now_ms: i64) -> bool {
    !must_renew(expires_at, now_ms) || (seen != Some(expires_at) && expires_at > now_ms + 5_000)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_token_another_refresh_just_wrote_is_taken() {
        assert!(held_usable(200_000, Some(200_000), 0), "good for a while");
        assert!(
            !held_usable(30_000, Some(30_000), 0),
            "the one it saw: renew"
        );
        assert!(held_usable(30_000, Some(1_000), 0), "a newer one: take it");
        assert!(!held_usable(3_000, None, 0), "about to expire");
    }

    fn req(provider: &str, url: &str) -> ModelGrantRequest {
        ModelGrantRequest {
            provider: provider.into(),
            scope: SkillAssignment::All,
            token_url: url.into(),
            client_id: "cid".into(),
            refresh_token: "rt".into(),
        }
    }

    #[test]
    fn requests_are_checked() {
        assert!(check(req(" Anthropic ", "https://console.example/v1/oauth/token")).is_ok());
        assert!(check(req("anthropic", "http://127.0.0.1:9/token")).is_ok());
        assert!(check(req("anthropic", "http://example.com/token")).is_err());
        assert!(check(req("anthropic", "https://u:p@example.com/token")).is_err());
        assert!(check(req("xai", "https://example.com/token")).is_err());
        let mut r = req("openai", "https://example.com/t");
        r.refresh_token = " ".into();
        assert!(check(r).is_err());
    }

    #[test]
    fn the_narrowest_grant_of_each_provider_applies() {
        let grants = vec![
            (
                "g1".to_string(),
                "anthropic".to_string(),
                SkillAssignment::All,
            ),
            (
                "g2".to_string(),
                "anthropic".to_string(),
                scope_of("repository", "acme/api"),
            ),
            (
                "g3".to_string(),
                "openai".to_string(),
                scope_of("environment", "e1"),
            ),
        ];
        let repos = vec![("Acme".to_string(), "API".to_string())];
        let claude = AgentKind::ClaudeCode;
        assert_eq!(
            applicable(&grants, &repos, None, claude),
            vec![("g2", "anthropic")]
        );
        assert_eq!(
            applicable(&grants, &[], Some("e1"), claude),
            vec![("g1", "anthropic"), ("g3", "openai")]
        );
        // A Claude subscription's grant goes to Claude Code only.
        assert_eq!(
            applicable(&grants, &[], Some("e1"), AgentKind::Opencode),
            vec![("g3", "openai")]
        );
        assert_eq!(
            scope_key(&scope_of("repository", "acme/api")),
            ("repository", "acme/api".to_string())
        );
    }

    #[test]
    fn refresh_answers() {
        assert_eq!(
            read_refresh(
                200,
                r#"{"access_token":"a","refresh_token":"r2","expires_in":30}"#,
                1000
            ),
            Outcome::Fresh {
                access: "a".into(),
                rotated: Some("r2".into()),
                expires_at: 31_000
            }
        );
        assert!(matches!(
            read_refresh(400, r#"{"error":"invalid_grant"}"#, 0),
            Outcome::Revoked(_)
        ));
        assert!(matches!(read_refresh(503, "", 0), Outcome::Failed(_)));
        assert!(must_renew(30_000, 0) && !must_renew(120_000, 0));
        assert!(refresh_form("c", "r&t").contains("refresh_token=r%26t"));
    }
}
