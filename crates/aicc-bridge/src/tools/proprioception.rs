//! `proprioception`: where the robot is and how it moves, from odometry and
//! the IMU, in REP-103 units and REP-105 frames; its joints and, when a
//! battery is configured, its health.
//!
//! Also home of the freshness helpers every sensor tool shares: a sample
//! older than its topic's maximum age is an error, never served silently.
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::reject_unknown_fields;
use super::shared::fresh::{
    check_fresh, fresh_sample, max_age, odometry_missing, quaternion_json, vector_json,
};
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;
use crate::robot::{Age, Now, Sensor};

pub struct Proprioception;

fn vector_schema(unit: &str) -> Value {
    json!({ "type": "object", "description": unit, "properties": { "x": {"type": "number"}, "y": {"type": "number"}, "z": {"type": "number"} }, "required": ["x", "y", "z"] })
}

impl Tool for Proprioception {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "proprioception",
            class: ToolClass::Sensor,
            description: "The robot's own state: position (m) and rotation in the odometry frame, linear (m/s) and angular (rad/s) velocity in the base frame, the IMU, every joint (head pan/tilt, arm, gripper, wheels: position in `unit`, rad or m; velocity in unit/s; effort in N*m for rad joints, N for m joints) and, when the robot reports one, the battery (`health`). Each part says how old its data is; a part whose data is missing or too old is null with a `*_error` saying why.",
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
                    "imu": { "type": ["object", "null"] },
                    "joints": {
                        "type": ["object", "null"],
                        "description": "by joint name; null when joint states are missing or stale (see joints_error)",
                        "additionalProperties": {
                            "type": "object",
                            "properties": {
                                "position": { "type": "number" },
                                "velocity": { "type": ["number", "null"] },
                                "effort": { "type": ["number", "null"] },
                                "unit": { "type": ["string", "null"], "description": "rad or m, from the URDF; null for a joint the URDF does not know" }
                            },
                            "required": ["position", "velocity", "effort", "unit"]
                        }
                    },
                    "joints_age_ms": { "type": ["number", "null"] },
                    "joints_error": { "type": "string" },
                    "health": {
                        "type": ["object", "null"],
                        "description": "null when no battery topic is configured; { error } when its data is missing or stale",
                        "properties": {
                            "battery_fraction": { "type": ["number", "null"], "description": "0-1, null when unknown" },
                            "voltage_v": { "type": ["number", "null"] },
                            "charging": { "type": "boolean" },
                            "low": { "type": ["boolean", "null"], "description": "below the configured low-battery fraction" },
                            "age_ms": { "type": "number" },
                            "error": { "type": "string" }
                        }
                    }
                },
                "required": ["frame_id", "position_m", "orientation", "rpy_rad", "linear_velocity_mps", "angular_velocity_radps", "odom_age_ms"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        odometry_missing(ctx, now)
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        async move {
            reject_unknown_fields(&input, &[])?;
            let now = ctx.sensors.now();
            let odom = ctx.sensors.odometry().ok_or_else(|| {
                AiccError::execution_failed(
                    true,
                    format!("no odometry received yet on {}", ctx.sensors.topic(Sensor::Odometry)),
                )
            })?;
            let odom_age = odom.age(now);
            check_fresh(
                &ctx.sensors.topic(Sensor::Odometry),
                odom_age.effective(),
                ctx.odom_max_age(),
            )?;
            let imu_max_age = Duration::from_secs_f64(ctx.config.sensors.imu.max_age_s);
            let imu = ctx.sensors.imu().map(|imu| {
                let age = imu.age(now);
                let mut imu_json = json!({
                    "frame_id": imu.frame_id,
                    "orientation": imu.orientation.map(|q| quaternion_json(&q)),
                    "angular_velocity_radps": vector_json(&imu.angular_velocity_radps),
                    "linear_acceleration_mps2": vector_json(&imu.linear_acceleration_mps2),
                    "stale": age.effective() > imu_max_age,
                });
                imu_json.as_object_mut().expect("built as an object").extend(age.fields());
                imu_json
            });
            let (roll, pitch, yaw) = odom.orientation.euler_angles();
            let mut output = json!({
                "frame_id": odom.frame_id,
                "child_frame_id": odom.child_frame_id,
                "rpy_rad": { "roll": roll, "pitch": pitch, "yaw": yaw },
                "stamp_s": odom.stamp_s,
            });
            let fields = output.as_object_mut().expect("built as an object");
            // Values built here are moved in: json! would copy each one.
            fields.insert("position_m".into(), vector_json(&odom.position_m));
            fields.insert("orientation".into(), quaternion_json(&odom.orientation));
            fields.insert("linear_velocity_mps".into(), vector_json(&odom.linear_velocity_mps));
            fields
                .insert("angular_velocity_radps".into(), vector_json(&odom.angular_velocity_radps));
            fields.insert("imu".into(), imu.unwrap_or(Value::Null));
            fields.insert("health".into(), health_json(&ctx, now));
            fields.extend(odom_age.fields_with_prefix("odom_"));
            match joints_json(&ctx, now) {
                Ok((joints, age)) => {
                    fields.insert("joints".into(), joints);
                    fields.extend(age.fields_with_prefix("joints_"));
                }
                Err(error) => {
                    fields.insert("joints".into(), Value::Null);
                    fields.insert("joints_age_ms".into(), Value::Null);
                    fields.insert("joints_error".into(), json!(error.message));
                }
            }
            let mut sources = vec![
                ctx.sensors.topic(Sensor::Odometry),
                ctx.sensors.topic(Sensor::Imu),
                ctx.sensors.topic(Sensor::JointStates),
            ];
            if ctx.config.sensors.battery.is_configured() {
                sources.push(ctx.sensors.topic(Sensor::Battery));
            }
            Ok(ToolSuccess { output, source: sources.join(" ") })
        }
        .boxed()
    }
}

/// Every joint's position, velocity and effort with its unit from the
/// URDF, and the age of the joint states; an error when they are missing
/// or stale.
fn joints_json(ctx: &ToolContext, now: Now) -> Result<(Value, Age), AiccError> {
    let topic = ctx.sensors.topic(Sensor::JointStates);
    if !ctx.config.sensors.joint_states.is_configured() {
        return Err(AiccError::execution_failed(false, "no joint_states topic is configured"));
    }
    let (states, age) = fresh_sample(
        ctx.sensors.joint_states(),
        "joint states",
        &topic,
        max_age(&ctx.config.sensors.joint_states),
        now,
    )?;
    let states = states.value;
    let joints: Map<String, Value> = states
        .names
        .iter()
        .enumerate()
        .filter_map(|(index, name)| {
            let position = *states.positions.get(index)?;
            let entry = json!({
                "position": position,
                "velocity": states.velocities.get(index),
                "effort": states.efforts.get(index),
                "unit": ctx.joints.limits().get(name).map(|joint| joint.kind.position_unit()),
            });
            Some((name.clone(), entry))
        })
        .collect();
    Ok((Value::Object(joints), age))
}

/// The battery, when a battery topic is configured (null otherwise).
fn health_json(ctx: &ToolContext, now: Now) -> Value {
    let sensors = &ctx.config.sensors;
    if !sensors.battery.is_configured() {
        return Value::Null;
    }
    match fresh_sample(
        ctx.sensors.battery(),
        "battery state",
        &ctx.sensors.topic(Sensor::Battery),
        max_age(&sensors.battery),
        now,
    ) {
        Err(error) => json!({ "error": error.message }),
        Ok((battery, age)) => {
            let fraction = battery.value.fraction;
            let mut health = json!({
                "battery_fraction": fraction,
                "voltage_v": battery.value.voltage_v,
                "charging": battery.value.charging,
                "low": (!fraction.is_nan()).then_some(fraction < ctx.live.battery_low_fraction()),
            });
            health.as_object_mut().expect("built as an object").extend(age.fields());
            health
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::robot::{Battery, JointStates, Stamped};
    use crate::tools::testing::*;

    fn joint_states(age: Duration) -> Stamped<JointStates> {
        let value = JointStates {
            names: vec![
                "head_pan_joint".into(),
                "gripper_left_joint".into(),
                "mystery_joint".into(),
            ],
            positions: vec![0.25, 0.01, 1.0],
            velocities: vec![0.5, 0.0, 0.0],
            efforts: vec![],
        };
        stamped(value, "", age)
    }

    #[tokio::test]
    async fn joints_carry_urdf_units_and_health_follows_the_battery() {
        let robot = Arc::new(FakeRobot::default());
        robot.samples.lock().odom = Some(odometry(1.5, Duration::from_millis(10)));
        robot.samples.lock().joint_states = Some(joint_states(Duration::from_millis(20)));
        let out = Proprioception.call(Map::new(), context(robot.clone())).await.unwrap().output;
        assert_eq!(out["position_m"]["x"], 1.5);
        assert_eq!(
            out["joints"]["head_pan_joint"],
            json!({ "position": 0.25, "velocity": 0.5, "effort": null, "unit": "rad" })
        );
        assert_eq!(out["joints"]["gripper_left_joint"]["unit"], "m");
        assert_eq!(
            out["joints"]["mystery_joint"]["unit"],
            Value::Null,
            "not in the URDF: unit unknown"
        );
        assert!(out["joints_age_ms"].as_f64().unwrap() >= 20.0);
        assert_eq!(out["health"], Value::Null, "no battery topic configured");

        // Stale joint states are not served: null, with the reason.
        robot.samples.lock().joint_states = Some(joint_states(Duration::from_secs(3)));
        let out = Proprioception.call(Map::new(), context(robot.clone())).await.unwrap().output;
        assert_eq!(out["joints"], Value::Null);
        assert!(
            out["joints_error"].as_str().unwrap().contains("joint_states is 3"),
            "{}",
            out["joints_error"]
        );

        let with_battery = |robot: Arc<FakeRobot>| {
            context_with(robot, |c| c.sensors.battery.topic = "battery_state".into())
        };
        let out =
            Proprioception.call(Map::new(), with_battery(robot.clone())).await.unwrap().output;
        assert_eq!(out["health"]["error"], "no battery state received yet on battery");
        robot.samples.lock().battery = Some(stamped(
            Battery { fraction: 0.15, voltage_v: 11.1, charging: false },
            "",
            Duration::from_millis(5),
        ));
        let out =
            Proprioception.call(Map::new(), with_battery(robot.clone())).await.unwrap().output;
        assert_eq!(
            (
                out["health"]["battery_fraction"].as_f64(),
                out["health"]["low"].as_bool(),
                out["health"]["charging"].as_bool()
            ),
            (Some(0.15), Some(true), Some(false))
        );
        robot.samples.lock().battery = Some(stamped(
            Battery { fraction: f64::NAN, voltage_v: 11.1, charging: true },
            "",
            Duration::from_millis(5),
        ));
        let out = Proprioception.call(Map::new(), with_battery(robot)).await.unwrap().output;
        assert_eq!(
            (&out["health"]["battery_fraction"], &out["health"]["low"]),
            (&Value::Null, &Value::Null),
            "unknown charge is null, not NaN"
        );
    }
}
