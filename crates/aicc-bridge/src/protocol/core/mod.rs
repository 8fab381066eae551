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
//!
//! [`Core`] is the one entry point; each concern has its own file:
//! `connections` (per-connection state, authentication, heartbeats),
//! `sessions` (opening, resume, close, the manifest), `delivery` (events to
//! a session: ring, memory, batches), `calls` (admission and completion of
//! tool calls), `lease` (the motion lease), `idempotency`, `memory`
//! (episodic memory) and `builtin` (the tools the core answers itself, and
//! status).
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::auth::{Credential, Scope, Tokens};
use super::catalog::Catalog;
use super::clock::TickClock;
use super::error::{AiccError, ErrorCode};
use super::ids::{IdSource, RandomIds};
use super::manifest::ToolDescriptor;
use super::message::{decode, envelope, Correlation, Inbound};

mod approvals;
mod builtin;
mod calls;
mod connections;
mod delivery;
mod idempotency;
mod junk;
mod lease;
mod memory;
mod sessions;

pub use approvals::{approval_tool_descriptors, ApprovalRules};
pub use builtin::{core_tool_descriptors, CANCEL, TICK_NOW};
pub use junk::looks_like_http;

use builtin::{Counters, ShellFacts};
use connections::Connection;
use lease::Lease;
use sessions::Session;

/// A tool's successful outcome, as the tool layer reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSuccess {
    pub output: Value,
    /// Where the data came from (`meta.source`), e.g. the ROS topic.
    pub source: String,
}

/// A connection, as numbered by the shell.
pub(crate) type ConnId = u64;

/// Event topics every session is subscribed to unless it says otherwise:
/// the reserved topics of AICC section 6 (but `tick`, which is opt-in) and
/// the bridge's own.
pub(crate) const DEFAULT_TOPICS: &[&str] = &[
    "collision",
    "audio",
    "state_change",
    "agent_message",
    "lease",
    "command",
    "governor",
    "call_aborted",
    "approval",
];
/// Every topic a session may subscribe to.
pub(crate) const KNOWN_TOPICS: &[&str] = &[
    "tick",
    "collision",
    "audio",
    "state_change",
    "agent_message",
    "lease",
    "command",
    "governor",
    "call_aborted",
    "tool_result",
    "approval",
];

/// How the tick advances (AICC section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
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
    /// Detached sessions kept at most; beyond it the longest detached is
    /// forgotten first (a peer opening and dropping connections in a loop
    /// cannot grow them without bound within the resume window).
    pub max_detached_sessions: usize,
    /// Heartbeat interval when the agent declares no model class.
    pub heartbeat_interval: Duration,
    /// A peer silent for this many heartbeat intervals is taken as dead.
    pub dead_peer_intervals: u32,
    /// The motion lease lapses after this long without actuator activity.
    pub lease_timeout: Duration,
    pub tokens: Tokens,
    /// Scope of sessions when no tokens are configured (loopback only):
    /// observe or actuate (operator tools need an operator's token).
    pub unauthenticated_scope: Scope,
    /// Sessions of the actuate scope may call generators (world edits).
    pub agents_may_modify_world: bool,
    /// Lines that are not JSON at all a connection may send before it is
    /// closed (a line that looks like HTTP closes it at once).
    pub max_undecodable_lines: u32,
    /// Failed authentication attempts before the connection is closed.
    pub max_auth_failures: u32,
    /// A connection not authenticated this long after it opened is closed.
    pub handshake_timeout: Duration,
    /// The safety limits in force, stated in the manifest (session
    /// metadata: what the governor allows, not the state of the world).
    pub limits: Value,
    /// What waits for an operator's approval.
    pub approvals: ApprovalRules,
}

/// What the core asks the shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Write to a connection. Replies are never dropped; events may be
    /// dropped (and counted) by a full outbound queue.
    Send { conn: ConnId, message: Value, droppable: bool },
    /// Run a tool; report with [`Core::on_tool_finished`]. `deadline` is
    /// the agent's own (`deadline_ms`), on top of the bridge's tool timeout.
    Execute {
        conn: ConnId,
        session: String,
        call_id: String,
        tool: String,
        input: Map<String, Value>,
        deadline: Option<Duration>,
    },
    /// Stop running a call (cancelled): drop its task, which stops what it moved.
    Abort { conn: ConnId, call_id: String },
    /// Close the connection once what was sent before is written.
    Close { conn: ConnId },
    /// The motion lease was released (or lapsed): stop the robot's motion.
    LeaseReleased { session: String },
    /// A `stop` the core answered itself (nothing moved since the last one
    /// ran): halt again, cheaply (the base brakes, motions begun before
    /// end), with no event to every session.
    Halt,
}

pub struct Core {
    config: CoreConfig,
    catalog: Arc<Catalog>,
    clock: TickClock,
    /// Ticks added by events (event mode) or `tick_now` (hybrid mode).
    extra_ticks: u64,
    /// Last tick handed out: ticks never go backwards on the wire.
    last_tick: u64,
    sessions: BTreeMap<String, Session>,
    connections: BTreeMap<ConnId, Connection>,
    lease: Lease,
    /// Tools whose data source is missing now (e.g. a dead sensor topic).
    unavailable: BTreeMap<String, String>,
    last_error: Option<String>,
    counters: Counters,
    shell: ShellFacts,
    /// Every message id and session id the core hands out.
    ids: Box<dyn IdSource>,
    /// Every actuator call waits for approval while on (admins switch it).
    approval_mode: bool,
    /// An operator's hold (the console's STOP): every actuator call waits
    /// for an operator until an operator releases it. Not approval mode:
    /// switching that off does not release it.
    hold: Option<approvals::Hold>,
    /// Whether anything may have moved since the last `stop` ran: when
    /// not, another stop is answered by the core (see `calls`).
    moved_since_stop: bool,
    /// The last `stop` that ran: who, and when.
    last_stop: Option<(String, Instant)>,
}

/// The first characters of a session id: enough to tell sessions apart,
/// not enough to resume one.
fn short_id(session: &str) -> &str {
    &session[..session.len().min(8)]
}

impl Core {
    /// A core with random (UUID v4) ids, as a served bridge needs.
    pub fn new(config: CoreConfig, catalog: Arc<Catalog>, start: Instant) -> Self {
        Self::with_ids(config, catalog, start, RandomIds)
    }

    /// A core drawing its ids from `ids`: with
    /// [`SequentialIds`](super::ids::SequentialIds) its output is the same
    /// on every run with the same input.
    pub fn with_ids(
        config: CoreConfig,
        catalog: Arc<Catalog>,
        start: Instant,
        ids: impl IdSource + 'static,
    ) -> Self {
        Self {
            approval_mode: config.approvals.approval_mode,
            clock: TickClock::new(start, config.tick_rate_hz),
            config,
            catalog,
            extra_ticks: 0,
            last_tick: 0,
            sessions: BTreeMap::new(),
            connections: BTreeMap::new(),
            lease: Lease::default(),
            unavailable: BTreeMap::new(),
            last_error: None,
            counters: Counters::default(),
            shell: ShellFacts::default(),
            ids: Box::new(ids),
            hold: None,
            moved_since_stop: true,
            last_stop: None,
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

    /// A new connection. Without tokens it gets a session at once;
    /// with tokens it must authenticate first, and is sent nothing until then.
    pub fn on_connect(&mut self, conn: ConnId, now: Instant) -> Vec<Output> {
        let granted = (!self.auth_required())
            .then_some((self.config.unauthenticated_scope, Credential::Unauthenticated));
        self.open_connection(conn, granted, now)
    }

    /// A connection from inside the bridge process (a second front end,
    /// such as the AI-control dialect, named `front_end`), granted `scope`
    /// without a token. Only code in this process can open one: no
    /// listener leads here.
    pub fn on_connect_in_process(
        &mut self,
        conn: ConnId,
        scope: Scope,
        front_end: &'static str,
        now: Instant,
    ) -> Vec<Output> {
        self.open_connection(conn, Some((scope, Credential::InProcess(front_end))), now)
    }

    /// The capabilities `scope` grants on this bridge: the scope's own,
    /// plus world edits for agents where the configuration allows them.
    pub fn capabilities_of(&self, scope: Scope) -> Vec<&'static str> {
        let mut granted = scope.capabilities().to_vec();
        if scope == Scope::Actuate && self.config.agents_may_modify_world {
            granted.push("can_modify_world");
        }
        granted
    }

    /// Whether a tool exists on this bridge for anyone: operator tools only
    /// when an operator's (admin) token is configured.
    pub(super) fn exists(&self, tool: &ToolDescriptor) -> bool {
        let operator_only = match tool.capability {
            "can_administer_bridge" => true,
            "can_modify_world" => !self.config.agents_may_modify_world,
            _ => false,
        };
        !operator_only || self.config.tokens.grants(Scope::Admin)
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

    /// One line from a connection.
    pub fn on_line(&mut self, conn: ConnId, line: &[u8], now: Instant) -> Vec<Output> {
        let Some(state) = self.connections.get_mut(&conn) else { return Vec::new() };
        state.heard(now);
        let authenticated = state.is_authenticated();
        if let Some(closing) = self.refuse_cross_protocol(conn, line, now) {
            return closing;
        }
        let (inbound, named_session) = match decode(line) {
            Ok(decoded) => (decoded.inbound, decoded.session_id),
            Err((error, correlation)) => {
                self.counters.protocol_errors += 1;
                if let Some(closing) = self.count_undecodable(conn, line, &error, now) {
                    return closing;
                }
                return vec![self.error_message(conn, error, &correlation, now)];
            }
        };
        if !authenticated {
            return self.authenticate(conn, inbound, now);
        }
        // A message naming another session than the connection's is refused:
        // switching sessions is what session_resume is for.
        let own = self.connections[&conn].session.clone();
        if let (Some(named), Some(own), false) =
            (&named_session, &own, matches!(inbound, Inbound::SessionResume { .. }))
        {
            if named != own {
                self.counters.protocol_errors += 1;
                let (message_id, call_id) = match &inbound {
                    Inbound::ToolCall(call) => {
                        (call.message_id.clone(), Some(call.call_id.clone()))
                    }
                    Inbound::ManifestRequest { message_id, .. }
                    | Inbound::Heartbeat { message_id }
                    | Inbound::SessionClose { message_id }
                    | Inbound::SessionResume { message_id, .. } => (message_id.clone(), None),
                };
                let error = AiccError::new(ErrorCode::SessionExpired, false, format!("session_id '{named}' is not this connection's session; use session_resume to attach to another"));
                return vec![self.error_message(
                    conn,
                    error,
                    &Correlation { message_id, call_id },
                    now,
                )];
            }
        }
        self.dispatch(conn, inbound, now)
    }

    /// A message from an authenticated connection, to the concern it is for.
    fn dispatch(&mut self, conn: ConnId, inbound: Inbound, now: Instant) -> Vec<Output> {
        match inbound {
            Inbound::ToolCall(call) => self.on_tool_call(conn, call, now),
            Inbound::ManifestRequest { message_id, opening } => {
                vec![self.on_manifest_request(conn, message_id, &opening, now)]
            }
            Inbound::SessionResume { message_id, session_id, cursor, opening } => {
                self.on_resume(conn, message_id, session_id, cursor, opening, now)
            }
            Inbound::Heartbeat { message_id } => {
                let session = self.connections[&conn].session.clone().unwrap_or_default();
                let tick = self.tick(now);
                let answer = self.message(
                    "heartbeat",
                    &session,
                    json!({ "in_reply_to": message_id, "meta": { "tick": tick } }),
                );
                vec![self.reply(conn, answer)]
            }
            Inbound::SessionClose { message_id } => self.on_session_close(conn, message_id, now),
        }
    }

    /// A tool's outcome; its result goes to the session's connection, or
    /// into its event ring when the agent is away.
    pub fn on_tool_finished(
        &mut self,
        session_id: &str,
        call_id: &str,
        outcome: Result<ToolSuccess, AiccError>,
        now: Instant,
    ) -> Vec<Output> {
        self.finish_call(session_id, call_id, outcome, now)
    }

    /// Publishes an event to every session subscribed to `topic` (or only
    /// to `audience`).
    pub fn publish(
        &mut self,
        topic: &str,
        payload: Value,
        audience: Option<&str>,
        now: Instant,
    ) -> Vec<Output> {
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

    /// Marks a tool unavailable (its data source is gone) or available
    /// again, and pushes the manifest change to every agent in a heartbeat
    /// (AICC section 8).
    pub fn set_tool_availability(
        &mut self,
        tool: &str,
        unavailable_reason: Option<String>,
        now: Instant,
    ) -> Vec<Output> {
        self.set_tools_availability(vec![(tool.to_string(), unavailable_reason)], now)
    }

    /// Several tools' availability at once (one sensor feeds several
    /// tools): one manifest update per agent for all the changes, not one
    /// per tool, so that what a sensor dropout queues to each connection
    /// does not grow with the number of tools.
    pub fn set_tools_availability(
        &mut self,
        changes: Vec<(String, Option<String>)>,
        now: Instant,
    ) -> Vec<Output> {
        let mut changed = Vec::new();
        for (tool, unavailable_reason) in changes {
            let change = match &unavailable_reason {
                Some(reason) => {
                    self.unavailable.insert(tool.clone(), reason.clone()).is_none().then(
                        || json!({ "entity": tool, "change": "unavailable", "reason": reason }),
                    )
                }
                None => self
                    .unavailable
                    .remove(&tool)
                    .map(|was| json!({ "entity": tool, "change": "available", "was": was })),
            };
            changed.extend(change);
        }
        if changed.is_empty() {
            return Vec::new();
        }
        let tick = self.tick(now);
        let attached: Vec<(String, ConnId)> =
            self.sessions.iter().filter_map(|(id, s)| s.conn.map(|c| (id.clone(), c))).collect();
        let mut out: Vec<Output> = attached
            .into_iter()
            .map(|(session, conn)| {
                let manifest = self.manifest_json(&session);
                let update = self.message(
                    "heartbeat",
                    &session,
                    json!({ "manifest_update": manifest, "meta": { "tick": tick } }),
                );
                self.reply(conn, update)
            })
            .collect();
        // A sensor going stale or coming back is also a state change agents
        // can subscribe to (and find in their history).
        for change in changed {
            out.extend(self.publish("state_change", change, None, now));
        }
        out
    }

    /// Periodic work: tick events, event batches, heartbeats, dead peers,
    /// expired sessions and lapsed leases. Call at least at the tick rate.
    pub fn on_timer(&mut self, now: Instant) -> Vec<Output> {
        let mut out = Vec::new();
        let tick = self.tick(now);
        self.push_tick_events(tick, now, &mut out);
        self.flush_closed_batches(now, &mut out);
        self.check_peers(tick, now, &mut out);
        self.expire_detached_sessions(now);
        self.lapse_idle_lease(now, &mut out);
        self.time_out_approvals(now, &mut out);
        out
    }

    /// A bridge message addressed to `session_id`, in the common envelope.
    fn message(&mut self, kind: &str, session_id: &str, body: Value) -> Value {
        envelope(kind, session_id, self.ids.next_id(), body)
    }

    fn reply(&self, conn: ConnId, message: Value) -> Output {
        Output::Send { conn, message, droppable: false }
    }

    /// A top-level `error`, correlated as far as the line allowed.
    pub fn error_message(
        &mut self,
        conn: ConnId,
        error: AiccError,
        correlation: &Correlation,
        now: Instant,
    ) -> Output {
        let session =
            self.connections.get(&conn).and_then(|c| c.session.clone()).unwrap_or_default();
        let mut body = error.to_json();
        body["in_reply_to"] = json!(correlation.message_id);
        if let Some(call_id) = &correlation.call_id {
            body["call_id"] = json!(call_id);
        }
        body["meta"] = json!({ "tick": self.tick(now) });
        let message = self.message("error", &session, body);
        self.reply(conn, message)
    }

    /// The session a connection is attached to.
    pub fn session_of(&self, conn: ConnId) -> Option<&str> {
        self.connections.get(&conn).and_then(|c| c.session.as_deref())
    }

    /// Who holds the motion lease.
    pub fn lease_holder(&self) -> Option<&str> {
        self.lease.holder()
    }

    pub fn known_tools(&self) -> HashSet<&'static str> {
        self.catalog.descriptors().map(|d| d.id).collect()
    }
}

#[cfg(test)]
mod tests;
