//! Reading typed values out of a tool's JSON input, with errors that name
//! the field and the rule it broke.
use serde_json::{Map, Value};

use crate::protocol::message::json_type_name;
use crate::protocol::AiccError;

/// A finite number within `[min, max]`, or None when absent.
pub fn optional_number(
    input: &Map<String, Value>,
    field: &str,
    min: f64,
    max: f64,
) -> Result<Option<f64>, AiccError> {
    let Some(value) = input.get(field) else { return Ok(None) };
    let number = value.as_f64().ok_or_else(|| {
        AiccError::invalid_input(format!(
            "input.{field} must be a number, got {}",
            json_type_name(value)
        ))
    })?;
    if !number.is_finite() {
        return Err(AiccError::invalid_input(format!("input.{field} must be finite")));
    }
    if number < min || number > max {
        return Err(AiccError::invalid_input(format!(
            "input.{field} = {number} is outside [{min}, {max}]"
        )));
    }
    Ok(Some(number))
}

/// Rejects fields the tool does not know (tools whose schema sets
/// additionalProperties: false).
pub fn reject_unknown_fields(input: &Map<String, Value>, known: &[&str]) -> Result<(), AiccError> {
    match input.keys().find(|key| !known.contains(&key.as_str())) {
        Some(key) => Err(AiccError::invalid_input(format!(
            "input.{key} is not a field of this tool (known: {})",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

/// An integer within `[min, max]`, or None when absent; errors name the field.
pub(crate) fn optional_u32(
    input: &Map<String, Value>,
    field: &str,
    min: u32,
    max: u32,
) -> Result<Option<u32>, AiccError> {
    let Some(number) = optional_number(input, field, f64::from(min), f64::from(max))? else {
        return Ok(None);
    };
    if number.fract() != 0.0 {
        return Err(AiccError::invalid_input(format!(
            "input.{field} must be an integer, got {number}"
        )));
    }
    Ok(Some(number as u32))
}

/// A boolean, or `default` when absent.
pub(crate) fn optional_bool(
    input: &Map<String, Value>,
    field: &str,
    default: bool,
) -> Result<bool, AiccError> {
    match input.get(field) {
        None => Ok(default),
        Some(Value::Bool(value)) => Ok(*value),
        Some(other) => {
            Err(AiccError::invalid_input(format!("input.{field} must be a boolean, got {other}")))
        }
    }
}

/// A tool input from a JSON object literal, for tests.
#[cfg(test)]
pub fn input_map(value: Value) -> Map<String, Value> {
    value.as_object().expect("a tool input is a JSON object").clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_are_checked_for_type_and_range_with_the_field_named() {
        let input = input_map(json!({"forward": 0.5, "bad": "x", "far": 1e300}));
        assert_eq!(optional_number(&input, "forward", -5.0, 5.0).unwrap(), Some(0.5));
        assert_eq!(optional_number(&input, "absent", -5.0, 5.0).unwrap(), None);
        assert!(optional_number(&input, "bad", -5.0, 5.0)
            .unwrap_err()
            .message
            .contains("input.bad must be a number, got string"));
        assert!(optional_number(&input, "far", -5.0, 5.0)
            .unwrap_err()
            .message
            .contains("outside [-5, 5]"));
        // serde_json maps are ordered by key: "bad" is the first unknown one.
        assert!(reject_unknown_fields(&input, &["forward"])
            .unwrap_err()
            .message
            .starts_with("input.bad is not a field"));
        assert!(reject_unknown_fields(&input, &["forward", "bad", "far"]).is_ok());
    }
}
