//! The session's managed skills, installed before the agent starts: the revisions the
//! session pinned are fetched from the control plane with the sandbox's own credentials and
//! written in the agent's own state (never in the repository), in a folder OpenCode's
//! configuration names (`skills.paths`).

use anyhow::{bail, Context, Result};
use inspect_protocol::provider::SpawnRequest;
use inspect_protocol::skills::{SkillBundle, SkillBundles};
use std::path::Path;
use std::time::Duration;

/// Fetches the pinned revisions (three tries).
pub async fn fetch(spawn: &SpawnRequest) -> Result<Vec<SkillBundle>> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()?;
    let url = format!(
        "{}/sessions/{}/skills",
        spawn.control_plane_url.trim_end_matches('/'),
        spawn.session_id
    );
    let mut last = None;
    for attempt in 0..3 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(500 * attempt)).await;
        }
        let sent = client
            .get(&url)
            .bearer_auth(&spawn.sandbox_token)
            .header(inspect_protocol::auth::SANDBOX_ID_HEADER, &spawn.sandbox_id)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => {
                let got: SkillBundles = r.json().await.context("the skills' answer")?;
                return Ok(got.skills);
            }
            Ok(r) => {
                let status = r.status();
                let text = r.text().await.unwrap_or_default();
                last = Some(anyhow::anyhow!(
                    "the control plane answered {status}: {text}"
                ));
                if status.is_client_error() {
                    break;
                }
            }
            Err(e) => last = Some(e.into()),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no answer")))
}

/// Writes each skill's `SKILL.md` and files under `skills_dir` (replacing what was there:
/// a restarted sandbox installs the same revisions again). Names and paths are checked
/// again here, so nothing is written outside its skill's folder.
pub fn install(skills_dir: &Path, bundles: &[SkillBundle]) -> Result<()> {
    let _ = std::fs::remove_dir_all(skills_dir);
    for b in bundles {
        if let Err(e) = inspect_skills::check_name(&b.name) {
            bail!("{e}");
        }
        let dir = skills_dir.join(&b.name);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("SKILL.md"), &b.skill_md)?;
        if let Err(e) = inspect_skills::check_files(&b.files) {
            bail!("skill {}: {e}", b.name);
        }
        for f in &b.files {
            let path = dir.join(&f.path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, &f.content)?;
            if f.executable {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
            }
        }
    }
    Ok(())
}

/// What the boot step says: each skill with its revision.
pub fn described(bundles: &[SkillBundle]) -> String {
    bundles
        .iter()
        .map(|b| format!("{}@{}", b.name, b.revision))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use inspect_protocol::skills::SkillFile;

    #[test]
    fn skills_are_written_in_their_folders_only() {
        let dir = tempfile::tempdir().unwrap();
        let skills = dir.path().join("skills");
        let good = SkillBundle {
            name: "deploy".into(),
            revision: 2,
            skill_md: "---\nname: deploy\n---\n".into(),
            files: vec![SkillFile {
                path: "scripts/run.sh".into(),
                content: "echo hi".into(),
                executable: true,
            }],
        };
        install(&skills, std::slice::from_ref(&good)).unwrap();
        assert!(skills.join("deploy/SKILL.md").is_file());
        let mode = std::fs::metadata(skills.join("deploy/scripts/run.sh"))
            .unwrap()
            .permissions();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.mode() & 0o777, 0o755);
        assert_eq!(described(std::slice::from_ref(&good)), "deploy@2");
        let mut bad = good.clone();
        bad.files[0].path = "../../escape".into();
        assert!(install(&skills, &[bad]).is_err());
        assert!(!dir.path().join("escape").exists());
        let mut bad = good;
        bad.name = "../x".into();
        assert!(install(&skills, &[bad]).is_err());
    }
}
