//! An AICC session from the agent's side: handshake, calls correlated by
//! call_id, errors surfaced as they came, events in tick order. Everything
//! the bridge sends is read in one place (`process`), whatever the agent is
//! waiting for, so that heartbeats are answered and events kept even in the
//! middle of a call.
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::calls::{CallTracker, Correlation};
use super::error::{ClientError, RemoteError};
use super::link::{Link, DEFAULT_MAX_LINE_BYTES};
use super::manifest::Manifest;
use super::ordering::{EventOrderer, OrderedEvent};
use super::retry::RetryPolicy;
use super::transport::Duplex;
use super::wire::{self, BridgeMessage};

/// Events ready for the agent and not yet taken; past this the oldest are
/// dropped and counted (and the count reported).
const READY_EVENTS_CAPACITY: usize = 4096;
/// Events held for reordering at most.
const REORDER_CAPACITY: usize = 1024;
/// Warnings kept for the caller at most.
const WARNINGS_CAPACITY: usize = 256;

#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Sent in `auth` when opening; never printed.
    pub token: Option<String>,
    /// For connecting, the handshake and each call's answer.
    pub timeout: Duration,
    pub max_line_bytes: usize,
    /// Event topics to subscribe to (the bridge's default when `None`).
    pub subscribe: Option<Vec<String>>,
    pub reorder_window: Duration,
    pub retry: RetryPolicy,
    /// Without a token the bridge greets at once; when it does not within
    /// this, the client asks (and learns why, e.g. a token is required).
    pub greeting_wait: Duration,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            token: None,
            timeout: Duration::from_secs(30),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            subscribe: None,
            reorder_window: Duration::from_millis(200),
            retry: RetryPolicy::default(),
            greeting_wait: Duration::from_secs(3),
        }
    }
}

/// A successful call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSuccess {
    pub call_id: String,
    pub output: Value,
    pub meta: Value,
}

/// What the bridge said, for a client that keeps several calls in flight
/// (see [`Session::begin_call`] and [`Session::dispatch`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// The answer to a call begun with `begin_call`.
    Answer { call_id: String, outcome: Result<CallSuccess, RemoteError> },
    /// An event, released in tick order.
    Event(OrderedEvent),
}

/// What a message answered, if it answered what the session waits for.
enum Answer {
    Call {
        call_id: String,
        outcome: Result<CallSuccess, RemoteError>,
    },
    Manifest,
    /// The bridge refused the manifest_request (the session goes on).
    ManifestRefused(RemoteError),
}

enum Awaiting<'a> {
    Nothing,
    /// Any pending call's answer (several calls in flight).
    AnyCall,
    Call(&'a str),
    Manifest(&'a str),
}

pub struct Session {
    link: Link,
    options: SessionOptions,
    session_id: Option<String>,
    manifest: Manifest,
    calls: CallTracker,
    orderer: EventOrderer,
    ready: VecDeque<OrderedEvent>,
    ready_dropped: u64,
    warnings: VecDeque<String>,
    warnings_dropped: u64,
    /// The session's end (the connection failed or closed, the bridge broke
    /// the protocol, or an error about the whole session came): every later
    /// call or wait returns it; `next_event` once the events before it are
    /// taken.
    ended: Option<ClientError>,
    /// Counts manifest changes (an update pushed in a heartbeat, or a new
    /// session_init), so that a front end can tell its host.
    manifest_generation: u64,
}

impl Session {
    /// Opens a session over a connected stream (see docs/protocol.md): with
    /// a token, `manifest_request` with `auth` first; without, the bridge's
    /// own `session_init`.
    pub async fn open(
        stream: Box<dyn Duplex>,
        options: SessionOptions,
    ) -> Result<Self, ClientError> {
        let mut link = Link::new(stream, options.max_line_bytes, options.timeout);
        let mut warnings = VecDeque::new();
        let (init, answered_request) = handshake(&mut link, &options, &mut warnings).await?;
        let manifest = Manifest::from_message(&init)
            .map_err(|violation| ClientError::Protocol(violation.to_string()))?;
        let mut session = Self {
            link,
            session_id: init.get("session_id").and_then(Value::as_str).map(str::to_owned),
            manifest,
            calls: CallTracker::new(),
            orderer: EventOrderer::new(options.reorder_window, REORDER_CAPACITY),
            ready: VecDeque::new(),
            ready_dropped: 0,
            warnings,
            warnings_dropped: 0,
            ended: None,
            manifest_generation: 0,
            options,
        };
        if let (Some(topics), false) = (session.options.subscribe.clone(), answered_request) {
            session.refresh_manifest(Some(topics)).await?;
        }
        Ok(session)
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Changes each time the manifest changes.
    pub fn manifest_generation(&self) -> u64 {
        self.manifest_generation
    }

    /// Starts a call without waiting for its answer, which comes later as
    /// an [`Update::Answer`] from [`Session::dispatch`]; returns its call_id.
    /// Refused locally, as `call`, when the session may not call the tool.
    /// Nothing is retried: the caller decides.
    pub async fn begin_call(&mut self, tool: &str, input: &Value) -> Result<String, ClientError> {
        self.ensure_alive()?;
        self.manifest.permits(tool).map_err(|why| ClientError::Refused(why.to_string()))?;
        if !input.is_object() {
            return Err(ClientError::Usage(format!(
                "the input to '{tool}' must be a JSON object, got {input}"
            )));
        }
        let message_id = wire::new_message_id();
        let call_id = self.calls.begin(tool, &message_id);
        if let Err(error) =
            self.link.send(&wire::tool_call(&message_id, &call_id, tool, input)).await
        {
            self.calls.abandon(&call_id);
            self.end(error.clone());
            return Err(error);
        }
        Ok(call_id)
    }

    /// Gives up on a call begun with `begin_call`: its answer, if it still
    /// comes, is recognised as late and dropped.
    pub fn abandon_call(&mut self, call_id: &str) {
        self.calls.abandon(call_id);
    }

    /// The next message from the bridge, or `None` when `until` passes
    /// first. Cancel-safe (it only reads), so that it can be raced against
    /// other work; hand what it returns to [`Session::dispatch`].
    pub async fn receive(&mut self, until: Instant) -> Result<Option<BridgeMessage>, ClientError> {
        self.ensure_alive()?;
        self.next_message(until).await
    }

    /// Handles a message from `receive` (answering heartbeats, keeping the
    /// manifest) and returns the answers and the events now ready, in order.
    /// Events held for reordering are released when due; call it with
    /// `None` when `receive` timed out to release them.
    pub async fn dispatch(
        &mut self,
        message: Option<BridgeMessage>,
    ) -> Result<Vec<Update>, ClientError> {
        let mut updates = Vec::new();
        if let Some(message) = message {
            if let Some(Answer::Call { call_id, outcome }) =
                self.process(message, Awaiting::AnyCall).await?
            {
                updates.push(Update::Answer { call_id, outcome });
            }
        }
        let released = self.orderer.release_due(Instant::now());
        self.enqueue(released);
        updates.extend(self.ready.drain(..).map(Update::Event));
        Ok(updates)
    }

    /// When `dispatch` should be called with `None` at the latest, so that
    /// events held for reordering are released in time.
    pub fn next_release(&self) -> Option<Instant> {
        self.orderer.next_deadline()
    }

    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// Why the session is over, once it is; nothing more can be done on it.
    pub fn ended(&self) -> Option<&ClientError> {
        self.ended.as_ref()
    }

    /// Calls sent and still waiting for their answer.
    pub fn pending_calls(&self) -> usize {
        self.calls.pending_count()
    }

    fn ensure_alive(&self) -> Result<(), ClientError> {
        self.ended.clone().map_or(Ok(()), Err)
    }

    /// Warnings since the last call (protocol violations that were not
    /// fatal, ignored messages, retries), oldest first.
    pub fn take_warnings(&mut self) -> Vec<String> {
        let mut out: Vec<String> = self.warnings.drain(..).collect();
        if self.warnings_dropped > 0 {
            out.push(format!(
                "{} more warnings were dropped",
                std::mem::take(&mut self.warnings_dropped)
            ));
        }
        out
    }

    /// Re-fetches the manifest (and changes the subscribed topics).
    pub async fn refresh_manifest(
        &mut self,
        subscribe: Option<Vec<String>>,
    ) -> Result<(), ClientError> {
        self.ensure_alive()?;
        let message_id = wire::new_message_id();
        self.link.send(&wire::manifest_request(&message_id, None, subscribe.as_deref())).await?;
        let deadline = Instant::now() + self.options.timeout;
        loop {
            let Some(message) = self.next_message(deadline).await? else {
                return Err(ClientError::Transport(format!(
                    "no answer to manifest_request within {} s",
                    self.options.timeout.as_secs_f64()
                )));
            };
            match self.process(message, Awaiting::Manifest(&message_id)).await? {
                Some(Answer::Manifest) => return Ok(()),
                Some(Answer::ManifestRefused(error)) => return Err(ClientError::Remote(error)),
                _ => {}
            }
        }
    }

    /// Calls a tool and waits for its result. Refused locally (nothing is
    /// sent) when the session may not call it; an AICC error is `Remote`;
    /// only a sensor with a retryable error is retried, and only as the
    /// retry policy allows.
    pub async fn call(&mut self, tool: &str, input: &Value) -> Result<CallSuccess, ClientError> {
        self.ensure_alive()?;
        let class = self
            .manifest
            .permits(tool)
            .map_err(|why| ClientError::Refused(why.to_string()))?
            .class
            .clone();
        if !input.is_object() {
            return Err(ClientError::Usage(format!(
                "the input to '{tool}' must be a JSON object, got {input}"
            )));
        }
        let mut retries_done = 0;
        loop {
            match self.call_once(tool, input).await? {
                Ok(success) => return Ok(success),
                Err(error) if self.options.retry.may_retry(&class, &error, retries_done) => {
                    retries_done += 1;
                    self.warn(format!(
                        "'{tool}' failed ({error}); retry {retries_done} of {}",
                        self.options.retry.sensor_retries
                    ));
                    self.idle(self.options.retry.backoff(retries_done)).await?;
                    // The manifest may have changed meanwhile.
                    self.manifest
                        .permits(tool)
                        .map_err(|why| ClientError::Refused(why.to_string()))?;
                }
                Err(error) => return Err(ClientError::Remote(error)),
            }
        }
    }

    async fn call_once(
        &mut self,
        tool: &str,
        input: &Value,
    ) -> Result<Result<CallSuccess, RemoteError>, ClientError> {
        let message_id = wire::new_message_id();
        let call_id = self.calls.begin(tool, &message_id);
        let outcome = self.send_and_await(tool, input, &message_id, &call_id).await;
        // On every way out but its answer (a timeout, a failed read or
        // write, a session-wide error) the call is given up on.
        if outcome.is_err() {
            self.calls.abandon(&call_id);
        }
        outcome
    }

    async fn send_and_await(
        &mut self,
        tool: &str,
        input: &Value,
        message_id: &str,
        call_id: &str,
    ) -> Result<Result<CallSuccess, RemoteError>, ClientError> {
        if let Err(error) = self.link.send(&wire::tool_call(message_id, call_id, tool, input)).await
        {
            self.end(error.clone());
            return Err(error);
        }
        let deadline = Instant::now() + self.options.timeout;
        loop {
            let Some(message) = self.next_message(deadline).await? else {
                let acting = if self.manifest.tool(tool).is_some_and(|t| t.class != "sensor") {
                    "; the robot may still be acting on it"
                } else {
                    ""
                };
                return Err(ClientError::Transport(format!(
                    "no answer to call {call_id} ('{tool}') within {} s{acting}",
                    self.options.timeout.as_secs_f64()
                )));
            };
            if let Some(Answer::Call { outcome, .. }) =
                self.process(message, Awaiting::Call(call_id)).await?
            {
                return Ok(outcome);
            }
        }
    }

    /// The next event in tick order; `None` when `until` passes first. A
    /// connection that ended is reported after the events that came before.
    pub async fn next_event(
        &mut self,
        until: Option<Instant>,
    ) -> Result<Option<OrderedEvent>, ClientError> {
        loop {
            if self.ready_dropped > 0 {
                let dropped = std::mem::take(&mut self.ready_dropped);
                self.warn(format!("{dropped} events were dropped: the client's event queue ({READY_EVENTS_CAPACITY}) was full"));
            }
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            if let Some(ended) = self.ended.clone() {
                return Err(ended);
            }
            let now = Instant::now();
            if until.is_some_and(|until| now >= until) {
                return Ok(None);
            }
            let wake = [until, self.orderer.next_deadline()]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now + Duration::from_secs(3600));
            match self.next_message(wake).await {
                Ok(Some(message)) => {
                    if let Err(error) = self.process(message, Awaiting::Nothing).await {
                        self.end(error);
                    }
                }
                Ok(None) => {
                    let released = self.orderer.release_due(Instant::now());
                    self.enqueue(released);
                }
                Err(error) => self.end(error),
            }
        }
    }

    /// Events still held for reordering, released now in order (when the
    /// agent stops listening).
    pub fn flush_events(&mut self) -> Vec<OrderedEvent> {
        let released = self.orderer.flush();
        self.enqueue(released);
        self.ready.drain(..).collect()
    }

    /// Serves the connection (heartbeats, events) for `duration`.
    pub async fn idle(&mut self, duration: Duration) -> Result<(), ClientError> {
        self.ensure_alive()?;
        let until = Instant::now() + duration;
        while let Some(message) = self.next_message(until).await? {
            self.process(message, Awaiting::Nothing).await?;
        }
        let released = self.orderer.release_due(Instant::now());
        self.enqueue(released);
        Ok(())
    }

    /// Ends the session (the bridge releases the motion lease), waiting
    /// briefly for the bridge's answer.
    pub async fn close(mut self) -> Result<(), ClientError> {
        self.link.send(&wire::session_close(&wire::new_message_id())).await?;
        let until = Instant::now() + self.options.timeout.min(Duration::from_secs(2));
        loop {
            match self.link.read_message(until).await {
                Ok(Some(BridgeMessage::SessionClose { .. }))
                | Ok(None)
                | Err(ClientError::Transport(_)) => return Ok(()),
                Ok(Some(_)) => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// The next message; a failure to read one ends the session (the link
    /// is dead after it).
    async fn next_message(&mut self, until: Instant) -> Result<Option<BridgeMessage>, ClientError> {
        let message = match self.link.read_message(until).await {
            Ok(message) => message,
            Err(error) => {
                self.end(error.clone());
                return Err(error);
            }
        };
        let tick = match &message {
            Some(BridgeMessage::ToolResult(result)) => result.tick(),
            Some(BridgeMessage::Heartbeat { tick, .. } | BridgeMessage::Error { tick, .. }) => {
                *tick
            }
            _ => None,
        };
        if let Some(tick) = tick {
            let released = self.orderer.observe_tick(tick);
            self.enqueue(released);
        }
        Ok(message)
    }

    /// Handles any message from the bridge; returns what it answered when it
    /// answered what is awaited. An error returned ends the session.
    async fn process(
        &mut self,
        message: BridgeMessage,
        awaiting: Awaiting<'_>,
    ) -> Result<Option<Answer>, ClientError> {
        let outcome = self.process_message(message, awaiting).await;
        if let Err(error) = &outcome {
            self.end(error.clone());
        }
        outcome
    }

    async fn process_message(
        &mut self,
        message: BridgeMessage,
        awaiting: Awaiting<'_>,
    ) -> Result<Option<Answer>, ClientError> {
        match message {
            BridgeMessage::ToolResult(result) => match self.calls.resolve(&result.call_id) {
                Correlation::Answers(_) if matches!(awaiting, Awaiting::AnyCall) || matches!(awaiting, Awaiting::Call(id) if id == result.call_id) => {
                    let call_id = result.call_id;
                    let outcome = result.outcome.map(|output| CallSuccess { call_id: call_id.clone(), output, meta: result.meta });
                    return Ok(Some(Answer::Call { call_id, outcome }));
                }
                Correlation::Answers(call) => self.warn(format!("a result for call {} ('{}') came while it was not awaited; dropped", result.call_id, call.tool)),
                Correlation::Abandoned(call) => {
                    self.warn(format!("late answer to abandoned call {} ('{}') ignored: it came after the client stopped waiting", result.call_id, call.tool))
                }
                Correlation::AlreadyAnswered => {
                    self.warn(format!("protocol violation: a second tool_result for call_id '{}', which was already answered; ignored", result.call_id))
                }
                Correlation::Unknown => self.warn(format!("protocol violation: tool_result for unknown call_id '{}' ignored (not taken as an answer)", result.call_id)),
            },
            BridgeMessage::Error { error, in_reply_to, call_id, .. } => {
                if let Awaiting::Manifest(id) = awaiting {
                    if in_reply_to.as_deref() == Some(id) {
                        return Ok(Some(Answer::ManifestRefused(error)));
                    }
                }
                match self.calls.resolve_error(in_reply_to.as_deref(), call_id.as_deref()) {
                    Some((id, _)) if matches!(awaiting, Awaiting::AnyCall) || matches!(awaiting, Awaiting::Call(awaited) if awaited == id) => {
                        return Ok(Some(Answer::Call { call_id: id, outcome: Err(error) }))
                    }
                    Some((id, call)) => self.warn(format!("an error for call {id} ('{}') came while it was not awaited: {error}", call.tool)),
                    None if in_reply_to.is_none() && call_id.is_none() => {
                        // About the session or connection as a whole.
                        if let Awaiting::Call(id) = awaiting {
                            self.calls.abandon(id);
                        }
                        return Err(ClientError::Remote(error));
                    }
                    None => match self.calls.resolve_abandoned_error(in_reply_to.as_deref(), call_id.as_deref()) {
                        Some((id, call)) => self.warn(format!("late answer to abandoned call {id} ('{}') ignored: {error}", call.tool)),
                        None => self.warn(format!(
                            "protocol violation: an error for a call or message this client did not send (call_id {call_id:?}, in_reply_to {in_reply_to:?}) ignored: {error}"
                        )),
                    },
                }
            }
            BridgeMessage::Event(event) => {
                let released = self.orderer.push(event, Instant::now());
                self.enqueue(released);
            }
            BridgeMessage::Heartbeat { in_reply_to, manifest_update, .. } => {
                if let Some(update) = manifest_update {
                    let update = update.as_object().ok_or("a heartbeat's manifest_update is not an object").map_err(|e| ClientError::Protocol(e.into()))?;
                    self.manifest = Manifest::from_message(update).map_err(|e| ClientError::Protocol(format!("manifest_update: {e}")))?;
                    self.manifest_generation += 1;
                }
                if in_reply_to.is_none() {
                    // Answer the bridge's own heartbeat: a silent agent is taken for dead.
                    self.link.send(&wire::heartbeat(&wire::new_message_id())).await?;
                }
            }
            BridgeMessage::SessionInit { in_reply_to, message } => {
                self.manifest = Manifest::from_message(&message).map_err(|violation| ClientError::Protocol(violation.to_string()))?;
                self.manifest_generation += 1;
                if let Awaiting::Manifest(id) = awaiting {
                    if in_reply_to.as_deref() == Some(id) {
                        return Ok(Some(Answer::Manifest));
                    }
                }
            }
            BridgeMessage::SessionClose { reason } => {
                return Err(ClientError::Transport(format!("the bridge closed the session: {}", reason.as_deref().unwrap_or("no reason given"))))
            }
            BridgeMessage::Unknown { kind } => self.warn(format!("ignored a message of unknown type '{kind}' (from a newer protocol minor?)")),
        }
        Ok(None)
    }

    fn enqueue(&mut self, events: Vec<OrderedEvent>) {
        for event in events {
            if self.ready.len() >= READY_EVENTS_CAPACITY {
                self.ready.pop_front();
                self.ready_dropped += 1;
            }
            self.ready.push_back(event);
        }
    }

    /// The session is over: what was held is released, then the error
    /// (the first one: what came after it is a consequence).
    fn end(&mut self, error: ClientError) {
        let released = self.orderer.flush();
        self.enqueue(released);
        self.ended.get_or_insert(error);
    }

    fn warn(&mut self, warning: String) {
        push_warning(&mut self.warnings, &mut self.warnings_dropped, warning);
    }
}

fn push_warning(warnings: &mut VecDeque<String>, dropped: &mut u64, warning: String) {
    if warnings.len() >= WARNINGS_CAPACITY {
        warnings.pop_front();
        *dropped += 1;
    }
    warnings.push_back(warning);
}

/// Waits for `session_init`; returns it and whether it answered a
/// `manifest_request` that already carried the wanted subscription.
async fn handshake(
    link: &mut Link,
    options: &SessionOptions,
    warnings: &mut VecDeque<String>,
) -> Result<(Map<String, Value>, bool), ClientError> {
    let started = Instant::now();
    let deadline = started + options.timeout;
    let mut asked = false;
    if let Some(token) = &options.token {
        link.send(&wire::manifest_request(
            &wire::new_message_id(),
            Some(token),
            options.subscribe.as_deref(),
        ))
        .await?;
        asked = true;
    }
    let mut dropped = 0;
    loop {
        let until = if asked { deadline } else { deadline.min(started + options.greeting_wait) };
        match link.read_message(until).await? {
            None if !asked => {
                // No greeting: the bridge may want a token; asking makes it say so.
                link.send(&wire::manifest_request(
                    &wire::new_message_id(),
                    None,
                    options.subscribe.as_deref(),
                ))
                .await?;
                asked = true;
            }
            None => {
                return Err(ClientError::Transport(format!(
                    "no session_init from the bridge within {} s",
                    options.timeout.as_secs_f64()
                )))
            }
            Some(BridgeMessage::SessionInit { message, .. }) => return Ok((message, asked)),
            Some(BridgeMessage::Error { error, .. }) => return Err(ClientError::Remote(error)),
            Some(BridgeMessage::SessionClose { reason }) => {
                return Err(ClientError::Transport(format!(
                    "the bridge closed the session before it began: {}",
                    reason.as_deref().unwrap_or("no reason given")
                )))
            }
            Some(BridgeMessage::Heartbeat { .. }) => {}
            Some(other) => push_warning(
                warnings,
                &mut dropped,
                format!("ignored a {} before session_init", kind_of(&other)),
            ),
        }
    }
}

/// A message's `type`, for warnings.
fn kind_of(message: &BridgeMessage) -> &str {
    match message {
        BridgeMessage::SessionInit { .. } => "session_init",
        BridgeMessage::ToolResult(_) => "tool_result",
        BridgeMessage::Event(_) => "event",
        BridgeMessage::Error { .. } => "error",
        BridgeMessage::Heartbeat { .. } => "heartbeat",
        BridgeMessage::SessionClose { .. } => "session_close",
        BridgeMessage::Unknown { kind } => kind,
    }
}
