//! Comparing a recorded tool_result with the one a re-run got: every
//! field, recursively, except those the comparison was told to ignore
//! (by key, wherever it appears). Numbers may differ by a tolerance.
use std::collections::BTreeSet;

use serde_json::Value;

/// Keys never compared: they name the message, not what it says.
pub const ALWAYS_IGNORED: &[&str] = &["message_id", "session_id", "in_reply_to"];
/// Keys also ignored against a live bridge (`--against`): the time, the
/// bridge's tick and its timing, which no two runs share.
pub const LIVE_IGNORED: &[&str] =
    &["meta", "tick", "latency_ms", "stamp", "stamp_s", "timestamp", "age_s", "time_s", "uptime_s"];

/// What is compared.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub ignored: BTreeSet<String>,
    /// Two numbers differing by at most this are equal.
    pub tolerance: f64,
}

impl Rules {
    /// Replay against the recording itself: only the addressing ignored.
    pub fn exact() -> Self {
        Self { ignored: ALWAYS_IGNORED.iter().map(|k| k.to_string()).collect(), tolerance: 0.0 }
    }

    /// Against a live bridge: time and ticks ignored too, and `extra`.
    pub fn live(extra: &[String], tolerance: f64) -> Self {
        let mut rules = Self::exact();
        rules.ignored.extend(LIVE_IGNORED.iter().map(|k| k.to_string()));
        rules.ignored.extend(extra.iter().cloned());
        rules.tolerance = tolerance;
        rules
    }
}

/// One field that differs: its path (`output.pose.x`, `output.joints[2]`)
/// and both values.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub path: String,
    pub recorded: Option<Value>,
    pub replayed: Option<Value>,
}

/// The differences between `recorded` and `replayed`, in path order.
pub fn compare(recorded: &Value, replayed: &Value, rules: &Rules) -> Vec<Difference> {
    let mut out = Vec::new();
    walk("", Some(recorded), Some(replayed), rules, &mut out);
    out
}

fn walk(
    path: &str,
    recorded: Option<&Value>,
    replayed: Option<&Value>,
    rules: &Rules,
    out: &mut Vec<Difference>,
) {
    let child = |key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
    match (recorded, replayed) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys.into_iter().filter(|k| !rules.ignored.contains(k.as_str())) {
                walk(&child(key), a.get(key), b.get(key), rules, out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(&format!("{path}[{i}]"), Some(x), Some(y), rules, out);
            }
        }
        (Some(Value::Number(a)), Some(Value::Number(b))) if a != b => {
            let close = matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y)) if (x - y).abs() <= rules.tolerance);
            if !close {
                out.push(Difference {
                    path: path.into(),
                    recorded: recorded.cloned(),
                    replayed: replayed.cloned(),
                });
            }
        }
        (a, b) if a != b => {
            out.push(Difference { path: path.into(), recorded: a.cloned(), replayed: b.cloned() })
        }
        _ => {}
    }
}

/// A value for a report line: long ones (an image) shortened.
pub fn shown(value: &Option<Value>) -> String {
    let Some(value) = value else { return "(absent)".into() };
    let text = value.to_string();
    match text.chars().count() > 80 {
        true => format!("{}... ({} bytes)", text.chars().take(60).collect::<String>(), text.len()),
        false => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_results_have_no_difference_whatever_their_addressing() {
        let a = json!({ "type": "tool_result", "message_id": "1", "call_id": "c", "ok": true, "output": { "x": 1.5, "list": [1, 2] } });
        let b = json!({ "type": "tool_result", "message_id": "2", "call_id": "c", "ok": true, "output": { "x": 1.5, "list": [1, 2] } });
        assert!(compare(&a, &b, &Rules::exact()).is_empty());
    }

    #[test]
    fn a_changed_field_is_named_by_its_path() {
        let a = json!({ "ok": true, "output": { "pose": { "x": 1.0 }, "joints": [0.1, 0.2] } });
        let b = json!({ "ok": true, "output": { "pose": { "x": 2.0 }, "joints": [0.1, 0.3], "extra": true } });
        let paths: Vec<String> =
            compare(&a, &b, &Rules::exact()).into_iter().map(|d| d.path).collect();
        assert_eq!(paths, ["output.extra", "output.joints[1]", "output.pose.x"]);
        let missing = compare(&json!({ "a": [1] }), &json!({ "a": [1, 2] }), &Rules::exact());
        assert_eq!(
            missing,
            vec![Difference {
                path: "a".into(),
                recorded: Some(json!([1])),
                replayed: Some(json!([1, 2]))
            }]
        );
    }

    #[test]
    fn live_rules_ignore_time_and_tolerate_small_numbers() {
        let a =
            json!({ "meta": { "tick": 3 }, "output": { "stamp_s": 10.0, "x": 1.0, "name": "a" } });
        let b = json!({ "meta": { "tick": 9 }, "output": { "stamp_s": 11.0, "x": 1.004, "name": "a" } });
        assert_eq!(compare(&a, &b, &Rules::exact()).len(), 3);
        assert!(compare(&a, &b, &Rules::live(&[], 0.01)).is_empty());
        assert_eq!(compare(&a, &b, &Rules::live(&[], 0.0)).len(), 1);
        assert!(compare(&a, &b, &Rules::live(&["x".into()], 0.0)).is_empty());
    }

    #[test]
    fn long_values_are_shortened_in_reports() {
        assert_eq!(shown(&Some(json!(1))), "1");
        assert!(shown(&Some(json!("x".repeat(500)))).ends_with("(502 bytes)"));
        assert_eq!(shown(&None), "(absent)");
    }
}
