//! `GET /budgets`, `PUT /budgets`, `DELETE /budgets`: the monthly budgets that stop spend,
//! and how much of each the caller (or, for an admin, any person) has used this month. The
//! check itself runs where new work arrives (`inspect_runtime::budgets::check`; [`refusal`]
//! for the control plane's own, which also tells a person whose budget is 80 % used).

use crate::caller::Caller;
use crate::db::{self, num};
use inspect_protocol::budgets::{Budget, BudgetList, BudgetMetric, BudgetScope};
use inspect_protocol::people::Role;
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::budgets;
use worker::Env;

/// The budgets that apply to `person` (the caller unless an admin names another), with
/// this month's use; an admin also sees every budget set, each with the deployment's use.
pub async fn list(
    env: &Env,
    caller: &Caller,
    person: Option<&str>,
    now: i64,
) -> Result<BudgetList, ApiError> {
    let admin = crate::people::role_of(env, caller).await?.0 == Role::Admin;
    let whose = match person {
        Some(p) if p != caller.actor.user_id && !admin => {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "another person's budgets are for admins to see",
            ))
        }
        Some(p) => p,
        None => caller.actor.user_id.as_str(),
    };
    let all = budgets::all(env).await?;
    Ok(BudgetList {
        budgets: budgets::statuses_of(env, &all, whose, now).await?,
    })
}

/// `PUT /budgets` (admins): sets a budget, or changes its limit at once.
pub async fn put(env: &Env, caller: &Caller, body: &[u8], now: i64) -> Result<Budget, ApiError> {
    let budget: Budget = crate::http::body_as(body)?;
    let budget = budget.check()?;
    db::run(
        env,
        "INSERT INTO budgets (scope, subject, metric, monthly_limit, updated_by, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(scope, subject, metric) DO UPDATE SET monthly_limit = excluded.monthly_limit, updated_by = excluded.updated_by, updated_at = excluded.updated_at",
        &[
            budget.scope.as_str().into(),
            budget.subject.as_str().into(),
            budget.metric.as_str().into(),
            budget.monthly_limit.into(),
            caller.actor.user_id.as_str().into(),
            num(now),
        ],
    )
    .await?;
    budgets::forget();
    inspect_runtime::log::emit(
        inspect_runtime::log::LogLine::info("budgets", "set")
            .actor(&caller.actor.user_id)
            .with("scope", budget.scope.as_str())
            .with("metric", budget.metric.as_str()),
    );
    Ok(budget)
}

/// `DELETE /budgets?scope=&metric=&subject=` (admins).
pub async fn delete(env: &Env, pairs: &[(String, String)]) -> Result<(), ApiError> {
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let scope = match get("scope") {
        Some("deployment") => BudgetScope::Deployment,
        Some("person") => BudgetScope::Person,
        _ => return Err(ApiError::bad_request("scope is deployment or person")),
    };
    let metric = get("metric")
        .and_then(BudgetMetric::parse)
        .ok_or_else(|| ApiError::bad_request("metric is sandbox_hours, tokens or cost_usd"))?;
    let subject = match scope {
        BudgetScope::Deployment => "",
        BudgetScope::Person => get("subject").unwrap_or_default(),
    };
    let gone = db::run(
        env,
        "DELETE FROM budgets WHERE scope = ?1 AND subject = ?2 AND metric = ?3",
        &[
            scope.as_str().into(),
            subject.into(),
            metric.as_str().into(),
        ],
    )
    .await?;
    budgets::forget();
    if gone == 0 {
        return Err(ApiError::not_found("no such budget"));
    }
    Ok(())
}

/// Why new work of `user_id`'s is refused (a budget of theirs is spent), if it is. A person
/// whose budget is 80 % used is told once a month (never holding the work up on a failure).
pub(crate) async fn refusal(env: &Env, user_id: &str, now: i64) -> Option<ApiError> {
    let (checked, nearly) = budgets::check_noting(env, user_id, now).await;
    if !nearly.is_empty() {
        if let Err(e) = crate::inbox::budget_nearly_spent(env, user_id, &nearly, now).await {
            inspect_runtime::log::emit(
                inspect_runtime::log::LogLine::warn("inbox", "budget_not_told")
                    .actor(user_id)
                    .detail(e.message),
            );
        }
    }
    checked.err()
}
