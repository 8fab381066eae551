//! The controller on virtual time, against a simulated differential base:
//! each step's command goes through the real governor (velocity,
//! acceleration and safety envelope, at the 50 Hz control rate), the base
//! follows it exactly, and odometry reads the result. These are the cases
//! the simulator tests cover, and the failure paths they cannot provoke.
use std::f64::consts::PI;
use std::time::{Duration, Instant};

use super::*;
use crate::governor::{
    govern_base_with_envelope, safety_envelope, BaseLimits, BaseVelocity, EmergencyLimits,
    Envelope, Pose2D, Rule, SafetyConfig, SafetyInputs, SafetyState,
};

const LIMITS: BaseLimits = BaseLimits {
    max_linear_mps: 0.22,
    max_angular_radps: 1.5,
    max_linear_accel_mps2: 1.0,
    max_angular_accel_radps2: 3.0,
};
const STEP: Duration = Duration::from_millis(20);
const SETTINGS: Settings = Settings { limits: LIMITS, tolerance_m: 0.005 };

/// A base that follows the governed command exactly.
struct Base {
    pose: Pose2D,
    velocity: BaseVelocity,
    /// A wall across the floor at this x (odometry frame), if any.
    wall_x_m: Option<f64>,
    /// The wheels spin but the base does not move (a stuck robot).
    stuck: bool,
    now: Instant,
}

/// What a run produced.
struct Run {
    action: Action,
    elapsed: Duration,
    commands: Vec<BaseVelocity>,
    progress: Vec<Report>,
    base: Base,
}

impl Base {
    fn at(x_m: f64, y_m: f64, yaw_rad: f64) -> Self {
        Self {
            pose: Pose2D { x_m, y_m, yaw_rad },
            velocity: BaseVelocity::ZERO,
            wall_x_m: None,
            stuck: false,
            now: Instant::now(),
        }
    }

    fn reading(&self) -> Reading {
        let moving = if self.stuck { BaseVelocity::ZERO } else { self.velocity };
        Reading {
            pose: self.pose,
            linear_speed_mps: moving.linear_mps.abs(),
            angular_rate_radps: moving.angular_radps,
        }
    }

    fn envelope(&self) -> Envelope {
        let inputs = SafetyInputs {
            odometry_age_s: Some(0.01),
            imu_age_s: Some(0.01),
            commanded_to_move: true,
            obstacle_ahead_m: self.wall_x_m.map(|x| x - self.pose.x_m),
            ..Default::default()
        };
        safety_envelope(&LIMITS, &SafetyConfig::DEFAULT, &SafetyState::new(), &inputs)
    }

    /// One control period with `setpoint` asked for (None: ramp down).
    fn advance(&mut self, setpoint: Option<BaseVelocity>) {
        let requested = setpoint.unwrap_or(BaseVelocity::ZERO);
        self.velocity = govern_base_with_envelope(
            &LIMITS,
            &EmergencyLimits::DEFAULT,
            self.velocity,
            requested,
            &self.envelope(),
            STEP.as_secs_f64(),
        )
        .command;
        if !self.stuck {
            let dt = STEP.as_secs_f64();
            let heading = self.pose.yaw_rad + 0.5 * self.velocity.angular_radps * dt;
            self.pose.x_m += self.velocity.linear_mps * heading.cos() * dt;
            self.pose.y_m += self.velocity.linear_mps * heading.sin() * dt;
            self.pose.yaw_rad =
                crate::governor::wrap_angle(self.pose.yaw_rad + self.velocity.angular_radps * dt);
        }
        self.now += STEP;
    }
}

/// Runs `segments` on `base`; `odometry_lost` (from..until, since the
/// start) and `halted_after` inject faults.
fn run_with(
    segments: Vec<Segment>,
    mut base: Base,
    odometry_lost: Option<std::ops::Range<Duration>>,
    halted_after: Option<Duration>,
) -> Run {
    let start = base.now;
    let mut motion = BaseMotion::new(segments, SETTINGS, base.reading(), start);
    let (mut commands, mut progress) = (Vec::new(), Vec::new());
    loop {
        let elapsed = base.now - start;
        assert!(elapsed < Duration::from_secs(120), "the motion never ended");
        let odometry = match &odometry_lost {
            Some(lost) if lost.contains(&elapsed) => {
                Err("data on /odom is 600 ms old (maximum 500 ms): is the publisher running?"
                    .to_string())
            }
            _ => Ok(base.reading()),
        };
        let envelope = base.envelope();
        let verdict =
            |velocity: BaseVelocity| envelope.blocking(velocity).into_iter().cloned().collect();
        let output = motion.step(StepInput {
            now: base.now,
            odometry,
            verdict: &verdict,
            halted: halted_after.is_some_and(|after| elapsed >= after),
        });
        progress.extend(output.progress);
        let setpoint = match output.action {
            Action::Drive(velocity) => {
                commands.push(velocity);
                Some(velocity)
            }
            Action::Finish => None,
            done @ (Action::Done(_) | Action::Failed(_)) => {
                return Run { action: done, elapsed, commands, progress, base }
            }
        };
        base.advance(setpoint);
    }
}

fn run(segments: Vec<Segment>, base: Base) -> Run {
    run_with(segments, base, None, None)
}

fn achieved(run: &Run) -> Achieved {
    match &run.action {
        Action::Done(achieved) => *achieved,
        other => panic!("expected success, got {other:?}"),
    }
}

fn failure(run: &Run) -> Failure {
    match &run.action {
        Action::Failed(failure) => failure.clone(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn drive(distance_m: f64) -> Segment {
    Segment::Drive { distance_m, speed_mps: 0.22 }
}

fn rotate(degrees: f64) -> Segment {
    Segment::Rotate { angle_rad: degrees.to_radians(), rate_radps: 1.5 }
}

#[test]
fn a_drive_reaches_its_distance_on_its_heading_within_the_limits() {
    for distance in [0.5, -0.3, 2.0, 0.01] {
        let run = run(vec![drive(distance)], Base::at(1.0, -2.0, 0.7));
        let done = achieved(&run);
        assert!((done.forward_m - distance).abs() < 0.006, "{distance}: {}", done.forward_m);
        assert!(
            done.left_m.abs() < 1e-3 && done.yaw_change_rad.abs() < 1e-3,
            "{distance}: {done:?}"
        );
        assert!(
            run.commands
                .iter()
                .all(|c| c.linear_mps.abs() <= 0.22 + 1e-12 && c.linear_mps * distance >= 0.0),
            "{distance}: speed and sign"
        );
        // Cruise plus ramps, plus the settle: well within twice the ideal.
        let ideal = distance.abs() / 0.22 + 0.22 / 0.8;
        assert!(run.elapsed.as_secs_f64() < 2.0 * ideal + 0.5, "{distance}: {:?}", run.elapsed);
        // At rest as the controller settles: odometry's speed within
        // SETTLED_SPEED_MPS (arriving at the creep speed, the base may
        // still be shedding its last few mm/s when odometry shows it).
        let speed = run.base.velocity.linear_mps.abs();
        assert!(speed <= crate::motion::profile::SETTLED_SPEED_MPS, "{distance}: {speed} m/s");
    }
}

#[test]
fn a_rotation_turns_the_asked_angle_any_size_and_across_half_a_turn() {
    for (start_deg, angle_deg) in
        [(0.0, 90.0), (0.0, -45.0), (170.0, 30.0), (-170.0, -40.0), (10.0, 360.0), (0.0, -360.0)]
    {
        let run = run(vec![rotate(angle_deg)], Base::at(0.0, 0.0, f64::to_radians(start_deg)));
        let done = achieved(&run);
        assert!(
            (done.rotated_rad.to_degrees() - angle_deg).abs() < 0.3,
            "{start_deg} + {angle_deg}: {}",
            done.rotated_rad.to_degrees()
        );
        assert!(
            run.commands
                .iter()
                .all(|c| c.linear_mps == 0.0 && c.angular_radps.abs() <= 1.5 + 1e-12),
            "in place, within the rate"
        );
        let expected_heading = crate::governor::wrap_angle(f64::to_radians(start_deg + angle_deg));
        assert!(
            crate::governor::wrap_angle(run.base.pose.yaw_rad - expected_heading).abs() < 0.006,
            "{start_deg} + {angle_deg}"
        );
    }
    // Nothing to turn: done at once, nothing commanded.
    let run = run(vec![rotate(0.1)], Base::at(0.0, 0.0, 0.0));
    assert_eq!((achieved(&run).rotated_rad, run.commands.len()), (0.0, 0));
}

#[test]
fn an_offset_turns_drives_straight_and_turns_back() {
    let start_yaw = 0.3;
    let (forward, left) = (0.4, 0.3);
    let segments = vec![
        Segment::Rotate { angle_rad: f64::atan2(left, forward), rate_radps: 1.5 },
        Segment::Drive { distance_m: f64::hypot(forward, left), speed_mps: 0.22 },
        Segment::RotateTo { heading_rad: start_yaw, rate_radps: 1.5 },
    ];
    let run = run(segments, Base::at(0.0, 0.0, start_yaw));
    let done = achieved(&run);
    assert!(
        (done.forward_m - forward).abs() < 0.01 && (done.left_m - left).abs() < 0.01,
        "{done:?}"
    );
    assert!(done.yaw_change_rad.abs() < 0.006, "back on the starting heading: {done:?}");
    assert!((done.rotated_rad - 0.0).abs() < 0.01, "turned there and back: {}", done.rotated_rad);
}

#[test]
fn a_timed_drive_lasts_its_duration_then_settles() {
    let run = run(
        vec![Segment::Timed { velocity_mps: -0.1, duration: Duration::from_secs(2) }],
        Base::at(0.0, 0.0, 0.0),
    );
    let done = achieved(&run);
    // 2 s at 0.1 m/s less the ramp up (0.1 s), plus the ramp down.
    assert!((done.forward_m + 0.2).abs() < 0.012, "{}", done.forward_m);
    assert!(
        run.elapsed >= Duration::from_secs(2) && run.elapsed < Duration::from_millis(2400),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn a_wall_ahead_ends_the_drive_at_the_stop_distance_naming_the_rule() {
    let mut base = Base::at(0.0, 0.0, 0.0);
    base.wall_x_m = Some(1.0);
    let run = run(vec![drive(2.0)], base);
    let failure = failure(&run);
    let FailureKind::Blocked(rules) = &failure.kind else { panic!("{failure:?}") };
    assert_eq!(rules.iter().map(|r| r.rule).collect::<Vec<_>>(), [Rule::ObstacleAhead]);
    let Report::Drive { done_m, goal_m } = failure.report else { panic!("{failure:?}") };
    assert!((done_m - 0.8).abs() < 0.01 && goal_m == 2.0, "crept to the stop distance: {done_m}");
    // Creeping the last half metre at the floor speed takes long, but once
    // held the move ends within the settle time, not at its timeout.
    assert!(run.elapsed < drive_time_limit(2.0), "{:?}", run.elapsed);
    assert!(!failure.settling);
}

/// The drive's own time budget (the timeout).
fn drive_time_limit(distance_m: f64) -> Duration {
    super::super::profile::drive_budget(distance_m, 0.22, 0.8)
}

#[test]
fn a_drive_into_a_blocked_way_is_refused_within_the_settle_time() {
    let mut base = Base::at(0.0, 0.0, 0.0);
    base.wall_x_m = Some(0.15);
    let run = run(vec![drive(1.0)], base);
    assert!(matches!(failure(&run).kind, FailureKind::Blocked(_)));
    assert!(
        run.elapsed >= BLOCKED_SETTLE && run.elapsed <= BLOCKED_SETTLE + STEP,
        "{:?}",
        run.elapsed
    );
    assert!(run.base.pose.x_m.abs() < 1e-9, "nothing moved");
    // Backing away from it is allowed.
    let mut base = Base::at(0.0, 0.0, 0.0);
    base.wall_x_m = Some(0.15);
    assert!(
        (achieved(&run_with(vec![drive(-0.2)], base, None, None)).forward_m + 0.2).abs() < 0.006
    );
}

#[test]
fn a_timed_drive_held_at_zero_to_its_end_is_not_a_success() {
    let mut base = Base::at(0.0, 0.0, 0.0);
    base.wall_x_m = Some(0.15);
    let run =
        run(vec![Segment::Timed { velocity_mps: 0.1, duration: Duration::from_millis(300) }], base);
    let failure = failure(&run);
    assert!(matches!(failure.kind, FailureKind::Blocked(_)), "{failure:?}");
    assert!(
        matches!(failure.report, Report::Timed { duration_s, .. } if duration_s == 0.3),
        "{failure:?}"
    );
}

#[test]
fn odometry_gone_for_good_fails_the_motion_after_the_patience_saying_why() {
    let run = run_with(
        vec![drive(1.0)],
        Base::at(0.0, 0.0, 0.0),
        Some(Duration::from_millis(800)..Duration::MAX),
        None,
    );
    let failure = failure(&run);
    assert!(
        matches!(&failure.kind, FailureKind::Odometry(message) if message.contains("/odom")),
        "{failure:?}"
    );
    assert_eq!(run.elapsed, Duration::from_millis(800) + LATE_DATA_PATIENCE);
    let Report::Drive { done_m, .. } = failure.report else { panic!() };
    assert!(done_m > 0.05 && done_m < 0.2, "where it stood: {done_m}");
    let waiting = &run.commands
        [run.commands.len() - (LATE_DATA_PATIENCE.as_millis() / STEP.as_millis()) as usize..];
    assert!(waiting.iter().all(|c| c.is_zero()), "stopped while it waited");
}

#[test]
fn odometry_late_for_a_moment_pauses_the_motion_which_then_goes_on() {
    let lost = Duration::from_millis(800)..Duration::from_millis(1300);
    let run = run_with(vec![drive(1.0)], Base::at(0.0, 0.0, 0.0), Some(lost.clone()), None);
    assert!((achieved(&run).forward_m - 1.0).abs() < 0.01, "{:?}", run.action);
    let paused = &run.commands[(lost.start.as_millis() / STEP.as_millis()) as usize
        ..(lost.end.as_millis() / STEP.as_millis()) as usize];
    assert!(paused.iter().all(|c| c.is_zero()), "no command but zero while odometry was late");
}

#[test]
fn a_stop_while_odometry_is_late_ends_the_motion_as_stopped() {
    let run = run_with(
        vec![drive(1.0)],
        Base::at(0.0, 0.0, 0.0),
        Some(Duration::from_millis(500)..Duration::MAX),
        Some(Duration::from_millis(700)),
    );
    assert!(matches!(failure(&run).kind, FailureKind::Halted), "{:?}", run.action);
}

#[test]
fn a_stop_ends_the_motion_whatever_segment_is_running() {
    let run = run_with(
        vec![rotate(180.0)],
        Base::at(0.0, 0.0, 0.0),
        None,
        Some(Duration::from_millis(600)),
    );
    let stopped = failure(&run);
    assert_eq!(stopped.kind, FailureKind::Halted);
    let Report::Rotate { done_rad, goal_rad } = stopped.report else { panic!("{stopped:?}") };
    assert!(done_rad > 0.1 && done_rad < goal_rad, "{done_rad}");
    // A stop during the first segment: the rest never starts.
    let run = run_with(
        vec![drive(0.3), rotate(90.0)],
        Base::at(0.0, 0.0, 0.0),
        None,
        Some(Duration::from_millis(500)),
    );
    assert_eq!(failure_kind(&run), FailureKind::Halted);
    assert!(matches!(failure(&run).report, Report::Drive { .. }));
    assert!(run.base.pose.yaw_rad.abs() < 0.05, "the turn did not run: {}", run.base.pose.yaw_rad);
}

fn failure_kind(run: &Run) -> FailureKind {
    failure(run).kind
}

#[test]
fn a_base_that_does_not_move_times_out_within_the_budget() {
    let mut base = Base::at(0.0, 0.0, 0.0);
    base.stuck = true;
    let run = run(vec![drive(0.5)], base);
    let failure = failure(&run);
    assert_eq!(failure.kind, FailureKind::Timeout { budget: drive_time_limit(0.5) });
    assert!(
        run.elapsed > drive_time_limit(0.5) && run.elapsed <= drive_time_limit(0.5) + STEP,
        "{:?}",
        run.elapsed
    );
    let mut base = Base::at(0.0, 0.0, 0.0);
    base.stuck = true;
    assert!(matches!(
        failure_kind(&run_with(vec![rotate(90.0)], base, None, None)),
        FailureKind::Timeout { .. }
    ));
}

#[test]
fn progress_comes_every_half_second_and_says_where_the_motion_stands() {
    let run = run(vec![drive(1.0)], Base::at(0.0, 0.0, 0.0));
    let expected = (run.elapsed.as_secs_f64() / PROGRESS_PERIOD.as_secs_f64()) as usize;
    assert!(
        run.progress.len() + 1 >= expected && run.progress.len() <= expected,
        "{} reports in {:?}",
        run.progress.len(),
        run.elapsed
    );
    let done: Vec<f64> = run
        .progress
        .iter()
        .map(|r| match r {
            Report::Drive { done_m, .. } => *done_m,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(done.windows(2).all(|w| w[1] >= w[0]), "done grows: {done:?}");
}

#[test]
fn an_empty_motion_is_done_at_once() {
    let run = run(Vec::new(), Base::at(0.0, 0.0, PI / 3.0));
    assert_eq!(achieved(&run).duration_s, 0.0);
}
