//! A fake GitHub that follows GitHub's documented API closely enough for the control
//! plane: the OAuth web flow (`/login/oauth/authorize`, `/login/oauth/access_token`), the
//! REST calls sign-in makes (`/user`, `/user/emails`, `/user/memberships/orgs/{org}`), the
//! App installation-token endpoint (which checks the RS256 JWT against the App's public
//! key), `GET /repos/{owner}/{repo}`, and git's smart HTTP protocol — served by the real
//! `git http-backend` — which demands an installation token as the password.

use anyhow::{Context, Result};
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Form, Json, Router};
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A GitHub account the fake knows.
#[derive(Debug, Clone)]
pub struct Account {
    pub id: i64,
    pub login: String,
    pub emails: Vec<(String, bool)>,
    pub orgs: Vec<String>,
}

#[derive(Default)]
struct World {
    accounts: Vec<Account>,
    /// Who approves the next authorization (the person at the browser).
    signing_in: Option<String>,
    /// code → (login, redirect_uri)
    codes: HashMap<String, (String, String)>,
    /// user access token → login
    user_tokens: HashMap<String, String>,
    /// installation token → expiry (unix seconds)
    installation_tokens: HashMap<String, u64>,
    mints: usize,
    git_requests: Vec<(String, u16)>,
}

struct Shared {
    base_url: String,
    client_id: String,
    client_secret: String,
    app_id: String,
    installation_id: String,
    public_key_pem: String,
    repos_root: PathBuf,
    world: Mutex<World>,
}

pub struct FakeGitHub {
    pub base_url: String,
    pub client_id: String,
    pub client_secret: String,
    pub app_id: String,
    pub installation_id: String,
    /// The App's private key (PKCS#8 PEM), as an operator would set it.
    pub private_key_pem: String,
    /// Bare repositories served over smart HTTP: `<root>/<owner>/<name>.git`.
    pub repos_root: PathBuf,
    shared: Arc<Shared>,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn openssl(args: &[&str], stdin: Option<&str>) -> Result<String> {
    use std::io::Write;
    let mut child = std::process::Command::new("openssl")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running openssl")?;
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .context("stdin")?
            .write_all(input.as_bytes())?;
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

fn random_hex(n: usize) -> String {
    use rand::RngCore;
    let mut b = vec![0u8; n];
    rand::rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl FakeGitHub {
    pub async fn start(accounts: Vec<Account>) -> Result<FakeGitHub> {
        let dir = tempfile::Builder::new().prefix("fake-github-").tempdir()?;
        let private_key_pem = openssl(
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ],
            None,
        )?;
        let public_key_pem = openssl(&["pkey", "-pubout"], Some(&private_key_pem))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let repos_root = dir.path().join("repos");
        std::fs::create_dir_all(&repos_root)?;
        let shared = Arc::new(Shared {
            base_url: base_url.clone(),
            client_id: "Iv1.fakeclient".into(),
            client_secret: format!("client-secret-{}", random_hex(8)),
            app_id: "424242".into(),
            installation_id: "777".into(),
            public_key_pem,
            repos_root: repos_root.clone(),
            world: Mutex::new(World {
                accounts,
                ..Default::default()
            }),
        });
        let app = Router::new()
            .route("/login/oauth/authorize", get(authorize))
            .route("/login/oauth/access_token", post(access_token))
            .route("/user", get(user))
            .route("/user/emails", get(emails))
            .route("/user/memberships/orgs/{org}", get(membership))
            .route(
                "/app/installations/{id}/access_tokens",
                post(installation_token),
            )
            .route("/repos/{owner}/{repo}", get(repository))
            .route("/{owner}/{repo}/{*rest}", any(git_http))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeGitHub {
            base_url,
            client_id: shared.client_id.clone(),
            client_secret: shared.client_secret.clone(),
            app_id: shared.app_id.clone(),
            installation_id: shared.installation_id.clone(),
            private_key_pem,
            repos_root,
            shared,
            _dir: dir,
            task,
        })
    }

    /// The person who approves the next authorization.
    pub fn sign_in_as(&self, login: &str) {
        self.world().signing_in = Some(login.to_owned());
    }

    /// How many installation tokens were minted.
    pub fn mints(&self) -> usize {
        self.world().mints
    }

    /// Every git request: path and the status answered.
    pub fn git_requests(&self) -> Vec<(String, u16)> {
        self.world().git_requests.clone()
    }

    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.shared.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The Worker variables for OAuth sign-in and the App.
    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("GITHUB_CLIENT_ID".into(), self.client_id.clone()),
            ("GITHUB_CLIENT_SECRET".into(), self.client_secret.clone()),
            ("GITHUB_OAUTH_BASE_URL".into(), self.base_url.clone()),
            ("GITHUB_API_BASE_URL".into(), self.base_url.clone()),
            ("GITHUB_APP_ID".into(), self.app_id.clone()),
            (
                "GITHUB_APP_INSTALLATION_ID".into(),
                self.installation_id.clone(),
            ),
            (
                "GITHUB_APP_PRIVATE_KEY".into(),
                self.private_key_pem.clone(),
            ),
        ]
    }
}

fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        Json(json!({ "message": message, "documentation_url": "https://docs.github.com/rest" })),
    )
        .into_response()
}

#[derive(Deserialize)]
struct AuthorizeQuery {
    client_id: String,
    redirect_uri: String,
    state: Option<String>,
}

async fn authorize(State(s): State<Arc<Shared>>, Query(q): Query<AuthorizeQuery>) -> Response {
    if q.client_id != s.client_id {
        return error(StatusCode::NOT_FOUND, "unknown client_id");
    }
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    let Some(login) = w.signing_in.clone() else {
        return error(StatusCode::UNAUTHORIZED, "nobody is signing in");
    };
    let code = random_hex(10);
    w.codes
        .insert(code.clone(), (login, q.redirect_uri.clone()));
    let sep = if q.redirect_uri.contains('?') {
        '&'
    } else {
        '?'
    };
    let mut location = format!("{}{sep}code={code}", q.redirect_uri);
    if let Some(state) = q.state {
        location.push_str(&format!("&state={}", urlencode(&state)));
    }
    (StatusCode::FOUND, [("Location", location)]).into_response()
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[derive(Deserialize)]
struct TokenForm {
    client_id: String,
    client_secret: String,
    code: String,
    redirect_uri: Option<String>,
}

async fn access_token(State(s): State<Arc<Shared>>, Form(f): Form<TokenForm>) -> Response {
    // GitHub answers errors with 200 and an `error` field.
    if f.client_id != s.client_id || f.client_secret != s.client_secret {
        return Json(json!({"error": "incorrect_client_credentials", "error_description": "The client_id and/or client_secret passed are incorrect."})).into_response();
    }
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    let Some((login, redirect)) = w.codes.remove(&f.code) else {
        return Json(json!({"error": "bad_verification_code", "error_description": "The code passed is incorrect or expired."})).into_response();
    };
    if f.redirect_uri.is_some_and(|r| r != redirect) {
        return Json(json!({"error": "redirect_uri_mismatch"})).into_response();
    }
    let token = format!("gho_{}", random_hex(18));
    w.user_tokens.insert(token.clone(), login);
    Json(json!({"access_token": token, "token_type": "bearer", "scope": "read:user,user:email"}))
        .into_response()
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::to_owned)
}

fn account_of(s: &Shared, headers: &HeaderMap) -> Option<Account> {
    // GitHub refuses requests without a User-Agent.
    headers.get("user-agent")?;
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    let login = w.user_tokens.get(&bearer(headers)?)?.clone();
    w.accounts.iter().find(|a| a.login == login).cloned()
}

async fn user(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    match account_of(&s, &headers) {
        Some(a) => Json(json!({
            "id": a.id, "login": a.login, "name": format!("{} Example", a.login),
            "avatar_url": format!("https://avatars.example/{}.png", a.login),
            "email": null, "type": "User"
        }))
        .into_response(),
        None => error(StatusCode::UNAUTHORIZED, "Bad credentials"),
    }
}

async fn emails(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    match account_of(&s, &headers) {
        Some(a) => Json(
            a.emails
                .iter()
                .enumerate()
                .map(|(i, (e, verified))| {
                    json!({"email": e, "verified": verified, "primary": i == 0, "visibility": "private"})
                })
                .collect::<Vec<Value>>(),
        )
        .into_response(),
        None => error(StatusCode::UNAUTHORIZED, "Bad credentials"),
    }
}

async fn membership(
    State(s): State<Arc<Shared>>,
    Path(org): Path<String>,
    headers: HeaderMap,
) -> Response {
    match account_of(&s, &headers) {
        Some(a) if a.orgs.iter().any(|o| o.eq_ignore_ascii_case(&org)) => {
            Json(json!({"state": "active", "role": "member", "organization": {"login": org}}))
                .into_response()
        }
        Some(_) => error(StatusCode::NOT_FOUND, "Not Found"),
        None => error(StatusCode::UNAUTHORIZED, "Bad credentials"),
    }
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    iat: u64,
    exp: u64,
}

async fn installation_token(
    State(s): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(jwt) = bearer(&headers) else {
        return error(
            StatusCode::UNAUTHORIZED,
            "A JSON web token could not be decoded",
        );
    };
    let Ok(key) = jsonwebtoken::DecodingKey::from_rsa_pem(s.public_key_pem.as_bytes()) else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "bad fake key");
    };
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_required_spec_claims(&["exp", "iat", "iss"]);
    let claims = match jsonwebtoken::decode::<Claims>(&jwt, &key, &validation) {
        Ok(d) => d.claims,
        Err(e) => {
            return error(
                StatusCode::UNAUTHORIZED,
                &format!("A JSON web token could not be decoded: {e}"),
            )
        }
    };
    // GitHub: exp at most 10 minutes ahead; iss the App's id.
    if claims.iss != s.app_id || claims.exp > now_s() + 600 || claims.iat > now_s() + 60 {
        return error(
            StatusCode::UNAUTHORIZED,
            "'Issued at' or 'Expiration time' claim is invalid, or the issuer is wrong",
        );
    }
    if id != s.installation_id {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    let token = format!("ghs_{}", random_hex(18));
    let expires = now_s() + 3600;
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    w.installation_tokens.insert(token.clone(), expires);
    w.mints += 1;
    let expires_at = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(expires),
    )
    .to_string();
    (
        StatusCode::CREATED,
        Json(json!({"token": token, "expires_at": expires_at, "permissions": {"contents": "write"}, "repository_selection": "all"})),
    )
        .into_response()
}

fn installation_token_ok(s: &Shared, token: &str) -> bool {
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    w.installation_tokens
        .get(token)
        .is_some_and(|exp| *exp > now_s())
}

async fn repository(
    State(s): State<Arc<Shared>>,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if !bearer(&headers).is_some_and(|t| installation_token_ok(&s, &t)) {
        return error(StatusCode::UNAUTHORIZED, "Bad credentials");
    }
    let path = s.repos_root.join(&owner).join(format!("{repo}.git"));
    if !path.exists() {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    Json(json!({
        "name": repo, "full_name": format!("{owner}/{repo}"), "private": true,
        "default_branch": "main",
        "clone_url": format!("{}/{owner}/{repo}.git", s.base_url),
    }))
    .into_response()
}

/// Smart HTTP through `git http-backend` (CGI), for callers with an installation token.
async fn git_http(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let record = |status: u16| {
        let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
        w.git_requests.push((path.clone(), status));
    };
    let password = headers
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|up| {
            up.split_once(':')
                .map(|(u, p)| (u.to_owned(), p.to_owned()))
        })
        .filter(|(u, _)| u == "x-access-token")
        .map(|(_, p)| p);
    if !password.is_some_and(|p| installation_token_ok(&s, &p)) {
        record(401);
        return (
            StatusCode::UNAUTHORIZED,
            [("WWW-Authenticate", "Basic realm=\"GitHub\"")],
            "Invalid username or token.",
        )
            .into_response();
    }
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let output = tokio::process::Command::new("git")
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", &s.repos_root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", method.as_str())
        .env("PATH_INFO", &path)
        .env("QUERY_STRING", uri.query().unwrap_or_default())
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env("REMOTE_USER", "x-access-token")
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match output {
        Ok(c) => c,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt;
        let _ = stdin.write_all(&body).await;
    }
    let out = match child.wait_with_output().await {
        Ok(o) => o.stdout,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    // CGI: headers, a blank line, the body.
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let Some((at, gap)) = split else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "git http-backend said nothing",
        );
    };
    let head = String::from_utf8_lossy(&out[..at]).into_owned();
    let mut builder = Response::builder().status(200);
    let mut status = 200;
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("status") {
            status = v
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(200);
            builder = builder.status(status);
        } else {
            builder = builder.header(k.trim(), v);
        }
    }
    record(status);
    builder
        .body(Body::from(out[at + gap..].to_vec()))
        .unwrap_or_else(|e| error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()))
}
