//! The stop generation shared by the governed drivers: a `stop` raises it,
//! and a motion begun before may no longer move anything (a stop cannot be
//! overridden by a tool that is still running). A joint goal carries a
//! [`HaltWatch`] of the generation its motion began in down to the robot
//! port, which sends nothing once a halt has come and cancels the goal if
//! a halt comes while it runs.
use std::sync::Arc;

use tokio::sync::watch;

#[derive(Debug)]
pub struct Halts {
    generation: watch::Sender<u64>,
}

impl Default for Halts {
    fn default() -> Self {
        Self { generation: watch::Sender::new(0) }
    }
}

impl Halts {
    /// The generation a motion begins in.
    pub fn current(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Whether a halt came after the motion begun in `generation`.
    pub fn since(&self, generation: u64) -> bool {
        self.current() != generation
    }

    /// Ends every motion begun so far.
    pub fn raise(&self) {
        self.generation.send_modify(|generation| *generation += 1);
    }

    /// A watch on the halts after `generation`.
    pub fn watch(self: &Arc<Self>, generation: u64) -> HaltWatch {
        HaltWatch { halts: self.clone(), generation }
    }
}

/// Whether a halt has come since a motion began, and a way to wait for one.
#[derive(Debug, Clone)]
pub struct HaltWatch {
    halts: Arc<Halts>,
    generation: u64,
}

impl HaltWatch {
    /// A watch that is never halted (goals outside any motion: tests).
    pub fn never() -> Self {
        // A generation the counter does not reach.
        Self { halts: Arc::new(Halts::default()), generation: 0 }
    }

    /// Whether a halt came after the motion began.
    pub fn halted(&self) -> bool {
        self.halts.since(self.generation)
    }

    /// Resolves once a halt came after the motion began (at once if one has).
    pub async fn wait(&self) {
        let mut receiver = self.halts.generation.subscribe();
        let generation = self.generation;
        // The sender lives as long as `self.halts`: never closed here.
        let _ = receiver.wait_for(|current| *current != generation).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[tokio::test]
    async fn a_watch_fires_on_the_first_halt_after_its_motion_began_and_stays_fired() {
        let halts = Arc::new(Halts::default());
        let before = halts.watch(halts.current());
        assert!(!before.halted());
        assert!(before.wait().now_or_never().is_none(), "no halt yet");
        let waiting = tokio::spawn({
            let before = before.clone();
            async move { before.wait().await }
        });
        halts.raise();
        waiting.await.unwrap();
        assert!(before.halted() && before.wait().now_or_never().is_some());
        let after = halts.watch(halts.current());
        assert!(!after.halted(), "a motion begun after the halt is not halted by it");
        assert!(!HaltWatch::never().halted());
    }
}
