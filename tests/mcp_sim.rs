//! `aicc mcp` driven by the official MCP Python SDK (the host in
//! crates/aicc-agent/tests/mcp/host.py, over stdio) against the real bridge
//! and the simulated robot: initialize, tools/list, proprioception, a
//! vision picture that decodes at its stated size, a 0.3 m move with
//! progress checked on ground truth, an MCP cancellation mid-move that
//! stops the robot (ground truth), and an invalid input answered as isError
//! naming the field. One simulator and one bridge for all of it.
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
use support::{start_bridge, start_sim, GroundTruth, TruthSpeed};

fn distance(a: (f64, f64, f64), b: (f64, f64, f64)) -> f64 {
    (b.0 - a.0).hypot(b.1 - a.1)
}

/// Waits until the session may call every one of `tools` (their sensors seen).
fn wait_for_tools(port: u16, tools: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let output = Command::new(support::binary("aicc"))
            .args(["--port", &port.to_string(), "tools"])
            .output()
            .expect("aicc runs");
        let table = String::from_utf8_lossy(&output.stdout).into_owned();
        let usable = |id: &str| {
            table.lines().any(|l| {
                l.split_whitespace().next() == Some(id)
                    && l.split_whitespace().nth(3) == Some("yes")
            })
        };
        if tools.iter().all(|id| usable(id)) {
            return;
        }
        assert!(Instant::now() < deadline, "tools {tools:?} not all usable within 60 s:\n{table}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn an_mcp_host_drives_the_simulated_robot_through_aicc_mcp() {
    let _sim = start_sim(&[]);
    let (_bridge, port) = start_bridge(&["--config", "config/sim.yaml"]);
    let truth = GroundTruth::subscribe();
    let speed = TruthSpeed::subscribe();
    wait_for_tools(port, &["proprioception", "vision", "move"]);

    let python = support::repo_root().join(".deps/mcp-venv/bin/python");
    assert!(
        python.exists(),
        "the MCP Python SDK is not installed at {}: run `bash scripts/setup-mcp.sh`",
        python.display()
    );
    let host = Command::new(python)
        .arg(support::repo_root().join("crates/aicc-agent/tests/mcp/host.py"))
        .args(["stdio", "--steps", "sim", "--"])
        .arg(support::binary("aicc"))
        .args(["--port", &port.to_string(), "mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the Python host starts");
    // Stopped (and with it aicc mcp, whose stdin closes) if a check fails.
    let mut host = support::ChildGuard::new("the MCP host", host);
    let mut stdin = host.child.stdin.take().unwrap();
    let mut steps: HashMap<String, Value> = HashMap::new();
    let mut poses = HashMap::new();
    let mut cancel_seen = None;
    let started = Instant::now();
    for line in BufReader::new(host.child.stdout.take().unwrap()).lines() {
        let line = line.expect("the host's output");
        let step: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("not a JSON line from the host: {line}"));
        assert!(started.elapsed() < Duration::from_secs(180), "the host is taking too long");
        match step.get("wait").and_then(Value::as_str) {
            Some(name) => {
                poses.insert(name.to_string(), truth.settled_pose());
                writeln!(stdin, "go").unwrap();
            }
            None => {
                let name = step["step"].as_str().unwrap().to_string();
                if name == "cancel" {
                    cancel_seen = Some(Instant::now());
                }
                steps.insert(name, step);
            }
        }
    }
    let status = host.child.wait().unwrap();
    assert!(
        status.success() && steps.contains_key("done"),
        "the host failed ({status}) after {:?}",
        steps.keys().collect::<Vec<_>>()
    );

    let init = &steps["initialize"];
    assert_eq!(init["server"], "aicc-mcp", "{init}");
    let tools = steps["tools"]["tools"].as_array().unwrap();
    assert_eq!(steps["tools"]["schema_errors"], serde_json::json!([]));
    for wanted in ["proprioception", "vision", "move", "events"] {
        assert!(tools.iter().any(|t| t["name"] == wanted), "{wanted} not listed");
    }

    let proprioception = &steps["proprioception"]["result"];
    assert_eq!(proprioception["isError"], false, "{proprioception}");
    assert!(proprioception["structuredContent"]["position_m"]["x"].is_number(), "{proprioception}");

    let vision = &steps["vision"]["result"];
    let image = vision["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "image")
        .expect("image content");
    assert_eq!(image["mimeType"], "image/png");
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(image["data"].as_str().unwrap()).unwrap();
    let picture = image::load_from_memory(&bytes).expect("the picture decodes");
    let stated = &vision["structuredContent"];
    assert_eq!(
        (u64::from(picture.width()), u64::from(picture.height())),
        (stated["width"].as_u64().unwrap(), stated["height"].as_u64().unwrap())
    );
    assert!(picture.width() <= 160, "max_width honoured");

    let moved = &steps["move"];
    assert_eq!(moved["result"]["isError"], false, "{moved}");
    let travelled = distance(poses["before_move"], poses["after_move"]);
    assert!(
        (travelled - 0.3).abs() < 0.05,
        "ground truth: the robot travelled {travelled} m for a 0.3 m move"
    );
    let progress: Vec<f64> = moved["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(
        progress.len() >= 3 && progress.windows(2).all(|w| w[1] > w[0]),
        "increasing progress during the move: {progress:?}"
    );
    // Progress is reported while the robot drives (the result says the end).
    let last = moved["progress"].as_array().unwrap().last().unwrap().clone();
    assert!(
        last["progress"].as_f64().unwrap() <= travelled + 0.02,
        "progress ({last}) beyond the distance travelled ({travelled} m)"
    );
    assert!(
        (last["total"].as_f64().unwrap() - 0.3).abs() < 0.01,
        "the total is the move's distance: {last}"
    );

    let cancel = &steps["cancel"];
    assert_eq!(cancel["finished_before_cancel"], false, "{cancel}");
    let cancelled_after = distance(poses["after_move"], poses["after_cancel"]);
    assert!(
        (0.1..1.2).contains(&cancelled_after),
        "ground truth: the cancelled 1.5 m move went {cancelled_after} m"
    );
    let cancelled = cancel_seen.unwrap();
    let still = speed
        .still_from(cancelled - Duration::from_millis(500), 0.02, 0.1)
        .expect("the robot came to rest after the cancel");
    assert!(
        still.saturating_duration_since(cancelled) < Duration::from_secs(2),
        "the robot stopped {:?} after the cancel",
        still.saturating_duration_since(cancelled)
    );

    let invalid = &steps["invalid_input"]["result"];
    assert_eq!(
        (invalid["isError"].as_bool(), invalid["structuredContent"]["error"]["code"].as_str()),
        (Some(true), Some("invalid_input")),
        "{invalid}"
    );
    let text: String =
        invalid["content"].as_array().unwrap().iter().filter_map(|c| c["text"].as_str()).collect();
    assert!(text.contains("forward"), "the error names the field: {text}");
    eprintln!("mcp_sim: host ran {:.1} s", started.elapsed().as_secs_f64());
}
