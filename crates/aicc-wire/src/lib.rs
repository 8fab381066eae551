//! AICC on the wire, shared by the bridge and its clients: newline-delimited
//! JSON framed with a hard line limit ([`codec`]), the protocol name, and
//! the JSON type names error messages use; and the round-trip measurement
//! the benchmarks of both sides share, with its floor ([`bench`]), and the
//! blocking client their tests and benchmarks drive the bridge with
//! ([`blocking`]).
pub mod bench;
pub mod blocking;
pub mod codec;
pub mod recording;

use serde_json::Value;

/// The protocol string this project speaks.
pub const PROTOCOL: &str = "aicc/0.1";

/// The JSON Schema name of a value's type, for messages that say what was
/// expected and what came.
pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
