//! The GitHub REST calls pull requests and the bot make, and whose token makes them: the
//! person's own (sealed in D1 at sign-in, refreshed when it expires) or the App's.

use crate::client::{self, api_base, Reply};
use crate::rest::{self, send_json};
use inspect_protocol::scm::AuthoredAs;
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::setting;
use serde::Deserialize;
use serde_json::{json, Value};
use wasm_bindgen::JsValue;
use worker::{Env, Method};

fn db_error(e: worker::Error) -> ApiError {
    ApiError::new(ErrorCode::Unavailable, format!("database: {e}"))
}

fn num(v: i64) -> JsValue {
    JsValue::from_f64(v as f64)
}

fn opt(v: Option<&str>) -> JsValue {
    v.map_or(JsValue::NULL, JsValue::from)
}

fn sealing_key(env: &Env) -> Option<inspect_secrets::SealingKey> {
    inspect_secrets::SealingKey::from_config(setting(env, inspect_secrets::KEY_VAR).as_deref()).ok()
}

fn seal(key: &inspect_secrets::SealingKey, value: &str) -> Result<String, ApiError> {
    let mut iv = [0u8; 12];
    getrandom::fill(&mut iv).map_err(|e| ApiError::internal(e.to_string()))?;
    key.seal(iv, value)
}

/// An OAuth token reply (`/login/oauth/access_token`), expiring tokens included.
#[derive(Debug, Deserialize)]
pub struct OAuthTokens {
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// Seconds.
    #[serde(default)]
    pub expires_in: Option<i64>,
    #[serde(default)]
    pub refresh_token_expires_in: Option<i64>,
}

/// Keeps a person's GitHub token, sealed, so PRs made for them are theirs. Without a
/// secrets key nothing is kept (PRs then come from the App).
pub async fn store_user_token(
    env: &Env,
    user_id: &str,
    tokens: &OAuthTokens,
    now: i64,
) -> Result<(), ApiError> {
    let Some(key) = sealing_key(env) else {
        return Ok(());
    };
    let access = seal(&key, &tokens.access_token)?;
    let refresh = match &tokens.refresh_token {
        Some(r) => Some(seal(&key, r)?),
        None => None,
    };
    let expires = tokens.expires_in.map(|s| now + s * 1000);
    let refresh_expires = tokens.refresh_token_expires_in.map(|s| now + s * 1000);
    env.d1("DB")
        .map_err(db_error)?
        .prepare(
            "INSERT INTO user_github_tokens (user_id, sealed_access, sealed_refresh, expires_at, refresh_expires_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(user_id) DO UPDATE SET sealed_access = excluded.sealed_access, sealed_refresh = excluded.sealed_refresh, expires_at = excluded.expires_at, refresh_expires_at = excluded.refresh_expires_at, updated_at = excluded.updated_at",
        )
        .bind(&[
            user_id.into(),
            access.into(),
            opt(refresh.as_deref()),
            expires.map_or(JsValue::NULL, num),
            refresh_expires.map_or(JsValue::NULL, num),
            num(now),
        ])
        .map_err(db_error)?
        .run()
        .await
        .map_err(db_error)?;
    Ok(())
}

#[derive(Deserialize)]
struct TokenRow {
    sealed_access: String,
    sealed_refresh: Option<String>,
    expires_at: Option<f64>,
}

/// A usable token of the person's, refreshed when it expires within a minute; `None`
/// when there is none (never signed in with GitHub, local mode, a bot's user) or it can
/// no longer be refreshed.
pub async fn user_token(env: &Env, user_id: &str, now: i64) -> Option<String> {
    let key = sealing_key(env)?;
    let row: TokenRow = env
        .d1("DB")
        .ok()?
        .prepare("SELECT sealed_access, sealed_refresh, expires_at FROM user_github_tokens WHERE user_id = ?1")
        .bind(&[user_id.into()])
        .ok()?
        .first(None)
        .await
        .ok()??;
    let fresh = row.expires_at.is_none_or(|e| e as i64 - now > 60_000);
    if fresh {
        return key.open(&row.sealed_access).ok();
    }
    let refresh = key.open(row.sealed_refresh.as_deref()?).ok()?;
    let client_id = setting(env, "GITHUB_CLIENT_ID")?;
    let client_secret = setting(env, "GITHUB_CLIENT_SECRET")?;
    let form = worker::url::form_urlencoded::Serializer::new(String::new())
        .append_pair("client_id", &client_id)
        .append_pair("client_secret", &client_secret)
        .append_pair("grant_type", "refresh_token")
        .append_pair("refresh_token", &refresh)
        .finish();
    let reply: Reply<OAuthTokens> = client::oauth_token(env, form).await.ok()?;
    // Errors come back as 200 with an `error` field: they do not read as tokens.
    let tokens = reply.body?;
    store_user_token(env, user_id, &tokens, now).await.ok()?;
    Some(tokens.access_token)
}

/// The token a pull request for `user_id` is made with: theirs, else the App's.
pub async fn token_for(
    env: &Env,
    user_id: &str,
    now: i64,
) -> Result<(String, AuthoredAs), ApiError> {
    if let Some(t) = user_token(env, user_id, now).await {
        return Ok((t, AuthoredAs::User));
    }
    let app = crate::app::installation_token(env, now).await?;
    Ok((app.password, AuthoredAs::App))
}

/// The App's installation token.
pub async fn app_token(env: &Env, now: i64) -> Result<String, ApiError> {
    Ok(crate::app::installation_token(env, now).await?.password)
}

/// A pull request as GitHub returns it (the fields used here).
#[derive(Debug, Clone, Deserialize)]
pub struct Pull {
    pub number: i64,
    pub html_url: String,
    pub state: String,
    #[serde(default)]
    pub draft: bool,
    #[serde(default)]
    pub merged: bool,
    #[serde(default)]
    pub merged_at: Option<String>,
    pub head: crate::webhook::Ref,
    pub base: crate::webhook::Ref,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub body: Option<String>,
    pub user: crate::webhook::User,
}

impl Pull {
    pub fn display_state(&self) -> &'static str {
        crate::pulls::state_of(
            &self.state,
            self.merged || self.merged_at.is_some(),
            self.draft,
        )
    }

    pub fn as_webhook_pr(&self) -> crate::webhook::PullRequest {
        crate::webhook::PullRequest {
            number: self.number,
            title: self.title.clone(),
            body: self.body.clone(),
            user: self.user.clone(),
            head: self.head.clone(),
            base: self.base.clone(),
            draft: self.draft,
            state: self.state.clone(),
            merged: self.merged,
            html_url: self.html_url.clone(),
        }
    }
}

fn unavailable(what: &str, reply_status: u16, error: Option<String>) -> ApiError {
    ApiError::new(
        ErrorCode::Unavailable,
        format!(
            "GitHub answered {reply_status} to {what}{}",
            error.map(|e| format!(": {e}")).unwrap_or_default()
        ),
    )
}

/// The repository's default branch. 403/404: the token cannot see the repository.
pub async fn default_branch(
    env: &Env,
    token: &str,
    owner: &str,
    repo: &str,
) -> Result<String, ApiError> {
    #[derive(Deserialize)]
    struct R {
        default_branch: String,
    }
    let r: Reply<R> = rest::get(env, token, &format!("/repos/{owner}/{repo}")).await?;
    match r.body {
        Some(b) => Ok(b.default_branch),
        None if matches!(r.status, 403 | 404) => Err(ApiError::bad_request(format!(
            "GitHub does not let this token see {owner}/{repo}; install the App on it"
        ))),
        None => Err(unavailable("a repository lookup", r.status, r.error)),
    }
}

pub async fn get_pull(
    env: &Env,
    token: &str,
    owner: &str,
    repo: &str,
    number: i64,
) -> Result<Option<Pull>, ApiError> {
    let r: Reply<Pull> =
        rest::get(env, token, &format!("/repos/{owner}/{repo}/pulls/{number}")).await?;
    match r.body {
        Some(p) => Ok(Some(p)),
        None if r.status == 404 => Ok(None),
        None => Err(unavailable("a pull request lookup", r.status, r.error)),
    }
}

/// The open pull request whose head is `owner:head`, if any.
pub async fn open_pull_for_head(
    env: &Env,
    token: &str,
    owner: &str,
    repo: &str,
    head: &str,
) -> Result<Option<Pull>, ApiError> {
    let head_q: String =
        worker::url::form_urlencoded::byte_serialize(format!("{owner}:{head}").as_bytes())
            .collect();
    let r: Reply<Vec<Pull>> = rest::get(
        env,
        token,
        &format!("/repos/{owner}/{repo}/pulls?head={head_q}&state=open&per_page=10"),
    )
    .await?;
    match r.body {
        Some(list) => Ok(list.into_iter().next()),
        None => Err(unavailable("a pull request search", r.status, r.error)),
    }
}

/// Creates a pull request; `Err` carries GitHub's status and message when it refuses.
#[allow(clippy::too_many_arguments)]
pub async fn create_pull(
    env: &Env,
    token: &str,
    owner: &str,
    repo: &str,
    title: &str,
    body: &str,
    head: &str,
    base: &str,
    draft: bool,
) -> Result<Result<Pull, (u16, String)>, ApiError> {
    let mut req = json!({"title": title, "body": body, "head": head, "base": base});
    if draft {
        req["draft"] = json!(true);
    }
    let r: Reply<Pull> = send_json(
        env,
        Method::Post,
        token,
        &format!("/repos/{owner}/{repo}/pulls"),
        &req,
    )
    .await?;
    Ok(match r.body {
        Some(p) => Ok(p),
        None => Err((r.status, r.error.unwrap_or_default())),
    })
}

/// Puts a label on an issue or PR, creating the label first when the repository has none
/// by that name. Best effort: the caller ignores failures.
pub async fn add_label(
    env: &Env,
    token: &str,
    owner: &str,
    repo: &str,
    number: i64,
    label: &str,
) -> Result<(), ApiError> {
    let found: Reply<Value> =
        rest::get(env, token, &crate::pulls::label_path(owner, repo, label)).await?;
    if found.status == 404 {
        let _: Reply<Value> = send_json(
            env,
            Method::Post,
            token,
            &format!("/repos/{owner}/{repo}/labels"),
            &json!({"name": label, "color": "ededed"}),
        )
        .await?;
    }
    let r: Reply<Value> = send_json(
        env,
        Method::Post,
        token,
        &format!("/repos/{owner}/{repo}/issues/{number}/labels"),
        &json!({"labels": [label]}),
    )
    .await?;
    if r.body.is_none() {
        return Err(unavailable("adding a label", r.status, r.error));
    }
    Ok(())
}

/// Posts a comment on an issue or PR's conversation.
pub async fn comment(
    env: &Env,
    token: &str,
    owner: &str,
    repo: &str,
    number: i64,
    body: &str,
) -> Result<(), ApiError> {
    let path = format!("/repos/{owner}/{repo}/issues/{number}/comments");
    post_created(env, token, &path, &json!({ "body": body }), "a comment").await
}

/// POSTs `body` to `path`; what GitHub refused, in words, as `what`.
async fn post_created(
    env: &Env,
    token: &str,
    path: &str,
    body: &Value,
    what: &str,
) -> Result<(), ApiError> {
    let r: Reply<Value> = send_json(env, Method::Post, token, path, body).await?;
    match r.body {
        Some(_) => Ok(()),
        None => Err(unavailable(what, r.status, r.error)),
    }
}

/// Answers in a review comment's thread.
pub async fn reply_to_review_comment(
    env: &Env,
    token: &str,
    owner: &str,
    repo: &str,
    number: i64,
    comment_id: i64,
    body: &str,
) -> Result<(), ApiError> {
    let path = format!("/repos/{owner}/{repo}/pulls/{number}/comments/{comment_id}/replies");
    post_created(
        env,
        token,
        &path,
        &json!({ "body": body }),
        "a review reply",
    )
    .await
}

/// Adds a reaction (`eyes`, …) at a reactions path.
pub async fn react(env: &Env, token: &str, path: &str, content: &str) -> Result<(), ApiError> {
    post_created(
        env,
        token,
        path,
        &json!({ "content": content }),
        "a reaction",
    )
    .await
}

/// A collaborator's permission on the repository (`admin`, `maintain`, `write`, `triage`,
/// `read`, `none`), or `None` when GitHub will not say.
pub async fn permission(
    env: &Env,
    token: &str,
    owner: &str,
    repo: &str,
    login: &str,
) -> Result<Option<String>, ApiError> {
    #[derive(Deserialize)]
    struct P {
        permission: String,
    }
    let r: Reply<P> = rest::get(
        env,
        token,
        &format!("/repos/{owner}/{repo}/collaborators/{login}/permission"),
    )
    .await?;
    Ok(r.body.map(|p| p.permission))
}

/// The App's bot account (`name[bot]`), as GitHub shows it.
pub fn bot_login(env: &Env) -> String {
    setting(env, "GITHUB_BOT_USERNAME").unwrap_or_else(|| "open-inspect[bot]".into())
}

/// The API base, for messages.
pub fn api(env: &Env) -> String {
    api_base(env)
}

/// A repository's settings (defaults when it has none).
pub async fn repo_settings(
    env: &Env,
    owner: &str,
    repo: &str,
) -> Result<inspect_protocol::scm::RepoSettings, ApiError> {
    #[derive(Deserialize)]
    struct Row {
        settings: String,
    }
    let row: Option<Row> = env
        .d1("DB")
        .map_err(db_error)?
        .prepare("SELECT settings FROM repo_settings WHERE owner = ?1 AND name = ?2")
        .bind(&[owner.into(), repo.into()])
        .map_err(db_error)?
        .first(None)
        .await
        .map_err(db_error)?;
    Ok(row
        .and_then(|r| serde_json::from_str(&r.settings).ok())
        .unwrap_or_default())
}

/// Where people open a session: `PUBLIC_URL`, else the origin the session was made at.
pub fn session_url(env: &Env, origin: Option<&str>, session_id: &str) -> String {
    let base = setting(env, "PUBLIC_URL")
        .or_else(|| origin.map(str::to_owned))
        .unwrap_or_default();
    format!("{}/sessions/{session_id}", base.trim_end_matches('/'))
}

/// The files of a pull request with their patches (`None`: binary, or too big for GitHub
/// to show one), as `GET /pulls/{n}/files` pages them: 100 a page, GitHub's 3,000 at most.
pub async fn pull_files(
    env: &Env,
    token: &str,
    owner: &str,
    repo: &str,
    number: i64,
) -> Result<Vec<(String, Option<String>)>, ApiError> {
    #[derive(Deserialize)]
    struct File {
        filename: String,
        #[serde(default)]
        patch: Option<String>,
    }
    let mut files = Vec::new();
    for page in 1..=30 {
        let r: Reply<Vec<File>> = rest::get(
            env,
            token,
            &format!("/repos/{owner}/{repo}/pulls/{number}/files?per_page=100&page={page}"),
        )
        .await?;
        let Some(list) = r.body else {
            return Err(unavailable(
                "listing a pull request's files",
                r.status,
                r.error,
            ));
        };
        let last = list.len() < 100;
        files.extend(list.into_iter().map(|f| (f.filename, f.patch)));
        if last {
            break;
        }
    }
    Ok(files)
}

/// A review GitHub took: its id and where people read it.
#[derive(Debug, Clone, Deserialize)]
pub struct SubmittedReview {
    pub id: i64,
    pub html_url: String,
}

/// Submits a review; `Err` carries GitHub's status and message when it refuses one (422
/// for a comment off the diff, a verdict on one's own pull request).
pub async fn submit_review(
    env: &Env,
    token: &str,
    (owner, repo, number): (&str, &str, i64),
    review: &crate::review::ReviewPlan,
) -> Result<Result<SubmittedReview, (u16, String)>, ApiError> {
    let body = serde_json::to_value(review).map_err(|e| ApiError::internal(e.to_string()))?;
    let r: Reply<SubmittedReview> = send_json(
        env,
        Method::Post,
        token,
        &format!("/repos/{owner}/{repo}/pulls/{number}/reviews"),
        &body,
    )
    .await?;
    Ok(match r.body {
        Some(s) => Ok(s),
        None => Err((r.status, r.error.unwrap_or_default())),
    })
}

/// The ids of a review's inline comments (each the top of a thread people may reply in).
pub async fn review_comment_ids(
    env: &Env,
    token: &str,
    (owner, repo, number): (&str, &str, i64),
    review_id: i64,
) -> Result<Vec<i64>, ApiError> {
    #[derive(Deserialize)]
    struct C {
        id: i64,
    }
    let r: Reply<Vec<C>> = rest::get(
        env,
        token,
        &format!("/repos/{owner}/{repo}/pulls/{number}/reviews/{review_id}/comments?per_page=100"),
    )
    .await?;
    match r.body {
        Some(list) => Ok(list.into_iter().map(|c| c.id).collect()),
        None => Err(unavailable(
            "listing a review's comments",
            r.status,
            r.error,
        )),
    }
}
