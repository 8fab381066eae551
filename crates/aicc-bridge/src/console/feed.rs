//! The console's stream of what happens: tap records in, page entries out
//! (tool calls and results, command events, robot events, connections),
//! with pictures taken out and long values cut. No I/O: the console's task
//! feeds it and pushes what it returns.
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::protocol::core::ConnId;
use crate::tap::{TapBody, TapRecord};

/// Calls whose tool is remembered until their result (oldest forgotten first).
const REMEMBERED_CALLS: usize = 1024;
/// Strings longer than this are cut in entries.
const MAX_STRING_CHARS: usize = 160;
/// Arrays longer than this are cut in entries.
const MAX_ARRAY_ITEMS: usize = 16;
/// Nesting kept in entries.
const MAX_DEPTH: usize = 6;

/// The last picture an agent was given (a `vision` or `depth` result).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFrame {
    pub mime_type: String,
    pub bytes: Arc<Vec<u8>>,
    pub tool: String,
    pub call_id: String,
    /// The tap record it came in: increases with each new picture.
    pub seq: u64,
}

/// Turns tap records into page entries.
#[derive(Debug, Default)]
pub struct Feed {
    /// (connection, call id) → tool, for results (which do not name it).
    calls: HashMap<(ConnId, String), String>,
    call_order: VecDeque<(ConnId, String)>,
    /// Short session ids of connections, from their session_init.
    sessions: HashMap<ConnId, String>,
    agent_frame: Option<AgentFrame>,
}

impl Feed {
    /// The entry for `record`, or None for what the page does not show
    /// (heartbeats, manifests, per-session copies of robot events).
    pub fn apply(&mut self, record: &TapRecord) -> Option<Value> {
        let conn = record.conn.unwrap_or(0);
        let (kind, fields) = match &record.body {
            TapBody::Connected { peer } => ("connected", json!({ "peer": peer })),
            TapBody::Disconnected => {
                self.forget_connection(conn);
                ("disconnected", json!({}))
            }
            TapBody::LeaseReleased => ("lease_released", json!({})),
            TapBody::Event { topic, payload, audience } => (
                "event",
                json!({ "topic": topic, "payload": summarize(payload, 0), "to": audience }),
            ),
            TapBody::Inbound { line } => self.inbound(conn, line)?,
            TapBody::Outbound { message, .. } => self.outbound(conn, record.seq, message)?,
        };
        let mut entry = json!({
            "seq": record.seq,
            "at_ms": record.wall.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
            "kind": kind,
            "conn": record.conn,
            "session": record.conn.and_then(|c| self.sessions.get(&c)),
        });
        if let (Some(entry), Value::Object(fields)) = (entry.as_object_mut(), fields) {
            entry.extend(fields);
        }
        Some(entry)
    }

    /// The last picture an agent was given, if any.
    pub fn agent_frame(&self) -> Option<&AgentFrame> {
        self.agent_frame.as_ref()
    }

    fn inbound(&mut self, conn: ConnId, line: &[u8]) -> Option<(&'static str, Value)> {
        let Ok(message) = serde_json::from_slice::<Value>(line) else {
            let text = String::from_utf8_lossy(line);
            return Some(("bad_line", json!({ "text": cut(&text) })));
        };
        if message["type"] != "tool_call" {
            return None;
        }
        let tool = message["tool"].as_str().unwrap_or_default().to_string();
        let call_id = message["call_id"].as_str().unwrap_or_default().to_string();
        self.remember(conn, call_id.clone(), tool.clone());
        Some((
            "call",
            json!({ "tool": tool, "call_id": call_id, "input": summarize(&message["input"], 0) }),
        ))
    }

    fn outbound(
        &mut self,
        conn: ConnId,
        seq: u64,
        message: &Value,
    ) -> Option<(&'static str, Value)> {
        match message["type"].as_str()? {
            "session_init" => {
                let id: String = message["session_id"].as_str()?.chars().take(8).collect();
                self.sessions.insert(conn, id.clone());
                Some(("session", json!({ "session_id": id })))
            }
            "tool_result" => {
                let call_id = message["call_id"].as_str().unwrap_or_default().to_string();
                let tool = self.calls.remove(&(conn, call_id.clone())).unwrap_or_default();
                if message["ok"] == true {
                    self.keep_picture(&tool, &call_id, seq, &message["output"]);
                    Some((
                        "result",
                        json!({ "tool": tool, "call_id": call_id, "ok": true, "output": summarize(&message["output"], 0) }),
                    ))
                } else {
                    Some((
                        "result",
                        json!({ "tool": tool, "call_id": call_id, "ok": false, "error": summarize(&message["error"], 0) }),
                    ))
                }
            }
            // Robot events reach every subscribed session: the page shows
            // them once, from the robot side. A command event is one call's.
            "event" if message["topic"] == "command" => {
                Some(("command", json!({ "payload": summarize(&message["payload"], 0) })))
            }
            "error" => {
                Some(("error", json!({ "code": message["code"], "message": message["message"] })))
            }
            _ => None,
        }
    }

    fn keep_picture(&mut self, tool: &str, call_id: &str, seq: u64, output: &Value) {
        for (field, mime_type) in [("jpeg_b64", "image/jpeg"), ("png_b64", "image/png")] {
            let Some(encoded) = output[field].as_str() else { continue };
            if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(encoded) {
                self.agent_frame = Some(AgentFrame {
                    mime_type: mime_type.into(),
                    bytes: Arc::new(bytes),
                    tool: tool.into(),
                    call_id: call_id.into(),
                    seq,
                });
            }
            return;
        }
    }

    fn remember(&mut self, conn: ConnId, call_id: String, tool: String) {
        if self.call_order.len() >= REMEMBERED_CALLS {
            if let Some(oldest) = self.call_order.pop_front() {
                self.calls.remove(&oldest);
            }
        }
        self.call_order.push_back((conn, call_id.clone()));
        self.calls.insert((conn, call_id), tool);
    }

    fn forget_connection(&mut self, conn: ConnId) {
        self.calls.retain(|(c, _), _| *c != conn);
        self.call_order.retain(|(c, _)| *c != conn);
        self.sessions.remove(&conn);
    }
}

/// `value` for a page: pictures replaced by their size, long strings and
/// arrays cut, deep nesting elided.
pub fn summarize(value: &Value, depth: usize) -> Value {
    match value {
        Value::String(text) => json!(cut(text)),
        Value::Array(items) if depth >= MAX_DEPTH => json!(format!("[{} items]", items.len())),
        Value::Object(fields) if depth >= MAX_DEPTH => {
            json!(format!("{{{} fields}}", fields.len()))
        }
        Value::Array(items) => {
            let mut kept: Vec<Value> =
                items.iter().take(MAX_ARRAY_ITEMS).map(|v| summarize(v, depth + 1)).collect();
            if items.len() > MAX_ARRAY_ITEMS {
                kept.push(json!(format!("... {} more", items.len() - MAX_ARRAY_ITEMS)));
            }
            Value::Array(kept)
        }
        Value::Object(fields) => {
            let mut kept = Map::new();
            for (key, field) in fields {
                let summary = match (key.ends_with("_b64"), field.as_str()) {
                    (true, Some(encoded)) => {
                        json!(format!("<picture, {} bytes>", encoded.len() / 4 * 3))
                    }
                    _ => summarize(field, depth + 1),
                };
                kept.insert(key.clone(), summary);
            }
            Value::Object(kept)
        }
        other => other.clone(),
    }
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_STRING_CHARS) {
        Some((end, _)) => format!("{}... ({} chars)", &text[..end], text.chars().count()),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Instant, SystemTime};

    use super::*;

    fn record(seq: u64, conn: Option<ConnId>, body: TapBody) -> TapRecord {
        TapRecord { seq, at: Instant::now(), wall: SystemTime::now(), conn, body }
    }

    fn line(value: Value) -> TapBody {
        TapBody::Inbound { line: value.to_string().into_bytes().into() }
    }

    fn out(value: Value) -> TapBody {
        TapBody::Outbound { message: Arc::new(value), droppable: false }
    }

    #[test]
    fn a_call_and_its_result_are_entries_naming_the_tool_and_session() {
        let mut feed = Feed::default();
        let init = feed
            .apply(&record(
                1,
                Some(3),
                out(json!({ "type": "session_init", "session_id": "5b0c1234-aaaa-bbbb" })),
            ))
            .unwrap();
        assert_eq!(
            (init["kind"].as_str(), init["session_id"].as_str()),
            (Some("session"), Some("5b0c1234"))
        );
        let call = feed.apply(&record(2, Some(3), line(json!({ "type": "tool_call", "call_id": "c1", "tool": "move", "input": { "forward": 0.6 } })))).unwrap();
        assert_eq!(
            (call["kind"].as_str(), call["tool"].as_str(), call["session"].as_str()),
            (Some("call"), Some("move"), Some("5b0c1234"))
        );
        assert_eq!(call["input"]["forward"], 0.6);
        let failed = feed.apply(&record(3, Some(3), out(json!({ "type": "tool_result", "call_id": "c1", "ok": false, "error": { "code": "execution_failed", "message": "denied by the operator" } })))).unwrap();
        assert_eq!((failed["tool"].as_str(), failed["ok"].as_bool()), (Some("move"), Some(false)));
        assert_eq!(failed["error"]["message"], "denied by the operator");
        // The same call id on another connection is another call.
        let other = feed
            .apply(&record(
                4,
                Some(4),
                out(json!({ "type": "tool_result", "call_id": "c1", "ok": true, "output": {} })),
            ))
            .unwrap();
        assert_eq!(other["tool"], "");
    }

    #[test]
    fn pictures_are_kept_aside_and_not_put_in_entries() {
        let mut feed = Feed::default();
        feed.apply(&record(
            1,
            Some(1),
            line(json!({ "type": "tool_call", "call_id": "v", "tool": "vision", "input": {} })),
        ));
        let bytes = vec![0xFFu8, 0xD8, 0xFF, 0xE0, 1, 2, 3, 4, 5];
        let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let entry = feed.apply(&record(2, Some(1), out(json!({ "type": "tool_result", "call_id": "v", "ok": true, "output": { "width": 4, "jpeg_b64": encoded } })))).unwrap();
        assert_eq!(entry["output"]["jpeg_b64"], "<picture, 9 bytes>");
        assert!(!entry.to_string().contains(&encoded));
        let frame = feed.agent_frame().unwrap();
        assert_eq!(
            (frame.mime_type.as_str(), frame.tool.as_str(), frame.seq),
            ("image/jpeg", "vision", 2)
        );
        assert_eq!(*frame.bytes, bytes);
    }

    #[test]
    fn heartbeats_and_per_session_event_copies_are_not_shown_but_commands_and_robot_events_are() {
        let mut feed = Feed::default();
        assert!(feed.apply(&record(1, Some(1), line(json!({ "type": "heartbeat" })))).is_none());
        assert!(feed
            .apply(&record(
                2,
                Some(1),
                out(json!({ "type": "event", "topic": "governor", "payload": {} }))
            ))
            .is_none());
        let command = feed.apply(&record(3, Some(1), out(json!({ "type": "event", "topic": "command", "payload": { "state": "awaiting_approval" } })))).unwrap();
        assert_eq!(command["payload"]["state"], "awaiting_approval");
        let event = feed
            .apply(&record(
                4,
                None,
                TapBody::Event {
                    topic: "governor".into(),
                    payload: Arc::new(json!({ "kind": "stop" })),
                    audience: None,
                },
            ))
            .unwrap();
        assert_eq!(
            (event["kind"].as_str(), event["topic"].as_str(), event["conn"].is_null()),
            (Some("event"), Some("governor"), true)
        );
        let bad = feed
            .apply(&record(5, Some(1), TapBody::Inbound { line: b"not json".to_vec().into() }))
            .unwrap();
        assert_eq!(
            (bad["kind"].as_str(), bad["text"].as_str()),
            (Some("bad_line"), Some("not json"))
        );
    }

    #[test]
    fn long_values_are_cut_and_memory_is_bounded() {
        let long = "x".repeat(1000);
        let summary = summarize(&json!({ "text": long, "list": (0..40).collect::<Vec<_>>() }), 0);
        assert!(summary["text"].as_str().unwrap().ends_with("... (1000 chars)"));
        assert_eq!(summary["list"].as_array().unwrap().len(), MAX_ARRAY_ITEMS + 1);
        let mut feed = Feed::default();
        for n in 0..(REMEMBERED_CALLS + 10) {
            feed.apply(&record(n as u64, Some(1), line(json!({ "type": "tool_call", "call_id": format!("c{n}"), "tool": "wait", "input": {} }))));
        }
        assert_eq!((feed.calls.len(), feed.call_order.len()), (REMEMBERED_CALLS, REMEMBERED_CALLS));
        feed.apply(&record(9999, Some(1), TapBody::Disconnected));
        assert!(feed.calls.is_empty() && feed.sessions.is_empty());
    }
}
