//! Completions that ask the server: repository names (`--repo`) and sessions (with their
//! titles). The shell runs `inspect` with `COMPLETE=<shell>` (clap_complete's dynamic
//! completion); each completer asks the kept server within a second, and offers nothing
//! when it cannot.

use crate::api::Api;
use crate::commands;
use clap_complete::CompletionCandidate;
use inspect_protocol::session::{RepositoryList, SessionList};
use serde::de::DeserializeOwned;
use std::ffi::OsStr;
use std::time::Duration;

/// `path` from the kept server, on a runtime of its own (completers are synchronous).
fn ask<T: DeserializeOwned>(path: &str) -> Option<T> {
    let api: Api = commands::api().ok()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(1), api.get::<T>(path))
            .await
            .ok()?
            .ok()
    })
}

/// `owner/name` of each repository the server knows.
pub fn repos(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    let Some(list) = ask::<RepositoryList>("/repos") else {
        return Vec::new();
    };
    list.repositories
        .into_iter()
        .map(|r| {
            let name = format!("{}/{}", r.owner, r.name);
            let help = r.description.unwrap_or_default();
            (name, help)
        })
        .filter(|(name, _)| name.starts_with(typed.as_ref()))
        .map(|(name, help)| CompletionCandidate::new(name).help(Some(help.into())))
        .collect()
}

/// The newest sessions' ids, their titles as help.
pub fn sessions(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    let Some(list) = ask::<SessionList>("/sessions?limit=50") else {
        return Vec::new();
    };
    list.sessions
        .into_iter()
        .filter(|s| s.id.starts_with(typed.as_ref()))
        .map(|s| {
            let title = s.title.unwrap_or_else(|| "(untitled)".to_owned());
            CompletionCandidate::new(s.id).help(Some(title.into()))
        })
        .collect()
}
