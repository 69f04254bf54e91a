//! Slack channel triggers: what may be saved (channel and user ids, a pattern that reads),
//! and which messages a trigger takes. Pure; the Slack bot asks it for each channel message.

use inspect_protocol::automations::{
    SlackTrigger, TextMatch, MAX_PATTERN_CHARS, MAX_SLACK_CHANNELS, MAX_SLACK_USERS,
};
use inspect_protocol::ApiError;

/// The most a compiled pattern may take (regex-lite's own limit is far higher).
const MAX_COMPILED_BYTES: usize = 1 << 20;

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message)
}

/// A Slack id: `C…`, `G…` (channels) or `U…`, `W…` (people), letters and digits.
fn is_slack_id(id: &str, first: &[char]) -> bool {
    (2..=30).contains(&id.len())
        && id.starts_with(first)
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

fn compile(pattern: &str) -> Result<regex_lite::Regex, regex_lite::Error> {
    regex_lite::RegexBuilder::new(pattern)
        .size_limit(MAX_COMPILED_BYTES)
        .nest_limit(50)
        .build()
}

/// Checks a trigger as a person sent it and returns what is saved (trimmed, each id once).
pub fn validate(mut t: SlackTrigger) -> Result<SlackTrigger, ApiError> {
    let ids = |list: &mut Vec<String>, first: &[char], what: &str, most: usize| {
        for id in list.iter_mut() {
            *id = id.trim().to_owned();
            if !is_slack_id(id, first) {
                return Err(bad(format!("{id:?} is not a Slack {what} id")));
            }
        }
        list.sort();
        list.dedup();
        if list.len() > most {
            return Err(bad(format!("at most {most} {what}s")));
        }
        Ok(())
    };
    ids(&mut t.channels, &['C', 'G'], "channel", MAX_SLACK_CHANNELS)?;
    if t.channels.is_empty() {
        return Err(bad("a Slack trigger watches at least one channel"));
    }
    ids(&mut t.users_allowed, &['U', 'W'], "user", MAX_SLACK_USERS)?;
    ids(&mut t.users_denied, &['U', 'W'], "user", MAX_SLACK_USERS)?;
    check_pattern(t.text_match, &t.pattern)?;
    Ok(t)
}

/// Checks a text pattern as saved: bounded, not empty where it must say something, and a
/// regex that reads within the limits. Shared with GitHub comment triggers.
pub(crate) fn check_pattern(kind: TextMatch, pattern: &str) -> Result<(), ApiError> {
    if pattern.chars().count() > MAX_PATTERN_CHARS {
        return Err(bad(format!(
            "a pattern is at most {MAX_PATTERN_CHARS} characters"
        )));
    }
    match kind {
        TextMatch::Contains => {}
        TextMatch::Exact if pattern.trim().is_empty() => {
            return Err(bad("an exact match needs its text"))
        }
        TextMatch::Exact => {}
        TextMatch::Regex => {
            if pattern.is_empty() {
                return Err(bad("a regex match needs its pattern"));
            }
            compile(pattern).map_err(|e| bad(format!("the pattern does not read: {e}")))?;
        }
    }
    Ok(())
}

/// Whether `text` matches a saved pattern (case-insensitively for `contains` and `exact`).
pub(crate) fn text_matches(kind: TextMatch, pattern: &str, text: &str) -> bool {
    match kind {
        TextMatch::Contains => text.to_lowercase().contains(&pattern.to_lowercase()),
        TextMatch::Exact => text.trim().to_lowercase() == pattern.trim().to_lowercase(),
        // Saved patterns were checked; one that no longer reads takes nothing.
        TextMatch::Regex => compile(pattern).is_ok_and(|r| r.is_match(text)),
    }
}

/// Whether the trigger's people lists admit `user` (denied wins; an empty allow list
/// allows everyone): for the message that starts a run and for every reply after it.
pub fn admits(t: &SlackTrigger, user: &str) -> bool {
    !t.users_denied.iter().any(|u| u == user)
        && (t.users_allowed.is_empty() || t.users_allowed.iter().any(|u| u == user))
}

/// Whether the trigger takes a top-level message by `user` in `channel` saying `text`.
pub fn takes(t: &SlackTrigger, channel: &str, user: &str, text: &str) -> bool {
    t.channels.iter().any(|c| c == channel)
        && admits(t, user)
        && text_matches(t.text_match, &t.pattern, text)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn trigger(kind: TextMatch, pattern: &str) -> SlackTrigger {
        SlackTrigger {
            channels: vec![" C0SUPPORT ".into()],
            text_match: kind,
            pattern: pattern.into(),
            users_allowed: vec![],
            users_denied: vec![],
        }
    }

    #[test]
    fn what_is_saved_and_what_is_refused() {
        let t = validate(trigger(TextMatch::Contains, "")).unwrap();
        assert_eq!(t.channels, vec!["C0SUPPORT".to_owned()]);
        let refused = |t: SlackTrigger| validate(t).unwrap_err().message;
        assert!(refused(trigger(TextMatch::Regex, "(unclosed")).contains("does not read"));
        assert!(refused(trigger(TextMatch::Regex, "")).contains("needs its pattern"));
        assert!(refused(trigger(TextMatch::Exact, "  ")).contains("needs its text"));
        assert!(refused(trigger(TextMatch::Contains, &"a".repeat(501))).contains("at most 500"));
        let mut t = trigger(TextMatch::Contains, "x");
        t.channels = vec!["#general".into()];
        assert!(refused(t).contains("not a Slack channel id"));
        let mut t = trigger(TextMatch::Contains, "x");
        t.channels = vec![];
        assert!(refused(t).contains("at least one channel"));
        let mut t = trigger(TextMatch::Contains, "x");
        t.users_denied = vec!["bob".into()];
        assert!(refused(t).contains("not a Slack user id"));
        let mut t = trigger(TextMatch::Contains, "x");
        t.channels = (0..21).map(|i| format!("C{i:04}")).collect();
        assert!(refused(t).contains("at most 20"));
        // A pattern that compiles to more than the limit is refused, not run.
        assert!(
            refused(trigger(TextMatch::Regex, "((a{100}){100}){100}")).contains("does not read")
        );
    }

    #[test]
    fn which_messages_are_taken() {
        let t = validate(trigger(TextMatch::Contains, "Deploy Failed")).unwrap();
        assert!(takes(&t, "C0SUPPORT", "U1", "the deploy failed again"));
        assert!(!takes(&t, "C0OTHER", "U1", "the deploy failed again"));
        assert!(!takes(&t, "C0SUPPORT", "U1", "all good"));
        let t = validate(trigger(TextMatch::Exact, "help")).unwrap();
        assert!(takes(&t, "C0SUPPORT", "U1", " Help "));
        assert!(!takes(&t, "C0SUPPORT", "U1", "help me"));
        let t = validate(trigger(TextMatch::Regex, r"^(bug|crash):\s+\S")).unwrap();
        assert!(takes(&t, "C0SUPPORT", "U1", "crash: login page"));
        assert!(!takes(&t, "C0SUPPORT", "U1", "a crash: login page"));
        let mut t = trigger(TextMatch::Contains, "");
        t.users_allowed = vec!["U1".into(), "U2".into()];
        t.users_denied = vec!["U2".into()];
        let t = validate(t).unwrap();
        assert!(takes(&t, "C0SUPPORT", "U1", "anything"));
        assert!(!takes(&t, "C0SUPPORT", "U2", "anything"), "denied wins");
        assert!(!takes(&t, "C0SUPPORT", "U3", "anything"), "not allowed");
    }
}
