//! The port between the bridge and the robot: the plain sample and command
//! types, the port traits ([`port`]), the latest samples ([`samples`]), and
//! the governed drivers that alone may move the robot ([`base_driver`],
//! [`joint_driver`]). The ROS adapter (crate `aicc_ros2`) fills and drains
//! them; nothing here names ROS.
pub(crate) mod age;
pub(crate) mod arm_reach;
pub(crate) mod base_driver;
pub(crate) mod cmd_vel;
pub mod frames;
pub(crate) mod halt;
pub(crate) mod joint_driver;
pub(crate) mod kinematics;
pub(crate) mod monitor;
pub mod names;
pub(crate) mod port;
pub mod samples;
pub(crate) mod surroundings;
pub mod testing;
pub mod topic_goal;
pub mod wire;

pub use age::{Age, NodeClock, Now, StampStatus};
pub use port::{
    ActuatorPort, Endpoint, GoalControl, PortError, Robot, Sensor, SensorPort, SignalPort,
};

use std::time::Instant;

use nalgebra::{UnitQuaternion, Vector3};

use crate::perception::{CompressedFrame, RawImage};

/// A sample as received: what it is, where from, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped<T> {
    pub value: T,
    /// The message's header frame.
    pub frame_id: String,
    /// The message's header stamp, seconds (ROS time; sim time in simulation).
    pub stamp_s: f64,
    /// When the bridge received it (for freshness).
    pub received: Instant,
}

impl<T> Stamped<T> {
    /// Its ages at `now`: since capture (stamp) and since receipt.
    pub fn age(&self, now: Now) -> Age {
        Age::of(self.stamp_s, self.received, now)
    }
}

/// The latest odometry (nav_msgs/Odometry): pose in `frame_id`, twist in
/// `child_frame_id` (REP-105: odom -> base_footprint).
#[derive(Debug, Clone, PartialEq)]
pub struct OdometrySample {
    pub frame_id: String,
    pub child_frame_id: String,
    pub position_m: Vector3<f64>,
    pub orientation: UnitQuaternion<f64>,
    pub linear_velocity_mps: Vector3<f64>,
    pub angular_velocity_radps: Vector3<f64>,
    pub stamp_s: f64,
    pub received: Instant,
}

impl OdometrySample {
    /// Its ages at `now`: since capture (stamp) and since receipt.
    pub fn age(&self, now: Now) -> Age {
        Age::of(self.stamp_s, self.received, now)
    }
}

/// The latest IMU sample (sensor_msgs/Imu).
#[derive(Debug, Clone, PartialEq)]
pub struct ImuSample {
    pub frame_id: String,
    /// None when the IMU reports no orientation (covariance[0] == -1).
    pub orientation: Option<UnitQuaternion<f64>>,
    pub angular_velocity_radps: Vector3<f64>,
    pub linear_acceleration_mps2: Vector3<f64>,
    pub stamp_s: f64,
    pub received: Instant,
}

impl ImuSample {
    /// Its ages at `now`: since capture (stamp) and since receipt.
    pub fn age(&self, now: Now) -> Age {
        Age::of(self.stamp_s, self.received, now)
    }
}

/// A camera frame, kept as received: decoding and encoding happen only
/// when an agent asks (an idle bridge costs almost nothing).
#[derive(Debug, Clone, PartialEq)]
pub enum CameraFrame {
    Raw(RawImage),
    Compressed(CompressedFrame),
}

/// sensor_msgs/CameraInfo, the part the bridge uses.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraInfo {
    pub width: u32,
    pub height: u32,
    /// Row-major intrinsic matrix K.
    pub k: [f64; 9],
}

/// sensor_msgs/LaserScan, the part the bridge uses (angles in the
/// scanner's frame, counter-clockwise from its +x).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LaserScan {
    pub angle_min_rad: f64,
    pub angle_increment_rad: f64,
    pub range_min_m: f64,
    pub range_max_m: f64,
    pub ranges_m: Vec<f32>,
}

/// sensor_msgs/JointState.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JointStates {
    pub names: Vec<String>,
    pub positions: Vec<f64>,
    pub velocities: Vec<f64>,
    pub efforts: Vec<f64>,
}

impl JointStates {
    pub fn position(&self, joint: &str) -> Option<f64> {
        let index = self.names.iter().position(|n| n == joint)?;
        self.positions.get(index).copied()
    }
}

/// One contact between a part of the robot and something else.
#[derive(Debug, Clone, PartialEq)]
pub struct ContactPoint {
    /// The robot's part (collision name).
    pub part: String,
    /// What it touches.
    pub other: String,
    pub position_m: Vector3<f64>,
    /// Contact normal, from the robot's part towards the other.
    pub normal: Vector3<f64>,
    pub depth_m: f64,
    /// Force magnitude on the robot's part, N, when the source gives it.
    pub force_n: Option<f64>,
}

/// The bumper's contacts (empty: not in contact).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Contacts {
    pub points: Vec<ContactPoint>,
}

/// sensor_msgs/BatteryState, the part the bridge uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Battery {
    /// 0..1, NaN when unknown.
    pub fraction: f64,
    pub voltage_v: f64,
    pub charging: bool,
}

pub use crate::governor::joint_motion::Waypoint;

/// A joint trajectory goal for a FollowJointTrajectory controller.
#[derive(Debug, Clone, PartialEq)]
pub struct TrajectoryGoal {
    pub joint_names: Vec<String>,
    /// Waypoints: positions and velocities (one per joint), optional
    /// efforts, time from start.
    pub points: Vec<Waypoint>,
}

/// A gripper goal: the command a GripperCommand action takes, and the
/// trajectory of the finger joint(s) a trajectory topic takes instead
/// (planned within their limits, `max_effort_n` in every waypoint).
#[derive(Debug, Clone, PartialEq)]
pub struct GripperGoal {
    pub position_m: f64,
    pub max_effort_n: f64,
    pub trajectory: TrajectoryGoal,
}

/// How a controller finished a goal.
#[derive(Debug, Clone, PartialEq)]
pub struct TrajectoryOutcome {
    /// control_msgs FollowJointTrajectory error_code (0 = SUCCESSFUL).
    pub error_code: i32,
    pub error_string: String,
}

/// How a gripper finished a goal (control_msgs/GripperCommand result).
#[derive(Debug, Clone, PartialEq)]
pub struct GripperOutcome {
    pub position_m: f64,
    pub effort_n: f64,
    pub stalled: bool,
    pub reached_goal: bool,
}

/// The robot's controllers, by role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Head,
    Arm,
}

/// An operator-visible record of a clamp, stop or rejection
/// (diagnostic_msgs/DiagnosticStatus on /diagnostics).
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// 0 OK, 1 WARN, 2 ERROR.
    pub level: u8,
    pub name: String,
    pub message: String,
    pub values: Vec<(String, String)>,
}
