//! DESIGN's local mode: the embedded default's single user. It lets a request in only when
//! the local-mode variable is set, the request reached the Worker on loopback, *and* it
//! carries no header a proxy or tunnel adds: behind a tunnel every request reaches the
//! Worker on loopback, so the Internet would otherwise act as the local user.

use inspect_protocol::session::Actor;
use inspect_protocol::ApiError;

/// The parts of a request that decide who it acts for.
pub struct CallerFacts<'a> {
    /// `LOCAL_MODE` is set to `true`.
    pub local_mode: bool,
    /// The host the request was addressed to.
    pub host: &'a str,
    /// `CF-Connecting-IP`, when the runtime set it.
    pub connecting_ip: Option<&'a str>,
    /// The first header present that a proxy or tunnel adds ([`FORWARDING_HEADERS`]).
    pub forwarded_by: Option<&'a str>,
    /// `X-OpenInspect-Actor`: in local mode, names another local user.
    pub actor_header: Option<&'a str>,
    /// The local user's name (`LOCAL_USER`, default `local`).
    pub local_user: &'a str,
}

/// Headers that proxies, load balancers and tunnels (cloudflared, ngrok, nginx, Caddy,
/// Tailscale Funnel, CDNs) add. Any of them on a request means it was relayed: local mode
/// does not apply, whatever address it claims to come from.
pub const FORWARDING_HEADERS: &[&str] = &[
    "Forwarded",
    "X-Forwarded-For",
    "X-Forwarded-Host",
    "X-Forwarded-Proto",
    "X-Forwarded-Port",
    "X-Forwarded-Server",
    "X-Real-IP",
    "X-Client-IP",
    "X-Cluster-Client-IP",
    "True-Client-IP",
    "Fastly-Client-IP",
    "X-Original-Forwarded-For",
    "Via",
    "CDN-Loop",
    "CF-Visitor",
    "CF-Warp-Tag-Id",
    "Tailscale-User-Login",
    "Ngrok-Trace-Id",
];

pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false)
}

fn valid_local_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Local mode applies to this request: the variable is set, it came over loopback and no
/// proxy relayed it.
pub fn applies(facts: &CallerFacts<'_>) -> bool {
    facts.local_mode
        && is_loopback_host(facts.host)
        && facts.connecting_ip.is_none_or(is_loopback_host)
        && facts.forwarded_by.is_none()
}

/// Resolves the local caller, or refuses the request.
pub fn resolve(facts: &CallerFacts<'_>) -> Result<Actor, ApiError> {
    if let (true, Some(header)) = (facts.local_mode, facts.forwarded_by) {
        return Err(ApiError::unauthorized(format!(
            "local mode does not apply to relayed requests (this one carries {header}): \
             a proxy or tunnel forwards the Internet's requests to this Worker; sign in \
             (GitHub) or use an API token"
        )));
    }
    if !applies(facts) {
        return Err(ApiError::unauthorized("sign in to use this control plane"));
    }
    let name = match facts.actor_header {
        Some(n) => {
            let n = n.trim();
            if !valid_local_name(n) {
                return Err(ApiError::bad_request(
                    "X-OpenInspect-Actor must be 1-64 letters, digits, '-', '_' or '.'",
                ));
            }
            n
        }
        None => facts.local_user,
    };
    Ok(Actor {
        user_id: format!("local:{name}"),
        name: name.to_owned(),
        email: None,
        avatar: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(
        local_mode: bool,
        host: &'a str,
        ip: Option<&'a str>,
        actor: Option<&'a str>,
    ) -> CallerFacts<'a> {
        CallerFacts {
            local_mode,
            host,
            connecting_ip: ip,
            forwarded_by: None,
            actor_header: actor,
            local_user: "local",
        }
    }

    #[test]
    fn local_mode_needs_the_variable_and_loopback() {
        assert_eq!(
            resolve(&facts(true, "127.0.0.1", None, None))
                .unwrap()
                .user_id,
            "local:local"
        );
        assert_eq!(
            resolve(&facts(true, "localhost", Some("127.0.0.1"), None))
                .unwrap()
                .name,
            "local"
        );
        assert_eq!(
            resolve(&facts(true, "[::1]", None, None)).unwrap().name,
            "local"
        );
        assert!(resolve(&facts(false, "127.0.0.1", None, None)).is_err());
        assert!(resolve(&facts(true, "example.com", None, None)).is_err());
        assert!(resolve(&facts(true, "127.0.0.1", Some("203.0.113.9"), None)).is_err());
    }

    #[test]
    fn a_relayed_request_is_never_local() {
        let mut f = facts(true, "127.0.0.1", Some("127.0.0.1"), None);
        f.forwarded_by = Some("X-Forwarded-For");
        let err = resolve(&f).unwrap_err();
        assert!(err.message.contains("X-Forwarded-For"), "{}", err.message);
        assert!(!applies(&f));
    }

    #[test]
    fn the_actor_header_names_another_local_user() {
        assert_eq!(
            resolve(&facts(true, "127.0.0.1", None, Some("bob")))
                .unwrap()
                .user_id,
            "local:bob"
        );
        assert!(resolve(&facts(true, "127.0.0.1", None, Some("bob smith"))).is_err());
        assert!(resolve(&facts(true, "127.0.0.1", None, Some(""))).is_err());
    }
}
