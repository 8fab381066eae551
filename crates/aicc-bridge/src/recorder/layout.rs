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
    pub const ALL: [Channel; 7] = [
        Channel::Inbound,
        Channel::Outbound,
        Channel::Events,
        Channel::Governor,
        Channel::Lease,
        Channel::Connections,
        Channel::Recorder,
    ];

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
            TapBody::Connected { peer } => vec![(
                Channel::Connections,
                json!({ "conn": conn, "kind": "connected", "peer": peer }),
            )],
            TapBody::Disconnected => {
                let session = self.sessions.remove(&conn);
                vec![(
                    Channel::Connections,
                    json!({ "conn": conn, "kind": "disconnected", "session": session }),
                )]
            }
            TapBody::Inbound { line } => {
                let session = self.sessions.get(&conn).cloned();
                let message = match serde_json::from_slice::<Value>(line) {
                    Ok(message) => json!({ "conn": conn, "session": session, "message": message }),
                    Err(_) => {
                        json!({ "conn": conn, "session": session, "message": null, "raw": String::from_utf8_lossy(line) })
                    }
                };
                vec![(Channel::Inbound, message)]
            }
            TapBody::Outbound { message, droppable } => {
                self.note_session(conn, message);
                let mut out = vec![(
                    Channel::Outbound,
                    json!({ "conn": conn, "session": self.sessions.get(&conn), "message": message.as_ref(), "droppable": droppable }),
                )];
                out.extend(self.lease_change(message));
                out
            }
            TapBody::Event { topic, payload, audience } => {
                let channel = if topic == "governor" { Channel::Governor } else { Channel::Events };
                vec![(
                    channel,
                    json!({ "topic": topic, "payload": payload.as_ref(), "audience": audience }),
                )]
            }
            TapBody::LeaseReleased => {
                self.last_lease = None;
                vec![(Channel::Lease, json!({ "kind": "released" }))]
            }
        }
    }

    /// [`Self::encode`] serialised, the same bytes: the messages of every
    /// call (a line in, a result out) are written straight from the line
    /// and the outgoing message, without building a copy of either.
    pub fn encode_bytes(&mut self, record: &TapRecord) -> Vec<(Channel, Vec<u8>)> {
        let conn = record.conn.unwrap_or(0);
        // Keys in the order a serde_json map keeps them (sorted), as `encode` gives them.
        match &record.body {
            // A line that is JSON goes in as received (its text, checked by
            // a parse that keeps nothing).
            TapBody::Inbound { line } if serde_json::from_slice::<JsonChecked>(line).is_ok() => {
                let mut data = Vec::with_capacity(line.len() + 64);
                data.extend_from_slice(format!("{{\"conn\":{conn},\"message\":").as_bytes());
                data.extend_from_slice(line);
                data.extend_from_slice(b",\"session\":");
                serde_json::to_writer(&mut data, &self.sessions.get(&conn))
                    .expect("a string serialises");
                data.push(b'}');
                vec![(Channel::Inbound, data)]
            }
            TapBody::Outbound { message, droppable } => {
                self.note_session(conn, message);
                let mut data = Vec::with_capacity(1024);
                data.extend_from_slice(
                    format!("{{\"conn\":{conn},\"droppable\":{droppable},\"message\":").as_bytes(),
                );
                serde_json::to_writer(&mut data, message.as_ref())
                    .expect("a JSON value serialises");
                data.extend_from_slice(b",\"session\":");
                serde_json::to_writer(&mut data, &self.sessions.get(&conn))
                    .expect("a string serialises");
                data.push(b'}');
                let mut out = vec![(Channel::Outbound, data)];
                out.extend(self.lease_change(message).map(|(channel, value)| {
                    (channel, serde_json::to_vec(&value).expect("a JSON value serialises"))
                }));
                out
            }
            _ => self
                .encode(record)
                .into_iter()
                .map(|(channel, value)| {
                    (channel, serde_json::to_vec(&value).expect("a JSON value serialises"))
                })
                .collect(),
        }
    }

    /// Learns the session a connection carries from the bridge's messages to it.
    fn note_session(&mut self, conn: ConnId, message: &Value) {
        if let Some(session) = message.get("session_id").and_then(Value::as_str) {
            if self.sessions.get(&conn).map(String::as_str) != Some(session) {
                self.sessions.insert(conn, session.to_string());
            }
        }
    }

    /// A lease event seen for the first time (it is delivered once per subscriber).
    fn lease_change(&mut self, message: &Value) -> Option<(Channel, Value)> {
        let is_lease_event = message.get("type").and_then(Value::as_str) == Some("event")
            && message.get("topic").and_then(Value::as_str) == Some("lease");
        if !is_lease_event {
            return None;
        }
        let payload = message.get("payload").cloned().unwrap_or(Value::Null);
        if self.last_lease.as_ref() == Some(&payload) {
            return None;
        }
        self.last_lease = Some(payload.clone());
        Some((Channel::Lease, json!({ "kind": "changed", "payload": payload })))
    }
}

/// A parse that keeps nothing and accepts what a [`Value`] accepts (unlike
/// `IgnoredAny`, which lets a lone surrogate escape through): a line it
/// accepts is JSON every reader of the recording can parse.
struct JsonChecked;

impl<'de> serde::Deserialize<'de> for JsonChecked {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonChecked)
    }
}

impl<'de> serde::de::Visitor<'de> for JsonChecked {
    type Value = JsonChecked;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<JsonChecked>()?.is_some() {}
        Ok(self)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        while map.next_entry::<JsonChecked, JsonChecked>()?.is_some() {}
        Ok(self)
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
        let before = encoder.encode(&record(
            Some(4),
            TapBody::Inbound { line: Arc::from(&b"{\"type\":\"manifest_request\"}"[..]) },
        ));
        assert_eq!(before[0].1["session"], Value::Null);
        let init = json!({ "type": "session_init", "session_id": "s-1" });
        encoder.encode(&record(
            Some(4),
            TapBody::Outbound { message: Arc::new(init), droppable: false },
        ));
        let after = encoder
            .encode(&record(Some(4), TapBody::Inbound { line: Arc::from(&b"not json"[..]) }));
        assert_eq!(after[0].0, Channel::Inbound);
        assert_eq!(
            (&after[0].1["session"], &after[0].1["message"], &after[0].1["raw"]),
            (&json!("s-1"), &Value::Null, &json!("not json"))
        );
        let gone = encoder.encode(&record(Some(4), TapBody::Disconnected));
        assert_eq!(gone[0].1["session"], "s-1");
    }

    #[test]
    fn a_lease_event_delivered_to_many_is_one_lease_change() {
        let mut encoder = Encoder::default();
        let event = |session: &str| json!({ "type": "event", "topic": "lease", "session_id": session, "payload": { "holder": "s-1" } });
        let first = encoder.encode(&record(
            Some(1),
            TapBody::Outbound { message: Arc::new(event("s-1")), droppable: true },
        ));
        let second = encoder.encode(&record(
            Some(2),
            TapBody::Outbound { message: Arc::new(event("s-2")), droppable: true },
        ));
        assert_eq!(first.iter().filter(|(c, _)| *c == Channel::Lease).count(), 1);
        assert_eq!(second.iter().filter(|(c, _)| *c == Channel::Lease).count(), 0);
        let released = encoder.encode(&record(None, TapBody::LeaseReleased));
        assert_eq!(released, vec![(Channel::Lease, json!({ "kind": "released" }))]);
    }

    #[test]
    fn the_bytes_written_are_the_encoded_messages_serialised() {
        let records = [
            record(
                Some(4),
                TapBody::Inbound {
                    line: Arc::from(&b"{\"call_id\":\"c1\",\"type\":\"tool_call\"}"[..]),
                },
            ),
            record(
                Some(4),
                TapBody::Outbound {
                    message: Arc::new(json!({ "type": "session_init", "session_id": "s-\"1\"" })),
                    droppable: false,
                },
            ),
            record(
                Some(4),
                TapBody::Inbound {
                    line: Arc::from(&b"{\"input\":{\"x\":1.5},\"tool\":\"move\"}"[..]),
                },
            ),
            record(Some(4), TapBody::Inbound { line: Arc::from(&b"not json"[..]) }),
            record(Some(4), TapBody::Inbound { line: Arc::from(&b"{\"text\":\"\\ud800\"}"[..]) }),
            record(Some(4), TapBody::Inbound { line: Arc::from(&b"{\"a\":1} trailing"[..]) }),
            record(
                Some(4),
                TapBody::Outbound {
                    message: Arc::new(
                        json!({ "type": "event", "topic": "lease", "session_id": "s-1", "payload": { "holder": "s-1" } }),
                    ),
                    droppable: true,
                },
            ),
            record(None, TapBody::LeaseReleased),
            record(Some(4), TapBody::Disconnected),
        ];
        let (mut values, mut bytes) = (Encoder::default(), Encoder::default());
        for record in &records {
            let expected: Vec<(Channel, Vec<u8>)> = values
                .encode(record)
                .into_iter()
                .map(|(c, v)| (c, serde_json::to_vec(&v).unwrap()))
                .collect();
            let written = bytes.encode_bytes(record);
            let text = |messages: &[(Channel, Vec<u8>)]| {
                messages
                    .iter()
                    .map(|(c, d)| format!("{c:?} {}", String::from_utf8_lossy(d)))
                    .collect::<Vec<_>>()
            };
            assert_eq!(text(&written), text(&expected));
        }
    }

    #[test]
    fn governor_events_have_their_own_channel() {
        let mut encoder = Encoder::default();
        let out = encoder.encode(&record(
            None,
            TapBody::Event {
                topic: "governor".into(),
                payload: Arc::new(json!({ "kind": "restriction_began" })),
                audience: None,
            },
        ));
        assert_eq!(out[0].0, Channel::Governor);
        let out = encoder.encode(&record(
            None,
            TapBody::Event {
                topic: "collision".into(),
                payload: Arc::new(json!({})),
                audience: None,
            },
        ));
        assert_eq!(out[0].0, Channel::Events);
    }
}
