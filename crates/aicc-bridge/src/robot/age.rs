//! How old a sample is. A sample has two ages: since its capture (its
//! header stamp, in the node's clock: the simulator's `/clock` beside a
//! simulator) and since the bridge received it. The capture age is the one
//! that matters (a frame that reached the bridge late is not fresh), but a
//! stamp is only trusted when it is plausible: a zero stamp, one in the
//! future, or one from another clock falls back to the receipt age, and
//! says so. Freshness rules use [`Age::effective`], never less than the
//! receipt age.
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Map, Value};

/// The node's clock: ROS time, or simulated time from `/clock`.
pub trait NodeClock: Send + Sync + 'static {
    /// Seconds in the node's clock; None while there is none (simulated
    /// time before the first `/clock` message).
    fn now_s(&self) -> Option<f64>;
}

/// The system's wall clock (ROS time without simulated time).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl NodeClock for SystemClock {
    fn now_s(&self) -> Option<f64> {
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).ok().map(|d| d.as_secs_f64())
    }
}

/// A moment in both clocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Now {
    pub instant: Instant,
    /// The node's clock, seconds; None when it has no time yet.
    pub clock_s: Option<f64>,
}

impl Now {
    pub fn of(clock: &dyn NodeClock) -> Self {
        Self { instant: Instant::now(), clock_s: clock.now_s() }
    }
}

/// A stamp ahead of the node's clock by more than this is "in the future"
/// (clocks of one machine agree to well within it; a simulator's stamps
/// are its own clock's).
pub const FUTURE_TOLERANCE_S: f64 = 0.2;
/// A stamp further than this from the node's clock, either way, is from
/// another clock (a wall-clock stamp beside a simulator, or the reverse).
pub const FOREIGN_CLOCK_S: f64 = 3600.0;

/// Whether a sample's stamp can be trusted for its age.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StampStatus {
    /// Plausible: the capture age is used.
    Valid,
    /// The stamp is zero: the publisher set none.
    Missing,
    /// Ahead of the node's clock by `ahead_s`.
    Future { ahead_s: f64 },
    /// From another clock: `offset_s` from the node's.
    ForeignClock { offset_s: f64 },
    /// The node's clock has no time yet (simulated time before `/clock`).
    NoClock,
}

impl StampStatus {
    /// Why the receipt age is used instead, for agents; None when valid.
    pub fn note(&self) -> Option<String> {
        match self {
            StampStatus::Valid => None,
            StampStatus::Missing => Some("the message has no stamp (zero): age counted from receipt".into()),
            StampStatus::Future { ahead_s } => Some(format!("the stamp is {ahead_s:.3} s ahead of the node's clock: age counted from receipt")),
            StampStatus::ForeignClock { offset_s } => Some(format!("the stamp is {offset_s:.0} s from the node's clock (another clock, e.g. wall time beside simulated time): age counted from receipt")),
            StampStatus::NoClock => Some("the node's clock has no time yet (no /clock): age counted from receipt".into()),
        }
    }
}

/// The ages of one sample at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Age {
    /// Since capture, when the stamp is valid.
    pub capture: Option<Duration>,
    /// Since the bridge received it.
    pub receipt: Duration,
    pub stamp: StampStatus,
}

impl Age {
    /// The ages of a sample stamped `stamp_s` (node clock) and received at
    /// `received`, at `now`.
    pub fn of(stamp_s: f64, received: Instant, now: Now) -> Self {
        let receipt = now.instant.saturating_duration_since(received);
        let stamp = stamp_status(stamp_s, now.clock_s);
        let capture = match (stamp, now.clock_s) {
            (StampStatus::Valid, Some(clock_s)) => {
                Some(Duration::from_secs_f64((clock_s - stamp_s).max(0.0)))
            }
            _ => None,
        };
        Self { capture, receipt, stamp }
    }

    /// The age freshness rules use: since capture where the stamp is
    /// valid, but never less than since receipt (a capture after receipt
    /// would mean the clocks disagree: take the safer).
    pub fn effective(&self) -> Duration {
        self.capture.map_or(self.receipt, |capture| capture.max(self.receipt))
    }

    /// `age_ms` (the effective age), `receipt_age_ms`, `age_from`
    /// ("stamp" or "receipt") and, when the stamp was not used, `stamp_note`.
    pub fn fields(&self) -> Map<String, Value> {
        self.fields_with_prefix("")
    }

    /// [`Age::fields`] with each name prefixed (`odom_` gives
    /// `odom_age_ms`, `odom_receipt_age_ms`, `odom_age_from`, `odom_stamp_note`).
    pub fn fields_with_prefix(&self, prefix: &str) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert(format!("{prefix}age_ms"), json!(millis(self.effective())));
        fields.insert(format!("{prefix}receipt_age_ms"), json!(millis(self.receipt)));
        fields.insert(
            format!("{prefix}age_from"),
            json!(if self.capture.is_some() { "stamp" } else { "receipt" }),
        );
        if let Some(note) = self.stamp.note() {
            fields.insert(format!("{prefix}stamp_note"), json!(note));
        }
        fields
    }
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// Whether `stamp_s` can be trusted against the node's clock.
pub fn stamp_status(stamp_s: f64, clock_s: Option<f64>) -> StampStatus {
    if stamp_s == 0.0 || !stamp_s.is_finite() {
        return StampStatus::Missing;
    }
    let Some(clock_s) = clock_s else { return StampStatus::NoClock };
    let behind_s = clock_s - stamp_s;
    if behind_s.abs() > FOREIGN_CLOCK_S {
        StampStatus::ForeignClock { offset_s: -behind_s }
    } else if behind_s < -FUTURE_TOLERANCE_S {
        StampStatus::Future { ahead_s: -behind_s }
    } else {
        StampStatus::Valid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(clock_s: Option<f64>) -> (Now, Instant) {
        let instant = Instant::now();
        (Now { instant: instant + Duration::from_millis(30), clock_s }, instant)
    }

    #[test]
    fn a_valid_stamp_gives_the_capture_age_and_a_late_arrival_is_not_fresh() {
        let (now, received) = at(Some(1000.0));
        // Captured 250 ms ago, received 30 ms ago: 250 ms old.
        let age = Age::of(999.75, received, now);
        assert_eq!(age.stamp, StampStatus::Valid);
        assert!((age.effective().as_secs_f64() - 0.25).abs() < 1e-9, "{age:?}");
        assert_eq!(age.receipt, Duration::from_millis(30));
        let fields = age.fields();
        assert_eq!((fields["age_from"].as_str(), fields.get("stamp_note")), (Some("stamp"), None));
        assert!((fields["age_ms"].as_f64().unwrap() - 250.0).abs() < 1e-6);
    }

    #[test]
    fn an_untrusted_stamp_falls_back_to_the_receipt_age_and_says_why() {
        let (now, received) = at(Some(1000.0));
        for (stamp, status) in [
            (0.0, StampStatus::Missing),
            (f64::NAN, StampStatus::Missing),
            (1000.5, StampStatus::Future { ahead_s: 0.5 }),
            (1.7e9, StampStatus::ForeignClock { offset_s: 1.7e9 - 1000.0 }),
            (-5000.0, StampStatus::ForeignClock { offset_s: -6000.0 }),
        ] {
            let age = Age::of(stamp, received, now);
            assert_eq!(age.stamp, status, "{stamp}");
            assert_eq!(
                (age.capture, age.effective()),
                (None, Duration::from_millis(30)),
                "{stamp}"
            );
            let fields = age.fields();
            assert_eq!(fields["age_from"], "receipt");
            assert!(
                fields["stamp_note"].as_str().unwrap().contains("age counted from receipt"),
                "{fields:?}"
            );
        }
        let (no_clock, received) = at(None);
        assert_eq!(Age::of(12.0, received, no_clock).stamp, StampStatus::NoClock);
        // A stamp a hair ahead (clock jitter) is still valid, at age zero but never below the receipt age.
        let (now, received) = at(Some(1000.0));
        let age = Age::of(1000.1, received, now);
        assert_eq!((age.stamp, age.effective()), (StampStatus::Valid, Duration::from_millis(30)));
    }

    #[test]
    fn fields_can_carry_a_prefix() {
        let (now, received) = at(Some(10.0));
        let fields = Age::of(9.9, received, now).fields_with_prefix("odom_");
        assert!(
            fields.contains_key("odom_age_ms")
                && fields.contains_key("odom_receipt_age_ms")
                && fields["odom_age_from"] == "stamp",
            "{fields:?}"
        );
        let fields = Age::of(0.0, received, now).fields_with_prefix("odom_");
        assert!(fields.contains_key("odom_stamp_note"), "{fields:?}");
    }
}
