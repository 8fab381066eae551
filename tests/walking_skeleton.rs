//! The whole loop, against the real simulated robot: TCP -> AICC -> ROS ->
//! physics -> ROS -> AICC, checked against the simulator's ground truth.
mod support;

use std::time::Duration;

use serde_json::json;
use support::{start_bridge, start_sim, AiccClient, GroundTruth};

#[test]
fn proprioception_then_move_half_a_metre_measured_by_ground_truth() {
    let _sim = start_sim(&[]);
    let truth = GroundTruth::subscribe();
    let (_bridge, port) = start_bridge(&[]);
    let (mut client, init) = AiccClient::connect(port);
    let tool_ids: Vec<&str> =
        init["tools"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert!(tool_ids.contains(&"proprioception") && tool_ids.contains(&"move"), "{tool_ids:?}");

    // Odometry reaches the bridge a moment after the simulator is ready.
    let mut sense = client.call("p1", "proprioception", json!({}));
    for attempt in 2..50 {
        if sense["ok"] == true {
            break;
        }
        assert_eq!(sense["error"]["retryable"], true, "{sense}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        sense = client.call(&format!("p{attempt}"), "proprioception", json!({}));
    }
    assert_eq!(sense["ok"], true, "{sense}");
    let output = &sense["output"];
    assert_eq!(output["frame_id"], "odom");
    let (x0, y0, _) = truth.settled_pose();
    let odom_x = output["position_m"]["x"].as_f64().unwrap();
    assert!(output["odom_age_ms"].as_f64().unwrap() < 500.0);
    assert!(sense["meta"]["tick"].is_u64());
    println!("start: ground truth ({x0:.3}, {y0:.3}), odom x {odom_x:.3}");

    let moved = client.call("m1", "move", json!({ "forward": 0.5 }));
    assert_eq!(moved["ok"], true, "{moved}");
    let (x1, y1, _) = truth.settled_pose();
    let displacement_m = (x1 - x0).hypot(y1 - y0);
    let reported_m = moved["output"]["achieved"]["forward_m"].as_f64().unwrap();
    println!("move 0.5 m: ground truth displacement {displacement_m:.4} m, odometry says {reported_m:.4} m, took {:.2} s", moved["output"]["duration_s"]);
    assert!((displacement_m - 0.5).abs() <= 0.1, "ground truth moved {displacement_m} m");
    assert!((reported_m - 0.5).abs() <= 0.1, "bridge reported {reported_m} m");

    // Forward and left together: turn, drive, turn back.
    let (xa, ya, yawa) = truth.settled_pose();
    let offset = client.call("m-left", "move", json!({ "forward": 0.2, "left": 0.3 }));
    assert_eq!(offset["ok"], true, "{offset}");
    let (xb, yb, yawb) = truth.settled_pose();
    let (dx, dy) = (xb - xa, yb - ya);
    let (forward, left) = (dx * yawa.cos() + dy * yawa.sin(), -dx * yawa.sin() + dy * yawa.cos());
    println!("move forward 0.2 left 0.3: ground truth forward {forward:.3} m, left {left:.3} m, heading change {:.2} deg", (yawb - yawa).to_degrees());
    assert!((forward - 0.2).abs() < 0.05 && (left - 0.3).abs() < 0.05, "({forward}, {left})");
    assert!((yawb - yawa).to_degrees().abs() < 3.0, "turned back to the original heading");
    let (x1, y1, _) = (xb, yb, yawb);

    // Bad input is an error naming the field, and the robot does not move.
    let refused = client.call("m2", "move", json!({ "forward": "far" }));
    assert_eq!(refused["ok"], false);
    assert_eq!(refused["error"]["code"], "invalid_input");
    assert!(refused["error"]["message"].as_str().unwrap().contains("input.forward"), "{refused}");
    client.send_line("this is not json");
    let error = client.read_until("error");
    assert_eq!(
        (error["type"].as_str(), error["code"].as_str()),
        (Some("error"), Some("invalid_input"))
    );
    let (x2, y2, _) = truth.settled_pose();
    assert!((x2 - x1).hypot(y2 - y1) < 0.01, "robot moved after refused input");

    drop(client);

    // The session outlives the connection: resume replays what was missed.
    let (mut first, init) = AiccClient::connect(port);
    let session_id = init["session_id"].as_str().unwrap().to_string();
    // The bridge may read this call before the closed connection's end:
    // the lease is then still held by the session that left, a retryable
    // refusal, and retried as an agent would.
    let moved =
        first.call_when_ready("r1", "move", json!({ "forward": 0.05 }), Duration::from_secs(5));
    assert_eq!(moved["ok"], true, "{moved}");
    let moved_call_id = moved["call_id"].as_str().unwrap().to_string();
    // (The previous connection's lease release may arrive first, as seq 1.)
    let lease = first
        .other
        .iter()
        .find(|m| m["topic"] == "lease" && m["payload"]["yours"] == true)
        .expect("a lease event when the lease is taken")
        .clone();
    let cursor = lease["meta"]["seq"].as_u64().unwrap();
    drop(first);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (mut again, _) = AiccClient::connect(port);
    again.send_line(&json!({ "protocol": "aicc/0.1", "type": "session_resume", "message_id": "r", "session_id": session_id, "cursor": cursor }).to_string());
    // Replayed first (flagged), then the answer that counts them.
    let resumed = again.read_until("session_resume");
    let replayed: Vec<&serde_json::Value> = again
        .other
        .iter()
        .filter(|m| m["type"] == "event" && m["meta"]["replayed"] == true)
        .collect();
    assert_eq!(resumed["replayed"].as_u64(), Some(replayed.len() as u64), "{resumed}");
    assert_eq!(resumed["dropped"], 0);
    let seqs: Vec<u64> = replayed.iter().map(|m| m["meta"]["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        ((cursor + 1)..=resumed["next_cursor"].as_u64().unwrap()).collect::<Vec<_>>(),
        "every event after the cursor, in order"
    );
    let completed = replayed
        .iter()
        .find(|m| m["topic"] == "command" && m["payload"]["state"] == "completed")
        .expect("the move's completion");
    assert_eq!(completed["payload"]["call_id"], moved_call_id.as_str());
    let released = replayed
        .iter()
        .find(|m| m["topic"] == "lease")
        .expect("the lease release, recorded while away");
    assert_eq!(
        released["payload"]["holder"],
        serde_json::Value::Null,
        "released when the agent went away"
    );
    again.send_line(&json!({ "protocol": "aicc/0.1", "type": "session_close" }).to_string());
    assert_eq!(again.read_until("session_close")["session_id"], session_id.as_str());
    assert!(again.is_closed_by_peer());
    let (mut late, _) = AiccClient::connect(port);
    late.send_line(
        &json!({ "protocol": "aicc/0.1", "type": "session_resume", "session_id": session_id })
            .to_string(),
    );
    assert_eq!(late.read_until("error")["code"], "session_expired");
}
