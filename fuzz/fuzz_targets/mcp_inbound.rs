//! The MCP adapter's inbound path (`aicc mcp`): what an MCP host sends,
//! arbitrary bytes, read by the official SDK's transport and answered by the
//! adapter's handler, which holds a real AICC session on the bridge (the
//! whole bridge in-process on its test robot, started once). Never a panic,
//! and everything the adapter writes back is a JSON-RPC 2.0 message.
//!
//! An input whose first byte is even gets a valid `initialize` handshake in
//! front of the rest, so that the fuzzer spends its time past the handshake
//! (tool calls, resources, cancellations) as well as on it.
#![no_main]
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use aicc_agent::client::manifest::LlmOffer;
use aicc_agent::client::SessionOptions;
use aicc_agent::mcp::{BridgeTarget, RobotServer};
use aicc_bridge::{run, Listeners, Startup};
use aicc_bridge::{Config, DEFAULT_NODE_NAME};
use aicc_bridge::port::TestRobot;
use libfuzzer_sys::fuzz_target;
use rmcp::ServiceExt as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

const HANDSHAKE: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"fuzz\",\"version\":\"0\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
/// How long the adapter has to answer after its last line (a round trip
/// to the in-process bridge takes about a millisecond).
const ANSWER_WAIT: Duration = Duration::from_millis(100);
/// How long the adapter has to end once the host has hung up; past it the
/// serving task is aborted, so that nothing of one input runs into the next.
const TEARDOWN: Duration = Duration::from_millis(500);

struct Harness {
    runtime: tokio::runtime::Runtime,
    bridge: BridgeTarget,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let mut config = Config::from_params_yaml(
            &format!("{DEFAULT_NODE_NAME}:\n  ros__parameters:\n    listen: \"127.0.0.1:0\"\n"),
            DEFAULT_NODE_NAME,
        )
        .expect("a valid configuration");
        config.listen = "127.0.0.1:0".into();
        let config = Arc::new(config);
        let startup = Startup::from_config(config.clone(), |_| None).expect("the bridge starts");
        // The robot lives as long as the process: the bridge holds its port.
        let robot: &'static TestRobot = Box::leak(Box::new(TestRobot::new(&config)));
        let (port_tx, port_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let listeners = Listeners::bind(&config).await.expect("binding 127.0.0.1:0");
                port_tx
                    .send(listeners.aicc.local_addr().expect("a bound address").port())
                    .expect("the harness waits for the port");
                run(startup, listeners, robot.robot.clone(), std::future::pending())
                    .await
                    .expect("the bridge runs");
            });
        });
        let port = port_rx.recv().expect("the bridge reports its port");
        let session =
            SessionOptions { timeout: Duration::from_secs(2), ..SessionOptions::default() };
        let bridge = BridgeTarget {
            host: "127.0.0.1".into(),
            port,
            tls: None,
            session,
            operator: None,
            // World edits offered too: more of the adapter is reached.
            offer: LlmOffer { generators: true },
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        Harness { runtime, bridge }
    })
}

fuzz_target!(|data: &[u8]| {
    let harness = harness();
    harness.runtime.block_on(async {
        let (host, adapter) = tokio::io::duplex(64 * 1024);
        let server = RobotServer::new(harness.bridge.clone(), CancellationToken::new());
        let mut serving = tokio::spawn(async move {
            // A host that never initializes is an error here, not a panic.
            if let Ok(running) = server.serve(tokio::io::split(adapter)).await {
                let _ = running.waiting().await;
            }
        });
        let (from_adapter, mut to_adapter) = tokio::io::split(host);
        let reader = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(from_adapter).lines();
            while let Ok(Ok(Some(line))) =
                tokio::time::timeout(ANSWER_WAIT, lines.next_line()).await
            {
                let message: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("the adapter wrote a line that is not JSON ({e}): {line}")
                });
                assert_eq!(
                    message.get("jsonrpc").and_then(|v| v.as_str()),
                    Some("2.0"),
                    "the adapter wrote a message that is not JSON-RPC 2.0: {line}"
                );
            }
        });
        let body = match data.first() {
            Some(first) if first % 2 == 0 => [HANDSHAKE, &data[1..]].concat(),
            _ => data.to_vec(),
        };
        let _ = to_adapter.write_all(&body).await;
        let _ = to_adapter.write_all(b"\n").await;
        let _ = to_adapter.flush().await;
        if let Err(panic) = reader.await {
            std::panic::resume_unwind(panic.into_panic());
        }
        // The host hangs up; the adapter ends (or is ended) before the next input.
        drop(to_adapter);
        if tokio::time::timeout(TEARDOWN, &mut serving).await.is_err() {
            serving.abort();
            let _ = serving.await;
        }
    });
});
