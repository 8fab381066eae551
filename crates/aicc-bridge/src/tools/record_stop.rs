//! `record_stop`: end the recording under way (the RFC's primitive; admin
//! scope). When it returns, the files are complete (summary and footer
//! written); the result names them.
use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::reject_unknown_fields;
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;

pub struct RecordStop;

impl Tool for RecordStop {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "record_stop",
            class: ToolClass::Actuator,
            description: "End the recording under way; the result gives its file (and every part, when it rotated) and how many messages it holds.",
            capability: "can_administer_bridge",
            strict_input: true,
            calls_per_minute: Some(30),
            input_schema: json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "path": { "type": ["string", "null"] },
                    "parts": { "type": "array", "items": { "type": "string" } },
                    "messages": { "type": "integer" },
                    "was_recording": { "type": "boolean" }
                },
                "required": ["path", "was_recording"]
            }),
        }
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            reject_unknown_fields(&input, &[])?;
            let was_recording = ctx.recorder.status().path.is_some();
            let status = ctx.recorder.stop_recording().await.map_err(|reason| AiccError::execution_failed(true, format!("recording did not stop cleanly: {reason}")))?;
            let parts: Vec<String> = status.parts.iter().map(|p| p.display().to_string()).collect();
            let path = if was_recording { parts.last().cloned() } else { None };
            Ok(ToolSuccess { output: json!({ "path": path, "parts": if was_recording { parts } else { Vec::new() }, "messages": status.messages, "was_recording": was_recording }), source: "recorder".into() })
        }
        .boxed()
    }
}
