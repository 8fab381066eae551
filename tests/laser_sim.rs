//! The laser scanner as an obstacle source, against the simulated robot's
//! 360-degree LiDAR (/scan, best effort, 10 Hz), with the profile
//! config/sim.yaml unchanged: a reverse move toward a wall that only the
//! LiDAR sees (the depth camera looks forward) stops at the stop distance;
//! a silent scanner holds every motion, and the refusal says why.
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{
    sim_control, start_bridge, start_sim, AiccClient, CmdVelRecorder, GroundTruth, TruthSpeed,
};

/// The south wall's face, world x (sim/world.py: the room's half size).
const WALL_FACE_X_M: f64 = -2.0;
/// config/sim.yaml's stop distance (the default), from base_footprint.
const STOP_DISTANCE_M: f64 = 0.2;
/// The sim robot's rear edge behind base_footprint (urdf/aicc_bot.urdf).
const REAR_EDGE_M: f64 = 0.12;

#[test]
fn reversing_toward_a_wall_only_the_lidar_sees_stops_at_the_stop_distance() {
    // 0.6 m in front of the south wall, facing away from it (+x).
    let _sim = start_sim(&["--x", "-1.4"]);
    let truth = GroundTruth::subscribe();
    let speed = TruthSpeed::subscribe();
    let cmd_vel = CmdVelRecorder::subscribe();
    // Reverse is what this test is about: allowed explicitly (the sim
    // profile refuses it, since the LiDAR does not see obstacles below its
    // plane behind the robot; the wall here it does see).
    let (_bridge, port) = start_bridge(&[
        "--config",
        "config/sim.yaml",
        "--ros-args",
        "-p",
        "safety.unobserved_behind:=allow",
    ]);
    let (mut client, _) = AiccClient::connect(port);
    let ready = client.call_when_ready("p0", "proprioception", json!({}), Duration::from_secs(30));
    assert_eq!(ready["ok"], true, "{ready}");

    // 1. Backwards 1 m: the wall is 0.6 m behind base_footprint.
    let (x0, _, _) = truth.settled_pose();
    let started = Instant::now();
    let back = client.call("m1", "move", json!({ "forward": -1.0 }));
    let (x1, _, _) = truth.settled_pose();
    let gap = x1 - WALL_FACE_X_M;
    println!("reverse toward the wall: result {back}");
    assert_eq!(back["ok"], false, "a move of 1 m cannot be achieved: {back}");
    let message = back["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("behind"), "the refusal names the obstacle behind: {message}");
    // The governor's stop: the first zero /cmd_vel after reversing at speed;
    // the stop time runs from it to the ground truth at rest.
    let reversing = cmd_vel
        .samples
        .lock()
        .unwrap()
        .iter()
        .find(|(t, v, _)| *t >= started && *v < -0.1)
        .map(|(t, _, _)| *t)
        .expect("reversed at speed");
    let zero = cmd_vel.first_zero_after(reversing).expect("a zero /cmd_vel");
    let still = speed.still_from(zero, 0.005, 0.02).expect("at rest after the stop");
    // The approach: the fastest reverse commanded in the last 0.5 s before the stop.
    let approach = cmd_vel
        .samples
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _, _)| *t < zero && *t + Duration::from_millis(500) >= zero)
        .map(|(_, v, _)| -*v)
        .fold(0.0, f64::max);
    println!(
        "LiDAR stop: travelled {:.3} m; base_footprint stopped {:.3} m from the wall (stop distance {STOP_DISTANCE_M} m, rear edge clearance {:.3} m); \
         fastest reverse in the last 0.5 s before the stop {:.3} m/s; at rest {:.0} ms after the zero command",
        x0 - x1,
        gap,
        gap - REAR_EDGE_M,
        approach,
        still.duration_since(zero).as_secs_f64() * 1e3,
    );
    assert!(
        gap >= STOP_DISTANCE_M - 0.02,
        "stopped {gap:.3} m from the wall, inside the stop distance"
    );
    assert!(
        gap <= STOP_DISTANCE_M + 0.05,
        "stopped {gap:.3} m from the wall, well short of the stop distance"
    );
    assert!(gap - REAR_EDGE_M > 0.05, "the rear edge is clear of the wall");
    let governed = client
        .other
        .iter()
        .any(|m| m["topic"] == "governor" && m["payload"]["rule"] == "obstacle_behind");
    assert!(governed, "an obstacle_behind restriction event: {:?}", client.other);

    // 2. Forward (away from the wall) stays allowed.
    let away = client.call("m2", "move", json!({ "forward": 0.2 }));
    assert_eq!(away["ok"], true, "{away}");

    // 3. A silent scanner: no motion at all, and the refusal says why.
    sim_control(json!({ "pause": ["scan"] }));
    std::thread::sleep(Duration::from_millis(800)); // past the scan's 0.5 s max age
    let (x2, _, _) = truth.settled_pose();
    for (id, forward) in [("m3", 0.2), ("m4", -0.2)] {
        let refused = client.call(id, "move", json!({ "forward": forward }));
        assert_eq!(refused["ok"], false, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("laser scanner"), "the stale scanner is named: {message}");
    }
    let (x3, _, _) = truth.settled_pose();
    println!("scanner paused: moves refused, the robot moved {:.4} m", (x3 - x2).abs());
    assert!((x3 - x2).abs() < 0.01, "moved {} m with a silent scanner", x3 - x2);
    sim_control(json!({ "resume": ["scan"] }));
    std::thread::sleep(Duration::from_millis(500));
    let again = client.call("m5", "move", json!({ "forward": 0.1 }));
    assert_eq!(again["ok"], true, "scans again: motion again: {again}");
}
