//! The AI-control dialect (JSON-RPC over NDJSON) against the simulated
//! robot: authorization, every method and error code, the command
//! lifecycle (accepted, then one command_completed), replace and append
//! semantics, the event cursor, and motion measured by the simulator's
//! ground truth. One test function, so that one simulator runs.
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use aicc_agent::ai_control::{AiControlError, Client};
use serde_json::{json, Value};
use support::{start_bridge_with_ai_control, start_sim, GroundTruth};

const DRIVE_TOKEN: &str = "ai-control-test-drive";
const LOOK_TOKEN: &str = "ai-control-test-look";

fn connect(port: u16) -> Client {
    Client::connect("127.0.0.1", port, Duration::from_secs(30))
        .expect("connecting to the AI-control listener")
}

fn authorized(port: u16, token: &str) -> Client {
    let mut client = connect(port);
    assert!(client.auth(token).unwrap(), "token {token} refused");
    client
}

/// The remote error code of a failed request.
fn remote_code(result: Result<Value, AiControlError>) -> (i64, String) {
    match result {
        Err(AiControlError::Remote { code, message }) => (code, message),
        other => panic!("expected a remote error, got {other:?}"),
    }
}

fn accepted_seq(client: &mut Client, command: Value) -> u64 {
    let result = client.act(command.clone()).unwrap_or_else(|e| panic!("act {command}: {e}"));
    assert_eq!(result["accepted"], true, "{command}: {result}");
    result["commandSeq"].as_u64().expect("commandSeq")
}

/// Every retained event, oldest first (paging with the cursor).
fn all_events(client: &mut Client) -> Vec<Value> {
    let mut events = Vec::new();
    let mut cursor = 0;
    loop {
        let page = client.events(cursor, 500).unwrap();
        let batch = page["events"].as_array().unwrap().clone();
        let Some(last) = batch.last() else { return events };
        cursor = last["seq"].as_u64().unwrap();
        events.extend(batch);
    }
}

/// Waits (up to a minute) for the command_completed event of `seq`.
fn completion(client: &mut Client, seq: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = all_events(client)
            .into_iter()
            .map(|e| e["event"].clone())
            .find(|e| e["type"] == "command_completed" && e["commandSeq"] == seq);
        if let Some(event) = found {
            return event;
        }
        assert!(
            Instant::now() < deadline,
            "no command_completed for command {seq} within a minute"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// Sends raw bytes on a fresh connection; returns the response lines read
/// until the bridge closes or `lines` have come.
fn raw_exchange(port: u16, bytes: &[u8], lines: usize) -> (Vec<Value>, bool) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(bytes).unwrap();
    let mut reader = BufReader::new(stream);
    let mut responses = Vec::new();
    while responses.len() < lines {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            return (responses, true);
        }
        responses.push(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("response is not JSON ({e}): {line}")),
        );
    }
    let mut rest = Vec::new();
    let closed = matches!(reader.read_to_end(&mut rest), Ok(0));
    (responses, closed)
}

fn distance((x0, y0, _): (f64, f64, f64), (x1, y1, _): (f64, f64, f64)) -> f64 {
    (x1 - x0).hypot(y1 - y0)
}

/// The bridge refuses to start a non-loopback AI-control listener without
/// the operator's opt-in; returns what it said.
fn refused_start(args: &[&str]) -> String {
    use std::process::{Command, Stdio};
    support::ros_environment();
    let mut child = Command::new(support::binary("aicc-ros2"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("AICC_TOKEN")
        .env_remove("AICC_OPERATOR_TOKEN")
        .env_remove("AICC_OBSERVE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the bridge");
    let mut stderr_pipe = child.stderr.take().unwrap();
    let mut guard = support::ChildGuard::new("refused bridge", child);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = guard.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the bridge is still running with {args:?}: it should have refused to start"
        );
        thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "{args:?}");
    let mut stderr = String::new();
    stderr_pipe.read_to_string(&mut stderr).unwrap();
    stderr
}

#[test]
fn the_ai_control_dialect_drives_the_simulated_robot_through_the_core() {
    let config_dir =
        std::env::temp_dir().join(format!("aicc-ai-control-test-{}", std::process::id()));
    std::fs::create_dir_all(&config_dir).unwrap();
    // Loopback first: a remote listener needs allow_remote, then a token.
    let stderr = refused_start(&["--ai-control-listen", "0.0.0.0:0"]);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    let remote_config = config_dir.join("remote.yaml");
    std::fs::write(
        &remote_config,
        "aicc_bridge:\n  ros__parameters:\n    security:\n      allow_remote: true\n",
    )
    .unwrap();
    let stderr = refused_start(&[
        "--config",
        remote_config.to_str().unwrap(),
        "--ai-control-listen",
        "0.0.0.0:0",
    ]);
    assert!(stderr.contains("without a token"), "{stderr}");

    let _sim = start_sim(&[]);
    let truth = GroundTruth::subscribe();
    let config_path = config_dir.join("ai_control.yaml");
    std::fs::write(
        &config_path,
        "aicc_bridge:\n  ros__parameters:\n    ai_control:\n      max_queued_commands: 2\n",
    )
    .unwrap();
    let (_bridge, _aicc_port, port, _log) = start_bridge_with_ai_control(
        &["--config", config_path.to_str().unwrap()],
        &[("AICC_TOKEN", DRIVE_TOKEN), ("AICC_OBSERVE_TOKEN", LOOK_TOKEN)],
    );

    // Authorization: per connection, a wrong token is an answer, not an error.
    let mut client = connect(port);
    assert_eq!(remote_code(client.ping()).0, -32001, "unauthorized before auth");
    assert!(!client.auth("not-the-token").unwrap());
    assert_eq!(remote_code(client.status()).0, -32001, "still unauthorized after a wrong token");
    assert!(client.auth(DRIVE_TOKEN).unwrap());
    assert_eq!(client.ping().unwrap(), json!({"ok": true}));
    assert_eq!(remote_code(connect(port).ping()).0, -32001, "a new connection inherits nothing");

    // Envelope errors, on raw connections.
    let (responses, _) = raw_exchange(port, b"{not json\n", 1);
    assert_eq!(
        (responses[0]["id"].clone(), responses[0]["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );
    let (responses, _) = raw_exchange(
        port,
        b"{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"ping\",\"params\":[1]}\n",
        1,
    );
    assert_eq!(
        (responses[0]["id"].clone(), responses[0]["error"]["code"].clone()),
        (json!(41), json!(-32600))
    );
    let mut oversized = vec![b' '; (1 << 20) + 1];
    oversized.push(b'\n');
    let (responses, closed) = raw_exchange(port, &oversized, 1);
    assert_eq!(responses[0]["error"]["code"], -32600, "{:?}", responses[0]);
    assert!(closed, "the bridge closes the connection after an oversized line");
    assert_eq!(remote_code(client.request("teleport", Default::default())).0, -32601);

    // Status states the limits in force.
    let status = client.status().unwrap();
    assert_eq!(status["running"], true);
    assert_eq!(
        (status["host"].as_str(), status["port"].as_u64()),
        (Some("127.0.0.1"), Some(port as u64))
    );
    assert_eq!(
        (status["maxQueuedCommands"].as_u64(), status["maxEvents"].as_u64()),
        (Some(2), Some(512))
    );
    assert_eq!(status["queuedCommands"], 0);
    assert_eq!(status["session"]["open"], true, "{status}");
    assert!(
        status.get("lastError").is_some()
            && status.get("observationSeq").is_some()
            && status.get("events").is_some()
    );

    // Observation: wait until the robot's sensors flow, then check its shape.
    let deadline = Instant::now() + Duration::from_secs(60);
    let observed = loop {
        let observed = client.observe().unwrap();
        if observed["observation"]["ready"] == true {
            break observed;
        }
        assert!(
            Instant::now() < deadline,
            "not ready within a minute: {}",
            observed["observation"]["readiness"]
        );
        thread::sleep(Duration::from_millis(200));
    };
    let observation = &observed["observation"];
    assert!(observed["observationSeq"].as_u64().unwrap() >= 1);
    assert_eq!(observation["schemaVersion"], 1);
    assert_eq!(observation["readiness"], json!({"ready": true, "reasons": []}));
    let available: Vec<&str> = observation["availableActions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for action in ["move", "turn", "look_at", "interact", "say", "wait", "stop"] {
        assert!(available.contains(&action), "{action} not in {available:?}");
    }
    assert_eq!(observation["actions"]["move"]["fields"]["x"]["unit"], "millimetres");
    assert!(observation["robot"]["position_m"]["x"].is_number(), "{}", observation["robot"]);
    assert!(observation["tick"].is_u64());

    // An observe-scope token may look but not act.
    let mut watcher = authorized(port, LOOK_TOKEN);
    assert!(watcher.status().is_ok() && watcher.events(0, 1).is_ok());
    let (code, message) = remote_code(watcher.act(json!({"type": "stop"})));
    assert_eq!(code, -32001);
    assert!(message.contains("may not act"), "{message}");

    // Invalid commands are refused by field, never queued.
    let (code, message) = remote_code(client.act(json!({"type": "move", "x": 1.5})));
    assert_eq!(code, -32602);
    assert!(message.contains("x must be an integer"), "{message}");
    let (code, message) = remote_code(client.act(json!({"type": "move", "x": 60000})));
    assert_eq!(code, -32602);
    assert!(message.contains("x (millimetres → move.forward)"), "{message}");
    assert_eq!(client.status().unwrap()["lastCommandSeq"], 0, "nothing was queued");

    // move x=300 mm: accepted, then completed, and the robot moved 0.30 m.
    let before = truth.settled_pose();
    let seq = accepted_seq(&mut client, json!({"type": "move", "x": 300}));
    let done = completion(&mut client, seq);
    assert_eq!(done["success"], true, "{done}");
    assert_eq!(
        (done["tool"].as_str(), done["message"].as_str()),
        (Some("move"), Some("completed"))
    );
    assert!(done["output"]["achieved"]["forward_m"].is_number(), "{done}");
    let moved = distance(before, truth.settled_pose());
    assert!((moved - 0.30).abs() <= 0.03, "moved {moved:.3} m for x=300 mm");

    // Replace: a long move replaced by stop completes as replaced, and the
    // robot stops well short of the long move's goal.
    let before = truth.settled_pose();
    let long = accepted_seq(&mut client, json!({"type": "move", "x": 1500}));
    let deadline = Instant::now() + Duration::from_secs(30);
    while distance(before, truth.pose()) < 0.03 {
        assert!(Instant::now() < deadline, "the long move did not start");
        thread::sleep(Duration::from_millis(20));
    }
    let stop =
        accepted_seq(&mut client, json!({"type": "stop", "stringArg": "replaced in a test"}));
    let replaced = completion(&mut client, long);
    assert_eq!(replaced["success"], false, "{replaced}");
    assert_eq!(replaced["message"], format!("replaced by command {stop}"), "{replaced}");
    assert_eq!(
        replaced["error"]["code"], "execution_failed",
        "the core's cancel error: {replaced}"
    );
    assert_eq!(completion(&mut client, stop)["success"], true);
    let travelled = distance(before, truth.settled_pose());
    assert!(travelled < 1.0, "the replaced move went on for {travelled:.2} m of 1.5");

    // Append until the queue is full (2), then -32002; a replacing stop
    // completes every waiting command as replaced.
    let running = accepted_seq(&mut client, json!({"type": "wait", "intArg": 20000}));
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.status().unwrap()["runningCommand"] != running {
        assert!(Instant::now() < deadline, "the wait did not start");
        thread::sleep(Duration::from_millis(20));
    }
    let first =
        accepted_seq(&mut client, json!({"type": "say", "stringArg": "one", "append": true}));
    let second =
        accepted_seq(&mut client, json!({"type": "say", "stringArg": "two", "append": true}));
    let (code, message) =
        remote_code(client.act(json!({"type": "say", "stringArg": "three", "append": true})));
    assert_eq!(code, -32002, "{message}");
    assert_eq!(client.status().unwrap()["queuedCommands"], 2);
    let stop = accepted_seq(&mut client, json!({"type": "stop"}));
    for seq in [running, first, second] {
        let event = completion(&mut client, seq);
        assert_eq!(
            (event["success"].clone(), event["message"].clone()),
            (json!(false), json!(format!("replaced by command {stop}"))),
            "{event}"
        );
    }
    assert_eq!(completion(&mut client, stop)["success"], true);

    // An unknown type is accepted and completes as a failure naming the actions.
    let unknown = accepted_seq(&mut client, json!({"type": "teleport", "targetId": "12"}));
    let failed = completion(&mut client, unknown);
    assert_eq!(failed["success"], false);
    let message = failed["message"].as_str().unwrap();
    assert!(message.contains("unknown action 'teleport'") && message.contains("move"), "{message}");

    // Every accepted command completed exactly once; session events are mirrored.
    let events = all_events(&mut client);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "ascending: {seqs:?}");
    let last_command = client.status().unwrap()["lastCommandSeq"].as_u64().unwrap();
    for seq in 1..=last_command {
        let count = events
            .iter()
            .filter(|e| {
                e["event"]["type"] == "command_completed" && e["event"]["commandSeq"] == seq
            })
            .count();
        assert_eq!(count, 1, "command {seq} completed {count} times");
    }
    let mirrored = |kind: &str| {
        events.iter().any(|e| e["event"]["type"] == kind && e["event"]["payload"].is_object())
    };
    assert!(mirrored("lease") && mirrored("governor"), "lease and governor events are mirrored");
    assert!(!events
        .iter()
        .any(|e| e["event"]["type"] == "command" || e["event"]["type"] == "tool_result"));

    // The cursor: strictly after it, clamped limits, and it survives a reconnect.
    let latest = client.events(0, 1).unwrap()["latestSeq"].as_u64().unwrap();
    assert!(latest >= 3);
    // Limit 2: a session event (a lease lapsing) may arrive meanwhile.
    let tail = client.events(latest - 2, 2).unwrap()["events"].clone();
    let tail_seqs: Vec<u64> =
        tail.as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(tail_seqs, vec![latest - 1, latest]);
    assert_eq!(
        client.events(0, 0).unwrap()["events"].as_array().unwrap().len(),
        1,
        "limit 0 clamps to 1"
    );
    let retained = client.status().unwrap()["events"].as_u64().unwrap() as usize;
    assert_eq!(
        client.events(0, 100_000).unwrap()["events"].as_array().unwrap().len(),
        retained.min(500),
        "limit clamps to 500"
    );
    let (code, _) = remote_code(
        client.request("events", json!({"afterSeq": "1"}).as_object().unwrap().clone()),
    );
    assert_eq!(code, -32602);
    let mut again = authorized(port, DRIVE_TOKEN);
    assert_eq!(
        again.events(latest - 2, 2).unwrap()["events"],
        tail,
        "a cursor survives reconnecting"
    );
}
