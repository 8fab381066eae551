//! `depth`: the depth frame aligned to `vision`'s pixel grid, as a 16-bit
//! PNG in millimetres plus summary distances. Alignment maps each colour
//! pixel's ray into the depth image with the two cameras' intrinsics (the
//! cameras are taken to share their optical centre, as in a registered
//! RGB-D camera or the simulator), or by size alone when either
//! camera_info is missing.
use std::time::Instant;

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::proprioception::{fresh_sample, max_age, millis, sensor_missing};
use super::vision::{frame_size, optional_bool, optional_u32, run_blocking};
use super::{Tool, ToolContext, ToolFuture};
use crate::perception::encode::fit_within;
use crate::perception::{decode_depth, to_base64, to_png_mm, CameraIntrinsics, DepthImage};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::robot::{CameraInfo, Stamped};

pub struct Depth;

/// Where a pixel of one image falls in another image of the same scene,
/// per axis: `u' = su * u + ou`, `v' = sv * v + ov` (pixel centres at
/// integer coordinates, as in camera_info).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PixelMap {
    pub su: f64,
    pub ou: f64,
    pub sv: f64,
    pub ov: f64,
}

impl PixelMap {
    /// From one camera's pixels to another's that shares its optical
    /// centre and orientation: the ray through (u, v) of `from` meets `to`
    /// at `fx_to (u - cx_from) / fx_from + cx_to`.
    pub fn between(from: &CameraIntrinsics, to: &CameraIntrinsics) -> Self {
        let su = to.fx / from.fx;
        let sv = to.fy / from.fy;
        PixelMap { su, ou: to.cx - su * from.cx, sv, ov: to.cy - sv * from.cy }
    }

    /// By size alone, for two images of the same field of view: pixel
    /// edges map to pixel edges (`u' = s (u + 0.5) - 0.5`).
    pub fn proportional(from: (u32, u32), to: (u32, u32)) -> Self {
        let su = f64::from(to.0) / f64::from(from.0);
        let sv = f64::from(to.1) / f64::from(from.1);
        PixelMap { su, ou: 0.5 * su - 0.5, sv, ov: 0.5 * sv - 0.5 }
    }

    pub fn apply(&self, u: f64, v: f64) -> (f64, f64) {
        (self.su * u + self.ou, self.sv * v + self.ov)
    }

    /// The pixel of a `width` x `height` target nearest to where (u, v)
    /// lands, or None when it lands outside.
    pub fn nearest(&self, u: u32, v: u32, width: u32, height: u32) -> Option<(u32, u32)> {
        let (x, y) = self.apply(f64::from(u), f64::from(v));
        let (x, y) = ((x + 0.5).floor(), (y + 0.5).floor());
        let inside = x >= 0.0 && y >= 0.0 && x < f64::from(width) && y < f64::from(height);
        inside.then_some((x as u32, y as u32))
    }

    fn is_identity(&self) -> bool {
        const EPS: f64 = 1e-9;
        (self.su - 1.0).abs() < EPS && (self.sv - 1.0).abs() < EPS && self.ou.abs() < EPS && self.ov.abs() < EPS
    }
}

/// The depth seen through a `width` x `height` colour pixel grid: each
/// colour pixel copies the depth pixel `map` sends it to (nearest
/// neighbour, so edges never blend foreground and background); NaN where
/// the depth image does not reach.
pub fn align_depth(depth: &DepthImage, map: &PixelMap, width: u32, height: u32) -> DepthImage {
    if (width, height) == (depth.width, depth.height) && map.is_identity() {
        return depth.clone();
    }
    let mut metres = Vec::with_capacity(width as usize * height as usize);
    for v in 0..height {
        for u in 0..width {
            let value = map.nearest(u, v, depth.width, depth.height).and_then(|(x, y)| depth.at(x, y));
            metres.push(value.unwrap_or(f32::NAN));
        }
    }
    DepthImage { width, height, metres }
}

/// How colour pixels map into the depth image, and how that was decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Alignment {
    pub map: PixelMap,
    /// "intrinsics" or "proportional".
    pub method: &'static str,
}

/// Intrinsics from a camera_info, scaled to the image it describes when
/// that image has another size (a binned or resized stream).
pub(crate) fn intrinsics_for(info: &CameraInfo, size: (u32, u32)) -> Option<CameraIntrinsics> {
    let intrinsics = CameraIntrinsics::from_k(&info.k, info.width, info.height).ok()?;
    if (info.width, info.height) == size {
        return Some(intrinsics);
    }
    intrinsics.scaled_to(size.0, size.1).ok()
}

/// The map from the colour image (`colour_size`) into the depth image
/// (`depth_size`): by the two intrinsics when both are known and valid,
/// otherwise proportional.
pub fn colour_to_depth(colour_info: Option<&CameraInfo>, depth_info: Option<&CameraInfo>, colour_size: (u32, u32), depth_size: (u32, u32)) -> Alignment {
    let colour = colour_info.and_then(|info| intrinsics_for(info, colour_size));
    let depth = depth_info.and_then(|info| intrinsics_for(info, depth_size));
    match (colour, depth) {
        (Some(colour), Some(depth)) => Alignment { map: PixelMap::between(&colour, &depth), method: "intrinsics" },
        _ => Alignment { map: PixelMap::proportional(colour_size, depth_size), method: "proportional" },
    }
}

/// What the tool needs besides the depth frame: the latest colour frame's
/// size and both camera_infos, each only if fresh.
pub(crate) struct AlignmentInputs {
    pub colour_size: Option<(u32, u32)>,
    pub colour_info: Option<CameraInfo>,
    pub depth_info: Option<CameraInfo>,
}

impl AlignmentInputs {
    pub fn gather(ctx: &ToolContext, now: Instant) -> Self {
        let sensors = &ctx.config.sensors;
        let info = |sample: Option<Stamped<CameraInfo>>, max| sample.filter(|s| now.saturating_duration_since(s.received) <= max).map(|s| s.value);
        let colour_info = info(ctx.robot.camera_info(), max_age(&sensors.camera_info));
        // The frame's size, from the frame itself (what `vision` returns), else its camera_info.
        let colour_size = ctx.robot.camera().and_then(|frame| frame_size(&frame.value)).or(colour_info.as_ref().map(|i| (i.width, i.height)));
        AlignmentInputs { colour_size, colour_info, depth_info: info(ctx.robot.depth_info(), max_age(&sensors.depth_info)) }
    }

    /// The colour grid size and the map into a depth image of `depth_size`
    /// (the depth image's own grid when there is no colour camera).
    pub fn alignment(&self, depth_size: (u32, u32)) -> ((u32, u32), Alignment) {
        match self.colour_size {
            Some(colour_size) => (colour_size, colour_to_depth(self.colour_info.as_ref(), self.depth_info.as_ref(), colour_size, depth_size)),
            None => (depth_size, Alignment { map: PixelMap::proportional(depth_size, depth_size), method: "none (no colour camera frame)" }),
        }
    }
}

struct DepthRequest {
    max_width: Option<u32>,
    max_height: Option<u32>,
    include_image: bool,
}

fn parse(input: &Map<String, Value>) -> Result<DepthRequest, AiccError> {
    Ok(DepthRequest {
        max_width: optional_u32(input, "max_width", 1, 65_535)?,
        max_height: optional_u32(input, "max_height", 1, 65_535)?,
        include_image: optional_bool(input, "include_image", true)?,
    })
}

fn metres(value: Option<f32>) -> Value {
    value.map_or(Value::Null, |m| json!((f64::from(m) * 1e4).round() / 1e4))
}

impl Tool for Depth {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "depth",
            class: ToolClass::Sensor,
            description: "Distances (m, along the camera's optical axis) aligned pixel for pixel to `vision`'s frame: ask with the same max_width/max_height as vision to get the same grid. Summary: min/max/median of the valid pixels, the centre pixel, and the valid fraction. With include_image (default true) also a 16-bit grayscale PNG, 1 unit = 1 mm, 0 = no reading; set it false for the numbers alone, which is cheap.",
            capability: "can_observe_world",
            strict_input: false,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "max_width": { "type": "integer", "minimum": 1, "maximum": 65535, "description": "pixels; as vision's" },
                    "max_height": { "type": "integer", "minimum": 1, "maximum": 65535, "description": "pixels; as vision's" },
                    "include_image": { "type": "boolean", "description": "default true; false returns the statistics only" }
                }
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "width": { "type": "integer", "description": "of the image (returned or not)" },
                    "height": { "type": "integer" },
                    "camera_width": { "type": "integer", "description": "vision's native grid, which the statistics cover" },
                    "camera_height": { "type": "integer" },
                    "depth_width": { "type": "integer", "description": "the depth sensor's own resolution" },
                    "depth_height": { "type": "integer" },
                    "alignment": { "type": "string", "description": "intrinsics, proportional, or why none" },
                    "png16_mm_b64": { "type": "string" },
                    "png_bytes": { "type": "integer" },
                    "scale": { "const": "1 unit = 1 mm" },
                    "invalid_value": { "const": 0 },
                    "saturation": { "type": "string" },
                    "min_m": { "type": ["number", "null"] },
                    "max_m": { "type": ["number", "null"] },
                    "median_m": { "type": ["number", "null"] },
                    "centre_m": { "type": ["number", "null"], "description": "at pixel (camera_width / 2, camera_height / 2)" },
                    "valid_fraction": { "type": "number" },
                    "encoding": { "type": "string" },
                    "frame_id": { "type": "string" },
                    "stamp_s": { "type": "number" },
                    "age_ms": { "type": "number" }
                },
                "required": ["width", "height", "camera_width", "camera_height", "depth_width", "depth_height", "alignment", "min_m", "max_m", "median_m", "centre_m", "valid_fraction", "frame_id", "stamp_s", "age_ms"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        sensor_missing(ctx, "depth frame", "depth", &ctx.config.sensors.depth, now)
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            let request = parse(&input)?;
            let now = Instant::now();
            let topic = ctx.robot.source("depth");
            let (depth, _) = fresh_sample(ctx.robot.depth(), "depth frame", &topic, max_age(&ctx.config.sensors.depth), now)?;
            let inputs = AlignmentInputs::gather(&ctx, now);
            let (frame_id, stamp_s, received, encoding) = (depth.frame_id, depth.stamp_s, depth.received, depth.value.encoding.clone());
            let depth_topic = topic.clone();
            let (mut output, png) = run_blocking(move || {
                let decoded = decode_depth(&depth.value).map_err(|error| AiccError::execution_failed(true, format!("{depth_topic}: {error}")))?;
                let depth_size = (decoded.width, decoded.height);
                let (camera_size, alignment) = inputs.alignment(depth_size);
                let aligned = align_depth(&decoded, &alignment.map, camera_size.0, camera_size.1);
                let stats = aligned.stats();
                let (width, height) = fit_within(camera_size.0, camera_size.1, request.max_width, request.max_height);
                let png = if request.include_image {
                    let sized = if (width, height) == camera_size { aligned } else { aligned.resize_nearest(width, height) };
                    Some(to_png_mm(&sized).map_err(|error| AiccError::execution_failed(true, format!("{depth_topic}: {error}")))?)
                } else {
                    None
                };
                let output = json!({
                    "width": width,
                    "height": height,
                    "camera_width": camera_size.0,
                    "camera_height": camera_size.1,
                    "depth_width": depth_size.0,
                    "depth_height": depth_size.1,
                    "alignment": alignment.method,
                    "min_m": metres(stats.min_m),
                    "max_m": metres(stats.max_m),
                    "median_m": metres(stats.median_m),
                    "centre_m": metres(stats.centre_m),
                    "valid_fraction": (stats.valid_fraction * 1e4).round() / 1e4,
                });
                Ok((output, png.map(|bytes| (to_base64(&bytes), bytes.len()))))
            })
            .await?;
            let fields = output.as_object_mut().expect("built as an object");
            if let Some((b64, len)) = png {
                fields.insert("png16_mm_b64".into(), json!(b64));
                fields.insert("png_bytes".into(), json!(len));
                fields.insert("scale".into(), json!("1 unit = 1 mm"));
                fields.insert("invalid_value".into(), json!(0));
                fields.insert("saturation".into(), json!("depths of 65.535 m or more read 65535; valid depths under 0.5 mm read 1"));
            }
            fields.insert("encoding".into(), json!(encoding));
            fields.insert("frame_id".into(), json!(frame_id));
            fields.insert("stamp_s".into(), json!(stamp_s));
            fields.insert("age_ms".into(), json!(millis(Instant::now().saturating_duration_since(received))));
            Ok(ToolSuccess { output, source: format!("{topic} {}", ctx.robot.source("depth_info")) })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use base64::Engine as _;

    use super::*;
    use crate::tools::input::input_map;
    use crate::perception::RawImage;
    use crate::robot::CameraFrame;
    use crate::tools::proprioception::testing::*;

    const K: [f64; 9] = [525.0, 0.0, 319.5, 0.0, 525.0, 239.5, 0.0, 0.0, 1.0];

    fn info(k: [f64; 9], width: u32, height: u32) -> CameraInfo {
        CameraInfo { width, height, k }
    }

    #[test]
    fn proportional_maps_agree_with_resize_nearest() {
        let depth = DepthImage { width: 5, height: 3, metres: (0..15).map(|i| i as f32).collect() };
        for (width, height) in [(10, 6), (3, 2), (7, 5), (5, 3)] {
            let aligned = align_depth(&depth, &PixelMap::proportional((width, height), (5, 3)), width, height);
            assert_eq!(aligned, depth.resize_nearest(width, height), "{width}x{height}");
        }
    }

    #[test]
    fn intrinsic_maps_follow_rays_between_cameras() {
        let colour = CameraIntrinsics::from_k(&K, 640, 480).unwrap();
        // Same camera at half resolution: the same map as by size.
        let half = colour.scaled_to(320, 240).unwrap();
        let map = PixelMap::between(&colour, &half);
        let proportional = PixelMap::proportional((640, 480), (320, 240));
        for (u, v) in [(0.0, 0.0), (639.0, 479.0), (123.0, 45.0)] {
            let (a, b) = (map.apply(u, v), proportional.apply(u, v));
            assert!((a.0 - b.0).abs() < 1e-9 && (a.1 - b.1).abs() < 1e-9, "{a:?} {b:?}");
        }
        // A narrower depth camera (longer focal length) sees the centre
        // region: the colour centre maps to the depth centre, the colour
        // corners fall outside.
        let narrow = CameraIntrinsics { fx: 1050.0, fy: 1050.0, cx: 319.5, cy: 239.5, width: 640, height: 480 };
        let map = PixelMap::between(&colour, &narrow);
        assert_eq!(map.apply(319.5, 239.5), (319.5, 239.5));
        assert_eq!(map.nearest(300, 200, 640, 480), Some((281, 161)));
        assert_eq!(map.apply(419.5, 239.5), (519.5, 239.5), "100 px right of the centre is 200 px at twice the focal length");
        assert_eq!(map.nearest(0, 0, 640, 480), None);
        // A known ray: the point (0.1, -0.05, 2) lands on both cameras' pixels.
        let point = nalgebra::Vector3::new(0.1, -0.05, 2.0);
        let (uc, vc) = colour.project(&point).unwrap();
        let (ud, vd) = narrow.project(&point).unwrap();
        let (u, v) = map.apply(uc, vc);
        assert!((u - ud).abs() < 1e-9 && (v - vd).abs() < 1e-9);
    }

    #[test]
    fn alignment_uses_intrinsics_only_when_both_are_known() {
        let colour = info(K, 640, 480);
        let depth = info([262.5, 0.0, 159.5, 0.0, 262.5, 119.5, 0.0, 0.0, 1.0], 320, 240);
        assert_eq!(colour_to_depth(Some(&colour), Some(&depth), (640, 480), (320, 240)).method, "intrinsics");
        assert_eq!(colour_to_depth(None, Some(&depth), (640, 480), (320, 240)).method, "proportional");
        let uncalibrated = info([0.0; 9], 640, 480);
        assert_eq!(colour_to_depth(Some(&uncalibrated), Some(&depth), (640, 480), (320, 240)).method, "proportional");
        // A camera_info for 640x480 describing a 320x240 stream is scaled to it.
        let aligned = colour_to_depth(Some(&colour), Some(&colour), (320, 240), (640, 480));
        assert_eq!(aligned.method, "intrinsics");
        assert_eq!(aligned.map.nearest(160, 120, 640, 480), Some((321, 241)));
    }

    /// A 32FC1 frame: 1.0 m on the left half, 2.0 m on the right, NaN in the top row.
    fn depth_frame(width: u32, height: u32) -> RawImage {
        let data = (0..height)
            .flat_map(|y| (0..width).map(move |x| if y == 0 { f32::NAN } else if x < width / 2 { 1.0f32 } else { 2.0 }))
            .flat_map(f32::to_le_bytes)
            .collect();
        RawImage { width, height, encoding: "32FC1".into(), is_bigendian: false, step: width * 4, data }
    }

    fn robot(depth: RawImage, colour: Option<(u32, u32)>) -> Arc<FakeRobot> {
        let robot = Arc::new(FakeRobot::default());
        let mut samples = robot.samples.lock();
        samples.depth = Some(stamped(depth, "camera_optical_frame", Duration::from_millis(10)));
        if let Some((width, height)) = colour {
            let frame = RawImage { width, height, encoding: "rgb8".into(), is_bigendian: false, step: width * 3, data: vec![0; (width * height * 3) as usize] };
            samples.camera = Some(stamped(CameraFrame::Raw(frame), "camera_optical_frame", Duration::ZERO));
        }
        drop(samples);
        robot
    }

    #[tokio::test]
    async fn depth_is_aligned_to_the_colour_frame_and_sized_as_asked() {
        // Depth at half the colour resolution, no camera_info: proportional.
        let robot = robot(depth_frame(16, 12), Some((32, 24)));
        let out = Depth.call(input_map(json!({ "max_width": 8 })), context(robot.clone())).await.unwrap().output;
        assert_eq!((out["camera_width"].as_u64(), out["depth_width"].as_u64(), out["alignment"].as_str()), (Some(32), Some(16), Some("proportional")));
        assert_eq!((out["width"].as_u64(), out["height"].as_u64()), (Some(8), Some(6)));
        assert_eq!((out["min_m"].as_f64(), out["max_m"].as_f64(), out["centre_m"].as_f64(), out["median_m"].as_f64()), (Some(1.0), Some(2.0), Some(2.0), Some(1.5)));
        assert!((out["valid_fraction"].as_f64().unwrap() - 22.0 / 24.0).abs() < 1e-3, "{}", out["valid_fraction"]);
        assert_eq!((out["scale"].as_str(), out["invalid_value"].as_u64(), out["encoding"].as_str()), (Some("1 unit = 1 mm"), Some(0), Some("32FC1")));
        let png = base64::engine::general_purpose::STANDARD.decode(out["png16_mm_b64"].as_str().unwrap()).unwrap();
        let picture = image::load_from_memory(&png).unwrap().into_luma16();
        assert_eq!(picture.dimensions(), (8, 6));
        // Output row 0 samples aligned row 2, below the invalid top rows.
        assert_eq!((picture.get_pixel(0, 0).0[0], picture.get_pixel(1, 3).0[0], picture.get_pixel(6, 3).0[0]), (1000, 1000, 2000));
        let full = Depth.call(input_map(json!({ "format": "ignored" })), context(robot.clone())).await.unwrap().output;
        let png = base64::engine::general_purpose::STANDARD.decode(full["png16_mm_b64"].as_str().unwrap()).unwrap();
        let picture = image::load_from_memory(&png).unwrap().into_luma16();
        assert_eq!((picture.dimensions(), picture.get_pixel(5, 1).0[0], picture.get_pixel(5, 2).0[0]), ((32, 24), 0, 1000), "invalid is 0");

        let out = Depth.call(input_map(json!({ "include_image": false })), context(robot)).await.unwrap().output;
        assert!(out.get("png16_mm_b64").is_none());
        assert_eq!(out["centre_m"].as_f64(), Some(2.0));
    }

    #[tokio::test]
    async fn without_a_colour_camera_the_depth_grid_is_used_and_errors_name_the_topic() {
        let out = Depth.call(Map::new(), context(robot(depth_frame(4, 4), None))).await.unwrap().output;
        assert_eq!((out["width"].as_u64(), out["alignment"].as_str()), (Some(4), Some("none (no colour camera frame)")));
        let mut bad = depth_frame(4, 4);
        bad.encoding = "rgb8".into();
        let err = Depth.call(Map::new(), context(robot(bad, None))).await.unwrap_err();
        assert!(err.retryable && err.message.starts_with("camera/depth/image_raw: unsupported encoding \"rgb8\""), "{}", err.message);
        let stale = robot(depth_frame(4, 4), None);
        stale.samples.lock().depth.as_mut().unwrap().received -= Duration::from_secs(2);
        let err = Depth.call(Map::new(), context(stale)).await.unwrap_err();
        assert!(err.message.contains("camera/depth/image_raw is 20") && err.message.contains("maximum 1000 ms"), "{}", err.message);
    }
}
