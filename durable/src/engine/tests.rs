//! The engine, natively on rusqlite with the same SQL the Durable Object runs.

use super::effects::Target;
use super::*;
use crate::schema;
use crate::testing::SqliteStore;
use inspect_protocol::client::{ClientMessage, ServerMessage};
use inspect_protocol::limits::*;
use inspect_protocol::session::*;

fn store() -> SqliteStore {
    let s = SqliteStore::in_memory();
    schema::migrate(&s).unwrap();
    s
}

fn actor(name: &str) -> Actor {
    Actor {
        user_id: format!("u-{name}"),
        name: name.into(),
        email: None,
        avatar: None,
    }
}

/// A session whose sandbox was spawned and connected, and that sandbox's id.
fn with_open_sandbox(store: &SqliteStore) -> (Session<'_, SqliteStore>, String) {
    let s = created(store);
    let (t, _) = s.begin_spawn(1).unwrap().unwrap();
    s.sandbox_opened("sbws", 2).unwrap();
    (s, t.sandbox_id)
}

fn created(store: &SqliteStore) -> Session<'_, SqliteStore> {
    let s = Session::new(store);
    s.create(
        "sess1",
        &CreateSessionRequest::default(),
        &actor("ann"),
        1_000,
    )
    .unwrap();
    s
}

fn prompt(content: &str, crid: Option<&str>) -> PromptRequest {
    PromptRequest {
        content: content.into(),
        client_request_id: crid.map(Into::into),
        ..Default::default()
    }
}

/// Opens a socket for `name` and subscribes it; returns the ws id.
fn join(s: &Session<'_, SqliteStore>, name: &str, ws: &str, now: i64) -> Effects {
    let (tok, _) = s.mint_ws_token(&actor(name), now).unwrap();
    s.socket_opened(ws, sockets::KIND_CLIENT, now).unwrap();
    let frame = serde_json::to_string(&ClientMessage::Subscribe {
        token: tok.token,
        client_id: ws.into(),
    })
    .unwrap();
    s.on_client_frame(ws, &frame, now)
}

/// A provider that keeps sandboxes and resumes them in place.
fn keeps_sandboxes() -> inspect_protocol::provider::Capabilities {
    inspect_protocol::provider::Capabilities {
        persistent_resume: true,
        resume_in_place: true,
        ..Default::default()
    }
}

fn frame(msg: &ClientMessage) -> String {
    serde_json::to_string(msg).unwrap()
}

fn only_error(fx: &Effects) -> (String, String) {
    assert_eq!(fx.outbound.len(), 1, "{fx:?}");
    match &fx.outbound[0].message {
        ServerMessage::Error { code, message, .. } => (code.clone(), message.clone()),
        other => panic!("expected error, got {other:?}"),
    }
}

#[test]
fn create_validates_repositories() {
    let st = store();
    let s = Session::new(&st);
    let too_many = CreateSessionRequest {
        repositories: Some(
            (0..11)
                .map(|i| RepositoryRef {
                    owner: "o".into(),
                    name: format!("r{i}"),
                    branch: None,
                    source: None,
                })
                .collect(),
        ),
        ..Default::default()
    };
    assert_eq!(
        s.create("x", &too_many, &actor("a"), 1).unwrap_err().code,
        inspect_protocol::ErrorCode::BadRequest
    );
    let bad_name = CreateSessionRequest {
        repo_owner: Some("o".into()),
        repo_name: Some("../etc".into()),
        ..Default::default()
    };
    assert!(s.create("x", &bad_name, &actor("a"), 1).is_err());
    assert!(!s.exists().unwrap(), "a refused create stores nothing");
    let ok = CreateSessionRequest {
        repositories: Some(vec![
            RepositoryRef {
                owner: "acme".into(),
                name: "api".into(),
                branch: Some("main".into()),
                source: None,
            },
            RepositoryRef {
                owner: "acme".into(),
                name: "web".into(),
                branch: None,
                source: None,
            },
        ]),
        title: Some("  Fix it ".into()),
        ..Default::default()
    };
    let state = s.create("x", &ok, &actor("a"), 5).unwrap();
    // What `create` answers (and the Worker indexes, from `new_session`, while the object
    // stores it) is what the object reads back.
    assert_eq!(state, s.state().unwrap());
    assert_eq!(
        state,
        state::new_session("x", &ok, &actor("a"), 5).unwrap().0
    );
    assert_eq!(state.repo_name.as_deref(), Some("api"));
    assert_eq!(state.title.as_deref(), Some("Fix it"));
    assert_eq!(state.status, SessionStatus::Created);
    assert_eq!(
        s.create("x", &ok, &actor("a"), 6).unwrap_err().code,
        inspect_protocol::ErrorCode::Conflict
    );
}

#[test]
fn queue_is_fifo_with_one_processing_and_a_limit() {
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    let mut ids = vec![];
    for i in 0..MAX_UNFINISHED_PROMPTS {
        let (acc, _) = s
            .enqueue(&ann, &prompt(&format!("p{i}"), None), 10 + i as i64)
            .unwrap();
        assert_eq!(acc.position, i as i64 + 1);
        ids.push(acc.message_id);
    }
    let err = s
        .enqueue(&ann, &prompt("one too many", None), 100)
        .unwrap_err();
    assert_eq!(err.code, inspect_protocol::ErrorCode::TooManyRequests);
    assert_eq!(s.status().unwrap(), SessionStatus::Active);

    let (first, _) = s.start_next(200).unwrap().unwrap();
    assert_eq!(first.id, ids[0]);
    assert!(
        s.start_next(201).unwrap().is_none(),
        "one processing at a time"
    );
    s.complete(&ids[0], true, None, 202).unwrap();
    let (second, _) = s.start_next(203).unwrap().unwrap();
    assert_eq!(second.id, ids[1]);
    // Now one slot is free again.
    s.enqueue(&ann, &prompt("fits", None), 204).unwrap();
}

#[test]
fn client_request_id_is_idempotent() {
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    let (a, fx) = s.enqueue(&ann, &prompt("hello", Some("r1")), 10).unwrap();
    assert!(!fx.outbound.is_empty());
    let (b, fx) = s.enqueue(&ann, &prompt("hello", Some("r1")), 11).unwrap();
    assert_eq!(a.message_id, b.message_id);
    assert!(fx.outbound.is_empty(), "a repeat changes nothing");
    let err = s
        .enqueue(&ann, &prompt("other", Some("r1")), 12)
        .unwrap_err();
    assert_eq!(err.code, inspect_protocol::ErrorCode::Conflict);
    assert_eq!(s.messages().unwrap().len(), 1);
}

#[test]
fn cancel_only_pending_and_stop_ends_the_running_one() {
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    let (a, _) = s.enqueue(&ann, &prompt("a", None), 10).unwrap();
    let (b, _) = s.enqueue(&ann, &prompt("b", None), 11).unwrap();
    s.start_next(12).unwrap();
    assert_eq!(
        s.cancel(&ann, &a.message_id, None, 13).unwrap_err().code,
        inspect_protocol::ErrorCode::Conflict
    );
    s.cancel(&ann, &b.message_id, None, 14).unwrap();
    assert_eq!(
        s.message(&b.message_id).unwrap().unwrap().status,
        MessageStatus::Cancelled
    );
    assert_eq!(
        s.cancel(&ann, "msg_nope", None, 15).unwrap_err().code,
        inspect_protocol::ErrorCode::NotFound
    );
    let (stopped, _) = s.stop(&ann, false, 16).unwrap();
    assert_eq!(stopped.as_deref(), Some(a.message_id.as_str()));
    assert_eq!(
        s.message(&a.message_id).unwrap().unwrap().status,
        MessageStatus::Failed
    );
    assert!(s.queue().unwrap().is_empty());
}

#[test]
fn archived_sessions_refuse_prompts_until_restored() {
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    s.set_status(SessionStatus::Archived, &actor("ann"), 10)
        .unwrap();
    assert_eq!(
        s.enqueue(&ann, &prompt("x", None), 11).unwrap_err().code,
        inspect_protocol::ErrorCode::Conflict
    );
    assert!(s.messages().unwrap().is_empty());
    s.set_status(SessionStatus::Active, &actor("ann"), 12)
        .unwrap();
    s.enqueue(&ann, &prompt("x", None), 13).unwrap();
}

#[test]
fn timeline_pages_back_without_gaps_and_skips_heartbeats() {
    let st = store();
    let s = created(&st);
    for i in 0..1234 {
        let kind = if i % 10 == 0 {
            session_kind_heartbeat()
        } else {
            "token"
        };
        timeline::append(&st, kind, None, serde_json::Map::new(), i).unwrap();
    }
    let sid = s.session_id().unwrap();
    let codec = timeline::CursorCodec { session_id: &sid };
    let mut page =
        timeline::older_than(&st, &codec, timeline::NEWEST, SUBSCRIBE_EVENT_WINDOW).unwrap();
    assert_eq!(page.events.len(), 500);
    let mut seen: Vec<i64> = page.events.iter().map(|e| e.seq).collect();
    while page.has_more {
        let before = codec.decode(page.cursor.as_deref().unwrap()).unwrap();
        page = timeline::older_than(&st, &codec, before, 200).unwrap();
        let mut older: Vec<i64> = page.events.iter().map(|e| e.seq).collect();
        older.extend(seen);
        seen = older;
    }
    assert_eq!(seen.len(), 1234 - 124, "every non-heartbeat event, once");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "strictly increasing");
    // A cursor of another session is refused.
    let other = timeline::CursorCodec {
        session_id: "other",
    };
    assert!(codec.decode(&other.encode(5)).is_err());
    assert!(codec.decode("garbage").is_err());
}

fn session_kind_heartbeat() -> &'static str {
    event_kind::HEARTBEAT
}

#[test]
fn subscribe_requires_a_valid_token_once() {
    let st = store();
    let s = created(&st);
    s.socket_opened("w1", sockets::KIND_CLIENT, 10).unwrap();
    let fx = s.on_client_frame(
        "w1",
        &frame(&ClientMessage::Subscribe {
            token: "bad".into(),
            client_id: "c".into(),
        }),
        11,
    );
    assert_eq!(fx.closes[0].code, CLOSE_AUTH);

    let fx = join(&s, "bob", "w2", 20);
    assert!(
        matches!(fx.outbound[0].message, ServerMessage::Subscribed { .. }),
        "{fx:?}"
    );
    let (tok, _) = s.mint_ws_token(&actor("bob"), 21).unwrap();
    let fx = s.on_client_frame(
        "w2",
        &frame(&ClientMessage::Subscribe {
            token: tok.token,
            client_id: "c".into(),
        }),
        22,
    );
    assert_eq!(fx.closes[0].code, CLOSE_ALREADY_SUBSCRIBED);

    // Expired tokens are refused.
    let (tok, _) = s.mint_ws_token(&actor("cy"), 30).unwrap();
    s.socket_opened("w3", sockets::KIND_CLIENT, 30).unwrap();
    let fx = s.on_client_frame(
        "w3",
        &frame(&ClientMessage::Subscribe {
            token: tok.token,
            client_id: "c".into(),
        }),
        30 + WS_TOKEN_TTL_MS + 1,
    );
    assert_eq!(fx.closes[0].code, CLOSE_AUTH);
}

#[test]
fn each_token_names_its_own_participant_among_many() {
    let st = store();
    let s = created(&st);
    let minted: Vec<_> = ["ann", "bob", "cy"]
        .iter()
        .map(|who| s.mint_ws_token(&actor(who), 10).unwrap().0)
        .collect();
    for tok in &minted {
        assert_eq!(
            s.participant_for_token(&tok.token, 11).unwrap().as_deref(),
            Some(tok.participant_id.as_str())
        );
    }
    let ids: std::collections::HashSet<_> = minted.iter().map(|t| &t.participant_id).collect();
    assert_eq!(ids.len(), 3);
    // A stored hash presented as a token is not a token.
    let hash = crate::engine::ids::hash_secret(&minted[0].token);
    assert_eq!(s.participant_for_token(&hash, 11).unwrap(), None);
    assert_eq!(s.participant_for_token("", 11).unwrap(), None);
}

#[test]
fn unsubscribed_sockets_expire_after_the_deadline() {
    let st = store();
    let s = created(&st);
    s.socket_opened("w1", sockets::KIND_CLIENT, 1_000).unwrap();
    assert_eq!(
        s.next_subscribe_deadline().unwrap(),
        Some(1_000 + SUBSCRIBE_DEADLINE_MS)
    );
    assert!(s
        .expire_unsubscribed(1_000 + SUBSCRIBE_DEADLINE_MS - 1)
        .unwrap()
        .closes
        .is_empty());
    let fx = s
        .expire_unsubscribed(1_000 + SUBSCRIBE_DEADLINE_MS)
        .unwrap();
    assert_eq!(fx.closes[0].code, CLOSE_SUBSCRIBE_TIMEOUT);
    assert_eq!(s.next_subscribe_deadline().unwrap(), None);
}

#[test]
fn presence_join_update_and_leave() {
    let st = store();
    let s = created(&st);
    join(&s, "ann", "a1", 10);
    let fx = join(&s, "bob", "b1", 11);
    let sync = fx.outbound.iter().find_map(|o| match &o.message {
        ServerMessage::PresenceSync { participants } => Some(participants.clone()),
        _ => None,
    });
    assert_eq!(sync.unwrap().len(), 2);
    assert!(fx
        .outbound
        .iter()
        .any(|o| o.target == Target::AllClientsExcept("b1".into())
            && matches!(o.message, ServerMessage::PresenceUpdate { .. })));
    // A second socket of bob's: leaving one is not leaving.
    join(&s, "bob", "b2", 12);
    assert!(s.socket_closed("b1").unwrap().outbound.is_empty());
    let fx = s.socket_closed("b2").unwrap();
    assert!(
        matches!(&fx.outbound[0].message, ServerMessage::PresenceLeave { user_id, .. } if user_id == "u-bob")
    );
}

#[test]
fn bad_frames_get_errors_and_change_nothing() {
    let st = store();
    let s = created(&st);
    join(&s, "ann", "a1", 10);
    let before = s.messages().unwrap().len();
    let events_before = st
        .scalar("SELECT COUNT(*) FROM events", &[])
        .unwrap()
        .unwrap()
        .as_i64();
    for bad in [
        "",
        "not json",
        "{}",
        r#"{"type":"nope"}"#,
        r#"{"type":"prompt"}"#,
        r#"{"type":"prompt","content":""}"#,
        r#"{"type":"cancel_prompt","messageId":"msg_x"}"#,
        r#"{"type":"fetch_history","cursor":"zzzz"}"#,
        r#"{"type":"presence","status":"sleeping"}"#,
        "[1,2,3]",
    ] {
        let fx = s.on_client_frame("a1", bad, 11);
        let (code, _) = only_error(&fx);
        assert!(!code.is_empty(), "{bad}");
        assert!(fx.closes.is_empty());
    }
    let big = frame(&ClientMessage::Prompt {
        content: "x".repeat(MAX_PROMPT_BYTES + 1),
        model: None,
        reasoning_effort: None,
        attachments: None,
        client_request_id: Some("big".into()),
    });
    let fx = s.on_client_frame("a1", &big, 12);
    let (code, _) = only_error(&fx);
    assert_eq!(code, "payload_too_large");
    assert_eq!(s.messages().unwrap().len(), before);
    assert_eq!(
        st.scalar("SELECT COUNT(*) FROM events", &[])
            .unwrap()
            .unwrap()
            .as_i64(),
        events_before
    );
}

#[test]
fn unsubscribed_sockets_may_only_ping_and_subscribe() {
    let st = store();
    let s = created(&st);
    s.socket_opened("w", sockets::KIND_CLIENT, 1).unwrap();
    let fx = s.on_client_frame("w", r#"{"type":"prompt","content":"hi"}"#, 2);
    assert_eq!(only_error(&fx).0, "unauthorized");
    let fx = s.on_client_frame("w", r#"{"type":"ping"}"#, 3);
    assert!(matches!(fx.outbound[0].message, ServerMessage::Pong { .. }));
}

mod sandbox_flow {
    use super::*;
    use crate::engine::sandbox::SandboxRefusal;
    use inspect_protocol::sandbox::SandboxCommand;
    use serde_json::json;

    fn frame(sandbox: &str, v: serde_json::Value) -> String {
        let mut v = v;
        v["sandboxId"] = json!(sandbox);
        v["timestamp"] = json!(1);
        v.to_string()
    }

    fn prompts(fx: &Effects) -> Vec<String> {
        fx.to_sandbox
            .iter()
            .filter_map(|c| match c {
                SandboxCommand::Prompt { message_id, .. } => Some(message_id.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_queued_prompt_spawns_once_and_runs_when_ready() {
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        let (a, fx) = s.enqueue(&ann, &prompt("first", None), 10).unwrap();
        assert!(fx.spawn_wanted);
        let (ticket, _) = s.begin_spawn(11).unwrap().unwrap();
        assert!(s.begin_spawn(12).unwrap().is_none(), "no double spawn");
        let (_, fx) = s.enqueue(&ann, &prompt("second", None), 13).unwrap();
        assert!(!fx.spawn_wanted, "a sandbox is on its way");
        s.spawn_accepted(&ticket.sandbox_id, 14).unwrap();

        // Credentials: wrong token, wrong id, right ones.
        assert_eq!(
            s.authenticate_sandbox("nope", &ticket.sandbox_id).unwrap(),
            Err(SandboxRefusal::BadToken)
        );
        assert_eq!(
            s.authenticate_sandbox(&ticket.token, "sb_other").unwrap(),
            Err(SandboxRefusal::WrongSandbox)
        );
        assert_eq!(
            s.authenticate_sandbox(&ticket.token, &ticket.sandbox_id)
                .unwrap(),
            Ok(())
        );

        s.sandbox_opened("sbws", 15).unwrap();
        let fx = s.on_sandbox_frame(&frame(&ticket.sandbox_id, json!({"type": "ready"})), 16);
        assert_eq!(prompts(&fx), vec![a.message_id.clone()]);
        assert_eq!(s.sandbox_status().unwrap(), "running");

        // Streaming tokens coalesce into one event per part; tool calls upsert by id.
        for text in ["he", "hell", "hello"] {
            s.on_sandbox_frame(&frame(&ticket.sandbox_id, json!({"type": "token", "messageId": a.message_id, "partId": "p1", "content": text})), 17);
        }
        for status in ["running", "completed"] {
            s.on_sandbox_frame(&frame(&ticket.sandbox_id, json!({"type": "tool_call", "messageId": a.message_id, "tool": "bash", "callId": "c1", "status": status, "args": {"command": "ls"}})), 18);
        }
        let tokens: Vec<String> = st
            .query("SELECT data FROM events WHERE kind = 'token'", &[])
            .unwrap()
            .into_iter()
            .map(|r| r[0].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(tokens.len(), 1);
        assert!(tokens[0].contains("\"hello\""));
        let tools = st
            .scalar("SELECT COUNT(*) FROM events WHERE kind = 'tool_call'", &[])
            .unwrap()
            .unwrap();
        assert_eq!(tools.as_i64(), Some(1));
        // The hot path: a streamed event costs three statements (the sandbox's identity,
        // its activity, the upsert).
        st.take_statements();
        s.on_sandbox_frame(&frame(&ticket.sandbox_id, json!({"type": "tool_call", "messageId": a.message_id, "tool": "bash", "callId": "c1", "status": "completed", "args": {"command": "ls"}})), 18);
        assert_eq!(st.take_statements().len(), 3);

        // What the session used, read from what it keeps (not counted on the way in).
        s.on_sandbox_frame(&frame(&ticket.sandbox_id, json!({"type": "step_finish", "messageId": a.message_id, "cost": 0.0125, "tokens": {"input": 120, "output": 30, "reasoning": 0, "cache": {"read": 0, "write": 0}}})), 18);
        let used = s.usage(100).unwrap();
        assert_eq!(
            (
                used.prompts,
                used.tool_calls,
                used.tokens_in,
                used.tokens_out,
                used.cost_micros
            ),
            (2, 1, 120, 30, 12_500)
        );
        assert!(used.sandbox_ms > 0 && used.sandbox_ms <= 100, "{used:?}");
        assert_eq!(s.index_update(100).unwrap().usage, used);

        // Completion is acked once, even when resent; the next prompt follows.
        let done = frame(
            &ticket.sandbox_id,
            json!({"type": "execution_complete", "messageId": a.message_id, "success": true, "ackId": "k1"}),
        );
        let fx = s.on_sandbox_frame(&done, 19);
        assert!(fx.to_sandbox.contains(&SandboxCommand::Ack {
            ack_id: "k1".into()
        }));
        assert_eq!(prompts(&fx).len(), 1, "the second prompt is dispatched");
        let again = s.on_sandbox_frame(&done, 20);
        assert_eq!(
            again.to_sandbox,
            vec![SandboxCommand::Ack {
                ack_id: "k1".into()
            }]
        );
        assert!(again.outbound.is_empty());
        assert_eq!(
            s.message(&a.message_id).unwrap().unwrap().status,
            MessageStatus::Completed
        );
        let completes = st
            .scalar(
                "SELECT COUNT(*) FROM events WHERE kind = 'execution_complete'",
                &[],
            )
            .unwrap()
            .unwrap();
        assert_eq!(completes.as_i64(), Some(1));
    }

    #[test]
    fn a_sandbox_that_reconnects_mid_prompt_gets_the_prompt_again() {
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        let (a, _) = s.enqueue(&ann, &prompt("work", None), 10).unwrap();
        let (t, _) = s.begin_spawn(11).unwrap().unwrap();
        s.sandbox_opened("sbws", 12).unwrap();
        let fx = s.on_sandbox_frame(&frame(&t.sandbox_id, json!({"type": "ready"})), 13);
        assert_eq!(prompts(&fx), vec![a.message_id.clone()]);
        // The socket that carried the prompt dies; the sandbox comes back on a new one.
        s.socket_closed("sbws").unwrap();
        let fx = s.sandbox_opened("sbws2", 14).unwrap();
        assert_eq!(prompts(&fx), vec![a.message_id.clone()], "sent again");
        assert!(fx.outbound.is_empty(), "the clients see nothing new");
        assert_eq!(
            s.message(&a.message_id).unwrap().unwrap().status,
            MessageStatus::Processing
        );
        // Once it completes, a reconnect sends nothing.
        s.on_sandbox_frame(
            &frame(
                &t.sandbox_id,
                json!({"type": "execution_complete", "messageId": a.message_id, "success": true}),
            ),
            15,
        );
        let fx = s.sandbox_opened("sbws3", 16).unwrap();
        assert!(prompts(&fx).is_empty());
    }

    #[test]
    fn a_resume_that_waits_for_room_stays_a_resume() {
        use crate::engine::plan::SpawnPlan;
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        s.enqueue(&ann, &prompt("work", None), 10).unwrap();
        let (t, _) = s.begin_spawn(11).unwrap().unwrap();
        s.spawn_accepted(&t.sandbox_id, 11).unwrap();
        s.sandbox_opened("sbws", 12).unwrap();
        s.on_sandbox_frame(&frame(&t.sandbox_id, json!({"type": "ready"})), 13);
        st.execute("UPDATE sandbox SET status = 'stopped' WHERE id = 1", &[])
            .unwrap();
        s.socket_closed("sbws").unwrap();
        // In place (E2B, Daytona, OpenComputer): the provider has no room for the resume.
        let resume = SpawnPlan::Resume {
            sandbox_id: t.sandbox_id.clone(),
        };
        assert_eq!(s.spawn_plan(keeps_sandboxes(), "1").unwrap(), resume);
        s.begin_resume(&t.sandbox_id, 14).unwrap().unwrap();
        let waiting = s
            .spawn_waiting(&t.sandbox_id, "quota exceeded", 15)
            .unwrap();
        assert_eq!(s.sandbox_status().unwrap(), "waiting");
        assert!(
            !waiting.index_changed,
            "a refused spawn made no sandbox: nothing for the index to count"
        );
        assert_eq!(
            s.spawn_plan(keeps_sandboxes(), "1").unwrap(),
            resume,
            "the retry resumes the workspace"
        );
        assert!(s.begin_resume(&t.sandbox_id, 20_000).unwrap().is_some());
        // Onto a new machine (Kubernetes: the claim stays, the Pod is new).
        let moves = inspect_protocol::provider::Capabilities {
            persistent_resume: true,
            ..Default::default()
        };
        s.spawn_waiting(&t.sandbox_id, "quota exceeded", 20_001)
            .unwrap();
        let (next, _) = s.begin_spawn(40_000).unwrap().unwrap();
        s.workspace_carried(&next.sandbox_id, 40_000).unwrap();
        s.spawn_waiting(
            &next.sandbox_id,
            "exceeded quota: persistentvolumeclaims",
            40_001,
        )
        .unwrap();
        assert_eq!(
            s.spawn_plan(moves, "1").unwrap(),
            SpawnPlan::Resume {
                sandbox_id: next.sandbox_id.clone()
            },
            "not a fresh sandbox, which would delete the workspace's claim"
        );
        // A fresh sandbox that waits holds nothing: it stays fresh.
        let st2 = store();
        let s2 = created(&st2);
        let (f, _) = s2.begin_spawn(11).unwrap().unwrap();
        s2.spawn_waiting(&f.sandbox_id, "quota", 12).unwrap();
        assert_eq!(
            s2.spawn_plan(keeps_sandboxes(), "1").unwrap(),
            SpawnPlan::Fresh { warning: None }
        );
    }

    #[test]
    fn waiting_for_room_asks_less_often_until_room_is_made_or_found() {
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        s.enqueue(&ann, &prompt("work", None), 10).unwrap();
        assert_eq!(s.waiting_since().unwrap(), None);
        let mut at = 100;
        let mut waits = Vec::new();
        for _ in 0..6 {
            let (t, _) = s.begin_spawn(at).unwrap().unwrap();
            s.spawn_waiting(&t.sandbox_id, "quota", at).unwrap();
            let wait = s.capacity_retry_ms().unwrap();
            waits.push(wait);
            at += wait;
        }
        assert_eq!(waits, [5_000, 10_000, 20_000, 40_000, 60_000, 60_000]);
        // With others ahead of it, it leaves the asking to them: a stop wakes it in turn.
        s.waiters_ahead(3).unwrap();
        assert_eq!(s.capacity_retry_ms().unwrap(), 60_000);
        s.waiters_ahead(0).unwrap();
        assert_eq!(
            s.capacity_retry_ms().unwrap(),
            60_000,
            "its back-off stands"
        );
        assert_eq!(
            s.waiting_since().unwrap(),
            Some(100),
            "its place is its first wait"
        );
        // Another session's stop made room: it asks at once.
        let (waiting, fx) = s.capacity_freed().unwrap();
        assert!(waiting && fx.spawn_wanted);
        let (t, _) = s.begin_spawn(at).unwrap().unwrap();
        assert!(s.capacity_found().unwrap(), "it leaves the waiters");
        s.spawn_accepted(&t.sandbox_id, at).unwrap();
        assert_eq!(s.waiting_since().unwrap(), None);
        assert!(!s.capacity_found().unwrap());
        let (waiting, fx) = s.capacity_freed().unwrap();
        assert!(
            !waiting && !fx.spawn_wanted,
            "a session that does not wait stays as it is"
        );
    }

    #[test]
    fn a_resume_in_place_keeps_the_identity_and_a_renewal_replaces_it() {
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        s.enqueue(&ann, &prompt("work", None), 10).unwrap();
        let (t, _) = s.begin_spawn(11).unwrap().unwrap();
        assert!(
            s.begin_resume(&t.sandbox_id, 12).unwrap().is_none(),
            "not stopped"
        );
        s.sandbox_opened("sbws", 12).unwrap();
        s.on_sandbox_frame(&frame(&t.sandbox_id, json!({"type": "ready"})), 13);
        st.execute("UPDATE sandbox SET status = 'stopped' WHERE id = 1", &[])
            .unwrap();
        s.socket_closed("sbws").unwrap();
        assert!(s.begin_resume("sb_other", 14).unwrap().is_none());
        let (again, _) = s.begin_resume(&t.sandbox_id, 14).unwrap().unwrap();
        assert_eq!(again.sandbox_id, t.sandbox_id);
        assert!(again.token.is_empty(), "the machine holds the token");
        assert_eq!(s.sandbox_status().unwrap(), "spawning");
        // The machine keeps its old credentials and they still work.
        assert_eq!(
            s.authenticate_sandbox(&t.token, &t.sandbox_id).unwrap(),
            Ok(())
        );
        // Its machine is gone: a new identity, the old one refused.
        let fresh = s.renew_identity(&t.sandbox_id, 15).unwrap().unwrap();
        assert_ne!(fresh.sandbox_id, t.sandbox_id);
        assert_eq!(
            s.authenticate_sandbox(&t.token, &t.sandbox_id).unwrap(),
            Err(SandboxRefusal::BadToken)
        );
        assert_eq!(
            s.authenticate_sandbox(&fresh.token, &fresh.sandbox_id)
                .unwrap(),
            Ok(())
        );
    }

    #[test]
    fn the_vendor_id_of_every_sandbox_is_kept() {
        use inspect_protocol::provider::SandboxRef;
        let st = store();
        let s = created(&st);
        assert_eq!(s.sandbox_ref("sb_a").unwrap(), SandboxRef::ours("sb_a"));
        s.record_vendor_id("sb_a", "oc-1", 10).unwrap();
        s.record_vendor_id("sb_b", "oc-2", 11).unwrap();
        // A resume in place that came back on another machine of the vendor's.
        s.record_vendor_id("sb_a", "oc-3", 12).unwrap();
        assert_eq!(
            s.sandbox_ref("sb_a").unwrap().vendor_id.as_deref(),
            Some("oc-3")
        );
        let all: Vec<_> = s
            .vendor_sandboxes()
            .unwrap()
            .into_iter()
            .map(|r| (r.sandbox_id, r.vendor_id.unwrap()))
            .collect();
        assert_eq!(
            all,
            vec![
                ("sb_a".to_owned(), "oc-3".to_owned()),
                ("sb_b".to_owned(), "oc-2".to_owned())
            ]
        );
    }

    #[test]
    fn a_sandbox_that_does_not_connect_is_checked_with_the_provider_meanwhile() {
        use crate::engine::deadlines::CONNECT_CHECK_MS;
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        s.enqueue(&ann, &prompt("work", None), 0).unwrap();
        let (t, _) = s.begin_spawn(0).unwrap().unwrap();
        s.spawn_accepted(&t.sandbox_id, 1_000).unwrap();
        assert_eq!(s.next_deadline().unwrap(), Some(1_000 + CONNECT_CHECK_MS));
        let out = s.on_alarm(1_000 + CONNECT_CHECK_MS).unwrap();
        assert_eq!(out.check_provider.as_deref(), Some(t.sandbox_id.as_str()));
        // Asked again a little later, not at once.
        let next = s.next_deadline().unwrap().unwrap();
        assert_eq!(next, 1_000 + 2 * CONNECT_CHECK_MS);
        assert!(s.on_alarm(next - 1).unwrap().check_provider.is_none());
        // What the provider said ends it in its words, and counts as a failed spawn: the
        // third in five minutes stops the automatic retries.
        let fx = s
            .sandbox_lost(
                &t.sandbox_id,
                "the sandbox's process is gone (ImagePullBackOff)",
                next,
            )
            .unwrap();
        assert_eq!(s.sandbox_status().unwrap(), "stale");
        assert!(fx.spawn_wanted, "one failure: try again");
        // It never became ready: nothing in it is kept, saved, nor resumed.
        assert_eq!(fx.stop_sandbox.as_deref(), Some(t.sandbox_id.as_str()));
        assert!(fx.discard_sandbox);
        assert_eq!(fx.snapshot_sandbox, None);
        let keeps = keeps_sandboxes();
        assert_eq!(
            s.spawn_plan(keeps, "1").unwrap(),
            crate::engine::plan::SpawnPlan::Fresh { warning: None }
        );
        assert!(s.begin_resume(&t.sandbox_id, next).unwrap().is_none());
        let mut now = next;
        for _ in 0..2 {
            now += 1_000;
            let (t, _) = s.begin_spawn(now).unwrap().unwrap();
            s.spawn_accepted(&t.sandbox_id, now).unwrap();
            let fx = s
                .sandbox_lost(&t.sandbox_id, "gone (ImagePullBackOff)", now)
                .unwrap();
            assert_eq!(fx.spawn_wanted, !s.given_up(now).unwrap());
        }
        assert!(
            s.given_up(now).unwrap(),
            "three never-ready sandboxes in a row"
        );
    }

    #[test]
    fn stop_goes_to_a_connected_sandbox() {
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        let (a, _) = s.enqueue(&ann, &prompt("work", None), 10).unwrap();
        let (t, _) = s.begin_spawn(11).unwrap().unwrap();
        s.sandbox_opened("sbws", 12).unwrap();
        s.on_sandbox_frame(&frame(&t.sandbox_id, json!({"type": "ready"})), 13);
        let (stopped, fx) = s.stop(&ann, s.sandbox_connected().unwrap(), 14).unwrap();
        assert_eq!(stopped.as_deref(), Some(a.message_id.as_str()));
        assert!(fx
            .to_sandbox
            .iter()
            .any(|c| matches!(c, SandboxCommand::Stop { .. })));
        assert_eq!(
            s.message(&a.message_id).unwrap().unwrap().status,
            MessageStatus::Processing,
            "the sandbox ends it"
        );
    }

    #[test]
    fn bad_sandbox_frames_are_refused_and_change_nothing() {
        let st = store();
        let s = created(&st);
        let (t, _) = s.begin_spawn(1).unwrap().unwrap();
        s.sandbox_opened("sbws", 2).unwrap();
        let before = st
            .scalar("SELECT COUNT(*) FROM events", &[])
            .unwrap()
            .unwrap()
            .as_i64();
        for bad in [
            "nope".to_owned(),
            json!({"type": "token"}).to_string(),
            frame(&t.sandbox_id, json!({"type": "what"})),
            frame("sb_other", json!({"type": "step_start", "messageId": "m"})),
            json!({"type": "batch", "events": 5}).to_string(),
            json!({"type": "batch", "events": vec![json!({}); 501]}).to_string(),
        ] {
            let fx = s.on_sandbox_frame(&bad, 3);
            assert!(fx.outbound.is_empty(), "{bad}");
            assert!(
                matches!(fx.to_sandbox.as_slice(), [SandboxCommand::Error { .. }]),
                "{bad}: {:?}",
                fx.to_sandbox
            );
        }
        let after = st
            .scalar("SELECT COUNT(*) FROM events", &[])
            .unwrap()
            .unwrap()
            .as_i64();
        assert_eq!(before, after);
        // A batch carries many events in one frame; a bad one among them is refused alone.
        let batch = json!({"type": "batch", "events": [
            {"type": "step_start", "messageId": "m", "sandboxId": t.sandbox_id, "timestamp": 1},
            {"type": "bogus", "sandboxId": t.sandbox_id, "timestamp": 1},
            {"type": "warning", "scope": "x", "message": "y", "sandboxId": t.sandbox_id, "timestamp": 1},
        ]});
        let fx = s.on_sandbox_frame(&batch.to_string(), 4);
        // The batch's two good events reach clients as one message.
        assert_eq!(fx.outbound.len(), 1);
        match &fx.outbound[0].message {
            ServerMessage::SandboxEvents { events } => {
                let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
                assert_eq!(kinds, vec!["step_start", "warning"]);
                assert!(events[0].seq < events[1].seq);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fx.to_sandbox.len(), 1);
    }

    #[test]
    fn a_batch_stores_its_streamed_parts_together_and_in_order() {
        let st = store();
        let (s, sb) = with_open_sandbox(&st);
        let sb = sb.as_str();
        // A tool call stored by an earlier frame, updated in the batch.
        s.on_sandbox_frame(
            &frame(sb, json!({"type": "tool_call", "messageId": "m", "tool": "bash", "callId": "c0", "status": "running"})),
            3,
        );
        let count = || {
            st.scalar("SELECT COUNT(*) FROM events", &[])
                .unwrap()
                .and_then(|v| v.as_i64())
                .unwrap()
        };
        let before = count();
        let batch = json!({"type": "batch", "events": [
            {"type": "token", "messageId": "m", "partId": "p1", "content": "Hel", "sandboxId": sb, "timestamp": 4},
            {"type": "tool_call", "messageId": "m", "tool": "bash", "callId": "c1", "status": "running", "sandboxId": sb, "timestamp": 4},
            {"type": "token", "messageId": "m", "partId": "p1", "content": "Hello", "sandboxId": sb, "timestamp": 4},
            {"type": "step_start", "messageId": "m", "sandboxId": sb, "timestamp": 4},
            {"type": "tool_call", "messageId": "m", "tool": "bash", "callId": "c0", "status": "completed", "output": "ok", "sandboxId": sb, "timestamp": 4},
            {"type": "tool_call", "messageId": "m", "tool": "bash", "callId": "c1", "status": "completed", "sandboxId": sb, "timestamp": 4},
        ]});
        let fx = s.on_sandbox_frame(&batch.to_string(), 5);
        assert!(fx.to_sandbox.is_empty(), "{:?}", fx.to_sandbox);
        let ServerMessage::SandboxEvents { events } = &fx.outbound[0].message else {
            panic!("{:?}", fx.outbound)
        };
        // Before the step: the second call's first state and the latest text (it moved past
        // the call); after it, both calls in their latest state, each once, in order.
        let seen: Vec<(String, String)> = events
            .iter()
            .map(|e| {
                let what = e.data.get("content").or(e.data.get("status"));
                (
                    e.kind.clone(),
                    what.and_then(|v| v.as_str()).unwrap_or("").to_owned(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                ("tool_call".into(), "running".into()),
                ("token".into(), "Hello".into()),
                ("step_start".into(), "".into()),
                ("tool_call".into(), "completed".into()),
                ("tool_call".into(), "completed".into()),
            ]
        );
        assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
        // The timeline holds each part once, in its latest state and place.
        assert_eq!(count(), before + 3, "the text, the step, c1 (c0 updated)");
        let stored = st
            .query("SELECT kind, data FROM events ORDER BY seq", &[])
            .unwrap();
        let last = stored.last().unwrap();
        assert!(format!("{last:?}").contains("completed"), "{last:?}");
        // The call updated in place kept its id.
        let c0: Vec<_> = events
            .iter()
            .filter(|e| e.data.get("callId").and_then(|v| v.as_str()) == Some("c0"))
            .collect();
        assert_eq!(c0.len(), 1);
        assert_eq!(c0[0].data["output"], "ok");
    }

    /// A part stored under a random id (before ids came from part keys) takes its key's id
    /// with its next version, staged or not, and stays one event.
    #[test]
    fn a_part_stored_under_an_old_id_takes_its_keys_id() {
        use crate::engine::ids::part_event_id;
        use crate::engine::staged::Staged;
        let st = store();
        let (s, sb) = with_open_sandbox(&st);
        let sb = sb.as_str();
        for key in ["tool:c1", "token:m:p"] {
            st.execute(
                "INSERT INTO events (id, kind, message_id, timestamp, data, part_key)
                 VALUES (?, 'tool_call', 'm', 3, '{}', ?)",
                &[format!("evt_old_{key}").into(), key.into()],
            )
            .unwrap();
        }
        let fx = s.on_sandbox_frame(
            &frame(sb, json!({"type": "tool_call", "messageId": "m", "tool": "bash", "callId": "c1", "status": "completed"})),
            4,
        );
        let ServerMessage::SandboxEvent { event } = &fx.outbound[0].message else {
            panic!("{:?}", fx.outbound)
        };
        assert_eq!(event.id, part_event_id("tool:c1"));
        let mut staged = Staged::default();
        let fx = s
            .stage_sandbox_frame(
                &frame(
                    sb,
                    json!({"type": "token", "messageId": "m", "partId": "p", "content": "Hi"}),
                ),
                5,
                &mut staged,
            )
            .expect("staged");
        let ServerMessage::SandboxEvent { event } = &fx.outbound[0].message else {
            panic!("{:?}", fx.outbound)
        };
        assert_eq!(event.id, part_event_id("token:m:p"));
        s.write_staged(staged).unwrap();
        let rows = st
            .query(
                "SELECT part_key, id FROM events WHERE part_key IS NOT NULL ORDER BY seq",
                &[],
            )
            .unwrap();
        let rows: Vec<(String, String)> = rows
            .into_iter()
            .map(|r| {
                let mut c = crate::store::Cols::new(r);
                (c.string().unwrap(), c.string().unwrap())
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                ("tool:c1".to_owned(), part_event_id("tool:c1")),
                ("token:m:p".to_owned(), part_event_id("token:m:p")),
            ]
        );
    }

    /// Streamed parts are told at once and written later, together, exactly as told.
    #[test]
    fn streamed_parts_are_staged_told_and_written_together() {
        use crate::engine::staged::Staged;
        use crate::engine::timeline;
        let st = store();
        let (s, sb) = with_open_sandbox(&st);
        let sb = sb.as_str();
        // A call stored the usual way (a stored streamed part is acknowledged at once).
        let fx = s.on_sandbox_frame(
            &frame(sb, json!({"type": "tool_call", "messageId": "m", "tool": "bash", "callId": "c0", "status": "running", "ackId": "a0"})),
            3,
        );
        assert_eq!(
            fx.to_sandbox,
            vec![SandboxCommand::Ack {
                ack_id: "a0".into()
            }]
        );
        let stored_c0 = st
            .scalar("SELECT id FROM events WHERE part_key = 'tool:c0'", &[])
            .unwrap()
            .unwrap();
        let rows = || {
            st.query("SELECT seq, id, kind, data FROM events ORDER BY seq", &[])
                .unwrap()
        };
        let before = rows();
        let mut staged = Staged::default();
        st.take_statements();
        let mut told = vec![];
        for (text, now) in [
            (frame(sb, json!({"type": "tool_call", "messageId": "m", "tool": "bash", "callId": "c1", "status": "running", "ackId": "a1"})), 4),
            (frame(sb, json!({"type": "token", "messageId": "m", "partId": "p", "content": "He", "ackId": "a2"})), 5),
            (json!({"type": "batch", "events": [
                {"type": "token", "messageId": "m", "partId": "p", "content": "Hell", "sandboxId": sb, "timestamp": 6, "ackId": "a3"},
                {"type": "tool_call", "messageId": "m", "tool": "bash", "callId": "c0", "status": "completed", "output": "ok", "sandboxId": sb, "timestamp": 6, "ackId": "a4"},
                {"type": "token", "messageId": "m", "partId": "p", "content": "Hello", "sandboxId": sb, "timestamp": 6, "ackId": "a5"},
            ]}).to_string(), 6),
        ] {
            let fx = s.stage_sandbox_frame(&text, now, &mut staged).expect("staged");
            assert!(fx.to_sandbox.is_empty(), "acknowledged only once written");
            for o in fx.outbound {
                match o.message {
                    ServerMessage::SandboxEvent { event } => told.push(event),
                    ServerMessage::SandboxEvents { events } => told.extend(events),
                    m => panic!("{m:?}"),
                }
            }
        }
        // Nothing written yet: one read ran, for the current sandbox and the next sequence
        // together; ids come from the part keys.
        let ran = st.take_statements();
        assert!(ran.len() == 1 && ran[0].starts_with("SELECT"), "{ran:#?}");
        assert_eq!(rows(), before);
        assert_eq!(staged.len(), 3, "c1, the text once, c0");
        // Told in order, one past the other, after everything stored; c0 kept its id and the
        // batch told the text once, newest.
        let seqs: Vec<i64> = told.iter().map(|e| e.seq).collect();
        let newest = st
            .scalar("SELECT MAX(seq) FROM events", &[])
            .unwrap()
            .and_then(|v| v.as_i64())
            .unwrap();
        assert_eq!(seqs, (newest + 1..=newest + 4).collect::<Vec<_>>());
        assert_eq!(told[2].data["output"], "ok");
        assert_eq!(
            Some(crate::store::SqlValue::Text(told[2].id.clone())),
            Some(stored_c0)
        );
        assert_eq!(told[3].data["content"], "Hello");
        assert_eq!(told[1].id, told[3].id, "the text part is one event");
        // Anything else is not staged: it goes the usual way once the staged parts are written.
        for other in [
            frame(sb, json!({"type": "step_start", "messageId": "m"})),
            frame("sb-other", json!({"type": "token", "messageId": "m", "partId": "q", "content": "x"})),
            json!({"type": "batch", "events": [
                {"type": "token", "messageId": "m", "partId": "p", "content": "Hello!", "sandboxId": sb, "timestamp": 7},
                {"type": "heartbeat", "sandboxId": sb, "timestamp": 7},
            ]}).to_string(),
            "{not json".into(),
        ] {
            assert!(s.stage_sandbox_frame(&other, 7, &mut staged).is_none(), "{other}");
        }
        assert_eq!(staged.len(), 3);
        let acks = s.write_staged(std::mem::take(&mut staged)).unwrap();
        // Each part's newest version is acknowledged: the supervisor keeps no other waiting.
        assert_eq!(acks, vec!["a1", "a4", "a5"]);
        // The timeline now holds exactly what was told, each part once, in its place.
        let codec = timeline::CursorCodec { session_id: "s" };
        let page = timeline::older_than(&st, &codec, timeline::NEWEST, 100).unwrap();
        let tail: Vec<_> = page.events.iter().rev().take(3).rev().cloned().collect();
        let expect: Vec<_> = [&told[0], &told[2], &told[3]]
            .into_iter()
            .cloned()
            .collect();
        assert_eq!(tail, expect);
        assert_eq!(
            page.events.len(),
            before.len() - 1 + 3,
            "c0 moved, c1 and the text added"
        );
        // The sandbox's activity was written with the parts.
        let active = st
            .scalar("SELECT last_activity FROM sandbox WHERE id = 1", &[])
            .unwrap();
        assert_eq!(active.and_then(|v| v.as_i64()), Some(6));
        // What comes the usual way next follows them.
        let fx = s.on_sandbox_frame(
            &frame(sb, json!({"type": "step_start", "messageId": "m"})),
            8,
        );
        let ServerMessage::SandboxEvent { event } = &fx.outbound[0].message else {
            panic!("{:?}", fx.outbound)
        };
        assert_eq!(event.seq, newest + 5);
    }

    /// A staging is written by the frame that finds it a second and a half to three seconds
    /// old, the age drawn from the whole range: sessions streaming at the same pace spread
    /// their writes.
    #[test]
    fn a_staging_is_written_between_its_youngest_and_oldest_age() {
        use crate::engine::staged::{
            staged_write_age, STAGED_WRITE_JITTER_MS as JITTER, STAGED_WRITE_MS as LEAST,
        };
        assert_eq!(staged_write_age(0), LEAST);
        assert_eq!(staged_write_age(JITTER as u32), LEAST + JITTER);
        assert_eq!(staged_write_age(JITTER as u32 + 1), LEAST);
        let ages: std::collections::BTreeSet<i64> = (0..=u32::MAX)
            .step_by(65_537)
            .map(staged_write_age)
            .collect();
        assert!(ages.iter().all(|a| (LEAST..=LEAST + JITTER).contains(a)));
        assert!(ages.len() > JITTER as usize / 2, "{} distinct", ages.len());
    }

    /// A staging is due in the turn of the first frame at or past its write age, drawn once
    /// with its first check; or as soon as [`STAGED_MAX_PARTS`] parts wait. The staging after
    /// a write draws its own age.
    #[test]
    fn a_staging_is_due_at_its_drawn_age_or_when_full() {
        use crate::engine::staged::{
            staged_write_age, Staged, STAGED_MAX_PARTS, STAGED_WRITE_MS as LEAST,
        };
        let st = store();
        let (s, sb) = with_open_sandbox(&st);
        let sb = sb.as_str();
        let call = |id: usize| {
            frame(
                sb,
                json!({"type": "tool_call", "messageId": "m", "tool": "bash", "callId": format!("c{id}"), "status": "running"}),
            )
        };
        let draws = std::cell::Cell::new(0);
        let random = |r: u32| {
            draws.set(draws.get() + 1);
            r
        };
        let mut staged = Staged::default();
        s.stage_sandbox_frame(&call(0), 1_000, &mut staged).unwrap();
        assert!(!staged.due(1_000, || random(7)));
        let age = staged_write_age(7);
        assert!(age >= LEAST);
        s.stage_sandbox_frame(&call(1), 1_000 + age - 1, &mut staged)
            .unwrap();
        assert!(!staged.due(1_000 + age - 1, || random(0)), "drawn once");
        s.stage_sandbox_frame(&call(2), 1_000 + age, &mut staged)
            .unwrap();
        assert!(staged.due(1_000 + age, || random(0)));
        assert_eq!(draws.get(), 1);
        // Written: the next staging draws again, from its own first check.
        let next = staged.successor();
        s.write_staged(std::mem::replace(&mut staged, next))
            .unwrap();
        s.stage_sandbox_frame(&call(3), 9_000, &mut staged).unwrap();
        assert!(!staged.due(9_000, || random(0)));
        assert!(!staged.due(9_000 + LEAST - 1, || random(0)));
        assert!(staged.due(9_000 + LEAST, || random(0)));
        assert_eq!(draws.get(), 2);
        // A full staging is due whatever its age.
        let mut staged = Staged::default();
        for i in 0..STAGED_MAX_PARTS {
            s.stage_sandbox_frame(&call(100 + i), 20_000, &mut staged)
                .unwrap();
            assert_eq!(
                staged.due(20_000, || random(0)),
                i + 1 == STAGED_MAX_PARTS,
                "{i}"
            );
        }
    }

    /// The staging after a write starts where the last one ended, without reading; once
    /// anything else ran and it is forgotten, it reads again and follows that.
    #[test]
    fn a_staging_after_a_write_starts_where_the_last_ended() {
        use crate::engine::staged::Staged;
        let st = store();
        let (s, sb) = with_open_sandbox(&st);
        let sb = sb.as_str();
        let call = |id: &str| {
            frame(
                sb,
                json!({"type": "tool_call", "messageId": "m", "tool": "bash", "callId": id, "status": "completed"}),
            )
        };
        let told_seq = |fx: Effects| match &fx.outbound[0].message {
            ServerMessage::SandboxEvent { event } => event.seq,
            m => panic!("{m:?}"),
        };
        let mut staged = Staged::default();
        let first = told_seq(s.stage_sandbox_frame(&call("c1"), 3, &mut staged).unwrap());
        let next = staged.successor();
        s.write_staged(std::mem::replace(&mut staged, next))
            .unwrap();
        st.take_statements();
        let second = told_seq(s.stage_sandbox_frame(&call("c2"), 4, &mut staged).unwrap());
        assert_eq!(second, first + 1);
        assert!(st.take_statements().is_empty(), "no read");
        let next = staged.successor();
        s.write_staged(std::mem::replace(&mut staged, next))
            .unwrap();
        // Something else adds an event; the staging forgets its start and follows it.
        let fx = s.on_sandbox_frame(
            &frame(sb, json!({"type": "step_start", "messageId": "m"})),
            5,
        );
        assert_eq!(told_seq(fx), first + 2);
        staged.forget_start();
        let third = told_seq(s.stage_sandbox_frame(&call("c3"), 6, &mut staged).unwrap());
        assert_eq!(third, first + 3);
        s.write_staged(staged).unwrap();
        let seqs: Vec<i64> = st
            .query(
                "SELECT seq FROM events WHERE seq >= ? ORDER BY seq",
                &[first.into()],
            )
            .unwrap()
            .into_iter()
            .map(|r| crate::store::Cols::new(r).i64().unwrap())
            .collect();
        assert_eq!(seqs, (first..=first + 3).collect::<Vec<_>>());
    }

    #[test]
    fn a_replaced_sandbox_is_gone() {
        let st = store();
        let s = created(&st);
        let (old, _) = s.begin_spawn(1).unwrap().unwrap();
        s.spawn_failed(&old.sandbox_id, "provider said no", 2)
            .unwrap();
        assert_eq!(
            s.authenticate_sandbox(&old.token, &old.sandbox_id).unwrap(),
            Err(SandboxRefusal::Gone)
        );
        assert!(
            s.begin_spawn(3).unwrap().is_none(),
            "cooling down after a failure"
        );
        let later = 2 + crate::engine::sandbox::SPAWN_COOLDOWN_MS;
        let (new, _) = s.begin_spawn(later).unwrap().unwrap();
        assert_eq!(
            s.authenticate_sandbox(&old.token, &old.sandbox_id).unwrap(),
            Err(SandboxRefusal::BadToken)
        );
        assert_eq!(
            s.authenticate_sandbox(&new.token, &new.sandbox_id).unwrap(),
            Ok(())
        );
    }

    #[test]
    fn a_boot_failure_fails_the_sandbox_and_keeps_the_queue() {
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        let (a, _) = s.enqueue(&ann, &prompt("work", None), 10).unwrap();
        let (t, _) = s.begin_spawn(11).unwrap().unwrap();
        s.spawn_accepted(&t.sandbox_id, 12).unwrap();
        s.sandbox_opened("sbws", 13).unwrap();
        let fx = s.on_sandbox_frame(
            &frame(
                &t.sandbox_id,
                json!({"type": "error", "error": "clone failed", "ackId": "e1"}),
            ),
            14,
        );
        assert!(fx.outbound.iter().any(|o| matches!(&o.message, ServerMessage::SandboxError { error } if error == "clone failed")));
        assert!(fx.to_sandbox.contains(&SandboxCommand::Ack {
            ack_id: "e1".into()
        }));
        assert_eq!(s.sandbox_status().unwrap(), "failed");
        assert_eq!(
            s.message(&a.message_id).unwrap().unwrap().status,
            MessageStatus::Pending
        );
        assert!(s.needs_sandbox().unwrap());
    }

    /// A refusal is stored once however often it is sent, and the PR's report lists each
    /// host once, a tunnel by its host and port, a plain request with its method.
    #[test]
    fn egress_refusals_are_kept_once_and_listed_for_the_report() {
        let st = store();
        let (s, sb) = with_open_sandbox(&st);
        let sb = sb.as_str();
        let sent = [
            json!({"type": "egress_blocked", "host": "registry.example", "port": 443, "method": "CONNECT", "reason": "not listed", "ackId": "b1"}),
            json!({"type": "egress_blocked", "host": "registry.example", "port": 443, "method": "CONNECT", "reason": "not listed", "ackId": "b1"}),
            json!({"type": "egress_blocked", "host": "x.example", "port": 80, "method": "POST", "reason": "not listed", "ackId": "b2"}),
        ];
        for (i, ev) in sent.into_iter().enumerate() {
            let fx = s.on_sandbox_frame(&frame(sb, ev), 3 + i as i64);
            assert!(fx.to_sandbox.contains(&SandboxCommand::Ack {
                ack_id: if i < 2 { "b1".into() } else { "b2".into() }
            }));
        }
        assert_eq!(
            s.blocked_egress().unwrap(),
            vec![
                "registry.example:443".to_owned(),
                "POST x.example:80".to_owned()
            ]
        );
    }

    mod deadlines {
        use super::*;
        use crate::engine::deadlines::*;

        /// A session with one prompt running in a ready sandbox, at time 1_000.
        fn running(st: &SqliteStore) -> (Session<'_, SqliteStore>, String, String) {
            let s = created(st);
            let ann = s.participant_by_user("u-ann").unwrap().unwrap();
            let (a, _) = s.enqueue(&ann, &prompt("work", None), 1_000).unwrap();
            let (t, _) = s.begin_spawn(1_000).unwrap().unwrap();
            s.spawn_accepted(&t.sandbox_id, 1_000).unwrap();
            s.sandbox_opened("sbws", 1_000).unwrap();
            s.on_sandbox_frame(&frame(&t.sandbox_id, json!({"type": "ready"})), 1_000);
            (s, t.sandbox_id, a.message_id)
        }

        #[test]
        fn the_earliest_deadline_wins_and_heartbeats_move_it() {
            let st = store();
            let (s, sb, _) = running(&st);
            assert_eq!(s.next_deadline().unwrap(), Some(1_000 + HEARTBEAT_STALE_MS));
            s.on_sandbox_frame(&frame(&sb, json!({"type": "heartbeat"})), 31_000);
            assert_eq!(
                s.next_deadline().unwrap(),
                Some(31_000 + HEARTBEAT_STALE_MS)
            );
            s.socket_opened("client", sockets::KIND_CLIENT, 40_000)
                .unwrap();
            assert_eq!(
                s.next_deadline().unwrap(),
                Some(40_000 + inspect_protocol::limits::SUBSCRIBE_DEADLINE_MS)
            );
        }

        #[test]
        fn a_silent_sandbox_goes_stale_and_its_prompt_fails_once() {
            let st = store();
            let (s, sb, m) = running(&st);
            let early = s.on_alarm(1_000 + HEARTBEAT_STALE_MS - 1).unwrap();
            assert_eq!(early, AlarmOutcome::default(), "nothing is due yet");
            let out = s.on_alarm(1_000 + HEARTBEAT_STALE_MS).unwrap();
            assert_eq!(out.fx.stop_sandbox.as_deref(), Some(sb.as_str()));
            assert_eq!(
                s.message(&m).unwrap().unwrap().status,
                MessageStatus::Failed
            );
            assert_eq!(s.sandbox_status().unwrap(), "stale");
            assert_eq!(
                s.authenticate_sandbox("x", &sb).unwrap(),
                Err(SandboxRefusal::BadToken)
            );
            // The alarm repeating changes nothing more.
            let again = s.on_alarm(1_000 + HEARTBEAT_STALE_MS + 5).unwrap();
            assert!(again.fx.outbound.is_empty() && again.fx.stop_sandbox.is_none());
            let completes = st
                .scalar(
                    "SELECT COUNT(*) FROM events WHERE kind = 'execution_complete'",
                    &[],
                )
                .unwrap()
                .unwrap();
            assert_eq!(completes.as_i64(), Some(1));
        }

        #[test]
        fn a_dropped_socket_gets_a_grace_then_a_provider_check() {
            let st = store();
            let (s, sb, _) = running(&st);
            s.socket_closed("sbws").unwrap();
            s.sandbox_disconnected(2_000).unwrap();
            assert_eq!(s.next_deadline().unwrap(), Some(2_000 + RECONNECT_GRACE_MS));
            let out = s.on_alarm(2_000 + RECONNECT_GRACE_MS).unwrap();
            assert_eq!(out.check_provider.as_deref(), Some(sb.as_str()));
            assert!(
                s.on_alarm(2_000 + RECONNECT_GRACE_MS + 1)
                    .unwrap()
                    .check_provider
                    .is_none(),
                "checked once"
            );
            // The provider says it is gone.
            let fx = s
                .sandbox_lost(&sb, "the sandbox's process is gone", 20_000)
                .unwrap();
            assert!(!fx.spawn_wanted, "nothing else waits");
            assert_eq!(s.sandbox_status().unwrap(), "stale");
            // It was ready: saved and stopped, not discarded (its workspace may be worth
            // keeping).
            assert_eq!(fx.stop_sandbox.as_deref(), Some(sb.as_str()));
            assert_eq!(fx.snapshot_sandbox.as_deref(), Some(sb.as_str()));
            assert!(!fx.discard_sandbox);
            // The next sandbox resumes it where the provider keeps sandboxes, however it
            // ended; in place, it keeps its identity.
            let keeps = keeps_sandboxes();
            assert_eq!(
                s.spawn_plan(keeps, "1").unwrap(),
                crate::engine::plan::SpawnPlan::Resume {
                    sandbox_id: sb.clone()
                }
            );
            let (again, _) = s.begin_resume(&sb, 21_000).unwrap().unwrap();
            assert_eq!(again.sandbox_id, sb);
            // The resumed machine is not back in time: it still holds the session's work.
            let fx = s.sandbox_lost(&sb, "not ready in time", 22_000).unwrap();
            assert!(!fx.discard_sandbox);
            assert!(s.resumable().unwrap());
            // A resume onto a new machine (a Pod on the claim) carries the work with it…
            let (t, _) = s.begin_spawn(23_000).unwrap().unwrap();
            s.workspace_carried(&t.sandbox_id, 23_000).unwrap();
            let fx = s
                .sandbox_lost(&t.sandbox_id, "unschedulable", 24_000)
                .unwrap();
            assert!(!fx.discard_sandbox);
            assert!(s.resumable().unwrap());
            // …unless nothing was left to resume.
            let (t, _) = s.begin_spawn(25_000).unwrap().unwrap();
            s.workspace_carried(&t.sandbox_id, 25_000).unwrap();
            s.workspace_lost(&t.sandbox_id).unwrap();
            let fx = s
                .sandbox_lost(&t.sandbox_id, "unschedulable", 26_000)
                .unwrap();
            assert!(fx.discard_sandbox);
            assert!(!s.resumable().unwrap());
            // A resume of a ready workspace that fails for a reason that may pass is tried
            // again on the same workspace; one the provider refuses for good is not.
            let (t, _) = s.begin_spawn(27_000).unwrap().unwrap();
            s.workspace_carried(&t.sandbox_id, 27_000).unwrap();
            s.spawn_failed_as(&t.sandbox_id, "not up in time", true, 28_000)
                .unwrap();
            assert_eq!(s.sandbox_status().unwrap(), "failed");
            assert!(s.resumable().unwrap());
            s.spawn_failed_as(&t.sandbox_id, "no such image", false, 29_000)
                .unwrap();
            assert!(!s.resumable().unwrap());
            // A fresh sandbox that failed holds nothing, however it failed.
            let (t, _) = s.begin_spawn(60_000).unwrap().unwrap();
            s.spawn_failed_as(&t.sandbox_id, "timed out", true, 61_000)
                .unwrap();
            assert!(!s.resumable().unwrap());
        }

        #[test]
        fn a_sandbox_that_never_connects_is_given_up_and_waiting_prompts_respawn() {
            let st = store();
            let s = created(&st);
            let ann = s.participant_by_user("u-ann").unwrap().unwrap();
            s.enqueue(&ann, &prompt("work", None), 0).unwrap();
            let (t, _) = s.begin_spawn(0).unwrap().unwrap();
            assert_eq!(s.next_deadline().unwrap(), Some(CONNECTING_TIMEOUT_MS));
            let out = s.on_alarm(CONNECTING_TIMEOUT_MS).unwrap();
            assert!(out.fx.spawn_wanted);
            assert_eq!(out.fx.stop_sandbox.as_deref(), Some(t.sandbox_id.as_str()));
            assert!(s.begin_spawn(CONNECTING_TIMEOUT_MS).unwrap().is_some());
        }

        #[test]
        fn a_failed_spawn_is_retried_when_the_cooldown_ends() {
            let st = store();
            let s = created(&st);
            let ann = s.participant_by_user("u-ann").unwrap().unwrap();
            s.enqueue(&ann, &prompt("work", None), 0).unwrap();
            let (t, _) = s.begin_spawn(0).unwrap().unwrap();
            s.spawn_failed(&t.sandbox_id, "no", 10).unwrap();
            let due = 10 + crate::engine::sandbox::SPAWN_COOLDOWN_MS;
            assert_eq!(s.next_deadline().unwrap(), Some(due));
            assert!(!s.on_alarm(due - 1).unwrap().fx.spawn_wanted);
            assert!(s.on_alarm(due).unwrap().fx.spawn_wanted);
        }

        #[test]
        fn a_prompt_past_the_execution_limit_is_stopped() {
            let st = store();
            let (s, sb, m) = running(&st);
            // Keep the sandbox alive meanwhile.
            s.on_sandbox_frame(
                &frame(&sb, json!({"type": "heartbeat"})),
                1_000 + EXECUTION_TIMEOUT_MS - 10,
            );
            let out = s.on_alarm(1_000 + EXECUTION_TIMEOUT_MS).unwrap();
            assert!(out
                .fx
                .to_sandbox
                .iter()
                .any(|c| matches!(c, SandboxCommand::Stop { .. })));
            assert_eq!(
                s.message(&m).unwrap().unwrap().status,
                MessageStatus::Failed
            );
        }

        #[test]
        fn a_running_turn_keeps_its_sandbox_and_an_idle_one_does_not() {
            use inspect_provider::EXTEND_EVERY_MS;
            let st = store();
            let (s, sb, m) = running(&st);
            let beat = |at: i64| {
                s.on_sandbox_frame(&frame(&sb, json!({"type": "heartbeat"})), at);
            };
            beat(EXTEND_EVERY_MS - 10);
            assert!(s.next_deadline().unwrap().unwrap() <= 1_000 + EXTEND_EVERY_MS);
            let first = 1_000 + EXTEND_EVERY_MS;
            let out = s.on_alarm(first).unwrap();
            assert_eq!(out.extend_sandbox.as_deref(), Some(sb.as_str()));
            // Alarms repeat: once per period.
            assert!(s.on_alarm(first + 5).unwrap().extend_sandbox.is_none());
            beat(first + EXTEND_EVERY_MS - 10);
            let out = s.on_alarm(first + EXTEND_EVERY_MS).unwrap();
            assert_eq!(out.extend_sandbox.as_deref(), Some(sb.as_str()));
            // The turn ends: an idle sandbox is left to the idle stop.
            s.on_sandbox_frame(
                &frame(
                    &sb,
                    json!({"type": "execution_complete", "messageId": m, "success": true}),
                ),
                first + EXTEND_EVERY_MS + 1,
            );
            let later = first + 2 * EXTEND_EVERY_MS;
            beat(later - 10);
            assert!(s.on_alarm(later).unwrap().extend_sandbox.is_none());
        }

        #[test]
        fn a_long_running_sandbox_s_links_are_signed_anew_once_a_period() {
            use inspect_provider::LINKS_REFRESH_MS;
            let st = store();
            let (s, sb, _) = running(&st);
            // Not before the period is out, and the alarm is set for it.
            assert!(s.on_alarm(60_000).unwrap().refresh_links.is_none());
            let due = 1_000 + LINKS_REFRESH_MS;
            s.on_sandbox_frame(&frame(&sb, json!({"type": "heartbeat"})), due - 10);
            assert!(s.next_deadline().unwrap().unwrap() <= due);
            assert_eq!(
                s.on_alarm(due).unwrap().refresh_links.as_deref(),
                Some(sb.as_str())
            );
            assert!(s.on_alarm(due + 5).unwrap().refresh_links.is_none());
        }

        #[test]
        fn an_abandoned_snapshot_does_not_hold_the_sandbox() {
            let st = store();
            let (s, sb, m) = running(&st);
            s.on_sandbox_frame(
                &frame(
                    &sb,
                    json!({"type": "execution_complete", "messageId": m, "success": true}),
                ),
                2_000,
            );
            let (previous, _) = s.snapshot_started(&sb, 3_000).unwrap();
            assert_eq!(previous.as_deref(), Some("ready"));
            assert_eq!(s.sandbox_status().unwrap(), "snapshotting");
            // The object that waited for the snapshot went away; nobody ends it.
            assert!(s.next_deadline().unwrap().unwrap() <= 3_000 + SNAPSHOT_TIMEOUT_MS);
            s.on_sandbox_frame(&frame(&sb, json!({"type": "heartbeat"})), 30_000);
            s.on_alarm(3_000 + SNAPSHOT_TIMEOUT_MS).unwrap();
            assert_eq!(s.sandbox_status().unwrap(), "ready");
        }

        #[test]
        fn a_prompt_sent_while_a_stopping_sandbox_is_saved_gets_the_next_sandbox() {
            let st = store();
            let (s, sb, m) = running(&st);
            s.on_sandbox_frame(
                &frame(
                    &sb,
                    json!({"type": "execution_complete", "messageId": m, "success": true}),
                ),
                2_000,
            );
            let out = s.on_alarm(2_000 + INACTIVITY_MS).unwrap();
            assert_eq!(out.fx.stop_sandbox.as_deref(), Some(sb.as_str()));
            let (previous, _) = s.snapshot_started(&sb, 2_001 + INACTIVITY_MS).unwrap();
            assert_eq!(previous.as_deref(), Some("stopped"));
            let ann = s.participant_by_user("u-ann").unwrap().unwrap();
            let (_, fx) = s
                .enqueue(&ann, &prompt("more", None), 2_002 + INACTIVITY_MS)
                .unwrap();
            assert!(!fx.spawn_wanted, "the sandbox is still being saved");
            let fx = s
                .snapshot_ended(&sb, "stopped", 2_003 + INACTIVITY_MS)
                .unwrap();
            assert!(fx.spawn_wanted);
            assert_eq!(s.sandbox_status().unwrap(), "stopped");
        }

        #[test]
        fn an_idle_ready_sandbox_is_stopped_and_typing_keeps_it() {
            let st = store();
            let (s, sb, m) = running(&st);
            s.on_sandbox_frame(
                &frame(
                    &sb,
                    json!({"type": "execution_complete", "messageId": m, "success": true}),
                ),
                2_000,
            );
            assert_eq!(s.sandbox_status().unwrap(), "ready");
            assert_eq!(
                s.next_deadline().unwrap(),
                Some(1_000 + HEARTBEAT_STALE_MS),
                "the heartbeat deadline comes first"
            );
            // Heartbeats keep it alive but are not activity.
            let mut t = 2_000;
            while t < 2_000 + INACTIVITY_MS - 30_000 {
                t += 30_000;
                s.on_sandbox_frame(&frame(&sb, json!({"type": "heartbeat"})), t);
            }
            // Someone typing is activity.
            s.warm(t).unwrap();
            assert!(s
                .on_alarm(2_000 + INACTIVITY_MS)
                .unwrap()
                .fx
                .stop_sandbox
                .is_none());
            s.on_sandbox_frame(&frame(&sb, json!({"type": "heartbeat"})), t + 30_000);
            s.on_sandbox_frame(&frame(&sb, json!({"type": "heartbeat"})), t + 60_000);
            let out = s.on_alarm(t + INACTIVITY_MS).unwrap();
            assert_eq!(out.fx.stop_sandbox.as_deref(), Some(sb.as_str()));
            assert!(out.fx.to_sandbox.contains(&SandboxCommand::Shutdown));
            assert_eq!(s.sandbox_status().unwrap(), "stopped");
        }

        #[test]
        fn typing_warms_a_sandbox_when_none_is_alive() {
            let st = store();
            let s = created(&st);
            let fx = s.warm(10).unwrap();
            assert!(fx.spawn_wanted);
            assert!(fx
                .outbound
                .iter()
                .any(|o| matches!(o.message, ServerMessage::SandboxWarming)));
            s.begin_spawn(11).unwrap().unwrap();
            assert!(!s.warm(12).unwrap().spawn_wanted, "one is on its way");
        }

        #[test]
        fn automatic_retries_give_up_after_three_failures_but_a_prompt_still_tries() {
            let st = store();
            let s = created(&st);
            let ann = s.participant_by_user("u-ann").unwrap().unwrap();
            s.enqueue(&ann, &prompt("work", None), 0).unwrap();
            let cool = crate::engine::sandbox::SPAWN_COOLDOWN_MS;
            let mut now = 0;
            for round in 0..3 {
                let (t, _) = s.begin_spawn(now).unwrap().unwrap();
                let fx = s.spawn_failed(&t.sandbox_id, "no", now).unwrap();
                let gave_up = fx.outbound.iter().any(|o| matches!(&o.message, ServerMessage::SandboxError { error } if error.contains("not retrying")));
                assert_eq!(gave_up, round == 2);
                now += cool;
                let retry = s.on_alarm(now).unwrap().fx.spawn_wanted;
                assert_eq!(retry, round < 2, "round {round}");
            }
            assert_eq!(s.next_deadline().unwrap(), None, "no retry is scheduled");
            let (_, fx) = s.enqueue(&ann, &prompt("again", None), now).unwrap();
            assert!(fx.spawn_wanted, "a person's prompt tries again");
        }

        #[test]
        fn transient_spawn_failures_are_retried_and_never_open_the_breaker() {
            let st = store();
            let s = created(&st);
            let ann = s.participant_by_user("u-ann").unwrap().unwrap();
            s.enqueue(&ann, &prompt("work", None), 0).unwrap();
            let cool = crate::engine::sandbox::SPAWN_COOLDOWN_MS;
            let mut now = 0;
            for round in 0..5 {
                let (t, _) = s.begin_spawn(now).unwrap().unwrap();
                let fx = s
                    .spawn_failed_as(&t.sandbox_id, "provider answered 503", true, now)
                    .unwrap();
                assert!(
                    !fx.outbound.iter().any(|o| matches!(&o.message, ServerMessage::SandboxError { error } if error.contains("not retrying"))),
                    "round {round}"
                );
                now += cool;
                assert!(s.on_alarm(now).unwrap().fx.spawn_wanted, "round {round}");
            }
        }
    }
}

fn github_callback() -> inspect_protocol::scm::CallbackContext {
    inspect_protocol::scm::CallbackContext::Github {
        owner: "acme".into(),
        repo: "web".into(),
        number: 7,
        review_comment_id: None,
        review: false,
    }
}

#[test]
fn a_prompt_from_a_pull_request_submits_one_review_that_its_completion_names() {
    use inspect_protocol::scm::{ReviewResult, ReviewVerdict};
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    // Nothing running: no review.
    assert_eq!(
        s.review_target().unwrap_err().code,
        inspect_protocol::ErrorCode::Conflict
    );
    let (plain, _) = s.enqueue(&ann, &prompt("a person's", None), 9).unwrap();
    s.start_next(10).unwrap();
    assert_eq!(
        s.review_target().unwrap_err().code,
        inspect_protocol::ErrorCode::BadRequest,
        "a person's prompt has no pull request to review"
    );
    s.complete(&plain.message_id, true, None, 11).unwrap();
    let mut with = prompt("review it", None);
    with.callback_context = Some(github_callback());
    let (bot, _) = s.enqueue(&ann, &with, 12).unwrap();
    s.start_next(20).unwrap();
    let target = s.review_target().unwrap();
    assert_eq!(
        (
            target.message_id.as_str(),
            target.owner.as_str(),
            target.number
        ),
        (bot.message_id.as_str(), "acme", 7)
    );
    let result = ReviewResult {
        url: "https://github.com/acme/web/pull/7#pullrequestreview-1".into(),
        event: ReviewVerdict::Approve,
        inline: 2,
        folded: 1,
    };
    let fx = s.record_review(&target, &result, 21).unwrap();
    assert_eq!(fx.outbound.len(), 1, "clients see the review artifact");
    assert!(s
        .record_review(&target, &result, 22)
        .unwrap()
        .outbound
        .is_empty());
    assert_eq!(
        s.review_target().unwrap_err().code,
        inspect_protocol::ErrorCode::Conflict,
        "one review per prompt"
    );
    let fx = s.complete(&bot.message_id, true, None, 30).unwrap();
    assert_eq!(
        fx.completions[0].review_url.as_deref(),
        Some(result.url.as_str())
    );
}

#[test]
fn a_prompt_with_a_callback_reports_when_it_ends_and_others_do_not() {
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    let mut with = prompt("from the bot", None);
    with.callback_context = Some(github_callback());
    let (bot, _) = s.enqueue(&ann, &with, 10).unwrap();
    let (plain, _) = s.enqueue(&ann, &prompt("from a person", None), 11).unwrap();
    s.start_next(20).unwrap();
    let frame = serde_json::json!({"type": "token", "sandboxId": "sb", "timestamp": 21, "messageId": bot.message_id, "content": "All done."});
    let _ = s.on_sandbox_frame(&frame.to_string(), 21);
    let fx = s.complete(&bot.message_id, true, None, 30).unwrap();
    assert_eq!(fx.completions.len(), 1);
    let c = &fx.completions[0];
    assert_eq!(c.session_id, "sess1");
    assert_eq!(c.context, github_callback());
    assert!(c.success);
    s.start_next(31).unwrap();
    let fx = s
        .complete(&plain.message_id, false, Some("x".into()), 40)
        .unwrap();
    assert!(
        fx.completions.is_empty(),
        "a person's prompt reports nowhere"
    );
}

#[test]
fn waiting_bot_prompts_fail_and_report_when_sandboxes_are_given_up() {
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    let mut with = prompt("from the bot", None);
    with.callback_context = Some(github_callback());
    let (bot, _) = s.enqueue(&ann, &with, 10).unwrap();
    let (plain, _) = s.enqueue(&ann, &prompt("a person's", None), 11).unwrap();
    let fx = s
        .fail_waiting_callbacks("no sandbox could be started", 50)
        .unwrap();
    assert_eq!(fx.completions.len(), 1);
    assert!(!fx.completions[0].success);
    assert_eq!(
        s.message(&bot.message_id).unwrap().unwrap().status,
        MessageStatus::Failed
    );
    assert_eq!(
        s.message(&plain.message_id).unwrap().unwrap().status,
        MessageStatus::Pending,
        "a person can still prompt"
    );
}

#[test]
fn pull_requests_are_one_artifact_each_updated_in_place() {
    use inspect_protocol::scm::{AuthoredAs, PullRequestResult};
    let st = store();
    let s = created(&st);
    let mut r = PullRequestResult {
        repo_owner: "acme".into(),
        repo_name: "web".into(),
        head_branch: "open-inspect/sess1".into(),
        base_branch: Some("main".into()),
        pr_number: Some(3),
        pr_url: Some("https://github.com/acme/web/pull/3".into()),
        state: "open".into(),
        updated: false,
        authored_as: AuthoredAs::User,
        message: None,
    };
    let fx = s.record_pull_request(&r, 10).unwrap();
    assert!(matches!(
        fx.outbound[0].message,
        ServerMessage::ArtifactCreated { .. }
    ));
    r.state = "merged".into();
    let fx = s.record_pull_request(&r, 20).unwrap();
    assert!(matches!(
        fx.outbound[0].message,
        ServerMessage::ArtifactUpdated { .. }
    ));
    let arts = s.artifacts().unwrap();
    assert_eq!(arts.len(), 1);
    assert_eq!(arts[0].metadata.as_ref().unwrap()["state"], "merged");
    let known = s
        .known_pull_requests("ACME", "web", "open-inspect/sess1")
        .unwrap();
    assert_eq!(known.len(), 1);
    assert_eq!(known[0].state, "merged");
    assert!(s
        .known_pull_requests("acme", "web", "other")
        .unwrap()
        .is_empty());
    assert_eq!(
        s.index_update(0).unwrap().pr_state.as_deref(),
        Some("merged")
    );
    assert_eq!(s.pr_user().unwrap(), "u-ann");
    // Changed on GitHub: reopened, then reviewed; the same artifact, every client told.
    use inspect_protocol::scm::PullRequestChange;
    use serde_json::json;
    let change = |state: Option<&str>, review: Option<&str>| PullRequestChange {
        owner: "Acme".into(),
        repo: "web".into(),
        number: 3,
        state: state.map(str::to_owned),
        review: review.map(str::to_owned),
        reviewer: review.map(|_| "bob".to_owned()),
        at: 30,
    };
    let fx = s
        .update_pull_request(&change(Some("open"), None), 31)
        .unwrap();
    assert!(matches!(
        fx.outbound[0].message,
        ServerMessage::ArtifactUpdated { .. }
    ));
    assert!(fx.index_changed);
    let meta = s.artifacts().unwrap()[0].metadata.clone().unwrap();
    assert_eq!(
        (meta["state"].clone(), meta["stateAt"].clone()),
        (json!("open"), json!(30))
    );
    assert_eq!(s.index_update(0).unwrap().pr_state.as_deref(), Some("open"));
    // The same again changes nothing; a review is kept beside the state.
    assert!(s
        .update_pull_request(&change(Some("open"), None), 32)
        .unwrap()
        .outbound
        .is_empty());
    s.update_pull_request(&change(None, Some("approved")), 33)
        .unwrap();
    let meta = s.artifacts().unwrap()[0].metadata.clone().unwrap();
    assert_eq!(
        (meta["review"].clone(), meta["reviewer"].clone()),
        (json!("approved"), json!("bob"))
    );
    assert_eq!(meta["state"], "open");
    // A pull request the session never had: nothing.
    let mut other = change(Some("merged"), None);
    other.number = 99;
    assert!(s
        .update_pull_request(&other, 34)
        .unwrap()
        .outbound
        .is_empty());
    assert_eq!(s.artifacts().unwrap().len(), 1);
}

#[test]
fn events_filtered_by_type_and_prompt_page_to_the_end() {
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    let (a, _) = s.enqueue(&ann, &prompt("one", None), 10).unwrap();
    let (b, _) = s.enqueue(&ann, &prompt("two", None), 11).unwrap();
    s.start_next(12).unwrap();
    s.complete(&a.message_id, true, None, 13).unwrap();
    s.start_next(14).unwrap();
    s.complete(&b.message_id, false, Some("x".into()), 15)
        .unwrap();
    let codec = timeline::CursorCodec {
        session_id: "sess1",
    };
    let only = |types: &[&str], m: Option<&str>| {
        let f = timeline::EventFilter::parse(
            &types.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            m.map(Into::into),
        )
        .unwrap();
        timeline::newer_than_filtered(&st, &codec, 0, 1, &f).unwrap()
    };
    let page = only(&["execution_complete,user_message"], None);
    assert_eq!(page.events.len(), 1);
    assert!(page.has_more);
    let f = timeline::EventFilter::parse(&["execution_complete".into()], None).unwrap();
    let all = timeline::newer_than_filtered(&st, &codec, 0, 50, &f).unwrap();
    assert_eq!(all.events.len(), 2);
    assert!(all.events.iter().all(|e| e.kind == "execution_complete"));
    let next = timeline::newer_than_filtered(
        &st,
        &codec,
        codec.decode(all.cursor.as_deref().unwrap()).unwrap(),
        50,
        &f,
    )
    .unwrap();
    assert!(next.events.is_empty() && !next.has_more);
    let mine = only(&[], Some(&b.message_id));
    assert_eq!(
        mine.events[0].message_id.as_deref(),
        Some(b.message_id.as_str())
    );
    assert!(timeline::EventFilter::parse(&["DROP TABLE".into()], None).is_err());
    assert!(timeline::EventFilter::parse(&[], Some(String::new())).is_err());
}

#[test]
fn prompts_past_the_rate_wait_and_say_when() {
    let st = store();
    let s = created(&st);
    let limits = deadlines::SessionLimits {
        prompts_per_minute: Some(3),
        ..Default::default()
    };
    s.set_limits(&limits).unwrap();
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    for i in 0..3 {
        s.enqueue(&ann, &prompt(&format!("p{i}"), None), 1_000 + i)
            .unwrap();
    }
    let err = s
        .enqueue(&ann, &prompt("too soon", None), 2_000)
        .unwrap_err();
    assert_eq!(err.code, inspect_protocol::ErrorCode::TooManyRequests);
    assert_eq!(
        err.retry_after,
        Some(59),
        "the first leaves the window at 61 s"
    );
    // Another person is not held up by ann.
    let (tok, _) = s.mint_ws_token(&actor("bob"), 2_000).unwrap();
    let _ = tok;
    let bob = s.participant_by_user("u-bob").unwrap().unwrap();
    s.enqueue(&bob, &prompt("bob's", None), 2_001).unwrap();
    // A minute on, ann may again.
    s.enqueue(&ann, &prompt("later", None), 61_001).unwrap();
}

#[test]
fn attempts_hold_a_slot_each_count_against_the_limits_and_are_chosen_once() {
    use inspect_protocol::session::{AttemptsRequest, RepositoryRef};
    use inspect_protocol::ErrorCode;
    let st = store();
    let s = Session::new(&st);
    let req = CreateSessionRequest {
        repositories: Some(vec![RepositoryRef {
            owner: "acme".into(),
            name: "web".into(),
            branch: None,
            source: None,
        }]),
        model: Some("inspect/fake-model".into()),
        ..Default::default()
    };
    s.create("sess1", &req, &actor("ann"), 1).unwrap();
    let ask = |count: usize, models: Vec<&str>| AttemptsRequest {
        content: "Make the header sticky\nand test it".into(),
        count,
        models: models.into_iter().map(str::to_owned).collect(),
        agents: vec![],
    };
    // Two to four, a prompt, at most one model an attempt: refused in words.
    for (bad, words) in [
        (ask(1, vec![]), "2 to 4"),
        (ask(5, vec![]), "2 to 4"),
        (
            ask(2, vec!["a", "b", "c"]),
            "at most one of each per attempt",
        ),
        (
            AttemptsRequest {
                content: " ".into(),
                count: 2,
                models: vec![],
                agents: vec![],
            },
            "need a prompt",
        ),
    ] {
        let err = s.reserve_attempts(&bad, &actor("bob"), 10).unwrap_err();
        assert_eq!(err.code, ErrorCode::BadRequest);
        assert!(err.message.contains(words), "{}", err.message);
    }
    let mut three = ask(3, vec!["m/one"]);
    three.agents = vec![inspect_protocol::agent::AgentKind::ClaudeCode];
    let plan = s.reserve_attempts(&three, &actor("bob"), 10).unwrap();
    assert_eq!(
        plan.plans[0].agent,
        Some(inspect_protocol::agent::AgentKind::ClaudeCode)
    );
    assert_eq!(
        plan.plans[1].agent,
        Some(inspect_protocol::agent::AgentKind::Opencode),
        "the session's agent where none is named"
    );
    assert_eq!(plan.plans.len(), 3);
    assert_eq!(
        plan.plans[0].title,
        "Attempt 1 of 3: Make the header sticky"
    );
    assert_eq!(plan.plans[0].model.as_deref(), Some("m/one"));
    assert_eq!(
        plan.plans[1].model.as_deref(),
        Some("inspect/fake-model"),
        "the session's model where none is named"
    );
    assert_eq!(
        plan.plans[2].actor.user_id, "u-bob",
        "as the person who asked"
    );
    assert_eq!(plan.plans[0].repositories[0].name, "web");
    // Made: recorded in their slots; a slot given back is not an attempt.
    for (i, p) in plan.plans.iter().enumerate().take(2) {
        s.record_child(&format!("att{i}"), &p.title, p.reservation.as_deref(), 20)
            .unwrap();
    }
    s.release_child(plan.plans[2].reservation.as_deref().unwrap())
        .unwrap();
    let groups = s.attempt_groups().unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].sessions, ["att0", "att1"]);
    assert_eq!(groups[0].prompt, "Make the header sticky\nand test it");
    assert_eq!(groups[0].chosen, None);
    // Counted against the fifteen children.
    for i in 0..11 {
        s.record_child(&format!("c{i:02}"), "t", None, 30).unwrap();
    }
    let err = s
        .reserve_attempts(&ask(3, vec![]), &actor("bob"), 40)
        .unwrap_err();
    assert!(
        err.message.contains("at most 2 more attempts"),
        "{}",
        err.message
    );
    // Chosen once: again the same is fine, another is refused, a stranger is not one.
    let chosen = s.choose_attempt("att1").unwrap();
    assert_eq!(chosen.sessions, ["att0", "att1"]);
    assert_eq!(chosen.chosen.as_deref(), Some("att1"));
    assert!(s.choose_attempt("att1").is_ok());
    let err = s.choose_attempt("att0").unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert!(err.message.contains("att1 was chosen"), "{}", err.message);
    assert_eq!(
        s.choose_attempt("c01").unwrap_err().code,
        ErrorCode::NotFound
    );
    assert_eq!(
        s.attempt_groups().unwrap()[0].chosen.as_deref(),
        Some("att1")
    );
}

#[test]
fn children_nest_two_deep_and_fifteen_in_all() {
    use inspect_protocol::session::SpawnChildRequest;
    let st = store();
    let s = created(&st);
    let ask = SpawnChildRequest {
        prompt: "do part A".into(),
        ..Default::default()
    };
    let plan = s.child_plan(&ask).unwrap();
    assert_eq!(plan.depth, 1);
    assert_eq!(
        plan.actor.user_id, "u-ann",
        "as the session's prompter (its creator here)"
    );
    assert_eq!(plan.title, "do part A");
    assert!(
        s.child_plan(&SpawnChildRequest::default()).is_err(),
        "a prompt is needed"
    );
    // Slots are held while children are made: the last ones cannot be taken twice.
    let held = s.reserve_child(&ask, 10).unwrap();
    let slot = held.reservation.clone().unwrap();
    assert!(slot.starts_with("reserved:"));
    for i in 1..inspect_protocol::session::MAX_CHILDREN - 1 {
        s.record_child(&format!("child{i:02}"), "t", None, i as i64)
            .unwrap();
    }
    let last = s.reserve_child(&ask, 20).unwrap();
    assert_eq!(last.children.len(), 14, "13 made and one slot held");
    let err = s.reserve_child(&ask, 21).unwrap_err();
    assert!(err.message.contains("at most 15"), "{}", err.message);
    // A slot given back frees its place; a recorded one becomes the child.
    s.release_child(last.reservation.as_deref().unwrap())
        .unwrap();
    s.record_child("child00", "A", Some(&slot), 30).unwrap();
    assert!(s.children().unwrap().contains(&"child00".to_string()));
    assert!(!s.children().unwrap().contains(&slot));
    let again = s.reserve_child(&ask, 40).unwrap();
    assert!(s.reserve_child(&ask, 41).is_err());
    // A slot never recorded lapses after two minutes.
    let later = 41 + inspect_protocol::session::CHILD_RESERVATION_MS + 1;
    let _ = again;
    let taken = s.reserve_child(&ask, later).unwrap();
    assert!(taken.reservation.is_some());
    assert_eq!(s.children().unwrap().len(), 15);

    // A session two deep makes none.
    let st2 = store();
    let deep = Session::new(&st2);
    let req = CreateSessionRequest {
        parent_session_id: Some("p".into()),
        depth: Some(2),
        ..Default::default()
    };
    deep.create("deep", &req, &actor("ann"), 1).unwrap();
    let err = deep.child_plan(&ask).unwrap_err();
    assert!(err.message.contains("at most 2 deep"), "{}", err.message);
    assert_eq!(
        deep.state().unwrap().parent_session_id.as_deref(),
        Some("p")
    );
}

#[test]
fn attachments_are_kept_in_chunks_and_read_back() {
    let st = store();
    let s = created(&st);
    let big: Vec<u8> = (0..(2 * 1024 * 1024 + 17))
        .map(|i| (i % 251) as u8)
        .collect();
    let a = s
        .store_attachment("../../etc/shot one.png", "image/png", &big, 5)
        .unwrap();
    assert_eq!(a.kind, "image");
    assert_eq!(a.name, "shot_one.png", "no path, no spaces");
    let id = a.attachment_id.unwrap();
    let (name, mime, bytes) = s.attachment(&id).unwrap().unwrap();
    assert_eq!(
        (name.as_str(), mime.as_str()),
        ("shot_one.png", "image/png")
    );
    assert_eq!(bytes, big);
    assert!(s.attachment("att_nope").unwrap().is_none());
    assert!(s.store_attachment("x", "image/png", &[], 5).is_err());
    assert!(s.store_attachment("x", "nonsense", b"x", 5).is_err());
    assert!(s
        .store_attachment("x", "image/png", &vec![0u8; 10 * 1024 * 1024 + 1], 5)
        .is_err());
    assert_eq!(crate::engine::attachments::safe_name("..."), "attachment");
}

#[test]
fn an_upserted_part_moves_past_everything_in_one_row() {
    use crate::engine::timeline;
    let st = store();
    let _s = created(&st);
    let data = |t: &str| {
        let mut m = serde_json::Map::new();
        m.insert("content".into(), serde_json::Value::String(t.into()));
        m
    };
    let a1 = timeline::upsert(&st, "token:m:p", "token", Some("m"), data("Hel"), 1).unwrap();
    let b = timeline::append(&st, "tool_call", Some("m"), data("x"), 2).unwrap();
    let a2 = timeline::upsert(&st, "token:m:p", "token", Some("m"), data("Hello"), 3).unwrap();
    assert!(
        a2.seq > b.seq && b.seq > a1.seq,
        "{} {} {}",
        a1.seq,
        b.seq,
        a2.seq
    );
    assert_eq!(a1.id, a2.id, "the same event, updated in place");
    let rows = st
        .query(
            "SELECT COUNT(*), MAX(data) FROM events WHERE part_key = 'token:m:p'",
            &[],
        )
        .unwrap();
    let mut c = crate::store::Cols::new(rows.into_iter().next().unwrap());
    assert_eq!(c.i64().unwrap(), 1);
    assert!(c.string().unwrap().contains("Hello"));
    // Appends after it still come later.
    let c2 = timeline::append(&st, "step_finish", Some("m"), data("y"), 4).unwrap();
    assert!(c2.seq > a2.seq);
}

/// The subscribe path's statements are counted, so one added by accident shows here.
#[test]
fn subscribing_answers_from_nine_reads_then_writes_twice() {
    let st = store();
    let s = created(&st);
    let (tok, _) = s.mint_ws_token(&actor("bob"), 2_000).unwrap();
    s.socket_opened("w1", sockets::KIND_CLIENT, 2_000).unwrap();
    st.take_statements();
    let mut fx = s.on_client_frame_staged(
        "w1",
        &frame(&ClientMessage::Subscribe {
            token: tok.token,
            client_id: "w1".into(),
        }),
        2_001,
    );
    let ran = st.take_statements();
    assert_eq!(ran.len(), 9, "{ran:#?}");
    assert!(
        ran.iter()
            .all(|q| q.starts_with("SELECT") || q.starts_with("WITH")),
        "{ran:#?}"
    );
    // Not subscribed until recorded: then the socket is a client everyone's messages reach.
    assert!(s.socket_ids(Some(sockets::KIND_CLIENT)).unwrap().is_empty());
    let sub = fx.subscription.take().expect("a subscription to record");
    st.take_statements();
    s.record_subscription(&sub).unwrap();
    assert_eq!(st.take_statements().len(), 2);
    assert_eq!(
        s.socket_ids(Some(sockets::KIND_CLIENT)).unwrap(),
        vec!["w1".to_string()]
    );
    let ServerMessage::Subscribed {
        participant,
        participant_id,
        session,
        ..
    } = &fx.outbound[0].message
    else {
        panic!("{fx:?}")
    };
    assert_eq!(participant.name, "bob");
    assert_eq!(&participant.participant_id, participant_id);
    assert_eq!(session.id, "sess1");
    // Presence: the joiner is in the sync, and the others hear of them.
    assert!(matches!(&fx.outbound[1].message,
        ServerMessage::PresenceSync { participants } if participants.iter().any(|p| p.name == "bob" && p.last_seen == 2_001)));
    assert!(matches!(&fx.outbound[2].message,
        ServerMessage::PresenceUpdate { participants } if participants[0].name == "bob"));
}

/// The socket's window, written as JSON by SQLite, says exactly what the typed page says.
#[test]
fn the_json_window_matches_the_typed_page() {
    let st = store();
    let s = created(&st);
    let mut data = serde_json::Map::new();
    data.insert(
        "content".into(),
        serde_json::json!("héllo \"quoted\" \n line"),
    );
    data.insert(
        "args".into(),
        serde_json::json!({"command": "ls", "n": [1, 2.5, null, true]}),
    );
    for i in 0..700 {
        let kind = match i % 7 {
            0 => event_kind::HEARTBEAT,
            1 => "tool_call",
            _ => "token",
        };
        let message = (i % 3 != 0).then(|| format!("msg_{}", i % 5));
        timeline::append(&st, kind, message.as_deref(), data.clone(), i).unwrap();
        if i % 11 == 0 {
            timeline::upsert(&st, "token:m:p", "token", Some("m"), data.clone(), i).unwrap();
        }
    }
    let sid = s.session_id().unwrap();
    let codec = timeline::CursorCodec { session_id: &sid };
    let mut before = timeline::NEWEST;
    let mut pages = 0;
    loop {
        let typed = timeline::older_than(&st, &codec, before, 200).unwrap();
        let window = timeline::window_older_than(&st, &codec, before, 200).unwrap();
        assert_eq!(window.events.parse().unwrap(), typed.events);
        assert_eq!(window.cursor, typed.cursor);
        assert_eq!(window.has_more, typed.has_more);
        pages += 1;
        if !typed.has_more {
            break;
        }
        before = codec.decode(typed.cursor.as_deref().unwrap()).unwrap();
    }
    assert_eq!(pages, 4);
    // An empty timeline is an empty array.
    let empty = timeline::window_older_than(&st, &codec, 0, 200).unwrap();
    assert_eq!(empty.events.as_str(), "[]");
    assert!(!empty.has_more && empty.cursor.is_none());
}

#[test]
fn a_capture_of_the_workspace_replaces_the_last_and_is_read_file_by_file() {
    use inspect_protocol::changes::{ChangeKind, ChangedFile, ChangesReport, RepoChanges};
    let st = store();
    let s = created(&st);
    assert_eq!(s.captured_paths().unwrap(), None);
    assert!(s.changes_summary().unwrap().repos.is_empty());
    let file = |path: &str, patch: Option<&str>| ChangedFile {
        path: path.into(),
        old_path: None,
        kind: ChangeKind::Modified,
        additions: 1,
        deletions: 0,
        binary: false,
        patch: patch.map(str::to_owned),
        omitted: None,
    };
    let repo = |name: &str, files: Vec<ChangedFile>| RepoChanges {
        repo: name.into(),
        base: "abc".into(),
        additions: files.len() as u64,
        deletions: 0,
        files,
        more_files: 0,
        error: None,
    };
    let report = ChangesReport {
        repos: vec![
            repo(
                "acme/web",
                vec![file("a b.txt", Some("+x\n")), file("c.rs", Some("+y\n"))],
            ),
            repo("acme/api", vec![file("main.go", Some("+z\n"))]),
        ],
    };
    let fx = s.record_changes(&report, 50).unwrap();
    assert!(matches!(
        fx.outbound[0].message,
        ServerMessage::DiffUpdated {
            files: 3,
            additions: 3,
            captured_at: 50,
            ..
        }
    ));
    let summary = s.changes_summary().unwrap();
    assert_eq!(summary.captured_at, Some(50));
    assert_eq!(summary.repos.len(), 2);
    assert!(summary
        .repos
        .iter()
        .flat_map(|r| &r.files)
        .all(|f| f.patch.is_none()));
    let one = s.changed_file("acme/web", "a b.txt").unwrap().unwrap();
    assert_eq!(one.patch.as_deref(), Some("+x\n"));
    assert_eq!(s.changed_file("acme/web", "nope").unwrap(), None);
    assert_eq!(
        s.captured_paths().unwrap().unwrap(),
        vec!["acme/api:main.go", "acme/web:a b.txt", "acme/web:c.rs"]
    );
    // The next capture replaces it whole.
    let report = ChangesReport {
        repos: vec![repo("acme/web", vec![file("c.rs", Some("+y2\n"))])],
    };
    s.record_changes(&report, 60).unwrap();
    assert_eq!(s.captured_paths().unwrap().unwrap(), vec!["c.rs"]);
    assert_eq!(s.changed_file("acme/api", "main.go").unwrap(), None);
}

mod terminals {
    use super::*;
    use inspect_protocol::sandbox::SandboxCommand;
    use inspect_protocol::terminal::OpenTerminalRequest;
    use inspect_protocol::ErrorCode;
    use serde_json::json;

    fn frame(sandbox: &str, v: serde_json::Value) -> String {
        let mut v = v;
        v["sandboxId"] = json!(sandbox);
        v["timestamp"] = json!(1);
        v.to_string()
    }

    fn sent(fx: &Effects) -> Vec<String> {
        fx.to_sandbox
            .iter()
            .map(|c| {
                serde_json::to_value(c).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn a_terminal_opens_in_a_running_sandbox_and_its_bytes_pass_through() {
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        let size = OpenTerminalRequest { cols: 80, rows: 24 };
        assert_eq!(
            s.open_terminal(&ann, &size, 5).unwrap_err().code,
            ErrorCode::Conflict,
            "no sandbox yet"
        );
        s.enqueue(&ann, &prompt("work", None), 10).unwrap();
        let (t, _) = s.begin_spawn(10).unwrap().unwrap();
        s.spawn_accepted(&t.sandbox_id, 10).unwrap();
        s.sandbox_opened("sbws", 10).unwrap();
        s.on_sandbox_frame(&frame(&t.sandbox_id, json!({"type": "ready"})), 11);
        join(&s, "ann", "ws1", 12);
        for bad in [(0, 24), (80, 0), (10_000, 24), (80, 1_000)] {
            let req = OpenTerminalRequest {
                cols: bad.0,
                rows: bad.1,
            };
            assert_eq!(
                s.open_terminal(&ann, &req, 12).unwrap_err().code,
                ErrorCode::BadRequest
            );
        }
        let (info, fx) = s.open_terminal(&ann, &size, 13).unwrap();
        assert_eq!(sent(&fx), vec!["terminal_open"]);
        assert_eq!(info.opened_by, "ann");
        assert_eq!(s.terminals().unwrap().len(), 1);
        // Keys from a subscribed client go to the sandbox; a closed or unknown terminal,
        // a bad size or too much at once are errors to the sender only.
        let input = |id: &str, data: &str| {
            frame_of(&ClientMessage::TerminalInput {
                terminal_id: id.into(),
                data: data.into(),
            })
        };
        let fx = s.on_client_frame("ws1", &input(&info.id, "echo $((6*7))\r"), 14);
        assert_eq!(sent(&fx), vec!["terminal_input"]);
        let fx = s.on_client_frame("ws1", &input("term_nope", "x"), 14);
        assert_eq!(only_error(&fx).0, "not_found");
        let fx = s.on_client_frame("ws1", &input(&info.id, &"x".repeat(70_000)), 14);
        assert_eq!(only_error(&fx).0, "payload_too_large");
        let resize = frame_of(&ClientMessage::TerminalResize {
            terminal_id: info.id.clone(),
            cols: 0,
            rows: 0,
        });
        assert_eq!(
            only_error(&s.on_client_frame("ws1", &resize, 14)).0,
            "bad_request"
        );
        let resize = frame_of(&ClientMessage::TerminalResize {
            terminal_id: info.id.clone(),
            cols: 120,
            rows: 40,
        });
        assert_eq!(
            sent(&s.on_client_frame("ws1", &resize, 14)),
            vec!["terminal_resize"]
        );
        assert_eq!(s.terminals().unwrap()[0].cols, 120);
        // An unsubscribed socket types nothing.
        s.socket_opened("ws2", sockets::KIND_CLIENT, 14).unwrap();
        assert_eq!(
            only_error(&s.on_client_frame("ws2", &input(&info.id, "x"), 14)).0,
            "unauthorized"
        );
        // Output goes to every client; a replay to the one that attached.
        let out = json!({"type": "terminal_output", "terminalId": info.id, "data": "NDIK"});
        let fx = s.on_sandbox_frame(&frame(&t.sandbox_id, out), 15);
        assert!(matches!(fx.outbound[0].target, Target::AllClients));
        let attach = frame_of(&ClientMessage::TerminalAttach {
            terminal_id: info.id.clone(),
        });
        let fx = s.on_client_frame("ws1", &attach, 15);
        assert!(
            matches!(&fx.to_sandbox[0], SandboxCommand::TerminalReplay { client, .. } if client == "ws1")
        );
        let replay = json!({"type": "terminal_output", "terminalId": info.id, "data": "NDIK", "client": "ws1"});
        let fx = s.on_sandbox_frame(&frame(&t.sandbox_id, replay), 15);
        assert!(matches!(&fx.outbound[0].target, Target::Socket(ws) if ws == "ws1"));
        // The shell exits: the terminal is closed, with its code, and said on the timeline.
        let exit = json!({"type": "terminal_exit", "terminalId": info.id, "exitCode": 0});
        let fx = s.on_sandbox_frame(&frame(&t.sandbox_id, exit), 16);
        assert!(fx.outbound.iter().any(|o| matches!(
            o.message,
            ServerMessage::TerminalClosed {
                exit_code: Some(0),
                ..
            }
        )));
        assert_eq!(s.terminals().unwrap()[0].closed_at, Some(16));
        let late = json!({"type": "terminal_output", "terminalId": info.id, "data": "NDIK"});
        assert!(s
            .on_sandbox_frame(&frame(&t.sandbox_id, late), 17)
            .outbound
            .is_empty());
        // Another one, closed by the sandbox's stop.
        let (second, _) = s.open_terminal(&ann, &size, 18).unwrap();
        s.set_sandbox_status("stopped", None, 19).unwrap();
        let listed = s.terminals().unwrap();
        assert_eq!(
            listed.iter().find(|t| t.id == second.id).unwrap().closed_at,
            Some(19)
        );
        assert_eq!(
            s.close_terminal(&second.id, Some(&ann), None, 20)
                .unwrap_err()
                .code,
            ErrorCode::NotFound
        );
    }

    #[test]
    fn an_editor_link_opens_once_for_its_person_while_the_sandbox_runs() {
        use inspect_protocol::editor::EditorEndpoint;
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        assert_eq!(
            s.editor_link(&ann, 5).unwrap_err().code,
            ErrorCode::Conflict,
            "no sandbox yet"
        );
        s.enqueue(&ann, &prompt("work", None), 10).unwrap();
        let (t, _) = s.begin_spawn(10).unwrap().unwrap();
        s.spawn_accepted(&t.sandbox_id, 10).unwrap();
        s.sandbox_opened("sbws", 10).unwrap();
        s.on_sandbox_frame(&frame(&t.sandbox_id, json!({"type": "ready"})), 11);
        assert_eq!(
            s.editor_link(&ann, 12).unwrap_err().code,
            ErrorCode::Conflict,
            "the provider exposes no editor"
        );
        let editor = EditorEndpoint {
            port: 41_000,
            url: "http://127.0.0.1:41001".into(),
        };
        s.set_editor("sb_other", Some(&editor)).unwrap();
        assert!(s.editor_link(&ann, 12).is_err(), "another sandbox's word");
        s.set_editor(&t.sandbox_id, Some(&editor)).unwrap();

        let now = 100_000;
        let (grant, fx) = s.editor_link(&ann, now).unwrap();
        assert_eq!(sent(&fx), vec!["editor_start"]);
        assert_eq!(grant.expires_at, 100 + 300);
        let stored: String = st
            .scalar("SELECT token_hash FROM editor_links", &[])
            .unwrap()
            .and_then(|v| v.into_string())
            .unwrap();
        assert_ne!(stored, grant.token, "kept hashed");
        // Someone else with the link is refused, and that does not use it up.
        assert_eq!(
            s.open_editor_link(&grant.token, "u-bob", now)
                .unwrap_err()
                .code,
            ErrorCode::Forbidden
        );
        assert_eq!(
            s.open_editor_link(&grant.token, "u-ann", now).unwrap(),
            editor
        );
        assert_eq!(
            s.open_editor_link(&grant.token, "u-ann", now)
                .unwrap_err()
                .code,
            ErrorCode::NotFound,
            "a link opens once"
        );
        assert_eq!(
            s.open_editor_link("made-up", "u-ann", now)
                .unwrap_err()
                .code,
            ErrorCode::NotFound
        );
        let (late, _) = s.editor_link(&ann, now).unwrap();
        assert_eq!(
            s.open_editor_link(&late.token, "u-ann", now + 300_000)
                .unwrap_err()
                .code,
            ErrorCode::Gone,
            "expired"
        );
        let (after_stop, _) = s.editor_link(&ann, now).unwrap();
        s.set_sandbox_status("stopped", None, now + 1).unwrap();
        assert_eq!(
            s.open_editor_link(&after_stop.token, "u-ann", now + 2)
                .unwrap_err()
                .code,
            ErrorCode::Conflict,
            "the sandbox stopped"
        );
        assert_eq!(
            s.editor_link(&ann, now + 3).unwrap_err().code,
            ErrorCode::Conflict
        );
    }

    #[test]
    fn a_desktop_link_opens_what_it_was_made_for_once_for_its_person() {
        use crate::engine::editor::Service;
        use inspect_protocol::desktop::DesktopEndpoints;
        use inspect_protocol::editor::EditorEndpoint;
        let st = store();
        let s = created(&st);
        let ann = s.participant_by_user("u-ann").unwrap().unwrap();
        let watch = Service::Desktop { control: false };
        let control = Service::Desktop { control: true };
        s.enqueue(&ann, &prompt("work", None), 10).unwrap();
        let (t, _) = s.begin_spawn(10).unwrap().unwrap();
        s.spawn_accepted(&t.sandbox_id, 10).unwrap();
        s.sandbox_opened("sbws", 10).unwrap();
        s.on_sandbox_frame(&frame(&t.sandbox_id, json!({"type": "ready"})), 11);
        assert_eq!(
            s.service_link(watch, &ann, 12).unwrap_err().code,
            ErrorCode::Conflict,
            "the provider exposes no desktop"
        );
        let at = |port: u16| EditorEndpoint {
            port,
            url: format!("http://127.0.0.1:{port}"),
        };
        let desktop = DesktopEndpoints {
            view: at(41_012),
            control: at(41_013),
        };
        s.set_desktop(&t.sandbox_id, Some(&desktop)).unwrap();
        let editor = at(41_011);
        s.set_editor(&t.sandbox_id, Some(&editor)).unwrap();

        let now = 100_000;
        let (seen, fx) = s.service_link(watch, &ann, now).unwrap();
        assert_eq!(sent(&fx), vec!["desktop_start"]);
        assert_eq!(seen.expires_at, 100 + 300);
        // A desktop link is not the editor's, and the editor's not the desktop's; asking at
        // the wrong door does not use it up.
        assert_eq!(
            s.open_service_link(&seen.token, false, "u-ann", now)
                .unwrap_err()
                .code,
            ErrorCode::NotFound
        );
        let (editor_link, _) = s.editor_link(&ann, now).unwrap();
        assert_eq!(
            s.open_service_link(&editor_link.token, true, "u-ann", now)
                .unwrap_err()
                .code,
            ErrorCode::NotFound
        );
        assert_eq!(
            s.open_editor_link(&editor_link.token, "u-ann", now)
                .unwrap(),
            editor
        );
        // Someone else is refused; the person gets the view-only server, once.
        assert_eq!(
            s.open_service_link(&seen.token, true, "u-bob", now)
                .unwrap_err()
                .code,
            ErrorCode::Forbidden
        );
        assert_eq!(
            s.open_service_link(&seen.token, true, "u-ann", now)
                .unwrap(),
            (desktop.view.clone(), watch)
        );
        assert_eq!(
            s.open_service_link(&seen.token, true, "u-ann", now)
                .unwrap_err()
                .code,
            ErrorCode::NotFound,
            "a link opens once"
        );
        // Control is its own link, to the other server.
        let (driven, _) = s.service_link(control, &ann, now).unwrap();
        assert_eq!(
            s.open_service_link(&driven.token, true, "u-ann", now)
                .unwrap(),
            (desktop.control.clone(), control)
        );
        let said: Vec<(String, serde_json::Value)> = st
            .query(
                "SELECT kind, data FROM events WHERE kind = 'desktop' ORDER BY seq",
                &[],
            )
            .unwrap()
            .into_iter()
            .map(|r| {
                let mut c = crate::store::Cols::new(r);
                let kind = c.string().unwrap();
                (kind, serde_json::from_str(&c.string().unwrap()).unwrap())
            })
            .collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(said[0].1["control"], false);
        assert_eq!(said[1].1["control"], true);
        assert_eq!(said[1].1["by"], ann.name.as_str());
        let (late, _) = s.service_link(watch, &ann, now).unwrap();
        s.set_sandbox_status("stopped", None, now + 1).unwrap();
        assert_eq!(
            s.open_service_link(&late.token, true, "u-ann", now + 2)
                .unwrap_err()
                .code,
            ErrorCode::Conflict,
            "the sandbox stopped"
        );
    }

    fn frame_of(msg: &ClientMessage) -> String {
        serde_json::to_string(msg).unwrap()
    }
}

#[test]
fn pictures_taken_during_a_prompt_are_named_in_its_report_and_read_back_only_as_pictures() {
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    let png = b"\x89PNG\r\n\x1a\n-not-really".to_vec();
    assert_eq!(
        s.record_media("text/html", "x", b"<script>", 1)
            .unwrap_err()
            .code,
        inspect_protocol::ErrorCode::BadRequest
    );
    let mut with = prompt("show me", None);
    with.callback_context = Some(github_callback());
    let (bot, _) = s.enqueue(&ann, &with, 10).unwrap();
    s.start_next(11).unwrap();
    let (art, fx) = s
        .record_media("image/png", "The login page", &png, 12)
        .unwrap();
    assert_eq!(fx.outbound.len(), 2, "the timeline event and the artifact");
    let id = art.metadata.unwrap()["attachmentId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(s.media(&id).unwrap().unwrap(), ("image/png".into(), png));
    // A person's file is not a picture to serve.
    let file = s
        .store_attachment("notes.txt", "text/plain", b"hi", 13)
        .unwrap();
    assert!(s.media(&file.attachment_id.unwrap()).unwrap().is_none());
    let fx = s.complete(&bot.message_id, true, None, 20).unwrap();
    assert_eq!(
        fx.completions[0].pictures,
        vec!["The login page".to_owned()]
    );
}

#[test]
fn a_reasoning_effort_is_one_the_agent_takes() {
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    let mut p = prompt("think", None);
    p.reasoning_effort = Some("extreme".into());
    let e = s.enqueue(&ann, &p, 10).unwrap_err();
    assert_eq!(e.code, inspect_protocol::ErrorCode::BadRequest);
    assert!(e.message.contains("low, medium, high"), "{}", e.message);
    p.reasoning_effort = Some("high".into());
    assert!(s.enqueue(&ann, &p, 11).is_ok());
}

#[test]
fn only_a_prompt_naming_a_model_or_effort_needs_the_catalog() {
    use super::queue::frame_names_a_model;
    assert!(frame_names_a_model(
        r#"{"type":"prompt","content":"x","model":"inspect/fake-model"}"#
    ));
    assert!(frame_names_a_model(
        r#"{"type":"prompt","content":"x","reasoningEffort":"high"}"#
    ));
    // An escaped key is the same key to the reader that handles the frame.
    assert!(frame_names_a_model(
        r#"{"type":"prompt","content":"x","mod\u0065l":"gpt"}"#
    ));
    assert!(!frame_names_a_model(r#"{"type":"prompt","content":"x"}"#));
    assert!(!frame_names_a_model(r#"{"type":"ping"}"#));
    assert!(!frame_names_a_model(
        r#"{"type":"subscribe","token":"t","clientId":"c"}"#
    ));
    assert!(!frame_names_a_model("not json"));
}

#[test]
fn every_ended_prompt_tells_its_author_and_names_tell_the_named() {
    use inspect_protocol::inbox::InboxKind;
    use serde_json::json;
    let frame = |sandbox: &str, mut v: serde_json::Value| {
        v["sandboxId"] = json!(sandbox);
        v["timestamp"] = json!(1);
        v.to_string()
    };
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    let (a, fx) = s
        .enqueue(
            &ann,
            &prompt("fix it, then ask @Bob and mail x@y.z", None),
            10,
        )
        .unwrap();
    assert_eq!(fx.attention.len(), 1);
    let mention = &fx.attention[0];
    assert_eq!(mention.kind, InboxKind::Mention);
    assert_eq!(mention.mentions, vec!["bob"]);
    assert_eq!(mention.by.as_deref(), Some("u-ann"));
    assert_eq!(mention.key, format!("mention:{}", a.message_id));
    let (b, fx) = s.enqueue(&ann, &prompt("then this", None), 11).unwrap();
    assert!(fx.attention.is_empty(), "no names, no mention");
    let (c, _) = s.enqueue(&ann, &prompt("and this", None), 12).unwrap();

    let (ticket, _) = s.begin_spawn(13).unwrap().unwrap();
    s.spawn_accepted(&ticket.sandbox_id, 14).unwrap();
    s.sandbox_opened("sbws", 15).unwrap();
    let sb = ticket.sandbox_id.clone();
    s.on_sandbox_frame(&frame(&sb, json!({"type": "ready"})), 16);
    s.on_sandbox_frame(&frame(&sb, json!({"type": "token", "messageId": a.message_id, "partId": "p1", "content": "Fixed.\n\nAll   tests pass."})), 21);
    let fx = s.complete(&a.message_id, true, None, 30).unwrap();
    let told = &fx.attention[0];
    assert_eq!(told.kind, InboxKind::PromptFinished);
    assert_eq!(told.people, vec!["u-ann"]);
    assert_eq!(told.detail, "Fixed. All tests pass.");
    assert_eq!(told.session_id, "sess1");
    assert_eq!(told.key, format!("prompt:{}", a.message_id));

    s.start_next(31).unwrap();
    s.on_sandbox_frame(&frame(&sb, json!({"type": "token", "messageId": b.message_id, "partId": "p2", "content": "Which branch should I use?"})), 32);
    let fx = s.complete(&b.message_id, true, None, 40).unwrap();
    assert_eq!(fx.attention[0].kind, InboxKind::Question);

    s.start_next(41).unwrap();
    let fx = s
        .complete(&c.message_id, false, Some("the sandbox died".into()), 50)
        .unwrap();
    assert_eq!(fx.attention[0].kind, InboxKind::PromptFailed);
    assert_eq!(fx.attention[0].detail, "the sandbox died");
    // The same end told twice is nothing new.
    assert!(s
        .complete(&c.message_id, false, None, 51)
        .unwrap()
        .attention
        .is_empty());
}

/// A first prompt's path through a new session (what each of a due tick's sessions does)
/// is counted, so a read added twice by accident shows here.
#[test]
fn a_first_prompt_queues_spawns_and_schedules_in_counted_statements() {
    let st = store();
    let s = created(&st);
    let ann = s.participant_by_user("u-ann").unwrap().unwrap();
    st.take_statements();
    let (_, fx) = s.enqueue(&ann, &prompt("hello", None), 2_000).unwrap();
    assert!(fx.spawn_wanted);
    let ran = st.take_statements();
    assert_eq!(ran.len(), 7, "{ran:#?}");
    let snapshot = s.latest_snapshot().unwrap();
    let plan = s
        .spawn_plan_from(keeps_sandboxes(), snapshot.as_ref(), "")
        .unwrap();
    assert_eq!(plan, plan::SpawnPlan::Fresh { warning: None });
    assert!(s.begin_spawn(2_001).unwrap().is_some());
    let ran = st.take_statements();
    assert_eq!(ran.len(), 6, "{ran:#?}");
    // A second spawn is refused while the first is on its way, from the same one read.
    assert!(s.begin_spawn(2_002).unwrap().is_none());
    assert_eq!(st.take_statements().len(), 1);
    let due = s.next_deadline().unwrap();
    assert_eq!(due, Some(2_001 + deadlines::CONNECTING_TIMEOUT_MS));
    assert_eq!(st.take_statements().len(), 1);
}
