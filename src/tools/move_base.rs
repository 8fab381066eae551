//! `move`: drive the base a signed distance along its current heading,
//! closed on odometry, with a speed profile that respects the governor's
//! limits. The result states the displacement actually achieved.
use std::f64::consts::PI;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use nalgebra::Vector2;
use serde_json::{json, Map, Value};

use super::input::optional_number;
use super::proprioception::check_fresh;
use super::{Tool, ToolContext, ToolFuture};
use crate::config::BaseConfig;
use crate::governor::BaseVelocity;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::core::ToolSuccess;
use crate::protocol::{AiccError, ErrorCode};
use crate::robot::base_driver::BaseDriver;
use crate::robot::OdometrySample;

/// Slowest commanded speed while far from the goal: below it, wheel
/// friction may keep the robot from creeping the last millimetres.
const MIN_SPEED_MPS: f64 = 0.02;
/// Gain and cap of the heading hold that keeps the path straight.
const HEADING_GAIN_PER_S: f64 = 2.0;
const MAX_HEADING_CORRECTION_RADPS: f64 = 0.5;
/// The profile plans with this share of the acceleration limit, leaving the
/// governor headroom so that its rate limit does not cause overshoot.
pub(crate) const PLANNING_ACCEL_SHARE: f64 = 0.8;
/// How long to wait for the base to settle after the final stop.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(1);
const SETTLED_SPEED_MPS: f64 = 0.005;
/// How long the governor may forbid the move's direction before the move
/// gives up (brief restrictions, e.g. a flicker of the bumper, are ridden out).
pub(crate) const BLOCKED_GIVE_UP: Duration = Duration::from_millis(300);
/// How often a long move reports progress (`command` events).
pub(crate) const PROGRESS_PERIOD: Duration = Duration::from_millis(500);

pub struct Move {
    max_distance_m: f64,
    max_speed_mps: f64,
}

impl Move {
    pub fn new(base: &BaseConfig) -> Self {
        Self { max_distance_m: base.max_move_distance_m, max_speed_mps: base.max_linear_mps }
    }
}

/// The speed to command with `remaining_m` to go (signed), for a base that
/// may decelerate at `accel_mps2` and go at most `max_speed_mps`.
pub fn profile_speed(remaining_m: f64, max_speed_mps: f64, accel_mps2: f64) -> f64 {
    let braking_limited = (2.0 * accel_mps2 * remaining_m.abs()).sqrt();
    braking_limited.min(max_speed_mps).max(MIN_SPEED_MPS.min(max_speed_mps)).copysign(remaining_m)
}

/// Progress along `heading_rad` from `start` to `now`: (forward, left) metres.
pub fn displacement(start: &OdometrySample, now: &OdometrySample, heading_rad: f64) -> (f64, f64) {
    let delta = Vector2::new(now.position_m.x - start.position_m.x, now.position_m.y - start.position_m.y);
    let forward = Vector2::new(heading_rad.cos(), heading_rad.sin());
    let left = Vector2::new(-heading_rad.sin(), heading_rad.cos());
    (delta.dot(&forward), delta.dot(&left))
}

/// An angle wrapped to (-pi, pi].
pub fn wrap_angle(angle_rad: f64) -> f64 {
    let wrapped = (angle_rad + PI).rem_euclid(2.0 * PI) - PI;
    if wrapped == -PI { PI } else { wrapped }
}

fn yaw_of(sample: &OdometrySample) -> f64 {
    sample.orientation.euler_angles().2
}

/// Stops the base if the move ends any way but normally (error, or the
/// call's task dropped because the agent went away).
pub(crate) struct StopOnDrop(pub(crate) Arc<BaseDriver>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl Tool for Move {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "move",
            class: ToolClass::Actuator,
            description: "Drive by `forward` metres (negative: backwards) and `left` metres (the base turns towards the target, drives straight, and turns back), closed on odometry; or at `velocity_mps` for `duration_s`. Returns when the robot has stopped, with the displacement achieved. Stops early, with the reason, when the safety governor refuses the direction (bumper contact, obstacle, geofence).",
            capability: "can_move_self",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "forward": { "type": "number", "description": "metres along the current heading; negative drives backwards", "minimum": -self.max_distance_m, "maximum": self.max_distance_m },
                    "left": { "type": "number", "description": "metres to the left of the current heading (REP-103 +y); negative: right", "minimum": -self.max_distance_m, "maximum": self.max_distance_m },
                    "speed_mps": { "type": "number", "description": "cruise speed, m/s (default and maximum: the base's limit)", "exclusiveMinimum": 0, "maximum": self.max_speed_mps },
                    "velocity_mps": { "type": "number", "description": "instead of a distance: drive at this velocity (negative: backwards)...", "minimum": -self.max_speed_mps, "maximum": self.max_speed_mps },
                    "duration_s": { "type": "number", "description": "...for this long, seconds", "exclusiveMinimum": 0, "maximum": 60 }
                },
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "requested": { "type": "object" },
                    "achieved": { "type": "object", "properties": { "forward_m": {"type": "number"}, "left_m": {"type": "number"}, "yaw_change_rad": {"type": "number"} } },
                    "duration_s": { "type": "number" },
                    "applied": { "type": "object" }
                },
                "required": ["requested", "achieved", "duration_s", "applied"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        super::odometry_missing(ctx, now)
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        let max_distance_m = self.max_distance_m;
        let max_speed_mps = self.max_speed_mps;
        async move {
            let forward_m = optional_number(&input, "forward", -max_distance_m, max_distance_m)?;
            let left_m = optional_number(&input, "left", -max_distance_m, max_distance_m)?;
            let velocity = optional_number(&input, "velocity_mps", -max_speed_mps, max_speed_mps)?;
            let duration_s = optional_number(&input, "duration_s", 0.0, 60.0)?;
            let requested_speed = optional_number(&input, "speed_mps", 0.0, f64::MAX)?;
            if requested_speed == Some(0.0) {
                return Err(AiccError::invalid_input("input.speed_mps must be greater than 0"));
            }
            let speed_mps = requested_speed.unwrap_or(max_speed_mps).min(max_speed_mps);
            // Taken once for the whole call: a `stop` at any point ends it.
            let motion = ctx.base.begin_motion();
            match (forward_m, left_m, velocity, duration_s) {
                (None, None, Some(velocity_mps), Some(duration_s)) => drive_for(ctx, velocity_mps, duration_s, motion).await,
                (Some(_), _, None, None) | (_, Some(_), None, None) => {
                    let (forward_m, left_m) = (forward_m.unwrap_or(0.0), left_m.unwrap_or(0.0));
                    if left_m == 0.0 {
                        drive(ctx, forward_m, speed_mps, requested_speed, motion).await
                    } else {
                        drive_to_offset(ctx, forward_m, left_m, speed_mps, requested_speed, motion).await
                    }
                }
                _ => Err(AiccError::invalid_input("input: give `forward` and/or `left` (metres), or `velocity_mps` with `duration_s`, not both")),
            }
        }
        .boxed()
    }
}

fn fresh_odometry(ctx: &ToolContext) -> Result<OdometrySample, AiccError> {
    let source = ctx.robot.source("odom");
    let odom = ctx.robot.odometry().ok_or_else(|| AiccError::execution_failed(true, format!("no odometry received yet on {source}")))?;
    check_fresh(&source, Instant::now().saturating_duration_since(odom.received), ctx.odom_max_age())?;
    Ok(odom)
}

async fn drive(ctx: ToolContext, forward_m: f64, speed_mps: f64, requested_speed: Option<f64>, motion: u64) -> Result<ToolSuccess, AiccError> {
    let started = Instant::now();
    let start = fresh_odometry(&ctx)?;
    let heading_rad = yaw_of(&start);
    let limits = *ctx.base.limits();
    let accel_mps2 = limits.max_linear_accel_mps2 * PLANNING_ACCEL_SHARE;
    let tolerance_m = ctx.config.base.move_tolerance_m;
    // Time to cruise plus ramps, with generous slack for a slow simulator.
    let budget = Duration::from_secs_f64(3.0 * (forward_m.abs() / speed_mps + 2.0 * speed_mps / accel_mps2) + 5.0);
    let period = Duration::from_secs_f64(1.0 / ctx.config.base.control_rate_hz);
    let _stop_guard = StopOnDrop(ctx.base.clone());
    let mut blocked_since: Option<Instant> = None;
    let mut last_progress = Instant::now();
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticker.tick().await;
        let now_sample = match fresh_odometry(&ctx) {
            Ok(sample) => sample,
            Err(error) => {
                ctx.base.stop();
                return Err(AiccError::execution_failed(true, format!("stopped: {}", error.message)));
            }
        };
        let (travelled_m, _) = displacement(&start, &now_sample, heading_rad);
        let remaining_m = forward_m - travelled_m;
        if last_progress.elapsed() >= PROGRESS_PERIOD {
            last_progress = Instant::now();
            ctx.event_for_session("command", json!({ "call_id": ctx.call_id, "tool": "move", "state": "progress", "done_m": travelled_m, "remaining_m": remaining_m }));
        }
        if remaining_m.abs() <= tolerance_m {
            break;
        }
        if started.elapsed() > budget {
            ctx.base.stop();
            return Err(AiccError::new(
                ErrorCode::Timeout,
                true,
                format!("move did not reach its goal within {:.1} s: {travelled_m:.3} m of {forward_m:.3} m done", budget.as_secs_f64()),
            ));
        }
        let heading_error_rad = wrap_angle(heading_rad - yaw_of(&now_sample));
        let angular_radps = (HEADING_GAIN_PER_S * heading_error_rad).clamp(-MAX_HEADING_CORRECTION_RADPS, MAX_HEADING_CORRECTION_RADPS);
        let linear_mps = profile_speed(remaining_m, speed_mps, accel_mps2);
        let command = BaseVelocity { linear_mps, angular_radps };
        // A governor rule that forbids this direction (a contact, an
        // obstacle, the geofence) ends the move now rather than at timeout.
        if let Some(reason) = ctx.base.blocked_reason(BaseVelocity { angular_radps: 0.0, ..command }) {
            blocked_since.get_or_insert(Instant::now());
            if blocked_since.is_some_and(|since| since.elapsed() >= BLOCKED_GIVE_UP) {
                ctx.base.stop();
                return Err(AiccError::execution_failed(false, format!("move stopped after {travelled_m:.3} m of {forward_m:.3} m: {reason}")));
            }
        } else {
            blocked_since = None;
        }
        if !ctx.base.request(motion, command, Instant::now()) {
            return Err(super::stop::stopped_error("the move"));
        }
    }
    ctx.base.finish();
    let end = settle(&ctx, &mut ticker).await?;
    let (achieved_forward_m, achieved_left_m) = displacement(&start, &end, heading_rad);
    Ok(ToolSuccess {
        output: json!({
            "requested": { "forward_m": forward_m, "speed_mps": requested_speed },
            "achieved": {
                "forward_m": achieved_forward_m,
                "left_m": achieved_left_m,
                "yaw_change_rad": wrap_angle(yaw_of(&end) - heading_rad),
            },
            "duration_s": started.elapsed().as_secs_f64(),
            "applied": { "max_speed_mps": speed_mps, "max_accel_mps2": limits.max_linear_accel_mps2 },
        }),
        source: ctx.robot.source("odom"),
    })
}

/// Waits (bounded) for the base to come to rest after `finish()`; returns
/// the odometry then.
async fn settle(ctx: &ToolContext, ticker: &mut tokio::time::Interval) -> Result<OdometrySample, AiccError> {
    let settle_started = Instant::now();
    let mut end = fresh_odometry(ctx)?;
    while end.linear_velocity_mps.norm() > SETTLED_SPEED_MPS && settle_started.elapsed() < SETTLE_TIMEOUT {
        ticker.tick().await;
        end = fresh_odometry(ctx)?;
    }
    Ok(end)
}

/// Rotates in place by `angle_rad` (counter-clockwise positive), with the
/// `turn` tool's closed loop.
async fn rotate_in_place(ctx: &ToolContext, angle_rad: f64, motion: u64) -> Result<(), AiccError> {
    let start = fresh_odometry(ctx)?;
    super::turn::rotate(ctx, start, angle_rad, ctx.base.limits().max_angular_radps, motion).await.map(|_| ())
}

/// `forward` and `left` together: turn towards the target, drive straight
/// to it, turn back to the original heading.
async fn drive_to_offset(ctx: ToolContext, forward_m: f64, left_m: f64, speed_mps: f64, requested_speed: Option<f64>, motion: u64) -> Result<ToolSuccess, AiccError> {
    let started = Instant::now();
    let _stop_guard = StopOnDrop(ctx.base.clone());
    let start = fresh_odometry(&ctx)?;
    let heading_rad = yaw_of(&start);
    let bearing_rad = left_m.atan2(forward_m);
    rotate_in_place(&ctx, bearing_rad, motion).await?;
    drive(ctx.clone(), forward_m.hypot(left_m), speed_mps, requested_speed, motion).await?;
    let now_yaw = yaw_of(&fresh_odometry(&ctx)?);
    rotate_in_place(&ctx, wrap_angle(heading_rad - now_yaw), motion).await?;
    let end = fresh_odometry(&ctx)?;
    let (achieved_forward_m, achieved_left_m) = displacement(&start, &end, heading_rad);
    Ok(ToolSuccess {
        output: json!({
            "requested": { "forward_m": forward_m, "left_m": left_m, "speed_mps": requested_speed },
            "achieved": { "forward_m": achieved_forward_m, "left_m": achieved_left_m, "yaw_change_rad": wrap_angle(yaw_of(&end) - heading_rad) },
            "duration_s": started.elapsed().as_secs_f64(),
            "applied": { "max_speed_mps": speed_mps, "max_accel_mps2": ctx.base.limits().max_linear_accel_mps2, "path": "turn, straight, turn back (differential drive)" },
        }),
        source: ctx.robot.source("odom"),
    })
}

/// `velocity_mps` for `duration_s`: the governor still limits every command.
async fn drive_for(ctx: ToolContext, velocity_mps: f64, duration_s: f64, motion: u64) -> Result<ToolSuccess, AiccError> {
    let started = Instant::now();
    let _stop_guard = StopOnDrop(ctx.base.clone());
    let start = fresh_odometry(&ctx)?;
    let heading_rad = yaw_of(&start);
    let period = Duration::from_secs_f64(1.0 / ctx.config.base.control_rate_hz);
    let mut ticker = tokio::time::interval(period);
    let command = BaseVelocity { linear_mps: velocity_mps, angular_radps: 0.0 };
    while started.elapsed().as_secs_f64() < duration_s {
        ticker.tick().await;
        fresh_odometry(&ctx).inspect_err(|_| ctx.base.stop())?;
        if let Some(reason) = ctx.base.blocked_reason(command) {
            ctx.base.stop();
            return Err(AiccError::execution_failed(false, format!("move stopped after {:.1} s of {duration_s:.1} s: {reason}", started.elapsed().as_secs_f64())));
        }
        if !ctx.base.request(motion, command, Instant::now()) {
            return Err(super::stop::stopped_error("the move"));
        }
    }
    ctx.base.finish();
    let end = settle(&ctx, &mut ticker).await?;
    let (forward_m, left_m) = displacement(&start, &end, heading_rad);
    Ok(ToolSuccess {
        output: json!({
            "requested": { "velocity_mps": velocity_mps, "duration_s": duration_s },
            "achieved": { "forward_m": forward_m, "left_m": left_m, "yaw_change_rad": wrap_angle(yaw_of(&end) - heading_rad) },
            "duration_s": started.elapsed().as_secs_f64(),
            "applied": { "max_speed_mps": velocity_mps.abs().min(ctx.base.limits().max_linear_mps), "max_accel_mps2": ctx.base.limits().max_linear_accel_mps2 },
        }),
        source: ctx.robot.source("odom"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{UnitQuaternion, Vector3};

    fn sample(x: f64, y: f64, yaw: f64) -> OdometrySample {
        OdometrySample {
            frame_id: "odom".into(),
            child_frame_id: "base_footprint".into(),
            position_m: Vector3::new(x, y, 0.0),
            orientation: UnitQuaternion::from_euler_angles(0.0, 0.0, yaw),
            linear_velocity_mps: Vector3::zeros(),
            angular_velocity_radps: Vector3::zeros(),
            stamp_s: 0.0,
            received: Instant::now(),
        }
    }

    #[test]
    fn displacement_is_measured_along_the_start_heading() {
        let start = sample(1.0, 1.0, PI / 2.0);
        let (forward, left) = displacement(&start, &sample(0.9, 1.5, PI / 2.0), PI / 2.0);
        assert!((forward - 0.5).abs() < 1e-9 && (left - 0.1).abs() < 1e-9, "{forward} {left}");
    }

    #[test]
    fn the_profile_cruises_brakes_and_keeps_the_sign() {
        assert_eq!(profile_speed(2.0, 0.22, 0.8), 0.22);
        assert!((profile_speed(0.01, 0.22, 0.8) - (2.0f64 * 0.8 * 0.01).sqrt()).abs() < 1e-12);
        assert_eq!(profile_speed(-2.0, 0.22, 0.8), -0.22);
        assert_eq!(profile_speed(1e-6, 0.22, 0.8), MIN_SPEED_MPS);
    }

    #[test]
    fn angles_wrap_into_the_half_open_interval() {
        assert!((wrap_angle(3.0 * PI / 2.0) + PI / 2.0).abs() < 1e-12);
        assert_eq!(wrap_angle(-PI), PI);
        assert!((wrap_angle(0.1) - 0.1).abs() < 1e-12);
    }
}
