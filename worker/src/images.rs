//! Prebuilt images from the Worker's side: builds started by hand (`POST /images/builds`)
//! or by the cron trigger on a scope's schedule, the provider's single-use report
//! (`POST /images/builds/:id/complete`), stuck builds timed out, and old images deleted
//! once a newer one is ready (keep N). The choice of image for a new session is the
//! SessionDO's.

use crate::auth::tokens;
use crate::db::{self, num};
use inspect_durable::images::{builds, scope_of, BuildRow, BUILD_COLUMNS};
use inspect_protocol::images::{
    due, past_keep, BuildImageRequest, BuildReport, BuildStatus, ImageBuild, ImageList,
    ImageRequest, ImageSchedule, ImageScope, DEFAULT_BUILD_TIMEOUT_SECONDS, OUTPUT_LIMIT,
};
use inspect_protocol::provider::WorkspaceRepository;
use inspect_protocol::providers::ProviderCall;
use inspect_protocol::session::RepositoryRef;
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::log::{emit, LogLine};
use serde::Deserialize;
use worker::Env;

/// Builds shown per scope.
const LISTED: u32 = 20;

/// One call to the sandbox provider (through the providers Worker); a refusal is 503.
async fn ask_provider<T: serde::de::DeserializeOwned>(
    env: &Env,
    call: ProviderCall,
) -> Result<T, ApiError> {
    inspect_runtime::binding::ask_providers(env, &call)
        .await
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e.to_string()))
}

fn build_timeout_seconds(env: &Env) -> u64 {
    db::setting(env, "IMAGE_BUILD_TIMEOUT_SECONDS")
        .and_then(|v| v.parse().ok())
        .filter(|s| *s > 0)
        .unwrap_or(DEFAULT_BUILD_TIMEOUT_SECONDS)
}

/// How long the provider gives a build: a little less than the control plane waits, so
/// its report of a build it gave up on still arrives in time.
fn provider_limit(control_plane_limit: u64) -> u64 {
    (control_plane_limit - (control_plane_limit / 5).min(60)).max(1)
}

/// The scope a query names: `repository=owner/name` or `environmentId=…`.
pub fn scope_from_query(pairs: &[(String, String)]) -> Result<ImageScope, ApiError> {
    let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    match (get("repository"), get("environmentId")) {
        (Some(r), None) => match r.split_once('/') {
            Some((owner, name)) if !owner.is_empty() && !name.is_empty() => {
                Ok(ImageScope::Repository {
                    owner: owner.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(ApiError::bad_request("repository is owner/name")),
        },
        (None, Some(id)) if !id.is_empty() => Ok(ImageScope::Environment {
            environment_id: id.clone(),
        }),
        _ => Err(ApiError::bad_request(
            "name one scope: ?repository=owner/name or ?environmentId=…",
        )),
    }
}

/// The repositories a scope's image holds, with their clone sources; and the
/// environment, when it is one (whose secrets flow in instead of the repositories').
async fn workspace(
    env: &Env,
    scope: &ImageScope,
) -> Result<(Vec<WorkspaceRepository>, Option<String>), ApiError> {
    let (mut refs, environment) = match scope {
        ImageScope::Repository { owner, name } => (
            vec![RepositoryRef {
                owner: owner.clone(),
                name: name.clone(),
                branch: None,
                source: None,
            }],
            None,
        ),
        ImageScope::Environment { environment_id } => (
            crate::settings::get_environment(env, environment_id)
                .await?
                .repositories,
            Some(environment_id.clone()),
        ),
    };
    crate::repos::resolve(env, &mut refs).await?;
    let repositories = refs
        .into_iter()
        .map(|r| WorkspaceRepository {
            source: r.source.unwrap_or_default(),
            owner: r.owner,
            name: r.name,
            base_branch: r.branch,
        })
        .collect();
    Ok((repositories, environment))
}

#[derive(Deserialize)]
struct ScheduleRow {
    scope_kind: String,
    scope_key: String,
    interval_minutes: Option<f64>,
    keep: f64,
    origin: Option<String>,
}

impl ScheduleRow {
    fn schedule(&self) -> ImageSchedule {
        ImageSchedule {
            interval_minutes: self.interval_minutes.map(|m| m as u32),
            keep: self.keep as u32,
        }
    }
}

async fn schedule_row(env: &Env, scope: &ImageScope) -> Result<Option<ScheduleRow>, ApiError> {
    let (kind, key) = scope.key();
    db::first(
        env,
        "SELECT scope_kind, scope_key, interval_minutes, keep, origin FROM image_schedules WHERE scope_kind = ?1 AND scope_key = ?2",
        &[kind.into(), key.into()],
    )
    .await
}

/// `GET /images?…`: a scope's builds, newest first, and its schedule.
pub async fn list(env: &Env, scope: ImageScope) -> Result<ImageList, ApiError> {
    let builds = builds(env, &scope, None, LISTED).await?;
    let schedule = schedule_row(env, &scope)
        .await?
        .map(|r| r.schedule())
        .unwrap_or_default();
    Ok(ImageList {
        scope,
        builds,
        schedule,
    })
}

/// `PUT /images/schedule`.
pub async fn set_schedule(
    env: &Env,
    body: &[u8],
    origin: &str,
    now: i64,
) -> Result<ImageList, ApiError> {
    let req: ImageRequest = crate::http::body_as(body)?;
    let schedule = req
        .schedule
        .ok_or_else(|| ApiError::bad_request("the body needs a schedule"))?;
    schedule.validate().map_err(ApiError::bad_request)?;
    // The scope must be one a build could be made for.
    workspace(env, &req.scope).await?;
    let (kind, key) = req.scope.key();
    db::run(
        env,
        "INSERT INTO image_schedules (scope_kind, scope_key, interval_minutes, keep, origin, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (scope_kind, scope_key) DO UPDATE SET interval_minutes = ?3, keep = ?4, origin = ?5, updated_at = ?6",
        &[
            kind.into(),
            key.into(),
            schedule
                .interval_minutes
                .map_or(wasm_bindgen::JsValue::NULL, |m| num(m as i64)),
            num(schedule.keep as i64),
            origin.into(),
            num(now),
        ],
    )
    .await?;
    list(env, req.scope).await
}

/// `POST /images/builds`: a build now.
pub async fn start_by_hand(
    env: &Env,
    body: &[u8],
    origin: &str,
    now: i64,
) -> Result<ImageBuild, ApiError> {
    let req: ImageRequest = crate::http::body_as(body)?;
    start(env, &req.scope, "manual", origin, now).await
}

/// Starts a build of `scope`'s image: a row in D1 with the hash of a single-use report
/// token, then the provider's `build_image`. At most one build per scope runs at a time.
async fn start(
    env: &Env,
    scope: &ImageScope,
    trigger: &str,
    origin: &str,
    now: i64,
) -> Result<ImageBuild, ApiError> {
    let (repositories, environment) = workspace(env, scope).await?;
    if repositories.iter().any(|r| r.source.is_empty()) {
        return Err(ApiError::bad_request("a repository has no clone source"));
    }
    let (kind, key) = scope.key();
    let id = format!("bld_{}", hex::encode(db::random::<8>()?));
    let token = hex::encode(db::random::<32>()?);
    // One running build per scope: the insert happens only when none is building.
    let inserted = db::run(
        env,
        "INSERT INTO image_builds (id, scope_kind, scope_key, status, trigger, callback_hash, started_at)
         SELECT ?1, ?2, ?3, 'building', ?4, ?5, ?6
         WHERE NOT EXISTS (SELECT 1 FROM image_builds WHERE scope_kind = ?2 AND scope_key = ?3 AND status = 'building')",
        &[
            id.as_str().into(),
            kind.into(),
            key.as_str().into(),
            trigger.into(),
            tokens::hash(&token).into(),
            num(now),
        ],
    )
    .await?;
    if inserted == 0 {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            "an image build for this is already running",
        ));
    }
    let pairs: Vec<(String, String)> = repositories
        .iter()
        .map(|r| (r.owner.clone(), r.name.clone()))
        .collect();
    let prepared = async {
        // A build runs the hooks alone: the set-up-only secrets are theirs too.
        let layered =
            inspect_durable::sealed::open_secrets(env, environment.as_deref(), &pairs).await?;
        let mut secrets = layered.env;
        secrets.extend(layered.setup);
        let needs_github = repositories
            .iter()
            .any(|r| r.source.starts_with("https://"));
        let git_token = if needs_github && db::setting(env, "GITHUB_APP_ID").is_some() {
            Some(
                inspect_github::app::installation_token(env, now)
                    .await?
                    .password,
            )
        } else {
            None
        };
        Ok::<_, ApiError>(BuildImageRequest {
            build_id: id.clone(),
            repositories,
            env: secrets,
            callback_url: format!(
                "{}/images/builds/{id}/complete",
                db::setting(env, "PUBLIC_URL")
                    .as_deref()
                    .unwrap_or(origin)
                    .trim_end_matches('/')
            ),
            callback_token: token,
            git_token,
            timeout_seconds: provider_limit(build_timeout_seconds(env)),
        })
    }
    .await;
    let started = match prepared {
        Ok(req) => {
            let request = Box::new(req);
            ask_provider::<inspect_protocol::images::BuildStarted>(
                env,
                ProviderCall::BuildImage { request },
            )
            .await
        }
        Err(e) => Err(e),
    };
    if let Err(e) = started {
        db::run(
            env,
            "UPDATE image_builds SET status = 'failed', error = ?2, finished_at = ?3, callback_hash = NULL WHERE id = ?1",
            &[id.as_str().into(), e.message.as_str().into(), num(now)],
        )
        .await?;
        emit(
            LogLine::error("images", "build_not_started")
                .with("build", id.as_str())
                .detail(&e.message),
        );
        return Err(e);
    }
    emit(
        LogLine::info("images", "build_started")
            .with("build", id.as_str())
            .with("scope", key.as_str())
            .with("trigger", trigger),
    );
    get(env, &id)
        .await?
        .ok_or_else(|| ApiError::internal("the build vanished"))
}

async fn get(env: &Env, id: &str) -> Result<Option<ImageBuild>, ApiError> {
    let row: Option<BuildRow> = db::first(
        env,
        &format!("SELECT {BUILD_COLUMNS} FROM image_builds WHERE id = ?1"),
        &[id.into()],
    )
    .await?;
    Ok(row.map(Into::into))
}

/// `POST /images/builds/:id/complete`: the provider's report, accepted once, with the
/// token the build was given.
pub async fn complete(
    env: &Env,
    id: &str,
    bearer: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<ImageBuild, ApiError> {
    #[derive(Deserialize)]
    struct Pending {
        status: String,
        callback_hash: Option<String>,
        scope_kind: String,
        scope_key: String,
    }
    let pending: Option<Pending> = db::first(
        env,
        "SELECT status, callback_hash, scope_kind, scope_key FROM image_builds WHERE id = ?1",
        &[id.into()],
    )
    .await?;
    let pending = pending.ok_or_else(|| ApiError::not_found(format!("no build {id}")))?;
    let token = bearer.ok_or_else(|| ApiError::unauthorized("the report needs its token"))?;
    let Some(expected) = pending.callback_hash.as_deref() else {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("build {id} is {} and takes no report", pending.status),
        ));
    };
    let hash = tokens::hash(token);
    if !tokens::same(&hash, expected) {
        return Err(ApiError::unauthorized("not this build's token"));
    }
    let report: BuildReport = inspect_protocol::json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("malformed build report: {e}")))?;
    let success = report.success && report.image_id.is_some();
    let error = match (&report.error, success) {
        (_, true) => None,
        (Some(e), false) => Some(e.clone()),
        (None, false) => Some("the build reported no image".to_owned()),
    };
    let output = report.output.as_deref().map(|o| {
        let mut start = o.len().saturating_sub(OUTPUT_LIMIT);
        while !o.is_char_boundary(start) {
            start += 1;
        }
        &o[start..]
    });
    let repositories = serde_json::to_string(&report.repositories)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    // The token's hash is cleared in the same statement that takes the report: once.
    let changed = db::run(
        env,
        "UPDATE image_builds SET status = ?3, image_id = ?4, runtime_version = ?5, repositories = ?6, error = ?7, output = ?8, bytes = ?9, finished_at = ?10, callback_hash = NULL
         WHERE id = ?1 AND callback_hash = ?2 AND status = 'building'",
        &[
            id.into(),
            expected.into(),
            if success { "ready" } else { "failed" }.into(),
            db::opt(report.image_id.as_deref().filter(|_| success)),
            report.runtime_version.as_str().into(),
            repositories.into(),
            db::opt(error.as_deref()),
            db::opt(output),
            report
                .bytes
                .map_or(wasm_bindgen::JsValue::NULL, |b| num(b as i64)),
            num(now),
        ],
    )
    .await?;
    if changed == 0 {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("build {id} already took its report"),
        ));
    }
    emit(
        LogLine::info(
            "images",
            if success {
                "build_ready"
            } else {
                "build_failed"
            },
        )
        .with("build", id)
        .with("ms", report.duration_ms)
        .detail(error.as_deref().unwrap_or("")),
    );
    if success {
        let scope = scope_of(&pending.scope_kind, &pending.scope_key);
        if let Err(e) = prune(env, &scope).await {
            emit(LogLine::warn("images", "prune_failed").detail(e.message));
        }
    }
    get(env, id)
        .await?
        .ok_or_else(|| ApiError::internal("the build vanished"))
}

/// Deletes the scope's ready images past its `keep`, oldest first.
async fn prune(env: &Env, scope: &ImageScope) -> Result<(), ApiError> {
    let keep = schedule_row(env, scope)
        .await?
        .map(|r| r.schedule().keep)
        .unwrap_or(inspect_protocol::images::DEFAULT_KEEP);
    let ready = builds(env, scope, Some(BuildStatus::Ready), 100).await?;
    for old in past_keep(&ready, keep) {
        if let Some(image) = &old.image_id {
            let image_id = image.clone();
            ask_provider::<()>(env, ProviderCall::DeleteImage { image_id }).await?;
        }
        db::run(
            env,
            "UPDATE image_builds SET status = 'deleted' WHERE id = ?1",
            &[old.id.as_str().into()],
        )
        .await?;
        emit(
            LogLine::info("images", "image_deleted")
                .with("build", old.id.as_str())
                .with("image", old.image_id.clone()),
        );
    }
    Ok(())
}

/// The cron trigger's part: builds running past their time fail, and each scope whose
/// schedule is due gets a new build. Returns how many builds were started.
pub async fn tick(env: &Env, now: i64) -> Result<usize, ApiError> {
    let limit_ms = build_timeout_seconds(env) as i64 * 1000;
    let timed_out = db::run(
        env,
        "UPDATE image_builds SET status = 'failed', error = ?1, finished_at = ?2, callback_hash = NULL WHERE status = 'building' AND started_at <= ?3",
        &[
            format!(
                "the build ran past {} s without reporting",
                limit_ms / 1000
            )
            .into(),
            num(now),
            num(now - limit_ms),
        ],
    )
    .await?;
    if timed_out > 0 {
        emit(LogLine::warn("images", "builds_timed_out").with("builds", timed_out));
    }
    let schedules: Vec<ScheduleRow> = db::all(
        env,
        "SELECT scope_kind, scope_key, interval_minutes, keep, origin FROM image_schedules WHERE interval_minutes IS NOT NULL",
        &[],
    )
    .await?;
    let public = db::setting(env, "PUBLIC_URL");
    let mut started = 0;
    for row in schedules {
        let scope = scope_of(&row.scope_kind, &row.scope_key);
        let newest = builds(env, &scope, None, 1).await?;
        let newest_started = newest.first().map(|b| b.started_at);
        let building = newest
            .first()
            .is_some_and(|b| b.status == BuildStatus::Building);
        if !due(&row.schedule(), newest_started, building, now) {
            continue;
        }
        let Some(origin) = public.clone().or(row.origin.clone()) else {
            emit(
                LogLine::warn("images", "schedule_without_origin")
                    .with("scope", row.scope_key.as_str()),
            );
            continue;
        };
        match start(env, &scope, "schedule", &origin, now).await {
            Ok(_) => started += 1,
            Err(e) => emit(
                LogLine::warn("images", "scheduled_build_not_started")
                    .with("scope", row.scope_key.as_str())
                    .detail(e.message),
            ),
        }
    }
    Ok(started)
}
