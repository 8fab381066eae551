//! Soak client: a scripted agent's session against a running bridge for a
//! given time (sensors, vision, depth, short moves and turns there and back,
//! a new session every so often), sampling the bridge process's resident
//! memory, threads and open file descriptors. Prints one line per sample and
//! a JSON summary; asserts nothing (a trend is judged on the series).
//!
//!   aicc-soak --port 43010 --pid PID [--minutes 30] [--sample-s 60]
//!             [--calls-per-session 200] [--json FILE]
use std::time::{Duration, Instant};

use aicc_agent::client::{transport, ClientError, Session, SessionOptions};
use clap::Parser;
use serde_json::{json, Value};

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 43010)]
    port: u16,
    /// The bridge's process id (its /proc entry is read).
    #[arg(long)]
    pid: u32,
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// Seconds between samples of the bridge's process.
    #[arg(long, default_value_t = 60.0)]
    sample_s: f64,
    /// Calls before the session is closed and a new one opened.
    #[arg(long, default_value_t = 200)]
    calls_per_session: u64,
    /// Writes the summary (and every sample) here as well.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// What /proc says of a process.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct ProcessSample {
    elapsed_s: f64,
    rss_mib: f64,
    threads: u64,
    fds: u64,
}

fn sample_process(pid: u32, started: Instant) -> std::io::Result<ProcessSample> {
    let figures = aicc_bench::process_figures(Some(pid))?;
    Ok(ProcessSample {
        elapsed_s: started.elapsed().as_secs_f64(),
        rss_mib: figures.rss_mib,
        threads: figures.threads,
        fds: figures.fds,
    })
}

/// The agent's script, one step per call: it looks around and moves there
/// and back, so that the robot stays where it started.
fn step(n: u64) -> (&'static str, Value) {
    match n % 8 {
        0 => ("proprioception", json!({})),
        1 => ("vision", json!({ "max_width": 160 })),
        2 => ("depth", json!({})),
        3 => ("move", json!({ "forward": 0.1 })),
        4 => ("move", json!({ "forward": -0.1 })),
        5 => ("turn", json!({ "yaw": 10.0 })),
        6 => ("turn", json!({ "yaw": -10.0 })),
        _ => ("bridge_status", json!({})),
    }
}

#[derive(Default, serde::Serialize)]
struct Counts {
    calls: u64,
    failed: u64,
    events: u64,
    sessions: u64,
    sessions_failed: u64,
}

async fn open(args: &Args) -> Result<Session, ClientError> {
    let options =
        SessionOptions { token: std::env::var("AICC_TOKEN").ok(), ..SessionOptions::default() };
    let stream = transport::connect(&args.host, args.port, None, options.timeout).await?;
    Session::open(stream, options).await
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(args.minutes * 60.0);
    let sample_every = Duration::from_secs_f64(args.sample_s);
    let mut samples =
        vec![sample_process(args.pid, started).expect("reading the bridge's /proc entry")];
    let mut next_sample = started + sample_every;
    let mut counts = Counts::default();
    let mut failures: Vec<String> = Vec::new();
    println!(
        "{:>8} {:>9} {:>7} {:>4} {:>7} {:>6} {:>7}",
        "t_s", "rss_MiB", "threads", "fds", "calls", "failed", "events"
    );
    let print = |s: &ProcessSample, c: &Counts| {
        println!(
            "{:>8.0} {:>9.1} {:>7} {:>4} {:>7} {:>6} {:>7}",
            s.elapsed_s, s.rss_mib, s.threads, s.fds, c.calls, c.failed, c.events
        )
    };
    print(&samples[0], &counts);
    let mut n = 0u64;
    while Instant::now() < end {
        let mut session = match open(&args).await {
            Ok(session) => session,
            Err(error) => {
                counts.sessions_failed += 1;
                failures.push(format!("opening a session: {error}"));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        counts.sessions += 1;
        for _ in 0..args.calls_per_session {
            if Instant::now() >= end {
                break;
            }
            let (tool, input) = step(n);
            n += 1;
            counts.calls += 1;
            if let Err(error) = session.call(tool, &input).await {
                counts.failed += 1;
                if failures.len() < 20 {
                    failures.push(format!("{tool}: {error}"));
                }
            }
            counts.events += session.flush_events().len() as u64;
            if Instant::now() >= next_sample {
                next_sample += sample_every;
                let sample = sample_process(args.pid, started).expect("the bridge is gone");
                print(&sample, &counts);
                samples.push(sample);
            }
        }
        let _ = session.close().await;
    }
    let last = sample_process(args.pid, started).expect("the bridge is gone");
    print(&last, &counts);
    samples.push(last);
    let (first, last) = (samples[0], *samples.last().unwrap());
    // Growth per 10 minutes from the second sample on (the first includes warm-up).
    let base = samples.get(1).copied().unwrap_or(first);
    let span_min = (last.elapsed_s - base.elapsed_s) / 60.0;
    let growth = if span_min > 0.0 { (last.rss_mib - base.rss_mib) / span_min * 10.0 } else { 0.0 };
    let rss: Vec<f64> = samples.iter().map(|s| s.rss_mib).collect();
    let summary = json!({
        "minutes": started.elapsed().as_secs_f64() / 60.0,
        "rss_mib": { "first": first.rss_mib, "last": last.rss_mib, "min": rss.iter().cloned().fold(f64::INFINITY, f64::min), "max": rss.iter().cloned().fold(0.0, f64::max), "growth_per_10_min_after_warmup": growth },
        "threads": { "min": samples.iter().map(|s| s.threads).min(), "max": samples.iter().map(|s| s.threads).max() },
        "fds": { "min": samples.iter().map(|s| s.fds).min(), "max": samples.iter().map(|s| s.fds).max() },
        "counts": counts,
        "failures": failures,
        "samples": samples,
    });
    println!("{}", serde_json::to_string(&summary["rss_mib"]).unwrap());
    println!("summary: {} calls ({} failed) in {} sessions ({} failed to open), {} events; RSS {:.1} -> {:.1} MiB ({:+.2} MiB per 10 min after warm-up); threads {}..{}; fds {}..{}",
        counts.calls, counts.failed, counts.sessions, counts.sessions_failed, counts.events, first.rss_mib, last.rss_mib, growth,
        summary["threads"]["min"], summary["threads"]["max"], summary["fds"]["min"], summary["fds"]["max"]);
    for failure in &failures {
        println!("failure: {failure}");
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&summary).unwrap())
            .expect("writing the summary");
    }
}
