//! The agent's review of the pull request its prompt came from, submitted on GitHub for a
//! session (asked by its object over the binding): checked against the pull request's diff
//! as GitHub has it (`crate::review` decides), submitted once with the App's token, its
//! threads remembered in D1 so a reply continues the session.

use crate::{api, review};
use inspect_protocol::scm::{ReviewRequest, ReviewResult};
use inspect_protocol::{ApiError, ErrorCode};
use inspect_runtime::log::{emit, LogLine};
use worker::Env;

/// A pull request: owner, repository, number.
pub type PullRef<'a> = (&'a str, &'a str, i64);

pub async fn review(
    env: &Env,
    pr: PullRef<'_>,
    req: &ReviewRequest,
    (session_id, session_url): (&str, &str),
    now: i64,
) -> Result<ReviewResult, ApiError> {
    review::check(req)?;
    let (owner, repo, number) = pr;
    let token = api::app_token(env, now).await?;
    let pull = api::get_pull(env, &token, owner, repo, number)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("{owner}/{repo}#{number} is gone")))?;
    let settings = api::repo_settings(env, owner, repo).await?;
    let allowed = review::allowed_verdicts(&settings, &pull.user.login, &api::bot_login(env));
    let files = api::pull_files(env, &token, owner, repo, number).await?;
    let mut plan = review::plan(&files, req.comments.clone(), &req.body, req.event, &allowed);
    plan.body = review::with_footer(&plan.body, session_url);
    let submitted = match api::submit_review(env, &token, pr, &plan).await? {
        Ok(s) => s,
        // The head moved since the files were read, or GitHub resolves a line otherwise:
        // the same review with every comment in its body.
        Err((422, message)) if !plan.comments.is_empty() => {
            emit(
                LogLine::warn("review", "inline_comments_refused")
                    .session(session_id)
                    .with("repo", format!("{owner}/{repo}"))
                    .with("number", number)
                    .detail(&message),
            );
            plan = review::plan(&[], req.comments.clone(), &req.body, req.event, &allowed);
            plan.body = review::with_footer(&plan.body, session_url);
            api::submit_review(env, &token, pr, &plan)
                .await?
                .map_err(|(status, message)| refused(status, &message))?
        }
        Err((status, message)) => return Err(refused(status, &message)),
    };
    let inline = plan.comments.len() as u32;
    if inline > 0 {
        remember_threads(env, &token, pr, submitted.id, session_id, now).await;
    }
    Ok(ReviewResult {
        url: submitted.html_url.clone(),
        event: plan.event,
        inline,
        folded: req.comments.len() as u32 - inline,
    })
}

/// Which session a reply in one of the review's threads continues. A failure is logged:
/// the review stands, a reply then needs a mention.
async fn remember_threads(
    env: &Env,
    token: &str,
    pr: PullRef<'_>,
    review_id: i64,
    session_id: &str,
    now: i64,
) {
    let remembered = async {
        let ids = api::review_comment_ids(env, token, pr, review_id).await?;
        for id in ids {
            inspect_runtime::d1::run(
                env,
                "INSERT INTO github_review_threads (owner, repo, comment_id, number, session_id, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
                &[
                    pr.0.to_ascii_lowercase().as_str().into(),
                    pr.1.to_ascii_lowercase().as_str().into(),
                    inspect_runtime::d1::num(id),
                    inspect_runtime::d1::num(pr.2),
                    session_id.into(),
                    inspect_runtime::d1::num(now),
                ],
            )
            .await?;
        }
        Ok::<_, ApiError>(())
    }
    .await;
    if let Err(e) = remembered {
        emit(
            LogLine::warn("review", "threads_not_remembered")
                .session(session_id)
                .detail(e.message),
        );
    }
}

fn refused(status: u16, message: &str) -> ApiError {
    ApiError::new(
        if status == 422 {
            ErrorCode::BadRequest
        } else {
            ErrorCode::Unavailable
        },
        format!("GitHub answered {status} to the review: {message}"),
    )
}
