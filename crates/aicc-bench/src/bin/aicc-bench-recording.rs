//! The flight recorder's cost, on the test robot (no ROS): prints figures,
//! asserts nothing. Two bridges in this process, one recording
//! (`record.mode: always`) and one not, fed the same sensors (odometry,
//! IMU, joints, a 640x480 camera); rounds alternate between them so that
//! the machine's noise falls on both, and the figures are ratios of the
//! one run:
//! - the round trip of `proprioception` and of `vision`, median and p90,
//!   with and without recording, and the overhead in percent;
//! - the bytes the recording holds per call of each tool, and per minute
//!   of a typical session (one proprioception a second, a vision every
//!   five seconds), from the file read back.
//!
//! aicc-bench-recording [--rounds 6] [--proprioception 100] [--vision 10]
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aicc_bridge::RecordMode;
use aicc_testkit::{loopback_config, AiccClient, TestBridge};
use serde_json::{json, Value};

const WIDTH: u32 = 640;
const HEIGHT: u32 = 480;

/// A bridge on a robot standing still, its sensors at 30 Hz with a
/// 640x480 camera (none without `camera`: under a profiler, copying its
/// frames would starve the other sensors); recording everything into
/// `record_dir` when given.
fn start(record_dir: Option<&Path>, camera: bool) -> TestBridge {
    let mut config = loopback_config("");
    if let Some(dir) = record_dir {
        config.record.mode = RecordMode::Always;
        config.record.dir = dir.display().to_string();
    }
    let mut bridge = TestBridge::start(config, |_| None);
    bridge.feed_standing(camera.then_some((WIDTH, HEIGHT)));
    bridge
}

/// One connection's calls, numbered, each with its round trip.
struct Client {
    aicc: AiccClient,
    next: u64,
}

impl Client {
    fn connect(port: u16) -> Self {
        Self { aicc: AiccClient::connect(port).0.forgetting_others(), next: 0 }
    }

    /// One call's result and round trip.
    fn call(&mut self, tool: &str) -> (Value, Duration) {
        self.next += 1;
        let started = Instant::now();
        let result = self.aicc.call(&format!("c{}", self.next), tool, json!({}));
        (result, started.elapsed())
    }

    /// Waits until `tool` answers ok (its sensors seen fresh).
    fn until_ok(&mut self, tool: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.call(tool).0["ok"] != true {
            assert!(Instant::now() < deadline, "{tool} never answered ok");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn number(words: &mut impl Iterator<Item = String>, name: &str) -> usize {
    words.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} takes a number"))
}

fn quantile(samples: &mut [Duration], q: f64) -> f64 {
    samples.sort();
    samples[((samples.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e3
}

fn main() {
    let (mut rounds, mut proprioception, mut vision) = (6, 100, 10);
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        match word.as_str() {
            "--rounds" => rounds = number(&mut words, &word),
            "--proprioception" => proprioception = number(&mut words, &word),
            "--vision" => vision = number(&mut words, &word),
            other => panic!("unknown argument {other}"),
        }
    }
    let dir: PathBuf =
        std::env::temp_dir().join(format!("aicc-bench-recording-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let plain = start(None, vision > 0);
    let recording = start(Some(&dir), vision > 0);
    let mut clients = [Client::connect(plain.port), Client::connect(recording.port)];
    for client in &mut clients {
        client.until_ok("proprioception");
        if vision > 0 {
            client.until_ok("vision");
        }
    }
    // [bridge][tool] round trips.
    let mut times: [[Vec<Duration>; 2]; 2] = Default::default();
    let started = Instant::now();
    for round in 0..rounds {
        // Alternate which bridge goes first.
        for which in [round % 2, 1 - round % 2] {
            let client = &mut clients[which];
            for _ in 0..proprioception {
                let (result, took) = client.call("proprioception");
                assert_eq!(result["ok"], true, "{result}");
                times[which][0].push(took);
            }
            for _ in 0..vision {
                let (result, took) = client.call("vision");
                assert_eq!(result["ok"], true, "{result}");
                times[which][1].push(took);
            }
        }
    }
    let elapsed = started.elapsed();
    drop(clients);
    drop(recording); // the file finished
    drop(plain);
    println!("recording overhead ({rounds} alternating rounds of {proprioception} proprioception + {vision} vision calls per bridge, 640x480 camera):");
    let measured: Vec<(usize, &str)> = ["proprioception", "vision"]
        .into_iter()
        .enumerate()
        .filter(|(index, _)| !times[0][*index].is_empty())
        .collect();
    for (index, tool) in measured {
        let (off_median, off_p90) =
            (quantile(&mut times[0][index], 0.5), quantile(&mut times[0][index], 0.9));
        let (on_median, on_p90) =
            (quantile(&mut times[1][index], 0.5), quantile(&mut times[1][index], 0.9));
        println!(
            "  {tool:<15} median {off_median:.3} ms off, {on_median:.3} ms recording ({:+.1} %); p90 {off_p90:.3} / {on_p90:.3} ms ({:+.1} %)",
            (on_median / off_median - 1.0) * 100.0,
            (on_p90 / off_p90 - 1.0) * 100.0
        );
    }
    // What the file holds per call of each tool: the call's line and its result.
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the recording directory")
        .map(|e| e.unwrap().path())
        .collect();
    let mut file_bytes = 0;
    let mut per_tool: std::collections::HashMap<String, (u64, u64)> = Default::default();
    for file in &files {
        file_bytes += std::fs::metadata(file).unwrap().len();
        let recording = aicc_wire::recording::read_file(file).expect("the recording reads back");
        let mut tools: std::collections::HashMap<String, String> = Default::default();
        for message in &recording.messages {
            let body = &message.data["message"];
            let bytes = serde_json::to_vec(&message.data).unwrap().len() as u64;
            let tool = match (message.topic.as_str(), body["type"].as_str()) {
                ("/aicc/in", Some("tool_call")) => {
                    let tool = body["tool"].as_str().unwrap_or_default().to_string();
                    tools.insert(
                        body["call_id"].as_str().unwrap_or_default().to_string(),
                        tool.clone(),
                    );
                    tool
                }
                ("/aicc/out", Some("tool_result")) => tools
                    .get(body["call_id"].as_str().unwrap_or_default())
                    .cloned()
                    .unwrap_or_default(),
                _ => continue,
            };
            let entry = per_tool.entry(tool).or_default();
            entry.1 += bytes;
            if message.topic == "/aicc/in" {
                entry.0 += 1;
            }
        }
    }
    let per_call = |tool: &str| {
        per_tool.get(tool).map_or(0.0, |(calls, bytes)| *bytes as f64 / (*calls).max(1) as f64)
    };
    let (p, v) = (per_call("proprioception"), per_call("vision"));
    println!("recording size: {file_bytes} bytes in {} file(s) for {:.1} s of calls ({:.1} MB/min at this bench's rate)", files.len(), elapsed.as_secs_f64(), file_bytes as f64 / elapsed.as_secs_f64() * 60.0 / 1e6);
    println!("  per call: proprioception {p:.0} bytes, vision {v:.0} bytes (call line + result)");
    println!(
        "  a typical session (1 proprioception/s, 1 vision/5 s): {:.2} MB/min",
        (60.0 * p + 12.0 * v) / 1e6
    );
    let _ = std::fs::remove_dir_all(&dir);
}
