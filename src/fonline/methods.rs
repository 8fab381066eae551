//! The six methods: one request line in, one response line out.
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::actions::parse_command;
use super::gate::Gate;
use super::observation::{self, Inputs};
use super::rpc::{decode_request, error_line, kind_of, result_line, ErrorCode, Method, RpcError, MAX_LINE_BYTES, PROTOCOL_VERSION};
use super::session::CallOutcome;
use super::state::Completion;
use super::{Dialect, SESSION_SCOPE};

/// Room left in a response line for the envelope around a page of events.
const EVENTS_BYTE_BUDGET: usize = MAX_LINE_BYTES - 4096;
/// `events` limit bounds (the contract's clamp) and default.
const EVENTS_LIMIT_MIN: i64 = 1;
const EVENTS_LIMIT_MAX: i64 = 500;
const EVENTS_LIMIT_DEFAULT: i64 = 100;
/// How long `observe` waits for the robot's state.
const OBSERVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The answer to one line, and whether to close the connection after it.
pub struct Response {
    pub line: Vec<u8>,
    pub close: bool,
}

impl Dialect {
    /// Answers one request line.
    pub(super) async fn respond(&self, gate: &mut Gate, line: &[u8]) -> Response {
        let request = match decode_request(line) {
            Ok(request) => request,
            Err(rejected) => return Response { line: error_line(&rejected.id, &rejected.error), close: false },
        };
        let id = request.id;
        let method = Method::from_name(&request.method);
        if method != Some(Method::Auth) && gate.scope().is_none() {
            let error = RpcError::new(ErrorCode::Unauthorized, "Unauthorized: authenticate first with auth {token}");
            return Response { line: error_line(&id, &error), close: false };
        }
        let Some(method) = method else {
            let error = RpcError::new(ErrorCode::MethodNotFound, format!("Method not found: '{}' (methods: {})", request.method, Method::NAMES.join(", ")));
            return Response { line: error_line(&id, &error), close: false };
        };
        let params = request.params;
        let mut close = false;
        let result = match method {
            Method::Auth => self.auth(gate, &params).map(|(result, closing)| {
                close = closing;
                result
            }),
            Method::Ping => no_params(&params).map(|()| json!({ "ok": true })),
            Method::Status => no_params(&params).map(|()| self.status()),
            Method::Observe => match no_params(&params) {
                Ok(()) => Ok(self.observe().await),
                Err(error) => Err(error),
            },
            Method::Events => self.events(&params),
            Method::Act => self.act(gate, &params),
        };
        let line = match result {
            Ok(result) => result_line(&id, result),
            Err(error) => error_line(&id, &error),
        };
        Response { line, close }
    }

    fn auth(&self, gate: &mut Gate, params: &Map<String, Value>) -> Result<(Value, bool), RpcError> {
        only_params(params, &["token"])?;
        let token = match params.get("token") {
            Some(Value::String(token)) => token,
            Some(other) => return Err(RpcError::invalid_params(format!("token must be a string, got {}", kind_of(other)))),
            None => return Err(RpcError::invalid_params("token is missing: auth takes {token: string}")),
        };
        let settings = &self.settings;
        let outcome = gate.authenticate(&settings.tokens, settings.unauthenticated_scope, token);
        if !outcome.authorized {
            self.state.lock().last_error = "authentication failed on an AI-control connection".into();
            tracing::warn!(close = outcome.close, "AI-control: authentication failed");
        }
        Ok((json!({ "authorized": outcome.authorized }), outcome.close))
    }

    fn status(&self) -> Value {
        let view = self.session.view();
        let bound = *self.listening.lock();
        let state = self.state.lock();
        json!({
            "running": bound.is_some(),
            "host": bound.map(|a| a.ip().to_string()),
            "port": bound.map(|a| a.port()),
            "protocolVersion": PROTOCOL_VERSION,
            "queuedCommands": state.queue.waiting(),
            "maxQueuedCommands": state.queue.capacity(),
            "runningCommand": state.queue.running().map(|r| r.seq),
            "lastCommandSeq": state.queue.last_seq(),
            "events": state.history.len(),
            "maxEvents": state.history.capacity(),
            "latestEventSeq": state.history.latest_seq(),
            "observationSeq": state.observation.seq(),
            "lastError": state.last_error,
            "connections": self.connections.load(Ordering::Relaxed),
            "authRequired": !self.settings.tokens.is_empty(),
            "session": {
                "open": view.open,
                "id": view.session,
                "scope": SESSION_SCOPE.as_str(),
                "lastError": view.last_error,
            },
        })
    }

    /// A fresh snapshot: the robot's state read through the session.
    async fn observe(&self) -> Value {
        let _one_at_a_time = self.observe_gate.lock().await;
        let robot = match self.session.call("proprioception", Map::new(), OBSERVE_TIMEOUT).await {
            CallOutcome::Ok { output, tick } => Ok((output, tick)),
            failed => Err(failed.error_message().unwrap_or("proprioception failed").to_string()),
        };
        let view = self.session.view();
        let snapshot = observation::snapshot(Inputs { session: &view, actuators: &self.actuators, actions: &self.actions, robot });
        let seq = self.state.lock().observation.update(&snapshot);
        json!({ "observationSeq": seq, "observation": snapshot })
    }

    fn events(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        only_params(params, &["afterSeq", "limit"])?;
        let after_seq = integer_param(params, "afterSeq", 0)?.max(0) as u64;
        let limit = integer_param(params, "limit", EVENTS_LIMIT_DEFAULT)?.clamp(EVENTS_LIMIT_MIN, EVENTS_LIMIT_MAX) as usize;
        Ok(self.state.lock().history.after(after_seq, limit, EVENTS_BYTE_BUDGET))
    }

    /// Checks and queues a command; the drain task runs it.
    fn act(&self, gate: &Gate, params: &Map<String, Value>) -> Result<Value, RpcError> {
        if !gate.may_act() {
            let scope = gate.scope().map_or("no", |s| s.as_str());
            return Err(RpcError::new(ErrorCode::Unauthorized, format!("Unauthorized: this connection's token has the '{scope}' scope, which may not act; authenticate with an actuate or admin token")));
        }
        let command = parse_command(params, &self.catalog)?;
        let mut state = self.state.lock();
        let accepted = state.queue.enqueue(command).map_err(|full| RpcError::new(ErrorCode::QueueFull, format!("Command queue full: {} commands wait (the limit, fonline.max_queued_commands); retry when one has run, or send without append to replace them", full.capacity)))?;
        let seq = accepted.seq;
        for dropped in accepted.dropped {
            state.complete(dropped.seq, &dropped.command.command_type, dropped.tool(), Completion::failed(format!("replaced by command {seq}"), "replaced"));
        }
        if let Some(call_id) = accepted.cancel_call {
            // Sent under the state lock: it follows the call it cancels.
            if let Err(reason) = self.session.cancel(&call_id) {
                state.last_error = format!("cancelling command {call_id} for command {seq}: {reason}");
            }
        }
        drop(state);
        self.drain_wake.notify_one();
        Ok(json!({ "accepted": true, "commandSeq": seq }))
    }
}

/// Methods without parameters refuse any (a typo is not silently ignored).
fn no_params(params: &Map<String, Value>) -> Result<(), RpcError> {
    only_params(params, &[])
}

fn only_params(params: &Map<String, Value>, known: &[&str]) -> Result<(), RpcError> {
    match params.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(unknown) if known.is_empty() => Err(RpcError::invalid_params(format!("unknown parameter '{unknown}': this method takes none"))),
        Some(unknown) => Err(RpcError::invalid_params(format!("unknown parameter '{unknown}' (parameters: {})", known.join(", ")))),
    }
}

fn integer_param(params: &Map<String, Value>, name: &str, default: i64) -> Result<i64, RpcError> {
    match params.get(name) {
        None => Ok(default),
        Some(value) => match (value.as_i64(), value.as_u64()) {
            (Some(n), _) => Ok(n),
            (None, Some(_)) => Ok(i64::MAX),
            _ => Err(RpcError::invalid_params(format!("{name} must be an integer, got {} ({value})", kind_of(value)))),
        },
    }
}
