//! The flight recorder's ring: the last seconds of encoded messages in
//! memory, bounded in time and bytes, and the faults that have it written
//! out: an emergency stop, a contact, an agent lost with calls in flight.
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::layout::Channel;
use crate::protocol::core::ConnId;
use crate::robot::wire::WireSample;
use crate::tap::{TapBody, TapRecord};

/// Why the ring is written out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// A `stop` call (any session).
    EmergencyStop { call_id: String },
    /// The bumper touched something (`collision` event).
    Contact,
    /// A connection ended without closing its session, with calls in flight.
    AgentLost { conn: ConnId, calls: Vec<String> },
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trigger::EmergencyStop { call_id } => write!(f, "emergency stop (call {call_id})"),
            Trigger::Contact => write!(f, "contact (collision event)"),
            Trigger::AgentLost { conn, calls } => write!(
                f,
                "agent lost mid-call (connection {conn}, calls in flight: {})",
                calls.join(", ")
            ),
        }
    }
}

/// What the ring keeps: an encoded AICC message, or a sensor sample as
/// the robot side received it (its bytes shared, not copied).
#[derive(Debug, Clone, PartialEq)]
pub enum Kept {
    /// Channel, log time (ns), JSON bytes.
    Message(Channel, u64, Vec<u8>),
    /// A sensor sample and its log time (ns).
    Sample(WireSample, u64),
}

impl Kept {
    /// Its log time (ns).
    #[cfg(test)]
    pub fn log_time_ns(&self) -> u64 {
        match self {
            Kept::Message(_, time, _) | Kept::Sample(_, time) => *time,
        }
    }

    /// The bytes it holds, for the ring's bound.
    fn bytes(&self) -> usize {
        match self {
            Kept::Message(_, _, data) => data.len(),
            Kept::Sample(sample, _) => sample.data.len(),
        }
    }
}

#[derive(Debug)]
pub struct FlightRing {
    window: Duration,
    max_bytes: usize,
    items: VecDeque<(Kept, Instant)>,
    bytes: usize,
    in_flight: HashMap<ConnId, HashSet<String>>,
    closing: HashSet<ConnId>,
}

impl FlightRing {
    pub fn new(window: Duration, max_bytes: usize) -> Self {
        Self {
            window,
            max_bytes,
            items: VecDeque::new(),
            bytes: 0,
            in_flight: HashMap::new(),
            closing: HashSet::new(),
        }
    }

    /// Keeps a message; forgets the oldest beyond the window or the bytes.
    pub fn push(&mut self, channel: Channel, log_time_ns: u64, data: Vec<u8>, at: Instant) {
        self.keep(Kept::Message(channel, log_time_ns, data), at);
    }

    /// Keeps a sensor sample received at `at`, its bytes counted like a
    /// message's; forgets the oldest beyond the window or the bytes.
    pub fn push_sample(&mut self, sample: WireSample, log_time_ns: u64, at: Instant) {
        self.keep(Kept::Sample(sample, log_time_ns), at);
    }

    fn keep(&mut self, kept: Kept, at: Instant) {
        self.bytes += kept.bytes();
        self.items.push_back((kept, at));
        while let Some((oldest, when)) = self.items.front() {
            let too_old = at.saturating_duration_since(*when) > self.window;
            if !(too_old || self.bytes > self.max_bytes) {
                break;
            }
            self.bytes -= oldest.bytes();
            self.items.pop_front();
        }
    }

    /// The bytes kept now.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// What is kept, oldest first.
    pub fn contents(&self) -> impl Iterator<Item = &Kept> {
        self.items.iter().map(|(kept, _)| kept)
    }

    /// Empties the ring, oldest first.
    pub fn drain(&mut self) -> impl Iterator<Item = Kept> + '_ {
        self.bytes = 0;
        self.items.drain(..).map(|(kept, _)| kept)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Follows calls in flight; says whether `record` is a fault.
    pub fn trigger(&mut self, record: &TapRecord) -> Option<Trigger> {
        let conn = record.conn.unwrap_or(0);
        match &record.body {
            TapBody::Inbound { line } => {
                let message: Value = serde_json::from_slice(line).ok()?;
                match message.get("type").and_then(Value::as_str) {
                    Some("tool_call") => {
                        let call_id = message
                            .get("call_id")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        if message.get("tool").and_then(Value::as_str) == Some("stop") {
                            return Some(Trigger::EmergencyStop { call_id });
                        }
                        self.in_flight.entry(conn).or_default().insert(call_id);
                        None
                    }
                    Some("session_close") => {
                        self.closing.insert(conn);
                        None
                    }
                    _ => None,
                }
            }
            TapBody::Outbound { message, .. } => {
                if message.get("type").and_then(Value::as_str) == Some("tool_result") {
                    if let (Some(calls), Some(call_id)) = (
                        self.in_flight.get_mut(&conn),
                        message.get("call_id").and_then(Value::as_str),
                    ) {
                        calls.remove(call_id);
                    }
                }
                None
            }
            TapBody::Event { topic, .. } if topic == "collision" => Some(Trigger::Contact),
            TapBody::Disconnected => {
                let closing = self.closing.remove(&conn);
                let mut calls: Vec<String> =
                    self.in_flight.remove(&conn).unwrap_or_default().into_iter().collect();
                calls.sort();
                (!closing && !calls.is_empty()).then_some(Trigger::AgentLost { conn, calls })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::SystemTime;

    use serde_json::json;

    use super::*;

    fn record(conn: ConnId, body: TapBody) -> TapRecord {
        TapRecord { seq: 1, at: Instant::now(), wall: SystemTime::now(), conn: Some(conn), body }
    }

    fn inbound(conn: ConnId, message: Value) -> TapRecord {
        record(conn, TapBody::Inbound { line: Arc::from(message.to_string().as_bytes()) })
    }

    #[test]
    fn the_ring_keeps_the_window_and_the_byte_bound() {
        let start = Instant::now();
        let mut ring = FlightRing::new(Duration::from_secs(10), 1000);
        for second in 0..30u64 {
            ring.push(Channel::Inbound, second, vec![0; 10], start + Duration::from_secs(second));
        }
        let times: Vec<u64> = ring.contents().map(Kept::log_time_ns).collect();
        assert_eq!(times, (19..30).collect::<Vec<_>>(), "the last 10 s");
        ring.push(Channel::Inbound, 30, vec![0; 995], start + Duration::from_secs(30));
        assert_eq!(ring.len(), 1, "the byte bound forgets the oldest first");
        assert_eq!(ring.drain().count(), 1);
        assert!(ring.is_empty());
    }

    #[test]
    fn samples_share_the_window_and_their_bytes_count_against_the_bound() {
        let start = Instant::now();
        let second = |s: u64| start + Duration::from_secs(s);
        let frame = |at: Instant| WireSample {
            topic: "/camera/image_raw".into(),
            type_name: "sensor_msgs/msg/Image".into(),
            schema: String::new().into(),
            data: Arc::from(vec![7u8; 4000]),
            received: at,
            received_wall: SystemTime::UNIX_EPOCH,
        };
        let mut ring = FlightRing::new(Duration::from_secs(10), 10_000);
        ring.push(Channel::Inbound, 0, vec![0; 100], second(0));
        ring.push_sample(frame(second(1)), 1, second(1));
        ring.push_sample(frame(second(2)), 2, second(2));
        assert_eq!(ring.bytes(), 8100, "a frame's bytes count");
        ring.push_sample(frame(second(3)), 3, second(3));
        let times: Vec<u64> = ring.contents().map(Kept::log_time_ns).collect();
        assert_eq!(
            (times, ring.bytes()),
            (vec![2, 3], 8000),
            "12,100 bytes > 10,000: the oldest forgotten first, the message and the first frame"
        );
        ring.push(Channel::Outbound, 13, vec![0; 10], second(13));
        let times: Vec<u64> = ring.contents().map(Kept::log_time_ns).collect();
        assert_eq!(
            (times, ring.bytes()),
            (vec![3, 13], 4010),
            "the frame 11 s old is out of the 10 s window, the one 10 s old is not"
        );
        assert!(
            matches!(ring.contents().next(), Some(Kept::Sample(sample, 3)) if sample.data.len() == 4000)
        );
        assert_eq!(ring.drain().count(), 2);
        assert_eq!(ring.bytes(), 0);
    }

    #[test]
    fn faults_are_a_stop_a_contact_and_an_agent_lost_mid_call() {
        let mut ring = FlightRing::new(Duration::from_secs(10), 1 << 20);
        assert_eq!(
            ring.trigger(&inbound(
                1,
                json!({ "type": "tool_call", "tool": "stop", "call_id": "h" })
            )),
            Some(Trigger::EmergencyStop { call_id: "h".into() })
        );
        let collision = record(
            0,
            TapBody::Event {
                topic: "collision".into(),
                payload: Arc::new(json!({})),
                audience: None,
            },
        );
        assert_eq!(ring.trigger(&collision), Some(Trigger::Contact));
        // A call answered, then the connection gone: no fault.
        assert_eq!(
            ring.trigger(&inbound(
                2,
                json!({ "type": "tool_call", "tool": "move", "call_id": "m1" })
            )),
            None
        );
        ring.trigger(&record(
            2,
            TapBody::Outbound {
                message: Arc::new(json!({ "type": "tool_result", "call_id": "m1" })),
                droppable: false,
            },
        ));
        assert_eq!(ring.trigger(&record(2, TapBody::Disconnected)), None);
        // A call in flight when the connection drops: the agent was lost.
        ring.trigger(&inbound(3, json!({ "type": "tool_call", "tool": "move", "call_id": "m2" })));
        assert_eq!(
            ring.trigger(&record(3, TapBody::Disconnected)),
            Some(Trigger::AgentLost { conn: 3, calls: vec!["m2".into()] })
        );
        // Closing the session first is not losing it.
        ring.trigger(&inbound(4, json!({ "type": "tool_call", "tool": "move", "call_id": "m3" })));
        ring.trigger(&inbound(4, json!({ "type": "session_close" })));
        assert_eq!(ring.trigger(&record(4, TapBody::Disconnected)), None);
    }
}
