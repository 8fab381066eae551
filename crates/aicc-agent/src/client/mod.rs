//! An AICC agent-side client: the library behind the `aicc` command.
//!
//! It is a conformant agent (AICC section 13): it never calls a tool
//! outside its session's capabilities (refused locally, nothing sent), takes
//! a result only for the call it answers (by `call_id`), surfaces every
//! error code as it came and retries only retryable sensor calls when asked
//! (never an actuator), and processes events in `meta.tick` order, flagging
//! late ones. It fails closed on a bridge that breaks the protocol: an
//! oversized line, invalid UTF-8 or JSON, a non-object, a result with both
//! output and error.
pub mod calls;
pub mod commands;
pub mod error;
pub mod link;
pub mod manifest;
pub mod ordering;
pub mod picture;
pub mod retry;
pub mod session;
#[cfg(test)]
mod session_tests;
pub mod shell;
pub mod table;
pub mod transport;
pub mod wire;

pub use error::{ClientError, RemoteError};
pub use session::{CallSuccess, Session, SessionOptions, Update};
