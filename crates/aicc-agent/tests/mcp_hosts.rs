//! `aicc mcp` driven by an MCP host we did not write: the official MCP
//! Python SDK (tests/mcp/host.py), over stdio and over streamable HTTP,
//! against the whole bridge in-process on a test robot that moves (see
//! support). The host reports what it saw; this checks it, and checks the
//! robot's own pose and last published velocity.
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read as _, Write as _};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
use support::MovingBridge;

const HOST_TIME_LIMIT: Duration = Duration::from_secs(120);

/// Runs the host to its end; answers its waits by switching the camera.
fn run_host(mut command: Command, bridge: &MovingBridge) -> HashMap<String, Value> {
    let mut host = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the Python host starts");
    let killer = watchdog(host.id());
    let mut stdin = host.stdin.take().unwrap();
    let mut steps = HashMap::new();
    for line in BufReader::new(host.stdout.take().unwrap()).lines() {
        let line = line.expect("the host's output");
        let Ok(step) = serde_json::from_str::<Value>(&line) else {
            panic!("not a JSON line from the host: {line}")
        };
        match step.get("wait").and_then(Value::as_str) {
            Some("stop_camera") => bridge.camera_on.store(false, Ordering::Relaxed),
            Some("start_camera") => bridge.camera_on.store(true, Ordering::Relaxed),
            Some(other) => panic!("the host waits for {other}"),
            None => {
                steps.insert(step["step"].as_str().unwrap().to_string(), step);
                continue;
            }
        }
        writeln!(stdin, "go").unwrap();
    }
    let status = host.wait().unwrap();
    drop(killer);
    assert!(
        status.success(),
        "the host failed ({status}); it got as far as {:?}",
        steps.keys().collect::<Vec<_>>()
    );
    assert!(
        steps.contains_key("done"),
        "the host did not finish: {:?}",
        steps.keys().collect::<Vec<_>>()
    );
    steps
}

/// Kills the host if it runs past the limit (a hung host must not hang CI).
fn watchdog(pid: u32) -> std::sync::mpsc::Sender<()> {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(HOST_TIME_LIMIT)
        {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    });
    done
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The image content of a result, decoded; checks its MIME type.
fn picture(result: &Value, mime_type: &str) -> image::DynamicImage {
    let content = result["content"].as_array().unwrap();
    let image = content
        .iter()
        .find(|c| c["type"] == "image")
        .unwrap_or_else(|| panic!("no image content: {result}"));
    assert_eq!(image["mimeType"], mime_type);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(image["data"].as_str().unwrap())
        .expect("standard base64");
    image::load_from_memory(&bytes).expect("a picture that decodes")
}

fn tool<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("no tool {name}"))
}

/// What every transport must show: handshake, tools, sensors, errors, a move.
fn check_common(steps: &HashMap<String, Value>, bridge: &MovingBridge) {
    let init = &steps["initialize"];
    assert_eq!(
        (init["protocol_version"].as_str(), init["server"].as_str()),
        (Some("2025-11-25"), Some("aicc-mcp")),
        "{init}"
    );
    assert_eq!(init["capabilities"]["tools"]["listChanged"], true, "{init}");

    let tools = steps["tools"]["tools"].as_array().unwrap();
    assert_eq!(
        steps["tools"]["schema_errors"],
        serde_json::json!([]),
        "every schema is a valid JSON Schema"
    );
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for wanted in ["proprioception", "vision", "depth", "move", "turn", "events"] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
    assert!(!names.contains(&"cancel"), "MCP cancels with notifications/cancelled");
    assert!(
        tools.iter().all(|t| t["inputSchema"]["type"] == "object"),
        "every inputSchema is an object schema"
    );
    assert_eq!(tool(tools, "proprioception")["annotations"]["readOnlyHint"], true);
    let drive = &tool(tools, "move")["annotations"];
    assert_eq!(
        (drive["readOnlyHint"].as_bool(), drive["destructiveHint"].as_bool()),
        (Some(false), Some(true)),
        "{drive}"
    );
    assert!(tool(tools, "vision")["outputSchema"]["properties"].get("jpeg_b64").is_none());

    let proprioception = &steps["proprioception"]["result"];
    assert_eq!(proprioception["isError"], false, "{proprioception}");
    assert!(
        proprioception["structuredContent"].is_object()
            && proprioception["_meta"]["aicc"]["tick"].is_u64(),
        "{proprioception}"
    );

    let vision = &steps["vision"]["result"];
    let structured = &vision["structuredContent"];
    let decoded = picture(vision, "image/png").into_rgb8();
    assert_eq!(
        (u64::from(decoded.width()), u64::from(decoded.height())),
        (structured["width"].as_u64().unwrap(), structured["height"].as_u64().unwrap()),
        "the picture has the stated size"
    );
    assert_eq!(decoded.dimensions(), (64, 48), "shrunk to max_width 64, aspect kept");
    assert!(
        decoded.get_pixel(2, 24)[0] > 150 && decoded.get_pixel(61, 24)[2] > 150,
        "the camera's picture: red left, blue right"
    );
    assert_eq!(structured["frame_id"], "camera_optical_frame");
    assert!(
        structured["age_ms"].is_number() && structured.get("png_b64").is_none(),
        "{structured}"
    );

    let depth = &steps["depth"]["result"];
    let depth_picture = picture(depth, "image/png");
    assert_eq!(depth["isError"], false, "{depth}");
    assert_eq!(
        u64::from(depth_picture.width()),
        depth["structuredContent"]["width"].as_u64().unwrap_or(16),
        "{depth}"
    );

    let invalid = &steps["invalid_input"]["result"];
    assert_eq!(
        (invalid["isError"].as_bool(), invalid["structuredContent"]["error"]["code"].as_str()),
        (Some(true), Some("invalid_input")),
        "{invalid}"
    );
    assert!(
        text_of(invalid).contains("forward"),
        "the error names the field: {}",
        text_of(invalid)
    );
    let unknown = &steps["unknown_tool"];
    assert!(
        unknown["error"].as_str().is_some_and(|e| e.contains("teleport")),
        "an unknown tool is a JSON-RPC error naming it: {unknown}"
    );

    let moved = &steps["move"];
    assert_eq!(moved["result"]["isError"], false, "{moved}");
    let travelled = moved["x_after"].as_f64().unwrap() - moved["x_before"].as_f64().unwrap();
    assert!(
        (travelled - 0.3).abs() < 0.03,
        "proprioception says the robot moved {travelled} m, not 0.3"
    );
    let progress: Vec<f64> = moved["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(progress.len() >= 3, "progress notifications came during the move: {progress:?}");
    assert!(progress.windows(2).all(|w| w[1] > w[0]), "progress only increases: {progress:?}");
    let last = moved["progress"].as_array().unwrap().last().unwrap();
    assert!(
        (last["total"].as_f64().unwrap() - 0.3).abs() < 0.01,
        "the total is the move's distance: {last}"
    );
    assert_eq!(bridge.last_velocity().map(|(v, _)| v), Some(0.0), "the base was left stopped");
}

#[test]
fn an_mcp_host_over_stdio_drives_observes_cancels_and_hears_of_changes() {
    let bridge = support::start(support::config(0.6));
    let mut command = Command::new(support::mcp_python());
    command
        .arg(support::host_script())
        .args(["stdio", "--steps", "full", "--"])
        .arg(env!("CARGO_BIN_EXE_aicc"))
        .args(["--port", &bridge.port.to_string(), "mcp"]);
    let started = Instant::now();
    let steps = run_host(command, &bridge);
    eprintln!("stdio host ran for {:.1} s", started.elapsed().as_secs_f64());
    check_common(&steps, &bridge);

    let cancel = &steps["cancel"];
    assert_eq!(cancel["finished_before_cancel"], false, "{cancel}");
    let before = cancel["x_before"].as_f64().unwrap();
    let at_cancel = cancel["x_after_cancel"].as_f64().unwrap() - before;
    let later = cancel["x_later"].as_f64().unwrap() - before;
    assert!((0.1..1.0).contains(&at_cancel), "cancelled after {at_cancel} m of a 1.5 m move");
    assert!((later - at_cancel).abs() < 0.01, "the robot stopped: {at_cancel} m, then {later} m");
    assert_eq!(bridge.last_velocity().map(|(v, _)| v), Some(0.0));

    let events = &steps["events"];
    let first = &events["first"]["structuredContent"];
    let topics: Vec<&str> =
        first["events"].as_array().unwrap().iter().filter_map(|e| e["topic"].as_str()).collect();
    assert!(topics.contains(&"command"), "the moves' command events are there: {topics:?}");
    assert!(
        first["next"].as_u64().unwrap() >= topics.len() as u64 && first["dropped"] == 0,
        "{first}"
    );
    assert_eq!(
        events["bad"]["structuredContent"]["error"]["code"], "invalid_input",
        "{}",
        events["bad"]
    );
    assert!(text_of(&events["bad"]).contains("input.since"));

    let resource = &steps["resource"];
    let read: Value =
        serde_json::from_str(resource["read"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert!(!read["events"].as_array().unwrap().is_empty(), "{read}");
    assert_eq!(resource["updated"], true, "a subscriber hears of new events");

    let changed = &steps["list_changed"];
    assert_eq!(
        (changed["first"].as_bool(), changed["second"].as_bool()),
        (Some(true), Some(true)),
        "{changed}"
    );
    let without: Vec<&str> = changed["tools_without_camera"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let with: Vec<&str> =
        changed["tools_with_camera"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(!without.contains(&"vision") && with.contains(&"vision"), "{without:?} / {with:?}");

    // The host is gone: its AICC session was closed with it.
    assert_eq!(connections_on(&bridge), 1, "only this check's own connection is left");
}

#[test]
fn an_mcp_host_over_streamable_http_with_a_bearer_token() {
    let bridge = support::start(support::config(2.0));
    let http_port = free_port();
    let token = "mcp-test-token-4f1c";
    let mut server = Command::new(env!("CARGO_BIN_EXE_aicc"))
        .args([
            "--port",
            &bridge.port.to_string(),
            "mcp",
            "--http",
            &format!("127.0.0.1:{http_port}"),
            "--http-token-env",
            "AICC_TEST_MCP_TOKEN",
        ])
        .env("AICC_TEST_MCP_TOKEN", token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("aicc mcp --http starts");
    let _server = KillOnDrop(&mut server);
    wait_for_port(http_port);
    let refused = raw_post(http_port, None);
    assert!(refused.starts_with("HTTP/1.1 401"), "no token, no entry: {refused}");
    let refused = raw_post(http_port, Some("wrong"));
    assert!(refused.starts_with("HTTP/1.1 401"), "a wrong token is refused: {refused}");

    let mut command = Command::new(support::mcp_python());
    command
        .arg(support::host_script())
        .args([
            "http",
            &format!("http://127.0.0.1:{http_port}/mcp"),
            "--steps",
            "basic",
            "--token-env",
            "AICC_TEST_MCP_TOKEN",
        ])
        .env("AICC_TEST_MCP_TOKEN", token);
    let started = Instant::now();
    let steps = run_host(command, &bridge);
    eprintln!("http host ran for {:.1} s", started.elapsed().as_secs_f64());
    check_common(&steps, &bridge);
    // The host ended its MCP session (DELETE): the AICC session went with it.
    assert_eq!(connections_on(&bridge), 1, "only this check's own connection is left");
}

struct KillOnDrop<'a>(&'a mut Child);

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "aicc mcp --http did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_adapter_holding_an_operators_token_offers_the_llm_no_operator_tool() {
    // The worst case: the adapter was given the operator's (admin) token.
    let bridge = support::start_with_tokens(
        support::config(2.0),
        &[("AICC_OPERATOR_TOKEN", "mcp-operator-token-77e2")],
    );
    let mut command = Command::new(support::mcp_python());
    command
        .arg(support::host_script())
        .args(["stdio", "--steps", "tools", "--"])
        .arg(env!("CARGO_BIN_EXE_aicc"))
        .args(["--port", &bridge.port.to_string(), "--token-env", "AICC_TEST_ADMIN_TOKEN", "mcp"])
        .env("AICC_TEST_ADMIN_TOKEN", "mcp-operator-token-77e2");
    let steps = run_host(command, &bridge);
    let names: Vec<&str> = steps["tools"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    println!("tools/list of an adapter with an admin token: {names:?}");
    for withheld in [
        "approve",
        "deny",
        "approval_mode",
        "approvals_list",
        "hold",
        "record_start",
        "record_stop",
        "place_object",
    ] {
        assert!(!names.contains(&withheld), "{withheld} offered to the LLM: {names:?}");
    }
    assert!(names.contains(&"move") && names.contains(&"stop"), "{names:?}");
    for (tool, error) in steps["withheld"]["refused"].as_object().unwrap() {
        assert!(
            error.as_str().is_some_and(|e| e.contains("unknown tool")),
            "calling {tool} by name: {error}"
        );
    }
}

#[test]
fn mcp_over_http_needs_a_bearer_token_on_loopback_too() {
    let bridge = support::start(support::config(2.0));
    let output = Command::new(env!("CARGO_BIN_EXE_aicc"))
        .args([
            "--port",
            &bridge.port.to_string(),
            "mcp",
            "--http",
            &format!("127.0.0.1:{}", free_port()),
            "--http-token-env",
            "AICC_TEST_UNSET_MCP_TOKEN",
        ])
        .env_remove("AICC_TEST_UNSET_MCP_TOKEN")
        .output()
        .expect("running aicc mcp --http");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "refused as a usage error: {stderr}");
    assert!(
        stderr.contains("AICC_TEST_UNSET_MCP_TOKEN") && stderr.contains("loopback too"),
        "{stderr}"
    );
}

/// An initialize POST by hand; returns the response's head.
fn raw_post(port: u16, token: Option<&str>) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.lines().next().unwrap_or("").to_string()
}

/// The bridge's connection count, asked over a connection of its own.
fn connections_on(bridge: &MovingBridge) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let stream = aicc_agent::client::transport::connect(
                "127.0.0.1",
                bridge.port,
                None,
                Duration::from_secs(5),
            )
            .await
            .unwrap();
            let mut session =
                aicc_agent::client::Session::open(stream, Default::default()).await.unwrap();
            let status = session.call("bridge_status", &serde_json::json!({})).await.unwrap();
            let connections = status.output["connections"].as_u64().unwrap();
            let _ = session.close().await;
            if connections == 1 || Instant::now() > deadline {
                return connections;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// `aicc mcp` over stdio with raw lines, for what no SDK sends.
struct RawStdio {
    child: Child,
    input: std::process::ChildStdin,
    output: std::sync::mpsc::Receiver<Value>,
}

impl RawStdio {
    fn start(bridge_port: u16) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_aicc"))
            .args(["--port", &bridge_port.to_string(), "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("aicc mcp starts");
        let input = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, output) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let message = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("aicc mcp wrote a line that is not JSON: {line}"));
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        Self { child, input, output }
    }

    fn send(&mut self, line: &str) {
        let _ = writeln!(self.input, "{line}").and_then(|_| self.input.flush());
    }

    /// The next message with `id`, within a few seconds.
    fn answer(&self, id: i64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let message = self
                .output
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("no answer to id {id}"));
            if message["id"] == id {
                return message;
            }
        }
    }
}

#[test]
fn malformed_unknown_and_oversized_requests_are_answered_or_end_the_session_cleanly() {
    let bridge = support::start(support::config(2.0));
    let mut mcp = RawStdio::start(bridge.port);
    mcp.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#);
    assert_eq!(mcp.answer(1)["result"]["serverInfo"]["name"], "aicc-mcp");
    mcp.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    mcp.send(r#"{"jsonrpc":"2.0","id":2,"method":"robots/fly","params":{}}"#);
    assert_eq!(mcp.answer(2)["error"]["code"], -32601, "an unknown method is METHOD_NOT_FOUND");
    mcp.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"teleport","arguments":{}}}"#);
    assert_eq!(mcp.answer(3)["error"]["code"], -32602, "an unknown tool is INVALID_PARAMS");
    mcp.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"move","arguments":{"forward":1e9}}}"#);
    let refused = mcp.answer(4);
    assert_eq!(
        (
            refused["result"]["isError"].as_bool(),
            refused["result"]["structuredContent"]["error"]["code"].as_str()
        ),
        (Some(true), Some("invalid_input")),
        "{refused}"
    );
    mcp.send("{this is not json");
    mcp.send(
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"proprioception"}}"#,
    );
    let after_garbage = mcp.answer(5);
    assert_eq!(
        after_garbage["result"]["isError"], false,
        "the session outlived a malformed line: {after_garbage}"
    );

    // A line of 8 MiB: answered, or the session ends; never a crash.
    mcp.send(&format!(r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"say","arguments":{{"text":"{}"}}}}}}"#, "a".repeat(8 << 20)));
    mcp.send(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut survived = false;
    while Instant::now() < deadline {
        match mcp.output.recv_timeout(Duration::from_millis(200)) {
            Ok(message) if message["id"] == 7 => {
                survived = true;
                break;
            }
            Ok(_) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    eprintln!(
        "after an 8 MiB line aicc mcp {}",
        if survived { "answered the next request" } else { "ended the session" }
    );
    if !survived {
        let status = mcp.child.wait().unwrap();
        assert!(status.code().is_some(), "aicc mcp was killed by a signal (a crash): {status}");
    }
    drop(mcp);
    // The bridge is unaffected: another session works.
    assert_eq!(connections_on(&bridge), 1);
}

#[test]
fn an_adapter_killed_mid_move_leaves_the_robot_stopped() {
    let bridge = support::start(support::config(2.0));
    let mut mcp = RawStdio::start(bridge.port);
    mcp.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#);
    mcp.answer(1);
    mcp.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    mcp.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"move","arguments":{"forward":1.5}}}"#);
    let deadline = Instant::now() + Duration::from_secs(10);
    while bridge.pose().x < 0.1 {
        assert!(Instant::now() < deadline, "the move did not start: {:?}", bridge.pose());
        std::thread::sleep(Duration::from_millis(20));
    }
    mcp.child.kill().unwrap();
    let killed = Instant::now();
    mcp.child.wait().unwrap();
    while bridge.last_velocity().map(|(v, _)| v) != Some(0.0) {
        assert!(
            killed.elapsed() < Duration::from_secs(3),
            "the base still drives {:?} after the adapter died",
            bridge.last_velocity()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopped_at = bridge.pose().x;
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        (bridge.pose().x - stopped_at).abs() < 0.005 && stopped_at < 1.0,
        "stopped at {stopped_at} m, now {:?}",
        bridge.pose()
    );
    eprintln!("the base stopped {:?} after the adapter was killed", killed.elapsed());
}

/// The MCP Inspector's CLI (npm), which scripts/setup-mcp.sh installs where
/// npm is; `None` on a machine without npm, where it cannot run.
fn inspector() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("AICC_MCP_INSPECTOR") {
        return Some(path.into());
    }
    let installed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.deps/mcp-inspector/node_modules/.bin/mcp-inspector");
    if installed.exists() {
        return Some(installed);
    }
    let npm = Command::new("npm").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(
        !npm,
        "npm is here but the MCP Inspector is not installed at {}: run `bash scripts/setup-mcp.sh`",
        installed.display()
    );
    None
}

#[test]
fn the_mcp_inspector_cli_lists_the_tools_and_calls_one() {
    let Some(inspector) = inspector() else {
        eprintln!("no npm on this machine: the MCP Inspector check cannot run here");
        return;
    };
    let bridge = support::start(support::config(2.0));
    let run = |extra: &[&str]| -> Value {
        let output = Command::new(&inspector)
            .arg("--cli")
            .arg(env!("CARGO_BIN_EXE_aicc"))
            .args(["--port", &bridge.port.to_string(), "mcp"])
            .args(extra)
            .output()
            .expect("the inspector runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "inspector {extra:?}: {}\n{stdout}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_str(&stdout)
            .unwrap_or_else(|_| panic!("inspector {extra:?} printed no JSON: {stdout}"))
    };
    let listed = run(&["--method", "tools/list"]);
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("a tools list")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"move") && names.contains(&"vision") && names.contains(&"events"),
        "{names:?}"
    );
    let called = run(&["--method", "tools/call", "--tool-name", "proprioception"]);
    assert_eq!(called["isError"], false, "{called}");
    assert!(called["structuredContent"]["position_m"]["x"].is_number(), "{called}");
}
