//! The control plane's side of what a session's object asks over the service binding
//! ([`inspect_protocol::plane`]): a prompt's outcome told to GitHub, Slack, Linear or an
//! automation's run, a tool's progress, a picture shared into a Slack thread, a session's
//! pull request opened and its review submitted; and the session Worker's cron triggers.
//!
//! Only the binding reaches it: the call's URL has a host ([`PLANE_HOST`]) that no request
//! from the Internet carries (a public request's URL is the deployment's own host), the
//! session Worker hands over only routes of the public table, and this Worker is deployed
//! without a public address of its own.

use crate::http::{body_as, json, now_ms, read_body_up_to, said_json, ApiResult};
use inspect_protocol::media::MAX_MEDIA_BYTES;
use inspect_protocol::plane::{PlaneCall, PLANE_CALL_PATH, PLANE_HOST};
use inspect_protocol::scm::{CallbackContext, Completion};
use inspect_protocol::ApiError;
use worker::{Env, Method, Request, Response};

/// A call's body at most: a picture (base64) with its names.
const MAX_CALL_BYTES: usize = MAX_MEDIA_BYTES / 3 * 4 + 64 * 1024;

/// A call from a session's object: `POST https://plane.internal/internal/call`.
pub(crate) fn is_internal_call(req: &Request) -> bool {
    req.method() == Method::Post
        && req
            .url()
            .is_ok_and(|u| u.host_str() == Some(PLANE_HOST) && u.path() == PLANE_CALL_PATH)
}

pub(crate) async fn call(mut req: Request, env: &Env) -> ApiResult<Response> {
    said_json(&req)?;
    let body = read_body_up_to(&mut req, MAX_CALL_BYTES).await?;
    let now = now_ms() as i64;
    match body_as::<PlaneCall>(&body)? {
        PlaneCall::PullRequestBase {
            user,
            owner,
            name,
            base,
        } => {
            let base =
                inspect_github::publish::base_for(env, &user, (&owner, &name), base, now).await?;
            return json(&inspect_protocol::plane::PullRequestBase { base }, 200);
        }
        PlaneCall::BudgetCheck { user_id } => {
            let verdict = inspect_protocol::plane::BudgetVerdict {
                refused: crate::budgets::refusal(env, &user_id, now).await,
                any: inspect_runtime::budgets::any(env, now).await,
            };
            return json(&verdict, 200);
        }
        PlaneCall::PublishPullRequest { proposal } => {
            let published = inspect_github::publish::for_session(env, &proposal, now).await?;
            return json(&published, 200);
        }
        PlaneCall::SubmitReview {
            owner,
            repo,
            number,
            session_id,
            session_url,
            request,
        } => {
            let pr = (owner.as_str(), repo.as_str(), number);
            let ids = (session_id.as_str(), session_url.as_str());
            let result = inspect_github::submit::review(env, pr, &request, ids, now).await?;
            return json(&result, 200);
        }
        PlaneCall::Report {
            completion,
            session_url,
        } => report(env, &completion, &session_url).await?,
        PlaneCall::SlackProgress {
            thread,
            ts,
            tool,
            elapsed_secs,
            session_url,
        } => {
            inspect_slack::thread::progress(
                env,
                &thread,
                &ts,
                tool.as_deref(),
                elapsed_secs,
                &session_url,
            )
            .await?
        }
        PlaneCall::LinearProgress {
            session,
            tool,
            args,
        } => inspect_linear::panel::progress(env, &session, &tool, &args).await?,
        PlaneCall::Attention { items, session_url } => {
            crate::inbox::attention(env, &items, &session_url, now).await?
        }
        PlaneCall::Scheduled { cron, at } => crate::crons::run(env, &cron, at).await,
        PlaneCall::SlackMedia {
            channel,
            thread_ts,
            name,
            caption,
            bytes,
        } => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(bytes)
                .map_err(|e| ApiError::bad_request(format!("the picture's bytes: {e}")))?;
            inspect_slack::api::upload_to_thread(
                env,
                (&channel, &thread_ts),
                &name,
                &bytes,
                &caption,
            )
            .await?
        }
    }
    json(&serde_json::json!({ "ok": true }), 200)
}

/// A prompt's outcome where it came from.
async fn report(env: &Env, c: &Completion, session_url: &str) -> ApiResult<()> {
    match &c.context {
        CallbackContext::Github {
            owner,
            repo,
            number,
            review_comment_id,
            review,
        } => {
            let pr = (owner.as_str(), repo.as_str(), *number);
            let asked = inspect_github::publish::Asked {
                review_comment_id: *review_comment_id,
                review: *review,
            };
            let now = now_ms() as i64;
            inspect_github::publish::report(env, c, pr, asked, session_url, now).await
        }
        CallbackContext::Slack(thread) => {
            inspect_slack::thread::report(env, c, thread, session_url).await
        }
        CallbackContext::Linear(session) => {
            inspect_linear::panel::report(env, c, session, session_url).await
        }
        CallbackContext::Automation(origin) => {
            // The run's outcome first (recording it again on a retry changes nothing), then
            // a Slack channel trigger's thread hears the answer.
            inspect_automations::store::record_outcome(
                env,
                origin,
                c.success,
                c.error.as_deref(),
                now_ms() as i64,
            )
            .await?;
            if let Some(thread) = &origin.github {
                let pr = (thread.owner.as_str(), thread.repo.as_str(), thread.number);
                let asked = inspect_github::publish::Asked {
                    review_comment_id: None,
                    review: false,
                };
                let now = now_ms() as i64;
                inspect_github::publish::report(env, c, pr, asked, session_url, now).await?;
            }
            match &origin.slack_thread {
                Some(thread) => inspect_slack::thread::report(env, c, thread, session_url).await,
                None => Ok(()),
            }
        }
    }
}
