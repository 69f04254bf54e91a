//! A prompt's files: the ones the session keeps are fetched with the sandbox's token into
//! `.inspect-attachments/` in the primary repository (ignored by git through
//! `.git/info/exclude`, so they are never committed), and the prompt tells the agent where
//! they are.

use anyhow::{bail, Context, Result};
use inspect_protocol::session::Attachment;
use std::path::{Path, PathBuf};

pub const DIR: &str = ".inspect-attachments";

/// The file name an attachment is saved under.
pub fn file_name(id: &str, name: &str) -> String {
    format!("{id}-{}", inspect_protocol::session::safe_file_name(name))
}

/// The prompt with a line naming where each saved file is.
pub fn with_paths(content: &str, saved: &[(String, PathBuf)]) -> String {
    if saved.is_empty() {
        return content.to_owned();
    }
    let list: Vec<String> = saved
        .iter()
        .map(|(name, path)| format!("- {name}: {}", path.display()))
        .collect();
    format!(
        "{content}\n\nFiles attached to this prompt, saved in the workspace:\n{}",
        list.join("\n")
    )
}

fn ignore_dir(repo: &Path) -> Result<()> {
    let exclude = repo.join(".git/info/exclude");
    let text = std::fs::read_to_string(&exclude).unwrap_or_default();
    let line = format!("/{DIR}/");
    if !text.lines().any(|l| l.trim() == line) {
        if let Some(dir) = exclude.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&exclude, format!("{text}\n{line}\n"))?;
    }
    Ok(())
}

/// Fetches the kept files into the repository; `(name, path)` of each saved one.
pub async fn fetch(
    repo: &Path,
    control_plane: &str,
    session: &str,
    sandbox: &str,
    token: &str,
    attachments: &[Attachment],
) -> Result<Vec<(String, PathBuf)>> {
    let kept: Vec<&Attachment> = attachments
        .iter()
        .filter(|a| a.attachment_id.is_some())
        .collect();
    if kept.is_empty() {
        return Ok(Vec::new());
    }
    ignore_dir(repo)?;
    let dir = repo.join(DIR);
    std::fs::create_dir_all(&dir)?;
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()?;
    let mut saved = Vec::new();
    for a in kept {
        let id = a.attachment_id.as_deref().unwrap_or_default();
        if !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            bail!("attachment id {id:?} is not one");
        }
        let url = format!(
            "{}/sessions/{session}/attachments/{id}",
            control_plane.trim_end_matches('/')
        );
        let resp = client
            .get(&url)
            .bearer_auth(token)
            .header(inspect_protocol::auth::SANDBOX_ID_HEADER, sandbox)
            .send()
            .await
            .with_context(|| format!("fetching attachment {id}"))?;
        if !resp.status().is_success() {
            bail!("fetching attachment {id}: {}", resp.status());
        }
        let bytes = resp.bytes().await?;
        let path = dir.join(file_name(id, &a.name));
        std::fs::write(&path, &bytes)?;
        saved.push((a.name.clone(), path));
    }
    Ok(saved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_prompt() {
        assert_eq!(file_name("att_1", "../a b.png"), "att_1-a_b.png");
        let p = with_paths(
            "look",
            &[(
                "a.png".into(),
                PathBuf::from("/w/r/.inspect-attachments/att_1-a.png"),
            )],
        );
        assert!(p.starts_with("look\n\nFiles attached"));
        assert!(p.contains("- a.png: /w/r/.inspect-attachments/att_1-a.png"));
        assert_eq!(with_paths("x", &[]), "x");
    }

    #[test]
    fn the_folder_is_ignored_once() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(dir.path().join(".git/info")).unwrap_or_else(|e| panic!("{e}"));
        ignore_dir(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        ignore_dir(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(dir.path().join(".git/info/exclude"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(text.matches("/.inspect-attachments/").count(), 1);
    }
}
