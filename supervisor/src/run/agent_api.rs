//! What the agent may ask of its sandbox beyond its own tools: a small HTTP API on
//! loopback, guarded by a key only the agent's environment holds, that forwards a pull
//! request to the session with the sandbox's own token. The agent never holds that token;
//! the key opens nothing but these routes, for this session.

use anyhow::Result;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use std::sync::Arc;

/// Where the agent finds the API and its key, and the command on its PATH.
pub const URL_VAR: &str = "OPEN_INSPECT_AGENT_URL";
pub const KEY_VAR: &str = "OPEN_INSPECT_AGENT_KEY";
pub const COMMAND: &str = "open-inspect";

struct Forward {
    key: String,
    control_plane_url: String,
    session_id: String,
    sandbox_id: String,
    token: String,
    http: reqwest::Client,
    /// Where a screenshot's browser keeps its files (writable in the sandbox).
    scratch: std::path::PathBuf,
    /// The desktop's display while it is open.
    desktop: super::desktop::Display,
}

pub struct AgentApi {
    pub url: String,
    pub key: String,
}

/// Starts the API on a loopback port; it lives as long as the supervisor.
pub async fn start(
    control_plane_url: &str,
    session_id: &str,
    sandbox_id: &str,
    token: &str,
    scratch: &std::path::Path,
    desktop: super::desktop::Display,
) -> Result<AgentApi> {
    let mut key = [0u8; 24];
    getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("randomness: {e}"))?;
    let key = hex::encode(key);
    let forward = Arc::new(Forward {
        key: key.clone(),
        control_plane_url: control_plane_url.trim_end_matches('/').to_owned(),
        session_id: session_id.to_owned(),
        sandbox_id: sandbox_id.to_owned(),
        token: token.to_owned(),
        // Opening a PR waits for a push and GitHub.
        http: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(180))
            .build()?,
        scratch: scratch.to_owned(),
        desktop,
    });
    let app = Router::new()
        .route("/pull-requests", post(pull_requests))
        .route("/reviews", post(reviews))
        .route("/screenshot", post(screenshot))
        .route(
            "/media",
            post(picture).layer(axum::extract::DefaultBodyLimit::max(
                inspect_protocol::media::MAX_MEDIA_BYTES,
            )),
        )
        .route("/desktop", axum::routing::get(desktop_display))
        .route("/children", post(spawn_child))
        .route("/children/{id}", axum::routing::get(child_status))
        .route("/children/{id}/{op}", post(child_op))
        .with_state(forward);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(AgentApi { url, key })
}

fn authorized(headers: &HeaderMap, key: &str) -> bool {
    use subtle::ConstantTimeEq;
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    given.len() == key.len() && bool::from(given.as_bytes().ct_eq(key.as_bytes()))
}

async fn pull_requests(State(f): State<Arc<Forward>>, headers: HeaderMap, body: Bytes) -> Response {
    tracing::info!("the agent asks for a pull request");
    relay(&f, &headers, reqwest::Method::POST, "pull-requests", body).await
}

async fn reviews(State(f): State<Arc<Forward>>, headers: HeaderMap, body: Bytes) -> Response {
    tracing::info!("the agent submits a review");
    relay(&f, &headers, reqwest::Method::POST, "reviews", body).await
}

/// Takes the picture here (the browser is the sandbox's) and sends it to the session with
/// the sandbox's own credentials; the session's answer (the artifact) goes back.
async fn screenshot(State(f): State<Arc<Forward>>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(&headers, &f.key) {
        return (StatusCode::UNAUTHORIZED, "bad agent key").into_response();
    }
    let req: inspect_protocol::media::ScreenshotRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return refused(StatusCode::BAD_REQUEST, format!("malformed request: {e}")),
    };
    tracing::info!(url = %req.url, seconds = ?req.seconds, "the agent takes a picture");
    let _ = std::fs::create_dir_all(&f.scratch);
    let (taken, mime) = match req.seconds {
        Some(_) => (
            super::recording::record(&req, &f.scratch).await,
            "image/gif",
        ),
        None => (super::screenshot::take(&req, &f.scratch).await, "image/png"),
    };
    let png = match taken {
        Ok(bytes) => bytes,
        Err(e) => return refused(StatusCode::UNPROCESSABLE_ENTITY, format!("{e:#}")),
    };
    let caption = req.caption.clone().unwrap_or_else(|| req.url.clone());
    forward_picture(&f, png, mime, &caption).await
}

/// What a picture the agent took itself (its browser's screenshot) is: the query's
/// `caption`, the body's type.
#[derive(serde::Deserialize)]
struct PictureQuery {
    caption: Option<String>,
}

/// A picture taken in the sandbox (the agent's browser), sent on to the session.
async fn picture(
    State(f): State<Arc<Forward>>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<PictureQuery>,
    body: Bytes,
) -> Response {
    if !authorized(&headers, &f.key) {
        return (StatusCode::UNAUTHORIZED, "bad agent key").into_response();
    }
    let mime = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let caption = q.caption.unwrap_or_default();
    if let Err(why) = inspect_protocol::media::check(&mime, &caption, body.len()) {
        return refused(StatusCode::BAD_REQUEST, why);
    }
    forward_picture(&f, body.to_vec(), &mime, &caption).await
}

fn refused(status: StatusCode, message: String) -> Response {
    let body = serde_json::json!({"error": {"code": "bad_request", "message": message}});
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Sends a picture to the session with the sandbox's own credentials; the session's answer
/// (the artifact) goes back.
async fn forward_picture(f: &Forward, bytes: Vec<u8>, mime: &str, caption: &str) -> Response {
    let mut url = match reqwest::Url::parse(&format!(
        "{}/sessions/{}/media",
        f.control_plane_url, f.session_id
    )) {
        Ok(u) => u,
        Err(e) => {
            return refused(
                StatusCode::BAD_GATEWAY,
                format!("bad control plane URL: {e}"),
            )
        }
    };
    url.query_pairs_mut()
        .append_pair("type", mime)
        .append_pair("caption", caption);
    let sent = f
        .http
        .post(url)
        .bearer_auth(&f.token)
        .header(inspect_protocol::auth::SANDBOX_ID_HEADER, &f.sandbox_id)
        .header("content-type", mime)
        .body(bytes)
        .send()
        .await;
    match sent {
        Ok(resp) => {
            let status =
                StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let text = resp.text().await.unwrap_or_default();
            (status, [("content-type", "application/json")], text).into_response()
        }
        Err(e) => refused(
            StatusCode::BAD_GATEWAY,
            format!("the control plane could not be reached: {e}"),
        ),
    }
}

/// `GET /desktop`: the display the desktop is on while it is open (`{"display": ":90"}`),
/// else `{"display": null}`; the agent's browser runs there when there is one.
async fn desktop_display(State(f): State<Arc<Forward>>, headers: HeaderMap) -> Response {
    if !authorized(&headers, &f.key) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let display = f
        .desktop
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    axum::Json(serde_json::json!({ "display": display })).into_response()
}

async fn spawn_child(State(f): State<Arc<Forward>>, headers: HeaderMap, body: Bytes) -> Response {
    tracing::info!("the agent spawns a child session");
    relay(&f, &headers, reqwest::Method::POST, "children", body).await
}

async fn child_status(
    State(f): State<Arc<Forward>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    relay(
        &f,
        &headers,
        reqwest::Method::GET,
        &format!("children/{id}"),
        Bytes::new(),
    )
    .await
}

async fn child_op(
    State(f): State<Arc<Forward>>,
    axum::extract::Path((id, op)): axum::extract::Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if op != "prompt" && op != "cancel" {
        return (StatusCode::NOT_FOUND, "no such child operation").into_response();
    }
    relay(
        &f,
        &headers,
        reqwest::Method::POST,
        &format!("children/{id}/{op}"),
        body,
    )
    .await
}

/// Checks the agent's key, then sends the request on to the session's route `path` with
/// the sandbox's own credentials, and hands the answer back as it came.
async fn relay(
    f: &Forward,
    headers: &HeaderMap,
    method: reqwest::Method,
    path: &str,
    body: Bytes,
) -> Response {
    if !authorized(headers, &f.key) {
        return (StatusCode::UNAUTHORIZED, "bad agent key").into_response();
    }
    let url = format!("{}/sessions/{}/{path}", f.control_plane_url, f.session_id);
    let mut req = f
        .http
        .request(method, &url)
        .bearer_auth(&f.token)
        .header(inspect_protocol::auth::SANDBOX_ID_HEADER, &f.sandbox_id);
    if !body.is_empty() {
        req = req.header("content-type", "application/json").body(body);
    }
    match req.send().await {
        Ok(resp) => {
            let status =
                StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let text = resp.text().await.unwrap_or_default();
            (status, [("content-type", "application/json")], text).into_response()
        }
        Err(e) => (
            StatusCode::BAD_GATEWAY,
            format!("the control plane could not be reached: {e}"),
        )
            .into_response(),
    }
}

/// Writes the `open-inspect` command into `bin` (put first on the agent's PATH) and the
/// instructions that tell the agent about it; returns the instructions' path.
pub fn install_command(bin: &std::path::Path, instructions: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin)?;
    let exe = std::env::current_exe()?;
    let script = bin.join(COMMAND);
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec '{}' agent-tool \"$@\"\n",
            exe.display().to_string().replace('\'', "'\\''")
        ),
    )?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    if let Some(dir) = instructions.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(instructions, INSTRUCTIONS)?;
    Ok(())
}

const INSTRUCTIONS: &str = "# Working in an Open-Inspect sandbox

You work on your own in a sandbox; the people who asked will read the result later.

- Your changes are committed for you when a prompt ends (with the prompter as author) and
  pushed to the session's branch. You may also commit yourself.
- To open a pull request (or update the one this session already has), run:

      open-inspect pr --title \"Short title\" --body \"What changed and why\"

  Options: `--base BRANCH`, `--head BRANCH`, `--repo OWNER/NAME` (in a session with
  several repositories), `--draft`, `--body-file FILE`. It pushes your work first and
  prints the pull request's URL. Open one when the work is ready for review or when asked.
- When a prompt asks you to review a pull request, submit your review (once) with
  `open-inspect review --event comment|approve|request-changes --body-file FILE
  [--comment 'PATH:LINE=TEXT']…` (`PATH:LINE:left=TEXT` for a removed line;
  `--comments-file FILE` takes a JSON list of `{path, line, side, body}`). Comments on
  lines outside the diff are moved into the review's body. It prints the review's URL.
- To see a page the way a person would (the app you started, after a change), run
  `open-inspect screenshot URL [--caption TEXT] [--width W --height H] [--timeout S]`:
  the sandbox's browser photographs it and the picture is shown to the session's people.
  To show something that moves (an animation, a flow after a click), record it instead:
  `open-inspect record URL --seconds N` (1 to 15; the same options): an animated GIF.
- To use the app like a person would (open it, fill a form, click, read the result), use
  the browser tools (`browser_open`, `browser_type`, `browser_click`, `browser_press`,
  `browser_wait_for`, `browser_read`, `browser_screenshot`): one page kept between calls;
  `browser_read` gives the page's accessibility tree and its console errors.
- To hand a part of the work to a child session (its own sandbox and agent), run
  `open-inspect child spawn --prompt \"…\" [--title T] [--repo OWNER/NAME] [--branch B]`
  (prints the child's id), then `open-inspect child wait ID…` (waits until they finish and
  prints each one's outcome and last words), `open-inspect child status ID`,
  `open-inspect child prompt ID --prompt \"…\"`, `open-inspect child cancel ID`. At most 5
  run at once and 15 in all.
";
