//! `POST /pull-requests` from the session's sandbox: the object decides head and base,
//! has the sandbox push (and waits for its answer), has the control plane
//! (`inspect_github::publish`, over the binding) open or reuse the pull request as the
//! prompting person, records it, and tells every client. Also the completion reports of
//! prompts that carry a callback (told by the control plane where the prompt came from).

use super::*;
use crate::engine::pulls::push_answers;
use futures::channel::oneshot;
use inspect_github::pulls;
use inspect_protocol::plane::{PlaneCall, PublishedPullRequests, PullRequestProposal};
use inspect_protocol::scm::{
    AuthoredAs, CallbackContext, Completion, PullRequestRequest, PullRequestResponse,
    PullRequestResult, PushSpec,
};
use inspect_protocol::session::RepositoryRef;
use inspect_protocol::ErrorCode;

/// How long the sandbox has to push.
const PUSH_TIMEOUT_MS: u64 = 90_000;

pub(super) use crate::engine::pulls::PushAnswer;

type ApiResultT<T> = std::result::Result<T, ApiError>;

/// One repository at a time per session: a second request while one runs gets 409.
struct Claim<'a> {
    claims: &'a RefCell<HashSet<String>>,
    key: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.claims.borrow_mut().remove(&self.key);
    }
}

impl SessionDO {
    /// Hands `push_complete` / `push_error` answers to whoever waits for them.
    pub(super) fn resolve_pushes(&self, frame: &str) {
        if self.pushes.borrow().is_empty() {
            return;
        }
        for (request_id, answer) in push_answers(frame) {
            if let Some(tx) = self.pushes.borrow_mut().remove(&request_id) {
                let _ = tx.send(answer);
            }
        }
    }

    fn claim(&self, owner: &str, name: &str) -> ApiResultT<Claim<'_>> {
        let key = format!("{}/{}", owner, name).to_ascii_lowercase();
        if !self.pr_claims.borrow_mut().insert(key.clone()) {
            return Err(ApiError::conflict(format!(
                "a pull request for {owner}/{name} is already being made in this session"
            )));
        }
        Ok(Claim {
            claims: &self.pr_claims,
            key,
        })
    }

    /// Asks the sandbox to commit and push `HEAD` of `repo` to `branch`; waits for it.
    async fn push_through_sandbox(
        &self,
        repo: &str,
        branch: &str,
        base: Option<&str>,
    ) -> ApiResultT<(Option<String>, Option<bool>)> {
        if !self.engine().sandbox_connected()? {
            return Err(ApiError::conflict("the session's sandbox is not connected"));
        }
        let request_id = ids::new_id("push");
        let (tx, rx) = oneshot::channel();
        self.pushes.borrow_mut().insert(request_id.clone(), tx);
        let mut fx = Effects::none();
        fx.to_sandbox.push(SandboxCommand::Push {
            push_spec: PushSpec {
                request_id: request_id.clone(),
                repo: repo.to_owned(),
                branch: branch.to_owned(),
                base_branch: base.map(str::to_owned),
            },
        });
        self.apply(fx);
        let timeout = worker::Delay::from(std::time::Duration::from_millis(PUSH_TIMEOUT_MS));
        let answer = match futures::future::select(rx, timeout).await {
            futures::future::Either::Left((Ok(a), _)) => Some(a),
            _ => None,
        };
        self.pushes.borrow_mut().remove(&request_id);
        match answer {
            Some(Ok(done)) => Ok(done),
            Some(Err(e)) => Err(ApiError::new(
                ErrorCode::Conflict,
                format!("the sandbox could not push {repo} to {branch}: {e}"),
            )),
            None => Err(ApiError::new(
                ErrorCode::Unavailable,
                format!(
                    "the sandbox did not push {repo} within {} s",
                    PUSH_TIMEOUT_MS / 1000
                ),
            )),
        }
    }

    pub(super) fn session_url(&self, session_id: &str) -> String {
        let origin = self
            .store
            .scalar("SELECT origin FROM session WHERE id = 1", &[])
            .ok()
            .flatten()
            .and_then(|v| v.into_string());
        inspect_github::api::session_url(&self.env, origin.as_deref(), session_id)
    }

    pub(super) async fn open_pull_requests(
        &self,
        req: PullRequestRequest,
    ) -> ApiResultT<PullRequestResponse> {
        let engine = self.engine();
        let state = engine.state()?;
        let title = pulls::check_title(&req.title)?;
        if req.body.chars().count() > pulls::MAX_BODY_CHARS {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "a pull request body is at most {} characters",
                    pulls::MAX_BODY_CHARS
                ),
            ));
        }
        let chosen: Vec<RepositoryRef> = match (&req.repo_owner, &req.repo_name) {
            (Some(o), Some(n)) => vec![state
                .repositories
                .iter()
                .find(|r| r.owner.eq_ignore_ascii_case(o) && r.name.eq_ignore_ascii_case(n))
                .cloned()
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "{o}/{n} is not one of this session's repositories"
                    ))
                })?],
            (None, None) => state.repositories.clone(),
            _ => {
                return Err(ApiError::bad_request(
                    "name both repoOwner and repoName, or neither",
                ))
            }
        };
        if chosen.is_empty() {
            return Err(ApiError::bad_request(
                "this session has no repository to open a pull request on",
            ));
        }
        let explicit = req.repo_owner.is_some();
        let head = pulls::choose_head(req.head_branch.as_deref(), &state.id)?;
        let user = engine.pr_user()?;
        let session_url = self.session_url(&state.id);
        let mut results = Vec::new();
        for repo in &chosen {
            let _claim = self.claim(&repo.owner, &repo.name)?;
            match self
                .pull_request_for(
                    repo,
                    &req,
                    &title,
                    &head,
                    &user,
                    &session_url,
                    explicit || chosen.len() == 1,
                )
                .await?
            {
                Some(r) => results.push(r),
                None => continue,
            }
        }
        if results.is_empty() {
            return Err(ApiError::bad_request(
                "no repository of this session has changes to propose",
            ));
        }
        Ok(PullRequestResponse {
            pull_requests: results,
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn pull_request_for(
        &self,
        repo: &RepositoryRef,
        req: &PullRequestRequest,
        title: &str,
        head: &str,
        user: &str,
        session_url: &str,
        required: bool,
    ) -> ApiResultT<Option<PullRequestResult>> {
        let now = now_ms();
        let mut base = pulls::choose_base(req.base_branch.as_deref(), repo.branch.as_deref())?;
        // A GitHub repository's default branch is asked of GitHub when nothing names a base
        // (which also finds out, before the push, whether any token can open it).
        let hosted = !repo.is_local();
        if hosted {
            let asked = PlaneCall::PullRequestBase {
                user: user.to_owned(),
                owner: repo.owner.clone(),
                name: repo.name.clone(),
                base: base.clone(),
            };
            let answer: inspect_protocol::plane::PullRequestBase =
                inspect_runtime::binding::ask_plane(&self.env, &asked).await?;
            base = Some(answer.base);
        }
        if let Some(b) = &base {
            pulls::check_head_and_base(head, b)?;
        }
        let (_sha, changed) = self
            .push_through_sandbox(&repo.name, head, base.as_deref())
            .await?;
        if changed == Some(false) {
            if required {
                return Err(ApiError::bad_request(format!(
                    "{}/{}: {head} has no commits beyond {}; nothing to propose",
                    repo.owner,
                    repo.name,
                    base.as_deref().unwrap_or("the base")
                )));
            }
            return Ok(None);
        }
        if !hosted {
            return Ok(Some(PullRequestResult {
                repo_owner: repo.owner.clone(),
                repo_name: repo.name.clone(),
                head_branch: head.to_owned(),
                base_branch: base,
                pr_number: None,
                pr_url: None,
                state: "pushed".into(),
                updated: false,
                authored_as: AuthoredAs::None,
                message: Some(format!(
                    "{}/{} is a local repository with no pull-request host: the branch {head} was pushed to {}; review and merge it there",
                    repo.owner,
                    repo.name,
                    repo.source.as_deref().unwrap_or("its source")
                )),
            }));
        }
        let (owner, name) = (repo.owner.as_str(), repo.name.as_str());
        let known: Vec<i64> = self
            .engine()
            .known_pull_requests(owner, name, head)?
            .iter()
            .map(|k| k.number)
            .collect();
        let asked = PlaneCall::PublishPullRequest {
            proposal: Box::new(PullRequestProposal {
                user: user.to_owned(),
                owner: owner.to_owned(),
                name: name.to_owned(),
                head: head.to_owned(),
                base: base.unwrap_or_default(),
                title: title.to_owned(),
                body: pulls::body_with_footer(
                    &pulls::with_blocked_report(&req.body, &self.engine().blocked_egress()?),
                    session_url,
                ),
                draft: req.draft.unwrap_or(false),
                known,
            }),
        };
        let published: PublishedPullRequests =
            inspect_runtime::binding::ask_plane(&self.env, &asked).await?;
        for ended in &published.ended {
            let fx = self.engine().record_pull_request(ended, now)?;
            self.apply(fx);
            self.remember_pull(ended, now).await;
        }
        let result = published.result;
        let number = result.pr_number.unwrap_or_default();
        if let Some(e) = published.label_failed {
            self.log(
                LogLine::warn("pull_request", "label_failed")
                    .with("repo", format!("{owner}/{name}"))
                    .with("number", number)
                    .detail(e),
            );
        }
        self.log(
            LogLine::info(
                "pull_request",
                if result.updated { "reused" } else { "opened" },
            )
            .with("repo", format!("{owner}/{name}"))
            .with("number", number)
            .with("head", head)
            .with(
                "authoredAs",
                serde_json::to_value(result.authored_as).unwrap_or_default(),
            )
            .actor(user),
        );
        let fx = self.engine().record_pull_request(&result, now)?;
        self.apply(fx);
        self.remember_pull(&result, now).await;
        Ok(Some(result))
    }

    /// Keeps which session holds a pull request in D1, so a change on GitHub (a webhook,
    /// the periodic check) finds it. A failure is logged: the next push records it again.
    async fn remember_pull(&self, r: &PullRequestResult, now: i64) {
        let (Some(number), Ok(state)) = (r.pr_number, self.engine().state()) else {
            return;
        };
        let written = inspect_runtime::d1::run(
            &self.env,
            "INSERT INTO session_pull_requests (owner, repo, number, session_id, state, url, updated_at, checked_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
             ON CONFLICT(owner, repo, number, session_id) DO UPDATE SET state = ?5, url = ?6, updated_at = ?7",
            &[
                r.repo_owner.as_str().into(),
                r.repo_name.as_str().into(),
                (number as f64).into(),
                state.id.as_str().into(),
                r.state.as_str().into(),
                r.pr_url.clone().map_or(wasm_bindgen::JsValue::NULL, Into::into),
                (now as f64).into(),
            ],
        )
        .await;
        if let Err(e) = written {
            self.log(
                LogLine::warn("pull_request", "not_remembered")
                    .with("number", number)
                    .detail(e.message),
            );
        }
    }

    /// Reports prompts with a callback where their context says, after the response and
    /// without holding the session up; a bounded number of tries.
    pub(super) fn deliver_completions(&self, completions: Vec<Completion>) {
        for completion in completions {
            let env = self.env.clone();
            let url = self.session_url(&completion.session_id);
            // Slack and Linear show progress: the answer waits for the updates in flight.
            let progressive = matches!(
                completion.context,
                CallbackContext::Slack(_) | CallbackContext::Linear(_)
            );
            if progressive {
                self.progress_updates.end(&completion.message_id);
            }
            let updates = Rc::clone(&self.progress_updates);
            self.state.wait_until(async move {
                if progressive {
                    updates.settled().await;
                }
                let mut last = String::new();
                for attempt in 0..3u64 {
                    if attempt > 0 {
                        worker::Delay::from(std::time::Duration::from_millis(1000 * attempt)).await;
                    }
                    match report(&env, &completion, &url).await {
                        Ok(()) => {
                            inspect_runtime::log::emit(
                                LogLine::info("callback", "completion_delivered")
                                    .session(&completion.session_id)
                                    .message(&completion.message_id)
                                    .with("attempts", attempt + 1),
                            );
                            return;
                        }
                        Err(e) => last = e.message,
                    }
                }
                inspect_runtime::log::emit(
                    LogLine::error("callback", "completion_not_delivered")
                        .session(&completion.session_id)
                        .message(&completion.message_id)
                        .detail(last),
                );
            });
        }
    }
}

async fn report(env: &Env, c: &Completion, session_url: &str) -> ApiResultT<()> {
    let asked = PlaneCall::Report {
        completion: Box::new(c.clone()),
        session_url: session_url.to_owned(),
    };
    inspect_runtime::binding::call_plane(env, &asked).await
}
