//! Google sign-in (OpenID Connect, the authorization code flow with PKCE): the pieces that
//! decide, tested natively — the PKCE challenge, the `id_token`'s parts, and every check of
//! its claims (`iss`, `aud`, `exp`, `nonce`, `email_verified`, `hd`). The signature is
//! checked by the runtime's WebCrypto against the provider's published keys (`google.rs`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Google's issuer; its `id_token`s name it with or without the scheme.
pub const GOOGLE_ISSUER: &str = "https://accounts.google.com";

/// Seconds of clock difference tolerated on `exp` and `iat`.
pub const LEEWAY_S: i64 = 60;

/// The PKCE challenge (`S256`) of a verifier.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// An `id_token`'s header (the fields used).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Header {
    pub alg: String,
    #[serde(default)]
    pub kid: Option<String>,
}

/// `aud` is a string or a list of strings.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn has(&self, client_id: &str) -> bool {
        match self {
            Audience::One(a) => a == client_id,
            Audience::Many(all) => all.iter().any(|a| a == client_id),
        }
    }
}

/// `email_verified` arrives as a boolean, and from some issuers as a string.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Flag {
    Bool(bool),
    Text(String),
}

impl Flag {
    fn is_true(&self) -> bool {
        matches!(self, Flag::Bool(true)) || matches!(self, Flag::Text(t) if t == "true")
    }
}

/// The claims read from an `id_token`.
#[derive(Debug, Clone, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub aud: Audience,
    pub exp: i64,
    #[serde(default)]
    pub iat: Option<i64>,
    #[serde(default)]
    pub nonce: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub email_verified: Option<Flag>,
    #[serde(default)]
    pub hd: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub picture: Option<String>,
}

/// A token split and decoded: what is signed, the signature, and the two JSON parts.
#[derive(Debug)]
pub struct Parsed {
    pub header: Header,
    pub claims: Claims,
    pub signing_input: String,
    pub signature: Vec<u8>,
}

/// Splits a compact JWS; an error says what is wrong (safe to show).
pub fn parse(token: &str) -> Result<Parsed, String> {
    let mut parts = token.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the id_token is not a signed JWT (three parts)".into());
    };
    let decode = |part: &str, what: &str| {
        URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| format!("the id_token's {what} is not base64url"))
    };
    let header: Header = serde_json::from_slice(&decode(h, "header")?)
        .map_err(|e| format!("the id_token's header: {e}"))?;
    if header.alg != "RS256" {
        return Err(format!(
            "the id_token is signed with {:?}; only RS256 is accepted",
            header.alg
        ));
    }
    let claims: Claims = serde_json::from_slice(&decode(c, "claims")?)
        .map_err(|e| format!("the id_token's claims: {e}"))?;
    let signature = decode(s, "signature")?;
    if signature.is_empty() {
        return Err("the id_token is not signed".into());
    }
    Ok(Parsed {
        header,
        claims,
        signing_input: format!("{h}.{c}"),
        signature,
    })
}

/// What the claims must say.
pub struct Expected<'a> {
    /// The configured issuer (Google's unless a test points elsewhere).
    pub issuer: &'a str,
    pub client_id: &'a str,
    /// The nonce this sign-in sent.
    pub nonce: &'a str,
    /// Workspace domains one of which `hd` must name (empty: any account).
    pub hosted_domains: &'a [String],
    pub now_s: i64,
}

/// The person an `id_token` proves, once its claims pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub sub: String,
    pub email: String,
    pub name: Option<String>,
    pub picture: Option<String>,
}

/// Checks every claim; the refusal says which (safe to show the person).
pub fn check(claims: &Claims, want: &Expected) -> Result<Verified, String> {
    let issuer_ok = claims.iss == want.issuer
        || (want.issuer == GOOGLE_ISSUER && claims.iss == "accounts.google.com");
    if !issuer_ok {
        return Err(format!(
            "the id_token was issued by {:?}, not {:?}",
            claims.iss, want.issuer
        ));
    }
    if !claims.aud.has(want.client_id) {
        return Err("the id_token is for another application (audience)".into());
    }
    if claims.exp + LEEWAY_S <= want.now_s {
        return Err("the id_token has expired; sign in again".into());
    }
    if claims.iat.is_some_and(|iat| iat > want.now_s + LEEWAY_S) {
        return Err("the id_token was issued in the future".into());
    }
    if claims.nonce.as_deref() != Some(want.nonce) {
        return Err("the id_token does not answer this sign-in (nonce)".into());
    }
    if claims.sub.is_empty() || claims.sub.len() > 255 {
        return Err("the id_token names nobody (sub)".into());
    }
    let email = claims
        .email
        .as_deref()
        .filter(|e| e.contains('@'))
        .ok_or("the id_token carries no address; allow the email scope")?;
    if !claims.email_verified.as_ref().is_some_and(Flag::is_true) {
        return Err(format!("Google has not verified {email}"));
    }
    if !want.hosted_domains.is_empty() {
        let hd = claims
            .hd
            .as_deref()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !want.hosted_domains.contains(&hd) {
            return Err(format!(
                "{email} is not an account of an allowed Google Workspace domain"
            ));
        }
    }
    Ok(Verified {
        sub: claims.sub.clone(),
        email: email.to_ascii_lowercase(),
        name: claims.name.clone(),
        picture: claims.picture.clone(),
    })
}

/// A published key (one of the JWKS's `keys`), the fields WebCrypto needs.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Jwk {
    pub kty: String,
    #[serde(default)]
    pub kid: Option<String>,
    #[serde(default)]
    pub alg: Option<String>,
    #[serde(default, rename = "use")]
    pub use_: Option<String>,
    pub n: String,
    pub e: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

/// The RSA signing key named `kid` (the only one, when the token names none).
pub fn key_for<'a>(jwks: &'a Jwks, kid: Option<&str>) -> Option<&'a Jwk> {
    let usable = |k: &&Jwk| {
        k.kty == "RSA"
            && k.use_.as_deref().is_none_or(|u| u == "sig")
            && k.alg.as_deref().is_none_or(|a| a == "RS256")
    };
    match kid {
        Some(kid) => jwks
            .keys
            .iter()
            .filter(usable)
            .find(|k| k.kid.as_deref() == Some(kid)),
        None => {
            let mut all = jwks.keys.iter().filter(usable);
            let only = all.next();
            if all.next().is_some() {
                None
            } else {
                only
            }
        }
    }
}

/// Seconds a JWKS answer may be kept (`Cache-Control: max-age`), within 1 minute..1 day.
pub fn max_age(cache_control: Option<&str>) -> i64 {
    cache_control
        .unwrap_or_default()
        .split(',')
        .find_map(|d| d.trim().strip_prefix("max-age=")?.parse::<i64>().ok())
        .unwrap_or(3600)
        .clamp(60, 86_400)
}

/// `GOOGLE_WORKSPACE_DOMAINS`, parsed.
pub fn domains(value: Option<&str>) -> Vec<String> {
    super::admission::list(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(header: &str, claims: &serde_json::Value, sig: &[u8]) -> String {
        format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(claims.to_string()),
            URL_SAFE_NO_PAD.encode(sig)
        )
    }

    fn claims() -> serde_json::Value {
        // The shape of Google's documented id_token payload.
        serde_json::json!({
            "iss": "https://accounts.google.com", "azp": "1234987819200.apps.googleusercontent.com",
            "aud": "1234987819200.apps.googleusercontent.com", "sub": "10769150350006150715113082367",
            "at_hash": "HK6E_P6Dh8Y93mRNtsDB1Q", "hd": "example.com", "email": "jsmith@example.com",
            "email_verified": true, "iat": 1_353_601_026, "exp": 1_353_604_926, "nonce": "0394852-3190485-2490358",
            "name": "J Smith", "picture": null
        })
    }

    fn want(domains: &[String]) -> Expected<'_> {
        Expected {
            issuer: GOOGLE_ISSUER,
            client_id: "1234987819200.apps.googleusercontent.com",
            nonce: "0394852-3190485-2490358",
            hosted_domains: domains,
            now_s: 1_353_601_100,
        }
    }

    fn checked(c: serde_json::Value, domains: &[String]) -> Result<Verified, String> {
        let token = jwt(r#"{"alg":"RS256","kid":"k1"}"#, &c, b"sig");
        check(&parse(&token)?.claims, &want(domains))
    }

    #[test]
    fn the_pkce_challenge_is_rfc_7636s() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn googles_example_token_passes_and_each_claim_is_checked() {
        let example = ["example.com".to_owned()];
        let ok = checked(claims(), &example).unwrap();
        assert_eq!(ok.email, "jsmith@example.com");
        assert_eq!(ok.sub, "10769150350006150715113082367");
        let mut short = claims();
        short["iss"] = "accounts.google.com".into();
        assert!(checked(short, &[]).is_ok());

        let refused = |change: &dyn Fn(&mut serde_json::Value), domains: &[String], says: &str| {
            let mut c = claims();
            change(&mut c);
            let why = checked(c, domains).unwrap_err();
            assert!(why.contains(says), "{why} (wanted {says})");
        };
        refused(&|c| c["aud"] = "someone-else".into(), &[], "audience");
        refused(
            &|c| c["aud"] = serde_json::json!(["a", "b"]),
            &[],
            "audience",
        );
        refused(
            &|c| c["iss"] = "https://evil.example".into(),
            &[],
            "issued by",
        );
        refused(&|c| c["exp"] = 1_353_600_000.into(), &[], "expired");
        refused(&|c| c["iat"] = 1_453_600_000i64.into(), &[], "future");
        refused(&|c| c["nonce"] = "other".into(), &[], "nonce");
        refused(&|c| c["email_verified"] = false.into(), &[], "not verified");
        refused(
            &|c| c["email_verified"] = "false".into(),
            &[],
            "not verified",
        );
        refused(
            &|c| {
                c.as_object_mut()
                    .unwrap()
                    .remove("email")
                    .map(|_| ())
                    .unwrap()
            },
            &[],
            "no address",
        );
        refused(&|c| c["hd"] = "other.example".into(), &example, "Workspace");
        refused(
            &|c| c.as_object_mut().unwrap().remove("hd").map(|_| ()).unwrap(),
            &example,
            "Workspace",
        );
        let mut listed = claims();
        listed["aud"] = serde_json::json!(["x", "1234987819200.apps.googleusercontent.com"]);
        listed["email_verified"] = "true".into();
        assert!(checked(listed, &[]).is_ok());
    }

    #[test]
    fn unsigned_and_foreign_tokens_are_refused_before_their_claims() {
        let none = jwt(r#"{"alg":"none"}"#, &claims(), b"");
        assert!(parse(&none).unwrap_err().contains("RS256"));
        let hs = jwt(r#"{"alg":"HS256"}"#, &claims(), b"sig");
        assert!(parse(&hs).unwrap_err().contains("RS256"));
        let unsigned = jwt(r#"{"alg":"RS256"}"#, &claims(), b"");
        assert!(parse(&unsigned).unwrap_err().contains("not signed"));
        assert!(parse("a.b").is_err());
        assert!(parse("a.b.c.d").is_err());
        assert!(parse("!!.??.xx").is_err());
    }

    #[test]
    fn keys_are_found_by_kid_and_kept_as_long_as_they_may_be() {
        let jwks: Jwks = serde_json::from_value(serde_json::json!({"keys": [
            {"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig", "n": "AQAB", "e": "AQAB"},
            {"kty": "RSA", "kid": "k2", "n": "AQAB", "e": "AQAB"},
            {"kty": "EC", "kid": "k3", "n": "", "e": ""}
        ]}))
        .unwrap();
        assert_eq!(
            key_for(&jwks, Some("k2")).unwrap().kid.as_deref(),
            Some("k2")
        );
        assert!(key_for(&jwks, Some("k3")).is_none());
        assert!(key_for(&jwks, Some("k9")).is_none());
        assert!(
            key_for(&jwks, None).is_none(),
            "two keys and no kid decide nothing"
        );
        assert_eq!(
            max_age(Some("public, max-age=19842, must-revalidate")),
            19_842
        );
        assert_eq!(max_age(Some("no-store")), 3600);
        assert_eq!(max_age(Some("max-age=1")), 60);
        assert_eq!(
            domains(Some(" Corp.Example, @b.example,")),
            ["corp.example", "b.example"]
        );
    }
}
