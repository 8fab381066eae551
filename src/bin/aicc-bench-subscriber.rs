//! The floor of an idle bridge's CPU: a bare r2r node that only receives
//! the given topics (as serialized bytes, the least a subscriber can do:
//! one copy out of the middleware) and drops each message. scripts/bench.sh
//! measures its CPU beside the bridge's, on the same camera flood.
//! Prints how many messages it received; asserts nothing.
//!
//!   aicc-bench-subscriber --seconds 14 /camera/image_raw:sensor_msgs/msg/Image ...
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;

#[derive(Parser, Debug)]
struct Args {
    /// How long to run.
    #[arg(long, default_value_t = 14.0)]
    seconds: f64,
    /// Subscribe reliable (history 2) instead of best effort: over best
    /// effort most of a 30 Hz 640x480 flood was lost on the way (283-296
    /// of about 1700 messages in 16 s).
    #[arg(long)]
    reliable: bool,
    /// TOPIC:TYPE pairs, e.g. /camera/image_raw:sensor_msgs/msg/Image.
    #[arg(required = true)]
    topics: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let context = r2r::Context::create()?;
    let mut node = r2r::Node::create(context, "subscriber_floor", "")?;
    let mut pool = futures::executor::LocalPool::new();
    use futures::task::LocalSpawnExt;
    let mut counts = Vec::new();
    for pair in &args.topics {
        let (topic, type_name) =
            pair.split_once(':').ok_or_else(|| anyhow::anyhow!("{pair}: expected TOPIC:TYPE"))?;
        let qos = if args.reliable {
            r2r::QosProfile::default().keep_last(2).reliable()
        } else {
            r2r::QosProfile::default().best_effort()
        };
        let mut stream = node.subscribe_raw(topic, type_name, qos)?;
        let received = std::rc::Rc::new(std::cell::Cell::new(0_u64));
        counts.push((topic.to_string(), received.clone()));
        pool.spawner().spawn_local(async move {
            while let Some(bytes) = stream.next().await {
                std::hint::black_box(bytes);
                received.set(received.get() + 1);
            }
        })?;
    }
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
    while Instant::now() < deadline {
        node.spin_once(Duration::from_millis(100));
        pool.run_until_stalled();
    }
    let total: u64 = counts.iter().map(|(_, n)| n.get()).sum();
    let each: Vec<String> =
        counts.iter().map(|(topic, n)| format!("{topic} {}", n.get())).collect();
    let qos = if args.reliable { "reliable" } else { "best effort" };
    println!(
        "subscriber floor ({qos}): received {total} messages in {:.0} s: {}",
        args.seconds,
        each.join(", ")
    );
    Ok(())
}
