//! Serving a replay over TCP: AICC's line discipline, the greeting and
//! every answer from the [`Book`]. No robot, no ROS: nothing moves, and
//! what the agent reads is what the recorded agent read.
use std::sync::Arc;

use std::sync::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::book::{Answer, Book};
use crate::codec::{Frame, LineFramer};

/// A recorded line may be long (a vision result): the replay accepts
/// lines as long as the bridge's largest default.
const MAX_LINE_BYTES: usize = 16 << 20;

/// Serves `book` to every connection on `listener` until the task is
/// dropped. Calls from all connections draw on the one book, in order.
pub async fn serve(listener: TcpListener, book: Arc<Mutex<Book>>) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else { continue };
        let book = book.clone();
        tokio::spawn(async move {
            // A connection's end is the agent's business: nothing to report.
            let _ = (serve_connection(stream, book).await, peer);
        });
    }
}

async fn send(stream: &mut TcpStream, message: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).expect("a JSON value serialises");
    line.push(b'\n');
    stream.write_all(&line).await
}

async fn serve_connection(mut stream: TcpStream, book: Arc<Mutex<Book>>) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let greeting = lock(&book).greeting.clone();
    send(&mut stream, &greeting).await?;
    let mut framer = LineFramer::new(MAX_LINE_BYTES);
    let mut buffer = vec![0u8; 64 * 1024];
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

/// The book, even after a connection's task panicked holding it.
fn lock(book: &Mutex<Book>) -> std::sync::MutexGuard<'_, Book> {
    book.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The answer to one line, and whether the connection ends after it.
pub fn answer_line(book: &Mutex<Book>, line: &[u8]) -> (Option<Value>, bool) {
    let book_ref = lock(book);
    let session = book_ref.greeting["session_id"].clone();
    drop(book_ref);
    let error = |message: String, in_reply_to: Option<&str>| {
        json!({ "protocol": crate::PROTOCOL, "type": "error", "session_id": session, "in_reply_to": in_reply_to, "code": "invalid_input", "message": message, "retryable": false })
    };
    let Ok(message) = serde_json::from_slice::<Value>(line) else { return (Some(error("line is not valid JSON".into(), None)), false) };
    let message_id = message["message_id"].as_str();
    match message["type"].as_str() {
        Some("tool_call") => {
            let (Some(call_id), Some(tool)) = (message["call_id"].as_str(), message["tool"].as_str()) else {
                return (Some(error("a tool_call needs call_id and tool".into(), message_id)), false);
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
        Some(kind @ ("heartbeat" | "manifest_request")) => (lock(book).reply(kind, message_id), false),
        Some(other) => (Some(error(format!("a replay does not serve '{other}'"), message_id)), false),
        None => (Some(error("a message needs a type".into(), message_id)), false),
    }
}
