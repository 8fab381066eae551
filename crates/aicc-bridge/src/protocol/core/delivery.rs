//! How an event reaches a session: kept in its ring (with a sequence
//! number, for replay) and in its memory, then sent at once or held for
//! the batch window of its agent model.
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use super::sessions::Session;
use super::{ConnId, Core, Output};

impl Session {
    /// Keeps an event (already enveloped) and says whether to send it now;
    /// a batched one waits for [`Session::take_closed_batch`].
    fn keep_event(
        &mut self,
        topic: &str,
        tick: u64,
        message: Value,
        now: Instant,
    ) -> Option<(ConnId, Value)> {
        self.events.push(Arc::new(message.clone()));
        if topic != "tick" {
            self.memory.remember(tick, now, "event", topic, &message["payload"]);
        }
        let conn = self.conn?;
        match self.agent_model.as_ref().map(|m| m.event_batch).filter(|b| !b.is_zero()) {
            None => Some((conn, message)),
            Some(_) => {
                self.batch_started.get_or_insert(now);
                self.batch.push(message);
                None
            }
        }
    }

    /// The batched events, once the batch window has closed.
    fn take_closed_batch(&mut self, now: Instant) -> Option<(ConnId, Vec<Value>)> {
        let (Some(conn), Some(started), Some(model)) =
            (self.conn, self.batch_started, self.agent_model.as_ref())
        else {
            return None;
        };
        if now.saturating_duration_since(started) < model.event_batch {
            return None;
        }
        self.batch_started = None;
        Some((conn, std::mem::take(&mut self.batch)))
    }
}

impl Core {
    /// An event for one session, if it is subscribed to `topic`.
    pub(super) fn push_event(
        &mut self,
        session_id: &str,
        topic: &str,
        payload: Value,
        now: Instant,
        out: &mut Vec<Output>,
    ) {
        let tick = self.tick(now);
        let seq = match self.sessions.get(session_id) {
            Some(session) if session.subscriptions.contains(topic) => session.events.next_seq(),
            _ => return,
        };
        let message = self.message(
            "event",
            session_id,
            json!({ "topic": topic, "payload": payload, "meta": { "tick": tick, "seq": seq } }),
        );
        let session = self.sessions.get_mut(session_id).expect("looked up above");
        if let Some((conn, message)) = session.keep_event(topic, tick, message, now) {
            out.push(Output::Send { conn, message, droppable: true });
        }
    }

    /// A `tick` event for each subscriber that has not seen this tick.
    pub(super) fn push_tick_events(&mut self, tick: u64, now: Instant, out: &mut Vec<Output>) {
        let subscribers: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.subscriptions.contains("tick") && s.last_tick_event < tick)
            .map(|(id, _)| id.clone())
            .collect();
        for session in subscribers {
            self.sessions.get_mut(&session).expect("listed").last_tick_event = tick;
            self.push_event(&session, "tick", json!({ "tick": tick }), now, out);
        }
    }

    /// Sends the batches whose window has closed.
    pub(super) fn flush_closed_batches(&mut self, now: Instant, out: &mut Vec<Output>) {
        for session in self.sessions.values_mut() {
            if let Some((conn, batch)) = session.take_closed_batch(now) {
                out.extend(batch.into_iter().map(|message| Output::Send {
                    conn,
                    message,
                    droppable: true,
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::protocol::auth::Scope;
    use crate::protocol::message::Opening;

    fn remembered(session: &Session) -> u64 {
        session.memory.query(&serde_json::Map::new())["retained"].as_u64().unwrap()
    }

    fn session(class: Option<&str>) -> Session {
        Session::new(
            Scope::Observe,
            crate::protocol::auth::Credential::Unauthenticated,
            7,
            4,
            &Opening { agent_class: class.map(str::to_string), ..Opening::default() },
        )
    }

    #[test]
    fn without_a_batch_window_an_event_is_sent_at_once_and_kept() {
        let t0 = Instant::now();
        let mut session = session(Some("edge_small"));
        let sent = session.keep_event("collision", 3, json!({ "payload": { "n": 1 } }), t0);
        assert_eq!(sent, Some((7, json!({ "payload": { "n": 1 } }))));
        assert_eq!((session.events.len(), remembered(&session)), (1, 1));
        session.keep_event("tick", 4, json!({ "payload": { "tick": 4 } }), t0);
        assert_eq!(
            (session.events.len(), remembered(&session)),
            (2, 1),
            "tick events are not remembered"
        );
        session.detach(t0);
        assert_eq!(
            session.keep_event("collision", 5, json!({}), t0),
            None,
            "a detached session only keeps it"
        );
        assert_eq!(session.events.len(), 3);
    }

    #[test]
    fn a_batch_is_held_until_its_window_closes() {
        let t0 = Instant::now();
        let mut session = session(Some("edge_medium"));
        assert_eq!(session.keep_event("collision", 1, json!({ "n": 1 }), t0), None);
        assert_eq!(
            session.keep_event("collision", 1, json!({ "n": 2 }), t0 + Duration::from_millis(50)),
            None
        );
        assert_eq!(session.take_closed_batch(t0 + Duration::from_millis(99)), None);
        assert_eq!(
            session.take_closed_batch(t0 + Duration::from_millis(100)),
            Some((7, vec![json!({ "n": 1 }), json!({ "n": 2 })]))
        );
        assert_eq!(
            session.take_closed_batch(t0 + Duration::from_millis(300)),
            None,
            "the window opens again with the next event"
        );
    }
}
