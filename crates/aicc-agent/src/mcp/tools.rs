//! The manifest's tools as MCP tools: name, description, schemas, and the
//! hints MCP hosts use to ask a person before a call (annotations).
use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Map, Value};

use crate::client::manifest::{LlmOffer, Manifest};

/// The adapter's own tool: the events after a cursor, for hosts that do
/// not read resources.
pub const EVENTS_TOOL: &str = "events";

/// AICC tools an MCP host has no use for: `cancel` needs an AICC call id,
/// which the host never sees; it cancels with `notifications/cancelled`.
const HIDDEN_TOOLS: [&str; 1] = ["cancel"];

/// Output fields holding a picture as base64, and the MIME type of each:
/// they go out as MCP image content, not inside the structured result.
pub const IMAGE_FIELDS: [(&str, &str); 3] =
    [("png_b64", "image/png"), ("jpeg_b64", "image/jpeg"), ("png16_mm_b64", "image/png")];

/// Tools that move the robot (or a part of it): their effect on the world
/// cannot simply be undone, so hosts should ask before calling them.
const MOVING_TOOLS: [&str; 5] = ["move", "turn", "look_at", "interact", "touch"];

/// The MCP tools of this session: every tool the session may call now
/// (granted and available) that `offer` hands an LLM (never an operator's
/// tool), then `events`. A tool that is gone (its sensor went silent, the
/// scope does not allow it) is left out; the host is told with
/// `tools/list_changed` when that changes.
pub fn mcp_tools(manifest: &Manifest, offer: LlmOffer) -> Vec<Tool> {
    let mut tools: Vec<Tool> = manifest
        .tools()
        .iter()
        .filter(|info| {
            !HIDDEN_TOOLS.contains(&info.id.as_str())
                && offer.withheld(info).is_none()
                && manifest.permits(&info.id).is_ok()
        })
        .filter_map(|info| manifest_tool(manifest, &info.id))
        .collect();
    tools.push(events_tool());
    tools
}

/// Whether `name` is a tool the host may see (the manifest's, not hidden,
/// offered).
pub fn is_listed(manifest: &Manifest, offer: LlmOffer, name: &str) -> bool {
    name == EVENTS_TOOL
        || (!HIDDEN_TOOLS.contains(&name)
            && manifest.tool(name).is_some_and(|info| offer.withheld(info).is_none()))
}

/// One manifest tool as an MCP tool; `None` when its entry is not usable
/// (a name MCP does not allow).
fn manifest_tool(manifest: &Manifest, id: &str) -> Option<Tool> {
    if !valid_tool_name(id) {
        return None;
    }
    let raw = manifest
        .raw()
        .get("tools")?
        .as_array()?
        .iter()
        .find(|t| t.get("id").and_then(Value::as_str) == Some(id))?;
    let class = raw.get("class").and_then(Value::as_str).unwrap_or("sensor");
    let mut description = raw.get("description").and_then(Value::as_str).unwrap_or("").to_string();
    if let Some(limits) = raw.get("limits").filter(|l| l.as_object().is_some_and(|o| !o.is_empty()))
    {
        description.push_str(&format!(" Limits: {limits}."));
    }
    let input_schema = object_schema(raw.get("input_schema"));
    let mut tool = Tool::new(id.to_string(), description, Arc::new(input_schema))
        .with_annotations(annotations(id, class));
    if let Some(output) = raw.get("output_schema").filter(|s| s.is_object()) {
        let schema = without_image_fields(output);
        if schema.get("properties").is_some_and(|p| p.get("images").is_some()) {
            let told = tool.description.as_deref().unwrap_or("").to_string();
            tool.description = Some(format!("{told} Over MCP the picture comes as image content; the other fields are in structuredContent.").into());
        }
        tool = tool.with_raw_output_schema(Arc::new(schema));
    }
    Some(tool)
}

/// MCP tool names: 1-128 of `A-Z a-z 0-9 _ - .`.
fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The hints of a tool of `class`: sensors and generators read only;
/// actuators not, destructive where they move the robot (saying something
/// or stopping is not), never idempotent (a second move moves again).
pub fn annotations(id: &str, class: &str) -> ToolAnnotations {
    let hints = ToolAnnotations::new().open_world(true);
    match class {
        "actuator" => {
            hints.read_only(false).destructive(MOVING_TOOLS.contains(&id)).idempotent(id == "stop")
        }
        _ => hints.read_only(true),
    }
}

/// A schema MCP accepts as `inputSchema`: a JSON object of type object.
fn object_schema(schema: Option<&Value>) -> JsonObject {
    let mut schema = schema.and_then(Value::as_object).cloned().unwrap_or_default();
    schema.entry("type").or_insert_with(|| json!("object"));
    schema
}

/// The output schema as the structured result will be: without the
/// picture fields (they travel as image content), with `images` saying
/// where they went.
fn without_image_fields(schema: &Value) -> JsonObject {
    let mut schema = object_schema(Some(schema));
    let mut had_image = false;
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for (field, _) in IMAGE_FIELDS {
            had_image |= properties.remove(field).is_some();
        }
        if had_image {
            properties.insert("images".into(), images_schema());
        }
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|name| !IMAGE_FIELDS.iter().any(|(field, _)| name.as_str() == Some(field)));
    }
    schema
}

fn images_schema() -> Value {
    json!({
        "type": "array",
        "description": "the pictures of this result, sent as MCP image content (field: the AICC output field it came from)",
        "items": { "type": "object", "properties": { "field": { "type": "string" }, "mime_type": { "type": "string" }, "bytes": { "type": "integer" } } }
    })
}

/// The `events` tool (RFC 0001: `events {since} -> {events, next, dropped}`).
fn events_tool() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "since": { "type": "integer", "minimum": 0, "description": "the `next` of the previous call; omit for every event still kept" },
            "topics": { "type": "array", "items": { "type": "string" }, "description": "only these topics (e.g. collision, command, governor, lease)" },
            "limit": { "type": "integer", "minimum": 1, "maximum": 200, "description": "at most this many events, oldest first (default 50)" }
        },
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "events": { "type": "array", "items": { "type": "object" } },
            "next": { "type": "integer", "description": "pass as `since` to get only newer events" },
            "dropped": { "type": "integer", "description": "events after `since` no longer kept (the adapter keeps the newest few hundred)" }
        },
        "required": ["events", "next", "dropped"]
    });
    let description = "The robot's events since a cursor, oldest first: collisions, command progress and completion, governor clamps and stops, lease changes, state changes. Call with no `since` first, then with the `next` it returned.";
    Tool::new(EVENTS_TOOL, description, Arc::new(as_object(input)))
        .with_raw_output_schema(Arc::new(as_object(output)))
        .with_annotations(ToolAnnotations::new().read_only(true).open_world(false))
}

fn as_object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        let message = json!({
            "capabilities": { "sensors": ["proprioception", "vision", "cancel"], "actuators": ["move", "say"], "generators": [], "granted": ["can_observe_world", "can_move_self", "can_communicate"] },
            "tools": [
                { "id": "proprioception", "class": "sensor", "capability": "can_observe_world", "description": "where the robot is", "input_schema": { "type": "object" }, "output_schema": { "type": "object", "properties": { "pose": {} } } },
                { "id": "vision", "class": "sensor", "capability": "can_observe_world", "description": "the camera",
                  "input_schema": { "type": "object", "properties": { "format": { "enum": ["jpeg", "png"] } } },
                  "output_schema": { "type": "object", "properties": { "jpeg_b64": {}, "png_b64": {}, "width": {} }, "required": ["width", "jpeg_b64"] } },
                { "id": "move", "class": "actuator", "capability": "can_move_self", "description": "drive", "limits": { "calls_per_minute": 30 }, "input_schema": { "properties": { "forward": { "type": "number" } } } },
                { "id": "say", "class": "actuator", "capability": "can_communicate", "description": "speak", "input_schema": { "type": "object" } },
                { "id": "cancel", "class": "sensor", "capability": "can_observe_world", "input_schema": { "type": "object" } },
                { "id": "depth", "class": "sensor", "capability": "can_observe_world", "input_schema": { "type": "object" } },
            ],
        });
        Manifest::from_message(message.as_object().unwrap()).unwrap()
    }

    fn named<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
        tools.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no tool {name}"))
    }

    #[test]
    fn the_usable_tools_are_listed_with_events_and_without_cancel_or_unavailable_ones() {
        let tools = mcp_tools(&manifest(), LlmOffer::default());
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            ["proprioception", "vision", "move", "say", "events"],
            "depth is not among the session's sensors; cancel is MCP's own"
        );
    }

    #[test]
    fn an_admin_session_is_offered_no_operator_tool_and_no_generator_unless_asked() {
        let ids = [
            "proprioception",
            "approvals_list",
            "move",
            "approve",
            "deny",
            "approval_mode",
            "hold",
            "record_start",
            "record_stop",
            "place_object",
        ];
        let tools: Vec<Value> = ids
            .iter()
            .map(|id| {
                let (class, capability) = match *id {
                    "proprioception" => ("sensor", "can_observe_world"),
                    "approvals_list" => ("sensor", "can_administer_bridge"),
                    "move" => ("actuator", "can_move_self"),
                    "place_object" => ("generator", "can_modify_world"),
                    _ => ("actuator", "can_administer_bridge"),
                };
                json!({ "id": id, "class": class, "capability": capability, "input_schema": { "type": "object" } })
            })
            .collect();
        let message = json!({
            "capabilities": { "sensors": ["proprioception", "approvals_list"], "actuators": ["move", "approve", "deny", "approval_mode", "hold", "record_start", "record_stop"], "generators": ["place_object"], "granted": ["can_observe_world", "can_move_self", "can_administer_bridge", "can_modify_world"] },
            "tools": tools,
        });
        let manifest = Manifest::from_message(message.as_object().unwrap()).unwrap();
        let names = |offer| {
            mcp_tools(&manifest, offer).into_iter().map(|t| t.name.into_owned()).collect::<Vec<_>>()
        };
        assert_eq!(
            names(LlmOffer::default()),
            ["proprioception", "move", "events"],
            "an admin token gives the LLM no operator tool"
        );
        assert_eq!(
            names(LlmOffer { generators: true }),
            ["proprioception", "move", "place_object", "events"]
        );
        assert!(
            !is_listed(&manifest, LlmOffer { generators: true }, "approve"),
            "and calling one by name is refused"
        );
    }

    #[test]
    fn sensors_are_read_only_and_moving_actuators_destructive() {
        let tools = mcp_tools(&manifest(), LlmOffer::default());
        let hints = |name| named(&tools, name).annotations.clone().unwrap();
        assert_eq!(hints("proprioception").read_only_hint, Some(true));
        let drive = hints("move");
        assert_eq!(
            (drive.read_only_hint, drive.destructive_hint, drive.idempotent_hint),
            (Some(false), Some(true), Some(false))
        );
        let speak = hints("say");
        assert_eq!((speak.read_only_hint, speak.destructive_hint), (Some(false), Some(false)));
        assert_eq!(annotations("stop", "actuator").idempotent_hint, Some(true));
    }

    #[test]
    fn schemas_are_objects_and_the_picture_fields_leave_the_output_schema() {
        let tools = mcp_tools(&manifest(), LlmOffer::default());
        let drive = named(&tools, "move");
        assert_eq!(
            drive.input_schema.get("type"),
            Some(&json!("object")),
            "a schema without a type is given one"
        );
        assert!(
            drive.description.as_deref().unwrap().contains("calls_per_minute"),
            "limits are told in the description"
        );
        let vision = named(&tools, "vision").output_schema.clone().unwrap();
        let properties = vision["properties"].as_object().unwrap();
        assert!(
            !properties.contains_key("jpeg_b64")
                && !properties.contains_key("png_b64")
                && properties.contains_key("images"),
            "{vision:?}"
        );
        assert_eq!(vision["required"], json!(["width"]));
        assert!(named(&tools, "vision")
            .description
            .as_deref()
            .unwrap()
            .ends_with("the other fields are in structuredContent."));
        assert!(!named(&tools, "proprioception")
            .description
            .as_deref()
            .unwrap()
            .contains("image content"));
        assert!(named(&tools, "say").output_schema.is_none(), "no output schema is invented");
    }

    #[test]
    fn names_mcp_does_not_allow_are_left_out_and_listed_names_are_known() {
        assert!(valid_tool_name("look_at") && valid_tool_name("a.b-c"));
        assert!(
            !valid_tool_name("")
                && !valid_tool_name("two words")
                && !valid_tool_name(&"x".repeat(129))
        );
        let manifest = manifest();
        let offer = LlmOffer::default();
        assert!(
            is_listed(&manifest, offer, "depth") && is_listed(&manifest, offer, "events"),
            "depth exists, though unavailable now"
        );
        assert!(!is_listed(&manifest, offer, "cancel") && !is_listed(&manifest, offer, "teleport"));
    }
}
