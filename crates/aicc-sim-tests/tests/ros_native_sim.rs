//! The bridge as a ROS user runs it: started with ROS arguments (a
//! remapped node name and namespace, a parameter file, `-p` overrides) and
//! tuned with the parameter services, checked with an rclpy client written
//! against rcl_interfaces (what `ros2 param` does).
mod support;

use std::process::Command;

use serde_json::{json, Value};
use support::{repo_root, ros_environment, start_bridge, AiccClient};

/// Runs the rclpy parameter client against `node`; returns what it saw.
fn param_client(node: &str) -> Value {
    ros_environment();
    let root = repo_root();
    let output = Command::new(root.join("scripts/ros-env"))
        .arg("python3")
        .arg(root.join("crates/aicc-sim-tests/py/param_client.py"))
        .arg(node)
        .output()
        .expect("running the rclpy parameter client");
    assert!(output.status.success(), "the parameter client failed:\n{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|e| panic!("the client prints JSON ({e}): {stdout}"))
}

#[test]
fn parameters_come_from_files_and_overrides_under_the_remapped_name_and_answer_a_ros_client() {
    let dir = std::env::temp_dir().join(format!("aicc-ros-native-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let params = dir.join("robot9.yaml");
    // A section for another node, the wildcard, and the remapped node's own (which wins).
    std::fs::write(&params, "other_node:\n  ros__parameters:\n    tick_rate_hz: 99.0\n/**:\n  ros__parameters:\n    tick_rate_hz: 12.0\n/robot9/test_bridge:\n  ros__parameters:\n    tick_rate_hz: 20.0\n").unwrap();
    let (_bridge, port) = start_bridge(&[
        "--ros-args",
        "-r",
        "__node:=test_bridge",
        "-r",
        "__ns:=/robot9",
        "--params-file",
        params.to_str().unwrap(),
        "-p",
        "world_name:=param_lab",
    ]);
    // The AICC side sees the same configuration.
    let (_client, init) = AiccClient::connect(port);
    assert_eq!((init["tick_rate_hz"].as_f64(), init["world"]["name"].as_str()), (Some(20.0), Some("param_lab")), "{init}");

    let seen = param_client("/robot9/test_bridge");
    let names: Vec<&str> = seen["names"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for name in ["tick_rate_hz", "base.max_linear_mps", "sensors.camera.topic", "safety.stop_distance_m", "security.tokens", "use_sim_time"] {
        assert!(names.contains(&name), "{name} is listed: {names:?}");
    }
    assert_eq!(seen["values"], json!({ "tick_rate_hz": 20.0, "world_name": "param_lab", "base.max_linear_mps": 0.22, "sensors.battery_low_fraction": 0.2, "use_sim_time": false }));
    let descriptors = &seen["descriptors"];
    assert_eq!(descriptors["base.max_linear_mps"]["read_only"], true);
    assert_eq!(descriptors["sensors.battery_low_fraction"]["read_only"], false);
    assert_eq!(descriptors["sensors.battery_low_fraction"]["float_range"], json!([[0.0, 1.0]]));
    assert!(descriptors["base.max_linear_mps"]["description"].as_str().unwrap().contains("top speed"), "{descriptors}");

    assert_eq!(seen["set_live"], json!({ "successful": true, "reason": "" }));
    let refused = |key: &str, needle: &str| {
        assert_eq!(seen[key]["successful"], false, "{key}: {}", seen[key]);
        assert!(seen[key]["reason"].as_str().unwrap().contains(needle), "{key}: {}", seen[key]);
    };
    refused("set_read_only", "read-only while the bridge runs");
    refused("set_wrong_type", "is a double, got a string");
    refused("set_out_of_range", "outside [0, 1]");
    refused("set_unknown", "does not exist");
    assert_eq!(seen["after"], json!([0.3, 0.22]), "the live value set, the refused ones unchanged");
}

#[test]
fn a_bad_override_is_refused_at_start_naming_the_parameter() {
    ros_environment();
    let output = Command::new(support::binary("aicc-ros2"))
        .current_dir(repo_root())
        .args(["--listen", "127.0.0.1:0", "--ros-args", "-p", "base.max_linear_mps:=-1.0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("base.max_linear_mps must be a positive number"), "{stderr}");
    let output = Command::new(support::binary("aicc-ros2"))
        .current_dir(repo_root())
        .args(["--listen", "127.0.0.1:0", "--ros-args", "-p", "base.max_lineer_mps:=0.1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("parameter base.max_lineer_mps (--ros-args -p): no such parameter"));
}
