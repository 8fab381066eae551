//! When a failed call may be sent again (conformance rule 3): only a
//! sensor, only when the bridge said `retryable`, and only as often as the
//! user allowed. An actuator is never retried automatically: a robot motion
//! must not repeat without the agent deciding it.
use std::time::Duration;

use super::error::RemoteError;

/// The most automatic retries a user may ask for.
pub const MAX_SENSOR_RETRIES: u32 = 5;

/// More automatic retries asked for than [`MAX_SENSOR_RETRIES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("--retries {asked} is more than {MAX_SENSOR_RETRIES}")]
pub struct TooManyRetries {
    pub asked: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetryPolicy {
    /// Extra attempts for a sensor call failing with a retryable error.
    pub sensor_retries: u32,
}

impl RetryPolicy {
    pub fn new(sensor_retries: u32) -> Result<Self, TooManyRetries> {
        if sensor_retries > MAX_SENSOR_RETRIES {
            return Err(TooManyRetries { asked: sensor_retries });
        }
        Ok(Self { sensor_retries })
    }

    /// Whether to send the call again after `retries_done` retries failed
    /// with `error`.
    pub fn may_retry(&self, tool_class: &str, error: &RemoteError, retries_done: u32) -> bool {
        tool_class == "sensor" && error.retryable && retries_done < self.sensor_retries
    }

    /// The pause before retry number `retry` (1-based), growing linearly.
    pub fn backoff(&self, retry: u32) -> Duration {
        Duration::from_millis(200 * u64::from(retry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(retryable: bool) -> RemoteError {
        RemoteError { code: "execution_failed".into(), message: "stale".into(), retryable }
    }

    #[test]
    fn only_retryable_sensor_failures_are_retried_and_only_as_often_as_allowed() {
        let policy = RetryPolicy::new(2).unwrap();
        assert!(policy.may_retry("sensor", &error(true), 0));
        assert!(policy.may_retry("sensor", &error(true), 1));
        assert!(!policy.may_retry("sensor", &error(true), 2));
        assert!(!policy.may_retry("sensor", &error(false), 0), "not retryable: never again");
        assert!(
            !policy.may_retry("actuator", &error(true), 0),
            "an actuator is never retried automatically"
        );
        assert!(!policy.may_retry("generator", &error(true), 0));
        assert!(
            !RetryPolicy::default().may_retry("sensor", &error(true), 0),
            "no retries unless asked"
        );
    }

    #[test]
    fn the_number_of_retries_is_bounded() {
        assert!(RetryPolicy::new(MAX_SENSOR_RETRIES).is_ok());
        assert!(RetryPolicy::new(MAX_SENSOR_RETRIES + 1)
            .unwrap_err()
            .to_string()
            .contains("--retries"));
    }
}
