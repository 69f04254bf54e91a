//! The bot's review before it is sent: which lines of a pull request's diff a comment may
//! sit on (GitHub refuses a review whose comment is on any other with 422), the comments
//! that may not (folded into the review's body, not lost), and the verdict the repository
//! lets the bot give (a verdict it may not give becomes a comment, and says so).

use inspect_protocol::scm::{
    DiffSide as Side, ReviewComment as DraftComment, ReviewRequest, ReviewVerdict as Verdict,
    MAX_REVIEW_COMMENTS, MAX_REVIEW_TEXT_CHARS,
};
use inspect_protocol::ApiError;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

fn words(v: Verdict) -> &'static str {
    match v {
        Verdict::Comment => "comment",
        Verdict::Approve => "approve",
        Verdict::RequestChanges => "request changes",
    }
}

/// What the agent sent, checked before anything reaches GitHub: bounded texts, real paths
/// and lines, a comment that says something.
pub fn check(req: &ReviewRequest) -> Result<(), ApiError> {
    if req.body.chars().count() > MAX_REVIEW_TEXT_CHARS {
        return Err(ApiError::bad_request(format!(
            "a review's body is at most {MAX_REVIEW_TEXT_CHARS} characters"
        )));
    }
    if req.comments.len() > MAX_REVIEW_COMMENTS {
        return Err(ApiError::bad_request(format!(
            "a review has at most {MAX_REVIEW_COMMENTS} comments; put the rest in its body"
        )));
    }
    for (i, c) in req.comments.iter().enumerate() {
        let n = i + 1;
        if c.path.trim().is_empty() || c.path.len() > 1024 || c.path.contains('\0') {
            return Err(ApiError::bad_request(format!(
                "comment {n}: a path in the repository is required"
            )));
        }
        if c.line == 0 || c.line > 10_000_000 {
            return Err(ApiError::bad_request(format!(
                "comment {n}: line {} is not a line number",
                c.line
            )));
        }
        if c.body.trim().is_empty() || c.body.chars().count() > MAX_REVIEW_TEXT_CHARS {
            return Err(ApiError::bad_request(format!(
                "comment {n}: its text is 1 to {MAX_REVIEW_TEXT_CHARS} characters"
            )));
        }
    }
    if req.event == Verdict::RequestChanges && req.body.trim().is_empty() {
        return Err(ApiError::bad_request(
            "a review that requests changes says why in its body",
        ));
    }
    Ok(())
}

/// The verdicts the bot may give on a pull request besides a comment: the repository's
/// choice, none on a pull request the bot opened (GitHub refuses approving one's own).
pub fn allowed_verdicts(
    settings: &inspect_protocol::scm::RepoSettings,
    pr_author: &str,
    bot_login: &str,
) -> Vec<Verdict> {
    let own = pr_author.eq_ignore_ascii_case(bot_login)
        || pr_author.eq_ignore_ascii_case(crate::webhook::bot_base_name(bot_login));
    if own {
        return Vec::new();
    }
    settings
        .review_verdicts
        .iter()
        .copied()
        .filter(|v| *v != Verdict::Comment)
        .collect()
}

/// The session's link under the review's body.
pub fn with_footer(body: &str, session_url: &str) -> String {
    format!(
        "{}\n\n---\n🔎 [View the session]({session_url})",
        body.trim()
    )
}

/// What is sent to `POST /repos/{owner}/{repo}/pulls/{number}/reviews`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewPlan {
    pub event: Verdict,
    pub body: String,
    pub comments: Vec<DraftComment>,
}

/// The lines of one file's patch (GitHub's `patch` of a pull request's file) a comment may
/// sit on: the old file's removed and context lines (left), the new file's added and
/// context lines (right).
pub fn commentable(patch: &str) -> (BTreeSet<u64>, BTreeSet<u64>) {
    let (mut left, mut right) = (BTreeSet::new(), BTreeSet::new());
    let (mut old, mut new) = (0u64, 0u64);
    let mut in_hunk = false;
    for line in patch.lines() {
        if let Some(header) = line.strip_prefix("@@ ") {
            // `@@ -a,b +c,d @@ …`: the old and new first lines.
            let mut parts = header.split_whitespace();
            let start = |p: Option<&str>, sign: char| {
                p.and_then(|p| p.strip_prefix(sign))
                    .and_then(|p| p.split(',').next())
                    .and_then(|n| n.parse::<u64>().ok())
            };
            match (start(parts.next(), '-'), start(parts.next(), '+')) {
                (Some(a), Some(c)) => {
                    (old, new, in_hunk) = (a, c, true);
                }
                _ => in_hunk = false,
            }
            continue;
        }
        if !in_hunk {
            continue;
        }
        match line.chars().next() {
            Some('+') => {
                right.insert(new);
                new += 1;
            }
            Some('-') => {
                left.insert(old);
                old += 1;
            }
            Some('\\') => {}
            _ => {
                left.insert(old);
                right.insert(new);
                old += 1;
                new += 1;
            }
        }
    }
    (left, right)
}

/// The review to send: comments on lines of the diff stay inline; the others go into the
/// body under a heading, with where they were meant; the verdict is the one asked when the
/// repository allows it, else a comment that says what was meant.
pub fn plan(
    files: &[(String, Option<String>)],
    drafts: Vec<DraftComment>,
    body: &str,
    asked: Verdict,
    allowed: &[Verdict],
) -> ReviewPlan {
    let lines: BTreeMap<&str, (BTreeSet<u64>, BTreeSet<u64>)> = files
        .iter()
        .map(|(path, patch)| {
            (
                path.as_str(),
                patch.as_deref().map(commentable).unwrap_or_default(),
            )
        })
        .collect();
    let (mut inline, mut folded) = (Vec::new(), Vec::new());
    for c in drafts {
        let on_diff = lines
            .get(c.path.as_str())
            .is_some_and(|(left, right)| match c.side {
                Side::Left => left.contains(&c.line),
                Side::Right => right.contains(&c.line),
            });
        if on_diff {
            inline.push(c);
        } else {
            folded.push(c);
        }
    }
    let event = if asked == Verdict::Comment || allowed.contains(&asked) {
        asked
    } else {
        Verdict::Comment
    };
    let mut text = body.trim().to_owned();
    if event != asked {
        text.push_str(&format!(
            "\n\n_(The agent would {}; this repository lets the bot only {}.)_",
            words(asked),
            allowed
                .iter()
                .chain(std::iter::once(&Verdict::Comment))
                .map(|v| words(*v))
                .collect::<Vec<_>>()
                .join(" or ")
        ));
    }
    if !folded.is_empty() {
        text.push_str("\n\n**Comments on lines outside the diff**\n");
        for c in &folded {
            text.push_str(&format!(
                "\n- `{}` line {}: {}",
                c.path,
                c.line,
                c.body.trim()
            ));
        }
    }
    if text.trim().is_empty() && inline.is_empty() {
        text = "Reviewed: nothing to add.".into();
    }
    ReviewPlan {
        event,
        body: text.trim().to_owned(),
        comments: inline,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PATCH: &str = "@@ -1,4 +1,5 @@\n fn main() {\n-    old();\n+    new();\n+    more();\n }\n \n@@ -20,2 +21,2 @@ impl X {\n-    a\n+    b\n     c\n\\ No newline at end of file";

    #[test]
    fn the_lines_a_comment_may_sit_on() {
        let (left, right) = commentable(PATCH);
        assert_eq!(
            left.into_iter().collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 20, 21]
        );
        assert_eq!(
            right.into_iter().collect::<Vec<_>>(),
            vec![1, 2, 3, 4, 5, 21, 22]
        );
    }

    #[test]
    fn comments_off_the_diff_are_folded_and_verdicts_follow_the_repository() {
        let files = vec![
            ("src/main.rs".to_owned(), Some(PATCH.to_owned())),
            ("logo.png".to_owned(), None),
        ];
        let draft = |path: &str, line: u64, side: Side| DraftComment {
            path: path.into(),
            line,
            side,
            body: format!("about {path}:{line}"),
        };
        let p = plan(
            &files,
            vec![
                draft("src/main.rs", 3, Side::Right),
                draft("src/main.rs", 2, Side::Left),
                draft("src/main.rs", 10, Side::Right),
                draft("logo.png", 1, Side::Right),
                draft("elsewhere.rs", 1, Side::Right),
            ],
            "Looks right.",
            Verdict::Approve,
            &[Verdict::Approve],
        );
        assert_eq!(p.event, Verdict::Approve);
        assert_eq!(p.comments.len(), 2);
        assert!(p.body.starts_with("Looks right."));
        for gone in [
            "`src/main.rs` line 10",
            "`logo.png` line 1",
            "`elsewhere.rs` line 1",
        ] {
            assert!(p.body.contains(gone), "{}", p.body);
        }
        // Not allowed to approve or request changes: a comment that says so.
        let p = plan(&files, vec![], "Needs work.", Verdict::RequestChanges, &[]);
        assert_eq!(p.event, Verdict::Comment);
        assert!(p.body.contains("would request changes"), "{}", p.body);
        // Nothing at all still says something (GitHub refuses an empty comment review).
        let p = plan(&files, vec![], "  ", Verdict::Comment, &[]);
        assert_eq!(p.body, "Reviewed: nothing to add.");
        assert_eq!(
            serde_json::to_value(Verdict::RequestChanges).unwrap(),
            "REQUEST_CHANGES"
        );
        assert_eq!(serde_json::to_value(Side::Left).unwrap(), "LEFT");
    }
}
