//! The sandbox seen from the session: spawn tickets, who may connect, what it reports,
//! and feeding it the queue one prompt at a time.

use super::sockets::KIND_SANDBOX;
use super::{ids, internal, timeline, Effects, EngineResult, Session};
use crate::store::{Cols, Store};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::provider::SandboxRef;
use inspect_protocol::session::MessageStatus;
use serde_json::{Map, Value};

/// After a failed spawn, no new attempt for this long.
pub const SPAWN_COOLDOWN_MS: i64 = 30_000;
/// A session waiting for the provider's capacity asks again this often.
pub const CAPACITY_RETRY_MS: i64 = 5_000;
/// The longest a session waiting for room waits before asking again by itself. Room freed
/// by another session's stop wakes the oldest waiter at once; this catches room freed
/// elsewhere (a vendor's plan, another deployment's sandboxes).
pub const CAPACITY_BACKSTOP_MS: i64 = 60_000;
/// Automatic spawn retries stop after this many failures within the failure window
/// (`deadlines::FAILURE_WINDOW_MS`).
pub const MAX_SPAWN_FAILURES: i64 = 3;

/// The condition (on the `sandbox` row) of a last sandbox that is one to resume: see
/// [`Session::resumable`].
pub(crate) const RESUMABLE: &str =
    "(status = 'stopped' OR (status IN ('stale', 'failed', 'waiting') AND ready_at IS NOT NULL))";

/// Sandbox states a spawn must not repeat while in one of them.
pub(crate) const LIVE_STATES: &[&str] = &[
    "spawning",
    "connecting",
    "syncing",
    "setup",
    "start",
    "ready",
    "running",
    "snapshotting",
];

/// A spawn the provider refused for want of room waits in this state (no sandbox was made).
pub(crate) const WAITING: &str = "waiting";

/// What a spawn needs: the sandbox's id and its one-time bearer token.
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnTicket {
    pub sandbox_id: String,
    pub token: String,
}

/// Why a sandbox may not connect, as the HTTP status the supervisor sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxRefusal {
    /// 401: no token, or not this session's.
    BadToken,
    /// 403: the token is for another sandbox id.
    WrongSandbox,
    /// 404: no session here.
    NoSession,
    /// 410: this sandbox was replaced or stopped.
    Gone,
}

impl SandboxRefusal {
    pub fn status(self) -> u16 {
        match self {
            SandboxRefusal::BadToken => 401,
            SandboxRefusal::WrongSandbox => 403,
            SandboxRefusal::NoSession => 404,
            SandboxRefusal::Gone => 410,
        }
    }
}

pub(crate) struct SandboxRow {
    pub(crate) sandbox_id: String,
    pub(crate) status: String,
    token_hash: Option<String>,
}

impl SandboxRow {
    /// Alive or on its way (one of [`LIVE_STATES`]).
    pub(crate) fn is_live(&self) -> bool {
        LIVE_STATES.contains(&self.status.as_str())
    }
}

/// Whether a spawn that failed at `failed_at` (none: the last one did not fail) is still
/// cooling down at `now`.
fn cooling_down(failed_at: Option<i64>, now: i64) -> bool {
    failed_at.is_some_and(|t| now - t < SPAWN_COOLDOWN_MS)
}

impl<S: Store> Session<'_, S> {
    pub(crate) fn sandbox_row(&self) -> EngineResult<Option<SandboxRow>> {
        self.store
            .query(
                "SELECT sandbox_id, status, token_hash FROM sandbox WHERE id = 1",
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .next()
            .map(|row| {
                let mut c = Cols::new(row);
                Ok(SandboxRow {
                    sandbox_id: c.opt_string()?.unwrap_or_default(),
                    status: c.string()?,
                    token_hash: c.opt_string()?,
                })
            })
            .transpose()
            .map_err(internal)
    }

    /// Keeps the vendor's own id of our sandbox `sandbox_id` (given when it was made).
    pub fn record_vendor_id(
        &self,
        sandbox_id: &str,
        vendor_id: &str,
        now: i64,
    ) -> EngineResult<()> {
        self.store
            .execute(
                "INSERT INTO vendor_sandboxes (sandbox_id, vendor_id, recorded_at) VALUES (?, ?, ?)
                 ON CONFLICT(sandbox_id) DO UPDATE SET vendor_id = excluded.vendor_id",
                &[sandbox_id.into(), vendor_id.into(), now.into()],
            )
            .map_err(internal)?;
        Ok(())
    }

    /// Our sandbox `sandbox_id` as a provider is asked about it (with the vendor's id, when
    /// one was kept).
    pub fn sandbox_ref(&self, sandbox_id: &str) -> EngineResult<SandboxRef> {
        let vendor_id = self
            .store
            .scalar(
                "SELECT vendor_id FROM vendor_sandboxes WHERE sandbox_id = ?",
                &[sandbox_id.into()],
            )
            .map_err(internal)?
            .and_then(|v| v.as_str().map(str::to_owned));
        Ok(SandboxRef {
            sandbox_id: sandbox_id.to_owned(),
            vendor_id,
        })
    }

    /// Every sandbox the session had whose vendor id was kept, oldest first.
    pub fn vendor_sandboxes(&self) -> EngineResult<Vec<SandboxRef>> {
        self.store
            .query(
                "SELECT sandbox_id, vendor_id FROM vendor_sandboxes ORDER BY recorded_at, rowid",
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .map(|row| {
                let mut c = Cols::new(row);
                Ok(SandboxRef {
                    sandbox_id: c.string()?,
                    vendor_id: Some(c.string()?),
                })
            })
            .collect::<Result<_, _>>()
            .map_err(internal)
    }

    /// The current sandbox's status (`none` when there never was one).
    pub fn sandbox_status(&self) -> EngineResult<String> {
        Ok(self
            .sandbox_row()?
            .map_or_else(|| "none".into(), |r| r.status))
    }

    pub(crate) fn set_sandbox_status(
        &self,
        status: &str,
        error: Option<&str>,
        now: i64,
    ) -> crate::store::StoreResult<()> {
        self.store.execute(
            "UPDATE sandbox SET status = ?, error = ?, updated_at = ?,
                ready_at = CASE WHEN ? = 'ready' THEN COALESCE(ready_at, ?) ELSE ready_at END
             WHERE id = 1",
            &[
                status.into(),
                error.into(),
                now.into(),
                status.into(),
                now.into(),
            ],
        )?;
        if !LIVE_STATES.contains(&status) {
            self.terminals_gone(now)?;
        }
        self.store.execute(
            "UPDATE session SET sandbox_status = ? WHERE id = 1",
            &[status.into()],
        )
    }

    pub(crate) fn status_effects(
        &self,
        status: &str,
        error: Option<&str>,
        now: i64,
    ) -> EngineResult<Effects> {
        let mut data = Map::new();
        data.insert("status".into(), Value::String(status.into()));
        if let Some(e) = error {
            data.insert("error".into(), Value::String(e.into()));
        }
        let event =
            timeline::append(self.store, "sandbox_status", None, data, now).map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxEvent { event });
        fx.broadcast(ServerMessage::SandboxStatus {
            status: status.into(),
            error: error.map(str::to_owned),
        });
        // A sandbox that stops ends a stretch of sandbox time: the index row counts it. A
        // refused spawn (waiting for room) made none: nothing to count, no D1 write (a
        // thousand sessions refused at once each wrote their row again).
        fx.index_changed |= !LIVE_STATES.contains(&status) && status != WAITING;
        Ok(fx)
    }

    /// Whether a prompt waits with no live sandbox to run it.
    pub fn needs_sandbox(&self) -> EngineResult<bool> {
        if self.sandbox_live()? {
            return Ok(false);
        }
        Ok(self
            .queue()?
            .iter()
            .any(|q| q.status == MessageStatus::Pending))
    }

    /// Whether the session's sandbox is alive or on its way.
    pub fn sandbox_live(&self) -> EngineResult<bool> {
        Ok(self.sandbox_row()?.is_some_and(|r| r.is_live()))
    }

    /// A person is typing: start a sandbox if none is alive (and the session takes prompts),
    /// or keep the live one from counting as idle.
    pub fn warm(&self, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        let live = self.sandbox_row()?.is_some_and(|r| r.is_live());
        if live {
            self.sandbox_active(now)?;
            return Ok(fx);
        }
        let archived = self.status()? == inspect_protocol::session::SessionStatus::Archived;
        if archived || self.spawn_cooling_down(now)? {
            return Ok(fx);
        }
        fx.broadcast(ServerMessage::SandboxWarming);
        fx.spawn_wanted = true;
        Ok(fx)
    }

    /// Starts a spawn: a new sandbox id and token (only the hash is kept). `None` when a
    /// sandbox is already alive or on its way, so there are never two.
    pub fn begin_spawn(&self, now: i64) -> EngineResult<Option<(SpawnTicket, Effects)>> {
        // The session, and its last sandbox's state, in one read.
        let mut c = self.session_row(
            "SELECT b.status, b.updated_at FROM session s LEFT JOIN sandbox b ON b.id = 1 WHERE s.id = 1",
            &[],
        )?;
        let status = c.opt_string().map_err(internal)?;
        let updated_at = c.opt_i64().map_err(internal)?;
        let failed_at = updated_at.filter(|_| status.as_deref() == Some("failed"));
        let live = status.as_deref().is_some_and(|s| LIVE_STATES.contains(&s));
        if cooling_down(failed_at, now) || live {
            return Ok(None);
        }
        let ticket = SpawnTicket {
            sandbox_id: ids::new_id("sb"),
            token: ids::new_secret(),
        };
        self.store
            .atomically(|| {
                self.store.execute(
                    "INSERT INTO sandbox (id, sandbox_id, status, token_hash, spawned_at, updated_at) VALUES (1, ?, 'spawning', ?, ?, ?)
                     ON CONFLICT(id) DO UPDATE SET sandbox_id = excluded.sandbox_id, status = 'spawning', token_hash = excluded.token_hash,
                        spawned_at = excluded.spawned_at, extended_at = NULL, links_at = NULL, connected_at = NULL, last_heartbeat = NULL, error = NULL, tunnel_urls = NULL, editor = NULL, desktop = NULL, ready_at = NULL, progress = NULL, updated_at = excluded.updated_at",
                    &[ticket.sandbox_id.as_str().into(), ids::hash_secret(&ticket.token).into(), now.into(), now.into()],
                )?;
                self.store.execute("UPDATE session SET sandbox_status = 'spawning' WHERE id = 1", &[])
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxSpawning {
            sandbox_id: ticket.sandbox_id.clone(),
        });
        fx.merge(self.status_effects("spawning", None, now)?);
        Ok(Some((ticket, fx)))
    }

    /// Starts bringing back the stopped sandbox `previous` in place (providers whose resume
    /// restarts the same machine): it keeps its id and token, which its machine holds; the
    /// ticket's token is empty. `None` when that sandbox is not the last one, or not one to
    /// resume (see [`Self::resumable`]).
    pub fn begin_resume(
        &self,
        previous: &str,
        now: i64,
    ) -> EngineResult<Option<(SpawnTicket, Effects)>> {
        self.session_id()?;
        let last = self
            .sandbox_row()?
            .is_some_and(|r| r.sandbox_id == previous);
        if !(last && self.resumable()?) {
            return Ok(None);
        }
        self.store
            .atomically(|| {
                self.store.execute(
                    // A resumed workspace holds the session's work from the start (as one
                    // carried to a new machine does): a wait or failure on the way keeps it.
                    "UPDATE sandbox SET status = 'spawning', spawned_at = ?, extended_at = NULL, links_at = NULL, connected_at = NULL, last_heartbeat = NULL, error = NULL, tunnel_urls = NULL, editor = NULL, desktop = NULL, progress = NULL, ready_at = COALESCE(ready_at, ?), updated_at = ? WHERE id = 1",
                    &[now.into(), now.into(), now.into()],
                )?;
                self.store.execute("UPDATE session SET sandbox_status = 'spawning' WHERE id = 1", &[])
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxSpawning {
            sandbox_id: previous.to_owned(),
        });
        fx.merge(self.status_effects("spawning", None, now)?);
        Ok(Some((
            SpawnTicket {
                sandbox_id: previous.to_owned(),
                token: String::new(),
            },
            fx,
        )))
    }

    /// Whether the last sandbox is one to resume: stopped by us, given up on after it had
    /// been ready (its workspace holds the session's work; one that never became ready holds
    /// nothing, and was deleted), or a resume of such a workspace that failed for a reason
    /// that may pass (a supervisor not up in time on a loaded machine) or that waits for the
    /// provider's room (a quota): resuming it again keeps the work and the one machine,
    /// where a new sandbox would leave the woken one (or, on Kubernetes, delete the
    /// workspace's claim).
    pub fn resumable(&self) -> EngineResult<bool> {
        Ok(self
            .store
            .scalar(
                &format!("SELECT COUNT(*) FROM sandbox WHERE id = 1 AND {RESUMABLE}"),
                &[],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0)
            > 0)
    }

    /// Whether the workspace the current sandbox runs on has been ready (with this sandbox,
    /// or with the one it resumes): it holds the session's work.
    pub(crate) fn workspace_ready(&self) -> EngineResult<bool> {
        Ok(self
            .store
            .scalar(
                "SELECT COUNT(*) FROM sandbox WHERE id = 1 AND ready_at IS NOT NULL",
                &[],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0)
            > 0)
    }

    /// The sandbox `sandbox_id` being spawned resumes the last one's workspace on a new
    /// machine: it holds the session's work from the start.
    pub fn workspace_carried(&self, sandbox_id: &str, now: i64) -> EngineResult<()> {
        self.store
            .execute(
                "UPDATE sandbox SET ready_at = COALESCE(ready_at, ?) WHERE id = 1 AND sandbox_id = ?",
                &[now.into(), sandbox_id.into()],
            )
            .map_err(internal)?;
        Ok(())
    }

    /// Nothing was left to resume: the sandbox `sandbox_id` being spawned starts empty.
    pub fn workspace_lost(&self, sandbox_id: &str) -> EngineResult<()> {
        self.store
            .execute(
                "UPDATE sandbox SET ready_at = NULL WHERE id = 1 AND sandbox_id = ?",
                &[sandbox_id.into()],
            )
            .map_err(internal)?;
        Ok(())
    }

    /// The sandbox `sandbox_id` being spawned gets a new id and token (a resume in place
    /// found its machine gone and a fresh one is made instead).
    pub fn renew_identity(&self, sandbox_id: &str, now: i64) -> EngineResult<Option<SpawnTicket>> {
        if !self
            .sandbox_row()?
            .is_some_and(|r| r.sandbox_id == sandbox_id && r.status == "spawning")
        {
            return Ok(None);
        }
        let ticket = SpawnTicket {
            sandbox_id: ids::new_id("sb"),
            token: ids::new_secret(),
        };
        self.store
            .execute(
                "UPDATE sandbox SET sandbox_id = ?, token_hash = ?, ready_at = NULL, updated_at = ? WHERE id = 1",
                &[
                    ticket.sandbox_id.as_str().into(),
                    ids::hash_secret(&ticket.token).into(),
                    now.into(),
                ],
            )
            .map_err(internal)?;
        Ok(Some(ticket))
    }

    /// Whether the last spawn failed less than [`SPAWN_COOLDOWN_MS`] ago (as
    /// [`Self::begin_spawn`] checks).
    pub fn spawn_cooling_down(&self, now: i64) -> EngineResult<bool> {
        let failed_at = self
            .store
            .scalar(
                "SELECT updated_at FROM sandbox WHERE id = 1 AND status = 'failed'",
                &[],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64());
        Ok(cooling_down(failed_at, now))
    }

    /// How long a session waiting for room waits before asking again: the first in line
    /// 5 s after its first refusal, doubling with each one since, at most
    /// [`CAPACITY_BACKSTOP_MS`]; one with others ahead of it the backstop (a stop wakes
    /// whoever waited longest, in turn).
    pub fn capacity_retry_ms(&self) -> EngineResult<i64> {
        let row = self
            .store
            .query(
                "SELECT COUNT(*), COALESCE(MAX(ahead), 0) FROM capacity_waits",
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .next();
        let (waits, ahead) = match row {
            Some(row) => {
                let mut cols = crate::store::Cols::new(row);
                (cols.i64().map_err(internal)?, cols.i64().map_err(internal)?)
            }
            None => (0, 0),
        };
        if ahead > 0 {
            return Ok(CAPACITY_BACKSTOP_MS);
        }
        let doublings = (waits - 1).clamp(0, 10) as u32;
        Ok((CAPACITY_RETRY_MS << doublings).min(CAPACITY_BACKSTOP_MS))
    }

    /// How many sessions began to wait for room before this one (from the waiters in D1).
    pub fn waiters_ahead(&self, ahead: i64) -> EngineResult<()> {
        self.store
            .execute("UPDATE capacity_waits SET ahead = ?", &[ahead.into()])
            .map_err(internal)?;
        Ok(())
    }

    /// Since when the session has waited for room (its first refusal since it last had a
    /// sandbox), if it waits: its place among the waiters.
    pub fn waiting_since(&self) -> EngineResult<Option<i64>> {
        Ok(self
            .store
            .scalar("SELECT MIN(at) FROM capacity_waits", &[])
            .map_err(internal)?
            .and_then(|v| v.as_i64()))
    }

    /// Room was made elsewhere (another session's sandbox stopped): a session waiting for
    /// room asks at once. `false` when it does not wait (its place can go).
    pub fn capacity_freed(&self) -> EngineResult<(bool, Effects)> {
        let waiting =
            self.sandbox_row()?.is_some_and(|r| r.status == WAITING) && self.needs_sandbox()?;
        let mut fx = Effects::none();
        fx.spawn_wanted = waiting;
        Ok((waiting, fx))
    }

    /// The provider took the spawn: wait for the sandbox to connect. The waits for room
    /// end; `true` when there were some (the session leaves the waiters).
    pub fn capacity_found(&self) -> EngineResult<bool> {
        let waited = self.waiting_since()?.is_some();
        if waited {
            self.store
                .execute("DELETE FROM capacity_waits", &[])
                .map_err(internal)?;
        }
        Ok(waited)
    }

    /// The provider took the spawn: wait for the sandbox to connect.
    pub fn spawn_accepted(&self, sandbox_id: &str, now: i64) -> EngineResult<Effects> {
        if !self
            .sandbox_row()?
            .is_some_and(|r| r.sandbox_id == sandbox_id && r.status == "spawning")
        {
            return Ok(Effects::none());
        }
        self.set_sandbox_status("connecting", None, now)
            .map_err(internal)?;
        self.status_effects("connecting", None, now)
    }

    /// A snapshot of a live sandbox begins: clients see `snapshotting` until it ends.
    pub fn snapshot_started(
        &self,
        sandbox_id: &str,
        now: i64,
    ) -> EngineResult<(Option<String>, Effects)> {
        let Some(row) = self.sandbox_row()?.filter(|r| r.sandbox_id == sandbox_id) else {
            return Ok((None, Effects::none()));
        };
        let mut fx = Effects::none();
        if !matches!(row.status.as_str(), "ready" | "stopped") {
            return Ok((None, fx));
        }
        self.set_sandbox_status("snapshotting", None, now)
            .map_err(internal)?;
        fx.broadcast(ServerMessage::SandboxStatus {
            status: "snapshotting".into(),
            error: None,
        });
        Ok((Some(row.status), fx))
    }

    /// The snapshot ended: back to where the sandbox was.
    pub fn snapshot_ended(
        &self,
        sandbox_id: &str,
        previous: &str,
        now: i64,
    ) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        if self
            .sandbox_row()?
            .is_some_and(|r| r.sandbox_id == sandbox_id && r.status == "snapshotting")
        {
            self.set_sandbox_status(previous, None, now)
                .map_err(internal)?;
            fx.broadcast(ServerMessage::SandboxStatus {
                status: previous.into(),
                error: None,
            });
            // A prompt that arrived meanwhile runs now: on the sandbox, or, when it was
            // stopping, on the next one.
            fx.merge(self.dispatch_next(now)?);
            fx.spawn_wanted = self.needs_sandbox()?;
        }
        Ok(fx)
    }

    /// The provider exposed the sandbox's ports: keep the URLs and tell the clients.
    pub fn set_tunnel_urls(
        &self,
        sandbox_id: &str,
        urls: &std::collections::BTreeMap<String, String>,
    ) -> EngineResult<Effects> {
        if urls.is_empty()
            || self
                .sandbox_row()?
                .is_none_or(|r| r.sandbox_id != sandbox_id)
        {
            return Ok(Effects::none());
        }
        let json = serde_json::to_string(urls)
            .map_err(|e| inspect_protocol::ApiError::internal(e.to_string()))?;
        self.store
            .execute(
                "UPDATE sandbox SET tunnel_urls = ? WHERE id = 1",
                &[json.into()],
            )
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::TunnelUrls {
            tunnel_urls: urls.clone(),
        });
        Ok(fx)
    }

    /// Whether a person may ask for `port` of the running sandbox now (a port, and room for
    /// one more): the sandbox's id, and whether the port is exposed already.
    pub fn check_new_port(&self, port: u16) -> EngineResult<(String, bool)> {
        use inspect_protocol::limits::MAX_TUNNEL_PORTS;
        if port == 0 {
            return Err(inspect_protocol::ApiError::bad_request("0 is not a port"));
        }
        let live = self.sandbox_row()?.filter(SandboxRow::is_live);
        let Some(sandbox) = live else {
            return Err(inspect_protocol::ApiError::conflict(
                "the session's sandbox is not running; send a prompt to start it, then open a port",
            ));
        };
        let urls = self.tunnel_urls()?;
        if urls.contains_key(&port.to_string()) {
            return Ok((sandbox.sandbox_id, true));
        }
        if urls.len() >= MAX_TUNNEL_PORTS {
            return Err(inspect_protocol::ApiError::conflict(format!(
                "the sandbox already exposes {MAX_TUNNEL_PORTS} ports"
            )));
        }
        Ok((sandbox.sandbox_id, false))
    }

    /// The provider exposed one more port of the running sandbox for `by`: kept with the
    /// others, told to the clients, and on the timeline.
    pub fn add_tunnel_url(
        &self,
        sandbox_id: &str,
        port: u16,
        url: &str,
        by: &inspect_protocol::session::Participant,
        now: i64,
    ) -> EngineResult<Effects> {
        if self
            .sandbox_row()?
            .is_none_or(|r| r.sandbox_id != sandbox_id)
        {
            return Err(inspect_protocol::ApiError::conflict(
                "the sandbox stopped while its port was opened",
            ));
        }
        let mut urls = self.tunnel_urls()?;
        urls.insert(port.to_string(), url.to_owned());
        let mut fx = self.set_tunnel_urls(sandbox_id, &urls)?;
        let mut data = serde_json::Map::new();
        data.insert("action".into(), "opened".into());
        data.insert("port".into(), port.into());
        data.insert("by".into(), by.name.clone().into());
        let event =
            super::timeline::append(self.store, "port", None, data, now).map_err(internal)?;
        fx.broadcast(ServerMessage::SandboxEvent { event });
        Ok(fx)
    }

    /// The current sandbox's tunnel URLs, port → URL.
    pub fn tunnel_urls(&self) -> EngineResult<std::collections::BTreeMap<String, String>> {
        Ok(self
            .store
            .scalar("SELECT tunnel_urls FROM sandbox WHERE id = 1", &[])
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or_default())
    }

    /// The current sandbox's workspace is not one to come back to: a failure that would
    /// repeat unchanged, or one inside it while it started.
    pub(crate) fn forget_workspace(&self) -> crate::store::StoreResult<()> {
        self.store
            .execute("UPDATE sandbox SET ready_at = NULL WHERE id = 1", &[])
    }

    /// The provider refused or failed the spawn. Only failures that would repeat
    /// unchanged (not `transient` ones: timeouts, 5xx) count towards giving up.
    pub fn spawn_failed(&self, sandbox_id: &str, error: &str, now: i64) -> EngineResult<Effects> {
        self.spawn_failed_as(sandbox_id, error, false, now)
    }

    /// [`Self::spawn_failed`], saying whether the failure was transient.
    pub fn spawn_failed_as(
        &self,
        sandbox_id: &str,
        error: &str,
        transient: bool,
        now: i64,
    ) -> EngineResult<Effects> {
        if self
            .sandbox_row()?
            .is_none_or(|r| r.sandbox_id != sandbox_id)
        {
            return Ok(Effects::none());
        }
        self.set_sandbox_status("failed", Some(error), now)
            .map_err(internal)?;
        if !transient {
            self.store
                .execute("INSERT INTO spawn_failures (at) VALUES (?)", &[now.into()])
                .map_err(internal)?;
            // A refusal that would repeat unchanged: the workspace is not resumed again.
            self.forget_workspace().map_err(internal)?;
        }
        let mut fx = self.status_effects("failed", Some(error), now)?;
        if self.given_up(now)? {
            fx.broadcast(ServerMessage::SandboxError {
                error: format!(
                    "{} spawns failed in 5 minutes; not retrying until someone sends a prompt",
                    MAX_SPAWN_FAILURES
                ),
            });
            fx.merge(
                self.fail_waiting_callbacks(&format!("no sandbox could be started: {error}"), now)?,
            );
        }
        fx.broadcast(ServerMessage::SandboxError {
            error: error.into(),
        });
        Ok(fx)
    }

    /// The provider had no room for the sandbox: the session waits (not a failure, no
    /// give-up count) and asks again after [`Self::capacity_retry_ms`], saying why.
    pub fn spawn_waiting(&self, sandbox_id: &str, reason: &str, now: i64) -> EngineResult<Effects> {
        if self
            .sandbox_row()?
            .is_none_or(|r| r.sandbox_id != sandbox_id)
        {
            return Ok(Effects::none());
        }
        self.store
            .execute("INSERT INTO capacity_waits (at) VALUES (?)", &[now.into()])
            .map_err(internal)?;
        self.set_sandbox_status(WAITING, Some(reason), now)
            .map_err(internal)?;
        self.status_effects(
            WAITING,
            Some(&format!("waiting for room to start a sandbox: {reason}")),
            now,
        )
    }

    /// Checks a connecting sandbox's credentials. Tokens are compared in constant time.
    pub fn authenticate_sandbox(
        &self,
        token: &str,
        sandbox_id: &str,
    ) -> EngineResult<Result<(), SandboxRefusal>> {
        if !self.exists()? {
            return Ok(Err(SandboxRefusal::NoSession));
        }
        let Some(row) = self.sandbox_row()? else {
            return Ok(Err(SandboxRefusal::BadToken));
        };
        let presented = ids::hash_secret(token);
        let token_ok = row
            .token_hash
            .as_deref()
            .is_some_and(|h| ids::hashes_equal(h, &presented));
        if !token_ok {
            return Ok(Err(SandboxRefusal::BadToken));
        }
        if row.sandbox_id != sandbox_id {
            return Ok(Err(SandboxRefusal::WrongSandbox));
        }
        if !LIVE_STATES.contains(&row.status.as_str()) {
            return Ok(Err(SandboxRefusal::Gone));
        }
        Ok(Ok(()))
    }

    /// A sandbox socket was accepted. Older sandbox sockets are closed: one sandbox speaks.
    pub fn sandbox_opened(&self, ws_id: &str, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        for old in self.socket_ids(Some(KIND_SANDBOX))? {
            fx.close(&old, 1000, "replaced by a newer connection");
            fx.merge(self.socket_closed(&old)?);
        }
        self.store
            .atomically(|| {
                self.store.execute(
                    "INSERT OR REPLACE INTO ws_client_mapping (ws_id, kind, connected_at, subscribed_at) VALUES (?, ?, ?, ?)",
                    &[ws_id.into(), KIND_SANDBOX.into(), now.into(), now.into()],
                )?;
                self.store.execute(
                    "UPDATE sandbox SET connected_at = ?, last_heartbeat = ?, disconnected_at = NULL WHERE id = 1",
                    &[now.into(), now.into()],
                )
            })
            .map_err(internal)?;
        // A sandbox that reconnects while ready gets the queue again; one that was running
        // gets its prompt again, since the command may have gone down with the old socket
        // (the processing prompt stays processing until the sandbox completes it).
        match self.sandbox_status()?.as_str() {
            "ready" => fx.merge(self.dispatch_next(now)?),
            "running" => fx.merge(self.redeliver_processing()?),
            _ => {}
        }
        Ok(fx)
    }
}
