//! What the chaos agent does next: a tool and its input, a pause, or a
//! reconnect, from a seeded generator. Inputs are drawn from the ranges
//! the manifest states (tool schemas, `limits.joints`, `limits.base`),
//! with boundary values (the limits themselves, just past them, zero, the
//! smallest step) and now and then an input of the wrong type, so that
//! what the governor and the validation accept or refuse is exercised at
//! its edges as much as in its middle.
use std::time::Duration;

use serde_json::{json, Map, Value};

/// A small seeded generator (splitmix64): the same seed, the same choices,
/// on every machine, with no dependency to pin.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// In [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// A value for a number in [low, high]: mostly uniform, a quarter of
    /// the time a boundary (the limits, just past them, zero, a hair).
    pub fn number(&mut self, low: f64, high: f64) -> f64 {
        if self.chance(0.25) {
            let span = (high - low).abs().max(1e-3);
            let boundaries = [low, high, low - 0.01 * span, high + 0.01 * span, 0.0, 1e-4, -1e-4];
            *self.pick(&boundaries)
        } else {
            self.uniform(low, high)
        }
    }
}

/// The next thing to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Call a tool; `wait`: wait for its result before going on.
    Call { tool: String, input: Value, wait: bool },
    /// Let time pass (results and events still come in).
    Pause(Duration),
    /// Drop the connection abruptly (calls in flight and all) and open a new session.
    Reconnect,
}

/// Tools never called: they change the world or write files, which is not
/// what is under test (place_object would move the obstacles), or they are
/// the operator's (approval_mode would make every later motion wait for an
/// operator who never comes; an agent approving itself is another issue's).
pub const EXCLUDED_TOOLS: &[&str] = &[
    "place_object",
    "record_start",
    "record_stop",
    "approval_mode",
    "approve",
    "deny",
    "approvals_list",
    "tick_now",
];

/// How often each tool is called, relative to the others (a tool of the
/// manifest not listed here gets 1).
const WEIGHTS: &[(&str, u32)] = &[
    ("move", 18),
    ("turn", 10),
    ("look_at", 10),
    ("interact", 12),
    ("stop", 4),
    ("cancel", 5),
    ("wait", 2),
    ("proprioception", 4),
    ("touch", 3),
    ("depth", 2),
    ("vision", 2),
    ("inspect", 2),
    ("bridge_status", 1),
    ("memory_query", 1),
    ("say", 1),
];
const PAUSE_WEIGHT: u32 = 10;
const RECONNECT_WEIGHT: u32 = 2;

/// A joint as the manifest states its limits.
#[derive(Debug, Clone)]
struct JointRange {
    name: String,
    lower: f64,
    upper: f64,
}

pub struct Generator {
    tools: Vec<(String, u32, Value)>,
    max_linear_mps: f64,
    max_angular_radps: f64,
    max_move_m: f64,
    arm: Vec<JointRange>,
    poses: Vec<String>,
    head: Vec<JointRange>,
}

impl Generator {
    /// The arm's joints it moves (from the interact tool's schema).
    pub fn arm_joints(&self) -> Vec<String> {
        self.arm.iter().map(|j| j.name.clone()).collect()
    }

    pub fn new(manifest: &Value) -> Self {
        let tools: Vec<(String, u32, Value)> = manifest
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|tool| {
                let id = tool.get("id")?.as_str()?.to_string();
                if EXCLUDED_TOOLS.contains(&id.as_str()) {
                    return None;
                }
                let weight = WEIGHTS.iter().find(|(name, _)| *name == id).map_or(1, |(_, w)| *w);
                Some((id, weight, tool.get("input_schema").cloned().unwrap_or(Value::Null)))
            })
            .collect();
        let limit = |path: &str, default: f64| {
            manifest.pointer(path).and_then(Value::as_f64).unwrap_or(default)
        };
        let joints: Vec<JointRange> = manifest
            .pointer("/limits/joints")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(name, j)| {
                Some(JointRange {
                    name: name.clone(),
                    lower: j.get("lower")?.as_f64()?,
                    upper: j.get("upper")?.as_f64()?,
                })
            })
            .collect();
        let interact = tools
            .iter()
            .find(|(id, _, _)| id == "interact")
            .map(|(_, _, schema)| schema.clone())
            .unwrap_or(Value::Null);
        let arm_names: Vec<String> = interact
            .pointer("/properties/joints/properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let arm = joints.iter().filter(|j| arm_names.contains(&j.name)).cloned().collect();
        let head = joints.iter().filter(|j| j.name.starts_with("head_")).cloned().collect();
        Generator {
            tools,
            max_linear_mps: limit("/limits/base/max_linear_mps", 0.22),
            max_angular_radps: limit("/limits/base/max_angular_radps", 1.5),
            max_move_m: limit("/limits/base/max_move_distance_m", 5.0),
            arm,
            poses: pose_names(&interact),
            head,
        }
    }

    pub fn tools(&self) -> Vec<String> {
        self.tools.iter().map(|(id, _, _)| id.clone()).collect()
    }

    /// The next action; `in_flight` are the call ids a cancel may name.
    pub fn next(&mut self, rng: &mut Rng, in_flight: &[String]) -> Action {
        let total: u32 =
            self.tools.iter().map(|(_, w, _)| w).sum::<u32>() + PAUSE_WEIGHT + RECONNECT_WEIGHT;
        let mut draw = (rng.next_u64() % u64::from(total.max(1))) as u32;
        if draw < PAUSE_WEIGHT {
            return Action::Pause(Duration::from_secs_f64(rng.uniform(0.0, 1.5)));
        }
        draw -= PAUSE_WEIGHT;
        if draw < RECONNECT_WEIGHT {
            return Action::Reconnect;
        }
        draw -= RECONNECT_WEIGHT;
        let mut chosen = None;
        for (id, weight, schema) in &self.tools {
            if draw < *weight {
                chosen = Some((id.clone(), schema.clone()));
                break;
            }
            draw -= weight;
        }
        let Some((tool, schema)) = chosen else { return Action::Pause(Duration::from_millis(100)) };
        let input = if rng.chance(0.04) {
            self.wrong(rng, &tool)
        } else {
            self.input(rng, &tool, &schema, in_flight)
        };
        // Sensors are quick: wait for them; motions half the time.
        let wait = match tool.as_str() {
            "move" | "turn" | "look_at" | "interact" | "wait" => rng.chance(0.5),
            _ => rng.chance(0.8),
        };
        Action::Call { tool, input, wait }
    }

    /// An input of the wrong shape: a string for a number, an unknown field.
    fn wrong(&self, rng: &mut Rng, tool: &str) -> Value {
        match rng.below(3) {
            0 => json!({ "forward": "far", "pan_deg": "left" }),
            1 => json!({ "unknown_field": 1, "tool": tool }),
            _ => json!({ "speed_mps": -1e308, "yaw": f64::MAX }),
        }
    }

    fn input(&self, rng: &mut Rng, tool: &str, schema: &Value, in_flight: &[String]) -> Value {
        match tool {
            "move" => self.move_input(rng),
            "turn" => {
                let mut input = json!({ "yaw": rng.number(-200.0, 200.0) });
                if rng.chance(0.3) {
                    input["speed_dps"] =
                        json!(rng.number(1.0, self.max_angular_radps.to_degrees()));
                }
                input
            }
            "look_at" => self.look_input(rng),
            "interact" => self.interact_input(rng),
            "cancel" => {
                let call_id = if !in_flight.is_empty() && rng.chance(0.85) {
                    rng.pick(in_flight).clone()
                } else {
                    format!("chaos-no-such-{}", rng.below(1000))
                };
                json!({ "call_id": call_id })
            }
            "stop" => {
                if rng.chance(0.5) {
                    json!({})
                } else {
                    json!({ "reason": "chaos" })
                }
            }
            "wait" => {
                if rng.chance(0.5) {
                    json!({ "seconds": rng.number(0.05, 2.0) })
                } else {
                    json!({ "ticks": rng.below(20) + 1 })
                }
            }
            "vision" => {
                json!({ "format": if rng.chance(0.5) { "jpeg" } else { "png" }, "max_width": rng.below(96) + 8, "max_bytes": 20000 })
            }
            "depth" => json!({ "include_image": rng.chance(0.2), "max_width": rng.below(96) + 8 }),
            "inspect" => json!({ "u": rng.below(400), "v": rng.below(300) }),
            "say" => json!({ "text": format!("chaos {}", rng.below(1_000_000)) }),
            _ => from_schema(rng, schema),
        }
    }

    fn move_input(&self, rng: &mut Rng) -> Value {
        let v = self.max_linear_mps;
        if rng.chance(0.25) {
            // A velocity for a duration.
            let duration = if rng.chance(0.03) { 60.0 } else { rng.number(0.1, 4.0) };
            return json!({ "velocity_mps": rng.number(-v, v), "duration_s": duration });
        }
        let mut input = Map::new();
        let distance = if rng.chance(0.03) {
            *rng.pick(&[self.max_move_m, -self.max_move_m, self.max_move_m + 0.01])
        } else {
            rng.number(-1.5, 1.5)
        };
        input.insert("forward".into(), json!(distance));
        if rng.chance(0.15) {
            input.insert("left".into(), json!(rng.number(-1.0, 1.0)));
        }
        if rng.chance(0.35) {
            input.insert("speed_mps".into(), json!(rng.number(0.01, v)));
        }
        Value::Object(input)
    }

    fn look_input(&self, rng: &mut Rng) -> Value {
        let mut input = match rng.below(10) {
            0 => {
                json!({ "point": { "x": rng.number(-3.0, 3.0), "y": rng.number(-3.0, 3.0), "z": rng.number(-1.0, 2.0), "frame": if rng.chance(0.5) { "base_footprint" } else { "odom" } } })
            }
            1 => json!({ "pixel": { "u": rng.number(0.0, 400.0), "v": rng.number(0.0, 300.0) } }),
            _ => {
                let (pan, tilt) = match self.head.as_slice() {
                    [pan, tilt, ..] => (
                        (pan.lower.to_degrees(), pan.upper.to_degrees()),
                        (tilt.lower.to_degrees(), tilt.upper.to_degrees()),
                    ),
                    _ => ((-150.0, 150.0), (-40.0, 70.0)),
                };
                json!({ "pan_deg": rng.number(pan.0, pan.1), "tilt_deg": rng.number(tilt.0, tilt.1) })
            }
        };
        if rng.chance(0.3) {
            input["speed_dps"] = json!(rng.number(1.0, 1000.0));
        }
        input
    }

    fn interact_input(&self, rng: &mut Rng) -> Value {
        let mut input = match rng.below(10) {
            0..=3 if !self.poses.is_empty() => json!({ "pose": rng.pick(&self.poses).clone() }),
            4 | 5 => json!({ "gripper": if rng.chance(0.5) { "open" } else { "close" } }),
            _ if !self.arm.is_empty() => {
                let mut joints = Map::new();
                for joint in &self.arm {
                    if joints.is_empty() || rng.chance(0.7) {
                        joints.insert(
                            joint.name.clone(),
                            json!(rng.number(joint.lower, joint.upper)),
                        );
                    }
                }
                json!({ "joints": joints })
            }
            _ => json!({ "gripper": "open" }),
        };
        if input.get("gripper").is_none() && rng.chance(0.5) {
            input["speed_radps"] = json!(rng.number(0.05, 100.0));
        }
        input
    }
}

/// The named poses an interact schema lists (an `enum`, or "one of: a, b" in its description).
fn pose_names(schema: &Value) -> Vec<String> {
    let pose = schema.pointer("/properties/pose").cloned().unwrap_or(Value::Null);
    if let Some(names) = pose.get("enum").and_then(Value::as_array) {
        return names.iter().filter_map(Value::as_str).map(str::to_string).collect();
    }
    let description = pose.get("description").and_then(Value::as_str).unwrap_or("");
    description
        .split_once("one of:")
        .map(|(_, list)| {
            list.split(',')
                .map(|s| s.trim().trim_end_matches('.').to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// A random input for a JSON Schema object: each property half the time
/// (required ones always), by type, numbers within their bounds (or at them).
pub fn from_schema(rng: &mut Rng, schema: &Value) -> Value {
    let mut input = Map::new();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if required.contains(&name.as_str()) || rng.chance(0.5) {
                input.insert(name.clone(), value_for(rng, property));
            }
        }
    }
    Value::Object(input)
}

fn value_for(rng: &mut Rng, property: &Value) -> Value {
    if let Some(options) = property.get("enum").and_then(Value::as_array) {
        if !options.is_empty() {
            return rng.pick(options).clone();
        }
    }
    let kind = match property.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => {
            kinds.first().and_then(Value::as_str).unwrap_or("string").to_string()
        }
        _ => "string".into(),
    };
    let low = property
        .get("minimum")
        .or_else(|| property.get("exclusiveMinimum"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let high = property
        .get("maximum")
        .or_else(|| property.get("exclusiveMaximum"))
        .and_then(Value::as_f64)
        .unwrap_or(low + 100.0);
    match kind.as_str() {
        "integer" => json!(rng.number(low, high.min(low + 1000.0)).round() as i64),
        "number" => json!(rng.number(low, high)),
        "boolean" => json!(rng.chance(0.5)),
        "object" => from_schema(rng, property),
        "array" => json!([]),
        _ => json!(format!("chaos{}", rng.below(100))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Value {
        json!({
            "tools": [
                { "id": "move", "input_schema": { "type": "object" } },
                { "id": "interact", "input_schema": { "type": "object", "properties": {
                    "pose": { "type": "string", "description": "a named arm pose, one of: home, ready, stow" },
                    "joints": { "type": "object", "properties": { "joint1": {}, "joint2": {} } } } } },
                { "id": "look_at", "input_schema": { "type": "object" } },
                { "id": "place_object", "input_schema": { "type": "object" } },
                { "id": "memory_query", "input_schema": { "type": "object", "required": ["text"], "properties": { "text": { "type": "string" }, "limit": { "type": "integer", "minimum": 1, "maximum": 50 } } } }
            ],
            "limits": {
                "base": { "max_linear_mps": 0.22, "max_angular_radps": 1.5, "max_move_distance_m": 5.0 },
                "joints": {
                    "joint1": { "lower": -2.8, "upper": 2.8 }, "joint2": { "lower": -1.7, "upper": 1.5 },
                    "head_pan_joint": { "lower": -2.5, "upper": 2.5 }, "head_tilt_joint": { "lower": -0.6, "upper": 1.2 }
                }
            }
        })
    }

    #[test]
    fn the_same_seed_makes_the_same_sequence() {
        let run = |seed| {
            let mut generator = Generator::new(&manifest());
            let mut rng = Rng::new(seed);
            (0..200).map(|_| generator.next(&mut rng, &["chaos-1".to_string()])).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn every_offered_tool_but_the_excluded_is_called_with_inputs_from_the_manifest() {
        let mut generator = Generator::new(&manifest());
        assert_eq!(generator.tools(), ["move", "interact", "look_at", "memory_query"]);
        assert_eq!(generator.poses, ["home", "ready", "stow"]);
        assert_eq!(
            generator.arm.iter().map(|j| j.name.as_str()).collect::<Vec<_>>(),
            ["joint1", "joint2"]
        );
        let mut rng = Rng::new(1);
        let mut seen = std::collections::BTreeSet::new();
        let (mut reconnects, mut pauses, mut boundary_moves) = (0, 0, 0);
        for _ in 0..3000 {
            match generator.next(&mut rng, &[]) {
                Action::Call { tool, input, .. } => {
                    if tool == "memory_query"
                        && input.get("unknown_field").is_none()
                        && input.get("forward").is_none()
                        && input.get("speed_mps").is_none()
                    {
                        assert!(input["text"].is_string(), "required: {input}");
                    }
                    if tool == "move"
                        && input
                            .get("forward")
                            .and_then(Value::as_f64)
                            .is_some_and(|f| f.abs() >= 1.5)
                    {
                        boundary_moves += 1;
                    }
                    seen.insert(tool);
                }
                Action::Reconnect => reconnects += 1,
                Action::Pause(d) => {
                    assert!(d <= Duration::from_secs_f64(1.5));
                    pauses += 1;
                }
            }
        }
        assert_eq!(
            seen.into_iter().collect::<Vec<_>>(),
            ["interact", "look_at", "memory_query", "move"]
        );
        assert!(
            reconnects > 10 && pauses > 100 && boundary_moves > 20,
            "{reconnects} {pauses} {boundary_moves}"
        );
    }

    #[test]
    fn numbers_hit_their_boundaries_and_stay_near_the_range() {
        let mut rng = Rng::new(3);
        let values: Vec<f64> = (0..2000).map(|_| rng.number(-1.0, 2.0)).collect();
        assert!(values.contains(&-1.0) && values.contains(&2.0) && values.contains(&0.0));
        assert!(
            values.iter().any(|v| *v > 2.0) && values.iter().any(|v| *v < -1.0),
            "just past the limits too"
        );
        assert!(values.iter().all(|v| (-1.04..=2.04).contains(v)));
    }
}
