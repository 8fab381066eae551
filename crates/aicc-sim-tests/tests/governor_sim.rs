//! The governor's promises against the simulated robot, measured from its
//! ground truth and from /cmd_vel as a ROS subscriber sees it: driving into
//! a box stops at contact and forward motion is then refused; reverse is
//! allowed; a client killed mid-move brings /cmd_vel to zero within 100 ms.
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::{start_bridge, start_sim, AiccClient, CmdVelRecorder, GroundTruth};

#[test]
fn contact_stop_refused_forward_and_the_deadman() {
    // The head looks sideways, so the depth camera does not see the red box
    // ahead and only the bumper can stop the robot.
    let _sim = start_sim(&["--joint", "head_pan_joint=1.5708"]);
    let truth = GroundTruth::subscribe();
    let cmd_vel = CmdVelRecorder::subscribe();
    let (mut bridge, port) = start_bridge(&[]);
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

    // 1. Into the box: the bumper stops the move.
    let (x0, _, _) = truth.settled_pose();
    let hit = client.call("m1", "move", json!({ "forward": 3.0 }));
    let (x1, _, _) = truth.settled_pose();
    println!("drove into the box: stopped after {:.3} m (ground truth), result: {}", x1 - x0, hit["error"]["message"]);
    assert_eq!(hit["ok"], false, "{hit}");
    assert_eq!(hit["error"]["code"], "execution_failed");
    assert!(hit["error"]["message"].as_str().unwrap().contains("contact"), "{hit}");
    assert!(x1 - x0 < 1.6 && x1 - x0 > 1.0, "the box is about 1.5 m ahead; stopped at {}", x1 - x0);
    let collision = client.other.iter().find(|m| m["topic"] == "collision").expect("a collision event");
    println!("collision event: {}", collision["payload"]);

    // 2. Forward is refused while the contact is latched; the robot does not move.
    let refused = client.call("m2", "move", json!({ "forward": 0.1 }));
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("contact"), "{refused}");
    let (x2, _, _) = truth.settled_pose();
    assert!((x2 - x1).abs() < 0.01, "moved {} m forward against a latched contact", x2 - x1);

    // 3. Reverse is allowed.
    let back = client.call("m3", "move", json!({ "forward": -0.3 }));
    assert_eq!(back["ok"], true, "{back}");
    let (x3, _, _) = truth.settled_pose();
    assert!((x2 - x3 - 0.3).abs() < 0.05, "reversed {} m", x2 - x3);

    // 4. The deadman: the agent vanishes mid-move; /cmd_vel reaches zero within 100 ms.
    drop(client);
    std::thread::sleep(Duration::from_millis(300));
    let mut raw = AiccClient::connect(port).0;
    raw.send_line(&json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": "long", "tool": "move", "input": { "forward": -1.2 } }).to_string());
    std::thread::sleep(Duration::from_millis(1500));
    let moving_since = Instant::now() - Duration::from_millis(300);
    assert!(cmd_vel.max_linear_after(moving_since) < -0.1, "not yet reversing at speed");
    let killed = Instant::now();
    drop(raw);
    std::thread::sleep(Duration::from_millis(500));
    let zero = cmd_vel.first_zero_after(killed).expect("a zero /cmd_vel after the client vanished");
    let latency = zero.duration_since(killed);
    println!("deadman: /cmd_vel zero {:.1} ms after the client's socket closed", latency.as_secs_f64() * 1e3);
    assert!(latency <= Duration::from_millis(100), "zero after {latency:?}");

    // 5. SIGTERM mid-move: the bridge publishes zero before it exits.
    let mut last = AiccClient::connect(port).0;
    last.send_line(&json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": "last", "tool": "move", "input": { "forward": -0.8 } }).to_string());
    std::thread::sleep(Duration::from_millis(1200));
    assert!(cmd_vel.max_linear_after(Instant::now() - Duration::from_millis(300)) < -0.1, "not yet reversing at speed");
    let signalled = Instant::now();
    let status = bridge.terminate().expect("the bridge exits");
    let zero = cmd_vel.first_zero_after(signalled).expect("a zero /cmd_vel after SIGTERM");
    println!("SIGTERM: /cmd_vel zero {:.1} ms after the signal; exit status {status}", zero.duration_since(signalled).as_secs_f64() * 1e3);
    assert!(status.success(), "{status}");
    assert!(zero.duration_since(signalled) <= Duration::from_millis(100));
}
