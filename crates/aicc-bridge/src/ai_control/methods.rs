//! The six methods: one request line in, one response line out.
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::actions::parse_command;
use super::gate::Gate;
use super::observation::{self, Inputs};
use super::rpc::{
    decode_request, error_line, kind_of, result_line, ErrorCode, Method, RpcError, MAX_LINE_BYTES,
    PROTOCOL_VERSION,
};
use super::session::CallOutcome;
use super::state::{Completion, DialectState};
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
            Err(rejected) => {
                return Response { line: error_line(&rejected.id, &rejected.error), close: false }
            }
        };
        let id = request.id;
        let method = Method::from_name(&request.method);
        if method != Some(Method::Auth) && gate.scope().is_none() {
            let error = RpcError::new(
                ErrorCode::Unauthorized,
                "Unauthorized: authenticate first with auth {token}",
            );
            return Response { line: error_line(&id, &error), close: false };
        }
        // Any request of an authorized client keeps its commands' lease.
        if let Some(owner) = gate.credential() {
            self.state.lock().heard(owner, std::time::Instant::now());
        }
        let Some(method) = method else {
            let error = RpcError::new(
                ErrorCode::MethodNotFound,
                format!(
                    "Method not found: '{}' (methods: {})",
                    request.method,
                    Method::NAMES.join(", ")
                ),
            );
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

    fn auth(
        &self,
        gate: &mut Gate,
        params: &Map<String, Value>,
    ) -> Result<(Value, bool), RpcError> {
        only_params(params, &["token"])?;
        let token = match params.get("token") {
            Some(Value::String(token)) => token,
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "token must be a string, got {}",
                    kind_of(other)
                )))
            }
            None => {
                return Err(RpcError::invalid_params(
                    "token is missing: auth takes {token: string}",
                ))
            }
        };
        let settings = &self.settings;
        let outcome = gate.authenticate(&settings.tokens, settings.unauthenticated_scope, token);
        if let Some(owner) = gate.credential() {
            self.state.lock().heard(owner, std::time::Instant::now());
        }
        if !outcome.authorized {
            self.state.lock().last_error =
                "authentication failed on an AI-control connection".into();
            tracing::warn!(close = outcome.close, "AI-control: authentication failed");
        }
        Ok((json!({ "authorized": outcome.authorized }), outcome.close))
    }

    fn status(&self) -> Value {
        let view = self.session.view();
        let bound = *self.listening.lock();
        let state = self.state.lock();
        let now = std::time::Instant::now();
        let leases: Vec<Value> = state.leases(now).into_iter().map(|(owner, silent)| json!({ "client": owner.describe(), "silentForS": silent.map(|s| s.as_secs_f64()) })).collect();
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
            "maxConnections": self.settings.max_connections,
            "maxConnectionsPerAddress": self.settings.max_connections_per_address,
            "closedForHttp": state.closed_for_http,
            "closedForUndecodableLines": state.closed_for_undecodable,
            "maxUndecodableLines": self.settings.max_undecodable_lines,
            "leaseTimeoutS": self.settings.lease_timeout.as_secs_f64(),
            "leases": leases,
            "stopGeneration": (self.stop_generation)(),
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
        let snapshot = observation::snapshot(Inputs {
            session: &view,
            actuators: &self.actuators,
            actions: &self.actions,
            robot,
        });
        let seq = self.state.lock().observation.update(&snapshot);
        json!({ "observationSeq": seq, "observation": snapshot })
    }

    fn events(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        only_params(params, &["afterSeq", "limit"])?;
        let after_seq = integer_param(params, "afterSeq", 0)?.max(0) as u64;
        let limit = integer_param(params, "limit", EVENTS_LIMIT_DEFAULT)?
            .clamp(EVENTS_LIMIT_MIN, EVENTS_LIMIT_MAX) as usize;
        Ok(self.state.lock().history.after(after_seq, limit, EVENTS_BYTE_BUDGET))
    }

    /// Checks and queues a command; the drain task runs it.
    fn act(&self, gate: &Gate, params: &Map<String, Value>) -> Result<Value, RpcError> {
        if !gate.may_act() {
            let scope = gate.scope().map_or("no", |s| s.as_str());
            return Err(RpcError::new(ErrorCode::Unauthorized, format!("Unauthorized: this connection's token has the '{scope}' scope, which may not act; authenticate with an actuate or admin token")));
        }
        let command = parse_command(params, &self.catalog)?;
        let owner = gate.credential().expect("an authorized connection has a credential");
        let mut state = self.state.lock();
        // Taken under the state lock, as the drain compares it: a stop
        // after this moment drops the command before it runs.
        let generation = (self.stop_generation)();
        if state.queue.replaces_running(&command, owner) {
            // Sent under the state lock, before anything is replaced: the
            // cancel follows the call it cancels, and a command is
            // accepted only once the running one is surely ending.
            self.end_running_call(&mut state)?;
        }
        let accepted = state.queue.enqueue(command, owner, generation).map_err(|full| RpcError::new(ErrorCode::QueueFull, format!("Command queue full: {} commands wait (the limit, ai_control.max_queued_commands); retry when one has run, or send without append to replace your own (another client's commands are not yours to replace)", full.capacity)))?;
        let seq = accepted.seq;
        for dropped in accepted.dropped {
            state.complete(
                dropped.seq,
                &dropped.command.command_type,
                dropped.tool(),
                Completion::failed(format!("replaced by command {seq}"), "replaced", false),
            );
        }
        drop(state);
        self.drain_wake.notify_one();
        Ok(json!({ "accepted": true, "commandSeq": seq }))
    }
}

impl Dialect {
    /// Cancels the running command's call, if it has one. When the cancel
    /// cannot be sent, the robot is stopped instead (in doubt, stop); when
    /// neither can be sent, the replacing command is refused, untouched.
    fn end_running_call(&self, state: &mut DialectState) -> Result<(), RpcError> {
        let Some((running_seq, call_id)) =
            state.queue.running().and_then(|r| Some((r.seq, r.call_id.clone()?)))
        else {
            return Ok(());
        };
        self.cancel_or_stop(state, running_seq, &call_id)
    }

    /// Cancels a running command's call; when the cancel cannot be sent,
    /// stops the robot instead; when neither can, says so.
    pub(super) fn cancel_or_stop(
        &self,
        state: &mut DialectState,
        running_seq: u64,
        call_id: &str,
    ) -> Result<(), RpcError> {
        let Err(cancel_failed) = self.session.cancel(call_id) else { return Ok(()) };
        let reason = format!("AI-control could not cancel command {running_seq} ({cancel_failed})");
        match self.session.stop(&reason) {
            Ok(()) => {
                tracing::warn!(%reason, "AI-control: stopping the robot instead");
                state.last_error = format!("{reason}; the robot was stopped instead");
                Ok(())
            }
            Err(stop_failed) => {
                tracing::error!(%reason, %stop_failed, "AI-control: could not stop the robot either");
                state.last_error = format!("{reason}, nor stop the robot ({stop_failed})");
                Err(RpcError::new(ErrorCode::Internal, format!("Not accepted: the running command {running_seq} could not be cancelled ({cancel_failed}) nor the robot stopped ({stop_failed}); send stop, or retry shortly")))
            }
        }
    }
}

/// Methods without parameters refuse any (a typo is not silently ignored).
fn no_params(params: &Map<String, Value>) -> Result<(), RpcError> {
    only_params(params, &[])
}

fn only_params(params: &Map<String, Value>, known: &[&str]) -> Result<(), RpcError> {
    match params.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(unknown) if known.is_empty() => Err(RpcError::invalid_params(format!(
            "unknown parameter '{unknown}': this method takes none"
        ))),
        Some(unknown) => Err(RpcError::invalid_params(format!(
            "unknown parameter '{unknown}' (parameters: {})",
            known.join(", ")
        ))),
    }
}

fn integer_param(params: &Map<String, Value>, name: &str, default: i64) -> Result<i64, RpcError> {
    match params.get(name) {
        None => Ok(default),
        Some(value) => match (value.as_i64(), value.as_u64()) {
            (Some(n), _) => Ok(n),
            (None, Some(_)) => Ok(i64::MAX),
            _ => Err(RpcError::invalid_params(format!(
                "{name} must be an integer, got {} ({value})",
                kind_of(value)
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ai_control::Settings;
    use crate::config::Config;
    use crate::protocol::auth::{Scope, Tokens};
    use crate::tools::Registry;
    use std::sync::Arc;

    fn dialect(tokens: Tokens, max_queued_commands: usize) -> Arc<Dialect> {
        let catalog = Arc::new(Registry::new(&Config::default()).catalog().unwrap());
        let settings = Settings::for_test(max_queued_commands, tokens);
        Dialect::new(catalog, settings)
    }

    fn tokens() -> Tokens {
        let mut tokens = Tokens::default();
        tokens.add("drive", Scope::Actuate).unwrap();
        tokens.add("look", Scope::Observe).unwrap();
        tokens
    }

    fn gate(dialect: &Dialect) -> Gate {
        Gate::new(
            &dialect.settings.tokens,
            dialect.settings.unauthenticated_scope,
            dialect.settings.max_auth_failures,
        )
    }

    async fn call(
        dialect: &Dialect,
        gate: &mut Gate,
        id: u64,
        method: &str,
        params: Value,
    ) -> (Value, bool) {
        let line =
            json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string();
        let response = dialect.respond(gate, line.as_bytes()).await;
        let value: Value = serde_json::from_slice(&response.line).unwrap();
        assert_eq!(value["id"], id, "{value}");
        (value, response.close)
    }

    fn code(response: &Value) -> i64 {
        response["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {response}"))
    }

    #[tokio::test]
    async fn every_method_but_auth_waits_for_authorization_and_a_wrong_token_is_no_error() {
        let dialect = dialect(tokens(), 4);
        let mut gate = gate(&dialect);
        for method in ["ping", "status", "observe", "events", "act", "teleport"] {
            assert_eq!(
                code(&call(&dialect, &mut gate, 1, method, json!({})).await.0),
                -32001,
                "{method}"
            );
        }
        let (wrong, close) = call(&dialect, &mut gate, 2, "auth", json!({"token": "guess"})).await;
        assert_eq!((wrong["result"]["authorized"].clone(), close), (json!(false), false));
        assert!(dialect.status()["lastError"].as_str().unwrap().contains("authentication failed"));
        assert_eq!(
            code(&call(&dialect, &mut gate, 3, "auth", json!({"token": 5})).await.0),
            -32602
        );
        let (right, _) = call(&dialect, &mut gate, 4, "auth", json!({"token": "drive"})).await;
        assert_eq!(right["result"]["authorized"], true);
        assert_eq!(
            call(&dialect, &mut gate, 5, "ping", json!({})).await.0["result"],
            json!({"ok": true})
        );
        assert_eq!(code(&call(&dialect, &mut gate, 6, "teleport", json!({})).await.0), -32601);
        assert_eq!(
            code(&call(&dialect, &mut gate, 7, "ping", json!({"verbose": true})).await.0),
            -32602
        );
    }

    #[tokio::test]
    async fn failed_attempts_beyond_the_limit_close_the_connection() {
        let dialect = dialect(tokens(), 4);
        let mut gate = gate(&dialect);
        assert!(!call(&dialect, &mut gate, 1, "auth", json!({"token": "a"})).await.1);
        let (response, close) = call(&dialect, &mut gate, 2, "auth", json!({"token": "b"})).await;
        assert_eq!((response["result"]["authorized"].clone(), close), (json!(false), true));
    }

    #[tokio::test]
    async fn an_observe_token_may_look_but_not_act() {
        let dialect = dialect(tokens(), 4);
        let mut gate = gate(&dialect);
        call(&dialect, &mut gate, 1, "auth", json!({"token": "look"})).await;
        assert!(call(&dialect, &mut gate, 2, "status", json!({})).await.0.get("result").is_some());
        let (refused, _) = call(&dialect, &mut gate, 3, "act", json!({"type": "stop"})).await;
        assert_eq!(code(&refused), -32001);
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("'observe' scope, which may not act"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn the_queue_refuses_when_full_and_a_replacing_command_completes_the_dropped_ones() {
        let dialect = dialect(Tokens::default(), 2);
        let mut gate = gate(&dialect);
        for id in 1..=2 {
            let (accepted, _) = call(
                &dialect,
                &mut gate,
                id,
                "act",
                json!({"type": "move", "x": 100, "append": true}),
            )
            .await;
            assert_eq!(accepted["result"], json!({"accepted": true, "commandSeq": id}));
        }
        let (full, _) =
            call(&dialect, &mut gate, 3, "act", json!({"type": "move", "x": 100, "append": true}))
                .await;
        assert_eq!(code(&full), -32002);
        let status = call(&dialect, &mut gate, 4, "status", json!({})).await.0["result"].clone();
        assert_eq!(
            (status["queuedCommands"].clone(), status["maxQueuedCommands"].clone()),
            (json!(2), json!(2))
        );
        let (replacing, _) = call(&dialect, &mut gate, 5, "act", json!({"type": "stop"})).await;
        assert_eq!(
            replacing["result"]["commandSeq"], 3,
            "a refused command takes no sequence number"
        );
        let events = call(&dialect, &mut gate, 6, "events", json!({})).await.0["result"].clone();
        let completed: Vec<(u64, String)> = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["event"]["commandSeq"].as_u64().unwrap(),
                    e["event"]["message"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            completed,
            vec![
                (1, "replaced by command 3".to_string()),
                (2, "replaced by command 3".to_string())
            ]
        );
        let (bad, _) =
            call(&dialect, &mut gate, 7, "act", json!({"type": "move", "x": "far"})).await;
        assert_eq!(code(&bad), -32602);
        assert_eq!(
            call(&dialect, &mut gate, 8, "status", json!({})).await.0["result"]["queuedCommands"],
            1,
            "an invalid command is never queued"
        );
    }

    /// A running move whose call is on a session with room for `room` lines.
    fn running_move(dialect: &Dialect, room: usize) -> tokio::sync::mpsc::Receiver<Vec<u8>> {
        let outgoing = dialect.session.open_for_test(room);
        let mut state = dialect.state.lock();
        let command =
            parse_command(json!({"type": "move", "x": 100}).as_object().unwrap(), &dialect.catalog)
                .unwrap();
        state
            .queue
            .enqueue(command, crate::protocol::auth::Credential::Unauthenticated, 0)
            .unwrap();
        let running = state.queue.start_next().unwrap();
        state.queue.set_call(running.seq, "ai-control-7".into());
        outgoing
    }

    fn sent_tools(outgoing: &mut tokio::sync::mpsc::Receiver<Vec<u8>>) -> Vec<(String, Value)> {
        let mut sent = Vec::new();
        while let Ok(line) = outgoing.try_recv() {
            let message: Value = serde_json::from_slice(&line).unwrap();
            sent.push((message["tool"].as_str().unwrap().to_string(), message["input"].clone()));
        }
        sent
    }

    #[tokio::test]
    async fn a_replacing_command_cancels_the_running_call() {
        let dialect = dialect(Tokens::default(), 2);
        let mut gate = gate(&dialect);
        let mut outgoing = running_move(&dialect, 4);
        let (accepted, _) =
            call(&dialect, &mut gate, 1, "act", json!({"type": "turn", "intArg": 90})).await;
        assert_eq!(accepted["result"]["accepted"], true, "{accepted}");
        assert_eq!(
            sent_tools(&mut outgoing),
            vec![("cancel".to_string(), json!({"call_id": "ai-control-7"}))]
        );
    }

    #[tokio::test]
    async fn a_replacing_command_is_refused_when_the_running_one_can_be_neither_cancelled_nor_stopped(
    ) {
        let dialect = dialect(Tokens::default(), 2);
        let mut gate = gate(&dialect);
        let mut outgoing = running_move(&dialect, 1);
        dialect.session.stop("filling the outgoing queue").unwrap();
        call(&dialect, &mut gate, 1, "act", json!({"type": "move", "x": 50, "append": true})).await;
        let (refused, _) =
            call(&dialect, &mut gate, 2, "act", json!({"type": "turn", "intArg": 90})).await;
        assert_eq!(code(&refused), -32603, "{refused}");
        assert!(
            refused["error"]["message"].as_str().unwrap().contains("could not be cancelled"),
            "{refused}"
        );
        let status = call(&dialect, &mut gate, 3, "status", json!({})).await.0["result"].clone();
        assert_eq!(
            (
                status["queuedCommands"].clone(),
                status["runningCommand"].clone(),
                status["lastCommandSeq"].clone()
            ),
            (json!(1), json!(1), json!(2)),
            "nothing was replaced"
        );
        assert_eq!(dialect.state.lock().queue.running().unwrap().replaced_by, None);
        assert_eq!(sent_tools(&mut outgoing).len(), 1, "only the line that filled the queue");
    }

    #[tokio::test]
    async fn events_take_a_cursor_and_a_clamped_limit() {
        let dialect = dialect(Tokens::default(), 2);
        let mut gate = gate(&dialect);
        for n in 0..5 {
            dialect.state.lock().history.push(json!({ "type": "test", "n": n }));
        }
        let page = |v: &Value| {
            v["result"]["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["seq"].as_u64().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            page(
                &call(&dialect, &mut gate, 1, "events", json!({"afterSeq": 2, "limit": 100}))
                    .await
                    .0
            ),
            vec![3, 4, 5]
        );
        assert_eq!(
            page(
                &call(&dialect, &mut gate, 2, "events", json!({"afterSeq": -4, "limit": 0}))
                    .await
                    .0
            ),
            vec![1],
            "limit 0 clamps to 1"
        );
        assert_eq!(
            page(&call(&dialect, &mut gate, 3, "events", json!({"limit": 100000})).await.0).len(),
            5,
            "a huge limit clamps to 500"
        );
        assert_eq!(
            call(&dialect, &mut gate, 4, "events", json!({"afterSeq": 5})).await.0["result"],
            json!({"latestSeq": 5, "events": []})
        );
        for bad in [json!({"afterSeq": "3"}), json!({"limit": 2.5}), json!({"after": 1})] {
            assert_eq!(
                code(&call(&dialect, &mut gate, 5, "events", bad.clone()).await.0),
                -32602,
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn without_its_session_the_observation_says_why_it_is_not_ready() {
        let dialect = dialect(Tokens::default(), 2);
        let mut gate = gate(&dialect);
        let result = call(&dialect, &mut gate, 1, "observe", json!({})).await.0["result"].clone();
        assert_eq!(result["observationSeq"], 1);
        let observation = &result["observation"];
        assert_eq!(
            (observation["schemaVersion"].clone(), observation["ready"].clone()),
            (json!(1), json!(false))
        );
        assert!(
            observation["readiness"]["reasons"][0].as_str().unwrap().contains("not open"),
            "{observation}"
        );
        assert_eq!(observation["actions"]["move"]["fields"]["x"]["unit"], "millimetres");
        let again = call(&dialect, &mut gate, 2, "observe", json!({})).await.0["result"]
            ["observationSeq"]
            .clone();
        assert_eq!(again, 1, "nothing changed");
    }

    #[tokio::test]
    async fn envelope_faults_are_answered_with_the_id_when_known() {
        let dialect = dialect(Tokens::default(), 2);
        let mut gate = gate(&dialect);
        let response = dialect
            .respond(&mut gate, br#"{"jsonrpc":"2.0","id":9,"method":"ping","params":7}"#)
            .await;
        let value: Value = serde_json::from_slice(&response.line).unwrap();
        assert_eq!((value["id"].clone(), code(&value)), (json!(9), -32600));
        let response = dialect.respond(&mut gate, b"{oops").await;
        let value: Value = serde_json::from_slice(&response.line).unwrap();
        assert_eq!((value["id"].clone(), code(&value)), (Value::Null, -32700));
    }
}
