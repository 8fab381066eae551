//! Odometry continuity: a jump of the reported pose that neither the
//! base's motion nor the IMU can explain (an odometry reset, a driver
//! restart, a bad fusion step). What depends on poses in the odometry frame
//! (a move's distance, the geofence's centre, the contact latch's
//! reference, the obstacle memory) would silently move with it; a jump
//! must instead end the motion and be re-anchored, saying so. Pure: no
//! ROS, no clock.
use super::safety::{wrap_angle, Pose2D};

/// How much motion between two samples counts as explained.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ContinuityLimits {
    /// The fastest the base can drive (its limit), m/s: motion up to a
    /// margin above it is explained (a push, wheel slip).
    pub max_linear_mps: f64,
    /// The fastest it can turn, rad/s.
    pub max_angular_radps: f64,
    /// Slack on the position, m, and on the heading, rad (noise, a late
    /// sample's extrapolation).
    pub slack_m: f64,
    pub slack_rad: f64,
}

impl ContinuityLimits {
    /// Twice the base's limits are explained, plus 3 cm and 0.1 rad.
    pub fn for_base(max_linear_mps: f64, max_angular_radps: f64) -> Self {
        ContinuityLimits {
            max_linear_mps: 2.0 * max_linear_mps,
            max_angular_radps: 2.0 * max_angular_radps,
            slack_m: 0.03,
            slack_rad: 0.1,
        }
    }
}

/// One odometry sample as the check sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OdometryPoint {
    pub pose: Pose2D,
    /// Its stamp, s (the node's clock).
    pub stamp_s: f64,
    /// The IMU's yaw rate when it was taken, rad/s, if the robot has one.
    pub imu_yaw_rate_radps: Option<f64>,
}

/// A jump: how far, in what time, and what would have explained it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Jump {
    /// The change of the reported pose, in the odometry frame.
    pub dx_m: f64,
    pub dy_m: f64,
    pub dyaw_rad: f64,
    /// Between the two samples, s.
    pub dt_s: f64,
    /// What motion could explain: distance and turn.
    pub explained_m: f64,
    pub explained_rad: f64,
    pub before: Pose2D,
    pub after: Pose2D,
}

impl Jump {
    /// In words, e.g. "odometry jumped 0.50 m and 0.80 rad in 0.02 s
    /// (motion explains at most 0.04 m and 0.16 rad)".
    pub fn describe(&self) -> String {
        format!(
            "odometry jumped {:.2} m and {:.2} rad in {:.2} s (motion explains at most {:.2} m and {:.2} rad)",
            self.dx_m.hypot(self.dy_m),
            self.dyaw_rad,
            self.dt_s,
            self.explained_m,
            self.explained_rad
        )
    }

    /// The map from the old odometry frame to the new one: the robot did
    /// not move in the world, the frame did. A point of the old frame is
    /// the same place as its image in the new.
    pub fn correction(&self) -> impl Fn(f64, f64) -> (f64, f64) + Copy {
        let (before, after) = (self.before, self.after);
        move |x, y| {
            let local = super::coverage::odom_to_base((x, y), &before);
            super::coverage::base_to_odom(local, &after)
        }
    }
}

/// Checks `next` against `previous`: a jump when the position changed
/// more than the limits explain over the time between their stamps, or
/// the heading changed more than the IMU's rate (or, without one, the
/// turn limit) explains. A stamp that does not advance compares nothing.
pub fn check_continuity(
    previous: &OdometryPoint,
    next: &OdometryPoint,
    limits: &ContinuityLimits,
) -> Option<Jump> {
    let dt_s = next.stamp_s - previous.stamp_s;
    if !(dt_s > 0.0) {
        return None;
    }
    let (dx_m, dy_m) = (next.pose.x_m - previous.pose.x_m, next.pose.y_m - previous.pose.y_m);
    let dyaw_rad = wrap_angle(next.pose.yaw_rad - previous.pose.yaw_rad);
    let explained_m = limits.max_linear_mps * dt_s + limits.slack_m;
    // With an IMU: its rate, held over the interval (the larger of the two
    // ends), plus the slack; without: the turn limit.
    let explained_rad = match (previous.imu_yaw_rate_radps, next.imu_yaw_rate_radps) {
        (Some(a), Some(b)) if a.is_finite() && b.is_finite() => {
            a.abs().max(b.abs()) * dt_s + limits.slack_rad
        }
        _ => limits.max_angular_radps * dt_s + limits.slack_rad,
    };
    let moved = dx_m.hypot(dy_m);
    // NaN fails every comparison: a non-finite pose is a jump.
    let position_ok = moved <= explained_m;
    let heading_ok = dyaw_rad.abs() <= explained_rad;
    if position_ok && heading_ok {
        return None;
    }
    Some(Jump {
        dx_m,
        dy_m,
        dyaw_rad,
        dt_s,
        explained_m,
        explained_rad,
        before: previous.pose,
        after: next.pose,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn point(x: f64, y: f64, yaw: f64, stamp_s: f64, imu: Option<f64>) -> OdometryPoint {
        OdometryPoint {
            pose: Pose2D { x_m: x, y_m: y, yaw_rad: yaw },
            stamp_s,
            imu_yaw_rate_radps: imu,
        }
    }

    const LIMITS: ContinuityLimits = ContinuityLimits {
        max_linear_mps: 0.44,
        max_angular_radps: 3.0,
        slack_m: 0.03,
        slack_rad: 0.1,
    };

    #[test]
    fn driving_and_turning_are_explained_and_a_reset_is_not() {
        // 20 ms at 0.22 m/s, turning at 1.5 rad/s with the IMU agreeing.
        assert_eq!(
            check_continuity(
                &point(1.0, 0.0, 0.0, 10.0, Some(1.5)),
                &point(1.0044, 0.0, 0.03, 10.02, Some(1.5)),
                &LIMITS
            ),
            None
        );
        // A reset to the origin from 1.5 m away.
        let reset = check_continuity(
            &point(1.5, 0.2, 0.3, 10.0, Some(0.0)),
            &point(0.0, 0.0, 0.0, 10.02, Some(0.0)),
            &LIMITS,
        )
        .expect("a jump");
        assert!(
            (reset.dx_m + 1.5).abs() < 1e-12
                && reset.describe().starts_with("odometry jumped 1.51 m and -0.30 rad in 0.02 s"),
            "{}",
            reset.describe()
        );
        // A yaw jump the IMU does not see, with no motion.
        let yaw = check_continuity(
            &point(0.0, 0.0, 0.0, 10.0, Some(0.0)),
            &point(0.0, 0.0, 0.8, 10.02, Some(0.0)),
            &LIMITS,
        )
        .expect("a yaw jump");
        assert!((yaw.dyaw_rad - 0.8).abs() < 1e-12);
        // Without an IMU the turn limit explains up to 3 rad/s.
        assert_eq!(
            check_continuity(
                &point(0.0, 0.0, 0.0, 10.0, None),
                &point(0.0, 0.0, 0.15, 10.02, None),
                &LIMITS
            ),
            None
        );
        // A long gap explains more: 0.5 m in 2 s is a drive.
        assert_eq!(
            check_continuity(
                &point(0.0, 0.0, 0.0, 10.0, Some(0.0)),
                &point(0.5, 0.0, 0.0, 12.0, Some(0.0)),
                &LIMITS
            ),
            None
        );
        // A stamp that does not advance compares nothing; NaN is a jump.
        assert_eq!(
            check_continuity(
                &point(0.0, 0.0, 0.0, 10.0, None),
                &point(9.0, 0.0, 0.0, 10.0, None),
                &LIMITS
            ),
            None
        );
        assert!(check_continuity(
            &point(0.0, 0.0, 0.0, 10.0, None),
            &point(f64::NAN, 0.0, 0.0, 10.02, None),
            &LIMITS
        )
        .is_some());
        // Across the +-pi seam a small turn is small.
        assert_eq!(
            check_continuity(
                &point(0.0, 0.0, 3.13, 10.0, Some(0.5)),
                &point(0.0, 0.0, -3.13, 10.02, Some(0.5)),
                &LIMITS
            ),
            None
        );
    }

    #[test]
    fn the_correction_keeps_the_world_where_it_was() {
        let jump = check_continuity(
            &point(1.0, 1.0, std::f64::consts::FRAC_PI_2, 1.0, Some(0.0)),
            &point(0.0, 0.0, 0.0, 1.02, Some(0.0)),
            &LIMITS,
        )
        .unwrap();
        let correct = jump.correction();
        // The robot's own place maps to its new place.
        let (x, y) = correct(1.0, 1.0);
        assert!(x.abs() < 1e-12 && y.abs() < 1e-12);
        // 0.5 m ahead of it (old: +y) is 0.5 m ahead of it (new: +x).
        let (x, y) = correct(1.0, 1.5);
        assert!((x - 0.5).abs() < 1e-12 && y.abs() < 1e-12, "{x} {y}");
    }

    proptest! {
        /// Any motion within the limits is explained; any larger jump is not.
        #[test]
        fn motion_within_the_limits_is_never_a_jump(v in -0.44..0.44f64, w in -1.0..1.0f64, dt in 0.005..0.5f64, yaw in -3.1..3.1f64, extra in 0.0..5.0f64) {
            let a = point(0.3, -0.2, yaw, 100.0, Some(w));
            let heading = yaw + w * dt / 2.0;
            let b = point(0.3 + v * dt * heading.cos(), -0.2 + v * dt * heading.sin(), yaw + w * dt, 100.0 + dt, Some(w));
            prop_assert_eq!(check_continuity(&a, &b, &LIMITS), None);
            let far = point(a.pose.x_m + LIMITS.max_linear_mps * dt + LIMITS.slack_m + 0.01 + extra, a.pose.y_m, b.pose.yaw_rad, b.stamp_s, Some(w));
            prop_assert!(check_continuity(&a, &far, &LIMITS).is_some());
        }
    }
}
