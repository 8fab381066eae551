//! The AI-control envelope, free of I/O: one NDJSON line in, one request
//! or one rejection out; responses built as lines. JSON-RPC-shaped
//! (`jsonrpc: "2.0"`, a caller-chosen `id`, `method`, object `params`),
//! strict UTF-8, at most [`MAX_LINE_BYTES`] per line.
use serde_json::{json, Map, Value};

pub(crate) const JSONRPC_VERSION: &str = "2.0";
/// The contract's line limit (bytes before the LF), both ways.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;
/// The contract's protocol version.
pub(crate) const PROTOCOL_VERSION: u64 = 1;

/// The contract's error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    Parse,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    Unauthorized,
    QueueFull,
    /// The bridge could not do what the request needs (JSON-RPC's
    /// internal error), e.g. stop a command it was asked to replace.
    Internal,
}

impl ErrorCode {
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::Parse => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::Unauthorized => -32001,
            ErrorCode::QueueFull => -32002,
            ErrorCode::Internal => -32603,
        }
    }
}

/// An error answer: code and a message naming what was wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidParams, message)
    }
}

/// The methods of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Auth,
    Ping,
    Status,
    Observe,
    Events,
    Act,
}

impl Method {
    pub const NAMES: [&'static str; 6] = ["auth", "ping", "status", "observe", "events", "act"];

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "auth" => Method::Auth,
            "ping" => Method::Ping,
            "status" => Method::Status,
            "observe" => Method::Observe,
            "events" => Method::Events,
            "act" => Method::Act,
            _ => return None,
        })
    }
}

/// A request with a well-formed envelope. The method name is kept as
/// sent: whether it is known is decided after authorization (an
/// unauthorized connection learns nothing about methods).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: Value,
    pub method: String,
    pub params: Map<String, Value>,
}

/// A line that cannot be served: answer `error`, echoing `id` (null when
/// the line did not give a usable one).
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub id: Value,
    pub error: RpcError,
}

/// Decodes one line (without its LF). Never panics.
pub fn decode_request(line: &[u8]) -> Result<Request, Rejected> {
    let reject = |id: Value, code: ErrorCode, message: String| Rejected {
        id,
        error: RpcError::new(code, message),
    };
    let text = std::str::from_utf8(line).map_err(|e| {
        reject(
            Value::Null,
            ErrorCode::Parse,
            format!("Parse error: the line is not valid UTF-8 (at byte {})", e.valid_up_to()),
        )
    })?;
    let value: Value = serde_json::from_str(text).map_err(|e| {
        reject(
            Value::Null,
            ErrorCode::Parse,
            format!("Parse error: the line is not valid JSON: {e}"),
        )
    })?;
    let Value::Object(mut object) = value else {
        return Err(reject(
            Value::Null,
            ErrorCode::InvalidRequest,
            format!("Invalid request: expected a JSON object, got {}", kind_of(&value)),
        ));
    };
    let id = match object.remove("id") {
        None => Value::Null,
        Some(id @ (Value::Null | Value::String(_) | Value::Number(_))) => id,
        Some(other) => {
            return Err(reject(
                Value::Null,
                ErrorCode::InvalidRequest,
                format!(
                    "Invalid request: id must be a string, a number or null, got {}",
                    kind_of(&other)
                ),
            ))
        }
    };
    match object.get("jsonrpc") {
        Some(Value::String(version)) if version == JSONRPC_VERSION => {}
        Some(other) => {
            return Err(reject(
                id,
                ErrorCode::InvalidRequest,
                format!("Invalid request: jsonrpc must be \"{JSONRPC_VERSION}\", got {other}"),
            ))
        }
        None => {
            return Err(reject(
                id,
                ErrorCode::InvalidRequest,
                format!("Invalid request: jsonrpc is missing (must be \"{JSONRPC_VERSION}\")"),
            ))
        }
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) if !method.is_empty() => method,
        Some(Value::String(_)) => {
            return Err(reject(
                id,
                ErrorCode::InvalidRequest,
                "Invalid request: method is an empty string".into(),
            ))
        }
        Some(other) => {
            return Err(reject(
                id,
                ErrorCode::InvalidRequest,
                format!("Invalid request: method must be a string, got {}", kind_of(&other)),
            ))
        }
        None => {
            return Err(reject(
                id,
                ErrorCode::InvalidRequest,
                "Invalid request: method is missing".into(),
            ))
        }
    };
    let params = match object.remove("params") {
        None => Map::new(),
        Some(Value::Object(params)) => params,
        Some(other) => {
            return Err(reject(
                id,
                ErrorCode::InvalidRequest,
                format!("Invalid request: params must be an object, got {}", kind_of(&other)),
            ))
        }
    };
    Ok(Request { id, method, params })
}

/// The answer to a line over the limit (the connection is closed after it).
pub fn oversized(limit_bytes: usize) -> Rejected {
    Rejected { id: Value::Null, error: RpcError::new(ErrorCode::InvalidRequest, format!("Request too large: a line may hold at most {limit_bytes} bytes; closing the connection")) }
}

/// A success response line, LF-terminated.
pub(crate) fn result_line(id: &Value, result: Value) -> Vec<u8> {
    line(json!({ "jsonrpc": JSONRPC_VERSION, "id": id, "result": result }))
}

/// Longest error message sent: messages may echo a peer's value (a wrong
/// field, an unknown key), and escaping can double it past the line limit.
pub(crate) const MAX_ERROR_MESSAGE_BYTES: usize = 4096;

/// An error response line, LF-terminated.
pub fn error_line(id: &Value, error: &RpcError) -> Vec<u8> {
    line(
        json!({ "jsonrpc": JSONRPC_VERSION, "id": id, "error": { "code": error.code.code(), "message": bounded_message(&error.message) } }),
    )
}

/// The message cut at a character boundary within [`MAX_ERROR_MESSAGE_BYTES`].
fn bounded_message(message: &str) -> String {
    if message.len() <= MAX_ERROR_MESSAGE_BYTES {
        return message.to_string();
    }
    const MARK: &str = "… (cut)";
    let mut end = MAX_ERROR_MESSAGE_BYTES - MARK.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &message[..end])
}

fn line(value: Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(&value).expect("a serde_json::Value always serializes");
    bytes.push(b'\n');
    bytes
}

/// "a string", "an array"... for messages.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rejected(line: &str) -> Rejected {
        decode_request(line.as_bytes()).expect_err(line)
    }

    #[test]
    fn a_well_formed_request_decodes_with_its_id_and_params() {
        let request = decode_request(
            br#"{"jsonrpc":"2.0","id":7,"method":"act","params":{"type":"move","x":500}}"#,
        )
        .unwrap();
        assert_eq!(request.id, json!(7));
        assert_eq!(request.method, "act");
        assert_eq!(request.params["x"], 500);
        let no_params = decode_request(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#).unwrap();
        assert!(no_params.params.is_empty());
        assert_eq!(no_params.id, json!("a"));
    }

    #[test]
    fn each_envelope_fault_gets_its_code_and_names_the_fault() {
        let cases: &[(&str, i64, &str, Value)] = &[
            ("{not json", -32700, "not valid JSON", Value::Null),
            ("", -32700, "not valid JSON", Value::Null),
            ("[1,2]", -32600, "an array", Value::Null),
            ("\"ping\"", -32600, "a string", Value::Null),
            (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, -32600, "jsonrpc must be", json!(1)),
            (r#"{"id":2,"method":"ping"}"#, -32600, "jsonrpc is missing", json!(2)),
            (r#"{"jsonrpc":"2.0","id":3}"#, -32600, "method is missing", json!(3)),
            (r#"{"jsonrpc":"2.0","id":4,"method":""}"#, -32600, "empty", json!(4)),
            (r#"{"jsonrpc":"2.0","id":5,"method":9}"#, -32600, "method must be a string", json!(5)),
            (
                r#"{"jsonrpc":"2.0","id":6,"method":"act","params":[1]}"#,
                -32600,
                "params must be an object",
                json!(6),
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                -32600,
                "id must be",
                Value::Null,
            ),
        ];
        for (line, code, needle, id) in cases {
            let rejected = rejected(line);
            assert_eq!(rejected.error.code.code(), *code, "{line}");
            assert!(rejected.error.message.contains(needle), "{line}: {}", rejected.error.message);
            assert_eq!(&rejected.id, id, "{line}");
        }
    }

    #[test]
    fn malformed_utf8_is_a_parse_error_naming_the_byte() {
        let rejected =
            decode_request(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffng\"}").unwrap_err();
        assert_eq!(rejected.error.code, ErrorCode::Parse);
        assert!(
            rejected.error.message.contains("UTF-8") && rejected.error.message.contains("byte 35"),
            "{}",
            rejected.error.message
        );
    }

    #[test]
    fn responses_echo_the_id_and_hold_exactly_one_of_result_or_error() {
        let ok: Value =
            serde_json::from_slice(&result_line(&json!(3), json!({"ok": true}))).unwrap();
        assert_eq!(ok, json!({"jsonrpc": "2.0", "id": 3, "result": {"ok": true}}));
        let bytes =
            error_line(&Value::Null, &RpcError::new(ErrorCode::QueueFull, "Command queue full"));
        assert_eq!(bytes.last(), Some(&b'\n'));
        let error: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            error,
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32002, "message": "Command queue full"}})
        );
        assert_eq!(oversized(MAX_LINE_BYTES).error.code.code(), -32600);
    }

    #[test]
    fn an_error_echoing_a_huge_value_stays_within_the_line_limit() {
        let echoed = format!(
            "x must be an integer, got a string ({})",
            json!("\"é".repeat(MAX_LINE_BYTES / 2))
        );
        let bytes = error_line(&json!(1), &RpcError::invalid_params(echoed));
        assert!(bytes.len() <= MAX_ERROR_MESSAGE_BYTES * 2 + 100, "{} bytes", bytes.len());
        let message = serde_json::from_slice::<Value>(&bytes).unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            message.starts_with("x must be an integer")
                && message.ends_with("(cut)")
                && message.len() <= MAX_ERROR_MESSAGE_BYTES,
            "{}",
            message.len()
        );
        let short = error_line(&json!(1), &RpcError::invalid_params("short"));
        assert_eq!(serde_json::from_slice::<Value>(&short).unwrap()["error"]["message"], "short");
    }

    #[test]
    fn method_names_round_trip() {
        for name in Method::NAMES {
            assert!(Method::from_name(name).is_some(), "{name}");
        }
        assert_eq!(Method::from_name("Ping"), None);
    }

    /// The response a server makes of any line: a request's (here: a
    /// stand-in result) or the rejection's error.
    fn respond(line: &[u8]) -> Value {
        let bytes = match decode_request(line) {
            Ok(request) => result_line(&request.id, json!({})),
            Err(rejected) => error_line(&rejected.id, &rejected.error),
        };
        assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1, "one line per response");
        serde_json::from_slice(&bytes).expect("responses are JSON")
    }

    fn check_response(response: &Value) {
        assert_eq!(response["jsonrpc"], "2.0");
        let object = response.as_object().unwrap();
        assert!(object.contains_key("id"));
        assert!(object.contains_key("result") != object.contains_key("error"), "{response}");
        if let Some(error) = object.get("error") {
            assert!(error["code"].is_i64() && error["message"].is_string(), "{response}");
        }
    }

    fn envelope_like() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z2.]{0,6}".prop_map(Value::from)
        ];
        let value = leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                proptest::collection::btree_map("[a-z]{1,3}", inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect()))
            ]
        });
        let key = prop_oneof![
            Just("jsonrpc".to_string()),
            Just("id".to_string()),
            Just("method".to_string()),
            Just("params".to_string()),
            "[a-z]{1,4}"
        ];
        proptest::collection::btree_map(key, value, 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_get_one_well_formed_response(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            check_response(&respond(&bytes));
        }

        #[test]
        fn arbitrary_envelopes_get_one_well_formed_response_echoing_a_usable_id(value in envelope_like()) {
            let line = serde_json::to_vec(&value).unwrap();
            let response = respond(&line);
            check_response(&response);
            if let Some(id @ (Value::String(_) | Value::Number(_))) = value.get("id") {
                prop_assert_eq!(&response["id"], id);
            }
        }
    }
}
