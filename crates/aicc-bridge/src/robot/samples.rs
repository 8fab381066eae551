//! The latest sample of each sensor, as the robot side received it: the
//! standard [`SensorPort`]. The ROS adapter writes into it from its
//! subscriptions; tests and the replay robot write into it directly.
//! Readers copy a sample out under a short lock; images stay as received
//! (decoding happens only when a tool asks).
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard};

use super::names::Names;
use super::port::{Sensor, SensorPort};
use super::{Battery, CameraFrame, CameraInfo, Contacts, ImuSample, JointStates, OdometrySample, Stamped};
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
        }
    }
}

/// The latest samples and the names of their topics.
#[derive(Debug, Default)]
pub struct SampleStore {
    latest: Mutex<Latest>,
    names: Names,
}

impl SampleStore {
    pub fn new(names: Names) -> Self {
        Self { latest: Mutex::new(Latest::default()), names }
    }

    /// The slots, for the robot side to fill. Hold the guard briefly: every
    /// reader waits on it.
    pub fn lock(&self) -> MutexGuard<'_, Latest> {
        self.latest.lock()
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
    fn received(&self, sensor: Sensor) -> Option<Instant> {
        self.latest.lock().received(sensor)
    }
    fn topic(&self, sensor: Sensor) -> String {
        self.names.sensor(sensor).to_string()
    }
}
