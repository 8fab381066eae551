//! Outcomes of goals sent on a controller's JointTrajectory topic, which
//! has no result: judged from joint_states on the node's clock, so that a
//! tool's result has the same shape as with the action. A goal succeeds
//! once the trajectory's time has passed and every joint is within the
//! tolerance of its last point; it fails (GOAL_TOLERANCE_VIOLATED, naming
//! each joint and its error) when that has not happened by the end plus
//! the margin. A gripper goal ends like gripper_action_controller's: at the
//! position (reached_goal), or stopped short of it by the deadline
//! (stalled: holding something), or still moving (neither).
//!
//! Pure: the ROS adapter polls [`TrajectoryJudge::judge`] with the latest
//! joint states and the node's time.
use super::{GripperOutcome, JointStates, TrajectoryGoal, TrajectoryOutcome};

/// control_msgs/FollowJointTrajectory GOAL_TOLERANCE_VIOLATED.
pub(crate) const GOAL_TOLERANCE_VIOLATED: i32 = -5;
/// A gripper joint slower than this (m/s) has stopped moving.
pub(crate) const GRIPPER_STALL_SPEED_MPS: f64 = 0.002;

/// A trajectory goal on its way, judged from joint states.
#[derive(Debug, Clone, PartialEq)]
pub struct TrajectoryJudge {
    joints: Vec<String>,
    targets: Vec<f64>,
    tolerance: f64,
    /// When the trajectory ends, node clock seconds.
    end_s: f64,
    /// When the goal has failed if not reached, node clock seconds.
    deadline_s: f64,
}

impl TrajectoryJudge {
    /// A goal sent at `start_s` (node clock), its last point to be reached
    /// within `tolerance` (joint units) by its time plus `margin_s`.
    pub fn new(goal: &TrajectoryGoal, start_s: f64, tolerance: f64, margin_s: f64) -> Self {
        let (targets, duration_s) = goal
            .points
            .last()
            .map_or((Vec::new(), 0.0), |point| (point.positions.clone(), point.time_s));
        let end_s = start_s + duration_s.max(0.0);
        Self {
            joints: goal.joint_names.clone(),
            targets,
            tolerance,
            end_s,
            deadline_s: end_s + margin_s,
        }
    }

    /// The outcome at `now_s` given the latest `states`; None while the
    /// goal is still under way.
    pub fn judge(&self, now_s: f64, states: Option<&JointStates>) -> Option<TrajectoryOutcome> {
        if now_s < self.end_s {
            return None;
        }
        let errors = self.errors(states);
        let reached =
            errors.iter().all(|(_, error)| error.is_some_and(|e| e.abs() <= self.tolerance));
        if reached {
            return Some(TrajectoryOutcome { error_code: 0, error_string: String::new() });
        }
        if now_s < self.deadline_s {
            return None;
        }
        let listed: Vec<String> = errors
            .iter()
            .filter(|(_, error)| !error.is_some_and(|e| e.abs() <= self.tolerance))
            .map(|(joint, error)| match error {
                Some(e) => format!("{joint} off by {e:+.4}"),
                None => format!("{joint} not in joint_states"),
            })
            .collect();
        Some(TrajectoryOutcome {
            error_code: GOAL_TOLERANCE_VIOLATED,
            error_string: format!(
                "timed out: not within {} of the goal {:.2} s after the trajectory's end (sent on the topic, judged from joint_states): {}",
                self.tolerance,
                self.deadline_s - self.end_s,
                listed.join(", ")
            ),
        })
    }

    /// Each joint's error (measured minus goal), None where joint_states
    /// has no position for it.
    fn errors(&self, states: Option<&JointStates>) -> Vec<(&str, Option<f64>)> {
        self.joints
            .iter()
            .zip(&self.targets)
            .map(|(joint, target)| {
                (
                    joint.as_str(),
                    states
                        .and_then(|s| s.position(joint))
                        .filter(|p| p.is_finite())
                        .map(|p| p - target),
                )
            })
            .collect()
    }
}

/// A gripper goal sent as a trajectory of its finger joint.
#[derive(Debug, Clone, PartialEq)]
pub struct GripperJudge {
    joint: String,
    target_m: f64,
    tolerance_m: f64,
    end_s: f64,
    deadline_s: f64,
}

/// Why a gripper goal could not be judged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{joint} is not in joint_states: the gripper's outcome cannot be judged")]
pub struct NoGripperState {
    pub joint: String,
}

impl GripperJudge {
    /// `joint` to be at `target_m` within `tolerance_m` by `start_s +
    /// duration_s + margin_s`.
    pub fn new(
        joint: &str,
        target_m: f64,
        start_s: f64,
        duration_s: f64,
        tolerance_m: f64,
        margin_s: f64,
    ) -> Self {
        let end_s = start_s + duration_s.max(0.0);
        Self {
            joint: joint.to_string(),
            target_m,
            tolerance_m,
            end_s,
            deadline_s: end_s + margin_s,
        }
    }

    /// The outcome at `now_s` given the latest `states`; None while under way.
    pub fn judge(
        &self,
        now_s: f64,
        states: Option<&JointStates>,
    ) -> Option<Result<GripperOutcome, NoGripperState>> {
        if now_s < self.end_s {
            return None;
        }
        let index = states.and_then(|s| s.names.iter().position(|n| *n == self.joint));
        let position = index
            .and_then(|i| states.and_then(|s| s.positions.get(i).copied()))
            .filter(|p| p.is_finite());
        let Some(position_m) = position else {
            return (now_s >= self.deadline_s)
                .then(|| Err(NoGripperState { joint: self.joint.clone() }));
        };
        let field = |values: fn(&JointStates) -> &Vec<f64>| {
            index
                .and_then(|i| states.and_then(|s| values(s).get(i).copied()))
                .filter(|v| v.is_finite())
        };
        let effort_n = field(|s| &s.efforts).unwrap_or(0.0);
        let reached_goal = (position_m - self.target_m).abs() <= self.tolerance_m;
        if !reached_goal && now_s < self.deadline_s {
            return None;
        }
        let stalled = !reached_goal
            && field(|s| &s.velocities).is_some_and(|v| v.abs() < GRIPPER_STALL_SPEED_MPS);
        Some(Ok(GripperOutcome { position_m, effort_n, stalled, reached_goal }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(names: &[&str], positions: &[f64], velocities: &[f64]) -> JointStates {
        JointStates {
            names: names.iter().map(|n| n.to_string()).collect(),
            positions: positions.to_vec(),
            velocities: velocities.to_vec(),
            efforts: vec![0.5; names.len()],
        }
    }

    fn goal() -> TrajectoryGoal {
        let point = |positions: Vec<f64>, time_s: f64| crate::robot::Waypoint {
            positions,
            velocities: vec![0.0, 0.0],
            efforts: Vec::new(),
            time_s,
        };
        TrajectoryGoal {
            joint_names: vec!["pan".into(), "tilt".into()],
            points: vec![point(vec![0.2, 0.1], 1.0), point(vec![0.4, -0.2], 2.0)],
        }
    }

    #[test]
    fn a_trajectory_succeeds_once_its_time_has_passed_and_the_joints_are_at_its_last_point() {
        let judge = TrajectoryJudge::new(&goal(), 10.0, 0.05, 1.0);
        let at_goal = states(&["tilt", "pan", "other"], &[-0.18, 0.43, 5.0], &[]);
        // At the goal early (a trajectory that returns to its start) is not done yet.
        assert_eq!(judge.judge(11.9, Some(&at_goal)), None);
        assert_eq!(
            judge.judge(12.0, Some(&at_goal)),
            Some(TrajectoryOutcome { error_code: 0, error_string: String::new() })
        );
        // Late but within the margin: still waiting, then reached.
        let late = states(&["pan", "tilt"], &[0.3, -0.2], &[]);
        assert_eq!(judge.judge(12.5, Some(&late)), None);
        assert_eq!(judge.judge(12.9, Some(&at_goal)).unwrap().error_code, 0);
    }

    #[test]
    fn a_trajectory_not_reached_by_its_end_plus_the_margin_fails_naming_each_joint_and_its_error() {
        let judge = TrajectoryJudge::new(&goal(), 10.0, 0.05, 1.0);
        let short = states(&["pan", "tilt"], &[0.1, -0.19], &[]);
        let outcome = judge.judge(13.0, Some(&short)).expect("deadline passed");
        assert_eq!(outcome.error_code, GOAL_TOLERANCE_VIOLATED);
        assert!(outcome.error_string.starts_with("timed out"), "{}", outcome.error_string);
        assert!(outcome.error_string.contains("pan off by -0.3000"), "{}", outcome.error_string);
        assert!(
            !outcome.error_string.contains("tilt"),
            "tilt is within tolerance: {}",
            outcome.error_string
        );
        // A joint missing from joint_states (or no joint states at all) is never "reached".
        let missing = judge.judge(13.0, Some(&states(&["pan"], &[0.4], &[]))).unwrap();
        assert!(
            missing.error_string.contains("tilt not in joint_states"),
            "{}",
            missing.error_string
        );
        assert_eq!(judge.judge(13.0, None).unwrap().error_code, GOAL_TOLERANCE_VIOLATED);
        let nan =
            judge.judge(13.0, Some(&states(&["pan", "tilt"], &[f64::NAN, -0.2], &[]))).unwrap();
        assert!(nan.error_string.contains("pan not in joint_states"), "{}", nan.error_string);
    }

    #[test]
    fn a_gripper_goal_reaches_stalls_or_fails_like_the_gripper_action() {
        let judge = GripperJudge::new("finger", 0.01, 0.0, 1.0, 0.002, 1.0);
        assert_eq!(
            judge.judge(0.5, Some(&states(&["finger"], &[0.0101], &[0.0]))),
            None,
            "before its time"
        );
        let reached =
            judge.judge(1.0, Some(&states(&["finger"], &[0.0101], &[0.0]))).unwrap().unwrap();
        assert_eq!(
            (reached.reached_goal, reached.stalled, reached.position_m, reached.effort_n),
            (true, false, 0.0101, 0.5)
        );
        // Short of the goal: wait until the deadline, then stalled if it stopped moving (an object between the fingers).
        let blocked = states(&["finger"], &[0.004], &[0.0]);
        assert_eq!(judge.judge(1.5, Some(&blocked)), None);
        let stalled = judge.judge(2.0, Some(&blocked)).unwrap().unwrap();
        assert_eq!((stalled.reached_goal, stalled.stalled), (false, true));
        let moving =
            judge.judge(2.0, Some(&states(&["finger"], &[0.004], &[0.01]))).unwrap().unwrap();
        assert_eq!((moving.reached_goal, moving.stalled), (false, false));
        // Without velocities a stall cannot be told: neither.
        let unknown = judge.judge(2.0, Some(&states(&["finger"], &[0.004], &[]))).unwrap().unwrap();
        assert_eq!((unknown.reached_goal, unknown.stalled), (false, false));
        // No state for the joint: wait, then an error naming it.
        assert_eq!(judge.judge(1.5, None), None);
        assert_eq!(judge.judge(2.0, None), Some(Err(NoGripperState { joint: "finger".into() })));
    }
}
