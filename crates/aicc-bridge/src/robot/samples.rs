//! The latest sample of each sensor, as the robot side received it: the
//! standard [`SensorPort`]. The ROS adapter writes into it from its
//! subscriptions; tests and the replay robot write into it directly.
//! Readers copy a sample out under a short lock; images stay as received
//! (decoding happens only when a tool asks).
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};

use super::age::{stamp_status, NodeClock, Now, StampStatus, SystemClock};
use super::frames::SharedFrames;
use super::names::Names;
use super::port::{Sensor, SensorPort, SensorStatistics};
use super::wire::{WireSample, WireSwitch, WireType};
use super::{
    Battery, CameraFrame, CameraInfo, Contacts, ImuSample, JointStates, LaserScan, OdometrySample,
    Stamped,
};
use crate::perception::RawImage;

/// One slot per sensor.
#[derive(Debug, Default, Clone)]
pub struct Latest {
    pub odom: Option<OdometrySample>,
    pub imu: Option<ImuSample>,
    pub camera: Option<Stamped<CameraFrame>>,
    pub camera_info: Option<Stamped<CameraInfo>>,
    pub depth: Option<Stamped<RawImage>>,
    pub depth_info: Option<Stamped<CameraInfo>>,
    pub joint_states: Option<Stamped<JointStates>>,
    pub contacts: Option<Stamped<Contacts>>,
    pub battery: Option<Stamped<Battery>>,
    pub scan: Option<Stamped<LaserScan>>,
    pub hazards: Option<Stamped<Vec<crate::governor::hazards::Hazard>>>,
}

impl Latest {
    fn received(&self, sensor: Sensor) -> Option<Instant> {
        match sensor {
            Sensor::Odometry => self.odom.as_ref().map(|s| s.received),
            Sensor::Imu => self.imu.as_ref().map(|s| s.received),
            Sensor::Camera => self.camera.as_ref().map(|s| s.received),
            Sensor::CameraInfo => self.camera_info.as_ref().map(|s| s.received),
            Sensor::Depth => self.depth.as_ref().map(|s| s.received),
            Sensor::DepthInfo => self.depth_info.as_ref().map(|s| s.received),
            Sensor::JointStates => self.joint_states.as_ref().map(|s| s.received),
            Sensor::Bumper => self.contacts.as_ref().map(|s| s.received),
            Sensor::Battery => self.battery.as_ref().map(|s| s.received),
            Sensor::Scan => self.scan.as_ref().map(|s| s.received),
            Sensor::Hazards => self.hazards.as_ref().map(|s| s.received),
        }
    }
}

/// What one sensor has delivered so far.
#[derive(Debug, Default, Clone, Copy)]
struct Delivery {
    received: u64,
    distinct_stamps: u64,
    last_stamp_s: Option<f64>,
    last_receipt_delay_s: Option<f64>,
    last_stamp_status: Option<StampStatus>,
}

/// The latest samples, the names of their topics, the node's clock, and
/// what each sensor delivered.
pub struct SampleStore {
    latest: Mutex<Latest>,
    names: Names,
    clock: Arc<dyn NodeClock>,
    deliveries: Mutex<[Delivery; Sensor::ALL.len()]>,
    /// Why a subscription may receive nothing (a QoS mismatch), per sensor.
    qos_notes: Mutex<[Option<String>; Sensor::ALL.len()]>,
    /// The TF tree, filled by the robot side from /tf and /tf_static.
    frames: SharedFrames,
    /// On while a recorder wants the samples' wire form.
    wire_switch: std::sync::OnceLock<WireSwitch>,
    /// Whether wire forms are kept before a recorder shares its switch: a
    /// bridge recording from the start receives its first messages before
    /// the recorder exists, and a tool may serve one of them.
    wire_before_switch: bool,
    /// The latest samples' wire forms per sensor (the newest last, at most
    /// [`WIRE_KEPT`]), kept while the switch is on.
    wire: Mutex<[VecDeque<WireSample>; Sensor::ALL.len()]>,
}

/// Wire forms kept per sensor: a tool that read a sample looks its wire
/// form up a moment later, and by then the next message may have come (on
/// a loaded machine a frame the vision tool served was missing from the
/// recording when only the latest was kept).
const WIRE_KEPT: usize = 3;

impl SampleStore {
    /// A store whose capture ages count in `clock` (the node's clock).
    pub fn new(names: Names, clock: Arc<dyn NodeClock>) -> Self {
        Self {
            latest: Mutex::new(Latest::default()),
            names,
            clock,
            deliveries: Mutex::new([Delivery::default(); Sensor::ALL.len()]),
            qos_notes: Mutex::new(Default::default()),
            frames: SharedFrames::default(),
            wire_switch: std::sync::OnceLock::new(),
            wire_before_switch: false,
            wire: Mutex::new(Default::default()),
        }
    }

    /// Keeps the wire form of each message until a recorder shares its
    /// switch (the configuration records sensor samples from the start).
    pub fn keeping_wire_from_start(self) -> Self {
        Self { wire_before_switch: true, ..self }
    }

    /// A store on the system's wall clock (tests, robots without ROS time).
    pub fn with_system_clock(names: Names) -> Self {
        Self::new(names, Arc::new(SystemClock))
    }

    /// The slots, for the robot side to fill. Hold the guard briefly: every
    /// reader waits on it. Call [`SampleStore::delivered`] for each message.
    pub fn lock(&self) -> MutexGuard<'_, Latest> {
        self.latest.lock()
    }

    /// Notes why `sensor`'s subscription may receive nothing (None: no
    /// reason known); returns whether that changed.
    pub fn note_qos(&self, sensor: Sensor, note: Option<String>) -> bool {
        let mut notes = self.qos_notes.lock();
        let slot = &mut notes[sensor as usize];
        let changed = *slot != note;
        *slot = note;
        changed
    }

    /// Whether the robot side should keep the wire form of each message
    /// now (a recorder wants samples): check before serialising.
    pub fn wants_wire(&self) -> bool {
        self.wire_switch.get().map_or(self.wire_before_switch, WireSwitch::is_on)
    }

    /// Keeps `data`, the wire form of the message of `sensor` received at
    /// `received` (the instant given to its decoded sample).
    pub fn put_wire(
        &self,
        sensor: Sensor,
        kind: &WireType,
        data: Arc<[u8]>,
        received: Instant,
        received_wall: std::time::SystemTime,
    ) {
        let sample = WireSample {
            topic: kind.topic.clone(),
            type_name: kind.type_name.clone(),
            schema: kind.schema.clone(),
            data,
            received,
            received_wall,
        };
        let mut wire = self.wire.lock();
        let kept = &mut wire[sensor as usize];
        if kept.len() >= WIRE_KEPT {
            kept.pop_front();
        }
        kept.push_back(sample);
    }

    /// Counts a message of `sensor` stamped `stamp_s`, just received.
    pub fn delivered(&self, sensor: Sensor, stamp_s: f64) {
        let clock_s = self.clock.now_s();
        let status = stamp_status(stamp_s, clock_s);
        let mut deliveries = self.deliveries.lock();
        let delivery = &mut deliveries[sensor as usize];
        delivery.received += 1;
        if delivery.last_stamp_s != Some(stamp_s) {
            delivery.distinct_stamps += 1;
        }
        delivery.last_stamp_s = Some(stamp_s);
        delivery.last_stamp_status = Some(status);
        delivery.last_receipt_delay_s = match (status, clock_s) {
            (StampStatus::Valid, Some(clock_s)) => Some((clock_s - stamp_s).max(0.0)),
            _ => None,
        };
    }
}

impl SensorPort for SampleStore {
    fn odometry(&self) -> Option<OdometrySample> {
        self.latest.lock().odom.clone()
    }
    fn imu(&self) -> Option<ImuSample> {
        self.latest.lock().imu.clone()
    }
    fn camera(&self) -> Option<Stamped<CameraFrame>> {
        self.latest.lock().camera.clone()
    }
    fn camera_info(&self) -> Option<Stamped<CameraInfo>> {
        self.latest.lock().camera_info.clone()
    }
    fn depth(&self) -> Option<Stamped<RawImage>> {
        self.latest.lock().depth.clone()
    }
    fn depth_info(&self) -> Option<Stamped<CameraInfo>> {
        self.latest.lock().depth_info.clone()
    }
    fn joint_states(&self) -> Option<Stamped<JointStates>> {
        self.latest.lock().joint_states.clone()
    }
    fn contacts(&self) -> Option<Stamped<Contacts>> {
        self.latest.lock().contacts.clone()
    }
    fn battery(&self) -> Option<Stamped<Battery>> {
        self.latest.lock().battery.clone()
    }
    fn scan(&self) -> Option<Stamped<LaserScan>> {
        self.latest.lock().scan.clone()
    }
    fn hazards(&self) -> Option<Stamped<Vec<crate::governor::hazards::Hazard>>> {
        self.latest.lock().hazards.clone()
    }
    fn received(&self, sensor: Sensor) -> Option<Instant> {
        self.latest.lock().received(sensor)
    }
    fn topic(&self, sensor: Sensor) -> String {
        self.names.sensor(sensor).to_string()
    }
    fn now(&self) -> Now {
        Now::of(self.clock.as_ref())
    }
    fn frames(&self) -> Option<SharedFrames> {
        Some(self.frames.clone())
    }

    fn wire_sample(&self, sensor: Sensor, received: Instant) -> Option<WireSample> {
        let wire = self.wire.lock();
        wire[sensor as usize].iter().rev().find(|sample| sample.received == received).cloned()
    }

    fn share_wire_switch(&self, switch: WireSwitch) {
        let _ = self.wire_switch.set(switch);
    }

    fn statistics(&self) -> Vec<SensorStatistics> {
        let deliveries = *self.deliveries.lock();
        let notes = self.qos_notes.lock().clone();
        Sensor::ALL
            .iter()
            .filter(|sensor| !self.names.sensor(**sensor).is_empty())
            .map(|&sensor| {
                let delivery = deliveries[sensor as usize];
                SensorStatistics {
                    sensor: sensor.key(),
                    topic: self.names.sensor(sensor).to_string(),
                    received: delivery.received,
                    distinct_stamps: delivery.distinct_stamps,
                    last_stamp_s: delivery.last_stamp_s,
                    last_receipt_delay_ms: delivery.last_receipt_delay_s.map(|s| s * 1e3),
                    last_stamp_status: delivery.last_stamp_status,
                    qos_note: notes[sensor as usize].clone(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct FixedClock(f64);

    impl NodeClock for FixedClock {
        fn now_s(&self) -> Option<f64> {
            Some(self.0)
        }
    }

    #[test]
    fn deliveries_count_messages_and_distinct_frames_with_their_receipt_delay() {
        let names = Names::default().with_sensor(Sensor::Camera, "/camera/image_raw");
        let store = SampleStore::new(names, Arc::new(FixedClock(100.0)));
        store.delivered(Sensor::Camera, 99.96);
        store.delivered(Sensor::Camera, 99.96);
        store.delivered(Sensor::Camera, 0.0);
        let stats = store.statistics();
        assert_eq!(stats.len(), 1, "only configured sensors: {stats:?}");
        let camera = &stats[0];
        assert_eq!((camera.sensor, camera.received, camera.distinct_stamps), ("camera", 3, 2));
        assert_eq!(
            (camera.last_receipt_delay_ms, camera.last_stamp_status),
            (None, Some(StampStatus::Missing))
        );
        store.delivered(Sensor::Camera, 99.99);
        let camera = &store.statistics()[0];
        assert!((camera.last_receipt_delay_ms.unwrap() - 10.0).abs() < 1e-6, "{camera:?}");
        assert_eq!(store.now().clock_s, Some(100.0));
    }

    #[test]
    fn a_store_recording_from_the_start_keeps_wire_forms_until_the_recorder_decides() {
        let plain = SampleStore::with_system_clock(Names::default());
        assert!(!plain.wants_wire(), "no recorder yet, none configured: nothing kept");
        let recording = SampleStore::with_system_clock(Names::default()).keeping_wire_from_start();
        assert!(recording.wants_wire(), "before the recorder exists: kept");
        let switch = WireSwitch::default();
        recording.share_wire_switch(switch.clone());
        assert!(!recording.wants_wire(), "the recorder's switch decides once shared");
        switch.set(true);
        assert!(recording.wants_wire());
    }

    #[test]
    fn a_sample_read_just_before_newer_messages_came_still_has_its_wire_form() {
        let store = SampleStore::with_system_clock(Names::default());
        let kind = WireType {
            topic: "/camera/image_raw".into(),
            type_name: "sensor_msgs/msg/Image".into(),
            schema: "".into(),
        };
        let start = Instant::now();
        let at = |ms: u64| start + std::time::Duration::from_millis(ms);
        let put = |ms: u64| {
            store.put_wire(
                Sensor::Camera,
                &kind,
                Arc::from(vec![ms as u8]),
                at(ms),
                std::time::SystemTime::now(),
            )
        };
        put(0);
        put(33);
        put(66);
        let served = store
            .wire_sample(Sensor::Camera, at(0))
            .expect("read at 0 ms, looked up after two newer frames");
        assert_eq!(&served.data[..], &[0u8][..]);
        assert!(
            store.wire_sample(Sensor::Camera, at(10)).is_none(),
            "no message was received at 10 ms"
        );
        put(99);
        assert!(
            store.wire_sample(Sensor::Camera, at(0)).is_none(),
            "three newer frames: the oldest is gone (bounded)"
        );
        assert_eq!(
            &store.wire_sample(Sensor::Camera, at(99)).expect("the newest").data[..],
            &[99u8][..]
        );
    }
}
