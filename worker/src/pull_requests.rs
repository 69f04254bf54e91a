//! Pull requests kept current: a change on GitHub (a webhook delivery) reaches every session
//! that recorded the pull request, whose object updates its artifact in place (clients
//! hear it live; the sessions index follows).

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
    }
    let rows: Vec<Row> = db::all(
        env,
        "SELECT session_id FROM session_pull_requests WHERE owner = ?1 AND repo = ?2 AND number = ?3",
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
