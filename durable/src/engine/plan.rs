//! How the next sandbox comes to be: resume the stopped one where the provider keeps
//! sandboxes, restore the latest snapshot a compatible runtime made, or spawn fresh.
//! One pure function, so every combination is a row in a table.

use inspect_protocol::provider::Capabilities;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnPlan {
    /// Start the last sandbox again, on its workspace (providers with persistent resume).
    Resume { sandbox_id: String },
    /// A new sandbox from this snapshot.
    Restore { snapshot_id: String },
    /// A new sandbox from scratch; `warning` says why a snapshot was not used.
    Fresh { warning: Option<String> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousSandbox {
    pub sandbox_id: String,
    /// Stopped by us, given up on after it had been ready, or failed to resume for a reason
    /// that may pass: its workspace holds the session's work (one that never became ready,
    /// or failed to spawn, holds nothing).
    pub resumable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatestSnapshot {
    pub snapshot_id: String,
    pub runtime_version: String,
}

pub fn plan_spawn(
    caps: Capabilities,
    previous: Option<&PreviousSandbox>,
    snapshot: Option<&LatestSnapshot>,
    runtime_version: &str,
) -> SpawnPlan {
    if let Some(p) = previous {
        if caps.persistent_resume && p.resumable {
            return SpawnPlan::Resume {
                sandbox_id: p.sandbox_id.clone(),
            };
        }
    }
    match snapshot {
        Some(s) if caps.restore && s.runtime_version == runtime_version => {
            SpawnPlan::Restore { snapshot_id: s.snapshot_id.clone() }
        }
        Some(s) if caps.restore => SpawnPlan::Fresh {
            warning: Some(format!(
                "the last snapshot was made by runtime {} and this is {runtime_version}: starting fresh from the session branch",
                s.runtime_version
            )),
        },
        _ => SpawnPlan::Fresh { warning: None },
    }
}

impl<S: crate::store::Store> super::Session<'_, S> {
    /// The plan for the next sandbox, from what the last one left. Call before
    /// [`Self::begin_spawn`], which replaces the record of the last one.
    pub fn spawn_plan(
        &self,
        caps: Capabilities,
        runtime_version: &str,
    ) -> super::EngineResult<SpawnPlan> {
        let snapshot = self.latest_snapshot()?;
        self.spawn_plan_from(caps, snapshot.as_ref(), runtime_version)
    }

    /// [`Self::spawn_plan`] with the latest snapshot already read.
    pub fn spawn_plan_from(
        &self,
        caps: Capabilities,
        snapshot: Option<&LatestSnapshot>,
        runtime_version: &str,
    ) -> super::EngineResult<SpawnPlan> {
        use crate::store::Cols;
        let previous = self
            .store
            .query(
                &format!(
                    "SELECT sandbox_id, {} FROM sandbox WHERE id = 1",
                    super::sandbox::RESUMABLE
                ),
                &[],
            )
            .map_err(super::internal)?
            .into_iter()
            .next()
            .map(|row| {
                let mut c = Cols::new(row);
                Ok(PreviousSandbox {
                    sandbox_id: c.opt_string()?.unwrap_or_default(),
                    resumable: c.i64()? != 0,
                })
            })
            .transpose()
            .map_err(super::internal)?;
        Ok(plan_spawn(
            caps,
            previous.as_ref(),
            snapshot,
            runtime_version,
        ))
    }

    pub fn latest_snapshot(&self) -> super::EngineResult<Option<LatestSnapshot>> {
        use crate::store::Cols;
        self.store
            .query("SELECT snapshot_id, runtime_version FROM snapshots ORDER BY created_at DESC, rowid DESC LIMIT 1", &[])
            .map_err(super::internal)?
            .into_iter()
            .next()
            .map(|row| {
                let mut c = Cols::new(row);
                Ok(LatestSnapshot { snapshot_id: c.string()?, runtime_version: c.string()? })
            })
            .transpose()
            .map_err(super::internal)
    }

    /// The provider saved a snapshot: record it and tell everyone.
    pub fn snapshot_saved(
        &self,
        info: &inspect_protocol::provider::SnapshotInfo,
        now: i64,
    ) -> super::EngineResult<super::Effects> {
        use inspect_protocol::client::ServerMessage;
        self.store
            .execute(
                "INSERT OR REPLACE INTO snapshots (snapshot_id, sandbox_id, runtime_version, bytes, created_at) VALUES (?, ?, ?, ?, ?)",
                &[
                    info.snapshot_id.as_str().into(),
                    info.sandbox_id.as_str().into(),
                    info.runtime_version.as_str().into(),
                    (info.bytes as i64).into(),
                    now.into(),
                ],
            )
            .map_err(super::internal)?;
        let mut data = serde_json::Map::new();
        data.insert("snapshotId".into(), info.snapshot_id.clone().into());
        data.insert("bytes".into(), info.bytes.into());
        data.insert("durationMs".into(), info.duration_ms.into());
        let event = super::timeline::append(self.store, "snapshot_saved", None, data, now)
            .map_err(super::internal)?;
        let mut fx = super::Effects::none();
        fx.broadcast(ServerMessage::SandboxEvent { event });
        fx.broadcast(ServerMessage::SnapshotSaved {
            snapshot_id: info.snapshot_id.clone(),
        });
        Ok(fx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(restore: bool, resume: bool) -> Capabilities {
        Capabilities {
            snapshots: restore,
            restore,
            persistent_resume: resume,
            explicit_stop: true,
            timeouts: false,
            resume_in_place: false,
            snapshot_ends_sandbox: false,
            confines_egress: false,
        }
    }

    #[test]
    fn the_plan_table() {
        let stopped = PreviousSandbox {
            sandbox_id: "sb1".into(),
            resumable: true,
        };
        // Never ready, or failed: nothing in it.
        let stale = PreviousSandbox {
            sandbox_id: "sb1".into(),
            resumable: false,
        };
        let snap = LatestSnapshot {
            snapshot_id: "snap1".into(),
            runtime_version: "1".into(),
        };
        let old_snap = LatestSnapshot {
            snapshot_id: "snap0".into(),
            runtime_version: "0".into(),
        };
        let resume = SpawnPlan::Resume {
            sandbox_id: "sb1".into(),
        };
        let restore = SpawnPlan::Restore {
            snapshot_id: "snap1".into(),
        };
        let fresh = SpawnPlan::Fresh { warning: None };
        let rows: Vec<(
            Capabilities,
            Option<&PreviousSandbox>,
            Option<&LatestSnapshot>,
            SpawnPlan,
        )> = vec![
            // provider keeps sandboxes: a cleanly stopped one is resumed
            (
                caps(true, true),
                Some(&stopped),
                Some(&snap),
                resume.clone(),
            ),
            (caps(false, true), Some(&stopped), None, resume),
            // one with nothing in it is not resumed: restore instead
            (caps(true, true), Some(&stale), Some(&snap), restore.clone()),
            // restore where the provider can and the runtime matches
            (caps(true, false), Some(&stopped), Some(&snap), restore),
            // no restore capability or no snapshot: fresh, silently
            (
                caps(false, false),
                Some(&stopped),
                Some(&snap),
                fresh.clone(),
            ),
            (caps(true, false), None, None, fresh),
        ];
        for (i, (c, p, s, want)) in rows.into_iter().enumerate() {
            assert_eq!(plan_spawn(c, p, s, "1"), want, "row {i}");
        }
        // an incompatible snapshot: fresh, with a warning for clients
        match plan_spawn(caps(true, false), None, Some(&old_snap), "1") {
            SpawnPlan::Fresh { warning: Some(w) } => assert!(w.contains("runtime 0")),
            other => panic!("{other:?}"),
        }
    }
}
