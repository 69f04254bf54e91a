//! GitHub's published example deliveries (octokit/webhooks, see `examples/README.md`) run
//! through the bot's parsers: none is malformed to them, each is read as GitHub means it,
//! and each still reads when the fields the bot takes with a default come as `null`.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_github::webhook::{decide, pr_change, Ask};
use serde_json::Value;
use std::path::PathBuf;

const BOT: &str = "inspect-bot[bot]";

fn examples() -> Vec<(String, String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/examples");
    let mut out: Vec<(String, String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("the examples")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let event = name.split('.').next().unwrap().to_owned();
            (name, event, std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    assert!(out.len() >= 15, "{} examples", out.len());
    out
}

/// Every field the bot reads with a default, anywhere in the payload, set to `null`.
fn nulled(body: &[u8]) -> Vec<u8> {
    const DEFAULTED: [&str; 8] = [
        "private", "sha", "title", "body", "draft", "state", "merged", "html_url",
    ];
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if DEFAULTED.contains(&k.as_str()) && !x.is_object() {
                        *x = Value::Null;
                    } else {
                        walk(x);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut v: Value = serde_json::from_slice(body).unwrap();
    walk(&mut v);
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn no_published_example_is_malformed_to_the_bot() {
    for (name, event, body) in examples() {
        for (how, body) in [("as published", body.clone()), ("nulled", nulled(&body))] {
            if let Err(skip) = decide(&event, &body, BOT) {
                assert!(!skip.starts_with("malformed"), "{name} ({how}): {skip}");
            }
            // Read as a change only where the bot takes one.
            let _ = pr_change(&event, &body, 1);
        }
    }
}

#[test]
fn each_example_is_read_as_github_means_it() {
    let read = |file: &str| -> (String, Vec<u8>) {
        let (_, event, body) = examples().into_iter().find(|(n, ..)| n == file).unwrap();
        (event, body)
    };
    // A pull request opened (not a draft): a review where the repository asks for one.
    for file in [
        "pull_request.opened.json",
        "pull_request.opened.with-null-body.json",
    ] {
        let (event, body) = read(file);
        let t = decide(&event, &body, BOT).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            matches!(
                t.ask,
                Ask::Review {
                    requested: false,
                    ..
                }
            ),
            "{file}"
        );
        assert!(t.pull_request.is_some());
    }
    let (event, body) = read("pull_request.opened.with-null-body.json");
    assert_eq!(
        decide(&event, &body, BOT)
            .unwrap()
            .pull_request
            .unwrap()
            .body,
        None
    );
    // A review asked of someone else, a comment on an issue, a review comment that does
    // not mention the bot: not the bot's.
    let (event, body) = read("pull_request.review_requested.json");
    assert!(decide(&event, &body, BOT)
        .unwrap_err()
        .contains("not the bot"));
    let (event, body) = read("issue_comment.created.json");
    assert!(decide(&event, &body, BOT)
        .unwrap_err()
        .contains("not a pull request"));
    let (event, body) = read("pull_request_review_comment.created.json");
    assert!(decide(&event, &body, BOT)
        .unwrap_err()
        .contains("does not mention"));
    // State changes: closed, reopened, ready, back to draft; a review submitted.
    for (file, state) in [
        ("pull_request.closed.json", None),
        ("pull_request.reopened.json", Some("open")),
        ("pull_request.ready_for_review.json", Some("open")),
        ("pull_request.converted_to_draft.json", Some("draft")),
    ] {
        let (event, body) = read(file);
        let change = pr_change(&event, &body, 7).unwrap_or_else(|| panic!("{file}"));
        if let Some(s) = state {
            assert_eq!(change.state.as_deref(), Some(s), "{file}");
        } else {
            assert!(change.state.is_some(), "{file}");
        }
    }
    let (event, body) = read("pull_request_review.submitted.json");
    let change = pr_change(&event, &body, 7).unwrap();
    assert!(change.review.is_some() && change.reviewer.is_some());
    let (event, body) = read("pull_request.labeled.json");
    assert!(pr_change(&event, &body, 7).is_none());
}
