//! `aicc replay FILE`: the recorded agent's calls re-run, one after the
//! other in recorded order, each result compared with the recorded one
//! (docs/recording.md, "Replay"). `--check` runs them against the
//! recording served in-process; `--against HOST:PORT` against a live
//! bridge, with the time-dependent fields ignored ([`compare::LIVE_IGNORED`]).
pub mod compare;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::transport::Duplex;
use crate::client::ClientError;
use aicc_wire::codec::{Frame, LineFramer};
use aicc_wire::recording::Exchange;
use compare::{compare, shown, Difference, Rules};

/// A result line may carry a picture.
const MAX_LINE_BYTES: usize = 16 << 20;

/// The differences of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReport {
    pub call_id: String,
    pub tool: String,
    /// Where the recorded call is in the file.
    pub offset: u64,
    pub differences: Vec<Difference>,
}

/// What a re-run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub compared: usize,
    /// Calls the recording has no result for (it ended first).
    pub skipped: Vec<String>,
    /// Calls whose result differs.
    pub differing: Vec<CallReport>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.differing.is_empty()
    }

    /// The report as text: a summary line, then one line per field that differs.
    pub fn text(&self) -> String {
        let mut out = format!(
            "replay: {} call(s) compared, {} with differences, {} skipped (no recorded result)\n",
            self.compared,
            self.differing.len(),
            self.skipped.len()
        );
        for skipped in &self.skipped {
            out.push_str(&format!("skipped {skipped}\n"));
        }
        for call in &self.differing {
            for difference in &call.differences {
                out.push_str(&format!(
                    "call {} ({}, recorded at byte {}): {}: recorded {}, replayed {}\n",
                    call.call_id,
                    call.tool,
                    call.offset,
                    difference.path,
                    shown(&difference.recorded),
                    shown(&difference.replayed)
                ));
            }
        }
        out
    }
}

/// One line-oriented connection, raw JSON both ways.
struct Lines {
    stream: Box<dyn Duplex>,
    framer: LineFramer,
    buffer: Vec<u8>,
}

impl Lines {
    async fn send(&mut self, message: &Value) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(message)
            .map_err(|e| ClientError::Usage(format!("cannot encode a message: {e}")))?;
        line.push(b'\n');
        self.stream
            .write_all(&line)
            .await
            .map_err(|e| ClientError::Transport(format!("writing to the bridge: {e}")))
    }

    async fn next(&mut self, until: Instant) -> Result<Value, ClientError> {
        loop {
            match self.framer.next_frame() {
                Some(Frame::Line(line)) => {
                    return serde_json::from_slice(&line).map_err(|e| {
                        ClientError::Protocol(format!("a line from the bridge is not JSON: {e}"))
                    })
                }
                Some(Frame::Oversized { limit_bytes }) => {
                    return Err(ClientError::Protocol(format!(
                        "a line from the bridge is longer than {limit_bytes} bytes"
                    )))
                }
                None => {}
            }
            let read = tokio::time::timeout_at(
                tokio::time::Instant::from_std(until),
                self.stream.read(&mut self.buffer),
            )
            .await;
            match read {
                Err(_) => {
                    return Err(ClientError::Transport("no answer from the bridge in time".into()))
                }
                Ok(Err(e)) => {
                    return Err(ClientError::Transport(format!("reading from the bridge: {e}")))
                }
                Ok(Ok(0)) => {
                    return Err(ClientError::Transport("the bridge closed the connection".into()))
                }
                Ok(Ok(count)) => self.framer.push(&self.buffer[..count]),
            }
        }
    }

    /// The next message that is not the bridge's own heartbeat (answered).
    async fn next_answer(&mut self, until: Instant) -> Result<Value, ClientError> {
        loop {
            let message = self.next(until).await?;
            if message["type"] == "heartbeat"
                && message.get("in_reply_to").is_none_or(Value::is_null)
            {
                self.send(&json!({ "protocol": aicc_wire::PROTOCOL, "type": "heartbeat", "message_id": format!("replay-hb-{}", uuid::Uuid::new_v4()) })).await?;
                continue;
            }
            return Ok(message);
        }
    }
}

/// Re-runs `calls` on `stream` (a bridge or a replay); `token` opens the
/// session when the bridge needs one. Every call waits for its result
/// before the next is sent, so the order is the recorded order.
/// With `skip_operator_calls`, calls of the operator's tools (by the live
/// manifest's capability `can_administer_bridge` or `can_modify_world`, or
/// by name) are not sent, and listed as skipped: a replay must not decide
/// again what an operator decided (approve a call, switch approval mode,
/// release a hold, stop a recording).
pub async fn run(
    calls: &[Exchange],
    stream: Box<dyn Duplex>,
    token: Option<&str>,
    rules: &Rules,
    timeout: Duration,
    skip_operator_calls: bool,
) -> Result<Report, ClientError> {
    let mut lines =
        Lines { stream, framer: LineFramer::new(MAX_LINE_BYTES), buffer: vec![0; 64 * 1024] };
    if let Some(token) = token {
        lines.send(&json!({ "protocol": aicc_wire::PROTOCOL, "type": "manifest_request", "message_id": "replay-open", "auth": { "token": token } })).await?;
    }
    let until = Instant::now() + timeout;
    let init = loop {
        let message = lines.next_answer(until).await?;
        match message["type"].as_str() {
            Some("session_init") => break message,
            Some("error") => {
                return Err(ClientError::Refused(format!(
                    "the bridge refused the session: {}",
                    message["message"]
                )))
            }
            _ => continue,
        }
    };
    let operators = operator_tools(&init);
    let mut report = Report::default();
    for (index, exchange) in calls.iter().enumerate() {
        if skip_operator_calls && operators.contains(&exchange.tool) {
            report.skipped.push(format!("call {} ({}, recorded at byte {}): an operator's call, not re-sent (--include-operator-calls sends it)", exchange.call_id, exchange.tool, exchange.offset));
            continue;
        }
        let Some(recorded) = &exchange.result else {
            report.skipped.push(format!(
                "call {} ({}, recorded at byte {})",
                exchange.call_id, exchange.tool, exchange.offset
            ));
            continue;
        };
        let mut call = exchange.call.clone();
        if let Value::Object(fields) = &mut call {
            // The recorded session is not this connection's.
            fields.remove("session_id");
            fields.insert("message_id".into(), json!(format!("replay-{index}")));
        }
        lines.send(&call).await?;
        let until = Instant::now() + timeout;
        let replayed = loop {
            let message = lines.next_answer(until).await?;
            let answers = message["call_id"] == exchange.call_id.as_str()
                && matches!(message["type"].as_str(), Some("tool_result" | "error"));
            if answers {
                break message;
            }
        };
        report.compared += 1;
        let differences = compare(recorded, &replayed, rules);
        if !differences.is_empty() {
            report.differing.push(CallReport {
                call_id: exchange.call_id.clone(),
                tool: exchange.tool.clone(),
                offset: exchange.offset,
                differences,
            });
        }
    }
    let _ = lines.send(&json!({ "protocol": aicc_wire::PROTOCOL, "type": "session_close", "message_id": "replay-close" })).await;
    Ok(report)
}

/// The operator's tools of a manifest: by capability, and by name.
fn operator_tools(manifest: &Value) -> Vec<String> {
    let by_capability = manifest["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| {
            matches!(t["capability"].as_str(), Some("can_administer_bridge" | "can_modify_world"))
        })
        .filter_map(|t| t["id"].as_str().map(str::to_owned));
    by_capability
        .chain(crate::client::manifest::OPERATOR_TOOLS.iter().map(|t| t.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_tools_are_known_by_capability_and_by_name() {
        let manifest = json!({ "tools": [{ "id": "move", "capability": "can_move_self" }, { "id": "place_object", "capability": "can_modify_world" }, { "id": "custom_admin", "capability": "can_administer_bridge" }] });
        let tools = operator_tools(&manifest);
        assert!(
            tools.iter().any(|t| t == "place_object")
                && tools.iter().any(|t| t == "custom_admin")
                && tools.iter().any(|t| t == "approve")
        );
        assert!(!tools.iter().any(|t| t == "move"));
    }

    #[test]
    fn the_report_names_the_call_and_the_field() {
        let report = Report {
            compared: 2,
            skipped: vec!["call w (wait, recorded at byte 90)".into()],
            differing: vec![CallReport {
                call_id: "c2".into(),
                tool: "proprioception".into(),
                offset: 1234,
                differences: vec![Difference {
                    path: "output.base.x_m".into(),
                    recorded: Some(json!(1.0)),
                    replayed: Some(json!(2.0)),
                }],
            }],
        };
        assert!(!report.is_clean());
        let text = report.text();
        assert!(
            text.starts_with("replay: 2 call(s) compared, 1 with differences, 1 skipped"),
            "{text}"
        );
        assert!(text.contains("call c2 (proprioception, recorded at byte 1234): output.base.x_m: recorded 1.0, replayed 2.0"), "{text}");
        assert!(Report::default().is_clean());
    }
}
