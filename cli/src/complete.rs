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

/// The (value, help) pairs that begin with what is typed.
fn offer(current: &OsStr, all: impl Iterator<Item = (String, String)>) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    all.filter(|(value, _)| value.starts_with(typed.as_ref()))
        .map(|(value, help)| CompletionCandidate::new(value).help(Some(help.into())))
        .collect()
}

/// `owner/name` of each repository the server knows, its description as help.
pub fn repos(current: &OsStr) -> Vec<CompletionCandidate> {
    let repositories = ask::<RepositoryList>("/repos")
        .map(|l| l.repositories)
        .unwrap_or_default();
    offer(
        current,
        repositories.into_iter().map(|r| {
            (
                format!("{}/{}", r.owner, r.name),
                r.description.unwrap_or_default(),
            )
        }),
    )
}

/// The newest sessions' ids, their titles as help.
pub fn sessions(current: &OsStr) -> Vec<CompletionCandidate> {
    let sessions = ask::<SessionList>("/sessions?limit=50")
        .map(|l| l.sessions)
        .unwrap_or_default();
    offer(
        current,
        sessions
            .into_iter()
            .map(|s| (s.id, s.title.unwrap_or_else(|| "(untitled)".to_owned()))),
    )
}
