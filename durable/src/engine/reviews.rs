//! The bot's review from the session's side: which pull request the running prompt may
//! review (the GitHub one it came from, once), and the review kept as an artifact that
//! the prompt's completion names instead of posting a comment too.

use super::{ids, internal, EngineResult, Session};
use crate::engine::Effects;
use crate::store::Store;
use inspect_protocol::client::ServerMessage;
use inspect_protocol::scm::{CallbackContext, ReviewResult};
use inspect_protocol::session::Artifact;
use inspect_protocol::{ApiError, ErrorCode};
use serde_json::json;

/// The artifact type of a submitted review.
pub const REVIEW_ARTIFACT: &str = "review";

/// The pull request the running prompt reviews.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewTarget {
    pub message_id: String,
    pub owner: String,
    pub repo: String,
    pub number: i64,
}

fn review_key(message_id: &str) -> String {
    format!("review:{message_id}")
}

impl<S: Store> Session<'_, S> {
    /// The pull request the running prompt came from, when it came from one and has not
    /// submitted its review yet.
    pub fn review_target(&self) -> EngineResult<ReviewTarget> {
        let Some(running) = self.processing()? else {
            return Err(ApiError::conflict(
                "no prompt is running: a review belongs to the prompt that asked for it",
            ));
        };
        let context = self.running_callback()?;
        let Some(CallbackContext::Github {
            owner,
            repo,
            number,
            ..
        }) = context
        else {
            return Err(ApiError::bad_request(
                "the running prompt did not come from a GitHub pull request; there is nothing to review",
            ));
        };
        if let Some(url) = self.review_of(&running.id)? {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!("this prompt already submitted its review: {url}"),
            ));
        }
        Ok(ReviewTarget {
            message_id: running.id,
            owner,
            repo,
            number,
        })
    }

    /// The review a prompt submitted, by its URL.
    pub fn review_of(&self, message_id: &str) -> EngineResult<Option<String>> {
        Ok(self
            .store
            .scalar(
                "SELECT url FROM artifacts WHERE artifact_key = ?",
                &[review_key(message_id).as_str().into()],
            )
            .map_err(internal)?
            .and_then(|v| v.into_string()))
    }

    /// Keeps a submitted review as an artifact (one per prompt); every client hears of it.
    pub fn record_review(
        &self,
        target: &ReviewTarget,
        result: &ReviewResult,
        now: i64,
    ) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        let metadata = json!({
            "repoOwner": target.owner,
            "repoName": target.repo,
            "number": target.number,
            "event": result.event,
            "inline": result.inline,
            "folded": result.folded,
            "messageId": target.message_id,
        });
        let id = ids::new_id("art");
        let written = self
            .store
            .atomically(|| {
                let rows = self.store.query(
                    "INSERT INTO artifacts (id, kind, url, metadata, created_at, artifact_key, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT(artifact_key) DO NOTHING RETURNING id",
                    &[
                        id.as_str().into(),
                        REVIEW_ARTIFACT.into(),
                        result.url.as_str().into(),
                        metadata.to_string().into(),
                        now.into(),
                        review_key(&target.message_id).as_str().into(),
                        now.into(),
                    ],
                )?;
                self.touch(now)?;
                Ok(rows.len())
            })
            .map_err(internal)?;
        if written > 0 {
            fx.broadcast(ServerMessage::ArtifactCreated {
                artifact: Artifact {
                    id,
                    kind: REVIEW_ARTIFACT.into(),
                    url: Some(result.url.clone()),
                    metadata: Some(metadata),
                    created_at: now,
                },
            });
        }
        Ok(fx)
    }
}
