//! The protocol over real TCP against the whole bridge, in-process on a
//! robot without ROS: transport limits, authentication, resume, lease.
mod support;

use std::time::Duration;

use serde_json::json;
use support::{config, start, AiccClient};

fn line(value: serde_json::Value) -> String {
    value.to_string()
}

#[test]
fn an_oversized_line_is_answered_then_the_connection_closes() {
    let bridge = start(config(""), &[]);
    let port = bridge.port;
    let (mut client, _) = AiccClient::connect(port);
    let huge = vec![b'x'; (1 << 20) + 10];
    client.send_bytes(&huge);
    let error = client.read_until("error");
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("error"), Some("invalid_input"))
    );
    assert!(error["message"].as_str().unwrap().contains("1048576-byte limit"), "{error}");
    assert!(client.is_closed_by_peer());
}

#[test]
fn invalid_utf8_and_garbage_get_errors_and_the_connection_lives() {
    let bridge = start(config(""), &[]);
    let port = bridge.port;
    let (mut client, _) = AiccClient::connect(port);
    client.send_bytes(b"\xff\xfe{}\n");
    let error = client.read_until("error");
    assert!(error["message"].as_str().unwrap().contains("UTF-8"), "{error}");
    client.send_line("{\"protocol\":\"aicc/0.1\",\"type\":\"tool_call\",\"call_id\":\"c\",\"tool\":\"move\",\"input\":{\"forward\":NaN}}");
    assert_eq!(client.read_until("error")["code"], "invalid_input");
    client.send_line(&line(json!({ "protocol": "aicc/0.1", "type": "hover" })));
    assert!(client.read_until("error")["message"]
        .as_str()
        .unwrap()
        .contains("unknown message type"));
    let result = client.call("c1", "bridge_status", json!({ "verbose": true }));
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(
        result["meta"]["ignored_fields"],
        json!(["verbose"]),
        "a lenient tool ignores extra fields and says so"
    );
    assert!(
        result["output"]["listener"].as_str().unwrap().starts_with("tcp://127.0.0.1:"),
        "{result}"
    );
    assert_eq!(result["output"]["connections"], 1);
    let result = client.call("c2", "teleport", json!({}));
    assert_eq!(result["error"]["code"], "tool_unknown");
    client.send_line(&line(
        json!({ "protocol": "aicc/0.1", "type": "heartbeat", "message_id": "h" }),
    ));
    // Heartbeats may also come unasked (manifest updates): wait for the reply.
    while client.read_until("heartbeat")["in_reply_to"] != "h" {}
}

#[test]
fn tokens_come_from_the_environment_are_checked_per_connection_and_never_logged() {
    let token = "s3cret-token-for-the-test";
    let bridge =
        start(config(""), &[("AICC_OPERATOR_TOKEN", token), ("AICC_OBSERVE_TOKEN", "look-only")]);
    let port = bridge.port;
    let open = |token: &str| {
        line(
            json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": "open", "auth": { "token": token } }),
        )
    };

    let mut client = AiccClient::connect_raw(port);
    client.send_line(&line(json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": "c", "tool": "proprioception", "input": {} })));
    let refused = client.read_message();
    assert_eq!(refused["type"], "error", "nothing but an error before authentication: {refused}");
    client.send_line(&open("wrong"));
    assert!(client.read_message()["message"].as_str().unwrap().contains("authentication failed"));
    client.send_line(&open(token));
    let init = client.read_message();
    assert_eq!(
        (init["type"].as_str(), init["capabilities"]["scope"].as_str()),
        (Some("session_init"), Some("admin"))
    );

    let mut observer = AiccClient::connect_raw(port);
    observer.send_line(&open("look-only"));
    let init = observer.read_message();
    let actuators = init["capabilities"]["actuators"].as_array().unwrap();
    assert!(
        ["move", "turn", "look_at", "interact", "say"]
            .iter()
            .all(|a| !actuators.contains(&json!(a))),
        "observe scope may not act: {actuators:?}"
    );
    assert!(actuators.contains(&json!("stop")), "observe scope may halt: {actuators:?}");
    let refused = observer.call("m", "move", json!({ "forward": 0.1 }));
    assert_eq!(
        (refused["error"]["code"].as_str(), refused["error"]["retryable"].as_bool()),
        (Some("tool_unavailable"), Some(false))
    );
    let halted = observer.call("halt", "stop", json!({ "reason": "seen from the camera" }));
    assert_eq!(halted["ok"], true, "an observer may stop the robot: {halted}");
    assert_eq!(halted["output"]["reason"], "seen from the camera");

    let mut fresh = AiccClient::connect_raw(port);
    fresh.send_line(&line(json!({ "protocol": "aicc/0.1", "type": "heartbeat" })));
    assert!(
        fresh.read_message()["message"].as_str().unwrap().contains("authentication required"),
        "no connection inherits another's authentication"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(!support::logs().contains(token), "the token appeared in the bridge's log");
}

#[test]
fn without_odometry_the_sensors_that_need_it_are_unavailable_and_say_why() {
    let bridge = start(config(""), &[]);
    let port = bridge.port;
    std::thread::sleep(Duration::from_millis(600));
    let (mut client, init) = AiccClient::connect(port);
    assert!(
        !init["capabilities"]["sensors"].as_array().unwrap().contains(&json!("proprioception")),
        "{}",
        init["capabilities"]
    );
    let result = client.call("p", "proprioception", json!({}));
    assert_eq!(
        (result["error"]["code"].as_str(), result["error"]["retryable"].as_bool()),
        (Some("tool_unavailable"), Some(true))
    );
    assert!(result["error"]["message"].as_str().unwrap().contains("no odometry"), "{result}");
}

#[test]
fn a_non_loopback_listener_is_refused_without_opt_in_and_token() {
    let mut remote = config("");
    remote.listen = "0.0.0.0:0".into();
    let refusal = aicc_bridge::Startup::from_config(std::sync::Arc::new(remote.clone()), |_| None)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        refusal.contains("not a loopback address") && refusal.contains("allow_remote"),
        "{refusal}"
    );
    remote.security.allow_remote = true;
    let refusal = aicc_bridge::Startup::from_config(std::sync::Arc::new(remote.clone()), |_| None)
        .err()
        .expect("refused")
        .to_string();
    assert!(refusal.contains("without a token"), "{refusal}");
    let refusal = aicc_bridge::Startup::from_config(std::sync::Arc::new(remote.clone()), |name| {
        (name == "AICC_TOKEN").then(|| "t".to_string())
    })
    .err()
    .expect("refused")
    .to_string();
    assert!(refusal.contains("without TLS"), "remote means encrypted: {refusal}");
    remote.security.allow_plaintext_remote = true;
    let accepted = aicc_bridge::Startup::from_config(std::sync::Arc::new(remote), |name| {
        (name == "AICC_TOKEN").then(|| "t".to_string())
    });
    assert!(accepted.is_ok(), "opted in, with a token, plain text allowed");
}

#[test]
fn connections_beyond_the_cap_are_told_and_closed() {
    let bridge = start(config("    max_connections: 2\n"), &[]);
    let port = bridge.port;
    let (_a, _) = AiccClient::connect(port);
    let (_b, _) = AiccClient::connect(port);
    let mut third = AiccClient::connect_raw(port);
    let refused = third.read_message();
    assert_eq!(
        (refused["type"].as_str(), refused["code"].as_str(), refused["retryable"].as_bool()),
        (Some("error"), Some("tool_unavailable"), Some(true))
    );
    assert!(third.is_closed_by_peer());
}
