//! The AICC bridge without ROS. Data flows one way: socket -> codec ->
//! session -> tool -> governor -> robot port, and back the same path. The
//! ROS node (crate `aicc_ros2`) implements the robot port; tests and the
//! replay robot implement it too.
pub mod bridge;
pub mod config;
pub mod console;
pub mod diagnostics;
pub mod event_lines;
pub mod fonline;
pub mod governor;
pub mod history;
pub mod in_process;
pub mod live;
pub mod motion;
pub mod parameters;
pub mod perception;
pub mod protocol;
pub mod recorder;
pub mod replay;
pub mod robot;
pub mod server;
pub mod tap;
pub mod tools;
