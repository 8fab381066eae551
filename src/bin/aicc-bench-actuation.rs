//! Actuation latency, each figure beside its floor from the same run.
//! Prints figures; asserts nothing. Run beside a bridge and a robot
//! (scripts/bench.sh does).
//! - floor: one DDS hop, a Twist from this process to a child process of
//!   its own and back (half the round trip), on the same machine;
//! - actuation: an agent's `move` call to the first governed /cmd_vel
//!   seen here (p50, p99), and its ratio to the hop;
//! - deadman: an agent's socket closed mid-move to the first /cmd_vel that
//!   is zero or slower than the one before (p50, p99).
//!
//!   aicc-bench-actuation --port N [--repeats 30] [--deadman-repeats 10]
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aicc_wire::blocking::AiccClient;
use clap::Parser;
use futures::StreamExt;
use r2r::geometry_msgs::msg::Twist;
use serde_json::{json, Value};

const PING_TOPIC: &str = "/aicc_bench/hop_ping";
const PONG_TOPIC: &str = "/aicc_bench/hop_pong";
/// Round trips measured for the DDS hop floor.
const HOPS: usize = 300;

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 0)]
    port: u16,
    #[arg(long, default_value_t = 30)]
    repeats: usize,
    /// Agents that drop their connection mid-move, for the deadman figure.
    #[arg(long, default_value_t = 10)]
    deadman_repeats: usize,
    #[arg(long, default_value = "/cmd_vel")]
    cmd_vel: String,
    /// Internal: serve as the echo end of the DDS hop floor.
    #[arg(long, hide = true)]
    hop_echo: bool,
}

/// Every /cmd_vel seen, with when.
type Seen = Arc<Mutex<Vec<(Instant, f64)>>>;

fn main() {
    let args = Args::parse();
    if args.hop_echo {
        return hop_echo();
    }
    assert!(args.port != 0, "--port is required");
    let seen: Seen = Arc::default();
    let pongs: Arc<Mutex<Vec<(Instant, f64)>>> = Arc::default();
    let (ping_tx, ping_rx) = std::sync::mpsc::sync_channel::<f64>(1);
    spawn_ros(args.cmd_vel.clone(), seen.clone(), pongs.clone(), ping_rx);
    let mut echo = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--hop-echo")
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("starting the hop echo");
    std::thread::sleep(Duration::from_secs(2)); // discovery

    let hop = hop_floor(&ping_tx, &pongs);
    let _ = echo.kill();
    let _ = echo.wait();
    let hop_p50 = percentile(&hop, 0.5);
    println!("floor: one DDS hop (Twist, process to process, half a round trip), {} hops: p50 {:.3} ms, p99 {:.3} ms", hop.len(), hop_p50, percentile(&hop, 0.99));

    let mut agent = AiccClient::connect_to(&args.host, args.port).forgetting_others();
    let mut latencies = Vec::new();
    for i in 0..args.repeats {
        let forward = if i % 2 == 0 { 0.03 } else { -0.03 };
        let sent = Instant::now();
        if let Err(error) =
            call(&mut agent, &format!("a{i}"), "move", json!({ "forward": forward }))
        {
            // Not counted: on a loaded machine the simulator's data may go stale.
            println!("move a{i} failed, not counted: {}", error["message"]);
            continue;
        }
        if let Some((first, _)) = seen.lock().unwrap().iter().find(|(t, v)| *t >= sent && *v != 0.0)
        {
            latencies.push(first.duration_since(sent).as_secs_f64() * 1e3);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(agent);
    latencies.sort_by(f64::total_cmp);
    let p50 = percentile(&latencies, 0.5);
    println!("actuation latency (move call -> first governed /cmd_vel on ROS), {} of {} moves: p50 {:.2} ms ({:.1}x the hop), p99 {:.2} ms", latencies.len(), args.repeats, p50, p50 / hop_p50, percentile(&latencies, 0.99));

    let mut deadman = Vec::new();
    for i in 0..args.deadman_repeats {
        std::thread::sleep(Duration::from_millis(500));
        let mut agent = AiccClient::connect_to(&args.host, args.port).forgetting_others();
        let velocity = if i % 2 == 0 { 0.15 } else { -0.15 };
        agent.send_call(
            &format!("d{i}"),
            "move",
            json!({ "velocity_mps": velocity, "duration_s": 3.0 }),
        );
        // Moving at speed for a while, then the agent vanishes.
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(2)
            && !seen.lock().unwrap().iter().any(|(t, v)| *t >= started && v.abs() >= 0.1)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(100));
        let closed = Instant::now();
        drop(agent);
        std::thread::sleep(Duration::from_millis(800));
        let seen = seen.lock().unwrap();
        let before = seen.iter().rev().find(|(t, _)| *t < closed).map(|(_, v)| v.abs());
        let first = seen
            .iter()
            .find(|(t, v)| *t >= closed && (*v == 0.0 || before.is_some_and(|b| v.abs() < b)));
        if let (Some(_), Some((at, _))) = (before, first) {
            deadman.push(at.duration_since(closed).as_secs_f64() * 1e3);
        }
    }
    deadman.sort_by(f64::total_cmp);
    if !deadman.is_empty() {
        println!("deadman (agent socket closed mid-move -> first zero or braking /cmd_vel), {} of {}: p50 {:.2} ms, p99 {:.2} ms", deadman.len(), args.deadman_repeats, percentile(&deadman, 0.5), percentile(&deadman, 0.99));
    }
}

/// One node on a thread of its own: /cmd_vel seen, pings out, pongs in.
fn spawn_ros(
    cmd_vel: String,
    seen: Seen,
    pongs: Arc<Mutex<Vec<(Instant, f64)>>>,
    pings: std::sync::mpsc::Receiver<f64>,
) {
    std::thread::spawn(move || {
        let context = r2r::Context::create().expect("ROS context");
        let mut node = r2r::Node::create(context, "actuation_bench", "").expect("node");
        let mut commands = node
            .subscribe::<Twist>(&cmd_vel, r2r::QosProfile::default().best_effort())
            .expect("subscribe");
        let mut pong_stream =
            node.subscribe::<Twist>(PONG_TOPIC, r2r::QosProfile::default()).expect("subscribe");
        let ping = node
            .create_publisher::<Twist>(PING_TOPIC, r2r::QosProfile::default())
            .expect("publisher");
        let mut pool = futures::executor::LocalPool::new();
        use futures::task::LocalSpawnExt;
        pool.spawner()
            .spawn_local(async move {
                while let Some(twist) = commands.next().await {
                    seen.lock().unwrap().push((Instant::now(), twist.linear.x));
                }
            })
            .unwrap();
        pool.spawner()
            .spawn_local(async move {
                while let Some(twist) = pong_stream.next().await {
                    pongs.lock().unwrap().push((Instant::now(), twist.linear.x));
                }
            })
            .unwrap();
        loop {
            while let Ok(sequence) = pings.try_recv() {
                let mut twist = Twist::default();
                twist.linear.x = sequence;
                ping.publish(&twist).expect("publishing a ping");
            }
            node.spin_once(Duration::from_micros(200));
            pool.run_until_stalled();
        }
    });
}

/// Half of each ping's round trip through the echo process, in ms.
fn hop_floor(
    pings: &std::sync::mpsc::SyncSender<f64>,
    pongs: &Mutex<Vec<(Instant, f64)>>,
) -> Vec<f64> {
    let mut hops = Vec::new();
    for sequence in 1..=HOPS {
        let sent = Instant::now();
        pings.send(sequence as f64).unwrap();
        while sent.elapsed() < Duration::from_secs(1) {
            if let Some((at, _)) = pongs.lock().unwrap().iter().find(|(_, s)| *s == sequence as f64)
            {
                hops.push(at.duration_since(sent).as_secs_f64() * 1e3 / 2.0);
                break;
            }
            std::hint::spin_loop();
        }
    }
    hops.sort_by(f64::total_cmp);
    hops
}

/// The echo end of the floor: every ping goes straight back as a pong.
fn hop_echo() {
    let context = r2r::Context::create().expect("ROS context");
    let mut node = r2r::Node::create(context, "actuation_bench_echo", "").expect("node");
    let mut pings =
        node.subscribe::<Twist>(PING_TOPIC, r2r::QosProfile::default()).expect("subscribe");
    let pong =
        node.create_publisher::<Twist>(PONG_TOPIC, r2r::QosProfile::default()).expect("publisher");
    let mut pool = futures::executor::LocalPool::new();
    use futures::task::LocalSpawnExt;
    pool.spawner()
        .spawn_local(async move {
            while let Some(twist) = pings.next().await {
                pong.publish(&twist).expect("publishing a pong");
            }
        })
        .unwrap();
    loop {
        node.spin_once(Duration::from_millis(5));
        pool.run_until_stalled();
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Sends a call and waits for its result: its error, if it failed.
fn call(agent: &mut AiccClient, call_id: &str, tool: &str, input: Value) -> Result<(), Value> {
    let result = agent.call(call_id, tool, input);
    if result["ok"] == true {
        Ok(())
    } else {
        Err(result["error"].clone())
    }
}
