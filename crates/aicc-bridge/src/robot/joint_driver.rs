//! The one way to the head, arm and gripper controllers: every goal is
//! checked against the limits (URDF positions, velocities and efforts;
//! the configured accelerations) from where the joints are measured to be
//! now, and a goal that breaks one is refused with nothing sent. Tools ask
//! for motions; this driver plans them within the limits and makes sure
//! no goal can bypass them.
//!
//! Fresh: a goal starts from joint states no older than
//! `actuators.joint_start_max_age_s` at the moment it is sent (positions
//! and velocities: the controller starts from its current state, so the
//! first segment's speed and acceleration count from there).
//!
//! Halts: a goal carries the stop generation its motion began in down to
//! the port, which sends nothing after a halt (even a goal still waiting
//! for its action server) and stops a running head or arm goal where the
//! joints are. [`JointDriver::settle_halt`] waits for those goals to end
//! and says how each did.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::watch;

use super::halt::Halts;
use super::port::{ActuatorPort, Endpoint, GoalControl, PortError, Sensor, SensorPort};
use super::{Controller, GripperGoal, GripperOutcome, TrajectoryGoal, TrajectoryOutcome, Waypoint};
use crate::config::Config;
use crate::governor::joint_motion::JointMotionState;
use crate::governor::{JointError, JointLimits};

/// What the driver needs from the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct JointSettings {
    /// The joint the gripper command positions.
    pub gripper_joint: String,
    /// The joints a gripper trajectory sets (empty: `gripper_joint`).
    pub gripper_trajectory_joints: Vec<String>,
    /// The oldest joint states a goal may start from.
    pub start_max_age: Duration,
    /// The shortest gripper trajectory (a trajectory topic's gripper goal).
    pub gripper_min_duration_s: f64,
}

impl JointSettings {
    pub fn from_config(config: &Config) -> Self {
        let actuators = &config.actuators;
        Self {
            gripper_joint: actuators.gripper_joint.clone(),
            gripper_trajectory_joints: actuators.gripper_trajectory_joints(),
            start_max_age: Duration::from_secs_f64(actuators.joint_start_max_age_s),
            gripper_min_duration_s: actuators.gripper_topic_duration_s,
        }
    }
}

/// Why a goal was not sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GoalRefused {
    /// It breaks a limit.
    #[error(transparent)]
    Limits(#[from] JointError),
    /// Where the joints are is not known freshly enough to start from.
    #[error("{0}")]
    StartUnknown(String),
    /// A `stop` came after the motion began.
    #[error("a stop came after this motion began: nothing was sent")]
    Halted,
}

/// Where the joints were measured, fresh enough to start a goal from.
/// Only the driver makes one.
#[derive(Debug, Clone, PartialEq)]
pub struct JointStart {
    joints: Vec<String>,
    state: JointMotionState,
    /// When the joint states were captured (their stamp, where valid).
    captured: Instant,
}

impl JointStart {
    pub fn positions(&self) -> &[f64] {
        &self.state.positions
    }

    pub fn velocities(&self) -> &[f64] {
        &self.state.velocities
    }

    /// How old the measurement is now.
    pub fn age(&self) -> Duration {
        self.captured.elapsed()
    }
}

/// A motion checked, planned and on its way.
pub struct Motion<T> {
    /// What was sent.
    pub trajectory: TrajectoryGoal,
    /// Where it started from.
    pub start: JointStart,
    /// Resolves when the controller has finished.
    pub outcome: BoxFuture<'static, Result<T, PortError>>,
}

impl<T> Motion<T> {
    /// The planned duration, seconds.
    pub fn duration_s(&self) -> f64 {
        self.trajectory.points.last().map_or(0.0, |p| p.time_s)
    }
}

/// How a head or arm goal in flight ended under a halt.
#[derive(Debug, Clone, PartialEq)]
pub struct HaltedGoal {
    pub endpoint: Endpoint,
    /// What happened, for the `stop` result.
    pub how: String,
}

#[derive(Debug)]
struct Running {
    id: u64,
    endpoint: Option<Endpoint>,
    generation: u64,
}

/// The goals in flight, and how the last ones ended.
#[derive(Debug, Default)]
struct GoalBook {
    running: Vec<Running>,
    /// (goal id, how it ended), newest last.
    ended: Vec<(u64, HaltedGoal)>,
}

/// How many ended goals the book remembers (a stop reads the few it waited for).
const ENDED_KEPT: usize = 64;

pub struct JointDriver {
    actuators: Arc<dyn ActuatorPort>,
    sensors: Arc<dyn SensorPort>,
    limits: Arc<JointLimits>,
    halts: Arc<Halts>,
    settings: JointSettings,
    book: Arc<watch::Sender<GoalBook>>,
    next_goal: AtomicU64,
}

/// A goal on its way to a controller, or why it was not sent.
pub type Sent<T> = Result<BoxFuture<'static, Result<T, PortError>>, GoalRefused>;

impl JointDriver {
    pub fn new(
        actuators: Arc<dyn ActuatorPort>,
        sensors: Arc<dyn SensorPort>,
        limits: Arc<JointLimits>,
        halts: Arc<Halts>,
        settings: JointSettings,
    ) -> Self {
        Self {
            actuators,
            sensors,
            limits,
            halts,
            settings,
            book: Arc::new(watch::Sender::new(GoalBook::default())),
            next_goal: AtomicU64::new(0),
        }
    }

    /// The limits this driver enforces.
    pub fn limits(&self) -> &JointLimits {
        &self.limits
    }

    /// `value` brought within the limits of `joint` (for a measured
    /// position that is to be held: sensors may read slightly outside).
    pub fn clamp_to_limits(&self, joint: &str, value: f64) -> f64 {
        clamp_to(&self.limits, joint, value)
    }

    /// The stop generation a joint motion begins in.
    pub fn begin_motion(&self) -> u64 {
        self.halts.current()
    }

    /// Whether a `stop` came after the motion begun as `generation`.
    pub fn halted_since(&self, generation: u64) -> bool {
        self.halts.since(generation)
    }

    /// Where `joints` are now: positions and velocities from joint states
    /// no older than the start age allowed.
    pub fn start(&self, joints: &[String]) -> Result<JointStart, GoalRefused> {
        let topic = self.sensors.topic(Sensor::JointStates);
        let sample = self.sensors.joint_states().ok_or_else(|| {
            GoalRefused::StartUnknown(format!("no joint states received yet on {topic}"))
        })?;
        let now = self.sensors.now();
        let age = sample.age(now).effective();
        if age > self.settings.start_max_age {
            return Err(GoalRefused::StartUnknown(format!(
                "joint states on {topic} are {:.0} ms old: a joint goal starts from where the joints were measured at most {:.0} ms ago (actuators.joint_start_max_age_s)",
                age.as_secs_f64() * 1e3,
                self.settings.start_max_age.as_secs_f64() * 1e3
            )));
        }
        let mut state = JointMotionState {
            positions: Vec::with_capacity(joints.len()),
            velocities: Vec::with_capacity(joints.len()),
        };
        for joint in joints {
            let index = sample.value.names.iter().position(|n| n == joint);
            let position = index
                .and_then(|i| sample.value.positions.get(i))
                .copied()
                .filter(|p| p.is_finite());
            let velocity = index
                .and_then(|i| sample.value.velocities.get(i))
                .copied()
                .filter(|v| v.is_finite());
            state.positions.push(position.ok_or_else(|| {
                GoalRefused::StartUnknown(format!("joint {joint} is not reported on {topic}"))
            })?);
            state.velocities.push(velocity.ok_or_else(|| {
                GoalRefused::StartUnknown(format!("joint {joint}'s velocity is not reported on {topic}: without it a goal's acceleration from where the joint is cannot be checked"))
            })?);
        }
        Ok(JointStart {
            joints: joints.to_vec(),
            state,
            captured: now.instant.checked_sub(age).unwrap_or(now.instant),
        })
    }

    /// Plans a motion of `joints` to `goal` from where they are now, at no
    /// more than `speed` and within every limit, taking at least
    /// `min_duration_s`, and sends it to `controller`.
    pub fn move_joints(
        &self,
        controller: Controller,
        joints: &[String],
        goal: &[f64],
        speed: f64,
        min_duration_s: f64,
        generation: u64,
    ) -> Result<Motion<TrajectoryOutcome>, GoalRefused> {
        if self.halted_since(generation) {
            return Err(GoalRefused::Halted);
        }
        let start = self.start(joints)?;
        let points = self.limits.plan_motion(joints, &start.state, goal, speed, min_duration_s)?;
        let trajectory = TrajectoryGoal { joint_names: joints.to_vec(), points };
        let outcome = self.follow_from(controller, trajectory.clone(), &start, generation)?;
        Ok(Motion { trajectory, start, outcome })
    }

    /// Sends `goal` to `controller` once it passes the limits from where
    /// the joints are now.
    pub fn follow(
        &self,
        controller: Controller,
        goal: TrajectoryGoal,
        generation: u64,
    ) -> Sent<TrajectoryOutcome> {
        let start = self.start(&goal.joint_names)?;
        self.follow_from(controller, goal, &start, generation)
    }

    fn follow_from(
        &self,
        controller: Controller,
        goal: TrajectoryGoal,
        start: &JointStart,
        generation: u64,
    ) -> Sent<TrajectoryOutcome> {
        if self.halted_since(generation) {
            return Err(GoalRefused::Halted);
        }
        if start.joints != goal.joint_names {
            return Err(GoalRefused::StartUnknown(format!(
                "the start was measured for {:?}, the goal is for {:?}",
                start.joints, goal.joint_names
            )));
        }
        if start.age() > self.settings.start_max_age {
            return Err(GoalRefused::StartUnknown(format!(
                "the start position is {:.0} ms old by now (at most {:.0} ms)",
                start.age().as_secs_f64() * 1e3,
                self.settings.start_max_age.as_secs_f64() * 1e3
            )));
        }
        self.limits.check_trajectory(&goal.joint_names, &goal.points, &start.state)?;
        let joints = goal.joint_names.clone();
        self.send(Some(controller.into()), &joints, generation, |control| {
            self.actuators.follow_trajectory(controller, goal, control)
        })
    }

    /// Sends a gripper goal: to `position_m` with at most `max_effort_n`,
    /// both within the limits of the gripper joint; its trajectory (for a
    /// trajectory topic) planned from where the fingers are now within
    /// their velocity and acceleration limits, the effort in every waypoint.
    pub fn gripper(
        &self,
        position_m: f64,
        max_effort_n: f64,
        generation: u64,
    ) -> Result<Motion<GripperOutcome>, GoalRefused> {
        if self.halted_since(generation) {
            return Err(GoalRefused::Halted);
        }
        self.limits.check_position(&self.settings.gripper_joint, position_m)?;
        self.limits.check_effort(&self.settings.gripper_joint, max_effort_n)?;
        let joints = if self.settings.gripper_trajectory_joints.is_empty() {
            vec![self.settings.gripper_joint.clone()]
        } else {
            self.settings.gripper_trajectory_joints.clone()
        };
        let start = self.start(&joints)?;
        let speed = joints
            .iter()
            .map(|j| self.limits.joint(j).map(|l| l.max_velocity))
            .collect::<Result<Vec<f64>, _>>()?
            .into_iter()
            .fold(f64::INFINITY, f64::min);
        let goal = vec![position_m; joints.len()];
        let mut points = self.limits.plan_motion(
            &joints,
            &start.state,
            &goal,
            speed,
            self.settings.gripper_min_duration_s,
        )?;
        for point in &mut points {
            point.efforts = vec![max_effort_n; joints.len()];
        }
        self.limits.check_trajectory(&joints, &points, &start.state)?;
        let trajectory = TrajectoryGoal { joint_names: joints.clone(), points };
        let goal = GripperGoal { position_m, max_effort_n, trajectory: trajectory.clone() };
        let outcome = self.send(None, &joints, generation, |control| {
            self.actuators.gripper_command(goal, control)
        })?;
        Ok(Motion { trajectory, start, outcome })
    }

    /// Waits (at most `wait`) until every head and arm goal that a halt
    /// overtook has ended, and says how each did; empty: none was in flight.
    /// Called after the halt was raised.
    pub async fn settle_halt(&self, wait: Duration) -> Vec<HaltedGoal> {
        let current = self.halts.current();
        let overtaken: Vec<(u64, Endpoint)> = self
            .book
            .borrow()
            .running
            .iter()
            .filter(|r| r.generation < current)
            .filter_map(|r| r.endpoint.map(|e| (r.id, e)))
            .collect();
        if overtaken.is_empty() {
            return Vec::new();
        }
        let mut book = self.book.subscribe();
        let ended_all = book.wait_for(|book| {
            overtaken.iter().all(|(id, _)| !book.running.iter().any(|r| r.id == *id))
        });
        let _ = tokio::time::timeout(wait, ended_all).await;
        let book = self.book.borrow();
        overtaken
            .iter()
            .map(|(id, endpoint)| match book.ended.iter().find(|(ended, _)| ended == id) {
                Some((_, halted)) => halted.clone(),
                None if book.running.iter().any(|r| r.id == *id) => HaltedGoal { endpoint: *endpoint, how: format!("still running after {:.1} s: the stop was sent, the controller has not confirmed it", wait.as_secs_f64()) },
                None => HaltedGoal { endpoint: *endpoint, how: "the goal had ended".into() },
            })
            .collect()
    }

    /// The halt a goal of `joints` obeys, and how to hold them where they are.
    fn control(&self, joints: &[String], generation: u64) -> GoalControl {
        let (sensors, limits, joints, max_age) = (
            self.sensors.clone(),
            self.limits.clone(),
            joints.to_vec(),
            self.settings.start_max_age,
        );
        GoalControl {
            halt: self.halts.watch(generation),
            hold: Arc::new(move || hold_goal(sensors.as_ref(), &limits, &joints, max_age)),
        }
    }

    /// Hands a goal for `joints` of the motion begun in `generation` to the port
    /// (`port` sends it under the control given) and keeps it in the book
    /// while it runs. It enters the book before the last look at the
    /// halts: a stop either refuses it here or finds it in the book.
    fn send<T: Send + 'static>(
        &self,
        endpoint: Option<Endpoint>,
        joints: &[String],
        generation: u64,
        port: impl FnOnce(GoalControl) -> BoxFuture<'static, Result<T, PortError>>,
    ) -> Sent<T> {
        let id = self.next_goal.fetch_add(1, Ordering::SeqCst);
        self.book.send_modify(|book| book.running.push(Running { id, endpoint, generation }));
        let entry = BookEntry { book: self.book.clone(), id, endpoint };
        if self.halted_since(generation) {
            entry.end("refused: a stop came first".into());
            return Err(GoalRefused::Halted);
        }
        let sent = port(self.control(joints, generation));
        Ok(async move {
            let result = sent.await;
            let how = match &result {
                Err(error @ (PortError::Halted { .. } | PortError::HaltedBeforeSending { .. })) => {
                    error.to_string()
                }
                Err(error) => format!("ended: {error}"),
                Ok(_) => "finished before the stop reached it".to_string(),
            };
            entry.end(how);
            result
        }
        .boxed())
    }

    /// The action or topic behind a controller, for messages.
    pub fn endpoint(&self, endpoint: Endpoint) -> String {
        self.actuators.endpoint(endpoint)
    }
}

/// A goal's place in the book; leaves it when the goal ends or is dropped.
struct BookEntry {
    book: Arc<watch::Sender<GoalBook>>,
    id: u64,
    endpoint: Option<Endpoint>,
}

impl BookEntry {
    fn end(&self, how: String) {
        let (id, endpoint) = (self.id, self.endpoint);
        self.book.send_modify(|book| {
            if let Some(at) = book.running.iter().position(|r| r.id == id) {
                book.running.remove(at);
                if let Some(endpoint) = endpoint {
                    book.ended.push((id, HaltedGoal { endpoint, how }));
                    if book.ended.len() > ENDED_KEPT {
                        book.ended.remove(0);
                    }
                }
            }
        });
    }
}

impl Drop for BookEntry {
    fn drop(&mut self) {
        // Dropping a goal's future stops its controller (the port's promise).
        self.end("the call ended: the goal was cancelled".into());
    }
}

fn clamp_to(limits: &JointLimits, joint: &str, value: f64) -> f64 {
    limits.get(joint).map_or(value, |j| {
        value.clamp(j.lower.unwrap_or(f64::NEG_INFINITY), j.upper.unwrap_or(f64::INFINITY))
    })
}

/// A trajectory that holds `joints` where they are now: the latest joint
/// states (no older than `max_age`) carried forward by each joint's
/// velocity over their age, within the limits, at rest, at time 0 (a
/// trajectory controller holds there at once, as it does on a cancel).
pub fn hold_goal(
    sensors: &dyn SensorPort,
    limits: &JointLimits,
    joints: &[String],
    max_age: Duration,
) -> Result<TrajectoryGoal, String> {
    let topic = sensors.topic(Sensor::JointStates);
    let sample =
        sensors.joint_states().ok_or_else(|| format!("no joint states received on {topic}"))?;
    let age = sample.age(sensors.now()).effective();
    if age > max_age {
        return Err(format!("joint states on {topic} are {:.0} ms old (at most {:.0} ms to hold where the joints are)", age.as_secs_f64() * 1e3, max_age.as_secs_f64() * 1e3));
    }
    let mut positions = Vec::with_capacity(joints.len());
    for joint in joints {
        let index = sample
            .value
            .names
            .iter()
            .position(|n| n == joint)
            .ok_or_else(|| format!("joint {joint} is not reported on {topic}"))?;
        let position = sample
            .value
            .positions
            .get(index)
            .copied()
            .filter(|p| p.is_finite())
            .ok_or_else(|| format!("joint {joint} has no position on {topic}"))?;
        let velocity =
            sample.value.velocities.get(index).copied().filter(|v| v.is_finite()).unwrap_or(0.0);
        positions.push(clamp_to(limits, joint, position + velocity * age.as_secs_f64()));
    }
    let point = Waypoint {
        velocities: vec![0.0; joints.len()],
        positions,
        efforts: Vec::new(),
        time_s: 0.0,
    };
    Ok(TrajectoryGoal { joint_names: joints.to_vec(), points: vec![point] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robot::samples::SampleStore;
    use crate::robot::testing::{GoalMode, RecordingActuators};
    use crate::robot::{JointStates, Stamped};

    const URDF: &str = include_str!("../../../../urdf/aicc_bot.urdf");

    fn limits() -> Arc<JointLimits> {
        let accelerations: Vec<(String, f64)> =
            ["head_pan_joint", "head_tilt_joint", "joint1", "joint2", "joint3", "joint4"]
                .iter()
                .map(|j| (j.to_string(), 20.0))
                .chain([("gripper_left_joint".to_string(), 0.5)])
                .collect();
        Arc::new(
            JointLimits::from_urdf(URDF).unwrap().with_max_accelerations(&accelerations).unwrap(),
        )
    }

    fn settings() -> JointSettings {
        JointSettings {
            gripper_joint: "gripper_left_joint".into(),
            gripper_trajectory_joints: Vec::new(),
            start_max_age: Duration::from_millis(100),
            gripper_min_duration_s: 0.5,
        }
    }

    struct Rig {
        driver: JointDriver,
        actuators: Arc<RecordingActuators>,
        samples: Arc<SampleStore>,
        halts: Arc<Halts>,
    }

    fn rig(mode: GoalMode) -> Rig {
        let actuators = Arc::new(RecordingActuators::with_mode(mode));
        let samples = Arc::new(SampleStore::with_system_clock(Default::default()));
        let halts = Arc::new(Halts::default());
        let driver = JointDriver::new(
            actuators.clone(),
            samples.clone(),
            limits(),
            halts.clone(),
            settings(),
        );
        Rig { driver, actuators, samples, halts }
    }

    /// Joint states received `age` ago, stamped with no valid stamp (their age counts from receipt).
    fn measure(samples: &SampleStore, joints: &[(&str, f64, f64)], age: Duration) {
        let value = JointStates {
            names: joints.iter().map(|j| j.0.to_string()).collect(),
            positions: joints.iter().map(|j| j.1).collect(),
            velocities: joints.iter().map(|j| j.2).collect(),
            efforts: Vec::new(),
        };
        samples.lock().joint_states = Some(Stamped {
            value,
            frame_id: String::new(),
            stamp_s: 0.0,
            received: Instant::now() - age,
        });
    }

    fn head() -> Vec<String> {
        vec!["head_pan_joint".to_string(), "head_tilt_joint".to_string()]
    }

    #[tokio::test]
    async fn goals_within_the_limits_are_planned_from_fresh_joint_states_and_others_never_reach_the_controller(
    ) {
        let r = rig(GoalMode::Immediate);
        let g = r.driver.begin_motion();
        assert!(
            matches!(r.driver.move_joints(Controller::Head, &head(), &[0.3, 0.2], 1.5, 0.2, g), Err(GoalRefused::StartUnknown(ref m)) if m.contains("no joint states"))
        );
        measure(
            &r.samples,
            &[("head_pan_joint", 0.0, 0.0), ("head_tilt_joint", 0.0, 0.0)],
            Duration::from_millis(300),
        );
        let stale = r
            .driver
            .move_joints(Controller::Head, &head(), &[0.3, 0.2], 1.5, 0.2, g)
            .err()
            .unwrap();
        assert!(
            stale.to_string().contains("300 ms old")
                && stale.to_string().contains("at most 100 ms"),
            "{stale}"
        );
        measure(
            &r.samples,
            &[("head_pan_joint", 0.0, 0.0), ("head_tilt_joint", 0.0, 0.0)],
            Duration::from_millis(10),
        );
        let motion = r
            .driver
            .move_joints(Controller::Head, &head(), &[0.3, 0.2], 1.5, 0.2, g)
            .expect("within limits");
        assert_eq!(motion.start.positions(), [0.0, 0.0]);
        assert_eq!(motion.outcome.await.unwrap().error_code, 0);
        let sent = r.actuators.goals();
        assert_eq!(sent.len(), 1);
        assert!(
            sent[0].1.points.iter().all(|p| p.velocities.len() == 2),
            "waypoints carry velocities"
        );
        // Out of range, too fast from where the joints are, or without velocities: never sent.
        assert!(matches!(
            r.driver.move_joints(Controller::Head, &head(), &[0.3, 3.0], 1.5, 0.2, g),
            Err(GoalRefused::Limits(JointError::OutOfRange { .. }))
        ));
        let jump = TrajectoryGoal {
            joint_names: head(),
            points: vec![Waypoint {
                positions: vec![1.5, 0.0],
                velocities: vec![0.0, 0.0],
                efforts: Vec::new(),
                time_s: 0.01,
            }],
        };
        assert!(matches!(
            r.driver.follow(Controller::Head, jump, g),
            Err(GoalRefused::Limits(JointError::TooFast { .. }))
        ));
        measure(
            &r.samples,
            &[("head_pan_joint", 0.0, f64::NAN), ("head_tilt_joint", 0.0, 0.0)],
            Duration::from_millis(10),
        );
        assert!(
            matches!(r.driver.move_joints(Controller::Head, &head(), &[0.3, 0.2], 1.5, 0.2, g), Err(GoalRefused::StartUnknown(ref m)) if m.contains("velocity"))
        );
        assert_eq!(r.actuators.goals().len(), 1, "refused goals are never sent");
    }

    #[tokio::test]
    async fn a_gripper_goal_carries_a_planned_trajectory_and_its_effort_within_the_urdf_limits() {
        let r = rig(GoalMode::Immediate);
        let g = r.driver.begin_motion();
        measure(&r.samples, &[("gripper_left_joint", 0.03, 0.0)], Duration::from_millis(10));
        assert!(matches!(
            r.driver.gripper(0.5, 1.0, g),
            Err(GoalRefused::Limits(JointError::OutOfRange { .. }))
        ));
        assert!(matches!(
            r.driver.gripper(0.0, 1e6, g),
            Err(GoalRefused::Limits(JointError::EffortTooHigh { .. }))
        ));
        assert!(r.actuators.gripper_goals().is_empty());
        let motion = r.driver.gripper(0.0, 4.0, g).expect("within limits");
        motion.outcome.await.unwrap();
        let goal = &r.actuators.gripper_goals()[0];
        assert_eq!((goal.position_m, goal.max_effort_n), (0.0, 4.0));
        // 0.03 m at 0.05 m/s and 0.5 m/s^2: 0.7 s; every waypoint carries the effort.
        let end = goal.trajectory.points.last().unwrap();
        assert!((end.time_s - 0.7).abs() < 0.02, "{}", end.time_s);
        assert!(goal.trajectory.points.iter().all(|p| p.efforts == [4.0]));
    }

    #[tokio::test]
    async fn a_halt_cancels_running_goals_and_refuses_those_not_yet_sent_even_waiting_for_their_server(
    ) {
        // Goals run 5 s; an action server answers 200 ms after a goal is asked.
        let r = rig(GoalMode::Running {
            server_delay: Duration::from_millis(200),
            duration: Duration::from_secs(5),
        });
        measure(
            &r.samples,
            &[
                ("head_pan_joint", 0.0, 0.0),
                ("head_tilt_joint", 0.0, 0.0),
                ("joint1", 0.5, 1.2),
                ("joint2", 0.0, 0.0),
                ("joint3", 0.0, 0.0),
                ("joint4", 0.0, 0.0),
            ],
            Duration::ZERO,
        );
        let g = r.driver.begin_motion();
        let head_motion =
            r.driver.move_joints(Controller::Head, &head(), &[0.3, 0.2], 1.5, 0.2, g).unwrap();
        let head_run = tokio::spawn(head_motion.outcome);
        tokio::time::sleep(Duration::from_millis(250)).await;
        // The arm's goal is checked and on its way, waiting for its server, when the stop comes.
        let arm = ["joint1", "joint2", "joint3", "joint4"].map(String::from);
        measure(
            &r.samples,
            &[
                ("head_pan_joint", 0.1, 0.5),
                ("head_tilt_joint", 0.0, 0.0),
                ("joint1", 0.5, 0.0),
                ("joint2", 0.0, 0.0),
                ("joint3", 0.0, 0.0),
                ("joint4", 0.0, 0.0),
            ],
            Duration::ZERO,
        );
        let arm_motion = r
            .driver
            .move_joints(Controller::Arm, &arm, &[1.0, 0.0, 0.0, 0.0], 1.0, 0.5, g)
            .unwrap();
        let arm_run = tokio::spawn(arm_motion.outcome);
        tokio::time::sleep(Duration::from_millis(50)).await;
        r.halts.raise();
        let halted = r.driver.settle_halt(Duration::from_secs(1)).await;
        assert_eq!(halted.len(), 2, "{halted:?}");
        let head_end = head_run.await.unwrap().unwrap_err();
        assert!(matches!(head_end, PortError::Halted { .. }), "{head_end}");
        let arm_end = arm_run.await.unwrap().unwrap_err();
        assert!(matches!(arm_end, PortError::HaltedBeforeSending { .. }), "{arm_end}");
        let head_report = halted.iter().find(|h| h.endpoint == Endpoint::Head).unwrap();
        assert!(head_report.how.contains("stopped by a stop"), "{head_report:?}");
        assert!(
            halted
                .iter()
                .any(|h| h.endpoint == Endpoint::Arm && h.how.contains("nothing was sent")),
            "{halted:?}"
        );
        // The head was cancelled where it was; the arm's goal never went out.
        assert_eq!(r.actuators.cancelled(), vec![Controller::Head]);
        assert_eq!(r.actuators.goals().iter().filter(|(c, _)| *c == Controller::Arm).count(), 0);
        // Nothing new from before the halt goes out; a motion begun after it does.
        assert_eq!(
            r.driver.move_joints(Controller::Head, &head(), &[0.0, 0.0], 1.0, 0.2, g).err(),
            Some(GoalRefused::Halted)
        );
        assert_eq!(r.driver.gripper(0.0, 1.0, g).err(), Some(GoalRefused::Halted));
        assert!(r
            .driver
            .move_joints(Controller::Head, &head(), &[0.0, 0.0], 1.0, 0.2, r.driver.begin_motion())
            .is_ok());
        // A halt with nothing in flight has nothing to report.
        r.halts.raise();
        assert!(r.driver.settle_halt(Duration::from_secs(1)).await.is_empty());
    }

    #[test]
    fn a_hold_is_where_the_joints_are_now_within_the_limits_at_time_zero() {
        let r = rig(GoalMode::Immediate);
        let joints = ["joint1".to_string(), "head_tilt_joint".to_string()];
        assert!(
            hold_goal(r.samples.as_ref(), &limits(), &joints, Duration::from_millis(100)).is_err(),
            "no joint states: no hold"
        );
        // Measured 50 ms ago at 0.5 rad moving 2 rad/s: now at 0.6 rad. The tilt reads above its limit: held at it.
        measure(
            &r.samples,
            &[("joint1", 0.5, 2.0), ("head_tilt_joint", 1.21, 0.0)],
            Duration::from_millis(50),
        );
        let hold =
            hold_goal(r.samples.as_ref(), &limits(), &joints, Duration::from_millis(100)).unwrap();
        let point = &hold.points[0];
        assert!((point.positions[0] - 0.6).abs() < 0.01, "{:?}", point.positions);
        assert_eq!(
            (point.positions[1], point.velocities.clone(), point.time_s),
            (1.2, vec![0.0, 0.0], 0.0)
        );
        measure(
            &r.samples,
            &[("joint1", 0.5, 2.0), ("head_tilt_joint", 0.0, 0.0)],
            Duration::from_millis(300),
        );
        assert!(hold_goal(r.samples.as_ref(), &limits(), &joints, Duration::from_millis(100))
            .unwrap_err()
            .contains("300 ms old"));
    }
}
