//! Limits, timeouts and close codes shared by both ends of every connection.

/// Largest prompt accepted, in bytes of UTF-8.
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;
/// Largest client WebSocket frame accepted, in bytes.
pub const MAX_CLIENT_FRAME_BYTES: usize = 256 * 1024;
/// Unfinished (pending + processing) prompts allowed in one session.
pub const MAX_UNFINISHED_PROMPTS: usize = 10;
/// Events sent on subscribe (heartbeats excluded).
pub const SUBSCRIBE_EVENT_WINDOW: usize = 500;
/// Default and maximum page sizes for event history.
pub const HISTORY_PAGE_DEFAULT: usize = 200;
pub const HISTORY_PAGE_MAX: usize = 500;
/// Repositories one session may hold.
pub const MAX_SESSION_REPOSITORIES: usize = 10;
/// Longest session title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// A client WS token lives this long.
pub const WS_TOKEN_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// A socket that has not subscribed by then is closed with [`CLOSE_SUBSCRIBE_TIMEOUT`].
pub const SUBSCRIBE_DEADLINE_MS: i64 = 30_000;

/// Close code: authentication required, invalid or expired.
pub const CLOSE_AUTH: u16 = 4001;
/// Close code: this socket already subscribed.
pub const CLOSE_ALREADY_SUBSCRIBED: u16 = 4003;
/// Close code: no subscribe within [`SUBSCRIBE_DEADLINE_MS`].
pub const CLOSE_SUBSCRIBE_TIMEOUT: u16 = 4008;
/// Ports one session may expose.
pub const MAX_TUNNEL_PORTS: usize = 10;
/// Every reasoning effort a model of the catalog may accept (the agent gets it as the
/// model's variant of that name); each model accepts some of them (`inspect-models`).
pub const REASONING_EFFORTS: &[&str] =
    &["none", "minimal", "low", "medium", "high", "xhigh", "max"];
/// A file kept for prompts (`POST /sessions/:id/attachments`, a Slack image) is at most this.
pub const MAX_ATTACHMENT_FILE_BYTES: usize = 10 * 1024 * 1024;
/// Files one session keeps for its prompts.
pub const MAX_SESSION_ATTACHMENTS: usize = 60;

/// Prompts one person may send to one session per minute, unless the deployment says
/// otherwise (`RATE_LIMIT_PROMPTS_PER_MINUTE`).
pub const DEFAULT_PROMPTS_PER_MINUTE: u32 = 20;
/// Sessions one person may create per hour, unless the deployment says otherwise
/// (`RATE_LIMIT_SESSIONS_PER_HOUR`).
pub const DEFAULT_SESSIONS_PER_HOUR: u32 = 60;

/// A sliding window: with `recent` the times (ms, oldest first) of what was allowed within
/// the last `window_ms`, may one more happen `now`? `Err` carries the seconds until it
/// may.
pub fn sliding_window(recent: &[i64], limit: u32, window_ms: i64, now: i64) -> Result<(), u64> {
    let in_window: Vec<i64> = recent
        .iter()
        .copied()
        .filter(|t| *t > now - window_ms)
        .collect();
    if (in_window.len() as u64) < u64::from(limit) {
        return Ok(());
    }
    // The oldest that must leave the window before one more fits.
    let idx = in_window.len() - limit as usize;
    let frees_at = in_window.get(idx).copied().unwrap_or(now) + window_ms;
    Err(((frees_at - now).max(1) as u64).div_ceil(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sliding_window_counts_only_what_is_inside() {
        assert_eq!(sliding_window(&[], 2, 60_000, 1_000), Ok(()));
        assert_eq!(sliding_window(&[10_000], 2, 60_000, 20_000), Ok(()));
        // Full: the oldest leaves at 70 s, 50 s from now.
        assert_eq!(
            sliding_window(&[10_000, 15_000], 2, 60_000, 20_000),
            Err(50)
        );
        // Older than the window: not counted.
        assert_eq!(sliding_window(&[1_000, 15_000], 2, 10_000, 20_000), Ok(()));
        // A limit of zero never allows.
        assert!(sliding_window(&[], 0, 60_000, 0).is_err());
    }
}

/// A repository owner's or name's part as GitHub allows them (letters, digits, `-_.`, at
/// most 100, never `.` or `..`), so local and hosted repositories share one namespace.
pub fn valid_repo_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The one check for every branch name a person, a bot or a webhook hands us (sessions,
/// environments, images, pull requests): what git and GitHub accept, and only characters
/// no shell gives a meaning to. Refused: `HEAD`, a leading `/`, `.` or `-`, a trailing `/`
/// or `.`, `..`, `@{`, `//`, a component starting with `.` or ending with `.lock`, and any
/// character but ASCII letters, digits and `-_./+#@,=`; at most 250 bytes.
pub fn check_branch(name: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("invalid branch name {name:?}: {why}"));
    if name.is_empty() || name.len() > 250 {
        return bad("1 to 250 characters");
    }
    if name == "HEAD" {
        return bad("HEAD is not a branch");
    }
    if let Some(c) = name
        .chars()
        .find(|c| !c.is_ascii_alphanumeric() && !"-_./+#@,=".contains(*c))
    {
        return bad(&format!(
            "{c:?} is not allowed (letters, digits and -_./+#@,= only)"
        ));
    }
    if name.starts_with(['/', '.', '-']) || name.ends_with(['/', '.']) {
        return bad("it may not start with '/', '.' or '-', nor end with '/' or '.'");
    }
    if name.contains("..") || name.contains("@{") || name.contains("//") {
        return bad("'..', '@{' and '//' are not allowed");
    }
    if name.ends_with(".lock")
        || name
            .split('/')
            .any(|p| p.starts_with('.') || p.ends_with(".lock"))
    {
        return bad("no component may start with '.' or end with '.lock'");
    }
    Ok(())
}

#[cfg(test)]
mod branch_tests {
    use super::check_branch;

    #[test]
    fn branch_names_follow_git_and_refuse_shell_syntax() {
        for good in [
            "open-inspect/abc",
            "feature/x-1",
            "a",
            "fix_2.0",
            "user@x/fix#12",
            "v1+build",
        ] {
            assert!(check_branch(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "HEAD",
            "/x",
            "x/",
            ".x",
            "x.",
            "a b",
            "a..b",
            "a@{b",
            "a~b",
            "a^b",
            "a:b",
            "a?b",
            "a*b",
            "a[b",
            "a\\b",
            "a//b",
            "x.lock",
            "a/.b",
            "-x",
            "a\tb",
            "main;touch${IFS}/tmp/x",
            "a$(id)",
            "a`id`",
            "a|b",
            "a&b",
            "a>b",
            "a'b",
            "a\"b",
            "a\nb",
            "ünï",
        ] {
            assert!(check_branch(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(check_branch(&"x".repeat(251)).is_err());
    }
}

/// How much of a session's prompts the sessions index keeps for search.
pub const MAX_INDEXED_PROMPT_TEXT: usize = 4096;
