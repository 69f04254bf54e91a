//! Every deadline of a session, served by the Durable Object's one alarm: the earliest
//! wins, and the handler is idempotent (alarms run at least once and may repeat, so each
//! check looks at the clock and the stored state, never at why the alarm was set).

use super::sandbox::{MAX_SPAWN_FAILURES, SPAWN_COOLDOWN_MS, WAITING};
use super::sockets::KIND_SANDBOX;
use super::{internal, Effects, EngineResult, Session};
use crate::store::{Cols, Store};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::sandbox::SandboxCommand;

/// A sandbox that has not connected (`ready`) this long after its spawn is given up on.
pub const CONNECTING_TIMEOUT_MS: i64 = 120_000;
/// A sandbox with no heartbeat for this long is stale.
pub const HEARTBEAT_STALE_MS: i64 = 90_000;
/// While a sandbox is expected to connect, the provider is asked this often whether it
/// still runs (a Pod that cannot pull its image, a machine that failed), so the session
/// says why at once rather than at the connect deadline.
pub const CONNECT_CHECK_MS: i64 = 10_000;
/// After the sandbox's socket drops, how long it has to reconnect before the provider is
/// asked whether its process still lives.
pub const RECONNECT_GRACE_MS: i64 = 15_000;
/// A ready sandbox idle this long is stopped (its work is already committed and pushed;
/// the next prompt starts a new one from the session branch).
pub const INACTIVITY_MS: i64 = 10 * 60_000;
/// Extra idle time granted while someone is connected.
pub const INACTIVITY_WATCHED_EXTRA_MS: i64 = 5 * 60_000;
pub const FAILURE_WINDOW_MS: i64 = 5 * 60_000;
/// The longest one prompt may run.
pub const EXECUTION_TIMEOUT_MS: i64 = 90 * 60_000;
/// A snapshot still `snapshotting` after this long is taken as abandoned (the object that
/// waited for it was restarted or evicted): the sandbox goes back to where it was.
pub const SNAPSHOT_TIMEOUT_MS: i64 = 60_000;

/// What the alarm decided beyond plain effects.
#[derive(Debug, Default, PartialEq)]
pub struct AlarmOutcome {
    pub fx: Effects,
    /// Ask the provider whether this sandbox still runs; report back with
    /// [`Session::sandbox_lost`] if it does not.
    pub check_provider: Option<String>,
    /// Ask the provider to keep this sandbox: a turn still runs in it
    /// ([`inspect_provider::EXTEND_EVERY_MS`] after its start or its last extension).
    pub extend_sandbox: Option<String>,
    /// Ask the provider to sign this running sandbox's links anew (they were signed
    /// [`inspect_provider::LINKS_REFRESH_MS`] ago), and keep the new ones.
    pub refresh_links: Option<String>,
}

struct SandboxTimes {
    sandbox_id: String,
    status: String,
    spawned_at: Option<i64>,
    last_heartbeat: Option<i64>,
    disconnected_at: Option<i64>,
    last_activity: Option<i64>,
    updated_at: i64,
    extended_at: Option<i64>,
    links_at: Option<i64>,
}

/// The columns [`SandboxTimes::read`] reads, in its order.
const SANDBOX_TIMES: &str = "sandbox_id, status, spawned_at, last_heartbeat, disconnected_at, last_activity, updated_at, extended_at, links_at";

impl SandboxTimes {
    fn read(c: &mut Cols) -> crate::store::StoreResult<SandboxTimes> {
        Ok(SandboxTimes {
            sandbox_id: c.opt_string()?.unwrap_or_default(),
            status: c.string()?,
            spawned_at: c.opt_i64()?,
            last_heartbeat: c.opt_i64()?,
            disconnected_at: c.opt_i64()?,
            last_activity: c.opt_i64()?,
            updated_at: c.i64()?,
            extended_at: c.opt_i64()?,
            links_at: c.opt_i64()?,
        })
    }
}

/// See [`Session::deadline_inputs`].
struct DeadlineInputs {
    ready_timeout_ms: Option<i64>,
    idle_timeout_ms: Option<i64>,
    first_unsubscribed: Option<i64>,
    processing_started: Option<i64>,
    sandbox: Option<SandboxTimes>,
}

impl<S: Store> Session<'_, S> {
    fn sandbox_times(&self) -> EngineResult<Option<SandboxTimes>> {
        self.store
            .query(
                &format!("SELECT {SANDBOX_TIMES} FROM sandbox WHERE id = 1"),
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .next()
            .map(|row| SandboxTimes::read(&mut Cols::new(row)))
            .transpose()
            .map_err(internal)
    }

    /// What every deadline depends on, in one read: the session's budgets, its sandbox's
    /// times, the running prompt's start and the first client still to subscribe. `None`
    /// when no session is stored here.
    fn deadline_inputs(&self) -> EngineResult<Option<DeadlineInputs>> {
        let Some(row) = self
            .store
            .query(
                "SELECT s.ready_timeout_ms, s.idle_timeout_ms,
                    (SELECT MIN(connected_at) FROM ws_client_mapping WHERE kind = ? AND subscribed_at IS NULL),
                    (SELECT started_at FROM messages WHERE status = 'processing' LIMIT 1),
                    b.sandbox_id, b.status, b.spawned_at, b.last_heartbeat, b.disconnected_at, b.last_activity, b.updated_at, b.extended_at, b.links_at
                 FROM session s LEFT JOIN sandbox b ON b.id = 1 WHERE s.id = 1",
                &[super::sockets::KIND_CLIENT.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        let mut c = Cols::new(row);
        let mut read = || -> crate::store::StoreResult<DeadlineInputs> {
            let ready_timeout_ms = c.opt_i64()?;
            let idle_timeout_ms = c.opt_i64()?;
            let first_unsubscribed = c.opt_i64()?;
            let processing_started = c.opt_i64()?;
            // A session without a sandbox row has NULL in every sandbox column.
            let sandbox = match c.ahead_is_null(1) {
                true => None,
                false => Some(SandboxTimes::read(&mut c)?),
            };
            Ok(DeadlineInputs {
                ready_timeout_ms,
                idle_timeout_ms,
                first_unsubscribed,
                processing_started,
                sandbox,
            })
        };
        read().map(Some).map_err(internal)
    }

    fn processing_started(&self) -> EngineResult<Option<(String, i64)>> {
        let row = self
            .store
            .query(
                "SELECT id, started_at FROM messages WHERE status = 'processing' LIMIT 1",
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .next();
        match row {
            Some(r) => {
                let mut c = Cols::new(r);
                let id = c.string().map_err(internal)?;
                Ok(c.opt_i64().map_err(internal)?.map(|t| (id, t)))
            }
            None => Ok(None),
        }
    }

    /// Every pending deadline, earliest first is what the alarm is set to.
    pub fn next_deadline(&self) -> EngineResult<Option<i64>> {
        let Some(inputs) = self.deadline_inputs()? else {
            return Ok(None);
        };
        let mut all = vec![inputs
            .first_unsubscribed
            .map(|t| t + inspect_protocol::limits::SUBSCRIBE_DEADLINE_MS)];
        if let Some(t) = &inputs.sandbox {
            match t.status.as_str() {
                "spawning" | "connecting" | "syncing" | "setup" | "start" => {
                    let budget = ready_budget(inputs.ready_timeout_ms);
                    all.push(t.spawned_at.map(|s| s + budget));
                    if t.status == "connecting" {
                        all.push(Some(t.updated_at + CONNECT_CHECK_MS));
                    }
                }
                "ready" | "running" | "snapshotting" => {
                    if t.status == "snapshotting" {
                        all.push(Some(t.updated_at + SNAPSHOT_TIMEOUT_MS));
                    }
                    all.push(t.last_heartbeat.map(|h| h + HEARTBEAT_STALE_MS));
                    all.push(t.disconnected_at.map(|d| d + RECONNECT_GRACE_MS));
                    all.push(Self::links_due(t));
                    if t.status == "ready" {
                        all.push(Some(self.idle_deadline_with(t, inputs.idle_timeout_ms)?));
                    }
                }
                "failed" if self.needs_sandbox()? && !self.given_up(t.updated_at)? => {
                    all.push(Some(t.updated_at + SPAWN_COOLDOWN_MS))
                }
                WAITING if self.needs_sandbox()? => {
                    all.push(Some(t.updated_at + self.capacity_retry_ms()?))
                }
                _ => {}
            }
        }
        if let Some(started) = inputs.processing_started {
            all.push(Some(started + EXECUTION_TIMEOUT_MS));
            if let Some(t) = &inputs.sandbox {
                all.push(Self::extension_due(t));
            }
        }
        Ok(all.into_iter().flatten().min())
    }

    /// When a running sandbox's links are next to be signed anew: a period after they
    /// were signed (at its start, or the last time).
    fn links_due(t: &SandboxTimes) -> Option<i64> {
        if !matches!(t.status.as_str(), "ready" | "running") {
            return None;
        }
        t.links_at
            .or(t.spawned_at)
            .map(|at| at + inspect_provider::LINKS_REFRESH_MS)
    }

    /// When a connected sandbox is next to be extended while a turn runs in it: a period
    /// after its start or its last extension.
    fn extension_due(t: &SandboxTimes) -> Option<i64> {
        if !matches!(t.status.as_str(), "ready" | "running") {
            return None;
        }
        t.extended_at
            .or(t.spawned_at)
            .map(|at| at + inspect_provider::EXTEND_EVERY_MS)
    }

    /// When a ready sandbox counts as idle: 10 minutes after its last activity, 5 more
    /// while anyone watches.
    fn idle_deadline(&self, t: &SandboxTimes) -> EngineResult<i64> {
        self.idle_deadline_with(t, self.configured_idle_timeout()?)
    }

    /// [`Self::idle_deadline`] with the session's idle timeout already read (`idle_timeout_ms`
    /// as stored: none, or not above 0, for the default).
    fn idle_deadline_with(
        &self,
        t: &SandboxTimes,
        idle_timeout_ms: Option<i64>,
    ) -> EngineResult<i64> {
        let since = t.last_activity.or(t.spawned_at).unwrap_or(t.updated_at);
        let watched = !self
            .socket_ids(Some(super::sockets::KIND_CLIENT))?
            .is_empty();
        let (idle, extra) = match idle_timeout_ms.filter(|ms| *ms > 0) {
            Some(ms) => (ms, ms / 2),
            None => (INACTIVITY_MS, INACTIVITY_WATCHED_EXTRA_MS),
        };
        Ok(since + idle + if watched { extra } else { 0 })
    }

    /// A deployment's own idle timeout (`SANDBOX_IDLE_TIMEOUT_SECONDS`), recorded when the
    /// session was made; while someone watches, half of it again.
    fn configured_idle_timeout(&self) -> EngineResult<Option<i64>> {
        Ok(self
            .store
            .scalar("SELECT idle_timeout_ms FROM session WHERE id = 1", &[])
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .filter(|ms| *ms > 0))
    }

    /// How long a sandbox has to become ready: the deployment's budget
    /// (`SANDBOX_READY_TIMEOUT_SECONDS`) recorded when the session was made, else
    /// [`CONNECTING_TIMEOUT_MS`].
    pub fn ready_timeout(&self) -> EngineResult<i64> {
        Ok(ready_budget(
            self.store
                .scalar("SELECT ready_timeout_ms FROM session WHERE id = 1", &[])
                .map_err(internal)?
                .and_then(|v| v.as_i64()),
        ))
    }

    /// What the provider last said of the sandbox on its way (scheduled, pulling, …).
    fn sandbox_progress_said(&self) -> EngineResult<Option<String>> {
        Ok(self
            .store
            .scalar("SELECT progress FROM sandbox WHERE id = 1", &[])
            .map_err(internal)?
            .and_then(|v| v.as_str().map(str::to_owned)))
    }

    /// The provider says how far the sandbox `sandbox_id`, not ready yet, has got (a Pod
    /// not scheduled, its image being pulled): said on the timeline when it changes, and
    /// in the failure if it never becomes ready.
    pub fn sandbox_progress(
        &self,
        sandbox_id: &str,
        progress: &str,
        now: i64,
    ) -> EngineResult<Effects> {
        let on_its_way = self.sandbox_times()?.is_some_and(|t| {
            t.sandbox_id == sandbox_id
                && matches!(
                    t.status.as_str(),
                    "spawning" | "connecting" | "syncing" | "setup" | "start"
                )
        });
        if !on_its_way || self.sandbox_progress_said()?.as_deref() == Some(progress) {
            return Ok(Effects::none());
        }
        self.store
            .execute(
                "UPDATE sandbox SET progress = ? WHERE id = 1",
                &[progress.into()],
            )
            .map_err(internal)?;
        self.sandbox_warning("sandbox", &format!("not ready yet: {progress}"), now)
    }

    /// Records what the deployment allows this session, at its creation, in one statement:
    /// how long its sandbox may idle, its budget to become ready, and the prompts a
    /// person may send a minute (`None`: the defaults).
    pub fn set_limits(&self, limits: &SessionLimits) -> EngineResult<()> {
        self.store
            .execute(
                "UPDATE session SET idle_timeout_ms = ?, ready_timeout_ms = ?, prompts_per_minute = ? WHERE id = 1",
                &[
                    limits.idle_timeout_ms.into(),
                    limits.ready_timeout_ms.into(),
                    limits.prompts_per_minute.map(i64::from).into(),
                ],
            )
            .map_err(internal)
    }

    /// Whether automatic spawn retries have given up: too many failures lately.
    pub fn given_up(&self, now: i64) -> EngineResult<bool> {
        let n = self
            .store
            .scalar(
                "SELECT COUNT(*) FROM spawn_failures WHERE at > ?",
                &[(now - FAILURE_WINDOW_MS).into()],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        Ok(n >= MAX_SPAWN_FAILURES)
    }

    /// Something happened in or for the sandbox: it is not idle.
    pub fn sandbox_active(&self, now: i64) -> EngineResult<()> {
        record_activity(self.store, now).map_err(internal)
    }

    /// An archived session keeps no sandbox: a running prompt fails, the sandbox is
    /// snapshotted (the session may be restored) and stopped.
    pub fn stop_for_archive(&self, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        let Some(row) = self.sandbox_row()? else {
            return Ok(fx);
        };
        if matches!(row.status.as_str(), "stopped" | "failed" | "stale") {
            return Ok(fx);
        }
        if let Some(m) = self.processing()? {
            fx.merge(self.complete(&m.id, false, Some("the session was archived".into()), now)?);
        }
        fx.merge(self.stop_idle(&row.sandbox_id, now)?);
        Ok(fx)
    }

    /// Stops an idle sandbox: shut down, provider stop, status `stopped`.
    fn stop_idle(&self, sandbox_id: &str, now: i64) -> EngineResult<Effects> {
        self.store
            .execute(
                "UPDATE sandbox SET status = 'stopped', updated_at = ? WHERE id = 1",
                &[now.into()],
            )
            .map_err(internal)?;
        self.store
            .execute(
                "UPDATE session SET sandbox_status = 'stopped' WHERE id = 1",
                &[],
            )
            .map_err(internal)?;
        self.terminals_gone(now).map_err(internal)?;
        let mut fx = Effects::none();
        fx.to_sandbox.push(SandboxCommand::Shutdown);
        fx.merge(self.status_effects("stopped", None, now)?);
        // Save the filesystem first: the next sandbox restores it.
        fx.snapshot_sandbox = Some(sandbox_id.to_owned());
        fx.stop_sandbox = Some(sandbox_id.to_owned());
        Ok(fx)
    }

    /// The sandbox's socket went: it has [`RECONNECT_GRACE_MS`] to come back.
    pub fn sandbox_disconnected(&self, now: i64) -> EngineResult<()> {
        if self.sandbox_connected()? {
            return Ok(());
        }
        self.store
            .execute(
                "UPDATE sandbox SET disconnected_at = ? WHERE id = 1",
                &[now.into()],
            )
            .map_err(internal)
    }

    /// Runs every check whose time has come.
    pub fn on_alarm(&self, now: i64) -> EngineResult<AlarmOutcome> {
        let mut out = AlarmOutcome {
            fx: self.expire_unsubscribed(now)?,
            check_provider: None,
            extend_sandbox: None,
            refresh_links: None,
        };
        if !self.exists()? {
            return Ok(out);
        }
        if let Some((id, started)) = self.processing_started()? {
            if now >= started + EXECUTION_TIMEOUT_MS {
                out.fx.to_sandbox.push(SandboxCommand::Stop {
                    message_id: Some(id.clone()),
                });
                out.fx.merge(self.complete(
                    &id,
                    false,
                    Some("the prompt ran past 90 minutes and was stopped".into()),
                    now,
                )?);
            }
        }
        let Some(t) = self.sandbox_times()? else {
            return Ok(out);
        };
        // A turn still runs: the vendor is asked to keep its sandbox past the lifetime it
        // gave at the start.
        if self.processing()?.is_some() && Self::extension_due(&t).is_some_and(|at| now >= at) {
            self.store
                .execute(
                    "UPDATE sandbox SET extended_at = ? WHERE id = 1",
                    &[now.into()],
                )
                .map_err(internal)?;
            out.extend_sandbox = Some(t.sandbox_id.clone());
        }
        if Self::links_due(&t).is_some_and(|at| now >= at) {
            self.store
                .execute(
                    "UPDATE sandbox SET links_at = ? WHERE id = 1",
                    &[now.into()],
                )
                .map_err(internal)?;
            out.refresh_links = Some(t.sandbox_id.clone());
        }
        let budget = self.ready_timeout()?;
        match t.status.as_str() {
            "spawning" | "connecting" | "syncing" | "setup" | "start"
                if t.spawned_at.is_some_and(|s| now >= s + budget) =>
            {
                // In the provider's words, where it said how far it got.
                let mut why = format!(
                    "the sandbox did not become ready within {} s",
                    budget / 1000
                );
                if let Some(p) = self.sandbox_progress_said()? {
                    why.push_str(&format!(" ({p})"));
                }
                out.fx.merge(self.sandbox_lost(&t.sandbox_id, &why, now)?);
            }
            "connecting" if now >= t.updated_at + CONNECT_CHECK_MS => {
                self.store
                    .execute(
                        "UPDATE sandbox SET updated_at = ? WHERE id = 1",
                        &[now.into()],
                    )
                    .map_err(internal)?;
                out.check_provider = Some(t.sandbox_id.clone());
            }
            "ready" if now >= self.idle_deadline(&t)? && self.processing()?.is_none() => {
                out.fx.merge(self.stop_idle(&t.sandbox_id, now)?);
            }
            "snapshotting" if now >= t.updated_at + SNAPSHOT_TIMEOUT_MS => {
                // Snapshots start from `ready` (a connected sandbox) or `stopped`.
                let previous = if self.sandbox_connected()? {
                    "ready"
                } else {
                    "stopped"
                };
                out.fx
                    .merge(self.snapshot_ended(&t.sandbox_id, previous, now)?);
            }
            "ready" | "running" | "snapshotting" => {
                if t.last_heartbeat
                    .is_some_and(|h| now >= h + HEARTBEAT_STALE_MS)
                {
                    out.fx.merge(self.sandbox_lost(
                        &t.sandbox_id,
                        "the sandbox stopped sending heartbeats",
                        now,
                    )?);
                } else if t
                    .disconnected_at
                    .is_some_and(|d| now >= d + RECONNECT_GRACE_MS)
                    && !self.sandbox_connected()?
                {
                    // Checked once per disconnection; the heartbeat deadline still stands.
                    self.store
                        .execute(
                            "UPDATE sandbox SET disconnected_at = NULL WHERE id = 1",
                            &[],
                        )
                        .map_err(internal)?;
                    out.check_provider = Some(t.sandbox_id.clone());
                }
            }
            "failed" if now >= t.updated_at + SPAWN_COOLDOWN_MS => {
                // Automatic retries end after repeated failures; a person's next prompt or
                // keystroke tries again.
                out.fx.spawn_wanted = self.needs_sandbox()? && !self.given_up(now)?;
            }
            WAITING if now >= t.updated_at + self.capacity_retry_ms()? => {
                out.fx.spawn_wanted = self.needs_sandbox()?;
            }
            _ => {}
        }
        Ok(out)
    }

    /// Gives up on a sandbox: it is stale, its running prompt fails with `reason`, its
    /// socket is closed (a late reconnect gets 410), the provider is asked to stop it, and
    /// waiting prompts get a new sandbox.
    pub fn sandbox_lost(&self, sandbox_id: &str, reason: &str, now: i64) -> EngineResult<Effects> {
        let Some(t) = self.sandbox_times()? else {
            return Ok(Effects::none());
        };
        let live = matches!(
            t.status.as_str(),
            "spawning"
                | "connecting"
                | "syncing"
                | "setup"
                | "start"
                | "ready"
                | "running"
                | "snapshotting"
        );
        if t.sandbox_id != sandbox_id || !live {
            return Ok(Effects::none());
        }
        // One that never became ready counts as a failed spawn: a provider that cannot
        // start it (a bad image) is not asked again and again without end.
        let never_ready = matches!(
            t.status.as_str(),
            "spawning" | "connecting" | "syncing" | "setup" | "start"
        );
        if never_ready {
            self.store
                .execute("INSERT INTO spawn_failures (at) VALUES (?)", &[now.into()])
                .map_err(internal)?;
        }
        // A sandbox resumed on a workspace that had been ready holds the session's work
        // even if it never became ready itself.
        let holds_work = self.workspace_ready()?;
        let mut fx = Effects::none();
        self.store
            .execute(
                "UPDATE sandbox SET status = 'stale', error = ?, disconnected_at = NULL, updated_at = ? WHERE id = 1",
                &[reason.into(), now.into()],
            )
            .map_err(internal)?;
        self.store
            .execute(
                "UPDATE session SET sandbox_status = 'stale' WHERE id = 1",
                &[],
            )
            .map_err(internal)?;
        self.terminals_gone(now).map_err(internal)?;
        if let Some(m) = self.processing()? {
            fx.merge(self.complete(&m.id, false, Some(reason.into()), now)?);
        }
        for ws in self.socket_ids(Some(KIND_SANDBOX))? {
            fx.close(&ws, 1011, "sandbox given up on");
            fx.merge(self.socket_closed(&ws)?);
        }
        fx.merge(self.status_effects("stale", Some(reason), now)?);
        fx.broadcast(ServerMessage::SandboxError {
            error: reason.into(),
        });
        // Its files may still be there (a crashed process leaves its directory): the
        // provider saves what it can reach before stopping it. One that never held the
        // session's work is not saved: its half-made workspace would become the snapshot
        // the next sandbox restores, in place of the last good one.
        let discard = never_ready && !holds_work;
        if !discard {
            fx.snapshot_sandbox = Some(sandbox_id.to_owned());
        }
        fx.stop_sandbox = Some(sandbox_id.to_owned());
        fx.discard_sandbox = discard;
        fx.spawn_wanted = self.needs_sandbox()? && !self.given_up(now)?;
        Ok(fx)
    }
}

/// The sandbox was active at `now` (the idle deadline counts from its latest activity).
pub(crate) fn record_activity(store: &impl Store, now: i64) -> crate::store::StoreResult<()> {
    store.execute(
        "UPDATE sandbox SET last_activity = MAX(COALESCE(last_activity, 0), ?) WHERE id = 1",
        &[now.into()],
    )
}

/// What the deployment allows a session ([`Session::set_limits`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionLimits {
    pub idle_timeout_ms: Option<i64>,
    pub ready_timeout_ms: Option<i64>,
    pub prompts_per_minute: Option<u32>,
}

/// A sandbox's time to become ready from the session's stored budget (none, or not above
/// 0: [`CONNECTING_TIMEOUT_MS`]).
fn ready_budget(ready_timeout_ms: Option<i64>) -> i64 {
    ready_timeout_ms
        .filter(|ms| *ms > 0)
        .unwrap_or(CONNECTING_TIMEOUT_MS)
}
