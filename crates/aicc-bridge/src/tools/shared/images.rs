//! Camera frames for the image tools: decoding (only when asked), reading
//! a frame's size without decoding it, and running the CPU-heavy work off
//! the async workers.
use image::RgbImage;

use crate::perception::{decode_compressed_rgb, decode_rgb};
use crate::protocol::AiccError;
use crate::robot::CameraFrame;

/// Decodes a camera frame to RGB; errors name the topic and are retryable
/// (the next frame may be fine).
pub(crate) fn decode_frame(frame: &CameraFrame, topic: &str) -> Result<RgbImage, AiccError> {
    match frame {
        CameraFrame::Raw(raw) => decode_rgb(raw),
        CameraFrame::Compressed(compressed) => decode_compressed_rgb(compressed),
    }
    .map_err(|error| AiccError::execution_failed(true, format!("{topic}: {error}")))
}

/// The frame's size without decoding its pixels (a compressed frame's
/// header is read); None when the header cannot be read.
pub(crate) fn frame_size(frame: &CameraFrame) -> Option<(u32, u32)> {
    match frame {
        CameraFrame::Raw(raw) => Some((raw.width, raw.height)),
        CameraFrame::Compressed(compressed) => {
            image::ImageReader::new(std::io::Cursor::new(&compressed.data))
                .with_guessed_format()
                .ok()?
                .into_dimensions()
                .ok()
        }
    }
}

/// Runs CPU-heavy work (decoding, encoding) off the async workers.
pub(crate) async fn run_blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AiccError> + Send + 'static,
) -> Result<T, AiccError> {
    tokio::task::spawn_blocking(work).await.map_err(|error| {
        AiccError::execution_failed(false, format!("image processing failed: {error}"))
    })?
}
