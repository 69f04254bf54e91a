//! Pull requests from the session's side: whom one is for, which the session already has,
//! recording one as an artifact, and the completion report of a prompt with a callback.

use super::{ids, internal, EngineResult, Session};
use crate::engine::Effects;
use crate::store::{Cols, Store};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::scm::{CallbackContext, Completion, PullRequestChange, PullRequestResult};
use inspect_protocol::session::Artifact;
use serde_json::{json, Value};

/// The artifact type of a pull request (the original's name).
pub const PR_ARTIFACT: &str = "pr";

/// A pull request the session recorded earlier.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownPr {
    pub number: i64,
    pub url: Option<String>,
    pub state: String,
    pub base: Option<String>,
}

fn pr_key(owner: &str, name: &str, number: i64) -> String {
    format!(
        "pr:{}/{}#{number}",
        owner.to_ascii_lowercase(),
        name.to_ascii_lowercase()
    )
}

impl<S: Store> Session<'_, S> {
    /// The user a pull request is made for: the author of the running prompt, else the
    /// session's creator.
    pub fn pr_user(&self) -> EngineResult<String> {
        if let Some(m) = self.processing()? {
            return Ok(self.participant(&m.author_id)?.user_id);
        }
        Ok(self.state()?.created_by)
    }

    /// What the sandbox's egress policy refused, as `host:port` (a tunnel) or
    /// `METHOD host:port`, each once, first refused first, at most 50: the pull request's
    /// report lists them.
    pub fn blocked_egress(&self) -> EngineResult<Vec<String>> {
        let rows = self
            .store
            .query(
                "SELECT data FROM events WHERE kind = 'egress_blocked' ORDER BY seq LIMIT 500",
                &[],
            )
            .map_err(internal)?;
        let mut out: Vec<String> = Vec::new();
        for row in rows {
            let mut c = Cols::new(row);
            let data: Value =
                serde_json::from_str(&c.string().map_err(internal)?).unwrap_or(Value::Null);
            let (Some(host), Some(port)) = (data["host"].as_str(), data["port"].as_u64()) else {
                continue;
            };
            let entry = match data["method"].as_str() {
                Some("CONNECT") | None => format!("{host}:{port}"),
                Some(m) => format!("{m} {host}:{port}"),
            };
            if !out.contains(&entry) {
                out.push(entry);
            }
            if out.len() >= 50 {
                break;
            }
        }
        Ok(out)
    }

    /// Pull requests recorded for a repository's head branch, newest first.
    pub fn known_pull_requests(
        &self,
        owner: &str,
        name: &str,
        head: &str,
    ) -> EngineResult<Vec<KnownPr>> {
        let rows = self
            .store
            .query(
                "SELECT url, metadata FROM artifacts WHERE kind = ? ORDER BY created_at DESC, id DESC",
                &[PR_ARTIFACT.into()],
            )
            .map_err(internal)?;
        let mut out = Vec::new();
        for row in rows {
            let mut c = Cols::new(row);
            let url = c.opt_string().map_err(internal)?;
            let meta: Value = c
                .opt_string()
                .map_err(internal)?
                .and_then(|m| serde_json::from_str(&m).ok())
                .unwrap_or(Value::Null);
            let same =
                |k: &str, v: &str| meta[k].as_str().is_some_and(|x| x.eq_ignore_ascii_case(v));
            if same("repoOwner", owner) && same("repoName", name) && meta["head"] == head {
                if let Some(number) = meta["number"].as_i64() {
                    out.push(KnownPr {
                        number,
                        url,
                        state: meta["state"].as_str().unwrap_or("open").to_owned(),
                        base: meta["base"].as_str().map(str::to_owned),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Records a pull request as the session's artifact: created the first time, updated
    /// in place after (same id), and every client hears of it.
    pub fn record_pull_request(&self, r: &PullRequestResult, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        let Some(number) = r.pr_number else {
            return Ok(fx);
        };
        let key = pr_key(&r.repo_owner, &r.repo_name, number);
        let metadata = json!({
            "number": number,
            "state": r.state,
            "head": r.head_branch,
            "base": r.base_branch,
            "repoOwner": r.repo_owner,
            "repoName": r.repo_name,
            "authoredAs": r.authored_as,
        });
        let existing = self
            .store
            .query(
                "SELECT id, created_at FROM artifacts WHERE artifact_key = ?",
                &[key.as_str().into()],
            )
            .map_err(internal)?
            .into_iter()
            .next();
        let (id, created_at, created) = match existing {
            Some(row) => {
                let mut c = Cols::new(row);
                (
                    c.string().map_err(internal)?,
                    c.i64().map_err(internal)?,
                    false,
                )
            }
            None => (ids::new_id("art"), now, true),
        };
        self.store
            .atomically(|| {
                self.store.execute(
                    "INSERT INTO artifacts (id, kind, url, metadata, created_at, artifact_key, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
                     ON CONFLICT(id) DO UPDATE SET url = excluded.url, metadata = excluded.metadata, updated_at = excluded.updated_at",
                    &[
                        id.as_str().into(),
                        PR_ARTIFACT.into(),
                        r.pr_url.clone().into(),
                        metadata.to_string().into(),
                        created_at.into(),
                        key.as_str().into(),
                        now.into(),
                    ],
                )?;
                self.touch(now)
            })
            .map_err(internal)?;
        let artifact = Artifact {
            id,
            kind: PR_ARTIFACT.into(),
            url: r.pr_url.clone(),
            metadata: Some(metadata),
            created_at,
        };
        fx.broadcast(if created {
            ServerMessage::ArtifactCreated { artifact }
        } else {
            ServerMessage::ArtifactUpdated { artifact }
        });
        fx.index_changed = true;
        Ok(fx)
    }

    /// A recorded pull request changed on its host: its state (and when), or a review's
    /// verdict (and whose), merged into the artifact in place; every client hears of it.
    /// Nothing for a pull request the session never recorded, or a change it already has.
    pub fn update_pull_request(
        &self,
        change: &PullRequestChange,
        now: i64,
    ) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        let key = pr_key(&change.owner, &change.repo, change.number);
        let Some(row) = self
            .store
            .query(
                "SELECT id, url, metadata, created_at FROM artifacts WHERE artifact_key = ?",
                &[key.as_str().into()],
            )
            .map_err(internal)?
            .into_iter()
            .next()
        else {
            return Ok(fx);
        };
        let mut c = Cols::new(row);
        let id = c.string().map_err(internal)?;
        let url = c.opt_string().map_err(internal)?;
        let mut metadata: Value = c
            .opt_string()
            .map_err(internal)?
            .and_then(|m| serde_json::from_str(&m).ok())
            .unwrap_or_else(|| json!({}));
        let created_at = c.i64().map_err(internal)?;
        let before = metadata.clone();
        if let Some(state) = &change.state {
            if metadata["state"].as_str() != Some(state.as_str()) {
                metadata["state"] = json!(state);
                metadata["stateAt"] = json!(change.at);
            }
        }
        if let Some(review) = &change.review {
            metadata["review"] = json!(review);
            metadata["reviewer"] = json!(change.reviewer);
            metadata["reviewAt"] = json!(change.at);
        }
        if metadata == before {
            return Ok(fx);
        }
        self.store
            .atomically(|| {
                self.store.execute(
                    "UPDATE artifacts SET metadata = ?, updated_at = ? WHERE id = ?",
                    &[metadata.to_string().into(), now.into(), id.as_str().into()],
                )?;
                self.touch(now)
            })
            .map_err(internal)?;
        fx.broadcast(ServerMessage::ArtifactUpdated {
            artifact: Artifact {
                id,
                kind: PR_ARTIFACT.into(),
                url,
                metadata: Some(metadata),
                created_at,
            },
        });
        fx.index_changed = true;
        Ok(fx)
    }

    /// The newest pull request's URL and state, for the sessions index.
    pub fn newest_pull_request(&self) -> EngineResult<Option<(String, String)>> {
        Ok(self.pull_requests()?.into_iter().next())
    }

    /// Every recorded pull request as `(url, state)`, newest first.
    pub fn pull_requests(&self) -> EngineResult<Vec<(String, String)>> {
        let rows = self
            .store
            .query(
                "SELECT url, metadata FROM artifacts WHERE kind = ? AND url IS NOT NULL ORDER BY created_at DESC, id DESC",
                &[PR_ARTIFACT.into()],
            )
            .map_err(internal)?;
        let mut out = Vec::new();
        for row in rows {
            let mut c = Cols::new(row);
            let url = c.string().map_err(internal)?;
            let state = c
                .opt_string()
                .map_err(internal)?
                .and_then(|m| serde_json::from_str::<Value>(&m).ok())
                .and_then(|m| m["state"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "open".into());
            out.push((url, state));
        }
        Ok(out)
    }

    /// Fails the waiting prompts that report to a callback (a bot's): when the session
    /// gives up on sandboxes nobody is there to prompt again, so they say why instead of
    /// waiting forever.
    pub fn fail_waiting_callbacks(&self, reason: &str, now: i64) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        let ids: Vec<String> = self
            .store
            .query(
                "SELECT id FROM messages WHERE status = 'pending' AND callback IS NOT NULL ORDER BY seq",
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .filter_map(|r| r.into_iter().next().and_then(|v| v.into_string()))
            .collect();
        for id in ids {
            let event = self
                .store
                .atomically(|| {
                    self.store.execute(
                        "UPDATE messages SET status = 'failed', error = ?, completed_at = ? WHERE id = ?",
                        &[reason.into(), now.into(), id.as_str().into()],
                    )?;
                    let mut data = serde_json::Map::new();
                    data.insert("success".into(), Value::Bool(false));
                    data.insert("error".into(), Value::String(reason.into()));
                    super::timeline::append(
                        self.store,
                        inspect_protocol::session::event_kind::EXECUTION_COMPLETE,
                        Some(&id),
                        data,
                        now,
                    )
                })
                .map_err(internal)?;
            fx.broadcast(ServerMessage::SandboxEvent { event });
            if let Some(c) = self.completion(&id, false, Some(reason.into()))? {
                fx.completions.push(c);
            }
        }
        if !fx.outbound.is_empty() {
            fx.broadcast(ServerMessage::PromptQueueUpdated {
                prompt_queue: self.queue()?,
            });
            fx.index_changed = true;
        }
        Ok(fx)
    }

    /// The report of a prompt that ended, when it carries a callback.
    pub(crate) fn completion(
        &self,
        message_id: &str,
        success: bool,
        error: Option<String>,
    ) -> EngineResult<Option<Completion>> {
        let callback = self
            .store
            .scalar(
                "SELECT callback FROM messages WHERE id = ?",
                &[message_id.into()],
            )
            .map_err(internal)?
            .and_then(|v| v.into_string());
        let Some(context) = callback.and_then(|c| serde_json::from_str::<CallbackContext>(&c).ok())
        else {
            return Ok(None);
        };
        // The agent's last words of the turn: its newest streamed text.
        let summary = self.last_words(message_id)?;
        Ok(Some(Completion {
            session_id: self.session_id()?,
            message_id: message_id.to_owned(),
            success,
            error,
            summary,
            pull_requests: self.pull_requests()?,
            // The workspace's capture where the sandbox made one, else what the tools wrote.
            changed_files: match self.captured_paths()? {
                Some(paths) => paths,
                None => self.changed_files(message_id)?,
            },
            review_url: self.review_of(message_id)?,
            pictures: self.media_of(message_id)?,
            context,
        }))
    }

    /// The files a prompt's tools wrote (`edit`, `write`, `patch`…), workspace-relative, in
    /// the order first written.
    pub fn changed_files(&self, message_id: &str) -> EngineResult<Vec<String>> {
        let rows = self
            .store
            .query(
                "SELECT data FROM events WHERE message_id = ? AND kind = 'tool_call' ORDER BY seq",
                &[message_id.into()],
            )
            .map_err(internal)?;
        let mut files: Vec<String> = Vec::new();
        for row in rows {
            let Some(data) = row.into_iter().next().and_then(|v| v.into_string()) else {
                continue;
            };
            let Ok(d) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            let writes = matches!(
                d["tool"].as_str(),
                Some("edit" | "write" | "patch" | "multiedit")
            );
            let path = d["args"]["filePath"]
                .as_str()
                .or(d["args"]["path"].as_str());
            if let (true, Some(path)) = (writes, path) {
                let shown = match path.find("/workspace/") {
                    Some(at) => &path[at + "/workspace/".len()..],
                    None => path,
                };
                if !files.iter().any(|f| f == shown) {
                    files.push(shown.to_owned());
                }
            }
        }
        Ok(files)
    }
}

/// What the sandbox answered to one `push`: the pushed head and whether it has commits
/// beyond the base, or why it could not push.
pub type PushAnswer = Result<(Option<String>, Option<bool>), String>;

/// The answers to `push` commands a sandbox frame (or batch) carries, by request id.
pub fn push_answers(frame: &str) -> Vec<(String, PushAnswer)> {
    use inspect_protocol::sandbox::{event_type, frame_events, SandboxEvent, SandboxFrame};
    let Ok(split) = frame_events(frame) else {
        return Vec::new();
    };
    split
        .events
        .into_iter()
        .filter(|e| {
            matches!(
                event_type(e).as_deref(),
                Some("push_complete" | "push_error")
            )
        })
        .filter_map(|e| serde_json::from_str::<SandboxFrame>(e).ok())
        .filter_map(|f| match f.event {
            SandboxEvent::PushComplete {
                request_id: Some(id),
                sha,
                changed,
                ..
            } => Some((id, Ok((sha, changed)))),
            SandboxEvent::PushError {
                request_id: Some(id),
                error,
                ..
            } => Some((id, Err(error))),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_answers_in_frames_and_batches() {
        let one = r#"{"type":"push_complete","sandboxId":"s","timestamp":1,"ackId":"a","requestId":"p1","sha":"abc","changed":true}"#;
        assert_eq!(
            push_answers(one),
            vec![("p1".into(), Ok((Some("abc".into()), Some(true))))]
        );
        let batch = format!(
            r#"{{"type":"batch","events":[{{"type":"heartbeat","sandboxId":"s","timestamp":1}},{one},{{"type":"push_error","sandboxId":"s","timestamp":2,"requestId":"p2","error":"rejected"}},{{"type":"push_complete","sandboxId":"s","timestamp":3}}]}}"#
        );
        let got = push_answers(&batch);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], ("p2".into(), Err("rejected".into())));
        assert!(push_answers("garbage").is_empty());
    }
}
