//! The flight recorder: an observer on the bridge's tap ([`crate::tap`])
//! that writes what crosses the core to MCAP files (docs/recording.md).
//!
//! It never slows the robot's control nor blocks a tool: a task copies tap
//! records into a bounded queue (a full queue loses records, counted in
//! the file), and a thread of its own does the encoding and the disk
//! writes. A directory that cannot be written, or a disk that fills up,
//! ends the recording with an error in the log and a `state_change` event
//! (`change: recording_failed`); the bridge goes on.
//!
//! Modes: `always` records from start to shutdown; `on_fault` keeps the
//! last `flight_window_s` seconds in a bounded ring in memory and writes
//! them out (a file of their own) on an emergency stop, a contact, an
//! agent lost with calls in flight, or on request (`record_start`);
//! `record_start` / `record_stop` (admin scope) start and end a recording
//! in any mode.
pub(crate) mod flight;
pub(crate) mod layout;
pub mod ros2msg;
pub(crate) mod sampling;
pub(crate) mod sink;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::config::{RecordConfig, RecordMode};
use crate::robot::wire::{SampleRecorder, WireSample, WireSwitch};
use crate::robot::{Sensor, SensorPort};
use crate::robot_events::{EventSender, RobotEvent};
use crate::tap::{Lagged, TapReceiver, TapRecord, TapSource};
use flight::{FlightRing, Kept, Trigger};
use layout::{Channel, Encoder};
use sampling::{Pacing, Written};
use sink::{Origin, Sink};

/// How often buffered records are put on disk when traffic is light.
const FLUSH_PERIOD: Duration = Duration::from_secs(1);
/// How often the recorder thread takes what the tap and the tools queued:
/// records are written in batches, and nothing on the bridge's side wakes
/// the thread (a wake-up per record cost more than the record itself).
const DRAIN_PERIOD: Duration = Duration::from_millis(10);
/// How long a control request waits for the recorder thread.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// The last flight-recorder dump: its file and trigger.
    pub last_dump: Option<(PathBuf, String)>,
}

/// What a control request answers.
pub(crate) type Reply = Result<Status, String>;

enum Job {
    /// Take the tap's records from this receiver from now on.
    Observe(TapReceiver),
    /// A sensor sample a tool read.
    Sample(WireSample),
    /// Start recording (a no-op when recording); `with_ring`: begin with
    /// the flight ring's content.
    Start {
        with_ring: bool,
        detail: String,
        reply: tokio::sync::oneshot::Sender<Reply>,
    },
    /// End the recording.
    Stop {
        reply: tokio::sync::oneshot::Sender<Reply>,
    },
    Shutdown,
}

/// The handle the bridge and the record tools keep.
pub struct Recorder {
    jobs: SyncSender<Job>,
    status: Arc<Mutex<Status>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    mode: RecordMode,
    lost: Arc<AtomicU64>,
    /// Whether a forwarder copies the tap now.
    forwarding: Arc<AtomicBool>,
    tap: Arc<Mutex<Option<TapSource>>>,
    /// On while a recording is written and sensor samples are wanted.
    wire: WireSwitch,
    /// The sensors whose latest samples are recorded at their rates.
    paced_sensors: PacedSensors,
}

/// Where the recorder thread reads the samples due at their rates.
type PacedSensors = Arc<OnceLock<Arc<dyn SensorPort>>>;

impl Recorder {
    /// The recorder thread, idle until [`Self::attach`]. `events` receives
    /// the recorder's state_change events. Needs no runtime.
    pub fn new(config: &RecordConfig, events: EventSender) -> Arc<Self> {
        let (jobs, receiver) = std::sync::mpsc::sync_channel(config.queue.max(1));
        let status = Arc::new(Mutex::new(Status::default()));
        let lost = Arc::new(AtomicU64::new(0));
        let ring = (config.mode == RecordMode::OnFault).then(|| {
            FlightRing::new(
                Duration::from_secs_f64(config.flight_window_s),
                config.flight_max_bytes,
            )
        });
        let wire = WireSwitch::default();
        let paced_sensors = PacedSensors::default();
        let mut writer = Writer::new(
            config.clone(),
            ring,
            status.clone(),
            lost.clone(),
            events,
            wire.clone(),
            paced_sensors.clone(),
        );
        if config.mode == RecordMode::Always {
            writer.begin(Origin { reason: "always".into(), detail: String::new() }, false);
        }
        let forwarding = Arc::new(AtomicBool::new(false));
        let observing = forwarding.clone();
        let sources: Arc<Mutex<Option<TapSource>>> = Arc::default();
        let source = sources.clone();
        let thread = std::thread::Builder::new()
            .name("aicc-recorder".into())
            .spawn(move || {
                let mut tap: Option<TapReceiver> = None;
                let mut next_flush = Instant::now() + FLUSH_PERIOD;
                'run: loop {
                    // Idle (nothing observed, nothing to write): sleep until asked.
                    let mut next = if tap.is_none() && writer.sink.is_none() {
                        match receiver.recv_timeout(FLUSH_PERIOD) {
                            Ok(job) => Some(job),
                            Err(RecvTimeoutError::Timeout) => None,
                            Err(RecvTimeoutError::Disconnected) => break 'run,
                        }
                    } else {
                        std::thread::sleep(DRAIN_PERIOD);
                        None
                    };
                    writer.drain(&mut tap);
                    loop {
                        let job = match next.take() {
                            Some(job) => job,
                            None => match receiver.try_recv() {
                                Ok(job) => job,
                                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                                Err(std::sync::mpsc::TryRecvError::Disconnected) => break 'run,
                            },
                        };
                        match job {
                            Job::Observe(receiver) => tap = Some(receiver),
                            Job::Sample(sample) => writer.sample(&sample),
                            Job::Start { with_ring, detail, reply } => {
                                if tap.is_none() {
                                    // Stopped observing after a recording ended: again from now on.
                                    tap = source.lock().as_ref().map(TapSource::subscribe);
                                    observing.store(tap.is_some(), Ordering::SeqCst);
                                }
                                writer.drain(&mut tap);
                                if writer.sink.is_none() {
                                    writer.begin(
                                        Origin { reason: "request".into(), detail },
                                        with_ring,
                                    );
                                }
                                let status = writer.status.lock().clone();
                                let _ = reply.send(match (&status.path, &status.last_error) {
                                    (Some(_), _) => Ok(status),
                                    (None, Some(error)) => Err(error.clone()),
                                    (None, None) => Err("the recording did not start".into()),
                                });
                            }
                            Job::Stop { reply } => {
                                writer.drain(&mut tap);
                                writer.end();
                                // No ring to keep: stop observing (the tap copies
                                // nothing again until a recording starts).
                                if writer.ring.is_none() {
                                    tap = None;
                                    observing.store(false, Ordering::SeqCst);
                                }
                                let _ = reply.send(Ok(writer.status.lock().clone()));
                            }
                            Job::Shutdown => break 'run,
                        }
                    }
                    writer.sample_due(Instant::now());
                    if Instant::now() >= next_flush {
                        next_flush = Instant::now() + FLUSH_PERIOD;
                        writer.flush();
                    }
                }
                writer.drain(&mut tap);
                writer.end();
                // Gone: nothing takes samples any more (the flight ring neither).
                writer.wire.set(false);
            })
            .expect("starting the recorder thread");
        Arc::new(Self {
            jobs,
            status,
            thread: Mutex::new(Some(thread)),
            mode: config.mode,
            lost,
            forwarding,
            tap: sources,
            wire,
            paced_sensors,
        })
    }

    /// The sensors whose latest samples are recorded at
    /// `record.sample_rates_hz` (the robot's own store: these reads are
    /// the recorder's, not a tool's). Once; later calls are ignored.
    pub fn pace_samples_of(&self, sensors: Arc<dyn SensorPort>) {
        let _ = self.paced_sensors.set(sensors);
    }

    /// Starts observing `tap` (only when the mode records something;
    /// otherwise when a recording is asked for).
    pub fn attach(&self, tap: TapSource) {
        *self.tap.lock() = Some(tap);
        if self.mode != RecordMode::Off {
            self.forward();
        }
    }

    /// Observes the tap from now on (once): the recorder thread takes its
    /// records in batches.
    fn forward(&self) {
        let Some(tap) = self.tap.lock().clone() else { return };
        if self.forwarding.swap(true, Ordering::SeqCst) {
            return;
        }
        // Subscribed here, before the request returns: nothing after it is missed.
        if self.jobs.try_send(Job::Observe(tap.subscribe())).is_err() {
            self.forwarding.store(false, Ordering::SeqCst);
        }
    }

    /// The switch telling the robot side when to keep the wire form of
    /// sensor samples (give it to [`crate::robot::SensorPort::share_wire_switch`]).
    pub fn wire_switch(&self) -> WireSwitch {
        self.wire.clone()
    }

    /// What it is doing now.
    pub fn status(&self) -> Status {
        self.status.lock().clone()
    }

    async fn ask(&self, job: impl FnOnce(tokio::sync::oneshot::Sender<Reply>) -> Job) -> Reply {
        let (reply, answer) = tokio::sync::oneshot::channel();
        match self.jobs.try_send(job(reply)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                return Err("the recorder is busy writing (its queue is full); try again".into())
            }
            Err(TrySendError::Disconnected(_)) => return Err("the recorder has stopped".into()),
        }
        match tokio::time::timeout(CONTROL_TIMEOUT, answer).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err("the recorder has stopped".into()),
            Err(_) => Err(format!(
                "the recorder did not answer within {} s (a slow disk?)",
                CONTROL_TIMEOUT.as_secs()
            )),
        }
    }

    /// Starts a recording (or reports the one under way); `with_ring`
    /// begins it with the flight ring (mode on_fault).
    pub async fn start_recording(&self, with_ring: bool, detail: String) -> Reply {
        self.forward();
        self.ask(|reply| Job::Start { with_ring, detail, reply }).await
    }

    /// Ends the recording under way; its files are complete when this returns.
    pub async fn stop_recording(&self) -> Reply {
        self.ask(|reply| Job::Stop { reply }).await
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

impl SampleRecorder for Recorder {
    fn wants_samples(&self) -> bool {
        self.wire.is_on()
    }

    fn sample_read(&self, sample: WireSample) {
        match self.jobs.try_send(Job::Sample(sample)) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                self.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The recorder thread's state.
struct Writer {
    config: RecordConfig,
    sink: Option<Sink>,
    encoder: Encoder,
    /// The last seconds, kept for a dump (mode on_fault).
    ring: Option<FlightRing>,
    status: Arc<Mutex<Status>>,
    /// Records lost before reaching the thread (counted by the forwarder).
    lost: Arc<AtomicU64>,
    /// The count last written to the file's recorder channel.
    lost_written: u64,
    events: EventSender,
    /// On while a recording or the flight ring is written (and `sensor_samples`).
    wire: WireSwitch,
    /// The samples written lately (their receipts): each once.
    written: Written,
    /// When the sensors with a rate are due for a sample.
    pacing: Pacing,
    paced_sensors: PacedSensors,
}

/// One more message in the file: counted, and the file's path and parts
/// noted when a rotation changed them.
fn count_written(status: &Mutex<Status>, sink: &Sink) {
    let mut status = status.lock();
    status.messages += 1;
    if status.path.as_deref() != sink.path() {
        status.path = sink.path().map(PathBuf::from);
        status.parts = sink.parts();
    }
}

fn wall_ns(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl Writer {
    fn new(
        config: RecordConfig,
        ring: Option<FlightRing>,
        status: Arc<Mutex<Status>>,
        lost: Arc<AtomicU64>,
        events: EventSender,
        wire: WireSwitch,
        paced_sensors: PacedSensors,
    ) -> Self {
        let pacing = Pacing::new(&config.sample_rates_hz);
        let writer = Self {
            config,
            sink: None,
            encoder: Encoder::default(),
            ring,
            status,
            lost,
            lost_written: 0,
            events,
            wire,
            written: Written::default(),
            pacing,
            paced_sensors,
        };
        writer.keep_wire();
        writer
    }

    /// Has the robot side keep the wire form of sensor samples while they
    /// can be written: a recording, or the flight ring (mode on_fault).
    fn keep_wire(&self) {
        self.wire.set(self.config.sensor_samples && (self.sink.is_some() || self.ring.is_some()));
    }

    fn notify(&self, payload: Value) {
        // The event queue is bounded; a full one loses the event, never waits.
        let _ = self.events.try_send(RobotEvent::for_all("state_change", payload));
    }

    /// Starts a recording; an error is reported, never raised.
    fn begin(&mut self, origin: Origin, with_ring: bool) {
        let dir = PathBuf::from(&self.config.dir);
        self.adopt(Sink::create(&dir, self.config.max_file_bytes, origin, SystemTime::now()));
        if with_ring {
            let kept: Vec<_> = self
                .ring
                .as_ref()
                .map(|ring| ring.contents().cloned().collect())
                .unwrap_or_default();
            for kept in kept {
                match kept {
                    Kept::Message(channel, at, data) => self.write_bytes(channel, at, &data),
                    Kept::Sample(sample, at) => {
                        // Noted: the rates do not write it a second time.
                        self.written.first_time(&sample.topic, sample.received);
                        self.write_sample(&sample, at);
                    }
                }
            }
        }
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
                self.written.clear();
                self.pacing.restart();
                self.keep_wire();
                self.notify(
                    json!({ "change": "recording_started", "entity": "recorder", "path": path }),
                );
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
        self.keep_wire();
        {
            let mut status = self.status.lock();
            status.path = None;
            status.last_error = Some(reason.clone());
        }
        self.notify(
            json!({ "change": "recording_failed", "entity": "recorder", "reason": reason }),
        );
    }

    fn write_bytes(&mut self, channel: Channel, log_time_ns: u64, data: &[u8]) {
        let Some(sink) = self.sink.as_mut() else { return };
        match sink.write(channel, log_time_ns, data) {
            Ok(()) => count_written(&self.status, sink),
            Err(error) => self.fail(error.to_string()),
        }
    }

    /// Writes the records the tap holds for the recorder (counting those it lost).
    fn drain(&mut self, tap: &mut Option<TapReceiver>) {
        let Some(receiver) = tap.as_mut() else { return };
        while let Some(item) = receiver.try_recv() {
            match item {
                Ok(record) => self.record(&record),
                Err(Lagged(count)) => {
                    self.lost.fetch_add(count, Ordering::Relaxed);
                }
            }
        }
    }

    fn record(&mut self, record: &TapRecord) {
        if self.sink.is_none() && self.ring.is_none() {
            return;
        }
        let at = wall_ns(record.wall);
        let mut messages = Vec::new();
        let lost = self.lost.load(Ordering::Relaxed);
        if lost != self.lost_written {
            self.status.lock().lost = lost;
            messages.push((
                Channel::Recorder,
                serde_json::to_vec(&json!({ "kind": "lost", "records": lost - self.lost_written }))
                    .expect("JSON serialises"),
            ));
            self.lost_written = lost;
        }
        let trigger = self.ring.as_mut().and_then(|ring| ring.trigger(record));
        messages.extend(self.encoder.encode_bytes(record));
        for (channel, data) in messages {
            if let Some(ring) = self.ring.as_mut() {
                ring.push(channel, at, data.clone(), record.at);
            }
            self.write_bytes(channel, at, &data);
        }
        if let Some(trigger) = trigger {
            self.dump(trigger, at);
        }
    }

    /// Keeps a sensor sample (one a tool read, or one due at its rate) in
    /// the file and the flight ring, unless already written.
    fn sample(&mut self, sample: &WireSample) {
        if self.sink.is_none() && self.ring.is_none() {
            return;
        }
        if !self.written.first_time(&sample.topic, sample.received) {
            return;
        }
        let at = wall_ns(sample.received_wall);
        if let Some(ring) = self.ring.as_mut() {
            ring.push_sample(sample.clone(), at, sample.received);
        }
        self.write_sample(sample, at);
    }

    fn write_sample(&mut self, sample: &WireSample, log_time_ns: u64) {
        let Some(sink) = self.sink.as_mut() else { return };
        match sink.write_sample(sample, log_time_ns) {
            Ok(()) => count_written(&self.status, sink),
            Err(error) => self.fail(error.to_string()),
        }
    }

    /// Keeps the latest sample of each sensor due at its rate
    /// (`record.sample_rates_hz`), read from the robot's store: a copy of
    /// the shared bytes, never a wait on the ROS side or a tool.
    fn sample_due(&mut self, now: Instant) {
        if self.pacing.is_empty() || !self.wire.is_on() {
            return;
        }
        let Some(sensors) = self.paced_sensors.get().cloned() else { return };
        for sensor in Sensor::ALL {
            if !self.pacing.is_due(sensor, now) {
                continue;
            }
            // None: nothing received yet, or its bytes not kept (it came
            // before the recording began): due until a sample has them.
            if let Some(sample) =
                sensors.received(sensor).and_then(|received| sensors.wire_sample(sensor, received))
            {
                self.sample(&sample);
                self.pacing.done(sensor, now);
            }
        }
    }

    /// Writes the flight ring to a file of its own (mode on_fault).
    fn dump(&mut self, trigger: Trigger, at: u64) {
        let Some(ring) = self.ring.as_mut() else { return };
        let reason = trigger.to_string();
        let note = serde_json::to_vec(&json!({ "kind": "trigger", "reason": reason }))
            .expect("JSON serialises");
        let kept: Vec<_> = ring.drain().collect();
        let written = (|| {
            let mut sink = Sink::create(
                std::path::Path::new(&self.config.dir),
                self.config.max_file_bytes,
                Origin { reason: "on_fault".into(), detail: reason.clone() },
                SystemTime::now(),
            )?;
            for kept in &kept {
                match kept {
                    Kept::Message(channel, time, data) => sink.write(*channel, *time, data)?,
                    Kept::Sample(sample, time) => sink.write_sample(sample, *time)?,
                }
            }
            sink.write(Channel::Recorder, at, &note)?;
            sink.finish()
        })();
        match written {
            Ok(parts) => {
                let path = parts.first().cloned().unwrap_or_default();
                tracing::warn!(trigger = %reason, path = %path.display(), messages = kept.len(), "flight recorder: the last seconds written");
                self.status.lock().last_dump = Some((path.clone(), reason.clone()));
                self.notify(json!({ "change": "flight_recording_written", "entity": "recorder", "path": path, "trigger": reason, "messages": kept.len() }));
            }
            Err(error) => {
                let reason = format!("flight recorder dump ({reason}): {error}");
                tracing::error!(%reason, "the bridge goes on without it");
                self.status.lock().last_error = Some(reason.clone());
                self.notify(
                    json!({ "change": "recording_failed", "entity": "recorder", "reason": reason }),
                );
            }
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
        self.keep_wire();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SampleRates;
    use crate::robot::names::Names;
    use crate::robot::samples::SampleStore;
    use crate::robot::wire::WireType;
    use crate::robot::{Battery, Stamped};
    use crate::tap::{Tap, TapBody};

    fn config(dir: &std::path::Path) -> RecordConfig {
        RecordConfig {
            mode: RecordMode::Always,
            dir: dir.display().to_string(),
            ..RecordConfig::default()
        }
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
        let recorder = Recorder::new(&config(&dir), events);
        recorder.attach(tap.source());
        assert_eq!(told.try_recv().unwrap().payload["change"], "recording_started");
        tap.record(Some(1), || TapBody::Connected { peer: "127.0.0.1:5".into() });
        tap.record(Some(1), || TapBody::Inbound {
            line: Arc::from(&b"{\"type\":\"manifest_request\"}"[..]),
        });
        tap.record(Some(1), || TapBody::Outbound {
            message: Arc::new(json!({ "type": "session_init", "session_id": "s" })),
            droppable: false,
        });
        tap.record(None, || TapBody::LeaseReleased);
        settle().await;
        let path = recorder.status().path.expect("recording");
        recorder.close();
        let bytes = std::fs::read(&path).unwrap();
        let topics: Vec<String> = mcap::MessageStream::new(&bytes)
            .unwrap()
            .map(|m| m.unwrap().channel.topic.clone())
            .collect();
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
        let recorder = Recorder::new(&config(&blocker.join("sub")), events);
        recorder.attach(tap.source());
        let RobotEvent { topic, payload, .. } = told.try_recv().unwrap();
        assert_eq!(
            (topic.as_str(), &payload["change"]),
            ("state_change", &json!("recording_failed"))
        );
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
        let mut writer = Writer::new(
            config(std::path::Path::new("/dev")),
            None,
            Arc::new(Mutex::new(Status::default())),
            Arc::new(AtomicU64::new(0)),
            events,
            WireSwitch::default(),
            PacedSensors::default(),
        );
        // The disk may be found full when the file is opened or on a later write.
        writer.adopt(Sink::on_file(PathBuf::from("/dev/full"), 1 << 20));
        let started = Instant::now();
        let record = TapRecord {
            seq: 1,
            at: started,
            wall: SystemTime::now(),
            conn: Some(1),
            body: TapBody::Outbound {
                message: Arc::new(json!({ "big": "x".repeat(100_000) })),
                droppable: false,
            },
        };
        for _ in 0..40 {
            writer.record(&record);
        }
        writer.flush();
        let payload = std::iter::from_fn(|| told.try_recv().ok())
            .map(|event| event.payload)
            .find(|p| p["change"] != "recording_started")
            .expect("an event");
        assert_eq!(payload["change"], "recording_failed");
        assert!(payload["reason"].as_str().unwrap().contains("/dev/full"), "{payload}");
        assert!(writer.sink.is_none());
        drop(tap);
    }

    #[tokio::test]
    async fn record_start_and_stop_in_mode_off_give_the_file() {
        let dir = temp_dir("control");
        let tap = Tap::new(64);
        let (events, _told) = tokio::sync::mpsc::channel(8);
        let recorder =
            Recorder::new(&RecordConfig { mode: RecordMode::Off, ..config(&dir) }, events);
        recorder.attach(tap.source());
        assert!(!tap.is_observed());
        let started = recorder.start_recording(false, "test".into()).await.unwrap();
        let path = started.path.clone().expect("a file");
        assert!(tap.is_observed(), "observing once asked to record");
        let again = recorder.start_recording(false, "again".into()).await.unwrap();
        assert_eq!(again.path, Some(path.clone()), "one recording at a time");
        tap.record(Some(1), || TapBody::Connected { peer: "p".into() });
        settle().await;
        let stopped = recorder.stop_recording().await.unwrap();
        assert_eq!((stopped.path, stopped.parts), (None, vec![path.clone()]));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(mcap::MessageStream::new(&bytes).unwrap().count(), 1);
        recorder.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn on_fault_a_stop_writes_the_last_seconds_and_nothing_before() {
        let dir = temp_dir("flight");
        let tap = Tap::new(64);
        let (events, mut told) = tokio::sync::mpsc::channel(8);
        let recorder =
            Recorder::new(&RecordConfig { mode: RecordMode::OnFault, ..config(&dir) }, events);
        recorder.attach(tap.source());
        tap.record(Some(1), || TapBody::Connected { peer: "p".into() });
        tap.record(Some(1), || TapBody::Inbound {
            line: Arc::from(&br#"{"type":"tool_call","tool":"bridge_status","call_id":"a"}"#[..]),
        });
        settle().await;
        assert!(
            std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0) == 0,
            "nothing written before a fault"
        );
        tap.record(Some(1), || TapBody::Inbound {
            line: Arc::from(&br#"{"type":"tool_call","tool":"stop","call_id":"halt"}"#[..]),
        });
        settle().await;
        let (path, trigger) = recorder.status().last_dump.expect("a dump");
        assert!(trigger.contains("emergency stop"), "{trigger}");
        let payload = std::iter::from_fn(|| told.try_recv().ok())
            .map(|event| event.payload)
            .find(|p| p["change"] == "flight_recording_written")
            .expect("an event");
        assert_eq!(payload["path"], path.display().to_string());
        let bytes = std::fs::read(&path).unwrap();
        let topics: Vec<String> = mcap::MessageStream::new(&bytes)
            .unwrap()
            .map(|m| m.unwrap().channel.topic.clone())
            .collect();
        assert_eq!(topics, ["/aicc/connections", "/aicc/in", "/aicc/in", "/aicc/recorder"]);
        recorder.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_sample_read_twice_is_written_once_and_only_while_recording() {
        let dir = temp_dir("samples");
        let (events, _told) = tokio::sync::mpsc::channel(8);
        let recorder =
            Recorder::new(&RecordConfig { mode: RecordMode::Off, ..config(&dir) }, events);
        let tap = Tap::new(64);
        recorder.attach(tap.source());
        assert!(!recorder.wants_samples(), "not recording: no samples wanted");
        let received = Instant::now();
        let sample = |received: Instant| WireSample {
            topic: "/odom".into(),
            type_name: "nav_msgs/msg/Odometry".into(),
            schema: String::new().into(),
            data: Arc::from(&[0u8, 1, 0, 0, 42][..]),
            received,
            received_wall: SystemTime::now(),
        };
        let started = recorder.start_recording(false, "samples".into()).await.unwrap();
        assert!(recorder.wants_samples());
        recorder.sample_read(sample(received));
        recorder.sample_read(sample(received));
        recorder.sample_read(sample(received + Duration::from_millis(1)));
        settle().await;
        recorder.stop_recording().await.unwrap();
        assert!(!recorder.wants_samples());
        recorder.sample_read(sample(received + Duration::from_millis(2)));
        settle().await;
        let bytes = std::fs::read(started.path.unwrap()).unwrap();
        let topics: Vec<String> = mcap::MessageStream::new(&bytes)
            .unwrap()
            .map(|m| m.unwrap().channel.topic.clone())
            .collect();
        assert_eq!(topics, ["/odom", "/odom"], "each sample once, none after the recording");
        recorder.close();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A store whose battery sample received at `at` (virtual time) has
    /// bytes `ms` (its offset) and a wall clock of `ms` after the epoch.
    fn receive_battery(store: &SampleStore, at: Instant, ms: u64) {
        let kind = WireType {
            topic: "/battery".into(),
            type_name: "sensor_msgs/msg/BatteryState".into(),
            schema: String::new().into(),
        };
        store.lock().battery = Some(Stamped {
            value: Battery { fraction: 0.5, voltage_v: 12.0, charging: false },
            frame_id: String::new(),
            stamp_s: ms as f64 / 1e3,
            received: at,
        });
        store.put_wire(
            Sensor::Battery,
            &kind,
            Arc::from(&ms.to_le_bytes()[..]),
            at,
            SystemTime::UNIX_EPOCH + Duration::from_millis(ms),
        );
    }

    fn store_paced(store: &Arc<SampleStore>) -> PacedSensors {
        let paced = PacedSensors::default();
        let _ = paced.set(store.clone() as Arc<dyn SensorPort>);
        paced
    }

    fn battery_times_ms(path: &std::path::Path) -> Vec<u64> {
        let bytes = std::fs::read(path).unwrap();
        mcap::MessageStream::new(&bytes)
            .unwrap()
            .map(|m| m.unwrap())
            .filter(|m| m.channel.topic == "/battery")
            .map(|m| m.log_time / 1_000_000)
            .collect()
    }

    #[test]
    fn samples_due_at_their_rate_are_written_beside_those_tools_read_each_once() {
        let dir = temp_dir("paced");
        let (events, _told) = tokio::sync::mpsc::channel(8);
        let store = Arc::new(SampleStore::with_system_clock(Names::default()));
        let rates = SampleRates { battery: 5.0, ..SampleRates::default() };
        let mut writer = Writer::new(
            RecordConfig { sample_rates_hz: rates, ..config(&dir) },
            None,
            Arc::new(Mutex::new(Status::default())),
            Arc::new(AtomicU64::new(0)),
            events,
            WireSwitch::default(),
            store_paced(&store),
        );
        store.share_wire_switch(writer.wire.clone());
        assert!(!store.wants_wire(), "nothing recorded: no bytes kept");
        writer.adopt(Sink::create(
            &dir,
            1 << 20,
            Origin { reason: "test".into(), detail: String::new() },
            SystemTime::now(),
        ));
        assert!(store.wants_wire(), "recording: bytes kept");
        // A 20 Hz battery for one second, the recorder looking every 10 ms
        // (virtual time); a tool reads the sample of 400 ms (the rate's own
        // at that instant) and, at 730 ms, that of 700 ms.
        let start = Instant::now();
        for ms in (0..=1000).step_by(10) {
            let now = start + Duration::from_millis(ms);
            if ms % 50 == 0 {
                receive_battery(&store, now, ms);
            }
            if ms == 400 || ms == 730 {
                let received = store.received(Sensor::Battery).unwrap();
                writer.sample(&store.wire_sample(Sensor::Battery, received).unwrap());
            }
            writer.sample_due(now);
        }
        writer.end();
        assert!(!store.wants_wire(), "the recording ended: no bytes kept");
        let parts = writer.status.lock().parts.clone();
        assert_eq!(
            battery_times_ms(&parts[0]),
            [0, 200, 400, 600, 700, 800, 1000],
            "5 Hz, the tool's 700 ms beside them, 400 ms once"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn on_fault_the_ring_keeps_the_samples_and_a_stop_writes_them() {
        let dir = temp_dir("flight-samples");
        let tap = Tap::new(64);
        let (events, _told) = tokio::sync::mpsc::channel(8);
        let store = Arc::new(SampleStore::with_system_clock(Names::default()));
        let config = RecordConfig {
            mode: RecordMode::OnFault,
            sample_rates_hz: SampleRates { battery: 50.0, ..SampleRates::default() },
            ..config(&dir)
        };
        let recorder = Recorder::new(&config, events);
        store.share_wire_switch(recorder.wire_switch());
        recorder.pace_samples_of(store.clone());
        recorder.attach(tap.source());
        assert!(
            recorder.wants_samples() && store.wants_wire(),
            "on_fault: samples kept for the ring"
        );
        let start = Instant::now();
        receive_battery(&store, start, 7);
        settle().await;
        // A tool's read of an odometry sample, and the stop.
        recorder.sample_read(WireSample {
            topic: "/odom".into(),
            type_name: "nav_msgs/msg/Odometry".into(),
            schema: String::new().into(),
            data: Arc::from(&[0u8, 1, 0, 0, 42][..]),
            received: start,
            received_wall: SystemTime::now(),
        });
        settle().await;
        tap.record(Some(1), || TapBody::Inbound {
            line: Arc::from(&br#"{"type":"tool_call","tool":"stop","call_id":"halt"}"#[..]),
        });
        settle().await;
        let (path, _) = recorder.status().last_dump.expect("a dump");
        let bytes = std::fs::read(&path).unwrap();
        let topics: Vec<String> = mcap::MessageStream::new(&bytes)
            .unwrap()
            .map(|m| m.unwrap().channel.topic.clone())
            .collect();
        assert_eq!(
            topics,
            ["/battery", "/odom", "/aicc/in", "/aicc/recorder"],
            "the rate's sample (once), the tool's, then the stop"
        );
        assert_eq!(battery_times_ms(&path), [7]);
        recorder.close();
        assert!(!store.wants_wire(), "the recorder closed: no bytes kept");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn mode_off_records_nothing_and_copies_nothing() {
        let tap = Tap::new(8);
        let (events, mut told) = tokio::sync::mpsc::channel(8);
        let recorder = Recorder::new(&RecordConfig::default(), events);
        recorder.attach(tap.source());
        assert!(!tap.is_observed(), "no observer: the tap copies nothing");
        assert!(told.try_recv().is_err());
        recorder.close();
    }
}
