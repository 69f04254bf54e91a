//! Slack's documented example deliveries (see `examples/README.md`) through the bot's
//! parser, as published and with the optional fields Slack may send as `null`.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_slack::events::{decide, Decision};
use serde_json::{json, Value};

fn example(name: &str) -> Value {
    let path = format!("{}/tests/examples/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn the_documented_mention_is_a_request_and_the_check_a_challenge() {
    let mention = example("app_mention.json");
    match decide(mention.to_string().as_bytes(), Some("U0LAN0Z89")).unwrap() {
        Decision::Request(r) => {
            assert_eq!(r.text, "is it everything a river should be?");
            assert_eq!(
                (r.channel.as_str(), r.user.as_str()),
                ("C123ABC456", "U061F7AUR")
            );
            assert_eq!(r.event_id, "Ev123ABC456");
            assert!(r.files.is_empty());
        }
        other => panic!("{other:?}"),
    }
    let check = example("url_verification.json");
    assert_eq!(
        decide(check.to_string().as_bytes(), None).unwrap(),
        Decision::Challenge("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into())
    );
}

#[test]
fn optional_fields_sent_as_null_still_read() {
    let mut mention = example("app_mention.json");
    for k in [
        "thread_ts",
        "files",
        "subtype",
        "bot_id",
        "channel_type",
        "blocks",
    ] {
        mention["event"][k] = Value::Null;
    }
    mention["authorizations"] = Value::Null;
    match decide(mention.to_string().as_bytes(), Some("U0LAN0Z89")).unwrap() {
        Decision::Request(r) => assert!(r.thread_ts.is_none() && r.files.is_empty()),
        other => panic!("{other:?}"),
    }
    // A shared file's fields Slack leaves out or sends as null.
    mention["event"]["files"] = json!([{"id": "F1", "name": null, "mimetype": null, "size": null}]);
    match decide(mention.to_string().as_bytes(), Some("U0LAN0Z89")).unwrap() {
        Decision::Request(r) => assert_eq!(r.files[0].id, "F1"),
        other => panic!("{other:?}"),
    }
}
