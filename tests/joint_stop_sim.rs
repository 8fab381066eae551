//! `stop` while the arm moves fast, judged on the simulator's ground truth:
//! its /joint_states (50 Hz, the MuJoCo joints' positions and velocities,
//! stamped in sim time), and its ground-truth channel (`--truth-listen`):
//! the velocity the running trajectory demands of each joint before the
//! simulated controller clamps its setpoints to the URDF limit (what a
//! controller without a profile velocity would be asked to do).
//!
//! The agent swings joint1 at its URDF velocity limit; while it moves, it
//! also asks for a head motion that cannot be sent yet (the head is reached
//! `auto` with no action server under the configured name: the bridge waits
//! `action_detect_wait_s` before it falls back to the head's trajectory
//! topic); then a bystander calls `stop`. Passes only if, after the stop,
//! no joint moves faster than its URDF limit, the arm comes to rest near
//! where it was when the stop was called, no trajectory demands more than
//! a joint's limit, and the head goal the stop overtook is refused (the
//! head never moves). Prints the worst joint
//! speed after the stop (rad/s and as a fraction of the limit), the speed
//! against the direction of motion (a hold at an old position pulls the arm
//! back), and how long the arm took to rest. One simulator, one bridge.
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{start_bridge_with, start_sim_with_truth, subscribe_in_thread, AiccClient};

/// URDF velocity limits (urdf/aicc_bot.urdf), rad/s.
const ARM_LIMIT_RADPS: f64 = 4.8;
const HEAD_LIMIT_RADPS: f64 = 3.0;
const ARM: [&str; 4] = ["joint1", "joint2", "joint3", "joint4"];
const HEAD: [&str; 2] = ["head_pan_joint", "head_tilt_joint"];
/// The swing: joint1 from one side to the other, the arm otherwise at its zero pose.
const SWING_FROM_RAD: f64 = -1.4;
const SWING_TO_RAD: f64 = 1.4;
/// A joint slower than this is at rest...
const REST_RADPS: f64 = 0.02;
/// ...once it has stayed so this long.
const REST_HOLD: Duration = Duration::from_millis(300);
/// How far the arm may travel after the stop is called: 0.1 s at the
/// velocity limit (the stop's way from the agent to the controller, and
/// the braking) is 0.48 rad.
const MAX_TRAVEL_AFTER_STOP_RAD: f64 = 0.48;
/// How long the arm may take to rest after the stop is called.
const MAX_TIME_TO_REST: Duration = Duration::from_secs(1);
/// A demanded velocity is the trajectory's step over one 2 ms physics step:
/// a motion planned at the limit reads up to this much above it.
const DEMAND_ROUNDING: f64 = 1.01;
/// The head's detect wait: the overtaken goal would go out this long after it was asked.
const HEAD_DETECT_WAIT_S: f64 = 2.0;

/// One /joint_states message as the test received it.
struct JointSample {
    received: Instant,
    /// The simulator's time of the sample.
    stamp_s: f64,
    positions: HashMap<String, f64>,
    velocities: HashMap<String, f64>,
}

/// Every /joint_states message, with its arrival time.
struct JointRecorder {
    samples: Arc<Mutex<Vec<JointSample>>>,
    _spin: support::Spinning,
}

impl JointRecorder {
    fn subscribe() -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let sink = samples.clone();
        let spin = subscribe_in_thread::<r2r::sensor_msgs::msg::JointState>(
            "joint_state_recorder",
            "/joint_states",
            r2r::QosProfile::default().keep_last(50),
            move |msg| {
                let by_name = |values: &[f64]| {
                    msg.name
                        .iter()
                        .cloned()
                        .zip(values.iter().copied())
                        .collect::<HashMap<String, f64>>()
                };
                let stamp_s =
                    f64::from(msg.header.stamp.sec) + f64::from(msg.header.stamp.nanosec) * 1e-9;
                let sample = JointSample {
                    received: Instant::now(),
                    stamp_s,
                    positions: by_name(&msg.position),
                    velocities: by_name(&msg.velocity),
                };
                sink.lock().unwrap().push(sample);
            },
        );
        JointRecorder { samples, _spin: spin }
    }

    fn latest_velocity(&self, joint: &str) -> Option<f64> {
        self.samples.lock().unwrap().last().and_then(|s| s.velocities.get(joint).copied())
    }

    /// Positions and sim time of the last message received before `instant`.
    fn positions_before(&self, instant: Instant) -> (HashMap<String, f64>, f64) {
        self.samples
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|s| s.received < instant)
            .map(|s| (s.positions.clone(), s.stamp_s))
            .expect("joint states before the stop")
    }
}

/// The velocity the running trajectories demand of each joint, from the
/// simulator's ground-truth channel: (sim time, demand per joint).
struct DemandRecorder {
    samples: Arc<Mutex<Vec<(f64, HashMap<String, f64>)>>>,
}

impl DemandRecorder {
    fn connect(port: u16) -> Self {
        let stream =
            TcpStream::connect(("127.0.0.1", port)).expect("the simulator's ground-truth channel");
        let samples = Arc::new(Mutex::new(Vec::new()));
        let sink = samples.clone();
        thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { return };
                let Ok(state) = serde_json::from_str::<Value>(&line) else { continue };
                let (Some(sim_time), Some(joints)) =
                    (state["sim_time"].as_f64(), state["joints"].as_object())
                else {
                    continue;
                };
                let demand = joints
                    .iter()
                    .map(|(joint, values)| {
                        (joint.clone(), values["demand_velocity"].as_f64().unwrap_or(f64::NAN))
                    })
                    .collect();
                sink.lock().unwrap().push((sim_time, demand));
            }
        });
        DemandRecorder { samples }
    }
}

fn send_call(client: &mut AiccClient, id: &str, tool: &str, input: Value) {
    let request = json!({ "protocol": "aicc/0.1", "type": "tool_call", "message_id": format!("m-{id}"), "call_id": id, "tool": tool, "input": input });
    client.send_line(&request.to_string());
}

/// Reads until the results of every call in `ids` arrived.
fn await_results(client: &mut AiccClient, ids: &[&str]) -> HashMap<String, Value> {
    let mut results = HashMap::new();
    while results.len() < ids.len() {
        let message = client.read_message();
        if message["type"] == "tool_result" {
            if let Some(id) = ids.iter().find(|id| message["call_id"] == **id) {
                results.insert(id.to_string(), message);
            }
        }
    }
    results
}

#[test]
fn stop_while_the_arm_moves_fast_stops_it_within_the_limits_and_refuses_the_goal_it_overtook() {
    let (_sim, truth_port) = start_sim_with_truth(&[]);
    let recorder = JointRecorder::subscribe();
    let demands = DemandRecorder::connect(truth_port);
    let detect_wait = format!("actuators.action_detect_wait_s:={HEAD_DETECT_WAIT_S}");
    let args = [
        "--config",
        "config/sim.yaml",
        "--ros-args",
        "-p",
        "actuators.head_interface:=auto",
        "-p",
        "actuators.head_action:=head_controller/not_served_here",
        "-p",
        &detect_wait,
        // The arm at its motor's limit, not the profile's gentler cap: the
        // stop is judged from the fastest swing the URDF allows.
        "-p",
        "actuators.arm_max_speed_radps:=0.0",
    ];
    let (_bridge, port, _log) = start_bridge_with(&args, &[]);
    let (mut agent, _) = AiccClient::connect(port);
    let start = json!({ "joints": { "joint1": SWING_FROM_RAD, "joint2": 0.0, "joint3": 0.0, "joint4": 0.0 } });
    let ready = agent.call_when_ready("to-start", "interact", start, Duration::from_secs(30));
    assert_eq!(ready["ok"], true, "{ready}");
    thread::sleep(Duration::from_millis(300));

    send_call(
        &mut agent,
        "swing",
        "interact",
        json!({ "joints": { "joint1": SWING_TO_RAD }, "speed_radps": ARM_LIMIT_RADPS }),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while recorder.latest_velocity("joint1").is_none_or(|v| v < 0.8 * ARM_LIMIT_RADPS) {
        assert!(Instant::now() < deadline, "joint1 never reached 80 % of {ARM_LIMIT_RADPS} rad/s");
        thread::sleep(Duration::from_millis(2));
    }
    let speed_at_stop = recorder.latest_velocity("joint1").unwrap();
    // A head goal that cannot be sent before the stop: it waits for an action server.
    send_call(&mut agent, "overtaken", "look_at", json!({ "pan_deg": 60 }));
    thread::sleep(Duration::from_millis(20));
    let (mut bystander, _) = AiccClient::connect(port);
    let stop_called = Instant::now();
    let stop = bystander.call("stop", "stop", json!({ "reason": "test: stop the arm mid-swing" }));
    let stop_returned = Instant::now();
    assert_eq!(stop["ok"], true, "{stop}");
    // Judged in sim time from the last state seen before the stop was called.
    let (at_stop, stop_stamp_s) = recorder.positions_before(stop_called);

    let results = await_results(&mut agent, &["swing", "overtaken"]);
    // Long enough for the overtaken head goal to have gone out, had it been sent.
    thread::sleep(
        Duration::from_secs_f64(HEAD_DETECT_WAIT_S + 1.0).saturating_sub(stop_called.elapsed()),
    );

    let samples: Vec<JointSample> = std::mem::take(&mut *recorder.samples.lock().unwrap());
    let after: Vec<&JointSample> = samples.iter().filter(|s| s.stamp_s > stop_stamp_s).collect();
    assert!(after.len() > 50, "only {} joint states after the stop", after.len());
    let mut worst = (String::new(), 0.0f64, 0.0f64);
    for sample in &after {
        for (joints, limit) in [(&ARM[..], ARM_LIMIT_RADPS), (&HEAD[..], HEAD_LIMIT_RADPS)] {
            for joint in joints {
                let speed = sample.velocities[*joint].abs();
                if speed / limit > worst.2 {
                    worst = (joint.to_string(), speed, speed / limit);
                }
            }
        }
    }
    let backwards = after.iter().map(|s| -s.velocities["joint1"]).fold(0.0f64, f64::max);
    // From the last state before the stop on: the first drop counts too.
    let from_stop: Vec<&JointSample> =
        samples.iter().filter(|s| s.stamp_s >= stop_stamp_s).collect();
    let braking = from_stop
        .windows(2)
        .filter(|w| w[1].stamp_s > w[0].stamp_s)
        .map(|w| {
            (w[1].velocities["joint1"] - w[0].velocities["joint1"]).abs()
                / (w[1].stamp_s - w[0].stamp_s)
        })
        .fold(0.0f64, f64::max);
    let arm_still = |s: &JointSample| ARM.iter().all(|j| s.velocities[*j].abs() < REST_RADPS);
    let rest = after.iter().enumerate().find(|(i, s)| {
        arm_still(s)
            && after[*i..]
                .iter()
                .take_while(|t| t.stamp_s - s.stamp_s <= REST_HOLD.as_secs_f64())
                .all(|t| arm_still(t))
    });
    let mut demanded = (String::new(), 0.0f64, 0.0f64);
    for (_, demand) in
        demands.samples.lock().unwrap().iter().filter(|(sim_time, _)| *sim_time > stop_stamp_s)
    {
        for (joints, limit) in [(&ARM[..], ARM_LIMIT_RADPS), (&HEAD[..], HEAD_LIMIT_RADPS)] {
            for joint in joints {
                let speed = demand[*joint].abs();
                if speed / limit > demanded.2 {
                    demanded = (joint.to_string(), speed, speed / limit);
                }
            }
        }
    }
    let (rest_at, rest_positions) = rest
        .map(|(_, s)| (Duration::from_secs_f64(s.stamp_s - stop_stamp_s), s.positions.clone()))
        .unwrap_or_else(|| panic!("the arm never came to rest after the stop"));
    let travel =
        ARM.iter().map(|j| (rest_positions[*j] - at_stop[*j]).abs()).fold(0.0f64, f64::max);
    let head_moved = HEAD
        .iter()
        .map(|j| after.iter().map(|s| (s.positions[*j] - at_stop[*j]).abs()).fold(0.0f64, f64::max))
        .fold(0.0f64, f64::max);

    println!("stop while the arm moves fast: joint1 at {:.3} rad moving {speed_at_stop:.2} rad/s when stop was called; stop returned after {:.0} ms: {}", at_stop["joint1"], (stop_returned - stop_called).as_secs_f64() * 1e3, stop["output"]["stopped"]);
    println!("  worst joint speed after the stop: {} {:.3} rad/s = {:.3} of its URDF limit; fastest joint1 motion against the swing: {backwards:.3} rad/s; largest joint1 deceleration {braking:.0} rad/s^2", worst.0, worst.1, worst.2);
    println!("  the largest velocity a trajectory demanded after the stop: {} {:.3} rad/s = {:.3} of its URDF limit", demanded.0, demanded.1, demanded.2);
    println!("  the arm rested {:.0} ms (sim time) after the stop, {travel:.3} rad from where it was (joint1 {:.3} -> {:.3} rad); the head moved {head_moved:.4} rad", rest_at.as_secs_f64() * 1e3, at_stop["joint1"], rest_positions["joint1"]);
    println!("  the swing: {}", results["swing"]["error"]);
    println!(
        "  the head goal the stop overtook: {}",
        if results["overtaken"]["ok"] == true {
            results["overtaken"]["output"].to_string()
        } else {
            results["overtaken"]["error"].to_string()
        }
    );

    assert!(
        worst.2 <= 1.0,
        "{} reached {:.3} rad/s after the stop, above its URDF limit",
        worst.0,
        worst.1
    );
    assert!(
        demanded.2 <= DEMAND_ROUNDING,
        "after the stop a trajectory demanded {:.3} rad/s of {}, above its URDF limit",
        demanded.1,
        demanded.0
    );
    assert!(
        travel <= MAX_TRAVEL_AFTER_STOP_RAD,
        "the arm came to rest {travel:.3} rad from where it was at the stop"
    );
    assert!(rest_at <= MAX_TIME_TO_REST, "the arm took {rest_at:?} to rest");
    assert_eq!(results["swing"]["ok"], false, "the swing was stopped: {}", results["swing"]);
    assert_eq!(
        results["overtaken"]["ok"], false,
        "a goal the stop overtook must be refused: {}",
        results["overtaken"]
    );
    assert!(
        results["overtaken"]["error"]["message"].as_str().unwrap_or("").contains("stop"),
        "{}",
        results["overtaken"]
    );
    assert!(head_moved < 0.02, "the head moved {head_moved:.3} rad after the stop");
}
