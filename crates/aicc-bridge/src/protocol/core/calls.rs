//! Tool calls: every check a call must pass before it runs, the calls in
//! flight, and how each one ends (result, command completion, idempotent
//! replay).
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::builtin::BuiltinAnswer;
use super::idempotency::Idempotent;
use super::{ConnId, Core, Output, ToolSuccess};
use crate::protocol::error::{AiccError, ErrorCode};
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::message::{Correlation, ToolCall};

/// The tool that halts all motion (never held, answered by the core when
/// nothing moved since the last one ran).
const STOP: &str = "stop";

/// A call the shell is running.
pub(super) struct InFlight {
    pub(super) started: Instant,
    pub(super) tool: &'static str,
    pub(super) conn: ConnId,
    /// Extra input fields dropped from a non-strict tool's input.
    ignored_fields: Vec<String>,
    /// An actuator call: it gets `command` lifecycle events.
    command: bool,
    idempotency_key: Option<String>,
    /// Waiting for an operator's approval: nothing runs yet.
    pub(super) awaiting: Option<Awaiting>,
}

/// A call parked until an operator decides (see `approvals`).
pub(super) struct Awaiting {
    pub(super) approval_id: String,
    /// The validated input, for the run an approval starts.
    pub(super) input: Map<String, Value>,
    pub(super) deadline: Option<Duration>,
    pub(super) reason: String,
    pub(super) since: Instant,
    pub(super) expires: Instant,
}

/// What an admitted call turns into.
enum Admitted {
    /// Answered by the core itself.
    Internal { output: Value, ignored_fields: Vec<String>, extra: Vec<Output> },
    /// Refused, with what the refusal audits (an approval that was not waiting).
    Refused { error: AiccError, extra: Vec<Output> },
    /// A cancel of a call in flight (its connection and tool).
    Cancel { target_conn: ConnId, cancelled: String, output: Value },
    Execute {
        descriptor_id: &'static str,
        input: Map<String, Value>,
        ignored_fields: Vec<String>,
        acquired_lease: bool,
        command: bool,
    },
}

impl Core {
    pub(super) fn on_tool_call(
        &mut self,
        conn: ConnId,
        call: ToolCall,
        now: Instant,
    ) -> Vec<Output> {
        let ToolCall { message_id, call_id, tool, input, options } = call;
        self.counters.tool_calls += 1;
        let correlation = Correlation { message_id, call_id: Some(call_id.clone()) };
        let Some(session_id) = self.connections[&conn].session.clone() else {
            let error = AiccError::new(
                ErrorCode::SessionExpired,
                false,
                "no session on this connection: send manifest_request or session_resume first",
            );
            return vec![self.failed_result(conn, "", &correlation, error, now)];
        };
        // A retried call with a known idempotency key never runs twice.
        if let Some(key) = &options.idempotency_key {
            match self.sessions[&session_id].idempotency.get(key) {
                Some(Idempotent::Done { result }) => {
                    let mut replay = result.clone();
                    replay["call_id"] = json!(call_id);
                    replay["message_id"] = json!(self.ids.next_id());
                    replay["meta"]["idempotent_replay"] = json!(true);
                    return vec![self.reply(conn, replay)];
                }
                Some(Idempotent::Running { call_id: first }) => {
                    let error = AiccError::new(ErrorCode::ToolUnavailable, true, format!("a call with idempotency_key '{key}' is still running (call_id '{first}'); its result will come under that call_id"));
                    return vec![self.failed_result(conn, &session_id, &correlation, error, now)];
                }
                None => {}
            }
        }
        match self.admit(&session_id, &call_id, &tool, input, now) {
            Err(error) => {
                self.counters.tool_errors += 1;
                vec![self.failed_result(conn, &session_id, &correlation, error, now)]
            }
            Ok(Admitted::Refused { error, mut extra }) => {
                self.counters.tool_errors += 1;
                extra.push(self.failed_result(conn, &session_id, &correlation, error, now));
                extra
            }
            Ok(Admitted::Cancel { target_conn, cancelled, output }) => {
                let mut out = Vec::new();
                let waiting = self.sessions[&session_id]
                    .in_flight
                    .get(&cancelled)
                    .and_then(|f| f.awaiting.as_ref())
                    .map(|a| a.approval_id.clone());
                match waiting {
                    // A waiting call runs nothing to abort; the admins are told it is withdrawn.
                    Some(approval_id) => self.tell_admins(json!({ "decision": "withdrawn", "approval_id": approval_id, "call_id": cancelled, "why": "cancelled by its agent" }), now, &mut out),
                    None => out.push(Output::Abort { conn: target_conn, call_id: cancelled.clone() }),
                }
                let error = AiccError::execution_failed(
                    false,
                    format!("cancelled by the agent (call '{call_id}'); the robot was stopped"),
                );
                out.extend(self.finish_call(&session_id, &cancelled, Err(error), now));
                let tick = self.tick(now);
                let result = self.message(
                    "tool_result",
                    &session_id,
                    json!({
                        "call_id": call_id, "ok": true, "output": output,
                        "meta": { "tick": tick, "latency_ms": 0.0, "source": "bridge" },
                    }),
                );
                out.push(self.reply(conn, result));
                out
            }
            Ok(Admitted::Internal { output, ignored_fields, extra }) => {
                let tick = self.tick(now);
                let mut result = self.message(
                    "tool_result",
                    &session_id,
                    json!({
                        "call_id": call_id, "ok": true, "output": output,
                        "meta": { "tick": tick, "latency_ms": 0.0, "source": "bridge" },
                    }),
                );
                if !ignored_fields.is_empty() {
                    result["meta"]["ignored_fields"] = json!(ignored_fields);
                }
                let mut out = extra;
                out.push(self.reply(conn, result));
                out
            }
            Ok(Admitted::Execute {
                descriptor_id,
                input,
                ignored_fields,
                acquired_lease,
                command,
            }) => {
                let mut out = Vec::new();
                let deadline = options.deadline_ms.map(Duration::from_millis);
                let held = self.catalog.descriptor(descriptor_id).and_then(|d| {
                    self.config.approvals.reason_held(
                        d,
                        &input,
                        self.approval_mode,
                        self.hold.as_ref(),
                    )
                });
                let awaiting = held.map(|reason| Awaiting {
                    approval_id: self.ids.next_id(),
                    input: input.clone(),
                    deadline,
                    reason,
                    since: now,
                    expires: now + self.config.approvals.timeout,
                });
                if descriptor_id == STOP {
                    self.deny_all_waiting("the robot was stopped", now, &mut out);
                    if let Some(merged) = self.merged_stop(&session_id, now) {
                        // Nothing moved since the last stop ran: halted again
                        // at once, without its event to every session.
                        out.push(Output::Halt);
                        let tick = self.tick(now);
                        let result = self.message(
                            "tool_result",
                            &session_id,
                            json!({
                                "call_id": call_id, "ok": true, "output": merged,
                                "meta": { "tick": tick, "latency_ms": 0.0, "source": "bridge" },
                            }),
                        );
                        out.push(self.reply(conn, result));
                        return out;
                    }
                    self.counters.stops_run += 1;
                    self.moved_since_stop = false;
                    self.last_stop = Some((session_id.clone(), now));
                } else if command && awaiting.is_none() {
                    self.moved_since_stop = true;
                }
                let waits = awaiting.is_some();
                let session = self.sessions.get_mut(&session_id).expect("admitted");
                if let Some(key) = &options.idempotency_key {
                    session.idempotency.start(key, &call_id);
                }
                session.in_flight.insert(
                    call_id.clone(),
                    InFlight {
                        started: now,
                        tool: descriptor_id,
                        conn,
                        ignored_fields,
                        command,
                        idempotency_key: options.idempotency_key.clone(),
                        awaiting,
                    },
                );
                if acquired_lease {
                    self.broadcast_lease(now, &mut out);
                }
                if waits {
                    // Parked: announced to its agent and the admins; nothing runs until an operator decides.
                    let pending = self.pending_approvals(now).into_iter().find(|p| {
                        p["call_id"] == call_id.as_str()
                            && p["session"] == super::short_id(&session_id)
                    });
                    let payload = json!({ "call_id": call_id, "tool": descriptor_id, "state": "awaiting_approval", "reason": pending.as_ref().map(|p| p["reason"].clone()), "approval_id": pending.as_ref().map(|p| p["approval_id"].clone()), "expires_in_s": self.config.approvals.timeout.as_secs_f64() });
                    self.push_event(&session_id, "command", payload, now, &mut out);
                    self.announce_waiting(&session_id, &call_id, descriptor_id, now, &mut out);
                    return out;
                }
                if command {
                    let payload = json!({ "call_id": call_id, "tool": descriptor_id, "state": "accepted", "deadline_ms": options.deadline_ms });
                    self.push_event(&session_id, "command", payload, now, &mut out);
                }
                out.push(Output::Execute {
                    conn,
                    session: session_id,
                    call_id,
                    tool,
                    input,
                    deadline,
                });
                out
            }
        }
    }

    /// Every check a call must pass before it runs, in the order an agent
    /// can act on: unknown, not allowed, not now, not like this.
    fn admit(
        &mut self,
        session_id: &str,
        call_id: &str,
        tool: &str,
        input: Map<String, Value>,
        now: Instant,
    ) -> Result<Admitted, AiccError> {
        // The catalog's own descriptor (its schemas are large to copy per call).
        let catalog = self.catalog.clone();
        let descriptor: &ToolDescriptor =
            catalog.descriptor(tool).filter(|d| self.offered(d)).ok_or_else(|| {
                AiccError::new(
                    ErrorCode::ToolUnknown,
                    false,
                    format!("tool '{tool}' is not in the manifest"),
                )
            })?;
        let session = self.sessions.get(session_id).expect("attached session exists");
        if !self.capabilities_of(session.scope).contains(&descriptor.capability) {
            return Err(AiccError::new(ErrorCode::ToolUnavailable, false, format!("tool '{tool}' requires capability '{}', which this session's '{}' scope does not grant", descriptor.capability, session.scope.as_str())));
        }
        if let Some(reason) = self.unavailable.get(tool) {
            return Err(AiccError::new(
                ErrorCode::ToolUnavailable,
                true,
                format!("tool '{tool}' is unavailable now: {reason}"),
            ));
        }
        if session.in_flight.contains_key(call_id) {
            return Err(AiccError::invalid_input(format!(
                "call_id '{call_id}' is already in flight; use a new call_id per call"
            )));
        }
        let valid = self.catalog.validate(tool, input)?;
        // A stop is never refused for the calls in flight: an agent with its
        // every slot taken must still be able to halt the robot.
        if session.in_flight.len() >= self.config.max_calls_in_flight
            && descriptor.capability != crate::protocol::auth::CAN_HALT
        {
            return Err(AiccError::new(
                ErrorCode::ToolUnavailable,
                true,
                format!(
                    "{} calls already in flight (the limit); retry when one completes",
                    self.config.max_calls_in_flight
                ),
            ));
        }
        let needs_lease =
            descriptor.class == ToolClass::Actuator && descriptor.capability == "can_move_self";
        if needs_lease {
            self.lease.check(session_id).map_err(|held| {
                AiccError::new(ErrorCode::ToolUnavailable, true, held.to_string())
            })?;
        }
        let session = self.sessions.get_mut(session_id).expect("attached session exists");
        if let Some(limit) = descriptor.calls_per_minute {
            if let Err(wait) = session.limiter.try_call(tool, limit, now) {
                return Err(AiccError::new(ErrorCode::ToolUnavailable, true, format!("rate limit of {limit} calls per minute reached for '{tool}'; retry in {} ms", wait.as_millis())));
            }
        }
        let acquired_lease = needs_lease && self.lease.acquire(session_id, now);
        self.advance_event_tick();
        let mut extra = Vec::new();
        if let Some(answer) =
            self.answer_approval_tool(session_id, descriptor.id, &valid.input, now, &mut extra)
        {
            return Ok(match answer {
                Ok(output) => {
                    Admitted::Internal { output, ignored_fields: valid.ignored_fields, extra }
                }
                Err(error) => Admitted::Refused { error, extra },
            });
        }
        if let Some(answer) = self.answer_builtin(session_id, descriptor.id, &valid.input, now) {
            return answer.map(|answer| match answer {
                BuiltinAnswer::Output(output) => Admitted::Internal {
                    output,
                    ignored_fields: valid.ignored_fields,
                    extra: Vec::new(),
                },
                BuiltinAnswer::Cancel { target_conn, cancelled, output } => {
                    Admitted::Cancel { target_conn, cancelled, output }
                }
            });
        }
        Ok(Admitted::Execute {
            descriptor_id: descriptor.id,
            input: valid.input,
            ignored_fields: valid.ignored_fields,
            acquired_lease,
            command: descriptor.class == ToolClass::Actuator,
        })
    }

    /// A `stop` while nothing may have moved since the last one ran: its
    /// output, answered by the core (the shell halts again, cheaply). A
    /// flood of stops from many sessions so halts the robot once, and
    /// costs each session one reply, not an event to every session.
    fn merged_stop(&mut self, session_id: &str, now: Instant) -> Option<Value> {
        if self.moved_since_stop {
            return None;
        }
        let (by, at) = self.last_stop.as_ref()?;
        self.counters.stops_merged += 1;
        let ago_s = now.saturating_duration_since(*at).as_secs_f64();
        let action = format!("already stopped: nothing moved since the stop by session {} {ago_s:.2} s ago; setpoints dropped again", super::short_id(by));
        Some(
            json!({ "stopped": { "base": { "action": action } }, "by": super::short_id(session_id), "merged": true, "duration_s": 0.0 }),
        )
    }

    /// The result of a call refused before it ran.
    fn failed_result(
        &mut self,
        conn: ConnId,
        session_id: &str,
        correlation: &Correlation,
        error: AiccError,
        now: Instant,
    ) -> Output {
        let tick = self.tick(now);
        let result = self.message(
            "tool_result",
            session_id,
            json!({
                "call_id": correlation.call_id,
                "in_reply_to": correlation.message_id,
                "ok": false,
                "error": error.to_json(),
                "meta": { "tick": tick, "latency_ms": 0.0, "source": "bridge" },
            }),
        );
        self.reply(conn, result)
    }

    pub(super) fn finish_call(
        &mut self,
        session_id: &str,
        call_id: &str,
        outcome: Result<ToolSuccess, AiccError>,
        now: Instant,
    ) -> Vec<Output> {
        let Some(session) = self.sessions.get_mut(session_id) else { return Vec::new() };
        let Some(flight) = session.in_flight.remove(call_id) else { return Vec::new() };
        // The holder acting keeps the lease.
        self.lease.renew(session_id, now);
        let tick = self.tick(now);
        let latency_ms = now.saturating_duration_since(flight.started).as_secs_f64() * 1e3;
        let mut message = match outcome {
            Ok(success) => {
                let mut body = json!({
                    "call_id": call_id, "ok": true,
                    "meta": { "tick": tick, "latency_ms": latency_ms, "source": success.source },
                });
                // Moved in: json! copies what it interpolates (a whole image, for vision).
                body["output"] = success.output;
                self.message("tool_result", session_id, body)
            }
            Err(error) => {
                self.counters.tool_errors += 1;
                if error.code == ErrorCode::InternalError {
                    self.last_error = Some(format!("{call_id}: {}", error.message));
                }
                self.message(
                    "tool_result",
                    session_id,
                    json!({
                        "call_id": call_id, "ok": false, "error": error.to_json(),
                        "meta": { "tick": tick, "latency_ms": latency_ms, "source": "bridge" },
                    }),
                )
            }
        };
        if !flight.ignored_fields.is_empty() {
            message["meta"]["ignored_fields"] = json!(flight.ignored_fields);
        }
        let mut out = Vec::new();
        if flight.command {
            let error = (message["ok"] == false).then(|| message["error"].clone());
            self.command_completed(session_id, call_id, flight.tool, error, now, &mut out);
        }
        let session = self.sessions.get_mut(session_id).expect("checked above");
        if let Some(key) = &flight.idempotency_key {
            session.idempotency.complete(key, &message);
        }
        session.memory.remember(tick, now, "tool_result", flight.tool, &message);
        match session.conn {
            Some(conn) if conn == flight.conn => {
                out.push(Output::Send { conn, message, droppable: false })
            }
            _ => self.push_event(
                session_id,
                "tool_result",
                json!({ "result": message }),
                now,
                &mut out,
            ),
        }
        out
    }

    /// A call cut off by its session losing the connection: recorded as
    /// `call_aborted`, a command completes as failed, and its idempotency
    /// key is freed (it did not complete: a retry may run it).
    pub(super) fn abort_call(
        &mut self,
        session_id: &str,
        call_id: &str,
        flight: &InFlight,
        reason: &str,
        now: Instant,
        out: &mut Vec<Output>,
    ) {
        let payload = json!({ "call_id": call_id, "tool": flight.tool, "reason": reason });
        self.push_event(session_id, "call_aborted", payload, now, out);
        if let Some(waiting) = &flight.awaiting {
            let audit = json!({ "decision": "withdrawn", "approval_id": waiting.approval_id, "session": super::short_id(session_id), "call_id": call_id, "tool": flight.tool, "why": reason });
            self.tell_admins(audit, now, out);
        }
        if flight.command {
            let error = AiccError::execution_failed(
                false,
                format!("aborted: {reason}; the robot was stopped"),
            );
            self.command_completed(
                session_id,
                call_id,
                flight.tool,
                Some(error.to_json()),
                now,
                out,
            );
        }
        if let (Some(session), Some(key)) =
            (self.sessions.get_mut(session_id), flight.idempotency_key.as_deref())
        {
            session.idempotency.forget_running(key);
        }
    }

    /// The one completion event every accepted command ends with.
    fn command_completed(
        &mut self,
        session_id: &str,
        call_id: &str,
        tool: &str,
        error: Option<Value>,
        now: Instant,
        out: &mut Vec<Output>,
    ) {
        let payload = json!({ "call_id": call_id, "tool": tool, "state": "completed", "ok": error.is_none(), "error": error });
        self.push_event(session_id, "command", payload, now, out);
    }
}
