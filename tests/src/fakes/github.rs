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

/// An installation token: when it expires, and the repositories it was narrowed to
/// (`None`: every repository of the installation), as GitHub's
/// `POST /app/installations/{id}/access_tokens` grants it.
#[derive(Debug, Clone)]
pub struct Grant {
    pub expires: u64,
    pub repositories: Option<Vec<String>>,
    pub permissions: Value,
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
    /// When set, user tokens expire after this many seconds and come with a refresh
    /// token (GitHub Apps' "expiring user tokens").
    token_lifetime: Option<u64>,
    /// user access token → expiry (unix seconds), for expiring tokens
    user_token_expiry: HashMap<String, u64>,
    /// refresh token → login (single use)
    refresh_tokens: HashMap<String, String>,
    refreshes: usize,
    /// installation token → expiry (unix seconds)
    installation_tokens: HashMap<String, Grant>,
    mints: usize,
    git_requests: Vec<(String, u16)>,
    pulls: Vec<Pull>,
    comments: Vec<Comment>,
    reviews: Vec<Review>,
    reactions: Vec<Reaction>,
    labels: Vec<(String, String, String)>,
    /// (owner, repo, login) → permission
    permissions: HashMap<(String, String, String), String>,
    next_id: i64,
    /// Repositories marked archived ("owner/name").
    archived: Vec<String>,
    /// Every REST call: method, path, who (login or the App's bot).
    calls: Vec<(String, String, String)>,
    /// Commits made through `POST /git/commits` that GitHub signed (the App's token, no
    /// committer of the caller's own): their shas.
    signed: Vec<String>,
}

/// A pull request on the fake.
#[derive(Debug, Clone)]
pub struct Pull {
    pub owner: String,
    pub repo: String,
    pub number: i64,
    pub title: String,
    pub body: String,
    pub head: String,
    pub base: String,
    pub state: String,
    pub draft: bool,
    pub merged: bool,
    /// Who created it: a user's login, or the App's bot account.
    pub author: String,
    pub labels: Vec<String>,
    /// The account whose fork holds the head branch (`None`: the base repository).
    pub head_owner: Option<String>,
}

impl Pull {
    /// Who owns the head branch's repository.
    pub fn head_owner(&self) -> &str {
        self.head_owner.as_deref().unwrap_or(&self.owner)
    }
}

/// A comment on a pull request's conversation (or a reply in a review thread).
#[derive(Debug, Clone)]
pub struct Comment {
    pub id: i64,
    pub owner: String,
    pub repo: String,
    pub number: i64,
    pub author: String,
    pub body: String,
    pub in_reply_to: Option<i64>,
    /// A review comment (on the diff, in a thread), not one on the conversation.
    pub review: bool,
    /// A review's inline comment: the review, the file, the line and its side.
    pub review_id: Option<i64>,
    pub path: Option<String>,
    pub line: Option<u64>,
    pub side: Option<String>,
}

/// A review submitted on a pull request (`POST /pulls/{n}/reviews`).
#[derive(Debug, Clone)]
pub struct Review {
    pub id: i64,
    pub owner: String,
    pub repo: String,
    pub number: i64,
    pub author: String,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED` or `PENDING`.
    pub state: String,
    pub body: String,
    /// The ids of its inline comments (in [`FakeGitHub::comments`]).
    pub comments: Vec<i64>,
}

#[derive(Debug, Clone)]
pub struct Reaction {
    pub path: String,
    pub content: String,
    pub by: String,
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

pub(crate) fn openssl(args: &[&str], stdin: Option<&str>) -> Result<String> {
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

/// A new 2048-bit RSA private key (PKCS#8 PEM), by openssl.
pub(crate) fn rsa_private_key() -> Result<String> {
    openssl(
        &[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
        ],
        None,
    )
}

pub(crate) fn random_hex(n: usize) -> String {
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
        let private_key_pem = rsa_private_key()?;
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
            .route("/installation/repositories", get(installation_repositories))
            .route("/repos/{owner}/{repo}/branches", get(list_branches))
            .route(
                "/repos/{owner}/{repo}/pulls",
                get(list_pulls).post(create_pull),
            )
            .route("/repos/{owner}/{repo}/pulls/{number}", get(get_pull))
            .route(
                "/repos/{owner}/{repo}/pulls/{number}/comments/{id}/replies",
                post(reply_review_comment),
            )
            .route(
                "/repos/{owner}/{repo}/pulls/{number}/files",
                get(pull_files),
            )
            .route(
                "/repos/{owner}/{repo}/pulls/{number}/reviews",
                post(create_review),
            )
            .route(
                "/repos/{owner}/{repo}/pulls/{number}/reviews/{id}/comments",
                get(review_comments),
            )
            .route(
                "/repos/{owner}/{repo}/pulls/{number}/requested_reviewers",
                post(request_reviewers),
            )
            .route(
                "/repos/{owner}/{repo}/issues/{number}/comments",
                get(list_comments).post(create_comment),
            )
            .route(
                "/repos/{owner}/{repo}/issues/{number}/labels",
                post(add_labels),
            )
            .route(
                "/repos/{owner}/{repo}/issues/{number}/reactions",
                post(react),
            )
            .route(
                "/repos/{owner}/{repo}/issues/comments/{id}/reactions",
                post(react),
            )
            .route(
                "/repos/{owner}/{repo}/pulls/comments/{id}/reactions",
                post(react),
            )
            .route("/repos/{owner}/{repo}/labels", post(create_label))
            .route("/repos/{owner}/{repo}/labels/{name}", get(get_label))
            .route(
                "/repos/{owner}/{repo}/collaborators/{login}/permission",
                get(collaborator_permission),
            )
            .route("/repos/{owner}/{repo}/compare/{*basehead}", get(compare))
            .route("/repos/{owner}/{repo}/git/commits", post(create_commit))
            .route(
                "/repos/{owner}/{repo}/git/refs/heads/{*branch}",
                axum::routing::patch(update_ref),
            )
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

    /// Walks a browser through the Worker's GitHub sign-in at `base` as `login` (the fake
    /// approves it): the session cookie's value the Worker set.
    pub async fn browser_sign_in(&self, base: &str, login: &str) -> Result<String> {
        self.sign_in_as(login);
        let b = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let cookie = crate::client::set_cookie;
        let location = |r: &reqwest::Response| -> Result<String> {
            Ok(r.headers()
                .get(reqwest::header::LOCATION)
                .context("no redirect")?
                .to_str()?
                .to_owned())
        };
        let start = b.get(format!("{base}/auth/github")).send().await?;
        let state = cookie(&start, "inspect_oauth_state").context("no state cookie")?;
        let back = b.get(location(&start)?).send().await?;
        let done = b
            .get(location(&back)?)
            .header(
                reqwest::header::COOKIE,
                format!("inspect_oauth_state={state}"),
            )
            .send()
            .await?;
        anyhow::ensure!(
            done.status() == reqwest::StatusCode::FOUND,
            "{login} was not signed in: {} {}",
            done.status(),
            done.text().await.unwrap_or_default()
        );
        cookie(&done, "inspect_session").context("no session cookie")
    }

    /// From now on user tokens expire after `seconds` and come with refresh tokens.
    pub fn expire_user_tokens_after(&self, seconds: u64) {
        self.world().token_lifetime = Some(seconds);
    }

    /// How many times a refresh token was traded for a new user token.
    pub fn refreshes(&self) -> usize {
        self.world().refreshes
    }

    /// How many installation tokens were minted.
    /// Revokes every installation token granted so far, as GitHub does when the App is
    /// suspended or reinstalled or a token is deleted (`DELETE /installation/token`): each
    /// is then answered 401 "Bad credentials".
    pub fn revoke_installation_tokens(&self) {
        self.world().installation_tokens.clear();
    }

    pub fn mints(&self) -> usize {
        self.world().mints
    }

    /// Every installation token minted so far, with its scope.
    pub fn grants(&self) -> Vec<Grant> {
        self.world().installation_tokens.values().cloned().collect()
    }

    /// Every git request: path and the status answered.
    pub fn git_requests(&self) -> Vec<(String, u16)> {
        self.world().git_requests.clone()
    }

    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.shared.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The App's bot account, as GitHub names it (`<slug>[bot]`).
    pub const BOT_LOGIN: &'static str = "inspect-bot[bot]";

    /// The shas of commits GitHub signed (made through the Git Data API with the App's
    /// token).
    pub fn signed_commits(&self) -> Vec<String> {
        self.world().signed.clone()
    }

    pub fn pulls(&self) -> Vec<Pull> {
        self.world().pulls.clone()
    }

    pub fn comments(&self) -> Vec<Comment> {
        self.world().comments.clone()
    }

    /// A user access token for `login`, as if they had authorized an app (for calling the
    /// fake directly).
    pub fn user_token(&self, login: &str) -> String {
        let mut w = self.world();
        issue_user_token(&mut w, login.to_owned())["access_token"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn reviews(&self) -> Vec<Review> {
        self.world().reviews.clone()
    }

    pub fn reactions(&self) -> Vec<Reaction> {
        self.world().reactions.clone()
    }

    /// Every REST call made: method, path (with query), caller.
    pub fn calls(&self) -> Vec<(String, String, String)> {
        self.world().calls.clone()
    }

    /// Someone's permission on a repository (`admin`, `write`, `read`, …).
    pub fn set_permission(&self, owner: &str, repo: &str, login: &str, permission: &str) {
        self.world()
            .permissions
            .insert((owner.into(), repo.into(), login.into()), permission.into());
    }

    /// Opens a pull request as `author`, as if done on github.com.
    pub fn open_pull(
        &self,
        owner: &str,
        repo: &str,
        head: &str,
        base: &str,
        title: &str,
        author: &str,
    ) -> i64 {
        self.opened(owner, repo, None, (head, base), title, author)
    }

    /// Opens a pull request from `fork_owner`'s fork of `owner/repo` (a bare repository
    /// under `repos_root` too), as if done on github.com: the head branch is the fork's,
    /// and GitHub keeps a copy of it in the base repository as `refs/pull/N/head`.
    #[allow(clippy::too_many_arguments)]
    pub fn open_fork_pull(
        &self,
        owner: &str,
        repo: &str,
        fork_owner: &str,
        head: &str,
        base: &str,
        title: &str,
        author: &str,
    ) -> i64 {
        self.opened(owner, repo, Some(fork_owner), (head, base), title, author)
    }

    fn opened(
        &self,
        owner: &str,
        repo: &str,
        fork_owner: Option<&str>,
        (head, base): (&str, &str),
        title: &str,
        author: &str,
    ) -> i64 {
        let mut w = self.world();
        let number = next_number(&w, owner, repo);
        w.pulls.push(Pull {
            owner: owner.into(),
            repo: repo.into(),
            number,
            title: title.into(),
            body: format!("{title}, by {author}"),
            head: head.into(),
            base: base.into(),
            state: "open".into(),
            draft: false,
            merged: false,
            author: author.into(),
            labels: Vec::new(),
            head_owner: fork_owner.map(str::to_owned),
        });
        drop(w);
        self.keep_pull_ref(owner, repo, number, fork_owner.unwrap_or(owner), head);
        number
    }

    /// `refs/pull/N/head` in the base repository, from the head branch wherever it is.
    fn keep_pull_ref(&self, owner: &str, repo: &str, number: i64, head_owner: &str, head: &str) {
        let bare = |o: &str| self.repos_root.join(o).join(format!("{repo}.git"));
        let source = bare(head_owner);
        if !source.exists() {
            return;
        }
        let _ = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(bare(owner))
            .arg("fetch")
            .arg("--quiet")
            .arg(&source)
            .arg(format!("+refs/heads/{head}:refs/pull/{number}/head"))
            .output();
    }

    /// Archives a repository (the installation listing still shows it, marked).
    pub fn archive(&self, owner: &str, repo: &str) {
        self.world().archived.push(format!("{owner}/{repo}"));
    }

    /// Closes (or merges) a pull request, as if done on github.com.
    pub fn close_pull(&self, owner: &str, repo: &str, number: i64, merged: bool) {
        let mut w = self.world();
        if let Some(p) = w
            .pulls
            .iter_mut()
            .find(|p| p.owner == owner && p.repo == repo && p.number == number)
        {
            p.state = "closed".into();
            p.merged = merged;
        }
    }

    /// Adds a comment to the conversation, as if made on github.com; its id.
    pub fn add_comment(
        &self,
        owner: &str,
        repo: &str,
        number: i64,
        author: &str,
        body: &str,
    ) -> i64 {
        self.push_comment((owner, repo, number), author, body, None, false)
    }

    /// A review comment on the pull request's diff: a thread's top comment, or
    /// (`in_reply_to`) a reply in that thread. Its id.
    pub fn add_review_comment(
        &self,
        (owner, repo, number): (&str, &str, i64),
        author: &str,
        body: &str,
        in_reply_to: Option<i64>,
    ) -> i64 {
        self.push_comment((owner, repo, number), author, body, in_reply_to, true)
    }

    fn push_comment(
        &self,
        (owner, repo, number): (&str, &str, i64),
        author: &str,
        body: &str,
        in_reply_to: Option<i64>,
        review: bool,
    ) -> i64 {
        let mut w = self.world();
        w.next_id += 1;
        let id = 9000 + w.next_id;
        w.comments.push(Comment {
            id,
            owner: owner.into(),
            repo: repo.into(),
            number,
            author: author.into(),
            body: body.into(),
            in_reply_to,
            review,
            review_id: None,
            path: None,
            line: None,
            side: None,
        });
        id
    }

    /// The JSON GitHub sends for a pull request, for building webhook payloads.
    pub fn pull_json(&self, owner: &str, repo: &str, number: i64) -> Option<Value> {
        let w = self.world();
        let p = w
            .pulls
            .iter()
            .find(|p| p.owner == owner && p.repo == repo && p.number == number)?;
        Some(pull_json(&self.shared, &w, p))
    }

    pub fn account(&self, login: &str) -> Option<Account> {
        self.world()
            .accounts
            .iter()
            .find(|a| a.login == login)
            .cloned()
    }

    /// The Worker variables for OAuth sign-in and the App.
    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("GITHUB_BOT_USERNAME".into(), Self::BOT_LOGIN.into()),
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
    code: Option<String>,
    redirect_uri: Option<String>,
    grant_type: Option<String>,
    refresh_token: Option<String>,
}

/// Issues a user token for `login` (with a refresh token when tokens expire).
fn issue_user_token(w: &mut World, login: String) -> Value {
    let token = format!("gho_{}", random_hex(18));
    w.user_tokens.insert(token.clone(), login.clone());
    match w.token_lifetime {
        None => json!({"access_token": token, "token_type": "bearer", "scope": ""}),
        Some(lifetime) => {
            w.user_token_expiry
                .insert(token.clone(), now_s() + lifetime);
            let refresh = format!("ghr_{}", random_hex(24));
            w.refresh_tokens.insert(refresh.clone(), login);
            json!({"access_token": token, "token_type": "bearer", "scope": "", "expires_in": lifetime,
                   "refresh_token": refresh, "refresh_token_expires_in": 15_811_200})
        }
    }
}

/// The OAuth host is not the REST API: it answers in the format `Accept` asks for —
/// JSON for `application/json`, form-encoded by default — and refuses the REST API's
/// vendor type with 406.
fn oauth_answer(headers: &HeaderMap, body: Value) -> Response {
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if accept.contains("application/vnd.github") {
        return (
            StatusCode::NOT_ACCEPTABLE,
            "the OAuth endpoints answer application/json, application/xml or form-encoded",
        )
            .into_response();
    }
    if accept.contains("application/json") {
        return Json(body).into_response();
    }
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    if let Some(fields) = body.as_object() {
        for (k, v) in fields {
            let text = v
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| v.to_string());
            form.append_pair(k, &text);
        }
    }
    (
        [(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )],
        form.finish(),
    )
        .into_response()
}

async fn access_token(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Form(f): Form<TokenForm>,
) -> Response {
    let answer = |body: Value| oauth_answer(&headers, body);
    // GitHub answers errors with 200 and an `error` field.
    if f.client_id != s.client_id || f.client_secret != s.client_secret {
        return answer(
            json!({"error": "incorrect_client_credentials", "error_description": "The client_id and/or client_secret passed are incorrect."}),
        );
    }
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    if f.grant_type.as_deref() == Some("refresh_token") {
        let Some(login) = f.refresh_token.and_then(|r| w.refresh_tokens.remove(&r)) else {
            return answer(
                json!({"error": "bad_refresh_token", "error_description": "The refresh token passed is incorrect or expired."}),
            );
        };
        w.refreshes += 1;
        return answer(issue_user_token(&mut w, login));
    }
    let Some((login, redirect)) = f.code.and_then(|c| w.codes.remove(&c)) else {
        return answer(
            json!({"error": "bad_verification_code", "error_description": "The code passed is incorrect or expired."}),
        );
    };
    if f.redirect_uri.is_some_and(|r| r != redirect) {
        return answer(json!({"error": "redirect_uri_mismatch"}));
    }
    answer(issue_user_token(&mut w, login))
}

/// A user token's login, unless it expired.
fn user_login(w: &World, token: &str) -> Option<String> {
    if w.user_token_expiry
        .get(token)
        .is_some_and(|exp| *exp <= now_s())
    {
        return None;
    }
    w.user_tokens.get(token).cloned()
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
    let login = user_login(&w, &bearer(headers)?)?;
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

/// `GET /user/emails`: paged as GitHub pages it (30 by default, at most 100 a page).
async fn emails(
    State(s): State<Arc<Shared>>,
    Query(q): Query<PageQuery>,
    headers: HeaderMap,
) -> Response {
    let per_page = q.per_page.unwrap_or(30).clamp(1, 100);
    let page = q.page.unwrap_or(1).max(1);
    match account_of(&s, &headers) {
        Some(a) => Json(
            a.emails
                .iter()
                .enumerate()
                .skip((page - 1) * per_page)
                .take(per_page)
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
    body: Bytes,
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
    // The optional body narrows the token: `repositories` (names in the installation's
    // account), `repository_ids`, `permissions` (each at most what the App has).
    let asked: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&body) {
            Ok(v @ Value::Object(_)) => v,
            _ => return error(StatusCode::BAD_REQUEST, "Problems parsing JSON"),
        }
    };
    let app_permissions = json!({"contents": "write", "metadata": "read", "pull_requests": "write", "issues": "write"});
    let repositories = match asked.get("repositories") {
        None => None,
        Some(Value::Array(names)) => {
            let mut out = Vec::new();
            for n in names {
                let Some(name) = n.as_str() else {
                    return error(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "Invalid request.\n\nFor 'items', is not a string.",
                    );
                };
                let exists = std::fs::read_dir(&s.repos_root)
                    .map(|owners| {
                        owners
                            .flatten()
                            .any(|o| o.path().join(format!("{name}.git")).exists())
                    })
                    .unwrap_or(false);
                if !exists {
                    return error(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "There is at least one repository that does not exist or is not accessible to the parent installation.",
                    );
                }
                out.push(name.to_ascii_lowercase());
            }
            Some(out)
        }
        Some(_) => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid request.\n\nFor 'properties/repositories', is not an array.",
            )
        }
    };
    let permissions = match asked.get("permissions") {
        None => app_permissions.clone(),
        Some(Value::Object(p)) => {
            for (k, v) in p {
                let have = app_permissions.get(k).and_then(Value::as_str);
                let ok = matches!(
                    (have, v.as_str()),
                    (Some("write"), Some("read" | "write")) | (Some("read"), Some("read"))
                );
                if !ok {
                    return error(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        &format!(
                            "The permissions requested are not granted to this installation: {k}"
                        ),
                    );
                }
            }
            Value::Object(p.clone())
        }
        Some(_) => return error(StatusCode::UNPROCESSABLE_ENTITY, "Invalid request."),
    };
    let token = format!("ghs_{}", random_hex(18));
    let expires = now_s() + 3600;
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    w.installation_tokens.insert(
        token.clone(),
        Grant {
            expires,
            repositories: repositories.clone(),
            permissions: permissions.clone(),
        },
    );
    w.mints += 1;
    let expires_at = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(expires),
    )
    .to_string();
    let selection = if repositories.is_some() {
        "selected"
    } else {
        "all"
    };
    (
        StatusCode::CREATED,
        Json(json!({"token": token, "expires_at": expires_at, "permissions": permissions, "repository_selection": selection})),
    )
        .into_response()
}

fn is_user_token(s: &Shared, token: &str) -> bool {
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    user_login(&w, token).is_some()
}

fn installation_token_ok(s: &Shared, token: &str) -> bool {
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    w.installation_tokens
        .get(token)
        .is_some_and(|g| g.expires > now_s())
}

/// Whether a good installation token reaches `repo` (its scope names it, or has none).
fn token_reaches(s: &Shared, token: &str, repo: &str) -> bool {
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    w.installation_tokens.get(token).is_some_and(|g| {
        g.expires > now_s()
            && g.repositories
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n.eq_ignore_ascii_case(repo)))
    })
}

async fn repository(
    State(s): State<Arc<Shared>>,
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if !bearer(&headers).is_some_and(|t| installation_token_ok(&s, &t)) {
        return error(StatusCode::UNAUTHORIZED, "Bad credentials");
    }
    if !bearer(&headers).is_some_and(|t| token_reaches(&s, &t, &repo)) {
        return error(StatusCode::NOT_FOUND, "Not Found");
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
    if password
        .as_deref()
        .is_some_and(|p| installation_token_ok(&s, p))
    {
        // GitHub: a token narrowed to other repositories does not see this one.
        let repo = path
            .trim_start_matches('/')
            .split('/')
            .nth(1)
            .unwrap_or_default()
            .trim_end_matches(".git")
            .to_owned();
        if !password
            .as_deref()
            .is_some_and(|p| token_reaches(&s, p, &repo))
        {
            record(404);
            return (StatusCode::NOT_FOUND, "Repository not found.").into_response();
        }
    }
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

fn next_number(w: &World, owner: &str, repo: &str) -> i64 {
    w.pulls
        .iter()
        .filter(|p| p.owner == owner && p.repo == repo)
        .map(|p| p.number)
        .max()
        .unwrap_or(0)
        + 1
}

fn user_json(w: &World, login: &str) -> Value {
    match w.accounts.iter().find(|a| a.login == login) {
        Some(a) => json!({"id": a.id, "login": a.login, "type": "User"}),
        None => {
            json!({"id": 4242, "login": login, "type": if login.ends_with("[bot]") { "Bot" } else { "User" }})
        }
    }
}

fn pull_json(s: &Shared, w: &World, p: &Pull) -> Value {
    let sha_in = |owner: &str, branch: &str| {
        std::process::Command::new("git")
            .arg("--git-dir")
            .arg(s.repos_root.join(owner).join(format!("{}.git", p.repo)))
            .args([
                "rev-parse",
                "--verify",
                "-q",
                &format!("refs/heads/{branch}"),
            ])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    json!({
        "number": p.number,
        "html_url": format!("{}/{}/{}/pull/{}", s.base_url, p.owner, p.repo, p.number),
        "state": p.state,
        "draft": p.draft,
        "merged": p.merged,
        "merged_at": if p.merged { json!("2026-01-01T00:00:00Z") } else { Value::Null },
        "title": p.title,
        "body": p.body,
        "user": user_json(w, &p.author),
        "head": {"ref": p.head, "sha": sha_in(p.head_owner(), &p.head), "label": format!("{}:{}", p.head_owner(), p.head),
                 "repo": repo_json(s, p.head_owner(), &p.repo, p.head_owner.is_some())},
        "base": {"ref": p.base, "sha": sha_in(&p.owner, &p.base), "label": format!("{}:{}", p.owner, p.base),
                 "repo": repo_json(s, &p.owner, &p.repo, false)},
        "labels": p.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
    })
}

/// A repository as pull requests show it (`head.repo`, `base.repo`).
fn repo_json(s: &Shared, owner: &str, repo: &str, fork: bool) -> Value {
    json!({
        "name": repo, "full_name": format!("{owner}/{repo}"), "owner": {"login": owner},
        "fork": fork, "clone_url": format!("{}/{owner}/{repo}.git", s.base_url),
    })
}

/// Who a REST call is from: an installation token is the App's bot, a user token its
/// person. `None`: bad credentials.
fn caller(s: &Shared, headers: &HeaderMap) -> Option<String> {
    headers.get("user-agent")?;
    let token = bearer(headers)?;
    if installation_token_ok(s, &token) {
        return Some(FakeGitHub::BOT_LOGIN.into());
    }
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    user_login(&w, &token)
}

fn record_call(s: &Shared, method: &str, uri: &Uri, who: &str) {
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    w.calls.push((method.into(), uri.to_string(), who.into()));
}

fn repo_exists(s: &Shared, owner: &str, repo: &str) -> bool {
    s.repos_root
        .join(owner)
        .join(format!("{repo}.git"))
        .exists()
}

fn branch_exists(s: &Shared, owner: &str, repo: &str, branch: &str) -> bool {
    std::process::Command::new("git")
        .arg("--git-dir")
        .arg(s.repos_root.join(owner).join(format!("{repo}.git")))
        .args([
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Authenticates and checks the repository; the caller's login, or GitHub's error.
#[allow(clippy::result_large_err)] // the error is the response itself
fn gate(
    s: &Shared,
    headers: &HeaderMap,
    method: &str,
    uri: &Uri,
    owner: &str,
    repo: &str,
) -> Result<String, Response> {
    let Some(who) = caller(s, headers) else {
        return Err(error(StatusCode::UNAUTHORIZED, "Bad credentials"));
    };
    record_call(s, method, uri, &who);
    if !repo_exists(s, owner, repo) {
        return Err(error(StatusCode::NOT_FOUND, "Not Found"));
    }
    Ok(who)
}

fn validation_failed(message: &str) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        Json(json!({"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "custom", "message": message}], "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"})),
    )
        .into_response()
}

#[derive(Deserialize)]
struct PullsQuery {
    head: Option<String>,
    state: Option<String>,
}

async fn list_pulls(
    State(s): State<Arc<Shared>>,
    Path((owner, repo)): Path<(String, String)>,
    Query(q): Query<PullsQuery>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &headers, "GET", &uri, &owner, &repo) {
        return r;
    }
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    let state = q.state.unwrap_or_else(|| "open".into());
    let list: Vec<Value> = w
        .pulls
        .iter()
        .filter(|p| p.owner == owner && p.repo == repo)
        .filter(|p| state == "all" || p.state == state)
        .filter(|p| {
            q.head
                .as_deref()
                .is_none_or(|h| h == format!("{}:{}", p.head_owner(), p.head))
        })
        .map(|p| pull_json(&s, &w, p))
        .collect();
    Json(list).into_response()
}

#[derive(Deserialize)]
struct NewPull {
    title: Option<String>,
    head: Option<String>,
    base: Option<String>,
    body: Option<String>,
    #[serde(default)]
    draft: bool,
}

async fn create_pull(
    State(s): State<Arc<Shared>>,
    Path((owner, repo)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let who = match gate(&s, &headers, "POST", &uri, &owner, &repo) {
        Ok(w) => w,
        Err(r) => return r,
    };
    let Ok(new) = serde_json::from_slice::<NewPull>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Problems parsing JSON");
    };
    let (Some(title), Some(head), Some(base)) = (new.title, new.head, new.base) else {
        return validation_failed("title, head and base are required");
    };
    let head = head
        .split_once(':')
        .map_or(head.clone(), |(_, b)| b.to_owned());
    if !branch_exists(&s, &owner, &repo, &head) {
        return validation_failed(&format!("head {head} does not exist"));
    }
    if !branch_exists(&s, &owner, &repo, &base) {
        return validation_failed(&format!("base {base} does not exist"));
    }
    if head == base {
        return validation_failed("head and base must be different");
    }
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    if w.pulls.iter().any(|p| {
        p.owner == owner && p.repo == repo && p.head == head && p.base == base && p.state == "open"
    }) {
        return validation_failed(&format!(
            "A pull request already exists for {owner}:{head}."
        ));
    }
    let number = next_number(&w, &owner, &repo);
    let pull = Pull {
        owner: owner.clone(),
        repo: repo.clone(),
        number,
        title,
        body: new.body.unwrap_or_default(),
        head,
        base,
        state: "open".into(),
        draft: new.draft,
        merged: false,
        author: who,
        labels: Vec::new(),
        head_owner: None,
    };
    let json = pull_json(&s, &w, &pull);
    w.pulls.push(pull);
    (StatusCode::CREATED, Json(json)).into_response()
}

async fn get_pull(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, number)): Path<(String, String, i64)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &headers, "GET", &uri, &owner, &repo) {
        return r;
    }
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    match w
        .pulls
        .iter()
        .find(|p| p.owner == owner && p.repo == repo && p.number == number)
    {
        Some(p) => Json(pull_json(&s, &w, p)).into_response(),
        None => error(StatusCode::NOT_FOUND, "Not Found"),
    }
}

#[derive(Deserialize)]
struct CommentBody {
    body: Option<String>,
}

fn comment_json(c: &Comment, w: &World) -> Value {
    json!({"id": c.id, "body": c.body, "user": user_json(w, &c.author), "in_reply_to_id": c.in_reply_to})
}

async fn create_comment(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, number)): Path<(String, String, i64)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    post_comment(&s, &headers, &uri, (owner, repo, number), None, &body)
}

/// A comment on a pull request's conversation, or (`in_reply_to`) a reply in a review
/// comment's thread, by whoever the token is.
fn post_comment(
    s: &Shared,
    headers: &HeaderMap,
    uri: &Uri,
    (owner, repo, number): (String, String, i64),
    in_reply_to: Option<i64>,
    body: &[u8],
) -> Response {
    let who = match gate(s, headers, "POST", uri, &owner, &repo) {
        Ok(w) => w,
        Err(r) => return r,
    };
    let Some(text) = serde_json::from_slice::<CommentBody>(body)
        .ok()
        .and_then(|c| c.body)
    else {
        return validation_failed("body is required");
    };
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    if !w
        .pulls
        .iter()
        .any(|p| p.owner == owner && p.repo == repo && p.number == number)
    {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    w.next_id += 1;
    let c = Comment {
        id: 9000 + w.next_id,
        owner,
        repo,
        number,
        author: who,
        body: text,
        review: in_reply_to.is_some(),
        in_reply_to,
        review_id: None,
        path: None,
        line: None,
        side: None,
    };
    let json = comment_json(&c, &w);
    w.comments.push(c);
    (StatusCode::CREATED, Json(json)).into_response()
}

async fn list_comments(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, number)): Path<(String, String, i64)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &headers, "GET", &uri, &owner, &repo) {
        return r;
    }
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    let list: Vec<Value> = w
        .comments
        .iter()
        .filter(|c| c.owner == owner && c.repo == repo && c.number == number)
        .map(|c| comment_json(c, &w))
        .collect();
    Json(list).into_response()
}

async fn reply_review_comment(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, number, id)): Path<(String, String, i64, i64)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // GitHub takes a reply only to a thread's top review comment of that pull request:
    // "replies to replies are not supported". (Its status for that refusal is not
    // documented; a validation failure is what this fake answers.)
    let target = s
        .world
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .comments
        .iter()
        .find(|c| {
            c.id == id && c.review && c.owner == owner && c.repo == repo && c.number == number
        })
        .map(|c| c.in_reply_to);
    match target {
        None => error(StatusCode::NOT_FOUND, "Not Found"),
        Some(Some(_)) => validation_failed("replies to replies are not supported"),
        Some(None) => post_comment(&s, &headers, &uri, (owner, repo, number), Some(id), &body),
    }
}

async fn request_reviewers(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, number)): Path<(String, String, i64)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &headers, "POST", &uri, &owner, &repo) {
        return r;
    }
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    match w
        .pulls
        .iter()
        .find(|p| p.owner == owner && p.repo == repo && p.number == number)
    {
        Some(p) => (StatusCode::CREATED, Json(pull_json(&s, &w, p))).into_response(),
        None => error(StatusCode::NOT_FOUND, "Not Found"),
    }
}

#[derive(Deserialize)]
struct ReactionBody {
    content: Option<String>,
}

async fn react(
    State(s): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(who) = caller(&s, &headers) else {
        return error(StatusCode::UNAUTHORIZED, "Bad credentials");
    };
    record_call(&s, "POST", &uri, &who);
    const KINDS: [&str; 8] = [
        "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes",
    ];
    let Some(content) = serde_json::from_slice::<ReactionBody>(&body)
        .ok()
        .and_then(|r| r.content)
    else {
        return validation_failed("content is required");
    };
    if !KINDS.contains(&content.as_str()) {
        return validation_failed("content is not a reaction");
    }
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    w.next_id += 1;
    let id = w.next_id;
    w.reactions.push(Reaction {
        path: uri.path().to_owned(),
        content: content.clone(),
        by: who.clone(),
    });
    (
        StatusCode::CREATED,
        Json(json!({"id": id, "content": content, "user": {"login": who}})),
    )
        .into_response()
}

#[derive(Deserialize)]
struct LabelBody {
    name: Option<String>,
    labels: Option<Vec<String>>,
}

async fn get_label(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, name)): Path<(String, String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &headers, "GET", &uri, &owner, &repo) {
        return r;
    }
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    if w.labels
        .iter()
        .any(|(o, r, n)| *o == owner && *r == repo && *n == name)
    {
        Json(json!({"name": name, "color": "ededed"})).into_response()
    } else {
        error(StatusCode::NOT_FOUND, "Not Found")
    }
}

async fn create_label(
    State(s): State<Arc<Shared>>,
    Path((owner, repo)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = gate(&s, &headers, "POST", &uri, &owner, &repo) {
        return r;
    }
    let Some(name) = serde_json::from_slice::<LabelBody>(&body)
        .ok()
        .and_then(|l| l.name)
    else {
        return validation_failed("name is required");
    };
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    if w.labels
        .iter()
        .any(|(o, r, n)| *o == owner && *r == repo && *n == name)
    {
        return validation_failed("already_exists");
    }
    w.labels.push((owner, repo, name.clone()));
    (
        StatusCode::CREATED,
        Json(json!({"name": name, "color": "ededed"})),
    )
        .into_response()
}

async fn add_labels(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, number)): Path<(String, String, i64)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = gate(&s, &headers, "POST", &uri, &owner, &repo) {
        return r;
    }
    let labels = serde_json::from_slice::<LabelBody>(&body)
        .ok()
        .and_then(|l| l.labels)
        .unwrap_or_default();
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    let Some(p) = w
        .pulls
        .iter_mut()
        .find(|p| p.owner == owner && p.repo == repo && p.number == number)
    else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    for l in labels {
        if !p.labels.contains(&l) {
            p.labels.push(l);
        }
    }
    let out: Vec<Value> = p.labels.iter().map(|l| json!({"name": l})).collect();
    Json(out).into_response()
}

async fn collaborator_permission(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, login)): Path<(String, String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &headers, "GET", &uri, &owner, &repo) {
        return r;
    }
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    let permission = w
        .permissions
        .get(&(owner, repo, login.clone()))
        .cloned()
        .unwrap_or_else(|| "read".into());
    Json(json!({"permission": permission, "role_name": permission, "user": user_json(&w, &login)}))
        .into_response()
}

#[derive(Deserialize)]
struct PageQuery {
    per_page: Option<usize>,
    page: Option<usize>,
}

/// The bare repositories under the root, as `(owner, name)`, sorted.
fn all_repositories(s: &Shared) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for owner in std::fs::read_dir(&s.repos_root)
        .into_iter()
        .flatten()
        .flatten()
    {
        for repo in std::fs::read_dir(owner.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = repo.file_name().to_string_lossy().into_owned();
            if let Some(name) = name.strip_suffix(".git") {
                out.push((
                    owner.file_name().to_string_lossy().into_owned(),
                    name.to_owned(),
                ));
            }
        }
    }
    out.sort();
    out
}

async fn installation_repositories(
    State(s): State<Arc<Shared>>,
    Query(q): Query<PageQuery>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let Some(token) = bearer(&headers) else {
        return error(StatusCode::UNAUTHORIZED, "Bad credentials");
    };
    // A token GitHub does not know (revoked, expired, made up) is bad credentials; a
    // person's token is known but may not list the installation's repositories.
    if !installation_token_ok(&s, &token) && !is_user_token(&s, &token) {
        return error(StatusCode::UNAUTHORIZED, "Bad credentials");
    }
    if !installation_token_ok(&s, &token) {
        return error(
            StatusCode::FORBIDDEN,
            "You must authenticate with an installation access token",
        );
    }
    record_call(&s, "GET", &uri, FakeGitHub::BOT_LOGIN);
    let per_page = q.per_page.unwrap_or(30).clamp(1, 100);
    let page = q.page.unwrap_or(1).max(1);
    let all = all_repositories(&s);
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    let list: Vec<Value> = all
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|(owner, name)| {
            json!({
                "name": name, "full_name": format!("{owner}/{name}"), "owner": {"login": owner},
                "private": !name.starts_with("public"), "archived": w.archived.contains(&format!("{owner}/{name}")),
                "description": format!("The {name} repository"), "default_branch": "main",
                "clone_url": format!("{}/{owner}/{name}.git", s.base_url),
                "updated_at": "2026-11-01T12:00:00Z",
            })
        })
        .collect();
    Json(
        json!({"total_count": all.len(), "repository_selection": "selected", "repositories": list}),
    )
    .into_response()
}

async fn list_branches(
    State(s): State<Arc<Shared>>,
    Path((owner, repo)): Path<(String, String)>,
    Query(q): Query<PageQuery>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &headers, "GET", &uri, &owner, &repo) {
        return r;
    }
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(s.repos_root.join(&owner).join(format!("{repo}.git")))
        .args([
            "for-each-ref",
            "--format=%(refname:short)|%(objectname)",
            "refs/heads",
        ])
        .output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let per_page = q.per_page.unwrap_or(30).clamp(1, 100);
    let page = q.page.unwrap_or(1).max(1);
    let list: Vec<Value> = text
        .lines()
        .filter_map(|l| l.split_once('|'))
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|(name, sha)| json!({"name": name, "commit": {"sha": sha}, "protected": false}))
        .collect();
    Json(list).into_response()
}

/// One file of a pull request as `GET /pulls/{n}/files` shows it: name, status, counts, and
/// the patch (the hunks, from the first `@@`), absent for a binary file.
fn pr_file_list(s: &Shared, p: &Pull) -> Vec<Value> {
    let git_dir = s.repos_root.join(&p.owner).join(format!("{}.git", p.repo));
    let head = if p.head_owner.is_some() {
        format!("refs/pull/{}/head", p.number)
    } else {
        format!("refs/heads/{}", p.head)
    };
    let range = format!("refs/heads/{}...{head}", p.base);
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&git_dir)
            .args(args)
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default()
    };
    let numstat = git(&["diff", "--numstat", "-z", "--no-renames", &range]);
    let mut files = Vec::new();
    // `-z` numstat: "added\tdeleted\tpath\0" per file ("-\t-\t" for binary).
    for entry in numstat.split(|b| *b == 0).filter(|e| !e.is_empty()) {
        let text = String::from_utf8_lossy(entry);
        let mut parts = text.splitn(3, '\t');
        let (Some(a), Some(d), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let binary = a == "-";
        let (additions, deletions) = (a.parse::<u64>().unwrap_or(0), d.parse::<u64>().unwrap_or(0));
        let diff = String::from_utf8_lossy(&git(&[
            "diff",
            "--no-renames",
            "--no-color",
            &range,
            "--",
            path,
        ]))
        .into_owned();
        let status = if diff.contains("\nnew file mode") {
            "added"
        } else if diff.contains("\ndeleted file mode") {
            "removed"
        } else {
            "modified"
        };
        let patch = (!binary)
            .then(|| {
                diff.find("@@")
                    .map(|i| diff[i..].trim_end_matches('\n').to_owned())
            })
            .flatten();
        files.push(json!({
            "sha": "0000000000000000000000000000000000000000",
            "filename": path, "status": status,
            "additions": additions, "deletions": deletions, "changes": additions + deletions,
            "patch": patch,
        }));
    }
    files
}

#[derive(Deserialize)]
struct Page {
    per_page: Option<usize>,
    page: Option<usize>,
}

async fn pull_files(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, number)): Path<(String, String, i64)>,
    Query(q): Query<Page>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &headers, "GET", &uri, &owner, &repo) {
        return r;
    }
    let pull = s
        .world
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .pulls
        .iter()
        .find(|p| p.owner == owner && p.repo == repo && p.number == number)
        .cloned();
    let Some(pull) = pull else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    // GitHub: 30 a page by default, 100 at most, 3,000 files in all.
    let per_page = q.per_page.unwrap_or(30).clamp(1, 100);
    let page = q.page.unwrap_or(1).max(1);
    let files: Vec<Value> = pr_file_list(&s, &pull)
        .into_iter()
        .take(3000)
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    Json(files).into_response()
}

/// The lines each side of a file's patch spans, by its hunk headers (`@@ -a,b +c,d @@`):
/// GitHub takes a review comment on a line inside a hunk of the side it names.
type Spans = Vec<(u64, u64)>;

fn hunk_ranges(patch: &str) -> (Spans, Spans) {
    let (mut left, mut right) = (Vec::new(), Vec::new());
    for header in patch.lines().filter_map(|l| l.strip_prefix("@@ -")) {
        let Some((old, rest)) = header.split_once(" +") else {
            continue;
        };
        let new = rest.split(' ').next().unwrap_or_default();
        let span = |r: &str| {
            let (start, count) = r.split_once(',').unwrap_or((r, "1"));
            let (start, count) = (start.parse::<u64>().ok()?, count.parse::<u64>().ok()?);
            Some((start, start + count))
        };
        left.extend(span(old));
        right.extend(span(new));
    }
    (left, right)
}

fn unprocessable(message: &str) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        Json(json!({"message": "Unprocessable Entity", "errors": [message],
            "documentation_url": "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request"})),
    )
        .into_response()
}

#[derive(Deserialize)]
struct NewReviewComment {
    path: Option<String>,
    line: Option<u64>,
    side: Option<String>,
    position: Option<u64>,
    body: Option<String>,
}

#[derive(Deserialize)]
struct NewReview {
    body: Option<String>,
    event: Option<String>,
    #[serde(default)]
    comments: Vec<NewReviewComment>,
}

/// `POST /repos/{o}/{r}/pulls/{n}/reviews`, refusing what GitHub refuses: an unknown
/// event, approving or requesting changes on one's own pull request, a missing body where
/// the event needs one, a comment on a file the pull request does not change or on a line
/// outside the diff's hunks.
async fn create_review(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, number)): Path<(String, String, i64)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let who = match gate(&s, &headers, "POST", &uri, &owner, &repo) {
        Ok(w) => w,
        Err(r) => return r,
    };
    let Ok(review) = serde_json::from_slice::<NewReview>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Problems parsing JSON");
    };
    let pull = s
        .world
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .pulls
        .iter()
        .find(|p| p.owner == owner && p.repo == repo && p.number == number)
        .cloned();
    let Some(pull) = pull else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let state = match review.event.as_deref() {
        None => "PENDING",
        Some("APPROVE") => "APPROVED",
        Some("REQUEST_CHANGES") => "CHANGES_REQUESTED",
        Some("COMMENT") => "COMMENTED",
        Some(other) => return unprocessable(&format!("Unknown event: {other}")),
    };
    if pull.author == who {
        match state {
            "APPROVED" => return unprocessable("Can not approve your own pull request"),
            "CHANGES_REQUESTED" => {
                return unprocessable("Can not request changes on your own pull request")
            }
            _ => {}
        }
    }
    let text = review.body.clone().unwrap_or_default();
    if matches!(state, "CHANGES_REQUESTED" | "COMMENTED") && text.trim().is_empty() {
        return unprocessable("Body is required for this event");
    }
    let files = pr_file_list(&s, &pull);
    for c in &review.comments {
        let (Some(path), Some(text)) = (c.path.as_deref(), c.body.as_deref()) else {
            return unprocessable("Review comments need a path and a body");
        };
        if text.trim().is_empty() {
            return unprocessable("Review comment body can't be blank");
        }
        let Some(file) = files.iter().find(|f| f["filename"] == path) else {
            return unprocessable("Path could not be resolved");
        };
        if c.position.is_some() {
            continue;
        }
        let Some(line) = c.line else {
            return unprocessable("Line could not be resolved");
        };
        let (left, right) = hunk_ranges(file["patch"].as_str().unwrap_or_default());
        let ranges = match c.side.as_deref().unwrap_or("RIGHT") {
            "RIGHT" => right,
            "LEFT" => left,
            _ => return unprocessable("Side must be LEFT or RIGHT"),
        };
        if !ranges.iter().any(|(a, b)| (*a..*b).contains(&line)) {
            return unprocessable("Pull request review thread line must be part of the diff");
        }
    }
    let mut w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    w.next_id += 1;
    let id = 7000 + w.next_id;
    let mut ids = Vec::new();
    for c in review.comments {
        w.next_id += 1;
        let cid = 9000 + w.next_id;
        ids.push(cid);
        w.comments.push(Comment {
            id: cid,
            owner: owner.clone(),
            repo: repo.clone(),
            number,
            author: who.clone(),
            body: c.body.unwrap_or_default(),
            in_reply_to: None,
            review: true,
            review_id: Some(id),
            path: c.path,
            line: c.line,
            side: Some(c.side.unwrap_or_else(|| "RIGHT".into())),
        });
    }
    w.reviews.push(Review {
        id,
        owner: owner.clone(),
        repo: repo.clone(),
        number,
        author: who.clone(),
        state: state.into(),
        body: text.clone(),
        comments: ids,
    });
    let json = json!({
        "id": id, "user": user_json(&w, &who), "body": text, "state": state,
        "html_url": format!("{}/{owner}/{repo}/pull/{number}#pullrequestreview-{id}", s.base_url),
        "pull_request_url": format!("{}/repos/{owner}/{repo}/pulls/{number}", s.base_url),
        "submitted_at": "2026-01-01T00:00:00Z",
    });
    (StatusCode::OK, Json(json)).into_response()
}

async fn review_comments(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, number, id)): Path<(String, String, i64, i64)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &headers, "GET", &uri, &owner, &repo) {
        return r;
    }
    let w = s.world.lock().unwrap_or_else(|e| e.into_inner());
    if !w
        .reviews
        .iter()
        .any(|r| r.id == id && r.owner == owner && r.repo == repo && r.number == number)
    {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    let list: Vec<Value> = w
        .comments
        .iter()
        .filter(|c| c.review_id == Some(id))
        .map(|c| {
            json!({"id": c.id, "pull_request_review_id": id, "path": c.path, "line": c.line,
                   "side": c.side, "body": c.body, "user": user_json(&w, &c.author)})
        })
        .collect();
    Json(list).into_response()
}

fn git_in(
    s: &Shared,
    owner: &str,
    repo: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> Option<String> {
    use std::io::Write;
    let mut cmd = std::process::Command::new("git");
    cmd.arg("--git-dir")
        .arg(s.repos_root.join(owner).join(format!("{repo}.git")))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().ok()?;
    if let Some(input) = stdin {
        child.stdin.take()?.write_all(input.as_bytes()).ok()?;
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
}

/// A commit as the REST API shows it (`GET /compare`, `POST /git/commits`).
fn commit_json(s: &Shared, owner: &str, repo: &str, sha: &str) -> Option<Value> {
    let fields = git_in(
        s,
        owner,
        repo,
        &[
            "show",
            "-s",
            "--format=%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B",
            sha,
        ],
        None,
    )?;
    let f: Vec<&str> = fields.splitn(9, '\0').collect();
    if f.len() < 9 {
        return None;
    }
    let verified = s
        .world
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .signed
        .iter()
        .any(|x| x == sha);
    let parents: Vec<Value> = f[1].split_whitespace().map(|p| json!({"sha": p})).collect();
    Some(json!({
        "sha": sha,
        "commit": {
            "author": {"name": f[2], "email": f[3], "date": f[4]},
            "committer": {"name": f[5], "email": f[6], "date": f[7]},
            "message": f[8].trim_end(),
            "tree": {"sha": f[0]},
            "verification": {"verified": verified, "reason": if verified { "valid" } else { "unsigned" }, "signature": null, "payload": null}
        },
        "parents": parents
    }))
}

/// `GET /repos/{owner}/{repo}/compare/{base}...{head}`: the merge base and the commits
/// from it to head, oldest first (at most 250, as GitHub lists them).
async fn compare(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, basehead)): Path<(String, String, String)>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &headers, "GET", &uri, &owner, &repo) {
        return r;
    }
    let Some((base, head)) = basehead.split_once("...") else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let (Some(base_sha), Some(head_sha)) = (
        git_in(
            &s,
            &owner,
            &repo,
            &["rev-parse", "--verify", &format!("{base}^{{commit}}")],
            None,
        ),
        git_in(
            &s,
            &owner,
            &repo,
            &["rev-parse", "--verify", &format!("{head}^{{commit}}")],
            None,
        ),
    ) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let Some(merge_base) = git_in(
        &s,
        &owner,
        &repo,
        &["merge-base", &base_sha, &head_sha],
        None,
    ) else {
        return error(
            StatusCode::NOT_FOUND,
            "No common ancestor between the base and head.",
        );
    };
    let list = git_in(
        &s,
        &owner,
        &repo,
        &[
            "rev-list",
            "--reverse",
            "--topo-order",
            &format!("{merge_base}..{head_sha}"),
        ],
        None,
    )
    .unwrap_or_default();
    let commits: Vec<Value> = list
        .lines()
        .take(250)
        .filter_map(|sha| commit_json(&s, &owner, &repo, sha))
        .collect();
    let behind = git_in(
        &s,
        &owner,
        &repo,
        &["rev-list", "--count", &format!("{merge_base}..{base_sha}")],
        None,
    )
    .and_then(|n| n.parse::<i64>().ok())
    .unwrap_or(0);
    let ahead = list.lines().count() as i64;
    Json(json!({
        "status": match (ahead, behind) { (0, 0) => "identical", (_, 0) => "ahead", (0, _) => "behind", _ => "diverged" },
        "ahead_by": ahead,
        "behind_by": behind,
        "total_commits": ahead,
        "merge_base_commit": commit_json(&s, &owner, &repo, &merge_base),
        "base_commit": commit_json(&s, &owner, &repo, &base_sha),
        "commits": commits
    }))
    .into_response()
}

#[derive(Deserialize)]
struct Person {
    name: String,
    email: String,
    #[serde(default)]
    date: Option<String>,
}

#[derive(Deserialize)]
struct NewCommit {
    message: String,
    tree: String,
    #[serde(default)]
    parents: Vec<String>,
    #[serde(default)]
    author: Option<Person>,
    #[serde(default)]
    committer: Option<Person>,
    #[serde(default)]
    signature: Option<String>,
}

/// `POST /repos/{owner}/{repo}/git/commits`. GitHub signs a commit made with a GitHub App's
/// installation token when the caller names no committer and brings no signature: the
/// committer is then GitHub, and the commit carries GitHub's signature.
async fn create_commit(
    State(s): State<Arc<Shared>>,
    Path((owner, repo)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let who = match gate(&s, &headers, "POST", &uri, &owner, &repo) {
        Ok(w) => w,
        Err(r) => return r,
    };
    let Ok(c) = serde_json::from_slice::<NewCommit>(&body) else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "Invalid request."})),
        )
            .into_response();
    };
    let is_tree =
        git_in(&s, &owner, &repo, &["cat-file", "-t", &c.tree], None).as_deref() == Some("tree");
    let parents_ok = c.parents.iter().all(|p| {
        git_in(&s, &owner, &repo, &["cat-file", "-t", p], None).as_deref() == Some("commit")
    });
    if !is_tree || !parents_ok {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "Tree SHA does not exist"})),
        )
            .into_response();
    }
    let author = c.author.unwrap_or(Person {
        name: who.clone(),
        email: format!("{who}@users.noreply.github.com"),
        date: None,
    });
    let signs = who == FakeGitHub::BOT_LOGIN && c.committer.is_none() && c.signature.is_none();
    let committer = c.committer.unwrap_or(Person {
        name: "GitHub".into(),
        email: "noreply@github.com".into(),
        date: None,
    });
    // git writes the object (and reads the dates); GitHub's signature goes in after the
    // committer line, as `gpgsig` does.
    let mut cmd = std::process::Command::new("git");
    cmd.arg("--git-dir")
        .arg(s.repos_root.join(&owner).join(format!("{repo}.git")))
        .arg("commit-tree")
        .arg(&c.tree)
        .arg("-m")
        .arg(&c.message)
        .env("GIT_AUTHOR_NAME", &author.name)
        .env("GIT_AUTHOR_EMAIL", &author.email)
        .env("GIT_COMMITTER_NAME", &committer.name)
        .env("GIT_COMMITTER_EMAIL", &committer.email);
    for p in &c.parents {
        cmd.arg("-p").arg(p);
    }
    if let Some(d) = &author.date {
        cmd.env("GIT_AUTHOR_DATE", d);
    }
    if let Some(d) = &committer.date {
        cmd.env("GIT_COMMITTER_DATE", d);
    }
    let unsigned = match cmd.output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        _ => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "could not write the commit",
            )
        }
    };
    let sha = if signs {
        let Some(raw) = git_in(&s, &owner, &repo, &["cat-file", "commit", &unsigned], None) else {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "could not read the commit",
            );
        };
        let (head, message) = raw.split_once("\n\n").unwrap_or((raw.as_str(), ""));
        let object = format!(
            "{head}\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n wsBcBAABCAAQBQJfake-github-web-flow-signature\n -----END PGP SIGNATURE-----\n\n{message}\n"
        );
        match git_in(
            &s,
            &owner,
            &repo,
            &["hash-object", "-t", "commit", "-w", "--stdin"],
            Some(&object),
        ) {
            Some(sha) => sha,
            None => {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "could not sign the commit",
                )
            }
        }
    } else {
        unsigned
    };
    if signs {
        s.world
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .signed
            .push(sha.clone());
    }
    let mut made = commit_json(&s, &owner, &repo, &sha).unwrap_or(Value::Null);
    // `POST /git/commits` answers the commit itself, not the list shape.
    if let Some(inner) = made.get("commit").cloned() {
        made = json!({
            "sha": sha, "author": inner["author"], "committer": inner["committer"],
            "message": inner["message"], "tree": inner["tree"], "parents": made["parents"],
            "verification": inner["verification"]
        });
    }
    (StatusCode::CREATED, Json(made)).into_response()
}

#[derive(Deserialize)]
struct RefUpdate {
    sha: String,
    #[serde(default)]
    force: bool,
}

/// `PATCH /repos/{owner}/{repo}/git/refs/heads/{branch}`: moves a branch; without `force`
/// only forward.
async fn update_ref(
    State(s): State<Arc<Shared>>,
    Path((owner, repo, branch)): Path<(String, String, String)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = gate(&s, &headers, "PATCH", &uri, &owner, &repo) {
        return r;
    }
    let Ok(u) = serde_json::from_slice::<RefUpdate>(&body) else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "Invalid request."})),
        )
            .into_response();
    };
    let name = format!("refs/heads/{branch}");
    let Some(old) = git_in(&s, &owner, &repo, &["rev-parse", "--verify", &name], None) else {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "Reference does not exist"})),
        )
            .into_response();
    };
    if git_in(&s, &owner, &repo, &["cat-file", "-t", &u.sha], None).as_deref() != Some("commit") {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "Object does not exist"})),
        )
            .into_response();
    }
    let forward = git_in(
        &s,
        &owner,
        &repo,
        &["merge-base", "--is-ancestor", &old, &u.sha],
        None,
    )
    .is_some();
    if !u.force && !forward {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "Update is not a fast forward"})),
        )
            .into_response();
    }
    if git_in(&s, &owner, &repo, &["update-ref", &name, &u.sha], None).is_none() {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "could not move the branch",
        );
    }
    Json(json!({"ref": name, "object": {"type": "commit", "sha": u.sha}})).into_response()
}
