//! What a session sends back to GitHub: its pull request (a new one, or the one already
//! open for its branch) and the report of a prompt that came from a pull request. The
//! session object decides the branches and has the sandbox push; this is the GitHub side.

use crate::api::{self, Pull};
use inspect_protocol::scm::Completion;
use inspect_protocol::{ApiError, ErrorCode};
use worker::Env;

/// A pull request to propose: the branches are decided and pushed already.
pub struct Proposal<'a> {
    pub owner: &'a str,
    pub name: &'a str,
    pub head: &'a str,
    pub base: &'a str,
    pub title: &'a str,
    /// With the session's footer.
    pub body: &'a str,
    pub draft: bool,
    /// Put on a new pull request (the repository's setting).
    pub label: Option<&'a str>,
}

/// What came of a proposal.
pub struct Published {
    pub pull: Pull,
    /// An open pull request for the branch was reused, not made.
    pub updated: bool,
    /// Pull requests the session made for this branch before, closed or merged since.
    pub ended: Vec<Pull>,
    /// The label could not be put on (the pull request stands).
    pub label_failed: Option<String>,
}

/// One pull request per head branch: the open one among `known` (the numbers this session
/// made for the branch, newest first) or on GitHub is reused; otherwise one is made. A 422
/// on creation means one was made meanwhile: it is looked up and reused.
pub async fn open_or_reuse(
    env: &Env,
    token: &str,
    p: &Proposal<'_>,
    known: &[i64],
) -> Result<Published, ApiError> {
    let (owner, name, head) = (p.owner, p.name, p.head);
    let mut ended = Vec::new();
    let mut reuse = None;
    for &number in known {
        let Some(live) = api::get_pull(env, token, owner, name, number).await? else {
            continue;
        };
        if crate::pulls::is_open(live.display_state()) {
            reuse = Some(live);
            break;
        }
        ended.push(live);
    }
    if reuse.is_none() {
        reuse = api::open_pull_for_head(env, token, owner, name, head).await?;
    }
    if let Some(pull) = reuse {
        return Ok(Published {
            pull,
            updated: true,
            ended,
            label_failed: None,
        });
    }
    let created = api::create_pull(
        env, token, owner, name, p.title, p.body, head, p.base, p.draft,
    )
    .await?;
    match created {
        Ok(pull) => {
            let mut label_failed = None;
            if let Some(label) = p.label {
                if let Err(e) = api::add_label(env, token, owner, name, pull.number, label).await {
                    label_failed = Some(e.message);
                }
            }
            Ok(Published {
                pull,
                updated: false,
                ended,
                label_failed,
            })
        }
        Err((422, message)) => {
            match api::open_pull_for_head(env, token, owner, name, head).await? {
                Some(pull) => Ok(Published {
                    pull,
                    updated: true,
                    ended,
                    label_failed: None,
                }),
                None => Err(ApiError::new(
                    ErrorCode::BadRequest,
                    format!("GitHub refused the pull request: {message}"),
                )),
            }
        }
        Err((status, message)) => Err(ApiError::new(
            if matches!(status, 403 | 404) {
                ErrorCode::BadRequest
            } else {
                ErrorCode::Unavailable
            },
            format!("GitHub answered {status} to the pull request: {message}"),
        )),
    }
}

/// What a finished prompt was asked on its pull request: an answer in a review thread, a
/// review.
#[derive(Debug, Clone, Copy)]
pub struct Asked {
    pub review_comment_id: Option<i64>,
    pub review: bool,
}

/// Reports a finished prompt on the pull request it came from. A prompt that submitted
/// its review has said it; one asked for a review that did not submit one gives its last
/// words as a review (a comment). Else in the review thread when it came from one and
/// GitHub takes the reply, on the pull request's conversation otherwise (the thread's
/// comment was deleted, or it was not a thread's top comment).
pub async fn report(
    env: &Env,
    c: &Completion,
    (owner, repo, number): (&str, &str, i64),
    asked: Asked,
    session_url: &str,
    now: i64,
) -> Result<(), ApiError> {
    if c.success && c.review_url.is_some() {
        return Ok(());
    }
    let token = api::app_token(env, now).await?;
    let body = crate::webhook::completion_comment(c, session_url);
    if asked.review && c.success {
        let plan = crate::review::plan(
            &[],
            Vec::new(),
            &body,
            inspect_protocol::scm::ReviewVerdict::Comment,
            &[],
        );
        match api::submit_review(env, &token, (owner, repo, number), &plan).await? {
            Ok(_) => return Ok(()),
            Err((status, message)) => inspect_runtime::log::emit(
                inspect_runtime::log::LogLine::warn("callback", "review_refused")
                    .session(&c.session_id)
                    .with("status", status)
                    .detail(message),
            ),
        }
    }
    if let Some(id) = asked.review_comment_id {
        match api::reply_to_review_comment(env, &token, owner, repo, number, id, &body).await {
            Ok(()) => return Ok(()),
            Err(e) => inspect_runtime::log::emit(
                inspect_runtime::log::LogLine::warn("callback", "review_reply_failed")
                    .session(&c.session_id)
                    .detail(e.message),
            ),
        }
    }
    api::comment(env, &token, owner, repo, number, &body).await
}

/// The base a session's pull request targets: the one named, or the repository's default
/// branch. Asked before the sandbox pushes, so a person without any token learns it first.
pub async fn base_for(
    env: &Env,
    user: &str,
    (owner, name): (&str, &str),
    named: Option<String>,
    now: i64,
) -> Result<String, ApiError> {
    let (token, _) = api::token_for(env, user, now).await?;
    match named {
        Some(base) => Ok(base),
        None => api::default_branch(env, &token, owner, name).await,
    }
}

/// A session's pushed branch proposed: its pull request opened or reused as the person
/// (the App when they have no token), with the repository's draft and label settings.
pub async fn for_session(
    env: &Env,
    p: &inspect_protocol::plane::PullRequestProposal,
    now: i64,
) -> Result<inspect_protocol::plane::PublishedPullRequests, ApiError> {
    use inspect_protocol::scm::{AuthoredAs, PullRequestResult};
    let (token, authored) = api::token_for(env, &p.user, now).await?;
    let settings = api::repo_settings(env, &p.owner, &p.name).await?;
    let proposal = Proposal {
        owner: &p.owner,
        name: &p.name,
        head: &p.head,
        base: &p.base,
        title: &p.title,
        body: &p.body,
        draft: p.draft || settings.always_draft,
        label: settings.pr_label.as_deref(),
    };
    // Where the repository requires signed commits, the pushed branch is made again by
    // GitHub (signed) before the pull request is opened or updated on it.
    let signed = if settings.sign_commits {
        Some(crate::sign::sign_branch(env, &p.owner, &p.name, &p.base, &p.head, now).await?)
    } else {
        None
    };
    let published = open_or_reuse(env, &token, &proposal, &p.known).await?;
    let result_of = |pull: &Pull, updated: bool, message: Option<String>| PullRequestResult {
        repo_owner: p.owner.clone(),
        repo_name: p.name.clone(),
        head_branch: pull.head.branch.clone(),
        base_branch: Some(pull.base.branch.clone()),
        pr_number: Some(pull.number),
        pr_url: Some(pull.html_url.clone()),
        state: pull.display_state().into(),
        updated,
        authored_as: authored,
        message,
    };
    let mut notes = Vec::new();
    if authored == AuthoredAs::App {
        notes.push(format!(
            "authored by the GitHub App: {} has no GitHub token on file (signing in with GitHub lets PRs be yours)",
            p.user
        ));
    }
    if let Some((_, remade)) = signed.filter(|(_, n)| *n > 0) {
        notes.push(format!(
            "{remade} commit(s) made again by GitHub through its Git Data API, signed (the repository requires signed commits)"
        ));
    }
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok(inspect_protocol::plane::PublishedPullRequests {
        result: result_of(&published.pull, published.updated, note),
        ended: published
            .ended
            .iter()
            .map(|pull| result_of(pull, true, None))
            .collect(),
        label_failed: published.label_failed,
    })
}
