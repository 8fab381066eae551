//! The TCP shell around the session core: one task per connection reading
//! NDJSON, feeding the [`Session`], writing what it says through a bounded
//! queue, and running the tools it asks for.
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::config::Config;
use crate::protocol::clock::TickClock;
use crate::protocol::codec::{Frame, LineFramer};
use crate::protocol::manifest::Manifest;
use crate::protocol::session::{Output, Session, ToolSuccess};
use crate::protocol::{AiccError, ErrorCode};
use crate::tools::{Registry, ToolContext};

/// Connections served at once; more are closed right after accept.
const MAX_CONNECTIONS: usize = 64;
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Everything connections share.
pub struct Shared {
    pub config: Arc<Config>,
    pub registry: Registry,
    pub manifest: Arc<Manifest>,
    pub clock: TickClock,
    pub tools: ToolContext,
}

/// Accepts connections until the task is dropped.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "connection refused: {MAX_CONNECTIONS} connections already open");
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            tracing::info!(%peer, "agent connected");
            if let Err(error) = handle_connection(stream, shared).await {
                tracing::info!(%peer, %error, "connection ended with an error");
            }
            tracing::info!(%peer, "agent disconnected");
            drop(permit);
        });
    }
}

async fn handle_connection(stream: TcpStream, shared: Arc<Shared>) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let (mut reader, mut writer) = stream.into_split();
    let config = &shared.config;
    let (out_tx, mut out_rx) = mpsc::channel::<Value>(config.outbound_queue);
    let writer_task = tokio::spawn(async move {
        while let Some(message) = out_rx.recv().await {
            let mut line = serde_json::to_vec(&message).expect("a serde_json::Value always serializes");
            line.push(b'\n');
            writer.write_all(&line).await?;
        }
        writer.shutdown().await
    });
    // Tool tasks report here; aborted with the connection, so a vanished
    // agent's motion stops (its setpoints expire: the deadman).
    let (done_tx, mut done_rx) = mpsc::channel::<(String, Result<ToolSuccess, AiccError>)>(config.max_calls_in_flight);
    let mut running_tools = JoinSet::new();
    let mut session = Session::new(uuid::Uuid::new_v4().to_string(), shared.manifest.clone(), shared.clock, config.max_calls_in_flight);
    let mut framer = LineFramer::new(config.max_line_bytes);
    let mut buffer = vec![0u8; READ_CHUNK_BYTES];

    let mut closing = dispatch(session.start(Instant::now()), &out_tx, &shared, &done_tx, &mut running_tools).await;
    while !closing {
        tokio::select! {
            read = reader.read(&mut buffer) => {
                let read = read?;
                if read == 0 {
                    break;
                }
                framer.push(&buffer[..read]);
                while let Some(frame) = framer.next_frame() {
                    let outputs = match frame {
                        Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace) => continue,
                        Frame::Line(line) => session.on_line(&line, Instant::now()),
                        Frame::Oversized { limit_bytes } => {
                            let error = AiccError::invalid_input(format!("line exceeds the {limit_bytes}-byte limit; closing the connection"));
                            vec![Output::Send(crate::protocol::message::envelope("error", session.id(), error.to_json())), Output::Close]
                        }
                    };
                    if dispatch(outputs, &out_tx, &shared, &done_tx, &mut running_tools).await {
                        closing = true;
                        break;
                    }
                }
            }
            Some((call_id, outcome)) = done_rx.recv() => {
                let outputs = session.on_tool_finished(&call_id, outcome, Instant::now());
                closing = dispatch(outputs, &out_tx, &shared, &done_tx, &mut running_tools).await;
            }
        }
    }
    running_tools.abort_all();
    drop(out_tx);
    writer_task.await.unwrap_or(Ok(()))
}

/// Carries out the session's outputs; returns true when it asked to close.
async fn dispatch(
    outputs: Vec<Output>,
    out_tx: &mpsc::Sender<Value>,
    shared: &Arc<Shared>,
    done_tx: &mpsc::Sender<(String, Result<ToolSuccess, AiccError>)>,
    running_tools: &mut JoinSet<()>,
) -> bool {
    for output in outputs {
        match output {
            // Waiting here when the queue is full is the slow-reader policy
            // for results: they are delayed, never dropped.
            Output::Send(message) => {
                if out_tx.send(message).await.is_err() {
                    return true;
                }
            }
            Output::Execute { call_id, tool, input } => {
                let done_tx = done_tx.clone();
                let outcome_future = match shared.registry.get(&tool) {
                    Some(tool) => tool.call(input, shared.tools.clone()),
                    None => {
                        let error = AiccError::new(ErrorCode::InternalError, false, format!("tool '{tool}' is in the manifest but not registered"));
                        Box::pin(async move { Err(error) })
                    }
                };
                running_tools.spawn(async move {
                    let outcome = outcome_future.await;
                    let _ = done_tx.send((call_id, outcome)).await;
                });
            }
            Output::Close => return true,
        }
    }
    false
}
