//! `aicc agent`: the agent loop (the RFC's third actor). It decides when
//! the backend thinks and delivers what it asked for: it wakes the backend
//! at the start, when a call finishes, on events and on a timer; sends the
//! backend's tool calls one at a time; feeds back results and events in
//! tick order; and stops on the goal (the backend says it is done), on a
//! timeout, or when the budget of calls is spent.
//!
//! Rules it keeps whatever the backend does:
//! - a malformed request, an unknown tool, or a tool outside the session's
//!   capabilities is answered with an error (nothing is sent) and the loop
//!   goes on; every request counts against the budget;
//! - an actuator call identical to one that just failed with a
//!   non-retryable error is not sent again (answered with an error);
//!   nothing is retried by the loop itself;
//! - a backend that does not answer within its time, fails, or a run that
//!   ends abnormally (timeout, budget) leaves the robot stopped (`stop`).
//!
//! The loop knows the bridge only through [`Link`] (a session, or a fake
//! in tests) and the backend only through [`Backend`]; it runs on tokio's
//! clock, so tests drive it on paused (virtual) time.
pub mod command;
pub mod link;
pub mod openai;
pub mod reference;
pub mod script;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::client::ClientError;

/// A tool as the backend sees it: the manifest's entry, as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub id: String,
    pub class: String,
    /// The manifest's descriptor (description, input_schema, ...).
    pub descriptor: Value,
}

/// An error answering a request, from the bridge or from the loop itself.
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    pub code: String,
    pub message: String,
    pub retryable: bool,
    /// Answered by the loop: nothing was sent to the bridge.
    pub local: bool,
}

impl CallError {
    fn local(code: &str, message: impl Into<String>) -> Self {
        Self { code: code.into(), message: message.into(), retryable: false, local: true }
    }
}

/// The answer to one of the backend's requests.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub tool: String,
    pub input: Value,
    pub outcome: Result<Value, CallError>,
    /// The bridge's tick of the result (the last tick seen for local answers).
    pub tick: u64,
    /// An identifier the backend gave its request (OpenAI tool_call ids).
    pub request_id: Option<String>,
}

/// What the backend is told when woken, in tick order.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Result(CallResult),
    Event { tick: u64, topic: String, message: Value },
}

impl Item {
    pub fn tick(&self) -> u64 {
        match self {
            Item::Result(result) => result.tick,
            Item::Event { tick, .. } => *tick,
        }
    }
}

/// Why the backend was woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    Start,
    CallFinished,
    Events,
    Timer,
}

impl Wake {
    pub fn as_str(self) -> &'static str {
        match self {
            Wake::Start => "start",
            Wake::CallFinished => "call_finished",
            Wake::Events => "events",
            Wake::Timer => "timer",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub wake: Wake,
    pub items: Vec<Item>,
    pub calls_made: u32,
    pub calls_left: u32,
    pub elapsed_s: f64,
}

/// One tool call the backend asks for. `input` is `Err` when the backend's
/// output could not be read as JSON (the loop answers invalid_input).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub tool: String,
    pub input: Result<Value, String>,
    pub id: Option<String>,
}

impl Request {
    pub fn new(tool: &str, input: Value) -> Self {
        Self { tool: tool.into(), input: Ok(input), id: None }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Send these calls, in order; the backend is woken when they are done.
    Call(Vec<Request>),
    /// Nothing to do until an event or the timer.
    Wait,
    /// The goal is reached (success) or given up.
    Done { success: bool, summary: String },
}

/// Something that decides what to call next.
pub trait Backend: Send {
    fn name(&self) -> String;
    fn decide<'a>(
        &'a mut self,
        tools: &'a [ToolSpec],
        observation: &'a Observation,
    ) -> BoxFuture<'a, Result<Decision, String>>;
}

/// What the loop hears from the bridge.
#[derive(Debug, Clone, PartialEq)]
pub enum Heard {
    Answer { call_id: String, outcome: Result<(Value, u64), CallError> },
    Event { tick: u64, topic: String, message: Value },
}

/// The bridge, as the loop uses it.
pub trait Link: Send {
    /// The tools of the manifest (all of them, callable or not).
    fn tools(&self) -> Vec<ToolSpec>;
    /// Whether this session may call `tool`: Err(code, why) if not.
    fn permits(&self, tool: &str) -> Result<(), (String, String)>;
    /// Sends a call; its answer comes from `next`.
    fn begin_call<'a>(
        &'a mut self,
        tool: &'a str,
        input: &'a Value,
    ) -> BoxFuture<'a, Result<String, ClientError>>;
    /// What the bridge said, or nothing by `until`.
    fn next(&mut self, until: Instant) -> BoxFuture<'_, Result<Vec<Heard>, ClientError>>;
}

#[derive(Debug, Clone)]
pub struct Limits {
    /// Requests the backend may make (sent or answered locally).
    pub max_calls: u32,
    /// The whole run.
    pub timeout: Duration,
    /// One decision of the backend.
    pub think_timeout: Duration,
    /// Wake the backend after this long without calls or events.
    pub timer: Duration,
    /// One call's answer.
    pub call_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_calls: 200,
            timeout: Duration::from_secs(300),
            think_timeout: Duration::from_secs(60),
            timer: Duration::from_secs(5),
            call_timeout: Duration::from_secs(130),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The backend reached its goal.
    Goal,
    /// The backend gave up.
    GaveUp,
    Timeout,
    Budget,
    /// The backend took longer than think_timeout.
    BackendHung,
    /// The backend failed (its process died, its endpoint answered an error).
    BackendFailed,
    /// The connection to the bridge ended.
    LinkFailed,
}

impl Ending {
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Goal => "goal",
            Ending::GaveUp => "gave_up",
            Ending::Timeout => "timeout",
            Ending::Budget => "budget",
            Ending::BackendHung => "backend_hung",
            Ending::BackendFailed => "backend_failed",
            Ending::LinkFailed => "link_failed",
        }
    }
}

/// The figures of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub calls: u32,
    pub calls_by_tool: BTreeMap<String, u32>,
    pub errors: u32,
    pub local_errors: u32,
    /// Decoded bytes of the pictures results carried (vision, depth).
    pub image_bytes: u64,
    pub governor_events: u32,
    pub contact_events: u32,
    pub events: u32,
    pub wakes: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub ending: Ending,
    pub summary: String,
    pub elapsed_s: f64,
    pub stats: Stats,
    /// Whether the loop sent `stop` at the end, and how that went.
    pub stopped: Option<Result<(), String>>,
}

impl Report {
    pub fn to_json(&self) -> Value {
        let s = &self.stats;
        json!({
            "ending": self.ending.as_str(),
            "success": self.ending == Ending::Goal,
            "summary": self.summary,
            "elapsed_s": (self.elapsed_s * 1000.0).round() / 1000.0,
            "calls": s.calls,
            "calls_by_tool": s.calls_by_tool,
            "errors": s.errors,
            "local_errors": s.local_errors,
            "image_bytes": s.image_bytes,
            "governor_events": s.governor_events,
            "contact_events": s.contact_events,
            "events": s.events,
            "wakes": s.wakes,
            "robot_stopped": self.stopped.as_ref().map(|r| match r { Ok(()) => json!(true), Err(e) => json!(e) }),
        })
    }
}

/// Decoded size of the base64 pictures in a result (`png_b64`, `jpeg_b64`).
fn picture_bytes(output: &Value) -> u64 {
    ["png_b64", "jpeg_b64"]
        .iter()
        .filter_map(|k| output.get(*k).and_then(Value::as_str))
        .map(|b64| (b64.len() as u64 / 4) * 3)
        .sum()
}

struct Run<'a> {
    link: &'a mut dyn Link,
    limits: Limits,
    start: Instant,
    deadline: Instant,
    items: Vec<Item>,
    stats: Stats,
    last_tick: u64,
    /// The last actuator call that failed non-retryably (tool, input).
    failed_actuator: Option<(String, Value)>,
}

impl Run<'_> {
    fn elapsed_s(&self) -> f64 {
        (Instant::now() - self.start).as_secs_f64()
    }

    fn hear(
        &mut self,
        heard: Heard,
        waiting_for: Option<&str>,
    ) -> Option<Result<(Value, u64), CallError>> {
        match heard {
            Heard::Event { tick, topic, message } => {
                self.last_tick = self.last_tick.max(tick);
                self.stats.events += 1;
                if topic == "governor" {
                    self.stats.governor_events += 1;
                }
                if topic == "collision" {
                    self.stats.contact_events += 1;
                }
                self.items.push(Item::Event { tick, topic, message });
                None
            }
            Heard::Answer { call_id, outcome } => {
                (Some(call_id.as_str()) == waiting_for).then_some(outcome)
            }
        }
    }

    fn answer_locally(&mut self, request: &Request, input: Value, error: CallError) {
        self.stats.errors += 1;
        self.stats.local_errors += 1;
        self.items.push(Item::Result(CallResult {
            tool: request.tool.clone(),
            input,
            outcome: Err(error),
            tick: self.last_tick,
            request_id: request.id.clone(),
        }));
    }

    /// Sends one request and waits for its answer. Err: the run ends.
    async fn execute(&mut self, request: Request, tools: &[ToolSpec]) -> Result<(), Ending> {
        if self.stats.calls >= self.limits.max_calls {
            return Err(Ending::Budget);
        }
        self.stats.calls += 1;
        *self.stats.calls_by_tool.entry(request.tool.clone()).or_default() += 1;
        let input = match &request.input {
            Ok(Value::Object(map)) => Value::Object(map.clone()),
            Ok(other) => {
                let error = CallError::local(
                    "invalid_input",
                    format!("the input to '{}' must be a JSON object, got {other}", request.tool),
                );
                self.answer_locally(&request, other.clone(), error);
                return Ok(());
            }
            Err(why) => {
                let error = CallError::local(
                    "invalid_input",
                    format!("the input to '{}' is not JSON: {why}", request.tool),
                );
                self.answer_locally(&request, Value::Null, error);
                return Ok(());
            }
        };
        let Some(spec) = tools.iter().find(|t| t.id == request.tool) else {
            let known: Vec<&str> = tools.iter().map(|t| t.id.as_str()).collect();
            let error = CallError::local(
                "tool_unknown",
                format!("no tool '{}' in the manifest (tools: {})", request.tool, known.join(", ")),
            );
            self.answer_locally(&request, input, error);
            return Ok(());
        };
        if let Err((code, why)) = self.link.permits(&request.tool) {
            self.answer_locally(&request, input, CallError::local(&code, why));
            return Ok(());
        }
        let is_actuator = spec.class == "actuator";
        if is_actuator
            && self.failed_actuator.as_ref() == Some(&(request.tool.clone(), input.clone()))
        {
            let error = CallError::local("execution_failed", format!("not sent: the same '{}' call just failed with a non-retryable error; an actuator is never retried without a retryable error (change the request)", request.tool));
            self.answer_locally(&request, input, error);
            return Ok(());
        }
        let call_id = match self.link.begin_call(&request.tool, &input).await {
            Ok(call_id) => call_id,
            Err(ClientError::Refused(why)) => {
                self.answer_locally(&request, input, CallError::local("tool_unavailable", why));
                return Ok(());
            }
            Err(_) => return Err(Ending::LinkFailed),
        };
        let call_deadline = (Instant::now() + self.limits.call_timeout).min(self.deadline);
        let outcome = loop {
            if Instant::now() >= call_deadline {
                return Err(Ending::Timeout);
            }
            let heard = self.link.next(call_deadline).await.map_err(|_| Ending::LinkFailed)?;
            let mut answer = None;
            for h in heard {
                if let Some(outcome) = self.hear(h, Some(&call_id)) {
                    answer = Some(outcome);
                }
            }
            if let Some(outcome) = answer {
                break outcome;
            }
        };
        let (outcome, tick) = match outcome {
            Ok((output, tick)) => {
                self.stats.image_bytes += picture_bytes(&output);
                if is_actuator {
                    self.failed_actuator = None;
                }
                (Ok(output), tick)
            }
            Err(error) => {
                self.stats.errors += 1;
                if is_actuator {
                    self.failed_actuator =
                        (!error.retryable).then(|| (request.tool.clone(), input.clone()));
                }
                (Err(error), self.last_tick)
            }
        };
        self.last_tick = self.last_tick.max(tick);
        self.items.push(Item::Result(CallResult {
            tool: request.tool,
            input,
            outcome,
            tick,
            request_id: request.id,
        }));
        Ok(())
    }

    /// Waits for events or the timer; the reason the backend is woken.
    async fn wait(&mut self) -> Result<Wake, Ending> {
        let until = (Instant::now() + self.limits.timer).min(self.deadline);
        loop {
            if Instant::now() >= until {
                return if until >= self.deadline { Err(Ending::Timeout) } else { Ok(Wake::Timer) };
            }
            let heard = self.link.next(until).await.map_err(|_| Ending::LinkFailed)?;
            let had_event = heard.iter().any(|h| matches!(h, Heard::Event { .. }));
            for h in heard {
                self.hear(h, None);
            }
            if had_event {
                return Ok(Wake::Events);
            }
        }
    }

    /// Sends `stop` (when the session may) so that nothing keeps moving.
    async fn stop_robot(&mut self) -> Option<Result<(), String>> {
        self.link.permits("stop").ok()?;
        let input = json!({});
        let call_id = match self.link.begin_call("stop", &input).await {
            Ok(id) => id,
            Err(e) => return Some(Err(e.to_string())),
        };
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            match self.link.next(until).await {
                Ok(heard) => {
                    for h in heard {
                        if let Some(outcome) = self.hear(h, Some(&call_id)) {
                            return Some(
                                outcome
                                    .map(|_| ())
                                    .map_err(|e| format!("{}: {}", e.code, e.message)),
                            );
                        }
                    }
                }
                Err(e) => return Some(Err(e.to_string())),
            }
        }
        Some(Err("no answer to stop within 5 s".into()))
    }
}

/// Runs `backend` on `link` until the goal, the budget or the timeout.
pub async fn run(link: &mut dyn Link, backend: &mut dyn Backend, limits: Limits) -> Report {
    let start = Instant::now();
    let deadline = start + limits.timeout;
    let mut run = Run {
        link,
        limits,
        start,
        deadline,
        items: Vec::new(),
        stats: Stats::default(),
        last_tick: 0,
        failed_actuator: None,
    };
    let mut wake = Wake::Start;
    let (ending, summary) = loop {
        if Instant::now() >= run.deadline {
            break (
                Ending::Timeout,
                format!("the run's timeout ({} s) passed", run.limits.timeout.as_secs_f64()),
            );
        }
        let tools = run.link.tools();
        let mut items = std::mem::take(&mut run.items);
        // Stable: results and events of one tick keep their order of arrival.
        items.sort_by_key(Item::tick);
        let observation = Observation {
            wake,
            items,
            calls_made: run.stats.calls,
            calls_left: run.limits.max_calls.saturating_sub(run.stats.calls),
            elapsed_s: run.elapsed_s(),
        };
        run.stats.wakes += 1;
        let think =
            run.limits.think_timeout.min(run.deadline.saturating_duration_since(Instant::now()));
        let decision = match tokio::time::timeout(think, backend.decide(&tools, &observation)).await
        {
            Err(_) => {
                break (
                    Ending::BackendHung,
                    format!(
                        "backend {} did not answer within {:.1} s",
                        backend.name(),
                        think.as_secs_f64()
                    ),
                )
            }
            Ok(Err(why)) => {
                break (Ending::BackendFailed, format!("backend {} failed: {why}", backend.name()))
            }
            Ok(Ok(decision)) => decision,
        };
        match decision {
            Decision::Done { success, summary } => {
                break (if success { Ending::Goal } else { Ending::GaveUp }, summary)
            }
            Decision::Wait => match run.wait().await {
                Ok(w) => wake = w,
                Err(ending) => break (ending, "while waiting".into()),
            },
            Decision::Call(requests) => {
                let mut ended = None;
                for request in requests {
                    if let Err(ending) = run.execute(request, &tools).await {
                        ended = Some(ending);
                        break;
                    }
                }
                match ended {
                    Some(Ending::Budget) => {
                        break (
                            Ending::Budget,
                            format!("the budget of {} calls is spent", run.limits.max_calls),
                        )
                    }
                    Some(ending) => break (ending, "during a call".into()),
                    None => wake = Wake::CallFinished,
                }
            }
        }
    };
    let stopped = if ending == Ending::Goal { None } else { run.stop_robot().await };
    Report { ending, summary, elapsed_s: run.elapsed_s(), stats: run.stats, stopped }
}

/// An item as JSON, for backends that speak JSON (command, OpenAI).
pub fn item_json(item: &Item) -> Value {
    match item {
        Item::Result(r) => {
            let mut value =
                json!({ "type": "result", "tool": r.tool, "input": r.input, "tick": r.tick });
            if let Some(id) = &r.request_id {
                value["id"] = json!(id);
            }
            match &r.outcome {
                Ok(output) => {
                    value["ok"] = json!(true);
                    value["output"] = output.clone();
                }
                Err(e) => {
                    value["ok"] = json!(false);
                    value["error"] = json!({ "code": e.code, "message": e.message, "retryable": e.retryable, "local": e.local });
                }
            }
            value
        }
        Item::Event { tick, topic, message } => {
            json!({ "type": "event", "tick": tick, "topic": topic, "event": message })
        }
    }
}

/// An observation as JSON: wake, items in tick order, budget, time.
pub fn observation_json(observation: &Observation) -> Value {
    json!({
        "type": "observation",
        "wake": observation.wake.as_str(),
        "items": observation.items.iter().map(item_json).collect::<Vec<_>>(),
        "calls_made": observation.calls_made,
        "calls_left": observation.calls_left,
        "elapsed_s": observation.elapsed_s,
    })
}

/// Reads a decision from JSON (`{"calls": [{"tool", "input", "id"?}]}`,
/// `{"wait": true}` or `{"done": true, "success", "summary"}`). Malformed
/// calls become requests whose input is an error, answered by the loop.
pub fn decision_from_json(value: &Value) -> Result<Decision, String> {
    if value.get("done").and_then(Value::as_bool) == Some(true) {
        return Ok(Decision::Done {
            success: value.get("success").and_then(Value::as_bool).unwrap_or(false),
            summary: value.get("summary").and_then(Value::as_str).unwrap_or("").to_string(),
        });
    }
    if value.get("wait").and_then(Value::as_bool) == Some(true) {
        return Ok(Decision::Wait);
    }
    let Some(calls) = value.get("calls").and_then(Value::as_array) else {
        return Ok(Decision::Call(vec![Request { tool: String::new(), input: Err(format!("a decision is {{\"calls\": [...]}}, {{\"wait\": true}} or {{\"done\": true, ...}}; got {value}")), id: None }]));
    };
    Ok(Decision::Call(
        calls
            .iter()
            .map(|call| {
                let tool = call.get("tool").and_then(Value::as_str).unwrap_or("").to_string();
                let id = call.get("id").and_then(Value::as_str).map(str::to_owned);
                let input = match call.get("input") {
                    None => Ok(json!({})),
                    Some(input) => Ok(input.clone()),
                };
                let input = if tool.is_empty() {
                    Err(format!("a call needs a string 'tool': {call}"))
                } else {
                    input
                };
                Request { tool, input, id }
            })
            .collect(),
    ))
}
