//! What decides how the robot may move, with no I/O: the safety governor
//! (pure functions over plain structs: limits, obstacles and coverage,
//! staleness, contacts, the geofence) and the base motion controller
//! (odometry, the governor's verdict and `now` in, a velocity setpoint out).
//! Everything is tested on virtual time; the bridge feeds them and publishes
//! what they decide. No tokio and no ROS may be imported here: the
//! compiler enforces the layer (this crate's dependencies are the proof).
pub mod governor;
pub mod motion;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
