//! The session tick clock (AICC section 8): one monotonic counter shared by
//! every message that carries `meta.tick`.
use std::time::{Duration, Instant};

/// Ticks at a fixed rate from a start instant ("fixed" tick mode). Pure:
/// the caller passes `now`, so tests run on virtual time.
#[derive(Debug, Clone, Copy)]
pub struct TickClock {
    start: Instant,
    period: Duration,
}

impl TickClock {
    /// `rate_hz` must be positive and finite (config validation ensures it).
    pub fn new(start: Instant, rate_hz: f64) -> Self {
        Self { start, period: Duration::from_secs_f64(1.0 / rate_hz) }
    }

    /// The tick at `now`; instants before the start count as tick 0.
    pub fn tick(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.start);
        (elapsed.as_nanos() / self.period.as_nanos().max(1)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_at_the_configured_rate_and_never_goes_back() {
        let start = Instant::now();
        let clock = TickClock::new(start, 10.0);
        assert_eq!(clock.tick(start), 0);
        assert_eq!(clock.tick(start + Duration::from_millis(99)), 0);
        assert_eq!(clock.tick(start + Duration::from_millis(100)), 1);
        assert_eq!(clock.tick(start + Duration::from_secs(3)), 30);
        assert_eq!(clock.tick(start - Duration::from_secs(1)), 0);
    }
}
