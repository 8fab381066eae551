//! Load client for a running bridge: round-trip latency of a tool call
//! (p50, p99), calls per second on 1 and on N connections, and the
//! bridge's resident memory with M idle connections. Prints figures; it
//! asserts nothing (targets are judged by people, not by timed tests).
//!
//! First, in the same run, the floor: a bare tokio loopback echo in this
//! process ([`aicc_wire::bench::EchoFloor`]), asked the same request line
//! by the same client and answering with the bridge's own reply line;
//! every round-trip figure is printed beside it, with the ratio.
//!
//!   aicc-bench --port 43010 [--tool proprioception] [--calls 5000]
//!              [--connections 16] [--idle 256] [--pid PID] [--no-echo-floor]
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use aicc_wire::bench::{
    beside_floor, calls_per_second, round_trips, Echo, EchoFloor, Exchange, Latencies, LineClient,
    ToolCall,
};
use clap::Parser;
use serde_json::json;

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
    #[arg(long, default_value_t = 256)]
    idle: usize,
    /// The bridge's process id, to read its resident memory.
    #[arg(long)]
    pid: Option<u32>,
    /// Environment variable holding a token, when the bridge asks for one.
    #[arg(long, default_value = "AICC_TOKEN")]
    token_env: String,
    /// Skip the echo floor (figures without their ratio).
    #[arg(long)]
    no_echo_floor: bool,
}

/// A session on the bridge (authenticated when a token is in the environment).
fn session(address: SocketAddr, token_env: &str) -> io::Result<LineClient> {
    let mut client = LineClient::connect(address)?;
    if let Ok(token) = std::env::var(token_env) {
        let mut hello = serde_json::to_vec(
            &json!({ "protocol": "aicc/0.1", "type": "manifest_request", "auth": { "token": token } }),
        )?;
        hello.push(b'\n');
        client.send(&hello)?;
    }
    while client.read()?["type"] != "session_init" {}
    Ok(client)
}

fn rss_mb(pid: u32) -> Option<f64> {
    aicc_bench::process_figures(Some(pid)).ok().map(|figures| figures.rss_mib)
}

/// A figure, beside its floor when there is one.
fn shown(figure: f64, floor: Option<f64>, unit: &str) -> String {
    match floor {
        Some(floor) => beside_floor(figure, floor, unit),
        None => format!("{figure:.1} {unit}"),
    }
}

fn main() -> io::Result<()> {
    let args = Args::parse();
    let address = (args.host.as_str(), args.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other("no address for --host"))?;
    let call = ToolCall { tool: args.tool.clone() };
    let mut client = session(address, &args.token_env)?;
    round_trips(&mut client, &call, 0, 200)?;
    // The floor answers with the bridge's own reply line, byte for byte.
    client.send(&call.request(200))?;
    let reply_line = loop {
        let line = client.read_line()?.to_string();
        if call.is_answer(&serde_json::from_str(&line).map_err(io::Error::other)?, 200) {
            break line;
        }
    };
    let floor = match args.no_echo_floor {
        true => None,
        false => Some(EchoFloor::start(reply_line.clone().into_bytes())?),
    };
    let echo = Echo(&call);
    let floor_one = match &floor {
        Some(floor) => {
            let mut floor_client = LineClient::connect(floor.address)?;
            round_trips(&mut floor_client, &echo, 0, 200)?;
            let run = round_trips(&mut floor_client, &echo, 1000, args.calls)?;
            println!("echo floor (bare tokio loopback echo in this process, same client; request {} bytes, reply {} bytes): p50 {:.1} us, p99 {:.1} us, {:.0} calls/s", call.request(0).len(), reply_line.len(), run.quantile_us(0.5), run.quantile_us(0.99), run.calls_per_second());
            Some(run)
        }
        None => None,
    };

    let run: Latencies = round_trips(&mut client, &call, 1000, args.calls)?;
    let floor_of = |q: f64| floor_one.as_ref().map(|f| f.quantile_us(q));
    println!(
        "round trip of '{}' on 1 connection, {} calls: p50 {}, p99 {}, max {:.1} us",
        args.tool,
        args.calls,
        shown(run.quantile_us(0.5), floor_of(0.5), "us"),
        shown(run.quantile_us(0.99), floor_of(0.99), "us"),
        run.quantile_us(1.0)
    );
    println!(
        "calls per second on 1 connection: {}",
        shown(run.calls_per_second(), floor_one.as_ref().map(Latencies::calls_per_second), "/s")
    );

    let floor_rate = match &floor {
        Some(floor) => Some(calls_per_second(
            args.connections,
            args.calls,
            &|| LineClient::connect(floor.address),
            &echo,
        )?),
        None => None,
    };
    let rate = calls_per_second(
        args.connections,
        args.calls,
        &|| session(address, &args.token_env),
        &call,
    )?;
    println!(
        "calls per second on {} connections ({} calls each): {}",
        args.connections,
        args.calls,
        shown(rate, floor_rate, "/s")
    );
    drop(floor);

    if let Some(pid) = args.pid {
        drop(client);
        std::thread::sleep(Duration::from_millis(500));
        let before = rss_mb(pid);
        let idle = (0..args.idle)
            .map(|_| session(address, &args.token_env))
            .collect::<io::Result<Vec<_>>>()?;
        std::thread::sleep(Duration::from_millis(500));
        let after = rss_mb(pid);
        match (before, after) {
            (Some(before), Some(after)) => println!("bridge resident memory: {before:.1} MB, with {} idle connections: {after:.1} MB (+{:.1} MB)", idle.len(), after - before),
            _ => println!("bridge resident memory: cannot read /proc/{pid}/status"),
        }
    }
    Ok(())
}
