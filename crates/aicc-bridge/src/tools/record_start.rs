//! `record_start`: start recording the bridge's traffic to an MCAP file
//! (the RFC's primitive; admin scope). Its result names the file. Already
//! recording: the result names the file under way. With the flight
//! recorder on (`record.mode: on_fault`), the file may begin with the last
//! seconds kept in memory.
use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::reject_unknown_fields;
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;

/// Most characters of the note kept in the file's metadata.
const MAX_NOTE_CHARS: usize = 200;

pub struct RecordStart;

impl Tool for RecordStart {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "record_start",
            class: ToolClass::Actuator,
            description: "Start recording every session's traffic, events, governor restrictions and lease changes to an MCAP file (docs/recording.md); the result gives the file. include_flight_ring: begin with the last seconds kept in memory (record.mode on_fault).",
            capability: "can_administer_bridge",
            strict_input: true,
            calls_per_minute: Some(30),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "include_flight_ring": { "type": "boolean" },
                    "note": { "type": "string", "maxLength": MAX_NOTE_CHARS }
                },
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": { "path": { "type": "string" }, "parts": { "type": "array", "items": { "type": "string" } }, "recording": { "type": "boolean" } },
                "required": ["path", "recording"]
            }),
        }
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            reject_unknown_fields(&input, &["include_flight_ring", "note"])?;
            let with_ring = match input.get("include_flight_ring") {
                None => true,
                Some(Value::Bool(with_ring)) => *with_ring,
                Some(_) => {
                    return Err(AiccError::invalid_input(
                        "input.include_flight_ring must be a boolean",
                    ))
                }
            };
            let note = match input.get("note") {
                None => String::new(),
                Some(Value::String(note)) if note.chars().count() <= MAX_NOTE_CHARS => note.clone(),
                Some(Value::String(_)) => {
                    return Err(AiccError::invalid_input(format!(
                        "input.note is longer than {MAX_NOTE_CHARS} characters"
                    )))
                }
                Some(_) => return Err(AiccError::invalid_input("input.note must be a string")),
            };
            let detail = format!(
                "record_start by session {}{}{}",
                ctx.session,
                if note.is_empty() { "" } else { ": " },
                note
            );
            let status =
                ctx.recorder.start_recording(with_ring, detail).await.map_err(|reason| {
                    AiccError::execution_failed(true, format!("recording did not start: {reason}"))
                })?;
            let path = status.path.map(|p| p.display().to_string()).unwrap_or_default();
            let parts: Vec<String> = status.parts.iter().map(|p| p.display().to_string()).collect();
            Ok(ToolSuccess {
                output: json!({ "path": path, "parts": parts, "recording": true }),
                source: "recorder".into(),
            })
        }
        .boxed()
    }
}
