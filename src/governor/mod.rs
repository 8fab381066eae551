//! The safety governor: pure functions over plain structs. The node feeds it
//! and publishes what it decides; nothing here does I/O or reads a clock.
pub mod base;

pub use base::{govern_base, BaseLimits, BaseVelocity, Governed};
