//! The dialect's one AICC session on the bridge's own core: an
//! in-process connection served like any agent's (validation, governor,
//! motion lease, rate limits, command events). It sends tool calls,
//! routes their results back, mirrors the session's events and keeps what
//! the observation needs (usable actuators, lease, unavailable tools). A
//! lost session is reopened; calls in flight then fail.
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};

use super::actions::STOP_TOOL;

use crate::protocol::codec::{Frame, LineFramer};
use crate::protocol::core::CANCEL;
use crate::protocol::message::PROTOCOL;

/// Lines queued to the core; more is an error, never a wait.
const OUTGOING_QUEUE: usize = 64;
/// Calls awaiting their result at once (the drain's, cancels, observe).
const MAX_PENDING_CALLS: usize = 32;
/// Longest line read from the core (a manifest is tens of kB).
const MAX_INBOUND_LINE_BYTES: usize = 8 << 20;
/// The stop tool's limit on its reason, in characters.
const STOP_REASON_MAX_CHARS: usize = 200;
/// Pause before reopening a lost session.
const REOPEN_DELAY: Duration = Duration::from_secs(1);
/// Event topics not mirrored: the dialect reports commands itself.
const NOT_MIRRORED: [&str; 2] = ["command", "tool_result"];

/// Why a call could not be sent on the bridge session (nothing was sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Every pending slot holds a call still awaiting its result.
    #[error("{MAX_PENDING_CALLS} calls already await their result on the bridge session")]
    TooManyPending,
    /// The session is not open; `last_error` says how it was lost, when known.
    #[error("the bridge session is not open{}", .last_error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default())]
    NotOpen { last_error: Option<String> },
    /// The queue of lines to the core is full.
    #[error("the bridge session's outgoing queue is full ({OUTGOING_QUEUE} lines)")]
    QueueFull,
    /// The connection to the core is gone; it is being reopened.
    #[error("the bridge session's connection is closed (it is being reopened)")]
    ConnectionClosed,
}

/// A tool call's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    Ok {
        output: Value,
        tick: Option<u64>,
    },
    /// `error` is the AICC error object (code, message, retryable).
    Failed {
        error: Value,
        tick: Option<u64>,
    },
}

impl CallOutcome {
    fn failed(code: &str, message: impl Into<String>, retryable: bool) -> Self {
        CallOutcome::Failed {
            error: json!({ "code": code, "message": message.into(), "retryable": retryable }),
            tick: None,
        }
    }

    pub fn error_message(&self) -> Option<&str> {
        match self {
            CallOutcome::Ok { .. } => None,
            CallOutcome::Failed { error, .. } => {
                Some(error["message"].as_str().unwrap_or("the call failed"))
            }
        }
    }
}

/// What the rest of the dialect may know of the session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionView {
    pub open: bool,
    /// The first 8 characters of the session id.
    pub session: Option<String>,
    /// Actuators the manifest says are usable now.
    pub usable_actuators: Vec<String>,
    /// Tools whose data source is gone, with the reason.
    pub unavailable: BTreeMap<String, String>,
    /// Another session holds the motion lease (its short id).
    pub lease_elsewhere: Option<String>,
    pub last_error: Option<String>,
}

#[derive(Default)]
struct Link {
    outgoing: Option<mpsc::Sender<Vec<u8>>>,
    pending: HashMap<String, oneshot::Sender<CallOutcome>>,
    next_call: u64,
    view: SessionView,
}

/// The session's client side, shared by the dialect's tasks (and by the
/// operator's console, which opens one of its own).
pub struct Session {
    link: Mutex<Link>,
    /// Who the session serves: its call ids' prefix and its log lines' subject.
    name: &'static str,
}

impl Default for Session {
    fn default() -> Self {
        Self::named("ai_control")
    }
}

/// A message from the core, as the dialect cares about it.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// session_init: the session is open.
    Opened {
        session_id: String,
        usable_actuators: Vec<String>,
        heartbeat_interval: Option<Duration>,
    },
    /// A manifest pushed in a heartbeat.
    Manifest {
        usable_actuators: Vec<String>,
    },
    Result {
        call_id: String,
        outcome: CallOutcome,
    },
    Event {
        topic: String,
        tick: Option<u64>,
        payload: Value,
    },
    Error {
        message: String,
    },
    /// Heartbeats and anything else: nothing to do.
    Ignored,
}

/// Classifies one message from the core.
pub fn classify(message: &Value) -> Incoming {
    let tick = message["meta"]["tick"].as_u64();
    let actuators = |manifest: &Value| -> Vec<String> {
        manifest["capabilities"]["actuators"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    match message["type"].as_str() {
        Some("session_init") => Incoming::Opened {
            session_id: message["session_id"].as_str().unwrap_or_default().to_string(),
            usable_actuators: actuators(message),
            heartbeat_interval: message["heartbeat_interval_s"]
                .as_f64()
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64),
        },
        Some("heartbeat") if message.get("manifest_update").is_some() => {
            Incoming::Manifest { usable_actuators: actuators(&message["manifest_update"]) }
        }
        Some("tool_result") => {
            let call_id = message["call_id"].as_str().unwrap_or_default().to_string();
            let outcome = if message["ok"] == true {
                CallOutcome::Ok { output: message["output"].clone(), tick }
            } else {
                CallOutcome::Failed { error: message["error"].clone(), tick }
            };
            Incoming::Result { call_id, outcome }
        }
        Some("event") => Incoming::Event {
            topic: message["topic"].as_str().unwrap_or_default().to_string(),
            tick,
            payload: message["payload"].clone(),
        },
        Some("error") => Incoming::Error {
            message: format!(
                "{}: {}",
                message["code"].as_str().unwrap_or("error"),
                message["message"].as_str().unwrap_or_default()
            ),
        },
        _ => Incoming::Ignored,
    }
}

/// The mirrored form of a session event, or None for topics the dialect
/// reports itself.
pub fn mirrored_event(topic: &str, tick: Option<u64>, payload: &Value) -> Option<Value> {
    (!NOT_MIRRORED.contains(&topic))
        .then(|| json!({ "type": topic, "tick": tick, "payload": payload }))
}

impl Session {
    /// A session whose call ids are `NAME-1`, `NAME-2`, ...
    pub fn named(name: &'static str) -> Self {
        Self { link: Mutex::default(), name }
    }

    pub fn view(&self) -> SessionView {
        self.link.lock().view.clone()
    }

    /// Sends a tool call at once (no waiting: callable under other locks,
    /// which keeps the order of calls and cancels); the receiver gets its
    /// outcome. An error says why it could not be sent.
    pub fn start_call(
        &self,
        tool: &str,
        input: Map<String, Value>,
    ) -> Result<(String, oneshot::Receiver<CallOutcome>), SendError> {
        let mut link = self.link.lock();
        if link.pending.len() >= MAX_PENDING_CALLS {
            return Err(SendError::TooManyPending);
        }
        let call_id = Self::send_call(&mut link, self.name, tool, input)?;
        let (tx, rx) = oneshot::channel();
        link.pending.insert(call_id.clone(), tx);
        Ok((call_id, rx))
    }

    /// Sends a call whose result nobody awaits (a cancel, a stop): no
    /// pending slot is taken, so that a busy session never refuses it.
    fn send_untracked(&self, tool: &str, input: Map<String, Value>) -> Result<String, SendError> {
        Self::send_call(&mut self.link.lock(), self.name, tool, input)
    }

    fn send_call(
        link: &mut Link,
        name: &str,
        tool: &str,
        input: Map<String, Value>,
    ) -> Result<String, SendError> {
        let Some(outgoing) = link.outgoing.clone().filter(|_| link.view.open) else {
            return Err(SendError::NotOpen { last_error: link.view.last_error.clone() });
        };
        link.next_call += 1;
        let call_id = format!("{name}-{}", link.next_call);
        outgoing.try_send(tool_call_line(&call_id, tool, input)).map_err(|error| match error {
            TrySendError::Full(_) => SendError::QueueFull,
            TrySendError::Closed(_) => SendError::ConnectionClosed,
        })?;
        Ok(call_id)
    }

    /// Cancels a call in flight through the core's `cancel` tool: its task
    /// is dropped, which stops what it moved. The cancel's own result is
    /// not awaited (the cancelled call's result says how it ended).
    pub fn cancel(&self, call_id: &str) -> Result<(), SendError> {
        let mut input = Map::new();
        input.insert("call_id".into(), json!(call_id));
        self.send_untracked(CANCEL, input).map(|_| ())
    }

    /// Calls the core's `stop` tool (it halts all motion, every running
    /// call included) without awaiting its result: for when in doubt.
    pub fn stop(&self, reason: &str) -> Result<(), SendError> {
        let mut input = Map::new();
        input.insert(
            "reason".into(),
            json!(reason.chars().take(STOP_REASON_MAX_CHARS).collect::<String>()),
        );
        self.send_untracked(STOP_TOOL, input).map(|_| ())
    }

    /// Calls a tool and waits for its outcome, at most `timeout`.
    pub async fn call(
        &self,
        tool: &str,
        input: Map<String, Value>,
        timeout: Duration,
    ) -> CallOutcome {
        let (call_id, receiver) = match self.start_call(tool, input) {
            Ok(started) => started,
            Err(not_sent) => {
                return CallOutcome::failed("tool_unavailable", not_sent.to_string(), true)
            }
        };
        match tokio::time::timeout(timeout, receiver).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => CallOutcome::failed(
                "execution_failed",
                "the bridge session closed before the result came",
                false,
            ),
            Err(_) => {
                self.link.lock().pending.remove(&call_id);
                CallOutcome::failed(
                    "timeout",
                    format!("no result from '{tool}' within {:.1} s", timeout.as_secs_f64()),
                    true,
                )
            }
        }
    }

    /// Forgets a call whose result is no longer awaited.
    pub fn forget(&self, call_id: &str) {
        self.link.lock().pending.remove(call_id);
    }

    /// Keeps the session open for as long as the task lives: opens it with
    /// `connect`, serves it, and reopens it when lost. `on_event` gets each
    /// mirrored event.
    pub async fn run<S, C, E>(&self, connect: C, on_event: E)
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
        C: Fn() -> S,
        E: Fn(Value),
    {
        loop {
            let reason = self.serve(connect(), &on_event).await;
            tracing::warn!(%reason, session = self.name, "the in-process bridge session was lost; reopening");
            self.close(&reason);
            tokio::time::sleep(REOPEN_DELAY).await;
        }
    }

    /// Serves one connection until it ends; returns why it ended.
    async fn serve<S: AsyncRead + AsyncWrite + Send + 'static>(
        &self,
        stream: S,
        on_event: &impl Fn(Value),
    ) -> String {
        let (mut reader, mut writer) = tokio::io::split(stream);
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(OUTGOING_QUEUE);
        self.link.lock().outgoing = Some(tx.clone());
        let writer_task = tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if writer.write_all(&line).await.is_err() {
                    break;
                }
            }
        });
        // The core takes a silent peer for dead: speak at least this often.
        let mut heartbeat = tokio::time::interval(Duration::from_secs(1));
        let mut framer = LineFramer::new(MAX_INBOUND_LINE_BYTES);
        let mut buffer = vec![0u8; 64 * 1024];
        let reason = 'serve: loop {
            let read = tokio::select! {
                read = reader.read(&mut buffer) => read,
                _ = heartbeat.tick() => {
                    let line = line_of(json!({ "protocol": PROTOCOL, "type": "heartbeat" }));
                    if tx.try_send(line).is_err() {
                        tracing::debug!(session = self.name, "heartbeat skipped, outgoing queue full");
                    }
                    continue;
                }
            };
            let n = match read {
                Ok(0) => break "the bridge closed the session's connection".to_string(),
                Ok(n) => n,
                Err(error) => break format!("reading the session's connection: {error}"),
            };
            framer.push(&buffer[..n]);
            while let Some(frame) = framer.next_frame() {
                let line = match frame {
                    Frame::Line(line) => line,
                    Frame::Oversized { limit_bytes } => {
                        break 'serve format!("the bridge sent a line over {limit_bytes} bytes")
                    }
                };
                match serde_json::from_slice::<Value>(&line) {
                    Ok(message) => {
                        if let Some(interval) = self.handle(classify(&message), on_event) {
                            heartbeat = tokio::time::interval(interval);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, session = self.name, "the bridge sent a line that is not JSON")
                    }
                }
            }
        };
        writer_task.abort();
        reason
    }

    /// Acts on one message; returns a new heartbeat period when the session opened.
    fn handle(&self, incoming: Incoming, on_event: &impl Fn(Value)) -> Option<Duration> {
        match incoming {
            Incoming::Opened { session_id, usable_actuators, heartbeat_interval } => {
                let mut link = self.link.lock();
                link.view.open = true;
                link.view.session = Some(session_id.chars().take(8).collect());
                link.view.usable_actuators = usable_actuators;
                link.view.lease_elsewhere = None;
                // A new session: the old one's error and unavailable tools
                // no longer hold (the core reports the current ones anew).
                link.view.last_error = None;
                link.view.unavailable.clear();
                tracing::info!(session = ?link.view.session, name = self.name, "in-process bridge session open");
                // A third of the interval: well within the dead-peer bound.
                return heartbeat_interval.map(|i| (i / 3).max(Duration::from_millis(200)));
            }
            Incoming::Manifest { usable_actuators } => {
                self.link.lock().view.usable_actuators = usable_actuators
            }
            Incoming::Result { call_id, outcome } => {
                let waiter = self.link.lock().pending.remove(&call_id);
                if let Some(waiter) = waiter {
                    let _ = waiter.send(outcome);
                }
            }
            Incoming::Event { topic, tick, payload } => {
                self.note_event(&topic, &payload);
                if let Some(event) = mirrored_event(&topic, tick, &payload) {
                    on_event(event);
                }
            }
            Incoming::Error { message } => {
                tracing::warn!(%message, session = self.name, "the bridge session reported an error");
                self.link.lock().view.last_error = Some(message);
            }
            Incoming::Ignored => {}
        }
        None
    }

    /// Keeps the lease holder and unavailable tools for the observation.
    fn note_event(&self, topic: &str, payload: &Value) {
        let mut link = self.link.lock();
        match topic {
            "lease" => {
                let elsewhere = payload["holder"].as_str().filter(|_| payload["yours"] != true);
                link.view.lease_elsewhere = elsewhere.map(str::to_owned);
            }
            "state_change" => {
                let Some(entity) = payload["entity"].as_str() else { return };
                match payload["change"].as_str() {
                    Some("unavailable") => {
                        link.view.unavailable.insert(
                            entity.to_string(),
                            payload["reason"]
                                .as_str()
                                .unwrap_or("its data source is missing")
                                .to_string(),
                        );
                    }
                    Some("available") => {
                        link.view.unavailable.remove(entity);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// The session is gone: every waiting call fails.
    fn close(&self, reason: &str) {
        let pending: Vec<oneshot::Sender<CallOutcome>> = {
            let mut link = self.link.lock();
            link.outgoing = None;
            link.view.open = false;
            link.view.session = None;
            link.view.last_error = Some(reason.to_string());
            link.pending.drain().map(|(_, waiter)| waiter).collect()
        };
        for waiter in pending {
            // As the core marks the same abort: not retryable as it is.
            let _ = waiter.send(CallOutcome::failed(
                "execution_failed",
                format!("the bridge session was lost ({reason}); the robot was stopped"),
                false,
            ));
        }
    }
}

#[cfg(test)]
impl Session {
    /// Opens the session on a channel instead of the core: the receiver
    /// gets the lines sent (`capacity` of them before the queue is full).
    pub(super) fn open_for_test(&self, capacity: usize) -> mpsc::Receiver<Vec<u8>> {
        let (tx, rx) = mpsc::channel(capacity);
        let mut link = self.link.lock();
        link.outgoing = Some(tx);
        link.view.open = true;
        rx
    }
}

fn tool_call_line(call_id: &str, tool: &str, input: Map<String, Value>) -> Vec<u8> {
    line_of(
        json!({ "protocol": PROTOCOL, "type": "tool_call", "call_id": call_id, "tool": tool, "input": input }),
    )
}

fn line_of(value: Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(&value).expect("a serde_json::Value always serializes");
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_messages_are_classified() {
        let init = json!({"type": "session_init", "session_id": "5b0c1234-aaaa", "heartbeat_interval_s": 10.0, "capabilities": {"actuators": ["move", "stop"]}});
        assert_eq!(
            classify(&init),
            Incoming::Opened {
                session_id: "5b0c1234-aaaa".into(),
                usable_actuators: vec!["move".into(), "stop".into()],
                heartbeat_interval: Some(Duration::from_secs(10))
            }
        );
        let update = json!({"type": "heartbeat", "manifest_update": {"capabilities": {"actuators": ["stop"]}}});
        assert_eq!(classify(&update), Incoming::Manifest { usable_actuators: vec!["stop".into()] });
        let ok = json!({"type": "tool_result", "call_id": "ai-control-3", "ok": true, "output": {"a": 1}, "meta": {"tick": 12}});
        assert_eq!(
            classify(&ok),
            Incoming::Result {
                call_id: "ai-control-3".into(),
                outcome: CallOutcome::Ok { output: json!({"a": 1}), tick: Some(12) }
            }
        );
        let failed = json!({"type": "tool_result", "call_id": "ai-control-4", "ok": false, "error": {"code": "tool_unavailable", "message": "lease held"}, "meta": {"tick": 13}});
        let Incoming::Result { outcome, .. } = classify(&failed) else { panic!("a result") };
        assert_eq!(outcome.error_message(), Some("lease held"));
        let event = json!({"type": "event", "topic": "collision", "payload": {"other": "wall"}, "meta": {"tick": 5, "seq": 1}});
        assert_eq!(
            classify(&event),
            Incoming::Event {
                topic: "collision".into(),
                tick: Some(5),
                payload: json!({"other": "wall"})
            }
        );
        assert_eq!(
            classify(&json!({"type": "error", "code": "invalid_input", "message": "bad"})),
            Incoming::Error { message: "invalid_input: bad".into() }
        );
        assert_eq!(classify(&json!({"type": "heartbeat"})), Incoming::Ignored);
    }

    #[test]
    fn command_and_tool_result_topics_are_not_mirrored() {
        assert_eq!(
            mirrored_event("governor", Some(3), &json!({"kind": "stop"})),
            Some(json!({"type": "governor", "tick": 3, "payload": {"kind": "stop"}}))
        );
        assert_eq!(mirrored_event("command", Some(3), &json!({})), None);
        assert_eq!(mirrored_event("tool_result", None, &json!({})), None);
    }

    #[test]
    fn the_view_follows_lease_and_availability_events() {
        let session = Session::default();
        let events = std::cell::RefCell::new(Vec::new());
        let on_event = |e: Value| events.borrow_mut().push(e);
        session.handle(
            Incoming::Event {
                topic: "lease".into(),
                tick: None,
                payload: json!({"holder": "ab12cd34", "yours": false}),
            },
            &on_event,
        );
        assert_eq!(session.view().lease_elsewhere.as_deref(), Some("ab12cd34"));
        session.handle(
            Incoming::Event {
                topic: "lease".into(),
                tick: None,
                payload: json!({"holder": "ffff0000", "yours": true}),
            },
            &on_event,
        );
        assert_eq!(session.view().lease_elsewhere, None);
        session.handle(Incoming::Event { topic: "state_change".into(), tick: None, payload: json!({"entity": "move", "change": "unavailable", "reason": "odometry silent"}) }, &on_event);
        assert_eq!(
            session.view().unavailable.get("move").map(String::as_str),
            Some("odometry silent")
        );
        session.handle(
            Incoming::Event {
                topic: "state_change".into(),
                tick: None,
                payload: json!({"entity": "move", "change": "available"}),
            },
            &on_event,
        );
        assert!(session.view().unavailable.is_empty());
        assert_eq!(events.borrow().len(), 4, "all four are mirrored");
    }

    #[test]
    fn calls_on_a_closed_session_fail_with_the_reason() {
        let session = Session::default();
        session.close("the bridge closed the session's connection");
        let error = session.start_call("move", Map::new()).unwrap_err().to_string();
        assert!(error.contains("not open") && error.contains("closed the session"), "{error}");
    }

    #[tokio::test]
    async fn results_reach_their_caller_and_a_lost_session_fails_the_rest() {
        let session = Session::default();
        let (tx, mut rx) = mpsc::channel(8);
        {
            let mut link = session.link.lock();
            link.outgoing = Some(tx);
            link.view.open = true;
        }
        let (first, first_rx) = session.start_call("move", Map::new()).unwrap();
        let (_second, second_rx) = session.start_call("turn", Map::new()).unwrap();
        let sent: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(
            (sent["type"].as_str(), sent["tool"].as_str(), sent["call_id"].as_str()),
            (Some("tool_call"), Some("move"), Some(first.as_str()))
        );
        session.handle(
            Incoming::Result {
                call_id: first.clone(),
                outcome: CallOutcome::Ok { output: json!(1), tick: None },
            },
            &|_| {},
        );
        assert_eq!(first_rx.await.unwrap(), CallOutcome::Ok { output: json!(1), tick: None });
        session.close("gone");
        let lost = second_rx.await.unwrap();
        assert!(lost.error_message().unwrap().contains("lost (gone)"));
        let CallOutcome::Failed { error, .. } = lost else { panic!("failed") };
        assert_eq!(error["retryable"], false, "as the core marks the same abort");
    }

    fn opened_session(capacity: usize) -> (Session, mpsc::Receiver<Vec<u8>>) {
        let session = Session::default();
        let rx = session.open_for_test(capacity);
        (session, rx)
    }

    #[test]
    fn a_full_queue_and_a_closed_connection_are_told_apart() {
        let (session, rx) = opened_session(1);
        session.start_call("move", Map::new()).unwrap();
        let full = session.start_call("move", Map::new()).unwrap_err();
        assert_eq!(full, SendError::QueueFull);
        let full = full.to_string();
        assert!(full.contains("queue is full"), "{full}");
        drop(rx);
        let closed = session.start_call("move", Map::new()).unwrap_err();
        assert_eq!(closed, SendError::ConnectionClosed);
        let closed = closed.to_string();
        assert!(closed.contains("closed") && !closed.contains("full"), "{closed}");
    }

    #[tokio::test]
    async fn cancel_and_stop_are_sent_even_when_every_pending_slot_is_taken() {
        let (session, mut rx) = opened_session(MAX_PENDING_CALLS + 4);
        for _ in 0..MAX_PENDING_CALLS {
            session.start_call("wait", Map::new()).unwrap();
        }
        assert!(session.start_call("wait", Map::new()).is_err());
        session.cancel("ai-control-1").unwrap();
        session.stop("in doubt").unwrap();
        let mut sent = Vec::new();
        while let Ok(line) = rx.try_recv() {
            sent.push(serde_json::from_slice::<Value>(&line).unwrap());
        }
        let last: Vec<(&str, &Value)> = sent
            .iter()
            .rev()
            .take(2)
            .rev()
            .map(|m| (m["tool"].as_str().unwrap(), &m["input"]))
            .collect();
        assert_eq!(
            last,
            vec![
                ("cancel", &json!({"call_id": "ai-control-1"})),
                ("stop", &json!({"reason": "in doubt"}))
            ]
        );
    }

    #[test]
    fn a_reopened_session_forgets_the_old_error_and_unavailable_tools() {
        let session = Session::default();
        session.handle(Incoming::Event { topic: "state_change".into(), tick: None, payload: json!({"entity": "move", "change": "unavailable", "reason": "odometry silent"}) }, &|_| {});
        session.handle(Incoming::Error { message: "invalid_input: bad".into() }, &|_| {});
        session.close("gone");
        assert!(session.view().last_error.is_some());
        session.handle(
            Incoming::Opened {
                session_id: "abcdef0123".into(),
                usable_actuators: vec!["move".into()],
                heartbeat_interval: None,
            },
            &|_| {},
        );
        let view = session.view();
        assert_eq!((view.open, view.last_error, view.unavailable.len()), (true, None, 0));
    }
}
