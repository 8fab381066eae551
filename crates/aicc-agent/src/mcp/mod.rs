//! `aicc mcp`: an MCP server in front of the bridge, for MCP hosts (desktop
//! assistants, coding agents, IDEs). It is an ordinary AICC session and
//! keeps no robot state: the bridge's governor, lease and deadman apply as
//! to any agent. Built on the official Rust SDK (rmcp).
//!
//! - `tools`: manifest tools as MCP tools (schemas, annotations by class);
//! - `results`: AICC outputs and errors as MCP tool results (images apart);
//! - `progress`: command events as MCP progress;
//! - `approval`: what to do when a call waits for an operator's approval;
//!   `operator`: asking the host's user (elicitation) and carrying out
//!   their answer on an operator session;
//! - `events`: the event log behind the `events` tool and resource;
//! - `link`: the task that owns the AICC session;
//! - `server`: the MCP handler; `http`: the streamable HTTP listener.
pub mod approval;
pub mod events;
pub mod http;
pub mod link;
pub mod operator;
pub mod progress;
pub mod results;
pub mod server;
pub mod tools;

use rmcp::ServiceExt as _;
use tokio_util::sync::CancellationToken;

pub use operator::OperatorTarget;
pub use server::{BridgeTarget, RobotServer};

/// How long, after the host is gone, the bridge session has to close.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves one MCP host on stdin/stdout until it disconnects or the bridge
/// session ends; then the AICC session is closed (or dropped).
pub async fn serve_stdio(bridge: BridgeTarget) -> Result<(), std::io::Error> {
    let bridge_lost = CancellationToken::new();
    let server = RobotServer::new(bridge, bridge_lost.clone());
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(format!("MCP initialization failed: {e}")))?;
    let cancel = running.cancellation_token();
    let outcome = tokio::select! {
        ended = running.waiting() => ended.map(|_| ()).map_err(|e| std::io::Error::other(format!("the MCP service failed: {e}"))),
        _ = bridge_lost.cancelled() => {
            cancel.cancel();
            Err(std::io::Error::other("the bridge session ended"))
        }
    };
    // The server (and with it the last handle on the session) is gone now;
    // give the session task a moment to close politely.
    let _ = tokio::time::timeout(CLOSE_WAIT, bridge_lost.cancelled()).await;
    outcome
}
