//! Tool descriptors as the session manifest (AICC sections 3 and 7) lists
//! them. The manifest itself is built by the core; it never carries world
//! state (section 9).
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
    /// Extra input fields are errors rather than ignored (section 11).
    pub strict_input: bool,
    /// `limits.calls_per_minute` (section 12), for expensive or risky tools.
    pub calls_per_minute: Option<u32>,
    pub input_schema: Value,
    pub output_schema: Value,
}

impl ToolDescriptor {
    pub fn to_json(&self) -> Value {
        let mut tool = json!({
            "id": self.id,
            "class": self.class.as_str(),
            "description": self.description,
            "capability": self.capability,
            "strict_input": self.strict_input,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
        });
        if let Some(calls_per_minute) = self.calls_per_minute {
            tool["limits"] = json!({ "calls_per_minute": calls_per_minute });
        }
        tool
    }
}
