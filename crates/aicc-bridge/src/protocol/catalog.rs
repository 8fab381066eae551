//! The tools of a manifest with their input schemas compiled once, so that
//! every tool_call input is checked by a real JSON Schema validator before
//! any tool runs (AICC section 13, rule 2).
use serde_json::{Map, Value};

use super::error::AiccError;
use super::manifest::ToolDescriptor;

struct Entry {
    descriptor: ToolDescriptor,
    validator: jsonschema::Validator,
    /// Top-level properties the schema declares; others are ignored (and
    /// reported) unless the tool is `strict_input` (section 11).
    declared: Vec<String>,
}

/// Checked input, ready for the tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidInput {
    pub input: Map<String, Value>,
    /// Extra fields dropped from a non-strict tool's input.
    pub ignored_fields: Vec<String>,
}

pub struct Catalog {
    entries: Vec<Entry>,
}

/// Why a catalog cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A tool's input schema is not a valid JSON Schema: a bug in the tool.
    #[error("tool '{tool}': input schema does not compile: {source}")]
    SchemaDoesNotCompile { tool: String, source: Box<jsonschema::ValidationError<'static>> },
}

impl Catalog {
    /// Compiles every input schema; a schema that does not compile is a bug
    /// in the tool, reported at start-up rather than at call time.
    pub fn new(descriptors: Vec<ToolDescriptor>) -> Result<Self, CatalogError> {
        let entries = descriptors
            .into_iter()
            .map(|descriptor| {
                let validator =
                    jsonschema::validator_for(&descriptor.input_schema).map_err(|source| {
                        CatalogError::SchemaDoesNotCompile {
                            tool: descriptor.id.to_string(),
                            source: Box::new(source),
                        }
                    })?;
                let declared = descriptor
                    .input_schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                Ok(Entry { descriptor, validator, declared })
            })
            .collect::<Result<_, CatalogError>>()?;
        Ok(Self { entries })
    }

    pub fn descriptor(&self, tool: &str) -> Option<&ToolDescriptor> {
        self.entries.iter().find(|e| e.descriptor.id == tool).map(|e| &e.descriptor)
    }

    pub fn descriptors(&self) -> impl Iterator<Item = &ToolDescriptor> {
        self.entries.iter().map(|e| &e.descriptor)
    }

    /// Validates `input` for `tool` (which must exist). The error names the
    /// failing path, e.g. `input.forward`.
    pub fn validate(
        &self,
        tool: &str,
        mut input: Map<String, Value>,
    ) -> Result<ValidInput, AiccError> {
        let entry = self
            .entries
            .iter()
            .find(|e| e.descriptor.id == tool)
            .ok_or_else(|| AiccError::invalid_input(format!("unknown tool '{tool}'")))?;
        let undeclared: Vec<String> =
            input.keys().filter(|k| !entry.declared.contains(k)).cloned().collect();
        if entry.descriptor.strict_input {
            if let Some(field) = undeclared.first() {
                return Err(AiccError::invalid_input(format!(
                    "input.{field}: not a field of '{tool}', whose input is strict (fields: {})",
                    entry.declared.join(", ")
                )));
            }
        } else {
            for field in &undeclared {
                input.remove(field);
            }
        }
        let ignored_fields = if entry.descriptor.strict_input { Vec::new() } else { undeclared };
        let value = Value::Object(input);
        let problems: Vec<String> =
            entry.validator.iter_errors(&value).take(3).map(|error| describe(&error)).collect();
        if !problems.is_empty() {
            return Err(AiccError::invalid_input(problems.join("; ")));
        }
        let Value::Object(input) = value else { unreachable!("built as an object above") };
        Ok(ValidInput { input, ignored_fields })
    }
}

/// `input.a.b: <what is wrong>`, from a validator error.
fn describe(error: &jsonschema::ValidationError) -> String {
    let pointer = error.instance_path().to_string();
    let path: String =
        pointer.split('/').filter(|s| !s.is_empty()).map(|s| format!(".{s}")).collect();
    format!("input{path}: {}", error.masked())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::manifest::ToolClass;
    use serde_json::json;

    fn catalog(strict: bool) -> Catalog {
        Catalog::new(vec![ToolDescriptor {
            id: "move",
            class: ToolClass::Actuator,
            description: "",
            capability: "can_move_self",
            strict_input: strict,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": { "forward": { "type": "number", "minimum": -5, "maximum": 5 }, "target": { "type": "object", "properties": { "x": { "type": "number" } } } },
                "required": ["forward"],
                "additionalProperties": false
            }),
            output_schema: json!({}),
        }])
        .unwrap()
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn errors_name_the_failing_path() {
        let c = catalog(true);
        let err = c.validate("move", map(json!({"forward": "far"}))).unwrap_err();
        assert!(err.message.starts_with("input.forward:"), "{}", err.message);
        let err = c.validate("move", map(json!({"forward": 9}))).unwrap_err();
        assert!(
            err.message.contains("input.forward") && err.message.contains('5'),
            "{}",
            err.message
        );
        let err = c.validate("move", map(json!({"forward": 1, "target": {"x": "a"}}))).unwrap_err();
        assert!(err.message.starts_with("input.target.x:"), "{}", err.message);
        let err = c.validate("move", map(json!({}))).unwrap_err();
        assert!(err.message.contains("forward"), "{}", err.message);
    }

    #[test]
    fn extra_fields_are_ignored_unless_strict() {
        let lenient =
            catalog(false).validate("move", map(json!({"forward": 1, "speed": 3}))).unwrap();
        assert_eq!(lenient.ignored_fields, vec!["speed".to_string()]);
        assert!(!lenient.input.contains_key("speed"));
        let err =
            catalog(true).validate("move", map(json!({"forward": 1, "speed": 3}))).unwrap_err();
        assert!(err.message.contains("speed"), "{}", err.message);
    }

    #[test]
    fn a_schema_that_does_not_compile_is_reported_with_the_tool() {
        let mut bad = catalog(true).descriptor("move").unwrap().clone();
        bad.input_schema = json!({"type": 12});
        let err = Catalog::new(vec![bad]).err().unwrap();
        assert!(err.to_string().contains("tool 'move'"), "{err}");
        assert!(
            matches!(&err, CatalogError::SchemaDoesNotCompile { tool, .. } if tool == "move"),
            "{err}"
        );
    }
}
