//! The `aicc` command against the real bridge and the simulated robot:
//! the tools table, calls (the robot really moves), a refused tool, an AICC
//! error, tick events in order, a vision picture written as PNG, and the
//! token handshake. One test function, so that one simulator runs.
mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::{start_bridge, start_bridge_with, start_sim, GroundTruth};

/// Runs `aicc --port PORT ARGS...` with `token` (or none) in AICC_TOKEN.
fn aicc(port: u16, args: &[&str], token: Option<&str>) -> Output {
    let mut command = Command::new(support::binary("aicc"));
    command.args(["--port", &port.to_string()]).args(args).env_remove("AICC_TOKEN");
    if let Some(token) = token {
        command.env("AICC_TOKEN", token);
    }
    command.output().expect("aicc runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs aicc, requires `exit`, returns stdout and stderr.
fn expect_exit(port: u16, args: &[&str], token: Option<&str>, exit: i32) -> (String, String) {
    let output = aicc(port, args, token);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(exit),
        "aicc {args:?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    (stdout, stderr)
}

#[test]
fn aicc_drives_the_simulated_robot_through_the_bridge() {
    let _sim = start_sim(&[]);
    let (_bridge, port) = start_bridge(&["--config", "config/sim.yaml"]);
    let truth = GroundTruth::subscribe();

    // A tool whose sensor has not published yet is not granted: wait for
    // the robot's topics to be seen.
    let mut table = String::new();
    for _ in 0..120 {
        table = expect_exit(port, &["tools"], None, 0).0;
        if ["move", "vision"].iter().all(|id| {
            table.lines().any(|l| {
                l.starts_with(&format!("{id} ")) && l.split_whitespace().nth(3) == Some("yes")
            })
        }) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let row = |id: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no row for {id}:\n{table}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(row("move")[..4], ["move", "actuator", "can_move_self", "yes"]);
    assert_eq!(row("vision")[..4], ["vision", "sensor", "can_observe_world", "yes"]);

    let (pose, _) = expect_exit(port, &["call", "proprioception"], None, 0);
    let pose: Value = serde_json::from_str(&pose).expect("the output is JSON");
    assert!(pose["position_m"]["x"].is_number(), "{pose}");

    let (x0, y0, _) = truth.settled_pose();
    let (moved, _) = expect_exit(port, &["call", "move", r#"{"forward":0.3}"#], None, 0);
    let moved: Value = serde_json::from_str(&moved).unwrap();
    let (x1, y1, _) = truth.settled_pose();
    let travelled_m = ((x1 - x0).powi(2) + (y1 - y0).powi(2)).sqrt();
    assert!(
        (travelled_m - 0.3).abs() < 0.05,
        "the robot travelled {travelled_m} m for a 0.3 m move (reported {})",
        moved["achieved"]
    );

    let (_, refused) = expect_exit(port, &["call", "teleport", "{}"], None, 2);
    assert!(refused.contains("'teleport' is not in the manifest"), "{refused}");
    let (_, invalid) = expect_exit(port, &["call", "move", r#"{"forward":"far"}"#], None, 3);
    assert!(invalid.starts_with("error invalid_input: input.forward"), "{invalid}");

    let (events, _) = expect_exit(port, &["events", "--count", "3", "--topic", "tick"], None, 0);
    let ticks: Vec<u64> = events
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["meta"]["tick"].as_u64().expect("meta.tick")
        })
        .collect();
    assert_eq!(ticks.len(), 3, "{events}");
    assert!(ticks.windows(2).all(|w| w[0] < w[1]), "ticks out of order: {ticks:?}");

    let picture_path =
        std::env::temp_dir().join(format!("aicc-cli-sim-{}.png", std::process::id()));
    let (summary, _) = expect_exit(
        port,
        &["vision", "--out", picture_path.to_str().unwrap(), r#"{"format":"png","max_width":160}"#],
        None,
        0,
    );
    let summary: Value = serde_json::from_str(&summary).unwrap();
    assert!(summary.get("png_b64").is_none(), "the base64 text is not printed");
    let picture = image::open(&picture_path).expect("a PNG was written").to_rgb8();
    assert_eq!(
        (u64::from(picture.width()), u64::from(picture.height())),
        (summary["width"].as_u64().unwrap(), summary["height"].as_u64().unwrap())
    );
    assert_eq!(picture.width(), 160);
    let _ = std::fs::remove_file(&picture_path);

    // A bridge with a token: without it the bridge says so (exit 3); with
    // it the session opens; the token is never printed.
    let (_secured, secured_port, _) = start_bridge_with(
        &["--config", "config/sim.yaml"],
        &[("AICC_TOKEN", "cli-sim-token-4711")],
    );
    let (_, unauthenticated) = expect_exit(secured_port, &["tools"], None, 3);
    assert!(unauthenticated.starts_with("error invalid_input"), "{unauthenticated}");
    let (table, warnings) = expect_exit(secured_port, &["tools"], Some("cli-sim-token-4711"), 0);
    assert!(table.contains("move"), "{table}");
    assert!(!table.contains("cli-sim-token-4711") && !warnings.contains("cli-sim-token-4711"));
}
