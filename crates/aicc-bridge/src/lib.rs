//! The AICC bridge without ROS. Data flows one way: socket -> codec ->
//! session -> tool -> governor -> robot port, and back the same path. The
//! ROS node (crate `aicc_ros2`) implements the robot port; tests and the
//! replay robot implement it too.
// The governor and the motion controller live in their own crate (no I/O,
// no tokio): here under their old names, as the rest of the bridge uses them.
pub use aicc_control::{governor, motion};

pub mod bridge;
pub mod config;
pub mod console;
pub mod diagnostics;
pub mod event_lines;
pub mod fonline;
pub mod history;
pub mod live;
pub mod parameters;
pub mod perception;
pub mod protocol;
pub mod recorder;
pub mod replay;
pub mod robot;
pub mod robot_events;
pub mod server;
pub mod tap;
pub mod test_bridge;
pub mod tools;
