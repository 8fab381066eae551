//! A connection's bounded outbound queue and its slow-reader policy:
//! - messages are serialised when queued, so the queue's cost is counted
//!   in bytes as well as in messages, and bounded by both;
//! - replies (session_init, tool_result, error...) are always queued: the
//!   connection stops reading (and parsing) new requests while the queue is
//!   over either bound, so their number stays bounded and none is ever lost;
//! - events are dropped when the queue is full, counted, and the count is
//!   sent as an `events_dropped` event before the next message. Dropped
//!   events stay in the session's ring: `session_resume` with the last seq
//!   seen replays them;
//! - a peer that reads nothing for `write_stall` while bytes wait for it is
//!   disconnected (the writer ends with a `TimedOut` error naming the bound).
use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

use crate::protocol::ids::{IdSource, RandomIds};
use crate::protocol::message::PROTOCOL;

/// Bytes the writer hands the stream at once: large enough to fill a
/// socket buffer in few calls, small enough to count as queued until sent.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// What one connection's queue may hold before reading pauses and events drop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutboxLimits {
    pub messages: usize,
    pub bytes: usize,
    /// How long the peer may read nothing while bytes wait before it is
    /// disconnected.
    pub write_stall: Duration,
}

struct Queue {
    /// Serialised messages, each with its newline.
    lines: VecDeque<Vec<u8>>,
    /// Bytes in `lines` plus the batch the writer is sending.
    bytes: usize,
    /// Messages in `lines` plus those of the batch being sent.
    messages: usize,
    dropped_events: u64,
    closed: bool,
    /// Ids of the `events_dropped` notices. The outbox has its own: it is
    /// pushed to while the core's lock is held, so it cannot ask the core.
    ids: Box<dyn IdSource>,
}

impl Queue {
    fn is_full(&self, limits: &OutboxLimits) -> bool {
        self.messages >= limits.messages || self.bytes >= limits.bytes
    }

    fn push_line(&mut self, line: Vec<u8>) {
        self.bytes += line.len();
        self.messages += 1;
        self.lines.push_back(line);
    }
}

/// What the queue holds now (for status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Occupancy {
    pub messages: usize,
    pub bytes: usize,
}

pub struct Outbox {
    queue: Mutex<Queue>,
    limits: OutboxLimits,
    /// Wakes the writer (new message or close).
    wake_writer: Notify,
    /// Wakes the reader (room in the queue, or close).
    wake_reader: Notify,
}

fn serialise(message: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).expect("a serde_json::Value always serializes");
    line.push(b'\n');
    line
}

impl Outbox {
    pub fn new(limits: OutboxLimits) -> Self {
        Self::with_ids(limits, RandomIds)
    }

    pub fn with_ids(limits: OutboxLimits, ids: impl IdSource + 'static) -> Self {
        let limits =
            OutboxLimits { messages: limits.messages.max(1), bytes: limits.bytes.max(1), ..limits };
        let queue = Queue {
            lines: VecDeque::new(),
            bytes: 0,
            messages: 0,
            dropped_events: 0,
            closed: false,
            ids: Box::new(ids),
        };
        Self {
            queue: Mutex::new(queue),
            limits,
            wake_writer: Notify::new(),
            wake_reader: Notify::new(),
        }
    }

    /// Queues a message; a droppable one (an event) is dropped and counted
    /// when the queue is full.
    pub fn push(&self, message: Value, droppable: bool) {
        self.push_ref(&message, droppable);
    }

    /// [`Self::push`] of a message shared with others (the tap).
    pub fn push_ref(&self, message: &Value, droppable: bool) {
        let mut queue = self.queue.lock();
        if queue.closed {
            return;
        }
        if droppable && queue.is_full(&self.limits) {
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
            queue.push_line(serialise(&notice));
        }
        queue.push_line(serialise(message));
        drop(queue);
        self.wake_writer.notify_one();
    }

    /// Messages and bytes queued or being written.
    pub fn occupancy(&self) -> Occupancy {
        let queue = self.queue.lock();
        Occupancy { messages: queue.messages, bytes: queue.bytes }
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

    /// Whether reading should pause (the queue is over a bound).
    #[cfg(test)]
    pub fn is_full(&self) -> bool {
        self.queue.lock().is_full(&self.limits)
    }

    /// Waits while the queue is over a bound (the reader's backpressure);
    /// returns at once when closed.
    pub async fn wait_for_room(&self) {
        loop {
            let notified = self.wake_reader.notified();
            {
                let queue = self.queue.lock();
                if queue.closed || !queue.is_full(&self.limits) {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Takes up to [`WRITE_BATCH_BYTES`] of queued lines (at least one);
    /// they stay counted until [`Self::written`].
    fn take_batch(&self, batch: &mut Vec<u8>) -> (usize, bool) {
        let mut queue = self.queue.lock();
        let mut taken = 0;
        while let Some(line) = queue.lines.front() {
            if taken > 0 && batch.len() + line.len() > WRITE_BATCH_BYTES {
                break;
            }
            let line = queue.lines.pop_front().expect("a front line");
            batch.extend_from_slice(&line);
            taken += 1;
        }
        (taken, queue.closed)
    }

    fn written(&self, messages: usize, bytes: usize) {
        let mut queue = self.queue.lock();
        let was_full = queue.is_full(&self.limits);
        queue.messages -= messages;
        queue.bytes -= bytes;
        if queue.lines.is_empty() && queue.lines.capacity() > 64 {
            // An idle connection keeps no queue sized for its busiest moment.
            queue.lines.shrink_to(16);
        }
        drop(queue);
        // Only a queue that was full has a reader waiting for room (a
        // wake-up per message written would poll the reader for nothing).
        if was_full {
            self.wake_reader.notify_waiters();
        }
    }

    /// Writes queued messages as NDJSON until closed and drained. Ends with
    /// `TimedOut` when the peer reads nothing for the stall bound.
    pub async fn write_to<W: AsyncWrite + Unpin>(
        self: std::sync::Arc<Self>,
        mut writer: W,
    ) -> std::io::Result<()> {
        let mut batch = Vec::new();
        loop {
            let notified = self.wake_writer.notified();
            batch.clear();
            let (messages, closed) = self.take_batch(&mut batch);
            if messages > 0 {
                let sent = write_within(&mut writer, &batch, self.limits.write_stall).await;
                self.written(messages, batch.len());
                if batch.capacity() > 2 * WRITE_BATCH_BYTES {
                    // One huge message (an image) does not stay allocated.
                    batch = Vec::new();
                }
                if let Err(error) = sent {
                    self.close();
                    return Err(error);
                }
                continue;
            }
            if closed {
                let _ = tokio::time::timeout(self.limits.write_stall, writer.flush()).await;
                return match tokio::time::timeout(self.limits.write_stall, writer.shutdown()).await
                {
                    Ok(result) => result,
                    Err(_) => Err(stalled(self.limits.write_stall, 0)),
                };
            }
            notified.await;
        }
    }
}

fn stalled(bound: Duration, waiting: usize) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, format!("the peer read nothing for {:.1} s with {waiting} bytes waiting for it (write_stall_timeout_s)", bound.as_secs_f64()))
}

/// Writes all of `bytes` and flushes, failing when no progress is made for
/// `stall` (a slow reader that still reads is never cut off).
async fn write_within<W: AsyncWrite + Unpin>(
    writer: &mut W,
    bytes: &[u8],
    stall: Duration,
) -> std::io::Result<()> {
    let mut sent = 0;
    while sent < bytes.len() {
        match tokio::time::timeout(stall, writer.write(&bytes[sent..])).await {
            Ok(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => sent += n,
            Ok(Err(error)) => return Err(error),
            Err(_) => return Err(stalled(stall, bytes.len() - sent)),
        }
    }
    match tokio::time::timeout(stall, writer.flush()).await {
        Ok(result) => result,
        Err(_) => Err(stalled(stall, 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(messages: usize, bytes: usize) -> OutboxLimits {
        OutboxLimits { messages, bytes, write_stall: Duration::from_secs(5) }
    }

    fn queued(outbox: &Outbox) -> Vec<Value> {
        outbox.queue.lock().lines.iter().map(|line| serde_json::from_slice(line).unwrap()).collect()
    }

    #[test]
    fn events_are_dropped_and_counted_replies_never() {
        let outbox = Outbox::with_ids(
            limits(2, 1 << 20),
            crate::protocol::ids::SequentialIds::new("notice"),
        );
        outbox.push(json!({"n": 1}), true);
        outbox.push(json!({"n": 2}), true);
        outbox.push(json!({"n": 3}), true); // dropped
        outbox.push(json!({"n": 4}), true); // dropped
        outbox.push(json!({"reply": 1, "session_id": "s-1", "meta": {"tick": 7}}), false); // queued beyond capacity, after the notice
        let messages = queued(&outbox);
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[2]["topic"], "events_dropped");
        assert_eq!(messages[2]["payload"]["count"], 2);
        assert_eq!(
            messages[2]["meta"]["tick"], 7,
            "the notice takes the tick of the message it precedes"
        );
        assert_eq!(messages[2]["session_id"], "s-1");
        assert_eq!(messages[2]["message_id"], "notice-1", "from the outbox's own ids");
        assert_eq!(messages[3]["reply"], 1);
    }

    #[test]
    fn the_byte_bound_fills_the_queue_before_the_message_bound() {
        let outbox = Outbox::new(limits(100, 64));
        let big = json!({ "text": "x".repeat(60) });
        outbox.push(big.clone(), false);
        assert!(outbox.is_full(), "{:?} is over 64 bytes", outbox.occupancy());
        outbox.push(json!({"event": 1}), true);
        assert_eq!(outbox.occupancy().messages, 1, "an event is dropped by the byte bound");
        outbox.push(big, false);
        let notice_bytes = serialise(&queued(&outbox)[1]).len();
        assert_eq!(queued(&outbox)[1]["topic"], "events_dropped");
        assert_eq!(
            outbox.occupancy(),
            Occupancy { messages: 3, bytes: 2 * 72 + notice_bytes },
            "a reply is queued past the bound, after the drop notice"
        );
    }

    #[tokio::test]
    async fn the_writer_drains_then_shuts_down_on_close() {
        let outbox = std::sync::Arc::new(Outbox::new(limits(8, 1 << 20)));
        outbox.push(json!({"a": 1}), false);
        outbox.push(json!({"b": 2}), true);
        outbox.close();
        outbox.push(json!({"c": 3}), false);
        let mut written = Vec::new();
        outbox.clone().write_to(&mut written).await.unwrap();
        assert_eq!(String::from_utf8(written).unwrap(), "{\"a\":1}\n{\"b\":2}\n");
        assert_eq!(outbox.occupancy(), Occupancy::default(), "written bytes are no longer counted");
    }

    #[tokio::test]
    async fn a_peer_that_reads_nothing_is_cut_off_after_the_stall_bound_one_that_reads_slowly_is_not(
    ) {
        let stall = Duration::from_millis(300);
        let outbox = std::sync::Arc::new(Outbox::new(OutboxLimits {
            messages: 8,
            bytes: 1 << 20,
            write_stall: stall,
        }));
        // A pipe of 16 bytes whose far end is never read.
        let (near, _far) = tokio::io::duplex(16);
        outbox.push(json!({ "text": "more than sixteen bytes" }), false);
        let started = std::time::Instant::now();
        let error = outbox.clone().write_to(near).await.expect_err("a stalled peer");
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert!(error.to_string().contains("write_stall_timeout_s"), "{error}");
        assert!(started.elapsed() >= stall);
        assert!(outbox.is_closed(), "the reader is told to stop too");

        // A peer reading 16 bytes every 100 ms takes longer than the bound
        // for the whole message, but never stalls for it.
        let outbox = std::sync::Arc::new(Outbox::new(OutboxLimits {
            messages: 8,
            bytes: 1 << 20,
            write_stall: stall,
        }));
        let (near, mut far) = tokio::io::duplex(16);
        let message = json!({ "text": "x".repeat(100) });
        outbox.push(message.clone(), false);
        outbox.close();
        let reader = tokio::spawn(async move {
            let mut received = Vec::new();
            let mut chunk = [0u8; 16];
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                match tokio::io::AsyncReadExt::read(&mut far, &mut chunk).await.unwrap() {
                    0 => return received,
                    n => received.extend_from_slice(&chunk[..n]),
                }
            }
        });
        outbox.clone().write_to(near).await.expect("a slow reader is served");
        assert_eq!(reader.await.unwrap(), serialise(&message));
    }
}
