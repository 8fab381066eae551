//! Speed profiles and time budgets of base motions: cruise, then brake on
//! a curve the base can follow within the planning share of its
//! acceleration limit, never slower than a creep that friction cannot stop.
use std::f64::consts::PI;
use std::time::Duration;

/// Slowest commanded speed while far from the goal: below it, wheel
/// friction may keep the robot from creeping the last millimetres.
pub const MIN_SPEED_MPS: f64 = 0.02;

/// Gain and cap of the heading hold that keeps the path straight.
pub const HEADING_GAIN_PER_S: f64 = 2.0;

pub const MAX_HEADING_CORRECTION_RADPS: f64 = 0.5;

/// The profile plans with this share of the acceleration limit, leaving the
/// governor headroom so that its rate limit does not cause overshoot.
pub const PLANNING_ACCEL_SHARE: f64 = 0.8;

/// How long to wait for the base to settle after the final stop (a move
/// or a turn).
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(1);

pub const SETTLED_SPEED_MPS: f64 = 0.005;

/// The speed to command with `remaining_m` to go (signed), for a base that
/// may decelerate at `accel_mps2` and go at most `max_speed_mps`: the
/// braking curve far from the goal, blending into a linear tail near it
/// (as [`profile_rate`]). On the bare curve the base reached the tolerance
/// still at sqrt(2 a d), 0.09 m/s, and a base slow to answer its last
/// command coasted 2 to 3 cm past the goal (a TurtleBot 3's 0.8 m move
/// ended at 0.829 m); on the tail it arrives at the creep speed.
pub fn profile_speed(remaining_m: f64, max_speed_mps: f64, accel_mps2: f64) -> f64 {
    let c = accel_mps2 / TAIL_GAIN_PER_S;
    let braking = (2.0 * accel_mps2 * remaining_m.abs() + c * c).sqrt() - c;
    braking.min(max_speed_mps).max(MIN_SPEED_MPS.min(max_speed_mps)).copysign(remaining_m)
}

/// The turn ends when odometry yaw is this close to the goal (the stop
/// that follows adds about a tenth of a degree; creeping the last
/// fraction of a degree at the slowest rate takes ~0.1 s).
pub const TOLERANCE_RAD: f64 = 0.25 * PI / 180.0;

/// Slowest commanded rate short of the goal: below it, wheel friction may
/// keep the base from creeping the last fraction of a degree.
pub const MIN_RATE_RADPS: f64 = 0.05;

/// Gain of the profile's linear tail near the goal (1/s): the rate is
/// about GAIN x remaining there, so the end is approached smoothly.
pub const TAIL_GAIN_PER_S: f64 = 4.0;

pub const SETTLED_RATE_RADPS: f64 = 0.01;

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
pub fn turn_budget(yaw_rad: f64, rate_radps: f64, accel_radps2: f64) -> Duration {
    Duration::from_secs_f64(
        3.0 * (yaw_rad.abs() / rate_radps + 2.0 * rate_radps / accel_radps2) + 5.0,
    )
}

/// Time allowed for a straight drive: three times the profile's (cruise
/// plus ramps), plus 5 s, for a slow simulator.
pub fn drive_budget(distance_m: f64, speed_mps: f64, accel_mps2: f64) -> Duration {
    Duration::from_secs_f64(
        3.0 * (distance_m.abs() / speed_mps + 2.0 * speed_mps / accel_mps2) + 5.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_cruises_brakes_and_keeps_the_sign() {
        assert_eq!(profile_speed(2.0, 0.22, 0.8), 0.22);
        assert_eq!(profile_speed(-2.0, 0.22, 0.8), -0.22);
        assert_eq!(profile_speed(1e-6, 0.22, 0.8), MIN_SPEED_MPS);
        // Near the goal the speed is about GAIN x remaining, well under the
        // bare braking curve: 0.045 m/s with 1.25 cm to go, not 0.14.
        let near = profile_speed(0.0125, 0.22, 0.8);
        assert!((near - TAIL_GAIN_PER_S * 0.0125).abs() < 0.006, "{near}");
        // Never faster than the braking curve, so the base can stop in time.
        for i in 1..300 {
            let d = i as f64 * 0.005;
            let v = profile_speed(d, 0.22, 0.8);
            assert!(v <= (2.0 * 0.8 * d).sqrt().max(MIN_SPEED_MPS) + 1e-12, "{d}: {v}");
        }
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
    fn the_budget_grows_with_the_turn() {
        assert!(turn_budget(PI, 1.5, 2.4) > turn_budget(0.5, 1.5, 2.4));
        assert!(turn_budget(0.0, 1.5, 2.4) >= Duration::from_secs(5));
    }
}
