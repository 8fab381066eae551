//! What a recording holds: its channels, the JSON Schema of each, and how
//! a tap record becomes the messages written (docs/recording.md).
//!
//! Every AICC channel is JSON (message encoding `json`, schema encoding
//! `jsonschema`): one MCAP message per record, its log time the bridge's
//! wall clock when the core handled it.
use std::collections::HashMap;

use serde_json::{json, Value};

use crate::protocol::core::ConnId;
use crate::tap::{TapBody, TapRecord};

/// The format's version, profile and metadata name: shared with the
/// reader (`aicc_wire::recording`), which refuses a newer version.
pub use aicc_wire::recording::{FORMAT_VERSION, METADATA_NAME, PROFILE};

/// A channel of a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Channel {
    /// Lines agents sent, as parsed JSON (or the raw text when not JSON).
    Inbound,
    /// Messages the bridge queued for agents (replies, events, heartbeats).
    Outbound,
    /// Events the robot side raised, before delivery (whoever they were for).
    Events,
    /// The governor's restrictions beginning and ending.
    Governor,
    /// The motion lease changing hands or released (the base told to stop).
    Lease,
    /// Connections opening and closing.
    Connections,
    /// The recorder's own notes: records lost to a slow disk, the trigger
    /// of a flight-recorder dump.
    Recorder,
}

impl Channel {
    pub const ALL: [Channel; 7] = [Channel::Inbound, Channel::Outbound, Channel::Events, Channel::Governor, Channel::Lease, Channel::Connections, Channel::Recorder];

    /// The MCAP topic.
    pub fn topic(self) -> &'static str {
        match self {
            Channel::Inbound => "/aicc/in",
            Channel::Outbound => "/aicc/out",
            Channel::Events => "/aicc/events",
            Channel::Governor => "/aicc/governor",
            Channel::Lease => "/aicc/lease",
            Channel::Connections => "/aicc/connections",
            Channel::Recorder => "/aicc/recorder",
        }
    }

    /// The schema's name.
    pub fn schema_name(self) -> &'static str {
        match self {
            Channel::Inbound => "aicc.Inbound",
            Channel::Outbound => "aicc.Outbound",
            Channel::Events => "aicc.Event",
            Channel::Governor => "aicc.GovernorChange",
            Channel::Lease => "aicc.LeaseChange",
            Channel::Connections => "aicc.Connection",
            Channel::Recorder => "aicc.RecorderNote",
        }
    }

    /// The channel's JSON Schema.
    pub fn schema(self) -> Value {
        let conn = json!({ "type": "integer", "minimum": 0, "description": "the bridge's number for the connection" });
        let session = json!({ "type": ["string", "null"], "description": "the AICC session on that connection, once known" });
        let body = match self {
            Channel::Inbound => json!({
                "properties": {
                    "conn": conn, "session": session,
                    "message": { "description": "the line as JSON; null when it was not JSON" },
                    "raw": { "type": "string", "description": "the line as text, only when it was not JSON" },
                },
                "required": ["conn", "message"],
            }),
            Channel::Outbound => json!({
                "properties": {
                    "conn": conn, "session": session,
                    "message": { "type": "object", "description": "the AICC message as sent" },
                    "droppable": { "type": "boolean", "description": "an event a full queue may drop" },
                },
                "required": ["conn", "message", "droppable"],
            }),
            Channel::Events | Channel::Governor => json!({
                "properties": {
                    "topic": { "type": "string" },
                    "payload": {},
                    "audience": { "type": ["string", "null"], "description": "the one session it was for; null: every subscriber" },
                },
                "required": ["topic", "payload"],
            }),
            Channel::Lease => json!({
                "properties": {
                    "kind": { "enum": ["changed", "released"] },
                    "payload": { "description": "the lease event's payload (kind changed)" },
                },
                "required": ["kind"],
            }),
            Channel::Connections => json!({
                "properties": {
                    "conn": conn,
                    "kind": { "enum": ["connected", "disconnected"] },
                    "peer": { "type": "string" },
                    "session": session,
                },
                "required": ["conn", "kind"],
            }),
            Channel::Recorder => json!({
                "properties": {
                    "kind": { "type": "string", "description": "lost | trigger | started" },
                    "records": { "type": "integer", "description": "records lost (kind lost)" },
                    "reason": { "type": "string" },
                },
                "required": ["kind"],
            }),
        };
        let mut schema = json!({ "$schema": "https://json-schema.org/draft/2020-12/schema", "title": self.schema_name(), "type": "object" });
        if let (Value::Object(out), Value::Object(body)) = (&mut schema, body) {
            out.extend(body);
        }
        schema
    }
}

/// Turns tap records into channel messages; remembers which session each
/// connection carries (learnt from the bridge's messages to it) and the
/// last lease event (delivered once per subscriber, recorded once).
#[derive(Debug, Default)]
pub struct Encoder {
    sessions: HashMap<ConnId, String>,
    last_lease: Option<Value>,
}

impl Encoder {
    /// The messages `record` becomes (none for nothing worth keeping).
    pub fn encode(&mut self, record: &TapRecord) -> Vec<(Channel, Value)> {
        let conn = record.conn.unwrap_or(0);
        match &record.body {
            TapBody::Connected { peer } => vec![(Channel::Connections, json!({ "conn": conn, "kind": "connected", "peer": peer }))],
            TapBody::Disconnected => {
                let session = self.sessions.remove(&conn);
                vec![(Channel::Connections, json!({ "conn": conn, "kind": "disconnected", "session": session }))]
            }
            TapBody::Inbound { line } => {
                let session = self.sessions.get(&conn).cloned();
                let message = match serde_json::from_slice::<Value>(line) {
                    Ok(message) => json!({ "conn": conn, "session": session, "message": message }),
                    Err(_) => json!({ "conn": conn, "session": session, "message": null, "raw": String::from_utf8_lossy(line) }),
                };
                vec![(Channel::Inbound, message)]
            }
            TapBody::Outbound { message, droppable } => {
                if let Some(session) = message.get("session_id").and_then(Value::as_str) {
                    if self.sessions.get(&conn).map(String::as_str) != Some(session) {
                        self.sessions.insert(conn, session.to_string());
                    }
                }
                let mut out = vec![(Channel::Outbound, json!({ "conn": conn, "session": self.sessions.get(&conn), "message": message.as_ref(), "droppable": droppable }))];
                let is_lease_event = message.get("type").and_then(Value::as_str) == Some("event") && message.get("topic").and_then(Value::as_str) == Some("lease");
                if is_lease_event {
                    let payload = message.get("payload").cloned().unwrap_or(Value::Null);
                    if self.last_lease.as_ref() != Some(&payload) {
                        self.last_lease = Some(payload.clone());
                        out.push((Channel::Lease, json!({ "kind": "changed", "payload": payload })));
                    }
                }
                out
            }
            TapBody::Event { topic, payload, audience } => {
                let channel = if topic == "governor" { Channel::Governor } else { Channel::Events };
                vec![(channel, json!({ "topic": topic, "payload": payload.as_ref(), "audience": audience }))]
            }
            TapBody::LeaseReleased => {
                self.last_lease = None;
                vec![(Channel::Lease, json!({ "kind": "released" }))]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Instant, SystemTime};

    use super::*;

    fn record(conn: Option<ConnId>, body: TapBody) -> TapRecord {
        TapRecord { seq: 1, at: Instant::now(), wall: SystemTime::now(), conn, body }
    }

    #[test]
    fn every_channel_has_a_distinct_topic_and_a_schema_naming_it() {
        let topics: std::collections::HashSet<_> = Channel::ALL.iter().map(|c| c.topic()).collect();
        assert_eq!(topics.len(), Channel::ALL.len());
        for channel in Channel::ALL {
            let schema = channel.schema();
            assert_eq!(schema["title"], channel.schema_name());
            assert_eq!(schema["type"], "object");
            assert!(schema["required"].as_array().is_some_and(|r| !r.is_empty()), "{channel:?}");
        }
    }

    #[test]
    fn messages_carry_their_session_once_the_bridge_named_it() {
        let mut encoder = Encoder::default();
        let before = encoder.encode(&record(Some(4), TapBody::Inbound { line: Arc::from(&b"{\"type\":\"manifest_request\"}"[..]) }));
        assert_eq!(before[0].1["session"], Value::Null);
        let init = json!({ "type": "session_init", "session_id": "s-1" });
        encoder.encode(&record(Some(4), TapBody::Outbound { message: Arc::new(init), droppable: false }));
        let after = encoder.encode(&record(Some(4), TapBody::Inbound { line: Arc::from(&b"not json"[..]) }));
        assert_eq!(after[0].0, Channel::Inbound);
        assert_eq!((&after[0].1["session"], &after[0].1["message"], &after[0].1["raw"]), (&json!("s-1"), &Value::Null, &json!("not json")));
        let gone = encoder.encode(&record(Some(4), TapBody::Disconnected));
        assert_eq!(gone[0].1["session"], "s-1");
    }

    #[test]
    fn a_lease_event_delivered_to_many_is_one_lease_change() {
        let mut encoder = Encoder::default();
        let event = |session: &str| json!({ "type": "event", "topic": "lease", "session_id": session, "payload": { "holder": "s-1" } });
        let first = encoder.encode(&record(Some(1), TapBody::Outbound { message: Arc::new(event("s-1")), droppable: true }));
        let second = encoder.encode(&record(Some(2), TapBody::Outbound { message: Arc::new(event("s-2")), droppable: true }));
        assert_eq!(first.iter().filter(|(c, _)| *c == Channel::Lease).count(), 1);
        assert_eq!(second.iter().filter(|(c, _)| *c == Channel::Lease).count(), 0);
        let released = encoder.encode(&record(None, TapBody::LeaseReleased));
        assert_eq!(released, vec![(Channel::Lease, json!({ "kind": "released" }))]);
    }

    #[test]
    fn governor_events_have_their_own_channel() {
        let mut encoder = Encoder::default();
        let out = encoder.encode(&record(None, TapBody::Event { topic: "governor".into(), payload: Arc::new(json!({ "kind": "restriction_began" })), audience: None }));
        assert_eq!(out[0].0, Channel::Governor);
        let out = encoder.encode(&record(None, TapBody::Event { topic: "collision".into(), payload: Arc::new(json!({})), audience: None }));
        assert_eq!(out[0].0, Channel::Events);
    }
}
