//! Colour frames to 8-bit RGB: raw `sensor_msgs/Image` encodings and
//! compressed JPEG/PNG.

use image::RgbImage;

use super::raw::{check_layout, pixel_rows, read_u16, CompressedFrame, DecodeError, RawImage};

/// Encoding names [`decode_rgb`] accepts, as `sensor_msgs/image_encodings`
/// spells them (`yuv422` is UYVY; `yuv422_yuy2` and `yuyv` are YUYV).
pub const SUPPORTED_COLOUR_ENCODINGS: &[&str] =
    &["rgb8", "bgr8", "rgba8", "bgra8", "mono8", "mono16", "yuv422", "uyvy", "yuv422_yuy2", "yuyv"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColourEncoding {
    Rgb8,
    Bgr8,
    Rgba8,
    Bgra8,
    Mono8,
    Mono16,
    /// Byte order U Y0 V Y1.
    Uyvy,
    /// Byte order Y0 U Y1 V.
    Yuyv,
}

impl ColourEncoding {
    fn parse(name: &str) -> Option<Self> {
        let name = name.trim().to_ascii_lowercase();
        Some(match name.as_str() {
            "rgb8" => Self::Rgb8,
            "bgr8" => Self::Bgr8,
            "rgba8" => Self::Rgba8,
            "bgra8" => Self::Bgra8,
            "mono8" => Self::Mono8,
            "mono16" => Self::Mono16,
            "yuv422" | "uyvy" => Self::Uyvy,
            "yuv422_yuy2" | "yuyv" => Self::Yuyv,
            _ => return None,
        })
    }

    fn bytes_per_pixel(self) -> u32 {
        match self {
            Self::Mono8 => 1,
            Self::Mono16 | Self::Uyvy | Self::Yuyv => 2,
            Self::Rgb8 | Self::Bgr8 => 3,
            Self::Rgba8 | Self::Bgra8 => 4,
        }
    }
}

/// Decodes a raw colour or mono frame to 8-bit RGB, honouring `step` and,
/// for `mono16`, `is_bigendian`. Alpha is dropped; `mono16` is scaled from
/// its full 16-bit range; YUV uses BT.601 limited range (Y 16-235), as
/// cameras and OpenCV's `cvtColor` do.
pub fn decode_rgb(image: &RawImage) -> Result<RgbImage, DecodeError> {
    let encoding =
        ColourEncoding::parse(&image.encoding).ok_or_else(|| DecodeError::UnknownEncoding {
            encoding: image.encoding.clone(),
            supported: SUPPORTED_COLOUR_ENCODINGS,
        })?;
    if matches!(encoding, ColourEncoding::Uyvy | ColourEncoding::Yuyv)
        && !image.width.is_multiple_of(2)
    {
        return Err(DecodeError::OddWidth { width: image.width, encoding: image.encoding.clone() });
    }
    check_layout(image, encoding.bytes_per_pixel())?;
    let row_out_bytes = image.width as usize * 3;
    let mut rgb = vec![0u8; row_out_bytes * image.height as usize];
    let rows_out = rgb.chunks_exact_mut(row_out_bytes);
    for (row_in, row_out) in pixel_rows(image, encoding.bytes_per_pixel()).zip(rows_out) {
        convert_row(encoding, image.is_bigendian, row_in, row_out);
    }
    Ok(RgbImage::from_raw(image.width, image.height, rgb)
        .expect("buffer sized for width x height x 3"))
}

fn convert_row(encoding: ColourEncoding, is_bigendian: bool, row_in: &[u8], row_out: &mut [u8]) {
    let out_pixels = row_out.chunks_exact_mut(3);
    match encoding {
        ColourEncoding::Rgb8 => row_out.copy_from_slice(row_in),
        ColourEncoding::Bgr8 => out_pixels
            .zip(row_in.chunks_exact(3))
            .for_each(|(o, i)| o.copy_from_slice(&[i[2], i[1], i[0]])),
        ColourEncoding::Rgba8 => {
            out_pixels.zip(row_in.chunks_exact(4)).for_each(|(o, i)| o.copy_from_slice(&i[..3]))
        }
        ColourEncoding::Bgra8 => out_pixels
            .zip(row_in.chunks_exact(4))
            .for_each(|(o, i)| o.copy_from_slice(&[i[2], i[1], i[0]])),
        ColourEncoding::Mono8 => out_pixels.zip(row_in).for_each(|(o, &g)| o.fill(g)),
        ColourEncoding::Mono16 => out_pixels
            .zip(row_in.chunks_exact(2))
            .for_each(|(o, i)| o.fill(mono16_to_8(read_u16([i[0], i[1]], is_bigendian)))),
        ColourEncoding::Uyvy => yuv422_row(row_in, row_out, [1, 0, 3, 2]),
        ColourEncoding::Yuyv => yuv422_row(row_in, row_out, [0, 1, 2, 3]),
    }
}

/// Rounds 0..=65535 onto 0..=255 so that full scale stays full scale.
fn mono16_to_8(value: u16) -> u8 {
    ((u32::from(value) * 255 + 32767) / 65535) as u8
}

/// Converts one row of 4:2:2 pixel pairs; `order` gives the byte offsets of
/// Y0, U, Y1 and V within each 4-byte group.
fn yuv422_row(row_in: &[u8], row_out: &mut [u8], order: [usize; 4]) {
    let [y0, u, y1, v] = order;
    for (group, pair) in row_in.chunks_exact(4).zip(row_out.chunks_exact_mut(6)) {
        pair[..3].copy_from_slice(&yuv_to_rgb(group[y0], group[u], group[v]));
        pair[3..].copy_from_slice(&yuv_to_rgb(group[y1], group[u], group[v]));
    }
}

/// BT.601 limited range in 8.8 fixed point: integer arithmetic keeps a
/// 640x480 frame well under a millisecond.
fn yuv_to_rgb(y: u8, u: u8, v: u8) -> [u8; 3] {
    let c = 298 * (i32::from(y) - 16);
    let d = i32::from(u) - 128;
    let e = i32::from(v) - 128;
    let clamp = |x: i32| ((x + 128) >> 8).clamp(0, 255) as u8;
    [clamp(c + 409 * e), clamp(c - 100 * d - 208 * e), clamp(c + 516 * d)]
}

/// Decodes a `sensor_msgs/CompressedImage` holding PNG or JPEG to RGB. The
/// bytes' own signature decides the codec, since `format` is free text
/// (`rgb8; jpeg compressed bgr8`); `compressedDepth` frames are refused
/// because their payload is a depth encoding, not a picture.
pub fn decode_compressed_rgb(frame: &CompressedFrame) -> Result<RgbImage, DecodeError> {
    if frame.format.to_ascii_lowercase().contains("compresseddepth") {
        let reason = "compressedDepth carries depth, not colour".to_string();
        return Err(DecodeError::UnsupportedCompressed { format: frame.format.clone(), reason });
    }
    let (kind, codec) =
        sniff_codec(&frame.data).ok_or_else(|| DecodeError::UnsupportedCompressed {
            format: frame.format.clone(),
            reason: format!(
                "data ({} bytes) starts with neither a PNG nor a JPEG signature",
                frame.data.len()
            ),
        })?;
    let decoded = image::load_from_memory_with_format(&frame.data, codec)
        .map_err(|source| DecodeError::Compressed { format: frame.format.clone(), kind, source })?;
    Ok(decoded.into_rgb8())
}

fn sniff_codec(data: &[u8]) -> Option<(&'static str, image::ImageFormat)> {
    const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    const JPEG_SIGNATURE: &[u8] = &[0xFF, 0xD8, 0xFF];
    if data.starts_with(PNG_SIGNATURE) {
        Some(("png", image::ImageFormat::Png))
    } else if data.starts_with(JPEG_SIGNATURE) {
        Some(("jpeg", image::ImageFormat::Jpeg))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2x2 picture used by every round trip: red, green / blue, grey.
    const PIXELS: [[u8; 3]; 4] = [[255, 0, 0], [0, 255, 0], [0, 0, 255], [10, 128, 250]];

    fn raw(encoding: &str, width: u32, height: u32, step: u32, data: Vec<u8>) -> RawImage {
        RawImage { width, height, encoding: encoding.into(), is_bigendian: false, step, data }
    }

    /// Lays `pixels` out in rows of `width` pixels, each padded to `step`.
    fn pack(width: usize, step: usize, pixels: &[Vec<u8>]) -> Vec<u8> {
        pixels
            .chunks(width)
            .flat_map(|row| {
                let mut bytes: Vec<u8> = row.concat();
                bytes.resize(step, 0xEE);
                bytes
            })
            .collect()
    }

    fn pixels_of(image: &RgbImage) -> Vec<[u8; 3]> {
        image.pixels().map(|p| p.0).collect()
    }

    #[test]
    fn rgb8_bgr8_rgba8_bgra8_round_trip() {
        type ToBytes = fn([u8; 3]) -> Vec<u8>;
        let cases: [(&str, ToBytes); 4] = [
            ("rgb8", |[r, g, b]| vec![r, g, b]),
            ("bgr8", |[r, g, b]| vec![b, g, r]),
            ("rgba8", |[r, g, b]| vec![r, g, b, 7]),
            ("bgra8", |[r, g, b]| vec![b, g, r, 7]),
        ];
        for (encoding, to_bytes) in cases {
            let bytes_per_pixel = to_bytes([0; 3]).len();
            let pixels: Vec<Vec<u8>> = PIXELS.iter().map(|&p| to_bytes(p)).collect();
            let tight = raw(
                encoding,
                2,
                2,
                2 * bytes_per_pixel as u32,
                pack(2, 2 * bytes_per_pixel, &pixels),
            );
            assert_eq!(pixels_of(&decode_rgb(&tight).unwrap()), PIXELS, "{encoding}");
            let padded_step = 2 * bytes_per_pixel + 5;
            let padded = raw(encoding, 2, 2, padded_step as u32, pack(2, padded_step, &pixels));
            assert_eq!(
                pixels_of(&decode_rgb(&padded).unwrap()),
                PIXELS,
                "{encoding} with a padded step"
            );
        }
    }

    #[test]
    fn mono8_with_padded_step() {
        let image = raw("mono8", 3, 2, 4, vec![0, 100, 255, 0xEE, 1, 2, 3, 0xEE]);
        let expected: Vec<[u8; 3]> = [0, 100, 255, 1, 2, 3].iter().map(|&g| [g; 3]).collect();
        assert_eq!(pixels_of(&decode_rgb(&image).unwrap()), expected);
    }

    #[test]
    fn mono16_both_byte_orders_scale_to_8_bit() {
        let values: [u16; 4] = [0, 257 * 100, 65535, 0x1234];
        let expected: Vec<[u8; 3]> = [0u8, 100, 255, 18].iter().map(|&g| [g; 3]).collect();
        let little: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let big: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
        assert_eq!(pixels_of(&decode_rgb(&raw("mono16", 2, 2, 4, little)).unwrap()), expected);
        let mut big_image = raw("mono16", 2, 2, 4, big);
        big_image.is_bigendian = true;
        assert_eq!(pixels_of(&decode_rgb(&big_image).unwrap()), expected);
    }

    /// BT.601 limited-range forward transform, written independently of
    /// the decoder's fixed-point inverse.
    fn rgb_to_yuv([r, g, b]: [u8; 3]) -> [u8; 3] {
        let (r, g, b) = (f64::from(r), f64::from(g), f64::from(b));
        let y = 16.0 + 0.256788 * r + 0.504129 * g + 0.097906 * b;
        let u = 128.0 - 0.148223 * r - 0.290993 * g + 0.439216 * b;
        let v = 128.0 + 0.439216 * r - 0.367788 * g - 0.071427 * b;
        [y.round() as u8, u.round() as u8, v.round() as u8]
    }

    const YUV_COLOURS: [[u8; 3]; 8] = [
        [255, 0, 0],
        [0, 255, 0],
        [0, 0, 255],
        [255, 255, 255],
        [0, 0, 0],
        [128, 128, 128],
        [200, 120, 40],
        [30, 90, 160],
    ];

    fn assert_close(actual: [u8; 3], expected: [u8; 3], tolerance: i16, what: &str) {
        let off =
            (0..3).map(|i| (i16::from(actual[i]) - i16::from(expected[i])).abs()).max().unwrap();
        assert!(off <= tolerance, "{what}: got {actual:?}, expected {expected:?}");
    }

    #[test]
    fn yuv422_packings_decode_known_colours() {
        // One row of pixel pairs, each pair one colour (chroma is shared by a pair).
        let width = 2 * YUV_COLOURS.len() as u32;
        let uyvy: Vec<u8> = YUV_COLOURS
            .iter()
            .flat_map(|&c| {
                let [y, u, v] = rgb_to_yuv(c);
                [u, y, v, y]
            })
            .collect();
        let yuyv: Vec<u8> = YUV_COLOURS
            .iter()
            .flat_map(|&c| {
                let [y, u, v] = rgb_to_yuv(c);
                [y, u, y, v]
            })
            .collect();
        for (encoding, data) in
            [("yuv422", &uyvy), ("uyvy", &uyvy), ("yuv422_yuy2", &yuyv), ("yuyv", &yuyv)]
        {
            let decoded = decode_rgb(&raw(encoding, width, 1, width * 2, data.clone())).unwrap();
            for (i, &colour) in YUV_COLOURS.iter().enumerate() {
                for x in [2 * i as u32, 2 * i as u32 + 1] {
                    assert_close(
                        decoded.get_pixel(x, 0).0,
                        colour,
                        2,
                        &format!("{encoding} pixel {x}"),
                    );
                }
            }
        }
    }

    #[test]
    fn yuv422_byte_order_gives_each_pixel_its_own_luma() {
        // Y0 = black, Y1 = white, neutral chroma; a swapped byte order would tint them.
        let uyvy = raw(
            "yuv422",
            2,
            2,
            6,
            vec![128, 16, 128, 235, 0xEE, 0xEE, 128, 235, 128, 16, 0xEE, 0xEE],
        );
        assert_eq!(pixels_of(&decode_rgb(&uyvy).unwrap()), [[0; 3], [255; 3], [255; 3], [0; 3]]);
        let yuyv = raw("yuv422_yuy2", 2, 1, 4, vec![16, 128, 235, 128]);
        assert_eq!(pixels_of(&decode_rgb(&yuyv).unwrap()), [[0; 3], [255; 3]]);
    }

    #[test]
    fn specific_errors() {
        let err = decode_rgb(&raw("rgb8", 2, 2, 6, vec![0; 11])).unwrap_err();
        assert!(
            matches!(err, DecodeError::Truncated { expected_bytes: 12, got_bytes: 11, .. }),
            "{err:?}"
        );
        let err = decode_rgb(&raw("rgba8", 2, 2, 6, vec![0; 12])).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::StepTooSmall { step: 6, min_step: 8, bytes_per_pixel: 4, .. }
            ),
            "{err:?}"
        );
        let err = decode_rgb(&raw("bayer_rggb8", 2, 2, 2, vec![0; 4])).unwrap_err();
        assert!(matches!(err, DecodeError::UnknownEncoding { .. }), "{err:?}");
        assert!(
            err.to_string().contains("\"bayer_rggb8\"") && err.to_string().contains("yuv422_yuy2"),
            "{err}"
        );
        let err = decode_rgb(&raw("yuv422", 3, 1, 6, vec![0; 6])).unwrap_err();
        assert!(matches!(err, DecodeError::OddWidth { width: 3, .. }), "{err:?}");
        assert!(matches!(
            decode_rgb(&raw("mono8", 0, 0, 0, vec![])),
            Err(DecodeError::ZeroSize { .. })
        ));
    }

    #[test]
    fn compressed_png_and_jpeg_decode() {
        let picture = RgbImage::from_fn(2, 2, |x, y| image::Rgb(PIXELS[(y * 2 + x) as usize]));
        let mut png = Vec::new();
        picture.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).unwrap();
        let decoded = decode_compressed_rgb(&CompressedFrame {
            format: "rgb8; png compressed rgb8".into(),
            data: png,
        })
        .unwrap();
        assert_eq!(pixels_of(&decoded), PIXELS);

        let red = RgbImage::from_pixel(16, 16, image::Rgb([255, 0, 0]));
        let mut jpeg = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90)
            .encode_image(&red)
            .unwrap();
        let decoded =
            decode_compressed_rgb(&CompressedFrame { format: "jpeg".into(), data: jpeg }).unwrap();
        assert_eq!(decoded.dimensions(), (16, 16));
        decoded.pixels().for_each(|p| assert_close(p.0, [255, 0, 0], 5, "jpeg red"));
    }

    #[test]
    fn compressed_errors() {
        let err = decode_compressed_rgb(&CompressedFrame {
            format: "jpeg".into(),
            data: b"GIF89a".to_vec(),
        })
        .unwrap_err();
        assert!(matches!(err, DecodeError::UnsupportedCompressed { .. }), "{err:?}");
        let err = decode_compressed_rgb(&CompressedFrame {
            format: "16UC1; compressedDepth png".into(),
            data: vec![0; 20],
        })
        .unwrap_err();
        assert!(err.to_string().contains("compressedDepth"), "{err}");
        let truncated_png = b"\x89PNG\r\n\x1a\n\0\0".to_vec();
        let err =
            decode_compressed_rgb(&CompressedFrame { format: "png".into(), data: truncated_png })
                .unwrap_err();
        assert!(matches!(err, DecodeError::Compressed { kind: "png", .. }), "{err:?}");
    }
}
