//! The flight recorder on the whole bridge in-process (test robot, real
//! TCP): a session recorded, then read back with the MCAP Python library
//! (a reader the project did not write; scripts/setup-mcp.sh installs it
//! in .deps/mcap-venv), every message checked against its channel's
//! JSON Schema; rotation by size; an unwritable directory.
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use support::{config, start, AiccClient};

fn mcap_python() -> PathBuf {
    if let Some(python) = std::env::var_os("AICC_MCAP_PYTHON") {
        return python.into();
    }
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps/mcap-venv/bin/python");
    assert!(python.exists(), "the MCAP Python reader is not installed at {}: run `bash scripts/setup-mcp.sh` (or set AICC_MCAP_PYTHON)", python.display());
    python
}

/// What the MCAP Python library reads in `file`.
fn read_back(file: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recording/read_mcap.py");
    let output = Command::new(mcap_python())
        .arg(&script)
        .arg(file)
        .output()
        .expect("running the MCAP reader");
    assert!(
        output.status.success(),
        "the MCAP reader failed on {}: {}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the reader prints JSON")
}

fn recordings(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "mcap"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("aicc-recording-tcp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn record_config(dir: &Path, extra: &str) -> aicc_bridge::Config {
    config(&format!("    record:\n      mode: always\n      dir: \"{}\"\n{extra}", dir.display()))
}

#[test]
fn a_session_is_recorded_and_reads_back_with_the_mcap_library() {
    let dir = temp_dir("session");
    let bridge = start(record_config(&dir, ""), &[]);
    let (mut client, init) = AiccClient::connect(bridge.port);
    let session = init["session_id"].as_str().unwrap().to_string();
    let status = client.call("c1", "bridge_status", json!({}));
    assert_eq!(status["ok"], true, "{status}");
    let halted = client.call("c2", "stop", json!({ "reason": "recording test" }));
    assert_eq!(halted["ok"], true, "{halted}");
    client.send_line("this is not JSON");
    let _ = client.read_until("error");
    client.send_line(
        &json!({ "protocol": "aicc/0.1", "type": "session_close", "message_id": "bye" })
            .to_string(),
    );
    drop(client);
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(bridge); // shuts down: the file is finished (summary, footer)

    let files = recordings(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let file = read_back(&files[0]);
    assert_eq!(file["profile"], "aicc");
    assert_eq!(file["metadata"]["aicc_recording"]["format_version"], "1", "{}", file["metadata"]);
    let channels = file["channels"].as_object().unwrap();
    for (topic, channel) in channels {
        assert_eq!(
            (channel["message_encoding"].as_str(), channel["schema_encoding"].as_str()),
            (Some("json"), Some("jsonschema")),
            "{topic}"
        );
    }
    // Every message is valid against its channel's JSON Schema.
    let mut validators = std::collections::HashMap::new();
    for (topic, channel) in channels {
        let schema: Value = serde_json::from_str(channel["schema_data"].as_str().unwrap()).unwrap();
        validators.insert(
            topic.clone(),
            jsonschema::validator_for(&schema).expect("a valid JSON Schema"),
        );
    }
    let messages = file["messages"].as_array().unwrap();
    assert_eq!(
        file["message_count"].as_u64(),
        Some(messages.len() as u64),
        "the summary counts every message"
    );
    for message in messages {
        let validator = &validators[message["topic"].as_str().unwrap()];
        assert!(validator.is_valid(&message["data"]), "{message} does not match its schema");
    }
    let on = |topic: &str| {
        messages.iter().filter(|m| m["topic"] == topic).map(|m| &m["data"]).collect::<Vec<_>>()
    };
    // In: the two calls, the garbage line, the close; each with its session.
    let inbound = on("/aicc/in");
    let calls: Vec<&str> = inbound.iter().filter_map(|m| m["message"]["tool"].as_str()).collect();
    assert_eq!(calls, ["bridge_status", "stop"]);
    assert!(
        inbound.iter().any(|m| m["raw"] == "this is not JSON" && m["message"].is_null()),
        "{inbound:?}"
    );
    assert!(inbound.iter().all(|m| m["session"] == session.as_str()), "{inbound:?}");
    // Out: the greeting, both results, the error.
    let outbound = on("/aicc/out");
    assert_eq!(outbound[0]["message"]["type"], "session_init");
    let results: Vec<&str> = outbound
        .iter()
        .filter(|m| m["message"]["type"] == "tool_result")
        .filter_map(|m| m["message"]["call_id"].as_str())
        .collect();
    assert_eq!(results, ["c1", "c2"]);
    assert!(outbound.iter().any(|m| m["message"]["type"] == "error"), "{outbound:?}");
    let connections: Vec<&str> =
        on("/aicc/connections").iter().filter_map(|m| m["kind"].as_str()).collect();
    assert_eq!(connections, ["connected", "disconnected"]);
    // Log times are in order, on the wall clock (nanoseconds).
    let times: Vec<u64> = messages.iter().map(|m| m["log_time"].as_u64().unwrap()).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]) && times[0] > 1_600_000_000_000_000_000,
        "{times:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_rotate_by_size_and_each_reads_back() {
    let dir = temp_dir("rotate");
    let bridge = start(record_config(&dir, "      max_file_bytes: 65536\n"), &[]);
    let (mut client, _) = AiccClient::connect(bridge.port);
    for i in 0..60 {
        let result = client.call(&format!("c{i}"), "bridge_status", json!({}));
        assert_eq!(result["ok"], true);
    }
    drop(client);
    drop(bridge);
    let files = recordings(&dir);
    assert!(files.len() >= 2, "{files:?}");
    let mut calls = 0;
    for (part, path) in files.iter().enumerate() {
        assert!(std::fs::metadata(path).unwrap().len() < 2 * 65536, "{} too large", path.display());
        let file = read_back(path);
        assert_eq!(file["metadata"]["aicc_recording"]["part"], part.to_string());
        calls += file["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["topic"] == "/aicc/in" && m["data"]["message"]["tool"] == "bridge_status")
            .count();
    }
    assert_eq!(calls, 60, "every call in exactly one part");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unwritable_directory_is_logged_and_the_bridge_serves_on() {
    let blocker = temp_dir("blocker");
    std::fs::write(&blocker, b"a file where the directory should be").unwrap();
    let bridge = start(record_config(&blocker.join("recordings"), ""), &[]);
    let (mut client, _) = AiccClient::connect(bridge.port);
    let result = client.call("c1", "bridge_status", json!({}));
    assert_eq!(result["ok"], true, "{result}");
    assert!(
        support::logged_soon("recording stopped; the bridge goes on without it"),
        "the failure is logged"
    );
    assert!(
        support::logs().contains(&format!(
            "cannot create the recording directory {}",
            blocker.join("recordings").display()
        )),
        "the log names the directory"
    );
    drop(client);
    drop(bridge);
    let _ = std::fs::remove_file(&blocker);
}

#[test]
fn record_start_and_record_stop_give_the_file_which_holds_the_calls_between() {
    let dir = temp_dir("tools");
    // The recording tools are the operator's: they exist with an operator's token.
    let bridge = start(
        config(&format!("    record:\n      dir: \"{}\"\n", dir.display())),
        &[("AICC_OPERATOR_TOKEN", "recording-operator-token")],
    );
    let mut client = AiccClient::connect_raw(bridge.port);
    client.send_line(&json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": "open", "auth": { "token": "recording-operator-token" } }).to_string());
    let init = client.read_until("session_init");
    let actuators = init["capabilities"]["actuators"].as_array().unwrap();
    assert!(
        actuators.contains(&json!("record_start")) && actuators.contains(&json!("record_stop")),
        "{}",
        init["capabilities"]
    );
    let before = client.call("before", "bridge_status", json!({}));
    assert_eq!(before["ok"], true);
    let started = client.call("start", "record_start", json!({ "note": "regression run" }));
    assert_eq!(started["ok"], true, "{started}");
    let path = PathBuf::from(started["output"]["path"].as_str().unwrap());
    assert!(path.starts_with(&dir), "{}", path.display());
    let bad = client.call("bad", "record_start", json!({ "note": 5 }));
    assert_eq!(bad["error"]["code"], "invalid_input", "{bad}");
    let during = client.call("during", "bridge_status", json!({}));
    assert_eq!(during["ok"], true);
    let stopped = client.call("stop-rec", "record_stop", json!({}));
    assert_eq!(
        (stopped["ok"].as_bool(), stopped["output"]["was_recording"].as_bool()),
        (Some(true), Some(true)),
        "{stopped}"
    );
    assert_eq!(stopped["output"]["path"], path.display().to_string());
    // The file is complete as soon as record_stop answers.
    let file = read_back(&path);
    let calls: Vec<&str> = file["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["topic"] == "/aicc/in")
        .filter_map(|m| m["data"]["message"]["call_id"].as_str())
        .collect();
    // record_stop's own line may or may not reach the file before it ends.
    assert_eq!(
        &calls[..2],
        ["bad", "during"],
        "the calls after record_start, none before: {calls:?}"
    );
    assert!(calls.len() == 2 || calls[2] == "stop-rec", "{calls:?}");
    assert!(
        file["metadata"]["aicc_recording"]["detail"].as_str().unwrap().contains("regression run"),
        "{}",
        file["metadata"]
    );
    let again = client.call("again", "record_stop", json!({}));
    assert_eq!(
        (again["ok"].as_bool(), again["output"]["was_recording"].as_bool()),
        (Some(true), Some(false)),
        "{again}"
    );
    drop(client);
    drop(bridge);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn on_fault_an_agent_lost_mid_call_writes_the_last_seconds() {
    let dir = temp_dir("flight");
    let bridge = start(
        config(&format!("    record:\n      mode: on_fault\n      dir: \"{}\"\n", dir.display())),
        &[],
    );
    let (mut client, _) = AiccClient::connect(bridge.port);
    assert_eq!(client.call("c1", "bridge_status", json!({}))["ok"], true);
    assert!(recordings(&dir).is_empty(), "nothing on disk before a fault");
    // A long wait in flight, then the connection drops.
    client.send_line(&json!({ "protocol": "aicc/0.1", "type": "tool_call", "message_id": "m-w", "call_id": "w", "tool": "wait", "input": { "seconds": 5.0 } }).to_string());
    std::thread::sleep(std::time::Duration::from_millis(200));
    drop(client);
    assert!(
        support::logged_soon("flight recorder: the last seconds written"),
        "the dump is logged"
    );
    let files = recordings(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let file = read_back(&files[0]);
    assert_eq!(file["metadata"]["aicc_recording"]["reason"], "on_fault");
    assert!(
        file["metadata"]["aicc_recording"]["detail"].as_str().unwrap().contains("agent lost"),
        "{}",
        file["metadata"]
    );
    let messages = file["messages"].as_array().unwrap();
    assert!(
        messages.iter().any(|m| m["data"]["message"]["call_id"] == "c1"),
        "the seconds before the fault are in it"
    );
    assert_eq!(messages.last().unwrap()["data"]["kind"], "trigger");
    drop(bridge);
    let _ = std::fs::remove_dir_all(&dir);
}
