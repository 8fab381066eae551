//! The bounded event history of a session: sequence numbers, and replay
//! from a cursor that says how many events were lost to the bound (the
//! RFC's `events {since} -> {events, next, dropped}`).
use std::sync::Arc;

use serde_json::Value;

use crate::history::SequencedRing;

/// One retained event message (already enveloped, with meta.seq).
#[derive(Debug, Clone)]
pub struct StoredEvent {
    /// Also in the message's meta; the tests read it here.
    #[cfg_attr(not(test), allow(dead_code))]
    pub seq: u64,
    pub message: Arc<Value>,
}

/// What a replay returns.
#[derive(Debug, Clone)]
pub struct Replay {
    pub events: Vec<StoredEvent>,
    /// Events after the cursor that were evicted before they could be replayed.
    pub dropped: u64,
    /// The cursor to use next time (the last sequence number issued).
    pub next_cursor: u64,
}

/// An event as the ring keeps it; its sequence number is the ring's.
#[derive(Debug)]
struct Retained {
    message: Arc<Value>,
}

#[derive(Debug)]
pub struct EventRing {
    events: SequencedRing<Retained>,
}

impl EventRing {
    pub fn new(capacity: usize) -> Self {
        Self { events: SequencedRing::new(capacity) }
    }

    /// The sequence number the next event will get.
    pub fn next_seq(&self) -> u64 {
        self.events.next_seq()
    }

    pub fn last_seq(&self) -> u64 {
        self.events.last_seq()
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn capacity(&self) -> usize {
        self.events.capacity()
    }

    /// Appends an event built for sequence number `next_seq()`.
    pub fn push(&mut self, message: Arc<Value>) -> u64 {
        self.events.push(Retained { message })
    }

    /// Events with a sequence number above `cursor`, at most `limit`.
    pub fn replay_after(&self, cursor: u64, limit: usize) -> Replay {
        let page = self.events.after(cursor, limit);
        let events = page
            .items
            .into_iter()
            .map(|(seq, event)| StoredEvent { seq, message: event.message.clone() })
            .collect();
        Replay { events, dropped: page.dropped, next_cursor: page.next_cursor }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ring_with(capacity: usize, count: u64) -> EventRing {
        let mut ring = EventRing::new(capacity);
        for i in 1..=count {
            assert_eq!(ring.push(Arc::new(json!({ "n": i }))), i);
        }
        ring
    }

    #[test]
    fn replays_from_the_cursor_in_order() {
        let ring = ring_with(10, 5);
        let replay = ring.replay_after(2, 100);
        assert_eq!(replay.events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!((replay.dropped, replay.next_cursor), (0, 5));
        assert!(ring.replay_after(5, 100).events.is_empty());
    }

    #[test]
    fn says_how_many_were_evicted_after_the_cursor() {
        let ring = ring_with(3, 10); // retains 8, 9, 10
        let replay = ring.replay_after(2, 100);
        assert_eq!(replay.events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![8, 9, 10]);
        assert_eq!(replay.dropped, 5, "3..=7 were lost");
        assert_eq!(ring.replay_after(0, 100).dropped, 7);
        assert_eq!(ring.replay_after(9, 100).dropped, 0);
        assert_eq!(ring.len(), 3);
    }

    #[test]
    fn a_limit_pages_the_replay() {
        let ring = ring_with(10, 6);
        let first = ring.replay_after(0, 4);
        assert_eq!(first.events.len(), 4);
        let second = ring.replay_after(first.next_cursor, 4);
        assert_eq!(second.events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![5, 6]);
    }
}
