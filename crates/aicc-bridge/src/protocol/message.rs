//! AICC messages (spec section 2): decoding what an agent sends, building
//! what the bridge sends. Decoding never panics; every problem is an
//! [`AiccError`] that names the field at fault.
use serde_json::{json, Map, Value};

use super::error::{AiccError, ErrorCode};

pub use aicc_wire::{json_type_name, PROTOCOL};
const PROTOCOL_MAJOR: u64 = 0;

/// A message from the agent, decoded and checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    ToolCall(ToolCall),
    /// Re-fetch the manifest; as the first line of a connection it opens a
    /// session (and authenticates, when tokens are configured).
    ManifestRequest {
        message_id: Option<String>,
        opening: Opening,
    },
    /// Re-attach to a session, replaying events after `cursor`.
    SessionResume {
        message_id: Option<String>,
        session_id: String,
        cursor: u64,
        opening: Opening,
    },
    Heartbeat {
        message_id: Option<String>,
    },
    SessionClose {
        message_id: Option<String>,
    },
}

/// A `tool_call`: which tool to run with what, and how the agent names it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub message_id: Option<String>,
    pub call_id: String,
    pub tool: String,
    pub input: Map<String, Value>,
    pub options: CallOptions,
}

/// Optional fields of a tool_call (extensions, documented in docs/protocol.md).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CallOptions {
    /// `deadline_ms`: the call fails with `timeout` if not done by then.
    pub deadline_ms: Option<u64>,
    /// `idempotency_key`: a retried call with the same key is answered with
    /// the first call's result instead of running again.
    pub idempotency_key: Option<String>,
}

/// The optional fields with which an agent opens or adjusts a session.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Opening {
    /// `auth.token`: needed when the bridge has tokens configured.
    pub token: Option<String>,
    /// `agent_model.class` (AICC section 7).
    pub agent_class: Option<String>,
    /// `subscribe`: the event topics wanted (replaces the default set).
    pub subscribe: Option<Vec<String>>,
}

/// The model classes of AICC section 7.
pub(crate) const AGENT_CLASSES: &[&str] =
    &["edge_small", "edge_medium", "cloud_medium", "cloud_large"];

/// What could be recovered from a line that failed to decode, so that the
/// error can still be correlated.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Correlation {
    pub message_id: Option<String>,
    pub call_id: Option<String>,
}

/// A decoded message and the envelope's `session_id`, if it named one.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub inbound: Inbound,
    pub session_id: Option<String>,
}

/// Decodes one NDJSON line.
pub fn decode(line: &[u8]) -> Result<Decoded, (AiccError, Correlation)> {
    let text = std::str::from_utf8(line).map_err(|e| {
        (
            AiccError::invalid_input(format!(
                "line is not valid UTF-8 (at byte {})",
                e.valid_up_to()
            )),
            Correlation::default(),
        )
    })?;
    let value: Value = serde_json::from_str(text).map_err(|e| {
        (AiccError::invalid_input(format!("line is not valid JSON: {e}")), Correlation::default())
    })?;
    let Value::Object(mut object) = value else {
        return Err((
            AiccError::invalid_input("message must be a JSON object"),
            Correlation::default(),
        ));
    };
    let correlation = Correlation {
        message_id: object.get("message_id").and_then(Value::as_str).map(str::to_owned),
        call_id: object.get("call_id").and_then(Value::as_str).map(str::to_owned),
    };
    let session_id = object
        .get("session_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let inbound = decode_object(&mut object).map_err(|e| (e, correlation))?;
    Ok(Decoded { inbound, session_id })
}

fn decode_object(object: &mut Map<String, Value>) -> Result<Inbound, AiccError> {
    check_protocol(object.get("protocol"))?;
    let message_id = optional_string(object, "message_id")?;
    let kind = required_string(object, "type")?;
    match kind.as_str() {
        "tool_call" => {
            let call_id = required_string(object, "call_id")?;
            if call_id.is_empty() {
                return Err(AiccError::invalid_input("field 'call_id' must not be empty"));
            }
            let tool = required_string(object, "tool")?;
            let input = match object.remove("input") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(map)) => map,
                Some(other) => {
                    return Err(AiccError::invalid_input(format!(
                        "field 'input' must be an object, got {}",
                        json_type_name(&other)
                    )))
                }
            };
            let deadline_ms = match object.get("deadline_ms") {
                None | Some(Value::Null) => None,
                Some(value) => Some(value.as_u64().filter(|ms| *ms > 0).ok_or_else(|| AiccError::invalid_input(format!("field 'deadline_ms' must be a positive integer (milliseconds), got {value}")))?),
            };
            let idempotency_key = optional_string(object, "idempotency_key")?;
            if idempotency_key.as_ref().is_some_and(|k| k.is_empty() || k.len() > 128) {
                return Err(AiccError::invalid_input(
                    "field 'idempotency_key' must be 1 to 128 characters",
                ));
            }
            Ok(Inbound::ToolCall(ToolCall {
                message_id,
                call_id,
                tool,
                input,
                options: CallOptions { deadline_ms, idempotency_key },
            }))
        }
        "manifest_request" => {
            Ok(Inbound::ManifestRequest { message_id, opening: opening(object)? })
        }
        "session_resume" => {
            let session_id = required_string(object, "session_id")?;
            let cursor = match object.get("cursor") {
                None | Some(Value::Null) => 0,
                Some(value) => value.as_u64().ok_or_else(|| AiccError::invalid_input(format!("field 'cursor' must be a non-negative integer (the last event seq seen), got {value}")))?,
            };
            Ok(Inbound::SessionResume { message_id, session_id, cursor, opening: opening(object)? })
        }
        "heartbeat" => Ok(Inbound::Heartbeat { message_id }),
        "session_close" => Ok(Inbound::SessionClose { message_id }),
        "session_init" | "tool_result" | "event" | "error" => Err(AiccError::invalid_input(
            format!("message type '{kind}' is sent by the bridge, not by the agent"),
        )),
        other => Err(AiccError::invalid_input(format!("unknown message type '{other}'"))),
    }
}

fn opening(object: &Map<String, Value>) -> Result<Opening, AiccError> {
    let token = match object.get("auth") {
        None | Some(Value::Null) => None,
        Some(Value::Object(auth)) => Some(
            required_string(auth, "token")
                .map_err(|e| AiccError::invalid_input(format!("auth: {}", e.message)))?,
        ),
        Some(other) => {
            return Err(AiccError::invalid_input(format!(
                "field 'auth' must be an object {{\"token\": ...}}, got {}",
                json_type_name(other)
            )))
        }
    };
    let agent_class = match object.get("agent_model") {
        None | Some(Value::Null) => None,
        Some(Value::Object(model)) => {
            let class = required_string(model, "class")
                .map_err(|e| AiccError::invalid_input(format!("agent_model: {}", e.message)))?;
            if !AGENT_CLASSES.contains(&class.as_str()) {
                return Err(AiccError::invalid_input(format!(
                    "agent_model.class '{class}' is not one of {AGENT_CLASSES:?}"
                )));
            }
            Some(class)
        }
        Some(other) => {
            return Err(AiccError::invalid_input(format!(
                "field 'agent_model' must be an object, got {}",
                json_type_name(other)
            )))
        }
    };
    let subscribe = match object.get("subscribe") {
        None | Some(Value::Null) => None,
        Some(Value::Array(topics)) => Some(
            topics
                .iter()
                .map(|t| {
                    t.as_str().map(str::to_owned).ok_or_else(|| {
                        AiccError::invalid_input(format!(
                            "field 'subscribe' must list topic names, found {}",
                            json_type_name(t)
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(other) => {
            return Err(AiccError::invalid_input(format!(
                "field 'subscribe' must be an array of topics, got {}",
                json_type_name(other)
            )))
        }
    };
    Ok(Opening { token, agent_class, subscribe })
}

/// Accepts `aicc/0.N` for any N (newer MINOR is forward compatible);
/// anything else is a protocol mismatch.
fn check_protocol(field: Option<&Value>) -> Result<(), AiccError> {
    let mismatch = |msg: String| AiccError::new(ErrorCode::ProtocolMismatch, false, msg);
    let Some(value) = field else {
        return Err(mismatch(format!("field 'protocol' is missing; expected \"{PROTOCOL}\"")));
    };
    let Some(text) = value.as_str() else {
        return Err(mismatch(format!("field 'protocol' must be a string like \"{PROTOCOL}\"")));
    };
    let version = text.strip_prefix("aicc/").ok_or_else(|| {
        mismatch(format!("protocol '{text}' is not AICC; expected \"{PROTOCOL}\""))
    })?;
    let (major, minor) = version.split_once('.').unwrap_or((version, "0"));
    match (major.parse::<u64>(), minor.parse::<u64>()) {
        (Ok(PROTOCOL_MAJOR), Ok(_)) => Ok(()),
        (Ok(major), Ok(_)) => Err(mismatch(format!(
            "protocol major version {major} is not supported; this bridge speaks {PROTOCOL}"
        ))),
        _ => Err(mismatch(format!("protocol '{text}' is not of the form aicc/MAJOR.MINOR"))),
    }
}

fn required_string(object: &Map<String, Value>, field: &str) -> Result<String, AiccError> {
    match object.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(AiccError::invalid_input(format!(
            "field '{field}' must be a string, got {}",
            json_type_name(other)
        ))),
        None => Err(AiccError::invalid_input(format!("field '{field}' is missing"))),
    }
}

fn optional_string(object: &Map<String, Value>, field: &str) -> Result<Option<String>, AiccError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(AiccError::invalid_input(format!(
            "field '{field}' must be a string, got {}",
            json_type_name(other)
        ))),
    }
}

/// Builds a bridge message with the common envelope. The caller draws
/// `message_id` from its [`IdSource`](super::ids::IdSource), so that
/// building a message stays a pure function.
pub fn envelope(kind: &str, session_id: &str, message_id: String, body: Value) -> Value {
    let mut message = json!({
        "protocol": PROTOCOL,
        "type": kind,
        "session_id": session_id,
        "message_id": message_id,
    });
    if let (Value::Object(target), Value::Object(fields)) = (&mut message, body) {
        target.extend(fields);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_str(line: &str) -> Result<Inbound, (AiccError, Correlation)> {
        decode(line.as_bytes()).map(|d| d.inbound)
    }

    #[test]
    fn decodes_a_tool_call() {
        let inbound = decode_str(r#"{"protocol":"aicc/0.1","type":"tool_call","message_id":"m1","call_id":"c1","tool":"move","input":{"forward":0.5}}"#).unwrap();
        let Inbound::ToolCall(ToolCall { call_id, tool, input, message_id, .. }) = inbound else {
            panic!("not a tool call")
        };
        assert_eq!(
            (call_id.as_str(), tool.as_str(), message_id.as_deref()),
            ("c1", "move", Some("m1"))
        );
        assert_eq!(input["forward"], json!(0.5));
    }

    #[test]
    fn an_envelope_carries_the_given_ids_and_the_body_fields() {
        let message = envelope("heartbeat", "s-1", "m-1".into(), json!({ "meta": { "tick": 3 } }));
        assert_eq!(
            message,
            json!({ "protocol": PROTOCOL, "type": "heartbeat", "session_id": "s-1", "message_id": "m-1", "meta": { "tick": 3 } })
        );
    }

    #[test]
    fn a_newer_minor_is_accepted_and_a_new_major_is_a_mismatch() {
        assert!(
            decode_str(r#"{"protocol":"aicc/0.7","type":"heartbeat","future_field":1}"#).is_ok()
        );
        let (err, _) = decode_str(r#"{"protocol":"aicc/1.0","type":"heartbeat"}"#).unwrap_err();
        assert_eq!(err.code, ErrorCode::ProtocolMismatch);
        let (err, _) = decode_str(r#"{"type":"heartbeat"}"#).unwrap_err();
        assert_eq!(err.code, ErrorCode::ProtocolMismatch);
        assert!(err.message.contains("'protocol'"), "{}", err.message);
    }

    #[test]
    fn malformed_lines_name_what_is_wrong_and_keep_correlation() {
        let cases: &[(&[u8], &str)] = &[
            (b"not json", "not valid JSON"),
            (b"[1,2]", "JSON object"),
            (b"\xff\xfe", "UTF-8"),
            (br#"{"protocol":"aicc/0.1"}"#, "'type' is missing"),
            (br#"{"protocol":"aicc/0.1","type":7}"#, "'type' must be a string"),
            (br#"{"protocol":"aicc/0.1","type":"tool_call","tool":"move"}"#, "'call_id' is missing"),
            (br#"{"protocol":"aicc/0.1","type":"tool_call","call_id":"c","tool":"move","input":[1]}"#, "'input' must be an object, got array"),
            (br#"{"protocol":"aicc/0.1","type":"teleport"}"#, "unknown message type 'teleport'"),
            (br#"{"protocol":"aicc/0.1","type":"tool_result"}"#, "sent by the bridge"),
        ];
        for (line, expected) in cases {
            let (err, _) = decode(line).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidInput, "{}", String::from_utf8_lossy(line));
            assert!(
                err.message.contains(expected),
                "{:?} -> {}",
                String::from_utf8_lossy(line),
                err.message
            );
        }
        let (_, correlation) = decode_str(r#"{"protocol":"aicc/0.1","type":"tool_call","call_id":"c9","message_id":"m9","tool":5}"#).unwrap_err();
        assert_eq!(
            correlation,
            Correlation { message_id: Some("m9".into()), call_id: Some("c9".into()) }
        );
    }
}
