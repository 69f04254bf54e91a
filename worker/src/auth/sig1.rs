//! Service clients (the Slack, GitHub and Linear bots, scripts) sign each request with
//! HMAC-SHA256 in the original system's `sig1` scheme:
//!
//! `X-OpenInspect-Service: <service>` and
//! `X-OpenInspect-Service-Signature: sig1.<timestampMs>.<nonce hex>.<hmac hex>`, where the
//! HMAC covers, joined by `\n`: `sig1`, service, timestampMs, nonce, METHOD, path, the
//! canonical query, hex SHA-256 of the body, and the asserted actor (empty if none).
//! A signature is good for ±5 minutes; each service has its own secret.

use hmac::{Hmac, Mac};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use sha2::{Digest, Sha256};

pub use inspect_protocol::auth::{ACTOR_HEADER, SERVICE_HEADER, SIGNATURE_HEADER};
/// How far a signature's time may be from ours, either way.
pub const WINDOW_MS: i64 = 5 * 60 * 1000;

/// The services that may sign, and the Worker secret that holds each one's key.
pub const SERVICES: &[(&str, &str)] = &[
    ("web", "SERVICE_AUTH_SECRET_WEB"),
    ("slack-bot", "SERVICE_AUTH_SECRET_SLACK_BOT"),
    ("github-bot", "SERVICE_AUTH_SECRET_GITHUB_BOT"),
    ("linear-bot", "SERVICE_AUTH_SECRET_LINEAR_BOT"),
];

/// The secret's variable for a service, if it is one we know.
pub fn secret_var(service: &str) -> Option<&'static str> {
    SERVICES
        .iter()
        .find(|(name, _)| *name == service)
        .map(|(_, var)| *var)
}

/// What `encodeURIComponent` leaves alone: letters, digits and `-_.!~*'()`.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// The decoded query pairs sorted bytewise by `key\0value`, re-encoded, `&`-joined.
pub fn canonical_query(pairs: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = pairs.iter().collect();
    sorted.sort_by(|a, b| {
        (a.0.as_bytes(), 0u8, a.1.as_bytes()).cmp(&(b.0.as_bytes(), 0u8, b.1.as_bytes()))
    });
    sorted
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, COMPONENT),
                utf8_percent_encode(v, COMPONENT)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The request as the verifier sees it.
pub struct Signed<'a> {
    pub service: &'a str,
    pub signature_header: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a [(String, String)],
    pub body: &'a [u8],
    pub actor: &'a str,
}

/// Why a signature was refused, cheapest check first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The header is not `sig1.<1-16 digits>.<1-64 lower hex>.<64 lower hex>`.
    Format,
    /// Outside ±5 minutes.
    Expired,
    /// The HMAC does not match.
    Mismatch,
}

impl Refusal {
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Format => "malformed service signature",
            Refusal::Expired => "service signature is outside its 5-minute window",
            Refusal::Mismatch => "service signature does not match",
        }
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

struct Parts<'a> {
    timestamp: &'a str,
    nonce: &'a str,
    mac: &'a str,
}

fn parse(header: &str) -> Option<Parts<'_>> {
    let mut it = header.split('.');
    let (scheme, timestamp, nonce, mac) = (it.next()?, it.next()?, it.next()?, it.next()?);
    if it.next().is_some()
        || scheme != "sig1"
        || timestamp.is_empty()
        || timestamp.len() > 16
        || !timestamp.bytes().all(|b| b.is_ascii_digit())
        || nonce.is_empty()
        || nonce.len() > 64
        || !is_lower_hex(nonce)
        || mac.len() != 64
        || !is_lower_hex(mac)
    {
        return None;
    }
    Some(Parts {
        timestamp,
        nonce,
        mac,
    })
}

/// The string the HMAC covers, for a request and the header's time and nonce.
pub fn canonical_string(req: &Signed<'_>, timestamp: &str, nonce: &str) -> String {
    format!(
        "sig1\n{}\n{timestamp}\n{nonce}\n{}\n{}\n{}\n{}\n{}",
        req.service,
        req.method.to_ascii_uppercase(),
        req.path,
        canonical_query(req.query),
        sha256_hex(req.body),
        req.actor
    )
}

/// Checks a signed request against the service's secret at `now_ms`.
pub fn verify(secret: &[u8], req: &Signed<'_>, now_ms: i64) -> Result<(), Refusal> {
    let parts = parse(req.signature_header).ok_or(Refusal::Format)?;
    let at: i64 = parts.timestamp.parse().map_err(|_| Refusal::Format)?;
    if (now_ms - at).abs() > WINDOW_MS {
        return Err(Refusal::Expired);
    }
    let expected = hex::decode(parts.mac).map_err(|_| Refusal::Format)?;
    let canonical = canonical_string(req, parts.timestamp, parts.nonce);
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).map_err(|_| Refusal::Mismatch)?;
    mac.update(canonical.as_bytes());
    // `verify_slice` compares in constant time.
    mac.verify_slice(&expected).map_err(|_| Refusal::Mismatch)
}

/// Whom a verified request acts for: the asserted actor (`provider:id`, e.g.
/// `slack:U123`), or with none the service itself (`service:<name>`).
pub fn acting_for(service: &str, asserted: &str) -> Result<String, &'static str> {
    let actor = asserted.trim();
    if actor.is_empty() {
        return Ok(format!("service:{service}"));
    }
    let valid = actor.len() <= 128
        && actor.contains(':')
        && !actor.chars().any(|c| c.is_control() || c.is_whitespace());
    if valid {
        Ok(actor.to_owned())
    } else {
        Err("X-OpenInspect-Actor must look like provider:id")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    // Vectors computed outside this crate (Python's hmac/hashlib), over
    // "sig1\nslack-bot\n1767225600000\n0a1b2c3d\nPOST\n/sessions\na=1&b=x%20y&b=z\n<sha256(body)>\nslack:U123".
    const BODY: &[u8] = br#"{"repoOwner":"acme","repoName":"web"}"#;
    const MAC: &str = "6cec683a08da94bde234dee7152e8254ad876146c4797373973f205f9265d4fd";
    const AT: i64 = 1_767_225_600_000;

    fn signed<'a>(header: &'a str, query: &'a [(String, String)], actor: &'a str) -> Signed<'a> {
        Signed {
            service: "slack-bot",
            signature_header: header,
            method: "POST",
            path: "/sessions",
            query,
            body: BODY,
            actor,
        }
    }

    #[test]
    fn the_canonical_query_sorts_decoded_pairs() {
        assert_eq!(
            canonical_query(&pairs(&[("b", "z"), ("a", "1"), ("b", "x y")])),
            "a=1&b=x%20y&b=z"
        );
        assert_eq!(canonical_query(&[]), "");
        assert_eq!(
            canonical_query(&pairs(&[("k", "a/b?c=d&e'(f)*~!")])),
            "k=a%2Fb%3Fc%3Dd%26e'(f)*~!"
        );
        assert_eq!(
            sha256_hex(BODY),
            "4ed771c6509f6e84b8f68fd6d600eaf6e4a9ff12c05b2d1f885bb1b0bfff92e6"
        );
    }

    #[test]
    fn an_independently_computed_signature_verifies() {
        let q = pairs(&[("b", "z"), ("a", "1"), ("b", "x y")]);
        let header = format!("sig1.{AT}.0a1b2c3d.{MAC}");
        assert_eq!(
            verify(b"vector-secret", &signed(&header, &q, "slack:U123"), AT),
            Ok(())
        );
        // Within the window either way.
        assert!(verify(
            b"vector-secret",
            &signed(&header, &q, "slack:U123"),
            AT + WINDOW_MS
        )
        .is_ok());
        assert!(verify(
            b"vector-secret",
            &signed(&header, &q, "slack:U123"),
            AT - WINDOW_MS
        )
        .is_ok());

        let empty = "957d5a021bdf37ff8a769638b5ab0891dda2c6dddbbfaf18def46cee517f5b57";
        let get = Signed {
            service: "github-bot",
            signature_header: &format!("sig1.{AT}.ff.{empty}"),
            method: "get",
            path: "/sessions",
            query: &[],
            body: b"",
            actor: "",
        };
        assert_eq!(verify(b"other", &get, AT), Ok(()));
    }

    #[test]
    fn tampering_is_refused() {
        let q = pairs(&[("b", "z"), ("a", "1"), ("b", "x y")]);
        let header = format!("sig1.{AT}.0a1b2c3d.{MAC}");
        let ok = |s: &Signed<'_>| verify(b"vector-secret", s, AT);
        assert_eq!(
            verify(b"wrong", &signed(&header, &q, "slack:U123"), AT),
            Err(Refusal::Mismatch)
        );
        assert_eq!(
            ok(&signed(&header, &q, "slack:U999")),
            Err(Refusal::Mismatch)
        );
        let other_q = pairs(&[("a", "2"), ("b", "x y"), ("b", "z")]);
        assert_eq!(
            ok(&signed(&header, &other_q, "slack:U123")),
            Err(Refusal::Mismatch)
        );
        let mut s = signed(&header, &q, "slack:U123");
        s.body = b"{}";
        assert_eq!(ok(&s), Err(Refusal::Mismatch));
        let mut s = signed(&header, &q, "slack:U123");
        s.method = "PUT";
        assert_eq!(ok(&s), Err(Refusal::Mismatch));
        let mut s = signed(&header, &q, "slack:U123");
        s.path = "/sessions/x";
        assert_eq!(ok(&s), Err(Refusal::Mismatch));
        let mut s = signed(&header, &q, "slack:U123");
        s.service = "linear-bot";
        assert_eq!(ok(&s), Err(Refusal::Mismatch));
        let shifted = format!("sig1.{}.0a1b2c3d.{MAC}", AT + 1);
        assert_eq!(
            ok(&signed(&shifted, &q, "slack:U123")),
            Err(Refusal::Mismatch)
        );
        // Replayed after the window.
        assert_eq!(
            verify(
                b"vector-secret",
                &signed(&header, &q, "slack:U123"),
                AT + WINDOW_MS + 1
            ),
            Err(Refusal::Expired)
        );
    }

    #[test]
    fn malformed_headers_are_refused_before_any_hmac() {
        let q = [];
        for h in [
            "",
            "sig1",
            "sig2.1.ab.".to_string().as_str(),
            &format!("sig1.{AT}.0A1B.{MAC}"),
            &format!("sig1.1e3.ab.{MAC}"),
            &format!("sig1.{AT}..{MAC}"),
            &format!("sig1.{AT}.ab.{}", &MAC[..63]),
            &format!("sig1.{AT}.ab.{}", MAC.to_uppercase()),
            &format!("sig1.{AT}.ab.{MAC}.x"),
            &format!("sig1.12345678901234567.ab.{MAC}"),
        ] {
            assert_eq!(
                verify(b"k", &signed(h, &q, ""), AT),
                Err(Refusal::Format),
                "{h:?}"
            );
        }
    }

    #[test]
    fn the_actor_is_asserted_or_the_service() {
        assert_eq!(acting_for("slack-bot", "slack:U123").unwrap(), "slack:U123");
        assert_eq!(acting_for("slack-bot", "").unwrap(), "service:slack-bot");
        for bad in [
            "U123",
            "slack: U1",
            "a:\nb",
            &format!("x:{}", "y".repeat(130)),
        ] {
            assert!(acting_for("slack-bot", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn services_have_their_own_secrets() {
        assert_eq!(
            secret_var("slack-bot"),
            Some("SERVICE_AUTH_SECRET_SLACK_BOT")
        );
        assert_eq!(secret_var("evil"), None);
    }
}
