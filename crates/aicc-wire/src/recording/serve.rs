//! Serving a replay over TCP: AICC's line discipline, the greeting and
//! every answer from the [`Book`]. No robot, no ROS: nothing moves, and
//! what the agent reads is what the recorded agent read.
use std::sync::Arc;

use serde_json::{json, Value};
use std::sync::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::book::{Answer, Book};
use crate::codec::{Frame, LineFramer};

/// A recorded line may be long (a vision result): the replay accepts
/// lines as long as the bridge's largest default.
const MAX_LINE_BYTES: usize = 16 << 20;
/// Wrong tokens before a connection is closed.
const MAX_AUTH_FAILURES: u32 = 3;
/// How long a connection may take to present its token.
const AUTH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Who may read a replay: with tokens, only a connection that opens with
/// `manifest_request` carrying one of them (nothing is sent before); the
/// connections served at once, in all and per source address.
#[derive(Debug, Clone)]
pub struct Access {
    pub tokens: Vec<String>,
    pub max_connections: usize,
    pub max_connections_per_address: usize,
}

impl Default for Access {
    /// No token, and the bridge's default caps (for a loopback replay).
    fn default() -> Self {
        Self { tokens: Vec::new(), max_connections: 256, max_connections_per_address: 64 }
    }
}

/// Serves `book` to every connection on `listener` until the task is
/// dropped, as `access` allows. Calls from all connections draw on the
/// one book, in order.
pub async fn serve(listener: TcpListener, book: Arc<Mutex<Book>>, access: Access) {
    let access = Arc::new(access);
    let held: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>> = Arc::default();
    loop {
        let Ok((mut stream, peer)) = listener.accept().await else { continue };
        let admitted = {
            let mut held = lock(&held);
            let total: usize = held.values().sum();
            let mine = held.entry(peer.ip()).or_default();
            let admitted =
                total < access.max_connections && *mine < access.max_connections_per_address;
            if admitted {
                *mine += 1;
            }
            admitted
        };
        if !admitted {
            tokio::spawn(async move {
                let refusal = json!({ "protocol": crate::PROTOCOL, "type": "error", "code": "tool_unavailable", "retryable": true, "message": "the replay serves no more connections now (from this address, or in all); retry later" });
                let _ = tokio::time::timeout(AUTH_TIMEOUT, send(&mut stream, &refusal)).await;
            });
            continue;
        }
        let (book, access, held) = (book.clone(), access.clone(), held.clone());
        tokio::spawn(async move {
            // A connection's end is the agent's business: nothing to report.
            let _ = serve_connection(stream, book, &access).await;
            let mut held = lock(&held);
            if let Some(count) = held.get_mut(&peer.ip()) {
                *count -= 1;
                if *count == 0 {
                    held.remove(&peer.ip());
                }
            }
        });
    }
}

/// Whether `presented` is one of `tokens`, comparing every byte of each.
fn token_matches(tokens: &[String], presented: &str) -> bool {
    let mut matched = false;
    for token in tokens {
        let (a, b) = (token.as_bytes(), presented.as_bytes());
        let mut difference = (a.len() != b.len()) as u8;
        for (index, byte) in a.iter().enumerate() {
            difference |= byte ^ b.get(index).copied().unwrap_or(!byte);
        }
        matched |= difference == 0;
    }
    matched
}

async fn send(stream: &mut TcpStream, message: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).expect("a JSON value serialises");
    line.push(b'\n');
    stream.write_all(&line).await
}

async fn serve_connection(
    mut stream: TcpStream,
    book: Arc<Mutex<Book>>,
    access: &Access,
) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut framer = LineFramer::new(MAX_LINE_BYTES);
    let mut buffer = vec![0u8; 64 * 1024];
    if !access.tokens.is_empty()
        && !tokio::time::timeout(
            AUTH_TIMEOUT,
            authenticate(&mut stream, &mut framer, &mut buffer, &access.tokens),
        )
        .await
        .unwrap_or(Ok(false))?
    {
        return Ok(());
    }
    let greeting = lock(&book).greeting.clone();
    send(&mut stream, &greeting).await?;
    loop {
        while let Some(frame) = framer.next_frame() {
            let Frame::Line(line) = frame else {
                return Err(std::io::Error::other("a line longer than the replay accepts"));
            };
            let (answer, close) = answer_line(&book, &line);
            if let Some(answer) = answer {
                send(&mut stream, &answer).await?;
            }
            if close {
                return Ok(());
            }
        }
        let count = stream.read(&mut buffer).await?;
        if count == 0 {
            return Ok(());
        }
        framer.push(&buffer[..count]);
    }
}

/// Waits for a `manifest_request` carrying one of `tokens` (as the
/// bridge asks); answers each other line with an error. False: the
/// connection is to be closed (too many wrong tokens, or it closed).
async fn authenticate(
    stream: &mut TcpStream,
    framer: &mut LineFramer,
    buffer: &mut [u8],
    tokens: &[String],
) -> std::io::Result<bool> {
    let mut failures = 0;
    loop {
        while let Some(frame) = framer.next_frame() {
            let Frame::Line(line) = frame else { return Ok(false) };
            let message: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
            let presented =
                message["auth"]["token"].as_str().filter(|_| message["type"] == "manifest_request");
            if presented.is_some_and(|token| token_matches(tokens, token)) {
                return Ok(true);
            }
            failures += 1;
            let why = if presented.is_some() {
                "authentication failed: token not accepted"
            } else {
                "authentication required: open with manifest_request carrying auth.token"
            };
            send(stream, &json!({ "protocol": crate::PROTOCOL, "type": "error", "code": "invalid_input", "retryable": false, "message": why, "in_reply_to": message["message_id"] })).await?;
            if failures >= MAX_AUTH_FAILURES {
                return Ok(false);
            }
        }
        let count = stream.read(buffer).await?;
        if count == 0 {
            return Ok(false);
        }
        framer.push(&buffer[..count]);
    }
}

/// The lock's data, even after a connection's task panicked holding it.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The answer to one line, and whether the connection ends after it.
pub fn answer_line(book: &Mutex<Book>, line: &[u8]) -> (Option<Value>, bool) {
    let book_ref = lock(book);
    let session = book_ref.greeting["session_id"].clone();
    drop(book_ref);
    let error = |message: String, in_reply_to: Option<&str>| json!({ "protocol": crate::PROTOCOL, "type": "error", "session_id": session, "in_reply_to": in_reply_to, "code": "invalid_input", "message": message, "retryable": false });
    let Ok(message) = serde_json::from_slice::<Value>(line) else {
        return (Some(error("line is not valid JSON".into(), None)), false);
    };
    let message_id = message["message_id"].as_str();
    match message["type"].as_str() {
        Some("tool_call") => {
            let (Some(call_id), Some(tool)) =
                (message["call_id"].as_str(), message["tool"].as_str())
            else {
                return (
                    Some(error("a tool_call needs call_id and tool".into(), message_id)),
                    false,
                );
            };
            let input = message.get("input").cloned().unwrap_or_else(|| json!({}));
            let mut book = lock(book);
            let result = match book.answer(tool, &input, call_id, message_id) {
                Answer::Recorded(result) => result,
                Answer::Unmatched(why) => book.unmatched_result(call_id, message_id, &why),
            };
            (Some(result), false)
        }
        Some(kind @ "session_close") => (lock(book).reply(kind, message_id), true),
        Some(kind @ ("heartbeat" | "manifest_request")) => {
            (lock(book).reply(kind, message_id), false)
        }
        Some(other) => {
            (Some(error(format!("a replay does not serve '{other}'"), message_id)), false)
        }
        None => (Some(error("a message needs a type".into(), message_id)), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_only_itself() {
        let tokens = vec!["replay-secret".to_string(), "other".to_string()];
        assert!(token_matches(&tokens, "replay-secret") && token_matches(&tokens, "other"));
        for wrong in ["", "replay-secre", "replay-secret!", "Replay-secret", "othe\u{0}"] {
            assert!(!token_matches(&tokens, wrong), "{wrong:?}");
        }
        assert!(!token_matches(&[], "anything"));
    }
}
