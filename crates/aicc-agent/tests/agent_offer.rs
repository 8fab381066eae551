//! `aicc agent` never hands an LLM the operator's tools, whatever its
//! token: a backend (any program on stdio, here a few lines of Python) run
//! with the operator's own token is told of no operator tool, and its call
//! of one by name is answered by the loop, never sent: the bridge's
//! approval mode stays off.
mod support;

use std::process::Command;

use aicc_testkit::AiccClient;
use serde_json::{json, Value};

const OPERATOR: &str = "agent-offer-operator-token-0c4a";

/// The backend: records the tools it was given and the answer to its call
/// of `approval_mode`, then is done.
const BACKEND: &str = r#"
import json, sys
start = json.loads(sys.stdin.readline())
sys.stdin.readline()  # the first wake's observation
print(json.dumps({"calls": [{"tool": "approval_mode", "input": {"on": True}}]}), flush=True)
observation = json.loads(sys.stdin.readline())
with open(sys.argv[1], "w") as out:
    json.dump({"tools": [t.get("id") for t in start["tools"]], "items": observation["items"]}, out)
print(json.dumps({"done": True, "success": True, "summary": "looked"}), flush=True)
"#;

#[test]
fn the_agent_loop_offers_no_operator_tool_even_with_the_operators_token() {
    let bridge =
        support::start_with_tokens(support::config(2.0), &[("AICC_OPERATOR_TOKEN", OPERATOR)]);
    let seen = std::env::temp_dir().join(format!("aicc-agent-offer-{}.json", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_aicc"))
        .args([
            "--port",
            &bridge.port.to_string(),
            "--token-env",
            "AGENT_OFFER_TOKEN",
            "agent",
            "--backend",
            "command",
            "--max-calls",
            "5",
            "--run-timeout-s",
            "30",
            "--",
            "python3",
            "-c",
            BACKEND,
        ])
        .arg(&seen)
        .env("AGENT_OFFER_TOKEN", OPERATOR)
        .output()
        .expect("running aicc agent");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no report ({e}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let seen: Value = serde_json::from_str(
        &std::fs::read_to_string(&seen).expect("the backend wrote what it saw"),
    )
    .unwrap();
    let tools: Vec<&str> =
        seen["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    println!("aicc agent with the operator's token offered: {tools:?}");
    for withheld in [
        "approve",
        "deny",
        "approval_mode",
        "approvals_list",
        "hold",
        "record_start",
        "record_stop",
        "place_object",
    ] {
        assert!(!tools.contains(&withheld), "{withheld} offered to the backend: {tools:?}");
    }
    assert!(tools.contains(&"move") && tools.contains(&"stop"), "{tools:?}");
    let answer = seen["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "result" && i["tool"] == "approval_mode")
        .unwrap_or_else(|| panic!("no answer to the call: {seen}"));
    assert_eq!(
        (
            answer["ok"].as_bool(),
            answer["error"]["local"].as_bool(),
            answer["error"]["code"].as_str()
        ),
        (Some(false), Some(true), Some("tool_unknown")),
        "answered by the loop, not sent: {answer}"
    );
    assert_eq!(report["local_errors"], 1, "{report}");
    let mut operator = AiccClient::connect_raw(bridge.port);
    operator.send_line(&json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": "open", "auth": { "token": OPERATOR } }).to_string());
    operator.read_until("session_init");
    assert_eq!(
        operator.call("l", "approvals_list", json!({}))["output"]["approval_mode"],
        false,
        "the bridge's approval mode was never switched"
    );
}
