//! A blocking AICC client, one connection, no runtime: what the tests of
//! every crate and the benchmarks of both sides (the bridge's and the ROS
//! node's) drive the bridge with.
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::PROTOCOL;

/// A blocking AICC client for tests and benchmarks: it sends what it is
/// told, byte for byte (malformed lines included), reads whatever comes,
/// and panics on a broken connection or a line that is not JSON.
pub struct AiccClient {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    /// Messages read while waiting for another one (events, other results),
    /// unless [`AiccClient::forgetting_others`] said not to keep them.
    pub other: Vec<Value>,
    keep_others: bool,
}

impl AiccClient {
    /// Connects and reads the greeting (a bridge without tokens).
    pub fn connect(port: u16) -> (Self, Value) {
        let mut client = Self::connect_raw(port);
        let init = client.read_message();
        assert_eq!(init["type"], "session_init", "first message: {init}");
        (client, init)
    }

    /// Connects to a bridge on `host` and reads until the greeting.
    pub fn connect_to(host: &str, port: u16) -> Self {
        let mut client = Self::connect_raw_to(host, port);
        client.read_until("session_init");
        client.other.clear();
        client
    }

    /// Connects without reading anything.
    pub fn connect_raw(port: u16) -> Self {
        Self::connect_raw_to("127.0.0.1", port)
    }

    fn connect_raw_to(host: &str, port: u16) -> Self {
        let stream = TcpStream::connect((host, port)).expect("connecting to the bridge");
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        stream.set_nodelay(true).unwrap();
        AiccClient {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            other: Vec::new(),
            keep_others: true,
        }
    }

    /// Drops the messages read while waiting for another one: a benchmark's
    /// thousands of calls would otherwise keep every event.
    pub fn forgetting_others(mut self) -> Self {
        self.keep_others = false;
        self
    }

    fn set_aside(&mut self, message: Value) {
        if self.keep_others {
            self.other.push(message);
        }
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// Reads until a message of `kind` arrives (others are kept in `other`).
    pub fn read_until(&mut self, kind: &str) -> Value {
        loop {
            let message = self.read_message();
            if message["type"] == kind {
                return message;
            }
            self.set_aside(message);
        }
    }

    /// True when the bridge has closed the connection (EOF).
    pub fn is_closed_by_peer(&mut self) -> bool {
        let mut line = String::new();
        matches!(self.reader.read_line(&mut line), Ok(0))
    }

    pub fn send_line(&mut self, line: &str) {
        // One write: a line split in two writes meets Nagle and delayed ACK.
        self.writer.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    pub fn read_message(&mut self) -> Value {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).expect("reading from the bridge");
        assert!(n > 0, "the bridge closed the connection");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("bridge sent invalid JSON ({e}): {line}"))
    }

    /// Sends a tool call without waiting for its result.
    pub fn send_call(&mut self, call_id: &str, tool: &str, input: Value) {
        let request = json!({ "protocol": PROTOCOL, "type": "tool_call", "message_id": format!("m-{call_id}"), "call_id": call_id, "tool": tool, "input": input });
        self.send_line(&request.to_string());
    }

    /// Calls a tool and waits for its result.
    pub fn call(&mut self, call_id: &str, tool: &str, input: Value) -> Value {
        self.send_call(call_id, tool, input);
        loop {
            let message = self.read_message();
            if message["type"] == "tool_result" && message["call_id"] == call_id {
                return message;
            }
            self.set_aside(message);
        }
    }

    /// Calls a tool until it succeeds or fails for good: retryable errors
    /// (sensor data not flowing yet) and tools not yet available are
    /// retried every 200 ms for up to `patience`.
    pub fn call_when_ready(
        &mut self,
        call_id: &str,
        tool: &str,
        input: Value,
        patience: Duration,
    ) -> Value {
        let deadline = Instant::now() + patience;
        let mut attempt = 0;
        loop {
            let result = self.call(&format!("{call_id}-{attempt}"), tool, input.clone());
            let waiting = result["ok"] == false
                && (result["error"]["retryable"] == true
                    || result["error"]["code"] == "tool_unavailable");
            if !waiting || Instant::now() > deadline {
                return result;
            }
            attempt += 1;
            thread::sleep(Duration::from_millis(200));
        }
    }
}
