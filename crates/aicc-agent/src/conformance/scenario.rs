//! Conformance scenarios as written in `conformance/scenarios/<area>/*.yaml`
//! (format: `conformance/README.md`), parsed strictly: an unknown key
//! anywhere is an error naming the file and the key, and a file that does
//! not parse is reported, never skipped.
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::matcher;

/// The areas, in the order their scenarios run.
pub const AREAS: &[&str] =
    &["protocol", "sensors", "actuators", "governor", "appendix_a", "adversarial"];

/// What a scenario needs of the robot and its surroundings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RobotNeed {
    /// Nothing: the bridge alone (no motion).
    None,
    /// A robot that may move.
    Moves,
    /// A robot with a wall ahead of it (collision, obstacle stops).
    NeedsWallAhead,
}

impl RobotNeed {
    pub const ALL: [RobotNeed; 3] = [RobotNeed::None, RobotNeed::Moves, RobotNeed::NeedsWallAhead];

    pub fn as_str(self) -> &'static str {
        match self {
            RobotNeed::None => "none",
            RobotNeed::Moves => "moves",
            RobotNeed::NeedsWallAhead => "needs_wall_ahead",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.as_str() == text)
    }
}

/// Default cap for a whole scenario, seconds.
pub const DEFAULT_TIMEOUT_S: f64 = 30.0;
/// Default wait of one step, seconds.
pub const DEFAULT_WITHIN_S: f64 = 5.0;
/// Default observation window of `expect_none`, seconds.
pub const DEFAULT_FOR_S: f64 = 2.0;
/// Longest time a scenario, or one of its steps, may ask for, seconds (a
/// day): a bound, so that a typo cannot overflow a deadline.
pub const MAX_SECONDS: f64 = 86_400.0;
/// Most repetitions one `repeat` may ask for (a bound, not a goal).
pub const MAX_REPEAT: u64 = 10_000;
/// Largest `send_oversized` line, bytes.
pub const MAX_OVERSIZED_BYTES: usize = 64 << 20;

fn default_true() -> bool {
    true
}

fn default_timeout_s() -> f64 {
    DEFAULT_TIMEOUT_S
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub area: String,
    /// Which promise(s) of the spec or the governor it checks.
    pub checks: String,
    pub description: String,
    pub robot: RobotNeed,
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
    /// Open connection "main" and do the handshake first.
    #[serde(default = "default_true")]
    pub session: bool,
    /// Tools the scenario needs beyond those its `call` steps name (e.g.
    /// one whose offer it checks in the manifest): where the endpoint's
    /// profile lacks one, the scenario is skipped, naming it.
    #[serde(default)]
    pub needs_tools: Vec<String>,
    /// A matcher the endpoint's manifest must satisfy (e.g. a profile that
    /// watches for obstacles as low as the scenario's box,
    /// `limits.safety.min_obstacle_height_m: {$lte: 0.10}`): where it does
    /// not, the scenario is skipped, naming what differs. It states what a
    /// profile declares it cannot do, not a way to skip a failure.
    pub needs_manifest: Option<Value>,
    /// Judged on the simulator's ground truth (`--truth`): a scene to set
    /// first and what must hold throughout. A scenario with this (or with
    /// truth steps) is skipped when the run has no ground truth.
    pub truth: Option<TruthSpec>,
    pub steps: Vec<Step>,
}

/// Default time the invariants keep being judged after the last step, s
/// (a robot still coasting, a contact after the call returned).
pub const DEFAULT_SETTLE_S: f64 = 1.0;
/// Default tolerance on a minimum clearance, m.
pub const DEFAULT_CLEARANCE_TOL_M: f64 = 0.02;

fn default_settle_s() -> f64 {
    DEFAULT_SETTLE_S
}

/// `truth:` of a scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TruthSpec {
    /// Sent to the simulator as `{"scene": ...}` before the first step
    /// (`sim/README.md`: robot teleported at rest, heading kept; `clear`;
    /// objects placed relative to the robot). Travel (`travel` in
    /// `truth_expect`) counts from the pose it leaves the robot in.
    pub scene: Option<Value>,
    #[serde(default)]
    pub always: Always,
    /// How long the invariants keep being judged after the last step.
    #[serde(default = "default_settle_s")]
    pub settle_s: f64,
}

/// What must hold on every ground-truth sample from the scene to the end.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Always {
    /// No robot geom touches a world geom (walls, objects; never the floor).
    #[serde(default)]
    pub no_contact: bool,
    /// Objects a contact with does not count (e.g. one the gripper picks).
    #[serde(default)]
    pub contact_allowed_with: Vec<String>,
    /// Per object: base_footprint never nearer than this (m, or "${var}").
    #[serde(default)]
    pub min_clearance_m: BTreeMap<String, Value>,
    /// Tolerance on min_clearance_m (default 0.02 m).
    pub clearance_tol_m: Option<f64>,
    /// The base within the manifest's limits: limits.base speeds and
    /// accelerations, braking within limits.safety.emergency_decel_mps2.
    #[serde(default)]
    pub base_limits: bool,
    /// Each joint's measured speed within its URDF limit x this.
    pub joint_speed_factor: Option<f64>,
    /// What trajectories ask of each joint within its URDF limit x this.
    pub joint_demand_factor: Option<f64>,
}

impl Scenario {
    /// Whether it needs the simulator's ground truth.
    pub fn needs_truth(&self) -> bool {
        self.truth.is_some() || uses_truth_steps(&self.steps)
    }

    /// Objects of the simulated world it names (scene, clearances).
    pub fn needed_objects(&self) -> std::collections::BTreeSet<String> {
        let mut objects = std::collections::BTreeSet::new();
        if let Some(truth) = &self.truth {
            objects.extend(truth.always.min_clearance_m.keys().cloned());
            let listed =
                truth.scene.as_ref().and_then(|s| s.get("objects")).and_then(Value::as_array);
            objects.extend(
                listed
                    .into_iter()
                    .flatten()
                    .filter_map(|o| o.get("object").and_then(Value::as_str))
                    .map(str::to_string),
            );
        }
        objects
    }
}

fn uses_truth_steps(steps: &[Step]) -> bool {
    steps.iter().any(|s| {
        s.truth_expect.is_some()
            || s.truth_command.is_some()
            || s.repeat.as_ref().is_some_and(|r| uses_truth_steps(&r.steps))
    })
}

impl Scenario {
    /// Every tool the scenario needs the endpoint to offer: `needs_tools`
    /// and the tools its `call` steps name (inside `repeat` too), in name
    /// order. A call that expects `tool_unknown` tests a tool's absence and
    /// needs nothing; a tool named through a variable is not known here.
    pub fn needed_tools(&self) -> std::collections::BTreeSet<String> {
        let mut needed: std::collections::BTreeSet<String> =
            self.needs_tools.iter().cloned().collect();
        collect_called_tools(&self.steps, &mut needed);
        needed
    }
}

fn collect_called_tools(steps: &[Step], into: &mut std::collections::BTreeSet<String>) {
    for step in steps {
        if let Some(call) = &step.call {
            let expects_unknown = |matcher: Option<&Value>| {
                matcher.and_then(|m| m.get("code")).and_then(Value::as_str) == Some("tool_unknown")
            };
            let absent = expects_unknown(step.expect_error.as_ref())
                || expects_unknown(step.expect.as_ref().and_then(|m| m.get("error")));
            if !absent && !call.tool.contains("${") {
                into.insert(call.tool.clone());
            }
        }
        if let Some(repeat) = &step.repeat {
            collect_called_tools(&repeat.steps, into);
        }
    }
}

/// One step: exactly one action key, plus modifiers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub name: Option<String>,
    pub conn: Option<String>,
    pub within_s: Option<f64>,
    // ----- actions
    pub connect: Option<ConnectSpec>,
    pub disconnect: Option<String>,
    pub send: Option<Value>,
    pub send_raw: Option<String>,
    pub send_bytes_hex: Option<String>,
    pub send_oversized: Option<OversizedSpec>,
    pub call: Option<CallSpec>,
    /// With `call`: matcher on the whole tool_result; alone: an action.
    pub expect: Option<Value>,
    pub expect_event: Option<EventSpec>,
    pub expect_none: Option<Value>,
    pub expect_closed: Option<bool>,
    pub wait_s: Option<f64>,
    pub repeat: Option<RepeatSpec>,
    /// Waits `within_s` for a ground-truth sample (newer than the step)
    /// that matches: the simulator's state line plus `clearance_m`,
    /// `at_rest`, `speed_mps`, `max_joint_speed` and `travel` (since the scene).
    pub truth_expect: Option<Value>,
    /// Sends a command to the simulator's ground-truth channel (a fault:
    /// `{odom_jump: {...}}`, `{pause: [...]}`) and waits for its ack.
    pub truth_command: Option<Value>,
    // ----- modifiers
    pub expect_ok: Option<Value>,
    pub expect_error: Option<Value>,
    pub capture: Option<BTreeMap<String, String>>,
    pub for_s: Option<f64>,
}

/// The scope whose token a `connect` presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectScope {
    /// The runner's own token (`--token-env`), when it is set.
    #[default]
    Admin,
    Actuate,
    Observe,
    /// No token at all.
    None,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectSpec {
    pub name: String,
    #[serde(default = "default_true")]
    pub session: bool,
    #[serde(default)]
    pub scope: ConnectScope,
    /// A literal token, instead of the scope's environment variable.
    pub auth: Option<LiteralAuth>,
    pub agent_model: Option<Value>,
    pub subscribe: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiteralAuth {
    pub token: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OversizedSpec {
    pub bytes: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSpec {
    pub tool: String,
    #[serde(default)]
    pub input: Option<Value>,
    pub call_id: Option<String>,
    pub deadline_ms: Option<Value>,
    pub idempotency_key: Option<String>,
    #[serde(default = "default_true")]
    pub wait: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    pub topic: String,
    pub payload: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepeatSpec {
    /// A count, or `"${var}"` naming one.
    pub times: Value,
    pub steps: Vec<Step>,
}

/// The action a step performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Connect,
    Disconnect,
    Send,
    SendRaw,
    SendBytesHex,
    SendOversized,
    Call,
    Expect,
    ExpectEvent,
    ExpectNone,
    ExpectClosed,
    Wait,
    Repeat,
    TruthExpect,
    TruthCommand,
}

impl Step {
    /// The step's action keys present (exactly one for a valid step; `expect`
    /// beside `call` is the call's matcher, not an action).
    fn actions(&self) -> Vec<(Action, &'static str)> {
        let mut found = Vec::new();
        let mut add = |present: bool, action, key| {
            if present {
                found.push((action, key));
            }
        };
        add(self.connect.is_some(), Action::Connect, "connect");
        add(self.disconnect.is_some(), Action::Disconnect, "disconnect");
        add(self.send.is_some(), Action::Send, "send");
        add(self.send_raw.is_some(), Action::SendRaw, "send_raw");
        add(self.send_bytes_hex.is_some(), Action::SendBytesHex, "send_bytes_hex");
        add(self.send_oversized.is_some(), Action::SendOversized, "send_oversized");
        add(self.call.is_some(), Action::Call, "call");
        add(self.expect.is_some() && self.call.is_none(), Action::Expect, "expect");
        add(self.expect_event.is_some(), Action::ExpectEvent, "expect_event");
        add(self.expect_none.is_some(), Action::ExpectNone, "expect_none");
        add(self.expect_closed.is_some(), Action::ExpectClosed, "expect_closed");
        add(self.wait_s.is_some(), Action::Wait, "wait_s");
        add(self.repeat.is_some(), Action::Repeat, "repeat");
        add(self.truth_expect.is_some(), Action::TruthExpect, "truth_expect");
        add(self.truth_command.is_some(), Action::TruthCommand, "truth_command");
        found
    }

    /// The one action of a step checked by [`validate_steps`].
    pub fn action(&self) -> Action {
        self.actions().first().map(|(a, _)| *a).expect("validated: one action per step")
    }

    /// The wait of this step.
    pub fn within(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.within_s.unwrap_or(DEFAULT_WITHIN_S))
    }
}

/// A scenario file that loaded, or why it did not.
#[derive(Debug)]
#[allow(clippy::large_enum_variant, reason = "a few hundred of them, once per run")]
pub enum Loaded {
    Ok { file: PathBuf, scenario: Scenario },
    Malformed { file: PathBuf, area: String, error: ScenarioError },
}

/// Why a scenario file is not run; each names the file, except a stray directory.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("{}: {source}", file.display())]
    Read { file: PathBuf, source: std::io::Error },
    /// Not YAML of the scenario format: an unknown key or value, a missing one, a syntax error.
    #[error("{}: {source}", file.display())]
    Yaml { file: PathBuf, source: Box<serde_saphyr::Error> },
    /// The format's own rules (names, areas, steps, matchers, bounds); the
    /// problem locates itself, e.g. `steps[2].call.input must be a JSON object`.
    #[error("{}: {problem}", file.display())]
    Invalid { file: PathBuf, problem: String },
    /// The file's `area` is not the directory it is in.
    #[error("{}: area '{declared}' but the file is under '{directory}'", file.display())]
    WrongArea { file: PathBuf, declared: String, directory: String },
    /// Another scenario has the same name.
    #[error("{}: name '{name}' is used by another scenario", file.display())]
    DuplicateName { file: PathBuf, name: String },
    /// A `.yml` file, which would silently be skipped.
    #[error("{}: scenario files end in .yaml (this one would be skipped)", file.display())]
    WrongExtension { file: PathBuf },
    /// A directory that is not an area: its scenarios would never run.
    #[error("'{area}' is not an area ({}): its scenarios would never run", AREAS.join(", "))]
    NotAnArea { area: String },
}

/// The scenario directory itself cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("reading scenario directory {}: {source}", dir.display())]
pub struct ScenarioDirError {
    pub dir: PathBuf,
    pub source: std::io::Error,
}

/// Text that is not hex bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HexError {
    /// Empty, or an odd number of digits.
    #[error("'{text}' must be pairs of hex digits, e.g. \"c3 28\"")]
    NotPairs { text: String },
    /// A pair that is not a hex byte.
    #[error("'{pair}' is not a hex byte")]
    NotAByte { pair: String },
}

impl Loaded {
    pub fn file(&self) -> &Path {
        match self {
            Loaded::Ok { file, .. } | Loaded::Malformed { file, .. } => file,
        }
    }
}

/// How scenarios are read: only `true` and `false` are booleans (`yes`
/// and `on` stay text, as YAML 1.2 has it), and an error is one line naming
/// its line and column rather than a drawn snippet.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! { strict_booleans: true, with_snippet: false }
}

/// Parses and checks one scenario file's text; errors name the file.
pub fn parse(file: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    let scenario: Scenario =
        serde_saphyr::from_str_with_options(text, yaml_options()).map_err(|source| {
            ScenarioError::Yaml { file: file.to_path_buf(), source: Box::new(source) }
        })?;
    check(&scenario)
        .map_err(|problem| ScenarioError::Invalid { file: file.to_path_buf(), problem })?;
    Ok(scenario)
}

fn is_snake_case(name: &str) -> bool {
    !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Variable names the runner sets itself; connections may not shadow them.
pub const RESERVED_NAMES: &[&str] =
    &["main", "session_id", "manifest", "tools", "auth", "last_call_id"];

fn check(scenario: &Scenario) -> Result<(), String> {
    if !is_snake_case(&scenario.name) {
        return Err(format!("name '{}' must be snake_case (a-z, 0-9, _)", scenario.name));
    }
    if !AREAS.contains(&scenario.area.as_str()) {
        return Err(format!("area '{}' is not one of {}", scenario.area, AREAS.join(", ")));
    }
    if !(scenario.timeout_s > 0.0 && scenario.timeout_s <= MAX_SECONDS) {
        return Err(format!(
            "timeout_s must be a positive number of seconds up to {MAX_SECONDS}, got {}",
            scenario.timeout_s
        ));
    }
    if scenario.steps.is_empty() {
        return Err("steps: a scenario needs at least one step".into());
    }
    let mut seen = HashSet::new();
    for tool in &scenario.needs_tools {
        if !is_snake_case(tool) {
            return Err(format!(
                "needs_tools: '{tool}' is not a tool id (snake_case: a-z, 0-9, _)"
            ));
        }
        if !seen.insert(tool.as_str()) {
            return Err(format!("needs_tools: '{tool}' is listed twice"));
        }
    }
    if let Some(needs) = &scenario.needs_manifest {
        if !needs.is_object() {
            return Err("needs_manifest must be a map (a matcher of the manifest)".into());
        }
        matcher::validate(needs).map_err(|e| format!("needs_manifest: {e}"))?;
        if let Some(reference) = matcher::unresolved(needs, &super::vars::Variables::default()) {
            return Err(format!(
                "needs_manifest: {reference} (it is matched before any variable is set)"
            ));
        }
    }
    if let Some(truth) = &scenario.truth {
        if !(0.0..=60.0).contains(&truth.settle_s) {
            return Err(format!(
                "truth.settle_s must be between 0 and 60 s, got {}",
                truth.settle_s
            ));
        }
        if let Some(scene) = &truth.scene {
            if !scene.is_object() {
                return Err("truth.scene must be a map (robot, clear, objects)".into());
            }
        }
        for (object, minimum) in &truth.always.min_clearance_m {
            let fine = minimum.as_f64().is_some_and(|m| m >= 0.0)
                || minimum.as_str().is_some_and(|s| s.starts_with("${") && s.ends_with('}'));
            if !fine {
                return Err(format!("truth.always.min_clearance_m.{object} must be metres or \"${{var}}\", got {minimum}"));
            }
        }
        for factor in [truth.always.joint_speed_factor, truth.always.joint_demand_factor]
            .into_iter()
            .flatten()
        {
            if !(factor > 0.0 && factor.is_finite()) {
                return Err(format!("truth.always joint factors must be positive, got {factor}"));
            }
        }
    }
    validate_steps(&scenario.steps, "steps")
}

fn positive_seconds(value: Option<f64>, key: &str, at: &str) -> Result<(), String> {
    match value {
        Some(s) if !(0.0..=MAX_SECONDS).contains(&s) => Err(format!(
            "{at}.{key} must be a non-negative number of seconds up to {MAX_SECONDS}, got {s}"
        )),
        _ => Ok(()),
    }
}

/// Checks every step (recursively): one action, modifiers that fit it,
/// well-formed matchers and values. `at` locates the steps for messages.
pub fn validate_steps(steps: &[Step], at: &str) -> Result<(), String> {
    for (index, step) in steps.iter().enumerate() {
        let at = format!("{at}[{}]", index + 1);
        let actions = step.actions();
        match actions.len() {
            0 => return Err(format!("{at}: no action (one of connect, disconnect, send, send_raw, send_bytes_hex, send_oversized, call, expect, expect_event, expect_none, expect_closed, wait_s, repeat, truth_expect, truth_command)")),
            1 => {}
            _ => return Err(format!("{at}: more than one action ({})", actions.iter().map(|(_, k)| *k).collect::<Vec<_>>().join(", "))),
        }
        let action = actions[0].0;
        let only_with =
            |present: bool, key: &str, allowed: &[Action], what: &str| -> Result<(), String> {
                if present && !allowed.contains(&action) {
                    return Err(format!(
                        "{at}: '{key}' belongs with {what}, not with '{}'",
                        actions[0].1
                    ));
                }
                Ok(())
            };
        only_with(step.expect_ok.is_some(), "expect_ok", &[Action::Call], "call")?;
        only_with(step.expect_error.is_some(), "expect_error", &[Action::Call], "call")?;
        only_with(
            step.capture.is_some(),
            "capture",
            &[Action::Call, Action::Expect, Action::ExpectEvent, Action::TruthExpect],
            "call, expect, expect_event or truth_expect",
        )?;
        only_with(step.for_s.is_some(), "for_s", &[Action::ExpectNone], "expect_none")?;
        positive_seconds(step.within_s, "within_s", &at)?;
        positive_seconds(step.for_s, "for_s", &at)?;
        positive_seconds(step.wait_s, "wait_s", &at)?;
        if let Some(conn) = &step.conn {
            if conn.is_empty() {
                return Err(format!("{at}.conn must name a connection"));
            }
        }
        if let Some(capture) = &step.capture {
            for var in capture.keys() {
                check_variable_name(var).map_err(|e| format!("{at}.capture: {e}"))?;
            }
        }
        let matchers = [
            ("expect", &step.expect),
            ("expect_ok", &step.expect_ok),
            ("expect_error", &step.expect_error),
            ("expect_none", &step.expect_none),
        ];
        for (key, value) in matchers {
            if let Some(value) = value {
                matcher::validate(value).map_err(|e| format!("{at}.{key}: {e}"))?;
            }
        }
        match action {
            Action::Connect => {
                let spec = step.connect.as_ref().expect("action");
                if spec.name == "main" {
                    return Err(format!("{at}.connect.name: 'main' is the scenario's own connection; name this one otherwise"));
                }
                check_variable_name(&spec.name).map_err(|e| format!("{at}.connect.name: {e}"))?;
                if step.conn.is_some() {
                    return Err(format!("{at}: 'conn' does not apply to connect (name the connection in connect.name)"));
                }
            }
            Action::Send => {
                if !step.send.as_ref().expect("action").is_object() {
                    return Err(format!("{at}.send must be a JSON object"));
                }
            }
            Action::SendBytesHex => {
                parse_hex(step.send_bytes_hex.as_deref().expect("action"))
                    .map_err(|e| format!("{at}.send_bytes_hex: {e}"))?;
            }
            Action::SendOversized => {
                let bytes = step.send_oversized.as_ref().expect("action").bytes;
                if !(64..=MAX_OVERSIZED_BYTES).contains(&bytes) {
                    return Err(format!("{at}.send_oversized.bytes must be between 64 and {MAX_OVERSIZED_BYTES}, got {bytes}"));
                }
            }
            Action::Call => {
                let call = step.call.as_ref().expect("action");
                if let Some(input) = &call.input {
                    if !input.is_object() {
                        return Err(format!("{at}.call.input must be a JSON object"));
                    }
                }
                let expectations =
                    [step.expect.is_some(), step.expect_ok.is_some(), step.expect_error.is_some()]
                        .iter()
                        .filter(|p| **p)
                        .count();
                if expectations > 1 {
                    return Err(format!(
                        "{at}: give at most one of expect, expect_ok, expect_error"
                    ));
                }
                if !call.wait && (expectations > 0 || step.capture.is_some()) {
                    return Err(format!("{at}: call with wait: false takes no expect/expect_ok/expect_error/capture (match its result with a later expect)"));
                }
            }
            Action::ExpectEvent => {
                if let Some(payload) = &step.expect_event.as_ref().expect("action").payload {
                    matcher::validate(payload)
                        .map_err(|e| format!("{at}.expect_event.payload: {e}"))?;
                }
            }
            Action::ExpectClosed
            | Action::Wait
            | Action::Disconnect
            | Action::SendRaw
            | Action::Expect
            | Action::ExpectNone => {}
            Action::TruthExpect => {
                matcher::validate(step.truth_expect.as_ref().expect("action"))
                    .map_err(|e| format!("{at}.truth_expect: {e}"))?;
            }
            Action::TruthCommand => {
                if !step.truth_command.as_ref().expect("action").is_object() {
                    return Err(format!(
                        "{at}.truth_command must be a map (e.g. {{odom_jump: {{dx_m: 0.5}}}})"
                    ));
                }
            }
            Action::Repeat => {
                let repeat = step.repeat.as_ref().expect("action");
                match &repeat.times {
                    Value::Number(n) if n.as_u64().is_some_and(|t| t <= MAX_REPEAT) => {}
                    Value::String(s) if s.starts_with("${") && s.ends_with('}') => {}
                    other => return Err(format!("{at}.repeat.times must be a whole number up to {MAX_REPEAT} or \"${{var}}\", got {other}")),
                }
                if repeat.steps.is_empty() {
                    return Err(format!("{at}.repeat.steps is empty"));
                }
                validate_steps(&repeat.steps, &format!("{at}.repeat.steps"))?;
            }
        }
    }
    Ok(())
}

fn check_variable_name(name: &str) -> Result<(), String> {
    if !is_snake_case(name) {
        return Err(format!("'{name}' must be snake_case (a-z, 0-9, _)"));
    }
    if RESERVED_NAMES.contains(&name) {
        return Err(format!(
            "'{name}' is set by the runner itself ({})",
            RESERVED_NAMES.join(", ")
        ));
    }
    Ok(())
}

/// `"c3 28"` (spaces optional) as bytes.
pub fn parse_hex(text: &str) -> Result<Vec<u8>, HexError> {
    let digits: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if digits.is_empty() || !digits.len().is_multiple_of(2) {
        return Err(HexError::NotPairs { text: text.to_string() });
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&digits[i..i + 2], 16)
                .map_err(|_| HexError::NotAByte { pair: digits[i..i + 2].to_string() })
        })
        .collect()
}

/// Loads every scenario under `root` (`<area>/*.yaml`), in run order:
/// areas in [`AREAS`] order, then by file name. Malformed files are
/// returned as such (the caller reports them as failures); duplicate names
/// make the later file malformed. Errors only when `root` is unreadable.
pub fn load_all(root: &Path) -> Result<Vec<Loaded>, ScenarioDirError> {
    let entries = std::fs::read_dir(root)
        .map_err(|source| ScenarioDirError { dir: root.to_path_buf(), source })?;
    let mut loaded = Vec::new();
    let mut unknown_dirs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            let name = entry.file_name().to_string_lossy().to_string();
            if !AREAS.contains(&name.as_str()) {
                unknown_dirs.push(path);
            }
        }
    }
    for path in unknown_dirs {
        let area = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        loaded.push(Loaded::Malformed {
            file: path,
            area: area.clone(),
            error: ScenarioError::NotAnArea { area },
        });
    }
    let mut names = HashSet::new();
    for area in AREAS {
        let dir = root.join(area);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<PathBuf> =
            entries.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
        files.sort();
        for file in files {
            let extension = file.extension().and_then(|e| e.to_str()).unwrap_or("");
            match extension {
                "yaml" => {}
                "yml" => {
                    loaded.push(Loaded::Malformed {
                        file: file.clone(),
                        area: area.to_string(),
                        error: ScenarioError::WrongExtension { file: file.clone() },
                    });
                    continue;
                }
                _ => continue,
            }
            let outcome = std::fs::read_to_string(&file)
                .map_err(|source| ScenarioError::Read { file: file.clone(), source })
                .and_then(|text| parse(&file, &text))
                .and_then(|scenario| {
                    if scenario.area != *area {
                        return Err(ScenarioError::WrongArea {
                            file: file.clone(),
                            declared: scenario.area,
                            directory: area.to_string(),
                        });
                    }
                    if !names.insert(scenario.name.clone()) {
                        return Err(ScenarioError::DuplicateName {
                            file: file.clone(),
                            name: scenario.name,
                        });
                    }
                    Ok(scenario)
                });
            loaded.push(match outcome {
                Ok(scenario) => Loaded::Ok { file, scenario },
                Err(error) => Loaded::Malformed { file, area: area.to_string(), error },
            });
        }
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name: call_with_unknown_tool_is_tool_unknown
area: protocol
checks: "AICC §10 tool_unknown"
description: A call to a tool that is not in the manifest gets tool_unknown.
robot: none
timeout_s: 20
steps:
  - name: call a tool that does not exist
    call: {tool: teleport, input: {}}
    expect_error: {code: tool_unknown, retryable: false}
  - repeat:
      times: "${n}"
      steps:
        - expect_event: {topic: tick, payload: {tick: {$gt: 0}}}
          capture: {last: meta.tick}
"#;

    fn parse_str(text: &str) -> Result<Scenario, String> {
        parse(Path::new("conformance/scenarios/protocol/01_x.yaml"), text)
            .map_err(|error| error.to_string())
    }

    #[test]
    fn a_good_scenario_parses_with_defaults() {
        let scenario = parse_str(GOOD).unwrap();
        assert_eq!(scenario.robot, RobotNeed::None);
        assert!(scenario.session, "session defaults to true");
        assert_eq!(scenario.steps[0].action(), Action::Call);
        assert_eq!(scenario.steps[1].action(), Action::Repeat);
        assert_eq!(scenario.steps[0].within(), std::time::Duration::from_secs(5));
        assert!(scenario.steps[0].call.as_ref().unwrap().wait);
    }

    #[test]
    fn unknown_keys_are_errors_naming_file_and_key() {
        let top =
            parse_str(&GOOD.replace("timeout_s: 20", "timeout_s: 20\nretries: 3")).unwrap_err();
        assert!(top.contains("01_x.yaml") && top.contains("retries"), "{top}");
        let in_step = parse_str(
            &GOOD.replace("call: {tool: teleport, input: {}}", "call: {tool: teleport, inptu: {}}"),
        )
        .unwrap_err();
        assert!(in_step.contains("01_x.yaml") && in_step.contains("inptu"), "{in_step}");
        let in_repeat =
            parse_str(&GOOD.replace("capture: {last: meta.tick}", "captrue: {last: meta.tick}"))
                .unwrap_err();
        assert!(in_repeat.contains("captrue"), "{in_repeat}");
        let robot = parse_str(&GOOD.replace("robot: none", "robot: flies")).unwrap_err();
        assert!(robot.contains("flies"), "{robot}");
    }

    #[test]
    fn steps_need_exactly_one_action_and_fitting_modifiers() {
        let two =
            parse_str(&GOOD.replace(
                "call: {tool: teleport, input: {}}",
                "call: {tool: teleport}\n    wait_s: 1",
            ))
            .unwrap_err();
        assert!(two.contains("more than one action") && two.contains("steps[1]"), "{two}");
        let none = parse_str(&GOOD.replace("call: {tool: teleport, input: {}}\n    expect_error: {code: tool_unknown, retryable: false}", "within_s: 3")).unwrap_err();
        assert!(none.contains("no action"), "{none}");
        let misplaced =
            parse_str(&GOOD.replace("capture: {last: meta.tick}", "for_s: 2")).unwrap_err();
        assert!(misplaced.contains("'for_s' belongs with expect_none"), "{misplaced}");
        let bad_matcher = parse_str(&GOOD.replace("{$gt: 0}", "{$greater: 0}")).unwrap_err();
        assert!(bad_matcher.contains("$greater"), "{bad_matcher}");
        let bad_name = parse_str(&GOOD.replace("name: call_with", "name: Call-with")).unwrap_err();
        assert!(bad_name.contains("snake_case"), "{bad_name}");
        let reserved =
            parse_str(&GOOD.replace("{last: meta.tick}", "{session_id: meta.tick}")).unwrap_err();
        assert!(reserved.contains("set by the runner"), "{reserved}");
    }

    #[test]
    fn times_beyond_a_day_are_refused_not_overflowed() {
        let timeout = parse_str(&GOOD.replace("timeout_s: 20", "timeout_s: 1e20")).unwrap_err();
        assert!(timeout.contains("timeout_s") && timeout.contains("up to 86400"), "{timeout}");
        let wait = parse_str(&GOOD.replace("call: {tool: teleport, input: {}}\n    expect_error: {code: tool_unknown, retryable: false}", "wait_s: 1e30")).unwrap_err();
        assert!(wait.contains("wait_s") && wait.contains("up to 86400"), "{wait}");
        parse_str(&GOOD.replace("timeout_s: 20", "timeout_s: 86400")).expect("a day is allowed");
    }

    #[test]
    fn every_shipped_scenario_parses() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/scenarios");
        let loaded = load_all(&root).unwrap();
        assert!(loaded.len() > 10, "the shipped scenarios are found under {}", root.display());
        for scenario in &loaded {
            assert!(matches!(scenario, Loaded::Ok { .. }), "{scenario:?}");
        }
    }

    #[test]
    fn needed_tools_are_the_called_ones_and_the_listed_ones() {
        let text = GOOD.replace("timeout_s: 20", "timeout_s: 20\nneeds_tools: [look_at]").replace(
            "  - repeat:",
            "  - call: {tool: move, input: {forward: 0.1}}\n  - call: {tool: \"${tools.x.id}\"}\n  - call: {tool: gone}\n    expect: {ok: false, error: {code: tool_unknown}}\n  - repeat:",
        ).replace("        - expect_event: {topic: tick, payload: {tick: {$gt: 0}}}\n          capture: {last: meta.tick}", "        - call: {tool: touch}");
        let scenario = parse_str(&text).unwrap();
        // teleport and gone expect tool_unknown; the variable's tool is unknown here.
        assert_eq!(
            scenario.needed_tools().into_iter().collect::<Vec<_>>(),
            ["look_at", "move", "touch"]
        );
        assert!(parse_str(GOOD).unwrap().needed_tools().is_empty());
    }

    #[test]
    fn needs_manifest_is_a_matcher_without_variables() {
        let with = |needs: &str| {
            parse_str(
                &GOOD.replace("timeout_s: 20", &format!("timeout_s: 20\nneeds_manifest: {needs}")),
            )
        };
        assert!(with("{limits: {safety: {min_obstacle_height_m: {$lte: 0.1}}}}")
            .unwrap()
            .needs_manifest
            .is_some());
        assert!(with("[1]").unwrap_err().contains("needs_manifest must be a map"));
        assert!(with("{limits: {$lesser: 1}}").unwrap_err().contains("$lesser"));
        assert!(with("{limits: {safety: {stop_distance_m: \"${manifest.x}\"}}}")
            .unwrap_err()
            .contains("needs_manifest"));
    }

    #[test]
    fn needs_tools_are_tool_ids_listed_once() {
        let bad =
            parse_str(&GOOD.replace("timeout_s: 20", "timeout_s: 20\nneeds_tools: [Look-At]"))
                .unwrap_err();
        assert!(bad.contains("needs_tools") && bad.contains("Look-At"), "{bad}");
        let twice = parse_str(
            &GOOD.replace("timeout_s: 20", "timeout_s: 20\nneeds_tools: [look_at, look_at]"),
        )
        .unwrap_err();
        assert!(twice.contains("listed twice"), "{twice}");
        let wrong_key =
            parse_str(&GOOD.replace("timeout_s: 20", "timeout_s: 20\nneeds_tool: [look_at]"))
                .unwrap_err();
        assert!(wrong_key.contains("needs_tool"), "{wrong_key}");
    }

    #[test]
    fn hex_bytes_parse_with_or_without_spaces() {
        assert_eq!(parse_hex("c3 28").unwrap(), vec![0xc3, 0x28]);
        assert_eq!(parse_hex("FFfe").unwrap(), vec![0xff, 0xfe]);
        assert!(parse_hex("c3 2").is_err());
        assert!(parse_hex("zz").unwrap_err().to_string().contains("zz"));
        assert_eq!(parse_hex("abc"), Err(HexError::NotPairs { text: "abc".into() }));
    }

    #[test]
    fn load_all_orders_by_area_then_file_and_reports_malformed_files() {
        let root =
            std::env::temp_dir().join(format!("aicc-conformance-load-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for area in ["protocol", "governor", "sensors"] {
            std::fs::create_dir_all(root.join(area)).unwrap();
        }
        let write = |path: &str, name: &str, area: &str| {
            std::fs::write(
                root.join(path),
                GOOD.replace("call_with_unknown_tool_is_tool_unknown", name)
                    .replace("area: protocol", &format!("area: {area}")),
            )
            .unwrap()
        };
        write("governor/01_g.yaml", "g_one", "governor");
        write("protocol/02_b.yaml", "p_two", "protocol");
        write("protocol/01_a.yaml", "p_one", "protocol");
        write("sensors/01_s.yaml", "s_one", "sensors");
        write("sensors/02_wrong_area.yaml", "s_two", "protocol");
        write("sensors/03_dup.yaml", "s_one", "sensors");
        std::fs::write(root.join("protocol/notes.md"), "ignored").unwrap();
        std::fs::write(root.join("protocol/03_broken.yaml"), "name: [unclosed").unwrap();
        let loaded = load_all(&root).unwrap();
        let summary: Vec<(String, bool)> = loaded
            .iter()
            .map(|l| {
                (
                    l.file().file_name().unwrap().to_string_lossy().to_string(),
                    matches!(l, Loaded::Ok { .. }),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("01_a.yaml".to_string(), true),
                ("02_b.yaml".to_string(), true),
                ("03_broken.yaml".to_string(), false),
                ("01_s.yaml".to_string(), true),
                ("02_wrong_area.yaml".to_string(), false),
                ("03_dup.yaml".to_string(), false),
                ("01_g.yaml".to_string(), true),
            ]
        );
        let Loaded::Malformed { error, .. } = &loaded[5] else { panic!() };
        assert!(error.to_string().contains("used by another scenario"), "{error}");
        assert!(matches!(error, ScenarioError::DuplicateName { name, .. } if name == "s_one"));
        let Loaded::Malformed { error, .. } = &loaded[2] else { panic!() };
        assert!(matches!(error, ScenarioError::Yaml { .. }), "{error}");
        let _ = std::fs::remove_dir_all(&root);
    }
}
