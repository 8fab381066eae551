//! A robot without ROS, for tests and benchmarks: sensors are a
//! [`SampleStore`] the test fills; actuators and signals record what they
//! were asked and report success at once (or, for joint goals, run for a
//! while on virtual time and obey halts: [`GoalMode`]). It moves nothing, so tests of
//! motion use the simulator (the tests in `tests/` at the top) or the motion
//! controller's own model; these serve the protocol, the tools' input and
//! error paths, and the governed drivers' checks.
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::names::Names;
use super::port::{ActuatorPort, Endpoint, GoalControl, PortError, Robot, SignalPort};
use super::samples::SampleStore;
use super::{
    Controller, Diagnostic, GripperGoal, GripperOutcome, TrajectoryGoal, TrajectoryOutcome,
};
use crate::config::Config;
use crate::governor::BaseVelocity;

/// How the recording robot's controllers answer a goal.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum GoalMode {
    /// Every goal succeeds at once.
    #[default]
    Immediate,
    /// The action server answers after `server_delay` (the goal is sent
    /// then), and the goal runs for `duration` (virtual time in tests);
    /// a halt is obeyed as the port promises.
    Running { server_delay: Duration, duration: Duration },
}

/// Records every command; goals succeed at once or run (see [`GoalMode`]).
#[derive(Default)]
pub struct RecordingActuators {
    velocities: Mutex<Vec<BaseVelocity>>,
    goals: Arc<Mutex<Vec<(Controller, TrajectoryGoal)>>>,
    gripper_goals: Mutex<Vec<GripperGoal>>,
    cancelled: Arc<Mutex<Vec<Controller>>>,
    mode: GoalMode,
    names: Names,
    /// What [`ActuatorPort::base_output_unavailable`] says (None: commands go out).
    base_output: Mutex<Option<PortError>>,
}

impl RecordingActuators {
    pub fn with_names(names: Names) -> Self {
        Self { names, ..Self::default() }
    }

    pub fn with_mode(mode: GoalMode) -> Self {
        Self { mode, ..Self::default() }
    }

    /// Makes base velocity undeliverable (`Some`) or deliverable again:
    /// what a robot whose cmd_vel type does not match looks like. Commands
    /// published meanwhile are still recorded (the port's promise is that
    /// motion is refused before them; a test checks it).
    pub fn set_base_output_unavailable(&self, why: Option<PortError>) {
        *self.base_output.lock() = why;
    }

    /// Every base velocity published, oldest first.
    pub fn velocities(&self) -> Vec<BaseVelocity> {
        self.velocities.lock().clone()
    }

    /// Every trajectory goal sent (not those a halt refused), oldest first.
    pub fn goals(&self) -> Vec<(Controller, TrajectoryGoal)> {
        self.goals.lock().clone()
    }

    /// Every gripper goal sent, oldest first.
    pub fn gripper_goals(&self) -> Vec<GripperGoal> {
        self.gripper_goals.lock().clone()
    }

    /// The controllers whose running goal a halt cancelled, in order.
    pub fn cancelled(&self) -> Vec<Controller> {
        self.cancelled.lock().clone()
    }
}

impl ActuatorPort for RecordingActuators {
    fn publish_base_velocity(&self, velocity: BaseVelocity) {
        self.velocities.lock().push(velocity);
    }

    fn base_output_unavailable(&self) -> Option<PortError> {
        self.base_output.lock().clone()
    }

    fn follow_trajectory(
        &self,
        controller: Controller,
        goal: TrajectoryGoal,
        control: GoalControl,
    ) -> BoxFuture<'static, Result<TrajectoryOutcome, PortError>> {
        let name = self.names.endpoint(controller.into()).to_string();
        let done = TrajectoryOutcome { error_code: 0, error_string: String::new() };
        match self.mode {
            GoalMode::Immediate => {
                if control.halt.halted() {
                    return Box::pin(async move { Err(PortError::HaltedBeforeSending { name }) });
                }
                self.goals.lock().push((controller, goal));
                Box::pin(async move { Ok(done) })
            }
            GoalMode::Running { server_delay, duration } => {
                let (goals, cancelled) = (self.goals.clone(), self.cancelled.clone());
                Box::pin(async move {
                    tokio::select! {
                        _ = tokio::time::sleep(server_delay) => {}
                        _ = control.halt.wait() => return Err(PortError::HaltedBeforeSending { name }),
                    }
                    goals.lock().push((controller, goal));
                    tokio::select! {
                        _ = tokio::time::sleep(duration) => Ok(done),
                        _ = control.halt.wait() => {
                            cancelled.lock().push(controller);
                            Err(PortError::Halted { name, how: "goal cancelled".into() })
                        }
                    }
                })
            }
        }
    }

    fn gripper_command(
        &self,
        goal: GripperGoal,
        control: GoalControl,
    ) -> BoxFuture<'static, Result<GripperOutcome, PortError>> {
        if control.halt.halted() {
            let name = self.names.endpoint(Endpoint::Gripper).to_string();
            return Box::pin(async move { Err(PortError::HaltedBeforeSending { name }) });
        }
        let position_m = goal.position_m;
        self.gripper_goals.lock().push(goal);
        Box::pin(async move {
            Ok(GripperOutcome { position_m, effort_n: 0.0, stalled: false, reached_goal: true })
        })
    }

    fn endpoint(&self, endpoint: Endpoint) -> String {
        self.names.endpoint(endpoint).to_string()
    }
}

/// Records speech and diagnostics.
#[derive(Default)]
pub struct RecordingSignals {
    said: Mutex<Vec<String>>,
    diagnostics: Mutex<Vec<Diagnostic>>,
    world_commands: Mutex<Vec<String>>,
    names: Names,
}

impl RecordingSignals {
    pub fn said(&self) -> Vec<String> {
        self.said.lock().clone()
    }

    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.diagnostics.lock().clone()
    }

    /// Every world command published (JSON), oldest first.
    pub fn world_commands(&self) -> Vec<String> {
        self.world_commands.lock().clone()
    }
}

impl SignalPort for RecordingSignals {
    fn say(&self, text: &str) -> Result<(), PortError> {
        self.said.lock().push(text.to_string());
        Ok(())
    }

    fn say_topic(&self) -> String {
        self.names.say().to_string()
    }

    fn publish_diagnostics(&self, diagnostics: &[Diagnostic]) {
        self.diagnostics.lock().extend_from_slice(diagnostics);
    }

    fn world_command(&self, command: &str) -> Result<(), PortError> {
        if self.names.world().is_empty() {
            return Err(PortError::NotConfigured { what: "world topic".into() });
        }
        self.world_commands.lock().push(command.to_string());
        Ok(())
    }

    fn world_topic(&self) -> String {
        self.names.world().to_string()
    }
}

/// A test robot named after `config`, and its parts for the test to fill
/// and inspect.
pub struct TestRobot {
    pub robot: Robot,
    pub samples: Arc<SampleStore>,
    pub actuators: Arc<RecordingActuators>,
    pub signals: Arc<RecordingSignals>,
}

impl TestRobot {
    pub fn new(config: &Config) -> Self {
        let names = Names::from_config(config);
        let samples = Arc::new(SampleStore::with_system_clock(names.clone()));
        let actuators = Arc::new(RecordingActuators::with_names(names.clone()));
        let signals = Arc::new(RecordingSignals { names, ..RecordingSignals::default() });
        let robot = Robot {
            sensors: samples.clone(),
            actuators: actuators.clone(),
            signals: signals.clone(),
        };
        Self { robot, samples, actuators, signals }
    }
}
