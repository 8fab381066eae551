//! The bridge under hostile load over real TCP, in-process on the test
//! robot: peers that flood requests and never read, a burst of connections
//! beyond the cap, peers that never authenticate. What is checked is the
//! bound (what the bridge holds, who is answered), not speed: the figures
//! are printed by the aicc-bench-load benchmark.
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{config, start, AiccClient};

fn manifest_requests(count: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..count {
        bytes.extend_from_slice(json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": format!("flood-{i}") }).to_string().as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

/// `bridge_status`'s output (its queue figures are sampled every 250 ms).
fn status(client: &mut AiccClient, round: &mut usize) -> Value {
    *round += 1;
    let status = client.call(&format!("s{round}"), "bridge_status", json!({}));
    assert_eq!(status["ok"], true, "{status}");
    status["output"].clone()
}

/// Polls `bridge_status` until `done` holds (or fails after `patience`).
fn status_until(
    client: &mut AiccClient,
    round: &mut usize,
    patience: Duration,
    mut done: impl FnMut(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + patience;
    loop {
        let output = status(client, round);
        if done(&output) {
            return output;
        }
        assert!(Instant::now() < deadline, "not reached within {patience:?}: {output}");
        std::thread::sleep(Duration::from_millis(150));
    }
}

/// A connection whose receive buffer does not grow (the kernel would
/// otherwise take tens of MiB of replies off the bridge's hands).
fn connect_with_small_receive_buffer(port: u16) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(16 * 1024).unwrap();
        let stream = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
        let stream = stream.into_std().unwrap();
        stream.set_nonblocking(false).unwrap();
        stream
    })
}

#[test]
fn peers_that_flood_and_never_read_stop_being_read_then_are_cut_off() {
    let queue_bytes = 64 * 1024;
    let bridge = start(
        config(&format!(
            "    outbound_queue_bytes: {queue_bytes}\n    write_stall_timeout_s: 4.0\n"
        )),
        &[],
    );
    let (mut healthy, init) = AiccClient::connect(bridge.port);
    let manifest_bytes = init.to_string().len();
    let mut round = 0;
    // The test robot's sensors are silent: once the tools they feed are
    // marked unavailable, no manifest update is pushed any more.
    status_until(&mut healthy, &mut round, Duration::from_secs(10), |status| {
        status["unavailable_tools"].as_object().is_some_and(|tools| !tools.is_empty())
    });
    // Far more replies than the socket buffers take: the queue fills.
    let requests = 8 * 1024 * 1024 / manifest_bytes + 100;
    let flood = manifest_requests(requests);
    let flooders: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut stream = connect_with_small_receive_buffer(bridge.port);
            stream.write_all(&flood).unwrap();
            stream
        })
        .collect();
    // Each flooding connection holds at most the bound plus the replies of
    // the one request that crossed it (one manifest), however much it sent.
    let mut fullest_seen = 0;
    let full = status_until(&mut healthy, &mut round, Duration::from_secs(60), |status| {
        let fullest = status["outbound_fullest_queue_bytes"].as_u64().unwrap() as usize;
        fullest_seen = fullest_seen.max(fullest);
        fullest >= queue_bytes
    });
    assert!(fullest_seen <= queue_bytes + 2 * manifest_bytes, "a queue held {fullest_seen} bytes, over the {queue_bytes}-byte bound plus one reply ({manifest_bytes}): {full}");
    assert_eq!(full["outbound_queue_bytes_max"], queue_bytes);
    // A healthy agent is still served while they flood.
    assert_eq!(healthy.call("during", "memory_query", json!({ "limit": 1 }))["ok"], true);
    // After the stall bound the flooders are disconnected, with a log line.
    let after = status_until(&mut healthy, &mut round, Duration::from_secs(60), |status| {
        status["connections"] == 1
    });
    let still_full = status_until(&mut healthy, &mut round, Duration::from_secs(5), |status| {
        status["outbound_fullest_queue_bytes"].as_u64() < Some(queue_bytes as u64)
    });
    assert!(still_full["outbound_queued_bytes"].as_u64().unwrap() < queue_bytes as u64, "{after}");
    assert!(support::logged_soon("its peer stopped reading"), "the cut-off is logged");
    for mut flooder in flooders {
        flooder.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sink = Vec::new();
        // What was sent before the cut-off, then the end of the stream.
        let end = flooder.read_to_end(&mut sink);
        assert!(
            end.is_ok()
                || end.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "{end:?}"
        );
    }
}

#[test]
fn a_reader_that_catches_up_late_gets_every_reply_in_order() {
    let bridge = start(config("    outbound_queue_bytes: 32768\n"), &[]);
    let (mut client, _) = AiccClient::connect(bridge.port);
    let count = 400;
    let mut burst = Vec::new();
    for i in 0..count {
        burst.extend_from_slice(json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": format!("m{i}") }).to_string().as_bytes());
        burst.push(b'\n');
    }
    client.send_bytes(&burst);
    // Reading pauses on the bridge's side meanwhile; nothing is dropped.
    std::thread::sleep(Duration::from_millis(1500));
    for i in 0..count {
        let reply = client.read_until("session_init");
        assert_eq!(reply["in_reply_to"], format!("m{i}"), "replies come in order, none lost");
    }
}

#[test]
fn a_burst_beyond_the_cap_is_each_greeted_or_refused() {
    let cap = 200;
    let burst = 500;
    // Every connection comes from 127.0.0.1: its per-address share is the whole cap here.
    let bridge = start(
        config(&format!(
            "    max_connections: {cap}\n    security:\n      max_connections_per_address: {cap}\n"
        )),
        &[],
    );
    let started = Instant::now();
    let streams: Vec<TcpStream> = (0..burst)
        .map(|_| {
            TcpStream::connect(("127.0.0.1", bridge.port))
                .expect("the kernel accepts the connection")
        })
        .collect();
    let (mut greeted, mut refused) = (0, 0);
    // Every stream stays open to the end: a closed one would free a slot.
    for stream in &streams {
        // Generous: a connection that hears nothing is what fails here.
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut line = String::new();
        BufReader::new(stream)
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("a connection of the burst heard nothing: {e}"));
        let first: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        match (first["type"].as_str(), first["code"].as_str()) {
            (Some("session_init"), _) => greeted += 1,
            (Some("error"), Some("tool_unavailable")) => {
                assert!(
                    first["message"]
                        .as_str()
                        .unwrap()
                        .contains(&format!("at most {cap} connections")),
                    "{first}"
                );
                refused += 1;
            }
            _ => panic!("unexpected first line {first}"),
        }
    }
    println!(
        "burst of {burst}: {greeted} greeted, {refused} refused, all within {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!((greeted, refused), (cap, burst - cap));
}

#[test]
fn a_peer_that_never_authenticates_is_closed_after_the_handshake_bound() {
    let bridge =
        start(config("    handshake_timeout_s: 0.5\n"), &[("AICC_TOKEN", "secret-for-the-test")]);
    let mut silent = AiccClient::connect_raw(bridge.port);
    let told = silent.read_message();
    assert_eq!(told["type"], "error");
    assert!(told["message"].as_str().unwrap().contains("handshake_timeout_s"), "{told}");
    assert!(silent.is_closed_by_peer());
}
