//! Asking the MCP host's user to decide a waiting call (an MCP elicitation)
//! and carrying out the answer on a second AICC connection, with the
//! operator's admin token (`--operator-token-env`). The adapter's own
//! session never decides: it is the agent's, and is refused `approve`.
//! On any failure the call is left waiting (another operator may decide;
//! the bridge's timeout ends it): an error never approves.
use std::time::Duration;

use rmcp::service::{ElicitationMode, Peer, RoleServer};
use serde_json::Value;

use super::approval::{self, Waiting};
use crate::client::transport::{self, TlsOptions};
use crate::client::{ClientError, Session, SessionOptions};

/// Where the operator's sessions connect (the adapter's bridge), with the
/// operator's token in `session.token`.
#[derive(Clone)]
pub struct OperatorTarget {
    pub host: String,
    pub port: u16,
    pub tls: Option<TlsOptions>,
    pub session: SessionOptions,
}

impl std::fmt::Debug for OperatorTarget {
    // The token is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorTarget")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// Whether the host declared the elicitation capability in form mode.
pub fn host_elicits_forms(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes().contains(&ElicitationMode::Form)
}

/// Asks the host's user about `tool`'s waiting call and approves or denies
/// it as they answer. Runs beside the call; aborted when the call ends
/// before the user answered.
pub async fn ask_and_decide(
    peer: Peer<RoleServer>,
    operator: OperatorTarget,
    tool: String,
    input: Value,
    waiting: Waiting,
    call_done: tokio_util::sync::CancellationToken,
) {
    let id = waiting.approval_id.as_str();
    let request = approval::elicitation(&tool, &input, &waiting);
    let timeout = waiting.expires_in_s.map(Duration::from_secs_f64);
    tracing::info!(
        approval_id = id,
        tool = tool.as_str(),
        "asking the MCP host's user to approve the call"
    );
    let answer = match peer.create_elicitation_with_timeout(request, timeout).await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::error!(approval_id = id, tool = tool.as_str(), "asking the MCP host's user failed ({error}); the call waits for another operator or its timeout");
            return;
        }
    };
    let decision = approval::decision(&answer);
    // Answered: carried out on a task of its own, so that the call ending
    // meanwhile (a denial ends it at once) does not cut it short.
    tokio::spawn(async move {
        let id = waiting.approval_id.as_str();
        match carry_out(&operator, id, &decision, call_done).await {
            Ok(output) => tracing::info!(approval_id = id, tool = tool.as_str(), decision = decision.tool(), "the MCP host's user decided: {output}"),
            Err(error) => tracing::error!(
                approval_id = id,
                tool = tool.as_str(),
                "the MCP host's user answered `{}`, but the operator session on {}:{} could not carry it out ({error}); the call waits for another operator or its timeout",
                decision.tool(),
                operator.host,
                operator.port
            ),
        }
    });
}

/// `approve` or `deny` on a session of its own, closed once the call has
/// ended: the bridge runs an approved call on the approving connection's
/// behalf, and closing it first would leave the call unanswered.
async fn carry_out(
    operator: &OperatorTarget,
    approval_id: &str,
    decision: &approval::Decision,
    call_done: tokio_util::sync::CancellationToken,
) -> Result<Value, ClientError> {
    let stream = transport::connect(
        &operator.host,
        operator.port,
        operator.tls.as_ref(),
        operator.session.timeout,
    )
    .await?;
    let mut session = Session::open(stream, operator.session.clone()).await?;
    let outcome = session.call(decision.tool(), &decision.input(approval_id)).await;
    if outcome.is_ok() {
        tokio::select! {
            _ = call_done.cancelled() => {}
            _ = async { while session.idle(Duration::from_secs(1)).await.is_ok() {} } => {}
        }
    }
    let _ = session.close().await;
    Ok(outcome?.output)
}
