//! The stop generation shared by the governed drivers: a `stop` raises it,
//! and a motion begun before may no longer move anything (a stop cannot be
//! overridden by a tool that is still running).
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Halts {
    generation: AtomicU64,
}

impl Halts {
    /// The generation a motion begins in.
    pub fn current(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Whether a halt came after the motion begun in `generation`.
    pub fn since(&self, generation: u64) -> bool {
        self.current() != generation
    }

    /// Ends every motion begun so far.
    pub fn raise(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}
