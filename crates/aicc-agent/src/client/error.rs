//! What can go wrong for an AICC agent, and the exit code each maps to.
use std::fmt;

/// The standard error codes of AICC section 10.
pub const STANDARD_ERROR_CODES: [&str; 8] = [
    "protocol_mismatch",
    "session_expired",
    "tool_unknown",
    "tool_unavailable",
    "invalid_input",
    "execution_failed",
    "timeout",
    "internal_error",
];

/// An error the bridge answered with (in a `tool_result` or a top-level
/// `error` message).
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteError {
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

impl RemoteError {
    /// Whether the code is one of section 10's (a bridge should use no
    /// other; an unknown one is still surfaced, marked as such).
    pub fn is_standard(&self) -> bool {
        STANDARD_ERROR_CODES.contains(&self.code.as_str())
    }
}

impl fmt::Display for RemoteError {
    /// `error <code> [retryable]: <message>`, the line the CLI prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error {}", self.code)?;
        if self.retryable {
            write!(f, " retryable")?;
        }
        if !self.is_standard() {
            write!(f, " (not a standard AICC code)")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Every failure of the client library, by whose fault it was.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientError {
    /// The command line or the input given is wrong.
    Usage(String),
    /// The client refused to send something the session may not do.
    Refused(String),
    /// The connection failed, closed, or the bridge did not answer in time.
    Transport(String),
    /// The bridge broke the protocol; the client fails closed.
    Protocol(String),
    /// The bridge answered with an AICC error.
    Remote(RemoteError),
}

impl ClientError {
    /// 0 is success; 1 transport or protocol failure; 2 usage or refused
    /// locally; 3 the bridge answered with an AICC error.
    pub fn exit_code(&self) -> u8 {
        match self {
            ClientError::Transport(_) | ClientError::Protocol(_) => 1,
            ClientError::Usage(_) | ClientError::Refused(_) => 2,
            ClientError::Remote(_) => 3,
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Usage(message) => write!(f, "usage: {message}"),
            ClientError::Refused(message) => write!(f, "refused locally: {message}"),
            ClientError::Transport(message) => write!(f, "transport: {message}"),
            ClientError::Protocol(message) => {
                write!(f, "protocol violation by the bridge (failing closed): {message}")
            }
            ClientError::Remote(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for ClientError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_failure_has_its_exit_code() {
        let remote =
            RemoteError { code: "timeout".into(), message: "too slow".into(), retryable: true };
        assert_eq!(ClientError::Transport("x".into()).exit_code(), 1);
        assert_eq!(ClientError::Protocol("x".into()).exit_code(), 1);
        assert_eq!(ClientError::Usage("x".into()).exit_code(), 2);
        assert_eq!(ClientError::Refused("x".into()).exit_code(), 2);
        assert_eq!(ClientError::Remote(remote.clone()).exit_code(), 3);
        assert_eq!(ClientError::Remote(remote).to_string(), "error timeout retryable: too slow");
    }

    #[test]
    fn a_non_retryable_error_says_so_by_omission_and_unknown_codes_are_marked() {
        let error = RemoteError {
            code: "invalid_input".into(),
            message: "input.forward".into(),
            retryable: false,
        };
        assert_eq!(error.to_string(), "error invalid_input: input.forward");
        let odd = RemoteError { code: "melted".into(), message: "m".into(), retryable: false };
        assert!(!odd.is_standard());
        assert_eq!(odd.to_string(), "error melted (not a standard AICC code): m");
    }
}
