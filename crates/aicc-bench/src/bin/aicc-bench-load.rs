//! The bridge under hostile load, on the test robot (no ROS): prints
//! figures, asserts nothing. The bridge runs in a child process (this
//! binary with `--serve`), so that its resident memory is its own.
//!
//! - flood: connections that each send hundreds of `manifest_request`s in
//!   one write and never read; the bridge's RSS before, at its peak and
//!   after they close, and a healthy agent's round trips meanwhile;
//! - burst: connections opened at once (more than the cap): how many got a
//!   greeting, the cap error, or nothing, and how soon;
//! - churn: short connections (connect, greeting, close) in two rounds:
//!   RSS before, after each round.
//!
//! aicc-bench-load [--flood-connections 10] [--flood-requests 130]
//!   [--burst 500] [--max-connections 256] [--churn 500]
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// How long a burst connection waits for its first line.
const FIRST_LINE_WAIT: Duration = Duration::from_secs(12);

struct Args {
    flood_connections: usize,
    flood_requests: usize,
    burst: usize,
    max_connections: usize,
    churn: usize,
}

fn parse_args() -> (bool, Args) {
    let mut args = Args {
        flood_connections: 10,
        flood_requests: 130,
        burst: 500,
        max_connections: 256,
        churn: 500,
    };
    let mut serve = false;
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        let mut number = |name: &str| {
            words
                .next()
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or_else(|| panic!("{name} takes a number"))
        };
        match word.as_str() {
            "--serve" => serve = true,
            "--flood-connections" => args.flood_connections = number(&word),
            "--flood-requests" => args.flood_requests = number(&word),
            "--burst" => args.burst = number(&word),
            "--max-connections" => args.max_connections = number(&word),
            "--churn" => args.churn = number(&word),
            other => panic!("unknown argument {other}"),
        }
    }
    (serve, args)
}

fn main() {
    let (serve, args) = parse_args();
    if serve {
        serve_bridge(&args);
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(load(args));
}

/// The child: the bridge on the test robot until stdin closes.
fn serve_bridge(args: &Args) {
    let mut config = aicc_testkit::loopback_config("");
    config.max_connections = args.max_connections;
    // Every connection of the bench comes from one address: the cap per
    // address would refuse what the burst measures.
    config.security.max_connections_per_address = args.max_connections;
    // Quiet sensors are not what this measures: no topic, no unavailability churn.
    config.sensors.unavailable_after_s = 1e9;
    let bridge = aicc_testkit::TestBridge::start(config, |_| None);
    println!("PORT {}", bridge.port);
    let mut sink = String::new();
    while std::io::stdin().read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {}
    drop(bridge);
}

struct Bridge {
    child: Child,
    port: u16,
}

impl Bridge {
    fn start(args: &Args) -> Self {
        let exe = std::env::current_exe().expect("this binary's path");
        let mut child = Command::new(exe)
            .args(["--serve", "--max-connections", &args.max_connections.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the bridge");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).expect("the bridge's port");
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the bridge said {line:?}"));
        Self { child, port }
    }

    fn rss_mib(&self) -> f64 {
        aicc_bench::rss_mib(Some(self.child.id()))
    }

    fn threads_and_fds(&self) -> (u64, u64) {
        aicc_bench::process_figures(Some(self.child.id()))
            .map_or((0, 0), |figures| (figures.threads, figures.fds))
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// An agent that reads what it is sent.
struct Agent {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    line: String,
}

impl Agent {
    async fn connect(port: u16) -> std::io::Result<(Self, Value)> {
        let stream = TcpStream::connect(("127.0.0.1", port)).await?;
        stream.set_nodelay(true)?;
        let (read, writer) = stream.into_split();
        let mut agent = Agent { reader: BufReader::new(read), writer, line: String::new() };
        let first = agent.read().await?;
        Ok((agent, first))
    }

    async fn read(&mut self) -> std::io::Result<Value> {
        self.line.clear();
        if self.reader.read_line(&mut self.line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        serde_json::from_str(&self.line).map_err(std::io::Error::other)
    }

    /// A round trip of a tool the core answers itself.
    async fn call(&mut self, call_id: &str) -> std::io::Result<Duration> {
        let mut request = json!({ "protocol": "aicc/0.1", "type": "tool_call", "call_id": call_id, "tool": "memory_query", "input": { "limit": 1 } }).to_string();
        request.push('\n');
        let started = Instant::now();
        self.writer.write_all(request.as_bytes()).await?;
        loop {
            let message = self.read().await?;
            if message["type"] == "tool_result" && message["call_id"] == call_id {
                return Ok(started.elapsed());
            }
        }
    }
}

async fn load(args: Args) {
    let bridge = Bridge::start(&args);
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "bridge on the test robot (child pid {}), max_connections {}",
        bridge.child.id(),
        args.max_connections
    );
    // Churn first: its figures are memory kept from a baseline.
    churn(&bridge, &args).await;
    burst(&bridge, &args).await;
    flood(&bridge, &args).await;
    let (threads, fds) = bridge.threads_and_fds();
    println!("end: bridge RSS {:.1} MiB, {threads} threads, {fds} open fds", bridge.rss_mib());
}

/// Flooding connections that never read, and a healthy agent meanwhile.
async fn flood(bridge: &Bridge, args: &Args) {
    let before = bridge.rss_mib();
    let mut healthy = Agent::connect(bridge.port).await.expect("a healthy agent").0;
    for i in 0..50 {
        healthy.call(&format!("warm{i}")).await.expect("warm-up call");
    }
    let mut request = String::new();
    for i in 0..args.flood_requests {
        request.push_str(&json!({ "protocol": "aicc/0.1", "type": "manifest_request", "message_id": format!("flood-{i}") }).to_string());
        request.push('\n');
    }
    let mut flooders = Vec::new();
    for _ in 0..args.flood_connections {
        let mut stream =
            TcpStream::connect(("127.0.0.1", bridge.port)).await.expect("a flooding connection");
        stream.write_all(request.as_bytes()).await.expect("sending the flood");
        flooders.push(stream);
    }
    let flood_started = Instant::now();
    let mut peak = before;
    let mut samples = Vec::new();
    let mut i = 0;
    while flood_started.elapsed() < Duration::from_secs(3) {
        samples
            .push(healthy.call(&format!("h{i}")).await.expect("a healthy call during the flood"));
        i += 1;
        peak = peak.max(bridge.rss_mib());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let first = samples[0];
    samples.sort();
    println!(
        "flood: {} connections x {} manifest_requests ({} bytes each) in one write, never read",
        args.flood_connections,
        args.flood_requests,
        request.len()
    );
    println!(
        "  healthy agent during the flood: {} calls, first {:.1} ms, p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms",
        samples.len(),
        ms(first),
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.99)),
        ms(*samples.last().expect("calls"))
    );
    println!("  bridge RSS: before {before:.1} MiB, peak {peak:.1} MiB ({:.2} MiB per flooding connection)", (peak - before) / args.flood_connections as f64);
    drop(flooders);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (threads, fds) = bridge.threads_and_fds();
    println!(
        "  after the flooders closed (2 s): {:.1} MiB, {threads} threads, {fds} open fds",
        bridge.rss_mib()
    );
}

enum FirstLine {
    Greeting(Duration),
    CapError(Duration),
    Other(String),
    Nothing,
}

/// Connections opened at once: what each one hears first.
async fn burst(bridge: &Bridge, args: &Args) {
    let before = bridge.rss_mib();
    let started = Instant::now();
    let port = bridge.port;
    let tasks: Vec<_> = (0..args.burst)
        .map(|_| {
            tokio::spawn(async move {
                let attempt = async {
                    let stream = TcpStream::connect(("127.0.0.1", port)).await?;
                    let mut reader = BufReader::new(stream);
                    let mut line = String::new();
                    reader.read_line(&mut line).await?;
                    Ok::<_, std::io::Error>((line, reader))
                };
                match tokio::time::timeout(FIRST_LINE_WAIT, attempt).await {
                    Ok(Ok((line, reader))) => {
                        let at = started.elapsed();
                        let message: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                        let kind = match message["type"].as_str() {
                            Some("session_init") => FirstLine::Greeting(at),
                            Some("error") => FirstLine::CapError(at),
                            _ => FirstLine::Other(line.chars().take(80).collect()),
                        };
                        (kind, Some(reader))
                    }
                    Ok(Err(error)) => (FirstLine::Other(error.to_string()), None),
                    Err(_) => (FirstLine::Nothing, None),
                }
            })
        })
        .collect();
    let mut greetings = Vec::new();
    let mut refusals = Vec::new();
    let mut other = Vec::new();
    let mut nothing = 0;
    let mut held = Vec::new();
    for task in tasks {
        let (kind, reader) = task.await.expect("a burst task");
        held.extend(reader);
        match kind {
            FirstLine::Greeting(at) => greetings.push(at),
            FirstLine::CapError(at) => refusals.push(at),
            FirstLine::Other(what) => other.push(what),
            FirstLine::Nothing => nothing += 1,
        }
    }
    greetings.sort();
    refusals.sort();
    println!("burst: {} connections at once (cap {})", args.burst, args.max_connections);
    println!(
        "  greeting: {} (p50 {:.1} ms, max {:.1} ms)",
        greetings.len(),
        ms(percentile(&greetings, 0.5)),
        ms(greetings.last().copied().unwrap_or_default())
    );
    println!(
        "  cap error: {} (p50 {:.1} ms, max {:.1} ms)",
        refusals.len(),
        ms(percentile(&refusals, 0.5)),
        ms(refusals.last().copied().unwrap_or_default())
    );
    println!(
        "  nothing within {:.0} s: {nothing}; other: {} {:?}",
        FIRST_LINE_WAIT.as_secs_f64(),
        other.len(),
        other.iter().take(3).collect::<Vec<_>>()
    );
    let peak = bridge.rss_mib();
    drop(held);
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("  bridge RSS: before {before:.1} MiB, with the burst open {peak:.1} MiB, 2 s after it closed {:.1} MiB", bridge.rss_mib());
}

/// Short connections in two rounds: does memory come back?
async fn churn(bridge: &Bridge, args: &Args) {
    let baseline = bridge.rss_mib();
    let mut after_round = Vec::new();
    for _round in 0..2 {
        let mut open = Vec::new();
        for _ in 0..args.churn.min(args.max_connections) {
            if let Ok((agent, _)) = Agent::connect(bridge.port).await {
                open.push(agent);
            }
        }
        for _ in args.churn.min(args.max_connections)..args.churn {
            drop(Agent::connect(bridge.port).await);
        }
        drop(open);
        tokio::time::sleep(Duration::from_secs(2)).await;
        after_round.push(bridge.rss_mib());
    }
    println!("churn: {} short connections per round: RSS before {baseline:.1} MiB, after round 1 {:.1} MiB, after round 2 {:.1} MiB", args.churn, after_round[0], after_round[1]);
}
