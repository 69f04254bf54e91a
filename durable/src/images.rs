//! Prebuilt images as D1 keeps them (`image_builds`), read by the Worker (settings, the
//! API, the cron trigger) and by a SessionDO choosing what its first sandbox starts from.

use inspect_protocol::images::{BuildStatus, ImageBuild, ImageRepository, ImageScope};
use inspect_protocol::ApiError;
use serde::Deserialize;
use worker::Env;

pub const BUILD_COLUMNS: &str = "id, scope_kind, scope_key, status, trigger, image_id, runtime_version, repositories, error, output, bytes, started_at, finished_at";

/// One `image_builds` row (D1 gives numbers as doubles).
#[derive(Deserialize)]
pub struct BuildRow {
    pub id: String,
    pub scope_kind: String,
    pub scope_key: String,
    pub status: String,
    pub trigger: String,
    pub image_id: Option<String>,
    pub runtime_version: Option<String>,
    pub repositories: Option<String>,
    pub error: Option<String>,
    pub output: Option<String>,
    pub bytes: Option<f64>,
    pub started_at: f64,
    pub finished_at: Option<f64>,
}

/// The scope a stored key names.
pub fn scope_of(kind: &str, key: &str) -> ImageScope {
    match (kind, key.split_once('/')) {
        ("repository", Some((owner, name))) => ImageScope::Repository {
            owner: owner.to_owned(),
            name: name.to_owned(),
        },
        _ => ImageScope::Environment {
            environment_id: key.to_owned(),
        },
    }
}

impl From<BuildRow> for ImageBuild {
    fn from(r: BuildRow) -> Self {
        ImageBuild {
            scope: scope_of(&r.scope_kind, &r.scope_key),
            id: r.id,
            status: BuildStatus::parse(&r.status).unwrap_or(BuildStatus::Failed),
            trigger: r.trigger,
            started_at: r.started_at as i64,
            finished_at: r.finished_at.map(|t| t as i64),
            image_id: r.image_id,
            runtime_version: r.runtime_version,
            repositories: r
                .repositories
                .as_deref()
                .and_then(|j| serde_json::from_str::<Vec<ImageRepository>>(j).ok())
                .unwrap_or_default(),
            error: r.error,
            output: r.output,
            bytes: r.bytes.map(|b| b as u64),
        }
    }
}

/// A scope's builds in `status` (any when `None`), newest first, at most `limit`.
pub async fn builds(
    env: &Env,
    scope: &ImageScope,
    status: Option<BuildStatus>,
    limit: u32,
) -> Result<Vec<ImageBuild>, ApiError> {
    let (sql, args) = builds_query(scope, status, limit);
    let rows: Vec<BuildRow> = inspect_runtime::d1::all(env, &sql, &args).await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// [`builds`]' statement, for a batch (its rows are [`BuildRow`]s).
pub fn builds_query(
    scope: &ImageScope,
    status: Option<BuildStatus>,
    limit: u32,
) -> (String, Vec<wasm_bindgen::JsValue>) {
    let (kind, key) = scope.key();
    (
        format!(
            "SELECT {BUILD_COLUMNS} FROM image_builds WHERE scope_kind = ?1 AND scope_key = ?2 AND (?3 IS NULL OR status = ?3) ORDER BY started_at DESC LIMIT ?4"
        ),
        vec![
            kind.into(),
            key.into(),
            status.map_or(wasm_bindgen::JsValue::NULL, |s| s.as_str().into()),
            (limit as f64).into(),
        ],
    )
}
