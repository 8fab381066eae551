//! Perception freshness beside the simulated robot: frames per second the
//! simulator published, the bridge received and a plain reliable
//! subscriber received; the age of the frames `vision` serves (by the
//! simulator's clock) against a plain subscriber's receipt delay; and the
//! bridge's CPU meanwhile. Prints figures; asserts nothing. Run beside a
//! bridge and the simulator (scripts/bench.sh does).
//!
//!   aicc-bench-freshness --port N [--pid BRIDGE_PID] [--seconds 10] [--calls 50]
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aicc_wire::blocking::AiccClient;
use clap::Parser;
use futures::StreamExt;
use serde_json::{json, Value};

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long)]
    port: u16,
    /// The bridge's process id, for its CPU time.
    #[arg(long)]
    pid: Option<u32>,
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// `vision` calls for the age figures.
    #[arg(long, default_value_t = 50)]
    calls: usize,
    #[arg(long, default_value = "/camera/image_raw")]
    camera: String,
}

/// What the bench's own node sees.
#[derive(Default)]
struct Seen {
    clock_s: Option<f64>,
    /// Receipt delay of each frame, by the latest /clock.
    frame_delays_s: Vec<f64>,
    frames_published: Option<u64>,
}

fn seconds(stamp: &r2r::builtin_interfaces::msg::Time) -> f64 {
    f64::from(stamp.sec) + f64::from(stamp.nanosec) * 1e-9
}

fn spawn_reference(camera: String, seen: Arc<Mutex<Seen>>) {
    std::thread::spawn(move || {
        let context = r2r::Context::create().expect("ROS context");
        let mut node = r2r::Node::create(context, "freshness_bench", "").expect("node");
        let mut clock = node
            .subscribe::<r2r::rosgraph_msgs::msg::Clock>("/clock", r2r::QosProfile::default())
            .expect("subscribe /clock");
        let mut frames = node
            .subscribe::<r2r::sensor_msgs::msg::Image>(
                &camera,
                r2r::QosProfile::default().reliable().keep_last(5),
            )
            .expect("subscribe camera");
        let mut world = node
            .subscribe::<r2r::std_msgs::msg::String>(
                "/ground_truth/world",
                r2r::QosProfile::default(),
            )
            .expect("subscribe world");
        let mut pool = futures::executor::LocalPool::new();
        use futures::task::LocalSpawnExt;
        let (a, b, c) = (seen.clone(), seen.clone(), seen);
        pool.spawner()
            .spawn_local(async move {
                while let Some(msg) = clock.next().await {
                    a.lock().unwrap().clock_s = Some(seconds(&msg.clock));
                }
            })
            .unwrap();
        pool.spawner()
            .spawn_local(async move {
                while let Some(msg) = frames.next().await {
                    let mut seen = b.lock().unwrap();
                    if let Some(now_s) = seen.clock_s {
                        seen.frame_delays_s.push(now_s - seconds(&msg.header.stamp));
                    }
                }
            })
            .unwrap();
        pool.spawner()
            .spawn_local(async move {
                while let Some(msg) = world.next().await {
                    let published = serde_json::from_str::<Value>(&msg.data)
                        .ok()
                        .and_then(|w| w["camera_frames_published"].as_u64());
                    c.lock().unwrap().frames_published = published;
                }
            })
            .unwrap();
        loop {
            node.spin_once(Duration::from_millis(1));
            pool.run_until_stalled();
        }
    });
}

/// The distinct camera frames the bridge has received, from its status.
fn camera_frames(aicc: &mut AiccClient, call_id: &str) -> u64 {
    let status = aicc.call(call_id, "bridge_status", json!({}));
    status["output"]["sensors"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["sensor"] == "camera"))
        .and_then(|c| c["distinct_stamps"].as_u64())
        .unwrap_or(0)
}

fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let args = Args::parse();
    let seen = Arc::new(Mutex::new(Seen::default()));
    spawn_reference(args.camera.clone(), seen.clone());
    std::thread::sleep(Duration::from_secs(3)); // discovery
                                                // The published count comes with the simulator's ground truth (5 Hz):
                                                // a count taken before its first message would read as 0, and the
                                                // rate as every frame since the simulator started.
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.lock().unwrap().frames_published.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut aicc = AiccClient::connect_to(&args.host, args.port).forgetting_others();

    let snapshot = |aicc: &mut AiccClient, id: &str| {
        let seen = seen.lock().unwrap();
        (Instant::now(), seen.frames_published, seen.frame_delays_s.len(), camera_frames(aicc, id))
    };
    let cpu_before = args.pid.and_then(cpu_seconds);
    let (t0, published0, plain0, bridge0) = snapshot(&mut aicc, "s0");
    std::thread::sleep(Duration::from_secs(args.seconds));
    let (t1, published1, plain1, bridge1) = snapshot(&mut aicc, "s1");
    let cpu_after = args.pid.and_then(cpu_seconds);
    let elapsed = t1.duration_since(t0).as_secs_f64();
    let rate = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / elapsed;
    let published = match (published0, published1) {
        (Some(a), Some(b)) => format!("{:.1}", rate(a, b)),
        _ => "unknown (no ground truth from the simulator)".to_string(),
    };
    println!(
        "camera frames per second over {elapsed:.1} s: published {published}, received by the bridge {:.1}, by a plain reliable subscriber {:.1}",
        rate(bridge0, bridge1),
        rate(plain0 as u64, plain1 as u64)
    );
    if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
        println!(
            "bridge CPU while receiving (an agent connected, not asking): {:.1} % of one core",
            100.0 * (after - before) / elapsed
        );
    }

    let mut served_ages_s = Vec::new();
    let cpu_before = args.pid.and_then(cpu_seconds);
    let calls_started = Instant::now();
    for n in 0..args.calls {
        let result = aicc.call(&format!("v{n}"), "vision", json!({}));
        let clock_s = seen.lock().unwrap().clock_s;
        if let (Some(clock_s), Some(stamp_s)) = (clock_s, result["output"]["stamp_s"].as_f64()) {
            served_ages_s.push(clock_s - stamp_s);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let calls_elapsed = calls_started.elapsed().as_secs_f64();
    let cpu_after = args.pid.and_then(cpu_seconds);
    let mut delays = seen.lock().unwrap().frame_delays_s.clone();
    if served_ages_s.is_empty() || delays.is_empty() {
        println!("no ages measured (is the simulator publishing /clock and the camera?)");
        return;
    }
    println!(
        "served frame age (vision, JPEG q80, by the sim clock), {} calls: p50 {:.1} ms, p99 {:.1} ms; a plain subscriber's receipt delay: p50 {:.1} ms, p99 {:.1} ms",
        served_ages_s.len(),
        percentile(&mut served_ages_s, 0.5) * 1e3,
        percentile(&mut served_ages_s, 0.99) * 1e3,
        percentile(&mut delays, 0.5) * 1e3,
        percentile(&mut delays, 0.99) * 1e3
    );
    if let (Some(before), Some(after)) = (cpu_before, cpu_after) {
        println!(
            "bridge CPU while serving 1 vision call per ~{:.0} ms: {:.1} % of one core",
            1e3 * calls_elapsed / args.calls as f64,
            100.0 * (after - before) / calls_elapsed
        );
    }
}
