//! The agent-conformance harness against the `aicc` client (every check
//! must pass) and against a deliberately non-conformant client (the
//! harness must catch it), both as real subprocesses.
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A client that breaks the agent rules on purpose: it calls whatever it
/// is told (capabilities ignored) with an empty call_id, takes the first
/// tool_result whatever its call_id, prints events as they arrive and
/// always exits 0.
const NON_CONFORMANT_CLIENT: &str = r#"
import json, socket, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
rest = args[args.index("--port") + 2:]
stream = socket.create_connection(("127.0.0.1", port), timeout=3).makefile("rwb")
def read():
    line = stream.readline()
    if not line:
        sys.exit(0)
    try:
        return json.loads(line)
    except ValueError:
        return {}
read()
if rest[0] == "call":
    tool_input = json.loads(rest[2]) if len(rest) > 2 else {}
    stream.write((json.dumps({"protocol": "aicc/0.1", "type": "tool_call", "call_id": "", "tool": rest[1], "input": tool_input}) + "\n").encode())
    stream.flush()
    while True:
        message = read()
        if message.get("type") == "tool_result":
            print(json.dumps(message.get("output", message.get("error"))))
            break
elif rest[0] == "events":
    for _ in range(int(rest[rest.index("--count") + 1])):
        message = read()
        while message.get("type") != "event":
            message = read()
        print(json.dumps(message), flush=True)
sys.exit(0)
"#;

fn scratch_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("aicc-agent-conformance-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the harness; returns its exit code, its table and its JSON report.
fn run_harness(client: &str, report_dir: &Path) -> (i32, String, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_aicc-agent-conformance"))
        .args(["--client", client, "--report-dir", report_dir.to_str().unwrap()])
        .output()
        .expect("the harness runs");
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    let report =
        std::fs::read_to_string(report_dir.join("agent-conformance.json")).unwrap_or_else(|e| {
            panic!(
                "no report ({e}); harness said:\n{table}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    (
        output.status.code().expect("the harness exits by itself"),
        table,
        serde_json::from_str(&report).unwrap(),
    )
}

fn check<'a>(report: &'a Value, name_start: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str().unwrap().starts_with(name_start))
        .unwrap_or_else(|| panic!("no check named {name_start}…"))
}

#[test]
fn the_aicc_client_passes_every_agent_check() {
    let dir = scratch_dir("aicc");
    let client = format!("'{}' --port {{port}}", env!("CARGO_BIN_EXE_aicc"));
    let (code, table, report) = run_harness(&client, &dir);
    assert_eq!(code, 0, "{table}");
    assert_eq!(report["all_passed"], true, "{table}");
    let names: Vec<&str> =
        report["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 21, "{names:?}");
    for code in [
        "protocol_mismatch",
        "session_expired",
        "tool_unknown",
        "tool_unavailable",
        "invalid_input",
        "execution_failed",
        "timeout",
        "internal_error",
    ] {
        assert!(
            names.contains(&format!("error code: {code}").as_str()),
            "no check for {code}: {names:?}"
        );
    }
    assert_eq!(check(&report, "tick order: tick 3")["reason"], "printed 5, 6, 7, 8, 3 (late)");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_non_conformant_client_is_caught() {
    let dir = scratch_dir("bad");
    let script = dir.join("bad_client.py");
    std::fs::write(&script, NON_CONFORMANT_CLIENT).unwrap();
    let (code, table, report) =
        run_harness(&format!("python3 '{}' --port {{port}}", script.display()), &dir);
    assert_eq!(code, 1, "{table}");
    assert_eq!(report["all_passed"], false);
    let failed = |name: &str, reason_part: &str| {
        let check = check(&report, name);
        assert_eq!(check["passed"], false, "{name} should fail:\n{table}");
        assert!(
            check["reason"].as_str().unwrap().contains(reason_part),
            "{name}: {}",
            check["reason"]
        );
    };
    failed("capabilities: move refused", "received 1 tool_call(s) for 'move'");
    failed("capabilities: teleport refused", "received 1 tool_call(s) for 'teleport'");
    failed("call_id: a result with a foreign call_id", "printed as the answer");
    failed("call_id: every tool_call carries", "had no non-empty call_id");
    failed("error code: internal_error", "exited 0");
    failed("retry: an actuator", "exited 0");
    failed("tick order: events 5, 7, 6, 8", "printed 5, 7, 6, 8; expected 5, 6, 7, 8");
    failed("tick order: tick 3", "expected 5, 6, 7, 8, 3 (late)");
    failed("malformed: a result with both output and error", "printed as if valid");
    failed("malformed: a line over 1 MiB", "expected exit 1");
    failed("malformed: a line that is not JSON", "read on past the malformed line");
    // What it does right is not held against it: the harness discriminates.
    assert_eq!(check(&report, "capabilities: proprioception sent")["passed"], true, "{table}");
    let _ = std::fs::remove_dir_all(dir);
}
