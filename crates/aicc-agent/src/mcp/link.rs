//! The adapter's one AICC session, owned by one task: MCP requests come in
//! on a bounded channel, several calls may be in flight at once (a move and
//! the cancel that stops it), answers and `command` events go back to the
//! call that asked, every event into the log, manifest changes to a watch.
//! When every handle is dropped (the host went away) the session is closed,
//! so that the bridge stops what the adapter started.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, watch};

use super::events::EventLog;
use crate::client::manifest::Manifest;
use crate::client::session::Update;
use crate::client::{CallSuccess, ClientError, RemoteError, Session};

/// Requests waiting for the session task at most.
const REQUEST_QUEUE: usize = 64;
/// Updates of one call waiting for its MCP handler at most; progress past
/// it is dropped (the answer never is: it is sent with a wait).
const CALL_UPDATES: usize = 32;
/// Event topics the adapter never subscribes to (one event per tick).
const UNWANTED_TOPICS: [&str; 1] = ["tick"];

/// What a call's handler hears about it.
#[derive(Debug)]
pub enum CallUpdate {
    /// The call was sent, with this AICC call_id (what a cancel names).
    Started { call_id: String },
    /// A `command` event's payload about this call.
    Command(Map<String, Value>),
    /// The answer; `Err` for an AICC error.
    Answered(Result<CallSuccess, RemoteError>),
    /// The call could not be made or its answer cannot come.
    Failed(ClientError),
}

enum Request {
    Call { tool: String, input: Value, updates: mpsc::Sender<CallUpdate> },
    Cancel { call_id: String },
}

/// What the session task shares with the MCP side.
pub struct Shared {
    pub events: Mutex<EventLog>,
    /// Why the session ended, once it has.
    pub ended: Mutex<Option<ClientError>>,
}

/// A handle on the session task; cheap to clone. The session is closed when
/// the last handle is dropped.
#[derive(Clone)]
pub struct LinkHandle {
    requests: mpsc::Sender<Request>,
    pub manifest: watch::Receiver<Arc<Manifest>>,
    /// Bumped for every event logged (for resource subscribers).
    pub event_pulse: watch::Receiver<u64>,
    pub shared: Arc<Shared>,
}

impl LinkHandle {
    /// Starts a call; its updates come on the returned channel, which ends
    /// after `Answered` or `Failed`.
    pub async fn call(&self, tool: &str, input: Value) -> mpsc::Receiver<CallUpdate> {
        let (updates, receiver) = mpsc::channel(CALL_UPDATES);
        let request = Request::Call { tool: tool.to_string(), input, updates: updates.clone() };
        if self.requests.send(request).await.is_err() {
            let _ = updates.send(CallUpdate::Failed(self.ended_error())).await;
        }
        receiver
    }

    /// Asks the bridge to cancel a call in flight (the robot stops); its
    /// answer still comes to the call's handler.
    pub async fn cancel(&self, call_id: &str) {
        let _ = self.requests.send(Request::Cancel { call_id: call_id.to_string() }).await;
    }

    /// Why the session is over, or a transport error saying it is.
    pub fn ended_error(&self) -> ClientError {
        self.shared
            .ended
            .lock()
            .clone()
            .unwrap_or_else(|| ClientError::Transport("the bridge session has ended".into()))
    }
}

/// Subscribes to every event topic the bridge offers (but `tick`), then
/// runs the session on its own task. The returned token is cancelled when
/// the session ends, whatever the reason.
pub async fn start(
    mut session: Session,
) -> Result<(LinkHandle, tokio_util::sync::CancellationToken), ClientError> {
    let available: Vec<String> = session
        .manifest()
        .raw()
        .get("events")
        .and_then(|e| e.get("available"))
        .and_then(Value::as_array)
        .map(|topics| {
            topics
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| !UNWANTED_TOPICS.contains(t))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if !available.is_empty() {
        session.refresh_manifest(Some(available)).await?;
    }
    let (requests, receiver) = mpsc::channel(REQUEST_QUEUE);
    let (manifest_tx, manifest) = watch::channel(Arc::new(session.manifest().clone()));
    let (pulse_tx, event_pulse) = watch::channel(0);
    let shared =
        Arc::new(Shared { events: Mutex::new(EventLog::default()), ended: Mutex::new(None) });
    let ended = tokio_util::sync::CancellationToken::new();
    let task = SessionTask {
        session,
        requests: receiver,
        calls: HashMap::new(),
        internal: Vec::new(),
        manifest: manifest_tx,
        pulse: pulse_tx,
        shared: shared.clone(),
    };
    let done = ended.clone();
    tokio::spawn(async move {
        task.run().await;
        done.cancel();
    });
    Ok((LinkHandle { requests, manifest, event_pulse, shared }, ended))
}

struct SessionTask {
    session: Session,
    requests: mpsc::Receiver<Request>,
    /// Calls in flight for a handler, by AICC call_id.
    calls: HashMap<String, mpsc::Sender<CallUpdate>>,
    /// Calls the adapter made itself (cancels), whose answers nobody waits for.
    internal: Vec<String>,
    manifest: watch::Sender<Arc<Manifest>>,
    pulse: watch::Sender<u64>,
    shared: Arc<Shared>,
}

impl SessionTask {
    async fn run(mut self) {
        let error = loop {
            let wake = self
                .session
                .next_release()
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            let generation = self.session.manifest_generation();
            // `receive` only reads, so losing the race to a request loses nothing.
            let step = tokio::select! {
                request = self.requests.recv() => match request {
                    Some(request) => self.serve(request).await,
                    None => break None,
                },
                message = self.session.receive(wake) => match message {
                    Ok(message) => self.dispatch(message).await,
                    Err(error) => Err(error),
                },
            };
            if let Err(error) = step {
                break Some(error);
            }
            if self.session.manifest_generation() != generation {
                let _ = self.manifest.send(Arc::new(self.session.manifest().clone()));
            }
        };
        let error = match error {
            None => {
                // Every handle dropped: the host is gone. Closing releases the lease.
                let _ = self.session.close().await;
                ClientError::Transport(
                    "the MCP host went away; the bridge session was closed".into(),
                )
            }
            Some(error) => error,
        };
        tracing::info!("bridge session ended: {error}");
        *self.shared.ended.lock() = Some(error.clone());
        for (_, updates) in self.calls.drain() {
            let _ = updates.send(CallUpdate::Failed(error.clone())).await;
        }
    }

    async fn serve(&mut self, request: Request) -> Result<(), ClientError> {
        match request {
            Request::Call { tool, input, updates } => {
                match self.session.begin_call(&tool, &input).await {
                    Ok(call_id) => {
                        let _ = updates.try_send(CallUpdate::Started { call_id: call_id.clone() });
                        self.calls.insert(call_id, updates);
                    }
                    Err(error) => {
                        let _ = updates.try_send(CallUpdate::Failed(error.clone()));
                        // A refusal or a bad input ends nothing; a dead link does.
                        if self.session.ended().is_some() {
                            return Err(error);
                        }
                    }
                }
            }
            Request::Cancel { call_id } => {
                if self.calls.contains_key(&call_id) {
                    match self.session.begin_call("cancel", &json!({ "call_id": call_id })).await {
                        Ok(cancel_id) => self.internal.push(cancel_id),
                        Err(error) if self.session.ended().is_some() => return Err(error),
                        Err(error) => tracing::warn!("cannot cancel call {call_id}: {error}"),
                    }
                }
            }
        }
        Ok(())
    }

    async fn dispatch(
        &mut self,
        message: Option<crate::client::wire::BridgeMessage>,
    ) -> Result<(), ClientError> {
        for update in self.session.dispatch(message).await? {
            match update {
                Update::Answer { call_id, outcome } => {
                    if let Some(updates) = self.calls.remove(&call_id) {
                        let _ = updates.send(CallUpdate::Answered(outcome)).await;
                    } else if let Some(index) = self.internal.iter().position(|id| *id == call_id) {
                        self.internal.swap_remove(index);
                        if let Err(error) = outcome {
                            tracing::warn!("a cancel failed: {error}");
                        }
                    }
                }
                Update::Event(event) => {
                    if event.topic == "command" {
                        if let Some(payload) =
                            event.message.get("payload").and_then(Value::as_object)
                        {
                            let call = payload
                                .get("call_id")
                                .and_then(Value::as_str)
                                .and_then(|id| self.calls.get(id));
                            if let Some(updates) = call {
                                // A slow handler loses progress, never its answer.
                                let _ = updates.try_send(CallUpdate::Command(payload.clone()));
                            }
                        }
                    }
                    self.shared.events.lock().push(event.to_json());
                    self.pulse.send_modify(|count| *count += 1);
                }
            }
        }
        for warning in self.session.take_warnings() {
            tracing::warn!("{warning}");
        }
        Ok(())
    }
}
