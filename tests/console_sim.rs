//! The operator's console in a real headless browser (Debian's Chromium,
//! driven by playwright-core: tests/console/driver.mjs), against the real
//! bridge beside the simulated robot. What a person at the page does, and
//! what the robot did, on the simulator's ground truth and on /cmd_vel as
//! a ROS subscriber sees it:
//! - the page refuses without the token, and a wrong token; loads with it;
//! - the live camera updates; the picture an agent was given is shown;
//! - a move that needs approval appears, is approved by a click, and the
//!   robot moves; a denied one leaves the robot where it was;
//! - STOP during a move brings /cmd_vel to zero within 200 ms of the click
//!   (the console's promise) and holds the robot until released;
//! - a forged approval is refused; a page flooding the console is
//!   throttled while the agent's calls are served.
//!
//! Screenshots: target/console/ (the README shows one). Setup:
//! scripts/setup-browser.sh (scripts/test.sh runs it).
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use support::{
    repo_root, start_bridge_with_console, start_sim, AiccClient, CmdVelRecorder, GroundTruth,
    TruthSpeed,
};

const ADMIN_TOKEN: &str = "console-admin-token-5521";
const AGENT_TOKEN: &str = "console-agent-token-8830";
/// A move longer than this waits for the operator in this test.
const APPROVAL_LONGER_THAN_M: f64 = 0.5;
/// STOP's promise: /cmd_vel at zero this soon after the click.
const STOP_TO_ZERO: Duration = Duration::from_millis(200);

/// The page driver: one command in, one answer out.
struct Browser {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Browser {
    fn start(url: &str, screenshots: &std::path::Path) -> Self {
        let root = repo_root();
        let playwright = root.join(".deps/browser/node_modules/playwright-core/index.mjs");
        assert!(
            playwright.exists(),
            "{} is missing: run scripts/setup-browser.sh (scripts/test.sh does)",
            playwright.display()
        );
        assert!(
            std::path::Path::new("/usr/bin/chromium").exists(),
            "/usr/bin/chromium is missing: run scripts/setup-browser.sh"
        );
        let mut child = Command::new("node")
            .arg(root.join("tests/console/driver.mjs"))
            .arg(url)
            .arg(screenshots)
            .env("PLAYWRIGHT_CORE", &playwright)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting node (scripts/setup-browser.sh installs it)");
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Browser { child, input, output }
    }

    fn send(&mut self, command: Value) -> Value {
        writeln!(self.input, "{command}").expect("writing to the page driver");
        let mut line = String::new();
        self.output.read_line(&mut line).expect("reading the page driver");
        let answer: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the page driver answered {line:?} to {command} ({e})"));
        assert_eq!(
            answer["ok"],
            true,
            "the page driver failed {command}: {}",
            answer["error"].as_str().unwrap_or_default()
        );
        answer
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.input, "{}", json!({ "cmd": "close" }));
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
    }
}

/// An agent with the actuate token, its session open and sensors flowing.
fn agent(port: u16) -> AiccClient {
    let mut client = AiccClient::connect_raw(port);
    client.send_line(&json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": "hello", "auth": { "token": AGENT_TOKEN } }).to_string());
    let init = client.read_until("session_init");
    assert_eq!(init["type"], "session_init", "{init}");
    let ready =
        client.call_when_ready("ready", "proprioception", json!({}), Duration::from_secs(60));
    assert_eq!(ready["ok"], true, "the bridge never served proprioception: {ready}");
    client
}

/// `tool` called on another thread (the call waits for the operator).
fn call_in_thread(
    mut client: AiccClient,
    call_id: &'static str,
    tool: &'static str,
    input: Value,
) -> thread::JoinHandle<(AiccClient, Value)> {
    thread::spawn(move || {
        let result = client.call(call_id, tool, input);
        (client, result)
    })
}

/// The instant on this process's monotonic clock of a wall-clock time in ms.
fn instant_of_wall_ms(wall_ms: u64) -> Instant {
    let now_wall_ms = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    Instant::now() - Duration::from_millis(now_wall_ms.saturating_sub(wall_ms))
}

fn distance(a: (f64, f64, f64), b: (f64, f64, f64)) -> f64 {
    (a.0 - b.0).hypot(a.1 - b.1)
}

#[test]
fn the_operator_watches_approves_denies_and_stops_from_a_real_browser() {
    let screenshots = repo_root().join("target/console");
    std::fs::create_dir_all(&screenshots).unwrap();
    let _sim = start_sim(&[]);
    let truth = GroundTruth::subscribe();
    let speed = TruthSpeed::subscribe();
    let cmd_vel = CmdVelRecorder::subscribe();
    let approval_rule = format!("approvals.move_longer_than_m:={APPROVAL_LONGER_THAN_M}");
    let (_bridge, port, console_port, log) = start_bridge_with_console(
        &["--config", "config/sim.yaml", "--ros-args", "-p", &approval_rule],
        &[("AICC_OPERATOR_TOKEN", ADMIN_TOKEN), ("AICC_TOKEN", AGENT_TOKEN)],
    );
    let client = agent(port);
    let url = format!("http://127.0.0.1:{console_port}");
    let mut browser = Browser::start(&url, &screenshots);

    // Without the token: the login form, and every endpoint refused.
    let opened = browser.send(json!({ "cmd": "open" }));
    assert_eq!(
        (opened["status"].as_u64(), opened["login_form"].as_u64(), opened["stop_button"].as_u64()),
        (Some(401), Some(1), Some(0)),
        "{opened}"
    );
    for path in ["/events", "/camera.jpg", "/api/stop", "/api/approve"] {
        assert_eq!(opened["api"][path], 401, "{path} without a console session: {opened}");
    }
    let wrong = browser.send(json!({ "cmd": "login", "token": AGENT_TOKEN }));
    assert_eq!(
        (wrong["status"].as_u64(), wrong["loaded"].as_bool()),
        (Some(401), Some(false)),
        "an actuate token is not an admin token: {wrong}"
    );
    assert!(
        wrong["refused"].as_str().unwrap_or_default().contains("not an admin token"),
        "{wrong}"
    );
    let logged_in = browser.send(json!({ "cmd": "login", "token": ADMIN_TOKEN }));
    assert_eq!(
        (logged_in["status"].as_u64(), logged_in["loaded"].as_bool()),
        (Some(200), Some(true)),
        "{logged_in}"
    );

    // The live camera updates.
    let camera = browser.send(json!({ "cmd": "camera", "updates": 2, "timeout_ms": 15000 }));
    let frames = camera["frames"].as_array().unwrap();
    assert!(frames.len() >= 3, "the live camera did not update twice in 15 s: {camera}");
    // The simulator's default camera, shown at its own size (the console scales only above 640x480).
    assert_eq!(
        (frames[0]["width"].as_u64(), frames[0]["height"].as_u64()),
        (Some(320), Some(240)),
        "{camera}"
    );
    println!(
        "console: live camera frames seen {:?}",
        frames.iter().map(|f| f["seq"].clone()).collect::<Vec<_>>()
    );

    // The picture an agent is given is shown as it got it.
    let mut client = client;
    let vision = client.call("look", "vision", json!({ "max_width": 160 }));
    assert_eq!(vision["ok"], true, "{vision}");
    let shown = browser.send(json!({ "cmd": "agent_frame", "timeout_ms": 10000 }));
    assert_eq!(
        (shown["width"].as_u64(), shown["height"].as_u64()),
        (vision["output"]["width"].as_u64(), vision["output"]["height"].as_u64()),
        "{shown}"
    );
    assert!(shown["info"].as_str().unwrap().contains("vision, call look"), "{shown}");

    // A move that needs approval waits; a click approves it; the robot moves.
    let before = truth.settled_pose();
    let waiting = call_in_thread(client, "long-move", "move", json!({ "forward": 0.6 }));
    let row = browser.send(json!({ "cmd": "wait_approval", "tool": "move", "timeout_ms": 10000 }));
    assert!(
        row["text"].as_str().unwrap().contains("longer than"),
        "the row says why it waits: {row}"
    );
    browser.send(json!({ "cmd": "screenshot", "name": "console-approval.png" }));
    let decided = browser
        .send(json!({ "cmd": "decide", "approval_id": row["approval_id"], "button": "approve" }));
    assert!(decided["result"].as_str().unwrap().contains("done"), "{decided}");
    let (client, moved) = waiting.join().unwrap();
    assert_eq!(moved["ok"], true, "the approved move: {moved}");
    let after = truth.settled_pose();
    let travelled = distance(before, after);
    println!("console: approved move travelled {travelled:.3} m (asked 0.6 m)");
    assert!(
        (travelled - 0.6).abs() < 0.1,
        "the approved move travelled {travelled:.3} m on the ground truth"
    );

    // A denied one: nothing moves, and the agent is told, not retryable.
    let waiting = call_in_thread(client, "denied-move", "move", json!({ "forward": 0.6 }));
    let row = browser.send(json!({ "cmd": "wait_approval", "tool": "move", "timeout_ms": 10000 }));
    browser.send(json!({ "cmd": "decide", "approval_id": row["approval_id"], "button": "deny" }));
    let (client, denied) = waiting.join().unwrap();
    assert_eq!(
        (denied["ok"].as_bool(), denied["error"]["retryable"].as_bool()),
        (Some(false), Some(false)),
        "{denied}"
    );
    let still = truth.settled_pose();
    assert!(
        distance(after, still) < 0.01,
        "a denied move moved the robot {:.3} m",
        distance(after, still)
    );
    // The same approval again (a replay) is refused by the core, and logged.
    let replayed = browser.send(json!({ "cmd": "post", "path": "/api/approve", "body": { "approval_id": row["approval_id"] } }));
    assert_eq!(replayed["status"], 409, "a replayed approval: {replayed}");
    let forged = browser.send(json!({ "cmd": "post", "path": "/api/approve", "body": { "approval_id": "not-a-waiting-call" } }));
    assert_eq!(forged["status"], 409, "a forged approval: {forged}");
    let no_header = browser.send(json!({ "cmd": "post", "path": "/api/stop", "body": {}, "headers": { "Content-Type": "application/json" } }));
    assert_eq!(
        no_header["status"], 403,
        "an action without the console's header (a form of another site): {no_header}"
    );

    // STOP during a move: /cmd_vel at zero within 200 ms of the click.
    let moving = call_in_thread(client, "stopped-move", "move", json!({ "forward": 0.45 }));
    let deadline = Instant::now() + Duration::from_secs(10);
    while speed.latest().is_none_or(|(v, _)| v < 0.1) {
        assert!(Instant::now() < deadline, "the robot never reached 0.1 m/s");
        thread::sleep(Duration::from_millis(10));
    }
    let stopped = browser.send(json!({ "cmd": "stop" }));
    let clicked = instant_of_wall_ms(stopped["clicked_at_ms"].as_u64().expect("click time"));
    let (client, move_result) = moving.join().unwrap();
    thread::sleep(Duration::from_millis(300));
    let zero = cmd_vel.first_zero_after(clicked).expect("no zero command on /cmd_vel after STOP");
    let latency = zero.saturating_duration_since(clicked);
    println!(
        "console: STOP click to zero on /cmd_vel {:.1} ms (move result: {})",
        latency.as_secs_f64() * 1000.0,
        move_result["error"]["message"]
    );
    assert!(
        latency <= STOP_TO_ZERO,
        "STOP to zero took {:.1} ms (promise: {} ms)",
        latency.as_secs_f64() * 1000.0,
        STOP_TO_ZERO.as_millis()
    );
    assert_eq!(move_result["ok"], false, "the stopped move ends failed: {move_result}");
    assert_eq!(stopped["held"], true, "{stopped}");
    browser.send(json!({ "cmd": "screenshot", "name": "console-stopped.png" }));

    // Held: the next actuator call waits for the operator; release ends the hold.
    let held_call = call_in_thread(client, "held-move", "move", json!({ "forward": 0.05 }));
    let row = browser.send(json!({ "cmd": "wait_approval", "tool": "move", "timeout_ms": 10000 }));
    assert!(row["text"].as_str().unwrap().contains("held by an operator"), "{row}");
    browser.send(json!({ "cmd": "decide", "approval_id": row["approval_id"], "button": "deny" }));
    let (mut client, held_result) = held_call.join().unwrap();
    assert_eq!(held_result["ok"], false, "{held_result}");
    let released = browser.send(json!({ "cmd": "release" }));
    assert_eq!(
        (released["held"].as_bool(), released["approval_mode"].as_str()),
        (Some(false), Some("")),
        "{released}"
    );
    let short = client.call("after-release", "move", json!({ "forward": 0.05 }));
    assert_eq!(short["ok"], true, "after release a short move runs without approval: {short}");

    // What the page showed: calls, results and the approvals, before the flood fills it.
    let results = browser.send(json!({ "cmd": "stream", "kind": "result" }));
    assert!(
        results["entries"].as_array().unwrap().iter().any(|e| e.as_str().unwrap().contains("move")),
        "{results}"
    );
    let approvals = browser.send(json!({ "cmd": "stream", "kind": "approval" }));
    assert!(approvals["entries"].as_array().unwrap().len() >= 3, "{approvals}");
    browser.send(json!({ "cmd": "screenshot", "name": "console.png" }));

    // A flooding page is throttled; the agent is served meanwhile.
    let agent_during_flood = thread::spawn(move || {
        let mut slowest = Duration::ZERO;
        for n in 0..20 {
            let started = Instant::now();
            let served = client.call(&format!("during-flood-{n}"), "proprioception", json!({}));
            assert_eq!(served["ok"], true, "{served}");
            slowest = slowest.max(started.elapsed());
            thread::sleep(Duration::from_millis(100));
        }
        slowest
    });
    let flood = browser.send(json!({ "cmd": "flood", "path": "/api/approve", "count": 1500, "body": { "approval_id": "flood" } }));
    let slowest = agent_during_flood.join().expect("the agent was served during the flood");
    // Throttled: refused by the request rate (429) or, past the console's
    // connections per address, at the door (503).
    let throttled = flood["statuses"]["429"].as_u64().unwrap_or(0)
        + flood["statuses"]["503"].as_u64().unwrap_or(0);
    println!("console: flood of 1500 approvals: {} in {} ms; the agent's slowest proprioception meanwhile {:.1} ms", flood["statuses"], flood["elapsed_ms"], slowest.as_secs_f64() * 1000.0);
    assert!(throttled > 0, "nothing was throttled: {flood}");

    let errors = browser.send(json!({ "cmd": "errors" }));
    assert_eq!(errors["errors"], json!([]), "the page raised errors");
    let log = log.lock().unwrap().clone();
    assert!(
        log.contains("console: the core refused the operator's request"),
        "refusals are logged"
    );
    assert!(
        log.contains("console: a login with a token that is not an admin token was refused"),
        "the wrong token is logged"
    );
}
