//! The base motion controller, with no I/O: odometry, the governor's
//! verdict, a stop flag and `now` in; a velocity to ask for, "ramp down",
//! done or failed out. `move` and `turn` run one through the same loop
//! (`tools::shared::base_motion`); tests run it on virtual time.
//!
//! A motion is a list of segments (a straight drive, a rotation, a timed
//! drive), each ending in a settle (the base comes to rest before the next
//! starts or the result is reported), each with its own time budget and
//! its own watch of the governor: a direction held at zero for
//! [`BLOCKED_SETTLE`] ends the motion at once, naming the rules.
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use nalgebra::Vector2;

use super::blocked::{BlockedWatch, BLOCKED_SETTLE, LATE_DATA_PATIENCE};
use super::profile::{
    drive_budget, profile_rate, profile_speed, turn_budget, HEADING_GAIN_PER_S,
    MAX_HEADING_CORRECTION_RADPS, PLANNING_ACCEL_SHARE, SETTLED_RATE_RADPS, SETTLED_SPEED_MPS,
    SETTLE_TIMEOUT, TOLERANCE_RAD,
};
use super::yaw::YawUnwrapper;
use crate::governor::{wrap_angle, BaseLimits, BaseVelocity, Pose2D, Restriction};

/// How often a motion reports progress.
pub const PROGRESS_PERIOD: Duration = Duration::from_millis(500);

/// One odometry reading, as the controller needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// In the odometry frame.
    pub pose: Pose2D,
    /// Magnitude of the base's linear velocity, m/s.
    pub linear_speed_mps: f64,
    /// Yaw rate, rad/s (counter-clockwise positive).
    pub angular_rate_radps: f64,
}

/// One part of a motion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Segment {
    /// `distance_m` along the heading the segment starts with (negative:
    /// backwards), holding that heading, at most `speed_mps`.
    Drive { distance_m: f64, speed_mps: f64 },
    /// In place by `angle_rad` (counter-clockwise positive), at most `rate_radps`.
    Rotate { angle_rad: f64, rate_radps: f64 },
    /// In place to face `heading_rad` (odometry frame), the short way round.
    RotateTo { heading_rad: f64, rate_radps: f64 },
    /// At `velocity_mps` for `duration` (the governor still limits every command).
    Timed { velocity_mps: f64, duration: Duration },
}

/// What the base allows and how close a drive must come.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub limits: BaseLimits,
    /// A drive ends when the remaining distance is below this.
    pub tolerance_m: f64,
}

/// What the controller is given at each step.
pub struct StepInput<'a> {
    pub now: Instant,
    /// The latest odometry if fresh, else why not (naming the topic).
    pub odometry: Result<Reading, String>,
    /// The governor's verdict: the restrictions that hold the direction
    /// of a velocity at zero (empty: allowed).
    pub verdict: &'a dyn Fn(BaseVelocity) -> Vec<Restriction>,
    /// Whether a `stop` came since the motion began.
    pub halted: bool,
}

/// What to do until the next step.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Ask the base for this velocity.
    Drive(BaseVelocity),
    /// The segment reached its goal: let the base ramp down and step on.
    Finish,
    Done(Achieved),
    /// Stop the base (braking) and report.
    Failed(Failure),
}

/// A step's answer: the action, and progress to report when it is due.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutput {
    pub action: Action,
    pub progress: Option<Report>,
}

/// Where the current segment stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Report {
    Drive { done_m: f64, goal_m: f64 },
    Rotate { done_rad: f64, goal_rad: f64 },
    Timed { done_m: f64, elapsed_s: f64, duration_s: f64 },
}

/// What a finished motion achieved, measured by odometry from its start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Achieved {
    /// Along the motion's starting heading, m.
    pub forward_m: f64,
    /// To the left of it, m.
    pub left_m: f64,
    /// Change of heading, wrapped to (-pi, pi].
    pub yaw_change_rad: f64,
    /// Rotation of the rotating segments, unwrapped (a full turn is 2 pi).
    pub rotated_rad: f64,
    pub duration_s: f64,
}

/// Why a motion ended early; the base must be stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub kind: FailureKind,
    /// The segment that failed, where it stood.
    pub report: Report,
    /// Whether the segment had reached its goal and was settling.
    pub settling: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FailureKind {
    /// Odometry missing or stale (the message names the topic and age).
    Odometry(String),
    /// A `stop` call.
    Halted,
    /// The governor held the direction at zero for the settle time.
    Blocked(Vec<Restriction>),
    /// The segment took longer than its budget.
    Timeout { budget: Duration },
}

#[derive(Debug)]
enum Phase {
    Running,
    Settling { since: Instant },
}

#[derive(Debug)]
enum Active {
    Drive {
        goal_m: f64,
        speed_mps: f64,
        accel_mps2: f64,
        start: Pose2D,
        heading_rad: f64,
        done_m: f64,
    },
    Rotate {
        goal_rad: f64,
        rate_radps: f64,
        accel_radps2: f64,
        turned: YawUnwrapper,
    },
    Timed {
        velocity_mps: f64,
        duration: Duration,
        start: Pose2D,
        heading_rad: f64,
        done_m: f64,
    },
}

#[derive(Debug)]
struct Current {
    active: Active,
    phase: Phase,
    started: Instant,
    budget: Option<Duration>,
    blocked: BlockedWatch,
}

/// A motion in progress.
#[derive(Debug)]
pub struct BaseMotion {
    settings: Settings,
    pending: VecDeque<Segment>,
    current: Option<Current>,
    /// The motion's start: displacement and heading change are measured from it.
    origin: Pose2D,
    started: Instant,
    last_progress: Instant,
    rotated_rad: f64,
    last: Reading,
    /// Since when odometry has been too old to steer by (the motion waits,
    /// stopped, for [`LATE_DATA_PATIENCE`]).
    odometry_late_since: Option<Instant>,
}

/// Progress along `heading_rad` from `start` to `now`: (forward, left) metres.
pub fn displacement(start: &Pose2D, now: &Pose2D, heading_rad: f64) -> (f64, f64) {
    let delta = Vector2::new(now.x_m - start.x_m, now.y_m - start.y_m);
    let forward = Vector2::new(heading_rad.cos(), heading_rad.sin());
    let left = Vector2::new(-heading_rad.sin(), heading_rad.cos());
    (delta.dot(&forward), delta.dot(&left))
}

impl BaseMotion {
    /// A motion of `segments` from `start` (a fresh reading) at `now`.
    pub fn new(segments: Vec<Segment>, settings: Settings, start: Reading, now: Instant) -> Self {
        let mut motion = Self {
            settings,
            pending: segments.into(),
            current: None,
            origin: start.pose,
            started: now,
            last_progress: now,
            rotated_rad: 0.0,
            last: start,
            odometry_late_since: None,
        };
        // The first segment starts now, so that a failure at once still says where it stood.
        if let Some(first) = motion.pending.pop_front() {
            motion.current = Some(motion.begin(first, &start, now));
        }
        motion
    }

    /// One control step.
    pub fn step(&mut self, input: StepInput<'_>) -> StepOutput {
        let now = input.now;
        if input.halted {
            return self.fail(FailureKind::Halted, now);
        }
        let reading = match &input.odometry {
            Ok(reading) => *reading,
            Err(message) => {
                // Stopped until it comes again; the governor has stopped the base already.
                let since = *self.odometry_late_since.get_or_insert(now);
                if now.saturating_duration_since(since) >= LATE_DATA_PATIENCE {
                    return self.fail(FailureKind::Odometry(message.clone()), now);
                }
                return StepOutput { action: Action::Drive(BaseVelocity::ZERO), progress: None };
            }
        };
        self.odometry_late_since = None;
        self.last = reading;
        loop {
            if self.current.is_none() {
                let Some(segment) = self.pending.pop_front() else {
                    return StepOutput { action: Action::Done(self.achieved(now)), progress: None };
                };
                self.current = Some(self.begin(segment, &reading, now));
            }
            match self.step_segment(&reading, now, input.verdict) {
                // A segment with nothing to do (a zero turn) gives way to the next at once.
                SegmentStep::Finished => self.current = None,
                SegmentStep::Act(output) => return output,
            }
        }
    }

    fn begin(&mut self, segment: Segment, reading: &Reading, now: Instant) -> Current {
        let limits = self.settings.limits;
        let linear_accel = limits.max_linear_accel_mps2 * PLANNING_ACCEL_SHARE;
        let angular_accel = limits.max_angular_accel_radps2 * PLANNING_ACCEL_SHARE;
        let (active, budget) = match segment {
            Segment::Drive { distance_m, speed_mps } => {
                let active = Active::Drive {
                    goal_m: distance_m,
                    speed_mps,
                    accel_mps2: linear_accel,
                    start: reading.pose,
                    heading_rad: reading.pose.yaw_rad,
                    done_m: 0.0,
                };
                (active, Some(drive_budget(distance_m, speed_mps, linear_accel)))
            }
            Segment::Rotate { angle_rad, rate_radps } => {
                self.rotation(angle_rad, rate_radps, angular_accel, reading)
            }
            Segment::RotateTo { heading_rad, rate_radps } => self.rotation(
                wrap_angle(heading_rad - reading.pose.yaw_rad),
                rate_radps,
                angular_accel,
                reading,
            ),
            Segment::Timed { velocity_mps, duration } => (
                Active::Timed {
                    velocity_mps,
                    duration,
                    start: reading.pose,
                    heading_rad: reading.pose.yaw_rad,
                    done_m: 0.0,
                },
                None,
            ),
        };
        Current {
            active,
            phase: Phase::Running,
            started: now,
            budget,
            blocked: BlockedWatch::default(),
        }
    }

    fn rotation(
        &self,
        angle_rad: f64,
        rate_radps: f64,
        accel_radps2: f64,
        reading: &Reading,
    ) -> (Active, Option<Duration>) {
        let active = Active::Rotate {
            goal_rad: angle_rad,
            rate_radps,
            accel_radps2,
            turned: YawUnwrapper::new(reading.pose.yaw_rad),
        };
        (active, Some(turn_budget(angle_rad, rate_radps, accel_radps2)))
    }

    fn step_segment(
        &mut self,
        reading: &Reading,
        now: Instant,
        verdict: &dyn Fn(BaseVelocity) -> Vec<Restriction>,
    ) -> SegmentStep {
        let tolerance_m = self.settings.tolerance_m;
        let current = self.current.as_mut().expect("a segment is active");
        // Measure first: every report below says where the segment stands now.
        match &mut current.active {
            Active::Drive { start, heading_rad, done_m, .. }
            | Active::Timed { start, heading_rad, done_m, .. } => {
                *done_m = displacement(start, &reading.pose, *heading_rad).0
            }
            Active::Rotate { turned, .. } => {
                turned.update(reading.pose.yaw_rad);
            }
        }
        let report = current.report(now);
        if let Phase::Settling { since } = current.phase {
            let at_rest = match current.active {
                Active::Rotate { .. } => reading.angular_rate_radps.abs() <= SETTLED_RATE_RADPS,
                Active::Drive { .. } | Active::Timed { .. } => {
                    reading.linear_speed_mps <= SETTLED_SPEED_MPS
                }
            };
            if at_rest || now.saturating_duration_since(since) >= SETTLE_TIMEOUT {
                if let Active::Rotate { turned, .. } = &current.active {
                    self.rotated_rad += turned.total();
                }
                return SegmentStep::Finished;
            }
            return SegmentStep::Act(StepOutput { action: Action::Finish, progress: None });
        }
        let progress = (now.saturating_duration_since(self.last_progress) >= PROGRESS_PERIOD)
            .then_some(report);
        if progress.is_some() {
            self.last_progress = now;
        }
        let elapsed = now.saturating_duration_since(current.started);
        let command = match &current.active {
            Active::Drive { goal_m, speed_mps, accel_mps2, heading_rad, done_m, .. } => {
                let remaining_m = goal_m - done_m;
                if remaining_m.abs() <= tolerance_m {
                    return current.settle(now, progress);
                }
                let heading_error_rad = wrap_angle(heading_rad - reading.pose.yaw_rad);
                let angular_radps = (HEADING_GAIN_PER_S * heading_error_rad)
                    .clamp(-MAX_HEADING_CORRECTION_RADPS, MAX_HEADING_CORRECTION_RADPS);
                BaseVelocity {
                    linear_mps: profile_speed(remaining_m, *speed_mps, *accel_mps2),
                    angular_radps,
                }
            }
            Active::Rotate { goal_rad, rate_radps, accel_radps2, turned } => {
                if goal_rad.abs() <= TOLERANCE_RAD {
                    // Nothing to turn: no settle either.
                    return SegmentStep::Finished;
                }
                let remaining_rad = goal_rad - turned.total();
                if remaining_rad.abs() <= TOLERANCE_RAD {
                    return current.settle(now, progress);
                }
                BaseVelocity {
                    linear_mps: 0.0,
                    angular_radps: profile_rate(remaining_rad, *rate_radps, *accel_radps2),
                }
            }
            Active::Timed { velocity_mps, duration, .. } => {
                let command = BaseVelocity { linear_mps: *velocity_mps, angular_radps: 0.0 };
                if elapsed >= *duration {
                    // Held at zero when the time ran out (shorter than the
                    // settle time into a blocked way, or blocked at its
                    // end): not a success.
                    let blocking = verdict(command);
                    if current.blocked.is_blocked() && !blocking.is_empty() {
                        return SegmentStep::Act(
                            self.failure(FailureKind::Blocked(blocking), report),
                        );
                    }
                    return current.settle(now, progress);
                }
                command
            }
        };
        if let Some(budget) = current.budget {
            if elapsed > budget {
                return SegmentStep::Act(self.failure(FailureKind::Timeout { budget }, report));
            }
        }
        // A rule that holds this direction at zero (an obstacle, a contact,
        // the geofence, stale data) ends the motion once it has for the
        // settle time, rather than at the timeout. A drive's heading hold
        // is not a direction the agent asked for: only its linear part counts.
        let asked = match current.active {
            Active::Drive { .. } => BaseVelocity { angular_radps: 0.0, ..command },
            Active::Rotate { .. } | Active::Timed { .. } => command,
        };
        if let Some(blocking) = current.blocked.observe(verdict(asked), now, BLOCKED_SETTLE) {
            return SegmentStep::Act(self.failure(FailureKind::Blocked(blocking), report));
        }
        SegmentStep::Act(StepOutput { action: Action::Drive(command), progress })
    }

    fn fail(&mut self, kind: FailureKind, now: Instant) -> StepOutput {
        let report = match &self.current {
            Some(current) => current.report(now),
            None => Report::Drive { done_m: 0.0, goal_m: 0.0 },
        };
        self.failure(kind, report)
    }

    fn failure(&mut self, kind: FailureKind, report: Report) -> StepOutput {
        let settling =
            self.current.as_ref().is_some_and(|c| matches!(c.phase, Phase::Settling { .. }));
        self.pending.clear();
        StepOutput { action: Action::Failed(Failure { kind, report, settling }), progress: None }
    }

    fn achieved(&self, now: Instant) -> Achieved {
        let heading = self.origin.yaw_rad;
        let (forward_m, left_m) = displacement(&self.origin, &self.last.pose, heading);
        Achieved {
            forward_m,
            left_m,
            yaw_change_rad: wrap_angle(self.last.pose.yaw_rad - heading),
            rotated_rad: self.rotated_rad,
            duration_s: now.saturating_duration_since(self.started).as_secs_f64(),
        }
    }
}

enum SegmentStep {
    Act(StepOutput),
    /// The segment is over: start the next.
    Finished,
}

impl Current {
    fn settle(&mut self, now: Instant, progress: Option<Report>) -> SegmentStep {
        self.phase = Phase::Settling { since: now };
        SegmentStep::Act(StepOutput { action: Action::Finish, progress })
    }

    fn report(&self, now: Instant) -> Report {
        match &self.active {
            Active::Drive { goal_m, done_m, .. } => {
                Report::Drive { done_m: *done_m, goal_m: *goal_m }
            }
            Active::Rotate { goal_rad, turned, .. } => {
                Report::Rotate { done_rad: turned.total(), goal_rad: *goal_rad }
            }
            Active::Timed { duration, done_m, .. } => Report::Timed {
                done_m: *done_m,
                elapsed_s: now.saturating_duration_since(self.started).as_secs_f64(),
                duration_s: duration.as_secs_f64(),
            },
        }
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
