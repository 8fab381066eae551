//! The loop against a fake bridge, on short real durations (tokio's paused
//! clock needs its test-util feature, which would build tokio twice).
use std::collections::VecDeque;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::*;

/// A bridge that answers each call after `latency`, and sends events at set times.
struct FakeLink {
    tools: Vec<ToolSpec>,
    /// Tools this session may not call.
    refused: Vec<&'static str>,
    /// (tool, error) answered instead of success, once each, in order.
    failures: VecDeque<(&'static str, CallError)>,
    latency: Duration,
    pending: VecDeque<(Instant, Heard)>,
    sent: Vec<(String, Value)>,
    tick: u64,
}

fn spec(id: &str, class: &str) -> ToolSpec {
    ToolSpec {
        id: id.into(),
        class: class.into(),
        descriptor: json!({ "id": id, "class": class, "description": format!("the {id} tool"), "input_schema": { "type": "object" } }),
    }
}

impl FakeLink {
    fn new() -> Self {
        Self {
            tools: vec![
                spec("vision", "sensor"),
                spec("move", "actuator"),
                spec("stop", "actuator"),
                spec("place_object", "generator"),
            ],
            refused: vec!["place_object"],
            failures: VecDeque::new(),
            latency: Duration::from_millis(10),
            pending: VecDeque::new(),
            sent: Vec::new(),
            tick: 0,
        }
    }

    fn event_at(&mut self, after: Duration, tick: u64, topic: &str) {
        self.pending.push_back((
            Instant::now() + after,
            Heard::Event {
                tick,
                topic: topic.into(),
                message: json!({ "topic": topic, "tick": tick }),
            },
        ));
        self.pending.make_contiguous().sort_by_key(|(at, _)| *at);
    }

    fn sent_tools(&self) -> Vec<&str> {
        self.sent.iter().map(|(t, _)| t.as_str()).collect()
    }
}

impl Link for FakeLink {
    fn tools(&self) -> Vec<ToolSpec> {
        self.tools.clone()
    }

    fn permits(&self, tool: &str) -> Result<(), (String, String)> {
        if self.refused.contains(&tool) {
            return Err((
                "tool_unavailable".into(),
                format!("tool '{tool}' needs capability 'can_modify_world'"),
            ));
        }
        Ok(())
    }

    fn begin_call<'a>(
        &'a mut self,
        tool: &'a str,
        input: &'a Value,
    ) -> BoxFuture<'a, Result<String, ClientError>> {
        async move {
            self.sent.push((tool.to_string(), input.clone()));
            let call_id = format!("c{}", self.sent.len());
            self.tick += 1;
            let outcome = match self.failures.front() {
                Some((failing, _)) if *failing == tool => Err(self.failures.pop_front().unwrap().1),
                _ => Ok((
                    json!({ "tool": tool, "jpeg_b64": if tool == "vision" { "AAAA" } else { "" } }),
                    self.tick,
                )),
            };
            self.pending.push_back((
                Instant::now() + self.latency,
                Heard::Answer { call_id: call_id.clone(), outcome },
            ));
            self.pending.make_contiguous().sort_by_key(|(at, _)| *at);
            Ok(call_id)
        }
        .boxed()
    }

    fn next(&mut self, until: Instant) -> BoxFuture<'_, Result<Vec<Heard>, ClientError>> {
        async move {
            let at = self.pending.front().map(|(at, _)| *at);
            match at {
                Some(at) if at <= until => {
                    tokio::time::sleep_until(at).await;
                    Ok(vec![self.pending.pop_front().unwrap().1])
                }
                _ => {
                    tokio::time::sleep_until(until).await;
                    Ok(Vec::new())
                }
            }
        }
        .boxed()
    }
}

/// Answers with the given decisions in order (then gives up), recording what it saw.
struct Scripted {
    decisions: VecDeque<Decision>,
    seen: Vec<Observation>,
    /// Hang (never answer) at this wake.
    hang_at: Option<usize>,
}

impl Scripted {
    fn new(decisions: Vec<Decision>) -> Self {
        Self { decisions: decisions.into(), seen: Vec::new(), hang_at: None }
    }
}

impl Backend for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn decide<'a>(
        &'a mut self,
        _tools: &'a [ToolSpec],
        observation: &'a Observation,
    ) -> BoxFuture<'a, Result<Decision, String>> {
        async move {
            self.seen.push(observation.clone());
            if self.hang_at == Some(self.seen.len()) {
                futures::future::pending::<()>().await;
            }
            Ok(self
                .decisions
                .pop_front()
                .unwrap_or(Decision::Done { success: false, summary: "out of decisions".into() }))
        }
        .boxed()
    }
}

fn call(tool: &str, input: Value) -> Decision {
    Decision::Call(vec![Request::new(tool, input)])
}

fn errors(observation: &Observation) -> Vec<(String, String, bool)> {
    observation
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Result(CallResult { tool, outcome: Err(e), .. }) => {
                Some((tool.clone(), e.code.clone(), e.local))
            }
            _ => None,
        })
        .collect()
}

fn limits() -> Limits {
    Limits {
        max_calls: 20,
        timeout: Duration::from_secs(20),
        think_timeout: Duration::from_millis(300),
        timer: Duration::from_millis(100),
        call_timeout: Duration::from_secs(5),
    }
}

#[tokio::test]
async fn bad_requests_are_answered_and_the_loop_goes_on() {
    let mut link = FakeLink::new();
    let mut backend = Scripted::new(vec![
        Decision::Call(vec![
            Request {
                tool: "move".into(),
                input: Err("expected value at line 1".into()),
                id: Some("x1".into()),
            },
            Request::new("move", json!([1, 2])),
            Request::new("fly", json!({})),
            Request::new("place_object", json!({ "object": "red_cube", "x_m": 1, "y_m": 0 })),
        ]),
        call("vision", json!({})),
        Decision::Done { success: true, summary: "seen".into() },
    ]);
    let report = run(&mut link, &mut backend, limits()).await;
    assert_eq!(report.ending, Ending::Goal, "{report:?}");
    let answered = errors(&backend.seen[1]);
    assert_eq!(
        answered,
        [
            ("move".into(), "invalid_input".into(), true),
            ("move".into(), "invalid_input".into(), true),
            ("fly".into(), "tool_unknown".into(), true),
            ("place_object".into(), "tool_unavailable".into(), true)
        ]
    );
    // Nothing of that reached the bridge; the next request did.
    assert_eq!(link.sent_tools(), ["vision"]);
    assert_eq!(
        (report.stats.calls, report.stats.local_errors, report.stats.image_bytes),
        (5, 4, 3)
    );
    // The backend's id comes back with its answer.
    assert!(
        matches!(&backend.seen[1].items[0], Item::Result(CallResult { request_id: Some(id), .. }) if id == "x1")
    );
    assert_eq!(report.stopped, None, "a run that reached its goal leaves the robot as it is");
}

#[tokio::test]
async fn an_actuator_is_not_sent_again_after_a_non_retryable_error() {
    let mut link = FakeLink::new();
    let refused = CallError {
        code: "invalid_input".into(),
        message: "input.forward = 9 is outside [-5, 5]".into(),
        retryable: false,
        local: false,
    };
    let blocked = CallError {
        code: "execution_failed".into(),
        message: "obstacle at 0.2 m".into(),
        retryable: true,
        local: false,
    };
    link.failures = [("move", refused), ("move", blocked)].into();
    let mut backend = Scripted::new(vec![
        call("move", json!({ "forward": 9 })),
        call("move", json!({ "forward": 9 })),
        call("move", json!({ "forward": 0.5 })),
        call("move", json!({ "forward": 0.5 })),
        Decision::Done { success: true, summary: "".into() },
    ]);
    let report = run(&mut link, &mut backend, limits()).await;
    assert_eq!(report.ending, Ending::Goal);
    // The second identical request was answered locally; after a retryable error the same call is sent again.
    assert_eq!(
        errors(&backend.seen[2]),
        [("move".to_string(), "execution_failed".to_string(), true)]
    );
    assert_eq!(
        link.sent.iter().map(|(_, i)| i["forward"].as_f64().unwrap()).collect::<Vec<_>>(),
        [9.0, 0.5, 0.5]
    );
}

#[tokio::test]
async fn the_budget_ends_the_run_and_the_robot_is_stopped() {
    let mut link = FakeLink::new();
    let mut backend = Scripted::new((0..10).map(|_| call("vision", json!({}))).collect());
    let report = run(&mut link, &mut backend, Limits { max_calls: 3, ..limits() }).await;
    assert_eq!(report.ending, Ending::Budget);
    assert_eq!(link.sent_tools(), ["vision", "vision", "vision", "stop"]);
    assert_eq!(report.stopped, Some(Ok(())));
}

#[tokio::test]
async fn a_hanging_backend_is_timed_out_and_the_robot_left_stopped() {
    let mut link = FakeLink::new();
    let mut backend = Scripted::new(vec![call("move", json!({ "forward": 1 }))]);
    backend.hang_at = Some(2);
    let report = run(&mut link, &mut backend, limits()).await;
    assert_eq!(report.ending, Ending::BackendHung, "{report:?}");
    assert!(report.summary.contains("did not answer within 0.3 s"), "{}", report.summary);
    assert_eq!(link.sent_tools(), ["move", "stop"]);
    assert_eq!(report.stopped, Some(Ok(())));
}

#[tokio::test]
async fn the_run_times_out_and_stops_the_robot() {
    let mut link = FakeLink::new();
    let mut backend = Scripted::new((0..100).map(|_| Decision::Wait).collect());
    let report =
        run(&mut link, &mut backend, Limits { timeout: Duration::from_millis(550), ..limits() })
            .await;
    assert_eq!(report.ending, Ending::Timeout);
    // Woken by the timer (0.1 s) until the run's time was up.
    assert!(
        backend.seen.iter().skip(1).all(|o| o.wake == Wake::Timer) && backend.seen.len() >= 5,
        "{:?}",
        backend.seen.iter().map(|o| o.wake).collect::<Vec<_>>()
    );
    assert_eq!(link.sent_tools(), ["stop"]);
}

#[tokio::test]
async fn events_wake_the_backend_and_come_in_tick_order_with_results() {
    let mut link = FakeLink::new();
    link.latency = Duration::from_millis(200);
    // During the call: events of ticks 7 and 3 (out of order), the result is tick 1.
    link.event_at(Duration::from_millis(20), 7, "governor");
    link.event_at(Duration::from_millis(40), 3, "collision");
    let mut backend = Scripted::new(vec![
        call("vision", json!({})),
        Decision::Wait,
        Decision::Done { success: true, summary: "".into() },
    ]);
    let report = run(&mut link, &mut backend, limits()).await;
    assert_eq!(report.ending, Ending::Goal);
    let ticks: Vec<u64> = backend.seen[1].items.iter().map(Item::tick).collect();
    assert_eq!(ticks, [1, 3, 7]);
    assert_eq!(backend.seen[1].wake, Wake::CallFinished);
    assert_eq!((report.stats.governor_events, report.stats.contact_events), (1, 1));
    // Waiting with nothing coming: the timer wakes it.
    assert_eq!(backend.seen[2].wake, Wake::Timer);

    // An event while waiting wakes it at once.
    let mut link = FakeLink::new();
    link.event_at(Duration::from_millis(30), 2, "lease");
    let mut backend =
        Scripted::new(vec![Decision::Wait, Decision::Done { success: true, summary: "".into() }]);
    run(&mut link, &mut backend, Limits { timer: Duration::from_secs(10), ..limits() }).await;
    assert_eq!(backend.seen[1].wake, Wake::Events);
    assert!(matches!(&backend.seen[1].items[..], [Item::Event { topic, .. }] if topic == "lease"));
}

#[tokio::test]
async fn a_script_backend_calls_through_the_loop() {
    let mut link = FakeLink::new();
    let mut backend = script::ScriptBackend::start("test script", |mut io| async move {
        let seen = io.call("vision", json!({})).await.unwrap();
        let refused = io.call("place_object", json!({})).await.unwrap();
        let ok = seen.is_ok() && refused.as_ref().is_err_and(|e| e.local);
        (ok, format!("vision ok: {}, place_object refused: {}", seen.is_ok(), refused.is_err()))
    });
    let report = run(&mut link, &mut backend, limits()).await;
    assert_eq!(report.ending, Ending::Goal, "{}", report.summary);
    assert_eq!(link.sent_tools(), ["vision"]);
}

#[test]
fn decisions_are_read_from_json_and_malformed_calls_kept_as_errors() {
    assert_eq!(decision_from_json(&json!({ "wait": true })).unwrap(), Decision::Wait);
    assert_eq!(
        decision_from_json(&json!({ "done": true, "success": true, "summary": "ok" })).unwrap(),
        Decision::Done { success: true, summary: "ok".into() }
    );
    let Decision::Call(calls) = decision_from_json(
        &json!({ "calls": [{ "tool": "move", "input": { "forward": 1 } }, { "input": {} }] }),
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(calls[0], Request::new("move", json!({ "forward": 1 })));
    assert!(calls[1].input.as_ref().unwrap_err().contains("'tool'"));
    let Decision::Call(calls) = decision_from_json(&json!({ "go": "left" })).unwrap() else {
        panic!()
    };
    assert!(calls[0].input.is_err());
}

#[tokio::test]
async fn a_command_backend_speaks_json_lines_and_a_bad_line_is_answered() {
    let script = r#"read start; read obs; echo 'this is not json'; read obs; case "$obs" in *invalid_input*) ;; *) echo '{"done":true,"success":false,"summary":"no error seen"}'; exit;; esac; echo '{"calls":[{"tool":"vision","input":{}}]}'; read obs; echo '{"done":true,"success":true,"summary":"ok"}'"#;
    let mut backend =
        command::CommandBackend::spawn(&["sh".into(), "-c".into(), script.into()], "look").unwrap();
    let mut link = FakeLink::new();
    let report = run(&mut link, &mut backend, limits()).await;
    assert_eq!(report.ending, Ending::Goal, "{report:?}");
    assert_eq!(link.sent_tools(), ["vision"]);
    assert_eq!(report.stats.local_errors, 1);

    // A program that never answers is timed out; one that exits is a failed backend.
    for (script, ending) in [("sleep 30", Ending::BackendHung), ("exit 0", Ending::BackendFailed)] {
        let mut backend =
            command::CommandBackend::spawn(&["sh".into(), "-c".into(), script.into()], "look")
                .unwrap();
        let mut link = FakeLink::new();
        let report = run(&mut link, &mut backend, limits()).await;
        assert_eq!(report.ending, ending, "{script}: {report:?}");
        assert_eq!(link.sent_tools(), ["stop"], "{script}");
    }
}

/// A scripted chat-completions endpoint: answers each POST with the next
/// reply, and keeps the request bodies.
async fn fake_endpoint(replies: Vec<Value>) -> (u16, tokio::task::JoinHandle<Vec<Value>>) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let mut bodies = Vec::new();
        for reply in replies {
            let (stream, _) = listener.accept().await.unwrap();
            let mut reader = BufReader::new(stream);
            let mut length = 0;
            let mut request_line = String::new();
            reader.read_line(&mut request_line).await.unwrap();
            assert!(request_line.starts_with("POST /v1/chat/completions "), "{request_line}");
            let mut authorized = false;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).await.unwrap();
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                authorized |= line.trim() == "Authorization: Bearer test-key";
                if line == "\r\n" {
                    break;
                }
            }
            assert!(authorized, "no bearer key sent");
            let mut body = vec![0; length];
            reader.read_exact(&mut body).await.unwrap();
            bodies.push(serde_json::from_slice::<Value>(&body).unwrap());
            let text = reply.to_string();
            let response = format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}", text.len());
            reader.get_mut().write_all(response.as_bytes()).await.unwrap();
        }
        bodies
    });
    (port, task)
}

fn tool_calls(calls: &[(&str, &str, &str)]) -> Value {
    let calls: Vec<Value> = calls.iter().map(|(id, name, arguments)| json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments } })).collect();
    json!({ "choices": [{ "message": { "role": "assistant", "content": null, "tool_calls": calls } }] })
}

#[tokio::test]
async fn the_openai_backend_against_a_scripted_endpoint() {
    let (port, endpoint) = fake_endpoint(vec![
        tool_calls(&[("call_a", "vision", "{\"format\":\"jpeg\"}")]),
        tool_calls(&[("call_b", "move", "{\"forward\": 0.3"), ("call_c", "teleport", "{}")]),
        json!({ "choices": [{ "message": { "role": "assistant", "content": "DONE: I saw it." } }] }),
    ])
    .await;
    let url = format!("http://127.0.0.1:{port}/v1");
    let mut backend = openai::OpenAiBackend::new(
        openai::Endpoint::parse(&url, "test-model", Some("test-key".into())).unwrap(),
        "look around",
        Duration::from_secs(5),
    );
    let mut link = FakeLink::new();
    let report = run(&mut link, &mut backend, limits()).await;
    assert_eq!(report.ending, Ending::Goal, "{report:?}");
    assert_eq!(report.summary, "DONE: I saw it.");
    assert_eq!(link.sent_tools(), ["vision"], "malformed and unknown calls are not sent");
    let bodies = endpoint.await.unwrap();
    assert_eq!(bodies.len(), 3);
    // Tools from the manifest, as functions with their schemas.
    let names: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["vision", "move", "stop", "place_object"]);
    assert_eq!(bodies[0]["model"], "test-model");
    assert_eq!(bodies[0]["tools"][0]["function"]["parameters"], json!({ "type": "object" }));
    // The picture came back as an image part, its result as a tool message.
    let messages = bodies[1]["messages"].as_array().unwrap();
    let tool_message = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool_message["tool_call_id"], "call_a");
    let last = messages.last().unwrap();
    let image = last["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "image_url")
        .expect("an image part");
    assert_eq!(image["image_url"]["url"], "data:image/jpeg;base64,AAAA");
    // The malformed arguments and the unknown tool were answered with their errors.
    let answers: Vec<Value> = bodies[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(answers.len(), 3);
    assert_eq!(
        (answers[1]["id"].as_str(), answers[1]["error"]["code"].as_str()),
        (Some("call_b"), Some("invalid_input"))
    );
    assert_eq!(
        (answers[2]["id"].as_str(), answers[2]["error"]["code"].as_str()),
        (Some("call_c"), Some("tool_unknown"))
    );
}
