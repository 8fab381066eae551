//! A robot without ROS, for tests and benchmarks: sensors are a
//! [`SampleStore`] the test fills; actuators and signals record what they
//! were asked and report success at once. It moves nothing, so tests of
//! motion use the simulator (crate `aicc-sim-tests`) or the motion
//! controller's own model; these serve the protocol, the tools' input and
//! error paths, and the governed drivers' checks.
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;

use super::names::Names;
use super::port::{ActuatorPort, Endpoint, PortError, Robot, SignalPort};
use super::samples::SampleStore;
use super::{Controller, Diagnostic, GripperOutcome, TrajectoryGoal, TrajectoryOutcome};
use crate::config::Config;
use crate::governor::BaseVelocity;

/// Records every command; trajectories and gripper goals succeed at once.
#[derive(Default)]
pub struct RecordingActuators {
    velocities: Mutex<Vec<BaseVelocity>>,
    goals: Mutex<Vec<(Controller, TrajectoryGoal)>>,
    gripper_goals: Mutex<Vec<(f64, f64)>>,
    names: Names,
}

impl RecordingActuators {
    pub fn with_names(names: Names) -> Self {
        Self { names, ..Self::default() }
    }

    /// Every base velocity published, oldest first.
    pub fn velocities(&self) -> Vec<BaseVelocity> {
        self.velocities.lock().clone()
    }

    pub fn goals(&self) -> Vec<(Controller, TrajectoryGoal)> {
        self.goals.lock().clone()
    }

    /// (position_m, max_effort_n) of every gripper goal.
    pub fn gripper_goals(&self) -> Vec<(f64, f64)> {
        self.gripper_goals.lock().clone()
    }
}

impl ActuatorPort for RecordingActuators {
    fn publish_base_velocity(&self, velocity: BaseVelocity) {
        self.velocities.lock().push(velocity);
    }

    fn follow_trajectory(&self, controller: Controller, goal: TrajectoryGoal) -> BoxFuture<'static, Result<TrajectoryOutcome, PortError>> {
        self.goals.lock().push((controller, goal));
        Box::pin(async { Ok(TrajectoryOutcome { error_code: 0, error_string: String::new() }) })
    }

    fn gripper_command(&self, position_m: f64, max_effort_n: f64) -> BoxFuture<'static, Result<GripperOutcome, PortError>> {
        self.gripper_goals.lock().push((position_m, max_effort_n));
        Box::pin(async move { Ok(GripperOutcome { position_m, effort_n: 0.0, stalled: false, reached_goal: true }) })
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
        let robot = Robot { sensors: samples.clone(), actuators: actuators.clone(), signals: signals.clone() };
        Self { robot, samples, actuators, signals }
    }
}
