//! A workspace's change against the session's base commit, per repository: the files
//! added, modified, deleted or renamed with their line counts, and each file's unified diff
//! (uncommitted work included), bounded so a huge or binary change stays readable.

use serde::{Deserialize, Serialize};

/// The most of one file's diff that is kept; a longer one is listed without it.
pub const MAX_PATCH_BYTES_PER_FILE: usize = 256 * 1024;
/// The most of all diffs of one capture; files past it are listed without theirs.
pub const MAX_PATCH_BYTES_TOTAL: usize = 4 * 1024 * 1024;
/// The most files listed per repository; the rest are counted.
pub const MAX_FILES_LISTED: usize = 3_000;
/// The largest report a sandbox may send (`PUT /sessions/:id/changes`).
pub const MAX_REPORT_BYTES: usize = 12 * 1024 * 1024;

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    Renamed,
    Copied,
    /// A file became a link, or the other way round.
    TypeChanged,
}

/// Why a changed file comes without its diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum PatchOmitted {
    Binary,
    /// Longer than [`MAX_PATCH_BYTES_PER_FILE`].
    TooLarge,
    /// The capture's diffs had reached [`MAX_PATCH_BYTES_TOTAL`].
    OverTotal,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ChangedFile {
    /// The path now (for a deleted file, the path it had). Names that are not UTF-8 are
    /// shown with replacement characters.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    pub kind: ChangeKind,
    pub additions: u64,
    pub deletions: u64,
    #[serde(default)]
    pub binary: bool,
    /// The file's unified diff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<PatchOmitted>,
}

/// One repository's change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RepoChanges {
    /// The repository's name: its directory in the workspace.
    pub repo: String,
    /// The commit the change is against.
    pub base: String,
    pub files: Vec<ChangedFile>,
    /// Changed files past [`MAX_FILES_LISTED`], counted only.
    #[serde(default)]
    pub more_files: u64,
    pub additions: u64,
    pub deletions: u64,
    /// Why the change could not be read (the repository is gone from the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `PUT /sessions/:id/changes`: the sandbox's capture after a turn, every repository of the
/// workspace (a capture replaces the one before).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangesReport {
    pub repos: Vec<RepoChanges>,
}

/// `GET /sessions/:id/changes`: the newest capture, each file without its diff (asked one
/// at a time: `?repo=owner/name&file=path`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ChangesSummary {
    /// When the sandbox captured it (ms); none before the first turn ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_at: Option<i64>,
    pub repos: Vec<RepoChanges>,
}
