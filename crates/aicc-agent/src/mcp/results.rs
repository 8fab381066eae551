//! AICC results as MCP tool results: the output as `structuredContent`
//! with a short text beside it, pictures as image content, and AICC errors
//! as `isError` results worded for a model to act on.
use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::{json, Map, Value};

use super::tools::IMAGE_FIELDS;
use crate::client::{CallSuccess, RemoteError};

/// Past this, the text beside a structured result is cut (the whole result
/// is in `structuredContent`).
const TEXT_LIMIT_CHARS: usize = 4000;

/// A successful call: pictures as image content, the rest structured.
pub fn success(tool: &str, success: &CallSuccess) -> CallToolResult {
    let mut structured = match &success.output {
        Value::Object(output) => output.clone(),
        other => Map::from_iter([("value".to_string(), other.clone())]),
    };
    let mut images = Vec::new();
    let mut described = Vec::new();
    for (field, mime_type) in IMAGE_FIELDS {
        if let Some(Value::String(data)) = structured.remove(field) {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&data)
                .map(|b| b.len())
                .unwrap_or(0);
            described.push(json!({ "field": field, "mime_type": mime_type, "bytes": bytes }));
            images.push(ContentBlock::image(data, mime_type));
        }
    }
    if !described.is_empty() {
        structured.insert("images".into(), Value::Array(described));
    }
    let text = if images.is_empty() {
        format!("{tool}: {}", shortened(&Value::Object(structured.clone())))
    } else {
        picture_summary(tool, &structured)
    };
    let mut content = vec![ContentBlock::text(text)];
    content.extend(images);
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(Value::Object(structured));
    result.meta = aicc_meta(&success.meta);
    result
}

/// An AICC error, for the model: what failed, whether retrying can help and
/// what to do. The code, message and retryable flag are also structured.
pub fn remote_error(tool: &str, error: &RemoteError) -> CallToolResult {
    let retry = if error.retryable { "retryable" } else { "not retryable" };
    let text = format!(
        "{tool} failed ({}, {retry}): {} {}",
        error.code,
        error.message,
        advice(&error.code, error.retryable)
    );
    failure(
        text,
        json!({ "error": { "code": error.code, "message": error.message, "retryable": error.retryable } }),
    )
}

/// A failure on this side of the bridge (refused locally, the connection
/// lost): the same shape as an AICC error, with the code that fits.
pub fn local_error(tool: &str, code: &str, message: &str, retryable: bool) -> CallToolResult {
    remote_error(tool, &RemoteError { code: code.into(), message: message.into(), retryable })
}

fn failure(text: String, structured: Value) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

/// What a model should do after an error with `code`.
pub fn advice(code: &str, retryable: bool) -> &'static str {
    match (code, retryable) {
        ("invalid_input", _) => "Fix the argument the message names (see the tool's inputSchema) and call again.",
        ("tool_unavailable", true) => "The tool cannot run right now (its data is missing or stale, or another session holds the motion lease): wait a moment and retry, or use another tool.",
        ("tool_unavailable", false) => "This session may not use this tool; do not retry it.",
        ("execution_failed", true) => "The robot is unharmed and stopped; do what the message says (e.g. turn or back away), then retry.",
        ("execution_failed", false) => "Do not retry it unchanged.",
        ("timeout", _) => "It did not finish in time; check the robot's state (proprioception) before trying again.",
        ("session_expired", _) => "The robot session ended; the MCP server must be restarted.",
        (_, true) => "Retrying later may succeed.",
        (_, false) => "Retrying unchanged will not help.",
    }
}

/// One line about the pictures and their metadata (size, frame, age).
fn picture_summary(tool: &str, output: &Map<String, Value>) -> String {
    let get = |key: &str| {
        output
            .get(key)
            .filter(|v| !v.is_null())
            .map(|v| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string()))
    };
    let mut parts = Vec::new();
    if let (Some(width), Some(height)) = (get("width"), get("height")) {
        parts.push(format!("{width}x{height}"));
    }
    if let Some(format) = get("format").or_else(|| get("encoding")) {
        parts.push(format);
    }
    if let Some(frame) = get("frame_id") {
        parts.push(format!("frame {frame}"));
    }
    if let Some(age) = get("age_ms") {
        parts.push(format!("{age} ms old"));
    }
    if let Some(reduced) = output.get("reduced").and_then(Value::as_array).filter(|r| !r.is_empty())
    {
        parts.push(format!(
            "reduced: {}",
            reduced.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
        ));
    }
    let mut rest = output.clone();
    for key in ["width", "height", "format", "frame_id", "age_ms", "reduced", "images", "mime_type"]
    {
        rest.remove(key);
    }
    format!(
        "{tool}: picture attached ({}); other fields: {}",
        parts.join(", "),
        shortened(&Value::Object(rest))
    )
}

/// The JSON text, cut at a character boundary past the limit.
fn shortened(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(TEXT_LIMIT_CHARS) {
        Some((cut, _)) => {
            format!("{}... (cut; the whole result is in structuredContent)", &text[..cut])
        }
        None => text,
    }
}

/// The AICC result's `meta` (tick, latency, source topics) under `_meta`.
fn aicc_meta(meta: &Value) -> Option<MetaObject> {
    let object = meta.as_object().filter(|m| !m.is_empty())?;
    Some(MetaObject(Map::from_iter([("aicc".to_string(), Value::Object(object.clone()))])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(output: Value) -> CallSuccess {
        CallSuccess { call_id: "c1".into(), output, meta: json!({ "tick": 7, "latency_ms": 2.5 }) }
    }

    #[test]
    fn an_output_is_structured_with_its_json_as_text_and_the_aicc_meta_beside() {
        let result = success("proprioception", &call(json!({ "pose": { "x": 1.0 } })));
        assert_eq!(result.is_error, Some(false));
        assert_eq!(result.structured_content, Some(json!({ "pose": { "x": 1.0 } })));
        let text = result.content[0].as_text().expect("text first");
        assert_eq!(text.text, r#"proprioception: {"pose":{"x":1.0}}"#);
        assert_eq!(
            result.meta.unwrap().0.get("aicc"),
            Some(&json!({ "tick": 7, "latency_ms": 2.5 }))
        );
    }

    #[test]
    fn a_picture_becomes_image_content_and_leaves_the_structured_result() {
        let data = base64::engine::general_purpose::STANDARD.encode([0xFF, 0xD8, 0xFF, 0x00]);
        let output = json!({ "jpeg_b64": data, "width": 320, "height": 240, "format": "jpeg", "frame_id": "camera_optical_frame", "age_ms": 12.5, "reduced": [] });
        let result = success("vision", &call(output));
        let structured = result.structured_content.clone().unwrap();
        assert!(structured.get("jpeg_b64").is_none());
        assert_eq!(
            structured["images"],
            json!([{ "field": "jpeg_b64", "mime_type": "image/jpeg", "bytes": 4 }])
        );
        assert_eq!(structured["width"], 320);
        let image = result.content[1].as_image().expect("the picture second");
        assert_eq!((image.data.as_str(), image.mime_type.as_str()), (data.as_str(), "image/jpeg"));
        let text = result.content[0].as_text().expect("text first");
        assert!(
            text.text.contains("320x240")
                && text.text.contains("frame camera_optical_frame")
                && text.text.contains("12.5 ms old"),
            "{}",
            text.text
        );
        assert!(!text.text.contains(&data), "the text does not repeat the picture");
    }

    #[test]
    fn an_error_is_an_is_error_result_with_code_message_retryable_and_advice() {
        let error = RemoteError {
            code: "invalid_input".into(),
            message: "input.forward: 9 is greater than the maximum of 5".into(),
            retryable: false,
        };
        let result = remote_error("move", &error);
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result.structured_content.clone().unwrap()["error"],
            json!({ "code": "invalid_input", "message": error.message, "retryable": false })
        );
        let text = result.content[0].as_text().expect("text first");
        assert!(
            text.text.starts_with("move failed (invalid_input, not retryable): input.forward"),
            "{}",
            text.text
        );
        assert!(text.text.contains("Fix the argument"), "{}", text.text);
        assert!(
            advice("execution_failed", true).contains("retry")
                && advice("tool_unavailable", false).contains("do not retry")
        );
    }

    #[test]
    fn long_texts_are_cut_at_a_character_boundary() {
        let long = json!({ "text": "é".repeat(TEXT_LIMIT_CHARS) });
        let text = shortened(&long);
        assert!(text.ends_with("(cut; the whole result is in structuredContent)"));
        assert!(text.chars().count() < TEXT_LIMIT_CHARS + 60);
        assert_eq!(shortened(&json!({ "a": 1 })), r#"{"a":1}"#);
    }
}
