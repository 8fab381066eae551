//! `stop`: halts all motion at once, for any session (capability
//! `can_halt`, which every scope grants, observe included), whether or not
//! it holds the motion lease: a bystander, or a supervisor watching through
//! the sensors, must be able to stop a robot that another agent drives. The base brakes at the
//! emergency rate; a head or arm goal running is cancelled and the joints
//! hold where they are (the controller's cancel on an action; on a
//! trajectory topic one waypoint where the joints are now, at rest), never
//! sent back to a position measured earlier; every session is told by a
//! `governor` event.
//!
//! The halt raises the stop generation the base and joint drivers share:
//! the base refuses every later setpoint of motions begun before it, and
//! no joint goal of a motion begun before it is sent any more, even one
//! still waiting for its action server.
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::reject_unknown_fields;
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::robot::joint_driver::HaltedGoal;
use crate::robot::{Diagnostic, Endpoint};

/// How long to wait for the controllers to confirm the cancels.
const HOLD_WAIT: Duration = Duration::from_secs(1);
/// Most characters of an optional reason.
const MAX_REASON_CHARS: usize = 200;

pub struct Stop;

/// A short session id for events (the first 8 characters).
pub fn short_id(session: &str) -> &str {
    let end = session.char_indices().nth(8).map_or(session.len(), |(i, _)| i);
    &session[..end]
}

/// What became of one controller's goals under the halt.
fn joint_report(
    halted: &[HaltedGoal],
    endpoint: Endpoint,
    action: &str,
    joints: &[String],
) -> Value {
    if action.is_empty() || joints.is_empty() {
        return json!("not configured");
    }
    let hows: Vec<&str> =
        halted.iter().filter(|h| h.endpoint == endpoint).map(|h| h.how.as_str()).collect();
    if hows.is_empty() {
        return json!("no goal was running: the controller holds where the joints are");
    }
    json!(hows.join("; "))
}

impl Tool for Stop {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "stop",
            class: ToolClass::Actuator,
            description: "Halt ALL motion at once: the base brakes, the head and the arm stop and hold where they are (their running goals cancelled; goals not yet sent are refused), and any running turn/look_at/interact call ends. Any session may call it, observers included, with or without the motion lease (capability can_halt: it stops motion and can start none, so it never waits for the lease). The gripper is left as it is (it may be holding something). Every session gets a `governor` event {kind: \"stop\", by}.",
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
            let halted = ctx.joints.settle_halt(HOLD_WAIT).await;
            let head = joint_report(&halted, Endpoint::Head, &actuators.head_action, &actuators.head_joints);
            let arm = joint_report(&halted, Endpoint::Arm, &actuators.arm_action, &actuators.arm_joints);
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

    #[test]
    fn each_controller_is_reported_by_what_became_of_its_goals() {
        let joints = vec!["j".to_string()];
        let halted = [HaltedGoal {
            endpoint: Endpoint::Arm,
            how: "arm: stopped by a stop (goal cancelled)".into(),
        }];
        assert_eq!(
            joint_report(&halted, Endpoint::Arm, "arm_controller/follow_joint_trajectory", &joints),
            json!("arm: stopped by a stop (goal cancelled)")
        );
        assert_eq!(
            joint_report(
                &halted,
                Endpoint::Head,
                "head_controller/follow_joint_trajectory",
                &joints
            ),
            json!("no goal was running: the controller holds where the joints are")
        );
        assert_eq!(joint_report(&halted, Endpoint::Head, "", &joints), json!("not configured"));
    }
}
