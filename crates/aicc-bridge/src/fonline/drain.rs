//! The command drain: runs queued commands one at a time through the
//! dialect's AICC session (never on a socket task), and ends each with
//! exactly one `command_completed` event.
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::actions::Action;
use super::session::CallOutcome;
use super::state::Completion;
use super::Dialect;

/// Beyond the bridge's own tool timeout (which ends every call), how long
/// a result may still take to arrive before the command is given up.
const RESULT_GRACE: Duration = Duration::from_secs(10);

/// A command taken from the queue.
enum Started {
    /// Its call is on its way to the core.
    Call { seq: u64, command_type: String, tool: String, call_id: String, result: oneshot::Receiver<CallOutcome> },
    /// Done already (unknown action, or the call could not be sent).
    Done,
}

pub(super) async fn run(dialect: Arc<Dialect>) {
    loop {
        let wake = dialect.drain_wake.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        match start_next(&dialect) {
            None => wake.await,
            Some(Started::Done) => {}
            Some(Started::Call { seq, command_type, tool, call_id, result }) => {
                let patience = dialect.settings.tool_timeout + RESULT_GRACE;
                let outcome = match tokio::time::timeout(patience, result).await {
                    Ok(Ok(outcome)) => outcome,
                    // Like a lost session (the core aborted the call): not retryable as is.
                    Ok(Err(_)) => CallOutcome::Failed { error: serde_json::json!({ "code": "execution_failed", "message": "the bridge session dropped the call", "retryable": false }), tick: None },
                    Err(_) => {
                        // In doubt, stop: the call may still be running.
                        if let Err(reason) = dialect.session.cancel(&call_id) {
                            tracing::warn!(%reason, %call_id, "AI-control: could not cancel a call given up on; stopping the robot");
                            if let Err(stop_failed) = dialect.session.stop(&format!("AI-control gave up on call {call_id} and could not cancel it")) {
                                tracing::error!(%stop_failed, %call_id, "AI-control: could not stop the robot either");
                            }
                        }
                        dialect.session.forget(&call_id);
                        CallOutcome::Failed { error: serde_json::json!({ "code": "timeout", "message": format!("no result within {:.0} s; the call was cancelled", patience.as_secs_f64()), "retryable": true }), tick: None }
                    }
                };
                finish(&dialect, seq, &command_type, &tool, outcome);
            }
        }
    }
}

/// Takes the next command and sends its call, under the state lock: an
/// `act` that replaces it then either finds it still queued or finds its
/// call id to cancel, and the cancel follows the call on the session.
fn start_next(dialect: &Dialect) -> Option<Started> {
    let mut state = dialect.state.lock();
    let next = state.queue.start_next()?;
    let seq = next.seq;
    let command_type = next.command.command_type.clone();
    let (tool, input) = match next.command.action {
        Action::Tool { tool, input } => (tool, input),
        Action::Unknown => {
            state.queue.finish(seq);
            let view = dialect.session.view();
            let available: Vec<&String> = dialect.actuators.iter().filter(|a| view.usable_actuators.contains(a)).collect();
            let available = if available.is_empty() { "none now".to_string() } else { available.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ") };
            let message = format!("unknown action '{command_type}'; available actions: {available}");
            state.complete(seq, &command_type, None, Completion::failed(message, "unknown_action", false));
            return Some(Started::Done);
        }
    };
    match dialect.session.start_call(&tool, input) {
        Ok((call_id, result)) => {
            state.queue.set_call(seq, call_id.clone());
            Some(Started::Call { seq, command_type, tool, call_id, result })
        }
        Err(reason) => {
            state.queue.finish(seq);
            // Not sent (the session is closed or reopening, or busy): the
            // same command may well succeed later.
            state.complete(seq, &command_type, Some(&tool), Completion::failed(reason.to_string(), "tool_unavailable", true));
            Some(Started::Done)
        }
    }
}

fn finish(dialect: &Dialect, seq: u64, command_type: &str, tool: &str, outcome: CallOutcome) {
    let mut state = dialect.state.lock();
    let replaced_by = state.queue.finish(seq);
    let completion = match (outcome, replaced_by) {
        (CallOutcome::Ok { output, tick }, _) => Completion { success: true, message: "completed".into(), output: Some(output), error: None, tick },
        (CallOutcome::Failed { error, tick }, Some(by)) => Completion { success: false, message: format!("replaced by command {by}"), output: None, error: Some(error), tick },
        (CallOutcome::Failed { error, tick }, None) => {
            let message = error["message"].as_str().unwrap_or("the call failed").to_string();
            Completion { success: false, message, output: None, error: Some(error), tick }
        }
    };
    state.complete(seq, command_type, Some(tool), completion);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::fonline::actions::Command;
    use crate::fonline::Settings;
    use crate::protocol::auth::{Scope, Tokens};
    use crate::tools::Registry;
    use serde_json::{json, Map};

    #[test]
    fn a_command_that_cannot_be_sent_fails_as_retryable() {
        let catalog = Arc::new(Registry::new(&Config::default()).catalog().unwrap());
        let settings = Settings { max_queued_commands: 2, max_events: 8, tokens: Tokens::default(), unauthenticated_scope: Scope::Admin, max_auth_failures: 2, tool_timeout: Duration::from_secs(5) };
        let dialect = Dialect::new(catalog, settings);
        let command = Command { command_type: "move".into(), append: false, action: Action::Tool { tool: "move".into(), input: Map::new() } };
        dialect.state.lock().queue.enqueue(command).unwrap();
        assert!(matches!(start_next(&dialect), Some(Started::Done)), "the session was never opened");
        let page = dialect.state.lock().history.after(0, 10, usize::MAX);
        let error = &page["events"][0]["event"]["error"];
        assert_eq!((error["code"].clone(), error["retryable"].clone()), (json!("tool_unavailable"), json!(true)), "{page}");
    }
}
