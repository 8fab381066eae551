//! `proprioception`: where the robot is and how it moves, from odometry and
//! the IMU, in REP-103 units and REP-105 frames; its joints and, when a
//! battery is configured, its health.
//!
//! Also home of the freshness helpers every sensor tool shares: a sample
//! older than its topic's maximum age is an error, never served silently.
use std::time::{Duration, Instant};

use futures::FutureExt;
use nalgebra::{UnitQuaternion, Vector3};
use serde_json::{json, Map, Value};

use super::input::reject_unknown_fields;
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::core::ToolSuccess;
use crate::config::SensorTopic;
use crate::protocol::AiccError;
use crate::robot::Stamped;

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
            let mut output = json!({
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
                "health": health_json(&ctx, now),
            });
            let fields = output.as_object_mut().expect("built as an object");
            match joints_json(&ctx, now) {
                Ok((joints, age)) => {
                    fields.insert("joints".into(), joints);
                    fields.insert("joints_age_ms".into(), json!(millis(age)));
                }
                Err(error) => {
                    fields.insert("joints".into(), Value::Null);
                    fields.insert("joints_age_ms".into(), Value::Null);
                    fields.insert("joints_error".into(), json!(error.message));
                }
            }
            let mut sources = vec![ctx.robot.source("odom"), ctx.robot.source("imu"), ctx.robot.source("joint_states")];
            if ctx.config.sensors.battery.is_configured() {
                sources.push(ctx.robot.source("battery"));
            }
            Ok(ToolSuccess { output, source: sources.join(" ") })
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

pub(crate) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// The maximum age of a sensor's data.
pub fn max_age(sensor: &SensorTopic) -> Duration {
    Duration::from_secs_f64(sensor.max_age_s)
}

/// Why a tool fed by `topic` cannot serve now, or None: the topic is not
/// configured (`""`), nothing has arrived on it, or it has been silent for
/// longer than `silent_after`. `received` is when its latest sample arrived.
pub fn silence_reason(what: &str, topic: &str, received: Option<Instant>, silent_after: Duration, now: Instant) -> Option<String> {
    if topic.is_empty() {
        return Some(format!("no {what} topic is configured"));
    }
    match received {
        None => Some(format!("no {what} received on {topic}")),
        Some(received) if now.saturating_duration_since(received) > silent_after => {
            Some(format!("no {what} on {topic} for {:.1} s", now.saturating_duration_since(received).as_secs_f64()))
        }
        Some(_) => None,
    }
}

/// [`silence_reason`] for the sensor behind `key` (a [`crate::robot::RobotPort::source`]
/// key such as "camera").
pub fn sensor_missing(ctx: &ToolContext, what: &str, key: &str, sensor: &SensorTopic, now: Instant) -> Option<String> {
    let topic = if sensor.is_configured() { ctx.robot.source(key) } else { String::new() };
    silence_reason(what, &topic, ctx.robot.received(key), Duration::from_secs_f64(ctx.config.sensors.unavailable_after_s), now)
}

/// The sample and its age if it exists and is no older than `max_age`;
/// otherwise a retryable error naming the topic (and the age and maximum).
pub fn fresh_sample<T>(sample: Option<Stamped<T>>, what: &str, topic: &str, max_age: Duration, now: Instant) -> Result<(Stamped<T>, Duration), AiccError> {
    let sample = sample.ok_or_else(|| AiccError::execution_failed(true, format!("no {what} received yet on {topic}")))?;
    let age = now.saturating_duration_since(sample.received);
    check_fresh(topic, age, max_age)?;
    Ok((sample, age))
}

/// Every joint's position, velocity and effort with its unit from the
/// URDF, and the age of the joint states; an error when they are missing
/// or stale.
fn joints_json(ctx: &ToolContext, now: Instant) -> Result<(Value, Duration), AiccError> {
    let topic = ctx.robot.source("joint_states");
    if !ctx.config.sensors.joint_states.is_configured() {
        return Err(AiccError::execution_failed(false, "no joint_states topic is configured"));
    }
    let (states, age) = fresh_sample(ctx.robot.joint_states(), "joint states", &topic, max_age(&ctx.config.sensors.joint_states), now)?;
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
                "unit": ctx.joints.get(name).map(|joint| joint.kind.position_unit()),
            });
            Some((name.clone(), entry))
        })
        .collect();
    Ok((Value::Object(joints), age))
}

/// The battery, when a battery topic is configured (null otherwise).
fn health_json(ctx: &ToolContext, now: Instant) -> Value {
    let sensors = &ctx.config.sensors;
    if !sensors.battery.is_configured() {
        return Value::Null;
    }
    match fresh_sample(ctx.robot.battery(), "battery state", &ctx.robot.source("battery"), max_age(&sensors.battery), now) {
        Err(error) => json!({ "error": error.message }),
        Ok((battery, age)) => {
            let fraction = battery.value.fraction;
            json!({
                "battery_fraction": fraction,
                "voltage_v": battery.value.voltage_v,
                "charging": battery.value.charging,
                "low": (!fraction.is_nan()).then_some(fraction < sensors.battery_low_fraction),
                "age_ms": millis(age),
            })
        }
    }
}

pub fn vector_json(v: &Vector3<f64>) -> Value {
    json!({ "x": v.x, "y": v.y, "z": v.z })
}

pub fn quaternion_json(q: &UnitQuaternion<f64>) -> Value {
    json!({ "x": q.i, "y": q.j, "z": q.k, "w": q.w })
}

/// A robot port without ROS for the sensor tools' unit tests: tests set
/// the latest samples directly.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use futures::future::BoxFuture;
    use nalgebra::{UnitQuaternion, Vector3};
    use parking_lot::Mutex;

    use crate::config::Config;
    use crate::governor::{BaseLimits, BaseVelocity, JointLimits};
    use crate::perception::RawImage;
    use crate::robot::base_driver::BaseDriver;
    use crate::robot::kinematics::Kinematics;
    use crate::robot::*;
    use crate::tools::ToolContext;

    pub const URDF: &str = include_str!("../../../../urdf/aicc_bot.urdf");

    #[derive(Default)]
    pub struct Samples {
        pub odom: Option<OdometrySample>,
        pub imu: Option<ImuSample>,
        pub camera: Option<Stamped<CameraFrame>>,
        pub camera_info: Option<Stamped<CameraInfo>>,
        pub depth: Option<Stamped<RawImage>>,
        pub depth_info: Option<Stamped<CameraInfo>>,
        pub joint_states: Option<Stamped<JointStates>>,
        pub contacts: Option<Stamped<Contacts>>,
        pub battery: Option<Stamped<Battery>>,
    }

    #[derive(Default)]
    pub struct FakeRobot {
        pub samples: Mutex<Samples>,
    }

    /// A sample received `age` ago.
    pub fn stamped<T>(value: T, frame_id: &str, age: Duration) -> Stamped<T> {
        Stamped { value, frame_id: frame_id.into(), stamp_s: 100.0, received: Instant::now() - age }
    }

    pub fn odometry(x: f64, age: Duration) -> OdometrySample {
        OdometrySample {
            frame_id: "odom".into(),
            child_frame_id: "base_footprint".into(),
            position_m: Vector3::new(x, 0.0, 0.0),
            orientation: UnitQuaternion::identity(),
            linear_velocity_mps: Vector3::zeros(),
            angular_velocity_radps: Vector3::zeros(),
            stamp_s: 100.0,
            received: Instant::now() - age,
        }
    }

    impl RobotPort for FakeRobot {
        fn odometry(&self) -> Option<OdometrySample> {
            self.samples.lock().odom.clone()
        }
        fn imu(&self) -> Option<ImuSample> {
            self.samples.lock().imu.clone()
        }
        fn camera(&self) -> Option<Stamped<CameraFrame>> {
            self.samples.lock().camera.clone()
        }
        fn camera_info(&self) -> Option<Stamped<CameraInfo>> {
            self.samples.lock().camera_info.clone()
        }
        fn depth(&self) -> Option<Stamped<RawImage>> {
            self.samples.lock().depth.clone()
        }
        fn depth_info(&self) -> Option<Stamped<CameraInfo>> {
            self.samples.lock().depth_info.clone()
        }
        fn joint_states(&self) -> Option<Stamped<JointStates>> {
            self.samples.lock().joint_states.clone()
        }
        fn contacts(&self) -> Option<Stamped<Contacts>> {
            self.samples.lock().contacts.clone()
        }
        fn battery(&self) -> Option<Stamped<Battery>> {
            self.samples.lock().battery.clone()
        }
        fn received(&self, what: &str) -> Option<Instant> {
            let samples = self.samples.lock();
            match what {
                "odom" => samples.odom.as_ref().map(|s| s.received),
                "camera" => samples.camera.as_ref().map(|s| s.received),
                "depth" => samples.depth.as_ref().map(|s| s.received),
                "joint_states" => samples.joint_states.as_ref().map(|s| s.received),
                "bumper" => samples.contacts.as_ref().map(|s| s.received),
                _ => None,
            }
        }

        fn source(&self, what: &str) -> String {
            match what {
                "camera" => "camera/image_raw".into(),
                "camera_info" => "camera/camera_info".into(),
                "depth" => "camera/depth/image_raw".into(),
                "depth_info" => "camera/depth/camera_info".into(),
                other => other.into(),
            }
        }
        fn publish_base_velocity(&self, _velocity: BaseVelocity) {}
        fn follow_trajectory(&self, _controller: Controller, _goal: TrajectoryGoal) -> BoxFuture<'static, Result<TrajectoryOutcome, String>> {
            Box::pin(async { Err("not in the fake".to_string()) })
        }
        fn gripper_command(&self, _position_m: f64, _max_effort_n: f64) -> BoxFuture<'static, Result<GripperOutcome, String>> {
            Box::pin(async { Err("not in the fake".to_string()) })
        }
        fn say(&self, _text: &str) -> Result<(), String> {
            Ok(())
        }
        fn publish_diagnostics(&self, _diagnostics: &[Diagnostic]) {}
    }

    /// A tool context over `robot` with the default config (changed by `configure`).
    pub fn context_with(robot: Arc<FakeRobot>, configure: impl FnOnce(&mut Config)) -> ToolContext {
        let mut config = Config::default();
        configure(&mut config);
        let limits = BaseLimits { max_linear_mps: 0.2, max_angular_radps: 1.0, max_linear_accel_mps2: 1.0, max_angular_accel_radps2: 1.0 };
        let (events, _) = tokio::sync::mpsc::channel(8);
        ToolContext {
            robot,
            base: Arc::new(BaseDriver::new(limits, crate::governor::EmergencyLimits::DEFAULT, crate::governor::SafetyConfig::DEFAULT, None, Duration::from_millis(200), 50.0)),
            config: Arc::new(config),
            joints: Arc::new(JointLimits::from_urdf(URDF).unwrap()),
            kinematics: Arc::new(Kinematics::from_urdf(URDF).unwrap()),
            events,
            session: "s".into(),
            call_id: "c".into(),
        }
    }

    pub fn context(robot: Arc<FakeRobot>) -> ToolContext {
        context_with(robot, |_| {})
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::testing::*;
    use super::*;
    use crate::protocol::ErrorCode;
    use crate::robot::{Battery, JointStates};

    #[test]
    fn stale_data_is_an_error_that_states_its_age() {
        let err = check_fresh("/odom", Duration::from_millis(900), Duration::from_millis(500)).unwrap_err();
        assert!(err.retryable);
        assert!(err.message.contains("/odom is 900 ms old (maximum 500 ms)"), "{}", err.message);
        assert!(check_fresh("/odom", Duration::from_millis(100), Duration::from_millis(500)).is_ok());
    }

    #[test]
    fn silence_names_the_topic_and_how_long() {
        let now = Instant::now();
        let silent_after = Duration::from_secs(2);
        assert_eq!(silence_reason("camera frame", "", Some(now), silent_after, now).unwrap(), "no camera frame topic is configured");
        assert_eq!(silence_reason("camera frame", "/cam", None, silent_after, now).unwrap(), "no camera frame received on /cam");
        let old = now - Duration::from_millis(3500);
        assert_eq!(silence_reason("camera frame", "/cam", Some(old), silent_after, now).unwrap(), "no camera frame on /cam for 3.5 s");
        assert_eq!(silence_reason("camera frame", "/cam", Some(now - Duration::from_millis(1900)), silent_after, now), None);
    }

    #[test]
    fn fresh_samples_pass_and_stale_or_missing_ones_are_retryable_errors() {
        let sample = stamped(7, "f", Duration::from_millis(100));
        let now = Instant::now();
        let (sample, age) = fresh_sample(Some(sample), "thing", "/t", Duration::from_millis(500), now).unwrap();
        assert_eq!(sample.value, 7);
        assert!(age >= Duration::from_millis(100) && age < Duration::from_millis(200), "{age:?}");
        let err = fresh_sample(Some(stamped(7, "f", Duration::from_millis(800))), "thing", "/t", Duration::from_millis(500), now).unwrap_err();
        assert_eq!((err.code, err.retryable), (ErrorCode::ExecutionFailed, true));
        assert!(err.message.contains("/t is 8") && err.message.contains("(maximum 500 ms)"), "{}", err.message);
        let err = fresh_sample::<i32>(None, "thing", "/t", Duration::from_millis(500), now).unwrap_err();
        assert_eq!(err.message, "no thing received yet on /t");
    }

    fn joint_states(age: Duration) -> Stamped<JointStates> {
        let value = JointStates {
            names: vec!["head_pan_joint".into(), "gripper_left_joint".into(), "mystery_joint".into()],
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
        assert_eq!(out["joints"]["head_pan_joint"], json!({ "position": 0.25, "velocity": 0.5, "effort": null, "unit": "rad" }));
        assert_eq!(out["joints"]["gripper_left_joint"]["unit"], "m");
        assert_eq!(out["joints"]["mystery_joint"]["unit"], Value::Null, "not in the URDF: unit unknown");
        assert!(out["joints_age_ms"].as_f64().unwrap() >= 20.0);
        assert_eq!(out["health"], Value::Null, "no battery topic configured");

        // Stale joint states are not served: null, with the reason.
        robot.samples.lock().joint_states = Some(joint_states(Duration::from_secs(3)));
        let out = Proprioception.call(Map::new(), context(robot.clone())).await.unwrap().output;
        assert_eq!(out["joints"], Value::Null);
        assert!(out["joints_error"].as_str().unwrap().contains("joint_states is 3"), "{}", out["joints_error"]);

        let with_battery = |robot: Arc<FakeRobot>| context_with(robot, |c| c.sensors.battery.topic = "battery_state".into());
        let out = Proprioception.call(Map::new(), with_battery(robot.clone())).await.unwrap().output;
        assert_eq!(out["health"]["error"], "no battery state received yet on battery");
        robot.samples.lock().battery = Some(stamped(Battery { fraction: 0.15, voltage_v: 11.1, charging: false }, "", Duration::from_millis(5)));
        let out = Proprioception.call(Map::new(), with_battery(robot.clone())).await.unwrap().output;
        assert_eq!((out["health"]["battery_fraction"].as_f64(), out["health"]["low"].as_bool(), out["health"]["charging"].as_bool()), (Some(0.15), Some(true), Some(false)));
        robot.samples.lock().battery = Some(stamped(Battery { fraction: f64::NAN, voltage_v: 11.1, charging: true }, "", Duration::from_millis(5)));
        let out = Proprioception.call(Map::new(), with_battery(robot)).await.unwrap().output;
        assert_eq!((&out["health"]["battery_fraction"], &out["health"]["low"]), (&Value::Null, &Value::Null), "unknown charge is null, not NaN");
    }
}
