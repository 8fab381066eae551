//! The session manifest as the agent uses it: which tools exist, and which
//! this session may call (AICC sections 3 and 7).
use serde_json::{Map, Value};

/// One tool as the manifest describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    pub id: String,
    /// `sensor`, `actuator` or `generator`.
    pub class: String,
    /// The reserved capability needed to call it, when the bridge names one.
    pub capability: Option<String>,
    pub strict_input: bool,
    pub limits: Option<Value>,
}

/// Tools that decide for the operator, by name: never handed to an LLM
/// even by a bridge that names another capability for them.
pub const OPERATOR_TOOLS: [&str; 7] =
    ["approve", "deny", "approval_mode", "approvals_list", "hold", "record_start", "record_stop"];

/// What a client that hands tools to an LLM (the MCP adapter, the agent
/// loop) offers it: never the operator's tools (approvals, approval mode,
/// the hold, recording: capability `can_administer_bridge`), whatever the
/// scope of the token it holds; generators (world edits, a simulator's
/// `place_object`) only when asked (`--offer-generators`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LlmOffer {
    pub generators: bool,
}

impl LlmOffer {
    /// Why `tool` is not offered, or None when it is.
    pub fn withheld(&self, tool: &ToolInfo) -> Option<&'static str> {
        if OPERATOR_TOOLS.contains(&tool.id.as_str())
            || tool.capability.as_deref() == Some("can_administer_bridge")
        {
            return Some(
                "it is an operator's tool: decisions are the operator's, never an agent's",
            );
        }
        if tool.class == "generator" && !self.generators {
            return Some("it edits the world (a generator); offered only with --offer-generators");
        }
        None
    }
}

/// How a manifest breaks the protocol (the client fails closed).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ManifestError {
    /// No `tools` array.
    #[error("the manifest has no 'tools' array")]
    NoTools,
    /// A tool without a non-empty string `id`.
    #[error("a manifest tool has no string 'id': {tool}")]
    ToolWithoutId { tool: Value },
    /// A tool without a string `class`.
    #[error("manifest tool '{id}' has no string 'class'")]
    ToolWithoutClass { id: String },
    /// No `capabilities` object.
    #[error("the manifest has no 'capabilities' object")]
    NoCapabilities,
    /// `capabilities.sensors` (or actuators, generators) that is not a list of ids.
    #[error("capabilities.{class} must be a list of tool ids")]
    ClassNotAList { class: &'static str },
    /// `capabilities.granted` that is not a list of names.
    #[error("capabilities.granted must be a list of capability names")]
    GrantedNotAList,
}

/// Why this session may not call a tool (refused locally, nothing sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotPermitted {
    /// The manifest has no such tool.
    #[error("tool '{tool}' is not in the manifest")]
    NotInManifest { tool: String },
    /// The tool's capability is not among those granted.
    #[error("tool '{tool}' needs capability '{capability}', which this session is not granted (granted: {})", if granted.is_empty() { "none".to_string() } else { granted.join(", ") })]
    NotGranted { tool: String, capability: String, granted: Vec<String> },
    /// The tool is not listed under its class in `capabilities`.
    #[error("tool '{tool}' is not among this session's {class}s in capabilities (capability '{}'): not granted, or its data source is unavailable", capability.as_deref().unwrap_or("(none named)"))]
    NotUsable { tool: String, class: String, capability: Option<String> },
}

/// The parts of a manifest that decide what the agent may do.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    raw: Map<String, Value>,
    tools: Vec<ToolInfo>,
    /// `capabilities.granted`; `None` when the bridge does not list it (an
    /// empty list grants nothing).
    granted: Option<Vec<String>>,
}

impl Manifest {
    /// Reads a `session_init` (or a heartbeat's `manifest_update`); `Err`
    /// names what is missing, a protocol violation.
    pub fn from_message(message: &Map<String, Value>) -> Result<Self, ManifestError> {
        let tools = message.get("tools").and_then(Value::as_array).ok_or(ManifestError::NoTools)?;
        let tools = tools.iter().map(tool_info).collect::<Result<Vec<_>, _>>()?;
        let capabilities = message
            .get("capabilities")
            .and_then(Value::as_object)
            .ok_or(ManifestError::NoCapabilities)?;
        for class in ["sensors", "actuators", "generators"] {
            if let Some(list) = capabilities.get(class) {
                string_list(list).ok_or(ManifestError::ClassNotAList { class })?;
            }
        }
        let granted = match capabilities.get("granted") {
            None => None,
            Some(list) => Some(string_list(list).ok_or(ManifestError::GrantedNotAList)?),
        };
        Ok(Self { raw: message.clone(), tools, granted })
    }

    /// The manifest as the bridge sent it.
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    pub fn tools(&self) -> &[ToolInfo] {
        &self.tools
    }

    pub fn tool(&self, id: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|t| t.id == id)
    }

    /// The tools this session lists under its class in `capabilities`.
    fn usable(&self, class: &str) -> Vec<String> {
        let key = match class {
            "sensor" => "sensors",
            "actuator" => "actuators",
            "generator" => "generators",
            _ => return Vec::new(),
        };
        self.raw
            .get("capabilities")
            .and_then(|c| c.get(key))
            .and_then(string_list)
            .unwrap_or_default()
    }

    /// Whether this session may call the tool (for the `tools` table).
    pub fn is_granted(&self, id: &str) -> bool {
        self.permits(id).is_ok()
    }

    /// The tool, if this session may call it; otherwise why not (naming the
    /// tool and the missing capability, or "not in the manifest"). A tool
    /// must be listed under its class in `capabilities`, and its capability,
    /// when it names one and the bridge lists grants, must be granted.
    pub fn permits(&self, id: &str) -> Result<&ToolInfo, NotPermitted> {
        let tool =
            self.tool(id).ok_or_else(|| NotPermitted::NotInManifest { tool: id.to_string() })?;
        if let (Some(capability), Some(granted)) = (&tool.capability, &self.granted) {
            if !granted.contains(capability) {
                return Err(NotPermitted::NotGranted {
                    tool: id.to_string(),
                    capability: capability.clone(),
                    granted: granted.clone(),
                });
            }
        }
        if !self.usable(&tool.class).contains(&tool.id) {
            return Err(NotPermitted::NotUsable {
                tool: id.to_string(),
                class: tool.class.clone(),
                capability: tool.capability.clone(),
            });
        }
        Ok(tool)
    }

    /// Ids of every tool, for completion.
    pub fn tool_ids(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.id.clone()).collect()
    }
}

fn string_list(value: &Value) -> Option<Vec<String>> {
    value.as_array()?.iter().map(|v| v.as_str().map(str::to_owned)).collect()
}

fn tool_info(value: &Value) -> Result<ToolInfo, ManifestError> {
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| ManifestError::ToolWithoutId { tool: value.clone() })?;
    let class = value
        .get("class")
        .and_then(Value::as_str)
        .ok_or_else(|| ManifestError::ToolWithoutClass { id: id.to_string() })?;
    Ok(ToolInfo {
        id: id.into(),
        class: class.into(),
        capability: value.get("capability").and_then(Value::as_str).map(str::to_owned),
        strict_input: value.get("strict_input").and_then(Value::as_bool).unwrap_or(false),
        limits: value.get("limits").cloned(),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A sensors-only session whose manifest still lists `move`.
    pub(crate) fn sensors_only() -> Map<String, Value> {
        let value = json!({
            "capabilities": { "sensors": ["proprioception", "vision"], "actuators": [], "generators": [], "granted": ["can_observe_world"] },
            "tools": [
                { "id": "proprioception", "class": "sensor", "capability": "can_observe_world", "strict_input": false },
                { "id": "vision", "class": "sensor", "capability": "can_observe_world", "strict_input": true, "limits": { "calls_per_minute": 60 } },
                { "id": "move", "class": "actuator", "capability": "can_move_self", "strict_input": true },
            ],
        });
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_granted_sensor_is_permitted() {
        let manifest = Manifest::from_message(&sensors_only()).unwrap();
        assert_eq!(
            manifest.permits("vision").unwrap().limits,
            Some(json!({ "calls_per_minute": 60 }))
        );
        assert!(manifest.is_granted("proprioception"));
    }

    #[test]
    fn an_ungranted_tool_is_refused_naming_the_missing_capability() {
        let manifest = Manifest::from_message(&sensors_only()).unwrap();
        let why = manifest.permits("move").unwrap_err().to_string();
        assert!(why.contains("'move'") && why.contains("can_move_self"), "{why}");
        assert!(!manifest.is_granted("move"));
    }

    #[test]
    fn a_refusal_names_the_tool_and_what_is_missing_as_fields() {
        let manifest = Manifest::from_message(&sensors_only()).unwrap();
        assert_eq!(
            manifest.permits("move").unwrap_err(),
            NotPermitted::NotGranted {
                tool: "move".into(),
                capability: "can_move_self".into(),
                granted: vec!["can_observe_world".into()]
            }
        );
        let mut message = sensors_only();
        message["capabilities"]["granted"] = json!("all");
        assert_eq!(Manifest::from_message(&message).unwrap_err(), ManifestError::GrantedNotAList);
    }

    #[test]
    fn a_tool_outside_the_manifest_is_refused_as_such() {
        let manifest = Manifest::from_message(&sensors_only()).unwrap();
        assert_eq!(
            manifest.permits("teleport").unwrap_err().to_string(),
            "tool 'teleport' is not in the manifest"
        );
    }

    #[test]
    fn a_tool_missing_from_its_class_list_is_refused_even_with_its_capability_granted() {
        let mut message = sensors_only();
        message["capabilities"]["sensors"] = json!(["proprioception"]);
        let manifest = Manifest::from_message(&message).unwrap();
        let why = manifest.permits("vision").unwrap_err().to_string();
        assert!(why.contains("not among this session's sensors"), "{why}");
    }

    #[test]
    fn an_empty_grant_list_grants_nothing_and_a_missing_one_leaves_the_class_lists_to_decide() {
        let mut message = sensors_only();
        message["capabilities"]["granted"] = json!([]);
        let why =
            Manifest::from_message(&message).unwrap().permits("vision").unwrap_err().to_string();
        assert!(
            why.contains("needs capability 'can_observe_world'")
                && why.ends_with("(granted: none)"),
            "{why}"
        );
        message["capabilities"].as_object_mut().unwrap().remove("granted");
        assert!(Manifest::from_message(&message).unwrap().permits("vision").is_ok());
    }

    #[test]
    fn a_manifest_without_tools_or_capabilities_is_a_violation() {
        let mut message = sensors_only();
        message.remove("tools");
        assert!(Manifest::from_message(&message).unwrap_err().to_string().contains("'tools'"));
        let mut message = sensors_only();
        message["capabilities"]["actuators"] = json!("move");
        assert!(Manifest::from_message(&message)
            .unwrap_err()
            .to_string()
            .contains("capabilities.actuators"));
    }
}
