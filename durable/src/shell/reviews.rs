//! `POST /reviews` from the session's sandbox (the agent's `open-inspect review`): the
//! review of the pull request the running prompt came from. The control plane submits it on
//! GitHub (`inspect_github::submit`, over the binding); the object records it once, as an
//! artifact of the prompt.

use super::*;
use inspect_protocol::plane::PlaneCall;
use inspect_protocol::scm::{ReviewRequest, ReviewResult};

type ApiResultT<T> = std::result::Result<T, ApiError>;

impl SessionDO {
    pub(super) async fn submit_review(&self, req: ReviewRequest) -> ApiResultT<ReviewResult> {
        let target = self.engine().review_target()?;
        let state = self.engine().state()?;
        let asked = PlaneCall::SubmitReview {
            owner: target.owner.clone(),
            repo: target.repo.clone(),
            number: target.number,
            session_id: state.id.clone(),
            session_url: self.session_url(&state.id),
            request: Box::new(req),
        };
        let result: ReviewResult = inspect_runtime::binding::ask_plane(&self.env, &asked).await?;
        let fx = self.engine().record_review(&target, &result, now_ms())?;
        self.apply(fx);
        self.log(
            LogLine::info("review", "submitted")
                .with("repo", format!("{}/{}", target.owner, target.repo))
                .with("number", target.number)
                .with(
                    "event",
                    serde_json::to_value(result.event).unwrap_or_default(),
                )
                .with("inline", result.inline)
                .with("folded", result.folded),
        );
        Ok(result)
    }
}
