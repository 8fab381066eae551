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
//!   of the cube in the fingers, with the arm in the `look` pose (raised to
//!   the front left, seen from the side).
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
/// Where a held cube is with the arm in the `look` pose (base_footprint,
/// m): below the fingertips, which the bridge's pose puts at (0.17, 0.14,
/// 0.43).
const SHOWN_CUBE: Point = Point { x: 0.17, y: 0.14, z: 0.40 };
/// Half the cube's side: the centre lies this far behind the face seen.
const CUBE_HALF_M: f64 = 0.0175;
/// The camera head's pivot in base_footprint (x), m.
const HEAD_PIVOT_X_M: f64 = -0.10;
/// Head pans of the scan, degrees (the camera sees 62° across).
const SCAN_PANS_DEG: [f64; 7] = [0.0, 50.0, -50.0, 100.0, -100.0, 140.0, -140.0];
/// Tilts of the scan, degrees down: far (0.9-1.5 m), then near.
const SCAN_TILTS_DEG: [f64; 2] = [15.0, 40.0];
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
    let pixels = red_pixels(rgb);
    let n = pixels.len();
    let (su, sv) =
        pixels.iter().fold((0.0, 0.0), |(a, b), (u, v)| (a + f64::from(*u), b + f64::from(*v)));
    (n >= MIN_RED_PIXELS).then(|| (su / n as f64, sv / n as f64, n))
}

fn is_red(pixel: &image::Rgb<u8>) -> bool {
    let [r, g, b] = pixel.0.map(f64::from);
    r >= 90.0 && r > 2.0 * g && r > 2.0 * b
}

fn red_pixels(rgb: &image::RgbImage) -> Vec<(u32, u32)> {
    rgb.enumerate_pixels().filter(|(_, _, p)| is_red(p)).map(|(u, v, _)| (u, v)).collect()
}

/// Up to `k` red pixels nearest (u, v): points surely on the cube.
fn nearest_red(rgb: &image::RgbImage, u: f64, v: f64, k: usize) -> Vec<(u32, u32)> {
    let mut pixels = red_pixels(rgb);
    pixels.sort_by(|a, b| {
        let d = |p: &(u32, u32)| (f64::from(p.0) - u).powi(2) + (f64::from(p.1) - v).powi(2);
        d(a).total_cmp(&d(b))
    });
    pixels.truncate(k);
    pixels
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

    /// A call that must succeed; one more try after a short wait when it
    /// failed on stale data (a simulator falling behind). The loop refuses
    /// the second try of an actuator whose error was not retryable.
    async fn must(&mut self, tool: &str, input: Value) -> Result<Value, Failed> {
        match self.call(tool, input.clone()).await? {
            Ok(output) => Ok(output),
            Err(error) if error.retryable || error.message.contains(" old ") => {
                self.log.push(describe(tool, &error));
                self.call("wait", json!({ "ticks": 5 }))
                    .await?
                    .map_err(|e| describe("wait", &e))?;
                self.call(tool, input).await?.map_err(|e| describe(tool, &e))
            }
            Err(error) => Err(describe(tool, &error)),
        }
    }

    /// Waits until the robot's sensors answer (the bridge may have just started).
    async fn ready(&mut self) -> Result<(), Failed> {
        for _ in 0..10 {
            match self.call("proprioception", json!({})).await? {
                Ok(_) => return Ok(()),
                Err(error) if error.retryable || error.code == "tool_unavailable" => {
                    self.call("wait", json!({ "ticks": 10 }))
                        .await?
                        .map_err(|e| describe("wait", &e))?;
                }
                Err(error) => return Err(describe("proprioception", &error)),
            }
        }
        Err("the robot's sensors did not answer".into())
    }

    /// The red cube in the current camera frame: its pixel count and a
    /// few of its pixels nearest its centre, in native pixels.
    async fn find_red(&mut self) -> Result<Option<(usize, Vec<(u32, u32)>)>, Failed> {
        let output = self.must("vision", json!({ "format": "jpeg" })).await?;
        let picture = picture_from_output(&output).map_err(|e| format!("vision: {e}"))?;
        let rgb =
            image::load_from_memory(&picture.png).map_err(|e| format!("vision: {e}"))?.to_rgb8();
        let Some((u, v, n)) = red_blob(&rgb) else { return Ok(None) };
        let scale_u =
            output.get("source_width").and_then(Value::as_f64).unwrap_or(f64::from(picture.width))
                / f64::from(picture.width);
        let scale_v = output
            .get("source_height")
            .and_then(Value::as_f64)
            .unwrap_or(f64::from(picture.height))
            / f64::from(picture.height);
        let near = nearest_red(&rgb, u, v, 4)
            .into_iter()
            .map(|(pu, pv)| {
                ((f64::from(pu) * scale_u).round() as u32, (f64::from(pv) * scale_v).round() as u32)
            })
            .collect();
        Ok(Some((n, near)))
    }

    /// Where the red cube's centre is, if the camera sees it now. A
    /// point off the pedestal's height (depth of what lies behind the
    /// cube's edge) is not taken: the next red pixel is inspected.
    async fn locate(&mut self) -> Result<Option<Point>, Failed> {
        let Some((n, pixels)) = self.find_red().await? else { return Ok(None) };
        for (u, v) in pixels {
            let output =
                self.must("inspect", json!({ "u": u, "v": v, "width": 1, "height": 1 })).await?;
            let Some(p) = output.get("point_base_m").filter(|p| p.is_object()) else { continue };
            let (x, y, z) = (
                p["x"].as_f64().unwrap_or(f64::NAN),
                p["y"].as_f64().unwrap_or(f64::NAN),
                p["z"].as_f64().unwrap_or(f64::NAN),
            );
            if !(x.is_finite() && y.is_finite() && (0.05..=0.25).contains(&z)) {
                self.log.push(format!("red at ({u}, {v}) ranged off the cube: z {z:.3}"));
                continue;
            }
            self.log.push(format!("red {n} px, at ({u}, {v})"));
            // The face seen is half a cube nearer than the centre.
            let (dx, dy) = (x - HEAD_PIVOT_X_M, y);
            let d = dx.hypot(dy).max(1e-6);
            return Ok(Some(Point { x: x + CUBE_HALF_M * dx / d, y: y + CUBE_HALF_M * dy / d, z }));
        }
        Ok(None)
    }

    async fn look_at_point(&mut self, p: Point) -> Result<(), Failed> {
        self.must(
            "look_at",
            json!({ "point": { "x": p.x, "y": p.y, "z": p.z, "frame": "base_footprint" } }),
        )
        .await
        .map(|_| ())
    }

    /// Pans the head around (and turns the base once) until the cube is seen.
    async fn scan(&mut self) -> Result<Point, Failed> {
        for round in 0..2 {
            for tilt in SCAN_TILTS_DEG {
                for pan in SCAN_PANS_DEG {
                    self.must("look_at", json!({ "pan_deg": pan, "tilt_deg": tilt })).await?;
                    if let Some(p) = self.locate().await? {
                        self.log.push(format!(
                            "seen at pan {pan}° tilt {tilt}°: ({:.3}, {:.3}, {:.3})",
                            p.x, p.y, p.z
                        ));
                        return Ok(p);
                    }
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
            Err(error) if error.retryable || error.code == "execution_failed" => {
                self.log.push(describe("turn", &error));
                Ok(())
            }
            Err(error) => Err(describe("turn", &error)),
        }
    }

    async fn forward(&mut self, metres: f64) -> Result<(), Failed> {
        match self.call("move", json!({ "forward": metres })).await? {
            Ok(_) => Ok(()),
            Err(error) if error.retryable || error.code == "execution_failed" => {
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
            if (reach - GRASP_REACH_M).abs() <= REACH_TOLERANCE_M
                && arm_yaw.abs() <= MAX_GRASP_YAW_RAD
            {
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

    /// With the arm lifted: the fingers stopped on something the cube's
    /// size (neither closed nor open), nothing touches the bumper, and the
    /// camera sees red in the fingers once the arm shows them from the side
    /// (the `look` pose: from straight behind, the wrist hides them).
    async fn verify(&mut self) -> Result<bool, Failed> {
        let joints = self.must("proprioception", json!({})).await?;
        let gap = joints.pointer("/joints/gripper_left_joint/position").and_then(Value::as_f64);
        let touch = self.must("touch", json!({})).await?;
        let in_contact = touch.get("in_contact").and_then(Value::as_bool).unwrap_or(false);
        self.must("interact", json!({ "pose": "look" })).await?;
        self.look_at_point(SHOWN_CUBE).await?;
        let seen = self.find_red().await?.map(|(n, _)| n);
        self.log.push(format!("verify: gripper gap {gap:?} m, bumper contact {in_contact}, red pixels in the fingers {seen:?}"));
        Ok(gap.is_some_and(|g| (0.005..0.028).contains(&g)) && !in_contact && seen.is_some())
    }

    async fn run(&mut self) -> Result<String, Failed> {
        self.ready().await?;
        self.must("interact", json!({ "pose": "stow" })).await?;
        let mut p = self.scan().await?;
        for attempt in 1..=2 {
            p = self.approach(p).await?;
            if self.grasp(p).await? && self.verify().await? {
                return Ok(format!(
                    "picked the red cube (attempt {attempt}); {}",
                    self.log.join("; ")
                ));
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
        Err("the cube was not picked".into())
    }
}

/// The policy, for [`super::script::ScriptBackend::start`].
pub async fn pick_red_cube(io: ScriptIo) -> (bool, String) {
    let mut pick = Pick { io, log: Vec::new() };
    match pick.run().await {
        Ok(summary) => (true, summary),
        Err(why) => (false, format!("{why}; {}", pick.log.join("; "))),
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
        for (u, v, c) in [(30, 5, [240, 215, 30]), (31, 5, [140, 107, 76]), (32, 5, [60, 170, 50])]
        {
            picture.put_pixel(u, v, image::Rgb(c));
        }
        assert_eq!(red_blob(&picture), Some((10.5, 10.5, 4)));
        let grey = image::RgbImage::from_pixel(10, 10, image::Rgb([120, 120, 120]));
        assert_eq!(red_blob(&grey), None);
        assert!((wrap(3.0 * PI) + PI).abs() < 1e-9);
    }
}
