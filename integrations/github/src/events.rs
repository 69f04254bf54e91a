//! A GitHub App delivery read as an automation event ([`GithubEventChange`]): a completed
//! check suite or check run, a pull request or issue event, a new comment, a push to a
//! branch. Read leniently (GitHub sends `null` for much), as GitHub's webhook reference
//! documents each payload; anything else is no event. Pure.

use inspect_protocol::automations::{GithubEventChange, GithubEventKind};
use serde_json::Value;

fn text(v: &Value, path: &[&str]) -> Option<String> {
    let mut at = v;
    for p in path {
        at = at.get(p)?;
    }
    at.as_str().map(str::to_owned)
}

fn labels(v: &Value) -> Vec<String> {
    v.get("labels")
        .and_then(Value::as_array)
        .map(|all| {
            all.iter()
                .filter_map(|l| l.get("name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// A check's first pull request (GitHub lists those whose head is in the repository): its
/// number and head branch.
fn check_pull(check: &Value) -> Option<(i64, String)> {
    let pr = check.get("pull_requests")?.as_array()?.first()?;
    Some((pr.get("number")?.as_i64()?, text(pr, &["head", "ref"])?))
}

/// Reads a delivery of `event` (the `X-GitHub-Event` header) as an automation event.
pub fn automation_event(event: &str, delivery: &str, body: &[u8]) -> Option<GithubEventChange> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let owner = text(&v, &["repository", "owner", "login"])?;
    let repo = text(&v, &["repository", "name"])?;
    let action = text(&v, &["action"]).unwrap_or_default();
    let mut c = GithubEventChange {
        delivery: delivery.to_owned(),
        event: GithubEventKind::Push,
        action,
        owner,
        repo,
        branch: None,
        number: None,
        pull_request: false,
        work_branch: None,
        labels: Vec::new(),
        paths: None,
        actor: text(&v, &["sender", "login"]).unwrap_or_default(),
        actor_is_bot: text(&v, &["sender", "type"]).as_deref() == Some("Bot"),
        conclusion: None,
        check: None,
        title: String::new(),
        body: String::new(),
        comment: None,
        url: text(&v, &["repository", "html_url"]).unwrap_or_default(),
        head_sha: None,
    };
    match event {
        "check_suite" | "check_run" => {
            let (kind, field) = match event {
                "check_suite" => (GithubEventKind::CheckSuite, "check_suite"),
                _ => (GithubEventKind::CheckRun, "check_run"),
            };
            let check = v.get(field)?;
            c.event = kind;
            c.conclusion = text(check, &["conclusion"]);
            c.head_sha = text(check, &["head_sha"]);
            c.branch = text(check, &["head_branch"])
                .or_else(|| text(check, &["check_suite", "head_branch"]));
            c.check = match kind {
                GithubEventKind::CheckSuite => text(check, &["app", "name"]),
                _ => text(check, &["name"]),
            };
            if let Some(url) = text(check, &["html_url"]) {
                c.url = url;
            }
            if let Some((number, head)) = check_pull(check) {
                c.number = Some(number);
                c.pull_request = true;
                c.work_branch = Some(head);
            }
        }
        "pull_request" => {
            let raw = v.get("pull_request")?;
            let pr: crate::webhook::PullRequest = serde_json::from_value(raw.clone()).ok()?;
            c.event = GithubEventKind::PullRequest;
            c.number = Some(pr.number);
            c.pull_request = true;
            c.work_branch = Some(pr.work_branch());
            c.branch = Some(pr.base.branch.clone());
            c.head_sha = Some(pr.head.sha.clone()).filter(|s| !s.is_empty());
            c.labels = labels(raw);
            c.title = pr.title.clone();
            c.body = pr.body.clone().unwrap_or_default();
            c.url = pr.html_url.clone();
        }
        "issues" | "issue_comment" => {
            let issue = v.get("issue")?;
            c.event = match event {
                "issues" => GithubEventKind::Issues,
                _ => GithubEventKind::IssueComment,
            };
            c.number = issue.get("number").and_then(Value::as_i64);
            c.pull_request = issue.get("pull_request").is_some_and(|p| !p.is_null());
            c.labels = labels(issue);
            c.title = text(issue, &["title"]).unwrap_or_default();
            c.body = text(issue, &["body"]).unwrap_or_default();
            c.url = text(issue, &["html_url"]).unwrap_or(c.url);
            if c.event == GithubEventKind::IssueComment {
                c.comment = Some(text(&v, &["comment", "body"]).unwrap_or_default());
                c.url = text(&v, &["comment", "html_url"]).unwrap_or(c.url);
            }
        }
        "push" => {
            // Branches only: a tag, or a branch deleted, is nothing to work on.
            let branch = text(&v, &["ref"])?.strip_prefix("refs/heads/")?.to_owned();
            if v.get("deleted").and_then(Value::as_bool) == Some(true) {
                return None;
            }
            c.event = GithubEventKind::Push;
            c.branch = Some(branch);
            c.head_sha = text(&v, &["after"]);
            c.url = text(&v, &["compare"]).unwrap_or(c.url);
            c.title = text(&v, &["head_commit", "message"]).unwrap_or_default();
            let mut paths: Vec<String> = v
                .get("commits")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .flat_map(|commit| {
                    ["added", "removed", "modified"]
                        .into_iter()
                        .flat_map(move |k| {
                            commit
                                .get(k)
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                                .filter_map(Value::as_str)
                        })
                })
                .map(str::to_owned)
                .collect();
            paths.sort();
            paths.dedup();
            c.paths = Some(paths);
        }
        _ => return None,
    }
    Some(c)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn repo() -> Value {
        json!({"name": "web", "owner": {"login": "acme"}, "html_url": "https://github.com/acme/web", "private": false})
    }

    #[test]
    fn a_failing_check_suite_on_a_pull_request() {
        // The shape of GitHub's documented `check_suite` delivery, nulls included.
        let body = json!({
            "action": "completed",
            "check_suite": {
                "id": 1, "head_branch": "fix/login", "head_sha": "d6fde92930d4715a2b49857d24b940956b26d2d3",
                "status": "completed", "conclusion": "failure", "url": "https://api.github.com/x",
                "before": null, "after": null,
                "pull_requests": [{"url": "u", "id": 2, "number": 7,
                    "head": {"ref": "fix/login", "sha": "d6f", "repo": {"id": 1, "url": "u", "name": "web"}},
                    "base": {"ref": "main", "sha": "a1b", "repo": {"id": 1, "url": "u", "name": "web"}}}],
                "app": {"id": 3, "slug": "ci", "name": "CI"},
                "latest_check_runs_count": 1
            },
            "repository": repo(),
            "sender": {"login": "alice", "id": 9, "type": "User"}
        });
        let c = automation_event("check_suite", "d-1", body.to_string().as_bytes()).unwrap();
        assert_eq!(c.event, GithubEventKind::CheckSuite);
        assert_eq!(c.conclusion.as_deref(), Some("failure"));
        assert_eq!(c.branch.as_deref(), Some("fix/login"));
        assert_eq!((c.number, c.pull_request), (Some(7), true));
        assert_eq!(c.work_branch.as_deref(), Some("fix/login"));
        assert_eq!(c.check.as_deref(), Some("CI"));
        assert_eq!((c.owner.as_str(), c.repo.as_str()), ("acme", "web"));
    }

    #[test]
    fn a_pull_request_from_a_fork_works_on_its_pull_ref() {
        let body = json!({
            "action": "labeled", "number": 7,
            "label": {"name": "agent"},
            "pull_request": {"number": 7, "title": "T", "body": null, "user": {"login": "bob", "id": 2, "type": "User"},
                "labels": [{"name": "agent"}, {"name": "bug"}],
                "head": {"ref": "main", "sha": "abc", "repo": {"full_name": "bob/web"}},
                "base": {"ref": "main", "sha": "def", "repo": {"full_name": "acme/web"}},
                "draft": false, "state": "open", "merged": null, "html_url": "https://github.com/acme/web/pull/7"},
            "repository": repo(),
            "sender": {"login": "bob", "id": 2, "type": "User"}
        });
        let c = automation_event("pull_request", "d-2", body.to_string().as_bytes()).unwrap();
        assert_eq!(c.work_branch.as_deref(), Some("pull/7/head"));
        assert_eq!(
            c.branch.as_deref(),
            Some("main"),
            "a pull request's branch is its base"
        );
        assert_eq!(c.labels, vec!["agent", "bug"]);
        assert_eq!(c.body, "");
    }

    #[test]
    fn issues_comments_and_pushes() {
        let body = json!({"action": "created",
            "issue": {"number": 3, "title": "Crash", "body": "Steps", "labels": [], "html_url": "https://github.com/acme/web/issues/3", "pull_request": null},
            "comment": {"body": "/fix please", "html_url": "https://github.com/acme/web/issues/3#c1", "user": {"login": "ann"}},
            "repository": repo(), "sender": {"login": "ann", "type": "User"}});
        let c = automation_event("issue_comment", "", body.to_string().as_bytes()).unwrap();
        assert_eq!(c.event, GithubEventKind::IssueComment);
        assert!(!c.pull_request);
        assert_eq!(c.comment.as_deref(), Some("/fix please"));
        let push = json!({"ref": "refs/heads/main", "before": "a", "after": "b", "deleted": false,
            "compare": "https://github.com/acme/web/compare/a...b",
            "commits": [{"added": ["src/new.rs"], "removed": [], "modified": ["README.md"]},
                        {"added": [], "removed": ["old.txt"], "modified": ["README.md"]}],
            "head_commit": {"message": "Update"}, "pusher": {"name": "ann"},
            "repository": repo(), "sender": {"login": "ann", "type": "User"}});
        let c = automation_event("push", "d-3", push.to_string().as_bytes()).unwrap();
        assert_eq!(c.branch.as_deref(), Some("main"));
        assert_eq!(
            c.paths,
            Some(vec![
                "README.md".into(),
                "old.txt".into(),
                "src/new.rs".into()
            ])
        );
        let mut tag = push.clone();
        tag["ref"] = json!("refs/tags/v1");
        assert!(automation_event("push", "d", tag.to_string().as_bytes()).is_none());
        let mut gone = push.clone();
        gone["deleted"] = json!(true);
        assert!(automation_event("push", "d", gone.to_string().as_bytes()).is_none());
        assert!(automation_event("star", "d", push.to_string().as_bytes()).is_none());
        assert!(automation_event("push", "d", b"not json").is_none());
    }
}
