//! The r2r adapter: the only module that names ROS types. Subscriptions
//! keep the latest sample per sensor (images stay undecoded until an agent
//! asks); publishers and action clients take governed commands. The node
//! spins on a dedicated thread, never on a tokio worker, and that thread
//! stores each sample as it arrives.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion, Vector3};
use parking_lot::Mutex;
use r2r::control_msgs::action::{FollowJointTrajectory, GripperCommand};
use r2r::{
    diagnostic_msgs, geometry_msgs, irobot_create_msgs, nav_msgs, ros_gz_interfaces, sensor_msgs,
    std_msgs, tf2_msgs, trajectory_msgs, QosProfile,
};

pub mod parameters;
pub mod rosout;

use aicc_bridge::images::{CompressedFrame, RawImage};
use aicc_bridge::port::BaseVelocity;
use aicc_bridge::port::Hazard;
use aicc_bridge::port::TransformSample;
use aicc_bridge::port::WireType;
use aicc_bridge::port::{decide_cmd_vel, CmdVelKind, CmdVelOutput};
use aicc_bridge::port::{resolve, Names};
use aicc_bridge::port::{
    ActuatorPort, Battery, CameraFrame, CameraInfo, ContactPoint, Contacts, Controller, Diagnostic,
    Endpoint, GoalControl, GripperGoal, GripperOutcome, ImuSample, JointStates, LaserScan,
    NodeClock, OdometrySample, PortError, Robot, Sensor, SensorPort, SignalPort, Stamped,
    TrajectoryGoal, TrajectoryOutcome,
};
use aicc_bridge::port::{GripperJudge, TrajectoryJudge};
use aicc_bridge::port::{Latest, SampleStore};
use aicc_bridge::recording::ros2msg;
use aicc_bridge::{
    CmdVelStamped, Config, ControllerInterface, ImageTransport, Reliability, SensorTopic,
};

/// How long one spin_once may block: it returns at once when anything
/// arrives, so this only bounds shutdown latency. Shorter wakes an idle
/// node for nothing (5 ms cost about 1 % of a core at rest).
const SPIN_TIMEOUT: Duration = Duration::from_millis(50);
/// How long to wait for an action server before giving up on a goal.
const ACTION_SERVER_WAIT: Duration = Duration::from_secs(3);
/// How often a goal sent on a trajectory topic is judged from joint_states.
const TOPIC_GOAL_POLL: Duration = Duration::from_millis(20);
/// How long a halt waits for a controller to confirm a cancel.
const CANCEL_WAIT: Duration = Duration::from_secs(1);

type TrajectoryPublisher = r2r::Publisher<trajectory_msgs::msg::JointTrajectory>;

/// One controller's ways in: its action, its JointTrajectory topic, or
/// either (`auto`: the first goal finds out which answers).
struct Channel<A: r2r::WrappedActionTypeSupport> {
    interface: ControllerInterface,
    action: Option<r2r::ActionClient<A>>,
    /// The trajectory topic and its resolved name.
    topic: Option<(Mutex<TrajectoryPublisher>, String)>,
    /// `auto`: whether the action answered at the first goal (None: not asked yet).
    detected: Arc<Mutex<Option<bool>>>,
    /// Goals sent on the topic so far: a dropped goal stops the controller
    /// only if no newer goal has gone out since.
    sent: Arc<std::sync::atomic::AtomicU64>,
}

/// Where one goal goes.
enum Route<A: r2r::WrappedActionTypeSupport> {
    Action(r2r::ActionClient<A>),
    Topic(TopicGoal),
}

/// A goal's way to a trajectory topic.
struct TopicGoal {
    publisher: TrajectoryPublisher,
    name: String,
    sent: Arc<std::sync::atomic::AtomicU64>,
}

impl<A: r2r::WrappedActionTypeSupport + 'static> Channel<A> {
    fn configured(&self) -> bool {
        self.action.is_some() || self.topic.is_some()
    }

    /// Where the next goal goes; waits (bounded) for the action server.
    fn route(
        &self,
        name: &str,
        detect_wait: Duration,
    ) -> BoxFuture<'static, Result<Route<A>, PortError>> {
        let interface = self.interface;
        let action = self.action.clone();
        let topic = self.topic.as_ref().map(|(publisher, topic_name)| TopicGoal {
            publisher: publisher.lock().clone(),
            name: topic_name.clone(),
            sent: self.sent.clone(),
        });
        let detected = self.detected.clone();
        let name = name.to_string();
        async move {
            let not_configured = || PortError::NotConfigured { what: format!("{name} (no action client or trajectory topic)") };
            let known = *detected.lock();
            let use_action = match (interface, known) {
                (ControllerInterface::Action, _) | (ControllerInterface::Auto, Some(true)) => true,
                (ControllerInterface::Topic, _) | (ControllerInterface::Auto, Some(false)) => false,
                (ControllerInterface::Auto, None) => {
                    let client = action.as_ref().ok_or_else(not_configured)?;
                    let available = r2r::Node::is_available(client).map_err(|e| failed(&name, e))?;
                    let answered = matches!(tokio::time::timeout(detect_wait, available).await, Ok(Ok(())));
                    *detected.lock() = Some(answered);
                    let topic_name = topic.as_ref().map_or("", |t| t.name.as_str());
                    if answered {
                        tracing::info!("{name}: the action server answered: goals go through the action");
                    } else {
                        tracing::warn!("{name}: no action server answered within {:.1} s: goals go on the topic {topic_name}, judged from joint_states", detect_wait.as_secs_f64());
                    }
                    answered
                }
            };
            if use_action {
                let client = action.ok_or_else(not_configured)?;
                wait_for_server(r2r::Node::is_available(&client).map_err(|e| failed(&name, e))?, &name).await?;
                Ok(Route::Action(client))
            } else {
                Ok(Route::Topic(topic.ok_or_else(not_configured)?))
            }
        }
        .boxed()
    }
}

/// Time for judging a topic goal: the node's clock (simulated time beside
/// a simulator) when it has one at the start, else the monotonic clock.
struct GoalClock {
    node: bool,
    origin: Instant,
    last_s: f64,
}

impl GoalClock {
    fn start(sensors: &SampleStore) -> (Self, f64) {
        let now = sensors.now();
        let clock = Self {
            node: now.clock_s.is_some(),
            origin: now.instant,
            last_s: now.clock_s.unwrap_or(0.0),
        };
        let start_s = clock.last_s;
        (clock, start_s)
    }

    fn now_s(&mut self, sensors: &SampleStore) -> f64 {
        if self.node {
            if let Some(now_s) = sensors.now().clock_s {
                self.last_s = now_s;
            }
            self.last_s
        } else {
            self.origin.elapsed().as_secs_f64()
        }
    }
}

/// Stops a trajectory controller where the joints are: one waypoint at
/// their current positions, at rest, at time 0 (`control.hold`; as the
/// controller itself holds on a cancel). Recent joint_trajectory_controllers
/// refuse an empty trajectory, so it is only the last resort, when the
/// joint states are too old to place the waypoint (said in the log and in
/// what this returns).
fn publish_hold(
    publisher: &TrajectoryPublisher,
    name: &str,
    joint_names: Vec<String>,
    control: &GoalControl,
) -> String {
    let (message, how) = match (control.hold)() {
        Ok(hold) => (
            trajectory_msg(&hold),
            "held where the joints are (one waypoint at their current positions, at rest)"
                .to_string(),
        ),
        Err(reason) => {
            tracing::warn!("{name}: cannot place a hold ({reason}); sending an empty trajectory, which recent joint_trajectory_controllers refuse");
            (
                trajectory_msgs::msg::JointTrajectory { joint_names, ..Default::default() },
                format!("an empty trajectory sent ({reason})"),
            )
        }
    };
    match publisher.publish(&message) {
        Ok(()) => how,
        Err(error) => format!("the hold could not be published: {error}"),
    }
}

/// Holds a topic goal's controller where the joints are when the goal's
/// future is dropped before it ended, unless a newer goal has gone out on
/// the topic since.
struct HoldOnDrop {
    goal: Option<(
        TrajectoryPublisher,
        String,
        Vec<String>,
        Arc<std::sync::atomic::AtomicU64>,
        u64,
        GoalControl,
    )>,
}

impl Drop for HoldOnDrop {
    fn drop(&mut self) {
        if let Some((publisher, name, joint_names, sent, number, control)) = self.goal.take() {
            if sent.load(Ordering::SeqCst) == number {
                publish_hold(&publisher, &name, joint_names, &control);
            }
        }
    }
}

/// Publishes `trajectory` and judges its outcome from joint_states with
/// `judge` (called with the start and current node time and the latest
/// joint states) until it gives one, with whether the controller is to be
/// stopped where it is (a failed goal: as a trajectory controller aborts).
/// Nothing is published once `control.halt` has fired; a halt while the
/// goal runs holds the controller where the joints are when
/// `stop_on_halt` (a gripper's goal is left to finish).
async fn follow_on_topic<T>(
    goal: TopicGoal,
    trajectory: trajectory_msgs::msg::JointTrajectory,
    sensors: Arc<SampleStore>,
    control: GoalControl,
    stop_on_halt: bool,
    mut judge: impl FnMut(f64, f64, Option<&JointStates>) -> Option<(T, bool)>,
) -> Result<T, PortError> {
    let joint_names = trajectory.joint_names.clone();
    if control.halt.halted() {
        return Err(PortError::HaltedBeforeSending { name: goal.name });
    }
    let (mut clock, start_s) = GoalClock::start(&sensors);
    let number = goal.sent.fetch_add(1, Ordering::SeqCst) + 1;
    goal.publisher
        .publish(&trajectory)
        .map_err(|e| failed(&goal.name, format!("publishing the trajectory: {e}")))?;
    let mut guard = HoldOnDrop {
        goal: Some((
            goal.publisher.clone(),
            goal.name.clone(),
            joint_names.clone(),
            goal.sent.clone(),
            number,
            control.clone(),
        )),
    };
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TOPIC_GOAL_POLL) => {}
            _ = control.halt.wait(), if stop_on_halt => {
                guard.goal = None;
                let how = publish_hold(&goal.publisher, &goal.name, joint_names, &control);
                return Err(PortError::Halted { name: goal.name, how });
            }
        }
        let now_s = clock.now_s(&sensors);
        let states = sensors.joint_states().map(|s| s.value);
        if let Some((outcome, stop)) = judge(start_s, now_s, states.as_ref()) {
            if !stop {
                guard.goal = None;
            }
            return Ok(outcome);
        }
    }
}

/// The route to a controller, unless a halt comes first (a goal waiting
/// for its action server is then never sent).
async fn route_unless_halted<A: r2r::WrappedActionTypeSupport>(
    route: BoxFuture<'static, Result<Route<A>, PortError>>,
    control: &GoalControl,
    name: &str,
) -> Result<Route<A>, PortError> {
    let halted = || PortError::HaltedBeforeSending { name: name.to_string() };
    let route = tokio::select! {
        route = route => route?,
        _ = control.halt.wait() => return Err(halted()),
    };
    if control.halt.halted() {
        return Err(halted());
    }
    Ok(route)
}

/// Cancels an action goal that a halt overtook and waits (bounded) for the
/// controller to confirm: what happened, for the stop's result.
async fn cancel_for_halt<T: r2r::WrappedActionTypeSupport + 'static>(
    handle: &r2r::ActionClientGoal<T>,
) -> String {
    match handle.cancel() {
        Ok(cancel) => match tokio::time::timeout(CANCEL_WAIT, cancel).await {
            Ok(Ok(())) => "goal cancelled: the controller holds where the joints are".into(),
            Ok(Err(error)) => format!("the cancel was refused: {error}"),
            Err(_) => {
                format!("cancel sent; not confirmed within {:.1} s", CANCEL_WAIT.as_secs_f64())
            }
        },
        Err(error) => format!("the cancel could not be sent: {error}"),
    }
}

fn trajectory_msg(goal: &TrajectoryGoal) -> trajectory_msgs::msg::JointTrajectory {
    let points = goal
        .points
        .iter()
        .map(|point| trajectory_msgs::msg::JointTrajectoryPoint {
            positions: point.positions.clone(),
            velocities: point.velocities.clone(),
            effort: point.efforts.clone(),
            time_from_start: duration_msg(point.time_s),
            ..Default::default()
        })
        .collect();
    trajectory_msgs::msg::JointTrajectory {
        joint_names: goal.joint_names.clone(),
        points,
        ..Default::default()
    }
}

enum CmdVelPublisher {
    Plain(r2r::Publisher<geometry_msgs::msg::Twist>),
    Stamped(r2r::Publisher<geometry_msgs::msg::TwistStamped>, Arc<std::sync::Mutex<r2r::Clock>>),
}

impl CmdVelPublisher {
    fn kind(&self) -> CmdVelKind {
        match self {
            Self::Plain(_) => CmdVelKind::Twist,
            Self::Stamped(..) => CmdVelKind::TwistStamped,
        }
    }
}

/// The base's velocity topic: its publisher, made once the type is
/// decided (`actuators.cmd_vel_stamped`; `auto`: the subscribers' type),
/// and what the latest look at the graph allows.
struct CmdVel {
    /// Fully qualified, as the graph names it.
    topic: String,
    setting: CmdVelStamped,
    publisher: Option<CmdVelPublisher>,
    output: CmdVelOutput,
}

/// How often the graph is read for the velocity topic's types while
/// publishing (a second type appearing stops the bridge's commands), and
/// while waiting to know the type (a move waits on it).
const CMD_VEL_LOOK_PERIOD: Duration = Duration::from_secs(2);
const CMD_VEL_WAITING_LOOK_PERIOD: Duration = Duration::from_millis(200);

/// `name` as the graph writes it: relative names resolve in the node's
/// namespace.
fn fully_qualified(node_namespace: &str, name: &str) -> String {
    if name.starts_with('/') {
        name.to_string()
    } else {
        format!("{}/{name}", node_namespace.trim_end_matches('/'))
    }
}

/// The types on `topic` that the graph can be trusted to name, and whether
/// it holds more. r2r 0.9.7's get_topic_names_and_types reads only the
/// first type of each topic right: for a topic with several, the others it
/// returns are the first types of the topics after it (seen here: a
/// `/cmd_vel` with Twist and TwistStamped read as Twist and
/// DiagnosticArray). The publishers' own types (read per endpoint) are
/// right; the subscribers' beyond the first are not known.
fn topic_types(
    node: &r2r::Node,
    all: &std::collections::HashMap<String, Vec<String>>,
    topic: &str,
) -> (Vec<String>, bool) {
    let listed = all.get(topic).map_or(&[][..], Vec::as_slice);
    let mut types: Vec<String> = listed.iter().take(1).cloned().collect();
    for publisher in node.get_publishers_info_by_topic(topic, false).unwrap_or_default() {
        if !types.contains(&publisher.topic_type) {
            types.push(publisher.topic_type);
        }
    }
    (types, listed.len() > 1)
}

/// Reads the velocity topic's types from the graph, decides what may be
/// published, makes the publisher when first decided, and says a change
/// in the log. Returns whether commands go out.
fn look_at_cmd_vel(
    node: &mut r2r::Node,
    cmd_vel: &Mutex<CmdVel>,
    clock: &Arc<std::sync::Mutex<r2r::Clock>>,
    qos: &QosProfile,
) -> bool {
    let mut state = cmd_vel.lock();
    let (types, unnamed) = match node.get_topic_names_and_types() {
        Ok(topics) => topic_types(node, &topics, &state.topic),
        Err(error) => {
            tracing::warn!(%error, "reading the ROS graph for {}", state.topic);
            return matches!(state.output, CmdVelOutput::Publish(_));
        }
    };
    let ours = state.publisher.as_ref().map(CmdVelPublisher::kind);
    let mut output = decide_cmd_vel(state.setting, &state.topic, &types, unnamed, ours);
    if let (CmdVelOutput::Publish(kind), None) = (&output, ours) {
        let made = match kind {
            CmdVelKind::Twist => {
                node.create_publisher(&state.topic, qos.clone()).map(CmdVelPublisher::Plain)
            }
            CmdVelKind::TwistStamped => node
                .create_publisher(&state.topic, qos.clone())
                .map(|publisher| CmdVelPublisher::Stamped(publisher, clock.clone())),
        };
        match made {
            Ok(publisher) => state.publisher = Some(publisher),
            Err(error) => {
                output = CmdVelOutput::Waiting(format!(
                    "the {} publisher could not be made: {error}",
                    kind.type_name()
                ))
            }
        }
    }
    if output != state.output {
        match &output {
            CmdVelOutput::Publish(kind) => {
                tracing::info!("publishing {} on {}", kind.type_name(), state.topic)
            }
            CmdVelOutput::Waiting(why) => tracing::info!("base velocity waits: {why}"),
            CmdVelOutput::Refused(why) => tracing::error!("base velocity refused: {why}"),
        }
        state.output = output;
    }
    matches!(state.output, CmdVelOutput::Publish(_))
}

/// The robot's commands through ROS topics and actions (its sensors are
/// the adapter's [`SampleStore`]).
pub struct RosRobot {
    /// Publishers are Send but not Sync; mutexes make the port shareable.
    cmd_vel: Arc<Mutex<CmdVel>>,
    say: Option<Mutex<r2r::Publisher<std_msgs::msg::String>>>,
    /// A simulator's world commands (generator tools); None on real robots.
    world: Option<Mutex<r2r::Publisher<std_msgs::msg::String>>>,
    diagnostics: Mutex<r2r::Publisher<diagnostic_msgs::msg::DiagnosticArray>>,
    /// The bridge's events as JSON (record.ros_events_topic); None when off.
    events: Option<Mutex<r2r::Publisher<std_msgs::msg::String>>>,
    head: Channel<FollowJointTrajectory::Action>,
    arm: Channel<FollowJointTrajectory::Action>,
    gripper: Channel<GripperCommand::Action>,
    clock: Arc<std::sync::Mutex<r2r::Clock>>,
    names: Names,
    /// Joint states and the node's time, for judging topic goals.
    sensors: Arc<SampleStore>,
    config: Arc<Config>,
}

/// What the graph showed at the spin thread's latest look, for the
/// preflight: per watched topic its types and publishers (what was
/// received is the sample store's), per action its feedback types and
/// whether a server publishes its status, the /clock publishers.
struct GraphView {
    topics: Vec<(Sensor, aicc_bridge::check::TopicFacts)>,
    actions: Vec<aicc_bridge::check::ActionFacts>,
    clock_publishers: usize,
}

/// How often the spin thread reads the graph for the preflight (only once
/// one is asked for: a run does not pay for it).
const GRAPH_LOOK_PERIOD: Duration = Duration::from_secs(1);

/// The action servers the bridge sends goals to: (configuration key,
/// fully qualified name, action type).
fn configured_actions(
    config: &Config,
    node_namespace: &str,
) -> Vec<(&'static str, String, &'static str)> {
    const TRAJECTORY: &str = "control_msgs/action/FollowJointTrajectory";
    let a = &config.actuators;
    [
        ("actuators.head_action", &a.head_action, a.head_interface, TRAJECTORY),
        ("actuators.arm_action", &a.arm_action, a.arm_interface, TRAJECTORY),
        (
            "actuators.gripper_action",
            &a.gripper_action,
            a.gripper_interface,
            "control_msgs/action/GripperCommand",
        ),
    ]
    .into_iter()
    .filter(|(_, name, interface, _)| !name.is_empty() && *interface != ControllerInterface::Topic)
    .map(|(item, name, _, kind)| {
        (item, fully_qualified(node_namespace, &resolve(&config.namespace, name)), kind)
    })
    .collect()
}

fn look_at_graph(
    node: &r2r::Node,
    watched: &[Subscribed],
    actions: &[(&'static str, String, &'static str)],
) -> GraphView {
    use aicc_bridge::check::{ActionFacts, TopicFacts};
    let types = node.get_topic_names_and_types().unwrap_or_default();
    let publishers =
        |topic: &str| node.get_publishers_info_by_topic(topic, false).map_or(0, |p| p.len());
    GraphView {
        topics: watched
            .iter()
            .map(|s| {
                let facts = TopicFacts {
                    item: format!("sensors.{}", s.sensor.key()),
                    topic: s.qualified.clone(),
                    expected_type: s.type_name.clone(),
                    types_on_topic: topic_types(node, &types, &s.qualified).0,
                    publishers: publishers(&s.qualified),
                    received: 0,
                    qos_note: None,
                    safety: false,
                };
                (s.sensor, facts)
            })
            .collect(),
        actions: actions
            .iter()
            .map(|(item, name, kind)| ActionFacts {
                item: item.to_string(),
                name: name.clone(),
                expected_type: kind.to_string(),
                feedback_types: topic_types(node, &types, &format!("{name}/_action/feedback")).0,
                server_ready: publishers(&format!("{name}/_action/status")) > 0,
            })
            .collect(),
        clock_publishers: publishers("/clock"),
    }
}

/// Owns the spin thread; dropping it stops spinning.
pub struct RosAdapter {
    pub samples: Arc<SampleStore>,
    pub robot: Arc<RosRobot>,
    /// None until a preflight asks the spin thread to read the graph.
    graph: Arc<Mutex<Option<GraphView>>>,
    running: Arc<AtomicBool>,
    spin_thread: Option<JoinHandle<()>>,
}

impl RosAdapter {
    /// Asks the spin thread to read the graph every second, for
    /// [`RosAdapter::preflight_facts`].
    pub fn watch_graph(&self) {
        self.graph.lock().get_or_insert(GraphView {
            topics: Vec::new(),
            actions: Vec::new(),
            clock_publishers: 0,
        });
    }

    /// The preflight's facts: the graph's latest look (after
    /// [`RosAdapter::watch_graph`]), what each subscription received so far
    /// (over `window_s`), the velocity topic's state, the clock.
    pub fn preflight_facts(&self, config: &Config, window_s: f64) -> aicc_bridge::check::Facts {
        let graph = self.graph.lock();
        let graph = graph.as_ref();
        let statistics = self.samples.statistics();
        let safety = |sensor: Sensor| {
            matches!(
                sensor,
                Sensor::Odometry | Sensor::Depth | Sensor::Scan | Sensor::Bumper | Sensor::Hazards
            ) || (sensor == Sensor::JointStates && !config.actuators.arm_action.is_empty())
        };
        let topics = graph
            .map_or(&[][..], |g| g.topics.as_slice())
            .iter()
            .map(|(sensor, seen)| {
                let delivered = statistics.iter().find(|s| s.sensor == sensor.key());
                aicc_bridge::check::TopicFacts {
                    received: delivered.map_or(0, |d| d.received),
                    qos_note: delivered.and_then(|d| d.qos_note.clone()),
                    safety: safety(*sensor),
                    ..seen.clone()
                }
            })
            .collect();
        let cmd_vel = self.robot.cmd_vel.lock().topic.clone();
        aicc_bridge::check::Facts {
            window_s,
            topics,
            actions: graph.map_or_else(Vec::new, |g| g.actions.clone()),
            cmd_vel: (cmd_vel, self.robot.base_output_unavailable().map(|e| e.to_string())),
            use_sim_time: config.use_sim_time,
            clock_publishers: graph.map_or(0, |g| g.clock_publishers),
        }
    }

    /// The robot port: sensors from the subscriptions, commands through
    /// the publishers and action clients.
    pub fn robot(&self) -> Robot {
        Robot {
            sensors: self.samples.clone(),
            actuators: self.robot.clone(),
            signals: self.robot.clone(),
        }
    }
}

impl Drop for RosAdapter {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        if let Some(thread) = self.spin_thread.take() {
            let _ = thread.join();
        }
    }
}

fn qos(sensor: &SensorTopic) -> QosProfile {
    let profile = QosProfile::default().keep_last(sensor.depth);
    match sensor.reliability {
        Reliability::Reliable => profile.reliable(),
        Reliability::BestEffort => profile.best_effort(),
    }
}

/// A subscription to watch for a QoS mismatch, and to show the preflight.
struct Subscribed {
    sensor: Sensor,
    topic: String,
    /// Fully qualified, as the graph names it.
    qualified: String,
    /// The type the bridge reads.
    type_name: String,
    reliable: bool,
}

/// Takes whatever one subscription has received since it last ran and
/// stores it. Run on the spin thread right after `spin_once`: a message is
/// stored as soon as rcl hands it over, not when a tokio worker next wakes
/// (odometry reached the base driver that much later).
type Drain = Box<dyn FnMut() + Send>;

/// The sensor subscriptions: what to watch for QoS mismatches, and their
/// drains for the spin thread.
#[derive(Default)]
struct Subscriptions {
    watched: Vec<Subscribed>,
    drains: Vec<Drain>,
}

impl Subscriptions {
    fn drain_all(&mut self) {
        for drain in &mut self.drains {
            drain();
        }
    }
}

/// Subscribes to a configured sensor topic and keeps the latest message,
/// converted by `store` (which returns the message's stamp, for the
/// delivery counts). Unconfigured sensors ("" topic) are skipped. While a
/// recording wants sensor samples, the message's CDR bytes are kept too
/// (serialised before it is converted; nothing is done otherwise).
fn subscribe_latest<T, F>(
    node: &mut r2r::Node,
    config: &Config,
    which: Sensor,
    samples: Arc<SampleStore>,
    subscriptions: &mut Subscriptions,
    store: F,
) -> anyhow::Result<()>
where
    T: r2r::WrappedTypesupport + Send + 'static,
    F: Fn(&mut Latest, T, Instant) -> f64 + Send + 'static,
{
    let sensor = config.sensors.topic(which);
    if !sensor.is_configured() {
        return Ok(());
    }
    let topic = resolve(&config.namespace, &sensor.topic);
    let stream = node
        .subscribe::<T>(&topic, qos(sensor))
        .with_context(|| format!("subscribing to {topic}"))?;
    // Recorded under its fully qualified name, as rosbag2 names topics.
    let qualified = match (topic.starts_with('/'), node.namespace()) {
        (false, Ok(namespace)) => format!("{}/{topic}", namespace.trim_end_matches('/')),
        _ => topic.clone(),
    };
    let kind = wire_type::<T>(&qualified, config);
    let type_name = kind.type_name.to_string();
    let wire_store = samples.clone();
    let with_bytes = stream.map(move |msg: T| {
        // Outside the store's lock: readers never wait for a serialisation.
        let bytes = wire_store
            .wants_wire()
            .then(|| msg.to_serialized_bytes().ok().map(Arc::<[u8]>::from))
            .flatten();
        (msg, bytes)
    });
    let wire_store = samples.clone();
    subscriptions.drains.push(drain_into(
        with_bytes,
        which,
        samples,
        move |latest, (msg, bytes), received| {
            let stamp_s = store(latest, msg, received);
            if let Some(bytes) = bytes {
                wire_store.put_wire(which, &kind, bytes, received, std::time::SystemTime::now());
            }
            stamp_s
        },
    ));
    subscriptions.watched.push(Subscribed {
        sensor: which,
        topic,
        qualified,
        type_name,
        reliable: sensor.reliability == Reliability::Reliable,
    });
    Ok(())
}

/// `sensor_msgs/msg/Image` for r2r's `sensor_msgs::msg::Image`.
fn ros_type_name<T>() -> String {
    let parts: Vec<&str> = std::any::type_name::<T>().rsplit("::").take(3).collect();
    match parts.as_slice() {
        [name, kind, package] => format!("{package}/{kind}/{name}"),
        _ => std::any::type_name::<T>().to_string(),
    }
}

/// What a sensor topic carries, for its recorded samples: the schema from
/// the installed .msg files (the node's ament prefixes, then the one the
/// bridge was built against). A missing definition is a warning: the
/// samples are still recorded, without a schema to decode them by.
fn wire_type<T>(topic: &str, config: &Config) -> WireType {
    let type_name = ros_type_name::<T>();
    let schema = if config.record.sensor_samples {
        let prefixes = ros2msg::prefixes(option_env!("AMENT_PREFIX_PATH"));
        ros2msg::installed_schema(&type_name, &prefixes).unwrap_or_else(|error| {
            tracing::warn!(%topic, %error, "recorded samples of this topic will have no schema");
            String::new()
        })
    } else {
        String::new()
    };
    WireType { topic: topic.into(), type_name: type_name.into(), schema: schema.into() }
}

/// The drain of one subscription: every message waiting in r2r's channel
/// (small: r2r drops messages when it is full, so it is emptied after every
/// spin) stored as the latest sample. Storing moves the message (no
/// decoding here: images stay as received).
fn drain_into<T: Send + 'static, F>(
    stream: impl Stream<Item = T> + Unpin + Send + 'static,
    which: Sensor,
    samples: Arc<SampleStore>,
    store: F,
) -> Drain
where
    F: Fn(&mut Latest, T, Instant) -> f64 + Send + 'static,
{
    drain(stream, move |msg| {
        let stamp_s = store(&mut samples.lock(), msg, Instant::now());
        samples.delivered(which, stamp_s);
    })
}

/// Every message waiting in `stream`, handed to `on_message`, without
/// waiting for more.
fn drain<T: Send + 'static>(
    mut stream: impl Stream<Item = T> + Unpin + Send + 'static,
    mut on_message: impl FnMut(T) + Send + 'static,
) -> Drain {
    Box::new(move || {
        // `now_or_never` polls once: Some(Some(msg)) while messages wait.
        while let Some(Some(msg)) = stream.next().now_or_never() {
            on_message(msg);
        }
    })
}

/// Subscribes to the robot's transforms (tf2_msgs/TFMessage), filling the
/// store's TF tree. /tf_static is latched by its publishers (transient
/// local), so a bridge started late still gets every static transform.
fn subscribe_transforms(
    node: &mut r2r::Node,
    config: &Config,
    samples: &Arc<SampleStore>,
    subscriptions: &mut Subscriptions,
) -> anyhow::Result<()> {
    let Some(frames) = samples.frames() else { return Ok(()) };
    for (name, is_static) in [(&config.tf.topic, false), (&config.tf.static_topic, true)] {
        if name.is_empty() {
            continue;
        }
        let topic = resolve(&config.namespace, name);
        let qos = if is_static {
            QosProfile::default().keep_last(100).reliable().transient_local()
        } else {
            QosProfile::default().keep_last(100).reliable()
        };
        let stream = node
            .subscribe::<tf2_msgs::msg::TFMessage>(&topic, qos)
            .with_context(|| format!("subscribing to {topic}"))?;
        let frames = frames.clone();
        subscriptions.drains.push(drain(stream, move |msg: tf2_msgs::msg::TFMessage| {
            frames.insert_all(
                msg.transforms.into_iter().map(transform_sample),
                is_static,
                Instant::now(),
            );
        }));
    }
    Ok(())
}

fn transform_sample(t: geometry_msgs::msg::TransformStamped) -> TransformSample {
    let translation = vector(&t.transform.translation);
    let transform =
        Isometry3::from_parts(Translation3::from(translation), quaternion(&t.transform.rotation));
    TransformSample {
        parent: t.header.frame_id,
        child: t.child_frame_id,
        transform,
        stamp_s: stamp_seconds(&t.header.stamp),
    }
}

/// How often the spin thread compares each subscription's reliability
/// with its publishers'.
const QOS_CHECK_PERIOD: Duration = Duration::from_secs(2);

/// Why a subscription may receive nothing: a reliable subscription does
/// not match a best-effort publisher (silently, in DDS). None when fine.
fn qos_mismatch(node: &r2r::Node, subscription: &Subscribed) -> Option<String> {
    if !subscription.reliable {
        return None;
    }
    let publishers = node.get_publishers_info_by_topic(&subscription.qualified, false).ok()?;
    let best_effort: Vec<String> = publishers
        .iter()
        .filter(|p| p.qos_profile.reliability == r2r::qos::ReliabilityPolicy::BestEffort)
        .map(|p| format!("{}/{}", p.node_namespace.trim_end_matches('/'), p.node_name))
        .collect();
    (!best_effort.is_empty()).then(|| {
        format!(
            "{} is subscribed reliable but {} publish(es) best effort: nothing arrives from them; set sensors.{}.reliability: best_effort",
            subscription.topic,
            best_effort.join(", "),
            subscription.sensor.key()
        )
    })
}

/// Creates the ROS node (rcl applies the command line's remappings: its
/// name and namespace may differ from `node_name`).
pub fn create_node(node_name: &str) -> anyhow::Result<r2r::Node> {
    let context = r2r::Context::create().context("initialising ROS 2 (rcl_init)")?;
    r2r::Node::create(context, node_name, "").context("creating the ROS 2 node")
}

/// The node's name and namespace after remapping, for its parameter sections.
pub fn identity(node: &r2r::Node) -> anyhow::Result<aicc_bridge::ros_parameters::NodeIdentity> {
    Ok(aicc_bridge::ros_parameters::NodeIdentity {
        name: node.name()?,
        namespace: node.namespace()?,
    })
}

/// Gives the node its subscriptions, publishers, action clients and
/// parameter services, and starts spinning. Must be called inside a tokio
/// runtime.
pub fn start(
    mut node: r2r::Node,
    config: Arc<Config>,
    parameters: Arc<parameters::ParameterStore>,
) -> anyhow::Result<RosAdapter> {
    parameters::serve(&mut node, parameters)?;
    if config.use_sim_time {
        // Every stamp published and every capture age counts in /clock time.
        node.get_time_source()
            .enable_sim_time(&mut node)
            .context("enabling simulated time (use_sim_time) from /clock")?;
    }
    let names = Names::from_config(&config);
    let clock = node.get_ros_clock();
    let mut store = SampleStore::new(names.clone(), Arc::new(RosClock(clock.clone())));
    if config.record.keeps_samples_from_start() {
        // The first frames come before the recorder exists; a tool may serve one.
        store = store.keeping_wire_from_start();
    }
    let slot = Arc::new(store);
    let mut subs = Subscriptions::default();
    let s = &mut subs;
    subscribe_latest::<nav_msgs::msg::Odometry, _>(
        &mut node,
        &config,
        Sensor::Odometry,
        slot.clone(),
        s,
        |l, m, t| {
            let sample = odometry_sample(m, t);
            let stamp_s = sample.stamp_s;
            l.odom = Some(sample);
            stamp_s
        },
    )?;
    subscribe_latest::<sensor_msgs::msg::Imu, _>(
        &mut node,
        &config,
        Sensor::Imu,
        slot.clone(),
        s,
        |l, m, t| {
            let sample = imu_sample(m, t);
            let stamp_s = sample.stamp_s;
            l.imu = Some(sample);
            stamp_s
        },
    )?;
    match config.sensors.camera_transport {
        ImageTransport::Raw => subscribe_latest::<sensor_msgs::msg::Image, _>(
            &mut node,
            &config,
            Sensor::Camera,
            slot.clone(),
            s,
            |l, m, t| {
                let (header, image) = raw_image(m);
                keep(&mut l.camera, stamped(CameraFrame::Raw(image), header, t))
            },
        )?,
        ImageTransport::Compressed => subscribe_latest::<sensor_msgs::msg::CompressedImage, _>(
            &mut node,
            &config,
            Sensor::Camera,
            slot.clone(),
            s,
            |l, m, t| {
                let frame = CompressedFrame { format: m.format, data: m.data };
                keep(&mut l.camera, stamped(CameraFrame::Compressed(frame), m.header, t))
            },
        )?,
    }
    subscribe_latest::<sensor_msgs::msg::CameraInfo, _>(
        &mut node,
        &config,
        Sensor::CameraInfo,
        slot.clone(),
        s,
        |l, m, t| keep(&mut l.camera_info, camera_info(m, t)),
    )?;
    subscribe_latest::<sensor_msgs::msg::Image, _>(
        &mut node,
        &config,
        Sensor::Depth,
        slot.clone(),
        s,
        |l, m, t| {
            let (header, image) = raw_image(m);
            keep(&mut l.depth, stamped(image, header, t))
        },
    )?;
    subscribe_latest::<sensor_msgs::msg::CameraInfo, _>(
        &mut node,
        &config,
        Sensor::DepthInfo,
        slot.clone(),
        s,
        |l, m, t| keep(&mut l.depth_info, camera_info(m, t)),
    )?;
    subscribe_latest::<sensor_msgs::msg::JointState, _>(
        &mut node,
        &config,
        Sensor::JointStates,
        slot.clone(),
        s,
        |l, m, t| {
            let value = JointStates {
                names: m.name,
                positions: m.position,
                velocities: m.velocity,
                efforts: m.effort,
            };
            keep(&mut l.joint_states, stamped(value, m.header, t))
        },
    )?;
    subscribe_latest::<ros_gz_interfaces::msg::Contacts, _>(
        &mut node,
        &config,
        Sensor::Bumper,
        slot.clone(),
        s,
        |l, m, t| {
            let value = contacts(&m);
            keep(&mut l.contacts, stamped(value, m.header, t))
        },
    )?;
    subscribe_latest::<sensor_msgs::msg::BatteryState, _>(
        &mut node,
        &config,
        Sensor::Battery,
        slot.clone(),
        s,
        |l, m, t| {
            // POWER_SUPPLY_STATUS_CHARGING = 1
            let value = Battery {
                fraction: f64::from(m.percentage),
                voltage_v: f64::from(m.voltage),
                charging: m.power_supply_status == 1,
            };
            keep(&mut l.battery, stamped(value, m.header, t))
        },
    )?;

    subscribe_latest::<sensor_msgs::msg::LaserScan, _>(
        &mut node,
        &config,
        Sensor::Scan,
        slot.clone(),
        s,
        |l, m, t| {
            let value = LaserScan {
                angle_min_rad: f64::from(m.angle_min),
                angle_increment_rad: f64::from(m.angle_increment),
                range_min_m: f64::from(m.range_min),
                range_max_m: f64::from(m.range_max),
                ranges_m: m.ranges,
            };
            keep(&mut l.scan, stamped(value, m.header, t))
        },
    )?;

    subscribe_latest::<irobot_create_msgs::msg::HazardDetectionVector, _>(
        &mut node,
        &config,
        Sensor::Hazards,
        slot.clone(),
        s,
        |l, m, t| {
            let value = m
                .detections
                .into_iter()
                .map(|d| Hazard { kind: d.type_, frame_id: d.header.frame_id })
                .collect();
            keep(&mut l.hazards, stamped(value, m.header, t))
        },
    )?;

    subscribe_transforms(&mut node, &config, &slot, s)?;

    let actuators = &config.actuators;
    let publisher_qos = QosProfile::default().keep_last(10);
    let cmd_vel = Arc::new(Mutex::new(CmdVel {
        topic: fully_qualified(&node.namespace()?, &resolve(&config.namespace, &actuators.cmd_vel)),
        setting: actuators.cmd_vel_stamped,
        publisher: None,
        output: CmdVelOutput::Waiting("the ROS graph has not been read yet".into()),
    }));
    // A set type publishes at once; `auto` waits for the graph to tell.
    look_at_cmd_vel(&mut node, &cmd_vel, &clock, &publisher_qos);
    let say = match actuators.say_topic.as_str() {
        "" => None,
        topic => Some(Mutex::new(
            node.create_publisher(&resolve(&config.namespace, topic), publisher_qos.clone())?,
        )),
    };
    let world = match actuators.world_topic.as_str() {
        "" => None,
        topic => Some(Mutex::new(
            node.create_publisher(&resolve(&config.namespace, topic), publisher_qos.clone())?,
        )),
    };
    let events = match config.record.ros_events_topic.as_str() {
        "" => None,
        // Keep-last: a slow subscriber loses the oldest lines, never blocks a publish.
        topic => Some(Mutex::new(node.create_publisher(
            &resolve(&config.namespace, topic),
            QosProfile::default().keep_last(100).reliable(),
        )?)),
    };
    let diagnostics = Mutex::new(node.create_publisher(
        &resolve(&config.namespace, &actuators.diagnostics_topic),
        publisher_qos.clone(),
    )?);
    let head = channel::<FollowJointTrajectory::Action>(
        &mut node,
        &config,
        &actuators.head_action,
        actuators.head_interface,
        &actuators.head_trajectory_topic,
    )?;
    let arm = channel::<FollowJointTrajectory::Action>(
        &mut node,
        &config,
        &actuators.arm_action,
        actuators.arm_interface,
        &actuators.arm_trajectory_topic,
    )?;
    let gripper = channel::<GripperCommand::Action>(
        &mut node,
        &config,
        &actuators.gripper_action,
        actuators.gripper_interface,
        &actuators.gripper_trajectory_topic,
    )?;
    let spin_clock = clock.clone();
    let robot = Arc::new(RosRobot {
        cmd_vel: cmd_vel.clone(),
        say,
        world,
        diagnostics,
        events,
        head,
        arm,
        gripper,
        clock,
        names,
        sensors: slot.clone(),
        config: config.clone(),
    });

    let running = Arc::new(AtomicBool::new(true));
    let spin_running = running.clone();
    let qos_watch = slot.clone();
    let graph: Arc<Mutex<Option<GraphView>>> = Arc::new(Mutex::new(None));
    let spin_graph = graph.clone();
    let actions = configured_actions(&config, &node.namespace()?);
    let spin_thread = std::thread::Builder::new().name("ros-spin".into()).spawn(move || {
        let mut next_qos_check = Instant::now();
        let mut next_cmd_vel_look = Instant::now();
        let mut next_graph_look = Instant::now();
        while spin_running.load(Ordering::Relaxed) {
            node.spin_once(SPIN_TIMEOUT);
            subs.drain_all();
            if Instant::now() >= next_graph_look && spin_graph.lock().is_some() {
                next_graph_look = Instant::now() + GRAPH_LOOK_PERIOD;
                let view = look_at_graph(&node, &subs.watched, &actions);
                *spin_graph.lock() = Some(view);
            }
            if Instant::now() >= next_cmd_vel_look {
                let publishing = look_at_cmd_vel(&mut node, &cmd_vel, &spin_clock, &publisher_qos);
                next_cmd_vel_look = Instant::now()
                    + if publishing { CMD_VEL_LOOK_PERIOD } else { CMD_VEL_WAITING_LOOK_PERIOD };
            }
            if Instant::now() >= next_qos_check {
                next_qos_check = Instant::now() + QOS_CHECK_PERIOD;
                for subscription in &subs.watched {
                    let mismatch = qos_mismatch(&node, subscription);
                    if qos_watch.note_qos(subscription.sensor, mismatch.clone()) {
                        if let Some(mismatch) = mismatch {
                            tracing::warn!("{mismatch}");
                        }
                    }
                }
            }
        }
    })?;
    Ok(RosAdapter { samples: slot, robot, graph, running, spin_thread: Some(spin_thread) })
}

/// A controller's action client and/or trajectory publisher, as its
/// interface asks ("" action: no such controller).
fn channel<A: r2r::WrappedActionTypeSupport + 'static>(
    node: &mut r2r::Node,
    config: &Config,
    action: &str,
    interface: ControllerInterface,
    topic: &str,
) -> anyhow::Result<Channel<A>> {
    let mut channel = Channel {
        interface,
        action: None,
        topic: None,
        detected: Arc::new(Mutex::new(None)),
        sent: Arc::new(std::sync::atomic::AtomicU64::new(0)),
    };
    if action.is_empty() {
        return Ok(channel);
    }
    if interface != ControllerInterface::Topic {
        channel.action = Some(
            node.create_action_client::<A>(&resolve(&config.namespace, action))
                .with_context(|| format!("action client {action}"))?,
        );
    }
    if interface != ControllerInterface::Action {
        let name = resolve(&config.namespace, topic);
        // Reliable, as ros2_control's trajectory controllers subscribe.
        let publisher = node
            .create_publisher::<trajectory_msgs::msg::JointTrajectory>(
                &name,
                QosProfile::default().keep_last(10),
            )
            .with_context(|| format!("trajectory publisher {name}"))?;
        channel.topic = Some((Mutex::new(publisher), name));
    }
    Ok(channel)
}

/// Stores `sample` in `slot`; returns its stamp.
fn keep<T>(slot: &mut Option<Stamped<T>>, sample: Stamped<T>) -> f64 {
    let stamp_s = sample.stamp_s;
    *slot = Some(sample);
    stamp_s
}

/// The node's ROS clock (simulated time from /clock when use_sim_time).
struct RosClock(Arc<std::sync::Mutex<r2r::Clock>>);

impl NodeClock for RosClock {
    fn now_s(&self) -> Option<f64> {
        let now = self.0.lock().ok()?.get_now().ok()?;
        // Zero: simulated time before the first /clock message.
        (!now.is_zero()).then_some(now.as_secs_f64())
    }
}

fn stamp_seconds(stamp: &r2r::builtin_interfaces::msg::Time) -> f64 {
    f64::from(stamp.sec) + f64::from(stamp.nanosec) * 1e-9
}

fn stamped<T>(value: T, header: std_msgs::msg::Header, received: Instant) -> Stamped<T> {
    Stamped { value, stamp_s: stamp_seconds(&header.stamp), frame_id: header.frame_id, received }
}

fn vector(v: &geometry_msgs::msg::Vector3) -> Vector3<f64> {
    Vector3::new(v.x, v.y, v.z)
}

fn quaternion(q: &geometry_msgs::msg::Quaternion) -> UnitQuaternion<f64> {
    UnitQuaternion::from_quaternion(Quaternion::new(q.w, q.x, q.y, q.z))
}

fn raw_image(msg: sensor_msgs::msg::Image) -> (std_msgs::msg::Header, RawImage) {
    let image = RawImage {
        width: msg.width,
        height: msg.height,
        encoding: msg.encoding,
        is_bigendian: msg.is_bigendian != 0,
        step: msg.step,
        data: msg.data,
    };
    (msg.header, image)
}

fn camera_info(msg: sensor_msgs::msg::CameraInfo, received: Instant) -> Stamped<CameraInfo> {
    let mut k = [0.0; 9];
    for (slot, value) in k.iter_mut().zip(msg.k.iter()) {
        *slot = *value;
    }
    stamped(CameraInfo { width: msg.width, height: msg.height, k }, msg.header, received)
}

fn contacts(msg: &ros_gz_interfaces::msg::Contacts) -> Contacts {
    let mut points = Vec::new();
    for contact in &msg.contacts {
        for (index, position) in contact.positions.iter().enumerate() {
            let force_n =
                contact.wrenches.get(index).map(|w| vector(&w.body_1_wrench.force).norm());
            points.push(ContactPoint {
                part: contact.collision1.name.clone(),
                other: contact.collision2.name.clone(),
                position_m: vector(position),
                normal: contact.normals.get(index).map(vector).unwrap_or_else(Vector3::zeros),
                depth_m: contact.depths.get(index).copied().unwrap_or(0.0),
                force_n,
            });
        }
    }
    Contacts { points }
}

fn odometry_sample(msg: nav_msgs::msg::Odometry, received: Instant) -> OdometrySample {
    let p = &msg.pose.pose.position;
    OdometrySample {
        position_m: Vector3::new(p.x, p.y, p.z),
        orientation: quaternion(&msg.pose.pose.orientation),
        linear_velocity_mps: vector(&msg.twist.twist.linear),
        angular_velocity_radps: vector(&msg.twist.twist.angular),
        stamp_s: stamp_seconds(&msg.header.stamp),
        frame_id: msg.header.frame_id,
        child_frame_id: msg.child_frame_id,
        received,
    }
}

fn imu_sample(msg: sensor_msgs::msg::Imu, received: Instant) -> ImuSample {
    // REP-145: orientation_covariance[0] == -1 means "no orientation".
    let has_orientation = msg.orientation_covariance.first().is_none_or(|c| *c != -1.0);
    ImuSample {
        orientation: has_orientation.then(|| quaternion(&msg.orientation)),
        angular_velocity_radps: vector(&msg.angular_velocity),
        linear_acceleration_mps2: vector(&msg.linear_acceleration),
        stamp_s: stamp_seconds(&msg.header.stamp),
        frame_id: msg.header.frame_id,
        received,
    }
}

fn duration_msg(seconds: f64) -> r2r::builtin_interfaces::msg::Duration {
    let whole = seconds.floor();
    r2r::builtin_interfaces::msg::Duration {
        sec: whole as i32,
        nanosec: ((seconds - whole) * 1e9) as u32,
    }
}

/// Waits (bounded) for an action server to be discoverable.
async fn wait_for_server(
    available: impl std::future::Future<Output = r2r::Result<()>>,
    name: &str,
) -> Result<(), PortError> {
    match tokio::time::timeout(ACTION_SERVER_WAIT, available).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(failed(name, format!("action server: {error}"))),
        Err(_) => Err(PortError::ServerUnavailable {
            name: name.to_string(),
            waited_s: ACTION_SERVER_WAIT.as_secs_f64(),
        }),
    }
}

fn failed(name: &str, reason: impl std::fmt::Display) -> PortError {
    PortError::Failed { name: name.to_string(), reason: reason.to_string() }
}

/// Waits for an action's result while draining its feedback (r2r's small
/// feedback channel otherwise fills and logs an error for every message;
/// the feedback stream never ends by itself).
async fn until_result<R, F: Unpin>(
    result: impl std::future::Future<Output = R>,
    mut feedback: impl Stream<Item = F> + Unpin,
) -> R {
    tokio::pin!(result);
    loop {
        tokio::select! {
            outcome = &mut result => return outcome,
            item = feedback.next() => {
                if item.is_none() {
                    return result.await;
                }
            }
        }
    }
}

/// Cancels a goal unless disarmed: dropping a call's future (the agent
/// went away, or the call was cancelled) stops the controller too.
struct CancelOnDrop<F: FnOnce()>(Option<F>);

/// A guard that cancels `goal` unless disarmed (`guard.0 = None`).
fn cancel_on_drop<T: r2r::WrappedActionTypeSupport + 'static>(
    goal: &r2r::ActionClientGoal<T>,
) -> CancelOnDrop<impl FnOnce()> {
    let goal = goal.clone();
    CancelOnDrop(Some(move || {
        if let Ok(cancel) = goal.cancel() {
            tokio::spawn(async move {
                let _ = cancel.await;
            });
        }
    }))
}

impl<F: FnOnce()> Drop for CancelOnDrop<F> {
    fn drop(&mut self) {
        if let Some(cancel) = self.0.take() {
            cancel();
        }
    }
}

impl ActuatorPort for RosRobot {
    fn publish_base_velocity(&self, velocity: BaseVelocity) {
        let twist = geometry_msgs::msg::Twist {
            linear: geometry_msgs::msg::Vector3 { x: velocity.linear_mps, y: 0.0, z: 0.0 },
            angular: geometry_msgs::msg::Vector3 { x: 0.0, y: 0.0, z: velocity.angular_radps },
        };
        let state = self.cmd_vel.lock();
        // Where commands may not go (a type in doubt), only a stop does,
        // on the publisher the robot may still be listening to.
        let twist = match state.output {
            CmdVelOutput::Publish(_) => twist,
            _ => geometry_msgs::msg::Twist::default(),
        };
        let Some(publisher) = &state.publisher else {
            return;
        };
        let result = match publisher {
            CmdVelPublisher::Plain(publisher) => publisher.publish(&twist),
            CmdVelPublisher::Stamped(publisher, clock) => {
                let stamp = clock
                    .lock()
                    .ok()
                    .and_then(|mut clock| clock.get_now().ok())
                    .map(|t| r2r::Clock::to_builtin_time(&t))
                    .unwrap_or_default();
                let header = std_msgs::msg::Header { stamp, frame_id: "base_link".into() };
                publisher.publish(&geometry_msgs::msg::TwistStamped { header, twist })
            }
        };
        if let Err(error) = result {
            tracing::error!(%error, "publishing cmd_vel failed");
        }
    }

    fn follow_trajectory(
        &self,
        controller: Controller,
        goal: TrajectoryGoal,
        control: GoalControl,
    ) -> BoxFuture<'static, Result<TrajectoryOutcome, PortError>> {
        let channel = match controller {
            Controller::Head => &self.head,
            Controller::Arm => &self.arm,
        };
        let name = self.endpoint(controller.into());
        let configured = channel.configured();
        let route = channel
            .route(&name, Duration::from_secs_f64(self.config.actuators.action_detect_wait_s));
        let sensors = self.sensors.clone();
        let (tolerance_rad, margin_s) = (
            self.config.actuators.topic_goal_tolerance_rad,
            self.config.actuators.topic_result_margin_s,
        );
        async move {
            if !configured {
                return Err(PortError::NotConfigured {
                    what: format!("{controller:?} controller"),
                });
            }
            let trajectory = trajectory_msg(&goal);
            let client = match route_unless_halted(route, &control, &name).await? {
                Route::Action(client) => client,
                Route::Topic(topic) => {
                    let mut judge = None;
                    return follow_on_topic(
                        topic,
                        trajectory,
                        sensors,
                        control,
                        true,
                        move |start_s, now_s, states| {
                            judge
                                .get_or_insert_with(|| {
                                    TrajectoryJudge::new(&goal, start_s, tolerance_rad, margin_s)
                                })
                                .judge(now_s, states)
                                .map(|outcome| {
                                    let failed = outcome.error_code != 0;
                                    (outcome, failed)
                                })
                        },
                    )
                    .await;
                }
            };
            let request = FollowJointTrajectory::Goal { trajectory, ..Default::default() };
            let (handle, result, feedback) = client
                .send_goal_request(request)
                .map_err(|e| failed(&name, format!("sending the goal: {e}")))?
                .await
                .map_err(|e| PortError::Rejected { name: name.clone(), reason: e.to_string() })?;
            let mut guard = cancel_on_drop(&handle);
            let finished = tokio::select! {
                finished = until_result(result, feedback) => finished,
                _ = control.halt.wait() => {
                    guard.0 = None;
                    let how = cancel_for_halt(&handle).await;
                    return Err(PortError::Halted { name, how });
                }
            };
            let (status, result) =
                finished.map_err(|e| failed(&name, format!("waiting for the result: {e}")))?;
            guard.0 = None;
            let mut error_string = result.error_string;
            if status != r2r::GoalStatus::Succeeded && error_string.is_empty() {
                error_string = format!("goal ended {status:?}");
            }
            Ok(TrajectoryOutcome { error_code: result.error_code, error_string })
        }
        .boxed()
    }

    fn gripper_command(
        &self,
        goal: GripperGoal,
        control: GoalControl,
    ) -> BoxFuture<'static, Result<GripperOutcome, PortError>> {
        let name = self.endpoint(Endpoint::Gripper);
        let configured = self.gripper.configured();
        let route = self
            .gripper
            .route(&name, Duration::from_secs_f64(self.config.actuators.action_detect_wait_s));
        let sensors = self.sensors.clone();
        let actuators = &self.config.actuators;
        let joint = actuators.gripper_joint.clone();
        let (tolerance_m, margin_s) =
            (actuators.topic_goal_tolerance_m, actuators.topic_result_margin_s);
        async move {
            if !configured {
                return Err(PortError::NotConfigured { what: "gripper controller".into() });
            }
            let client = match route_unless_halted(route, &control, &name).await? {
                Route::Action(client) => client,
                Route::Topic(topic) => {
                    // The fingers' trajectory, planned within their limits,
                    // carries max_effort in every waypoint: a controller
                    // with an effort interface applies it.
                    let duration_s = goal.trajectory.points.last().map_or(0.0, |p| p.time_s);
                    let (position_m, topic_name) = (goal.position_m, topic.name.clone());
                    let mut judge = None;
                    let outcome = follow_on_topic(
                        topic,
                        trajectory_msg(&goal.trajectory),
                        sensors,
                        control,
                        false,
                        move |start_s, now_s, states| {
                            // A stalled gripper keeps squeezing what it holds: never stopped here.
                            judge
                                .get_or_insert_with(|| {
                                    GripperJudge::new(
                                        &joint,
                                        position_m,
                                        start_s,
                                        duration_s,
                                        tolerance_m,
                                        margin_s,
                                    )
                                })
                                .judge(now_s, states)
                                .map(|outcome| (outcome, false))
                        },
                    )
                    .await?;
                    return outcome.map_err(|e| failed(&topic_name, e));
                }
            };
            let request = GripperCommand::Goal {
                command: r2r::control_msgs::msg::GripperCommand {
                    position: goal.position_m,
                    max_effort: goal.max_effort_n,
                },
            };
            let (handle, result, feedback) = client
                .send_goal_request(request)
                .map_err(|e| failed(&name, format!("sending the goal: {e}")))?
                .await
                .map_err(|e| PortError::Rejected { name: name.clone(), reason: e.to_string() })?;
            let mut guard = cancel_on_drop(&handle);
            let (_status, result) = until_result(result, feedback)
                .await
                .map_err(|e| failed(&name, format!("waiting for the result: {e}")))?;
            guard.0 = None;
            Ok(GripperOutcome {
                position_m: result.position,
                effort_n: result.effort,
                stalled: result.stalled,
                reached_goal: result.reached_goal,
            })
        }
        .boxed()
    }

    fn endpoint(&self, endpoint: Endpoint) -> String {
        self.names.endpoint(endpoint).to_string()
    }

    fn base_output_unavailable(&self) -> Option<PortError> {
        let state = self.cmd_vel.lock();
        let name = state.topic.clone();
        match &state.output {
            CmdVelOutput::Publish(_) => None,
            CmdVelOutput::Waiting(reason) => {
                Some(PortError::NotReady { name, reason: reason.clone() })
            }
            CmdVelOutput::Refused(reason) => {
                Some(PortError::TypeMismatch { name, reason: reason.clone() })
            }
        }
    }
}

impl SignalPort for RosRobot {
    fn say(&self, text: &str) -> Result<(), PortError> {
        let publisher = self
            .say
            .as_ref()
            .ok_or_else(|| PortError::NotConfigured { what: "say topic".into() })?;
        publisher
            .lock()
            .publish(&std_msgs::msg::String { data: text.to_string() })
            .map_err(|e| failed(self.names.say(), e))
    }

    fn say_topic(&self) -> String {
        self.names.say().to_string()
    }

    fn world_command(&self, command: &str) -> Result<(), PortError> {
        let publisher = self
            .world
            .as_ref()
            .ok_or_else(|| PortError::NotConfigured { what: "world topic".into() })?;
        publisher
            .lock()
            .publish(&std_msgs::msg::String { data: command.to_string() })
            .map_err(|e| failed(self.names.world(), e))
    }

    fn world_topic(&self) -> String {
        self.names.world().to_string()
    }

    fn publish_event(&self, json: &str) {
        if let Some(publisher) = &self.events {
            if let Err(error) =
                publisher.lock().publish(&std_msgs::msg::String { data: json.to_string() })
            {
                tracing::debug!(%error, "publishing an event line failed");
            }
        }
    }

    fn publishes_events(&self) -> bool {
        self.events.is_some()
    }

    fn publish_diagnostics(&self, diagnostics: &[Diagnostic]) {
        let stamp = self
            .clock
            .lock()
            .ok()
            .and_then(|mut clock| clock.get_now().ok())
            .map(|t| r2r::Clock::to_builtin_time(&t))
            .unwrap_or_default();
        let status = diagnostics
            .iter()
            .map(|d| diagnostic_msgs::msg::DiagnosticStatus {
                level: d.level,
                name: d.name.clone(),
                message: d.message.clone(),
                hardware_id: "aicc_bridge".into(),
                values: d
                    .values
                    .iter()
                    .map(|(key, value)| diagnostic_msgs::msg::KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect(),
            })
            .collect();
        let array = diagnostic_msgs::msg::DiagnosticArray {
            header: std_msgs::msg::Header { stamp, frame_id: String::new() },
            status,
        };
        if let Err(error) = self.diagnostics.lock().publish(&array) {
            tracing::warn!(%error, "publishing diagnostics failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ros_type_names_come_from_the_generated_paths() {
        assert_eq!(ros_type_name::<sensor_msgs::msg::Image>(), "sensor_msgs/msg/Image");
        assert_eq!(ros_type_name::<nav_msgs::msg::Odometry>(), "nav_msgs/msg/Odometry");
    }

    #[test]
    fn the_installed_image_schema_has_its_dependencies() {
        let prefixes = ros2msg::prefixes(option_env!("AMENT_PREFIX_PATH"));
        let schema = ros2msg::installed_schema("sensor_msgs/msg/Image", &prefixes).unwrap();
        assert!(schema.contains("uint8[] data"), "{schema}");
        assert!(
            schema.contains(&format!("{}\nMSG: std_msgs/Header\n", ros2msg::SEPARATOR)),
            "{schema}"
        );
        assert!(schema.contains("MSG: builtin_interfaces/Time\n"), "{schema}");
    }
}
