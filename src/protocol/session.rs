//! The AICC session as a state machine with no I/O: lines and `now` in,
//! [`Output`]s out. The TCP shell writes what it is told to send and runs
//! the tools it is told to execute, then reports their outcome back here.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::clock::TickClock;
use super::error::{AiccError, ErrorCode};
use super::manifest::Manifest;
use super::message::{decode, envelope, Correlation, Inbound};

/// What the session asks its shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Write this message to the agent.
    Send(Value),
    /// Run this tool; report the outcome with [`Session::on_tool_finished`].
    Execute { call_id: String, tool: String, input: Map<String, Value> },
    /// Close the connection after writing everything before this.
    Close,
}

/// A tool's successful outcome, as the tool layer reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSuccess {
    pub output: Value,
    /// Where the data came from (`meta.source`), e.g. the ROS topic.
    pub source: String,
}

#[derive(Debug)]
struct InFlight {
    started: Instant,
}

/// One agent's session.
#[derive(Debug)]
pub struct Session {
    id: String,
    manifest: Arc<Manifest>,
    clock: TickClock,
    /// Calls executing now, by call_id: a duplicate call_id is refused while
    /// the first is running, so results can always be correlated.
    in_flight: HashMap<String, InFlight>,
    /// Bound on `in_flight`: beyond it calls are refused, never queued without end.
    max_in_flight: usize,
    closed: bool,
}

impl Session {
    pub fn new(id: String, manifest: Arc<Manifest>, clock: TickClock, max_in_flight: usize) -> Self {
        Self { id, manifest, clock, in_flight: HashMap::new(), max_in_flight, closed: false }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The greeting sent on connect: `session_init` with the manifest.
    pub fn start(&mut self, now: Instant) -> Vec<Output> {
        let mut body = self.manifest.to_json();
        body["meta"] = json!({ "tick": self.clock.tick(now) });
        vec![Output::Send(envelope("session_init", &self.id, body))]
    }

    /// Handles one line from the agent.
    pub fn on_line(&mut self, line: &[u8], now: Instant) -> Vec<Output> {
        if self.closed {
            return vec![self.error(AiccError::new(ErrorCode::SessionExpired, false, "session is closed"), &Correlation::default(), now)];
        }
        match decode(line) {
            Err((error, correlation)) => vec![self.error(error, &correlation, now)],
            Ok(Inbound::ToolCall { message_id, call_id, tool, input }) => self.on_tool_call(message_id, call_id, tool, input, now),
            Ok(Inbound::ManifestRequest { message_id }) => {
                let mut body = self.manifest.to_json();
                body["in_reply_to"] = json!(message_id);
                body["meta"] = json!({ "tick": self.clock.tick(now) });
                vec![Output::Send(envelope("session_init", &self.id, body))]
            }
            Ok(Inbound::Heartbeat { message_id }) => {
                vec![Output::Send(envelope("heartbeat", &self.id, json!({ "in_reply_to": message_id, "meta": { "tick": self.clock.tick(now) } })))]
            }
            Ok(Inbound::SessionClose { message_id }) => {
                self.closed = true;
                vec![
                    Output::Send(envelope("session_close", &self.id, json!({ "in_reply_to": message_id, "reason": "closed by agent", "meta": { "tick": self.clock.tick(now) } }))),
                    Output::Close,
                ]
            }
        }
    }

    fn on_tool_call(&mut self, message_id: Option<String>, call_id: String, tool: String, input: Map<String, Value>, now: Instant) -> Vec<Output> {
        let refuse = |session: &Self, error: AiccError| {
            let correlation = Correlation { message_id: message_id.clone(), call_id: Some(call_id.clone()) };
            vec![Output::Send(session.failed_result(&call_id, error, &correlation, now, now))]
        };
        if self.manifest.tool(&tool).is_none() {
            return refuse(self, AiccError::new(ErrorCode::ToolUnknown, false, format!("tool '{tool}' is not in the manifest")));
        }
        if self.in_flight.contains_key(&call_id) {
            return refuse(self, AiccError::invalid_input(format!("call_id '{call_id}' is already in flight; use a new call_id per call")));
        }
        if self.in_flight.len() >= self.max_in_flight {
            return refuse(self, AiccError::new(ErrorCode::ToolUnavailable, true, format!("{} calls already in flight (the limit); retry when one completes", self.max_in_flight)));
        }
        self.in_flight.insert(call_id.clone(), InFlight { started: now });
        vec![Output::Execute { call_id, tool, input }]
    }

    /// Reports the outcome of an `Execute`; returns the `tool_result`.
    pub fn on_tool_finished(&mut self, call_id: &str, outcome: Result<ToolSuccess, AiccError>, now: Instant) -> Vec<Output> {
        let started = self.in_flight.remove(call_id).map_or(now, |f| f.started);
        let message = match outcome {
            Ok(success) => envelope("tool_result", &self.id, json!({
                "call_id": call_id,
                "ok": true,
                "output": success.output,
                "meta": self.meta(started, now, &success.source),
            })),
            Err(error) => self.failed_result(call_id, error, &Correlation::default(), started, now),
        };
        vec![Output::Send(message)]
    }

    fn meta(&self, started: Instant, now: Instant, source: &str) -> Value {
        json!({
            "tick": self.clock.tick(now),
            "latency_ms": now.saturating_duration_since(started).as_secs_f64() * 1e3,
            "source": source,
        })
    }

    fn failed_result(&self, call_id: &str, error: AiccError, correlation: &Correlation, started: Instant, now: Instant) -> Value {
        envelope("tool_result", &self.id, json!({
            "call_id": call_id,
            "in_reply_to": correlation.message_id,
            "ok": false,
            "error": error.to_json(),
            "meta": self.meta(started, now, "bridge"),
        }))
    }

    /// A top-level `error` message, correlated as far as the line allowed.
    fn error(&self, error: AiccError, correlation: &Correlation, now: Instant) -> Output {
        let mut body = error.to_json();
        body["in_reply_to"] = json!(correlation.message_id);
        if let Some(call_id) = &correlation.call_id {
            body["call_id"] = json!(call_id);
        }
        body["meta"] = json!({ "tick": self.clock.tick(now) });
        Output::Send(envelope("error", &self.id, body))
    }

    /// Calls executing now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::manifest::{ToolClass, ToolDescriptor};
    use std::time::Duration;

    fn session(start: Instant) -> Session {
        let manifest = Manifest {
            tick_rate_hz: 10.0,
            world_name: "test".into(),
            tools: vec![ToolDescriptor {
                id: "proprioception",
                class: ToolClass::Sensor,
                description: "pose",
                capability: "can_observe_world",
                input_schema: json!({"type": "object"}),
                output_schema: json!({"type": "object"}),
            }],
        };
        Session::new("s-1".into(), Arc::new(manifest), TickClock::new(start, 10.0), 2)
    }

    fn sent(outputs: &[Output]) -> Vec<&Value> {
        outputs.iter().filter_map(|o| match o { Output::Send(v) => Some(v), _ => None }).collect()
    }

    #[test]
    fn start_sends_session_init_with_the_manifest_and_no_world_state() {
        let now = Instant::now();
        let out = session(now).start(now);
        let init = sent(&out)[0];
        assert_eq!(init["type"], "session_init");
        assert_eq!(init["protocol"], "aicc/0.1");
        assert_eq!(init["session_id"], "s-1");
        assert_eq!(init["tools"][0]["id"], "proprioception");
        assert_eq!(init["capabilities"]["sensors"], json!(["proprioception"]));
        assert!(init.get("position").is_none() && init["world"].get("bounds").is_none());
    }

    #[test]
    fn a_tool_call_executes_then_reports_a_result_with_tick_and_latency() {
        let t0 = Instant::now();
        let mut s = session(t0);
        let out = s.on_line(br#"{"protocol":"aicc/0.1","type":"tool_call","call_id":"c1","tool":"proprioception","input":{}}"#, t0);
        assert_eq!(out, vec![Output::Execute { call_id: "c1".into(), tool: "proprioception".into(), input: Map::new() }]);
        let done = t0 + Duration::from_millis(250);
        let out = s.on_tool_finished("c1", Ok(ToolSuccess { output: json!({"x": 1}), source: "/odom".into() }), done);
        let result = sent(&out)[0];
        assert_eq!((result["type"].as_str(), result["call_id"].as_str(), result["ok"].as_bool()), (Some("tool_result"), Some("c1"), Some(true)));
        assert_eq!(result["meta"]["tick"], 2);
        assert_eq!(result["meta"]["latency_ms"], 250.0);
        assert_eq!(result["meta"]["source"], "/odom");
        assert_eq!(s.in_flight(), 0);
    }

    #[test]
    fn unknown_tool_duplicate_call_id_and_full_queue_are_refused_with_their_codes() {
        let t0 = Instant::now();
        let mut s = session(t0);
        let call = |id: &str, tool: &str| format!(r#"{{"protocol":"aicc/0.1","type":"tool_call","call_id":"{id}","tool":"{tool}"}}"#);
        let out = s.on_line(call("c1", "fly").as_bytes(), t0);
        assert_eq!(sent(&out)[0]["error"]["code"], "tool_unknown");
        assert!(matches!(s.on_line(call("c1", "proprioception").as_bytes(), t0)[0], Output::Execute { .. }));
        let out = s.on_line(call("c1", "proprioception").as_bytes(), t0);
        assert_eq!(sent(&out)[0]["error"]["code"], "invalid_input");
        assert!(matches!(s.on_line(call("c2", "proprioception").as_bytes(), t0)[0], Output::Execute { .. }));
        let out = s.on_line(call("c3", "proprioception").as_bytes(), t0);
        let refused = sent(&out)[0];
        assert_eq!((refused["error"]["code"].as_str(), refused["error"]["retryable"].as_bool()), (Some("tool_unavailable"), Some(true)));
        assert_eq!(refused["call_id"], "c3");
    }

    #[test]
    fn malformed_lines_get_an_error_and_the_session_lives_on() {
        let t0 = Instant::now();
        let mut s = session(t0);
        let out = s.on_line(b"{nope", t0);
        let error = sent(&out)[0];
        assert_eq!((error["type"].as_str(), error["code"].as_str()), (Some("error"), Some("invalid_input")));
        let out = s.on_line(br#"{"protocol":"aicc/0.1","type":"heartbeat","message_id":"h1"}"#, t0);
        assert_eq!(sent(&out)[0]["in_reply_to"], "h1");
    }

    #[test]
    fn session_close_replies_then_closes_and_refuses_further_lines() {
        let t0 = Instant::now();
        let mut s = session(t0);
        let out = s.on_line(br#"{"protocol":"aicc/0.1","type":"session_close"}"#, t0);
        assert_eq!(out.last(), Some(&Output::Close));
        assert!(s.is_closed());
        let out = s.on_line(br#"{"protocol":"aicc/0.1","type":"heartbeat"}"#, t0);
        assert_eq!(sent(&out)[0]["code"], "session_expired");
    }
}
