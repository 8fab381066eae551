//! A backend written as straight-line async code: the script calls
//! `io.call(tool, input).await` and gets the result; underneath, each call
//! is a decision handed to the loop and each result an observation handed
//! back, so the loop's rules (budget, capabilities, no retries, timeouts)
//! apply to a script as to any backend.
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{Backend, CallError, Decision, Item, Observation, Request, ToolSpec};

/// The script's side.
pub struct ScriptIo {
    decisions: mpsc::Sender<Decision>,
    observations: mpsc::Receiver<Observation>,
    tools: Arc<Mutex<Vec<ToolSpec>>>,
    /// Events received and not yet taken, in tick order: (topic, message).
    events: Vec<(String, Value)>,
    pub elapsed_s: f64,
}

/// The loop went away (it stopped the run): the script ends.
#[derive(Debug, Clone, PartialEq)]
pub struct Stopped;

impl ScriptIo {
    fn keep(&mut self, observation: &Observation) -> Option<Result<Value, CallError>> {
        self.elapsed_s = observation.elapsed_s;
        let mut result = None;
        for item in &observation.items {
            match item {
                Item::Event { topic, message, .. } => {
                    self.events.push((topic.clone(), message.clone()))
                }
                Item::Result(r) => result = Some(r.outcome.clone()),
            }
        }
        result
    }

    /// Calls a tool through the loop; the loop's answer (bridge or local).
    pub async fn call(
        &mut self,
        tool: &str,
        input: Value,
    ) -> Result<Result<Value, CallError>, Stopped> {
        self.decisions
            .send(Decision::Call(vec![Request::new(tool, input)]))
            .await
            .map_err(|_| Stopped)?;
        let observation = self.observations.recv().await.ok_or(Stopped)?;
        Ok(self.keep(&observation).unwrap_or_else(|| {
            Err(CallError::local("internal_error", "the loop answered without a result"))
        }))
    }

    /// Whether the manifest has the tool.
    pub fn has_tool(&self, id: &str) -> bool {
        self.tools.lock().iter().any(|t| t.id == id)
    }

    /// Events since the last time, in tick order.
    pub fn take_events(&mut self) -> Vec<(String, Value)> {
        std::mem::take(&mut self.events)
    }
}

pub struct ScriptBackend {
    name: String,
    observations: mpsc::Sender<Observation>,
    decisions: mpsc::Receiver<Decision>,
    tools: Arc<Mutex<Vec<ToolSpec>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl ScriptBackend {
    /// Starts `script` (it runs until its first call waits for the loop);
    /// what it returns (success, summary) ends the run.
    pub fn start<F, Fut>(name: &str, script: F) -> Self
    where
        F: FnOnce(ScriptIo) -> Fut + Send + 'static,
        Fut: Future<Output = (bool, String)> + Send + 'static,
    {
        let (decision_tx, decision_rx) = mpsc::channel(1);
        let (observation_tx, mut observation_rx) = mpsc::channel::<Observation>(1);
        let tools = Arc::new(Mutex::new(Vec::new()));
        let shared = tools.clone();
        let task = tokio::spawn(async move {
            // The first observation (the start) comes before anything is asked.
            let Some(first) = observation_rx.recv().await else { return };
            let mut io = ScriptIo {
                decisions: decision_tx.clone(),
                observations: observation_rx,
                tools: shared,
                events: Vec::new(),
                elapsed_s: 0.0,
            };
            io.keep(&first);
            let (success, summary) = script(io).await;
            let _ = decision_tx.send(Decision::Done { success, summary }).await;
        });
        Self {
            name: name.into(),
            observations: observation_tx,
            decisions: decision_rx,
            tools,
            _task: task,
        }
    }
}

impl Drop for ScriptBackend {
    fn drop(&mut self) {
        self._task.abort();
    }
}

impl Backend for ScriptBackend {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn decide<'a>(
        &'a mut self,
        tools: &'a [ToolSpec],
        observation: &'a Observation,
    ) -> BoxFuture<'a, Result<Decision, String>> {
        async move {
            *self.tools.lock() = tools.to_vec();
            self.observations
                .send(observation.clone())
                .await
                .map_err(|_| "the script ended".to_string())?;
            self.decisions
                .recv()
                .await
                .ok_or_else(|| "the script ended without a decision (it panicked?)".to_string())
        }
        .boxed()
    }
}
