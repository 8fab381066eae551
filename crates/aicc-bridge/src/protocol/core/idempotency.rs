//! Idempotency keys of a session: a retried call with the key of one that
//! ran is answered with the first call's result instead of moving the
//! robot again. Bounded: the oldest keys are forgotten first.
use std::collections::{HashMap, VecDeque};

use serde_json::Value;

/// Idempotency keys remembered per session.
const CAPACITY: usize = 256;

/// What an idempotency key stands for.
pub(super) enum Idempotent {
    Running { call_id: String },
    Done { result: Value },
}

pub(super) struct IdempotencyKeys {
    entries: HashMap<String, Idempotent>,
    /// Keys in the order they were started, for forgetting the oldest.
    order: VecDeque<String>,
    capacity: usize,
}

impl Default for IdempotencyKeys {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

impl IdempotencyKeys {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Self { entries: HashMap::new(), order: VecDeque::new(), capacity }
    }

    pub(super) fn get(&self, key: &str) -> Option<&Idempotent> {
        self.entries.get(key)
    }

    /// A call with `key` starts running (the key was not known).
    pub(super) fn start(&mut self, key: &str, call_id: &str) {
        self.entries.insert(key.to_string(), Idempotent::Running { call_id: call_id.to_string() });
        self.order.push_back(key.to_string());
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.entries.remove(&oldest);
            }
        }
    }

    /// The call with `key` completed with `result` (unless the key has
    /// been forgotten meanwhile).
    pub(super) fn complete(&mut self, key: &str, result: &Value) {
        if let Some(slot) = self.entries.get_mut(key) {
            *slot = Idempotent::Done { result: result.clone() };
        }
    }

    /// The call with `key` was aborted before it completed: a retry may run it.
    pub(super) fn forget_running(&mut self, key: &str) {
        if matches!(self.entries.get(key), Some(Idempotent::Running { .. })) {
            self.entries.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn state(keys: &IdempotencyKeys, key: &str) -> Option<String> {
        keys.get(key).map(|entry| match entry {
            Idempotent::Running { call_id } => format!("running {call_id}"),
            Idempotent::Done { result } => format!("done {result}"),
        })
    }

    #[test]
    fn a_key_runs_then_remembers_its_result_and_an_aborted_one_is_forgotten() {
        let mut keys = IdempotencyKeys::default();
        keys.start("k1", "c1");
        assert_eq!(state(&keys, "k1").as_deref(), Some("running c1"));
        keys.complete("k1", &json!({ "ok": true }));
        assert_eq!(state(&keys, "k1").as_deref(), Some("done {\"ok\":true}"));
        keys.forget_running("k1");
        assert!(keys.get("k1").is_some(), "a completed key stays");
        keys.start("k2", "c2");
        keys.forget_running("k2");
        assert!(keys.get("k2").is_none());
        keys.complete("k2", &json!({}));
        assert!(keys.get("k2").is_none(), "a forgotten key is not brought back by a late result");
    }

    #[test]
    fn the_oldest_keys_are_forgotten_beyond_the_capacity() {
        let mut keys = IdempotencyKeys::with_capacity(2);
        for (key, call) in [("a", "1"), ("b", "2"), ("c", "3")] {
            keys.start(key, call);
        }
        assert!(keys.get("a").is_none());
        assert_eq!(
            (state(&keys, "b").as_deref(), state(&keys, "c").as_deref()),
            (Some("running 2"), Some("running 3"))
        );
        assert_eq!(IdempotencyKeys::default().capacity, 256);
    }
}
