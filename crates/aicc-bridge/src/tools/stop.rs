//! `stop`: halts all motion at once, for any session (capability
//! `can_halt`, which every scope grants, observe included), whether or not
//! it holds the motion lease: a bystander, or a supervisor watching through
//! the sensors, must be able to stop a robot that another agent drives. The base brakes at the
//! emergency rate; the head and arm are sent a short trajectory that holds
//! their current positions, which preempts any goal they were following;
//! every session is told by a `governor` event.
//!
//! The base driver's `halt` refuses every later setpoint of motions begun
//! before it, so a tool still running cannot override the stop; head and
//! arm tools check the same generation and end.
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::reject_unknown_fields;
use super::shared::fresh::fresh_joint_states;
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::robot::{Controller, Diagnostic, Endpoint, JointStates, TrajectoryGoal};

/// The time the hold trajectory takes: short, so that the joints stop
/// almost where they are.
const HOLD_TIME_S: f64 = 0.1;
/// How long to wait for the controllers to accept the hold.
const HOLD_WAIT: Duration = Duration::from_secs(1);
/// Most characters of an optional reason.
const MAX_REASON_CHARS: usize = 200;

pub struct Stop;

/// A short session id for events (the first 8 characters).
pub fn short_id(session: &str) -> &str {
    let end = session.char_indices().nth(8).map_or(session.len(), |(i, _)| i);
    &session[..end]
}

/// A trajectory that holds `joints` at their measured positions (brought
/// within the URDF limits, since a sensor may read slightly outside them).
fn hold_goal(ctx: &ToolContext, joints: &[String], states: &JointStates) -> Result<TrajectoryGoal, String> {
    let mut positions = Vec::with_capacity(joints.len());
    for name in joints {
        let measured = states.position(name).ok_or_else(|| format!("{name} is not in the joint states"))?;
        ctx.joints.limits().joint(name).map_err(|e| e.to_string())?;
        positions.push(ctx.joints.clamp_to_limits(name, measured));
    }
    Ok(TrajectoryGoal { joint_names: joints.to_vec(), points: vec![(positions, HOLD_TIME_S)] })
}

/// Holds one controller; says what happened.
async fn hold(ctx: &ToolContext, controller: Controller, action: &str, joints: &[String], states: &Result<JointStates, AiccError>) -> Value {
    if action.is_empty() || joints.is_empty() {
        return json!("not configured");
    }
    let states = match states {
        Ok(states) => states,
        Err(error) => return json!(format!("not held: {}", error.message)),
    };
    let goal = match hold_goal(ctx, joints, states) {
        Ok(goal) => goal,
        Err(error) => return json!(format!("not held: {error}")),
    };
    let sent = match ctx.joints.follow(controller, goal, None) {
        Ok(sent) => sent,
        Err(error) => return json!(format!("not held: {error}")),
    };
    match tokio::time::timeout(HOLD_WAIT, sent).await {
        Ok(Ok(outcome)) if outcome.error_code == 0 => json!("held at its current position"),
        Ok(Ok(outcome)) => json!(format!("hold ended with error_code {}: {}", outcome.error_code, outcome.error_string)),
        Ok(Err(error)) => json!(format!("hold not accepted: {error}")),
        // Dropping the goal cancels it, and a cancelled goal holds too.
        Err(_) => json!("hold sent (no result within 1 s)"),
    }
}

impl Tool for Stop {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "stop",
            class: ToolClass::Actuator,
            description: "Halt ALL motion at once: the base brakes, the head and the arm hold where they are, and any running turn/look_at/interact call ends. Any session may call it, observers included, with or without the motion lease (capability can_halt: it stops motion and can start none, so it never waits for the lease). The gripper is left as it is (it may be holding something). Every session gets a `governor` event {kind: \"stop\", by}.",
            capability: crate::protocol::auth::CAN_HALT,
            strict_input: true,
            // Per session; generous, so that it never blocks a real stop,
            // but bounded, because each call raises an event for everyone.
            calls_per_minute: Some(120),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "reason": { "type": "string", "maxLength": MAX_REASON_CHARS, "description": "why (shown to the other sessions)" }
                },
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "stopped": { "type": "object", "properties": { "base": {"type": "object"}, "head": {}, "arm": {}, "gripper": {"type": "string"} } },
                    "by": { "type": "string" },
                    "duration_s": { "type": "number" }
                },
                "required": ["stopped", "by"]
            }),
        }
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            reject_unknown_fields(&input, &["reason"])?;
            let reason = match input.get("reason") {
                None => None,
                Some(Value::String(text)) if text.chars().count() <= MAX_REASON_CHARS => Some(text.chars().filter(|c| !c.is_control()).collect::<String>()),
                Some(Value::String(_)) => return Err(AiccError::invalid_input(format!("input.reason is longer than {MAX_REASON_CHARS} characters"))),
                Some(_) => return Err(AiccError::invalid_input("input.reason must be a string")),
            };
            let started = Instant::now();
            // First the base (no await before it), then tell running tools.
            let command_before = ctx.base.last_command();
            ctx.base.halt();
            let by = short_id(&ctx.session).to_string();
            tracing::warn!(by, reason = reason.as_deref().unwrap_or(""), "stop: halting all motion");

            let actuators = &ctx.config.actuators;
            let states = fresh_joint_states(&ctx);
            let (head, arm) = futures::join!(
                hold(&ctx, Controller::Head, &actuators.head_action, &actuators.head_joints, &states),
                hold(&ctx, Controller::Arm, &actuators.arm_action, &actuators.arm_joints, &states),
            );
            let stopped = json!({
                "base": {
                    "was_commanded": { "linear_mps": command_before.linear_mps, "angular_radps": command_before.angular_radps },
                    "action": "setpoint dropped; braking at the emergency deceleration",
                },
                "head": head,
                "arm": arm,
                "gripper": "left as it is",
            });
            ctx.event_for_all("governor", json!({ "kind": "stop", "by": by, "call_id": ctx.call_id, "reason": reason, "stopped": stopped }));
            ctx.signals.publish_diagnostics(&[Diagnostic {
                level: 1,
                name: "aicc_bridge: stop".into(),
                message: format!("stop called by session {by}"),
                values: vec![("by".into(), by.clone()), ("reason".into(), reason.clone().unwrap_or_default())],
            }]);
            Ok(ToolSuccess {
                output: json!({ "stopped": stopped, "by": by, "reason": reason, "duration_s": started.elapsed().as_secs_f64() }),
                source: format!("{} {} {}", ctx.base.endpoint(), ctx.joints.endpoint(Endpoint::Head), ctx.joints.endpoint(Endpoint::Arm)),
            })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_take_eight_characters_at_most() {
        assert_eq!(short_id("0123456789abcdef"), "01234567");
        assert_eq!(short_id("abc"), "abc");
        assert_eq!(short_id(""), "");
    }

}
