//! Velocity and acceleration limits for the mobile base: every cmd_vel the
//! bridge publishes is the output of [`govern_base`].

/// A base velocity in the robot frame (REP-103: x forward, z up).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BaseVelocity {
    pub linear_mps: f64,
    pub angular_radps: f64,
}

impl BaseVelocity {
    pub const ZERO: BaseVelocity = BaseVelocity { linear_mps: 0.0, angular_radps: 0.0 };

    pub fn is_zero(&self) -> bool {
        self.linear_mps == 0.0 && self.angular_radps == 0.0
    }
}

/// The limits in force.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BaseLimits {
    pub max_linear_mps: f64,
    pub max_angular_radps: f64,
    pub max_linear_accel_mps2: f64,
    pub max_angular_accel_radps2: f64,
}

/// Why a command differs from what was requested.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clamps {
    /// The request was NaN or infinite and was replaced by zero.
    pub non_finite: bool,
    pub linear_velocity: bool,
    pub angular_velocity: bool,
    pub linear_acceleration: bool,
    pub angular_acceleration: bool,
}

impl Clamps {
    pub fn any(&self) -> bool {
        self.non_finite
            || self.linear_velocity
            || self.angular_velocity
            || self.linear_acceleration
            || self.angular_acceleration
    }
}

/// One governed step: what to publish, and what was changed on the way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Governed {
    pub command: BaseVelocity,
    pub clamps: Clamps,
}

/// Longest step the acceleration limit honours; a stalled loop must not turn
/// into permission for a large jump.
pub const MAX_STEP_S: f64 = 0.1;

/// Limits `requested` to the velocity limits, then to what the acceleration
/// limits allow from `previous` over `dt_s` seconds.
pub fn govern_base(
    limits: &BaseLimits,
    previous: BaseVelocity,
    requested: BaseVelocity,
    dt_s: f64,
) -> Governed {
    let mut clamps = Clamps::default();
    let requested = if requested.linear_mps.is_finite() && requested.angular_radps.is_finite() {
        requested
    } else {
        clamps.non_finite = true;
        BaseVelocity::ZERO
    };
    let dt_s = if dt_s.is_finite() { dt_s.clamp(0.0, MAX_STEP_S) } else { 0.0 };
    let (linear, linear_velocity_clamped) =
        clamp_symmetric(requested.linear_mps, limits.max_linear_mps);
    let (angular, angular_velocity_clamped) =
        clamp_symmetric(requested.angular_radps, limits.max_angular_radps);
    let (linear, linear_accel_clamped) =
        rate_limit(previous.linear_mps, linear, limits.max_linear_accel_mps2 * dt_s);
    let (angular, angular_accel_clamped) =
        rate_limit(previous.angular_radps, angular, limits.max_angular_accel_radps2 * dt_s);
    clamps.linear_velocity = linear_velocity_clamped;
    clamps.angular_velocity = angular_velocity_clamped;
    clamps.linear_acceleration = linear_accel_clamped;
    clamps.angular_acceleration = angular_accel_clamped;
    // The previous command may itself exceed newly tightened limits; the
    // velocity limit wins over the acceleration limit.
    let (linear, _) = clamp_symmetric(linear, limits.max_linear_mps);
    let (angular, _) = clamp_symmetric(angular, limits.max_angular_radps);
    Governed { command: BaseVelocity { linear_mps: linear, angular_radps: angular }, clamps }
}

fn clamp_symmetric(value: f64, limit: f64) -> (f64, bool) {
    let clamped = value.clamp(-limit, limit);
    (clamped, clamped != value)
}

fn rate_limit(previous: f64, target: f64, max_change: f64) -> (f64, bool) {
    let previous = if previous.is_finite() { previous } else { 0.0 };
    let limited = target.clamp(previous - max_change, previous + max_change);
    (limited, limited != target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: BaseLimits = BaseLimits {
        max_linear_mps: 0.22,
        max_angular_radps: 1.5,
        max_linear_accel_mps2: 1.0,
        max_angular_accel_radps2: 3.0,
    };

    #[test]
    fn clamps_velocity_then_acceleration() {
        let out = govern_base(
            &LIMITS,
            BaseVelocity::ZERO,
            BaseVelocity { linear_mps: 5.0, angular_radps: -9.0 },
            0.02,
        );
        assert!(
            (out.command.linear_mps - 0.02).abs() < 1e-12,
            "1 m/s^2 over 20 ms: {:?}",
            out.command
        );
        assert!((out.command.angular_radps + 0.06).abs() < 1e-12);
        assert!(
            out.clamps.linear_velocity
                && out.clamps.angular_velocity
                && out.clamps.linear_acceleration
        );
        let steady = govern_base(
            &LIMITS,
            BaseVelocity { linear_mps: 0.22, angular_radps: 0.0 },
            BaseVelocity { linear_mps: 0.3, angular_radps: 0.0 },
            0.02,
        );
        assert_eq!(steady.command.linear_mps, 0.22);
    }

    #[test]
    fn non_finite_requests_become_a_stop() {
        let previous = BaseVelocity { linear_mps: 0.1, angular_radps: 0.0 };
        let out = govern_base(
            &LIMITS,
            previous,
            BaseVelocity { linear_mps: f64::NAN, angular_radps: 0.0 },
            0.02,
        );
        assert!(out.clamps.non_finite);
        assert!(out.command.linear_mps < previous.linear_mps, "decelerates towards zero");
    }

    fn velocity() -> impl Strategy<Value = BaseVelocity> {
        let component = prop_oneof![
            -10.0..10.0f64,
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(0.0)
        ];
        (component.clone(), component)
            .prop_map(|(linear_mps, angular_radps)| BaseVelocity { linear_mps, angular_radps })
    }

    proptest! {
        #[test]
        fn every_command_is_within_velocity_and_acceleration_limits(
            steps in proptest::collection::vec((velocity(), 0.0..0.5f64), 1..200)
        ) {
            let mut previous = BaseVelocity::ZERO;
            for (requested, dt_s) in steps {
                let out = govern_base(&LIMITS, previous, requested, dt_s);
                let step = dt_s.min(MAX_STEP_S);
                prop_assert!(out.command.linear_mps.is_finite() && out.command.angular_radps.is_finite());
                prop_assert!(out.command.linear_mps.abs() <= LIMITS.max_linear_mps);
                prop_assert!(out.command.angular_radps.abs() <= LIMITS.max_angular_radps);
                prop_assert!((out.command.linear_mps - previous.linear_mps).abs() <= LIMITS.max_linear_accel_mps2 * step + 1e-12);
                prop_assert!((out.command.angular_radps - previous.angular_radps).abs() <= LIMITS.max_angular_accel_radps2 * step + 1e-12);
                previous = out.command;
            }
        }

        #[test]
        fn repeated_zero_requests_reach_a_full_stop(start in velocity(), dt_s in 0.005..0.1f64) {
            let mut previous = govern_base(&LIMITS, BaseVelocity::ZERO, start, 10.0).command;
            let worst_case_steps = (LIMITS.max_angular_radps / (LIMITS.max_angular_accel_radps2 * dt_s)).ceil() as usize + 1;
            for _ in 0..worst_case_steps.max((LIMITS.max_linear_mps / (LIMITS.max_linear_accel_mps2 * dt_s)).ceil() as usize + 1) {
                previous = govern_base(&LIMITS, previous, BaseVelocity::ZERO, dt_s).command;
            }
            prop_assert!(previous.is_zero(), "{:?}", previous);
        }
    }
}
