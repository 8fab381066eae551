//! The tools the core answers itself (`tick_now`, `cancel`,
//! `memory_query`, `bridge_status`) and the operator's status they report.
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::{short_id, ConnId, Core};
use crate::protocol::auth::Scope;
use crate::protocol::error::AiccError;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};

pub const TICK_NOW: &str = "tick_now";
pub const BRIDGE_STATUS: &str = "bridge_status";
pub const CANCEL: &str = "cancel";
pub const MEMORY_QUERY: &str = "memory_query";

/// Operator-facing counters.
#[derive(Debug, Default, Clone)]
pub(super) struct Counters {
    pub(super) connections_total: u64,
    pub(super) tool_calls: u64,
    pub(super) tool_errors: u64,
    pub(super) protocol_errors: u64,
    /// Connections closed for sending HTTP.
    pub(super) closed_http: u64,
    /// Connections closed for sending too many lines that were not JSON.
    pub(super) closed_undecodable: u64,
    /// Resumes refused (another token, or the owner still connected).
    pub(super) resumes_refused: u64,
    /// Approvals refused to the session or token whose call waits.
    pub(super) decisions_refused: u64,
    /// `stop` calls that ran, and those the core answered itself.
    pub(super) stops_run: u64,
    pub(super) stops_merged: u64,
}

/// Transport facts the shell reports, for operators' status.
#[derive(Debug, Default)]
pub(super) struct ShellFacts {
    listener: Option<String>,
    max_connections: usize,
    /// Messages and bytes queued per connection.
    outbound: Vec<(ConnId, usize, usize)>,
    outbound_max: usize,
    outbound_max_bytes: usize,
    /// What each sensor delivered, as the robot side counts it (null until reported).
    sensors: Value,
    /// Why base velocity cannot reach the base, as the robot side says.
    base_output_unavailable: Option<String>,
}

/// How the core answers a built-in tool.
pub(super) enum BuiltinAnswer {
    Output(Value),
    /// `cancel`: the call to stop (its connection) and the answer.
    Cancel {
        target_conn: ConnId,
        cancelled: String,
        output: Value,
    },
}

impl Core {
    /// Runs `tool` if it is one of the core's own (its input validated);
    /// None for the tools the shell runs.
    pub(super) fn answer_builtin(
        &mut self,
        session_id: &str,
        tool: &str,
        input: &Map<String, Value>,
        now: Instant,
    ) -> Option<Result<BuiltinAnswer, AiccError>> {
        let answer = match tool {
            TICK_NOW => {
                self.extra_ticks += 1;
                BuiltinAnswer::Output(json!({ "tick": self.tick(now) }))
            }
            BRIDGE_STATUS => BuiltinAnswer::Output(self.status(session_id, now)),
            MEMORY_QUERY => BuiltinAnswer::Output(self.sessions[session_id].memory.query(input)),
            CANCEL => {
                let target =
                    input.get("call_id").and_then(Value::as_str).unwrap_or_default().to_string();
                let Some(flight) = self.sessions[session_id].in_flight.get(&target) else {
                    return Some(Err(AiccError::invalid_input(format!(
                        "input.call_id: no call '{target}' is in flight in this session"
                    ))));
                };
                BuiltinAnswer::Cancel {
                    output: json!({ "cancelled": target, "tool": flight.tool }),
                    target_conn: flight.conn,
                    cancelled: target,
                }
            }
            _ => return None,
        };
        Some(Ok(answer))
    }

    /// The operator's view. Session ids are shortened for all but admins:
    /// a full id is what a resume needs.
    pub fn status(&self, viewer: &str, now: Instant) -> Value {
        let admin = self.sessions.get(viewer).is_some_and(|s| s.scope == Scope::Admin);
        let show = |id: &str| if admin { id.to_string() } else { short_id(id).to_string() };
        let sessions: Vec<Value> = self
            .sessions
            .iter()
            .map(|(id, s)| json!({
                "id": show(id),
                "you": id == viewer,
                "scope": s.scope.as_str(),
                "attached": s.conn.is_some(),
                "detached_for_s": s.detached_at.map(|at| now.saturating_duration_since(at).as_secs_f64()),
                "calls_in_flight": s.in_flight.len(),
                "events_retained": s.events.len(),
                "events_retained_max": s.events.capacity(),
                "last_event_seq": s.events.last_seq(),
                "agent_model": s.agent_model.as_ref().map(|m| m.class.clone()),
            }))
            .collect();
        let shell = &self.shell;
        let outbound_queued: usize = shell.outbound.iter().map(|(_, n, _)| n).sum();
        let outbound_fullest = shell.outbound.iter().map(|(_, n, _)| *n).max().unwrap_or(0);
        let outbound_bytes: usize = shell.outbound.iter().map(|(_, _, b)| b).sum();
        let outbound_fullest_bytes = shell.outbound.iter().map(|(_, _, b)| *b).max().unwrap_or(0);
        json!({
            "listener": shell.listener,
            "connections": self.connections.len(),
            "connections_max": shell.max_connections,
            "outbound_queued": outbound_queued,
            "outbound_fullest_queue": outbound_fullest,
            "outbound_queue_max": shell.outbound_max,
            "outbound_queued_bytes": outbound_bytes,
            "outbound_fullest_queue_bytes": outbound_fullest_bytes,
            "outbound_queue_bytes_max": shell.outbound_max_bytes,
            "connections_total": self.counters.connections_total,
            "sessions": sessions,
            "lease_holder": self.lease.holder().map(show),
            "calls_in_flight_max": self.config.max_calls_in_flight,
            "events_retained_max": self.config.event_ring_capacity,
            "tool_calls": self.counters.tool_calls,
            "tool_errors": self.counters.tool_errors,
            "protocol_errors": self.counters.protocol_errors,
            "connections_closed_for_http": self.counters.closed_http,
            "connections_closed_for_undecodable_lines": self.counters.closed_undecodable,
            "max_undecodable_lines": self.config.max_undecodable_lines,
            "resumes_refused": self.counters.resumes_refused,
            "decisions_refused": self.counters.decisions_refused,
            "stops_run": self.counters.stops_run,
            "stops_merged": self.counters.stops_merged,
            "approval_mode": self.approval_mode,
            "hold": self.hold.as_ref().map(|h| h.to_json(now)),
            "unavailable_tools": self.unavailable,
            "last_error": self.last_error,
            "auth_required": self.auth_required(),
            "sensors": shell.sensors,
            "base_output_unavailable": shell.base_output_unavailable,
        })
    }

    /// The listener, as the shell bound it.
    pub fn note_listener(&mut self, address: String, max_connections: usize) {
        self.shell.listener = Some(address);
        self.shell.max_connections = max_connections;
    }

    /// Outbound queue occupancy per connection (messages, bytes), as the
    /// shell measured it, and the per-connection bounds.
    pub fn note_outbound(
        &mut self,
        occupancy: Vec<(ConnId, usize, usize)>,
        max_messages: usize,
        max_bytes: usize,
    ) {
        self.shell.outbound = occupancy;
        self.shell.outbound_max = max_messages;
        self.shell.outbound_max_bytes = max_bytes;
    }

    /// What each sensor has delivered (messages, distinct frames, last
    /// stamp and receipt delay), as the robot side reported it.
    pub fn note_sensors(&mut self, sensors: Value) {
        self.shell.sensors = sensors;
    }

    /// Why base velocity cannot reach the base (None: it can), as the
    /// robot side said it.
    pub fn note_base_output(&mut self, unavailable: Option<String>) {
        self.shell.base_output_unavailable = unavailable;
    }

    /// Records an error for `status` (e.g. from the shell).
    pub fn note_error(&mut self, error: String) {
        self.last_error = Some(error);
    }
}

/// Descriptors of the tools the core answers itself.
pub fn core_tool_descriptors() -> Vec<ToolDescriptor> {
    vec![
        ToolDescriptor {
            id: TICK_NOW,
            class: ToolClass::Sensor,
            description: "Hybrid tick mode only: advance the tick clock now and return the new tick.",
            capability: "can_observe_world",
            strict_input: true,
            calls_per_minute: Some(600),
            input_schema: json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            output_schema: json!({ "type": "object", "properties": { "tick": { "type": "integer" } }, "required": ["tick"] }),
        },
        ToolDescriptor {
            id: CANCEL,
            class: ToolClass::Sensor,
            description: "Cancel one of this session's calls in flight (a long move, turn or arm motion): the robot stops, and the call ends with an execution_failed result and its command completion event.",
            capability: "can_observe_world",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({ "type": "object", "properties": { "call_id": { "type": "string", "minLength": 1 } }, "required": ["call_id"], "additionalProperties": false }),
            output_schema: json!({ "type": "object", "properties": { "cancelled": { "type": "string" }, "tool": { "type": "string" } }, "required": ["cancelled"] }),
        },
        ToolDescriptor {
            id: MEMORY_QUERY,
            class: ToolClass::Sensor,
            description: "Episodic memory of this session: the events and tool results it saw (images summarised), newest last. Filter by kind (event|tool_result), topic or tool name, text, tick range or the last within_s seconds.",
            capability: "can_observe_world",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "kind": { "enum": ["event", "tool_result"] },
                    "topic": { "type": "string", "description": "event topic or tool id" },
                    "tool": { "type": "string", "description": "same as topic" },
                    "text": { "type": "string", "maxLength": 200, "description": "case-insensitive substring" },
                    "since_tick": { "type": "integer", "minimum": 0 },
                    "until_tick": { "type": "integer", "minimum": 0 },
                    "within_s": { "type": "number", "exclusiveMinimum": 0 },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 100 }
                },
                "additionalProperties": false
            }),
            output_schema: json!({ "type": "object", "properties": { "entries": { "type": "array" }, "matched": { "type": "integer" }, "retained": { "type": "integer" }, "retained_max": { "type": "integer" } }, "required": ["entries", "matched"] }),
        },
        ToolDescriptor {
            id: BRIDGE_STATUS,
            class: ToolClass::Sensor,
            description: "The bridge's own state (not the world's): sessions, who holds the motion lease, queues and their limits, retained events, last error.",
            capability: "can_observe_world",
            strict_input: false,
            calls_per_minute: Some(120),
            input_schema: json!({ "type": "object", "properties": {} }),
            output_schema: json!({ "type": "object", "properties": { "sessions": { "type": "array" }, "lease_holder": { "type": ["string", "null"] } }, "required": ["sessions", "lease_holder"] }),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_tools_are_sensors_anyone_observing_may_call() {
        let descriptors = core_tool_descriptors();
        let ids: Vec<&str> = descriptors.iter().map(|d| d.id).collect();
        assert_eq!(ids, vec![TICK_NOW, CANCEL, MEMORY_QUERY, BRIDGE_STATUS]);
        assert!(descriptors
            .iter()
            .all(|d| d.class == ToolClass::Sensor && d.capability == "can_observe_world"));
    }
}
