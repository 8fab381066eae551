//! The events the adapter has seen, for the `events` tool and resource:
//! a bounded log with a cursor of its own (`next`), so that a host reads
//! what came after its last read and learns how many it missed.
use std::collections::VecDeque;

use serde_json::{json, Value};

/// How many events are kept; older ones are dropped (and counted).
pub const EVENTS_KEPT: usize = 512;
/// Events returned by one read when the host names no limit.
pub const DEFAULT_PAGE: usize = 50;
/// The most events one read returns.
pub const MAX_PAGE: usize = 200;

/// One page of events after a cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct EventsPage {
    pub events: Vec<Value>,
    /// The cursor to pass next time.
    pub next: u64,
    /// Events after the cursor that are no longer kept.
    pub dropped: u64,
}

impl EventsPage {
    pub fn to_json(&self) -> Value {
        json!({ "events": self.events, "next": self.next, "dropped": self.dropped })
    }
}

/// The log; event `n` (from 0) has cursor `n + 1` as its `next`.
#[derive(Debug)]
pub struct EventLog {
    kept: VecDeque<Value>,
    capacity: usize,
    /// Events ever pushed.
    pushed: u64,
}

impl Default for EventLog {
    fn default() -> Self {
        Self::with_capacity(EVENTS_KEPT)
    }
}

impl EventLog {
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            kept: VecDeque::with_capacity(capacity.min(1024)),
            capacity: capacity.max(1),
            pushed: 0,
        }
    }

    pub fn push(&mut self, event: Value) {
        if self.kept.len() == self.capacity {
            self.kept.pop_front();
        }
        self.kept.push_back(event);
        self.pushed += 1;
    }

    /// The cursor after the newest event.
    pub fn head(&self) -> u64 {
        self.pushed
    }

    /// Up to `limit` events after `since` (every kept one when `None`)
    /// whose topic is among `topics` (all when empty), oldest first. `next`
    /// is past the last event looked at, so that filtered-out events are not
    /// looked at again.
    pub fn after(&self, since: Option<u64>, topics: &[String], limit: usize) -> EventsPage {
        let first_kept = self.pushed - self.kept.len() as u64;
        let since = since.unwrap_or(first_kept).min(self.pushed);
        let dropped = first_kept.saturating_sub(since);
        let start = since.max(first_kept);
        let mut events = Vec::new();
        let mut next = start;
        for event in self.kept.iter().skip((start - first_kept) as usize) {
            if events.len() == limit {
                break;
            }
            next += 1;
            let topic = event.get("topic").and_then(Value::as_str).unwrap_or("");
            if topics.is_empty() || topics.iter().any(|t| t == topic) {
                events.push(event.clone());
            }
        }
        EventsPage { events, next, dropped }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(topic: &str, n: u64) -> Value {
        json!({ "topic": topic, "n": n })
    }

    #[test]
    fn a_reader_gets_what_came_after_its_cursor_and_then_nothing_new() {
        let mut log = EventLog::with_capacity(10);
        for n in 0..3 {
            log.push(event("collision", n));
        }
        let page = log.after(None, &[], DEFAULT_PAGE);
        assert_eq!((page.events.len(), page.next, page.dropped), (3, 3, 0));
        assert_eq!(log.after(Some(page.next), &[], DEFAULT_PAGE).events, Vec::<Value>::new());
        log.push(event("lease", 3));
        assert_eq!(log.after(Some(page.next), &[], DEFAULT_PAGE).events, vec![event("lease", 3)]);
        assert_eq!(
            log.after(Some(99), &[], DEFAULT_PAGE).next,
            4,
            "a cursor from the future is taken as the head"
        );
    }

    #[test]
    fn events_past_the_capacity_are_dropped_and_counted() {
        let mut log = EventLog::with_capacity(4);
        for n in 0..10 {
            log.push(event("command", n));
        }
        let page = log.after(Some(2), &[], DEFAULT_PAGE);
        assert_eq!(
            (page.dropped, page.events.first().cloned(), page.next),
            (4, Some(event("command", 6)), 10)
        );
        assert_eq!(
            log.after(None, &[], DEFAULT_PAGE).dropped,
            0,
            "without a cursor nothing was missed"
        );
    }

    #[test]
    fn a_limit_and_topics_are_honoured_and_the_cursor_skips_what_was_filtered() {
        let mut log = EventLog::with_capacity(10);
        for (n, topic) in ["command", "lease", "command", "command"].iter().enumerate() {
            log.push(event(topic, n as u64));
        }
        let page = log.after(Some(0), &["lease".to_string()], DEFAULT_PAGE);
        assert_eq!((page.events, page.next), (vec![event("lease", 1)], 4));
        let page = log.after(Some(0), &[], 2);
        assert_eq!((page.events.len(), page.next), (2, 2));
    }
}
