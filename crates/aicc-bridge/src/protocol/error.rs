//! The error codes of AICC section 10, as they cross the wire.
use serde::Serialize;
use serde_json::{json, Value};

/// One of the eight standard AICC error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The wire version is incompatible (a different MAJOR, or not AICC at all).
    ProtocolMismatch,
    /// The session id is unknown or the session is closed.
    SessionExpired,
    /// The tool id is not in the manifest.
    ToolUnknown,
    /// A capability is missing, a rate limit was hit, or a queue is full.
    ToolUnavailable,
    /// The input (or the message itself) fails validation.
    InvalidInput,
    /// The tool ran but failed at the robot level.
    ExecutionFailed,
    /// The tool exceeded its deadline.
    Timeout,
    /// An unexpected failure inside the bridge.
    InternalError,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ProtocolMismatch => "protocol_mismatch",
            ErrorCode::SessionExpired => "session_expired",
            ErrorCode::ToolUnknown => "tool_unknown",
            ErrorCode::ToolUnavailable => "tool_unavailable",
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::ExecutionFailed => "execution_failed",
            ErrorCode::Timeout => "timeout",
            ErrorCode::InternalError => "internal_error",
        }
    }
}

/// An error as the agent sees it: code, human-readable message, and whether
/// the same call may be retried as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct AiccError {
    pub code: ErrorCode,
    pub message: String,
    pub retryable: bool,
}

impl AiccError {
    pub fn new(code: ErrorCode, retryable: bool, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), retryable }
    }
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, false, message)
    }
    /// A robot-level failure; `retryable` when the cause is transient
    /// (stale data, a controller not yet up).
    pub fn execution_failed(retryable: bool, message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ExecutionFailed, retryable, message)
    }
    pub fn to_json(&self) -> Value {
        json!({ "code": self.code.as_str(), "message": self.message, "retryable": self.retryable })
    }
}

impl std::fmt::Display for AiccError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for AiccError {}
