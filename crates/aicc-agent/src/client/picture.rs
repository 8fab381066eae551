//! The picture in a `vision` result (`png_b64` or `jpeg_b64`, see
//! src/tools/vision.rs), decoded and made a PNG file.
use std::path::Path;

use base64::Engine as _;
use serde_json::Value;

/// A decoded picture, as PNG bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    pub png: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// `png` or `jpeg`: how the bridge sent it.
    pub sent_as: &'static str,
}

/// What is wrong with the picture of a vision output.
#[derive(Debug, thiserror::Error)]
pub enum PictureError {
    /// Neither picture field is there.
    #[error("the vision output has neither 'png_b64' nor 'jpeg_b64'")]
    NoPicture,
    /// The picture field is not text.
    #[error("'{field}' is not a string")]
    NotAString { field: &'static str },
    /// The picture field is not standard base64.
    #[error("'{field}' is not standard base64: {source}")]
    NotBase64 { field: &'static str, source: base64::DecodeError },
    /// The bytes are not a picture of the format the field names.
    #[error("'{field}' does not hold a {format} picture: {source}")]
    NotAPicture { field: &'static str, format: &'static str, source: image::ImageError },
    /// The output states a width or height the picture does not have.
    #[error("the output says {dimension} {claimed}, the picture is {actual}")]
    SizeMismatch { dimension: &'static str, claimed: u64, actual: u32 },
    /// A JPEG could not be written again as PNG.
    #[error("re-encoding as PNG: {0}")]
    Reencoding(#[source] image::ImageError),
}

/// Decodes the picture of a vision output; `Err` says what is wrong with it.
pub fn picture_from_output(output: &Value) -> Result<Picture, PictureError> {
    let (field, format, sent_as) = if output.get("png_b64").is_some() {
        ("png_b64", image::ImageFormat::Png, "png")
    } else if output.get("jpeg_b64").is_some() {
        ("jpeg_b64", image::ImageFormat::Jpeg, "jpeg")
    } else {
        return Err(PictureError::NoPicture);
    };
    let text = output[field].as_str().ok_or(PictureError::NotAString { field })?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|source| PictureError::NotBase64 { field, source })?;
    let decoded = image::load_from_memory_with_format(&bytes, format)
        .map_err(|source| PictureError::NotAPicture { field, format: sent_as, source })?;
    let (width, height) = (decoded.width(), decoded.height());
    for (dimension, actual) in [("width", width), ("height", height)] {
        if let Some(claimed) = output.get(dimension).and_then(Value::as_u64) {
            if claimed != u64::from(actual) {
                return Err(PictureError::SizeMismatch { dimension, claimed, actual });
            }
        }
    }
    let png = if sent_as == "png" {
        bytes
    } else {
        let mut png = Vec::new();
        decoded
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .map_err(PictureError::Reencoding)?;
        png
    };
    Ok(Picture { png, width, height, sent_as })
}

/// The output without the picture's base64 text, with where it was written.
pub fn summary(output: &Value, written_to: &Path) -> Value {
    let mut summary = output.clone();
    if let Some(fields) = summary.as_object_mut() {
        fields.remove("png_b64");
        fields.remove("jpeg_b64");
        fields.insert("written_to".into(), Value::String(written_to.display().to_string()));
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn encoded(format: image::ImageFormat) -> String {
        let picture = image::RgbImage::from_fn(8, 6, |x, _| {
            if x < 4 {
                image::Rgb([255, 0, 0])
            } else {
                image::Rgb([0, 0, 255])
            }
        });
        let mut bytes = Vec::new();
        image::DynamicImage::ImageRgb8(picture)
            .write_to(&mut std::io::Cursor::new(&mut bytes), format)
            .unwrap();
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn a_png_is_kept_as_sent_and_a_jpeg_becomes_a_png() {
        let png_text = encoded(image::ImageFormat::Png);
        let picture =
            picture_from_output(&json!({ "png_b64": png_text, "width": 8, "height": 6 })).unwrap();
        assert_eq!((picture.width, picture.height, picture.sent_as), (8, 6, "png"));
        assert_eq!(base64::engine::general_purpose::STANDARD.encode(&picture.png), png_text);
        let from_jpeg =
            picture_from_output(&json!({ "jpeg_b64": encoded(image::ImageFormat::Jpeg) })).unwrap();
        assert_eq!(from_jpeg.sent_as, "jpeg");
        let reread = image::load_from_memory_with_format(&from_jpeg.png, image::ImageFormat::Png)
            .unwrap()
            .to_rgb8();
        assert_eq!(reread.dimensions(), (8, 6));
        assert!(
            reread.get_pixel(0, 0)[0] > 200 && reread.get_pixel(7, 0)[2] > 200,
            "colours survive the conversion"
        );
    }

    #[test]
    fn a_broken_picture_is_named() {
        let why = |output: Value| picture_from_output(&output).unwrap_err().to_string();
        assert!(why(json!({ "width": 8 })).contains("neither"));
        assert!(why(json!({ "png_b64": "@@@" })).contains("not standard base64"));
        assert!(why(json!({ "png_b64": encoded(image::ImageFormat::Jpeg) }))
            .contains("does not hold a png"));
        assert!(why(json!({ "png_b64": encoded(image::ImageFormat::Png), "width": 9 }))
            .contains("width 9"));
    }

    #[test]
    fn the_summary_leaves_out_the_base64_text() {
        let summary = summary(&json!({ "png_b64": "xyz", "width": 8 }), Path::new("/tmp/f.png"));
        assert_eq!(summary, json!({ "width": 8, "written_to": "/tmp/f.png" }));
    }
}
