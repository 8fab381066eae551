//! Joint limits read from the robot's URDF (the single source of truth for
//! them, see `urdf/aicc_bot.urdf`), and the checks every joint goal passes
//! before it reaches a controller: position within `[lower, upper]`,
//! velocity within the joint's limit, and motion durations long enough that
//! the velocity limit is never exceeded.
//!
//! Errors name the joint, the field and the limit, so that an agent that
//! asked for something impossible is told exactly what and why.

use std::fmt;

use thiserror::Error;

/// The kind of a movable URDF joint. `fixed` joints are not listed at all;
/// `planar` and `floating` joints are refused (see [`UrdfError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JointKind {
    /// Rotates about its axis between `lower` and `upper` (rad).
    Revolute,
    /// Rotates about its axis without position limits (rad).
    Continuous,
    /// Slides along its axis between `lower` and `upper` (m).
    Prismatic,
}

impl JointKind {
    /// Unit of a position of this joint: "rad" or "m".
    pub fn position_unit(self) -> &'static str {
        match self {
            JointKind::Revolute | JointKind::Continuous => "rad",
            JointKind::Prismatic => "m",
        }
    }

    /// Unit of a velocity of this joint: "rad/s" or "m/s".
    pub fn velocity_unit(self) -> &'static str {
        match self {
            JointKind::Revolute | JointKind::Continuous => "rad/s",
            JointKind::Prismatic => "m/s",
        }
    }

    /// Unit of an acceleration of this joint: "rad/s^2" or "m/s^2".
    pub fn acceleration_unit(self) -> &'static str {
        match self {
            JointKind::Revolute | JointKind::Continuous => "rad/s^2",
            JointKind::Prismatic => "m/s^2",
        }
    }

    /// Unit of an effort limit: N*m for rotating joints, N for sliding ones.
    pub fn effort_unit(self) -> &'static str {
        match self {
            JointKind::Revolute | JointKind::Continuous => "N*m",
            JointKind::Prismatic => "N",
        }
    }

    /// The URDF `type` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            JointKind::Revolute => "revolute",
            JointKind::Continuous => "continuous",
            JointKind::Prismatic => "prismatic",
        }
    }
}

impl fmt::Display for JointKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A URDF `<mimic>`: this joint follows `joint` as
/// `position = multiplier * position(joint) + offset`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Mimic {
    pub joint: String,
    pub multiplier: f64,
    pub offset: f64,
}

/// The limits of one movable joint, as the URDF states them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JointLimit {
    pub name: String,
    pub kind: JointKind,
    /// Lowest allowed position; `None` for continuous joints.
    pub lower: Option<f64>,
    /// Highest allowed position; `None` for continuous joints.
    pub upper: Option<f64>,
    /// Largest speed, rad/s or m/s; always finite and positive: the
    /// URDF's, or lower where the configuration caps it
    /// ([`JointLimits::with_max_velocities`]).
    pub max_velocity: f64,
    /// Largest effort, N*m or N; finite and non-negative.
    pub max_effort: f64,
    /// Largest acceleration, rad/s^2 or m/s^2: not in the URDF, set from
    /// the configuration ([`JointLimits::with_max_accelerations`]); None:
    /// goals for the joint are refused.
    pub max_acceleration: Option<f64>,
    /// The joint this one follows, if any.
    pub mimic: Option<Mimic>,
}

impl JointLimit {
    /// Whether `value` is a finite position within this joint's range.
    pub fn contains(&self, value: f64) -> bool {
        value.is_finite()
            && self.lower.is_none_or(|lower| value >= lower)
            && self.upper.is_none_or(|upper| value <= upper)
    }
}

/// Why a URDF could not be turned into joint limits. Each variant names the
/// joint (and the attribute) at fault.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum UrdfError {
    /// The text is not well-formed XML.
    #[error("the URDF is not well-formed XML: {0}")]
    Xml(String),
    /// The document's root element is not `<robot>`.
    #[error("the URDF's root element is <{0}>, expected <robot>")]
    NotARobot(String),
    /// A `<joint>` lacks a required attribute.
    #[error("joint {joint}: missing attribute '{attribute}'")]
    MissingAttribute { joint: String, attribute: &'static str },
    /// A revolute or prismatic joint has no `<limit>` element (URDF requires one).
    #[error("joint {joint} ({kind}): missing <limit> element")]
    MissingLimit { joint: String, kind: JointKind },
    /// A numeric attribute does not parse as a finite number.
    #[error("joint {joint}: {field} = '{text}' is not a finite number")]
    BadNumber { joint: String, field: &'static str, text: String },
    /// A limit value is out of its domain (e.g. `lower > upper`, velocity <= 0).
    #[error("joint {joint}: {field} {problem}")]
    BadLimit { joint: String, field: &'static str, problem: String },
    /// `planar`, `floating` or an unknown joint type: the governor cannot limit it.
    #[error("joint {joint}: type '{joint_type}' is not supported (revolute, continuous, prismatic or fixed)")]
    UnsupportedJointType { joint: String, joint_type: String },
    /// Two joints share a name.
    #[error("joint {0} is defined twice")]
    DuplicateJoint(String),
    /// A `<mimic>` names a joint that is not a movable joint of this robot.
    #[error("joint {joint}: mimics '{target}', which is not a movable joint of this robot")]
    UnknownMimicTarget { joint: String, target: String },
}

/// Why a joint position, velocity or motion was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum JointError {
    /// No movable joint has this name.
    #[error("unknown joint '{name}'; known joints: {}", known.join(", "))]
    UnknownJoint { name: String, known: Vec<String> },
    /// The value is NaN or infinite.
    #[error("joint {joint}: {field} is {value}, not a finite number")]
    NotFinite { joint: String, field: &'static str, value: f64 },
    /// A position outside the joint's `[lower, upper]`.
    #[error("joint {joint}: {field} {value} {unit} is outside the limits [lower {lower}, upper {upper}] {unit}")]
    OutOfRange {
        joint: String,
        field: &'static str,
        value: f64,
        lower: f64,
        upper: f64,
        unit: &'static str,
    },
    /// Moving `leader` to `leader_value` would put the joint `joint`, which
    /// mimics it, outside its own limits.
    #[error(
        "joint {leader}: position {leader_value} would move joint {joint} (which mimics it) to {value} {unit}, outside its limits [lower {lower}, upper {upper}] {unit}"
    )]
    FollowerOutOfRange {
        leader: String,
        leader_value: f64,
        joint: String,
        value: f64,
        lower: f64,
        upper: f64,
        unit: &'static str,
    },
    /// A requested velocity that is zero or negative where a speed is needed.
    #[error("joint {joint}: {field} {value} {unit} must be positive")]
    NotPositive { joint: String, field: &'static str, value: f64, unit: &'static str },
    /// A trajectory segment that would move the joint faster than its limit.
    #[error("joint {joint}: waypoint {waypoint} needs {velocity:.3} {unit}, above the limit of {max_velocity} {unit}")]
    TooFast { joint: String, waypoint: usize, velocity: f64, max_velocity: f64, unit: &'static str },
    /// A trajectory segment that would accelerate the joint beyond its limit.
    #[error("joint {joint}: waypoint {waypoint} needs {acceleration:.3} {unit}, above the acceleration limit of {max_acceleration} {unit}")]
    TooHardAcceleration {
        joint: String,
        waypoint: usize,
        acceleration: f64,
        max_acceleration: f64,
        unit: &'static str,
    },
    /// A joint without an acceleration limit cannot be given a goal.
    #[error("joint {joint}: no acceleration limit is configured (actuators.head_max_accel_radps2, arm_max_accel_radps2, gripper_max_accel_mps2): its goals are refused")]
    NoAccelerationLimit { joint: String },
    /// A trajectory whose last waypoint is not at rest: the controller
    /// would hold there with an instant stop.
    #[error("joint {joint}: the last waypoint has velocity {velocity} {unit}; a trajectory must end at rest")]
    EndsMoving { joint: String, velocity: f64, unit: &'static str },
    /// A force or torque above the joint's effort limit.
    #[error("joint {joint}: effort {effort} {unit} exceeds the limit of {max_effort} {unit}")]
    EffortTooHigh { joint: String, effort: f64, max_effort: f64, unit: &'static str },
    /// A trajectory that is not a list of timed waypoints, one position per joint.
    #[error("trajectory: {0}")]
    MalformedTrajectory(String),
}

/// The limits of every movable joint of a robot, in URDF order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JointLimits {
    joints: Vec<JointLimit>,
}

impl JointLimits {
    /// Parses every non-fixed `<joint>` that is a direct child of `<robot>`
    /// (joints named inside `<transmission>` blocks are references, not
    /// definitions). Follows the URDF specification: `lower`/`upper` default
    /// to 0 when omitted, `effort` and `velocity` are required; continuous
    /// joints have no position limits (any `lower`/`upper` on them is
    /// ignored) and, if they have no `<limit>`, are refused because the
    /// governor needs a velocity limit for every joint.
    pub fn from_urdf(text: &str) -> Result<JointLimits, UrdfError> {
        let document =
            roxmltree::Document::parse(text).map_err(|e| UrdfError::Xml(e.to_string()))?;
        let root = document.root_element();
        if !root.has_tag_name("robot") {
            return Err(UrdfError::NotARobot(root.tag_name().name().to_string()));
        }
        let mut joints: Vec<JointLimit> = Vec::new();
        for node in root.children().filter(|n| n.has_tag_name("joint")) {
            let name = node.attribute("name").ok_or(UrdfError::MissingAttribute {
                joint: "<unnamed>".into(),
                attribute: "name",
            })?;
            let joint_type = node.attribute("type").ok_or_else(|| UrdfError::MissingAttribute {
                joint: name.into(),
                attribute: "type",
            })?;
            let kind = match joint_type {
                "fixed" => continue,
                "revolute" => JointKind::Revolute,
                "continuous" => JointKind::Continuous,
                "prismatic" => JointKind::Prismatic,
                other => {
                    return Err(UrdfError::UnsupportedJointType {
                        joint: name.into(),
                        joint_type: other.into(),
                    })
                }
            };
            if joints.iter().any(|j| j.name == name) {
                return Err(UrdfError::DuplicateJoint(name.into()));
            }
            let limit = node
                .children()
                .find(|n| n.has_tag_name("limit"))
                .ok_or_else(|| UrdfError::MissingLimit { joint: name.into(), kind })?;
            let number = |element: roxmltree::Node<'_, '_>,
                          field: &'static str,
                          attribute: &str,
                          default: Option<f64>| {
                attribute_number(element, name, field, attribute, default)
            };
            let max_velocity = number(limit, "limit.velocity", "velocity", None)?;
            let max_effort = number(limit, "limit.effort", "effort", None)?;
            if max_velocity <= 0.0 {
                return Err(UrdfError::BadLimit {
                    joint: name.into(),
                    field: "limit.velocity",
                    problem: format!("{max_velocity} must be positive"),
                });
            }
            if max_effort < 0.0 {
                return Err(UrdfError::BadLimit {
                    joint: name.into(),
                    field: "limit.effort",
                    problem: format!("{max_effort} must not be negative"),
                });
            }
            let (lower, upper) = match kind {
                JointKind::Continuous => (None, None),
                JointKind::Revolute | JointKind::Prismatic => {
                    let lower = number(limit, "limit.lower", "lower", Some(0.0))?;
                    let upper = number(limit, "limit.upper", "upper", Some(0.0))?;
                    if lower > upper {
                        return Err(UrdfError::BadLimit {
                            joint: name.into(),
                            field: "limit.lower",
                            problem: format!("{lower} is above limit.upper {upper}"),
                        });
                    }
                    (Some(lower), Some(upper))
                }
            };
            let mimic = match node.children().find(|n| n.has_tag_name("mimic")) {
                None => None,
                Some(m) => Some(Mimic {
                    joint: m
                        .attribute("joint")
                        .ok_or_else(|| UrdfError::MissingAttribute {
                            joint: name.into(),
                            attribute: "mimic.joint",
                        })?
                        .to_string(),
                    multiplier: number(m, "mimic.multiplier", "multiplier", Some(1.0))?,
                    offset: number(m, "mimic.offset", "offset", Some(0.0))?,
                }),
            };
            joints.push(JointLimit {
                name: name.into(),
                kind,
                lower,
                upper,
                max_velocity,
                max_effort,
                max_acceleration: None,
                mimic,
            });
        }
        for joint in &joints {
            if let Some(mimic) = &joint.mimic {
                if mimic.joint == joint.name || !joints.iter().any(|j| j.name == mimic.joint) {
                    return Err(UrdfError::UnknownMimicTarget {
                        joint: joint.name.clone(),
                        target: mimic.joint.clone(),
                    });
                }
            }
        }
        Ok(JointLimits { joints })
    }

    /// Every movable joint, in URDF order.
    pub fn iter(&self) -> impl Iterator<Item = &JointLimit> {
        self.joints.iter()
    }

    /// The names of every movable joint, in URDF order.
    pub fn names(&self) -> Vec<String> {
        self.joints.iter().map(|j| j.name.clone()).collect()
    }

    /// The limits of `name`, if it is a movable joint.
    pub fn get(&self, name: &str) -> Option<&JointLimit> {
        self.joints.iter().find(|j| j.name == name)
    }

    /// The limits of `name`, or an error listing the known joints.
    pub fn joint(&self, name: &str) -> Result<&JointLimit, JointError> {
        self.get(name)
            .ok_or_else(|| JointError::UnknownJoint { name: name.into(), known: self.names() })
    }

    /// The joints that mimic `name` (e.g. the right gripper finger for the left one).
    pub fn followers(&self, name: &str) -> impl Iterator<Item = &JointLimit> + '_ {
        let name = name.to_string();
        self.joints.iter().filter(move |j| j.mimic.as_ref().is_some_and(|m| m.joint == name))
    }

    /// These limits with the acceleration limit of each named joint (and of
    /// the joints that mimic it) set: the URDF states none.
    pub fn with_max_accelerations(mut self, limits: &[(String, f64)]) -> Result<Self, JointError> {
        for (name, max_acceleration) in limits {
            let joint = self.joint(name)?;
            check_configured_limit(
                name,
                "max_acceleration",
                *max_acceleration,
                joint.kind.acceleration_unit(),
            )?;
            let followers: Vec<String> = self.followers(name).map(|f| f.name.clone()).collect();
            for joint in
                self.joints.iter_mut().filter(|j| j.name == *name || followers.contains(&j.name))
            {
                joint.max_acceleration = Some(*max_acceleration);
            }
        }
        Ok(self)
    }

    /// These limits with the speed of each named joint (and of the joints
    /// that mimic it, scaled by their multipliers) capped: the lower of
    /// the URDF's limit and the cap. A fast joint can be within its motor's
    /// limit and still too fast for what carries it (an arm's full-speed
    /// swing throws a small base).
    pub fn with_max_velocities(mut self, caps: &[(String, f64)]) -> Result<Self, JointError> {
        for (name, cap) in caps {
            let joint = self.joint(name)?;
            check_configured_limit(name, "max_velocity", *cap, joint.kind.velocity_unit())?;
            for joint in self.joints.iter_mut() {
                let scale = if joint.name == *name {
                    1.0
                } else {
                    match &joint.mimic {
                        Some(mimic) if mimic.joint == *name => mimic.multiplier.abs(),
                        _ => continue,
                    }
                };
                let capped = cap * scale;
                if capped > 0.0 && capped < joint.max_velocity {
                    joint.max_velocity = capped;
                }
            }
        }
        Ok(self)
    }

    /// Accepts `value` as a position goal for `name` if it is finite and
    /// within `[lower, upper]`, and every joint that mimics `name` would also
    /// stay within its own limits.
    pub fn check_position(&self, name: &str, value: f64) -> Result<(), JointError> {
        let joint = self.joint(name)?;
        check_in_range(joint, "position", value)?;
        for follower in self.followers(name) {
            let mimic = follower.mimic.as_ref().expect("followers mimic");
            let follower_value = mimic.multiplier * value + mimic.offset;
            if !follower.contains(follower_value) {
                return Err(JointError::FollowerOutOfRange {
                    leader: name.into(),
                    leader_value: value,
                    joint: follower.name.clone(),
                    value: follower_value,
                    lower: follower.lower.unwrap_or(f64::NEG_INFINITY),
                    upper: follower.upper.unwrap_or(f64::INFINITY),
                    unit: follower.kind.position_unit(),
                });
            }
        }
        Ok(())
    }

    /// Limits a requested velocity of `name` to `[-max_velocity, max_velocity]`:
    /// the applied value, and whether it differs from the request.
    /// A NaN or infinite request is an error, not a clamp.
    pub fn clamp_velocity(&self, name: &str, requested: f64) -> Result<(f64, bool), JointError> {
        let joint = self.joint(name)?;
        if !requested.is_finite() {
            return Err(JointError::NotFinite {
                joint: name.into(),
                field: "velocity",
                value: requested,
            });
        }
        let applied = requested.clamp(-joint.max_velocity, joint.max_velocity);
        Ok((applied, applied != requested))
    }

    /// How long a move of `name` from `from` to `to` must take at
    /// `requested_velocity` (a speed; clamped to the joint's limit), seconds.
    /// The goal `to` must be a valid position; `from` (the measured state)
    /// need only be finite, since sensors may read slightly outside the
    /// limits. The result is never shorter than `|to - from| / max_velocity`:
    /// `|to - from| / duration <= max_velocity` holds exactly in f64.
    pub fn plan_duration(
        &self,
        name: &str,
        from: f64,
        to: f64,
        requested_velocity: f64,
    ) -> Result<f64, JointError> {
        let joint = self.joint(name)?;
        if !from.is_finite() {
            return Err(JointError::NotFinite {
                joint: name.into(),
                field: "start position",
                value: from,
            });
        }
        self.check_position(name, to)?;
        if !requested_velocity.is_finite() {
            return Err(JointError::NotFinite {
                joint: name.into(),
                field: "velocity",
                value: requested_velocity,
            });
        }
        if requested_velocity <= 0.0 {
            return Err(JointError::NotPositive {
                joint: name.into(),
                field: "velocity",
                value: requested_velocity,
                unit: joint.kind.velocity_unit(),
            });
        }
        let speed = requested_velocity.min(joint.max_velocity);
        let distance = (to - from).abs();
        if distance == 0.0 {
            return Ok(0.0);
        }
        let mut duration = distance / speed;
        // Division rounds to nearest; step up until the check holds exactly.
        while distance / duration > joint.max_velocity || distance / duration > speed {
            duration = duration.next_up();
        }
        Ok(duration)
    }
}

impl JointLimits {
    /// Accepts `effort` as a force or torque limit for `name`.
    pub fn check_effort(&self, name: &str, effort: f64) -> Result<(), JointError> {
        let joint = self.joint(name)?;
        if !effort.is_finite() {
            return Err(JointError::NotFinite {
                joint: name.into(),
                field: "effort",
                value: effort,
            });
        }
        if effort <= 0.0 {
            return Err(JointError::NotPositive {
                joint: name.into(),
                field: "effort",
                value: effort,
                unit: joint.kind.effort_unit(),
            });
        }
        if effort > joint.max_effort {
            return Err(JointError::EffortTooHigh {
                joint: name.into(),
                effort,
                max_effort: joint.max_effort,
                unit: joint.kind.effort_unit(),
            });
        }
        Ok(())
    }
}

/// A finite number from `attribute` of `element`, `default` when it is absent.
fn attribute_number(
    element: roxmltree::Node<'_, '_>,
    joint: &str,
    field: &'static str,
    attribute: &str,
    default: Option<f64>,
) -> Result<f64, UrdfError> {
    match element.attribute(attribute) {
        None => default
            .ok_or_else(|| UrdfError::MissingAttribute { joint: joint.into(), attribute: field }),
        Some(text) => match text.trim().parse::<f64>() {
            Ok(value) if value.is_finite() => Ok(value),
            _ => Err(UrdfError::BadNumber { joint: joint.into(), field, text: text.into() }),
        },
    }
}

fn check_in_range(joint: &JointLimit, field: &'static str, value: f64) -> Result<(), JointError> {
    if !value.is_finite() {
        return Err(JointError::NotFinite { joint: joint.name.clone(), field, value });
    }
    if !joint.contains(value) {
        return Err(JointError::OutOfRange {
            joint: joint.name.clone(),
            field,
            value,
            lower: joint.lower.unwrap_or(f64::NEG_INFINITY),
            upper: joint.upper.unwrap_or(f64::INFINITY),
            unit: joint.kind.position_unit(),
        });
    }
    Ok(())
}

/// A limit the configuration sets for `joint`: a finite number above zero.
fn check_configured_limit(
    joint: &str,
    field: &'static str,
    value: f64,
    unit: &'static str,
) -> Result<(), JointError> {
    if !value.is_finite() {
        return Err(JointError::NotFinite { joint: joint.into(), field, value });
    }
    if value <= 0.0 {
        return Err(JointError::NotPositive { joint: joint.into(), field, value, unit });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const URDF: &str = include_str!("../../../../urdf/aicc_bot.urdf");

    fn robot() -> JointLimits {
        JointLimits::from_urdf(URDF).expect("the robot's URDF parses")
    }

    #[test]
    fn efforts_above_the_urdf_limit_are_refused() {
        let l = robot();
        let max = l.get("gripper_left_joint").unwrap().max_effort;
        assert_eq!(l.check_effort("gripper_left_joint", max), Ok(()));
        assert!(matches!(
            l.check_effort("gripper_left_joint", max + 0.1),
            Err(JointError::EffortTooHigh { .. })
        ));
        assert!(matches!(
            l.check_effort("gripper_left_joint", 0.0),
            Err(JointError::NotPositive { .. })
        ));
        assert!(matches!(
            l.check_effort("gripper_left_joint", f64::INFINITY),
            Err(JointError::NotFinite { .. })
        ));
    }

    #[test]
    fn a_configured_speed_cap_lowers_the_urdf_limit_and_never_raises_it() {
        let caps = [("joint1".to_string(), 1.5), ("gripper_left_joint".to_string(), 1.0)];
        let l = robot().with_max_velocities(&caps).unwrap();
        assert_eq!(l.get("joint1").unwrap().max_velocity, 1.5);
        assert_eq!(l.clamp_velocity("joint1", 4.0), Ok((1.5, true)));
        assert!((l.plan_duration("joint1", 0.0, 1.5, 10.0).unwrap() - 1.0).abs() < 1e-9);
        // The others keep the URDF's; a cap above it changes nothing.
        assert_eq!(
            l.get("joint2").unwrap().max_velocity,
            robot().get("joint2").unwrap().max_velocity
        );
        let urdf_gripper = robot().get("gripper_left_joint").unwrap().max_velocity;
        assert_eq!(l.get("gripper_left_joint").unwrap().max_velocity, urdf_gripper);
        let half = [("gripper_left_joint".to_string(), urdf_gripper / 2.0)];
        let l = robot().with_max_velocities(&half).unwrap();
        // The mimicking finger is capped with its leader.
        for finger in ["gripper_left_joint", "gripper_right_joint"] {
            assert_eq!(l.get(finger).unwrap().max_velocity, urdf_gripper / 2.0, "{finger}");
        }
        for bad in [0.0, -1.0, f64::NAN] {
            assert!(robot().with_max_velocities(&[("joint1".to_string(), bad)]).is_err(), "{bad}");
        }
        assert!(robot().with_max_velocities(&[("no_such_joint".to_string(), 1.0)]).is_err());
    }

    fn assert_limit(
        limits: &JointLimits,
        name: &str,
        kind: JointKind,
        range: Option<(f64, f64)>,
        velocity: f64,
        effort: f64,
    ) {
        let j = limits.get(name).unwrap_or_else(|| panic!("{name} is listed"));
        assert_eq!(j.kind, kind, "{name}");
        assert_eq!(j.lower, range.map(|r| r.0), "{name} lower");
        assert_eq!(j.upper, range.map(|r| r.1), "{name} upper");
        assert_eq!(j.max_velocity, velocity, "{name} velocity");
        assert_eq!(j.max_effort, effort, "{name} effort");
    }

    #[test]
    fn the_robot_urdf_has_the_stated_limits() {
        let l = robot();
        assert_eq!(
            l.names(),
            [
                "wheel_left_joint",
                "wheel_right_joint",
                "head_pan_joint",
                "head_tilt_joint",
                "joint1",
                "joint2",
                "joint3",
                "joint4",
                "gripper_left_joint",
                "gripper_right_joint"
            ],
            "every non-fixed joint, in file order, and no fixed one"
        );
        assert_limit(&l, "wheel_left_joint", JointKind::Continuous, None, 8.0, 1.5);
        assert_limit(&l, "wheel_right_joint", JointKind::Continuous, None, 8.0, 1.5);
        assert_limit(&l, "head_pan_joint", JointKind::Revolute, Some((-2.5, 2.5)), 3.0, 1.5);
        assert_limit(&l, "head_tilt_joint", JointKind::Revolute, Some((-0.6, 1.2)), 3.0, 1.5);
        assert_limit(&l, "joint1", JointKind::Revolute, Some((-2.827, 2.827)), 4.8, 4.1);
        assert_limit(&l, "joint2", JointKind::Revolute, Some((-1.791, 1.571)), 4.8, 4.1);
        assert_limit(&l, "joint3", JointKind::Revolute, Some((-0.942, 1.382)), 4.8, 4.1);
        assert_limit(&l, "joint4", JointKind::Revolute, Some((-1.791, 2.042)), 4.8, 4.1);
        assert_limit(&l, "gripper_left_joint", JointKind::Prismatic, Some((0.0, 0.03)), 0.05, 10.0);
        assert_limit(
            &l,
            "gripper_right_joint",
            JointKind::Prismatic,
            Some((0.0, 0.03)),
            0.05,
            10.0,
        );
        assert_eq!(
            l.get("gripper_right_joint").unwrap().mimic,
            Some(Mimic { joint: "gripper_left_joint".into(), multiplier: 1.0, offset: 0.0 })
        );
        assert!(l.iter().filter(|j| j.name != "gripper_right_joint").all(|j| j.mimic.is_none()));
        assert_eq!(
            l.followers("gripper_left_joint").map(|j| j.name.as_str()).collect::<Vec<_>>(),
            ["gripper_right_joint"]
        );
        for fixed in [
            "base_joint",
            "camera_joint",
            "camera_optical_joint",
            "arm_base_joint",
            "end_effector_joint",
            "bumper_joint",
        ] {
            assert!(l.get(fixed).is_none(), "{fixed} is fixed");
        }
    }

    #[test]
    fn positions_within_limits_are_accepted_including_the_bounds() {
        let l = robot();
        for (name, value) in [
            ("head_pan_joint", -2.5),
            ("head_pan_joint", 2.5),
            ("head_tilt_joint", 1.2),
            ("head_tilt_joint", -0.6),
            ("joint1", 0.0),
            ("joint2", 1.571),
            ("joint3", -0.942),
            ("joint4", 2.042),
            ("gripper_left_joint", 0.03),
            ("gripper_right_joint", 0.0),
            ("wheel_left_joint", 1.0e6),
        ] {
            assert_eq!(l.check_position(name, value), Ok(()), "{name} = {value}");
        }
    }

    #[test]
    fn out_of_range_goals_are_refused_with_joint_field_bounds_and_unit() {
        let l = robot();
        let err = l.check_position("head_tilt_joint", 1.3).unwrap_err();
        assert_eq!(
            err,
            JointError::OutOfRange {
                joint: "head_tilt_joint".into(),
                field: "position",
                value: 1.3,
                lower: -0.6,
                upper: 1.2,
                unit: "rad"
            }
        );
        let text = err.to_string();
        assert!(
            text.contains("head_tilt_joint")
                && text.contains("position")
                && text.contains("-0.6")
                && text.contains("1.2")
                && text.contains("rad"),
            "{text}"
        );

        let text = l.check_position("gripper_left_joint", 0.05).unwrap_err().to_string();
        assert!(
            text.contains("gripper_left_joint") && text.contains("0.03") && text.contains(" m"),
            "{text}"
        );
        assert!(!text.contains("rad"), "prismatic joints are in metres: {text}");

        assert!(l.check_position("joint1", 2.828).is_err());
        assert!(l.check_position("joint2", -1.8).is_err());
        assert!(l.check_position("joint3", 1.4).is_err());
        assert!(l.check_position("joint4", -1.8).is_err());
        assert!(l.check_position("head_pan_joint", -2.5000001).is_err());
        assert!(l.check_position("gripper_right_joint", -0.001).is_err());
    }

    #[test]
    fn non_finite_positions_are_refused() {
        let l = robot();
        for value in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = l.check_position("wheel_left_joint", value).unwrap_err();
            assert!(
                matches!(err, JointError::NotFinite { ref joint, field: "position", .. } if joint == "wheel_left_joint"),
                "{err:?}"
            );
            assert!(l.check_position("joint1", value).is_err());
        }
        assert!(l.check_position("joint1", f64::NAN).unwrap_err().to_string().contains("NaN"));
    }

    #[test]
    fn unknown_joints_are_refused_with_the_list_of_known_ones() {
        let l = robot();
        let err = l.check_position("elbow", 0.0).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("'elbow'")
                && text.contains("joint1")
                && text.contains("gripper_left_joint")
                && text.contains("head_pan_joint"),
            "{text}"
        );
        assert!(!text.contains("base_joint,"), "fixed joints are not offered: {text}");
        assert!(l.clamp_velocity("elbow", 1.0).is_err());
        assert!(l.plan_duration("elbow", 0.0, 1.0, 1.0).is_err());
        assert!(l.check_position("camera_joint", 0.0).is_err(), "fixed joints cannot be commanded");
    }

    #[test]
    fn mimic_followers_must_stay_within_their_own_limits() {
        let urdf = r#"<robot name="r">
            <joint name="a" type="prismatic"><limit lower="0" upper="0.04" effort="1" velocity="0.1"/></joint>
            <joint name="b" type="prismatic"><limit lower="0" upper="0.03" effort="1" velocity="0.1"/>
              <mimic joint="a" multiplier="1" offset="0"/></joint>
        </robot>"#;
        let l = JointLimits::from_urdf(urdf).unwrap();
        assert_eq!(l.check_position("a", 0.03), Ok(()));
        let err = l.check_position("a", 0.035).unwrap_err();
        assert!(
            matches!(err, JointError::FollowerOutOfRange { ref joint, .. } if joint == "b"),
            "{err:?}"
        );
        assert!(err.to_string().contains("joint b"), "{err}");
    }

    #[test]
    fn velocities_are_clamped_to_the_joint_limit() {
        let l = robot();
        assert_eq!(l.clamp_velocity("joint1", 10.0), Ok((4.8, true)));
        assert_eq!(l.clamp_velocity("joint1", -10.0), Ok((-4.8, true)));
        assert_eq!(l.clamp_velocity("joint1", 1.0), Ok((1.0, false)));
        assert_eq!(l.clamp_velocity("gripper_left_joint", 0.2), Ok((0.05, true)));
        assert_eq!(l.clamp_velocity("head_pan_joint", 3.0), Ok((3.0, false)));
        assert!(matches!(
            l.clamp_velocity("joint1", f64::NAN),
            Err(JointError::NotFinite { field: "velocity", .. })
        ));
    }

    #[test]
    fn plan_duration_respects_the_velocity_limit() {
        let l = robot();
        // 1 rad at a requested 10 rad/s is limited to 4.8 rad/s.
        let d = l.plan_duration("joint1", 0.0, 1.0, 10.0).unwrap();
        assert!((d - 1.0 / 4.8).abs() < 1e-12 && 1.0 / d <= 4.8, "{d}");
        assert_eq!(l.plan_duration("joint1", 0.0, -1.0, 0.5).unwrap(), 2.0);
        assert_eq!(l.plan_duration("joint1", 0.3, 0.3, 0.5).unwrap(), 0.0);
        // Opening the gripper fully takes at least 0.6 s at 0.05 m/s.
        assert!(l.plan_duration("gripper_left_joint", 0.0, 0.03, 1.0).unwrap() >= 0.6 - 1e-12);
        // The goal must be valid; the start only finite (it is a measurement).
        assert!(matches!(
            l.plan_duration("joint1", 0.0, 3.0, 1.0),
            Err(JointError::OutOfRange { .. })
        ));
        assert!(l.plan_duration("joint1", 2.9, 2.8, 1.0).is_ok());
        assert!(l.plan_duration("joint1", f64::NAN, 0.0, 1.0).is_err());
        assert!(matches!(
            l.plan_duration("joint1", 0.0, 1.0, 0.0),
            Err(JointError::NotPositive { .. })
        ));
        assert!(l.plan_duration("joint1", 0.0, 1.0, -1.0).is_err());
        assert!(l.plan_duration("joint1", 0.0, 1.0, f64::INFINITY).is_err());
    }

    #[test]
    fn malformed_urdfs_are_refused_with_the_joint_named() {
        let cases: &[(&str, &str)] = &[
            ("<robot><joint name=\"j\" type=\"revolute\"><limit lower=\"0\" upper=\"1\" effort=\"1\"/></joint></robot>", "limit.velocity"),
            ("<robot><joint name=\"j\" type=\"revolute\"/></robot>", "missing <limit>"),
            ("<robot><joint name=\"j\" type=\"revolute\"><limit lower=\"1\" upper=\"0\" effort=\"1\" velocity=\"1\"/></joint></robot>", "above"),
            ("<robot><joint name=\"j\" type=\"revolute\"><limit lower=\"x\" upper=\"0\" effort=\"1\" velocity=\"1\"/></joint></robot>", "limit.lower"),
            ("<robot><joint name=\"j\" type=\"revolute\"><limit upper=\"inf\" effort=\"1\" velocity=\"1\"/></joint></robot>", "limit.upper"),
            ("<robot><joint name=\"j\" type=\"prismatic\"><limit upper=\"1\" effort=\"1\" velocity=\"0\"/></joint></robot>", "positive"),
            ("<robot><joint name=\"j\" type=\"floating\"/></robot>", "floating"),
            ("<robot><joint name=\"j\" type=\"continuous\"><limit effort=\"1\" velocity=\"1\"/><mimic joint=\"k\"/></joint></robot>", "'k'"),
            ("<robot><joint type=\"continuous\"/></robot>", "name"),
            ("<model/>", "<model>"),
            ("<robot>", "XML"),
        ];
        for (urdf, needle) in cases {
            let err = JointLimits::from_urdf(urdf).unwrap_err().to_string();
            assert!(err.contains(needle), "{urdf}: {err}");
            if urdf.contains("name=\"j\"") {
                assert!(err.contains("joint j"), "{urdf}: {err}");
            }
        }
    }

    #[test]
    fn transmission_joint_references_and_defaults_follow_the_urdf_spec() {
        let urdf = r#"<robot name="r">
            <joint name="j" type="revolute"><limit upper="1" effort="1" velocity="2"/></joint>
            <transmission name="t"><joint name="j"><hardwareInterface>x</hardwareInterface></joint></transmission>
        </robot>"#;
        let l = JointLimits::from_urdf(urdf).unwrap();
        assert_eq!(l.names(), ["j"]);
        assert_eq!(l.get("j").unwrap().lower, Some(0.0), "lower defaults to 0");
    }

    proptest! {
        #[test]
        fn planned_motions_never_exceed_the_velocity_limit(
            joint in prop::sample::select(vec!["head_pan_joint", "head_tilt_joint", "joint1", "joint2", "joint3", "joint4", "gripper_left_joint", "wheel_left_joint"]),
            from in -4.0..4.0f64, to_fraction in 0.0..=1.0f64, requested in 1e-6..100.0f64,
        ) {
            let l = robot();
            let j = l.get(joint).unwrap();
            let to = match (j.lower, j.upper) {
                (Some(lower), Some(upper)) => lower + (upper - lower) * to_fraction,
                _ => -4.0 + 8.0 * to_fraction,
            };
            let to = to.clamp(j.lower.unwrap_or(f64::MIN), j.upper.unwrap_or(f64::MAX));
            let duration = l.plan_duration(joint, from, to, requested).unwrap();
            prop_assert!(duration.is_finite() && duration >= 0.0);
            if duration > 0.0 {
                prop_assert!((to - from).abs() / duration <= j.max_velocity);
                prop_assert!((to - from).abs() / duration <= requested);
            } else {
                prop_assert_eq!(to, from);
            }
            let (applied, clamped) = l.clamp_velocity(joint, requested).unwrap();
            prop_assert!(applied <= j.max_velocity && clamped == (requested > j.max_velocity));
        }

        #[test]
        fn check_position_agrees_with_the_range(joint in prop::sample::select(vec!["head_tilt_joint", "joint2", "gripper_left_joint"]), value in -5.0..5.0f64) {
            let l = robot();
            let j = l.get(joint).unwrap();
            let inside = value >= j.lower.unwrap() && value <= j.upper.unwrap();
            prop_assert_eq!(l.check_position(joint, value).is_ok(), inside);
        }
    }
}
