//! `move`: drive the base a signed distance along its current heading,
//! closed on odometry, with a speed profile that respects the governor's
//! limits. The result states the displacement actually achieved.
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::optional_number;
use super::shared::fresh::{fresh_odometry, odometry_missing, yaw_of};
use super::shared::motion as base_motion;
use super::shared::observe::observe_way;
use super::{Tool, ToolContext, ToolFuture};
use crate::config::BaseConfig;
use crate::governor::coverage::Direction;
use crate::motion::Segment;
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::robot::Sensor;

pub struct Move {
    max_distance_m: f64,
    max_speed_mps: f64,
}

impl Move {
    pub fn new(base: &BaseConfig) -> Self {
        Self { max_distance_m: base.max_move_distance_m, max_speed_mps: base.max_linear_mps }
    }
}

impl Tool for Move {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "move",
            class: ToolClass::Actuator,
            description: "Drive by `forward` metres (negative: backwards) and `left` metres (the base turns towards the target, drives straight, and turns back), closed on odometry; or at `velocity_mps` for `duration_s`. Returns when the robot has stopped, with the displacement achieved. Stops early, with the reason, when the safety governor refuses the direction (bumper contact, obstacle, geofence).",
            capability: "can_move_self",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "forward": { "type": "number", "description": "metres along the current heading; negative drives backwards", "minimum": -self.max_distance_m, "maximum": self.max_distance_m },
                    "left": { "type": "number", "description": "metres to the left of the current heading (REP-103 +y); negative: right", "minimum": -self.max_distance_m, "maximum": self.max_distance_m },
                    "speed_mps": { "type": "number", "description": "cruise speed, m/s (default and maximum: the base's limit)", "exclusiveMinimum": 0, "maximum": self.max_speed_mps },
                    "velocity_mps": { "type": "number", "description": "instead of a distance: drive at this velocity (negative: backwards)...", "minimum": -self.max_speed_mps, "maximum": self.max_speed_mps },
                    "duration_s": { "type": "number", "description": "...for this long, seconds", "exclusiveMinimum": 0, "maximum": 60 }
                },
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "requested": { "type": "object" },
                    "achieved": { "type": "object", "properties": { "forward_m": {"type": "number"}, "left_m": {"type": "number"}, "yaw_change_rad": {"type": "number"} } },
                    "duration_s": { "type": "number" },
                    "applied": { "type": "object" },
                    "head_turned": { "type": "object", "description": "present when the head was turned to observe the way before moving (safety.head_for_motion: turn): why, from and to (degrees), whether the way was then observed" }
                },
                "required": ["requested", "achieved", "duration_s", "applied"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        odometry_missing(ctx, now)
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        let max_distance_m = self.max_distance_m;
        let max_speed_mps = self.max_speed_mps;
        async move {
            let forward_m = optional_number(&input, "forward", -max_distance_m, max_distance_m)?;
            let left_m = optional_number(&input, "left", -max_distance_m, max_distance_m)?;
            let velocity = optional_number(&input, "velocity_mps", -max_speed_mps, max_speed_mps)?;
            let duration_s = optional_number(&input, "duration_s", 0.0, 60.0)?;
            let requested_speed = optional_number(&input, "speed_mps", 0.0, f64::MAX)?;
            if requested_speed == Some(0.0) {
                return Err(AiccError::invalid_input("input.speed_mps must be greater than 0"));
            }
            let speed_mps = requested_speed.unwrap_or(max_speed_mps).min(max_speed_mps);
            // Taken once for the whole call: a `stop` at any point ends it.
            let motion = ctx.base.begin_motion();
            let limits = *ctx.base.limits();
            let (segments, requested, applied) = match (forward_m, left_m, velocity, duration_s) {
                (None, None, Some(velocity_mps), Some(duration_s)) => (
                    vec![Segment::Timed { velocity_mps, duration: Duration::from_secs_f64(duration_s) }],
                    json!({ "velocity_mps": velocity_mps, "duration_s": duration_s }),
                    json!({ "max_speed_mps": velocity_mps.abs().min(limits.max_linear_mps), "max_accel_mps2": limits.max_linear_accel_mps2 }),
                ),
                (Some(_), _, None, None) | (None, Some(_), None, None) if left_m.unwrap_or(0.0) == 0.0 => {
                    let forward_m = forward_m.unwrap_or(0.0);
                    (
                        vec![Segment::Drive { distance_m: forward_m, speed_mps }],
                        json!({ "forward_m": forward_m, "speed_mps": requested_speed }),
                        json!({ "max_speed_mps": speed_mps, "max_accel_mps2": limits.max_linear_accel_mps2 }),
                    )
                }
                (_, Some(left_m), None, None) => {
                    // A differential drive cannot slide sideways: turn towards
                    // the target, drive straight to it, turn back.
                    let forward_m = forward_m.unwrap_or(0.0);
                    let start = fresh_odometry(&ctx)?;
                    let rate_radps = limits.max_angular_radps;
                    let segments = vec![
                        Segment::Rotate { angle_rad: left_m.atan2(forward_m), rate_radps },
                        Segment::Drive { distance_m: forward_m.hypot(left_m), speed_mps },
                        Segment::RotateTo { heading_rad: yaw_of(&start), rate_radps },
                    ];
                    let applied = json!({ "max_speed_mps": speed_mps, "max_accel_mps2": limits.max_linear_accel_mps2, "path": "turn, straight, turn back (differential drive)" });
                    (segments, json!({ "forward_m": forward_m, "left_m": left_m, "speed_mps": requested_speed }), applied)
                }
                _ => return Err(AiccError::invalid_input("input: give `forward` and/or `left` (metres), or `velocity_mps` with `duration_s`, not both")),
            };
            // Where the base will drive straight: the head may have to look there first.
            let direction = match (forward_m, left_m, velocity) {
                (_, _, Some(v)) => Direction::of_linear(v),
                (f, l, None) if l.unwrap_or(0.0) != 0.0 => Direction::of_linear(f.unwrap_or(0.0).hypot(l.unwrap_or(0.0))),
                (f, _, None) => Direction::of_linear(f.unwrap_or(0.0)),
            };
            let head = match direction {
                Some(direction) => observe_way(&ctx, direction, motion).await?,
                None => None,
            };
            let achieved = base_motion::run(&ctx, "move", segments, motion).await?;
            let mut output = json!({
                "requested": requested,
                "achieved": { "forward_m": achieved.forward_m, "left_m": achieved.left_m, "yaw_change_rad": achieved.yaw_change_rad },
                "duration_s": achieved.duration_s,
                "applied": applied,
            });
            if let Some(head) = head {
                output["head_turned"] = head;
            }
            Ok(ToolSuccess {
                output,
                source: ctx.sensors.topic(Sensor::Odometry),
            })
        }
        .boxed()
    }
}
