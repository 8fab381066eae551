//! `act` commands to AICC tool calls, free of I/O. A command's `type` is
//! an actuator tool id of the manifest; its generic fields (x, y, intArg,
//! stringArg, ...) map to the tool's input by the table below, in the
//! units it states. `stringArg` that parses as a JSON object is the
//! tool's complete input instead (other text is mapped as usual). Every mapped input is checked against the
//! tool's JSON Schema before the command is queued, and a problem names
//! the command field at fault.
use serde_json::{json, Map, Value};

use super::rpc::{kind_of, RpcError};
use crate::protocol::catalog::Catalog;
use crate::protocol::manifest::ToolClass;

/// The core's tool that halts all motion.
pub const STOP_TOOL: &str = "stop";
/// The command fields of the contract.
pub const COMMAND_FIELDS: [&str; 11] = [
    "type",
    "targetId",
    "itemId",
    "auxId",
    "x",
    "y",
    "screenX",
    "screenY",
    "intArg",
    "stringArg",
    "append",
];
/// Fields that carry a value for the tool (all but `type` and `append`).
const VALUE_FIELDS: [&str; 9] =
    ["targetId", "itemId", "auxId", "x", "y", "screenX", "screenY", "intArg", "stringArg"];
const IDENTIFIER_FIELDS: [&str; 3] = ["targetId", "itemId", "auxId"];
const INTEGER_FIELDS: [&str; 5] = ["x", "y", "screenX", "screenY", "intArg"];
/// Longest command type: an unknown type is accepted and echoed (twice)
/// in its retained completion event, which must stay within
/// [`super::state::MAX_EVENT_BYTES`].
pub const MAX_COMMAND_TYPE_BYTES: usize = 128;

/// How a command field becomes a tool input value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Convert {
    /// An integer times `factor` (e.g. millimetres to metres: 0.001).
    Scaled(f64),
    /// The string as it is.
    Text,
    /// "open" or "close": the gripper; any other string: a named arm pose.
    PoseOrGripper,
}

/// One command field of one action.
#[derive(Debug, Clone, Copy)]
pub struct FieldMapping {
    pub field: &'static str,
    /// The tool input it sets (a dotted path for nested inputs).
    pub input: &'static str,
    pub convert: Convert,
    /// The unit of the command field.
    pub unit: &'static str,
    pub meaning: &'static str,
}

/// The command fields an actuator tool takes.
#[derive(Debug, Clone, Copy)]
pub struct ActionMapping {
    pub tool: &'static str,
    pub fields: &'static [FieldMapping],
}

const fn field(
    field: &'static str,
    input: &'static str,
    convert: Convert,
    unit: &'static str,
    meaning: &'static str,
) -> FieldMapping {
    FieldMapping { field, input, convert, unit, meaning }
}

/// The mapping table (documented in docs/ai-control.md and advertised in the
/// observation). An actuator missing here still takes a JSON stringArg.
pub const ACTIONS: &[ActionMapping] = &[
    ActionMapping {
        tool: "move",
        fields: &[
            field("x", "forward", Convert::Scaled(0.001), "millimetres", "distance along the current heading; negative drives backwards"),
            field("y", "left", Convert::Scaled(0.001), "millimetres", "distance to the left of the heading; negative: right"),
            field("intArg", "speed_mps", Convert::Scaled(0.001), "millimetres per second", "cruise speed (default and maximum: the base's limit)"),
        ],
    },
    ActionMapping { tool: "turn", fields: &[field("intArg", "yaw", Convert::Scaled(1.0), "degrees", "rotation in place; positive = left (counter-clockwise)")] },
    ActionMapping {
        tool: "look_at",
        fields: &[
            field("x", "pan_deg", Convert::Scaled(1.0), "degrees", "head pan; positive turns the camera left"),
            field("y", "tilt_deg", Convert::Scaled(1.0), "degrees", "head tilt; positive looks down"),
            field("screenX", "pixel.u", Convert::Scaled(1.0), "pixels", "look at this camera pixel: column (with screenY)"),
            field("screenY", "pixel.v", Convert::Scaled(1.0), "pixels", "look at this camera pixel: row (with screenX)"),
        ],
    },
    ActionMapping { tool: "interact", fields: &[field("stringArg", "pose", Convert::PoseOrGripper, "name", "a named arm pose (home, ready, look, pick_front, stow), or \"open\"/\"close\" for the gripper")] },
    ActionMapping { tool: "say", fields: &[field("stringArg", "text", Convert::Text, "text", "what to say")] },
    ActionMapping { tool: "wait", fields: &[field("intArg", "seconds", Convert::Scaled(0.001), "milliseconds", "how long to let time pass (at most 60 s)")] },
    ActionMapping { tool: "stop", fields: &[field("stringArg", "reason", Convert::Text, "text", "why (shown to the other sessions)")] },
];

/// The table entry of `tool` (no fields for an actuator not in the table).
pub fn mapping(tool: &str) -> &'static [FieldMapping] {
    ACTIONS.iter().find(|a| a.tool == tool).map_or(&[], |a| a.fields)
}

/// A checked command, ready to queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    /// As sent.
    pub command_type: String,
    /// Queue behind what runs, instead of replacing it.
    pub append: bool,
    pub action: Action,
}

impl Command {
    /// Whether it calls the `stop` tool (which always replaces, at once).
    pub fn is_stop(&self) -> bool {
        matches!(&self.action, Action::Tool { tool, .. } if tool == STOP_TOOL)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// An actuator tool call with validated input.
    Tool { tool: String, input: Map<String, Value> },
    /// Not an actuator of the manifest: accepted, then completes with
    /// success false and the list of available actions.
    Unknown,
}

/// Checks an `act` command and maps it to a tool call. Wrong field types
/// and inputs the tool's schema refuses are errors naming the field.
pub fn parse_command(params: &Map<String, Value>, catalog: &Catalog) -> Result<Command, RpcError> {
    let command_type = match params.get("type") {
        Some(Value::String(t)) if t.len() > MAX_COMMAND_TYPE_BYTES => {
            return Err(RpcError::invalid_params(format!(
                "type is {} bytes long; at most {MAX_COMMAND_TYPE_BYTES}",
                t.len()
            )))
        }
        Some(Value::String(t)) if !t.is_empty() => t.clone(),
        Some(Value::String(_)) => {
            return Err(RpcError::invalid_params("Missing command type: type is an empty string"))
        }
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "type must be a non-empty string, got {}",
                kind_of(other)
            )))
        }
        None => {
            return Err(RpcError::invalid_params(
                "Missing command type: params.type must be a non-empty string",
            ))
        }
    };
    if let Some(unknown) = params.keys().find(|k| !COMMAND_FIELDS.contains(&k.as_str())) {
        return Err(RpcError::invalid_params(format!(
            "unknown command field '{unknown}' (command fields: {})",
            COMMAND_FIELDS.join(", ")
        )));
    }
    check_field_types(params)?;
    let append = params.get("append").and_then(Value::as_bool).unwrap_or(false);
    let is_actuator =
        catalog.descriptor(&command_type).is_some_and(|d| d.class == ToolClass::Actuator);
    if !is_actuator {
        return Ok(Command { command_type, append, action: Action::Unknown });
    }
    let tool = command_type.clone();
    let given: Vec<&str> =
        VALUE_FIELDS.iter().copied().filter(|f| params.contains_key(*f)).collect();
    let (input, source) = match json_input(params) {
        Some(input) => {
            if let Some(other) = given.iter().find(|f| **f != "stringArg") {
                return Err(RpcError::invalid_params(format!("stringArg holds {tool}'s complete input (a JSON object), so {other} must not also be given")));
            }
            (input, InputSource::Json)
        }
        None => (mapped_input(params, &tool, &given)?, InputSource::Fields),
    };
    let valid = catalog
        .validate(&tool, input)
        .map_err(|e| RpcError::invalid_params(name_the_field(&tool, source, &e.message)))?;
    Ok(Command { command_type, append, action: Action::Tool { tool, input: valid.input } })
}

#[derive(Clone, Copy)]
enum InputSource {
    Json,
    Fields,
}

fn check_field_types(params: &Map<String, Value>) -> Result<(), RpcError> {
    for (name, value) in params {
        let name = name.as_str();
        let ok = if IDENTIFIER_FIELDS.contains(&name) {
            value.is_string() || value.is_i64() || value.is_u64()
        } else if INTEGER_FIELDS.contains(&name) {
            value.is_i64() || value.is_u64()
        } else if name == "stringArg" {
            value.is_string()
        } else if name == "append" {
            value.is_boolean()
        } else {
            true
        };
        if !ok {
            let wanted = if IDENTIFIER_FIELDS.contains(&name) {
                "a string or an integer identifier"
            } else if INTEGER_FIELDS.contains(&name) {
                "an integer"
            } else if name == "stringArg" {
                "a string"
            } else {
                "a boolean"
            };
            return Err(RpcError::invalid_params(format!(
                "{name} must be {wanted}, got {} ({value})",
                kind_of(value)
            )));
        }
    }
    Ok(())
}

/// `stringArg` as the tool's complete input, when it parses as a JSON
/// object; any other text (`say "{hi}"`) is an ordinary value for the
/// field mapping.
fn json_input(params: &Map<String, Value>) -> Option<Map<String, Value>> {
    let text = params.get("stringArg").and_then(Value::as_str)?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(input)) => Some(input),
        _ => None,
    }
}

fn mapped_input(
    params: &Map<String, Value>,
    tool: &str,
    given: &[&str],
) -> Result<Map<String, Value>, RpcError> {
    let table = mapping(tool);
    let mut input = Map::new();
    for name in given {
        let Some(mapping) = table.iter().find(|m| m.field == *name) else {
            let fields: Vec<String> =
                table.iter().map(|m| format!("{} ({}, {})", m.field, m.input, m.unit)).collect();
            let fields = if fields.is_empty() { "none".to_string() } else { fields.join(", ") };
            let not_json = match params.get("stringArg").and_then(Value::as_str) {
                Some(text) if *name == "stringArg" && text.trim_start().starts_with('{') => {
                    match serde_json::from_str::<Value>(text) {
                        Err(e) => format!(" (this stringArg is not a JSON object: {e})"),
                        Ok(_) => String::new(),
                    }
                }
                _ => String::new(),
            };
            return Err(RpcError::invalid_params(format!("{tool} does not use {name}; its fields: {fields}; or stringArg holding a JSON object with its complete input{not_json}")));
        };
        let value = &params[*name];
        let converted = match mapping.convert {
            Convert::Scaled(factor) => json!(value.as_f64().expect("checked: an integer") * factor),
            Convert::Text => value.clone(),
            Convert::PoseOrGripper => match value.as_str() {
                Some(grip @ ("open" | "close")) => {
                    input.insert("gripper".into(), json!(grip));
                    continue;
                }
                _ => value.clone(),
            },
        };
        set_path(&mut input, mapping.input, converted);
    }
    Ok(input)
}

fn set_path(input: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            input.insert(path.to_string(), value);
        }
        Some((head, rest)) => {
            let child = input.entry(head.to_string()).or_insert_with(|| json!({}));
            if let Value::Object(child) = child {
                set_path(child, rest, value);
            }
        }
    }
}

/// Prefixes a schema error with the command field it came from.
fn name_the_field(tool: &str, source: InputSource, message: &str) -> String {
    if let InputSource::Json = source {
        return format!("stringArg (the complete input of {tool}): {message}");
    }
    let table = mapping(tool);
    let at_path = table.iter().find(|m| {
        message.contains(&format!("input.{}:", m.input))
            || (m.convert == Convert::PoseOrGripper && message.contains("input.gripper"))
    });
    if let Some(m) = at_path {
        return format!("{} ({} → {tool}.{}): {message}", m.field, m.unit, m.input);
    }
    let required = table.iter().find(|m| {
        message.contains(&format!(
            "\"{}\" is a required property",
            m.input.rsplit('.').next().unwrap_or(m.input)
        ))
    });
    if let Some(m) = required {
        return format!("{} is required by {tool} ({}, {}): {message}", m.field, m.meaning, m.unit);
    }
    format!("{tool}: {message}")
}

/// The actions and their fields, for the observation: every actuator of
/// the catalog, with the mapping table's fields and units.
pub fn describe(catalog: &Catalog) -> Value {
    let mut actions = Map::new();
    for descriptor in catalog.descriptors().filter(|d| d.class == ToolClass::Actuator) {
        let fields: Map<String, Value> = mapping(descriptor.id)
            .iter()
            .map(|m| {
                let scale = match m.convert {
                    Convert::Scaled(factor) => json!(factor),
                    Convert::Text | Convert::PoseOrGripper => Value::Null,
                };
                (m.field.to_string(), json!({ "input": m.input, "unit": m.unit, "scale": scale, "meaning": m.meaning }))
            })
            .collect();
        let input_fields: Vec<&String> = descriptor.input_schema["properties"]
            .as_object()
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        actions.insert(
            descriptor.id.to_string(),
            json!({
                "fields": fields,
                "stringArgJson": { "inputFields": input_fields, "note": "stringArg holding a JSON object is the tool's complete AICC input (its schema is in the AICC manifest); no other field may then be given" },
            }),
        );
    }
    Value::Object(actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai_control::rpc::ErrorCode;
    use crate::config::Config;
    use crate::tools::Registry;

    fn catalog() -> Catalog {
        Registry::new(&Config::default()).catalog().unwrap()
    }

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    fn tool_call(value: Value) -> (String, Value) {
        match parse_command(&params(value.clone()), &catalog())
            .unwrap_or_else(|e| panic!("{value}: {}", e.message))
            .action
        {
            Action::Tool { tool, input } => (tool, Value::Object(input)),
            Action::Unknown => panic!("{value}: unknown"),
        }
    }

    fn refused(value: Value) -> String {
        let error =
            parse_command(&params(value.clone()), &catalog()).expect_err(&value.to_string());
        assert_eq!(error.code, ErrorCode::InvalidParams, "{value}");
        error.message
    }

    #[test]
    fn each_mapping_produces_the_tool_input_in_its_units() {
        assert_eq!(
            tool_call(json!({"type": "move", "x": 500})),
            ("move".into(), json!({"forward": 0.5}))
        );
        assert_eq!(
            tool_call(json!({"type": "move", "x": -250, "y": 100, "intArg": 150})),
            ("move".into(), json!({"forward": -0.25, "left": 0.1, "speed_mps": 0.15}))
        );
        assert_eq!(
            tool_call(json!({"type": "turn", "intArg": 90})),
            ("turn".into(), json!({"yaw": 90.0}))
        );
        assert_eq!(
            tool_call(json!({"type": "look_at", "x": 20, "y": -10})),
            ("look_at".into(), json!({"pan_deg": 20.0, "tilt_deg": -10.0}))
        );
        assert_eq!(
            tool_call(json!({"type": "look_at", "screenX": 320, "screenY": 240})),
            ("look_at".into(), json!({"pixel": {"u": 320.0, "v": 240.0}}))
        );
        assert_eq!(
            tool_call(json!({"type": "interact", "stringArg": "ready"})),
            ("interact".into(), json!({"pose": "ready"}))
        );
        assert_eq!(
            tool_call(json!({"type": "interact", "stringArg": "close"})),
            ("interact".into(), json!({"gripper": "close"}))
        );
        assert_eq!(
            tool_call(json!({"type": "say", "stringArg": "hello"})),
            ("say".into(), json!({"text": "hello"}))
        );
        assert_eq!(
            tool_call(json!({"type": "wait", "intArg": 1500})),
            ("wait".into(), json!({"seconds": 1.5}))
        );
        assert_eq!(
            tool_call(json!({"type": "stop", "stringArg": "done"})),
            ("stop".into(), json!({"reason": "done"}))
        );
        assert_eq!(tool_call(json!({"type": "stop", "append": true})), ("stop".into(), json!({})));
    }

    #[test]
    fn the_reference_clients_shapes_are_accepted() {
        // argparse sends ids as strings, coordinates as integers, append as true.
        let command =
            parse_command(&params(json!({"type": "move", "x": 300, "append": true})), &catalog())
                .unwrap();
        assert!(command.append);
        let unknown = parse_command(&params(json!({"type": "pick", "targetId": "12", "itemId": "7", "auxId": "3", "x": 1, "stringArg": "s"})), &catalog()).unwrap();
        assert_eq!(unknown.action, Action::Unknown);
        assert!(!unknown.append);
    }

    #[test]
    fn a_json_string_arg_is_the_complete_input_and_excludes_mapped_fields() {
        assert_eq!(
            tool_call(json!({"type": "turn", "stringArg": "{\"yaw\": -45, \"pitch\": 10}"})),
            ("turn".into(), json!({"yaw": -45, "pitch": 10}))
        );
        let message = refused(json!({"type": "move", "x": 100, "stringArg": "{\"forward\": 0.1}"}));
        assert!(
            message.contains("stringArg") && message.contains("x must not also be given"),
            "{message}"
        );
        let message = refused(json!({"type": "move", "stringArg": "{\"forward\": "}));
        assert!(
            message.contains("move does not use stringArg")
                && message.contains("not a JSON object"),
            "{message}"
        );
        let message = refused(json!({"type": "move", "stringArg": "{\"forward\": \"far\"}"}));
        assert!(message.starts_with("stringArg") && message.contains("input.forward"), "{message}");
    }

    #[test]
    fn text_that_only_looks_like_json_is_mapped_as_text() {
        assert_eq!(
            tool_call(json!({"type": "say", "stringArg": "{hi}"})),
            ("say".into(), json!({"text": "{hi}"}))
        );
        assert_eq!(
            tool_call(json!({"type": "say", "stringArg": " {\"a\": 1"})),
            ("say".into(), json!({"text": " {\"a\": 1"}))
        );
        assert_eq!(
            tool_call(json!({"type": "stop", "stringArg": "[1, 2]"})),
            ("stop".into(), json!({"reason": "[1, 2]"})),
            "JSON but not an object"
        );
        assert_eq!(
            tool_call(json!({"type": "say", "stringArg": "{\"text\": \"hi\"}"})),
            ("say".into(), json!({"text": "hi"})),
            "a JSON object is the complete input"
        );
    }

    #[test]
    fn wrong_types_and_unused_or_unknown_fields_name_the_field() {
        for (command, needles) in [
            (json!({"type": "move", "x": 1.5}), vec!["x must be an integer", "a number"]),
            (json!({"type": "move", "x": "300"}), vec!["x must be an integer", "a string"]),
            (json!({"type": "say", "stringArg": 5}), vec!["stringArg must be a string"]),
            (json!({"type": "move", "x": 1, "append": "yes"}), vec!["append must be a boolean"]),
            (
                json!({"type": "move", "targetId": [1]}),
                vec!["targetId must be a string or an integer"],
            ),
            (json!({"type": "move", "forward": 0.3}), vec!["unknown command field 'forward'"]),
            (
                json!({"type": "turn", "x": 90}),
                vec!["turn does not use x", "intArg (yaw, degrees)"],
            ),
            (json!({"type": "move", "targetId": "door"}), vec!["move does not use targetId"]),
            (json!({"type": ""}), vec!["Missing command type"]),
            (json!({"x": 3}), vec!["Missing command type"]),
            (json!({"type": 7}), vec!["type must be a non-empty string"]),
            (
                json!({"type": "t".repeat(MAX_COMMAND_TYPE_BYTES + 1)}),
                vec!["type is 129 bytes long; at most 128"],
            ),
        ] {
            let message = refused(command.clone());
            for needle in needles {
                assert!(message.contains(needle), "{command}: {message}");
            }
        }
    }

    #[test]
    fn inputs_the_schema_refuses_name_the_command_field() {
        let message = refused(json!({"type": "move", "x": 60000}));
        assert!(
            message.starts_with("x (millimetres")
                && message.contains("move.forward")
                && message.contains("maximum"),
            "{message}"
        );
        let message = refused(json!({"type": "turn"}));
        assert!(message.starts_with("intArg is required by turn"), "{message}");
        let message = refused(json!({"type": "look_at", "screenX": 10}));
        assert!(message.starts_with("screenY is required by look_at"), "{message}");
        let message = refused(json!({"type": "wait", "intArg": 0}));
        assert!(message.starts_with("intArg (milliseconds"), "{message}");
        let message = refused(json!({"type": "say", "stringArg": ""}));
        assert!(message.starts_with("stringArg (text"), "{message}");
    }

    #[test]
    fn unknown_and_sensor_types_are_not_actions() {
        for kind in ["teleport", "proprioception", "Move"] {
            let command = parse_command(&params(json!({"type": kind})), &catalog()).unwrap();
            assert_eq!(command.action, Action::Unknown, "{kind}");
        }
        let longest = "t".repeat(MAX_COMMAND_TYPE_BYTES);
        assert_eq!(
            parse_command(&params(json!({"type": longest})), &catalog()).unwrap().action,
            Action::Unknown,
            "the longest type is still accepted"
        );
        // Field types are still checked for an unknown type.
        assert!(refused(json!({"type": "teleport", "x": 0.5})).contains("x must be an integer"));
    }

    #[test]
    fn every_actuator_is_described_and_every_table_entry_is_an_actuator() {
        let catalog = catalog();
        let described = describe(&catalog);
        for action in ACTIONS {
            assert!(
                described.get(action.tool).is_some(),
                "{} is in the table but not an actuator of the catalog",
                action.tool
            );
            for field in action.fields {
                assert!(VALUE_FIELDS.contains(&field.field), "{}: {}", action.tool, field.field);
                assert_eq!(described[action.tool]["fields"][field.field]["unit"], field.unit);
            }
        }
        assert_eq!(described["move"]["fields"]["x"]["input"], "forward");
        assert_eq!(described["move"]["fields"]["x"]["scale"], 0.001);
        assert!(described["turn"]["stringArgJson"]["inputFields"]
            .as_array()
            .unwrap()
            .contains(&json!("pitch")));
    }
}
