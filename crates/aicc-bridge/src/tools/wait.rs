//! `wait`: let time pass without acting (AICC section 4: "skip ticks
//! without action"), for a number of ticks or seconds, bounded.
//!
//! Class actuator, as the spec lists it, but capability
//! `can_observe_world`: a wait moves nothing, so it must not take the
//! motion lease (which `can_move_self` would, keeping other agents from
//! moving the robot while this one merely waits), and it is harmless
//! enough for any session, observers included.
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{json, Map, Value};

use super::input::{optional_number, reject_unknown_fields};
use super::{Tool, ToolContext, ToolFuture};
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::AiccError;

/// Longest wait, seconds.
pub const MAX_WAIT_S: f64 = 60.0;

pub struct Wait {
    tick_rate_hz: f64,
}

impl Wait {
    pub fn new(tick_rate_hz: f64) -> Self {
        Self { tick_rate_hz }
    }

    /// The most ticks one wait may span.
    fn max_ticks(&self) -> u64 {
        (MAX_WAIT_S * self.tick_rate_hz).floor().max(1.0) as u64
    }
}

/// How long to wait for the input: (seconds, requested description).
pub fn wait_duration(input: &Map<String, Value>, tick_rate_hz: f64) -> Result<f64, AiccError> {
    let max_ticks = (MAX_WAIT_S * tick_rate_hz).floor().max(1.0);
    match (input.get("ticks"), input.get("seconds")) {
        (Some(_), Some(_)) | (None, None) => {
            Err(AiccError::invalid_input("give exactly one of input.ticks or input.seconds"))
        }
        (Some(ticks), None) => {
            let ticks = ticks.as_u64().ok_or_else(|| {
                AiccError::invalid_input("input.ticks must be a whole number of ticks")
            })?;
            if ticks == 0 || ticks as f64 > max_ticks {
                return Err(AiccError::invalid_input(format!("input.ticks = {ticks} is outside [1, {max_ticks}] ({MAX_WAIT_S} s at {tick_rate_hz} ticks/s)")));
            }
            Ok(ticks as f64 / tick_rate_hz)
        }
        (None, Some(_)) => {
            let seconds = optional_number(input, "seconds", 0.0, MAX_WAIT_S)?.unwrap_or(0.0);
            if seconds <= 0.0 {
                return Err(AiccError::invalid_input("input.seconds must be greater than 0"));
            }
            Ok(seconds)
        }
    }
}

impl Tool for Wait {
    fn descriptor(&self) -> ToolDescriptor {
        ToolDescriptor {
            id: "wait",
            class: ToolClass::Actuator,
            description: "Let time pass without acting: `ticks` (at the manifest's tick_rate_hz) or `seconds`, at most 60 s. Does not take the motion lease (capability can_observe_world: waiting moves nothing) and does not stop anything already moving.",
            capability: "can_observe_world",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "ticks": { "type": "integer", "minimum": 1, "maximum": self.max_ticks() },
                    "seconds": { "type": "number", "exclusiveMinimum": 0, "maximum": MAX_WAIT_S }
                },
                "additionalProperties": false
            }),
            output_schema: json!({
                "type": "object",
                "properties": { "requested": { "type": "object" }, "waited_s": { "type": "number" }, "ticks": { "type": "number" } },
                "required": ["requested", "waited_s", "ticks"]
            }),
        }
    }

    fn call(&self, input: Map<String, Value>, _ctx: ToolContext) -> ToolFuture {
        let tick_rate_hz = self.tick_rate_hz;
        async move {
            reject_unknown_fields(&input, &["ticks", "seconds"])?;
            let seconds = wait_duration(&input, tick_rate_hz)?;
            let started = Instant::now();
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            let waited_s = started.elapsed().as_secs_f64();
            Ok(ToolSuccess {
                output: json!({ "requested": input, "waited_s": waited_s, "ticks": waited_s * tick_rate_hz, "tick_rate_hz": tick_rate_hz }),
                source: "bridge".into(),
            })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::input::input_map;

    #[test]
    fn ticks_and_seconds_are_bounded_and_exclusive() {
        assert_eq!(wait_duration(&input_map(json!({"ticks": 5})), 10.0).unwrap(), 0.5);
        assert_eq!(wait_duration(&input_map(json!({"seconds": 1.5})), 10.0).unwrap(), 1.5);
        assert!(wait_duration(&input_map(json!({"ticks": 601})), 10.0)
            .unwrap_err()
            .message
            .contains("[1, 600]"));
        assert!(wait_duration(&input_map(json!({"ticks": 0})), 10.0).is_err());
        assert!(wait_duration(&input_map(json!({"ticks": 1.5})), 10.0)
            .unwrap_err()
            .message
            .contains("whole number"));
        assert!(wait_duration(&input_map(json!({"seconds": 61})), 10.0)
            .unwrap_err()
            .message
            .contains("input.seconds"));
        assert!(wait_duration(&input_map(json!({"seconds": 0})), 10.0).is_err());
        assert!(wait_duration(&input_map(json!({"seconds": 1, "ticks": 1})), 10.0)
            .unwrap_err()
            .message
            .contains("exactly one"));
        assert!(wait_duration(&input_map(json!({})), 10.0).is_err());
    }

    #[tokio::test]
    async fn a_wait_takes_about_as_long_as_asked() {
        let wait = Wait::new(10.0);
        assert_eq!(wait.max_ticks(), 600);
        let started = Instant::now();
        let seconds = wait_duration(&input_map(json!({"ticks": 2})), 10.0).unwrap();
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        assert!(started.elapsed() >= Duration::from_millis(200));
    }
}
