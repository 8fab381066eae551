//! Connection slots per source address: a peer that opens connections in a
//! loop holds at most its share of a listener's slots, so that the others
//! still get in. Shared by the AICC, AI-control and console listeners.
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

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
    pub fn held_by(&self, address: IpAddr) -> usize {
        self.held.lock().get(&address).copied().unwrap_or(0)
    }

    pub fn limit(&self) -> usize {
        self.limit
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
        assert_eq!(slots.held.lock().len(), 1, "b's slot went back with its connection and b was forgotten");
    }
}
