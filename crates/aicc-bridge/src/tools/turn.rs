//! `turn`: rotate the base in place by a relative yaw in DEGREES (AICC
//! Appendix A: `{"yaw": -45}`; positive = counter-clockwise, REP-103),
//! closed on odometry yaw, with a rate profile within the governor's limits.
//! An optional `pitch` tilts the head at the same time (as `look_at`).
//! The result states the rotation achieved.
use std::time::Instant;

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::{optional_number, reject_unknown_fields};
use super::shared::fresh::{fresh_joint_states, odometry_missing};
use super::shared::head::{plan_head, run_head};
use super::shared::joints::deg;
use super::shared::motion as base_motion;
use super::{Tool, ToolContext, ToolFuture};
use crate::config::BaseConfig;
use crate::motion::profile::{PLANNING_ACCEL_SHARE, TOLERANCE_RAD};
use crate::motion::Segment;
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::robot::Sensor;

/// Largest turn in one call, degrees (either way).
pub const MAX_TURN_DEG: f64 = 360.0;

pub struct Turn {
    max_rate_radps: f64,
}

impl Turn {
    pub fn new(base: &BaseConfig) -> Self {
        Self { max_rate_radps: base.max_angular_radps }
    }
}

impl Tool for Turn {
    fn descriptor(&self) -> ToolDescriptor {
        let max_rate_dps = deg(self.max_rate_radps);
        ToolDescriptor {
            id: "turn",
            class: ToolClass::Actuator,
            description: "Rotate the robot in place by `yaw` DEGREES relative to its current heading: positive = counter-clockwise (left), negative = right; up to one full turn either way. Optional `pitch` (degrees, positive looks DOWN) tilts the camera head at the same time. Closed on odometry; returns when the robot has stopped, with the rotation achieved.",
            capability: "can_move_self",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "yaw": { "type": "number", "description": "degrees to rotate; positive = left (counter-clockwise)", "minimum": -MAX_TURN_DEG, "maximum": MAX_TURN_DEG },
                    "pitch": { "type": "number", "description": "head tilt to set, degrees; positive looks down (the joint limit from the URDF applies)", "minimum": -90, "maximum": 90 },
                    "speed_dps": { "type": "number", "description": "largest rotation rate, degrees/s (default and maximum: the base's limit)", "exclusiveMinimum": 0, "maximum": max_rate_dps }
                },
                "required": ["yaw"],
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "requested": { "type": "object" },
                    "achieved": { "type": "object", "properties": { "yaw_deg": {"type": "number"}, "yaw_rad": {"type": "number"} } },
                    "error_deg": { "type": "number" },
                    "duration_s": { "type": "number" },
                    "applied": { "type": "object" },
                    "head": { "type": ["object", "null"] }
                },
                "required": ["requested", "achieved", "duration_s", "applied"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        odometry_missing(ctx, now)
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        let max_rate_radps = self.max_rate_radps;
        async move {
            reject_unknown_fields(&input, &["yaw", "pitch", "speed_dps"])?;
            let yaw_deg = optional_number(&input, "yaw", -MAX_TURN_DEG, MAX_TURN_DEG)?.ok_or_else(|| AiccError::invalid_input("input.yaw is required (degrees, positive = left)"))?;
            let pitch_deg = optional_number(&input, "pitch", -90.0, 90.0)?;
            let speed_dps = optional_number(&input, "speed_dps", 0.0, f64::MAX)?;
            if speed_dps == Some(0.0) {
                return Err(AiccError::invalid_input("input.speed_dps must be greater than 0"));
            }
            let rate_radps = speed_dps.map_or(max_rate_radps, f64::to_radians).min(max_rate_radps).min(ctx.base.limits().max_angular_radps);
            let halts = ctx.base.begin_motion();
            // Everything is checked before anything moves.
            let head_plan = match pitch_deg {
                None => None,
                Some(pitch) => Some(plan_head(&ctx, &fresh_joint_states(&ctx)?, None, Some(pitch.to_radians()), None)?),
            };
            let goal_rad = yaw_deg.to_radians();
            let rotation = vec![Segment::Rotate { angle_rad: goal_rad, rate_radps }];
            let (turned, head) = futures::join!(base_motion::run(&ctx, "turn", rotation, halts), async {
                match &head_plan {
                    Some(plan) => Some(run_head(&ctx, plan, halts).await),
                    None => None,
                }
            });
            let turned = turned?;
            let head = match head {
                None => Value::Null,
                Some(Ok(head)) => head,
                Some(Err(error)) => {
                    return Err(AiccError::new(
                        error.code,
                        error.retryable,
                        format!("turned {:.1}° of {yaw_deg}°, but the head tilt failed: {}", deg(turned.rotated_rad), error.message),
                    ))
                }
            };
            let limits = ctx.base.limits();
            Ok(ToolSuccess {
                output: json!({
                    "requested": { "yaw_deg": yaw_deg, "pitch_deg": pitch_deg, "speed_dps": speed_dps },
                    "achieved": { "yaw_deg": deg(turned.rotated_rad), "yaw_rad": turned.rotated_rad },
                    "error_deg": deg(turned.rotated_rad - goal_rad),
                    "duration_s": turned.duration_s,
                    "applied": {
                        "max_rate_dps": deg(rate_radps),
                        "max_rate_radps": rate_radps,
                        "speed_limited": speed_dps.is_some_and(|s| s.to_radians() > rate_radps),
                        "planning_accel_radps2": limits.max_angular_accel_radps2 * PLANNING_ACCEL_SHARE,
                        "tolerance_deg": deg(TOLERANCE_RAD),
                    },
                    "head": head,
                }),
                source: ctx.sensors.topic(Sensor::Odometry),
            })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ErrorCode;
    use crate::tools::input::input_map;

    #[test]
    fn the_schema_refuses_absurd_yaws_naming_the_field_and_the_limit() {
        use crate::protocol::catalog::Catalog;
        let catalog = Catalog::new(vec![Turn::new(&BaseConfig::default()).descriptor()])
            .expect("the schema compiles");
        let input = input_map;
        let error = catalog.validate("turn", input(json!({"yaw": 1e9}))).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidInput);
        assert!(
            error.message.contains("input.yaw") && error.message.contains("360"),
            "{}",
            error.message
        );
        assert!(
            catalog.validate("turn", input(json!({"yaw": -45}))).is_ok(),
            "Appendix A's example"
        );
        assert!(catalog
            .validate("turn", input(json!({"yaw": 90, "pitch": 10, "speed_dps": 30})))
            .is_ok());
        assert!(catalog
            .validate("turn", input(json!({"yaw": 90, "roll": 1})))
            .unwrap_err()
            .message
            .contains("roll"));
        assert!(catalog
            .validate("turn", input(json!({"pitch": 10})))
            .unwrap_err()
            .message
            .contains("yaw"));
    }
}
