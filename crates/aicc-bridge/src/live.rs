//! The few settings that may change while the bridge runs (ROS parameters
//! set live with `ros2 param set`). Everything else is fixed at start: the
//! safety limits above all, which never change under a running agent.
//! These change only what the bridge reports, never what the robot may do.
use std::time::Duration;

use parking_lot::RwLock;

use crate::config::Config;

/// The parameter names that may be set live, with what each changes.
pub(crate) const LIVE_PARAMETERS: &[(&str, &str)] = &[
    (
        "sensors.battery_low_fraction",
        "the charge below which a battery-low state_change event is raised",
    ),
    ("sensors.unavailable_after_s", "how long a silent sensor's tools stay in the manifest"),
];

#[derive(Debug, Clone, Copy, PartialEq)]
struct Values {
    battery_low_fraction: f64,
    unavailable_after_s: f64,
}

/// The live settings, shared by the parts that read them at use.
#[derive(Debug)]
pub struct Live {
    values: RwLock<Values>,
}

/// Why a live setting was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LiveError {
    /// Not one of [`LIVE_PARAMETERS`].
    #[error("'{0}' cannot be set while the bridge runs")]
    NotLive(String),
    /// Outside the setting's domain (named, with the domain).
    #[error("{name} must be {domain}, got {value}")]
    OutOfRange { name: &'static str, domain: &'static str, value: f64 },
}

impl Live {
    pub fn from_config(config: &Config) -> Self {
        Self {
            values: RwLock::new(Values {
                battery_low_fraction: config.sensors.battery_low_fraction,
                unavailable_after_s: config.sensors.unavailable_after_s,
            }),
        }
    }

    pub fn battery_low_fraction(&self) -> f64 {
        self.values.read().battery_low_fraction
    }

    pub fn unavailable_after(&self) -> Duration {
        Duration::from_secs_f64(self.values.read().unavailable_after_s)
    }

    /// The current value of a live setting.
    pub fn get(&self, name: &str) -> Option<f64> {
        let values = self.values.read();
        match name {
            "sensors.battery_low_fraction" => Some(values.battery_low_fraction),
            "sensors.unavailable_after_s" => Some(values.unavailable_after_s),
            _ => None,
        }
    }

    /// Sets a live setting, checked as the configuration checks it.
    pub fn set(&self, name: &str, value: f64) -> Result<(), LiveError> {
        let mut values = self.values.write();
        match name {
            "sensors.battery_low_fraction" if (0.0..=1.0).contains(&value) => {
                values.battery_low_fraction = value
            }
            "sensors.battery_low_fraction" => {
                return Err(LiveError::OutOfRange {
                    name: "sensors.battery_low_fraction",
                    domain: "within 0..1",
                    value,
                })
            }
            "sensors.unavailable_after_s" if value.is_finite() && value > 0.0 => {
                values.unavailable_after_s = value
            }
            "sensors.unavailable_after_s" => {
                return Err(LiveError::OutOfRange {
                    name: "sensors.unavailable_after_s",
                    domain: "a positive number of seconds",
                    value,
                })
            }
            other => return Err(LiveError::NotLive(other.to_string())),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_settings_change_within_their_domains_and_nothing_else_changes() {
        let live = Live::from_config(&Config::default());
        assert_eq!(live.battery_low_fraction(), 0.2);
        live.set("sensors.battery_low_fraction", 0.35).unwrap();
        assert_eq!(
            (live.battery_low_fraction(), live.get("sensors.battery_low_fraction")),
            (0.35, Some(0.35))
        );
        assert_eq!(
            live.set("sensors.battery_low_fraction", 1.5),
            Err(LiveError::OutOfRange {
                name: "sensors.battery_low_fraction",
                domain: "within 0..1",
                value: 1.5
            })
        );
        assert_eq!(live.battery_low_fraction(), 0.35, "a refused value changes nothing");
        live.set("sensors.unavailable_after_s", 4.0).unwrap();
        assert_eq!(live.unavailable_after(), Duration::from_secs(4));
        assert!(live.set("sensors.unavailable_after_s", f64::NAN).is_err());
        assert_eq!(
            live.set("base.max_linear_mps", 9.0),
            Err(LiveError::NotLive("base.max_linear_mps".into()))
        );
        for (name, _) in LIVE_PARAMETERS {
            assert!(live.get(name).is_some(), "{name}");
        }
    }
}
