//! The bridge's tap: a bridge-wide copy of what crosses the protocol core,
//! for observers that are not agents (the flight recorder, the operator's
//! console, the events topic on ROS). Every line a connection sent, every
//! message the bridge queued for one, every event raised by the robot side
//! (governor, contacts, sensors), whoever it was for, and connections
//! opening and closing.
//!
//! It never slows the robot's control: records go into a bounded broadcast
//! channel; an observer that falls behind loses the oldest records and is
//! told how many ([`Lagged`]), and with no observer nothing is copied.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::protocol::core::ConnId;

/// Records kept for the slowest observer before it starts losing them.
pub const DEFAULT_TAP_CAPACITY: usize = 4096;

/// What crossed the core.
#[derive(Debug, Clone, PartialEq)]
pub enum TapBody {
    /// A connection opened; `peer` is its remote address ("in-process" for
    /// a front end inside the bridge).
    Connected { peer: String },
    /// A line a connection sent, as received (it may not be valid JSON).
    Inbound { line: Arc<[u8]> },
    /// A message the bridge queued for a connection (a reply, an event, a
    /// heartbeat). `droppable` messages (events) may still be dropped by a
    /// full outbound queue; the tap sees what the core decided to send.
    Outbound { message: Arc<Value>, droppable: bool },
    /// An event the robot side raised (governor, contacts, availability),
    /// before the core delivered it to the sessions subscribed to it.
    Event { topic: String, payload: Arc<Value>, audience: Option<String> },
    /// The motion lease ended (released, lapsed or lost with its holder):
    /// the base was told to stop.
    LeaseReleased,
    /// The connection is gone.
    Disconnected,
}

/// One record, numbered in the order the core produced them.
#[derive(Debug, Clone, PartialEq)]
pub struct TapRecord {
    /// Consecutive from 1, bridge-wide: an observer sees gaps only when it lagged.
    pub seq: u64,
    /// When the bridge handled it (monotonic).
    pub at: Instant,
    /// The same instant in wall-clock time, for files and pages.
    pub wall: SystemTime,
    /// The connection concerned; None for bridge-wide records (events).
    pub conn: Option<ConnId>,
    pub body: TapBody,
}

/// The publishing side, held by the bridge's shell.
#[derive(Debug)]
pub struct Tap {
    sender: broadcast::Sender<Arc<TapRecord>>,
    next_seq: AtomicU64,
}

impl Default for Tap {
    fn default() -> Self {
        Self::new(DEFAULT_TAP_CAPACITY)
    }
}

/// An observer fell this many records behind and lost them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lagged(pub u64);

/// The observing side: records in order, or news of what was lost.
#[derive(Debug)]
pub struct TapReceiver {
    receiver: broadcast::Receiver<Arc<TapRecord>>,
}

impl TapReceiver {
    /// The next record; `Err(Lagged)` once after records were lost (the
    /// following call goes on with the oldest still kept); None when the
    /// bridge is gone.
    pub async fn recv(&mut self) -> Option<Result<Arc<TapRecord>, Lagged>> {
        match self.receiver.recv().await {
            Ok(record) => Some(Ok(record)),
            Err(broadcast::error::RecvError::Lagged(lost)) => Some(Err(Lagged(lost))),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// Like [`Self::recv`] without waiting: None when nothing is waiting
    /// (or the bridge is gone).
    pub fn try_recv(&mut self) -> Option<Result<Arc<TapRecord>, Lagged>> {
        match self.receiver.try_recv() {
            Ok(record) => Some(Ok(record)),
            Err(broadcast::error::TryRecvError::Lagged(lost)) => Some(Err(Lagged(lost))),
            Err(broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed) => {
                None
            }
        }
    }
}

/// Subscribes to a [`Tap`] whenever asked.
#[derive(Debug, Clone)]
pub struct TapSource {
    sender: broadcast::Sender<Arc<TapRecord>>,
}

impl TapSource {
    /// A new observer, seeing records from now on.
    pub fn subscribe(&self) -> TapReceiver {
        TapReceiver { receiver: self.sender.subscribe() }
    }
}

impl Tap {
    /// A tap keeping at most `capacity` records (at least one) for its slowest observer.
    pub fn new(capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity.max(1));
        Self { sender, next_seq: AtomicU64::new(1) }
    }

    /// A new observer, seeing records from now on.
    pub fn subscribe(&self) -> TapReceiver {
        TapReceiver { receiver: self.sender.subscribe() }
    }

    /// A handle that can subscribe later (an observer that starts and
    /// stops observing while the bridge runs: the recorder).
    pub fn source(&self) -> TapSource {
        TapSource { sender: self.sender.clone() }
    }

    /// Whether anyone observes: callers skip building records otherwise
    /// (a vision result is large to copy).
    pub fn is_observed(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// Records `body` (built only when observed). Never blocks.
    pub fn record(&self, conn: Option<ConnId>, body: impl FnOnce() -> TapBody) {
        if !self.is_observed() {
            return;
        }
        let record = TapRecord {
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
            at: Instant::now(),
            wall: SystemTime::now(),
            conn,
            body: body(),
        };
        // An error means the last observer left meanwhile: nothing to do.
        let _ = self.sender.send(Arc::new(record));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbound(text: &str) -> TapBody {
        TapBody::Inbound { line: Arc::from(text.as_bytes()) }
    }

    #[test]
    fn nothing_is_built_without_an_observer() {
        let tap = Tap::new(4);
        tap.record(Some(1), || panic!("built a record nobody observes"));
        assert!(!tap.is_observed());
    }

    #[test]
    fn observers_get_records_in_order_with_consecutive_numbers() {
        let tap = Tap::new(8);
        let mut first = tap.subscribe();
        let mut second = tap.subscribe();
        tap.record(Some(3), || inbound("a"));
        tap.record(None, || TapBody::LeaseReleased);
        for observer in [&mut first, &mut second] {
            let a = observer.try_recv().expect("a record").expect("not lagged");
            let b = observer.try_recv().expect("a record").expect("not lagged");
            assert_eq!((a.seq, a.conn, &a.body), (1, Some(3), &inbound("a")));
            assert_eq!((b.seq, b.conn, &b.body), (2, None, &TapBody::LeaseReleased));
            assert!(observer.try_recv().is_none());
        }
    }

    #[test]
    fn a_slow_observer_loses_the_oldest_and_is_told_how_many() {
        let tap = Tap::new(2);
        let mut slow = tap.subscribe();
        for text in ["1", "2", "3", "4", "5"] {
            tap.record(Some(1), || inbound(text));
        }
        assert_eq!(slow.try_recv(), Some(Err(Lagged(3))));
        let kept: Vec<u64> =
            std::iter::from_fn(|| slow.try_recv()).map(|r| r.expect("not lagged").seq).collect();
        assert_eq!(kept, vec![4, 5]);
    }

    #[test]
    fn an_observer_sees_only_what_came_after_it_subscribed() {
        let tap = Tap::new(8);
        let _early = tap.subscribe();
        tap.record(Some(1), || inbound("before"));
        let mut late = tap.subscribe();
        tap.record(Some(1), || inbound("after"));
        let record = late.try_recv().expect("a record").expect("not lagged");
        assert_eq!(record.body, inbound("after"));
        assert!(late.try_recv().is_none());
    }
}
