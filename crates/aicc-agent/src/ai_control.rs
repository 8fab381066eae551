//! A strict, blocking AI-control client written from the contract: one
//! request at a time, and it fails closed on anything ambiguous (malformed
//! JSON, an unsupported jsonrpc value, a mismatched id, both or neither of
//! result and error, an oversized or unterminated line). After such a
//! failure, or an I/O error such as a read timeout, the connection is not
//! used again.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{json, Map, Value};

/// The contract's JSON-RPC version and line limit.
const JSONRPC_VERSION: &str = "2.0";
const MAX_LINE_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum AiControlError {
    /// The bridge answered something the contract does not allow.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A well-formed error response.
    #[error("remote error {code}: {message}")]
    Remote { code: i64, message: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A request the client refuses to send.
    #[error("{0}")]
    Usage(String),
}

pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    next_id: u64,
    max_line_bytes: usize,
    /// Set by a protocol or I/O error: the stream's state is unknown from then on.
    broken: Option<String>,
}

impl Client {
    /// Connects to a loopback endpoint (another needs [`Client::connect_remote`]).
    pub fn connect(host: &str, port: u16, timeout: Duration) -> Result<Self, AiControlError> {
        Self::open(host, port, timeout, false)
    }

    /// Connects anywhere: the transport is plain TCP, the token and all
    /// data cross the network unencrypted.
    pub fn connect_remote(
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<Self, AiControlError> {
        Self::open(host, port, timeout, true)
    }

    fn open(
        host: &str,
        port: u16,
        timeout: Duration,
        allow_remote: bool,
    ) -> Result<Self, AiControlError> {
        let addresses: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
        let loopback = host.eq_ignore_ascii_case("localhost")
            || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if !allow_remote && !loopback {
            return Err(AiControlError::Usage(format!("refusing the non-loopback endpoint {host}: use connect_remote to allow it (the transport is unencrypted)")));
        }
        let address = addresses
            .first()
            .ok_or_else(|| AiControlError::Usage(format!("{host} resolves to no address")))?;
        let stream = TcpStream::connect_timeout(address, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            next_id: 1,
            max_line_bytes: MAX_LINE_BYTES,
            broken: None,
        })
    }

    /// A smaller line limit (tests; at least 256 bytes).
    pub fn with_max_line_bytes(mut self, max_line_bytes: usize) -> Self {
        self.max_line_bytes = max_line_bytes.max(256);
        self
    }

    /// Sends one request and returns its result, or the remote error.
    pub fn request(
        &mut self,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<Value, AiControlError> {
        if let Some(reason) = &self.broken {
            return Err(AiControlError::Protocol(format!(
                "connection unusable after an earlier error ({reason})"
            )));
        }
        if method.is_empty() {
            return Err(AiControlError::Usage("method must be a non-empty string".into()));
        }
        let id = self.next_id;
        self.next_id += 1;
        let mut line = serde_json::to_vec(
            &json!({ "jsonrpc": JSONRPC_VERSION, "id": id, "method": method, "params": params }),
        )
        .expect("a serde_json::Value always serializes");
        if line.len() > self.max_line_bytes {
            return Err(AiControlError::Usage(format!(
                "request exceeds the {}-byte line limit",
                self.max_line_bytes
            )));
        }
        line.push(b'\n');
        let response = self
            .writer
            .write_all(&line)
            .map_err(AiControlError::from)
            .and_then(|()| self.read_response())
            .and_then(|response| check_response(response, id));
        // After an I/O error (a read timeout...) a late response may still
        // arrive and would be taken for the next request's: unusable too.
        match &response {
            Err(AiControlError::Protocol(reason)) => self.broken = Some(reason.clone()),
            Err(AiControlError::Io(error)) => self.broken = Some(format!("I/O error: {error}")),
            _ => {}
        }
        response
    }

    fn read_response(&mut self) -> Result<Value, AiControlError> {
        let mut line = Vec::new();
        let limit = (self.max_line_bytes + 2) as u64;
        (&mut self.reader).take(limit).read_until(b'\n', &mut line)?;
        if line.is_empty() {
            return Err(AiControlError::Protocol(
                "the bridge closed the connection without a response".into(),
            ));
        }
        if line.last() != Some(&b'\n') {
            if line.len() > self.max_line_bytes {
                return Err(AiControlError::Protocol(format!(
                    "response exceeds the {}-byte line limit",
                    self.max_line_bytes
                )));
            }
            return Err(AiControlError::Protocol("response is not newline terminated".into()));
        }
        line.pop();
        if line.len() > self.max_line_bytes {
            return Err(AiControlError::Protocol(format!(
                "response exceeds the {}-byte line limit",
                self.max_line_bytes
            )));
        }
        let text = std::str::from_utf8(&line).map_err(|e| {
            AiControlError::Protocol(format!("response is not valid UTF-8 JSON: {e}"))
        })?;
        serde_json::from_str(text)
            .map_err(|e| AiControlError::Protocol(format!("response is not valid UTF-8 JSON: {e}")))
    }

    pub fn auth(&mut self, token: &str) -> Result<bool, AiControlError> {
        let result = self.request("auth", object(json!({ "token": token })))?;
        result["authorized"]
            .as_bool()
            .ok_or_else(|| self.fail("auth result has no boolean 'authorized'"))
    }

    pub fn ping(&mut self) -> Result<Value, AiControlError> {
        self.object_result("ping", Map::new())
    }

    pub fn status(&mut self) -> Result<Value, AiControlError> {
        self.object_result("status", Map::new())
    }

    pub fn observe(&mut self) -> Result<Value, AiControlError> {
        self.object_result("observe", Map::new())
    }

    pub fn events(&mut self, after_seq: u64, limit: u64) -> Result<Value, AiControlError> {
        self.object_result("events", object(json!({ "afterSeq": after_seq, "limit": limit })))
    }

    /// Queues a command (`{"type": ..., fields...}`); returns `{accepted, commandSeq}`.
    pub fn act(&mut self, command: Value) -> Result<Value, AiControlError> {
        let Value::Object(command) = command else {
            return Err(AiControlError::Usage("command must be an object".into()));
        };
        if command.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(AiControlError::Usage("command.type must be a non-empty string".into()));
        }
        self.object_result("act", command)
    }

    fn object_result(
        &mut self,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<Value, AiControlError> {
        let result = self.request(method, params)?;
        if result.is_object() {
            Ok(result)
        } else {
            Err(self.fail(&format!("{method} result must be an object")))
        }
    }

    fn fail(&mut self, reason: &str) -> AiControlError {
        self.broken = Some(reason.to_string());
        AiControlError::Protocol(reason.to_string())
    }
}

/// The contract's response rules, for the request numbered `id`.
fn check_response(response: Value, id: u64) -> Result<Value, AiControlError> {
    let Value::Object(mut response) = response else {
        return Err(AiControlError::Protocol("response must be a JSON object".into()));
    };
    if response.get("jsonrpc").and_then(Value::as_str) != Some(JSONRPC_VERSION) {
        return Err(AiControlError::Protocol("response has an unsupported jsonrpc value".into()));
    }
    if response.get("id").and_then(Value::as_u64) != Some(id) {
        return Err(AiControlError::Protocol(format!(
            "response id does not match the request ({id})"
        )));
    }
    match (response.remove("result"), response.remove("error")) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => match (
            error.get("code").and_then(Value::as_i64),
            error.get("message").and_then(Value::as_str),
        ) {
            (Some(code), Some(message)) if error["code"].is_i64() => {
                Err(AiControlError::Remote { code, message: message.to_string() })
            }
            _ => Err(AiControlError::Protocol("response error has an invalid shape".into())),
        },
        _ => Err(AiControlError::Protocol(
            "response must contain exactly one of result or error".into(),
        )),
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    /// A local listener that answers each request line with the next
    /// scripted reply (`{id}` replaced by the request's id), then closes.
    fn scripted(replies: Vec<Vec<u8>>) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            for reply in replies {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let request: Value = serde_json::from_str(&line).unwrap();
                let _ = writer.write_all(&replace_id(&reply, &request["id"].to_string()));
            }
        });
        port
    }

    /// `{id}` replaced byte-wise (a reply may hold invalid UTF-8 on purpose).
    fn replace_id(reply: &[u8], id: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = reply;
        while let Some(at) = rest.windows(4).position(|w| w == b"{id}") {
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(id.as_bytes());
            rest = &rest[at + 4..];
        }
        out.extend_from_slice(rest);
        out
    }

    fn client(port: u16) -> Client {
        Client::connect("127.0.0.1", port, Duration::from_secs(5)).unwrap()
    }

    fn protocol_error(reply: &[u8]) -> String {
        let mut client = client(scripted(vec![reply.to_vec()])).with_max_line_bytes(256);
        match client.ping() {
            Err(AiControlError::Protocol(reason)) => reason,
            other => panic!(
                "{}: expected a protocol error, got {other:?}",
                String::from_utf8_lossy(reply)
            ),
        }
    }

    #[test]
    fn a_result_and_a_remote_error_are_told_apart() {
        let port = scripted(vec![b"{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{\"ok\":true}}\n".to_vec(), b"{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{\"code\":-32002,\"message\":\"Command queue full\"}}\n".to_vec()]);
        let mut client = client(port);
        assert_eq!(client.ping().unwrap(), json!({"ok": true}));
        match client.act(json!({"type": "move", "x": 1})) {
            Err(AiControlError::Remote { code, message }) => {
                assert_eq!((code, message.as_str()), (-32002, "Command queue full"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_responses_fail_closed() {
        for (reply, needle) in [
            (&b"{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":\n"[..], "not valid UTF-8 JSON"),
            (b"{\"jsonrpc\":\"2.0\",\"id\":\"x\xff\",\"result\":{}}\n", "not valid UTF-8 JSON"),
            (b"[1]\n", "must be a JSON object"),
            (b"{\"jsonrpc\":\"1.0\",\"id\":{id},\"result\":{}}\n", "unsupported jsonrpc value"),
            (b"{\"id\":{id},\"result\":{}}\n", "unsupported jsonrpc value"),
            (b"{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}\n", "id does not match"),
            (b"{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"result\":{}}\n", "id does not match"),
            (b"{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{},\"error\":{\"code\":1,\"message\":\"m\"}}\n", "exactly one of result or error"),
            (b"{\"jsonrpc\":\"2.0\",\"id\":{id}}\n", "exactly one of result or error"),
            (b"{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{\"code\":\"x\",\"message\":\"m\"}}\n", "invalid shape"),
            (b"{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{\"code\":1.5,\"message\":\"m\"}}\n", "invalid shape"),
            (b"{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":[]}\n", "result must be an object"),
            (b"{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{}}", "not newline terminated"),
            (b"", "closed the connection without a response"),
        ] {
            let reason = protocol_error(reply);
            assert!(reason.contains(needle), "{}: {reason}", String::from_utf8_lossy(reply));
        }
    }

    #[test]
    fn an_oversized_response_line_fails_closed_and_the_connection_is_not_reused() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{{id}},\"result\":{{\"pad\":\"{}\"}}}}\n",
            "x".repeat(400)
        );
        let port = scripted(vec![
            big.into_bytes(),
            b"{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{}}\n".to_vec(),
        ]);
        let mut client = client(port).with_max_line_bytes(256);
        match client.ping() {
            Err(AiControlError::Protocol(reason)) => {
                assert!(reason.contains("exceeds the 256-byte line limit"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        match client.ping() {
            Err(AiControlError::Protocol(reason)) => {
                assert!(reason.contains("unusable"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_read_timeout_leaves_the_connection_unusable() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let server = thread::spawn(move || {
            // Reads the request, answers nothing, holds the connection open.
            let (stream, _) = listener.accept().unwrap();
            let _ = done_rx.recv();
            drop(stream);
        });
        let mut client = Client::connect("127.0.0.1", port, Duration::from_millis(100)).unwrap();
        assert!(
            matches!(client.ping(), Err(AiControlError::Io(_))),
            "no response: the read times out"
        );
        match client.ping() {
            Err(AiControlError::Protocol(reason)) => {
                assert!(reason.contains("unusable") && reason.contains("I/O error"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        done_tx.send(()).unwrap();
        server.join().unwrap();
    }

    #[test]
    fn requests_the_contract_forbids_are_not_sent() {
        let port = scripted(vec![]);
        let mut client = client(port).with_max_line_bytes(256);
        assert!(
            matches!(client.act(json!({"x": 1})), Err(AiControlError::Usage(m)) if m.contains("command.type"))
        );
        assert!(
            matches!(client.act(json!({"type": "say", "stringArg": "y".repeat(300)})), Err(AiControlError::Usage(m)) if m.contains("line limit"))
        );
        let refused =
            Client::connect("192.0.2.1", 43011, Duration::from_millis(100)).err().unwrap();
        assert!(refused.to_string().contains("non-loopback"), "{refused}");
    }
}
