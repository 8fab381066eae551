//! The actuator tools (move, turn, look_at, interact, say, wait, stop)
//! against the simulated robot, measured by the simulator's ground truth.
//! One test function, so that one simulator runs.
mod support;

use std::f64::consts::PI;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{
    start_bridge, start_sim, AiccClient, GroundTruth, StringRecorder, TruthSpeed, WorldTruth,
};

/// Arm poses that grasp the cube on the pedestal from the spawn pose
/// (sim/tests/conftest.py: ABOVE_CUBE_ARM, GRASP_ARM).
const ABOVE_CUBE: [f64; 4] = [0.872, 0.686, -0.594, 0.408];
const GRASP: [f64; 4] = [0.872, 1.063, -0.425, -0.138];
/// The named pose "ready" (src/tools/interact.rs).
const READY: [f64; 4] = [0.0, -0.3, 0.6, 0.5];
/// The head's pan/tilt pivot in base_footprint (URDF: pan axis at x = -0.10,
/// tilt axis 0.033 + 0.550 + 0.045 m up).
const PIVOT: (f64, f64, f64) = (-0.10, 0.0, 0.628);

fn number(value: &Value) -> f64 {
    value.as_f64().unwrap_or_else(|| panic!("not a number: {value}"))
}

fn deg(rad: f64) -> f64 {
    rad.to_degrees()
}

fn wrap(angle: f64) -> f64 {
    let wrapped = (angle + PI).rem_euclid(2.0 * PI) - PI;
    if wrapped == -PI {
        PI
    } else {
        wrapped
    }
}

fn joint(world: &Value, name: &str) -> f64 {
    number(&world["joints"][name])
}

fn arm_joints(positions: [f64; 4]) -> Value {
    json!({ "joint1": positions[0], "joint2": positions[1], "joint3": positions[2], "joint4": positions[3] })
}

/// Calls a tool, checks it succeeded, returns its output.
fn call_ok(client: &mut AiccClient, id: &str, tool: &str, input: Value) -> Value {
    let result = client.call(id, tool, input.clone());
    assert_eq!(result["ok"], true, "{tool} {input}: {result}");
    result["output"].clone()
}

/// Calls a tool that must fail with `code`; returns the error message.
fn call_err(client: &mut AiccClient, id: &str, tool: &str, input: Value, code: &str) -> String {
    let result = client.call(id, tool, input.clone());
    assert_eq!(result["ok"], false, "{tool} {input} should fail: {result}");
    assert_eq!(result["error"]["code"], code, "{tool} {input}: {result}");
    result["error"]["message"].as_str().unwrap().to_string()
}

/// Sends a tool call without waiting for its result.
fn send_call(client: &mut AiccClient, id: &str, tool: &str, input: Value) {
    let request = json!({ "protocol": "aicc/0.1", "type": "tool_call", "message_id": format!("m-{id}"), "call_id": id, "tool": tool, "input": input });
    client.send_line(&request.to_string());
}

/// Reads until the result of call `id` arrives.
fn await_result(client: &mut AiccClient, id: &str) -> Value {
    loop {
        let message = client.read_message();
        if message["type"] == "tool_result" && message["call_id"] == id {
            return message;
        }
        client.other.push(message);
    }
}

/// The largest difference between the ground truth arm joints and `goal`.
fn arm_error(world: &Value, goal: [f64; 4]) -> f64 {
    ["joint1", "joint2", "joint3", "joint4"]
        .iter()
        .zip(goal)
        .map(|(name, g)| (joint(world, name) - g).abs())
        .fold(0.0, f64::max)
}

/// Ground truth a little after a motion ended (5 Hz topic: a fresh sample).
fn world_after_motion(world: &WorldTruth) -> Value {
    world.after(Instant::now() + Duration::from_millis(100))
}

#[test]
fn actuator_tools_move_the_simulated_robot_as_asked() {
    let _sim = start_sim(&[]);
    let truth = GroundTruth::subscribe();
    let world = WorldTruth::subscribe();
    let speed = TruthSpeed::subscribe();
    let said = StringRecorder::subscribe("/say");
    let (_bridge, port) = start_bridge(&[]);
    let (mut client, init) = AiccClient::connect(port);
    let tools: Vec<&str> =
        init["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    for tool in ["move", "turn", "look_at", "interact", "say", "wait", "stop"] {
        assert!(tools.contains(&tool), "{tool} missing from the manifest: {tools:?}");
    }
    let descriptor = |id: &str| {
        init["tools"].as_array().unwrap().iter().find(|t| t["id"] == id).unwrap().clone()
    };
    assert_eq!(
        (descriptor("stop")["capability"].as_str(), descriptor("wait")["capability"].as_str()),
        (Some("can_halt"), Some("can_observe_world"))
    );
    assert_eq!(descriptor("say")["limits"]["calls_per_minute"], 30);

    // Joint states and odometry reach the bridge a moment after the simulator is ready.
    let first = client.call_when_ready(
        "warmup",
        "look_at",
        json!({ "pan_deg": 0, "tilt_deg": 0 }),
        Duration::from_secs(30),
    );
    assert_eq!(first["ok"], true, "{first}");
    let ready =
        client.call_when_ready("warmup-odom", "proprioception", json!({}), Duration::from_secs(30));
    assert_eq!(ready["ok"], true, "{ready}");
    let start_world = world_after_motion(&world);

    // (f) Bad input: an error naming the field and the limit, and nothing moves.
    let message = call_err(&mut client, "f1", "turn", json!({ "yaw": 1e9 }), "invalid_input");
    assert!(message.contains("input.yaw") && message.contains("360"), "{message}");
    let message =
        call_err(&mut client, "f2", "look_at", json!({ "pan_deg": 170 }), "invalid_input");
    assert!(
        message.contains("head_pan_joint") && message.contains("2.5") && message.contains("143.2°"),
        "{message}"
    );
    println!("refused: look_at pan 170°: {message}");
    let message =
        call_err(&mut client, "f3", "interact", json!({ "pose": "dance" }), "invalid_input");
    for pose in ["home", "ready", "look", "pick_front", "stow"] {
        assert!(message.contains(pose), "{pose} not listed: {message}");
    }
    let message = call_err(
        &mut client,
        "f4",
        "interact",
        json!({ "joints": { "joint3": 1.5 } }),
        "invalid_input",
    );
    assert!(message.contains("joint3") && message.contains("1.382"), "{message}");
    let message = call_err(
        &mut client,
        "f5",
        "interact",
        json!({ "gripper": "close", "effort_n": 50 }),
        "invalid_input",
    );
    assert!(message.contains("gripper_left_joint") && message.contains("10"), "{message}");
    let after_refusals = world.after(Instant::now() + Duration::from_millis(300));
    for name in ["head_pan_joint", "head_tilt_joint", "joint1", "joint2", "joint3", "joint4"] {
        let moved = (joint(&after_refusals, name) - joint(&start_world, name)).abs();
        assert!(moved < 0.01, "{name} moved {moved} rad after refused input");
    }
    let (bx, by) = (number(&after_refusals["base"]["x"]), number(&after_refusals["base"]["y"]));
    assert!(bx.hypot(by) < 0.01, "the base moved after refused input");

    // (c) look_at: angles, then a point in base_footprint, then a pixel.
    let output = call_ok(&mut client, "c1", "look_at", json!({ "pan_deg": 30, "tilt_deg": 20 }));
    let w = world_after_motion(&world);
    let (pan, tilt) = (deg(joint(&w, "head_pan_joint")), deg(joint(&w, "head_tilt_joint")));
    println!("look_at pan 30° tilt 20°: ground truth pan {pan:.2}° tilt {tilt:.2}°; reported {:.2}° {:.2}°, settled {}, {:.2} s", number(&output["actual"]["pan_deg"]), number(&output["actual"]["tilt_deg"]), output["settled"], number(&output["duration_s"]));
    assert!((pan - 30.0).abs() < 2.0 && (tilt - 20.0).abs() < 2.0, "pan {pan} tilt {tilt}");
    assert!(
        (number(&output["actual"]["pan_deg"]) - pan).abs() < 1.0,
        "the tool reports what the joints did"
    );

    let point = (1.0, 0.5, 0.2);
    let output = call_ok(
        &mut client,
        "c2",
        "look_at",
        json!({ "point": { "x": point.0, "y": point.1, "z": point.2, "frame": "base_footprint" } }),
    );
    let (dx, dy, dz) = (point.0 - PIVOT.0, point.1 - PIVOT.1, point.2 - PIVOT.2);
    let (expected_pan, expected_tilt) = (deg(dy.atan2(dx)), deg((-dz).atan2(dx.hypot(dy))));
    let w = world_after_motion(&world);
    let (pan, tilt) = (deg(joint(&w, "head_pan_joint")), deg(joint(&w, "head_tilt_joint")));
    println!("look_at point (1.0, 0.5, 0.2) in base_footprint: expected pan {expected_pan:.2}° tilt {expected_tilt:.2}°, ground truth {pan:.2}° {tilt:.2}°, optical axis error {:.3}°", number(&output["aim"]["optical_axis_error_deg"]));
    assert!(
        (pan - expected_pan).abs() < 2.0 && (tilt - expected_tilt).abs() < 2.0,
        "pan {pan} tilt {tilt}"
    );

    // A point in odom: the robot is at the odometry origin, so the same point.
    let output = call_ok(
        &mut client,
        "c3",
        "look_at",
        json!({ "point": { "x": 1.5, "y": 0.0, "z": 0.1, "frame": "odom" } }),
    );
    println!(
        "look_at red box centre (odom): target pan {:.2}° tilt {:.2}°",
        number(&output["target"]["pan_deg"]),
        number(&output["target"]["tilt_deg"])
    );

    let before = world_after_motion(&world);
    let output = call_ok(&mut client, "c4", "look_at", json!({ "pixel": { "u": 240, "v": 120 } }));
    let w = world_after_motion(&world);
    let pan_change = deg(joint(&w, "head_pan_joint") - joint(&before, "head_pan_joint"));
    let tilt_change = deg(joint(&w, "head_tilt_joint") - joint(&before, "head_tilt_joint"));
    println!("look_at pixel (240, 120) of {}: pan changed {pan_change:.2}°, tilt {tilt_change:.2}° (target pan {:.2}°)", output["requested"]["image"], number(&output["target"]["pan_deg"]));
    assert!(
        pan_change < -5.0 && pan_change > -30.0 && tilt_change.abs() < 3.0,
        "a pixel right of centre pans right: {pan_change} {tilt_change}"
    );
    assert!((deg(joint(&w, "head_pan_joint")) - number(&output["target"]["pan_deg"])).abs() < 2.0);
    call_ok(&mut client, "c5", "look_at", json!({ "pan_deg": 0, "tilt_deg": 0 }));

    // (d) interact: the named pose "ready".
    let output = call_ok(&mut client, "d1", "interact", json!({ "pose": "ready" }));
    let w = world_after_motion(&world);
    let error = arm_error(&w, READY);
    println!(
        "interact pose ready: largest ground truth joint error {error:.4} rad, outcome {}, {:.2} s",
        output["outcome"],
        number(&output["duration_s"])
    );
    assert!(error < 0.05, "ready pose off by {error} rad: {}", w["joints"]);
    assert_eq!(output["outcome"]["error_code"], 0);

    // (e) the gripper: open, reach the cube, close on it (stalls: holding), lift it.
    let cube_z = number(&w["objects"]["cube"]["z"]);
    let output = call_ok(&mut client, "e1", "interact", json!({ "gripper": "open" }));
    println!("gripper open: {}", output["gripper"]);
    assert_eq!(
        (output["gripper"]["reached_goal"].as_bool(), output["gripper"]["holding"].as_bool()),
        (Some(true), Some(false))
    );
    let open_truth = joint(&world_after_motion(&world), "gripper_left_joint");
    assert!((open_truth - 0.03).abs() < 0.003, "open reaches the URDF upper limit: {open_truth}");
    call_ok(&mut client, "e2", "interact", json!({ "joints": arm_joints(ABOVE_CUBE) }));
    call_ok(
        &mut client,
        "e3",
        "interact",
        json!({ "joints": arm_joints(GRASP), "speed_radps": 0.4 }),
    );
    let output =
        call_ok(&mut client, "e4", "interact", json!({ "gripper": "close", "effort_n": 5 }));
    println!("gripper close on the cube: {}", output["gripper"]);
    assert_eq!(output["gripper"]["stalled"], true, "{output}");
    assert_eq!(output["gripper"]["holding"], true, "{output}");
    assert!((number(&output["gripper"]["position_m"]) - 0.0175).abs() < 0.003, "{output}");
    call_ok(
        &mut client,
        "e5",
        "interact",
        json!({ "joints": arm_joints(ABOVE_CUBE), "speed_radps": 0.5 }),
    );
    thread::sleep(Duration::from_millis(500));
    let lifted = number(&world_after_motion(&world)["objects"]["cube"]["z"]) - cube_z;
    println!("cube lifted {lifted:.3} m");
    assert!(lifted > 0.09, "the cube was not lifted: {lifted}");
    // Put it back and stow the arm.
    call_ok(
        &mut client,
        "e6",
        "interact",
        json!({ "joints": arm_joints(GRASP), "speed_radps": 0.4 }),
    );
    call_ok(&mut client, "e7", "interact", json!({ "gripper": "open" }));
    call_ok(&mut client, "e8", "interact", json!({ "joints": arm_joints(ABOVE_CUBE) }));
    let output = call_ok(&mut client, "e9", "interact", json!({ "pose": "stow" }));
    let w = world_after_motion(&world);
    println!(
        "stowed (error {:.4} rad); cube back at z {:.3} m (was {cube_z:.3})",
        arm_error(&w, [0.0, -1.2, 1.3, 1.2]),
        number(&w["objects"]["cube"]["z"])
    );
    assert_eq!(output["outcome"]["error_code"], 0);

    // (b) turn 90 degrees left.
    let (x0, y0, yaw0) = truth.settled_pose();
    let output = call_ok(&mut client, "b1", "turn", json!({ "yaw": 90 }));
    let (x1, y1, yaw1) = truth.settled_pose();
    let turned = deg(wrap(yaw1 - yaw0));
    println!("turn 90°: ground truth {turned:.2}°, odometry says {:.2}°, {:.2} s at up to {:.1}°/s; drift {:.4} m", number(&output["achieved"]["yaw_deg"]), number(&output["duration_s"]), number(&output["applied"]["max_rate_dps"]), (x1 - x0).hypot(y1 - y0));
    assert!((turned - 90.0).abs() < 3.0, "ground truth turned {turned}°");
    assert!((number(&output["achieved"]["yaw_deg"]) - 90.0).abs() < 1.0, "{output}");

    // (a) move 1 m (now facing +y, a clear path).
    let output = call_ok(&mut client, "a1", "move", json!({ "forward": 1.0 }));
    let (x2, y2, _) = truth.settled_pose();
    let moved = (x2 - x1).hypot(y2 - y1);
    println!(
        "move 1 m: ground truth {moved:.4} m, odometry says {:.4} m, {:.2} s",
        number(&output["achieved"]["forward_m"]),
        number(&output["duration_s"])
    );
    assert!((moved - 1.0).abs() < 0.05, "ground truth moved {moved} m");

    // turn with pitch: the head tilts while the base turns.
    let (_, _, yaw_before) = truth.settled_pose();
    let output = call_ok(&mut client, "a2", "turn", json!({ "yaw": -20, "pitch": 15 }));
    let (_, _, yaw_after) = truth.settled_pose();
    let tilt = deg(joint(&world_after_motion(&world), "head_tilt_joint"));
    let turned = deg(wrap(yaw_after - yaw_before));
    println!("turn -20° with pitch 15°: ground truth {turned:.2}°, head tilt {tilt:.2}° (reported {:.2}°)", number(&output["head"]["actual"]["tilt_deg"]));
    assert!(
        (turned + 20.0).abs() < 3.0 && (tilt - 15.0).abs() < 2.0,
        "turned {turned}°, tilt {tilt}°"
    );
    let progress = client
        .other
        .iter()
        .filter(|m| m["topic"] == "command" && m["payload"]["tool"] == "turn")
        .count();
    assert!(progress > 0, "a turn reports progress events");
    call_ok(&mut client, "a3", "look_at", json!({ "tilt_deg": 0 }));

    // wait: ticks at the manifest's rate.
    let output = call_ok(&mut client, "w1", "wait", json!({ "ticks": 3 }));
    assert!((number(&output["waited_s"]) - 0.3).abs() < 0.1, "{output}");

    // (g) say publishes on /say.
    let text = "Hello, I am the AICC test robot.";
    let output = call_ok(&mut client, "g1", "say", json!({ "text": text }));
    assert_eq!(output["said"], text);
    assert!(
        said.wait_for(text, Duration::from_secs(5)),
        "nothing heard on /say: {:?}",
        said.messages.lock().unwrap()
    );
    println!("say: heard on /say");

    // stop from ANOTHER session (no lease) during a long turn, then during a long move.
    let (mut bystander, _) = AiccClient::connect(port);
    send_call(&mut client, "g2", "turn", json!({ "yaw": 360 }));
    thread::sleep(Duration::from_millis(1200));
    let rate_before = speed.latest().map_or(0.0, |(_, w)| w);
    let stop_sent = Instant::now();
    let output =
        call_ok(&mut bystander, "s1", "stop", json!({ "reason": "test: stop a long turn" }));
    let turn_result = await_result(&mut client, "g2");
    let turn_ended = stop_sent.elapsed();
    thread::sleep(Duration::from_millis(800));
    let still = speed.still_from(stop_sent, 0.01, 0.02).map(|t| t.duration_since(stop_sent));
    println!("stop during turn 360°: turning at {rate_before:.2} rad/s; the turn ended after {:.0} ms with {}; ground truth still after {:?}; stop output {output}", turn_ended.as_secs_f64() * 1e3, turn_result["error"], still);
    assert_eq!(turn_result["ok"], false, "{turn_result}");
    assert!(turn_result["error"]["message"].as_str().unwrap().contains("stop"), "{turn_result}");
    assert!(rate_before.abs() > 0.5, "the turn was under way: {rate_before}");
    assert!(
        still.is_some_and(|t| t <= Duration::from_millis(500)),
        "not still within 0.5 s: {still:?}"
    );
    let is_stop_event = |m: &Value| {
        m["type"] == "event" && m["topic"] == "governor" && m["payload"]["kind"] == "stop"
    };
    let mut event = client.other.iter().find(|m| is_stop_event(m)).cloned();
    while event.is_none() {
        let message = client.read_message();
        if is_stop_event(&message) {
            event = Some(message);
        }
    }
    let event = event.unwrap();
    assert_eq!(event["payload"]["by"], output["by"]);

    // Face -y (clear for 2.5 m), then a long move, stopped.
    let (_, _, yaw) = truth.settled_pose();
    call_ok(&mut client, "g3", "turn", json!({ "yaw": deg(wrap(-PI / 2.0 - yaw)) }));
    send_call(&mut client, "g4", "move", json!({ "forward": 2.5 }));
    // Under way at speed: the head turns to observe the way first, and the
    // robot creeps while the band its arm's base hides has not been seen clear.
    let under_way = Instant::now() + Duration::from_secs(8);
    while speed.latest().map_or(0.0, |(v, _)| v) <= 0.15 && Instant::now() < under_way {
        thread::sleep(Duration::from_millis(50));
    }
    let speed_before = speed.latest().map_or(0.0, |(v, _)| v);
    let stop_sent = Instant::now();
    call_ok(&mut bystander, "s2", "stop", json!({}));
    let move_result = await_result(&mut client, "g4");
    let move_ended = stop_sent.elapsed();
    thread::sleep(Duration::from_millis(800));
    let still = speed.still_from(stop_sent, 0.01, 0.02).map(|t| t.duration_since(stop_sent));
    println!("stop during move 2.5 m: moving at {speed_before:.3} m/s; the move ended after {:.0} ms: ok {} {}; ground truth still after {still:?}", move_ended.as_secs_f64() * 1e3, move_result["ok"], if move_result["ok"] == true { move_result["output"]["achieved"].clone() } else { move_result["error"].clone() });
    assert!(speed_before > 0.1, "the move was under way: {speed_before}");
    // Needs `move` (src/tools/move_base.rs) to end on tools::stop::halted_since, as turn does.
    assert!(move_ended < Duration::from_secs(2), "the move did not end when stopped ({move_ended:?}; move_base.rs must check tools::stop::halted_since): {move_result}");
    assert!(
        still.is_some_and(|t| t <= Duration::from_millis(500)),
        "not still within 0.5 s: {still:?}"
    );
}
