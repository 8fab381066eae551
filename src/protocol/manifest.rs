//! The session manifest (AICC sections 3 and 7): session metadata and the
//! tools an agent may call. It never carries world state (section 9).
use serde_json::{json, Value};

/// The three tool classes of section 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    Sensor,
    Actuator,
    Generator,
}

impl ToolClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolClass::Sensor => "sensor",
            ToolClass::Actuator => "actuator",
            ToolClass::Generator => "generator",
        }
    }
}

/// What the manifest says about one tool.
#[derive(Debug, Clone)]
pub struct ToolDescriptor {
    pub id: &'static str,
    pub class: ToolClass,
    pub description: &'static str,
    /// The reserved capability (section 7) a session needs to call it.
    pub capability: &'static str,
    pub input_schema: Value,
    pub output_schema: Value,
}

impl ToolDescriptor {
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "class": self.class.as_str(),
            "description": self.description,
            "capability": self.capability,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
        })
    }
}

/// The session manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub tick_rate_hz: f64,
    pub world_name: String,
    pub tools: Vec<ToolDescriptor>,
}

impl Manifest {
    pub fn tool(&self, id: &str) -> Option<&ToolDescriptor> {
        self.tools.iter().find(|tool| tool.id == id)
    }

    /// The manifest fields of `session_init` and of a manifest reply.
    pub fn to_json(&self) -> Value {
        let ids_of = |class: ToolClass| -> Vec<&str> {
            self.tools.iter().filter(|t| t.class == class).map(|t| t.id).collect()
        };
        let mut capabilities: Vec<&str> = self.tools.iter().map(|t| t.capability).collect();
        capabilities.sort_unstable();
        capabilities.dedup();
        json!({
            "tick_rate_hz": self.tick_rate_hz,
            "tick_mode": "fixed",
            "world": { "name": self.world_name, "kind": "3d" },
            "capabilities": {
                "sensors": ids_of(ToolClass::Sensor),
                "actuators": ids_of(ToolClass::Actuator),
                "generators": ids_of(ToolClass::Generator),
                "granted": capabilities,
            },
            "tools": self.tools.iter().map(ToolDescriptor::to_json).collect::<Vec<_>>(),
        })
    }
}
