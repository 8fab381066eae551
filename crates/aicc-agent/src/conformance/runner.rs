//! Runs one scenario against a bridge: opens its connections, performs
//! its steps in order, and checks every line received on the way
//! ([`LineChecker`]): a violation fails the step that was running.
//! A step's failure is text, as the report shows it to a person; the typed
//! errors of the modules it calls become that text here.
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::checks::LineChecker;
use super::connection::{Connection, Endpoint, Incoming, Tagged};
use super::judge::{self, Invariants};
use super::matcher::{self, show, Captures, Mismatch};
use super::offered::Offered;
use super::report::{Failure, ScenarioResult, Status};
use super::scenario::{
    Action, CallSpec, ConnectScope, ConnectSpec, Scenario, Step, TruthSpec,
    DEFAULT_CLEARANCE_TOL_M, DEFAULT_FOR_S, MAX_REPEAT,
};
use super::transcript::{Direction, Transcript};
use super::truth::TruthClient;
use super::vars::{lookup, Variables};

/// Unconsumed messages one connection may hold (a bound, not a goal).
pub const MAX_PENDING_MESSAGES: usize = 10_000;
/// Bytes of unconsumed messages one connection may hold.
pub const MAX_PENDING_BYTES: usize = 256 << 20;
/// Lines in flight from the readers to the runner.
const CHANNEL_LINES: usize = 64;
/// How long a handshake without a token waits for an unasked session_init.
const UNSOLICITED_INIT_WAIT: Duration = Duration::from_secs(2);
/// Answers to the bridge's heartbeats one connection may owe at once (one
/// is enough to show the runner alive; more are redundant).
const MAX_OWED_HEARTBEAT_ANSWERS: usize = 8;
/// The runner's heartbeats whose echo from the bridge is still to come.
const MAX_AWAITED_HEARTBEAT_ECHOES: usize = 64;
/// How long writing one heartbeat answer may take.
const HEARTBEAT_ANSWER_WRITE: Duration = Duration::from_secs(2);
/// How long the end of a scenario waits for the bridge to close the
/// connections the runner closed (it releases their sessions' motion lease
/// on the way) before the next scenario starts.
pub const DEFAULT_CLOSE_WAIT: Duration = Duration::from_secs(2);
/// The message_id prefix of the runner's heartbeat answers.
const HEARTBEAT_ANSWER_PREFIX: &str = "conformance-heartbeat-";

/// A token and the environment variable it came from.
#[derive(Debug, Clone)]
pub struct TokenSource {
    pub env: String,
    pub value: Option<String>,
}

impl TokenSource {
    pub fn from_env(env: &str) -> Self {
        Self { env: env.to_string(), value: std::env::var(env).ok().filter(|v| !v.is_empty()) }
    }
}

/// How to reach and authenticate to the bridge under test.
#[derive(Clone)]
pub struct RunnerOptions {
    pub endpoint: Endpoint,
    /// Longest line accepted from the bridge, bytes (before the LF).
    pub max_line_bytes: usize,
    /// The runner's own token: "main", and `connect` with scope admin.
    pub admin: TokenSource,
    pub actuate: TokenSource,
    pub observe: TokenSource,
    /// How long the end of a scenario waits for the bridge's EOF on each
    /// connection the runner closes.
    pub close_wait: Duration,
    /// The simulator's ground-truth channel (`HOST:PORT`, `--truth`): a
    /// test stand-in; scenarios that need it are skipped without it.
    pub truth: Option<String>,
}

/// How long connecting to the ground truth, and each of its commands, may take.
const TRUTH_WAIT: Duration = Duration::from_secs(10);
/// How long the bridge is given to notice a scene's teleport.
const SCENE_SETTLE: Duration = Duration::from_millis(500);
/// How often a `truth_expect` looks at new samples (they come every 20 ms).
const TRUTH_POLL: Duration = Duration::from_millis(20);

impl RunnerOptions {
    fn secrets(&self) -> Vec<String> {
        [&self.admin, &self.actuate, &self.observe].iter().filter_map(|t| t.value.clone()).collect()
    }
}

/// One open (or closed by the bridge) connection of a scenario.
struct Conn {
    connection: Connection,
    checker: LineChecker,
    /// Messages received and not yet consumed by an expect, in arrival
    /// order, with their size in bytes.
    pending: VecDeque<(Value, usize)>,
    pending_bytes: usize,
    /// Set when the bridge closed it (how).
    closed: Option<String>,
    /// Answers to the bridge's heartbeats, to write at the next chance.
    owed_heartbeat_answers: VecDeque<Vec<u8>>,
    /// message_ids of the runner's heartbeat answers, whose echo from the
    /// bridge is the runner's own business (not offered to expects).
    awaited_heartbeat_echoes: VecDeque<String>,
}

impl Conn {
    fn new(connection: Connection) -> Self {
        Self {
            connection,
            checker: LineChecker::default(),
            pending: VecDeque::new(),
            pending_bytes: 0,
            closed: None,
            owed_heartbeat_answers: VecDeque::new(),
            awaited_heartbeat_echoes: VecDeque::new(),
        }
    }
}

/// Where in the scenario the run is, for failure reports.
#[derive(Debug, Clone)]
struct Position {
    index: usize,
    label: Option<String>,
    /// (repetition, of) when inside a repeat.
    repetition: Option<(u64, u64)>,
}

/// What a search of a connection's messages found.
pub(super) enum Found {
    /// The index in `pending` and the captures of the match.
    Match(usize, Captures),
    TimedOut {
        nearest: Option<(Mismatch, Value)>,
    },
    Closed {
        how: String,
        nearest: Option<(Mismatch, Value)>,
    },
}

/// The state of one run against the bridge: a scenario's, or the wait for
/// the bridge to be ready.
pub(super) struct Run<'a> {
    pub(super) options: &'a RunnerOptions,
    vars: Variables,
    conns: HashMap<String, Conn>,
    names: HashMap<u64, String>,
    next_conn_id: u64,
    sender: mpsc::Sender<Tagged>,
    receiver: mpsc::Receiver<Tagged>,
    transcript: Transcript,
    positions: Vec<Position>,
    calls_made: u64,
    /// The ground truth, for a scenario that needs it.
    truth: Option<TruthClient>,
    /// Where `travel` counts from: the robot's true pose after the scene.
    truth_origin: (f64, f64, f64),
    /// Violations already reported.
    truth_reported: usize,
    /// A scene was set: the world is reset at the end.
    truth_scene_set: bool,
}

/// Runs one scenario, or skips it without connecting when the endpoint's
/// profile lacks a tool it needs ([`Scenario::needed_tools`]) or its
/// manifest does not match the scenario's `needs_manifest`.
pub async fn run_or_skip(
    scenario: &Scenario,
    file: &Path,
    options: &RunnerOptions,
    offered: &Offered,
) -> ScenarioResult {
    if let Some(reason) = offered.skip_reason(&scenario.needed_tools()) {
        return skipped(scenario, file, reason);
    }
    if let Some(reason) =
        scenario.needs_manifest.as_ref().and_then(|needs| offered.manifest_skip_reason(needs))
    {
        return skipped(scenario, file, reason);
    }
    if scenario.needs_truth() && options.truth.is_none() {
        return skipped(scenario, file, "needs the simulator's ground truth (--truth HOST:PORT: sim/aicc_sim.py --truth-listen), which this run was not given".into());
    }
    run_scenario(scenario, file, options).await
}

/// The result of a scenario not run because the profile lacks what it needs.
pub fn skipped(scenario: &Scenario, file: &Path, reason: String) -> ScenarioResult {
    ScenarioResult {
        skip_reason: Some(reason),
        ..base_result(scenario, file, Status::Skipped, 0.0)
    }
}

/// What every result says of its scenario, with no failure, skip or transcript.
fn base_result(
    scenario: &Scenario,
    file: &Path,
    status: Status,
    duration_s: f64,
) -> ScenarioResult {
    ScenarioResult {
        name: scenario.name.clone(),
        area: scenario.area.clone(),
        file: file.display().to_string(),
        robot: Some(scenario.robot),
        checks: scenario.checks.clone(),
        status,
        duration_s,
        failure: None,
        skip_reason: None,
        transcript: Vec::new(),
        truth: None,
    }
}

/// Runs one scenario; never panics on what the bridge sends.
pub async fn run_scenario(
    scenario: &Scenario,
    file: &Path,
    options: &RunnerOptions,
) -> ScenarioResult {
    let started = Instant::now();
    let mut run = Run::new(options);
    if scenario.needs_truth() {
        let address = options.truth.as_deref().unwrap_or_default();
        match TruthClient::connect(address, TRUTH_WAIT).await {
            Ok(client) => {
                let missing: Vec<String> = scenario
                    .needed_objects()
                    .into_iter()
                    .filter(|o| !client.hello.objects.contains_key(o))
                    .collect();
                if !missing.is_empty() {
                    return skipped(scenario, file, format!("needs object(s) {} in the simulated world (sim/aicc_sim.py --low-obstacles), which it does not have", missing.join(", ")));
                }
                run.truth = Some(client);
            }
            Err(reason) => {
                let failure = Failure {
                    step: None,
                    label: Some("connecting to the ground truth".into()),
                    reason,
                };
                return ScenarioResult {
                    failure: Some(failure),
                    ..base_result(scenario, file, Status::Failed, started.elapsed().as_secs_f64())
                };
            }
        }
    }
    let timeout = Duration::from_secs_f64(scenario.timeout_s);
    let outcome = tokio::time::timeout(timeout, run.scenario(scenario)).await;
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(reason)) => Some(run.failure(reason)),
        Err(_) => Some(
            run.failure(format!("the scenario's timeout_s ({} s) ran out", scenario.timeout_s)),
        ),
    };
    // Deterministic: the next scenario starts once the bridge has let go
    // of this one's connections (and with them its motion lease).
    run.close_connections().await;
    let truth = run.finish_truth().await;
    let status = if failure.is_some() { Status::Failed } else { Status::Passed };
    ScenarioResult {
        transcript: if failure.is_some() { run.transcript.lines() } else { Vec::new() },
        failure,
        truth,
        ..base_result(scenario, file, status, started.elapsed().as_secs_f64())
    }
}

fn describe_found_failure(what: &str, conn: &str, found: Found, within: Duration) -> String {
    let nearest_text = |nearest: Option<(Mismatch, Value)>| match nearest {
        Some((miss, message)) => format!("; nearest: {} — {miss}", show(&message)),
        None => "; nothing unconsumed to compare".to_string(),
    };
    match found {
        Found::Match(..) => unreachable!("not a failure"),
        Found::TimedOut { nearest } => format!(
            "no message on '{conn}' matched {what} within {:.1} s{}",
            within.as_secs_f64(),
            nearest_text(nearest)
        ),
        Found::Closed { how, nearest } => format!(
            "connection '{conn}' was closed ({how}) before a message matched {what}{}",
            nearest_text(nearest)
        ),
    }
}

impl<'a> Run<'a> {
    pub(super) fn new(options: &'a RunnerOptions) -> Self {
        let (sender, receiver) = mpsc::channel(CHANNEL_LINES);
        Run {
            options,
            vars: Variables::default(),
            conns: HashMap::new(),
            names: HashMap::new(),
            next_conn_id: 1,
            sender,
            receiver,
            transcript: Transcript::new(options.secrets()),
            positions: Vec::new(),
            calls_made: 0,
            truth: None,
            truth_origin: (0.0, 0.0, 0.0),
            truth_reported: 0,
            truth_scene_set: false,
        }
    }

    /// The failure at the current position.
    fn failure(&self, reason: String) -> Failure {
        if self.positions.is_empty() {
            return Failure { step: None, label: Some("opening connection 'main'".into()), reason };
        }
        let step =
            self.positions.iter().map(|p| (p.index + 1).to_string()).collect::<Vec<_>>().join(".");
        let labels: Vec<&str> = self.positions.iter().filter_map(|p| p.label.as_deref()).collect();
        let label = (!labels.is_empty()).then(|| labels.join(" › "));
        let repetitions: Vec<String> = self
            .positions
            .iter()
            .filter_map(|p| p.repetition.map(|(i, n)| format!("repetition {i} of {n}")))
            .collect();
        let reason = if repetitions.is_empty() {
            reason
        } else {
            format!("({}) {reason}", repetitions.join(", "))
        };
        Failure { step: Some(step), label, reason }
    }

    async fn scenario(&mut self, scenario: &Scenario) -> Result<(), String> {
        let token = self.options.admin.value.clone();
        self.open("main", token.clone()).await?;
        if scenario.session {
            let init = self
                .handshake(
                    "main",
                    token.as_deref(),
                    None,
                    None,
                    Duration::from_secs_f64(super::scenario::DEFAULT_WITHIN_S),
                )
                .await?;
            self.set_connection_vars("main", token.as_deref(), Some(&init));
        } else {
            self.set_connection_vars("main", token.as_deref(), None);
        }
        if self.truth.is_some() {
            self.start_truth(scenario.truth.as_ref()).await?;
        }
        self.steps(&scenario.steps, None).await?;
        if self.truth.is_some() {
            // The invariants keep being judged while the robot settles.
            let settle =
                scenario.truth.as_ref().map_or(super::scenario::DEFAULT_SETTLE_S, |t| t.settle_s);
            self.positions.push(Position {
                index: scenario.steps.len(),
                label: Some("after the last step, while the robot settles".into()),
                repetition: None,
            });
            let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(settle);
            while self.pump_until(deadline).await? {}
            self.check_truth()?;
            // No sample judged is no verdict: a silent simulator passes nothing.
            if self
                .truth
                .as_ref()
                .and_then(|truth| truth.figures())
                .is_some_and(|figures| figures.samples == 0)
            {
                return Err("ground truth: not one sample was judged during the scenario (the simulator sent none after the first step)".into());
            }
            self.positions.pop();
        }
        Ok(())
    }

    // ----- ground truth ------------------------------------------------

    /// Sets the scene, then judges every sample from there.
    async fn start_truth(&mut self, spec: Option<&TruthSpec>) -> Result<(), String> {
        let client = self.truth.as_ref().expect("checked");
        let scene_seq = match spec.and_then(|s| s.scene.as_ref()) {
            Some(scene) => {
                let scene = self.vars.substitute(scene).map_err(|e| format!("truth.scene: {e}"))?;
                self.truth_scene_set = true;
                Some(
                    client
                        .command(&json!({ "scene": scene }), TRUTH_WAIT)
                        .await
                        .map_err(|e| format!("setting the scene: {e}"))?,
                )
            }
            None => None,
        };
        if scene_seq.is_some() {
            // A scene that moves the robot is an odometry jump to the bridge
            // (sim/README.md): let it see it (and forget what it remembered)
            // before the first step, not during it.
            tokio::time::sleep(SCENE_SETTLE).await;
        }
        let (_, sample) = match scene_seq {
            Some(seq) => client.sample_at_least(seq, TRUTH_WAIT).await?,
            None => client.next_sample(TRUTH_WAIT).await?,
        };
        self.truth_origin = (sample.base.x, sample.base.y, sample.base.yaw);
        let invariants = match spec {
            Some(spec) => self.invariants(spec, (sample.base.x, sample.base.y))?,
            None => Invariants::default(),
        };
        self.truth.as_ref().expect("checked").judge(invariants);
        self.transcript.note(format!(
            "truth: judging from seq {} (robot at x {:.3}, y {:.3}, yaw {:.1} deg)",
            sample.seq,
            sample.base.x,
            sample.base.y,
            sample.base.yaw.to_degrees()
        ));
        Ok(())
    }

    /// A scenario's `truth.always`, with its variables resolved.
    fn invariants(&self, spec: &TruthSpec, _start: (f64, f64)) -> Result<Invariants, String> {
        let always = &spec.always;
        let number = |value: &Value, what: &str| -> Result<f64, String> {
            let resolved = self.vars.substitute(value).map_err(|e| format!("{what}: {e}"))?;
            resolved.as_f64().ok_or_else(|| format!("{what} must be a number, got {resolved}"))
        };
        let mut invariants = Invariants {
            no_contact: always.no_contact,
            contact_allowed_with: always.contact_allowed_with.clone(),
            clearance_tol_m: always.clearance_tol_m.unwrap_or(DEFAULT_CLEARANCE_TOL_M),
            joint_speed_factor: always.joint_speed_factor,
            joint_demand_factor: always.joint_demand_factor,
            ..Invariants::default()
        };
        for (object, minimum) in &always.min_clearance_m {
            invariants.min_clearance_m.insert(
                object.clone(),
                number(minimum, &format!("truth.always.min_clearance_m.{object}"))?,
            );
        }
        if always.base_limits {
            let limit = |path: &str| -> Result<f64, String> {
                self.vars
                    .get(&format!("manifest.limits.{path}"))
                    .and_then(Value::as_f64)
                    .ok_or_else(|| {
                        format!(
                            "truth.always.base_limits: the manifest has no number at limits.{path}"
                        )
                    })
            };
            invariants.max_linear_mps = Some(limit("base.max_linear_mps")?);
            invariants.max_angular_radps = Some(limit("base.max_angular_radps")?);
            invariants.max_linear_accel_mps2 = Some(limit("base.max_linear_accel_mps2")?);
            invariants.max_angular_accel_radps2 = Some(limit("base.max_angular_accel_radps2")?);
            invariants.max_linear_decel_mps2 = Some(limit("safety.emergency_decel_mps2")?);
        }
        Ok(invariants)
    }

    /// Fails the running step with the first violation not yet reported.
    fn check_truth(&mut self) -> Result<(), String> {
        let Some(client) = &self.truth else { return Ok(()) };
        let violations = client.violations();
        if violations.len() > self.truth_reported {
            let more = violations.len() - self.truth_reported - 1;
            let first = &violations[self.truth_reported];
            self.truth_reported = violations.len();
            let others = if more > 0 {
                format!(
                    " (and {more} more: {})",
                    violations[violations.len() - more..]
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            } else {
                String::new()
            };
            return Err(format!("ground truth: {first}{others}"));
        }
        if let Some(why) = client.closed() {
            return Err(format!("ground truth: the channel closed ({why})"));
        }
        Ok(())
    }

    /// The figures and violations, and the world back as it was (when a scene was set).
    async fn finish_truth(&mut self) -> Option<Value> {
        let client = self.truth.take()?;
        let judge = client.take_judge();
        if self.truth_scene_set {
            if let Err(e) = client.command(&json!({ "reset_world": true }), TRUTH_WAIT).await {
                eprintln!("[aicc-conformance] resetting the simulated world after a scene: {e}");
            }
        }
        let judge = judge?;
        let mut figures = judge.figures.to_json();
        figures["violations"] =
            json!(judge.violations.iter().map(|v| v.to_string()).collect::<Vec<_>>());
        figures["summary"] = json!(judge.figures.summary());
        Some(figures)
    }

    /// Waits for a ground-truth sample newer than the step that matches.
    async fn truth_expect(&mut self, step: &Step, within: Duration) -> Result<(), String> {
        let matcher = step.truth_expect.as_ref().expect("action");
        if let Some(problem) = matcher::unresolved(matcher, &self.vars) {
            return Err(problem);
        }
        let client = self.truth.as_ref().ok_or("truth_expect needs the ground truth")?;
        let mut seen = client.latest().map_or(0, |(_, s)| s.seq);
        let deadline = tokio::time::Instant::now() + within;
        let mut nearest: Option<(Mismatch, Value)> = None;
        loop {
            let client = self.truth.as_ref().expect("checked");
            for (raw, sample) in client.since(seen) {
                seen = sample.seq;
                let view = judge::view(&client.hello, &raw, &sample, self.truth_origin);
                match matcher::matches(matcher, &view, &self.vars) {
                    Ok(captures) => return self.commit(captures, step, &view),
                    Err(miss) => {
                        if nearest.as_ref().is_none_or(|(n, _)| miss.depth() >= n.depth()) {
                            nearest = Some((miss, view));
                        }
                    }
                }
            }
            if let Some(why) = client.closed() {
                return Err(format!("ground truth: the channel closed ({why})"));
            }
            if tokio::time::Instant::now() >= deadline {
                let shown = match nearest {
                    Some((miss, view)) => {
                        format!("; nearest: {} — {miss}", show(&brief_view(&view)))
                    }
                    None => "; no sample came".into(),
                };
                return Err(format!(
                    "no ground-truth sample matched within {:.1} s{shown}",
                    within.as_secs_f64()
                ));
            }
            let poll = (tokio::time::Instant::now() + TRUTH_POLL).min(deadline);
            while self.pump_until(poll).await? {}
        }
    }

    // ----- connections -------------------------------------------------

    pub(super) async fn open(&mut self, name: &str, token: Option<String>) -> Result<(), String> {
        if let Some(token) = &token {
            self.transcript.add_secret(token);
        }
        if self.conns.get(name).is_some_and(|c| c.closed.is_none()) {
            return Err(format!("connection '{name}' is already open"));
        }
        let id = self.next_conn_id;
        self.next_conn_id += 1;
        let connection = Connection::open(
            &self.options.endpoint,
            id,
            self.options.max_line_bytes,
            self.sender.clone(),
        )
        .await
        .map_err(|e| e.to_string())?;
        self.transcript.note(format!("{name}: connected to {}", self.options.endpoint.describe()));
        self.names.insert(id, name.to_string());
        self.conns.insert(name.to_string(), Conn::new(connection));
        Ok(())
    }

    /// `${name}` (and, for main, the top-level variables) after a connect.
    fn set_connection_vars(&mut self, name: &str, token: Option<&str>, init: Option<&Value>) {
        let auth = token.map_or(Value::Null, |t| json!({ "token": t }));
        let session_id = init.and_then(|i| i.get("session_id")).cloned().unwrap_or(Value::Null);
        let tools: Map<String, Value> = init
            .and_then(|i| i.get("tools"))
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| Some((t.get("id")?.as_str()?.to_string(), t.clone())))
                    .collect()
            })
            .unwrap_or_default();
        let manifest = init.cloned().unwrap_or(Value::Null);
        if name == "main" {
            self.vars.set("session_id", session_id.clone());
            self.vars.set("manifest", manifest.clone());
            self.vars.set("tools", Value::Object(tools.clone()));
            self.vars.set("auth", auth.clone());
        }
        self.vars.set(
            name,
            json!({ "session_id": session_id, "manifest": manifest, "tools": tools, "auth": auth }),
        );
    }

    fn conn(&mut self, name: &str) -> Result<&mut Conn, String> {
        self.conns
            .get_mut(name)
            .ok_or_else(|| format!("connection '{name}' is not open (open it with connect)"))
    }

    /// Takes in one report from a reader, checking the line.
    fn ingest(&mut self, tagged: Tagged) -> Result<(), String> {
        let Some(name) = self.names.get(&tagged.conn_id).cloned() else { return Ok(()) };
        let Some(conn) = self.conns.get_mut(&name) else { return Ok(()) };
        if conn.connection.id != tagged.conn_id {
            return Ok(());
        }
        match tagged.incoming {
            Incoming::Line(line) => {
                self.transcript.record(&name, Direction::Received, &line);
                let message = conn.checker.check(&line).map_err(|reason| {
                    format!("the bridge broke the protocol on '{name}': {reason}")
                })?;
                if let Some(position) =
                    echo_of_runner_heartbeat(&message, &conn.awaited_heartbeat_echoes)
                {
                    conn.awaited_heartbeat_echoes.remove(position);
                    return Ok(());
                }
                if let Some((message_id, answer)) = heartbeat_answer(&message) {
                    // A conformant agent answers (AICC §8); the bridge's
                    // heartbeat still stays for the scenario's expects.
                    if conn.owed_heartbeat_answers.len() < MAX_OWED_HEARTBEAT_ANSWERS {
                        conn.owed_heartbeat_answers.push_back(answer);
                        if conn.awaited_heartbeat_echoes.len() == MAX_AWAITED_HEARTBEAT_ECHOES {
                            conn.awaited_heartbeat_echoes.pop_front();
                        }
                        conn.awaited_heartbeat_echoes.push_back(message_id);
                    }
                }
                conn.pending_bytes += line.len();
                conn.pending.push_back((message, line.len()));
                if conn.pending.len() > MAX_PENDING_MESSAGES
                    || conn.pending_bytes > MAX_PENDING_BYTES
                {
                    return Err(format!("connection '{name}' holds {} unconsumed messages ({} bytes), over the runner's bound: the bridge floods it, or the scenario lacks expects", conn.pending.len(), conn.pending_bytes));
                }
                Ok(())
            }
            Incoming::Oversized { limit_bytes } => {
                conn.closed = Some("the runner stopped reading".into());
                self.transcript.note(format!("{name}< (a line longer than {limit_bytes} bytes)"));
                Err(format!("the bridge broke the protocol on '{name}': it sent a line longer than {limit_bytes} bytes (--max-line-bytes)"))
            }
            Incoming::Closed { error, partial_bytes } => {
                let how =
                    error.map_or("by the bridge".to_string(), |e| format!("with an error: {e}"));
                self.transcript.note(format!("{name}: closed {how}"));
                conn.closed = Some(how);
                if partial_bytes > 0 {
                    return Err(format!("the bridge broke the protocol on '{name}': the connection ended inside a line ({partial_bytes} bytes without LF)"));
                }
                Ok(())
            }
        }
    }

    /// Takes in what arrives until `deadline` (checking every line).
    async fn pump_until(&mut self, deadline: tokio::time::Instant) -> Result<bool, String> {
        self.answer_heartbeats().await?;
        match tokio::time::timeout_at(deadline, self.receiver.recv()).await {
            Ok(Some(tagged)) => {
                self.ingest(tagged)?;
                Ok(true)
            }
            // The run holds a sender: the channel never ends.
            Ok(None) | Err(_) => Ok(false),
        }
    }

    /// Takes in what has already arrived, without waiting.
    fn drain_ready(&mut self) -> Result<(), String> {
        while let Ok(tagged) = self.receiver.try_recv() {
            self.ingest(tagged)?;
        }
        Ok(())
    }

    /// Searches `conn`'s unconsumed messages, oldest first, then what
    /// arrives until `within` has passed, for one that `accept`s.
    pub(super) async fn find(
        &mut self,
        conn: &str,
        within: Duration,
        mut accept: impl FnMut(&Value, &Variables) -> Result<Captures, Mismatch>,
    ) -> Result<Found, String> {
        let deadline = tokio::time::Instant::now() + within;
        let mut scanned = 0;
        let mut nearest: Option<(Mismatch, Value)> = None;
        loop {
            self.drain_ready()?;
            let vars = &self.vars;
            let state = self
                .conns
                .get(conn)
                .ok_or_else(|| format!("connection '{conn}' is not open (open it with connect)"))?;
            for (index, (message, _)) in state.pending.iter().enumerate().skip(scanned) {
                match accept(message, vars) {
                    Ok(captures) => return Ok(Found::Match(index, captures)),
                    Err(miss) => {
                        if nearest.as_ref().is_none_or(|(n, _)| miss.depth() >= n.depth()) {
                            nearest = Some((miss, message.clone()));
                        }
                    }
                }
            }
            scanned = state.pending.len();
            if let Some(how) = &state.closed {
                return Ok(Found::Closed { how: how.clone(), nearest });
            }
            if !self.pump_until(deadline).await? {
                return Ok(Found::TimedOut { nearest });
            }
        }
    }

    /// Removes and returns the message at `index` of `conn`'s unconsumed ones.
    pub(super) fn consume(&mut self, conn: &str, index: usize) -> Value {
        let state = self.conns.get_mut(conn).expect("found in it");
        let (message, bytes) = state.pending.remove(index).expect("found at this index");
        state.pending_bytes = state.pending_bytes.saturating_sub(bytes);
        message
    }

    /// Waits for a message matching `matcher` and consumes it.
    async fn expect(
        &mut self,
        conn: &str,
        matcher: &Value,
        within: Duration,
        what: &str,
    ) -> Result<(Value, Captures), String> {
        if let Some(problem) = matcher::unresolved(matcher, &self.vars) {
            return Err(problem);
        }
        match self
            .find(conn, within, |message, vars| matcher::matches(matcher, message, vars))
            .await?
        {
            Found::Match(index, captures) => Ok((self.consume(conn, index), captures)),
            other => Err(describe_found_failure(what, conn, other, within)),
        }
    }

    async fn send_bytes(
        &mut self,
        conn: &str,
        bytes: &[u8],
        within: Duration,
    ) -> Result<(), String> {
        // What the runner owes goes first, in the order it became due.
        self.answer_heartbeats().await?;
        self.transcript.record(conn, Direction::Sent, bytes);
        self.conn(conn)?;
        self.write_line_reading(conn, bytes, within).await?
    }

    /// Writes a line to `conn`, taking in (and checking) what arrives
    /// meanwhile: a bridge that stops reading until its replies are read
    /// must not deadlock a long write. The outer error is a protocol
    /// violation in what arrived; the inner one, the write's failure.
    async fn write_line_reading(
        &mut self,
        conn: &str,
        bytes: &[u8],
        within: Duration,
    ) -> Result<Result<(), String>, String> {
        let mut held = Vec::new();
        // Bounded in bytes too: each held line may be --max-line-bytes long.
        let mut held_bytes = 0usize;
        let written = {
            let Run { conns, receiver, .. } = &mut *self;
            let state = conns.get_mut(conn).expect("checked above");
            let write = tokio::time::timeout(within, state.connection.write_line(bytes));
            tokio::pin!(write);
            loop {
                tokio::select! {
                    written = &mut write => break written,
                    Some(tagged) = receiver.recv(), if held.len() < MAX_PENDING_MESSAGES && held_bytes <= MAX_PENDING_BYTES => {
                        if let Incoming::Line(line) = &tagged.incoming {
                            held_bytes += line.len();
                        }
                        held.push(tagged);
                    }
                }
            }
        };
        for tagged in held {
            self.ingest(tagged)?;
        }
        Ok(match written {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(format!("writing to '{conn}': {error}")),
            Err(_) => Err(format!(
                "writing to '{conn}' did not finish within {:.1} s (the bridge stopped reading)",
                within.as_secs_f64()
            )),
        })
    }

    /// Writes the answers owed to the bridge's heartbeats, on every
    /// connection still open. One that cannot be written is noted, not a
    /// failure: the bridge may just have closed that connection.
    async fn answer_heartbeats(&mut self) -> Result<(), String> {
        let owed: Vec<(String, Vec<u8>)> = self
            .conns
            .iter_mut()
            .filter(|(_, c)| c.closed.is_none())
            .flat_map(|(name, c)| {
                c.owed_heartbeat_answers
                    .drain(..)
                    .map(|answer| (name.clone(), answer))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (name, answer) in owed {
            if self.conns.get(&name).is_none_or(|c| c.closed.is_some()) {
                continue;
            }
            self.transcript.record(&name, Direction::Sent, &answer);
            if let Err(error) =
                self.write_line_reading(&name, &answer, HEARTBEAT_ANSWER_WRITE).await?
            {
                self.transcript.note(format!(
                    "{name}: the answer to the bridge's heartbeat was not written: {error}"
                ));
            }
        }
        Ok(())
    }

    /// Closes every connection still open and waits (at most
    /// `close_wait`) for the bridge to close its end: the bridge has then
    /// ended what those connections held. What arrives meanwhile is kept
    /// in the transcript, not checked: the scenario is over.
    pub(super) async fn close_connections(&mut self) {
        let deadline = tokio::time::Instant::now() + self.options.close_wait;
        let mut closing: Vec<String> = self
            .conns
            .iter()
            .filter(|(_, c)| c.closed.is_none())
            .map(|(name, _)| name.clone())
            .collect();
        closing.sort();
        for name in &closing {
            let conn = self.conns.get_mut(name).expect("listed");
            if let Ok(Err(error)) | Err(error) =
                tokio::time::timeout_at(deadline, conn.connection.shutdown())
                    .await
                    .map_err(|_| std::io::Error::other("timed out"))
            {
                self.transcript.note(format!("{name}: closing: {error}"));
            } else {
                self.transcript.note(format!("{name}: closed by the runner (end of the scenario)"));
            }
        }
        while closing.iter().any(|name| self.conns[name].closed.is_none()) {
            let Ok(Some(tagged)) = tokio::time::timeout_at(deadline, self.receiver.recv()).await
            else {
                break;
            };
            let Some(name) = self.names.get(&tagged.conn_id).cloned() else { continue };
            let Some(conn) =
                self.conns.get_mut(&name).filter(|c| c.connection.id == tagged.conn_id)
            else {
                continue;
            };
            match tagged.incoming {
                Incoming::Line(line) => self.transcript.record(&name, Direction::Received, &line),
                Incoming::Oversized { .. } => {
                    conn.closed = Some("the runner stopped reading".into())
                }
                Incoming::Closed { .. } => conn.closed = Some("by the bridge".into()),
            }
        }
        for name in &closing {
            if self.conns[name].closed.is_none() {
                self.transcript.note(format!(
                    "{name}: the bridge had not closed it {:.1} s after the runner did; dropped",
                    self.options.close_wait.as_secs_f64()
                ));
            }
        }
        self.conns.clear();
    }

    /// Forgets what `conn` received and no expect took.
    pub(super) fn discard_pending(&mut self, conn: &str) {
        if let Some(state) = self.conns.get_mut(conn) {
            state.pending.clear();
            state.pending_bytes = 0;
        }
    }

    /// Sends a message, noting a tool_call's call_id for the result checks.
    pub(super) async fn send_message(
        &mut self,
        conn: &str,
        message: &Value,
        within: Duration,
    ) -> Result<(), String> {
        if message.get("type").and_then(Value::as_str) == Some("tool_call") {
            if let Some(call_id) = message.get("call_id").and_then(Value::as_str) {
                self.conn(conn)?.checker.note_call_sent(call_id);
            }
        }
        let bytes = serde_json::to_vec(message).expect("JSON values serialize");
        self.send_bytes(conn, &bytes, within).await
    }

    /// `protocol` and a fresh `message_id` unless given (null removes them).
    pub(super) fn envelope(mut message: Map<String, Value>) -> Value {
        for (key, default) in [
            ("protocol", json!("aicc/0.1")),
            ("message_id", json!(uuid::Uuid::new_v4().to_string())),
        ] {
            match message.get(key) {
                None => {
                    message.insert(key.to_string(), default);
                }
                Some(Value::Null) => {
                    message.remove(key);
                }
                Some(_) => {}
            }
        }
        Value::Object(message)
    }

    /// Opens a session on `conn`: with a token, a manifest_request carrying
    /// it; without, the bridge's own session_init (or a manifest_request
    /// when none comes within 2 s). Returns the session_init.
    pub(super) async fn handshake(
        &mut self,
        conn: &str,
        token: Option<&str>,
        agent_model: Option<&Value>,
        subscribe: Option<&[String]>,
        within: Duration,
    ) -> Result<Value, String> {
        let is_init_or_error = |message: &Value, _: &Variables| match message
            .get("type")
            .and_then(Value::as_str)
        {
            Some("session_init") | Some("error") => Ok(Vec::new()),
            _ => Err(Mismatch { path: "type".into(), reason: "not session_init or error".into() }),
        };
        let mut request = Map::new();
        request.insert("type".into(), json!("manifest_request"));
        if let Some(model) = agent_model {
            request.insert(
                "agent_model".into(),
                self.vars.substitute(model).map_err(|e| e.to_string())?,
            );
        }
        if let Some(topics) = subscribe {
            request.insert("subscribe".into(), json!(topics));
        }
        let adjust = request.len() > 1;
        let init = match token {
            Some(token) => {
                request.insert("auth".into(), json!({ "token": token }));
                self.send_message(conn, &Self::envelope(request), within).await?;
                self.find_handshake_reply(conn, within, is_init_or_error).await?
            }
            None => {
                match self.find(conn, UNSOLICITED_INIT_WAIT.min(within), is_init_or_error).await? {
                    Found::Match(index, _) => {
                        let init = self.consume(conn, index);
                        check_handshake_reply(&init)?;
                        if adjust {
                            // Subscriptions or agent model on top of the bridge's own session.
                            let message_id = uuid::Uuid::new_v4().to_string();
                            request.insert("message_id".into(), json!(message_id));
                            self.send_message(conn, &Self::envelope(request), within).await?;
                            let reply = json!({ "in_reply_to": message_id });
                            self.find_handshake_reply(conn, within, move |m, v| {
                                matcher::matches(&reply, m, v)
                                    .and_then(|c| is_init_or_error(m, v).map(|_| c))
                            })
                            .await?
                        } else {
                            init
                        }
                    }
                    Found::Closed { how, .. } => {
                        return Err(format!("handshake: connection '{conn}' was closed ({how})"))
                    }
                    Found::TimedOut { .. } => {
                        self.send_message(conn, &Self::envelope(request), within).await?;
                        self.find_handshake_reply(conn, within, is_init_or_error).await?
                    }
                }
            }
        };
        Ok(init)
    }

    async fn find_handshake_reply(
        &mut self,
        conn: &str,
        within: Duration,
        accept: impl FnMut(&Value, &Variables) -> Result<Captures, Mismatch>,
    ) -> Result<Value, String> {
        match self.find(conn, within, accept).await? {
            Found::Match(index, _) => {
                let reply = self.consume(conn, index);
                check_handshake_reply(&reply)?;
                Ok(reply)
            }
            other => Err(format!(
                "handshake: {}",
                describe_found_failure("session_init", conn, other, within)
            )),
        }
    }

    // ----- steps -------------------------------------------------------

    fn steps<'s>(
        &'s mut self,
        steps: &'s [Step],
        repetition: Option<(u64, u64)>,
    ) -> BoxFuture<'s, Result<(), String>> {
        async move {
            for (index, step) in steps.iter().enumerate() {
                self.positions.push(Position { index, label: step.name.clone(), repetition });
                self.step(step).await?;
                // What the ground truth saw during the step fails it.
                self.check_truth()?;
                self.positions.pop();
            }
            Ok(())
        }
        .boxed()
    }

    async fn step(&mut self, step: &Step) -> Result<(), String> {
        let conn = step.conn.clone().unwrap_or_else(|| "main".to_string());
        let within = step.within();
        match step.action() {
            Action::Connect => self.connect(step.connect.as_ref().expect("action"), within).await,
            Action::Disconnect => {
                let name = step.disconnect.as_deref().expect("action");
                self.conns
                    .remove(name)
                    .ok_or_else(|| format!("disconnect: connection '{name}' is not open"))?;
                self.transcript.note(format!("{name}: closed by the runner"));
                Ok(())
            }
            Action::Send => {
                let message = self
                    .vars
                    .substitute(step.send.as_ref().expect("action"))
                    .map_err(|e| e.to_string())?;
                let Value::Object(message) = message else {
                    unreachable!("validated as an object")
                };
                self.send_message(&conn, &Self::envelope(message), within).await
            }
            Action::SendRaw => {
                let text = step.send_raw.as_deref().expect("action");
                // A raw line that happens to be a tool_call may be answered.
                if let Ok(message) = serde_json::from_str::<Value>(text) {
                    if message.get("type").and_then(Value::as_str) == Some("tool_call") {
                        if let Some(call_id) = message.get("call_id").and_then(Value::as_str) {
                            self.conn(&conn)?.checker.note_call_sent(call_id);
                        }
                    }
                }
                self.send_bytes(&conn, text.as_bytes(), within).await
            }
            Action::SendBytesHex => {
                let bytes =
                    super::scenario::parse_hex(step.send_bytes_hex.as_deref().expect("action"))
                        .map_err(|e| e.to_string())?;
                self.send_bytes(&conn, &bytes, within).await
            }
            Action::SendOversized => {
                let bytes = oversized_line(step.send_oversized.as_ref().expect("action").bytes);
                self.send_bytes(&conn, &bytes, within).await
            }
            Action::Call => self.call(&conn, step, within).await,
            Action::Expect => {
                let (message, captures) = self
                    .expect(&conn, step.expect.as_ref().expect("action"), within, "the expectation")
                    .await?;
                self.commit(captures, step, &message)
            }
            Action::ExpectEvent => {
                let spec = step.expect_event.as_ref().expect("action");
                let mut matcher = json!({ "type": "event", "topic": spec.topic });
                if let Some(payload) = &spec.payload {
                    matcher["payload"] = payload.clone();
                }
                let (message, captures) = self
                    .expect(&conn, &matcher, within, &format!("an event '{}'", spec.topic))
                    .await?;
                self.commit(captures, step, &message)
            }
            Action::ExpectNone => {
                let matcher = step.expect_none.as_ref().expect("action");
                if let Some(problem) = matcher::unresolved(matcher, &self.vars) {
                    return Err(problem);
                }
                let window = Duration::from_secs_f64(step.for_s.unwrap_or(DEFAULT_FOR_S));
                match self
                    .find(&conn, window, |message, vars| matcher::matches(matcher, message, vars))
                    .await?
                {
                    Found::Match(index, _) => {
                        let message = &self.conns[&conn].pending[index].0;
                        Err(format!("a message that must not come did: {}", show(message)))
                    }
                    Found::TimedOut { .. } => Ok(()),
                    // A closed connection brings nothing more; a little of the
                    // window may remain, which is fine.
                    Found::Closed { .. } => Ok(()),
                }
            }
            Action::ExpectClosed => {
                let wanted = step.expect_closed.expect("action");
                if wanted {
                    self.expect_closed(&conn, within).await
                } else {
                    self.drain_ready()?;
                    match &self.conn(&conn)?.closed {
                        Some(how) => {
                            Err(format!("connection '{conn}' was closed ({how}); expected it open"))
                        }
                        None => Ok(()),
                    }
                }
            }
            Action::Wait => {
                let deadline = tokio::time::Instant::now()
                    + Duration::from_secs_f64(step.wait_s.expect("action"));
                while self.pump_until(deadline).await? {}
                Ok(())
            }
            Action::TruthExpect => self.truth_expect(step, within).await,
            Action::TruthCommand => {
                let command = self
                    .vars
                    .substitute(step.truth_command.as_ref().expect("action"))
                    .map_err(|e| e.to_string())?;
                let client = self.truth.as_ref().ok_or("truth_command needs the ground truth")?;
                let seq = client.command(&command, within).await?;
                self.transcript.note(format!("truth: sent {command}, applied from seq {seq}"));
                Ok(())
            }
            Action::Repeat => {
                let spec = step.repeat.as_ref().expect("action");
                let times = match self.vars.substitute(&spec.times).map_err(|e| e.to_string())? {
                    Value::Number(n) => n.as_u64().filter(|t| *t <= MAX_REPEAT),
                    _ => None,
                }
                .ok_or_else(|| {
                    format!(
                        "repeat.times: {} is not a whole number up to {MAX_REPEAT}",
                        show(&spec.times)
                    )
                })?;
                for repetition in 1..=times {
                    self.steps(&spec.steps, Some((repetition, times))).await?;
                }
                Ok(())
            }
        }
    }

    async fn expect_closed(&mut self, conn: &str, within: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            self.drain_ready()?;
            if self.conn(conn)?.closed.is_some() {
                return Ok(());
            }
            if !self.pump_until(deadline).await? {
                return Err(format!(
                    "connection '{conn}' was still open after {:.1} s",
                    within.as_secs_f64()
                ));
            }
        }
    }

    async fn connect(&mut self, spec: &ConnectSpec, within: Duration) -> Result<(), String> {
        let token = match (&spec.auth, spec.scope) {
            (Some(literal), _) => Some(literal.token.clone()),
            (None, ConnectScope::None) => None,
            (None, ConnectScope::Admin) => self.options.admin.value.clone(),
            (None, ConnectScope::Actuate | ConnectScope::Observe) => {
                let source = if spec.scope == ConnectScope::Actuate {
                    &self.options.actuate
                } else {
                    &self.options.observe
                };
                let scope = if spec.scope == ConnectScope::Actuate { "actuate" } else { "observe" };
                Some(source.value.clone().ok_or_else(|| format!("connect '{}' with scope {scope} needs the environment variable {}, which is not set", spec.name, source.env))?)
            }
        };
        if self.conns.get(&spec.name).is_some_and(|c| c.closed.is_none()) {
            return Err(format!(
                "connect: connection '{}' is already open (disconnect it first)",
                spec.name
            ));
        }
        self.conns.remove(&spec.name);
        tokio::time::timeout(within, self.open(&spec.name, token.clone())).await.map_err(
            |_| format!("connecting '{}' took over {:.1} s", spec.name, within.as_secs_f64()),
        )??;
        if spec.session {
            let init = self
                .handshake(
                    &spec.name,
                    token.as_deref(),
                    spec.agent_model.as_ref(),
                    spec.subscribe.as_deref(),
                    within,
                )
                .await?;
            self.set_connection_vars(&spec.name, token.as_deref(), Some(&init));
        } else {
            self.set_connection_vars(&spec.name, token.as_deref(), None);
        }
        Ok(())
    }

    async fn call(&mut self, conn: &str, step: &Step, within: Duration) -> Result<(), String> {
        let spec: &CallSpec = step.call.as_ref().expect("action");
        self.calls_made += 1;
        // Unset variables are the scenario's fault, reported as the step's failure.
        let substitute = |value: &Value| self.vars.substitute(value).map_err(|e| e.to_string());
        let substitute_text =
            |text: &str| self.vars.substitute_text(text).map_err(|e| e.to_string());
        let call_id = match &spec.call_id {
            Some(id) => substitute_text(id)?,
            None => format!(
                "conformance-{}-{}",
                self.calls_made,
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
        };
        let mut message = Map::new();
        message.insert("type".into(), json!("tool_call"));
        message.insert("call_id".into(), json!(call_id));
        message.insert("tool".into(), json!(substitute_text(&spec.tool)?));
        message.insert("input".into(), substitute(spec.input.as_ref().unwrap_or(&json!({})))?);
        if let Some(deadline) = &spec.deadline_ms {
            message.insert("deadline_ms".into(), substitute(deadline)?);
        }
        if let Some(key) = &spec.idempotency_key {
            message.insert("idempotency_key".into(), json!(substitute_text(key)?));
        }
        self.vars.set("last_call_id", json!(call_id));
        self.send_message(conn, &Self::envelope(message), within).await?;
        if !spec.wait {
            return Ok(());
        }
        let wanted = json!({ "type": "tool_result", "call_id": call_id });
        let (result, _) = self
            .expect(
                conn,
                &wanted,
                within,
                &format!("the tool_result of call '{call_id}' ({})", spec.tool),
            )
            .await?;
        let ok = result.get("ok") == Some(&Value::Bool(true));
        let outcome = |result: &Value| match result.get("error") {
            Some(error) => format!("it failed: {}", show(error)),
            None => format!("it succeeded: {}", show(result.get("output").unwrap_or(&Value::Null))),
        };
        let (matcher, target, what) = match (&step.expect, &step.expect_ok, &step.expect_error) {
            (Some(m), _, _) => (Some(m), &result, "tool_result"),
            (_, Some(m), _) => {
                if !ok {
                    return Err(format!(
                        "call '{call_id}' ({}) was to succeed, but {}",
                        spec.tool,
                        outcome(&result)
                    ));
                }
                (Some(m), &result["output"], "output")
            }
            (_, _, Some(m)) => {
                if ok {
                    return Err(format!(
                        "call '{call_id}' ({}) was to fail, but {}",
                        spec.tool,
                        outcome(&result)
                    ));
                }
                (Some(m), &result["error"], "error")
            }
            // A call with no expectation must succeed.
            (None, None, None) => {
                if !ok {
                    return Err(format!(
                        "call '{call_id}' ({}) was to succeed, but {}",
                        spec.tool,
                        outcome(&result)
                    ));
                }
                (None, &result, "tool_result")
            }
        };
        let captures = match matcher {
            Some(m) => {
                if let Some(problem) = matcher::unresolved(m, &self.vars) {
                    return Err(problem);
                }
                matcher::matches(m, target, &self.vars).map_err(|miss| {
                    format!(
                        "the {what} of call '{call_id}' ({}) does not match: {miss}; got {}",
                        spec.tool,
                        show(target)
                    )
                })?
            }
            None => Vec::new(),
        };
        self.commit(captures, step, &result)
    }

    /// Stores `$capture`s and the step's `capture:` paths.
    fn commit(&mut self, captures: Captures, step: &Step, message: &Value) -> Result<(), String> {
        for (name, value) in captures {
            self.vars.set(&name, value);
        }
        for (name, path) in step.capture.iter().flatten() {
            let value = lookup(message, path).ok_or_else(|| {
                format!("capture {name}: the matched message has no '{path}': {}", show(message))
            })?;
            self.vars.set(name, value.clone());
        }
        Ok(())
    }
}

/// The answer an agent gives to a heartbeat the bridge sent unasked (one
/// without `in_reply_to`): its message_id and the line.
fn heartbeat_answer(message: &Value) -> Option<(String, Vec<u8>)> {
    if message.get("type").and_then(Value::as_str) != Some("heartbeat")
        || !message.get("in_reply_to").is_none_or(Value::is_null)
    {
        return None;
    }
    let message_id = format!("{HEARTBEAT_ANSWER_PREFIX}{}", uuid::Uuid::new_v4().simple());
    let mut answer =
        json!({ "protocol": "aicc/0.1", "type": "heartbeat", "message_id": message_id });
    if let Some(theirs) = message.get("message_id").filter(|id| id.is_string()) {
        answer["in_reply_to"] = theirs.clone();
    }
    Some((message_id, serde_json::to_vec(&answer).expect("JSON values serialize")))
}

/// Where in `awaited` the heartbeat `message` echoes one of the runner's
/// own heartbeat answers, if it does.
fn echo_of_runner_heartbeat(message: &Value, awaited: &VecDeque<String>) -> Option<usize> {
    if message.get("type").and_then(Value::as_str) != Some("heartbeat") {
        return None;
    }
    let in_reply_to = message.get("in_reply_to").and_then(Value::as_str)?;
    awaited.iter().position(|id| id == in_reply_to)
}

/// The parts of a truth view a person reads in a failure (the whole one
/// lists every joint and object).
fn brief_view(view: &Value) -> Value {
    let mut brief = serde_json::Map::new();
    for key in [
        "seq",
        "sim_time",
        "at_rest",
        "speed_mps",
        "max_joint_speed",
        "travel",
        "clearance_m",
        "contacts",
    ] {
        if let Some(value) = view.get(key) {
            brief.insert(key.into(), value.clone());
        }
    }
    if let Some(base) = view.get("base") {
        brief.insert(
            "base".into(),
            json!({ "x": base.get("x"), "y": base.get("y"), "yaw": base.get("yaw") }),
        );
    }
    Value::Object(brief)
}

/// A handshake answered with an error names it.
fn check_handshake_reply(reply: &Value) -> Result<(), String> {
    if reply.get("type").and_then(Value::as_str) == Some("error") {
        return Err(format!(
            "handshake refused by the bridge: {} {}",
            reply.get("code").and_then(Value::as_str).unwrap_or("?"),
            reply.get("message").and_then(Value::as_str).unwrap_or("")
        ));
    }
    Ok(())
}

/// A heartbeat-shaped JSON line of exactly `bytes` bytes (its padding
/// makes up the length).
pub fn oversized_line(bytes: usize) -> Vec<u8> {
    let head = br#"{"protocol":"aicc/0.1","type":"heartbeat","padding":""#;
    let tail = br#""}"#;
    let padding = bytes.saturating_sub(head.len() + tail.len());
    let mut line = Vec::with_capacity(bytes);
    line.extend_from_slice(head);
    line.resize(head.len() + padding, b'x');
    line.extend_from_slice(tail);
    line
}

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;
