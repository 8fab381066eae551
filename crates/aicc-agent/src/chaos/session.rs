//! A bare AICC session for the chaos agent: connect, authenticate, send
//! tool calls (any input, valid or not), answer the bridge's heartbeats,
//! and hand over results and governor events. Dropping it closes the
//! socket abruptly, as a crashed agent would.
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Longest line accepted from the bridge (a vision result is far smaller:
/// the generator asks for small images).
const MAX_LINE_BYTES: u64 = 8 << 20;

/// What the chaos agent cares about in what the bridge sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Result { call_id: String, ok: bool, code: String, message: String },
    Restriction { rule: String },
}

pub struct Session {
    pub manifest: Value,
    writer: OwnedWriteHalf,
    lines: mpsc::Receiver<Result<Value, String>>,
    reader: tokio::task::JoinHandle<()>,
    next: u64,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Session {
    pub async fn connect(host: &str, port: u16, token: Option<&str>) -> Result<Self, String> {
        let stream =
            tokio::time::timeout(Duration::from_secs(10), TcpStream::connect((host, port)))
                .await
                .map_err(|_| format!("connecting to {host}:{port} timed out"))?
                .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (read, writer) = stream.into_split();
        let (sender, lines) = mpsc::channel(1024);
        let reader = tokio::spawn(async move {
            let mut read = BufReader::new(read);
            let mut buffer = Vec::new();
            loop {
                buffer.clear();
                let got = (&mut read).take(MAX_LINE_BYTES).read_until(b'\n', &mut buffer).await;
                let item = match got {
                    Ok(0) => Err("the bridge closed the connection".to_string()),
                    Ok(_) => serde_json::from_slice::<Value>(&buffer)
                        .map_err(|e| format!("a line that is not JSON: {e}")),
                    Err(e) => Err(format!("reading: {e}")),
                };
                let end = item.is_err();
                if sender.send(item).await.is_err() || end {
                    return;
                }
            }
        });
        let mut session = Session { manifest: Value::Null, writer, lines, reader, next: 0 };
        let mut request = json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": "chaos-hello" });
        if let Some(token) = token {
            request["auth"] = json!({ "token": token });
        }
        session.send(&request).await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let line = tokio::time::timeout_at(deadline, session.lines.recv())
                .await
                .map_err(|_| "no session_init within 10 s".to_string())?
                .ok_or("the reader ended")??;
            match line.get("type").and_then(Value::as_str) {
                Some("session_init") => {
                    session.manifest = line;
                    return Ok(session);
                }
                Some("error") => return Err(format!("the bridge refused the session: {line}")),
                _ => {}
            }
        }
    }

    async fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut line = serde_json::to_vec(message).expect("JSON values serialize");
        line.push(b'\n');
        tokio::time::timeout(Duration::from_secs(10), self.writer.write_all(&line))
            .await
            .map_err(|_| "writing to the bridge timed out".to_string())?
            .map_err(|e| format!("writing to the bridge: {e}"))
    }

    /// Sends a tool call; returns its call_id.
    pub async fn call(&mut self, tool: &str, input: &Value) -> Result<String, String> {
        self.next += 1;
        let call_id = format!("chaos-{}", self.next);
        let message = json!({ "protocol": "aicc/0.1", "type": "tool_call", "message_id": format!("m-{call_id}"), "call_id": call_id, "tool": tool, "input": input });
        self.send(&message).await?;
        Ok(call_id)
    }

    /// What arrives within `within` (at least what is already there),
    /// heartbeats answered on the way.
    pub async fn next(&mut self, within: Duration) -> Result<Vec<Incoming>, String> {
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let line = match self.lines.try_recv() {
                Ok(line) => line,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    return Err("the bridge connection's reader ended".into())
                }
                Err(mpsc::error::TryRecvError::Empty) => {
                    if !out.is_empty() || tokio::time::Instant::now() >= deadline {
                        return Ok(out);
                    }
                    match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                        Ok(Some(line)) => line,
                        Ok(None) => return Err("the bridge connection's reader ended".into()),
                        Err(_) => return Ok(out),
                    }
                }
            };
            let message = line?;
            match message.get("type").and_then(Value::as_str) {
                Some("tool_result") => {
                    let call_id = message
                        .get("call_id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let ok = message.get("ok") == Some(&Value::Bool(true));
                    let code = message
                        .pointer("/error/code")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let text = message
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    out.push(Incoming::Result { call_id, ok, code, message: text });
                }
                Some("event")
                    if message.get("topic").and_then(Value::as_str) == Some("governor")
                        && message.pointer("/payload/kind").and_then(Value::as_str)
                            == Some("restriction_began") =>
                {
                    let rule = message
                        .pointer("/payload/rule")
                        .map(|r| r.as_str().map_or_else(|| r.to_string(), str::to_string))
                        .unwrap_or_default();
                    out.push(Incoming::Restriction { rule });
                }
                Some("heartbeat") if message.get("in_reply_to").is_none_or(Value::is_null) => {
                    let answer = json!({ "protocol": "aicc/0.1", "type": "heartbeat", "message_id": format!("chaos-hb-{}", self.next), "in_reply_to": message.get("message_id") });
                    self.send(&answer).await?;
                }
                _ => {}
            }
        }
    }
}
