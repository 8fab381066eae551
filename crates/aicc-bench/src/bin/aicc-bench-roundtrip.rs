//! Round trips of a tool call through the whole bridge on the test robot
//! (no ROS), beside their floor measured in the same run: prints figures,
//! asserts nothing. The floor is a bare tokio loopback echo
//! ([`aicc_wire::bench::EchoFloor`]) asked the same request line by the same
//! client and answering with the bridge's own reply line, so each ratio
//! is the bridge's cost over what the machine allows. Rounds alternate
//! between the two so that the machine's noise falls on both.
//!
//! - one connection: p50, p99 and calls per second;
//! - `--connections` connections at once: calls per second;
//! - this process's resident memory before and with `--idle` idle
//!   sessions (the bridge's share: the client holds a socket each).
//!
//! Also what to run under a profiler: `--bridge-only` skips the floor and
//! the memory figures, e.g.
//!   valgrind --tool=callgrind --dump-instr=no aicc-bench-roundtrip --bridge-only --calls 2000 --rounds 1 --connections 0
//!
//! `--serve` only serves the bridge on that robot (with a 640x480 camera)
//! and prints `PORT <port>` until stdin closes: a ROS-free bridge for the
//! other benchmark clients (aicc-bench, aicc-bench-mcp).
//!
//! aicc-bench-roundtrip [--serve] [--tool proprioception] [--calls 5000] [--rounds 3]
//!   [--connections 16] [--parallel-calls 1000] [--idle 256] [--bridge-only]
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use aicc_testkit::{loopback_config, TestBridge};
use aicc_wire::bench::{
    beside_floor, calls_per_second, round_trips, Echo, EchoFloor, Exchange, Latencies, LineClient,
    ToolCall,
};
use serde_json::Value;

struct Args {
    tool: String,
    calls: usize,
    rounds: usize,
    connections: usize,
    parallel_calls: usize,
    idle: usize,
    bridge_only: bool,
    serve: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        tool: "proprioception".into(),
        calls: 5000,
        rounds: 3,
        connections: 16,
        parallel_calls: 1000,
        idle: 256,
        bridge_only: false,
        serve: false,
    };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        let mut value = |name: &str| words.next().unwrap_or_else(|| panic!("{name} takes a value"));
        let mut number = |name: &str| {
            value(name).parse::<usize>().unwrap_or_else(|_| panic!("{name} takes a number"))
        };
        match word.as_str() {
            "--calls" => args.calls = number(&word),
            "--rounds" => args.rounds = number(&word).max(1),
            "--connections" => args.connections = number(&word),
            "--parallel-calls" => args.parallel_calls = number(&word),
            "--idle" => args.idle = number(&word),
            "--bridge-only" => args.bridge_only = true,
            "--serve" => args.serve = true,
            "--tool" => args.tool = value(&word),
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

/// A session on the bridge: connected once the greeting is in.
fn session(address: SocketAddr) -> io::Result<LineClient> {
    let mut client = LineClient::connect(address)?;
    while client.read()?["type"] != "session_init" {}
    Ok(client)
}

fn rss_mib() -> f64 {
    aicc_bench::rss_mib(None)
}

fn main() -> io::Result<()> {
    let args = parse_args();
    let mut bridge = TestBridge::start(loopback_config(""), |_| None);
    if args.serve {
        bridge.feed_standing(Some((640, 480)));
        println!("PORT {}", bridge.port);
        let mut sink = String::new();
        while io::stdin().read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {}
        return Ok(());
    }
    bridge.feed_standing(None);
    let bridge_address = SocketAddr::from(([127, 0, 0, 1], bridge.port));
    let call = ToolCall { tool: args.tool.clone() };

    // Until the tool answers (its sensors fresh), then warm.
    let mut client = session(bridge_address)?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.round_trip(&call.request(0), |m| m["type"] == "tool_result")?.0["ok"] != true {
        assert!(Instant::now() < deadline, "{} never answered ok", args.tool);
        std::thread::sleep(Duration::from_millis(100));
    }
    // The reply line the floor answers with: the bridge's own, byte for byte.
    client.send(&call.request(1))?;
    let reply_line = loop {
        let line = client.read_line()?.to_string();
        let message: Value = serde_json::from_str(&line).map_err(io::Error::other)?;
        if call.is_answer(&message, 1) {
            break line;
        }
    };
    round_trips(&mut client, &call, 2, 500)?;

    if args.bridge_only {
        let started = Instant::now();
        let run = round_trips(&mut client, &call, 1000, args.calls * args.rounds)?;
        println!(
            "{} on 1 connection, {} calls in {:.2} s: p50 {:.1} us, p99 {:.1} us, {:.0} calls/s",
            args.tool,
            args.calls * args.rounds,
            started.elapsed().as_secs_f64(),
            run.quantile_us(0.5),
            run.quantile_us(0.99),
            run.calls_per_second()
        );
        if args.connections > 0 {
            let rate = calls_per_second(
                args.connections,
                args.parallel_calls,
                &|| session(bridge_address),
                &call,
            )?;
            println!("{} connections: {rate:.0} calls/s", args.connections);
        }
        return Ok(());
    }

    let floor = EchoFloor::start(reply_line.clone().into_bytes())?;
    let echo = Echo(&call);
    let mut floor_client = LineClient::connect(floor.address)?;
    round_trips(&mut floor_client, &echo, 0, 500)?;
    println!(
        "{} round trips: the bridge on the test robot (no ROS) beside a bare tokio loopback echo (the floor), same client, request {} bytes, reply {} bytes; {} rounds, alternating",
        args.tool,
        call.request(0).len(),
        reply_line.len(),
        args.rounds
    );
    let (mut bridge_runs, mut floor_runs) = (Vec::new(), Vec::new());
    let (mut bridge_rates, mut floor_rates) = (Vec::new(), Vec::new());
    // One connection first: once the parallel connections close, the
    // bridge returns their memory to the system (malloc_trim, arenas
    // locked for a moment), which would fall into a following round's tail.
    for round in 0..args.rounds {
        let first = 10_000 + round * args.calls;
        for which in [round % 2, 1 - round % 2] {
            match which {
                0 => bridge_runs.push(round_trips(&mut client, &call, first, args.calls)?),
                _ => floor_runs.push(round_trips(&mut floor_client, &echo, first, args.calls)?),
            }
        }
    }
    for round in (0..args.rounds).filter(|_| args.connections > 0) {
        for which in [round % 2, 1 - round % 2] {
            match which {
                0 => bridge_rates.push(calls_per_second(
                    args.connections,
                    args.parallel_calls,
                    &|| session(bridge_address),
                    &call,
                )?),
                _ => floor_rates.push(calls_per_second(
                    args.connections,
                    args.parallel_calls,
                    &|| LineClient::connect(floor.address),
                    &echo,
                )?),
            }
        }
    }
    let (bridge_all, floor_all) = (Latencies::merged(&bridge_runs), Latencies::merged(&floor_runs));
    println!("  1 connection, {} calls:", args.calls * args.rounds);
    println!(
        "    p50      {}",
        beside_floor(bridge_all.quantile_us(0.5), floor_all.quantile_us(0.5), "us")
    );
    println!(
        "    p99      {}",
        beside_floor(bridge_all.quantile_us(0.99), floor_all.quantile_us(0.99), "us")
    );
    println!(
        "    calls/s  {}",
        beside_floor(bridge_all.calls_per_second(), floor_all.calls_per_second(), "/s")
    );
    if args.connections > 0 {
        let median = |rates: &mut Vec<f64>| {
            rates.sort_by(f64::total_cmp);
            rates[rates.len() / 2]
        };
        println!(
            "  {} connections x {} calls, median of {} rounds:",
            args.connections, args.parallel_calls, args.rounds
        );
        println!(
            "    calls/s  {}",
            beside_floor(median(&mut bridge_rates), median(&mut floor_rates), "/s")
        );
    }
    drop(floor_client);
    drop(floor);

    if args.idle > 0 {
        drop(client);
        std::thread::sleep(Duration::from_millis(500));
        let before = rss_mib();
        let idle =
            (0..args.idle).map(|_| session(bridge_address)).collect::<io::Result<Vec<_>>>()?;
        std::thread::sleep(Duration::from_millis(500));
        println!("resident memory (bridge and client): {before:.1} MiB, with {} idle sessions {:.1} MiB (+{:.1} MiB)", idle.len(), rss_mib(), rss_mib() - before);
    }
    Ok(())
}
