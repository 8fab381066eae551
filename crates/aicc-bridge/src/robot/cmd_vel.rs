//! Which message type goes on the base's velocity topic. A topic carries
//! one type: a second publisher type is not an error in ROS, but the
//! robot's subscriber matches only its own, and the robot does not move
//! (the Jazzy TurtleBots take TwistStamped on `cmd_vel`, Humble's Twist).
//! Pure: the ROS side reads the graph's types for the topic and asks.
use crate::config::CmdVelStamped;

/// A velocity message type the bridge can publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmdVelKind {
    Twist,
    TwistStamped,
}

impl CmdVelKind {
    pub const fn type_name(self) -> &'static str {
        match self {
            Self::Twist => "geometry_msgs/msg/Twist",
            Self::TwistStamped => "geometry_msgs/msg/TwistStamped",
        }
    }

    fn from_type_name(name: &str) -> Option<Self> {
        [Self::Twist, Self::TwistStamped].into_iter().find(|kind| kind.type_name() == name)
    }

    fn other(self) -> Self {
        match self {
            Self::Twist => Self::TwistStamped,
            Self::TwistStamped => Self::Twist,
        }
    }

    /// The `actuators.cmd_vel_stamped` value that publishes this type.
    fn setting(self) -> &'static str {
        match self {
            Self::Twist => "false",
            Self::TwistStamped => "true",
        }
    }
}

/// What the bridge may do with the base's velocity topic now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdVelOutput {
    /// Publish this type.
    Publish(CmdVelKind),
    /// Nothing tells the type yet (no subscriber under `auto`): publish
    /// nothing; a later look may decide (retryable).
    Waiting(String),
    /// The topic's other endpoints disagree with the setting or among
    /// themselves: publish nothing until the setting or the robot changes.
    Refused(String),
}

/// Decides from the types the graph shows on `topic` (`types_on_topic`,
/// the bridge's own publisher included once it exists: `ours`).
/// `unnamed_types`: the graph holds more types there than it names (the
/// ROS side cannot read every type of a topic that has several).
pub fn decide(
    setting: CmdVelStamped,
    topic: &str,
    types_on_topic: &[String],
    unnamed_types: bool,
    ours: Option<CmdVelKind>,
) -> CmdVelOutput {
    let foreign: Vec<&String> =
        types_on_topic.iter().filter(|name| CmdVelKind::from_type_name(name).is_none()).collect();
    if let Some(name) = foreign.first() {
        return CmdVelOutput::Refused(format!(
            "{topic} carries {name}: the bridge publishes only geometry_msgs Twist or TwistStamped there; set actuators.cmd_vel to the base's velocity topic"
        ));
    }
    let mut seen: Vec<CmdVelKind> =
        types_on_topic.iter().filter_map(|name| CmdVelKind::from_type_name(name)).collect();
    seen.sort_by_key(|kind| *kind as u8);
    seen.dedup();
    // The robot's side, as far as the graph tells: the bridge's own type
    // is on the topic once it publishes, so only the other type says
    // something about the robot then.
    let mut robot: Vec<CmdVelKind> = seen.into_iter().filter(|kind| Some(*kind) != ours).collect();
    if unnamed_types {
        match (ours, robot.is_empty()) {
            // Another type than the bridge's own is there: the only one a
            // velocity subscriber can have is the other (a foreign one is
            // refused all the same).
            (Some(own), true) => robot.push(own.other()),
            (None, _) => {
                return CmdVelOutput::Refused(format!(
                    "{topic} has endpoints of more than one type: a subscriber matches only its own type, so the bridge publishes nothing there until one type is left (check `ros2 topic info -v {topic}`)"
                ))
            }
            _ => {}
        }
    }
    if robot.len() > 1 {
        return CmdVelOutput::Refused(format!(
            "{topic} has endpoints of two types, Twist and TwistStamped: a subscriber matches only its own type, so the bridge publishes nothing there until one type is left (check `ros2 topic info -v {topic}`)"
        ));
    }
    let robot_kind = robot.first().copied();
    match (setting, robot_kind, ours) {
        (CmdVelStamped::Auto, Some(kind), None) => CmdVelOutput::Publish(kind),
        (CmdVelStamped::Auto, Some(kind), Some(own)) => CmdVelOutput::Refused(format!(
            "{topic} carries {} now besides the bridge's {}: a subscriber matches only its own type, so the bridge publishes nothing there; restart the bridge once one type is left (check `ros2 topic info -v {topic}`)",
            kind.type_name(),
            own.type_name()
        )),
        (CmdVelStamped::Auto, None, Some(own)) => CmdVelOutput::Publish(own),
        (CmdVelStamped::Auto, None, None) => CmdVelOutput::Waiting(format!(
            "nothing subscribes to {topic} yet, and its subscriber's type decides what the bridge publishes (actuators.cmd_vel_stamped: auto): is the base driver running? Set cmd_vel_stamped to true (TwistStamped) or false (Twist) to publish without one"
        )),
        (setting, robot_kind, _) => {
            let configured = match setting {
                CmdVelStamped::Stamped => CmdVelKind::TwistStamped,
                _ => CmdVelKind::Twist,
            };
            match robot_kind {
                Some(kind) if kind != configured => CmdVelOutput::Refused(format!(
                    "{topic} is {} on this robot but actuators.cmd_vel_stamped: {} publishes {}: set it to {} or auto",
                    kind.type_name(),
                    configured.setting(),
                    configured.type_name(),
                    kind.setting()
                )),
                _ => CmdVelOutput::Publish(configured),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWIST: &str = "geometry_msgs/msg/Twist";
    const STAMPED: &str = "geometry_msgs/msg/TwistStamped";

    fn types(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn auto_publishes_the_subscribers_type_and_waits_for_one() {
        for (seen, kind) in [(STAMPED, CmdVelKind::TwistStamped), (TWIST, CmdVelKind::Twist)] {
            assert_eq!(
                decide(CmdVelStamped::Auto, "/cmd_vel", &types(&[seen]), false, None),
                CmdVelOutput::Publish(kind)
            );
            // Once the bridge publishes it, its own type is on the topic too.
            assert_eq!(
                decide(CmdVelStamped::Auto, "/cmd_vel", &types(&[seen]), false, Some(kind)),
                CmdVelOutput::Publish(kind)
            );
        }
        let CmdVelOutput::Waiting(why) = decide(CmdVelStamped::Auto, "/cmd_vel", &[], false, None)
        else {
            panic!("no subscriber: waiting")
        };
        assert!(why.contains("/cmd_vel") && why.contains("cmd_vel_stamped"), "{why}");
    }

    #[test]
    fn a_setting_the_robot_disagrees_with_is_refused_naming_the_fix() {
        let CmdVelOutput::Refused(why) =
            decide(CmdVelStamped::Unstamped, "/cmd_vel", &types(&[STAMPED]), false, None)
        else {
            panic!("Twist configured, TwistStamped subscribed: refused")
        };
        assert!(why.contains(STAMPED) && why.contains("set it to true or auto"), "{why}");
        let CmdVelOutput::Refused(why) =
            decide(CmdVelStamped::Stamped, "/cmd_vel", &types(&[TWIST]), false, None)
        else {
            panic!("TwistStamped configured, Twist subscribed: refused")
        };
        assert!(why.contains("set it to false or auto"), "{why}");
        // With nothing on the topic, a set type is published as set.
        assert_eq!(
            decide(CmdVelStamped::Stamped, "/cmd_vel", &[], false, None),
            CmdVelOutput::Publish(CmdVelKind::TwistStamped)
        );
        assert_eq!(
            decide(
                CmdVelStamped::Unstamped,
                "/cmd_vel",
                &types(&[TWIST]),
                false,
                Some(CmdVelKind::Twist)
            ),
            CmdVelOutput::Publish(CmdVelKind::Twist)
        );
    }

    #[test]
    fn two_types_or_a_foreign_one_on_the_topic_are_refused_whatever_the_setting() {
        let both = types(&[TWIST, STAMPED]);
        for setting in [CmdVelStamped::Auto, CmdVelStamped::Stamped, CmdVelStamped::Unstamped] {
            let refused = decide(setting, "/cmd_vel", &both, false, None);
            assert!(
                matches!(refused, CmdVelOutput::Refused(ref why) if why.contains("two types")),
                "{refused:?}"
            );
            for ours in [None, Some(CmdVelKind::Twist), Some(CmdVelKind::TwistStamped)] {
                let foreign =
                    decide(setting, "/cmd_vel", &types(&["std_msgs/msg/String"]), false, ours);
                assert!(
                    matches!(foreign, CmdVelOutput::Refused(ref why) if why.contains("std_msgs/msg/String")),
                    "{foreign:?}"
                );
            }
        }
        // Publishing already, the other type appears: under auto the bridge
        // stops; with a set type the robot's is named with the fix.
        let auto = decide(CmdVelStamped::Auto, "/cmd_vel", &both, false, Some(CmdVelKind::Twist));
        assert!(
            matches!(auto, CmdVelOutput::Refused(ref why) if why.contains("carries geometry_msgs/msg/TwistStamped now")),
            "{auto:?}"
        );
        let set = decide(
            CmdVelStamped::Stamped,
            "/cmd_vel",
            &both,
            false,
            Some(CmdVelKind::TwistStamped),
        );
        assert!(
            matches!(set, CmdVelOutput::Refused(ref why) if why.contains("is geometry_msgs/msg/Twist on this robot") && why.contains("set it to false or auto")),
            "{set:?}"
        );
        // The graph naming only the bridge's own type, with more unnamed:
        // the robot's is the other.
        let own = types(&[STAMPED]);
        let inferred =
            decide(CmdVelStamped::Stamped, "/cmd_vel", &own, true, Some(CmdVelKind::TwistStamped));
        assert!(
            matches!(inferred, CmdVelOutput::Refused(ref why) if why.contains("is geometry_msgs/msg/Twist on this robot") && why.contains("set it to false or auto")),
            "{inferred:?}"
        );
        let auto = decide(CmdVelStamped::Auto, "/cmd_vel", &types(&[TWIST]), true, None);
        assert!(
            matches!(auto, CmdVelOutput::Refused(ref why) if why.contains("more than one type")),
            "{auto:?}"
        );
    }
}
