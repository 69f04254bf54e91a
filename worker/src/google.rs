//! Sign-in with Google (OpenID Connect: the authorization code flow with PKCE and a nonce).
//! The `id_token` is checked against the provider's published keys (kept for as long as
//! their `Cache-Control` allows, fetched again when a token names a key not yet seen, as
//! after a rotation) by the runtime's WebCrypto; its claims by `auth::oidc`. The person is
//! whoever `google:<sub>` is linked to, else the one person whose verified GitHub address
//! is Google's verified address (linked then, by the email rule), else a new person.

use crate::auth::admission::{self, Identity, Policy};
use crate::auth::oidc::{self, Jwks};
use crate::auth::tokens;
use crate::db::{self, num, setting};
use crate::signin::{open_browser_session, public_origin, query, redirect, secure_cookies};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use inspect_protocol::{ApiError, ErrorCode};
use serde::Deserialize;
use std::cell::RefCell;

use worker::{Env, Request, Response};

const STATE_PATH: &str = "/auth/google";

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

fn unavailable(what: impl std::fmt::Display) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("Google sign-in: {what}"))
}

fn refused(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::Forbidden, message)
}

/// Whether Google sign-in is set up.
pub fn configured(env: &Env) -> bool {
    setting(env, "GOOGLE_CLIENT_ID").is_some() && setting(env, "GOOGLE_CLIENT_SECRET").is_some()
}

fn issuer(env: &Env) -> String {
    setting(env, "GOOGLE_OIDC_ISSUER")
        .map(|i| i.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| oidc::GOOGLE_ISSUER.to_owned())
}

#[derive(Clone, Deserialize)]
struct Discovery {
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

thread_local! {
    /// The issuer's endpoints, read once an isolate.
    static DISCOVERY: RefCell<Option<(String, Discovery)>> = const { RefCell::new(None) };
    /// The issuer's keys and until when they may be kept.
    static KEYS: RefCell<Option<(String, Jwks, i64)>> = const { RefCell::new(None) };
}

async fn get(url: &str) -> Result<(String, Option<String>), ApiError> {
    let mut resp = worker::Fetch::Url(url.parse().map_err(unavailable)?)
        .send()
        .await
        .map_err(unavailable)?;
    if resp.status_code() != 200 {
        return Err(unavailable(format!(
            "{url} answered {}",
            resp.status_code()
        )));
    }
    let cache = resp.headers().get("Cache-Control").ok().flatten();
    Ok((resp.text().await.map_err(unavailable)?, cache))
}

async fn discovery(env: &Env) -> Result<Discovery, ApiError> {
    let issuer = issuer(env);
    if let Some(d) = DISCOVERY.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|(i, _)| *i == issuer)
            .map(|(_, d)| d.clone())
    }) {
        return Ok(d);
    }
    let (text, _) = get(&format!("{issuer}/.well-known/openid-configuration")).await?;
    let found: Discovery = serde_json::from_str(&text).map_err(unavailable)?;
    DISCOVERY.with(|c| *c.borrow_mut() = Some((issuer, found.clone())));
    Ok(found)
}

/// The key a token names: from the kept set while it is fresh and has it, else fetched.
async fn key(jwks_uri: &str, kid: Option<&str>) -> Result<oidc::Jwk, ApiError> {
    let now = now_ms();
    let kept = KEYS.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|(uri, _, until)| uri == jwks_uri && *until > now)
            .and_then(|(_, jwks, _)| oidc::key_for(jwks, kid).cloned())
    });
    if let Some(k) = kept {
        return Ok(k);
    }
    let (text, cache) = get(jwks_uri).await?;
    let jwks: Jwks = serde_json::from_str(&text).map_err(unavailable)?;
    let found = oidc::key_for(&jwks, kid).cloned();
    let until = now + oidc::max_age(cache.as_deref()) * 1000;
    KEYS.with(|c| *c.borrow_mut() = Some((jwks_uri.to_owned(), jwks, until)));
    found.ok_or_else(|| refused("the id_token is signed with a key Google does not publish"))
}

fn client(env: &Env) -> Result<(String, String), ApiError> {
    match (
        setting(env, "GOOGLE_CLIENT_ID"),
        setting(env, "GOOGLE_CLIENT_SECRET"),
    ) {
        (Some(id), Some(secret)) => Ok((id, secret)),
        _ => Err(ApiError::new(
            ErrorCode::Unavailable,
            "Google sign-in is not configured: set GOOGLE_CLIENT_ID and GOOGLE_CLIENT_SECRET",
        )),
    }
}

/// `GET /auth/google?returnTo=/path`: off to Google, with a state bound to this browser,
/// a nonce and a PKCE challenge.
pub async fn start(req: &Request, env: &Env) -> Result<Response, ApiError> {
    let (client_id, _) = client(env)?;
    let endpoints = discovery(env).await?;
    let state = hex::encode(db::random::<32>()?);
    let nonce = hex::encode(db::random::<16>()?);
    let verifier = URL_SAFE_NO_PAD.encode(db::random::<32>()?);
    let return_to = tokens::safe_return_to(query(req, "returnTo").as_deref());
    let now = now_ms();
    db::sweep_then_run(
        env,
        ("DELETE FROM oauth_states WHERE expires_at <= ?1", &[num(now)]),
        (
            "INSERT INTO oauth_states (state_hash, return_to, expires_at, provider, nonce, code_verifier) VALUES (?1, ?2, ?3, 'google', ?4, ?5)",
            &[
                tokens::hash(&state).into(),
                return_to.as_str().into(),
                num(now + tokens::STATE_TTL_MS),
                nonce.as_str().into(),
                verifier.as_str().into(),
            ],
        ),
    )
    .await?;
    let redirect_uri = format!("{}/auth/google/callback", public_origin(req, env));
    let domains = oidc::domains(setting(env, "GOOGLE_WORKSPACE_DOMAINS").as_deref());
    let mut form = worker::url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("client_id", &client_id)
        .append_pair("redirect_uri", &redirect_uri)
        .append_pair("response_type", "code")
        .append_pair("scope", "openid email profile")
        .append_pair("state", &state)
        .append_pair("nonce", &nonce)
        .append_pair("code_challenge", &oidc::challenge(&verifier))
        .append_pair("code_challenge_method", "S256");
    // A hint only: the claim is checked when the token comes back.
    if let [one] = domains.as_slice() {
        form.append_pair("hd", one);
    }
    let location = format!("{}?{}", endpoints.authorization_endpoint, form.finish());
    let cookie = tokens::set_cookie(
        tokens::STATE_COOKIE,
        &state,
        STATE_PATH,
        tokens::STATE_TTL_MS / 1000,
        secure_cookies(req),
    );
    redirect(&location, &[cookie])
}

#[derive(Deserialize)]
struct TokenReply {
    #[serde(default)]
    id_token: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

/// `GET /auth/google/callback?code&state`: back from Google.
pub async fn finish(req: &Request, env: &Env) -> Result<Response, ApiError> {
    let state = crate::signin::state_of_this_browser(req)?;
    #[derive(Deserialize)]
    struct StateRow {
        return_to: String,
        nonce: Option<String>,
        code_verifier: Option<String>,
    }
    let row: Option<StateRow> = db::first(
        env,
        "DELETE FROM oauth_states WHERE state_hash = ?1 AND expires_at > ?2 AND provider = 'google'
         RETURNING return_to, nonce, code_verifier",
        &[tokens::hash(&state).into(), num(now_ms())],
    )
    .await?;
    let row = row.ok_or_else(|| {
        ApiError::bad_request("this sign-in expired or was already used; start again")
    })?;
    if let Some(error) = query(req, "error") {
        return Err(refused(format!("Google did not sign you in: {error}")));
    }
    let code = query(req, "code").ok_or_else(|| ApiError::bad_request("Google sent no code"))?;
    let (nonce, verifier) = match (row.nonce, row.code_verifier) {
        (Some(n), Some(v)) => (n, v),
        _ => {
            return Err(ApiError::bad_request(
                "this sign-in is not Google's; start again",
            ))
        }
    };
    let (client_id, client_secret) = client(env)?;
    let endpoints = discovery(env).await?;
    let redirect_uri = format!("{}/auth/google/callback", public_origin(req, env));
    let form = worker::url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "authorization_code")
        .append_pair("code", &code)
        .append_pair("client_id", &client_id)
        .append_pair("client_secret", &client_secret)
        .append_pair("redirect_uri", &redirect_uri)
        .append_pair("code_verifier", &verifier)
        .finish();
    let (status, text) = inspect_runtime::form::post_form(&endpoints.token_endpoint, &form).await?;
    let reply: TokenReply = serde_json::from_str(&text)
        .map_err(|_| unavailable(format!("the token endpoint answered {status}")))?;
    let id_token = match (reply.id_token, reply.error) {
        (Some(t), None) => t,
        (_, e) => {
            return Err(refused(format!(
                "Google refused the code: {}",
                reply
                    .error_description
                    .or(e)
                    .unwrap_or_else(|| "no id_token".into())
            )))
        }
    };
    let parsed = oidc::parse(&id_token).map_err(refused)?;
    let jwk = key(&endpoints.jwks_uri, parsed.header.kid.as_deref()).await?;
    let holds = inspect_runtime::webcrypto::rs256_verify(
        &jwk.n,
        &jwk.e,
        parsed.signing_input.as_bytes(),
        &parsed.signature,
    )
    .await?
    .ok_or_else(|| refused("Google's published key could not be read"))?;
    if !holds {
        return Err(refused("the id_token's signature does not hold"));
    }
    let domains = oidc::domains(setting(env, "GOOGLE_WORKSPACE_DOMAINS").as_deref());
    let issuer = issuer(env);
    let now = now_ms();
    let who = oidc::check(
        &parsed.claims,
        &oidc::Expected {
            issuer: &issuer,
            client_id: &client_id,
            nonce: &nonce,
            hosted_domains: &domains,
            now_s: now / 1000,
        },
    )
    .map_err(refused)?;
    let policy = Policy::from_vars(|n| setting(env, n));
    let identity = Identity {
        login: who.email.clone(),
        verified_emails: vec![who.email.clone()],
        active_orgs: Vec::new(),
    };
    if let Err(why) = admission::admit(&policy, &identity) {
        inspect_runtime::log::emit(
            inspect_runtime::log::LogLine::warn("sign_in", "refused")
                .with("provider", "google")
                .detail(&why),
        );
        return Err(refused(why));
    }
    let user_id = crate::people::google_person(env, &who, now).await?;
    inspect_runtime::log::emit(
        inspect_runtime::log::LogLine::info("sign_in", "signed_in")
            .actor(&user_id)
            .with("provider", "google"),
    );
    open_browser_session(req, env, &user_id, &row.return_to, STATE_PATH, now).await
}
