//! Test support shared by the workspace's integration tests and
//! benchmarks: the whole bridge in process on its test robot, no ROS
//! ([`TestBridge`], [`TestRobot`]), and a blocking AICC client that sends
//! what a test says, byte for byte (malformed lines included), and reads
//! whatever comes ([`AiccClient`], from aicc-wire: the ROS node's benchmarks
//! use it too).
pub mod bridge;

pub use aicc_bridge::port::TestRobot;
pub use aicc_wire::blocking::AiccClient;
pub use bridge::{joints_at_rest, loopback_config, TestBridge};
