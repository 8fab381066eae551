//! Plain mirrors of the ROS image messages, filled by the ROS adapter, and
//! the layout checks every raw decoder shares.

/// An uncompressed frame as `sensor_msgs/Image` carries it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawImage {
    pub width: u32,
    pub height: u32,
    /// A `sensor_msgs/image_encodings` name such as `rgb8` or `16UC1`.
    pub encoding: String,
    /// Byte order of multi-byte samples; ignored for 8-bit encodings.
    pub is_bigendian: bool,
    /// Bytes from the start of one row to the next; drivers may pad rows.
    pub step: u32,
    pub data: Vec<u8>,
}

/// A compressed frame as `sensor_msgs/CompressedImage` carries it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CompressedFrame {
    /// Free text such as `jpeg`, `png` or `rgb8; jpeg compressed bgr8`.
    pub format: String,
    pub data: Vec<u8>,
}

/// Why a frame could not be decoded. The text names no topic so that the
/// caller can prefix the one it read from.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The encoding is not one this decoder understands.
    #[error("unsupported encoding {encoding:?}; supported: {}", .supported.join(", "))]
    UnknownEncoding { encoding: String, supported: &'static [&'static str] },
    /// Width or height is zero.
    #[error("empty image: {width}x{height}")]
    ZeroSize { width: u32, height: u32 },
    /// A row, as `step` claims it, cannot hold `width` pixels.
    #[error("step {step} is smaller than width {width} x {bytes_per_pixel} bytes per pixel = {min_step} for {encoding}")]
    StepTooSmall { step: u32, width: u32, bytes_per_pixel: u32, min_step: u64, encoding: String },
    /// Fewer bytes than `step x height`.
    #[error("truncated data: expected {expected_bytes} bytes for {width}x{height} with step {step}, got {got_bytes}")]
    Truncated { expected_bytes: u64, width: u32, height: u32, step: u32, got_bytes: usize },
    /// More bytes than `step x height`: the header does not describe the data
    /// (often a wrong encoding or size), so guessing would show garbage.
    #[error("excess data: expected {expected_bytes} bytes for {width}x{height} with step {step}, got {got_bytes}")]
    ExcessData { expected_bytes: u64, width: u32, height: u32, step: u32, got_bytes: usize },
    /// 4:2:2 packings share chroma between pixel pairs, so rows need an even width.
    #[error("{encoding} needs an even width (pixel pairs share chroma), got width {width}")]
    OddWidth { width: u32, encoding: String },
    /// The compressed bytes are neither PNG nor JPEG (or are a depth format).
    #[error("unsupported compressed format {format:?}: {reason}")]
    UnsupportedCompressed { format: String, reason: String },
    /// The PNG/JPEG decoder rejected the bytes.
    #[error("cannot decode {kind} data (format {format:?}): {source}")]
    Compressed { format: String, kind: &'static str, source: image::ImageError },
}

/// Checks that `image` holds `height` rows of at least `width x
/// bytes_per_pixel` bytes each, `step` bytes apart, and nothing more.
pub(crate) fn check_layout(image: &RawImage, bytes_per_pixel: u32) -> Result<(), DecodeError> {
    if image.width == 0 || image.height == 0 {
        return Err(DecodeError::ZeroSize { width: image.width, height: image.height });
    }
    let min_step = u64::from(image.width) * u64::from(bytes_per_pixel);
    if u64::from(image.step) < min_step {
        return Err(DecodeError::StepTooSmall {
            step: image.step,
            width: image.width,
            bytes_per_pixel,
            min_step,
            encoding: image.encoding.clone(),
        });
    }
    let expected_bytes = u64::from(image.step) * u64::from(image.height);
    let got_bytes = image.data.len();
    let (width, height, step) = (image.width, image.height, image.step);
    match (got_bytes as u64).cmp(&expected_bytes) {
        std::cmp::Ordering::Less => {
            Err(DecodeError::Truncated { expected_bytes, width, height, step, got_bytes })
        }
        std::cmp::Ordering::Greater => {
            Err(DecodeError::ExcessData { expected_bytes, width, height, step, got_bytes })
        }
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// The pixel bytes of each row, without the padding. Call only after
/// [`check_layout`] succeeded with the same `bytes_per_pixel`.
pub(crate) fn pixel_rows(image: &RawImage, bytes_per_pixel: u32) -> impl Iterator<Item = &[u8]> {
    let row_bytes = image.width as usize * bytes_per_pixel as usize;
    image.data.chunks_exact(image.step as usize).map(move |row| &row[..row_bytes])
}

/// Reads a 16-bit sample in the frame's byte order.
pub(crate) fn read_u16(bytes: [u8; 2], is_bigendian: bool) -> u16 {
    if is_bigendian {
        u16::from_be_bytes(bytes)
    } else {
        u16::from_le_bytes(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(width: u32, height: u32, step: u32, len: usize) -> RawImage {
        RawImage {
            width,
            height,
            encoding: "rgb8".into(),
            is_bigendian: false,
            step,
            data: vec![0; len],
        }
    }

    #[test]
    fn layout_errors_carry_the_numbers() {
        let err = check_layout(&frame(4, 2, 12, 23), 3).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::Truncated {
                    expected_bytes: 24,
                    got_bytes: 23,
                    step: 12,
                    width: 4,
                    height: 2
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "truncated data: expected 24 bytes for 4x2 with step 12, got 23"
        );
        let err = check_layout(&frame(4, 2, 11, 22), 3).unwrap_err();
        assert!(matches!(err, DecodeError::StepTooSmall { step: 11, min_step: 12, .. }), "{err:?}");
        let err = check_layout(&frame(4, 2, 12, 25), 3).unwrap_err();
        assert!(
            matches!(err, DecodeError::ExcessData { expected_bytes: 24, got_bytes: 25, .. }),
            "{err:?}"
        );
        assert!(matches!(
            check_layout(&frame(0, 2, 12, 0), 3),
            Err(DecodeError::ZeroSize { width: 0, height: 2 })
        ));
        check_layout(&frame(4, 2, 16, 32), 3).expect("padded rows are fine");
    }

    #[test]
    fn rows_skip_padding() {
        let mut image = frame(2, 2, 4, 8);
        image.data = vec![1, 2, 9, 9, 3, 4, 9, 9];
        let rows: Vec<&[u8]> = pixel_rows(&image, 1).collect();
        assert_eq!(rows, vec![&[1u8, 2][..], &[3, 4][..]]);
    }
}
