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

/// `body` as Slack posts it: a form whose one field, `payload`, is the JSON.
fn form(payload: &Value) -> Vec<u8> {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
        .into_bytes()
}

#[test]
fn the_published_interactions_are_read_as_slack_means_them() {
    use inspect_slack::interaction::{read, Interaction};
    // A button pressed on an ephemeral message: no `message`, where it is in `container`.
    let pressed = example("block_actions.json");
    match read(&form(&pressed)).unwrap() {
        Interaction::Action(a) => {
            assert_eq!(a.action_id, "a");
            assert_eq!(a.user, "W111");
            assert_eq!(a.picked(), "click_me_123");
            assert_eq!(a.channel, "C111");
            assert_eq!((a.thread.as_str(), a.message_ts), ("", None));
        }
        other => panic!("{other:?}"),
    }
    // A picker's options asked for as the person types.
    let typed = example("block_suggestion.json");
    assert_eq!(
        read(&form(&typed)).unwrap(),
        Interaction::Suggestion {
            query: "search word".into()
        }
    );
    // Optional fields as null: still read, nothing made up.
    let mut pressed = pressed;
    pressed["channel"] = Value::Null;
    pressed["actions"][0]["value"] = Value::Null;
    match read(&form(&pressed)).unwrap() {
        Interaction::Action(a) => {
            assert_eq!(a.channel, "C111", "from the container");
            assert_eq!(a.picked(), "");
        }
        other => panic!("{other:?}"),
    }
    let mut typed = typed;
    typed["value"] = Value::Null;
    assert_eq!(
        read(&form(&typed)).unwrap(),
        Interaction::Suggestion { query: "".into() }
    );
    // Another kind is acknowledged and left; a form without its payload is refused.
    let submitted = json!({"type": "view_submission"});
    assert_eq!(
        read(&form(&submitted)).unwrap(),
        Interaction::Other(Some("view_submission".into()))
    );
    assert!(read(b"token=x").unwrap_err().contains("payload"));
    assert!(read(b"payload=%7Bnot").unwrap_err().contains("JSON"));
}
