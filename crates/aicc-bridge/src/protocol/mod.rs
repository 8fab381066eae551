//! AICC 0.1 without I/O: framing, messages, manifest, tick clock, session,
//! validation, events, rate limits and authorisation.
pub mod auth;
pub mod catalog;
pub(crate) mod clock;
pub mod core;
pub(crate) mod error;
pub(crate) mod events;
pub mod ids;
pub(crate) mod manifest;
pub mod message;
pub(crate) mod ratelimit;

/// The NDJSON framing (shared with clients).
pub use aicc_wire::codec;

pub use error::{AiccError, ErrorCode};
