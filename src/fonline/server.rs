//! The AI-control TCP listener: NDJSON lines of at most 1 MiB, answered
//! in order, one at a time per connection (a client reads each response
//! before its next request; a slow reader simply stops being read).
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use super::gate::Gate;
use super::rpc::{error_line, oversized, ErrorCode, RpcError, MAX_LINE_BYTES};
use super::Dialect;
use crate::protocol::codec::{Frame, LineFramer};

/// Connections served at once; one more is told so and closed.
pub const MAX_CONNECTIONS: usize = 32;
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Accepts connections until the task is dropped.
pub async fn serve(dialect: Arc<Dialect>, listener: TcpListener) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "AI-control: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "AI-control: connection refused, {MAX_CONNECTIONS} already open");
            let error = RpcError::new(ErrorCode::InvalidRequest, format!("the bridge serves at most {MAX_CONNECTIONS} AI-control connections; retry later"));
            tokio::spawn(async move {
                let _ = stream.write_all(&error_line(&serde_json::Value::Null, &error)).await;
                let _ = stream.shutdown().await;
            });
            continue;
        };
        let _ = stream.set_nodelay(true);
        let dialect = dialect.clone();
        tokio::spawn(async move {
            dialect.connections.fetch_add(1, Ordering::Relaxed);
            if let Err(error) = handle_connection(&dialect, stream).await {
                tracing::info!(%peer, %error, "AI-control connection ended with an error");
            }
            dialect.connections.fetch_sub(1, Ordering::Relaxed);
            drop(permit);
        });
    }
}

async fn handle_connection(dialect: &Dialect, stream: TcpStream) -> std::io::Result<()> {
    let settings = &dialect.settings;
    let mut gate = Gate::new(&settings.tokens, settings.unauthenticated_scope, settings.max_auth_failures);
    let (mut reader, mut writer) = stream.into_split();
    let mut framer = LineFramer::new(MAX_LINE_BYTES);
    let mut buffer = vec![0u8; READ_CHUNK_BYTES];
    loop {
        let n = reader.read(&mut buffer).await?;
        if n == 0 {
            return Ok(());
        }
        framer.push(&buffer[..n]);
        while let Some(frame) = framer.next_frame() {
            match frame {
                Frame::Line(line) => {
                    let response = dialect.respond(&mut gate, &line).await;
                    writer.write_all(&response.line).await?;
                    if response.close {
                        return writer.shutdown().await;
                    }
                }
                Frame::Oversized { limit_bytes } => {
                    let rejected = oversized(limit_bytes);
                    writer.write_all(&error_line(&rejected.id, &rejected.error)).await?;
                    writer.shutdown().await?;
                    discard_until_closed(&mut reader).await;
                    return Ok(());
                }
            }
        }
    }
}

/// Reads and drops what the peer still sends (briefly, and boundedly), so
/// that closing does not reset the connection before the peer has read
/// the error sent to it.
async fn discard_until_closed(reader: &mut tokio::net::tcp::OwnedReadHalf) {
    const DISCARD_LIMIT_BYTES: usize = 16 * MAX_LINE_BYTES;
    const DISCARD_TIME: Duration = Duration::from_secs(2);
    let mut buffer = vec![0u8; READ_CHUNK_BYTES];
    let mut discarded = 0;
    let _ = tokio::time::timeout(DISCARD_TIME, async {
        while discarded < DISCARD_LIMIT_BYTES {
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => discarded += n,
            }
        }
    })
    .await;
}
