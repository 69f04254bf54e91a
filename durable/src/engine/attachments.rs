//! Files attached to prompts (a Slack message's images, a file sent with the API): kept in
//! the session in chunks, listed on the prompt by id, fetched by the session's sandbox.

use super::{ids, internal, EngineResult, Session};
use crate::store::{Cols, SqlValue, Store};
use inspect_protocol::session::Attachment;
use inspect_protocol::ApiError;

use inspect_protocol::limits::{
    MAX_ATTACHMENT_FILE_BYTES as MAX_ATTACHMENT_BYTES, MAX_SESSION_ATTACHMENTS as MAX_ATTACHMENTS,
};
const CHUNK: usize = 1024 * 1024;

pub use inspect_protocol::session::safe_file_name as safe_name;

impl<S: Store> Session<'_, S> {
    /// Keeps a file for the session's prompts; what a prompt lists to carry it.
    pub fn store_attachment(
        &self,
        name: &str,
        mime_type: &str,
        bytes: &[u8],
        now: i64,
    ) -> EngineResult<Attachment> {
        self.session_id()?;
        if bytes.is_empty() || bytes.len() > MAX_ATTACHMENT_BYTES {
            return Err(ApiError::bad_request("an attachment is 1 byte to 10 MiB"));
        }
        let mime = mime_type.trim();
        if mime.is_empty() || mime.len() > 100 || !mime.contains('/') {
            return Err(ApiError::bad_request("an attachment needs its media type"));
        }
        let count = self
            .store
            .scalar("SELECT COUNT(*) FROM attachments", &[])
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        if count >= MAX_ATTACHMENTS as i64 {
            return Err(ApiError::new(
                inspect_protocol::ErrorCode::Conflict,
                format!("a session keeps at most {MAX_ATTACHMENTS} attachments"),
            ));
        }
        let id = ids::new_id("att");
        let name = safe_name(name);
        self.store
            .atomically(|| {
                self.store.execute(
                    "INSERT INTO attachments (id, name, mime_type, bytes, created_at) VALUES (?, ?, ?, ?, ?)",
                    &[
                        id.as_str().into(),
                        name.as_str().into(),
                        mime.into(),
                        (bytes.len() as i64).into(),
                        now.into(),
                    ],
                )?;
                for (i, part) in bytes.chunks(CHUNK).enumerate() {
                    self.store.execute(
                        "INSERT INTO attachment_chunks (attachment_id, idx, data) VALUES (?, ?, ?)",
                        &[id.as_str().into(), (i as i64).into(), SqlValue::Blob(part.to_vec())],
                    )?;
                }
                Ok(())
            })
            .map_err(internal)?;
        Ok(Attachment {
            kind: if mime.starts_with("image/") {
                "image"
            } else {
                "file"
            }
            .into(),
            name,
            url: None,
            content: None,
            mime_type: Some(mime.to_owned()),
            attachment_id: Some(id),
        })
    }

    /// A kept file: its name, media type and bytes.
    pub fn attachment(&self, id: &str) -> EngineResult<Option<(String, String, Vec<u8>)>> {
        let meta = self
            .store
            .query(
                "SELECT name, mime_type FROM attachments WHERE id = ?",
                &[id.into()],
            )
            .map_err(internal)?;
        let Some(row) = meta.into_iter().next() else {
            return Ok(None);
        };
        let mut c = Cols::new(row);
        let (name, mime) = (c.string().map_err(internal)?, c.string().map_err(internal)?);
        let chunks = self
            .store
            .query(
                "SELECT data FROM attachment_chunks WHERE attachment_id = ? ORDER BY idx",
                &[id.into()],
            )
            .map_err(internal)?;
        let mut bytes = Vec::new();
        for row in chunks {
            if let Some(SqlValue::Blob(b)) = row.into_iter().next() {
                bytes.extend_from_slice(&b);
            }
        }
        Ok(Some((name, mime, bytes)))
    }
}
