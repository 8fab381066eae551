//! The ROS 2 side of the bridge: the r2r adapter that implements the
//! bridge's robot port. The only crate that names ROS types.
pub mod ros;
