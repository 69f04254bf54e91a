//! A fake of Google's OpenID Connect provider, as Google documents it ("OpenID Connect",
//! developers.google.com/identity/openid-connect): the discovery document, the
//! authorization endpoint (`/o/oauth2/v2/auth`, `response_type=code`, `scope` with
//! `openid`, PKCE `S256`), the token endpoint (`grant_type=authorization_code`, the code
//! once, the same `redirect_uri`, the client's secret, the PKCE verifier; errors as
//! `{"error": "invalid_grant", …}`), and the keys (`/oauth2/v3/certs`, RSA, `kid`, with
//! `Cache-Control: max-age`). `id_token`s are RS256 JWTs whose claims are Google's
//! (`iss`, `azp`, `aud`, `sub`, `email`, `email_verified`, `hd`, `iat`, `exp`, `nonce`,
//! `name`, `picture`). Keys rotate on request: the new key signs, both are published.
//! A test can make the next token wrong in one way (another audience, expired, unsigned,
//! signed with a key Google does not publish).

use crate::fakes::github::{openssl, random_hex, rsa_private_key};
use anyhow::{Context, Result};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub const CLIENT_ID: &str = "1234987819200.apps.googleusercontent.com";
pub const CLIENT_SECRET: &str = "fake-google-client-secret";

/// Someone with a Google account.
#[derive(Debug, Clone)]
pub struct GoogleAccount {
    pub sub: String,
    pub email: String,
    pub email_verified: bool,
    /// The Workspace domain (`hd`), for a Workspace account.
    pub hd: Option<String>,
    pub name: String,
}

/// What the next `id_token` gets wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// Issued to another client.
    Audience,
    /// Expired an hour ago.
    Expired,
    /// `alg: none`, no signature.
    Unsigned,
    /// Signed with a key that is not published, under a published key's id.
    ForeignKey,
}

struct Key {
    kid: String,
    pem: String,
    n: String,
}

struct Grant {
    redirect_uri: String,
    challenge: String,
    nonce: String,
    account: GoogleAccount,
}

#[derive(Default)]
struct World {
    published: Vec<Key>,
    /// Never published: signs the `ForeignKey` flaw.
    stranger: Option<Key>,
    approving: Option<GoogleAccount>,
    codes: HashMap<String, Grant>,
    flaw: Option<Flaw>,
    key_fetches: usize,
}

pub struct FakeGoogle {
    pub base_url: String,
    world: Arc<Mutex<World>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeGoogle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn new_key() -> Result<Key> {
    let pem = rsa_private_key()?;
    let modulus = openssl(&["rsa", "-noout", "-modulus"], Some(&pem))?;
    let hex_n = modulus
        .trim()
        .strip_prefix("Modulus=")
        .context("openssl's modulus")?;
    let n = URL_SAFE_NO_PAD.encode(hex::decode(hex_n)?);
    Ok(Key {
        kid: random_hex(20),
        pem,
        n,
    })
}

#[derive(Clone)]
struct Shared {
    base_url: String,
    world: Arc<Mutex<World>>,
}

impl Shared {
    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl FakeGoogle {
    pub async fn start() -> Result<FakeGoogle> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let world = Arc::new(Mutex::new(World {
            published: vec![new_key()?],
            stranger: Some(new_key()?),
            ..Default::default()
        }));
        let shared = Shared {
            base_url: base_url.clone(),
            world: world.clone(),
        };
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/o/oauth2/v2/auth", get(authorize))
            .route("/token", post(token))
            .route("/oauth2/v3/certs", get(certs))
            .with_state(shared);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeGoogle {
            base_url,
            world,
            task,
        })
    }

    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The Worker's settings for Google sign-in against this fake.
    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("GOOGLE_CLIENT_ID".into(), CLIENT_ID.into()),
            ("GOOGLE_CLIENT_SECRET".into(), CLIENT_SECRET.into()),
            ("GOOGLE_OIDC_ISSUER".into(), self.base_url.clone()),
        ]
    }

    /// Who approves the next authorization.
    pub fn sign_in_as(&self, account: GoogleAccount) {
        self.world().approving = Some(account);
    }

    /// The next `id_token` is wrong in this way.
    pub fn flaw_next(&self, flaw: Flaw) {
        self.world().flaw = Some(flaw);
    }

    /// A new key signs from now on; the old one stays published.
    pub fn rotate(&self) -> Result<()> {
        let key = new_key()?;
        self.world().published.push(key);
        Ok(())
    }

    /// How many times the keys were fetched.
    pub fn key_fetches(&self) -> usize {
        self.world().key_fetches
    }
}

async fn discovery(State(s): State<Shared>) -> Json<Value> {
    let b = &s.base_url;
    Json(json!({
        "issuer": b,
        "authorization_endpoint": format!("{b}/o/oauth2/v2/auth"),
        "token_endpoint": format!("{b}/token"),
        "jwks_uri": format!("{b}/oauth2/v3/certs"),
        "response_types_supported": ["code", "token", "id_token", "code token", "code id_token", "token id_token", "code token id_token", "none"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "scopes_supported": ["openid", "email", "profile"],
        "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
        "code_challenge_methods_supported": ["plain", "S256"],
        "grant_types_supported": ["authorization_code", "refresh_token"]
    }))
}

fn bad(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

async fn authorize(State(s): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Response {
    let p = |k: &str| q.get(k).cloned().unwrap_or_default();
    if p("client_id") != CLIENT_ID {
        return bad(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "The OAuth client was not found.",
        );
    }
    if p("response_type") != "code" || !p("scope").split(' ').any(|s| s == "openid") {
        return bad(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "response_type and scope",
        );
    }
    if p("code_challenge_method") != "S256" || p("code_challenge").len() != 43 {
        return bad(StatusCode::BAD_REQUEST, "invalid_request", "code_challenge");
    }
    let redirect_uri = p("redirect_uri");
    let Some(account) = s.world().approving.clone() else {
        return bad(
            StatusCode::FORBIDDEN,
            "access_denied",
            "nobody is signing in",
        );
    };
    let code = format!("4/{}", random_hex(24));
    s.world().codes.insert(
        code.clone(),
        Grant {
            redirect_uri: redirect_uri.clone(),
            challenge: p("code_challenge"),
            nonce: p("nonce"),
            account,
        },
    );
    let back = format!(
        "{redirect_uri}?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("state", &p("state"))
            .append_pair("code", &code)
            .append_pair("scope", "email profile openid")
            .finish()
    );
    (StatusCode::FOUND, [(axum::http::header::LOCATION, back)]).into_response()
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

async fn token(State(s): State<Shared>, Form(f): Form<HashMap<String, String>>) -> Response {
    let p = |k: &str| f.get(k).cloned().unwrap_or_default();
    if p("client_id") != CLIENT_ID || p("client_secret") != CLIENT_SECRET {
        return bad(StatusCode::UNAUTHORIZED, "invalid_client", "Unauthorized");
    }
    if p("grant_type") != "authorization_code" {
        return bad(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "Invalid grant_type",
        );
    }
    let Some(grant) = s.world().codes.remove(&p("code")) else {
        return bad(StatusCode::BAD_REQUEST, "invalid_grant", "Bad Request");
    };
    if grant.redirect_uri != p("redirect_uri") {
        return bad(
            StatusCode::BAD_REQUEST,
            "redirect_uri_mismatch",
            "Bad Request",
        );
    }
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(p("code_verifier").as_bytes()));
    if challenge != grant.challenge {
        return bad(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "Missing code verifier.",
        );
    }
    let now = now_s();
    let a = &grant.account;
    let mut claims = json!({
        "iss": s.base_url, "azp": CLIENT_ID, "aud": CLIENT_ID, "sub": a.sub,
        "email": a.email, "email_verified": a.email_verified, "at_hash": random_hex(8),
        "nonce": grant.nonce, "name": a.name, "picture": null, "iat": now, "exp": now + 3600
    });
    if let Some(hd) = &a.hd {
        claims["hd"] = json!(hd);
    }
    let flaw = s.world().flaw.take();
    match flaw {
        Some(Flaw::Audience) => claims["aud"] = json!("someone-else.apps.googleusercontent.com"),
        Some(Flaw::Expired) => {
            claims["iat"] = json!(now - 7200);
            claims["exp"] = json!(now - 3600);
        }
        _ => {}
    }
    let id_token = {
        let w = s.world();
        let signer = w.published.last().expect("a key");
        match flaw {
            Some(Flaw::Unsigned) => format!(
                "{}.{}.",
                URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#),
                URL_SAFE_NO_PAD.encode(claims.to_string())
            ),
            Some(Flaw::ForeignKey) => sign(
                w.stranger.as_ref().expect("a stranger"),
                &signer.kid,
                &claims,
            ),
            _ => sign(signer, &signer.kid, &claims),
        }
    };
    Json(json!({
        "access_token": format!("ya29.{}", random_hex(20)),
        "expires_in": 3599,
        "scope": "openid https://www.googleapis.com/auth/userinfo.email https://www.googleapis.com/auth/userinfo.profile",
        "token_type": "Bearer",
        "id_token": id_token
    }))
    .into_response()
}

fn sign(key: &Key, kid: &str, claims: &Value) -> String {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    let encoding = jsonwebtoken::EncodingKey::from_rsa_pem(key.pem.as_bytes()).expect("an RSA key");
    jsonwebtoken::encode(&header, claims, &encoding).expect("a signed token")
}

async fn certs(State(s): State<Shared>) -> Response {
    let mut w = s.world();
    w.key_fetches += 1;
    let keys: Vec<Value> = w
        .published
        .iter()
        .map(|k| json!({"kty": "RSA", "alg": "RS256", "use": "sig", "kid": k.kid, "n": k.n, "e": "AQAB"}))
        .collect();
    (
        [(
            axum::http::header::CACHE_CONTROL,
            "public, max-age=19842, must-revalidate, no-transform",
        )],
        Json(json!({ "keys": keys })),
    )
        .into_response()
}
