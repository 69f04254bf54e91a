//! `POST /reviews` from the session's sandbox (the agent's `open-inspect review`): the
//! review of the pull request the running prompt came from, checked against the pull
//! request's diff as GitHub has it (`inspect_github::review` decides), submitted once with
//! the App's token, its threads remembered so a reply continues this session.

use super::*;
use inspect_github::{api, review};
use inspect_protocol::scm::{ReviewRequest, ReviewResult};
use inspect_protocol::ErrorCode;

type ApiResultT<T> = std::result::Result<T, ApiError>;

impl SessionDO {
    pub(super) async fn submit_review(&self, req: ReviewRequest) -> ApiResultT<ReviewResult> {
        review::check(&req)?;
        let target = self.engine().review_target()?;
        let (owner, repo, number) = (target.owner.as_str(), target.repo.as_str(), target.number);
        let now = now_ms();
        let token = api::app_token(&self.env, now).await?;
        let pull = api::get_pull(&self.env, &token, owner, repo, number)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("{owner}/{repo}#{number} is gone")))?;
        let settings = api::repo_settings(&self.env, owner, repo).await?;
        let allowed =
            review::allowed_verdicts(&settings, &pull.user.login, &api::bot_login(&self.env));
        let files = api::pull_files(&self.env, &token, owner, repo, number).await?;
        let state = self.engine().state()?;
        let session_url = self.session_url(&state.id);
        let mut plan = review::plan(&files, req.comments.clone(), &req.body, req.event, &allowed);
        plan.body = review::with_footer(&plan.body, &session_url);
        let pr = (owner, repo, number);
        let submitted = match api::submit_review(&self.env, &token, pr, &plan).await? {
            Ok(s) => s,
            // The head moved since the files were read, or GitHub resolves a line
            // otherwise: the same review with every comment in its body.
            Err((422, message)) if !plan.comments.is_empty() => {
                self.log(
                    LogLine::warn("review", "inline_comments_refused")
                        .with("repo", format!("{owner}/{repo}"))
                        .with("number", number)
                        .detail(&message),
                );
                plan = review::plan(&[], req.comments.clone(), &req.body, req.event, &allowed);
                plan.body = review::with_footer(&plan.body, &session_url);
                api::submit_review(&self.env, &token, pr, &plan)
                    .await?
                    .map_err(|(status, message)| refused(status, &message))?
            }
            Err((status, message)) => return Err(refused(status, &message)),
        };
        let inline = plan.comments.len() as u32;
        let result = ReviewResult {
            url: submitted.html_url.clone(),
            event: plan.event,
            inline,
            folded: req.comments.len() as u32 - inline,
        };
        let fx = self.engine().record_review(&target, &result, now)?;
        self.apply(fx);
        self.log(
            LogLine::info("review", "submitted")
                .with("repo", format!("{owner}/{repo}"))
                .with("number", number)
                .with(
                    "event",
                    serde_json::to_value(plan.event).unwrap_or_default(),
                )
                .with("inline", inline)
                .with("folded", result.folded),
        );
        if inline > 0 {
            self.remember_threads(&token, pr, submitted.id, &state.id, now)
                .await;
        }
        Ok(result)
    }

    /// Which session a reply in one of the review's threads continues. A failure is
    /// logged: the review stands, a reply then needs a mention.
    async fn remember_threads(
        &self,
        token: &str,
        pr: (&str, &str, i64),
        review_id: i64,
        session_id: &str,
        now: i64,
    ) {
        let remembered = async {
            let ids = api::review_comment_ids(&self.env, token, pr, review_id).await?;
            for id in ids {
                inspect_runtime::d1::run(
                    &self.env,
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
            self.log(LogLine::warn("review", "threads_not_remembered").detail(e.message));
        }
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
