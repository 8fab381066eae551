//! The ROS names behind each sensor and endpoint, resolved once from the
//! configuration: relative names go under the configured namespace (for
//! multi-robot setups), absolute ones stay as they are.
use super::port::{Endpoint, Sensor};
use crate::config::{Config, ControllerInterface, SensorTopic};

/// `name` under `namespace` unless it is absolute (or there is none).
pub fn resolve(namespace: &str, name: &str) -> String {
    if name.is_empty() || name.starts_with('/') || namespace.is_empty() {
        name.to_string()
    } else {
        format!("{}/{name}", namespace.trim_end_matches('/'))
    }
}

/// What a controller is reached through: its action, or its trajectory
/// topic when configured so ("" when there is no such controller).
fn controller(
    namespace: &str,
    action: &str,
    interface: ControllerInterface,
    topic: &str,
) -> String {
    match interface {
        _ if action.is_empty() => String::new(),
        ControllerInterface::Topic => resolve(namespace, topic),
        ControllerInterface::Action | ControllerInterface::Auto => resolve(namespace, action),
    }
}

/// Resolved names of every sensor topic and command endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Names {
    sensors: Vec<(Sensor, String)>,
    endpoints: Vec<(Endpoint, String)>,
    say: String,
    world: String,
}

impl Names {
    pub fn from_config(config: &Config) -> Self {
        let ns = config.namespace.as_str();
        let sensors = Sensor::ALL
            .iter()
            .map(|&sensor| (sensor, resolve(ns, &config.sensors.topic(sensor).topic)))
            .collect();
        let actuators = &config.actuators;
        let endpoints = vec![
            (Endpoint::CmdVel, resolve(ns, &actuators.cmd_vel)),
            (
                Endpoint::Head,
                controller(
                    ns,
                    &actuators.head_action,
                    actuators.head_interface,
                    &actuators.head_trajectory_topic,
                ),
            ),
            (
                Endpoint::Arm,
                controller(
                    ns,
                    &actuators.arm_action,
                    actuators.arm_interface,
                    &actuators.arm_trajectory_topic,
                ),
            ),
            (
                Endpoint::Gripper,
                controller(
                    ns,
                    &actuators.gripper_action,
                    actuators.gripper_interface,
                    &actuators.gripper_trajectory_topic,
                ),
            ),
        ];
        Self {
            sensors,
            endpoints,
            say: resolve(ns, &actuators.say_topic),
            world: resolve(ns, &actuators.world_topic),
        }
    }

    /// The topic of `sensor`; "" when the profile has no such sensor.
    pub fn sensor(&self, sensor: Sensor) -> &str {
        self.sensors.iter().find(|(s, _)| *s == sensor).map_or("", |(_, name)| name.as_str())
    }

    /// The topic or action of `endpoint`; "" when not configured.
    pub fn endpoint(&self, endpoint: Endpoint) -> &str {
        self.endpoints.iter().find(|(e, _)| *e == endpoint).map_or("", |(_, name)| name.as_str())
    }

    pub fn say(&self) -> &str {
        &self.say
    }

    /// The world command topic of a simulator ("" when not configured).
    pub fn world(&self) -> &str {
        &self.world
    }

    /// These names with `sensor` read from `topic` (a robot not built from
    /// a configuration, such as a replay).
    pub fn with_sensor(mut self, sensor: Sensor, topic: &str) -> Self {
        self.sensors.retain(|(s, _)| *s != sensor);
        self.sensors.push((sensor, topic.to_string()));
        self
    }
}

impl crate::config::SensorConfig {
    /// The configuration of `sensor`.
    pub fn topic(&self, sensor: Sensor) -> &SensorTopic {
        match sensor {
            Sensor::Odometry => &self.odom,
            Sensor::Imu => &self.imu,
            Sensor::Camera => &self.camera,
            Sensor::CameraInfo => &self.camera_info,
            Sensor::Depth => &self.depth,
            Sensor::DepthInfo => &self.depth_info,
            Sensor::JointStates => &self.joint_states,
            Sensor::Bumper => &self.bumper,
            Sensor::Battery => &self.battery,
            Sensor::Scan => &self.scan,
            Sensor::Hazards => &self.hazards,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_names_go_under_the_namespace_and_absolute_ones_stay() {
        assert_eq!(resolve("", "odom"), "odom");
        assert_eq!(resolve("/robot1", "odom"), "/robot1/odom");
        assert_eq!(resolve("/robot1/", "odom"), "/robot1/odom");
        assert_eq!(resolve("/robot1", "/diagnostics"), "/diagnostics");
        assert_eq!(resolve("/robot1", ""), "", "an unconfigured topic stays unconfigured");
        let mut config = Config { namespace: "/r2".into(), ..Config::default() };
        config.sensors.battery.topic = String::new();
        let names = Names::from_config(&config);
        assert_eq!(names.sensor(Sensor::Camera), "/r2/camera/image_raw");
        assert_eq!(names.sensor(Sensor::Battery), "");
        assert_eq!(names.endpoint(Endpoint::Head), "/r2/head_controller/follow_joint_trajectory");
        assert_eq!(names.say(), "/r2/say");
    }
}
