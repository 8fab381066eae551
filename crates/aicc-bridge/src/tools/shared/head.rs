//! The pan-tilt head: its geometry from the URDF (aiming the optical axis
//! at a point or a pixel) and planning and running a head motion. Shared
//! by `look_at` and the head part of `turn`.
use std::time::Instant;

use nalgebra::Vector3;
use serde_json::{json, Value};

use super::fresh::measured;
use super::joints::{deg, joint_error, joint_speed, outcome_json, plan_motion, run_motion, settle};
use crate::protocol::AiccError;
use crate::robot::kinematics::{Kinematics, KinematicsError};
use crate::robot::{Controller, JointStates};
use crate::tools::ToolContext;

pub(crate) use crate::robot::frames::BASE_FRAME;

/// The camera's optical frame when the camera reports none.
pub const DEFAULT_CAMERA_FRAME: &str = "camera_optical_frame";

/// Head speed when the agent gives none (the URDF allows 3 rad/s).
pub const DEFAULT_HEAD_SPEED_RADPS: f64 = 1.5;

/// Shortest head motion, so that tiny corrections are not jerks.
pub const MIN_HEAD_DURATION_S: f64 = 0.2;

/// Pan and tilt (rad) that point the camera's optical axis along
/// `direction` (base frame): pan from +x towards +y, tilt positive down.
pub fn pan_tilt_of(direction: &Vector3<f64>) -> Option<(f64, f64)> {
    let length = direction.norm();
    // NaN (a NaN point) is no direction either.
    if length.is_nan() || length <= 1e-9 {
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
fn head_positions<'a>(
    pan_joint: &'a str,
    tilt_joint: &'a str,
    pan: f64,
    tilt: f64,
    others: &'a dyn Fn(&str) -> Option<f64>,
) -> impl Fn(&str) -> Option<f64> + 'a {
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
    pub fn optical_axis(
        &self,
        pan: f64,
        tilt: f64,
        others: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<(Vector3<f64>, Vector3<f64>), KinematicsError> {
        let pose = self.kinematics.transform(
            BASE_FRAME,
            self.camera_frame,
            &head_positions(self.pan_joint, self.tilt_joint, pan, tilt, others),
        )?;
        Ok((pose.translation.vector, pose.rotation * Vector3::z()))
    }

    /// Pan and tilt that put `point` (base frame) on the optical axis.
    /// The camera sits off the pan/tilt axes, so the direction from the
    /// camera to the point depends on the answer: iterate (a fixed point,
    /// converging fast while the point is far compared with the camera's
    /// offset from the axes: 2.5 cm on this robot, on the optical axis).
    pub fn aim_at_point(
        &self,
        point: &Vector3<f64>,
        start: (f64, f64),
        others: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<(f64, f64), KinematicsError> {
        let (mut pan, mut tilt) = start;
        for _ in 0..20 {
            let (origin, _) = self.optical_axis(pan, tilt, others)?;
            let (next_pan, next_tilt) = pan_tilt_of(&(point - origin))
                .ok_or(KinematicsError::NoDirection("the point is at the camera"))?;
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
    pub fn aim_at_pixel(
        &self,
        k: &[f64; 9],
        u: f64,
        v: f64,
        current: (f64, f64),
        others: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<(f64, f64), KinematicsError> {
        let pose = self.kinematics.transform(
            BASE_FRAME,
            self.camera_frame,
            &head_positions(self.pan_joint, self.tilt_joint, current.0, current.1, others),
        )?;
        let ray = pose.rotation * pixel_ray(k, u, v);
        pan_tilt_of(&ray).ok_or(KinematicsError::NoDirection("the pixel gives no direction"))
    }

    /// The angle between the optical axis at (pan, tilt) and the direction
    /// from the camera to `point`, rad: how well the aim was met.
    pub fn aim_error(
        &self,
        point: &Vector3<f64>,
        pan: f64,
        tilt: f64,
        others: &dyn Fn(&str) -> Option<f64>,
    ) -> Result<f64, KinematicsError> {
        let (origin, axis) = self.optical_axis(pan, tilt, others)?;
        Ok(axis.angle(&(point - origin)))
    }
}

/// A checked head goal, ready to send.
#[derive(Debug, Clone)]
pub struct HeadPlan {
    pub joints: Vec<String>,
    pub from: Vec<f64>,
    pub goal: Vec<f64>,
    pub speed_radps: f64,
    pub speed_clamped: bool,
}

/// The head's joint names [pan, tilt] from the configuration.
pub fn head_joints(ctx: &ToolContext) -> Result<(String, String), AiccError> {
    match ctx.config.actuators.head_joints.as_slice() {
        [pan, tilt] if !ctx.config.actuators.head_action.is_empty() => {
            Ok((pan.clone(), tilt.clone()))
        }
        _ => Err(AiccError::execution_failed(
            false,
            "no pan-tilt head is configured (actuators.head_action and head_joints [pan, tilt])",
        )),
    }
}

/// Checks a head goal against the URDF (no motion): pan/tilt of None keep
/// the joint where it is.
pub fn plan_head(
    ctx: &ToolContext,
    states: &JointStates,
    pan: Option<f64>,
    tilt: Option<f64>,
    speed_radps: Option<f64>,
) -> Result<HeadPlan, AiccError> {
    let (pan_joint, tilt_joint) = head_joints(ctx)?;
    let from = vec![measured(ctx, states, &pan_joint)?, measured(ctx, states, &tilt_joint)?];
    // A joint that keeps its place may read a hair outside its limits:
    // hold it just inside them.
    let goal = vec![
        pan.unwrap_or(ctx.joints.clamp_to_limits(&pan_joint, from[0])),
        tilt.unwrap_or(ctx.joints.clamp_to_limits(&tilt_joint, from[1])),
    ];
    let joints = vec![pan_joint, tilt_joint];
    for (name, value) in joints.iter().zip(&goal) {
        ctx.joints.limits().check_position(name, *value).map_err(joint_error)?;
    }
    let (speed, speed_clamped) = joint_speed(ctx, &joints, speed_radps, DEFAULT_HEAD_SPEED_RADPS)?;
    // Planned here to refuse what cannot be done; sent, it is planned again.
    plan_motion(ctx, &joints, states, &goal, speed, MIN_HEAD_DURATION_S)?;
    Ok(HeadPlan { joints, from, goal, speed_radps: speed, speed_clamped })
}

/// Runs a head plan (planned again from the joint states when it is
/// sent) and reports the positions reached.
pub async fn run_head(ctx: &ToolContext, plan: &HeadPlan, halts: u64) -> Result<Value, AiccError> {
    let started = Instant::now();
    let sent = run_motion(
        ctx,
        Controller::Head,
        &plan.joints,
        &plan.goal,
        plan.speed_radps,
        MIN_HEAD_DURATION_S,
        "head",
        halts,
    )
    .await?;
    let outcome = sent.outcome;
    let from = sent.start.positions().to_vec();
    let (actual, settled) = settle(ctx, &plan.joints, &plan.goal).await?;
    Ok(json!({
        "target": { "pan_deg": deg(plan.goal[0]), "tilt_deg": deg(plan.goal[1]), "pan_rad": plan.goal[0], "tilt_rad": plan.goal[1] },
        "actual": { "pan_deg": deg(actual[0]), "tilt_deg": deg(actual[1]), "pan_rad": actual[0], "tilt_rad": actual[1] },
        "error_deg": { "pan": deg(actual[0] - plan.goal[0]), "tilt": deg(actual[1] - plan.goal[1]) },
        "settled": settled,
        "start": { "pan_deg": deg(from[0]), "tilt_deg": deg(from[1]) },
        "applied": { "speed_dps": deg(plan.speed_radps), "speed_clamped_to_urdf_limit": plan.speed_clamped, "planned_duration_s": sent.duration_s },
        "outcome": outcome_json(&outcome),
        "duration_s": started.elapsed().as_secs_f64(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::URDF;

    /// The pan/tilt pivot from the URDF: pan axis at x = -0.10, tilt axis
    /// at 0.033 + 0.550 + 0.045 = 0.628 m.
    const PIVOT: (f64, f64, f64) = (-0.10, 0.0, 0.628);

    #[test]
    fn a_point_45_degrees_left_of_the_head_pans_45_degrees() {
        let k = kinematics();
        let point = Vector3::new(PIVOT.0 + 1.0, 1.0, PIVOT.2);
        let (pan, tilt) = model(&k).aim_at_point(&point, (0.0, 0.0), &zero).unwrap();
        assert!((deg(pan) - 45.0).abs() < 1e-6, "{}", deg(pan));
        assert!(tilt.abs() < 1e-6);
        let right = Vector3::new(PIVOT.0 + 1.0, -1.0, PIVOT.2);
        assert!(
            (deg(model(&k).aim_at_point(&right, (0.0, 0.0), &zero).unwrap().0) + 45.0).abs() < 1e-6
        );
    }

    fn kinematics() -> Kinematics {
        Kinematics::from_urdf(URDF).unwrap()
    }

    fn model(k: &Kinematics) -> HeadModel<'_> {
        HeadModel {
            kinematics: k,
            pan_joint: "head_pan_joint",
            tilt_joint: "head_tilt_joint",
            camera_frame: DEFAULT_CAMERA_FRAME,
        }
    }

    fn zero(_: &str) -> Option<f64> {
        Some(0.0)
    }

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
        let (pan, tilt) =
            model(&k).aim_at_point(&Vector3::new(2.0, 0.0, PIVOT.2), (0.3, -0.2), &zero).unwrap();
        assert!(deg(pan).abs() < 1e-6 && deg(tilt).abs() < 1e-6, "{pan} {tilt}");
    }

    #[test]
    fn a_point_below_gives_positive_tilt_and_the_optical_axis_passes_through_it() {
        let k = kinematics();
        let m = model(&k);
        let point = Vector3::new(PIVOT.0 + 1.0, 0.0, PIVOT.2 - 1.0);
        let (pan, tilt) = m.aim_at_point(&point, (0.0, 0.0), &zero).unwrap();
        assert!(pan.abs() < 1e-9 && (deg(tilt) - 45.0).abs() < 1e-6, "{}", deg(tilt));
        for target in [
            Vector3::new(1.0, 0.5, 0.2),
            Vector3::new(0.3, -0.4, 0.0),
            Vector3::new(-0.5, 1.5, 1.0),
            Vector3::new(0.5, 0.2, 0.12),
        ] {
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
        let (pan, tilt) =
            m.aim_at_pixel(&intrinsics, 160.0 + 290.0, 120.0, (0.0, 0.0), &zero).unwrap();
        assert!(
            (deg(pan) + 45.0).abs() < 1e-4 && deg(tilt).abs() < 1e-4,
            "right of centre pans right: {} {}",
            deg(pan),
            deg(tilt)
        );
        let (pan, tilt) =
            m.aim_at_pixel(&intrinsics, 160.0, 120.0 + 290.0, (0.0, 0.0), &zero).unwrap();
        assert!(
            deg(pan).abs() < 1e-4 && (deg(tilt) - 45.0).abs() < 1e-4,
            "below the centre tilts down: {}",
            deg(tilt)
        );
    }
}
