//! The bridge's messages as an agent reads them, decoded strictly: anything
//! malformed is a protocol violation (the caller fails closed), and the
//! messages the agent sends.
use serde_json::{json, Map, Value};

use super::error::RemoteError;
use aicc_wire::{json_type_name, PROTOCOL};

/// One message from the bridge, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum BridgeMessage {
    /// `session_init`: the whole message (it is the manifest).
    SessionInit {
        in_reply_to: Option<String>,
        message: Map<String, Value>,
    },
    ToolResult(ToolResult),
    Event(Event),
    /// A top-level `error` message.
    Error {
        error: RemoteError,
        in_reply_to: Option<String>,
        call_id: Option<String>,
        tick: Option<u64>,
    },
    Heartbeat {
        in_reply_to: Option<String>,
        manifest_update: Option<Value>,
        tick: Option<u64>,
    },
    SessionClose {
        reason: Option<String>,
    },
    /// A type this client does not know (a newer MINOR may add some).
    Unknown {
        kind: String,
    },
}

/// A `tool_result`: either the output or the error, never both.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub call_id: String,
    pub outcome: Result<Value, RemoteError>,
    pub meta: Value,
}

impl ToolResult {
    pub fn tick(&self) -> Option<u64> {
        self.meta.get("tick").and_then(Value::as_u64)
    }
}

/// An `event`, kept whole so that it can be shown as it came.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub tick: u64,
    pub seq: Option<u64>,
    pub topic: String,
    pub message: Map<String, Value>,
}

/// How a line from the bridge breaks the protocol (the client fails closed).
#[derive(Debug, thiserror::Error)]
pub enum Violation {
    /// The line is not UTF-8.
    #[error("a line from the bridge is not valid UTF-8 (at byte {valid_up_to})")]
    NotUtf8 { valid_up_to: usize },
    /// The line is not JSON.
    #[error("a line from the bridge is not valid JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The line is JSON but not an object.
    #[error("a line from the bridge is a JSON {found}, not an object")]
    NotAnObject { found: &'static str },
    /// An envelope field (`protocol`, `type`) that is not a string.
    #[error("field '{field}' must be a string, got {found}")]
    EnvelopeNotAString { field: &'static str, found: &'static str },
    /// No `protocol` field.
    #[error("a message from the bridge has no 'protocol' field")]
    NoProtocol,
    /// No `type` field.
    #[error("a message from the bridge has no 'type'")]
    NoType,
    /// A MAJOR version other than this client's.
    #[error("protocol_mismatch: the bridge speaks '{theirs}', this client speaks {PROTOCOL}")]
    ProtocolMismatch { theirs: String },
    /// `meta.tick` that is not a non-negative integer.
    #[error("{kind}: meta.tick must be a non-negative integer, got {value}")]
    BadTick { kind: String, value: Value },
    /// An optional field of a message that is there but not a string.
    #[error("{kind}: field '{field}' must be a string, got {found}")]
    FieldNotAString { kind: String, field: String, found: &'static str },
    /// A `tool_result` whose `call_id` is not a non-empty string.
    #[error("tool_result: 'call_id' must be a non-empty string, got {value}")]
    BadCallId { value: Value },
    /// A `tool_result` without a `call_id`.
    #[error("tool_result without a 'call_id'")]
    NoCallId,
    /// A `tool_result` whose `ok` is not a boolean.
    #[error("tool_result {call_id}: 'ok' must be a boolean")]
    OkNotBoolean { call_id: String },
    /// A `tool_result` with both an output and an error.
    #[error("tool_result {call_id} carries both 'output' and 'error'")]
    OutputAndError { call_id: String },
    /// A successful `tool_result` whose output is not an object.
    #[error("tool_result {call_id}: 'output' must be an object, got {found}")]
    OutputNotAnObject { call_id: String, found: &'static str },
    /// A successful `tool_result` without an output.
    #[error("tool_result {call_id}: ok is true but there is no 'output'")]
    NoOutput { call_id: String },
    /// A failed `tool_result` without an error.
    #[error("tool_result {call_id}: ok is false but there is no 'error'")]
    NoError { call_id: String },
    /// An error object without its string code, string message and boolean retryable.
    #[error("{context}: an error needs a string 'code', a string 'message' and a boolean 'retryable', got {value}")]
    BadErrorObject { context: String, value: Value },
    /// An event without `meta.tick`: it cannot be ordered.
    #[error("event without meta.tick: it cannot be put in tick order")]
    EventWithoutTick,
    /// An event whose `meta.seq` is not a non-negative integer.
    #[error("event: meta.seq must be a non-negative integer, got {value}")]
    BadEventSeq { value: Value },
    /// An event without a string topic.
    #[error("event without a string 'topic'")]
    EventWithoutTopic,
}

/// Decodes one line from the bridge; `Err` names the violation.
pub fn decode_line(line: &[u8]) -> Result<BridgeMessage, Violation> {
    let text = std::str::from_utf8(line)
        .map_err(|e| Violation::NotUtf8 { valid_up_to: e.valid_up_to() })?;
    let value: Value = serde_json::from_str(text).map_err(Violation::NotJson)?;
    let Value::Object(object) = value else {
        return Err(Violation::NotAnObject { found: json_type_name(&value) });
    };
    check_protocol(&object)?;
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(other) => {
            return Err(Violation::EnvelopeNotAString {
                field: "type",
                found: json_type_name(other),
            })
        }
        None => return Err(Violation::NoType),
    };
    let in_reply_to = optional_string(&object, "in_reply_to", &kind)?;
    let tick = meta_tick(&object, &kind)?;
    Ok(match kind.as_str() {
        "session_init" => BridgeMessage::SessionInit { in_reply_to, message: object },
        "tool_result" => BridgeMessage::ToolResult(tool_result(&object)?),
        "event" => BridgeMessage::Event(event(object, tick)?),
        "error" => BridgeMessage::Error {
            error: remote_error(&Value::Object(object.clone()), "error message")?,
            in_reply_to,
            call_id: optional_string(&object, "call_id", &kind)?,
            tick,
        },
        "heartbeat" => BridgeMessage::Heartbeat {
            in_reply_to,
            manifest_update: object.get("manifest_update").cloned(),
            tick,
        },
        "session_close" => {
            BridgeMessage::SessionClose { reason: optional_string(&object, "reason", &kind)? }
        }
        _ => BridgeMessage::Unknown { kind },
    })
}

/// `aicc/0.N` for any N is accepted (a newer MINOR is forward compatible).
fn check_protocol(object: &Map<String, Value>) -> Result<(), Violation> {
    let text = match object.get("protocol") {
        Some(Value::String(text)) => text,
        Some(other) => {
            return Err(Violation::EnvelopeNotAString {
                field: "protocol",
                found: json_type_name(other),
            })
        }
        None => return Err(Violation::NoProtocol),
    };
    match text.strip_prefix("aicc/").and_then(|v| v.split_once('.')) {
        Some(("0", minor)) if minor.parse::<u64>().is_ok() => Ok(()),
        _ => Err(Violation::ProtocolMismatch { theirs: text.clone() }),
    }
}

fn meta_tick(object: &Map<String, Value>, kind: &str) -> Result<Option<u64>, Violation> {
    match object.get("meta").and_then(|m| m.get("tick")) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| Violation::BadTick { kind: kind.to_string(), value: value.clone() }),
    }
}

fn optional_string(
    object: &Map<String, Value>,
    field: &str,
    kind: &str,
) -> Result<Option<String>, Violation> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(Violation::FieldNotAString {
            kind: kind.to_string(),
            field: field.to_string(),
            found: json_type_name(other),
        }),
    }
}

fn tool_result(object: &Map<String, Value>) -> Result<ToolResult, Violation> {
    let call_id = match object.get("call_id") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        Some(other) => return Err(Violation::BadCallId { value: other.clone() }),
        None => return Err(Violation::NoCallId),
    };
    let Some(ok) = object.get("ok").and_then(Value::as_bool) else {
        return Err(Violation::OkNotBoolean { call_id });
    };
    let (output, error) = (object.get("output"), object.get("error"));
    let outcome = match (ok, output, error) {
        (_, Some(_), Some(_)) => return Err(Violation::OutputAndError { call_id }),
        (true, Some(Value::Object(_)), None) => Ok(output.cloned().unwrap_or(Value::Null)),
        (true, Some(other), None) => {
            return Err(Violation::OutputNotAnObject { call_id, found: json_type_name(other) })
        }
        (true, None, _) => return Err(Violation::NoOutput { call_id }),
        (false, None, Some(error)) => Err(remote_error(error, &format!("tool_result {call_id}"))?),
        (false, _, None) => return Err(Violation::NoError { call_id }),
    };
    Ok(ToolResult { call_id, outcome, meta: object.get("meta").cloned().unwrap_or(Value::Null) })
}

/// The error object of section 5 (code, message, retryable), all required.
fn remote_error(value: &Value, context: &str) -> Result<RemoteError, Violation> {
    let code = value.get("code").and_then(Value::as_str).filter(|c| !c.is_empty());
    let message = value.get("message").and_then(Value::as_str);
    let retryable = value.get("retryable").and_then(Value::as_bool);
    match (code, message, retryable) {
        (Some(code), Some(message), Some(retryable)) => {
            Ok(RemoteError { code: code.into(), message: message.into(), retryable })
        }
        _ => Err(Violation::BadErrorObject { context: context.to_string(), value: value.clone() }),
    }
}

fn event(object: Map<String, Value>, tick: Option<u64>) -> Result<Event, Violation> {
    let tick = tick.ok_or(Violation::EventWithoutTick)?;
    let seq = match object.get("meta").and_then(|m| m.get("seq")) {
        None | Some(Value::Null) => None,
        Some(value) => {
            Some(value.as_u64().ok_or_else(|| Violation::BadEventSeq { value: value.clone() })?)
        }
    };
    let topic = match object.get("topic") {
        Some(Value::String(topic)) => topic.clone(),
        _ => return Err(Violation::EventWithoutTopic),
    };
    Ok(Event { tick, seq, topic, message: object })
}

/// A fresh message id.
pub fn new_message_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `manifest_request`, which also opens a session (with a token) and may
/// choose the event topics.
pub fn manifest_request(
    message_id: &str,
    token: Option<&str>,
    subscribe: Option<&[String]>,
) -> Value {
    let mut message =
        json!({ "protocol": PROTOCOL, "type": "manifest_request", "message_id": message_id });
    if let Some(token) = token {
        message["auth"] = json!({ "token": token });
    }
    if let Some(topics) = subscribe {
        message["subscribe"] = json!(topics);
    }
    message
}

pub fn tool_call(message_id: &str, call_id: &str, tool: &str, input: &Value) -> Value {
    json!({ "protocol": PROTOCOL, "type": "tool_call", "message_id": message_id, "call_id": call_id, "tool": tool, "input": input })
}

pub fn heartbeat(message_id: &str) -> Value {
    json!({ "protocol": PROTOCOL, "type": "heartbeat", "message_id": message_id })
}

pub fn session_close(message_id: &str) -> Value {
    json!({ "protocol": PROTOCOL, "type": "session_close", "message_id": message_id })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(text: &str) -> Result<BridgeMessage, Violation> {
        decode_line(text.as_bytes())
    }

    #[test]
    fn decodes_the_documented_result_error_and_event_lines() {
        let ok = decode(r#"{"call_id":"c-1","message_id":"M","meta":{"latency_ms":15.0,"source":"/probe","tick":1},"ok":true,"output":{"reading":42},"protocol":"aicc/0.1","session_id":"S","type":"tool_result"}"#).unwrap();
        let BridgeMessage::ToolResult(result) = ok else { panic!("{ok:?}") };
        assert_eq!(
            (
                result.call_id.as_str(),
                result.outcome.unwrap()["reading"].as_i64(),
                result.meta["tick"].as_u64()
            ),
            ("c-1", Some(42), Some(1))
        );
        let failed = decode(r#"{"call_id":"c-2","error":{"code":"invalid_input","message":"input.forward","retryable":false},"ok":false,"protocol":"aicc/0.1","type":"tool_result"}"#).unwrap();
        let BridgeMessage::ToolResult(result) = failed else { panic!() };
        assert_eq!(result.outcome.unwrap_err().code, "invalid_input");
        let event = decode(r#"{"meta":{"seq":1,"tick":3},"payload":{},"protocol":"aicc/0.1","topic":"collision","type":"event"}"#).unwrap();
        let BridgeMessage::Event(event) = event else { panic!() };
        assert_eq!((event.tick, event.seq, event.topic.as_str()), (3, Some(1), "collision"));
        let error = decode(r#"{"code":"invalid_input","in_reply_to":"m-4","message":"unknown message type","protocol":"aicc/0.1","retryable":false,"type":"error"}"#).unwrap();
        assert!(
            matches!(error, BridgeMessage::Error { ref in_reply_to, .. } if in_reply_to.as_deref() == Some("m-4")),
            "{error:?}"
        );
    }

    #[test]
    fn malformed_lines_are_violations_that_say_what_is_wrong() {
        let cases: &[(&[u8], &str)] = &[
            (b"\xff\xfe", "UTF-8"),
            (b"{nope", "not valid JSON"),
            (b"[1]", "JSON array, not an object"),
            (br#"{"type":"event"}"#, "no 'protocol'"),
            (br#"{"protocol":"aicc/1.0","type":"event"}"#, "protocol_mismatch"),
            (br#"{"protocol":"aicc/0.1"}"#, "no 'type'"),
            (br#"{"protocol":"aicc/0.1","type":"tool_result","call_id":"c","ok":false,"output":{},"error":{"code":"timeout","message":"m","retryable":true}}"#, "both 'output' and 'error'"),
            (br#"{"protocol":"aicc/0.1","type":"tool_result","call_id":"","ok":true,"output":{}}"#, "non-empty string"),
            (br#"{"protocol":"aicc/0.1","type":"tool_result","call_id":"c","ok":true}"#, "no 'output'"),
            (br#"{"protocol":"aicc/0.1","type":"tool_result","call_id":"c","ok":false}"#, "no 'error'"),
            (br#"{"protocol":"aicc/0.1","type":"tool_result","call_id":"c","ok":false,"error":{"code":"timeout"}}"#, "'retryable'"),
            (br#"{"protocol":"aicc/0.1","type":"event","topic":"x","meta":{}}"#, "without meta.tick"),
            (br#"{"protocol":"aicc/0.1","type":"event","topic":"x","meta":{"tick":-1}}"#, "meta.tick must be"),
            (br#"{"protocol":"aicc/0.1","type":"error","message":"m","retryable":false}"#, "string 'code'"),
        ];
        for (line, expected) in cases {
            let violation = decode_line(line).unwrap_err().to_string();
            assert!(
                violation.contains(expected),
                "{:?} -> {violation}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn a_violation_says_its_kind_to_a_caller_as_well() {
        assert!(matches!(decode_line(b"{nope"), Err(Violation::NotJson(_))));
        assert!(
            matches!(decode_line(br#"{"protocol":"aicc/2.0","type":"x"}"#), Err(Violation::ProtocolMismatch { theirs }) if theirs == "aicc/2.0")
        );
        assert!(
            matches!(decode_line(br#"{"protocol":"aicc/0.1","type":"tool_result","call_id":"c","ok":true}"#), Err(Violation::NoOutput { call_id }) if call_id == "c")
        );
    }

    #[test]
    fn a_newer_minor_and_unknown_types_are_accepted() {
        assert_eq!(
            decode(r#"{"protocol":"aicc/0.7","type":"teleported","x":1}"#).unwrap(),
            BridgeMessage::Unknown { kind: "teleported".into() }
        );
    }

    #[test]
    fn the_token_goes_in_auth_only_when_given() {
        assert_eq!(manifest_request("m", Some("secret"), None)["auth"]["token"], "secret");
        assert!(manifest_request("m", None, Some(&["tick".to_string()])).get("auth").is_none());
    }
}
