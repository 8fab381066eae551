//! What the runner checks on every line a bridge sends, whatever the
//! scenario (fail closed): framing, UTF-8, a JSON object with an AICC
//! protocol and a type; tool results that answer a call this connection
//! made, once, with exactly one of output and error; error bodies with one
//! of the eight codes; events that carry a tick which never goes back, and
//! sequence numbers that always go forward.
use std::collections::HashMap;

use serde_json::Value;

use super::matcher::show;

/// The error codes of AICC section 10.
pub const ERROR_CODES: [&str; 8] = [
    "protocol_mismatch",
    "session_expired",
    "tool_unknown",
    "tool_unavailable",
    "invalid_input",
    "execution_failed",
    "timeout",
    "internal_error",
];

/// Per-connection state of the checks.
#[derive(Debug, Default)]
pub struct LineChecker {
    /// call_id -> (times sent, times answered).
    calls: HashMap<String, (u32, u32)>,
    last_event_tick: Option<u64>,
    last_event_seq: Option<u64>,
}

/// Checks an `error` body: code, retryable, message.
pub fn check_error_body(body: &Value, what: &str) -> Result<(), String> {
    let Some(map) = body.as_object() else {
        return Err(format!("{what} must be an object, got {}", show(body)));
    };
    match map.get("code") {
        Some(Value::String(code)) if ERROR_CODES.contains(&code.as_str()) => {}
        Some(other) => {
            return Err(format!(
                "{what}.code {} is not one of the AICC codes ({})",
                show(other),
                ERROR_CODES.join(", ")
            ))
        }
        None => return Err(format!("{what} has no code")),
    }
    if !map.get("retryable").is_some_and(Value::is_boolean) {
        return Err(format!(
            "{what}.retryable must be a boolean, got {}",
            map.get("retryable").map_or("nothing".to_string(), show)
        ));
    }
    if !map.get("message").is_some_and(Value::is_string) {
        return Err(format!(
            "{what}.message must be a string, got {}",
            map.get("message").map_or("nothing".to_string(), show)
        ));
    }
    Ok(())
}

impl LineChecker {
    /// A tool_call with this call_id was sent on the connection.
    pub fn note_call_sent(&mut self, call_id: &str) {
        self.calls.entry(call_id.to_string()).or_default().0 += 1;
    }

    /// Checks one line (without its LF); returns the message.
    pub fn check(&mut self, line: &[u8]) -> Result<Value, String> {
        let text = std::str::from_utf8(line)
            .map_err(|e| format!("line is not valid UTF-8 (at byte {})", e.valid_up_to()))?;
        let message: Value = serde_json::from_str(text).map_err(|e| {
            format!("line is not valid JSON ({e}): {}", show(&Value::String(text.to_string())))
        })?;
        let Some(map) = message.as_object() else {
            return Err(format!("line is not a JSON object: {}", show(&message)));
        };
        match map.get("protocol") {
            Some(Value::String(p)) if p.starts_with("aicc/0.") => {}
            other => {
                return Err(format!(
                    "'protocol' must be a string starting with \"aicc/0.\", got {}",
                    other.map_or("nothing".to_string(), show)
                ))
            }
        }
        let Some(kind) = map.get("type").and_then(Value::as_str) else {
            return Err(format!(
                "'type' must be a string, got {}",
                map.get("type").map_or("nothing".to_string(), show)
            ));
        };
        match kind {
            "tool_result" => self.check_tool_result(&message)?,
            "error" => check_error_body(&message, "error message")?,
            "event" => self.check_event(&message)?,
            _ => {}
        }
        Ok(message)
    }

    fn check_tool_result(&mut self, message: &Value) -> Result<(), String> {
        let Some(call_id) = message.get("call_id").and_then(Value::as_str) else {
            return Err(format!("tool_result without a string call_id: {}", show(message)));
        };
        match self.calls.get_mut(call_id) {
            None => return Err(format!("tool_result for call_id '{call_id}', which was never sent on this connection")),
            Some((sent, answered)) if *answered >= *sent => return Err(format!("tool_result for call_id '{call_id}' again: it was sent {sent} time(s) and already answered")),
            Some((_, answered)) => *answered += 1,
        }
        let ok = match message.get("ok") {
            Some(Value::Bool(ok)) => *ok,
            other => {
                return Err(format!(
                    "tool_result '{call_id}': 'ok' must be a boolean, got {}",
                    other.map_or("nothing".to_string(), show)
                ))
            }
        };
        match (message.get("output").is_some(), message.get("error").is_some(), ok) {
            (true, true, _) => Err(format!("tool_result '{call_id}' has both output and error")),
            (false, false, _) => {
                Err(format!("tool_result '{call_id}' has neither output nor error"))
            }
            (true, false, false) => {
                Err(format!("tool_result '{call_id}' has ok: false but an output and no error"))
            }
            (false, true, true) => {
                Err(format!("tool_result '{call_id}' has ok: true but an error and no output"))
            }
            (false, true, false) => {
                check_error_body(&message["error"], &format!("tool_result '{call_id}' error"))
            }
            (true, false, true) => Ok(()),
        }
    }

    fn check_event(&mut self, message: &Value) -> Result<(), String> {
        let topic = message.get("topic").and_then(Value::as_str).unwrap_or("?");
        let meta = message.get("meta");
        // Every event carries the tick (AICC §8: agents order events by it);
        // so does the bridge's own events_dropped notice, which has no seq.
        let Some(tick) = meta.and_then(|m| m.get("tick")) else {
            return Err(format!("event '{topic}' has no meta.tick (every event carries the tick it happened at): {}", show(message)));
        };
        let tick = tick.as_u64().ok_or_else(|| {
            format!("event '{topic}': meta.tick must be a non-negative integer, got {}", show(tick))
        })?;
        if let Some(last) = self.last_event_tick {
            if tick < last {
                return Err(format!("event '{topic}' has meta.tick {tick}, after an event with tick {last}: ticks went backwards"));
            }
        }
        self.last_event_tick = Some(tick);
        if let Some(seq) = meta.and_then(|m| m.get("seq")) {
            let seq = seq.as_u64().ok_or_else(|| {
                format!(
                    "event '{topic}': meta.seq must be a non-negative integer, got {}",
                    show(seq)
                )
            })?;
            if let Some(last) = self.last_event_seq {
                if seq <= last {
                    return Err(format!("event '{topic}' has meta.seq {seq}, after an event with seq {last}: seq must strictly increase"));
                }
            }
            self.last_event_seq = Some(seq);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(value: Value) -> Vec<u8> {
        value.to_string().into_bytes()
    }

    fn result(call_id: &str, extra: Value) -> Vec<u8> {
        let mut message =
            json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": call_id });
        message.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        line(message)
    }

    #[test]
    fn framing_and_envelope_are_checked() {
        let mut checker = LineChecker::default();
        assert!(checker.check(b"\xc3\x28").unwrap_err().contains("UTF-8"));
        assert!(checker.check(b"{nope").unwrap_err().contains("not valid JSON"));
        assert!(checker.check(b"[1]").unwrap_err().contains("not a JSON object"));
        assert!(checker
            .check(&line(json!({ "type": "heartbeat" })))
            .unwrap_err()
            .contains("'protocol'"));
        assert!(checker
            .check(&line(json!({ "protocol": "aicc/1.0", "type": "heartbeat" })))
            .unwrap_err()
            .contains("aicc/0."));
        assert!(checker
            .check(&line(json!({ "protocol": "aicc/0.1", "type": 3 })))
            .unwrap_err()
            .contains("'type' must be a string"));
        assert_eq!(
            checker.check(&line(json!({ "protocol": "aicc/0.3", "type": "heartbeat" }))).unwrap()
                ["type"],
            "heartbeat"
        );
    }

    #[test]
    fn results_answer_calls_of_this_connection_once() {
        let mut checker = LineChecker::default();
        assert!(checker
            .check(&result("c1", json!({ "ok": true, "output": {} })))
            .unwrap_err()
            .contains("never sent"));
        checker.note_call_sent("c1");
        checker.check(&result("c1", json!({ "ok": true, "output": {} }))).unwrap();
        assert!(checker
            .check(&result("c1", json!({ "ok": true, "output": {} })))
            .unwrap_err()
            .contains("already answered"));
        checker.note_call_sent("c1");
        checker
            .check(&result("c1", json!({ "ok": true, "output": {} })))
            .expect("sent twice: two answers are fine");
    }

    #[test]
    fn results_have_exactly_one_of_output_and_error_consistent_with_ok() {
        let mut checker = LineChecker::default();
        let error = json!({ "code": "timeout", "retryable": true, "message": "m" });
        let cases = [
            (json!({ "ok": true, "output": {}, "error": error }), Some("both output and error")),
            (json!({ "ok": true }), Some("neither")),
            (json!({ "ok": false, "output": {} }), Some("ok: false but an output")),
            (json!({ "ok": true, "error": error }), Some("ok: true but an error")),
            (json!({ "ok": "yes", "output": {} }), Some("'ok' must be a boolean")),
            (
                json!({ "ok": false, "error": { "code": "oops", "retryable": true, "message": "m" } }),
                Some("not one of the AICC codes"),
            ),
            (
                json!({ "ok": false, "error": { "code": "timeout", "retryable": "no", "message": "m" } }),
                Some("retryable must be a boolean"),
            ),
            (json!({ "ok": false, "error": error }), None),
        ];
        for (i, (extra, expected)) in cases.into_iter().enumerate() {
            let call_id = format!("c{i}");
            checker.note_call_sent(&call_id);
            match (checker.check(&result(&call_id, extra.clone())), expected) {
                (Ok(_), None) => {}
                (Err(reason), Some(wanted)) => {
                    assert!(reason.contains(wanted), "{extra}: {reason}")
                }
                (outcome, wanted) => panic!("{extra}: got {outcome:?}, wanted {wanted:?}"),
            }
        }
    }

    #[test]
    fn top_level_errors_need_a_known_code() {
        let mut checker = LineChecker::default();
        checker.check(&line(json!({ "protocol": "aicc/0.1", "type": "error", "code": "invalid_input", "retryable": false, "message": "bad" }))).unwrap();
        assert!(checker.check(&line(json!({ "protocol": "aicc/0.1", "type": "error", "code": "bad_request", "retryable": false, "message": "bad" }))).unwrap_err().contains("bad_request"));
        assert!(checker.check(&line(json!({ "protocol": "aicc/0.1", "type": "error", "code": "timeout", "retryable": false }))).unwrap_err().contains("message must be a string"));
    }

    #[test]
    fn event_ticks_never_go_back_and_seq_always_goes_forward() {
        let mut checker = LineChecker::default();
        let event = |tick: u64, seq: u64| {
            line(
                json!({ "protocol": "aicc/0.1", "type": "event", "topic": "tick", "meta": { "tick": tick, "seq": seq } }),
            )
        };
        checker.check(&event(5, 1)).unwrap();
        checker.check(&event(5, 2)).expect("equal ticks are fine");
        assert!(checker.check(&event(4, 3)).unwrap_err().contains("ticks went backwards"));
        assert!(checker.check(&event(6, 2)).unwrap_err().contains("strictly increase"));
        checker.check(&event(7, 9)).expect("gaps in seq are fine");
        assert!(checker.check(&line(json!({ "protocol": "aicc/0.1", "type": "event", "topic": "x", "meta": { "tick": -1 } }))).unwrap_err().contains("non-negative"));
    }

    #[test]
    fn every_event_carries_a_tick_but_not_necessarily_a_seq() {
        let mut checker = LineChecker::default();
        let without_meta = checker
            .check(&line(
                json!({ "protocol": "aicc/0.1", "type": "event", "topic": "audio", "payload": {} }),
            ))
            .unwrap_err();
        assert!(without_meta.contains("event 'audio' has no meta.tick"), "{without_meta}");
        let without_tick = checker.check(&line(json!({ "protocol": "aicc/0.1", "type": "event", "topic": "lease", "meta": { "seq": 1 } }))).unwrap_err();
        assert!(without_tick.contains("event 'lease' has no meta.tick"), "{without_tick}");
        // The bridge's events_dropped notice: a tick, no seq.
        checker.check(&line(json!({ "protocol": "aicc/0.1", "type": "event", "topic": "events_dropped", "payload": { "count": 2 }, "meta": { "tick": 4 } }))).expect("a tick without a seq is fine");
        assert!(checker.check(&line(json!({ "protocol": "aicc/0.1", "type": "event", "topic": "tick", "meta": { "tick": 3, "seq": 1 } }))).unwrap_err().contains("ticks went backwards"), "the notice's tick counts for the order");
    }
}
