//! The trajectory-topic fallback: the simulator serves no action for the
//! head, arm and gripper (`--controller-interface topic`, a bringup with
//! only the trajectory controllers' JointTrajectory topics), and the bridge
//! reaches them through those topics, first configured `topic`, then
//! `auto` (no action server answers: it falls back). Checked on the
//! simulator's ground truth: the joints moved where the tools said, the
//! results carry every field the tools' output schemas require (the shape
//! they have with the actions), a goal that cannot be judged reached ends
//! in a clear timeout naming the joints (and the arm is stopped), and `stop` stops an arm motion
//! part way. One test function, so that one simulator runs.
mod support;

use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{sim_control, start_bridge_with, start_sim, AiccClient, WorldTruth};

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("not a number: {value}"))
}

fn joint(world: &Value, name: &str) -> f64 {
    number(&world["joints"][name])
}

/// Ground truth a little after a motion ended.
fn world_after_motion(world: &WorldTruth) -> Value {
    world.after(Instant::now() + Duration::from_millis(100))
}

/// Calls a tool, checks it succeeded and that its output has every field
/// its output schema requires; returns the output.
fn call_ok(client: &mut AiccClient, init: &Value, id: &str, tool: &str, input: Value) -> Value {
    let result = client.call(id, tool, input.clone());
    assert_eq!(result["ok"], true, "{tool} {input}: {result}");
    let output = result["output"].clone();
    let descriptor = init["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == tool)
        .unwrap_or_else(|| panic!("{tool} not in the manifest"));
    for key in descriptor["output_schema"]["required"].as_array().expect("required fields") {
        let key = key.as_str().unwrap();
        assert!(output.get(key).is_some(), "{tool}: field {key} missing from {output}");
    }
    output
}

/// The bridge on the sim profile with every joint controller reached as `interface`.
fn bridge(interface: &str) -> (support::ChildGuard, u16, std::sync::Arc<std::sync::Mutex<String>>) {
    let params: Vec<String> = ["head", "arm", "gripper"]
        .iter()
        .map(|c| format!("actuators.{c}_interface:={interface}"))
        .collect();
    let mut args = vec!["--config", "config/sim.yaml", "--ros-args"];
    for p in &params {
        args.extend(["-p", p.as_str()]);
    }
    start_bridge_with(&args, &[])
}

#[test]
fn head_arm_and_gripper_move_through_their_trajectory_topics_without_action_servers() {
    let _sim = start_sim(&["--controller-interface", "topic"]);
    let world = WorldTruth::subscribe();

    // (1) interface: topic.
    let (mut topic_bridge, port, log) = bridge("topic");
    let (mut client, init) = AiccClient::connect(port);
    let tools: Vec<&str> =
        init["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert!(tools.contains(&"look_at") && tools.contains(&"interact"), "{tools:?}");
    let first = client.call_when_ready(
        "warmup",
        "look_at",
        json!({ "pan_deg": 0, "tilt_deg": 0 }),
        Duration::from_secs(30),
    );
    assert_eq!(first["ok"], true, "{first}");

    let started = Instant::now();
    let output =
        call_ok(&mut client, &init, "t1", "look_at", json!({ "pan_deg": 30, "tilt_deg": -15 }));
    let w = world_after_motion(&world);
    let (pan, tilt) =
        (joint(&w, "head_pan_joint").to_degrees(), joint(&w, "head_tilt_joint").to_degrees());
    println!("topic: look_at pan 30° tilt -15°: ground truth {pan:.2}° {tilt:.2}°, reported {:.2}° {:.2}°, settled {}, {:.2} s (call {:.2} s)", number(&output["actual"]["pan_deg"]), number(&output["actual"]["tilt_deg"]), output["settled"], number(&output["duration_s"]), started.elapsed().as_secs_f64());
    assert!(
        (pan - 30.0).abs() < 2.0 && (tilt + 15.0).abs() < 2.0,
        "head at pan {pan:.2}° tilt {tilt:.2}°"
    );

    let output = call_ok(&mut client, &init, "t2", "interact", json!({ "pose": "ready" }));
    let w = world_after_motion(&world);
    let ready = [0.0, -0.3, 0.6, 0.5];
    let error = ["joint1", "joint2", "joint3", "joint4"]
        .iter()
        .zip(ready)
        .map(|(n, g)| (joint(&w, n) - g).abs())
        .fold(0.0, f64::max);
    println!("topic: interact pose ready: largest ground truth joint error {error:.4} rad, outcome {}, {:.2} s", output["outcome"], number(&output["duration_s"]));
    assert!(error < 0.03, "arm {error} rad from the ready pose");

    let output = call_ok(&mut client, &init, "t3", "interact", json!({ "gripper": "open" }));
    let opened = joint(&world_after_motion(&world), "gripper_left_joint");
    println!("topic: gripper open: {} (ground truth {opened:.4} m)", output["gripper"]);
    assert_eq!(output["gripper"]["reached_goal"], true, "{output}");
    assert!(opened > 0.025, "gripper at {opened} m after open");
    let output = call_ok(&mut client, &init, "t4", "interact", json!({ "gripper": "close" }));
    let closed = joint(&world_after_motion(&world), "gripper_left_joint");
    println!(
        "topic: gripper close (nothing between the fingers): {} (ground truth {closed:.4} m)",
        output["gripper"]
    );
    assert_eq!(
        (output["gripper"]["reached_goal"].as_bool(), output["gripper"]["holding"].as_bool()),
        (Some(true), Some(false)),
        "{output}"
    );
    assert!(closed < 0.004, "gripper at {closed} m after close");

    // A goal whose outcome cannot be seen (joint_states paused mid-motion)
    // ends in a timeout naming the joints and their errors.
    let request = json!({ "protocol": "aicc/0.1", "type": "tool_call", "message_id": "m-t5", "call_id": "t5", "tool": "interact", "input": { "joints": { "joint1": 1.0 }, "speed_radps": 0.1 } });
    client.send_line(&request.to_string());
    thread::sleep(Duration::from_millis(500));
    sim_control(json!({ "pause": ["joint_states"] }));
    let result = loop {
        let message = client.read_message();
        if message["type"] == "tool_result" && message["call_id"] == "t5" {
            break message;
        }
    };
    sim_control(json!({ "resume": ["joint_states"] }));
    println!("topic: arm goal with joint_states paused: {}", result["error"]);
    assert_eq!(result["ok"], false, "{result}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("GOAL_TOLERANCE_VIOLATED")
            && message.contains("timed out")
            && message.contains("joint1 off by"),
        "{message}"
    );
    thread::sleep(Duration::from_secs(1));

    // stop during a long arm motion: the arm stops part way.
    let from = joint(&world.now(), "joint1");
    let request = json!({ "protocol": "aicc/0.1", "type": "tool_call", "message_id": "m-t6", "call_id": "t6", "tool": "interact", "input": { "joints": { "joint1": -1.0 }, "speed_radps": 0.3 } });
    client.send_line(&request.to_string());
    thread::sleep(Duration::from_millis(1500));
    let (mut bystander, _) = AiccClient::connect(port);
    let stop =
        bystander.call("s1", "stop", json!({ "reason": "test: stop an arm motion on the topic" }));
    assert_eq!(stop["ok"], true, "{stop}");
    let result = loop {
        let message = client.read_message();
        if message["type"] == "tool_result" && message["call_id"] == "t6" {
            break message;
        }
    };
    let at_stop = joint(&world.after(Instant::now() + Duration::from_millis(300)), "joint1");
    let later = joint(&world.after(Instant::now() + Duration::from_secs(2)), "joint1");
    println!("topic: stop during joint1 {from:.3} -> -1.0 rad: the call ended with {}; joint1 at {at_stop:.3} rad, 2 s later {later:.3} rad", result["error"]["code"]);
    assert_eq!(result["ok"], false, "{result}");
    assert!(
        at_stop < from - 0.05 && at_stop > -0.9,
        "joint1 at {at_stop} rad: not stopped part way from {from}"
    );
    assert!((later - at_stop).abs() < 0.03, "joint1 went on after stop: {at_stop} -> {later}");
    drop(bystander);
    drop(client);
    topic_bridge.terminate();
    assert!(
        !log.lock().unwrap().contains("no action server answered"),
        "the topic bridge looked for an action server"
    );

    // (2) interface: auto, and no action server answers: the topic.
    let (_auto_bridge, port, log) = bridge("auto");
    let (mut client, init) = AiccClient::connect(port);
    let first = client.call_when_ready(
        "warmup",
        "look_at",
        json!({ "pan_deg": -20, "tilt_deg": 10 }),
        Duration::from_secs(30),
    );
    assert_eq!(first["ok"], true, "{first}");
    let w = world_after_motion(&world);
    let (pan, tilt) =
        (joint(&w, "head_pan_joint").to_degrees(), joint(&w, "head_tilt_joint").to_degrees());
    println!("auto: look_at pan -20° tilt 10°: ground truth {pan:.2}° {tilt:.2}°");
    assert!(
        (pan + 20.0).abs() < 2.0 && (tilt - 10.0).abs() < 2.0,
        "head at pan {pan:.2}° tilt {tilt:.2}°"
    );
    let output = call_ok(&mut client, &init, "a1", "interact", json!({ "pose": "home" }));
    println!(
        "auto: interact pose home: outcome {}, {:.2} s",
        output["outcome"],
        number(&output["duration_s"])
    );
    let output = call_ok(&mut client, &init, "a2", "interact", json!({ "gripper": "open" }));
    assert_eq!(output["gripper"]["reached_goal"], true, "{output}");
    assert!(
        joint(&world_after_motion(&world), "gripper_left_joint") > 0.025,
        "the gripper did not open"
    );
    let log = log.lock().unwrap().clone();
    for controller in ["head_controller", "arm_controller", "gripper_controller"] {
        assert!(
            log.contains(&format!("{controller}/joint_trajectory, judged from joint_states")),
            "no fallback to {controller}'s topic logged:\n{log}"
        );
    }
}
