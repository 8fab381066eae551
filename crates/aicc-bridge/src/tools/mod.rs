//! Tools: one file each. A tool turns validated JSON input into a typed
//! request, reads the sensors and asks the governed drivers to move, and
//! returns JSON output. Tool files import from `shared` and the layers
//! below (governor, robot, perception, protocol), never from each other.
pub(crate) mod input;
pub(crate) mod move_base;
pub(crate) mod shared;
#[cfg(test)]
pub(crate) mod testing;
// Generators (simulated worlds only).
pub(crate) mod place_object;
pub(crate) mod proprioception;
// Sensor tools (vision, depth, inspect, touch): module lines here.
pub(crate) mod depth;
pub(crate) mod inspect;
pub(crate) mod touch;
pub mod vision;
// Actuator tools (turn, look_at, interact, say, wait, stop): module lines here.
pub mod interact;
pub(crate) mod look_at;
pub(crate) mod say;
pub(crate) mod stop;
pub(crate) mod turn;
pub(crate) mod wait;
// Bridge administration (admin scope): module lines here.
pub(crate) mod record_start;
pub(crate) mod record_stop;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::config::Config;
use crate::protocol::catalog::Catalog;
use crate::protocol::core::ToolSuccess;
use crate::protocol::manifest::ToolDescriptor;
use crate::protocol::AiccError;
use crate::robot::base_driver::BaseDriver;
use crate::robot::joint_driver::JointDriver;
use crate::robot::kinematics::Kinematics;
use crate::robot::{SensorPort, SignalPort};
use crate::robot_events::{EventSender, RobotEvent};

/// What a tool may use while it runs: sensors to read, and the governed
/// drivers as the only way to move (no tool holds the actuator port).
#[derive(Clone)]
pub struct ToolContext {
    pub sensors: Arc<dyn SensorPort>,
    /// The base: velocity setpoints, limited by the governor.
    pub base: Arc<BaseDriver>,
    /// Head, arm and gripper goals, checked against the URDF joint limits.
    pub joints: Arc<JointDriver>,
    /// Speech and diagnostics.
    pub signals: Arc<dyn SignalPort>,
    pub config: Arc<Config>,
    /// The settings that may change while the bridge runs.
    pub live: Arc<crate::live::Live>,
    /// Forward kinematics from the URDF (camera pose for inspect/look_at).
    pub kinematics: Arc<Kinematics>,
    /// Events to agents (e.g. progress of a long action). Bounded; a full
    /// queue drops the event with a warning rather than block a tool.
    pub events: EventSender,
    /// The flight recorder (record_start, record_stop).
    pub recorder: Arc<crate::recorder::Recorder>,
    /// The session and call this context serves ("" outside a call).
    pub session: String,
    pub call_id: String,
}

impl ToolContext {
    /// Raises an event for this call's session.
    pub fn event_for_session(&self, topic: &str, payload: Value) {
        if self
            .events
            .try_send(RobotEvent::for_session(topic, payload, self.session.clone()))
            .is_err()
        {
            tracing::warn!(topic, "tool event dropped: the event queue is full");
        }
    }

    /// Raises an event for every session.
    pub fn event_for_all(&self, topic: &str, payload: Value) {
        if self.events.try_send(RobotEvent::for_all(topic, payload)).is_err() {
            tracing::warn!(topic, "tool event dropped: the event queue is full");
        }
    }

    pub fn odom_max_age(&self) -> Duration {
        Duration::from_secs_f64(self.config.sensors.odom.max_age_s)
    }
}

pub(crate) type ToolFuture = BoxFuture<'static, Result<ToolSuccess, AiccError>>;

/// One AICC tool.
pub trait Tool: Send + Sync {
    fn descriptor(&self) -> ToolDescriptor;
    /// Validates `input` and runs the tool.
    fn call(&self, input: Map<String, Value>, ctx: ToolContext) -> ToolFuture;

    /// Why the tool cannot serve now (its data source is missing or
    /// silent), or None. Checked periodically; a change is pushed to agents
    /// as a manifest update.
    fn unavailable_reason(&self, _ctx: &ToolContext, _now: Instant) -> Option<String> {
        None
    }
}

/// The tools this bridge offers.
pub struct Registry {
    tools: Vec<Arc<dyn Tool>>,
    /// Each tool's id, in the order of `tools`: a descriptor is built anew
    /// (schemas and all) each time it is asked for, too costly per call.
    ids: Vec<&'static str>,
}

impl Registry {
    pub fn new(config: &Config) -> Self {
        let tools: Vec<Arc<dyn Tool>> = vec![
            Arc::new(proprioception::Proprioception),
            Arc::new(move_base::Move::new(&config.base)),
            // Sensor tools (vision, depth, inspect, touch): registered here.
            Arc::new(vision::Vision),
            Arc::new(depth::Depth),
            Arc::new(inspect::Inspect),
            Arc::new(touch::Touch::new()),
            // Actuator tools (turn, look_at, interact, say, wait, stop): registered here.
            Arc::new(turn::Turn::new(&config.base)),
            Arc::new(look_at::LookAt),
            Arc::new(interact::Interact::new(&config.actuators)),
            Arc::new(say::Say),
            Arc::new(wait::Wait::new(config.tick_rate_hz)),
            Arc::new(stop::Stop),
            // Generators: present only where a world topic is configured.
            Arc::new(place_object::PlaceObject),
            // Bridge administration (admin scope): registered here.
            Arc::new(record_start::RecordStart),
            Arc::new(record_stop::RecordStop),
        ];
        let ids = tools.iter().map(|tool| tool.descriptor().id).collect();
        Self { tools, ids }
    }

    pub fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    /// Every tool with its id.
    pub fn tools_by_id(&self) -> impl Iterator<Item = (&'static str, &Arc<dyn Tool>)> {
        self.ids.iter().copied().zip(&self.tools)
    }

    pub fn get(&self, id: &str) -> Option<Arc<dyn Tool>> {
        self.tools_by_id().find(|(tool, _)| *tool == id).map(|(_, tool)| tool.clone())
    }

    /// The catalog of every tool: these, plus those the protocol core
    /// answers itself (tick_now, bridge_status).
    pub fn catalog(&self) -> Result<Catalog, crate::protocol::catalog::CatalogError> {
        let mut descriptors: Vec<ToolDescriptor> =
            self.tools.iter().map(|t| t.descriptor()).collect();
        descriptors.extend(crate::protocol::core::core_tool_descriptors());
        descriptors.extend(crate::protocol::core::approval_tool_descriptors());
        Catalog::new(descriptors)
    }
}

#[cfg(test)]
mod layering {
    /// Every tool file, by module name, with its source.
    const TOOL_FILES: &[(&str, &str)] = &[
        ("depth", include_str!("depth.rs")),
        ("inspect", include_str!("inspect.rs")),
        ("interact", include_str!("interact.rs")),
        ("look_at", include_str!("look_at.rs")),
        ("move_base", include_str!("move_base.rs")),
        ("place_object", include_str!("place_object.rs")),
        ("proprioception", include_str!("proprioception.rs")),
        ("record_start", include_str!("record_start.rs")),
        ("record_stop", include_str!("record_stop.rs")),
        ("say", include_str!("say.rs")),
        ("stop", include_str!("stop.rs")),
        ("touch", include_str!("touch.rs")),
        ("turn", include_str!("turn.rs")),
        ("vision", include_str!("vision.rs")),
        ("wait", include_str!("wait.rs")),
    ];
    /// The helpers below the tools (each listed file must not name a tool).
    const SHARED_FILES: &[(&str, &str)] = &[
        ("shared/alignment", include_str!("shared/alignment.rs")),
        ("shared/fresh", include_str!("shared/fresh.rs")),
        ("shared/head", include_str!("shared/head.rs")),
        ("shared/images", include_str!("shared/images.rs")),
        ("shared/joints", include_str!("shared/joints.rs")),
        ("shared/motion", include_str!("shared/motion.rs")),
        ("input", include_str!("input.rs")),
    ];

    /// The tool modules `source` refers to, as `super::name` or `tools::name`.
    fn tools_named_in(source: &str) -> Vec<&'static str> {
        TOOL_FILES
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| {
                [format!("super::{name}"), format!("tools::{name}")].iter().any(|path| {
                    source.match_indices(path.as_str()).any(|(at, _)| {
                        !source[at + path.len()..]
                            .starts_with(|c: char| c.is_alphanumeric() || c == '_')
                    })
                })
            })
            .collect()
    }

    #[test]
    fn tools_import_only_downward_never_from_each_other() {
        for (tool, source) in TOOL_FILES {
            assert_eq!(
                tools_named_in(source),
                Vec::<&str>::new(),
                "{tool}.rs imports from another tool file: move what they share to tools/shared"
            );
        }
        for (helper, source) in SHARED_FILES {
            assert_eq!(
                tools_named_in(source),
                Vec::<&str>::new(),
                "{helper}.rs imports from a tool file: helpers sit below the tools"
            );
        }
        // Every registered tool has its file listed here (one file per tool).
        assert_eq!(
            super::Registry::new(&crate::config::Config::default()).tools().len(),
            TOOL_FILES.len(),
            "a tool file is missing from TOOL_FILES"
        );
        // The check itself can fail.
        assert_eq!(
            tools_named_in("use super::look_at::plan_head;\nuse crate::tools::turn::X;"),
            ["look_at", "turn"]
        );
        assert!(
            tools_named_in("use super::shared::head::plan_head; // super::stopwatch").is_empty()
        );
    }
}
