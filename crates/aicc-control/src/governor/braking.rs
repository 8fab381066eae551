//! Governing a base command under a safety [`Envelope`], with emergency
//! braking: a stop (or slow-down) demanded by a safety rule is not held back
//! by the comfortable acceleration limit.
//!
//! Per component (linear, angular), with `p` the previous command, `t` the
//! request clamped to the velocity limits and then to the envelope:
//! - if `p` is outside the envelope (a rule forces it towards zero, since
//!   envelopes always contain zero), it moves towards the envelope's nearer
//!   edge at up to the emergency deceleration, and in this step gets as far
//!   as that edge, or as the ordinary slowing towards `t` takes it where
//!   that is further (never crossing zero); the next step continues normally;
//! - otherwise it moves towards `t` at up to the normal acceleration limit,
//!   exactly as [`govern_base`](super::govern_base) does (both speeding up
//!   and an operator's ordinary slowing down).
//!
//! So accelerating away from zero always honours the normal limit, slowing
//! never exceeds the emergency deceleration, and the command is inside the
//! envelope at most [`braking_time_s`] of control time after the envelope
//! last narrowed. Example: from 0.22 m/s with an emergency deceleration of
//! 3 m/s^2 the base needs 0.22 / 3 = 73 ms; the command is exactly zero at
//! the first control tick at or after that: 75 ms at 200 Hz, 80 ms at 50 or
//! 100 Hz (the normal 1 m/s^2 would need 220 ms).
//!
//! Control time is the sum of the steps' `dt_s`, each capped at
//! [`MAX_STEP_S`]: a stalled loop brakes in more wall time rather than in one
//! jump.

use super::base::{BaseLimits, BaseVelocity, Clamps, MAX_STEP_S};
use super::safety::{Envelope, Restriction};

/// How hard the base may brake when a safety rule demands it. Values below
/// the normal acceleration limits are raised to them: braking for safety is
/// never gentler than ordinary braking.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct EmergencyLimits {
    pub max_emergency_decel_mps2: f64,
    pub max_emergency_decel_radps2: f64,
}

impl EmergencyLimits {
    /// 3 m/s^2 and 10 rad/s^2: a TurtleBot3-class base stops from full speed
    /// (0.22 m/s, 1.5 rad/s) in 73 ms and 150 ms.
    pub const DEFAULT: EmergencyLimits =
        EmergencyLimits { max_emergency_decel_mps2: 3.0, max_emergency_decel_radps2: 10.0 };

    /// The linear deceleration actually used: the larger of the emergency
    /// and the normal limit (0 if neither is a positive finite number).
    pub fn linear_decel(&self, limits: &BaseLimits) -> f64 {
        positive_max(self.max_emergency_decel_mps2, limits.max_linear_accel_mps2)
    }

    /// The angular deceleration actually used, as [`EmergencyLimits::linear_decel`].
    pub fn angular_decel(&self, limits: &BaseLimits) -> f64 {
        positive_max(self.max_emergency_decel_radps2, limits.max_angular_accel_radps2)
    }
}

impl Default for EmergencyLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

fn positive_max(a: f64, b: f64) -> f64 {
    [a, b].into_iter().filter(|v| v.is_finite() && *v > 0.0).fold(0.0, f64::max)
}

/// The longest control time an emergency stop from any allowed velocity
/// takes: `max(max_linear / linear_decel, max_angular / angular_decel)`.
/// Infinite if a deceleration is zero (a misconfiguration).
pub fn braking_time_s(limits: &BaseLimits, emergency: &EmergencyLimits) -> f64 {
    let linear = limits.max_linear_mps.max(0.0) / emergency.linear_decel(limits);
    let angular = limits.max_angular_radps.max(0.0) / emergency.angular_decel(limits);
    let time = |t: f64| if t.is_nan() { 0.0 } else { t };
    time(linear).max(time(angular))
}

/// One governed step under an envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct GovernedStep {
    /// What to publish.
    pub command: BaseVelocity,
    /// Velocity, acceleration and non-finite clamps, as from `govern_base`.
    pub clamps: Clamps,
    /// The request (after the velocity limits) was outside the envelope.
    pub envelope_clamped: bool,
    /// Some component was braked at the emergency rate this step.
    pub emergency_braking: bool,
    /// The envelope's active restrictions, for status and events.
    pub restrictions: Vec<Restriction>,
}

impl GovernedStep {
    /// Whether the command differs from the request for any reason.
    pub fn clamped(&self) -> bool {
        self.clamps.any() || self.envelope_clamped || self.emergency_braking
    }
}

/// Limits `requested` to `limits`' velocities and to `envelope`, then moves
/// from `previous` towards it over `dt_s` seconds: at the emergency
/// deceleration while `previous` is outside the envelope, at the normal
/// acceleration limit otherwise. See the module documentation.
pub fn govern_base_with_envelope(
    limits: &BaseLimits,
    emergency: &EmergencyLimits,
    previous: BaseVelocity,
    requested: BaseVelocity,
    envelope: &Envelope,
    dt_s: f64,
) -> GovernedStep {
    govern_base_step(limits, emergency, previous, requested, envelope, dt_s, MAX_STEP_S)
}

/// As [`govern_base_with_envelope`], speeding up over at most
/// `max_accel_step_s` of the `dt_s` elapsed, slowing down (ordinary, or
/// braking for a rule) over all of it (up to [`MAX_STEP_S`]). A control loop that missed
/// ticks then brakes for the time it lost but never catches up on
/// acceleration in one jump: the command's acceleration over any window
/// stays within the limit (a loop starved for 0.1 s would otherwise turn
/// 3 rad/s^2 into a 0.3 rad/s step, 5.4 rad/s^2 over the next 0.1 s).
pub fn govern_base_step(
    limits: &BaseLimits,
    emergency: &EmergencyLimits,
    previous: BaseVelocity,
    requested: BaseVelocity,
    envelope: &Envelope,
    dt_s: f64,
    max_accel_step_s: f64,
) -> GovernedStep {
    let mut clamps = Clamps::default();
    let requested = if requested.linear_mps.is_finite() && requested.angular_radps.is_finite() {
        requested
    } else {
        clamps.non_finite = true;
        BaseVelocity::ZERO
    };
    let dt_s = if dt_s.is_finite() { dt_s.clamp(0.0, MAX_STEP_S) } else { 0.0 };
    let accel_dt_s =
        if max_accel_step_s.is_finite() { dt_s.min(max_accel_step_s.max(0.0)) } else { dt_s };
    let linear = govern_component(
        previous.linear_mps,
        requested.linear_mps,
        limits.max_linear_mps,
        envelope.linear_range(),
        limits.max_linear_accel_mps2 * accel_dt_s,
        limits.max_linear_accel_mps2 * dt_s,
        emergency.linear_decel(limits) * dt_s,
    );
    let angular = govern_component(
        previous.angular_radps,
        requested.angular_radps,
        limits.max_angular_radps,
        envelope.angular_range(),
        limits.max_angular_accel_radps2 * accel_dt_s,
        limits.max_angular_accel_radps2 * dt_s,
        emergency.angular_decel(limits) * dt_s,
    );
    clamps.linear_velocity = linear.velocity_clamped;
    clamps.angular_velocity = angular.velocity_clamped;
    clamps.linear_acceleration = linear.acceleration_clamped;
    clamps.angular_acceleration = angular.acceleration_clamped;
    GovernedStep {
        command: BaseVelocity { linear_mps: linear.value, angular_radps: angular.value },
        clamps,
        envelope_clamped: linear.envelope_clamped || angular.envelope_clamped,
        emergency_braking: linear.braking || angular.braking,
        restrictions: envelope.restrictions.clone(),
    }
}

struct Component {
    value: f64,
    velocity_clamped: bool,
    envelope_clamped: bool,
    acceleration_clamped: bool,
    braking: bool,
}

fn govern_component(
    previous: f64,
    requested: f64,
    max: f64,
    envelope: (f64, f64),
    max_change: f64,
    max_slowdown: f64,
    max_brake: f64,
) -> Component {
    let max = if max.is_finite() { max.max(0.0) } else { 0.0 };
    let max_change = if max_change.is_finite() { max_change.max(0.0) } else { 0.0 };
    let max_slowdown =
        if max_slowdown.is_finite() { max_slowdown.max(max_change) } else { max_change };
    let max_brake = if max_brake.is_finite() { max_brake.max(max_change) } else { max_change };
    let previous = if previous.is_finite() { previous } else { 0.0 };
    // The envelope within the velocity limits; both contain zero.
    let (low, high) = (envelope.0.max(-max), envelope.1.min(max));
    let within_limits = requested.clamp(-max, max);
    let target = within_limits.clamp(low, high);
    // Outside the envelope: into it at up to the emergency rate, and on
    // towards the target at the ordinary rate where that slows more (never
    // past zero in this step). Stopping at the edge alone, a command above
    // a slow-down ramp that shrank every step followed the ramp down
    // instead of the request: a move's stop on the ramp towards a wall
    // ended 3 to 11 cm past its goal (a TurtleBot 3's 0.8 m move, 0.909 m).
    let (value, acceleration_clamped, braking) = if previous > high {
        let slowed = target.max((previous - max_slowdown).min(high)).max(0.0);
        (slowed.max(previous - max_brake), false, true)
    } else if previous < low {
        let slowed = target.min((previous + max_slowdown).max(low)).min(0.0);
        (slowed.min(previous + max_brake), false, true)
    } else {
        // Speeding up over the capped step; slowing down (towards zero)
        // over all the time elapsed, so that a late tick never delays a
        // stop the motion planned.
        let slowing = target.abs() < previous.abs() && target * previous >= 0.0;
        let change = if slowing { max_slowdown } else { max_change };
        let limited = target.clamp(previous - change, previous + change);
        (limited, limited != target, false)
    };
    // The velocity limit wins over any rate limit (as in govern_base).
    let value = value.clamp(-max, max);
    Component {
        value,
        velocity_clamped: within_limits != requested,
        envelope_clamped: target != within_limits,
        acceleration_clamped,
        braking,
    }
}

#[cfg(test)]
mod tests {
    use super::super::base::govern_base;
    use super::super::safety::{
        is_commanded_to_move, safety_envelope, Geofence, Pose2D, SafetyConfig, SafetyInputs,
        SafetyState,
    };
    use super::*;
    use proptest::prelude::*;

    const LIMITS: BaseLimits = BaseLimits {
        max_linear_mps: 0.22,
        max_angular_radps: 1.5,
        max_linear_accel_mps2: 1.0,
        max_angular_accel_radps2: 3.0,
    };
    const EMERGENCY: EmergencyLimits = EmergencyLimits::DEFAULT;

    fn stop_envelope() -> Envelope {
        let inputs = SafetyInputs {
            odometry_age_s: Some(0.62),
            imu_age_s: Some(0.0),
            commanded_to_move: true,
            ..SafetyInputs::default()
        };
        safety_envelope(&LIMITS, &SafetyConfig::DEFAULT, &SafetyState::new(), &inputs)
    }

    fn open_envelope() -> Envelope {
        Envelope::unrestricted(&LIMITS)
    }

    /// Ticks until the command is exactly zero.
    fn ticks_to_stop(from: BaseVelocity, envelope: &Envelope, dt_s: f64) -> usize {
        let mut v = from;
        for tick in 1..10_000 {
            v = govern_base_with_envelope(
                &LIMITS,
                &EMERGENCY,
                v,
                BaseVelocity { linear_mps: 0.22, angular_radps: 1.5 },
                envelope,
                dt_s,
            )
            .command;
            if v.is_zero() {
                return tick;
            }
        }
        panic!("never stopped")
    }

    #[test]
    fn an_emergency_stop_from_full_speed_takes_about_75_ms() {
        let full = BaseVelocity { linear_mps: 0.22, angular_radps: 0.0 };
        assert!(
            (braking_time_s(&LIMITS, &EMERGENCY) - 0.15).abs() < 1e-12,
            "angular 1.5 rad/s at 10 rad/s^2 dominates"
        );
        assert_eq!(ticks_to_stop(full, &stop_envelope(), 0.005), 15, "75 ms at 200 Hz");
        assert_eq!(ticks_to_stop(full, &stop_envelope(), 0.01), 8, "80 ms at 100 Hz");
        assert_eq!(ticks_to_stop(full, &stop_envelope(), 0.02), 4, "80 ms at 50 Hz");
        let first =
            govern_base_with_envelope(&LIMITS, &EMERGENCY, full, full, &stop_envelope(), 0.02);
        assert!(
            (first.command.linear_mps - 0.16).abs() < 1e-12
                && first.emergency_braking
                && first.envelope_clamped,
            "{first:?}"
        );
        assert_eq!(first.restrictions[0].name(), "odometry_stale");
        assert!(first.clamped());
        // An ordinary stop (request zero, nothing restricted) keeps the normal 1 m/s^2: 220 ms.
        let mut v = full;
        let mut ticks = 0;
        while !v.is_zero() {
            v = govern_base_with_envelope(
                &LIMITS,
                &EMERGENCY,
                v,
                BaseVelocity::ZERO,
                &open_envelope(),
                0.02,
            )
            .command;
            ticks += 1;
        }
        assert!((11..=12).contains(&ticks), "220 ms (plus one tick of rounding): {ticks}");
    }

    #[test]
    fn a_late_tick_brakes_for_the_time_lost_but_does_not_catch_up_on_acceleration() {
        let turning = BaseVelocity { linear_mps: 0.0, angular_radps: 1.5 };
        let from_rest = govern_base_step(
            &LIMITS,
            &EMERGENCY,
            BaseVelocity::ZERO,
            turning,
            &open_envelope(),
            0.1,
            0.03,
        );
        assert!(
            (from_rest.command.angular_radps - 0.09).abs() < 1e-12,
            "3 rad/s^2 over 30 ms, not 100: {from_rest:?}"
        );
        let braking =
            govern_base_step(&LIMITS, &EMERGENCY, turning, turning, &stop_envelope(), 0.1, 0.03);
        assert!(
            (braking.command.angular_radps - 0.5).abs() < 1e-12,
            "10 rad/s^2 over the 100 ms lost: {braking:?}"
        );
        assert!(braking.emergency_braking);
        let slowing = govern_base_step(
            &LIMITS,
            &EMERGENCY,
            turning,
            BaseVelocity::ZERO,
            &open_envelope(),
            0.1,
            0.03,
        );
        assert!(
            (slowing.command.angular_radps - 1.2).abs() < 1e-12,
            "an ordinary stop, over the 100 ms lost: {slowing:?}"
        );
        let unbounded = govern_base_with_envelope(
            &LIMITS,
            &EMERGENCY,
            BaseVelocity::ZERO,
            turning,
            &open_envelope(),
            0.1,
        );
        assert!((unbounded.command.angular_radps - 0.3).abs() < 1e-12, "{unbounded:?}");
    }

    #[test]
    fn accelerating_uses_the_normal_limit_even_inside_a_restriction() {
        let mut state = SafetyState::new();
        let inputs = SafetyInputs {
            odometry_age_s: Some(0.0),
            imu_age_s: Some(0.0),
            commanded_to_move: true,
            in_contact: true,
            ..SafetyInputs::default()
        };
        state.update(&SafetyConfig::DEFAULT, &inputs, 0.0);
        let latched = safety_envelope(&LIMITS, &SafetyConfig::DEFAULT, &state, &inputs);
        let out = govern_base_with_envelope(
            &LIMITS,
            &EMERGENCY,
            BaseVelocity::ZERO,
            BaseVelocity { linear_mps: -0.2, angular_radps: 1.0 },
            &latched,
            0.02,
        );
        assert!(
            (out.command.linear_mps + 0.02).abs() < 1e-12
                && (out.command.angular_radps - 0.06).abs() < 1e-12,
            "{out:?}"
        );
        assert!(!out.emergency_braking && out.clamps.linear_acceleration);
        // Moving forward into a contact: braked at 3 m/s^2 to zero, not into reverse in the same step.
        let out = govern_base_with_envelope(
            &LIMITS,
            &EMERGENCY,
            BaseVelocity { linear_mps: 0.05, angular_radps: 0.0 },
            BaseVelocity { linear_mps: -0.2, angular_radps: 0.0 },
            &latched,
            0.02,
        );
        assert_eq!(out.command.linear_mps, 0.0);
        assert!(out.emergency_braking);
    }

    #[test]
    fn braking_stops_at_the_edge_of_a_slow_down_then_continues_normally() {
        let inputs = SafetyInputs {
            odometry_age_s: Some(0.0),
            imu_age_s: Some(0.0),
            commanded_to_move: true,
            obstacle_ahead_m: Some(0.35),
            ..SafetyInputs::default()
        };
        let slow = safety_envelope(&LIMITS, &SafetyConfig::DEFAULT, &SafetyState::new(), &inputs);
        let mut v = BaseVelocity { linear_mps: 0.22, angular_radps: 0.0 };
        v = govern_base_with_envelope(
            &LIMITS,
            &EMERGENCY,
            v,
            BaseVelocity { linear_mps: 0.0, angular_radps: 0.0 },
            &slow,
            0.02,
        )
        .command;
        assert!((v.linear_mps - 0.16).abs() < 1e-12);
        let step =
            govern_base_with_envelope(&LIMITS, &EMERGENCY, v, BaseVelocity::ZERO, &slow, 0.02);
        assert!(
            (step.command.linear_mps - 0.11).abs() < 1e-12,
            "emergency rate only down to the 0.11 m/s edge: {step:?}"
        );
        let step = govern_base_with_envelope(
            &LIMITS,
            &EMERGENCY,
            step.command,
            BaseVelocity::ZERO,
            &slow,
            0.02,
        );
        assert!(
            (step.command.linear_mps - 0.09).abs() < 1e-12 && !step.emergency_braking,
            "then the normal 1 m/s^2: {step:?}"
        );
    }

    #[test]
    fn without_restrictions_it_matches_govern_base() {
        let cases = [
            (BaseVelocity::ZERO, BaseVelocity { linear_mps: 5.0, angular_radps: -9.0 }, 0.02),
            (
                BaseVelocity { linear_mps: 0.22, angular_radps: 0.0 },
                BaseVelocity { linear_mps: 0.3, angular_radps: 0.0 },
                0.02,
            ),
            (
                BaseVelocity { linear_mps: 0.1, angular_radps: 1.0 },
                BaseVelocity { linear_mps: f64::NAN, angular_radps: 0.0 },
                0.5,
            ),
            (
                BaseVelocity { linear_mps: -0.2, angular_radps: 1.0 },
                BaseVelocity { linear_mps: 0.2, angular_radps: -1.0 },
                f64::NAN,
            ),
        ];
        for (previous, requested, dt) in cases {
            let a = govern_base(&LIMITS, previous, requested, dt);
            let b = govern_base_with_envelope(
                &LIMITS,
                &EMERGENCY,
                previous,
                requested,
                &open_envelope(),
                dt,
            );
            assert_eq!(a.command, b.command);
            assert_eq!(a.clamps, b.clamps);
            assert!(!b.emergency_braking && !b.envelope_clamped && b.restrictions.is_empty());
        }
    }

    #[test]
    fn weak_emergency_limits_are_raised_to_the_normal_ones() {
        let weak =
            EmergencyLimits { max_emergency_decel_mps2: 0.1, max_emergency_decel_radps2: f64::NAN };
        assert_eq!(weak.linear_decel(&LIMITS), 1.0);
        assert_eq!(weak.angular_decel(&LIMITS), 3.0);
        assert!((braking_time_s(&LIMITS, &weak) - 0.5).abs() < 1e-12);
    }

    // ---------------------------------------------------------------- properties

    const FENCE: Geofence = Geofence { centre_x_m: 0.0, centre_y_m: 0.0, radius_m: 2.0 };

    fn config() -> SafetyConfig {
        SafetyConfig { geofence: Some(FENCE), ..SafetyConfig::DEFAULT }
    }

    fn request() -> impl Strategy<Value = BaseVelocity> {
        let linear = prop_oneof![4 => -0.5..0.5f64, 1 => Just(0.0), 1 => Just(0.22), 1 => Just(f64::NAN), 1 => Just(f64::INFINITY)];
        let angular = prop_oneof![4 => -3.0..3.0f64, 2 => Just(0.0), 1 => Just(f64::NEG_INFINITY)];
        (linear, angular)
            .prop_map(|(linear_mps, angular_radps)| BaseVelocity { linear_mps, angular_radps })
    }

    fn age() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![6 => (0.0..0.25f64).prop_map(Some), 1 => (0.25..2.0f64).prop_map(Some), 1 => Just(None), 1 => Just(Some(f64::NAN))]
    }

    fn distance() -> impl Strategy<Value = Option<f64>> {
        prop_oneof![2 => Just(None), 3 => (0.0..0.8f64).prop_map(Some), 1 => Just(Some(f64::NAN))]
    }

    /// Sensor state held for a segment of steps (`commanded_to_move` is
    /// filled in per step from the previous command and the request).
    fn sensors() -> impl Strategy<Value = SafetyInputs> {
        (
            age(),
            age(),
            prop::bool::weighted(0.3),
            distance(),
            distance(),
            proptest::option::weighted(0.9, (-3.0..3.0f64, -3.0..3.0f64, -4.0..4.0f64)),
        )
            .prop_map(
                |(
                    odometry_age_s,
                    imu_age_s,
                    in_contact,
                    obstacle_ahead_m,
                    obstacle_behind_m,
                    pose,
                )| SafetyInputs {
                    odometry_age_s,
                    imu_age_s,
                    commanded_to_move: false,
                    in_contact,
                    obstacle_ahead_m,
                    obstacle_behind_m,
                    obstacle_turning_m: None,
                    cliff_ahead: false,
                    backup_limit: false,
                    hazard_stop: false,
                    pose: pose.map(|(x_m, y_m, yaw_rad)| Pose2D { x_m, y_m, yaw_rad }),
                    arm: Default::default(),
                },
            )
    }

    fn segments() -> impl Strategy<Value = Vec<(SafetyInputs, Vec<(BaseVelocity, f64)>)>> {
        let dt = prop_oneof![8 => 0.001..0.05f64, 1 => Just(0.0), 1 => 0.05..0.3f64];
        proptest::collection::vec(
            (sensors(), proptest::collection::vec((request(), dt), 1..40)),
            1..12,
        )
    }

    fn is_stale(age: Option<f64>, max: f64) -> bool {
        !matches!(age, Some(a) if a.is_finite() && a >= 0.0 && a <= max)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn every_command_is_safe_under_arbitrary_sensor_histories(segments in segments()) {
            let config = config();
            let t_linear = LIMITS.max_linear_mps / EMERGENCY.linear_decel(&LIMITS);
            let t_angular = LIMITS.max_angular_radps / EMERGENCY.angular_decel(&LIMITS);
            let t_brake = braking_time_s(&LIMITS, &EMERGENCY);
            let (a_lin, a_ang) = (LIMITS.max_linear_accel_mps2, LIMITS.max_angular_accel_radps2);
            let (d_lin, d_ang) = (EMERGENCY.linear_decel(&LIMITS), EMERGENCY.angular_decel(&LIMITS));
            const EPS: f64 = 1e-9;

            let mut state = SafetyState::new();
            let mut previous = BaseVelocity::ZERO;
            let mut previous_envelope: Option<Envelope> = None;
            let mut now_s = 0.0;
            // Control time since each condition began (inclusive of the current step).
            let (mut since_linear_narrowed, mut since_angular_narrowed) = (0.0f64, 0.0f64);
            let mut stale_for = 0.0f64;
            let mut latched_for = 0.0f64;
            let (mut blocked_ahead_for, mut blocked_behind_for) = (0.0f64, 0.0f64);
            let at_stop = |d: Option<f64>| d.is_some_and(|d| d.is_nan() || d <= config.stop_distance_m);

            for (sensors, steps) in segments {
                for (requested, dt_s) in steps {
                    now_s += dt_s;
                    let step = dt_s.min(MAX_STEP_S);
                    let inputs = SafetyInputs { commanded_to_move: is_commanded_to_move(previous, requested), ..sensors };
                    state.update(&config, &inputs, now_s);
                    let envelope = safety_envelope(&LIMITS, &config, &state, &inputs);
                    let out = govern_base_with_envelope(&LIMITS, &EMERGENCY, previous, requested, &envelope, dt_s);
                    let (v, p) = (out.command, previous);

                    let narrowed = |e: &Envelope, old: &Option<Envelope>, linear: bool| match old {
                        None => true,
                        Some(o) if linear => e.linear_max_mps < o.linear_max_mps || e.linear_min_mps > o.linear_min_mps,
                        Some(o) => e.angular_max_radps < o.angular_max_radps || e.angular_min_radps > o.angular_min_radps,
                    };
                    since_linear_narrowed = if narrowed(&envelope, &previous_envelope, true) { step } else { since_linear_narrowed + step };
                    since_angular_narrowed = if narrowed(&envelope, &previous_envelope, false) { step } else { since_angular_narrowed + step };
                    let stale = is_stale(sensors.odometry_age_s, config.max_sensor_age_s) || is_stale(sensors.imu_age_s, config.max_sensor_age_s);
                    stale_for = if stale { stale_for + step } else { 0.0 };
                    latched_for = if state.contact_latched() { latched_for + step } else { 0.0 };
                    blocked_ahead_for = if at_stop(sensors.obstacle_ahead_m) { blocked_ahead_for + step } else { 0.0 };
                    blocked_behind_for = if at_stop(sensors.obstacle_behind_m) { blocked_behind_for + step } else { 0.0 };

                    // Finite and within the velocity limits.
                    prop_assert!(v.linear_mps.is_finite() && v.angular_radps.is_finite(), "{:?}", v);
                    prop_assert!(v.linear_mps.abs() <= LIMITS.max_linear_mps && v.angular_radps.abs() <= LIMITS.max_angular_radps, "{:?}", v);
                    // Away from zero: the normal limit; towards zero: the emergency one
                    // (and the normal one unless braking for a rule).
                    for (new, old, accel, decel) in [(v.linear_mps, p.linear_mps, a_lin, d_lin), (v.angular_radps, p.angular_radps, a_ang, d_ang)] {
                        let away = if new * old >= 0.0 { (new.abs() - old.abs()).max(0.0) } else { new.abs() };
                        prop_assert!(away <= accel * step + EPS, "accelerated {} from {} in {} s", new, old, step);
                        prop_assert!((new - old).abs() <= decel * step + EPS, "changed {} -> {} in {} s", old, new, step);
                        if !out.emergency_braking {
                            prop_assert!((new - old).abs() <= accel * step + EPS, "ordinary change {} -> {} in {} s", old, new, step);
                        }
                    }
                    // Within the envelope once the braking time has passed since it last narrowed.
                    if since_linear_narrowed >= t_linear + EPS {
                        prop_assert!(v.linear_mps >= envelope.linear_min_mps && v.linear_mps <= envelope.linear_max_mps,
                            "{:?} outside {:?} {} s after narrowing", v, envelope, since_linear_narrowed);
                    }
                    if since_angular_narrowed >= t_angular + EPS {
                        prop_assert!(v.angular_radps >= envelope.angular_min_radps && v.angular_radps <= envelope.angular_max_radps,
                            "{:?} outside {:?} {} s after narrowing", v, envelope, since_angular_narrowed);
                    }
                    // Required stops.
                    if stale_for >= t_brake + EPS {
                        prop_assert!(v.is_zero(), "stale sensors for {} s but commanding {:?}", stale_for, v);
                    }
                    if latched_for >= t_linear + EPS {
                        prop_assert!(v.linear_mps <= 0.0, "contact latched for {} s but commanding {:?}", latched_for, v);
                    }
                    if state.contact_latched() {
                        prop_assert!(envelope.linear_max_mps == 0.0);
                    }
                    // An obstacle at the stop distance (or a NaN reading): no motion towards it,
                    // the creep floor notwithstanding.
                    if blocked_ahead_for >= t_linear + EPS {
                        prop_assert!(v.linear_mps <= 0.0, "obstacle ahead at {:?} for {} s but commanding {:?}", sensors.obstacle_ahead_m, blocked_ahead_for, v);
                    }
                    if blocked_behind_for >= t_linear + EPS {
                        prop_assert!(v.linear_mps >= 0.0, "obstacle behind at {:?} for {} s but commanding {:?}", sensors.obstacle_behind_m, blocked_behind_for, v);
                    }
                    previous = v;
                    previous_envelope = Some(envelope);
                }
            }
        }

        /// A command above a slow-down ramp that shrinks a little every
        /// step (the base nearing a wall) slows towards the request at
        /// the ordinary rate at least: it does not ride the ramp down.
        #[test]
        fn a_command_above_a_shrinking_ramp_slows_towards_the_request(
            start in 0.1..0.22f64, shrink in 0.0001..0.005f64, steps in 1usize..20, dt_s in 0.005..0.05f64,
        ) {
            let mut previous = BaseVelocity { linear_mps: start, angular_radps: 0.0 };
            let mut high = start - shrink;
            for _ in 0..steps {
                let envelope = Envelope { linear_max_mps: high, ..Envelope::unrestricted(&LIMITS) };
                let v = govern_base_with_envelope(&LIMITS, &EMERGENCY, previous, BaseVelocity::ZERO, &envelope, dt_s).command;
                let ordinary = (previous.linear_mps - LIMITS.max_linear_accel_mps2 * dt_s).max(0.0);
                prop_assert!(v.linear_mps <= ordinary.min(high) + 1e-12, "{} from {} under {}", v.linear_mps, previous.linear_mps, high);
                prop_assert!(v.linear_mps >= 0.0);
                prop_assert!(previous.linear_mps - v.linear_mps <= EMERGENCY.linear_decel(&LIMITS) * dt_s + 1e-12);
                previous = v;
                high = (high - shrink).max(0.0);
            }
        }

        /// Closed loop: the robot, driven by random requests through the
        /// governor with the pose integrated from its commands, never gets
        /// further outside the geofence than half a step of travel at full
        /// speed (11 mm at 0.1 s steps; was two steps and the braking
        /// distance, 52 mm, before it braked ahead of the fence).
        #[test]
        fn a_driven_robot_stays_near_the_geofence(
            start in (-1.5..1.5f64, -1.0..1.0f64, -4.0..4.0f64),
            steps in proptest::collection::vec((request(), 0.005..0.1f64), 1..400),
        ) {
            let config = SafetyConfig { geofence: Some(Geofence { centre_x_m: 0.0, centre_y_m: 0.0, radius_m: 2.0 }), ..SafetyConfig::DEFAULT };
            // Half a step of travel at full speed: the braking curve
            // leaves the last step before the fence slow (at most what
            // the emergency deceleration left of the speed before it).
            let bound = 2.0 + LIMITS.max_linear_mps * MAX_STEP_S / 2.0 + 1e-6;
            let mut pose = Pose2D { x_m: start.0, y_m: start.1, yaw_rad: start.2 };
            let mut state = SafetyState::new();
            let mut previous = BaseVelocity::ZERO;
            let mut now_s = 0.0;
            let mut farthest = 0.0f64;
            for (requested, dt_s) in steps {
                now_s += dt_s;
                let inputs = SafetyInputs { odometry_age_s: Some(0.01), imu_age_s: Some(0.01), commanded_to_move: is_commanded_to_move(previous, requested), pose: Some(pose), ..SafetyInputs::default() };
                state.update(&config, &inputs, now_s);
                let envelope = safety_envelope(&LIMITS, &config, &state, &inputs);
                let v = govern_base_with_envelope(&LIMITS, &EMERGENCY, previous, requested, &envelope, dt_s).command;
                pose.x_m += v.linear_mps * pose.yaw_rad.cos() * dt_s;
                pose.y_m += v.linear_mps * pose.yaw_rad.sin() * dt_s;
                pose.yaw_rad += v.angular_radps * dt_s;
                farthest = farthest.max(pose.x_m.hypot(pose.y_m));
                previous = v;
            }
            prop_assert!(farthest <= bound, "reached {} m from the centre, bound {}", farthest, bound);
        }

        /// Closed loop: driving at a wall, the robot comes no closer than the
        /// stop distance less one step of travel.
        #[test]
        fn a_driven_robot_does_not_run_into_a_wall(
            start in -1.0..0.5f64, wall_x in 1.0..2.0f64,
            steps in proptest::collection::vec((request(), 0.005..0.1f64), 1..400),
        ) {
            let config = SafetyConfig::DEFAULT;
            let mut x = start;
            let mut state = SafetyState::new();
            let mut previous = BaseVelocity::ZERO;
            let mut closest = f64::INFINITY;
            let mut now_s = 0.0;
            for (requested, dt_s) in steps {
                now_s += dt_s;
                let requested = BaseVelocity { linear_mps: requested.linear_mps, angular_radps: 0.0 };
                let inputs = SafetyInputs { odometry_age_s: Some(0.01), imu_age_s: Some(0.01), commanded_to_move: is_commanded_to_move(previous, requested),
                                            obstacle_ahead_m: Some(wall_x - x), ..SafetyInputs::default() };
                state.update(&config, &inputs, now_s);
                let envelope = safety_envelope(&LIMITS, &config, &state, &inputs);
                let v = govern_base_with_envelope(&LIMITS, &EMERGENCY, previous, requested, &envelope, dt_s).command;
                x += v.linear_mps * dt_s;
                closest = closest.min(wall_x - x);
                previous = v;
            }
            prop_assert!(closest >= config.stop_distance_m - LIMITS.max_linear_mps * MAX_STEP_S - 1e-9, "came within {} m", closest);
        }

        /// Closed loop: asked to drive on at full speed towards a wall, the
        /// robot arrives at the stop distance (thanks to the creep floor,
        /// in control time no longer than creeping the whole slow-down zone
        /// plus a second), then holds there: it ends no nearer than the
        /// stop distance less what it travels in the step it crosses and
        /// the braking after.
        #[test]
        fn a_robot_driving_on_arrives_at_the_stop_distance(start_m in 0.21..3.0f64, dt_s in 0.005..0.05f64) {
            let config = SafetyConfig::DEFAULT;
            let (stop, creep) = (config.stop_distance_m, config.min_creep_speed_mps);
            let allowed_s = (config.slow_down_distance_m - stop) / creep + (start_m - config.slow_down_distance_m).max(0.0) / LIMITS.max_linear_mps + 1.0;
            let requested = BaseVelocity { linear_mps: LIMITS.max_linear_mps, angular_radps: 0.0 };
            let (mut distance_m, mut previous, mut now_s) = (start_m, BaseVelocity::ZERO, 0.0);
            let mut arrived_at_s = None;
            while now_s < allowed_s + 2.0 {
                now_s += dt_s;
                let inputs = SafetyInputs { odometry_age_s: Some(0.01), imu_age_s: Some(0.01), commanded_to_move: true, obstacle_ahead_m: Some(distance_m), ..SafetyInputs::default() };
                let envelope = safety_envelope(&LIMITS, &config, &SafetyState::new(), &inputs);
                let v = govern_base_with_envelope(&LIMITS, &EMERGENCY, previous, requested, &envelope, dt_s).command;
                distance_m -= v.linear_mps * dt_s;
                if distance_m <= stop && arrived_at_s.is_none() {
                    arrived_at_s = Some(now_s);
                }
                previous = v;
            }
            let arrived_at_s = arrived_at_s.ok_or_else(|| TestCaseError::fail(format!("still {distance_m} m from the wall after {now_s} s")))?;
            prop_assert!(arrived_at_s <= allowed_s, "arrived after {} s, allowed {} s", arrived_at_s, allowed_s);
            let overshoot_m = creep * dt_s + creep * creep / (2.0 * EMERGENCY.linear_decel(&LIMITS)) + 1e-9;
            prop_assert!(distance_m >= stop - overshoot_m, "ended {} m from the wall", distance_m);
            prop_assert!(previous.linear_mps == 0.0, "holding at the stop distance: {:?}", previous);
        }
    }
}
