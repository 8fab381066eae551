//! `proprioception`: where the robot is and how it moves, from odometry and
//! the IMU, in REP-103 units and REP-105 frames.
use std::time::{Duration, Instant};

use futures::FutureExt;
use nalgebra::{UnitQuaternion, Vector3};
use serde_json::{json, Map, Value};

use super::input::reject_unknown_fields;
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::core::ToolSuccess;
use crate::protocol::AiccError;

pub struct Proprioception;

fn vector_schema(unit: &str) -> Value {
    json!({ "type": "object", "description": unit, "properties": { "x": {"type": "number"}, "y": {"type": "number"}, "z": {"type": "number"} }, "required": ["x", "y", "z"] })
}

impl Tool for Proprioception {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "proprioception",
            class: ToolClass::Sensor,
            description: "The robot's own state: position (m) and rotation in the odometry frame, linear (m/s) and angular (rad/s) velocity in the base frame, and the IMU. Each part says how old its data is.",
            capability: "can_observe_world",
            strict_input: false,
            calls_per_minute: None,
            input_schema: json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "frame_id": { "type": "string" },
                    "child_frame_id": { "type": "string" },
                    "position_m": vector_schema("metres, in frame_id"),
                    "orientation": { "type": "object", "properties": { "x": {"type": "number"}, "y": {"type": "number"}, "z": {"type": "number"}, "w": {"type": "number"} } },
                    "rpy_rad": { "type": "object", "properties": { "roll": {"type": "number"}, "pitch": {"type": "number"}, "yaw": {"type": "number"} } },
                    "linear_velocity_mps": vector_schema("m/s, in child_frame_id"),
                    "angular_velocity_radps": vector_schema("rad/s, in child_frame_id"),
                    "odom_age_ms": { "type": "number" },
                    "imu": { "type": ["object", "null"] }
                },
                "required": ["frame_id", "position_m", "orientation", "rpy_rad", "linear_velocity_mps", "angular_velocity_radps", "odom_age_ms"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        super::odometry_missing(ctx, now)
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            reject_unknown_fields(&input, &[])?;
            let now = Instant::now();
            let odom = ctx.robot.odometry().ok_or_else(|| {
                AiccError::execution_failed(true, format!("no odometry received yet on {}", ctx.robot.source("odom")))
            })?;
            let odom_age = now.saturating_duration_since(odom.received);
            check_fresh(&ctx.robot.source("odom"), odom_age, ctx.odom_max_age())?;
            let imu_max_age = Duration::from_secs_f64(ctx.config.sensors.imu.max_age_s);
            let imu = ctx.robot.imu().map(|imu| {
                let age = now.saturating_duration_since(imu.received);
                json!({
                    "frame_id": imu.frame_id,
                    "orientation": imu.orientation.map(|q| quaternion_json(&q)),
                    "angular_velocity_radps": vector_json(&imu.angular_velocity_radps),
                    "linear_acceleration_mps2": vector_json(&imu.linear_acceleration_mps2),
                    "age_ms": millis(age),
                    "stale": age > imu_max_age,
                })
            });
            let (roll, pitch, yaw) = odom.orientation.euler_angles();
            let output = json!({
                "frame_id": odom.frame_id,
                "child_frame_id": odom.child_frame_id,
                "position_m": vector_json(&odom.position_m),
                "orientation": quaternion_json(&odom.orientation),
                "rpy_rad": { "roll": roll, "pitch": pitch, "yaw": yaw },
                "linear_velocity_mps": vector_json(&odom.linear_velocity_mps),
                "angular_velocity_radps": vector_json(&odom.angular_velocity_radps),
                "stamp_s": odom.stamp_s,
                "odom_age_ms": millis(odom_age),
                "imu": imu,
            });
            Ok(ToolSuccess { output, source: format!("{} {}", ctx.robot.source("odom"), ctx.robot.source("imu")) })
        }
        .boxed()
    }
}

/// Data older than its maximum age is an error, never served silently.
pub fn check_fresh(topic: &str, age: Duration, max_age: Duration) -> Result<(), AiccError> {
    if age > max_age {
        return Err(AiccError::execution_failed(
            true,
            format!("data on {topic} is {:.0} ms old (maximum {:.0} ms): is the publisher running?", millis(age), millis(max_age)),
        ));
    }
    Ok(())
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

pub fn vector_json(v: &Vector3<f64>) -> Value {
    json!({ "x": v.x, "y": v.y, "z": v.z })
}

pub fn quaternion_json(q: &UnitQuaternion<f64>) -> Value {
    json!({ "x": q.i, "y": q.j, "z": q.k, "w": q.w })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_data_is_an_error_that_states_its_age() {
        let err = check_fresh("/odom", Duration::from_millis(900), Duration::from_millis(500)).unwrap_err();
        assert!(err.retryable);
        assert!(err.message.contains("/odom is 900 ms old (maximum 500 ms)"), "{}", err.message);
        assert!(check_fresh("/odom", Duration::from_millis(100), Duration::from_millis(500)).is_ok());
    }
}
