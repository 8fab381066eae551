//! Memory back to the system after load. glibc's allocator keeps what
//! connections freed in its per-thread arenas, so the bridge's resident
//! memory would stay at its peak after a burst of connections or a flood;
//! `malloc_trim` returns the free pages. It briefly locks the arenas, so it
//! runs at most once per [`MIN_INTERVAL`], and only after connections ended.
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Least time between two trims.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct Trimmer {
    /// A connection ended since the last trim.
    freed: AtomicBool,
    last: Mutex<Option<Instant>>,
}

impl Trimmer {
    /// A connection ended: what it held is free to give back.
    pub fn note_freed(&self) {
        self.freed.store(true, Ordering::Relaxed);
    }

    /// Whether a trim is due now (and counts it as done).
    pub fn take_due(&self, now: Instant) -> bool {
        let mut last = self.last.lock();
        if last.is_some_and(|at| now.saturating_duration_since(at) < MIN_INTERVAL)
            || !self.freed.swap(false, Ordering::Relaxed)
        {
            return false;
        }
        *last = Some(now);
        true
    }
}

/// Returns free heap pages to the system (glibc); elsewhere nothing to do.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers and only walks the allocator's
    // own free lists under its locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_is_due_once_after_connections_end_and_not_more_often_than_the_interval() {
        let trimmer = Trimmer::default();
        let t0 = Instant::now();
        assert!(!trimmer.take_due(t0), "nothing freed yet");
        trimmer.note_freed();
        assert!(trimmer.take_due(t0));
        assert!(!trimmer.take_due(t0 + MIN_INTERVAL * 2), "nothing freed since");
        trimmer.note_freed();
        assert!(!trimmer.take_due(t0 + MIN_INTERVAL / 2), "too soon");
        assert!(trimmer.take_due(t0 + MIN_INTERVAL), "the freed flag waited");
    }
}
