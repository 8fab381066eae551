//! What the motion tools share: running a base motion (the sans-IO
//! controller of `crate::motion`) against the governed base driver, and
//! the errors of a motion a `stop` or the governor ended.
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::fresh::fresh_odometry;
use super::joints::{deg, stopped_error};
use crate::governor::{BaseVelocity, Restriction, Rule};
use crate::motion::{
    Achieved, Action, BaseMotion, Failure, FailureKind, Reading, Report, Segment, Settings,
    StepInput,
};
use crate::protocol::{AiccError, ErrorCode};
use crate::robot::base_driver::BaseDriver;
use crate::robot::{OdometrySample, PortError};
use crate::tools::ToolContext;

/// The error of a motion the governor held at zero: `execution_failed`,
/// retryable (the way may clear, or the agent may turn and retry), naming
/// each cause and rule and how far the motion got (`progress`, e.g.
/// "after 1.47 of 2.00 m"), e.g. "move stopped by an obstacle 0.19 m ahead
/// (stop distance 0.20 m) after 1.47 of 2.00 m (governor rule
/// obstacle_ahead): turn or back away, then retry".
pub fn governor_stop_error(what: &str, blocking: &[Restriction], progress: &str) -> AiccError {
    let causes: Vec<&str> = blocking.iter().map(|r| r.cause.as_str()).collect();
    let rules: Vec<&str> = blocking.iter().map(|r| r.name()).collect();
    let (causes, rules) = if causes.is_empty() {
        ("the safety governor".to_string(), "none".to_string())
    } else {
        (causes.join(" and "), rules.join(", "))
    };
    let plural = if blocking.len() > 1 { "s" } else { "" };
    let in_the_way = blocking.iter().any(|r| {
        matches!(
            r.rule,
            Rule::ObstacleAhead | Rule::ObstacleBehind | Rule::ContactLatched | Rule::Geofence
        )
    });
    let arm_out = blocking.iter().any(|r| r.rule == Rule::ArmOutsideOutline);
    let remedy = if arm_out {
        "stow the arm (interact pose stow), then retry"
    } else if in_the_way {
        "turn or back away, then retry"
    } else {
        "retry once the robot's data is fresh"
    };
    AiccError::execution_failed(
        true,
        format!("{what} stopped by {causes} {progress} (governor rule{plural} {rules}): {remedy}"),
    )
}

/// The structured part of the last `command` progress event of a motion
/// the governor stopped: the rules and, for an obstacle, its distance.
pub fn blocked_fields(blocking: &[Restriction]) -> Value {
    let distance_m = blocking.iter().find_map(|r| r.distance_m).filter(|d| d.is_finite());
    json!({ "blocked_by": blocking.iter().map(|r| r.name()).collect::<Vec<_>>(), "obstacle_m": distance_m })
}

/// `value` with two decimals, never "-0.00" (a move held from the start
/// has odometry noise of a millimetre either way).
pub fn two_decimals(value: f64) -> String {
    let text = format!("{value:.2}");
    if text == "-0.00" {
        "0.00".into()
    } else {
        text
    }
}

/// Adds `extra`'s fields to the object `target`.
fn merge(target: &mut Value, extra: Value) {
    if let (Some(target), Value::Object(extra)) = (target.as_object_mut(), extra) {
        target.extend(extra);
    }
}

/// Stops the base if the move ends any way but normally (error, or the
/// call's task dropped because the agent went away).
pub struct StopOnDrop(pub Arc<BaseDriver>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// A reading for the motion controller.
pub fn reading(sample: &OdometrySample) -> Reading {
    Reading {
        pose: crate::governor::Pose2D {
            x_m: sample.position_m.x,
            y_m: sample.position_m.y,
            yaw_rad: sample.orientation.euler_angles().2,
        },
        linear_speed_mps: sample.linear_velocity_mps.norm(),
        angular_rate_radps: sample.angular_velocity_radps.z,
    }
}

/// A reading for the motion controller, carried forward from a sample
/// `age_s` old along its own velocities: the base kept moving while the
/// sample travelled, and steering by where it was brakes late (0.3 s of
/// lag at 0.22 m/s is 6.6 cm past the goal). At most [`MAX_CARRY_S`], and
/// never faster than `commanded`, the base's last command: odometry late
/// because the robot's side stalled (a simulator's stalled tick: no time
/// passed for the robot) while the governor stopped the base for that
/// very lateness must not be carried on at the old rate (a TurtleBot 3's
/// 90 degree turn ended 4.6 degrees short on such a reading).
pub fn reading_now(sample: &OdometrySample, age_s: f64, commanded: BaseVelocity) -> Reading {
    let then = reading(sample);
    let dt = age_s.clamp(0.0, MAX_CARRY_S);
    let (v, w) = (sample.linear_velocity_mps.x, sample.angular_velocity_radps.z);
    let (v, w) = (if v.is_finite() { v } else { 0.0 }, if w.is_finite() { w } else { 0.0 });
    let (v, w) = (at_most(v, commanded.linear_mps), at_most(w, commanded.angular_radps));
    let heading = then.pose.yaw_rad + w * dt / 2.0;
    let pose = crate::governor::Pose2D {
        x_m: then.pose.x_m + v * dt * heading.cos(),
        y_m: then.pose.y_m + v * dt * heading.sin(),
        yaw_rad: crate::governor::wrap_angle(then.pose.yaw_rad + w * dt),
    };
    Reading { pose, ..then }
}

/// The longest a reading is carried forward, s (the odometry's max age).
const MAX_CARRY_S: f64 = 0.5;

/// `measured`, no faster than `commanded` and zero against it.
fn at_most(measured: f64, commanded: f64) -> f64 {
    if measured * commanded <= 0.0 {
        0.0
    } else {
        measured.signum() * measured.abs().min(commanded.abs())
    }
}

/// Runs `segments` on the base from the latest fresh odometry, for the
/// call in `ctx` (progress events go to its session, named `tool`), as
/// the motion begun in stop generation `generation`. The base is stopped
/// whichever way the motion ends but its goal.
pub async fn run(
    ctx: &ToolContext,
    tool: &str,
    segments: Vec<Segment>,
    generation: u64,
) -> Result<Achieved, AiccError> {
    if let Some(error) = ctx.base.output_unavailable() {
        return Err(output_unavailable_error(tool, &error, false));
    }
    let start = fresh_odometry(ctx)?;
    let settings =
        Settings { limits: *ctx.base.limits(), tolerance_m: ctx.config.base.move_tolerance_m };
    let mut motion = BaseMotion::new(segments, settings, reading(&start), Instant::now());
    let _stop_guard = StopOnDrop(ctx.base.clone());
    let period = Duration::from_secs_f64(1.0 / ctx.config.base.control_rate_hz);
    // The first step runs at once, not at the interval's first tick: tokio
    // rounds a timer up to its next millisecond and fires it only when its
    // driver turns, which cost the base's first command 1 to 2 ms.
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let verdict = |velocity: BaseVelocity| ctx.base.blocked_by(velocity);
    let mut first = true;
    loop {
        if !std::mem::take(&mut first) {
            ticker.tick().await;
        }
        let now = Instant::now();
        let mut halted = ctx.base.halted_since(generation);
        loop {
            let odometry = fresh_odometry(ctx)
                .map(|sample| {
                    reading_now(
                        &sample,
                        sample.age(ctx.sensors.now()).effective().as_secs_f64(),
                        ctx.base.last_command(),
                    )
                })
                .map_err(|error| error.message);
            let output = motion.step(StepInput { now, odometry, verdict: &verdict, halted });
            if let Some(report) = output.progress {
                ctx.event_for_session("command", progress_event(ctx, tool, &report, None));
            }
            match output.action {
                Action::Drive(velocity) => {
                    if let Some(error) = ctx.base.output_unavailable() {
                        ctx.base.stop();
                        return Err(output_unavailable_error(tool, &error, true));
                    }
                    if !ctx.base.request(generation, velocity, now) {
                        // A stop came between the check and the request: step again to end.
                        halted = true;
                        continue;
                    }
                }
                Action::Finish => ctx.base.finish(),
                Action::Done(achieved) => return Ok(achieved),
                Action::Failed(failure) => {
                    ctx.base.stop();
                    if matches!(failure.kind, FailureKind::Halted) {
                        if let Some(jump) = ctx.base.jump_since(generation) {
                            return Err(AiccError::execution_failed(true, format!("{tool} ended: {jump}; the robot was stopped. Check where it is (proprioception, vision), then retry")));
                        }
                    }
                    if let FailureKind::Blocked(blocking) = &failure.kind {
                        if !matches!(failure.report, Report::Rotate { .. }) {
                            ctx.event_for_session(
                                "command",
                                progress_event(ctx, tool, &failure.report, Some(blocking)),
                            );
                        }
                    }
                    return Err(motion_error(tool, &failure));
                }
            }
            break;
        }
    }
}

/// A `command` progress event: where the segment stands and, for a
/// motion the governor stopped, the rules and the obstacle's distance.
fn progress_event(
    ctx: &ToolContext,
    tool: &str,
    report: &Report,
    blocked: Option<&[Restriction]>,
) -> Value {
    let mut event = json!({ "call_id": ctx.call_id, "tool": tool, "state": "progress" });
    let fields = match *report {
        Report::Drive { done_m, goal_m } => {
            json!({ "done_m": done_m, "remaining_m": goal_m - done_m })
        }
        Report::Rotate { done_rad, goal_rad } => {
            json!({ "done_deg": deg(done_rad), "remaining_deg": deg(goal_rad - done_rad) })
        }
        Report::Timed { done_m, elapsed_s, .. } => json!({ "done_m": done_m, "done_s": elapsed_s }),
    };
    merge(&mut event, fields);
    if let Some(blocking) = blocked {
        merge(&mut event, blocked_fields(blocking));
    }
    event
}

/// The AICC error of a motion that ended early.
/// A motion refused (or ended) because its commands cannot reach the
/// base: the port says why and whether it may pass.
fn output_unavailable_error(tool: &str, error: &PortError, moving: bool) -> AiccError {
    let outcome = if moving { "the base was told to stop" } else { "nothing was sent" };
    AiccError::new(
        ErrorCode::ToolUnavailable,
        error.retryable(),
        format!("{tool} cannot drive the base: {error}; {outcome}"),
    )
}

pub fn motion_error(tool: &str, failure: &Failure) -> AiccError {
    let what = match failure.report {
        Report::Rotate { .. } => "turn",
        Report::Drive { .. } | Report::Timed { .. } => "move",
    };
    match &failure.kind {
        // While driving or turning, data gone stale stops the base; while
        // settling (or in a timed move) the message is the sensor's own.
        FailureKind::Odometry(message) => match (failure.settling, failure.report) {
            (false, Report::Drive { .. } | Report::Rotate { .. }) => {
                AiccError::execution_failed(true, format!("stopped: {message}"))
            }
            _ => AiccError::execution_failed(true, message.clone()),
        },
        FailureKind::Halted => match failure.report {
            Report::Rotate { done_rad, goal_rad } => stopped_error(&format!(
                "the turn (after {:.1}° of {:.1}°)",
                deg(done_rad),
                deg(goal_rad)
            )),
            Report::Drive { .. } | Report::Timed { .. } => stopped_error(&format!("the {tool}")),
        },
        FailureKind::Blocked(blocking) => {
            let progress = match failure.report {
                Report::Drive { done_m, goal_m } => {
                    format!("after {} of {} m", two_decimals(done_m), two_decimals(goal_m))
                }
                Report::Rotate { done_rad, goal_rad } => {
                    format!("after {:.1}° of {:.1}°", deg(done_rad), deg(goal_rad))
                }
                Report::Timed { done_m, elapsed_s, duration_s } => format!(
                    "after {elapsed_s:.1} of {duration_s:.1} s ({} m)",
                    two_decimals(done_m)
                ),
            };
            governor_stop_error(what, blocking, &progress)
        }
        FailureKind::Timeout { budget } => {
            let done = match failure.report {
                Report::Drive { done_m, goal_m } => format!("{done_m:.3} m of {goal_m:.3} m done"),
                Report::Rotate { done_rad, goal_rad } => {
                    format!("{:.1}° of {:.1}° done", deg(done_rad), deg(goal_rad))
                }
                Report::Timed { done_m, elapsed_s, .. } => {
                    format!("{done_m:.3} m in {elapsed_s:.1} s")
                }
            };
            AiccError::new(
                ErrorCode::Timeout,
                true,
                format!(
                    "{what} did not reach its goal within {:.1} s: {done}",
                    budget.as_secs_f64()
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::motion::{BlockedWatch, BLOCKED_SETTLE, LATE_DATA_PATIENCE};
    use aicc_control::testing::{blocking_forward, fresh_inputs};

    #[test]
    fn a_governor_stop_names_the_cause_the_rule_and_how_far_the_move_got() {
        let wall = blocking_forward(
            crate::governor::SafetyInputs { obstacle_ahead_m: Some(0.19), ..fresh_inputs() },
            false,
        );
        let error = governor_stop_error("move", &wall, "after 1.47 of 2.00 m");
        assert_eq!(error.code, ErrorCode::ExecutionFailed);
        assert!(error.retryable, "the agent may turn and retry");
        assert_eq!(
            error.message,
            "move stopped by an obstacle 0.190 m ahead (stop distance 0.20 m) after 1.47 of 2.00 m (governor rule obstacle_ahead): turn or back away, then retry"
        );
        assert_eq!(
            blocked_fields(&wall),
            json!({ "blocked_by": ["obstacle_ahead"], "obstacle_m": 0.19 })
        );
        // A contact and an obstacle together: both named.
        let both = blocking_forward(
            crate::governor::SafetyInputs {
                in_contact: true,
                obstacle_ahead_m: Some(0.1),
                ..fresh_inputs()
            },
            true,
        );
        let message = governor_stop_error("move", &both, "after 0.00 of 0.50 m").message;
        assert!(
            message.starts_with("move stopped by a bumper contact and an obstacle 0.100 m ahead"),
            "{message}"
        );
        assert!(message.contains("(governor rules contact_latched, obstacle_ahead)"), "{message}");
        // Stale data holds turning too; the remedy differs.
        let stale = blocking_forward(
            crate::governor::SafetyInputs { imu_age_s: Some(2.0), ..fresh_inputs() },
            false,
        );
        let message = governor_stop_error("turn", &stale, "after 10.0° of 90.0°").message;
        assert!(
            message.starts_with("turn stopped by stale IMU data")
                && message.ends_with("retry once the robot's data is fresh"),
            "{message}"
        );
        assert_eq!(
            blocked_fields(&stale),
            json!({ "blocked_by": ["imu_stale"], "obstacle_m": null })
        );
    }

    #[test]
    fn a_reading_is_carried_forward_by_its_age_along_its_velocity_no_faster_than_commanded() {
        use nalgebra::{UnitQuaternion, Vector3};
        let sample = OdometrySample {
            frame_id: "odom".into(),
            child_frame_id: "base_footprint".into(),
            position_m: Vector3::new(1.0, 2.0, 0.0),
            orientation: UnitQuaternion::from_euler_angles(0.0, 0.0, std::f64::consts::FRAC_PI_2),
            linear_velocity_mps: Vector3::new(0.2, 0.0, 0.0),
            angular_velocity_radps: Vector3::zeros(),
            stamp_s: 0.0,
            received: Instant::now(),
        };
        let moving = BaseVelocity { linear_mps: 0.22, angular_radps: 1.5 };
        let now = reading_now(&sample, 0.3, moving);
        assert!(
            (now.pose.x_m - 1.0).abs() < 1e-9 && (now.pose.y_m - 2.06).abs() < 1e-9,
            "0.3 s at 0.2 m/s along +y: {:?}",
            now.pose
        );
        let (fresh, as_is) = (reading_now(&sample, 0.0, moving), reading(&sample));
        assert!(
            (fresh.pose.x_m - as_is.pose.x_m).abs()
                + (fresh.pose.y_m - as_is.pose.y_m).abs()
                + (fresh.pose.yaw_rad - as_is.pose.yaw_rad).abs()
                < 1e-12,
            "a fresh sample as it is"
        );
        let far = reading_now(&sample, 5.0, moving);
        assert!((far.pose.y_m - 2.1).abs() < 1e-9, "carried at most 0.5 s: {:?}", far.pose);
        // Commanded slower than measured: carried at the command.
        let slower =
            reading_now(&sample, 0.3, BaseVelocity { linear_mps: 0.1, angular_radps: 0.0 });
        assert!((slower.pose.y_m - 2.03).abs() < 1e-9, "{:?}", slower.pose);
        let turning = OdometrySample {
            linear_velocity_mps: Vector3::zeros(),
            angular_velocity_radps: Vector3::new(0.0, 0.0, 1.0),
            ..sample
        };
        assert!(
            (reading_now(&turning, 0.2, moving).pose.yaw_rad - (std::f64::consts::FRAC_PI_2 + 0.2))
                .abs()
                < 1e-9
        );
        // Stopped (the governor held the base for late data): as it is.
        let held = reading_now(&turning, 0.3, BaseVelocity::ZERO);
        assert!((held.pose.yaw_rad - std::f64::consts::FRAC_PI_2).abs() < 1e-12, "{held:?}");
    }

    #[test]
    fn a_move_held_by_stale_depth_fails_naming_the_sensing_rule() {
        use crate::governor::safety::{safety_envelope_with_sensing, SensingHealth, SensorHealth};
        use crate::governor::{BaseLimits, SafetyConfig, SafetyState};
        let limits = BaseLimits {
            max_linear_mps: 0.22,
            max_angular_radps: 1.5,
            max_linear_accel_mps2: 1.0,
            max_angular_accel_radps2: 3.0,
        };
        let sensing = SensingHealth {
            depth: SensorHealth::Stale { age_s: Some(3.0), max_age_s: 1.0 },
            bumper: SensorHealth::Fresh,
            ..SensingHealth::NOT_CONFIGURED
        };
        let envelope = safety_envelope_with_sensing(
            &limits,
            &SafetyConfig::DEFAULT,
            &SafetyState::new(),
            &fresh_inputs(),
            &sensing,
        );
        let blocking: Vec<Restriction> = envelope
            .blocking(BaseVelocity { linear_mps: 0.1, angular_radps: 0.0 })
            .into_iter()
            .cloned()
            .collect();
        let mut watch = BlockedWatch::default();
        let t0 = Instant::now();
        assert_eq!(watch.observe(blocking.clone(), t0, BLOCKED_SETTLE), None);
        assert_eq!(
            watch.observe(blocking.clone(), t0 + BLOCKED_SETTLE, BLOCKED_SETTLE),
            None,
            "late data is waited out longer"
        );
        let held = watch
            .observe(blocking.clone(), t0 + LATE_DATA_PATIENCE, BLOCKED_SETTLE)
            .expect("held for the patience");
        let error = governor_stop_error("move", &held, "after 0.00 of 1.00 m");
        assert_eq!(error.code, ErrorCode::ExecutionFailed);
        assert_eq!(
            error.message,
            "move stopped by stale obstacle sensing (the depth camera: its last reading is 3.00 s old (max 1.00 s)) after 0.00 of 1.00 m (governor rule obstacle_sensing_stale): retry once the robot's data is fresh"
        );
        assert_eq!(
            blocked_fields(&held),
            json!({ "blocked_by": ["obstacle_sensing_stale"], "obstacle_m": null })
        );
        assert!(
            envelope.blocking(BaseVelocity { linear_mps: -0.1, angular_radps: 0.0 }).is_empty(),
            "backing up is not held"
        );
    }

    #[test]
    fn distances_in_messages_never_read_minus_zero() {
        assert_eq!(two_decimals(-0.001), "0.00");
        assert_eq!(two_decimals(-0.006), "-0.01");
        assert_eq!(two_decimals(1.4649), "1.46");
    }

    #[test]
    fn the_stopped_error_says_a_stop_interrupted_the_motion() {
        assert!(stopped_error("turn").message.contains("interrupted by a `stop` call"));
    }

    #[test]
    fn each_failure_keeps_the_wording_agents_and_scenarios_rely_on() {
        let drive = Report::Drive { done_m: 0.1234, goal_m: 0.5 };
        let failure = |kind, report, settling| Failure { kind, report, settling };
        let stale = motion_error(
            "move",
            &failure(FailureKind::Odometry("data on odom is 900 ms old".into()), drive, false),
        );
        assert_eq!(
            (stale.code, stale.retryable, stale.message.as_str()),
            (ErrorCode::ExecutionFailed, true, "stopped: data on odom is 900 ms old")
        );
        assert_eq!(
            motion_error("move", &failure(FailureKind::Odometry("gone".into()), drive, true))
                .message,
            "gone",
            "while settling: the sensor's own message"
        );
        let timed = Report::Timed { done_m: 0.05, elapsed_s: 0.3, duration_s: 2.0 };
        assert_eq!(
            motion_error("move", &failure(FailureKind::Odometry("gone".into()), timed, false))
                .message,
            "gone"
        );
        let halted = motion_error("move", &failure(FailureKind::Halted, drive, false));
        assert_eq!(
            (halted.retryable, halted.message.as_str()),
            (false, "the move was interrupted by a `stop` call; the robot was halted")
        );
        let turn = Report::Rotate { done_rad: 0.5, goal_rad: 1.0 };
        assert!(motion_error("turn", &failure(FailureKind::Halted, turn, false))
            .message
            .starts_with("the turn (after 28.6° of 57.3°) was interrupted"));
        let timeout = motion_error(
            "move",
            &failure(FailureKind::Timeout { budget: Duration::from_secs(9) }, drive, false),
        );
        assert_eq!(
            (timeout.code, timeout.message.as_str()),
            (
                ErrorCode::Timeout,
                "move did not reach its goal within 9.0 s: 0.123 m of 0.500 m done"
            )
        );
        let timeout = motion_error(
            "turn",
            &failure(FailureKind::Timeout { budget: Duration::from_secs(9) }, turn, false),
        );
        assert_eq!(
            timeout.message,
            "turn did not reach its goal within 9.0 s: 28.6° of 57.3° done"
        );
        let wall = blocking_forward(
            crate::governor::SafetyInputs { obstacle_ahead_m: Some(0.19), ..fresh_inputs() },
            false,
        );
        let blocked =
            motion_error("move", &failure(FailureKind::Blocked(wall.clone()), timed, false));
        assert!(blocked.message.starts_with("move stopped by an obstacle 0.190 m ahead (stop distance 0.20 m) after 0.3 of 2.0 s (0.05 m)"), "{}", blocked.message);
        let blocked = motion_error("move", &failure(FailureKind::Blocked(wall), drive, false));
        assert!(blocked.message.contains(" after 0.12 of 0.50 m "), "{}", blocked.message);
    }
}
