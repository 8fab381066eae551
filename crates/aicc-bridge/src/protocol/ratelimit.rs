//! Per-session, per-tool call rate limits (`limits.calls_per_minute`).
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);

/// A sliding one-minute window per tool.
#[derive(Debug, Default)]
pub struct RateLimiter {
    calls: HashMap<String, VecDeque<Instant>>,
}

impl RateLimiter {
    /// Records a call at `now` if within `calls_per_minute`; otherwise
    /// returns how long until the next call would be allowed.
    pub fn try_call(
        &mut self,
        tool: &str,
        calls_per_minute: u32,
        now: Instant,
    ) -> Result<(), Duration> {
        let window = self.calls.entry(tool.to_string()).or_default();
        while window.front().is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW) {
            window.pop_front();
        }
        if window.len() >= calls_per_minute as usize {
            let oldest = *window.front().expect("a full window is not empty");
            return Err(WINDOW.saturating_sub(now.saturating_duration_since(oldest)));
        }
        window.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_the_limit_per_minute_then_says_when_to_retry() {
        let mut limiter = RateLimiter::default();
        let t0 = Instant::now();
        for i in 0..3 {
            assert!(limiter.try_call("say", 3, t0 + Duration::from_secs(i)).is_ok());
        }
        let wait = limiter.try_call("say", 3, t0 + Duration::from_secs(10)).unwrap_err();
        assert_eq!(wait, Duration::from_secs(50));
        assert!(
            limiter.try_call("look_at", 3, t0 + Duration::from_secs(10)).is_ok(),
            "limits are per tool"
        );
        assert!(
            limiter.try_call("say", 3, t0 + Duration::from_secs(60)).is_ok(),
            "the window slides"
        );
    }
}
