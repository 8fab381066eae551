//! Load client for a running bridge: round-trip latency of a tool call
//! (p50, p99), calls per second on 1 and on N connections, and the
//! bridge's resident memory with M idle connections. Prints figures; it
//! asserts nothing (targets are judged by people, not by timed tests).
//!
//!   aicc-bench --port 43010 [--tool proprioception] [--calls 5000]
//!              [--connections 16] [--idle 100] [--pid PID]
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};

#[derive(Parser, Debug, Clone)]
struct Args {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 43010)]
    port: u16,
    /// Tool to call (with empty input).
    #[arg(long, default_value = "proprioception")]
    tool: String,
    /// Calls per connection in each measurement.
    #[arg(long, default_value_t = 5000)]
    calls: usize,
    /// Connections for the parallel throughput run.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Idle connections for the memory measurement.
    #[arg(long, default_value_t = 100)]
    idle: usize,
    /// The bridge's process id, to read its resident memory.
    #[arg(long)]
    pid: Option<u32>,
    /// Environment variable holding a token, when the bridge asks for one.
    #[arg(long, default_value = "AICC_TOKEN")]
    token_env: String,
}

struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    line: String,
}

impl Client {
    fn connect(args: &Args) -> Client {
        let stream = TcpStream::connect((args.host.as_str(), args.port)).expect("connecting to the bridge");
        stream.set_nodelay(true).unwrap();
        let mut client = Client { reader: BufReader::new(stream.try_clone().unwrap()), writer: stream, line: String::new() };
        if let Ok(token) = std::env::var(&args.token_env) {
            client.send(&json!({ "protocol": "aicc/0.1", "type": "manifest_request", "auth": { "token": token } }));
        }
        loop {
            if client.read()["type"] == "session_init" {
                return client;
            }
        }
    }

    fn send(&mut self, message: &Value) {
        let mut bytes = serde_json::to_vec(message).unwrap();
        bytes.push(b'\n');
        self.writer.write_all(&bytes).unwrap();
    }

    fn read(&mut self) -> Value {
        self.line.clear();
        let n = self.reader.read_line(&mut self.line).expect("reading");
        assert!(n > 0, "bridge closed the connection");
        serde_json::from_str(&self.line).expect("JSON from the bridge")
    }

    /// One call, waiting for its result; returns the round trip.
    fn call(&mut self, tool: &str, call_id: &str) -> Duration {
        let request = json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": call_id, "tool": tool, "input": {} });
        let started = Instant::now();
        self.send(&request);
        loop {
            let message = self.read();
            if message["type"] == "tool_result" && message["call_id"] == call_id {
                assert_eq!(message["ok"], true, "call failed: {message}");
                return started.elapsed();
            }
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() {
    let args = Args::parse();
    let mut client = Client::connect(&args);
    for i in 0..200 {
        client.call(&args.tool, &format!("warm{i}"));
    }
    let mut samples: Vec<Duration> = (0..args.calls).map(|i| client.call(&args.tool, &format!("c{i}"))).collect();
    let total: Duration = samples.iter().sum();
    samples.sort();
    println!("round trip of '{}' on 1 connection, {} calls: p50 {:.1} us, p99 {:.1} us, max {:.1} us", args.tool, args.calls, percentile(&samples, 0.5).as_secs_f64() * 1e6, percentile(&samples, 0.99).as_secs_f64() * 1e6, samples.last().unwrap().as_secs_f64() * 1e6);
    println!("calls per second on 1 connection: {:.0}", args.calls as f64 / total.as_secs_f64());

    let started = Instant::now();
    let workers: Vec<_> = (0..args.connections)
        .map(|w| {
            let args = args.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(&args);
                for i in 0..args.calls {
                    client.call(&args.tool, &format!("w{w}c{i}"));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let elapsed = started.elapsed();
    println!("calls per second on {} connections: {:.0} ({} calls in {:.2} s)", args.connections, (args.connections * args.calls) as f64 / elapsed.as_secs_f64(), args.connections * args.calls, elapsed.as_secs_f64());

    if let Some(pid) = args.pid {
        drop(client);
        std::thread::sleep(Duration::from_millis(500));
        let before = rss_mb(pid);
        let idle: Vec<Client> = (0..args.idle).map(|_| Client::connect(&args)).collect();
        std::thread::sleep(Duration::from_millis(500));
        let after = rss_mb(pid);
        match (before, after) {
            (Some(before), Some(after)) => println!("bridge resident memory: {before:.1} MB, with {} idle connections: {after:.1} MB", idle.len()),
            _ => println!("bridge resident memory: cannot read /proc/{pid}/status"),
        }
    }
}
