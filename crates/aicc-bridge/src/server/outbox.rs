//! A connection's bounded outbound queue and its slow-reader policy:
//! - replies (session_init, tool_result, error...) are always queued: the
//!   connection stops reading new requests while the queue is full, so
//!   their number stays bounded and none is ever lost;
//! - events are dropped when the queue is full, counted, and the count is
//!   sent as an `events_dropped` event before the next message. Dropped
//!   events stay in the session's ring: `session_resume` with the last seq
//!   seen replays them.
use std::collections::VecDeque;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

use crate::protocol::ids::{IdSource, RandomIds};
use crate::protocol::message::PROTOCOL;

struct Queue {
    messages: VecDeque<Value>,
    dropped_events: u64,
    closed: bool,
    /// Ids of the `events_dropped` notices. The outbox has its own: it is
    /// pushed to while the core's lock is held, so it cannot ask the core.
    ids: Box<dyn IdSource>,
}

pub struct Outbox {
    queue: Mutex<Queue>,
    capacity: usize,
    /// Wakes the writer (new message or close).
    wake_writer: Notify,
    /// Wakes the reader (room in the queue, or close).
    wake_reader: Notify,
}

impl Outbox {
    pub fn new(capacity: usize) -> Self {
        Self::with_ids(capacity, RandomIds)
    }

    pub fn with_ids(capacity: usize, ids: impl IdSource + 'static) -> Self {
        let queue = Queue { messages: VecDeque::new(), dropped_events: 0, closed: false, ids: Box::new(ids) };
        Self { queue: Mutex::new(queue), capacity: capacity.max(1), wake_writer: Notify::new(), wake_reader: Notify::new() }
    }

    /// Queues a message; a droppable one (an event) is dropped and counted
    /// when the queue is full.
    pub fn push(&self, message: Value, droppable: bool) {
        let mut queue = self.queue.lock();
        if queue.closed {
            return;
        }
        if droppable && queue.messages.len() >= self.capacity {
            queue.dropped_events += 1;
            return;
        }
        if queue.dropped_events > 0 {
            let count = std::mem::take(&mut queue.dropped_events);
            // It takes the tick (and session) of the message it precedes, so
            // agents that order events by tick place it correctly. It has no
            // seq: it is a notice of this connection, not a session event.
            let mut notice = json!({
                "protocol": PROTOCOL,
                "type": "event",
                "topic": "events_dropped",
                "message_id": queue.ids.next_id(),
                "payload": { "count": count, "reason": "the agent read too slowly; session_resume with the last seq seen replays them" },
            });
            if let Some(tick) = message.pointer("/meta/tick") {
                notice["meta"] = json!({ "tick": tick });
            }
            if let Some(session) = message.get("session_id") {
                notice["session_id"] = session.clone();
            }
            queue.messages.push_back(notice);
        }
        queue.messages.push_back(message);
        drop(queue);
        self.wake_writer.notify_one();
    }

    pub fn len(&self) -> usize {
        self.queue.lock().messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting messages; the writer flushes what is queued, then
    /// shuts the stream down.
    pub fn close(&self) {
        self.queue.lock().closed = true;
        self.wake_writer.notify_one();
        self.wake_reader.notify_waiters();
    }

    pub fn is_closed(&self) -> bool {
        self.queue.lock().closed
    }

    /// Resolves once closed.
    pub async fn closed(&self) {
        loop {
            let notified = self.wake_reader.notified();
            if self.is_closed() {
                return;
            }
            notified.await;
        }
    }

    /// Waits while the queue is full (the reader's backpressure).
    pub async fn wait_for_room(&self) {
        loop {
            let notified = self.wake_reader.notified();
            {
                let queue = self.queue.lock();
                if queue.closed || queue.messages.len() < self.capacity {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Writes queued messages as NDJSON until closed and drained.
    pub async fn write_to<W: AsyncWrite + Unpin>(self: std::sync::Arc<Self>, mut writer: W) -> std::io::Result<()> {
        let mut buffer = Vec::with_capacity(4096);
        loop {
            let notified = self.wake_writer.notified();
            let (batch, closed) = {
                let mut queue = self.queue.lock();
                (queue.messages.drain(..).collect::<Vec<_>>(), queue.closed)
            };
            if !batch.is_empty() {
                self.wake_reader.notify_waiters();
                buffer.clear();
                for message in &batch {
                    serde_json::to_writer(&mut buffer, message).expect("a serde_json::Value always serializes");
                    buffer.push(b'\n');
                }
                if let Err(error) = writer.write_all(&buffer).await {
                    self.close();
                    return Err(error);
                }
                continue;
            }
            if closed {
                let _ = writer.flush().await;
                return writer.shutdown().await;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_dropped_and_counted_replies_never() {
        let outbox = Outbox::with_ids(2, crate::protocol::ids::SequentialIds::new("notice"));
        outbox.push(json!({"n": 1}), true);
        outbox.push(json!({"n": 2}), true);
        outbox.push(json!({"n": 3}), true); // dropped
        outbox.push(json!({"n": 4}), true); // dropped
        outbox.push(json!({"reply": 1, "session_id": "s-1", "meta": {"tick": 7}}), false); // queued beyond capacity, after the notice
        let queue = outbox.queue.lock();
        let messages: Vec<&Value> = queue.messages.iter().collect();
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[2]["topic"], "events_dropped");
        assert_eq!(messages[2]["payload"]["count"], 2);
        assert_eq!(messages[2]["meta"]["tick"], 7, "the notice takes the tick of the message it precedes");
        assert_eq!(messages[2]["session_id"], "s-1");
        assert_eq!(messages[2]["message_id"], "notice-1", "from the outbox's own ids");
        assert_eq!(messages[3]["reply"], 1);
    }

    #[tokio::test]
    async fn the_writer_drains_then_shuts_down_on_close() {
        let outbox = std::sync::Arc::new(Outbox::new(8));
        outbox.push(json!({"a": 1}), false);
        outbox.push(json!({"b": 2}), true);
        outbox.close();
        outbox.push(json!({"c": 3}), false);
        let mut written = Vec::new();
        outbox.clone().write_to(&mut written).await.unwrap();
        assert_eq!(String::from_utf8(written).unwrap(), "{\"a\":1}\n{\"b\":2}\n");
    }
}
