//! Sign-in with GitHub (OAuth authorization code flow with a single-use `state` bound to
//! the browser by a cookie), the session cookie, sign-out and `GET /auth/me`.

use crate::auth::admission::{self, Identity, Policy};
use crate::auth::{is_loopback_host, tokens};
use crate::caller::{Caller, Via};
use crate::db::{self, num, setting};
use inspect_github::client as github;
use inspect_protocol::auth::Me;
use inspect_protocol::{ApiError, ErrorCode};
use serde::Deserialize;
use worker::{Env, Headers, Request, Response};

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

fn internal(e: worker::Error) -> ApiError {
    ApiError::internal(e.to_string())
}

pub(crate) fn query(req: &Request, name: &str) -> Option<String> {
    req.url()
        .ok()?
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Where this control plane is reached: `PUBLIC_URL`, else the request's origin.
pub(crate) fn public_origin(req: &Request, env: &Env) -> String {
    setting(env, "PUBLIC_URL")
        .map(|u| u.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| {
            req.url()
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_default()
        })
}

/// Cookies are `Secure` except when the browser talks to us on loopback over plain HTTP.
pub(crate) fn secure_cookies(req: &Request) -> bool {
    req.url()
        .map(|u| !(u.scheme() == "http" && is_loopback_host(u.host_str().unwrap_or_default())))
        .unwrap_or(true)
}

pub(crate) fn redirect(location: &str, cookies: &[String]) -> Result<Response, ApiError> {
    let headers = Headers::new();
    headers.set("Location", location).map_err(internal)?;
    headers.set("Cache-Control", "no-store").map_err(internal)?;
    for c in cookies {
        headers.append("Set-Cookie", c).map_err(internal)?;
    }
    Ok(Response::empty()
        .map_err(internal)?
        .with_status(302)
        .with_headers(headers))
}

fn client_id(env: &Env) -> Result<String, ApiError> {
    setting(env, "GITHUB_CLIENT_ID").ok_or_else(|| {
        ApiError::new(
            ErrorCode::Unavailable,
            "GitHub sign-in is not configured: set GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET",
        )
    })
}

/// `GET /auth/github?returnTo=/path`: off to GitHub.
pub async fn start(req: &Request, env: &Env) -> Result<Response, ApiError> {
    let client_id = client_id(env)?;
    let state = hex::encode(db::random::<32>()?);
    let return_to = tokens::safe_return_to(query(req, "returnTo").as_deref());
    let now = now_ms();
    // Expired states are swept as new ones are made.
    db::run(
        env,
        "DELETE FROM oauth_states WHERE expires_at <= ?1",
        &[num(now)],
    )
    .await?;
    db::run(
        env,
        "INSERT INTO oauth_states (state_hash, return_to, expires_at) VALUES (?1, ?2, ?3)",
        &[
            tokens::hash(&state).into(),
            return_to.as_str().into(),
            num(now + tokens::STATE_TTL_MS),
        ],
    )
    .await?;
    let policy = Policy::from_vars(|n| setting(env, n));
    let scope = if policy.needs_orgs() {
        "read:user user:email read:org"
    } else {
        "read:user user:email"
    };
    let redirect_uri = format!("{}/auth/github/callback", public_origin(req, env));
    let location = format!(
        "{}/login/oauth/authorize?{}",
        github::oauth_base(env),
        worker::url::form_urlencoded::Serializer::new(String::new())
            .append_pair("client_id", &client_id)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("scope", scope)
            .append_pair("state", &state)
            .append_pair("allow_signup", "false")
            .finish()
    );
    let cookie = tokens::set_cookie(
        tokens::STATE_COOKIE,
        &state,
        "/auth/github",
        tokens::STATE_TTL_MS / 1000,
        secure_cookies(req),
    );
    redirect(&location, &[cookie])
}

#[derive(Deserialize)]
struct TokenReply {
    access_token: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    refresh_token: Option<String>,
    expires_in: Option<i64>,
    refresh_token_expires_in: Option<i64>,
}

#[derive(Deserialize)]
struct GitHubUser {
    id: i64,
    login: String,
    name: Option<String>,
    avatar_url: Option<String>,
}

#[derive(Deserialize)]
struct GitHubEmail {
    email: String,
    verified: bool,
    #[serde(default)]
    primary: bool,
}

#[derive(Deserialize)]
struct Membership {
    state: String,
}

fn refused(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message)
}

/// The callback's `state`, when it is the one this browser's state cookie holds.
pub(crate) fn state_of_this_browser(req: &Request) -> Result<String, ApiError> {
    let state = query(req, "state").unwrap_or_default();
    let cookie_state = req
        .headers()
        .get("Cookie")
        .ok()
        .flatten()
        .and_then(|c| tokens::cookie(&c, tokens::STATE_COOKIE).map(str::to_owned))
        .unwrap_or_default();
    if state.is_empty() || !tokens::same(&state, &cookie_state) {
        return Err(refused(
            "this sign-in did not start in this browser (state mismatch); start again",
        ));
    }
    Ok(state)
}

/// `GET /auth/github/callback?code&state`: back from GitHub.
pub async fn finish(req: &Request, env: &Env) -> Result<Response, ApiError> {
    let state = state_of_this_browser(req)?;
    #[derive(Deserialize)]
    struct StateRow {
        return_to: String,
    }
    // Single use: the row goes as it is read.
    let row: Option<StateRow> = db::first(
        env,
        "DELETE FROM oauth_states WHERE state_hash = ?1 AND expires_at > ?2 AND provider = 'github' RETURNING return_to",
        &[tokens::hash(&state).into(), num(now_ms())],
    )
    .await?;
    let return_to = row
        .ok_or_else(|| refused("this sign-in expired or was already used; start again"))?
        .return_to;
    if let Some(error) = query(req, "error") {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!("GitHub did not sign you in: {error}"),
        ));
    }
    let code = query(req, "code").ok_or_else(|| refused("GitHub sent no code"))?;

    let client_id = client_id(env)?;
    let client_secret = setting(env, "GITHUB_CLIENT_SECRET")
        .ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "GITHUB_CLIENT_SECRET is not set"))?;
    let redirect_uri = format!("{}/auth/github/callback", public_origin(req, env));
    let form = worker::url::form_urlencoded::Serializer::new(String::new())
        .append_pair("client_id", &client_id)
        .append_pair("client_secret", &client_secret)
        .append_pair("code", &code)
        .append_pair("redirect_uri", &redirect_uri)
        .finish();
    let reply: github::Reply<TokenReply> = github::oauth_token(env, form).await?;
    let token_reply = reply
        .body
        .ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "GitHub refused the code exchange"))?;
    let refresh = (
        token_reply.refresh_token.clone(),
        token_reply.expires_in,
        token_reply.refresh_token_expires_in,
    );
    let access_token = match (token_reply.access_token, token_reply.error) {
        (Some(t), None) => t,
        (_, e) => {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "GitHub refused the code: {}",
                    token_reply
                        .error_description
                        .or(e)
                        .unwrap_or_else(|| "no token".into())
                ),
            ))
        }
    };

    let user: GitHubUser = inspect_github::rest::get(env, &access_token, "/user")
        .await?
        .body
        .ok_or_else(|| ApiError::new(ErrorCode::Unavailable, "GitHub did not return the user"))?;
    let emails = emails(env, &access_token).await?;
    let verified: Vec<&GitHubEmail> = emails.iter().filter(|e| e.verified).collect();
    let primary_email = verified
        .iter()
        .find(|e| e.primary)
        .or(verified.first())
        .map(|e| e.email.clone());
    let policy = Policy::from_vars(|n| setting(env, n));
    let mut active_orgs = Vec::new();
    if policy.needs_orgs() {
        for org in &policy.orgs {
            let m: github::Reply<Membership> = inspect_github::rest::get(
                env,
                &access_token,
                &format!("/user/memberships/orgs/{org}"),
            )
            .await?;
            if m.body.is_some_and(|m| m.state == "active") {
                active_orgs.push(org.clone());
            }
        }
    }
    let identity = Identity {
        login: user.login.clone(),
        verified_emails: verified.iter().map(|e| e.email.clone()).collect(),
        active_orgs,
    };
    if let Err(why) = admission::admit(&policy, &identity) {
        inspect_runtime::log::emit(
            inspect_runtime::log::LogLine::warn("sign_in", "refused")
                .with("login", user.login.as_str())
                .detail(&why),
        );
        return Err(ApiError::new(ErrorCode::Forbidden, why));
    }

    let user_id = format!("github:{}", user.id);
    inspect_runtime::log::emit(
        inspect_runtime::log::LogLine::info("sign_in", "signed_in").actor(&user_id),
    );
    let now = now_ms();
    db::run(
        env,
        "INSERT INTO users (id, login, name, email, avatar_url, created_at, last_sign_in_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
         ON CONFLICT(id) DO UPDATE SET login = excluded.login, name = excluded.name, email = excluded.email, avatar_url = excluded.avatar_url, last_sign_in_at = excluded.last_sign_in_at",
        &[
            user_id.as_str().into(),
            user.login.as_str().into(),
            db::opt(user.name.as_deref()),
            db::opt(primary_email.as_deref()),
            db::opt(user.avatar_url.as_deref()),
            num(now),
        ],
    )
    .await?;
    // Every verified address, for linking by the email rule and for ADMIN_USERS.
    let verified_emails: Vec<String> = verified.iter().map(|e| e.email.clone()).collect();
    crate::people::remember_emails(env, &user_id, &verified_emails).await?;
    // Kept sealed, so pull requests the agent opens for this person are theirs.
    inspect_github::api::store_user_token(
        env,
        &user_id,
        &inspect_github::api::OAuthTokens {
            access_token: access_token.clone(),
            refresh_token: refresh.0,
            expires_in: refresh.1,
            refresh_token_expires_in: refresh.2,
        },
        now,
    )
    .await?;
    open_browser_session(req, env, &user_id, &return_to, "/auth/github", now).await
}

/// Signs the browser in as `user_id`: a new session (its token's hash in D1, the token in
/// an HttpOnly cookie), the sign-in's state cookie cleared, and back to `return_to`.
pub(crate) async fn open_browser_session(
    req: &Request,
    env: &Env,
    user_id: &str,
    return_to: &str,
    state_path: &str,
    now: i64,
) -> Result<Response, ApiError> {
    // Expired and revoked sessions are swept as new ones are made.
    db::run(
        env,
        "DELETE FROM auth_sessions WHERE expires_at <= ?1 OR revoked_at IS NOT NULL AND revoked_at <= ?1 - 86400000",
        &[num(now)],
    )
    .await?;
    let session_token = hex::encode(db::random::<32>()?);
    db::run(
        env,
        "INSERT INTO auth_sessions (token_hash, user_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)",
        &[
            tokens::hash(&session_token).into(),
            user_id.into(),
            num(now),
            num(now + tokens::SESSION_TTL_MS),
        ],
    )
    .await?;
    let secure = secure_cookies(req);
    redirect(
        return_to,
        &[
            tokens::set_cookie(
                tokens::SESSION_COOKIE,
                &session_token,
                "/",
                tokens::SESSION_TTL_MS / 1000,
                secure,
            ),
            tokens::clear_cookie(tokens::STATE_COOKIE, state_path, secure),
        ],
    )
}

/// `POST /auth/logout`: the browser session is revoked server-side and the cookie cleared.
pub async fn sign_out(req: &Request, env: &Env, caller: &Caller) -> Result<Response, ApiError> {
    if let Via::Browser { token_hash } = &caller.via {
        db::run(
            env,
            "UPDATE auth_sessions SET revoked_at = ?1 WHERE token_hash = ?2",
            &[num(now_ms()), token_hash.as_str().into()],
        )
        .await?;
    }
    let headers = Headers::new();
    headers
        .set(
            "Set-Cookie",
            &tokens::clear_cookie(tokens::SESSION_COOKIE, "/", secure_cookies(req)),
        )
        .map_err(internal)?;
    Ok(
        inspect_runtime::answer::json_ok(&serde_json::json!({ "signedOut": true }))
            .map_err(internal)?
            .with_headers(headers),
    )
}

pub async fn me(env: &Env, caller: &Caller) -> Result<Response, ApiError> {
    let (role, _) = crate::people::role_of(env, caller).await?;
    let via = match &caller.via {
        Via::Local => "local",
        Via::Browser { .. } => "browser",
        Via::ApiToken => "api_token",
        Via::Service { .. } => "service",
    };
    inspect_runtime::answer::json_ok(&Me {
        user: caller.actor.clone(),
        via: via.into(),
        role,
    })
    .map_err(internal)
}

/// Pages of `/user/emails` read, at most (GitHub pages them, 100 at most a page).
const EMAIL_PAGES: usize = 5;

/// The person's addresses, every page of them (up to [`EMAIL_PAGES`]): an allowed
/// address may be past the first.
async fn emails(env: &Env, access_token: &str) -> Result<Vec<GitHubEmail>, ApiError> {
    let mut all = Vec::new();
    for page in 1..=EMAIL_PAGES {
        let path = format!("/user/emails?per_page=100&page={page}");
        let batch: Vec<GitHubEmail> = inspect_github::rest::get(env, access_token, &path)
            .await?
            .body
            .unwrap_or_default();
        let last = batch.len() < 100;
        all.extend(batch);
        if last {
            break;
        }
    }
    Ok(all)
}
