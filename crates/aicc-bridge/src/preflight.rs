//! The preflight (`aicc-ros2 --check`): what the live ROS graph shows for
//! each part of the profile, judged against it, one line per item with the
//! setting that fixes it. Pure: the ROS side gathers the facts (the
//! bridge's own subscriptions run for a few seconds, the graph's types and
//! publishers, the velocity topic's decision), this judges them.
use std::fmt;

/// How an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Works without it, or with less (a camera absent, an arm server
    /// missing): the bridge still runs safely.
    Warn,
    /// The bridge would not run safely, or not drive at all.
    Fail,
}

/// One line of the preflight.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub verdict: Verdict,
    /// The configuration key the item comes from (`sensors.odom`).
    pub item: String,
    /// What was found, and the fix where there is one.
    pub says: String,
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.verdict {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        };
        write!(f, "[{tag}] {}: {}", self.item, self.says)
    }
}

/// A sensor topic as the bridge's subscription saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicFacts {
    /// `sensors.odom`, ...
    pub item: String,
    /// Fully qualified.
    pub topic: String,
    /// The type the bridge reads (`nav_msgs/msg/Odometry`).
    pub expected_type: String,
    /// Every type the graph shows on the topic (publishers and subscribers).
    pub types_on_topic: Vec<String>,
    pub publishers: usize,
    /// Messages the bridge received in the window.
    pub received: u64,
    /// Why the subscription may receive nothing (a QoS mismatch).
    pub qos_note: Option<String>,
    /// Whether the governor or the drivers depend on it (odometry, the
    /// obstacle and contact sources, joint states): without it the bridge
    /// does not run safely.
    pub safety: bool,
}

/// An action server the bridge sends goals to.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionFacts {
    /// `actuators.arm_action`, ...
    pub item: String,
    /// Fully qualified.
    pub name: String,
    /// `control_msgs/action/FollowJointTrajectory`.
    pub expected_type: String,
    /// The types the graph shows on the action's feedback topic
    /// (`<name>/_action/feedback`: `<type>_FeedbackMessage`); empty when no
    /// server (or client) is there.
    pub feedback_types: Vec<String>,
    /// Whether an action server answers (the client's own view).
    pub server_ready: bool,
}

/// Everything the preflight judges.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// How long the subscriptions ran, seconds.
    pub window_s: f64,
    pub topics: Vec<TopicFacts>,
    pub actions: Vec<ActionFacts>,
    /// The velocity topic and why commands cannot go out on it (None: they can).
    pub cmd_vel: (String, Option<String>),
    pub use_sim_time: bool,
    /// Publishers of /clock.
    pub clock_publishers: usize,
}

/// One line per item, in the order given: sensors, actuators, the clock.
pub fn judge(facts: &Facts) -> Vec<Line> {
    let mut lines: Vec<Line> = facts.topics.iter().map(|t| topic_line(t, facts.window_s)).collect();
    let (cmd_vel, unavailable) = &facts.cmd_vel;
    lines.push(match unavailable {
        None => line(
            Verdict::Ok,
            "actuators.cmd_vel",
            format!("{cmd_vel}: the base takes what the bridge publishes"),
        ),
        Some(why) => line(Verdict::Fail, "actuators.cmd_vel", why.clone()),
    });
    lines.extend(facts.actions.iter().map(action_line));
    lines.push(clock_line(facts.use_sim_time, facts.clock_publishers));
    lines
}

/// Whether the bridge can run safely: no item failed.
pub fn passed(lines: &[Line]) -> bool {
    lines.iter().all(|line| line.verdict != Verdict::Fail)
}

fn line(verdict: Verdict, item: &str, says: String) -> Line {
    Line { verdict, item: item.to_string(), says }
}

fn topic_line(t: &TopicFacts, window_s: f64) -> Line {
    let short = if t.safety { Verdict::Fail } else { Verdict::Warn };
    let set = |what: &str| format!("set {}.topic to {what}", t.item);
    if t.publishers == 0 {
        let fix = if t.safety {
            set("the robot's topic (ros2 topic list)")
        } else {
            set("the robot's topic, or \"\" if it has none")
        };
        return line(short, &t.item, format!("nothing publishes {}: {fix}", t.topic));
    }
    if let Some(other) = t.types_on_topic.iter().find(|name| **name != t.expected_type) {
        return line(
            Verdict::Fail,
            &t.item,
            format!(
                "{} carries {other}; the bridge reads {} there: {}",
                t.topic,
                t.expected_type,
                set("a topic of that type")
            ),
        );
    }
    if let Some(note) = &t.qos_note {
        return line(short, &t.item, note.clone());
    }
    if t.received == 0 {
        return line(
            short,
            &t.item,
            format!(
                "{} has {} publisher(s) but nothing arrived in {window_s:.1} s: is the robot's driver publishing (ros2 topic hz {})?",
                t.topic, t.publishers, t.topic
            ),
        );
    }
    // Counted from the subscription's start: discovery's first moments
    // included, so a lower bound of the rate.
    let rate_hz = t.received as f64 / window_s.max(1e-3);
    line(
        Verdict::Ok,
        &t.item,
        format!(
            "{} {}, {} message(s) in {window_s:.1} s (at least {rate_hz:.1} Hz)",
            t.topic, t.expected_type, t.received
        ),
    )
}

fn action_line(a: &ActionFacts) -> Line {
    let feedback = format!("{}_FeedbackMessage", a.expected_type);
    if let Some(other) = a.feedback_types.iter().find(|name| **name != feedback) {
        let other = other.trim_end_matches("_FeedbackMessage");
        return line(
            Verdict::Fail,
            &a.item,
            format!(
                "{} is a {other} action; the bridge sends {} goals: set {} to a server of that type",
                a.name, a.expected_type, a.item
            ),
        );
    }
    if !a.server_ready {
        return line(
            Verdict::Warn,
            &a.item,
            format!(
                "no action server {} answers: its tools fail until it does (set {} to \"\" on a robot without it)",
                a.name, a.item
            ),
        );
    }
    line(Verdict::Ok, &a.item, format!("{} {}", a.name, a.expected_type))
}

fn clock_line(use_sim_time: bool, clock_publishers: usize) -> Line {
    match (use_sim_time, clock_publishers) {
        (true, 0) => line(
            Verdict::Fail,
            "use_sim_time",
            "true, but nothing publishes /clock: the bridge's time stands still; start the simulator or set use_sim_time:=false".into(),
        ),
        (true, _) => line(Verdict::Ok, "use_sim_time", "true, /clock is published".into()),
        (false, 0) => line(Verdict::Ok, "use_sim_time", "false, no /clock: wall time".into()),
        (false, n) => line(
            Verdict::Warn,
            "use_sim_time",
            format!("false, but {n} node(s) publish /clock (a simulator?): stamps in sim time read as stale; set use_sim_time:=true beside a simulator"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn odom() -> TopicFacts {
        TopicFacts {
            item: "sensors.odom".into(),
            topic: "/odom".into(),
            expected_type: "nav_msgs/msg/Odometry".into(),
            types_on_topic: vec!["nav_msgs/msg/Odometry".into()],
            publishers: 1,
            received: 60,
            qos_note: None,
            safety: true,
        }
    }

    fn arm() -> ActionFacts {
        ActionFacts {
            item: "actuators.arm_action".into(),
            name: "/arm_controller/follow_joint_trajectory".into(),
            expected_type: "control_msgs/action/FollowJointTrajectory".into(),
            feedback_types: vec!["control_msgs/action/FollowJointTrajectory_FeedbackMessage".into()],
            server_ready: true,
        }
    }

    fn facts() -> Facts {
        Facts {
            window_s: 2.0,
            topics: vec![odom()],
            actions: vec![arm()],
            cmd_vel: ("/cmd_vel".into(), None),
            use_sim_time: true,
            clock_publishers: 1,
        }
    }

    fn verdicts(lines: &[Line]) -> Vec<(String, Verdict)> {
        lines.iter().map(|l| (l.item.clone(), l.verdict)).collect()
    }

    #[test]
    fn a_robot_that_matches_its_profile_passes_with_its_rates() {
        let lines = judge(&facts());
        assert!(passed(&lines), "{lines:?}");
        assert_eq!(
            lines[0].to_string(),
            "[ok  ] sensors.odom: /odom nav_msgs/msg/Odometry, 60 message(s) in 2.0 s (at least 30.0 Hz)"
        );
        assert_eq!(lines.len(), 4, "odom, cmd_vel, the arm, the clock: {lines:?}");
    }

    #[test]
    fn each_mistake_fails_or_warns_naming_the_setting_to_fix() {
        let mut missing = facts();
        missing.topics[0].publishers = 0;
        missing.topics[0].types_on_topic.clear();
        let lines = judge(&missing);
        assert!(!passed(&lines));
        assert!(
            lines[0].says.contains("nothing publishes /odom: set sensors.odom.topic"),
            "{}",
            lines[0]
        );

        let mut camera = facts();
        camera.topics[0] =
            TopicFacts { item: "sensors.camera".into(), safety: false, publishers: 0, ..odom() };
        let lines = judge(&camera);
        assert!(passed(&lines), "a camera absent is not unsafe: {lines:?}");
        assert_eq!(lines[0].verdict, Verdict::Warn);

        let mut wrong_type = facts();
        wrong_type.topics[0].types_on_topic = vec!["geometry_msgs/msg/PoseStamped".into()];
        let lines = judge(&wrong_type);
        assert_eq!(lines[0].verdict, Verdict::Fail);
        assert!(lines[0].says.contains("carries geometry_msgs/msg/PoseStamped"), "{}", lines[0]);

        let mut qos = facts();
        qos.topics[0].qos_note = Some("/odom is subscribed reliable but /robot publishes best effort: set sensors.odom.reliability: best_effort".into());
        qos.topics[0].received = 0;
        let lines = judge(&qos);
        assert_eq!(lines[0].verdict, Verdict::Fail);
        assert!(lines[0].says.contains("reliability: best_effort"), "{}", lines[0]);

        let mut silent = facts();
        silent.topics[0].received = 0;
        assert!(judge(&silent)[0].says.contains("nothing arrived in 2.0 s"));

        let mut cmd_vel = facts();
        cmd_vel.cmd_vel.1 = Some("/cmd_vel is geometry_msgs/msg/TwistStamped on this robot but actuators.cmd_vel_stamped: false publishes geometry_msgs/msg/Twist: set it to true or auto".into());
        let lines = judge(&cmd_vel);
        assert_eq!(verdicts(&lines)[1], ("actuators.cmd_vel".to_string(), Verdict::Fail));

        let mut no_server = facts();
        no_server.actions[0].server_ready = false;
        no_server.actions[0].feedback_types.clear();
        let lines = judge(&no_server);
        assert!(passed(&lines), "a missing arm server is not unsafe");
        assert_eq!(lines[2].verdict, Verdict::Warn);
        assert!(lines[2].says.contains("no action server /arm_controller/follow_joint_trajectory"));

        let mut wrong_action = facts();
        wrong_action.actions[0].feedback_types =
            vec!["control_msgs/action/GripperCommand_FeedbackMessage".into()];
        let lines = judge(&wrong_action);
        assert_eq!(lines[2].verdict, Verdict::Fail);
        assert!(
            lines[2].says.contains("is a control_msgs/action/GripperCommand action"),
            "{}",
            lines[2]
        );

        let mut no_clock = facts();
        no_clock.clock_publishers = 0;
        assert_eq!(judge(&no_clock)[3].verdict, Verdict::Fail);
        let mut wall = facts();
        wall.use_sim_time = false;
        assert_eq!(judge(&wall)[3].verdict, Verdict::Warn);
    }
}
