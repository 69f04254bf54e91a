//! The workspace's change, as the sandbox last captured it: kept whole (each file's diff in
//! its own row), listed without the diffs, a file's diff read on its own; every client is
//! told when a new capture lands.

use super::{internal, EngineResult, Session};
use crate::engine::Effects;
use crate::store::{Cols, Store};
use inspect_protocol::changes::{ChangedFile, ChangesReport, ChangesSummary, RepoChanges};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::ApiError;

/// Repositories one report may hold (a session has at most ten).
const MAX_REPOS: usize = 20;

impl<S: Store> Session<'_, S> {
    /// A capture from the sandbox replaces the last one.
    pub fn record_changes(&self, report: &ChangesReport, now: i64) -> EngineResult<Effects> {
        if report.repos.len() > MAX_REPOS {
            return Err(ApiError::bad_request(format!(
                "a report holds at most {MAX_REPOS} repositories"
            )));
        }
        let mut totals = (0u64, 0u64, 0u64);
        self.store
            .atomically(|| {
                self.store.execute("DELETE FROM change_files", &[])?;
                self.store.execute("DELETE FROM change_repos", &[])?;
                for r in &report.repos {
                    self.store.execute(
                        "INSERT OR REPLACE INTO change_repos (repo, base, more_files, additions, deletions, error, captured_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        &[
                            r.repo.as_str().into(),
                            r.base.as_str().into(),
                            (r.more_files as i64).into(),
                            (r.additions as i64).into(),
                            (r.deletions as i64).into(),
                            r.error.clone().into(),
                            now.into(),
                        ],
                    )?;
                    totals.0 += r.files.len() as u64 + r.more_files;
                    totals.1 += r.additions;
                    totals.2 += r.deletions;
                    for (i, f) in r.files.iter().enumerate() {
                        let listed = ChangedFile {
                            patch: None,
                            ..f.clone()
                        };
                        self.store.execute(
                            "INSERT OR REPLACE INTO change_files (repo, idx, path, file, patch) VALUES (?, ?, ?, ?, ?)",
                            &[
                                r.repo.as_str().into(),
                                (i as i64).into(),
                                f.path.as_str().into(),
                                serde_json::to_string(&listed).unwrap_or_default().into(),
                                f.patch.clone().into(),
                            ],
                        )?;
                    }
                }
                Ok(())
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::DiffUpdated {
            captured_at: now,
            files: totals.0,
            additions: totals.1,
            deletions: totals.2,
        });
        Ok(fx)
    }

    /// The newest capture, each file without its diff.
    pub fn changes_summary(&self) -> EngineResult<ChangesSummary> {
        let mut summary = ChangesSummary {
            captured_at: None,
            repos: Vec::new(),
        };
        let repos = self
            .store
            .query(
                "SELECT repo, base, more_files, additions, deletions, error, captured_at FROM change_repos ORDER BY repo",
                &[],
            )
            .map_err(internal)?;
        for row in repos {
            let mut c = Cols::new(row);
            let mut r = RepoChanges {
                repo: c.string().map_err(internal)?,
                base: c.string().map_err(internal)?,
                more_files: c.i64().map_err(internal)?.max(0) as u64,
                additions: c.i64().map_err(internal)?.max(0) as u64,
                deletions: c.i64().map_err(internal)?.max(0) as u64,
                error: c.opt_string().map_err(internal)?,
                files: Vec::new(),
            };
            summary.captured_at = Some(c.i64().map_err(internal)?);
            for f in self
                .store
                .query(
                    "SELECT file FROM change_files WHERE repo = ? ORDER BY idx",
                    &[r.repo.as_str().into()],
                )
                .map_err(internal)?
            {
                let text = Cols::new(f).string().map_err(internal)?;
                if let Ok(file) = serde_json::from_str(&text) {
                    r.files.push(file);
                }
            }
            summary.repos.push(r);
        }
        Ok(summary)
    }

    /// One file of the newest capture, with its diff; `None` when it is not in it.
    pub fn changed_file(&self, repo: &str, path: &str) -> EngineResult<Option<ChangedFile>> {
        let Some(row) = self
            .store
            .query(
                "SELECT file, patch FROM change_files WHERE repo = ? AND path = ? ORDER BY idx LIMIT 1",
                &[repo.into(), path.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        let mut c = Cols::new(row);
        let mut file: ChangedFile = serde_json::from_str(&c.string().map_err(internal)?)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        file.patch = c.opt_string().map_err(internal)?;
        Ok(Some(file))
    }

    /// The files of the newest capture (`repo:path` where there are several
    /// repositories), for a completion's report; `None` before any capture.
    pub fn captured_paths(&self) -> EngineResult<Option<Vec<String>>> {
        let repos = self
            .store
            .scalar("SELECT COUNT(*) FROM change_repos", &[])
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        if repos == 0 {
            return Ok(None);
        }
        let rows = self
            .store
            .query(
                "SELECT repo, path FROM change_files ORDER BY repo, idx",
                &[],
            )
            .map_err(internal)?;
        let mut out = Vec::new();
        for row in rows {
            let mut c = Cols::new(row);
            let (repo, path) = (c.string().map_err(internal)?, c.string().map_err(internal)?);
            out.push(if repos > 1 {
                format!("{repo}:{path}")
            } else {
                path
            });
        }
        Ok(Some(out))
    }
}
