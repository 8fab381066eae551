//! Typed, strict configuration. Files are ROS 2 parameter files
//! (`<node>: ros__parameters: {...}` or `/**: ros__parameters: {...}`), so
//! the same file serves `--params-file` in a launch file and `--config` on
//! the command line. Unknown keys are rejected with their names.
use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:43010";
pub const DEFAULT_NODE_NAME: &str = "aicc_bridge";

/// The whole bridge configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the AICC listener binds. Loopback unless deliberately changed.
    pub listen: String,
    /// AICC tick rate (`tick_rate_hz` in the manifest).
    pub tick_rate_hz: f64,
    /// Name of the world in the manifest (metadata only, never state).
    pub world_name: String,
    /// Largest accepted inbound line, bytes (AICC and the contract: 1 MiB).
    pub max_line_bytes: usize,
    /// Tool calls one session may have executing at once.
    pub max_calls_in_flight: usize,
    /// Bound on messages queued to one connection's writer.
    pub outbound_queue: usize,
    pub topics: Topics,
    pub base: BaseConfig,
    pub sensors: SensorConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN.into(),
            tick_rate_hz: 10.0,
            world_name: "aicc_sim_room".into(),
            max_line_bytes: 1 << 20,
            max_calls_in_flight: 8,
            outbound_queue: 256,
            topics: Topics::default(),
            base: BaseConfig::default(),
            sensors: SensorConfig::default(),
        }
    }
}

/// ROS topic names (relative names resolve in the node's namespace).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Topics {
    pub cmd_vel: String,
    /// Publish geometry_msgs/TwistStamped instead of Twist (Jazzy+ controllers).
    pub cmd_vel_stamped: bool,
    pub odom: String,
    pub imu: String,
}

impl Default for Topics {
    fn default() -> Self {
        Self { cmd_vel: "cmd_vel".into(), cmd_vel_stamped: false, odom: "odom".into(), imu: "imu".into() }
    }
}

/// Limits and behaviour of the mobile base.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BaseConfig {
    pub max_linear_mps: f64,
    pub max_angular_radps: f64,
    pub max_linear_accel_mps2: f64,
    pub max_angular_accel_radps2: f64,
    /// Rate of the governed cmd_vel loop.
    pub control_rate_hz: f64,
    /// A setpoint not refreshed within this time is dropped (deadman).
    pub setpoint_timeout_s: f64,
    /// `move` ends when the remaining distance is below this.
    pub move_tolerance_m: f64,
    /// Longest single `move`.
    pub max_move_distance_m: f64,
}

impl Default for BaseConfig {
    fn default() -> Self {
        Self {
            max_linear_mps: 0.22,
            max_angular_radps: 1.5,
            max_linear_accel_mps2: 1.0,
            max_angular_accel_radps2: 3.0,
            control_rate_hz: 50.0,
            setpoint_timeout_s: 0.2,
            move_tolerance_m: 0.005,
            max_move_distance_m: 5.0,
        }
    }
}

/// How fresh sensor data must be to be served.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SensorConfig {
    pub odom_max_age_s: f64,
    pub imu_max_age_s: f64,
}

impl Default for SensorConfig {
    fn default() -> Self {
        Self { odom_max_age_s: 0.5, imu_max_age_s: 0.5 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config file {path}: {message}")]
    Invalid { path: String, message: String },
}

impl Config {
    /// Loads a ROS 2 parameter file, taking the section of `node_name` (or `/**`).
    pub fn load(path: &Path, node_name: &str) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        Self::from_params_yaml(&text, node_name).map_err(|message| ConfigError::Invalid { path: path.display().to_string(), message })
    }

    /// Parses the text of a ROS 2 parameter file.
    pub fn from_params_yaml(text: &str, node_name: &str) -> Result<Self, String> {
        let document: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
        let serde_yaml::Value::Mapping(top) = document else {
            return Err("expected a mapping '<node name>: {ros__parameters: {...}}' at the top".into());
        };
        let wanted = [node_name.to_string(), format!("/{node_name}"), "/**".to_string()];
        let section = wanted.iter().find_map(|key| top.get(key.as_str())).ok_or_else(|| {
            let found: Vec<String> = top.keys().filter_map(|k| k.as_str().map(str::to_owned)).collect();
            format!("no section for node '{node_name}' (or '/**'); found: {found:?}")
        })?;
        let params = section.get("ros__parameters").ok_or("the node's section has no 'ros__parameters'")?;
        let config: Config = serde_yaml::from_value(params.clone()).map_err(|e| e.to_string())?;
        config.validate()?;
        Ok(config)
    }

    /// Checks values serde cannot: ranges, finiteness, parseable addresses.
    pub fn validate(&self) -> Result<(), String> {
        self.listen.parse::<SocketAddr>().map_err(|e| format!("listen '{}' is not HOST:PORT: {e}", self.listen))?;
        let positive = [
            ("tick_rate_hz", self.tick_rate_hz),
            ("base.max_linear_mps", self.base.max_linear_mps),
            ("base.max_angular_radps", self.base.max_angular_radps),
            ("base.max_linear_accel_mps2", self.base.max_linear_accel_mps2),
            ("base.max_angular_accel_radps2", self.base.max_angular_accel_radps2),
            ("base.control_rate_hz", self.base.control_rate_hz),
            ("base.setpoint_timeout_s", self.base.setpoint_timeout_s),
            ("base.move_tolerance_m", self.base.move_tolerance_m),
            ("base.max_move_distance_m", self.base.max_move_distance_m),
            ("sensors.odom_max_age_s", self.sensors.odom_max_age_s),
            ("sensors.imu_max_age_s", self.sensors.imu_max_age_s),
        ];
        for (name, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(format!("{name} must be a positive number, got {value}"));
            }
        }
        for (name, value) in [("max_line_bytes", self.max_line_bytes), ("max_calls_in_flight", self.max_calls_in_flight), ("outbound_queue", self.outbound_queue)] {
            if value == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_default_file_parses_and_matches_the_built_in_defaults() {
        let text = include_str!("../config/default.yaml");
        let config = Config::from_params_yaml(text, DEFAULT_NODE_NAME).unwrap();
        let built_in = Config::default();
        assert_eq!(config.listen, built_in.listen);
        assert_eq!(config.base.max_linear_mps, built_in.base.max_linear_mps);
        assert_eq!(config.topics.odom, built_in.topics.odom);
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let text = "aicc_bridge:\n  ros__parameters:\n    base:\n      max_linear_mps: 0.3\n      max_lineer_accel: 2.0\n";
        let err = Config::from_params_yaml(text, "aicc_bridge").unwrap_err();
        assert!(err.contains("max_lineer_accel"), "{err}");
    }

    #[test]
    fn wildcard_section_and_bad_values_are_handled() {
        let ok = "/**:\n  ros__parameters:\n    tick_rate_hz: 20.0\n";
        assert_eq!(Config::from_params_yaml(ok, "other").unwrap().tick_rate_hz, 20.0);
        let bad = "/**:\n  ros__parameters:\n    base:\n      max_linear_mps: -1.0\n";
        assert!(Config::from_params_yaml(bad, "x").unwrap_err().contains("base.max_linear_mps"));
        let missing = "robot:\n  ros__parameters: {}\n";
        assert!(Config::from_params_yaml(missing, "aicc_bridge").unwrap_err().contains("no section"));
    }
}
