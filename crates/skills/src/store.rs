//! Skills in D1 (`migrations/0014_skills.sql`). A save writes the new revision's row first
//! (its key is the skill's name and the revision, so of two saves racing from the same
//! revision one fails) and then moves the skill to it.

use crate::{assignments_of, check, digest, skill_md, Candidate};
use inspect_protocol::session::RepositoryRef;
use inspect_protocol::skills::{
    PinnedSkill, Skill, SkillAssignment, SkillBundle, SkillFile, SkillList, SkillRequest,
};
use inspect_protocol::ApiError;
use inspect_runtime::d1::{all, first, num, run};
use serde::Deserialize;
use worker::Env;

#[derive(Deserialize)]
struct Row {
    name: String,
    revision: f64,
    enabled: f64,
    assignments: String,
    description: String,
    instructions: String,
    files: String,
    digest: String,
    updated_by: String,
    updated_at: f64,
}

const SELECT: &str = "SELECT s.name, s.revision, s.enabled, s.assignments, r.description, r.instructions, r.files, r.digest, s.updated_by, s.updated_at \
     FROM skills s JOIN skill_revisions r ON r.name = s.name AND r.revision = s.revision WHERE s.deleted_at IS NULL";

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(e.to_string())
}

impl Row {
    fn into_skill(self) -> Result<Skill, ApiError> {
        Ok(Skill {
            name: self.name,
            revision: self.revision as u32,
            description: self.description,
            instructions: self.instructions,
            files: serde_json::from_str(&self.files).map_err(internal)?,
            enabled: self.enabled > 0.0,
            assignments: serde_json::from_str(&self.assignments).map_err(internal)?,
            digest: self.digest,
            updated_by: self.updated_by,
            updated_at: self.updated_at as i64,
        })
    }
}

pub async fn list(env: &Env) -> Result<SkillList, ApiError> {
    let rows: Vec<Row> = all(env, &format!("{SELECT} ORDER BY s.name"), &[]).await?;
    Ok(SkillList {
        skills: rows
            .into_iter()
            .map(Row::into_skill)
            .collect::<Result<_, _>>()?,
    })
}

pub async fn get(env: &Env, name: &str) -> Result<Skill, ApiError> {
    let row: Option<Row> = first(env, &format!("{SELECT} AND s.name = ?1"), &[name.into()]).await?;
    row.ok_or_else(|| ApiError::not_found(format!("no skill {name}")))?
        .into_skill()
}

/// Writes revision `revision` of a skill's content.
async fn write_revision(
    env: &Env,
    name: &str,
    revision: u32,
    req: &SkillRequest,
    by: &str,
    now: i64,
) -> Result<(), ApiError> {
    let md = skill_md(name, &req.description, &req.instructions);
    let files = serde_json::to_string(&req.files).map_err(internal)?;
    let written = run(
        env,
        "INSERT INTO skill_revisions (name, revision, description, instructions, files, skill_md, digest, created_by, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (name, revision) DO NOTHING",
        &[
            name.into(),
            num(revision.into()),
            req.description.trim().into(),
            req.instructions.as_str().into(),
            files.into(),
            md.clone().into(),
            digest(&md, &req.files).into(),
            by.into(),
            num(now),
        ],
    )
    .await?;
    match written {
        0 => Err(ApiError::conflict(format!(
            "{name} was saved by someone else meanwhile; reload it and save again"
        ))),
        _ => Ok(()),
    }
}

/// `POST /skills`: a new skill at revision 1 (or, for a name whose skill was deleted, the
/// revision after its last).
pub async fn create(env: &Env, req: &SkillRequest, by: &str, now: i64) -> Result<Skill, ApiError> {
    let name = req
        .name
        .clone()
        .ok_or_else(|| ApiError::bad_request("a new skill needs a name"))?;
    check(req).map_err(ApiError::bad_request)?;
    #[derive(Deserialize)]
    struct Existing {
        revision: f64,
        deleted_at: Option<f64>,
    }
    let existing: Option<Existing> = first(
        env,
        "SELECT revision, deleted_at FROM skills WHERE name = ?1",
        &[name.as_str().into()],
    )
    .await?;
    let revision = match existing {
        None => 1,
        Some(e) if e.deleted_at.is_some() => e.revision as u32 + 1,
        Some(_) => return Err(ApiError::conflict(format!("a skill named {name} exists"))),
    };
    write_revision(env, &name, revision, req, by, now).await?;
    let assignments = serde_json::to_string(&assignments_of(req)).map_err(internal)?;
    let moved = run(
        env,
        "INSERT INTO skills (name, revision, enabled, assignments, deleted_at, created_by, created_at, updated_by, updated_at) \
         VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6, ?5, ?6) \
         ON CONFLICT (name) DO UPDATE SET revision = excluded.revision, enabled = excluded.enabled, assignments = excluded.assignments, deleted_at = NULL, updated_by = excluded.updated_by, updated_at = excluded.updated_at \
         WHERE skills.deleted_at IS NOT NULL AND skills.revision = ?2 - 1",
        &[
            name.as_str().into(),
            num(revision.into()),
            num(i64::from(req.enabled)),
            assignments.into(),
            by.into(),
            num(now),
        ],
    )
    .await?;
    if moved == 0 {
        return Err(ApiError::conflict(format!("a skill named {name} exists")));
    }
    get(env, &name).await
}

/// `PUT /skills/:name`: a new revision.
pub async fn update(
    env: &Env,
    name: &str,
    req: &SkillRequest,
    by: &str,
    now: i64,
) -> Result<Skill, ApiError> {
    if req.name.as_deref().is_some_and(|n| n != name) {
        return Err(ApiError::bad_request("a skill's name never changes"));
    }
    check(req).map_err(ApiError::bad_request)?;
    let current = get(env, name).await?;
    if req.expected_revision.is_some_and(|r| r != current.revision) {
        return Err(ApiError::conflict(format!(
            "{name} is at revision {} now; reload it and save again",
            current.revision
        )));
    }
    let revision = current.revision + 1;
    write_revision(env, name, revision, req, by, now).await?;
    let assignments = serde_json::to_string(&assignments_of(req)).map_err(internal)?;
    let moved = run(
        env,
        "UPDATE skills SET revision = ?2, enabled = ?3, assignments = ?4, updated_by = ?5, updated_at = ?6 \
         WHERE name = ?1 AND revision = ?7 AND deleted_at IS NULL",
        &[
            name.into(),
            num(revision.into()),
            num(i64::from(req.enabled)),
            assignments.into(),
            by.into(),
            num(now),
            num(current.revision.into()),
        ],
    )
    .await?;
    if moved == 0 {
        return Err(ApiError::conflict(format!(
            "{name} changed meanwhile; reload it and save again"
        )));
    }
    get(env, name).await
}

/// `DELETE /skills/:name`: gone from the catalog and from new sessions; its revisions stay
/// for the sessions that pinned them.
pub async fn delete(env: &Env, name: &str, now: i64) -> Result<(), ApiError> {
    let n = run(
        env,
        "UPDATE skills SET deleted_at = ?2 WHERE name = ?1 AND deleted_at IS NULL",
        &[name.into(), num(now)],
    )
    .await?;
    match n {
        0 => Err(ApiError::not_found(format!("no skill {name}"))),
        _ => Ok(()),
    }
}

/// The revisions a new session on these repositories (or environment) pins.
pub async fn applicable(
    env: &Env,
    repositories: &[RepositoryRef],
    environment: Option<&str>,
) -> Result<Vec<PinnedSkill>, ApiError> {
    #[derive(Deserialize)]
    struct Brief {
        name: String,
        revision: f64,
        enabled: f64,
        assignments: String,
    }
    let rows: Vec<Brief> = all(
        env,
        "SELECT name, revision, enabled, assignments FROM skills WHERE deleted_at IS NULL AND enabled = 1",
        &[],
    )
    .await?;
    let parsed: Vec<(String, u32, bool, Vec<SkillAssignment>)> = rows
        .into_iter()
        .map(|r| {
            let a = serde_json::from_str(&r.assignments).unwrap_or_default();
            (r.name, r.revision as u32, r.enabled > 0.0, a)
        })
        .collect();
    let candidates: Vec<Candidate> = parsed
        .iter()
        .map(|(name, revision, enabled, assignments)| Candidate {
            name,
            revision: *revision,
            enabled: *enabled,
            assignments,
        })
        .collect();
    Ok(crate::pin(&candidates, repositories, environment))
}

/// The content of pinned revisions, for the session's sandbox.
pub async fn bundles(env: &Env, pinned: &[PinnedSkill]) -> Result<Vec<SkillBundle>, ApiError> {
    #[derive(Deserialize)]
    struct Content {
        skill_md: String,
        files: String,
    }
    let mut out = Vec::with_capacity(pinned.len());
    for p in pinned {
        let row: Option<Content> = first(
            env,
            "SELECT skill_md, files FROM skill_revisions WHERE name = ?1 AND revision = ?2",
            &[p.name.as_str().into(), num(p.revision.into())],
        )
        .await?;
        let Some(row) = row else {
            return Err(ApiError::internal(format!(
                "the revision {} of the skill {} is missing",
                p.revision, p.name
            )));
        };
        let files: Vec<SkillFile> = serde_json::from_str(&row.files).map_err(internal)?;
        out.push(SkillBundle {
            name: p.name.clone(),
            revision: p.revision,
            skill_md: row.skill_md,
            files,
        });
    }
    Ok(out)
}
