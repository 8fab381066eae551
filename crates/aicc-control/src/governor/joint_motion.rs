//! Joint motions within the limits: the check every trajectory passes
//! before it reaches a controller, and the plan the joint tools send.
//!
//! A trajectory is a list of waypoints with positions AND velocities: a
//! trajectory controller (ros2_control's joint_trajectory_controller, the
//! simulator's) then joins them with cubic splines, whose velocity and
//! acceleration are known everywhere, so the check bounds them exactly
//! (position-only waypoints are joined linearly: the velocity jumps at
//! every waypoint, an unbounded acceleration, and are refused). The first
//! segment starts where the joints are measured to be, at their measured
//! velocity: the controller starts the trajectory from its current state.
//!
//! Pure functions over plain structs: property-tested below.
use super::joints::{JointError, JointLimit, JointLimits};

/// One waypoint: positions and velocities (one per joint), optional
/// efforts (force or torque limits; empty: none), reached `time_s` after
/// the trajectory starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Waypoint {
    pub positions: Vec<f64>,
    pub velocities: Vec<f64>,
    pub efforts: Vec<f64>,
    pub time_s: f64,
}

/// Where the joints are when a trajectory starts (measured): positions
/// and velocities, one per joint.
#[derive(Debug, Clone, PartialEq)]
pub struct JointMotionState {
    pub positions: Vec<f64>,
    pub velocities: Vec<f64>,
}

/// The largest |velocity| and |acceleration| of the cubic spline from
/// (`q0`, `v0`) to (`q1`, `v1`) over `duration_s` (cubic Hermite, as a
/// trajectory controller interpolates waypoints with velocities).
pub fn spline_peaks(q0: f64, v0: f64, q1: f64, v1: f64, duration_s: f64) -> (f64, f64) {
    let h = duration_s;
    let d = q1 - q0;
    // Velocity in s = t / h: v(s) = a s^2 + b s + v0; acceleration (2 a s + b) / h.
    let a = -6.0 * d / h + 3.0 * v0 + 3.0 * v1;
    let b = 6.0 * d / h - 4.0 * v0 - 2.0 * v1;
    let mut peak_velocity = v0.abs().max(v1.abs());
    if a != 0.0 {
        let s = -b / (2.0 * a);
        if s > 0.0 && s < 1.0 {
            peak_velocity = peak_velocity.max((a * s * s + b * s + v0).abs());
        }
    }
    let peak_acceleration = b.abs().max((2.0 * a + b).abs()) / h;
    (peak_velocity, peak_acceleration)
}

/// The limits of `joint` and of every joint that mimics it, scaled to the
/// leader: (largest velocity, largest acceleration).
fn leader_limits(limits: &JointLimits, joint: &JointLimit) -> Result<(f64, f64), JointError> {
    let mut velocity = joint.max_velocity;
    let mut acceleration = joint
        .max_acceleration
        .ok_or_else(|| JointError::NoAccelerationLimit { joint: joint.name.clone() })?;
    for follower in limits.followers(&joint.name) {
        let multiplier = follower.mimic.as_ref().map_or(1.0, |m| m.multiplier.abs());
        if multiplier > 0.0 {
            velocity = velocity.min(follower.max_velocity / multiplier);
            let follower_acceleration = follower
                .max_acceleration
                .ok_or_else(|| JointError::NoAccelerationLimit { joint: follower.name.clone() })?;
            acceleration = acceleration.min(follower_acceleration / multiplier);
        }
    }
    Ok((velocity, acceleration))
}

fn malformed(text: String) -> JointError {
    JointError::MalformedTrajectory(text)
}

impl JointLimits {
    /// Accepts a trajectory for `joints` starting from `start` if: every
    /// waypoint gives a position and a velocity per joint (efforts
    /// optional), at strictly increasing times; every position is within
    /// the limits (joints that mimic one included); every effort within the
    /// effort limit; no spline segment (the first from `start`) exceeds a
    /// joint's velocity or acceleration limit; and the last waypoint is at
    /// rest.
    pub fn check_trajectory(
        &self,
        joints: &[String],
        points: &[Waypoint],
        start: &JointMotionState,
    ) -> Result<(), JointError> {
        if points.is_empty() {
            return Err(malformed("no waypoints".into()));
        }
        if start.positions.len() != joints.len() || start.velocities.len() != joints.len() {
            return Err(malformed(format!(
                "{} start positions and {} start velocities for {} joints",
                start.positions.len(),
                start.velocities.len(),
                joints.len()
            )));
        }
        let limits: Vec<&JointLimit> =
            joints.iter().map(|name| self.joint(name)).collect::<Result<_, _>>()?;
        for (joint, (position, velocity)) in
            limits.iter().zip(start.positions.iter().zip(&start.velocities))
        {
            for (field, value) in [("start position", position), ("start velocity", velocity)] {
                if !value.is_finite() {
                    return Err(JointError::NotFinite {
                        joint: joint.name.clone(),
                        field,
                        value: *value,
                    });
                }
            }
        }
        let mut previous = (&start.positions, &start.velocities, 0.0);
        for (index, point) in points.iter().enumerate() {
            if point.positions.len() != joints.len() {
                return Err(malformed(format!(
                    "waypoint {index} has {} positions for {} joints",
                    point.positions.len(),
                    joints.len()
                )));
            }
            if point.velocities.len() != joints.len() {
                return Err(malformed(format!(
                    "waypoint {index} has {} velocities for {} joints: without them the controller joins waypoints linearly, with an unbounded acceleration",
                    point.velocities.len(),
                    joints.len()
                )));
            }
            if !point.efforts.is_empty() && point.efforts.len() != joints.len() {
                return Err(malformed(format!(
                    "waypoint {index} has {} efforts for {} joints",
                    point.efforts.len(),
                    joints.len()
                )));
            }
            if !(point.time_s.is_finite() && point.time_s > previous.2) {
                return Err(malformed(format!(
                    "waypoint {index} at {} s does not come after the one before",
                    point.time_s
                )));
            }
            let duration_s = point.time_s - previous.2;
            for (j, joint) in limits.iter().enumerate() {
                self.check_position(&joint.name, point.positions[j])?;
                let velocity = point.velocities[j];
                if !velocity.is_finite() {
                    return Err(JointError::NotFinite {
                        joint: joint.name.clone(),
                        field: "velocity",
                        value: velocity,
                    });
                }
                if let Some(effort) = point.efforts.get(j) {
                    self.check_effort(&joint.name, *effort)?;
                }
                let (max_velocity, max_acceleration) = leader_limits(self, joint)?;
                let (peak_velocity, peak_acceleration) = spline_peaks(
                    previous.0[j],
                    previous.1[j],
                    point.positions[j],
                    velocity,
                    duration_s,
                );
                if peak_velocity > max_velocity {
                    return Err(JointError::TooFast {
                        joint: joint.name.clone(),
                        waypoint: index,
                        velocity: peak_velocity,
                        max_velocity,
                        unit: joint.kind.velocity_unit(),
                    });
                }
                if peak_acceleration > max_acceleration {
                    return Err(JointError::TooHardAcceleration {
                        joint: joint.name.clone(),
                        waypoint: index,
                        acceleration: peak_acceleration,
                        max_acceleration,
                        unit: joint.kind.acceleration_unit(),
                    });
                }
            }
            previous = (&point.positions, &point.velocities, point.time_s);
        }
        for (joint, velocity) in limits.iter().zip(previous.1) {
            if *velocity != 0.0 {
                return Err(JointError::EndsMoving {
                    joint: joint.name.clone(),
                    velocity: *velocity,
                    unit: joint.kind.velocity_unit(),
                });
            }
        }
        Ok(())
    }

    /// A trajectory that takes `joints` from `start` to `goal` at no more
    /// than `speed` (clamped to each joint's velocity limit) and within
    /// their acceleration limits, in no less than `min_duration_s`: every
    /// joint follows the same trapezoidal profile (accelerate, cruise,
    /// brake) scaled to its distance, so that they arrive together, as
    /// fast as the slowest joint's limits allow. The result passes
    /// [`JointLimits::check_trajectory`] from `start` (a joint that is
    /// still moving stretches it until it does), or the error says why not.
    pub fn plan_motion(
        &self,
        joints: &[String],
        start: &JointMotionState,
        goal: &[f64],
        speed: f64,
        min_duration_s: f64,
    ) -> Result<Vec<Waypoint>, JointError> {
        if goal.len() != joints.len() || start.positions.len() != joints.len() {
            return Err(malformed(format!(
                "{} goal and {} start positions for {} joints",
                goal.len(),
                start.positions.len(),
                joints.len()
            )));
        }
        let mut profiles = Vec::with_capacity(joints.len());
        for (j, name) in joints.iter().enumerate() {
            let joint = self.joint(name)?;
            self.check_position(name, goal[j])?;
            if !start.positions[j].is_finite() {
                return Err(JointError::NotFinite {
                    joint: name.clone(),
                    field: "start position",
                    value: start.positions[j],
                });
            }
            if !speed.is_finite() {
                return Err(JointError::NotFinite {
                    joint: name.clone(),
                    field: "velocity",
                    value: speed,
                });
            }
            if speed <= 0.0 {
                return Err(JointError::NotPositive {
                    joint: name.clone(),
                    field: "velocity",
                    value: speed,
                    unit: joint.kind.velocity_unit(),
                });
            }
            let (max_velocity, max_acceleration) = leader_limits(self, joint)?;
            profiles.push((
                (goal[j] - start.positions[j]).abs(),
                speed.min(max_velocity),
                max_acceleration,
            ));
        }
        let (fraction, fastest_s) = fastest_shared_profile(&profiles);
        let base_s = fastest_s.max(min_duration_s).max(MIN_MOTION_S);
        let mut stretch = 1.0;
        let mut last_error = None;
        for attempt in 0..MAX_STRETCHES {
            let points = trapezoid_waypoints(&start.positions, goal, fraction, base_s * stretch);
            match self.check_trajectory(joints, &points, start) {
                Ok(()) => return Ok(points),
                Err(
                    error @ (JointError::TooFast { .. } | JointError::TooHardAcceleration { .. }),
                ) => last_error = Some(error),
                Err(other) => return Err(other),
            }
            // The first try fails only by rounding at the limit; then a
            // joint still moving needs more time to turn round.
            stretch = if attempt == 0 { 1.0 + 1e-9 } else { stretch * STRETCH_FACTOR };
        }
        Err(last_error.expect("a failed attempt"))
    }
}

/// The shortest motion planned (a motion of nothing still takes this).
const MIN_MOTION_S: f64 = 0.01;
/// How often, and by how much, a plan that a moving start breaks is stretched.
const MAX_STRETCHES: usize = 60;
const STRETCH_FACTOR: f64 = 1.1;
/// Shares of the motion spent accelerating (and as much braking) tried.
const FRACTIONS: usize = 50;

/// The trapezoid shape (the share of time spent accelerating, 0 to 0.5)
/// and duration that move every joint its distance within its velocity and
/// acceleration limits soonest, all joints following the same shape;
/// `profiles`: (distance, velocity limit, acceleration limit) per joint.
fn fastest_shared_profile(profiles: &[(f64, f64, f64)]) -> (f64, f64) {
    (1..=FRACTIONS)
        .map(|i| 0.5 * i as f64 / FRACTIONS as f64)
        .map(|fraction| {
            // Peak velocity d / (T (1 - f)), acceleration d / (T^2 f (1 - f)).
            let duration_s = profiles
                .iter()
                .map(|(distance, velocity, acceleration)| {
                    (distance / (velocity * (1.0 - fraction)))
                        .max((distance / (acceleration * fraction * (1.0 - fraction))).sqrt())
                })
                .fold(0.0, f64::max);
            (fraction, duration_s)
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("fractions tried")
}

/// The waypoints of a trapezoid from `from` to `to` over `duration_s`,
/// accelerating for `fraction` of it: the end of the acceleration, the
/// start of the braking (when there is a cruise between), the end at rest.
/// Splines through these positions and velocities are the trapezoid
/// exactly (a cubic through a parabola's or a line's values and slopes is
/// that parabola or line).
fn trapezoid_waypoints(from: &[f64], to: &[f64], fraction: f64, duration_s: f64) -> Vec<Waypoint> {
    let peak = 1.0 / (duration_s * (1.0 - fraction));
    let accelerated = fraction / (2.0 * (1.0 - fraction));
    let cruised = accelerated + (1.0 - 2.0 * fraction) / (1.0 - fraction);
    let point = |share: f64, velocity: f64, time_s: f64| Waypoint {
        positions: from
            .iter()
            .zip(to)
            .map(|(a, b)| if share >= 1.0 { *b } else { a + (b - a) * share })
            .collect(),
        velocities: from.iter().zip(to).map(|(a, b)| (b - a) * velocity).collect(),
        efforts: Vec::new(),
        time_s,
    };
    let mut points = vec![point(accelerated, peak, fraction * duration_s)];
    if fraction < 0.5 {
        points.push(point(cruised, peak, (1.0 - fraction) * duration_s));
    }
    points.push(point(1.0, 0.0, duration_s));
    points
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const URDF: &str = include_str!("../../../../urdf/aicc_bot.urdf");

    fn robot() -> JointLimits {
        let accelerations = [
            ("head_pan_joint", 15.0),
            ("head_tilt_joint", 15.0),
            ("joint1", 20.0),
            ("joint2", 20.0),
            ("joint3", 20.0),
            ("joint4", 20.0),
            ("gripper_left_joint", 0.5),
        ];
        let accelerations: Vec<(String, f64)> =
            accelerations.iter().map(|(n, a)| (n.to_string(), *a)).collect();
        JointLimits::from_urdf(URDF).unwrap().with_max_accelerations(&accelerations).unwrap()
    }

    fn names(joints: &[&str]) -> Vec<String> {
        joints.iter().map(|j| j.to_string()).collect()
    }

    fn at_rest(positions: &[f64]) -> JointMotionState {
        JointMotionState { positions: positions.to_vec(), velocities: vec![0.0; positions.len()] }
    }

    fn waypoint(positions: &[f64], velocities: &[f64], time_s: f64) -> Waypoint {
        Waypoint {
            positions: positions.to_vec(),
            velocities: velocities.to_vec(),
            efforts: Vec::new(),
            time_s,
        }
    }

    /// Samples a trajectory's splines densely: the largest |velocity| and
    /// |acceleration| (finite differences of velocity) per joint.
    fn sampled_peaks(start: &JointMotionState, points: &[Waypoint]) -> Vec<(f64, f64)> {
        let mut peaks = vec![(0.0f64, 0.0f64); start.positions.len()];
        let mut previous = (start.positions.clone(), start.velocities.clone(), 0.0);
        for point in points {
            let h = point.time_s - previous.2;
            for (j, peak) in peaks.iter_mut().enumerate() {
                let (q0, v0, q1, v1) =
                    (previous.0[j], previous.1[j], point.positions[j], point.velocities[j]);
                let velocity = |s: f64| {
                    (6.0 * s - 6.0 * s * s) * (q1 - q0) / h
                        + (3.0 * s * s - 4.0 * s + 1.0) * v0
                        + (3.0 * s * s - 2.0 * s) * v1
                };
                let steps = 400;
                for k in 0..=steps {
                    let s = k as f64 / steps as f64;
                    peak.0 = peak.0.max(velocity(s).abs());
                    if k > 0 {
                        let ds = 1.0 / steps as f64;
                        peak.1 = peak.1.max(((velocity(s) - velocity(s - ds)) / (ds * h)).abs());
                    }
                }
            }
            previous = (point.positions.clone(), point.velocities.clone(), point.time_s);
        }
        peaks
    }

    #[test]
    fn a_trajectory_is_checked_for_positions_velocities_accelerations_and_efforts() {
        let l = robot();
        let head = names(&["head_pan_joint", "head_tilt_joint"]);
        let rest = at_rest(&[0.0, 0.0]);
        let plan = l.plan_motion(&head, &rest, &[0.5, 0.1], 1.5, 0.2).unwrap();
        assert_eq!(l.check_trajectory(&head, &plan, &rest), Ok(()));
        // A position-only jump: no velocities.
        let no_velocities =
            Waypoint { velocities: Vec::new(), ..waypoint(&[0.5, 0.1], &[0.0, 0.0], 1.0) };
        assert!(
            matches!(l.check_trajectory(&head, &[no_velocities], &rest), Err(JointError::MalformedTrajectory(ref m)) if m.contains("unbounded acceleration"))
        );
        // 0.5 rad in 0.2 s from rest: the spline peaks at 3.75 rad/s.
        let too_fast = l
            .check_trajectory(&head, &[waypoint(&[0.5, 0.0], &[0.0, 0.0], 0.2)], &rest)
            .unwrap_err();
        assert!(
            matches!(too_fast, JointError::TooFast { ref joint, waypoint: 0, .. } if joint == "head_pan_joint"),
            "{too_fast}"
        );
        // 0.1 rad in 0.15 s: slow enough (1 rad/s) but 26.7 rad/s^2 at the ends.
        let too_hard = l
            .check_trajectory(&head, &[waypoint(&[0.1, 0.0], &[0.0, 0.0], 0.15)], &rest)
            .unwrap_err();
        assert!(
            matches!(too_hard, JointError::TooHardAcceleration { ref joint, acceleration, .. } if joint == "head_pan_joint" && (acceleration - 26.666).abs() < 0.01),
            "{too_hard}"
        );
        assert!(
            too_hard.to_string().contains("rad/s^2")
                && too_hard.to_string().contains("acceleration limit of 15"),
            "{too_hard}"
        );
        // The start counts: the same motion is too hard for a head already turning the other way.
        let slow = [waypoint(&[0.5, 0.0], &[0.0, 0.0], 0.8)];
        assert_eq!(l.check_trajectory(&head, &slow, &rest), Ok(()));
        let turning_away =
            JointMotionState { positions: vec![0.0, 0.0], velocities: vec![-2.9, 0.0] };
        assert!(matches!(
            l.check_trajectory(&head, &slow, &turning_away),
            Err(JointError::TooHardAcceleration { waypoint: 0, .. })
        ));
        // Ending in motion, out of range, bad times, NaN.
        assert!(matches!(
            l.check_trajectory(&head, &[waypoint(&[0.5, 0.0], &[0.1, 0.0], 1.0)], &rest),
            Err(JointError::EndsMoving { .. })
        ));
        assert!(matches!(
            l.check_trajectory(&head, &[waypoint(&[9.0, 0.0], &[0.0, 0.0], 30.0)], &rest),
            Err(JointError::OutOfRange { .. })
        ));
        assert!(matches!(
            l.check_trajectory(&head, &[], &rest),
            Err(JointError::MalformedTrajectory(_))
        ));
        assert!(matches!(
            l.check_trajectory(
                &head,
                &[waypoint(&[0.1, 0.0], &[0.0, 0.0], 1.0), waypoint(&[0.1, 0.0], &[0.0, 0.0], 1.0)],
                &rest
            ),
            Err(JointError::MalformedTrajectory(_))
        ));
        assert!(matches!(
            l.check_trajectory(&head, &[waypoint(&[0.1, 0.0], &[0.0, 0.0], f64::NAN)], &rest),
            Err(JointError::MalformedTrajectory(_))
        ));
        let nan_start =
            JointMotionState { positions: vec![f64::NAN, 0.0], velocities: vec![0.0, 0.0] };
        assert!(matches!(
            l.check_trajectory(&head, &slow, &nan_start),
            Err(JointError::NotFinite { field: "start position", .. })
        ));
        // Efforts within the URDF limit only.
        let gripper = names(&["gripper_left_joint"]);
        let mut close = l.plan_motion(&gripper, &at_rest(&[0.03]), &[0.0], 1.0, 0.0).unwrap();
        close.iter_mut().for_each(|p| p.efforts = vec![5.0]);
        assert_eq!(l.check_trajectory(&gripper, &close, &at_rest(&[0.03])), Ok(()));
        close.iter_mut().for_each(|p| p.efforts = vec![11.0]);
        assert!(matches!(
            l.check_trajectory(&gripper, &close, &at_rest(&[0.03])),
            Err(JointError::EffortTooHigh { .. })
        ));
    }

    #[test]
    fn a_joint_without_an_acceleration_limit_is_never_given_a_goal() {
        let l = JointLimits::from_urdf(URDF).unwrap();
        let err =
            l.plan_motion(&names(&["joint1"]), &at_rest(&[0.0]), &[0.5], 1.0, 0.0).unwrap_err();
        assert_eq!(err, JointError::NoAccelerationLimit { joint: "joint1".into() });
        assert!(err.to_string().contains("arm_max_accel_radps2"), "{err}");
        // A follower (the right finger mimics the left) takes its leader's limit.
        let l = l.with_max_accelerations(&[("gripper_left_joint".into(), 0.4)]).unwrap();
        assert_eq!(l.get("gripper_right_joint").unwrap().max_acceleration, Some(0.4));
        assert!(l.with_max_accelerations(&[("joint1".into(), 0.0)]).is_err());
    }

    #[test]
    fn a_long_arm_motion_cruises_at_the_speed_asked_and_brakes_to_rest() {
        let l = robot();
        let arm = names(&["joint1", "joint2"]);
        let start = at_rest(&[-1.4, 0.0]);
        let plan = l.plan_motion(&arm, &start, &[1.4, 0.3], 4.8, 0.5).unwrap();
        // 2.8 rad at 4.8 rad/s and 20 rad/s^2: 0.24 s up, 0.34 s cruising, 0.24 s down.
        let end = plan.last().unwrap();
        assert!((end.time_s - (2.8 / 4.8 + 4.8 / 20.0)).abs() < 0.02, "{}", end.time_s);
        assert_eq!(
            (end.positions.clone(), end.velocities.clone()),
            (vec![1.4, 0.3], vec![0.0, 0.0])
        );
        assert!((plan[0].velocities[0] - 4.8).abs() < 0.15, "cruise {}", plan[0].velocities[0]);
        assert!(
            (plan[0].velocities[1] / plan[0].velocities[0] - 0.3 / 2.8).abs() < 1e-9,
            "joints arrive together"
        );
        // No motion at all: the goal, at rest, after the shortest time.
        let still = l.plan_motion(&arm, &at_rest(&[0.2, 0.1]), &[0.2, 0.1], 1.0, 0.5).unwrap();
        assert_eq!(still.last().unwrap().time_s, 0.5);
        assert!(still.iter().all(|p| p.velocities == [0.0, 0.0] && p.positions == [0.2, 0.1]));
    }

    #[test]
    fn a_joint_still_moving_the_other_way_stretches_the_plan_and_one_too_fast_is_refused() {
        let l = robot();
        let head = names(&["head_pan_joint"]);
        let moving = JointMotionState { positions: vec![0.0], velocities: vec![-2.0] };
        let plan = l.plan_motion(&head, &moving, &[0.3], 3.0, 0.0).unwrap();
        assert_eq!(l.check_trajectory(&head, &plan, &moving), Ok(()));
        let at_rest_plan = l.plan_motion(&head, &at_rest(&[0.0]), &[0.3], 3.0, 0.0).unwrap();
        assert!(plan.last().unwrap().time_s > at_rest_plan.last().unwrap().time_s);
        let over = JointMotionState { positions: vec![0.0], velocities: vec![3.2] };
        assert!(matches!(
            l.plan_motion(&head, &over, &[0.3], 3.0, 0.0),
            Err(JointError::TooFast { .. })
        ));
    }

    proptest! {
        #[test]
        fn the_peaks_of_a_spline_are_its_largest_sampled_velocity_and_acceleration(
            q0 in -3.0..3.0f64, q1 in -3.0..3.0f64, v0 in -5.0..5.0f64, v1 in -5.0..5.0f64, h in 0.01..3.0f64,
        ) {
            let start = JointMotionState { positions: vec![q0], velocities: vec![v0] };
            let sampled = sampled_peaks(&start, &[waypoint(&[q1], &[v1], h)])[0];
            let (velocity, acceleration) = spline_peaks(q0, v0, q1, v1, h);
            prop_assert!(velocity >= sampled.0 - 1e-9 && velocity <= sampled.0 * (1.0 + 1e-4) + 1e-9, "{velocity} vs {}", sampled.0);
            prop_assert!(acceleration >= sampled.1 - 1e-6 * (1.0 + acceleration), "{acceleration} vs {}", sampled.1);
            prop_assert!(acceleration <= sampled.1 * 1.01 + 1e-6, "{acceleration} vs {}", sampled.1);
        }

        #[test]
        fn planned_motions_reach_the_goal_together_within_every_limit(
            group in prop::sample::select(vec![vec!["head_pan_joint", "head_tilt_joint"], vec!["joint1", "joint2", "joint3", "joint4"], vec!["gripper_left_joint"]]),
            from in prop::collection::vec(0.0..=1.0f64, 4), to in prop::collection::vec(0.0..=1.0f64, 4),
            moving in prop::collection::vec(-0.5..0.5f64, 4), speed in 0.01..10.0f64, min_duration_s in 0.0..1.0f64,
        ) {
            let l = robot();
            let joints = names(&group);
            let within = |j: &str, f: f64| { let limit = l.get(j).unwrap(); limit.lower.unwrap() + (limit.upper.unwrap() - limit.lower.unwrap()) * f };
            let start = JointMotionState {
                positions: joints.iter().zip(&from).map(|(j, f)| within(j, *f)).collect(),
                // Up to half the velocity limit, either way.
                velocities: joints.iter().zip(&moving).map(|(j, m)| l.get(j).unwrap().max_velocity * m).collect(),
            };
            let goal: Vec<f64> = joints.iter().zip(&to).map(|(j, f)| within(j, *f)).collect();
            let plan = l.plan_motion(&joints, &start, &goal, speed, min_duration_s).unwrap();
            prop_assert_eq!(l.check_trajectory(&joints, &plan, &start), Ok(()));
            let end = plan.last().unwrap();
            prop_assert_eq!(&end.positions, &goal);
            prop_assert!(end.velocities.iter().all(|v| *v == 0.0));
            prop_assert!(end.time_s >= min_duration_s);
            for (j, (velocity, acceleration)) in joints.iter().zip(sampled_peaks(&start, &plan)) {
                let limit = l.get(j).unwrap();
                prop_assert!(velocity <= limit.max_velocity * (1.0 + 1e-9), "{j}: {velocity}");
                prop_assert!(acceleration <= limit.max_acceleration.unwrap() * 1.001, "{j}: {acceleration}");
            }
        }

        #[test]
        fn from_rest_a_motion_keeps_the_speed_asked_and_is_not_much_slower_than_its_slowest_joint_alone(
            group in prop::sample::select(vec![vec!["head_pan_joint", "head_tilt_joint"], vec!["joint1", "joint2", "joint3", "joint4"]]),
            from in prop::collection::vec(0.0..=1.0f64, 4), to in prop::collection::vec(0.0..=1.0f64, 4), speed in 0.01..10.0f64,
        ) {
            let l = robot();
            let joints = names(&group);
            let within = |j: &str, f: f64| { let limit = l.get(j).unwrap(); limit.lower.unwrap() + (limit.upper.unwrap() - limit.lower.unwrap()) * f };
            let start = at_rest(&joints.iter().zip(&from).map(|(j, f)| within(j, *f)).collect::<Vec<_>>());
            let goal: Vec<f64> = joints.iter().zip(&to).map(|(j, f)| within(j, *f)).collect();
            let plan = l.plan_motion(&joints, &start, &goal, speed, 0.0).unwrap();
            prop_assert!(sampled_peaks(&start, &plan).iter().all(|(v, _)| *v <= speed * (1.0 + 1e-9)));
            // Each joint alone: a trapezoid (or triangle) at its own limits.
            let alone = joints.iter().zip(start.positions.iter().zip(&goal)).map(|(j, (a, b))| {
                let (d, v, acc) = ((b - a).abs(), speed.min(l.get(j).unwrap().max_velocity), l.get(j).unwrap().max_acceleration.unwrap());
                if d >= v * v / acc { d / v + v / acc } else { 2.0 * (d / acc).sqrt() }
            }).fold(0.0, f64::max);
            let took = plan.last().unwrap().time_s;
            prop_assert!(took <= (1.5 * alone).max(MIN_MOTION_S) + 1e-9, "{took} s where the slowest joint alone needs {alone} s");
        }

        #[test]
        fn a_trajectory_that_passes_the_check_stays_within_the_limits_everywhere(
            q1 in -2.0..2.0f64, v1 in -6.0..6.0f64, q2 in -2.0..2.0f64, h1 in 0.05..2.0f64, h2 in 0.05..2.0f64, v0 in -3.0..3.0f64,
        ) {
            let l = robot();
            let joints = names(&["joint1"]);
            let start = JointMotionState { positions: vec![0.0], velocities: vec![v0] };
            let points = [waypoint(&[q1], &[v1], h1), waypoint(&[q2], &[0.0], h1 + h2)];
            if l.check_trajectory(&joints, &points, &start).is_ok() {
                let (velocity, acceleration) = sampled_peaks(&start, &points)[0];
                prop_assert!(velocity <= 4.8 * (1.0 + 1e-9));
                prop_assert!(acceleration <= 20.0 * (1.0 + 1e-9));
            }
        }
    }
}
