//! Sensor samples in their wire form, for the flight recorder: the bytes
//! the robot side received (ROS: the CDR serialisation) beside the decoded
//! sample, handed to a [`SampleRecorder`] when a tool reads the sample.
//!
//! Nothing is kept or copied unless a recorder asks for samples (its
//! switch is on): the robot side checks [`WireSwitch::is_on`] before
//! serialising a message. Tools read through [`ToolSensors`], which gives
//! the recorder the wire form of exactly the sample the tool got (matched
//! by its receipt instant), once per sample however often it is read.
use std::sync::Arc;
use std::time::Instant;

use super::age::Now;
use super::frames::SharedFrames;
use super::port::{Sensor, SensorPort, SensorStatistics};
pub use super::port::{WireSample, WireSwitch, WireType};
use super::{
    Battery, CameraFrame, CameraInfo, Contacts, ImuSample, JointStates, LaserScan, OdometrySample,
    Stamped,
};
use crate::perception::RawImage;

/// Takes the samples tools read (the flight recorder). Never blocks.
pub(crate) trait SampleRecorder: Send + Sync + 'static {
    /// Whether samples are wanted now (skip looking them up otherwise).
    fn wants_samples(&self) -> bool;
    /// A tool read this sample.
    fn sample_read(&self, sample: WireSample);
}

/// The sensors as tools see them: every read also hands the sample's
/// wire form to the recorder, when it wants samples. The bridge's own
/// watchers (governor, monitors) read the store directly: only what a
/// tool read is recorded.
pub(crate) struct ToolSensors {
    inner: Arc<dyn SensorPort>,
    recorder: Arc<dyn SampleRecorder>,
}

impl ToolSensors {
    pub fn new(inner: Arc<dyn SensorPort>, recorder: Arc<dyn SampleRecorder>) -> Self {
        Self { inner, recorder }
    }

    fn note(&self, sensor: Sensor, received: Option<Instant>) {
        let Some(received) = received else { return };
        if !self.recorder.wants_samples() {
            return;
        }
        if let Some(sample) = self.inner.wire_sample(sensor, received) {
            self.recorder.sample_read(sample);
        }
    }

    fn stamped<T>(&self, sensor: Sensor, sample: Option<Stamped<T>>) -> Option<Stamped<T>> {
        self.note(sensor, sample.as_ref().map(|s| s.received));
        sample
    }
}

impl SensorPort for ToolSensors {
    fn odometry(&self) -> Option<OdometrySample> {
        let sample = self.inner.odometry();
        self.note(Sensor::Odometry, sample.as_ref().map(|s| s.received));
        sample
    }
    fn imu(&self) -> Option<ImuSample> {
        let sample = self.inner.imu();
        self.note(Sensor::Imu, sample.as_ref().map(|s| s.received));
        sample
    }
    fn camera(&self) -> Option<Stamped<CameraFrame>> {
        self.stamped(Sensor::Camera, self.inner.camera())
    }
    fn camera_info(&self) -> Option<Stamped<CameraInfo>> {
        self.stamped(Sensor::CameraInfo, self.inner.camera_info())
    }
    fn depth(&self) -> Option<Stamped<RawImage>> {
        self.stamped(Sensor::Depth, self.inner.depth())
    }
    fn depth_info(&self) -> Option<Stamped<CameraInfo>> {
        self.stamped(Sensor::DepthInfo, self.inner.depth_info())
    }
    fn joint_states(&self) -> Option<Stamped<JointStates>> {
        self.stamped(Sensor::JointStates, self.inner.joint_states())
    }
    fn contacts(&self) -> Option<Stamped<Contacts>> {
        self.stamped(Sensor::Bumper, self.inner.contacts())
    }
    fn battery(&self) -> Option<Stamped<Battery>> {
        self.stamped(Sensor::Battery, self.inner.battery())
    }
    fn scan(&self) -> Option<Stamped<LaserScan>> {
        self.stamped(Sensor::Scan, self.inner.scan())
    }
    fn hazards(&self) -> Option<Stamped<Vec<crate::governor::hazards::Hazard>>> {
        self.stamped(Sensor::Hazards, self.inner.hazards())
    }
    fn received(&self, sensor: Sensor) -> Option<Instant> {
        self.inner.received(sensor)
    }
    fn topic(&self, sensor: Sensor) -> String {
        self.inner.topic(sensor)
    }
    fn now(&self) -> Now {
        self.inner.now()
    }
    fn statistics(&self) -> Vec<SensorStatistics> {
        self.inner.statistics()
    }
    fn frames(&self) -> Option<SharedFrames> {
        self.inner.frames()
    }
    fn wire_sample(&self, sensor: Sensor, received: Instant) -> Option<WireSample> {
        self.inner.wire_sample(sensor, received)
    }
    fn share_wire_switch(&self, switch: WireSwitch) {
        self.inner.share_wire_switch(switch)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::SystemTime;

    use parking_lot::Mutex;

    use super::*;
    use crate::robot::names::Names;
    use crate::robot::samples::SampleStore;

    #[derive(Default)]
    struct Taken {
        on: AtomicBool,
        samples: Mutex<Vec<WireSample>>,
    }

    impl SampleRecorder for Taken {
        fn wants_samples(&self) -> bool {
            self.on.load(Ordering::Relaxed)
        }
        fn sample_read(&self, sample: WireSample) {
            self.samples.lock().push(sample);
        }
    }

    fn battery(received: Instant) -> Stamped<Battery> {
        Stamped {
            value: Battery { fraction: 0.5, voltage_v: 12.0, charging: false },
            frame_id: String::new(),
            stamp_s: 1.0,
            received,
        }
    }

    fn kind() -> WireType {
        WireType {
            topic: "/battery".into(),
            type_name: "sensor_msgs/msg/BatteryState".into(),
            schema: "float32 voltage\n".into(),
        }
    }

    #[test]
    fn a_tool_read_hands_the_wire_form_of_the_sample_it_got() {
        let store = Arc::new(SampleStore::with_system_clock(Names::default()));
        let switch = WireSwitch::default();
        store.share_wire_switch(switch.clone());
        let recorder = Arc::new(Taken::default());
        let sensors = ToolSensors::new(store.clone(), recorder.clone());
        let first = Instant::now();
        // Off: the robot side keeps no bytes, the tool's read hands nothing.
        assert!(!store.wants_wire());
        store.lock().battery = Some(battery(first));
        assert!(sensors.battery().is_some());
        assert!(recorder.samples.lock().is_empty());
        switch.set(true);
        recorder.on.store(true, Ordering::Relaxed);
        assert!(store.wants_wire());
        store.put_wire(
            Sensor::Battery,
            &kind(),
            Arc::from(&[0u8, 1, 0, 0, 7][..]),
            first,
            SystemTime::now(),
        );
        assert!(sensors.battery().is_some());
        let taken = recorder.samples.lock().clone();
        assert_eq!(taken.len(), 1);
        assert_eq!(
            (&*taken[0].topic, &taken[0].data[..], taken[0].received),
            ("/battery", &[0u8, 1, 0, 0, 7][..], first)
        );
        // Bytes of a newer message came after the decoded one was read: the
        // read hands the bytes of what it read (kept), never the newer ones.
        let later = first + std::time::Duration::from_millis(5);
        store.put_wire(Sensor::Battery, &kind(), Arc::from(&[9u8][..]), later, SystemTime::now());
        assert!(sensors.battery().is_some());
        let taken = recorder.samples.lock().clone();
        assert_eq!(taken.len(), 2);
        assert_eq!(
            (&taken[1].data[..], taken[1].received),
            (&[0u8, 1, 0, 0, 7][..], first),
            "the decoded sample's own bytes"
        );
        // The bridge's own watchers read the store: nothing handed.
        store.lock().battery = Some(battery(later));
        assert!(store.battery().is_some());
        assert_eq!(recorder.samples.lock().len(), 2);
        assert!(sensors.battery().is_some());
        let taken = recorder.samples.lock().clone();
        assert_eq!((taken.len(), &taken[2].data[..]), (3, &[9u8][..]));
    }
}
