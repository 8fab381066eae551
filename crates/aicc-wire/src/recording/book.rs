//! What a replay serves, taken from a recording: the greeting
//! (`session_init` with its manifest), and per tool call the recorded
//! result. A call is matched by tool name and input (JSON equality), in
//! recorded order: the n-th `vision` call with some input gets the n-th
//! recorded result of `vision` with that input. Replies to the other
//! messages (heartbeat, manifest_request, session_close) are the recorded
//! replies to the first message of their type.
use std::collections::HashMap;

use serde_json::{json, Value};

use super::reader::Recording;

/// One recorded tool call and what the bridge answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The bridge's number for the connection that made it.
    pub conn: u64,
    pub call_id: String,
    pub tool: String,
    pub input: Value,
    /// The call's message on /aicc/in, as sent.
    pub call: Value,
    /// Where the call is in the file.
    pub offset: u64,
    /// The tool_result on /aicc/out; None when the recording ended first.
    pub result: Option<Value>,
    pub result_offset: Option<u64>,
}

/// The replay's script.
#[derive(Debug, Clone)]
pub struct Book {
    /// The first session_init the bridge sent.
    pub greeting: Value,
    /// Every recorded tool call, in recorded order.
    pub calls: Vec<Exchange>,
    /// The recorded reply to the first message of each other type.
    replies: HashMap<String, Value>,
    /// Which calls a replay has answered already.
    used: Vec<bool>,
}

/// What the book answers a tool call with.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The recorded result, readdressed to the new call.
    Recorded(Value),
    /// No recorded call of this tool with this input is left.
    Unmatched(String),
}

impl Book {
    /// The script of `recording`; refused when it holds no session.
    pub fn from_recording(recording: &Recording) -> Result<Self, String> {
        let mut greeting = None;
        let mut calls: Vec<Exchange> = Vec::new();
        let mut pending: HashMap<(u64, String), usize> = HashMap::new();
        let mut asked: HashMap<(u64, String), String> = HashMap::new();
        let mut replies: HashMap<String, Value> = HashMap::new();
        for recorded in &recording.messages {
            let conn = recorded.data["conn"].as_u64().unwrap_or(0);
            let message = &recorded.data["message"];
            let kind = message["type"].as_str().unwrap_or_default();
            match recorded.topic.as_str() {
                "/aicc/in" if kind == "tool_call" => {
                    let (Some(call_id), Some(tool)) =
                        (message["call_id"].as_str(), message["tool"].as_str())
                    else {
                        continue;
                    };
                    let input = match message.get("input") {
                        Some(input) => input.clone(),
                        None => json!({}),
                    };
                    pending.insert((conn, call_id.to_string()), calls.len());
                    calls.push(Exchange {
                        conn,
                        call_id: call_id.into(),
                        tool: tool.into(),
                        input,
                        call: message.clone(),
                        offset: recorded.offset,
                        result: None,
                        result_offset: None,
                    });
                }
                "/aicc/in" => {
                    if let Some(id) = message["message_id"].as_str() {
                        if !replies.contains_key(kind) {
                            asked.insert((conn, id.to_string()), kind.to_string());
                        }
                    }
                }
                "/aicc/out" if kind == "session_init" && greeting.is_none() => {
                    greeting = Some(message.clone())
                }
                "/aicc/out" if kind == "tool_result" => {
                    let Some(call_id) = message["call_id"].as_str() else { continue };
                    if let Some(index) = pending.remove(&(conn, call_id.to_string())) {
                        calls[index].result = Some(message.clone());
                        calls[index].result_offset = Some(recorded.offset);
                    }
                }
                "/aicc/out" => {
                    let Some(to) = message["in_reply_to"].as_str() else { continue };
                    if let Some(asked_kind) = asked.remove(&(conn, to.to_string())) {
                        replies.entry(asked_kind).or_insert_with(|| message.clone());
                    }
                }
                _ => {}
            }
        }
        let greeting =
            greeting.ok_or("the recording holds no session (no session_init on /aicc/out)")?;
        let used = vec![false; calls.len()];
        Ok(Self { greeting, calls, replies, used })
    }

    /// The answer to a call of `tool` with `input`, named `call_id` and
    /// sent as message `message_id`.
    pub fn answer(
        &mut self,
        tool: &str,
        input: &Value,
        call_id: &str,
        message_id: Option<&str>,
    ) -> Answer {
        let found = self.calls.iter().enumerate().position(|(i, c)| {
            !self.used[i] && c.result.is_some() && c.tool == tool && &c.input == input
        });
        let Some(index) = found else {
            let recorded = self.calls.iter().filter(|c| c.tool == tool).count();
            return Answer::Unmatched(format!("replay: no recorded call of '{tool}' with this input is left (the recording has {recorded} call(s) of '{tool}')"));
        };
        self.used[index] = true;
        let mut result = self.calls[index].result.clone().expect("found with a result");
        result["call_id"] = json!(call_id);
        if result.get("in_reply_to").is_some() {
            result["in_reply_to"] = json!(message_id);
        }
        Answer::Recorded(result)
    }

    /// The recorded reply to a message of type `kind` (heartbeat,
    /// manifest_request, session_close), readdressed to `message_id`. A
    /// manifest_request with no recorded answer gets the greeting.
    pub fn reply(&self, kind: &str, message_id: Option<&str>) -> Option<Value> {
        let mut reply = match (self.replies.get(kind), kind) {
            (Some(reply), _) => reply.clone(),
            (None, "manifest_request") => self.greeting.clone(),
            (None, "session_close") => {
                json!({ "protocol": crate::PROTOCOL, "type": "session_close", "session_id": self.greeting["session_id"], "reason": "closed by agent" })
            }
            (None, _) => return None,
        };
        reply["in_reply_to"] = json!(message_id);
        Some(reply)
    }

    /// A result the replay gives for a call it cannot match.
    pub fn unmatched_result(&self, call_id: &str, message_id: Option<&str>, why: &str) -> Value {
        json!({
            "protocol": crate::PROTOCOL, "type": "tool_result", "session_id": self.greeting["session_id"],
            "call_id": call_id, "in_reply_to": message_id, "ok": false,
            "error": { "code": "execution_failed", "message": why, "retryable": false },
            "meta": { "tick": 0, "latency_ms": 0.0, "source": "replay" },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::reader::Recorded;
    use std::collections::BTreeMap;

    fn message(topic: &str, offset: u64, data: Value) -> Recorded {
        Recorded { topic: topic.into(), log_time_ns: offset, offset, data }
    }

    fn recording() -> Recording {
        let call = |id: &str, tool: &str, input: Value| json!({ "conn": 1, "message": { "type": "tool_call", "message_id": format!("m-{id}"), "call_id": id, "tool": tool, "input": input } });
        let result = |id: &str, output: Value| json!({ "conn": 1, "message": { "type": "tool_result", "call_id": id, "ok": true, "output": output } });
        Recording {
            metadata: BTreeMap::new(),
            messages: vec![
                message(
                    "/aicc/out",
                    1,
                    json!({ "conn": 1, "message": { "type": "session_init", "session_id": "s" } }),
                ),
                message("/aicc/in", 2, call("a", "vision", json!({ "width": 64 }))),
                message("/aicc/in", 3, call("b", "vision", json!({ "width": 64 }))),
                message("/aicc/out", 4, result("a", json!("first"))),
                message("/aicc/out", 5, result("b", json!("second"))),
                message("/aicc/in", 6, call("c", "move", json!({ "forward_m": 0.2 }))),
                message(
                    "/aicc/in",
                    7,
                    json!({ "conn": 1, "message": { "type": "heartbeat", "message_id": "h1" } }),
                ),
                message(
                    "/aicc/out",
                    8,
                    json!({ "conn": 1, "message": { "type": "heartbeat", "in_reply_to": "h1", "n": 1 } }),
                ),
            ],
        }
    }

    #[test]
    fn calls_get_their_results_by_tool_and_input_in_order() {
        let mut book = Book::from_recording(&recording()).unwrap();
        assert_eq!(book.greeting["session_id"], "s");
        assert_eq!(book.calls.len(), 3);
        assert!(book.calls[2].result.is_none(), "the move never answered");
        let Answer::Recorded(first) = book.answer("vision", &json!({ "width": 64 }), "x1", None)
        else {
            panic!()
        };
        assert_eq!((&first["output"], &first["call_id"]), (&json!("first"), &json!("x1")));
        let Answer::Recorded(second) = book.answer("vision", &json!({ "width": 64 }), "x2", None)
        else {
            panic!()
        };
        assert_eq!(second["output"], "second");
        assert!(
            matches!(book.answer("vision", &json!({ "width": 64 }), "x3", None), Answer::Unmatched(why) if why.contains("has 2 call(s) of 'vision'"))
        );
    }

    #[test]
    fn another_input_or_an_unanswered_call_is_not_matched() {
        let mut book = Book::from_recording(&recording()).unwrap();
        assert!(matches!(
            book.answer("vision", &json!({ "width": 32 }), "x", None),
            Answer::Unmatched(_)
        ));
        assert!(matches!(
            book.answer("move", &json!({ "forward_m": 0.2 }), "x", None),
            Answer::Unmatched(_)
        ));
    }

    #[test]
    fn other_messages_get_the_recorded_reply_readdressed() {
        let book = Book::from_recording(&recording()).unwrap();
        let heartbeat = book.reply("heartbeat", Some("h9")).unwrap();
        assert_eq!((&heartbeat["n"], &heartbeat["in_reply_to"]), (&json!(1), &json!("h9")));
        assert_eq!(book.reply("manifest_request", Some("q")).unwrap()["type"], "session_init");
        assert!(book.reply("session_resume", None).is_none());
    }

    #[test]
    fn a_recording_without_a_session_is_refused() {
        let mut empty = recording();
        empty.messages.remove(0);
        assert!(Book::from_recording(&empty).unwrap_err().contains("no session_init"));
    }
}
