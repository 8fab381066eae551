//! A robot without ROS for the tools' unit tests: tests set the latest
//! samples directly; commands are recorded.
use std::sync::Arc;
use std::time::{Duration, Instant};

use nalgebra::{UnitQuaternion, Vector3};

use crate::config::Config;
use crate::governor::{BaseLimits, JointLimits};
use crate::robot::base_driver::{BaseDriver, BaseSettings};
use crate::robot::halt::Halts;
use crate::robot::joint_driver::{JointDriver, JointSettings};
use crate::robot::kinematics::Kinematics;
use crate::robot::names::Names;
use crate::robot::samples::SampleStore;
use crate::robot::testing::{RecordingActuators, RecordingSignals};
use crate::robot::{OdometrySample, Sensor, Stamped};
use crate::tools::ToolContext;

pub const URDF: &str = include_str!("../../../../urdf/aicc_bot.urdf");

/// The latest samples (set by the test) and what was commanded.
pub struct FakeRobot {
    pub samples: Arc<SampleStore>,
    pub actuators: Arc<RecordingActuators>,
    pub signals: Arc<RecordingSignals>,
}

impl Default for FakeRobot {
    fn default() -> Self {
        // Short topic names, as the tests' messages expect them.
        let names = [
            (Sensor::Camera, "camera/image_raw"),
            (Sensor::CameraInfo, "camera/camera_info"),
            (Sensor::Depth, "camera/depth/image_raw"),
            (Sensor::DepthInfo, "camera/depth/camera_info"),
        ]
        .into_iter()
        .fold(Names::default(), |names, (sensor, topic)| names.with_sensor(sensor, topic));
        let names =
            [Sensor::Odometry, Sensor::Imu, Sensor::JointStates, Sensor::Bumper, Sensor::Battery]
                .into_iter()
                .fold(names, |names, sensor| names.with_sensor(sensor, sensor.key()));
        Self {
            samples: Arc::new(SampleStore::with_system_clock(names)),
            actuators: Arc::default(),
            signals: Arc::default(),
        }
    }
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

/// A tool context over `robot` with the default config (changed by `configure`).
pub fn context_with(robot: Arc<FakeRobot>, configure: impl FnOnce(&mut Config)) -> ToolContext {
    let mut config = Config::default();
    configure(&mut config);
    let limits = BaseLimits {
        max_linear_mps: 0.2,
        max_angular_radps: 1.0,
        max_linear_accel_mps2: 1.0,
        max_angular_accel_radps2: 1.0,
    };
    let settings = BaseSettings {
        limits,
        emergency: crate::governor::EmergencyLimits::DEFAULT,
        safety: crate::governor::SafetyConfig::DEFAULT,
        geofence_radius_m: None,
        setpoint_timeout: Duration::from_millis(200),
        control_rate_hz: 50.0,
        scan_guards_turning: false,
        coverage: crate::robot::base_driver::CoverageSettings::from_config(&config),
    };
    let (events, _) = tokio::sync::mpsc::channel(8);
    let halts = Arc::new(Halts::default());
    let joint_limits =
        Arc::new(config.actuators.joint_limits(JointLimits::from_urdf(URDF).unwrap()).unwrap());
    ToolContext {
        base: Arc::new(BaseDriver::new(settings, robot.actuators.clone(), halts.clone())),
        joints: Arc::new(JointDriver::new(
            robot.actuators.clone(),
            robot.samples.clone(),
            joint_limits,
            halts,
            JointSettings::from_config(&config),
        )),
        signals: robot.signals.clone(),
        sensors: robot.samples.clone(),
        live: Arc::new(crate::live::Live::from_config(&config)),
        config: Arc::new(config),
        kinematics: Arc::new(Kinematics::from_urdf(URDF).unwrap()),
        recorder: crate::recorder::Recorder::new(
            &crate::config::RecordConfig::default(),
            events.clone(),
        ),
        events,
        session: "s".into(),
        call_id: "c".into(),
    }
}

pub fn context(robot: Arc<FakeRobot>) -> ToolContext {
    context_with(robot, |_| {})
}
