//! The AICC bridge without ROS. Data flows one way: socket -> codec ->
//! session -> tool -> governor -> robot port, and back the same path. The
//! ROS node (crate `aicc_ros2`) implements the robot port; tests and the
//! replay robot implement it too.
//!
//! Every module is private; what the bridge's users call is re-exported
//! here, grouped by who calls it (ARCHITECTURE.md, "Crates"). A name a new
//! user needs is added here with that user, not before.

// The governor and the motion controller live in their own crate (no I/O,
// no tokio): here under their old names, as the rest of the bridge uses them.
use aicc_control::{governor, motion};

mod ai_control;
mod bridge;
mod config;
mod console;
mod diagnostics;
mod event_lines;
mod history;
mod live;
mod parameters;
mod perception;
mod preflight;
mod protocol;
mod recorder;
mod replay;
mod robot;
mod robot_events;
mod server;
mod tap;
mod tools;

// Running the bridge: the node's main, the test kit's in-process bridge.
pub use bridge::{run, Listeners, Startup};
pub use config::{
    CmdVelStamped, Config, ControllerInterface, ImageTransport, RecordMode, Reliability,
    SensorTopic, DEFAULT_NODE_NAME,
};
pub use governor::safety::UnobservedPolicy;

/// The robot port: what a robot adapter (the ROS node, the test robot, the
/// replay) implements, and the samples it feeds the bridge.
pub mod port {
    pub use crate::governor::hazards::Hazard;
    pub use crate::governor::BaseVelocity;
    pub use crate::robot::cmd_vel::{decide as decide_cmd_vel, CmdVelKind, CmdVelOutput};
    pub use crate::robot::frames::TransformSample;
    pub use crate::robot::names::{resolve, Names};
    pub use crate::robot::samples::{Latest, SampleStore};
    pub use crate::robot::testing::TestRobot;
    pub use crate::robot::topic_goal::{GripperJudge, TrajectoryJudge};
    pub use crate::robot::wire::WireType;
    pub use crate::robot::{
        ActuatorPort, Battery, CameraFrame, CameraInfo, ContactPoint, Contacts, Controller,
        Diagnostic, Endpoint, GoalControl, GripperGoal, GripperOutcome, ImuSample, JointStates,
        LaserScan, NodeClock, OdometrySample, PortError, Robot, Sensor, SensorPort, SignalPort,
        Stamped, TrajectoryGoal, TrajectoryOutcome,
    };
    /// The arm's named poses (`interact`'s `pose` argument), joint positions in radians.
    pub use crate::tools::interact::NAMED_POSES;
}

/// Images as the robot sends them and as the tools serve them (the vision
/// benchmark measures these).
pub mod images {
    pub use crate::perception::synthetic;
    pub use crate::perception::{
        decode_depth, decode_rgb, encode, to_base64, to_png_mm, CompressedFrame, EncodeOptions,
        OutputFormat, RawImage,
    };
    /// The largest `max_bytes` the `vision` tool accepts.
    pub use crate::tools::vision::MAX_MAX_BYTES;
}

/// The node's ROS parameters: their declarations, the parameter files'
/// loading, and the settings that may change while the bridge runs.
pub mod ros_parameters {
    pub use crate::live::Live;
    pub use crate::parameters::{load, parameters, NodeIdentity, ParamType, Parameter, Range};
}

/// Flight recordings: the ROS 2 message encodings the recorder writes, and
/// a recording served back as a robot (`aicc-ros2 --replay`).
pub mod recording {
    pub use crate::recorder::ros2msg;
    pub use crate::replay::{access, load, serve_file};
}

/// The sans-IO protocol core and the decoders in front of it, as the fuzz
/// targets drive them: lines and `now` in, lines out.
pub mod protocol_core {
    pub use crate::protocol::auth::{Scope, Tokens};
    pub use crate::protocol::catalog::Catalog;
    pub use crate::protocol::core::{
        ApprovalRules, Core, CoreConfig, Output, TickMode, ToolSuccess,
    };
    pub use crate::protocol::ids::SequentialIds;
    pub use crate::protocol::message::decode;
    pub use crate::tools::Registry;
}

/// The AI-control dialect's JSON-RPC request decoder, as its fuzz target
/// drives it.
pub mod ai_control_rpc {
    pub use crate::ai_control::rpc::{decode_request, error_line};
}

/// The preflight's judgement (`aicc-ros2 --check`): the facts the ROS side
/// gathers from the live graph, and one line per item with its fix.
pub mod check {
    pub use crate::preflight::{judge, passed, ActionFacts, Facts, Line, TopicFacts, Verdict};
}
