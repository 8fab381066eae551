//! aicc-ros2: an AICC bridge between LLM agents and a ROS 2 robot.
//!
//! Data flows one way: socket -> codec -> session -> tool -> governor ->
//! robot port -> ROS, and back the same path.
pub mod agent_conformance;
pub mod client;
pub mod config;
pub mod conformance;
pub mod fonline;
pub mod governor;
pub mod perception;
pub mod protocol;
pub mod robot;
pub mod ros;
pub mod server;
pub mod tools;
