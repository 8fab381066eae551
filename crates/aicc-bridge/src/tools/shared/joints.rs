//! What the joint tools share (`look_at`, `interact`, the head part of
//! `turn`, the hold in `stop`): limit errors worded for an agent, the
//! joint tools' availability, and running a trajectory through the
//! governed joint driver with a deadline, then settling on joint_states.
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::fresh::{fresh_joint_states, measured, silence_reason};
use super::motion::stopped_error;
use crate::governor::JointError;
use crate::protocol::{AiccError, ErrorCode};
use crate::robot::{Controller, Sensor, TrajectoryGoal, TrajectoryOutcome};
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
    silence_reason("joint states", &topic, ctx.sensors.received(Sensor::JointStates), silent_after, now)
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

/// Sends `goal` (starting from the measured positions `start`) to
/// `controller` through the governed joint driver and waits for it, at
/// most the planned duration plus slack (then the goal is cancelled: the
/// future is dropped). A goal the driver refuses is `invalid_input`
/// naming the limit; a controller failure is `execution_failed` carrying
/// its error code and string; an interruption by `stop` says so.
pub async fn run_trajectory(ctx: &ToolContext, controller: Controller, goal: TrajectoryGoal, start: &[f64], planned_s: f64, what: &str, halts: u64) -> Result<TrajectoryOutcome, AiccError> {
    let deadline = Duration::from_secs_f64(planned_s + TRAJECTORY_SLACK_S);
    let sent = ctx.joints.follow(controller, goal, Some(start)).map_err(joint_error)?;
    match tokio::time::timeout(deadline, sent).await {
        Err(_) => Err(AiccError::new(ErrorCode::Timeout, true, format!("the {what} did not finish within {:.1} s (planned {planned_s:.2} s); the goal was cancelled", deadline.as_secs_f64()))),
        Ok(Err(error)) => Err(AiccError::execution_failed(error.retryable(), format!("the {what} controller: {error}"))),
        Ok(Ok(outcome)) if !trajectory_succeeded(&outcome) => {
            if ctx.joints.halted_since(halts) {
                return Err(stopped_error(&format!("the {what} motion")));
            }
            Err(AiccError::execution_failed(
                false,
                format!("the {what} controller reported error_code {} ({}): {}", outcome.error_code, trajectory_error_name(outcome.error_code), outcome.error_string),
            ))
        }
        Ok(Ok(outcome)) => Ok(outcome),
    }
}

/// Reads joint_states until every joint of `names` is within
/// `SETTLED_RAD` of `goal` or `SETTLE_TIMEOUT` passes: the positions last
/// read and whether they settled.
pub async fn settle(ctx: &ToolContext, names: &[String], goal: &[f64]) -> Result<(Vec<f64>, bool), AiccError> {
    let started = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_millis(20));
    loop {
        ticker.tick().await;
        let states = fresh_joint_states(ctx)?;
        let actual = names.iter().map(|n| measured(ctx, &states, n)).collect::<Result<Vec<f64>, _>>()?;
        let settled = actual.iter().zip(goal).all(|(a, g)| (a - g).abs() <= SETTLED_RAD);
        if settled || started.elapsed() >= SETTLE_TIMEOUT {
            return Ok((actual, settled));
        }
    }
}

/// A speed for joint motion: the request (or `default`), limited to the
/// URDF velocity of every joint in `names`. (speed, clamped?)
pub fn joint_speed(ctx: &ToolContext, names: &[String], requested: Option<f64>, default: f64) -> Result<(f64, bool), AiccError> {
    let mut speed = requested.unwrap_or(default);
    let mut clamped = false;
    for name in names {
        let (applied, was_clamped) = ctx.joints.limits().clamp_velocity(name, speed).map_err(joint_error)?;
        clamped |= was_clamped && requested.is_some();
        speed = applied.abs();
    }
    Ok((speed, clamped))
}

/// The duration that moves every joint from `from` to `to` within `speed`
/// and its URDF limit (`goal` positions are checked against the limits).
pub fn plan_motion(ctx: &ToolContext, names: &[String], from: &[f64], to: &[f64], speed: f64, min_duration_s: f64) -> Result<f64, AiccError> {
    let mut duration = 0.0f64;
    for ((name, from), to) in names.iter().zip(from).zip(to) {
        duration = duration.max(ctx.joints.limits().plan_duration(name, *from, *to, speed).map_err(joint_error)?);
    }
    Ok(duration.max(min_duration_s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governor::JointLimits;
    use crate::tools::testing::URDF;

    #[test]
    fn joint_errors_name_the_joint_the_limit_and_degrees() {
        let limits = JointLimits::from_urdf(URDF).unwrap();
        let error = joint_error(limits.check_position("head_pan_joint", 170f64.to_radians()).unwrap_err());
        assert_eq!(error.code, ErrorCode::InvalidInput);
        for needle in ["head_pan_joint", "2.5", "170.0°", "143.2°", "URDF"] {
            assert!(error.message.contains(needle), "{needle}: {}", error.message);
        }
    }
}
