//! Episodic memory of a session, for `memory_query`: the events and tool
//! results it saw, summarised (images are cut) and bounded.
use std::collections::VecDeque;
use std::time::Instant;

use serde_json::{json, Map, Value};

/// Entries kept per session.
const CAPACITY: usize = 256;
/// Longest string kept in an entry (images are summarised, not kept).
const STRING_LIMIT: usize = 200;

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

#[derive(Debug, Default)]
pub(super) struct EpisodicMemory {
    entries: VecDeque<MemoryEntry>,
}

impl EpisodicMemory {
    /// Adds an entry, summarised; the oldest go beyond the capacity.
    pub(super) fn remember(
        &mut self,
        tick: u64,
        at: Instant,
        kind: &'static str,
        name: &str,
        value: &Value,
    ) {
        let summary =
            serde_json::to_string(&Summary { value, depth: 0 }).expect("a JSON value serialises");
        self.entries.push_back(MemoryEntry { tick, at, kind, name: name.to_string(), summary });
        while self.entries.len() > CAPACITY {
            self.entries.pop_front();
        }
    }

    /// The entries matching a `memory_query` input (validated against its
    /// schema), newest last.
    pub(super) fn query(&self, input: &Map<String, Value>) -> Value {
        let text = input.get("text").and_then(Value::as_str).map(str::to_lowercase);
        let name = input.get("topic").or_else(|| input.get("tool")).and_then(Value::as_str);
        let kind = input.get("kind").and_then(Value::as_str);
        let since_tick = input.get("since_tick").and_then(Value::as_u64).unwrap_or(0);
        let until_tick = input.get("until_tick").and_then(Value::as_u64).unwrap_or(u64::MAX);
        let within_s = input.get("within_s").and_then(Value::as_f64);
        let limit = input.get("limit").and_then(Value::as_u64).unwrap_or(20) as usize;
        let newest = self.entries.back().map(|e| e.at);
        let matches: Vec<&MemoryEntry> = self
            .entries
            .iter()
            .filter(|e| e.tick >= since_tick && e.tick <= until_tick)
            .filter(|e| kind.is_none_or(|k| e.kind == k))
            .filter(|e| name.is_none_or(|n| e.name == n))
            .filter(|e| text.as_ref().is_none_or(|t| e.summary.to_lowercase().contains(t.as_str())))
            .filter(|e| {
                within_s.is_none_or(|w| {
                    newest.is_some_and(|n| n.saturating_duration_since(e.at).as_secs_f64() <= w)
                })
            })
            .collect();
        let entries: Vec<Value> = matches.iter().rev().take(limit).rev().map(|e| json!({ "tick": e.tick, "kind": e.kind, "name": e.name, "summary": serde_json::from_str::<Value>(&e.summary).unwrap_or(Value::Null) })).collect();
        json!({ "entries": entries, "matched": matches.len(), "retained": self.entries.len(), "retained_max": CAPACITY })
    }
}

/// A compact form for memory: long strings (images) and deep or long
/// structures are cut, so that a session's memory stays small. Written
/// straight from the message, without building the cut copy first.
struct Summary<'a> {
    value: &'a Value,
    depth: usize,
}

impl Summary<'_> {
    const MAX_DEPTH: usize = 3;
    const MAX_ITEMS: usize = 12;
}

impl serde::Serialize for Summary<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        let depth = self.depth;
        match self.value {
            Value::String(s) if s.len() > STRING_LIMIT => {
                serializer.serialize_str(&format!("<{} characters omitted>", s.len()))
            }
            Value::Array(_) | Value::Object(_) if depth >= Self::MAX_DEPTH => {
                serializer.serialize_str("<…>")
            }
            Value::Array(items) => {
                let kept = items.len().min(Self::MAX_ITEMS);
                let mut seq = serializer.serialize_seq(Some(kept))?;
                for value in items.iter().take(kept) {
                    seq.serialize_element(&Summary { value, depth: depth + 1 })?;
                }
                seq.end()
            }
            Value::Object(fields) => {
                let mut map = serializer.serialize_map(None)?;
                for (key, value) in fields
                    .iter()
                    .filter(|(k, _)| {
                        !matches!(k.as_str(), "message_id" | "protocol" | "session_id" | "type")
                    })
                    .take(Self::MAX_ITEMS * 2)
                {
                    map.serialize_entry(key, &Summary { value, depth: depth + 1 })?;
                }
                map.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// The summary as a value (what a query reads back).
#[cfg(test)]
fn summarise(value: &Value, depth: usize) -> Value {
    serde_json::to_value(Summary { value, depth }).expect("a JSON value")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn input(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn summaries_cut_long_strings_deep_structures_and_envelope_fields() {
        let summary = summarise(
            &json!({ "message_id": "m", "type": "event", "image": "A".repeat(201), "short": "B".repeat(200), "deep": { "a": { "b": { "c": 1 } } }, "list": (0..20).collect::<Vec<_>>() }),
            0,
        );
        assert_eq!(summary["image"], "<201 characters omitted>");
        assert_eq!(summary["short"].as_str().unwrap().len(), 200);
        assert_eq!(summary["deep"]["a"]["b"], "<…>");
        assert_eq!(summary["list"].as_array().unwrap().len(), 12);
        assert!(summary.get("message_id").is_none() && summary.get("type").is_none());
    }

    #[test]
    fn memory_is_bounded_and_queried_newest_last() {
        let t0 = Instant::now();
        let mut memory = EpisodicMemory::default();
        for n in 0..300u64 {
            memory.remember(
                n,
                t0 + Duration::from_secs(n),
                "event",
                if n % 2 == 0 { "collision" } else { "audio" },
                &json!({ "n": n }),
            );
        }
        let all = memory.query(&Map::new());
        assert_eq!((all["matched"].as_u64(), all["retained"].as_u64()), (Some(256), Some(256)));
        let ticks: Vec<u64> = all["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["tick"].as_u64().unwrap())
            .collect();
        assert_eq!(ticks, (280..300).collect::<Vec<_>>(), "the last 20 by default, oldest first");
        let recent =
            memory.query(&input(json!({ "topic": "collision", "within_s": 10.0, "limit": 100 })));
        assert_eq!(
            recent["matched"], 5,
            "collisions at 290..=298 s: within 10 s of the newest entry (299 s)"
        );
        let range =
            memory.query(&input(json!({ "since_tick": 100, "until_tick": 101, "kind": "event" })));
        assert_eq!(range["matched"], 2);
        assert_eq!(memory.query(&input(json!({ "kind": "tool_result" })))["matched"], 0);
    }
}
