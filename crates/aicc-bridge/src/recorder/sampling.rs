//! Which sensor samples the recorder writes: each sample once, however
//! often tools read it ([`Written`]), and the latest sample of the sensors
//! given a rate in `record.sample_rates_hz`, at most at that rate
//! ([`Pacing`]). Pure: the recorder thread gives `now`.
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::SampleRates;
use crate::robot::Sensor;

/// The recorder thread looks every 10 ms: a shorter period would only mean
/// "every sample the thread sees". The longest keeps `Instant` arithmetic
/// far from overflow (a rate of 1e-300 Hz is valid configuration).
const PERIOD_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(1), Duration::from_secs(1_000_000));

/// When each sensor with a rate is next due for a sample.
///
/// Due once per period, on a grid: the first time as soon as recording
/// starts. When due, the sensor's latest sample is written unless it is
/// already (a tool read it, or it was the last period's): at most one
/// sample per period from the rate, and a sensor slower than its rate is
/// written at its own rate. A sensor with no sample yet stays due until
/// it has one; a check later than a whole period starts the grid afresh
/// rather than catching up in a burst.
#[derive(Debug, Clone, Default)]
pub struct Pacing {
    paced: Vec<Paced>,
}

#[derive(Debug, Clone)]
struct Paced {
    sensor: Sensor,
    period: Duration,
    /// None: due now (nothing written yet in this recording).
    next: Option<Instant>,
}

impl Pacing {
    /// The sensors with a rate above zero in `rates`.
    pub fn new(rates: &SampleRates) -> Self {
        let paced = Sensor::ALL
            .iter()
            .filter(|sensor| rates.of(**sensor) > 0.0)
            .map(|&sensor| {
                let period =
                    Duration::try_from_secs_f64(1.0 / rates.of(sensor)).unwrap_or(PERIOD_BOUNDS.1);
                Paced { sensor, period: period.clamp(PERIOD_BOUNDS.0, PERIOD_BOUNDS.1), next: None }
            })
            .collect();
        Self { paced }
    }

    /// No sensor is paced: only what tools read is recorded.
    pub fn is_empty(&self) -> bool {
        self.paced.is_empty()
    }

    /// The paced sensors, in `Sensor::ALL` order.
    #[cfg(test)]
    pub fn sensors(&self) -> impl Iterator<Item = Sensor> + '_ {
        self.paced.iter().map(|paced| paced.sensor)
    }

    /// Whether `sensor`'s latest sample should be written at `now` (if it
    /// is not already).
    pub fn is_due(&self, sensor: Sensor, now: Instant) -> bool {
        self.paced
            .iter()
            .any(|paced| paced.sensor == sensor && paced.next.is_none_or(|next| next <= now))
    }

    /// `sensor` was due and its latest sample is written (now or before):
    /// due again at the next point of its grid after `now`.
    pub fn done(&mut self, sensor: Sensor, now: Instant) {
        let Some(paced) = self.paced.iter_mut().find(|paced| paced.sensor == sensor) else {
            return;
        };
        let next = paced.next.unwrap_or(now) + paced.period;
        paced.next = Some(if next <= now { now + paced.period } else { next });
    }

    /// A new recording: every paced sensor due at once.
    pub fn restart(&mut self) {
        for paced in &mut self.paced {
            paced.next = None;
        }
    }
}

/// Receipts remembered per topic. More than one: a tool's read can reach
/// the recorder after a newer sample of its topic was written at its rate,
/// and the newer one must still not be written again after it.
const REMEMBERED: usize = 4;

/// The samples written lately, per topic, by their receipt instant (the
/// same instant as the decoded sample a tool got).
#[derive(Debug, Default)]
pub struct Written {
    recent: HashMap<Arc<str>, VecDeque<Instant>>,
}

impl Written {
    /// Whether the sample of `topic` received at `received` is not written
    /// yet; notes it as written.
    pub fn first_time(&mut self, topic: &Arc<str>, received: Instant) -> bool {
        let recent = self.recent.entry(topic.clone()).or_default();
        if recent.contains(&received) {
            return false;
        }
        if recent.len() == REMEMBERED {
            recent.pop_front();
        }
        recent.push_back(received);
        true
    }

    /// A new recording: nothing written yet.
    pub fn clear(&mut self) {
        self.recent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(odom: f64, camera: f64) -> SampleRates {
        SampleRates { odom, camera, ..SampleRates::default() }
    }

    /// Drives `pacing` for `sensor` on virtual time: a check every `check`,
    /// a new sample every `sample`, for `span`; returns when samples were
    /// written (ms from the start).
    fn run(
        pacing: &mut Pacing,
        sensor: Sensor,
        check: Duration,
        sample: Duration,
        span: Duration,
    ) -> Vec<u128> {
        let start = Instant::now();
        let mut written = Vec::new();
        let mut last_written: Option<Instant> = None;
        let mut at = Duration::ZERO;
        while at <= span {
            let now = start + at;
            // The latest sample's receipt: the last multiple of `sample`.
            let latest = start + sample * (at.as_nanos() / sample.as_nanos()) as u32;
            if pacing.is_due(sensor, now) {
                if last_written != Some(latest) {
                    last_written = Some(latest);
                    written.push(at.as_millis());
                }
                pacing.done(sensor, now);
            }
            at += check;
        }
        written
    }

    #[test]
    fn only_sensors_with_a_rate_are_paced() {
        assert!(Pacing::new(&SampleRates::default()).is_empty(), "off by default");
        let pacing = Pacing::new(&rates(5.0, 0.0));
        assert_eq!(pacing.sensors().collect::<Vec<_>>(), vec![Sensor::Odometry]);
        let now = Instant::now();
        assert!(pacing.is_due(Sensor::Odometry, now), "the first sample at once");
        assert!(!pacing.is_due(Sensor::Camera, now), "a sensor without a rate is never due");
    }

    #[test]
    fn a_fast_sensor_is_written_at_the_rate_not_faster() {
        // Odometry at 50 Hz, recorded at 5 Hz, checked every 10 ms, for 2 s.
        let mut pacing = Pacing::new(&rates(5.0, 0.0));
        let written = run(
            &mut pacing,
            Sensor::Odometry,
            Duration::from_millis(10),
            Duration::from_millis(20),
            Duration::from_millis(2000),
        );
        assert_eq!(written, (0..=10).map(|i| i * 200).collect::<Vec<_>>());
    }

    #[test]
    fn a_slow_sensor_is_written_at_its_own_rate_each_sample_once() {
        // A camera at 2 Hz asked for at 10 Hz: each frame once, in the period it came in.
        let mut pacing = Pacing::new(&rates(0.0, 10.0));
        let written = run(
            &mut pacing,
            Sensor::Camera,
            Duration::from_millis(10),
            Duration::from_millis(500),
            Duration::from_millis(2000),
        );
        assert_eq!(written, vec![0, 500, 1000, 1500, 2000]);
    }

    #[test]
    fn a_late_check_does_not_catch_up_in_a_burst() {
        let mut pacing = Pacing::new(&rates(10.0, 0.0));
        let start = Instant::now();
        let ms = |ms: u64| start + Duration::from_millis(ms);
        pacing.done(Sensor::Odometry, ms(0));
        assert!(
            !pacing.is_due(Sensor::Odometry, ms(99)) && pacing.is_due(Sensor::Odometry, ms(100))
        );
        // Written late within its period: the grid holds (next at 200 ms).
        pacing.done(Sensor::Odometry, ms(150));
        assert!(
            !pacing.is_due(Sensor::Odometry, ms(199)) && pacing.is_due(Sensor::Odometry, ms(200))
        );
        // The thread stalled for a second: one sample, then a period later.
        pacing.done(Sensor::Odometry, ms(1234));
        assert!(
            !pacing.is_due(Sensor::Odometry, ms(1333)) && pacing.is_due(Sensor::Odometry, ms(1334))
        );
        pacing.restart();
        assert!(pacing.is_due(Sensor::Odometry, ms(1234)), "a new recording starts with a sample");
    }

    #[test]
    fn extreme_rates_are_bounded_periods() {
        let start = Instant::now();
        let mut tiny = Pacing::new(&rates(1e-300, 0.0));
        tiny.done(Sensor::Odometry, start);
        assert!(!tiny.is_due(Sensor::Odometry, start + Duration::from_secs(86_400)));
        let mut huge = Pacing::new(&rates(1e12, 0.0));
        huge.done(Sensor::Odometry, start);
        assert!(
            !huge.is_due(Sensor::Odometry, start)
                && huge.is_due(Sensor::Odometry, start + Duration::from_millis(1))
        );
    }

    #[test]
    fn a_sample_is_written_once_even_when_an_older_read_comes_between() {
        let mut written = Written::default();
        let odom: Arc<str> = "/odom".into();
        let start = Instant::now();
        let (a, b) = (start, start + Duration::from_millis(20));
        assert!(written.first_time(&odom, a));
        assert!(!written.first_time(&odom, a), "read twice: once");
        // The rate wrote c; a tool's read of the older b reached the recorder after it.
        let c = start + Duration::from_millis(40);
        assert!(written.first_time(&odom, c));
        assert!(written.first_time(&odom, b), "b was read: written, though older");
        assert!(!written.first_time(&odom, c), "c is not written again after b");
        assert!(written.first_time(&"/imu".into(), a), "topics apart");
        written.clear();
        assert!(written.first_time(&odom, a), "a new recording");
    }
}
