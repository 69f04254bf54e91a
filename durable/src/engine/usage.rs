//! What a session has used, read from what it already keeps when its index row is written
//! (once a prompt is queued or ends, a sandbox stops, a pull request changes), never on the
//! event hot path: prompts, tool calls, the model's tokens and cost as the agent reported
//! them per step, sandbox time, and when its first pull request came.

use super::{internal, pulls, sandbox, EngineResult, Session};
use crate::store::{Cols, Store};
use inspect_protocol::session::SessionUsage;
use inspect_protocol::ApiError;

/// Milliseconds a sandbox was live, from its status changes in order (`(at, status)`): each
/// stretch from entering a live state to leaving them, the last one up to `now` while live.
/// A spawn the provider refused for want of room (`waiting`) made no sandbox: its stretch
/// counts nothing.
pub fn sandbox_ms(changes: &[(i64, String)], now: i64) -> i64 {
    let mut total = 0;
    let mut since: Option<i64> = None;
    for (at, status) in changes {
        let live = sandbox::LIVE_STATES.contains(&status.as_str());
        match (live, since) {
            (true, None) => since = Some(*at),
            (false, Some(start)) => {
                if status != sandbox::WAITING {
                    total += (at - start).max(0);
                }
                since = None;
            }
            _ => {}
        }
    }
    if let Some(start) = since {
        total += (now - start).max(0);
    }
    total
}

/// The prompts' text as the index keeps it: in order, a line each, cut at
/// [`MAX_INDEXED_PROMPT_TEXT`](inspect_protocol::limits::MAX_INDEXED_PROMPT_TEXT) bytes on
/// a character's boundary.
pub fn indexed_text(prompts: &[String]) -> String {
    let max = inspect_protocol::limits::MAX_INDEXED_PROMPT_TEXT;
    let mut out = String::new();
    for p in prompts {
        for c in p.chars().chain(std::iter::once('\n')) {
            if out.len() + c.len_utf8() > max {
                return out;
            }
            out.push(c);
        }
    }
    out
}

impl<S: Store> Session<'_, S> {
    /// The prompts' text, for search (see [`indexed_text`]).
    pub fn prompt_text(&self) -> EngineResult<String> {
        let prompts: Vec<String> = self
            .store
            .query(
                "SELECT substr(content, 1, ?) FROM messages ORDER BY seq LIMIT 50",
                &[(inspect_protocol::limits::MAX_INDEXED_PROMPT_TEXT as i64).into()],
            )
            .map_err(internal)?
            .into_iter()
            .filter_map(|r| r.into_iter().next().and_then(|v| v.into_string()))
            .collect();
        Ok(indexed_text(&prompts))
    }

    pub fn usage(&self, now: i64) -> EngineResult<SessionUsage> {
        let row = self
            .store
            .query(
                "SELECT
                    (SELECT COUNT(*) FROM messages),
                    (SELECT COUNT(DISTINCT json_extract(data, '$.callId')) FROM events WHERE kind = 'tool_call'),
                    (SELECT COALESCE(SUM(json_extract(data, '$.tokens.input')), 0) FROM events WHERE kind = 'step_finish'),
                    (SELECT COALESCE(SUM(json_extract(data, '$.tokens.output')), 0) FROM events WHERE kind = 'step_finish'),
                    (SELECT CAST(ROUND(COALESCE(SUM(json_extract(data, '$.cost')), 0) * 1000000) AS INTEGER) FROM events WHERE kind = 'step_finish'),
                    (SELECT MIN(created_at) FROM artifacts WHERE kind = ?)",
                &[pulls::PR_ARTIFACT.into()],
            )
            .map_err(internal)?
            .into_iter()
            .next()
            .ok_or_else(|| ApiError::internal("the usage query returned nothing"))?;
        let mut c = Cols::new(row);
        let prompts = c.i64().map_err(internal)?;
        let tool_calls = c.i64().map_err(internal)?;
        let tokens_in = c.i64().map_err(internal)?;
        let tokens_out = c.i64().map_err(internal)?;
        let cost_micros = c.i64().map_err(internal)?;
        let first_pr_at = c.opt_i64().map_err(internal)?;
        let changes: Vec<(i64, String)> = self
            .store
            .query(
                "SELECT timestamp, json_extract(data, '$.status') FROM events WHERE kind = 'sandbox_status' ORDER BY seq",
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .filter_map(|row| {
                let mut c = Cols::new(row);
                Some((c.i64().ok()?, c.string().ok()?))
            })
            .collect();
        Ok(SessionUsage {
            prompts,
            tool_calls,
            tokens_in,
            tokens_out,
            cost_micros,
            sandbox_ms: sandbox_ms(&changes, now),
            first_pr_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::sandbox_ms;

    #[test]
    fn the_indexed_text_is_cut_on_a_character() {
        assert_eq!(
            super::indexed_text(&["fix the login".into(), "and the footer".into()]),
            "fix the login\nand the footer\n"
        );
        let long = "é".repeat(5000);
        let cut = super::indexed_text(&[long]);
        assert!(cut.len() <= inspect_protocol::limits::MAX_INDEXED_PROMPT_TEXT);
        assert!(cut.chars().all(|c| c == 'é'));
    }

    #[test]
    fn sandbox_time_is_the_live_stretches() {
        let s = |at: i64, st: &str| (at, st.to_owned());
        let changes = [
            s(100, "spawning"),
            s(150, "ready"),
            s(1100, "stopped"),
            s(2000, "spawning"),
            s(2100, "failed"),
            s(3000, "spawning"),
            s(3500, "running"),
        ];
        assert_eq!(sandbox_ms(&changes, 4000), 1000 + 100 + 1000);
        assert_eq!(sandbox_ms(&[], 4000), 0);
        assert_eq!(sandbox_ms(&[s(10, "stopped")], 4000), 0);
        // Refused for want of room, then made: only the sandbox that was made counts.
        let waited = [
            s(100, "spawning"),
            s(120, "waiting"),
            s(5000, "spawning"),
            s(5100, "ready"),
        ];
        assert_eq!(sandbox_ms(&waited, 6000), 1000);
    }
}
