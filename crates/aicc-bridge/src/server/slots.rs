//! Connection slots per source address: a peer that opens connections in a
//! loop holds at most its share of a listener's slots, so that the others
//! still get in. Shared by the AICC, AI-control and console listeners.
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A listener's connection caps: in all, and per source address.
#[derive(Debug, Clone)]
pub struct ConnectionCaps {
    total: Arc<Semaphore>,
    per_address: Arc<PerAddress>,
}

/// Which cap refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapReached {
    Total,
    PerAddress,
}

/// An admitted connection's place under both caps: given back when dropped.
#[derive(Debug)]
pub struct Admitted {
    _permit: OwnedSemaphorePermit,
    _slot: AddressSlot,
}

impl ConnectionCaps {
    pub fn new(max_total: usize, max_per_address: usize) -> Self {
        Self {
            total: Arc::new(Semaphore::new(max_total)),
            per_address: Arc::new(PerAddress::new(max_per_address)),
        }
    }

    /// A place for a connection from `address`, or the cap it would exceed.
    pub fn admit(&self, address: IpAddr) -> Result<Admitted, CapReached> {
        let slot = self.per_address.take(address).ok_or(CapReached::PerAddress)?;
        let permit = self.total.clone().try_acquire_owned().map_err(|_| CapReached::Total)?;
        Ok(Admitted { _permit: permit, _slot: slot })
    }
}

/// How a listener refuses a connection over a cap: its name in the log, the
/// sentence saying which cap and what to do, and that sentence as the line
/// the peer is sent before the socket closes.
pub trait Refusal {
    const LOG_PREFIX: &'static str;
    fn why(&self, cap: CapReached, peer: IpAddr) -> String;
    fn line(&self, why: String) -> Vec<u8>;
}

/// Accepts the next connection within `caps`. One over a cap is sent its
/// refusal off the accept loop, bounded by `write_bound` (a refused peer
/// that never reads cannot keep its socket), and closed; a failed accept is
/// logged and retried 50 ms later.
pub async fn accept_within<R: Refusal>(
    listener: &TcpListener,
    caps: &ConnectionCaps,
    refusal: &R,
    write_bound: Duration,
) -> (TcpStream, SocketAddr, Admitted) {
    let prefix = R::LOG_PREFIX;
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "{prefix}accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match caps.admit(peer.ip()) {
            Ok(admitted) => {
                let _ = stream.set_nodelay(true);
                return (stream, peer, admitted);
            }
            Err(cap) => {
                let why = refusal.why(cap, peer.ip());
                tracing::warn!(%peer, "{prefix}connection refused: {why}");
                let line = refusal.line(why);
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(write_bound, async {
                        let _ = stream.write_all(&line).await;
                        let _ = stream.shutdown().await;
                    })
                    .await;
                });
            }
        }
    }
}

/// Connections held per address, bounded by `limit` each.
#[derive(Debug)]
pub struct PerAddress {
    limit: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's slot: given back when dropped.
#[derive(Debug)]
pub struct AddressSlot {
    owner: Arc<PerAddress>,
    address: IpAddr,
}

impl PerAddress {
    pub fn new(limit: usize) -> Self {
        Self { limit: limit.max(1), held: Mutex::default() }
    }

    /// A slot for a connection from `address`, or None when it holds its limit.
    pub fn take(self: &Arc<Self>, address: IpAddr) -> Option<AddressSlot> {
        let mut held = self.held.lock();
        let count = held.entry(address).or_default();
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(AddressSlot { owner: self.clone(), address })
    }

    /// Connections `address` holds now.
    #[cfg(test)]
    pub fn held_by(&self, address: IpAddr) -> usize {
        self.held.lock().get(&address).copied().unwrap_or(0)
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut held = self.owner.held.lock();
        if let Some(count) = held.get_mut(&self.address) {
            *count -= 1;
            // Addresses that left are forgotten: the map holds only live peers.
            if *count == 0 {
                held.remove(&self.address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_holds_at_most_its_limit_and_gets_slots_back() {
        let slots = Arc::new(PerAddress::new(2));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = slots.take(a).unwrap();
        let _second = slots.take(a).unwrap();
        assert!(slots.take(a).is_none(), "a third from the same address");
        assert!(slots.take(b).is_some(), "another address is not affected");
        drop(first);
        assert_eq!(slots.held_by(a), 1);
        assert!(slots.take(a).is_some());
        assert_eq!(
            slots.held.lock().len(),
            1,
            "b's slot went back with its connection and b was forgotten"
        );
    }

    #[test]
    fn caps_in_all_and_per_address_both_hold_and_give_back() {
        let caps = ConnectionCaps::new(3, 2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let first = caps.admit(a).unwrap();
        let _second = caps.admit(a).unwrap();
        assert_eq!(caps.admit(a).unwrap_err(), CapReached::PerAddress);
        let _third = caps.admit(b).unwrap();
        assert_eq!(caps.admit(b).unwrap_err(), CapReached::Total);
        assert_eq!(
            caps.per_address.held_by(b),
            1,
            "a refusal by the total cap gives the address slot back"
        );
        drop(first);
        assert!(caps.admit(b).is_ok());
    }
}
