//! The bridge's log records on `/rosout` (rcl_interfaces/Log) with the
//! node's name, as well as on stderr: rqt_console, `ros2 topic echo
//! /rosout` and rosbag see what the bridge says. A tracing layer hands
//! each record to a bounded queue (never blocking the code that logs; a
//! full queue drops the record from /rosout, not from stderr); a task
//! publishes them once the node exists.
use std::fmt::Write as _;
use std::sync::OnceLock;

use futures::StreamExt;
use r2r::rcl_interfaces::msg::Log;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// Records waiting to be published.
const QUEUE: usize = 1024;

/// One record, before the node's name and clock are known.
struct Record {
    level: u8,
    message: String,
    file: String,
    line: u32,
}

static SINK: OnceLock<futures::channel::mpsc::Sender<Record>> = OnceLock::new();

/// A tracing layer that forwards INFO and above to /rosout once [`connect`] ran.
pub struct RosoutLayer;

/// rcl_interfaces/Log levels.
fn level_of(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG | Level::TRACE => 10,
    }
}

/// The message and its fields as one line (`message key=value ...`).
#[derive(Default)]
struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            let _ = write!(self.0, " {}={value}", field.name());
        }
    }
}

impl<S: Subscriber> Layer<S> for RosoutLayer {
    fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
        let Some(sink) = SINK.get() else { return };
        let metadata = event.metadata();
        if *metadata.level() > Level::INFO {
            return;
        }
        let mut line = Line::default();
        event.record(&mut line);
        let record = Record {
            level: level_of(metadata.level()),
            message: line.0.trim().to_string(),
            file: metadata.file().unwrap_or("").to_string(),
            line: metadata.line().unwrap_or(0),
        };
        let _ = sink.clone().try_send(record);
    }
}

/// Starts publishing on the node's `/rosout` under `logger` (its name).
pub fn connect(node: &mut r2r::Node, logger: String) -> anyhow::Result<()> {
    // What rcl's own rosout publisher offers: reliable, kept for late joiners.
    let qos = r2r::QosProfile::default().reliable().transient_local().keep_last(1000);
    let publisher = node.create_publisher::<Log>("/rosout", qos)?;
    let clock = node.get_ros_clock();
    let (sender, mut records) = futures::channel::mpsc::channel::<Record>(QUEUE);
    if SINK.set(sender).is_err() {
        anyhow::bail!("/rosout is connected once per process");
    }
    tokio::spawn(async move {
        while let Some(record) = records.next().await {
            let stamp = clock
                .lock()
                .ok()
                .and_then(|mut c| c.get_now().ok())
                .map(|t| r2r::Clock::to_builtin_time(&t))
                .unwrap_or_default();
            let message = Log {
                stamp,
                level: record.level,
                name: logger.clone(),
                msg: record.message,
                file: record.file,
                function: String::new(),
                line: record.line,
            };
            // A failure here cannot be logged (it would come back here).
            let _ = publisher.publish(&message);
        }
    });
    Ok(())
}
