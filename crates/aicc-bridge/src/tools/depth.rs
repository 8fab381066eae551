//! `depth`: the depth frame aligned to `vision`'s pixel grid, as a 16-bit
//! PNG in millimetres plus summary distances. Alignment maps each colour
//! pixel's ray into the depth image with the two cameras' intrinsics (the
//! cameras are taken to share their optical centre, as in a registered
//! RGB-D camera or the simulator), or by size alone when either
//! camera_info is missing.
use std::time::Instant;

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::{optional_bool, optional_u32};
use super::shared::alignment::{align_depth, AlignmentInputs};
use super::shared::fresh::{fresh_sample, max_age, sensor_missing};
use super::shared::images::run_blocking;
use super::{Tool, ToolContext, ToolFuture};
use crate::perception::encode::fit_within;
use crate::perception::{decode_depth, to_base64, to_png_mm};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::robot::{Age, Sensor};

pub struct Depth;

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
        sensor_missing(ctx, "depth frame", Sensor::Depth, now)
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            let request = parse(&input)?;
            let now = ctx.sensors.now();
            let topic = ctx.sensors.topic(Sensor::Depth);
            let (depth, _) = fresh_sample(
                ctx.sensors.depth(),
                "depth frame",
                &topic,
                max_age(&ctx.config.sensors.depth),
                now,
            )?;
            let inputs = AlignmentInputs::gather(&ctx, now);
            let (frame_id, stamp_s, received, encoding) =
                (depth.frame_id, depth.stamp_s, depth.received, depth.value.encoding.clone());
            let depth_topic = topic.clone();
            let (mut output, png) = run_blocking(move || {
                let decoded = decode_depth(&depth.value).map_err(|error| {
                    AiccError::execution_failed(true, format!("{depth_topic}: {error}"))
                })?;
                let depth_size = (decoded.width, decoded.height);
                let (camera_size, alignment) = inputs.alignment(depth_size);
                let aligned = align_depth(&decoded, &alignment.map, camera_size.0, camera_size.1);
                let stats = aligned.stats();
                let (width, height) =
                    fit_within(camera_size.0, camera_size.1, request.max_width, request.max_height);
                let png = if request.include_image {
                    let sized = if (width, height) == camera_size {
                        aligned
                    } else {
                        aligned.resize_nearest(width, height)
                    };
                    Some(to_png_mm(&sized).map_err(|error| {
                        AiccError::execution_failed(true, format!("{depth_topic}: {error}"))
                    })?)
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
                fields.insert(
                    "saturation".into(),
                    json!(
                        "depths of 65.535 m or more read 65535; valid depths under 0.5 mm read 1"
                    ),
                );
            }
            fields.insert("encoding".into(), json!(encoding));
            fields.insert("frame_id".into(), json!(frame_id));
            fields.insert("stamp_s".into(), json!(stamp_s));
            fields.extend(Age::of(stamp_s, received, ctx.sensors.now()).fields());
            Ok(ToolSuccess {
                output,
                source: format!("{topic} {}", ctx.sensors.topic(Sensor::DepthInfo)),
            })
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
    use crate::perception::RawImage;
    use crate::robot::CameraFrame;
    use crate::tools::input::input_map;
    use crate::tools::testing::*;

    /// A 32FC1 frame: 1.0 m on the left half, 2.0 m on the right, NaN in the top row.
    fn depth_frame(width: u32, height: u32) -> RawImage {
        let data = (0..height)
            .flat_map(|y| {
                (0..width).map(move |x| {
                    if y == 0 {
                        f32::NAN
                    } else if x < width / 2 {
                        1.0f32
                    } else {
                        2.0
                    }
                })
            })
            .flat_map(f32::to_le_bytes)
            .collect();
        RawImage {
            width,
            height,
            encoding: "32FC1".into(),
            is_bigendian: false,
            step: width * 4,
            data,
        }
    }

    fn robot(depth: RawImage, colour: Option<(u32, u32)>) -> Arc<FakeRobot> {
        let robot = Arc::new(FakeRobot::default());
        let mut samples = robot.samples.lock();
        samples.depth = Some(stamped(depth, "camera_optical_frame", Duration::from_millis(10)));
        if let Some((width, height)) = colour {
            let frame = RawImage {
                width,
                height,
                encoding: "rgb8".into(),
                is_bigendian: false,
                step: width * 3,
                data: vec![0; (width * height * 3) as usize],
            };
            samples.camera =
                Some(stamped(CameraFrame::Raw(frame), "camera_optical_frame", Duration::ZERO));
        }
        drop(samples);
        robot
    }

    #[tokio::test]
    async fn depth_is_aligned_to_the_colour_frame_and_sized_as_asked() {
        // Depth at half the colour resolution, no camera_info: proportional.
        let robot = robot(depth_frame(16, 12), Some((32, 24)));
        let out = Depth
            .call(input_map(json!({ "max_width": 8 })), context(robot.clone()))
            .await
            .unwrap()
            .output;
        assert_eq!(
            (out["camera_width"].as_u64(), out["depth_width"].as_u64(), out["alignment"].as_str()),
            (Some(32), Some(16), Some("proportional"))
        );
        assert_eq!((out["width"].as_u64(), out["height"].as_u64()), (Some(8), Some(6)));
        assert_eq!(
            (
                out["min_m"].as_f64(),
                out["max_m"].as_f64(),
                out["centre_m"].as_f64(),
                out["median_m"].as_f64()
            ),
            (Some(1.0), Some(2.0), Some(2.0), Some(1.5))
        );
        assert!(
            (out["valid_fraction"].as_f64().unwrap() - 22.0 / 24.0).abs() < 1e-3,
            "{}",
            out["valid_fraction"]
        );
        assert_eq!(
            (out["scale"].as_str(), out["invalid_value"].as_u64(), out["encoding"].as_str()),
            (Some("1 unit = 1 mm"), Some(0), Some("32FC1"))
        );
        let png = base64::engine::general_purpose::STANDARD
            .decode(out["png16_mm_b64"].as_str().unwrap())
            .unwrap();
        let picture = image::load_from_memory(&png).unwrap().into_luma16();
        assert_eq!(picture.dimensions(), (8, 6));
        // Output row 0 samples aligned row 2, below the invalid top rows.
        assert_eq!(
            (
                picture.get_pixel(0, 0).0[0],
                picture.get_pixel(1, 3).0[0],
                picture.get_pixel(6, 3).0[0]
            ),
            (1000, 1000, 2000)
        );
        let full = Depth
            .call(input_map(json!({ "format": "ignored" })), context(robot.clone()))
            .await
            .unwrap()
            .output;
        let png = base64::engine::general_purpose::STANDARD
            .decode(full["png16_mm_b64"].as_str().unwrap())
            .unwrap();
        let picture = image::load_from_memory(&png).unwrap().into_luma16();
        assert_eq!(
            (picture.dimensions(), picture.get_pixel(5, 1).0[0], picture.get_pixel(5, 2).0[0]),
            ((32, 24), 0, 1000),
            "invalid is 0"
        );

        let out = Depth
            .call(input_map(json!({ "include_image": false })), context(robot))
            .await
            .unwrap()
            .output;
        assert!(out.get("png16_mm_b64").is_none());
        assert_eq!(out["centre_m"].as_f64(), Some(2.0));
    }

    #[tokio::test]
    async fn without_a_colour_camera_the_depth_grid_is_used_and_errors_name_the_topic() {
        let out =
            Depth.call(Map::new(), context(robot(depth_frame(4, 4), None))).await.unwrap().output;
        assert_eq!(
            (out["width"].as_u64(), out["alignment"].as_str()),
            (Some(4), Some("none (no colour camera frame)"))
        );
        let mut bad = depth_frame(4, 4);
        bad.encoding = "rgb8".into();
        let err = Depth.call(Map::new(), context(robot(bad, None))).await.unwrap_err();
        assert!(
            err.retryable
                && err.message.starts_with("camera/depth/image_raw: unsupported encoding \"rgb8\""),
            "{}",
            err.message
        );
        let stale = robot(depth_frame(4, 4), None);
        stale.samples.lock().depth.as_mut().unwrap().received -= Duration::from_secs(2);
        let err = Depth.call(Map::new(), context(stale)).await.unwrap_err();
        assert!(
            err.message.contains("camera/depth/image_raw is 20")
                && err.message.contains("maximum 400 ms"),
            "{}",
            err.message
        );
    }
}
