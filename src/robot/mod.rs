//! The port between tools and the robot. Tools and the governor see only
//! these plain types; the ROS adapter (src/ros) fills and drains them.
pub mod base_driver;

use std::time::Instant;

use nalgebra::{UnitQuaternion, Vector3};

use crate::governor::BaseVelocity;

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
    /// The message's header stamp, seconds (ROS time; sim time in simulation).
    pub stamp_s: f64,
    /// When the bridge received it (for freshness).
    pub received: Instant,
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

/// What the bridge needs from a robot. Implemented by the ROS adapter; tests
/// of pure logic use small in-memory implementations.
pub trait RobotPort: Send + Sync + 'static {
    fn odometry(&self) -> Option<OdometrySample>;
    fn imu(&self) -> Option<ImuSample>;
    /// The ROS topic names behind the samples, for `meta.source`.
    fn odometry_source(&self) -> String;
    fn imu_source(&self) -> String;
    /// Publishes one base velocity command. Only the base driver calls this,
    /// with governed values.
    fn publish_base_velocity(&self, velocity: BaseVelocity);
}
