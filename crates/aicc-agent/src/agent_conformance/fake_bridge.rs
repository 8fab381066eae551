//! A fake AICC bridge on an ephemeral loopback port, scripted per check:
//! it greets with a chosen manifest, answers tool calls as the script says
//! (well or badly), sends events, and records every line the client sent.
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::{json, Value};

use super::client_process::OutputWatch;

/// A client line longer than this ends the connection and fails the check.
pub const MAX_CLIENT_LINE_BYTES: usize = 2 << 20;
/// Client messages recorded at most per check.
const MAX_RECORDED: usize = 1000;

/// What the session may do: sensors only, or sensors and `move`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grants {
    SensorsOnly,
    SensorsAndMotion,
}

/// How the fake bridge answers each tool_call.
#[derive(Debug, Clone, PartialEq)]
pub enum CallAnswer {
    Output(Value),
    /// A tool_result with `ok: false` and this error.
    ToolError {
        code: String,
        retryable: bool,
    },
    /// A top-level `error` message naming the call.
    TopLevelError {
        code: String,
        retryable: bool,
    },
    /// A result with another call_id first, then the real one.
    ForeignThenReal {
        foreign: Value,
        real: Value,
    },
    /// A result carrying both `output` and `error`, then a valid one.
    BothOutputAndError,
    /// A well-formed result line longer than `bytes`, then a valid one.
    Oversized {
        bytes: usize,
    },
    /// These bytes, as they are, ended by a newline, then a valid result.
    Raw(Vec<u8>),
}

/// Events to send: `first` right after the greeting; `then` once the
/// client has printed `after_lines` lines.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventPlan {
    pub first: Vec<(u64, u64)>,
    pub then: Option<(usize, Vec<(u64, u64)>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub grants: Grants,
    pub answer: CallAnswer,
    pub events: EventPlan,
}

/// What the fake bridge saw.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recording {
    /// Every line the client sent, parsed (or `{"unparsed": text}`).
    pub received: Vec<Value>,
    pub connections: usize,
    /// Anything notable on the bridge's side (e.g. the output never came).
    pub notes: Vec<String>,
    /// What the client did that fails whatever check it is in (e.g. a line
    /// over the limit).
    pub client_faults: Vec<String>,
}

impl Recording {
    pub fn tool_calls(&self) -> Vec<&Value> {
        self.received.iter().filter(|m| m["type"] == "tool_call").collect()
    }
}

/// A fake bridge bound to a port, not yet serving.
pub struct FakeBridge {
    listener: TcpListener,
    pub port: u16,
}

/// A fake bridge serving in the background.
pub struct Serving {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Recording>,
}

impl FakeBridge {
    pub fn bind() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        Ok(Self { listener, port })
    }

    /// Serves connections one after another until stopped; `client_output`
    /// is the client's stdout, for event plans that wait on it.
    pub fn serve(
        self,
        script: Script,
        client_output: Arc<OutputWatch>,
    ) -> std::io::Result<Serving> {
        self.listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut recording = Recording::default();
            while !stopping.load(Ordering::Relaxed) {
                match self.listener.accept() {
                    Ok((stream, _)) => {
                        recording.connections += 1;
                        if let Err(error) = serve_connection(
                            stream,
                            &script,
                            &client_output,
                            &stopping,
                            &mut recording,
                        ) {
                            recording
                                .notes
                                .push(format!("connection {}: {error}", recording.connections));
                        }
                    }
                    Err(error) if error.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(error) => {
                        recording.notes.push(format!("accept: {error}"));
                        break;
                    }
                }
            }
            recording
        });
        Ok(Serving { stop, thread })
    }
}

impl Serving {
    pub fn stop(self) -> Recording {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_else(|_| Recording {
            notes: vec!["the fake bridge's thread panicked".into()],
            ..Recording::default()
        })
    }
}

fn send(stream: &mut TcpStream, message: &Value) -> std::io::Result<()> {
    send_raw(stream, message.to_string().as_bytes())
}

fn send_raw(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes)?;
    stream.write_all(b"\n")?;
    stream.flush()
}

fn serve_connection(
    stream: TcpStream,
    script: &Script,
    client_output: &OutputWatch,
    stop: &AtomicBool,
    recording: &mut Recording,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_millis(20)))?;
    let _ = stream.set_nodelay(true);
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut tick = 1;
    send(&mut writer, &session_init(script.grants, None, tick))?;
    for &(event_tick, seq) in &script.events.first {
        send(&mut writer, &event(event_tick, seq))?;
    }
    let mut then = script.events.then.clone();
    let mut line = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if let Some((after_lines, events)) = &then {
            // The client's output is the only sign that it processed what came.
            if client_output.wait_for_lines(*after_lines, Duration::from_millis(0)) {
                for &(event_tick, seq) in events {
                    send(&mut writer, &event(event_tick, seq))?;
                }
                then = None;
            }
        }
        match read_bounded_line(&mut reader, &mut line, MAX_CLIENT_LINE_BYTES) {
            Ok(LineRead::Complete) => {}
            Ok(LineRead::End) => return Ok(()), // an unterminated last line is dropped too
            Ok(LineRead::Partial) => continue,
            Ok(LineRead::TooLong) => {
                recording.client_faults.push(format!("the client sent a line over {MAX_CLIENT_LINE_BYTES} bytes (the limit); the connection was ended"));
                return Ok(());
            }
            Err(error) => return Err(error),
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_string();
        line.clear();
        let message: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| json!({ "unparsed": text }));
        if recording.received.len() < MAX_RECORDED {
            recording.received.push(message.clone());
        }
        tick += 1;
        match message["type"].as_str() {
            Some("manifest_request") => {
                send(&mut writer, &session_init(script.grants, message.get("message_id"), tick))?
            }
            Some("heartbeat") if message.get("in_reply_to").is_none() => send(
                &mut writer,
                &json!({ "protocol": "aicc/0.1", "type": "heartbeat", "session_id": SESSION_ID, "message_id": format!("hb-{tick}"), "in_reply_to": message.get("message_id"), "meta": { "tick": tick } }),
            )?,
            Some("session_close") => {
                send(
                    &mut writer,
                    &json!({ "protocol": "aicc/0.1", "type": "session_close", "session_id": SESSION_ID, "message_id": format!("close-{tick}"), "in_reply_to": message.get("message_id"), "reason": "closed by agent", "meta": { "tick": tick } }),
                )?;
                return Ok(());
            }
            Some("tool_call") => answer(&mut writer, &script.answer, &message, tick)?,
            _ => {}
        }
    }
    if then.is_some() {
        recording.notes.push("the client never printed the lines the late event waited for".into());
    }
    Ok(())
}

/// How far one read got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineRead {
    /// `line` ends with a newline.
    Complete,
    /// The peer closed (what is in `line` is unterminated).
    End,
    /// Nothing more for now: read again.
    Partial,
    /// `line` is over `max_bytes` without a newline.
    TooLong,
}

/// Appends to `line` up to a newline, never holding more than `max_bytes`
/// + 1 bytes, however fast the peer streams without one.
fn read_bounded_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    max_bytes: usize,
) -> std::io::Result<LineRead> {
    let room = (max_bytes + 1).saturating_sub(line.len()) as u64;
    match reader.by_ref().take(room).read_until(b'\n', line) {
        Ok(_) if line.ends_with(b"\n") => Ok(LineRead::Complete),
        Ok(_) if line.len() > max_bytes => Ok(LineRead::TooLong),
        Ok(0) => Ok(LineRead::End),
        // `take` stopped short of the room without a newline: the peer closed.
        Ok(_) => Ok(LineRead::End),
        Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            Ok(if line.len() > max_bytes { LineRead::TooLong } else { LineRead::Partial })
        }
        Err(error) => Err(error),
    }
}

const SESSION_ID: &str = "fake-session";

fn answer(
    writer: &mut TcpStream,
    answer: &CallAnswer,
    call: &Value,
    tick: u64,
) -> std::io::Result<()> {
    let call_id = call.get("call_id").cloned().unwrap_or(Value::Null);
    let result = |call_id: &Value, body: Value| {
        let mut message = json!({ "protocol": "aicc/0.1", "type": "tool_result", "session_id": SESSION_ID, "message_id": format!("r-{tick}"), "call_id": call_id, "meta": { "tick": tick, "latency_ms": 1.0, "source": "fake" } });
        if let (Some(fields), Value::Object(extra)) = (message.as_object_mut(), body) {
            fields.extend(extra);
        }
        message
    };
    // The message does not repeat the code: a client must show the code itself.
    let error_body = |code: &str, retryable: bool| json!({ "code": code, "message": "a scripted failure", "retryable": retryable });
    match answer {
        CallAnswer::Output(output) => {
            return send(writer, &result(&call_id, json!({ "ok": true, "output": output })))
        }
        CallAnswer::ToolError { code, retryable } => {
            return send(
                writer,
                &result(&call_id, json!({ "ok": false, "error": error_body(code, *retryable) })),
            )
        }
        CallAnswer::TopLevelError { code, retryable } => {
            let mut message = json!({ "protocol": "aicc/0.1", "type": "error", "session_id": SESSION_ID, "message_id": format!("e-{tick}"), "call_id": call_id, "in_reply_to": call.get("message_id"), "meta": { "tick": tick } });
            if let (Some(fields), Value::Object(extra)) =
                (message.as_object_mut(), error_body(code, *retryable))
            {
                fields.extend(extra);
            }
            return send(writer, &message);
        }
        CallAnswer::ForeignThenReal { foreign, real } => {
            send(
                writer,
                &result(
                    &json!(format!("foreign-{tick}")),
                    json!({ "ok": true, "output": foreign }),
                ),
            )?;
            return send(writer, &result(&call_id, json!({ "ok": true, "output": real })));
        }
        CallAnswer::BothOutputAndError => send(
            writer,
            &result(
                &call_id,
                json!({ "ok": false, "output": { "marker": "BOTH" }, "error": error_body("execution_failed", false) }),
            ),
        )?,
        CallAnswer::Oversized { bytes } => send(
            writer,
            &result(&call_id, json!({ "ok": true, "output": { "padding": "x".repeat(*bytes) } })),
        )?,
        CallAnswer::Raw(bytes) => send_raw(writer, bytes)?,
    }
    // After a malformed answer, a valid one: a client that reads on past the
    // malformed line (instead of failing closed) takes this one.
    send(
        writer,
        &result(&call_id, json!({ "ok": true, "output": { "marker": AFTER_MALFORMED_MARKER } })),
    )
}

/// The output of the valid result that follows a malformed one.
pub const AFTER_MALFORMED_MARKER: &str = "AFTER-MALFORMED-2b8e";

/// The greeting (and the answer to a manifest_request).
pub fn session_init(grants: Grants, in_reply_to: Option<&Value>, tick: u64) -> Value {
    let (actuators, granted) = match grants {
        Grants::SensorsOnly => (json!([]), json!(["can_observe_world"])),
        Grants::SensorsAndMotion => {
            (json!(["move"]), json!(["can_observe_world", "can_move_self"]))
        }
    };
    let schema = json!({ "type": "object" });
    json!({
        "protocol": "aicc/0.1", "type": "session_init", "session_id": SESSION_ID, "message_id": format!("init-{tick}"), "in_reply_to": in_reply_to,
        "tick_rate_hz": 10.0, "tick_mode": "fixed", "world": { "name": "agent_conformance", "kind": "3d" },
        "capabilities": { "sensors": ["proprioception", "vision"], "actuators": actuators, "generators": [], "granted": granted },
        "tools": [
            { "id": "proprioception", "class": "sensor", "capability": "can_observe_world", "description": "pose", "strict_input": false, "input_schema": schema, "output_schema": schema },
            { "id": "vision", "class": "sensor", "capability": "can_observe_world", "description": "camera", "strict_input": false, "input_schema": schema, "output_schema": schema },
            { "id": "move", "class": "actuator", "capability": "can_move_self", "description": "drive", "strict_input": true, "input_schema": schema, "output_schema": schema },
        ],
        "events": { "available": ["collision", "state_change"], "subscribed": ["collision", "state_change"] },
        "heartbeat_interval_s": 30.0,
        "meta": { "tick": tick },
    })
}

fn event(tick: u64, seq: u64) -> Value {
    json!({ "protocol": "aicc/0.1", "type": "event", "session_id": SESSION_ID, "message_id": format!("ev-{seq}"), "topic": "collision", "payload": { "other": "wall", "impulse": 1.0 }, "meta": { "tick": tick, "seq": seq } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Cursor};

    #[test]
    fn a_client_streaming_without_a_newline_is_stopped_at_the_limit() {
        let mut endless = BufReader::new(std::io::repeat(b'x'));
        let mut line = Vec::new();
        assert_eq!(read_bounded_line(&mut endless, &mut line, 1000).unwrap(), LineRead::TooLong);
        assert_eq!(line.len(), 1001, "no more than the limit and one byte is held");
    }

    #[test]
    fn lines_within_the_limit_are_read_whole_and_an_unterminated_end_is_the_end() {
        let mut reader = BufReader::new(Cursor::new(b"{\"a\":1}\ntail".to_vec()));
        let mut line = Vec::new();
        assert_eq!(read_bounded_line(&mut reader, &mut line, 1000).unwrap(), LineRead::Complete);
        assert_eq!(line, b"{\"a\":1}\n");
        line.clear();
        assert_eq!(read_bounded_line(&mut reader, &mut line, 1000).unwrap(), LineRead::End);
        let mut exact = BufReader::new(Cursor::new(vec![b'y'; 1000]));
        let mut line = Vec::new();
        assert_eq!(
            read_bounded_line(&mut exact, &mut line, 1000).unwrap(),
            LineRead::End,
            "a line at the limit is allowed"
        );
    }
}
