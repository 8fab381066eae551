//! The AICC bridge without ROS. Data flows one way: socket -> codec ->
//! session -> tool -> governor -> robot port, and back the same path. The
//! ROS node (crate `aicc_ros2`) implements the robot port; tests and the
//! replay robot implement it too.
// The governor and the motion controller live in their own crate (no I/O,
// no tokio): here under their old names, as the rest of the bridge uses them.
pub use aicc_control::governor;
use aicc_control::motion;

pub mod ai_control;
pub mod bridge;
pub mod config;
mod console;
mod diagnostics;
mod event_lines;
mod history;
pub mod live;
pub mod parameters;
pub mod perception;
pub mod protocol;
pub mod recorder;
pub mod replay;
pub mod robot;
mod robot_events;
mod server;
mod tap;
pub mod tools;
