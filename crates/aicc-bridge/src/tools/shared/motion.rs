//! What the motion tools share: the error of a motion a `stop` ended.
use crate::protocol::AiccError;

/// The error a motion tool ends with when a `stop` interrupts it.
pub fn stopped_error(what: &str) -> AiccError {
    AiccError::execution_failed(false, format!("{what} was interrupted by a `stop` call; the robot was halted"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stopped_error_says_a_stop_interrupted_the_motion() {
        assert!(stopped_error("turn").message.contains("interrupted by a `stop` call"));
    }
}
