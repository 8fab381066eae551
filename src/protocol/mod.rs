//! AICC 0.1 without I/O: framing, messages, manifest, tick clock, session,
//! validation, events, rate limits and authorisation.
pub mod auth;
pub mod catalog;
pub mod clock;
pub mod codec;
pub mod error;
pub mod events;
pub mod manifest;
pub mod message;
pub mod ratelimit;
pub mod core;

pub use error::{AiccError, ErrorCode};
