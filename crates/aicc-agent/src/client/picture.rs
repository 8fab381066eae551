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

/// Decodes the picture of a vision output; `Err` says what is wrong with it.
pub fn picture_from_output(output: &Value) -> Result<Picture, String> {
    let (field, format, sent_as) = if output.get("png_b64").is_some() {
        ("png_b64", image::ImageFormat::Png, "png")
    } else if output.get("jpeg_b64").is_some() {
        ("jpeg_b64", image::ImageFormat::Jpeg, "jpeg")
    } else {
        return Err("the vision output has neither 'png_b64' nor 'jpeg_b64'".into());
    };
    let text = output[field].as_str().ok_or_else(|| format!("'{field}' is not a string"))?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| format!("'{field}' is not standard base64: {e}"))?;
    let decoded = image::load_from_memory_with_format(&bytes, format).map_err(|e| format!("'{field}' does not hold a {sent_as} picture: {e}"))?;
    let (width, height) = (decoded.width(), decoded.height());
    for (name, stated) in [("width", width), ("height", height)] {
        if let Some(claimed) = output.get(name).and_then(Value::as_u64) {
            if claimed != u64::from(stated) {
                return Err(format!("the output says {name} {claimed}, the picture is {stated}"));
            }
        }
    }
    let png = if sent_as == "png" {
        bytes
    } else {
        let mut png = Vec::new();
        decoded.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).map_err(|e| format!("re-encoding as PNG: {e}"))?;
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
        let picture = image::RgbImage::from_fn(8, 6, |x, _| if x < 4 { image::Rgb([255, 0, 0]) } else { image::Rgb([0, 0, 255]) });
        let mut bytes = Vec::new();
        image::DynamicImage::ImageRgb8(picture).write_to(&mut std::io::Cursor::new(&mut bytes), format).unwrap();
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn a_png_is_kept_as_sent_and_a_jpeg_becomes_a_png() {
        let png_text = encoded(image::ImageFormat::Png);
        let picture = picture_from_output(&json!({ "png_b64": png_text, "width": 8, "height": 6 })).unwrap();
        assert_eq!((picture.width, picture.height, picture.sent_as), (8, 6, "png"));
        assert_eq!(base64::engine::general_purpose::STANDARD.encode(&picture.png), png_text);
        let from_jpeg = picture_from_output(&json!({ "jpeg_b64": encoded(image::ImageFormat::Jpeg) })).unwrap();
        assert_eq!(from_jpeg.sent_as, "jpeg");
        let reread = image::load_from_memory_with_format(&from_jpeg.png, image::ImageFormat::Png).unwrap().to_rgb8();
        assert_eq!(reread.dimensions(), (8, 6));
        assert!(reread.get_pixel(0, 0)[0] > 200 && reread.get_pixel(7, 0)[2] > 200, "colours survive the conversion");
    }

    #[test]
    fn a_broken_picture_is_named() {
        assert!(picture_from_output(&json!({ "width": 8 })).unwrap_err().contains("neither"));
        assert!(picture_from_output(&json!({ "png_b64": "@@@" })).unwrap_err().contains("not standard base64"));
        assert!(picture_from_output(&json!({ "png_b64": encoded(image::ImageFormat::Jpeg) })).unwrap_err().contains("does not hold a png"));
        assert!(picture_from_output(&json!({ "png_b64": encoded(image::ImageFormat::Png), "width": 9 })).unwrap_err().contains("width 9"));
    }

    #[test]
    fn the_summary_leaves_out_the_base64_text() {
        let summary = summary(&json!({ "png_b64": "xyz", "width": 8 }), Path::new("/tmp/f.png"));
        assert_eq!(summary, json!({ "width": 8, "written_to": "/tmp/f.png" }));
    }
}
