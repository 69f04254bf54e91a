//! Prebuilt images: a repository's or an environment's workspace cloned and set up ahead
//! of time, so a session without a snapshot of its own starts from it and only syncs newer
//! commits. Built by the provider on request (by hand or on a schedule), reported back to
//! the control plane with a single-use token.

use crate::provider::WorkspaceRepository;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A build older than this many seconds without a report is failed as stuck (unless the
/// Worker's `IMAGE_BUILD_TIMEOUT_SECONDS` says otherwise).
pub const DEFAULT_BUILD_TIMEOUT_SECONDS: u64 = 30 * 60;
/// Ready images kept per scope unless its schedule says otherwise; older ones are deleted
/// after a newer one succeeds.
pub const DEFAULT_KEEP: u32 = 2;
pub const MAX_KEEP: u32 = 10;
/// The shortest schedule: the cron trigger runs every 30 minutes.
pub const MIN_INTERVAL_MINUTES: u32 = 30;
/// What is kept of a failed build's hook output.
pub const OUTPUT_LIMIT: usize = 8 * 1024;

/// What an image is built for: one repository (sessions on it alone) or an environment
/// (sessions made from it with the same repositories).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageScope {
    Repository {
        owner: String,
        name: String,
    },
    Environment {
        #[serde(rename = "environmentId")]
        environment_id: String,
    },
}

impl ImageScope {
    /// The scope as stored: (`repository`, `owner/name` lower-cased) or
    /// (`environment`, id).
    pub fn key(&self) -> (&'static str, String) {
        match self {
            ImageScope::Repository { owner, name } => {
                ("repository", format!("{owner}/{name}").to_ascii_lowercase())
            }
            ImageScope::Environment { environment_id } => ("environment", environment_id.clone()),
        }
    }
}

/// A build's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum BuildStatus {
    Building,
    Ready,
    Failed,
    /// A newer image replaced it and the provider deleted it.
    Deleted,
}

impl BuildStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BuildStatus::Building => "building",
            BuildStatus::Ready => "ready",
            BuildStatus::Failed => "failed",
            BuildStatus::Deleted => "deleted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "building" => BuildStatus::Building,
            "ready" => BuildStatus::Ready,
            "failed" => BuildStatus::Failed,
            "deleted" => BuildStatus::Deleted,
            _ => return None,
        })
    }
}

/// One repository in an image: the commit it was built at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ImageRepository {
    pub owner: String,
    pub name: String,
    pub commit: String,
}

/// An image build as the settings page and the API show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ImageBuild {
    pub id: String,
    pub scope: ImageScope,
    pub status: BuildStatus,
    /// `manual` or `schedule`.
    pub trigger: String,
    pub started_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
    /// The provider's image (on the local provider, a snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_version: Option<String>,
    #[serde(default)]
    pub repositories: Vec<ImageRepository>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The setup hook's output (its tail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
}

/// When a scope's image is rebuilt by the cron trigger, and how many are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageSchedule {
    /// Rebuild when the newest build is this old; `None`: by hand only.
    #[serde(default)]
    pub interval_minutes: Option<u32>,
    #[serde(default = "default_keep")]
    pub keep: u32,
}

fn default_keep() -> u32 {
    DEFAULT_KEEP
}

impl Default for ImageSchedule {
    fn default() -> Self {
        ImageSchedule {
            interval_minutes: None,
            keep: DEFAULT_KEEP,
        }
    }
}

impl ImageSchedule {
    pub fn validate(&self) -> Result<(), String> {
        if let Some(m) = self.interval_minutes {
            if m < MIN_INTERVAL_MINUTES {
                return Err(format!(
                    "a schedule's interval is at least {MIN_INTERVAL_MINUTES} minutes"
                ));
            }
        }
        if self.keep == 0 || self.keep > MAX_KEEP {
            return Err(format!("keep 1-{MAX_KEEP} images"));
        }
        Ok(())
    }
}

/// `GET /images?repository=owner/name` or `?environmentId=`: a scope's builds (newest
/// first) and schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ImageList {
    pub scope: ImageScope,
    pub builds: Vec<ImageBuild>,
    pub schedule: ImageSchedule,
}

/// `POST /images/builds` (start one now) and `PUT /images/schedule`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ImageRequest {
    pub scope: ImageScope,
    /// With `PUT /images/schedule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ImageSchedule>,
}

/// What the control plane asks a provider to build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct BuildImageRequest {
    pub build_id: String,
    pub repositories: Vec<WorkspaceRepository>,
    /// Secrets the setup hook may use. Never logged.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Where the report goes: `POST <url>` with `Authorization: Bearer <callbackToken>`.
    pub callback_url: String,
    /// Single use. Never logged.
    pub callback_token: String,
    /// A token git may use for the repositories' remotes (GitHub), when they need one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_token: Option<String>,
    /// The build is given up after this long.
    pub timeout_seconds: u64,
}

/// The provider's answer: the build runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct BuildStarted {
    pub build_id: String,
}

/// `POST /images/builds/:id/complete`: how the build ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct BuildReport {
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    pub runtime_version: String,
    #[serde(default)]
    pub repositories: Vec<ImageRepository>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    pub duration_ms: u64,
}

/// Which of a scope's ready images (newest first) a new session may start from: the first
/// made by `runtime` for exactly `repositories` (owner/name, in order). The others skipped
/// are said in words.
pub fn choose_image<'a>(
    ready: &'a [ImageBuild],
    runtime: &str,
    repositories: &[(String, String)],
) -> (Option<&'a ImageBuild>, Vec<String>) {
    let mut warnings = Vec::new();
    for build in ready {
        let Some(image) = &build.image_id else {
            continue;
        };
        let built_for: Vec<(String, String)> = build
            .repositories
            .iter()
            .map(|r| (r.owner.to_ascii_lowercase(), r.name.to_ascii_lowercase()))
            .collect();
        let wanted: Vec<(String, String)> = repositories
            .iter()
            .map(|(o, n)| (o.to_ascii_lowercase(), n.to_ascii_lowercase()))
            .collect();
        if build.runtime_version.as_deref() != Some(runtime) {
            warnings.push(format!(
                "prebuilt image {image} was made by runtime {} and this is {runtime}: ignored",
                build.runtime_version.as_deref().unwrap_or("unknown")
            ));
            continue;
        }
        if built_for != wanted {
            warnings.push(format!(
                "prebuilt image {image} holds other repositories than this session: ignored"
            ));
            continue;
        }
        return (Some(build), warnings);
    }
    (None, warnings)
}

/// Which ready images to delete once a new one succeeded: all but the newest `keep`
/// (`ready` newest first).
pub fn past_keep(ready: &[ImageBuild], keep: u32) -> Vec<&ImageBuild> {
    ready.iter().skip(keep.max(1) as usize).collect()
}

/// Whether a schedule wants a new build now: none running and the newest started at
/// least the interval ago (or none yet).
pub fn due(
    schedule: &ImageSchedule,
    newest_started: Option<i64>,
    building: bool,
    now: i64,
) -> bool {
    let Some(minutes) = schedule.interval_minutes else {
        return false;
    };
    if building {
        return false;
    }
    match newest_started {
        None => true,
        // A minute of slack: the cron fires every 30 minutes, give or take.
        Some(t) => now - t >= (minutes as i64 * 60 - 60) * 1000,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn build(id: &str, runtime: &str, repos: &[(&str, &str)]) -> ImageBuild {
        ImageBuild {
            id: id.into(),
            scope: ImageScope::Repository {
                owner: "o".into(),
                name: "r".into(),
            },
            status: BuildStatus::Ready,
            trigger: "manual".into(),
            started_at: 0,
            finished_at: Some(1),
            image_id: Some(format!("img_{id}")),
            runtime_version: Some(runtime.into()),
            repositories: repos
                .iter()
                .map(|(o, n)| ImageRepository {
                    owner: (*o).into(),
                    name: (*n).into(),
                    commit: "c".into(),
                })
                .collect(),
            error: None,
            output: None,
            bytes: None,
        }
    }

    #[test]
    fn the_newest_compatible_image_is_chosen_and_the_others_said() {
        let want = vec![("acme".to_string(), "web".to_string())];
        let ready = vec![
            build("3", "2.0", &[("acme", "web")]),
            build("2", "1.0", &[("acme", "web"), ("acme", "api")]),
            build("1", "1.0", &[("Acme", "Web")]),
        ];
        let (chosen, warnings) = choose_image(&ready, "1.0", &want);
        assert_eq!(chosen.unwrap().id, "1");
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].contains("runtime 2.0"));
        assert!(warnings[1].contains("other repositories"));
        let (none, w) = choose_image(&ready, "3.0", &want);
        assert!(none.is_none() && w.len() == 3);
        assert!(choose_image(&[], "1.0", &want).0.is_none());
    }

    #[test]
    fn keep_n_and_due() {
        let ready = vec![
            build("3", "1", &[]),
            build("2", "1", &[]),
            build("1", "1", &[]),
        ];
        let gone: Vec<_> = past_keep(&ready, 2).iter().map(|b| b.id.clone()).collect();
        assert_eq!(gone, vec!["1"]);
        assert_eq!(past_keep(&ready, 0).len(), 2);
        let hourly = ImageSchedule {
            interval_minutes: Some(60),
            keep: 2,
        };
        assert!(due(&hourly, None, false, 0));
        assert!(!due(&hourly, None, true, 0));
        assert!(!due(&hourly, Some(0), false, 30 * 60_000));
        assert!(due(&hourly, Some(0), false, 59 * 60_000));
        assert!(!due(&ImageSchedule::default(), None, false, 0));
    }

    #[test]
    fn schedules_are_checked_and_scopes_keyed() {
        assert!(ImageSchedule {
            interval_minutes: Some(5),
            keep: 2
        }
        .validate()
        .is_err());
        assert!(ImageSchedule {
            interval_minutes: None,
            keep: 0
        }
        .validate()
        .is_err());
        assert!(ImageSchedule::default().validate().is_ok());
        let s: ImageSchedule = serde_json::from_str(r#"{"intervalMinutes":60}"#).unwrap();
        assert_eq!(s.keep, DEFAULT_KEEP);
        assert!(serde_json::from_str::<ImageSchedule>(r#"{"every":1}"#).is_err());
        let scope: ImageScope =
            serde_json::from_str(r#"{"kind":"repository","owner":"Acme","name":"Web"}"#).unwrap();
        assert_eq!(scope.key(), ("repository", "acme/web".into()));
        let env: ImageScope =
            serde_json::from_str(r#"{"kind":"environment","environmentId":"env_1"}"#).unwrap();
        assert_eq!(env.key(), ("environment", "env_1".into()));
    }
}
