//! `look_at`: point the pan-tilt head at given angles, at a 3-D point, or
//! at a pixel of the current camera frame. Goals are checked against the
//! URDF joint limits before anything moves, sent to the head's
//! FollowJointTrajectory controller with a duration that keeps within the
//! joints' velocity limits, and closed on joint_states: the result reports
//! the positions actually reached and the error against the goal.
//!
//! Conventions (URDF `aicc_bot`, REP-103): pan rotates about +z (positive
//! looks left), tilt about +y (positive looks DOWN); at pan = tilt = 0 the
//! camera looks along base_footprint +x.
//!
//! Also home of the helpers the other joint tools share (`interact`, the
//! head part of `turn`, the hold in `stop`): fresh joint states, JointError
//! to AICC error, running a trajectory with a deadline, settling.
use std::time::{Duration, Instant};

use futures::FutureExt;
use nalgebra::{Point3, Vector3};
use serde_json::{json, Map, Value};

use super::input::{optional_number, reject_unknown_fields};
use super::proprioception::check_fresh;
use super::{Tool, ToolContext, ToolFuture};
use crate::governor::JointError;
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::{AiccError, ErrorCode};
use crate::robot::kinematics::Kinematics;
use crate::robot::{CameraInfo, Controller, JointStates, TrajectoryGoal, TrajectoryOutcome};

/// The robot's base frame (REP-105).
pub const BASE_FRAME: &str = "base_footprint";
/// The camera's optical frame when the camera reports none.
pub const DEFAULT_CAMERA_FRAME: &str = "camera_optical_frame";
/// Head speed when the agent gives none (the URDF allows 3 rad/s).
pub const DEFAULT_HEAD_SPEED_RADPS: f64 = 1.5;
/// Shortest head motion, so that tiny corrections are not jerks.
const MIN_HEAD_DURATION_S: f64 = 0.2;
/// Time allowed beyond the planned duration: the controller's goal time
/// tolerance (1 s by default) plus a slow simulator.
const TRAJECTORY_SLACK_S: f64 = 5.0;
/// The head has settled when every joint is this close to its goal...
const SETTLED_RAD: f64 = 0.2_f64 * std::f64::consts::PI / 180.0;
/// ...or this long after the controller reported success.
const SETTLE_TIMEOUT: Duration = Duration::from_millis(1000);
/// Nearest point the head will aim at (from the camera).
const MIN_POINT_DISTANCE_M: f64 = 0.1;
/// Largest coordinate of a target point, metres.
const MAX_POINT_COORDINATE_M: f64 = 100.0;

pub fn deg(rad: f64) -> f64 {
    rad.to_degrees()
}

// ----- helpers shared by the joint tools ---------------------------------

/// The latest joint states, if fresh enough.
pub fn fresh_joint_states(ctx: &ToolContext) -> Result<JointStates, AiccError> {
    let source = ctx.robot.source("joint_states");
    let states = ctx.robot.joint_states().ok_or_else(|| AiccError::execution_failed(true, format!("no joint states received yet on {source}")))?;
    check_fresh(&source, Instant::now().saturating_duration_since(states.received), Duration::from_secs_f64(ctx.config.sensors.joint_states.max_age_s))?;
    Ok(states.value)
}

/// The measured position of `joint`, or an error naming the topic.
pub fn measured(ctx: &ToolContext, states: &JointStates, joint: &str) -> Result<f64, AiccError> {
    states
        .position(joint)
        .filter(|p| p.is_finite())
        .ok_or_else(|| AiccError::execution_failed(true, format!("joint {joint} is not reported on {}", ctx.robot.source("joint_states"))))
}

/// A refused joint goal as an `invalid_input` error: the joint, the value
/// and the URDF limit, in degrees as well for rotating joints.
pub fn joint_error(error: JointError) -> AiccError {
    let text = error.to_string();
    let in_degrees = match &error {
        JointError::OutOfRange { value, lower, upper, unit: "rad", .. } => {
            format!(" (= {:.1}°; allowed [{:.1}°, {:.1}°])", deg(*value), deg(*lower), deg(*upper))
        }
        _ => String::new(),
    };
    AiccError::invalid_input(format!("{text}{in_degrees}; the limits come from the robot's URDF"))
}

/// Why a joint tool cannot serve now: its controller is not configured, or
/// joint states are missing or silent.
pub fn joint_tool_unavailable(ctx: &ToolContext, now: Instant, actions: &[&str]) -> Option<String> {
    if actions.iter().all(|a| a.is_empty()) {
        return Some("no controller is configured for it".into());
    }
    let silent_after = Duration::from_secs_f64(ctx.config.sensors.unavailable_after_s);
    let source = ctx.robot.source("joint_states");
    match ctx.robot.joint_states() {
        None => Some(format!("no joint states received on {source}")),
        Some(states) if now.saturating_duration_since(states.received) > silent_after => {
            Some(format!("no joint states on {source} for {:.1} s", now.saturating_duration_since(states.received).as_secs_f64()))
        }
        Some(_) => None,
    }
}

/// The name of a FollowJointTrajectory error code.
pub fn trajectory_error_name(code: i32) -> &'static str {
    match code {
        0 => "SUCCESSFUL",
        -1 => "INVALID_GOAL",
        -2 => "INVALID_JOINTS",
        -3 => "OLD_HEADER_TIMESTAMP",
        -4 => "PATH_TOLERANCE_VIOLATED",
        -5 => "GOAL_TOLERANCE_VIOLATED",
        _ => "UNKNOWN",
    }
}

/// Whether an outcome is a success. The port reports a goal that ended
/// other than Succeeded (cancelled, aborted) with "goal ended ..." in the
/// error string, even where the controller left error_code at 0.
pub fn trajectory_succeeded(outcome: &TrajectoryOutcome) -> bool {
    outcome.error_code == 0 && !outcome.error_string.starts_with("goal ended ")
}

pub fn outcome_json(outcome: &TrajectoryOutcome) -> Value {
    json!({ "error_code": outcome.error_code, "error_name": trajectory_error_name(outcome.error_code), "error_string": outcome.error_string })
}

/// Sends `goal` to `controller` and waits for it, at most the planned
/// duration plus slack (then the goal is cancelled: the future is dropped).
/// A controller failure is `execution_failed` carrying its error code and
/// string; an interruption by `stop` says so.
pub async fn run_trajectory(ctx: &ToolContext, controller: Controller, goal: TrajectoryGoal, planned_s: f64, what: &str, halts: u64) -> Result<TrajectoryOutcome, AiccError> {
    let deadline = Duration::from_secs_f64(planned_s + TRAJECTORY_SLACK_S);
    match tokio::time::timeout(deadline, ctx.robot.follow_trajectory(controller, goal)).await {
        Err(_) => Err(AiccError::new(ErrorCode::Timeout, true, format!("the {what} did not finish within {:.1} s (planned {planned_s:.2} s); the goal was cancelled", deadline.as_secs_f64()))),
        Ok(Err(message)) => {
            let retryable = !message.contains("rejected");
            Err(AiccError::execution_failed(retryable, format!("the {what} controller: {message}")))
        }
        Ok(Ok(outcome)) if !trajectory_succeeded(&outcome) => {
            if ctx.base.halted_since(halts) {
                return Err(super::stop::stopped_error(&format!("the {what} motion")));
            }
            Err(AiccError::execution_failed(
                false,
                format!("the {what} controller reported error_code {} ({}): {}", outcome.error_code, trajectory_error_name(outcome.error_code), outcome.error_string),
            ))
        }
        Ok(Ok(outcome)) => Ok(outcome),
    }
}

/// Reads joint_states until every joint of `names` is within
/// `SETTLED_RAD` of `goal` or `SETTLE_TIMEOUT` passes: the positions last
/// read and whether they settled.
pub async fn settle(ctx: &ToolContext, names: &[String], goal: &[f64]) -> Result<(Vec<f64>, bool), AiccError> {
    let started = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_millis(20));
    loop {
        ticker.tick().await;
        let states = fresh_joint_states(ctx)?;
        let actual = names.iter().map(|n| measured(ctx, &states, n)).collect::<Result<Vec<f64>, _>>()?;
        let settled = actual.iter().zip(goal).all(|(a, g)| (a - g).abs() <= SETTLED_RAD);
        if settled || started.elapsed() >= SETTLE_TIMEOUT {
            return Ok((actual, settled));
        }
    }
}

/// A speed for joint motion: the request (or `default`), limited to the
/// URDF velocity of every joint in `names`. (speed, clamped?)
pub fn joint_speed(ctx: &ToolContext, names: &[String], requested: Option<f64>, default: f64) -> Result<(f64, bool), AiccError> {
    let mut speed = requested.unwrap_or(default);
    let mut clamped = false;
    for name in names {
        let (applied, was_clamped) = ctx.joints.clamp_velocity(name, speed).map_err(joint_error)?;
        clamped |= was_clamped && requested.is_some();
        speed = applied.abs();
    }
    Ok((speed, clamped))
}

/// The duration that moves every joint from `from` to `to` within `speed`
/// and its URDF limit (`goal` positions are checked against the limits).
pub fn plan_motion(ctx: &ToolContext, names: &[String], from: &[f64], to: &[f64], speed: f64, min_duration_s: f64) -> Result<f64, AiccError> {
    let mut duration = 0.0f64;
    for ((name, from), to) in names.iter().zip(from).zip(to) {
        duration = duration.max(ctx.joints.plan_duration(name, *from, *to, speed).map_err(joint_error)?);
    }
    Ok(duration.max(min_duration_s))
}

// ----- head geometry (pure) ----------------------------------------------

/// Pan and tilt (rad) that point the camera's optical axis along
/// `direction` (base frame): pan from +x towards +y, tilt positive down.
pub fn pan_tilt_of(direction: &Vector3<f64>) -> Option<(f64, f64)> {
    if !(direction.norm() > 1e-9) {
        return None;
    }
    let horizontal = direction.x.hypot(direction.y);
    Some((direction.y.atan2(direction.x), (-direction.z).atan2(horizontal)))
}

/// The ray through pixel (u, v) in the optical frame (z forward, x right,
/// y down), from the intrinsics K (row-major).
pub fn pixel_ray(k: &[f64; 9], u: f64, v: f64) -> Vector3<f64> {
    let (fx, cx, fy, cy) = (k[0], k[2], k[4], k[5]);
    Vector3::new((u - cx) / fx, (v - cy) / fy, 1.0)
}

/// Where the head's joints are, with pan and tilt overridden.
fn head_positions<'a>(pan_joint: &'a str, tilt_joint: &'a str, pan: f64, tilt: f64, others: &'a dyn Fn(&str) -> Option<f64>) -> impl Fn(&str) -> Option<f64> + 'a {
    move |joint: &str| {
        if joint == pan_joint {
            Some(pan)
        } else if joint == tilt_joint {
            Some(tilt)
        } else {
            others(joint)
        }
    }
}

/// The head geometry from the URDF: joint names and the camera frame.
pub struct HeadModel<'a> {
    pub kinematics: &'a Kinematics,
    pub pan_joint: &'a str,
    pub tilt_joint: &'a str,
    pub camera_frame: &'a str,
}

impl HeadModel<'_> {
    /// The optical axis (origin, unit direction) in the base frame.
    pub fn optical_axis(&self, pan: f64, tilt: f64, others: &dyn Fn(&str) -> Option<f64>) -> Result<(Vector3<f64>, Vector3<f64>), String> {
        let pose = self.kinematics.transform(BASE_FRAME, self.camera_frame, &head_positions(self.pan_joint, self.tilt_joint, pan, tilt, others))?;
        Ok((pose.translation.vector, pose.rotation * Vector3::z()))
    }

    /// Pan and tilt that put `point` (base frame) on the optical axis.
    /// The camera sits off the pan/tilt axes, so the direction from the
    /// camera to the point depends on the answer: iterate (a fixed point,
    /// converging fast while the point is far compared with the camera's
    /// offset from the axes: 2.5 cm on this robot, on the optical axis).
    pub fn aim_at_point(&self, point: &Vector3<f64>, start: (f64, f64), others: &dyn Fn(&str) -> Option<f64>) -> Result<(f64, f64), String> {
        let (mut pan, mut tilt) = start;
        for _ in 0..20 {
            let (origin, _) = self.optical_axis(pan, tilt, others)?;
            let (next_pan, next_tilt) = pan_tilt_of(&(point - origin)).ok_or("the point is at the camera")?;
            let change = (next_pan - pan).abs().max((next_tilt - tilt).abs());
            (pan, tilt) = (next_pan, next_tilt);
            if change < 1e-9 {
                break;
            }
        }
        Ok((pan, tilt))
    }

    /// Pan and tilt that point the optical axis along the ray through
    /// pixel (u, v), with the head where `current` says. The ray leaves
    /// the camera, which sits 2.5 cm from the pan/tilt axes: aiming along
    /// it from the axes is off by at most ~0.025 m / distance rad (under
    /// 1.5° beyond 1 m).
    pub fn aim_at_pixel(&self, k: &[f64; 9], u: f64, v: f64, current: (f64, f64), others: &dyn Fn(&str) -> Option<f64>) -> Result<(f64, f64), String> {
        let pose = self.kinematics.transform(BASE_FRAME, self.camera_frame, &head_positions(self.pan_joint, self.tilt_joint, current.0, current.1, others))?;
        let ray = pose.rotation * pixel_ray(k, u, v);
        pan_tilt_of(&ray).ok_or_else(|| "the pixel gives no direction".to_string())
    }

    /// The angle between the optical axis at (pan, tilt) and the direction
    /// from the camera to `point`, rad: how well the aim was met.
    pub fn aim_error(&self, point: &Vector3<f64>, pan: f64, tilt: f64, others: &dyn Fn(&str) -> Option<f64>) -> Result<f64, String> {
        let (origin, axis) = self.optical_axis(pan, tilt, others)?;
        Ok(axis.angle(&(point - origin)))
    }
}

// ----- head motion (shared with `turn`) ----------------------------------

/// A checked head goal, ready to send.
#[derive(Debug, Clone)]
pub struct HeadPlan {
    pub joints: Vec<String>,
    pub from: Vec<f64>,
    pub goal: Vec<f64>,
    pub speed_radps: f64,
    pub speed_clamped: bool,
    pub duration_s: f64,
}

/// The head's joint names [pan, tilt] from the configuration.
pub fn head_joints(ctx: &ToolContext) -> Result<(String, String), AiccError> {
    match ctx.config.actuators.head_joints.as_slice() {
        [pan, tilt] if !ctx.config.actuators.head_action.is_empty() => Ok((pan.clone(), tilt.clone())),
        _ => Err(AiccError::execution_failed(false, "no pan-tilt head is configured (actuators.head_action and head_joints [pan, tilt])")),
    }
}

/// Checks a head goal against the URDF (no motion): pan/tilt of None keep
/// the joint where it is.
pub fn plan_head(ctx: &ToolContext, states: &JointStates, pan: Option<f64>, tilt: Option<f64>, speed_radps: Option<f64>) -> Result<HeadPlan, AiccError> {
    let (pan_joint, tilt_joint) = head_joints(ctx)?;
    let from = vec![measured(ctx, states, &pan_joint)?, measured(ctx, states, &tilt_joint)?];
    // A joint that keeps its place may read a hair outside its limits:
    // hold it just inside them.
    let goal = vec![pan.unwrap_or(clamp_to_limits(ctx, &pan_joint, from[0])), tilt.unwrap_or(clamp_to_limits(ctx, &tilt_joint, from[1]))];
    let joints = vec![pan_joint, tilt_joint];
    for (name, value) in joints.iter().zip(&goal) {
        ctx.joints.check_position(name, *value).map_err(joint_error)?;
    }
    let (speed, speed_clamped) = joint_speed(ctx, &joints, speed_radps, DEFAULT_HEAD_SPEED_RADPS)?;
    let duration_s = plan_motion(ctx, &joints, &from, &goal, speed, MIN_HEAD_DURATION_S)?;
    Ok(HeadPlan { joints, from, goal, speed_radps: speed, speed_clamped, duration_s })
}

/// Runs a head plan and reports the positions reached.
pub async fn run_head(ctx: &ToolContext, plan: &HeadPlan, halts: u64) -> Result<Value, AiccError> {
    let started = Instant::now();
    let goal = TrajectoryGoal { joint_names: plan.joints.clone(), points: vec![(plan.goal.clone(), plan.duration_s)] };
    let outcome = run_trajectory(ctx, Controller::Head, goal, plan.duration_s, "head", halts).await?;
    let (actual, settled) = settle(ctx, &plan.joints, &plan.goal).await?;
    Ok(json!({
        "target": { "pan_deg": deg(plan.goal[0]), "tilt_deg": deg(plan.goal[1]), "pan_rad": plan.goal[0], "tilt_rad": plan.goal[1] },
        "actual": { "pan_deg": deg(actual[0]), "tilt_deg": deg(actual[1]), "pan_rad": actual[0], "tilt_rad": actual[1] },
        "error_deg": { "pan": deg(actual[0] - plan.goal[0]), "tilt": deg(actual[1] - plan.goal[1]) },
        "settled": settled,
        "start": { "pan_deg": deg(plan.from[0]), "tilt_deg": deg(plan.from[1]) },
        "applied": { "speed_dps": deg(plan.speed_radps), "speed_clamped_to_urdf_limit": plan.speed_clamped, "planned_duration_s": plan.duration_s },
        "outcome": outcome_json(&outcome),
        "duration_s": started.elapsed().as_secs_f64(),
    }))
}

// ----- the tool ----------------------------------------------------------

pub struct LookAt;

/// What the agent asked to look at.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    Angles { pan: Option<f64>, tilt: Option<f64> },
    Point { point: Vector3<f64>, frame: String },
    Pixel { u: f64, v: f64 },
}

fn parse_target(input: &Map<String, Value>) -> Result<Target, AiccError> {
    let pan = optional_number(input, "pan_deg", -180.0, 180.0)?;
    let tilt = optional_number(input, "tilt_deg", -90.0, 90.0)?;
    let modes = [pan.is_some() || tilt.is_some(), input.contains_key("point"), input.contains_key("pixel")];
    if modes.iter().filter(|m| **m).count() != 1 {
        return Err(AiccError::invalid_input("give exactly one target: pan_deg and/or tilt_deg, or point {x, y, z, frame}, or pixel {u, v}"));
    }
    if let Some(point) = input.get("point") {
        let point = point.as_object().ok_or_else(|| AiccError::invalid_input("input.point must be an object {x, y, z, frame}"))?;
        reject_unknown_fields(point, &["x", "y", "z", "frame"]).map_err(|e| AiccError::invalid_input(e.message.replacen("input.", "input.point.", 1)))?;
        let coordinate = |name: &str| -> Result<f64, AiccError> {
            optional_number(point, name, -MAX_POINT_COORDINATE_M, MAX_POINT_COORDINATE_M)
                .map_err(|e| AiccError::invalid_input(e.message.replacen("input.", "input.point.", 1)))?
                .ok_or_else(|| AiccError::invalid_input(format!("input.point.{name} is required (metres)")))
        };
        let xyz = Vector3::new(coordinate("x")?, coordinate("y")?, coordinate("z")?);
        let frame = match point.get("frame") {
            None => BASE_FRAME.to_string(),
            Some(Value::String(frame)) if frame == BASE_FRAME || frame == "odom" => frame.clone(),
            Some(other) => return Err(AiccError::invalid_input(format!("input.point.frame must be \"{BASE_FRAME}\" or \"odom\", got {other}"))),
        };
        return Ok(Target::Point { point: xyz, frame });
    }
    if let Some(pixel) = input.get("pixel") {
        let pixel = pixel.as_object().ok_or_else(|| AiccError::invalid_input("input.pixel must be an object {u, v}"))?;
        reject_unknown_fields(pixel, &["u", "v"]).map_err(|e| AiccError::invalid_input(e.message.replacen("input.", "input.pixel.", 1)))?;
        let coordinate = |name: &str| -> Result<f64, AiccError> {
            optional_number(pixel, name, 0.0, 100_000.0)
                .map_err(|e| AiccError::invalid_input(e.message.replacen("input.", "input.pixel.", 1)))?
                .ok_or_else(|| AiccError::invalid_input(format!("input.pixel.{name} is required (pixels)")))
        };
        return Ok(Target::Pixel { u: coordinate("u")?, v: coordinate("v")? });
    }
    Ok(Target::Angles { pan: pan.map(f64::to_radians), tilt: tilt.map(f64::to_radians) })
}

/// The camera frame and intrinsics for pixel targets, checked for age.
fn fresh_camera_info(ctx: &ToolContext) -> Result<(CameraInfo, String), AiccError> {
    let source = ctx.robot.source("camera_info");
    let info = ctx.robot.camera_info().ok_or_else(|| AiccError::execution_failed(true, format!("no camera_info received yet on {source}")))?;
    check_fresh(&source, Instant::now().saturating_duration_since(info.received), Duration::from_secs_f64(ctx.config.sensors.camera_info.max_age_s))?;
    Ok((info.value, info.frame_id))
}

/// The camera's optical frame as the kinematics knows it.
fn camera_frame(ctx: &ToolContext) -> String {
    let reported = ctx.robot.camera_info().map(|i| i.frame_id).filter(|f| !f.is_empty());
    match reported {
        Some(frame) if ctx.kinematics.transform(BASE_FRAME, &frame, &|_| None).is_ok() => frame,
        _ => DEFAULT_CAMERA_FRAME.to_string(),
    }
}

impl Tool for LookAt {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "look_at",
            class: ToolClass::Actuator,
            description: "Point the pan-tilt camera head. Give ONE target: angles `pan_deg` (positive = left) and/or `tilt_deg` (positive = DOWN; an omitted one stays), or a 3-D `point` {x, y, z metres, frame: base_footprint (x forward, y left, z up from the floor) or odom}, or a `pixel` {u, v} of the current camera image (u right, v down). Goals outside the head's joint limits (URDF) are refused without moving. Returns the angles reached (from joint_states) and the error against the goal.",
            capability: "can_move_self",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pan_deg": { "type": "number", "minimum": -180, "maximum": 180, "description": "degrees, positive turns the camera left; the joint limit (URDF) applies" },
                    "tilt_deg": { "type": "number", "minimum": -90, "maximum": 90, "description": "degrees, positive looks DOWN; the joint limit (URDF) applies" },
                    "point": {
                        "type": "object",
                        "properties": {
                            "x": { "type": "number", "minimum": -MAX_POINT_COORDINATE_M, "maximum": MAX_POINT_COORDINATE_M },
                            "y": { "type": "number", "minimum": -MAX_POINT_COORDINATE_M, "maximum": MAX_POINT_COORDINATE_M },
                            "z": { "type": "number", "minimum": -MAX_POINT_COORDINATE_M, "maximum": MAX_POINT_COORDINATE_M },
                            "frame": { "type": "string", "enum": [BASE_FRAME, "odom"], "default": BASE_FRAME }
                        },
                        "required": ["x", "y", "z"],
                        "additionalProperties": false
                    },
                    "pixel": {
                        "type": "object",
                        "properties": { "u": { "type": "number", "minimum": 0 }, "v": { "type": "number", "minimum": 0 } },
                        "required": ["u", "v"],
                        "additionalProperties": false
                    },
                    "speed_dps": { "type": "number", "exclusiveMinimum": 0, "maximum": 1000, "description": "head speed, degrees/s (default 86; limited to the joints' URDF velocity)" }
                },
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "requested": { "type": "object" },
                    "target": { "type": "object", "properties": { "pan_deg": {"type": "number"}, "tilt_deg": {"type": "number"} } },
                    "actual": { "type": "object", "properties": { "pan_deg": {"type": "number"}, "tilt_deg": {"type": "number"} } },
                    "error_deg": { "type": "object" },
                    "settled": { "type": "boolean" },
                    "applied": { "type": "object" },
                    "outcome": { "type": "object" },
                    "duration_s": { "type": "number" }
                },
                "required": ["requested", "target", "actual", "error_deg", "applied", "outcome", "duration_s"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        joint_tool_unavailable(ctx, now, &[&ctx.config.actuators.head_action])
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            reject_unknown_fields(&input, &["pan_deg", "tilt_deg", "point", "pixel", "speed_dps"])?;
            let target = parse_target(&input)?;
            let speed = optional_number(&input, "speed_dps", 0.0, 1000.0)?;
            if speed == Some(0.0) {
                return Err(AiccError::invalid_input("input.speed_dps must be greater than 0"));
            }
            let halts = ctx.base.begin_motion();
            let (pan_joint, tilt_joint) = head_joints(&ctx)?;
            let states = fresh_joint_states(&ctx)?;
            let current = (measured(&ctx, &states, &pan_joint)?, measured(&ctx, &states, &tilt_joint)?);
            let others = |joint: &str| states.position(joint);
            let frame = camera_frame(&ctx);
            let model = HeadModel { kinematics: &ctx.kinematics, pan_joint: &pan_joint, tilt_joint: &tilt_joint, camera_frame: &frame };
            let geometry = |e: String| AiccError::new(ErrorCode::InternalError, false, format!("head geometry from the URDF: {e}"));
            let mut aim = Value::Null;
            let mut point_in_base = None;
            let (pan, tilt, requested) = match &target {
                Target::Angles { pan, tilt } => (*pan, *tilt, json!({ "pan_deg": pan.map(deg), "tilt_deg": tilt.map(deg) })),
                Target::Point { point, frame: point_frame } => {
                    let in_base = if point_frame == "odom" {
                        let odom = super::turn::fresh_odometry(&ctx)?;
                        odom.orientation.inverse_transform_point(&Point3::from(point - odom.position_m)).coords
                    } else {
                        *point
                    };
                    let (origin, _) = model.optical_axis(current.0, current.1, &others).map_err(geometry)?;
                    let distance = (in_base - origin).norm();
                    if distance < MIN_POINT_DISTANCE_M {
                        return Err(AiccError::invalid_input(format!("input.point is {distance:.3} m from the camera; look_at needs at least {MIN_POINT_DISTANCE_M} m")));
                    }
                    let (pan, tilt) = model.aim_at_point(&in_base, current, &others).map_err(geometry)?;
                    aim = json!({ "point_in_base_footprint_m": { "x": in_base.x, "y": in_base.y, "z": in_base.z }, "distance_m": distance });
                    point_in_base = Some(in_base);
                    (Some(pan), Some(tilt), json!({ "point": { "x": point.x, "y": point.y, "z": point.z, "frame": point_frame } }))
                }
                Target::Pixel { u, v } => {
                    let (info, _) = fresh_camera_info(&ctx)?;
                    if *u >= info.width as f64 || *v >= info.height as f64 {
                        return Err(AiccError::invalid_input(format!("input.pixel ({u}, {v}) is outside the {}x{} image (u < {}, v < {})", info.width, info.height, info.width, info.height)));
                    }
                    let (pan, tilt) = model.aim_at_pixel(&info.k, *u, *v, current, &others).map_err(geometry)?;
                    aim = json!({ "approximation": "aims the head's axes along the pixel's ray from the camera, which sits 2.5 cm from them: off by at most ~0.025 m / distance rad; uses the current joint states, not those when the frame was taken" });
                    (Some(pan), Some(tilt), json!({ "pixel": { "u": u, "v": v }, "image": { "width": info.width, "height": info.height } }))
                }
            };
            let plan = plan_head(&ctx, &states, pan, tilt, speed.map(f64::to_radians))?;
            let mut output = run_head(&ctx, &plan, halts).await?;
            output["requested"] = requested;
            output["requested"]["speed_dps"] = json!(speed);
            if let (Some(point), Some(actual_pan), Some(actual_tilt)) = (point_in_base, output["actual"]["pan_rad"].as_f64(), output["actual"]["tilt_rad"].as_f64()) {
                // How far off the point the optical axis ended up, at the angles reached.
                if let Ok(error) = model.aim_error(&point, actual_pan, actual_tilt, &others) {
                    aim["optical_axis_error_deg"] = json!(deg(error));
                }
            }
            if !aim.is_null() {
                output["aim"] = aim;
            }
            Ok(ToolSuccess { output, source: format!("{} {}", ctx.robot.source("head"), ctx.robot.source("joint_states")) })
        }
        .boxed()
    }
}

/// `value` brought within the URDF limits of `joint` (for measured
/// positions that are to be held).
pub fn clamp_to_limits(ctx: &ToolContext, joint: &str, value: f64) -> f64 {
    ctx.joints.get(joint).map_or(value, |j| value.clamp(j.lower.unwrap_or(f64::NEG_INFINITY), j.upper.unwrap_or(f64::INFINITY)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::input::input_map;
    use crate::governor::JointLimits;

    const URDF: &str = include_str!("../../../../urdf/aicc_bot.urdf");

    fn kinematics() -> Kinematics {
        Kinematics::from_urdf(URDF).unwrap()
    }

    fn model(k: &Kinematics) -> HeadModel<'_> {
        HeadModel { kinematics: k, pan_joint: "head_pan_joint", tilt_joint: "head_tilt_joint", camera_frame: DEFAULT_CAMERA_FRAME }
    }

    fn zero(_: &str) -> Option<f64> {
        Some(0.0)
    }

    /// The pan/tilt pivot from the URDF: pan axis at x = -0.10, tilt axis
    /// at 0.033 + 0.300 + 0.045 = 0.378 m.
    const PIVOT: (f64, f64, f64) = (-0.10, 0.0, 0.378);

    #[test]
    fn directions_give_pan_left_positive_and_tilt_down_positive() {
        let (pan, tilt) = pan_tilt_of(&Vector3::new(1.0, 0.0, 0.0)).unwrap();
        assert!(pan.abs() < 1e-12 && tilt.abs() < 1e-12);
        let (pan, _) = pan_tilt_of(&Vector3::new(1.0, 1.0, 0.0)).unwrap();
        assert!((deg(pan) - 45.0).abs() < 1e-9);
        let (_, tilt) = pan_tilt_of(&Vector3::new(1.0, 0.0, -1.0)).unwrap();
        assert!((deg(tilt) - 45.0).abs() < 1e-9, "below is positive tilt");
        assert!(pan_tilt_of(&Vector3::zeros()).is_none());
    }

    #[test]
    fn a_point_straight_ahead_at_camera_height_needs_no_pan_or_tilt() {
        let k = kinematics();
        let (pan, tilt) = model(&k).aim_at_point(&Vector3::new(2.0, 0.0, PIVOT.2), (0.3, -0.2), &zero).unwrap();
        assert!(deg(pan).abs() < 1e-6 && deg(tilt).abs() < 1e-6, "{pan} {tilt}");
    }

    #[test]
    fn a_point_45_degrees_left_of_the_head_pans_45_degrees() {
        let k = kinematics();
        let point = Vector3::new(PIVOT.0 + 1.0, 1.0, PIVOT.2);
        let (pan, tilt) = model(&k).aim_at_point(&point, (0.0, 0.0), &zero).unwrap();
        assert!((deg(pan) - 45.0).abs() < 1e-6, "{}", deg(pan));
        assert!(tilt.abs() < 1e-6);
        let right = Vector3::new(PIVOT.0 + 1.0, -1.0, PIVOT.2);
        assert!((deg(model(&k).aim_at_point(&right, (0.0, 0.0), &zero).unwrap().0) + 45.0).abs() < 1e-6);
    }

    #[test]
    fn a_point_below_gives_positive_tilt_and_the_optical_axis_passes_through_it() {
        let k = kinematics();
        let m = model(&k);
        let point = Vector3::new(PIVOT.0 + 1.0, 0.0, PIVOT.2 - 1.0);
        let (pan, tilt) = m.aim_at_point(&point, (0.0, 0.0), &zero).unwrap();
        assert!(pan.abs() < 1e-9 && (deg(tilt) - 45.0).abs() < 1e-6, "{}", deg(tilt));
        for target in [Vector3::new(1.0, 0.5, 0.2), Vector3::new(0.3, -0.4, 0.0), Vector3::new(-0.5, 1.5, 1.0), Vector3::new(0.5, 0.2, 0.12)] {
            let (pan, tilt) = m.aim_at_point(&target, (0.0, 0.0), &zero).unwrap();
            let error = m.aim_error(&target, pan, tilt, &zero).unwrap();
            assert!(error < 1e-6, "{target}: optical axis off by {} deg", deg(error));
        }
    }

    #[test]
    fn the_centre_pixel_keeps_the_head_and_pixels_right_and_below_turn_it_right_and_down() {
        let k = kinematics();
        let m = model(&k);
        // 320x240, fx = fy = 290 (about 45 deg vertical field of view).
        let intrinsics = [290.0, 0.0, 160.0, 0.0, 290.0, 120.0, 0.0, 0.0, 1.0];
        let current = (0.4, 0.2);
        let (pan, tilt) = m.aim_at_pixel(&intrinsics, 160.0, 120.0, current, &zero).unwrap();
        assert!((pan - 0.4).abs() < 1e-6 && (tilt - 0.2).abs() < 1e-6, "{pan} {tilt}");
        // (The URDF gives the optical frame's rotation as 1.5707963, not pi/2: micro-degrees off.)
        let (pan, tilt) = m.aim_at_pixel(&intrinsics, 160.0 + 290.0, 120.0, (0.0, 0.0), &zero).unwrap();
        assert!((deg(pan) + 45.0).abs() < 1e-4 && deg(tilt).abs() < 1e-4, "right of centre pans right: {} {}", deg(pan), deg(tilt));
        let (pan, tilt) = m.aim_at_pixel(&intrinsics, 160.0, 120.0 + 290.0, (0.0, 0.0), &zero).unwrap();
        assert!(deg(pan).abs() < 1e-4 && (deg(tilt) - 45.0).abs() < 1e-4, "below the centre tilts down: {}", deg(tilt));
    }

    #[test]
    fn joint_errors_name_the_joint_the_limit_and_degrees() {
        let limits = JointLimits::from_urdf(URDF).unwrap();
        let error = joint_error(limits.check_position("head_pan_joint", 170f64.to_radians()).unwrap_err());
        assert_eq!(error.code, ErrorCode::InvalidInput);
        for needle in ["head_pan_joint", "2.5", "170.0°", "143.2°", "URDF"] {
            assert!(error.message.contains(needle), "{needle}: {}", error.message);
        }
    }

    #[test]
    fn targets_are_one_of_angles_point_or_pixel() {
        let map = input_map;
        assert_eq!(parse_target(&map(json!({"pan_deg": 30}))).unwrap(), Target::Angles { pan: Some(30f64.to_radians()), tilt: None });
        assert!(matches!(parse_target(&map(json!({"point": {"x": 1, "y": 0, "z": 0.2}}))).unwrap(), Target::Point { ref frame, .. } if frame == BASE_FRAME));
        assert!(matches!(parse_target(&map(json!({"pixel": {"u": 10, "v": 20}}))).unwrap(), Target::Pixel { u, v } if u == 10.0 && v == 20.0));
        let both = parse_target(&map(json!({"pan_deg": 30, "pixel": {"u": 1, "v": 2}}))).unwrap_err();
        assert!(both.message.contains("exactly one"), "{}", both.message);
        assert!(parse_target(&map(json!({}))).unwrap_err().message.contains("exactly one"));
        let bad = parse_target(&map(json!({"point": {"x": 1, "y": 0}}))).unwrap_err();
        assert!(bad.message.contains("input.point.z"), "{}", bad.message);
        let frame = parse_target(&map(json!({"point": {"x": 1, "y": 0, "z": 0, "frame": "map"}}))).unwrap_err();
        assert!(frame.message.contains("input.point.frame"), "{}", frame.message);
        assert!(parse_target(&map(json!({"pan_deg": 400}))).unwrap_err().message.contains("input.pan_deg"));
    }
}
