//! The bridge's events for observers on the robot's side (ROS:
//! `/aicc/events`, JSON in std_msgs/String, for `ros2 bag record` and
//! foxglove_bridge): an observer on the tap that turns each event, tool
//! call and tool result into one JSON line, large strings (images) left
//! out.
//!
//! It never slows the core: it reads the bounded tap, and when it falls
//! behind it loses the oldest records (its next line says how many).
use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{json, Map, Value};

use crate::protocol::core::ConnId;
use crate::robot::SignalPort;
use crate::tap::{Lagged, TapBody, TapReceiver, TapRecord};

/// Strings longer than this (images, base64 data) are replaced by a note
/// of their length.
pub const MAX_STRING_BYTES: usize = 256;

/// Turns tap records into lines; remembers each connection's session and
/// each call's tool (a result names only its call).
#[derive(Debug, Default)]
pub struct Summarizer {
    sessions: HashMap<ConnId, String>,
    tools: HashMap<(ConnId, String), String>,
}

/// `value` with every long string replaced by `"<N bytes left out>"`.
pub fn without_large_strings(value: &Value) -> Value {
    match value {
        Value::String(text) if text.len() > MAX_STRING_BYTES => {
            Value::String(format!("<{} bytes left out>", text.len()))
        }
        Value::Array(items) => Value::Array(items.iter().map(without_large_strings).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), without_large_strings(v)))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    }
}

fn wall_ns(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Summarizer {
    /// The line `record` becomes; None for what is not told (heartbeats,
    /// greetings, events as delivered to each session: told once as raised).
    pub fn line(&mut self, record: &TapRecord) -> Option<Value> {
        let conn = record.conn.unwrap_or(0);
        let mut line = match &record.body {
            TapBody::Event { topic, payload, audience } => {
                json!({ "kind": "event", "topic": topic, "payload": without_large_strings(payload), "audience": audience })
            }
            TapBody::Connected { peer } => {
                json!({ "kind": "connected", "conn": conn, "peer": peer })
            }
            TapBody::Disconnected => {
                self.tools.retain(|(c, _), _| *c != conn);
                json!({ "kind": "disconnected", "conn": conn, "session": self.sessions.remove(&conn) })
            }
            TapBody::LeaseReleased => json!({ "kind": "lease_released" }),
            TapBody::Inbound { line } => {
                let message: Value = serde_json::from_slice(line).ok()?;
                if message.get("type").and_then(Value::as_str) != Some("tool_call") {
                    return None;
                }
                let call_id =
                    message.get("call_id").and_then(Value::as_str).unwrap_or("").to_string();
                let tool = message.get("tool").and_then(Value::as_str).unwrap_or("").to_string();
                self.tools.insert((conn, call_id.clone()), tool.clone());
                json!({ "kind": "tool_call", "conn": conn, "session": self.sessions.get(&conn), "call_id": call_id, "tool": tool, "input": without_large_strings(message.get("input").unwrap_or(&Value::Null)) })
            }
            TapBody::Outbound { message, .. } => {
                if let Some(session) = message.get("session_id").and_then(Value::as_str) {
                    if self.sessions.get(&conn).map(String::as_str) != Some(session) {
                        self.sessions.insert(conn, session.to_string());
                    }
                }
                if message.get("type").and_then(Value::as_str) != Some("tool_result") {
                    return None;
                }
                let call_id =
                    message.get("call_id").and_then(Value::as_str).unwrap_or("").to_string();
                let tool = self.tools.remove(&(conn, call_id.clone()));
                let mut line = json!({ "kind": "tool_result", "conn": conn, "session": self.sessions.get(&conn), "call_id": call_id, "tool": tool, "ok": message.get("ok") });
                for key in ["output", "error", "meta"] {
                    if let Some(value) = message.get(key) {
                        line[key] = without_large_strings(value);
                    }
                }
                line
            }
        };
        line["stamp_ns"] = json!(wall_ns(record.wall));
        line["seq"] = json!(record.seq);
        Some(line)
    }
}

/// How long the records that follow a first one are gathered before
/// they are published: in batches, so that no record wakes the publisher
/// on its own.
pub const PUBLISH_PERIOD: std::time::Duration = std::time::Duration::from_millis(20);

/// Publishes the tap's records through `signals` until the bridge ends.
/// Waits for a record rather than polling, so an idle bridge wakes for
/// nothing.
pub async fn publish(mut tap: TapReceiver, signals: Arc<dyn SignalPort>) {
    let mut summarizer = Summarizer::default();
    while let Some(first) = tap.recv().await {
        tokio::time::sleep(PUBLISH_PERIOD).await;
        for next in std::iter::once(first).chain(std::iter::from_fn(|| tap.try_recv())) {
            let line = match next {
                Ok(record) => summarizer.line(&record),
                Err(Lagged(lost)) => Some(json!({ "kind": "lost", "records": lost })),
            };
            if let Some(line) = line {
                signals.publish_event(&line.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn record(conn: Option<ConnId>, body: TapBody) -> TapRecord {
        TapRecord { seq: 7, at: Instant::now(), wall: SystemTime::now(), conn, body }
    }

    #[test]
    fn a_call_and_its_result_are_told_with_the_tool_and_without_the_image() {
        let mut summarizer = Summarizer::default();
        let init = json!({ "type": "session_init", "session_id": "s-1", "manifest": {} });
        assert!(summarizer
            .line(&record(Some(2), TapBody::Outbound { message: Arc::new(init), droppable: false }))
            .is_none());
        let call =
            br#"{"type":"tool_call","tool":"vision","call_id":"v1","input":{"format":"png"}}"#;
        let line = summarizer
            .line(&record(Some(2), TapBody::Inbound { line: Arc::from(&call[..]) }))
            .unwrap();
        assert_eq!(
            (&line["kind"], &line["tool"], &line["session"], &line["input"]["format"]),
            (&json!("tool_call"), &json!("vision"), &json!("s-1"), &json!("png"))
        );
        let image = "A".repeat(10_000);
        let result = json!({ "type": "tool_result", "call_id": "v1", "ok": true, "output": { "width": 640, "image": { "data": image } }, "meta": { "latency_ms": 3.0 } });
        let line = summarizer
            .line(&record(
                Some(2),
                TapBody::Outbound { message: Arc::new(result), droppable: false },
            ))
            .unwrap();
        assert_eq!(
            (&line["kind"], &line["tool"], &line["ok"], &line["output"]["width"]),
            (&json!("tool_result"), &json!("vision"), &json!(true), &json!(640))
        );
        assert_eq!(line["output"]["image"]["data"], "<10000 bytes left out>");
        assert!(line.to_string().len() < 1000, "{line}");
        assert_eq!(line["seq"], 7);
    }

    #[test]
    fn events_are_told_once_as_raised_and_other_lines_not_at_all() {
        let mut summarizer = Summarizer::default();
        let event = summarizer
            .line(&record(
                None,
                TapBody::Event {
                    topic: "governor".into(),
                    payload: Arc::new(json!({ "kind": "stop" })),
                    audience: None,
                },
            ))
            .unwrap();
        assert_eq!(
            (&event["kind"], &event["topic"], &event["payload"]["kind"]),
            (&json!("event"), &json!("governor"), &json!("stop"))
        );
        let delivered = json!({ "type": "event", "topic": "governor", "payload": {} });
        assert!(summarizer
            .line(&record(
                Some(1),
                TapBody::Outbound { message: Arc::new(delivered), droppable: true }
            ))
            .is_none());
        assert!(summarizer
            .line(&record(Some(1), TapBody::Inbound { line: Arc::from(&b"not json"[..]) }))
            .is_none());
        assert!(summarizer
            .line(&record(
                Some(1),
                TapBody::Inbound { line: Arc::from(&br#"{"type":"heartbeat"}"#[..]) }
            ))
            .is_none());
        assert_eq!(
            summarizer.line(&record(None, TapBody::LeaseReleased)).unwrap()["kind"],
            "lease_released"
        );
    }

    /// Keeps the lines it is asked to publish.
    #[derive(Default)]
    struct Lines(parking_lot::Mutex<Vec<String>>);

    impl SignalPort for Lines {
        fn say(&self, _text: &str) -> Result<(), crate::robot::PortError> {
            Ok(())
        }
        fn say_topic(&self) -> String {
            String::new()
        }
        fn publish_diagnostics(&self, _diagnostics: &[crate::robot::Diagnostic]) {}
        fn publish_event(&self, json: &str) {
            self.0.lock().push(json.to_string());
        }
    }

    #[tokio::test]
    async fn records_are_published_in_a_batch_after_the_first_and_each_batch_after_its_own_first() {
        let tap = crate::tap::Tap::new(16);
        let lines = Arc::new(Lines::default());
        let publisher = tokio::spawn(publish(tap.subscribe(), lines.clone()));
        let event = |kind: &str| TapBody::Event {
            topic: "governor".into(),
            payload: Arc::new(json!({ "kind": kind })),
            audience: None,
        };
        tap.record(None, || event("first"));
        tap.record(None, || event("second"));
        tokio::time::sleep(PUBLISH_PERIOD * 4).await;
        let kinds = |lines: &Lines| {
            lines
                .0
                .lock()
                .iter()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()["payload"]["kind"].clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds(&lines), vec![json!("first"), json!("second")]);
        tap.record(None, || event("later"));
        tokio::time::sleep(PUBLISH_PERIOD * 4).await;
        assert_eq!(
            kinds(&lines),
            vec![json!("first"), json!("second"), json!("later")],
            "a record after a quiet spell is published too"
        );
        publisher.abort();
    }
}
