//! `interact`: the arm and the gripper, through their action servers. Arm
//! goals are a named pose or joint positions (radians), every one checked
//! against the URDF limits before anything moves; the motion's duration
//! keeps within the joints' velocity limits. The gripper opens to the
//! URDF's upper limit or closes with a bounded effort; a close that stalls
//! short of closed is reported as holding something. Completion comes from
//! the action result; the positions reached are read back from joint_states.
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::{optional_number, reject_unknown_fields};
use super::shared::fresh::{fresh_joint_states, measured};
use super::shared::joints::stopped_error;
use super::shared::joints::{
    joint_error, joint_speed, joint_tool_unavailable, outcome_json, refused_error, run_motion,
    settle,
};
use super::{Tool, ToolContext, ToolFuture};
use crate::config::Actuators;
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::{AiccError, ErrorCode};
use crate::robot::arm_reach::{arm_links, ArmPaths, ARM_FLOOR_CLEARANCE_M};
use crate::robot::{Controller, Endpoint, GripperOutcome, PortError, Sensor};

/// Named arm poses: joint1..joint4 in radians (the order of
/// `actuators.arm_joints`), each within the URDF limits (a unit test checks
/// them). They belong in the configuration (a later change); until then
/// they live here. Heights are of the end effector above the floor, from
/// the URDF's kinematics, at the spawn pose of the simulated robot.
pub const NAMED_POSES: &[(&str, [f64; 4], &str)] = &[
    ("home", [0.0, 0.0, 0.0, 0.0], "the arm's zero pose: upper arm up, forearm and gripper level, pointing forward (gripper 0.31 m ahead, 0.33 m up)"),
    ("ready", [0.0, -0.3, 0.6, 0.5], "gripper in front, pitched down 46°, below the camera's line of sight, ready to reach (0.24 m ahead, 0.23 m up)"),
    ("look", [0.9, -0.2, -0.7, 0.9], "gripper raised level at the robot's front left, where the camera sees what the fingers hold from the side, below the gripper (look_at pan 30°, tilt 0°); from straight behind, the wrist would hide it (0.17 m ahead, 0.14 m left, 0.43 m up)"),
    ("pick_front", [0.0, 1.063, -0.425, -0.138], "gripper pitched down 29° reaching 0.37 m ahead at 0.12 m up: an object on a 10 cm ledge straight ahead"),
    ("stow", [0.0, -1.2, 1.3, 1.2], "folded back over the base, out of the camera's view: the pose to drive in"),
];
/// Arm speed when the agent gives none (the URDF allows 4.8 rad/s).
pub(crate) const DEFAULT_ARM_SPEED_RADPS: f64 = 1.0;
/// Shortest arm motion.
const MIN_ARM_DURATION_S: f64 = 0.5;
/// Gripper effort when the agent gives none, N (the URDF allows 10 N).
pub(crate) const DEFAULT_GRIPPER_EFFORT_N: f64 = 5.0;
/// Time a gripper goal may take beyond the motion itself: the stall
/// detection (0.5 s) and a slow simulator.
const GRIPPER_SLACK_S: f64 = 5.0;
/// A close that stops this far short of closed has something between the fingers.
const HOLDING_MIN_GAP_M: f64 = 0.001;

pub(crate) fn pose_names() -> Vec<&'static str> {
    NAMED_POSES.iter().map(|(name, _, _)| *name).collect()
}

/// What the agent asked for.
#[derive(Debug, Clone, PartialEq)]
enum Request {
    Pose(&'static str, [f64; 4]),
    /// Joint name and position (radians).
    Joints(Vec<(String, f64)>),
    Gripper {
        close: bool,
        effort_n: Option<f64>,
    },
}

fn parse_request(input: &Map<String, Value>, arm_joints: &[String]) -> Result<Request, AiccError> {
    let modes =
        ["pose", "joints", "gripper"].into_iter().filter(|m| input.contains_key(*m)).count();
    if modes != 1 {
        return Err(AiccError::invalid_input("give exactly one of: pose (a named arm pose), joints {name: radians}, gripper (\"open\" or \"close\")"));
    }
    if input.contains_key("effort_n") && !input.contains_key("gripper") {
        return Err(AiccError::invalid_input("input.effort_n applies to gripper commands only"));
    }
    if input.contains_key("speed_radps") && input.contains_key("gripper") {
        return Err(AiccError::invalid_input(
            "input.speed_radps applies to arm motions only (the gripper moves at its own speed)",
        ));
    }
    if let Some(pose) = input.get("pose") {
        let name =
            pose.as_str().ok_or_else(|| AiccError::invalid_input("input.pose must be a string"))?;
        let (name, positions, _) =
            NAMED_POSES.iter().find(|(known, _, _)| *known == name).ok_or_else(|| {
                AiccError::invalid_input(format!(
                    "input.pose: unknown pose '{name}'; known poses: {}",
                    pose_names().join(", ")
                ))
            })?;
        return Ok(Request::Pose(name, *positions));
    }
    if let Some(joints) = input.get("joints") {
        let joints = joints.as_object().ok_or_else(|| {
            AiccError::invalid_input("input.joints must be an object {joint name: radians}")
        })?;
        if joints.is_empty() {
            return Err(AiccError::invalid_input(format!(
                "input.joints is empty; give at least one of {}",
                arm_joints.join(", ")
            )));
        }
        let mut goal = Vec::new();
        for (name, value) in joints {
            if !arm_joints.contains(name) {
                return Err(AiccError::invalid_input(format!(
                    "input.joints.{name}: not an arm joint (arm joints: {})",
                    arm_joints.join(", ")
                )));
            }
            let position = value.as_f64().filter(|v| v.is_finite()).ok_or_else(|| {
                AiccError::invalid_input(format!("input.joints.{name} must be a number (radians)"))
            })?;
            goal.push((name.clone(), position));
        }
        return Ok(Request::Joints(goal));
    }
    let close = match input.get("gripper").and_then(Value::as_str) {
        Some("open") => false,
        Some("close") => true,
        _ => return Err(AiccError::invalid_input("input.gripper must be \"open\" or \"close\"")),
    };
    let effort_n = optional_number(input, "effort_n", 0.0, f64::MAX)?;
    if effort_n == Some(0.0) {
        return Err(AiccError::invalid_input("input.effort_n must be greater than 0"));
    }
    Ok(Request::Gripper { close, effort_n })
}

pub(crate) struct Interact {
    arm_joints: Vec<String>,
    /// Built once from the poses and joint names (descriptors hold `&'static str`).
    description: &'static str,
}

impl Interact {
    pub fn new(actuators: &Actuators) -> Self {
        let poses: Vec<String> =
            NAMED_POSES.iter().map(|(name, _, about)| format!("{name}: {about}")).collect();
        let description = format!(
            "Move the arm or use the gripper. Give ONE of: `pose` (a named arm pose), `joints` {{{}: radians, any subset; the others stay}}, or `gripper`: \"open\" | \"close\" (optional `effort_n`, default {DEFAULT_GRIPPER_EFFORT_N} N, at most the URDF limit). Goals outside the URDF joint limits, and arm motions that would take a link within {ARM_FLOOR_CLEARANCE_M} m of the floor, are refused without moving. Returns the controller's outcome and the positions reached; a close that stops on an object reports holding: true. Poses: {}.",
            actuators.arm_joints.join(", "),
            poses.join("; ")
        );
        // Once per registry (at start-up), not per call.
        Self {
            arm_joints: actuators.arm_joints.clone(),
            description: Box::leak(description.into_boxed_str()),
        }
    }
}

impl Tool for Interact {
    fn descriptor(&self) -> ToolDescriptor {
        let joint_properties: Map<String, Value> = self
            .arm_joints
            .iter()
            .map(|name| {
                (
                    name.clone(),
                    json!({ "type": "number", "description": "radians; the URDF limits apply" }),
                )
            })
            .collect();
        ToolDescriptor {
            id: "interact",
            class: ToolClass::Actuator,
            description: self.description,
            capability: "can_move_self",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    // No "enum": the validator's message would list only two
                    // names; the tool's own message lists them all.
                    "pose": { "type": "string", "description": format!("a named arm pose, one of: {}", pose_names().join(", ")) },
                    "joints": { "type": "object", "properties": joint_properties, "additionalProperties": false, "minProperties": 1 },
                    "speed_radps": { "type": "number", "exclusiveMinimum": 0, "maximum": 100, "description": "largest joint speed of an arm motion, rad/s (default 1.0; limited to each joint's velocity limit: the URDF's, or the bridge's lower cap)" },
                    "gripper": { "type": "string", "enum": ["open", "close"] },
                    "effort_n": { "type": "number", "exclusiveMinimum": 0, "maximum": 1000, "description": "gripper force limit, N (default 5; at most the URDF effort limit)" }
                },
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "requested": { "type": "object" },
                    "applied": { "type": "object" },
                    "outcome": { "type": "object" },
                    "actual": { "type": "object", "description": "joint positions read back from joint_states afterwards" },
                    "error_rad": { "type": "object" },
                    "gripper": { "type": "object", "properties": { "position_m": {"type": "number"}, "effort_n": {"type": "number"}, "stalled": {"type": "boolean"}, "reached_goal": {"type": "boolean"}, "holding": {"type": "boolean"} } },
                    "duration_s": { "type": "number" }
                },
                "required": ["requested", "applied", "outcome", "actual", "duration_s"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        joint_tool_unavailable(
            ctx,
            now,
            &[&ctx.config.actuators.arm_action, &ctx.config.actuators.gripper_action],
        )
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        let arm_joints = self.arm_joints.clone();
        async move {
            reject_unknown_fields(&input, &["pose", "joints", "speed_radps", "gripper", "effort_n"])?;
            let request = parse_request(&input, &arm_joints)?;
            let speed = optional_number(&input, "speed_radps", 0.0, f64::MAX)?;
            if speed == Some(0.0) {
                return Err(AiccError::invalid_input("input.speed_radps must be greater than 0"));
            }
            match request {
                Request::Pose(name, positions) => {
                    if arm_joints.len() != positions.len() {
                        return Err(AiccError::execution_failed(false, format!("named poses are for a {}-joint arm; this one has {} ({})", positions.len(), arm_joints.len(), arm_joints.join(", "))));
                    }
                    let goal: Vec<(String, f64)> = arm_joints.iter().cloned().zip(positions).collect();
                    move_arm(&ctx, &arm_joints, goal, speed, json!({ "pose": name })).await
                }
                Request::Joints(goal) => {
                    let requested = json!({ "joints": goal.iter().map(|(n, p)| (n.clone(), json!(p))).collect::<Map<String, Value>>() });
                    move_arm(&ctx, &arm_joints, goal, speed, requested).await
                }
                Request::Gripper { close, effort_n } => use_gripper(&ctx, close, effort_n).await,
            }
        }
        .boxed()
    }
}

/// Moves the arm to `goal` (a subset of `arm_joints`; the others keep
/// their measured positions, since not every controller accepts partial goals).
async fn move_arm(
    ctx: &ToolContext,
    arm_joints: &[String],
    goal: Vec<(String, f64)>,
    speed: Option<f64>,
    requested: Value,
) -> Result<ToolSuccess, AiccError> {
    if ctx.config.actuators.arm_action.is_empty() || arm_joints.is_empty() {
        return Err(AiccError::execution_failed(
            false,
            "no arm is configured (actuators.arm_action and arm_joints)",
        ));
    }
    // Every goal is checked first: nothing moves if any is refused.
    for (name, position) in &goal {
        ctx.joints.limits().check_position(name, *position).map_err(joint_error)?;
    }
    let halts = ctx.joints.begin_motion();
    let started = Instant::now();
    let states = fresh_joint_states(ctx)?;
    let now =
        arm_joints.iter().map(|n| measured(ctx, &states, n)).collect::<Result<Vec<f64>, _>>()?;
    let target: Vec<f64> = arm_joints
        .iter()
        .zip(&now)
        .map(|(name, now)| {
            goal.iter()
                .find(|(n, _)| n == name)
                .map_or_else(|| ctx.joints.clamp_to_limits(name, *now), |(_, p)| *p)
        })
        .collect();
    let links = arm_links(&ctx.kinematics, arm_joints);
    {
        // Dropped before the motion's awaits: the closure is not Sync.
        let other = |joint: &str| states.position(joint);
        let paths = ArmPaths { urdf: &ctx.kinematics, links: &links, arm_joints, other: &other };
        paths.check_above_floor(&now, &target).map_err(AiccError::invalid_input)?;
    }
    let (speed_radps, speed_clamped) =
        joint_speed(ctx, arm_joints, speed, DEFAULT_ARM_SPEED_RADPS)?;
    let sent = run_motion(
        ctx,
        Controller::Arm,
        arm_joints,
        &target,
        speed_radps,
        MIN_ARM_DURATION_S,
        "arm",
        halts,
    )
    .await?;
    let (outcome, from, duration_s) =
        (sent.outcome, sent.start.positions().to_vec(), sent.duration_s);
    let (actual, settled) = settle(ctx, arm_joints, &target).await?;
    let by_name = |values: &[f64]| -> Map<String, Value> {
        arm_joints.iter().cloned().zip(values.iter().map(|v| json!(v))).collect()
    };
    let errors: Vec<f64> = actual.iter().zip(&target).map(|(a, t)| a - t).collect();
    Ok(ToolSuccess {
        output: json!({
            "requested": requested,
            "applied": { "goal_rad": by_name(&target), "start_rad": by_name(&from), "speed_radps": speed_radps, "speed_clamped_to_urdf_limit": speed_clamped, "planned_duration_s": duration_s },
            "outcome": outcome_json(&outcome),
            "actual": by_name(&actual),
            "error_rad": by_name(&errors),
            "settled": settled,
            "duration_s": started.elapsed().as_secs_f64(),
        }),
        source: format!(
            "{} {}",
            ctx.joints.endpoint(Endpoint::Arm),
            ctx.sensors.topic(Sensor::JointStates)
        ),
    })
}

/// Whether a gripper result means something is between the fingers: a
/// close that stalled short of closed.
pub(crate) fn holding(close: bool, outcome: &GripperOutcome, closed_position_m: f64) -> bool {
    close
        && outcome.stalled
        && !outcome.reached_goal
        && outcome.position_m > closed_position_m + HOLDING_MIN_GAP_M
}

async fn use_gripper(
    ctx: &ToolContext,
    close: bool,
    effort_n: Option<f64>,
) -> Result<ToolSuccess, AiccError> {
    let joint_name = ctx.config.actuators.gripper_joint.clone();
    if ctx.config.actuators.gripper_action.is_empty() || joint_name.is_empty() {
        return Err(AiccError::execution_failed(
            false,
            "no gripper is configured (actuators.gripper_action and gripper_joint)",
        ));
    }
    let joint = ctx
        .joints
        .limits()
        .joint(&joint_name)
        .map_err(|e| AiccError::execution_failed(false, format!("actuators.gripper_joint: {e}")))?
        .clone();
    let (closed_m, open_m) = (joint.lower.unwrap_or(0.0), joint.upper.unwrap_or(0.0));
    let effort = effort_n.unwrap_or(DEFAULT_GRIPPER_EFFORT_N.min(joint.max_effort));
    if effort > joint.max_effort {
        return Err(AiccError::invalid_input(format!(
            "input.effort_n = {effort} N exceeds the effort limit of {joint_name}: {} {} (URDF)",
            joint.max_effort,
            joint.kind.effort_unit()
        )));
    }
    let goal_m = if close { closed_m } else { open_m };
    ctx.joints.limits().check_position(&joint_name, goal_m).map_err(joint_error)?;
    let halts = ctx.joints.begin_motion();
    let started = Instant::now();
    let motion =
        ctx.joints.gripper(goal_m, effort, halts).map_err(|e| refused_error(e, "gripper"))?;
    let deadline = Duration::from_secs_f64(motion.duration_s() + GRIPPER_SLACK_S);
    let outcome = match tokio::time::timeout(deadline, motion.outcome).await {
        Err(_) => {
            return Err(AiccError::new(
                ErrorCode::Timeout,
                true,
                format!(
                    "the gripper did not finish within {:.1} s; the goal was cancelled",
                    deadline.as_secs_f64()
                ),
            ))
        }
        Ok(Err(error @ PortError::HaltedBeforeSending { .. })) => {
            return Err(stopped_error(&format!("the gripper motion ({error})")))
        }
        Ok(Err(error)) => {
            return Err(AiccError::execution_failed(
                error.retryable(),
                format!("the gripper controller: {error}"),
            ))
        }
        Ok(Ok(outcome)) => outcome,
    };
    if !outcome.reached_goal && !outcome.stalled {
        if ctx.joints.halted_since(halts) {
            return Err(stopped_error("the gripper motion"));
        }
        return Err(AiccError::execution_failed(
            false,
            format!("the gripper neither reached {goal_m} m nor stalled: it stopped at {:.4} m (effort {:.2} N)", outcome.position_m, outcome.effort_n),
        ));
    }
    let holding = holding(close, &outcome, closed_m);
    let actual = fresh_joint_states(ctx).ok().and_then(|s| s.position(&joint_name));
    let note = match (close, outcome.stalled, holding) {
        (true, _, true) => {
            "closed on an object: holding it (the gripper keeps squeezing at the effort limit)"
        }
        (true, _, false) => "closed fully: nothing between the fingers",
        (false, true, _) => "stopped before fully open: something blocks the fingers",
        (false, false, _) => "open",
    };
    Ok(ToolSuccess {
        output: json!({
            "requested": { "gripper": if close { "close" } else { "open" }, "effort_n": effort_n },
            "applied": { "joint": joint_name, "goal_position_m": goal_m, "max_effort_n": effort, "effort_limit_n": joint.max_effort },
            "outcome": { "reached_goal": outcome.reached_goal, "stalled": outcome.stalled },
            "gripper": {
                "position_m": outcome.position_m,
                "opening_m": 2.0 * outcome.position_m,
                "effort_n": outcome.effort_n,
                "stalled": outcome.stalled,
                "reached_goal": outcome.reached_goal,
                "holding": holding,
                "note": note,
            },
            "actual": { joint_name.clone(): actual },
            "duration_s": started.elapsed().as_secs_f64(),
        }),
        source: format!(
            "{} {}",
            ctx.joints.endpoint(Endpoint::Gripper),
            ctx.sensors.topic(Sensor::JointStates)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governor::JointLimits;
    use crate::robot::kinematics::Kinematics;
    use crate::tools::input::input_map;
    use nalgebra::Vector3;

    const URDF: &str = include_str!("../../../../urdf/aicc_bot.urdf");

    fn arm() -> Vec<String> {
        Actuators::default().arm_joints
    }

    #[test]
    fn every_named_pose_is_within_the_urdf_limits() {
        let limits = JointLimits::from_urdf(URDF).unwrap();
        assert_eq!(pose_names(), ["home", "ready", "look", "pick_front", "stow"]);
        for (name, positions, _) in NAMED_POSES {
            for (joint, position) in arm().iter().zip(positions) {
                assert_eq!(limits.check_position(joint, *position), Ok(()), "pose {name}, {joint}");
            }
        }
    }

    #[test]
    fn named_poses_put_the_gripper_where_their_descriptions_say() {
        let k = Kinematics::from_urdf(URDF).unwrap();
        let gripper = |positions: &[f64; 4]| -> Vector3<f64> {
            let joints = arm();
            k.transform("base_footprint", "end_effector_link", &|j| {
                joints.iter().position(|n| n == j).map(|i| positions[i])
            })
            .unwrap()
            .translation
            .vector
        };
        let expected = [
            ("home", 0.31, 0.0, 0.333),
            ("ready", 0.235, 0.0, 0.225),
            ("look", 0.171, 0.137, 0.432),
            ("pick_front", 0.373, 0.0, 0.124),
            ("stow", 0.102, 0.0, 0.165),
        ];
        for ((name, positions, _), (expected_name, x, y, z)) in NAMED_POSES.iter().zip(expected) {
            assert_eq!(*name, expected_name);
            let at = gripper(positions);
            assert!(
                (at.x - x).abs() < 0.005 && (at.y - y).abs() < 0.005 && (at.z - z).abs() < 0.005,
                "{name}: {at}"
            );
            assert!(at.z > 0.1, "{name} keeps the gripper off the floor: {at}");
        }
    }

    #[test]
    fn requests_are_a_pose_joints_or_the_gripper() {
        assert_eq!(
            parse_request(&input_map(json!({"pose": "ready"})), &arm()).unwrap(),
            Request::Pose("ready", NAMED_POSES[1].1)
        );
        assert_eq!(
            parse_request(&input_map(json!({"joints": {"joint2": 0.5}})), &arm()).unwrap(),
            Request::Joints(vec![("joint2".into(), 0.5)])
        );
        assert_eq!(
            parse_request(&input_map(json!({"gripper": "close", "effort_n": 3})), &arm()).unwrap(),
            Request::Gripper { close: true, effort_n: Some(3.0) }
        );
        assert_eq!(
            parse_request(&input_map(json!({"gripper": "open"})), &arm()).unwrap(),
            Request::Gripper { close: false, effort_n: None }
        );
    }

    #[test]
    fn bad_requests_name_the_field_and_what_is_allowed() {
        let cases = [
            (
                json!({"pose": "dance"}),
                vec!["input.pose", "'dance'", "home, ready, look, pick_front, stow"],
            ),
            (
                json!({"joints": {"elbow": 0.1}}),
                vec!["input.joints.elbow", "joint1, joint2, joint3, joint4"],
            ),
            (
                json!({"joints": {"head_pan_joint": 0.1}}),
                vec!["input.joints.head_pan_joint", "not an arm joint"],
            ),
            (json!({"joints": {"joint1": "x"}}), vec!["input.joints.joint1", "number"]),
            (json!({"joints": {}}), vec!["input.joints is empty"]),
            (json!({"pose": "home", "gripper": "open"}), vec!["exactly one"]),
            (json!({}), vec!["exactly one"]),
            (json!({"gripper": "squeeze"}), vec!["input.gripper", "\"open\" or \"close\""]),
            (json!({"pose": "home", "effort_n": 2}), vec!["input.effort_n", "gripper"]),
            (json!({"gripper": "close", "effort_n": 0}), vec!["input.effort_n", "greater than 0"]),
        ];
        for (input, needles) in cases {
            let error = parse_request(&input_map(input.clone()), &arm()).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidInput);
            for needle in needles {
                assert!(
                    error.message.contains(needle),
                    "{input}: {needle} not in {}",
                    error.message
                );
            }
        }
    }

    #[test]
    fn joint_goals_outside_the_urdf_are_refused_naming_joint_and_limit() {
        let limits = JointLimits::from_urdf(URDF).unwrap();
        let error = joint_error(limits.check_position("joint3", 1.5).unwrap_err());
        for needle in ["joint3", "1.382", "-0.942", "rad"] {
            assert!(error.message.contains(needle), "{needle}: {}", error.message);
        }
    }

    #[test]
    fn the_schema_lists_the_poses_and_refuses_unknown_ones_by_name() {
        use crate::protocol::catalog::Catalog;
        let tool = Interact::new(&Actuators::default());
        let catalog = Catalog::new(vec![tool.descriptor()]).expect("the schema compiles");
        // The schema passes any string; the tool refuses it with every name.
        let valid = catalog.validate("interact", input_map(json!({"pose": "dance"}))).unwrap();
        let error = parse_request(&valid.input, &arm()).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidInput);
        assert!(tool.descriptor().input_schema["properties"]["pose"]["description"]
            .as_str()
            .unwrap()
            .contains("home, ready, look, pick_front, stow"));
        for needle in ["input.pose", "home", "ready", "look", "pick_front", "stow"] {
            assert!(error.message.contains(needle), "{needle}: {}", error.message);
        }
        let error =
            catalog.validate("interact", input_map(json!({"joints": {"elbow": 1.0}}))).unwrap_err();
        assert!(
            error.message.contains("input.joints") && error.message.contains("elbow"),
            "{}",
            error.message
        );
        assert!(catalog
            .validate("interact", input_map(json!({"joints": {"joint1": 0.5}, "speed_radps": 0.5})))
            .is_ok());
        assert!(catalog
            .validate("interact", input_map(json!({"gripper": "close", "effort_n": 5})))
            .is_ok());
        assert!(tool.descriptor().description.contains("pick_front: "));
    }

    #[test]
    fn a_close_that_stalls_short_of_closed_is_holding() {
        let on_cube = GripperOutcome {
            position_m: 0.0175,
            effort_n: -5.0,
            stalled: true,
            reached_goal: false,
        };
        assert!(holding(true, &on_cube, 0.0));
        let empty = GripperOutcome {
            position_m: 0.0004,
            effort_n: 0.0,
            stalled: false,
            reached_goal: true,
        };
        assert!(!holding(true, &empty, 0.0));
        let blocked_open =
            GripperOutcome { position_m: 0.02, effort_n: 1.0, stalled: true, reached_goal: false };
        assert!(!holding(false, &blocked_open, 0.0), "opening never means holding");
        let squeezed_shut = GripperOutcome {
            position_m: 0.0005,
            effort_n: -5.0,
            stalled: true,
            reached_goal: false,
        };
        assert!(
            !holding(true, &squeezed_shut, 0.0),
            "stalled at closed: nothing between the fingers"
        );
    }
}
