//! The runner against a scripted local TCP peer: a well-behaved one passes
//! a scenario using most step kinds; each protocol violation fails the
//! scenario naming the scenario, the step and what was wrong.
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use super::*;
use crate::conformance::scenario::parse;

/// What the peer answers to one line, and whether it then hangs up.
struct Reply {
    lines: Vec<String>,
    close: bool,
}

fn reply(lines: Vec<Value>) -> Reply {
    Reply { lines: lines.iter().map(Value::to_string).collect(), close: false }
}

type Script = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

fn session_init(in_reply_to: Option<&str>) -> Value {
    json!({
        "protocol": "aicc/0.1", "type": "session_init", "session_id": "s-1", "message_id": "m-0", "in_reply_to": in_reply_to,
        "tick_rate_hz": 10.0, "tick_mode": "fixed",
        "tools": [{ "id": "probe", "class": "sensor", "input_schema": { "type": "object", "$schema": "x" }, "limits": { "calls_per_minute": 3 } }],
        "meta": { "tick": 1 },
    })
}

/// Listens on a free loopback port; greets every connection with a
/// session_init when `greet`, then answers each line by `script`.
async fn scripted_peer(greet: bool, script: Script) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, greet, script.clone()));
        }
    });
    port
}

/// One connection of a scripted peer.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    stream: S,
    greet: bool,
    script: Script,
) {
    let (read, mut write) = tokio::io::split(stream);
    if greet && write.write_all(format!("{}\n", session_init(None)).as_bytes()).await.is_err() {
        return;
    }
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let message = serde_json::from_str(&line).unwrap_or_else(|_| json!({ "raw": line }));
        let answer = script(&message);
        for line in answer.lines {
            if write.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                return;
            }
        }
        if answer.close {
            return;
        }
    }
}

/// A well-behaved bridge: results echo the input, heartbeats are answered,
/// a subscription brings two tick events, session_close closes.
fn good_bridge(message: &Value) -> Reply {
    let kind = message["type"].as_str().unwrap_or("");
    let message_id = message["message_id"].clone();
    match kind {
        "tool_call" => reply(vec![json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": message["call_id"], "ok": true, "output": { "reading": 42, "echo": message["input"] }, "meta": { "tick": 2 } })]),
        "heartbeat" => reply(vec![json!({ "protocol": "aicc/0.1", "type": "heartbeat", "in_reply_to": message_id })]),
        "manifest_request" => reply(vec![
            json!({ "protocol": "aicc/0.1", "type": "event", "topic": "tick", "payload": { "n": 1 }, "meta": { "tick": 3, "seq": 1 } }),
            json!({ "protocol": "aicc/0.1", "type": "event", "topic": "tick", "payload": { "n": 2 }, "meta": { "tick": 4, "seq": 2 } }),
            session_init(message_id.as_str()),
        ]),
        "session_close" => Reply { lines: vec![json!({ "protocol": "aicc/0.1", "type": "session_close", "in_reply_to": message_id }).to_string()], close: true },
        _ => reply(vec![json!({ "protocol": "aicc/0.1", "type": "error", "code": "invalid_input", "retryable": false, "message": format!("unknown: {message}") })]),
    }
}

fn options(port: u16, token: Option<&str>) -> RunnerOptions {
    let source = |env: &str, value: Option<&str>| TokenSource {
        env: env.into(),
        value: value.map(str::to_string),
    };
    RunnerOptions {
        endpoint: Endpoint { host: "127.0.0.1".into(), port, tls: None },
        max_line_bytes: 4096,
        admin: source("AICC_OPERATOR_TOKEN", token),
        actuate: source("AICC_TOKEN", None),
        observe: source("AICC_OBSERVE_TOKEN", None),
        close_wait: DEFAULT_CLOSE_WAIT,
        truth: None,
    }
}

fn scenario(steps: &str) -> Scenario {
    let text = format!("name: probe_call\narea: protocol\nchecks: test\ndescription: test\nrobot: none\ntimeout_s: 10\nsteps:\n{steps}");
    parse(Path::new("test.yaml"), &text).unwrap_or_else(|e| panic!("{e}"))
}

async fn run(script: Script, steps: &str) -> ScenarioResult {
    let port = scripted_peer(true, script).await;
    run_scenario(&scenario(steps), Path::new("test.yaml"), &options(port, None)).await
}

const CALL_PROBE: &str =
    "  - name: call the probe\n    call: {tool: probe, input: {}}\n    expect_ok: {reading: 42}\n";

#[tokio::test]
async fn a_well_behaved_bridge_passes_a_scenario_of_every_step_kind() {
    let steps = r#"
  - name: call with a variable
    call: {tool: probe, input: {n: "${tools.probe.limits.calls_per_minute}"}}
    expect_ok: {reading: 42, echo: {n: 3}}
    capture: {first: output.reading}
  - repeat:
      times: "${tools.probe.limits.calls_per_minute}"
      steps:
        - call: {tool: probe, input: {}}
          expect: {ok: true, output: {reading: "${first}"}, call_id: "${last_call_id}"}
  - call: {tool: probe, call_id: later, wait: false}
  - expect: {type: tool_result, call_id: later}
  - send: {type: manifest_request, subscribe: [tick]}
  - expect_event: {topic: tick, payload: {n: 1}}
    capture: {seq1: meta.seq}
  - expect: {type: event, meta: {seq: {$gt: "${seq1}"}}}
  - expect: {type: session_init, in_reply_to: {$type: string}, session_id: "${session_id}", tools: "${manifest.tools}"}
  - expect_none: {type: event}
    for_s: 0.2
  - connect: {name: second}
  - send: {type: heartbeat, message_id: hb}
    conn: second
  - expect: {type: heartbeat, in_reply_to: hb}
    conn: second
  - expect_closed: false
  - send: {type: session_close}
  - expect: {type: session_close}
  - expect_closed: true
  - disconnect: second
"#;
    let result = run(Arc::new(good_bridge), steps).await;
    assert_eq!(
        result.status,
        Status::Passed,
        "{:?}\n{:#?}",
        result.failure_message(),
        result.transcript
    );
}

async fn failing(script: Script, steps: &str) -> String {
    let result = run(script, steps).await;
    assert_eq!(result.status, Status::Failed, "should have failed");
    assert!(!result.transcript.is_empty(), "a failure keeps the transcript tail");
    result.failure_message().unwrap()
}

fn on_call(answer: impl Fn(&Value) -> Vec<String> + Send + Sync + 'static) -> Script {
    Arc::new(move |message: &Value| {
        if message["type"] == "tool_call" {
            Reply { lines: answer(message), close: false }
        } else {
            good_bridge(message)
        }
    })
}

#[tokio::test]
async fn a_malformed_reply_fails_the_step_naming_scenario_and_step() {
    let reason =
        failing(on_call(|_| vec!["{\"protocol\":\"aicc/0.1\",\"type\":".into()]), CALL_PROBE).await;
    assert!(reason.starts_with("scenario 'probe_call', step 1 \"call the probe\": the bridge broke the protocol on 'main': line is not valid JSON"), "{reason}");
}

#[tokio::test]
async fn a_result_for_a_call_never_made_fails() {
    let reason = failing(on_call(|_| vec![json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": "someone-else", "ok": true, "output": {} }).to_string()]), CALL_PROBE).await;
    assert!(
        reason.starts_with("scenario 'probe_call', step 1 \"call the probe\": ")
            && reason.contains("call_id 'someone-else', which was never sent on this connection"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_repeated_result_fails() {
    let answer = |m: &Value| {
        let line = json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": m["call_id"], "ok": true, "output": { "reading": 42 } }).to_string();
        vec![line.clone(), line]
    };
    let reason =
        failing(on_call(answer), &format!("{CALL_PROBE}  - name: linger\n    wait_s: 0.3\n")).await;
    assert!(
        reason.contains("step 2 \"linger\"") && reason.contains("already answered"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_result_with_both_output_and_error_fails() {
    let reason = failing(on_call(|m| vec![json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": m["call_id"], "ok": true, "output": {}, "error": { "code": "timeout", "retryable": true, "message": "x" } }).to_string()]), CALL_PROBE).await;
    assert!(
        reason.starts_with("scenario 'probe_call', step 1 \"call the probe\": ")
            && reason.contains("has both output and error"),
        "{reason}"
    );
}

#[tokio::test]
async fn an_oversized_line_fails() {
    let reason = failing(
        on_call(|_| {
            vec![format!(
                "{{\"protocol\":\"aicc/0.1\",\"type\":\"heartbeat\",\"pad\":\"{}\"}}",
                "x".repeat(5000)
            )]
        }),
        CALL_PROBE,
    )
    .await;
    assert!(
        reason.starts_with("scenario 'probe_call', step 1 \"call the probe\": ")
            && reason.contains("longer than 4096 bytes"),
        "{reason}"
    );
}

#[tokio::test]
async fn ticks_going_backwards_fail() {
    let answer = |m: &Value| {
        vec![
            json!({ "protocol": "aicc/0.1", "type": "event", "topic": "command", "payload": {}, "meta": { "tick": 9, "seq": 1 } }).to_string(),
            json!({ "protocol": "aicc/0.1", "type": "event", "topic": "command", "payload": {}, "meta": { "tick": 8, "seq": 2 } }).to_string(),
            json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": m["call_id"], "ok": true, "output": { "reading": 42 } }).to_string(),
        ]
    };
    let reason = failing(on_call(answer), CALL_PROBE).await;
    assert!(
        reason.contains("step 1 \"call the probe\"") && reason.contains("ticks went backwards"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_mismatch_says_where_and_what_came() {
    let reason = failing(
        Arc::new(good_bridge),
        "  - name: call the probe\n    call: {tool: probe}\n    expect_ok: {reading: 41}\n",
    )
    .await;
    assert!(reason.contains("does not match: at reading: expected 41, got 42"), "{reason}");
    let reason = failing(
        Arc::new(good_bridge),
        "  - call: {tool: probe}\n    expect_error: {code: tool_unknown}\n",
    )
    .await;
    assert!(
        reason.contains("step 1: call") && reason.contains("was to fail, but it succeeded"),
        "{reason}"
    );
}

#[tokio::test]
async fn silence_times_out_with_the_nearest_message() {
    let silent: Script =
        Arc::new(
            |message: &Value| {
                if message["type"] == "tool_call" {
                    reply(vec![])
                } else {
                    good_bridge(message)
                }
            },
        );
    let steps = "  - send: {type: heartbeat, message_id: hb}\n  - name: wait for nothing\n    call: {tool: probe}\n    within_s: 0.3\n";
    let reason = failing(silent, steps).await;
    assert!(
        reason.contains("step 2 \"wait for nothing\"")
            && reason.contains("within 0.3 s")
            && reason.contains("nearest: {")
            && reason.contains("\"in_reply_to\":\"hb\""),
        "{reason}"
    );
}

#[tokio::test]
async fn repeats_name_the_repetition_and_unknown_variables_are_named() {
    let steps = "  - name: loop\n    repeat:\n      times: 2\n      steps:\n        - name: inner\n          expect: {type: tool_result, x: \"${nowhere}\"}\n";
    let reason = failing(Arc::new(good_bridge), steps).await;
    assert!(
        reason.contains(
            "step 1.1 \"loop › inner\": (repetition 1 of 2) variable '${nowhere}' is not set"
        ),
        "{reason}"
    );
}

#[tokio::test]
async fn a_needed_token_variable_that_is_unset_fails_naming_it() {
    let reason =
        failing(Arc::new(good_bridge), "  - connect: {name: watcher, scope: observe}\n").await;
    assert!(
        reason.contains("needs the environment variable AICC_OBSERVE_TOKEN, which is not set"),
        "{reason}"
    );
}

#[tokio::test]
async fn with_a_token_the_handshake_authenticates_and_the_token_is_never_shown() {
    let token = "s3cret-for-the-test";
    let script: Script = Arc::new(move |message: &Value| {
        if message["type"] == "manifest_request" && message.get("subscribe").is_none() {
            if message["auth"]["token"] == token {
                return reply(vec![session_init(message["message_id"].as_str())]);
            }
            return reply(vec![
                json!({ "protocol": "aicc/0.1", "type": "error", "code": "invalid_input", "retryable": false, "message": "authentication failed" }),
            ]);
        }
        good_bridge(message)
    });
    let port = scripted_peer(false, script).await;
    let steps = "  - expect: {type: nothing_like_this}\n    within_s: 0.2\n";
    let result =
        run_scenario(&scenario(steps), Path::new("test.yaml"), &options(port, Some(token))).await;
    let reason = result.failure_message().unwrap();
    assert!(reason.contains("step 1:"), "the handshake passed, the step failed: {reason}");
    let transcript = result.transcript.join("\n");
    assert!(
        transcript.contains("\"token\":\"<token>\"") && !transcript.contains(token),
        "{transcript}"
    );

    let result =
        run_scenario(&scenario(steps), Path::new("test.yaml"), &options(port, Some("wrong"))).await;
    let reason = result.failure_message().unwrap();
    assert!(
        reason.contains("opening connection 'main'")
            && reason
                .contains("handshake refused by the bridge: invalid_input authentication failed"),
        "{reason}"
    );
}

#[tokio::test]
async fn the_scenario_timeout_names_the_step_it_cut() {
    let mut quick = scenario("  - name: sit\n    wait_s: 5\n");
    quick.timeout_s = 0.3;
    let port = scripted_peer(true, Arc::new(good_bridge)).await;
    let result = run_scenario(&quick, Path::new("test.yaml"), &options(port, None)).await;
    let reason = result.failure_message().unwrap();
    assert!(
        reason.contains("step 1 \"sit\": the scenario's timeout_s (0.3 s) ran out"),
        "{reason}"
    );
}

#[test]
fn oversized_lines_have_the_asked_length_and_look_like_json() {
    let line = oversized_line(1000);
    assert_eq!(line.len(), 1000);
    assert!(line.starts_with(b"{\"protocol\":\"aicc/0.1\"") && line.ends_with(b"\"}"));
    assert!(serde_json::from_slice::<Value>(&line).is_ok());
}

#[tokio::test]
async fn a_long_write_keeps_reading_a_bridge_that_writes_before_it_reads() {
    // A peer that sends megabytes of events before it reads anything: the
    // runner's write must not wait on it while its own reading is stalled.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, mut write) = stream.into_split();
        write.write_all(format!("{}\n", session_init(None)).as_bytes()).await.unwrap();
        let padding = "p".repeat(1000);
        for n in 0..5000 {
            let event = json!({ "protocol": "aicc/0.1", "type": "event", "topic": "audio", "payload": { "n": n, "padding": padding }, "meta": { "tick": n } });
            write.write_all(format!("{event}\n").as_bytes()).await.unwrap();
        }
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(_)) = lines.next_line().await {}
    });
    let steps = "  - name: a long line\n    send_oversized: {bytes: 8000000}\n    within_s: 20\n  - expect_event: {topic: audio, payload: {n: 4999}}\n";
    let result = run_scenario(&scenario(steps), Path::new("test.yaml"), &options(port, None)).await;
    assert_eq!(result.status, Status::Passed, "{:?}", result.failure_message());
}

#[tokio::test]
async fn tls_endpoints_are_spoken_to_through_rustls_and_their_certificate_is_checked() {
    let dir = std::env::temp_dir().join(format!("aicc-conformance-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    // A TLS server of the test's own: the runner imports nothing of the bridge.
    let acceptor = {
        use tokio_rustls::rustls::{
            self,
            pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
        };
        let key =
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(certified.cert.der().to_vec())], key)
        .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            if let Ok(tls) = acceptor.accept(stream).await {
                tokio::spawn(serve(tls, true, Arc::new(good_bridge)));
            }
        }
    });
    let with_name = |name: &str| RunnerOptions {
        endpoint: Endpoint {
            host: "127.0.0.1".into(),
            port,
            tls: Some(crate::conformance::connection::tls_client(&cert, name).unwrap()),
        },
        ..options(port, None)
    };
    let result =
        run_scenario(&scenario(CALL_PROBE), Path::new("test.yaml"), &with_name("localhost")).await;
    assert_eq!(result.status, Status::Passed, "{:?}", result.failure_message());
    let result = run_scenario(
        &scenario(CALL_PROBE),
        Path::new("test.yaml"),
        &with_name("elsewhere.example"),
    )
    .await;
    let reason = result.failure_message().unwrap();
    assert!(
        reason.contains("opening connection 'main'")
            && reason.contains("TLS handshake with tls://127.0.0.1"),
        "{reason}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bridge that sends a heartbeat of its own (no in_reply_to) when the
/// tool `beat` is called, and counts the agent's answers to it, which the
/// tool `answers` reports.
fn heartbeating_bridge() -> Script {
    let answers = Arc::new(std::sync::atomic::AtomicU64::new(0));
    Arc::new(move |message: &Value| {
        let count = || answers.load(std::sync::atomic::Ordering::SeqCst);
        match (message["type"].as_str(), message["tool"].as_str()) {
            (Some("tool_call"), Some("beat")) => reply(vec![
                json!({ "protocol": "aicc/0.1", "type": "heartbeat", "message_id": "bridge-heartbeat-1", "interval_s": 10.0, "meta": { "tick": 5 } }),
                json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": message["call_id"], "ok": true, "output": {} }),
            ]),
            (Some("tool_call"), Some("answers")) => reply(vec![
                json!({ "protocol": "aicc/0.1", "type": "tool_result", "call_id": message["call_id"], "ok": true, "output": { "answers": count() } }),
            ]),
            (Some("heartbeat"), _) if message["in_reply_to"] == "bridge-heartbeat-1" => {
                answers.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                good_bridge(message)
            }
            _ => good_bridge(message),
        }
    })
}

#[tokio::test]
async fn the_bridges_heartbeats_are_answered_on_every_connection_and_stay_expectable() {
    let steps = r#"
  - call: {tool: beat}
  - name: the bridge's heartbeat is still there for an expect
    expect: {type: heartbeat, message_id: bridge-heartbeat-1, in_reply_to: {$absent: true}}
  - name: the runner answered it before its next message
    call: {tool: answers}
    expect_ok: {answers: 1}
  - name: the bridge's echo of the runner's answer is the runner's own business
    expect_none: {type: heartbeat}
    for_s: 0
  - connect: {name: second}
  - call: {tool: beat}
    conn: second
  - call: {tool: answers}
    conn: second
    expect_ok: {answers: 2}
  - name: fail on purpose, to see the transcript
    expect: {type: nothing_like_this}
    within_s: 0
"#;
    let result = run(heartbeating_bridge(), steps).await;
    let reason = result.failure_message().unwrap();
    assert!(reason.contains("step 8 \"fail on purpose"), "every step before passed: {reason}");
    let transcript = result.transcript.join("\n");
    for conn in ["main", "second"] {
        let answer = format!("{conn}> {{\"in_reply_to\":\"bridge-heartbeat-1\",\"message_id\":\"conformance-heartbeat-");
        assert!(
            transcript.contains(&answer),
            "the answer on {conn} is in the transcript:\n{transcript}"
        );
    }
}

#[tokio::test]
async fn a_heartbeat_answer_on_a_connection_the_bridge_closed_is_not_a_failure() {
    // The bridge sends a heartbeat and hangs up at once.
    let script: Script = Arc::new(|message: &Value| {
        if message["type"] == "tool_call" {
            let heartbeat = json!({ "protocol": "aicc/0.1", "type": "heartbeat", "message_id": "last-words", "meta": { "tick": 5 } });
            return Reply { lines: vec![heartbeat.to_string()], close: true };
        }
        good_bridge(message)
    });
    let steps = r#"
  - call: {tool: probe, wait: false}
  - name: the bridge hangs up after its heartbeat
    expect_closed: true
  - connect: {name: second}
  - send: {type: heartbeat, message_id: hb}
    conn: second
  - expect: {type: heartbeat, in_reply_to: hb}
    conn: second
"#;
    let result = run(script, steps).await;
    assert_eq!(
        result.status,
        Status::Passed,
        "{:?}\n{:#?}",
        result.failure_message(),
        result.transcript
    );
}

/// A peer that notes when it has seen the runner's end of a connection
/// close, before it closes its own; or, when `hold` is set, keeps its end
/// open.
async fn peer_noting_closes(hold: bool) -> (u16, Arc<std::sync::atomic::AtomicU64>) {
    let seen_closed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let noted = seen_closed.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let noted = noted.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                write.write_all(format!("{}\n", session_init(None)).as_bytes()).await.unwrap();
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let message: Value = serde_json::from_str(&line).unwrap();
                    for line in good_bridge(&message).lines {
                        write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
                    }
                }
                noted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if hold {
                    std::future::pending::<()>().await;
                }
            });
        }
    });
    (port, seen_closed)
}

#[tokio::test]
async fn a_scenario_ends_once_the_bridge_has_closed_its_connections() {
    let (port, seen_closed) = peer_noting_closes(false).await;
    let steps = format!("{CALL_PROBE}  - connect: {{name: second}}\n");
    let result =
        run_scenario(&scenario(&steps), Path::new("test.yaml"), &options(port, None)).await;
    assert_eq!(result.status, Status::Passed, "{:?}", result.failure_message());
    assert_eq!(
        seen_closed.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "both connections were closed and the peer had seen it when the scenario ended"
    );
}

#[tokio::test]
async fn a_bridge_that_never_closes_does_not_hold_the_run() {
    let (port, seen_closed) = peer_noting_closes(true).await;
    let patient = RunnerOptions { close_wait: Duration::from_millis(200), ..options(port, None) };
    let result = run_scenario(&scenario(CALL_PROBE), Path::new("test.yaml"), &patient).await;
    assert_eq!(result.status, Status::Passed, "{:?}", result.failure_message());
    assert_eq!(
        seen_closed.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the runner closed its end"
    );
}

/// A survey of a profile that lists `probe` and `look_at`, without a
/// controller for `look_at`.
fn offered_without_a_head() -> Offered {
    let manifest = json!({ "tools": [{ "id": "probe" }, { "id": "look_at" }] });
    let reasons = json!({ "look_at": "no controller is configured for it" });
    Offered::from_manifest(&manifest, reasons.as_object().unwrap())
}

#[tokio::test]
async fn a_scenario_needing_a_tool_the_profile_lacks_is_skipped_without_connecting() {
    let (port, seen_closed) = peer_noting_closes(false).await;
    let steps = format!("{CALL_PROBE}  - call: {{tool: look_at, input: {{pan_deg: 10}}}}\n");
    let result = run_or_skip(
        &scenario(&steps),
        Path::new("test.yaml"),
        &options(port, None),
        &offered_without_a_head(),
    )
    .await;
    assert_eq!(result.status, Status::Skipped, "never passed");
    assert_eq!(result.skip_reason.as_deref(), Some("needs tool look_at (no controller is configured for it), which this profile does not offer"));
    assert!(result.failure.is_none());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        seen_closed.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "no connection was opened"
    );
    // A tool absent from the manifest, named in needs_tools, skips too.
    let listed = scenario(CALL_PROBE);
    let listed = Scenario { needs_tools: vec!["interact".into()], ..listed };
    let result = run_or_skip(
        &listed,
        Path::new("test.yaml"),
        &options(port, None),
        &offered_without_a_head(),
    )
    .await;
    assert_eq!(
        (result.status, result.skip_reason.as_deref()),
        (
            Status::Skipped,
            Some("needs tool interact (not in the manifest), which this profile does not offer")
        )
    );
}

#[tokio::test]
async fn a_scenario_the_profile_can_serve_runs_and_a_call_expecting_tool_unknown_needs_nothing() {
    let port = scripted_peer(true, Arc::new(good_bridge)).await;
    let result = run_or_skip(
        &scenario(CALL_PROBE),
        Path::new("test.yaml"),
        &options(port, None),
        &offered_without_a_head(),
    )
    .await;
    assert_eq!(result.status, Status::Passed, "{:?}", result.failure_message());
    // Without a survey (no manifest read), nothing is skipped: the call runs (and here fails).
    let steps =
        "  - call: {tool: look_at, input: {}}\n    expect_error: {code: tool_unavailable}\n";
    let result = run_or_skip(
        &scenario(steps),
        Path::new("test.yaml"),
        &options(port, None),
        &Offered::default(),
    )
    .await;
    assert_eq!(
        result.status,
        Status::Failed,
        "ran, and the good bridge's success is not the error expected"
    );
    let unknown = "  - call: {tool: look_at, input: {}}\n    expect_error: {code: tool_unknown}\n";
    assert!(scenario(unknown).needed_tools().is_empty());
}

/// A fake simulator's ground-truth channel: a hello naming low_box_1, then
/// a state line every 5 ms (the robot creeping toward the box; from
/// `contact_from` on its bumper touches it); acks every command, and
/// records them.
async fn fake_truth(contact_from: Option<u64>) -> (String, Arc<parking_lot::Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let commands = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = commands.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let (read, write) = stream.into_split();
                let write = Arc::new(tokio::sync::Mutex::new(write));
                let hello = json!({ "type": "hello", "profile": "sim", "joints": { "joint1": { "type": "revolute", "lower": -2.8, "upper": 2.8, "velocity": 4.8, "effort": 4.1, "mimic": null } },
                    "objects": { "low_box_1": { "shape": "box", "size": [0.2, 0.36, 0.1], "color": "orange", "movable": false } }, "room": { "half_size_m": 2.0 } });
                write.lock().await.write_all(format!("{hello}\n").as_bytes()).await.unwrap();
                let acks = write.clone();
                tokio::spawn(async move {
                    let mut lines = BufReader::new(read).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let command: Value = serde_json::from_str(&line).unwrap();
                        seen.lock().push(command.clone());
                        let ack =
                            json!({ "type": "ack", "id": command["id"], "ok": true, "seq": 1 });
                        if acks.lock().await.write_all(format!("{ack}\n").as_bytes()).await.is_err()
                        {
                            return;
                        }
                    }
                });
                for seq in 1u64.. {
                    let x = (0.001 * seq as f64).min(0.5);
                    let contacts = if contact_from.is_some_and(|c| seq >= c) {
                        json!([{ "robot_geom": "bumper_collision", "robot_body": "bumper_link", "world_geom": "low_box_1", "world_body": "low_box_1", "first_time": 0.0, "last_time": 0.0, "max_depth_m": 0.001, "max_force_n": 2.0 }])
                    } else {
                        json!([])
                    };
                    let state = json!({ "type": "state", "seq": seq, "sim_time": seq as f64 * 0.02,
                        "base": { "x": x, "y": 0.0, "z": 0.0, "roll": 0.0, "pitch": 0.0, "yaw": 0.0, "linear_mps": [0.05, 0.0, 0.0], "angular_radps": [0.0, 0.0, 0.0] },
                        "odom": { "x": x, "y": 0.0, "yaw": 0.0 }, "joints": { "joint1": { "position": 0.0, "velocity": 0.1, "effort": 0.0, "demand_velocity": 0.0 } },
                        "objects": { "low_box_1": { "x": 1.0, "y": 0.0, "z": 0.05, "yaw": 0.0 } }, "contacts": contacts });
                    if write.lock().await.write_all(format!("{state}\n").as_bytes()).await.is_err()
                    {
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            });
        }
    });
    (address, commands)
}

fn truth_scenario(always: &str, steps: &str) -> Scenario {
    let text = format!(
        "name: low_box\narea: adversarial\nchecks: test\ndescription: test\nrobot: moves\ntimeout_s: 10\ntruth:\n  scene: {{robot: {{x_m: 0, y_m: 0}}, clear: true, objects: [{{object: low_box_1, ahead_m: 1.0}}]}}\n  settle_s: 0.1\n  always: {always}\nsteps:\n{steps}"
    );
    parse(Path::new("adversarial/01_low_box.yaml"), &text).unwrap_or_else(|e| panic!("{e}"))
}

const CREEP_STEPS: &str = "  - name: creeping\n    truth_expect: {travel: {ahead_m: {$gte: 0.02}}, clearance_m: {low_box_1: {$lte: 0.88}}}\n    capture: {near: clearance_m.low_box_1}\n  - call: {tool: probe, input: {}}\n";

#[tokio::test]
async fn a_truth_scenario_sets_its_scene_matches_samples_and_resets_the_world() {
    let port = scripted_peer(true, Arc::new(good_bridge)).await;
    let (address, commands) = fake_truth(None).await;
    let scenario = truth_scenario(
        "{no_contact: true, min_clearance_m: {low_box_1: 0.2}, joint_speed_factor: 1.1}",
        CREEP_STEPS,
    );
    assert!(scenario.needs_truth());
    assert_eq!(scenario.needed_objects().into_iter().collect::<Vec<_>>(), ["low_box_1"]);
    let options = RunnerOptions { truth: Some(address), ..options(port, None) };
    let result = run_scenario(&scenario, Path::new("adversarial/01_low_box.yaml"), &options).await;
    assert_eq!(result.status, Status::Passed, "{:?}", result.failure);
    let truth = result.truth.expect("figures");
    assert!(truth["samples"].as_u64().unwrap() > 1, "{truth}");
    assert!(truth["min_clearance_m"]["low_box_1"].as_f64().unwrap() < 0.9, "{truth}");
    assert_eq!(truth["worst_joint_speed"]["joint"], "joint1", "{truth}");
    let commands = commands.lock().clone();
    assert!(
        commands[0]["scene"]["objects"][0]["object"] == "low_box_1",
        "the scene first: {commands:?}"
    );
    assert_eq!(
        commands.last().unwrap()["reset_world"],
        true,
        "the world reset at the end: {commands:?}"
    );
}

#[tokio::test]
async fn a_contact_on_the_ground_truth_fails_the_step_it_happened_in() {
    let port = scripted_peer(true, Arc::new(good_bridge)).await;
    let (address, _) = fake_truth(Some(100)).await;
    let scenario = truth_scenario(
        "{no_contact: true}",
        "  - name: a while\n    wait_s: 1.5\n  - call: {tool: probe, input: {}}\n",
    );
    let options = RunnerOptions { truth: Some(address), ..options(port, None) };
    let result = run_scenario(&scenario, Path::new("adversarial/01_low_box.yaml"), &options).await;
    assert_eq!(result.status, Status::Failed);
    let failure = result.failure.unwrap();
    assert_eq!(failure.step.as_deref(), Some("1"), "{failure:?}");
    assert!(
        failure.reason.contains("ground truth: contact")
            && failure.reason.contains("bumper_collision")
            && failure.reason.contains("low_box_1"),
        "{}",
        failure.reason
    );
    assert_eq!(result.truth.unwrap()["violations"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_truth_scenario_is_skipped_without_the_ground_truth_or_its_objects() {
    let port = scripted_peer(true, Arc::new(good_bridge)).await;
    let scenario = truth_scenario("{no_contact: true}", CREEP_STEPS);
    let result =
        run_or_skip(&scenario, Path::new("x.yaml"), &options(port, None), &Offered::default())
            .await;
    assert_eq!(result.status, Status::Skipped);
    assert!(result.skip_reason.unwrap().contains("--truth"));
    let (address, _) = fake_truth(None).await;
    let other = truth_scenario("{min_clearance_m: {low_box_9: 0.2}}", CREEP_STEPS);
    let options = RunnerOptions { truth: Some(address), ..options(port, None) };
    let result = run_or_skip(&other, Path::new("x.yaml"), &options, &Offered::default()).await;
    assert_eq!(result.status, Status::Skipped);
    assert!(result.skip_reason.unwrap().contains("low_box_9"));
}

#[tokio::test]
async fn a_truth_expectation_that_never_holds_names_the_nearest_sample() {
    let port = scripted_peer(true, Arc::new(good_bridge)).await;
    let (address, _) = fake_truth(None).await;
    let scenario = truth_scenario("{}", "  - truth_expect: {at_rest: true}\n    within_s: 0.3\n");
    let options = RunnerOptions { truth: Some(address), ..options(port, None) };
    let result = run_scenario(&scenario, Path::new("x.yaml"), &options).await;
    let reason = result.failure.unwrap().reason;
    assert!(
        reason.contains("no ground-truth sample matched within 0.3 s")
            && reason.contains("at_rest"),
        "{reason}"
    );
}
