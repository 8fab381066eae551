//! The configuration as ROS parameters, without ROS: every key a declared
//! parameter (dotted names, as ROS flattens nested parameter files), each
//! with its type, a description from the commented default file, the
//! range its value must lie in, and whether it may be set while the bridge
//! runs ([`crate::live`]); and the layered loading a ROS node does:
//! defaults, then the parameter files' sections for this node (the `/**`
//! wildcard first, then the node's own, by its remapped name and
//! namespace), then `-p name:=value` overrides, each checked strictly.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config::{Config, ConfigError, InvalidConfig, ParamsError};
use crate::live::LIVE_PARAMETERS;

/// The commented default configuration: the parameters' descriptions.
pub(crate) const DEFAULT_FILE: &str = include_str!("../../../config/default.yaml");

/// A parameter's ROS type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    Bool,
    Integer,
    Double,
    String,
    StringArray,
    DoubleArray,
    IntegerArray,
    BoolArray,
}

/// The values a parameter may take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Range {
    Double { from: f64, to: f64 },
    Integer { from: i64, to: i64 },
}

/// One parameter as the parameter services present it.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    pub name: String,
    /// The value, as JSON (arrays of objects as their JSON text).
    pub value: Value,
    pub kind: ParamType,
    pub description: String,
    /// Fixed while the bridge runs.
    pub read_only: bool,
    /// Bounds what the robot may do (limits, safety rules, sensing, commands, access).
    pub safety: bool,
    pub range: Option<Range>,
}

/// Keys that bound what the robot may do: fixed at start, never changed
/// under a running agent.
const SAFETY_PREFIXES: &[&str] = &[
    "base.",
    "safety.",
    "sensors.",
    "actuators.",
    "security.",
    "urdf_file",
    "use_sim_time",
    "tf.",
];

/// Domains the configuration's checks enforce (`Config::validate`); a unit
/// test keeps the two in step. `*` stands for one name.
const DOMAINS: &[(&str, Range)] = &[
    ("tick_rate_hz", POSITIVE),
    ("base.max_linear_mps", POSITIVE),
    ("base.max_angular_radps", POSITIVE),
    ("base.max_linear_accel_mps2", POSITIVE),
    ("base.max_angular_accel_radps2", POSITIVE),
    ("base.control_rate_hz", POSITIVE),
    ("base.setpoint_timeout_s", POSITIVE),
    ("base.move_tolerance_m", POSITIVE),
    ("base.max_move_distance_m", POSITIVE),
    ("sensors.unavailable_after_s", POSITIVE),
    ("sensors.battery_low_fraction", Range::Double { from: 0.0, to: 1.0 }),
    ("sensors.*.max_age_s", POSITIVE),
    ("sensors.*.depth", AT_LEAST_ONE),
    ("tf.max_age_s", POSITIVE),
    ("resume_window_s", POSITIVE),
    ("heartbeat_interval_s", POSITIVE),
    ("lease_timeout_s", POSITIVE),
    ("tool_timeout_s", POSITIVE),
    ("safety.emergency_decel_mps2", POSITIVE),
    ("safety.emergency_decel_radps2", POSITIVE),
    ("safety.geofence_radius_m", NON_NEGATIVE),
    ("safety.min_creep_speed_mps", NON_NEGATIVE),
    ("dead_peer_intervals", AT_LEAST_ONE),
    ("max_line_bytes", AT_LEAST_ONE),
    ("max_calls_in_flight", AT_LEAST_ONE),
    ("outbound_queue", AT_LEAST_ONE),
    ("outbound_queue_bytes", AT_LEAST_ONE),
    ("listen_backlog", AT_LEAST_ONE),
    ("write_stall_timeout_s", POSITIVE),
    ("handshake_timeout_s", POSITIVE),
    ("event_ring_capacity", AT_LEAST_ONE),
    ("max_detached_sessions", AT_LEAST_ONE),
    ("max_connections", AT_LEAST_ONE),
    ("ai_control.max_queued_commands", AT_LEAST_ONE),
    ("ai_control.max_events", AT_LEAST_ONE),
    ("record.queue", AT_LEAST_ONE),
    ("record.flight_max_bytes", AT_LEAST_ONE),
    ("record.flight_window_s", POSITIVE),
    ("record.sample_rates_hz.*", NON_NEGATIVE),
    (
        "record.max_file_bytes",
        Range::Integer { from: crate::config::MIN_RECORD_FILE_BYTES as i64, to: i64::MAX },
    ),
];
/// Above zero (ROS ranges are closed: zero itself is refused by the checks).
const POSITIVE: Range = Range::Double { from: 0.0, to: f64::MAX };
const NON_NEGATIVE: Range = Range::Double { from: 0.0, to: f64::MAX };
const AT_LEAST_ONE: Range = Range::Integer { from: 1, to: i64::MAX };

fn matches(pattern: &str, name: &str) -> bool {
    let (pattern, name): (Vec<&str>, Vec<&str>) =
        (pattern.split('.').collect(), name.split('.').collect());
    pattern.len() == name.len() && pattern.iter().zip(&name).all(|(p, n)| *p == "*" || p == n)
}

/// The domain of `name`, if the checks bound it.
pub(crate) fn range_of(name: &str) -> Option<Range> {
    DOMAINS.iter().find(|(pattern, _)| matches(pattern, name)).map(|(_, range)| *range)
}

/// Every parameter of `config`, flattened, in the configuration's order.
pub fn parameters(config: &Config) -> Vec<Parameter> {
    let descriptions = descriptions();
    let mut flat = Vec::new();
    flatten("", &serde_json::to_value(config).expect("the configuration serialises"), &mut flat);
    flat.into_iter()
        .map(|(name, value, kind)| {
            let live = LIVE_PARAMETERS.iter().find(|(live, _)| *live == name);
            Parameter {
                description: live
                    .map(|(_, about)| {
                        format!(
                            "{} (may be set while the bridge runs)",
                            descriptions.get(&name).cloned().unwrap_or_else(|| about.to_string())
                        )
                    })
                    .or_else(|| descriptions.get(&name).cloned())
                    .unwrap_or_default(),
                read_only: live.is_none(),
                safety: SAFETY_PREFIXES.iter().any(|prefix| name.starts_with(prefix)),
                range: range_of(&name),
                name,
                value,
                kind,
            }
        })
        .collect()
}

fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, Value, ParamType)>) {
    let name =
        |key: &str| if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") };
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match value {
                    Value::Object(_) => flatten(&name(key), value, out),
                    leaf => out.push((name(key), leaf_value(leaf), kind_of(leaf))),
                }
            }
        }
        leaf => out.push((prefix.to_string(), leaf_value(leaf), kind_of(leaf))),
    }
}

/// Arrays of objects (the token sources) are one string: ROS parameters
/// cannot hold a list of maps.
fn leaf_value(value: &Value) -> Value {
    match value {
        Value::Array(items) if items.iter().any(|i| i.is_object()) => {
            Value::String(value.to_string())
        }
        other => other.clone(),
    }
}

fn kind_of(value: &Value) -> ParamType {
    match value {
        Value::Bool(_) => ParamType::Bool,
        Value::Number(n) if n.is_f64() => ParamType::Double,
        Value::Number(_) => ParamType::Integer,
        Value::Array(items) if items.iter().any(|i| i.is_object()) => ParamType::String,
        Value::Array(items) => match items.first() {
            Some(Value::Bool(_)) => ParamType::BoolArray,
            Some(Value::Number(n)) if n.is_f64() => ParamType::DoubleArray,
            Some(Value::Number(_)) => ParamType::IntegerArray,
            // The configuration's lists are of names (joints).
            _ => ParamType::StringArray,
        },
        Value::String(_) | Value::Null | Value::Object(_) => ParamType::String,
    }
}

/// Descriptions of every key, from the comments of the default file: a
/// line's own comment, or the comment lines just above it.
pub(crate) fn descriptions() -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut block: Vec<String> = Vec::new();
    let mut inside = false;
    for line in DEFAULT_FILE.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.starts_with("ros__parameters:") {
            inside = true;
            path.clear();
            path.push((indent, String::new()));
            continue;
        }
        if !inside {
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            block.push(comment.trim().to_string());
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with('-') {
            block.clear();
            continue;
        }
        let Some((key, rest)) = trimmed.split_once(':') else { continue };
        while path.last().is_some_and(|(i, _)| *i >= indent) {
            path.pop();
        }
        let name: Vec<&str> = path
            .iter()
            .map(|(_, k)| k.as_str())
            .filter(|k| !k.is_empty())
            .chain([key.trim()])
            .collect();
        let name = name.join(".");
        let inline = comment_of(rest);
        let description = match (inline, block.is_empty()) {
            (Some(inline), true) => inline,
            (Some(inline), false) => format!("{} {inline}", block.join(" ")),
            (None, false) => block.join(" "),
            (None, true) => String::new(),
        };
        block.clear();
        let value = rest.split(" #").next().unwrap_or("").trim();
        if value.starts_with('{') {
            // A flow map (a sensor): its fields share the section's text.
            for field in ["topic", "reliability", "depth", "max_age_s"] {
                out.insert(
                    format!("{name}.{field}"),
                    format!(
                        "{}: {description}",
                        SENSOR_FIELDS
                            .iter()
                            .find(|(f, _)| *f == field)
                            .map_or("", |(_, about)| about)
                    ),
                );
            }
        }
        if value.is_empty() {
            path.push((indent, key.trim().to_string()));
        }
        out.insert(name, description);
    }
    out
}

const SENSOR_FIELDS: &[(&str, &str)] = &[
    ("topic", "the topic (\"\" = the robot has none)"),
    ("reliability", "reliable or best_effort (a reliable subscription receives nothing from a best-effort publisher)"),
    ("depth", "history depth of the subscription"),
    ("max_age_s", "older data is an error, never served (s)"),
];

/// The comment after a value, outside quotes.
fn comment_of(rest: &str) -> Option<String> {
    let mut quoted = false;
    for (at, c) in rest.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return Some(rest[at + 1..].trim().to_string()),
            _ => {}
        }
    }
    None
}

/// The node whose sections a parameter file holds, after remapping.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeIdentity {
    pub name: String,
    /// "/" or "/robot1".
    pub namespace: String,
}

impl NodeIdentity {
    /// The section names that apply, in the order ROS applies them: the
    /// wildcard first, so that the node's own section wins.
    fn section_keys(&self) -> Vec<String> {
        let ns = self.namespace.trim_end_matches('/');
        let mut keys =
            vec!["/**".to_string(), "**".to_string(), self.name.clone(), format!("/{}", self.name)];
        if !ns.is_empty() {
            keys.push(format!("{ns}/{}", self.name));
            keys.push(format!("{}/{}", ns.trim_start_matches('/'), self.name));
        }
        keys
    }
}

/// Why the configuration could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    File(#[from] ConfigError),
    /// A `-p name:=value` override the bridge does not know or cannot take.
    #[error("parameter {name} (--ros-args -p): {problem}")]
    Override { name: String, problem: String },
    /// The layers together do not make a valid configuration.
    #[error("{0}")]
    Invalid(#[from] InvalidConfig),
    #[error("parameters: {0}")]
    Parameters(#[source] serde_json::Error),
}

/// The configuration from the defaults, the `files` (ROS parameter files:
/// every section that applies to `node`), and the `overrides` (`name`,
/// YAML value text), in that order; unknown keys are refused by name.
pub fn load(
    node: &NodeIdentity,
    files: &[PathBuf],
    overrides: &[(String, String)],
) -> Result<Config, LoadError> {
    let mut merged = serde_json::to_value(Config::default()).expect("the configuration serialises");
    for path in files {
        for section in file_sections(path, node)? {
            merge(&mut merged, &section);
        }
    }
    let known: Vec<String> = parameters(&Config::default()).into_iter().map(|p| p.name).collect();
    for (name, text) in overrides {
        let name = &renamed(name);
        if !known.iter().any(|k| k == name || k.starts_with(&format!("{name}."))) {
            return Err(LoadError::Override {
                name: name.clone(),
                problem: "no such parameter (config/default.yaml lists them all)".into(),
            });
        }
        let value: Value = serde_saphyr::from_str(text).map_err(|e| LoadError::Override {
            name: name.clone(),
            problem: format!("not a YAML value: {e}"),
        })?;
        set_path(&mut merged, name, value);
    }
    let config = Config::deserialize(&merged).map_err(|e| match overrides.is_empty() {
        true => LoadError::Parameters(e),
        false => LoadError::Override {
            name: overrides.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
            problem: e.to_string(),
        },
    })?;
    config.validate()?;
    Ok(config)
}

/// The `ros__parameters` of every section of `path` that applies to
/// `node`, nested (dotted names expanded), each checked on its own so that
/// an unknown key is named with its file.
fn file_sections(path: &Path, node: &NodeIdentity) -> Result<Vec<Value>, ConfigError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
    let invalid = |source| ConfigError::Invalid { path: shown.clone(), source };
    let document: Value =
        serde_saphyr::from_str(&text).map_err(|e| invalid(ParamsError::Yaml(Box::new(e))))?;
    let Value::Object(top) = document else { return Err(invalid(ParamsError::NotNodeSections)) };
    let keys = node.section_keys();
    let sections: Vec<Value> = keys
        .iter()
        .filter_map(|key| top.get(key))
        .map(|section| {
            let params = section.get("ros__parameters").ok_or(ParamsError::NoRosParameters)?;
            let mut nested = expand_dotted(params);
            rename_sections(&mut nested);
            Ok(nested)
        })
        .collect::<Result<_, _>>()
        .map_err(invalid)?;
    if sections.is_empty() {
        return Err(invalid(ParamsError::NoSection {
            node: node.name.clone(),
            found: top.keys().cloned().collect(),
        }));
    }
    for section in &sections {
        Config::deserialize(section).map_err(|e| invalid(ParamsError::Parameters(e)))?;
    }
    Ok(sections)
}

/// Sections read under their old names too: (old, current).
const RENAMED_SECTIONS: &[(&str, &str)] = &[("fonline", "ai_control")];

/// A parameter's current name (`fonline.listen` is `ai_control.listen`).
fn renamed(name: &str) -> String {
    for (old, current) in RENAMED_SECTIONS {
        if let Some(rest) = name.strip_prefix(old).filter(|r| r.is_empty() || r.starts_with('.')) {
            return format!("{current}{rest}");
        }
    }
    name.to_string()
}

/// Moves sections under their old names to their current ones, so that a
/// file of either spelling merges with the defaults (both in one file is
/// refused by serde as a duplicate field, naming it).
fn rename_sections(params: &mut Value) {
    let Value::Object(map) = params else { return };
    for (old, current) in RENAMED_SECTIONS {
        if map.contains_key(*current) {
            continue;
        }
        if let Some(section) = map.remove(*old) {
            map.insert((*current).to_string(), section);
        }
    }
}

/// `{"a.b": 1}` as `{"a": {"b": 1}}` (ROS allows both spellings).
fn expand_dotted(value: &Value) -> Value {
    let Value::Object(map) = value else { return value.clone() };
    let mut out = Value::Object(Map::new());
    for (key, value) in map {
        set_path(&mut out, key, expand_dotted(value));
    }
    out
}

/// Sets `name` (dotted) in `target`, making objects on the way.
fn set_path(target: &mut Value, name: &str, value: Value) {
    let mut at = target;
    let parts: Vec<&str> = name.split('.').collect();
    for part in &parts[..parts.len() - 1] {
        if !at.get(*part).is_some_and(Value::is_object) {
            at[*part] = Value::Object(Map::new());
        }
        at = &mut at[*part];
    }
    match (at.get_mut(parts[parts.len() - 1]), value) {
        (Some(existing @ Value::Object(_)), Value::Object(fields)) => {
            merge(existing, &Value::Object(fields))
        }
        (_, value) => at[parts[parts.len() - 1]] = value,
    }
}

/// Deep-merges `layer` into `base`: objects field by field, the rest replaced.
fn merge(base: &mut Value, layer: &Value) {
    match (base, layer) {
        (Value::Object(base), Value::Object(layer)) => {
            for (key, value) in layer {
                match base.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge(existing, value)
                    }
                    _ => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, layer) => *base = layer.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeIdentity {
        NodeIdentity { name: "aicc_bridge".into(), namespace: "/".into() }
    }

    fn file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("aicc-params-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn every_key_is_a_parameter_with_a_type_and_a_description() {
        let params = parameters(&Config::default());
        let find = |name: &str| {
            params
                .iter()
                .find(|p| p.name == name)
                .unwrap_or_else(|| panic!("{name} is a parameter"))
        };
        assert_eq!(
            (find("base.max_linear_mps").kind, find("base.max_linear_mps").value.as_f64()),
            (ParamType::Double, Some(0.22))
        );
        assert_eq!(find("max_connections").kind, ParamType::Integer);
        assert_eq!(find("use_sim_time").kind, ParamType::Bool);
        assert_eq!(find("actuators.arm_joints").kind, ParamType::StringArray);
        assert_eq!(find("sensors.camera.reliability").value, "best_effort");
        assert_eq!(find("security.tokens").kind, ParamType::String, "a list of maps is its JSON");
        for p in &params {
            assert!(
                !p.description.is_empty(),
                "{} has no description in config/default.yaml",
                p.name
            );
        }
        assert!(
            find("base.max_linear_mps").description.contains("top speed"),
            "{:?}",
            find("base.max_linear_mps")
        );
        assert!(
            find("sensors.odom.max_age_s").description.contains("older data"),
            "{:?}",
            find("sensors.odom.max_age_s")
        );
        assert!(find("base.max_linear_mps").read_only && find("base.max_linear_mps").safety);
        assert!(!find("sensors.battery_low_fraction").read_only, "a live parameter");
        assert_eq!(
            find("sensors.battery_low_fraction").range,
            Some(Range::Double { from: 0.0, to: 1.0 })
        );
        assert_eq!(find("sensors.camera.depth").range, Some(AT_LEAST_ONE));
        assert!(!find("world_name").safety);
    }

    #[test]
    fn the_ranges_are_those_the_checks_enforce() {
        // Just outside every range the configuration is refused; inside it is not.
        for p in parameters(&Config::default()) {
            let Some(range) = p.range else { continue };
            let outside = match range {
                Range::Double { from, .. } => Value::from(from - 1.0),
                Range::Integer { from, .. } => Value::from(from - 1),
            };
            let mut json = serde_json::to_value(Config::default()).unwrap();
            set_path(&mut json, &p.name, outside.clone());
            let refused = Config::deserialize(&json).map(|c| c.validate().is_err()).unwrap_or(true);
            assert!(refused, "{} = {outside} was accepted", p.name);
        }
    }

    #[test]
    fn layers_apply_in_order_wildcard_then_node_then_overrides() {
        let path = file("layers.yaml", "/**:\n  ros__parameters:\n    tick_rate_hz: 20.0\n    base.max_linear_mps: 0.15\naicc_bridge:\n  ros__parameters:\n    tick_rate_hz: 25.0\nother_node:\n  ros__parameters:\n    whatever: 1\n");
        let config = load(&node(), std::slice::from_ref(&path), &[]).unwrap();
        assert_eq!(
            (config.tick_rate_hz, config.base.max_linear_mps),
            (25.0, 0.15),
            "the node's own section wins; dotted names work"
        );
        let config = load(
            &node(),
            std::slice::from_ref(&path),
            &[("base.max_linear_mps".into(), "0.2".into()), ("world_name".into(), "lab".into())],
        )
        .unwrap();
        assert_eq!((config.base.max_linear_mps, config.world_name.as_str()), (0.2, "lab"));
        // A namespaced node finds its section by its full name.
        let namespaced = file(
            "ns.yaml",
            "/robot1/aicc_bridge:\n  ros__parameters:\n    namespace: \"/robot1\"\n",
        );
        let robot1 = NodeIdentity { name: "aicc_bridge".into(), namespace: "/robot1".into() };
        assert_eq!(
            load(&robot1, std::slice::from_ref(&namespaced), &[]).unwrap().namespace,
            "/robot1"
        );
        let err = load(&node(), &[namespaced], &[]).unwrap_err().to_string();
        assert!(err.contains("no section for node 'aicc_bridge'"), "{err}");
    }

    #[test]
    fn the_dialect_section_is_read_under_its_old_name_too() {
        let old = file(
            "old-name.yaml",
            "/**:\n  ros__parameters:\n    fonline:\n      enabled: true\n      max_events: 9\n",
        );
        let config = load(
            &node(),
            std::slice::from_ref(&old),
            &[("fonline.max_queued_commands".into(), "5".into())],
        )
        .unwrap();
        let dialect = &config.ai_control;
        assert_eq!(
            (dialect.enabled, dialect.max_events, dialect.max_queued_commands),
            (true, 9, 5)
        );
        let direct = Config::from_params_yaml(
            "/**:\n  ros__parameters:\n    fonline:\n      max_events: 9\n",
            "aicc_bridge",
        )
        .unwrap();
        assert_eq!(direct.ai_control.max_events, 9);
        let both = file(
            "both-names.yaml",
            "/**:\n  ros__parameters:\n    fonline:\n      max_events: 9\n    ai_control:\n      max_events: 8\n",
        );
        let err = load(&node(), &[both], &[]).unwrap_err().to_string();
        assert!(err.contains("both-names.yaml") && err.contains("ai_control"), "{err}");
    }

    #[test]
    fn bad_layers_are_refused_naming_the_file_or_the_parameter() {
        let typo =
            file("typo.yaml", "/**:\n  ros__parameters:\n    base:\n      max_lineer_mps: 1.0\n");
        let err = load(&node(), std::slice::from_ref(&typo), &[]).unwrap_err().to_string();
        assert!(err.contains("typo.yaml") && err.contains("max_lineer_mps"), "{err}");
        let err = load(&node(), &[], &[("base.max_lineer_mps".into(), "1.0".into())])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("parameter base.max_lineer_mps") && err.contains("no such parameter"),
            "{err}"
        );
        let err = load(&node(), &[], &[("base.max_linear_mps".into(), "fast".into())])
            .unwrap_err()
            .to_string();
        assert!(err.contains("base.max_linear_mps"), "{err}");
        let err = load(&node(), &[], &[("base.max_linear_mps".into(), "-1.0".into())])
            .unwrap_err()
            .to_string();
        assert!(err.contains("base.max_linear_mps must be a positive number"), "{err}");
    }

    #[test]
    fn the_shipped_profiles_load_as_parameter_files() {
        for profile in ["default.yaml", "sim.yaml", "turtlebot3.yaml", "turtlebot4.yaml"] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config").join(profile);
            load(&node(), &[path], &[]).unwrap_or_else(|e| panic!("{profile}: {e}"));
        }
    }
}
