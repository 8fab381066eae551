//! The one place cmd_vel comes from: a fixed-rate loop that takes the
//! current setpoint (or zero when it has expired: the deadman), passes it
//! through the governor and publishes the result.
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::governor::{govern_base, BaseLimits, BaseVelocity};
use crate::robot::RobotPort;

/// Zero commands published on coming to rest, so that a lost message
/// cannot leave the robot moving; then the driver goes quiet so that other
/// cmd_vel sources (teleop) are not drowned out.
const ZERO_REPEATS_AT_REST: u32 = 5;

#[derive(Debug, Clone, Copy)]
struct Setpoint {
    velocity: BaseVelocity,
    expires: Instant,
}

#[derive(Debug)]
struct DriverState {
    setpoint: Option<Setpoint>,
    last_command: BaseVelocity,
    last_step: Option<Instant>,
    zeros_left: u32,
}

/// Owns the base's velocity command.
pub struct BaseDriver {
    limits: BaseLimits,
    setpoint_timeout: Duration,
    period: Duration,
    state: Mutex<DriverState>,
}

impl BaseDriver {
    pub fn new(limits: BaseLimits, setpoint_timeout: Duration, control_rate_hz: f64) -> Self {
        Self {
            limits,
            setpoint_timeout,
            period: Duration::from_secs_f64(1.0 / control_rate_hz),
            state: Mutex::new(DriverState { setpoint: None, last_command: BaseVelocity::ZERO, last_step: None, zeros_left: 0 }),
        }
    }

    pub fn limits(&self) -> &BaseLimits {
        &self.limits
    }

    /// Asks for `velocity` until `setpoint_timeout` from `now`; callers
    /// refresh it while they want motion.
    pub fn request(&self, velocity: BaseVelocity, now: Instant) {
        self.state.lock().setpoint = Some(Setpoint { velocity, expires: now + self.setpoint_timeout });
    }

    /// Drops the setpoint: the loop decelerates to zero within the limits.
    pub fn stop(&self) {
        self.state.lock().setpoint = None;
    }

    /// The command most recently published.
    pub fn last_command(&self) -> BaseVelocity {
        self.state.lock().last_command
    }

    /// One control step at `now`: the command to publish, if any.
    pub fn step(&self, now: Instant) -> Option<BaseVelocity> {
        let mut state = self.state.lock();
        let requested = match state.setpoint {
            Some(setpoint) if now < setpoint.expires => setpoint.velocity,
            _ => {
                state.setpoint = None;
                BaseVelocity::ZERO
            }
        };
        let dt_s = state.last_step.map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64());
        state.last_step = Some(now);
        let governed = govern_base(&self.limits, state.last_command, requested, dt_s);
        let command = governed.command;
        let was_moving = !state.last_command.is_zero();
        state.last_command = command;
        if !command.is_zero() || state.setpoint.is_some() {
            state.zeros_left = ZERO_REPEATS_AT_REST;
            return Some(command);
        }
        if was_moving || state.zeros_left > 0 {
            state.zeros_left = state.zeros_left.saturating_sub(1);
            return Some(BaseVelocity::ZERO);
        }
        None
    }

    /// Runs the control loop until the task is dropped.
    pub async fn run(self: Arc<Self>, robot: Arc<dyn RobotPort>) {
        let mut interval = tokio::time::interval(self.period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            interval.tick().await;
            if let Some(command) = self.step(Instant::now()) {
                robot.publish_base_velocity(command);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver() -> BaseDriver {
        let limits = BaseLimits { max_linear_mps: 0.2, max_angular_radps: 1.0, max_linear_accel_mps2: 2.0, max_angular_accel_radps2: 2.0 };
        BaseDriver::new(limits, Duration::from_millis(200), 50.0)
    }

    #[test]
    fn an_expired_setpoint_decelerates_to_zero_and_then_goes_quiet() {
        let d = driver();
        let t0 = Instant::now();
        let step = Duration::from_millis(20);
        assert_eq!(d.step(t0), None, "idle driver publishes nothing");
        d.request(BaseVelocity { linear_mps: 0.2, angular_radps: 0.0 }, t0);
        let mut t = t0;
        for _ in 0..5 {
            t += step;
            d.step(t);
        }
        assert!(d.last_command().linear_mps > 0.19, "{:?}", d.last_command());
        // Not refreshed: expires 200 ms after t0, then 2 m/s^2 brings 0.2 m/s to rest in 100 ms.
        let mut published = Vec::new();
        for _ in 0..30 {
            t += step;
            published.push(d.step(t));
        }
        let zero_at = published.iter().position(|c| c.is_some_and(|v| v.is_zero())).expect("reaches zero");
        assert!(t0 + step * (5 + zero_at as u32 + 1) <= t0 + Duration::from_millis(320), "stopped by 320 ms");
        assert!(published.last().unwrap().is_none(), "quiet at rest: {published:?}");
        let zeros = published.iter().filter(|c| c.is_some_and(|v| v.is_zero())).count();
        assert_eq!(zeros as u32, ZERO_REPEATS_AT_REST);
    }

    #[test]
    fn stop_drops_the_setpoint_at_once() {
        let d = driver();
        let t0 = Instant::now();
        d.request(BaseVelocity { linear_mps: 0.2, angular_radps: 0.5 }, t0);
        d.step(t0);
        d.step(t0 + Duration::from_millis(20));
        d.stop();
        let after = d.step(t0 + Duration::from_millis(40)).unwrap();
        assert!(after.linear_mps < d.limits().max_linear_mps && after.linear_mps >= 0.0);
        assert!(after.linear_mps <= 0.04 + 1e-9, "{after:?}");
    }
}
