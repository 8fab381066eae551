//! The robot port, in three parts with different rights:
//! - [`SensorPort`]: read-only latest samples; every tool may hold it.
//! - [`ActuatorPort`]: base velocity, joint trajectories, the gripper.
//!   Only the governed drivers hold it ([`super::base_driver::BaseDriver`],
//!   [`super::joint_driver::JointDriver`]), so no tool can publish a
//!   velocity or a joint goal around the governor.
//! - [`SignalPort`]: what the bridge publishes that moves nothing (speech,
//!   diagnostics).
//!
//! The ROS adapter (crate `aicc_ros2`) implements them; so do the test and
//! replay robots. Nothing here names ROS.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use futures::future::BoxFuture;

use super::age::{Now, StampStatus};
use super::frames::SharedFrames;
use super::halt::HaltWatch;
use super::{
    Battery, CameraFrame, CameraInfo, Contacts, Controller, Diagnostic, GripperGoal,
    GripperOutcome, ImuSample, JointStates, LaserScan, OdometrySample, Stamped, TrajectoryGoal,
    TrajectoryOutcome,
};
use crate::governor::BaseVelocity;
use crate::perception::RawImage;

/// A sensor of the robot: named by the configuration, so defined there.
pub use crate::config::Sensor;

/// Where commands go, for messages and `meta.source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    CmdVel,
    Head,
    Arm,
    Gripper,
}

impl From<Controller> for Endpoint {
    fn from(controller: Controller) -> Self {
        match controller {
            Controller::Head => Endpoint::Head,
            Controller::Arm => Endpoint::Arm,
        }
    }
}

/// Why the robot side could not carry out a command.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PortError {
    /// The profile has no such controller or topic.
    #[error("no {what} is configured")]
    NotConfigured { what: String },
    /// The action server did not appear in time (it may come up: retryable).
    #[error("action server {name} is not available (waited {waited_s:.0} s)")]
    ServerUnavailable { name: String, waited_s: f64 },
    /// The controller refused the goal (unknown joints, limits): not retryable.
    #[error("{name} rejected the goal ({reason}); the controller refuses unknown joints and positions outside its limits")]
    Rejected { name: String, reason: String },
    /// The topic's other endpoints take another message type than the
    /// bridge would publish: nothing is sent until the setting or the
    /// robot changes (not retryable).
    #[error("{name}: {reason}")]
    TypeMismatch { name: String, reason: String },
    /// Nothing on the robot's side tells how to talk to it yet (retryable).
    #[error("{name}: {reason}")]
    NotReady { name: String, reason: String },
    /// Talking to the controller or topic failed.
    #[error("{name}: {reason}")]
    Failed { name: String, reason: String },
    /// A stop came before the goal went out (it may have been waiting for
    /// its action server): nothing was sent.
    #[error("{name}: a stop came before the goal was sent; nothing was sent")]
    HaltedBeforeSending { name: String },
    /// A stop came while the goal ran: it was cancelled, and the joints
    /// hold where they are (`how` says what the controller was told).
    #[error("{name}: stopped by a stop ({how})")]
    Halted { name: String, how: String },
}

impl PortError {
    /// Whether trying again may succeed.
    pub fn retryable(&self) -> bool {
        !matches!(
            self,
            PortError::NotConfigured { .. }
                | PortError::TypeMismatch { .. }
                | PortError::Rejected { .. }
                | PortError::HaltedBeforeSending { .. }
                | PortError::Halted { .. }
        )
    }
}

/// What a joint goal carries to the port besides itself: the halt it
/// obeys, and how to hold its joints where they are on a controller that
/// has no cancel (a trajectory topic).
#[derive(Clone)]
pub struct GoalControl {
    pub halt: HaltWatch,
    /// A trajectory holding the goal's joints where they are now (one
    /// waypoint, at rest, at time 0, as a trajectory controller holds on a
    /// cancel), or why there is none (no fresh joint states).
    pub hold: Arc<dyn Fn() -> Result<TrajectoryGoal, String> + Send + Sync>,
}

impl GoalControl {
    /// Never halted, and no hold known (tests).
    pub fn unguarded() -> Self {
        Self { halt: HaltWatch::never(), hold: Arc::new(|| Err("no hold in this test".into())) }
    }
}

/// The latest sample of every sensor, and where it comes from.
pub trait SensorPort: Send + Sync + 'static {
    fn odometry(&self) -> Option<OdometrySample>;
    fn imu(&self) -> Option<ImuSample>;
    fn camera(&self) -> Option<Stamped<CameraFrame>>;
    fn camera_info(&self) -> Option<Stamped<CameraInfo>>;
    fn depth(&self) -> Option<Stamped<RawImage>>;
    fn depth_info(&self) -> Option<Stamped<CameraInfo>>;
    fn joint_states(&self) -> Option<Stamped<JointStates>>;
    fn contacts(&self) -> Option<Stamped<Contacts>>;
    fn battery(&self) -> Option<Stamped<Battery>>;
    /// The latest laser scan (a robot without a scanner has none).
    fn scan(&self) -> Option<Stamped<LaserScan>> {
        None
    }
    /// The latest hazard report of a Create 3 base (a robot without one has none).
    fn hazards(&self) -> Option<Stamped<Vec<crate::governor::hazards::Hazard>>> {
        None
    }

    /// When the latest sample of `sensor` arrived, without copying it: the
    /// availability watch asks often, and frames are large.
    fn received(&self, sensor: Sensor) -> Option<Instant>;

    /// The topic behind `sensor` ("" when not configured), for
    /// `meta.source` and error messages.
    fn topic(&self, sensor: Sensor) -> String;

    /// Now, in the monotonic clock and in the node's clock (ROS time, or
    /// simulated time beside a simulator): capture ages count in it.
    fn now(&self) -> Now;

    /// What each configured sensor has delivered so far (for operators).
    fn statistics(&self) -> Vec<SensorStatistics> {
        Vec::new()
    }

    /// The robot's TF tree as received; None when the robot side has no
    /// transforms to give (frames then come from the URDF).
    fn frames(&self) -> Option<SharedFrames> {
        None
    }

    /// The wire form (ROS: CDR) of the latest sample of `sensor` if it is
    /// the one received at `received`; None when not kept (no recording
    /// wants samples) or a newer one arrived since.
    fn wire_sample(&self, _sensor: Sensor, _received: Instant) -> Option<WireSample> {
        None
    }

    /// The switch telling the robot side when to keep wire samples (set by
    /// the recorder while it records).
    fn share_wire_switch(&self, _switch: WireSwitch) {}
}

/// What one sensor has delivered, for `bridge_status` and diagnostics.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SensorStatistics {
    pub sensor: &'static str,
    pub topic: String,
    /// Messages received since start.
    pub received: u64,
    /// Of those, how many carried a stamp unlike the one before (frames,
    /// not repeats).
    pub distinct_stamps: u64,
    /// The last message's stamp, node clock seconds.
    pub last_stamp_s: Option<f64>,
    /// How long after its capture the last message arrived, node clock
    /// (None when its stamp was not valid).
    pub last_receipt_delay_ms: Option<f64>,
    pub last_stamp_status: Option<StampStatus>,
    /// Why the subscription may receive nothing (a QoS mismatch with its publishers).
    pub qos_note: Option<String>,
}

/// Commands that move the robot. Held only by the governed drivers.
pub trait ActuatorPort: Send + Sync + 'static {
    /// Publishes one base velocity command (already governed).
    fn publish_base_velocity(&self, velocity: BaseVelocity);

    /// Why base velocity cannot reach the base now (its topic's type is not
    /// settled, or the robot takes another type than configured): motion
    /// is refused with it. None when commands go out.
    fn base_output_unavailable(&self) -> Option<PortError> {
        None
    }

    /// Sends a trajectory to a controller; resolves when it finishes.
    /// Nothing goes out once `control.halt` has fired, not even a goal
    /// still waiting for its action server ([`PortError::HaltedBeforeSending`]);
    /// a halt while the goal runs stops the controller where the joints
    /// are (the action's cancel; on a topic, `control.hold`) and resolves
    /// with [`PortError::Halted`] once the controller has it. Dropping the
    /// future stops the controller the same way.
    fn follow_trajectory(
        &self,
        controller: Controller,
        goal: TrajectoryGoal,
        control: GoalControl,
    ) -> BoxFuture<'static, Result<TrajectoryOutcome, PortError>>;

    /// Sends a gripper goal (its command to a GripperCommand action, its
    /// trajectory to a trajectory topic); resolves when it finishes.
    /// Nothing goes out once `control.halt` has fired; a gripper goal
    /// already running is left to finish (it may be holding something).
    fn gripper_command(
        &self,
        goal: GripperGoal,
        control: GoalControl,
    ) -> BoxFuture<'static, Result<GripperOutcome, PortError>>;

    /// The topic or action behind `endpoint`, for messages.
    fn endpoint(&self, endpoint: Endpoint) -> String;
}

/// What the bridge publishes that moves nothing.
pub trait SignalPort: Send + Sync + 'static {
    /// Publishes a line of speech.
    fn say(&self, text: &str) -> Result<(), PortError>;
    /// The speech topic ("" when not configured).
    fn say_topic(&self) -> String;
    /// Publishes operator diagnostics.
    fn publish_diagnostics(&self, diagnostics: &[Diagnostic]);
    /// Publishes a world command (JSON) to a simulator (generator tools).
    fn world_command(&self, _command: &str) -> Result<(), PortError> {
        Err(PortError::NotConfigured { what: "world topic".into() })
    }
    /// The world command topic ("" when not configured).
    fn world_topic(&self) -> String {
        String::new()
    }
    /// Publishes one line of the bridge's events (JSON) for observers on
    /// the robot's side (ROS: `/aicc/events`). Never blocks; lost when the
    /// robot side cannot take it.
    fn publish_event(&self, _json: &str) {}
    /// Whether [`Self::publish_event`] goes anywhere.
    fn publishes_events(&self) -> bool {
        false
    }
}

/// A robot, as the bridge is given it.
#[derive(Clone)]
pub struct Robot {
    pub sensors: Arc<dyn SensorPort>,
    pub actuators: Arc<dyn ActuatorPort>,
    pub signals: Arc<dyn SignalPort>,
}

// What the robot side keeps of a message in its wire form, for the flight
// recorder (robot/wire.rs takes it from here).

/// A sensor sample as the robot side received it.
#[derive(Debug, Clone, PartialEq)]
pub struct WireSample {
    /// The topic it came on (resolved, e.g. `/camera/image_raw`).
    pub topic: Arc<str>,
    /// Its type, ROS-style (`sensor_msgs/msg/Image`).
    pub type_name: Arc<str>,
    /// The message's schema text (ros2msg: the .msg text and those of its
    /// dependencies); empty when the robot side could not find it.
    pub schema: Arc<str>,
    /// The serialised message (CDR, with its encapsulation header).
    pub data: Arc<[u8]>,
    /// When it was received, monotonic: the same instant as the decoded
    /// sample's `received` (how a read is matched with its bytes).
    pub received: Instant,
    /// The same instant in wall-clock time (the recording's log time).
    pub received_wall: SystemTime,
}

/// What a topic carries, for the wire samples the robot side keeps.
#[derive(Debug, Clone)]
pub struct WireType {
    pub topic: Arc<str>,
    pub type_name: Arc<str>,
    pub schema: Arc<str>,
}

/// Whether wire samples are wanted now: on while a recording is written.
/// Shared by the recorder (which sets it) and the robot side (which reads
/// it on every message: one relaxed load).
#[derive(Debug, Clone, Default)]
pub struct WireSwitch(Arc<AtomicBool>);

impl WireSwitch {
    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed);
    }
}
