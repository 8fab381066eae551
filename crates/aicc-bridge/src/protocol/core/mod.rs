//! The bridge's protocol core, with no I/O: every connection, session,
//! event ring and the motion lease, driven by lines, timers and tool
//! outcomes with an explicit `now`, answering with [`Output`]s. The TCP
//! shell (src/server) only moves bytes and runs tools.
//!
//! Rules it enforces (AICC 0.1 plus the AI-control contract):
//! - authentication per connection before anything else, when tokens are
//!   configured; a failed attempt may be followed by a good one;
//! - every tool_call checked: known tool, capability (from the token's
//!   scope), availability, rate limit, JSON Schema, unique call_id, bounded
//!   in-flight calls, and the motion lease for movement;
//! - one monotonic tick on every result and event; events kept in a bounded
//!   ring per session with sequence numbers, replayed on `session_resume`
//!   with the number lost to the bound;
//! - heartbeats at a cadence fitted to the declared agent model, dead peers
//!   detached, detached sessions expiring after the resume window.
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::auth::{Scope, Tokens};
use super::catalog::Catalog;
use super::clock::TickClock;
use super::error::{AiccError, ErrorCode};
use super::events::EventRing;
use super::manifest::{ToolClass, ToolDescriptor};
use super::message::{decode, envelope, CallOptions, Correlation, Inbound, Opening};
use super::ratelimit::RateLimiter;

/// A tool's successful outcome, as the tool layer reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSuccess {
    pub output: Value,
    /// Where the data came from (`meta.source`), e.g. the ROS topic.
    pub source: String,
}

/// A connection, as numbered by the shell.
pub type ConnId = u64;

/// Event topics every session is subscribed to unless it says otherwise:
/// the reserved topics of AICC section 6 (but `tick`, which is opt-in) and
/// the bridge's own.
pub const DEFAULT_TOPICS: &[&str] = &["collision", "audio", "state_change", "agent_message", "lease", "command", "governor", "call_aborted"];
/// Every topic a session may subscribe to.
pub const KNOWN_TOPICS: &[&str] = &["tick", "collision", "audio", "state_change", "agent_message", "lease", "command", "governor", "call_aborted", "tool_result"];

/// Tools the core answers itself.
pub const TICK_NOW: &str = "tick_now";
pub const BRIDGE_STATUS: &str = "bridge_status";
pub const CANCEL: &str = "cancel";
pub const MEMORY_QUERY: &str = "memory_query";

/// Episodic memory entries kept per session for `memory_query`.
const MEMORY_CAPACITY: usize = 256;
/// Idempotency keys remembered per session.
const IDEMPOTENCY_CAPACITY: usize = 256;
/// Longest string kept in a memory entry (images are summarised, not kept).
const MEMORY_STRING_LIMIT: usize = 200;

/// How the tick advances (AICC section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TickMode {
    /// At tick_rate_hz.
    Fixed,
    /// Once per tool call and per event.
    Event,
    /// At tick_rate_hz, plus one per `tick_now` call.
    Hybrid,
}

impl TickMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TickMode::Fixed => "fixed",
            TickMode::Event => "event",
            TickMode::Hybrid => "hybrid",
        }
    }
}

/// Settings of the core (from the bridge configuration).
#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub tick_rate_hz: f64,
    pub tick_mode: TickMode,
    pub world_name: String,
    pub max_calls_in_flight: usize,
    pub event_ring_capacity: usize,
    /// How long a detached session may be resumed.
    pub resume_window: Duration,
    /// Heartbeat interval when the agent declares no model class.
    pub heartbeat_interval: Duration,
    /// A peer silent for this many heartbeat intervals is taken as dead.
    pub dead_peer_intervals: u32,
    /// The motion lease lapses after this long without actuator activity.
    pub lease_timeout: Duration,
    pub tokens: Tokens,
    /// Scope of sessions when no tokens are configured (loopback only).
    pub unauthenticated_scope: Scope,
    /// Failed authentication attempts before the connection is closed.
    pub max_auth_failures: u32,
    /// The safety limits in force, stated in the manifest (session
    /// metadata: what the governor allows, not the state of the world).
    pub limits: Value,
}

/// What the core asks the shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Write to a connection. Replies are never dropped; events may be
    /// dropped (and counted) by a full outbound queue.
    Send { conn: ConnId, message: Value, droppable: bool },
    /// Run a tool; report with [`Core::on_tool_finished`]. `deadline` is
    /// the agent's own (`deadline_ms`), on top of the bridge's tool timeout.
    Execute { conn: ConnId, session: String, call_id: String, tool: String, input: Map<String, Value>, deadline: Option<Duration> },
    /// Stop running a call (cancelled): drop its task, which stops what it moved.
    Abort { conn: ConnId, call_id: String },
    /// Close the connection once what was sent before is written.
    Close { conn: ConnId },
    /// The motion lease was released (or lapsed): stop the robot's motion.
    LeaseReleased { session: String },
}

/// Event batching and heartbeat cadence fitted to the agent's model class
/// (AICC section 7): slower agents get fewer, fuller messages.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentModel {
    pub class: String,
    pub event_batch: Duration,
    pub heartbeat_interval: Duration,
}

impl AgentModel {
    pub fn for_class(class: &str) -> Option<Self> {
        let (batch_ms, heartbeat_s) = match class {
            "edge_small" => (0, 5),
            "edge_medium" => (100, 10),
            "cloud_medium" => (250, 15),
            "cloud_large" => (500, 30),
            _ => return None,
        };
        Some(Self { class: class.into(), event_batch: Duration::from_millis(batch_ms), heartbeat_interval: Duration::from_secs(heartbeat_s) })
    }
}

struct InFlight {
    started: Instant,
    tool: &'static str,
    conn: ConnId,
    /// Extra input fields dropped from a non-strict tool's input.
    ignored_fields: Vec<String>,
    /// An actuator call: it gets `command` lifecycle events.
    command: bool,
    idempotency_key: Option<String>,
}

/// What an idempotency key stands for.
enum Idempotent {
    Running { call_id: String },
    Done { result: Value },
}

/// One entry of a session's episodic memory.
#[derive(Debug, Clone)]
struct MemoryEntry {
    tick: u64,
    at: Instant,
    kind: &'static str,
    /// Event topic or tool id.
    name: String,
    /// Compact JSON text: a tree of `Value`s costs several times the text,
    /// and sessions keep hundreds of entries.
    summary: String,
}

struct SessionState {
    scope: Scope,
    conn: Option<ConnId>,
    detached_at: Option<Instant>,
    subscriptions: BTreeSet<String>,
    agent_model: Option<AgentModel>,
    events: EventRing,
    limiter: RateLimiter,
    /// Ordered by call_id, so that aborting them all is done in a
    /// reproducible order.
    in_flight: BTreeMap<String, InFlight>,
    /// Events waiting for the batch window to close.
    batch: Vec<Value>,
    batch_started: Option<Instant>,
    last_tick_event: u64,
    memory: VecDeque<MemoryEntry>,
    idempotency: HashMap<String, Idempotent>,
    idempotency_order: VecDeque<String>,
}

struct ConnState {
    session: Option<String>,
    /// Granted scope once authenticated (or at once without tokens).
    scope: Option<Scope>,
    auth_failures: u32,
    last_inbound: Instant,
    last_heartbeat_sent: Instant,
}

struct Lease {
    session: String,
    renewed: Instant,
}

/// Operator-facing counters.
#[derive(Debug, Default, Clone)]
struct Counters {
    connections_total: u64,
    tool_calls: u64,
    tool_errors: u64,
    protocol_errors: u64,
}

pub struct Core {
    config: CoreConfig,
    catalog: Arc<Catalog>,
    clock: TickClock,
    /// Ticks added by events (event mode) or `tick_now` (hybrid mode).
    extra_ticks: u64,
    /// Last tick handed out: ticks never go backwards on the wire.
    last_tick: u64,
    // Ordered maps: what is sent to several sessions or connections goes
    // out in an order that follows from the input alone.
    sessions: BTreeMap<String, SessionState>,
    connections: BTreeMap<ConnId, ConnState>,
    lease: Option<Lease>,
    /// Tools whose data source is missing now (e.g. a dead sensor topic).
    unavailable: BTreeMap<String, String>,
    last_error: Option<String>,
    counters: Counters,
    /// Transport facts the shell reports, for operators' status.
    listener: Option<String>,
    max_connections: usize,
    outbound: Vec<(ConnId, usize)>,
    outbound_max: usize,
}

fn short_id(session: &str) -> &str {
    &session[..session.len().min(8)]
}

impl Core {
    pub fn new(config: CoreConfig, catalog: Arc<Catalog>, start: Instant) -> Self {
        Self {
            clock: TickClock::new(start, config.tick_rate_hz),
            config,
            catalog,
            extra_ticks: 0,
            last_tick: 0,
            sessions: BTreeMap::new(),
            connections: BTreeMap::new(),
            lease: None,
            unavailable: BTreeMap::new(),
            last_error: None,
            counters: Counters::default(),
            listener: None,
            max_connections: 0,
            outbound: Vec::new(),
            outbound_max: 0,
        }
    }

    pub fn auth_required(&self) -> bool {
        !self.config.tokens.is_empty()
    }

    /// The current tick: monotonic whatever the mode.
    pub fn tick(&mut self, now: Instant) -> u64 {
        let base = match self.config.tick_mode {
            TickMode::Fixed | TickMode::Hybrid => self.clock.tick(now),
            TickMode::Event => 0,
        };
        self.last_tick = self.last_tick.max(base + self.extra_ticks);
        self.last_tick
    }

    fn advance_event_tick(&mut self) {
        if self.config.tick_mode == TickMode::Event {
            self.extra_ticks += 1;
        }
    }

    // ----- connections -------------------------------------------------

    /// A new connection. Without tokens it gets a session at once;
    /// with tokens it must authenticate first, and is sent nothing until then.
    pub fn on_connect(&mut self, conn: ConnId, now: Instant) -> Vec<Output> {
        let scope = (!self.auth_required()).then_some(self.config.unauthenticated_scope);
        self.open_connection(conn, scope, now)
    }

    /// A connection from inside the bridge process (a second front end,
    /// such as the AI-control dialect), granted `scope` without a token.
    /// Only code in this process can open one: no listener leads here.
    pub fn on_connect_in_process(&mut self, conn: ConnId, scope: Scope, now: Instant) -> Vec<Output> {
        self.open_connection(conn, Some(scope), now)
    }

    fn open_connection(&mut self, conn: ConnId, scope: Option<Scope>, now: Instant) -> Vec<Output> {
        self.counters.connections_total += 1;
        self.connections.insert(conn, ConnState { session: None, scope, auth_failures: 0, last_inbound: now, last_heartbeat_sent: now });
        match scope {
            Some(scope) => {
                let session = self.new_session(conn, scope, &Opening::default());
                vec![self.session_init(conn, &session, None, now)]
            }
            None => Vec::new(),
        }
    }

    /// The connection is gone: its session is kept for resuming, its
    /// in-flight calls are aborted (and recorded), and it loses the lease.
    pub fn on_disconnect(&mut self, conn: ConnId, now: Instant) -> Vec<Output> {
        let Some(state) = self.connections.remove(&conn) else { return Vec::new() };
        let mut out = Vec::new();
        if let Some(session_id) = state.session {
            self.detach(&session_id, now, "connection lost", &mut out);
        }
        out
    }

    fn detach(&mut self, session_id: &str, now: Instant, reason: &str, out: &mut Vec<Output>) {
        let aborted: Vec<(String, InFlight)> = match self.sessions.get_mut(session_id) {
            Some(session) => {
                session.conn = None;
                session.detached_at = Some(now);
                session.batch.clear();
                session.batch_started = None;
                std::mem::take(&mut session.in_flight).into_iter().collect()
            }
            None => return,
        };
        for (call_id, flight) in aborted {
            let payload = json!({ "call_id": call_id, "tool": flight.tool, "reason": reason });
            self.push_event(session_id, "call_aborted", payload, now, out);
            if flight.command {
                let error = AiccError::execution_failed(false, format!("aborted: {reason}; the robot was stopped"));
                self.command_completed(session_id, &call_id, flight.tool, Err(&error), now, out);
            }
            self.forget_idempotent(session_id, flight.idempotency_key.as_deref());
        }
        self.release_lease_of(session_id, now, reason, out);
    }

    /// One line from a connection.
    pub fn on_line(&mut self, conn: ConnId, line: &[u8], now: Instant) -> Vec<Output> {
        let Some(state) = self.connections.get_mut(&conn) else { return Vec::new() };
        state.last_inbound = now;
        let authenticated = state.scope.is_some();
        let (inbound, named_session) = match decode(line) {
            Ok(decoded) => (decoded.inbound, decoded.session_id),
            Err((error, correlation)) => {
                self.counters.protocol_errors += 1;
                return vec![self.error_message(conn, error, &correlation, now)];
            }
        };
        if !authenticated {
            return self.authenticate(conn, inbound, now);
        }
        // A message naming another session than the connection's is refused:
        // switching sessions is what session_resume is for.
        let own = self.connections[&conn].session.clone();
        if let (Some(named), Some(own), false) = (&named_session, &own, matches!(inbound, Inbound::SessionResume { .. })) {
            if named != own {
                self.counters.protocol_errors += 1;
                let (message_id, call_id) = match &inbound {
                    Inbound::ToolCall { message_id, call_id, .. } => (message_id.clone(), Some(call_id.clone())),
                    Inbound::ManifestRequest { message_id, .. } | Inbound::Heartbeat { message_id } | Inbound::SessionClose { message_id } | Inbound::SessionResume { message_id, .. } => (message_id.clone(), None),
                };
                let error = AiccError::new(ErrorCode::SessionExpired, false, format!("session_id '{named}' is not this connection's session; use session_resume to attach to another"));
                return vec![self.error_message(conn, error, &Correlation { message_id, call_id }, now)];
            }
        }
        match inbound {
            Inbound::ToolCall { message_id, call_id, tool, input, options } => self.on_tool_call(conn, message_id, call_id, tool, input, options, now),
            Inbound::ManifestRequest { message_id, opening } => {
                let Some(session) = self.connections[&conn].session.clone() else {
                    if let Err(error) = check_opening(&opening) {
                        return vec![self.error_message(conn, error, &Correlation { message_id, call_id: None }, now)];
                    }
                    let scope = self.connections[&conn].scope.expect("authenticated");
                    let session = self.new_session(conn, scope, &opening);
                    return vec![self.session_init(conn, &session, message_id, now)];
                };
                if let Err(error) = self.apply_opening(&session, &opening) {
                    return vec![self.error_message(conn, error, &Correlation { message_id, call_id: None }, now)];
                }
                vec![self.session_init(conn, &session, message_id, now)]
            }
            Inbound::SessionResume { message_id, session_id, cursor, opening } => self.on_resume(conn, message_id, session_id, cursor, opening, now),
            Inbound::Heartbeat { message_id } => {
                let session = self.connections[&conn].session.clone().unwrap_or_default();
                let tick = self.tick(now);
                vec![self.reply(conn, envelope("heartbeat", &session, json!({ "in_reply_to": message_id, "meta": { "tick": tick } })))]
            }
            Inbound::SessionClose { message_id } => {
                let mut out = Vec::new();
                if let Some(session_id) = self.connections.get_mut(&conn).and_then(|c| c.session.take()) {
                    let tick = self.tick(now);
                    out.push(self.reply(conn, envelope("session_close", &session_id, json!({ "in_reply_to": message_id, "reason": "closed by agent", "meta": { "tick": tick } }))));
                    self.detach(&session_id, now, "session closed", &mut out);
                    self.sessions.remove(&session_id);
                }
                out.push(Output::Close { conn });
                out
            }
        }
    }

    /// Before authentication only messages carrying `auth.token` are heard.
    fn authenticate(&mut self, conn: ConnId, inbound: Inbound, now: Instant) -> Vec<Output> {
        let (message_id, token) = match &inbound {
            Inbound::ManifestRequest { message_id, opening } | Inbound::SessionResume { message_id, opening, .. } => (message_id.clone(), opening.token.clone()),
            Inbound::ToolCall { message_id, .. } | Inbound::Heartbeat { message_id } | Inbound::SessionClose { message_id } => (message_id.clone(), None),
        };
        let correlation = Correlation { message_id, call_id: None };
        let Some(token) = token else {
            let error = AiccError::invalid_input("authentication required: open with manifest_request or session_resume carrying auth.token");
            return vec![self.error_message(conn, error, &correlation, now)];
        };
        match self.config.tokens.check(&token) {
            Some(scope) => {
                self.connections.get_mut(&conn).expect("known connection").scope = Some(scope);
                self.on_line_authenticated(conn, inbound, now)
            }
            None => {
                let state = self.connections.get_mut(&conn).expect("known connection");
                state.auth_failures += 1;
                let failures = state.auth_failures;
                self.last_error = Some(format!("authentication failed on connection {conn}"));
                let error = AiccError::invalid_input("authentication failed: token not accepted");
                let mut out = vec![self.error_message(conn, error, &correlation, now)];
                if failures >= self.config.max_auth_failures {
                    out.push(Output::Close { conn });
                }
                out
            }
        }
    }

    fn on_line_authenticated(&mut self, conn: ConnId, inbound: Inbound, now: Instant) -> Vec<Output> {
        match inbound {
            Inbound::ManifestRequest { message_id, opening } => {
                if let Err(error) = check_opening(&opening) {
                    return vec![self.error_message(conn, error, &Correlation { message_id, call_id: None }, now)];
                }
                let scope = self.connections[&conn].scope.expect("authenticated");
                let session = self.new_session(conn, scope, &opening);
                vec![self.session_init(conn, &session, message_id, now)]
            }
            Inbound::SessionResume { message_id, session_id, cursor, opening } => self.on_resume(conn, message_id, session_id, cursor, opening, now),
            _ => unreachable!("only openings carry a token"),
        }
    }

    fn new_session(&mut self, conn: ConnId, scope: Scope, opening: &Opening) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let mut session = SessionState {
            scope,
            conn: Some(conn),
            detached_at: None,
            subscriptions: DEFAULT_TOPICS.iter().map(|t| t.to_string()).collect(),
            agent_model: None,
            events: EventRing::new(self.config.event_ring_capacity),
            limiter: RateLimiter::default(),
            in_flight: BTreeMap::new(),
            batch: Vec::new(),
            batch_started: None,
            last_tick_event: 0,
            memory: VecDeque::new(),
            idempotency: HashMap::new(),
            idempotency_order: VecDeque::new(),
        };
        apply_opening_to(&mut session, opening);
        self.sessions.insert(id.clone(), session);
        if let Some(state) = self.connections.get_mut(&conn) {
            state.session = Some(id.clone());
        }
        id
    }

    fn apply_opening(&mut self, session_id: &str, opening: &Opening) -> Result<(), AiccError> {
        check_opening(opening)?;
        let session = self.sessions.get_mut(session_id).ok_or_else(|| AiccError::new(ErrorCode::SessionExpired, false, "session is gone"))?;
        apply_opening_to(session, opening);
        Ok(())
    }

    fn on_resume(&mut self, conn: ConnId, message_id: Option<String>, session_id: String, cursor: u64, opening: Opening, now: Instant) -> Vec<Output> {
        let correlation = Correlation { message_id: message_id.clone(), call_id: None };
        if let Err(error) = check_opening(&opening) {
            return vec![self.error_message(conn, error, &correlation, now)];
        }
        let resumable = self.sessions.get(&session_id).is_some_and(|s| s.detached_at.is_none_or(|at| now.saturating_duration_since(at) <= self.config.resume_window));
        if !resumable {
            let error = AiccError::new(ErrorCode::SessionExpired, false, format!("session '{session_id}' is unknown, closed or past its resume window; open a new one with manifest_request"));
            return vec![self.error_message(conn, error, &correlation, now)];
        }
        let mut out = Vec::new();
        // The connection's own fresh session gives way to the resumed one.
        if let Some(previous) = self.connections.get_mut(&conn).and_then(|c| c.session.take()) {
            if previous != session_id {
                self.detach(&previous, now, "replaced by a resumed session", &mut out);
                self.sessions.remove(&previous);
            }
        }
        // A session lives on one connection: an older one (half-open after
        // an agent restart) is told and closed.
        let old_conn = self.sessions[&session_id].conn.filter(|c| *c != conn);
        if let Some(old_conn) = old_conn {
            let tick = self.tick(now);
            out.push(self.reply(old_conn, envelope("session_close", &session_id, json!({ "reason": "session resumed on another connection", "meta": { "tick": tick } }))));
            out.push(Output::Close { conn: old_conn });
            if let Some(state) = self.connections.get_mut(&old_conn) {
                state.session = None;
            }
            self.detach(&session_id, now, "session resumed on another connection", &mut out);
        }
        let scope = self.connections[&conn].scope.expect("authenticated");
        let session = self.sessions.get_mut(&session_id).expect("checked above");
        session.conn = Some(conn);
        session.detached_at = None;
        session.scope = scope;
        apply_opening_to(session, &opening);
        let replay = session.events.replay_after(cursor, usize::MAX);
        self.connections.get_mut(&conn).expect("known connection").session = Some(session_id.clone());
        // Replayed events go first, flagged, so that ticks on the wire never
        // go backwards; the reply that follows counts them.
        let replayed = replay.events.len();
        for event in replay.events {
            let mut message = (*event.message).clone();
            message["meta"]["replayed"] = json!(true);
            out.push(Output::Send { conn, message, droppable: false });
        }
        let tick = self.tick(now);
        out.push(self.reply(conn, envelope("session_resume", &session_id, json!({
            "in_reply_to": message_id,
            "resumed": true,
            "cursor": cursor,
            "replayed": replayed,
            "dropped": replay.dropped,
            "next_cursor": replay.next_cursor,
            "meta": { "tick": tick },
        }))));
        out
    }

    // ----- tool calls --------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn on_tool_call(&mut self, conn: ConnId, message_id: Option<String>, call_id: String, tool: String, input: Map<String, Value>, options: CallOptions, now: Instant) -> Vec<Output> {
        self.counters.tool_calls += 1;
        let correlation = Correlation { message_id, call_id: Some(call_id.clone()) };
        let Some(session_id) = self.connections[&conn].session.clone() else {
            let error = AiccError::new(ErrorCode::SessionExpired, false, "no session on this connection: send manifest_request or session_resume first");
            return vec![self.failed_result(conn, "", &call_id, error, &correlation, now, now)];
        };
        // A retried call with a known idempotency key never runs twice.
        if let Some(key) = &options.idempotency_key {
            match self.sessions[&session_id].idempotency.get(key) {
                Some(Idempotent::Done { result }) => {
                    let mut replay = result.clone();
                    replay["call_id"] = json!(call_id);
                    replay["message_id"] = json!(uuid::Uuid::new_v4().to_string());
                    replay["meta"]["idempotent_replay"] = json!(true);
                    return vec![self.reply(conn, replay)];
                }
                Some(Idempotent::Running { call_id: first }) => {
                    let error = AiccError::new(ErrorCode::ToolUnavailable, true, format!("a call with idempotency_key '{key}' is still running (call_id '{first}'); its result will come under that call_id"));
                    return vec![self.failed_result(conn, &session_id, &call_id, error, &correlation, now, now)];
                }
                None => {}
            }
        }
        match self.admit(&session_id, &call_id, &tool, input, now) {
            Err(error) => {
                self.counters.tool_errors += 1;
                vec![self.failed_result(conn, &session_id, &call_id, error, &correlation, now, now)]
            }
            Ok(Admitted::Cancel { target_conn, cancelled, output }) => {
                let mut out = vec![Output::Abort { conn: target_conn, call_id: cancelled.clone() }];
                let error = AiccError::execution_failed(false, format!("cancelled by the agent (call '{call_id}'); the robot was stopped"));
                out.extend(self.finish_call(&session_id, &cancelled, Err(error), now));
                let tick = self.tick(now);
                out.push(self.reply(conn, envelope("tool_result", &session_id, json!({
                    "call_id": call_id, "ok": true, "output": output,
                    "meta": { "tick": tick, "latency_ms": 0.0, "source": "bridge" },
                }))));
                out
            }
            Ok(Admitted::Internal { output, ignored_fields }) => {
                let tick = self.tick(now);
                let mut result = envelope("tool_result", &session_id, json!({
                    "call_id": call_id, "ok": true, "output": output,
                    "meta": { "tick": tick, "latency_ms": 0.0, "source": "bridge" },
                }));
                if !ignored_fields.is_empty() {
                    result["meta"]["ignored_fields"] = json!(ignored_fields);
                }
                vec![self.reply(conn, result)]
            }
            Ok(Admitted::Execute { descriptor_id, input, ignored_fields, acquired_lease, command }) => {
                let session = self.sessions.get_mut(&session_id).expect("admitted");
                if let Some(key) = &options.idempotency_key {
                    session.idempotency.insert(key.clone(), Idempotent::Running { call_id: call_id.clone() });
                    session.idempotency_order.push_back(key.clone());
                    while session.idempotency_order.len() > IDEMPOTENCY_CAPACITY {
                        if let Some(oldest) = session.idempotency_order.pop_front() {
                            session.idempotency.remove(&oldest);
                        }
                    }
                }
                session.in_flight.insert(call_id.clone(), InFlight { started: now, tool: descriptor_id, conn, ignored_fields, command, idempotency_key: options.idempotency_key.clone() });
                let mut out = Vec::new();
                if acquired_lease {
                    self.broadcast_lease(now, &mut out);
                }
                if command {
                    let payload = json!({ "call_id": call_id, "tool": descriptor_id, "state": "accepted", "deadline_ms": options.deadline_ms });
                    self.push_event(&session_id, "command", payload, now, &mut out);
                }
                out.push(Output::Execute { conn, session: session_id, call_id, tool, input, deadline: options.deadline_ms.map(Duration::from_millis) });
                out
            }
        }
    }

    /// Every check a call must pass before it runs, in the order an agent
    /// can act on: unknown, not allowed, not now, not like this.
    fn admit(&mut self, session_id: &str, call_id: &str, tool: &str, input: Map<String, Value>, now: Instant) -> Result<Admitted, AiccError> {
        let descriptor: ToolDescriptor = self.catalog.descriptor(tool).filter(|d| self.offered(d)).cloned().ok_or_else(|| AiccError::new(ErrorCode::ToolUnknown, false, format!("tool '{tool}' is not in the manifest")))?;
        let session = self.sessions.get(session_id).expect("attached session exists");
        if !session.scope.capabilities().contains(&descriptor.capability) {
            return Err(AiccError::new(ErrorCode::ToolUnavailable, false, format!("tool '{tool}' requires capability '{}', which this session's '{}' scope does not grant", descriptor.capability, session.scope.as_str())));
        }
        if let Some(reason) = self.unavailable.get(tool) {
            return Err(AiccError::new(ErrorCode::ToolUnavailable, true, format!("tool '{tool}' is unavailable now: {reason}")));
        }
        if session.in_flight.contains_key(call_id) {
            return Err(AiccError::invalid_input(format!("call_id '{call_id}' is already in flight; use a new call_id per call")));
        }
        let valid = self.catalog.validate(tool, input)?;
        if session.in_flight.len() >= self.config.max_calls_in_flight {
            return Err(AiccError::new(ErrorCode::ToolUnavailable, true, format!("{} calls already in flight (the limit); retry when one completes", self.config.max_calls_in_flight)));
        }
        let needs_lease = descriptor.class == ToolClass::Actuator && descriptor.capability == "can_move_self";
        let mut acquired_lease = false;
        if needs_lease {
            match &self.lease {
                Some(lease) if lease.session != session_id => {
                    return Err(AiccError::new(ErrorCode::ToolUnavailable, true, format!("the motion lease is held by session {}; retry when it is released", short_id(&lease.session))));
                }
                Some(_) => {}
                None => acquired_lease = true,
            }
        }
        let session = self.sessions.get_mut(session_id).expect("attached session exists");
        if let Some(limit) = descriptor.calls_per_minute {
            if let Err(wait) = session.limiter.try_call(tool, limit, now) {
                return Err(AiccError::new(ErrorCode::ToolUnavailable, true, format!("rate limit of {limit} calls per minute reached for '{tool}'; retry in {} ms", wait.as_millis())));
            }
        }
        if needs_lease {
            self.lease = Some(Lease { session: session_id.to_string(), renewed: now });
        }
        self.advance_event_tick();
        match descriptor.id {
            TICK_NOW => {
                self.extra_ticks += 1;
                Ok(Admitted::Internal { output: json!({ "tick": self.tick(now) }), ignored_fields: valid.ignored_fields })
            }
            BRIDGE_STATUS => Ok(Admitted::Internal { output: self.status(session_id, now), ignored_fields: valid.ignored_fields }),
            MEMORY_QUERY => Ok(Admitted::Internal { output: self.memory_query(session_id, &valid.input), ignored_fields: valid.ignored_fields }),
            CANCEL => {
                let target = valid.input.get("call_id").and_then(Value::as_str).unwrap_or_default().to_string();
                let session = &self.sessions[session_id];
                let flight = session.in_flight.get(&target).ok_or_else(|| AiccError::invalid_input(format!("input.call_id: no call '{target}' is in flight in this session")))?;
                Ok(Admitted::Cancel { output: json!({ "cancelled": target, "tool": flight.tool }), target_conn: flight.conn, cancelled: target })
            }
            _ => Ok(Admitted::Execute { descriptor_id: descriptor.id, input: valid.input, ignored_fields: valid.ignored_fields, acquired_lease, command: descriptor.class == ToolClass::Actuator }),
        }
    }

    /// A tool's outcome; its result goes to the session's connection, or
    /// into its event ring when the agent is away.
    pub fn on_tool_finished(&mut self, session_id: &str, call_id: &str, outcome: Result<ToolSuccess, AiccError>, now: Instant) -> Vec<Output> {
        self.finish_call(session_id, call_id, outcome, now)
    }

    fn finish_call(&mut self, session_id: &str, call_id: &str, outcome: Result<ToolSuccess, AiccError>, now: Instant) -> Vec<Output> {
        let Some(session) = self.sessions.get_mut(session_id) else { return Vec::new() };
        let Some(flight) = session.in_flight.remove(call_id) else { return Vec::new() };
        if let Some(lease) = &mut self.lease {
            if lease.session == session_id {
                lease.renewed = now;
            }
        }
        let tick = self.tick(now);
        let latency_ms = now.saturating_duration_since(flight.started).as_secs_f64() * 1e3;
        let mut message = match outcome {
            Ok(success) => envelope("tool_result", session_id, json!({
                "call_id": call_id, "ok": true, "output": success.output,
                "meta": { "tick": tick, "latency_ms": latency_ms, "source": success.source },
            })),
            Err(error) => {
                self.counters.tool_errors += 1;
                if error.code == ErrorCode::InternalError {
                    self.last_error = Some(format!("{call_id}: {}", error.message));
                }
                envelope("tool_result", session_id, json!({
                    "call_id": call_id, "ok": false, "error": error.to_json(),
                    "meta": { "tick": tick, "latency_ms": latency_ms, "source": "bridge" },
                }))
            }
        };
        if !flight.ignored_fields.is_empty() {
            message["meta"]["ignored_fields"] = json!(flight.ignored_fields);
        }
        let mut out = Vec::new();
        if flight.command {
            let error = (message["ok"] == false).then(|| message["error"].clone());
            self.command_completed_value(session_id, call_id, flight.tool, error, now, &mut out);
        }
        let session = self.sessions.get_mut(session_id).expect("checked above");
        if let Some(key) = &flight.idempotency_key {
            if let Some(slot) = session.idempotency.get_mut(key) {
                *slot = Idempotent::Done { result: message.clone() };
            }
        }
        remember(&mut session.memory, tick, now, "tool_result", flight.tool, &message);
        match session.conn {
            Some(conn) if conn == flight.conn => out.push(Output::Send { conn, message, droppable: false }),
            _ => self.push_event(session_id, "tool_result", json!({ "result": message }), now, &mut out),
        }
        out
    }

    /// The one completion event every accepted command ends with.
    fn command_completed(&mut self, session_id: &str, call_id: &str, tool: &str, outcome: Result<(), &AiccError>, now: Instant, out: &mut Vec<Output>) {
        self.command_completed_value(session_id, call_id, tool, outcome.err().map(AiccError::to_json), now, out);
    }

    fn command_completed_value(&mut self, session_id: &str, call_id: &str, tool: &str, error: Option<Value>, now: Instant, out: &mut Vec<Output>) {
        let payload = json!({ "call_id": call_id, "tool": tool, "state": "completed", "ok": error.is_none(), "error": error });
        self.push_event(session_id, "command", payload, now, out);
    }

    fn forget_idempotent(&mut self, session_id: &str, key: Option<&str>) {
        if let (Some(session), Some(key)) = (self.sessions.get_mut(session_id), key) {
            // An aborted call did not complete: a retry may run it.
            if matches!(session.idempotency.get(key), Some(Idempotent::Running { .. })) {
                session.idempotency.remove(key);
            }
        }
    }

    /// Episodic memory of the session: events and tool results, filtered.
    fn memory_query(&self, session_id: &str, input: &Map<String, Value>) -> Value {
        let session = &self.sessions[session_id];
        let text = input.get("text").and_then(Value::as_str).map(str::to_lowercase);
        let name = input.get("topic").or_else(|| input.get("tool")).and_then(Value::as_str);
        let kind = input.get("kind").and_then(Value::as_str);
        let since_tick = input.get("since_tick").and_then(Value::as_u64).unwrap_or(0);
        let until_tick = input.get("until_tick").and_then(Value::as_u64).unwrap_or(u64::MAX);
        let within_s = input.get("within_s").and_then(Value::as_f64);
        let limit = input.get("limit").and_then(Value::as_u64).unwrap_or(20) as usize;
        let newest = session.memory.back().map(|e| e.at);
        let matches: Vec<&MemoryEntry> = session
            .memory
            .iter()
            .filter(|e| e.tick >= since_tick && e.tick <= until_tick)
            .filter(|e| kind.is_none_or(|k| e.kind == k))
            .filter(|e| name.is_none_or(|n| e.name == n))
            .filter(|e| text.as_ref().is_none_or(|t| e.summary.to_lowercase().contains(t.as_str())))
            .filter(|e| within_s.is_none_or(|w| newest.is_some_and(|n| n.saturating_duration_since(e.at).as_secs_f64() <= w)))
            .collect();
        let entries: Vec<Value> = matches.iter().rev().take(limit).rev().map(|e| json!({ "tick": e.tick, "kind": e.kind, "name": e.name, "summary": serde_json::from_str::<Value>(&e.summary).unwrap_or(Value::Null) })).collect();
        json!({ "entries": entries, "matched": matches.len(), "retained": session.memory.len(), "retained_max": MEMORY_CAPACITY })
    }

    // ----- events --------------------------------------------------------

    /// Publishes an event to every session subscribed to `topic` (or only
    /// to `audience`).
    pub fn publish(&mut self, topic: &str, payload: Value, audience: Option<&str>, now: Instant) -> Vec<Output> {
        let targets: Vec<String> = match audience {
            Some(session) => vec![session.to_string()],
            None => self.sessions.keys().cloned().collect(),
        };
        self.advance_event_tick();
        let mut out = Vec::new();
        for session in targets {
            self.push_event(&session, topic, payload.clone(), now, &mut out);
        }
        out
    }

    fn push_event(&mut self, session_id: &str, topic: &str, payload: Value, now: Instant, out: &mut Vec<Output>) {
        let tick = self.tick(now);
        let Some(session) = self.sessions.get_mut(session_id) else { return };
        if !session.subscriptions.contains(topic) {
            return;
        }
        let seq = session.events.next_seq();
        let message = envelope("event", session_id, json!({ "topic": topic, "payload": payload, "meta": { "tick": tick, "seq": seq } }));
        session.events.push(tick, Arc::new(message.clone()));
        if topic != "tick" {
            remember(&mut session.memory, tick, now, "event", topic, &message["payload"]);
        }
        let Some(conn) = session.conn else { return };
        match session.agent_model.as_ref().map(|m| m.event_batch).filter(|b| !b.is_zero()) {
            None => out.push(Output::Send { conn, message, droppable: true }),
            Some(_) => {
                session.batch_started.get_or_insert(now);
                session.batch.push(message);
            }
        }
    }

    fn broadcast_lease(&mut self, now: Instant, out: &mut Vec<Output>) {
        let holder = self.lease.as_ref().map(|l| l.session.clone());
        let sessions: Vec<String> = self.sessions.keys().cloned().collect();
        for session in sessions {
            let payload = json!({ "holder": holder.as_deref().map(short_id), "yours": holder.as_deref() == Some(session.as_str()) });
            self.push_event(&session, "lease", payload, now, out);
        }
    }

    fn release_lease_of(&mut self, session_id: &str, now: Instant, reason: &str, out: &mut Vec<Output>) {
        if self.lease.as_ref().is_some_and(|l| l.session == session_id) {
            self.lease = None;
            out.push(Output::LeaseReleased { session: session_id.to_string() });
            tracing::info!(session = short_id(session_id), reason, "motion lease released");
            self.broadcast_lease(now, out);
        }
    }

    /// Marks a tool unavailable (its data source is gone) or available
    /// again, and pushes the manifest change to every agent in a heartbeat
    /// (AICC section 8).
    pub fn set_tool_availability(&mut self, tool: &str, unavailable_reason: Option<String>, now: Instant) -> Vec<Output> {
        let change = match &unavailable_reason {
            Some(reason) => self.unavailable.insert(tool.to_string(), reason.clone()).is_none().then(|| json!({ "entity": tool, "change": "unavailable", "reason": reason })),
            None => self.unavailable.remove(tool).map(|was| json!({ "entity": tool, "change": "available", "was": was })),
        };
        let Some(change) = change else { return Vec::new() };
        let tick = self.tick(now);
        let attached: Vec<(String, ConnId)> = self.sessions.iter().filter_map(|(id, s)| s.conn.map(|c| (id.clone(), c))).collect();
        let mut out: Vec<Output> = attached
            .into_iter()
            .map(|(session, conn)| {
                let manifest = self.manifest_json(&session);
                self.reply(conn, envelope("heartbeat", &session, json!({ "manifest_update": manifest, "meta": { "tick": tick } })))
            })
            .collect();
        // A sensor going stale or coming back is also a state change agents
        // can subscribe to (and find in their history).
        out.extend(self.publish("state_change", change, None, now));
        out
    }

    // ----- timers --------------------------------------------------------

    /// Periodic work: tick events, event batches, heartbeats, dead peers,
    /// expired sessions and lapsed leases. Call at least at the tick rate.
    pub fn on_timer(&mut self, now: Instant) -> Vec<Output> {
        let mut out = Vec::new();
        let tick = self.tick(now);
        // Tick events for subscribers.
        let tick_subscribers: Vec<String> = self.sessions.iter().filter(|(_, s)| s.subscriptions.contains("tick") && s.last_tick_event < tick).map(|(id, _)| id.clone()).collect();
        for session in tick_subscribers {
            self.sessions.get_mut(&session).expect("listed").last_tick_event = tick;
            self.push_event(&session, "tick", json!({ "tick": tick }), now, &mut out);
        }
        // Batches whose window has closed.
        for session in self.sessions.values_mut() {
            let (Some(conn), Some(started), Some(model)) = (session.conn, session.batch_started, session.agent_model.as_ref()) else { continue };
            if now.saturating_duration_since(started) >= model.event_batch {
                session.batch_started = None;
                out.extend(session.batch.drain(..).map(|message| Output::Send { conn, message, droppable: true }));
            }
        }
        // Heartbeats and dead peers.
        let conns: Vec<ConnId> = self.connections.keys().copied().collect();
        for conn in conns {
            let state = &self.connections[&conn];
            let interval = state.session.as_ref().and_then(|s| self.sessions.get(s)).and_then(|s| s.agent_model.as_ref()).map_or(self.config.heartbeat_interval, |m| m.heartbeat_interval);
            if now.saturating_duration_since(state.last_inbound) > interval * self.config.dead_peer_intervals {
                tracing::info!(conn, "peer silent for {} heartbeat intervals: closing", self.config.dead_peer_intervals);
                out.push(Output::Close { conn });
                out.extend(self.on_disconnect(conn, now));
                continue;
            }
            if state.scope.is_some() && now.saturating_duration_since(state.last_heartbeat_sent) >= interval {
                let session = state.session.clone().unwrap_or_default();
                self.connections.get_mut(&conn).expect("listed").last_heartbeat_sent = now;
                out.push(Output::Send { conn, message: envelope("heartbeat", &session, json!({ "interval_s": interval.as_secs_f64(), "meta": { "tick": tick } })), droppable: true });
            }
        }
        // Detached sessions past the resume window.
        let window = self.config.resume_window;
        self.sessions.retain(|_, s| s.detached_at.is_none_or(|at| now.saturating_duration_since(at) <= window));
        // A lease unused for too long lapses (not while its holder is acting).
        if let Some(lease) = &self.lease {
            let busy = self.sessions.get(&lease.session).is_some_and(|s| !s.in_flight.is_empty());
            if !busy && now.saturating_duration_since(lease.renewed) > self.config.lease_timeout {
                let holder = lease.session.clone();
                self.release_lease_of(&holder, now, "lease expired", &mut out);
            }
        }
        out
    }

    // ----- messages ------------------------------------------------------

    /// Whether the manifest lists a tool (`tick_now` only in hybrid mode).
    fn offered(&self, tool: &ToolDescriptor) -> bool {
        tool.id != TICK_NOW || self.config.tick_mode == TickMode::Hybrid
    }

    fn manifest_json(&self, session_id: &str) -> Value {
        let session = self.sessions.get(session_id);
        let granted: &[&str] = session.map_or(&[], |s| s.scope.capabilities());
        let usable = |class: ToolClass| -> Vec<&str> {
            self.catalog.descriptors().filter(|t| t.class == class && self.offered(t) && granted.contains(&t.capability) && !self.unavailable.contains_key(t.id)).map(|t| t.id).collect()
        };
        let tools: Vec<Value> = self.catalog.descriptors().filter(|t| self.offered(t)).map(ToolDescriptor::to_json).collect();
        json!({
            "tick_rate_hz": self.config.tick_rate_hz,
            "tick_mode": self.config.tick_mode.as_str(),
            "world": { "name": self.config.world_name, "kind": "3d" },
            "capabilities": {
                "sensors": usable(ToolClass::Sensor),
                "actuators": usable(ToolClass::Actuator),
                "generators": usable(ToolClass::Generator),
                "granted": granted,
                "scope": session.map(|s| s.scope.as_str()),
            },
            "tools": tools,
            "events": {
                "subscribed": session.map(|s| s.subscriptions.iter().collect::<Vec<_>>()),
                "available": KNOWN_TOPICS,
                "retained_max": self.config.event_ring_capacity,
            },
            "agent_model": session.and_then(|s| s.agent_model.as_ref()).map(|m| json!({
                "class": m.class, "event_batch_ms": m.event_batch.as_millis() as u64, "heartbeat_interval_s": m.heartbeat_interval.as_secs_f64(),
            })),
            "heartbeat_interval_s": session.and_then(|s| s.agent_model.as_ref()).map_or(self.config.heartbeat_interval, |m| m.heartbeat_interval).as_secs_f64(),
            "resume_window_s": self.config.resume_window.as_secs_f64(),
            "limits": self.config.limits,
        })
    }

    fn session_init(&mut self, conn: ConnId, session_id: &str, in_reply_to: Option<String>, now: Instant) -> Output {
        let mut body = self.manifest_json(session_id);
        body["in_reply_to"] = json!(in_reply_to);
        body["meta"] = json!({ "tick": self.tick(now) });
        self.reply(conn, envelope("session_init", session_id, body))
    }

    fn reply(&self, conn: ConnId, message: Value) -> Output {
        Output::Send { conn, message, droppable: false }
    }

    #[allow(clippy::too_many_arguments)]
    fn failed_result(&mut self, conn: ConnId, session_id: &str, call_id: &str, error: AiccError, correlation: &Correlation, started: Instant, now: Instant) -> Output {
        let tick = self.tick(now);
        self.reply(conn, envelope("tool_result", session_id, json!({
            "call_id": call_id,
            "in_reply_to": correlation.message_id,
            "ok": false,
            "error": error.to_json(),
            "meta": { "tick": tick, "latency_ms": now.saturating_duration_since(started).as_secs_f64() * 1e3, "source": "bridge" },
        })))
    }

    /// A top-level `error`, correlated as far as the line allowed.
    pub fn error_message(&mut self, conn: ConnId, error: AiccError, correlation: &Correlation, now: Instant) -> Output {
        let session = self.connections.get(&conn).and_then(|c| c.session.clone()).unwrap_or_default();
        let mut body = error.to_json();
        body["in_reply_to"] = json!(correlation.message_id);
        if let Some(call_id) = &correlation.call_id {
            body["call_id"] = json!(call_id);
        }
        body["meta"] = json!({ "tick": self.tick(now) });
        self.reply(conn, envelope("error", &session, body))
    }

    // ----- status --------------------------------------------------------

    /// The operator's view. Session ids are shortened for all but admins:
    /// a full id is what a resume needs.
    pub fn status(&self, viewer: &str, now: Instant) -> Value {
        let admin = self.sessions.get(viewer).is_some_and(|s| s.scope == Scope::Admin);
        let show = |id: &str| if admin { id.to_string() } else { short_id(id).to_string() };
        let sessions: Vec<Value> = self
            .sessions
            .iter()
            .map(|(id, s)| json!({
                "id": show(id),
                "you": id == viewer,
                "scope": s.scope.as_str(),
                "attached": s.conn.is_some(),
                "detached_for_s": s.detached_at.map(|at| now.saturating_duration_since(at).as_secs_f64()),
                "calls_in_flight": s.in_flight.len(),
                "events_retained": s.events.len(),
                "events_retained_max": s.events.capacity(),
                "last_event_seq": s.events.last_seq(),
                "agent_model": s.agent_model.as_ref().map(|m| m.class.clone()),
            }))
            .collect();
        let outbound_queued: usize = self.outbound.iter().map(|(_, n)| n).sum();
        let outbound_fullest = self.outbound.iter().map(|(_, n)| *n).max().unwrap_or(0);
        json!({
            "listener": self.listener,
            "connections": self.connections.len(),
            "connections_max": self.max_connections,
            "outbound_queued": outbound_queued,
            "outbound_fullest_queue": outbound_fullest,
            "outbound_queue_max": self.outbound_max,
            "connections_total": self.counters.connections_total,
            "sessions": sessions,
            "lease_holder": self.lease.as_ref().map(|l| show(&l.session)),
            "calls_in_flight_max": self.config.max_calls_in_flight,
            "events_retained_max": self.config.event_ring_capacity,
            "tool_calls": self.counters.tool_calls,
            "tool_errors": self.counters.tool_errors,
            "protocol_errors": self.counters.protocol_errors,
            "unavailable_tools": self.unavailable,
            "last_error": self.last_error,
            "auth_required": self.auth_required(),
        })
    }

    /// The listener, as the shell bound it.
    pub fn note_listener(&mut self, address: String, max_connections: usize) {
        self.listener = Some(address);
        self.max_connections = max_connections;
    }

    /// Outbound queue occupancy per connection, as the shell measured it.
    pub fn note_outbound(&mut self, occupancy: Vec<(ConnId, usize)>, max_per_connection: usize) {
        self.outbound = occupancy;
        self.outbound_max = max_per_connection;
    }

    /// Records an error for `status` (e.g. from the shell).
    pub fn note_error(&mut self, error: String) {
        self.last_error = Some(error);
    }

    /// The session a connection is attached to.
    pub fn session_of(&self, conn: ConnId) -> Option<&str> {
        self.connections.get(&conn).and_then(|c| c.session.as_deref())
    }

    /// Who holds the motion lease.
    pub fn lease_holder(&self) -> Option<&str> {
        self.lease.as_ref().map(|l| l.session.as_str())
    }

    pub fn known_tools(&self) -> HashSet<&'static str> {
        self.catalog.descriptors().map(|d| d.id).collect()
    }
}

/// Descriptors of the tools the core answers itself.
pub fn core_tool_descriptors() -> Vec<ToolDescriptor> {
    vec![
        ToolDescriptor {
            id: TICK_NOW,
            class: ToolClass::Sensor,
            description: "Hybrid tick mode only: advance the tick clock now and return the new tick.",
            capability: "can_observe_world",
            strict_input: true,
            calls_per_minute: Some(600),
            input_schema: json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            output_schema: json!({ "type": "object", "properties": { "tick": { "type": "integer" } }, "required": ["tick"] }),
        },
        ToolDescriptor {
            id: CANCEL,
            class: ToolClass::Sensor,
            description: "Cancel one of this session's calls in flight (a long move, turn or arm motion): the robot stops, and the call ends with an execution_failed result and its command completion event.",
            capability: "can_observe_world",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({ "type": "object", "properties": { "call_id": { "type": "string", "minLength": 1 } }, "required": ["call_id"], "additionalProperties": false }),
            output_schema: json!({ "type": "object", "properties": { "cancelled": { "type": "string" }, "tool": { "type": "string" } }, "required": ["cancelled"] }),
        },
        ToolDescriptor {
            id: MEMORY_QUERY,
            class: ToolClass::Sensor,
            description: "Episodic memory of this session: the events and tool results it saw (images summarised), newest last. Filter by kind (event|tool_result), topic or tool name, text, tick range or the last within_s seconds.",
            capability: "can_observe_world",
            strict_input: true,
            calls_per_minute: None,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "kind": { "enum": ["event", "tool_result"] },
                    "topic": { "type": "string", "description": "event topic or tool id" },
                    "tool": { "type": "string", "description": "same as topic" },
                    "text": { "type": "string", "maxLength": 200, "description": "case-insensitive substring" },
                    "since_tick": { "type": "integer", "minimum": 0 },
                    "until_tick": { "type": "integer", "minimum": 0 },
                    "within_s": { "type": "number", "exclusiveMinimum": 0 },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 100 }
                },
                "additionalProperties": false
            }),
            output_schema: json!({ "type": "object", "properties": { "entries": { "type": "array" }, "matched": { "type": "integer" }, "retained": { "type": "integer" }, "retained_max": { "type": "integer" } }, "required": ["entries", "matched"] }),
        },
        ToolDescriptor {
            id: BRIDGE_STATUS,
            class: ToolClass::Sensor,
            description: "The bridge's own state (not the world's): sessions, who holds the motion lease, queues and their limits, retained events, last error.",
            capability: "can_observe_world",
            strict_input: false,
            calls_per_minute: Some(120),
            input_schema: json!({ "type": "object", "properties": {} }),
            output_schema: json!({ "type": "object", "properties": { "sessions": { "type": "array" }, "lease_holder": { "type": ["string", "null"] } }, "required": ["sessions", "lease_holder"] }),
        },
    ]
}

enum Admitted {
    /// Answered by the core itself.
    Internal { output: Value, ignored_fields: Vec<String> },
    /// A cancel of a call in flight (its connection and tool).
    Cancel { target_conn: ConnId, cancelled: String, output: Value },
    Execute { descriptor_id: &'static str, input: Map<String, Value>, ignored_fields: Vec<String>, acquired_lease: bool, command: bool },
}

/// Adds an entry to a session's episodic memory, summarising long strings
/// (images) so that memory stays small.
fn remember(memory: &mut VecDeque<MemoryEntry>, tick: u64, at: Instant, kind: &'static str, name: &str, value: &Value) {
    let summary = summarise(value, 0).to_string();
    memory.push_back(MemoryEntry { tick, at, kind, name: name.to_string(), summary });
    while memory.len() > MEMORY_CAPACITY {
        memory.pop_front();
    }
}

/// A compact copy for memory: long strings (images) and deep or long
/// structures are cut, so that a session's memory stays small.
fn summarise(value: &Value, depth: usize) -> Value {
    const MAX_DEPTH: usize = 3;
    const MAX_ITEMS: usize = 12;
    match value {
        Value::String(s) if s.len() > MEMORY_STRING_LIMIT => json!(format!("<{} characters omitted>", s.len())),
        Value::Array(_) | Value::Object(_) if depth >= MAX_DEPTH => json!("<…>"),
        Value::Array(items) => Value::Array(items.iter().take(MAX_ITEMS).map(|v| summarise(v, depth + 1)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "message_id" | "protocol" | "session_id" | "type"))
                .take(MAX_ITEMS * 2)
                .map(|(k, v)| (k.clone(), summarise(v, depth + 1)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Unknown event topics are refused by name.
fn check_opening(opening: &Opening) -> Result<(), AiccError> {
    if let Some(unknown) = opening.subscribe.iter().flatten().find(|t| !KNOWN_TOPICS.contains(&t.as_str())) {
        return Err(AiccError::invalid_input(format!("subscribe: unknown event topic '{unknown}' (known: {})", KNOWN_TOPICS.join(", "))));
    }
    Ok(())
}

fn apply_opening_to(session: &mut SessionState, opening: &Opening) {
    if let Some(topics) = &opening.subscribe {
        session.subscriptions = topics.iter().cloned().collect();
    }
    if let Some(class) = &opening.agent_class {
        session.agent_model = AgentModel::for_class(class);
    }
}

#[cfg(test)]
mod tests;
