//! Deterministic replay (docs/recording.md, "Replay"): the reader, the
//! book and the server live in `aicc_wire::recording`, shared with the
//! `aicc replay` client; the bridge serves a file with them
//! (`aicc-ros2 --replay FILE`).
use std::path::Path;
use std::sync::{Arc, Mutex};

pub use aicc_wire::recording::*;

/// Serves the recording at `path` on `listener` until the task is dropped.
pub async fn serve_file(path: &Path, listener: tokio::net::TcpListener) -> Result<(), String> {
    let book = load(path)?;
    tracing::info!(file = %path.display(), calls = book.calls.len(), "serving a replay");
    serve::serve(listener, Arc::new(Mutex::new(book))).await;
    Ok(())
}
