//! Thousands of random and malformed frames at one session: no panic, the socket stays
//! usable, and the timeline holds exactly what was accepted, once each.

#![allow(clippy::unwrap_used)] // a test fails loudly by design

use inspect_tests::client::{create_session, get, WsClient};
use inspect_tests::Stack;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

const FRAMES: usize = 3000;

fn random_string(rng: &mut StdRng, max: usize) -> String {
    let n = rng.random_range(0..max);
    (0..n).map(|_| rng.random::<char>()).collect()
}

fn random_json(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..7) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(rng.random::<i64>()),
        3 => json!(rng.random::<f64>()),
        4 => json!(random_string(rng, 40)),
        5 if depth < 3 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| random_json(rng, depth + 1))
                .collect(),
        ),
        _ if depth < 3 => {
            let mut m = serde_json::Map::new();
            for _ in 0..rng.random_range(0..4) {
                m.insert(random_string(rng, 8), random_json(rng, depth + 1));
            }
            Value::Object(m)
        }
        _ => Value::Null,
    }
}

const TYPES: &[&str] = &[
    "ping",
    "subscribe",
    "prompt",
    "cancel_prompt",
    "stop",
    "typing",
    "presence",
    "fetch_history",
    "nope",
    "",
];
const FIELDS: &[&str] = &[
    "content",
    "messageId",
    "token",
    "clientId",
    "status",
    "cursor",
    "limit",
    "model",
    "clientRequestId",
    "attachments",
];

/// A frame: garbage, random JSON, or a known message type with random fields.
fn frame(rng: &mut StdRng) -> Result<String, Vec<u8>> {
    match rng.random_range(0..10) {
        0 => Err((0..rng.random_range(0..64)).map(|_| rng.random()).collect()),
        1 => Ok(random_string(rng, 200)),
        2 => Ok(random_json(rng, 0).to_string()),
        3 => Ok("{".repeat(rng.random_range(1..2000))),
        _ => {
            let mut m = serde_json::Map::new();
            m.insert(
                "type".into(),
                json!(TYPES[rng.random_range(0..TYPES.len())]),
            );
            for _ in 0..rng.random_range(0..4) {
                let f = FIELDS[rng.random_range(0..FIELDS.len())];
                let v = if rng.random_bool(0.5) {
                    json!(random_string(rng, 30))
                } else {
                    random_json(rng, 1)
                };
                m.insert(f.into(), v);
            }
            if rng.random_bool(0.02) {
                m.insert("content".into(), json!("x".repeat(70 * 1024)));
            }
            Ok(Value::Object(m).to_string())
        }
    }
}

#[tokio::test]
async fn random_frames_never_break_a_session() {
    let stack = Stack::start().await.unwrap();
    let (base, wsb) = (stack.base_url.clone(), stack.ws_url(""));
    let id = create_session(&base, "ann", json!({})).await.unwrap();
    let (mut ws, _) = WsClient::join(&base, &wsb, &id, "ann").await.unwrap();
    let (mut watcher, _) = WsClient::join(&base, &wsb, &id, "bob").await.unwrap();
    let mut rng = StdRng::seed_from_u64(0x5eed);
    for _ in 0..FRAMES {
        match frame(&mut rng) {
            Ok(text) => ws.send_text(text).await.unwrap(),
            Err(bytes) => ws.send_binary(bytes).await.unwrap(),
        }
    }
    // A marker the object answers in order, after every frame above.
    // Its answer (queued, or refused when ten prompts already wait) carries this id.
    ws.send(json!({"type": "prompt", "content": "marker", "clientRequestId": "end-of-flood"}))
        .await
        .unwrap();
    let mut accepted = std::collections::BTreeSet::new();
    let mut errors = 0;
    loop {
        let m = ws.recv_within(60).await.unwrap();
        let end = m["clientRequestId"] == "end-of-flood";
        match m["type"].as_str().unwrap() {
            "prompt_queued" => {
                accepted.insert(m["messageId"].as_str().unwrap().to_owned());
            }
            "error" => {
                assert!(m["code"].is_string() && m["message"].is_string());
                errors += 1;
            }
            _ => {}
        }
        if end {
            break;
        }
    }
    assert!(errors > FRAMES / 2, "most frames are refused ({errors})");
    // The timeline holds each accepted prompt exactly once, and nothing else from the flood.
    let events = get(&stack.url(&format!("/sessions/{id}/events?limit=500")))
        .await
        .unwrap();
    let mut users: Vec<String> = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "user_message")
        .map(|e| e["messageId"].as_str().unwrap().to_owned())
        .collect();
    let n = users.len();
    users.sort();
    users.dedup();
    assert_eq!(users.len(), n, "no duplicates");
    assert_eq!(
        users.into_iter().collect::<std::collections::BTreeSet<_>>(),
        accepted
    );
    // Both sockets still work.
    ws.send(json!({"type": "presence", "status": "active"}))
        .await
        .unwrap();
    watcher.recv_type("presence_update").await.unwrap();
    assert_eq!(get(&stack.url("/health")).await.unwrap().status, 200);
}
