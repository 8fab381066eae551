//! `inspect`: what is at a pixel of the current camera frame: its colour
//! (mean RGB and a plain name), its distance from the depth frame, and
//! where it is in 3-D, in the camera's optical frame and in the robot's
//! base frame (forward kinematics from the URDF and the joint states).
use std::time::Instant;

use futures::FutureExt;
use nalgebra::{Point3, Vector3};
use serde_json::{json, Map, Value};

use super::input::optional_u32;
use super::shared::alignment::{colour_to_depth, intrinsics_for};
use super::shared::fresh::{fresh_sample, max_age, sensor_missing};
use super::shared::images::{decode_frame, run_blocking};
use super::{Tool, ToolContext, ToolFuture};
use crate::perception::{decode_depth, region_mean_rgb};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::robot::{Age, Sensor};

/// The frame 3-D points are also given in (REP-105).
pub const BASE_FRAME: &str = "base_footprint";
/// Default side of the region around the pixel, pixels.
pub const DEFAULT_REGION_PX: u32 = 5;
pub const MAX_REGION_PX: u32 = 101;

pub struct Inspect;

/// Hue bands (upper bound in degrees, name) for saturated colours.
const HUE_NAMES: &[(f64, &str)] = &[
    (15.0, "red"),
    (45.0, "orange"),
    (70.0, "yellow"),
    (160.0, "green"),
    (200.0, "cyan"),
    (260.0, "blue"),
    (290.0, "purple"),
    (340.0, "magenta"),
    (360.0, "red"),
];

/// Hue (degrees, 0-360), saturation and value (0-1) of an RGB colour (0-255).
pub fn hsv(rgb: [f64; 3]) -> (f64, f64, f64) {
    let [r, g, b] = rgb.map(|c| (c / 255.0).clamp(0.0, 1.0));
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let chroma = max - min;
    let hue = if chroma == 0.0 {
        0.0
    } else if max == r {
        60.0 * ((g - b) / chroma).rem_euclid(6.0)
    } else if max == g {
        60.0 * ((b - r) / chroma + 2.0)
    } else {
        60.0 * ((r - g) / chroma + 4.0)
    };
    let saturation = if max == 0.0 { 0.0 } else { chroma / max };
    (hue, saturation, max)
}

/// A plain name for an RGB colour (0-255), from a small table: black,
/// white and grey for dim or washed-out colours; otherwise the hue band
/// (red, orange, yellow, green, cyan, blue, purple, magenta), with dark
/// oranges called brown. Shading changes brightness more than hue, so a
/// red object in shadow stays red.
pub fn colour_name(rgb: [f64; 3]) -> &'static str {
    let (hue, saturation, value) = hsv(rgb);
    if value < 0.12 {
        return "black";
    }
    if saturation < 0.25 {
        return if value >= 0.85 {
            "white"
        } else if value < 0.25 {
            "black"
        } else {
            "grey"
        };
    }
    let name = HUE_NAMES.iter().find(|(upper, _)| hue < *upper).map_or("red", |(_, name)| *name);
    if name == "orange" && value < 0.6 {
        return "brown";
    }
    name
}

/// The region of `width` x `height` pixels centred on (u, v), clipped to a
/// `image_width` x `image_height` image: (x, y, width, height).
pub fn region_around(
    u: u32,
    v: u32,
    width: u32,
    height: u32,
    image_width: u32,
    image_height: u32,
) -> (u32, u32, u32, u32) {
    let clip = |centre: u32, side: u32, limit: u32| {
        let start = i64::from(centre) - i64::from((side - 1) / 2);
        let end = (start + i64::from(side)).min(i64::from(limit));
        let start = start.max(0);
        (start as u32, (end - start) as u32)
    };
    let (x, w) = clip(u, width, image_width);
    let (y, h) = clip(v, height, image_height);
    (x, y, w, h)
}

/// The median of NaN-free values (the mean of the middle two for an even count).
pub fn median(mut values: Vec<f32>) -> Option<f32> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f32::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    })
}

struct InspectRequest {
    u: u32,
    v: u32,
    width: u32,
    height: u32,
}

fn parse(input: &Map<String, Value>) -> Result<InspectRequest, AiccError> {
    let required = |field: &str| {
        optional_u32(input, field, 0, u32::MAX)?
            .ok_or_else(|| AiccError::invalid_input(format!("input.{field} is required (pixel)")))
    };
    Ok(InspectRequest {
        u: required("u")?,
        v: required("v")?,
        width: optional_u32(input, "width", 1, MAX_REGION_PX)?.unwrap_or(DEFAULT_REGION_PX),
        height: optional_u32(input, "height", 1, MAX_REGION_PX)?.unwrap_or(DEFAULT_REGION_PX),
    })
}

/// Refuses a pixel outside the image, naming the field and the image size.
fn check_pixel(
    field: &str,
    value: u32,
    limit: u32,
    image_width: u32,
    image_height: u32,
) -> Result<(), AiccError> {
    if value >= limit {
        return Err(AiccError::invalid_input(format!(
            "input.{field} = {value} is outside the {image_width}x{image_height} camera image ({field} must be 0-{})",
            limit - 1
        )));
    }
    Ok(())
}

fn point_json(point: &Vector3<f64>) -> Value {
    let round = |value: f64| (value * 1e4).round() / 1e4;
    json!({ "x": round(point.x), "y": round(point.y), "z": round(point.z) })
}

/// What the blocking part found.
struct Seen {
    image_width: u32,
    image_height: u32,
    region: (u32, u32, u32, u32),
    rgb: [f64; 3],
    depth_m: Option<f32>,
    depth_pixels: usize,
    depth_valid_pixels: usize,
}

impl Tool for Inspect {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "inspect",
            class: ToolClass::Sensor,
            description: "Detail on a pixel of the current camera frame. (u, v) is a pixel at the camera's native resolution (vision's source_width x source_height; u right, v down, from the top-left); a region of width x height pixels around it (default 5x5) is averaged. Returns the mean colour with a plain name, the distance (median of the valid depth readings in the region, m, along the optical axis) and the 3-D point in the camera's optical frame (z forward, x right, y down) and in the robot's base frame base_footprint (x forward, y left, z up). Parts that cannot be given (no depth there, no camera_info, stale joint states) are null with a note saying why.",
            capability: "can_observe_world",
            strict_input: false,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "u": { "type": "integer", "minimum": 0, "description": "column, 0 = left, at the camera's native resolution" },
                    "v": { "type": "integer", "minimum": 0, "description": "row, 0 = top, at the camera's native resolution" },
                    "width": { "type": "integer", "minimum": 1, "maximum": MAX_REGION_PX, "description": "region width, pixels (default 5)" },
                    "height": { "type": "integer", "minimum": 1, "maximum": MAX_REGION_PX, "description": "region height, pixels (default 5)" }
                },
                "required": ["u", "v"]
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "u": { "type": "integer" },
                    "v": { "type": "integer" },
                    "region": { "type": "object", "properties": { "x": {"type": "integer"}, "y": {"type": "integer"}, "width": {"type": "integer"}, "height": {"type": "integer"} } },
                    "image_width": { "type": "integer" },
                    "image_height": { "type": "integer" },
                    "rgb": { "type": "object", "properties": { "r": {"type": "number"}, "g": {"type": "number"}, "b": {"type": "number"} } },
                    "colour_name": { "type": "string", "enum": ["black", "white", "grey", "red", "orange", "brown", "yellow", "green", "cyan", "blue", "purple", "magenta"] },
                    "hsv": { "type": "object" },
                    "depth_m": { "type": ["number", "null"] },
                    "depth_valid_pixels": { "type": "integer" },
                    "point_camera_m": { "type": ["object", "null"] },
                    "camera_frame": { "type": "string" },
                    "point_base_m": { "type": ["object", "null"] },
                    "base_frame": { "type": "string" },
                    "notes": { "type": "array", "items": { "type": "string" } },
                    "frame_id": { "type": "string" },
                    "stamp_s": { "type": "number" },
                    "age_ms": { "type": "number" }
                },
                "required": ["u", "v", "region", "image_width", "image_height", "rgb", "colour_name", "depth_m", "point_camera_m", "point_base_m", "notes", "frame_id", "stamp_s", "age_ms"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        sensor_missing(ctx, "camera frame", Sensor::Camera, now)
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            let request = parse(&input)?;
            let now = ctx.sensors.now();
            let sensors = &ctx.config.sensors;
            let camera_topic = ctx.sensors.topic(Sensor::Camera);
            let depth_topic = ctx.sensors.topic(Sensor::Depth);
            let (frame, _) = fresh_sample(ctx.sensors.camera(), "camera frame", &camera_topic, max_age(&sensors.camera), now)?;
            let mut notes: Vec<String> = Vec::new();
            let depth = if sensors.depth.is_configured() {
                fresh_sample(ctx.sensors.depth(), "depth frame", &depth_topic, max_age(&sensors.depth), now).map_err(|e| notes.push(format!("no depth: {}", e.message))).ok()
            } else {
                notes.push("no depth: no depth topic is configured".into());
                None
            };
            let fresh_info = |sample: Option<crate::robot::Stamped<crate::robot::CameraInfo>>, max| sample.filter(|s| s.age(now).effective() <= max).map(|s| s.value);
            let colour_info = fresh_info(ctx.sensors.camera_info(), max_age(&sensors.camera_info));
            let depth_info = fresh_info(ctx.sensors.depth_info(), max_age(&sensors.depth_info));
            let (frame_id, stamp_s, received) = (frame.frame_id.clone(), frame.stamp_s, frame.received);
            let depth_stamp_s = depth.as_ref().map(|(d, _)| d.stamp_s);
            let info_for_blocking = colour_info.clone();
            let (topic, dtopic) = (camera_topic.clone(), depth_topic.clone());
            let (seen, depth_note) = run_blocking(move || {
                let rgb = decode_frame(&frame.value, &topic)?;
                let (image_width, image_height) = rgb.dimensions();
                check_pixel("u", request.u, image_width, image_width, image_height)?;
                check_pixel("v", request.v, image_height, image_width, image_height)?;
                let region = region_around(request.u, request.v, request.width, request.height, image_width, image_height);
                let mean = region_mean_rgb(&rgb, region.0, region.1, region.2, region.3).map_err(|e| AiccError::execution_failed(false, format!("{topic}: {e}")))?;
                let mut seen = Seen { image_width, image_height, region, rgb: mean, depth_m: None, depth_pixels: 0, depth_valid_pixels: 0 };
                let Some((depth, _)) = depth else { return Ok((seen, None)) };
                let decoded = match decode_depth(&depth.value) {
                    Ok(decoded) => decoded,
                    Err(error) => return Ok((seen, Some(format!("no depth: {dtopic}: {error}")))),
                };
                let alignment = colour_to_depth(info_for_blocking.as_ref(), depth_info.as_ref(), (image_width, image_height), (decoded.width, decoded.height));
                let mut values = Vec::new();
                for y in region.1..region.1 + region.3 {
                    for x in region.0..region.0 + region.2 {
                        seen.depth_pixels += 1;
                        if let Some(metres) = alignment.map.nearest(x, y, decoded.width, decoded.height).and_then(|(dx, dy)| decoded.at(dx, dy)) {
                            values.push(metres);
                        }
                    }
                }
                seen.depth_valid_pixels = values.len();
                seen.depth_m = median(values);
                let note = seen.depth_m.is_none().then(|| {
                    format!("no depth: none of the {} pixels around ({}, {}) has a depth reading (too near, too far, or no surface)", seen.depth_pixels, request.u, request.v)
                });
                Ok((seen, note))
            })
            .await?;
            notes.extend(depth_note);

            let mut point_camera = None;
            if let Some(depth_m) = seen.depth_m {
                match colour_info.as_ref().and_then(|info| intrinsics_for(info, (seen.image_width, seen.image_height))) {
                    Some(intrinsics) => point_camera = Some(intrinsics.deproject(f64::from(request.u), f64::from(request.v), f64::from(depth_m))),
                    None => notes.push(format!("no 3-D point: no valid, fresh camera_info on {}", ctx.sensors.topic(Sensor::CameraInfo))),
                }
            }
            let mut point_base = None;
            if let Some(point) = point_camera {
                let states = fresh_sample(ctx.sensors.joint_states(), "joint states", &ctx.sensors.topic(Sensor::JointStates), max_age(&sensors.joint_states), ctx.sensors.now());
                match states {
                    Err(error) => notes.push(format!("no base-frame point: {}", error.message)),
                    Ok((states, _)) => match ctx.kinematics.transform(BASE_FRAME, &frame_id, &|joint| states.value.position(joint)) {
                        Ok(pose) => point_base = Some((pose * Point3::from(point)).coords),
                        Err(crate::robot::kinematics::KinematicsError::UnknownJointPosition { joint, .. }) => {
                            notes.push(format!("no base-frame point: {} lacks {joint} (on the chain from {BASE_FRAME} to {frame_id})", ctx.sensors.topic(Sensor::JointStates)))
                        }
                        Err(error) => notes.push(format!("no base-frame point: camera frame '{frame_id}': {error}")),
                    },
                }
            }
            let (h, s, v) = hsv(seen.rgb);
            let round1 = |value: f64| (value * 10.0).round() / 10.0;
            let mut output = json!({
                "u": request.u,
                "v": request.v,
                "region": { "x": seen.region.0, "y": seen.region.1, "width": seen.region.2, "height": seen.region.3 },
                "image_width": seen.image_width,
                "image_height": seen.image_height,
                "rgb": { "r": round1(seen.rgb[0]), "g": round1(seen.rgb[1]), "b": round1(seen.rgb[2]) },
                "colour_name": colour_name(seen.rgb),
                "hsv": { "h_deg": round1(h), "s": (s * 1e3).round() / 1e3, "v": (v * 1e3).round() / 1e3 },
                "depth_m": seen.depth_m.map(|m| (f64::from(m) * 1e4).round() / 1e4),
                "depth_valid_pixels": seen.depth_valid_pixels,
                "point_camera_m": point_camera.as_ref().map(point_json),
                "camera_frame": frame_id,
                "point_base_m": point_base.as_ref().map(point_json),
                "base_frame": BASE_FRAME,
                "notes": notes,
                "frame_id": frame_id,
                "stamp_s": stamp_s,
            });
            output.as_object_mut().expect("built as an object").extend(Age::of(stamp_s, received, ctx.sensors.now()).fields());
            if let Some(depth_stamp_s) = depth_stamp_s {
                output["depth_stamp_offset_ms"] = json!(((depth_stamp_s - stamp_s) * 1e3 * 10.0).round() / 10.0);
            }
            let mut source = vec![camera_topic];
            if depth_stamp_s.is_some() {
                source.push(depth_topic);
            }
            Ok(ToolSuccess { output, source: source.join(" ") })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::perception::RawImage;
    use crate::protocol::ErrorCode;
    use crate::robot::{CameraFrame, CameraInfo, JointStates};
    use crate::tools::input::input_map;
    use crate::tools::testing::*;

    #[test]
    fn colours_are_named_by_hue_with_shading_tolerated() {
        let cases: &[([f64; 3], &str)] = &[
            ([217.0, 26.0, 26.0], "red"),
            ([90.0, 15.0, 15.0], "red"), // red in shadow
            ([240.0, 140.0, 20.0], "orange"),
            ([140.0, 107.0, 77.0], "brown"), // the simulator's pedestal
            ([242.0, 217.0, 26.0], "yellow"),
            ([26.0, 179.0, 51.0], "green"),
            ([20.0, 200.0, 210.0], "cyan"),
            ([38.0, 77.0, 230.0], "blue"),
            ([130.0, 40.0, 200.0], "purple"),
            ([220.0, 40.0, 180.0], "magenta"),
            ([250.0, 30.0, 60.0], "red"), // hue wraps past 340
            ([250.0, 250.0, 245.0], "white"),
            ([128.0, 125.0, 130.0], "grey"),
            ([20.0, 20.0, 25.0], "black"),
            ([10.0, 2.0, 2.0], "black"), // saturated but too dark to tell
        ];
        for (rgb, expected) in cases {
            assert_eq!(colour_name(*rgb), *expected, "{rgb:?} hsv {:?}", hsv(*rgb));
        }
        let (h, s, v) = hsv([0.0, 0.0, 255.0]);
        assert_eq!((h, s, v), (240.0, 1.0, 1.0));
    }

    #[test]
    fn regions_centre_on_the_pixel_and_clip_to_the_image() {
        assert_eq!(region_around(10, 10, 5, 5, 320, 240), (8, 8, 5, 5));
        assert_eq!(region_around(10, 10, 1, 1, 320, 240), (10, 10, 1, 1));
        assert_eq!(region_around(10, 10, 4, 2, 320, 240), (9, 10, 4, 2));
        assert_eq!(region_around(0, 239, 5, 5, 320, 240), (0, 237, 3, 3));
        assert_eq!(region_around(319, 0, 101, 1, 320, 240), (269, 0, 51, 1));
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }

    const W: u32 = 64;
    const H: u32 = 48;
    /// fx = fy = 50, centre (31.5, 23.5).
    const K: [f64; 9] = [50.0, 0.0, 31.5, 0.0, 50.0, 23.5, 0.0, 0.0, 1.0];

    /// Red left half at 2 m, blue right half with no depth; depth at half resolution.
    fn robot() -> Arc<FakeRobot> {
        let colour: Vec<u8> = (0..H)
            .flat_map(|_| {
                (0..W).flat_map(|x| if x < W / 2 { [200u8, 20, 20] } else { [20, 20, 200] })
            })
            .collect();
        let depth: Vec<u8> = (0..H / 2)
            .flat_map(|_| (0..W / 2).map(|x| if x < W / 4 { 2.0f32 } else { f32::INFINITY }))
            .flat_map(f32::to_le_bytes)
            .collect();
        let robot = Arc::new(FakeRobot::default());
        let mut samples = robot.samples.lock();
        let frame = RawImage {
            width: W,
            height: H,
            encoding: "rgb8".into(),
            is_bigendian: false,
            step: W * 3,
            data: colour,
        };
        samples.camera = Some(stamped(
            CameraFrame::Raw(frame),
            "camera_optical_frame",
            Duration::from_millis(5),
        ));
        let depth = RawImage {
            width: W / 2,
            height: H / 2,
            encoding: "32FC1".into(),
            is_bigendian: false,
            step: W * 2,
            data: depth,
        };
        samples.depth = Some(stamped(depth, "camera_optical_frame", Duration::from_millis(5)));
        samples.camera_info = Some(stamped(
            CameraInfo { width: W, height: H, k: K },
            "camera_optical_frame",
            Duration::ZERO,
        ));
        let joints = JointStates {
            names: vec!["head_pan_joint".into(), "head_tilt_joint".into()],
            positions: vec![0.0, 0.0],
            velocities: vec![],
            efforts: vec![],
        };
        samples.joint_states = Some(stamped(joints, "", Duration::ZERO));
        drop(samples);
        robot
    }

    #[tokio::test]
    async fn a_pixel_gets_colour_depth_and_points_in_both_frames() {
        // 10.5 px left of the centre at 2 m: x = (21 - 31.5) / 50 * 2 = -0.42 m.
        let out = Inspect
            .call(input_map(json!({ "u": 21, "v": 23, "width": 3, "height": 3 })), context(robot()))
            .await
            .unwrap()
            .output;
        assert_eq!(
            (out["colour_name"].as_str(), out["rgb"]["r"].as_f64(), out["image_width"].as_u64()),
            (Some("red"), Some(200.0), Some(64))
        );
        assert_eq!(
            (out["depth_m"].as_f64(), out["depth_valid_pixels"].as_u64()),
            (Some(2.0), Some(9))
        );
        let camera = &out["point_camera_m"];
        assert_eq!(
            (camera["x"].as_f64(), camera["y"].as_f64(), camera["z"].as_f64()),
            (Some(-0.42), Some(-0.02), Some(2.0))
        );
        // Head centred: optical z is base x, optical x is base -y, optical y is base -z; the camera is 0.628 m up.
        let base = &out["point_base_m"];
        let camera_x = crate::robot::kinematics::Kinematics::from_urdf(URDF)
            .unwrap()
            .transform(BASE_FRAME, "camera_optical_frame", &|_| Some(0.0))
            .unwrap()
            .translation
            .vector
            .x;
        assert!((base["x"].as_f64().unwrap() - (camera_x + 2.0)).abs() < 1e-3, "{base}");
        assert!((base["y"].as_f64().unwrap() - 0.42).abs() < 1e-3, "{base}");
        assert!((base["z"].as_f64().unwrap() - (0.628 + 0.02)).abs() < 1e-3, "{base}");
        assert_eq!(out["notes"], json!([]));
    }

    #[tokio::test]
    async fn no_depth_still_gives_the_colour_and_says_why() {
        let out = Inspect
            .call(input_map(json!({ "u": 50, "v": 10 })), context(robot()))
            .await
            .unwrap()
            .output;
        assert_eq!(
            (out["colour_name"].as_str(), out["depth_m"].is_null(), out["point_base_m"].is_null()),
            (Some("blue"), true, true)
        );
        assert!(
            out["notes"][0]
                .as_str()
                .unwrap()
                .starts_with("no depth: none of the 25 pixels around (50, 10)"),
            "{}",
            out["notes"]
        );

        let robot = robot();
        robot.samples.lock().joint_states.as_mut().unwrap().value.names[1] = "joint1".into();
        let out = Inspect
            .call(input_map(json!({ "u": 10, "v": 10 })), context(robot.clone()))
            .await
            .unwrap()
            .output;
        assert!(out["point_camera_m"].is_object() && out["point_base_m"].is_null());
        assert_eq!(out["notes"][0], "no base-frame point: joint_states lacks head_tilt_joint (on the chain from base_footprint to camera_optical_frame)");

        robot.samples.lock().joint_states.as_mut().unwrap().received -= Duration::from_secs(5);
        let out = Inspect
            .call(input_map(json!({ "u": 10, "v": 10 })), context(robot))
            .await
            .unwrap()
            .output;
        assert!(out["point_camera_m"].is_object() && out["point_base_m"].is_null());
        assert!(
            out["notes"][0]
                .as_str()
                .unwrap()
                .starts_with("no base-frame point: data on joint_states is 5"),
            "{}",
            out["notes"]
        );
    }

    #[tokio::test]
    async fn pixels_outside_the_image_are_invalid_input_naming_the_size() {
        let err = Inspect
            .call(input_map(json!({ "u": 100000, "v": 0 })), context(robot()))
            .await
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput);
        assert_eq!(
            err.message,
            "input.u = 100000 is outside the 64x48 camera image (u must be 0-63)"
        );
        let err = Inspect
            .call(input_map(json!({ "u": 0, "v": 48 })), context(robot()))
            .await
            .unwrap_err();
        assert!(err.message.starts_with("input.v = 48 is outside the 64x48"), "{}", err.message);
        let err = Inspect.call(input_map(json!({ "v": 0 })), context(robot())).await.unwrap_err();
        assert_eq!(err.message, "input.u is required (pixel)");
    }
}
