//! The governor's promises against the simulated robot, measured from its
//! ground truth and from /cmd_vel as a ROS subscriber sees it: an agent
//! that turns the camera away and drives at a low box (below the LiDAR's
//! plane) is stopped short of it, because the bridge turns the head back to
//! observe the way first; a contact the governor could not prevent (the
//! box pushed against the bumper) latches the stop, and forward motion is
//! then refused while reverse is allowed; a client killed mid-move brings
//! /cmd_vel to zero within 100 ms; SIGTERM publishes zero.
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{
    start_bridge, start_sim_with_truth, truth_command, AiccClient, CmdVelRecorder, GroundTruth,
    WorldTruth,
};

/// The red box: 0.2 m cube centred 1.5 m ahead of the spawn point.
const BOX_FACE_X_M: f64 = 1.4;
/// The bumper's front, ahead of base_footprint.
const BUMPER_FRONT_M: f64 = 0.14;

#[test]
fn a_blinded_camera_is_turned_back_a_contact_latches_and_the_deadman() {
    let (_sim, truth_port) = start_sim_with_truth(&[]);
    let truth = GroundTruth::subscribe();
    let world = WorldTruth::subscribe();
    let cmd_vel = CmdVelRecorder::subscribe();
    // Reverse is allowed here: this test backs away from the contact and
    // toward the south wall, which nothing on this robot watches for low
    // obstacles (the default refuses it: see the coverage tests).
    let (mut bridge, port) = start_bridge(&["--ros-args", "-p", "safety.unobserved_behind:=allow"]);
    let (mut client, _) = AiccClient::connect(port);
    let mut ready = client.call("p0", "proprioception", json!({}));
    for attempt in 1..50 {
        if ready["ok"] == true {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        ready = client.call(&format!("p{attempt}"), "proprioception", json!({}));
    }
    assert_eq!(ready["ok"], true, "{ready}");

    // 1. The camera looks away; the agent drives at the box. The head is
    // turned back, and the robot stops short of the box.
    let away = client.call("l1", "look_at", json!({ "pan_deg": 90, "tilt_deg": 0 }));
    assert_eq!(away["ok"], true, "{away}");
    let blocked = client.call("m1", "move", json!({ "forward": 1.45 }));
    let (x1, _, _) = truth.settled_pose();
    let gap_m = BOX_FACE_X_M - (x1 + BUMPER_FRONT_M);
    println!("looked away, drove at the box: stopped with {gap_m:.3} m between bumper and box (ground truth); result: {}", blocked["error"]["message"]);
    assert_eq!(blocked["ok"], false, "{blocked}");
    assert!(blocked["error"]["message"].as_str().unwrap().contains("obstacle"), "{blocked}");
    let turned = client
        .other
        .iter()
        .find(|m| m["topic"] == "command" && m["payload"]["head_turned"].is_object())
        .expect("a command event saying the head was turned");
    println!("head turned: {}", turned["payload"]["head_turned"]["why"]);
    assert!(client.other.iter().all(|m| m["topic"] != "collision"), "a collision event");
    assert_eq!(world.now()["bumper_in_contact"], false, "in contact with the box");
    assert!(gap_m > 0.02 && gap_m < 0.12, "stopped {gap_m:.3} m from the box (stop distance 0.20 m from base_footprint: 0.06 m from the bumper)");

    // 2. A contact the governor could not prevent: the box is pushed
    // against the bumper (the world's doing, not the agent's).
    truth_command(
        truth_port,
        json!({ "place": { "object": "red_box", "x_m": x1 + BUMPER_FRONT_M + 0.098, "y_m": 0.0 } }),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut touch = client.call("t1", "touch", json!({}));
    while touch["output"]["in_contact"] != true && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        touch = client.call("t1", "touch", json!({}));
    }
    assert_eq!(touch["output"]["in_contact"], true, "{touch}");
    let (x2, _, _) = truth.settled_pose();
    let refused = client.call("m2", "move", json!({ "forward": 0.1 }));
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("contact"), "{refused}");
    let (x3, _, _) = truth.settled_pose();
    assert!((x3 - x2).abs() < 0.01, "moved {} m forward against a latched contact", x3 - x2);

    // 3. Reverse is allowed by the latch.
    let back = client.call("m3", "move", json!({ "forward": -0.3 }));
    assert_eq!(back["ok"], true, "{back}");
    let (x4, _, _) = truth.settled_pose();
    assert!((x3 - x4 - 0.3).abs() < 0.05, "reversed {} m", x3 - x4);

    // 4. The deadman: the agent vanishes mid-move; /cmd_vel reaches zero within 100 ms.
    drop(client);
    std::thread::sleep(Duration::from_millis(300));
    let mut raw = AiccClient::connect(port).0;
    raw.send_line(&json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": "long", "tool": "move", "input": { "forward": -1.0 } }).to_string());
    let moving_since = Instant::now();
    let reversing = Instant::now() + Duration::from_secs(5);
    while !cmd_vel.fastest_reverse_after(moving_since).is_some_and(|v| v < -0.1)
        && Instant::now() < reversing
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        cmd_vel.fastest_reverse_after(moving_since).is_some_and(|v| v < -0.1),
        "not reversing at speed: {}",
        cmd_vel.summary_after(moving_since)
    );
    std::thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    drop(raw);
    std::thread::sleep(Duration::from_millis(500));
    let zero = cmd_vel.first_zero_after(killed).expect("a zero /cmd_vel after the client vanished");
    let latency = zero.duration_since(killed);
    println!(
        "deadman: /cmd_vel zero {:.1} ms after the client's socket closed",
        latency.as_secs_f64() * 1e3
    );
    assert!(latency <= Duration::from_millis(100), "zero after {latency:?}");

    // 5. SIGTERM mid-move: the bridge publishes zero before it exits.
    let mut last = AiccClient::connect(port).0;
    last.send_line(&json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": "last", "tool": "move", "input": { "forward": -0.6 } }).to_string());
    let moving_since = Instant::now();
    let reversing = Instant::now() + Duration::from_secs(5);
    while !cmd_vel.fastest_reverse_after(moving_since).is_some_and(|v| v < -0.1)
        && Instant::now() < reversing
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        cmd_vel.fastest_reverse_after(moving_since).is_some_and(|v| v < -0.1),
        "not reversing at speed: {}",
        cmd_vel.summary_after(moving_since)
    );
    let signalled = Instant::now();
    let status = bridge.terminate().expect("the bridge exits");
    let zero = cmd_vel.first_zero_after(signalled).expect("a zero /cmd_vel after SIGTERM");
    println!(
        "SIGTERM: /cmd_vel zero {:.1} ms after the signal; exit status {status}",
        zero.duration_since(signalled).as_secs_f64() * 1e3
    );
    assert!(status.success(), "{status}");
    assert!(zero.duration_since(signalled) <= Duration::from_millis(100));
}
