//! The bridge as a ROS user runs it: started with ROS arguments (a
//! remapped node name and namespace, a parameter file, `-p` overrides) and
//! tuned with the parameter services, checked with an rclpy client written
//! against rcl_interfaces (what `ros2 param` does).
mod support;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{
    repo_root, ros_environment, sim_control, start_bridge, start_bridge_with, start_sim,
    subscribe_in_thread, AiccClient,
};

/// One /diagnostics message: name, level, message of each status.
type Statuses = Vec<(String, u8, String)>;

/// Runs the rclpy parameter client against `node`; returns what it saw.
fn param_client(node: &str) -> Value {
    ros_environment();
    let root = repo_root();
    let output = Command::new(root.join("scripts/ros-env"))
        .arg("python3")
        .arg(root.join("tests/py/param_client.py"))
        .arg(node)
        .output()
        .expect("running the rclpy parameter client");
    assert!(
        output.status.success(),
        "the parameter client failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the client prints JSON ({e}): {stdout}"))
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
    assert_eq!(
        (init["tick_rate_hz"].as_f64(), init["world"]["name"].as_str()),
        (Some(20.0), Some("param_lab")),
        "{init}"
    );

    let seen = param_client("/robot9/test_bridge");
    let names: Vec<&str> =
        seen["names"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for name in [
        "tick_rate_hz",
        "base.max_linear_mps",
        "sensors.camera.topic",
        "safety.stop_distance_m",
        "security.tokens",
        "use_sim_time",
    ] {
        assert!(names.contains(&name), "{name} is listed: {names:?}");
    }
    assert_eq!(
        seen["values"],
        json!({ "tick_rate_hz": 20.0, "world_name": "param_lab", "base.max_linear_mps": 0.22, "sensors.battery_low_fraction": 0.2, "use_sim_time": false })
    );
    let descriptors = &seen["descriptors"];
    assert_eq!(descriptors["base.max_linear_mps"]["read_only"], true);
    assert_eq!(descriptors["sensors.battery_low_fraction"]["read_only"], false);
    assert_eq!(descriptors["sensors.battery_low_fraction"]["float_range"], json!([[0.0, 1.0]]));
    assert!(
        descriptors["base.max_linear_mps"]["description"].as_str().unwrap().contains("top speed"),
        "{descriptors}"
    );

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

    // Diagnostics once a second, named after the remapped node; logs on /rosout.
    let diagnostics: Arc<Mutex<Vec<(Instant, Statuses)>>> = Arc::default();
    let sink = diagnostics.clone();
    let _diagnostics = subscribe_in_thread::<r2r::diagnostic_msgs::msg::DiagnosticArray>(
        "diagnostics_reader",
        "/diagnostics",
        r2r::QosProfile::default(),
        move |msg| {
            sink.lock().unwrap().push((
                Instant::now(),
                msg.status.into_iter().map(|s| (s.name, s.level, s.message)).collect(),
            ));
        },
    );
    let logs: Arc<Mutex<Vec<(u8, String, String)>>> = Arc::default();
    let sink = logs.clone();
    let _rosout = subscribe_in_thread::<r2r::rcl_interfaces::msg::Log>(
        "rosout_reader",
        "/rosout",
        r2r::QosProfile::default().reliable().transient_local().keep_last(1000),
        move |msg| {
            sink.lock().unwrap().push((msg.level, msg.name, msg.msg));
        },
    );
    // Discovery takes a moment: count from the first report.
    let is_ours = |s: &Statuses| s.iter().any(|(n, _, _)| n == "test_bridge: bridge");
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        if let Some((at, _)) = diagnostics.lock().unwrap().iter().find(|(_, s)| is_ours(s)) {
            break *at;
        }
        assert!(Instant::now() < deadline, "no diagnostics from the bridge within 10 s");
        thread::sleep(Duration::from_millis(50));
    };
    thread::sleep(Duration::from_millis(3300).saturating_sub(first.elapsed()));
    let reports = diagnostics.lock().unwrap();
    let bridge_reports = reports
        .iter()
        .filter(|(at, s)| is_ours(s) && at.duration_since(first) <= Duration::from_millis(3300))
        .count();
    assert!(bridge_reports >= 3, "the bridge reports about once a second: {bridge_reports} reports in the 3.3 s from the first");
    let last = &reports.iter().rev().find(|(_, s)| is_ours(s)).unwrap().1;
    let names: Vec<&str> = last.iter().map(|(n, _, _)| n.as_str()).collect();
    for name in [
        "test_bridge: governor",
        "test_bridge: motion lease",
        "test_bridge: sensor odom",
        "test_bridge: sensor camera",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let odom = last.iter().find(|(n, _, _)| n == "test_bridge: sensor odom").unwrap();
    assert_eq!(
        (odom.1, odom.2.as_str()),
        (2, "nothing received on /robot9/odom"),
        "no robot: the odometry is missing, by its namespaced topic"
    );
    let logs = logs.lock().unwrap();
    assert!(
        logs.iter().any(|(level, name, msg)| *level == 20
            && name == "robot9.test_bridge"
            && msg.contains("AICC listener ready")),
        "{logs:?}"
    );
    assert!(
        logs.iter().any(|(level, _, msg)| *level == 30 && msg.contains("parameter set refused")),
        "refused sets are logged as warnings: {logs:?}"
    );
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
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("parameter base.max_lineer_mps (--ros-args -p): no such parameter"));
}

/// The latest "<node>: frames" diagnostic: level, message and values.
type FramesStatus = Arc<Mutex<Option<(u8, String, Vec<(String, String)>)>>>;

fn wait_for_frames(
    status: &FramesStatus,
    what: &str,
    timeout: Duration,
    pred: impl Fn(u8, &str) -> bool,
) -> (u8, String, Vec<(String, String)>) {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(latest) = status.lock().unwrap().clone() {
            if pred(latest.0, &latest.1) {
                return latest;
            }
            assert!(
                Instant::now() < deadline,
                "frames diagnostic never {what} within {timeout:?}; last: {latest:?}"
            );
        } else {
            assert!(Instant::now() < deadline, "no frames diagnostic within {timeout:?}");
        }
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn frames_come_from_the_robots_tf_and_a_stale_transform_is_named_in_diagnostics_and_the_refusal() {
    let _sim = start_sim(&[]);
    let (_bridge, port, _log) = start_bridge_with(&["--config", "config/sim.yaml"], &[]);
    let status: FramesStatus = Arc::default();
    let sink = status.clone();
    let _diagnostics = subscribe_in_thread::<r2r::diagnostic_msgs::msg::DiagnosticArray>(
        "frames_reader",
        "/diagnostics",
        r2r::QosProfile::default(),
        move |msg| {
            if let Some(frames) = msg.status.into_iter().find(|s| s.name == "aicc_bridge: frames") {
                *sink.lock().unwrap() = Some((
                    frames.level,
                    frames.message,
                    frames.values.into_iter().map(|kv| (kv.key, kv.value)).collect(),
                ));
            }
        },
    );
    // The simulator publishes /tf and /tf_static as a bringup does: the bridge uses them.
    let (_, message, values) =
        wait_for_frames(&status, "from TF", Duration::from_secs(15), |level, message| {
            level == 0 && message.starts_with("from TF")
        });
    let value = |key: &str| {
        values.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).unwrap_or_default()
    };
    assert_eq!(value("source"), "tf", "{values:?}");
    assert_eq!(value("depth"), "camera_optical_frame: resolved", "{values:?}");
    let frames: usize = value("frames").parse().unwrap();
    assert!(frames >= 15, "every link of the URDF and odom: {message} {values:?}");

    // The robot stops publishing /tf: its transforms go stale, and the bridge says which.
    sim_control(json!({ "pause": ["tf"] }));
    let (level, message, _) =
        wait_for_frames(&status, "stale", Duration::from_secs(10), |_, message| {
            message.contains("is stale")
        });
    assert_eq!(level, 2, "{message}");
    assert!(
        message.starts_with(
            "depth frame unresolved: transform head_pan_link -> head_tilt_link is stale"
        ),
        "{message}"
    );
    // Forward motion is held, and the refusal says why (not just "stale").
    let (mut client, _) = AiccClient::connect(port);
    thread::sleep(Duration::from_millis(1200)); // past the depth camera's 1 s obstacle max age
    let result = client.call("f1", "move", json!({ "forward": 0.1 }));
    assert_eq!(result["ok"], false, "{result}");
    let refusal = result["error"]["message"].as_str().unwrap_or_default();
    assert!(
        refusal.contains("stale obstacle sensing")
            && refusal.contains("transform head_pan_link -> head_tilt_link is stale"),
        "{refusal}"
    );

    // TF back: resolved again, and the robot moves.
    sim_control(json!({ "resume": ["tf"] }));
    wait_for_frames(&status, "recovered", Duration::from_secs(10), |level, message| {
        level == 0 && message.starts_with("from TF")
    });
    let result =
        client.call_when_ready("f2", "move", json!({ "forward": 0.05 }), Duration::from_secs(5));
    assert_eq!(result["ok"], true, "{result}");
}

/// Runs `aicc-ros2 --check` beside the simulator with `args`; returns its
/// exit code and what it printed. 8 s: the QoS and cmd_vel looks run every
/// 2 s and need discovery first, which a loaded machine slows.
fn preflight(args: &[&str]) -> (i32, String) {
    ros_environment();
    let output = Command::new(support::binary("aicc-ros2"))
        .args(["--check", "--check-seconds", "8", "--config", "config/sim.yaml"])
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("running aicc-ros2 --check");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The line of `item` in a preflight's output.
fn item_line<'a>(printed: &'a str, item: &str) -> &'a str {
    printed
        .lines()
        .find(|line| line.contains(&format!("] {item}: ")))
        .unwrap_or_else(|| panic!("no line for {item}:\n{printed}"))
}

/// The preflight against the robot its profile describes passes, every
/// item ok; with deliberate mistakes (the wrong cmd_vel type, a reliable
/// subscription against a best-effort publisher, a missing topic, a
/// missing action server) it fails, naming each and its fix.
#[test]
fn the_preflight_passes_on_the_profiles_robot_and_names_each_mistake() {
    let _sim = start_sim(&[]);
    let (code, printed) = preflight(&[]);
    println!("{printed}");
    assert_eq!(code, 0, "{printed}");
    assert!(printed.contains("AICC_CHECK passed"), "{printed}");
    for item in [
        "sensors.odom",
        "sensors.scan",
        "sensors.depth",
        "actuators.cmd_vel",
        "actuators.arm_action",
        "use_sim_time",
    ] {
        assert!(item_line(&printed, item).starts_with("[ok  ]"), "{item}:\n{printed}");
    }

    let (code, printed) = preflight(&[
        "--ros-args",
        "-p",
        "actuators.cmd_vel_stamped:=true",
        "-p",
        "sensors.scan.reliability:=reliable",
        "-p",
        "sensors.imu.topic:=no_such_imu",
        "-p",
        "actuators.arm_action:=no_such_arm/follow_joint_trajectory",
    ]);
    println!("{printed}");
    assert_eq!(code, 1, "{printed}");
    let cmd_vel = item_line(&printed, "actuators.cmd_vel");
    assert!(
        cmd_vel.starts_with("[FAIL]") && cmd_vel.contains("set it to false or auto"),
        "{cmd_vel}"
    );
    let scan = item_line(&printed, "sensors.scan");
    assert!(scan.starts_with("[FAIL]") && scan.contains("reliability: best_effort"), "{scan}");
    let imu = item_line(&printed, "sensors.imu");
    assert!(imu.starts_with("[WARN]") && imu.contains("nothing publishes /no_such_imu"), "{imu}");
    let arm = item_line(&printed, "actuators.arm_action");
    assert!(arm.starts_with("[WARN]") && arm.contains("no action server /no_such_arm"), "{arm}");
    assert!(printed.contains("AICC_CHECK failed: 2 item(s)"), "{printed}");
}
