//! Sessions: what each one holds (scope, subscriptions, agent model, event
//! ring, calls in flight, memory), how one is opened, adjusted, resumed on
//! another connection, detached, closed and expired, and the manifest it
//! is told.
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::calls::InFlight;
use super::idempotency::IdempotencyKeys;
use super::memory::EpisodicMemory;
use super::{ConnId, Core, Output, DEFAULT_TOPICS, KNOWN_TOPICS};
use crate::protocol::auth::{Credential, Scope};
use crate::protocol::error::{AiccError, ErrorCode};
use crate::protocol::events::EventRing;
use crate::protocol::manifest::{ToolClass, ToolDescriptor};
use crate::protocol::message::{Correlation, Opening};
use crate::protocol::ratelimit::RateLimiter;

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
        Some(Self {
            class: class.into(),
            event_batch: Duration::from_millis(batch_ms),
            heartbeat_interval: Duration::from_secs(heartbeat_s),
        })
    }
}

pub(super) struct Session {
    pub(super) scope: Scope,
    /// Who opened it: only the same credential may resume it, and an
    /// approval is never decided by it.
    pub(super) credential: Credential,
    pub(super) conn: Option<ConnId>,
    pub(super) detached_at: Option<Instant>,
    pub(super) subscriptions: BTreeSet<String>,
    pub(super) agent_model: Option<AgentModel>,
    pub(super) events: EventRing,
    pub(super) limiter: RateLimiter,
    /// Ordered by call_id, so that aborting them all is done in a
    /// reproducible order.
    pub(super) in_flight: BTreeMap<String, InFlight>,
    /// Events waiting for the batch window to close.
    pub(super) batch: Vec<Value>,
    pub(super) batch_started: Option<Instant>,
    pub(super) last_tick_event: u64,
    pub(super) memory: EpisodicMemory,
    pub(super) idempotency: IdempotencyKeys,
}

impl Session {
    pub(super) fn new(
        scope: Scope,
        credential: Credential,
        conn: ConnId,
        event_ring_capacity: usize,
        opening: &Opening,
    ) -> Self {
        let mut session = Self {
            scope,
            credential,
            conn: Some(conn),
            detached_at: None,
            subscriptions: DEFAULT_TOPICS.iter().map(|t| t.to_string()).collect(),
            agent_model: None,
            events: EventRing::new(event_ring_capacity),
            limiter: RateLimiter::default(),
            in_flight: BTreeMap::new(),
            batch: Vec::new(),
            batch_started: None,
            last_tick_event: 0,
            memory: EpisodicMemory::default(),
            idempotency: IdempotencyKeys::default(),
        };
        session.apply_opening(opening);
        session
    }

    /// Subscriptions and agent model, as far as the opening states them
    /// (checked with [`check_opening`] first).
    pub(super) fn apply_opening(&mut self, opening: &Opening) {
        if let Some(topics) = &opening.subscribe {
            self.subscriptions = topics.iter().cloned().collect();
        }
        if let Some(class) = &opening.agent_class {
            self.agent_model = AgentModel::for_class(class);
        }
    }

    pub(super) fn heartbeat_interval(&self, default: Duration) -> Duration {
        self.agent_model.as_ref().map_or(default, |m| m.heartbeat_interval)
    }

    /// Attached, or detached for no longer than `window`.
    pub(super) fn is_resumable(&self, now: Instant, window: Duration) -> bool {
        self.detached_at.is_none_or(|at| now.saturating_duration_since(at) <= window)
    }

    /// Leaves the session without a connection; returns the calls that were
    /// in flight, which can no longer be answered.
    pub(super) fn detach(&mut self, now: Instant) -> BTreeMap<String, InFlight> {
        self.conn = None;
        self.detached_at = Some(now);
        self.batch.clear();
        self.batch_started = None;
        std::mem::take(&mut self.in_flight)
    }
}

/// Unknown event topics are refused by name.
pub(super) fn check_opening(opening: &Opening) -> Result<(), AiccError> {
    if let Some(unknown) =
        opening.subscribe.iter().flatten().find(|t| !KNOWN_TOPICS.contains(&t.as_str()))
    {
        return Err(AiccError::invalid_input(format!(
            "subscribe: unknown event topic '{unknown}' (known: {})",
            KNOWN_TOPICS.join(", ")
        )));
    }
    Ok(())
}

impl Core {
    pub(super) fn new_session(
        &mut self,
        conn: ConnId,
        scope: Scope,
        credential: Credential,
        opening: &Opening,
    ) -> String {
        let id = self.ids.next_id();
        self.sessions.insert(
            id.clone(),
            Session::new(scope, credential, conn, self.config.event_ring_capacity, opening),
        );
        if let Some(state) = self.connections.get_mut(&conn) {
            state.session = Some(id.clone());
        }
        id
    }

    /// `manifest_request`: opens a session on a connection without one, or
    /// adjusts (subscriptions, agent model) and re-sends the manifest.
    pub(super) fn on_manifest_request(
        &mut self,
        conn: ConnId,
        message_id: Option<String>,
        opening: &Opening,
        now: Instant,
    ) -> Output {
        if let Err(error) = check_opening(opening) {
            return self.error_message(
                conn,
                error,
                &Correlation { message_id, call_id: None },
                now,
            );
        }
        let session = match self.connections[&conn].session.clone() {
            Some(session) => match self.sessions.get_mut(&session) {
                Some(state) => {
                    state.apply_opening(opening);
                    session
                }
                None => {
                    let error = AiccError::new(ErrorCode::SessionExpired, false, "session is gone");
                    return self.error_message(
                        conn,
                        error,
                        &Correlation { message_id, call_id: None },
                        now,
                    );
                }
            },
            None => {
                let state = &self.connections[&conn];
                let (scope, credential) =
                    (state.scope.expect("authenticated"), state.credential.expect("authenticated"));
                self.new_session(conn, scope, credential, opening)
            }
        };
        self.session_init(conn, &session, message_id, now)
    }

    pub(super) fn on_resume(
        &mut self,
        conn: ConnId,
        message_id: Option<String>,
        session_id: String,
        cursor: u64,
        opening: Opening,
        now: Instant,
    ) -> Vec<Output> {
        let correlation = Correlation { message_id: message_id.clone(), call_id: None };
        if let Err(error) = check_opening(&opening) {
            return vec![self.error_message(conn, error, &correlation, now)];
        }
        if !self
            .sessions
            .get(&session_id)
            .is_some_and(|s| s.is_resumable(now, self.config.resume_window))
        {
            let error = AiccError::new(ErrorCode::SessionExpired, false, format!("session '{session_id}' is unknown, closed or past its resume window; open a new one with manifest_request"));
            return vec![self.error_message(conn, error, &correlation, now)];
        }
        // A session is its owner's: the same token (or, without tokens, the
        // same unauthenticated peer class) and no live connection on it.
        let credential = self.connections[&conn].credential.expect("authenticated");
        let target = &self.sessions[&session_id];
        if target.credential != credential {
            self.counters.resumes_refused += 1;
            tracing::warn!(
                session = super::short_id(&session_id),
                by = credential.describe(),
                owner = target.credential.describe(),
                "refused: a resume with another credential than the session's"
            );
            let error = AiccError::new(ErrorCode::SessionExpired, false, format!("session '{}' was opened with another token: resuming a session needs the token that opened it", super::short_id(&session_id)));
            return vec![self.error_message(conn, error, &correlation, now)];
        }
        if let Some(owner) = target.conn.filter(|c| *c != conn) {
            self.counters.resumes_refused += 1;
            let silent_for =
                self.connections.get(&owner).map_or(0.0, |c| c.silent_for(now).as_secs_f64());
            let dead_after = (target.heartbeat_interval(self.config.heartbeat_interval)
                * self.config.dead_peer_intervals)
                .as_secs_f64();
            tracing::warn!(
                session = super::short_id(&session_id),
                "refused: a takeover of a session whose owner is connected"
            );
            let error = AiccError::new(
                ErrorCode::SessionExpired,
                true,
                format!("session '{}' is in use by a live connection (heard from {silent_for:.1} s ago): a takeover is refused while its owner is connected. It can be resumed once that connection closes or has been silent for {dead_after:.0} s (dead_peer_intervals heartbeats)", super::short_id(&session_id)),
            );
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
        let scope = self.connections[&conn].scope.expect("authenticated");
        let session = self.sessions.get_mut(&session_id).expect("checked above");
        session.conn = Some(conn);
        session.detached_at = None;
        session.scope = scope;
        session.apply_opening(&opening);
        let replay = session.events.replay_after(cursor, usize::MAX);
        self.connections.get_mut(&conn).expect("known connection").session =
            Some(session_id.clone());
        // Replayed events go first, flagged, so that ticks on the wire never
        // go backwards; the reply that follows counts them.
        let replayed = replay.events.len();
        for event in replay.events {
            let mut message = (*event.message).clone();
            message["meta"]["replayed"] = json!(true);
            out.push(Output::Send { conn, message, droppable: false });
        }
        let tick = self.tick(now);
        let answer = self.message(
            "session_resume",
            &session_id,
            json!({
                "in_reply_to": message_id,
                "resumed": true,
                "cursor": cursor,
                "replayed": replayed,
                "dropped": replay.dropped,
                "next_cursor": replay.next_cursor,
                "meta": { "tick": tick },
            }),
        );
        out.push(self.reply(conn, answer));
        out
    }

    /// `session_close`: answered, then the session is forgotten and the
    /// connection closed.
    pub(super) fn on_session_close(
        &mut self,
        conn: ConnId,
        message_id: Option<String>,
        now: Instant,
    ) -> Vec<Output> {
        let mut out = Vec::new();
        if let Some(session_id) = self.connections.get_mut(&conn).and_then(|c| c.session.take()) {
            let tick = self.tick(now);
            let answer = self.message("session_close", &session_id, json!({ "in_reply_to": message_id, "reason": "closed by agent", "meta": { "tick": tick } }));
            out.push(self.reply(conn, answer));
            self.detach(&session_id, now, "session closed", &mut out);
            self.sessions.remove(&session_id);
        }
        out.push(Output::Close { conn });
        out
    }

    /// The session loses its connection: its calls in flight are aborted
    /// (recorded as events for a resumed agent) and it loses the lease.
    pub(super) fn detach(
        &mut self,
        session_id: &str,
        now: Instant,
        reason: &str,
        out: &mut Vec<Output>,
    ) {
        let Some(session) = self.sessions.get_mut(session_id) else { return };
        let aborted = session.detach(now);
        for (call_id, flight) in aborted {
            self.abort_call(session_id, &call_id, &flight, reason, now, out);
        }
        self.release_lease_of(session_id, now, reason, out);
        self.forget_detached_beyond_the_bound();
    }

    /// Keeps at most `max_detached_sessions` detached sessions: the ones
    /// detached longest ago go first.
    fn forget_detached_beyond_the_bound(&mut self) {
        let mut detached: Vec<(Instant, String)> = self
            .sessions
            .iter()
            .filter_map(|(id, s)| s.detached_at.map(|at| (at, id.clone())))
            .collect();
        let Some(excess) =
            detached.len().checked_sub(self.config.max_detached_sessions).filter(|n| *n > 0)
        else {
            return;
        };
        detached.sort();
        for (_, id) in detached.into_iter().take(excess) {
            tracing::info!(
                session = super::short_id(&id),
                "forgetting a detached session: more than {} are detached (max_detached_sessions)",
                self.config.max_detached_sessions
            );
            self.sessions.remove(&id);
        }
    }

    /// Detached sessions past the resume window are forgotten.
    pub(super) fn expire_detached_sessions(&mut self, now: Instant) {
        let window = self.config.resume_window;
        self.sessions.retain(|_, s| s.is_resumable(now, window));
    }

    /// Whether the manifest lists a tool (`tick_now` only in hybrid mode;
    /// operator tools only where an operator's token is configured).
    pub(super) fn offered(&self, tool: &ToolDescriptor) -> bool {
        (tool.id != super::TICK_NOW || self.config.tick_mode == super::TickMode::Hybrid)
            && self.exists(tool)
    }

    pub(super) fn manifest_json(&self, session_id: &str) -> Value {
        let session = self.sessions.get(session_id);
        let granted: Vec<&str> = session.map_or(Vec::new(), |s| self.capabilities_of(s.scope));
        let usable = |class: ToolClass| -> Vec<&str> {
            self.catalog
                .descriptors()
                .filter(|t| {
                    t.class == class
                        && self.offered(t)
                        && granted.contains(&t.capability)
                        && !self.unavailable.contains_key(t.id)
                })
                .map(|t| t.id)
                .collect()
        };
        let tools: Vec<Value> = self
            .catalog
            .descriptors()
            .filter(|t| self.offered(t))
            .map(ToolDescriptor::to_json)
            .collect();
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
            "heartbeat_interval_s": session.map_or(self.config.heartbeat_interval, |s| s.heartbeat_interval(self.config.heartbeat_interval)).as_secs_f64(),
            "resume_window_s": self.config.resume_window.as_secs_f64(),
            "limits": self.config.limits,
        })
    }

    pub(super) fn session_init(
        &mut self,
        conn: ConnId,
        session_id: &str,
        in_reply_to: Option<String>,
        now: Instant,
    ) -> Output {
        let mut body = self.manifest_json(session_id);
        body["in_reply_to"] = json!(in_reply_to);
        body["meta"] = json!({ "tick": self.tick(now) });
        let message = self.message("session_init", session_id, body);
        self.reply(conn, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opening(class: Option<&str>, subscribe: Option<&[&str]>) -> Opening {
        Opening {
            token: None,
            agent_class: class.map(str::to_string),
            subscribe: subscribe.map(|t| t.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn agent_classes_set_batching_and_heartbeat_cadence() {
        let small = AgentModel::for_class("edge_small").unwrap();
        assert_eq!(
            (small.event_batch, small.heartbeat_interval),
            (Duration::ZERO, Duration::from_secs(5))
        );
        let large = AgentModel::for_class("cloud_large").unwrap();
        assert_eq!(
            (large.event_batch, large.heartbeat_interval),
            (Duration::from_millis(500), Duration::from_secs(30))
        );
        assert_eq!(AgentModel::for_class("huge"), None);
    }

    #[test]
    fn an_opening_replaces_subscriptions_and_sets_the_model_and_unknown_topics_are_refused() {
        let mut session =
            Session::new(Scope::Observe, Credential::Unauthenticated, 1, 4, &Opening::default());
        assert_eq!(session.subscriptions.len(), DEFAULT_TOPICS.len());
        assert_eq!(session.heartbeat_interval(Duration::from_secs(10)), Duration::from_secs(10));
        session.apply_opening(&opening(Some("edge_medium"), Some(&["tick"])));
        assert_eq!(session.subscriptions.iter().collect::<Vec<_>>(), vec!["tick"]);
        assert_eq!(session.heartbeat_interval(Duration::from_secs(10)), Duration::from_secs(10));
        session.apply_opening(&opening(Some("cloud_medium"), None));
        assert_eq!(session.subscriptions.len(), 1, "no subscribe field keeps the subscriptions");
        assert_eq!(session.heartbeat_interval(Duration::from_secs(10)), Duration::from_secs(15));
        let refused = check_opening(&opening(None, Some(&["collision", "gossip"]))).unwrap_err();
        assert!(refused.message.contains("'gossip'"), "{}", refused.message);
    }

    #[test]
    fn a_detached_session_is_resumable_within_the_window_only() {
        let t0 = Instant::now();
        let window = Duration::from_secs(60);
        let mut session =
            Session::new(Scope::Observe, Credential::Unauthenticated, 1, 4, &Opening::default());
        assert!(
            session.is_resumable(t0 + window * 10, window),
            "an attached session is always resumable"
        );
        session.batch.push(json!({}));
        assert!(session.detach(t0).is_empty());
        assert_eq!(
            (session.conn, session.batch.len()),
            (None, 0),
            "a detached session has no connection and no pending batch"
        );
        assert!(session.is_resumable(t0 + window, window));
        assert!(!session.is_resumable(t0 + window + Duration::from_millis(1), window));
    }
}
