//! Events that may need people outside the session (their inbox, a notification): a
//! prompt ended (for its author: finished, failed, or a question back to them), and a
//! prompt that names people with `@`. The engine says what happened and whom the session
//! knows it is for; the control plane finds the people and fills their inboxes.

use super::{internal, EngineResult, Session};
use crate::store::Store;
use inspect_protocol::inbox::{self, Attention, InboxKind};
use inspect_protocol::scm::CallbackContext;
use serde_json::Value;

impl<S: Store> Session<'_, S> {
    /// The agent's last words in a prompt: its newest streamed text.
    pub(crate) fn last_words(&self, message_id: &str) -> EngineResult<Option<String>> {
        Ok(self
            .store
            .scalar(
                "SELECT data FROM events WHERE message_id = ? AND kind = 'token' ORDER BY seq DESC LIMIT 1",
                &[message_id.into()],
            )
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .and_then(|d| serde_json::from_str::<Value>(&d).ok())
            .and_then(|d| d["content"].as_str().map(str::to_owned)))
    }

    /// What a person calls this session in a list: its title, else its repository.
    fn headline(&self) -> EngineResult<String> {
        let row = self
            .store
            .query("SELECT title, repositories FROM session WHERE id = 1", &[])
            .map_err(internal)?
            .into_iter()
            .next()
            .unwrap_or_default();
        let mut cols = row.into_iter();
        let title = cols.next().and_then(|v| v.into_string());
        let repositories: Vec<inspect_protocol::repository::RepositoryRef> = cols
            .next()
            .and_then(|v| v.into_string())
            .and_then(|r| serde_json::from_str(&r).ok())
            .unwrap_or_default();
        Ok(title
            .filter(|t| !t.trim().is_empty())
            .or_else(|| {
                repositories
                    .first()
                    .map(|r| format!("{}/{}", r.owner, r.name))
            })
            .unwrap_or_else(|| "A session".into()))
    }

    /// The user a participant is (`github:…`, or an identity a bot knows them by).
    fn user_of(&self, participant_id: &str) -> EngineResult<Option<String>> {
        Ok(self
            .store
            .scalar(
                "SELECT user_id FROM participants WHERE id = ?",
                &[participant_id.into()],
            )
            .map_err(internal)?
            .and_then(|v| v.into_string()))
    }

    /// A prompt that ended, for its author (unless they are watching the session live: a
    /// subscribed client of theirs saw it end).
    pub(crate) fn prompt_ended(
        &self,
        message_id: &str,
        success: bool,
        error: Option<&str>,
    ) -> EngineResult<Option<Attention>> {
        let Some(m) = self.message(message_id)? else {
            return Ok(None);
        };
        if self.has_subscribed_socket(&m.author_id)? {
            return Ok(None);
        }
        let Some(author) = self.user_of(&m.author_id)? else {
            return Ok(None);
        };
        let words = self.last_words(message_id)?.unwrap_or_default();
        // An automation's run is its owner's prompt: its failure is the automation's.
        let automated = self
            .store
            .scalar(
                "SELECT callback FROM messages WHERE id = ?",
                &[message_id.into()],
            )
            .map_err(internal)?
            .and_then(|v| v.into_string())
            .and_then(|c| serde_json::from_str::<CallbackContext>(&c).ok())
            .is_some_and(|c| matches!(c, CallbackContext::Automation(_)));
        let (kind, detail) = match (success, error) {
            (false, e) => (
                if automated {
                    InboxKind::AutomationFailed
                } else {
                    InboxKind::PromptFailed
                },
                e.unwrap_or("the prompt failed").to_owned(),
            ),
            (true, _) if inbox::asks_question(&words) => (InboxKind::Question, words),
            (true, _) if words.trim().is_empty() => (InboxKind::PromptFinished, m.content),
            (true, _) => (InboxKind::PromptFinished, words),
        };
        Ok(Some(Attention {
            kind,
            session_id: self.session_id()?,
            people: vec![author],
            mentions: Vec::new(),
            by: None,
            title: self.headline()?,
            detail: inbox::detail_line(&detail),
            key: format!("prompt:{message_id}"),
        }))
    }

    /// A prompt that names people (`@login`): each is told, but not its author.
    pub(crate) fn prompt_mentions(
        &self,
        author_user: &str,
        message_id: &str,
        content: &str,
    ) -> EngineResult<Option<Attention>> {
        let mentions = inbox::mentions(content);
        if mentions.is_empty() {
            return Ok(None);
        }
        Ok(Some(Attention {
            kind: InboxKind::Mention,
            session_id: self.session_id()?,
            people: Vec::new(),
            mentions,
            by: Some(author_user.to_owned()),
            title: self.headline()?,
            detail: inbox::detail_line(content),
            key: format!("mention:{message_id}"),
        }))
    }
}
