//! One connection's line discipline: strict reading of bounded NDJSON lines
//! (fail closed on anything malformed) and writing whole lines.
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};

use super::error::ClientError;
use super::transport::Duplex;
use super::wire::{decode_line, BridgeMessage};
use aicc_wire::codec::{Frame, LineFramer};

/// The default line limit, as the bridge's (`max_line_bytes`).
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;

pub struct Link {
    reader: ReadHalf<Box<dyn Duplex>>,
    writer: WriteHalf<Box<dyn Duplex>>,
    framer: LineFramer,
    buffer: Vec<u8>,
    write_timeout: Duration,
}

impl Link {
    pub fn new(stream: Box<dyn Duplex>, max_line_bytes: usize, write_timeout: Duration) -> Self {
        let (reader, writer) = tokio::io::split(stream);
        Self {
            reader,
            writer,
            framer: LineFramer::new(max_line_bytes),
            buffer: vec![0; 16 * 1024],
            write_timeout,
        }
    }

    /// The next message, or `None` when `until` passes first. A malformed
    /// or oversized line is a `Protocol` error; after it the link is dead.
    pub async fn read_message(
        &mut self,
        until: Instant,
    ) -> Result<Option<BridgeMessage>, ClientError> {
        loop {
            match self.framer.next_frame() {
                Some(Frame::Line(line)) => {
                    return decode_line(&line)
                        .map(Some)
                        .map_err(|violation| ClientError::Protocol(violation.to_string()))
                }
                Some(Frame::Oversized { limit_bytes }) => {
                    return Err(ClientError::Protocol(format!(
                        "a line from the bridge is longer than {limit_bytes} bytes"
                    )))
                }
                None => {}
            }
            let read = tokio::time::timeout_at(
                tokio::time::Instant::from_std(until),
                self.reader.read(&mut self.buffer),
            )
            .await;
            let count = match read {
                Err(_) => return Ok(None),
                Ok(Err(e)) => return Err(ClientError::Transport(format!("reading from the bridge: {e}"))),
                Ok(Ok(0)) if self.framer.pending_bytes() > 0 => {
                    return Err(ClientError::Transport(format!("the bridge closed the connection in the middle of a line ({} bytes unterminated)", self.framer.pending_bytes())))
                }
                Ok(Ok(0)) => return Err(ClientError::Transport("the bridge closed the connection".into())),
                Ok(Ok(count)) => count,
            };
            self.framer.push(&self.buffer[..count]);
        }
    }

    /// Sends one message as one line.
    pub async fn send(&mut self, message: &Value) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(message)
            .map_err(|e| ClientError::Usage(format!("cannot encode a message: {e}")))?;
        line.push(b'\n');
        let write = async {
            self.writer.write_all(&line).await?;
            self.writer.flush().await
        };
        match tokio::time::timeout(self.write_timeout, write).await {
            Err(_) => Err(ClientError::Transport(format!(
                "the bridge took no data for {} s",
                self.write_timeout.as_secs_f64()
            ))),
            Ok(Err(e)) => Err(ClientError::Transport(format!("writing to the bridge: {e}"))),
            Ok(Ok(())) => Ok(()),
        }
    }
}
