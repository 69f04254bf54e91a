//! `GET /usage`: what sessions used, summed by person, repository or week from the rows
//! each session's object keeps current in the D1 index. An admin sees everyone's; anyone
//! else their own sessions.

use crate::caller::Caller;
use crate::db;
use crate::usage_query::UsageQuery;
use inspect_protocol::people::Role;
use inspect_protocol::usage::{UsageGroup, UsageReport, UsageRow};
use inspect_protocol::ApiError;
use serde::Deserialize;
use worker::Env;

#[derive(Deserialize)]
struct Row {
    key: Option<String>,
    label: Option<String>,
    sessions: f64,
    prompts: f64,
    tool_calls: f64,
    tokens_in: f64,
    tokens_out: f64,
    cost_micros: f64,
    sandbox_ms: f64,
    pull_requests: f64,
    merged: f64,
}

pub async fn report(env: &Env, caller: &Caller, q: &UsageQuery) -> Result<UsageReport, ApiError> {
    let everyone = crate::people::role_of(env, caller).await?.0 == Role::Admin;
    let (key, label) = match q.by {
        UsageGroup::Person => ("created_by", "MAX(created_by_name)"),
        UsageGroup::Repository => (
            "COALESCE(repo_owner || '/' || repo_name, '')",
            "COALESCE(repo_owner || '/' || repo_name, '(none)')",
        ),
        UsageGroup::Week => (
            "date(created_at / 1000, 'unixepoch', 'weekday 0', '-6 days')",
            "date(created_at / 1000, 'unixepoch', 'weekday 0', '-6 days')",
        ),
        UsageGroup::Source => ("source", "source"),
    };
    let mine = if everyone { "" } else { "AND created_by = ?3" };
    let sql = format!(
        "SELECT {key} AS key, {label} AS label, COUNT(*) AS sessions,
                TOTAL(prompts) AS prompts, TOTAL(tool_calls) AS tool_calls,
                TOTAL(tokens_in) AS tokens_in, TOTAL(tokens_out) AS tokens_out,
                TOTAL(cost_micros) AS cost_micros, TOTAL(sandbox_ms) AS sandbox_ms,
                TOTAL(pr_url IS NOT NULL) AS pull_requests, TOTAL(pr_state = 'merged') AS merged
         FROM sessions WHERE created_at >= ?1 AND created_at < ?2 {mine}
         GROUP BY 1 ORDER BY 1 LIMIT 1000"
    );
    let mut args = vec![db::num(q.since), db::num(q.until)];
    if !everyone {
        args.push(caller.actor.user_id.as_str().into());
    }
    let rows: Vec<Row> = db::all(env, &sql, &args).await?;
    Ok(UsageReport {
        by: q.by,
        since: q.since,
        until: q.until,
        everyone,
        rows: rows
            .into_iter()
            .map(|r| {
                let key = r.key.unwrap_or_default();
                UsageRow {
                    label: r.label.unwrap_or_else(|| key.clone()),
                    key,
                    sessions: r.sessions as i64,
                    prompts: r.prompts as i64,
                    tool_calls: r.tool_calls as i64,
                    tokens_in: r.tokens_in as i64,
                    tokens_out: r.tokens_out as i64,
                    cost_micros: r.cost_micros as i64,
                    sandbox_ms: r.sandbox_ms as i64,
                    pull_requests: r.pull_requests as i64,
                    merged: r.merged as i64,
                }
            })
            .collect(),
    })
}
