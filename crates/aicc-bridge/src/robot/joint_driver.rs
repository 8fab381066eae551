//! The one way to the head, arm and gripper controllers: every goal is
//! checked against the URDF joint limits (positions, speed from where the
//! joints are, effort) before it is sent, and a goal that breaks one is
//! refused with nothing sent. Tools plan their motions; this driver makes
//! sure no plan can bypass the limits.
use std::sync::Arc;

use futures::future::BoxFuture;

use super::halt::Halts;
use super::port::{ActuatorPort, Endpoint, PortError};
use super::{Controller, GripperOutcome, TrajectoryGoal, TrajectoryOutcome};
use crate::governor::{JointError, JointLimits};

pub struct JointDriver {
    actuators: Arc<dyn ActuatorPort>,
    limits: Arc<JointLimits>,
    halts: Arc<Halts>,
    /// The joint the gripper command positions.
    gripper_joint: String,
}

/// A goal on its way to a controller, or why it was not sent.
pub type Sent<T> = Result<BoxFuture<'static, Result<T, PortError>>, JointError>;

impl JointDriver {
    pub fn new(actuators: Arc<dyn ActuatorPort>, limits: Arc<JointLimits>, halts: Arc<Halts>, gripper_joint: String) -> Self {
        Self { actuators, limits, halts, gripper_joint }
    }

    /// The URDF limits this driver enforces.
    pub fn limits(&self) -> &JointLimits {
        &self.limits
    }

    /// `value` brought within the limits of `joint` (for a measured
    /// position that is to be held: sensors may read slightly outside).
    pub fn clamp_to_limits(&self, joint: &str, value: f64) -> f64 {
        self.limits.get(joint).map_or(value, |j| value.clamp(j.lower.unwrap_or(f64::NEG_INFINITY), j.upper.unwrap_or(f64::INFINITY)))
    }

    /// The stop generation a joint motion begins in.
    pub fn begin_motion(&self) -> u64 {
        self.halts.current()
    }

    /// Whether a `stop` came after the motion begun as `generation`.
    pub fn halted_since(&self, generation: u64) -> bool {
        self.halts.since(generation)
    }

    /// Sends `goal` to `controller` once it passes the limits; `start`: the
    /// measured positions the motion starts from (its first segment's
    /// speed is checked from them), None for a hold where the joints are.
    pub fn follow(&self, controller: Controller, goal: TrajectoryGoal, start: Option<&[f64]>) -> Sent<TrajectoryOutcome> {
        self.limits.check_trajectory(&goal.joint_names, &goal.points, start)?;
        Ok(self.actuators.follow_trajectory(controller, goal))
    }

    /// Sends a gripper goal once its position and effort pass the limits of
    /// the gripper joint.
    pub fn gripper(&self, position_m: f64, max_effort_n: f64) -> Sent<GripperOutcome> {
        self.limits.check_position(&self.gripper_joint, position_m)?;
        self.limits.check_effort(&self.gripper_joint, max_effort_n)?;
        Ok(self.actuators.gripper_command(position_m, max_effort_n))
    }

    /// The action behind a controller, for messages.
    pub fn endpoint(&self, endpoint: Endpoint) -> String {
        self.actuators.endpoint(endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robot::testing::RecordingActuators;

    const URDF: &str = include_str!("../../../../urdf/aicc_bot.urdf");

    fn driver() -> (JointDriver, Arc<RecordingActuators>) {
        let actuators = Arc::new(RecordingActuators::default());
        let limits = Arc::new(JointLimits::from_urdf(URDF).unwrap());
        (JointDriver::new(actuators.clone(), limits, Arc::new(Halts::default()), "gripper_left_joint".into()), actuators)
    }

    #[tokio::test]
    async fn goals_within_the_limits_are_sent_and_others_never_reach_the_controller() {
        let (driver, actuators) = driver();
        let head = vec!["head_pan_joint".to_string(), "head_tilt_joint".to_string()];
        let ok = TrajectoryGoal { joint_names: head.clone(), points: vec![(vec![0.3, 0.2], 1.0)] };
        let outcome = driver.follow(Controller::Head, ok.clone(), Some(&[0.0, 0.0])).expect("within limits").await.unwrap();
        assert_eq!(outcome.error_code, 0);
        assert_eq!(actuators.goals(), vec![(Controller::Head, ok)]);
        let out_of_range = TrajectoryGoal { joint_names: head.clone(), points: vec![(vec![0.3, 3.0], 5.0)] };
        assert!(matches!(driver.follow(Controller::Head, out_of_range, None), Err(JointError::OutOfRange { .. })));
        let too_fast = TrajectoryGoal { joint_names: head, points: vec![(vec![1.5, 0.0], 0.01)] };
        assert!(matches!(driver.follow(Controller::Head, too_fast, Some(&[0.0, 0.0])), Err(JointError::TooFast { .. })));
        assert!(matches!(driver.gripper(0.5, 1.0), Err(JointError::OutOfRange { .. })));
        assert!(matches!(driver.gripper(0.0, 1e6), Err(JointError::EffortTooHigh { .. })));
        assert_eq!(actuators.goals().len(), 1, "refused goals are never sent");
        assert!(actuators.gripper_goals().is_empty());
        driver.gripper(0.0, 1.0).expect("within limits").await.unwrap();
        assert_eq!(actuators.gripper_goals(), vec![(0.0, 1.0)]);
    }

    #[test]
    fn measured_positions_are_clamped_into_the_limits_for_holding() {
        let (driver, _) = driver();
        let upper = driver.limits().get("head_tilt_joint").unwrap().upper.unwrap();
        assert_eq!(driver.clamp_to_limits("head_tilt_joint", upper + 0.01), upper);
        assert_eq!(driver.clamp_to_limits("head_tilt_joint", 0.1), 0.1);
        assert_eq!(driver.clamp_to_limits("no_such_joint", 7.0), 7.0);
    }
}
