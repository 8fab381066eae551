//! What the joint tools share (`look_at`, `interact`, the head part of
//! `turn`): limit errors worded for an agent, the joint tools'
//! availability, and running a motion through the governed joint driver
//! (which plans it within the limits from fresh joint states) with a
//! deadline, then settling on joint_states.
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::fresh::{fresh_joint_states, measured, silence_reason};
use crate::governor::joint_motion::JointMotionState;
use crate::governor::JointError;
use crate::protocol::{AiccError, ErrorCode};
use crate::robot::joint_driver::{GoalRefused, JointStart};
use crate::robot::{Controller, JointStates, PortError, Sensor, TrajectoryOutcome};
use crate::tools::ToolContext;

/// Time allowed beyond the planned duration: the controller's goal time
/// tolerance (1 s by default) plus a slow simulator.
const TRAJECTORY_SLACK_S: f64 = 5.0;

/// The head has settled when every joint is this close to its goal...
const SETTLED_RAD: f64 = 0.2_f64 * std::f64::consts::PI / 180.0;

/// ...or this long after the controller reported success.
const SETTLE_TIMEOUT: Duration = Duration::from_millis(1000);

pub fn deg(rad: f64) -> f64 {
    rad.to_degrees()
}

/// The error a motion tool ends with when a `stop` interrupts it.
pub fn stopped_error(what: &str) -> AiccError {
    AiccError::execution_failed(
        false,
        format!("{what} was interrupted by a `stop` call; the robot was halted"),
    )
}

/// A refused joint goal as an `invalid_input` error: the joint, the value
/// and the URDF limit, in degrees as well for rotating joints.
pub fn joint_error(error: JointError) -> AiccError {
    let text = error.to_string();
    let in_degrees = match &error {
        JointError::OutOfRange { value, lower, upper, unit: "rad", .. } => {
            format!(" (= {:.1}°; allowed [{:.1}°, {:.1}°])", deg(*value), deg(*lower), deg(*upper))
        }
        _ => String::new(),
    };
    AiccError::invalid_input(format!("{text}{in_degrees}; the limits come from the robot's URDF"))
}

/// Why a joint tool cannot serve now: its controller is not configured, or
/// joint states are missing or silent.
pub fn joint_tool_unavailable(ctx: &ToolContext, now: Instant, actions: &[&str]) -> Option<String> {
    if actions.iter().all(|a| a.is_empty()) {
        return Some("no controller is configured for it".into());
    }
    let silent_after = ctx.live.unavailable_after();
    let topic = ctx.sensors.topic(Sensor::JointStates);
    // The topic is known to be configured here: say so only when it is empty.
    let topic = if topic.is_empty() { "joint_states (not configured)".to_string() } else { topic };
    silence_reason(
        "joint states",
        &topic,
        ctx.sensors.received(Sensor::JointStates),
        silent_after,
        now,
    )
}

/// The name of a FollowJointTrajectory error code.
pub fn trajectory_error_name(code: i32) -> &'static str {
    match code {
        0 => "SUCCESSFUL",
        -1 => "INVALID_GOAL",
        -2 => "INVALID_JOINTS",
        -3 => "OLD_HEADER_TIMESTAMP",
        -4 => "PATH_TOLERANCE_VIOLATED",
        -5 => "GOAL_TOLERANCE_VIOLATED",
        _ => "UNKNOWN",
    }
}

/// Whether an outcome is a success. The port reports a goal that ended
/// other than Succeeded (cancelled, aborted) with "goal ended ..." in the
/// error string, even where the controller left error_code at 0.
pub fn trajectory_succeeded(outcome: &TrajectoryOutcome) -> bool {
    outcome.error_code == 0 && !outcome.error_string.starts_with("goal ended ")
}

pub fn outcome_json(outcome: &TrajectoryOutcome) -> Value {
    json!({ "error_code": outcome.error_code, "error_name": trajectory_error_name(outcome.error_code), "error_string": outcome.error_string })
}

/// A goal the driver refused, for an agent: a limit is `invalid_input`
/// naming it; joint states not fresh enough, retryable; a `stop` that came
/// first, the stop's own error.
pub fn refused_error(refused: GoalRefused, what: &str) -> AiccError {
    match refused {
        GoalRefused::Limits(error) => joint_error(error),
        GoalRefused::StartUnknown(reason) => {
            AiccError::execution_failed(true, format!("the {what} goal was not sent: {reason}"))
        }
        GoalRefused::Halted => {
            stopped_error(&format!("the {what} motion (refused before it was sent)"))
        }
    }
}

/// A motion as it was sent: where it started and how long it was planned.
pub struct MotionSent {
    pub start: JointStart,
    pub duration_s: f64,
    pub outcome: TrajectoryOutcome,
}

/// Moves `joints` to `goal` through the governed joint driver (planned
/// from where they are now, within every limit, at no more than `speed`,
/// taking at least `min_duration_s`) and waits for it, at most the
/// planned duration plus slack (then the goal is cancelled: the future is
/// dropped). A goal the driver refuses says why (see [`refused_error`]); a
/// controller failure is `execution_failed` carrying its error code and
/// string; an interruption by `stop` says so.
#[allow(clippy::too_many_arguments)]
pub async fn run_motion(
    ctx: &ToolContext,
    controller: Controller,
    joints: &[String],
    goal: &[f64],
    speed: f64,
    min_duration_s: f64,
    what: &str,
    halts: u64,
) -> Result<MotionSent, AiccError> {
    let motion = ctx
        .joints
        .move_joints(controller, joints, goal, speed, min_duration_s, halts)
        .map_err(|e| refused_error(e, what))?;
    let planned_s = motion.duration_s();
    let deadline = Duration::from_secs_f64(planned_s + TRAJECTORY_SLACK_S);
    let start = motion.start;
    let outcome = match tokio::time::timeout(deadline, motion.outcome).await {
        Err(_) => return Err(AiccError::new(ErrorCode::Timeout, true, format!("the {what} did not finish within {:.1} s (planned {planned_s:.2} s); the goal was cancelled", deadline.as_secs_f64()))),
        Ok(Err(error @ (PortError::Halted { .. } | PortError::HaltedBeforeSending { .. }))) => return Err(stopped_error(&format!("the {what} motion ({error})"))),
        Ok(Err(error)) => return Err(AiccError::execution_failed(error.retryable(), format!("the {what} controller: {error}"))),
        Ok(Ok(outcome)) => outcome,
    };
    if !trajectory_succeeded(&outcome) {
        if ctx.joints.halted_since(halts) {
            return Err(stopped_error(&format!("the {what} motion")));
        }
        return Err(AiccError::execution_failed(
            false,
            format!(
                "the {what} controller reported error_code {} ({}): {}",
                outcome.error_code,
                trajectory_error_name(outcome.error_code),
                outcome.error_string
            ),
        ));
    }
    Ok(MotionSent { start, duration_s: planned_s, outcome })
}

/// Reads joint_states until every joint of `names` is within
/// `SETTLED_RAD` of `goal` or `SETTLE_TIMEOUT` passes: the positions last
/// read and whether they settled.
pub async fn settle(
    ctx: &ToolContext,
    names: &[String],
    goal: &[f64],
) -> Result<(Vec<f64>, bool), AiccError> {
    let started = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_millis(20));
    loop {
        ticker.tick().await;
        let states = fresh_joint_states(ctx)?;
        let actual =
            names.iter().map(|n| measured(ctx, &states, n)).collect::<Result<Vec<f64>, _>>()?;
        let settled = actual.iter().zip(goal).all(|(a, g)| (a - g).abs() <= SETTLED_RAD);
        if settled || started.elapsed() >= SETTLE_TIMEOUT {
            return Ok((actual, settled));
        }
    }
}

/// A speed for joint motion: the request (or `default`), limited to the
/// URDF velocity of every joint in `names`. (speed, clamped?)
pub fn joint_speed(
    ctx: &ToolContext,
    names: &[String],
    requested: Option<f64>,
    default: f64,
) -> Result<(f64, bool), AiccError> {
    let mut speed = requested.unwrap_or(default);
    let mut clamped = false;
    for name in names {
        let (applied, was_clamped) =
            ctx.joints.limits().clamp_velocity(name, speed).map_err(joint_error)?;
        clamped |= was_clamped && requested.is_some();
        speed = applied.abs();
    }
    Ok((speed, clamped))
}

/// How long a motion of `names` from where `states` has them to `to`
/// will take within `speed` and every limit (the driver plans it again
/// from the joint states when it is sent); `to` is checked against the limits.
pub fn plan_motion(
    ctx: &ToolContext,
    names: &[String],
    states: &JointStates,
    to: &[f64],
    speed: f64,
    min_duration_s: f64,
) -> Result<f64, AiccError> {
    let mut start = JointMotionState {
        positions: Vec::with_capacity(names.len()),
        velocities: Vec::with_capacity(names.len()),
    };
    for name in names {
        start.positions.push(measured(ctx, states, name)?);
        let index = states.names.iter().position(|n| n == name);
        start.velocities.push(
            index
                .and_then(|i| states.velocities.get(i))
                .copied()
                .filter(|v| v.is_finite())
                .unwrap_or(0.0),
        );
    }
    let points = ctx
        .joints
        .limits()
        .plan_motion(names, &start, to, speed, min_duration_s)
        .map_err(joint_error)?;
    Ok(points.last().map_or(0.0, |p| p.time_s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governor::JointLimits;
    use crate::tools::testing::URDF;

    #[test]
    fn joint_errors_name_the_joint_the_limit_and_degrees() {
        let limits = JointLimits::from_urdf(URDF).unwrap();
        let error =
            joint_error(limits.check_position("head_pan_joint", 170f64.to_radians()).unwrap_err());
        assert_eq!(error.code, ErrorCode::InvalidInput);
        for needle in ["head_pan_joint", "2.5", "170.0°", "143.2°", "URDF"] {
            assert!(error.message.contains(needle), "{needle}: {}", error.message);
        }
    }
}
