//! Pull-request decisions: which head and base branch, whether a branch name is acceptable,
//! the state a PR is in, the footer linking the session, and whether an earlier PR can be
//! reused. No I/O.

use inspect_protocol::ApiError;

pub use inspect_protocol::limits::check_branch;

/// The branch a session's work is pushed to when nothing else is asked.
pub fn session_branch(session_id: &str) -> String {
    format!("open-inspect/{}", session_id.to_ascii_lowercase())
}

/// The head branch: the one asked for, else the session's own.
pub fn choose_head(requested: Option<&str>, session_id: &str) -> Result<String, ApiError> {
    let head = match requested.map(str::trim).filter(|h| !h.is_empty()) {
        Some(h) => h.trim_start_matches("refs/heads/").to_owned(),
        None => session_branch(session_id),
    };
    check_branch(&head).map_err(ApiError::bad_request)?;
    Ok(head)
}

/// The base branch: the one asked for, else the session's base for that repository, else
/// the repository's default (looked up by the caller when this is `None`).
pub fn choose_base(
    requested: Option<&str>,
    session_base: Option<&str>,
) -> Result<Option<String>, ApiError> {
    if let Some(n) = session_base.and_then(inspect_protocol::scm::pull_head_ref) {
        return Err(ApiError::bad_request(format!(
            "this session works on pull request #{n}, which comes from a fork: nothing can be pushed to a fork's branch from here, and a new branch would not update that pull request; put the change in your answer as a patch (a ```diff block) instead"
        )));
    }
    let base = requested
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .or(session_base)
        .map(|b| b.trim_start_matches("refs/heads/").to_owned());
    if let Some(b) = &base {
        check_branch(b).map_err(ApiError::bad_request)?;
    }
    Ok(base)
}

/// A head equal to its base can make no pull request.
pub fn check_head_and_base(head: &str, base: &str) -> Result<(), ApiError> {
    if head == base {
        return Err(ApiError::bad_request(format!(
            "the head branch {head:?} is the base branch; push the work to another branch"
        )));
    }
    Ok(())
}

/// A PR's state as people read it: merged, then closed, then draft, then open.
pub fn state_of(state: &str, merged: bool, draft: bool) -> &'static str {
    if merged {
        "merged"
    } else if state == "closed" {
        "closed"
    } else if draft {
        "draft"
    } else {
        "open"
    }
}

/// Whether a PR in this state still takes pushes (a reused PR is updated by the push).
pub fn is_open(state: &str) -> bool {
    matches!(state, "open" | "draft")
}

/// The PR body with a footer linking the session it came from.
pub fn body_with_footer(body: &str, session_url: &str) -> String {
    let body = body.trim_end();
    let footer = format!("Created with [Open-Inspect]({session_url})");
    if body.contains(&footer) {
        return body.to_owned();
    }
    if body.is_empty() {
        format!("---\n{footer}")
    } else {
        format!("{body}\n\n---\n{footer}")
    }
}

/// The PR body with what the sandbox's egress policy refused listed at its end (nothing
/// added when nothing was): a reviewer sees what the work could not reach.
pub fn with_blocked_report(body: &str, blocked: &[String]) -> String {
    if blocked.is_empty() {
        return body.to_owned();
    }
    let mut out = body.trim_end().to_owned();
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(&format!(
        "**Blocked by the environment's egress policy** ({}):\n",
        blocked.len()
    ));
    for b in blocked {
        // A host name is letters, digits, dots and hyphens; anything else is shown escaped.
        let shown: String = b
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || ".-:[] ".contains(*c))
            .collect();
        out.push_str(&format!("- `{shown}`\n"));
    }
    out
}

/// A PR title: one line, trimmed, at most 256 characters.
pub fn check_title(title: &str) -> Result<String, ApiError> {
    let title = title.trim();
    if title.is_empty() {
        return Err(ApiError::bad_request("a pull request needs a title"));
    }
    if title.contains('\n') {
        return Err(ApiError::bad_request("a pull request title is one line"));
    }
    Ok(title.chars().take(256).collect())
}

/// The largest PR body accepted (GitHub's own limit is 65,536 characters).
pub const MAX_BODY_CHARS: usize = 60_000;

/// The REST path of a repository's label: the name percent-encoded as a path segment (a
/// space is `%20`; a form's `+` would name another label).
pub fn label_path(owner: &str, repo: &str, label: &str) -> String {
    format!(
        "/repos/{owner}/{repo}/labels/{}",
        inspect_protocol::vendor::encode(label)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_lists_what_was_blocked_once_and_only_when_something_was() {
        assert_eq!(with_blocked_report("Fix it.", &[]), "Fix it.");
        let body = with_blocked_report(
            "Fix it.\n",
            &["registry.example:443".into(), "POST x.io:80`<b>".into()],
        );
        assert_eq!(
            body,
            "Fix it.\n\n**Blocked by the environment's egress policy** (2):\n- `registry.example:443`\n- `POST x.io:80b`\n"
        );
    }

    #[test]
    fn branch_names_follow_the_reference() {
        for good in ["open-inspect/abc", "feature/x-1", "a", "fix_2.0"] {
            assert!(check_branch(good).is_ok(), "{good}");
        }
        for bad in [
            "", "HEAD", "/x", "x/", ".x", "x.", "a b", "a..b", "a@{b", "a~b", "a^b", "a:b", "a?b",
            "a*b", "a[b", "a\\b", "a//b", "x.lock", "a/.b", "-x", "a\tb",
        ] {
            assert!(check_branch(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(check_branch(&"x".repeat(251)).is_err());
    }

    #[test]
    fn head_defaults_to_the_session_branch() {
        assert_eq!(choose_head(None, "ABC123").unwrap(), "open-inspect/abc123");
        assert_eq!(choose_head(Some("  "), "s").unwrap(), "open-inspect/s");
        assert_eq!(
            choose_head(Some("refs/heads/feat/y"), "s").unwrap(),
            "feat/y"
        );
        assert!(choose_head(Some("bad name"), "s").is_err());
    }

    #[test]
    fn base_prefers_the_request_then_the_session() {
        assert_eq!(
            choose_base(Some("dev"), Some("main")).unwrap(),
            Some("dev".into())
        );
        assert_eq!(
            choose_base(None, Some("main")).unwrap(),
            Some("main".into())
        );
        assert_eq!(choose_base(None, None).unwrap(), None);
        assert!(choose_base(Some("a..b"), None).is_err());
        assert!(check_head_and_base("main", "main").is_err());
        let fork = choose_base(Some("main"), Some("pull/7/head")).unwrap_err();
        assert!(fork.message.contains("from a fork"), "{}", fork.message);
        assert!(check_head_and_base("x", "main").is_ok());
    }

    #[test]
    fn states_in_order() {
        assert_eq!(state_of("closed", true, false), "merged");
        assert_eq!(state_of("closed", false, true), "closed");
        assert_eq!(state_of("open", false, true), "draft");
        assert_eq!(state_of("open", false, false), "open");
        assert!(is_open("draft") && !is_open("merged"));
    }

    #[test]
    fn footer_once() {
        let b = body_with_footer("Fixes it.", "http://x/sessions/1");
        assert_eq!(
            b,
            "Fixes it.\n\n---\nCreated with [Open-Inspect](http://x/sessions/1)"
        );
        assert_eq!(body_with_footer(&b, "http://x/sessions/1"), b);
        assert!(body_with_footer("", "u").starts_with("---\n"));
        assert!(check_title(" a\nb").is_err());
        assert_eq!(check_title("  T ").unwrap(), "T");
    }

    #[test]
    fn a_label_with_a_space_is_one_path_segment() {
        assert_eq!(
            label_path("acme", "web", "needs review"),
            "/repos/acme/web/labels/needs%20review"
        );
    }
}
