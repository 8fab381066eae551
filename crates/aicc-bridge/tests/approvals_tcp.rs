//! Operator approvals over real TCP, on the in-process bridge with the
//! test robot: a call the configuration names waits until an admin session
//! approves (it runs) or denies it (an error, nothing said), and a replayed
//! approval is refused and logged.
mod support;

use serde_json::{json, Value};
use support::{config, start, AiccClient};

const AGENT: &str = "approvals-agent-token-2c91";
const OPERATOR: &str = "approvals-operator-token-77ad";
const TOKENS: [(&str, &str); 2] = [("AICC_TOKEN", AGENT), ("AICC_OPERATOR_TOKEN", OPERATOR)];

/// A session opened with `token`, and its session_init.
fn open(port: u16, token: &str) -> (AiccClient, Value) {
    let mut client = AiccClient::connect_raw(port);
    client.send_line(&json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": "open", "auth": { "token": token } }).to_string());
    let init = client.read_until("session_init");
    (client, init)
}

fn send_call(client: &mut AiccClient, call_id: &str, tool: &str, input: Value) {
    client.send_line(&json!({ "protocol": "aicc/0.1", "type": "tool_call", "message_id": format!("m-{call_id}"), "call_id": call_id, "tool": tool, "input": input }).to_string());
}

/// Reads until the tool_result of `call_id` (events on the way are kept).
fn result_of(client: &mut AiccClient, call_id: &str, seen: &mut Vec<Value>) -> Value {
    loop {
        let message = client.read_message();
        if message["type"] == "tool_result" && message["call_id"] == call_id {
            return message;
        }
        seen.push(message);
    }
}

#[test]
fn a_named_tool_waits_for_an_admin_who_approves_or_denies_it_and_a_replay_is_refused() {
    let bridge =
        start(config("    approvals:\n      tools: [say]\n      timeout_s: 30.0\n"), &TOKENS);
    let (mut agent, _) = open(bridge.port, AGENT);
    let (mut operator, init) = open(bridge.port, OPERATOR);
    assert!(
        init["capabilities"]["actuators"].as_array().unwrap().contains(&json!("approve")),
        "{}",
        init["capabilities"]
    );
    send_call(&mut agent, "hello", "say", json!({ "text": "hello" }));
    let waiting = loop {
        let event = agent.read_until("event");
        if event["topic"] == "command" {
            break event;
        }
    };
    assert_eq!(
        (waiting["topic"].as_str(), waiting["payload"]["state"].as_str()),
        (Some("command"), Some("awaiting_approval")),
        "{waiting}"
    );
    let listed = operator.call("l1", "approvals_list", json!({}));
    let pending = listed["output"]["pending"].as_array().unwrap().clone();
    assert_eq!((pending.len(), pending[0]["tool"].as_str()), (1, Some("say")), "{listed}");
    let approval_id = pending[0]["approval_id"].as_str().unwrap().to_string();
    let approved = operator.call("a1", "approve", json!({ "approval_id": approval_id }));
    assert_eq!(approved["output"]["decision"], "approved", "{approved}");
    let mut seen = Vec::new();
    let said = result_of(&mut agent, "hello", &mut seen);
    assert_eq!(said["ok"], true, "{said}");
    assert!(seen.iter().any(|m| m["payload"]["state"] == "accepted"), "{seen:?}");
    let replayed = operator.call("a2", "approve", json!({ "approval_id": approval_id }));
    assert_eq!(replayed["error"]["code"], "invalid_input", "{replayed}");
    assert!(
        support::logged_soon("refused: no call waits for this approval"),
        "the refusal is logged"
    );
    // Denied: the agent's call ends with a non-retryable error.
    send_call(&mut agent, "again", "say", json!({ "text": "again" }));
    // The operator's connection is another: list once the call is known to wait.
    loop {
        let event = agent.read_until("event");
        if event["topic"] == "command" && event["payload"]["state"] == "awaiting_approval" {
            break;
        }
    }
    let listed = operator.call("l2", "approvals_list", json!({}));
    let approval_id = listed["output"]["pending"][0]["approval_id"].as_str().unwrap().to_string();
    let denied =
        operator.call("d1", "deny", json!({ "approval_id": approval_id, "reason": "not now" }));
    assert_eq!(denied["output"]["decision"], "denied", "{denied}");
    let ended = result_of(&mut agent, "again", &mut Vec::new());
    assert_eq!(
        (ended["ok"].as_bool(), ended["error"]["retryable"].as_bool()),
        (Some(false), Some(false)),
        "{ended}"
    );
    assert!(ended["error"]["message"].as_str().unwrap().contains("not now"), "{ended}");
    let said: Vec<String> = bridge.robot.signals.said();
    assert_eq!(said, vec!["hello".to_string()], "only the approved call spoke");
}

/// Reads until the agent's call is announced as waiting; returns its approval id.
fn approval_id_when_waiting(agent: &mut AiccClient) -> String {
    loop {
        let event = agent.read_until("event");
        if event["topic"] == "command" && event["payload"]["state"] == "awaiting_approval" {
            return event["payload"]["approval_id"].as_str().expect("approval_id").to_string();
        }
    }
}

#[test]
fn an_approved_call_runs_on_its_agents_connection_after_the_operator_has_gone() {
    let bridge =
        start(config("    approvals:\n      tools: [wait]\n      timeout_s: 30.0\n"), &TOKENS);
    let (mut agent, _) = open(bridge.port, AGENT);
    // A headless operator approves and leaves at once (as `aicc approvals approve` does).
    send_call(&mut agent, "w1", "wait", json!({ "seconds": 0.5 }));
    let approval_id = approval_id_when_waiting(&mut agent);
    {
        let (mut operator, _) = open(bridge.port, OPERATOR);
        let approved = operator.call("a1", "approve", json!({ "approval_id": approval_id }));
        assert_eq!(approved["output"]["decision"], "approved", "{approved}");
    }
    let waited = result_of(&mut agent, "w1", &mut Vec::new());
    assert_eq!(
        waited["ok"], true,
        "the approved call ran to its end although its approver had gone: {waited}"
    );
}
