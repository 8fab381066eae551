//! The protocol core, driven with JSON lines on virtual time.
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::*;
use crate::protocol::auth::{Scope, Tokens};
use crate::protocol::catalog::Catalog;
use crate::protocol::ids::SequentialIds;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::protocol::ErrorCode;

fn tool(
    id: &'static str,
    class: ToolClass,
    capability: &'static str,
    strict: bool,
    calls_per_minute: Option<u32>,
) -> ToolDescriptor {
    ToolDescriptor {
        id,
        class,
        description: "test tool",
        capability,
        strict_input: strict,
        calls_per_minute,
        input_schema: json!({ "type": "object", "properties": { "forward": { "type": "number", "minimum": -5, "maximum": 5 } } }),
        output_schema: json!({ "type": "object" }),
    }
}

fn config() -> CoreConfig {
    CoreConfig {
        tick_rate_hz: 10.0,
        tick_mode: TickMode::Fixed,
        world_name: "test_room".into(),
        max_calls_in_flight: 2,
        event_ring_capacity: 4,
        resume_window: Duration::from_secs(60),
        max_detached_sessions: 100,
        heartbeat_interval: Duration::from_secs(10),
        dead_peer_intervals: 3,
        lease_timeout: Duration::from_secs(30),
        tokens: Tokens::default(),
        unauthenticated_scope: Scope::Actuate,
        agents_may_modify_world: false,
        max_undecodable_lines: 3,
        max_auth_failures: 3,
        handshake_timeout: Duration::from_secs(10),
        limits: json!({ "base": { "max_linear_mps": 0.22 } }),
        approvals: ApprovalRules::default(),
    }
}

fn catalog() -> Arc<Catalog> {
    let mut tools = vec![
        tool("probe", ToolClass::Sensor, "can_observe_world", false, None),
        tool("drive", ToolClass::Actuator, "can_move_self", true, None),
        tool("speak", ToolClass::Actuator, "can_communicate", false, Some(2)),
    ];
    tools.extend(core_tool_descriptors());
    Arc::new(Catalog::new(tools).unwrap())
}

/// A core as served: random ids.
fn core_with(config: CoreConfig, t0: Instant) -> Core {
    Core::new(config, catalog(), t0)
}

/// Messages sent to `conn`.
fn sent(outputs: &[Output], conn: ConnId) -> Vec<Value> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Send { conn: c, message, .. } if *c == conn => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn only(outputs: &[Output], conn: ConnId) -> Value {
    let messages = sent(outputs, conn);
    assert_eq!(messages.len(), 1, "expected one message to {conn}: {outputs:?}");
    messages.into_iter().next().unwrap()
}

/// The one tool_result sent to `conn` (events beside it are ignored).
fn result_of(outputs: &[Output], conn: ConnId) -> Value {
    let results: Vec<Value> =
        sent(outputs, conn).into_iter().filter(|m| m["type"] == "tool_result").collect();
    assert_eq!(results.len(), 1, "expected one tool_result: {outputs:?}");
    results.into_iter().next().unwrap()
}

fn call(call_id: &str, tool: &str, input: Value) -> Vec<u8> {
    json!({ "protocol": "aicc/0.1", "type": "tool_call", "message_id": format!("m-{call_id}"), "call_id": call_id, "tool": tool, "input": input }).to_string().into_bytes()
}

fn line(value: Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

fn executes(outputs: &[Output]) -> bool {
    outputs.iter().any(|o| matches!(o, Output::Execute { .. }))
}

fn session_id(init: &Value) -> String {
    init["session_id"].as_str().unwrap().to_string()
}

fn error_code(message: &Value) -> (String, bool) {
    let error = if message["type"] == "error" { message.clone() } else { message["error"].clone() };
    (error["code"].as_str().unwrap().to_string(), error["retryable"].as_bool().unwrap())
}

#[test]
fn connect_sends_session_init_with_the_manifest_and_no_world_state() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let init = only(&core.on_connect(1, t0), 1);
    assert_eq!(
        (init["type"].as_str(), init["protocol"].as_str()),
        (Some("session_init"), Some("aicc/0.1"))
    );
    assert_eq!(
        uuid::Uuid::parse_str(init["session_id"].as_str().unwrap()).unwrap().get_version_num(),
        4
    );
    assert_eq!(init["tick_rate_hz"], 10.0);
    assert_eq!(init["tick_mode"], "fixed");
    assert_eq!(init["world"], json!({ "name": "test_room", "kind": "3d" }));
    assert_eq!(
        init["capabilities"]["sensors"],
        json!(["probe", "cancel", "memory_query", "bridge_status"])
    );
    assert_eq!(init["capabilities"]["actuators"], json!(["drive", "speak"]));
    let speak = init["tools"].as_array().unwrap().iter().find(|t| t["id"] == "speak").unwrap();
    assert_eq!(speak["limits"]["calls_per_minute"], 2);
    assert!(init["tools"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["input_schema"].is_object() && t["output_schema"].is_object()));
    assert!(
        !init["tools"].as_array().unwrap().iter().any(|t| t["id"] == "tick_now"),
        "tick_now only in hybrid mode"
    );
    assert_eq!(init["limits"]["base"]["max_linear_mps"], 0.22, "the limits in force are stated");
    for world_state in ["position", "rotation", "pose", "bounds", "inventory"] {
        assert!(
            !init.to_string().contains(&format!("\"{world_state}\"")),
            "manifest carries {world_state}"
        );
    }
}

#[test]
fn a_call_runs_and_its_result_carries_tick_latency_source_and_ignored_fields() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    let out = core.on_line(1, &call("c1", "probe", json!({ "forward": 1, "colour": "red" })), t0);
    let Some(Output::Execute { call_id, tool, input, session, .. }) = out.into_iter().next() else {
        panic!("no execute")
    };
    assert_eq!((call_id.as_str(), tool.as_str(), session.as_str()), ("c1", "probe", sid.as_str()));
    assert_eq!(
        Value::Object(input),
        json!({ "forward": 1 }),
        "unknown fields are dropped for a lenient tool"
    );
    let done = t0 + Duration::from_millis(350);
    let result = only(
        &core.on_tool_finished(
            &sid,
            "c1",
            Ok(ToolSuccess { output: json!({ "x": 1 }), source: "/odom".into() }),
            done,
        ),
        1,
    );
    assert_eq!(
        (result["type"].as_str(), result["call_id"].as_str(), result["ok"].as_bool()),
        (Some("tool_result"), Some("c1"), Some(true))
    );
    assert_eq!(result["meta"]["tick"], 3);
    assert_eq!(result["meta"]["latency_ms"], 350.0);
    assert_eq!(result["meta"]["source"], "/odom");
    assert_eq!(result["meta"]["ignored_fields"], json!(["colour"]));
}

#[test]
fn every_error_code_with_its_retryable_flag() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    let expect = |core: &mut Core, bytes: Vec<u8>, code: &str, retryable: bool| {
        let message = only(&core.on_line(1, &bytes, t0), 1);
        assert_eq!(error_code(&message), (code.to_string(), retryable), "{message}");
        message
    };
    expect(
        &mut core,
        line(json!({ "protocol": "aicc/1.0", "type": "heartbeat" })),
        "protocol_mismatch",
        false,
    );
    expect(&mut core, call("a", "fly", json!({})), "tool_unknown", false);
    let bad =
        expect(&mut core, call("b", "drive", json!({ "forward": 9 })), "invalid_input", false);
    assert!(bad["error"]["message"].as_str().unwrap().starts_with("input.forward"), "{bad}");
    expect(
        &mut core,
        call("c", "drive", json!({ "forward": 1, "turbo": true })),
        "invalid_input",
        false,
    );
    expect(
        &mut core,
        line(json!({ "protocol": "aicc/0.1", "type": "session_resume", "session_id": "nope" })),
        "session_expired",
        false,
    );
    core.set_tool_availability("probe", Some("no messages on /odom for 2.0 s".into()), t0);
    let unavailable = expect(&mut core, call("d", "probe", json!({})), "tool_unavailable", true);
    assert!(unavailable["error"]["message"].as_str().unwrap().contains("/odom"));
    // The three that come from running a tool pass through unchanged.
    for (code, retryable) in [
        (ErrorCode::ExecutionFailed, true),
        (ErrorCode::Timeout, true),
        (ErrorCode::InternalError, false),
    ] {
        let id = format!("run-{}", code.as_str());
        assert!(
            executes(&core.on_line(1, &call(&id, "speak", json!({})), t0))
                || code != ErrorCode::ExecutionFailed
        );
        let out =
            core.on_line(1, &call(&format!("{id}-2"), "drive", json!({ "forward": 0.1 })), t0);
        assert!(executes(&out));
        let result = result_of(
            &core.on_tool_finished(
                &sid,
                &format!("{id}-2"),
                Err(AiccError::new(code, retryable, "x")),
                t0,
            ),
            1,
        );
        assert_eq!(error_code(&result), (code.as_str().to_string(), retryable));
        core.on_tool_finished(
            &sid,
            &id,
            Ok(ToolSuccess { output: json!({}), source: "t".into() }),
            t0,
        );
    }
}

#[test]
fn duplicate_call_ids_the_in_flight_bound_and_rate_limits_are_refused() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    core.on_connect(1, t0);
    assert!(executes(&core.on_line(1, &call("c1", "probe", json!({})), t0)));
    assert_eq!(
        error_code(&only(&core.on_line(1, &call("c1", "probe", json!({})), t0), 1)).0,
        "invalid_input"
    );
    assert!(executes(&core.on_line(1, &call("c2", "probe", json!({})), t0)));
    let full = only(&core.on_line(1, &call("c3", "probe", json!({})), t0), 1);
    assert_eq!(error_code(&full), ("tool_unavailable".into(), true));
    assert_eq!(full["call_id"], "c3");

    let mut core = core_with(config(), t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    for i in 0..2 {
        let id = format!("s{i}");
        assert!(executes(&core.on_line(1, &call(&id, "speak", json!({})), t0)));
        core.on_tool_finished(
            &sid,
            &id,
            Ok(ToolSuccess { output: json!({}), source: "t".into() }),
            t0,
        );
    }
    let limited =
        only(&core.on_line(1, &call("s3", "speak", json!({})), t0 + Duration::from_secs(1)), 1);
    assert_eq!(error_code(&limited), ("tool_unavailable".into(), true));
    assert!(
        limited["error"]["message"].as_str().unwrap().contains("2 calls per minute"),
        "{limited}"
    );
    assert!(executes(&core.on_line(
        1,
        &call("s4", "speak", json!({})),
        t0 + Duration::from_secs(61)
    )));
}

#[test]
fn malformed_lines_are_answered_and_the_session_lives_on() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    core.on_connect(1, t0);
    let cases: Vec<(&[u8], &str)> = vec![
        (b"{nope", "not valid JSON"),
        (b"42", "JSON object"),
        (b"\"text\"", "JSON object"),
        (b"\xc3\x28", "UTF-8"),
        (br#"{"protocol":"aicc/0.1","type":"tool_call","call_id":"x","tool":"probe","input":{"forward":1e400}}"#, "not valid JSON"),
        (br#"{"protocol":"aicc/0.1","type":"tool_call","call_id":"x","tool":"probe","input":{"forward":NaN}}"#, "not valid JSON"),
        (br#"{"protocol":"aicc/0.1","type":"tool_call","call_id":"x","tool":"probe","input":{"forward":Infinity}}"#, "not valid JSON"),
        (br#"{"protocol":"aicc/0.1","type":"tool_call","tool":"probe"}"#, "'call_id' is missing"),
        (br#"{"protocol":"aicc/0.1","type":"tool_call","call_id":7,"tool":"probe"}"#, "'call_id' must be a string"),
        (br#"{"protocol":"aicc/0.1","type":"warp_drive"}"#, "unknown message type"),
        (br#"{"protocol":"aicc/0.1","type":"session_resume","session_id":"s","cursor":-1}"#, "cursor"),
        (br#"{"protocol":"aicc/0.1","type":"manifest_request","subscribe":["gossip"]}"#, "unknown event topic 'gossip'"),
        (br#"{"protocol":"aicc/0.1","type":"manifest_request","agent_model":{"class":"huge"}}"#, "agent_model.class"),
    ];
    for (bytes, expected) in cases {
        let message = only(&core.on_line(1, bytes, t0), 1);
        assert_eq!(message["type"], "error", "{}", String::from_utf8_lossy(bytes));
        assert!(
            message["message"].as_str().unwrap().contains(expected),
            "{} -> {message}",
            String::from_utf8_lossy(bytes)
        );
    }
    let beat = only(
        &core.on_line(
            1,
            &line(json!({ "protocol": "aicc/0.1", "type": "heartbeat", "message_id": "h1" })),
            t0,
        ),
        1,
    );
    assert_eq!(
        (beat["type"].as_str(), beat["in_reply_to"].as_str()),
        (Some("heartbeat"), Some("h1"))
    );
    // A newer MINOR with unknown optional fields is accepted.
    let beat = only(
        &core.on_line(
            1,
            &line(
                json!({ "protocol": "aicc/0.9", "type": "heartbeat", "payload": { "new": true } }),
            ),
            t0,
        ),
        1,
    );
    assert_eq!(beat["type"], "heartbeat");
}

#[test]
fn with_tokens_nothing_happens_before_authentication_and_a_wrong_token_may_be_retried() {
    let t0 = Instant::now();
    let mut tokens = Tokens::default();
    tokens.add("observer-secret", Scope::Observe).unwrap();
    tokens.add("driver-secret", Scope::Actuate).unwrap();
    let mut core = core_with(CoreConfig { tokens, ..config() }, t0);
    assert!(core.on_connect(1, t0).is_empty(), "nothing is sent before authentication");
    let early = only(&core.on_line(1, &call("c0", "probe", json!({})), t0), 1);
    assert!(early["message"].as_str().unwrap().contains("authentication required"), "{early}");
    let open = |token: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "manifest_request", "auth": { "token": token } }),
        )
    };
    let wrong = only(&core.on_line(1, &open("guess"), t0), 1);
    assert_eq!(wrong["type"], "error");
    assert!(!wrong.to_string().contains("observer-secret"));
    let init = only(&core.on_line(1, &open("observer-secret"), t0), 1);
    assert_eq!(init["type"], "session_init");
    assert_eq!(init["capabilities"]["actuators"], json!([]));
    assert_eq!(init["capabilities"]["scope"], "observe");
    assert!(executes(&core.on_line(1, &call("c1", "probe", json!({})), t0)));
    assert_eq!(
        error_code(&only(&core.on_line(1, &call("c2", "drive", json!({ "forward": 1 })), t0), 1)),
        ("tool_unavailable".into(), false)
    );
    // A second connection inherits nothing from the first.
    core.on_connect(2, t0);
    let second = only(&core.on_line(2, &call("c3", "probe", json!({})), t0), 2);
    assert!(second["message"].as_str().unwrap().contains("authentication required"));
    // Repeated failures close the connection.
    core.on_connect(3, t0);
    for attempt in 1..=3 {
        let out = core.on_line(3, &open("nope"), t0);
        assert_eq!(out.iter().any(|o| matches!(o, Output::Close { conn: 3 })), attempt == 3);
    }
}

#[test]
fn a_connection_that_does_not_authenticate_within_the_handshake_bound_is_told_and_closed() {
    let t0 = Instant::now();
    let mut tokens = Tokens::default();
    tokens.add("secret", Scope::Actuate).unwrap();
    let mut core =
        core_with(CoreConfig { tokens, handshake_timeout: Duration::from_secs(2), ..config() }, t0);
    core.on_connect(1, t0);
    core.on_connect(2, t0);
    let open = line(
        json!({ "protocol": "aicc/0.1", "type": "manifest_request", "auth": { "token": "secret" } }),
    );
    assert_eq!(
        only(&core.on_line(2, &open, t0 + Duration::from_secs(1)), 2)["type"],
        "session_init"
    );
    assert!(
        !core
            .on_timer(t0 + Duration::from_secs(2))
            .iter()
            .any(|o| matches!(o, Output::Close { .. })),
        "not before the bound"
    );
    let out = core.on_timer(t0 + Duration::from_millis(2100));
    let told = only(&out, 1);
    assert!(told["message"].as_str().unwrap().contains("handshake_timeout_s"), "{told}");
    assert!(out.iter().any(|o| matches!(o, Output::Close { conn: 1 })));
    assert!(
        !out.iter().any(|o| matches!(o, Output::Close { conn: 2 })),
        "an authenticated connection stays"
    );
    assert!(
        core.on_line(1, &open, t0 + Duration::from_secs(3)).is_empty(),
        "the closed connection is forgotten"
    );
}

#[test]
fn an_observer_may_halt_without_the_lease_and_start_nothing() {
    let t0 = Instant::now();
    let mut tools = vec![
        tool("halt", ToolClass::Actuator, crate::protocol::auth::CAN_HALT, true, None),
        tool("drive", ToolClass::Actuator, "can_move_self", true, None),
        tool("speak", ToolClass::Actuator, "can_communicate", false, None),
    ];
    tools.extend(core_tool_descriptors());
    let mut tokens = Tokens::default();
    tokens.add("watch", Scope::Observe).unwrap();
    tokens.add("drive", Scope::Actuate).unwrap();
    let mut core =
        Core::new(CoreConfig { tokens, ..config() }, Arc::new(Catalog::new(tools).unwrap()), t0);
    let open = |token: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "manifest_request", "auth": { "token": token } }),
        )
    };
    core.on_connect(1, t0);
    core.on_connect(2, t0);
    core.on_line(1, &open("drive"), t0);
    let init = only(&core.on_line(2, &open("watch"), t0), 2);
    assert_eq!(init["capabilities"]["granted"], json!(["can_observe_world", "can_halt"]));
    assert_eq!(
        init["capabilities"]["actuators"],
        json!(["halt"]),
        "the one actuator an observer may call"
    );
    // The driver holds the lease; the observer halts all the same.
    assert!(executes(&core.on_line(1, &call("d1", "drive", json!({ "forward": 1 })), t0)));
    assert!(core.lease_holder().is_some());
    assert!(
        executes(&core.on_line(2, &call("h1", "halt", json!({})), t0)),
        "an observer's halt runs without the lease"
    );
    for (call_id, refused, capability) in
        [("d2", "drive", "can_move_self"), ("s1", "speak", "can_communicate")]
    {
        let result = only(&core.on_line(2, &call(call_id, refused, json!({})), t0), 2);
        assert_eq!(error_code(&result), ("tool_unavailable".into(), false));
        assert!(result["error"]["message"].as_str().unwrap().contains(capability), "{result}");
    }
}

#[test]
fn detached_sessions_beyond_the_bound_are_forgotten_longest_detached_first() {
    let t0 = Instant::now();
    let mut core = core_with(CoreConfig { max_detached_sessions: 2, ..config() }, t0);
    let sessions: Vec<String> =
        (1..=4).map(|conn| session_id(&only(&core.on_connect(conn, t0), conn))).collect();
    for conn in 1..=4u64 {
        core.on_disconnect(conn, t0 + Duration::from_secs(conn));
    }
    let resume = |session: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "session_resume", "message_id": "r", "session_id": session, "cursor": 0 }),
        )
    };
    let at = t0 + Duration::from_secs(5);
    core.on_connect(5, at);
    let refused = only(&core.on_line(5, &resume(&sessions[0]), at), 5);
    assert_eq!(
        error_code(&refused),
        ("session_expired".into(), false),
        "the first detached is gone: {refused}"
    );
    core.on_connect(6, at);
    let out = core.on_line(6, &resume(&sessions[3]), at);
    assert!(
        sent(&out, 6).iter().any(|m| m["type"] == "session_resume"),
        "the last detached resumes: {out:?}"
    );
}

#[test]
fn a_session_resumes_with_the_events_it_missed_and_says_how_many_were_dropped() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    let first = only(&core.publish("collision", json!({ "n": 1 }), None, t0), 1);
    assert_eq!(first["meta"]["seq"], 1);
    core.on_disconnect(1, t0);
    for n in 2..=7 {
        assert!(
            sent(&core.publish("collision", json!({ "n": n }), None, t0), 1).is_empty(),
            "nothing is sent to a detached session"
        );
    }
    core.on_connect(2, t0 + Duration::from_secs(5));
    let resume = line(
        json!({ "protocol": "aicc/0.1", "type": "session_resume", "message_id": "r1", "session_id": sid, "cursor": 1 }),
    );
    let messages = sent(&core.on_line(2, &resume, t0 + Duration::from_secs(5)), 2);
    let reply = messages.last().unwrap();
    assert_eq!(
        (reply["type"].as_str(), reply["session_id"].as_str()),
        (Some("session_resume"), Some(sid.as_str()))
    );
    // The ring holds 4: seqs 4..=7 survive, 2 and 3 were dropped.
    assert_eq!(
        (reply["replayed"].as_u64(), reply["dropped"].as_u64(), reply["next_cursor"].as_u64()),
        (Some(4), Some(2), Some(7))
    );
    let replayed: Vec<u64> = messages[..messages.len() - 1]
        .iter()
        .map(|m| m["payload"]["n"].as_u64().unwrap())
        .collect();
    assert!(messages[..messages.len() - 1].iter().all(|m| m["meta"]["replayed"] == true));
    assert_eq!(replayed, vec![4, 5, 6, 7]);
    // Events flow to the new connection; a stale session cannot be resumed.
    assert_eq!(only(&core.publish("collision", json!({ "n": 8 }), None, t0), 2)["meta"]["seq"], 8);
    core.on_disconnect(2, t0 + Duration::from_secs(10));
    core.on_timer(t0 + Duration::from_secs(71));
    core.on_connect(3, t0 + Duration::from_secs(71));
    let expired = only(
        &core.on_line(
            3,
            &line(json!({ "protocol": "aicc/0.1", "type": "session_resume", "session_id": sid })),
            t0 + Duration::from_secs(71),
        ),
        3,
    );
    assert_eq!(error_code(&expired), ("session_expired".into(), false));
}

#[test]
fn calls_cut_off_by_a_disconnect_are_recorded_for_the_resumed_agent() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    assert!(executes(&core.on_line(1, &call("c1", "drive", json!({ "forward": 1 })), t0)));
    let out = core.on_disconnect(1, t0);
    assert!(
        out.iter().any(|o| matches!(o, Output::LeaseReleased { .. })),
        "a vanished agent loses the lease: the robot stops"
    );
    core.on_connect(2, t0);
    let messages = sent(&core.on_line(2, &line(json!({ "protocol": "aicc/0.1", "type": "session_resume", "session_id": sid, "cursor": 0 })), t0), 2);
    let aborted = messages
        .iter()
        .find(|m| m["topic"] == "call_aborted")
        .expect("call_aborted event replayed");
    assert!(messages.iter().any(|m| m["topic"] == "command"
        && m["payload"]["state"] == "completed"
        && m["payload"]["ok"] == false));
    assert_eq!(aborted["payload"]["call_id"], "c1");
}

#[test]
fn a_message_naming_another_session_is_refused() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    let mut wrong = json!({ "protocol": "aicc/0.1", "type": "tool_call", "session_id": "7d0f0c1e-0000-4000-8000-000000000000", "call_id": "c", "tool": "probe", "input": {} });
    let refused = only(&core.on_line(1, &line(wrong.clone()), t0), 1);
    assert_eq!(
        (refused["type"].as_str(), refused["code"].as_str(), refused["call_id"].as_str()),
        (Some("error"), Some("session_expired"), Some("c"))
    );
    wrong["session_id"] = json!(sid);
    assert!(executes(&core.on_line(1, &line(wrong), t0)), "its own session id is fine");
}

#[test]
fn every_accepted_command_ends_in_exactly_one_completion_event() {
    let t0 = Instant::now();
    let mut core = core_with(CoreConfig { event_ring_capacity: 64, ..config() }, t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    let out = core.on_line(1, &call("d1", "drive", json!({ "forward": 1 })), t0);
    let accepted: Vec<Value> =
        sent(&out, 1).into_iter().filter(|m| m["topic"] == "command").collect();
    assert_eq!((accepted.len(), accepted[0]["payload"]["state"].as_str()), (1, Some("accepted")));
    let out = core.on_tool_finished(
        &sid,
        "d1",
        Ok(ToolSuccess { output: json!({}), source: "t".into() }),
        t0,
    );
    let completed: Vec<Value> =
        sent(&out, 1).into_iter().filter(|m| m["topic"] == "command").collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(
        (completed[0]["payload"]["state"].as_str(), completed[0]["payload"]["ok"].as_bool()),
        (Some("completed"), Some(true))
    );
    assert!(
        core.on_tool_finished(
            &sid,
            "d1",
            Ok(ToolSuccess { output: json!({}), source: "t".into() }),
            t0
        )
        .is_empty(),
        "a second outcome is ignored"
    );
    // Sensors are not commands.
    let out = core.on_line(1, &call("p1", "probe", json!({})), t0);
    assert!(sent(&out, 1).iter().all(|m| m["topic"] != "command"));
    // A command cut off by a disconnect completes as a failure.
    core.on_line(1, &call("d2", "drive", json!({ "forward": 1 })), t0);
    core.on_disconnect(1, t0);
    core.on_connect(2, t0);
    let replay = sent(&core.on_line(2, &line(json!({ "protocol": "aicc/0.1", "type": "session_resume", "session_id": sid, "cursor": 0 })), t0), 2);
    let d2: Vec<&Value> = replay
        .iter()
        .filter(|m| m["topic"] == "command" && m["payload"]["call_id"] == "d2")
        .collect();
    assert_eq!(
        d2.iter().map(|m| m["payload"]["state"].as_str().unwrap()).collect::<Vec<_>>(),
        vec!["accepted", "completed"]
    );
    assert_eq!(d2[1]["payload"]["ok"], false);
}

#[test]
fn cancel_aborts_a_call_in_flight_with_a_result_and_a_completion() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    core.on_line(1, &call("long", "drive", json!({ "forward": 4 })), t0);
    let out = core.on_line(1, &call("c", "cancel", json!({ "call_id": "long" })), t0);
    assert!(out
        .iter()
        .any(|o| matches!(o, Output::Abort { conn: 1, call_id } if call_id == "long")));
    let messages = sent(&out, 1);
    let cancelled = messages
        .iter()
        .find(|m| m["type"] == "tool_result" && m["call_id"] == "long")
        .expect("the cancelled call's result");
    assert_eq!(error_code(cancelled), ("execution_failed".into(), false));
    assert!(messages.iter().any(|m| m["topic"] == "command"
        && m["payload"]["call_id"] == "long"
        && m["payload"]["state"] == "completed"));
    let own = messages.iter().find(|m| m["type"] == "tool_result" && m["call_id"] == "c").unwrap();
    assert_eq!(own["output"]["cancelled"], "long");
    assert!(
        core.on_tool_finished(
            &sid,
            "long",
            Ok(ToolSuccess { output: json!({}), source: "t".into() }),
            t0
        )
        .is_empty(),
        "the aborted task's outcome is ignored"
    );
    let unknown =
        result_of(&core.on_line(1, &call("c2", "cancel", json!({ "call_id": "nope" })), t0), 1);
    assert!(unknown["error"]["message"].as_str().unwrap().contains("no call 'nope'"));
}

#[test]
fn an_idempotency_key_never_runs_a_command_twice() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    let keyed = |id: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": id, "tool": "drive", "input": { "forward": 1 }, "idempotency_key": "step-7", "deadline_ms": 5000 }),
        )
    };
    let out = core.on_line(1, &keyed("a"), t0);
    assert!(out.iter().any(
        |o| matches!(o, Output::Execute { deadline: Some(d), .. } if *d == Duration::from_secs(5))
    ));
    let running = result_of(&core.on_line(1, &keyed("b"), t0), 1);
    assert_eq!(error_code(&running), ("tool_unavailable".into(), true));
    core.on_tool_finished(
        &sid,
        "a",
        Ok(ToolSuccess { output: json!({ "moved_m": 1.0 }), source: "t".into() }),
        t0,
    );
    let out = core.on_line(1, &keyed("c"), t0);
    assert!(!executes(&out), "a retry with the same key does not move the robot again");
    let replay = result_of(&out, 1);
    assert_eq!(
        (
            replay["call_id"].as_str(),
            replay["output"]["moved_m"].as_f64(),
            replay["meta"]["idempotent_replay"].as_bool()
        ),
        (Some("c"), Some(1.0), Some(true))
    );
}

#[test]
fn memory_query_finds_events_and_results_by_topic_text_and_tick() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    core.publish(
        "collision",
        json!({ "other": "wall_north" }),
        None,
        t0 + Duration::from_millis(100),
    );
    core.on_line(1, &call("v", "probe", json!({})), t0);
    core.on_tool_finished(
        &sid,
        "v",
        Ok(ToolSuccess {
            output: json!({ "png_b64": "A".repeat(10_000), "width": 320 }),
            source: "t".into(),
        }),
        t0 + Duration::from_millis(500),
    );
    let query = |core: &mut Core, input: Value| {
        result_of(
            &core.on_line(1, &call("q", "memory_query", input), t0 + Duration::from_secs(1)),
            1,
        )["output"]
            .clone()
    };
    let walls = query(&mut core, json!({ "text": "WALL" }));
    assert_eq!(
        (walls["matched"].as_u64(), walls["entries"][0]["name"].as_str()),
        (Some(1), Some("collision"))
    );
    let results = query(&mut core, json!({ "kind": "tool_result", "tool": "probe" }));
    assert_eq!(results["matched"], 1);
    let kept = results["entries"][0]["summary"]["output"]["png_b64"].as_str().unwrap();
    assert!(kept.contains("10000 characters omitted"), "images are summarised: {kept}");
    assert_eq!(
        query(&mut core, json!({ "since_tick": 3 }))["matched"],
        1,
        "only the result at tick 5 (and not the collision at tick 1)"
    );
    let bad =
        result_of(&core.on_line(1, &call("q2", "memory_query", json!({ "limit": 1000 })), t0), 1);
    assert!(bad["error"]["message"].as_str().unwrap().starts_with("input.limit"), "{bad}");
}

#[test]
fn session_close_answers_closes_and_forgets_the_session() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let sid = session_id(&only(&core.on_connect(1, t0), 1));
    let out = core.on_line(
        1,
        &line(json!({ "protocol": "aicc/0.1", "type": "session_close", "message_id": "bye" })),
        t0,
    );
    assert_eq!(only(&out, 1)["type"], "session_close");
    assert!(matches!(out.last(), Some(Output::Close { conn: 1 })));
    core.on_disconnect(1, t0);
    core.on_connect(2, t0);
    let gone = only(
        &core.on_line(
            2,
            &line(json!({ "protocol": "aicc/0.1", "type": "session_resume", "session_id": sid })),
            t0,
        ),
        2,
    );
    assert_eq!(error_code(&gone).0, "session_expired");
}

#[test]
fn one_session_holds_the_motion_lease_and_everyone_sees_who() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    let a = session_id(&only(&core.on_connect(1, t0), 1));
    core.on_connect(2, t0);
    let out = core.on_line(1, &call("a1", "drive", json!({ "forward": 1 })), t0);
    assert!(executes(&out));
    let to_a = sent(&out, 1);
    let to_b = sent(&out, 2);
    assert_eq!(
        (to_a[0]["topic"].as_str(), to_a[0]["payload"]["yours"].as_bool()),
        (Some("lease"), Some(true))
    );
    assert_eq!(
        (to_b[0]["payload"]["holder"].as_str(), to_b[0]["payload"]["yours"].as_bool()),
        (Some(&a[..8]), Some(false))
    );
    let refused = only(&core.on_line(2, &call("b1", "drive", json!({ "forward": 1 })), t0), 2);
    assert_eq!(error_code(&refused), ("tool_unavailable".into(), true));
    assert!(refused["error"]["message"].as_str().unwrap().contains(&a[..8]));
    assert!(
        executes(&core.on_line(2, &call("b2", "probe", json!({})), t0)),
        "observing needs no lease"
    );
    let released = core.on_disconnect(1, t0);
    assert!(released
        .iter()
        .any(|o| matches!(o, Output::LeaseReleased { session } if *session == a)));
    assert_eq!(only(&released, 2)["payload"]["holder"], Value::Null);
    assert!(executes(&core.on_line(2, &call("b3", "drive", json!({ "forward": 1 })), t0)));
}

#[test]
fn an_idle_lease_lapses() {
    let t0 = Instant::now();
    // Heartbeats far apart, so that the peer is not dropped as silent first.
    let mut core =
        core_with(CoreConfig { heartbeat_interval: Duration::from_secs(100), ..config() }, t0);
    let a = session_id(&only(&core.on_connect(1, t0), 1));
    core.on_line(1, &call("a1", "drive", json!({ "forward": 1 })), t0);
    core.on_tool_finished(
        &a,
        "a1",
        Ok(ToolSuccess { output: json!({}), source: "t".into() }),
        t0 + Duration::from_secs(2),
    );
    assert!(!core
        .on_timer(t0 + Duration::from_secs(31))
        .iter()
        .any(|o| matches!(o, Output::LeaseReleased { .. })));
    assert!(core
        .on_timer(t0 + Duration::from_secs(33))
        .iter()
        .any(|o| matches!(o, Output::LeaseReleased { .. })));
    assert_eq!(core.lease_holder(), None);
}

#[test]
fn ticks_never_go_back_and_follow_the_tick_mode() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    core.on_connect(1, t0);
    let mut last = 0;
    for ms in [0u64, 120, 120, 470, 1000] {
        let now = t0 + Duration::from_millis(ms);
        for message in sent(&core.publish("state_change", json!({}), None, now), 1)
            .into_iter()
            .chain(sent(&core.on_line(1, br#"{"protocol":"aicc/0.1","type":"heartbeat"}"#, now), 1))
        {
            let tick = message["meta"]["tick"].as_u64().unwrap();
            assert!(tick >= last);
            last = tick;
        }
    }
    assert_eq!(last, 10);

    let mut event_mode = core_with(CoreConfig { tick_mode: TickMode::Event, ..config() }, t0);
    event_mode.on_connect(1, t0);
    let later = t0 + Duration::from_secs(100);
    assert_eq!(
        only(&event_mode.publish("state_change", json!({}), None, later), 1)["meta"]["tick"],
        1,
        "event mode ignores wall time"
    );
    event_mode.on_line(1, &call("c", "probe", json!({})), later);
    assert_eq!(
        only(&event_mode.publish("state_change", json!({}), None, later), 1)["meta"]["tick"],
        3
    );

    let mut hybrid = core_with(CoreConfig { tick_mode: TickMode::Hybrid, ..config() }, t0);
    let init = only(&hybrid.on_connect(1, t0), 1);
    assert!(init["tools"].as_array().unwrap().iter().any(|t| t["id"] == "tick_now"));
    let now = t0 + Duration::from_millis(250);
    let result = only(&hybrid.on_line(1, &call("t", "tick_now", json!({})), now), 1);
    assert_eq!(result["output"]["tick"], 3, "2 from the clock + 1 from tick_now");
}

#[test]
fn heartbeats_follow_the_agent_model_and_silent_peers_are_dropped() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    core.on_connect(1, t0);
    assert!(sent(&core.on_timer(t0 + Duration::from_secs(9)), 1).is_empty());
    let beat = only(&core.on_timer(t0 + Duration::from_secs(10)), 1);
    assert_eq!(
        (beat["type"].as_str(), beat["interval_s"].as_f64()),
        (Some("heartbeat"), Some(10.0))
    );
    let out = core.on_timer(t0 + Duration::from_secs(31));
    assert!(out.iter().any(|o| matches!(o, Output::Close { conn: 1 })), "silent for 3 intervals");

    let mut core = core_with(config(), t0);
    core.on_connect(1, t0);
    let init = only(&core.on_line(1, &line(json!({ "protocol": "aicc/0.1", "type": "manifest_request", "agent_model": { "class": "cloud_large" }, "subscribe": ["collision", "tick"] })), t0), 1);
    assert_eq!(init["agent_model"]["event_batch_ms"], 500);
    assert_eq!(init["heartbeat_interval_s"], 30.0);
    assert_eq!(init["events"]["subscribed"], json!(["collision", "tick"]));
    assert!(sent(&core.publish("collision", json!({ "n": 1 }), None, t0), 1).is_empty(), "batched");
    assert!(sent(&core.publish("state_change", json!({}), None, t0), 1).is_empty());
    let flushed = sent(&core.on_timer(t0 + Duration::from_millis(500)), 1);
    let topics: Vec<&str> = flushed.iter().map(|m| m["topic"].as_str().unwrap()).collect();
    assert_eq!(topics, vec!["collision", "tick"], "state_change is not subscribed; tick is");
    assert!(sent(&core.on_timer(t0 + Duration::from_secs(15)), 1)
        .iter()
        .all(|m| m["type"] != "heartbeat"));
}

#[test]
fn a_lost_capability_is_pushed_in_a_heartbeat_and_restored() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    core.on_connect(1, t0);
    let out = core.set_tool_availability("probe", Some("no data on /odom".into()), t0);
    let messages = sent(&out, 1);
    let update = messages.iter().find(|m| m["type"] == "heartbeat").unwrap().clone();
    let change =
        messages.iter().find(|m| m["topic"] == "state_change").expect("a state_change event");
    assert_eq!(
        (change["payload"]["entity"].as_str(), change["payload"]["change"].as_str()),
        (Some("probe"), Some("unavailable"))
    );
    assert_eq!(
        update["manifest_update"]["capabilities"]["sensors"],
        json!(["cancel", "memory_query", "bridge_status"])
    );
    assert!(
        core.set_tool_availability("probe", Some("again".into()), t0).is_empty(),
        "no repeat for no change"
    );
    let back = sent(&core.set_tool_availability("probe", None, t0), 1)
        .into_iter()
        .find(|m| m["type"] == "heartbeat")
        .unwrap();
    assert_eq!(
        back["manifest_update"]["capabilities"]["sensors"],
        json!(["probe", "cancel", "memory_query", "bridge_status"])
    );
}

#[test]
fn tools_lost_together_make_one_manifest_update_per_agent() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    core.on_connect(1, t0);
    let lost = vec![
        ("probe".to_string(), Some("no data on /odom".to_string())),
        ("drive".to_string(), Some("no data on /odom".to_string())),
        ("speak".to_string(), None),
    ];
    let messages = sent(&core.set_tools_availability(lost, t0), 1);
    let updates: Vec<&Value> = messages.iter().filter(|m| m["type"] == "heartbeat").collect();
    assert_eq!(updates.len(), 1, "one update for both tools: {messages:?}");
    assert_eq!(updates[0]["manifest_update"]["capabilities"]["actuators"], json!(["speak"]));
    let changes: Vec<&Value> = messages
        .iter()
        .filter(|m| m["topic"] == "state_change")
        .map(|m| &m["payload"]["entity"])
        .collect();
    assert_eq!(
        changes,
        vec!["probe", "drive"],
        "a state change per tool that changed, none for one that did not"
    );
}

#[test]
fn a_session_is_its_owners_no_takeover_while_connected_and_no_resume_with_another_token() {
    let t0 = Instant::now();
    let mut tokens = Tokens::default();
    tokens.add("owner-token", Scope::Actuate).unwrap();
    tokens.add("other-token", Scope::Actuate).unwrap();
    let mut core = core_with(CoreConfig { tokens, ..config() }, t0);
    let open = |token: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "manifest_request", "auth": { "token": token } }),
        )
    };
    let resume = |sid: &str, token: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "session_resume", "session_id": sid, "auth": { "token": token } }),
        )
    };
    core.on_connect(1, t0);
    let sid = session_id(&only(&core.on_line(1, &open("owner-token"), t0), 1));
    // The owner is connected: a takeover is refused, even with its own token.
    core.on_connect(2, t0);
    let out = core.on_line(2, &resume(&sid, "owner-token"), t0);
    let refused = only(&out, 2);
    assert_eq!(error_code(&refused), ("session_expired".into(), true));
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("takeover is refused while its owner is connected"),
        "{refused}"
    );
    assert!(
        sent(&out, 1).is_empty() && !out.iter().any(|o| matches!(o, Output::Close { conn: 1 })),
        "the owner is not kicked off: {out:?}"
    );
    assert_eq!(core.session_of(1), Some(sid.as_str()));
    // Once it is gone: another token may not resume it, its own may.
    core.on_disconnect(1, t0);
    core.on_connect(3, t0);
    let refused = only(&core.on_line(3, &resume(&sid, "other-token"), t0), 3);
    assert_eq!(error_code(&refused), ("session_expired".into(), false));
    assert!(
        refused["message"].as_str().unwrap().contains("needs the token that opened it"),
        "{refused}"
    );
    core.on_connect(4, t0);
    assert_eq!(
        sent(&core.on_line(4, &resume(&sid, "owner-token"), t0), 4).last().unwrap()["type"],
        "session_resume"
    );
    assert_eq!(core.session_of(4), Some(sid.as_str()));
    let status = core.status(&sid, t0);
    assert_eq!(status["resumes_refused"], 2);
}

#[test]
fn http_closes_a_connection_at_once_and_lines_that_are_not_json_after_the_allowance() {
    let t0 = Instant::now();
    let mut core = core_with(config(), t0);
    core.on_connect(1, t0);
    let out = core.on_line(1, b"POST / HTTP/1.1", t0);
    let told = only(&out, 1);
    assert_eq!(told["type"], "error");
    assert!(told["message"].as_str().unwrap().contains("not HTTP"), "{told}");
    assert!(out.iter().any(|o| matches!(o, Output::Close { conn: 1 })), "closed: {out:?}");
    core.on_connect(2, t0);
    for n in 1..3 {
        let out = core.on_line(2, b"not json at all", t0);
        assert!(
            !out.iter().any(|o| matches!(o, Output::Close { .. })),
            "line {n} is answered, not fatal"
        );
    }
    assert!(
        !core
            .on_line(2, br#"{"protocol":"aicc/0.1","type":"nonsense"}"#, t0)
            .iter()
            .any(|o| matches!(o, Output::Close { .. })),
        "a JSON object that is no message is bad input, not junk"
    );
    let out = core.on_line(2, b"\xff\xfe", t0);
    assert!(
        only(&out, 2)["message"].as_str().unwrap().contains("security.max_undecodable_lines"),
        "{out:?}"
    );
    assert!(out.iter().any(|o| matches!(o, Output::Close { conn: 2 })));
    core.on_connect(3, t0);
    let status = core.status("", t0);
    assert_eq!(
        (
            status["connections_closed_for_http"].as_u64(),
            status["connections_closed_for_undecodable_lines"].as_u64()
        ),
        (Some(1), Some(1))
    );
}

#[test]
fn status_shows_sessions_lease_and_limits_with_ids_shortened_for_non_admins() {
    let t0 = Instant::now();
    let mut core = core_with(CoreConfig { unauthenticated_scope: Scope::Actuate, ..config() }, t0);
    let a = session_id(&only(&core.on_connect(1, t0), 1));
    core.on_line(1, &call("d", "drive", json!({ "forward": 1 })), t0);
    let status =
        only(&core.on_line(1, &call("s", "bridge_status", json!({})), t0), 1)["output"].clone();
    assert_eq!(status["lease_holder"], a[..8]);
    assert_eq!(status["sessions"][0]["calls_in_flight"], 1);
    assert_eq!(status["calls_in_flight_max"], 2);
    assert_eq!(status["events_retained_max"], 4);
    assert!(!status.to_string().contains(&a), "a full session id is a resume credential");
}

proptest! {
    /// Whatever bytes arrive, the core answers without panicking and the
    /// connection keeps working.
    #[test]
    fn arbitrary_lines_never_break_the_core(lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..20)) {
        let t0 = Instant::now();
        let mut core = core_with(config(), t0);
        core.on_connect(1, t0);
        for bytes in &lines {
            core.on_line(1, bytes, t0);
        }
        let beat = only(&core.on_line(1, br#"{"protocol":"aicc/0.1","type":"heartbeat"}"#, t0), 1);
        prop_assert_eq!(beat["type"].as_str(), Some("heartbeat"));
    }

    #[test]
    fn arbitrary_json_messages_get_exactly_one_answer_or_an_execution(
        kind in prop_oneof![Just("tool_call"), Just("manifest_request"), Just("heartbeat"), Just("session_resume"), Just("bogus")],
        tool in prop_oneof![Just("probe"), Just("drive"), Just("nope")],
        input in prop_oneof![Just(json!({})), Just(json!({"forward": 1})), Just(json!({"forward": "x"})), Just(json!([1])), Just(json!(null))],
        call_id in prop_oneof![Just(json!("c")), Just(json!(5)), Just(json!(null))],
    ) {
        let t0 = Instant::now();
        let mut core = core_with(config(), t0);
        core.on_connect(1, t0);
        let message = json!({ "protocol": "aicc/0.1", "type": kind, "call_id": call_id, "tool": tool, "input": input, "session_id": "x" });
        let out = core.on_line(1, message.to_string().as_bytes(), t0);
        // Replies (not events such as the lease notice) plus executions.
        let replies = out.iter().filter(|o| matches!(o, Output::Send { droppable: false, .. })).count();
        let answers = replies + usize::from(executes(&out));
        prop_assert_eq!(answers, 1, "{:?}", out);
    }
}

/// A busy scenario (two agents, the lease, batching, an idempotent
/// replay, a cancel, heartbeats, a disconnect with calls in flight, a
/// resume, status and close), with sequential ids.
fn scripted_run(t0: Instant) -> Vec<Output> {
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut core = Core::with_ids(
        CoreConfig { event_ring_capacity: 64, max_calls_in_flight: 4, ..config() },
        catalog(),
        t0,
        SequentialIds::new("id"),
    );
    let mut out = Vec::new();
    out.extend(core.on_connect(1, at(0)));
    out.extend(core.on_connect(2, at(5)));
    out.extend(core.on_line(2, &line(json!({ "protocol": "aicc/0.1", "type": "manifest_request", "agent_model": { "class": "edge_medium" }, "subscribe": ["lease", "collision", "tick"] })), at(10)));
    let a = core.session_of(1).unwrap().to_string();
    out.extend(core.on_line(1, &call("d1", "drive", json!({ "forward": 1 })), at(100)));
    out.extend(core.on_line(
        1,
        &call("p1", "probe", json!({ "forward": 2, "extra": true })),
        at(110),
    ));
    out.extend(core.publish("collision", json!({ "other": "wall" }), None, at(120)));
    out.extend(core.on_line(2, &call("b1", "drive", json!({ "forward": 1 })), at(130)));
    out.extend(core.on_tool_finished(
        &a,
        "p1",
        Ok(ToolSuccess { output: json!({ "reading": 1 }), source: "/probe".into() }),
        at(150),
    ));
    let keyed = |id: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": id, "tool": "speak", "input": {}, "idempotency_key": "k" }),
        )
    };
    out.extend(core.on_line(1, &keyed("s1"), at(160)));
    out.extend(core.on_tool_finished(
        &a,
        "s1",
        Ok(ToolSuccess { output: json!({ "said": true }), source: "t".into() }),
        at(170),
    ));
    out.extend(core.on_line(1, &keyed("s2"), at(180)));
    out.extend(core.on_line(1, &call("d2", "drive", json!({ "forward": 2 })), at(190)));
    out.extend(core.on_line(1, &call("x", "cancel", json!({ "call_id": "d2" })), at(200)));
    out.extend(core.on_line(1, &call("p2", "probe", json!({})), at(210)));
    out.extend(core.on_timer(at(300)));
    out.extend(core.set_tool_availability("probe", Some("no data".into()), at(400)));
    out.extend(core.on_timer(at(10_000)));
    out.extend(core.on_disconnect(1, at(10_100)));
    out.extend(core.on_connect(3, at(10_200)));
    out.extend(core.on_line(3, &line(json!({ "protocol": "aicc/0.1", "type": "session_resume", "session_id": a, "cursor": 2 })), at(10_300)));
    out.extend(core.on_line(3, &call("st", "bridge_status", json!({})), at(10_400)));
    out.extend(core.on_line(
        3,
        &line(json!({ "protocol": "aicc/0.1", "type": "session_close" })),
        at(10_500),
    ));
    out
}

fn rendered(outputs: &[Output]) -> String {
    outputs.iter().map(|o| format!("{o:?}\n")).collect()
}

#[test]
fn with_sequential_ids_the_core_is_deterministic_and_every_id_comes_from_its_source() {
    let t0 = Instant::now();
    let outputs = scripted_run(t0);
    let first = rendered(&outputs);
    assert_eq!(first, rendered(&scripted_run(t0)), "the same input gave different output");
    assert!(
        first.contains("call_aborted")
            && first.contains("idempotent_replay")
            && first.contains("manifest_update")
            && first.contains("\"replayed\": Bool(true)"),
        "the scenario covers what it says"
    );
    for conn in 1..=3 {
        for message in sent(&outputs, conn) {
            assert!(message["message_id"].as_str().unwrap().starts_with("id-"), "{message}");
            assert!(message["session_id"].as_str().unwrap().starts_with("id-"), "{message}");
        }
    }
    let t0 = Instant::now();
    let mut core = Core::with_ids(config(), catalog(), t0, SequentialIds::new("id"));
    let init = only(&core.on_connect(1, t0), 1);
    assert_eq!(
        (init["session_id"].as_str(), init["message_id"].as_str()),
        (Some("id-1"), Some("id-2"))
    );
    let beat = only(&core.on_line(1, br#"{"protocol":"aicc/0.1","type":"heartbeat"}"#, t0), 1);
    assert_eq!(beat["message_id"], "id-3");
}

/// Replaces ids that change every run, so that a transcript can be compared.
fn normalised(message: &Value, session: &str) -> Value {
    let text = message.to_string().replace(session, "SESSION-ID");
    let mut value: Value = serde_json::from_str(&text).unwrap();
    if value
        .get("message_id")
        .is_some_and(|id| id.as_str().is_some_and(|s| uuid::Uuid::parse_str(s).is_ok()))
    {
        value["message_id"] = json!("MESSAGE-ID");
    }
    value
}

struct Transcript {
    lines: Vec<String>,
    session: String,
}

impl Transcript {
    fn agent(&mut self, text: &str) {
        let value: Value = serde_json::from_str(text).unwrap();
        self.lines.push(format!(
            "agent> {}",
            if self.session.is_empty() { value } else { normalised(&value, &self.session) }
        ));
    }

    fn bridge(&mut self, outputs: &[Output], conn: ConnId) {
        for message in sent(outputs, conn) {
            if self.session.is_empty() {
                if let Some(id) = message["session_id"].as_str().filter(|s| !s.is_empty()) {
                    self.session = id.to_string();
                }
            }
            self.lines.push(format!("bridge> {}", normalised(&message, &self.session)));
        }
    }
}

/// The transcript docs/protocol.md takes its examples from: every message
/// type, both directions. Regenerate with UPDATE_GOLDEN=1.
#[test]
fn protocol_examples_transcript_matches_the_golden_file() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut tokens = Tokens::default();
    tokens.add("agent-token", Scope::Actuate).unwrap();
    let mut core = core_with(CoreConfig { tokens, ..config() }, t0);
    let mut t = Transcript { lines: Vec::new(), session: String::new() };
    let say = |core: &mut Core, t: &mut Transcript, conn: ConnId, text: String, ms: u64| {
        t.agent(&text);
        let out = core.on_line(conn, text.as_bytes(), at(ms));
        t.bridge(&out, conn);
        out
    };
    core.on_connect(1, at(0));
    say(&mut core, &mut t, 1, json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": "m-1", "auth": { "token": "agent-token" }, "agent_model": { "class": "edge_small" }, "subscribe": ["collision", "lease", "state_change"] }).to_string(), 10);
    let out = say(&mut core, &mut t, 1, json!({ "protocol": "aicc/0.1", "type": "tool_call", "message_id": "m-2", "call_id": "c-1", "tool": "probe", "input": { "forward": 1.5 } }).to_string(), 120);
    assert!(executes(&out));
    let session = t.session.clone();
    let out = core.on_tool_finished(
        &session,
        "c-1",
        Ok(ToolSuccess { output: json!({ "reading": 42 }), source: "/probe".into() }),
        at(135),
    );
    t.bridge(&out, 1);
    say(&mut core, &mut t, 1, json!({ "protocol": "aicc/0.1", "type": "tool_call", "message_id": "m-3", "call_id": "c-2", "tool": "drive", "input": { "forward": "far" } }).to_string(), 200);
    let out = core.publish("collision", json!({ "other": "wall_north", "normal": { "x": -1.0, "y": 0.0, "z": 0.0 }, "impulse": 4.2 }), None, at(300));
    t.bridge(&out, 1);
    say(
        &mut core,
        &mut t,
        1,
        "{\"protocol\":\"aicc/0.1\",\"type\":\"teleport\",\"message_id\":\"m-4\"}".to_string(),
        310,
    );
    say(
        &mut core,
        &mut t,
        1,
        json!({ "protocol": "aicc/0.1", "type": "heartbeat", "message_id": "m-5" }).to_string(),
        400,
    );
    let out = core.on_timer(at(5400));
    t.bridge(&out, 1);
    core.on_disconnect(1, at(5500));
    core.publish(
        "state_change",
        json!({ "entity": "bumper", "change": "contact_ended" }),
        None,
        at(5600),
    );
    core.on_connect(2, at(6000));
    say(&mut core, &mut t, 2, json!({ "protocol": "aicc/0.1", "type": "session_resume", "message_id": "m-6", "session_id": session, "cursor": 1, "auth": { "token": "agent-token" } }).to_string(), 6010);
    say(
        &mut core,
        &mut t,
        2,
        json!({ "protocol": "aicc/0.1", "type": "session_close", "message_id": "m-7" }).to_string(),
        6100,
    );

    let text = t.lines.join("\n") + "\n";
    let golden_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join("docs/protocol-transcript.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden_path, &text).unwrap();
    }
    let golden = std::fs::read_to_string(&golden_path)
        .expect("docs/protocol-transcript.txt (UPDATE_GOLDEN=1 writes it)");
    assert_eq!(text, golden, "the protocol changed: review, then UPDATE_GOLDEN=1 cargo test");
    let kinds: std::collections::BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split_once("> "))
        .map(|(_, m)| {
            serde_json::from_str::<Value>(m).unwrap()["type"].as_str().unwrap().to_string()
        })
        .collect();
    for kind in [
        "error",
        "event",
        "heartbeat",
        "manifest_request",
        "session_close",
        "session_init",
        "session_resume",
        "tool_call",
        "tool_result",
    ] {
        assert!(kinds.contains(kind), "the transcript lacks a {kind} message");
    }
    let ticks: Vec<u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("bridge> "))
        .map(|m| serde_json::from_str::<Value>(m).unwrap()["meta"]["tick"].as_u64().unwrap())
        .collect();
    assert!(ticks.windows(2).all(|w| w[0] <= w[1]), "ticks go backwards on the wire: {ticks:?}");
}

#[test]
fn every_example_in_the_protocol_doc_is_a_line_of_the_transcript() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/protocol.md")).unwrap();
    let transcript = std::fs::read_to_string(root.join("docs/protocol-transcript.txt")).unwrap();
    let examples: Vec<&str> =
        doc.lines().filter(|l| l.starts_with("agent> ") || l.starts_with("bridge> ")).collect();
    assert!(examples.len() >= 17, "the doc shows {} examples", examples.len());
    for example in examples {
        assert!(
            transcript.lines().any(|l| l == example),
            "docs/protocol.md shows a line the protocol does not produce: {example}"
        );
    }
}

// ---- Operator approvals ----

/// A core whose `move` longer than 1 m and every `speak` wait for approval;
/// connection 1 is an actuating agent, 9 an admin (operator).
fn approvals_core(t0: Instant) -> (Core, String, String) {
    let mut tokens = Tokens::default();
    tokens.add("agent-secret", Scope::Actuate).unwrap();
    tokens.add("admin-secret", Scope::Admin).unwrap();
    let mut tools = vec![
        tool("probe", ToolClass::Sensor, "can_observe_world", false, None),
        tool("move", ToolClass::Actuator, "can_move_self", true, None),
        tool("speak", ToolClass::Actuator, "can_communicate", false, None),
        tool("stop", ToolClass::Actuator, "can_halt", false, None),
    ];
    tools.extend(core_tool_descriptors());
    tools.extend(approval_tool_descriptors());
    let approvals = ApprovalRules {
        tools: vec!["speak".into()],
        move_longer_than_m: Some(1.0),
        approval_mode: false,
        timeout: Duration::from_secs(30),
    };
    let mut core = Core::new(
        CoreConfig { tokens, approvals, heartbeat_interval: Duration::from_secs(1000), ..config() },
        Arc::new(Catalog::new(tools).unwrap()),
        t0,
    );
    let open = |token: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "manifest_request", "auth": { "token": token } }),
        )
    };
    core.on_connect(1, t0);
    let agent = session_id(&only(&core.on_line(1, &open("agent-secret"), t0), 1));
    core.on_connect(9, t0);
    let admin = session_id(&only(&core.on_line(9, &open("admin-secret"), t0), 9));
    (core, agent, admin)
}

fn events_on(outputs: &[Output], conn: ConnId, topic: &str) -> Vec<Value> {
    sent(outputs, conn)
        .into_iter()
        .filter(|m| m["type"] == "event" && m["payload"].is_object() && m["topic"] == topic)
        .map(|m| m["payload"].clone())
        .collect()
}

/// Parks a long move from the agent; returns its approval id.
fn park_long_move(core: &mut Core, call_id: &str, now: Instant) -> String {
    let out = core.on_line(1, &call(call_id, "move", json!({ "forward": 2.5 })), now);
    assert!(!executes(&out), "a move longer than the rule waits: {out:?}");
    let command = events_on(&out, 1, "command");
    assert_eq!(command.last().unwrap()["state"], "awaiting_approval", "{command:?}");
    assert!(command.last().unwrap()["reason"].as_str().unwrap().contains("longer than 1 m"));
    let told = events_on(&out, 9, "approval");
    assert_eq!(told[0]["decision"], "awaiting", "the admins are told: {out:?}");
    told[0]["approval_id"].as_str().unwrap().to_string()
}

fn admin_call(
    core: &mut Core,
    call_id: &str,
    tool: &str,
    input: Value,
    now: Instant,
) -> (Vec<Output>, Value) {
    let out = core.on_line(9, &call(call_id, tool, input), now);
    let result = result_of(&out, 9);
    (out, result)
}

#[test]
fn a_long_move_waits_for_an_approval_and_runs_once_approved_and_a_replayed_approval_is_refused() {
    let t0 = Instant::now();
    let (mut core, agent, _admin) = approvals_core(t0);
    assert!(
        executes(&core.on_line(1, &call("short", "move", json!({ "forward": 0.5 })), t0)),
        "a short move does not wait"
    );
    core.on_tool_finished(
        &agent,
        "short",
        Ok(ToolSuccess { output: json!({}), source: "t".into() }),
        t0,
    );
    let approval_id = park_long_move(&mut core, "long", t0);
    let (_, listed) =
        admin_call(&mut core, "l1", "approvals_list", json!({}), t0 + Duration::from_secs(1));
    let pending = listed["output"]["pending"].as_array().unwrap().clone();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (
            pending[0]["call_id"].as_str(),
            pending[0]["tool"].as_str(),
            pending[0]["input"]["forward"].as_f64()
        ),
        (Some("long"), Some("move"), Some(2.5))
    );
    assert_eq!(pending[0]["expires_in_s"], 29.0);
    let (out, approved) = admin_call(
        &mut core,
        "a1",
        "approve",
        json!({ "approval_id": approval_id }),
        t0 + Duration::from_secs(2),
    );
    assert_eq!(
        (approved["ok"].as_bool(), approved["output"]["decision"].as_str()),
        (Some(true), Some("approved"))
    );
    let Some(Output::Execute { call_id, tool, input, conn, .. }) =
        out.iter().find(|o| matches!(o, Output::Execute { .. }))
    else {
        panic!("approval runs it: {out:?}")
    };
    assert_eq!(
        (call_id.as_str(), tool.as_str(), *conn, input["forward"].as_f64()),
        ("long", "move", 1, Some(2.5))
    );
    assert_eq!(events_on(&out, 1, "command")[0]["state"], "accepted");
    assert_eq!(events_on(&out, 9, "approval")[0]["decision"], "approved", "audited to the admins");
    let (out, replayed) = admin_call(
        &mut core,
        "a2",
        "approve",
        json!({ "approval_id": approval_id }),
        t0 + Duration::from_secs(3),
    );
    assert_eq!(error_code(&replayed), ("invalid_input".into(), false));
    assert!(!executes(&out), "a replayed approval runs nothing");
    assert_eq!(events_on(&out, 9, "approval")[0]["decision"], "refused", "and is audited");
    let done = result_of(
        &core.on_tool_finished(
            &agent,
            "long",
            Ok(ToolSuccess { output: json!({ "moved": 2.5 }), source: "/odom".into() }),
            t0 + Duration::from_secs(9),
        ),
        1,
    );
    assert_eq!(done["ok"], true);
    assert_eq!(done["meta"]["latency_ms"], 7000.0, "latency counts from the approval");
}

#[test]
fn a_denied_or_timed_out_call_ends_with_a_non_retryable_error_and_runs_nothing() {
    let t0 = Instant::now();
    let (mut core, _agent, _admin) = approvals_core(t0);
    let first = park_long_move(&mut core, "m1", t0);
    let (out, denied) = admin_call(
        &mut core,
        "d1",
        "deny",
        json!({ "approval_id": first, "reason": "too far" }),
        t0,
    );
    assert_eq!(denied["output"]["decision"], "denied");
    assert!(!executes(&out));
    let result = result_of(&out, 1);
    assert_eq!(error_code(&result), ("execution_failed".into(), false));
    assert!(
        result["error"]["message"].as_str().unwrap().contains("denied by an operator: too far"),
        "{result}"
    );
    let completed = events_on(&out, 1, "command");
    assert_eq!(
        (completed[0]["state"].as_str(), completed[0]["ok"].as_bool()),
        (Some("completed"), Some(false))
    );
    // The next one nobody decides.
    park_long_move(&mut core, "m2", t0);
    let out = core.on_timer(t0 + Duration::from_secs(29));
    assert!(sent(&out, 1).iter().all(|m| m["type"] != "tool_result"), "not before the timeout");
    let out = core.on_timer(t0 + Duration::from_secs(30));
    assert!(!executes(&out));
    let result = result_of(&out, 1);
    assert_eq!(error_code(&result), ("execution_failed".into(), false));
    assert!(result["error"]["message"].as_str().unwrap().contains("within 30 s"), "{result}");
    assert_eq!(events_on(&out, 9, "approval")[0]["decision"], "timed_out");
    let (_, listed) =
        admin_call(&mut core, "l1", "approvals_list", json!({}), t0 + Duration::from_secs(31));
    assert_eq!(listed["output"]["pending"], json!([]));
}

#[test]
fn cancel_and_stop_end_waiting_calls_and_nothing_runs_or_is_aborted() {
    let t0 = Instant::now();
    let (mut core, _agent, _admin) = approvals_core(t0);
    let first = park_long_move(&mut core, "m1", t0);
    let out = core.on_line(1, &call("c1", "cancel", json!({ "call_id": "m1" })), t0);
    assert!(
        !out.iter().any(|o| matches!(o, Output::Abort { .. } | Output::Execute { .. })),
        "nothing ran, nothing to abort: {out:?}"
    );
    let results: Vec<Value> =
        sent(&out, 1).into_iter().filter(|m| m["type"] == "tool_result").collect();
    assert_eq!(results.len(), 2, "the cancelled call's result and cancel's own");
    assert_eq!(events_on(&out, 9, "approval")[0]["decision"], "withdrawn");
    let (_, late) = admin_call(&mut core, "a1", "approve", json!({ "approval_id": first }), t0);
    assert_eq!(error_code(&late).0, "invalid_input", "a cancelled call cannot be approved");
    // stop: the waiting speak is ended before stop runs.
    let out = core.on_line(1, &call("s1", "speak", json!({})), t0);
    assert!(!executes(&out));
    let out = core.on_line(1, &call("halt", "stop", json!({})), t0);
    let executed: Vec<&str> = out
        .iter()
        .filter_map(|o| match o {
            Output::Execute { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(executed, vec!["halt"], "stop runs, the waiting call does not");
    let ended = sent(&out, 1).into_iter().find(|m| m["type"] == "tool_result").unwrap();
    assert_eq!((ended["call_id"].as_str(), ended["ok"].as_bool()), (Some("s1"), Some(false)));
    assert!(ended["error"]["message"].as_str().unwrap().contains("stopped"));
}

#[test]
fn only_admins_decide_and_a_call_whose_session_ended_cannot_be_approved() {
    let t0 = Instant::now();
    let (mut core, _agent, _admin) = approvals_core(t0);
    let approval_id = park_long_move(&mut core, "m1", t0);
    let refused = result_of(
        &core.on_line(1, &call("self", "approve", json!({ "approval_id": approval_id })), t0),
        1,
    );
    assert_eq!(
        error_code(&refused),
        ("tool_unavailable".into(), false),
        "an agent cannot approve its own call"
    );
    let gone = core.on_disconnect(1, t0);
    assert_eq!(
        events_on(&gone, 9, "approval")[0]["decision"],
        "withdrawn",
        "the admins are told the call is gone"
    );
    let (out, late) =
        admin_call(&mut core, "a1", "approve", json!({ "approval_id": approval_id }), t0);
    assert_eq!(error_code(&late), ("invalid_input".into(), false));
    assert!(!executes(&out));
    let (_, forged) = admin_call(&mut core, "a2", "deny", json!({ "approval_id": "made-up" }), t0);
    assert_eq!(error_code(&forged).0, "invalid_input");
}

#[test]
fn in_approval_mode_every_actuator_call_but_stop_waits() {
    let t0 = Instant::now();
    let (mut core, agent, _admin) = approvals_core(t0);
    assert!(executes(&core.on_line(1, &call("p1", "probe", json!({})), t0)));
    core.on_tool_finished(
        &agent,
        "p1",
        Ok(ToolSuccess { output: json!({}), source: "t".into() }),
        t0,
    );
    let (_, on) = admin_call(&mut core, "on", "approval_mode", json!({ "on": true }), t0);
    assert_eq!(on["output"]["approval_mode"], true);
    let out = core.on_line(1, &call("short", "move", json!({ "forward": 0.2 })), t0);
    assert!(!executes(&out), "a short move waits in approval mode");
    assert!(executes(&core.on_line(1, &call("p2", "probe", json!({})), t0)), "sensors never wait");
    admin_call(&mut core, "off", "approval_mode", json!({ "on": false }), t0);
    assert!(executes(&core.on_line(9, &call("s", "stop", json!({})), t0)));
}

#[test]
fn rules_name_tools_and_move_distances_and_never_hold_stop_or_administration() {
    let rules = ApprovalRules {
        tools: vec!["interact".into(), "stop".into()],
        move_longer_than_m: Some(1.0),
        approval_mode: false,
        timeout: Duration::from_secs(1),
    };
    let descriptor = |id: &'static str, class, capability| tool(id, class, capability, true, None);
    let input = |v: Value| v.as_object().unwrap().clone();
    let mv = descriptor("move", ToolClass::Actuator, "can_move_self");
    assert!(
        rules.reason(&mv, &input(json!({ "forward": 0.8, "left": 0.8 })), false).is_some(),
        "1.13 m diagonally"
    );
    assert!(rules.reason(&mv, &input(json!({ "forward": -0.9 })), false).is_none());
    assert!(
        rules
            .reason(&mv, &input(json!({ "velocity_mps": -0.2, "duration_s": 6 })), false)
            .is_some(),
        "1.2 m by velocity"
    );
    assert!(rules
        .reason(&descriptor("interact", ToolClass::Actuator, "can_move_self"), &Map::new(), false)
        .is_some());
    assert!(
        rules
            .reason(&descriptor("stop", ToolClass::Actuator, "can_halt"), &Map::new(), true)
            .is_none(),
        "stop never waits"
    );
    assert!(rules
        .reason(
            &descriptor("record_start", ToolClass::Actuator, "can_administer_bridge"),
            &Map::new(),
            true
        )
        .is_none());
    assert!(rules
        .reason(&descriptor("say", ToolClass::Actuator, "can_communicate"), &Map::new(), true)
        .is_some());
}

/// A core with the stop tool, where connection 1 (actuate, its own token)
/// drives and 5..=8 observe.
fn stopping_core(t0: Instant) -> (Core, String) {
    let mut tools = vec![
        tool("drive", ToolClass::Actuator, "can_move_self", true, None),
        tool("stop", ToolClass::Actuator, "can_halt", false, Some(1000)),
    ];
    tools.extend(core_tool_descriptors());
    let mut tokens = Tokens::default();
    tokens.add("agent-secret", Scope::Actuate).unwrap();
    tokens.add("watch-secret", Scope::Observe).unwrap();
    let mut core = Core::new(
        CoreConfig { tokens, heartbeat_interval: Duration::from_secs(1000), ..config() },
        Arc::new(Catalog::new(tools).unwrap()),
        t0,
    );
    let open = |token: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "manifest_request", "auth": { "token": token } }),
        )
    };
    core.on_connect(1, t0);
    let agent = session_id(&only(&core.on_line(1, &open("agent-secret"), t0), 1));
    for conn in 5..=8 {
        core.on_connect(conn, t0);
        core.on_line(conn, &open("watch-secret"), t0);
    }
    (core, agent)
}

fn stop_ran(outputs: &[Output]) -> bool {
    outputs.iter().any(|o| matches!(o, Output::Execute { tool, .. } if tool == "stop"))
}

#[test]
fn a_flood_of_stops_halts_once_until_something_moves_again() {
    let t0 = Instant::now();
    let (mut core, _agent) = stopping_core(t0);
    assert!(stop_ran(&core.on_line(5, &call("s0", "stop", json!({})), t0)), "the first stop runs");
    for conn in 5..=8 {
        for n in 0..5 {
            let out = core.on_line(conn, &call(&format!("s{conn}-{n}"), "stop", json!({})), t0);
            assert!(!stop_ran(&out), "nothing moved since: answered by the core");
            assert!(
                out.iter().any(|o| matches!(o, Output::Halt)),
                "and halted again, cheaply: {out:?}"
            );
            let result = result_of(&out, conn);
            assert_eq!(
                (result["ok"].as_bool(), result["output"]["merged"].as_bool()),
                (Some(true), Some(true)),
                "{result}"
            );
            assert_eq!(sent(&out, 1).len(), 0, "no event to every session");
        }
    }
    assert!(executes(&core.on_line(1, &call("d1", "drive", json!({ "forward": 1 })), t0)));
    assert!(
        stop_ran(&core.on_line(6, &call("s-after", "stop", json!({})), t0)),
        "something moved: the next stop runs"
    );
    let status = core.status("", t0);
    assert_eq!(
        (status["stops_run"].as_u64(), status["stops_merged"].as_u64()),
        (Some(2), Some(20))
    );
}

#[test]
fn operator_tools_exist_only_with_an_operators_token() {
    let t0 = Instant::now();
    let mut tools = vec![
        tool("drive", ToolClass::Actuator, "can_move_self", true, None),
        tool("place", ToolClass::Generator, "can_modify_world", false, None),
    ];
    tools.extend(core_tool_descriptors());
    tools.extend(approval_tool_descriptors());
    let catalog = Arc::new(Catalog::new(tools).unwrap());
    let mut core = Core::new(config(), catalog.clone(), t0);
    let init = only(&core.on_connect(1, t0), 1);
    let ids: Vec<&str> =
        init["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert!(
        !ids.iter().any(|id| [
            "approve",
            "deny",
            "approval_mode",
            "hold",
            "approvals_list",
            "place"
        ]
        .contains(id)),
        "no operator token: no operator tools at all: {ids:?}"
    );
    assert_eq!(init["capabilities"]["scope"], "actuate", "no token: an agent, not an operator");
    let refused =
        result_of(&core.on_line(1, &call("a", "approval_mode", json!({ "on": false })), t0), 1);
    assert_eq!(error_code(&refused), ("tool_unknown".into(), false));
    // Worlds an agent may edit (a simulator's profile): the generator is the agent's.
    let mut core =
        Core::new(CoreConfig { agents_may_modify_world: true, ..config() }, catalog.clone(), t0);
    let init = only(&core.on_connect(1, t0), 1);
    assert_eq!(init["capabilities"]["generators"], json!(["place"]));
    // With an operator's token, the operator has them and the agent does not.
    let mut tokens = Tokens::default();
    tokens.add("agent-secret", Scope::Actuate).unwrap();
    tokens.add("operator-secret", Scope::Admin).unwrap();
    let mut core = Core::new(CoreConfig { tokens, ..config() }, catalog, t0);
    core.on_connect(1, t0);
    let agent = only(&core.on_line(1, &line(json!({ "protocol": "aicc/0.1", "type": "manifest_request", "auth": { "token": "agent-secret" } })), t0), 1);
    assert!(
        agent["tools"].as_array().unwrap().iter().any(|t| t["id"] == "approve"),
        "listed, as every tool is"
    );
    assert!(
        !agent["capabilities"]["actuators"].as_array().unwrap().contains(&json!("approve")),
        "but not the agent's to call"
    );
    let refused =
        result_of(&core.on_line(1, &call("a", "approval_mode", json!({ "on": false })), t0), 1);
    assert_eq!(error_code(&refused), ("tool_unavailable".into(), false));
}

#[test]
fn who_may_decide_not_the_waiting_session_nor_its_token_and_the_attempt_is_audited() {
    let t0 = Instant::now();
    let mut tokens = Tokens::default();
    tokens.add("agent-admin-secret", Scope::Admin).unwrap();
    tokens.add("operator-secret", Scope::Admin).unwrap();
    let mut tools = vec![tool("move", ToolClass::Actuator, "can_move_self", true, None)];
    tools.extend(core_tool_descriptors());
    tools.extend(approval_tool_descriptors());
    let approvals = ApprovalRules {
        tools: vec!["move".into()],
        move_longer_than_m: None,
        approval_mode: false,
        timeout: Duration::from_secs(30),
    };
    let mut core = Core::new(
        CoreConfig { tokens, approvals, heartbeat_interval: Duration::from_secs(1000), ..config() },
        Arc::new(Catalog::new(tools).unwrap()),
        t0,
    );
    let open = |token: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "manifest_request", "auth": { "token": token } }),
        )
    };
    // An agent that was given an admin token, and a second session of it.
    core.on_connect(1, t0);
    core.on_line(1, &open("agent-admin-secret"), t0);
    core.on_connect(2, t0);
    core.on_line(2, &open("agent-admin-secret"), t0);
    core.on_connect(9, t0);
    core.on_line(9, &open("operator-secret"), t0);
    let out = core.on_line(1, &call("m1", "move", json!({ "forward": 0.3 })), t0);
    assert!(!executes(&out));
    let approval_id =
        events_on(&out, 9, "approval")[0]["approval_id"].as_str().unwrap().to_string();
    for (conn, who) in [(1, "own call"), (2, "same credential")] {
        let out = core.on_line(
            conn,
            &call(&format!("self-{conn}"), "approve", json!({ "approval_id": approval_id })),
            t0,
        );
        assert!(!executes(&out), "{who}: nothing runs");
        let refused = result_of(&out, conn);
        assert_eq!(error_code(&refused), ("tool_unavailable".into(), false));
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("who may decide:")
                && message.contains(who)
                && message.contains("audited"),
            "{message}"
        );
        let audit = events_on(&out, 9, "approval");
        assert_eq!(audit[0]["decision"], "refused", "the operator is told: {out:?}");
        assert!(audit[0]["why"].as_str().unwrap().contains("who may decide"));
    }
    let out = core.on_line(2, &call("deny-2", "deny", json!({ "approval_id": approval_id })), t0);
    assert_eq!(error_code(&result_of(&out, 2)).0, "tool_unavailable", "nor deny it");
    let out = core.on_line(9, &call("ok", "approve", json!({ "approval_id": approval_id })), t0);
    assert!(executes(&out), "the operator, another session with another token, decides");
    assert_eq!(core.status("", t0)["decisions_refused"], 3);
}

#[test]
fn the_operators_hold_is_released_only_by_releasing_it_never_by_approval_mode() {
    let t0 = Instant::now();
    let (mut core, _agent, _admin) = approvals_core(t0);
    let (_, held) = admin_call(
        &mut core,
        "h1",
        "hold",
        json!({ "on": true, "reason": "STOP pressed on the operator's console" }),
        t0,
    );
    assert_eq!(held["output"]["held"], true);
    let out = core.on_line(1, &call("short", "move", json!({ "forward": 0.2 })), t0);
    assert!(!executes(&out), "held: a short move waits");
    assert!(events_on(&out, 1, "command").last().unwrap()["reason"]
        .as_str()
        .unwrap()
        .contains("held by an operator"));
    let (_, off) = admin_call(&mut core, "m-off", "approval_mode", json!({ "on": false }), t0);
    assert_eq!(
        (off["output"]["approval_mode"].as_bool(), off["output"]["held"].as_bool()),
        (Some(false), Some(true)),
        "approval mode off leaves the hold on"
    );
    assert!(
        !executes(&core.on_line(1, &call("short2", "move", json!({ "forward": 0.2 })), t0)),
        "still held"
    );
    assert!(executes(&core.on_line(1, &call("halt", "stop", json!({})), t0)), "stop is never held");
    let (_, released) = admin_call(&mut core, "h2", "hold", json!({ "on": false }), t0);
    assert_eq!(released["output"]["held"], false);
    assert!(
        executes(&core.on_line(1, &call("short3", "move", json!({ "forward": 0.2 })), t0)),
        "released: it runs"
    );
}
