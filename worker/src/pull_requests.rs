//! Pull requests kept current: a change on GitHub (a webhook delivery, or the cron step's
//! check of the ones still open) reaches every session that recorded the pull request,
//! whose object updates its artifact in place (clients hear it live; the index follows).

use crate::db;
use crate::http::ApiResult;
use crate::objects;
use inspect_protocol::scm::PullRequestChange;
use inspect_protocol::ApiError;
use serde::Deserialize;
use worker::{Env, Method};

/// Tells each session holding the pull request; how many were told.
pub async fn changed(env: &Env, change: &PullRequestChange) -> ApiResult<usize> {
    #[derive(Deserialize)]
    struct Row {
        session_id: String,
        created_by: Option<String>,
        title: Option<String>,
    }
    let rows: Vec<Row> = db::all(
        env,
        "SELECT p.session_id, s.created_by, s.title FROM session_pull_requests p
         LEFT JOIN sessions s ON s.id = p.session_id
         WHERE p.owner = ?1 AND p.repo = ?2 AND p.number = ?3",
        &[
            change.owner.as_str().into(),
            change.repo.as_str().into(),
            db::num(change.number),
        ],
    )
    .await?;
    let body = serde_json::to_vec(change).map_err(|e| ApiError::internal(e.to_string()))?;
    for r in &rows {
        let resp = objects::call_object(
            env,
            &r.session_id,
            Method::Post,
            "/pull-request",
            "",
            None,
            &body,
        )
        .await?;
        objects::object_answer(resp, 200).await?;
        if let Some(owner) = &r.created_by {
            // The inbox is told after the session; its failure loses the session nothing.
            if let Err(e) = tell_owner(env, change, &r.session_id, owner, r.title.as_deref()).await
            {
                inspect_runtime::log::emit(
                    inspect_runtime::log::LogLine::warn("inbox", "pull_request_not_told")
                        .session(&r.session_id)
                        .detail(e.message),
                );
            }
        }
    }
    if let Some(state) = &change.state {
        db::run(
            env,
            "UPDATE session_pull_requests SET state = ?4, updated_at = ?5, checked_at = ?5
             WHERE owner = ?1 AND repo = ?2 AND number = ?3",
            &[
                change.owner.as_str().into(),
                change.repo.as_str().into(),
                db::num(change.number),
                state.as_str().into(),
                db::num(change.at),
            ],
        )
        .await?;
    }
    Ok(rows.len())
}

/// The session's owner hears of a merge, a close or a review in their inbox.
async fn tell_owner(
    env: &Env,
    change: &PullRequestChange,
    session_id: &str,
    owner: &str,
    title: Option<&str>,
) -> ApiResult<()> {
    let pr = format!("{}/{}#{}", change.owner, change.repo, change.number);
    let (what, key) = match (&change.state, &change.review) {
        (Some(state), _) if matches!(state.as_str(), "merged" | "closed") => {
            (format!("{pr} was {state}"), format!("pr:{pr}:{state}"))
        }
        (_, Some(review)) => {
            let by = change.reviewer.as_deref().unwrap_or("someone");
            let verdict = review.replace('_', " ");
            (
                format!("{pr}: {by} reviewed ({verdict})"),
                format!("pr:{pr}:review:{by}:{}", change.at),
            )
        }
        _ => return Ok(()),
    };
    let url = format!("/sessions/{session_id}");
    let link = crate::inbox::link_to(env, &url);
    let item = crate::inbox::NewItem {
        kind: inspect_protocol::inbox::InboxKind::PullRequest,
        session_id,
        title: title.unwrap_or(&pr),
        detail: &what,
        url: &url,
        key: &key,
    };
    crate::inbox::add(env, owner, &item, &link, change.at).await
}

/// Pull requests asked about per cron step (every 30 minutes): a missed delivery is caught
/// within a step or a few, and GitHub's rate limit is spent sparingly.
const CHECKED_PER_STEP: i64 = 50;
/// A pull request still open is asked about again after this long.
const RECHECK_MS: i64 = 30 * 60 * 1000;

/// The cron step: pull requests still open or draft that were not heard of for a while are
/// asked about (with the App's token); a change GitHub's delivery did not bring reaches
/// their sessions as if it had. How many changed.
pub async fn refresh(env: &Env, now: i64) -> ApiResult<usize> {
    #[derive(Deserialize)]
    struct Row {
        owner: String,
        repo: String,
        number: i64,
        state: String,
    }
    let rows: Vec<Row> = db::all(
        env,
        "SELECT owner, repo, number, MIN(state) AS state FROM session_pull_requests
         WHERE state IN ('open', 'draft') AND checked_at <= ?1
         GROUP BY owner, repo, number ORDER BY MIN(checked_at) LIMIT ?2",
        &[db::num(now - RECHECK_MS), db::num(CHECKED_PER_STEP)],
    )
    .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let token = inspect_github::api::app_token(env, now).await?;
    let mut changed_count = 0;
    for r in rows {
        let pull = inspect_github::api::get_pull(env, &token, &r.owner, &r.repo, r.number).await?;
        let state = match &pull {
            Some(p) => p.display_state(),
            // Gone (the repository deleted, or no longer the App's to see): asked no more.
            None => "closed",
        };
        if state == r.state {
            db::run(
                env,
                "UPDATE session_pull_requests SET checked_at = ?4 WHERE owner = ?1 AND repo = ?2 AND number = ?3",
                &[
                    r.owner.as_str().into(),
                    r.repo.as_str().into(),
                    db::num(r.number),
                    db::num(now),
                ],
            )
            .await?;
            continue;
        }
        let change = PullRequestChange {
            owner: r.owner,
            repo: r.repo,
            number: r.number,
            state: Some(state.to_owned()),
            review: None,
            reviewer: None,
            at: now,
        };
        changed(env, &change).await?;
        changed_count += 1;
    }
    Ok(changed_count)
}
