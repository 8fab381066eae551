//! AICC 0.1 without I/O: framing, messages, manifest, tick clock, session,
//! validation, events, rate limits and authorisation.
pub mod auth;
pub mod catalog;
pub mod clock;
pub mod core;
pub mod error;
pub mod events;
pub mod ids;
pub mod manifest;
pub mod message;
pub mod ratelimit;

/// The NDJSON framing (shared with clients).
pub use aicc_wire::codec;

pub use error::{AiccError, ErrorCode};
