//! A base whose velocity topic cannot be used (the robot takes another
//! message type than configured, or nothing tells the type yet): `move`
//! and `turn` are refused with the port's reason, and nothing that moves
//! is published; once the port can deliver again, they drive.
mod support;

use std::time::{Duration, Instant};

use aicc_bridge::port::PortError;
use aicc_bridge::UnobservedPolicy;
use serde_json::json;
use support::AiccClient;

fn moving_commands(bridge: &support::InProcessBridge) -> usize {
    bridge.robot.actuators.velocities().iter().filter(|v| !v.is_zero()).count()
}

#[test]
fn motion_is_refused_with_the_ports_reason_and_nothing_moves() {
    // No depth camera, and the way ahead taken as clear: nothing but the
    // port's word stands between a move and its commands.
    let mut config = support::config("");
    config.sensors.depth.topic.clear();
    config.safety.unobserved_ahead = UnobservedPolicy::Allow;
    let mut bridge = support::start(config, &[]);
    bridge.feed_standing(None);
    let (mut agent, _) = AiccClient::connect(bridge.port);
    let mismatch = PortError::TypeMismatch {
        name: "/cmd_vel".into(),
        reason: "/cmd_vel is geometry_msgs/msg/TwistStamped on this robot but actuators.cmd_vel_stamped: false publishes geometry_msgs/msg/Twist: set it to true or auto".into(),
    };
    bridge.robot.actuators.set_base_output_unavailable(Some(mismatch));
    for (id, tool, input) in
        [("m1", "move", json!({ "forward": 0.2 })), ("t1", "turn", json!({ "yaw": 30 }))]
    {
        let refused = agent.call_when_ready(id, tool, input, Duration::from_secs(10));
        assert_eq!(refused["ok"], false, "{refused}");
        assert_eq!(refused["error"]["code"], "tool_unavailable", "{refused}");
        assert_eq!(refused["error"]["retryable"], false, "a setting to change: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{tool} cannot drive the base: /cmd_vel: /cmd_vel is geometry_msgs/msg/TwistStamped"))
                && message.ends_with("nothing was sent"),
            "{message}"
        );
    }
    assert_eq!(moving_commands(&bridge), 0, "nothing that moves was published");

    // Waiting for a subscriber is retryable.
    bridge.robot.actuators.set_base_output_unavailable(Some(PortError::NotReady {
        name: "/cmd_vel".into(),
        reason: "nothing subscribes to /cmd_vel yet".into(),
    }));
    let waiting = agent.call("m2", "move", json!({ "forward": 0.2 }));
    assert_eq!(waiting["error"]["retryable"], true, "{waiting}");
    assert_eq!(moving_commands(&bridge), 0);

    // Deliverable again: the same move drives (the standing robot never
    // gets there; the commands are what counts).
    bridge.robot.actuators.set_base_output_unavailable(None);
    agent.send_call("m3", "move", json!({ "forward": 0.2 }));
    let deadline = Instant::now() + Duration::from_secs(5);
    while moving_commands(&bridge) == 0 {
        assert!(Instant::now() < deadline, "no velocity published once deliverable");
        std::thread::sleep(Duration::from_millis(20));
    }
    agent.call("s1", "stop", json!({}));
}
