//! GitHub events as triggers: a failing check, a pull request or issue opened or labelled,
//! a comment that matches, a push. The deliveries arrive through the GitHub App's signed
//! webhook (the bot's route); this decides what may be saved, which trigger takes a
//! delivery, what makes a redelivery the same event, which events the deployment itself
//! caused (never a trigger: no loops), and what the agent is shown. Pure.

use crate::bad;
use crate::slack::{check_pattern, text_matches};
use inspect_protocol::automations::{
    GithubEventChange, GithubEventKind, GithubThread, GithubTrigger, TextMatch,
};
use inspect_protocol::ApiError;
use serde_json::{json, Value};

/// Entries in one list of a trigger, at most.
pub const MAX_ENTRIES: usize = 20;
/// One glob, label or login, at most.
const MAX_ENTRY_CHARS: usize = 200;
/// A pull request's or issue's text shown to the agent, at most.
const MAX_BODY_CHARS: usize = 8000;
/// The branches the sessions push (`open-inspect/<session>`): events on them are the
/// deployment's own doing.
pub const SESSION_BRANCH_PREFIX: &str = "open-inspect/";
/// A check's conclusions, as GitHub names them.
const CONCLUSIONS: [&str; 9] = [
    "success",
    "failure",
    "neutral",
    "cancelled",
    "skipped",
    "timed_out",
    "action_required",
    "stale",
    "startup_failure",
];
/// The conclusions a check trigger takes when it names none: the failing ones.
const FAILING: [&str; 3] = ["failure", "timed_out", "startup_failure"];

fn glob(pattern: &str) -> Result<glob::Pattern, glob::PatternError> {
    glob::Pattern::new(pattern)
}

fn glob_matches(pattern: &str, text: &str) -> bool {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    glob(pattern).is_ok_and(|g| g.matches_with(text, options))
}

/// A GitHub login: letters, digits and single hyphens, at most 39 (a bot's ends `[bot]`).
fn is_login(login: &str) -> bool {
    let name = login.strip_suffix("[bot]").unwrap_or(login);
    (1..=39).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
}

fn list(what: &str, items: &mut Vec<String>) -> Result<(), ApiError> {
    for item in items.iter_mut() {
        *item = item.trim().to_owned();
        if item.is_empty()
            || item.chars().count() > MAX_ENTRY_CHARS
            || item.chars().any(char::is_control)
        {
            return Err(bad(format!(
                "each of a GitHub trigger's {what} is 1 to {MAX_ENTRY_CHARS} characters on one line"
            )));
        }
    }
    items.sort();
    items.dedup();
    if items.len() > MAX_ENTRIES {
        return Err(bad(format!("at most {MAX_ENTRIES} {what}")));
    }
    Ok(())
}

/// Checks a trigger as a person sent it and returns what is saved (trimmed, each entry
/// once): actions the event has, globs and a pattern that read, logins that are logins,
/// conclusions GitHub uses, and no condition the event cannot have.
pub fn validate(mut t: GithubTrigger) -> Result<GithubTrigger, ApiError> {
    use GithubEventKind as K;
    list("actions", &mut t.actions)?;
    list("branches", &mut t.branches)?;
    list("labels", &mut t.labels)?;
    list("paths", &mut t.paths)?;
    list("allowed actors", &mut t.actors_allowed)?;
    list("denied actors", &mut t.actors_denied)?;
    list("conclusions", &mut t.conclusions)?;
    let known = t.event.actions();
    if let Some(a) = t.actions.iter().find(|a| !known.contains(&a.as_str())) {
        return Err(bad(match known {
            [] => format!("a {} trigger names no action ({a:?})", t.event.as_str()),
            _ => format!(
                "a {} trigger's actions are {}, not {a:?}",
                t.event.as_str(),
                known.join(", ")
            ),
        }));
    }
    for g in t.branches.iter().chain(&t.paths) {
        glob(g).map_err(|e| bad(format!("the glob {g:?} does not read: {e}")))?;
    }
    if let Some(l) = t
        .actors_allowed
        .iter()
        .chain(&t.actors_denied)
        .find(|l| !is_login(l))
    {
        return Err(bad(format!("{l:?} is not a GitHub login")));
    }
    if let Some(c) = t
        .conclusions
        .iter()
        .find(|c| !CONCLUSIONS.contains(&c.as_str()))
    {
        return Err(bad(format!(
            "{c:?} is not a check's conclusion; one of {}",
            CONCLUSIONS.join(", ")
        )));
    }
    let checks = matches!(t.event, K::CheckSuite | K::CheckRun);
    if !checks && !t.conclusions.is_empty() {
        return Err(bad("only a check trigger names conclusions"));
    }
    if matches!(t.event, K::Issues | K::IssueComment) && !t.branches.is_empty() {
        return Err(bad("an issue or a comment has no branch to match"));
    }
    if matches!(t.event, K::Issues | K::IssueComment) && !t.paths.is_empty() {
        return Err(bad("an issue or a comment changes no files"));
    }
    if matches!(t.event, K::Push) && !t.labels.is_empty() {
        return Err(bad("a push has no labels"));
    }
    if t.event == K::IssueComment {
        check_pattern(t.text_match, &t.pattern)?;
    } else if !t.pattern.is_empty() || t.text_match != TextMatch::Contains {
        return Err(bad("only a comment trigger has a text pattern"));
    }
    Ok(t)
}

/// Whether the delivery is the deployment's own doing: sent by the App's bot (its pushes,
/// comments and labels), or on a branch the sessions push. Such events never start runs.
pub fn caused_by_us(c: &GithubEventChange, bot_login: &str) -> bool {
    c.actor.eq_ignore_ascii_case(bot_login)
        || [&c.branch, &c.work_branch]
            .into_iter()
            .flatten()
            .any(|b| b.starts_with(SESSION_BRANCH_PREFIX))
}

/// Whether the trigger needs a pull request's changed files to decide (a delivery about a
/// pull request does not list them).
pub fn needs_paths(t: &GithubTrigger, c: &GithubEventChange) -> bool {
    !t.paths.is_empty() && c.paths.is_none() && c.pull_request && c.number.is_some()
}

/// Whether the trigger takes the delivery (on its repository: the caller matched that).
/// `paths` are the changed files when the delivery did not list them (asked of GitHub).
pub fn takes(t: &GithubTrigger, c: &GithubEventChange, paths: Option<&[String]>) -> bool {
    let any =
        |list: &[String], f: &dyn Fn(&str) -> bool| list.is_empty() || list.iter().any(|x| f(x));
    let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    if t.event != c.event {
        return false;
    }
    if !t.actions.is_empty() && !t.actions.iter().any(|a| a == &c.action) {
        return false;
    }
    if t.actions.is_empty()
        && !c.event.actions().is_empty()
        && !c.event.actions().contains(&c.action.as_str())
    {
        return false;
    }
    if t.actors_denied.iter().any(|d| same(d, &c.actor)) {
        return false;
    }
    if !any(&t.actors_allowed, &|a| same(a, &c.actor)) {
        return false;
    }
    if matches!(
        t.event,
        GithubEventKind::CheckSuite | GithubEventKind::CheckRun
    ) {
        let conclusion = c.conclusion.as_deref().unwrap_or_default();
        let wanted = match t.conclusions.is_empty() {
            true => FAILING.contains(&conclusion),
            false => t.conclusions.iter().any(|w| w == conclusion),
        };
        if !wanted {
            return false;
        }
    }
    if !t.branches.is_empty() {
        let Some(branch) = &c.branch else {
            return false;
        };
        if !t.branches.iter().any(|g| glob_matches(g, branch)) {
            return false;
        }
    }
    if !any(&t.labels, &|l| c.labels.iter().any(|have| same(have, l))) {
        return false;
    }
    if !t.paths.is_empty() {
        let changed = c.paths.as_deref().or(paths).unwrap_or_default();
        if !changed
            .iter()
            .any(|p| t.paths.iter().any(|g| glob_matches(g, p)))
        {
            return false;
        }
    }
    if t.event == GithubEventKind::IssueComment {
        let text = c.comment.as_deref().unwrap_or_default();
        if !text_matches(t.text_match, &t.pattern, text) {
            return false;
        }
    }
    true
}

/// What makes a redelivered event the same one: GitHub's delivery id (a redelivery
/// carries the same), else what the event is about.
pub fn key(c: &GithubEventChange) -> String {
    match c.delivery.is_empty() {
        false => format!("github:{}", c.delivery),
        true => format!(
            "github:{}:{}/{}:{}:{}:{}",
            c.event.as_str(),
            c.owner.to_lowercase(),
            c.repo.to_lowercase(),
            c.number.map(|n| n.to_string()).unwrap_or_default(),
            c.head_sha.as_deref().unwrap_or_default(),
            c.action
        ),
    }
}

/// Where the answer goes: the pull request's or issue's comments (a push, or a check on a
/// branch without a pull request, has none: the run's outcome is kept on the run).
pub fn thread(c: &GithubEventChange) -> Option<GithubThread> {
    c.number.map(|number| GithubThread {
        owner: c.owner.clone(),
        repo: c.repo.clone(),
        number,
    })
}

/// The event as conditions see it and the agent is shown it.
pub fn shown(c: &GithubEventChange) -> Value {
    let clip = |s: &str| s.chars().take(MAX_BODY_CHARS).collect::<String>();
    let mut v = json!({
        "event": c.event.as_str(),
        "action": c.action,
        "repository": format!("{}/{}", c.owner, c.repo),
        "actor": c.actor,
        "url": c.url,
    });
    let mut put = |k: &str, x: Value| {
        if let Some(map) = v.as_object_mut() {
            map.insert(k.into(), x);
        }
    };
    if let Some(n) = c.number {
        let what = if c.pull_request {
            "pullRequest"
        } else {
            "issue"
        };
        put(what, json!(n));
    }
    if !c.title.is_empty() {
        put("title", json!(c.title));
    }
    if !c.body.is_empty() {
        put("body", json!(clip(&c.body)));
    }
    if !c.labels.is_empty() {
        put("labels", json!(c.labels));
    }
    if let Some(b) = &c.branch {
        put("branch", json!(b));
    }
    if let Some(x) = &c.conclusion {
        put("conclusion", json!(x));
    }
    if let Some(x) = &c.check {
        put("check", json!(x));
    }
    if let Some(x) = &c.comment {
        put("comment", json!(clip(x)));
    }
    if let Some(x) = &c.head_sha {
        put("headSha", json!(x));
    }
    if let Some(paths) = &c.paths {
        put("paths", json!(paths.iter().take(100).collect::<Vec<_>>()));
    }
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn trigger(event: GithubEventKind) -> GithubTrigger {
        GithubTrigger {
            event,
            actions: vec![],
            branches: vec![],
            labels: vec![],
            paths: vec![],
            actors_allowed: vec![],
            actors_denied: vec![],
            conclusions: vec![],
            text_match: TextMatch::Contains,
            pattern: String::new(),
        }
    }

    fn change(event: GithubEventKind, action: &str) -> GithubEventChange {
        GithubEventChange {
            delivery: "d-1".into(),
            event,
            action: action.into(),
            owner: "acme".into(),
            repo: "web".into(),
            branch: Some("main".into()),
            number: Some(7),
            pull_request: true,
            work_branch: Some("fix/login".into()),
            labels: vec!["Bug".into()],
            paths: None,
            actor: "alice".into(),
            actor_is_bot: false,
            conclusion: None,
            check: None,
            title: "Fix login".into(),
            body: "It breaks".into(),
            comment: None,
            url: "https://github.com/acme/web/pull/7".into(),
            head_sha: Some("abc".into()),
        }
    }

    #[test]
    fn what_is_saved_and_what_is_refused() {
        use GithubEventKind as K;
        let refused = |t: GithubTrigger| validate(t).unwrap_err().message;
        let mut t = trigger(K::PullRequest);
        t.actions = vec![" labeled ".into(), "opened".into(), "opened".into()];
        t.branches = vec!["release/*".into()];
        assert_eq!(validate(t).unwrap().actions, vec!["labeled", "opened"]);
        let mut t = trigger(K::PullRequest);
        t.actions = vec!["closed".into()];
        assert!(refused(t).contains("actions are opened, labeled"));
        let mut t = trigger(K::Push);
        t.branches = vec!["[unclosed".into()];
        assert!(refused(t).contains("does not read"));
        let mut t = trigger(K::Push);
        t.actors_denied = vec!["not a login!".into()];
        assert!(refused(t).contains("not a GitHub login"));
        let mut t = trigger(K::CheckSuite);
        t.conclusions = vec!["red".into()];
        assert!(refused(t).contains("not a check's conclusion"));
        let mut t = trigger(K::Push);
        t.conclusions = vec!["failure".into()];
        assert!(refused(t).contains("only a check trigger"));
        let mut t = trigger(K::Issues);
        t.branches = vec!["main".into()];
        assert!(refused(t).contains("no branch"));
        let mut t = trigger(K::IssueComment);
        t.text_match = TextMatch::Regex;
        t.pattern = "(unclosed".into();
        assert!(refused(t).contains("does not read"));
        let mut t = trigger(K::Push);
        t.pattern = "x".into();
        assert!(refused(t).contains("only a comment trigger"));
        let mut t = trigger(K::Push);
        t.paths = (0..21).map(|i| format!("src/{i}/**")).collect();
        assert!(refused(t).contains("at most 20"));
        let mut t = trigger(K::Push);
        t.labels = vec!["bug".into()];
        assert!(refused(t).contains("no labels"));
        let mut t = trigger(K::Issues);
        t.actors_allowed = vec!["dependabot[bot]".into()];
        assert!(validate(t).is_ok());
    }

    #[test]
    fn which_deliveries_are_taken() {
        use GithubEventKind as K;
        let mut t = trigger(K::CheckSuite);
        let mut c = change(K::CheckSuite, "completed");
        c.conclusion = Some("failure".into());
        assert!(takes(&t, &c, None));
        c.conclusion = Some("success".into());
        assert!(!takes(&t, &c, None), "only failing ones by default");
        t.conclusions = vec!["success".into()];
        assert!(takes(&t, &c, None));
        assert!(!takes(&trigger(K::CheckRun), &c, None), "another event");

        let mut t = trigger(K::PullRequest);
        let c = change(K::PullRequest, "closed");
        assert!(!takes(&t, &c, None), "an action the kind does not watch");
        let c = change(K::PullRequest, "labeled");
        assert!(takes(&t, &c, None));
        t.actions = vec!["opened".into()];
        assert!(!takes(&t, &c, None));
        t.actions = vec![];
        t.labels = vec!["bug".into()];
        assert!(takes(&t, &c, None), "labels match whatever their case");
        t.labels = vec!["docs".into()];
        assert!(!takes(&t, &c, None));
        t.labels = vec![];
        t.branches = vec!["release/*".into()];
        assert!(!takes(&t, &c, None));
        t.branches = vec!["ma*".into()];
        assert!(takes(&t, &c, None));
        t.actors_denied = vec!["ALICE".into()];
        assert!(!takes(&t, &c, None), "denied wins");
        t.actors_denied = vec![];
        t.actors_allowed = vec!["bob".into()];
        assert!(!takes(&t, &c, None));

        let mut t = trigger(K::Push);
        t.paths = vec!["src/**/*.rs".into()];
        let mut c = change(K::Push, "");
        c.pull_request = false;
        c.number = None;
        c.paths = Some(vec!["README.md".into(), "src/a/b.rs".into()]);
        assert!(takes(&t, &c, None));
        c.paths = Some(vec!["docs/a.rs".into()]);
        assert!(!takes(&t, &c, None));
        t.paths = vec!["*.rs".into()];
        c.paths = Some(vec!["src/lib.rs".into()]);
        assert!(!takes(&t, &c, None), "* stays within one directory");

        let mut t = trigger(K::PullRequest);
        t.paths = vec!["docs/**".into()];
        let c = change(K::PullRequest, "opened");
        assert!(needs_paths(&t, &c));
        assert!(!takes(&t, &c, None), "no files known: not taken");
        assert!(takes(&t, &c, Some(&["docs/guide.md".to_owned()])));

        let mut t = trigger(K::IssueComment);
        t.text_match = TextMatch::Regex;
        t.pattern = r"^/fix\b".into();
        let mut c = change(K::IssueComment, "created");
        c.comment = Some("/fix the login".into());
        assert!(takes(&t, &c, None));
        c.comment = Some("please /fix".into());
        assert!(!takes(&t, &c, None));
    }

    #[test]
    fn the_deployments_own_events_are_not_triggers() {
        let mut c = change(GithubEventKind::Push, "");
        assert!(!caused_by_us(&c, "open-inspect[bot]"));
        c.actor = "Open-Inspect[bot]".into();
        assert!(caused_by_us(&c, "open-inspect[bot]"));
        let mut c = change(GithubEventKind::PullRequest, "synchronize");
        c.work_branch = Some("open-inspect/s1".into());
        assert!(caused_by_us(&c, "open-inspect[bot]"));
    }

    #[test]
    fn a_redelivery_is_the_same_event_and_the_agent_sees_the_event() {
        let c = change(GithubEventKind::PullRequest, "opened");
        assert_eq!(key(&c), "github:d-1");
        let mut again = c.clone();
        again.delivery = String::new();
        assert_eq!(key(&again), key(&again.clone()));
        assert!(key(&again).contains("acme/web:7:abc:opened"));
        let shown = shown(&c);
        assert_eq!(shown["pullRequest"], 7);
        assert_eq!(shown["repository"], "acme/web");
        assert_eq!(
            thread(&c),
            Some(GithubThread {
                owner: "acme".into(),
                repo: "web".into(),
                number: 7
            })
        );
    }
}
