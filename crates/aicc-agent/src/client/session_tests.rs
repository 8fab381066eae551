//! The session against scripted bridges over in-memory pipes: each rule of
//! a conformant agent, and failing closed on a bridge that breaks the
//! protocol.
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

use super::error::{ClientError, STANDARD_ERROR_CODES};
use super::retry::RetryPolicy;
use super::session::{Session, SessionOptions};
use super::transport::Duplex;

/// The bridge's end of the pipe.
struct Peer {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: WriteHalf<DuplexStream>,
}

impl Peer {
    async fn send(&mut self, message: Value) {
        self.send_raw(format!("{message}\n").as_bytes()).await;
    }
    async fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).await.unwrap();
        self.writer.flush().await.unwrap();
    }
    /// The client's next line (heartbeats included).
    async fn next(&mut self) -> Value {
        let line = self.lines.next_line().await.unwrap().expect("the client closed the pipe");
        serde_json::from_str(&line).unwrap()
    }
    async fn next_call(&mut self) -> Value {
        let message = self.next().await;
        assert_eq!(message["type"], "tool_call", "{message}");
        message
    }
}

fn pipe() -> (Box<dyn Duplex>, Peer) {
    let (client, bridge) = tokio::io::duplex(4 << 20);
    let (reader, writer) = tokio::io::split(bridge);
    (Box::new(client), Peer { lines: BufReader::new(reader).lines(), writer })
}

/// A manifest granting sensors, and `move` too when `can_move`.
fn session_init(can_move: bool, in_reply_to: Option<&str>) -> Value {
    let (granted, actuators) = if can_move {
        (json!(["can_observe_world", "can_move_self"]), json!(["move"]))
    } else {
        (json!(["can_observe_world"]), json!([]))
    };
    json!({
        "protocol": "aicc/0.1", "type": "session_init", "session_id": "S1", "message_id": "i1", "in_reply_to": in_reply_to,
        "capabilities": { "sensors": ["proprioception", "vision"], "actuators": actuators, "generators": [], "granted": granted },
        "tools": [
            { "id": "proprioception", "class": "sensor", "capability": "can_observe_world" },
            { "id": "vision", "class": "sensor", "capability": "can_observe_world" },
            { "id": "move", "class": "actuator", "capability": "can_move_self" },
        ],
        "events": { "subscribed": ["collision"] },
        "meta": { "tick": 1 },
    })
}

fn result(call_id: &str, output: Value, tick: u64) -> Value {
    json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": call_id, "ok": true, "output": output, "meta": { "tick": tick } })
}

fn failure(call_id: &str, code: &str, retryable: bool) -> Value {
    json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": call_id, "ok": false, "error": { "code": code, "message": format!("scripted {code}"), "retryable": retryable }, "meta": { "tick": 2 } })
}

fn event(tick: u64, seq: u64) -> Value {
    json!({ "protocol": "aicc/0.1", "type": "event", "topic": "collision", "payload": {}, "meta": { "tick": tick, "seq": seq } })
}

fn options() -> SessionOptions {
    SessionOptions { timeout: Duration::from_secs(20), ..SessionOptions::default() }
}

/// A session opened on a greeting bridge.
async fn open(can_move: bool, options: SessionOptions) -> (Session, Peer) {
    let (stream, mut peer) = pipe();
    peer.send(session_init(can_move, None)).await;
    (Session::open(stream, options).await.unwrap(), peer)
}

fn call_id(message: &Value) -> String {
    message["call_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn with_a_token_the_client_asks_first_and_the_token_is_only_in_auth() {
    let (stream, mut peer) = pipe();
    let bridge = tokio::spawn(async move {
        let request = peer.next().await;
        assert_eq!(
            (request["type"].as_str(), request["auth"]["token"].as_str()),
            (Some("manifest_request"), Some("s3cret"))
        );
        peer.send(session_init(false, request["message_id"].as_str())).await;
        peer
    });
    let session =
        Session::open(stream, SessionOptions { token: Some("s3cret".into()), ..options() })
            .await
            .unwrap();
    assert_eq!(session.session_id(), Some("S1"));
    bridge.await.unwrap();
}

#[tokio::test]
async fn a_bridge_that_does_not_greet_is_asked_and_its_error_is_surfaced() {
    let (stream, mut peer) = pipe();
    let bridge = tokio::spawn(async move {
        let request = peer.next().await;
        assert_eq!(request["type"], "manifest_request");
        assert!(request.get("auth").is_none(), "no token was given");
        peer.send(json!({ "protocol": "aicc/0.1", "type": "error", "code": "invalid_input", "message": "authentication required", "retryable": false, "in_reply_to": request["message_id"] })).await;
        peer
    });
    let Err(error) = Session::open(
        stream,
        SessionOptions { greeting_wait: Duration::from_millis(50), ..options() },
    )
    .await
    else {
        panic!("opened without auth")
    };
    assert!(
        matches!(&error, ClientError::Remote(e) if e.code == "invalid_input" && e.message == "authentication required"),
        "{error}"
    );
    assert_eq!(error.exit_code(), 3);
    bridge.await.unwrap();
}

#[tokio::test]
async fn tools_outside_the_sessions_capabilities_are_refused_and_never_sent() {
    let (mut session, mut peer) = open(false, options()).await;
    let refused = session.call("move", &json!({ "forward": 0.3 })).await.unwrap_err();
    assert!(
        matches!(&refused, ClientError::Refused(m) if m.contains("'move'") && m.contains("can_move_self")),
        "{refused}"
    );
    let unknown = session.call("teleport", &json!({})).await.unwrap_err();
    assert!(
        matches!(&unknown, ClientError::Refused(m) if m.contains("not in the manifest")),
        "{unknown}"
    );
    assert_eq!(unknown.exit_code(), 2);
    let bridge = tokio::spawn(async move {
        let call = peer.next_call().await;
        assert_eq!(
            call["tool"], "proprioception",
            "the first line the bridge got is the permitted call: nothing was sent before it"
        );
        peer.send(result(&call_id(&call), json!({ "x": 1 }), 3)).await;
    });
    assert_eq!(session.call("proprioception", &json!({})).await.unwrap().output, json!({ "x": 1 }));
    bridge.await.unwrap();
}

#[tokio::test]
async fn a_result_with_a_foreign_or_repeated_call_id_is_reported_and_not_taken() {
    let (mut session, mut peer) = open(false, options()).await;
    let bridge = tokio::spawn(async move {
        let first = peer.next_call().await;
        peer.send(result("not-yours", json!({ "marker": "FOREIGN" }), 3)).await;
        peer.send(result(&call_id(&first), json!({ "marker": "REAL" }), 4)).await;
        let second = peer.next_call().await;
        assert_ne!(call_id(&first), call_id(&second), "call ids are unique");
        peer.send(result(&call_id(&first), json!({ "marker": "REPEATED" }), 5)).await;
        peer.send(result(&call_id(&second), json!({ "marker": "SECOND" }), 6)).await;
    });
    assert_eq!(session.call("proprioception", &json!({})).await.unwrap().output["marker"], "REAL");
    let warnings = session.take_warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("protocol violation") && w.contains("unknown call_id 'not-yours'")),
        "{warnings:?}"
    );
    assert_eq!(session.call("vision", &json!({})).await.unwrap().output["marker"], "SECOND");
    let warnings = session.take_warnings();
    assert!(warnings.iter().any(|w| w.contains("already answered")), "{warnings:?}");
    bridge.await.unwrap();
}

#[tokio::test]
async fn every_standard_error_code_is_surfaced_and_a_non_retryable_call_is_sent_once() {
    for code in STANDARD_ERROR_CODES {
        // Retries allowed: a non-retryable error must still not be retried.
        let (mut session, mut peer) =
            open(false, SessionOptions { retry: RetryPolicy::new(3).unwrap(), ..options() }).await;
        let bridge = tokio::spawn(async move {
            let call = peer.next_call().await;
            peer.send(failure(&call_id(&call), code, false)).await;
            let after = peer.next().await;
            assert_eq!(after["type"], "session_close", "{code}: the call was sent again: {after}");
        });
        let error = session.call("proprioception", &json!({})).await.unwrap_err();
        assert!(
            matches!(&error, ClientError::Remote(e) if e.code == code && !e.retryable && e.is_standard()),
            "{code}: {error}"
        );
        assert_eq!(error.to_string(), format!("error {code}: scripted {code}"));
        session.close().await.unwrap();
        bridge.await.unwrap();
    }
}

#[tokio::test]
async fn a_top_level_error_answering_the_call_fails_it_with_its_code() {
    let (mut session, mut peer) = open(false, options()).await;
    let bridge = tokio::spawn(async move {
        let call = peer.next_call().await;
        peer.send(json!({ "protocol": "aicc/0.1", "type": "error", "code": "tool_unavailable", "message": "lease held by another session", "retryable": true, "in_reply_to": call["message_id"] })).await;
    });
    let error = session.call("proprioception", &json!({})).await.unwrap_err();
    assert!(
        matches!(&error, ClientError::Remote(e) if e.code == "tool_unavailable" && e.retryable),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "error tool_unavailable retryable: lease held by another session"
    );
    bridge.await.unwrap();
}

#[tokio::test]
async fn a_retryable_sensor_failure_is_retried_as_allowed_but_an_actuator_never() {
    let (mut session, mut peer) =
        open(true, SessionOptions { retry: RetryPolicy::new(2).unwrap(), ..options() }).await;
    let bridge = tokio::spawn(async move {
        for _ in 0..2 {
            let call = peer.next_call().await;
            peer.send(failure(&call_id(&call), "execution_failed", true)).await;
        }
        let third = peer.next_call().await;
        assert_eq!(third["tool"], "proprioception");
        peer.send(result(&call_id(&third), json!({ "ok_at_last": true }), 9)).await;
        let motion = peer.next_call().await;
        assert_eq!(motion["tool"], "move");
        peer.send(failure(&call_id(&motion), "execution_failed", true)).await;
        let after = peer.next().await;
        assert_eq!(after["type"], "session_close", "the motion was repeated: {after}");
    });
    assert_eq!(
        session.call("proprioception", &json!({})).await.unwrap().output,
        json!({ "ok_at_last": true })
    );
    assert_eq!(session.take_warnings().iter().filter(|w| w.contains("retry")).count(), 2);
    let error = session.call("move", &json!({ "forward": 0.1 })).await.unwrap_err();
    assert!(
        matches!(&error, ClientError::Remote(e) if e.code == "execution_failed" && e.retryable),
        "{error}"
    );
    session.close().await.unwrap();
    bridge.await.unwrap();
}

#[tokio::test]
async fn events_come_in_tick_order_and_an_older_one_after_is_flagged_late() {
    let (mut session, mut peer) = open(false, options()).await;
    for (tick, seq) in [(5, 1), (7, 2), (6, 3), (8, 4)] {
        peer.send(event(tick, seq)).await;
    }
    let mut ticks = Vec::new();
    for _ in 0..4 {
        let event = session.next_event(None).await.unwrap().unwrap();
        assert!(!event.late);
        ticks.push(event.tick);
    }
    assert_eq!(ticks, [5, 6, 7, 8]);
    peer.send(event(3, 5)).await;
    let late = session.next_event(None).await.unwrap().unwrap();
    assert_eq!((late.tick, late.late, late.to_json()["late"].clone()), (3, true, json!(true)));
}

#[tokio::test]
async fn events_that_arrive_during_a_call_are_kept_for_later() {
    let (mut session, mut peer) = open(false, options()).await;
    let bridge = tokio::spawn(async move {
        let call = peer.next_call().await;
        peer.send(event(4, 1)).await;
        peer.send(result(&call_id(&call), json!({}), 5)).await;
        peer
    });
    session.call("proprioception", &json!({})).await.unwrap();
    let event = session.next_event(None).await.unwrap().unwrap();
    assert_eq!((event.tick, event.late), (4, false), "tick 5 was seen, so tick 4 is final at once");
    drop(bridge.await.unwrap());
}

#[tokio::test]
async fn the_bridges_heartbeat_is_answered_and_a_manifest_update_applies() {
    let (mut session, mut peer) = open(false, options()).await;
    let mut update = session_init(false, None);
    update["capabilities"]["sensors"] = json!(["proprioception"]);
    peer.send(json!({ "protocol": "aicc/0.1", "type": "heartbeat", "manifest_update": update, "meta": { "tick": 9 } })).await;
    let bridge = tokio::spawn(async move {
        let answer = peer.next().await;
        assert_eq!(answer["type"], "heartbeat");
        assert!(answer.get("in_reply_to").is_none());
        peer // kept open until the test ends
    });
    session.idle(Duration::from_millis(200)).await.unwrap();
    let refused = session.call("vision", &json!({})).await.unwrap_err();
    assert!(
        matches!(&refused, ClientError::Refused(m) if m.contains("not among this session's sensors")),
        "{refused}"
    );
    drop(session); // without an answer the bridge's read now ends, failing the test
    drop(bridge.await.unwrap());
}

/// Runs a call against a bridge that answers it with `answer(call_id)`
/// and then closes the connection.
async fn call_answered_with(
    answer: impl FnOnce(&str) -> Vec<u8> + Send + 'static,
    options: SessionOptions,
) -> ClientError {
    let (mut session, mut peer) = open(false, options).await;
    let bridge = tokio::spawn(async move {
        let call = peer.next_call().await;
        peer.send_raw(&answer(&call_id(&call))).await;
        // The peer is dropped here: the connection ends after the answer.
    });
    let error = session.call("proprioception", &json!({})).await.unwrap_err();
    bridge.await.unwrap();
    error
}

#[tokio::test]
async fn a_bridge_that_breaks_the_protocol_is_failed_closed_on() {
    let line = |value: Value| format!("{value}\n").into_bytes();
    type Answer = Box<dyn FnOnce(&str) -> Vec<u8> + Send>;
    let cases: Vec<(&str, Answer)> = vec![
        (
            "both 'output' and 'error'",
            Box::new(move |id: &str| {
                line(
                    json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": id, "ok": false, "output": { "marker": "X" }, "error": { "code": "timeout", "message": "m", "retryable": false } }),
                )
            }),
        ),
        (
            "longer than 1024 bytes",
            Box::new(move |id: &str| line(result(id, json!({ "pad": "x".repeat(2000) }), 3))),
        ),
        (
            "not valid UTF-8",
            Box::new(|_: &str| b"{\"protocol\":\"aicc/0.1\",\"type\":\"\xff\"}\n".to_vec()),
        ),
        ("not valid JSON", Box::new(|_: &str| b"this is not json\n".to_vec())),
        ("not an object", Box::new(|_: &str| b"[1,2,3]\n".to_vec())),
    ];
    for (expected, answer) in cases {
        let error =
            call_answered_with(answer, SessionOptions { max_line_bytes: 1024, ..options() }).await;
        assert!(
            matches!(&error, ClientError::Protocol(m) if m.contains(expected)),
            "{expected}: {error}"
        );
        assert_eq!(error.exit_code(), 1);
    }
}

#[tokio::test]
async fn a_connection_closed_mid_call_is_a_transport_failure() {
    let error = call_answered_with(|_| Vec::new(), options()).await;
    assert!(
        matches!(&error, ClientError::Transport(m) if m.contains("closed the connection")),
        "{error}"
    );
}

#[tokio::test]
async fn events_before_the_connection_ended_are_delivered_then_the_end() {
    let (mut session, mut peer) = open(false, options()).await;
    peer.send(event(2, 1)).await;
    peer.send(event(1, 2)).await;
    drop(peer);
    let first = session.next_event(None).await.unwrap().unwrap();
    let second = session.next_event(None).await.unwrap().unwrap();
    assert_eq!((first.tick, second.tick), (1, 2));
    assert!(matches!(session.next_event(None).await, Err(ClientError::Transport(_))));
}

#[tokio::test]
async fn a_late_answer_to_an_abandoned_call_is_reported_as_such_not_as_a_violation() {
    let (mut session, mut peer) =
        open(false, SessionOptions { timeout: Duration::from_millis(100), ..options() }).await;
    let error = session.call("proprioception", &json!({})).await.unwrap_err();
    assert!(matches!(&error, ClientError::Transport(m) if m.contains("no answer")), "{error}");
    let given_up = call_id(&peer.next_call().await);
    let bridge = tokio::spawn(async move {
        let second = peer.next_call().await;
        peer.send(result(&given_up, json!({ "marker": "LATE" }), 3)).await;
        peer.send(result(&call_id(&second), json!({ "marker": "SECOND" }), 4)).await;
        (peer, given_up)
    });
    let answer = session.call("vision", &json!({})).await;
    let (_peer, given_up) = bridge.await.unwrap();
    assert_eq!(answer.unwrap().output["marker"], "SECOND");
    let warnings = session.take_warnings();
    assert!(
        warnings.iter().any(|w| w.contains(&format!("late answer to abandoned call {given_up}"))),
        "{warnings:?}"
    );
    assert!(
        !warnings.iter().any(|w| w.contains("protocol violation")),
        "a late answer is not a violation: {warnings:?}"
    );
}

#[tokio::test]
async fn a_call_whose_read_fails_is_not_left_pending() {
    let (mut session, mut peer) = open(false, options()).await;
    let bridge = tokio::spawn(async move {
        peer.next_call().await;
        peer.send_raw(b"this is not json\n").await;
        peer
    });
    assert!(matches!(
        session.call("proprioception", &json!({})).await,
        Err(ClientError::Protocol(_))
    ));
    assert_eq!(session.pending_calls(), 0, "the failed call was abandoned");
    drop(bridge.await.unwrap());
}

#[tokio::test]
async fn an_error_about_the_whole_session_ends_it_for_every_later_call_and_wait() {
    let (mut session, mut peer) = open(false, options()).await;
    let bridge = tokio::spawn(async move {
        peer.next_call().await;
        peer.send(json!({ "protocol": "aicc/0.1", "type": "error", "code": "session_expired", "message": "lease gone", "retryable": false, "meta": { "tick": 2 } })).await;
        peer
    });
    let first = session.call("proprioception", &json!({})).await.unwrap_err();
    assert!(matches!(&first, ClientError::Remote(e) if e.code == "session_expired"), "{first}");
    let mut peer = bridge.await.unwrap();
    assert_eq!(session.ended(), Some(&first));
    assert_eq!(
        session.call("vision", &json!({})).await.unwrap_err(),
        first,
        "a later call gets the end"
    );
    assert_eq!(session.idle(Duration::from_millis(10)).await.unwrap_err(), first);
    assert_eq!(session.pending_calls(), 0);
    // Nothing more was sent: the peer sees the end of the stream once the session is gone.
    drop(session);
    assert!(
        peer.lines.next_line().await.unwrap().is_none(),
        "a call was sent on the ended session"
    );
}

/// Receives and dispatches until `count` updates came.
async fn updates(session: &mut Session, count: usize) -> Vec<super::session::Update> {
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while got.len() < count {
        let message = session.receive(deadline).await.unwrap();
        assert!(
            message.is_some() || std::time::Instant::now() < deadline,
            "only {} of {count} updates came",
            got.len()
        );
        got.extend(session.dispatch(message).await.unwrap());
    }
    got
}

#[tokio::test]
async fn several_calls_in_flight_are_answered_each_by_its_call_id_in_any_order() {
    use super::session::Update;
    let (mut session, mut peer) =
        open(true, SessionOptions { reorder_window: Duration::ZERO, ..options() }).await;
    let moving = session.begin_call("move", &json!({ "forward": 1.0 })).await.unwrap();
    let looking = session.begin_call("proprioception", &json!({})).await.unwrap();
    assert_ne!(moving, looking);
    let (first, second) = (peer.next_call().await, peer.next_call().await);
    assert_eq!((call_id(&first), call_id(&second)), (moving.clone(), looking.clone()));
    // The sensor answers first, then an event, then the move fails.
    peer.send(result(&looking, json!({ "x": 1 }), 2)).await;
    peer.send(event(3, 1)).await;
    peer.send(failure(&moving, "execution_failed", true)).await;
    let got = updates(&mut session, 3).await;
    assert!(
        matches!(&got[0], Update::Answer { call_id, outcome: Ok(success) } if *call_id == looking && success.output["x"] == 1),
        "{got:?}"
    );
    assert!(matches!(&got[1], Update::Event(event) if event.topic == "collision"), "{got:?}");
    assert!(
        matches!(&got[2], Update::Answer { call_id, outcome: Err(error) } if *call_id == moving && error.code == "execution_failed"),
        "{got:?}"
    );
    let refused = session.begin_call("teleport", &json!({})).await.unwrap_err();
    assert!(matches!(refused, ClientError::Refused(_)), "refused locally, nothing sent: {refused}");
}

#[tokio::test]
async fn a_manifest_update_changes_the_generation_and_a_heartbeat_is_answered() {
    let (mut session, mut peer) = open(false, options()).await;
    let generation = session.manifest_generation();
    let mut update = session_init(true, None);
    update
        .as_object_mut()
        .unwrap()
        .retain(|key, _| ["tools", "capabilities"].contains(&key.as_str()));
    peer.send(json!({ "protocol": "aicc/0.1", "type": "heartbeat", "manifest_update": update, "meta": { "tick": 5 } })).await;
    let message =
        session.receive(std::time::Instant::now() + Duration::from_secs(5)).await.unwrap();
    assert!(session.dispatch(message).await.unwrap().is_empty());
    assert_ne!(session.manifest_generation(), generation);
    assert!(session.manifest().permits("move").is_ok(), "the update granted move");
    assert_eq!(peer.next().await["type"], "heartbeat", "the bridge's heartbeat is answered");
}
