//! Recordings, as the bridge's flight recorder writes them
//! (docs/recording.md), read back and replayed: shared by the bridge
//! (`aicc-ros2 --replay FILE`) and its clients (`aicc replay`).
//!
//! A replay serves AICC from a recording instead of a robot: the greeting
//! and manifest the recorded agent got and, to each tool call matched by
//! tool name and input in recorded order, the recorded result. A sensor
//! tool's output is byte for byte what the recorded agent read, an
//! actuator's result is what the robot did then; nothing moves and no ROS
//! is needed. It answers at the protocol level rather than through the
//! bridge's core and tools: a recording holds what crossed the core (the
//! tools' results), not the raw sensor samples they were computed from,
//! so re-running the tools could not reproduce them.
pub mod book;
pub mod reader;
pub mod serve;

use std::path::Path;

pub use book::{Answer, Book, Exchange};
pub use reader::{
    read, read_file, ReadError, Recorded, Recording, FORMAT_VERSION, METADATA_NAME, PROFILE,
};

/// Reads `path` and makes its book; errors name the file (and the byte
/// offset, for a truncated or corrupt one).
pub fn load(path: &Path) -> Result<Book, String> {
    let recording = read_file(path)?;
    Book::from_recording(&recording).map_err(|e| format!("{}: {e}", path.display()))
}
