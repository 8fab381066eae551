//! AICC 0.1 without I/O: framing, messages, manifest, tick clock, session.
pub mod clock;
pub mod codec;
pub mod error;
pub mod manifest;
pub mod message;
pub mod session;

pub use error::{AiccError, ErrorCode};
