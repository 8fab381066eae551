//! Connections: what the core knows of each one (its session, its granted
//! scope, when it was last heard from), authentication, heartbeats and
//! dead peers.
use std::time::{Duration, Instant};

use serde_json::json;

use super::{ConnId, Core, Output};
use crate::protocol::auth::{Credential, Scope};
use crate::protocol::error::AiccError;
use crate::protocol::message::{Correlation, Inbound};

pub(super) struct Connection {
    pub(super) session: Option<String>,
    /// Granted scope once authenticated (or at once without tokens).
    pub(super) scope: Option<Scope>,
    /// Who it proved to be, once authenticated.
    pub(super) credential: Option<Credential>,
    auth_failures: u32,
    /// Lines that were not JSON at all (see `junk`).
    pub(super) undecodable: u32,
    opened: Instant,
    last_inbound: Instant,
    last_heartbeat_sent: Instant,
}

impl Connection {
    pub(super) fn new(granted: Option<(Scope, Credential)>, now: Instant) -> Self {
        Self {
            session: None,
            scope: granted.map(|g| g.0),
            credential: granted.map(|g| g.1),
            auth_failures: 0,
            undecodable: 0,
            opened: now,
            last_inbound: now,
            last_heartbeat_sent: now,
        }
    }

    pub(super) fn is_authenticated(&self) -> bool {
        self.scope.is_some()
    }

    /// Something arrived: the peer is alive.
    pub(super) fn heard(&mut self, now: Instant) {
        self.last_inbound = now;
    }

    /// Counts a refused token; true once `max_failures` were refused, when
    /// the connection is to be closed.
    pub(super) fn refuse_token(&mut self, max_failures: u32) -> bool {
        self.auth_failures += 1;
        self.auth_failures >= max_failures
    }

    /// Still not authenticated `bound` after it opened: a peer holding a
    /// connection slot without presenting a token.
    pub(super) fn is_past_handshake(&self, now: Instant, bound: Duration) -> bool {
        !self.is_authenticated() && now.saturating_duration_since(self.opened) > bound
    }

    /// How long since it was last heard from.
    pub(super) fn silent_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_inbound)
    }

    /// Silent for longer than `intervals` heartbeat intervals: taken as dead.
    pub(super) fn is_silent(&self, now: Instant, interval: Duration, intervals: u32) -> bool {
        now.saturating_duration_since(self.last_inbound) > interval * intervals
    }

    /// Whether a heartbeat is due (never before authentication: nothing is
    /// sent until then); a due heartbeat counts as sent.
    pub(super) fn take_due_heartbeat(&mut self, now: Instant, interval: Duration) -> bool {
        let due = self.is_authenticated()
            && now.saturating_duration_since(self.last_heartbeat_sent) >= interval;
        if due {
            self.last_heartbeat_sent = now;
        }
        due
    }
}

impl Core {
    pub(super) fn open_connection(
        &mut self,
        conn: ConnId,
        granted: Option<(Scope, Credential)>,
        now: Instant,
    ) -> Vec<Output> {
        self.counters.connections_total += 1;
        self.connections.insert(conn, Connection::new(granted, now));
        match granted {
            Some((scope, credential)) => {
                let session = self.new_session(conn, scope, credential, &Default::default());
                vec![self.session_init(conn, &session, None, now)]
            }
            None => Vec::new(),
        }
    }

    /// Before authentication only messages carrying `auth.token` are heard.
    pub(super) fn authenticate(
        &mut self,
        conn: ConnId,
        inbound: Inbound,
        now: Instant,
    ) -> Vec<Output> {
        let (message_id, token) = match &inbound {
            Inbound::ManifestRequest { message_id, opening }
            | Inbound::SessionResume { message_id, opening, .. } => {
                (message_id.clone(), opening.token.clone())
            }
            Inbound::ToolCall(call) => (call.message_id.clone(), None),
            Inbound::Heartbeat { message_id } | Inbound::SessionClose { message_id } => {
                (message_id.clone(), None)
            }
        };
        let correlation = Correlation { message_id, call_id: None };
        let Some(token) = token else {
            let error = AiccError::invalid_input("authentication required: open with manifest_request or session_resume carrying auth.token");
            return vec![self.error_message(conn, error, &correlation, now)];
        };
        match self.config.tokens.identify(&token) {
            Some((scope, credential)) => {
                let state = self.connections.get_mut(&conn).expect("known connection");
                state.scope = Some(scope);
                state.credential = Some(credential);
                // Only openings carry a token: this opens (or resumes) the session.
                self.dispatch(conn, inbound, now)
            }
            None => {
                let close = self
                    .connections
                    .get_mut(&conn)
                    .expect("known connection")
                    .refuse_token(self.config.max_auth_failures);
                self.last_error = Some(format!("authentication failed on connection {conn}"));
                let error = AiccError::invalid_input("authentication failed: token not accepted");
                let mut out = vec![self.error_message(conn, error, &correlation, now)];
                if close {
                    out.push(Output::Close { conn });
                }
                out
            }
        }
    }

    /// Heartbeats where due, at each session's cadence; silent peers are
    /// closed and their sessions detached.
    pub(super) fn check_peers(&mut self, tick: u64, now: Instant, out: &mut Vec<Output>) {
        let conns: Vec<ConnId> = self.connections.keys().copied().collect();
        for conn in conns {
            let state = &self.connections[&conn];
            if state.is_past_handshake(now, self.config.handshake_timeout) {
                let bound = self.config.handshake_timeout.as_secs_f64();
                tracing::info!(conn, "not authenticated within {bound:.1} s: closing");
                let error = AiccError::invalid_input(format!("authentication not completed within {bound:.1} s of connecting (handshake_timeout_s); closing the connection"));
                out.push(self.error_message(conn, error, &Correlation::default(), now));
                out.push(Output::Close { conn });
                out.extend(self.on_disconnect(conn, now));
                continue;
            }
            let interval = state
                .session
                .as_ref()
                .and_then(|s| self.sessions.get(s))
                .map_or(self.config.heartbeat_interval, |s| {
                    s.heartbeat_interval(self.config.heartbeat_interval)
                });
            if state.is_silent(now, interval, self.config.dead_peer_intervals) {
                tracing::info!(
                    conn,
                    "peer silent for {} heartbeat intervals: closing",
                    self.config.dead_peer_intervals
                );
                out.push(Output::Close { conn });
                out.extend(self.on_disconnect(conn, now));
                continue;
            }
            let state = self.connections.get_mut(&conn).expect("listed");
            if state.take_due_heartbeat(now, interval) {
                let session = state.session.clone().unwrap_or_default();
                let message = self.message(
                    "heartbeat",
                    &session,
                    json!({ "interval_s": interval.as_secs_f64(), "meta": { "tick": tick } }),
                );
                out.push(Output::Send { conn, message, droppable: true });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_silent_after_the_given_intervals_and_heartbeats_when_due() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let mut connection =
            Connection::new(Some((Scope::Observe, Credential::Unauthenticated)), t0);
        assert!(
            !connection.is_silent(t0 + 3 * second, second, 3),
            "exactly three intervals is not yet silent"
        );
        assert!(connection.is_silent(t0 + 4 * second, second, 3));
        connection.heard(t0 + 4 * second);
        assert!(!connection.is_silent(t0 + 5 * second, second, 3));
        assert!(!connection.take_due_heartbeat(t0 + second / 2, second));
        assert!(connection.take_due_heartbeat(t0 + second, second));
        assert!(
            !connection.take_due_heartbeat(t0 + second, second),
            "a due heartbeat counts as sent"
        );
    }

    #[test]
    fn an_unauthenticated_connection_gets_no_heartbeat_and_is_closed_after_the_last_refused_token()
    {
        let t0 = Instant::now();
        let mut connection = Connection::new(None, t0);
        assert!(
            !connection.take_due_heartbeat(t0 + Duration::from_secs(60), Duration::from_secs(1))
        );
        assert_eq!(
            (connection.refuse_token(3), connection.refuse_token(3), connection.refuse_token(3)),
            (false, false, true)
        );
    }
}
