//! Pictures the agent took, from the session's side: kept (as an attachment) with a
//! `media` artifact that names it and a timeline event that shows it; read back by the
//! session's people only when an artifact names it (a prompt's attachments stay the
//! sandbox's to read).

use super::{internal, timeline, EngineResult, Session};
use crate::engine::Effects;
use crate::store::Store;
use inspect_protocol::client::ServerMessage;
use inspect_protocol::media::{self, MAX_SESSION_MEDIA, MEDIA_ARTIFACT};
use inspect_protocol::scm::CallbackContext;
use inspect_protocol::session::Artifact;
use inspect_protocol::{ApiError, ErrorCode};
use serde_json::{json, Map, Value};

fn media_key(attachment_id: &str) -> String {
    format!("media:{attachment_id}")
}

impl<S: Store> Session<'_, S> {
    /// Keeps a picture the sandbox sent, with its caption; every client sees it.
    pub fn record_media(
        &self,
        mime: &str,
        caption: &str,
        bytes: &[u8],
        now: i64,
    ) -> EngineResult<(Artifact, Effects)> {
        media::check(mime, caption, bytes.len()).map_err(ApiError::bad_request)?;
        let kept = self
            .store
            .scalar(
                "SELECT COUNT(*) FROM artifacts WHERE kind = ?",
                &[MEDIA_ARTIFACT.into()],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        if kept >= MAX_SESSION_MEDIA as i64 {
            return Err(ApiError::new(
                ErrorCode::Conflict,
                format!("a session keeps at most {MAX_SESSION_MEDIA} pictures"),
            ));
        }
        let ext = mime.rsplit('/').next().unwrap_or("png");
        let file = self.store_attachment(&format!("screenshot.{ext}"), mime, bytes, now)?;
        let attachment_id = file.attachment_id.unwrap_or_default();
        let session = self.session_id()?;
        let url = format!("/sessions/{session}/media/{attachment_id}");
        let id = super::ids::new_id("art");
        let mut metadata = json!({
            "attachmentId": attachment_id,
            "caption": caption,
            "mimeType": mime,
            "bytes": bytes.len(),
        });
        // The prompt it was taken in, so that prompt's report can name it.
        if let Some(running) = self.processing()? {
            metadata["messageId"] = Value::String(running.id);
        }
        let event = self
            .store
            .atomically(|| {
                self.store.execute(
                    "INSERT INTO artifacts (id, kind, url, metadata, created_at, artifact_key, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    &[
                        id.as_str().into(),
                        MEDIA_ARTIFACT.into(),
                        url.as_str().into(),
                        metadata.to_string().into(),
                        now.into(),
                        media_key(&attachment_id).as_str().into(),
                        now.into(),
                    ],
                )?;
                self.touch(now)?;
                let mut data = Map::new();
                data.insert("artifactId".into(), Value::String(id.clone()));
                data.insert("url".into(), Value::String(url.clone()));
                data.insert("caption".into(), Value::String(caption.into()));
                data.insert("mimeType".into(), Value::String(mime.into()));
                timeline::append(self.store, MEDIA_ARTIFACT, None, data, now)
            })
            .map_err(internal)?;
        let artifact = Artifact {
            id,
            kind: MEDIA_ARTIFACT.into(),
            url: Some(url),
            metadata: Some(metadata),
            created_at: now,
        };
        let mut fx = Effects::none();
        fx.broadcast(ServerMessage::SandboxEvent { event });
        fx.broadcast(ServerMessage::ArtifactCreated {
            artifact: artifact.clone(),
        });
        Ok((artifact, fx))
    }

    /// The captions of the pictures taken during a prompt, in the order taken.
    pub fn media_of(&self, message_id: &str) -> EngineResult<Vec<String>> {
        let rows = self
            .store
            .query(
                "SELECT metadata FROM artifacts WHERE kind = ? ORDER BY created_at, id",
                &[MEDIA_ARTIFACT.into()],
            )
            .map_err(internal)?;
        Ok(rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().and_then(|v| v.into_string()))
            .filter_map(|m| serde_json::from_str::<Value>(&m).ok())
            .filter(|m| m["messageId"] == message_id)
            .map(|m| m["caption"].as_str().unwrap_or_default().to_owned())
            .collect())
    }

    /// Where the running prompt's outcome is reported, when a prompt runs and says.
    pub fn running_callback(&self) -> EngineResult<Option<CallbackContext>> {
        let Some(running) = self.processing()? else {
            return Ok(None);
        };
        Ok(self
            .store
            .scalar(
                "SELECT callback FROM messages WHERE id = ?",
                &[running.id.as_str().into()],
            )
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .and_then(|c| serde_json::from_str::<CallbackContext>(&c).ok()))
    }

    /// A picture's type and bytes, when a media artifact names it.
    pub fn media(&self, attachment_id: &str) -> EngineResult<Option<(String, Vec<u8>)>> {
        let named = self
            .store
            .scalar(
                "SELECT COUNT(*) FROM artifacts WHERE artifact_key = ?",
                &[media_key(attachment_id).as_str().into()],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0)
            > 0;
        if !named {
            return Ok(None);
        }
        Ok(self
            .attachment(attachment_id)?
            .map(|(_, mime, bytes)| (mime, bytes)))
    }
}
