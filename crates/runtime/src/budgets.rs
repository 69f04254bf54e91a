//! Monthly budgets, checked before new work (a prompt, an automation's run) by whichever
//! Worker takes it: the budgets are kept per isolate for half a minute (none set: no D1 read
//! at all for most prompts), the month's use summed from the sessions index, and a spent
//! budget is read again from D1 before it refuses, so an admin's raise counts at once.

use crate::d1;
use inspect_protocol::budgets::{self, Budget, BudgetMetric, BudgetScope, BudgetStatus};
use inspect_protocol::ApiError;
use serde::Deserialize;
use std::cell::{Cell, RefCell};
use worker::Env;

const KEEP_MS: i64 = 30_000;

thread_local! {
    static KEPT: RefCell<Option<(i64, Vec<Budget>)>> = const { RefCell::new(None) };
}

#[derive(Deserialize)]
struct Row {
    scope: String,
    subject: String,
    metric: String,
    monthly_limit: f64,
}

/// Every budget set, from D1.
pub async fn all(env: &Env) -> Result<Vec<Budget>, ApiError> {
    let rows: Vec<Row> = d1::all(
        env,
        "SELECT scope, subject, metric, monthly_limit FROM budgets ORDER BY scope, subject, metric",
        &[],
    )
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            Some(Budget {
                scope: match r.scope.as_str() {
                    "deployment" => BudgetScope::Deployment,
                    "person" => BudgetScope::Person,
                    _ => return None,
                },
                subject: r.subject,
                metric: BudgetMetric::parse(&r.metric)?,
                monthly_limit: r.monthly_limit,
            })
        })
        .collect())
}

async fn kept(env: &Env, now: i64) -> Result<Vec<Budget>, ApiError> {
    if let Some(b) = KEPT.with(|k| {
        k.borrow()
            .as_ref()
            .filter(|(at, _)| now - at < KEEP_MS)
            .map(|(_, b)| b.clone())
    }) {
        return Ok(b);
    }
    let fresh = all(env).await?;
    forget_after(now, fresh.clone());
    Ok(fresh)
}

fn forget_after(now: i64, budgets: Vec<Budget>) {
    KEPT.with(|k| *k.borrow_mut() = Some((now, budgets)));
}

/// Drops what this isolate kept (after a budget is set here).
pub fn forget() {
    KEPT.with(|k| *k.borrow_mut() = None);
}

#[derive(Deserialize)]
struct Used {
    sandbox_ms: f64,
    tokens: f64,
    cost_micros: f64,
}

async fn used(env: &Env, since: i64, user_id: Option<&str>) -> Result<Used, ApiError> {
    let mine = if user_id.is_some() {
        "AND created_by = ?2"
    } else {
        ""
    };
    let sql = format!(
        "SELECT TOTAL(sandbox_ms) AS sandbox_ms, TOTAL(tokens_in + tokens_out) AS tokens,
                TOTAL(cost_micros) AS cost_micros
         FROM sessions WHERE created_at >= ?1 {mine}"
    );
    let mut args = vec![d1::num(since)];
    if let Some(u) = user_id {
        args.push(u.into());
    }
    d1::first(env, &sql, &args)
        .await?
        .ok_or_else(|| ApiError::internal("the usage sum returned nothing"))
}

/// How much of each budget that applies to `user_id` this month has used (sessions made
/// this month, by their index rows).
pub async fn statuses_of(
    env: &Env,
    budgets: &[Budget],
    user_id: &str,
    now: i64,
) -> Result<Vec<BudgetStatus>, ApiError> {
    let applying = budgets::applying(budgets, user_id);
    if applying.is_empty() {
        return Ok(Vec::new());
    }
    let (start, end) = budgets::month(now);
    let mut person = None;
    let mut deployment = None;
    let mut out = Vec::new();
    for b in applying {
        let u = match b.scope {
            BudgetScope::Person => {
                if person.is_none() {
                    person = Some(used(env, start, Some(user_id)).await?);
                }
                person.as_ref()
            }
            BudgetScope::Deployment => {
                if deployment.is_none() {
                    deployment = Some(used(env, start, None).await?);
                }
                deployment.as_ref()
            }
        }
        .ok_or_else(|| ApiError::internal("usage not read"))?;
        let amount = match b.metric {
            BudgetMetric::SandboxHours => u.sandbox_ms / 3_600_000.0,
            BudgetMetric::Tokens => u.tokens,
            BudgetMetric::CostUsd => u.cost_micros / 1_000_000.0,
        };
        out.push(BudgetStatus {
            budget: b,
            used: amount,
            resets_at: end,
        });
    }
    Ok(out)
}

/// Whether any budget is set, as this isolate last knew it (the control plane's side).
pub async fn any(env: &Env, now: i64) -> bool {
    kept(env, now).await.is_ok_and(|b| !b.is_empty())
}

thread_local! {
    /// The session Worker's side: until when the control plane said no budget is set.
    static NONE_UNTIL: Cell<i64> = const { Cell::new(0) };
    /// Since when a check is being asked, if one is; and when an answer last said some
    /// budget is set.
    static ASKING_SINCE: Cell<Option<i64>> = const { Cell::new(None) };
    static BUDGETS_SEEN_AT: Cell<i64> = const { Cell::new(0) };
}

/// A check waits this long at most for one already being asked.
const ASK_WAIT_MS: i64 = 10_000;

/// The check being asked (dropped, answered or not: no longer asked).
struct Asking;

impl Drop for Asking {
    fn drop(&mut self) {
        ASKING_SINCE.with(|a| a.set(None));
    }
}

/// The session Worker's check: the control plane decides over the binding (the budgets'
/// sums live there); while it last said no budget is set, for half a minute, nothing is
/// asked. A check that comes while another is asked waits for its answer (a burst of
/// prompts asks once, not once each), looking again every few milliseconds: each object
/// wakes in its own context, and a wake-up sent from another object's would run this
/// one's work in that one's. A control plane that does not answer refuses nothing
/// (logged).
pub async fn check_over_binding(env: &Env, user_id: &str, now: i64) -> Result<(), ApiError> {
    let mut wait = 1;
    loop {
        let at = worker::Date::now().as_millis() as i64;
        if NONE_UNTIL.with(Cell::get) > at.max(now) {
            return Ok(());
        }
        // Budgets are set (an answer came since this check began): this person's own.
        if BUDGETS_SEEN_AT.with(Cell::get) >= now {
            break;
        }
        match ASKING_SINCE.with(Cell::get) {
            Some(since) if at - since < ASK_WAIT_MS => {
                worker::Delay::from(std::time::Duration::from_millis(wait)).await;
                wait = (wait * 2).min(16);
            }
            _ => break,
        }
    }
    ASKING_SINCE.with(|a| a.set(Some(now)));
    let _asking = Asking;
    ask_plane(env, user_id, now).await
}

/// The control plane's verdict for `user_id`; what it says of the budgets set is kept.
async fn ask_plane(env: &Env, user_id: &str, now: i64) -> Result<(), ApiError> {
    let call = inspect_protocol::plane::PlaneCall::BudgetCheck {
        user_id: user_id.to_owned(),
    };
    match crate::binding::ask_plane::<inspect_protocol::plane::BudgetVerdict>(env, &call).await {
        Ok(verdict) => {
            match verdict.any {
                false => NONE_UNTIL.with(|n| n.set(now + KEEP_MS)),
                true => BUDGETS_SEEN_AT.with(|b| b.set(worker::Date::now().as_millis() as i64)),
            }
            verdict.refused.map_or(Ok(()), Err)
        }
        Err(e) => {
            crate::log::emit(
                crate::log::LogLine::warn("budgets", "unasked")
                    .actor(user_id)
                    .detail(&e.message),
            );
            Ok(())
        }
    }
}

/// Refuses new work for `user_id` once a budget that applies to them is spent (429, which
/// budget, and when it resets). D1 not answering refuses nothing (it is logged): a budget
/// must not stop work it cannot read.
pub async fn check(env: &Env, user_id: &str, now: i64) -> Result<(), ApiError> {
    check_noting(env, user_id, now).await.0
}

/// [`check`], and the budgets that apply to `user_id` that are 80 % used but not spent
/// (from the same reading; none when one is spent or nothing could be read).
pub async fn check_noting(
    env: &Env,
    user_id: &str,
    now: i64,
) -> (Result<(), ApiError>, Vec<BudgetStatus>) {
    match spent(env, user_id, now).await {
        Ok((None, statuses)) => (
            Ok(()),
            statuses
                .into_iter()
                .filter(|s| s.nearly_spent() && !s.spent())
                .collect(),
        ),
        Ok((Some(refused), _)) => (Err(refused), Vec::new()),
        Err(e) => {
            crate::log::emit(
                crate::log::LogLine::warn("budgets", "unread")
                    .actor(user_id)
                    .detail(&e.message),
            );
            (Ok(()), Vec::new())
        }
    }
}

/// The refusal, if a budget is spent, with the statuses it was read from.
async fn spent(
    env: &Env,
    user_id: &str,
    now: i64,
) -> Result<(Option<ApiError>, Vec<BudgetStatus>), ApiError> {
    let budgets = kept(env, now).await?;
    if budgets.is_empty() {
        return Ok((None, Vec::new()));
    }
    let statuses = statuses_of(env, &budgets, user_id, now).await?;
    if budgets::refusal(&statuses, now).is_none() {
        return Ok((None, statuses));
    }
    // Before refusing, the budgets as they are now: an admin may have just raised one.
    let fresh = all(env).await?;
    forget_after(now, fresh.clone());
    let statuses = statuses_of(env, &fresh, user_id, now).await?;
    Ok((budgets::refusal(&statuses, now), statuses))
}
