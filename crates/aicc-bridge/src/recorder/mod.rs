//! The flight recorder: an observer on the bridge's tap ([`crate::tap`])
//! that writes what crosses the core to MCAP files (docs/recording.md).
//!
//! It never slows the robot's control nor blocks a tool: a task copies tap
//! records into a bounded queue (a full queue loses records, counted in
//! the file), and a thread of its own does the encoding and the disk
//! writes. A directory that cannot be written, or a disk that fills up,
//! ends the recording with an error in the log and a `state_change` event
//! (`change: recording_failed`); the bridge goes on.
pub mod layout;
pub mod sink;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::config::{RecordConfig, RecordMode};
use crate::tap::{Lagged, Tap, TapRecord};
use crate::tools::ToolEvent;
use layout::{Channel, Encoder};
use sink::{Origin, Sink};

/// How often buffered records are put on disk when traffic is light.
const FLUSH_PERIOD: Duration = Duration::from_secs(1);

/// What the recorder is doing, for tools and diagnostics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Status {
    /// The file being written, if any.
    pub path: Option<PathBuf>,
    /// Every file of the current (or last) recording, in order.
    pub parts: Vec<PathBuf>,
    /// Messages written to the current recording.
    pub messages: u64,
    /// Records the recorder lost (slow disk, full queue) since it started.
    pub lost: u64,
    /// Why the last recording ended early.
    pub last_error: Option<String>,
}

enum Job {
    Record(Arc<TapRecord>),
    Shutdown,
}

/// The handle the bridge keeps.
pub struct Recorder {
    jobs: SyncSender<Job>,
    status: Arc<Mutex<Status>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Recorder {
    /// Starts recording as `config` says (nothing at all with mode `off`).
    /// `events` receives the recorder's state_change events. Must be
    /// called inside a tokio runtime.
    pub fn start(tap: &Tap, config: &RecordConfig, events: tokio::sync::mpsc::Sender<ToolEvent>) -> Arc<Self> {
        let (jobs, receiver) = std::sync::mpsc::sync_channel(config.queue.max(1));
        let status = Arc::new(Mutex::new(Status::default()));
        let lost = Arc::new(AtomicU64::new(0));
        let mut writer = Writer { config: config.clone(), sink: None, encoder: Encoder::default(), status: status.clone(), lost: lost.clone(), lost_written: 0, events };
        if config.mode == RecordMode::Always {
            writer.begin(Origin { reason: "always".into(), detail: String::new() });
        }
        let thread = std::thread::Builder::new()
            .name("aicc-recorder".into())
            .spawn(move || {
                loop {
                    match receiver.recv_timeout(FLUSH_PERIOD) {
                        Ok(Job::Record(record)) => writer.record(&record),
                        Ok(Job::Shutdown) | Err(RecvTimeoutError::Disconnected) => break,
                        Err(RecvTimeoutError::Timeout) => writer.flush(),
                    }
                }
                writer.end();
            })
            .expect("starting the recorder thread");
        if config.mode != RecordMode::Off {
            tokio::spawn(forward(tap.subscribe(), jobs.clone(), lost));
        }
        Arc::new(Self { jobs, status, thread: Mutex::new(Some(thread)) })
    }

    /// What it is doing now.
    pub fn status(&self) -> Status {
        self.status.lock().clone()
    }

    /// Writes what is queued, ends the file (summary and footer) and
    /// returns when it is on disk.
    pub fn close(&self) {
        // Blocking here is fine: the bridge is shutting down.
        let _ = self.jobs.send(Job::Shutdown);
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
    }
}

/// Copies tap records into the writer's queue; never waits for it.
async fn forward(mut tap: crate::tap::TapReceiver, jobs: SyncSender<Job>, lost: Arc<AtomicU64>) {
    while let Some(item) = tap.recv().await {
        match item {
            Ok(record) => match jobs.try_send(Job::Record(record)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    lost.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => return,
            },
            Err(Lagged(count)) => {
                lost.fetch_add(count, Ordering::Relaxed);
            }
        }
    }
}

/// The recorder thread's state.
struct Writer {
    config: RecordConfig,
    sink: Option<Sink>,
    encoder: Encoder,
    status: Arc<Mutex<Status>>,
    /// Records lost before reaching the thread (counted by the forwarder).
    lost: Arc<AtomicU64>,
    /// The count last written to the file's recorder channel.
    lost_written: u64,
    events: tokio::sync::mpsc::Sender<ToolEvent>,
}

fn wall_ns(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Writer {
    fn notify(&self, payload: Value) {
        // The event queue is bounded; a full one loses the event, never waits.
        let _ = self.events.try_send(("state_change".into(), payload, None));
    }

    /// Starts a recording; an error is reported, never raised.
    fn begin(&mut self, origin: Origin) {
        let dir = PathBuf::from(&self.config.dir);
        self.adopt(Sink::create(&dir, self.config.max_file_bytes, origin, SystemTime::now()));
    }

    /// Records into `sink` from now on, or reports why it could not be opened.
    fn adopt(&mut self, sink: Result<Sink, sink::SinkError>) {
        match sink {
            Ok(sink) => {
                let path = sink.path().map(PathBuf::from);
                tracing::info!(path = %path.as_deref().unwrap_or(std::path::Path::new("?")).display(), "recording");
                {
                    let mut status = self.status.lock();
                    status.path = path.clone();
                    status.parts = sink.parts();
                    status.messages = 0;
                    status.last_error = None;
                }
                self.sink = Some(sink);
                self.notify(json!({ "change": "recording_started", "entity": "recorder", "path": path }));
            }
            Err(error) => self.fail(error.to_string()),
        }
    }

    /// Ends the recording after an error: logged, told to agents, kept in the status.
    fn fail(&mut self, reason: String) {
        tracing::error!(%reason, "recording stopped; the bridge goes on without it");
        if let Some(sink) = self.sink.take() {
            // Best effort: the summary may not fit on a full disk either.
            let _ = sink.finish();
        }
        {
            let mut status = self.status.lock();
            status.path = None;
            status.last_error = Some(reason.clone());
        }
        self.notify(json!({ "change": "recording_failed", "entity": "recorder", "reason": reason }));
    }

    fn write(&mut self, channel: Channel, log_time_ns: u64, message: &Value) {
        let Some(sink) = self.sink.as_mut() else { return };
        let data = serde_json::to_vec(message).expect("JSON serialises");
        match sink.write(channel, log_time_ns, &data) {
            Ok(()) => {
                let mut status = self.status.lock();
                status.messages += 1;
                status.path = sink.path().map(PathBuf::from);
                if status.parts.last().map(PathBuf::as_path) != sink.path() {
                    status.parts = sink.parts();
                }
            }
            Err(error) => self.fail(error.to_string()),
        }
    }

    fn record(&mut self, record: &TapRecord) {
        let at = wall_ns(record.wall);
        let lost = self.lost.load(Ordering::Relaxed);
        if lost != self.lost_written {
            self.status.lock().lost = lost;
            self.write(Channel::Recorder, at, &json!({ "kind": "lost", "records": lost - self.lost_written }));
            self.lost_written = lost;
        }
        for (channel, message) in self.encoder.encode(record) {
            self.write(channel, at, &message);
        }
    }

    fn flush(&mut self) {
        if let Some(sink) = self.sink.as_mut() {
            if let Err(error) = sink.flush() {
                self.fail(error.to_string());
            }
        }
    }

    fn end(&mut self) {
        if let Some(sink) = self.sink.take() {
            match sink.finish() {
                Ok(parts) => {
                    tracing::info!(files = ?parts, "recording finished");
                    let mut status = self.status.lock();
                    status.path = None;
                    status.parts = parts;
                }
                Err(error) => {
                    let reason = error.to_string();
                    tracing::error!(%reason, "recording could not be finished");
                    self.status.lock().last_error = Some(reason);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::tap::TapBody;

    fn config(dir: &std::path::Path) -> RecordConfig {
        RecordConfig { mode: RecordMode::Always, dir: dir.display().to_string(), ..RecordConfig::default() }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("aicc-recorder-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    #[tokio::test]
    async fn the_tap_is_recorded_and_the_file_finished_on_close() {
        let dir = temp_dir("tap");
        let tap = Tap::new(64);
        let (events, mut told) = tokio::sync::mpsc::channel(8);
        let recorder = Recorder::start(&tap, &config(&dir), events);
        assert_eq!(told.try_recv().unwrap().1["change"], "recording_started");
        tap.record(Some(1), || TapBody::Connected { peer: "127.0.0.1:5".into() });
        tap.record(Some(1), || TapBody::Inbound { line: Arc::from(&b"{\"type\":\"manifest_request\"}"[..]) });
        tap.record(Some(1), || TapBody::Outbound { message: Arc::new(json!({ "type": "session_init", "session_id": "s" })), droppable: false });
        tap.record(None, || TapBody::LeaseReleased);
        settle().await;
        let path = recorder.status().path.expect("recording");
        recorder.close();
        let bytes = std::fs::read(&path).unwrap();
        let topics: Vec<String> = mcap::MessageStream::new(&bytes).unwrap().map(|m| m.unwrap().channel.topic.clone()).collect();
        assert_eq!(topics, ["/aicc/connections", "/aicc/in", "/aicc/out", "/aicc/lease"]);
        assert_eq!(recorder.status().parts, vec![path]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn an_unwritable_directory_is_an_event_and_the_status_not_a_panic() {
        let blocker = temp_dir("blocker");
        std::fs::write(&blocker, b"not a directory").unwrap();
        let tap = Tap::new(64);
        let (events, mut told) = tokio::sync::mpsc::channel(8);
        let recorder = Recorder::start(&tap, &config(&blocker.join("sub")), events);
        let (topic, payload, _) = told.try_recv().unwrap();
        assert_eq!((topic.as_str(), &payload["change"]), ("state_change", &json!("recording_failed")));
        assert!(payload["reason"].as_str().unwrap().contains("aicc-recorder-"), "{payload}");
        tap.record(Some(1), || TapBody::Disconnected);
        settle().await;
        let status = recorder.status();
        assert!(status.path.is_none() && status.last_error.is_some(), "{status:?}");
        recorder.close();
        let _ = std::fs::remove_file(&blocker);
    }

    #[tokio::test]
    async fn a_full_disk_ends_the_recording_with_an_event() {
        // /dev/full: every write fails with ENOSPC, as on a full disk.
        if !std::path::Path::new("/dev/full").exists() {
            return;
        }
        let tap = Tap::new(64);
        let (events, mut told) = tokio::sync::mpsc::channel(8);
        let mut writer = Writer { config: config(std::path::Path::new("/dev")), sink: None, encoder: Encoder::default(), status: Arc::new(Mutex::new(Status::default())), lost: Arc::new(AtomicU64::new(0)), lost_written: 0, events };
        // The disk may be found full when the file is opened or on a later write.
        writer.adopt(Sink::on_file(PathBuf::from("/dev/full"), 1 << 20));
        let started = Instant::now();
        let record = TapRecord { seq: 1, at: started, wall: SystemTime::now(), conn: Some(1), body: TapBody::Outbound { message: Arc::new(json!({ "big": "x".repeat(100_000) })), droppable: false } };
        for _ in 0..40 {
            writer.record(&record);
        }
        writer.flush();
        let payload = std::iter::from_fn(|| told.try_recv().ok()).map(|(_, payload, _)| payload).find(|p| p["change"] != "recording_started").expect("an event");
        assert_eq!(payload["change"], "recording_failed");
        assert!(payload["reason"].as_str().unwrap().contains("/dev/full"), "{payload}");
        assert!(writer.sink.is_none());
        drop(tap);
    }

    #[tokio::test]
    async fn mode_off_records_nothing_and_copies_nothing() {
        let tap = Tap::new(8);
        let (events, mut told) = tokio::sync::mpsc::channel(8);
        let recorder = Recorder::start(&tap, &RecordConfig::default(), events);
        assert!(!tap.is_observed(), "no observer: the tap copies nothing");
        assert!(told.try_recv().is_err());
        recorder.close();
    }
}
