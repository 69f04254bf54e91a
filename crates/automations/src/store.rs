//! Automations and their runs in D1 (`migrations/0009_automations.sql`). Each step that
//! must happen once is one statement: a firing is claimed by inserting its run under a
//! unique (automation, concurrency key); a run is finished by the one update that moves it
//! out of `starting`/`running`; the failure count moves in SQL.

use crate::rules;
use inspect_protocol::automations::{
    Automation, AutomationOrigin, AutomationRequest, AutomationStatus, Run, RunSession, RunStatus,
    RunTrigger, TriggerType, FAILURES_BEFORE_PAUSE, RUN_TIMEOUT_MS,
};
use inspect_protocol::session::Actor;
use inspect_protocol::ApiError;
use inspect_runtime::d1::{all, first, num, opt, run};
use serde::Deserialize;
use worker::Env;

/// An automation as kept: what the API shows, the actor its sessions are made as, and its
/// key's hash.
#[derive(Debug, Clone)]
pub struct Stored {
    pub automation: Automation,
    pub actor: Actor,
    pub webhook_key_hash: Option<String>,
    /// A Sentry trigger's client secret, sealed.
    pub secret_sealed: Option<String>,
    /// The Worker's address when it was last saved.
    pub origin: String,
}

#[derive(Deserialize)]
struct Row {
    id: String,
    settings: String,
    enabled: f64,
    paused_reason: Option<String>,
    consecutive_failures: f64,
    next_run_at: Option<f64>,
    webhook_key_hash: Option<String>,
    secret_sealed: Option<String>,
    created_by: String,
    owner: String,
    origin: String,
    created_at: f64,
    updated_at: f64,
}

const COLUMNS: &str = "id, settings, enabled, paused_reason, consecutive_failures, next_run_at, webhook_key_hash, secret_sealed, created_by, owner, origin, created_at, updated_at";

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(e.to_string())
}

impl Row {
    fn into_stored(self) -> Result<Stored, ApiError> {
        let settings: AutomationRequest = serde_json::from_str(&self.settings).map_err(internal)?;
        let actor: Actor = serde_json::from_str(&self.created_by).map_err(internal)?;
        let failures = self.consecutive_failures as i64;
        let status = match (self.enabled > 0.0, failures) {
            (false, _) => AutomationStatus::Paused,
            (true, 0) => AutomationStatus::Enabled,
            (true, _) => AutomationStatus::Degraded,
        };
        let webhook_path = match settings.trigger_type {
            TriggerType::Webhook => Some(format!("/webhooks/automation/{}", self.id)),
            TriggerType::Sentry => Some(format!("/webhooks/sentry/{}", self.id)),
            TriggerType::Schedule
            | TriggerType::SlackChannel
            | TriggerType::LinearIssue
            | TriggerType::GithubEvent => None,
        };
        Ok(Stored {
            automation: Automation {
                id: self.id,
                settings,
                status,
                paused_reason: self.paused_reason,
                consecutive_failures: failures,
                next_run_at: self.next_run_at.map(|t| t as i64),
                webhook_path,
                created_by: self.owner,
                created_at: self.created_at as i64,
                updated_at: self.updated_at as i64,
            },
            actor,
            webhook_key_hash: self.webhook_key_hash,
            secret_sealed: self.secret_sealed,
            origin: self.origin,
        })
    }
}

fn json_text(v: &impl serde::Serialize) -> Result<String, ApiError> {
    serde_json::to_string(v).map_err(internal)
}

fn opt_num(v: Option<i64>) -> worker::wasm_bindgen::JsValue {
    v.map_or(worker::wasm_bindgen::JsValue::NULL, num)
}

/// A new automation, as it is saved.
pub struct NewAutomation<'a> {
    pub id: &'a str,
    pub settings: &'a AutomationRequest,
    /// Who made it: its sessions are created as them.
    pub actor: &'a Actor,
    pub key_hash: Option<&'a str>,
    /// A Sentry trigger's client secret, sealed.
    pub secret_sealed: Option<&'a str>,
    pub next_run_at: Option<i64>,
    pub origin: &'a str,
}

/// Saves a new automation.
pub async fn insert(env: &Env, new: NewAutomation<'_>, now: i64) -> Result<(), ApiError> {
    run(
        env,
        "INSERT INTO automations (id, name, trigger_type, settings, next_run_at, webhook_key_hash, created_by, owner, created_at, updated_at, origin, secret_sealed)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, ?10, ?11)",
        &[
            new.id.into(),
            new.settings.name.as_str().into(),
            new.settings.trigger_type.as_str().into(),
            json_text(new.settings)?.into(),
            opt_num(new.next_run_at),
            opt(new.key_hash),
            json_text(new.actor)?.into(),
            new.actor.user_id.as_str().into(),
            num(now),
            new.origin.into(),
            opt(new.secret_sealed),
        ],
    )
    .await?;
    Ok(())
}

/// One automation that was not deleted.
pub async fn get(env: &Env, id: &str) -> Result<Option<Stored>, ApiError> {
    let row: Option<Row> = first(
        env,
        &format!("SELECT {COLUMNS} FROM automations WHERE id = ?1 AND deleted_at IS NULL"),
        &[id.into()],
    )
    .await?;
    row.map(Row::into_stored).transpose()
}

/// Whether an automation of that id was ever made (deleted ones too: their runs are kept).
pub async fn ever_made(env: &Env, id: &str) -> Result<bool, ApiError> {
    #[derive(Deserialize)]
    struct One {
        #[allow(dead_code)]
        id: String,
    }
    let row: Option<One> = first(
        env,
        "SELECT id FROM automations WHERE id = ?1",
        &[id.into()],
    )
    .await?;
    Ok(row.is_some())
}

/// Every automation that was not deleted, newest first.
pub async fn list(env: &Env) -> Result<Vec<Automation>, ApiError> {
    let rows: Vec<Row> = all(
        env,
        &format!(
            "SELECT {COLUMNS} FROM automations WHERE deleted_at IS NULL ORDER BY created_at DESC"
        ),
        &[],
    )
    .await?;
    rows.into_iter()
        .map(|r| r.into_stored().map(|s| s.automation))
        .collect()
}

/// Saves new settings (and the schedule's next firing, unless paused).
pub async fn update(
    env: &Env,
    id: &str,
    settings: &AutomationRequest,
    next_run_at: Option<i64>,
    secret_sealed: Option<&str>,
    origin: &str,
    now: i64,
) -> Result<bool, ApiError> {
    Ok(run(
        env,
        "UPDATE automations SET name = ?2, trigger_type = ?3, settings = ?4,
            next_run_at = CASE WHEN enabled = 1 THEN ?5 ELSE NULL END, updated_at = ?6, origin = ?7,
            secret_sealed = COALESCE(?8, secret_sealed)
         WHERE id = ?1 AND deleted_at IS NULL",
        &[
            id.into(),
            settings.name.as_str().into(),
            settings.trigger_type.as_str().into(),
            json_text(settings)?.into(),
            opt_num(next_run_at),
            num(now),
            origin.into(),
            opt(secret_sealed),
        ],
    )
    .await?
        > 0)
}

/// Deletes an automation (its runs are kept).
pub async fn delete(env: &Env, id: &str, now: i64) -> Result<bool, ApiError> {
    Ok(run(
        env,
        "UPDATE automations SET deleted_at = ?2, enabled = 0, next_run_at = NULL, webhook_key_hash = NULL, secret_sealed = NULL
         WHERE id = ?1 AND deleted_at IS NULL",
        &[id.into(), num(now)],
    )
    .await?
        > 0)
}

/// Pauses (with why) or resumes (from `next_run_at`, the failure count reset).
pub async fn set_enabled(
    env: &Env,
    id: &str,
    enabled: bool,
    reason: Option<&str>,
    next_run_at: Option<i64>,
    now: i64,
) -> Result<bool, ApiError> {
    let changed = if enabled {
        run(
            env,
            "UPDATE automations SET enabled = 1, paused_reason = NULL, consecutive_failures = 0, next_run_at = ?2, updated_at = ?3
             WHERE id = ?1 AND deleted_at IS NULL",
            &[id.into(), opt_num(next_run_at), num(now)],
        )
        .await?
    } else {
        run(
            env,
            "UPDATE automations SET enabled = 0, paused_reason = ?2, next_run_at = NULL, updated_at = ?3
             WHERE id = ?1 AND deleted_at IS NULL",
            &[id.into(), opt(reason), num(now)],
        )
        .await?
    };
    Ok(changed > 0)
}

/// Replaces a webhook's key hash.
pub async fn set_key(env: &Env, id: &str, key_hash: &str, now: i64) -> Result<bool, ApiError> {
    Ok(run(
        env,
        "UPDATE automations SET webhook_key_hash = ?2, updated_at = ?3
         WHERE id = ?1 AND deleted_at IS NULL AND trigger_type = 'webhook'",
        &[id.into(), key_hash.into(), num(now)],
    )
    .await?
        > 0)
}

/// Every automation (not deleted) of a trigger type, oldest first.
pub async fn of_trigger(env: &Env, trigger: TriggerType) -> Result<Vec<Stored>, ApiError> {
    let rows: Vec<Row> = all(
        env,
        &format!(
            "SELECT {COLUMNS} FROM automations WHERE trigger_type = ?1 AND deleted_at IS NULL ORDER BY created_at, id"
        ),
        &[trigger.as_str().into()],
    )
    .await?;
    rows.into_iter().map(Row::into_stored).collect()
}

/// Enabled schedules due at `now`, oldest due first.
pub async fn due(env: &Env, now: i64, limit: usize) -> Result<Vec<Stored>, ApiError> {
    let rows: Vec<Row> = all(
        env,
        &format!(
            "SELECT {COLUMNS} FROM automations
             WHERE enabled = 1 AND deleted_at IS NULL AND next_run_at IS NOT NULL AND next_run_at <= ?1
             ORDER BY next_run_at LIMIT ?2"
        ),
        &[num(now), num(limit as i64)],
    )
    .await?;
    rows.into_iter().map(Row::into_stored).collect()
}

/// Moves a schedule's next firing from `from` to `to` (taking the slot `from`).
const ADVANCE: &str = "UPDATE automations SET next_run_at = ?3 WHERE id = ?1 AND next_run_at = ?2";

/// How claiming a firing went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The run is ours to start.
    Started,
    /// Recorded as skipped (another run is active).
    Skipped,
    /// This firing (its concurrency key) was claimed before.
    Duplicate,
}

/// The reason a concurrent firing is skipped.
pub const CONCURRENT_RUN: &str = "another run of this automation is still active";

/// What a firing does while another run of its automation is active.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// It runs too (events with their own idempotency keys).
    Allowed,
    /// It is recorded as skipped (a schedule's slot, an event without a key).
    Skipped,
    /// It is refused and not recorded (a person's trigger-now: they are told at once).
    Refused,
}

/// The statement that inserts a run under its concurrency key (?1 run, ?2 automation, ?3
/// trigger, ?4 key, ?5 now) when `guard` holds.
fn claim_sql(guard: &str) -> String {
    format!(
        "INSERT INTO automation_runs (id, automation_id, trigger, concurrency_key, status, created_at)
         SELECT ?1, ?2, ?3, ?4, 'starting', ?5 WHERE {guard}
         ON CONFLICT (automation_id, concurrency_key) DO NOTHING"
    )
}

/// No other run of the automation is active.
const NONE_ACTIVE: &str =
    "NOT EXISTS (SELECT 1 FROM automation_runs WHERE automation_id = ?2 AND status IN ('starting', 'running'))";

/// Claims a firing: its run is inserted under its concurrency key, in one statement that
/// also checks, unless overlap is allowed, that no other run of the automation is active.
pub async fn claim(
    env: &Env,
    run_id: &str,
    automation_id: &str,
    trigger: RunTrigger,
    concurrency_key: &str,
    overlap: Overlap,
    now: i64,
) -> Result<Claim, ApiError> {
    let guard = match overlap {
        Overlap::Allowed => "1",
        Overlap::Skipped | Overlap::Refused => NONE_ACTIVE,
    };
    let args = [
        run_id.into(),
        automation_id.into(),
        trigger.as_str().into(),
        concurrency_key.into(),
        num(now),
    ];
    let claimed = run(env, &claim_sql(guard), &args).await?;
    let firing = Firing {
        run_id,
        automation_id,
        trigger,
        concurrency_key,
        now,
    };
    claimed_or_skipped(env, claimed > 0, overlap, firing).await
}

/// A firing being claimed.
struct Firing<'a> {
    run_id: &'a str,
    automation_id: &'a str,
    trigger: RunTrigger,
    concurrency_key: &'a str,
    now: i64,
}

/// How a claim went, from whether its insert wrote: a firing skipped for another active run
/// is recorded as skipped (once per key).
async fn claimed_or_skipped(
    env: &Env,
    claimed: bool,
    overlap: Overlap,
    f: Firing<'_>,
) -> Result<Claim, ApiError> {
    Ok(match overlap {
        _ if claimed => Claim::Started,
        Overlap::Allowed => Claim::Duplicate,
        Overlap::Refused => Claim::Skipped,
        Overlap::Skipped => {
            let recorded = skip(
                env,
                f.run_id,
                f.automation_id,
                f.trigger,
                f.concurrency_key,
                CONCURRENT_RUN,
                f.now,
            )
            .await?;
            if recorded {
                Claim::Skipped
            } else {
                Claim::Duplicate
            }
        }
    })
}

/// One schedule's slot to take: the slot (`from`, the schedule's `next_run_at` as read),
/// where its next firing moves (`to`), and the run that would take it.
#[derive(Debug, Clone, Copy)]
pub struct SlotTake<'a> {
    pub automation_id: &'a str,
    pub from: i64,
    pub to: Option<i64>,
    pub run_id: &'a str,
}

/// Schedules' slots taken (each next firing moved from `from` to `to`) and their runs
/// claimed, all in one batch (one round trip, one transaction, its statements in order): for
/// each slot its run is inserted while the schedule still stands at `from` and no other run
/// of it is active, then the schedule moves on. A slot taken while another run goes on is
/// recorded as skipped (a call of its own: rare). Each slot's outcome, in order: `None`
/// when it was not there to take (another tick took it, or the schedule changed), and then
/// nothing was claimed for it; an error when its skip could not be recorded. A failed batch
/// takes none of them.
pub async fn take_slots(
    env: &Env,
    takes: &[SlotTake<'_>],
    now: i64,
) -> Result<Vec<Result<Option<Claim>, ApiError>>, ApiError> {
    if takes.is_empty() {
        return Ok(Vec::new());
    }
    let guard = format!(
        "EXISTS (SELECT 1 FROM automations WHERE id = ?2 AND next_run_at = ?6) AND {NONE_ACTIVE}"
    );
    let claim_sql = claim_sql(&guard);
    let keys: Vec<String> = takes
        .iter()
        .map(|t| format!("schedule:{}", t.from))
        .collect();
    let params: Vec<[worker::wasm_bindgen::JsValue; 6]> = takes
        .iter()
        .zip(&keys)
        .map(|(t, key)| {
            [
                t.run_id.into(),
                t.automation_id.into(),
                RunTrigger::Schedule.as_str().into(),
                key.as_str().into(),
                num(now),
                num(t.from),
            ]
        })
        .collect();
    let advances: Vec<[worker::wasm_bindgen::JsValue; 3]> = takes
        .iter()
        .map(|t| [t.automation_id.into(), num(t.from), opt_num(t.to)])
        .collect();
    let statements: Vec<(&str, &[worker::wasm_bindgen::JsValue])> = params
        .iter()
        .zip(&advances)
        .flat_map(|(claim, advance)| [(claim_sql.as_str(), &claim[..]), (ADVANCE, &advance[..])])
        .collect();
    let changed = inspect_runtime::d1::run_batch(env, &statements).await?;
    let mut outcomes = Vec::with_capacity(takes.len());
    for (i, (t, key)) in takes.iter().zip(&keys).enumerate() {
        if changed.get(2 * i + 1).copied().unwrap_or(0) == 0 {
            outcomes.push(Ok(None));
            continue;
        }
        let firing = Firing {
            run_id: t.run_id,
            automation_id: t.automation_id,
            trigger: RunTrigger::Schedule,
            concurrency_key: key,
            now,
        };
        let claimed = changed.get(2 * i).copied().unwrap_or(0) > 0;
        outcomes.push(
            claimed_or_skipped(env, claimed, Overlap::Skipped, firing)
                .await
                .map(Some),
        );
    }
    Ok(outcomes)
}

/// Records a firing that is not run, with why (once per concurrency key).
pub async fn skip(
    env: &Env,
    run_id: &str,
    automation_id: &str,
    trigger: RunTrigger,
    concurrency_key: &str,
    reason: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let recorded = run(
        env,
        "INSERT INTO automation_runs (id, automation_id, trigger, concurrency_key, status, reason, created_at, finished_at)
         VALUES (?1, ?2, ?3, ?4, 'skipped', ?5, ?6, ?6)
         ON CONFLICT (automation_id, concurrency_key) DO NOTHING",
        &[
            run_id.into(),
            automation_id.into(),
            trigger.as_str().into(),
            concurrency_key.into(),
            reason.into(),
            num(now),
        ],
    )
    .await?;
    Ok(recorded > 0)
}

/// Records one repository's session of a run (?1 run, ?2 repository, ?3 session, ?4 status,
/// ?5 error).
const ADD_SESSION: &str =
    "INSERT INTO automation_run_sessions (run_id, repository, session_id, status, error)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (run_id, repository) DO UPDATE SET session_id = ?3, status = ?4, error = ?5";

/// Records one repository's session of a run (or why it could not start).
pub async fn add_session(
    env: &Env,
    run_id: &str,
    repository: &str,
    session_id: Option<&str>,
    status: RunStatus,
    error: Option<&str>,
) -> Result<(), ApiError> {
    run(
        env,
        ADD_SESSION,
        &[
            run_id.into(),
            repository.into(),
            opt(session_id),
            status.as_str().into(),
            opt(error),
        ],
    )
    .await?;
    Ok(())
}

/// Marks a run `running` (?1) once its sessions were made (unless they all ended already).
const MARK_RUNNING: &str =
    "UPDATE automation_runs SET status = 'running' WHERE id = ?1 AND status = 'starting'";

/// Marks a run `running` once its sessions were made (unless they all ended already).
pub async fn mark_running(env: &Env, run_id: &str) -> Result<(), ApiError> {
    run(env, MARK_RUNNING, &[run_id.into()]).await?;
    Ok(())
}

/// The statements that record a run's session as made and running, written in one batch
/// with the session's index row; for a run's only session (a run of one repository, or of
/// none), the run as running too.
pub fn session_statements(
    run_id: &str,
    repository: &str,
    session_id: &str,
    sole: bool,
) -> Vec<(&'static str, Vec<worker::wasm_bindgen::JsValue>)> {
    let session = vec![
        run_id.into(),
        repository.into(),
        session_id.into(),
        RunStatus::Running.as_str().into(),
        worker::wasm_bindgen::JsValue::NULL,
    ];
    let mut statements = vec![(ADD_SESSION, session)];
    if sole {
        statements.push((MARK_RUNNING, vec![run_id.into()]));
    }
    statements
}

/// A session's prompt ended: its run learns how, and the run ends with its last session.
pub async fn record_outcome(
    env: &Env,
    origin: &AutomationOrigin,
    success: bool,
    error: Option<&str>,
    now: i64,
) -> Result<(), ApiError> {
    let status = if success {
        RunStatus::Completed
    } else {
        RunStatus::Failed
    };
    run(
        env,
        "UPDATE automation_run_sessions SET status = ?3, error = ?4
         WHERE run_id = ?1 AND repository = ?2 AND status IN ('starting', 'running')",
        &[
            origin.run_id.as_str().into(),
            origin.repository.as_str().into(),
            status.as_str().into(),
            opt(error.filter(|_| !success)),
        ],
    )
    .await?;
    finish_run(env, &origin.run_id, now).await
}

#[derive(Deserialize)]
struct SessionRow {
    run_id: String,
    repository: String,
    session_id: Option<String>,
    status: String,
    error: Option<String>,
}

impl SessionRow {
    fn into_session(self) -> RunSession {
        RunSession {
            repository: self.repository,
            session_id: self.session_id,
            status: RunStatus::parse(&self.status).unwrap_or(RunStatus::Failed),
            error: self.error,
        }
    }
}

/// Ends a run when none of its sessions is still going: its status from theirs, and its
/// automation's failure count (and pause) from that. Only the update that ends the run
/// moves the count, so two sessions ending at once count once.
pub async fn finish_run(env: &Env, run_id: &str, now: i64) -> Result<(), ApiError> {
    let sessions: Vec<SessionRow> = all(
        env,
        "SELECT run_id, repository, session_id, status, error FROM automation_run_sessions WHERE run_id = ?1",
        &[run_id.into()],
    )
    .await?;
    let statuses: Vec<RunStatus> = sessions
        .into_iter()
        .map(|s| s.into_session().status)
        .collect();
    let status = rules::run_status(&statuses);
    if statuses.is_empty() || status.is_active() {
        return Ok(());
    }
    let reason = match status {
        RunStatus::Failed => Some("every session failed"),
        RunStatus::PartialFailure => Some("some sessions failed"),
        _ => None,
    };
    let ended = run(
        env,
        "UPDATE automation_runs SET status = ?2, reason = COALESCE(reason, ?3), finished_at = ?4
         WHERE id = ?1 AND status IN ('starting', 'running')",
        &[run_id.into(), status.as_str().into(), opt(reason), num(now)],
    )
    .await?;
    if ended == 0 {
        return Ok(());
    }
    let failed = matches!(status, RunStatus::Failed | RunStatus::PartialFailure);
    run(
        env,
        "UPDATE automations SET consecutive_failures = CASE WHEN ?2 = 1 THEN consecutive_failures + 1 ELSE 0 END
         WHERE id = (SELECT automation_id FROM automation_runs WHERE id = ?1)",
        &[run_id.into(), num(failed as i64)],
    )
    .await?;
    if failed {
        run(
            env,
            "UPDATE automations SET enabled = 0, next_run_at = NULL, paused_reason = ?2, updated_at = ?3
             WHERE id = (SELECT automation_id FROM automation_runs WHERE id = ?1)
               AND enabled = 1 AND consecutive_failures >= ?4",
            &[
                run_id.into(),
                rules::paused_after_failures().into(),
                num(now),
                num(FAILURES_BEFORE_PAUSE),
            ],
        )
        .await?;
    }
    Ok(())
}

/// Runs still going after [`RUN_TIMEOUT_MS`]: their unfinished sessions fail as timed out
/// and the runs end. How many.
pub async fn time_out(env: &Env, now: i64) -> Result<usize, ApiError> {
    #[derive(Deserialize)]
    struct Id {
        id: String,
    }
    let stale: Vec<Id> = all(
        env,
        "SELECT id FROM automation_runs WHERE status IN ('starting', 'running') AND created_at < ?1 LIMIT 100",
        &[num(now - RUN_TIMEOUT_MS)],
    )
    .await?;
    for r in &stale {
        run(
            env,
            "UPDATE automation_run_sessions SET status = 'failed', error = ?2
             WHERE run_id = ?1 AND status IN ('starting', 'running')",
            &[
                r.id.as_str().into(),
                "timed out: still running after 90 minutes".into(),
            ],
        )
        .await?;
        // A run whose start was cut short (the Worker went away) has no session to end it.
        run(
            env,
            "INSERT INTO automation_run_sessions (run_id, repository, session_id, status, error)
             SELECT ?1, '', NULL, 'failed', ?2
             WHERE NOT EXISTS (SELECT 1 FROM automation_run_sessions WHERE run_id = ?1)",
            &[
                r.id.as_str().into(),
                "timed out: no session started within 90 minutes".into(),
            ],
        )
        .await?;
        finish_run(env, &r.id, now).await?;
    }
    Ok(stale.len())
}

#[derive(Deserialize)]
struct RunRow {
    id: String,
    automation_id: String,
    trigger: String,
    status: String,
    reason: Option<String>,
    created_at: f64,
    finished_at: Option<f64>,
}

/// An automation's runs, newest first, each with its sessions.
pub async fn runs(env: &Env, automation_id: &str, limit: usize) -> Result<Vec<Run>, ApiError> {
    let rows: Vec<RunRow> = all(
        env,
        "SELECT id, automation_id, trigger, status, reason, created_at, finished_at FROM automation_runs
         WHERE automation_id = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2",
        &[automation_id.into(), num(limit as i64)],
    )
    .await?;
    let sessions: Vec<SessionRow> = all(
        env,
        "SELECT run_id, repository, session_id, status, error FROM automation_run_sessions
         WHERE run_id IN (SELECT id FROM automation_runs WHERE automation_id = ?1
                          ORDER BY created_at DESC, id DESC LIMIT ?2)
         ORDER BY repository",
        &[automation_id.into(), num(limit as i64)],
    )
    .await?;
    let mut by_run: std::collections::HashMap<String, Vec<RunSession>> = Default::default();
    for s in sessions {
        by_run
            .entry(s.run_id.clone())
            .or_default()
            .push(s.into_session());
    }
    Ok(rows
        .into_iter()
        .map(|r| Run {
            sessions: by_run.remove(&r.id).unwrap_or_default(),
            id: r.id,
            automation_id: r.automation_id,
            trigger: RunTrigger::parse(&r.trigger).unwrap_or(RunTrigger::Manual),
            status: RunStatus::parse(&r.status).unwrap_or(RunStatus::Failed),
            reason: r.reason,
            created_at: r.created_at as i64,
            finished_at: r.finished_at.map(|t| t as i64),
        })
        .collect())
}
