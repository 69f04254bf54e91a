//! Resolves who is calling, in order: a `sig1` service signature, a personal API token,
//! the browser session cookie, local mode. The first credential present decides: a bad
//! one is refused, never passed over for a weaker one.

use crate::auth::{self, sig1, tokens, CallerFacts};
use crate::db::{self, num, setting};
use inspect_protocol::session::Actor;
use inspect_protocol::ApiError;
use serde::Deserialize;
use worker::{Env, Request};

/// How the caller proved who they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    Local,
    Browser { token_hash: String },
    ApiToken,
    Service { name: String },
}

#[derive(Debug, Clone)]
pub struct Caller {
    pub actor: Actor,
    pub via: Via,
}

impl Caller {
    /// A person at a browser (or the local user): the only callers that may manage
    /// personal API tokens.
    pub fn is_person(&self) -> bool {
        matches!(self.via, Via::Local | Via::Browser { .. })
    }
}

fn header(req: &Request, name: &str) -> Option<String> {
    req.headers().get(name).ok().flatten()
}

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

#[derive(Deserialize)]
struct UserRow {
    user_id: String,
    login: Option<String>,
    name: Option<String>,
    email: Option<String>,
    avatar_url: Option<String>,
}

impl UserRow {
    fn actor(self) -> Actor {
        let name = self.login.clone().or(self.name.clone()).unwrap_or_else(|| {
            self.user_id
                .split_once(':')
                .map_or(self.user_id.clone(), |(_, n)| n.to_owned())
        });
        Actor {
            user_id: self.user_id,
            name,
            email: self.email,
            avatar: self.avatar_url,
        }
    }
}

pub async fn resolve(req: &Request, body: &[u8], env: &Env) -> Result<Caller, ApiError> {
    if header(req, sig1::SERVICE_HEADER).is_some() || header(req, sig1::SIGNATURE_HEADER).is_some()
    {
        return service(req, body, env).await;
    }
    if let Some(auth) = header(req, "Authorization") {
        return api_token(&auth, env).await;
    }
    // A browser can be either of the callers below: refuse what another site's page sent.
    let url = req
        .url()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    auth::origin::check_same_origin(
        req.method().as_ref(),
        header(req, "Origin").as_deref(),
        header(req, "Sec-Fetch-Site").as_deref(),
        &url.origin().ascii_serialization(),
    )?;
    if let Some(token) = header(req, "Cookie")
        .as_deref()
        .and_then(|c| tokens::cookie(c, tokens::SESSION_COOKIE).map(str::to_owned))
    {
        return browser(&token, env).await;
    }
    let connecting_ip = header(req, "CF-Connecting-IP");
    let actor_header = header(req, sig1::ACTOR_HEADER);
    let local_user = setting(env, "LOCAL_USER").unwrap_or_else(|| "local".into());
    let local_mode = setting(env, "LOCAL_MODE").as_deref() == Some("true");
    // Only local mode asks whether a proxy relayed the request.
    let forwarded_by = local_mode
        .then(|| {
            auth::FORWARDING_HEADERS
                .iter()
                .copied()
                .find(|name| req.headers().has(name).unwrap_or(false))
        })
        .flatten();
    if let Some(name) = forwarded_by {
        // The run command's output shows this: the Worker is reachable through a proxy.
        inspect_runtime::log::emit(
            inspect_runtime::log::LogLine::warn("auth", "local_mode_refused")
                .with("header", name)
                .detail(
                    "a relayed request (proxy or tunnel) reached a Worker in local mode; it \
                     was refused. Set up sign-in before exposing this Worker",
                ),
        );
    }
    let actor = auth::local::resolve(&CallerFacts {
        local_mode,
        host: url.host_str().unwrap_or_default(),
        connecting_ip: connecting_ip.as_deref(),
        forwarded_by,
        actor_header: actor_header.as_deref(),
        local_user: &local_user,
    })?;
    Ok(Caller {
        actor,
        via: Via::Local,
    })
}

async fn service(req: &Request, body: &[u8], env: &Env) -> Result<Caller, ApiError> {
    let name = header(req, sig1::SERVICE_HEADER).unwrap_or_default();
    let signature = header(req, sig1::SIGNATURE_HEADER)
        .ok_or_else(|| ApiError::unauthorized(format!("{} is missing", sig1::SIGNATURE_HEADER)))?;
    let var = sig1::secret_var(&name)
        .ok_or_else(|| ApiError::unauthorized(format!("unknown service {name:?}")))?;
    let secret = setting(env, var)
        .ok_or_else(|| ApiError::unauthorized(format!("service {name} is not enabled here")))?;
    let url = req
        .url()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let query: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let actor_id = header(req, sig1::ACTOR_HEADER).unwrap_or_default();
    let method = req.method().to_string();
    sig1::verify(
        secret.as_bytes(),
        &sig1::Signed {
            service: &name,
            signature_header: &signature,
            method: &method,
            path: url.path(),
            query: &query,
            body,
            actor: &actor_id,
        },
        now_ms(),
    )
    .map_err(|r| ApiError::unauthorized(r.message()))?;
    // Each signed request is good once: a copy sent again inside its window is refused.
    // Expired entries are swept in the same round trip.
    let now = now_ms();
    let fresh = db::sweep_then_run(
        env,
        (
            "DELETE FROM service_signatures WHERE expires_at < ?1",
            &[num(now)],
        ),
        (
            "INSERT OR IGNORE INTO service_signatures (signature_hash, expires_at) VALUES (?1, ?2)",
            &[
                tokens::hash(&signature).into(),
                num(now + 2 * sig1::WINDOW_MS),
            ],
        ),
    )
    .await?;
    if fresh == 0 {
        return Err(ApiError::unauthorized(
            "this signed request was already used; sign each request anew",
        ));
    }
    let user_id = sig1::acting_for(&name, &actor_id).map_err(ApiError::bad_request)?;
    // An identity linked to a person acts as that person.
    let actor = crate::linked::resolve(
        env,
        &Actor {
            name: user_id.clone(),
            user_id,
            email: None,
            avatar: None,
        },
    )
    .await?;
    Ok(Caller {
        actor,
        via: Via::Service { name },
    })
}

async fn api_token(authorization: &str, env: &Env) -> Result<Caller, ApiError> {
    let token = authorization
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| t.starts_with(tokens::API_TOKEN_PREFIX))
        .ok_or_else(|| ApiError::unauthorized("Authorization must be Bearer oit_…"))?;
    #[derive(Deserialize)]
    struct Row {
        id: String,
        last_used_at: Option<f64>,
        #[serde(flatten)]
        user: UserRow,
    }
    let row: Option<Row> = db::first(
        env,
        "SELECT t.id, t.last_used_at, t.user_id, u.login, u.name, u.email, u.avatar_url
         FROM api_tokens t LEFT JOIN users u ON u.id = t.user_id
         WHERE t.token_hash = ?1 AND t.revoked_at IS NULL",
        &[tokens::hash(token).into()],
    )
    .await?;
    let row = row.ok_or_else(|| ApiError::unauthorized("this API token is not valid"))?;
    let now = now_ms();
    // Remember use, at most once a minute per token.
    if row.last_used_at.is_none_or(|t| now - t as i64 > 60_000) {
        let _ = db::run(
            env,
            "UPDATE api_tokens SET last_used_at = ?1 WHERE id = ?2",
            &[num(now), row.id.as_str().into()],
        )
        .await;
    }
    Ok(Caller {
        actor: row.user.actor(),
        via: Via::ApiToken,
    })
}

async fn browser(token: &str, env: &Env) -> Result<Caller, ApiError> {
    let token_hash = tokens::hash(token);
    let row: Option<UserRow> = db::first(
        env,
        "SELECT s.user_id, u.login, u.name, u.email, u.avatar_url
         FROM auth_sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = ?1 AND s.revoked_at IS NULL AND s.expires_at > ?2",
        &[token_hash.as_str().into(), num(now_ms())],
    )
    .await?;
    let row =
        row.ok_or_else(|| ApiError::unauthorized("your sign-in has expired; sign in again"))?;
    Ok(Caller {
        actor: row.actor(),
        via: Via::Browser { token_hash },
    })
}
