//! The chaos agent (`aicc-chaos`): an untrusted operator at its most
//! careless. Seeded random sequences of every tool the bridge offers, with
//! random and boundary inputs (head and arm poses, speeds, durations,
//! invalid values), calls left in flight, cancels, stops and abrupt
//! reconnects, in a world with low obstacles; judged all the while on the
//! simulator's ground truth (`sim/truth.py`), never on what the bridge says:
//! no contact with anything, base speed and acceleration within the
//! manifest's limits, joint speeds within the URDF's (measured, and asked of
//! the controllers), base_footprint inside the geofence when one is set.
//!
//! A run is deterministic in what it asks (the seed decides every choice
//! and value); what the robot does in reply depends on timing. Each
//! violation is reported with its sim time, the seed, and the calls that
//! came before it.
pub mod generate;
pub mod session;

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::conformance::judge::{Figures, Invariants, Violation};
use crate::conformance::truth::TruthClient;
use generate::{Action, Generator, Rng};
use session::{Incoming, Session};

/// Calls remembered for a violation's context.
pub const CONTEXT_CALLS: usize = 12;
/// Calls one session keeps in flight at most.
pub const MAX_IN_FLIGHT: usize = 4;
/// Tolerances stated in the report (see conformance::judge for the base).
pub const JOINT_SPEED_FACTOR: f64 = 1.1;
pub const GEOFENCE_TOL_M: f64 = 0.05;

/// How to run.
#[derive(Debug, Clone)]
pub struct ChaosOptions {
    pub host: String,
    pub port: u16,
    pub token: Option<String>,
    pub truth: String,
    pub seeds: Vec<u64>,
    /// Wall time per seed.
    pub per_seed: Duration,
    /// Spare low obstacles placed per seed (at most the simulator's spares).
    pub obstacles: usize,
    /// Print every call as it goes.
    pub verbose: bool,
}

/// One call as sent, for context.
#[derive(Debug, Clone)]
pub struct CallRecord {
    pub index: u64,
    pub sim_time: f64,
    pub tool: String,
    pub input: Value,
    pub outcome: Option<String>,
}

impl CallRecord {
    fn describe(&self) -> String {
        let mut input = self.input.to_string();
        if input.len() > 160 {
            input.truncate(160);
            input.push('…');
        }
        format!(
            "#{} t={:.2} {} {} -> {}",
            self.index,
            self.sim_time,
            self.tool,
            input,
            self.outcome.as_deref().unwrap_or("(in flight)")
        )
    }
}

/// A violation with what came before it.
#[derive(Debug, Clone)]
pub struct Found {
    pub seed: u64,
    pub violation: Violation,
    pub before: Vec<String>,
    /// The ground truth over the 0.5 s before it: [sim time, forward m/s,
    /// yaw rate rad/s, x, y, yaw, pitch, commanded linear, commanded angular] per sample.
    pub trace: Vec<[f64; 9]>,
}

/// What one seed did.
#[derive(Debug, Clone, Default)]
pub struct SeedReport {
    pub seed: u64,
    pub calls: u64,
    pub calls_by_tool: BTreeMap<String, u64>,
    /// tool -> outcome ("ok" or the error code) -> count.
    pub outcomes: BTreeMap<String, BTreeMap<String, u64>>,
    /// Governor restrictions that began, by rule.
    pub restrictions_by_rule: BTreeMap<String, u64>,
    /// execution_failed results of motion tools, by the rule their message names.
    pub refusals_by_rule: BTreeMap<String, u64>,
    pub reconnects: u64,
    pub cancels: u64,
    pub stops: u64,
    pub found: Vec<Found>,
    pub figures: Figures,
    pub wall_s: f64,
    /// Where the scene put the obstacles (world x, y).
    pub obstacles: Vec<(String, f64, f64)>,
    /// Odometry drift against the truth at the end, m.
    pub odometry_drift_m: f64,
}

impl SeedReport {
    pub fn to_json(&self) -> Value {
        json!({
            "seed": self.seed,
            "calls": self.calls,
            "calls_by_tool": self.calls_by_tool,
            "outcomes": self.outcomes,
            "restrictions_by_rule": self.restrictions_by_rule,
            "refusals_by_rule": self.refusals_by_rule,
            "reconnects": self.reconnects,
            "cancels": self.cancels,
            "stops": self.stops,
            "wall_s": self.wall_s,
            "obstacles": self.obstacles.iter().map(|(n, x, y)| json!({ "object": n, "x": x, "y": y })).collect::<Vec<_>>(),
            "odometry_drift_m": self.odometry_drift_m,
            "ground_truth": self.figures.to_json(),
            "violations": self.found.iter().map(|f| json!({ "seed": f.seed, "kind": f.violation.kind, "sim_time": f.violation.sim_time, "detail": f.violation.detail, "calls_before": f.before, "truth_before": { "fields": ["sim_time", "forward_mps", "yaw_rate_radps", "x", "y", "yaw", "pitch", "cmd_linear_mps", "cmd_angular_radps"], "samples": f.trace } })).collect::<Vec<_>>(),
        })
    }
}

/// The words of a governor refusal that name its rule, as the bridge's
/// messages put them (`stopped by an obstacle`, `contact`...): the rule
/// names of restriction events where the message quotes one.
fn refusal_rule(message: &str) -> String {
    let lower = message.to_lowercase();
    for (needle, rule) in [
        ("odometry", "odometry"),
        ("geofence", "geofence"),
        ("contact", "contact"),
        ("bumper", "contact"),
        ("behind", "obstacle_behind"),
        ("turning", "obstacle_turning"),
        ("obstacle", "obstacle_ahead"),
        ("uncovered", "uncovered"),
        ("not covered", "uncovered"),
        ("stale", "sensing_stale"),
        ("lease", "lease"),
        ("halt", "halted"),
        ("stop", "stopped"),
        ("cancel", "cancelled"),
    ] {
        if lower.contains(needle) {
            return rule.to_string();
        }
    }
    "other".to_string()
}

fn is_motion(tool: &str) -> bool {
    matches!(tool, "move" | "turn" | "look_at" | "interact")
}

/// Runs every seed; returns one report per seed.
pub async fn run(options: &ChaosOptions) -> Result<Vec<SeedReport>, String> {
    let truth = TruthClient::connect(&options.truth, Duration::from_secs(10)).await?;
    wait_until_moving_is_offered(options, Duration::from_secs(90)).await?;
    let mut reports = Vec::new();
    // The geofence is centred where the bridge first saw the robot: where
    // it is now, at the first seed (the run starts beside a fresh bridge).
    let (_, start) = truth.next_sample(Duration::from_secs(10)).await?;
    let centre = (start.base.x, start.base.y);
    for &seed in &options.seeds {
        reports.push(run_seed(options, &truth, seed, centre).await?);
    }
    Ok(reports)
}

/// A bridge started a moment ago offers the robot's tools once their data
/// flows: waits until `move` is available (in `capabilities.actuators`).
async fn wait_until_moving_is_offered(
    options: &ChaosOptions,
    within: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        let session =
            Session::connect(&options.host, options.port, options.token.as_deref()).await?;
        let offered = session
            .manifest
            .pointer("/capabilities/actuators")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|t| t == "move"));
        if offered {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the bridge did not offer move within {:.0} s: {}",
                within.as_secs_f64(),
                session.manifest.get("capabilities").cloned().unwrap_or(Value::Null)
            ));
        }
        drop(session);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The spare low obstacles of the simulated world, by name.
/// The robot bodies the arm's joints move, and what hangs from them (the
/// fingers), from the joints' links in the simulator's hello.
fn arm_bodies(hello: &crate::conformance::judge::Hello, arm_joints: &[String]) -> Vec<String> {
    let mut bodies: Vec<String> = hello
        .joints
        .iter()
        .filter(|(name, _)| arm_joints.contains(name))
        .filter_map(|(_, j)| j.child.clone())
        .collect();
    loop {
        let more: Vec<String> = hello
            .joints
            .values()
            .filter(|j| j.parent.as_ref().is_some_and(|p| bodies.contains(p)))
            .filter_map(|j| j.child.clone())
            .filter(|c| !bodies.contains(c))
            .collect();
        if more.is_empty() {
            return bodies;
        }
        bodies.extend(more);
    }
}

fn spare_obstacles(truth: &TruthClient) -> Vec<String> {
    truth.hello.objects.keys().filter(|name| name.starts_with("low_box_")).cloned().collect()
}

async fn run_seed(
    options: &ChaosOptions,
    truth: &TruthClient,
    seed: u64,
    centre: (f64, f64),
) -> Result<SeedReport, String> {
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    let mut report = SeedReport { seed, ..SeedReport::default() };
    let mut session =
        Session::connect(&options.host, options.port, options.token.as_deref()).await?;
    let manifest = session.manifest.clone();
    let geofence_m = manifest
        .pointer("/limits/safety/geofence_radius_m")
        .and_then(Value::as_f64)
        .filter(|r| *r > 0.0);
    // The scene: the spare low boxes at seeded spots around the geofence's
    // centre, clear of the robot; the pedestal and its cube parked (an arm
    // in random poses beside them would touch them, which is no governor's
    // business).
    let (_, now) = truth.next_sample(Duration::from_secs(5)).await?;
    let radius = geofence_m.unwrap_or(1.2);
    let mut placed: Vec<(f64, f64)> = Vec::new();
    let mut objects = Vec::new();
    for name in spare_obstacles(truth).into_iter().take(options.obstacles) {
        for _ in 0..200 {
            let bearing = rng.uniform(-std::f64::consts::PI, std::f64::consts::PI);
            let distance = rng.uniform(0.55, radius + 0.25);
            let (x, y) = (centre.0 + distance * bearing.cos(), centre.1 + distance * bearing.sin());
            let clear_of_robot = (x - now.base.x).hypot(y - now.base.y) > 0.6;
            let clear_of_others = placed.iter().all(|(px, py)| (x - px).hypot(y - py) > 0.55);
            if clear_of_robot && clear_of_others && x.abs() < 1.7 && y.abs() < 1.7 {
                placed.push((x, y));
                let yaw = rng.uniform(-180.0, 180.0);
                objects.push(json!({ "object": name, "x_m": x, "y_m": y, "yaw_deg": yaw }));
                report.obstacles.push((name.clone(), x, y));
                break;
            }
        }
    }
    let park: Vec<&str> =
        ["pedestal", "cube"].into_iter().filter(|n| truth.hello.objects.contains_key(*n)).collect();
    // Parked in the same step as the reset: restored first, the pedestal may
    // stand where the robot is now.
    truth.command(&json!({ "reset_world": true, "park": park }), Duration::from_secs(10)).await?;
    let seq = truth
        .command(&json!({ "scene": { "park": park, "objects": objects } }), Duration::from_secs(10))
        .await?;
    truth.sample_at_least(seq, Duration::from_secs(10)).await?;
    let limit = |path: &str| manifest.pointer(path).and_then(Value::as_f64);
    let mut generator = Generator::new(&manifest);
    truth.judge(Invariants {
        no_contact: true,
        arm_contact_at_rest_allowed: arm_bodies(&truth.hello, &generator.arm_joints()),
        max_linear_mps: limit("/limits/base/max_linear_mps"),
        max_angular_radps: limit("/limits/base/max_angular_radps"),
        max_linear_accel_mps2: limit("/limits/base/max_linear_accel_mps2"),
        max_linear_decel_mps2: limit("/limits/safety/emergency_decel_mps2"),
        max_angular_accel_radps2: limit("/limits/base/max_angular_accel_radps2"),
        joint_speed_factor: Some(JOINT_SPEED_FACTOR),
        joint_demand_factor: Some(1.0),
        geofence: geofence_m.map(|r| (centre.0, centre.1, r)),
        geofence_tol_m: GEOFENCE_TOL_M,
        ..Invariants::default()
    });
    let mut history: VecDeque<CallRecord> = VecDeque::new();
    let mut in_flight: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut index = 0u64;
    let mut reported = 0usize;
    let deadline = Instant::now() + options.per_seed;
    while Instant::now() < deadline {
        let sim_time = truth.latest().map_or(0.0, |(_, s)| s.sim_time);
        let in_flight_ids: Vec<String> = in_flight.keys().cloned().collect();
        let action = generator.next(&mut rng, &in_flight_ids);
        match action {
            Action::Reconnect => {
                report.reconnects += 1;
                if options.verbose {
                    eprintln!(
                        "[chaos {seed}] reconnect with {} call(s) in flight",
                        in_flight.len()
                    );
                }
                for (_, (i, _)) in std::mem::take(&mut in_flight) {
                    if let Some(record) = history.iter_mut().find(|r| r.index == i) {
                        record.outcome = Some("cut off by the reconnect".into());
                    }
                }
                drop(session);
                session =
                    Session::connect(&options.host, options.port, options.token.as_deref()).await?;
            }
            Action::Call { tool, input, wait } => {
                index += 1;
                report.calls += 1;
                *report.calls_by_tool.entry(tool.clone()).or_insert(0) += 1;
                match tool.as_str() {
                    "cancel" => report.cancels += 1,
                    "stop" => report.stops += 1,
                    _ => {}
                }
                let record = CallRecord {
                    index,
                    sim_time,
                    tool: tool.clone(),
                    input: input.clone(),
                    outcome: None,
                };
                if options.verbose {
                    eprintln!("[chaos {seed}] {}", record.describe());
                }
                history.push_back(record);
                if history.len() > 4 * CONTEXT_CALLS {
                    history.pop_front();
                }
                let call_id = session.call(&tool, &input).await?;
                in_flight.insert(call_id.clone(), (index, tool.clone()));
                if wait || in_flight.len() >= MAX_IN_FLIGHT {
                    // Wait for this call (or, with too many in flight, any) to end.
                    // At most a little past the seed's end: the stop at the end ends the rest.
                    let until = (Instant::now() + Duration::from_secs(90))
                        .min(deadline + Duration::from_secs(5));
                    while in_flight.contains_key(&call_id)
                        && (wait || in_flight.len() >= MAX_IN_FLIGHT)
                        && Instant::now() < until
                    {
                        let incoming = session.next(Duration::from_millis(200)).await?;
                        absorb(incoming, &mut in_flight, &mut history, &mut report);
                        collect_violations(truth, seed, &history, &mut reported, &mut report);
                    }
                }
            }
            Action::Pause(pause) => {
                let until = Instant::now() + pause;
                while Instant::now() < until {
                    let incoming = session
                        .next(
                            until
                                .saturating_duration_since(Instant::now())
                                .min(Duration::from_millis(200)),
                        )
                        .await?;
                    absorb(incoming, &mut in_flight, &mut history, &mut report);
                }
            }
        }
        // Take in what came meanwhile.
        loop {
            let incoming = session.next(Duration::ZERO).await?;
            if incoming.is_empty() {
                break;
            }
            absorb(incoming, &mut in_flight, &mut history, &mut report);
        }
        collect_violations(truth, seed, &history, &mut reported, &mut report);
        if let Some(why) = truth.closed() {
            return Err(format!("the ground truth closed ({why})"));
        }
    }
    // The end: stop everything, let the robot settle, judge the last of it.
    let _ = session.call("stop", &json!({ "reason": "chaos seed over" })).await;
    let settle = Instant::now() + Duration::from_secs(2);
    while Instant::now() < settle {
        let incoming = session.next(Duration::from_millis(200)).await?;
        absorb(incoming, &mut in_flight, &mut history, &mut report);
    }
    collect_violations(truth, seed, &history, &mut reported, &mut report);
    report.odometry_drift_m = odometry_drift(truth).unwrap_or(0.0);
    let judge = truth.take_judge().ok_or("the judge vanished")?;
    report.figures = judge.figures;
    report.wall_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// How far apart odometry and the truth say the robot moved over the last
/// 10 s of samples (a measure of the odometry's drift, for the geofence's
/// tolerance).
fn odometry_drift(truth: &TruthClient) -> Option<f64> {
    let recent = truth.recent();
    let (first, last) = (recent.first()?, recent.last()?);
    let truth_moved = (last.base.x - first.base.x).hypot(last.base.y - first.base.y);
    let odom_moved = (last.odom.x - first.odom.x).hypot(last.odom.y - first.odom.y);
    Some((truth_moved - odom_moved).abs())
}

fn absorb(
    incoming: Vec<Incoming>,
    in_flight: &mut BTreeMap<String, (u64, String)>,
    history: &mut VecDeque<CallRecord>,
    report: &mut SeedReport,
) {
    for message in incoming {
        match message {
            Incoming::Result { call_id, ok, code, message } => {
                let Some((index, tool)) = in_flight.remove(&call_id) else { continue };
                let outcome = if ok { "ok".to_string() } else { code.clone() };
                *report
                    .outcomes
                    .entry(tool.clone())
                    .or_default()
                    .entry(outcome.clone())
                    .or_insert(0) += 1;
                if !ok && code == "execution_failed" && is_motion(&tool) {
                    *report.refusals_by_rule.entry(refusal_rule(&message)).or_insert(0) += 1;
                }
                if let Some(record) = history.iter_mut().find(|r| r.index == index) {
                    let mut text = if ok { "ok".to_string() } else { format!("{code}: {message}") };
                    if text.len() > 200 {
                        text.truncate(200);
                        text.push('…');
                    }
                    record.outcome = Some(text);
                }
            }
            Incoming::Restriction { rule } => {
                *report.restrictions_by_rule.entry(rule).or_insert(0) += 1
            }
        }
    }
}

fn collect_violations(
    truth: &TruthClient,
    seed: u64,
    history: &VecDeque<CallRecord>,
    reported: &mut usize,
    report: &mut SeedReport,
) {
    let violations = truth.violations();
    for violation in violations.iter().skip(*reported) {
        let before: Vec<String> = history
            .iter()
            .filter(|r| r.sim_time <= violation.sim_time)
            .rev()
            .take(CONTEXT_CALLS)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .map(CallRecord::describe)
            .collect();
        let round = |v: f64| (v * 1e4).round() / 1e4;
        let trace = truth
            .recent()
            .iter()
            .filter(|s| s.sim_time <= violation.sim_time && s.sim_time >= violation.sim_time - 0.5)
            .map(|s| {
                let (cmd_linear, cmd_angular) =
                    s.cmd_vel.map_or((f64::NAN, f64::NAN), |c| (c.linear, c.angular));
                [
                    s.sim_time,
                    s.base.linear_mps[0],
                    s.base.angular_radps[2],
                    s.base.x,
                    s.base.y,
                    s.base.yaw,
                    s.base.pitch,
                    cmd_linear,
                    cmd_angular,
                ]
                .map(round)
            })
            .collect();
        report.found.push(Found { seed, violation: violation.clone(), before, trace });
    }
    *reported = violations.len();
}

/// The figures of a run, for people.
pub fn render(reports: &[SeedReport]) -> String {
    let mut out = String::new();
    let mut total_calls = 0;
    let mut total_found = 0;
    let mut by_tool: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_rule: BTreeMap<String, u64> = BTreeMap::new();
    let mut restrictions: BTreeMap<String, u64> = BTreeMap::new();
    let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
    for r in reports {
        total_calls += r.calls;
        total_found += r.found.len();
        for (tool, n) in &r.calls_by_tool {
            *by_tool.entry(tool.clone()).or_insert(0) += n;
        }
        for (rule, n) in &r.refusals_by_rule {
            *by_rule.entry(rule.clone()).or_insert(0) += n;
        }
        for (rule, n) in &r.restrictions_by_rule {
            *restrictions.entry(rule.clone()).or_insert(0) += n;
        }
        for f in &r.found {
            *kinds.entry(f.violation.kind).or_insert(0) += 1;
        }
        out.push_str(&format!(
            "seed {}: {} calls in {:.0} s, {} reconnects, {} cancels, {} stops; ground truth: {}; odometry drift {:.3} m; {} violation(s)\n",
            r.seed,
            r.calls,
            r.wall_s,
            r.reconnects,
            r.cancels,
            r.stops,
            r.figures.summary(),
            r.odometry_drift_m,
            r.found.len()
        ));
    }
    out.push_str(&format!(
        "\n{} seeds, {total_calls} calls, {total_found} violation(s)\n",
        reports.len()
    ));
    out.push_str(&format!(
        "calls by tool: {}\n",
        by_tool.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
    ));
    out.push_str(&format!(
        "motion refused or ended early (execution_failed), by the rule named: {}\n",
        if by_rule.is_empty() {
            "none".into()
        } else {
            by_rule.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        }
    ));
    out.push_str(&format!(
        "governor restrictions begun, by rule: {}\n",
        if restrictions.is_empty() {
            "none".into()
        } else {
            restrictions.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        }
    ));
    if !kinds.is_empty() {
        out.push_str(&format!(
            "violations by kind: {}\n",
            kinds.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        ));
    }
    for r in reports {
        for f in &r.found {
            out.push_str(&format!(
                "\nVIOLATION seed {}: {}\n  calls before it (oldest first):\n",
                f.seed, f.violation
            ));
            for line in &f.before {
                out.push_str(&format!("    {line}\n"));
            }
            // The last samples of the trace (all of it is in the report): a
            // log that keeps only this text still shows how it happened.
            let tail = &f.trace[f.trace.len().saturating_sub(TRACE_LINES_PRINTED)..];
            if !tail.is_empty() {
                out.push_str("  ground truth just before (sim time, forward m/s, yaw rate rad/s, x, y, yaw, pitch, commanded linear, commanded angular):\n");
                for sample in tail {
                    let fields: Vec<String> = sample.iter().map(|v| format!("{v:.3}")).collect();
                    out.push_str(&format!("    {}\n", fields.join(" ")));
                }
            }
        }
    }
    out
}

/// Samples of a violation's ground-truth trace printed with it.
const TRACE_LINES_PRINTED: usize = 6;

pub fn to_json(reports: &[SeedReport], options: &ChaosOptions) -> Value {
    json!({
        "seeds": options.seeds,
        "seconds_per_seed": options.per_seed.as_secs_f64(),
        "tolerances": {
            "base_speed": format!("limit x {} + {} m/s (angular + {} rad/s)", 1.0 + crate::conformance::judge::SPEED_TOLERANCE, crate::conformance::judge::SPEED_SLACK_MPS, crate::conformance::judge::ANGULAR_SLACK_RADPS),
            "base_accel": format!("over {} s windows: limit x {} + {} m/s²", crate::conformance::judge::ACCEL_WINDOW_S, 1.0 + crate::conformance::judge::ACCEL_TOLERANCE, crate::conformance::judge::ACCEL_SLACK_MPS2),
            "base_accel_physics": "a measured acceleration over its limit while the velocity commanded over the same window stayed within it is the simulated base catching up with its command: counted (physics_accel_excursions), not a violation",
            "joint_speed": format!("URDF limit x {JOINT_SPEED_FACTOR} + {}", crate::conformance::judge::JOINT_SPEED_SLACK),
            "joint_demand": format!("URDF limit x 1.0 x {} (a trajectory's times are rounded)", 1.0 + crate::conformance::judge::JOINT_DEMAND_TOLERANCE),
            "geofence_m": GEOFENCE_TOL_M,
            "contact": "none: any robot geom touching any world geom but the floor",
        },
        "violations": reports.iter().map(|r| r.found.len()).sum::<usize>(),
        "runs": reports.iter().map(SeedReport::to_json).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arm_bodies_are_what_its_joints_move_and_what_hangs_from_them() {
        let hello: crate::conformance::judge::Hello = serde_json::from_value(json!({
            "joints": {
                "joint1": { "type": "revolute", "parent": "link1", "child": "link2" },
                "joint2": { "type": "revolute", "parent": "link2", "child": "link3" },
                "gripper_left_joint": { "type": "prismatic", "parent": "link3", "child": "gripper_left_link" },
                "head_pan_joint": { "type": "revolute", "parent": "base_link", "child": "head_pan_link" },
                "wheel_left_joint": { "type": "continuous", "parent": "base_link", "child": "wheel_left_link" }
            },
            "objects": {}, "room": { "half_size_m": 2.0 }
        }))
        .unwrap();
        let mut bodies = arm_bodies(&hello, &["joint1".into(), "joint2".into()]);
        bodies.sort();
        assert_eq!(bodies, ["gripper_left_link", "link2", "link3"]);
    }

    #[test]
    fn refusals_are_told_apart_by_the_rule_their_message_names() {
        assert_eq!(
            refusal_rule("move stopped by an obstacle 0.19 m ahead after 0.62 m"),
            "obstacle_ahead"
        );
        assert_eq!(refusal_rule("move stopped by a bumper contact"), "contact");
        assert_eq!(refusal_rule("an obstacle behind at 0.2 m"), "obstacle_behind");
        assert_eq!(refusal_rule("the zone behind is not covered by any source"), "obstacle_behind");
        assert_eq!(refusal_rule("odometry jumped 0.5 m"), "odometry");
        assert_eq!(refusal_rule("something else"), "other");
    }

    #[test]
    fn a_violation_is_printed_with_its_calls_and_the_last_of_its_trace() {
        let trace: Vec<[f64; 9]> = (0..10).map(|i| [f64::from(i); 9]).collect();
        let report = SeedReport {
            seed: 7,
            found: vec![Found {
                seed: 7,
                violation: Violation {
                    kind: "joint_demand",
                    sim_time: 0.8,
                    seq: 40,
                    detail: "head_pan_joint asked 4.000".into(),
                },
                before: vec!["#5 t=0.79 look_at {} -> (in flight)".into()],
                trace,
            }],
            ..SeedReport::default()
        };
        let text = render(&[report]);
        let violation = text.split("\nVIOLATION seed 7: ").nth(1).expect("the violation");
        assert!(violation.contains("head_pan_joint asked 4.000"), "{violation}");
        assert!(violation.contains("    #5 t=0.79 look_at {} -> (in flight)"), "{violation}");
        let samples: Vec<&str> =
            violation.lines().filter(|l| l.starts_with("    ") && !l.contains('#')).collect();
        assert_eq!(samples.len(), TRACE_LINES_PRINTED, "{violation}");
        assert!(
            samples.last().unwrap().starts_with("    9.000 9.000"),
            "the newest last: {violation}"
        );
    }

    #[test]
    fn a_call_record_is_one_short_line() {
        let record = CallRecord {
            index: 3,
            sim_time: 12.5,
            tool: "move".into(),
            input: json!({ "forward": 1.0 }),
            outcome: Some("ok".into()),
        };
        assert_eq!(record.describe(), "#3 t=12.50 move {\"forward\":1.0} -> ok");
    }
}
