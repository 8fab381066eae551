//! Events in `meta.tick` order (AICC section 8, conformance rule 4).
//!
//! An event is held for a short reorder window, or until a message with a
//! higher tick shows that nothing older can still be on its way (ticks never
//! go backwards on a connection), and released sorted by (tick, seq). An
//! event older than one already released is passed on at once with
//! `"late": true`: never silently reordered, never dropped.
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::wire::Event;

/// An event as the agent should process it.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedEvent {
    pub tick: u64,
    pub seq: Option<u64>,
    pub topic: String,
    /// Older than an event released before it.
    pub late: bool,
    pub message: Map<String, Value>,
}

impl OrderedEvent {
    /// The event as it came, with `"late": true` added when it was late.
    pub fn to_json(&self) -> Value {
        let mut message = self.message.clone();
        if self.late {
            message.insert("late".into(), Value::Bool(true));
        }
        Value::Object(message)
    }
}

#[derive(Debug)]
struct Held {
    event: Event,
    arrived: Instant,
    arrival: u64,
}

impl Held {
    /// Sort key: tick, then seq (an event without one after those with one),
    /// then arrival.
    fn key(&self) -> (u64, u64, u64) {
        (self.event.tick, self.event.seq.unwrap_or(u64::MAX), self.arrival)
    }
}

/// The reorder buffer.
#[derive(Debug)]
pub struct EventOrderer {
    window: Duration,
    capacity: usize,
    held: Vec<Held>,
    arrivals: u64,
    /// Tick and seq of the newest event released.
    last_released: Option<(u64, Option<u64>)>,
    /// The highest tick any message has carried.
    highest_tick: Option<u64>,
}

impl EventOrderer {
    /// `capacity` bounds the events held; past it the oldest is released
    /// early rather than dropped.
    pub fn new(window: Duration, capacity: usize) -> Self {
        Self {
            window,
            capacity: capacity.max(1),
            held: Vec::new(),
            arrivals: 0,
            last_released: None,
            highest_tick: None,
        }
    }

    /// Takes an event in; returns those that may be processed now.
    pub fn push(&mut self, event: Event, now: Instant) -> Vec<OrderedEvent> {
        if self.is_older_than_released(&event) {
            return vec![ordered(event, true)];
        }
        let tick = event.tick;
        self.held.push(Held { event, arrived: now, arrival: self.arrivals });
        self.arrivals += 1;
        let mut released = self.observe_tick(tick);
        if self.held.len() > self.capacity {
            released.extend(self.release_up_to(self.sorted_keys()[0]));
        }
        released
    }

    /// Any message carrying `meta.tick`: events with a lower tick are final.
    pub fn observe_tick(&mut self, tick: u64) -> Vec<OrderedEvent> {
        self.highest_tick = Some(self.highest_tick.map_or(tick, |t| t.max(tick)));
        let highest = self.highest_tick.unwrap_or(tick);
        match self.held.iter().filter(|h| h.event.tick < highest).map(Held::key).max() {
            Some(bound) => self.release_up_to(bound),
            None => Vec::new(),
        }
    }

    /// Releases what has waited its window (and everything sorted before it).
    pub fn release_due(&mut self, now: Instant) -> Vec<OrderedEvent> {
        match self
            .held
            .iter()
            .filter(|h| now.duration_since(h.arrived) >= self.window)
            .map(Held::key)
            .max()
        {
            Some(bound) => self.release_up_to(bound),
            None => Vec::new(),
        }
    }

    /// When the next held event's window ends.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.held.iter().map(|h| h.arrived + self.window).min()
    }

    /// Releases everything held, sorted (at the end of a stream).
    pub fn flush(&mut self) -> Vec<OrderedEvent> {
        match self.held.iter().map(Held::key).max() {
            Some(bound) => self.release_up_to(bound),
            None => Vec::new(),
        }
    }

    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    fn sorted_keys(&self) -> Vec<(u64, u64, u64)> {
        let mut keys: Vec<_> = self.held.iter().map(Held::key).collect();
        keys.sort_unstable();
        keys
    }

    fn is_older_than_released(&self, event: &Event) -> bool {
        match self.last_released {
            None => false,
            Some((tick, seq)) => {
                event.tick < tick
                    || (event.tick == tick
                        && matches!((event.seq, seq), (Some(a), Some(b)) if a < b))
            }
        }
    }

    /// Releases every held event whose key is at most `bound`, in order.
    fn release_up_to(&mut self, bound: (u64, u64, u64)) -> Vec<OrderedEvent> {
        let (mut out, keep): (Vec<Held>, Vec<Held>) =
            std::mem::take(&mut self.held).into_iter().partition(|h| h.key() <= bound);
        self.held = keep;
        out.sort_unstable_by_key(Held::key);
        if let Some(last) = out.last() {
            self.last_released = Some((last.event.tick, last.event.seq));
        }
        out.into_iter().map(|h| ordered(h.event, false)).collect()
    }
}

fn ordered(event: Event, late: bool) -> OrderedEvent {
    OrderedEvent {
        tick: event.tick,
        seq: event.seq,
        topic: event.topic,
        late,
        message: event.message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(tick: u64, seq: u64) -> Event {
        let message =
            json!({ "type": "event", "topic": "collision", "meta": { "tick": tick, "seq": seq } });
        Event {
            tick,
            seq: Some(seq),
            topic: "collision".into(),
            message: message.as_object().unwrap().clone(),
        }
    }

    fn ticks(events: &[OrderedEvent]) -> Vec<(u64, bool)> {
        events.iter().map(|e| (e.tick, e.late)).collect()
    }

    const WINDOW: Duration = Duration::from_millis(200);

    #[test]
    fn events_inside_the_window_come_out_in_tick_order() {
        let start = Instant::now();
        let mut orderer = EventOrderer::new(WINDOW, 64);
        let mut out = Vec::new();
        for (i, (tick, seq)) in [(5, 1), (7, 2), (6, 3), (8, 4)].into_iter().enumerate() {
            out.extend(
                orderer.push(event(tick, seq), start + Duration::from_millis(10 * i as u64)),
            );
        }
        out.extend(orderer.release_due(start + Duration::from_millis(500)));
        assert_eq!(ticks(&out), vec![(5, false), (6, false), (7, false), (8, false)]);
    }

    #[test]
    fn nothing_is_released_before_its_window_without_a_higher_tick() {
        let start = Instant::now();
        let mut orderer = EventOrderer::new(WINDOW, 64);
        assert!(orderer.push(event(9, 1), start).is_empty());
        assert!(orderer.release_due(start + WINDOW / 2).is_empty());
        assert_eq!(orderer.next_deadline(), Some(start + WINDOW));
        assert_eq!(ticks(&orderer.release_due(start + WINDOW)), vec![(9, false)]);
    }

    #[test]
    fn a_message_with_a_higher_tick_releases_older_events_at_once() {
        let start = Instant::now();
        let mut orderer = EventOrderer::new(WINDOW, 64);
        assert!(
            orderer.push(event(4, 1), start).is_empty(),
            "tick 4 itself may still have company"
        );
        assert_eq!(
            ticks(&orderer.push(event(3, 2), start)),
            vec![(3, false)],
            "tick 4 was seen: nothing older than 3 can follow"
        );
        assert!(orderer.observe_tick(4).is_empty());
        assert_eq!(ticks(&orderer.observe_tick(5)), vec![(4, false)]);
        assert_eq!(orderer.held_count(), 0);
    }

    #[test]
    fn an_event_older_than_one_released_is_flagged_late_not_dropped() {
        let start = Instant::now();
        let mut orderer = EventOrderer::new(WINDOW, 64);
        orderer.push(event(8, 4), start);
        assert_eq!(ticks(&orderer.release_due(start + WINDOW)), vec![(8, false)]);
        let late = orderer.push(event(3, 5), start + WINDOW);
        assert_eq!(ticks(&late), vec![(3, true)]);
        assert_eq!(late[0].to_json()["late"], json!(true));
        assert_eq!(late[0].to_json()["meta"]["tick"], json!(3));
        let same_tick_older_seq = orderer.push(event(8, 2), start + WINDOW);
        assert_eq!(ticks(&same_tick_older_seq), vec![(8, true)]);
    }

    #[test]
    fn equal_ticks_are_ordered_by_seq() {
        let start = Instant::now();
        let mut orderer = EventOrderer::new(WINDOW, 64);
        orderer.push(event(2, 9), start);
        orderer.push(event(2, 7), start);
        let out = orderer.flush();
        assert_eq!(out.iter().map(|e| e.seq.unwrap()).collect::<Vec<_>>(), vec![7, 9]);
    }

    #[test]
    fn past_its_capacity_the_buffer_releases_the_oldest_instead_of_growing() {
        let start = Instant::now();
        let mut orderer = EventOrderer::new(WINDOW, 3);
        let mut out = Vec::new();
        for seq in 0..3 {
            out.extend(orderer.push(event(10, seq), start));
        }
        assert!(out.is_empty());
        out.extend(orderer.push(event(10, 3), start));
        assert_eq!(out.iter().map(|e| e.seq.unwrap()).collect::<Vec<_>>(), vec![0]);
        assert_eq!(orderer.held_count(), 3);
    }
}
