//! The Create 3 hazard reports as the TurtleBot 4 profile's contact
//! source: the simulator impersonates a TurtleBot 4 (`--profile
//! turtlebot4 --relay-hazards`, /hazard_detection as irobot_create_msgs/
//! HazardDetectionVector, relayed as the robot's republisher does once
//! told to), the bridge runs config/turtlebot4.yaml with the hazards
//! topic set as its comment says. A bump reported while the robot drives forward stops it and
//! latches: forward is refused, reverse is the escape.
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{
    sim_control, start_bridge, start_sim, subscribe_in_thread, AiccClient, CmdVelRecorder,
    GroundTruth, TruthSpeed,
};

#[test]
fn a_bump_on_hazard_detection_stops_the_turtlebot4_and_latches() {
    // Open floor ahead: 2.8 m to the north wall, clear of the objects.
    // hazard_detection relayed, as the republisher does once told to.
    let _sim =
        start_sim(&["--profile", "turtlebot4", "--relay-hazards", "--x", "-1.0", "--y", "-0.8"]);
    let truth = GroundTruth::subscribe();
    let speed = TruthSpeed::subscribe();
    let cmd_vel = CmdVelRecorder::subscribe_stamped();
    let first_bump: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let sink = first_bump.clone();
    let _hazards = subscribe_in_thread::<r2r::irobot_create_msgs::msg::HazardDetectionVector>(
        "hazard_reader",
        "/hazard_detection",
        r2r::QosProfile::sensor_data(),
        move |msg| {
            if msg.detections.iter().any(|d| d.type_ == 1) {
                sink.lock().unwrap().get_or_insert_with(Instant::now);
            }
        },
    );
    let (_bridge, port) = start_bridge(&[
        "--config",
        "config/turtlebot4.yaml",
        "--ros-args",
        "-p",
        "sensors.hazards.topic:=hazard_detection",
    ]);
    let (mut client, _) = AiccClient::connect(port);
    let ready = client.call_when_ready("p0", "proprioception", json!({}), Duration::from_secs(30));
    assert_eq!(ready["ok"], true, "{ready}");

    // 1. Forward 1.5 m; a bump while at speed.
    let (x0, _, _) = truth.settled_pose();
    client.send_line(&json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": "m1", "tool": "move", "input": { "forward": 1.5 } }).to_string());
    let sent = Instant::now();
    while !cmd_vel.max_linear_after(sent).is_some_and(|v| v >= 0.2) {
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "not driving at speed 5 s after the move: {:?}",
            client.other
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    sim_control(json!({ "hazard": { "type": 1, "frame_id": "bump_front_center", "for_s": 0.3 } }));
    let result = loop {
        let message = client.read_message();
        if message["type"] == "tool_result" && message["call_id"] == "m1" {
            break message;
        }
        client.other.push(message);
    };
    let bumped = first_bump.lock().unwrap().expect("the bump was published on /hazard_detection");
    let zero = cmd_vel.first_zero_after(bumped).expect("a zero /cmd_vel after the bump");
    // The governor's reaction: the first command after the bump below the
    // speed before it, or zero (a simulator stall can have the governor
    // already braking for stale data when the bump arrives: then the zero
    // is its answer, and the latch below is what the bump adds).
    let reaction = {
        let samples = cmd_vel.samples.lock().unwrap();
        let before = samples
            .iter()
            .filter(|(t, _, _)| *t < bumped)
            .map(|(_, v, _)| *v)
            .last()
            .unwrap_or(0.0);
        let slower = samples
            .iter()
            .find(|(t, v, _)| *t >= bumped && (*v < before - 0.005 || *v == 0.0))
            .map(|(t, _, _)| *t);
        slower
    }
    .expect("a slower command after the bump");
    let still = speed.still_from(zero, 0.005, 0.02).expect("at rest");
    let (x1, _, _) = truth.settled_pose();
    println!(
        "Create 3 bump: first slower /cmd_vel {:.1} ms, zero {:.1} ms after the bump reached a subscriber; at rest {:.0} ms after it; travelled {:.3} m; result: {}",
        reaction.duration_since(bumped).as_secs_f64() * 1e3,
        zero.duration_since(bumped).as_secs_f64() * 1e3,
        still.duration_since(bumped).as_secs_f64() * 1e3,
        x1 - x0,
        result["error"]["message"]
    );
    assert_eq!(result["ok"], false, "{result}");
    assert!(
        result["error"]["message"].as_str().unwrap_or_default().contains("contact"),
        "{result}"
    );
    assert!(
        reaction.duration_since(bumped) <= Duration::from_millis(150),
        "the governor reacted after {:?}",
        reaction.duration_since(bumped)
    );
    assert!(
        still.duration_since(bumped) <= Duration::from_millis(1500),
        "at rest after {:?}",
        still.duration_since(bumped)
    );
    assert!(x1 - x0 < 1.2, "stopped well short of the 1.5 m asked: {}", x1 - x0);

    // 2. Latched: forward refused (the bump is over), the robot stays.
    std::thread::sleep(Duration::from_millis(500));
    let refused = client.call("m2", "move", json!({ "forward": 0.2 }));
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap_or_default().contains("contact"),
        "{refused}"
    );
    let (x2, _, _) = truth.settled_pose();
    assert!((x2 - x1).abs() < 0.01, "moved {} m against a latched bump", x2 - x1);

    // 3. Reverse is the escape, and releases the latch.
    let back = client.call("m3", "move", json!({ "forward": -0.1 }));
    assert_eq!(back["ok"], true, "{back}");
    let again = client.call("m4", "move", json!({ "forward": 0.1 }));
    assert_eq!(again["ok"], true, "released after backing off: {again}");
}
