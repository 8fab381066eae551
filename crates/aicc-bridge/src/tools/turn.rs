//! `turn`: rotate the base in place by a relative yaw in DEGREES (AICC
//! Appendix A: `{"yaw": -45}`; positive = counter-clockwise, REP-103),
//! closed on odometry yaw, with a rate profile within the governor's limits.
//! An optional `pitch` tilts the head at the same time (as `look_at`).
//! The result states the rotation achieved.
use std::f64::consts::PI;
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::{optional_number, reject_unknown_fields};
use super::shared::fresh::{fresh_joint_states, fresh_odometry, odometry_missing, yaw_of};
use super::shared::head::{plan_head, run_head};
use super::shared::joints::deg;
use super::shared::motion::stopped_error;
use super::move_base::{governor_stop_error, BlockedWatch, StopOnDrop, BLOCKED_SETTLE, PLANNING_ACCEL_SHARE, PROGRESS_PERIOD};
use super::{Tool, ToolContext, ToolFuture};
use crate::config::BaseConfig;
use crate::governor::BaseVelocity;
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::{AiccError, ErrorCode};
use crate::robot::{OdometrySample, Sensor};

/// Largest turn in one call, degrees (either way).
pub const MAX_TURN_DEG: f64 = 360.0;
/// The turn ends when odometry yaw is this close to the goal (the stop
/// that follows adds about a tenth of a degree; creeping the last
/// fraction of a degree at the slowest rate takes ~0.1 s).
const TOLERANCE_RAD: f64 = 0.25 * PI / 180.0;
/// Slowest commanded rate short of the goal: below it, wheel friction may
/// keep the base from creeping the last fraction of a degree.
const MIN_RATE_RADPS: f64 = 0.05;
/// Gain of the profile's linear tail near the goal (1/s): the rate is
/// about GAIN x remaining there, so the end is approached smoothly.
const TAIL_GAIN_PER_S: f64 = 4.0;
/// How long to wait for the base to come to rest after the turn.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(1);
const SETTLED_RATE_RADPS: f64 = 0.01;

pub struct Turn {
    max_rate_radps: f64,
}

impl Turn {
    pub fn new(base: &BaseConfig) -> Self {
        Self { max_rate_radps: base.max_angular_radps }
    }
}

/// An angle wrapped to (-pi, pi].
pub fn wrap_angle(angle_rad: f64) -> f64 {
    let wrapped = (angle_rad + PI).rem_euclid(2.0 * PI) - PI;
    if wrapped == -PI {
        PI
    } else {
        wrapped
    }
}

/// Keeps a running total of rotation from successive yaw readings, each in
/// (-pi, pi]: the change between two readings is taken the short way round,
/// so turns of any size (and across +-180 degrees) add up. Readings must
/// come often enough that the base turns less than half a turn between them.
#[derive(Debug, Clone, Copy)]
pub struct YawUnwrapper {
    last_rad: f64,
    total_rad: f64,
}

impl YawUnwrapper {
    pub fn new(yaw_rad: f64) -> Self {
        Self { last_rad: yaw_rad, total_rad: 0.0 }
    }

    /// Adds a reading; returns the rotation since the first one.
    pub fn update(&mut self, yaw_rad: f64) -> f64 {
        self.total_rad += wrap_angle(yaw_rad - self.last_rad);
        self.last_rad = yaw_rad;
        self.total_rad
    }

    pub fn total(&self) -> f64 {
        self.total_rad
    }
}

/// The rate to command with `remaining_rad` to go (signed): the braking
/// curve sqrt(2 a d) far from the goal, blending into a linear tail
/// (GAIN x d) near it, never faster than `max_rate` and never slower than
/// the creep rate. v = sqrt(2 a d + c^2) - c with c = a / GAIN asks for
/// a deceleration of a v / (v + c) < a everywhere.
pub fn profile_rate(remaining_rad: f64, max_rate_radps: f64, accel_radps2: f64) -> f64 {
    let c = accel_radps2 / TAIL_GAIN_PER_S;
    let braking = (2.0 * accel_radps2 * remaining_rad.abs() + c * c).sqrt() - c;
    braking.min(max_rate_radps).max(MIN_RATE_RADPS.min(max_rate_radps)).copysign(remaining_rad)
}

/// Time allowed for a turn: three times the profile's, plus 5 s.
pub fn budget(yaw_rad: f64, rate_radps: f64, accel_radps2: f64) -> Duration {
    Duration::from_secs_f64(3.0 * (yaw_rad.abs() / rate_radps + 2.0 * rate_radps / accel_radps2) + 5.0)
}

/// What a turn achieved.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Turned {
    achieved_rad: f64,
    duration_s: f64,
}

impl Tool for Turn {
    fn descriptor(&self) -> ToolDescriptor {
        let max_rate_dps = deg(self.max_rate_radps);
        ToolDescriptor {
            id: "turn",
            class: ToolClass::Actuator,
            description: "Rotate the robot in place by `yaw` DEGREES relative to its current heading: positive = counter-clockwise (left), negative = right; up to one full turn either way. Optional `pitch` (degrees, positive looks DOWN) tilts the camera head at the same time. Closed on odometry; returns when the robot has stopped, with the rotation achieved.",
            capability: "can_move_self",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "yaw": { "type": "number", "description": "degrees to rotate; positive = left (counter-clockwise)", "minimum": -MAX_TURN_DEG, "maximum": MAX_TURN_DEG },
                    "pitch": { "type": "number", "description": "head tilt to set, degrees; positive looks down (the joint limit from the URDF applies)", "minimum": -90, "maximum": 90 },
                    "speed_dps": { "type": "number", "description": "largest rotation rate, degrees/s (default and maximum: the base's limit)", "exclusiveMinimum": 0, "maximum": max_rate_dps }
                },
                "required": ["yaw"],
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": {
                    "requested": { "type": "object" },
                    "achieved": { "type": "object", "properties": { "yaw_deg": {"type": "number"}, "yaw_rad": {"type": "number"} } },
                    "error_deg": { "type": "number" },
                    "duration_s": { "type": "number" },
                    "applied": { "type": "object" },
                    "head": { "type": ["object", "null"] }
                },
                "required": ["requested", "achieved", "duration_s", "applied"]
            }),
        }
    }

    fn unavailable_reason(&self, ctx: &ToolContext, now: Instant) -> Option<String> {
        odometry_missing(ctx, now)
    }

    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture {
        let max_rate_radps = self.max_rate_radps;
        async move {
            reject_unknown_fields(&input, &["yaw", "pitch", "speed_dps"])?;
            let yaw_deg = optional_number(&input, "yaw", -MAX_TURN_DEG, MAX_TURN_DEG)?.ok_or_else(|| AiccError::invalid_input("input.yaw is required (degrees, positive = left)"))?;
            let pitch_deg = optional_number(&input, "pitch", -90.0, 90.0)?;
            let speed_dps = optional_number(&input, "speed_dps", 0.0, f64::MAX)?;
            if speed_dps == Some(0.0) {
                return Err(AiccError::invalid_input("input.speed_dps must be greater than 0"));
            }
            let rate_radps = speed_dps.map_or(max_rate_radps, f64::to_radians).min(max_rate_radps).min(ctx.base.limits().max_angular_radps);
            let halts = ctx.base.begin_motion();
            // Everything is checked before anything moves.
            let head_plan = match pitch_deg {
                None => None,
                Some(pitch) => Some(plan_head(&ctx, &fresh_joint_states(&ctx)?, None, Some(pitch.to_radians()), None)?),
            };
            let start = fresh_odometry(&ctx)?;
            let goal_rad = yaw_deg.to_radians();
            let (turned, head) = futures::join!(rotate(&ctx, start, goal_rad, rate_radps, halts), async {
                match &head_plan {
                    Some(plan) => Some(run_head(&ctx, plan, halts).await),
                    None => None,
                }
            });
            let turned = turned?;
            let head = match head {
                None => Value::Null,
                Some(Ok(head)) => head,
                Some(Err(error)) => {
                    return Err(AiccError::new(
                        error.code,
                        error.retryable,
                        format!("turned {:.1}° of {yaw_deg}°, but the head tilt failed: {}", deg(turned.achieved_rad), error.message),
                    ))
                }
            };
            let limits = ctx.base.limits();
            Ok(ToolSuccess {
                output: json!({
                    "requested": { "yaw_deg": yaw_deg, "pitch_deg": pitch_deg, "speed_dps": speed_dps },
                    "achieved": { "yaw_deg": deg(turned.achieved_rad), "yaw_rad": turned.achieved_rad },
                    "error_deg": deg(turned.achieved_rad - goal_rad),
                    "duration_s": turned.duration_s,
                    "applied": {
                        "max_rate_dps": deg(rate_radps),
                        "max_rate_radps": rate_radps,
                        "speed_limited": speed_dps.is_some_and(|s| s.to_radians() > rate_radps),
                        "planning_accel_radps2": limits.max_angular_accel_radps2 * PLANNING_ACCEL_SHARE,
                        "tolerance_deg": deg(TOLERANCE_RAD),
                    },
                    "head": head,
                }),
                source: ctx.sensors.topic(Sensor::Odometry),
            })
        }
        .boxed()
    }
}

/// The closed loop: rotate by `goal_rad` from `start`.
pub(crate) async fn rotate(ctx: &ToolContext, start: OdometrySample, goal_rad: f64, rate_radps: f64, halts: u64) -> Result<Turned, AiccError> {
    let started = Instant::now();
    if goal_rad.abs() <= TOLERANCE_RAD {
        return Ok(Turned { achieved_rad: 0.0, duration_s: 0.0 });
    }
    let limits = *ctx.base.limits();
    let accel = limits.max_angular_accel_radps2 * PLANNING_ACCEL_SHARE;
    let budget = budget(goal_rad, rate_radps, accel);
    let period = Duration::from_secs_f64(1.0 / ctx.config.base.control_rate_hz);
    let _stop_guard = StopOnDrop(ctx.base.clone());
    let mut unwrapper = YawUnwrapper::new(yaw_of(&start));
    let mut blocked = BlockedWatch::default();
    let mut last_progress = Instant::now();
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticker.tick().await;
        if ctx.base.halted_since(halts) {
            ctx.base.stop();
            return Err(stopped_error(&format!("the turn (after {:.1}° of {:.1}°)", deg(unwrapper.total()), deg(goal_rad))));
        }
        let sample = match fresh_odometry(ctx) {
            Ok(sample) => sample,
            Err(error) => {
                ctx.base.stop();
                return Err(AiccError::execution_failed(true, format!("stopped: {}", error.message)));
            }
        };
        let turned = unwrapper.update(yaw_of(&sample));
        let remaining = goal_rad - turned;
        if last_progress.elapsed() >= PROGRESS_PERIOD {
            last_progress = Instant::now();
            ctx.event_for_session("command", json!({ "call_id": ctx.call_id, "tool": "turn", "state": "progress", "done_deg": deg(turned), "remaining_deg": deg(remaining) }));
        }
        if remaining.abs() <= TOLERANCE_RAD {
            break;
        }
        if started.elapsed() > budget {
            ctx.base.stop();
            return Err(AiccError::new(
                ErrorCode::Timeout,
                true,
                format!("turn did not reach its goal within {:.1} s: {:.1}° of {:.1}° done", budget.as_secs_f64(), deg(turned), deg(goal_rad)),
            ));
        }
        let command = BaseVelocity { linear_mps: 0.0, angular_radps: profile_rate(remaining, rate_radps, accel) };
        // Obstacles, contacts and the geofence always allow turning in
        // place; a rule that holds turning at zero (stale odometry or IMU)
        // ends the turn once it has for the settle time, rather than at the
        // timeout.
        if let Some(blocking) = blocked.observe(ctx.base.blocked_by(command), Instant::now(), BLOCKED_SETTLE) {
            ctx.base.stop();
            return Err(governor_stop_error("turn", &blocking, &format!("after {:.1}° of {:.1}°", deg(turned), deg(goal_rad))));
        }
        if !ctx.base.request(halts, command, Instant::now()) {
            return Err(stopped_error("the turn"));
        }
    }
    ctx.base.finish();
    let settle_started = Instant::now();
    loop {
        ticker.tick().await;
        let sample = fresh_odometry(ctx)?;
        unwrapper.update(yaw_of(&sample));
        if sample.angular_velocity_radps.z.abs() <= SETTLED_RATE_RADPS || settle_started.elapsed() >= SETTLE_TIMEOUT {
            break;
        }
    }
    Ok(Turned { achieved_rad: unwrapper.total(), duration_s: started.elapsed().as_secs_f64() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::input::input_map;

    #[test]
    fn yaw_readings_unwrap_across_the_half_turn_and_beyond() {
        // Counter-clockwise from 170 deg through 180 to -170 (i.e. 190) and on, 1.5 turns.
        let mut unwrapper = YawUnwrapper::new(170f64.to_radians());
        let mut total = 0.0;
        for step in 1..=540 {
            let yaw = wrap_angle((170.0 + step as f64).to_radians());
            total = unwrapper.update(yaw);
        }
        assert!((deg(total) - 540.0).abs() < 1e-9, "{}", deg(total));
        // And clockwise back.
        let mut back = YawUnwrapper::new(0.0);
        for step in 1..=400 {
            back.update(wrap_angle((-(step as f64)).to_radians()));
        }
        assert!((deg(back.total()) + 400.0).abs() < 1e-9);
    }

    #[test]
    fn the_profile_cruises_brakes_keeps_the_sign_and_creeps_at_the_end() {
        let (max, accel) = (1.5, 2.4);
        assert_eq!(profile_rate(3.0, max, accel), 1.5);
        assert_eq!(profile_rate(-3.0, max, accel), -1.5);
        assert_eq!(profile_rate(1e-4, max, accel), MIN_RATE_RADPS);
        assert_eq!(profile_rate(-1e-4, max, accel), -MIN_RATE_RADPS);
        // Near the goal the rate is about GAIN x remaining.
        let near = profile_rate(0.02, max, accel);
        assert!((near - TAIL_GAIN_PER_S * 0.02).abs() < 0.006, "{near}");
        // Never faster than the braking curve, so the base can stop in time.
        for i in 1..300 {
            let d = i as f64 * 0.01;
            let v = profile_rate(d, max, accel);
            assert!(v <= (2.0 * accel * d).sqrt().max(MIN_RATE_RADPS) + 1e-12, "{d}: {v}");
        }
    }

    #[test]
    fn following_the_profile_never_asks_for_more_than_the_planning_deceleration() {
        let (max, accel, dt) = (1.5, 2.4, 0.001);
        let mut remaining = PI;
        let mut rate: f64 = max;
        while remaining > TOLERANCE_RAD {
            let next = profile_rate(remaining, max, accel);
            assert!((rate - next) / dt <= accel * 1.01, "at {remaining}: {rate} -> {next}");
            rate = next;
            remaining -= rate * dt;
        }
        assert!(remaining > -1e-3, "no overshoot: {remaining}");
    }

    #[test]
    fn the_schema_refuses_absurd_yaws_naming_the_field_and_the_limit() {
        use crate::protocol::catalog::Catalog;
        let catalog = Catalog::new(vec![Turn::new(&BaseConfig::default()).descriptor()]).expect("the schema compiles");
        let input = input_map;
        let error = catalog.validate("turn", input(json!({"yaw": 1e9}))).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidInput);
        assert!(error.message.contains("input.yaw") && error.message.contains("360"), "{}", error.message);
        assert!(catalog.validate("turn", input(json!({"yaw": -45}))).is_ok(), "Appendix A's example");
        assert!(catalog.validate("turn", input(json!({"yaw": 90, "pitch": 10, "speed_dps": 30}))).is_ok());
        assert!(catalog.validate("turn", input(json!({"yaw": 90, "roll": 1}))).unwrap_err().message.contains("roll"));
        assert!(catalog.validate("turn", input(json!({"pitch": 10}))).unwrap_err().message.contains("yaw"));
    }

    #[test]
    fn the_budget_grows_with_the_turn() {
        assert!(budget(PI, 1.5, 2.4) > budget(0.5, 1.5, 2.4));
        assert!(budget(0.0, 1.5, 2.4) >= Duration::from_secs(5));
    }

    #[test]
    fn angles_wrap_into_the_half_open_interval() {
        assert!((wrap_angle(3.0 * PI / 2.0) + PI / 2.0).abs() < 1e-12);
        assert_eq!(wrap_angle(-PI), PI);
    }
}
