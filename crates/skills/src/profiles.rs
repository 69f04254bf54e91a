//! A person's skill profiles in D1 (`migrations/0019_skill_profiles.sql`): saved subsets of
//! the managed skills, each person's own, that a new session may take instead of every
//! applicable skill.

use inspect_protocol::skills::{SkillProfile, SkillProfiles, MAX_PROFILES};
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::d1::{all, first, num, run};
use serde::Deserialize;
use worker::Env;

#[derive(Deserialize)]
struct Row {
    name: String,
    skills: String,
    updated_at: f64,
}

impl Row {
    fn profile(self) -> SkillProfile {
        SkillProfile {
            name: self.name,
            skills: serde_json::from_str(&self.skills).unwrap_or_default(),
            updated_at: self.updated_at as i64,
        }
    }
}

pub async fn list(env: &Env, user: &str) -> Result<SkillProfiles, ApiError> {
    let rows: Vec<Row> = all(
        env,
        "SELECT name, skills, updated_at FROM skill_profiles WHERE user_id = ?1 ORDER BY name",
        &[user.into()],
    )
    .await?;
    Ok(SkillProfiles {
        profiles: rows.into_iter().map(Row::profile).collect(),
    })
}

/// The person's profile `name`: a 400 naming theirs when there is none.
pub async fn get(env: &Env, user: &str, name: &str) -> Result<SkillProfile, ApiError> {
    let row: Option<Row> = first(
        env,
        "SELECT name, skills, updated_at FROM skill_profiles WHERE user_id = ?1 AND name = ?2",
        &[user.into(), name.into()],
    )
    .await?;
    match row {
        Some(r) => Ok(r.profile()),
        None => {
            let mine: Vec<String> = list(env, user)
                .await?
                .profiles
                .into_iter()
                .map(|p| p.name)
                .collect();
            Err(ApiError::bad_request(format!(
                "you have no skill profile {name:?} (yours: {})",
                if mine.is_empty() {
                    "none".to_string()
                } else {
                    mine.join(", ")
                }
            )))
        }
    }
}

pub async fn put(
    env: &Env,
    user: &str,
    name: &str,
    skills: Vec<String>,
    now: i64,
) -> Result<SkillProfile, ApiError> {
    let skills = crate::check_profile(name, skills).map_err(ApiError::bad_request)?;
    let existing = list(env, user).await?.profiles;
    if existing.len() >= MAX_PROFILES && !existing.iter().any(|p| p.name == name) {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("a person keeps at most {MAX_PROFILES} skill profiles"),
        ));
    }
    let json = serde_json::to_string(&skills).map_err(|e| ApiError::internal(e.to_string()))?;
    run(
        env,
        "INSERT INTO skill_profiles (user_id, name, skills, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(user_id, name) DO UPDATE SET skills = ?3, updated_at = ?4",
        &[user.into(), name.into(), json.into(), num(now)],
    )
    .await?;
    Ok(SkillProfile {
        name: name.to_owned(),
        skills,
        updated_at: now,
    })
}

pub async fn delete(env: &Env, user: &str, name: &str) -> Result<(), ApiError> {
    let n = run(
        env,
        "DELETE FROM skill_profiles WHERE user_id = ?1 AND name = ?2",
        &[user.into(), name.into()],
    )
    .await?;
    if n == 0 {
        return Err(ApiError::not_found(format!("no skill profile {name}")));
    }
    Ok(())
}
