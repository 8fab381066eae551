//! The safety governor: pure functions over plain structs. The node feeds it
//! and publishes what it decides; nothing here does I/O or reads a clock.
pub mod base;
pub mod braking;
pub mod coverage;
pub mod footprint;
pub mod hazards;
pub mod joint_motion;
pub mod joints;
pub mod laser;
pub mod memory;
pub mod obstacles;
pub mod odometry;
pub mod safety;

pub use base::{govern_base, BaseLimits, BaseVelocity, Governed};
pub use braking::{
    braking_time_s, govern_base_step, govern_base_with_envelope, EmergencyLimits, GovernedStep,
};
pub use joints::{JointError, JointKind, JointLimit, JointLimits, UrdfError};
pub use obstacles::{
    nearest_obstacle_ahead, CameraIntrinsics, Corridor, DepthImage, DepthScan, ObstacleError,
};
pub use safety::{
    apply_envelope, obstacle_speed_limit, safety_envelope, wrap_angle, Envelope, Pose2D,
    Restriction, Rule, SafetyConfig, SafetyInputs, SafetyState,
};
