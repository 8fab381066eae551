//! The command drain: runs queued commands one at a time through the
//! dialect's AICC session (never on a socket task), and ends each with
//! exactly one `command_completed` event.
//!
//! Two things end commands besides their own outcome, checked every
//! [`CHECK_PERIOD`]:
//! - a stop from any front end (the bridge's stop generation moved): the
//!   commands accepted before it are dropped, and a running one that has
//!   not ended within [`STOP_GRACE`] (a `wait`, a `say`: motion ends at
//!   once by itself) is cancelled;
//! - the lease: an owner not heard from for `lease_timeout` has its
//!   running command cancelled (the robot stops) and its queue dropped.
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::actions::Action;
use super::session::CallOutcome;
use super::state::Completion;
use super::Dialect;

/// Beyond the bridge's own tool timeout (which ends every call), how long
/// a result may still take to arrive before the command is given up.
const RESULT_GRACE: Duration = Duration::from_secs(10);
/// How often stops and leases are checked while a command runs or waits.
const CHECK_PERIOD: Duration = Duration::from_millis(20);
/// How long a running command may take to end by itself after a stop
/// before it is cancelled (motion tools end at once on the halt, with
/// their own account of how far they got).
const STOP_GRACE: Duration = Duration::from_millis(300);

/// A command taken from the queue.
enum Started {
    /// Its call is on its way to the core.
    Call {
        seq: u64,
        command_type: String,
        tool: String,
        call_id: String,
        result: oneshot::Receiver<CallOutcome>,
        generation: u64,
        is_stop: bool,
    },
    /// Done already (unknown action, or the call could not be sent).
    Done,
}

pub(super) async fn run(dialect: Arc<Dialect>) {
    loop {
        let wake = dialect.drain_wake.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        sweep(&dialect);
        match start_next(&dialect) {
            None => {
                // Queued commands of a silent owner still wait for nothing
                // (one runs): nothing to check until something is queued.
                wake.await;
            }
            Some(Started::Done) => {}
            Some(Started::Call {
                seq,
                command_type,
                tool,
                call_id,
                result,
                generation,
                is_stop,
            }) => {
                let outcome = await_result(&dialect, seq, &call_id, result, generation).await;
                // What was accepted after this stop came after it: it runs
                // (when this stop's own halt is the only one since).
                if is_stop && (dialect.stop_generation)() == generation + 1 {
                    dialect.state.lock().queue.restamp_after(seq, generation, generation + 1);
                }
                finish(&dialect, seq, &command_type, &tool, outcome);
            }
        }
    }
}

/// Drops the waiting commands a stop came after, and a silent owner's.
fn sweep(dialect: &Dialect) {
    let generation = (dialect.stop_generation)();
    let dropped =
        dialect.state.lock().sweep(generation, Instant::now(), dialect.settings.lease_timeout);
    if dropped > 0 {
        tracing::info!(dropped, "AI-control: commands dropped (a stop came after them, or their client's lease expired)");
    }
}

/// Waits for the running command's outcome, ending it early when a stop
/// comes or its owner's lease expires, and giving it up when no result
/// comes in time.
async fn await_result(
    dialect: &Dialect,
    seq: u64,
    call_id: &str,
    mut result: oneshot::Receiver<CallOutcome>,
    generation: u64,
) -> CallOutcome {
    let patience = dialect.settings.tool_timeout + RESULT_GRACE;
    let give_up = tokio::time::Instant::now() + patience;
    let mut check = tokio::time::interval(CHECK_PERIOD);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut stopped_at: Option<Instant> = None;
    let mut cancelled = false;
    loop {
        tokio::select! {
            outcome = &mut result => {
                return match outcome {
                    Ok(outcome) => outcome,
                    // Like a lost session (the core aborted the call): not retryable as is.
                    Err(_) => CallOutcome::Failed { error: serde_json::json!({ "code": "execution_failed", "message": "the bridge session dropped the call", "retryable": false }), tick: None },
                };
            }
            _ = tokio::time::sleep_until(give_up) => {
                // In doubt, stop: the call may still be running.
                if let Err(reason) = dialect.session.cancel(call_id) {
                    tracing::warn!(%reason, %call_id, "AI-control: could not cancel a call given up on; stopping the robot");
                    if let Err(stop_failed) = dialect.session.stop(&format!("AI-control gave up on call {call_id} and could not cancel it")) {
                        tracing::error!(%stop_failed, %call_id, "AI-control: could not stop the robot either");
                    }
                }
                dialect.session.forget(call_id);
                return CallOutcome::Failed { error: serde_json::json!({ "code": "timeout", "message": format!("no result within {:.0} s; the call was cancelled", patience.as_secs_f64()), "retryable": true }), tick: None };
            }
            _ = check.tick() => {
                if cancelled {
                    continue;
                }
                let now = Instant::now();
                let mut state = dialect.state.lock();
                let Some(running) = state.queue.running().filter(|r| r.seq == seq).cloned() else { continue };
                let lease = state.lease_expired(running.owner, now, dialect.settings.lease_timeout);
                let moved = (dialect.stop_generation)() != generation && !running.is_stop;
                if moved {
                    stopped_at.get_or_insert(now);
                }
                let why = match (lease, stopped_at) {
                    (Some(why), _) => why,
                    (None, Some(at)) if now.saturating_duration_since(at) >= STOP_GRACE => "ended by a stop (from any front end: AICC, MCP, the console or this dialect)".to_string(),
                    _ => continue,
                };
                tracing::info!(seq, %why, "AI-control: ending the running command");
                if let Some(call_id) = state.queue.end_running(why) {
                    let _ = dialect.cancel_or_stop(&mut state, seq, &call_id);
                }
                cancelled = true;
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
    let generation = next.generation;
    let is_stop = next.command.is_stop();
    let command_type = next.command.command_type.clone();
    let (tool, input) = match next.command.action {
        Action::Tool { tool, input } => (tool, input),
        Action::Unknown => {
            state.queue.finish(seq);
            let view = dialect.session.view();
            let available: Vec<&String> =
                dialect.actuators.iter().filter(|a| view.usable_actuators.contains(a)).collect();
            let available = if available.is_empty() {
                "none now".to_string()
            } else {
                available.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ")
            };
            let message =
                format!("unknown action '{command_type}'; available actions: {available}");
            state.complete(
                seq,
                &command_type,
                None,
                Completion::failed(message, "unknown_action", false),
            );
            return Some(Started::Done);
        }
    };
    match dialect.session.start_call(&tool, input) {
        Ok((call_id, result)) => {
            state.queue.set_call(seq, call_id.clone());
            Some(Started::Call { seq, command_type, tool, call_id, result, generation, is_stop })
        }
        Err(reason) => {
            state.queue.finish(seq);
            // Not sent (the session is closed or reopening, or busy): the
            // same command may well succeed later.
            state.complete(
                seq,
                &command_type,
                Some(&tool),
                Completion::failed(reason.to_string(), "tool_unavailable", true),
            );
            Some(Started::Done)
        }
    }
}

fn finish(dialect: &Dialect, seq: u64, command_type: &str, tool: &str, outcome: CallOutcome) {
    let mut state = dialect.state.lock();
    let ended = state.queue.finish(seq);
    let (replaced_by, ended_by) = ended.map_or((None, None), |r| (r.replaced_by, r.ended_by));
    let completion = match outcome {
        CallOutcome::Ok { output, tick } => Completion {
            success: true,
            message: "completed".into(),
            output: Some(output),
            error: None,
            tick,
        },
        CallOutcome::Failed { error, tick } => {
            let message = match (replaced_by, ended_by) {
                (Some(by), _) => format!("replaced by command {by}"),
                (None, Some(why)) => why,
                (None, None) => error["message"].as_str().unwrap_or("the call failed").to_string(),
            };
            Completion { success: false, message, output: None, error: Some(error), tick }
        }
    };
    state.complete(seq, command_type, Some(tool), completion);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai_control::actions::Command;
    use crate::ai_control::Settings;
    use crate::config::Config;
    use crate::protocol::auth::Tokens;
    use crate::tools::Registry;
    use serde_json::{json, Map};

    #[test]
    fn a_command_that_cannot_be_sent_fails_as_retryable() {
        let catalog = Arc::new(Registry::new(&Config::default()).catalog().unwrap());
        let settings = Settings::for_test(2, Tokens::default());
        let dialect = Dialect::new(catalog, settings);
        let command = Command {
            command_type: "move".into(),
            append: false,
            action: Action::Tool { tool: "move".into(), input: Map::new() },
        };
        dialect
            .state
            .lock()
            .queue
            .enqueue(command, crate::protocol::auth::Credential::Unauthenticated, 0)
            .unwrap();
        assert!(
            matches!(start_next(&dialect), Some(Started::Done)),
            "the session was never opened"
        );
        let page = dialect.state.lock().history.after(0, 10, usize::MAX);
        let error = &page["events"][0]["event"]["error"];
        assert_eq!(
            (error["code"].clone(), error["retryable"].clone()),
            (json!("tool_unavailable"), json!(true)),
            "{page}"
        );
    }
}
