//! Deterministic replay (docs/recording.md, "Replay"): the reader, the
//! book and the server live in `aicc_wire::recording`, shared with the
//! `aicc replay` client; the bridge serves a file with them
//! (`aicc-ros2 --replay FILE`).
use std::path::Path;
use std::sync::{Arc, Mutex};

pub use aicc_wire::recording::*;

/// Serves the recording at `path` on `listener` until the task is
/// dropped, to the connections `access` admits.
pub async fn serve_file(
    path: &Path,
    listener: tokio::net::TcpListener,
    access: serve::Access,
) -> Result<(), String> {
    let book = load(path)?;
    tracing::info!(file = %path.display(), calls = book.calls.len(), tokens = access.tokens.len(), "serving a replay");
    serve::serve(listener, Arc::new(Mutex::new(book)), access).await;
    Ok(())
}

/// Who may read a replay served as the bridge's `config` says: its
/// `listen` rules (loopback unless allowed as for any listener; a replay
/// has no TLS), its tokens (any configured token reads it), its caps.
pub fn access(
    config: &crate::config::Config,
    listen: std::net::SocketAddr,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<serve::Access> {
    let tokens = config.security.load_tokens(&env).map_err(|e| anyhow::anyhow!("{e}"))?;
    crate::bridge::check_remote(
        listen,
        "the replay (--replay on --listen)",
        &config.security,
        !tokens.is_empty(),
        false,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let texts = config.security.tokens.iter().filter_map(|source| env(&source.env)).collect();
    Ok(serve::Access {
        tokens: texts,
        max_connections: config.max_connections,
        max_connections_per_address: config.security.max_connections_per_address,
    })
}
