//! `vision`: the camera's current frame as PNG or JPEG, sized to fit an
//! agent's context. The frame is decoded and encoded only when asked (the
//! adapter keeps it as received), on a blocking thread.
use std::time::Instant;

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::optional_u32;
use super::shared::fresh::{fresh_sample, max_age, sensor_missing};
use super::shared::images::{decode_frame, run_blocking};
use super::{Tool, ToolContext, ToolFuture};
use crate::perception::encode::DEFAULT_JPEG_QUALITY;
use crate::perception::{encode, to_base64, EncodeOptions, OutputFormat};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::robot::{Age, Sensor};

/// Default byte budget of the encoded picture: a 640x480 JPEG at quality
/// 80 is ~20-60 kB, so this rarely bites; the agent's context is the real budget.
pub(crate) const DEFAULT_MAX_BYTES: u32 = 200_000;
/// Largest byte budget: base64 grows data by 4/3, so this keeps a reply
/// line under the 1 MiB that AICC peers accept.
pub const MAX_MAX_BYTES: u32 = 700_000;
/// Smallest byte budget worth trying (a 32x24 JPEG).
pub(crate) const MIN_MAX_BYTES: u32 = 1_000;

pub(crate) struct Vision;

/// The encode options an input asks for.
pub(crate) fn parse_options(input: &Map<String, Value>) -> Result<EncodeOptions, AiccError> {
    let format = match input.get("format") {
        None => OutputFormat::Jpeg,
        Some(Value::String(name)) if name == "jpeg" => OutputFormat::Jpeg,
        Some(Value::String(name)) if name == "png" => OutputFormat::Png,
        Some(other) => {
            return Err(AiccError::invalid_input(format!(
                "input.format must be \"png\" or \"jpeg\", got {other}"
            )))
        }
    };
    let quality =
        optional_u32(input, "quality", 1, 100)?.unwrap_or(u32::from(DEFAULT_JPEG_QUALITY));
    Ok(EncodeOptions {
        format,
        jpeg_quality: quality as u8,
        max_width: optional_u32(input, "max_width", 1, 65_535)?,
        max_height: optional_u32(input, "max_height", 1, 65_535)?,
        max_bytes: Some(
            optional_u32(input, "max_bytes", MIN_MAX_BYTES, MAX_MAX_BYTES)?
                .unwrap_or(DEFAULT_MAX_BYTES) as usize,
        ),
    })
}

impl Tool for Vision {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "vision",
            class: ToolClass::Sensor,
            description: "The camera's current RGB frame, base64-encoded. JPEG by default: it is what fits an agent's context (a 320x240 frame is typically 5-20 kB); PNG is lossless but several times larger. The picture is shrunk (never enlarged) to fit max_width/max_height, then to fit max_bytes (JPEG quality is lowered first, down to 30, then the size); `reduced` says what was given up, and source_width/source_height give the camera's native resolution, which `inspect` pixel coordinates use.",
            capability: "can_observe_world",
            strict_input: false,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "format": { "type": "string", "enum": ["jpeg", "png"], "description": "default jpeg" },
                    "quality": { "type": "integer", "minimum": 1, "maximum": 100, "description": "JPEG quality, default 80 (ignored for png)" },
                    "max_width": { "type": "integer", "minimum": 1, "maximum": 65535, "description": "pixels; the aspect ratio is kept" },
                    "max_height": { "type": "integer", "minimum": 1, "maximum": 65535, "description": "pixels; the aspect ratio is kept" },
                    "max_bytes": { "type": "integer", "minimum": MIN_MAX_BYTES, "maximum": MAX_MAX_BYTES, "description": "largest encoded size before base64, default 200000" }
                }
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "format": { "type": "string", "enum": ["jpeg", "png"] },
                    "mime_type": { "type": "string" },
                    "png_b64": { "type": "string", "description": "the picture when format is png (as AICC's vision example), standard base64" },
                    "jpeg_b64": { "type": "string", "description": "the picture when format is jpeg, standard base64" },
                    "width": { "type": "integer" },
                    "height": { "type": "integer" },
                    "source_width": { "type": "integer", "description": "the camera's native width" },
                    "source_height": { "type": "integer" },
                    "bytes": { "type": "integer", "description": "encoded size before base64" },
                    "jpeg_quality": { "type": ["integer", "null"] },
                    "reduced": { "type": "array", "items": { "type": "string", "enum": ["max_size", "budget_quality", "budget_size"] } },
                    "frame_id": { "type": "string" },
                    "stamp_s": { "type": "number" },
                    "age_ms": { "type": "number", "description": "age of the frame when the reply was made" }
                },
                "required": ["format", "mime_type", "width", "height", "source_width", "source_height", "bytes", "jpeg_quality", "reduced", "frame_id", "stamp_s", "age_ms"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        sensor_missing(ctx, "camera frame", Sensor::Camera, now)
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            let options = parse_options(&input)?;
            let topic = ctx.sensors.topic(Sensor::Camera);
            let (frame, _) = fresh_sample(
                ctx.sensors.camera(),
                "camera frame",
                &topic,
                max_age(&ctx.config.sensors.camera),
                ctx.sensors.now(),
            )?;
            let (frame_id, stamp_s, received) = (frame.frame_id, frame.stamp_s, frame.received);
            let image_topic = topic.clone();
            let (encoded, b64) = run_blocking(move || {
                let rgb = decode_frame(&frame.value, &image_topic)?;
                let encoded = encode(&rgb, &options).map_err(|error| {
                    AiccError::execution_failed(true, format!("{image_topic}: {error}"))
                })?;
                let b64 = to_base64(&encoded.bytes);
                Ok((encoded, b64))
            })
            .await?;
            let mut output = json!({
                "format": encoded.format.name(),
                "mime_type": encoded.format.mime_type(),
                "width": encoded.width,
                "height": encoded.height,
                "source_width": encoded.source_width,
                "source_height": encoded.source_height,
                "bytes": encoded.bytes.len(),
                "jpeg_quality": encoded.jpeg_quality,
                "reduced": encoded.reductions.reasons(),
                "frame_id": frame_id,
                "stamp_s": stamp_s,
            });
            let fields = output.as_object_mut().expect("built as an object");
            // Its age when the reply is made: since capture, when the stamp can be trusted.
            fields.extend(Age::of(stamp_s, received, ctx.sensors.now()).fields());
            // The picture once, under a name that says its format: an
            // agent's context is the budget, so it is never sent twice.
            let field = if encoded.format == OutputFormat::Png { "png_b64" } else { "jpeg_b64" };
            fields.insert(field.into(), json!(b64));
            Ok(ToolSuccess { output, source: topic })
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
    use crate::protocol::ErrorCode;
    use crate::robot::CameraFrame;
    use crate::tools::input::input_map;
    use crate::tools::testing::*;
    use image::RgbImage;

    /// A `width` x `height` rgb8 frame: red on the left half, blue on the right.
    pub(crate) fn red_blue_frame(width: u32, height: u32) -> RawImage {
        let data = (0..height)
            .flat_map(|_| {
                (0..width)
                    .flat_map(move |x| if x < width / 2 { [200u8, 20, 20] } else { [20, 20, 200] })
            })
            .collect();
        RawImage {
            width,
            height,
            encoding: "rgb8".into(),
            is_bigendian: false,
            step: width * 3,
            data,
        }
    }

    fn robot_with(frame: RawImage, age: Duration) -> Arc<FakeRobot> {
        let robot = Arc::new(FakeRobot::default());
        robot.samples.lock().camera =
            Some(stamped(CameraFrame::Raw(frame), "camera_optical_frame", age));
        robot
    }

    fn decode_b64(text: &Value) -> RgbImage {
        let bytes =
            base64::engine::general_purpose::STANDARD.decode(text.as_str().unwrap()).unwrap();
        image::load_from_memory(&bytes).unwrap().into_rgb8()
    }

    #[test]
    fn options_default_to_jpeg_within_the_budget_and_name_bad_fields() {
        let options = parse_options(&Map::new()).unwrap();
        assert_eq!(
            options,
            EncodeOptions {
                format: OutputFormat::Jpeg,
                jpeg_quality: 80,
                max_width: None,
                max_height: None,
                max_bytes: Some(200_000)
            }
        );
        let options = parse_options(&input_map(
            json!({ "format": "png", "max_width": 100, "max_bytes": 5000 }),
        ))
        .unwrap();
        assert_eq!(
            (options.format, options.max_width, options.max_bytes),
            (OutputFormat::Png, Some(100), Some(5000))
        );
        assert!(parse_options(&input_map(json!({ "format": "gif" })))
            .unwrap_err()
            .message
            .starts_with("input.format"));
        assert!(parse_options(&input_map(json!({ "quality": 0 })))
            .unwrap_err()
            .message
            .starts_with("input.quality = 0 is outside [1, 100]"));
        assert!(parse_options(&input_map(json!({ "max_width": 10.5 })))
            .unwrap_err()
            .message
            .contains("input.max_width must be an integer"));
        assert!(parse_options(&input_map(json!({ "max_bytes": 800_000 })))
            .unwrap_err()
            .message
            .starts_with("input.max_bytes"));
    }

    #[test]
    fn the_schema_refuses_what_the_parser_refuses() {
        let catalog = crate::protocol::catalog::Catalog::new(vec![Vision.descriptor()]).unwrap();
        for (input, field) in [
            (json!({ "quality": 0 }), "input.quality"),
            (json!({ "format": "gif" }), "input.format"),
            (json!({ "max_bytes": 10 }), "input.max_bytes"),
        ] {
            let err = catalog.validate("vision", input_map(input)).unwrap_err();
            assert!(err.message.starts_with(field), "{}", err.message);
        }
        assert!(catalog
            .validate(
                "vision",
                input_map(json!({ "format": "png", "quality": 50, "max_width": 64 }))
            )
            .is_ok());
    }

    #[tokio::test]
    async fn png_round_trips_with_its_metadata() {
        let robot = robot_with(red_blue_frame(64, 48), Duration::from_millis(30));
        let result =
            Vision.call(input_map(json!({ "format": "png" })), context(robot)).await.unwrap();
        assert_eq!(result.source, "camera/image_raw");
        let out = result.output;
        assert_eq!(
            (
                out["format"].as_str(),
                out["mime_type"].as_str(),
                out["width"].as_u64(),
                out["height"].as_u64()
            ),
            (Some("png"), Some("image/png"), Some(64), Some(48))
        );
        assert!(out.get("jpeg_b64").is_none(), "the picture is sent once");
        assert_eq!(
            (out["frame_id"].as_str(), out["stamp_s"].as_f64(), out["jpeg_quality"].is_null()),
            (Some("camera_optical_frame"), Some(100.0), true)
        );
        assert!(out["age_ms"].as_f64().unwrap() >= 30.0);
        let picture = decode_b64(&out["png_b64"]);
        assert_eq!(
            (picture.get_pixel(0, 0).0, picture.get_pixel(63, 47).0),
            ([200, 20, 20], [20, 20, 200])
        );
        assert_eq!(
            out["bytes"].as_u64().unwrap() as usize,
            base64::engine::general_purpose::STANDARD
                .decode(out["png_b64"].as_str().unwrap())
                .unwrap()
                .len()
        );
    }

    #[tokio::test]
    async fn jpeg_is_the_default_and_shrinks_as_asked() {
        let robot = robot_with(red_blue_frame(640, 480), Duration::ZERO);
        let out = Vision
            .call(input_map(json!({ "max_width": 160 })), context(robot))
            .await
            .unwrap()
            .output;
        assert_eq!(
            (out["format"].as_str(), out["width"].as_u64(), out["height"].as_u64()),
            (Some("jpeg"), Some(160), Some(120))
        );
        assert_eq!(
            (out["source_width"].as_u64(), out["source_height"].as_u64()),
            (Some(640), Some(480))
        );
        assert_eq!(out["reduced"], json!(["max_size"]));
        assert!(out.get("png_b64").is_none());
        assert_eq!(decode_b64(&out["jpeg_b64"]).dimensions(), (160, 120));
    }

    #[tokio::test]
    async fn stale_missing_and_broken_frames_are_retryable_errors_naming_the_topic() {
        let stale = robot_with(red_blue_frame(8, 8), Duration::from_secs(3));
        let err = Vision.call(Map::new(), context(stale)).await.unwrap_err();
        assert_eq!((err.code, err.retryable), (ErrorCode::ExecutionFailed, true));
        assert!(
            err.message.contains("camera/image_raw is 3")
                && err.message.contains("(maximum 1000 ms)"),
            "{}",
            err.message
        );

        let err =
            Vision.call(Map::new(), context(Arc::new(FakeRobot::default()))).await.unwrap_err();
        assert_eq!(err.message, "no camera frame received yet on camera/image_raw");

        let mut truncated = red_blue_frame(8, 8);
        truncated.data.pop();
        let err = Vision
            .call(Map::new(), context(robot_with(truncated, Duration::ZERO)))
            .await
            .unwrap_err();
        assert!(err.retryable);
        assert!(err.message.starts_with("camera/image_raw: truncated data: expected 192 bytes for 8x8 with step 24, got 191"), "{}", err.message);
    }

    #[test]
    fn availability_follows_the_topic() {
        let robot = robot_with(red_blue_frame(8, 8), Duration::from_secs(3));
        let now = Instant::now();
        assert_eq!(
            Vision.unavailable_reason(&context(robot.clone()), now).unwrap(),
            "no camera frame on camera/image_raw for 3.0 s"
        );
        robot.samples.lock().camera.as_mut().unwrap().received = now;
        assert_eq!(Vision.unavailable_reason(&context(robot.clone()), now), None);
        let unconfigured = context_with(robot, |c| c.sensors.camera.topic.clear());
        assert_eq!(
            Vision.unavailable_reason(&unconfigured, now).unwrap(),
            "no camera frame topic is configured"
        );
    }
}
