//! Actuation latency: from an agent's `move` call to the first governed
//! /cmd_vel seen by a ROS subscriber (p50, p99). Prints figures; asserts
//! nothing. Run beside a bridge and a robot (scripts/bench.sh does).
//!
//!   aicc-bench-actuation --port N [--repeats 30]
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use serde_json::{json, Value};

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long)]
    port: u16,
    #[arg(long, default_value_t = 30)]
    repeats: usize,
    #[arg(long, default_value = "/cmd_vel")]
    cmd_vel: String,
}

fn main() {
    let args = Args::parse();
    let moving: Arc<Mutex<Vec<Instant>>> = Arc::new(Mutex::new(Vec::new()));
    let sink = moving.clone();
    let topic = args.cmd_vel.clone();
    std::thread::spawn(move || {
        let context = r2r::Context::create().expect("ROS context");
        let mut node = r2r::Node::create(context, "actuation_bench", "").expect("node");
        let mut stream = node.subscribe::<r2r::geometry_msgs::msg::Twist>(&topic, r2r::QosProfile::default().best_effort()).expect("subscribe");
        let mut pool = futures::executor::LocalPool::new();
        use futures::task::LocalSpawnExt;
        pool.spawner()
            .spawn_local(async move {
                while let Some(twist) = stream.next().await {
                    if twist.linear.x != 0.0 {
                        sink.lock().unwrap().push(Instant::now());
                    }
                }
            })
            .unwrap();
        loop {
            node.spin_once(Duration::from_millis(1));
            pool.run_until_stalled();
        }
    });
    std::thread::sleep(Duration::from_secs(2)); // discovery
    let stream = TcpStream::connect((args.host.as_str(), args.port)).expect("connecting to the bridge");
    stream.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let mut line = String::new();
    let mut read = |reader: &mut BufReader<TcpStream>| -> Value {
        line.clear();
        reader.read_line(&mut line).expect("reading");
        serde_json::from_str(&line).expect("JSON")
    };
    while read(&mut reader)["type"] != "session_init" {}
    let mut latencies = Vec::new();
    for i in 0..args.repeats {
        let forward = if i % 2 == 0 { 0.03 } else { -0.03 };
        let call = json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": format!("a{i}"), "tool": "move", "input": { "forward": forward } });
        let sent = Instant::now();
        writer.write_all(format!("{call}\n").as_bytes()).unwrap();
        loop {
            let message = read(&mut reader);
            if message["type"] == "tool_result" && message["call_id"] == format!("a{i}") {
                assert_eq!(message["ok"], true, "{message}");
                break;
            }
        }
        if let Some(first) = moving.lock().unwrap().iter().find(|t| **t >= sent) {
            latencies.push(first.duration_since(sent));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    latencies.sort();
    let at = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3;
    println!("actuation latency (move call -> first governed /cmd_vel on ROS), {} of {} moves: p50 {:.2} ms, p99 {:.2} ms", latencies.len(), args.repeats, at(0.5), at(0.99));
}
