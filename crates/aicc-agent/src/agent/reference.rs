//! The scripted reference policy for the pick task: find the red cube,
//! drive to it, pick it up, and check that it is held. It uses AICC tools
//! only, as any agent would:
//! - scan: `look_at` (head pans) and `vision`, with colour segmentation of
//!   the picture (red: r well above g and b);
//! - range: `inspect` at the red blob's centre gives the point in the base
//!   frame (depth + the camera's pose);
//! - approach: `turn` to face it and `move` to the arm's reach, under the
//!   governor (a move it stops early is measured again, never repeated);
//! - pick: `interact` (gripper open, arm over the cube, down, close, lift);
//! - verify: the gripper's `holding`, `touch` (no contact), and `vision`
//!   with the arm in its `look` pose (the cube in front of the camera).
use std::f64::consts::PI;

use serde_json::{json, Value};

use super::script::{ScriptIo, Stopped};
use super::CallError;
use crate::client::picture::picture_from_output;

/// The arm's base (joint1's axis) ahead of base_footprint, m.
pub const ARM_BASE_X_M: f64 = 0.062;
/// Horizontal reach of the grasp pose from joint1's axis, m (the cube's centre).
pub const GRASP_REACH_M: f64 = 0.311;
/// joint2..joint4 of the pose over the cube (11 cm above it) and of the grasp
/// (URDF kinematics; the gripper pitched down, facing away from joint1).
pub const ABOVE: [f64; 3] = [0.686, -0.594, 0.408];
pub const GRASP: [f64; 3] = [1.063, -0.425, -0.138];
/// Half the cube's side: the centre lies this far behind the face seen.
const CUBE_HALF_M: f64 = 0.0175;
/// The camera head's pivot in base_footprint (x), m.
const HEAD_PIVOT_X_M: f64 = -0.10;
/// Head pans of the scan, degrees (the camera sees 62° across).
const SCAN_PANS_DEG: [f64; 7] = [0.0, 50.0, -50.0, 100.0, -100.0, 140.0, -140.0];
const SCAN_TILT_DEG: f64 = 15.0;
/// Fewest red pixels that count as the cube.
const MIN_RED_PIXELS: usize = 3;
/// Close enough to grasp: reach error, m.
const REACH_TOLERANCE_M: f64 = 0.010;
/// Largest joint1 angle the policy grasps at (else it turns first), rad.
const MAX_GRASP_YAW_RAD: f64 = 0.35;

/// A point in base_footprint, m.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub z: f64,
}

/// Red pixels of an RGB picture: (centroid u, centroid v, count), in the
/// picture's own pixel coordinates.
pub fn red_blob(rgb: &image::RgbImage) -> Option<(f64, f64, usize)> {
    let (mut su, mut sv, mut n) = (0.0, 0.0, 0usize);
    for (u, v, pixel) in rgb.enumerate_pixels() {
        let [r, g, b] = pixel.0.map(f64::from);
        if r >= 90.0 && r > 2.0 * g && r > 2.0 * b {
            su += f64::from(u);
            sv += f64::from(v);
            n += 1;
        }
    }
    (n >= MIN_RED_PIXELS).then(|| (su / n as f64, sv / n as f64, n))
}

/// What went wrong, as the run's summary.
type Failed = String;

fn stopped(_: Stopped) -> Failed {
    "the loop stopped the run".into()
}

fn describe(tool: &str, error: &CallError) -> String {
    format!("{tool}: {} {}", error.code, error.message)
}

struct Pick {
    io: ScriptIo,
    log: Vec<String>,
}

impl Pick {
    async fn call(&mut self, tool: &str, input: Value) -> Result<Result<Value, CallError>, Failed> {
        self.io.call(tool, input).await.map_err(stopped)
    }

    /// A call that must succeed.
    async fn must(&mut self, tool: &str, input: Value) -> Result<Value, Failed> {
        match self.call(tool, input).await? {
            Ok(output) => Ok(output),
            Err(error) => Err(describe(tool, &error)),
        }
    }

    /// Waits until the robot's sensors answer (the bridge may have just started).
    async fn ready(&mut self) -> Result<(), Failed> {
        for _ in 0..10 {
            match self.call("proprioception", json!({})).await? {
                Ok(_) => return Ok(()),
                Err(error) if error.retryable || error.code == "tool_unavailable" => {
                    self.call("wait", json!({ "ticks": 10 })).await?.map_err(|e| describe("wait", &e))?;
                }
                Err(error) => return Err(describe("proprioception", &error)),
            }
        }
        Err("the robot's sensors did not answer".into())
    }

    /// The red cube in the current camera frame, in native pixels.
    async fn find_red(&mut self) -> Result<Option<(u32, u32, usize)>, Failed> {
        let output = self.must("vision", json!({ "format": "jpeg" })).await?;
        let picture = picture_from_output(&output).map_err(|e| format!("vision: {e}"))?;
        let rgb = image::load_from_memory(&picture.png).map_err(|e| format!("vision: {e}"))?.to_rgb8();
        let Some((u, v, n)) = red_blob(&rgb) else { return Ok(None) };
        let scale_u = output.get("source_width").and_then(Value::as_f64).unwrap_or(f64::from(picture.width)) / f64::from(picture.width);
        let scale_v = output.get("source_height").and_then(Value::as_f64).unwrap_or(f64::from(picture.height)) / f64::from(picture.height);
        Ok(Some(((u * scale_u).round() as u32, (v * scale_v).round() as u32, n)))
    }

    /// Where the red cube's centre is, if the camera sees it now.
    async fn locate(&mut self) -> Result<Option<Point>, Failed> {
        let Some((u, v, n)) = self.find_red().await? else { return Ok(None) };
        let output = self.must("inspect", json!({ "u": u, "v": v, "width": 3, "height": 3 })).await?;
        let Some(p) = output.get("point_base_m").filter(|p| p.is_object()) else {
            self.log.push(format!("red at ({u}, {v}), {n} px, but no point: {}", output.get("notes").unwrap_or(&Value::Null)));
            return Ok(None);
        };
        let (x, y, z) = (p["x"].as_f64().unwrap_or(f64::NAN), p["y"].as_f64().unwrap_or(f64::NAN), p["z"].as_f64().unwrap_or(f64::NAN));
        if !(x.is_finite() && y.is_finite() && z.is_finite()) {
            return Ok(None);
        }
        // The face seen is half a cube nearer than the centre.
        let (dx, dy) = (x - HEAD_PIVOT_X_M, y);
        let d = dx.hypot(dy).max(1e-6);
        Ok(Some(Point { x: x + CUBE_HALF_M * dx / d, y: y + CUBE_HALF_M * dy / d, z }))
    }

    async fn look_at_point(&mut self, p: Point) -> Result<(), Failed> {
        self.must("look_at", json!({ "point": { "x": p.x, "y": p.y, "z": p.z, "frame": "base_footprint" } })).await.map(|_| ())
    }

    /// Pans the head around (and turns the base once) until the cube is seen.
    async fn scan(&mut self) -> Result<Point, Failed> {
        for round in 0..2 {
            for pan in SCAN_PANS_DEG {
                self.must("look_at", json!({ "pan_deg": pan, "tilt_deg": SCAN_TILT_DEG })).await?;
                if let Some(p) = self.locate().await? {
                    self.log.push(format!("seen at pan {pan}°: ({:.3}, {:.3}, {:.3})", p.x, p.y, p.z));
                    return Ok(p);
                }
            }
            if round == 0 {
                self.turn_deg(180.0).await?;
            }
        }
        Err("the red cube was not seen anywhere".into())
    }

    async fn turn_deg(&mut self, yaw: f64) -> Result<(), Failed> {
        match self.call("turn", json!({ "yaw": yaw })).await? {
            Ok(_) => Ok(()),
            // Stopped early (e.g. the governor): measured again by the caller.
            Err(error) if error.retryable => {
                self.log.push(describe("turn", &error));
                Ok(())
            }
            Err(error) => Err(describe("turn", &error)),
        }
    }

    async fn forward(&mut self, metres: f64) -> Result<(), Failed> {
        match self.call("move", json!({ "forward": metres })).await? {
            Ok(_) => Ok(()),
            Err(error) if error.retryable => {
                self.log.push(describe("move", &error));
                Ok(())
            }
            Err(error) => Err(describe("move", &error)),
        }
    }

    /// Drives until the cube is within the grasp's reach; the cube's point then.
    async fn approach(&mut self, mut p: Point) -> Result<Point, Failed> {
        for _ in 0..8 {
            let reach = (p.x - ARM_BASE_X_M).hypot(p.y);
            let arm_yaw = p.y.atan2(p.x - ARM_BASE_X_M);
            if (reach - GRASP_REACH_M).abs() <= REACH_TOLERANCE_M && arm_yaw.abs() <= MAX_GRASP_YAW_RAD {
                return Ok(p);
            }
            let bearing = p.y.atan2(p.x);
            if bearing.abs() > 2.0_f64.to_radians() {
                self.turn_deg(bearing.to_degrees()).await?;
            }
            let range = p.x.hypot(p.y);
            let to_go = range - (ARM_BASE_X_M + GRASP_REACH_M);
            // Long ways in two legs: the second one measured anew.
            let leg = if to_go > 0.4 { to_go - 0.15 } else { to_go };
            if leg.abs() > 0.003 {
                self.forward(leg).await?;
            }
            // Where it is now: look where it should be, or scan again.
            let expected = Point { x: range - leg, y: 0.0, z: p.z };
            self.look_at_point(expected).await?;
            p = match self.locate().await? {
                Some(p) => p,
                None => self.scan().await?,
            };
            self.log.push(format!("now at ({:.3}, {:.3}, {:.3})", p.x, p.y, p.z));
        }
        Err(format!("could not get within reach of the cube (last seen at {:.3}, {:.3})", p.x, p.y))
    }

    async fn arm(&mut self, joint1: f64, rest: [f64; 3]) -> Result<(), Failed> {
        self.must("interact", json!({ "joints": { "joint1": joint1, "joint2": rest[0], "joint3": rest[1], "joint4": rest[2] } })).await.map(|_| ())
    }

    /// Grasps the cube at `p`; whether the gripper holds something.
    async fn grasp(&mut self, p: Point) -> Result<bool, Failed> {
        let joint1 = p.y.atan2(p.x - ARM_BASE_X_M);
        self.must("interact", json!({ "gripper": "open" })).await?;
        self.arm(joint1, ABOVE).await?;
        self.arm(joint1, GRASP).await?;
        let closed = self.must("interact", json!({ "gripper": "close" })).await?;
        let holding = closed.pointer("/gripper/holding").and_then(Value::as_bool).unwrap_or(false);
        self.arm(joint1, ABOVE).await?;
        Ok(holding)
    }

    /// The gripper still holds something, nothing touches the bumper, and
    /// the camera sees red in front of it with the arm in its look pose.
    async fn verify(&mut self) -> Result<bool, Failed> {
        let joints = self.must("proprioception", json!({})).await?;
        let gap = joints.pointer("/joints/gripper_left_joint/position").and_then(Value::as_f64);
        let touch = self.must("touch", json!({})).await?;
        let in_contact = touch.get("in_contact").and_then(Value::as_bool).unwrap_or(false);
        self.must("interact", json!({ "pose": "look" })).await?;
        self.must("look_at", json!({ "pan_deg": 0, "tilt_deg": 0 })).await?;
        let seen = self.find_red().await?;
        self.log.push(format!("verify: gripper gap {gap:?}, bumper contact {in_contact}, red in view {seen:?}"));
        Ok(gap.is_none_or(|g| g > 0.002) && seen.is_some())
    }

    async fn run(&mut self) -> Result<String, Failed> {
        self.ready().await?;
        self.must("interact", json!({ "pose": "stow" })).await?;
        let mut p = self.scan().await?;
        for attempt in 1..=2 {
            p = self.approach(p).await?;
            if self.grasp(p).await? && self.verify().await? {
                return Ok(format!("picked the red cube (attempt {attempt}); {}", self.log.join("; ")));
            }
            self.log.push(format!("attempt {attempt}: not holding it"));
            // Put the arm back, back off, and look again.
            self.must("interact", json!({ "gripper": "open" })).await?;
            self.must("interact", json!({ "pose": "stow" })).await?;
            self.forward(-0.15).await?;
            self.look_at_point(Point { x: p.x + 0.15, y: p.y, z: p.z }).await?;
            p = match self.locate().await? {
                Some(p) => p,
                None => self.scan().await?,
            };
        }
        Err(format!("the cube was not picked; {}", self.log.join("; ")))
    }
}

/// The policy, for [`super::script::ScriptBackend::start`].
pub async fn pick_red_cube(io: ScriptIo) -> (bool, String) {
    let mut pick = Pick { io, log: Vec::new() };
    match pick.run().await {
        Ok(summary) => (true, summary),
        Err(why) => (false, why),
    }
}

/// Wraps an angle to [-pi, pi).
pub fn wrap(angle: f64) -> f64 {
    (angle + PI).rem_euclid(2.0 * PI) - PI
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_red_blob_is_found_and_other_colours_are_not() {
        let mut picture = image::RgbImage::from_pixel(40, 30, image::Rgb([190, 190, 185]));
        for (u, v) in [(10, 10), (11, 10), (10, 11), (11, 11)] {
            picture.put_pixel(u, v, image::Rgb([200, 30, 25]));
        }
        // Yellow, brown and orange-ish distractors are not red.
        for (u, v, c) in [(30, 5, [240, 215, 30]), (31, 5, [140, 107, 76]), (32, 5, [60, 170, 50])] {
            picture.put_pixel(u, v, image::Rgb(c));
        }
        assert_eq!(red_blob(&picture), Some((10.5, 10.5, 4)));
        let grey = image::RgbImage::from_pixel(10, 10, image::Rgb([120, 120, 120]));
        assert_eq!(red_blob(&grey), None);
        assert!((wrap(3.0 * PI) + PI).abs() < 1e-9);
    }
}
