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
use super::shared::fresh::{fresh_odometry, odometry_missing, yaw_of};
use super::shared::motion::stopped_error;
use super::{Tool, ToolContext, ToolFuture};
use crate::config::BaseConfig;
use crate::governor::{BaseVelocity, Restriction, Rule};
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::core::ToolSuccess;
use crate::protocol::{AiccError, ErrorCode};
use crate::robot::base_driver::BaseDriver;
use crate::robot::{OdometrySample, Sensor};

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
/// How long the governor must hold the motion's direction at zero before
/// the move (or turn) gives up: long enough to ride out a flicker (a bumper
/// bounce, one odd depth frame at the camera's 15 Hz) and for the base to
/// come to rest, so that the distance reported is the final one; short
/// enough that a move into a blocked way is refused promptly.
pub(crate) const BLOCKED_SETTLE: Duration = Duration::from_millis(500);
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

/// `value` with two decimals, never "-0.00" (a move held from the start
/// has odometry noise of a millimetre either way).
fn two_decimals(value: f64) -> String {
    let text = format!("{value:.2}");
    if text == "-0.00" { "0.00".into() } else { text }
}

/// Adds `extra`'s fields to the object `target`.
fn merge(target: &mut Value, extra: Value) {
    if let (Some(target), Value::Object(extra)) = (target.as_object_mut(), extra) {
        target.extend(extra);
    }
}

/// A free step shorter than this does not restart the count of
/// [`BlockedWatch`]: a depth reading flickering around the stop distance
/// (0.199 m, 0.201 m, ...) frees the way for a frame or two at a time, and
/// must not keep a move creeping back and forth until its timeout. Three
/// frames of the depth camera at 15 Hz; well under [`BLOCKED_SETTLE`].
pub(crate) const BLOCKED_FREE_GRACE: Duration = Duration::from_millis(200);

/// Watches whether the governor keeps a motion's direction at zero, so that
/// the motion ends once it has for [`BLOCKED_SETTLE`], counting through
/// free spells shorter than [`BLOCKED_FREE_GRACE`].
#[derive(Debug, Default)]
pub(crate) struct BlockedWatch {
    /// When the current held spell began.
    since: Option<Instant>,
    /// When the way last turned free during that spell, if it is free now.
    free_since: Option<Instant>,
}

impl BlockedWatch {
    /// Notes the rules holding the direction at zero at `now` (empty: the
    /// way is free; free for [`BLOCKED_FREE_GRACE`] the watch starts over);
    /// returns them once the direction has been held for `settle`, counted
    /// from the start of the spell.
    pub(crate) fn observe(&mut self, blocking: Vec<Restriction>, now: Instant, settle: Duration) -> Option<Vec<Restriction>> {
        if blocking.is_empty() {
            if self.since.is_some() {
                let free_since = *self.free_since.get_or_insert(now);
                if now.saturating_duration_since(free_since) >= BLOCKED_FREE_GRACE {
                    *self = BlockedWatch::default();
                }
            }
            return None;
        }
        self.free_since = None;
        let since = *self.since.get_or_insert(now);
        (now.saturating_duration_since(since) >= settle).then_some(blocking)
    }

    /// Whether the direction was held at zero at the last observation (a
    /// timed motion that ends so must not report success).
    pub(crate) fn is_blocked(&self) -> bool {
        self.since.is_some() && self.free_since.is_none()
    }
}

/// The error of a motion the governor held at zero: `execution_failed`,
/// retryable (the way may clear, or the agent may turn and retry), naming
/// each cause and rule and how far the motion got (`progress`, e.g.
/// "after 1.47 of 2.00 m"), e.g. "move stopped by an obstacle 0.19 m ahead
/// (stop distance 0.20 m) after 1.47 of 2.00 m (governor rule
/// obstacle_ahead): turn or back away, then retry".
pub(crate) fn governor_stop_error(what: &str, blocking: &[Restriction], progress: &str) -> AiccError {
    let causes: Vec<&str> = blocking.iter().map(|r| r.cause.as_str()).collect();
    let rules: Vec<&str> = blocking.iter().map(|r| r.name()).collect();
    let (causes, rules) = if causes.is_empty() { ("the safety governor".to_string(), "none".to_string()) } else { (causes.join(" and "), rules.join(", ")) };
    let plural = if blocking.len() > 1 { "s" } else { "" };
    let in_the_way = blocking.iter().any(|r| matches!(r.rule, Rule::ObstacleAhead | Rule::ObstacleBehind | Rule::ContactLatched | Rule::Geofence));
    let remedy = if in_the_way { "turn or back away, then retry" } else { "retry once the robot's data is fresh" };
    AiccError::execution_failed(true, format!("{what} stopped by {causes} {progress} (governor rule{plural} {rules}): {remedy}"))
}

/// The structured part of the last `command` progress event of a motion
/// the governor stopped: the rules and, for an obstacle, its distance.
fn blocked_fields(blocking: &[Restriction]) -> Value {
    let distance_m = blocking.iter().find_map(|r| r.distance_m).filter(|d| d.is_finite());
    json!({ "blocked_by": blocking.iter().map(|r| r.name()).collect::<Vec<_>>(), "obstacle_m": distance_m })
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
        odometry_missing(ctx, now)
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
    let mut blocked = BlockedWatch::default();
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
        // A governor rule that holds this direction at zero (an obstacle,
        // a contact, the geofence) ends the move once it has for the
        // settle time, rather than at the timeout.
        let blocking = ctx.base.blocked_by(BaseVelocity { angular_radps: 0.0, ..command });
        if let Some(blocking) = blocked.observe(blocking, Instant::now(), BLOCKED_SETTLE) {
            ctx.base.stop();
            let mut progress = json!({ "call_id": ctx.call_id, "tool": "move", "state": "progress", "done_m": travelled_m, "remaining_m": remaining_m });
            merge(&mut progress, blocked_fields(&blocking));
            ctx.event_for_session("command", progress);
            return Err(governor_stop_error("move", &blocking, &format!("after {} of {} m", two_decimals(travelled_m), two_decimals(forward_m))));
        }
        if !ctx.base.request(motion, command, Instant::now()) {
            return Err(stopped_error("the move"));
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
        source: ctx.sensors.topic(Sensor::Odometry),
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
        source: ctx.sensors.topic(Sensor::Odometry),
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
    let mut blocked = BlockedWatch::default();
    while started.elapsed().as_secs_f64() < duration_s {
        ticker.tick().await;
        fresh_odometry(&ctx).inspect_err(|_| ctx.base.stop())?;
        if let Some(blocking) = blocked.observe(ctx.base.blocked_by(command), Instant::now(), BLOCKED_SETTLE) {
            return Err(timed_move_blocked(&ctx, &start, heading_rad, started, duration_s, &blocking));
        }
        if !ctx.base.request(motion, command, Instant::now()) {
            return Err(stopped_error("the move"));
        }
    }
    // Held at zero when the time ran out (a move shorter than the settle
    // time into a blocked way, or blocked at its end): not a success.
    if blocked.is_blocked() {
        let blocking = ctx.base.blocked_by(command);
        if !blocking.is_empty() {
            return Err(timed_move_blocked(&ctx, &start, heading_rad, started, duration_s, &blocking));
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
        source: ctx.sensors.topic(Sensor::Odometry),
    })
}

/// Stops a timed move the governor held at zero: its last progress event
/// (with the rules and the obstacle's distance) and its error.
fn timed_move_blocked(ctx: &ToolContext, start: &OdometrySample, heading_rad: f64, started: Instant, duration_s: f64, blocking: &[Restriction]) -> AiccError {
    ctx.base.stop();
    let done_m = match fresh_odometry(ctx) {
        Ok(now) => displacement(start, &now, heading_rad).0,
        Err(error) => return error,
    };
    let mut progress = json!({ "call_id": ctx.call_id, "tool": "move", "state": "progress", "done_m": done_m, "done_s": started.elapsed().as_secs_f64() });
    merge(&mut progress, blocked_fields(blocking));
    ctx.event_for_session("command", progress);
    let progress = format!("after {:.1} of {duration_s:.1} s ({} m)", started.elapsed().as_secs_f64(), two_decimals(done_m));
    governor_stop_error("move", blocking, &progress)
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

    /// The restrictions the real governor raises for these inputs, holding forward motion at zero.
    fn blocking_forward(inputs: crate::governor::SafetyInputs, in_contact_before: bool) -> Vec<Restriction> {
        use crate::governor::{safety_envelope, BaseLimits, SafetyConfig, SafetyState};
        let limits = BaseLimits { max_linear_mps: 0.22, max_angular_radps: 1.5, max_linear_accel_mps2: 1.0, max_angular_accel_radps2: 3.0 };
        let mut state = SafetyState::new();
        state.update(&SafetyConfig::DEFAULT, &crate::governor::SafetyInputs { in_contact: in_contact_before, ..inputs }, 0.0);
        let envelope = safety_envelope(&limits, &SafetyConfig::DEFAULT, &state, &inputs);
        envelope.blocking(BaseVelocity { linear_mps: 0.1, angular_radps: 0.0 }).into_iter().cloned().collect()
    }

    fn fresh_inputs() -> crate::governor::SafetyInputs {
        crate::governor::SafetyInputs { odometry_age_s: Some(0.01), imu_age_s: Some(0.01), commanded_to_move: true, ..Default::default() }
    }

    #[test]
    fn a_direction_held_at_zero_for_the_settle_time_ends_the_motion() {
        let wall = blocking_forward(crate::governor::SafetyInputs { obstacle_ahead_m: Some(0.19), ..fresh_inputs() }, false);
        assert_eq!(wall.len(), 1);
        let settle = Duration::from_millis(500);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut watch = BlockedWatch::default();
        assert_eq!(watch.observe(Vec::new(), at(0), settle), None, "free");
        assert_eq!(watch.observe(wall.clone(), at(20), settle), None, "blocked, just now");
        assert_eq!(watch.observe(wall.clone(), at(500), settle), None, "blocked for 480 ms");
        assert_eq!(watch.observe(Vec::new(), at(510), settle), None, "free");
        assert!(!watch.is_blocked(), "free at the last step");
        assert_eq!(watch.observe(Vec::new(), at(710), settle), None, "free for 200 ms: the count starts over");
        assert_eq!(watch.observe(wall.clone(), at(720), settle), None);
        assert_eq!(watch.observe(wall.clone(), at(1200), settle), None, "480 ms since it started over");
        assert!(watch.is_blocked(), "held, not yet for the settle time");
        assert_eq!(watch.observe(wall.clone(), at(1220), settle), Some(wall.clone()), "held for 500 ms");
        // Blocked from the first step (the way was blocked when the move began): 500 ms, not a timeout.
        let mut watch = BlockedWatch::default();
        assert_eq!(watch.observe(wall.clone(), at(0), settle), None);
        assert_eq!(watch.observe(wall.clone(), at(500), settle), Some(wall));
    }

    #[test]
    fn depth_noise_around_the_stop_distance_does_not_keep_a_move_going() {
        let wall = blocking_forward(crate::governor::SafetyInputs { obstacle_ahead_m: Some(0.199), ..fresh_inputs() }, false);
        assert!(blocking_forward(crate::governor::SafetyInputs { obstacle_ahead_m: Some(0.201), ..fresh_inputs() }, false).is_empty(), "0.201 m frees the way");
        let t0 = Instant::now();
        // Blocked and free by turns, one control step (20 ms) each: ends once 500 ms have passed since the spell began.
        let mut watch = BlockedWatch::default();
        let mut ended_at_ms = None;
        for step in 0..200u64 {
            let blocking = if step % 2 == 0 { wall.clone() } else { Vec::new() };
            if watch.observe(blocking, t0 + Duration::from_millis(20 * step), BLOCKED_SETTLE).is_some() {
                ended_at_ms = Some(20 * step);
                break;
            }
        }
        assert_eq!(ended_at_ms, Some(520), "the first blocked step past 500 ms");
        // Two blocked frames for every free one at the camera's 15 Hz: the same.
        let mut watch = BlockedWatch::default();
        let ended = (0..100u64).find(|frame| {
            let blocking = if frame % 3 == 2 { Vec::new() } else { wall.clone() };
            watch.observe(blocking, t0 + Duration::from_millis(67 * frame), BLOCKED_SETTLE).is_some()
        });
        assert_eq!(ended, Some(9), "603 ms: the first blocked frame past 500 ms");
        // Free for the grace time: the count starts over.
        let mut watch = BlockedWatch::default();
        watch.observe(wall.clone(), t0, BLOCKED_SETTLE);
        watch.observe(Vec::new(), t0 + Duration::from_millis(100), BLOCKED_SETTLE);
        watch.observe(Vec::new(), t0 + Duration::from_millis(100) + BLOCKED_FREE_GRACE, BLOCKED_SETTLE);
        assert!(!watch.is_blocked());
        assert_eq!(watch.observe(wall.clone(), t0 + Duration::from_millis(600), BLOCKED_SETTLE), None, "a new spell");
        assert_eq!(watch.observe(wall.clone(), t0 + Duration::from_millis(1100), BLOCKED_SETTLE), Some(wall));
    }

    #[test]
    fn a_governor_stop_names_the_cause_the_rule_and_how_far_the_move_got() {
        let wall = blocking_forward(crate::governor::SafetyInputs { obstacle_ahead_m: Some(0.19), ..fresh_inputs() }, false);
        let error = governor_stop_error("move", &wall, "after 1.47 of 2.00 m");
        assert_eq!(error.code, ErrorCode::ExecutionFailed);
        assert!(error.retryable, "the agent may turn and retry");
        assert_eq!(
            error.message,
            "move stopped by an obstacle 0.190 m ahead (stop distance 0.20 m) after 1.47 of 2.00 m (governor rule obstacle_ahead): turn or back away, then retry"
        );
        assert_eq!(blocked_fields(&wall), json!({ "blocked_by": ["obstacle_ahead"], "obstacle_m": 0.19 }));
        // A contact and an obstacle together: both named.
        let both = blocking_forward(crate::governor::SafetyInputs { in_contact: true, obstacle_ahead_m: Some(0.1), ..fresh_inputs() }, true);
        let message = governor_stop_error("move", &both, "after 0.00 of 0.50 m").message;
        assert!(message.starts_with("move stopped by a bumper contact and an obstacle 0.100 m ahead"), "{message}");
        assert!(message.contains("(governor rules contact_latched, obstacle_ahead)"), "{message}");
        // Stale data holds turning too; the remedy differs.
        let stale = blocking_forward(crate::governor::SafetyInputs { imu_age_s: Some(2.0), ..fresh_inputs() }, false);
        let message = governor_stop_error("turn", &stale, "after 10.0° of 90.0°").message;
        assert!(message.starts_with("turn stopped by stale IMU data") && message.ends_with("retry once the robot's data is fresh"), "{message}");
        assert_eq!(blocked_fields(&stale), json!({ "blocked_by": ["imu_stale"], "obstacle_m": null }));
    }

    #[test]
    fn a_move_held_by_stale_depth_fails_naming_the_sensing_rule() {
        use crate::governor::safety::{safety_envelope_with_sensing, SensingHealth, SensorHealth};
        use crate::governor::{BaseLimits, SafetyConfig, SafetyState};
        let limits = BaseLimits { max_linear_mps: 0.22, max_angular_radps: 1.5, max_linear_accel_mps2: 1.0, max_angular_accel_radps2: 3.0 };
        let sensing = SensingHealth { depth: SensorHealth::Stale { age_s: Some(3.0), max_age_s: 1.0 }, bumper: SensorHealth::Fresh };
        let envelope = safety_envelope_with_sensing(&limits, &SafetyConfig::DEFAULT, &SafetyState::new(), &fresh_inputs(), &sensing);
        let blocking: Vec<Restriction> = envelope.blocking(BaseVelocity { linear_mps: 0.1, angular_radps: 0.0 }).into_iter().cloned().collect();
        let mut watch = BlockedWatch::default();
        let t0 = Instant::now();
        assert_eq!(watch.observe(blocking.clone(), t0, BLOCKED_SETTLE), None);
        let held = watch.observe(blocking.clone(), t0 + BLOCKED_SETTLE, BLOCKED_SETTLE).expect("held for the settle time");
        let error = governor_stop_error("move", &held, "after 0.00 of 1.00 m");
        assert_eq!(error.code, ErrorCode::ExecutionFailed);
        assert_eq!(
            error.message,
            "move stopped by stale obstacle sensing (the depth camera: its last reading is 3.00 s old (max 1.00 s)) after 0.00 of 1.00 m (governor rule obstacle_sensing_stale): retry once the robot's data is fresh"
        );
        assert_eq!(blocked_fields(&held), json!({ "blocked_by": ["obstacle_sensing_stale"], "obstacle_m": null }));
        assert!(envelope.blocking(BaseVelocity { linear_mps: -0.1, angular_radps: 0.0 }).is_empty(), "backing up is not held");
    }

    #[test]
    fn distances_in_messages_never_read_minus_zero() {
        assert_eq!(two_decimals(-0.001), "0.00");
        assert_eq!(two_decimals(-0.006), "-0.01");
        assert_eq!(two_decimals(1.4649), "1.46");
    }

    #[test]
    fn angles_wrap_into_the_half_open_interval() {
        assert!((wrap_angle(3.0 * PI / 2.0) + PI / 2.0).abs() < 1e-12);
        assert_eq!(wrap_angle(-PI), PI);
        assert!((wrap_angle(0.1) - 0.1).abs() < 1e-12);
    }
}
