//! Whether the governor keeps holding a motion's direction at zero, riding
//! out short free spells (depth noise at the stop distance), so that a
//! motion held for the settle time ends at once instead of at its timeout.
use std::time::{Duration, Instant};

use crate::governor::Restriction;

/// How long the governor must hold the motion's direction at zero before
/// the move (or turn) gives up: long enough to ride out a flicker (a bumper
/// bounce, one odd depth frame at the camera's 15 Hz) and for the base to
/// come to rest, so that the distance reported is the final one; short
/// enough that a move into a blocked way is refused promptly.
pub const BLOCKED_SETTLE: Duration = Duration::from_millis(500);

/// How long a motion waits, stopped, while only late data holds it (the
/// governor's staleness rules) or its odometry is too old to steer by,
/// before it gives up: a publisher's hiccup on a loaded computer or a
/// lossy link, measured up to 0.5 s beside the simulator, must not end a
/// move the governor only paused. Nav2's controller server has the same
/// (`failure_tolerance`). The base is stopped meanwhile either way.
pub const LATE_DATA_PATIENCE: Duration = Duration::from_millis(1500);

/// A free step shorter than this does not restart the count of
/// [`BlockedWatch`]: a depth reading flickering around the stop distance
/// (0.199 m, 0.201 m, ...) frees the way for a frame or two at a time, and
/// must not keep a move creeping back and forth until its timeout. Three
/// frames of the depth camera at 15 Hz; well under [`BLOCKED_SETTLE`].
pub const BLOCKED_FREE_GRACE: Duration = Duration::from_millis(200);

/// Watches whether the governor keeps a motion's direction at zero, so that
/// the motion ends once it has for [`BLOCKED_SETTLE`], counting through
/// free spells shorter than [`BLOCKED_FREE_GRACE`].
#[derive(Debug, Default)]
pub struct BlockedWatch {
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
    /// A spell held only by late data ([`crate::governor::Rule::is_late_data`])
    /// is given [`LATE_DATA_PATIENCE`] instead of `settle`.
    pub fn observe(
        &mut self,
        blocking: Vec<Restriction>,
        now: Instant,
        settle: Duration,
    ) -> Option<Vec<Restriction>> {
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
        // A way unobserved while a source is late is unobserved because it
        // is late (its frames too old to count): waited out the same.
        let any_late = blocking.iter().any(|r| r.rule.is_late_data());
        let settle = if blocking
            .iter()
            .all(|r| r.rule.is_late_data() || (any_late && r.rule.is_unobserved()))
        {
            settle.max(LATE_DATA_PATIENCE)
        } else {
            settle
        };
        (now.saturating_duration_since(since) >= settle).then_some(blocking)
    }

    /// Whether the direction was held at zero at the last observation (a
    /// timed motion that ends so must not report success).
    pub fn is_blocked(&self) -> bool {
        self.since.is_some() && self.free_since.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{blocking_forward, fresh_inputs};

    #[test]
    fn late_data_alone_is_waited_out_longer_than_an_obstacle() {
        let late = blocking_forward(
            crate::governor::SafetyInputs { odometry_age_s: Some(0.3), ..fresh_inputs() },
            false,
        );
        assert!(!late.is_empty() && late.iter().all(|r| r.rule.is_late_data()), "{late:?}");
        let late_and_wall = blocking_forward(
            crate::governor::SafetyInputs {
                odometry_age_s: Some(0.3),
                obstacle_ahead_m: Some(0.19),
                ..fresh_inputs()
            },
            false,
        );
        assert!(late_and_wall.iter().any(|r| !r.rule.is_late_data()), "{late_and_wall:?}");
        let settle = Duration::from_millis(500);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut watch = BlockedWatch::default();
        assert_eq!(watch.observe(late.clone(), at(0), settle), None);
        assert_eq!(
            watch.observe(late.clone(), at(1000), settle),
            None,
            "late data: not given up after the settle time"
        );
        assert_eq!(
            watch.observe(late.clone(), at(1500), settle),
            Some(late.clone()),
            "given up after the patience"
        );
        let mut watch = BlockedWatch::default();
        assert_eq!(watch.observe(late_and_wall.clone(), at(0), settle), None);
        assert_eq!(
            watch.observe(late_and_wall.clone(), at(500), settle),
            Some(late_and_wall),
            "an obstacle as well: the settle time"
        );
    }

    #[test]
    fn a_way_unobserved_while_a_source_is_late_is_waited_out_as_late_data() {
        let held = |rule: crate::governor::Rule| Restriction {
            rule,
            reason: String::new(),
            cause: String::new(),
            distance_m: None,
            linear_mps: (0.0, 0.0),
            angular_radps: (-1.0, 1.0),
        };
        use crate::governor::Rule;
        let late_and_blind = vec![held(Rule::ScanSensingStale), held(Rule::UnobservedBehind)];
        let blind = vec![held(Rule::UnobservedBehind)];
        let settle = Duration::from_millis(500);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut watch = BlockedWatch::default();
        assert_eq!(watch.observe(late_and_blind.clone(), at(0), settle), None);
        assert_eq!(watch.observe(late_and_blind.clone(), at(1000), settle), None, "late: waited");
        assert_eq!(watch.observe(late_and_blind.clone(), at(1500), settle), Some(late_and_blind));
        let mut watch = BlockedWatch::default();
        assert_eq!(watch.observe(blind.clone(), at(0), settle), None);
        assert_eq!(
            watch.observe(blind.clone(), at(500), settle),
            Some(blind),
            "blind, nothing late"
        );
    }

    #[test]
    fn a_direction_held_at_zero_for_the_settle_time_ends_the_motion() {
        let wall = blocking_forward(
            crate::governor::SafetyInputs { obstacle_ahead_m: Some(0.19), ..fresh_inputs() },
            false,
        );
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
        assert_eq!(
            watch.observe(Vec::new(), at(710), settle),
            None,
            "free for 200 ms: the count starts over"
        );
        assert_eq!(watch.observe(wall.clone(), at(720), settle), None);
        assert_eq!(
            watch.observe(wall.clone(), at(1200), settle),
            None,
            "480 ms since it started over"
        );
        assert!(watch.is_blocked(), "held, not yet for the settle time");
        assert_eq!(
            watch.observe(wall.clone(), at(1220), settle),
            Some(wall.clone()),
            "held for 500 ms"
        );
        // Blocked from the first step (the way was blocked when the move began): 500 ms, not a timeout.
        let mut watch = BlockedWatch::default();
        assert_eq!(watch.observe(wall.clone(), at(0), settle), None);
        assert_eq!(watch.observe(wall.clone(), at(500), settle), Some(wall));
    }

    #[test]
    fn depth_noise_around_the_stop_distance_does_not_keep_a_move_going() {
        let wall = blocking_forward(
            crate::governor::SafetyInputs { obstacle_ahead_m: Some(0.199), ..fresh_inputs() },
            false,
        );
        assert!(
            blocking_forward(
                crate::governor::SafetyInputs { obstacle_ahead_m: Some(0.201), ..fresh_inputs() },
                false
            )
            .is_empty(),
            "0.201 m frees the way"
        );
        let t0 = Instant::now();
        // Blocked and free by turns, one control step (20 ms) each: ends once 500 ms have passed since the spell began.
        let mut watch = BlockedWatch::default();
        let mut ended_at_ms = None;
        for step in 0..200u64 {
            let blocking = if step % 2 == 0 { wall.clone() } else { Vec::new() };
            if watch
                .observe(blocking, t0 + Duration::from_millis(20 * step), BLOCKED_SETTLE)
                .is_some()
            {
                ended_at_ms = Some(20 * step);
                break;
            }
        }
        assert_eq!(ended_at_ms, Some(520), "the first blocked step past 500 ms");
        // Two blocked frames for every free one at the camera's 15 Hz: the same.
        let mut watch = BlockedWatch::default();
        let ended = (0..100u64).find(|frame| {
            let blocking = if frame % 3 == 2 { Vec::new() } else { wall.clone() };
            watch
                .observe(blocking, t0 + Duration::from_millis(67 * frame), BLOCKED_SETTLE)
                .is_some()
        });
        assert_eq!(ended, Some(9), "603 ms: the first blocked frame past 500 ms");
        // Free for the grace time: the count starts over.
        let mut watch = BlockedWatch::default();
        watch.observe(wall.clone(), t0, BLOCKED_SETTLE);
        watch.observe(Vec::new(), t0 + Duration::from_millis(100), BLOCKED_SETTLE);
        watch.observe(
            Vec::new(),
            t0 + Duration::from_millis(100) + BLOCKED_FREE_GRACE,
            BLOCKED_SETTLE,
        );
        assert!(!watch.is_blocked());
        assert_eq!(
            watch.observe(wall.clone(), t0 + Duration::from_millis(600), BLOCKED_SETTLE),
            None,
            "a new spell"
        );
        assert_eq!(
            watch.observe(wall.clone(), t0 + Duration::from_millis(1100), BLOCKED_SETTLE),
            Some(wall)
        );
    }
}
