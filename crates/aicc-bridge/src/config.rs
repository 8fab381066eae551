//! Typed, strict configuration. Files are ROS 2 parameter files
//! (`<node>: ros__parameters: {...}` or `/**: ros__parameters: {...}`), so
//! the same file serves `--params-file` in a launch file and `--config` on
//! the command line. Unknown keys are rejected with their names.
use std::net::SocketAddr;
use std::path::Path;

use aicc_control::governor::{JointError, JointLimits};
use serde::Deserialize;

pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:43010";
/// The AI-control contract's default endpoint.
pub(crate) const DEFAULT_AI_CONTROL_LISTEN: &str = "127.0.0.1:43011";
pub const DEFAULT_NODE_NAME: &str = "aicc_bridge";

/// The whole bridge configuration.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the AICC listener binds. Loopback unless deliberately changed.
    pub listen: String,
    /// AICC tick rate (`tick_rate_hz` in the manifest).
    pub tick_rate_hz: f64,
    /// Name of the world in the manifest (metadata only, never state).
    pub world_name: String,
    /// Largest accepted inbound line, bytes (AICC and the contract: 1 MiB).
    pub max_line_bytes: usize,
    /// Tool calls one session may have executing at once.
    pub max_calls_in_flight: usize,
    /// Bound on messages queued to one connection's writer; beyond it events
    /// are dropped (and counted in the stream) and reading pauses.
    pub outbound_queue: usize,
    /// The same bound in bytes (serialised messages waiting to be written).
    pub outbound_queue_bytes: usize,
    /// A peer that reads nothing for this long while bytes wait for it is
    /// disconnected.
    pub write_stall_timeout_s: f64,
    /// Time a new connection has to finish its TLS handshake and, with
    /// tokens configured, to authenticate; then it is closed.
    pub handshake_timeout_s: f64,
    /// Kernel queue of connections not yet accepted (listen backlog; the
    /// kernel caps it at net.core.somaxconn).
    pub listen_backlog: u32,
    /// How the tick advances: fixed, event or hybrid (with `tick_now`).
    pub tick_mode: crate::protocol::core::TickMode,
    /// Events kept per session for replay on resume.
    pub event_ring_capacity: usize,
    /// How long a disconnected session may be resumed.
    pub resume_window_s: f64,
    /// Disconnected sessions kept for resuming at most (the longest
    /// disconnected is forgotten first).
    pub max_detached_sessions: usize,
    /// Heartbeat interval for agents that declare no model class.
    pub heartbeat_interval_s: f64,
    /// A peer silent for this many heartbeat intervals is disconnected.
    pub dead_peer_intervals: u32,
    /// The motion lease lapses after this long without actuator calls.
    pub lease_timeout_s: f64,
    /// Deadline of any one tool call.
    pub tool_timeout_s: f64,
    /// Connections served at once.
    pub max_connections: usize,
    pub security: SecurityConfig,
    /// The robot's URDF ("" = the bundled urdf/aicc_bot.urdf): joint
    /// names, limits and geometry for the governor and the head/arm tools.
    pub urdf_file: String,
    /// Count time in the simulator's `/clock` (ROS `use_sim_time`): every
    /// stamp the bridge publishes and every capture age. Beside a simulator.
    pub use_sim_time: bool,
    /// Namespace prepended to relative topic names ("" = the node's own),
    /// for multi-robot setups; `--ros-args -r __ns:=/robot1` works too.
    pub namespace: String,
    pub actuators: Actuators,
    pub base: BaseConfig,
    pub safety: SafetySettings,
    pub sensors: SensorConfig,
    /// Coordinate frames: the robot's TF tree, the URDF as the fallback.
    pub tf: TfConfig,
    /// The AI-control dialect's front end: off unless enabled. `fonline`,
    /// its name before 0.2 (after the contract's project), is read as well.
    #[serde(alias = "fonline")]
    pub ai_control: AiControlConfig,
    /// The flight recorder: what crosses the core, to MCAP files.
    pub record: RecordConfig,
    /// What waits for an operator's approval (default: nothing).
    pub approvals: ApprovalsConfig,
    /// The operator's web console (docs/console.md): off unless enabled.
    pub console: ConsoleConfig,
}

/// The operator's web console, served by the bridge (docs/console.md).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleConfig {
    /// Needs an admin token in security.tokens; never served without one.
    pub enabled: bool,
    /// HOST:PORT; a non-loopback address needs security.allow_remote and TLS
    /// (security.tls_cert_file), or security.allow_plaintext_remote.
    pub listen: String,
    /// How often the live camera picture is refreshed while a page is open.
    pub camera_hz: f64,
    /// How often pose, governor, lease and approvals are pushed to pages.
    pub state_hz: f64,
    /// Pages open at once (their event streams); one more is refused.
    pub max_pages: usize,
    /// Updates queued for one page; a page slower than this loses the
    /// oldest and is told how many (the robot's control never waits).
    pub page_queue: usize,
    /// Requests (approve, deny, release, the live pictures) from all pages
    /// in any minute; more are refused with 429 (STOP is never refused).
    pub max_requests_per_minute: u32,
    /// HTTP connections served at once, and from one source address
    /// (TLS handshakes included).
    pub max_connections: usize,
    pub max_connections_per_address: usize,
    /// A request's header must have arrived this long after the
    /// connection opened or its previous response (and a TLS handshake be
    /// done within it); a slower peer is closed.
    pub header_timeout_s: f64,
}

pub(crate) const DEFAULT_CONSOLE_LISTEN: &str = "127.0.0.1:8765";

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            listen: DEFAULT_CONSOLE_LISTEN.into(),
            camera_hz: 2.0,
            state_hz: 5.0,
            max_pages: 16,
            page_queue: 64,
            max_requests_per_minute: 1200,
            max_connections: 64,
            max_connections_per_address: 32,
            header_timeout_s: 5.0,
        }
    }
}

/// Calls that wait for an operator's approval (docs/approvals.md).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalsConfig {
    /// Tools whose every call waits (e.g. [interact]).
    pub tools: Vec<String>,
    /// A `move` planned longer than this waits; 0 = no such rule.
    pub move_longer_than_m: f64,
    /// Approval mode at start: every actuator call but `stop` waits
    /// (admins switch it with `approval_mode`).
    pub approval_mode: bool,
    /// A call not decided within this ends with a non-retryable error.
    pub timeout_s: f64,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self { tools: Vec::new(), move_longer_than_m: 0.0, approval_mode: false, timeout_s: 60.0 }
    }
}

/// When the flight recorder writes (docs/recording.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordMode {
    /// Nothing recorded (nothing copied for it either).
    Off,
    /// Everything, from start to shutdown.
    Always,
    /// The last `flight_window_s` seconds kept in memory, written out on
    /// an emergency stop, a contact or an agent lost mid-call.
    OnFault,
}

/// The flight recorder's settings.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecordConfig {
    pub mode: RecordMode,
    /// Directory of the recordings (created when missing; relative to the
    /// working directory).
    pub dir: String,
    /// A file reaching this size is closed and the next one started.
    pub max_file_bytes: u64,
    /// Records waiting for the disk; beyond it they are lost (counted in
    /// the file), never waited for.
    pub queue: usize,
    /// Mode on_fault: the seconds kept in memory before a fault...
    pub flight_window_s: f64,
    /// ...and at most this many bytes of them (the oldest forgotten first).
    pub flight_max_bytes: usize,
    /// Also record each sensor sample a tool read, as the robot sent it
    /// (ROS: CDR on the sensor's topic, with its ros2msg schema), once per
    /// sample, in the file and in the on_fault memory.
    pub sensor_samples: bool,
    /// With `sensor_samples`: the latest sample of these sensors is also
    /// recorded at most this often (Hz), whether a tool reads it or not.
    pub sample_rates_hz: SampleRates,
    /// The bridge's events and a summary of each tool call and result
    /// (images left out) published as JSON (std_msgs/String) on this ROS
    /// topic, relative to the node's namespace; "" = not published.
    /// Independent of `mode`.
    pub ros_events_topic: String,
}

/// How often each sensor's latest sample is recorded (Hz) besides the
/// samples tools read; 0 (the default) = only when a tool reads it. The
/// keys are those under `sensors:`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SampleRates {
    pub odom: f64,
    pub imu: f64,
    pub camera: f64,
    pub camera_info: f64,
    pub depth: f64,
    pub depth_info: f64,
    pub joint_states: f64,
    pub bumper: f64,
    pub battery: f64,
    pub scan: f64,
    pub hazards: f64,
}

/// A sensor of the robot, as the configuration names it (`sensors.<key>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sensor {
    Odometry,
    Imu,
    Camera,
    CameraInfo,
    Depth,
    DepthInfo,
    JointStates,
    Bumper,
    Battery,
    Scan,
    Hazards,
}

impl Sensor {
    pub const ALL: [Sensor; 11] = [
        Sensor::Hazards,
        Sensor::Odometry,
        Sensor::Imu,
        Sensor::Camera,
        Sensor::CameraInfo,
        Sensor::Depth,
        Sensor::DepthInfo,
        Sensor::JointStates,
        Sensor::Bumper,
        Sensor::Battery,
        Sensor::Scan,
    ];

    /// The key under `sensors:` in the configuration.
    pub fn key(self) -> &'static str {
        match self {
            Sensor::Odometry => "odom",
            Sensor::Imu => "imu",
            Sensor::Camera => "camera",
            Sensor::CameraInfo => "camera_info",
            Sensor::Depth => "depth",
            Sensor::DepthInfo => "depth_info",
            Sensor::JointStates => "joint_states",
            Sensor::Bumper => "bumper",
            Sensor::Battery => "battery",
            Sensor::Scan => "scan",
            Sensor::Hazards => "hazards",
        }
    }
}

impl SampleRates {
    /// The rate of `sensor` (Hz; 0 = none).
    pub fn of(&self, sensor: Sensor) -> f64 {
        match sensor {
            Sensor::Odometry => self.odom,
            Sensor::Imu => self.imu,
            Sensor::Camera => self.camera,
            Sensor::CameraInfo => self.camera_info,
            Sensor::Depth => self.depth,
            Sensor::DepthInfo => self.depth_info,
            Sensor::JointStates => self.joint_states,
            Sensor::Bumper => self.bumper,
            Sensor::Battery => self.battery,
            Sensor::Scan => self.scan,
            Sensor::Hazards => self.hazards,
        }
    }
}

/// The smallest file size rotation accepts (a few chunks' worth).
pub(crate) const MIN_RECORD_FILE_BYTES: u64 = 64 * 1024;

impl RecordConfig {
    /// Whether sensor samples are recorded from the bridge's first moment
    /// (mode always or on_fault, with `sensor_samples`): their wire forms
    /// must be kept from the first message, before the recorder starts.
    pub fn keeps_samples_from_start(&self) -> bool {
        self.sensor_samples && self.mode != RecordMode::Off
    }
}

impl Default for RecordConfig {
    fn default() -> Self {
        Self {
            mode: RecordMode::Off,
            dir: "aicc_recordings".into(),
            max_file_bytes: 256 << 20,
            queue: 4096,
            flight_window_s: 30.0,
            flight_max_bytes: 64 << 20,
            sensor_samples: true,
            sample_rates_hz: SampleRates::default(),
            ros_events_topic: "aicc/events".into(),
        }
    }
}

/// Where the robot's transforms come from (tf2_msgs/TFMessage).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TfConfig {
    /// Dynamic transforms ("" = none: frames from the URDF only).
    pub topic: String,
    /// Latched static transforms ("" = none).
    pub static_topic: String,
    /// A dynamic transform older than this is not used: the lookup fails,
    /// naming the transform.
    pub max_age_s: f64,
}

impl Default for TfConfig {
    fn default() -> Self {
        Self { topic: "tf".into(), static_topic: "tf_static".into(), max_age_s: 0.5 }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.into(),
            tick_rate_hz: 10.0,
            world_name: "aicc_sim_room".into(),
            max_line_bytes: 1 << 20,
            max_calls_in_flight: 8,
            outbound_queue: 256,
            outbound_queue_bytes: 1 << 20,
            write_stall_timeout_s: 30.0,
            handshake_timeout_s: 10.0,
            listen_backlog: 1024,
            tick_mode: crate::protocol::core::TickMode::Fixed,
            event_ring_capacity: 1024,
            resume_window_s: 120.0,
            max_detached_sessions: 1024,
            heartbeat_interval_s: 10.0,
            dead_peer_intervals: 3,
            lease_timeout_s: 30.0,
            tool_timeout_s: 120.0,
            max_connections: 256,
            security: SecurityConfig::default(),
            urdf_file: String::new(),
            use_sim_time: false,
            namespace: String::new(),
            actuators: Actuators::default(),
            safety: SafetySettings::default(),
            base: BaseConfig::default(),
            sensors: SensorConfig::default(),
            tf: TfConfig::default(),
            ai_control: AiControlConfig::default(),
            record: RecordConfig::default(),
            approvals: ApprovalsConfig::default(),
            console: ConsoleConfig::default(),
        }
    }
}

/// The AI-control dialect (JSON-RPC 2.0 over NDJSON, the FOnline AiControl
/// contract) as a second front end over the same core. Disabled by
/// default: the contract asks for explicit configuration of a listener.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AiControlConfig {
    pub enabled: bool,
    /// HOST:PORT; a non-loopback address needs security.allow_remote, a
    /// token and security.allow_plaintext_remote (the dialect has no TLS).
    pub listen: String,
    /// Commands waiting behind the running one; one more is refused (-32002).
    pub max_queued_commands: usize,
    /// Events retained for `events` (bridge-wide, oldest dropped first).
    pub max_events: usize,
    /// The dialect's commands run under a lease: a client (a token; every
    /// client without one counts as one) not heard from for this long (any
    /// request: the reference client's event polling keeps it) has its
    /// running command stopped and its queued ones dropped.
    pub lease_timeout_s: f64,
    /// Connections served at once, and from one source address.
    pub max_connections: usize,
    pub max_connections_per_address: usize,
}

impl Default for AiControlConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            listen: DEFAULT_AI_CONTROL_LISTEN.into(),
            max_queued_commands: 64,
            max_events: 512,
            lease_timeout_s: 2.0,
            max_connections: 32,
            max_connections_per_address: 16,
        }
    }
}

/// Who may connect, and how.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecurityConfig {
    /// Listening on a non-loopback address needs this and a token.
    pub allow_remote: bool,
    /// A non-loopback listener without TLS (AICC without a certificate,
    /// the AI-control dialect, which has none, the console, a replay) is
    /// refused unless this is set too; then each start says so loudly.
    pub allow_plaintext_remote: bool,
    /// Environment variables holding tokens, and the scope each grants.
    /// Unset variables are skipped; with none set, no authentication is
    /// asked (loopback only) and sessions get `unauthenticated_scope`.
    /// The agent's token and the operator's are different variables, and
    /// must hold different texts (a start with one text in two scopes is
    /// refused).
    pub tokens: Vec<TokenSource>,
    /// Scope of sessions when no token is configured: observe or actuate.
    /// Admin is refused: operator tools exist only for an operator's token.
    pub unauthenticated_scope: crate::protocol::auth::Scope,
    /// Failed authentication attempts before a connection is closed.
    pub max_auth_failures: u32,
    /// AICC connections one source address may hold at once (of
    /// `max_connections`): a peer reconnecting in a loop cannot take every slot.
    pub max_connections_per_address: usize,
    /// Lines on one AICC or AI-control connection that are not JSON at all
    /// (not UTF-8, not JSON, not an object) before it is closed with one
    /// error line. A line that looks like HTTP closes it at once.
    pub max_undecodable_lines: u32,
    /// Lets sessions of the actuate scope (agents) call generators, which
    /// edit the world (place_object: only a simulator has it). Agents' MCP
    /// and agent-loop clients still offer generators only when asked.
    pub agents_may_modify_world: bool,
    /// TLS for remote use: PEM certificate chain and private key. Empty: plain TCP.
    pub tls_cert_file: String,
    pub tls_key_file: String,
}

/// The environment variable of the operator's (admin) token.
pub(crate) const OPERATOR_TOKEN_ENV: &str = "AICC_OPERATOR_TOKEN";
/// The environment variable of the agent's (actuate) token: the one every
/// agent client reads by default.
pub(crate) const AGENT_TOKEN_ENV: &str = "AICC_TOKEN";
/// The environment variable of an observer's token.
pub(crate) const OBSERVE_TOKEN_ENV: &str = "AICC_OBSERVE_TOKEN";

impl Default for SecurityConfig {
    fn default() -> Self {
        use crate::protocol::auth::Scope;
        Self {
            allow_remote: false,
            allow_plaintext_remote: false,
            tokens: vec![
                TokenSource { env: OPERATOR_TOKEN_ENV.into(), scope: Scope::Admin },
                TokenSource { env: AGENT_TOKEN_ENV.into(), scope: Scope::Actuate },
                TokenSource { env: OBSERVE_TOKEN_ENV.into(), scope: Scope::Observe },
            ],
            unauthenticated_scope: Scope::Actuate,
            max_auth_failures: 5,
            max_connections_per_address: 64,
            max_undecodable_lines: 8,
            agents_may_modify_world: false,
            tls_cert_file: String::new(),
            tls_key_file: String::new(),
        }
    }
}

/// One token: the name of the environment variable that holds it (never
/// the token itself: command lines and config files leak).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSource {
    pub env: String,
    pub scope: crate::protocol::auth::Scope,
}

/// Where commands go: ROS topics and action servers (relative names
/// resolve in the node's namespace, for multi-robot setups).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Actuators {
    /// geometry_msgs/Twist or TwistStamped, as `cmd_vel_stamped` says.
    pub cmd_vel: String,
    /// Which type goes on `cmd_vel`: `auto` (the type of the topic's
    /// subscribers decides: TwistStamped on the Jazzy TurtleBots, Twist on
    /// Humble), `true` (TwistStamped) or `false` (Twist).
    pub cmd_vel_stamped: CmdVelStamped,
    /// control_msgs/FollowJointTrajectory server of the pan-tilt head ("" = none).
    pub head_action: String,
    /// Joint names of the head, pan first, tilt second.
    pub head_joints: Vec<String>,
    /// control_msgs/FollowJointTrajectory server of the arm ("" = none).
    pub arm_action: String,
    pub arm_joints: Vec<String>,
    /// control_msgs/GripperCommand server ("" = none).
    pub gripper_action: String,
    /// The joint whose position the gripper command sets.
    pub gripper_joint: String,
    /// How head goals reach the controller (see [`ControllerInterface`]).
    pub head_interface: ControllerInterface,
    /// trajectory_msgs/JointTrajectory topic of the head controller (with `topic`, `auto`).
    pub head_trajectory_topic: String,
    pub arm_interface: ControllerInterface,
    pub arm_trajectory_topic: String,
    pub gripper_interface: ControllerInterface,
    /// JointTrajectory topic of a trajectory controller on the finger joint(s).
    pub gripper_trajectory_topic: String,
    /// Joints a gripper trajectory sets, each to the commanded position
    /// (empty: `gripper_joint` alone).
    pub gripper_trajectory_joints: Vec<String>,
    /// `auto`: how long the action server has to answer before the topic is used.
    pub action_detect_wait_s: f64,
    /// Topic goals: how far (rad) a head or arm joint may be from the
    /// trajectory's last point for the goal to count as reached.
    pub topic_goal_tolerance_rad: f64,
    /// Topic goals: the same for the gripper joint (m).
    pub topic_goal_tolerance_m: f64,
    /// Topic goals: how long after the trajectory's end the joints may
    /// take to get there before the goal fails.
    pub topic_result_margin_s: f64,
    /// Gripper topic goals: the shortest time given a gripper motion
    /// (longer where its velocity or acceleration limit needs it).
    pub gripper_topic_duration_s: f64,
    /// Acceleration limits of the joint goals (the URDF states none).
    pub head_max_accel_radps2: f64,
    pub arm_max_accel_radps2: f64,
    pub gripper_max_accel_mps2: f64,
    /// A speed cap on every arm joint below the URDF's limit, rad/s (0:
    /// the URDF's): what a small base survives of the arm's swing (on the
    /// bundled robot at its URDF's 4.8 rad/s, a swing from one side to the
    /// other threw the base at 0.26 m/s and turned it at 1.4 rad/s; at 2.0,
    /// 0.05 m/s and 0.36 rad/s).
    pub arm_max_speed_radps: f64,
    /// A joint goal starts from joint states no older than this.
    pub joint_start_max_age_s: f64,
    /// std_msgs/String topic for `say` ("" = none).
    pub say_topic: String,
    /// diagnostic_msgs/DiagnosticArray topic for clamps, stops and rejections.
    pub diagnostics_topic: String,
    /// std_msgs/String topic of a simulator's world commands (JSON), for
    /// the generator tools (`place_object`, capability can_modify_world);
    /// "" = none, as on every real robot: the generators leave the manifest.
    pub world_topic: String,
}

/// Which message type the bridge publishes on `actuators.cmd_vel`. Read
/// from `auto`, or from a boolean (`true`: TwistStamped) as the key was
/// before it took `auto`; written as `auto`, `true` or `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmdVelStamped {
    Auto,
    Stamped,
    Unstamped,
}

impl<'de> Deserialize<'de> for CmdVelStamped {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Flag(bool),
            Word(String),
        }
        let expected = |got: &str| {
            serde::de::Error::custom(format!("expected auto, true or false, not {got}"))
        };
        match Written::deserialize(deserializer).map_err(|_| expected("that value"))? {
            Written::Flag(true) => Ok(Self::Stamped),
            Written::Flag(false) => Ok(Self::Unstamped),
            Written::Word(word) => match word.as_str() {
                "auto" => Ok(Self::Auto),
                "true" => Ok(Self::Stamped),
                "false" => Ok(Self::Unstamped),
                other => Err(expected(&format!("{other:?}"))),
            },
        }
    }
}

impl serde::Serialize for CmdVelStamped {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            Self::Auto => "auto",
            Self::Stamped => "true",
            Self::Unstamped => "false",
        })
    }
}

impl Default for Actuators {
    fn default() -> Self {
        Self {
            cmd_vel: "cmd_vel".into(),
            cmd_vel_stamped: CmdVelStamped::Auto,
            head_action: "head_controller/follow_joint_trajectory".into(),
            head_joints: vec!["head_pan_joint".into(), "head_tilt_joint".into()],
            arm_action: "arm_controller/follow_joint_trajectory".into(),
            arm_joints: vec!["joint1".into(), "joint2".into(), "joint3".into(), "joint4".into()],
            gripper_action: "gripper_controller/gripper_cmd".into(),
            gripper_joint: "gripper_left_joint".into(),
            head_interface: ControllerInterface::Action,
            head_trajectory_topic: "head_controller/joint_trajectory".into(),
            arm_interface: ControllerInterface::Action,
            arm_trajectory_topic: "arm_controller/joint_trajectory".into(),
            gripper_interface: ControllerInterface::Action,
            gripper_trajectory_topic: "gripper_controller/joint_trajectory".into(),
            gripper_trajectory_joints: Vec::new(),
            action_detect_wait_s: 1.0,
            topic_goal_tolerance_rad: 0.05,
            topic_goal_tolerance_m: 0.002,
            topic_result_margin_s: 1.0,
            gripper_topic_duration_s: 1.0,
            head_max_accel_radps2: 15.0,
            arm_max_accel_radps2: 20.0,
            gripper_max_accel_mps2: 0.5,
            arm_max_speed_radps: 2.0,
            joint_start_max_age_s: 0.1,
            say_topic: "say".into(),
            diagnostics_topic: "/diagnostics".into(),
            world_topic: String::new(),
        }
    }
}

/// How goals reach a head, arm or gripper controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ControllerInterface {
    /// The action (FollowJointTrajectory, GripperCommand); its result says how the goal ended.
    Action,
    /// The controller's trajectory_msgs/JointTrajectory topic; no result
    /// comes back, so the outcome is judged from joint_states.
    Topic,
    /// The action when its server answers within `action_detect_wait_s`
    /// at the first goal, else the topic; the choice is kept.
    Auto,
}

impl Actuators {
    /// The joints a gripper trajectory sets.
    pub fn gripper_trajectory_joints(&self) -> Vec<String> {
        if self.gripper_trajectory_joints.is_empty() {
            vec![self.gripper_joint.clone()]
        } else {
            self.gripper_trajectory_joints.clone()
        }
    }

    /// The robot's joint limits (from its URDF) as the goals are held to:
    /// with the configured accelerations and speed caps.
    pub fn joint_limits(&self, urdf: JointLimits) -> Result<JointLimits, JointError> {
        let speed_caps: Vec<(String, f64)> =
            if self.arm_action.is_empty() || self.arm_max_speed_radps == 0.0 {
                Vec::new()
            } else {
                self.arm_joints.iter().map(|j| (j.clone(), self.arm_max_speed_radps)).collect()
            };
        urdf.with_max_accelerations(&self.max_accelerations())?.with_max_velocities(&speed_caps)
    }

    /// The acceleration limit of every joint a configured controller moves.
    pub fn max_accelerations(&self) -> Vec<(String, f64)> {
        let group = |action: &str, joints: Vec<String>, limit: f64| {
            if action.is_empty() {
                Vec::new()
            } else {
                joints.into_iter().map(|j| (j, limit)).collect()
            }
        };
        let mut limits =
            group(&self.head_action, self.head_joints.clone(), self.head_max_accel_radps2);
        limits.extend(group(&self.arm_action, self.arm_joints.clone(), self.arm_max_accel_radps2));
        let fingers = if self.gripper_joint.is_empty() {
            Vec::new()
        } else {
            self.gripper_trajectory_joints()
        };
        limits.extend(group(&self.gripper_action, fingers, self.gripper_max_accel_mps2));
        limits
    }
}

/// Delivery guarantee of a subscription. Best effort matches both kinds
/// of publisher; reliable receives nothing from a best-effort publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reliability {
    Reliable,
    BestEffort,
}

/// One sensor topic.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SensorTopic {
    /// The topic; "" when the robot has no such sensor (the tools that need
    /// it are then left out of the manifest).
    pub topic: String,
    #[serde(default = "default_reliability")]
    pub reliability: Reliability,
    /// History depth of the subscription.
    #[serde(default = "default_depth")]
    pub depth: usize,
    /// Data older than this is an error, never served silently.
    pub max_age_s: f64,
}

fn default_reliability() -> Reliability {
    Reliability::BestEffort
}

fn default_depth() -> usize {
    5
}

impl SensorTopic {
    fn new(topic: &str, max_age_s: f64) -> Self {
        Self { topic: topic.into(), reliability: Reliability::BestEffort, depth: 5, max_age_s }
    }

    pub fn is_configured(&self) -> bool {
        !self.topic.is_empty()
    }
}

/// The camera: raw sensor_msgs/Image or sensor_msgs/CompressedImage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageTransport {
    Raw,
    Compressed,
}

/// Sensor topics, their QoS and freshness.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SensorConfig {
    /// nav_msgs/Odometry.
    pub odom: SensorTopic,
    /// sensor_msgs/Imu.
    pub imu: SensorTopic,
    /// The colour camera.
    pub camera: SensorTopic,
    pub camera_transport: ImageTransport,
    /// sensor_msgs/CameraInfo of the colour camera.
    pub camera_info: SensorTopic,
    /// sensor_msgs/Image, 32FC1 (metres) or 16UC1 (millimetres).
    pub depth: SensorTopic,
    /// Depths below this are no return (the camera's minimum range), m.
    pub depth_min_range_m: f64,
    /// sensor_msgs/CameraInfo of the depth image.
    pub depth_info: SensorTopic,
    /// sensor_msgs/JointState.
    pub joint_states: SensorTopic,
    /// ros_gz_interfaces/Contacts from the bumper.
    pub bumper: SensorTopic,
    /// sensor_msgs/BatteryState ("" when not configured).
    pub battery: SensorTopic,
    /// sensor_msgs/LaserScan from a planar scanner ("" when the robot has
    /// none): obstacle sensing ahead, behind and, for a non-round
    /// footprint, around the robot for turning in place.
    pub scan: SensorTopic,
    /// irobot_create_msgs/HazardDetectionVector from a Create 3 base ("" when
    /// none): bumps feed the contact latch, cliffs stop forward motion, the
    /// backup limit stops reverse; stale = no forward motion.
    pub hazards: SensorTopic,
    /// Below this charge (0..1) a battery-low state_change event is raised.
    pub battery_low_fraction: f64,
    /// A sensor silent this long is taken out of the manifest (and put back
    /// when data flows again).
    pub unavailable_after_s: f64,
}

impl Default for SensorConfig {
    fn default() -> Self {
        Self {
            odom: SensorTopic::new("odom", 0.5),
            imu: SensorTopic::new("imu", 0.5),
            camera: SensorTopic { depth: 2, ..SensorTopic::new("camera/image_raw", 1.0) },
            camera_transport: ImageTransport::Raw,
            camera_info: SensorTopic::new("camera/camera_info", 5.0),
            depth: SensorTopic { depth: 2, ..SensorTopic::new("camera/depth/image_raw", 0.4) },
            depth_min_range_m: 0.1,
            depth_info: SensorTopic::new("camera/depth/camera_info", 5.0),
            joint_states: SensorTopic::new("joint_states", 0.5),
            bumper: SensorTopic::new("bumper", 0.5),
            battery: SensorTopic::new("", 10.0),
            scan: SensorTopic::new("", 0.5),
            hazards: SensorTopic::new("", 0.5),
            battery_low_fraction: 0.2,
            unavailable_after_s: 2.0,
        }
    }
}

/// The governor's safety rules for the base (see crates/aicc-control/src/governor/safety.rs).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SafetySettings {
    /// Odometry or IMU older than this while moving stops the base.
    pub max_sensor_age_s: f64,
    /// Obstacles (depth camera) nearer than this slow the base down...
    pub slow_down_distance_m: f64,
    /// ...to a stop at this distance, measured from base_footprint.
    pub stop_distance_m: f64,
    /// Between the two, never slower than this towards the obstacle, so
    /// that the robot reaches the stop distance (0 = no floor; must be
    /// below base.max_linear_mps).
    pub min_creep_speed_mps: f64,
    /// Stay within this radius of the start pose; 0 = no geofence.
    pub geofence_radius_m: f64,
    /// After a bumper contact, forward motion stays refused until the
    /// bumper has read clear this long...
    pub contact_clear_time_s: f64,
    /// ...and the robot has backed off this far or turned this much.
    pub contact_release_backoff_m: f64,
    pub contact_release_turn_rad: f64,
    /// Deceleration of an emergency stop (agent gone, stop, stale sensors).
    pub emergency_decel_mps2: f64,
    pub emergency_decel_radps2: f64,
    /// The robot's outline in base_footprint, for the laser scan's zones:
    /// front edge ahead of the origin, rear edge behind it, half the width.
    pub footprint_front_m: f64,
    pub footprint_rear_m: f64,
    pub footprint_half_width_m: f64,
    /// Above 0: the robot is round with this radius about the origin
    /// (turning in place sweeps nothing new); the rectangle keys are then unused.
    pub footprint_radius_m: f64,
    /// Clearance beside the footprint the laser zones add, m.
    pub scan_margin_m: f64,
    /// A laser zone with more than this fraction of beams with no usable
    /// return (NaN, inf, out of range) is blind: no motion into it.
    pub scan_max_unknown_fraction: f64,
    /// The lowest obstacle a source must be able to see for it to watch a
    /// zone, m: a LiDAR sees only what reaches its plane, a depth camera
    /// down to its floor band.
    pub min_obstacle_height_m: f64,
    /// The robot's height, m: what the depth camera sees above it is an
    /// overhang the robot passes under, not an obstacle.
    pub height_m: f64,
    /// A row of a zone with more than this fraction of its cells observed
    /// by no fresh source is unobserved.
    pub max_unobserved_fraction: f64,
    /// While fresh frames watch a zone, a place seen clear this recently
    /// counts as observed (the floor a camera sees a moment before the
    /// robot's own parts hide it), s.
    pub observed_memory_s: f64,
    /// What a motion into a zone no fresh source observes may do, ahead...
    pub unobserved_ahead: crate::governor::safety::UnobservedPolicy,
    /// ...and behind.
    pub unobserved_behind: crate::governor::safety::UnobservedPolicy,
    /// When only the head's camera could observe a motion's zone and it
    /// looks elsewhere: refuse (naming the head pose that would observe
    /// it), or turn the head there first (and say so in the result).
    pub head_for_motion: HeadForMotion,
}

/// What a motion does when only the head's camera could observe its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadForMotion {
    /// Refuse, naming the head pose that would observe the way.
    Refuse,
    /// Turn the head to that pose first, then move (the result says so).
    Turn,
}

impl Default for SafetySettings {
    fn default() -> Self {
        let rules = crate::governor::SafetyConfig::DEFAULT;
        let emergency = crate::governor::EmergencyLimits::DEFAULT;
        Self {
            max_sensor_age_s: rules.max_sensor_age_s,
            // The bundled robot's: 0.11 m between its bumper and the stop,
            // room for a depth frame 0.4 s old at its top speed.
            slow_down_distance_m: 0.55,
            stop_distance_m: 0.25,
            min_creep_speed_mps: rules.min_creep_speed_mps,
            geofence_radius_m: 0.0,
            contact_clear_time_s: rules.contact_clear_time_s,
            contact_release_backoff_m: rules.contact_release_backoff_m,
            contact_release_turn_rad: rules.contact_release_turn_rad,
            emergency_decel_mps2: emergency.max_emergency_decel_mps2,
            emergency_decel_radps2: emergency.max_emergency_decel_radps2,
            footprint_front_m: 0.14,
            footprint_rear_m: 0.12,
            footprint_half_width_m: 0.14,
            footprint_radius_m: 0.0,
            scan_margin_m: 0.015,
            scan_max_unknown_fraction: 0.1,
            min_obstacle_height_m: 0.05,
            height_m: 0.70,
            max_unobserved_fraction: 0.1,
            observed_memory_s: 10.0,
            unobserved_ahead: crate::governor::safety::UnobservedPolicy::Creep,
            unobserved_behind: crate::governor::safety::UnobservedPolicy::Refuse,
            head_for_motion: HeadForMotion::Turn,
        }
    }
}

impl SafetySettings {
    pub fn rules(&self) -> crate::governor::SafetyConfig {
        crate::governor::SafetyConfig {
            max_sensor_age_s: self.max_sensor_age_s,
            slow_down_distance_m: self.slow_down_distance_m,
            stop_distance_m: self.stop_distance_m,
            min_creep_speed_mps: self.min_creep_speed_mps,
            geofence: None,
            contact_clear_time_s: self.contact_clear_time_s,
            contact_release_backoff_m: self.contact_release_backoff_m,
            contact_release_turn_rad: self.contact_release_turn_rad,
            unobserved_ahead: self.unobserved_ahead,
            unobserved_behind: self.unobserved_behind,
        }
    }

    /// The zones a straight motion crosses: the footprint plus the margin,
    /// out to the slow-down distance.
    pub fn zone_grid(&self) -> crate::governor::coverage::ZoneGrid {
        crate::governor::coverage::ZoneGrid::new(
            self.footprint(),
            self.scan_margin_m,
            self.slow_down_distance_m,
            crate::governor::coverage::DEFAULT_CELL_M,
        )
    }

    /// The unobserved policy of a direction.
    pub fn unobserved(
        &self,
        direction: crate::governor::coverage::Direction,
    ) -> crate::governor::safety::UnobservedPolicy {
        match direction {
            crate::governor::coverage::Direction::Ahead => self.unobserved_ahead,
            crate::governor::coverage::Direction::Behind => self.unobserved_behind,
        }
    }

    pub fn emergency(&self) -> crate::governor::EmergencyLimits {
        crate::governor::EmergencyLimits {
            max_emergency_decel_mps2: self.emergency_decel_mps2,
            max_emergency_decel_radps2: self.emergency_decel_radps2,
        }
    }

    /// The footprint the laser zones are built around.
    pub fn footprint(&self) -> crate::governor::footprint::Footprint {
        use crate::governor::footprint::Footprint;
        if self.footprint_radius_m > 0.0 {
            Footprint::Circle { radius_m: self.footprint_radius_m }
        } else {
            Footprint::Rectangle {
                front_m: self.footprint_front_m,
                rear_m: self.footprint_rear_m,
                half_width_m: self.footprint_half_width_m,
            }
        }
    }

    /// The laser scan's zones: the footprint, the margin, out to the slow-down distance.
    pub fn scan_zones(&self) -> crate::governor::laser::ScanZones {
        crate::governor::laser::ScanZones {
            footprint: self.footprint(),
            margin_m: self.scan_margin_m,
            reach_m: self.slow_down_distance_m,
            max_unknown_fraction: self.scan_max_unknown_fraction,
        }
    }

    pub fn geofence_radius(&self) -> Option<f64> {
        (self.geofence_radius_m > 0.0).then_some(self.geofence_radius_m)
    }
}

/// Limits and behaviour of the mobile base.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BaseConfig {
    pub max_linear_mps: f64,
    pub max_angular_radps: f64,
    pub max_linear_accel_mps2: f64,
    pub max_angular_accel_radps2: f64,
    /// Rate of the governed cmd_vel loop.
    pub control_rate_hz: f64,
    /// A setpoint not refreshed within this time is dropped (deadman).
    pub setpoint_timeout_s: f64,
    /// `move` ends when the remaining distance is below this.
    pub move_tolerance_m: f64,
    /// Longest single `move`.
    pub max_move_distance_m: f64,
}

impl Default for BaseConfig {
    fn default() -> Self {
        Self {
            max_linear_mps: 0.22,
            max_angular_radps: 1.5,
            max_linear_accel_mps2: 1.0,
            max_angular_accel_radps2: 3.0,
            control_rate_hz: 50.0,
            setpoint_timeout_s: 0.2,
            move_tolerance_m: 0.005,
            max_move_distance_m: 5.0,
        }
    }
}

/// How parameter files are read: only `true` and `false` are booleans
/// (`yes` and `on` stay text, as YAML 1.2 has it), and an error is one line
/// naming its line and column rather than a drawn snippet.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! { strict_booleans: true, with_snippet: false }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file (or the URDF it names) cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    /// The file was read but does not hold a valid configuration.
    #[error("config file {path}: {source}")]
    Invalid { path: String, source: ParamsError },
}

/// Why the text of a parameter file is not a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    /// The text is not YAML at all.
    #[error("not valid YAML: {0}")]
    Yaml(#[source] Box<serde_saphyr::Error>),
    /// The top is not a mapping of node names.
    #[error("expected a mapping '<node name>: {{ros__parameters: {{...}}}}' at the top")]
    NotNodeSections,
    /// Neither the node's section nor the `/**` wildcard is there.
    #[error("no section for node '{node}' (or '/**'); found: {found:?}")]
    NoSection { node: String, found: Vec<String> },
    /// The node's section lacks `ros__parameters`.
    #[error("the node's section has no 'ros__parameters'")]
    NoRosParameters,
    /// A parameter is unknown, missing or of the wrong type (the text names it).
    #[error("{0}")]
    Parameters(#[source] serde_json::Error),
    /// The parameters parse but their values do not hold together.
    #[error(transparent)]
    Invalid(#[from] InvalidConfig),
}

/// A configuration value the bridge cannot run with; each names the key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidConfig {
    /// A listen address that is not `HOST:PORT`.
    #[error("{name} '{value}' is not HOST:PORT: {source}")]
    NotAnAddress { name: &'static str, value: String, source: std::net::AddrParseError },
    /// A rate, limit or duration that must be finite and above zero.
    #[error("{name} must be a positive number, got {value}")]
    NotPositive { name: String, value: f64 },
    /// A count or size that must be at least one.
    #[error("{name} must be at least 1")]
    Zero { name: String },
    /// No odometry topic: the base cannot move safely.
    #[error("sensors.odom.topic is required: the base cannot move safely without odometry")]
    NoOdometry,
    /// `sensors.battery_low_fraction` outside 0..1.
    #[error("sensors.battery_low_fraction must be within 0..1, got {0}")]
    BatteryLowFraction(f64),
    /// A head action without exactly its pan and tilt joints.
    #[error("actuators.head_joints must name the pan and the tilt joint, got {0:?}")]
    HeadJoints(Vec<String>),
    /// A controller to be reached through its topic without one.
    #[error("actuators.{controller}_interface is topic or auto, but actuators.{controller}_trajectory_topic is empty: name the controller's trajectory_msgs/JointTrajectory topic")]
    NoTrajectoryTopic { controller: &'static str },
    /// The governor's own check of its safety rules failed.
    #[error("safety: {0}")]
    Safety(String),
    /// A creep floor at or above the speed limit (no slow-down left).
    #[error("safety.min_creep_speed_mps = {creep_mps} must be below base.max_linear_mps = {max_linear_mps}")]
    CreepNotBelowLimit { creep_mps: f64, max_linear_mps: f64 },
    /// A negative or non-finite geofence radius.
    #[error("safety.geofence_radius_m must be 0 (none) or positive, got {0}")]
    GeofenceRadius(f64),
    /// A length that must be finite and zero or more.
    #[error("{name} must be a finite number >= 0, got {value}")]
    Negative { name: String, value: f64 },
    /// A fraction outside 0..1.
    #[error("{name} must be within 0..1, got {value}")]
    Fraction { name: String, value: f64 },
    /// A recording file size below the minimum.
    #[error("record.max_file_bytes must be at least {MIN_RECORD_FILE_BYTES}, got {0}")]
    RecordFileTooSmall(u64),
    /// Recording asked for without a directory.
    #[error("record.dir is empty: name the directory recordings go to")]
    NoRecordDir,
    /// An obstacle source whose readings may be so old that the robot,
    /// at its top speed, cannot stop within the stop margin it protects.
    #[error("{sensor}.max_age_s = {max_age_s} s at base.max_linear_mps = {max_linear_mps} m/s: {travel_m:.3} m driven on a reading that old, plus {braking_m:.3} m braking at safety.emergency_decel_mps2 = {decel_mps2}, is more than the {margin_m:.3} m between the footprint's edge {direction} ({edge_m} m) and safety.stop_distance_m ({stop_m} m): lower the max age or the speed, or raise the stop distance")]
    CannotStopInTime {
        sensor: String,
        direction: &'static str,
        max_age_s: f64,
        max_linear_mps: f64,
        travel_m: f64,
        braking_m: f64,
        decel_mps2: f64,
        margin_m: f64,
        edge_m: f64,
        stop_m: f64,
    },
    /// A TLS certificate without its key, or the other way round.
    #[error("security.tls_cert_file and security.tls_key_file go together: set both or neither")]
    HalfTls,
    /// Operator tools for whoever connects: only an operator's token grants admin.
    #[error("security.unauthenticated_scope: admin is not allowed: operator tools (approve, deny, approval_mode, recording) exist only for an operator's token (AICC_OPERATOR_TOKEN, scope admin); use observe or actuate")]
    AdminWithoutToken,
}

/// Tokens that cannot be used as configured.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenEnvError {
    /// A variable that is set but unusable (empty).
    #[error("environment variable {variable}: {error}")]
    Unusable {
        variable: String,
        #[source]
        error: crate::protocol::auth::TokenError,
    },
    /// One text in two scopes: its holder would be both (the agent an operator).
    #[error("environment variables {first} ({first_scope}) and {second} ({second_scope}) hold the same token: whoever holds it would be both, e.g. the agent its own operator. Give each its own token")]
    SharedAcrossScopes {
        first: String,
        first_scope: &'static str,
        second: String,
        second_scope: &'static str,
    },
}

impl Config {
    /// Loads a ROS 2 parameter file, taking the section of `node_name` (or `/**`).
    pub fn load(path: &Path, node_name: &str) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        Self::from_params_yaml(&text, node_name)
            .map_err(|source| ConfigError::Invalid { path: path.display().to_string(), source })
    }

    /// Parses the text of a ROS 2 parameter file.
    pub fn from_params_yaml(text: &str, node_name: &str) -> Result<Self, ParamsError> {
        // The node's section is found in the generic document first: other
        // nodes' sections in the same file are not the bridge's to check.
        let document: serde_json::Value = serde_saphyr::from_str_with_options(text, yaml_options())
            .map_err(|e| ParamsError::Yaml(Box::new(e)))?;
        let serde_json::Value::Object(top) = document else {
            return Err(ParamsError::NotNodeSections);
        };
        let wanted = [node_name.to_string(), format!("/{node_name}"), "/**".to_string()];
        let section = wanted.iter().find_map(|key| top.get(key.as_str())).ok_or_else(|| {
            ParamsError::NoSection {
                node: node_name.to_string(),
                found: top.keys().cloned().collect(),
            }
        })?;
        let params = section.get("ros__parameters").ok_or(ParamsError::NoRosParameters)?;
        let config = Config::deserialize(params).map_err(ParamsError::Parameters)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks values serde cannot: ranges, finiteness, parseable addresses.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        for (name, value) in [
            ("listen", &self.listen),
            ("ai_control.listen", &self.ai_control.listen),
            ("console.listen", &self.console.listen),
        ] {
            value.parse::<SocketAddr>().map_err(|source| InvalidConfig::NotAnAddress {
                name,
                value: value.clone(),
                source,
            })?;
        }
        let positive = [
            ("tick_rate_hz", self.tick_rate_hz),
            ("base.max_linear_mps", self.base.max_linear_mps),
            ("base.max_angular_radps", self.base.max_angular_radps),
            ("base.max_linear_accel_mps2", self.base.max_linear_accel_mps2),
            ("base.max_angular_accel_radps2", self.base.max_angular_accel_radps2),
            ("base.control_rate_hz", self.base.control_rate_hz),
            ("base.setpoint_timeout_s", self.base.setpoint_timeout_s),
            ("base.move_tolerance_m", self.base.move_tolerance_m),
            ("base.max_move_distance_m", self.base.max_move_distance_m),
            ("sensors.unavailable_after_s", self.sensors.unavailable_after_s),
            ("tf.max_age_s", self.tf.max_age_s),
            ("resume_window_s", self.resume_window_s),
            ("heartbeat_interval_s", self.heartbeat_interval_s),
            ("lease_timeout_s", self.lease_timeout_s),
            ("tool_timeout_s", self.tool_timeout_s),
            ("write_stall_timeout_s", self.write_stall_timeout_s),
            ("handshake_timeout_s", self.handshake_timeout_s),
            ("record.flight_window_s", self.record.flight_window_s),
            ("approvals.timeout_s", self.approvals.timeout_s),
            ("console.camera_hz", self.console.camera_hz),
            ("console.state_hz", self.console.state_hz),
            ("console.header_timeout_s", self.console.header_timeout_s),
            ("ai_control.lease_timeout_s", self.ai_control.lease_timeout_s),
        ];
        if !(self.approvals.move_longer_than_m.is_finite()
            && self.approvals.move_longer_than_m >= 0.0)
        {
            return Err(InvalidConfig::NotPositive {
                name: "approvals.move_longer_than_m".into(),
                value: self.approvals.move_longer_than_m,
            });
        }
        for (name, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(InvalidConfig::NotPositive { name: name.into(), value });
            }
        }
        let sensors = &self.sensors;
        for (name, sensor) in [
            ("odom", &sensors.odom),
            ("imu", &sensors.imu),
            ("camera", &sensors.camera),
            ("camera_info", &sensors.camera_info),
            ("depth", &sensors.depth),
            ("depth_info", &sensors.depth_info),
            ("joint_states", &sensors.joint_states),
            ("bumper", &sensors.bumper),
            ("battery", &sensors.battery),
            ("scan", &sensors.scan),
            ("hazards", &sensors.hazards),
        ] {
            if !(sensor.max_age_s.is_finite() && sensor.max_age_s > 0.0) {
                return Err(InvalidConfig::NotPositive {
                    name: format!("sensors.{name}.max_age_s"),
                    value: sensor.max_age_s,
                });
            }
            if sensor.depth == 0 {
                return Err(InvalidConfig::Zero { name: format!("sensors.{name}.depth") });
            }
        }
        if !sensors.odom.is_configured() {
            return Err(InvalidConfig::NoOdometry);
        }
        if !(0.0..=1.0).contains(&sensors.battery_low_fraction) {
            return Err(InvalidConfig::BatteryLowFraction(sensors.battery_low_fraction));
        }
        if self.actuators.head_joints.len() != 2 && !self.actuators.head_action.is_empty() {
            return Err(InvalidConfig::HeadJoints(self.actuators.head_joints.clone()));
        }
        let actuators = &self.actuators;
        for (name, action, interface, topic) in [
            (
                "head",
                &actuators.head_action,
                actuators.head_interface,
                &actuators.head_trajectory_topic,
            ),
            (
                "arm",
                &actuators.arm_action,
                actuators.arm_interface,
                &actuators.arm_trajectory_topic,
            ),
            (
                "gripper",
                &actuators.gripper_action,
                actuators.gripper_interface,
                &actuators.gripper_trajectory_topic,
            ),
        ] {
            if !action.is_empty() && interface != ControllerInterface::Action && topic.is_empty() {
                return Err(InvalidConfig::NoTrajectoryTopic { controller: name });
            }
        }
        for (name, value) in [
            ("actuators.action_detect_wait_s", actuators.action_detect_wait_s),
            ("actuators.topic_goal_tolerance_rad", actuators.topic_goal_tolerance_rad),
            ("actuators.topic_goal_tolerance_m", actuators.topic_goal_tolerance_m),
            ("actuators.topic_result_margin_s", actuators.topic_result_margin_s),
            ("actuators.gripper_topic_duration_s", actuators.gripper_topic_duration_s),
            ("actuators.head_max_accel_radps2", actuators.head_max_accel_radps2),
            ("actuators.arm_max_accel_radps2", actuators.arm_max_accel_radps2),
            ("actuators.gripper_max_accel_mps2", actuators.gripper_max_accel_mps2),
            ("actuators.joint_start_max_age_s", actuators.joint_start_max_age_s),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(InvalidConfig::NotPositive { name: name.into(), value });
            }
        }
        if !(actuators.arm_max_speed_radps.is_finite() && actuators.arm_max_speed_radps >= 0.0) {
            return Err(InvalidConfig::Negative {
                name: "actuators.arm_max_speed_radps".into(),
                value: actuators.arm_max_speed_radps,
            });
        }
        self.safety.rules().validate().map_err(InvalidConfig::Safety)?;
        // A floor at or above the limit would make the slow-down zone no slow-down at all.
        if self.safety.min_creep_speed_mps >= self.base.max_linear_mps {
            return Err(InvalidConfig::CreepNotBelowLimit {
                creep_mps: self.safety.min_creep_speed_mps,
                max_linear_mps: self.base.max_linear_mps,
            });
        }
        if !(self.safety.geofence_radius_m.is_finite() && self.safety.geofence_radius_m >= 0.0) {
            return Err(InvalidConfig::GeofenceRadius(self.safety.geofence_radius_m));
        }
        for (name, value) in [
            ("safety.emergency_decel_mps2", self.safety.emergency_decel_mps2),
            ("safety.emergency_decel_radps2", self.safety.emergency_decel_radps2),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(InvalidConfig::NotPositive { name: name.into(), value });
            }
        }
        for (name, value) in [
            ("safety.footprint_front_m", self.safety.footprint_front_m),
            ("safety.footprint_rear_m", self.safety.footprint_rear_m),
            ("safety.footprint_half_width_m", self.safety.footprint_half_width_m),
            ("safety.footprint_radius_m", self.safety.footprint_radius_m),
            ("safety.scan_margin_m", self.safety.scan_margin_m),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(InvalidConfig::Negative { name: name.into(), value });
            }
        }
        for (name, value) in [
            ("safety.scan_max_unknown_fraction", self.safety.scan_max_unknown_fraction),
            ("safety.max_unobserved_fraction", self.safety.max_unobserved_fraction),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(InvalidConfig::Fraction { name: name.into(), value });
            }
        }
        if !(self.safety.height_m.is_finite() && self.safety.height_m > 0.0) {
            return Err(InvalidConfig::NotPositive {
                name: "safety.height_m".into(),
                value: self.safety.height_m,
            });
        }
        for (name, value) in [
            ("safety.min_obstacle_height_m", self.safety.min_obstacle_height_m),
            ("sensors.depth_min_range_m", self.sensors.depth_min_range_m),
            ("safety.observed_memory_s", self.safety.observed_memory_s),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(InvalidConfig::Negative { name: name.into(), value });
            }
        }
        self.check_stopping_margins()?;
        if self.dead_peer_intervals == 0 {
            return Err(InvalidConfig::Zero { name: "dead_peer_intervals".into() });
        }
        if self.security.tls_cert_file.is_empty() != self.security.tls_key_file.is_empty() {
            return Err(InvalidConfig::HalfTls);
        }
        if self.security.unauthenticated_scope == crate::protocol::auth::Scope::Admin {
            return Err(InvalidConfig::AdminWithoutToken);
        }
        for (name, value) in [
            ("max_line_bytes", self.max_line_bytes),
            ("max_calls_in_flight", self.max_calls_in_flight),
            ("outbound_queue", self.outbound_queue),
            ("outbound_queue_bytes", self.outbound_queue_bytes),
            ("listen_backlog", self.listen_backlog as usize),
            ("event_ring_capacity", self.event_ring_capacity),
            ("max_detached_sessions", self.max_detached_sessions),
            ("max_connections", self.max_connections),
            ("ai_control.max_queued_commands", self.ai_control.max_queued_commands),
            ("ai_control.max_events", self.ai_control.max_events),
            ("record.queue", self.record.queue),
            ("record.flight_max_bytes", self.record.flight_max_bytes),
            ("console.max_pages", self.console.max_pages),
            ("console.page_queue", self.console.page_queue),
            ("console.max_requests_per_minute", self.console.max_requests_per_minute as usize),
            ("console.max_connections", self.console.max_connections),
            ("console.max_connections_per_address", self.console.max_connections_per_address),
            ("ai_control.max_connections", self.ai_control.max_connections),
            ("ai_control.max_connections_per_address", self.ai_control.max_connections_per_address),
            ("security.max_connections_per_address", self.security.max_connections_per_address),
            ("security.max_undecodable_lines", self.security.max_undecodable_lines as usize),
        ] {
            if value == 0 {
                return Err(InvalidConfig::Zero { name: name.into() });
            }
        }
        if self.record.max_file_bytes < MIN_RECORD_FILE_BYTES {
            return Err(InvalidConfig::RecordFileTooSmall(self.record.max_file_bytes));
        }
        if self.record.dir.is_empty() {
            return Err(InvalidConfig::NoRecordDir);
        }
        for sensor in Sensor::ALL {
            let value = self.record.sample_rates_hz.of(sensor);
            if !(value.is_finite() && value >= 0.0) {
                return Err(InvalidConfig::Negative {
                    name: format!("record.sample_rates_hz.{}", sensor.key()),
                    value,
                });
            }
        }
        Ok(())
    }
}

impl Config {
    /// Refuses obstacle sources whose max age lets the robot, at its top
    /// speed, drive through the margin between its footprint and the stop
    /// distance before the governor hears of an obstacle: the depth camera
    /// guards ahead, the LiDAR both ways.
    fn check_stopping_margins(&self) -> Result<(), InvalidConfig> {
        use crate::governor::coverage::Direction;
        let grid = self.safety.zone_grid();
        let speed = self.base.max_linear_mps;
        let decel = self.safety.emergency_decel_mps2;
        let braking_m = speed * speed / (2.0 * decel);
        let sources = [
            ("sensors.depth", &self.sensors.depth, &[Direction::Ahead][..]),
            ("sensors.scan", &self.sensors.scan, &[Direction::Ahead, Direction::Behind][..]),
        ];
        for (sensor, topic, directions) in sources {
            if !topic.is_configured() {
                continue;
            }
            for &direction in directions {
                let edge_m = grid.start_m(direction);
                let margin_m = self.safety.stop_distance_m - edge_m;
                let travel_m = topic.max_age_s * speed;
                if travel_m + braking_m > margin_m {
                    return Err(InvalidConfig::CannotStopInTime {
                        sensor: sensor.into(),
                        direction: direction.name(),
                        max_age_s: topic.max_age_s,
                        max_linear_mps: speed,
                        travel_m,
                        braking_m,
                        decel_mps2: decel,
                        margin_m,
                        edge_m,
                        stop_m: self.safety.stop_distance_m,
                    });
                }
            }
        }
        Ok(())
    }
}

/// The bundled robot description (the simulated robot's).
pub(crate) const BUNDLED_URDF: &str = include_str!("../../../urdf/aicc_bot.urdf");

impl Config {
    /// The URDF text: the configured file, or the bundled one.
    pub fn urdf_text(&self) -> Result<String, ConfigError> {
        if self.urdf_file.is_empty() {
            return Ok(BUNDLED_URDF.to_string());
        }
        std::fs::read_to_string(&self.urdf_file)
            .map_err(|source| ConfigError::Read { path: self.urdf_file.clone(), source })
    }
}

impl SecurityConfig {
    /// Reads the tokens from their environment variables. An empty variable
    /// is an error rather than silently no token.
    pub fn load_tokens(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<crate::protocol::auth::Tokens, TokenEnvError> {
        let mut tokens = crate::protocol::auth::Tokens::default();
        // The variable behind each added token, in the order they were added.
        let mut added: Vec<&TokenSource> = Vec::new();
        for source in &self.tokens {
            if let Some(token) = env(&source.env) {
                tokens.add(&token, source.scope).map_err(|error| TokenEnvError::Unusable {
                    variable: source.env.clone(),
                    error,
                })?;
                added.push(source);
            }
        }
        if let Some((i, j)) = tokens.shared_across_scopes() {
            let (first, second) = (added[i], added[j]);
            return Err(TokenEnvError::SharedAcrossScopes {
                first: first.env.clone(),
                first_scope: first.scope.as_str(),
                second: second.env.clone(),
                second_scope: second.scope.as_str(),
            });
        }
        Ok(tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_default_file_parses_and_matches_the_built_in_defaults() {
        let text = include_str!("../../../config/default.yaml");
        let config = Config::from_params_yaml(text, DEFAULT_NODE_NAME).unwrap();
        let built_in = Config::default();
        assert_eq!(config.listen, built_in.listen);
        assert_eq!(config.base.max_linear_mps, built_in.base.max_linear_mps);
        assert_eq!(config.sensors.odom.topic, built_in.sensors.odom.topic);
        assert_eq!(config.sensors.camera.depth, built_in.sensors.camera.depth);
        assert_eq!(config.actuators.arm_joints, built_in.actuators.arm_joints);
        assert_eq!(config.event_ring_capacity, built_in.event_ring_capacity);
        assert_eq!(config.security.tokens.len(), built_in.security.tokens.len());
        assert_eq!(config.security.unauthenticated_scope, built_in.security.unauthenticated_scope);
        assert_eq!(config.tick_mode, built_in.tick_mode);
        assert_eq!(
            (config.ai_control.enabled, config.ai_control.listen.as_str()),
            (false, DEFAULT_AI_CONTROL_LISTEN)
        );
        assert_eq!(
            (config.ai_control.max_queued_commands, config.ai_control.max_events),
            (built_in.ai_control.max_queued_commands, built_in.ai_control.max_events)
        );
    }

    #[test]
    fn the_ai_control_section_is_strict_and_checked() {
        let typo =
            "/**:\n  ros__parameters:\n    ai_control:\n      enabled: true\n      max_queue: 3\n";
        assert!(Config::from_params_yaml(typo, "x").unwrap_err().to_string().contains("max_queue"));
        let zero = "/**:\n  ros__parameters:\n    ai_control:\n      max_events: 0\n";
        assert!(Config::from_params_yaml(zero, "x")
            .unwrap_err()
            .to_string()
            .contains("ai_control.max_events"));
        let bad_listen = "/**:\n  ros__parameters:\n    ai_control:\n      listen: \"localhost\"\n";
        assert!(Config::from_params_yaml(bad_listen, "x")
            .unwrap_err()
            .to_string()
            .contains("ai_control.listen"));
        let sim =
            Config::from_params_yaml(include_str!("../../../config/sim.yaml"), DEFAULT_NODE_NAME)
                .unwrap();
        assert!(sim.ai_control.enabled, "the simulation profile serves the AI-control dialect");
    }

    #[test]
    fn sample_rates_are_keyed_by_the_sensor_names_and_checked() {
        let params = |rates: &str| {
            format!("/**:\n  ros__parameters:\n    record:\n      sample_rates_hz: {rates}\n")
        };
        let config = Config::from_params_yaml(&params("{odom: 5, camera: 0.5}"), "x").unwrap();
        let rates = &config.record.sample_rates_hz;
        assert_eq!(
            (rates.of(Sensor::Odometry), rates.of(Sensor::Camera), rates.of(Sensor::Imu)),
            (5.0, 0.5, 0.0),
            "absent = 0"
        );
        assert_eq!(
            RecordConfig::default().sample_rates_hz,
            SampleRates::default(),
            "off unless configured"
        );
        // Every key is a sensor's key under `sensors:`, and each maps to its own sensor.
        let keys = serde_json::to_value(SampleRates::default()).unwrap();
        for sensor in Sensor::ALL {
            let mut one = serde_json::Map::new();
            one.insert(sensor.key().to_string(), serde_json::json!(1.0));
            let rates: SampleRates =
                serde_json::from_value(serde_json::Value::Object(one)).unwrap();
            assert!(
                keys.get(sensor.key()).is_some() && rates.of(sensor) == 1.0,
                "{}",
                sensor.key()
            );
            assert_eq!(
                Sensor::ALL.iter().filter(|s| rates.of(**s) != 0.0).count(),
                1,
                "{}",
                sensor.key()
            );
        }
        assert_eq!(keys.as_object().unwrap().len(), Sensor::ALL.len());
        let err =
            Config::from_params_yaml(&params("{odom: 5, camra: 1}"), "x").unwrap_err().to_string();
        assert!(err.contains("camra"), "{err}");
        let err = Config::from_params_yaml(&params("{camera: -1}"), "x").unwrap_err().to_string();
        assert!(
            err.contains("record.sample_rates_hz.camera must be a finite number >= 0, got -1"),
            "{err}"
        );
        // The YAML reader refuses non-finite numbers itself; the check holds without it.
        for bad in [f64::NAN, f64::INFINITY] {
            let mut config = Config::default();
            config.record.sample_rates_hz.camera = bad;
            let err = config.validate().unwrap_err().to_string();
            assert!(err.contains("record.sample_rates_hz.camera"), "{bad}: {err}");
        }
    }

    #[test]
    fn tokens_come_from_the_environment_and_an_empty_one_is_an_error() {
        let security = SecurityConfig::default();
        let tokens = security
            .load_tokens(|name| (name == "AICC_OBSERVE_TOKEN").then(|| "t0k".to_string()))
            .unwrap();
        assert_eq!(tokens.check("t0k"), Some(crate::protocol::auth::Scope::Observe));
        assert!(security.load_tokens(|_| None).unwrap().is_empty());
        let err =
            security.load_tokens(|name| (name == "AICC_TOKEN").then(String::new)).unwrap_err();
        assert!(
            matches!(
                &err,
                TokenEnvError::Unusable { error: crate::protocol::auth::TokenError::Empty, .. }
            ),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(err.contains("AICC_TOKEN"), "{err}");
    }

    #[test]
    fn the_agent_token_is_not_the_operator_token_and_one_text_in_both_is_refused() {
        use crate::protocol::auth::Scope;
        let security = SecurityConfig::default();
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        let tokens = security
            .load_tokens(env(&[
                ("AICC_TOKEN", "agent-text"),
                ("AICC_OPERATOR_TOKEN", "operator-text"),
            ]))
            .unwrap();
        assert_eq!(
            (tokens.check("agent-text"), tokens.check("operator-text")),
            (Some(Scope::Actuate), Some(Scope::Admin)),
            "AICC_TOKEN, what every client reads, is the agent's"
        );
        let err = security
            .load_tokens(env(&[("AICC_TOKEN", "same"), ("AICC_OPERATOR_TOKEN", "same")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("AICC_OPERATOR_TOKEN (admin)")
                && err.contains("AICC_TOKEN (actuate)")
                && err.contains("same token"),
            "{err}"
        );
        assert!(!err.contains("\"same\""), "the token itself is never printed: {err}");
        assert_eq!(
            Config::default().security.unauthenticated_scope,
            Scope::Actuate,
            "no token: an agent, not an operator"
        );
        let admin = "/**:\n  ros__parameters:\n    security:\n      unauthenticated_scope: admin\n";
        let err = Config::from_params_yaml(admin, DEFAULT_NODE_NAME).unwrap_err().to_string();
        assert!(err.contains("unauthenticated_scope") && err.contains("operator's token"), "{err}");
    }

    #[test]
    fn every_shipped_profile_parses() {
        for (name, text) in [
            ("sim.yaml", include_str!("../../../config/sim.yaml")),
            ("turtlebot3.yaml", include_str!("../../../config/turtlebot3.yaml")),
            ("turtlebot4.yaml", include_str!("../../../config/turtlebot4.yaml")),
        ] {
            let config = Config::from_params_yaml(text, DEFAULT_NODE_NAME)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(config.sensors.odom.is_configured(), "{name}");
        }
        let tb4 = Config::from_params_yaml(
            include_str!("../../../config/turtlebot4.yaml"),
            DEFAULT_NODE_NAME,
        )
        .unwrap();
        // As the robot ships on Jazzy: no depth image, hazards not relayed,
        // no arm; cmd_vel's type from its subscriber.
        assert_eq!(
            (
                tb4.sensors.depth.topic.as_str(),
                tb4.sensors.hazards.topic.as_str(),
                tb4.actuators.arm_action.as_str(),
                tb4.actuators.cmd_vel_stamped,
            ),
            ("", "", "", CmdVelStamped::Auto)
        );
        let tb3 = Config::from_params_yaml(
            include_str!("../../../config/turtlebot3.yaml"),
            DEFAULT_NODE_NAME,
        )
        .unwrap();
        assert_eq!(
            (tb3.sensors.depth.topic.as_str(), tb3.actuators.cmd_vel_stamped),
            ("", CmdVelStamped::Auto)
        );
    }

    #[test]
    fn cmd_vel_stamped_reads_auto_and_the_booleans_and_refuses_anything_else() {
        let with = |value: &str| {
            Config::from_params_yaml(
                &format!(
                    "/**:\n  ros__parameters:\n    actuators:\n      cmd_vel_stamped: {value}\n"
                ),
                DEFAULT_NODE_NAME,
            )
            .map(|config| config.actuators.cmd_vel_stamped)
        };
        assert_eq!(with("auto").unwrap(), CmdVelStamped::Auto);
        assert_eq!(with("true").unwrap(), CmdVelStamped::Stamped);
        assert_eq!(with("false").unwrap(), CmdVelStamped::Unstamped);
        assert_eq!(with("\"true\"").unwrap(), CmdVelStamped::Stamped);
        let error = with("sometimes").unwrap_err().to_string();
        assert!(error.contains("expected auto, true or false"), "{error}");
        assert_eq!(Config::default().actuators.cmd_vel_stamped, CmdVelStamped::Auto);
    }

    #[test]
    fn the_creep_speed_is_checked_against_the_base_limit() {
        let sim =
            Config::from_params_yaml(include_str!("../../../config/sim.yaml"), DEFAULT_NODE_NAME)
                .unwrap();
        assert_eq!(sim.safety.rules().min_creep_speed_mps, 0.04);
        let default = Config::from_params_yaml(
            include_str!("../../../config/default.yaml"),
            DEFAULT_NODE_NAME,
        )
        .unwrap();
        assert_eq!(
            default.safety.min_creep_speed_mps,
            Config::default().safety.min_creep_speed_mps
        );
        let too_fast = "/**:\n  ros__parameters:\n    base:\n      max_linear_mps: 0.2\n    safety:\n      min_creep_speed_mps: 0.2\n";
        let err = Config::from_params_yaml(too_fast, "x").unwrap_err().to_string();
        assert!(
            err.contains("safety.min_creep_speed_mps") && err.contains("base.max_linear_mps"),
            "{err}"
        );
        let negative = "/**:\n  ros__parameters:\n    safety:\n      min_creep_speed_mps: -0.01\n";
        assert!(Config::from_params_yaml(negative, "x")
            .unwrap_err()
            .to_string()
            .contains("min_creep_speed_mps"));
        let off = "/**:\n  ros__parameters:\n    safety:\n      min_creep_speed_mps: 0.0\n";
        assert_eq!(Config::from_params_yaml(off, "x").unwrap().safety.min_creep_speed_mps, 0.0);
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let text = "aicc_bridge:\n  ros__parameters:\n    base:\n      max_linear_mps: 0.3\n      max_lineer_accel: 2.0\n";
        let err = Config::from_params_yaml(text, "aicc_bridge").unwrap_err().to_string();
        assert!(err.contains("max_lineer_accel"), "{err}");
    }

    #[test]
    fn config_errors_can_travel_as_anyhow_errors() {
        // The node (crate aicc_ros2) passes them on with `?` and anyhow::Error::msg.
        fn portable<E: std::error::Error + Send + Sync + 'static>() {}
        portable::<ConfigError>();
        portable::<InvalidConfig>();
        portable::<TokenEnvError>();
        portable::<crate::ai_control::ListenRefused>();
    }

    #[test]
    fn errors_say_which_rule_was_broken_and_a_file_error_names_the_file() {
        let zero = "/**:\n  ros__parameters:\n    ai_control:\n      max_events: 0\n";
        assert!(
            matches!(Config::from_params_yaml(zero, "x"), Err(ParamsError::Invalid(InvalidConfig::Zero { name })) if name == "ai_control.max_events")
        );
        assert!(matches!(
            Config::from_params_yaml("[1, 2]", "x"),
            Err(ParamsError::NotNodeSections)
        ));
        assert!(matches!(Config::from_params_yaml("a: [unclosed", "x"), Err(ParamsError::Yaml(_))));
        let typo = "/**:\n  ros__parameters:\n    tick_rate: 5\n";
        assert!(matches!(Config::from_params_yaml(typo, "x"), Err(ParamsError::Parameters(_))));
        let file =
            std::env::temp_dir().join(format!("aicc-config-typo-{}.yaml", std::process::id()));
        std::fs::write(&file, typo).unwrap();
        let err = Config::load(&file, "x").unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("config file {}: ", file.display()))
                && err.contains("tick_rate"),
            "{err}"
        );
        let _ = std::fs::remove_file(file);
    }

    #[test]
    fn wildcard_section_and_bad_values_are_handled() {
        let ok = "/**:\n  ros__parameters:\n    tick_rate_hz: 20.0\n";
        assert_eq!(Config::from_params_yaml(ok, "other").unwrap().tick_rate_hz, 20.0);
        let no_age = "/**:\n  ros__parameters:\n    sensors:\n      imu: { topic: imu }\n";
        assert!(Config::from_params_yaml(no_age, "x")
            .unwrap_err()
            .to_string()
            .contains("max_age_s"));
        let bad = "/**:\n  ros__parameters:\n    base:\n      max_linear_mps: -1.0\n";
        assert!(Config::from_params_yaml(bad, "x")
            .unwrap_err()
            .to_string()
            .contains("base.max_linear_mps"));
        let missing = "robot:\n  ros__parameters: {}\n";
        assert!(Config::from_params_yaml(missing, "aicc_bridge")
            .unwrap_err()
            .to_string()
            .contains("no section"));
    }
}
