//! Managed skills: reusable instructions (and supporting files) the deployment's people keep
//! for the agent, assigned to every session, to repositories or to environments. Each edit
//! is a new revision; a session pins the revisions that applied when it was made, and its
//! sandbox installs exactly those where the agent loads skills from.

use serde::{Deserialize, Serialize};

/// A skill's name: lowercase letters and digits in words joined by single hyphens.
pub const MAX_SKILL_NAME: usize = 64;
pub const MAX_SKILL_DESCRIPTION: usize = 1024;
pub const MAX_SKILL_INSTRUCTIONS: usize = 64 * 1024;
pub const MAX_SKILL_FILES: usize = 20;
pub const MAX_SKILL_FILE_BYTES: usize = 128 * 1024;
/// A skill's instructions and files together.
pub const MAX_SKILL_BYTES: usize = 512 * 1024;
/// The skills one session may pin.
pub const MAX_SESSION_SKILLS: usize = 20;
pub const MAX_SKILL_ASSIGNMENTS: usize = 100;

/// A supporting file, beside `SKILL.md`: a relative path and UTF-8 text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillFile {
    pub path: String,
    pub content: String,
    /// Installed executable (only under `scripts/`).
    #[serde(default)]
    pub executable: bool,
}

/// Where a skill applies: every session, sessions holding a repository, or sessions made
/// from an environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SkillAssignment {
    All,
    Repository { owner: String, name: String },
    Environment { id: String },
}

/// `POST /skills` (with `name`) and `PUT /skills/:name` (a new revision; `name`, when
/// given, must be the path's). `expectedRevision` refuses the save when someone else saved
/// meanwhile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillRequest {
    #[serde(default)]
    pub name: Option<String>,
    pub description: String,
    #[serde(default)]
    pub instructions: String,
    #[serde(default)]
    pub files: Vec<SkillFile>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// None: every session.
    #[serde(default)]
    pub assignments: Option<Vec<SkillAssignment>>,
    #[serde(default)]
    pub expected_revision: Option<u32>,
}

fn yes() -> bool {
    true
}

/// A skill as kept: its newest revision's content, its state and assignments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    pub name: String,
    pub revision: u32,
    pub description: String,
    pub instructions: String,
    pub files: Vec<SkillFile>,
    pub enabled: bool,
    pub assignments: Vec<SkillAssignment>,
    /// SHA-256 of the generated `SKILL.md` and the files.
    pub digest: String,
    pub updated_by: String,
    pub updated_at: i64,
}

/// `GET /skills`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SkillList {
    pub skills: Vec<Skill>,
}

/// Which skills a new session takes: every applicable one (the default), none, or the
/// applicable ones a profile of the person's names (`{"profile": "name"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum SkillChoice {
    #[default]
    All,
    None,
    Profile(String),
}

/// A person's saved subset of the skills (`PUT /skill-profiles/:name {"skills": [...]}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SkillProfile {
    pub name: String,
    pub skills: Vec<String>,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillProfileRequest {
    pub skills: Vec<String>,
}

/// `GET /skill-profiles`: the caller's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SkillProfiles {
    pub profiles: Vec<SkillProfile>,
}

/// Profiles a person keeps, at most, and skills in one.
pub const MAX_PROFILES: usize = 20;
pub const MAX_PROFILE_SKILLS: usize = 100;

/// A skill revision a session uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PinnedSkill {
    pub name: String,
    pub revision: u32,
}

/// A pinned revision's content, as the sandbox installs it (`GET /sessions/:id/skills`,
/// with the sandbox's own credentials).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SkillBundle {
    pub name: String,
    pub revision: u32,
    /// The whole `SKILL.md`: front matter (name, description) and the instructions.
    pub skill_md: String,
    pub files: Vec<SkillFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SkillBundles {
    pub skills: Vec<SkillBundle>,
}
