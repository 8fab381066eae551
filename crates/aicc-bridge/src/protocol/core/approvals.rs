//! Operator approvals: calls the configuration names wait, parked in the
//! core, until an admin-scope session approves or denies them or the
//! approval timeout lapses. Held here, in the core, so that they hold for
//! every front end (AICC, the AI-control dialect, MCP through AICC).
//!
//! Who may decide: an operator, never the caller. An approval or denial
//! from the session whose call waits, or from any session opened with the
//! same token, is refused and audited (an agent given an admin token still
//! cannot approve itself). The operator's hold (`hold`, the console's
//! STOP) makes every actuator call wait like approval mode, but only its
//! own release ends it: switching approval mode off does not.
//!
//! A waiting call is in its session's calls in flight (it counts against
//! the bound, `cancel` finds it, a lost connection aborts it) but nothing
//! was asked of the shell: only an approval turns it into an
//! [`Output::Execute`]. Denial and timeout end it with a non-retryable
//! error, the robot untouched. Each approval is known by an id the core
//! hands out; once it is decided the id is spent, so that an approval
//! replayed, or one for a call that is no longer waiting (its session
//! gone, cancelled, stopped), is refused and logged.
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::calls::Awaiting;
use super::{short_id, Core, Output};
use crate::protocol::auth::Scope;
use crate::protocol::error::{AiccError, ErrorCode};
use crate::protocol::manifest::{ToolClass, ToolDescriptor};

pub const APPROVALS_LIST: &str = "approvals_list";
pub const APPROVE: &str = "approve";
pub const DENY: &str = "deny";
pub const APPROVAL_MODE: &str = "approval_mode";
pub const HOLD: &str = "hold";
/// The event topic admins are told of every decision on.
pub const APPROVAL_TOPIC: &str = "approval";
/// Tools never held for approval: stopping and the bridge's own.
const NEVER_HELD: &[&str] = &["stop", "cancel"];

/// What needs an operator's approval (`approvals` in the configuration).
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRules {
    /// Tools whose every call waits (e.g. `interact`).
    pub tools: Vec<String>,
    /// A `move` whose planned distance (`forward`, `left`, or
    /// |velocity| × duration) exceeds this waits; None: no such rule.
    pub move_longer_than_m: Option<f64>,
    /// Approval mode at start: every actuator call but `stop` waits.
    /// Admins switch it with `approval_mode`.
    pub approval_mode: bool,
    /// A call not decided within this ends with an error.
    pub timeout: Duration,
}

impl Default for ApprovalRules {
    fn default() -> Self {
        Self {
            tools: Vec::new(),
            move_longer_than_m: None,
            approval_mode: false,
            timeout: Duration::from_secs(60),
        }
    }
}

/// An operator's hold on the robot: who set it, when, and why.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Hold {
    pub(super) by: String,
    pub(super) since: Instant,
    pub(super) reason: String,
}

impl Hold {
    pub(super) fn to_json(&self, now: Instant) -> Value {
        json!({ "by": self.by, "reason": self.reason, "held_for_s": now.saturating_duration_since(self.since).as_secs_f64() })
    }
}

impl ApprovalRules {
    /// Why a call of `descriptor` with `input` must wait, or None. `held`:
    /// the operator's hold, when one is on.
    pub(super) fn reason_held(
        &self,
        descriptor: &ToolDescriptor,
        input: &Map<String, Value>,
        mode_on: bool,
        held: Option<&Hold>,
    ) -> Option<String> {
        match (held, self.reason(descriptor, input, mode_on)) {
            (_, Some(reason)) => Some(reason),
            (Some(hold), None) if descriptor.class == ToolClass::Actuator && !NEVER_HELD.contains(&descriptor.id) && descriptor.capability != "can_administer_bridge" => {
                Some(format!("the robot is held by an operator ({}): every actuator call waits for an operator until the hold is released", hold.reason))
            }
            _ => None,
        }
    }

    /// Why a call of `descriptor` with `input` must wait, or None.
    pub fn reason(
        &self,
        descriptor: &ToolDescriptor,
        input: &Map<String, Value>,
        mode_on: bool,
    ) -> Option<String> {
        if NEVER_HELD.contains(&descriptor.id) || descriptor.capability == "can_administer_bridge" {
            return None;
        }
        if self.tools.iter().any(|t| t == descriptor.id) {
            return Some(format!(
                "'{}' needs an operator's approval (approvals.tools)",
                descriptor.id
            ));
        }
        if let (Some(limit), "move") = (self.move_longer_than_m, descriptor.id) {
            let number = |key: &str| input.get(key).and_then(Value::as_f64).unwrap_or(0.0);
            let planned = number("forward")
                .hypot(number("left"))
                .max(number("velocity_mps").abs() * number("duration_s"));
            if planned > limit {
                return Some(format!("a move of {planned:.2} m is longer than {limit} m (approvals.move_longer_than_m)"));
            }
        }
        if mode_on && descriptor.class == ToolClass::Actuator {
            return Some(
                "approval mode is on: every actuator call needs an operator's approval".into(),
            );
        }
        None
    }
}

/// How a waiting call was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    Approved,
    Denied,
    TimedOut,
}

impl Decision {
    fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Denied => "denied",
            Decision::TimedOut => "timed_out",
        }
    }
}

impl Core {
    /// Where the call with approval id `approval_id` waits: (session, call_id).
    fn find_waiting(&self, approval_id: &str) -> Option<(String, String)> {
        self.sessions.iter().find_map(|(sid, s)| {
            s.in_flight
                .iter()
                .find(|(_, f)| f.awaiting.as_ref().is_some_and(|a| a.approval_id == approval_id))
                .map(|(cid, _)| (sid.clone(), cid.clone()))
        })
    }

    /// Every call waiting for approval, oldest first.
    pub fn pending_approvals(&self, now: Instant) -> Vec<Value> {
        let mut pending: Vec<(Instant, Value)> = Vec::new();
        for (sid, session) in &self.sessions {
            for (call_id, flight) in &session.in_flight {
                if let Some(waiting) = &flight.awaiting {
                    pending.push((waiting.since, json!({
                        "approval_id": waiting.approval_id,
                        "session": short_id(sid),
                        "call_id": call_id,
                        "tool": flight.tool,
                        "input": Value::Object(waiting.input.clone()),
                        "reason": waiting.reason,
                        "waiting_s": now.saturating_duration_since(waiting.since).as_secs_f64(),
                        "expires_in_s": waiting.expires.saturating_duration_since(now).as_secs_f64(),
                    })));
                }
            }
        }
        pending.sort_by_key(|(since, _)| *since);
        pending.into_iter().map(|(_, v)| v).collect()
    }

    pub fn approval_mode(&self) -> bool {
        self.approval_mode
    }

    /// Whether an operator's hold is on.
    pub fn held(&self) -> bool {
        self.hold.is_some()
    }

    /// Why `decider` may not decide the call waiting in `waiting_session`:
    /// it is that session, or was opened with the same credential.
    fn may_not_decide(&self, decider: &str, waiting_session: &str) -> Option<String> {
        if decider == waiting_session {
            return Some("it is this session's own call".into());
        }
        let (decider, waiting) = (self.sessions.get(decider)?, self.sessions.get(waiting_session)?);
        (decider.credential == waiting.credential).then(|| {
            format!(
                "the call's session was opened with the same credential ({})",
                waiting.credential.describe()
            )
        })
    }

    /// The admin tools `approvals_list`, `approve`, `deny` and
    /// `approval_mode` (None for any other tool). `decider` is the admin's
    /// session.
    pub(super) fn answer_approval_tool(
        &mut self,
        decider: &str,
        tool: &str,
        input: &Map<String, Value>,
        now: Instant,
        out: &mut Vec<Output>,
    ) -> Option<Result<Value, AiccError>> {
        let answer = match tool {
            APPROVALS_LIST => Ok(
                json!({ "pending": self.pending_approvals(now), "approval_mode": self.approval_mode, "timeout_s": self.config.approvals.timeout.as_secs_f64() }),
            ),
            APPROVAL_MODE => {
                let on = input.get("on").and_then(Value::as_bool).unwrap_or(false);
                self.approval_mode = on;
                tracing::info!(by = short_id(decider), on, "approval mode switched");
                self.tell_admins(
                    json!({ "decision": "approval_mode", "on": on, "by": short_id(decider) }),
                    now,
                    out,
                );
                // The operator's hold is not approval mode: it stays until released.
                Ok(json!({ "approval_mode": on, "held": self.hold.is_some() }))
            }
            HOLD => {
                let on = input.get("on").and_then(Value::as_bool).unwrap_or(false);
                let reason = input
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("held by an operator")
                    .to_string();
                let was = self.hold.take();
                if on {
                    self.hold = Some(was.unwrap_or(Hold {
                        by: short_id(decider).to_string(),
                        since: now,
                        reason,
                    }));
                    tracing::warn!(
                        by = short_id(decider),
                        "operator's hold on: every actuator call waits for an operator"
                    );
                } else if was.is_some() {
                    tracing::info!(by = short_id(decider), "operator's hold released");
                }
                self.tell_admins(
                    json!({ "decision": "hold", "on": on, "by": short_id(decider) }),
                    now,
                    out,
                );
                Ok(
                    json!({ "held": on, "approval_mode": self.approval_mode, "hold": self.hold.as_ref().map(|h| h.to_json(now)) }),
                )
            }
            APPROVE | DENY => {
                let approval_id = input
                    .get("approval_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let reason = input.get("reason").and_then(Value::as_str).unwrap_or("").to_string();
                let waiting = self.find_waiting(&approval_id).map(|(session, call_id)| {
                    let refusal = self.may_not_decide(decider, &session);
                    (session, call_id, refusal)
                });
                match waiting {
                    None => {
                        tracing::warn!(by = short_id(decider), approval_id, tool, "refused: no call waits for this approval (decided already, cancelled, or its session ended)");
                        self.tell_admins(json!({ "decision": "refused", "attempt": tool, "approval_id": approval_id, "by": short_id(decider), "why": "no call is waiting for this approval" }), now, out);
                        Err(AiccError::new(ErrorCode::InvalidInput, false, format!("input.approval_id: no call is waiting for approval '{approval_id}' (decided already, cancelled, timed out, or its session ended); see approvals_list")))
                    }
                    Some((session, call_id, Some(why))) => {
                        self.counters.decisions_refused += 1;
                        tracing::warn!(
                            by = short_id(decider),
                            approval_id,
                            tool,
                            session = short_id(&session),
                            call_id,
                            why,
                            "refused: a decision from the caller's own side"
                        );
                        self.tell_admins(json!({ "decision": "refused", "attempt": tool, "approval_id": approval_id, "session": short_id(&session), "call_id": call_id, "by": short_id(decider), "why": format!("who may decide: {why}") }), now, out);
                        Err(AiccError::new(ErrorCode::ToolUnavailable, false, format!("who may decide: approval '{approval_id}' may not be decided by this session: {why}. An operator decides it, from another session with another token (the console, or `aicc approvals` with AICC_OPERATOR_TOKEN); the attempt was audited")))
                    }
                    Some((session, call_id, None)) => {
                        let decision =
                            if tool == APPROVE { Decision::Approved } else { Decision::Denied };
                        let decided =
                            self.decide(&session, &call_id, decision, decider, &reason, now, out);
                        Ok(
                            json!({ "approval_id": approval_id, "decision": decision.as_str(), "call_id": call_id, "tool": decided }),
                        )
                    }
                }
            }
            _ => return None,
        };
        Some(answer)
    }

    /// Ends a call's wait: an approval runs it, a denial or timeout ends it
    /// with a non-retryable error. Audited to the call's session (a
    /// `command` event), to every admin (an `approval` event) and the log.
    /// Returns the tool.
    #[allow(
        clippy::too_many_arguments,
        reason = "the decision and its audit trail: each argument is one fact of it"
    )]
    pub(super) fn decide(
        &mut self,
        session_id: &str,
        call_id: &str,
        decision: Decision,
        decider: &str,
        reason: &str,
        now: Instant,
        out: &mut Vec<Output>,
    ) -> &'static str {
        let session = self.sessions.get_mut(session_id).expect("a waiting call's session");
        let flight = session.in_flight.get_mut(call_id).expect("a waiting call");
        let waiting: Awaiting = flight.awaiting.take().expect("waiting");
        if decision == Decision::Approved {
            // Its latency counts from the approval: the wait is the operator's.
            flight.started = now;
        }
        let tool = flight.tool;
        let conn = flight.conn;
        tracing::info!(
            session = short_id(session_id),
            call_id,
            tool,
            decision = decision.as_str(),
            by = short_id(decider),
            reason,
            "approval decided"
        );
        let audit = json!({
            "decision": decision.as_str(), "approval_id": waiting.approval_id, "session": short_id(session_id), "call_id": call_id, "tool": tool,
            "by": short_id(decider), "reason": reason, "waited_s": now.saturating_duration_since(waiting.since).as_secs_f64(),
        });
        self.tell_admins(audit, now, out);
        match decision {
            Decision::Approved => {
                self.moved_since_stop = true;
                let payload = json!({ "call_id": call_id, "tool": tool, "state": "accepted", "approved_by": short_id(decider), "deadline_ms": waiting.deadline.map(|d| d.as_millis() as u64) });
                self.push_event(session_id, "command", payload, now, out);
                out.push(Output::Execute {
                    conn,
                    session: session_id.to_string(),
                    call_id: call_id.to_string(),
                    tool: tool.to_string(),
                    input: waiting.input,
                    deadline: waiting.deadline,
                });
            }
            Decision::Denied | Decision::TimedOut => {
                let why = if decision == Decision::Denied {
                    format!(
                        "denied by an operator{}{}; nothing was moved",
                        if reason.is_empty() { "" } else { ": " },
                        reason
                    )
                } else {
                    format!("no operator approved it within {} s (approvals.timeout_s); nothing was moved", self.config.approvals.timeout.as_secs_f64())
                };
                let error = AiccError::execution_failed(false, why);
                out.extend(self.finish_call(session_id, call_id, Err(error), now));
            }
        }
        tool
    }

    /// Calls waiting past the approval timeout end.
    pub(super) fn time_out_approvals(&mut self, now: Instant, out: &mut Vec<Output>) {
        let expired: Vec<(String, String)> = self
            .sessions
            .iter()
            .flat_map(|(sid, s)| {
                s.in_flight
                    .iter()
                    .filter(|(_, f)| f.awaiting.as_ref().is_some_and(|a| now >= a.expires))
                    .map(move |(cid, _)| (sid.clone(), cid.clone()))
            })
            .collect();
        for (session, call_id) in expired {
            self.decide(
                &session,
                &call_id,
                Decision::TimedOut,
                "bridge",
                "approval timeout",
                now,
                out,
            );
        }
    }

    /// `stop` ends every waiting call too: a call approved after a stop
    /// would move a robot its operator meant to stop.
    pub(super) fn deny_all_waiting(&mut self, reason: &str, now: Instant, out: &mut Vec<Output>) {
        let waiting: Vec<(String, String)> = self
            .sessions
            .iter()
            .flat_map(|(sid, s)| {
                s.in_flight
                    .iter()
                    .filter(|(_, f)| f.awaiting.is_some())
                    .map(move |(cid, _)| (sid.clone(), cid.clone()))
            })
            .collect();
        for (session, call_id) in waiting {
            self.decide(&session, &call_id, Decision::Denied, "bridge", reason, now, out);
        }
    }

    /// An `approval` event to every admin session.
    pub(super) fn tell_admins(&mut self, payload: Value, now: Instant, out: &mut Vec<Output>) {
        let admins: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.scope == Scope::Admin)
            .map(|(id, _)| id.clone())
            .collect();
        for admin in admins {
            self.push_event(&admin, APPROVAL_TOPIC, payload.clone(), now, out);
        }
    }

    /// The audit of a call starting to wait.
    pub(super) fn announce_waiting(
        &mut self,
        session_id: &str,
        call_id: &str,
        tool: &str,
        now: Instant,
        out: &mut Vec<Output>,
    ) {
        let Some(entry) = self
            .pending_approvals(now)
            .into_iter()
            .find(|p| p["call_id"] == call_id && p["session"] == short_id(session_id))
        else {
            return;
        };
        tracing::info!(
            session = short_id(session_id),
            call_id,
            tool,
            reason = entry["reason"].as_str(),
            "call awaiting an operator's approval"
        );
        let mut payload = entry.clone();
        payload["decision"] = json!("awaiting");
        self.tell_admins(payload, now, out);
    }
}

/// Descriptors of the approval tools (admin scope).
pub fn approval_tool_descriptors() -> Vec<ToolDescriptor> {
    let decide_schema = json!({
        "type": "object",
        "properties": {
            "approval_id": { "type": "string", "minLength": 1, "maxLength": 100 },
            "reason": { "type": "string", "maxLength": 200 }
        },
        "required": ["approval_id"],
        "additionalProperties": false
    });
    let decided = json!({ "type": "object", "properties": { "approval_id": { "type": "string" }, "decision": { "type": "string" }, "call_id": { "type": "string" }, "tool": { "type": "string" } }, "required": ["decision"] });
    vec![
        ToolDescriptor {
            id: APPROVALS_LIST,
            class: ToolClass::Sensor,
            description: "Operators: the calls waiting for an approval (approval_id, session, call, tool, input, why it waits, time left), and whether approval mode is on.",
            capability: "can_administer_bridge",
            strict_input: true,
            calls_per_minute: Some(600),
            input_schema: json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            output_schema: json!({ "type": "object", "properties": { "pending": { "type": "array" }, "approval_mode": { "type": "boolean" } }, "required": ["pending"] }),
        },
        ToolDescriptor {
            id: APPROVE,
            class: ToolClass::Actuator,
            description: "Operators: approve a waiting call (by approval_id from approvals_list); it runs at once.",
            capability: "can_administer_bridge",
            strict_input: true,
            calls_per_minute: Some(120),
            input_schema: decide_schema.clone(),
            output_schema: decided.clone(),
        },
        ToolDescriptor {
            id: DENY,
            class: ToolClass::Actuator,
            description: "Operators: deny a waiting call (by approval_id); it ends with a non-retryable error and nothing moves.",
            capability: "can_administer_bridge",
            strict_input: true,
            calls_per_minute: Some(120),
            input_schema: decide_schema,
            output_schema: decided,
        },
        ToolDescriptor {
            id: APPROVAL_MODE,
            class: ToolClass::Actuator,
            description: "Operators: switch approval mode, in which every actuator call but stop waits for an operator's approval. It does not release an operator's hold (see hold).",
            capability: "can_administer_bridge",
            strict_input: true,
            calls_per_minute: Some(60),
            input_schema: json!({ "type": "object", "properties": { "on": { "type": "boolean" } }, "required": ["on"], "additionalProperties": false }),
            output_schema: json!({ "type": "object", "properties": { "approval_mode": { "type": "boolean" }, "held": { "type": "boolean" } }, "required": ["approval_mode"] }),
        },
        ToolDescriptor {
            id: HOLD,
            class: ToolClass::Actuator,
            description: "Operators: hold the robot (on: every actuator call but stop waits for an operator's approval, as after the console's STOP) or release the hold (off). Only this releases it; approval_mode does not.",
            capability: "can_administer_bridge",
            strict_input: true,
            calls_per_minute: Some(60),
            input_schema: json!({ "type": "object", "properties": { "on": { "type": "boolean" }, "reason": { "type": "string", "maxLength": 200 } }, "required": ["on"], "additionalProperties": false }),
            output_schema: json!({ "type": "object", "properties": { "held": { "type": "boolean" }, "approval_mode": { "type": "boolean" }, "hold": {} }, "required": ["held"] }),
        },
    ]
}
