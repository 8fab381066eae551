//! The checks of an agent's conformance (AICC section 13, second list),
//! each a scripted fake bridge, a run of the client, and a verdict that
//! says why. The verdicts are pure functions of what was seen.
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::client_process::{ClientCommand, ClientRun, Exit, OutputWatch, RunningClient};
use super::fake_bridge::{
    CallAnswer, EventPlan, FakeBridge, Grants, Recording, Script, AFTER_MALFORMED_MARKER,
};
use crate::client::error::STANDARD_ERROR_CODES;

/// One check's verdict, with what it was based on.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOutcome {
    pub name: String,
    pub passed: bool,
    pub reason: String,
    /// The client runs and the bridge's recordings behind the verdict.
    pub evidence: Vec<Value>,
}

/// A verdict: pass or fail, and why (text for the person reading the
/// report, as are the judges' intermediate reasons).
pub type Verdict = Result<String, String>;

/// Why a check could not be run at all (not a verdict on the client).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// No loopback port for the fake bridge.
    #[error("cannot bind the fake bridge: {0}")]
    Bind(#[source] std::io::Error),
    /// The client command could not be started.
    #[error("cannot start the client: {0}")]
    StartClient(#[source] std::io::Error),
    /// The fake bridge could not start serving.
    #[error("cannot serve the fake bridge: {0}")]
    Serve(#[source] std::io::Error),
}

/// Marker values the fake bridge puts in outputs, to see which was printed.
const REAL_MARKER: &str = "REAL-7f3a";
const FOREIGN_MARKER: &str = "FOREIGN-91c2";
const SENSOR_MARKER: &str = "SENSED-5d0e";
/// The line limit the harness tests with (the protocol's default).
const OVERSIZED_LINE_BYTES: usize = (1 << 20) + 4096;

/// Runs the client against a fake bridge with `script`.
pub fn run_scenario(
    client: &ClientCommand,
    script: Script,
    args: &[&str],
    timeout: Duration,
) -> Result<(ClientRun, Recording), SetupError> {
    let bridge = FakeBridge::bind().map_err(SetupError::Bind)?;
    let port = bridge.port;
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let running = RunningClient::start(client, port, &args).map_err(SetupError::StartClient)?;
    let output: Arc<OutputWatch> = running.stdout();
    let serving = match bridge.serve(script, output) {
        Ok(serving) => serving,
        Err(error) => {
            running.finish(Duration::ZERO);
            return Err(SetupError::Serve(error));
        }
    };
    let run = running.finish(timeout);
    Ok((run, serving.stop()))
}

fn evidence(run: &ClientRun, recording: &Recording) -> Value {
    json!({
        "args": run.args,
        "exit": run.exit.to_string(),
        "stdout": tail(&run.stdout),
        "stderr": tail(&run.stderr),
        "bridge_received": recording.received,
        "bridge_notes": recording.notes,
        "client_faults": recording.client_faults,
    })
}

/// The end of a long text (reports stay readable).
fn tail(text: &str) -> String {
    const KEEP: usize = 2000;
    if text.len() <= KEEP {
        return text.to_string();
    }
    let start = text.char_indices().map(|(i, _)| i).find(|&i| i >= text.len() - KEEP).unwrap_or(0);
    format!("[{} bytes before]…{}", start, &text[start..])
}

/// A non-zero exit by the client itself (not a signal, a panic or a hang).
pub fn clean_failure(exit: Exit) -> Result<i32, String> {
    match exit {
        Exit::Code(0) => Err("exited 0 (success)".into()),
        Exit::Code(101) => Err("exit 101: a Rust panic, not a handled failure".into()),
        Exit::Code(code) => Ok(code),
        Exit::Signal(signal) => Err(format!("killed by signal {signal}")),
        Exit::TimedOut => Err("did not exit in time (hung)".into()),
    }
}

fn calls_to<'a>(recording: &'a Recording, tool: &str) -> Vec<&'a Value> {
    recording.tool_calls().into_iter().filter(|c| c["tool"] == tool).collect()
}

/// A tool outside the session's capabilities: non-zero exit and nothing sent.
pub fn judge_refused(run: &ClientRun, recording: &Recording, tool: &str) -> Verdict {
    let sent = calls_to(recording, tool).len();
    if sent > 0 {
        return Err(format!(
            "the bridge received {sent} tool_call(s) for '{tool}', which this session may not call"
        ));
    }
    let code = clean_failure(run.exit).map_err(|e| format!("calling '{tool}' {e}"))?;
    Ok(format!("exit {code}, no tool_call for '{tool}' reached the bridge"))
}

/// A granted sensor: sent once and its output printed, exit 0.
pub fn judge_granted_call(
    run: &ClientRun,
    recording: &Recording,
    tool: &str,
    marker: &str,
) -> Verdict {
    let sent = calls_to(recording, tool).len();
    if sent != 1 {
        return Err(format!("expected one tool_call for '{tool}', the bridge received {sent}"));
    }
    if run.exit != Exit::Code(0) {
        return Err(format!("a successful '{tool}' call ended with {}", run.exit));
    }
    if !run.stdout.contains(marker) {
        return Err(format!("the output ({marker}) was not printed"));
    }
    Ok("sent once, output printed, exit 0".into())
}

/// Every tool_call seen across all checks has a non-empty string call_id.
pub fn judge_call_ids(calls: &[Value]) -> Verdict {
    if calls.is_empty() {
        return Err("the client sent no tool_call at all: nothing to judge".into());
    }
    let bad: Vec<String> = calls
        .iter()
        .filter(|c| c["call_id"].as_str().is_none_or(str::is_empty))
        .map(|c| c.get("call_id").map_or("missing".into(), Value::to_string))
        .collect();
    if !bad.is_empty() {
        return Err(format!(
            "{} of {} tool_calls had no non-empty call_id: {}",
            bad.len(),
            calls.len(),
            bad.join(", ")
        ));
    }
    Ok(format!("all {} tool_calls carried a non-empty call_id", calls.len()))
}

/// A result with a foreign call_id first: never printed as the answer.
/// Either failing closed (exit 1, the violation named) or ignoring it with
/// a warning and printing the real answer passes.
pub fn judge_foreign_result(run: &ClientRun, recording: &Recording) -> Verdict {
    if run.stdout.contains(FOREIGN_MARKER) {
        return Err("the result with a foreign call_id was printed as the answer".into());
    }
    if calls_to(recording, "proprioception").is_empty() {
        return Err("the client sent no tool_call for 'proprioception'".into());
    }
    match run.exit {
        Exit::Code(0) if run.stdout.contains(REAL_MARKER) => {
            let warned = run.stderr.contains("call_id") || run.stderr.contains("foreign-");
            if warned {
                Ok("ignored the foreign result with a warning, printed the real answer".into())
            } else {
                Err("printed the real answer but said nothing about the foreign call_id on stderr"
                    .into())
            }
        }
        Exit::Code(0) => Err("exit 0 without printing the real answer".into()),
        Exit::Code(1) if run.stderr.contains("call_id") || run.stderr.contains("foreign-") => {
            Ok("failed closed (exit 1) naming the foreign call_id".into())
        }
        other => Err(format!(
            "neither the real answer printed nor a fail-closed exit 1 naming the call_id: {other}"
        )),
    }
}

/// An error answer: non-zero exit, the code named, and a non-retryable
/// call (or any actuator call) sent only once.
pub fn judge_error(run: &ClientRun, recording: &Recording, tool: &str, code: &str) -> Verdict {
    let sent = calls_to(recording, tool).len();
    if sent == 0 {
        return Err(format!("the client sent no tool_call for '{tool}'"));
    }
    if sent > 1 {
        return Err(format!("the call was sent {sent} times; it must not be retried"));
    }
    let exit = clean_failure(run.exit)?;
    if !(run.stdout.contains(code) || run.stderr.contains(code)) {
        return Err(format!("exit {exit}, but the output does not name '{code}'"));
    }
    Ok(format!("exit {exit}, '{code}' named, sent once"))
}

/// The ticks (and late flags) of the client's event lines.
pub fn event_lines(stdout: &str) -> Result<Vec<(u64, bool)>, String> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let value: Value = serde_json::from_str(line)
                .map_err(|_| format!("event line {} is not JSON: {line}", i + 1))?;
            let tick = value
                .get("meta")
                .and_then(|m| m.get("tick"))
                .or_else(|| value.get("tick"))
                .and_then(Value::as_u64);
            let tick =
                tick.ok_or_else(|| format!("event line {} has no meta.tick: {line}", i + 1))?;
            Ok((tick, value.get("late") == Some(&Value::Bool(true))))
        })
        .collect()
}

/// Events printed in the expected order, the late ones flagged.
pub fn judge_events(run: &ClientRun, expected: &[(u64, bool)]) -> Verdict {
    if run.exit != Exit::Code(0) {
        return Err(format!("events ended with {}", run.exit));
    }
    let seen = event_lines(&run.stdout)?;
    let show = |list: &[(u64, bool)]| {
        list.iter()
            .map(|(t, late)| if *late { format!("{t} (late)") } else { t.to_string() })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if seen != expected {
        return Err(format!("printed {}; expected {}", show(&seen), show(expected)));
    }
    Ok(format!("printed {}", show(&seen)))
}

/// A malformed bridge: the client fails closed with exit 1, taking
/// neither the malformed result nor the valid one sent after it.
pub fn judge_fail_closed(run: &ClientRun, leaked_marker: Option<&str>) -> Verdict {
    if let Some(marker) = leaked_marker {
        if run.stdout.contains(marker) {
            return Err("the malformed result's output was printed as if valid".into());
        }
    }
    if run.stdout.contains(AFTER_MALFORMED_MARKER) {
        return Err(
            "read on past the malformed line and took the next result: not failing closed".into()
        );
    }
    match run.exit {
        Exit::Code(1) => Ok("failed closed: exit 1".into()),
        other => Err(format!("expected exit 1 (fail closed), got {other}")),
    }
}

/// A fault of the client seen by the bridge (e.g. an oversized line) fails
/// the check whatever the judge said.
pub fn with_client_faults(verdict: Verdict, recording: &Recording) -> Verdict {
    if recording.client_faults.is_empty() {
        return verdict;
    }
    let faults = recording.client_faults.join("; ");
    Err(match verdict {
        Ok(_) => faults,
        Err(reason) => format!("{reason}; {faults}"),
    })
}

/// Every check, in order; `timeout` bounds each client run.
pub fn run_all(client: &ClientCommand, timeout: Duration) -> Vec<CheckOutcome> {
    let mut outcomes = Vec::new();
    let mut all_calls: Vec<Value> = Vec::new();
    let mut check = |name: &str,
                     script: Script,
                     args: &[&str],
                     judge: &dyn Fn(&ClientRun, &Recording) -> Verdict| {
        let outcome = match run_scenario(client, script, args, timeout) {
            Ok((run, recording)) => {
                all_calls.extend(recording.tool_calls().into_iter().cloned());
                let verdict = with_client_faults(judge(&run, &recording), &recording);
                let (passed, reason) = match verdict {
                    Ok(reason) => (true, reason),
                    Err(reason) => (false, reason),
                };
                CheckOutcome {
                    name: name.into(),
                    passed,
                    reason,
                    evidence: vec![evidence(&run, &recording)],
                }
            }
            Err(problem) => CheckOutcome {
                name: name.into(),
                passed: false,
                reason: format!("could not run: {problem}"),
                evidence: vec![],
            },
        };
        outcomes.push(outcome);
    };
    let sensors_only = |answer: CallAnswer| Script {
        grants: Grants::SensorsOnly,
        answer,
        events: EventPlan::default(),
    };
    let sensed = CallAnswer::Output(json!({ "marker": SENSOR_MARKER }));

    check(
        "capabilities: move refused (can_move_self not granted)",
        sensors_only(sensed.clone()),
        &["call", "move", r#"{"forward":0.3}"#],
        &|run, rec| judge_refused(run, rec, "move"),
    );
    check(
        "capabilities: teleport refused (not in the manifest)",
        sensors_only(sensed.clone()),
        &["call", "teleport", "{}"],
        &|run, rec| judge_refused(run, rec, "teleport"),
    );
    check(
        "capabilities: proprioception sent and answered",
        sensors_only(sensed.clone()),
        &["call", "proprioception", "{}"],
        &|run, rec| judge_granted_call(run, rec, "proprioception", SENSOR_MARKER),
    );
    check(
        "call_id: a result with a foreign call_id is not taken",
        sensors_only(CallAnswer::ForeignThenReal {
            foreign: json!({ "marker": FOREIGN_MARKER }),
            real: json!({ "marker": REAL_MARKER }),
        }),
        &["call", "proprioception", "{}"],
        &judge_foreign_result,
    );
    for code in STANDARD_ERROR_CODES {
        check(
            &format!("error code: {code}"),
            sensors_only(CallAnswer::ToolError { code: code.into(), retryable: false }),
            &["call", "proprioception", "{}"],
            &|run, rec| judge_error(run, rec, "proprioception", code),
        );
    }
    check(
        "error code: a top-level error message",
        sensors_only(CallAnswer::TopLevelError {
            code: "tool_unavailable".into(),
            retryable: false,
        }),
        &["call", "proprioception", "{}"],
        &|run, rec| judge_error(run, rec, "proprioception", "tool_unavailable"),
    );
    check(
        "retry: an actuator failing retryably is not sent again",
        Script {
            grants: Grants::SensorsAndMotion,
            answer: CallAnswer::ToolError { code: "execution_failed".into(), retryable: true },
            events: EventPlan::default(),
        },
        &["call", "move", r#"{"forward":0.1}"#],
        &|run, rec| judge_error(run, rec, "move", "execution_failed"),
    );
    let out_of_order = vec![(5, 1), (7, 2), (6, 3), (8, 4)];
    check(
        "tick order: events 5, 7, 6, 8 come out 5, 6, 7, 8",
        Script {
            grants: Grants::SensorsOnly,
            answer: sensed.clone(),
            events: EventPlan { first: out_of_order.clone(), then: None },
        },
        &["events", "--count", "4"],
        &|run, _| judge_events(run, &[(5, false), (6, false), (7, false), (8, false)]),
    );
    check(
        "tick order: tick 3 after 8 was printed is flagged late",
        Script {
            grants: Grants::SensorsOnly,
            answer: sensed.clone(),
            events: EventPlan { first: out_of_order, then: Some((4, vec![(3, 5)])) },
        },
        &["events", "--count", "5"],
        &|run, _| judge_events(run, &[(5, false), (6, false), (7, false), (8, false), (3, true)]),
    );
    check(
        "malformed: a result with both output and error",
        sensors_only(CallAnswer::BothOutputAndError),
        &["call", "proprioception", "{}"],
        &|run, _| judge_fail_closed(run, Some("BOTH")),
    );
    check(
        "malformed: a line over 1 MiB",
        sensors_only(CallAnswer::Oversized { bytes: OVERSIZED_LINE_BYTES }),
        &["call", "proprioception", "{}"],
        &|run, _| judge_fail_closed(run, None),
    );
    check(
        "malformed: a line that is not JSON",
        sensors_only(CallAnswer::Raw(b"this is not json".to_vec())),
        &["call", "proprioception", "{}"],
        &|run, _| judge_fail_closed(run, None),
    );
    check(
        "malformed: a line that is not UTF-8",
        sensors_only(CallAnswer::Raw(
            b"{\"protocol\":\"aicc/0.1\",\"type\":\"tool_result\",\"x\":\"\xff\xfe\"}".to_vec(),
        )),
        &["call", "proprioception", "{}"],
        &|run, _| judge_fail_closed(run, None),
    );
    let verdict = judge_call_ids(&all_calls);
    let (passed, reason) = match verdict {
        Ok(reason) => (true, reason),
        Err(reason) => (false, reason),
    };
    outcomes.push(CheckOutcome {
        name: "call_id: every tool_call carries a non-empty call_id".into(),
        passed,
        reason,
        evidence: vec![json!({ "tool_calls": all_calls })],
    });
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(exit: Exit, stdout: &str, stderr: &str) -> ClientRun {
        ClientRun { args: vec![], exit, stdout: stdout.into(), stderr: stderr.into() }
    }

    fn recording(calls: &[(&str, &str)]) -> Recording {
        Recording {
            received: calls
                .iter()
                .map(|(tool, id)| json!({ "type": "tool_call", "tool": tool, "call_id": id }))
                .collect(),
            ..Recording::default()
        }
    }

    #[test]
    fn a_refusal_passes_only_without_a_call_and_with_a_clean_failure() {
        assert!(judge_refused(&run(Exit::Code(2), "", "refused"), &recording(&[]), "move").is_ok());
        assert!(judge_refused(&run(Exit::Code(2), "", ""), &recording(&[("move", "c1")]), "move")
            .unwrap_err()
            .contains("received 1 tool_call"));
        assert!(judge_refused(&run(Exit::Code(0), "", ""), &recording(&[]), "move")
            .unwrap_err()
            .contains("exited 0"));
        assert!(judge_refused(&run(Exit::Code(101), "", ""), &recording(&[]), "move")
            .unwrap_err()
            .contains("panic"));
        assert!(judge_refused(&run(Exit::Signal(9), "", ""), &recording(&[]), "move")
            .unwrap_err()
            .contains("signal 9"));
    }

    #[test]
    fn a_foreign_result_may_be_ignored_with_a_warning_or_failed_closed_on_never_printed() {
        let calls = recording(&[("proprioception", "c1")]);
        assert!(judge_foreign_result(
            &run(Exit::Code(0), REAL_MARKER, "unknown call_id 'foreign-2'"),
            &calls
        )
        .is_ok());
        assert!(judge_foreign_result(&run(Exit::Code(1), "", "unknown call_id"), &calls).is_ok());
        assert!(judge_foreign_result(&run(Exit::Code(0), FOREIGN_MARKER, ""), &calls)
            .unwrap_err()
            .contains("printed as the answer"));
        assert!(judge_foreign_result(&run(Exit::Code(0), REAL_MARKER, ""), &calls)
            .unwrap_err()
            .contains("said nothing"));
        assert!(judge_foreign_result(&run(Exit::Code(3), "", ""), &calls).is_err());
    }

    #[test]
    fn an_error_verdict_wants_the_code_named_and_one_call() {
        let once = recording(&[("proprioception", "c1")]);
        assert!(judge_error(
            &run(Exit::Code(3), "", "error timeout: slow"),
            &once,
            "proprioception",
            "timeout"
        )
        .is_ok());
        assert!(judge_error(&run(Exit::Code(3), "", "failed"), &once, "proprioception", "timeout")
            .unwrap_err()
            .contains("does not name"));
        let twice = recording(&[("proprioception", "c1"), ("proprioception", "c2")]);
        assert!(judge_error(
            &run(Exit::Code(3), "", "timeout"),
            &twice,
            "proprioception",
            "timeout"
        )
        .unwrap_err()
        .contains("2 times"));
        assert!(judge_error(
            &run(Exit::Code(0), "", "timeout"),
            &once,
            "proprioception",
            "timeout"
        )
        .is_err());
    }

    #[test]
    fn event_lines_are_read_for_tick_and_late_flag() {
        let stdout = "{\"meta\":{\"tick\":5}}\n{\"tick\":6,\"late\":true}\n";
        assert_eq!(event_lines(stdout).unwrap(), vec![(5, false), (6, true)]);
        assert!(event_lines("tick 5\n").unwrap_err().contains("not JSON"));
        let unordered =
            run(Exit::Code(0), "{\"meta\":{\"tick\":7}}\n{\"meta\":{\"tick\":6}}\n", "");
        assert_eq!(
            judge_events(&unordered, &[(6, false), (7, false)]).unwrap_err(),
            "printed 7, 6; expected 6, 7"
        );
        let unflagged =
            run(Exit::Code(0), "{\"meta\":{\"tick\":8}}\n{\"meta\":{\"tick\":3}}\n", "");
        assert!(judge_events(&unflagged, &[(8, false), (3, true)]).is_err());
    }

    #[test]
    fn failing_closed_means_exit_1_exactly() {
        assert!(judge_fail_closed(&run(Exit::Code(1), "", ""), None).is_ok());
        assert!(judge_fail_closed(&run(Exit::Code(3), "", ""), None).is_err());
        assert!(judge_fail_closed(&run(Exit::Code(1), "BOTH", ""), Some("BOTH")).is_err());
        assert!(judge_fail_closed(&run(Exit::Code(1), AFTER_MALFORMED_MARKER, ""), None)
            .unwrap_err()
            .contains("read on past"));
    }

    #[test]
    fn a_client_fault_seen_by_the_bridge_fails_the_check_naming_it() {
        let fault = format!(
            "the client sent a line over {} bytes (the limit)",
            super::super::fake_bridge::MAX_CLIENT_LINE_BYTES
        );
        let faulty = Recording { client_faults: vec![fault.clone()], ..Recording::default() };
        assert_eq!(with_client_faults(Ok("fine".into()), &faulty), Err(fault.clone()));
        assert_eq!(with_client_faults(Err("bad".into()), &faulty), Err(format!("bad; {fault}")));
        assert_eq!(with_client_faults(Ok("fine".into()), &Recording::default()), Ok("fine".into()));
    }

    #[test]
    fn call_ids_must_be_non_empty_strings() {
        assert!(judge_call_ids(&[json!({ "call_id": "c1" })]).is_ok());
        assert!(judge_call_ids(&[json!({ "call_id": "" }), json!({}), json!({ "call_id": 5 })])
            .unwrap_err()
            .starts_with("3 of 3"));
        assert!(judge_call_ids(&[]).is_err());
    }
}
