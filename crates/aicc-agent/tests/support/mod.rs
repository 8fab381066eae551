//! The whole bridge in-process on its test robot, made to move: a feeder
//! thread integrates the base velocity the bridge publishes into odometry
//! (and IMU), and publishes a camera frame, a depth image and an empty
//! bumper, so that sensors are fresh and a `move` really gets somewhere.
//! The robot's pose is the ground truth the tests check against.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use aicc_bridge::images::RawImage;
use aicc_bridge::port::{
    CameraFrame, CameraInfo, Contacts, ImuSample, OdometrySample, Sensor, Stamped,
};
use aicc_bridge::Config;
use aicc_bridge::UnobservedPolicy;
use aicc_testkit::{joints_at_rest, loopback_config, TestBridge};
use nalgebra::{UnitQuaternion, Vector3};

/// The camera's native size; the left half is red, the right half blue.
pub const CAMERA_WIDTH: u32 = 160;
pub const CAMERA_HEIGHT: u32 = 120;
/// Sensor samples per second.
const FEED_HZ: f64 = 50.0;

/// The robot's pose in odom, as the feeder integrated it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pose {
    pub x: f64,
    pub y: f64,
    pub yaw: f64,
}

/// The bridge (its `port` and `robot` reached through it) and its feeder.
pub struct MovingBridge {
    bridge: TestBridge,
    pub pose: Arc<Mutex<Pose>>,
    /// Cleared: the camera stops publishing (its tool goes away).
    pub camera_on: Arc<AtomicBool>,
    /// The operator's token (AICC_OPERATOR_TOKEN) when tokens are
    /// configured; this module's own sessions use it.
    pub admin_token: Option<String>,
    stop: Arc<AtomicBool>,
    feeder: Option<JoinHandle<()>>,
}

impl std::ops::Deref for MovingBridge {
    type Target = TestBridge;
    fn deref(&self) -> &TestBridge {
        &self.bridge
    }
}

impl MovingBridge {
    pub fn pose(&self) -> Pose {
        *self.pose.lock().unwrap()
    }

    /// The last base velocity the bridge published (zero: stopped).
    pub fn last_velocity(&self) -> Option<(f64, f64)> {
        self.robot.actuators.velocities().last().map(|v| (v.linear_mps, v.angular_radps))
    }
}

impl Drop for MovingBridge {
    fn drop(&mut self) {
        // The feeder first; the bridge shuts down when dropped after it.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(feeder) = self.feeder.take() {
            let _ = feeder.join();
        }
    }
}

/// The default configuration on a free loopback port; a sensor silent for
/// `unavailable_after_s` leaves the manifest.
pub fn config(unavailable_after_s: f64) -> Config {
    config_with(unavailable_after_s, "")
}

/// As `config`, with more parameters (YAML under ros__parameters, indented
/// by four spaces).
pub fn config_with(unavailable_after_s: f64, parameters: &str) -> Config {
    let mut config = loopback_config(parameters);
    config.sensors.unavailable_after_s = unavailable_after_s;
    // The feeder's depth image is a wall 5 m away with no floor and its
    // head never moves, so no frame of it observes the way: the coverage
    // rule would refuse every move. These tests are about the protocol,
    // approvals and front ends; coverage is tested beside the simulated
    // robot (governor_sim, the adversarial scenarios).
    config.safety.unobserved_ahead = UnobservedPolicy::Allow;
    config.safety.unobserved_behind = UnobservedPolicy::Allow;
    config
}

pub fn start(config: Config) -> MovingBridge {
    start_with_tokens(config, &[])
}

/// As `start`, the bridge reading its tokens (security.tokens:
/// AICC_OPERATOR_TOKEN admin, AICC_TOKEN actuate, ...) from `tokens` as if
/// from the environment.
pub fn start_with_tokens(config: Config, tokens: &[(&str, &str)]) -> MovingBridge {
    let tokens: Vec<(String, String)> =
        tokens.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let admin_token =
        tokens.iter().find(|(k, _)| k == "AICC_OPERATOR_TOKEN").map(|(_, v)| v.clone());
    let bridge = TestBridge::start(config, move |name| {
        tokens.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    });
    let port = bridge.port;
    let pose = Arc::new(Mutex::new(Pose::default()));
    let camera_on = Arc::new(AtomicBool::new(true));
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = {
        let (samples, actuators, pose, camera_on, stop) = (
            bridge.robot.samples.clone(),
            bridge.robot.actuators.clone(),
            pose.clone(),
            camera_on.clone(),
            stop.clone(),
        );
        std::thread::spawn(move || {
            let period = Duration::from_secs_f64(1.0 / FEED_HZ);
            let mut last = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(period);
                let now = Instant::now();
                let dt = now.duration_since(last).as_secs_f64();
                last = now;
                let (linear, angular) = actuators
                    .velocities()
                    .last()
                    .map(|v| (v.linear_mps, v.angular_radps))
                    .unwrap_or((0.0, 0.0));
                let current = {
                    let mut pose = pose.lock().unwrap();
                    pose.x += linear * pose.yaw.cos() * dt;
                    pose.y += linear * pose.yaw.sin() * dt;
                    pose.yaw += angular * dt;
                    *pose
                };
                let stamp_s =
                    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
                let orientation = UnitQuaternion::from_euler_angles(0.0, 0.0, current.yaw);
                {
                    let mut latest = samples.lock();
                    latest.odom = Some(OdometrySample {
                        frame_id: "odom".into(),
                        child_frame_id: "base_footprint".into(),
                        position_m: Vector3::new(current.x, current.y, 0.0),
                        orientation,
                        linear_velocity_mps: Vector3::new(linear, 0.0, 0.0),
                        angular_velocity_radps: Vector3::new(0.0, 0.0, angular),
                        stamp_s,
                        received: now,
                    });
                    latest.imu = Some(ImuSample {
                        frame_id: "imu_link".into(),
                        orientation: Some(orientation),
                        angular_velocity_radps: Vector3::new(0.0, 0.0, angular),
                        linear_acceleration_mps2: Vector3::new(0.0, 0.0, 9.81),
                        stamp_s,
                        received: now,
                    });
                    latest.joint_states = Some(stamped(joints_at_rest(), "", stamp_s, now));
                    latest.contacts = Some(stamped(Contacts::default(), "bumper", stamp_s, now));
                    latest.depth =
                        Some(stamped(depth_image(), "camera_optical_frame", stamp_s, now));
                    latest.depth_info =
                        Some(stamped(camera_info(16, 12), "camera_optical_frame", stamp_s, now));
                    if camera_on.load(Ordering::Relaxed) {
                        latest.camera = Some(stamped(
                            CameraFrame::Raw(red_blue_frame()),
                            "camera_optical_frame",
                            stamp_s,
                            now,
                        ));
                        latest.camera_info = Some(stamped(
                            camera_info(CAMERA_WIDTH, CAMERA_HEIGHT),
                            "camera_optical_frame",
                            stamp_s,
                            now,
                        ));
                    }
                }
                for sensor in [
                    Sensor::Odometry,
                    Sensor::Imu,
                    Sensor::JointStates,
                    Sensor::Bumper,
                    Sensor::Depth,
                    Sensor::DepthInfo,
                ] {
                    samples.delivered(sensor, stamp_s);
                }
                if camera_on.load(Ordering::Relaxed) {
                    samples.delivered(Sensor::Camera, stamp_s);
                    samples.delivered(Sensor::CameraInfo, stamp_s);
                }
            }
        })
    };
    let bridge = MovingBridge {
        bridge,
        pose,
        camera_on,
        admin_token: admin_token.clone(),
        stop,
        feeder: Some(feeder),
    };
    wait_until_usable(port, &["proprioception", "vision", "depth", "move"], admin_token);
    bridge
}

/// Waits until a session may call every one of `tools` (their sensors
/// fresh). A bridge that has just started lists every tool until its first
/// availability check (before the feeder's first samples), so the tools
/// must stay usable over a few checks.
fn wait_until_usable(port: u16, tools: &[&str], token: Option<String>) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut usable_since: Option<Instant> = None;
        loop {
            let stream = aicc_agent::client::transport::connect(
                "127.0.0.1",
                port,
                None,
                Duration::from_secs(5),
            )
            .await
            .expect("connecting to the bridge");
            let options =
                aicc_agent::client::SessionOptions { token: token.clone(), ..Default::default() };
            let session =
                aicc_agent::client::Session::open(stream, options).await.expect("an AICC session");
            let missing: Vec<&str> = tools
                .iter()
                .copied()
                .filter(|tool| session.manifest().permits(tool).is_err())
                .collect();
            let _ = session.close().await;
            if !missing.is_empty() {
                usable_since = None;
            } else if usable_since.get_or_insert_with(Instant::now).elapsed()
                > Duration::from_millis(600)
            {
                return;
            }
            assert!(Instant::now() < deadline, "{missing:?} not usable within 15 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

fn stamped<T>(value: T, frame_id: &str, stamp_s: f64, received: Instant) -> Stamped<T> {
    Stamped { value, frame_id: frame_id.into(), stamp_s, received }
}

fn red_blue_frame() -> RawImage {
    let data = (0..CAMERA_HEIGHT)
        .flat_map(|_| {
            (0..CAMERA_WIDTH).flat_map(|x| {
                if x < CAMERA_WIDTH / 2 {
                    [200u8, 20, 20]
                } else {
                    [20, 20, 200]
                }
            })
        })
        .collect();
    RawImage {
        width: CAMERA_WIDTH,
        height: CAMERA_HEIGHT,
        encoding: "rgb8".into(),
        is_bigendian: false,
        step: CAMERA_WIDTH * 3,
        data,
    }
}

/// A wall 5 m away everywhere: nothing in the way.
fn depth_image() -> RawImage {
    let (width, height) = (16, 12);
    let data = (0..width * height).flat_map(|_| 5.0f32.to_le_bytes()).collect();
    RawImage { width, height, encoding: "32FC1".into(), is_bigendian: false, step: width * 4, data }
}

fn camera_info(width: u32, height: u32) -> CameraInfo {
    let focal = f64::from(width);
    CameraInfo {
        width,
        height,
        k: [focal, 0.0, f64::from(width) / 2.0, 0.0, focal, f64::from(height) / 2.0, 0.0, 0.0, 1.0],
    }
}

/// The Python of the venv with the MCP SDK (scripts/setup-mcp.sh makes it).
pub fn mcp_python() -> std::path::PathBuf {
    if let Some(python) = std::env::var_os("AICC_MCP_PYTHON") {
        return python.into();
    }
    let python =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps/mcp-venv/bin/python");
    assert!(python.exists(), "the MCP Python SDK is not installed at {}: run `bash scripts/setup-mcp.sh` (or set AICC_MCP_PYTHON)", python.display());
    python
}

/// The MCP host script.
pub fn host_script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/host.py")
}
