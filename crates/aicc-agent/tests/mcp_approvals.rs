//! Operator approvals through `aicc mcp`, driven by the official MCP Python
//! SDK (tests/mcp/host.py --steps approval) against the whole bridge
//! in-process, with tokens: the adapter's own session is actuate scope, the
//! operator's admin. A `move` longer than 0.1 m waits for approval. A host
//! whose user can be asked (elicitation) decides it; otherwise another
//! admin session does. An admin session of the test's own watches the
//! core's `approval` events (the audit) and checks them; the robot's own
//! pose and published velocities say whether anything moved.
mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::MovingBridge;

const AGENT_TOKEN: &str = "agent-actuate-token-5e1d";
const OPERATOR_TOKEN: &str = "operator-admin-token-a93f";
const HOST_TIME_LIMIT: Duration = Duration::from_secs(120);

fn bridge() -> MovingBridge {
    let config = support::config_with(
        2.0,
        "    approvals:\n      move_longer_than_m: 0.1\n      timeout_s: 60.0\n",
    );
    support::start_with_tokens(
        config,
        &[("AICC_OPERATOR_TOKEN", OPERATOR_TOKEN), ("AICC_TOKEN", AGENT_TOKEN)],
    )
}

/// What the watching admin session does when a call starts waiting.
#[derive(Clone, Copy, PartialEq)]
enum OnWaiting {
    Nothing,
    Approve,
}

/// An admin session of the test's own, on a thread: collects the core's
/// `approval` events and, if told, approves each call that starts waiting.
struct Watcher {
    /// How many decisions to wait for before stopping; MAX: keep going.
    want: Arc<AtomicUsize>,
    thread: std::thread::JoinHandle<(String, Vec<Value>)>,
}

impl Watcher {
    fn start(port: u16, on_waiting: OnWaiting) -> Self {
        let want = Arc::new(AtomicUsize::new(usize::MAX));
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let wanted = want.clone();
        let thread = std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let stream = aicc_agent::client::transport::connect("127.0.0.1", port, None, Duration::from_secs(5)).await.unwrap();
                let options = aicc_agent::client::SessionOptions { token: Some(OPERATOR_TOKEN.into()), subscribe: Some(vec!["approval".into()]), ..Default::default() };
                let mut session = aicc_agent::client::Session::open(stream, options).await.expect("the watcher's admin session");
                let own_id = session.session_id().unwrap().to_string();
                ready_tx.send(()).unwrap();
                let mut seen: Vec<Value> = Vec::new();
                let mut give_up: Option<Instant> = None;
                loop {
                    let want = wanted.load(Ordering::Relaxed);
                    if want != usize::MAX {
                        // Events sent just before the host ended may still be on the way.
                        let decided = seen.iter().filter(|e| e["decision"] != "awaiting").count();
                        if decided >= want || Instant::now() > *give_up.get_or_insert_with(|| Instant::now() + Duration::from_secs(20)) {
                            break;
                        }
                    }
                    let Some(event) = session.next_event(Some(Instant::now() + Duration::from_millis(100))).await.expect("the watcher's session") else { continue };
                    if event.topic != "approval" {
                        continue;
                    }
                    let payload = event.message["payload"].clone();
                    if on_waiting == OnWaiting::Approve && payload["decision"] == "awaiting" {
                        let approved = session.call("approve", &json!({ "approval_id": payload["approval_id"], "reason": "approved by the test's operator" })).await.expect("approve");
                        assert_eq!(approved.output["decision"], "approved", "{}", approved.output);
                    }
                    seen.push(payload);
                }
                let _ = session.close().await;
                (own_id, seen)
            })
        });
        ready.recv().expect("the watcher's session opens");
        Watcher { want, thread }
    }

    /// Its session id and the `approval` events it saw, once it has seen
    /// `decisions` decisions (or waited long for them: the caller checks).
    fn finish(self, decisions: usize) -> (String, Vec<Value>) {
        self.want.store(decisions, Ordering::Relaxed);
        self.thread.join().expect("the watcher")
    }
}

/// Runs host.py --steps approval against `aicc mcp` (the agent's token,
/// and the operator's when `operator` is set); returns its steps.
fn run_host(
    bridge: &MovingBridge,
    elicit: &str,
    operator: bool,
) -> std::collections::HashMap<String, Value> {
    let mut command = Command::new(support::mcp_python());
    command
        .arg(support::host_script())
        .args(["stdio", "--steps", "approval", "--elicit", elicit, "--"])
        .arg(env!("CARGO_BIN_EXE_aicc"))
        .args(["--port", &bridge.port.to_string(), "--token-env", "AICC_TEST_AGENT_TOKEN", "mcp"])
        .env("AICC_TEST_AGENT_TOKEN", AGENT_TOKEN);
    if operator {
        command
            .args(["--operator-token-env", "AICC_TEST_OPERATOR_TOKEN"])
            .env("AICC_TEST_OPERATOR_TOKEN", OPERATOR_TOKEN);
    }
    let mut host = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the Python host starts");
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let pid = host.id();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(HOST_TIME_LIMIT)
        {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    });
    let mut steps = std::collections::HashMap::new();
    for line in BufReader::new(host.stdout.take().unwrap()).lines() {
        let line = line.expect("the host's output");
        let step: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("not a JSON line from the host: {line}"));
        steps.insert(step["step"].as_str().unwrap().to_string(), step);
    }
    let status = host.wait().unwrap();
    drop(done);
    assert!(
        status.success(),
        "the host failed ({status}); it got as far as {:?}",
        steps.keys().collect::<Vec<_>>()
    );
    assert!(
        steps.contains_key("done"),
        "the host did not finish: {:?}",
        steps.keys().collect::<Vec<_>>()
    );
    steps
}

fn travelled(moved: &Value) -> f64 {
    moved["x_after"].as_f64().unwrap() - moved["x_before"].as_f64().unwrap()
}

fn messages(moved: &Value) -> Vec<String> {
    moved["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["message"].as_str().map(str::to_owned))
        .collect()
}

/// The decisions among the watcher's `approval` events (not "awaiting").
fn decisions(seen: &[Value]) -> Vec<&Value> {
    seen.iter().filter(|e| e["decision"] != "awaiting").collect()
}

#[test]
fn the_host_s_user_approves_through_elicitation_and_the_move_runs() {
    let bridge = bridge();
    let watcher = Watcher::start(bridge.port, OnWaiting::Nothing);
    let steps = run_host(&bridge, "accept", true);
    let (watcher_id, seen) = watcher.finish(1);
    let moved = &steps["approval_move"];
    assert_eq!(moved["result"]["isError"], false, "{moved}");

    let asked = moved["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "one question: {asked:?}");
    let message = asked[0]["message"].as_str().unwrap();
    assert!(
        message.contains("`move`")
            && message.contains(r#""forward":0.3"#)
            && message.contains("move_longer_than_m"),
        "the question names the tool, its input and the reason: {message}"
    );
    let schema = &asked[0]["requestedSchema"];
    assert_eq!(
        (
            schema["properties"]["approve"]["type"].as_str(),
            schema["properties"]["reason"]["type"].as_str()
        ),
        (Some("boolean"), Some("string")),
        "{schema}"
    );
    assert!(
        messages(moved).iter().any(|m| m.contains("host's user is asked")),
        "the progress said so: {:?}",
        messages(moved)
    );

    let travelled = travelled(moved);
    assert!((travelled - 0.3).abs() < 0.03, "the approved move ran: {travelled} m, not 0.3");
    assert!((bridge.pose().x - 0.3).abs() < 0.03, "the robot's own pose: {:?}", bridge.pose());
    assert_eq!(bridge.last_velocity().map(|(v, _)| v), Some(0.0), "the base was left stopped");

    let decided = decisions(&seen);
    assert_eq!(decided.len(), 1, "one decision: {seen:?}");
    let decision = decided[0];
    assert_eq!(
        (decision["decision"].as_str(), decision["tool"].as_str()),
        (Some("approved"), Some("move")),
        "{decision}"
    );
    assert_eq!(
        decision["reason"], "approved by the MCP host's user: the path is clear",
        "{decision}"
    );
    let by = decision["by"].as_str().unwrap();
    assert_ne!(
        Some(by),
        decision["session"].as_str(),
        "the agent's own session did not approve its call: {decision}"
    );
    assert!(
        !watcher_id.starts_with(by),
        "the adapter's operator session decided, not the watcher: {decision}"
    );
}

#[test]
fn the_host_s_user_declines_and_nothing_moves() {
    let bridge = bridge();
    for answer in ["decline", "reject"] {
        let watcher = Watcher::start(bridge.port, OnWaiting::Nothing);
        let steps = run_host(&bridge, answer, true);
        let (_, seen) = watcher.finish(1);
        let moved = &steps["approval_move"];
        let result = &moved["result"];
        assert_eq!(result["isError"], true, "{answer}: {moved}");
        let error = &result["structuredContent"]["error"];
        assert_eq!(
            (error["code"].as_str(), error["retryable"].as_bool()),
            (Some("execution_failed"), Some(false)),
            "{answer}: {error}"
        );
        assert!(
            error["message"].as_str().unwrap().contains("MCP host's user declined"),
            "{answer}: {error}"
        );
        assert_eq!(moved["elicitations"].as_array().unwrap().len(), 1, "{answer}: {moved}");
        let decided = decisions(&seen);
        assert_eq!(decided.len(), 1, "{answer}: {seen:?}");
        assert_eq!(decided[0]["decision"], "denied", "{answer}: {}", decided[0]);
        assert!(
            travelled(moved).abs() < 0.005,
            "{answer}: nothing moved, but proprioception says {} m",
            travelled(moved)
        );
    }
    assert!(bridge.pose().x.abs() < 0.005, "the robot's own pose: {:?}", bridge.pose());
    assert!(
        bridge
            .robot
            .actuators
            .velocities()
            .iter()
            .all(|v| v.linear_mps == 0.0 && v.angular_radps == 0.0),
        "no velocity but zero was published: {:?}",
        bridge.robot.actuators.velocities()
    );
}

#[test]
fn a_host_that_cannot_be_asked_leaves_the_call_to_another_operator() {
    let bridge = bridge();
    // No elicitation capability (an operator token is set): not asked.
    // Elicitation but no operator token: not asked either.
    for (elicit, operator) in [("none", true), ("accept", false)] {
        let watcher = Watcher::start(bridge.port, OnWaiting::Approve);
        let started_at = bridge.pose().x;
        let steps = run_host(&bridge, elicit, operator);
        let (watcher_id, seen) = watcher.finish(1);
        let moved = &steps["approval_move"];
        assert_eq!(moved["result"]["isError"], false, "{elicit}: {moved}");
        assert_eq!(moved["elicitations"], json!([]), "{elicit}: the host was asked nothing");
        assert!(
            messages(moved).iter().any(|m| m.starts_with("awaiting an operator's approval")),
            "{elicit}: {:?}",
            messages(moved)
        );
        let decided = decisions(&seen);
        assert_eq!(decided.len(), 1, "{elicit}: {seen:?}");
        assert_eq!(decided[0]["decision"], "approved", "{elicit}: {}", decided[0]);
        assert!(
            watcher_id.starts_with(decided[0]["by"].as_str().unwrap()),
            "{elicit}: the other admin session decided: {}",
            decided[0]
        );
        let travelled = bridge.pose().x - started_at;
        assert!((travelled - 0.3).abs() < 0.03, "{elicit}: the approved move ran: {travelled} m");
    }
}
