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
use super::shared::fresh::{check_fresh, fresh_joint_states, fresh_odometry, measured};
use super::shared::head::{
    head_joints, plan_head, run_head, HeadModel, BASE_FRAME, DEFAULT_CAMERA_FRAME,
};
use super::shared::joints::{deg, joint_tool_unavailable};
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::{AiccError, ErrorCode};
use crate::robot::{CameraInfo, Endpoint, Sensor};

/// Nearest point the head will aim at (from the camera).
const MIN_POINT_DISTANCE_M: f64 = 0.1;
/// Largest coordinate of a target point, metres.
const MAX_POINT_COORDINATE_M: f64 = 100.0;

// ----- helpers shared by the joint tools ---------------------------------

// ----- head geometry (pure) ----------------------------------------------

// ----- head motion (shared with `turn`) ----------------------------------

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
    let modes =
        [pan.is_some() || tilt.is_some(), input.contains_key("point"), input.contains_key("pixel")];
    if modes.iter().filter(|m| **m).count() != 1 {
        return Err(AiccError::invalid_input("give exactly one target: pan_deg and/or tilt_deg, or point {x, y, z, frame}, or pixel {u, v}"));
    }
    if let Some(point) = input.get("point") {
        let point = point.as_object().ok_or_else(|| {
            AiccError::invalid_input("input.point must be an object {x, y, z, frame}")
        })?;
        reject_unknown_fields(point, &["x", "y", "z", "frame"]).map_err(|e| {
            AiccError::invalid_input(e.message.replacen("input.", "input.point.", 1))
        })?;
        let coordinate = |name: &str| -> Result<f64, AiccError> {
            optional_number(point, name, -MAX_POINT_COORDINATE_M, MAX_POINT_COORDINATE_M)
                .map_err(|e| {
                    AiccError::invalid_input(e.message.replacen("input.", "input.point.", 1))
                })?
                .ok_or_else(|| {
                    AiccError::invalid_input(format!("input.point.{name} is required (metres)"))
                })
        };
        let xyz = Vector3::new(coordinate("x")?, coordinate("y")?, coordinate("z")?);
        let frame = match point.get("frame") {
            None => BASE_FRAME.to_string(),
            Some(Value::String(frame)) if frame == BASE_FRAME || frame == "odom" => frame.clone(),
            Some(other) => {
                return Err(AiccError::invalid_input(format!(
                    "input.point.frame must be \"{BASE_FRAME}\" or \"odom\", got {other}"
                )))
            }
        };
        return Ok(Target::Point { point: xyz, frame });
    }
    if let Some(pixel) = input.get("pixel") {
        let pixel = pixel
            .as_object()
            .ok_or_else(|| AiccError::invalid_input("input.pixel must be an object {u, v}"))?;
        reject_unknown_fields(pixel, &["u", "v"]).map_err(|e| {
            AiccError::invalid_input(e.message.replacen("input.", "input.pixel.", 1))
        })?;
        let coordinate = |name: &str| -> Result<f64, AiccError> {
            optional_number(pixel, name, 0.0, 100_000.0)
                .map_err(|e| {
                    AiccError::invalid_input(e.message.replacen("input.", "input.pixel.", 1))
                })?
                .ok_or_else(|| {
                    AiccError::invalid_input(format!("input.pixel.{name} is required (pixels)"))
                })
        };
        return Ok(Target::Pixel { u: coordinate("u")?, v: coordinate("v")? });
    }
    Ok(Target::Angles { pan: pan.map(f64::to_radians), tilt: tilt.map(f64::to_radians) })
}

/// The camera frame and intrinsics for pixel targets, checked for age.
fn fresh_camera_info(ctx: &ToolContext) -> Result<(CameraInfo, String), AiccError> {
    let source = ctx.sensors.topic(Sensor::CameraInfo);
    let info = ctx.sensors.camera_info().ok_or_else(|| {
        AiccError::execution_failed(true, format!("no camera_info received yet on {source}"))
    })?;
    check_fresh(
        &source,
        info.age(ctx.sensors.now()).effective(),
        Duration::from_secs_f64(ctx.config.sensors.camera_info.max_age_s),
    )?;
    Ok((info.value, info.frame_id))
}

/// The camera's optical frame as the kinematics knows it.
fn camera_frame(ctx: &ToolContext) -> String {
    let reported = ctx.sensors.camera_info().map(|i| i.frame_id).filter(|f| !f.is_empty());
    match reported {
        Some(frame) if ctx.kinematics.has_link(&frame) => frame,
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
            let halts = ctx.joints.begin_motion();
            let (pan_joint, tilt_joint) = head_joints(&ctx)?;
            let states = fresh_joint_states(&ctx)?;
            let current = (measured(&ctx, &states, &pan_joint)?, measured(&ctx, &states, &tilt_joint)?);
            let others = |joint: &str| states.position(joint);
            let frame = camera_frame(&ctx);
            let model = HeadModel { kinematics: &ctx.kinematics, pan_joint: &pan_joint, tilt_joint: &tilt_joint, camera_frame: &frame };
            let geometry = |e: crate::robot::kinematics::KinematicsError| AiccError::new(ErrorCode::InternalError, false, format!("head geometry from the URDF: {e}"));
            let mut aim = Value::Null;
            let mut point_in_base = None;
            let (pan, tilt, requested) = match &target {
                Target::Angles { pan, tilt } => (*pan, *tilt, json!({ "pan_deg": pan.map(deg), "tilt_deg": tilt.map(deg) })),
                Target::Point { point, frame: point_frame } => {
                    let in_base = if point_frame == "odom" {
                        let odom = fresh_odometry(&ctx)?;
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
            Ok(ToolSuccess { output, source: format!("{} {}", ctx.joints.endpoint(Endpoint::Head), ctx.sensors.topic(Sensor::JointStates)) })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::input::input_map;

    #[test]
    fn targets_are_one_of_angles_point_or_pixel() {
        let map = input_map;
        assert_eq!(
            parse_target(&map(json!({"pan_deg": 30}))).unwrap(),
            Target::Angles { pan: Some(30f64.to_radians()), tilt: None }
        );
        assert!(
            matches!(parse_target(&map(json!({"point": {"x": 1, "y": 0, "z": 0.2}}))).unwrap(), Target::Point { ref frame, .. } if frame == BASE_FRAME)
        );
        assert!(
            matches!(parse_target(&map(json!({"pixel": {"u": 10, "v": 20}}))).unwrap(), Target::Pixel { u, v } if u == 10.0 && v == 20.0)
        );
        let both =
            parse_target(&map(json!({"pan_deg": 30, "pixel": {"u": 1, "v": 2}}))).unwrap_err();
        assert!(both.message.contains("exactly one"), "{}", both.message);
        assert!(parse_target(&map(json!({}))).unwrap_err().message.contains("exactly one"));
        let bad = parse_target(&map(json!({"point": {"x": 1, "y": 0}}))).unwrap_err();
        assert!(bad.message.contains("input.point.z"), "{}", bad.message);
        let frame = parse_target(&map(json!({"point": {"x": 1, "y": 0, "z": 0, "frame": "map"}})))
            .unwrap_err();
        assert!(frame.message.contains("input.point.frame"), "{}", frame.message);
        assert!(parse_target(&map(json!({"pan_deg": 400})))
            .unwrap_err()
            .message
            .contains("input.pan_deg"));
    }
}
