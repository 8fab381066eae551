//! Where the arm is for the base: the governor's zones, its turning circle
//! and its stop distance are the base's outline, so an arm reaching out of
//! it (the `home` pose puts the gripper 0.31 m ahead, `pick_front` 0.37 m)
//! would meet what they do not watch, and sweep it round in a turn. Its
//! links are placed from fresh joint states through the URDF at 50 Hz; the
//! base driver stops base motion while one lies outside the outline
//! (`arm_outside_outline`), or while the arm's pose is unknown.
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::governor::footprint::Footprint;
use crate::governor::safety::ArmReach;
use crate::robot::base_driver::BaseDriver;
use crate::robot::frames::BASE_FRAME;
use crate::robot::kinematics::Kinematics;
use crate::robot::{JointStates, SensorPort};

/// How far a link's frame may lie outside the outline and still count as
/// within, m: the check places the links' frames, not their shapes (the
/// fingertips reach 2.5 cm past the end effector's frame, a link's body a
/// few cm around its axis), and a tucked arm sits just behind the bumper.
pub const ARM_OUTLINE_TOLERANCE_M: f64 = 0.03;

/// The links the arm's joints move (not the fingers: the end effector's
/// frame stands for them), whose frames are checked against the outline.
pub fn arm_links(urdf: &Kinematics, arm_joints: &[String]) -> Vec<String> {
    urdf.articulated_links()
        .into_iter()
        .map(|(_, child)| child)
        .filter(|link| {
            let moving = urdf.limited_joints_moving(link);
            !moving.is_empty()
                && moving.iter().any(|j| arm_joints.contains(j))
                && moving.iter().all(|j| arm_joints.contains(j))
        })
        .collect()
}

/// Where `links` are for `footprint`, with the joints at `states`
/// (pure: unit-tested). A joint the path needs and `states` lacks makes
/// the pose unknown.
pub fn arm_reach(
    urdf: &Kinematics,
    links: &[String],
    states: &JointStates,
    footprint: &Footprint,
) -> ArmReach {
    let mut farthest: Option<(f64, (f64, f64))> = None;
    for link in links {
        let Ok(pose) = urdf.transform(BASE_FRAME, link, &|joint| states.position(joint)) else {
            return ArmReach::Unknown;
        };
        let (x, y) = (pose.translation.vector.x, pose.translation.vector.y);
        let beyond = footprint.distance_outside(x, y);
        if farthest.is_none_or(|(b, _)| beyond > b) {
            farthest = Some((beyond, (x, y)));
        }
    }
    match farthest {
        Some((beyond_m, link_at_m)) if beyond_m > ARM_OUTLINE_TOLERANCE_M => {
            ArmReach::Outside { beyond_m, link_at_m }
        }
        _ => ArmReach::Within,
    }
}

/// How high above the floor (base_footprint's z = 0) every arm link's
/// frame must stay on the way to a goal, m: the fingertips reach 2.5 cm
/// past the end effector's frame, and a link's body a few cm around its
/// axis. The lowest named pose, pick_front, holds the gripper 0.12 m up.
pub const ARM_FLOOR_CLEARANCE_M: f64 = 0.04;

/// The joint-space step between two checked points of a path, rad.
const PATH_STEP_RAD: f64 = 0.02;

/// Where a path of the arm dips lowest: the link, its frame's height above
/// the floor (m) and how far along the path (0 to 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Lowest {
    pub link: String,
    pub height_m: f64,
    pub at_fraction: f64,
}

/// The arm as its paths are checked against the floor: the URDF, the
/// links the arm's joints move, the arm's joints (in the order of the
/// positions given), and where any other joint stands.
pub struct ArmPaths<'a> {
    pub urdf: &'a Kinematics,
    pub links: &'a [String],
    pub arm_joints: &'a [String],
    pub other: &'a dyn Fn(&str) -> Option<f64>,
}

impl ArmPaths<'_> {
    /// The lowest point of the links on the straight joint-space path from
    /// `from` to `to` (a trajectory controller joins a synchronised motion
    /// so), checked every [`PATH_STEP_RAD`] of the joint that moves most.
    /// Pure: unit-tested. `None` if a link cannot be placed.
    pub fn lowest_on_path(&self, from: &[f64], to: &[f64]) -> Option<Lowest> {
        let largest = from.iter().zip(to).map(|(a, b)| (b - a).abs()).fold(0.0, f64::max);
        let steps = ((largest / PATH_STEP_RAD).ceil() as usize).clamp(1, 1000);
        let mut lowest: Option<Lowest> = None;
        for step in 0..=steps {
            let at_fraction = step as f64 / steps as f64;
            let position = |joint: &str| match self.arm_joints.iter().position(|j| j == joint) {
                Some(i) => Some(from[i] + (to[i] - from[i]) * at_fraction),
                None => (self.other)(joint),
            };
            for link in self.links {
                let height_m =
                    self.urdf.transform(BASE_FRAME, link, &position).ok()?.translation.vector.z;
                if lowest.as_ref().is_none_or(|l| height_m < l.height_m) {
                    lowest = Some(Lowest { link: link.clone(), height_m, at_fraction });
                }
            }
        }
        lowest
    }

    /// Refuses a motion of the arm that would take a link's frame nearer
    /// the floor than [`ARM_FLOOR_CLEARANCE_M`] (a swing into the floor
    /// levers the base up, or throws it), unless the arm already starts
    /// that low and the motion takes it no lower: an arm pushed down can
    /// always be raised.
    pub fn check_above_floor(&self, from: &[f64], to: &[f64]) -> Result<(), String> {
        let Some(lowest) = self.lowest_on_path(from, to) else {
            return Err(
                "the arm's links cannot be placed from the URDF and the joint states".into()
            );
        };
        if lowest.height_m >= ARM_FLOOR_CLEARANCE_M {
            return Ok(());
        }
        let start = self.lowest_on_path(from, from).map_or(f64::NEG_INFINITY, |l| l.height_m);
        if lowest.height_m >= start - 0.005 {
            return Ok(());
        }
        Err(format!(
            "the arm would reach into the floor: {} {:.3} m above it, {:.0} % of the way (links must stay {ARM_FLOOR_CLEARANCE_M} m above it); choose a higher pose",
            lowest.link,
            lowest.height_m,
            lowest.at_fraction * 100.0
        ))
    }
}

/// Tells the base driver where the arm is, every 20 ms, from joint states
/// no older than `sensors.joint_states.max_age_s` (older or missing: not
/// known). Returns at once on a robot with no arm.
pub async fn watch_arm_reach(
    robot: Arc<dyn SensorPort>,
    base: Arc<BaseDriver>,
    urdf: Arc<Kinematics>,
    config: Arc<Config>,
) {
    let arm_joints = &config.actuators.arm_joints;
    if config.actuators.arm_action.is_empty() || arm_joints.is_empty() {
        return;
    }
    let links = arm_links(&urdf, arm_joints);
    if links.is_empty() {
        tracing::warn!("the arm's joints ({}) move no link of the URDF: the base does not check where the arm is", arm_joints.join(", "));
        return;
    }
    let footprint = config.safety.footprint();
    let max_age = Duration::from_secs_f64(config.sensors.joint_states.max_age_s);
    let mut interval = tokio::time::interval(Duration::from_millis(20));
    let mut said: Option<bool> = None;
    loop {
        interval.tick().await;
        let now = robot.now();
        let reach = match robot.joint_states() {
            Some(states) if states.age(now).effective() <= max_age => {
                arm_reach(&urdf, &links, &states.value, &footprint)
            }
            _ => ArmReach::Unknown,
        };
        let outside = matches!(reach, ArmReach::Outside { .. });
        if said != Some(outside) {
            said = Some(outside);
            if let ArmReach::Outside { beyond_m, link_at_m: (x, y) } = reach {
                tracing::info!("the arm reaches {beyond_m:.2} m outside the base's outline (a link at {x:.2} m ahead, {y:+.2} m left): base motion waits until it is within");
            }
        }
        base.set_arm_reach(reach, now.instant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOOTPRINT: Footprint =
        Footprint::Rectangle { front_m: 0.14, rear_m: 0.12, half_width_m: 0.14 };

    fn urdf() -> Kinematics {
        Kinematics::from_urdf(crate::tools::testing::URDF).unwrap()
    }

    fn joints(arm: [f64; 4]) -> JointStates {
        let names = ["joint1", "joint2", "joint3", "joint4"];
        JointStates {
            names: names.iter().map(|n| n.to_string()).collect(),
            positions: arm.to_vec(),
            velocities: vec![0.0; 4],
            efforts: vec![0.0; 4],
        }
    }

    fn arm() -> Vec<String> {
        ["joint1", "joint2", "joint3", "joint4"].iter().map(|j| j.to_string()).collect()
    }

    #[test]
    fn the_arm_links_are_those_its_joints_move_but_the_fingers() {
        let links = arm_links(&urdf(), &arm());
        assert!(
            links.contains(&"end_effector_link".to_string())
                && links.contains(&"link5".to_string()),
            "{links:?}"
        );
        assert!(
            !links.iter().any(|l| l.starts_with("gripper") || l.starts_with("head")),
            "{links:?}"
        );
    }

    fn named(pose: &str) -> [f64; 4] {
        crate::tools::interact::NAMED_POSES
            .iter()
            .find(|(name, _, _)| *name == pose)
            .map(|(_, joints, _)| *joints)
            .unwrap()
    }

    #[test]
    fn a_path_into_the_floor_is_refused_and_one_out_of_it_is_not() {
        let (urdf, links, arm) = (urdf(), arm_links(&urdf(), &arm()), arm());
        let none = |_: &str| None;
        let paths = ArmPaths { urdf: &urdf, links: &links, arm_joints: &arm, other: &none };
        // Every named pose, reached from stow, keeps the arm above the floor.
        for (name, pose, _) in crate::tools::interact::NAMED_POSES {
            assert_eq!(paths.check_above_floor(&named("stow"), pose), Ok(()), "{name}");
        }
        // Reaching down in front (a chaos run's pose: the end effector 3 mm
        // under the floor) is refused, naming the link and the height.
        let down = [-1.356, 1.444, 0.0001, 0.8206];
        let refused = paths.check_above_floor(&named("stow"), &down).expect_err("into the floor");
        assert!(refused.contains("end_effector_link") && refused.contains("floor"), "{refused}");
        let lowest = paths.lowest_on_path(&down, &down).unwrap();
        assert!(lowest.height_m < 0.0 && lowest.link == "end_effector_link", "{lowest:?}");
        // The way back up from there is allowed; deeper is not.
        assert_eq!(paths.check_above_floor(&down, &named("stow")), Ok(()));
        let deeper = [-1.356, 1.571, -0.2, 0.6];
        assert!(paths.check_above_floor(&down, &deeper).is_err());
        // Between two poses well above the floor (0.14 m and 0.11 m), the
        // straight joint-space path dips to about 0.01 m: caught on the way.
        let (high, other_high) = ([0.0, 1.045, 1.085, 1.029], [0.0, 1.264, -0.152, -1.266]);
        for pose in [high, other_high] {
            assert_eq!(paths.check_above_floor(&pose, &pose), Ok(()));
        }
        assert!(paths.check_above_floor(&high, &other_high).is_err());
        let dip = paths.lowest_on_path(&high, &other_high).unwrap();
        assert!(dip.at_fraction > 0.2 && dip.at_fraction < 0.8 && dip.height_m < 0.02, "{dip:?}");
    }

    #[test]
    fn stowed_the_arm_is_within_reaching_out_it_is_not() {
        let (urdf, links) = (urdf(), arm_links(&urdf(), &arm()));
        assert_eq!(
            arm_reach(&urdf, &links, &joints(named("stow")), &FOOTPRINT),
            ArmReach::Within,
            "stow: the pose to drive in"
        );
        for pose in ["home", "ready", "pick_front"] {
            assert!(
                matches!(
                    arm_reach(&urdf, &links, &joints(named(pose)), &FOOTPRINT),
                    ArmReach::Outside { .. }
                ),
                "{pose}"
            );
        }
        let ArmReach::Outside { beyond_m, link_at_m: (x, _) } =
            arm_reach(&urdf, &links, &joints(named("pick_front")), &FOOTPRINT)
        else {
            panic!("pick_front is outside")
        };
        assert!(beyond_m > 0.15 && x > 0.3, "{beyond_m} at {x}");
        let ArmReach::Outside { link_at_m: (_, y), .. } =
            arm_reach(&urdf, &links, &joints([1.57, 0.0, 0.0, 0.0]), &FOOTPRINT)
        else {
            panic!("turned to the side, outstretched")
        };
        assert!(y > 0.2, "to the left: {y}");
        let mut missing = joints([0.0; 4]);
        missing.names.pop();
        missing.positions.pop();
        assert_eq!(
            arm_reach(&urdf, &links, &missing, &FOOTPRINT),
            ArmReach::Unknown,
            "a joint missing: not known"
        );
    }
}
