//! Depth frames in metres: decoding, lookup, alignment to the colour
//! frame, a compact PNG form and summary statistics.

use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use image::{ImageBuffer, Luma};

use super::encode::EncodeError;
use super::raw::{check_layout, pixel_rows, read_u16, DecodeError, RawImage};

/// Encoding names [`decode_depth`] accepts: `32FC1` in metres, `16UC1`
/// and `mono16` in millimetres (the REP-118 conventions).
pub const SUPPORTED_DEPTH_ENCODINGS: &[&str] = &["32FC1", "16UC1", "mono16"];

/// A depth frame, row-major, in metres; invalid pixels are NaN.
#[derive(Debug, Clone, PartialEq)]
pub struct DepthImage {
    pub width: u32,
    pub height: u32,
    pub metres: Vec<f32>,
}

/// Summary of the valid pixels; the distances are `None` when no pixel is valid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DepthStats {
    /// Valid pixels over all pixels, 0-1.
    pub valid_fraction: f64,
    pub min_m: Option<f32>,
    pub max_m: Option<f32>,
    /// For an even count, the mean of the two middle values.
    pub median_m: Option<f32>,
    /// Depth at pixel (width / 2, height / 2), if valid.
    pub centre_m: Option<f32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DepthEncoding {
    Float32Metres,
    U16Millimetres,
}

impl DepthEncoding {
    fn parse(name: &str) -> Option<Self> {
        match name.trim() {
            n if n.eq_ignore_ascii_case("32FC1") => Some(Self::Float32Metres),
            n if n.eq_ignore_ascii_case("16UC1") || n.eq_ignore_ascii_case("mono16") => {
                Some(Self::U16Millimetres)
            }
            _ => None,
        }
    }

    fn bytes_per_pixel(self) -> u32 {
        match self {
            Self::Float32Metres => 4,
            Self::U16Millimetres => 2,
        }
    }

    fn to_metres(self, sample: &[u8], is_bigendian: bool) -> f32 {
        match self {
            Self::Float32Metres => {
                let bytes = [sample[0], sample[1], sample[2], sample[3]];
                let metres = if is_bigendian {
                    f32::from_be_bytes(bytes)
                } else {
                    f32::from_le_bytes(bytes)
                };
                // 0, negative and infinite are how drivers say "no return".
                if metres.is_finite() && metres > 0.0 {
                    metres
                } else {
                    f32::NAN
                }
            }
            Self::U16Millimetres => match read_u16([sample[0], sample[1]], is_bigendian) {
                0 => f32::NAN,
                millimetres => (f64::from(millimetres) / 1000.0) as f32,
            },
        }
    }
}

/// Decodes a `32FC1` (metres) or `16UC1` / `mono16` (millimetres) frame,
/// honouring `step` and `is_bigendian`. NaN, infinite and non-positive
/// metres, and 0 mm, become NaN.
pub fn decode_depth(image: &RawImage) -> Result<DepthImage, DecodeError> {
    let encoding =
        DepthEncoding::parse(&image.encoding).ok_or_else(|| DecodeError::UnknownEncoding {
            encoding: image.encoding.clone(),
            supported: SUPPORTED_DEPTH_ENCODINGS,
        })?;
    let bytes_per_pixel = encoding.bytes_per_pixel();
    check_layout(image, bytes_per_pixel)?;
    // Row by row into a buffer of the final size: one flat iterator over
    // all rows could not tell its length, and the buffer grew by copies.
    let mut metres = Vec::with_capacity(image.width as usize * image.height as usize);
    for row in pixel_rows(image, bytes_per_pixel) {
        metres.extend(
            row.chunks_exact(bytes_per_pixel as usize)
                .map(|sample| encoding.to_metres(sample, image.is_bigendian)),
        );
    }
    Ok(DepthImage { width: image.width, height: image.height, metres })
}

impl DepthImage {
    /// Depth at column `u`, row `v`, or `None` if outside or invalid.
    pub fn at(&self, u: u32, v: u32) -> Option<f32> {
        if u >= self.width || v >= self.height {
            return None;
        }
        let index = v as usize * self.width as usize + u as usize;
        self.metres.get(index).copied().filter(|m| !m.is_nan())
    }

    /// Resamples to `width` x `height` by nearest neighbour, to align depth
    /// with a colour frame of another size. Each output pixel copies one
    /// input pixel, so an edge never gets a depth between foreground and
    /// background, and invalid never blends into valid.
    pub fn resize_nearest(&self, width: u32, height: u32) -> DepthImage {
        let columns: Vec<u32> = (0..width).map(|x| nearest_source(x, width, self.width)).collect();
        let mut metres = Vec::with_capacity(width as usize * height as usize);
        for y in 0..height {
            let row = nearest_source(y, height, self.height);
            metres.extend(columns.iter().map(|&column| self.at(column, row).unwrap_or(f32::NAN)));
        }
        DepthImage { width, height, metres }
    }

    /// Statistics over the valid pixels; the median uses a selection, not a
    /// full sort, to stay linear on large frames.
    pub fn stats(&self) -> DepthStats {
        let mut valid = Vec::with_capacity(self.metres.len());
        valid.extend(self.metres.iter().copied().filter(|m| !m.is_nan()));
        let valid_fraction = if self.metres.is_empty() {
            0.0
        } else {
            valid.len() as f64 / self.metres.len() as f64
        };
        let min_m = valid.iter().copied().reduce(f32::min);
        let max_m = valid.iter().copied().reduce(f32::max);
        DepthStats {
            valid_fraction,
            min_m,
            max_m,
            median_m: median(&mut valid),
            centre_m: self.at(self.width / 2, self.height / 2),
        }
    }
}

/// The source index whose pixel centre is nearest output pixel `index`'s.
fn nearest_source(index: u32, output_len: u32, source_len: u32) -> u32 {
    let source = (2 * u64::from(index) + 1) * u64::from(source_len) / (2 * u64::from(output_len));
    (source as u32).min(source_len.saturating_sub(1))
}

/// Median of NaN-free `values` (reordered in place).
fn median(values: &mut [f32]) -> Option<f32> {
    if values.is_empty() {
        return None;
    }
    let is_odd = values.len() % 2 == 1;
    let (lower, upper, _) = values.select_nth_unstable_by(values.len() / 2, f32::total_cmp);
    let upper = *upper;
    if is_odd {
        return Some(upper);
    }
    let below =
        lower.iter().copied().reduce(f32::max).expect("an even, non-empty slice has a lower half");
    Some(((f64::from(below) + f64::from(upper)) / 2.0) as f32)
}

/// Encodes depth as a 16-bit grayscale PNG in millimetres (the `16UC1`
/// convention), about half the size of `32FC1` before compression:
/// - invalid pixels are 0;
/// - depths above [`PNG_MM_MAX_M`] (65.535 m) saturate to 65535;
/// - valid depths under 0.5 mm become 1, so they are not read as invalid.
pub fn to_png_mm(depth: &DepthImage) -> Result<Vec<u8>, EncodeError> {
    let expected = u64::from(depth.width) * u64::from(depth.height);
    if depth.width == 0 || depth.height == 0 {
        return Err(EncodeError::EmptyImage { width: depth.width, height: depth.height });
    }
    if depth.metres.len() as u64 != expected {
        return Err(EncodeError::DepthLengthMismatch {
            width: depth.width,
            height: depth.height,
            expected,
            actual: depth.metres.len(),
        });
    }
    let millimetres: Vec<u16> = depth.metres.iter().map(|&m| metres_to_png_mm(m)).collect();
    let image: ImageBuffer<Luma<u16>, Vec<u16>> =
        ImageBuffer::from_raw(depth.width, depth.height, millimetres)
            .expect("length checked above");
    let mut bytes = Vec::new();
    // Fast deflate for the same reason as colour frames (see `encode`).
    image
        .write_with_encoder(PngEncoder::new_with_quality(
            &mut bytes,
            CompressionType::Fast,
            FilterType::Adaptive,
        ))
        .map_err(|source| EncodeError::Codec { format: "png", source: source.into() })?;
    Ok(bytes)
}

fn metres_to_png_mm(metres: f32) -> u16 {
    if metres.is_nan() || metres <= 0.0 {
        return 0;
    }
    (f64::from(metres) * 1000.0).round().clamp(1.0, 65535.0) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(
        encoding: &str,
        width: u32,
        height: u32,
        step: u32,
        is_bigendian: bool,
        data: Vec<u8>,
    ) -> RawImage {
        RawImage { width, height, encoding: encoding.into(), is_bigendian, step, data }
    }

    fn assert_same(actual: &[f32], expected: &[f32]) {
        assert_eq!(actual.len(), expected.len());
        for (a, e) in actual.iter().zip(expected) {
            assert!(
                a.to_bits() == e.to_bits() || (a.is_nan() && e.is_nan()),
                "got {actual:?}, expected {expected:?}"
            );
        }
    }

    #[test]
    fn float_metres_with_invalid_values_and_padding() {
        let values = [1.5f32, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -2.0];
        for is_bigendian in [false, true] {
            // 3x2 with 4 bytes of padding per row.
            let data: Vec<u8> = values
                .chunks(3)
                .flat_map(|row| {
                    let mut bytes: Vec<u8> = row
                        .iter()
                        .flat_map(|v| if is_bigendian { v.to_be_bytes() } else { v.to_le_bytes() })
                        .collect();
                    bytes.extend([0xEE; 4]);
                    bytes
                })
                .collect();
            let depth = decode_depth(&raw("32FC1", 3, 2, 16, is_bigendian, data)).unwrap();
            assert_same(&depth.metres, &[1.5, f32::NAN, f32::NAN, f32::NAN, f32::NAN, f32::NAN]);
        }
    }

    #[test]
    fn millimetres_become_metres() {
        let mm: [u16; 4] = [0, 1, 1234, 65535];
        let little: Vec<u8> = mm.iter().flat_map(|v| v.to_le_bytes()).collect();
        let big: Vec<u8> = mm.iter().flat_map(|v| v.to_be_bytes()).collect();
        for image in [raw("16UC1", 2, 2, 4, false, little), raw("mono16", 2, 2, 4, true, big)] {
            let depth = decode_depth(&image).unwrap();
            assert_same(&depth.metres, &[f32::NAN, 0.001, 1.234, 65.535]);
            assert_eq!(depth.at(1, 0), Some(0.001));
            assert_eq!(depth.at(0, 0), None, "0 mm is invalid");
            assert_eq!(depth.at(2, 0), None, "outside");
        }
    }

    #[test]
    fn depth_errors() {
        let err = decode_depth(&raw("rgb8", 1, 1, 3, false, vec![0; 3])).unwrap_err();
        assert!(err.to_string().contains("32FC1, 16UC1, mono16"), "{err}");
        let err = decode_depth(&raw("32FC1", 2, 2, 8, false, vec![0; 15])).unwrap_err();
        assert!(
            matches!(err, DecodeError::Truncated { expected_bytes: 16, got_bytes: 15, .. }),
            "{err:?}"
        );
        let err = decode_depth(&raw("16UC1", 2, 2, 3, false, vec![0; 6])).unwrap_err();
        assert!(matches!(err, DecodeError::StepTooSmall { min_step: 4, .. }), "{err:?}");
    }

    #[test]
    fn stats_ignore_invalid_pixels() {
        // 3x3: five valid depths among NaN, +inf and 0 (decoded from 32FC1).
        let values = [2.0f32, f32::NAN, 0.5, f32::INFINITY, 1.25, 4.0, 0.0, 3.0, -1.0];
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let depth = decode_depth(&raw("32FC1", 3, 3, 12, false, data)).unwrap();
        let stats = depth.stats();
        assert_eq!(
            stats,
            DepthStats {
                valid_fraction: 5.0 / 9.0,
                min_m: Some(0.5),
                max_m: Some(4.0),
                median_m: Some(2.0),
                centre_m: Some(1.25)
            }
        );

        let even = DepthImage { width: 2, height: 2, metres: vec![1.0, 4.0, f32::NAN, 2.0] };
        assert_eq!(even.stats().median_m, Some(2.0));
        let even = DepthImage { width: 4, height: 1, metres: vec![3.0, 1.0, 4.0, 2.0] };
        assert_eq!(even.stats().median_m, Some(2.5));
        assert_eq!(even.stats().centre_m, Some(4.0), "centre is (width / 2, height / 2)");

        let empty = DepthImage { width: 2, height: 1, metres: vec![f32::NAN; 2] }.stats();
        assert_eq!(
            empty,
            DepthStats {
                valid_fraction: 0.0,
                min_m: None,
                max_m: None,
                median_m: None,
                centre_m: None
            }
        );
    }

    #[test]
    fn resize_nearest_copies_whole_pixels() {
        let depth = DepthImage { width: 2, height: 2, metres: vec![1.0, f32::NAN, 3.0, 4.0] };
        let up = depth.resize_nearest(4, 4);
        #[rustfmt::skip]
        assert_same(&up.metres, &[
            1.0, 1.0, f32::NAN, f32::NAN,
            1.0, 1.0, f32::NAN, f32::NAN,
            3.0, 3.0, 4.0, 4.0,
            3.0, 3.0, 4.0, 4.0,
        ]);
        let wide = DepthImage { width: 4, height: 1, metres: vec![1.0, 2.0, 3.0, 4.0] };
        assert_same(&wide.resize_nearest(2, 1).metres, &[2.0, 4.0]);
        // Output pixel 1 of 3 centres on the source boundary 2.0 and takes the right-hand pixel.
        assert_same(&wide.resize_nearest(3, 2).metres, &[1.0, 3.0, 4.0, 1.0, 3.0, 4.0]);
    }

    #[test]
    fn png_mm_round_trips_with_invalid_zero_and_saturation() {
        let depth = DepthImage {
            width: 3,
            height: 2,
            metres: vec![1.234, f32::NAN, 0.0001, 65.535, 70.0, 0.5],
        };
        let png = to_png_mm(&depth).unwrap();
        let decoded = image::load_from_memory_with_format(&png, image::ImageFormat::Png).unwrap();
        assert_eq!(decoded.color(), image::ColorType::L16);
        assert_eq!(decoded.into_luma16().into_raw(), vec![1234, 0, 1, 65535, 65535, 500]);
        let bad = DepthImage { width: 3, height: 2, metres: vec![1.0; 5] };
        assert!(matches!(
            to_png_mm(&bad),
            Err(EncodeError::DepthLengthMismatch { expected: 6, actual: 5, .. })
        ));
    }
}
