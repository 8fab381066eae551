//! `say`: speak a line through the robot (std_msgs/String on the say
//! topic, for a TTS node). Rate limited: an agent must not be able to
//! flood the room with speech.
use std::time::Instant;

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::reject_unknown_fields;
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;

/// Longest line, in characters.
pub const MAX_TEXT_CHARS: usize = 500;
/// Calls per minute one session may make.
pub const CALLS_PER_MINUTE: u32 = 30;

pub struct Say;

/// The text to speak: control characters (but newlines and tabs, which
/// become spaces) removed, whitespace trimmed. Errors name the field.
pub fn clean_text(input: &Map<String, Value>) -> Result<(String, bool), AiccError> {
    let text = match input.get("text") {
        None => return Err(AiccError::invalid_input("input.text is required")),
        Some(Value::String(text)) => text,
        Some(_) => return Err(AiccError::invalid_input("input.text must be a string")),
    };
    let length = text.chars().count();
    if length > MAX_TEXT_CHARS {
        return Err(AiccError::invalid_input(format!(
            "input.text is {length} characters long; the limit is {MAX_TEXT_CHARS}"
        )));
    }
    let cleaned: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .filter(|c| !c.is_control())
        .collect();
    let cleaned = cleaned.trim().to_string();
    if cleaned.is_empty() {
        return Err(AiccError::invalid_input(
            "input.text has nothing to say (empty, or only spaces and control characters)",
        ));
    }
    let changed = cleaned != *text;
    Ok((cleaned, changed))
}

impl Tool for Say {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "say",
            class: ToolClass::Actuator,
            description: "Speak a line of text through the robot (published for its text-to-speech). At most 500 characters and 30 calls per minute.",
            capability: "can_communicate",
            strict_input: true,
            calls_per_minute: Some(CALLS_PER_MINUTE),
            input_schema: json!({
                "type": "object",
                "properties": { "text": { "type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS } },
                "required": ["text"],
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": { "said": { "type": "string" }, "chars": { "type": "integer" }, "cleaned": { "type": "boolean" } },
                "required": ["said", "chars"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, _now: Instant) -> Option<String> {
        ctx.config
            .actuators
            .say_topic
            .is_empty()
            .then(|| "no say topic is configured (actuators.say_topic)".to_string())
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            reject_unknown_fields(&input, &["text"])?;
            let (text, cleaned) = clean_text(&input)?;
            ctx.signals.say(&text).map_err(|e| {
                AiccError::execution_failed(
                    true,
                    format!("publishing on {}: {e}", ctx.signals.say_topic()),
                )
            })?;
            Ok(ToolSuccess {
                output: json!({ "said": text, "chars": text.chars().count(), "cleaned": cleaned }),
                source: ctx.signals.say_topic(),
            })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::input::input_map;

    #[test]
    fn text_is_bounded_and_cleaned() {
        assert_eq!(
            clean_text(&input_map(json!({"text": "Hello there"}))).unwrap(),
            ("Hello there".to_string(), false)
        );
        assert_eq!(
            clean_text(&input_map(json!({"text": " two\nlines\u{7} "}))).unwrap(),
            ("two lines".to_string(), true)
        );
        let long = "x".repeat(MAX_TEXT_CHARS + 1);
        let error = clean_text(&input_map(json!({ "text": long }))).unwrap_err();
        assert!(
            error.message.contains("input.text") && error.message.contains("500"),
            "{}",
            error.message
        );
        assert!(
            clean_text(&input_map(json!({"text": "ü".repeat(MAX_TEXT_CHARS)}))).is_ok(),
            "characters, not bytes"
        );
        assert!(clean_text(&input_map(json!({"text": " \u{1b} "})))
            .unwrap_err()
            .message
            .contains("nothing to say"));
        assert!(clean_text(&input_map(json!({"text": 5})))
            .unwrap_err()
            .message
            .contains("must be a string"));
        assert!(clean_text(&input_map(json!({}))).unwrap_err().message.contains("required"));
    }
}
