//! The AI-control TCP listener: NDJSON lines of at most 1 MiB, answered
//! in order, one at a time per connection (a client reads each response
//! before its next request; a slow reader simply stops being read).
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::gate::Gate;
use super::rpc::{error_line, oversized, ErrorCode, RpcError, MAX_LINE_BYTES};
use super::Dialect;
use crate::protocol::codec::{Frame, LineFramer};
use crate::protocol::core::looks_like_http;
use crate::server::slots::{accept_within, CapReached, ConnectionCaps, Refusal};

const READ_CHUNK_BYTES: usize = 64 * 1024;

/// How long a connection may stay unauthenticated (tokens configured):
/// enough for a client to send `auth` at once, short enough that silent
/// connections cannot hold the slots.
pub const UNAUTHENTICATED_LIMIT: Duration = Duration::from_secs(10);
/// How long a connection may send nothing: an agent thinking between
/// commands stays well within it (a `ping` keeps it open), while a dead
/// or forgotten client gives its slot back.
pub const IDLE_LIMIT: Duration = Duration::from_secs(300);

/// When a connection is closed for silence (closed without an answer).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub unauthenticated: Duration,
    pub idle: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self { unauthenticated: UNAUTHENTICATED_LIMIT, idle: IDLE_LIMIT }
    }
}

/// Accepts connections until the task is dropped.
pub async fn serve(dialect: Arc<Dialect>, listener: TcpListener) {
    serve_with(dialect, listener, ConnectionLimits::default()).await
}

async fn serve_with(dialect: Arc<Dialect>, listener: TcpListener, limits: ConnectionLimits) {
    let (max, per_address) =
        (dialect.settings.max_connections, dialect.settings.max_connections_per_address);
    let caps = ConnectionCaps::new(max, per_address);
    let refusal = DialectRefusal { max, per_address };
    loop {
        let (stream, peer, admitted) =
            accept_within(&listener, &caps, &refusal, Duration::from_secs(5)).await;
        let dialect = dialect.clone();
        tokio::spawn(async move {
            dialect.connections.fetch_add(1, Ordering::Relaxed);
            if let Err(error) = handle_connection(&dialect, stream, limits, peer).await {
                tracing::info!(%peer, %error, "AI-control connection ended with an error");
            }
            dialect.connections.fetch_sub(1, Ordering::Relaxed);
            drop(admitted);
        });
    }
}

/// The dialect's refusal: a JSON-RPC error with a null id.
struct DialectRefusal {
    max: usize,
    per_address: usize,
}

impl Refusal for DialectRefusal {
    const LOG_PREFIX: &'static str = "AI-control: ";

    fn why(&self, cap: CapReached, peer: IpAddr) -> String {
        let (max, per_address) = (self.max, self.per_address);
        match cap {
            CapReached::Total => format!("the bridge serves at most {max} AI-control connections (ai_control.max_connections); retry later"),
            CapReached::PerAddress => format!("the bridge serves at most {per_address} AI-control connections from one address ({peer}; ai_control.max_connections_per_address); retry when one has closed"),
        }
    }

    fn line(&self, why: String) -> Vec<u8> {
        error_line(&serde_json::Value::Null, &RpcError::new(ErrorCode::InvalidRequest, why))
    }
}

async fn handle_connection(
    dialect: &Dialect,
    stream: TcpStream,
    limits: ConnectionLimits,
    peer: SocketAddr,
) -> std::io::Result<()> {
    let settings = &dialect.settings;
    let mut gate =
        Gate::new(&settings.tokens, settings.unauthenticated_scope, settings.max_auth_failures);
    let (mut reader, mut writer) = stream.into_split();
    let mut framer = LineFramer::new(MAX_LINE_BYTES);
    let mut buffer = vec![0u8; READ_CHUNK_BYTES];
    let auth_deadline = Instant::now() + limits.unauthenticated;
    let mut undecodable = 0u32;
    loop {
        let idle_deadline = Instant::now() + limits.idle;
        let deadline = match gate.scope() {
            Some(_) => idle_deadline,
            None if Instant::now() >= auth_deadline => {
                return close_silent(
                    writer,
                    peer,
                    "it stayed unauthenticated",
                    limits.unauthenticated,
                )
                .await
            }
            None => idle_deadline.min(auth_deadline),
        };
        let n = match tokio::time::timeout_at(deadline, reader.read(&mut buffer)).await {
            Ok(read) => read?,
            Err(_) if gate.scope().is_none() && deadline == auth_deadline => {
                return close_silent(
                    writer,
                    peer,
                    "it stayed unauthenticated",
                    limits.unauthenticated,
                )
                .await
            }
            Err(_) => return close_silent(writer, peer, "it sent nothing", limits.idle).await,
        };
        if n == 0 {
            return Ok(());
        }
        framer.push(&buffer[..n]);
        while let Some(frame) = framer.next_frame() {
            match frame {
                Frame::Line(line) => {
                    if let Some(refusal) = junk(dialect, &line, &mut undecodable) {
                        tracing::warn!(%peer, "AI-control: closing a connection: {}", refusal.message);
                        writer.write_all(&error_line(&serde_json::Value::Null, &refusal)).await?;
                        writer.shutdown().await?;
                        discard_until_closed(&mut reader).await;
                        return Ok(());
                    }
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

/// Why a line closes the connection: it looks like HTTP (a web page's
/// request to this port: its body must never be read as a command), or it
/// is one more line that is not JSON than `max_undecodable_lines` allows.
fn junk(dialect: &Dialect, line: &[u8], undecodable: &mut u32) -> Option<RpcError> {
    if looks_like_http(line) {
        dialect.state.lock().closed_for_http += 1;
        let shown: String = String::from_utf8_lossy(&line[..line.len().min(40)])
            .chars()
            .filter(|c| !c.is_control())
            .collect();
        return Some(RpcError::new(ErrorCode::InvalidRequest, format!("Invalid request: this is an AI-control endpoint (JSON-RPC over NDJSON), not HTTP: the line '{shown}' looks like an HTTP request; closing the connection")));
    }
    if serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(line).is_ok() {
        return None;
    }
    *undecodable += 1;
    let limit = dialect.settings.max_undecodable_lines;
    if *undecodable < limit {
        return None;
    }
    dialect.state.lock().closed_for_undecodable += 1;
    Some(RpcError::new(ErrorCode::Parse, format!("Parse error: {limit} lines that were not JSON objects on this connection (the limit, security.max_undecodable_lines); closing the connection")))
}

/// Closes a connection held open without use; nothing is answered (there
/// is no request to answer).
async fn close_silent(
    mut writer: tokio::net::tcp::OwnedWriteHalf,
    peer: SocketAddr,
    why: &str,
    limit: Duration,
) -> std::io::Result<()> {
    tracing::info!(%peer, "AI-control: closing a connection: {why} for {:.0} s", limit.as_secs_f64());
    writer.shutdown().await
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai_control::Settings;
    use crate::config::Config;
    use crate::protocol::auth::{Scope, Tokens};
    use crate::tools::Registry;

    /// A served dialect (with a token when `with_token`) under `limits`.
    async fn served(
        with_token: bool,
        limits: ConnectionLimits,
    ) -> (SocketAddr, tokio::task::JoinHandle<()>) {
        let catalog = Arc::new(Registry::new(&Config::default()).catalog().unwrap());
        let mut tokens = Tokens::default();
        if with_token {
            tokens.add("drive", Scope::Actuate).unwrap();
        }
        let settings = Settings { max_auth_failures: 3, ..Settings::for_test(2, tokens) };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        (address, tokio::spawn(serve_with(Dialect::new(catalog, settings), listener, limits)))
    }

    /// Everything the bridge sends until it closes (a guard against a hang,
    /// not a measure of speed).
    async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
        let mut received = Vec::new();
        tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut received))
            .await
            .expect("the bridge closed the connection")
            .unwrap();
        received
    }

    #[tokio::test]
    async fn a_connection_that_never_authenticates_is_closed_without_an_answer() {
        let limits = ConnectionLimits {
            unauthenticated: Duration::from_millis(50),
            idle: Duration::from_secs(3600),
        };
        let (address, server) = served(true, limits).await;
        let mut silent = TcpStream::connect(address).await.unwrap();
        assert_eq!(read_until_closed(&mut silent).await, b"");
        server.abort();
    }

    #[tokio::test]
    async fn an_idle_connection_is_closed_after_its_answers() {
        let limits = ConnectionLimits {
            unauthenticated: Duration::from_secs(3600),
            idle: Duration::from_millis(50),
        };
        let (address, server) = served(false, limits).await;
        let mut client = TcpStream::connect(address).await.unwrap();
        client.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n").await.unwrap();
        let received = read_until_closed(&mut client).await;
        let answer: serde_json::Value = serde_json::from_slice(&received).unwrap();
        assert_eq!(answer["result"]["ok"], true, "answered, then closed: {answer}");
        server.abort();
    }
}
